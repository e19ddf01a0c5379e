import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The authentication challenge handler: server trust overrides (per task, pinned to the
/// presented leaf) and HTTP Basic 401 answers, asked on the operation queue.
final class AuthenticationChallengeTests: XCTestCase {
    /// Records the challenges a handler saw.
    private final class Recorder: Sendable {
        let challenges = Mutex<[(method: String, subject: String?, failures: Int)]>([])
        let onOperationQueue = Mutex(true)
    }

    func testServerTrustUseCredentialRetriesTrustingPresentedLeaf() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.selfSigned)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let recorder = Recorder()
        let queue = manager.operationQueue
        manager.setAuthenticationChallengeHandler { _, challenge in
            let space = challenge.protectionSpace
            recorder.challenges.withLock {
                $0.append((space.authenticationMethod, space.curlewServerTrust?.certificates.first?.subjectSummary, challenge.previousFailureCount))
            }
            // Never on the driver thread: on the operation queue.
            dispatchPrecondition(condition: .onQueue(queue))
            return .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
        let response = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        let seen = recorder.challenges.withLock { $0 }
        XCTAssertEqual(seen.count, 1)
        XCTAssertEqual(seen.first?.method, URLProtectionSpace.serverTrustAuthenticationMethod)
        XCTAssertNotNil(seen.first?.subject)
        XCTAssertEqual(server.requests.count, 1)

        // The override was for that task only: a new task is judged by the policy again.
        manager.setAuthenticationChallengeHandler(nil)
        let again = await manager.get(try server.url("/y"))
        XCTAssertEqual(TLSFixture.trustFailure(again)?.reason, .selfSigned, "\(again.result)")
        XCTAssertEqual(server.requests.count, 1)
    }

    /// The override meets the response cache: an answer the handler's trust let in (fresh for
    /// ten minutes) is not kept, so the same URL asked again without the handler is judged by
    /// the policy, not answered from the cache; nor is it on disk for another manager.
    func testAnAnswerTheTrustOverrideLetInIsNotCached() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.selfSigned) { _ in
            TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("trusted once".utf8))
        }
        defer { server.shutdown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-override-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = SessionConfiguration.default
        configuration.responseCache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: configuration)
        manager.setAuthenticationChallengeHandler { _, _ in .useCredential(URLCredential(user: "", password: "", persistence: .none)) }
        let response = await manager.get(try server.url("/x"))
        XCTAssertEqual(response.data, Data("trusted once".utf8), "\(response.result)")
        XCTAssertEqual(server.requests.count, 1)

        manager.setAuthenticationChallengeHandler(nil)
        let again = await manager.get(try server.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(again)?.reason, .selfSigned, "\(again.result)")
        XCTAssertEqual(server.requests.count, 1)
        await manager.waitUntilInvalidatedAfterUse()

        var other = SessionConfiguration.default
        other.responseCache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        let second = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: other)
        var offline = URLRequest(url: try server.url("/x"))
        offline.cachePolicy = .returnCacheDataDontLoad
        let fromDisk = await second.response(for: offline)
        XCTAssertEqual(fromDisk.error as? SessionError, .resourceNotCached, "\(fromDisk.result)")
        await second.waitUntilInvalidatedAfterUse()
    }

    func testServerTrustDefaultHandlingKeepsRefusal() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.expiredLeaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let response = await manager.get(try server.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .expired)
        XCTAssertEqual(server.recordedApplicationBytes, 0)
    }

    func testServerTrustCancel() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.unrelatedLeaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        manager.setAuthenticationChallengeHandler { _, _ in .cancel }
        let response = await manager.get(try server.url("/x"))
        guard case .failure(let error) = response.result else { return XCTFail("expected a failure") }
        XCTAssertEqual(error as? SessionError, .cancelled)
        XCTAssertEqual(server.recordedApplicationBytes, 0)
    }

    func testHandlerNotAskedForTrustedServer() async throws {
        let certificates = try TLSFixture.certificates()
        let server = try TLSFixture.server(certificates.leaf)
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let asked = Mutex(0)
        manager.setAuthenticationChallengeHandler { _, _ in
            asked.withLock { $0 += 1 }
            return .cancel
        }
        let okResponse = await manager.get(try server.url("/x"))
        XCTAssertTrue(TLSFixture.isSuccess(okResponse), "\(okResponse.result)")
        XCTAssertEqual(asked.withLock { $0 }, 0)
    }

    /// A server-trust override is bound to the scheme, host and port it was given for: a
    /// redirect to another origin that presents the very same certificate asks again, and
    /// the refused origin receives nothing.
    func testServerTrustOverrideDoesNotFollowARedirectToAnotherOrigin() async throws {
        let certificates = try TLSFixture.certificates()
        let target = try TLSFixture.server(certificates.selfSigned)
        defer { target.shutdown() }
        let targetURL = try target.url("/elsewhere")
        let origin = try TLSFixture.server(certificates.selfSigned) { _ in .redirect(to: targetURL.absoluteString) }
        defer { origin.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let askedPorts = Mutex<[Int]>([])
        manager.setAuthenticationChallengeHandler { _, challenge in
            let count = askedPorts.withLock { ports -> Int in
                ports.append(challenge.protectionSpace.port)
                return ports.count
            }
            // Trust the first origin only; the second question gets the default answer.
            return count == 1 ? .useCredential(URLCredential(user: "", password: "", persistence: .none)) : .performDefaultHandling
        }
        let response = await manager.get(try origin.url("/start"))
        XCTAssertEqual(TLSFixture.trustFailure(response)?.reason, .selfSigned, "\(response.result)")
        XCTAssertEqual(askedPorts.withLock { $0 }, [origin.port, target.port])
        XCTAssertEqual(origin.requests.count, 1)
        XCTAssertEqual(target.requests.count, 0)
        XCTAssertEqual(target.recordedApplicationBytes, 0)
    }

    /// After a redirect away from an overridden origin, the next server is judged by the
    /// policy again: one the policy trusts is accepted without a new question.
    func testRedirectFromOverriddenOriginToTrustedServerUsesThePolicy() async throws {
        let certificates = try TLSFixture.certificates()
        let target = try TLSFixture.server(certificates.leaf)
        defer { target.shutdown() }
        let targetURL = try target.url("/trusted")
        let origin = try TLSFixture.server(certificates.selfSigned) { _ in .redirect(to: targetURL.absoluteString) }
        defer { origin.shutdown() }
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        let asked = Mutex(0)
        manager.setAuthenticationChallengeHandler { _, _ in
            asked.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
        let response = await manager.get(try origin.url("/start"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        XCTAssertEqual(asked.withLock { $0 }, 1)
        XCTAssertEqual(target.requests.count, 1)
    }

    // MARK: - HTTP Basic

    private static func basicServer() throws -> TestServer {
        try TestServer { request in
            let expected = "Basic " + Data("user:secret".utf8).base64EncodedString()
            if request.headers.first(where: { $0.name.lowercased() == "authorization" })?.value == expected {
                return .json("{\"welcome\":true}")
            }
            return TestResponse(
                status: 401, headers: [("WWW-Authenticate", "Basic realm=\"curlew tests\"")], body: Data("who are you".utf8))
        }
    }

    func testBasicChallengeRetriesWithCredential() async throws {
        let server = try Self.basicServer()
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: nil)
        let realms = Mutex<[String?]>([])
        manager.setAuthenticationChallengeHandler { _, challenge in
            realms.withLock { $0.append(challenge.protectionSpace.realm) }
            XCTAssertEqual(challenge.protectionSpace.authenticationMethod, NSURLAuthenticationMethodHTTPBasic)
            XCTAssertEqual((challenge.failureResponse as? HTTPURLResponse)?.statusCode, 401)
            return .useCredential(URLCredential(user: "user", password: "secret", persistence: .forSession))
        }
        let response = await manager.get(try server.url("/private"))
        XCTAssertTrue(TLSFixture.isSuccess(response), "\(response.result)")
        XCTAssertEqual(response.data, Data("{\"welcome\":true}".utf8))
        XCTAssertEqual(realms.withLock { $0 }, ["curlew tests"])
    }

    /// A streamed response (`bytes(for:)`) behind a Basic challenge the handler answers: the
    /// stream's head and bytes are the answer to the credential, never the 401's.
    func testAStreamedResponseBehindAChallengeIsTheAnswerNotThe401() async throws {
        let server = try Self.basicServer()
        defer { server.shutdown() }
        let (manager, asked) = Self.manager(answering: "secret", persistence: .forSession)
        let (bytes, head) = try await manager.bytes(for: URLRequest(url: try server.url("/private")))
        XCTAssertEqual(head.statusCode, 200)
        let body = try await bytes.reduce(into: Data()) { $0 += $1 }
        XCTAssertEqual(body, Data("{\"welcome\":true}".utf8))
        XCTAssertEqual(asked.count.withLock { $0 }, 1)
        await manager.waitUntilInvalidatedAfterUse()
        // With an answer that fails (a manager that remembers no credential), the stream is
        // the last 401, whole.
        let (refusing, _) = Self.manager(answering: "wrong", persistence: .none)
        let (refused, refusedHead) = try await refusing.bytes(for: URLRequest(url: try server.url("/other")))
        XCTAssertEqual(refusedHead.statusCode, 401)
        let refusedBody = try await refused.reduce(into: Data()) { $0 += $1 }
        XCTAssertEqual(refusedBody, Data("who are you".utf8))
        await refusing.waitUntilInvalidatedAfterUse()
    }

    /// A manager whose challenge handler answers every challenge with "user" and `password`,
    /// and the count of challenges it was asked.
    private static func manager(answering password: String, persistence: URLCredential.Persistence) -> (URLSessionManager, AskCount) {
        let manager = TLSFixture.manager(policy: nil)
        let asked = AskCount()
        manager.setAuthenticationChallengeHandler { _, _ in
            asked.count.withLock { $0 += 1 }
            return .useCredential(URLCredential(user: "user", password: password, persistence: persistence))
        }
        return (manager, asked)
    }

    /// How many challenges a handler was asked.
    private final class AskCount: Sendable {
        let count = Mutex(0)
    }

    func testBasicChallengeIsBoundedAndDeliversLast401() async throws {
        let server = try Self.basicServer()
        defer { server.shutdown() }
        let (manager, asked) = Self.manager(answering: "wrong", persistence: .none)
        let response = await manager.get(try server.url("/private"))
        XCTAssertEqual(response.response?.statusCode, 401)
        XCTAssertEqual(asked.count.withLock { $0 }, TransferSecurityState.maximumChallengeAttempts)
        XCTAssertEqual(server.requests.count, TransferSecurityState.maximumChallengeAttempts + 1)
    }

    func testBasicChallengeDefaultHandlingDelivers401() async throws {
        let server = try Self.basicServer()
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: nil)
        manager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let response = await manager.get(try server.url("/private"))
        XCTAssertEqual(response.response?.statusCode, 401)
        XCTAssertEqual(response.data, Data("who are you".utf8))
    }

    /// What a handler leaves standing ends the attempt as it would without a handler: the
    /// retrier is asked about the 401 (an `AuthenticationInterceptor` refreshes its token
    /// there) and about a refused server. Until 2026-11-27 a manager with a challenge handler
    /// (often set for server trust alone) delivered such a 401 without asking its retrier.
    func testWhatTheHandlerLeavesStandingGoesToTheRetrier() async throws {
        let calls = Mutex(0)
        let server = try TestServer { _ in
            let call = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            return call == 1
                ? TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"r\"")], body: Data("who?".utf8))
                : .text("welcome")
        }
        defer { server.shutdown() }
        let manager = TLSFixture.manager(policy: nil)
        let asked = Mutex(0)
        manager.setAuthenticationChallengeHandler { _, _ in
            asked.withLock { $0 += 1 }
            return .performDefaultHandling
        }
        manager.requestRetrier = FixedRetrier(decision: .retry)
        let response = await manager.get(try server.url("/private"))
        XCTAssertEqual(response.response?.statusCode, 200, "\(response.result)")
        XCTAssertEqual(response.data, Data("welcome".utf8))
        XCTAssertEqual(asked.withLock { $0 }, 1, "the handler was asked first")
        XCTAssertEqual(server.requests.count, 2)

        // A server the handler leaves refused: the retrier hears the trust failure.
        let certificates = try TLSFixture.certificates()
        let refused = try TLSFixture.server(certificates.expiredLeaf)
        defer { refused.shutdown() }
        let tlsManager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot())
        tlsManager.setAuthenticationChallengeHandler { _, _ in .performDefaultHandling }
        let retrier = RecordingRetrier { _, _ in .doNotRetry }
        tlsManager.requestRetrier = retrier
        let failed = await tlsManager.get(try refused.url("/x"))
        XCTAssertEqual(TLSFixture.trustFailure(failed)?.reason, .expired)
        XCTAssertEqual(retrier.asked.withLock { $0 }, ["0 serverTrustEvaluationFailed"])
    }
}

