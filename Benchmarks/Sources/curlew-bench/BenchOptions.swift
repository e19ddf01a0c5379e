import Foundation

/// The command line of one benchmark process: one client, one workload.
struct BenchOptions: Sendable {
    /// Thrown for a command line this tool does not understand.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    var client = ""
    var workload = ""
    /// Multiplies every workload's transfer count (`--scale 0.1` for a quick run).
    var scale = 1.0
    /// Where `Scripts/bench.sh` put the CA, the upload file and nginx's files.
    var directory = ".build/bench"
    var host = "127.0.0.1"
    var httpPort = 27180
    var http2Port = 27543
    var resumePort = 27544
    var noResumePort = 27545
    var slowPort = 27181
    /// How long the slow workload waits for every transfer to be receiving.
    var slowDeadline = 30.0
    var listOnly = false

    static let usage = """
        usage: curlew-bench --client \(BenchClientKind.allCases.map(\.rawValue).joined(separator: "|"))
                            --workload NAME [--scale X]
                            [--dir .build/bench] [--host 127.0.0.1] [--http-port N] [--slow-port N]
                            [--h2-port N] [--resume-port N] [--noresume-port N] [--slow-deadline S]
               curlew-bench --list        (prints the workload names)
        Prints one JSON line. SCALE may also come from CURLEW_BENCH_SCALE.
        """

    static func parse(_ arguments: [String]) throws(UsageError) -> BenchOptions {
        var options = BenchOptions()
        if let scale = ProcessInfo.processInfo.environment["CURLEW_BENCH_SCALE"], let value = Double(scale) {
            options.scale = value
        }
        var remaining = arguments.dropFirst()
        func value(_ flag: String) throws(UsageError) -> String {
            guard let next = remaining.popFirst() else { throw UsageError(description: "\(flag) needs a value\n\(usage)") }
            return next
        }
        func number<T: LosslessStringConvertible>(_ flag: String) throws(UsageError) -> T {
            let text = try value(flag)
            guard let parsed = T(text) else { throw UsageError(description: "\(flag): '\(text)' is not a number") }
            return parsed
        }
        while let flag = remaining.popFirst() {
            switch flag {
            case "--client": options.client = try value(flag)
            case "--workload": options.workload = try value(flag)
            case "--scale": options.scale = try number(flag)
            case "--dir": options.directory = try value(flag)
            case "--host": options.host = try value(flag)
            case "--http-port": options.httpPort = try number(flag)
            case "--slow-port": options.slowPort = try number(flag)
            case "--h2-port": options.http2Port = try number(flag)
            case "--resume-port": options.resumePort = try number(flag)
            case "--noresume-port": options.noResumePort = try number(flag)
            case "--slow-deadline": options.slowDeadline = try number(flag)
            case "--list": options.listOnly = true
            case "-h", "--help": throw UsageError(description: usage)
            default: throw UsageError(description: "unknown argument '\(flag)'\n\(usage)")
            }
        }
        guard options.scale > 0 else { throw UsageError(description: "--scale must be positive") }
        return options
    }
}
