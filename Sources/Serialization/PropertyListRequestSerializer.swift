import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Encodes parameters as a property-list body with `Content-Type: application/x-plist`
/// (AFNetworking's `AFPropertyListRequestSerializer`); `GET`, `HEAD` and `DELETE` still put
/// them in the URL query like ``HTTPRequestSerializer``.
///
/// Parameters are dictionaries and arrays of `String`, numbers, `Bool`, `Date` and `Data`, or
/// any `Encodable` value. nil inside the parameters and a dictionary whose keys are not strings
/// (anywhere in them) have no property-list form and throw
/// ``SerializationError/invalidParameters(reason:underlying:)``, naming where they are. nil
/// parameters mean no body and no `Content-Type`, as in AFNetworking. (An `Encodable` value
/// is encoded by `PropertyListEncoder`, which follows `Codable`'s rules for its dictionaries.)
public struct PropertyListRequestSerializer: HTTPRequestSerializing {
    /// The shared HTTP settings.
    private var base = HTTPRequestSerializer()

    /// The property-list format; `.xml` by default (`.binary` is the other writable one).
    public var format: PropertyListSerialization.PropertyListFormat = .xml
    /// Options for `PropertyListSerialization`; 0 (none) by default.
    public var writeOptions: PropertyListSerialization.WriteOptions = 0

    /// A serializer with AFNetworking's defaults.
    public init() {}

    /// A serializer writing `format`.
    public init(format: PropertyListSerialization.PropertyListFormat,
                writeOptions: PropertyListSerialization.WriteOptions = 0) {
        self.format = format
        self.writeOptions = writeOptions
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

    /// Adds the default headers, then encodes `parameters` as a property list (or in the query
    /// for URI methods).
    public func request(bySerializing request: URLRequest, parameters: (any Sendable)?) throws -> URLRequest {
        if base.encodesParametersInURI(request) {
            return try base.request(bySerializing: request, parameters: parameters)
        }
        var request = try base.applyingDefaultHeaders(to: request)
        guard let parameters, let value = OptionalFlattening.unwrapped(parameters) else { return request }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/x-plist", forHTTPHeaderField: "Content-Type")
        }
        request.httpBody = try propertyListData(from: value)
        return request
    }

    /// The property-list encoding of request parameters.
    private func propertyListData(from value: Any) throws -> Data {
        // A dictionary of any key type is a collection here, not an `Encodable`: the encoder
        // would turn `[Int: String]` keys into strings and a `[Bool: String]` into an array,
        // where AFNetworking's property-list encoder refuses keys that are not strings.
        let isCollection = value is JSONValue || ValueInspection.anyKeyDictionary(value) != nil
            || ValueInspection.array(value) != nil
        if !isCollection, ValueInspection.number(value) == nil, !(value is String), !(value is Data),
           !(value is Date), let encodable = value as? any Encodable {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = format
            do {
                return try encoder.encode(encodable)
            } catch {
                throw SerializationError.invalidParameters(
                    reason: "cannot encode \(type(of: value)) as a property list", underlying: error)
            }
        }
        let object = try PropertyListValue.foundationObject(from: value, path: "")
        do {
            return try PropertyListSerialization.data(fromPropertyList: object, format: format, options: writeOptions)
        } catch {
            throw SerializationError.invalidParameters(reason: "invalid property-list parameters", underlying: error)
        }
    }
}
