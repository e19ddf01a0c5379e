import ArgumentParser
import Foundation
import Security
import SessionCore

/// `curlew pin https://host[:port]`: prints each certificate the server sends, leaf first,
/// with the public-key pin to put in a `SecurityPolicy`.
///
/// Uses `URLSessionManager.peerCertificates(for:)`: the handshake is stopped at certificate
/// verification, so no request is sent and nothing is trusted by this command.
struct Pin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the certificates a TLS server sends (leaf first) with their public-key pins.")

    @Argument(help: "The server, as https://host or https://host:port.")
    var url: String

    @Option(name: .customLong("timeout"), help: "Idle timeout in seconds.")
    var timeout: Double = 30

    func run() async throws {
        guard let target = URL(string: url), target.scheme?.lowercased() == "https", target.host != nil else {
            throw ValidationError("'\(url)' is not an https URL")
        }
        var configuration = SessionConfiguration.default
        configuration.timeoutIntervalForRequest = timeout
        let manager = URLSessionManager(configuration: configuration)
        defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
        let trust: ServerTrust
        do {
            trust = try await manager.peerCertificates(for: target)
        } catch {
            FileHandle.standardError.write(Data("curlew: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let dates = ISO8601DateFormatter()
        for (index, certificate) in trust.certificates.enumerated() {
            let role = index == 0 ? "leaf" : "sent #\(index)"
            print("[\(index)] \(role): \(certificate.subjectName)")
            print("    valid:  \(dates.string(from: certificate.notValidBefore)) – \(dates.string(from: certificate.notValidAfter))")
            print("    pin:    sha256//\(certificate.publicKeySHA256)")
        }
    }
}
