import Foundation
import ImageLoading
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The inputs libFuzzer found in the image decoders (Fuzz/Regressions/FORMAT/). A fuzz input
/// starts with one byte that chooses the decoding options (Fuzz/Targets/PNG.swift); the image
/// follows it.
final class ImageFuzzRegressionTests: XCTestCase {
    static func regressions(_ target: String) throws -> [(name: String, image: Data)] {
        let directory = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()  // ImageLoadingTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // <repo>
            .appendingPathComponent("Fuzz/Regressions/\(target)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertFalse(names.isEmpty, "no inputs in \(directory.path)")
        return try names.map { ($0, try Data(contentsOf: directory.appendingPathComponent($0)).dropFirst()) }
    }

    /// The process's mapped bytes now, from /proc/self/statm.
    private static func virtualSize() throws -> rlim_t {
        let text = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let pages = rlim_t(text.split(separator: " ").first ?? "") ?? 0
        return pages * rlim_t(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Runs `body` with the address space limited to what is mapped now plus `headroom`, so an
    /// allocation far beyond what the input can need fails instead of quietly succeeding.
    private static func withAddressSpaceHeadroom<T>(_ headroom: rlim_t, _ body: () throws -> T) throws -> T {
        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_AS.rawValue), &saved), 0)
        var limited = saved
        limited.rlim_cur = min(saved.rlim_max, try virtualSize() + headroom)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_AS.rawValue), &limited), 0)
        defer { setrlimit(Int32(RLIMIT_AS.rawValue), &saved) }
        return try body()
    }

    /// A PNG whose chunk claims more bytes than the data holds is truncated, and is refused
    /// before libpng allocates that length. Found: 118 bytes with a `tEXt` chunk declaring
    /// 1,950,701,684 bytes made libpng allocate 1.9 GB (libFuzzer's -malloc_limit_mb caught it).
    /// Here, with 512 MiB of address space to spare, that allocation fails: libpng then took it
    /// as a benign error, read on from inside the chunk and decoded an image out of the bytes.
    func testPNGChunkLongerThanTheDataIsTruncatedWithoutAllocatingIt() throws {
        for (name, image) in try Self.regressions("png") {
            let outcome = try Self.withAddressSpaceHeadroom(512 << 20) { () -> Result<Image, any Error> in
                Result { try Image(data: image) }
            }
            XCTAssertThrowsError(try outcome.get(), name) { error in
                XCTAssertEqual(error as? ImageError, .truncated(.png), "\(name): \(error)")
            }
        }
    }
}
