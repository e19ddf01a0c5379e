import CurlewTestSupport
import Dispatch
import Foundation
import Serialization
import SessionCore
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// The serializer on its own, and through a real `URLSessionManager` against httpbin and the
/// in-process test server.
final class ImageResponseSerializerTests: XCTestCase {
    private var manager: URLSessionManager?

    override func tearDown() async throws {
        if let manager {
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            await manager.waitUntilInvalidated()
        }
        manager = nil
    }

    private func makeManager() -> URLSessionManager {
        let manager = URLSessionManager()
        self.manager = manager
        return manager
    }

    private func httpbin(_ path: String) throws -> URLRequest {
        URLRequest(url: try HTTPBin.baseURL.appendingPathComponent(path))
    }

    // MARK: - Settings

    func testDefaultsAndCodable() throws {
        var serializer = ImageResponseSerializer()
        XCTAssertEqual(serializer.acceptableStatusCodes, IndexSet(integersIn: 200..<300))
        XCTAssertEqual(serializer.acceptableContentTypes, [
            "image/tiff", "image/jpeg", "image/gif", "image/png", "image/ico", "image/x-icon",
            "image/bmp", "image/x-bmp", "image/x-xbitmap", "image/x-win-bitmap", "image/webp",
        ])
        XCTAssertEqual(serializer.imageScale, 1)
        XCTAssertTrue(serializer.automaticallyInflatesResponseImage)
        XCTAssertNil(serializer.maximumPixelSize)
        XCTAssertGreaterThanOrEqual(ImageResponseSerializer.maximumConcurrentDecodes, 2)

        serializer.imageScale = 3
        serializer.automaticallyInflatesResponseImage = false
        serializer.maximumPixelSize = 64
        serializer.acceptableContentTypes = nil
        serializer.acceptableStatusCodes = IndexSet([200, 203])
        let decoded = try JSONDecoder().decode(ImageResponseSerializer.self, from: JSONEncoder().encode(serializer))
        XCTAssertEqual(decoded.imageScale, 3)
        XCTAssertFalse(decoded.automaticallyInflatesResponseImage)
        XCTAssertEqual(decoded.maximumPixelSize, 64)
        XCTAssertNil(decoded.acceptableContentTypes, "an explicit nil (accept any type) survives")
        XCTAssertEqual(decoded.acceptableStatusCodes, IndexSet([200, 203]))
        let empty = try JSONDecoder().decode(ImageResponseSerializer.self, from: Data("{}".utf8))
        XCTAssertEqual(empty.acceptableContentTypes, ImageResponseSerializer.defaultAcceptableContentTypes)
        XCTAssertEqual(empty.imageScale, 1)
    }

