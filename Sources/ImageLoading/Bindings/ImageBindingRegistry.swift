import Foundation
import Synchronization

/// The active downloads of every displaying object, by identity, holding the objects weakly
/// (the categories' associated objects, without extending anyone's life).
///
/// An entry exists only while one of its slots has a download in flight: a finished,
/// cancelled or replaced download leaves its slot, and an empty entry leaves the table. An
/// object released mid-download loses its entry when that download ends, or at the next
/// sweep of released objects (or when a new object takes its address), whichever comes
/// first; in the last two cases its download is cancelled.
enum ImageBindingRegistry {
    private struct Entry {
        let owner: WeakImageOwner
        var slots: [ImageSlot: ActiveImageDownload]
    }

    private struct Table {
        var entries: [ObjectIdentifier: Entry] = [:]
        /// Sweep released objects when the table grows past this (amortised O(1) per call).
        var sweepThreshold = 64
    }

    /// The table; never locked while calling out. Nothing removed from it is released under
    /// the lock either: an `ActiveImageDownload` may hold the last reference to its
    /// downloader, whose deinit (cancelling tasks, calling handlers, releasing a caller's
    /// cache) must not run inside it. Every mutation returns what it removed, to be dropped
    /// after unlocking.
    private static let table = Mutex(Table())

    /// Whether `slot` of `object` is downloading `urlIdentifier` now.
    static func isActive(_ object: AnyObject, _ slot: ImageSlot, urlIdentifier: String) -> Bool {
        table.withLock { table in
            entry(of: object, in: table)?.slots[slot]?.urlIdentifier == urlIdentifier
        }
    }

    /// Records `download` as `slot`'s download. The downloads this drops (a released owner's,
    /// found by the sweep or by its identity's reuse; a replaced one) are cancelled after
    /// unlocking: nobody shows their images, and each held a download slot to its end.
    static func begin(_ owner: WeakImageOwner, _ slot: ImageSlot, _ download: ActiveImageDownload) {
        let removed = table.withLock { table -> [ActiveImageDownload] in
            var removed: [ActiveImageDownload] = []
            if let existing = table.entries[owner.key], existing.owner.object !== owner.object {
                // A released object whose identity is now reused.
                table.entries[owner.key] = nil
                removed += existing.slots.values
            }
            let replaced = table.entries[owner.key, default: Entry(owner: owner, slots: [:])].slots
                .updateValue(download, forKey: slot)
            if let replaced { removed.append(replaced) }
            removed += sweepIfLarge(&table)
            return removed
        }
        // After unlocking: a cancel calls the receipt's failure handler, whose `finish` finds
        // the slot gone and ignores it.
        for dropped in removed {
            if let receipt = dropped.receipt { dropped.downloader.cancelTask(for: receipt) }
        }
    }

    /// Stores the receipt of `slot`'s download `receiptID`, if that is still the download.
    /// Returns false when it is not (the slot was cancelled, replaced or finished meanwhile).
    static func attach(_ receipt: ImageDownloadReceipt, to owner: WeakImageOwner, _ slot: ImageSlot) -> Bool {
        table.withLock { table in
            guard table.entries[owner.key]?.slots[slot]?.receiptID == receipt.receiptID else { return false }
            table.entries[owner.key]?.slots[slot]?.receipt = receipt
            return true
        }
    }

    /// Ends download `receiptID` of `slot`; false if it is no longer that slot's download
    /// (replaced or cancelled), in which case its outcome must be ignored.
    static func finish(_ owner: WeakImageOwner, _ slot: ImageSlot, receiptID: UUID) -> Bool {
        let removed = table.withLock { table -> ActiveImageDownload? in
            guard table.entries[owner.key]?.slots[slot]?.receiptID == receiptID else { return nil }
            return remove(slot, of: owner.key, in: &table)
        }
        return removed != nil
    }

    /// Removes and returns `slot`'s download (to cancel it).
    static func clear(_ object: AnyObject, _ slot: ImageSlot) -> ActiveImageDownload? {
        table.withLock { table in
            guard entry(of: object, in: table) != nil else { return nil }
            return remove(slot, of: ObjectIdentifier(object), in: &table)
        }
    }

    /// How many downloads `object` has in flight (tests).
    static func activeDownloadCount(of object: AnyObject) -> Int {
        table.withLock { entry(of: object, in: $0)?.slots.count ?? 0 }
    }

    /// How many objects have an entry (tests: nothing left behind).
    static var entryCount: Int { table.withLock { $0.entries.count } }

    /// Whether the table's lock is held right now, by this thread or another (tests: a
    /// downloader's deinit must never run under it).
    static var isLockedNow: Bool { table.withLockIfAvailable { _ in false } ?? true }

    // MARK: Private

    /// `object`'s entry, unless it belongs to a released object with the same identity.
    private static func entry(of object: AnyObject, in table: Table) -> Entry? {
        guard let entry = table.entries[ObjectIdentifier(object)], entry.owner.object === object else { return nil }
        return entry
    }

    @discardableResult
    private static func remove(_ slot: ImageSlot, of key: ObjectIdentifier, in table: inout Table) -> ActiveImageDownload? {
        let removed = table.entries[key]?.slots.removeValue(forKey: slot)
        if table.entries[key]?.slots.isEmpty == true { table.entries[key] = nil }
        return removed
    }

    /// Removes the entries of released objects when the table is large; returns their downloads.
    private static func sweepIfLarge(_ table: inout Table) -> [ActiveImageDownload] {
        guard table.entries.count > table.sweepThreshold else { return [] }
        var removed: [ActiveImageDownload] = []
        for (key, entry) in table.entries where entry.owner.object == nil {
            removed += entry.slots.values
            table.entries[key] = nil
        }
        table.sweepThreshold = max(64, table.entries.count * 2)
        return removed
    }
}
