import Foundation

/// One JSON line: the result of one client on one workload. Keys keep their order so the
/// lines stay readable; `Scripts/bench.sh` aggregates them.
struct Report {
    enum Value {
        case string(String)
        case int(Int)
        case number(Double)
        case null

        var json: String {
            switch self {
            case .string(let text): return Report.quote(text)
            case .int(let value): return String(value)
            case .number(let value): return value.isFinite ? String(format: "%.6g", value) : "null"
            case .null: return "null"
            }
        }
    }

    private(set) var fields: [(String, Value)] = []

    mutating func add(_ key: String, _ value: Value) { fields.append((key, value)) }

    var line: String {
        "{" + fields.map { "\(Report.quote($0.0)):\($0.1.json)" }.joined(separator: ",") + "}"
    }

    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// The line for a workload the client cannot do.
    static func notApplicable(client: String, workload: String, reason: String, status: String = "n/a") -> Report {
        var report = Report()
        report.add("client", .string(client))
        report.add("workload", .string(workload))
        report.add("status", .string(status))
        report.add("reason", .string(reason))
        return report
    }

    /// The line for a finished run.
    static func measured(
        client: String, spec: WorkloadSpec, scale: Double, outcome: Outcome, before: ProcessUsage, after: ProcessUsage
    ) -> Report {
        let seconds = after.wallSeconds - before.wallSeconds
        let cpu = after.cpuSeconds - before.cpuSeconds
        var report = Report()
        report.add("client", .string(client))
        report.add("workload", .string(spec.workload.rawValue))
        var status = outcome.errors == 0 ? "ok" : "errors"
        var reason = outcome.firstError
        if let slow = outcome.slow, slow.receiving < slow.requested {
            status = "n/a"
            reason = "only \(slow.receiving) of \(slow.requested) transfers were receiving after \(Int(spec.deadline)) s"
                + (reason.map { "; first error: \($0)" } ?? "")
        }
        report.add("status", .string(status))
        report.add("reason", reason.map { .string($0) } ?? .null)
        report.add("scale", .number(scale))
        report.add("requests", .int(outcome.completed))
        report.add("errors", .int(outcome.errors))
        report.add("seconds", .number(seconds))
        let requests = Double(max(outcome.completed, 1))
        report.add("req_per_s", .number(Double(outcome.completed) / seconds))
        report.add("cpu_s", .number(cpu))
        report.add("cpu_us_per_req", .number(cpu / requests * 1e6))
        report.add("cpu_s_per_1000_req", .number(cpu / requests * 1000))
        report.add("peak_rss_kb", .int(ProcessUsage.peakRSSKilobytes))
        report.add("bytes", .int(Int(outcome.bytes)))
        switch spec.kind {
        case .download, .downloadToFile, .upload:
            report.add("mb_per_s", .number(Double(outcome.bytes) / 1e6 / seconds))
        case .gets, .slowOpen:
            report.add("mb_per_s", .null)
        }
        if let slow = outcome.slow {
            report.add("transfers_requested", .int(slow.requested))
            report.add("transfers_receiving", .int(slow.receiving))
            report.add("baseline_rss_kb", .int(slow.baselineRSSKilobytes))
            report.add("open_rss_kb", .int(slow.openRSSKilobytes))
            let perTransfer = Double(slow.openRSSKilobytes - slow.baselineRSSKilobytes) / Double(max(slow.requested, 1))
            report.add("kb_per_transfer", .number(perTransfer))
        }
        return report
    }
}
