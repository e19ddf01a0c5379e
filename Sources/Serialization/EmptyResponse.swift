/// A type that can stand for an empty response body (HTTP 204, 205, or the answer to a
/// `HEAD` request), as in Alamofire. ``DecodableResponseSerializer`` returns
/// ``emptyValue()`` instead of failing when such a response has no body.
public protocol EmptyResponse {
    /// The value that stands for "no body".
    static func emptyValue() -> Self
}
