import ArgumentParser
import Foundation
import Security
import Serialization
import SessionCore

/// The tool's exit codes: HTTPie's, plus one each for a name that does not resolve, a
/// connection that cannot be made and a TLS failure, which scripts want to tell apart.
enum ExitStatus: Int32, CaseIterable, Sendable {
    case success = 0
    case error = 1
    case timeout = 2
    case redirection = 3
    case clientError = 4
    case serverError = 5
    case tooManyRedirects = 6
    case dnsFailure = 7
    case cannotConnect = 8
    case tlsFailure = 9
    case usage = 64
    case interrupted = 130

    /// The line `--help` shows for this code.
    var summary: String {
        switch self {
        case .success: return "success"
        case .error: return "any other error (bad input, a file that cannot be read or written, ...)"
        case .timeout: return "timed out (--timeout)"
        case .redirection: return "3xx answer, with --check-status (redirects are not followed without --follow)"
        case .clientError: return "4xx answer, with --check-status"
        case .serverError: return "5xx answer, with --check-status"
        case .tooManyRedirects: return "too many redirects (--max-redirects)"
        case .dnsFailure: return "the host name could not be resolved"
        case .cannotConnect: return "the connection could not be made (refused, unreachable)"
        case .tlsFailure: return "TLS failed: the handshake, or the server is not trusted (--verify, --pin)"
        case .usage: return "bad arguments (an unknown flag, no URL, an argument that is no request item)"
        case .interrupted: return "interrupted (Ctrl-C); a download keeps what it received, for --continue"
        }
    }

    /// Every code with its meaning, for the commands' help text.
    static var helpText: String {
        "Exit codes:\n" + allCases.map { "  \(String($0.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0))\($0.summary)" }
            .joined(separator: "\n")
    }

    /// The code for a status when `--check-status` is on (nil: a success).
    static func forStatus(_ statusCode: Int) -> ExitStatus? {
        switch statusCode {
        case 300..<400: return .redirection
        case 400..<500: return .clientError
        case 500..<1000: return .serverError
        default: return nil
        }
    }

    /// The code for a failed transfer.
    static func forError(_ error: any Error) -> ExitStatus {
        guard let error = error as? SessionError else { return .error }
        switch error {
        case .timedOut: return .timeout
        case .tooManyRedirects: return .tooManyRedirects
        case .dnsFailure: return .dnsFailure
        case .cannotConnect: return .cannotConnect
        case .serverTrustEvaluationFailed, .tlsHandshakeFailed: return .tlsFailure
        case .cancelled: return .interrupted
        // A continued download answered with an error status: 3, 4 or 5 as for any download.
        case .resumeFailed(let statusCode, _): return forStatus(statusCode) ?? .error
        default: return .error
        }
    }
}

/// A failure the tool reports as one line on standard error, then exits with `status`.
struct ToolFailure: Error, CustomStringConvertible {
    var status: ExitStatus
    var message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The failure of a transfer: its readable description on one line.
    init(transferError error: any Error) {
        self.init(ExitStatus.forError(error), Self.oneLine(error))
    }

    var description: String { message }

    /// An error's description with its line breaks folded, so that stderr gets one line.
    static func oneLine(_ error: any Error) -> String {
        let text = String(describing: error)
        return text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

extension ToolFailure {
    /// Prints the line and turns the failure into the exit code argument-parser ends with.
    func report() -> ExitCode {
        // The message may carry what a server sent (a reason phrase, a type, a name): never
        // its control characters, C1 ones included.
        Terminal.standardError.write("curlew: error: \(message.withoutControlCharacters)\n")
        return ExitCode(status.rawValue)
    }
}
