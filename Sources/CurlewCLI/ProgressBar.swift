import Foundation

/// The download progress line on standard error: bytes, percentage, speed and ETA.
///
/// Drawn only when standard error is a terminal, at most ten times a second, and
/// rewritten in place with a carriage return.
final class ProgressBar: @unchecked Sendable {  // state guarded by `lock`
    private let lock = NSLock()
    private let terminal: Terminal
    private let start = ContinuousClock.now
    private var lastDraw: ContinuousClock.Instant?
    private let startBytes: Int64

    init(terminal: Terminal = .standardError, startBytes: Int64 = 0) {
        self.terminal = terminal
        self.startBytes = startBytes
    }

    /// Redraws with `written` of `expected` bytes (-1: unknown), unless drawn very recently.
    func update(written: Int64, expected: Int64, force: Bool = false) {
        lock.lock()
        defer { lock.unlock() }
        let now = ContinuousClock.now
        if !force, let lastDraw, now - lastDraw < .milliseconds(100) { return }
        lastDraw = now
        let elapsed = Self.seconds(now - start)
        terminal.write("\r" + Self.line(written: written, expected: expected, startBytes: startBytes, elapsed: elapsed) + "\u{1B}[K")
    }

    /// Ends the line.
    func finish() {
        terminal.write("\n")
    }

    /// The text of the line, e.g. ` 42% [=========>          ] 4.2 MB  1.1 MB/s  ETA 5s`.
    static func line(written: Int64, expected: Int64, startBytes: Int64, elapsed: Double) -> String {
        // The bytes of this run only: a continued download starts with those already on disk
        // (and a server whose file changed starts again from 0).
        let speed = elapsed > 0 ? Double(max(0, written - startBytes)) / elapsed : 0
        var text = ""
        if expected > 0 {
            let fraction = min(1, Double(written) / Double(expected))
            let width = 24
            let filled = Int(fraction * Double(width))
            text += String(format: "%3d%% [", Int(fraction * 100)) + String(repeating: "=", count: filled)
                + (filled < width ? ">" + String(repeating: " ", count: width - filled - 1) : "") + "] "
            text += byteCount(written) + " of " + byteCount(expected)
        } else {
            text += byteCount(written)
        }
        // A server's length is any Int64 and the first byte may come late: a rate or a wait
        // past what an Int64 holds (1 TB at 1 B/s, a tiny elapsed time) trapped on conversion.
        // A wait beyond 100 days is no estimate worth showing.
        text += "  " + byteCount(speed < 9e18 ? Int64(speed) : .max) + "/s"
        if expected > 0, speed > 0, written < expected {
            let eta = (Double(expected) - Double(written)) / speed
            text += eta <= 8_640_000 ? "  ETA \(Int(eta.rounded(.up)))s" : "  ETA --"
        }
        return text
    }

    /// "512 B", "4.2 kB", "1.1 MB" (decimal units).
    static func byteCount(_ bytes: Int64) -> String {
        let units = ["B", "kB", "MB", "GB", "TB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    private static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
