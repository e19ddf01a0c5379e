import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The closures a task calls. A task holds them only until it completes: the completion
/// path takes them out (`SessionTask.takeCallbacks()`), so nothing a closure captures — its
/// own task, the manager — is kept alive by a finished task.
struct TaskCallbacks: Sendable {
    var completionHandler: (@Sendable (DataResponse) -> Void)?
    var dataHandler: (@Sendable (Data) -> Void)?
    var uploadProgress: (@Sendable (Progress) -> Void)?
    var downloadProgress: (@Sendable (Progress) -> Void)?
    /// A download's destination: given the temporary file and the response, where to move it.
    var destination: (@Sendable (URL, HTTPURLResponse?) -> URL)?
}
