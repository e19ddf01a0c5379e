/// What a data task does with a response its `setDataTaskDidReceiveResponseBlock` hook saw
/// (URLSession's `ResponseDisposition`, as AFNetworking's block returns it).
public enum ResponseDisposition: Sendable, Equatable {
    /// Receive the body and complete as usual.
    case allow
    /// Stop here: the task completes with `SessionError.cancelled` and no body.
    case cancel
    /// Receive the body into a file instead of memory (URLSession's `becomeDownload`): it
    /// streams to a temporary file in `SessionConfiguration.downloadDirectory`, the
    /// completion handler's `fileURL` and `result` are that file, and the file is removed once
    /// the handler and the `taskDidComplete` observers have run (move it from the handler to
    /// keep it). The task stays the same `DataTask`; the serializer is not run. The async
    /// calls that return the body (`data(for:)`, `dataResponse(for:)`,
    /// `object(for:serializer:)`, `upload(for:from:)` and `HTTPSessionManager`'s async calls)
    /// read it from memory: for their tasks this is taken as ``allow``.
    case becomeDownload
}
