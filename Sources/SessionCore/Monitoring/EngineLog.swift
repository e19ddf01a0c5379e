import Dispatch
import Logging

/// The engine's own debug messages (`SessionConfiguration.logger`): driver start and stop,
/// waits for a connection slot, retries.
///
/// The engine has one only when a logger was set, so a silent manager pays one nil check
/// where a message could be made. Messages are written on a serial queue of this log's own:
/// a log handler is the user's code, and none runs on the driver thread.
final class EngineLog: Sendable {
    private let logger: Logger
    private let queue: DispatchQueue

    init(logger: Logger, identifier: Int) {
        var logger = logger
        logger[metadataKey: "curlew.manager"] = "\(identifier)"
        self.logger = logger
        queue = DispatchQueue(label: "Curlew.log.\(identifier)")
    }

    /// Writes `message` at `.debug`, in the order of the calls from any one thread. A URL's
    /// password in it (an origin named with its userinfo) is written `***`.
    func debug(_ message: String) {
        debug { message }
    }

    /// Writes the message `make` builds, on this log's queue: an error's text is made there,
    /// not on the driver thread.
    func debug(_ make: @escaping @Sendable () -> String) {
        let logger = self.logger
        queue.async { logger.debug("\(LoggingEventMonitor.scrubbingPasswords(make()))") }
    }
}
