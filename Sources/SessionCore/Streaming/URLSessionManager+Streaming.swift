import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionManager {
    /// Sends `request` and returns at the response head with the body as an async sequence of
    /// chunks.
    ///
    /// A 4xx or 5xx status is a response, as with `data(for:)`, and its body streams the same
    /// way. At most about `bufferSize` bytes wait for the consumer; beyond that the transfer
    /// is paused in libcurl until the consumer catches up. Leaving the loop, or cancelling the
    /// consuming task, cancels the transfer. The manager's response serializer, response cache
    /// and response hook are not involved: the bytes are the caller's.
    ///
    /// - Parameter bufferSize: The most bytes buffered before the transfer pauses (1 MiB).
    /// - Throws: `SessionError` when the transfer fails before the head arrives, or when the
    ///   calling task is cancelled meanwhile.
    public func bytes(for request: URLRequest, bufferSize: Int = 1 << 20) async throws -> (ResponseBytes, HTTPURLResponse) {
        let (consumer, head) = try await openStream(request, bufferSize: bufferSize, type: DataTask.self, body: nil)
        return try (ResponseBytes(consumer), Self.httpResponse(head))
    }

    /// Sends `request` and returns at the response head with the body as UTF-8 lines (LF,
    /// CRLF or a lone CR ends a line); see ``bytes(for:bufferSize:)`` and ``ResponseLines``.
    public func lines(for request: URLRequest) async throws -> (ResponseLines, HTTPURLResponse) {
        let (bytes, response) = try await bytes(for: request)
        return (ResponseLines(bytes), response)
    }

    /// Uploads the chunks of `body` as the request's body and returns the response's body
    /// and head, as `data(for:)` does.
    ///
    /// The sequence is iterated once, in a task of Curlew's, as libcurl asks for data: at
    /// most a bounded buffer (256 KiB) is read ahead. With `length` the body goes out with
    /// that `Content-Length` (a sequence that ends early fails the transfer; one that runs long
    /// makes the call throw `SessionError.bodyStreamFailed` once the response is in, the surplus
    /// unsent, when the surplus was read by then; a server that answers before it read the
    /// whole body, such as a 413, stops the upload and its answer is the result);
    /// without it, with chunked transfer coding (HTTP/1.1) or as DATA frames (HTTP/2). A
    /// redirect that needs the body again (307, 308) after part of it was sent fails with
    /// `SessionError.bodyStreamFailed`, and once part of it was read the retrier is not asked
    /// (the attempt's answer or error is the result): the sequence cannot start over. An error
    /// the sequence throws fails the transfer with `SessionError.bodyStreamFailed`.
    public func upload<Body: AsyncSequence & Sendable>(
        for request: URLRequest, from body: Body, length: Int64? = nil
    ) async throws -> (Data, HTTPURLResponse) where Body.Element == Data {
        let feed = AsyncBodyFeed(length: length.map { max(0, $0) }, produce: AsyncBodyFeed.producing(body))
        var request = request
        request.httpBody = nil
        request.httpBodyStream = nil
        let surplus = Mutex<SessionError?>(nil)
        let response = try await perform { completion in
            let options = TaskOptions.asyncCall(completionHandler: { response in
                surplus.withLock { $0 = feed.finishTransfer() }
                completion(response)
            })
            let task = engine.makeTask(UploadTask.self, request: request, options: options)
            task.replaceBody(with: .feed(feed))
            return task
        }
        if let error = surplus.withLock({ $0 }) { throw error }
        guard let http = response.response else { throw SessionError.badServerResponse("no HTTP response") }
        return (response.data ?? Data(), http)
    }

    /// Streams the response to `request` while `body` streams the request: the two run at
    /// once (a server may answer while the upload goes on). See ``bytes(for:bufferSize:)``
    /// and ``upload(for:from:length:)``.
    public func bytes<Body: AsyncSequence & Sendable>(
        for request: URLRequest, uploading body: Body, length: Int64? = nil, bufferSize: Int = 1 << 20
    ) async throws -> (ResponseBytes, HTTPURLResponse) where Body.Element == Data {
        let feed = AsyncBodyFeed(length: length.map { max(0, $0) }, produce: AsyncBodyFeed.producing(body))
        let (consumer, head) = try await openStream(request, bufferSize: bufferSize, type: UploadTask.self, body: feed)
        return try (ResponseBytes(consumer), Self.httpResponse(head))
    }

    /// Starts a streamed transfer and waits for its head. Cancelling the calling task
    /// meanwhile cancels the transfer.
    func openStream<T: SessionTask>(
        _ request: URLRequest, bufferSize: Int, type: T.Type, body feed: AsyncBodyFeed?
    ) async throws -> (ResponseStreamConsumer, HTTPResponseHead) {
        let buffer = ResponseStreamBuffer(limit: bufferSize)
        var options = TaskOptions(collectsBody: false, completionHandler: { response in
            let surplus = feed?.finishTransfer()
            buffer.finish(error: response.result.failureValue ?? surplus)
        })
        options.skipsSerializer = true
        options.responseStream = buffer
        var request = request
        if feed != nil {
            request.httpBody = nil
            request.httpBodyStream = nil
        }
        let task = engine.makeTask(type, request: request, options: options)
        if let feed { task.replaceBody(with: .feed(feed)) }
        buffer.attach(task)
        let consumer = ResponseStreamConsumer(buffer: buffer, task: task, feed: feed)
        // A caller whose `Task` is cancelled already sends nothing: the task ends before it starts.
        if Task.isCancelled { task.cancel() } else { task.resume() }
        let head = try await withTaskCancellationHandler {
            try await buffer.awaitHead()
        } onCancel: {
            task.cancel()
        }
        return (consumer, head)
    }

    /// Foundation's response for a stream's head, built off the driver thread.
    static func httpResponse(_ head: HTTPResponseHead) throws -> HTTPURLResponse {
        guard let response = head.httpURLResponse else { throw SessionError.badServerResponse("no HTTP response") }
        return response
    }
}
