import CurlewTestSupport
import Foundation
@testable import ImageLoading
import Security
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The image cache meets an authentication challenge handler that trusts a server the security
/// policy refuses: that decision is for the one transfer it was made in. The image it let in
/// was cached, and answered the next request for it, whatever the handler (or the policy)
/// said by then, without a handshake.
final class ImageDownloaderTrustOverrideTests: XCTestCase {
    private func download(_ downloader: ImageDownloader, _ url: URL) async -> Result<Image, any Error> {
        await withCheckedContinuation { continuation in
            downloader.downloadImage(
                for: URLRequest(url: url), success: { _, _, image in continuation.resume(returning: .success(image)) },
                failure: { _, _, error in continuation.resume(returning: .failure(error)) })
        }
    }

    /// A challenge handler that trusts every server the policy refuses.
    private func trustEveryServer(_ downloader: ImageDownloader) {
        downloader.sessionManager.setAuthenticationChallengeHandler { _, _ in
            .useCredential(URLCredential(user: "", password: "", persistence: .none))
        }
    }

    func testAnImageATrustOverrideLetInIsNotCached() async throws {
        let certificates = try TestCertificates.shared()
        let picture = try TestImages.image(width: 2, height: 2, value: 5)
        let tls = TestServerTLS(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM)
        let overridden = try TestServer(tls: tls) { _ in TestImages.response(picture) }
        defer { overridden.shutdown() }
        let cache = AutoPurgingImageCache()
        // The default policy: the system's roots, which never signed the test leaf.
        let downloader = TestImages.downloader(cache: cache)
        trustEveryServer(downloader)
        let url = try overridden.url("/picture")
        let first = await download(downloader, url)
        XCTAssertEqual(try first.get().pixels, picture.pixels)

        downloader.sessionManager.setAuthenticationChallengeHandler(nil)
        let second = await download(downloader, url)
        guard case .failure(let error) = second else { return XCTFail("answered from the image cache") }
        guard case .serverTrustEvaluationFailed = error as? SessionError else { return XCTFail("\(error)") }
        XCTAssertEqual(overridden.requestCount("/picture"), 1, "the refused handshake sends nothing")

        // The control: an image from a server the policy trusts is cached as before.
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try Certificate(contentsOf: certificates.root.certificatePEM)]
        downloader.sessionManager.securityPolicy = policy
        let trusted = try TestServer(tls: tls) { _ in TestImages.response(picture) }
        defer { trusted.shutdown() }
        for _ in 0..<2 { _ = try await download(downloader, try trusted.url("/picture")).get() }
        XCTAssertEqual(trusted.requestCount("/picture"), 1, "the second answer comes from the image cache")

        // Pins added: the image the unpinned policy let in is no answer now.
        var pinned = policy
        pinned.pinningMode = .publicKey
        pinned.pinnedCertificates = [try Certificate(contentsOf: certificates.leaf.certificatePEM)]
        downloader.sessionManager.securityPolicy = pinned
        for _ in 0..<2 { _ = try await download(downloader, try trusted.url("/picture")).get() }
        XCTAssertEqual(trusted.requestCount("/picture"), 2, "fetched once more under the pins, then cached")
        await shutDown(downloader)
    }

    /// A server a trust override let in that redirects to one the policy trusts: it chose the
    /// image the task ends with, which is not cached either. The override's mark described the
    /// last hop only, and the image was cached under the first URL.
    func testAnImageAnOverriddenServerRedirectedToIsNotCached() async throws {
        let certificates = try TestCertificates.shared()
        let picture = try TestImages.image(width: 2, height: 2, value: 9)
        let trusted = try TestServer(
            tls: TestServerTLS(certificateChain: certificates.leaf.chainPEM, privateKey: certificates.leaf.privateKeyPEM)
        ) { _ in TestImages.response(picture) }
        defer { trusted.shutdown() }
        let overridden = try TestServer(
            tls: TestServerTLS(certificateChain: certificates.unrelatedLeaf.chainPEM, privateKey: certificates.unrelatedLeaf.privateKeyPEM)
        ) { _ in .redirect(to: trusted.baseURLString + "/picture") }
        defer { overridden.shutdown() }
        let downloader = TestImages.downloader(cache: AutoPurgingImageCache())
        var policy = SecurityPolicy.default
        policy.trustedRootCertificates = [try Certificate(contentsOf: certificates.root.certificatePEM)]
        downloader.sessionManager.securityPolicy = policy
        trustEveryServer(downloader)
        let url = try overridden.url("/hop")
        let first = await download(downloader, url)
        XCTAssertEqual(try first.get().pixels, picture.pixels)
        downloader.sessionManager.setAuthenticationChallengeHandler(nil)
        guard case .failure = await download(downloader, url) else { return XCTFail("answered from the image cache") }
        XCTAssertEqual(trusted.requestCount("/picture"), 1)
        await shutDown(downloader)
    }
}
