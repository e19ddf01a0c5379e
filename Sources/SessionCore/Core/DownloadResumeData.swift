import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a download needs to continue where it stopped: the bytes already on disk and the
/// validator that proves the server still has the same representation.
///
/// `cancel(byProducingResumeData:)` and `DownloadTask.resumeData` hand it out encoded as
/// `Data` (JSON, so it can be stored anywhere); `downloadTask(withResumeData:...)` takes that
/// `Data` back. The resumed request asks for the rest with `Range: bytes=N-` and
/// `If-Range: <validator>`: a server that still has the same bytes answers 206 and only the
/// rest is transferred; one whose representation changed (or that ignores ranges) answers 200
/// and the download starts again cleanly from byte 0.
///
/// The partial file lives in the download directory (`SessionConfiguration.downloadDirectory`)
/// under a name Curlew chose; it stays there until a resumed task uses it, so delete
/// ``partialFileURL`` if you throw the resume data away.
///
/// Format (version 1): a JSON object with the fields below. A future Curlew reads version 1;
/// data of an unknown version, or that is not this JSON at all, is refused with
/// `SessionError.invalidResumeData`.
public struct DownloadResumeData: Codable, Sendable, Equatable {
    /// The format version this Curlew writes.
    public static let currentVersion = 1

    /// The format version of this value.
    public var version: Int
    /// The URL the download asked for (the request's, before redirects).
    public var url: URL
    /// The request's header fields (without `Range` and `If-Range`, which resuming adds).
    public var headers: [String: String]
    /// The request's idle timeout, in seconds.
    public var timeoutInterval: TimeInterval
    /// The partial file holding the first ``bytesReceived`` bytes.
    public var partialFileURL: URL
    /// How many bytes of the body are in the partial file.
    public var bytesReceived: Int64
    /// The response's strong entity tag, when it had one (preferred as the validator).
    public var entityTag: String?
    /// The response's `Last-Modified` date, as sent.
    public var lastModified: String?
    /// The full body length, when the server announced it.
    public var expectedLength: Int64?

    /// Creates resume data; Curlew makes these for you (see `cancel(byProducingResumeData:)`).
    public init(
        url: URL, headers: [String: String], timeoutInterval: TimeInterval, partialFileURL: URL,
        bytesReceived: Int64, entityTag: String?, lastModified: String?, expectedLength: Int64?
    ) {
        version = Self.currentVersion
        self.url = url
        self.headers = headers
        self.timeoutInterval = timeoutInterval
        self.partialFileURL = partialFileURL
        self.bytesReceived = bytesReceived
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.expectedLength = expectedLength
    }

    /// Decodes and checks resume data.
    ///
    /// - Throws: `SessionError.invalidResumeData` when `data` is not resume data of a version
    ///   this Curlew reads, or its values cannot be used (no http(s) URL, a negative count,
    ///   no validator, a header that would corrupt the request).
    public init(encoded data: Data) throws(SessionError) {
        let decoded: DownloadResumeData
        do {
            decoded = try JSONDecoder().decode(DownloadResumeData.self, from: data)
        } catch {
            throw .invalidResumeData("not Curlew resume data (\(data.count) bytes that do not decode)")
        }
        try decoded.validate()
        self = decoded
    }

    /// The JSON form handed to callers.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain strings, numbers and URLs cannot fail; an empty Data would be refused
        // by `init(encoded:)` rather than misread.
        return (try? encoder.encode(self)) ?? Data()
    }

    /// The value sent in `If-Range` (RFC 9110 §13.1.5): a strong entity tag; the date only
    /// when there is no entity tag at all (a weak one rules resuming out).
    var validator: String? {
        if let entityTag { return entityTag.hasPrefix("W/") ? nil : entityTag }
        return lastModified
    }

    /// The request that resumes the download (without the range fields, which the engine adds).
    var request: URLRequest {
        var request = URLRequest(url: url)
        request.timeoutInterval = timeoutInterval
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    private func validate() throws(SessionError) {
        guard version == Self.currentVersion else {
            throw .invalidResumeData("version \(version) is not one this Curlew reads (it reads \(Self.currentVersion))")
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .invalidResumeData("the URL '\(url.absoluteString)' is not http or https")
        }
        guard partialFileURL.isFileURL else { throw .invalidResumeData("the partial file is not a file URL") }
        guard bytesReceived >= 0, expectedLength.map({ $0 >= 0 }) ?? true else {
            throw .invalidResumeData("negative byte counts")
        }
        guard let validator, !validator.isEmpty else {
            throw .invalidResumeData("no entity tag or Last-Modified date to resume against")
        }
        guard timeoutInterval.isFinite || timeoutInterval == .infinity, !timeoutInterval.isNaN else {
            throw .invalidResumeData("the timeout is not a number")
        }
        for (name, value) in headers.map({ ($0.key, $0.value) }) + [("If-Range", validator)] {
            guard HTTPHeaderValidation.isToken(name), HTTPHeaderValidation.isValidValue(value) else {
                throw .invalidResumeData("the header field '\(name)' cannot be sent")
            }
        }
    }
}
