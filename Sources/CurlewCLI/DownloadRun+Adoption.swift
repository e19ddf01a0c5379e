import Foundation
import Serialization
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

extension DownloadRun {
    /// What `--continue` makes of a FILE that exists without resume data.
    enum Adoption {
        /// The file already has every byte the server announces.
        case complete(Int64)
        /// Resume data continuing the file, now at `partial` (Curlew's own name for it).
        case resume(Data, partial: URL)
    }

    /// Continues a partial file curlew did not keep resume data for (a download by another
    /// tool, or one killed outright), as curl's `-C -` and HTTPie's `--continue` do.
    ///
    /// A HEAD request gives the server's length and validator (`ETag`, else `Last-Modified`).
    /// The file then takes Curlew's partial-file name in its directory and becomes resume data
    /// for `downloadTask(withResumeData:)`, which asks for the rest with `Range` and
    /// `If-Range`. Like curl and HTTPie, this trusts that the file holds the first bytes of
    /// what the server has now; the validator at least makes a server whose file changes from
    /// now on send it whole. Without a validator nothing is touched.
    static func adopt(_ file: URL, request: URLRequest, manager: URLSessionManager) async throws -> Adoption {
        let size = ((try? FileManager.default.attributesOfItem(atPath: file.path)[.size]) as? NSNumber)?.int64Value ?? 0
        var probe = request
        probe.httpMethod = "HEAD"
        let response = await Exchange.send(BuiltRequest(request: probe), manager: manager)
        if let error = response.error { throw ToolFailure(transferError: error) }
        guard let head = response.head, (200..<300).contains(head.statusCode) else {
            let status = response.head?.statusCode ?? 0
            throw ToolFailure(ExitStatus.forStatus(status) ?? .error, "HTTP \(status) to HEAD: \(file.lastPathComponent) is left as it is")
        }
        let expected = head.expectedContentLength
        if expected >= 0 && size == expected { return .complete(size) }
        if expected >= 0 && size > expected {
            throw ToolFailure(.error, "\(file.lastPathComponent) (\(size) bytes) is larger than the server's file (\(expected) bytes): left as it is")
        }
        let entityTag = head.value(forHTTPHeaderField: "ETag")
        let lastModified = head.value(forHTTPHeaderField: "Last-Modified")
        guard entityTag != nil || lastModified != nil else {
            throw ToolFailure(.error, "the server sends no ETag or Last-Modified, so \(file.lastPathComponent) cannot be continued safely: left as it is")
        }
        guard let url = request.url else { throw ToolFailure(.error, "the request has no URL") }
        let partial = DownloadResumeData.newPartialFileURL(in: file.deletingLastPathComponent())
        guard rename(file.path, partial.path) == 0 else {
            throw ToolFailure(.error, "cannot continue \(file.path): \(String(cString: strerror(errno)))")
        }
        let resume = DownloadResumeData(
            url: url, headers: request.allHTTPHeaderFields ?? [:], timeoutInterval: request.timeoutInterval,
            partialFileURL: partial, bytesReceived: size, entityTag: entityTag, lastModified: lastModified,
            expectedLength: expected >= 0 ? expected : nil)
        return .resume(resume.encoded(), partial: partial)
    }
}
