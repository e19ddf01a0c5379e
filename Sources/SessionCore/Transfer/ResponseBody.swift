import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The body a data task collects for its completion handler.
///
/// A small body is a `Data`. A large one, announced or grown past `mappingThreshold`, lives in
/// an anonymous mapping of its own (`BodyMapping`) and is handed over as `Data` without a copy:
/// - once 4 MiB have actually arrived, pages are faulted in 2 MiB ahead of the data with one
///   `madvise(MADV_POPULATE_WRITE)` each: filling a 1 GiB body through 262,144 page faults
///   cost the kernel more than receiving it (Docs/Performance.md). Not before, so a slow
///   transfer that announces a large body commits only what arrived;
/// - no transparent huge pages: on a VM whose host backs guest memory lazily they made a
///   1 GiB fill twice as slow half the time, and each commits 2 MiB at its first byte;
/// - the mapping grows with `mremap`, which moves page tables, not bytes;
/// - an announced length is untrusted: 16 MiB are reserved at first, the rest of it once that
///   much has arrived, and a length that was a lie costs address space only.
///
/// Noncopyable, so that no copy can share a mapping another one handed over. Not `Sendable`:
/// confined to the driver thread, inside its `TaskDelegate`.
struct ResponseBody: ~Copyable {
    /// Bodies from this size on go to a mapping. Below it, malloc serves as well (glibc maps
    /// large blocks itself, with small pages).
    static let mappingThreshold = 4 << 20
    /// What an announced length reserves before any of it arrived.
    static let firstReservation = 16 << 20
    /// The most reserved at once for an announced length: a quarter of the machine's memory.
    static let reservationCap: Int = {
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard pages > 0, pageSize > 0 else { return 1 << 30 }
        let (bytes, overflow) = pages.multipliedReportingOverflow(by: pageSize)
        return overflow ? Int.max / 4 : bytes / 4
    }()

    private var data = Data()
    private var mapping: BodyMapping?
    /// The length the response announced (`Content-Length`), or -1.
    private var announced: Int64 = -1
    /// The kernel refused a mapping once: the rest of this body stays in `data`.
    private var mappingRefused = false

    /// The bytes collected so far.
    var count: Int { mapping?.count ?? data.count }
    var isEmpty: Bool { count == 0 }
    /// Whether the bytes are in a mapping of their own.
    var isMapped: Bool { mapping != nil }
    /// The mapping's length, if the bytes are in one.
    var mappedCapacity: Int? { mapping?.capacity }
    /// Where the mapping's pages populated ahead of the data end, if the bytes are in one.
    var mappedPopulatedEnd: Int? { mapping?.populatedEnd }
    /// Whether the mapping still populates ahead (false where the kernel refused).
    var mappedPopulates: Bool { mapping?.populates ?? false }

    /// Notes the length the response announced. Untrusted: it sizes reservations only.
    mutating func expect(_ length: Int64) { announced = length }

    /// Forgets the bytes and the announced length (another response follows).
    mutating func reset() {
        data = Data()
        mapping = nil
        announced = -1
        mappingRefused = false
    }

    /// Appends one chunk with one copy. False when the body's mapping cannot grow (the kernel
    /// refused more address space): the transfer must fail, since the body cannot be kept.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
        if let mapping { return mapping.append(bytes) }
        if data.isEmpty {
            if Int64(bytes.count) == announced {
                // The whole announced body in one chunk (a small response): one allocation
                // and one copy, where reserving and appending cost several times that.
                data = Data(bytes: base, count: bytes.count)
                return true
            }
            if announced >= Int64(Self.mappingThreshold), startMapping(needing: bytes.count, with: bytes) { return true }
            if announced > 0 { data.reserveCapacity(Int(min(announced, Int64(Self.mappingThreshold)))) }
        } else if data.count + bytes.count > Self.mappingThreshold, startMapping(needing: data.count + bytes.count, with: bytes) {
            return true
        }
        data.append(base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        return true
    }

    /// Moves the body into a new mapping for at least `needed` bytes; false when the kernel
    /// refuses (then the body stays in `data` for good), and nothing changed.
    private mutating func startMapping(needing needed: Int, with bytes: UnsafeRawBufferPointer) -> Bool {
        guard !mappingRefused else { return false }
        let planned = announced > Int64(needed)
            ? max(needed, Int(min(announced, Int64(Self.firstReservation))))
            : needed.multipliedReportingOverflow(by: 2).overflow ? needed : needed * 2
        let cappedAnnouncement = Int(min(max(announced, 0), Int64(Self.reservationCap)))
        guard let mapped = BodyMapping(capacity: planned, announced: cappedAnnouncement) else {
            mappingRefused = true
            return false
        }
        let carried = data.withUnsafeBytes { mapped.append($0) } && mapped.append(bytes)
        guard carried else {
            mappingRefused = true
            return false
        }
        data = Data()
        mapping = mapped
        return true
    }

