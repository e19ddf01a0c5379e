import Foundation

/// Evaluation: AFSecurityPolicy's `evaluateServerTrust:forDomain:` on OpenSSL.
extension SecurityPolicy {
    /// True when the server should be trusted for `domain` (nil: no host name check).
    /// The same decision as `evaluateWithReason(_:forDomain:)`, without the reason.
    public func evaluate(_ trust: ServerTrust, forDomain domain: String?) -> Bool {
        if case .success = evaluateWithReason(trust, forDomain: domain) { return true }
        return false
    }

    /// Evaluates `trust` for `domain` and, on refusal, says why.
    ///
    /// Called outside a TLS handshake, the chain is verified at the security level a TLS
    /// client of this machine gets by default (OpenSSL's default context level: 2 on
    /// Debian, so RSA keys under 2048 bits and SHA-1 signatures are refused, as a
    /// connection would refuse them). During a handshake the session manager evaluates
    /// with that handshake's own verify parameters and level instead.
    ///
    /// The order follows AFSecurityPolicy:
    /// 1. A pinning mode without pins is refused (`.noPinnedCertificates`); so is
    ///    `allowInvalidCertificates` + `validatesDomainName` + a domain without pinning
    ///    (`.domainValidationRequiresPinning`): only a pin can vouch for a self-signed server.
    /// 2. No pinning and `allowInvalidCertificates`: accepted.
    /// 3. The chain must verify against `trustedRootCertificates` (nil: the system store)
    ///    at `trust.verificationDate`, unless `allowInvalidCertificates`.
    /// 4. With `validatesDomainName` and a non-nil `domain`, the leaf must match it
    ///    (subjectAltName DNS or IP; an empty domain is refused). Unlike AFNetworking, this
    ///    holds in every mode, including public-key pinning with invalid certificates allowed.
    /// 5. `.certificate`: the pinned certificates are the only anchors; the chain must
    ///    verify to one of them and contain a pinned certificate. A pinned root the server
    ///    did not send counts when it anchors the chain.
    ///    `.publicKey`: one key of the verified chain (leaf to anchor, anchors included)
    ///    must be a pinned key. When invalid certificates are allowed and no chain
    ///    verified, only the signature-linked path from the leaf through the sent
    ///    certificates is compared, never a certificate that merely came along.
    public func evaluateWithReason(_ trust: ServerTrust, forDomain domain: String?) -> Result<Void, TrustEvaluationError> {
        evaluateWithReason(trust, forDomain: domain, settings: .standalone)
    }

    /// `evaluateWithReason(_:forDomain:)` with explicit OpenSSL verification settings
    /// (security level, inherited verify parameters): for the engine's handshake hook, and
    /// for tests that judge historic chains at the level of their time.
    package func evaluateWithReason(
        _ trust: ServerTrust, forDomain domain: String?, settings: VerificationSettings
    ) -> Result<Void, TrustEvaluationError> {
        evaluateChain(trust, forDomain: domain, settings: settings).map { _ in () }
    }

    /// The same decision as `evaluateWithReason(_:forDomain:settings:)`; on acceptance, the
    /// chain that per-host pins are judged against: the verified path (leaf to trust anchor)
    /// or, when invalid certificates are allowed and none verified, the signature-linked
    /// path from the leaf through the sent certificates.
    package func evaluateChain(
        _ trust: ServerTrust, forDomain domain: String?, settings: VerificationSettings
    ) -> Result<[Certificate], TrustEvaluationError> {
        guard let leaf = trust.certificates.first else {
            return .failure(TrustEvaluationError(reason: .emptyChain, detail: "the server presented no certificate"))
        }
        if pinningMode != .none && pinnedCertificates.isEmpty {
            return .failure(TrustEvaluationError(
                reason: .noPinnedCertificates,
                detail: "pinning mode '\(pinningMode.rawValue)' with no pinned certificates trusts nothing"))
        }
        if domain != nil && allowInvalidCertificates && validatesDomainName && pinningMode == .none {
            return .failure(TrustEvaluationError(
                reason: .domainValidationRequiresPinning, certificateSubject: leaf.subjectSummary,
                detail: "validating a domain name while allowing invalid (e.g. self-signed) certificates requires pinning"))
        }
        if pinningMode == .none && allowInvalidCertificates {
            return .success(Self.signatureLinkedPath(trust.certificates))
        }

        guard let roots = anchors.trustedRoots() else {
            return .failure(TrustEvaluationError(reason: .unknownIssuer, detail: "no trust store could be built"))
        }
        var verifiedChain: [Certificate]?
        switch verifyAgainstTrustedRoots(trust, primary: roots, settings: settings) {
        case .success(let chain):
            verifiedChain = chain
        case .failure(let error):
            if !allowInvalidCertificates { return .failure(error) }
        }

        if validatesDomainName, let domain {
            if case .failure(let error) = HostNameCheck.check(leaf, host: domain) { return .failure(error) }
        }

        let candidates = verifiedChain ?? Self.signatureLinkedPath(trust.certificates)
        switch pinningMode {
        case .none:
            return .success(candidates)
        case .certificate:
            return evaluateCertificatePins(trust, settings: settings).map { candidates }
        case .publicKey:
            return evaluatePublicKeyPins(candidates, leaf: leaf).map { candidates }
        }
    }

