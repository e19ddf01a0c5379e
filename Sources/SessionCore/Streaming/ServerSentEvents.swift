import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The events of a `text/event-stream` resource, from `URLSessionManager.events(for:)`:
/// parsed as the WHATWG EventSource specification says, reconnecting after a dropped
/// connection as long as the consumer iterates.
///
/// Each connection sends `Accept: text/event-stream` and the event ID in force as
/// `Last-Event-ID` (the request's own until the server sends one). After a clean close or a cut mid-body (a half-received event is
/// discarded), or a connection that could not be made, the iterator waits the server's last
/// `retry:` value (3 s by default) and connects again. Attempts that fail in a row (no
/// connection, or one that ended before it brought a byte) double the wait each time, from at
/// least 100 ms, and connections in a row that end without an event (a heartbeat and a close)
/// wait at least 100 ms, doubling up to 6.4 s: a server that asks for `retry: 0` and then hangs
/// up at once, or after a comment, is not hit in a loop. A 204 ends the sequence without an
/// error; another status than 200, or a content type other than `text/event-stream`, ends it
/// with ``ResponseStreamError`` and no reconnection. Cancelling the consuming task, or
/// leaving the loop, closes the connection. Each iterator runs its own connection.
///
/// Only a request with an idempotent method (GET, the EventSource's, or HEAD, PUT, DELETE,
/// OPTIONS, TRACE) is sent again on its own. A POST's stream (a generation API's) ends when
/// the server closes it, and a cut or a failed connection ends it with the error: sent again,
/// the request would run a second time on the server (the manager's `requestRetrier` decides
/// about failed attempts as for any request). Invalidating or resetting the manager ends a
/// stream waiting to reconnect at once, with `SessionError.sessionInvalidated`.
public struct ServerSentEvents: AsyncSequence, Sendable {
    /// One dispatched event.
    public typealias Element = ServerSentEvent

    let manager: URLSessionManager
    let request: URLRequest
    /// The wait before reconnecting when the server gave no `retry:`, in milliseconds.
    public var defaultRetryInterval: Int = 3000
    /// The most bytes one event's data may reach before its blank line; no line of the
    /// stream (an `id:`, an `event:`, a comment) may be longer either.
    public var maximumEventSize: Int = 16 << 20

    init(manager: URLSessionManager, request: URLRequest) {
        self.manager = manager
        self.request = request
    }

    /// Starts reading; the first connection is made on the first `next()`.
    public func makeAsyncIterator() -> Iterator { Iterator(self) }

    /// Connects, reads, and reconnects.
    public struct Iterator: AsyncIteratorProtocol {
        private let source: ServerSentEvents
        private var parser: ServerSentEventParser
        /// Lines up to the event's limit and a field name: an `id:` or `event:` line is held to
        /// it too (an `id:` of 16 MiB would go back as a `Last-Event-ID` header), and a `data:`
        /// line may reach it when it is set above 16 MiB.
        private var splitter: LineSplitter
        private var chunks: ResponseBytes.Iterator?
        private var ready: [ServerSentEvent] = []
        private var readyIndex = 0
        private var isDone = false
        /// A connection was made before: the next one waits the retry interval first.
        private var reconnects = false
        /// Connection attempts in a row that failed (no connection, or one that ended before
        /// its first byte): the wait doubles with each (up to 64x). Internal for the tests.
        private(set) var failures = 0
        /// The current connection brought a byte of body (an event, a comment, a heartbeat):
        /// its end is not a failure, and the failures before it are forgiven.
        private var connectionBroughtBytes = false
        /// Connections in a row that brought bytes but no event (comments, a heartbeat, a
        /// half event) before they ended: each doubles a floor under the wait, from 100 ms
        /// (`reconnectionDelay`). Internal for the tests.
        private(set) var eventlessConnections = 0
        /// The current connection dispatched an event.
        private var connectionDispatched = false
        /// The wait before the last reconnection, in milliseconds. Internal for the tests.
        private(set) var lastReconnectionDelay = 0
        /// What ended the stream after the events in `ready`: thrown once they were handed out.
        private var pendingFailure: ResponseStreamError?
        /// Whether the request may be sent again on the iterator's own (an idempotent method).
        private let mayReconnect: Bool
        /// The manager's session at the first connection (`SessionEngine.sessionGeneration`):
        /// the stream ends with it.
        private var generation = 0

