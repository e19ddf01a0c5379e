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
/// A download of a byte range (the request had its own `Range: bytes=first-last`) keeps that
/// range in ``rangeFirst`` and ``rangeLast``: the resumed request asks for the rest of it only.
///
/// Format: a JSON object with the fields below. Version 1 is a download of the whole body;
/// version 2 adds the byte range (written only when there is one, so a Curlew that reads only
/// version 1 refuses a range it would ignore instead of misreading it); version 3 adds
/// ``handlesCookies`` (written only when false, so a Curlew that would send the cookie jar's
/// cookies anyway refuses it). Data of an unknown
/// version, or that is not this JSON at all, is refused with `SessionError.invalidResumeData`.
public struct DownloadResumeData: Codable, Sendable, Equatable {
    /// The newest format version this Curlew reads and writes (it reads every older one).
    public static let currentVersion = 3

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
    /// The full body length (for a range: the range's length), when the server announced it.
    public var expectedLength: Int64?
    /// For a download of a byte range: the position, in the whole representation, of the
    /// partial file's first byte (nil: the file starts at byte 0 of the whole body).
    public var rangeFirst: Int64?
    /// For a download of a byte range: the last position asked for, inclusive (nil: to the
    /// end). Needs ``rangeFirst``.
    public var rangeLast: Int64?
    /// False when the request did not use the cookie jar (`httpShouldHandleCookies`): the
    /// resumed request does not either (written as version 3). Nil (data written before this
    /// field, or by hand): it does, as a new `URLRequest` does.
    public var handlesCookies: Bool?

    /// Creates resume data; Curlew makes these for you (see `cancel(byProducingResumeData:)`).
    public init(
        url: URL, headers: [String: String], timeoutInterval: TimeInterval, partialFileURL: URL,
        bytesReceived: Int64, entityTag: String?, lastModified: String?, expectedLength: Int64?,
        rangeFirst: Int64? = nil, rangeLast: Int64? = nil
    ) {
        version = rangeFirst == nil && rangeLast == nil ? 1 : 2
        self.url = url
        self.headers = headers
        self.timeoutInterval = timeoutInterval
        self.partialFileURL = partialFileURL
        self.bytesReceived = bytesReceived
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.expectedLength = expectedLength
        self.rangeFirst = rangeFirst
        self.rangeLast = rangeLast
    }

    /// The header fields resume data keeps of `request`: all but the range fields, which go in
    /// ``rangeFirst`` and ``rangeLast`` (resuming asks for the rest of the range itself).
    package static func resumedHeaders(of request: URLRequest) -> [String: String] {
        var headers = request.allHTTPHeaderFields ?? [:]
        for name in headers.keys where ["range", "if-range"].contains(name.lowercased()) { headers[name] = nil }
        return headers
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
        // A byte range needs version 2: a reader of version 1 would ask for the wrong bytes.
        var written = self
        if rangeFirst != nil || rangeLast != nil { written.version = max(version, 2) }
        // Kept off the cookie jar needs version 3: a reader of 2 would send the jar's cookies.
        if handlesCookies == false { written.version = max(written.version, 3) }
        // Encoding plain strings, numbers and URLs cannot fail; an empty Data would be refused
        // by `init(encoded:)` rather than misread.
        return (try? encoder.encode(written)) ?? Data()
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
        request.httpShouldHandleCookies = handlesCookies ?? true
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    private func validate() throws(SessionError) {
        guard (1...Self.currentVersion).contains(version) else {
            throw .invalidResumeData("version \(version) is not one this Curlew reads (it reads 1 to \(Self.currentVersion))")
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .invalidResumeData("the URL '\(url.absoluteString)' is not http or https")
        }
        guard partialFileURL.isFileURL else { throw .invalidResumeData("the partial file is not a file URL") }
        guard bytesReceived >= 0, expectedLength.map({ $0 >= 0 }) ?? true else {
            throw .invalidResumeData("negative byte counts")
        }
        if rangeFirst != nil || rangeLast != nil {
            guard let first = rangeFirst, first >= 0, rangeLast.map({ $0 >= first }) ?? true,
                !first.addingReportingOverflow(bytesReceived).overflow
            else {
                throw .invalidResumeData("the byte range \(rangeFirst.map(String.init) ?? "")-\(rangeLast.map(String.init) ?? "") is not a byte range")
            }
            // Both are checked non-negative: no subtraction here can overflow.
            if let last = rangeLast, bytesReceived > 0, bytesReceived - 1 > last - first {
                throw .invalidResumeData("\(bytesReceived) bytes received of the range \(first)-\(last)")
            }
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
