import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionManager {
    /// Turns each finished task's response and body into the value its completion handler
    /// receives in `DataResponse.result` (AFNetworking's `responseSerializer`).
    ///
    /// The default is a ``JSONResponseSerializer``, as in AFNetworking (for
    /// `AFURLSessionManager` and `AFHTTPSessionManager` alike): a 2xx response with a JSON
    /// content type succeeds with a `JSONValue?`; any other status or content type fails the
    /// task with a `SerializationError` that carries the response and the body. Set an
    /// `HTTPResponseSerializer()` to receive the raw body of any content type.
    ///
    /// How it is applied:
    /// - On `completionQueue`, just before the completion handler, never on the driver thread;
    ///   the serializer in place when the task completes is the one used.
    /// - With the task's last request, so an empty body is valid for `HEAD` (and for 204/205
    ///   with the serializers that allow it).
    /// - The output is boxed as `any Sendable` in `DataResponse.result`; read it with
    ///   `response.value as? JSONValue` (a nil output, such as an empty JSON body, casts to nil).
    /// - A thrown error becomes `DataResponse.result`'s failure and the task's `error`.
    /// - Not applied by `data(for:)` (raw body), by tasks created with a `dataHandler` (the body
    ///   was streamed away) or by tasks created without a completion handler.
    ///
    /// A serializer whose output is not `Sendable` (``XMLParserResponseSerializer``,
    /// ``XMLDocumentResponseSerializer``) cannot box its output, so as the manager's
    /// serializer it fails every task with ``SerializationError/outputNotSendable(_:)``. Use
    /// ``object(for:serializer:)`` (or `HTTPSessionManager`'s async `get(_:serializer:)`)
    /// for those: it returns the output to the caller directly.
    public var responseSerializer: any ResponseSerialization {
        get { engine.responseSerializer }
        set { engine.responseSerializer = newValue }
    }

    /// Sends `request` and returns `serializer`'s output for the response (the manager's own
    /// `responseSerializer` plays no part).
    ///
    /// The serializer runs in the calling Swift task once the transfer has finished — off the
    /// driver thread and off the caller's actor (this method is `nonisolated`) — and its
    /// output is returned as a `sending` value: the caller owns it outright. That is how a
    /// non-`Sendable` output such as `XMLParser` or `XMLDocument` reaches you safely; it never
    /// crosses a queue.
    ///
    /// Cancelling the calling Swift `Task` cancels the transfer promptly with
    /// `SessionError.cancelled`.
    ///
    /// - Throws: the transfer's `SessionError`, or what `serializer` throws (a
    ///   `SerializationError` carrying the response and the body for an unacceptable status
    ///   code or content type, or an invalid body).
    public func object<S: ResponseSerialization>(
        for request: URLRequest, serializer: S
    ) async throws -> sending S.Output {
        let response = try await perform { completion in
            let options = TaskOptions.asyncCall(completionHandler: completion)
            return engine.makeTask(DataTask.self, request: request, options: options)
        }
        return try serializer.engineResponseObject(
            for: response.request ?? request, head: response.head, data: response.data)
    }
}
