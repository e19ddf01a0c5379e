import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Encodes parameters as a JSON body with `Content-Type: application/json`
/// (AFNetworking's `AFJSONRequestSerializer`); `GET`, `HEAD` and `DELETE` still put them in the
/// URL query like ``HTTPRequestSerializer``.
///
/// Parameters are a ``JSONValue``, dictionaries and arrays of JSON-compatible values
/// (`String`, numbers, `Bool`, `NSNull` or nil), or any `Encodable` value. The top level must be
/// an object or an array unless ``writingOptions`` contains `.fragmentsAllowed`; anything else
/// throws ``SerializationError/invalidParameters(reason:underlying:)``. nil parameters mean no
/// body and no `Content-Type`, as in AFNetworking.
public struct JSONRequestSerializer: HTTPRequestSerializing {
    /// The shared HTTP settings.
    private var base = HTTPRequestSerializer()

    /// JSON writing options: `.prettyPrinted`, `.sortedKeys`, `.withoutEscapingSlashes` and
    /// `.fragmentsAllowed` are honoured; none by default.
    public var writingOptions: JSONSerialization.WritingOptions = []

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// A serializer with `writingOptions`.
    public init(writingOptions: JSONSerialization.WritingOptions) {
        self.writingOptions = writingOptions
    }

    /// The encoding of multipart text parts and query strings; UTF-8 by default.
    public var stringEncoding: String.Encoding {
        get { base.stringEncoding }
        set { base.stringEncoding = newValue }
    }
    /// The timeout of new requests; 60 seconds.
    public var timeoutInterval: TimeInterval {
        get { base.timeoutInterval }
        set { base.timeoutInterval = newValue }
    }
    /// The cache policy of new requests.
    public var cachePolicy: URLRequest.CachePolicy {
        get { base.cachePolicy }
        set { base.cachePolicy = newValue }
    }
    /// Whether new requests send and store cookies; true.
    public var httpShouldHandleCookies: Bool {
        get { base.httpShouldHandleCookies }
        set { base.httpShouldHandleCookies = newValue }
    }
    /// Methods whose parameters go into the URL query; `GET`, `HEAD`, `DELETE`.
    public var httpMethodsEncodingParametersInURI: Set<String> {
        get { base.httpMethodsEncodingParametersInURI }
        set { base.httpMethodsEncodingParametersInURI = newValue }
    }
    /// The default headers; `Accept-Language` and `User-Agent` to start with.
    public var httpRequestHeaders: [String: String] { base.httpRequestHeaders }
    /// How URL-query parameters become a query string.
    public var queryStringSerialization: QueryStringSerialization {
        get { base.queryStringSerialization }
        set { base.queryStringSerialization = newValue }
    }

    /// Sets (or, with nil, removes) a default header.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        base.setValue(value, forHTTPHeaderField: field)
    }

    /// Adds the default headers, then encodes `parameters` as JSON (or in the query for URI methods).
    public func request(bySerializing request: URLRequest, parameters: (any Sendable)?) throws -> URLRequest {
        if base.encodesParametersInURI(request) {
            return try base.request(bySerializing: request, parameters: parameters)
        }
        var request = try base.applyingDefaultHeaders(to: request)
        guard let parameters, let value = OptionalFlattening.unwrapped(parameters) else { return request }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        request.httpBody = try Self.jsonData(from: value, options: writingOptions)
        return request
    }

    /// The JSON encoding of request parameters.
    static func jsonData(from value: Any, options: JSONSerialization.WritingOptions) throws -> Data {
        let encoder = JSONEncoder()
        var formatting: JSONEncoder.OutputFormatting = []
        if options.contains(.prettyPrinted) { formatting.insert(.prettyPrinted) }
        if options.contains(.sortedKeys) { formatting.insert(.sortedKeys) }
        if options.contains(.withoutEscapingSlashes) { formatting.insert(.withoutEscapingSlashes) }
        encoder.outputFormatting = formatting
        let allowsFragments = options.contains(.fragmentsAllowed)

        let isCollection = value is JSONValue || ValueInspection.dictionary(value) != nil
            || ValueInspection.array(value) != nil
        if !isCollection, let encodable = value as? any Encodable {
            let data: Data
            do {
                data = try encoder.encode(encodable)
            } catch {
                throw SerializationError.invalidParameters(reason: "cannot encode \(type(of: value)) as JSON",
                                                           underlying: error)
            }
            let first = data.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
            if !allowsFragments, first != UInt8(ascii: "{"), first != UInt8(ascii: "[") {
                throw SerializationError.invalidParameters(
                    reason: "top-level JSON must be an object or an array (add .fragmentsAllowed)", underlying: nil)
            }
            return data
        }
        let json = try JSONValue(jsonObject: value)
        if !allowsFragments, json.objectValue == nil, json.arrayValue == nil {
            throw SerializationError.invalidParameters(
                reason: "top-level JSON must be an object or an array (add .fragmentsAllowed)", underlying: nil)
        }
        do {
            return try encoder.encode(json)
        } catch {
            throw SerializationError.invalidParameters(reason: "invalid JSON parameters", underlying: error)
        }
    }
}