        init(_ source: ServerSentEvents) {
            self.source = source
            let eventLimit = Swift.max(1, source.maximumEventSize)
            splitter = LineSplitter(maximumLineLength: eventLimit > Int.max - 64 ? Int.max : eventLimit + 64)
            // The caller's own `Last-Event-ID` is the ID in force until the server sets one
            // (an `id` without a value clears it, and then none is sent).
            parser = ServerSentEventParser(
                maximumEventSize: source.maximumEventSize,
                lastEventID: source.request.value(forHTTPHeaderField: "Last-Event-ID") ?? "")
            mayReconnect = PreparedRequest.idempotentMethods.contains(source.request.httpMethod ?? "GET")
        }

        /// The next event; nil after a 204 or once the iterator ended.
        public mutating func next() async throws -> ServerSentEvent? {
            while true {
                if readyIndex < ready.count {
                    defer { readyIndex += 1 }
                    return ready[readyIndex]
                }
                ready.removeAll(keepingCapacity: true)
                readyIndex = 0
                if let failure = pendingFailure {
                    pendingFailure = nil
                    isDone = true
                    chunks = nil
                    throw failure
                }
                guard !isDone else { return nil }
                do {
                    try await readMore()
                } catch {
                    isDone = true
                    chunks = nil
                    throw error
                }
            }
        }

        /// Connects when needed, then parses one chunk into `ready` (maybe nothing).
        private mutating func readMore() async throws {
            guard var current = chunks else {
                if reconnects {
                    let delay = Self.reconnectionDelay(
                        retry: parser.reconnectionTime ?? source.defaultRetryInterval, failures: failures,
                        eventlessConnections: eventlessConnections)
                    lastReconnectionDelay = delay
                    try await waitBeforeReconnecting(milliseconds: delay)
                } else {
                    generation = source.manager.engine.currentSessionGeneration
                }
                reconnects = true
                chunks = try await connect()
                // A connection made counts only once it brings something (`dropConnection`).
                if chunks == nil && !isDone { failures += 1 }
                return
            }
            let chunk: Data?
            do {
                chunk = try await current.next()
                chunks = current
            } catch let error as SessionError where Self.reconnects(after: error) && mayReconnect {
                // Cut mid-body: reconnect, as after a clean close.
                dropConnection()
                return
            }
            guard let chunk else {
                dropConnection()
                if !mayReconnect { isDone = true }  // the server ended it: no second run
                return
            }
            if !connectionBroughtBytes {
                connectionBroughtBytes = true
                failures = 0
            }
            // The events completed before a failure (a line or an event over its limit) are
            // handed out first; the failure then ends the sequence.
            let (lines, splitFailure) = splitter.pushKeepingLines(chunk)
            // A line over the splitter's limit is a field over the event's.
            let failure = splitFailure.map { error -> ResponseStreamError in
                guard case .lineTooLong = error else { return error }
                return .eventTooLarge(limit: Swift.max(1, source.maximumEventSize))
            }
            do throws(ResponseStreamError) {
                for line in lines {
                    if let event = try parser.consume(line: line) { ready.append(event) }
                }
                if !connectionDispatched, !ready.isEmpty {
                    connectionDispatched = true
                    eventlessConnections = 0
                }
                if let failure { throw failure }
            } catch {
                guard !ready.isEmpty else { throw error }
                pendingFailure = error
            }
        }

