import Foundation

/// The positional arguments of a request, sorted out: `[METHOD] URL [ITEM ...]`.
struct RequestLine: Equatable, Sendable {
    /// The method as given (upper-cased), nil when it was left out.
    var method: String?
    /// The URL, with the shorthands expanded.
    var url: URL
    /// The request items, in order.
    var items: [RequestItem]

    /// The method to send: the one given, else POST when an item carries data, else GET.
    var effectiveMethod: String {
        method ?? (items.contains(where: \.carriesData) ? "POST" : "GET")
    }

    /// Methods recognised as such even when what follows could be an item.
    static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY",
    ]

    /// Sorts the positional arguments out.
    ///
    /// The first is the method when it is only letters and either a method curlew knows or
    /// followed by something that is not an item (`curlew PURGE example.com`); otherwise it
    /// is the URL (`curlew localhost a=b` asks localhost).
    static func parse(_ arguments: [String]) throws(RequestLineError) -> RequestLine {
        guard let first = arguments.first else { throw .missingURL }
        var rest = arguments.dropFirst()
        var method: String?
        if first.allSatisfy({ $0.isASCII && $0.isLetter }), let next = rest.first,
            knownMethods.contains(first.uppercased()) || RequestItem.parse(next) == nil
        {
            method = first.uppercased()
        }
        guard let urlText = (method == nil ? first : rest.popFirst()) else { throw .missingURL }
        let url = try expandURL(urlText)
        var items: [RequestItem] = []
        for text in rest {
            guard let item = RequestItem.parse(text) else { throw .notAnItem(text) }
            items.append(item)
        }
        return RequestLine(method: method, url: url, items: items)
    }

    /// HTTPie's shorthands: `:3000/x` is `http://localhost:3000/x`, `:/x` is
    /// `http://localhost/x`, and a URL without a scheme gets `http://`.
    static func expandURL(_ text: String) throws(RequestLineError) -> URL {
        var expanded = text
        if expanded.hasPrefix("://") {
            expanded = "http" + expanded
        } else if expanded.hasPrefix(":") {
            let rest = expanded.dropFirst()
            let port = rest.prefix { $0.isNumber }
            let path = rest.dropFirst(port.count)
            expanded = "http://localhost" + (port.isEmpty ? "" : ":" + port) + path
        } else if !expanded.contains("://") {
            expanded = "http://" + expanded
        }
        guard let url = URL(string: expanded), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty
        else { throw .badURL(text) }
        return url
    }
}

/// Why the positional arguments are not a request.
enum RequestLineError: Error, Equatable, CustomStringConvertible {
    case missingURL
    case badURL(String)
    case notAnItem(String)

    var description: String {
        switch self {
        case .missingURL: return "no URL given: curlew [METHOD] URL [ITEM ...]"
        case .badURL(let text): return "'\(text)' is not an http or https URL"
        case .notAnItem(let text):
            return "'\(text)' is not a request item (Name:value, name==value, name=value, name:=json, name@file, @file)"
        }
    }
}
