import Synchronization

extension Image {
    /// Records the largest working buffer resampling allocated beyond the image it returns, so
    /// tests can check that this memory stays bounded whatever the image's size. Installed for
    /// the current task (or, outside one, thread) with `ResamplingProbe.$current.withValue`:
    /// decodes elsewhere in the process do not report to it.
    final class ResamplingProbe: Sendable {
        /// The probe the current task or thread reports to, if any.
        @TaskLocal static var current: ResamplingProbe?

        /// The largest working allocation reported, in bytes; behind a Mutex because a probe
        /// may be read on one thread while a resample on another reports to it.
        private let largest = Mutex(0)

        /// The largest working allocation seen, in bytes.
        var largestWorkingBytes: Int { largest.withLock { $0 } }

        /// Notes a working allocation of `bytes`.
        func record(_ bytes: Int) {
            largest.withLock { $0 = max($0, bytes) }
        }
    }
}
