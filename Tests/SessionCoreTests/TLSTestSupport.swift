import CurlewTestSupport
import Foundation
import Security
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// Shared fixtures for the TLS policy, challenge and client-certificate tests.
enum TLSFixture {
    static func certificates() throws -> TestCertificates { try TestCertificates.shared() }

    /// A TLS test server presenting `files`' chain; answers every request with a small JSON
    /// object (the manager's default serializer is JSON).
    static func server(
        _ files: TestCertificates.Files, keepAlive: Bool = true, clientRoots: URL? = nil,
        clientVerification: TestServerTLS.ClientCertificateVerification = .none,
        handler: @escaping @Sendable (TestRequest) -> TestResponse = { _ in .json("{\"ok\":true}") }
    ) throws -> TestServer {
        try TestServer(
            tls: TestServerTLS(
                certificateChain: files.chainPEM, privateKey: files.privateKeyPEM, trustRoots: clientRoots,
                clientCertificateVerification: clientVerification),
            keepAlive: keepAlive, handler: handler)
    }

    static func certificate(_ files: TestCertificates.Files) throws -> Certificate {
        try Certificate(contentsOf: files.certificatePEM)
    }

    /// The default policy trusting the generated test root.
    static func trustingTestRoot() throws -> SecurityPolicy {
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try certificate(certificates().root)]
        return policy
    }

    static func manager(policy: SecurityPolicy?, configuration: SessionConfiguration = .default) -> URLSessionManager {
        var configuration = configuration
        configuration.proxy = .none
        configuration.timeoutIntervalForRequest = 15
        let manager = URLSessionManager(configuration: configuration)
        if let policy { manager.securityPolicy = policy }
        return manager
    }

    /// The trust failure of a response, or nil.
    static func trustFailure(_ response: DataResponse) -> TrustEvaluationError? {
        guard case .failure(let error) = response.result, case .serverTrustEvaluationFailed(let reason)? = error as? SessionError
        else { return nil }
        return reason
    }

    static func isSuccess(_ response: DataResponse) -> Bool {
        if case .success = response.result, response.response?.statusCode == 200 { return true }
        return false
    }
}

extension URLSessionManager {
    /// GET `url` to completion.
    func get(_ url: URL, headers: [String: String] = [:]) async -> DataResponse {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return await response(for: request)
    }
}
