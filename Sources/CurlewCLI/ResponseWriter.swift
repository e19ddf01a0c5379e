import Foundation
import Serialization
import SessionCore

/// Writes the response: the head once, then the body, to stdout or to `-o FILE`.
///
/// A body written as it is (to a pipe, to a file, or not at all) is streamed: each chunk goes
/// out as it arrives (`dataTask(with:dataHandler:)`), so memory stays flat whatever the size
/// and `curlew URL | head` sees the first bytes at once. A body that is formatted (JSON
/// indented, the binary notice) is collected first.
final class ResponseWriter: @unchecked Sendable {  // `headWritten` and `writeFailure` are guarded by `lock`
    /// Where the body goes.
    enum Sink {
        case standardOutput
        /// `-o -`: the body on standard output as it is, as curl's — never formatted, a
        /// binary body too, whatever `--print` says; the head, when asked for, on standard
        /// error.
        case rawStandardOutput
        case file(OutputFile)
        case discard
    }

    private let lock = NSLock()
    private var headWritten = false
    private var writeFailure: String?
    private let printer: ExchangePrinter
    private let selection: PrintSelection
    private let sink: Sink
    private let stdout = Terminal.standardOutput
    /// Whether the body is streamed (else collected, then written by `finish`).
    let streams: Bool
    /// `--check-status` with `-o FILE`: an answer whose status fails the run (3xx unfollowed,
    /// 4xx, 5xx) leaves the file as it was. Its error page replaced the user's file, then the
    /// run failed: a script's `|| use the old copy` found the page.
    private let keepsFileOnFailingStatus: Bool

    init(printer: ExchangePrinter, selection: PrintSelection, sink: Sink, canStream: Bool, checksStatus: Bool = false) {
        self.printer = printer
        self.selection = selection
        self.sink = sink
        self.keepsFileOnFailingStatus = checksStatus
        switch sink {
        case .file, .discard, .rawStandardOutput: streams = canStream
        // Colours, as formatting, need the whole JSON (`--pretty=colors` on a pipe streamed the
        // body raw, only the head coloured).
        case .standardOutput: streams = canStream && !printer.isTerminal && !printer.pretty.formats && !printer.pretty.colors
        }
    }

    /// The sink for `-o FILE` (checked now, emptied only when the answer's body begins) or
    /// `-o -` (the raw body on stdout; a file named `-` is `-o ./-`), else stdout when the
    /// body is printed.
    static func sink(outputPath: String?, printsBody: Bool) throws -> Sink {
        guard let outputPath else { return printsBody ? .standardOutput : .discard }
        if outputPath == "-" { return .rawStandardOutput }
        return .file(try OutputFile(path: outputPath))
    }

    /// A streamed chunk, the head written first if it was not yet. False once the output
    /// cannot be written (a closed pipe, a full disk): the transfer is then cancelled rather
    /// than downloaded to the end for nothing.
    func write(chunk: Data, head: HTTPResponseHead?) -> Bool {
        lock.withLock {
            writeHead(head)
            if !keepsFile(for: head) { writeBody(chunk) }
            return writeFailure == nil
        }
    }

    /// Why the output could not be written, if it could not: the run's failure, before the
    /// transfer's (which is then the cancellation that followed).
    var failure: String? { lock.withLock { writeFailure } }

    /// The end of the response: the head if no chunk wrote it, then a collected body.
    /// - Throws: a `ToolFailure` when `-o FILE` or standard output could not be written.
    func finish(_ response: DataResponse) throws {
        let failure: String? = lock.withLock {
            writeHead(response.head)
            if keepsFile(for: response.head) {
                if case .file(let file) = sink { file.close() }
                return writeFailure
            }
            if !streams, let data = response.data, !data.isEmpty {
                if case .standardOutput = sink {
                    noteStandardOutput(stdout.write(printer.responseBody(data, head: response.head)))
                } else {
                    writeBody(data)
                }
            }
            if case .file(let file) = sink {
                // An empty body still replaces the file: the answer had no bytes.
                if writeFailure == nil { writeFailure = file.write(Data()) }
                file.close()
            }
            return writeFailure
        }
        if let failure { throw ToolFailure(.error, failure) }
    }

    private func writeHead(_ head: HTTPResponseHead?) {
        guard !headWritten, let head else { return }
        headWritten = true
        guard selection.responseHead else { return }
        switch sink {
        case .standardOutput:
            noteStandardOutput(stdout.write(printer.responseHead(head)))
            noteStandardOutput(stdout.write("\n"))  // before the body
        case .rawStandardOutput:
            // Standard output is the body's alone; the head goes beside it (a failed write of
            // standard error is not the run's failure).
            let standardError = Terminal.standardError
            _ = standardError.write(printer.responseHead(head))
            _ = standardError.write("\n")
        case .file, .discard:
            noteStandardOutput(stdout.write(printer.responseHead(head)))
        }
    }

    /// Keeps the first reason standard output could not be written.
    private func noteStandardOutput(_ reason: String?) {
        guard let reason, writeFailure == nil else { return }
        writeFailure = "cannot write standard output: \(reason)"
    }

    /// Whether this answer's body stays out of `-o FILE` (see `keepsFileOnFailingStatus`).
    private func keepsFile(for head: HTTPResponseHead?) -> Bool {
        guard keepsFileOnFailingStatus, case .file = sink, let head else { return false }
        return ExitStatus.forStatus(head.statusCode) != nil
    }

    private func writeBody(_ data: Data) {
        switch sink {
        case .standardOutput, .rawStandardOutput:
            guard writeFailure == nil else { return }
            noteStandardOutput(stdout.write(data))
        case .file(let file):
            guard writeFailure == nil else { return }
            writeFailure = file.write(data)
        case .discard:
            break
        }
    }
}
