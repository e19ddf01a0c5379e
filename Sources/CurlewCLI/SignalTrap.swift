import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Runs a handler on SIGINT and SIGTERM instead of dying at once (a download keeps what
/// it received), until cancelled.
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32] = [SIGINT, SIGTERM], queue: DispatchQueue, handler: @escaping @Sendable (Int32) -> Void) {
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    /// Stops trapping: the signals kill the process again.
    func cancel() {
        for source in sources {
            source.cancel()
            signal(Int32(source.handle), SIG_DFL)
        }
    }
}
