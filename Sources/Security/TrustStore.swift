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
    /// How many certificates the store held when it was loaded (a hashed directory's are
    /// read on demand and not counted).
    let certificateCount: Int
    /// Where the anchors came from, for error messages.
    let origin: String
    /// Whether any anchor, not only a self-signed root, ends a chain
    /// (`X509_V_FLAG_PARTIAL_CHAIN`): true for pinned and for caller-supplied anchors,
    /// as an anchor on Apple's `SecTrustSetAnchorCertificates` needs no self-signature.
    let anchorsMayBeIntermediates: Bool
    /// A store that holds this one's anchors and more, asked for only when this one refuses
    /// a chain; its verdict is then the answer (`ChainVerifier`). The system's roots are such
    /// a pair: their hashed directory first, the whole set (the bundle too) behind it.
    let wider: (@Sendable () -> TrustStore?)?

    private init(
        pointer: OpaquePointer, certificateCount: Int, origin: String, anchorsMayBeIntermediates: Bool,
        wider: (@Sendable () -> TrustStore?)? = nil
    ) {
        self.pointer = pointer
        self.certificateCount = certificateCount
        self.origin = origin
        self.anchorsMayBeIntermediates = anchorsMayBeIntermediates
        self.wider = wider
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

    /// The process-wide system store, made on first use (Swift runs a static `let`
    /// initialiser exactly once, thread-safely) from `SystemTrustLocation.current`: the
    /// location's hashed directory, with every root of the location (`completeSystem`) behind
    /// it (`onDemand`). A chain anchored in the directory costs OpenSSL one file read for its
    /// root, where parsing the bundle costs ~140 roots at ~1.3M instructions each under
    /// OpenSSL 3.0 (~30 ms, on the driver thread, at a manager's first HTTPS request); the
    /// bundle is parsed only for a chain the directory cannot anchor. An empty store still
    /// evaluates: every chain is then refused as `unknownIssuer`, with the location tried in
    /// the message. Nil only if OpenSSL cannot allocate a store at all.
    static let system: TrustStore? = onDemand(SystemTrustLocation.current) { completeSystem }

    /// Every root of `SystemTrustLocation.current`, the bundle parsed: loaded the first time
    /// the directory alone refuses a chain (or at once, when there is no directory).
    private static let completeSystem: TrustStore? = load(SystemTrustLocation.current)

    /// The store to verify against first for `location`: its directory alone, read on demand,
    /// with `complete` (all of the location's roots) as the wider store, when the location has
    /// both a file and a directory; otherwise `complete()` itself (a file alone must be
    /// parsed; a directory alone is read on demand anyway).
    static func onDemand(
        _ location: SystemTrustLocation, complete: @escaping @Sendable () -> TrustStore?
    ) -> TrustStore? {
        guard location.file != nil, let directory = location.directory else { return complete() }
        return load(SystemTrustLocation(file: nil, directory: directory), wider: complete) ?? complete()
    }

    /// A store of the roots at `location`: the file's certificates, parsed now, and the
    /// directory as OpenSSL's hashed-directory lookup (read on demand, by issuer name);
    /// `wider` behind it, if given.
    static func load(_ location: SystemTrustLocation, wider: (@Sendable () -> TrustStore?)? = nil) -> TrustStore? {
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
        return TrustStore(pointer: store, certificateCount: count, origin: origin, anchorsMayBeIntermediates: false, wider: wider)
    }

    private static func countCertificates(in store: OpaquePointer) -> Int {
        guard let all = X509_STORE_get1_all_certs(store) else { return 0 }
        defer { curlew_ossl_sk_X509_pop_free(all) }
        return Int(max(0, curlew_ossl_sk_X509_num(all)))
    }
}
