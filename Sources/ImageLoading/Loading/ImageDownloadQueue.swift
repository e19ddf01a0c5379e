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
    /// Downloads waiting for a slot, oldest first, each with its task: choosing the next one
    /// reads every waiting task's priority, and keeping the task here spares a lookup in
    /// `merged` (hashing its URL) per waiting download at each start.
    private var line: [(urlIdentifier: String, task: DataTask)] = []
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
        line.append((download.urlIdentifier, download.task))
        return false
    }

    /// URL identifiers of downloads waiting for a slot, oldest first.
    var waiting: [String] { line.map(\.urlIdentifier) }

    /// How many downloads wait for a slot.
    var waitingCount: Int { line.count }

    /// Whether `id` is still the download for `urlIdentifier` (not cancelled, not replaced).
    func isCurrent(_ id: UInt64, for urlIdentifier: String) -> Bool {
        merged[urlIdentifier]?.id == id
    }

    /// What the caller does after a receipt was withdrawn (after unlocking).
    struct Withdrawal {
        /// The receipt's handler (nil: the receipt was not found).
        var handler: ImageDownloadHandler?
        /// The task to cancel: no receipt is left (the download is then forgotten; if it was
        /// active it keeps its slot until its completion arrives).
        var orphanedTask: DataTask?
        /// The priority the task falls back to: the receipt had lifted it (a view that joined a
        /// prefetch), and the receipts left want less.
        var lowered: (task: DataTask, priority: Float)?
    }

    /// Removes the handler of `receiptID` from the download whose task is `task`.
    mutating func cancel(_ receiptID: UUID, task: SessionTask) -> Withdrawal {
        // Found by the receipt's own task: an old receipt never touches a newer transfer.
        guard let urlIdentifier = urlIdentifiersByTask[ObjectIdentifier(task)],
              var download = merged[urlIdentifier], download.task === task
        else { return Withdrawal() }
        let index = download.handlers.firstIndex { $0.receiptID == receiptID }
        let handler = index.map { download.handlers.remove(at: $0) }
        guard download.handlers.isEmpty else {
            merged[urlIdentifier] = download
            // Only a lift this receipt made is undone: a priority the caller set on the task
            // itself is left alone.
            var lowered: (DataTask, Float)?
            if let handler, let wanted = download.handlers.map(\.priority).max(), wanted < handler.priority,
                download.task.priority == handler.priority
            {
                lowered = (download.task, wanted)
            }
            return Withdrawal(handler: handler, lowered: lowered)
        }
        forget(urlIdentifier)
        return Withdrawal(handler: handler, orphanedTask: download.task)
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
        guard let download = merged.removeValue(forKey: urlIdentifier) else { return }
        urlIdentifiersByTask[ObjectIdentifier(download.task)] = nil
        // A download is either active or waiting: only a waiting one is looked for in the
        // line (every finished download is an active one, and the line may be long).
        if !active.contains(download.id) {
            line.removeAll { $0.task === download.task }
        }
    }

    /// Takes the next waiting download: the highest task priority first (a prefetch waits
    /// behind what is on screen), then by ``prioritization``.
    private mutating func dequeue() -> MergedImageDownload? {
        // Bounded: every round takes one entry out of the line.
        while !line.isEmpty {
            var best: (index: Int, priority: Float)?
            for (index, waiting) in line.enumerated() {
                let priority = waiting.task.priority
                switch best {
                case nil: best = (index, priority)
                case let current?:
                    // Equal priorities: FIFO keeps the first found, LIFO takes the later one.
                    if priority > current.priority || (priority == current.priority && prioritization == .lifo) {
                        best = (index, priority)
                    }
                }
            }
            guard let best else { return nil }
            let next = line.remove(at: best.index)
            // `forget` takes a download out of the line with its table entries, so this always
            // holds; an entry left behind anyway is dropped rather than started.
            if let download = merged[next.urlIdentifier], download.task === next.task { return download }
        }
        return nil
    }

    /// Removes and returns every unfinished download, running or waiting (for teardown).
    mutating func removeAll() -> [MergedImageDownload] {
        let downloads = Array(merged.values)
        merged = [:]
        urlIdentifiersByTask = [:]
        line = []
        active = []
        return downloads
    }
}
