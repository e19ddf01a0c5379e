internal import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One mutex per kind of data a `CURLSH` holds (`curl_lock_data`), for libcurl's
/// `CURLSHOPT_LOCKFUNC` / `CURLSHOPT_UNLOCKFUNC`: a jar's share is used by the driver threads
/// of every manager given the jar and by the jar's own calls, so curl must serialise each
/// kind of data it shares (cookies, DNS, TLS sessions, the share itself).
///
/// libcurl never nests two locks of one kind, and curl's own multi-threaded example uses plain
/// (non-recursive) mutexes the same way. The object is handed to curl retained
/// (`Unmanaged.passRetained`) as `CURLSHOPT_USERDATA` and released only after
/// `curl_share_cleanup` succeeded, so a callback never outlives it.
final class ShareLocks: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutexes are the synchronisation; the pointer itself
    // never changes after init and the memory is freed only in deinit.
    private let mutexes: UnsafeMutablePointer<pthread_mutex_t>
    private static let count = Int(CURL_LOCK_DATA_LAST.rawValue)

    init() {
        mutexes = .allocate(capacity: ShareLocks.count)
        for index in 0..<ShareLocks.count {
            (mutexes + index).initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutexes + index, nil)
        }
    }

    deinit {
        for index in 0..<ShareLocks.count { pthread_mutex_destroy(mutexes + index) }
        mutexes.deinitialize(count: ShareLocks.count)
        mutexes.deallocate()
    }

    private func mutex(for data: curl_lock_data) -> UnsafeMutablePointer<pthread_mutex_t>? {
        let index = Int(data.rawValue)
        return index >= 0 && index < ShareLocks.count ? mutexes + index : nil
    }

    /// `CURLSHOPT_LOCKFUNC`: shared and exclusive access both take the one mutex. The object
    /// is borrowed, not retained, for the call: the share's own reference keeps it alive, and
    /// curl locks several times per transfer.
    static let lock: curl_lock_function = { _, data, _, context in
        guard let context else { return }
        Unmanaged<ShareLocks>.fromOpaque(context)._withUnsafeGuaranteedRef { locks in
            if let mutex = locks.mutex(for: data) { pthread_mutex_lock(mutex) }
        }
    }

    /// `CURLSHOPT_UNLOCKFUNC`.
    static let unlock: curl_unlock_function = { _, data, context in
        guard let context else { return }
        Unmanaged<ShareLocks>.fromOpaque(context)._withUnsafeGuaranteedRef { locks in
            if let mutex = locks.mutex(for: data) { pthread_mutex_unlock(mutex) }
        }
    }
}
