import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// AsyncHTTPClient 1.37.0 with its async API on one event loop, trusting the test CA
/// (its `FileDownloadDelegate` for the file workload).
struct AHCClient {
    func run(_ spec: WorkloadSpec) async throws -> Outcome {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = HTTPClient.Configuration()
        if let ca = spec.caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(ca)
            configuration.tlsConfiguration = tls
        }
        configuration.httpVersion = spec.http2 ? .automatic : .http1Only
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: spec.concurrency)
        // 10,000 slow transfers open 10,000 connections on one event loop: the default 10 s
        // for getting a pooled connection is too short for the last of them.
        configuration.timeout.connect = .seconds(60)
        let client = HTTPClient(eventLoopGroup: group, configuration: configuration)
        let outcome: Result<Outcome, any Error>
        do {
            outcome = .success(try await run(spec, on: client))
        } catch {
            outcome = .failure(error)
        }
        try await client.shutdown()
        try await group.shutdownGracefully()
        return try outcome.get()
    }

    private func run(_ spec: WorkloadSpec, on client: HTTPClient) async throws -> Outcome {
        var request = HTTPClientRequest(url: spec.url)
        if spec.connectionClose { request.headers.add(name: "Connection", value: "close") }
        switch spec.kind {
        case .gets, .download:
            let request = request
            let limit = spec.kind == .download ? Int(UInt32.max) : 16 << 20
            return await TaskLoop.run(count: spec.count, concurrency: spec.concurrency) {
                let response = try await client.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: limit)
                return TaskLoop.Answer(status: Int(response.status.code), bytes: body.readableBytes)
            }
        case .downloadToFile:
            guard let target = spec.download else { throw DownloadTarget.Missing() }
            // Its file I/O runs on the client's shared thread pool (NonBlockingFileIO).
            let delegate = try FileDownloadDelegate(path: target.path)
            let progress = try await client.execute(
                request: HTTPClient.Request(url: spec.url), delegate: delegate, deadline: .now() + .seconds(600)
            ).futureResult.get()
            var outcome = Outcome()
            let status = Int(progress.history.last?.responseHead.status.code ?? 0)
            if (200..<300).contains(status) {
                outcome.completed = 1  // main.swift counts the file's bytes
            } else {
                outcome.fail("HTTP \(status)")
            }
            return outcome
        case .upload:
            request.method = .POST
            let size = spec.uploadSize
            request.body = .stream(FileChunks(path: spec.uploadFile ?? ""), length: .known(size))
            var outcome = Outcome()
            let response = try await client.execute(request, timeout: .seconds(600))
            for try await _ in response.body {}
            if (200..<300).contains(Int(response.status.code)) {
                outcome.completed = 1
                outcome.bytes = size
            } else {
                outcome.fail("HTTP \(response.status.code)")
            }
            return outcome
        case .slowOpen:
            return await slowOpen(spec, request: request, on: client)
        }
    }

    private func slowOpen(_ spec: WorkloadSpec, request: HTTPClientRequest, on client: HTTPClient) async -> Outcome {
        let baseline = ProcessUsage.currentRSSKilobytes
        let receiving = Counter()
        return await withTaskGroup(of: Outcome.self) { group in
            for _ in 0..<spec.count {
                group.addTask {
                    var outcome = Outcome()
                    do {
                        let response = try await client.execute(request, timeout: .seconds(600))
                        var first = true
                        for try await _ in response.body where first {
                            first = false
                            _ = receiving.next()
                        }
                        if !Task.isCancelled { outcome.fail("a slow transfer completed before it was cancelled") }
                    } catch {
                        if !Task.isCancelled { outcome.fail("\(error)") }
                    }
                    return outcome
                }
            }
            let open = await SlowOpenProbe.waitUntilReceiving(spec.count, deadline: spec.deadline) { receiving.value }
            let openRSS = ProcessUsage.currentRSSKilobytes
            group.cancelAll()
            var total = Outcome()
            for await partial in group { total.merge(partial) }
            total.slow = SlowSample(
                requested: spec.count, receiving: open, baselineRSSKilobytes: baseline, openRSSKilobytes: openRSS)
            return total
        }
    }
}

/// A shared counter for the worker tasks.
final class Counter: Sendable {
    private let atomic = Atomic<Int>(0)

    /// Returns the value before incrementing it.
    func next() -> Int { atomic.add(1, ordering: .relaxed).oldValue }

    var value: Int { atomic.load(ordering: .relaxed) }
}

/// A file read in 512 KiB `ByteBuffer`s (blocking reads on the task's thread, never on the
/// event loop), for AHC's streamed request body.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String

    struct AsyncIterator: AsyncIteratorProtocol {
        let descriptor: Int32
        var finished = false

        mutating func next() async throws -> ByteBuffer? {
            guard !finished, descriptor >= 0 else { return nil }
            var buffer = ByteBuffer()
            buffer.reserveCapacity(512 * 1024)
            let count = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 512 * 1024) { raw in
                let n = read(descriptor, raw.baseAddress, raw.count)
                if n < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                return n
            }
            if count == 0 {
                finished = true
                close(descriptor)
                return nil
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(descriptor: open(path, O_RDONLY))
    }
}