    func testValidationComesBeforeDecoding() throws {
        let png = try Image(width: 1, height: 1, pixels: [1, 2, 3, 4]).pngData()
        let url = try XCTUnwrap(URL(string: "http://example.invalid/a.png"))
        let serializer = ImageResponseSerializer()
        let notFound = try XCTUnwrap(HTTPURLResponse(url: url, statusCode: 404, httpVersion: nil,
                                                     headerFields: ["Content-Type": "image/png"]))
        XCTAssertThrowsError(try serializer.responseObject(for: notFound, data: png)) { error in
            guard case .unacceptableStatusCode(404, _, _)? = error as? SerializationError else { return XCTFail("\(error)") }
        }
        let ok = try XCTUnwrap(HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil,
                                               headerFields: ["Content-Type": "image/png"]))
        XCTAssertEqual(try serializer.responseObject(for: ok, data: png).pixels, [1, 2, 3, 4])
        assertImageError(.emptyData, try serializer.responseObject(for: ok, data: Data()))
        assertImageError(.emptyData, try serializer.responseObject(for: ok, data: nil))
        let head = HTTPResponseHead(url: url, statusCode: 200, fields: [("Content-Type", "text/html")])
        XCTAssertThrowsError(try serializer.responseObject(for: nil, head: head, data: png)) { error in
            guard case .unacceptableContentType("text/html", _, _, _)? = error as? SerializationError else {
                return XCTFail("\(error)")
            }
        }
    }

    func testDecodesAreBoundedAcrossThreads() throws {
        let png = try Image(width: 64, height: 64, pixels: [UInt8](repeating: 200, count: 64 * 64 * 4)).pngData()
        let limit = DecoderConcurrencyLimit.shared
        limit.resetPeak()
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let image = try? ImageResponseSerializer().responseObject(for: nil, data: png)
            if image?.width != 64 { failures.withLock { $0 += 1 } }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0)
        // concurrentPerform runs no wider than the machine, so the shared limit (one decode per
        // processor) is not stretched here: what this shows is that the serializer's decodes
        // pass through it. The bound itself is proven below, with more threads than slots.
        XCTAssertGreaterThanOrEqual(limit.peak, 1, "the serializer decodes through the shared limit")

        // A limit of 2 holds against 8 threads that each stay inside for a while.
        let narrow = DecoderConcurrencyLimit(limit: 2)
        let inside = Mutex(0)
        let overflows = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            narrow.run {
                let now = inside.withLock { count -> Int in
                    count += 1
                    return count
                }
                if now > 2 { overflows.withLock { $0 += 1 } }
                usleep(5_000)
                inside.withLock { $0 -= 1 }
            }
        }
        XCTAssertEqual(overflows.withLock { $0 }, 0)
        XCTAssertLessThanOrEqual(narrow.peak, 2)
        XCTAssertGreaterThanOrEqual(narrow.peak, 1)
    }

    // MARK: - Through a real manager

    func testHTTPBinImagesDecodeToTheirTrueSizes() async throws {
        let manager = makeManager()
        let serializer = ImageResponseSerializer()
        let png = try await manager.object(for: try httpbin("image/png"), serializer: serializer)
        XCTAssertEqual([png.width, png.height], [100, 100])
        XCTAssertEqual(png.rgba(0, 0), [255, 255, 255, 255])
        let jpeg = try await manager.object(for: try httpbin("image/jpeg"), serializer: serializer)
        XCTAssertEqual([jpeg.width, jpeg.height], [239, 178])
        let webp = try await manager.object(for: try httpbin("image/webp"), serializer: serializer)
        XCTAssertEqual([webp.width, webp.height], [274, 367])
        assertColor(webp.rgba(0, 0), [255, 255, 255, 255], tolerance: 3)

        var downsampling = serializer
        downsampling.maximumPixelSize = 60
        downsampling.imageScale = 2
        let small = try await manager.object(for: try httpbin("image/jpeg"), serializer: downsampling)
        XCTAssertEqual([small.width, small.height], [60, 45])
        XCTAssertEqual(small.scale, 2)
    }

    func testManagerSerializerDecodesOffTheCompletionQueueAndDeliversOnIt() async throws {
        let manager = makeManager()
        let decodes = Recorder<Int>()
        manager.responseSerializer = DecodeRecordingSerializer(decodes: decodes)
        let queue = DispatchQueue(label: "test.image.completion")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 11)
        manager.completionQueue = queue
        // The completion queue stays blocked until the decode has been seen: a decode running
        // on that queue could not happen first.
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let request = try httpbin("image/png")
        let delivered = Recorder<Bool>()
        let widths = Recorder<Int>()
        manager.dataTask(with: request, uploadProgress: nil, downloadProgress: nil) { response in
            delivered.append(DispatchQueue.getSpecific(key: key) == 11)
            widths.append((try? response.result.get() as? Image)?.width ?? -1)
        }.resume()
        try await eventually({ decodes.count == 1 }, "decoded while the completion queue was blocked")
        XCTAssertEqual(delivered.count, 0, "the handler waits for its queue")
        gate.signal()
        try await eventually({ delivered.count == 1 }, "delivered")
        XCTAssertEqual(delivered.values, [true], "the handler runs on the completion queue")
        XCTAssertEqual(widths.values, [100])
    }

    func testSVGIsUnsupported() async throws {
        let manager = makeManager()
        do {
            _ = try await manager.object(for: try httpbin("image/svg"), serializer: ImageResponseSerializer())
            XCTFail("an SVG decoded")
        } catch let error as SerializationError {
            guard case .unacceptableContentType("image/svg+xml", _, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(error.description.contains("image/svg+xml"), error.description)
        }
        var anyType = ImageResponseSerializer()
        anyType.acceptableContentTypes = nil
        do {
            _ = try await manager.object(for: try httpbin("image/svg"), serializer: anyType)
            XCTFail("an SVG decoded")
        } catch let error as ImageError {
            XCTAssertEqual(error, .unsupportedFormat(detected: "SVG"))
        }
    }

    func testHTMLSentAsPNGAndTruncatedBodies() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let png = try Image(width: 32, height: 32, pixels: [UInt8](repeating: 90, count: 32 * 32 * 4)).pngData()
        server.route("/html-as-png", response: TestResponse(
            headers: [("Content-Type", "image/png")], body: Data("<html><body>Not an image</body></html>".utf8)))
        server.route("/truncated.png", response: TestResponse(
            headers: [("Content-Type", "image/png")], body: png.prefix(png.count - 20)))
        server.route("/empty.png", response: TestResponse(headers: [("Content-Type", "image/png")]))
        server.route("/mislabelled.png", response: TestResponse(headers: [("Content-Type", "image/jpeg")], body: png))
        let manager = makeManager()
        let serializer = ImageResponseSerializer()
        let cases: [(String, ImageError)] = [
            ("/html-as-png", .unsupportedFormat(detected: "HTML")),
            ("/truncated.png", .truncated(.png)),
            ("/empty.png", .emptyData),
        ]
        for (path, expected) in cases {
            do {
                _ = try await manager.object(for: URLRequest(url: try server.url(path)), serializer: serializer)
                XCTFail("\(path) decoded")
            } catch {
                XCTAssertEqual(error as? ImageError, expected, "\(path): \(error)")
            }
        }
        let sniffed = try await manager.object(for: URLRequest(url: try server.url("/mislabelled.png")), serializer: serializer)
        XCTAssertEqual(sniffed.width, 32, "the format comes from the bytes, not the Content-Type")
    }
}

/// ``ImageResponseSerializer`` that counts its decodes, preferring concurrent processing too.
private struct DecodeRecordingSerializer: EngineResponseSerialization {
    let decodes: Recorder<Int>

    var prefersConcurrentProcessing: Bool { true }

    func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Image {
        let image = try ImageResponseSerializer().responseObject(for: response, data: data)
        decodes.append(image.width)
        return image
    }
}
