#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// One sample of what the process holds: resident memory, descriptors by kind, threads.
struct ProcessSample: Sendable, CustomStringConvertible {
    var rssBytes: Int
    var sockets: Int
    var files: Int
    var otherDescriptors: Int
    var threads: Int
    /// Threads named `curlew.drv.*`: one per live manager.
    var driverThreads: Int

    var descriptors: Int { sockets + files + otherDescriptors }
    var rssMiB: Double { Double(rssBytes) / 1_048_576 }

    var description: String {
        String(
            format: "RSS %.2f MiB, fds %d (sockets %d, files %d, other %d), threads %d (drivers %d)",
            rssMiB, descriptors, sockets, files, otherDescriptors, threads, driverThreads)
    }
}

/// Reads the process's own state from /proc with plain system calls: Foundation reads
/// /proc files as empty (their size is 0), and a soak must not allocate much to look.
enum ProcessProbe {
    static func sample() -> ProcessSample {
        let (sockets, files, other) = descriptorKinds()
        let (threads, drivers) = threadCounts()
        return ProcessSample(
            rssBytes: residentBytes(), sockets: sockets, files: files, otherDescriptors: other,
            threads: threads, driverThreads: drivers)
    }

    /// Resident set size: the second field of /proc/self/statm, in pages.
    static func residentBytes() -> Int {
        guard let text = readSmallFile("/proc/self/statm") else { return -1 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return -1 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Open descriptors by what they point at (the directory stream's own one excluded).
    static func descriptorKinds() -> (sockets: Int, files: Int, other: Int) {
        var sockets = 0, files = 0, other = 0
        guard let directory = opendir("/proc/self/fd") else { return (-1, -1, -1) }
        let own = dirfd(directory)
        var target = [CChar](repeating: 0, count: 512)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let number = Int32(name), number != own else { continue }
            let length = readlink("/proc/self/fd/\(name)", &target, target.count - 1)
            guard length > 0 else { continue }  // closed meanwhile
            let link = String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if link.hasPrefix("socket:") {
                sockets += 1
            } else if link.hasPrefix("/") && !link.hasPrefix("/dev/") {
                files += 1
            } else {
                other += 1  // pipes, eventfd, epoll, /dev/null, the terminal
            }
        }
        closedir(directory)
        return (sockets, files, other)
    }

    /// Every open descriptor and what it points at (for naming the ones left open).
    static func descriptorTable() -> [Int32: String] {
        var table: [Int32: String] = [:]
        guard let directory = opendir("/proc/self/fd") else { return table }
        let own = dirfd(directory)
        var target = [CChar](repeating: 0, count: 512)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let number = Int32(name), number != own else { continue }
            let length = readlink("/proc/self/fd/\(name)", &target, target.count - 1)
            guard length > 0 else { continue }
            table[number] = String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        closedir(directory)
        return table
    }

    /// The descriptors in `now` that `before` did not have, as "fd 9 -> anon_inode:[eventfd]".
    static func opened(since before: [Int32: String], now: [Int32: String]) -> [String] {
        now.filter { before[$0.key] != $0.value }.sorted { $0.key < $1.key }.map { "fd \($0.key) -> \($0.value)" }
    }

    /// All threads, and the manager driver threads among them.
    ///
    /// A driver thread is a Foundation `Thread`; Curlew names it `curlew.drv.N`, but that name
    /// does not reach the kernel here (`Thread.name` set before `start()`), so it keeps the
    /// name it inherits from the thread that created the manager: the main thread's, in this
    /// program. libdispatch names its worker threads after their queues. So a driver is a
    /// thread other than the main one named `curlew.drv…` or like the process.
    static func threadCounts() -> (all: Int, drivers: Int) {
        guard let directory = opendir("/proc/self/task") else { return (-1, -1) }
        let processName = readSmallFile("/proc/self/comm")
        let main = Int(getpid())
        var all = 0, drivers = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let thread = Int(name) else { continue }
            all += 1
            guard thread != main, let comm = readSmallFile("/proc/self/task/\(name)/comm") else { continue }
            if comm.hasPrefix("curlew.drv") || comm == processName { drivers += 1 }
        }
        closedir(directory)
        return (all, drivers)
    }

    /// Resident bytes by where they live, from /proc/self/smaps: the main heap (`[heap]`),
    /// anonymous mappings (other malloc arenas, large allocations, thread stacks), the rest
    /// (code, libraries). For telling what holds memory after a storm.
    static func residentByMapping() -> (heap: Int, anonymous: Int, other: Int) {
        let descriptor = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return (-1, -1, -1) }
        defer { close(descriptor) }
        var text: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            text.append(contentsOf: chunk[0..<count])
        }
        var heap = 0, anonymous = 0, other = 0
        var kind = 2
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.first?.isHexDigit == true {
                kind = fields.count < 6 ? 1 : (fields[5] == "[heap]" ? 0 : 2)
            } else if fields.first == "Rss:", fields.count > 1, let kilobytes = Int(fields[1]) {
                switch kind {
                case 0: heap += kilobytes * 1024
                case 1: anonymous += kilobytes * 1024
                default: other += kilobytes * 1024
                }
            }
        }
        return (heap, anonymous, other)
    }

    /// Up to 4 KiB of a /proc file, read with read(2).
    static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// Returns freed heap memory to the kernel, so that what RSS still shows is held memory
    /// (live objects and fragmentation), not the allocator's free lists.
    /// (glibc's `malloc_trim`, looked up at run time: the Glibc module does not export it.)
    static func trimHeap() {
        typealias Trim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }

    /// Monotonic seconds.
    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
