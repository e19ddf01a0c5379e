import ArgumentParser
import Foundation
import Reachability

/// `curlew reach [HOST] [--once]`: the network path (Reachability's
/// `NetworkReachabilityManager`) and each change of it, until interrupted.
struct ReachCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reach",
        abstract: "Print whether the network (or HOST) is reachable and over what, then each change until interrupted.")

    @Argument(help: "A host name to watch; default: the default route.")
    var host: String?

    @Flag(name: .customLong("once"), help: "Print the current path and exit (0 reachable, 1 not).")
    var once = false

    @Option(name: .customLong("timeout"), help: "With --once, how long to wait for the first answer, in seconds.")
    var timeout: Double = 10

    func validate() throws {
        if !timeout.isFinite || timeout < 0 { throw ValidationError("--timeout takes a number of seconds") }
    }

    func run() async throws {
        let manager: NetworkReachabilityManager
        if let host {
            guard let watched = NetworkReachabilityManager(domain: host) else {
                throw ValidationError("'\(host)' is not a host name")
            }
            manager = watched
        } else {
            manager = NetworkReachabilityManager()
        }
        manager.startMonitoring()
        defer { manager.stopMonitoring() }
        let stdout = Terminal.standardOutput
        let target = host ?? "default route"

        if once {
            let first = await Self.firstKnownStatus(manager, within: timeout)
            if let error = manager.monitoringError {
                throw ToolFailure(.error, "reach: \(ToolFailure.oneLine(error))").report()
            }
            stdout.write(Self.line(target: target, status: first, path: manager.networkPath))
            if !first.isReachable { throw ExitCode(ExitStatus.error.rawValue) }
            return
        }
        for await status in manager.statusUpdates where status != .unknown {
            stdout.write(Self.line(target: target, status: status, path: manager.networkPath))
        }
    }

    /// The first status other than `.unknown`, or `.unknown` when none came in time.
    private static func firstKnownStatus(_ manager: NetworkReachabilityManager, within seconds: Double) async -> NetworkReachabilityStatus {
        await withTaskGroup(of: NetworkReachabilityStatus.self) { group in
            group.addTask {
                for await status in manager.statusUpdates where status != .unknown { return status }
                return .unknown
            }
            group.addTask {
                // At most about 31 years: a `Duration` of 1e30 s would trap converting.
                try? await Task.sleep(for: .seconds(min(max(0, seconds), 1e9)))
                return .unknown
            }
            let first = await group.next() ?? .unknown
            group.cancelAll()
            return first
        }
    }

    /// "2026-11-25T21:40:00Z default route: reachable via Ethernet (eth0, gateway 10.0.0.1, from 10.0.0.5)".
    static func line(target: String, status: NetworkReachabilityStatus, path: NetworkPath?) -> String {
        var facts: [String] = []
        if let path {
            if let name = path.interfaceName { facts.append(name) }
            if let gateway = path.gateway { facts.append("gateway \(gateway)") }
            if let source = path.sourceAddress { facts.append("from \(source)") }
            if path.isVPN { facts.append("VPN") }
        }
        let stamp = ISO8601DateFormatter().string(from: Date())
        return "\(stamp) \(target): \(status.localizedDescription)" + (facts.isEmpty ? "" : " (\(facts.joined(separator: ", ")))") + "\n"
    }
}
