import Foundation

/// The WHATWG EventSource "interpret an event stream" rules over lines (from
/// ``LineSplitter``): fields, comments, multi-line data, `id` carrying forward, `retry`.
/// Pure and synchronous, so the specification's examples test it directly.
struct ServerSentEventParser {
    /// The most bytes of data one event may gather before its blank line.
    let maximumEventSize: Int
    /// The last event ID (the spec's "last event ID string"): set from the ID buffer at each
    /// blank line, so an `id:` of an event that never completed does not count; survives
    /// reconnections.
    private(set) var lastEventID = ""
    /// The spec's "last event ID buffer": what `id:` fields set until the block ends.
    private var idBuffer = ""
    /// The reconnection time the stream asked for, in milliseconds.
    private(set) var reconnectionTime: Int?
    private var data = ""
    private var dataBytes = 0
    private var hasData = false
    private var eventType = ""
    private var blockRetry: Int?
    /// The first line of the stream is yet to come (a leading BOM is dropped there).
    private var atStreamStart = true

    /// `lastEventID`: the ID in force before the stream's first `id` field (the caller's own
    /// `Last-Event-ID`, to resume from).
    init(maximumEventSize: Int = 16 << 20, lastEventID: String = "") {
        self.maximumEventSize = max(1, maximumEventSize)
        self.lastEventID = lastEventID
        idBuffer = lastEventID
    }

    /// Processes one line; returns the event a blank line dispatches.
    mutating func consume(line rawLine: String) throws(ResponseStreamError) -> ServerSentEvent? {
        var line = Substring(rawLine)
        if atStreamStart {
            atStreamStart = false
            if line.unicodeScalars.first == "\u{FEFF}" { line = Substring(line.unicodeScalars.dropFirst()) }
        }
        if line.isEmpty { return dispatch() }
        if line.utf8.first == UInt8(ascii: ":") { return nil }  // a comment
        let field: Substring
        var value: Substring
        if let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")) {
            field = line[..<colon]
            value = line[line.utf8.index(after: colon)...]
            // One U+0020, not one Character: a space and a combining mark after it are one
            // Character, and the mark belongs to the value.
            if value.utf8.first == UInt8(ascii: " ") { value = Substring(value.unicodeScalars.dropFirst()) }
        } else {
            field = line
            value = ""
        }
        switch field {
        case "event":
            eventType = String(value)
        case "data":
            dataBytes += value.utf8.count + 1
            guard dataBytes <= maximumEventSize else { throw .eventTooLarge(limit: maximumEventSize) }
            data += value
            data += "\n"
            hasData = true
        case "id":
            if !value.utf8.contains(0) { idBuffer = String(value) }
        case "retry":
            if !value.isEmpty, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                // Absurdly long digit strings saturate rather than overflow.
                let milliseconds = Int(value) ?? Int.max
                reconnectionTime = milliseconds
                blockRetry = milliseconds
            }
        default:
            break  // unknown fields are ignored
        }
        return nil
    }

    /// Forgets a half-received event: a dropped connection discards it. The last event ID
    /// and the reconnection time stay.
    mutating func discardPendingEvent() {
        idBuffer = lastEventID
        resetBlock()
        atStreamStart = true  // a new connection is a new stream (it may start with a BOM)
    }

    private mutating func dispatch() -> ServerSentEvent? {
        // The ID takes effect at every blank line, with or without data (the spec's step 1).
        lastEventID = idBuffer
        defer { resetBlock() }
        guard hasData else { return nil }
        var text = data
        if text.utf8.last == UInt8(ascii: "\n") { text.removeLast() }
        return ServerSentEvent(
            id: lastEventID.isEmpty ? nil : lastEventID, event: eventType.isEmpty ? nil : eventType,
            data: text, retry: blockRetry)
    }

    /// Forgets the fields of the block being read (not the ID in force, not the retry time).
    private mutating func resetBlock() {
        data = ""
        dataBytes = 0
        hasData = false
        eventType = ""
        blockRetry = nil
    }
}
