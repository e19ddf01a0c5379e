import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The session-level challenge handler (AFNetworking's
/// `setSessionDidReceiveAuthenticationChallengeBlock:`): server trust goes to it, before the
/// task-level handler; HTTP 401 challenges never do. Real TLS and HTTP peers on loopback.
final class SessionChallengeTests: XCTestCase {
    private static let trustIt = AuthChallengeDisposition.useCredential(URLCredential(user: "", password: "", persistence: .none))

    func testSessionHandlerAloneAnswersServerTrust() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.selfSigned)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let queue = manager.operationQueue
        let methods = Mutex<[String]>([])
        manager.setSessionDidReceiveAuthenticationChallengeBlock { challenge in
            dispatchPrecondition(condition: .onQueue(queue))  // user code never on the driver
            methods.withLock { $0.append(challenge.protectionSpace.authenticationMethod) }
            XCTAssertNotNil(challenge.protectionSpace.curlewServerTrust?.certificates.first)
            return Self.trustIt
        }
        let response = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        XCTAssertEqual(methods.withLock { $0 }, [URLProtectionSpace.serverTrustAuthenticationMethod])
        XCTAssertEqual(server.requests.count, 1)
    }

    func testSessionHandlerComesBeforeTheTaskHandlerForServerTrust() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.selfSigned)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let asked = Mutex<[String]>([])
        manager.setAuthenticationChallengeHandler { _, _ in
            asked.withLock { $0.append("task") }
            return Self.trustIt
        }
        manager.setSessionDidReceiveAuthenticationChallengeBlock { _ in
            asked.withLock { $0.append("session") }
            return .performDefaultHandling
        }
        let refused = await manager.get(try server.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(refused)?.reason, .selfSigned, "\(refused.result)")
        XCTAssertEqual(asked.withLock { $0 }, ["session"])
        XCTAssertEqual(server.recordedApplicationBytes, 0)

        // Removed, the task-level handler is asked again.
        manager.setSessionDidReceiveAuthenticationChallengeBlock(nil)
        let trusted = await manager.get(try server.url("/y"))
        XCTAssertTrue(TLSFixture.isSuccess(trusted), "\(trusted.result)")
        XCTAssertEqual(asked.withLock { $0 }, ["session", "task"])
    }

    func testSessionHandlerCancelCancelsTheTask() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.unrelatedLeaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        manager.setSessionDidReceiveAuthenticationChallengeBlock { _ in .cancel }
        let response = await manager.get(try server.url("/x"))
        guard case .failure(let error) = response.result else { return XCTFail("expected a failure") }
        XCTAssertEqual(error as? SessionError, .cancelled)
        XCTAssertEqual(server.recordedApplicationBytes, 0)
    }

    func testSessionHandlerIsNotAskedForHTTPChallenges() async throws {
        let server = try TestServer { request in
            let expected = "Basic " + Data("user:secret".utf8).base64EncodedString()
            if request.headers.first(where: { $0.name.lowercased() == "authorization" })?.value == expected {
                return .json("{\"welcome\":true}")
            }
            return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"birds\"")], body: Data("who?".utf8))
        }
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: nil)
        let sessionAsked = Mutex(0)
        manager.setSessionDidReceiveAuthenticationChallengeBlock { _ in
            sessionAsked.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "user", password: "secret", persistence: .none))
        }
        // Alone, it leaves the 401 to the task.
        let unanswered = await manager.get(try server.url("/private"))
        XCTAssertEqual(unanswered.response?.statusCode, 401)
        XCTAssertEqual(server.requests.count, 1)

        // With a task-level handler, that one answers the 401.
        let taskAsked = Mutex(0)
        manager.setAuthenticationChallengeHandler { _, challenge in
            taskAsked.withLock { $0 += 1 }
            XCTAssertEqual(challenge.protectionSpace.authenticationMethod, NSURLAuthenticationMethodHTTPBasic)
            return .useCredential(URLCredential(user: "user", password: "secret", persistence: .none))
        }
        let answered = await manager.get(try server.url("/private"))
        XCTAssertTrue(TLSFixture.isSuccess(answered), "\(answered.result)")
        XCTAssertEqual(taskAsked.withLock { $0 }, 1)
        XCTAssertEqual(sessionAsked.withLock { $0 }, 0)
    }
}
