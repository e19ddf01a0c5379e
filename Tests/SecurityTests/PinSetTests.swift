import CurlewTestSupport
import Foundation
import XCTest
@testable import Security

/// `PinSet` host patterns, pin parsing, expiry and coding, and `PinningPolicy`'s verdicts
/// (union of matching sets, report-only, expired sets), without a network.
final class PinSetTests: XCTestCase {
    /// A well-formed pin whose digest is 32 copies of `byte`.
    private func pin(_ byte: UInt8) -> String { "sha256/" + Data(repeating: byte, count: 32).base64EncodedString() }

    private func set(_ host: String, subdomains: Bool = false) -> PinSet {
        PinSet(host: host, pins: [pin(1)], includeSubdomains: subdomains)
    }

    // MARK: - Host patterns

    func testExactHostMatchesItselfOnlyCaseInsensitivelyAndWithATrailingDot() {
        let exact = set("api.example.com")
        XCTAssertTrue(exact.matches(host: "api.example.com"))
        XCTAssertTrue(exact.matches(host: "API.Example.COM"))
        XCTAssertTrue(exact.matches(host: "api.example.com."))
        XCTAssertTrue(set("API.EXAMPLE.COM.").matches(host: "api.example.com"))
        XCTAssertFalse(exact.matches(host: "a.api.example.com"))
        XCTAssertFalse(exact.matches(host: "example.com"))
        XCTAssertFalse(exact.matches(host: "xapi.example.com"))
        XCTAssertFalse(exact.matches(host: "api.example.com.evil"))
    }

    func testIncludeSubdomainsCoversTheHostAndEveryNameBelowIt() {
        let tree = set("example.com", subdomains: true)
        XCTAssertTrue(tree.matches(host: "example.com"))
        XCTAssertTrue(tree.matches(host: "a.example.com"))
        XCTAssertTrue(tree.matches(host: "a.b.example.com"))
        XCTAssertFalse(tree.matches(host: "notexample.com"))
        XCTAssertFalse(tree.matches(host: "example.com.evil"))
        // On a one-label wildcard it widens the pattern to any depth, like `**.`.
        let wideStar = set("*.example.com", subdomains: true)
        XCTAssertTrue(wideStar.matches(host: "a.b.example.com"))
        XCTAssertFalse(wideStar.matches(host: "example.com"))
    }

    func testSingleStarMatchesExactlyOneLabel() {
        let one = set("*.example.com")
        XCTAssertTrue(one.matches(host: "a.example.com"))
        XCTAssertTrue(one.matches(host: "A.EXAMPLE.com."))
        XCTAssertFalse(one.matches(host: "a.b.example.com"))
        XCTAssertFalse(one.matches(host: "example.com"))
        XCTAssertFalse(one.matches(host: "aexample.com"))
    }

    func testDoubleStarMatchesAnyDepthButNotTheBase() {
        let deep = set("**.example.com")
        XCTAssertTrue(deep.matches(host: "a.example.com"))
        XCTAssertTrue(deep.matches(host: "a.b.c.example.com"))
        XCTAssertFalse(deep.matches(host: "example.com"))
        XCTAssertFalse(deep.matches(host: "a.example.org"))
    }

    func testAnIPAddressMatchesOnlyItself() {
        XCTAssertTrue(set("127.0.0.1").matches(host: "127.0.0.1"))
        XCTAssertFalse(set("127.0.0.1").matches(host: "127.0.0.2"))
        XCTAssertFalse(set("127.0.0.1").matches(host: "localhost"))
        XCTAssertFalse(set("127.0.0.1", subdomains: true).matches(host: "a.127.0.0.1"))
        // IPv6 in any spelling, with or without brackets.
        XCTAssertTrue(set("::1").matches(host: "[::1]"))
        XCTAssertTrue(set("[0:0:0:0:0:0:0:1]").matches(host: "::1"))
        XCTAssertFalse(set("::1").matches(host: "::2"))
        // A wildcard never covers an address, nor a name pattern an address that looks like one.
        XCTAssertFalse(set("*.0.0.1").matches(host: "127.0.0.1"))
        XCTAssertFalse(set("**.0.0.1").matches(host: "127.0.0.1"))
        XCTAssertFalse(set("0.0.1", subdomains: true).matches(host: "127.0.0.1"))
    }

