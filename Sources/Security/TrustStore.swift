import COpenSSL
import Foundation

/// A built OpenSSL `X509_STORE` of trust anchors: the system roots, a policy's
/// `trustedRootCertificates`, or its pinned certificates (certificate pinning).
///
/// Built once and reused by every evaluation: parsing ~140 system roots per TLS
/// handshake would cost milliseconds each time.
///
/// `@unchecked Sendable`: the store is filled in `init` and never changed afterwards;
/// OpenSSL locks an `X509_STORE` internally for concurrent verifications (that is how
/// an `SSL_CTX` shares one between connections). `deinit` frees it.
final class TrustStore: @unchecked Sendable {
    /// The `X509_STORE*`.
    let pointer: OpaquePointer
    /// How many certificates the store holds.
    let certificateCount: Int
    /// Where the anchors came from, for error messages.
    let origin: String
    /// Whether any anchor, not only a self-signed root, ends a chain
    /// (`X509_V_FLAG_PARTIAL_CHAIN`): true for pinned and for caller-supplied anchors,
    /// as an anchor on Apple's `SecTrustSetAnchorCertificates` needs no self-signature.
    let anchorsMayBeIntermediates: Bool

    private init(pointer: OpaquePointer, certificateCount: Int, origin: String, anchorsMayBeIntermediates: Bool) {
        self.pointer = pointer
        self.certificateCount = certificateCount
        self.origin = origin
        self.anchorsMayBeIntermediates = anchorsMayBeIntermediates
    }

    deinit {
        X509_STORE_free(pointer)
    }

    /// A store holding exactly `certificates` (each gets its own reference in the store).
    /// Nil only if OpenSSL cannot allocate a store.
    convenience init?(anchors certificates: some Collection<Certificate>, origin: String) {
        guard let store = X509_STORE_new() else { return nil }
        var added = 0
        for certificate in certificates where X509_STORE_add_cert(store, certificate.handle.pointer) == 1 {
            added += 1
        }
        // A duplicate anchor makes X509_STORE_add_cert fail harmlessly; drop its error.
        ERR_clear_error()
        self.init(pointer: store, certificateCount: added, origin: origin, anchorsMayBeIntermediates: true)
    }

    /// The process-wide system store, loaded on first use (Swift runs a static `let`
    /// initialiser exactly once, thread-safely). An empty store still evaluates: every
    /// chain is then refused as `unknownIssuer`, with the paths tried in the message.
    /// Nil only if OpenSSL cannot allocate a store at all.
    static let system: TrustStore? = loadSystemStore()

    /// Candidate CA bundles, most preferred first: Debian's bundle, then `SSL_CERT_FILE`,
    /// then OpenSSL's compiled-in default file.
    static func systemBundleCandidates() -> [String] {
        var candidates = ["/etc/ssl/certs/ca-certificates.crt"]
        if let name = X509_get_default_cert_file_env().map({ String(cString: $0) }),
           let value = ProcessInfo.processInfo.environment[name], !value.isEmpty {
            candidates.append(value)
        }
        if let file = X509_get_default_cert_file() {
            candidates.append(String(cString: file))
        }
        return candidates
    }

    private static func loadSystemStore() -> TrustStore? {
        let tried = systemBundleCandidates()
        for path in tried where FileManager.default.isReadableFile(atPath: path) {
            guard let store = X509_STORE_new() else { break }
            ERR_clear_error()
            if X509_STORE_load_file(store, path) == 1 {
                _ = OpenSSLText.drainErrorQueue()
                let count = countCertificates(in: store)
                if count > 0 {
                    return TrustStore(pointer: store, certificateCount: count,
                                      origin: "system trust store \(path) (\(count) roots)",
                                      anchorsMayBeIntermediates: false)
                }
            }
            _ = OpenSSLText.drainErrorQueue()
            X509_STORE_free(store)
        }
        guard let empty = X509_STORE_new() else { return nil }
        return TrustStore(pointer: empty, certificateCount: 0,
                          origin: "system trust store: no CA bundle could be loaded (tried \(tried.joined(separator: ", ")))",
                          anchorsMayBeIntermediates: false)
    }

    private static func countCertificates(in store: OpaquePointer) -> Int {
        guard let all = X509_STORE_get1_all_certs(store) else { return 0 }
        defer { curlew_ossl_sk_X509_pop_free(all) }
        return Int(max(0, curlew_ossl_sk_X509_num(all)))
    }
}
