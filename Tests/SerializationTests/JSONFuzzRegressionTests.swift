import Foundation
import Serialization
import XCTest

/// The json-nulls fuzz target's input (Fuzz/Regressions/json-nulls/), checked for the target's
/// properties. Found while fuzzing: converting nested JSON to `JSONValue` took time quadratic
/// in the depth (`is NSNull` bridged each dictionary and array, its whole depth, to Foundation;
/// 400 levels took 110 ms). The fix is a metatype test; this test checks that the conversion
/// it changed still gives every `null` and every container at every depth (it passes before
/// the fix too: the project allows no timed assertion, so the cost itself is not asserted).
final class JSONFuzzRegressionTests: XCTestCase {
    private static var nestedInput: Data {
        get throws {
            let file = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
                .deletingLastPathComponent()  // SerializationTests
                .deletingLastPathComponent()  // Tests
                .deletingLastPathComponent()  // <repo>
                .appendingPathComponent("Fuzz/Regressions/json-nulls/nested-400-levels")
            return try Data(contentsOf: file)
        }
    }

    func testDeeplyNestedJSONKeepsEveryLevelAndLosesEveryNull() throws {
        var serializer = JSONResponseSerializer()
        serializer.acceptableContentTypes = nil
        let value = try XCTUnwrap(try serializer.responseObject(for: nil, data: try Self.nestedInput))
        serializer.removesKeysWithNullValues = true
        let stripped = try XCTUnwrap(try serializer.responseObject(for: nil, data: try Self.nestedInput))
        var level = value
        var strippedLevel = stripped
        for depth in 0..<200 {
            let elements = try XCTUnwrap(level["a"]?.arrayValue, "depth \(depth)")
            XCTAssertEqual(elements.count, 2, "depth \(depth)")
            XCTAssertEqual(elements.first, .null, "depth \(depth)")
            let strippedElements = try XCTUnwrap(strippedLevel["a"]?.arrayValue, "depth \(depth)")
            XCTAssertEqual(strippedElements.count, 1, "depth \(depth)")
            level = elements[1]
            strippedLevel = strippedElements[0]
        }
        XCTAssertEqual(level, .int(1))
        XCTAssertEqual(strippedLevel, .int(1))
    }

    func testNSNullAndNilStillConvertToNull() throws {
        XCTAssertEqual(try JSONValue(jsonObject: NSNull()), .null)
        XCTAssertEqual(try JSONValue(jsonObject: [NSNull(), Int?.none as Any] as [Any]), [.null, .null])
        XCTAssertEqual(try JSONValue(jsonObject: ["k": NSNull()] as [String: Any]), ["k": .null])
    }
}
