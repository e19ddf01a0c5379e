import Foundation

// One client, one workload, one process: CPU and RSS figures belong to that client alone.

let options: BenchOptions
do {
    options = try BenchOptions.parse(CommandLine.arguments)
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(2)
}

if options.listOnly {
    print(Workload.allCases.map(\.rawValue).joined(separator: "\n"))
    exit(0)
}

guard let workload = Workload(rawValue: options.workload) else {
    FileHandle.standardError.write(Data("unknown workload '\(options.workload)'\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
guard let client = BenchClientKind(rawValue: options.client) else {
    FileHandle.standardError.write(Data("unknown client '\(options.client)'\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}

let spec = workload.spec(options)
var exitCode: Int32 = 0
do {
    try spec.download?.prepare()
    let before = ProcessUsage.now()
    var outcome = try await client.run(spec)
    let after = ProcessUsage.now()
    if let download = spec.download { outcome = download.checked(outcome) }
    emit(Report.measured(client: client.rawValue, spec: spec, scale: options.scale, outcome: outcome, before: before, after: after).line)
} catch let error as Unsupported {
    emit(Report.notApplicable(client: client.rawValue, workload: workload.rawValue, reason: error.reason).line)
} catch {
    emit(Report.notApplicable(client: client.rawValue, workload: workload.rawValue, reason: "\(error)", status: "failed").line)
    exitCode = 1
}
spec.download?.remove()  // after the measurement, whatever happened
exit(exitCode)

/// Writes the JSON line unbuffered: the process exits right after.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
