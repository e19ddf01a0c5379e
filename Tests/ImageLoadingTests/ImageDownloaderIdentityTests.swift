import CurlewTestSupport
import Foundation
import SessionCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ImageLoading

/// The image layer meets the user's identity: a request for the same URL with other
/// credentials (another signed-in user's avatar at `/me/avatar`) neither joins the download
/// under way nor is answered from the image cache, as the response cache below already
/// refuses it. Without credentials the keys are AFNetworking's.
final class ImageDownloaderIdentityTests: XCTestCase {
    private var server: TestServer!
    private var images: [String: Image] = [:]

    override func setUp() async throws {
        server = try TestServer()
        images = [
            "Bearer alice": try TestImages.image(width: 3, height: 2, value: 1),
            "Bearer bob": try TestImages.image(width: 3, height: 2, value: 2),
            "-": try TestImages.image(width: 3, height: 2, value: 3),
        ]
        let images = self.images
        // Each caller's own picture, slowly enough for a second request to find the first under way.
        server.route("/me/avatar") { request in
            guard let picture = images[request.header("Authorization") ?? "-"] else { return .text("who?", status: 403) }
            return TestImages.response(picture, delay: .milliseconds(300))
        }
    }

    override func tearDown() async throws {
        server.shutdown()
    }

    private func avatar(_ authorization: String?) throws -> URLRequest {
        var request = URLRequest(url: try server.url("/me/avatar"))
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        return request
    }

    func testAnotherUsersRequestNeitherJoinsTheDownloadNorHitsTheCache() async throws {
        let downloader = TestImages.downloader()
        let alice = Recorder<Image>(), bob = Recorder<Image>()
        let first = downloader.downloadImage(for: try avatar("Bearer alice"), success: { _, _, image in alice.append(image) })
        let second = downloader.downloadImage(for: try avatar("Bearer bob"), success: { _, _, image in bob.append(image) })
        XCTAssertNotEqual(first?.task.taskIdentifier, second?.task.taskIdentifier, "bob's request joined alice's download")
        try await eventually({ alice.count == 1 && bob.count == 1 }, "both delivered")
        XCTAssertEqual(alice.values, [images["Bearer alice"]])
        XCTAssertEqual(bob.values, [images["Bearer bob"]], "bob was given alice's picture")
        XCTAssertEqual(server.requestCount("/me/avatar"), 2)

        // From the cache: each user's own picture, and no transfer.
        let again = Recorder<Image>()
        XCTAssertNil(downloader.downloadImage(for: try avatar("Bearer alice"), success: { _, _, image in again.append(image) }))
        XCTAssertNil(downloader.downloadImage(for: try avatar("Bearer bob"), success: { _, _, image in again.append(image) }))
        try await eventually({ again.count == 2 }, "cache hits delivered")
        XCTAssertEqual(Set(again.values.map(\.pixels)), Set([images["Bearer alice"], images["Bearer bob"]].compactMap { $0?.pixels }))
        XCTAssertEqual(server.requestCount("/me/avatar"), 2)
        XCTAssertEqual(downloader.cachedImage(for: try avatar("Bearer bob")), images["Bearer bob"])

        // A request without credentials is someone else again.
        XCTAssertNil(downloader.cachedImage(for: try avatar(nil)))
        let anonymous = Recorder<Image>()
        XCTAssertNotNil(downloader.downloadImage(for: try avatar(nil), success: { _, _, image in anonymous.append(image) }))
        try await eventually({ anonymous.count == 1 }, "anonymous delivered")
        XCTAssertEqual(anonymous.values, [images["-"]])
        XCTAssertEqual(server.requestCount("/me/avatar"), 3)
        await shutDown(downloader)
    }

    /// A view showing alice's avatar, then asked for bob's at the same URL while alice's is
    /// still loading (the app signed the other user in): bob's load replaces hers.
    func testABindingAskedForAnotherUsersImageOfTheSameURLLoadsIt() async throws {
        let downloader = TestImages.downloader()
        RecordingImageView.sharedImageDownloader = downloader
        defer { RecordingImageView.sharedImageDownloader = .defaultInstance }
        let queue = DispatchQueue(label: "image-identity-tests.ui")
        let view = RecordingImageView()
        view.setImage(withURLRequest: try avatar("Bearer alice"), on: queue)
        view.setImage(withURLRequest: try avatar("Bearer bob"), on: queue)
        try await eventually({ view.history.count == 1 }, "an image arrives")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "every transfer ended")
        queue.sync {}
        XCTAssertEqual(view.history, [images["Bearer bob"]], "the view kept loading alice's avatar for bob")
        await shutDown(downloader)
    }

    /// The prefetcher tells them apart too (one user's prefetch does not stand in for the
    /// other's), and stopping a URL stops its prefetches whoever they are for.
    func testThePrefetcherKeepsAnotherUsersPrefetchOfTheURL() async throws {
        let downloader = TestImages.downloader()
        let prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 4)
        prefetcher.startPrefetching(for: [try avatar("Bearer alice"), try avatar("Bearer bob"), try avatar("Bearer alice")])
        XCTAssertTrue(prefetcher.prefetchCounts == (0, 2), "\(prefetcher.prefetchCounts)")
        prefetcher.stopPrefetching(for: [try server.url("/me/avatar")])
        XCTAssertTrue(prefetcher.prefetchCounts == (0, 0), "\(prefetcher.prefetchCounts)")
        try await eventually({ downloader.pendingDownloadCount == (0, 0, 0) }, "both withdrawn")
        await shutDown(downloader)
    }

    func testTheCachesKeyAddsTheRequestsOwnCredentialsOnly() throws {
        let url = try XCTUnwrap(URL(string: "https://images.example.com/me/avatar?size=64"))
        func key(_ fields: [String: String], url: URL = url, _ identifier: String? = "@2x") -> String {
            var request = URLRequest(url: url)
            for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
            return AutoPurgingImageCache.identifier(for: request, withAdditionalIdentifier: identifier)
        }
        XCTAssertEqual(key([:]), url.absoluteString + "@2x", "AFNetworking's key for a request without credentials")
        XCTAssertEqual(key(["Accept": "image/webp"]), url.absoluteString + "@2x")
        XCTAssertEqual(key(["Authorization": "Bearer alice"]), key(["Authorization": "Bearer alice"]))
        let distinct = [
            key([:]), key(["Authorization": "Bearer alice"]), key(["Authorization": "Bearer bob"]),
            key(["Cookie": "session=alice"]), key(["Proxy-Authorization": "Basic eDp5"]),
            key([:], url: try XCTUnwrap(URL(string: "https://alice:pw@images.example.com/me/avatar?size=64"))),
        ]
        XCTAssertEqual(Set(distinct).count, distinct.count, "\(distinct)")
        XCTAssertFalse(distinct.contains { $0.contains("alice") && $0.contains("Bearer") }, "no credential in a key")
        XCTAssertNil(URLRequest(url: url).credentialsDigest)
    }
}
