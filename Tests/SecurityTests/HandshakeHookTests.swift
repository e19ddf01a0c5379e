import COpenSSL
import CurlewTestSupport
import Foundation
import Security
import XCTest

/// The engine hooks in a real TLS handshake: a client and a server `SSL` joined by an
/// in-memory BIO pair, the policy installed with `SSL_CTX_set_cert_verify_callback`,
/// exactly as SessionCore installs it from `CURLOPT_SSL_CTX_FUNCTION`.
final class HandshakeHookTests: XCTestCase {
    func testAcceptingPolicyCompletesTheHandshake() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(
            .publicKey, pins: [try SecurityTestHelpers.certificate(set.intermediate.certificatePEM)])
        let outcome = try handshake(server: set.leaf, policy: policy, domain: "localhost")
        XCTAssertTrue(outcome.completed)
        XCTAssertEqual(outcome.verifyResult, Int(X509_V_OK))
        XCTAssertEqual(outcome.hookResults.count, 1)
        guard case .success = outcome.hookResults.first else { return XCTFail("hook refused: \(outcome.hookResults)") }
        // The peer chain, read back through ServerTrust(x509Chain:), is what the server sent
        // and outlives the SSL objects (each X509 holds its own reference).
        let sent = try SecurityTestHelpers.sentChain(set.leaf)
        XCTAssertEqual(outcome.peerTrust?.certificates, sent)
        if let peerTrust = outcome.peerTrust {
            assertAccepted(policy, peerTrust, domain: "localhost")
        }
    }

    func testUnpinnedServerIsRejectedDuringTheHandshake() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot(
            .publicKey, pins: [try SecurityTestHelpers.certificate(set.unrelatedRoot.certificatePEM)])
        let outcome = try handshake(server: set.leaf, policy: policy, domain: "localhost")
        XCTAssertFalse(outcome.completed)
        XCTAssertEqual(outcome.verifyResult, Int(X509_V_ERR_APPLICATION_VERIFICATION))
        guard case .failure(let error) = outcome.hookResults.first else { return XCTFail("hook accepted") }
        XCTAssertEqual(error.reason, .noPinMatched)
    }

    func testWrongHostIsRejectedWithOpenSSLsHostMismatchCode() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let byName = try handshake(server: set.wrongHostLeaf, policy: policy, domain: "localhost")
        XCTAssertFalse(byName.completed)
        XCTAssertEqual(byName.verifyResult, Int(X509_V_ERR_HOSTNAME_MISMATCH))
        let byAddress = try handshake(server: set.wrongHostLeaf, policy: policy, domain: "127.0.0.1")
        XCTAssertEqual(byAddress.verifyResult, Int(X509_V_ERR_IP_ADDRESS_MISMATCH))
        // Control: the same server and policy, for the name it carries.
        XCTAssertTrue(try handshake(server: set.wrongHostLeaf, policy: policy, domain: "wrong.example.com").completed)
    }

    func testExpiredServerIsRejectedWithOpenSSLsOwnCode() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        let outcome = try handshake(server: set.expiredLeaf, policy: policy, domain: "localhost")
        XCTAssertFalse(outcome.completed)
        XCTAssertEqual(outcome.verifyResult, Int(X509_V_ERR_CERT_HAS_EXPIRED))
        XCTAssertTrue(try handshake(server: set.leaf, policy: policy, domain: "localhost").completed)
    }

    /// The policy's chain verification inherits the handshake's security level: the same
    /// weak chains are refused at the client context's level 2 and accepted when the client
    /// context itself is lowered, exactly as OpenSSL's own verification would decide.
    func testHandshakeSecurityLevelAppliesToThePolicysVerification() throws {
        let set = try SecurityTestHelpers.generated()
        let policy = try SecurityTestHelpers.policyTrustingTestRoot()
        // Positive control at level 2.
        XCTAssertTrue(try handshake(server: set.leaf, policy: policy, domain: "localhost", clientSecurityLevel: 2).completed)

        let weakKey = try handshake(server: set.weakKeyLeaf, policy: policy, domain: "localhost", clientSecurityLevel: 2)
        XCTAssertFalse(weakKey.completed)
        XCTAssertEqual(weakKey.verifyResult, Int(X509_V_ERR_EE_KEY_TOO_SMALL))
        XCTAssertTrue(try handshake(server: set.weakKeyLeaf, policy: policy, domain: "localhost", clientSecurityLevel: 1).completed)

        let sha1 = try handshake(server: set.sha1IntermediateLeaf, policy: policy, domain: "localhost", clientSecurityLevel: 1)
        XCTAssertFalse(sha1.completed)
        XCTAssertEqual(sha1.verifyResult, Int(X509_V_ERR_CA_MD_TOO_WEAK))
        XCTAssertTrue(try handshake(server: set.sha1IntermediateLeaf, policy: policy, domain: "localhost", clientSecurityLevel: 0).completed)
    }

    // MARK: Harness

    private struct Outcome {
        var completed: Bool
        var verifyResult: Int
        var hookResults: [Result<Void, TrustEvaluationError>]
        var peerTrust: ServerTrust?
    }

    /// What the verify callback receives through its `void *` argument.
    private final class HookContext {
        let policy: SecurityPolicy
        let domain: String?
        var results: [Result<Void, TrustEvaluationError>] = []

        init(policy: SecurityPolicy, domain: String?) {
            self.policy = policy
            self.domain = domain
        }
    }

    /// One handshake over a BIO pair. `clientSecurityLevel` overrides the client context's
    /// OpenSSL security level (nil: the machine's default); the server accepts any level, so
    /// it can present the deliberately weak test chains.
    private func handshake(
        server files: TestCertificates.Files, policy: SecurityPolicy, domain: String?, clientSecurityLevel: Int32? = nil
    ) throws -> Outcome {
        let context = HookContext(policy: policy, domain: domain)

        let serverContext = try XCTUnwrap(SSL_CTX_new(TLS_server_method()))
        defer { SSL_CTX_free(serverContext) }
        SSL_CTX_set_security_level(serverContext, 0)
        XCTAssertEqual(SSL_CTX_use_certificate_chain_file(serverContext, files.chainPEM.path), 1)
        XCTAssertEqual(SSL_CTX_use_PrivateKey_file(serverContext, files.privateKeyPEM.path, SSL_FILETYPE_PEM), 1)

        let clientContext = try XCTUnwrap(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(clientContext) }
        if let clientSecurityLevel { SSL_CTX_set_security_level(clientContext, clientSecurityLevel) }
        SSL_CTX_set_verify(clientContext, SSL_VERIFY_PEER, nil)
        // The engine's callback: evaluate with the policy, return 1 to continue, 0 to abort.
        SSL_CTX_set_cert_verify_callback(clientContext, { storeContext, argument in
            guard let storeContext, let argument else { return 0 }
            let hook = Unmanaged<HookContext>.fromOpaque(argument).takeUnretainedValue()
            let result = hook.policy.evaluateHandshake(storeContext: storeContext, forDomain: hook.domain)
            hook.results.append(result)
            if case .success = result { return 1 }
            return 0
        }, Unmanaged.passUnretained(context).toOpaque())

        let client = try XCTUnwrap(SSL_new(clientContext))
        defer { SSL_free(client) }
        let server = try XCTUnwrap(SSL_new(serverContext))
        defer { SSL_free(server) }
        var clientBIO: OpaquePointer?
        var serverBIO: OpaquePointer?
        XCTAssertEqual(BIO_new_bio_pair(&clientBIO, 0, &serverBIO, 0), 1)
        SSL_set_bio(client, clientBIO, clientBIO)   // each SSL now owns its end of the pair
        SSL_set_bio(server, serverBIO, serverBIO)
        SSL_set_connect_state(client)
        SSL_set_accept_state(server)

        var clientDone = false
        var serverDone = false
        var failed = false
        for _ in 0..<50 where !(clientDone && serverDone) && !failed {
            if !clientDone {
                let rc = SSL_do_handshake(client)
                if rc == 1 { clientDone = true } else { failed = failed || !wantsIO(client, rc) }
            }
            if !serverDone && !failed {
                let rc = SSL_do_handshake(server)
                if rc == 1 { serverDone = true } else { failed = failed || !wantsIO(server, rc) }
            }
        }
        ERR_clear_error()
        var peerTrust: ServerTrust?
        if clientDone, let chain = SSL_get_peer_cert_chain(client) {
            peerTrust = try ServerTrust(x509Chain: chain)
        }
        return Outcome(completed: clientDone && serverDone && !failed,
                       verifyResult: SSL_get_verify_result(client),
                       hookResults: context.results, peerTrust: peerTrust)
    }

    private func wantsIO(_ ssl: OpaquePointer, _ rc: Int32) -> Bool {
        let error = SSL_get_error(ssl, rc)
        return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE
    }
}
