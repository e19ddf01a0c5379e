import CurlewTestSupport
import Foundation
import Security
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// The downloader's credentials are bound to the origins they are for (issue 19, #10; the
/// unbound one to the first https origin it answers): two loopback servers are two origins
/// (same host, other port); the second one answers every request with `401 Basic` and records
/// what it received.
final class ImageDownloaderCredentialTests: XCTestCase {
    private var picture: Image!
    private var owner: TestServer!
    private var stranger: TestServer!
    private let credential = URLCredential(user: "user", password: "secret", persistence: .forSession)
    private static let expected = "Basic " + Data("user:secret".utf8).base64EncodedString()

    /// Answers `picture` to `user:secret`, else `401 Basic realm="images"`.
    private static func protected(_ picture: Image) -> @Sendable (TestRequest) -> TestResponse {
        { request in
            if request.header("Authorization") == expected { return TestImages.response(picture) }
            return TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"images\"")], body: Data())
        }
    }

    override func setUp() async throws {
        picture = try TestImages.image(width: 2, height: 2, value: 11)
        owner = try TestServer(handler: Self.protected(picture))
        stranger = try TestServer { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"images\"")], body: Data())
        }
        owner.route("/hop") { [stranger] _ in .redirect(to: stranger!.baseURLString + "/elsewhere.png") }
    }

    override func tearDown() async throws {
        owner.shutdown()
        stranger.shutdown()
    }

    /// Downloads `url` and returns the status code it ended with (200 for an image).
    private func status(_ downloader: ImageDownloader, _ url: URL) async -> Int {
        await withCheckedContinuation { continuation in
            downloader.downloadImage(
                for: URLRequest(url: url), success: { _, _, _ in continuation.resume(returning: 200) },
                failure: { _, response, _ in continuation.resume(returning: response?.statusCode ?? -1) })
        }
    }

    private func authorizationHeaders(_ server: TestServer) -> [String] {
        server.requests.flatMap { $0.headerValues("Authorization") }
    }

    func testABoundCredentialIsSentToItsOriginAndNoOther() async throws {
        let downloader = TestImages.downloader(cache: nil)
        try downloader.setCredential(credential, for: owner.baseURL)

        let ownStatus = await status(downloader, try owner.url("/private.png"))
        XCTAssertEqual(ownStatus, 200, "the bound origin gets the credential, over http too")
        XCTAssertEqual(authorizationHeaders(owner), [Self.expected])

        let strangerStatus = await status(downloader, try stranger.url("/other.png"))
        XCTAssertEqual(strangerStatus, 401, "another origin's 401 is delivered")
        let redirectedStatus = await status(downloader, try owner.url("/hop"))
        XCTAssertEqual(redirectedStatus, 401, "nor is the credential sent to the origin a redirect leads to")
        XCTAssertEqual(stranger.requests.count, 2)
        XCTAssertEqual(authorizationHeaders(stranger), [], "the other origin never received the password")
        await shutDown(downloader)
    }

    func testAnUnboundCredentialIsNeverSentOverHTTP() async throws {
        let downloader = TestImages.downloader(cache: nil)
        downloader.credential = credential
        let ownStatus = await status(downloader, try owner.url("/private.png"))
        let strangerStatus = await status(downloader, try stranger.url("/other.png"))
        XCTAssertEqual([ownStatus, strangerStatus], [401, 401])
        XCTAssertEqual(authorizationHeaders(owner) + authorizationHeaders(stranger), [], "no password in the clear")
        await shutDown(downloader)
    }

    func testAnUnboundCredentialIsOfferedOverHTTPS() async throws {
        let certificates = try TestCertificates.shared()
        let secured = try TestServer(
            tls: TestServerTLS(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM),
            handler: Self.protected(picture))
        defer { secured.shutdown() }
        let downloader = TestImages.downloader(cache: nil)
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try Certificate(contentsOf: certificates.root.certificatePEM)]
        downloader.sessionManager.securityPolicy = policy
        downloader.credential = credential

        let securedStatus = await status(downloader, try secured.url("/private.png"))
        XCTAssertEqual(securedStatus, 200, "over https the unbound credential still answers")
        XCTAssertEqual(authorizationHeaders(secured), [Self.expected])
        await shutDown(downloader)
    }

    /// Two https origins on loopback, both asking for Basic: `securedOwner` accepts
    /// `user:secret`, `securedStranger` refuses everything and redirects `/hop` to the owner.
    private func secureOrigins() throws -> (owner: TestServer, stranger: TestServer, downloader: ImageDownloader) {
        let certificates = try TestCertificates.shared()
        let tls = TestServerTLS(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM)
        let securedOwner = try TestServer(tls: tls, handler: Self.protected(picture))
        let securedStranger = try TestServer(tls: tls) { _ in
            TestResponse(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"images\"")], body: Data())
        }
        securedStranger.route("/hop") { _ in .redirect(to: securedOwner.baseURLString + "/private.png") }
        securedOwner.route("/hop") { _ in .redirect(to: securedStranger.baseURLString + "/elsewhere.png") }
        let downloader = TestImages.downloader(cache: nil)
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try Certificate(contentsOf: certificates.root.certificatePEM)]
        downloader.sessionManager.securityPolicy = policy
        return (securedOwner, securedStranger, downloader)
    }

    func testAnUnboundCredentialAnswersTheFirstHTTPSOriginItIsUsedForAndNoOther() async throws {
        let (securedOwner, securedStranger, downloader) = try secureOrigins()
        defer { securedOwner.shutdown(); securedStranger.shutdown() }
        downloader.credential = credential

        let ownStatus = await status(downloader, try securedOwner.url("/private.png"))
        XCTAssertEqual(ownStatus, 200, "the first origin to use it gets it")
        XCTAssertEqual(authorizationHeaders(securedOwner), [Self.expected])
        func space(_ server: TestServer) -> URLProtectionSpace {
            URLProtectionSpace(host: "127.0.0.1", port: server.port, protocol: "https", realm: "images",
                               authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        }
        XCTAssertTrue(downloader.credential(for: space(securedOwner)) === credential)
        XCTAssertNil(downloader.credential(for: space(securedStranger)), "now bound to the first origin")

        let strangerStatus = await status(downloader, try securedStranger.url("/other.png"))
        XCTAssertEqual(strangerStatus, 401, "another https origin's 401 is delivered")
        let redirectedStatus = await status(downloader, try securedOwner.url("/hop"))
        XCTAssertEqual(redirectedStatus, 401, "and so is the 401 of the origin a redirect leads to")
        XCTAssertEqual(securedStranger.requests.count, 2)
        XCTAssertEqual(authorizationHeaders(securedStranger), [], "the other origin never received the password")

        downloader.credential = credential  // set again: the origin is forgotten
        XCTAssertTrue(downloader.credential(for: space(securedStranger)) === credential)
        await shutDown(downloader)
    }

    func testAnUnboundCredentialIsNotBoundByARedirectTarget() async throws {
        let (securedOwner, securedStranger, downloader) = try secureOrigins()
        defer { securedOwner.shutdown(); securedStranger.shutdown() }
        downloader.credential = credential

        // The stranger's own URL redirects to the owner, whose 401 comes on a hop the caller
        // did not ask for: not answered, and the credential stays unbound.
        let redirectedStatus = await status(downloader, try securedStranger.url("/hop"))
        XCTAssertEqual(redirectedStatus, 401)
        XCTAssertEqual(authorizationHeaders(securedOwner), [], "no password on a redirect's hop")

        let ownStatus = await status(downloader, try securedOwner.url("/private.png"))
        XCTAssertEqual(ownStatus, 200, "the first origin asked for directly binds it")
        XCTAssertEqual(authorizationHeaders(securedOwner), [Self.expected])
        XCTAssertEqual(authorizationHeaders(securedStranger), [])
        await shutDown(downloader)
    }

    func testAProtectionSpaceBindsTheRealmAndMethod() async throws {
        let downloader = TestImages.downloader(cache: nil)
        let url = try owner.url("/private.png")
        func space(realm: String?, method: String = NSURLAuthenticationMethodHTTPBasic) -> URLProtectionSpace {
            URLProtectionSpace(host: "127.0.0.1", port: owner.port, protocol: "http", realm: realm, authenticationMethod: method)
        }
        try downloader.setCredential(credential, for: space(realm: "another realm"))
        try downloader.setCredential(credential, for: space(realm: "images", method: NSURLAuthenticationMethodHTTPDigest))
        let wrongSpace = await status(downloader, url)
        XCTAssertEqual(wrongSpace, 401, "another realm or method is another protection space")
        XCTAssertEqual(authorizationHeaders(owner), [])

        try downloader.setCredential(credential, for: space(realm: "images"))
        XCTAssertTrue(downloader.credential(for: space(realm: "images")) === credential)
        XCTAssertNil(downloader.credential(for: space(realm: "images", method: NSURLAuthenticationMethodNTLM)))
        let rightSpace = await status(downloader, url)
        XCTAssertEqual(rightSpace, 200)
        XCTAssertEqual(authorizationHeaders(owner), [Self.expected])

        // Removed: the next challenge gets nothing (the manager did not keep a copy).
        try downloader.setCredential(nil, for: space(realm: "images"))
        let removed = await status(downloader, url)
        XCTAssertEqual(removed, 401)
        XCTAssertEqual(authorizationHeaders(owner), [Self.expected], "no second Authorization")
        await shutDown(downloader)
    }

    func testOriginsAreComparedBySchemeHostAndPort() throws {
        let downloader = TestImages.downloader(cache: nil)
        try downloader.setCredential(credential, for: XCTUnwrap(URL(string: "HTTP://Images.Example:80/any/path")), realm: "r")
        func space(_ host: String, _ port: Int, _ scheme: String, realm: String? = "r") -> URLProtectionSpace {
            URLProtectionSpace(host: host, port: port, protocol: scheme, realm: realm, authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        }
        XCTAssertNotNil(downloader.credential(for: space("images.example", 80, "http")))
        XCTAssertNil(downloader.credential(for: space("images.example", 80, "http", realm: "other")))
        XCTAssertNil(downloader.credential(for: space("images.example", 8080, "http")))
        XCTAssertNil(downloader.credential(for: space("images.example", 443, "https")))
        XCTAssertNil(downloader.credential(for: space("cdn.example", 80, "http")))

        downloader.credential = URLCredential(user: "any", password: "where", persistence: .none)
        XCTAssertEqual(downloader.credential(for: space("cdn.example", 443, "https"))?.user, "any", "unbound: https")
        XCTAssertNil(downloader.credential(for: space("cdn.example", 80, "http")), "unbound: never http")
        XCTAssertEqual(downloader.credential(for: space("images.example", 80, "http"))?.user, "user", "bound wins")

        XCTAssertThrowsError(try downloader.setCredential(credential, for: XCTUnwrap(URL(string: "file:///tmp/x"))))
        XCTAssertThrowsError(try downloader.setCredential(credential, for: XCTUnwrap(URL(string: "/relative"))))
        XCTAssertThrowsError(try downloader.setCredential(credential, for: space("ftp.example", 21, "ftp")))
    }

    // MARK: The image cache meets the downloader's credentials

    /// An image the downloader's own credential unlocked is its answer only: a second
    /// downloader sharing the cache, with no credential, is not given it (it gets the 401),
    /// while the first one's next load of it is a cache hit.
    /// Two downloaders sharing one image cache, the first with `credential` for `owner`.
    private func downloadersSharingACache() throws -> (withPassword: ImageDownloader, withoutPassword: ImageDownloader, cache: AutoPurgingImageCache) {
        let shared = AutoPurgingImageCache()
        let withPassword = TestImages.downloader(cache: shared)
        try withPassword.setCredential(credential, for: owner.baseURL)
        return (withPassword, TestImages.downloader(cache: shared), shared)
    }

    /// A request made after a sign-out (or a sign-in) never joins a transfer that started
    /// under the credentials before: it was given the image the old password unlocked. The
    /// completion queue is held so the second request finds the first one still listed, and
    /// the sign-out waits until the password has answered the first one's challenge.
    func testARequestAfterACredentialChangeDoesNotJoinATransferStartedBefore() async throws {
        let downloader = TestImages.downloader(cache: nil)
        let held = DispatchQueue(label: "image-downloader-credential-tests.held-completions")
        downloader.sessionManager.completionQueue = held
        try downloader.setCredential(credential, for: owner.baseURL)
        let url = try owner.url("/me/avatar.png")
        let outcomes = Recorder<String>()
        let gate = DispatchSemaphore(value: 0)
        held.async { gate.wait() }
        downloader.downloadImage(
            for: URLRequest(url: url), success: { _, _, _ in outcomes.append("signed in: 200") },
            failure: { _, response, _ in outcomes.append("signed in: \(response?.statusCode ?? -1)") })
        try await eventually({ self.authorizationHeaders(self.owner) == [Self.expected] }, "the password answered the challenge")
        try downloader.setCredential(nil, for: owner.baseURL)  // signed out
        downloader.downloadImage(
            for: URLRequest(url: url), success: { _, _, _ in outcomes.append("signed out: 200") },
            failure: { _, response, _ in outcomes.append("signed out: \(response?.statusCode ?? -1)") })
        gate.signal()
        try await eventually({ outcomes.count == 2 }, "both delivered")
        XCTAssertEqual(Set(outcomes.values), ["signed in: 200", "signed out: 401"], "the signed-out request joined the signed-in transfer")
        await shutDown(downloader)
    }

    func testAnImageACredentialUnlockedIsNotAnotherDownloadersAnswerFromASharedCache() async throws {
        let (withPassword, withoutPassword, _) = try downloadersSharingACache()
        let url = try owner.url("/me/avatar.png")

        let unlocked = await status(withPassword, url)
        XCTAssertEqual(unlocked, 200)
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 2, "the 401, then the answer to the credential")

        let stranger = await status(withoutPassword, url)
        XCTAssertEqual(stranger, 401, "the downloader without the password was given the protected image from the cache")
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 3)

        let again = await status(withPassword, url)
        XCTAssertEqual(again, 200)
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 3, "the credential's own downloader still has it cached")
        await shutDown(withPassword)
        await shutDown(withoutPassword)
    }

    /// A downloader whose credential changes hands (removed at sign-out, or set again) does not
    /// answer from the cache what the previous one unlocked.
    func testAnImageACredentialUnlockedIsLoadedAgainAfterTheCredentialChanges() async throws {
        let downloader = TestImages.downloader()
        try downloader.setCredential(credential, for: owner.baseURL)
        let url = try owner.url("/me/avatar.png")
        let first = await status(downloader, url)
        let cached = await status(downloader, url)
        XCTAssertEqual([first, cached], [200, 200])
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 2, "the second load is a cache hit")

        try downloader.setCredential(nil, for: owner.baseURL)
        let signedOut = await status(downloader, url)
        XCTAssertEqual(signedOut, 401, "the signed-out downloader answered from the cache")
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 3)

        try downloader.setCredential(credential, for: owner.baseURL)
        let signedIn = await status(downloader, url)
        XCTAssertEqual(signedIn, 200)
        XCTAssertEqual(owner.requestCount("/me/avatar.png"), 5, "a credential set again asks the server again")
        await shutDown(downloader)
    }

    /// An image that needed no credential is shared as before: the key of a public image is
    /// AFNetworking's, whatever credentials the downloader holds.
    func testAPublicImageIsStillSharedByDownloadersWithAndWithoutCredentials() async throws {
        owner.route("/public.png", response: TestImages.response(picture))
        let (withPassword, withoutPassword, shared) = try downloadersSharingACache()
        let url = try owner.url("/public.png")
        let first = await status(withPassword, url)
        let second = await status(withoutPassword, url)
        XCTAssertEqual([first, second], [200, 200])
        XCTAssertEqual(owner.requestCount("/public.png"), 1, "a public image is one cache entry for both")
        XCTAssertNotNil(shared.image(for: URLRequest(url: url), withAdditionalIdentifier: nil))
        await shutDown(withPassword)
        await shutDown(withoutPassword)
    }
}
