import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif
@testable import SessionCore

/// `ResponseBody`, where a data task collects its body: a `Data` for small bodies, a mapping of
/// its own (populated ahead, grown with `mremap`) for large ones.
final class ResponseBodyTests: XCTestCase {
    /// A pattern per position, led by the chunk's index, so a misplaced or repeated chunk shows.
    private func chunk(_ index: Int, size: Int) -> [UInt8] {
        var bytes = pattern.count >= size ? Array(pattern[..<size]) : (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        withUnsafeBytes(of: UInt64(index).littleEndian) { index in
            for offset in 0..<min(8, size) { bytes[offset] = index[offset] }
        }
        return bytes
    }

    private let pattern = (0..<(128 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 13) }

    /// Appends `count` chunks of `size` bytes to `body` and returns the expected bytes.
    private func fill(_ body: inout ResponseBody, chunks count: Int, size: Int) -> Data {
        var expected = Data(capacity: count * size)
        for index in 0..<count {
            let bytes = chunk(index, size: size)
            XCTAssertTrue(bytes.withUnsafeBytes { body.append($0) }, "chunk \(index) refused")
            expected.append(contentsOf: bytes)
        }
        return expected
    }

    /// Appends one chunk of `bytes`.
    private func append(_ bytes: [UInt8], to body: inout ResponseBody) {
        XCTAssertTrue(bytes.withUnsafeBytes { body.append($0) }, "a chunk was refused")
    }

    func testASmallAnnouncedBodyInOneChunkStaysData() {
        var body = ResponseBody()
        body.expect(100)
        let expected = fill(&body, chunks: 1, size: 100)
        XCTAssertFalse(body.isMapped)
        XCTAssertEqual(body.take(), expected)
        XCTAssertTrue(body.isEmpty, "take leaves the body empty")
    }

    func testALargeAnnouncedBodyGoesToAMappingAndArrivesWhole() {
        var body = ResponseBody()
        body.expect(Int64(12 << 20))
        let expected = fill(&body, chunks: 192, size: 64 << 10)
        XCTAssertTrue(body.isMapped)
        XCTAssertEqual(body.count, 12 << 20)
        XCTAssertTrue(body.take() == expected, "the bytes differ")
        XCTAssertFalse(body.isMapped)
    }

    /// A body larger than announced (a decoded body, or a wrong length) grows the mapping,
    /// elsewhere when the address space after it is taken, with every byte kept.
    func testAMappingGrowsPastAnUnderstatedLengthWhereverItMustMove() {
        var body = ResponseBody()
        body.expect(Int64(5 << 20))
        var expected = fill(&body, chunks: 1, size: 4096)
        // A page right after the mapping, so that it cannot grow in place and must move.
        let first = body.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        let end = UnsafeMutableRawPointer(bitPattern: first + UInt(body.mappedCapacity ?? 0))
        let blocker = mmap(end, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | 0x100000 /* MAP_FIXED_NOREPLACE */, -1, 0)
        defer { if let blocker, UInt(bitPattern: blocker) != UInt.max { munmap(blocker, 4096) } }
        expected.append(fill(&body, chunks: 300, size: 64 << 10 + 3))  // ~19 MiB, odd chunk size
        XCTAssertTrue(body.isMapped)
        let base = body.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        XCTAssertNotEqual(base, first, "the mapping grew in place over another mapping")
        XCTAssertTrue(body.take() == expected, "the bytes differ")
    }

    /// An announced length reserves 16 MiB at first, the rest once 16 MiB have arrived.
    func testAnAnnouncementReservesInTwoSteps() {
        var body = ResponseBody()
        body.expect(Int64(64 << 20))
        _ = fill(&body, chunks: 1, size: 4096)
        XCTAssertEqual(body.mappedCapacity, ResponseBody.firstReservation)
        _ = fill(&body, chunks: 260, size: 64 << 10)  // past 16 MiB
        XCTAssertEqual(body.mappedCapacity, 64 << 20)
        var terabyte = ResponseBody()
        terabyte.expect(Int64(1) << 40)
        _ = fill(&terabyte, chunks: 1, size: 1)
        XCTAssertEqual(terabyte.mappedCapacity, ResponseBody.firstReservation, "a lie reserved more than 16 MiB")
    }

    /// No announced length (chunked): `Data` first, then a mapping once past the threshold.
    func testAnUnannouncedBodyMovesToAMappingPastTheThreshold() {
        var body = ResponseBody()
        var expected = fill(&body, chunks: 10, size: 100 << 10)
        XCTAssertFalse(body.isMapped, "1 MB stays in Data")
        var index = 10
        while body.count <= ResponseBody.mappingThreshold {
            let bytes = chunk(index, size: 100 << 10)
            append(bytes, to: &body)
            expected.append(contentsOf: bytes)
            index += 1
        }
        XCTAssertTrue(body.isMapped)
        for _ in 0..<100 {
            let bytes = chunk(index, size: 100 << 10)
            append(bytes, to: &body)
            expected.append(contentsOf: bytes)
            index += 1
        }
        XCTAssertTrue(body.take() == expected, "the bytes differ")
    }

    /// A large announcement with nothing after it: an empty body, the mapping gone.
    func testEmptyAndResetBodies() {
        var body = ResponseBody()
        body.expect(Int64(1) << 40)
        XCTAssertEqual(body.take(), Data())
        body.expect(Int64(64 << 20))
        _ = fill(&body, chunks: 1, size: 1)
        XCTAssertTrue(body.isMapped)
        let base = body.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        body.reset()
        XCTAssertFalse(isMapped(base), "reset left the mapping in place")
        XCTAssertFalse(body.isMapped)
        XCTAssertEqual(body.count, 0)
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        XCTAssertTrue(body.append(empty))
        XCTAssertEqual(body.take(), Data())
    }

    /// The delivered `Data` owns the mapping: its unused tail is unmapped at once, the rest when
    /// the last copy of the `Data` goes.
    func testTheDeliveredDataOwnsAndReleasesItsMapping() throws {
        var body = ResponseBody()
        body.expect(Int64(256 << 20))  // announced 256 MiB, 5 MiB arrive
        _ = fill(&body, chunks: 80, size: 64 << 10)
        var data: Data? = body.take()
        let base = try XCTUnwrap(data?.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) })
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        XCTAssertTrue(isMapped(base), "the body's first page")
        XCTAssertTrue(isMapped(base + UInt(5 << 20) - UInt(page)), "the body's last page")
        XCTAssertFalse(isMapped(base + UInt(5 << 20)), "the unused tail is unmapped on delivery")
        data = nil
        XCTAssertFalse(isMapped(base), "the mapping goes with the last Data")
    }

    /// Pages are populated ahead of the data once 4 MiB have arrived, at most a window ahead,
    /// and never before: a slow transfer announcing a large body commits only what arrived
    /// (`slow-10k-open`). No huge pages, under any system setting.
    func testPagesArePopulatedAheadOnlyOnceFourMebibytesArrived() throws {
        var body = ResponseBody()
        body.expect(Int64(32 << 20))
        _ = fill(&body, chunks: 1, size: 4096)
        XCTAssertTrue(body.isMapped)
        let base = body.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        XCTAssertEqual(body.mappedPopulatedEnd, 0, "populated before 4 MiB arrived")
        XCTAssertLessThanOrEqual(try smapsValue("Rss:", of: base) ?? 0, 8, "kB resident for 4 KiB received")
        if let eligible = try smapsValue("THPeligible:", of: base) {
            XCTAssertEqual(eligible, 0, "the mapping may get huge pages")
        }
        _ = fill(&body, chunks: 70, size: 64 << 10)  // 4.4 MiB in all
        let count = body.count
        let populated = try XCTUnwrap(body.mappedPopulatedEnd)
        if kernelVersion >= (5, 14) {
            XCTAssertTrue(body.mappedPopulates, "MADV_POPULATE_WRITE refused on Linux \(kernelVersion)")
        }
        if body.mappedPopulates {
            XCTAssertGreaterThanOrEqual(populated, count)
            XCTAssertLessThanOrEqual(populated - count, BodyMapping.populateWindow, "populated too far ahead")
        }
        let resident = try XCTUnwrap(try smapsValue("Rss:", of: base)) * 1024
        XCTAssertLessThanOrEqual(resident, count + BodyMapping.populateWindow + 2 * BodyMapping.pageSize)
        XCTAssertGreaterThanOrEqual(resident, count)
    }

    /// The running kernel's major and minor version (`MADV_POPULATE_WRITE` is 5.14's).
    private var kernelVersion: (Int, Int) {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(separator: ".").prefix(2).map { Int($0.prefix { $0.isNumber }) ?? 0 }
        return (parts.first ?? 0, parts.count > 1 ? parts[1] : 0)
    }

    /// A number field ("Rss:", "THPeligible:") of the smaps entry of the mapping that holds
    /// `address`, nil when the kernel does not print it.
    private func smapsValue(_ field: String, of address: UInt) throws -> Int? {
        // /proc files report a size of 0: read to the end.
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps"))
        defer { try? handle.close() }
        let smaps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        let entry = try XCTUnwrap(smapsEntry(containing: address, in: smaps), "the mapping is not in smaps")
        let line = entry.split(separator: "\n").first { $0.hasPrefix(field) }
        return line?.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }

    /// Whether the page at `address` is mapped (`msync` fails with ENOMEM where nothing is).
    /// Checked right after the unmap: another thread mapping into that very hole in between is
    /// possible in principle, and would make an unmapped page look mapped, never the reverse.
    private func isMapped(_ address: UInt) -> Bool {
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        guard let pointer = UnsafeMutableRawPointer(bitPattern: address & ~(page - 1)) else { return false }
        return msync(pointer, Int(page), MS_ASYNC) == 0
    }

    /// The smaps entry of the mapping that holds `address`.
    private func smapsEntry(containing address: UInt, in smaps: String) -> String? {
        var current: (range: ClosedRange<UInt>, lines: [Substring])?
        var found: [Substring]?
        for line in smaps.split(separator: "\n") {
            let bounds = line.split(separator: " ").first?.split(separator: "-")
            if let bounds, bounds.count == 2, let low = UInt(bounds[0], radix: 16), let high = UInt(bounds[1], radix: 16) {
                if let current, current.range.contains(address) { found = current.lines }
                current = (low...(high - 1), [line])
            } else {
                current?.lines.append(line)
            }
        }
        if found == nil, let current, current.range.contains(address) { found = current.lines }
        return found?.joined(separator: "\n")
    }
}
