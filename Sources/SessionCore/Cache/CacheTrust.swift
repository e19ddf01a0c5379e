import Foundation
import Glibc
import Security

/// The trust an `https` answer was admitted under, as the response cache records it: the
/// security policy (pinning mode, pins, roots, `certificateAuthorityFile`'s, the host and
/// validity checks) and the per-host pins (`SessionConfiguration.pinningPolicy`).
///
/// A stored answer is as trustworthy as the check its server passed. Answered under another
/// trust, it would hand a manager whose policy pins a key (or whose pins were just rotated
/// after a compromise) bytes from a server that policy never saw: a manager sharing the cache
/// without pins, or this one before its policy changed. So an entry filed from an `https`
/// answer carries its trust's tag and answers only under the same trust; under another it is
/// a miss, and the fresh answer replaces it.
///
/// The tag is a SHA-256 of the settings' content (certificates by the SHA-256 of their DER),
/// so equal settings give equal tags in every manager and every run, and the disk cache
/// survives a restart.
struct CacheTrust: Sendable, Equatable {
    /// The policy generation (`SessionSecurity.tag`) the tag was computed for: an answer is
    /// filed only if the generation is still current when it completes (a policy changed
    /// mid-transfer admitted it under which one is not known).
    let generation: UInt
    /// What entries record (`CachedResponse.trustTag`).
    let tag: String

    /// What an entry a caller stored records (`ResponseCache.storeCachedResponse(_:for:)`):
    /// the caller vouches for it, and it answers under any trust. An entry without a tag (an
    /// older Curlew's, on disk) answers no lookup that has a trust.
    static let anyTrust = "*"

    /// The tag of `policy` (the snapshot a transfer verifies with: the configured CA file's
    /// roots included) with the per-host `pinning` and the proxy's `proxyPinning`. When the
    /// policy uses the system's trust store, the store counts as found (its file and
    /// directory, and when they last changed, `systemRootsDescription()`): a process whose
    /// `SSL_CERT_FILE` narrows trust, or a `ca-certificates` update, is another trust.
    static func tag(policy: SecurityPolicy, pinning: PinningPolicy?, proxyPinning: PinningPolicy? = nil) -> String {
        var material: [UInt8] = []
        func append(_ label: String, _ value: String) {
            // Length-prefixed: no choice of values can make two settings' bytes equal.
            for part in [label, value] {
                withUnsafeBytes(of: UInt64(part.utf8.count).littleEndian) { material.append(contentsOf: $0) }
                material.append(contentsOf: part.utf8)
            }
        }
        func append(_ label: String, certificates: Set<Certificate>?) {
            guard let certificates else { return append(label, "none") }
            append(label, certificates.map { digest(Array($0.derData)) }.sorted().joined(separator: ","))
        }
        append("pinning-mode", policy.pinningMode.rawValue)
        append("pinned", certificates: policy.pinnedCertificates)
        append("allows-invalid", policy.allowInvalidCertificates ? "1" : "0")
        append("validates-domain-name", policy.validatesDomainName ? "1" : "0")
        append("roots", certificates: policy.trustedRootCertificates)
        append("falls-back-to-system-roots", policy.fallsBackToSystemRoots ? "1" : "0")
        if policy.trustedRootCertificates == nil || policy.fallsBackToSystemRoots {
            append("system-roots", systemRootsDescription())
        }
        for (label, sets) in [("pin-set", pinning?.pinSets ?? []), ("proxy-pin-set", proxyPinning?.pinSets ?? [])] {
            // Each set's fields, in an order that does not depend on the sets' order.
            let fields = sets.map { set -> [String] in
                var host = set.host.lowercased()
                if host.hasSuffix(".") { host.removeLast() }
                return [
                    host, set.includeSubdomains ? "1" : "0", set.reportOnly ? "1" : "0",
                    set.expires.map { String($0.timeIntervalSince1970) } ?? "-", set.pins.sorted().joined(separator: ","),
                ]
            }
            for set in fields.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                append(label, String(set.count))
                for field in set { append("field", field) }
            }
        }
        return digest(material)
    }

    /// The system trust store as a trust tag names it: its file and
    /// directory (`SystemTrustLocation.current`), each with its size and modification time.
    static func systemRootsDescription() -> String {
        let location = SystemTrustLocation.current
        func described(_ path: String?) -> String {
            guard let path else { return "-" }
            var info = stat()
            guard stat(path, &info) == 0 else { return path + " (missing)" }
            return "\(path) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        }
        return described(location.file) + "\n" + described(location.directory)
    }

    /// SHA-256 in hex. Should hashing fail, a tag no other trust can have: nothing is shared
    /// rather than the wrong thing.
    private static func digest(_ bytes: [UInt8]) -> String {
        CacheIdentity.sha256(bytes).map(CacheIdentity.hex) ?? UUID().uuidString
    }
}
