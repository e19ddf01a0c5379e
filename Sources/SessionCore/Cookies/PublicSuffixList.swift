import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The public-suffix check libcurl applies to a `Domain` attribute received in a response,
/// made available to ``CookieJar/add(setCookie:for:)`` (curl's `CURLOPT_COOKIELIST` skips it:
/// it has no host to check against).
///
/// Uses the same libpsl and the same list libcurl does (`psl_latest(NULL)`, else the built-in
/// list), looked up at run time in the libpsl that Debian's libcurl already loaded, so Curlew
/// gains no build dependency. Without libpsl, libcurl's own fallback rule applies: the domain
/// must contain an inner dot or be `localhost`.
enum PublicSuffixList {
    private typealias LatestFunction = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    private typealias BuiltinFunction = @convention(c) () -> OpaquePointer?
    private typealias AcceptableFunction = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32

    /// A loaded list. `@unchecked Sendable`: both fields are immutable after loading, and libpsl
    /// documents a context as safe for concurrent lookups (it is never freed or changed).
    private struct Library: @unchecked Sendable {
        let context: OpaquePointer
        let isCookieDomainAcceptable: AcceptableFunction
    }

    private static let library: Library? = load()

    /// Whether libpsl's list is in use (else the inner-dot rule).
    static var usesPublicSuffixList: Bool { library != nil }

    private static func load() -> Library? {
        guard let handle = dlopen("libpsl.so.5", RTLD_NOW) else { return nil }
        guard let acceptable = dlsym(handle, "psl_is_cookie_domain_acceptable") else { return nil }
        var context: OpaquePointer?
        if let latest = dlsym(handle, "psl_latest") {
            context = unsafeBitCast(latest, to: LatestFunction.self)(nil)
        }
        if context == nil, let builtin = dlsym(handle, "psl_builtin") {
            context = unsafeBitCast(builtin, to: BuiltinFunction.self)()
        }
        guard let context else { return nil }
        return Library(context: context, isCookieDomainAcceptable: unsafeBitCast(acceptable, to: AcceptableFunction.self))
    }

    /// Whether a response from `host` may set a cookie for `domain` (both lowercase, without a
    /// leading dot; `host` already known to be `domain` or inside it).
    static func isAcceptable(domain: String, forHost host: String) -> Bool {
        if let library {
            return library.isCookieDomainAcceptable(library.context, host, domain) == 1
        }
        // libcurl's rule without libpsl (lib/cookie.c bad_domain).
        if domain == "localhost" { return true }
        guard let dot = domain.firstIndex(of: ".") else { return false }
        return domain.index(after: dot) != domain.endIndex
    }
}
