import Foundation
import Synchronization

/// What the run has done so far; updated from the download and encoding threads.
final class Tally: Sendable {
    struct Counts {
        var written = 0
        var failed = 0
        var bytesDownloaded = 0
        var bytesWritten = 0
        var failures: [String: Int] = [:]
        /// The first failure of each kind, to show what it looked like.
        var examples: [String: String] = [:]
        var finished: Int { written + failed }
    }

    private let counts = Mutex(Counts())

    var snapshot: Counts { counts.withLock { $0 } }

    func succeeded(downloaded: Int, written: Int) {
        counts.withLock {
            $0.written += 1
            $0.bytesDownloaded += downloaded
            $0.bytesWritten += written
        }
    }

    func failed(_ url: URL?, _ error: any Error) {
        let kind = FailureKind.of(error)
        counts.withLock {
            $0.failed += 1
            $0.failures[kind, default: 0] += 1
            if $0.examples[kind] == nil { $0.examples[kind] = "\(url?.absoluteString ?? "?"): \(error)" }
        }
    }
}
