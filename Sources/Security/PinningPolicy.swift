import Foundation

/// Per-host public-key pins, checked inside every TLS handshake together with (never
/// instead of) the manager's `SecurityPolicy` (`SessionConfiguration.pinningPolicy`).
///
/// A host that no set matches is judged by the `SecurityPolicy` alone. The sets that match
/// a host and have not expired are united: the verified chain (leaf to trust anchor, so a
/// root's or an intermediate's pin counts) needs one pin of the enforced sets' union, else
/// the handshake fails before a request byte is sent. Report-only sets are judged the same
/// way by their own union, and never loosen an enforced set. Each failing handshake calls
/// `report` once, on a queue of Curlew's (never on its network thread); expired sets are
/// neither enforced nor reported.
///
/// Equality, hashing and coding look at `pinSets` only: `report` is a closure.
public struct PinningPolicy: Sendable, Hashable, Codable {
    /// What a chain's check against the policy concluded.
    public enum Verdict: Sendable, Hashable {
        /// No unexpired set matches the host: the `SecurityPolicy` alone decides.
        case noMatchingSet
        /// Every matching group of sets found one of its pins in the chain.
        case satisfied
        /// A matching group found none: `report.enforced` says whether to refuse.
        case failed(PinFailureReport)
    }

    /// The pin sets, in any order.
    public var pinSets: [PinSet]
    /// Called once per handshake that fails a matching, unexpired set, enforced or
    /// report-only. Runs on a serial queue of the manager's, never on the network thread.
    public var report: (@Sendable (PinFailureReport) -> Void)?

    /// Creates a policy from `pinSets`, reporting failures to `report`.
    public init(pinSets: [PinSet], report: (@Sendable (PinFailureReport) -> Void)? = nil) {
        self.pinSets = pinSets
        self.report = report
    }

    /// Judges a verified chain (leaf first, trust anchor last) served by `host`:`port` at `date`.
    public func verdict(host: String, port: Int, chain: [Certificate], at date: Date = .now) -> Verdict {
        verdict(host: host, port: port, servedPins: chain.map(PinSet.pin(of:)), at: date)
    }

    /// Judges the `sha256/BASE64` pins of a verified chain (leaf first, anchor last).
    public func verdict(host: String, port: Int, servedPins: [String], at date: Date = .now) -> Verdict {
        let matching = pinSets.filter { !$0.isExpired(at: date) && $0.matches(host: host) }
        guard !matching.isEmpty else { return .noMatchingSet }
        let served = Set(servedPins.compactMap(PinSet.digest(ofPin:)))
        // Enforced sets first: their failure refuses the handshake whatever the others say.
        for reportOnly in [false, true] {
            let group = matching.filter { $0.reportOnly == reportOnly }
            guard !group.isEmpty else { continue }
            let expected = group.reduce(into: Set<Data>()) { $0.formUnion($1.digests) }
            if served.isDisjoint(with: expected) {
                return .failed(PinFailureReport(
                    host: host, port: port, servedPins: servedPins,
                    expectedPins: group.reduce(into: Set<String>()) { $0.formUnion($1.pins) }, enforced: !reportOnly))
            }
        }
        return .satisfied
    }

    /// Equal when the pin sets are equal (`report` is not compared).
    public static func == (lhs: PinningPolicy, rhs: PinningPolicy) -> Bool {
        lhs.pinSets == rhs.pinSets
    }

    /// Hashes the pin sets (not `report`).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(pinSets)
    }

    private enum CodingKeys: String, CodingKey {
        case pinSets
    }

    /// Decodes the pin sets; the decoded policy has no `report`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        pinSets = try container.decode([PinSet].self, forKey: .pinSets)
        report = nil
    }

    /// Encodes the pin sets (not `report`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pinSets, forKey: .pinSets)
    }
}
