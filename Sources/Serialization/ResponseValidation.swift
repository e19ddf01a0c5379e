import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The checks every response serializer shares (AFNetworking's `validateResponse:data:error:`).
enum ResponseValidation {
    /// The status codes AFNetworking accepts by default: 200..<300.
    static let defaultStatusCodes = IndexSet(integersIn: 200..<300)

    /// The status codes whose empty body is valid (Alamofire's `emptyResponseCodes`).
    static let defaultEmptyResponseCodes: Set<Int> = [204, 205]

    /// The request methods whose empty body is valid (Alamofire's `emptyRequestMethods`).
    static let defaultEmptyRequestMethods: Set<String> = ["HEAD"]

    /// Throws when the status code is not acceptable, then when the MIME type is not acceptable.
    /// As in AFNetworking, the content type is only checked when there is a body: an empty
    /// 204 labelled `text/html` is fine. A response without a MIME type whose body is only
    /// whitespace (the single space of Rails' `head :ok`) passes too.
    static func validate(
        _ response: HTTPURLResponse, data: Data?, statusCodes: IndexSet, contentTypes: Set<String>?
    ) throws {
        guard statusCodes.contains(response.statusCode) else {
            throw SerializationError.unacceptableStatusCode(response.statusCode, response: response, data: data)
        }
        if let contentTypes, let data, !data.isEmpty {
            let mimeType = self.mimeType(of: response)
            if let mimeType {
                let accepted = contentTypes.contains { acceptableMediaType($0) == mimeType }
                if !accepted {
                    throw SerializationError.unacceptableContentType(
                        mimeType, acceptable: contentTypes, response: response, data: data)
                }
            } else if !isEmptyOrWhitespace(data) {
                throw SerializationError.unacceptableContentType(
                    nil, acceptable: contentTypes, response: response, data: data)
            }
        }
    }

    /// The value of a response header, looked up without regard to case.
    /// ``validate(_:data:statusCodes:contentTypes:)`` from a response head: the same checks,
    /// and Foundation's response is built only for the error when one is thrown.
    static func validate(
        head: HTTPResponseHead, data: Data?, statusCodes: IndexSet, contentTypes: Set<String>?
    ) throws {
        var acceptable = statusCodes.contains(head.statusCode)
        if acceptable, let contentTypes, let data, !data.isEmpty {
            if let mimeType = head.mimeType {
                acceptable = contentTypes.contains { acceptableMediaType($0) == mimeType }
            } else {
                acceptable = isEmptyOrWhitespace(data)
            }
        }
        guard !acceptable else { return }
        guard let response = head.httpURLResponse else {
            throw SerializationError.invalidBody(
                .string, response: nil, data: data, underlying: CocoaError(.coderInvalidValue))
        }
        try validate(response, data: data, statusCodes: statusCodes, contentTypes: contentTypes)
    }

    static func header(_ name: String, in response: HTTPURLResponse) -> String? {
        let lowered = name.lowercased()
        for (key, value) in response.allHeaderFields {
            if let key = key as? String, key.lowercased() == lowered { return value as? String }
        }
        return nil
    }

    /// The MIME type of the `Content-Type` header, lowercased, without parameters.
    /// An acceptable-content-types entry as the response's media type is compared with it:
    /// lower-cased, without parameters or spaces. An entry written with its charset
    /// (`application/json; charset=utf-8`) refused every response, whose media type is
    /// compared without its parameters.
    /// The entry's own parameters are not compared (a charset in it accepts any charset).
    static func acceptableMediaType(_ entry: String) -> String {
        guard entry.utf8.contains(where: { $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: " ") }) else {
            return entry.lowercased()
        }
        let type = entry.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return type.trimmingCharacters(in: .whitespaces).lowercased()
    }

    static func mimeType(of response: HTTPURLResponse) -> String? {
        guard let contentType = header("Content-Type", in: response) else { return nil }
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return type.isEmpty ? nil : type
    }

    /// The `charset` parameter of the `Content-Type` header, lowercased, without quotes.
    static func charset(of response: HTTPURLResponse) -> String? {
        guard let contentType = header("Content-Type", in: response) else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pieces = parameter.split(separator: "=", maxSplits: 1)
            guard pieces.count == 2,
                  pieces[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset"
            else { continue }
            let value = pieces[1].trimmingCharacters(in: .whitespaces)
                .trimmingCharacters(in: CharacterSet(charactersIn: "\"'")).lowercased()
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// True for nil data, empty data, and data made only of JSON whitespace.
    static func isEmptyOrWhitespace(_ data: Data?) -> Bool {
        guard let data else { return true }
        return data.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    }

    /// Alamofire's rule: an empty body is valid for the configured status codes and request methods.
    static func emptyResponseAllowed(
        request: URLRequest?, response: HTTPURLResponse?, codes: Set<Int>, methods: Set<String>
    ) -> Bool {
        if let method = request?.httpMethod?.uppercased(), methods.contains(method) { return true }
        if let response, codes.contains(response.statusCode) { return true }
        return false
    }
}
