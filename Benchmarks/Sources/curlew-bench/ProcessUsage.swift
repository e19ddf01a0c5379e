#if canImport(Glibc)
import Glibc
#endif
import CLibcurlBench

/// Wall clock and CPU time (getrusage RUSAGE_SELF, user + system) at one instant.
struct ProcessUsage {
    let wallSeconds: Double
    let cpuSeconds: Double

    static func now() -> ProcessUsage {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ value: timeval) -> Double { Double(value.tv_sec) + Double(value.tv_usec) / 1e6 }
        return ProcessUsage(
            wallSeconds: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9,
            cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime))
    }

    /// Peak resident set size of the process so far (ru_maxrss), in KiB.
    static var peakRSSKilobytes: Int {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss
    }

    /// Resident set size now, in KiB.
    static var currentRSSKilobytes: Int { lcb_current_rss_kb() }
}
