internal import CCurl
import Foundation
import Synchronization

/// The `CURLSH` behind a ``CookieJar``: libcurl's cookie store, DNS cache and TLS session
/// cache, shared by every manager given the jar.
///
/// An easy handle can join only one share, so the jar's share also carries the DNS and TLS
/// session caches a manager without cookies keeps in a share of its own (`DriverLoop`).
/// Sharing TLS sessions between managers is safe: each session is stamped with the
/// process-wide unique tag of the policy that verified it, and a transfer refuses (before
/// sending a byte) and retries on a fresh connection a session verified under another
/// manager's policy (`TLSHandshakeContext`).
///
/// Threads: a manager's driver thread joins its easy handles (``join(_:)``/``leave(_:)``);
/// the jar's calls run on the caller's thread with a short-lived easy handle of their own
/// (``withEasyHandle(_:)``). Both happen under `state`'s lock, so a replacement of the share
/// (``replaceSessionCachesIfIdle()``) never races a join. libcurl's own concurrent use of the
/// share, inside transfers, is serialised by the lock callbacks (`ShareLocks`).
final class CookieShare: Sendable {
    /// A live `CURLSH` and the lock context handed to its callbacks.
    struct Handle: @unchecked Sendable {
        // @unchecked Sendable: used only under CookieShare.state's lock (join, leave, jar calls,
        // replacement); libcurl's use from transfers is serialised by `locks`.
        let raw: UnsafeMutableRawPointer
        let locks: Unmanaged<ShareLocks>
    }

    private struct State {
        var current: Handle
        /// Shares replaced while driver easy handles still pointed at them (idle handles in a
        /// pool stay joined between transfers): each is freed once the last of those handles
        /// has moved to `current` or left.
        var retired: [Handle] = []
        /// Driver easy handles running a transfer with the share, between `join` and
        /// `endTransfer` (or `leave`). The jar's own handles are not counted: they live only
        /// inside one locked call.
        var activeTransfers = 0
    }

    private let state: Mutex<State>
    /// The share also holds an HSTS cache (`CURL_LOCK_DATA_HSTS`): only for the jar a manager
    /// made for itself, whose one driver thread is the only one to use it.
    let sharesHSTS: Bool
    /// The one manager (engine) whose driver uses the share's HSTS cache; nil until claimed.
    private let hstsOwner = Mutex<ObjectIdentifier?>(nil)

    /// Creates the share; nil when libcurl is unusable or out of memory.
    init?(sharesHSTS: Bool) {
        if case .failure = CurlRuntime.state { return nil }
        guard let handle = CookieShare.makeHandle(hsts: sharesHSTS) else { return nil }
        state = Mutex(State(current: handle))
        self.sharesHSTS = sharesHSTS
    }

    deinit {
        // Every easy handle that joined holds a strong reference to this object, so none is
        // joined any more: cleanup succeeds. Were it refused, both share and locks leak
        // rather than let curl call freed locks.
        state.withLock { state in
            _ = CookieShare.free(state.current)
            for handle in state.retired { _ = CookieShare.free(handle) }
        }
    }

