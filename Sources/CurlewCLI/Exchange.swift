import Foundation
import Security
import Serialization
import SessionCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends one built request and waits for its `DataResponse`.
enum Exchange {
    /// A manager that hands every answer back as it came: no status or content-type check
    /// (the tool prints a 404 too), and redirects delivered unless `follow`.
    static func makeManager(
        configuration: SessionConfiguration, policy: SecurityPolicy?, follow: Bool, sessionHeaders: SessionHeaderScope? = nil
    ) throws -> URLSessionManager {
        let manager = URLSessionManager(configuration: configuration)
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(100..<1000)
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer
        if let policy {
            do {
                try manager.setSecurityPolicy(policy)
            } catch {
                manager.invalidateSessionCancelingTasks(true, resetSession: false)
                throw ToolFailure(.error, ToolFailure.oneLine(error))
            }
        }
        // Pins hold only where there is TLS: a pinned run never follows a redirect to a
        // plain `http://` URL, whose answer no pin could check (the 3xx is the answer).
        let httpsOnly = (policy?.pinningMode ?? .none) != .none
        if !follow {
            manager.setTaskWillPerformHTTPRedirectionBlock { _, _, _ in nil }
        } else if httpsOnly || sessionHeaders != nil {
            manager.setTaskWillPerformHTTPRedirectionBlock { _, _, request in
                if httpsOnly, request.url?.scheme?.lowercased() != "https" { return nil }
                return sessionHeaders.map { $0.hop(request) } ?? request
            }
        }
        return manager
    }

    /// Where `head` redirects to when that is not an `https` URL (the hop a pinned run does
    /// not follow); nil for any other answer.
    static func plainRedirectTarget(_ head: HTTPResponseHead) -> String? {
        guard (300..<400).contains(head.statusCode), let location = head.value(forHTTPHeaderField: "Location"),
            let target = URL(string: location, relativeTo: head.url)?.absoluteURL,
            target.scheme?.lowercased() != "https"
        else { return nil }
        return target.absoluteString
    }

    /// Runs `body`, then invalidates `manager` and waits until its driver thread is done,
    /// whether `body` threw or not.
    ///
    /// The process exits as soon as a command returns, and exit(3) runs OpenSSL's cleanup
    /// handlers: a driver thread still closing TLS connections then would use freed state
    /// (a crash seen once in the TLS tests, before this wait).
    static func using<T>(_ manager: URLSessionManager, _ body: () async throws -> T) async throws -> T {
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        manager.invalidateSessionCancelingTasks(true, resetSession: false)
        await manager.waitUntilInvalidated()
        return try result.get()
    }

    /// The task that sends `built`: a data task, or an upload task for a file or a stream.
    static func makeTask(
        _ built: BuiltRequest, manager: URLSessionManager, completion: @escaping @Sendable (DataResponse) -> Void
    ) -> SessionTask {
        if let file = built.bodyFile {
            return manager.uploadTask(with: built.request, fromFile: file, completionHandler: completion)
        }
        if built.request.httpBodyStream != nil {
            return manager.uploadTask(withStreamedRequest: built.request, completionHandler: completion)
        }
        return manager.dataTask(with: built.request, completionHandler: completion)
    }

    /// Sends the request and returns what came back; with a `writer`, the body goes to it
    /// chunk by chunk (a data task with a data handler) and the response's `data` is nil.
    static func send(_ built: BuiltRequest, manager: URLSessionManager, streamingTo writer: ResponseWriter? = nil) async -> DataResponse {
        await withCheckedContinuation { continuation in
            guard let writer else {
                makeTask(built, manager: manager) { continuation.resume(returning: $0) }.resume()
                return
            }
            // The task is made before its handler can run: the handler reads it for the head.
            let task = Mutex<DataTask?>(nil)
            let created = manager.dataTask(
                with: built.request,
                dataHandler: { chunk in
                    let current = task.withLock { $0 }
                    // The output refused the chunk: nothing more is worth receiving.
                    if !writer.write(chunk: chunk, head: current?.responseHead) { current?.cancel() }
                },
                completionHandler: { continuation.resume(returning: $0) })
            task.withLock { $0 = created }
            created.resume()
        }
    }
}
