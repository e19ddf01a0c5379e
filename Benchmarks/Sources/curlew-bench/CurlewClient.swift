import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore
import Serialization

/// Curlew through its public API, as a user writes it: one `URLSessionManager`, the
/// completion-handler `dataTask`, raw bytes from `HTTPResponseSerializer` (a `downloadTask`
/// with a destination for the file workload). Deliberately plain: this is the client the
/// engine is profiled and optimised against.
struct CurlewClient {
    /// Thrown for a URL the workload table got wrong.
    struct BadURL: Error {}

    /// Attach one `EventMonitor` that counts what it hears (the `curlew-monitor` client).
    var monitored = false
    /// Swift tasks looping `dataResponse(for:)` instead of completion handlers (the
    /// `curlew-async` client).
    var async = false
    /// `SessionConfiguration.postsTaskNotifications` (false: the `curlew-quiet` client).
    var postsNotifications = true

    /// Counts the events a user's metrics monitor would typically look at, the way the docs
    /// recommend: statuses from the parsed head, no Foundation response asked for.
    final class CountingMonitor: EventMonitor, @unchecked Sendable {  // `lock` guards the counts
        let queue = DispatchQueue(label: "curlew-bench.monitor")
        var receivesFoundationResponses: Bool { false }
        private let lock = NSLock()
        private var responses = 0
        private var completions = 0
        func task(_ task: SessionTask, didReceiveHead head: HTTPResponseHead) {
            lock.withLock { responses += head.statusCode < 400 ? 1 : 0 }
        }
        func task(_ task: SessionTask, didCompleteWithError error: (any Error)?) {
            lock.withLock { completions += 1 }
        }
    }

    func run(_ spec: WorkloadSpec) async throws -> Outcome {
        guard let url = URL(string: spec.url) else { throw BadURL() }
        var configuration = SessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = spec.concurrency
        configuration.httpVersion = spec.http2 ? .http2 : .http1_1
        configuration.certificateAuthorityFile = spec.caFile  // the test CA, with the default policy
        // The temporary file next to its destination, as the documentation advises: the final
        // move is a rename.
        configuration.downloadDirectory = spec.download?.directoryURL
        configuration.postsTaskNotifications = postsNotifications
        if async, spec.kind != .gets {
            throw Unsupported(reason: "the async client runs the request workloads only")
        }
        let manager = URLSessionManager(configuration: configuration, eventMonitors: monitored ? [CountingMonitor()] : [])
        manager.responseSerializer = HTTPResponseSerializer()

        var request = URLRequest(url: url)
        if spec.connectionClose { request.setValue("close", forHTTPHeaderField: "Connection") }

        switch spec.kind {
        case .gets where async:
            return await asyncGets(manager, request: request, spec: spec)
        case .gets, .download:
            let loop = RequestLoop(total: spec.count) { [request] loop in
                manager.dataTask(with: request) { response in
                    switch response.result {
                    case .success:
                        loop.finished(ok: true, bytes: response.data?.count ?? 0, error: "")
                    case .failure(let error):
                        loop.finished(ok: false, bytes: 0, error: "\(error)")
                    }
                }.resume()
            }
            return await loop.run(concurrency: spec.concurrency)
        case .downloadToFile:
            guard let destination = spec.download?.url else { throw DownloadTarget.Missing() }
            let loop = RequestLoop(total: 1) { [request] loop in
                manager.downloadTask(with: request, destination: { _, _ in destination }) { response in
                    let status = response.head?.statusCode ?? 0
                    switch response.result {
                    case .success where (200..<300).contains(status):
                        loop.finished(ok: true, bytes: 0, error: "")  // main.swift counts the file's bytes
                    case .success: loop.finished(ok: false, bytes: 0, error: "HTTP \(status)")
                    case .failure(let error): loop.finished(ok: false, bytes: 0, error: "\(error)")
                    }
                }.resume()
            }
            return await loop.run(concurrency: 1)
        case .upload:
            request.httpMethod = "POST"
            let size = spec.uploadSize
            let file = URL(fileURLWithPath: spec.uploadFile ?? "")
            let loop = RequestLoop(total: 1) { [request] loop in
                manager.uploadTask(with: request, fromFile: file) { response in
                    switch response.result {
                    case .success: loop.finished(ok: true, bytes: Int(size), error: "")
                    case .failure(let error): loop.finished(ok: false, bytes: 0, error: "\(error)")
                    }
                }.resume()
            }
            return await loop.run(concurrency: 1)
        case .slowOpen:
            return await slowOpen(manager, request: request, spec: spec)
        }
    }

    /// `concurrency` Swift tasks looping the raw-data call, which applies no serializer.
    private func asyncGets(_ manager: URLSessionManager, request: URLRequest, spec: WorkloadSpec) async -> Outcome {
        await TaskLoop.run(count: spec.count, concurrency: spec.concurrency) {
            let response = try await manager.dataResponse(for: request)
            return TaskLoop.Answer(status: response.head?.statusCode ?? 0, bytes: response.data?.count ?? 0)
        }
    }

    private func slowOpen(_ manager: URLSessionManager, request: URLRequest, spec: WorkloadSpec) async -> Outcome {
        let baseline = ProcessUsage.currentRSSKilobytes
        let ended = RequestLoop(total: spec.count) { _ in }
        let tasks = (0..<spec.count).map { _ in
            manager.dataTask(with: request) { response in
                // Cancelled transfers are the point here; only other failures count.
                if case .failure(SessionError.cancelled) = response.result {
                    ended.finished(ok: true, bytes: 0, error: "")
                } else {
                    ended.finished(ok: false, bytes: 0, error: "\(response.error.map { "\($0)" } ?? "completed early")")
                }
            }
        }
        for task in tasks { task.resume() }
        let receiving = await SlowOpenProbe.waitUntilReceiving(spec.count, deadline: spec.deadline) {
            tasks.reduce(0) { $0 + ($1.countOfBytesReceived > 0 ? 1 : 0) }
        }
        let open = ProcessUsage.currentRSSKilobytes
        for task in tasks { task.cancel() }
        return await SlowOpenProbe.conclude(
            spec: spec, ended: ended, receiving: receiving, baselineRSSKilobytes: baseline, openRSSKilobytes: open)
    }
}
