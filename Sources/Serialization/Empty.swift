/// The value of an empty response body: decode into `Empty` when a request returns nothing
/// (`DecodableResponseSerializer<Empty>`).
public struct Empty: Codable, Sendable, Hashable, EmptyResponse {
    /// The one `Empty` value.
    public static let value = Empty()

    /// Creates the empty value.
    public init() {}

    /// Returns ``value``.
    public static func emptyValue() -> Empty { value }
}
