import Foundation
import ImageLoading
import XCTest

/// Test images made at test time by Pillow in the repository's venv (`.build/venv`, which
/// Scripts/lib/setup.sh creates with Pillow in it).
///
/// A script gets `outdir` (a fresh directory), the helper `save(name, image, **options)` and
/// `raw(name, bytes)`, and `Image`, `ImageOps`, `ImageDraw` from PIL; every file it writes
/// there comes back by name.
enum PillowFixtures {
    /// Why fixtures cannot be made.
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// The venv's Python, found as CurlewTestSupport finds gunicorn: from this file's path.
    static var python: URL {
        URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()  // ImageLoadingTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // <repo>
            .appendingPathComponent(".build/venv/bin/python")
    }

    private static let prelude = """
        import os, struct, sys, zlib
        from PIL import Image, ImageDraw, ImageOps
        outdir = sys.argv[1]
        def save(name, image, **options):
            image.save(os.path.join(outdir, name), **options)
        def raw(name, data):
            with open(os.path.join(outdir, name), 'wb') as f:
                f.write(data)

        """

    /// Runs `script` and returns the files it wrote, by name.
    static func make(_ script: String) throws -> [String: Data] {
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw Unavailable(description: "\(python.path) is missing: run Scripts/test.sh (or Scripts/lib/setup.sh's "
                + "ensure_python_peers), which creates the venv with Pillow, to generate the image fixtures.")
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-image-fixtures-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = Process()
        process.executableURL = python
        process.arguments = ["-c", prelude + script, directory.path]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Unavailable(description: "the Pillow fixture script failed (is Pillow installed in the venv?): \(errorText)")
        }
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            files[name] = try Data(contentsOf: directory.appendingPathComponent(name))
        }
        return files
    }

    /// The one file `name` that `script` writes.
    static func make(_ name: String, _ script: String) throws -> Data {
        try XCTUnwrap(try make(script)[name], "the fixture script wrote no \(name)")
    }
}

extension Image {
    /// The RGBA bytes at (`x`, `y`).
    func rgba(_ x: Int, _ y: Int) -> [UInt8] {
        Array(pixels[(y * width + x) * 4..<(y * width + x) * 4 + 4])
    }

    /// The RGBA bytes at (`x`, `y`) in `frame`.
    func rgba(frame: Int, _ x: Int, _ y: Int) -> [UInt8] {
        Array(frames[frame].pixels[(y * width + x) * 4..<(y * width + x) * 4 + 4])
    }
}

/// Asserts every channel of `actual` is within `tolerance` of `expected`.
func assertColor(
    _ actual: [UInt8], _ expected: [UInt8], tolerance: Int, _ message: String = "",
    file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertEqual(actual.count, expected.count, message, file: file, line: line)
    for (a, e) in zip(actual, expected) where abs(Int(a) - Int(e)) > tolerance {
        return XCTFail("\(actual) is not within \(tolerance) of \(expected) \(message)", file: file, line: line)
    }
}

/// Asserts `body` throws exactly `expected`.
func assertImageError<T>(
    _ expected: ImageError, _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertThrowsError(try body(), file: file, line: line) { error in
        XCTAssertEqual(error as? ImageError, expected, "\(error)", file: file, line: line)
    }
}
