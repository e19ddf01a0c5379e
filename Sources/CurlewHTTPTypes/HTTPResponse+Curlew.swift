import Foundation
import HTTPTypes
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPResponse {
    /// The response `head` holds, with its fields in arrival order and repeated fields kept
    /// apart (each `Set-Cookie` its own field). Values keep the head's bytes: one that is not
    /// UTF-8 (Latin-1 `obs-text`) reads as U+FFFD through `HTTPField.value`, as swift-http-types
    /// decodes it, and `withUnsafeBytesOfValue` gives the server's bytes. (A head answered by
    /// the response cache holds its values as text: U+FFFD there.) A
    /// field name that is not a valid token, or a status outside 100...999, cannot come from
    /// Curlew's parser; such a field is skipped.
    public init(_ head: HTTPResponseHead) {
        var fields = HTTPFields()
        fields.reserveCapacity(head.fieldCount)
        head.forEachFieldBytes { name, value in
            guard let fieldName = HTTPField.Name(String(decoding: name, as: UTF8.self)) else { return }
            fields.append(HTTPField(name: fieldName, lenientValue: value))
        }
        let status = HTTPResponse.Status(code: Swift.min(999, Swift.max(100, head.statusCode)), reasonPhrase: head.reasonPhrase ?? "")
        self.init(status: status, headerFields: fields)
    }

    /// The response Foundation's `response` describes. Its fields come from a dictionary:
    /// order is not known (sorted by name) and repeated fields arrive combined. Prefer
    /// ``init(_:)-(HTTPResponseHead)`` where the head is at hand.
    public init(_ response: HTTPURLResponse) {
        if let head = HTTPResponseHead(response) {
            self.init(head)
            // The dictionary's order changes from run to run: sorted, as documented.
            headerFields = HTTPFields(headerFields.sorted { $0.name.canonicalName < $1.name.canonicalName })
            return
        }
        self.init(status: .init(code: Swift.min(999, Swift.max(100, response.statusCode))))
    }
}

extension HTTPResponseHead {
    /// A head for `response` at `url`: the status, reason phrase and fields in order, each
    /// value's bytes as the field holds them (a Latin-1 byte stays that byte).
    public convenience init(_ response: HTTPResponse, url: URL) {
        var bytes: [UInt8] = []
        var offsets: [Int32] = []
        for field in response.headerFields {
            offsets.append(Int32(clamping: bytes.count))
            bytes.append(contentsOf: field.name.rawName.utf8)
            offsets.append(Int32(clamping: bytes.count))
            field.withUnsafeBytesOfValue { bytes.append(contentsOf: $0) }
            offsets.append(Int32(clamping: bytes.count))
        }
        self.init(
            url: url, statusCode: response.status.code, httpVersion: "HTTP/1.1",
            reasonPhrase: response.status.reasonPhrase.isEmpty ? nil : response.status.reasonPhrase,
            fieldBytes: bytes, offsets: offsets)
    }
}
