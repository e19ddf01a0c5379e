import COpenSSL
import Foundation

/// A built OpenSSL `X509_STORE` of trust anchors: the system roots, a policy's
/// `trustedRootCertificates`, or its pinned certificates (certificate pinning).
///
/// Built once and reused by every evaluation: parsing ~140 system roots per TLS
/// handshake would cost milliseconds each time.
///
/// `@unchecked Sendable`: the store is filled in `init` and not changed by Curlew
/// afterwards; OpenSSL locks an `X509_STORE` internally (its own lock, `X509_STORE_lock`)
/// for concurrent verifications, including the certificates a hashed-directory lookup adds
/// to it on demand (that is how an `SSL_CTX` shares one between connections). `deinit`
/// frees it.
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
    /// initialiser exactly once, thread-safely) from `SystemTrustLocation.current`: the
    /// same rule that names libcurl's CA file. An empty store still evaluates: every chain
    /// is then refused as `unknownIssuer`, with the location tried in the message.
    /// Nil only if OpenSSL cannot allocate a store at all.
    static let system: TrustStore? = load(SystemTrustLocation.current)

    /// A store of the roots at `location`: the file's certificates, parsed now, and the
    /// directory as OpenSSL's hashed-directory lookup (read on demand, by issuer name).
    static func load(_ location: SystemTrustLocation) -> TrustStore? {
        guard let store = X509_STORE_new() else { return nil }
        var loaded: [String] = []
        var failed: [String] = []
        ERR_clear_error()
        if let file = location.file {
            if FileManager.default.isReadableFile(atPath: file), X509_STORE_load_file(store, file) == 1 {
                loaded.append(file)
            } else {
                failed.append(file)
            }
        }
        if let directory = location.directory {
            if X509_STORE_load_path(store, directory) == 1 { loaded.append("\(directory)/") } else { failed.append(directory) }
        }
        _ = OpenSSLText.drainErrorQueue()
        let count = countCertificates(in: store)
        var origin = "system trust store"
        if !loaded.isEmpty { origin += " \(loaded.joined(separator: " + ")) (\(count) roots loaded)" }
        if !failed.isEmpty { origin += "; could not load \(failed.joined(separator: ", "))" }
        if location.file == nil && location.directory == nil {
            origin += ": no CA bundle found (set \(SystemTrustLocation.fileVariable) or \(SystemTrustLocation.directoryVariable))"
        }
        return TrustStore(pointer: store, certificateCount: count, origin: origin, anchorsMayBeIntermediates: false)
    }

    private static func countCertificates(in store: OpaquePointer) -> Int {
        guard let all = X509_STORE_get1_all_certs(store) else { return 0 }
        defer { curlew_ossl_sk_X509_pop_free(all) }
        return Int(max(0, curlew_ossl_sk_X509_num(all)))
    }
}
