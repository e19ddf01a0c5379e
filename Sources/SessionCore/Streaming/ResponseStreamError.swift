import Foundation

/// Why a streamed response (``ResponseBytes``, ``ResponseLines``, ``ServerSentEvents``) ended
/// other than through the transfer's own `SessionError`.
public enum ResponseStreamError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// A second iteration of a stream that can be read only once.
    case alreadyIterated
    /// A line longer than the limit arrived without a line break (a hostile or broken
    /// server); the transfer was cancelled.
    case lineTooLong(limit: Int)
    /// A server-sent event's data outgrew the limit before the blank line that ends it.
    case eventTooLarge(limit: Int)
    /// An event stream answered with a status other than 200 (and not 204, which ends the
    /// stream quietly): no reconnection follows.
    case unexpectedStatus(Int)
    /// An event stream answered with a content type other than `text/event-stream`.
    case unexpectedContentType(String?)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .alreadyIterated: return "The response stream was already iterated; a stream can be read once."
        case .lineTooLong(let limit): return "A line of the response exceeds \(limit) bytes."
        case .eventTooLarge(let limit): return "A server-sent event exceeds \(limit) bytes."
        case .unexpectedStatus(let status): return "The event stream answered with status \(status), not 200."
        case .unexpectedContentType(let type):
            return "The event stream answered with content type \(type ?? "none"), not text/event-stream."
        }
    }

    /// The same as ``description``.
    public var errorDescription: String? { description }
}
