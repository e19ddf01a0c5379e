import Foundation
import Serialization
import Synchronization
import XCTest
@testable import SessionCore

/// The `taskDidComplete` notification's `userInfo`, made from templates: every set of entries
/// gives exactly the dictionary a key-by-key build gives.
final class CompletionUserInfoTests: XCTestCase {
    private struct Failure: Error, Equatable { let code: Int }

    func testEverySetOfEntriesMatchesAKeyByKeyBuild() throws {
        let metrics = TaskMetrics(transactionMetrics: [], taskStart: Date(timeIntervalSince1970: 7), taskDuration: 0.5, redirectCount: 2)
        let file = URL(fileURLWithPath: "/tmp/curlew-asset")
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(integer: 299)
        for variant in 0..<32 {
            let body = variant & 1 != 0 ? Data([UInt8(variant)]) : nil
            let succeeded = variant & 2 != 0
            let result: Result<any Sendable, any Error> = succeeded ? .success("value \(variant)") : .failure(Failure(code: variant))
            let serializerRan = variant & 4 != 0
            let taskMetrics = variant & 8 != 0 ? metrics : nil
            let fileURL = variant & 16 != 0 ? file : nil
            var expected: [AnyHashable: Any] = [:]
            if let body { expected[SessionNotificationKey.responseData] = body }
            if succeeded { expected[SessionNotificationKey.serializedResponse] = "value \(variant)" }
            if !succeeded { expected[SessionNotificationKey.error] = Failure(code: variant) }
            if serializerRan { expected[SessionNotificationKey.responseSerializer] = serializer }
            if let taskMetrics { expected[SessionNotificationKey.metrics] = taskMetrics }
            if let fileURL { expected[SessionNotificationKey.assetPath] = fileURL }
            // Twice: the first copy must leave the template as it was.
            for round in 0..<2 {
                let made = CompletionUserInfo.make(
                    body: body, result: result, serializer: serializer, serializerRan: serializerRan,
                    metrics: taskMetrics, fileURL: fileURL)
                XCTAssertEqual(Set(made.keys), Set(expected.keys), "variant \(variant), round \(round)")
                XCTAssertEqual(made[SessionNotificationKey.responseData] as? Data, body)
                XCTAssertEqual(made[SessionNotificationKey.serializedResponse] as? String, succeeded ? "value \(variant)" : nil)
                XCTAssertEqual(made[SessionNotificationKey.error] as? Failure, succeeded ? nil : Failure(code: variant))
                XCTAssertEqual(
                    (made[SessionNotificationKey.responseSerializer] as? HTTPResponseSerializer)?.acceptableStatusCodes,
                    serializerRan ? IndexSet(integer: 299) : nil)
                XCTAssertEqual(made[SessionNotificationKey.metrics] as? TaskMetrics, taskMetrics)
                XCTAssertEqual(made[SessionNotificationKey.assetPath] as? URL, fileURL)
                for (key, value) in made {
                    XCTAssertFalse(value is Void, "variant \(variant): \(key) kept its placeholder")
                }
            }
        }
    }
}

/// The templates are made one at a time, when a task first needs one, and each once.
final class CompletionUserInfoTemplateTableTests: XCTestCase {
    func testATemplateIsMadeOnFirstUseAndKept() {
        let table = CompletionUserInfo.TemplateTable()
        XCTAssertEqual(table.madeCount, 0, "nothing is made before a task asks")
        let first = table[1 | 2 | 4 | 16]
        XCTAssertEqual(table.madeCount, 1)
        XCTAssertTrue(table[1 | 2 | 4 | 16] === first, "the same template each time")
        XCTAssertEqual(first.dictionary.count, 4)
        XCTAssertEqual(table.madeCount, 1)
        _ = table[8]
        XCTAssertEqual(table.madeCount, 2)
    }

    func testThreadsAskingAtOnceShareOneTemplate() {
        let table = CompletionUserInfo.TemplateTable()
        let seen = Mutex<[ObjectIdentifier]>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            let template = table[2 | 16]
            seen.withLock { $0.append(ObjectIdentifier(template)) }
        }
        XCTAssertEqual(Set(seen.withLock { $0 }).count, 1)
        XCTAssertEqual(table.madeCount, 1)
    }
}