    /// The chain verified against the policy's roots or, when those refuse it and the policy
    /// falls back to them, the system's. Of two refusals the one that says more is kept: a
    /// chain that reached an anchor of one store and failed there (expired, a weak key) tells
    /// more than the other store's unknown issuer.
    private func verifyAgainstTrustedRoots(
        _ trust: ServerTrust, primary: TrustStore, settings: VerificationSettings
    ) -> Result<[Certificate], TrustEvaluationError> {
        let first = ChainVerifier.verify(trust, against: primary, settings: settings)
        guard case .failure(let refusal) = first, let fallback = anchors.fallback?() else { return first }
        let second = ChainVerifier.verify(trust, against: fallback, settings: settings)
        if case .failure = second, refusal.reason != .unknownIssuer { return first }
        return second
    }

    private func evaluateCertificatePins(_ trust: ServerTrust, settings: VerificationSettings) -> Result<Void, TrustEvaluationError> {
        guard let pinStore = anchors.pinnedAnchors() else {
            return .failure(TrustEvaluationError(reason: .noPinMatched, detail: "the pinned certificates could not be loaded"))
        }
        switch ChainVerifier.verify(trust, against: pinStore, settings: settings) {
        case .failure(let error):
            // "No anchor found" against the pin store means no pin anchors this chain.
            switch error.reason {
            case .unknownIssuer, .selfSigned:
                return .failure(TrustEvaluationError(
                    reason: .noPinMatched, certificateSubject: error.certificateSubject,
                    detail: "no pinned certificate anchors the chain: \(error.detail)",
                    openSSLVerifyResult: error.openSSLVerifyResult))
            default:
                return .failure(error)
            }
        case .success(let chain):
            // With pins as the only anchors this holds by construction; checked anyway,
            // as AFSecurityPolicy does, so a change in path building cannot widen trust.
            if chain.contains(where: { pinnedCertificates.contains($0) }) {
                return .success(())
            }
            return .failure(TrustEvaluationError(
                reason: .noPinMatched, certificateSubject: trust.certificates.first?.subjectSummary,
                detail: "the verified chain contains none of the \(pinnedCertificates.count) pinned certificate(s)"))
        }
    }

    private func evaluatePublicKeyPins(_ chain: [Certificate], leaf: Certificate) -> Result<Void, TrustEvaluationError> {
        let pins = anchors.pinnedKeyDigests()
        for certificate in chain {
            if let digest = certificate.handle.subjectPublicKeySHA256(), pins.contains(digest) {
                return .success(())
            }
        }
        let seen = chain.map { "sha256//\($0.publicKeySHA256) (\($0.subjectSummary))" }.joined(separator: ", ")
        return .failure(TrustEvaluationError(
            reason: .noPinMatched, certificateSubject: leaf.subjectSummary,
            detail: "no key of the chain is pinned; chain keys: \(seen)"))
    }

    /// How many sent certificates after the leaf a signature-linked path is built from: more
    /// than any real chain (leaf, a few intermediates, perhaps a cross-signed root).
    package static let linkedPathCandidates = 16

    /// The leaf, then each sent certificate whose key verifiably signed the previous one.
    /// Used only when no chain verified (invalid certificates allowed): a certificate that
    /// the server merely attached, without having been issued by it, is not part of it.
    ///
    /// Only the first ``linkedPathCandidates`` certificates after the leaf are considered: a
    /// server may send hundreds (OpenSSL bounds the list's bytes, not its count) sharing one
    /// issuer name, each step then verified a signature against all that were left, some
    /// n²/2 of them in the handshake, on the thread that drives every transfer.
    package static func signatureLinkedPath(_ sent: [Certificate]) -> [Certificate] {
        guard var current = sent.first else { return [] }
        var path = [current]
        var remaining = Array(sent.dropFirst().prefix(linkedPathCandidates))
        while let index = remaining.firstIndex(where: { current.handle.isSigned(by: $0.handle) }) {
            current = remaining.remove(at: index)
            path.append(current)
        }
        return path
    }
}