    /// An address written in another form libcurl reads (and connects to) as the same
    /// address is that address: one number, short forms, octal and hex parts, an IPv4-mapped
    /// IPv6 address. Names that only look numeric in part stay names.
    func testAnAddressWrittenInAnotherFormIsTheSameAddress() {
        for host in ["2130706433", "127.1", "127.0.1", "0x7f.0.0.1", "0x7F000001", "0177.0.0.1", "[::ffff:127.0.0.1]", "::ffff:7f00:1", "127.0.0.1."] {
            XCTAssertTrue(set("127.0.0.1").matches(host: host), host)
        }
        XCTAssertTrue(set("::ffff:127.0.0.1").matches(host: "127.0.0.1"), "the pattern reads the same way")
        XCTAssertEqual(HostPattern.canonicalAddress("10.5"), "10.0.0.5")
        XCTAssertEqual(HostPattern.canonicalAddress("0"), "0.0.0.0")
        for notAnAddress in ["4294967296", "1.2.3.4.5", "256.1.1.1", "1.2.65536", "0x", "08.1.1.1", "+1.2.3.4", "1..2", "1.2.3.0x1g", "example.com", ""] {
            XCTAssertNil(HostPattern.canonicalAddress(notAnAddress), notAnAddress)
        }
        XCTAssertFalse(set("127.0.0.1").matches(host: "127.0.0.2"))
        XCTAssertFalse(set("127.0.0.1").matches(host: "2130706434"))
    }

    func testInternationalNamesAreComparedAsALabels() {
        XCTAssertEqual(Punycode.encode("bücher"), "bcher-kva")
        XCTAssertEqual(Punycode.encode("münchen"), "mnchen-3ya")
        XCTAssertTrue(set("bücher.example").matches(host: "xn--bcher-kva.example"))
        XCTAssertTrue(set("xn--bcher-kva.example").matches(host: "BÜCHER.example"))
        XCTAssertTrue(set("*.xn--mnchen-3ya.de").matches(host: "api.münchen.de"))
        XCTAssertFalse(set("bücher.example").matches(host: "bucher.example"))
    }

    func testUnreadablePatternsMatchNothing() {
        for pattern in ["", ".", "*", "**", "*.", "a.*.example.com", "*.*.example.com", "f*.example.com", "a..example.com", "***.example.com"] {
            let unreadable = set(pattern, subdomains: true)
            for host in ["example.com", "a.example.com", "a.b.example.com", "f.example.com", "localhost"] {
                XCTAssertFalse(unreadable.matches(host: host), "'\(pattern)' must not match '\(host)'")
            }
        }
    }

    // MARK: - Pins

    func testOnlyWellFormedSHA256PinsCount() {
        let good = pin(7)
        let malformed = [
            "sha256//" + Data(repeating: 7, count: 32).base64EncodedString(),  // curl's spelling
            "SHA256/" + Data(repeating: 7, count: 32).base64EncodedString(),
            "sha1/" + Data(repeating: 7, count: 20).base64EncodedString(),
            "sha256/" + Data(repeating: 7, count: 31).base64EncodedString(),
            "sha256/not base64!",
            Data(repeating: 7, count: 32).base64EncodedString(),
            "",
        ]
        let set = PinSet(host: "example.com", pins: Set(malformed + [good]))
        XCTAssertEqual(set.malformedPins, Set(malformed))
        XCTAssertEqual(set.digests, [Data(repeating: 7, count: 32)])
        // Served pins in the same malformed spellings match nothing either.
        let policy = PinningPolicy(pinSets: [PinSet(host: "example.com", pins: Set(malformed))])
        guard case .failed = policy.verdict(host: "example.com", port: 443, servedPins: malformed) else {
            return XCTFail("malformed pins must never match")
        }
    }

    func testPinOfACertificateIsTheSPKIHashInOkHttpForm() throws {
        let leaf = try SecurityTestHelpers.certificate(SecurityTestHelpers.generated().leaf.certificatePEM)
        let pinned = PinSet.pin(of: leaf)
        XCTAssertEqual(pinned, "sha256/" + leaf.publicKeySHA256)
        XCTAssertEqual(PinSet.digest(ofPin: pinned)?.count, 32)
    }

    // MARK: - Expiry

    func testAnExpiredSetIsNeitherEnforcedNorReported() {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let expiring = PinSet(host: "example.com", pins: [pin(1)], expires: now)
        XCTAssertTrue(expiring.isExpired(at: now))
        XCTAssertFalse(expiring.isExpired(at: now.addingTimeInterval(-1)))
        XCTAssertFalse(PinSet(host: "example.com", pins: [pin(1)]).isExpired(at: .distantFuture))
        let policy = PinningPolicy(pinSets: [expiring])
        XCTAssertEqual(policy.verdict(host: "example.com", port: 443, servedPins: [pin(2)], at: now), .noMatchingSet)
        guard case .failed(let report) = policy.verdict(host: "example.com", port: 443, servedPins: [pin(2)], at: now.addingTimeInterval(-1))
        else { return XCTFail("before its expiry the set is enforced") }
        XCTAssertTrue(report.enforced)
    }

    // MARK: - Verdicts

