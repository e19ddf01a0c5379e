import CurlewTestSupport
import Foundation
import Security
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import SessionCore

/// The response cache meets the security policy and the per-host pins: an `https` answer is
/// as trustworthy as the check its server passed. An entry filed under one trust answered
/// under another — after the policy changed (pins rotated after a compromise), or for a
/// manager with pins sharing the cache with one without — handing out bytes from a server the
/// current check never saw.
final class ResponseCacheTrustTests: XCTestCase {
    func testAnEntryAnswersOnlyUnderTheTrustItWasAdmittedUnder() async throws {
        let certificates = try TLSFixture.certificates()
        let answers = Mutex(0)
        let server = try TLSFixture.server(certificates.leaf) { _ in
            let number = answers.withLock { count -> Int in
                count += 1
                return count
            }
            return TestResponse(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("answer \(number)".utf8))
        }
        defer { server.shutdown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-trust-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        let rootOnly = try TLSFixture.trustingTestRoot()
        var pinned = rootOnly
        pinned.pinningMode = .publicKey
        pinned.pinnedCertificates = [try TLSFixture.certificate(certificates.leaf)]
        let url = try server.url("/x")
        func body(_ manager: URLSessionManager, offline: Bool = false) async -> String {
            var request = URLRequest(url: url)
            if offline { request.cachePolicy = .returnCacheDataDontLoad }
            let response = await manager.response(for: request)
            // The body as received (the manager's JSON serializer refuses it: not the point here).
            if let error = response.error as? SessionError { return "error: \(error)" }
            return String(decoding: response.data ?? Data(), as: UTF8.self)
        }
        let notCached = "error: \(SessionError.resourceNotCached)"

        let manager = TLSFixture.manager(policy: rootOnly, configuration: configuration)
        let first = await body(manager)
        let again = await body(manager)
        XCTAssertEqual([first, again], ["answer 1", "answer 1"], "the same trust: answered from the cache")
        // Pins added: the entry the unpinned policy admitted is no answer now.
        manager.securityPolicy = pinned
        let underPins = await body(manager)
        let underPinsAgain = await body(manager)
        XCTAssertEqual([underPins, underPinsAgain], ["answer 2", "answer 2"])

        // A manager without those pins sharing the cache: a miss, and its answer replaces the entry.
        let other = TLSFixture.manager(policy: rootOnly, configuration: configuration)
        let otherOffline = await body(other, offline: true)
        XCTAssertEqual(otherOffline, notCached)
        let otherAnswer = await body(other)
        XCTAssertEqual(otherAnswer, "answer 3")
        let pinnedAfterOther = await body(manager)
        XCTAssertEqual(pinnedAfterOther, "answer 4")

        // Per-host pins are part of the trust too.
        var perHost = configuration
        perHost.pinningPolicy = PinningPolicy(pinSets: [
            PinSet(host: "127.0.0.1", pins: [PinSet.pin(of: try TLSFixture.certificate(certificates.leaf))]),
        ])
        let hostPinned = TLSFixture.manager(policy: pinned, configuration: perHost)
        let hostPinnedOffline = await body(hostPinned, offline: true)
        XCTAssertEqual(hostPinnedOffline, notCached)

        // The tag is the settings' content: another cache on the same directory (a restart),
        // under an equal policy, is answered from the disk.
        await manager.waitUntilInvalidatedAfterUse()
        await other.waitUntilInvalidatedAfterUse()
        await hostPinned.waitUntilInvalidatedAfterUse()
        var restarted = SessionConfiguration.default
        restarted.responseCache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        let later = TLSFixture.manager(policy: pinned, configuration: restarted)
        let fromDisk = await body(later, offline: true)
        XCTAssertEqual(fromDisk, "answer 4")
        // The disk kept the entry's trust: under another policy it is still a miss.
        let unpinnedLater = TLSFixture.manager(policy: rootOnly, configuration: restarted)
        let unpinnedFromDisk = await body(unpinnedLater, offline: true)
        XCTAssertEqual(unpinnedFromDisk, notCached)
        XCTAssertEqual(answers.withLock { $0 }, 4)
        await later.waitUntilInvalidatedAfterUse()
        await unpinnedLater.waitUntilInvalidatedAfterUse()
    }

    /// Which requests have a trust: `https`; `http` when libcurl's HSTS cache may send it as
    /// `https` (the policy then judges its handshake) or a pinned HTTPS proxy carries it.
    func testWhichRequestsHaveATrust() throws {
        let https = URLRequest(url: try XCTUnwrap(URL(string: "https://example.test/x")))
        let http = URLRequest(url: try XCTUnwrap(URL(string: "http://example.test/x")))
        func trust(_ configure: (inout SessionConfiguration) -> Void, _ request: URLRequest) -> CacheTrust? {
            var configuration = SessionConfiguration.default
            configure(&configuration)
            let manager = URLSessionManager(configuration: configuration)
            defer { manager.invalidateSessionCancelingTasks(true, resetSession: false) }
            return manager.engine.cacheTrust(for: request)
        }
        XCTAssertNotNil(trust({ _ in }, https))
        XCTAssertNil(trust({ _ in }, http))
        let upgraded = trust({ $0.strictTransportSecurity = .inMemory }, http)
        XCTAssertNotNil(upgraded, "HSTS may send it over TLS")
        XCTAssertEqual(upgraded?.tag, trust({ _ in }, https)?.tag, "judged by the same policy")
        let pin = PinSet.pin(of: try TLSFixture.certificate(try TLSFixture.certificates().leaf))
        let proxyPinned = trust({ $0.proxyPinningPolicy = PinningPolicy(pinSets: [PinSet(host: "proxy.test", pins: [pin])]) }, http)
        XCTAssertNotNil(proxyPinned, "a pinned HTTPS proxy carries it")
        XCTAssertNotEqual(proxyPinned?.tag, upgraded?.tag, "the proxy's pins are part of the trust")
    }

    /// An entry a caller stored answers under any trust (the caller vouches for it); one
    /// without a trust (an older Curlew's file) answers no `https` lookup.
    func testCallerStoredEntriesAnswerAnyTrustAndUntaggedOnesNone() async throws {
        let url = try XCTUnwrap(URL(string: "https://127.0.0.1:9/entry"))
        let request = URLRequest(url: url)
        func entry(_ text: String) -> CachedResponse {
            CachedResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1", fields: [.init(name: "Cache-Control", value: "max-age=600")],
                body: Data(text.utf8), requestDate: Date(), responseDate: Date(), varyingRequestFields: [:])
        }
        var offline = request
        offline.cachePolicy = .returnCacheDataDontLoad
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 0, directory: nil)
        var configuration = SessionConfiguration.default
        configuration.responseCache = cache
        let manager = TLSFixture.manager(policy: try TLSFixture.trustingTestRoot(), configuration: configuration)
        cache.storeCachedResponse(entry("vouched"), for: request)
        let vouched = await manager.response(for: offline)
        XCTAssertEqual(vouched.data, Data("vouched".utf8), "\(vouched.result)")
        cache.store(entry("untagged"), for: request)  // trustTag nil, as an older Curlew filed it
        let untagged = await manager.response(for: offline)
        XCTAssertEqual(untagged.error as? SessionError, .resourceNotCached, "\(untagged.result)")
        await manager.waitUntilInvalidatedAfterUse()
    }

    /// What the tag is made of: equal settings give equal tags; each setting changes it.
    func testTheTrustTagNamesEverySetting() throws {
        let certificates = try TLSFixture.certificates()
        let base = try TLSFixture.trustingTestRoot()
        let leaf = try TLSFixture.certificate(certificates.leaf)
        var variants: [SecurityPolicy] = [base]
        var pinnedKey = base
        pinnedKey.pinningMode = .publicKey
        pinnedKey.pinnedCertificates = [leaf]
        variants.append(pinnedKey)
        var pinnedCertificate = pinnedKey
        pinnedCertificate.pinningMode = .certificate
        variants.append(pinnedCertificate)
        var invalidAllowed = base
        invalidAllowed.allowInvalidCertificates = true
        variants.append(invalidAllowed)
        var noHostCheck = base
        noHostCheck.validatesDomainName = false
        variants.append(noHostCheck)
        var systemRoots = base
        systemRoots.trustedRootCertificates = nil
        variants.append(systemRoots)
        var fallback = base
        fallback.fallsBackToSystemRoots = true
        variants.append(fallback)
        let tags = variants.map { CacheTrust.tag(policy: $0, pinning: nil) }
        XCTAssertEqual(Set(tags).count, variants.count, "every setting changes the tag")
        XCTAssertEqual(CacheTrust.tag(policy: try TLSFixture.trustingTestRoot(), pinning: nil), tags[0], "equal settings, equal tags")

        let pin = PinSet.pin(of: leaf)
        let sets = [
            PinSet(host: "a.test", pins: [pin]), PinSet(host: "a.test", pins: [pin], includeSubdomains: true),
            PinSet(host: "a.test", pins: [pin], reportOnly: true),
            PinSet(host: "a.test", pins: [pin], expires: Date(timeIntervalSince1970: 2_000_000_000)),
            PinSet(host: "b.test", pins: [pin]),
        ]
        let pinTags = sets.map { CacheTrust.tag(policy: base, pinning: PinningPolicy(pinSets: [$0])) }
        XCTAssertEqual(Set(pinTags + [tags[0]]).count, sets.count + 1, "every pin set's setting changes the tag")
        XCTAssertEqual(
            CacheTrust.tag(policy: base, pinning: PinningPolicy(pinSets: [sets[0], sets[4]])),
            CacheTrust.tag(policy: base, pinning: PinningPolicy(pinSets: [sets[4], sets[0]])), "the sets' order does not count")
        XCTAssertEqual(
            CacheTrust.tag(policy: base, pinning: PinningPolicy(pinSets: [PinSet(host: "A.test.", pins: [pin])])), pinTags[0],
            "a host pattern's case and trailing dot do not count")
        XCTAssertNotEqual(
            CacheTrust.tag(policy: base, pinning: nil, proxyPinning: PinningPolicy(pinSets: [sets[0]])), tags[0],
            "the proxy's pins count")
    }
}
