import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// A name for the credentials this request carries itself, or nil when it carries none:
    /// its `Authorization`, `Proxy-Authorization` and `Cookie` fields and its URL's user and
    /// password, as the response cache judges them.
    ///
    /// Equal credentials give equal names within one process; the name is a salted SHA-256
    /// (one salt per process), so it says nothing of the values and differs from one run to
    /// the next. A cache or a merge keyed by URL adds it to its key so that one user's answer
    /// never reaches another: `ImageDownloader` and `AutoPurgingImageCache` do. Credentials
    /// added later, by a `RequestAdapter` (an `AuthenticationInterceptor`) or from the cookie
    /// jar, are not in the request yet and so not in the name.
    public var credentialsDigest: String? {
        CacheIdentity(request: self, jarCookies: nil).processDigest()
    }
}
