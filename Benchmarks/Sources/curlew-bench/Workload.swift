import Foundation

/// The workloads, by the names used in the JSON and by `Scripts/bench.sh` (keep them stable).
enum Workload: String, CaseIterable, Sendable {
    case getH1C1 = "get-h1-c1"
    case getH1C64 = "get-h1-c64"
    case getH1C256 = "get-h1-c256"
    case getH2TLSC64 = "get-h2-tls-c64"
    case download1GMemory = "download-1g-memory"
    case download1GFile = "download-1g-file"
    case upload256MFile = "upload-256m-file"
    case tlsNewConnResume = "tls-new-conn-resume"
    case tlsNewConnNoResume = "tls-new-conn-noresume"
    case slow10KOpen = "slow-10k-open"

    /// What one client does for a workload, with the counts already scaled.
    func spec(_ options: BenchOptions) -> WorkloadSpec {
        let http = "http://\(options.host):\(options.httpPort)"
        let ca = "\(options.directory)/ca.pem"
        func scaled(_ count: Int, minimum: Int = 1) -> Int { max(minimum, Int((Double(count) * options.scale).rounded())) }
        func tls(_ port: Int) -> String { "https://\(options.host):\(port)" }
        switch self {
        case .getH1C1:
            return WorkloadSpec(workload: self, kind: .gets, url: "\(http)/small.txt", count: scaled(20_000), concurrency: 1)
        case .getH1C64:
            return WorkloadSpec(workload: self, kind: .gets, url: "\(http)/small.txt", count: scaled(100_000), concurrency: 64)
        case .getH1C256:
            return WorkloadSpec(workload: self, kind: .gets, url: "\(http)/small.txt", count: scaled(100_000), concurrency: 256)
        case .getH2TLSC64:
            return WorkloadSpec(
                workload: self, kind: .gets, url: "\(tls(options.http2Port))/small.txt", count: scaled(100_000),
                concurrency: 64, http2: true, caFile: ca)
        case .download1GMemory:
            return WorkloadSpec(workload: self, kind: .download, url: "\(http)/1g.bin", count: 1, concurrency: 1)
        case .download1GFile:
            // In the bench's own directory, so every client writes (and renames) on one file
            // system; named after the process so a leftover never collides with a later run.
            let downloads = "\(options.directory)/downloads"
            let target = DownloadTarget(
                directory: downloads,
                path: "\(downloads)/1g-\(ProcessInfo.processInfo.processIdentifier).bin",
                expectedSize: DownloadTarget.size(of: "\(options.directory)/www/1g.bin"))
            return WorkloadSpec(
                workload: self, kind: .downloadToFile, url: "\(http)/1g.bin", count: 1, concurrency: 1,
                download: target)
        case .upload256MFile:
            let file = "\(options.directory)/upload-256m.bin"
            return WorkloadSpec(
                workload: self, kind: .upload, url: "\(http)/upload", count: 1, concurrency: 1, uploadFile: file)
        case .tlsNewConnResume:
            return WorkloadSpec(
                workload: self, kind: .gets, url: "\(tls(options.resumePort))/small.txt", count: scaled(5_000),
                concurrency: 16, caFile: ca, connectionClose: true)
        case .tlsNewConnNoResume:
            return WorkloadSpec(
                workload: self, kind: .gets, url: "\(tls(options.noResumePort))/small.txt", count: scaled(5_000),
                concurrency: 16, caFile: ca, connectionClose: true)
        case .slow10KOpen:
            let count = scaled(10_000, minimum: 10)
            return WorkloadSpec(
                workload: self, kind: .slowOpen, url: "http://\(options.host):\(options.slowPort)/slow.bin", count: count,
                concurrency: count, deadline: options.slowDeadline)
        }
    }
}

/// One workload as a client runs it.
struct WorkloadSpec: Sendable {
    enum Kind: Sendable {
        /// `count` requests, `concurrency` in flight, bodies collected in memory.
        case gets
        /// One large body into memory.
        case download
        /// One large body into the file `download` names.
        case downloadToFile
        /// One POST whose body streams from `uploadFile`.
        case upload
        /// `count` slow transfers held open at once, then cancelled: memory per transfer.
        case slowOpen
    }

    let workload: Workload
    let kind: Kind
    let url: String
    let count: Int
    let concurrency: Int
    var http2 = false
    var caFile: String?
    var connectionClose = false
    var uploadFile: String?
    /// Where `.downloadToFile` puts its file (and its temporaries).
    var download: DownloadTarget?
    var deadline = 30.0

    var isTLS: Bool { url.hasPrefix("https:") }

    /// The upload file's size in bytes (0 when there is none or it cannot be read).
    var uploadSize: Int64 {
        guard let uploadFile, let attributes = try? FileManager.default.attributesOfItem(atPath: uploadFile),
            let size = attributes[.size] as? NSNumber
        else { return 0 }
        return size.int64Value
    }
}
