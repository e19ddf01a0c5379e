import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The disk store's entry files: the checksum catches altered and cut-short bodies at every
/// length, an older format's file is a miss and is replaced, and lookups that overlap a
/// rewrite see whole responses only.
final class ResponseCacheDiskFormatTests: XCTestCase {
    var directory: URL!

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-format-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private let url = ResponseCacheDiskFormatTests.entryURL
    private static let entryURL = URL(string: "http://example.invalid/entry")!

    private func response(_ body: Data, url: URL? = nil, version: Int = 0) -> CachedResponse {
        Self.response(body, url: url, version: version)
    }

    private static func response(_ body: Data, url: URL? = nil, version: Int = 0) -> CachedResponse {
        CachedResponse(
            url: url ?? entryURL, statusCode: 200, httpVersion: "HTTP/1.1",
            fields: [.init(name: "Cache-Control", value: "max-age=600"), .init(name: "X-Version", value: "\(version)")],
            body: body, requestDate: Date(), responseDate: Date(), varyingRequestFields: [:])
    }

    /// Deterministic bytes (a linear congruential sequence), so a failure repeats.
    private func bytes(_ count: Int, seed: UInt64 = 1) -> Data {
        var state = seed
        return Data((0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        })
    }

    private let lengths = [0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 1000, 300_001]

    func testTheChecksumChangesWithAnyFlippedByteOrCutAtEveryLength() {
        for length in lengths {
            let body = bytes(length)
            let whole = CacheChecksum.checksum(body)
            // Every byte of the short bodies; for the long one, both ends, every block position
            // and a spread of others.
            let positions = length <= 1000 ? Array(0..<length) : Array(0..<96) + Array(stride(from: 96, to: length, by: 997)) + [length - 1]
            for position in positions {
                for bit in [UInt8(0x01), 0x80] {
                    var flipped = body
                    flipped[position] ^= bit
                    XCTAssertNotEqual(CacheChecksum.checksum(flipped), whole, "bit \(bit) of byte \(position) of \(length)")
                }
            }
            let cuts = length <= 1000 ? Array(0..<length) : [0, 1, 7, 8, 9, 32, length / 2, length - 8, length - 1]
            for cut in cuts {
                XCTAssertNotEqual(CacheChecksum.checksum(body.prefix(cut)), whole, "\(length) cut to \(cut)")
            }
        }
    }

