/// Errors thrown by ``TestServer``.
public enum TestServerError: Error, Sendable, Equatable {
    /// The listening socket reported no local address after binding.
    case noLocalAddress
    /// ``TestServer/url(_:)`` was given something that is not `/path[?query]`.
    case invalidPath(String)
}
