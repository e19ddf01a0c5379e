import Foundation

/// A progress bar on standard error: redrawn in place on a terminal, a line per tenth of the
/// work otherwise (so a CI log shows progress without thousands of lines).
final class ProgressBar {
    private let total: Int
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private var lastTenth = -1
    private let width = 30

    init(total: Int) {
        self.total = max(1, total)
    }

    func show(_ done: Int, failed: Int) {
        let fraction = Double(min(done, total)) / Double(total)
        let line = "\(done)/\(total) done, \(failed) failed"
        if isTerminal {
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            FileHandle.standardError.write(Data("\r[\(bar)] \(line)".utf8))
        } else {
            let tenth = Int(fraction * 10)
            guard tenth != lastTenth else { return }
            lastTenth = tenth
            FileHandle.standardError.write(Data("progress: \(line)\n".utf8))
        }
    }

    func finish() {
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
