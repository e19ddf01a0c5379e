import Foundation

/// Decides whether to trust a server: chain validity, host name and pinning, with the
/// semantics of AFNetworking's `AFSecurityPolicy` (see Docs/Security.md).
///
/// ```swift
/// import Foundation
/// import Security
///
/// func pinnedPolicy(pinFolder: URL) throws -> SecurityPolicy {
///     let pins = try Certificate.certificates(inDirectory: pinFolder, reportingErrors: true)
///     let policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: pins)
///     try policy.validateConfiguration()   // refuses a pinning mode with no pins
///     return policy
/// }
/// ```
///
/// A policy is a value; changing a copy never affects the original. The parsed trust
/// anchors are built once per distinct configuration and shared by copies, so
/// evaluation does not re-parse certificates on every TLS handshake.
public struct SecurityPolicy: Sendable, Hashable, Codable {
    /// The default policy: no pinning, invalid certificates refused, host names
    /// validated, the system's trusted roots.
    public static let `default` = SecurityPolicy(pinningMode: .none)

    /// How the server is pinned.
    public var pinningMode: SSLPinningMode

    /// The certificates to pin (their keys in `.publicKey` mode). Unlike AFNetworking,
    /// nothing is loaded implicitly: a pinning mode with no pins is refused.
    public var pinnedCertificates: Set<Certificate> {
        didSet { if pinnedCertificates != oldValue { rebuildAnchors() } }
    }

    /// Trust servers whose chain does not verify (self-signed, expired, unknown issuer).
    /// With a pinning mode, the pin must still match; with no pinning mode, a domain
    /// name to validate makes evaluation refuse (as AFNetworking). Default false.
    public var allowInvalidCertificates: Bool = false

    /// Check the certificate against the host name or IP address passed to `evaluate`.
    /// Default true.
    public var validatesDomainName: Bool = true

    /// The roots that make a chain valid; nil (the default) means the system store
    /// (`/etc/ssl/certs/ca-certificates.crt`, loaded once per process). Any certificate
    /// placed here is an anchor, even an intermediate.
    public var trustedRootCertificates: Set<Certificate>? {
        didSet { if trustedRootCertificates != oldValue { rebuildAnchors() } }
    }

    /// With `trustedRootCertificates` set, a chain to one of the system's roots is valid too:
    /// it is verified against the policy's roots first and, only when that fails, against the
    /// process-wide system store (loaded then, once per process). Default false.
    ///
    /// For SessionCore's `certificateAuthorityFile`, which trusts a file in addition to the
    /// system's roots. Merging the two into one set parsed every system root for the first
    /// HTTPS request of each such manager, on its driver thread: ~400M instructions with
    /// `SSL_CERT_DIR` set (280 certificates from Debian's `/etc/ssl/certs`, ~1.3M each with
    /// OpenSSL 3.0), ~190M for the bundle alone; a server whose chain ends at the file's own
    /// root now needs none of them. Not encoded: it describes where the system's roots come
    /// from in this process, not a setting one stores.
    package var fallsBackToSystemRoots = false {
        didSet { if fallsBackToSystemRoots != oldValue { rebuildAnchors() } }
    }

    /// Parsed stores and pin digests for the current configuration (shared by copies).
    var anchors: PolicyAnchors

    /// The process's system store, loaded on first use.
    private static let systemStore: @Sendable () -> TrustStore? = { TrustStore.system }

    private mutating func rebuildAnchors() {
        let system: (@Sendable () -> TrustStore?)? = fallsBackToSystemRoots ? Self.systemStore : nil
        anchors = PolicyAnchors(pinned: pinnedCertificates, roots: trustedRootCertificates, fallback: system)
    }

    /// A policy with the given pinning mode and no pinned certificates (Linux has no
    /// main bundle to search). Add pins with `pinnedCertificates` before use: a pinning
    /// mode with no pins evaluates to `.noPinnedCertificates`.
    public init(pinningMode: SSLPinningMode) {
        self.init(pinningMode: pinningMode, pinnedCertificates: [])
    }

    /// A policy with the given pinning mode and pins.
    public init(pinningMode: SSLPinningMode, pinnedCertificates: Set<Certificate>) {
        self.pinningMode = pinningMode
        self.pinnedCertificates = pinnedCertificates
        self.trustedRootCertificates = nil
        self.anchors = PolicyAnchors(pinned: pinnedCertificates, roots: nil)
    }

    /// Throws `SecurityPolicy.ConfigurationError` when the policy can never accept a
    /// server because of how it is set up (today: a pinning mode with no pins).
    /// Session managers call this when a policy is assigned, so the mistake surfaces at
    /// configuration time instead of as a refused connection.
    public func validateConfiguration() throws {
        if pinningMode != .none && pinnedCertificates.isEmpty {
            throw ConfigurationError(
                code: .noPinnedCertificates,
                detail: "pinning mode '\(pinningMode.rawValue)' needs at least one pinned certificate (ship two: the current key and a backup)")
        }
    }

    // MARK: Equality, hashing, coding (the cached anchors are derived, so left out)

    /// Equal when every setting is equal.
    public static func == (lhs: SecurityPolicy, rhs: SecurityPolicy) -> Bool {
        lhs.pinningMode == rhs.pinningMode
            && lhs.pinnedCertificates == rhs.pinnedCertificates
            && lhs.allowInvalidCertificates == rhs.allowInvalidCertificates
            && lhs.validatesDomainName == rhs.validatesDomainName
            && lhs.trustedRootCertificates == rhs.trustedRootCertificates
            && lhs.fallsBackToSystemRoots == rhs.fallsBackToSystemRoots
    }

    /// Hashes every setting (a session can key its connection pool by policy).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(pinningMode)
        hasher.combine(pinnedCertificates)
        hasher.combine(allowInvalidCertificates)
        hasher.combine(validatesDomainName)
        hasher.combine(trustedRootCertificates)
        hasher.combine(fallsBackToSystemRoots)
    }

    private enum CodingKeys: String, CodingKey {
        case pinningMode, pinnedCertificates, allowInvalidCertificates, validatesDomainName, trustedRootCertificates
    }

    /// Decodes a policy; absent keys take their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let mode = try container.decodeIfPresent(SSLPinningMode.self, forKey: .pinningMode) ?? .none
        let pins = try container.decodeIfPresent([Certificate].self, forKey: .pinnedCertificates) ?? []
        self.init(pinningMode: mode, pinnedCertificates: Set(pins))
        allowInvalidCertificates = try container.decodeIfPresent(Bool.self, forKey: .allowInvalidCertificates) ?? false
        validatesDomainName = try container.decodeIfPresent(Bool.self, forKey: .validatesDomainName) ?? true
        trustedRootCertificates = try container.decodeIfPresent([Certificate].self, forKey: .trustedRootCertificates).map { Set($0) }
        // Property observers do not run inside an initialiser: rebuild the anchors here.
        rebuildAnchors()
    }

    /// Encodes the settings; certificates as base64 DER, sorted so output is stable.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pinningMode, forKey: .pinningMode)
        try container.encode(Self.sorted(pinnedCertificates), forKey: .pinnedCertificates)
        try container.encode(allowInvalidCertificates, forKey: .allowInvalidCertificates)
        try container.encode(validatesDomainName, forKey: .validatesDomainName)
        try container.encodeIfPresent(trustedRootCertificates.map(Self.sorted), forKey: .trustedRootCertificates)
    }

    private static func sorted(_ certificates: Set<Certificate>) -> [Certificate] {
        certificates.sorted { $0.derData.lexicographicallyPrecedes($1.derData) }
    }
}
