internal import CCurl
internal import COpenSSL
import Foundation
import Security

/// Per-host pins (`SessionConfiguration.pinningPolicy` and `proxyPinningPolicy`), judged
/// inside OpenSSL's certificate verification, on the driver thread like the rest of
/// `TLSHandshakeContext`. A handshake they refuse never stamps its connection or session, so
/// no later request is admitted on it (`admitRequest`); a handshake they accept stamps it
/// with the manager's tag, and the manager's pins never change, so a kept-alive connection
/// or a resumed session of this manager was judged by these very pins.
extension TLSHandshakeContext {
    /// Whether an unexpired, enforced pin set covers `host`.
    static func hasEnforcedPins(_ policy: PinningPolicy?, host: String) -> Bool {
        guard let policy else { return false }
        let now = Date()
        return policy.pinSets.contains { !$0.reportOnly && !$0.isExpired(at: now) && $0.matches(host: host) }
    }

    /// Judges `chain` (the chain the trust decision accepted, leaf first) by `policy` for
    /// `host`:`port`. A failure is reported on the manager's report queue (once: this runs
    /// once per handshake); an enforced one refuses the handshake. `peer` names the server in
    /// the error ("the server", "the HTTPS proxy").
    func passesPins(
        _ policy: PinningPolicy?, host: String?, port: Int, chain: [Certificate], store: OpaquePointer, peer: String
    ) -> Bool {
        guard let policy, !policy.pinSets.isEmpty else { return true }
        guard let host, !host.isEmpty else {
            return refuse(store, TrustEvaluationError(reason: .noPinMatched, detail: "\(peer) has no host name to look its pins up by"))
        }
        switch policy.verdict(host: host, port: port, chain: chain) {
        case .noMatchingSet, .satisfied:
            return true
        case .failed(let report):
            if let callback = policy.report {
                // The driver runs no user code: the report goes to the manager's queue.
                security.pinReportQueue.async { callback(report) }
            }
            guard report.enforced else { return true }
            return refuse(
                store, TrustEvaluationError(
                    reason: .noPinMatched, certificateSubject: chain.first?.subjectSummary,
                    detail: "per-host pins: the verified chain of \(peer) \(host):\(port) ("
                        + report.servedPins.joined(separator: ", ") + ") has none of the expected pins ("
                        + report.expectedPins.sorted().joined(separator: ", ") + ")"))
        }
    }

    /// An HTTPS proxy's handshake: OpenSSL's own verification against the proxy's authorities,
    /// then the proxy's pins on the chain it verified (leaf to trust anchor).
    func verifyProxy(_ store: OpaquePointer, _ ssl: OpaquePointer?) -> Bool {
        let proxyEndpoint = currentProxyEndpoint
        guard X509_verify_cert(store) == 1 else {
            // Recorded, so the transfer's error names the proxy: unrecorded, the failure was
            // taken for libcurl's host name check of the origin.
            let code = X509_STORE_CTX_get_error(store)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            let sentName = ssl.flatMap { SSL_get_servername($0, TLSEXT_NAMETYPE_host_name) }.map { String(cString: $0) }
            let proxy = proxyEndpoint.map { " \($0.host):\($0.port)" } ?? sentName.map { " " + $0 } ?? ""
            return refuse(
                store, TrustEvaluationError(
                    reason: TrustEvaluationError.Reason(verifyResult: code),
                    detail: "the HTTPS proxy\(proxy) is not trusted (its authorities: the system's and certificateAuthorityFile): \(text)",
                    openSSLVerifyResult: code))
        }
        guard let proxyPinning, !proxyPinning.pinSets.isEmpty else { return true }
        let sentName = ssl.flatMap { SSL_get_servername($0, TLSEXT_NAMETYPE_host_name) }.map { String(cString: $0) }
        let chain = X509_STORE_CTX_get0_chain(store).flatMap { try? ServerTrust(x509Chain: $0) }?.certificates ?? []
        guard !chain.isEmpty else {
            return refuse(store, TrustEvaluationError(reason: .emptyChain, detail: "the HTTPS proxy's verified chain could not be read"))
        }
        let passes = passesPins(
            proxyPinning, host: proxyEndpoint?.host ?? sentName, port: proxyEndpoint?.port ?? 0, chain: chain, store: store,
            peer: "the HTTPS proxy")
        if passes { X509_STORE_CTX_set_error(store, X509_V_OK) }
        return passes
    }

    /// The proxy this handshake is with, as its pins name it. A request that HSTS may upgrade
    /// goes through the proxy of the scheme libcurl settled on, which it records when the
    /// connection's socket connects, before any TLS on it (`CURLINFO_SCHEME`).
    private var currentProxyEndpoint: (host: String, port: Int)? {
        guard allowsPlainConnection, let plain = plainProxyEndpoint else { return proxyEndpoint }
        var scheme: UnsafeMutablePointer<CChar>?
        guard curlew_easy_getinfo_string(easy, CURLINFO_SCHEME, &scheme) == CURLE_OK, let scheme else { return proxyEndpoint }
        return strcasecmp(scheme, "https") == 0 ? proxyEndpoint : plain
    }

    /// The proxy a request may use, as its pins name it: the configured proxy URL, or the
    /// environment's variable for the origin's scheme (as libcurl reads them). Nil when none.
    static func proxyEndpoint(_ proxy: SessionConfiguration.Proxy, originIsHTTPS: Bool) -> (host: String, port: Int)? {
        let text: String?
        switch proxy {
        case .none:
            text = nil
        case .url(let value):
            text = value
        case .environment:
            text = ProxyChoice.environmentProxy(scheme: originIsHTTPS ? "https" : "http", environment: ProxyChoice.processEnvironment)
        }
        guard let text, let url = SessionConfiguration.Proxy.url(of: text), let host = url.host else { return nil }
        let isHTTPS = url.scheme?.lowercased() == "https"
        return (host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), url.port ?? (isHTTPS ? 443 : 1080))
    }
}
