import Foundation
import Security
import Synchronization

/// A manager's trust settings as the driver reads them: the policy, the tag that names
/// the policy's generation, and whether the policy is usable at all.
///
/// Every successful verification stamps the TLS connection and its session with the tag
/// of the policy that accepted it (see `TLSHandshakeContext`). Changing the policy mints a
/// new tag, so connections and sessions verified under the old policy no longer match and
/// are refused before any request byte goes out on them.
final class SessionSecurity: Sendable {
    /// What a transfer needs to know when it configures TLS.
    struct Snapshot {
        let policy: SecurityPolicy
        /// The current policy generation (process-wide unique, never 0).
        let tag: UInt
        /// Set when the policy can never accept a server: every TLS transfer fails with it.
        let configurationError: SessionError?
    }

    /// Counters of what the driver admitted or refused (tests and measurements).
    struct Statistics: Sendable, Equatable {
        /// Full handshakes whose chain the policy (or a challenge override) accepted.
        var verifiedHandshakes = 0
        /// Handshakes the policy refused.
        var refusedHandshakes = 0
        /// Requests admitted on a resumed TLS session stamped with a current tag.
        var admittedResumedSessions = 0
        /// Requests admitted on a kept-alive connection stamped with a current tag.
        var admittedReusedConnections = 0
        /// Requests refused (before sending) because their connection or session was
        /// verified under another policy.
        var refusedStaleConnections = 0
        /// Times the TLS session cache was replaced after a policy change.
        var sessionCacheReplacements = 0
    }

    private struct State {
        var policy = SecurityPolicy.default
        var tag: UInt
        var configurationError: SessionError?
        /// The policy with `SessionConfiguration.certificateAuthorityFile` added to the
        /// system roots, built once per policy generation.
        var withExtraRoots: (tag: UInt, snapshot: Snapshot)?
        /// Task identifiers whose handshake is recorded and then refused (`peerCertificates`).
        var inspections: [Int: ServerTrust?] = [:]
    }

    private let state: Mutex<State>
    let statistics = Mutex(Statistics())
    /// Replace the TLS session cache when the policy changes (on by default; tests turn
    /// it off to prove that the per-request check alone refuses a stale resumed session).
    let replacesSessionCacheOnPolicyChange = Atomic<Bool>(true)
    /// Tests only: judge handshakes as a policy whose host name check is missing would, to
    /// prove that libcurl's own check (`CURLOPT_SSL_VERIFYHOST`) still refuses a wrong host.
    let skipsPolicyHostCheck = Atomic<Bool>(false)

    /// Where `PinningPolicy.report` runs: serial, so one manager's reports arrive in order,
    /// and never the driver thread, which runs no user code.
    let pinReportQueue = DispatchQueue(label: "Curlew.PinFailureReports")

    private static let tagCounter = Mutex<UInt>(0)

    /// A tag never handed out before in this process (policy generations and per-task
    /// trust overrides share the sequence, so they can never be confused).
    static func makeTag() -> UInt {
        tagCounter.withLock { counter in
            counter += 1
            return counter
        }
    }

    init() {
        state = Mutex(State(tag: SessionSecurity.makeTag()))
    }

    var snapshot: Snapshot {
        state.withLock { Snapshot(policy: $0.policy, tag: $0.tag, configurationError: $0.configurationError) }
    }

    var policy: SecurityPolicy { state.withLock { $0.policy } }

    /// The current policy generation alone. The driver asks at every start whether the
    /// policy changed: a whole `snapshot` copies the policy (its sets and arrays retained and
    /// released) to read one integer (~200 instructions per request, callgrind).
    var tag: UInt { state.withLock { $0.tag } }

    /// The snapshot for a transfer of a manager whose configuration names an extra CA file:
    /// when the policy uses the system store, the file's certificates are trusted in addition
    /// (as `certificateAuthorityFile` promises). An unreadable file fails closed.
    func snapshot(certificateAuthorityFile file: String?) -> Snapshot {
        // One lock, and no snapshot built only to be dropped: this runs for every HTTPS
        // request, on the driver thread (two locks and a dropped copy cost ~1,000 instructions).
        state.withLock { state in
            guard let file, state.policy.trustedRootCertificates == nil, state.configurationError == nil else {
                return Snapshot(policy: state.policy, tag: state.tag, configurationError: state.configurationError)
            }
            if let cached = state.withExtraRoots, cached.tag == state.tag { return cached.snapshot }
            let base = Snapshot(policy: state.policy, tag: state.tag, configurationError: nil)
            let result: Snapshot
            do {
                let extra = try Certificate.certificates(contentsOf: URL(fileURLWithPath: file))
                // The file's roots, then the system's: the policy's own system store, loaded
                // only for a chain the file's roots refuse (and once per process).
                var policy = base.policy
                policy.trustedRootCertificates = Set(extra)
                policy.fallsBackToSystemRoots = true
                result = Snapshot(policy: policy, tag: base.tag, configurationError: nil)
            } catch {
                result = Snapshot(
                    policy: base.policy, tag: base.tag,
                    configurationError: .tlsHandshakeFailed("certificateAuthorityFile '\(file)' cannot be used: \(error)"))
            }
            state.withExtraRoots = (base.tag, result)
            return result
        }
    }

    /// Installs `policy`. An unusable policy is stored with its error, so every TLS
    /// transfer fails closed with that error instead of running unpinned.
    func setPolicy(_ policy: SecurityPolicy) {
        var configurationError: SessionError?
        do {
            try policy.validateConfiguration()
        } catch {
            configurationError = .serverTrustEvaluationFailed(
                reason: TrustEvaluationError(reason: .noPinnedCertificates, detail: "\(error)"))
        }
        state.withLock { state in
            // An equal policy keeps its generation: connections it verified stay valid.
            guard state.policy != policy || state.configurationError != configurationError else { return }
            state.policy = policy
            state.configurationError = configurationError
            state.tag = SessionSecurity.makeTag()
        }
    }

    /// A new generation of the same policy: connections and TLS sessions verified before
    /// are refused from now on, as after a policy change. A reset session starts as a new
    /// one: a session resumed from the previous user's handshake would carry that handshake's
    /// client certificate, and the server would take the new user for the old one.
    func renewGeneration() {
        state.withLock { $0.tag = SessionSecurity.makeTag() }
    }

    func count(_ update: (inout Statistics) -> Void) { statistics.withLock { update(&$0) } }

    // MARK: - Certificate inspection

    func beginInspection(of taskIdentifier: Int) { state.withLock { $0.inspections[taskIdentifier] = .some(nil) } }

    func isInspecting(_ taskIdentifier: Int) -> Bool { state.withLock { $0.inspections[taskIdentifier] != nil } }

    func record(_ trust: ServerTrust, forInspectionOf taskIdentifier: Int) {
        state.withLock { state in
            if state.inspections[taskIdentifier] != nil { state.inspections[taskIdentifier] = .some(trust) }
        }
    }

    func endInspection(of taskIdentifier: Int) -> ServerTrust? {
        state.withLock { $0.inspections.removeValue(forKey: taskIdentifier) ?? nil }
    }
}