    func testAnyPinOfTheChainSatisfiesAndTheReportCarriesTheChainInOrder() {
        let policy = PinningPolicy(pinSets: [PinSet(host: "example.com", pins: [pin(3), pin(4)])])
        XCTAssertEqual(policy.verdict(host: "other.com", port: 443, servedPins: [pin(9)]), .noMatchingSet)
        XCTAssertEqual(policy.verdict(host: "example.com", port: 443, servedPins: [pin(8), pin(9), pin(4)]), .satisfied, "the anchor's pin counts")
        XCTAssertEqual(
            policy.verdict(host: "example.com", port: 8443, servedPins: [pin(8), pin(9)]),
            .failed(PinFailureReport(host: "example.com", port: 8443, servedPins: [pin(8), pin(9)], expectedPins: [pin(3), pin(4)], enforced: true)))
    }

    func testMatchingSetsAreUnitedAndExpiredOnesLeftOut() {
        let now = Date()
        let policy = PinningPolicy(pinSets: [
            PinSet(host: "**.example.com", pins: [pin(1)]),
            PinSet(host: "api.example.com", pins: [pin(2)]),
            PinSet(host: "*.example.com", pins: [pin(3)], expires: now.addingTimeInterval(-60)),
            PinSet(host: "other.com", pins: [pin(4)]),
        ])
        XCTAssertEqual(policy.verdict(host: "api.example.com", port: 443, servedPins: [pin(1)], at: now), .satisfied)
        XCTAssertEqual(policy.verdict(host: "api.example.com", port: 443, servedPins: [pin(2)], at: now), .satisfied)
        guard case .failed(let report) = policy.verdict(host: "api.example.com", port: 443, servedPins: [pin(3), pin(4)], at: now)
        else { return XCTFail("neither the expired set's pin nor another host's counts") }
        XCTAssertEqual(report.expectedPins, [pin(1), pin(2)])
    }

    func testReportOnlySetsReportWithoutEnforcingAndNeverLoosenEnforcedOnes() {
        let trial = PinSet(host: "example.com", pins: [pin(5)], reportOnly: true)
        let policy = PinningPolicy(pinSets: [trial])
        XCTAssertEqual(
            policy.verdict(host: "example.com", port: 443, servedPins: [pin(1)]),
            .failed(PinFailureReport(host: "example.com", port: 443, servedPins: [pin(1)], expectedPins: [pin(5)], enforced: false)))
        let both = PinningPolicy(pinSets: [trial, PinSet(host: "example.com", pins: [pin(1)])])
        guard case .failed(let enforced) = both.verdict(host: "example.com", port: 443, servedPins: [pin(5)]) else {
            return XCTFail("a report-only pin must not satisfy an enforced set")
        }
        XCTAssertTrue(enforced.enforced)
        XCTAssertEqual(enforced.expectedPins, [pin(1)])
        guard case .failed(let reported) = both.verdict(host: "example.com", port: 443, servedPins: [pin(1)]) else {
            return XCTFail("the report-only set still reports")
        }
        XCTAssertFalse(reported.enforced)
    }

    // MARK: - Equality and coding

    func testEqualityHashingAndCodingIgnoreTheReportCallback() throws {
        let sets = [
            PinSet(host: "*.example.com", pins: [pin(1), pin(2)], expires: Date(timeIntervalSince1970: 1_900_000_000), reportOnly: true),
            PinSet(host: "example.org", pins: [pin(3)], includeSubdomains: true),
        ]
        let reporting = PinningPolicy(pinSets: sets, report: { _ in })
        let silent = PinningPolicy(pinSets: sets)
        XCTAssertEqual(reporting, silent)
        XCTAssertEqual(Set([reporting, silent]).count, 1)
        XCTAssertNotEqual(reporting, PinningPolicy(pinSets: Array(sets.prefix(1))))
        let data = try JSONEncoder().encode(reporting)
        let decoded = try JSONDecoder().decode(PinningPolicy.self, from: data)
        XCTAssertEqual(decoded, reporting)
        XCTAssertNil(decoded.report)
        XCTAssertFalse(String(decoding: data, as: UTF8.self).contains("report\""))
    }

    func testAHandWrittenSetDecodesWithDefaults() throws {
        let json = #"{"pinSets":[{"host":"**.example.com","pins":["\#(pin(1))"]}]}"#
        let policy = try JSONDecoder().decode(PinningPolicy.self, from: Data(json.utf8))
        XCTAssertEqual(policy.pinSets, [PinSet(host: "**.example.com", pins: [pin(1)])])
        XCTAssertThrowsError(try JSONDecoder().decode(PinSet.self, from: Data(#"{"host":"a.com"}"#.utf8)), "pins are required")
    }

    func testAFailureReportRoundTrips() throws {
        let report = PinFailureReport(host: "example.com", port: 443, servedPins: [pin(1), pin(2)], expectedPins: [pin(3)], enforced: false)
        XCTAssertEqual(try JSONDecoder().decode(PinFailureReport.self, from: JSONEncoder().encode(report)), report)
    }
}
