import Foundation
import ImageLoading
import XCTest

/// A JPEG's scan count is bounded: each scan costs a pass over its blocks even when empty, so
/// a small file of thousands of scans was a CPU bomb (issue 19, defect 11).
final class JPEGScanLimitTests: XCTestCase {
    /// A 16 × 16 progressive JPEG from Pillow (libjpeg's 10-scan script) with empty scans (a
    /// luma AC refinement header and no data) added before EOI up to `total` scans, for each
    /// `name=total` argument.
    private static func script(_ files: [String: Int]) -> String {
        """
        import io
        def segments(data):
            # The scans' offsets: SOS segments, each followed by entropy-coded data up to a marker.
            i, scans = 2, 0
            while data[i + 1] != 0xD9:
                length = struct.unpack('>H', data[i + 2:i + 4])[0]
                end = i + 2 + length
                if data[i + 1] == 0xDA:
                    scans += 1
                    while not (data[end] == 0xFF and data[end + 1] != 0 and not 0xD0 <= data[end + 1] <= 0xD7):
                        end += 1
                i = end
            return i, scans
        buffer = io.BytesIO()
        Image.new('RGB', (16, 16), (200, 100, 50)).save(buffer, 'JPEG', quality=90, progressive=True)
        data = buffer.getvalue()
        eoi, scans = segments(data)
        empty = b'\\xFF\\xDA\\x00\\x08\\x01\\x01\\x00\\x01\\x3F\\x10'
        for name, total in [\(files.map { "('\($0.key)', \($0.value))" }.sorted().joined(separator: ", "))]:
            raw(name, data[:eoi] + empty * (total - scans) + data[eoi:])
        """
    }

    func testAHundredScansDecodeAndOneMoreIsRefused() throws {
        let files = try PillowFixtures.make(Self.script(["limit.jpg": 100, "over.jpg": 101, "bomb.jpg": 1500]))
        let image = try Image(data: try XCTUnwrap(files["limit.jpg"]))
        XCTAssertEqual([image.width, image.height], [16, 16])
        assertColor(image.rgba(12, 12), [200, 100, 50, 255], tolerance: 6)
        for name in ["over.jpg", "bomb.jpg"] {
            XCTAssertThrowsError(try Image(data: try XCTUnwrap(files[name])), name) { error in
                guard case .corrupt(.jpeg, let reason) = error as? ImageError else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.hasPrefix("it has more than 100 scans"), reason)
            }
        }
    }
}
