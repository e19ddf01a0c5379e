import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Encodes parameters into a request (AFNetworking's `AFURLRequestSerialization`).
public protocol RequestSerialization: Sendable {
    /// A copy of `request` with `parameters` encoded into it and the serializer's headers set.
    ///
    /// - Throws: ``SerializationError`` when the parameters cannot be encoded or a header holds
    ///   CR, LF or another control character; a custom query-string closure's error unchanged.
    func request(bySerializing request: URLRequest, parameters: (any Sendable)?) throws -> URLRequest
}

extension RequestSerialization {
    /// The same as the `(any Sendable)?` form, for dictionary literals: a mixed literal such as
    /// `["q": "curlew", "page": 2]` needs this parameter type to type-check as `Sendable`.
    public func request(bySerializing request: URLRequest, parameters: [String: any Sendable]?) throws -> URLRequest {
        let boxed: (any Sendable)? = parameters
        return try self.request(bySerializing: request, parameters: boxed)
    }
}
