import ArgumentParser
import Foundation
import ImageLoading
import Serialization
import SessionCore

/// `curlew image URL`: fetches an image and decodes it with ImageLoading's decoders; prints
/// its format, pixel size, frames and decode time, and on a terminal a small true-colour
/// preview drawn with half-block characters.
struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Fetch and decode an image: format, size, frames, decode time, and a preview on a terminal.")

    @Argument(help: "The image's URL (the shorthands of the request command apply).")
    var url: String

    @Option(name: .customLong("width"), help: "The preview's width in columns, at most (default: the terminal's, up to 64).")
    var width: Int?

    @Flag(name: .customLong("preview"), inversion: .prefixedNo, help: "Draw the preview (default: when stdout is a terminal).")
    var preview: Bool?

    /// The image is decoded from memory: a body past this is refused as it arrives (its
    /// `Content-Length` at the head, else at the limit) rather than filling memory.
    @Option(name: .customLong("max-size"), help: ArgumentHelp(
        "The largest image body read, in bytes (default 128 MiB); a larger one is refused as it arrives.",
        valueName: "bytes"))
    var maximumSize: Int = ImageCommand.defaultMaximumSize

    /// 128 MiB: a 12-megapixel JPEG is ~5 MB, a large uncompressed PNG tens of MB.
    static let defaultMaximumSize = 128 << 20

    func validate() throws {
        guard maximumSize > 0 else { throw ValidationError("--max-size takes a number of bytes above 0") }
    }

    @OptionGroup(title: "TLS and network") var transport: TransportOptions

    func run() async throws {
        do {
            try await perform()
        } catch let failure as ToolFailure {
            throw failure.report()
        }
    }

    private func perform() async throws {
        let target: URL
        do {
            target = try RequestLine.expandURL(url)
        } catch {
            throw ValidationError(error.description)
        }
        let built = try RequestBuilder(line: RequestLine(method: "GET", url: target, items: [])).build()
        var configuration = transport.configuration(for: target)
        configuration.maximumCollectedBodyBytes = maximumSize
        let policy = try await transport.securityPolicy(for: target, configuration: configuration)
        let manager = try Exchange.makeManager(configuration: configuration, policy: policy, follow: true)
        let response = try await Exchange.using(manager) { await Exchange.send(built, manager: manager) }
        if case .responseBodyTooLarge(let limit)? = response.error as? SessionError {
            // An error page too large is reported as the error status it is.
            if let head = response.head, !(200..<300).contains(head.statusCode) {
                throw ToolFailure(ExitStatus.forStatus(head.statusCode) ?? .error, "HTTP \(head.statusCode) \(head.reasonPhrase ?? "")")
            }
            throw ToolFailure(.error, "the image is larger than \(limit) bytes (--max-size)")
        }
        if let error = response.error { throw ToolFailure(transferError: error) }
        guard let head = response.head else { throw ToolFailure(.error, "no response arrived") }
        guard (200..<300).contains(head.statusCode) else {
            throw ToolFailure(ExitStatus.forStatus(head.statusCode) ?? .error, "HTTP \(head.statusCode) \(head.reasonPhrase ?? "")")
        }
        let data = response.data ?? Data()
        guard let format = ImageFormat(sniffing: data) else {
            throw ToolFailure(.error, "not an image curlew decodes (PNG, JPEG, GIF, WebP): \(data.count) bytes of \(head.mimeType ?? "unknown type")")
        }
        let clock = ContinuousClock()
        let started = clock.now
        let image: Image
        do {
            image = try Image(data: data)
        } catch {
            throw ToolFailure(.error, "the \(format) image does not decode: \(ToolFailure.oneLine(error))")
        }
        let elapsed = clock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let stdout = Terminal.standardOutput
        stdout.write(Self.summary(format: format, image: image, bytes: data.count, decodeMilliseconds: milliseconds))
        if preview ?? stdout.isTerminal {
            let columns = width ?? min(64, (stdout.columns ?? 80) - 1)
            stdout.write(ImagePreview.render(image, maxColumns: max(1, columns), maxRows: 24))
        }
    }

    static func summary(format: ImageFormat, image: Image, bytes: Int, decodeMilliseconds: Double) -> String {
        let frames = max(1, image.frames.count)
        let duration = image.frames.reduce(0) { $0 + $1.delay }
        var text = "Format: \(format)\nSize:   \(image.width) × \(image.height) pixels\n"
        text += "Frames: \(frames)" + (frames > 1 ? String(format: " (%.2f s)", duration) : "") + "\n"
        text += "Bytes:  \(bytes)\n" + String(format: "Decode: %.1f ms\n", decodeMilliseconds)
        return text
    }
}
