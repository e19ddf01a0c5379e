import Foundation
import XCTest
import CurlewTestSupport

/// `--auth` with httpbin's Basic and Digest endpoints.
final class AuthTests: XCTestCase {
    func testBasicAndDigest() throws {
        let base = try CurlewProcess.httpbin()
        let basic = try CurlewProcess.run(["-a", "ann:s3cret:with:colons", "\(base)/basic-auth/ann/s3cret:with:colons"])
        XCTAssertEqual(basic.status, 0, basic.stderr)
        XCTAssertTrue(basic.text.contains("\"authenticated\": true"), basic.text)
        let wrong = try CurlewProcess.run(["--check-status", "-a", "ann:nope", "\(base)/basic-auth/ann/s3cret"])
        XCTAssertEqual(wrong.status, 4, wrong.stderr)
        let digest = try CurlewProcess.run(["-A", "digest", "-a", "ann:pw", "\(base)/digest-auth/auth/ann/pw"])
        XCTAssertEqual(digest.status, 0, digest.stderr)
        XCTAssertTrue(digest.text.contains("\"authenticated\": true"), digest.text)
        let curl = try CurlewProcess.run(["--curl", "-a", "ann:pw", "\(base)/get"])
        XCTAssertTrue(curl.text.contains("-H 'Authorization: Basic ***'"), curl.text)
    }

    func testRedirectsAppearInVerboseOutput() throws {
        let base = try CurlewProcess.httpbin()
        let result = try CurlewProcess.run(["-v", "--follow", "\(base)/redirect/2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.text.contains("\nRequests: 3, redirects followed: 2\n  302 from \(base)/redirect/2\n  302 from \(base)/relative-redirect/1\n"), result.text)
    }
}
