import ArgumentParser
import Foundation
import Security
import SessionCore

/// `curlew pin https://host[:port]`: the certificates a server sends, leaf first, with the
/// public-key pin of each, as text or as the lines a user pastes into a configuration.
///
/// Uses `URLSessionManager.peerCertificates(for:)`: the handshake stops at certificate
/// verification, so no request is sent and nothing is trusted by this command.
struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the certificates a TLS server sends (leaf first) with their public-key pins.")

    /// The ways the pins are printed.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        /// Each certificate, its validity and its pin (the default).
        case text
        /// OkHttp's `CertificatePinner.Builder().add(...)` lines.
        case okhttp
        /// curl's `--pinnedpubkey` option.
        case curl
        /// curlew's own `--pin` options.
        case curlew
    }

    @Argument(help: "The server, as https://host or https://host:port.")
    var url: String

    @Option(name: .customLong("timeout"), help: "Idle timeout in seconds.")
    var timeout: Double = 30

    @Option(name: .customLong("format"), help: ArgumentHelp("text, okhttp, curl or curlew.", valueName: "format"))
    var format: Format = .text

    func run() async throws {
        guard let target = URL(string: url.contains("://") ? url : "https://" + url),
            target.scheme?.lowercased() == "https", let host = target.host
        else {
            throw ValidationError("'\(url)' is not an https URL")
        }
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = timeout
        let manager = URLSessionManager(configuration: configuration)
        let trust: ServerTrust
        do {
            trust = try await Exchange.using(manager) { try await manager.peerCertificates(for: target) }
        } catch {
            throw ToolFailure(transferError: error).report()
        }
        Terminal.standardOutput.write(Self.render(trust.certificates, format: format, host: host, url: target))
    }

    /// The text printed for `certificates` (leaf first).
    static func render(_ certificates: [Certificate], format: Format, host: String, url: URL) -> String {
        guard format == .text else {
            return renderPins(certificates.map(\.publicKeySHA256), format: format, host: host, url: url)
        }
        let dates = ISO8601DateFormatter()
        return certificates.enumerated().map { index, certificate in
            let role = index == 0 ? "leaf" : "sent #\(index)"
            // OpenSSL's RFC 2253 text escapes the C0 controls but not the C1 ones (an 8-bit
            // CSI in a name): the server's text never drives the terminal.
            return "[\(index)] \(role): \(certificate.subjectName.withoutControlCharacters)\n"
                + "    valid:  \(dates.string(from: certificate.notValidBefore)) – \(dates.string(from: certificate.notValidAfter))\n"
                + "    pin:    sha256/\(certificate.publicKeySHA256)\n"
        }.joined()
    }

    /// The pins (base64 SHA-256 of each key, leaf first) in one of the pasteable formats.
    static func renderPins(_ pins: [String], format: Format, host: String, url: URL) -> String {
        switch format {
        case .text:
            return pins.map { "sha256/\($0)\n" }.joined()
        case .okhttp:
            return "CertificatePinner.Builder()\n"
                + pins.map { "    .add(\"\(host)\", \"sha256/\($0)\")\n" }.joined()
                + "    .build()\n"
        case .curl:
            return "--pinnedpubkey '" + pins.map { "sha256//\($0)" }.joined(separator: ";") + "'\n"
        case .curlew:
            // A word for the shell: a URL's `&` or `;` would end the command there.
            return "curlew " + pins.map { "--pin sha256/\($0) " }.joined() + ShellQuoting.word(url.absoluteString) + "\n"
        }
    }
}
