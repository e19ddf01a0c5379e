import Foundation
import XCTest
@testable import SessionCore

/// The `taskDidComplete` notification's `userInfo`, made from templates: every set of entries
/// gives exactly the dictionary a key-by-key build gives.
final class CompletionUserInfoTests: XCTestCase {
    private struct Failure: Error, Equatable { let code: Int }

    func testEverySetOfEntriesMatchesAKeyByKeyBuild() throws {
        let metrics = TaskMetrics(transactionMetrics: [], taskStart: Date(timeIntervalSince1970: 7), taskDuration: 0.5, redirectCount: 2)
        let file = URL(fileURLWithPath: "/tmp/curlew-asset")
        for mask in 0..<64 {
            var info = CompletionUserInfo()
            var expected: [AnyHashable: Any] = [:]
            if mask & 1 != 0 {
                info.responseData = Data([UInt8(mask)])
                expected[SessionNotificationKey.responseData] = Data([UInt8(mask)])
            }
            if mask & 2 != 0 {
                info.serializedResponse = "value \(mask)"
                expected[SessionNotificationKey.serializedResponse] = "value \(mask)"
            }
            if mask & 4 != 0 {
                info.responseSerializer = mask
                expected[SessionNotificationKey.responseSerializer] = mask
            }
            if mask & 8 != 0 {
                info.error = Failure(code: mask)
                expected[SessionNotificationKey.error] = Failure(code: mask)
            }
            if mask & 16 != 0 {
                info.metrics = metrics
                expected[SessionNotificationKey.metrics] = metrics
            }
            if mask & 32 != 0 {
                info.assetPath = file
                expected[SessionNotificationKey.assetPath] = file
            }
            // Twice: the first copy must leave the template as it was.
            for round in 0..<2 {
                let made = info.dictionary
                XCTAssertEqual(Set(made.keys), Set(expected.keys), "mask \(mask), round \(round)")
                XCTAssertEqual(made[SessionNotificationKey.responseData] as? Data, expected[SessionNotificationKey.responseData] as? Data)
                XCTAssertEqual(made[SessionNotificationKey.serializedResponse] as? String, expected[SessionNotificationKey.serializedResponse] as? String)
                XCTAssertEqual(made[SessionNotificationKey.responseSerializer] as? Int, expected[SessionNotificationKey.responseSerializer] as? Int)
                XCTAssertEqual(made[SessionNotificationKey.error] as? Failure, expected[SessionNotificationKey.error] as? Failure)
                XCTAssertEqual(made[SessionNotificationKey.metrics] as? TaskMetrics, expected[SessionNotificationKey.metrics] as? TaskMetrics)
                XCTAssertEqual(made[SessionNotificationKey.assetPath] as? URL, expected[SessionNotificationKey.assetPath] as? URL)
                for (key, value) in made {
                    XCTAssertFalse(value is Void, "mask \(mask): \(key) kept its placeholder")
                }
            }
        }
    }
}
