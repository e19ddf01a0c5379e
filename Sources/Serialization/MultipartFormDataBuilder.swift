import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Collects multipart parts and turns them into a ``MultipartBodyStream``
/// (AFNetworking's `AFStreamingMultipartFormData`).
///
/// Not `Sendable`: it is created, filled and finalized on one thread, inside
/// ``HTTPRequestSerializing/multipartFormRequest(method:urlString:parameters:constructingBodyWith:)``.
final class MultipartFormDataBuilder: MultipartFormData {
    /// One part: its header lines and its body.
    struct Part {
        /// Header lines in order, values already escaped where needed.
        var headers: [(name: String, value: String)]
        /// Where the bytes come from.
        var body: MultipartBodyStream.Source
    }

    /// The boundary; replaced at finalization if an in-memory part happens to contain it.
    private(set) var boundary: String
    /// The encoding of parameter values turned into text parts.
    let stringEncoding: String.Encoding
    /// The parts in order.
    private(set) var parts: [Part] = []
    /// The first error of a non-throwing `appendPart` call, thrown at finalization.
    private var deferredError: SerializationError?
    /// Throttling: bytes per packet (nil: unthrottled) and the pause after each packet.
    private var packetSize: Int?
    private var delay: TimeInterval = 0

    /// A builder with a fresh random boundary.
    init(stringEncoding: String.Encoding) {
        self.stringEncoding = stringEncoding
        self.boundary = Self.makeBoundary()
    }