    /// A newer answer that could not be written (a full disk: `RLIMIT_FSIZE` here) leaves no
    /// older one on disk: the file it was to replace stayed, and answered again as fresh once
    /// memory no longer held the newer one (here: no memory at all).
    func testAnEntryThatCannotBeWrittenLeavesNoOlderOneOnDisk() throws {
        let cache = ResponseCache(memoryCapacity: 0, diskCapacity: 20 << 20, directory: directory)
        let request = URLRequest(url: url)
        cache.storeCachedResponse(response(Data("old".utf8), version: 1), for: request)
        XCTAssertEqual(cache.cachedResponse(for: request)?.body, Data("old".utf8))

        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved), 0)
        let previousHandler = signal(SIGXFSZ, SIG_IGN)
        var limit = saved
        limit.rlim_cur = 1_000
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit), 0)
        cache.storeCachedResponse(response(bytes(50_000), version: 2), for: request)
        _ = setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        signal(SIGXFSZ, previousHandler)

        XCTAssertNil(cache.cachedResponse(for: request), "the outdated answer is gone with the newer one unwritten")
        cache.storeCachedResponse(response(Data("new".utf8), version: 3), for: request)
        XCTAssertEqual(cache.cachedResponse(for: request)?.body, Data("new".utf8), "the disk takes entries again")
    }

    func testAFlippedOrCutBodyOnDiskIsAMissAndIsRemoved() throws {
        for length in lengths {
            for damage in ["flip", "cut", "none"] {
                let cache = ResponseCache(memoryCapacity: 0, diskCapacity: 20 << 20, directory: directory)
                let request = URLRequest(url: url)
                let body = bytes(length, seed: UInt64(length) + 7)
                cache.storeCachedResponse(response(body), for: request)
                let file = try entryFile()
                var contents = try Data(contentsOf: file)
                switch damage {
                case "flip" where length > 0: contents[contents.count - 1 - length / 2] ^= 0x04
                case "flip", "cut": contents.removeLast()  // an empty body: the metadata is cut
                default: break
                }
                try contents.write(to: file)
                let loaded = cache.cachedResponse(for: request)
                if damage == "none" {
                    XCTAssertEqual(loaded?.body, body, "\(length) intact")
                } else {
                    XCTAssertNil(loaded, "\(damage) \(length)")
                    XCTAssertFalse(FileManager.default.fileExists(atPath: file.path), "\(damage) \(length): removed")
                    XCTAssertEqual(cache.currentDiskUsage, 0)
                }
                cache.removeAllCachedResponses()
            }
        }
    }

    /// The format before `CacheChecksum` (magic `CURLEWC2`, FNV-1a `bodyChecksum`), written
    /// whole and valid as an older Curlew did.
    private struct OldMetadata: Codable {
        var key: String
        var response: CachedResponse
        var bodyLength: Int
        var bodyChecksum: UInt64
    }

    /// Saves write outside the store's lock, so one can finish after a removal or after a
    /// later save of its key: it then installs nothing. (A cache cleared at log-out stays
    /// cleared; the newest response of a key wins, not the one whose write finished last.)
    func testASaveThatFinishesAfterARemovalOrANewerSaveInstallsNothing() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        var store = DiskStore(directory: descriptor, capacity: 20 << 20)
        let key = url.absoluteString
        let name = DiskStore.fileName(for: key)
        func write(_ version: Int) throws -> (temporary: String, size: Int, ticket: UInt64) {
            let prepared = store.prepareSave(key: key)
            let encoded = try XCTUnwrap(DiskEntryFile.encode(response(bytes(100, seed: UInt64(version)), version: version), key: key))
            XCTAssertTrue(DiskEntryFile.create(prepared.temporary, with: encoded, in: descriptor))
            return (prepared.temporary, encoded.size, prepared.ticket)
        }
        func stored() -> String? {
            guard store.entryFile(for: key) != nil,
                  let entry = DiskEntryFile.read(name, in: descriptor, key: key, sizeLimit: 20 << 20) else { return nil }
            return entry.fields.first { $0.name == "X-Version" }?.value
        }
        func leftovers() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".tmp") }
        }

        let cleared = try write(1)
        store.removeAll()
        store.install(cleared.temporary, size: cleared.size, key: key, ticket: cleared.ticket)
        XCTAssertNil(stored(), "a save begun before removeAll() does not bring the entry back")

        let removed = try write(2)
        store.remove(key: key)
        store.install(removed.temporary, size: removed.size, key: key, ticket: removed.ticket)
        XCTAssertNil(stored(), "nor one begun before remove(key:)")

        let older = try write(3)
        let newer = try write(4)
        store.install(newer.temporary, size: newer.size, key: key, ticket: newer.ticket)
        store.install(older.temporary, size: older.size, key: key, ticket: older.ticket)
        XCTAssertEqual(stored(), "4", "the save begun later wins, whichever write finished first")
        XCTAssertEqual(try leftovers(), [], "superseded temporary files are deleted")
        XCTAssertEqual(store.currentUsage(), newer.size)

        let next = try write(5)
        store.install(next.temporary, size: next.size, key: key, ticket: next.ticket)
        XCTAssertEqual(stored(), "5", "a save begun after all of that installs")
    }

    func testAnEntryInTheOlderFormatIsAMissAndIsReplaced() throws {
        let body = bytes(5000)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        var bodyless = response(body)
        bodyless.body = Data()
        let key = url.absoluteString
        let json = try JSONEncoder().encode(OldMetadata(key: key, response: bodyless, bodyLength: body.count, bodyChecksum: hash))
        var old = Data("CURLEWC2".utf8)
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { old.append(contentsOf: $0) }
        old.append(json)
        old.append(body)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent(DiskStore.fileName(for: key))
        try old.write(to: file)

        let cache = ResponseCache(memoryCapacity: 0, diskCapacity: 20 << 20, directory: directory)
        XCTAssertEqual(cache.currentDiskUsage, old.count, "counted until read")
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: url)), "an older format is a miss")
        XCTAssertFalse(FileManager.default.fileExists(atPath: file.path), "and is removed")
        XCTAssertEqual(cache.currentDiskUsage, 0)

        cache.storeCachedResponse(response(body), for: URLRequest(url: url))
        XCTAssertEqual(try Data(contentsOf: file).prefix(8), Data("CURLEWC3".utf8), "replaced in the new format")
        XCTAssertEqual(cache.cachedResponse(for: URLRequest(url: url))?.body, body)
    }

    func testLookupsOverlappingARewriteSeeWholeResponsesOnly() throws {
        let cache = ResponseCache(memoryCapacity: 0, diskCapacity: 50 << 20, directory: directory)
        let rewritten = URLRequest(url: url)
        let steady = URLRequest(url: URL(string: "http://example.invalid/steady")!)
        /// Version `n`: a body of `n` repeated, its length depending on `n`, named in a field.
        @Sendable func body(_ version: Int) -> Data { Data(repeating: UInt8(version % 251), count: 40_000 + (version % 7) * 9_973) }
        @Sendable func isWhole(_ entry: CachedResponse?) -> Bool {
            guard let entry, let field = entry.value(forHTTPHeaderField: "X-Version"), let version = Int(field) else { return false }
            return entry.body == body(version)
        }
        cache.storeCachedResponse(response(body(0)), for: rewritten)
        cache.storeCachedResponse(response(body(1), url: steady.url, version: 1), for: steady)
        let torn = Counter()
        let writerDone = Counter()
        let readers = Counter()
        // Threads of their own (concurrentPerform may run the workers one after another on two
        // cores): four readers look up for as long as the writer rewrites, at most 3,000 times each.
        let group = DispatchGroup()
        for worker in 1...4 {
            group.enter()
            Thread.detachNewThread {
                readers.add()
                defer { group.leave() }
                let request = worker.isMultiple(of: 2) ? rewritten : steady
                var reads = 0
                while reads < 3_000, reads < 20 || writerDone.value == 0 {
                    if !isWhole(cache.cachedResponse(for: request)) { torn.add() }
                    reads += 1
                }
            }
        }
        // The writer starts once every reader runs (bounded: 10 s at most).
        for _ in 0..<1_000 where readers.value < 4 { usleep(10_000) }
        for round in 1...150 {
            cache.storeCachedResponse(Self.response(body(round), version: round), for: rewritten)
        }
        writerDone.add()
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(readers.value, 4)
        XCTAssertEqual(torn.value, 0, "every lookup found a whole response")
        XCTAssertTrue(isWhole(cache.cachedResponse(for: rewritten)))
        XCTAssertEqual(cache.cachedResponse(for: rewritten)?.value(forHTTPHeaderField: "X-Version"), "150")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(files.count, 2, "no temporary file left: \(files)")
        let sizes = try files.map { try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size] as? Int ?? -1 }
        XCTAssertEqual(cache.currentDiskUsage, sizes.reduce(0, +), "the accounting matches the files")
    }

    private func entryFile() throws -> URL {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        XCTAssertEqual(files.count, 1)
        return try XCTUnwrap(files.first)
    }
}

/// A count several threads add to (under its lock).
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
