import Foundation
import Serialization

/// A response kept by a ``ResponseCache``: its status, header fields and body, when it was
/// received, and the request header values its `Vary` names (so a request that differs in one
/// of them is not answered with it).
public struct CachedResponse: Sendable, Codable, Equatable {
    /// The URL the response answered.
    public var url: URL
    /// The status code.
    public var statusCode: Int
    /// The protocol from the status line.
    public var httpVersion: String
    /// Header fields in the order received.
    public var fields: [Field]
    /// The body.
    public var body: Data
    /// When the request that fetched (or last revalidated) it was sent.
    public var requestDate: Date
    /// When its response arrived.
    public var responseDate: Date
    /// The request's values of the fields named by `Vary` (lower-cased names; nil: absent).
    public var varyingRequestFields: [String: String?]
    /// Whose request it answered: a salted digest of the request's identity
    /// (`CacheIdentity.tag()`), never the credentials themselves; nil for an anonymous one.
    var identityTag: String?
    /// The private-cache partition of the manager it belongs to (a `private` response, or one
    /// to an authorized request, kept by a cache that one manager uses alone); nil when any
    /// manager may reuse it. Such entries stay in memory.
    var partition: UUID?
    /// The trust the answer was admitted under (`CacheTrust.tag`): a manager answers with the
    /// entry only under the same trust. `CacheTrust.anyTrust` for one a caller stored
    /// (`ResponseCache.storeCachedResponse(_:for:)`: the caller vouches for it), which answers
    /// under any. Nil for an answer no TLS check stood behind (plain `http`), and for one an
    /// older Curlew filed, which answers no lookup that has a trust.
    var trustTag: String?

    /// One header field.
    public struct Field: Sendable, Codable, Equatable {
        /// The name as received.
        public var name: String
        /// The value.
        public var value: String
    }

    /// Creates a cached response.
    public init(
        url: URL, statusCode: Int, httpVersion: String, fields: [Field], body: Data, requestDate: Date,
        responseDate: Date, varyingRequestFields: [String: String?]
    ) {
        self.url = url
        self.statusCode = statusCode
        self.httpVersion = httpVersion
        self.fields = fields
        self.body = body
        self.requestDate = requestDate
        self.responseDate = responseDate
        self.varyingRequestFields = varyingRequestFields
    }

    /// The first value of a field (ASCII case ignored; repeated fields joined with ", ").
    public func value(forHTTPHeaderField name: String) -> String? {
        let matches = fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        return matches.isEmpty ? nil : matches.joined(separator: ", ")
    }

    /// The head the task is answered with.
    var head: HTTPResponseHead {
        HTTPResponseHead(
            url: url, statusCode: statusCode, httpVersion: httpVersion, fields: fields.map { ($0.name, $0.value) })
    }

    /// The bytes this entry costs in memory (body and fields).
    var cost: Int { body.count + fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count } + 256 }
}
