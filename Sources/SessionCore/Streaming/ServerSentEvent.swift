import Foundation

/// One event of a `text/event-stream` response, as the WHATWG EventSource specification
/// dispatches it.
public struct ServerSentEvent: Sendable, Hashable {
    /// The last event ID in force when the event was dispatched (it carries forward from
    /// earlier events, and across reconnections); nil when none was set or it was reset.
    public var id: String?
    /// The `event:` field's value; nil when the block had none (the type "message").
    public var event: String?
    /// The `data:` lines, joined with LF.
    public var data: String
    /// The `retry:` field of the event's own block, in milliseconds, if it had one.
    public var retry: Int?

    /// An event with these fields.
    public init(id: String? = nil, event: String? = nil, data: String, retry: Int? = nil) {
        self.id = id
        self.event = event
        self.data = data
        self.retry = retry
    }
}
