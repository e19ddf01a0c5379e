import Foundation

/// The thumbnailer's command line.
struct Options {
    var urls: [URL] = []
    var output: URL?
    var maximumPixelSize = 128
    var concurrency = 8

    static let usage = """
        usage: Thumbnailer --output DIR [--max-size PIXELS] [--concurrency N] [--list FILE] [URL...]
          Downloads every URL (those given and those in FILE, one a line), decodes each to at
          most PIXELS on its longer side (default 128) and writes DIR/NAME.png.
          Exit status: 0 all written, 1 some failed, 2 bad usage.
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw UsageError(message: "\(flag) needs a value") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--output": output = URL(fileURLWithPath: try value(argument), isDirectory: true)
            case "--max-size": maximumPixelSize = try Self.positive(value(argument), argument)
            case "--concurrency": concurrency = try Self.positive(value(argument), argument)
            case "--list":
                let path = try value(argument)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw UsageError(message: "cannot read \(path)")
                }
                for line in text.split(whereSeparator: \.isNewline) {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                    urls.append(try Self.url(trimmed))
                }
            case let flag where flag.hasPrefix("--"): throw UsageError(message: "unknown option \(flag)")
            default: urls.append(try Self.url(argument))
            }
        }
    }

    private static func url(_ text: String) throws -> URL {
        guard let url = URL(string: text), url.scheme != nil else { throw UsageError(message: "not a URL: \(text)") }
        return url
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

func runThumbnailer() -> Int32 {
    let options: Options
    do {
        options = try Options(Array(CommandLine.arguments.dropFirst()))
        guard options.output != nil else { throw UsageError(message: "--output is required") }
        guard !options.urls.isEmpty else { throw UsageError(message: "no URLs given") }
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        return 2
    }
    guard let output = options.output else { return 2 }
    do {
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
    } catch {
        FileHandle.standardError.write(Data("cannot create \(output.path): \(error)\n".utf8))
        return 1
    }

    let job = ThumbnailJob(
        urls: options.urls, output: output, maximumPixelSize: options.maximumPixelSize,
        concurrency: options.concurrency)
    let bar = ProgressBar(total: options.urls.count)
    let start = Date()
    job.run { bar.show($0.finished, failed: $0.failed) }
    bar.finish()
    let counts = job.tally.snapshot
    print(Summary(counts: counts, total: options.urls.count, seconds: Date().timeIntervalSince(start)).text)
    return counts.failed == 0 ? 0 : 1
}

exit(runThumbnailer())
