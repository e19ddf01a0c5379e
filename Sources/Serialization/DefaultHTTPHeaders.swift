import Foundation

/// The headers every request serializer starts with: `Accept-Language` and `User-Agent`.
enum DefaultHTTPHeaders {
    /// `Accept-Language` from the process locale (`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`),
    /// in AFNetworking's style: up to six languages, `q=1`, `q=0.9`, … (`en` when none is set).
    static let acceptLanguage: String = acceptLanguage(environment: ProcessInfo.processInfo.environment)

    /// `Curlew/<version> (Linux; <architecture>)`.
    static let userAgent = "Curlew/\(CurlewVersion.string) (Linux; \(architecture))"

    /// The machine architecture as `uname -m` spells it.
    static var architecture: String {
        #if arch(x86_64)
        return "x86_64"
        #elseif arch(arm64)
        return "aarch64"
        #elseif arch(i386)
        return "i686"
        #elseif arch(arm)
        return "armv7l"
        #else
        return "unknown"
        #endif
    }

    /// The header value for an environment (separate for tests).
    static func acceptLanguage(environment: [String: String]) -> String {
        var candidates: [String] = []
        if let list = environment["LANGUAGE"], !list.isEmpty {
            candidates += list.split(separator: ":").map(String.init)
        }
        for variable in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let value = environment[variable], !value.isEmpty {
                candidates.append(value)
                break
            }
        }
        var tags: [String] = []
        for candidate in candidates {
            guard let tag = languageTag(fromLocale: candidate), !tags.contains(tag) else { continue }
            tags.append(tag)
            if tags.count == 6 { break }
        }
        if tags.isEmpty { tags = ["en"] }
        return tags.enumerated().map { index, tag in
            let q = 10 - index
            return q == 10 ? "\(tag);q=1" : "\(tag);q=0.\(q)"
        }.joined(separator: ", ")
    }

    /// `en_US.UTF-8@euro` → `en-US`; nil for `C`, `POSIX` and malformed names.
    static func languageTag(fromLocale locale: String) -> String? {
        var name = Substring(locale)
        if let dot = name.firstIndex(of: ".") { name = name[..<dot] }
        if let at = name.firstIndex(of: "@") { name = name[..<at] }
        guard !name.isEmpty, name != "C", name != "POSIX" else { return nil }
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard let language = parts.first, (2...3).contains(language.count),
              language.allSatisfy({ $0.isASCII && $0.isLetter })
        else { return nil }
        var tag = language.lowercased()
        if parts.count > 1 {
            let region = parts[1]
            guard !region.isEmpty, region.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                return tag
            }
            tag += "-" + region.uppercased()
        }
        return tag
    }
}
