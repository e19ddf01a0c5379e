import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How ``HTTPRequestSerializer`` turns parameters into a query string
/// (AFNetworking's `AFHTTPRequestQueryStringSerializationStyle` or its block).
public enum QueryStringSerialization: Sendable {
    /// AFNetworking's default style: see ``queryString(from:)``.
    case defaultStyle
    /// A closure of your own, given the request and the parameters. The string is used as is
    /// (escape it yourself); an error it throws comes out of the serializer unchanged.
    case custom(@Sendable (URLRequest, any Sendable) throws -> String)
}
