import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Per-task choices fixed at creation.
struct TaskOptions: Sendable {
    var collectsBody: Bool
    /// Moved into the task's lock at creation (`SessionTask.options.callbacks` is empty).
    var callbacks: TaskCallbacks
    /// `CURLOPT_BUFFERSIZE` unless the configuration sets one. 64 KiB for data tasks: a
    /// large body then costs a quarter of the `recv` and `poll` calls of libcurl's 16 KiB
    /// (1 GiB to memory: 0.70x raw libcurl's MB/s at 16 KiB, 0.93x at 64 KiB), while small
    /// requests and idle transfers are unchanged (libcurl allocates the buffer per transfer
    /// and `recv` touches only the pages it fills; below glibc's mmap threshold it costs no
    /// system call). Downloads use 512 KiB.
    var defaultReceiveBufferSize: Int = 64 * 1024
    /// The same for a transfer that may share an HTTP/2 connection (nil: as above). libcurl
    /// 7.88 reads HTTP/2 through its own 32 KiB connection buffer, so a larger transfer
    /// buffer saves no system call there: data tasks keep libcurl's 16 KiB on that path.
    var multiplexedReceiveBufferSize: Int? = 16 * 1024
    /// Whether the raw body is returned as the result (async `data(for:)`) instead of
    /// going through the manager's response serializer.
    var skipsSerializer = false
    /// The caller reads the body from memory once the task returns (the async calls that
    /// return `Data` or decode it): a response hook's `.becomeDownload` is taken as `.allow`
    /// for it. A file would reach such a caller as an empty body, or be removed by the
    /// completion queue while the caller went on.
    var keepsBodyInMemory = false
    /// The completion handler is Curlew's own: the continuation of an async raw-data call
    /// (`dataResponse(for:)`) whose task resumes on the global executor. It is called where
    /// the task completes — on the driver thread, usually — so that the caller goes on one
    /// thread hop sooner; the rest of the completion (hooks, monitors, notifications) follows
    /// on the completion queue as for any task (`SessionEngine.resumeDirectly`). Never set
    /// for a closure of the caller's: that runs on the completion queue.
    var resumesDirectly = false
    /// Set for download tasks: the body goes to this file, not to memory.
    var download: DownloadOptions?
    /// Set for a streamed response (`bytes(for:)`): the head and the body chunks go there, to
    /// an async consumer, instead of to a data handler or memory.
    var responseStream: ResponseStreamBuffer?

    /// The options of an async call that returns the raw body (or decodes it after the task
    /// returns): the body collected, no serializer, the body kept in memory.
    static func asyncCall(completionHandler: @escaping @Sendable (DataResponse) -> Void) -> TaskOptions {
        var options = TaskOptions(collectsBody: true, completionHandler: completionHandler)
        options.skipsSerializer = true
        options.keepsBodyInMemory = true
        return options
    }

    init(
        collectsBody: Bool, completionHandler: (@Sendable (DataResponse) -> Void)? = nil,
        dataHandler: (@Sendable (Data) -> Void)? = nil,
        uploadProgress: (@Sendable (Progress) -> Void)? = nil, downloadProgress: (@Sendable (Progress) -> Void)? = nil
    ) {
        self.collectsBody = collectsBody
        callbacks = TaskCallbacks(
            completionHandler: completionHandler, dataHandler: dataHandler,
            uploadProgress: uploadProgress, downloadProgress: downloadProgress)
    }
}
