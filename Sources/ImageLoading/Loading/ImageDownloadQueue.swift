import Foundation
import SessionCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The downloader's bookkeeping: merged downloads by URL, the waiting line and the active set.
///
/// A plain value, mutated only under the downloader's lock; it never calls out (no task is
/// resumed or cancelled here: the methods return what the caller must do after unlocking).
struct ImageDownloadQueue: Sendable {
    let prioritization: ImageDownloadPrioritization
    let maximumActiveDownloads: Int

    /// Downloads not yet finished, by URL identifier.
    private(set) var merged: [String: MergedImageDownload] = [:]
    /// The URL identifier of each download in `merged`, by its task: a receipt is found by
    /// its task, so cancelling never depends on the task's URL, which a `RequestAdapter` may
    /// have changed. (`merged` holds each task, so no identifier is reused while listed.)
    private var urlIdentifiersByTask: [ObjectIdentifier: String] = [:]
    /// URL identifiers of downloads waiting for a slot, oldest first.
    private(set) var waiting: [String] = []
    /// IDs of downloads that were started and whose completion has not arrived yet (a
    /// cancelled download keeps its slot until its transfer has really ended).
    private(set) var active: Set<UInt64> = []
    private var lastID: UInt64 = 0

    init(prioritization: ImageDownloadPrioritization, maximumActiveDownloads: Int) {
        self.prioritization = prioritization
        self.maximumActiveDownloads = max(1, maximumActiveDownloads)
    }

    /// A fresh download ID.
    mutating func makeID() -> UInt64 {
        lastID += 1
        return lastID
    }

    /// Adds `handler` to the download running or waiting for `urlIdentifier`, if there is one,
    /// and returns its task.
    mutating func join(_ urlIdentifier: String, handler: ImageDownloadHandler) -> DataTask? {
        guard merged[urlIdentifier] != nil else { return nil }
        merged[urlIdentifier]?.handlers.append(handler)
        return merged[urlIdentifier]?.task
    }

    /// Registers a new download. Returns true when it may start now (it then counts as
    /// active); otherwise it waits in line.
    mutating func add(_ download: MergedImageDownload) -> Bool {
        merged[download.urlIdentifier] = download
        urlIdentifiersByTask[ObjectIdentifier(download.task)] = download.urlIdentifier
        if active.count < maximumActiveDownloads {
            active.insert(download.id)
            return true
        }
        waiting.append(download.urlIdentifier)
        return false
    }

    /// Whether `id` is still the download for `urlIdentifier` (not cancelled, not replaced).
    func isCurrent(_ id: UInt64, for urlIdentifier: String) -> Bool {
        merged[urlIdentifier]?.id == id
    }

    /// Removes the handler of `receiptID` from the download whose task is `task`. Returns the
    /// removed handler, and the task to cancel when no handler is left (the download is then
    /// forgotten; if it was active it keeps its slot until its completion arrives).
    mutating func cancel(_ receiptID: UUID, task: SessionTask) -> (handler: ImageDownloadHandler?, orphanedTask: DataTask?) {
        // Found by the receipt's own task: an old receipt never touches a newer transfer.
        guard let urlIdentifier = urlIdentifiersByTask[ObjectIdentifier(task)],
              var download = merged[urlIdentifier], download.task === task
        else { return (nil, nil) }
        let index = download.handlers.firstIndex { $0.receiptID == receiptID }
        let handler = index.map { download.handlers.remove(at: $0) }
        guard download.handlers.isEmpty else {
            merged[urlIdentifier] = download
            return (handler, nil)
        }
        forget(urlIdentifier)
        return (handler, download.task)
    }

    /// Records the end of download `id`. Returns its handlers (none if it was cancelled) and
    /// the waiting tasks that may start now, which count as active from here on.
    mutating func finish(_ id: UInt64, for urlIdentifier: String) -> (handlers: [ImageDownloadHandler], start: [DataTask]) {
        var handlers: [ImageDownloadHandler] = []
        if let download = merged[urlIdentifier], download.id == id {
            forget(urlIdentifier)
            handlers = download.handlers
        }
        active.remove(id)
        var start: [DataTask] = []
        while active.count < maximumActiveDownloads, let next = dequeue() {
            active.insert(next.id)
            start.append(next.task)
        }
        return (handlers, start)
    }

    /// Drops the download for `urlIdentifier` from every table (not from `active`: a started
    /// transfer keeps its slot until its completion arrives).
    private mutating func forget(_ urlIdentifier: String) {
        if let download = merged.removeValue(forKey: urlIdentifier) {
            urlIdentifiersByTask[ObjectIdentifier(download.task)] = nil
        }
        waiting.removeAll { $0 == urlIdentifier }
    }

    /// Takes the next waiting download: the highest task priority first (a prefetch waits
    /// behind what is on screen), then by ``prioritization``.
    private mutating func dequeue() -> MergedImageDownload? {
        var best: (index: Int, priority: Float)?
        for (index, key) in waiting.enumerated() {
            guard let priority = merged[key]?.task.priority else { continue }
            switch best {
            case nil: best = (index, priority)
            case let current?:
                // Equal priorities: FIFO keeps the first found, LIFO takes the later one.
                if priority > current.priority || (priority == current.priority && prioritization == .lifo) {
                    best = (index, priority)
                }
            }
        }
        guard let best else {
            waiting.removeAll()
            return nil
        }
        let key = waiting.remove(at: best.index)
        return merged[key]
    }

    /// Removes and returns every unfinished download, running or waiting (for teardown).
    mutating func removeAll() -> [MergedImageDownload] {
        let downloads = Array(merged.values)
        merged = [:]
        urlIdentifiersByTask = [:]
        waiting = []
        active = []
        return downloads
    }
}
