import Dispatch

/// An activity indicator of any UI toolkit (AFNetworking's
/// `UIActivityIndicatorView+AFNetworking`): conform your view type, then call
/// ``setAnimatingWithStateOfTask(_:on:)``.
public protocol ActivityIndicating: AnyObject {
    /// Starts the animation.
    func startAnimating()
    /// Stops the animation.
    func stopAnimating()
}

extension ActivityIndicating {
    /// Animates while `task` runs and stops when it is suspended or completes, calling the
    /// indicator on `queue` (the main queue by default). A new task (or nil) replaces the
    /// previous one; the indicator is held weakly.
    public func setAnimatingWithStateOfTask(_ task: SessionTask?, on queue: DispatchQueue = .main) {
        TaskStateBinding.bind(self, to: task, on: queue) { control, active in
            guard let control = control as? any ActivityIndicating else { return }
            if active { control.startAnimating() } else { control.stopAnimating() }
        }
    }
}
