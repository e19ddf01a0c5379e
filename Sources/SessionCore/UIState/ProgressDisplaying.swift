import Dispatch
import Foundation
import Synchronization

/// A progress bar of any UI toolkit (AFNetworking's `UIProgressView+AFNetworking`): conform
/// your view type, then call ``setProgressWithUploadProgressOfTask(_:animated:on:)`` or
/// ``setProgressWithDownloadProgressOfTask(_:animated:on:)``.
public protocol ProgressDisplaying: AnyObject {
    /// Shows `progress`, from 0 to 1.
    func setProgress(_ progress: Float, animated: Bool)
}

extension ProgressDisplaying {
    /// Shows the upload progress of `task` until it completes, on `queue` (the main queue by
    /// default). A later call for another task replaces this one; the view is held weakly.
    public func setProgressWithUploadProgressOfTask(_ task: SessionTask, animated: Bool, on queue: DispatchQueue = .main) {
        ProgressBinding.bind(self, to: task, upload: true, animated: animated, on: queue)
    }

    /// Shows the download progress of `task` until it completes, on `queue` (the main queue by
    /// default). A later call for another task replaces this one; the view is held weakly.
    public func setProgressWithDownloadProgressOfTask(_ task: SessionTask, animated: Bool, on queue: DispatchQueue = .main) {
        ProgressBinding.bind(self, to: task, upload: false, animated: animated, on: queue)
    }
}

/// Which task each progress view follows: a generation per view, so that updates from a
/// replaced task are dropped. The view is held weakly.
enum ProgressBinding {
    /// A weak reference to a view, read from the callback queue.
    private final class WeakView: @unchecked Sendable {
        // @unchecked: `view` is set once in init; weak loads are atomic in the Swift runtime.
        weak var view: (any ProgressDisplaying)?
        init(_ view: any ProgressDisplaying) { self.view = view }
    }

    /// The binding generation of each live view; entries of released views are dropped on
    /// the next bind (an identity can be reused by a new object).
    private static let generations = Mutex<[ObjectIdentifier: (generation: Int, view: WeakView)]>([:])

    static func bind(_ view: any ProgressDisplaying, to task: SessionTask, upload: Bool, animated: Bool, on queue: DispatchQueue) {
        let key = ObjectIdentifier(view)
        let weakView = WeakView(view)
        let generation = generations.withLock { table -> Int in
            table = table.filter { $0.value.view.view != nil }
            let next = (table[key]?.generation ?? 0) + 1
            table[key] = (next, weakView)
            return next
        }
        task.observeProgress(upload: upload) { progress in
            let fraction = Float(max(0, min(1, progress.fractionCompleted)))
            queue.async {
                guard generations.withLock({ $0[key]?.generation == generation }), let view = weakView.view else { return }
                view.setProgress(fraction, animated: animated)
            }
        }
    }
}
