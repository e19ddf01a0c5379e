import Foundation
import ImageLoading
import SessionCore

/// The gallery's command line. Without `--script` it is an ordinary window (wheel, arrow keys,
/// Page Up/Down, the button pages down, Escape quits).
struct Options {
    var baseURL: URL?
    var count = 360
    var script: String?
    var shots: URL?
    var timeout: TimeInterval = 60
    var maximumDownloads = 4

    static let usage = """
        usage: Gallery --base-url URL [--count N] [--max-downloads N]
                       [--script STEPS [--shots DIR] [--timeout SECONDS]]
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw UsageError(message: "\(flag) needs a value") }
            return value
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--base-url":
                let text = try value(flag)
                guard let url = URL(string: text), url.scheme != nil else { throw UsageError(message: "bad URL \(text)") }
                baseURL = url
            case "--count": count = try Self.positive(value(flag), flag)
            case "--max-downloads": maximumDownloads = try Self.positive(value(flag), flag)
            case "--script": script = try value(flag)
            case "--shots": shots = URL(fileURLWithPath: try value(flag), isDirectory: true)
            case "--timeout": timeout = TimeInterval(try Self.positive(value(flag), flag))
            default: throw UsageError(message: "unknown option \(flag)")
            }
        }
    }

    private static func positive(_ text: String, _ flag: String) throws -> Int {
        guard let number = Int(text), number > 0 else { throw UsageError(message: "\(flag) needs a positive number") }
        return number
    }
}

struct UsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { "\(message)\n\(Options.usage)" }
}

/// The gallery's own downloader, so the active-download limit is the gallery's to choose. Its
/// manager keeps no HTTP response cache (the default manager's lives on disk, under ~/.cache):
/// every run asks the server, whose log the test reads. Decoded images are still cached in
/// memory by the downloader's `AutoPurgingImageCache`, which is what scrolling back uses.
func makeDownloader(maximumActiveDownloads: Int) -> ImageDownloader {
    let manager = HTTPSessionManager(baseURL: nil, configuration: .default)
    manager.responseSerializer = ImageResponseSerializer()
    return ImageDownloader(sessionManager: manager, maximumActiveDownloads: maximumActiveDownloads)
}

func runGallery() -> Int32 {
    do {
        let options = try Options(Array(CommandLine.arguments.dropFirst()))
        guard let baseURL = options.baseURL else { throw UsageError(message: "--base-url is required") }
        let steps = try options.script.map(ScriptStep.parse)
        let downloader = makeDownloader(maximumActiveDownloads: options.maximumDownloads)
        let window = try GalleryWindow(catalog: Catalog(baseURL: baseURL, count: options.count), downloader: downloader)
        defer { window.close() }
        if let steps {
            let runner = ScriptRunner(window: window, shotsDirectory: options.shots, timeout: options.timeout)
            try runner.run(steps)
            try runner.writeAssignedItems()
        } else {
            while !window.quitRequested { window.pumpFrame(waitingUpTo: 1.0 / 60) }
        }
        return 0
    } catch let error as UsageError {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        return 2
    } catch {
        FileHandle.standardError.write(Data("gallery: \(error)\n".utf8))
        return 1
    }
}

exit(runGallery())