    private static func makeHandle(hsts: Bool) -> Handle? {
        guard let share = curl_share_init() else { return nil }
        let locks = Unmanaged.passRetained(ShareLocks())
        // Lock callbacks first: curl refuses setopt once a handle uses the share.
        var ok = curlew_share_setopt_lock_function(share, ShareLocks.lock) == CURLSHE_OK
        ok = ok && curlew_share_setopt_unlock_function(share, ShareLocks.unlock) == CURLSHE_OK
        ok = ok && curlew_share_setopt_pointer(share, CURLSHOPT_USERDATA, locks.toOpaque()) == CURLSHE_OK
        for data in [CURL_LOCK_DATA_COOKIE, CURL_LOCK_DATA_DNS, CURL_LOCK_DATA_SSL_SESSION] + (hsts ? [CURL_LOCK_DATA_HSTS] : []) {
            ok = ok && curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(data.rawValue)) == CURLSHE_OK
        }
        let handle = Handle(raw: share, locks: locks)
        guard ok else {
            _ = free(handle)
            return nil
        }
        return handle
    }

    /// Frees a share no easy handle uses; false (and nothing freed) while one does.
    private static func free(_ handle: Handle) -> Bool {
        guard curl_share_cleanup(handle.raw) == CURLSHE_OK else { return false }
        handle.locks.release()
        return true
    }

    /// Claims the share's HSTS cache for `owner`; false when another manager has it (its jar
    /// was handed on), since libcurl 7.88 takes no lock around HSTS.
    func claimHSTS(by owner: ObjectIdentifier) -> Bool {
        hstsOwner.withLock { claimed in
            if claimed == nil { claimed = owner }
            return claimed == owner
        }
    }

    // MARK: - Driver threads

    /// Joins `easy` to the share for a transfer and counts the transfer as running until
    /// `endTransfer` (or `leave`). A handle still joined to the current share from its last
    /// transfer is not joined again (`CURLOPT_SHARE` locks the share and re-points every
    /// cache); `reattach` joins it again anyway, which re-attaches the cookie store that
    /// `CURLOPT_COOKIEFILE` NULL detached. Returns whether `CURLOPT_SHARE` was set. Call on
    /// the handle's driver thread, while it is not in a multi handle.
    @discardableResult
    func join(_ easy: EasyHandle, reattach: Bool) -> Bool {
        let didSet = state.withLock { state -> Bool in
            if !easy.isRunningInCookieShare {
                state.activeTransfers += 1
                easy.isRunningInCookieShare = true
            }
            let current = state.current.raw
            guard reattach || easy.joinedShare != current else { return false }
            let movesFromRetired = easy.joinedShare != nil && easy.joinedShare != current
            easy.set(CURLOPT_SHARE, pointer: current)
            easy.joinedShare = current
            if movesFromRetired { CookieShare.freeRetired(&state) }
            return true
        }
        easy.cookieShare = self
        return didSet
    }

    /// The transfer on `easy` ended; the handle stays joined for its next one.
    func endTransfer(_ easy: EasyHandle) {
        guard easy.isRunningInCookieShare else { return }
        state.withLock { $0.activeTransfers -= 1 }
        easy.isRunningInCookieShare = false
    }

    /// Takes `easy` out of the share (before `curl_easy_reset` or `curl_easy_cleanup`).
    func leave(_ easy: EasyHandle) {
        guard easy.cookieShare === self else { return }
        state.withLock { state in
            if easy.joinedShare != nil {
                easy.set(CURLOPT_SHARE, pointer: nil)
                easy.joinedShare = nil
            }
            if easy.isRunningInCookieShare {
                state.activeTransfers -= 1
                easy.isRunningInCookieShare = false
            }
            CookieShare.freeRetired(&state)
        }
        easy.cookieShare = nil
    }

    /// Replaced shares not freed yet (some easy handle still points at one).
    var retiredCount: Int { state.withLock { $0.retired.count } }

    /// Frees the replaced shares no easy handle points at any more (curl refuses the others).
    private static func freeRetired(_ state: inout State) {
        guard !state.retired.isEmpty else { return }
        state.retired.removeAll { CookieShare.free($0) }
    }

    /// Replaces the TLS session and DNS caches with empty ones, carrying the cookies over to
    /// the new share, if no transfer uses the share now; false (nothing changed) otherwise.
    ///
    /// libcurl cannot empty one cache of a share in place: `curl_share_setopt` is refused
    /// while a handle uses the share, and `CURLSHOPT_UNSHARE` of TLS sessions in 7.88 frees the
    /// cache array without freeing its sessions. With no transfer running (the lock keeps new
    /// ones out), nothing can change the cookies while they are copied, so none is lost.
    /// Copied cookies keep every field; only libcurl's creation order (its last tie-break when
    /// ordering the `Cookie` header) is renewed. Idle pooled handles may still point at the
    /// old share: it is kept (`retired`) until each has moved on at its next `join`, or left.
    func replaceSessionCachesIfIdle() -> Bool {
        state.withLock { state in
            guard state.activeTransfers == 0, let fresh = CookieShare.makeHandle(hsts: sharesHSTS) else { return false }
            var copied = false
            // As bytes: a cookie value that is not UTF-8 is copied unchanged.
            if let lines = CookieShare.withEasyHandle(on: state.current, { CookieShare.cookieLineBytes($0) }) ?? nil {
                copied = CookieShare.withEasyHandle(on: fresh) { CookieShare.addLineBytes(lines, $0) } ?? false
            }
            guard copied else {
                _ = CookieShare.free(fresh)
                return false
            }
            state.retired.append(state.current)
            state.current = fresh
            CookieShare.freeRetired(&state)
            return true
        }
    }

    // MARK: - The jar's calls (any thread)

    /// Runs `body` with an easy handle of its own joined to the share, under the share's lock
    /// (jar calls never interleave). nil when libcurl cannot create a handle.
    func withEasyHandle<T: Sendable>(_ body: (UnsafeMutableRawPointer) -> T) -> T? {
        state.withLock { state in
            CookieShare.withEasyHandle(on: state.current, body)
        }
    }

    /// Writes the share's HSTS cache to its file: a handle joined to it is freed while still
    /// joined (libcurl's only way to save it). Call on the driver thread of the one manager
    /// whose HSTS cache this share holds.
    func saveHSTS() {
        state.withLock { state in
            guard let easy = curl_easy_init() else { return }
            _ = curlew_easy_setopt_pointer(easy, CURLOPT_SHARE, state.current.raw)
            curl_easy_cleanup(easy)
        }
    }

    private static func withEasyHandle<T>(on handle: Handle, _ body: (UnsafeMutableRawPointer) -> T) -> T? {
        guard let easy = curl_easy_init() else { return nil }
        // curl_easy_cleanup takes the handle out of the share again; the store is the share's,
        // so it stays (lib/cookie.c Curl_flush_cookies frees only a handle's private store).
        // The handle leaves the share first: otherwise libcurl's cleanup would write a shared
        // HSTS cache to its file from this thread while the driver thread may change it.
        defer {
            _ = curlew_easy_setopt_pointer(easy, CURLOPT_SHARE, nil)
            curl_easy_cleanup(easy)
        }
        guard curlew_easy_setopt_pointer(easy, CURLOPT_SHARE, handle.raw) == CURLE_OK else { return nil }
        return body(easy)
    }

    /// Every cookie in the store as a Netscape line (`CURLINFO_COOKIELIST`; expired ones that
    /// libcurl has not purged yet included). nil when libcurl fails.
    static func cookieLines(_ easy: UnsafeMutableRawPointer) -> [String]? {
        var pointer: UnsafeMutableRawPointer?
        guard curlew_easy_getinfo_pointer(easy, CURLINFO_COOKIELIST, &pointer) == CURLE_OK else { return nil }
        let head = pointer?.assumingMemoryBound(to: curl_slist.self)
        defer { curl_slist_free_all(head) }
        var lines: [String] = []
        var node = head
        while let current = node {
            if let data = current.pointee.data { lines.append(String(cString: data)) }
            node = current.pointee.next
        }
        return lines
    }

    /// Every cookie in the store as the bytes of its Netscape line, NUL-terminated for
    /// ``addLineBytes(_:_:)``. A cookie holds whatever bytes its server sent (libcurl keeps
    /// them as they came); a `String` would turn those that are not UTF-8 into U+FFFD, and the
    /// cookie would go back to its server changed. nil when libcurl fails.
    static func cookieLineBytes(_ easy: UnsafeMutableRawPointer) -> [[CChar]]? {
        var pointer: UnsafeMutableRawPointer?
        guard curlew_easy_getinfo_pointer(easy, CURLINFO_COOKIELIST, &pointer) == CURLE_OK else { return nil }
        let head = pointer?.assumingMemoryBound(to: curl_slist.self)
        defer { curl_slist_free_all(head) }
        var lines: [[CChar]] = []
        var node = head
        while let current = node {
            if let data = current.pointee.data {
                lines.append(Array(UnsafeBufferPointer(start: data, count: strlen(data) + 1)))
            }
            node = current.pointee.next
        }
        return lines
    }

    /// Hands NUL-terminated lines (``cookieLineBytes(_:)``) to libcurl's store as they are.
    static func addLineBytes(_ lines: [[CChar]], _ easy: UnsafeMutableRawPointer) -> Bool {
        lines.allSatisfy { line in
            line.last == 0 && line.withUnsafeBufferPointer { curlew_easy_setopt_string(easy, CURLOPT_COOKIELIST, $0.baseAddress) == CURLE_OK }
        }
    }

    /// Hands lines to libcurl's store (`CURLOPT_COOKIELIST`): Netscape lines, or its commands
    /// `ALL` (remove every cookie) and `SESS` (remove session cookies).
    static func addLines(_ lines: [String], _ easy: UnsafeMutableRawPointer) -> Bool {
        lines.allSatisfy { line in
            curlew_easy_setopt_string(easy, CURLOPT_COOKIELIST, line) == CURLE_OK
        }
    }
}
