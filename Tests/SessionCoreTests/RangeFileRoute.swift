import CurlewTestSupport
import Foundation
import Synchronization

/// A TestServer route that serves a body as a static file server does: an entity tag,
/// `Accept-Ranges: bytes`, and `206 Partial Content` for `Range: bytes=N-` or `bytes=N-M` when
/// `If-Range` (if sent) matches. Tests change the body or tag mid-test to play a changed file,
/// make the route refuse ranges, or answer with an error status.
final class RangeFileRoute: Sendable {
    /// A way to fail one request (a lost connection), taken from ``State/faults`` in order.
    enum Fault {
        /// The answer announces its whole length but sends only this many body bytes, then closes.
        case cutAfter(Int)
        /// The connection closes before any answer.
        case closeWithoutAnswer
        /// The answer sends this many body bytes, then nothing for three seconds (a stalled
        /// server, for the client's idle timeout), then the rest.
        case stallAfter(Int)
    }

    struct State {
        var body: Data
        var entityTag: String
        /// Answer every range with 416 (as for a range past the end).
        var refusesRanges = false
        /// Answer every request with this status and a short text body (nil: serve the file).
        var errorStatus: Int?
        /// The `Range` and `If-Range` values of each request, in order.
        var rangeRequests: [(range: String?, ifRange: String?)] = []
        /// Faults for the next requests, one each, first first (before `errorStatus`).
        var faults: [Fault] = []
        /// When set, the whole body goes as these bytes with `Content-Encoding: gzip`, whatever
        /// the request's `Accept-Encoding` (a server storing its files compressed).
        var gzippedBody: Data?
    }

    let state: Mutex<State>

    /// Serves `body` at `path` in `chunkSize` pieces, each after `delay` (to leave time to
    /// cancel mid-body); `Content-Length` is always sent.
    init(server: TestServer, path: String, body: Data, entityTag: String = "\"v1\"",
         chunkSize: Int = 16 * 1024, delay: Duration = .zero) {
        state = Mutex(State(body: body, entityTag: entityTag))
        server.route(path) { [self] request in
            func header(_ name: String) -> String? {
                request.headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
            }
            let range = header("Range")
            let ifRange = header("If-Range")
            let (body, tag, refuses, errorStatus, fault, gzipped) = self.state.withLock { state in
                state.rangeRequests.append((range, ifRange))
                let fault = state.faults.isEmpty ? nil : state.faults.removeFirst()
                return (state.body, state.entityTag, state.refusesRanges, state.errorStatus, fault, state.gzippedBody)
            }
            if case .closeWithoutAnswer? = fault { return .fault(.closeImmediately) }
            if let errorStatus {
                let challenge: [(name: String, value: String)] = errorStatus == 401 ? [("WWW-Authenticate", "Basic realm=\"r\"")] : []
                return TestResponse(status: errorStatus, headers: challenge, body: Data("error \(errorStatus)".utf8))
            }
            var headers: [(name: String, value: String)] = [("ETag", tag), ("Accept-Ranges", "bytes")]
            let wholeOrRangeOfOtherTag = range == nil || (ifRange != nil && ifRange != tag)
            if let gzipped, wholeOrRangeOfOtherTag {
                headers.append(("Content-Encoding", "gzip"))
                return .stream([TestResponse.Chunk(gzipped, delay: .zero)], status: 200, headers: headers, framing: .contentLength)
            }
            var status = 200
            var start = 0
            var end = body.count
            if let range, range.hasPrefix("bytes="), ifRange == nil || ifRange == tag {
                let bounds = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                if bounds.count == 2, let first = Int(bounds[0]), bounds[1].isEmpty || Int(bounds[1]) != nil {
                    if refuses || first >= body.count || Int(bounds[1]).map({ $0 < first }) == true {
                        return TestResponse(status: 416, headers: [("Content-Range", "bytes */\(body.count)")], body: Data())
                    }
                    status = 206
                    start = first
                    end = min(body.count, Int(bounds[1]).map { $0 + 1 } ?? body.count)
                    headers.append(("Content-Range", "bytes \(first)-\(end - 1)/\(body.count)"))
                }
            }
            if case .cutAfter(let count)? = fault {
                headers.append(("Content-Length", String(end - start)))
                var cut = TestResponse(
                    status: status, headers: headers, body: .data(body.subdata(in: start..<min(end, start + count))),
                    framing: .contentLength, ending: .close)
                cut.keepAlive = false
                return cut
            }
            if case .stallAfter(let count)? = fault {
                let cut = min(end, start + count)
                return .stream(
                    [TestResponse.Chunk(body.subdata(in: start..<cut), delay: .zero),
                     TestResponse.Chunk(body.subdata(in: cut..<end), delay: .seconds(3))],
                    status: status, headers: headers, framing: .contentLength)
            }
            let part = body.subdata(in: start..<end)
            let chunks = stride(from: 0, to: part.count, by: chunkSize).map { offset in
                TestResponse.Chunk(part.subdata(in: offset..<min(offset + chunkSize, part.count)), delay: delay)
            }
            return .stream(chunks, status: status, headers: headers, framing: .contentLength)
        }
    }

    var rangeRequests: [(range: String?, ifRange: String?)] { state.withLock { $0.rangeRequests } }
}

/// Bytes that differ at every offset (so a misplaced byte range shows).
func patternedData(count: Int, seed: UInt8 = 0) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8 &+ Int(seed)) })
}
