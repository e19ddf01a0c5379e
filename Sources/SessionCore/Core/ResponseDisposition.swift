/// What a data task does with a response its `setDataTaskDidReceiveResponseBlock` hook saw
/// (URLSession's `ResponseDisposition`, as AFNetworking's block returns it).
public enum ResponseDisposition: Sendable, Equatable {
    /// Receive the body and complete as usual.
    case allow
    /// Stop here: the task completes with `SessionError.cancelled` and no body.
    case cancel
}
