import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates the response and decodes the body as text.
///
/// The encoding is ``encoding`` when set, else the one a byte order mark at the start of the
/// body names (UTF-8, UTF-16 BE or LE; the mark is not part of the text), else the `charset`
/// of the `Content-Type` header; with none of these, UTF-8 is tried and ISO-8859-1 (HTTP/1.1's historical default, which never fails)
/// is the fallback. Text that is not valid in a named encoding throws
/// ``SerializationError/invalidBody(_:response:data:underlying:)``, and so does a body in a
/// charset Curlew does not decode (GBK, Big5...) unless its bytes are valid UTF-8. Empty bodies follow
/// Alamofire: `""` for 204/205 and `HEAD`, ``SerializationError/emptyResponseBody(response:)``
/// otherwise.
public struct StringResponseSerializer: ResponseSerialization {
    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes: IndexSet = ResponseValidation.defaultStatusCodes
    /// The MIME types that pass validation; nil (any) by default.
    public var acceptableContentTypes: Set<String>?
    /// The encoding to use whatever the response says; nil by default.
    public var encoding: String.Encoding?
    /// Status codes for which an empty body is valid; 204 and 205.
    public var emptyResponseCodes: Set<Int> = ResponseValidation.defaultEmptyResponseCodes
    /// Request methods for which an empty body is valid; `HEAD`.
    public var emptyRequestMethods: Set<String> = ResponseValidation.defaultEmptyRequestMethods

    /// A serializer that reads the charset from the response.
    public init() {}

    /// Throws when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try ResponseValidation.validate(
            response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// Validates and decodes; the request is unknown, so only the status code can allow an empty body.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> String {
        try responseObject(for: nil, response: response, data: data)
    }

    /// Validates and decodes the text.
    public func responseObject(for request: URLRequest?, response: HTTPURLResponse?, data: Data?) throws -> String {
        if let response { try validate(response, data: data) }
        guard let data, !data.isEmpty else {
            let allowed = ResponseValidation.emptyResponseAllowed(
                request: request, response: response, codes: emptyResponseCodes, methods: emptyRequestMethods)
            if allowed { return "" }
            throw SerializationError.emptyResponseBody(response: response)
        }
        // A byte order mark names the encoding whatever the label says (WHATWG Encoding,
        // "decode"), and is not part of the text; an encoding the caller set wins over both.
        if encoding == nil, let (marked, length) = Self.byteOrderMark(data) {
            guard let text = String(data: data.dropFirst(length), encoding: marked) else {
                throw SerializationError.invalidBody(
                    .string, response: response, data: data,
                    underlying: CocoaError(.fileReadInapplicableStringEncoding,
                                           userInfo: ["NSDebugDescription": "The body after its byte order mark is not valid \(marked)"]))
            }
            return text
        }
        let label = encoding == nil ? response.flatMap(ResponseValidation.charset(of:)) : nil
        let named = encoding ?? label.flatMap(CharacterEncodingName.encoding(forCharset:))
        if let label, named == nil {
            // A charset Curlew cannot decode (GBK, Big5, KOI8-R...): UTF-8 when the bytes are
            // (a mislabelled or pure-ASCII body), else an error naming it, rather than the
            // Latin-1 fallback's mojibake, which no caller could tell from the text.
            if let text = String(data: data, encoding: .utf8) { return text }
            throw SerializationError.invalidBody(
                .string, response: response, data: data,
                underlying: CocoaError(.fileReadUnknownStringEncoding,
                                       userInfo: ["NSDebugDescription": "The body's charset '\(label)' is not one Curlew decodes"]))
        }
        if let named {
            guard let text = String(data: data, encoding: named) else {
                throw SerializationError.invalidBody(
                    .string, response: response, data: data,
                    underlying: CocoaError(.fileReadInapplicableStringEncoding,
                                           userInfo: ["NSDebugDescription": "The body is not valid \(named)"]))
            }
            return text
        }
        if let text = String(data: data, encoding: .utf8) { return text }
        // ISO-8859-1 maps every byte to the Unicode scalar of the same value.
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: data.map { Unicode.Scalar($0) })
        return String(scalars)
    }

    /// The encoding a byte order mark at the start of `data` names, and the mark's length.
    /// A UTF-32 mark is read first, when the body is whole 4-byte units: `FF FE 00 00` was read
    /// as UTF-16LE's mark followed by a NUL, and the rest decoded as UTF-16 (`A` came out as
    /// `\0A\0`).
    static func byteOrderMark(_ data: Data) -> (String.Encoding, Int)? {
        let head = Array(data.prefix(4))
        if head == [0xFF, 0xFE, 0x00, 0x00], data.count % 4 == 0 { return (.utf32LittleEndian, 4) }
        if head == [0x00, 0x00, 0xFE, 0xFF], data.count % 4 == 0 { return (.utf32BigEndian, 4) }
        if head.count >= 3, head[0] == 0xEF, head[1] == 0xBB, head[2] == 0xBF { return (.utf8, 3) }
        if head.count >= 2, head[0] == 0xFE, head[1] == 0xFF { return (.utf16BigEndian, 2) }
        if head.count >= 2, head[0] == 0xFF, head[1] == 0xFE { return (.utf16LittleEndian, 2) }
        return nil
    }
}