    /// Reads the bytes collected so far.
    func withUnsafeBytes<Result>(_ read: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let mapping { return mapping.withUnsafeBytes(read) }
        return data.withUnsafeBytes(read)
    }

    /// Hands the body over (no copy) and leaves this one empty.
    mutating func take() -> Data {
        defer { reset() }
        return mapping?.takeData() ?? data
    }
}

/// A large body's anonymous mapping: advised against transparent huge pages (the system
/// setting may be "always"), populated ahead of the data once `populateThreshold` bytes
/// arrived, grown with `mremap`. Unmapped when dropped, unless handed over as `Data`.
///
/// Not `Sendable`: owned by one `ResponseBody` on the driver thread.
final class BodyMapping {
    static let pageSize = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))
    /// Bytes that must have arrived before pages are populated ahead of the data.
    static let populateThreshold = 4 << 20
    /// How far ahead one `madvise(MADV_POPULATE_WRITE)` faults pages in: at most this much
    /// memory is committed beyond the bytes received.
    static let populateWindow = 2 << 20
    /// `MADV_POPULATE_WRITE` (Linux 5.14; Glibc's Swift module does not name it). Older
    /// kernels refuse it with EINVAL, and the pages are then faulted one by one as before.
    private static let populateWrite: Int32 = 23

    private var base: UnsafeMutableRawPointer
    /// The mapped length, a multiple of the page size.
    private(set) var capacity: Int
    private(set) var count = 0
    /// The length the response announced (capped), or 0: what growth aims for.
    private let announced: Int
    private var isHandedOver = false
    /// Where the pages populated ahead of the data end (an offset).
    private(set) var populatedEnd = 0
    /// False once the kernel refused to populate (too old, or out of memory).
    private(set) var populates = true

    /// Maps at least `wanted` bytes; nil when the kernel refuses. `announced`: the body's
    /// announced length (capped), or 0.
    init?(capacity wanted: Int, announced: Int = 0) {
        guard wanted > 0, let length = Self.roundUp(wanted, to: Self.pageSize),
            let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            UInt(bitPattern: base) != UInt.max  // MAP_FAILED
        else { return nil }
        // Under the "always" setting every large anonymous mapping would get huge pages.
        _ = madvise(base, length, MADV_NOHUGEPAGE)
        self.base = base
        capacity = length
        self.announced = announced
    }

    deinit {
        if !isHandedOver { munmap(base, capacity) }
    }

    /// Copies `bytes` in, growing the mapping when needed; false when it cannot grow.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return true }
        let (needed, overflow) = count.addingReportingOverflow(bytes.count)
        guard !overflow else { return false }
        if needed > capacity, !grow(to: needed) { return false }
        if populates && needed >= Self.populateThreshold && needed > populatedEnd { populate(through: needed) }
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count = needed
        return true
    }

    /// Faults in the pages from the last populated one through `needed` and up to a window
    /// past it, in one system call instead of one fault per page.
    private func populate(through needed: Int) {
        let start = max(populatedEnd, count & ~(Self.pageSize - 1))
        let end = min(capacity, (needed + Self.populateWindow - 1) & ~(Self.populateWindow - 1))
        guard end > start else { return }
        guard madvise(base + start, end - start, Self.populateWrite) == 0 else {
            populates = false
            return
        }
        populatedEnd = end
    }

    /// Reads the bytes written so far.
    func withUnsafeBytes<Result>(_ read: (UnsafeRawBufferPointer) -> Result) -> Result {
        read(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The bytes as `Data` that owns the mapping (unmapped when the last copy goes); the unused
    /// tail is unmapped now.
    func takeData() -> Data {
        let used = Self.roundUp(count, to: Self.pageSize) ?? capacity
        if used < capacity { munmap(base + used, capacity - used) }
        isHandedOver = true
        guard count > 0 else { return Data() }
        return Data(bytesNoCopy: base, count: count, deallocator: .custom { pointer, _ in munmap(pointer, used) })
    }

    /// Grows to the announced length once the body outgrew its reservation (bytes arrived, so
    /// the announcement is worth its address space), by doubling past it.
    private func grow(to needed: Int) -> Bool {
        let doubled = capacity.multipliedReportingOverflow(by: 2)
        let target = announced > needed ? announced : (doubled.overflow ? needed : max(needed, doubled.partialValue))
        guard let length = Self.roundUp(target, to: Self.pageSize),
            let moved = PageRemap.grow(base, from: capacity, to: length)
        else { return false }
        // The pages keep their contents and the mapping its advice wherever it went.
        base = moved
        capacity = length
        return true
    }

    /// `value` rounded up to a multiple of `unit` (a power of two), or nil on overflow.
    private static func roundUp(_ value: Int, to unit: Int) -> Int? {
        let (sum, overflow) = value.addingReportingOverflow(unit - 1)
        return overflow ? nil : sum & ~(unit - 1)
    }
}
