import Foundation

/// The report printed at the end: counts, throughput, bytes, failures by kind.
struct Summary {
    let counts: Tally.Counts
    let total: Int
    let seconds: TimeInterval

    var text: String {
        let rate = seconds > 0 ? Double(counts.written) / seconds : 0
        var lines = [
            "thumbnails: \(counts.written) written, \(counts.failed) failed, of \(total) URLs",
            "time: \(String(format: "%.2f", seconds)) s, \(String(format: "%.1f", rate)) images/s",
            "bytes: \(counts.bytesDownloaded) downloaded, \(counts.bytesWritten) written",
        ]
        for (kind, count) in counts.failures.sorted(by: { $0.key < $1.key }) {
            lines.append("failed: \(count) \(kind), e.g. \(counts.examples[kind] ?? "")")
        }
        return lines.joined(separator: "\n")
    }
}
