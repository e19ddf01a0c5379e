import Foundation
import HTTPTypes
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPResponse {
    /// The response `head` holds, with its fields in arrival order and repeated fields kept
    /// apart (each `Set-Cookie` its own field). Values keep the bytes that arrived: one that
    /// is not UTF-8 (Latin-1 `obs-text`) reads as U+FFFD through `HTTPField.value`, as
    /// swift-http-types decodes it, and `withUnsafeBytesOfValue` gives the server's bytes. A
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
    /// A head for `response` at `url`: the status, reason phrase and fields in order.
    public convenience init(_ response: HTTPResponse, url: URL) {
        self.init(
            url: url, statusCode: response.status.code,
            reasonPhrase: response.status.reasonPhrase.isEmpty ? nil : response.status.reasonPhrase,
            fields: response.headerFields.map { ($0.name.rawName, $0.value) })
    }
}
