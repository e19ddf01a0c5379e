import CLibcurlBench

/// The reference: raw libcurl multi in C (Sources/CLibcurlBench). This file only passes the
/// workload to it.
struct LibcurlClient {
    /// The one-serial-context floor (`lcb_config.handoff`): the same transfers, finished ones
    /// handed to a second thread that asks for the next, with no library code in between.
    enum Handoff: Int32 {
        /// Raw libcurl on one thread.
        case none = 0
        /// To a thread of its own, through a mutex and a condition variable.
        case thread = 1
        /// To a libdispatch serial queue (`dispatch_async_f`), as a Swift library does.
        case dispatchQueue = 2
    }
    var handoff = Handoff.none

    /// Thrown when libcurl could not be set up at all.
    struct SetupError: Error, CustomStringConvertible {
        let description: String
    }

    func run(_ spec: WorkloadSpec) throws -> Outcome {
        if handoff != .none, spec.kind != .gets {
            throw Unsupported(reason: "the hand-off client runs the request workloads only")
        }
        var config = lcb_config()
        config.handoff = handoff.rawValue
        config.total = spec.count
        config.concurrency = spec.concurrency
        config.http2 = spec.http2 ? 1 : 0
        config.connection_close = spec.connectionClose ? 1 : 0
        config.slow_open = spec.kind == .slowOpen ? 1 : 0
        config.deadline_seconds = spec.deadline
        switch spec.kind {
        case .gets: config.sink = Int32(LCB_SINK_MEMORY.rawValue)
        case .download:
            config.sink = Int32(LCB_SINK_MEMORY.rawValue)
            config.buffer_size = 512 * 1024  // bulk transfer: 30x fewer syscalls than 16 KiB
        case .downloadToFile:
            config.sink = Int32(LCB_SINK_FILE.rawValue)
            config.buffer_size = 512 * 1024  // as above, and one write(2) per 512 KiB
        case .upload:
            config.sink = Int32(LCB_SINK_DISCARD.rawValue)
            config.upload_size = spec.uploadSize
        case .slowOpen: config.sink = Int32(LCB_SINK_DISCARD.rawValue)
        }
        var result = lcb_result()
        let status = spec.url.withCString { url in
            withOptionalCString(spec.caFile) { ca in
                withOptionalCString(spec.uploadFile) { upload in
                    withOptionalCString(spec.download?.path) { output in
                        config.url = url
                        config.cainfo = ca
                        config.upload_path = upload
                        config.output_path = output
                        return lcb_run(&config, &result)
                    }
                }
            }
        }
        let message = withUnsafeBytes(of: result.message) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard status == 0 else { throw SetupError(description: message) }
        var outcome = Outcome()
        outcome.completed = result.completed
        outcome.errors = result.errors
        outcome.bytes = result.bytes
        outcome.firstError = message.isEmpty ? nil : message
        if spec.kind == .slowOpen {
            outcome.slow = SlowSample(
                requested: spec.count, receiving: result.receiving,
                baselineRSSKilobytes: result.baseline_rss_kb, openRSSKilobytes: result.open_rss_kb)
        }
        return outcome
    }
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