        /// Waits `milliseconds` before the next connection, or less: an invalidation or a
        /// reset of the manager ends the wait and the stream (`.sessionInvalidated`). Without
        /// that, the stream slept out the whole interval (up to a day) holding the manager,
        /// and after a reset connected on the new session with the old one's event ID.
        private func waitBeforeReconnecting(milliseconds: Int) async throws {
            let engine = source.manager.engine
            let generation = self.generation
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Task.sleep(nanoseconds: UInt64(milliseconds) * 1_000_000) }
                group.addTask { await engine.waitForSessionEnd(after: generation) }
                try await group.next()
                group.cancelAll()
            }
            if engine.currentSessionGeneration != generation { throw SessionError.sessionInvalidated }
            // The consumer's cancellation ends the wait through either child: always the
            // sleep's error, whichever finished first.
            try Task.checkCancellation()
        }

        /// Opens the stream; nil when this attempt failed in a way that reconnects. Throws
        /// for answers that end the sequence.
        private mutating func connect() async throws -> ResponseBytes.Iterator? {
            var request = source.request
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            // An ID that cannot be sent as a header value (a control character) is left out
            // rather than failing every reconnection; so is the caller's, once the server's ID
            // replaced it.
            request.setValue(nil, forHTTPHeaderField: "Last-Event-ID")
            if !parser.lastEventID.isEmpty, HTTPHeaderValidation.isValidValue(parser.lastEventID) {
                request.setValue(parser.lastEventID, forHTTPHeaderField: "Last-Event-ID")
            }
            let bytes: ResponseBytes
            let response: HTTPURLResponse
            do {
                (bytes, response) = try await source.manager.bytes(for: request, bufferSize: 256 << 10)
            } catch let error as SessionError where Self.reconnects(after: error) && mayReconnect {
                return nil  // no connection: try again after the retry interval
            }
            if response.statusCode == 204 {
                isDone = true
                return nil
            }
            guard response.statusCode == 200 else { throw ResponseStreamError.unexpectedStatus(response.statusCode) }
            let mimeType = response.mimeType?.lowercased()
            guard mimeType == "text/event-stream" else { throw ResponseStreamError.unexpectedContentType(mimeType) }
            return bytes.makeAsyncIterator()
        }

        /// The wait before a reconnection, in milliseconds: the server's `retry:` value (or the
        /// default), doubled for each failed attempt in a row so that a dead endpoint is not
        /// hit in a loop (up to 64 times), and at most a day. After a failure the wait is at
        /// least 100 ms before doubling: a `retry:` of 0 is the server's wish for a connection
        /// that worked, not for one that keeps failing. It saturates: a `retry:` of 2^62 ms or
        /// more is a day, never a product wrapped to zero or below (which would reconnect at
        /// once, again and again).
        ///
        /// Connections that brought bytes but no event before they ended put a floor under the
        /// wait: 100 ms after the first, doubled after each more (up to 6.4 s). A server that
        /// asked for `retry: 0` and then answers every connection with a heartbeat and a close
        /// was otherwise reconnected to at once, again and again (the bytes forgave the
        /// failures), while the stream's consumer saw nothing.
        static func reconnectionDelay(retry: Int, failures: Int, eventlessConnections: Int = 0) -> Int {
            let day = 86_400_000
            let failures = Swift.max(0, failures)
            let base = Swift.min(Swift.max(failures > 0 ? 100 : 0, retry), day)
            let delay = Swift.min(base << Swift.min(failures, 6), day)
            guard eventlessConnections > 0 else { return delay }
            return Swift.max(delay, 100 << Swift.min(eventlessConnections - 1, 6))
        }

        /// The failures a reconnection can cure: the network's (the EventSource "network
        /// error", a TLS handshake the connection's end cut among them), a response broken in its framing, a SOCKS proxy's failure to reach the
        /// origin (`CURLE_PROXY`) and a tunnel the proxy could not open (5xx). A refused policy,
        /// a bad URL, a pin or trust failure, a refusal by TLS itself, too many redirects, a cancellation, a tunnel the
        /// proxy refused (a 407's wrong password, sent again and again) and libcurl's other
        /// errors (memory that ran out) end the sequence with the error instead of a loop.
        static func reconnects(after error: SessionError) -> Bool {
            switch error {
            case .cannotConnect, .dnsFailure, .networkLost, .timedOut, .badServerResponse: return true
            case .curl(let code, _) where code == 97: return true  // CURLE_PROXY
            case .proxyRefusedTunnel(let status, _): return (500..<600).contains(status)
            default: return false
            }
        }

        private mutating func dropConnection() {
            // Accepted and closed before a byte (a server that hangs up at once): a failure.
            if !connectionBroughtBytes {
                failures += 1
            } else if !connectionDispatched {
                eventlessConnections += 1
            }
            connectionBroughtBytes = false
            connectionDispatched = false
            chunks = nil
            splitter.reset()
            parser.discardPendingEvent()
        }
    }
}

extension URLSessionManager {
    /// The server-sent events of `request`'s resource; see ``ServerSentEvents``. Nothing is
    /// sent until the sequence is iterated.
    public func events(for request: URLRequest) -> ServerSentEvents {
        ServerSentEvents(manager: self, request: request)
    }
}
