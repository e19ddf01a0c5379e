import Foundation
import ImageLoading
import Serialization
import SessionCore

/// Why one URL produced no thumbnail, coarse enough to count (the summary's "failures by kind").
enum FailureKind {
    static func of(_ error: any Error) -> String {
        switch error {
        case let error as SerializationError:
            switch error {
            case .unacceptableStatusCode(let status, _, _): return "HTTP \(status)"
            case .unacceptableContentType(let type, _, _, _): return "not an image type (\(type ?? "none"))"
            default: return "bad response"
            }
        case let error as ImageError:
            switch error {
            case .emptyData: return "empty body"
            case .unsupportedFormat: return "not PNG, JPEG, GIF or WebP"
            case .truncated: return "truncated image"
            case .corrupt: return "corrupt image"
            case .tooLarge, .animationTooLarge: return "image too large"
            default: return "undecodable image"
            }
        case let error as SessionError:
            switch error {
            case .cannotConnect: return "cannot connect"
            case .dnsFailure: return "unknown host"
            case .timedOut: return "timed out"
            case .networkLost: return "connection lost"
            case .badURL, .unsupportedScheme: return "bad URL"
            default: return "transfer failed"
            }
        case let error as URLError where error.code == .badURL:
            return "bad URL"
        case is WriteError:
            return "could not write the thumbnail"
        default:
            return "other (\(type(of: error)))"
        }
    }
}

/// Encoding or writing a thumbnail failed.
struct WriteError: Error, CustomStringConvertible {
    let path: String
    let underlying: any Error
    var description: String { "\(path): \(underlying)" }
}