    /// `Curlew-Boundary-` and 48 hexadecimal digits: 192 bits from the system CSPRNG
    /// (`getrandom` on Linux). 64 characters, within RFC 2046's limit of 70.
    static func makeBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        var hex = ""
        for _ in 0..<3 {
            let word: UInt64 = generator.next()
            let digits = String(word, radix: 16)
            hex += String(repeating: "0", count: 16 - digits.count) + digits
        }
        return "Curlew-Boundary-" + hex
    }

    // MARK: MultipartFormData

    func appendPart(withFileURL fileURL: URL, name: String) throws {
        let ext = fileURL.pathExtension
        try appendPart(withFileURL: fileURL, name: name, fileName: fileURL.lastPathComponent,
                       mimeType: MIMETypeTable.mimeType(forPathExtension: ext))
    }

    func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws {
        guard fileURL.isFileURL else { throw SerializationError.multipartNotAFileURL(fileURL) }
        guard HTTPHeaderValidation.isValidValue(mimeType) else {
            throw SerializationError.invalidHeader(field: "Content-Type", value: mimeType)
        }
        let path = fileURL.path
        // stat(2) follows a symbolic link to the file it names (the attributes of
        // `FileManager.attributesOfItem` are the link's own, which refused a linked file).
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { throw SerializationError.multipartFileNotFound(fileURL) }
            throw SerializationError.multipartFileUnreadable(fileURL, reason: String(cString: strerror(errno)))
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw SerializationError.multipartFileUnreadable(fileURL, reason: "it is a directory")
        default: throw SerializationError.multipartFileUnreadable(fileURL, reason: "it is not a regular file")
        }
        guard access(path, R_OK) == 0 else {
            throw SerializationError.multipartFileUnreadable(fileURL, reason: "permission denied")
        }
        let identity = FileIdentity(status)
        parts.append(Part(headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                          body: .file(fileURL, length: identity.size, identity: identity)))
    }

    func appendPart(with inputStream: InputStream, name: String, fileName: String, length: Int64, mimeType: String) {
        if length < 0 {
            record(.invalidParameters(reason: "negative length \(length) for stream part \(name)", underlying: nil))
            return
        }
        checkValue(mimeType, field: "Content-Type")
        parts.append(Part(headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                          body: .stream(inputStream, length: length)))
    }

    func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String) {
        checkValue(mimeType, field: "Content-Type")
        parts.append(Part(headers: fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                          body: .bytes(data)))
    }

    func appendPart(withFormData data: Data, name: String) {
        let disposition = "form-data; name=\"\(Self.escapeQuoted(name))\""
        parts.append(Part(headers: [("Content-Disposition", disposition)], body: .bytes(data)))
    }

    func appendPart(withHeaders headers: [String: String], body: Data) {
        var lines: [(name: String, value: String)] = []
        for (field, value) in headers {
            guard HTTPHeaderValidation.isToken(field), HTTPHeaderValidation.isValidValue(value) else {
                record(.invalidHeader(field: field, value: value))
                return
            }
            lines.append((field, value))
        }
        lines.sort { lhs, rhs in
            let lhsFirst = lhs.name.lowercased() == "content-disposition"
            let rhsFirst = rhs.name.lowercased() == "content-disposition"
            if lhsFirst != rhsFirst { return lhsFirst }
            return lhs.name.lowercased() < rhs.name.lowercased()
        }
        parts.append(Part(headers: lines, body: .bytes(body)))
    }

    func throttleBandwidth(withPacketSize numberOfBytes: Int, delay: TimeInterval) {
        packetSize = max(1, numberOfBytes)
        self.delay = max(0, delay)
    }

    // MARK: Finalization

    /// The request with the body stream, `Content-Type` (with the boundary) and `Content-Length`.
    /// A builder without parts leaves the request unchanged (AFNetworking).
    func requestByFinalizingMultipartFormData(_ request: URLRequest) throws -> URLRequest {
        if let deferredError { throw deferredError }
        guard !parts.isEmpty else { return request }
        // A caller's stream part may claim any length (`Int64.max` for "unknown", say): the
        // sum must still be a length, with room for the boundaries and headers.
        var total: Int64 = 0
        for part in parts {
            let (sum, overflow) = total.addingReportingOverflow(part.body.length)
            guard !overflow, sum <= Int64.max / 2 else {
                throw SerializationError.invalidParameters(
                    reason: "the parts add up to more bytes than a Content-Length can say", underlying: nil)
            }
            total = sum
        }
        let stream = makeBodyStream()
        var request = request
        request.httpBody = nil
        request.httpBodyStream = stream
        request.setValue("multipart/form-data; boundary=\(stream.boundary)", forHTTPHeaderField: "Content-Type")
        request.setValue(String(stream.contentLength), forHTTPHeaderField: "Content-Length")
        return request
    }

    /// The body stream, after making sure no in-memory part contains the boundary.
    func makeBodyStream() -> MultipartBodyStream {
        var attempts = 0
        while boundaryOccursInMemoryParts() && attempts < 16 {
            boundary = Self.makeBoundary()
            attempts += 1
        }
        var sources: [MultipartBodyStream.Source] = []
        for (index, part) in parts.enumerated() {
            var head = index == 0 ? "--\(boundary)\r\n" : "\r\n--\(boundary)\r\n"
            for header in part.headers { head += "\(header.name): \(header.value)\r\n" }
            head += "\r\n"
            sources.append(.bytes(Data(head.utf8)))
            sources.append(part.body)
        }
        sources.append(.bytes(Data("\r\n--\(boundary)--\r\n".utf8)))
        return MultipartBodyStream(sources: sources, boundary: boundary, packetSize: packetSize, delay: delay)
    }

    /// True when the boundary appears in a header or an in-memory body.
    private func boundaryOccursInMemoryParts() -> Bool {
        let needle = Data(boundary.utf8)
        for part in parts {
            for header in part.headers where header.value.contains(boundary) || header.name.contains(boundary) {
                return true
            }
            if case .bytes(let data) = part.body, data.range(of: needle) != nil { return true }
        }
        return false
    }

    // MARK: Helpers

    /// `Content-Disposition` and `Content-Type` lines of a file part.
    private func fileHeaders(name: String, fileName: String, mimeType: String) -> [(name: String, value: String)] {
        [
            ("Content-Disposition",
             "form-data; name=\"\(Self.escapeQuoted(name))\"; filename=\"\(Self.escapeQuoted(fileName))\""),
            ("Content-Type", mimeType),
        ]
    }

    /// WHATWG's escaping of names in `multipart/form-data`: `"` → `%22`, CR → `%0D`, LF → `%0A`.
    static func escapeQuoted(_ string: String) -> String {
        var result = ""
        result.reserveCapacity(string.utf8.count)
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Records an invalid header value for finalization.
    private func checkValue(_ value: String, field: String) {
        if !HTTPHeaderValidation.isValidValue(value) { record(.invalidHeader(field: field, value: value)) }
    }

    /// Keeps the first deferred error.
    private func record(_ error: SerializationError) {
        if deferredError == nil { deferredError = error }
    }
}
