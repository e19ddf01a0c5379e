import Foundation

/// What `PinningPolicy.report` receives when a TLS server's verified chain had none of the
/// pins of the sets that match its host: enough to send to a reporting endpoint.
public struct PinFailureReport: Sendable, Hashable, Codable {
    /// The host as the request named it (for a proxy's handshake, the proxy's host).
    public var host: String
    /// The port connected to.
    public var port: Int
    /// The `sha256/BASE64` pins of the verified chain, leaf first, trust anchor last.
    public var servedPins: [String]
    /// The pins that were expected: the union of the failing matching sets' pins.
    public var expectedPins: Set<String>
    /// True when the handshake was refused; false for report-only sets (it went on).
    public var enforced: Bool

    /// Creates a report (Curlew makes them; the initializer is for tests and forwarding).
    public init(host: String, port: Int, servedPins: [String], expectedPins: Set<String>, enforced: Bool) {
        self.host = host
        self.port = port
        self.servedPins = servedPins
        self.expectedPins = expectedPins
        self.enforced = enforced
    }
}
