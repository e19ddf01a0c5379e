internal import CCurl
import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionEngine {
    /// The share of the jar this manager keeps cookies in; nil without cookies
    /// (`httpShouldSetCookies` off, or a jar libcurl could not create).
    var cookieShare: CookieShare? {
        configuration.httpShouldSetCookies ? configuration.cookieJar?.share : nil
    }
}

extension TaskDelegate {
    /// How this exchange uses the jar.
    enum CookieUse {
        /// No cookies sent or stored: no jar, or `httpShouldHandleCookies` false.
        case none
        /// libcurl's engine sends the matching cookies and stores `Set-Cookie` headers.
        case engine
        /// The caller set its own `Cookie` header, sent as is: the jar adds none, and the
        /// response's `Set-Cookie` headers are stored through the jar's checked entry point.
        case storeOnly
    }

    var cookieUse: CookieUse {
        guard engine.cookieShare != nil, prepared.handlesCookies else { return .none }
        return prepared.hasCookieHeader ? .storeOnly : .engine
    }

    /// Joins the easy handle to its share and turns libcurl's cookie engine on or off for this
    /// exchange (part of `configure`).
    ///
    /// Read in libcurl 7.88's source: joining a share that holds cookies points the handle at
    /// the shared store (lib/setopt.c, CURLOPT_SHARE) but does not turn the engine on; only
    /// `CURLOPT_COOKIEFILE` (here "", no file) sets the handle's `cookie_engine` flag, when the
    /// transfer starts (lib/cookie.c, Curl_cookie_init, run for every entry of the list at
    /// every start). That flag survives `curl_easy_reset` and so does the share, so the engine
    /// is switched by the store: "" with the store attached for on, NULL for off (which
    /// detaches the handle from the store, lib/setopt.c, CURLOPT_COOKIEFILE). `CURLOPT_SHARE`
    /// re-attaches the store, so it comes first. A pooled handle keeps its share and engine
    /// between transfers (`EasyHandle.recycle`): only what differs from its last transfer is set.
    func joinShare(_ driverShare: UnsafeMutableRawPointer) {
        guard let cookieShare = engine.cookieShare else {
            exchangeCookieUse = .none
            if easy.joinedShare != driverShare {
                easy.set(CURLOPT_SHARE, pointer: driverShare)
                easy.joinedShare = driverShare
            }
            return
        }
        let use = cookieUse
        exchangeCookieUse = use
        let wantsEngine = use == .engine
        let attached = cookieShare.join(easy, reattach: wantsEngine && easy.cookieEngineIsOn != true)
        if wantsEngine {
            // Once: each "" adds an entry to the list curl walks at every start.
            if easy.cookieEngineIsOn != true { easy.set(CURLOPT_COOKIEFILE, "") }
            easy.cookieEngineIsOn = true
        } else if attached || easy.cookieEngineIsOn != false {
            easy.set(CURLOPT_COOKIEFILE, nil as String?)
            easy.cookieEngineIsOn = false
        }
    }

    /// Stores the `Set-Cookie` headers of a response whose request carried the caller's own
    /// `Cookie` header (libcurl's engine was off for it, so it stored nothing). Refused
    /// cookies (a public suffix, a foreign domain, `Secure` over http) are dropped, as
    /// libcurl drops them. At most the first 50 of a response, libcurl's own bound
    /// (`MAX_SET_COOKIE_AMOUNT`): each is a store into the jar on this thread, and a head of
    /// 256 KiB holds some 11,000 of them.
    static let maximumStoredSetCookies = 50

    func storeCookies(from head: HTTPResponseHead) {
        guard exchangeCookieUse == .storeOnly, let jar = engine.configuration.cookieJar else { return }
        for header in head.values(forHTTPHeaderField: "Set-Cookie").prefix(Self.maximumStoredSetCookies) {
            _ = try? jar.add(setCookie: header, for: prepared.url)
        }
    }
}
