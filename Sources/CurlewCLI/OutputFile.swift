import Foundation

/// `-o FILE` without `--download`: the body written to FILE (replacing it, as asked).
enum OutputFile {
    static func write(_ data: Data, to path: String) throws {
        do {
            try data.write(to: URL(fileURLWithPath: (path as NSString).expandingTildeInPath))
        } catch {
            throw ToolFailure(.error, "cannot write \(path): \(ToolFailure.oneLine(error))")
        }
    }
}
