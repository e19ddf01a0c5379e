import Dispatch

/// A refresh control of any UI toolkit (AFNetworking's `UIRefreshControl+AFNetworking`):
/// conform your control type, then call ``setRefreshingWithStateOfTask(_:on:)``.
public protocol RefreshControlling: AnyObject {
    /// Shows the control refreshing.
    func beginRefreshing()
    /// Shows the control idle.
    func endRefreshing()
}

extension RefreshControlling {
    /// Refreshes while `task` runs and stops when it is suspended or completes, calling the
    /// control on `queue` (the main queue by default). A new task (or nil) replaces the
    /// previous one; the control is held weakly.
    public func setRefreshingWithStateOfTask(_ task: SessionTask?, on queue: DispatchQueue = .main) {
        TaskStateBinding.bind(self, to: task, on: queue) { control, active in
            guard let control = control as? any RefreshControlling else { return }
            if active { control.beginRefreshing() } else { control.endRefreshing() }
        }
    }
}
