import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Serialization

final class MultipartTests: XCTestCase {
    private var temporaryDirectory: URL!

    override func setUpWithError() throws {
        temporaryDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-multipart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporaryDirectory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: temporaryDirectory)
    }

    private func boundary(of request: URLRequest) throws -> String {
        let contentType = try XCTUnwrap(request.value(forHTTPHeaderField: "Content-Type"))
        XCTAssertTrue(contentType.hasPrefix("multipart/form-data; boundary="), contentType)
        return String(contentType.dropFirst("multipart/form-data; boundary=".count))
    }

    func testRoundTripThroughAStrictParser() throws {
        let fileURL = temporaryDirectory.appendingPathComponent("photo.JPG")
        let fileBytes = Data((0..<5000).map { UInt8($0 % 251) })
        try fileBytes.write(to: fileURL)
        let streamBytes = Data("streamed content".utf8)

        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://example.com/upload",
            parameters: ["title": "Hello", "meta": ["a": 1], "blob": Data([0, 1, 2])]
        ) { form in
            try form.appendPart(withFileURL: fileURL, name: "photo")
            form.appendPart(withFileData: Data("{}".utf8), name: "doc", fileName: "d.json", mimeType: "application/json")
            form.appendPart(with: InputStream(data: streamBytes), name: "stream", fileName: "s.txt",
                            length: Int64(streamBytes.count), mimeType: "text/plain")
            form.appendPart(withHeaders: ["Content-Type": "text/x-custom",
                                          "Content-Disposition": "form-data; name=\"custom\""],
                            body: Data("custom body".utf8))
        }
        XCTAssertNil(request.httpBody)
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        let boundary = try boundary(of: request)
        XCTAssertEqual(stream.boundary, boundary)
        let body = try drain(stream, chunk: 777)
        XCTAssertEqual(Int64(body.count), stream.contentLength)
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Length"), String(body.count))

        let parts = try parseMultipart(body, boundary: boundary)
        XCTAssertEqual(parts.count, 7)
        XCTAssertEqual(parts[0], ParsedPart(headers: ["Content-Disposition": "form-data; name=\"blob\""],
                                            body: Data([0, 1, 2])))
        XCTAssertEqual(parts[1].headers["Content-Disposition"], "form-data; name=\"meta[a]\"")
        XCTAssertEqual(parts[1].body, Data("1".utf8))
        XCTAssertEqual(parts[2].body, Data("Hello".utf8))
        XCTAssertEqual(parts[3].headers, ["Content-Disposition": "form-data; name=\"photo\"; filename=\"photo.JPG\"",
                                          "Content-Type": "image/jpeg"])
        XCTAssertEqual(parts[3].body, fileBytes)
        XCTAssertEqual(parts[4].headers["Content-Type"], "application/json")
        XCTAssertEqual(parts[4].body, Data("{}".utf8))
        XCTAssertEqual(parts[5].body, streamBytes)
        XCTAssertEqual(parts[6], ParsedPart(headers: ["Content-Disposition": "form-data; name=\"custom\"",
                                                      "Content-Type": "text/x-custom"],
                                            body: Data("custom body".utf8)))
        // The boundary never appears inside part data.
        for part in parts {
            XCTAssertNil(part.body.range(of: Data(boundary.utf8)))
        }
    }

    func testBoundaryIsRandomAndLongEnough() throws {
        var seen = Set<String>()
        for _ in 0..<200 {
            let request = try HTTPRequestSerializer().multipartFormRequest(
                method: "POST", urlString: "https://e.com", parameters: ["a": "b"], constructingBodyWith: nil)
            let boundary = try boundary(of: request)
            XCTAssertGreaterThanOrEqual(boundary.count, 32 + 16)
            XCTAssertLessThanOrEqual(boundary.count, 70)
            XCTAssertTrue(seen.insert(boundary).inserted)
        }
    }

    func testNamesAndFileNamesAreEscaped() throws {
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil
        ) { form in
            form.appendPart(withFileData: Data("x".utf8), name: "a\"b\r\nX-Injected: 1",
                            fileName: "evil\".txt\r\n\r\n--", mimeType: "text/plain")
        }
        let stream = try XCTUnwrap(request.httpBodyStream)
        let parts = try parseMultipart(try drain(stream), boundary: try boundary(of: request))
        XCTAssertEqual(parts.count, 1)
        XCTAssertEqual(parts[0].headers["Content-Disposition"],
                       "form-data; name=\"a%22b%0D%0AX-Injected: 1\"; filename=\"evil%22.txt%0D%0A%0D%0A--\"")
        XCTAssertNil(parts[0].headers["X-Injected"])
    }

    func testCRLFInPartHeadersThrows() {
        let serializer = HTTPRequestSerializer()
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { form in
            form.appendPart(withFileData: Data(), name: "n", fileName: "f", mimeType: "text/plain\r\nX-Evil: 1")
        }) { error in
            guard case .invalidHeader(let field, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(field, "Content-Type")
        }
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { form in
            form.appendPart(withHeaders: ["X-Custom": "a\nb"], body: Data())
        })
    }

    func testFileURLErrors() throws {
        let serializer = HTTPRequestSerializer()
        let missing = temporaryDirectory.appendingPathComponent("missing.bin")
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: missing, name: "f") }
        ) { error in
            guard case .multipartFileNotFound(let url) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(url, missing)
            XCTAssertTrue(error.description.contains("missing.bin"))
        }
        let remote = try XCTUnwrap(URL(string: "https://example.com/file.txt"))
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: remote, name: "f") }
        ) { error in
            guard case .multipartNotAFileURL = error else { return XCTFail("\(error)") }
        }
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) {
            try $0.appendPart(withFileURL: self.temporaryDirectory, name: "f")
        }) { error in
            guard case .multipartFileUnreadable(_, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("directory"))
        }
    }

    func testBlockErrorsComeOutUnchanged() {
        struct Stop: Error {}
        XCTAssertThrowsError(try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { _ in throw Stop() }) {
            XCTAssertTrue($0 is Stop)
        }
    }

    /// AFNetworking: a form with no parts returns the request as built for nil parameters,
    /// which for the form serializer is an empty form body.
    func testGETIsRejectedAndEmptyFormLeavesRequestAsBuiltForNilParameters() throws {
        assertSerializationError(try HTTPRequestSerializer().multipartFormRequest(
            method: "GET", urlString: "https://e.com", parameters: ["a": 1], constructingBodyWith: nil))
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil, constructingBodyWith: nil)
        XCTAssertNil(request.httpBodyStream)
        XCTAssertEqual(request.httpBody, Data())
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded")
        let json = try JSONRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil, constructingBodyWith: nil)
        XCTAssertNil(json.httpBodyStream)
        XCTAssertNil(json.httpBody)
        // With parts, the stream replaces the empty form body and its Content-Type.
        let form = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: ["a": "1"], constructingBodyWith: nil)
        XCTAssertNil(form.httpBody)
        XCTAssertNotNil(form.httpBodyStream)
        XCTAssertTrue(form.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("multipart/form-data; boundary=") ?? false)
    }

    func testMIMETypeGuessing() {
        XCTAssertEqual(MIMETypeTable.mimeType(forPathExtension: "png"), "image/png")
        XCTAssertEqual(MIMETypeTable.mimeType(forPathExtension: ".JSON"), "application/json")
        XCTAssertEqual(MIMETypeTable.mimeType(forPathExtension: "unknownext"), "application/octet-stream")
        XCTAssertEqual(MIMETypeTable.mimeType(forPathExtension: ""), "application/octet-stream")
    }

    func testShortStreamFailsTheBody() throws {
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil
        ) { form in
            form.appendPart(with: InputStream(data: Data("abc".utf8)), name: "s", fileName: "s", length: 10,
                            mimeType: "text/plain")
        }
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        XCTAssertNil(stream.makeRewoundCopy())
        XCTAssertThrowsError(try drain(stream))
        XCTAssertEqual(stream.streamStatus, .error)
        XCTAssertNotNil(stream.streamError as? SerializationError)
    }

    func testFileThatShrinksFailsTheBody() throws {
        let fileURL = temporaryDirectory.appendingPathComponent("shrinks.txt")
        try Data(repeating: 65, count: 1000).write(to: fileURL)
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: fileURL, name: "f") }
        try Data(repeating: 65, count: 10).write(to: fileURL)
        let stream = try XCTUnwrap(request.httpBodyStream)
        XCTAssertThrowsError(try drain(stream))
    }

    /// A file that grows, is replaced (same size, other bytes) or is rewritten before its
    /// bytes are sent fails the body, naming what changed: the upload carried the first
    /// bytes of whatever was there, and a retry could send other bytes than the first try.
    func testAFileThatChangesAfterItWasAddedFailsTheBody() throws {
        func request(for fileURL: URL) throws -> URLRequest {
            try HTTPRequestSerializer().multipartFormRequest(
                method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: fileURL, name: "f") }
        }
        func reason(_ stream: InputStream) -> String {
            guard case .multipartFileUnreadable(_, let reason)? = stream.streamError as? SerializationError else { return "\(String(describing: stream.streamError))" }
            return reason
        }
        let grows = temporaryDirectory.appendingPathComponent("grows.log")
        try Data(repeating: 65, count: 1000).write(to: grows)
        let grown = try XCTUnwrap(request(for: grows).httpBodyStream)
        let handle = try FileHandle(forWritingTo: grows)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 66, count: 100))
        try handle.close()
        XCTAssertThrowsError(try drain(grown))
        XCTAssertEqual(reason(grown), "it is 1100 bytes now, 1000 when it was added")

        let replaced = temporaryDirectory.appendingPathComponent("replaced.jpg")
        try Data(repeating: 1, count: 1000).write(to: replaced)
        let original = try request(for: replaced)
        let stream = try XCTUnwrap(original.httpBodyStream as? MultipartBodyStream)
        XCTAssertEqual(try drain(try XCTUnwrap(stream.makeRewoundCopy())).count, Int(stream.contentLength), "unchanged: sent")
        try Data(repeating: 2, count: 1000).write(to: replaced, options: .atomic)  // a new file under the name
        let retry = try XCTUnwrap(stream.makeRewoundCopy())
        XCTAssertThrowsError(try drain(retry), "a retry would have sent other bytes than the first attempt")
        XCTAssertEqual(reason(retry), "it was replaced by another file after it was added")
    }

    /// A symbolic link to a file is that file (`FileManager.attributesOfItem` describes the
    /// link itself, and the part was refused as "not a regular file").
    func testALinkToAFileIsUploadedAsTheFile() throws {
        let target = temporaryDirectory.appendingPathComponent("real.jpg")
        let bytes = Data((0..<300).map { UInt8($0 % 256) })
        try bytes.write(to: target)
        let link = temporaryDirectory.appendingPathComponent("pic.jpg")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: link, name: "f") }
        let body = try drain(try XCTUnwrap(request.httpBodyStream))
        XCTAssertNotNil(body.range(of: bytes))
        XCTAssertNotNil(body.range(of: Data("filename=\"pic.jpg\"".utf8)))
        let dangling = temporaryDirectory.appendingPathComponent("dangling.jpg")
        try FileManager.default.createSymbolicLink(at: dangling, withDestinationURL: temporaryDirectory.appendingPathComponent("gone.jpg"))
        assertSerializationError(try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil) { try $0.appendPart(withFileURL: dangling, name: "f") }
        ) { error in
            guard case .multipartFileNotFound = error else { return XCTFail("\(error)") }
        }
    }

    /// A caller's stream part may claim any length: a sum past what a `Content-Length` can
    /// say is an error, not an overflow trap.
    func testPartLengthsThatOverflowAreAnError() {
        assertSerializationError(try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil
        ) { form in
            form.appendPart(with: InputStream(data: Data()), name: "a", fileName: "a", length: Int64.max, mimeType: "text/plain")
            form.appendPart(with: InputStream(data: Data()), name: "b", fileName: "b", length: Int64.max, mimeType: "text/plain")
        })
    }

    /// A value the form's string encoding cannot write is an error, as in a URL-encoded
    /// form, never an empty part.
    func testAValueTheEncodingCannotWriteIsAnError() {
        var serializer = HTTPRequestSerializer()
        serializer.stringEncoding = .ascii
        assertSerializationError(try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: ["name": "José"], constructingBodyWith: nil))
    }

    func testThrottlingLimitsPacketSize() throws {
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: nil
        ) { form in
            form.appendPart(withFormData: Data(repeating: 1, count: 1000), name: "a")
            form.throttleBandwidth(withPacketSize: 100, delay: 0.001)
        }
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        XCTAssertEqual(stream.packetSize, 100)
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            XCTAssertLessThanOrEqual(count, 100)
            if count <= 0 { break }
            total += count
        }
        XCTAssertEqual(Int64(total), stream.contentLength)
        XCTAssertEqual(stream.streamStatus, .atEnd)
        XCTAssertFalse(stream.hasBytesAvailable)
    }

    func testRewoundCopyProducesTheSameBytes() throws {
        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "PUT", urlString: "https://e.com", parameters: ["k": "v"], constructingBodyWith: nil)
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        let copy = try XCTUnwrap(stream.makeRewoundCopy())
        XCTAssertEqual(try drain(stream), try drain(copy))
    }

    func testWritingStreamContentsToFile() async throws {
        let serializer = HTTPRequestSerializer()
        let request = try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: ["field": "value"]
        ) { form in
            form.appendPart(withFileData: Data(repeating: 7, count: 100_000), name: "f", fileName: "f.bin",
                            mimeType: "application/octet-stream")
        }
        let target = temporaryDirectory.appendingPathComponent("body.multipart")
        let written = try await serializer.request(withMultipartFormRequest: request, writingStreamContentsToFile: target)
        XCTAssertNil(written.httpBodyStream)
        XCTAssertEqual(written.value(forHTTPHeaderField: "Content-Type"), request.value(forHTTPHeaderField: "Content-Type"))
        let fileData = try Data(contentsOf: target)
        XCTAssertEqual(String(fileData.count), written.value(forHTTPHeaderField: "Content-Length"))
        let parts = try parseMultipart(fileData, boundary: try boundary(of: request))
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts[1].body, Data(repeating: 7, count: 100_000))

        do {
            _ = try await serializer.request(withMultipartFormRequest: URLRequest(url: target),
                                             writingStreamContentsToFile: target)
            XCTFail("expected an error")
        } catch is SerializationError {
        }
    }

    /// A throttled form written to a file is not throttled there: its packets and delays are
    /// for the network (a 100 MB form took minutes to write, then went out unthrottled). With
    /// an hour's delay per byte, the write is bounded only by the hang guard if it sleeps.
    func testWritingAThrottledFormToAFileDoesNotSleep() async throws {
        let serializer = HTTPRequestSerializer()
        let request = try serializer.multipartFormRequest(
            method: "POST", urlString: "https://e.com", parameters: ["field": "value"]
        ) { form in
            form.appendPart(withFileData: Data(repeating: 7, count: 1_000), name: "f", fileName: "f.bin", mimeType: "application/octet-stream")
            form.throttleBandwidth(withPacketSize: 1, delay: 3_600)
        }
        let target = temporaryDirectory.appendingPathComponent("throttled.multipart")
        let written = expectation(description: "the form was written")
        Task {
            _ = try await serializer.request(withMultipartFormRequest: request, writingStreamContentsToFile: target)
            written.fulfill()
        }
        await fulfillment(of: [written], timeout: 30)
        XCTAssertEqual(try parseMultipart(Data(contentsOf: target), boundary: try boundary(of: request)).count, 2)
    }

    /// A 100 MB file streams through the body with flat memory and an exact Content-Length.
    func testHundredMegabyteFileStreamsWithFlatMemory() throws {
        let size: UInt64 = 100 * 1024 * 1024
        let fileURL = temporaryDirectory.appendingPathComponent("big.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: fileURL.path, contents: nil))
        let handle = try FileHandle(forWritingTo: fileURL)
        try handle.truncate(atOffset: size)   // sparse: no disk blocks, reads as zeros
        try handle.close()

        let request = try HTTPRequestSerializer().multipartFormRequest(
            method: "POST", urlString: "https://e.com/upload", parameters: ["name": "big"]
        ) { try $0.appendPart(withFileURL: fileURL, name: "file") }
        let stream = try XCTUnwrap(request.httpBodyStream as? MultipartBodyStream)
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Length"), String(stream.contentLength))
        XCTAssertGreaterThan(stream.contentLength, Int64(size))

        // Reset the peak (VmHWM) where the kernel allows it, then sample VmRSS while reading.
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        let baselineRSS = procStatusKilobytes("VmRSS") ?? 0
        let baselineHWM = procStatusKilobytes("VmHWM") ?? 0
        var peakRSS = baselineRSS
        let chunk = 64 * 1024
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
        defer { buffer.deallocate() }
        stream.open()
        var total: Int64 = 0
        var reads = 0
        var tail = Data()
        while true {
            let count = stream.read(buffer, maxLength: chunk)
            XCTAssertGreaterThanOrEqual(count, 0)
            if count <= 0 { break }
            total += Int64(count)
            reads += 1
            if reads % 64 == 0 { peakRSS = max(peakRSS, procStatusKilobytes("VmRSS") ?? 0) }
            tail.append(buffer, count: count)
            if tail.count > 4096 { tail = Data(tail.suffix(512)) }   // a copy: a slice keeps the old storage
        }
        stream.close()
        peakRSS = max(peakRSS, procStatusKilobytes("VmRSS") ?? 0)
        let hwm = procStatusKilobytes("VmHWM") ?? 0
        let rssGrowthKB = peakRSS - baselineRSS
        let hwmGrowthKB = hwm - baselineHWM
        print("multipart 100 MB: contentLength=\(stream.contentLength) produced=\(total) reads=\(reads) "
              + "baselineRSS=\(baselineRSS)kB peakRSS=\(peakRSS)kB rssGrowth=\(rssGrowthKB)kB "
              + "VmHWM \(baselineHWM)→\(hwm)kB (growth \(hwmGrowthKB)kB)")
        XCTAssertEqual(total, stream.contentLength)
        XCTAssertLessThan(rssGrowthKB, 20 * 1024)
        XCTAssertLessThan(hwmGrowthKB, 20 * 1024)
        let boundary = try boundary(of: request)
        XCTAssertTrue(tail.ends(with: Data("\r\n--\(boundary)--\r\n".utf8)))
    }
}

private extension Data {
    func ends(with suffix: Data) -> Bool {
        count >= suffix.count && self.suffix(suffix.count) == suffix
    }
}
