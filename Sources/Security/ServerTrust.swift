import Foundation

/// The certificates a server presented, leaf first, and the moment at which to judge them:
/// what a `SecurityPolicy` evaluates (AFNetworking's `SecTrustRef`).
///
/// ```swift
/// import Foundation
/// import Security
///
/// func isTrusted(chain: [Certificate], host: String) -> Bool {
///     SecurityPolicy.default.evaluate(ServerTrust(certificates: chain), forDomain: host)
/// }
/// ```
public struct ServerTrust: Sendable {
    /// The chain as the server sent it: the leaf first, then the certificates that the
    /// server offered as intermediates (possibly in any order, possibly with extras).
    public var certificates: [Certificate]
    /// The time at which validity periods are checked.
    public var verificationDate: Date

    /// Creates a trust to evaluate. `certificates[0]` is the server's own certificate.
    public init(certificates: [Certificate], verificationDate: Date = .now) {
        self.certificates = certificates
        self.verificationDate = verificationDate
    }
}
