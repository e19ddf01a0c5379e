import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Wall clock and CPU time (getrusage RUSAGE_SELF, user + system) at one instant.
struct Usage {
    let wall: Double
    let cpu: Double

    static func now() -> Usage {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return Usage(wall: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9, cpu: cpu)
    }
}

/// One measured pass, printed as one JSON line for Scripts/bench-pipeline.sh.
struct PassResult: Encodable {
    var variant: String
    var images: Int
    var errors: Int
    var seconds: Double
    var imagesPerSecond: Double
    var cpuMillisecondsPerImage: Double
    var width: Int
    var height: Int
    /// The C baseline only: when the last body had arrived (decoding may go on after).
    var transferSeconds: Double?

    init(variant: String, images: Int, errors: Int, start: Usage, end: Usage, width: Int, height: Int) {
        self.variant = variant
        self.images = images
        self.errors = errors
        seconds = end.wall - start.wall
        imagesPerSecond = seconds > 0 ? Double(images) / seconds : 0
        cpuMillisecondsPerImage = images > 0 ? (end.cpu - start.cpu) * 1000 / Double(images) : 0
        self.width = width
        self.height = height
    }

    func printLine() {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        guard let data = try? encoder.encode(self), let line = String(data: data, encoding: .utf8) else { return }
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
