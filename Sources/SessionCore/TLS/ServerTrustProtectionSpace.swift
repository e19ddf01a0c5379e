import Foundation
import Security
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The protection space of a server-trust challenge, carrying the certificates the server
/// presented. Linux's Foundation has no `SecTrust`, so read them through
/// `URLProtectionSpace.serverTrustCertificates`.
final class ServerTrustProtectionSpace: URLProtectionSpace, @unchecked Sendable {
    // @unchecked: immutable after init (URLProtectionSpace itself is immutable).
    let trust: ServerTrust

    init(host: String, port: Int, protocol scheme: String, serverTrust: ServerTrust) {
        trust = serverTrust
        super.init(
            host: host, port: port, protocol: scheme, realm: nil,
            authenticationMethod: URLProtectionSpace.serverTrustAuthenticationMethod)
    }

    required init?(coder aDecoder: NSCoder) { nil }
}

extension URLProtectionSpace {
    /// `"NSURLAuthenticationMethodServerTrust"`, the value of Apple's constant, which
    /// Linux's Foundation marks unavailable: the `authenticationMethod` of Curlew's
    /// server-trust challenges.
    public static let serverTrustAuthenticationMethod = "NSURLAuthenticationMethodServerTrust"

    /// Curlew: the certificates the server presented (leaf first) in a server-trust
    /// challenge (`authenticationMethod == NSURLAuthenticationMethodServerTrust`); nil for
    /// other challenges. Stands in for Apple's `serverTrust`, which Linux lacks.
    public var curlewServerTrust: ServerTrust? { (self as? ServerTrustProtectionSpace)?.trust }
}
