import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// FoundationNetworking's URLSession with completion handlers (same libcurl underneath).
struct URLSessionClient {
    /// Thrown for a URL the workload table got wrong.
    struct BadURL: Error {}

    func run(_ spec: WorkloadSpec) async throws -> Outcome {
        if spec.isTLS {
            // No per-session trust on Linux (no URLSessionDelegate server-trust evaluation
            // in corelibs): the test CA cannot be trusted without disabling verification.
            throw Unsupported(
                reason: "URLSession on Linux cannot trust a custom CA (no server-trust API); verification is not disabled")
        }
        guard let url = URL(string: spec.url) else { throw BadURL() }
        if let download = spec.download {
            // corelibs writes a download to a file in NSTemporaryDirectory() (TMPDIR): put it on
            // the bench's file system, next to the destination, like the other clients.
            setenv("TMPDIR", download.directory, 1)
        }
        let configuration = URLSessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = spec.concurrency
        configuration.urlCache = nil  // measure the network path, not a disk cache
        let session = URLSession(configuration: configuration)
        var request = URLRequest(url: url)
        if spec.connectionClose { request.setValue("close", forHTTPHeaderField: "Connection") }

        switch spec.kind {
        case .gets, .download:
            let loop = RequestLoop(total: spec.count) { [request] loop in
                session.dataTask(with: request) { data, response, error in
                    Self.report(loop, bytes: data?.count ?? 0, response: response, error: error)
                }.resume()
            }
            return await loop.run(concurrency: spec.concurrency)
        case .downloadToFile:
            guard let destination = spec.download?.url else { throw DownloadTarget.Missing() }
            let loop = RequestLoop(total: 1) { [request] loop in
                session.downloadTask(with: request) { location, response, error in
                    // URLSession removes the file at `location` when this handler returns.
                    var moveError: (any Error)?
                    if let location, error == nil {
                        do {
                            try FileManager.default.moveItem(at: location, to: destination)
                        } catch {
                            moveError = error
                        }
                    }
                    Self.report(loop, bytes: 0, response: response, error: error ?? moveError)  // main.swift counts the file
                }.resume()
            }
            return await loop.run(concurrency: 1)
        case .upload:
            request.httpMethod = "POST"
            let file = URL(fileURLWithPath: spec.uploadFile ?? "")
            let size = Int(spec.uploadSize)
            let loop = RequestLoop(total: 1) { [request] loop in
                session.uploadTask(with: request, fromFile: file) { _, response, error in
                    Self.report(loop, bytes: size, response: response, error: error)
                }.resume()
            }
            return await loop.run(concurrency: 1)
        case .slowOpen:
            return await slowOpen(session, request: request, spec: spec)
        }
    }

    private static func report(_ loop: RequestLoop, bytes: Int, response: URLResponse?, error: (any Error)?) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let ok = error == nil && (200..<300).contains(status)
        loop.finished(ok: ok, bytes: bytes, error: error.map { "\($0)" } ?? "HTTP \(status)")
    }

    private func slowOpen(_ session: URLSession, request: URLRequest, spec: WorkloadSpec) async -> Outcome {
        let baseline = ProcessUsage.currentRSSKilobytes
        let ended = RequestLoop(total: spec.count) { _ in }
        let tasks = (0..<spec.count).map { _ in
            session.dataTask(with: request) { _, _, error in
                let cancelled = (error as? URLError)?.code == .cancelled
                ended.finished(ok: cancelled, bytes: 0, error: error.map { "\($0)" } ?? "completed early")
            }
        }
        for task in tasks { task.resume() }
        let receiving = await SlowOpenProbe.waitUntilReceiving(spec.count, deadline: spec.deadline) {
            // corelibs may not update countOfBytesReceived before completion: a response head
            // counts as receiving too.
            tasks.reduce(0) { $0 + ($1.countOfBytesReceived > 0 || $1.response != nil ? 1 : 0) }
        }
        let open = ProcessUsage.currentRSSKilobytes
        for task in tasks { task.cancel() }
        return await SlowOpenProbe.conclude(
            spec: spec, ended: ended, receiving: receiving, baselineRSSKilobytes: baseline, openRSSKilobytes: open)
    }
}
