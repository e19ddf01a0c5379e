internal import CCurl
import Foundation
import Synchronization

/// The share handle the driver's transfers join (DNS, TLS sessions, HSTS), and its
/// replacement after a security policy change.
extension DriverLoop {
    /// A DNS + TLS session cache, and the HSTS cache when the manager keeps one. Used from
    /// this thread only, so it needs no lock callbacks (and libcurl 7.88 could not share HSTS
    /// between threads anyway: it takes no lock for it).
    static func makeShare(hsts: Bool) -> UnsafeMutableRawPointer? {
        guard let share = curl_share_init() else { return nil }
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        _ = curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        if hsts, curlew_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_HSTS.rawValue)) != CURLSHE_OK {
            curl_share_cleanup(share)
            return nil
        }
        return share
    }

    /// Whether the share this manager's handles join holds an HSTS cache: the driver's own
    /// when the configuration keeps one; a cookie jar's only when the manager made the jar.
    var shareHoldsHSTS: Bool {
        if let cookieShare = engine.cookieShare { return cookieShare.sharesHSTS }
        return NetworkOptions.sharesHSTS(engine.configuration)
    }

    /// After a security policy change, new transfers get a new, empty TLS session cache:
    /// sessions verified under the old policy are never offered again. (The per-request
    /// admission check refuses them anyway; this keeps them from costing a retry.)
    func refreshShareIfPolicyChanged() {
        let tag = engine.security.tag
        guard let filledUnder = shareSecurityTag else {
            shareSecurityTag = tag
            return
        }
        guard tag != filledUnder, engine.security.replacesSessionCacheOnPolicyChange.load(ordering: .relaxed)
        else { return }
        if let cookieShare = engine.cookieShare {
            // The jar's share also holds the cookies (and may serve other managers): it is
            // replaced, cookies carried over, once no transfer uses it; until then this is
            // retried at each start, and the admission check refuses stale sessions.
            guard cookieShare.replaceSessionCachesIfIdle() else { return }
            // This driver's pooled handles still point at the replaced share; they leave it
            // now, so it is freed at once instead of when the last of them is used again.
            // (Another manager's pooled handles let go of it at their next transfer.)
            for easy in idleHandles { cookieShare.leave(easy) }
            network.shareReplaced()
            shareSecurityTag = tag
            engine.security.count { $0.sessionCacheReplacements += 1 }
            return
        }
        guard let fresh = DriverLoop.makeShare(hsts: NetworkOptions.sharesHSTS(engine.configuration)) else { return }
        network.shareReplaced()
        shareSecurityTag = tag
        retiredShares.append(share)
        share = fresh
        engine.security.count { $0.sessionCacheReplacements += 1 }
        for easy in idleHandles {
            easy.set(CURLOPT_SHARE, pointer: nil)
            easy.joinedShare = nil
        }
        cleanUpRetiredShares()
    }

    /// Frees retired shares no easy handle uses any more (curl refuses while one does).
    func cleanUpRetiredShares() {
        retiredShares.removeAll { curl_share_cleanup($0) == CURLSHE_OK }
    }
}
