import Foundation

/// Timings and connection facts for one request/response exchange, read from libcurl.
///
/// Durations are measured from the start of that exchange; a phase that did not happen
/// (DNS on a reused connection, TLS on plain HTTP) is `0`.
public struct TransactionMetrics: Sendable, Hashable {
    /// The URL of this exchange.
    public var url: URL?
    /// The response status code, 0 when no response arrived.
    public var statusCode: Int
    /// Time until the name was resolved.
    public var domainLookupDuration: TimeInterval
    /// Time until the TCP connection was established.
    public var connectDuration: TimeInterval
    /// Time until the TLS handshake completed (0 for plain HTTP).
    public var secureConnectionDuration: TimeInterval
    /// Time until the first response byte arrived.
    public var timeToFirstByte: TimeInterval
    /// Total time of the exchange.
    public var totalDuration: TimeInterval
    /// Whether the exchange reused a connection kept alive from earlier.
    public var isReusedConnection: Bool
    /// The negotiated protocol: "HTTP/1.0", "HTTP/1.1", "HTTP/2" or "HTTP/3".
    public var httpVersion: String?
    /// The peer's IP address.
    public var remoteAddress: String?
    /// The peer's port.
    public var remotePort: Int?
    /// The local IP address.
    public var localAddress: String?
    /// The local port.
    public var localPort: Int?
    /// Request bytes sent, head and body.
    public var requestBytesSent: Int64
    /// Response body bytes received, before content decoding.
    public var responseBodyBytesReceived: Int64
    /// Response head bytes received.
    public var responseHeaderBytesReceived: Int64
}

/// Metrics for a whole task: every exchange of its redirect chain, and the task's interval.
public struct TaskMetrics: Sendable, Hashable {
    /// One entry per request sent, in order, retries and challenge rounds included; the last
    /// is the final response, or the exchange a cancel or the resource timeout cut short
    /// (its `statusCode` 0 when no head had arrived).
    public var transactionMetrics: [TransactionMetrics]
    /// When the task was resumed.
    public var taskStart: Date
    /// Wall time from resume to completion.
    public var taskDuration: TimeInterval
    /// The number of redirects followed.
    public var redirectCount: Int

    /// The final exchange, if any request was sent.
    public var finalTransaction: TransactionMetrics? { transactionMetrics.last }
    /// Time until the name was resolved in the final exchange.
    public var domainLookupDuration: TimeInterval { finalTransaction?.domainLookupDuration ?? 0 }
    /// Time until connected in the final exchange.
    public var connectDuration: TimeInterval { finalTransaction?.connectDuration ?? 0 }
    /// Time until the TLS handshake completed in the final exchange.
    public var secureConnectionDuration: TimeInterval { finalTransaction?.secureConnectionDuration ?? 0 }
    /// Time to the first response byte in the final exchange.
    public var timeToFirstByte: TimeInterval { finalTransaction?.timeToFirstByte ?? 0 }
    /// Whether the final exchange reused a kept-alive connection.
    public var isReusedConnection: Bool { finalTransaction?.isReusedConnection ?? false }
    /// The final exchange's negotiated HTTP version.
    public var httpVersion: String? { finalTransaction?.httpVersion }
    /// The final exchange's peer address.
    public var remoteAddress: String? { finalTransaction?.remoteAddress }
}
