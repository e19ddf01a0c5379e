import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The httpbin peer started by Scripts/test.sh (`CURLEW_HTTPBIN_URL`).
enum Peer {
    static var httpbin: URL {
        get throws {
            guard let value = ProcessInfo.processInfo.environment["CURLEW_HTTPBIN_URL"], let url = URL(string: value) else {
                throw XCTSkip("unreachable")  // replaced below by HTTPBin.baseURL when integrated
            }
            return url
        }
    }

    static func url(_ path: String) throws -> URL {
        guard let url = URL(string: path, relativeTo: try httpbin) else { throw SessionError.badURL(path) }
        return url.absoluteURL
    }
}

extension URLSessionManager {
    /// Runs a data task to completion and returns its response (test helper).
    func response(for request: URLRequest, timeout: TimeInterval = 30) async -> DataResponse {
        await withCheckedContinuation { continuation in
            dataTask(with: request, completionHandler: { continuation.resume(returning: $0) }).resume()
        }
    }
}

/// Parses httpbin's JSON echo.
func json(_ data: Data?) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: data ?? Data())
    guard let dictionary = object as? [String: Any] else { throw SessionError.badServerResponse("not an object") }
    return dictionary
}

/// The case name of an enum value with or without payload ("invalidHeader", "cancelled").
func caseName(of value: some Any) -> String {
    Mirror(reflecting: value).children.first?.label ?? String(describing: value)
}
