import Foundation
@testable import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Target: the multipart/form-data encoder (MultipartFormDataBuilder and MultipartBodyStream,
// Sources/Serialization/), as a round trip. The input is read as parts (form fields, file data
// with a file name and MIME type, parts with their own headers) and optional throttling. The
// body the stream produces is split on its boundary again. Properties: it has exactly the parts
// appended, each with exactly its header lines (no name, file name or value can inject a line)
// and exactly its bytes; the announced length is the length read.

private struct Expected {
    var headerCount: Int
    var disposition: String?
    var body: Data
}

private func quoted(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": result += "%22"
        case "\r": result += "%0D"
        case "\n": result += "%0A"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result
}

private func readAll(_ stream: MultipartBodyStream, bufferSize: Int) -> Data {
    var result = Data()
    var buffer = [UInt8](repeating: 0, count: bufferSize)
    stream.open()
    defer { stream.close() }
    // Bounded: the body is finite, and a read of 0 or less ends the loop.
    for _ in 0..<1_000_000 {
        let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: $0.count) }
        if count <= 0 { break }
        result.append(contentsOf: buffer[0..<count])
    }
    return result
}

private func range(of needle: Data, in data: Data, from start: Int) -> Range<Int>? {
    data.range(of: needle, in: start..<data.count)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let builder = MultipartFormDataBuilder(stringEncoding: .utf8)
    var expected: [Expected] = []
    let throttle = input.byte()
    while !input.isEmpty, expected.count < 8 {
        let kind = input.byte() % 3
        let name = input.string(until: 0)
        let body = Data(input.chunk(until: 0xFF))
        switch kind {
        case 0:
            builder.appendPart(withFormData: body, name: name)
            expected.append(Expected(headerCount: 1, disposition: "form-data; name=\"\(quoted(name))\"", body: body))
        case 1:
            let fileName = input.string(until: 0)
            let mimeType = input.string(until: 0)
            builder.appendPart(withFileData: body, name: name, fileName: fileName, mimeType: mimeType)
            expected.append(Expected(
                headerCount: 2,
                disposition: "form-data; name=\"\(quoted(name))\"; filename=\"\(quoted(fileName))\"", body: body))
        default:
            let value = input.string(until: 0)
            builder.appendPart(withHeaders: [name: value], body: body)
            expected.append(Expected(headerCount: 1, disposition: nil, body: body))
        }
    }
    if throttle & 1 == 1 { builder.throttleBandwidth(withPacketSize: Int(throttle), delay: 0) }
    let request: URLRequest
    do {
        request = try builder.requestByFinalizingMultipartFormData(URLRequest(url: URL(string: "http://fuzz.invalid/")!))
    } catch {
        return 0  // a header value that cannot be sent: refused, as it should be
    }
    guard let stream = request.httpBodyStream as? MultipartBodyStream else {
        fuzzCheck(expected.isEmpty, "parts but no body stream")
        return 0
    }
    let body = readAll(stream, bufferSize: 1 + Int(throttle >> 1) * 13)
    fuzzCheck(Int64(body.count) == stream.contentLength, "read \(body.count) bytes, announced \(stream.contentLength)")
    let boundary = Data(stream.boundary.utf8)
    let open = Data("--".utf8) + boundary + Data("\r\n".utf8)
    let separator = Data("\r\n--".utf8) + boundary + Data("\r\n".utf8)
    let close = Data("\r\n--".utf8) + boundary + Data("--\r\n".utf8)
    fuzzCheck(body.starts(with: open) && body.suffix(close.count) == close, "framing")
    var position = open.count
    for (index, part) in expected.enumerated() {
        guard let headEnd = range(of: Data("\r\n\r\n".utf8), in: body, from: position) else {
            fuzzCheck(false, "part \(index): no end of headers")
            return 0
        }
        let headText = String(decoding: body[position..<headEnd.lowerBound], as: UTF8.self)
        let lines = headText.components(separatedBy: "\r\n")
        fuzzCheck(lines.count == part.headerCount, "part \(index): \(lines.count) header lines: \(lines)")
        if let disposition = part.disposition {
            fuzzCheck(lines.first == "Content-Disposition: " + disposition, "part \(index): \(lines)")
        }
        let bodyStart = headEnd.upperBound
        let bodyEnd = bodyStart + part.body.count
        fuzzCheck(bodyEnd <= body.count && body[bodyStart..<bodyEnd] == part.body, "part \(index): body differs")
        let next = index == expected.count - 1 ? close : separator
        fuzzCheck(body[bodyEnd...].starts(with: next), "part \(index): not followed by the boundary")
        position = bodyEnd + next.count
    }
    fuzzCheck(position == body.count, "bytes after the last part")
    return 0
}
