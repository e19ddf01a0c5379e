import Foundation

/// Command-line options of curlew-soak.
struct SoakOptions: Sendable {
    enum Mode: Sendable { case mixed, cancelStorm, managerChurn }

    var mode = Mode.mixed
    /// Mixed mode: requests in all; cancel storm: transfers per round; churn: managers.
    var count = 1_000_000
    var concurrency = 64
    /// Mixed mode: requests between two reports (the first interval is the warm-up).
    var interval = 100_000
    var rounds = 3
    var seed: UInt64 = 0x5eed
    var httpPort = 27180
    var slowPort = 27181
    /// Where downloads go (temporary files and destinations): a directory of this run's own
    /// inside `--dir` (a run killed earlier may have left files in `--dir`); it must be empty
    /// at the end, and is then removed.
    var directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("curlew-soak-\(getpid())")
    /// The longest wait for any one phase (a segment, a storm round, the churn's settling).
    var phaseTimeout: Double = 300

    static let usage = """
        usage: curlew-soak [--requests N] [--concurrency C] [--interval N] [--seed S]
               curlew-soak --cancel-storm N [--rounds R]
               curlew-soak --manager-churn N
        common: [--http-port P] [--slow-port P] [--dir PATH] [--phase-timeout SECONDS]
        Runs against Scripts/bench.sh's nginx (see Docs/Reliability.md); exits 1 on failure.
        """

    static func parse(_ arguments: [String]) -> SoakOptions? {
        var options = SoakOptions()
        var index = 0
        func value() -> String? {
            index += 1
            return index < arguments.count ? arguments[index] : nil
        }
        func int() -> Int? { value().flatMap { Int($0.replacingOccurrences(of: "_", with: "")) } }
        while index < arguments.count {
            switch arguments[index] {
            case "--requests": guard let v = int(), v > 0 else { return nil }; options.count = v
            case "--cancel-storm": guard let v = int(), v > 0 else { return nil }; options.mode = .cancelStorm; options.count = v
            case "--manager-churn": guard let v = int(), v > 0 else { return nil }; options.mode = .managerChurn; options.count = v
            case "--concurrency": guard let v = int(), v > 0 else { return nil }; options.concurrency = v
            case "--interval": guard let v = int(), v > 0 else { return nil }; options.interval = v
            case "--rounds": guard let v = int(), v > 0 else { return nil }; options.rounds = v
            case "--seed": guard let v = value().flatMap({ UInt64($0) }) else { return nil }; options.seed = v
            case "--http-port": guard let v = int() else { return nil }; options.httpPort = v
            case "--slow-port": guard let v = int() else { return nil }; options.slowPort = v
            case "--dir":
                guard let v = value() else { return nil }
                options.directory = URL(fileURLWithPath: v).appendingPathComponent("run-\(getpid())")
            case "--phase-timeout": guard let v = value().flatMap({ Double($0) }), v > 0 else { return nil }; options.phaseTimeout = v
            default: return nil
            }
            index += 1
        }
        return options
    }

    func url(_ path: String, slow: Bool = false) -> URL {
        // Force-unwrap-free: the ports are numbers, the paths are the soak's own.
        URL(string: "http://127.0.0.1:\(slow ? slowPort : httpPort)\(path)") ?? URL(fileURLWithPath: "/")
    }
}

/// A deterministic stream of numbers per task (SplitMix64), so a run can be repeated.
struct Dice {
    private var state: UInt64
    init(seed: UInt64, id: Int) { state = seed &+ UInt64(truncatingIfNeeded: id) &* 0x9E37_79B9_7F4A_7C15 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A number in 0..<bound.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
}
