internal import CCurl
import Foundation

/// A libcurl easy handle, owned by one `TransferDriver` and touched only on its thread.
///
/// Handles are pooled and reused (`curl_easy_reset` keeps the handle's TLS session and DNS
/// caches): a fresh handle per request costs ~15% throughput and loses TLS resumption.
///
/// Between transfers a handle is `curl_easy_reset` only when the last transfer set an option
/// that the next one might not set again, or opened a connection (`needsReset`; libcurl's
/// count of retries on dead connections lives in the handle until a reset):
/// `TaskDelegate.configure` sets a fixed group of options for every transfer, so a handle
/// whose last transfer set nothing else (a plain `http://` GET on a pooled connection, the
/// common case) is reused as it is, as libcurl's own examples reuse handles. That saves the
/// reset and the options every transfer shares (~5,000 instructions on the driver thread per
/// request). The options of every HTTPS and HTTP/2 request (TLS verification, its callback,
/// stream weight) are `Restorable`: set back to libcurl's defaults at `recycle()`, one
/// `setopt` each, rather than costing a reset.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// Holds curl's error message for the last transfer (`CURLOPT_ERRORBUFFER`).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Strings whose memory libcurl borrows must stay alive: curl copies strings passed to
    /// setopt since 7.17, so only the slist needs keeping. It is kept, with the lines it was
    /// made from, for the next transfer that sends the same lines.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var headerListLines: [String] = []
    /// An option outside `isRewrittenForEveryTransfer` and `Restorable` was set since the last
    /// reset, or the last transfer opened a connection: the next transfer needs a
    /// `curl_easy_reset` first.
    private(set) var needsReset = false
    /// The `Restorable` options set since the handle was last recycled or reset.
    private(set) var restorable: Restorable = []
    /// The options every transfer shares (callbacks, protocols, signals) are set; a reset
    /// clears them.
    var hasBaseOptions = false
    /// `CURLOPT_ACCEPT_ENCODING` as last set since the last reset (nil: not known). libcurl
    /// builds its list of codings on every set of "", so an unchanged value is not set again.
    private var acceptEncoding: String??
    /// `CURLOPT_URL` as last set since the last reset. libcurl keeps the string between
    /// transfers of a handle that is not reset (its effective URL points at it), so the same
    /// URL again is not copied again: a client polling one endpoint sets it once per handle.
    private var urlString: String?
    /// The cookie jar's share this handle joined (Features/Cookies/CookieShare.swift); the
    /// strong reference keeps the share alive while the handle uses it.
    var cookieShare: CookieShare?
    /// The `CURLSH` set with `CURLOPT_SHARE` (the jar's current one or one it replaced since,
    /// or the driver's own share), nil when none. Kept between transfers, as curl keeps it
    /// across `curl_easy_reset`; a transfer sets `CURLOPT_SHARE` only when it differs.
    var joinedShare: UnsafeMutableRawPointer?
    /// A transfer on this handle sent a `Host` field of its own, and this libcurl keeps the name
    /// it gave for the handle's life (`CurlRuntime.keepsCookieHost`): the jar's cookies of later
    /// transfers would be picked for it. The handle is not used again (`DriverLoop.recycle`).
    var isBoundToCookieHost = false
    /// A transfer on this handle counts as running in `cookieShare`.
    var isRunningInCookieShare = false
    /// The parsed URL set with `CURLOPT_CURLU`: libcurl keeps only the pointer, so the handle
    /// keeps the object until it clears the option (`recycle`, `reset`).
    private var curlURL: CurlURL?
    /// libcurl's cookie engine as last set: on (`CURLOPT_COOKIEFILE` "", the store attached),
    /// off (NULL, the store detached), nil when not known (a new or reset handle).
    var cookieEngineIsOn: Bool?
    /// The manager's network options this handle was given (`CURLOPT_RESOLVE` and
    /// `CURLOPT_CONNECT_TO` borrow their lists): kept while the handle may use them.
    var networkOptions: NetworkOptions?
    /// `CURLOPT_ALTSVC` named a file for the handle's alt-svc cache, which survives
    /// `curl_easy_reset`: it is read once per handle.
    var hasAltSvcFile = false
    /// `CURLOPT_HSTS` named a file on this handle since its last reset. libcurl 7.88 reads it
    /// at every transfer and leaks the list on `curl_easy_reset`: it is cleared first.
    var hasHSTSFileList = false
    /// The receive buffer libcurl reads into for this handle's transfers (its
    /// `set.buffer_size`): 16 KiB after a reset, else the size it last took. libcurl 7.88
    /// refuses a new size while a buffer from an earlier transfer is still allocated (one
    /// that ended on an HTTP/2 connection other transfers still use keeps it), and the old
    /// size stays: a 512 KiB download's, for a data task that asked for 64 KiB.
    private(set) var receiveBufferSize = 16 << 10
    /// The response head parser of the handle's transfers, one at a time: reset by each
    /// transfer, so its buffers are allocated once per handle, not once per request.
    let headParser = ResponseHeadParser(maximumBytes: SessionConfiguration.default.maximumResponseHeaderBytes)

    /// The `TaskDelegate` of the transfer running on this handle, as the opaque pointer the
    /// driver retained for it; nil between transfers. curl's callbacks receive this slot as
    /// their user data (`CURLOPT_PRIVATE`, `HEADERDATA`, `WRITEDATA`, ... set once, with the
    /// base options), so a transfer stores one pointer instead of setting five options.
    let transferSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>

    init?() {
        guard let handle = curl_easy_init() else { return nil }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        transferSlot = .allocate(capacity: 1)
        transferSlot.initialize(to: nil)
        // From the first transfer on: `reset()` sets it again, but a new handle's first
        // transfer runs without one, and its failure would carry only curl's generic text.
        _ = curlew_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer)
        Self.neverWaitForTheResolver(raw)
    }

    /// Without `CURLOPT_QUICK_EXIT`, libcurl 7.88 ends a transfer that is still resolving its
    /// host (a cancel, a timeout) by joining the resolver thread: the driver thread, and so
    /// every transfer of the manager, waited until `getaddrinfo` returned (up to the system
    /// resolver's timeout; FaultDNSTests). With it, the lookup thread is left to finish and
    /// free itself. Set outside `set` (it is the same for every transfer) and after each reset.
    private static func neverWaitForTheResolver(_ raw: UnsafeMutableRawPointer) {
        _ = curlew_easy_setopt_long(raw, CURLOPT_QUICK_EXIT, 1)
    }

    deinit {
        cookieShare?.leave(self)
        curl_easy_cleanup(raw)
        if let list = headerList { curl_slist_free_all(list) }
        errorBuffer.deallocate()
        transferSlot.deallocate()
    }

    /// Forgets every option of the previous transfer, keeping connection-independent caches.
    func reset() {
        leaveCookieEngine()
        if hasHSTSFileList {
            // NULL frees the file list; the share's cache itself stays.
            _ = curlew_easy_setopt_string(raw, CURLOPT_HSTS, nil)
            hasHSTSFileList = false
        }
        curl_easy_reset(raw)  // zeroes CURLOPT_CURLU with every other option
        receiveBufferSize = 16 << 10
        curlURL = nil
        needsReset = false
        restorable = []
        originAuthorities = nil
        hasBaseOptions = false
        acceptEncoding = nil
        urlString = nil
        errorBuffer[0] = 0
        _ = curlew_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer)
        Self.neverWaitForTheResolver(raw)
    }

    /// Makes the handle ready for another transfer: a full `reset()` when the last transfer
    /// set an option the next one might not set again, otherwise only what every transfer
    /// leaves behind (curl's last error message). The handle stays joined to its cookie share
    /// with the engine as it was: the next transfer of the pool usually wants the same, and
    /// changes only what differs (`TaskDelegate.joinShare`).
    func recycle() {
        guard !needsReset, restoreDefaults() else { return reset() }
        cookieShare?.endTransfer(self)
        clearURL()
        errorBuffer[0] = 0
    }

    /// Sets the transfer's URL: the string as `CURLOPT_URL` and, when there is one, the handle
    /// libcurl parsed on the caller's thread as `CURLOPT_CURLU` (which decides where the
    /// transfer goes). Without the string, libcurl would print one from the parsed handle at
    /// every start for its effective URL (`curl_url_get` through its printf: ~6,900
    /// instructions).
    func setURL(_ string: String, parsed: CurlURL?) -> Bool {
        var ok = true
        if urlString != string {
            ok = set(CURLOPT_URL, string)
            urlString = ok ? string : nil
        }
        if let parsed {
            ok = set(CURLOPT_CURLU, pointer: UnsafeMutableRawPointer(parsed.handle)) && ok
        } else if curlURL != nil {
            ok = set(CURLOPT_CURLU, pointer: nil) && ok
        }
        curlURL = parsed
        return ok
    }

    /// Clears `CURLOPT_CURLU` so that no idle handle points at a parsed URL; the parsed URL is
    /// freed with its request (`CompletionBatch.retire`), not here.
    private func clearURL() {
        guard curlURL != nil else { return }
        _ = curlew_easy_setopt_pointer(raw, CURLOPT_CURLU, nil)
        curlURL = nil
    }

    /// libcurl 7.88 leaks the CURLOPT_COOKIEFILE list on curl_easy_reset (fixed in 8.0.0,
    /// curl #10709): it is freed before a reset, and the handle leaves its cookie share.
    private func leaveCookieEngine() {
        _ = curlew_easy_setopt_string(raw, CURLOPT_COOKIEFILE, nil)
        cookieEngineIsOn = nil
        cookieShare?.leave(self)
    }

    /// Notes that a transfer-specific option is being set through a call other than `set`
    /// (a callback setter of the shim).
    func noteTransferSpecificOption() { needsReset = true }

    /// Sets the origin's certificate authorities (`CURLOPT_CAINFO`, and no `CURLOPT_CAPATH`;
    /// the engine names none, its policy verifies the origin) and lowest TLS version
    /// (`CURLOPT_SSLVERSION`) for a transfer that may make a TLS
    /// handshake with its origin, unless the handle has them already. They come from the
    /// manager's configuration, which never changes for the handle's life, and only such a
    /// transfer reads them: a plain http transfer makes no handshake with its origin, and an
    /// HTTPS proxy's has options of its own (`CURLOPT_PROXY_CAINFO`, `CURLOPT_PROXY_SSLVERSION`).
    /// So they stay set from one transfer to the next instead of being restored and copied
    /// again by libcurl at every HTTPS request (~2,000 instructions, callgrind); a reset
    /// forgets them.
    func setOriginAuthorities(file: String?, minimumVersion: Int) -> Bool {
        if let known = originAuthorities, known.file == file, known.version == minimumVersion { return true }
        originAuthorities = nil
        var ok = Self.setString(raw, CURLOPT_CAINFO, file)
        ok = Self.setString(raw, CURLOPT_CAPATH, nil) && ok
        ok = curlew_easy_setopt_long(raw, CURLOPT_SSLVERSION, minimumVersion) == CURLE_OK && ok
        if ok { originAuthorities = (file, minimumVersion) }
        return ok
    }

    /// What `setOriginAuthorities` set since the last reset (nil: not known).
    private var originAuthorities: (file: String?, version: Int)?

    /// Installs the TLS verification callback (`CURLOPT_SSL_CTX_FUNCTION`) with its context
    /// (`CURLOPT_SSL_CTX_DATA`, a reference the caller retained). Both are `Restorable`: no
    /// idle handle keeps them, so no later handshake on it (an HTTPS proxy's for a plain
    /// http request) can reach a context that was freed with its transfer.
    func setSSLContextCallback(_ callback: curl_ssl_ctx_callback, context: UnsafeMutableRawPointer) -> Bool {
        restorable.insert(.sslContext)
        guard curlew_easy_setopt_ssl_ctx_function(raw, callback) == CURLE_OK else { return false }
        return curlew_easy_setopt_pointer(raw, CURLOPT_SSL_CTX_DATA, context) == CURLE_OK
    }

    /// Sets every `Restorable` option the last transfer set back to its default. False when
    /// libcurl refused one: the caller resets the handle instead.
    private func restoreDefaults() -> Bool {
        guard !restorable.isEmpty else { return true }
        var ok = true
        if restorable.contains(.sslContext) {
            ok = curlew_easy_setopt_ssl_ctx_function(raw, nil) == CURLE_OK
            ok = curlew_easy_setopt_pointer(raw, CURLOPT_SSL_CTX_DATA, nil) == CURLE_OK && ok
        }
        if restorable.contains(.verifyPeer) { ok = curlew_easy_setopt_long(raw, CURLOPT_SSL_VERIFYPEER, 1) == CURLE_OK && ok }
        if restorable.contains(.verifyHost) { ok = curlew_easy_setopt_long(raw, CURLOPT_SSL_VERIFYHOST, 2) == CURLE_OK && ok }
        if restorable.contains(.pipeWait) { ok = curlew_easy_setopt_long(raw, CURLOPT_PIPEWAIT, 0) == CURLE_OK && ok }
        if restorable.contains(.streamWeight) { ok = curlew_easy_setopt_long(raw, CURLOPT_STREAM_WEIGHT, 16) == CURLE_OK && ok }
        restorable = []
        return ok
    }

    /// The options `TaskDelegate.configure` sets for every transfer of this handle's manager,
    /// or once until the handle's next reset (`hasBaseOptions`: those from the manager's
    /// configuration, which never changes for the handle's life): setting them leaves a handle
    /// reusable without a reset. Any other option marks it for a reset.
    private static func isRewrittenForEveryTransfer(_ option: CURLoption) -> Bool {
        switch option {
        case CURLOPT_URL, CURLOPT_CURLU, CURLOPT_PROTOCOLS_STR, CURLOPT_NOSIGNAL, CURLOPT_PRIVATE,
            CURLOPT_HEADERDATA, CURLOPT_WRITEDATA, CURLOPT_READDATA, CURLOPT_SEEKDATA,
            CURLOPT_RESOLVER_START_DATA, CURLOPT_SOCKOPTDATA, CURLOPT_PREREQDATA,
            CURLOPT_SUPPRESS_CONNECT_HEADERS, CURLOPT_TCP_KEEPALIVE, CURLOPT_PATH_AS_IS, CURLOPT_SHARE, CURLOPT_COOKIEFILE,
            CURLOPT_HTTP_VERSION, CURLOPT_ACCEPT_ENCODING, CURLOPT_HTTPHEADER, CURLOPT_HTTPGET,
            CURLOPT_BUFFERSIZE, CURLOPT_PROXY, CURLOPT_NOPROXY, CURLOPT_PROXY_CAINFO,
            CURLOPT_PROXYUSERNAME, CURLOPT_PROXYPASSWORD, CURLOPT_PROXYAUTH, CURLOPT_UNIX_SOCKET_PATH,
            CURLOPT_ERRORBUFFER, CURLOPT_RESOLVE, CURLOPT_CONNECT_TO, CURLOPT_INTERFACE, CURLOPT_IPRESOLVE,
            CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, CURLOPT_DNS_CACHE_TIMEOUT, CURLOPT_DNS_SERVERS, CURLOPT_ALTSVC,
            CURLOPT_ALTSVC_CTRL:
            return true
        default:
            return false
        }
    }

    private func note(_ option: CURLoption) {
        guard !needsReset, !Self.isRewrittenForEveryTransfer(option) else { return }
        if let flag = Restorable.flag(for: option) { restorable.insert(flag) } else { needsReset = true }
    }

    /// curl's message for the last failure, empty if none.
    var errorMessage: String { String(cString: errorBuffer) }

    // MARK: Options

    @discardableResult
    func set(_ option: CURLoption, _ value: Int) -> Bool {
        note(option)
        return curlew_easy_setopt_long(raw, option, value) == CURLE_OK
    }

    /// Asks for a receive buffer of `size` bytes (`CURLOPT_BUFFERSIZE`, 16 KiB to 10 MiB, as
    /// libcurl clamps it); `receiveBufferSize` says what libcurl reads with.
    func setReceiveBufferSize(_ size: Int) {
        if set(CURLOPT_BUFFERSIZE, size) { receiveBufferSize = size }
    }

    @discardableResult
    func set(_ option: CURLoption, offset value: Int64) -> Bool {
        note(option)
        return curlew_easy_setopt_off_t(raw, option, curl_off_t(value)) == CURLE_OK
    }

    @discardableResult
    func set(_ option: CURLoption, _ value: String?) -> Bool {
        note(option)
        return Self.setString(raw, option, value)
    }

    private static func setString(_ raw: UnsafeMutableRawPointer, _ option: CURLoption, _ value: String?) -> Bool {
        guard let value else { return curlew_easy_setopt_string(raw, option, nil) == CURLE_OK }
        return value.withCString { curlew_easy_setopt_string(raw, option, $0) == CURLE_OK }
    }

    @discardableResult
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) -> Bool {
        note(option)
        return curlew_easy_setopt_pointer(raw, option, value) == CURLE_OK
    }

    /// Sets a list option the caller keeps alive while the handle may use it.
    @discardableResult
    func set(_ option: CURLoption, list: UnsafeMutablePointer<curl_slist>?) -> Bool {
        note(option)
        return curlew_easy_setopt_slist(raw, option, list) == CURLE_OK
    }

    /// Sets `CURLOPT_ACCEPT_ENCODING` (nil: no decoding), unless the handle has it already.
    @discardableResult
    func setAcceptEncoding(_ value: String?) -> Bool {
        if let known = acceptEncoding, known == value { return true }
        let ok = set(CURLOPT_ACCEPT_ENCODING, value)
        acceptEncoding = ok ? .some(value) : nil
        return ok
    }

    /// Installs the request headers. The list is kept for the next transfer of the handle
    /// that sends the same lines, and freed when other lines replace it or by `deinit`.
    /// Returns false when libcurl could not allocate the list.
    func setHeaders(_ lines: [String]) -> Bool {
        if headerList == nil || lines != headerListLines {
            var list: UnsafeMutablePointer<curl_slist>?
            for line in lines {
                guard let appended = curl_slist_append(list, line) else {
                    if let list { curl_slist_free_all(list) }
                    return false
                }
                list = appended
            }
            // curl holds the old list only while it is set: it is replaced right below.
            if let old = headerList { curl_slist_free_all(old) }
            headerList = list
            headerListLines = lines
        }
        return curlew_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headerList) == CURLE_OK
    }

    // MARK: Information

    func info(long info: CURLINFO) -> Int? {
        var value = 0
        return curlew_easy_getinfo_long(raw, info, &value) == CURLE_OK ? value : nil
    }

    func info(offset info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return curlew_easy_getinfo_off_t(raw, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    /// The response bytes received so far, before content decoding (`CURLINFO_SIZE_DOWNLOAD_T`).
    var receivedByteCount: Int64? { info(offset: CURLINFO_SIZE_DOWNLOAD_T) }

    func info(string info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curlew_easy_getinfo_string(raw, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    func info(pointer info: CURLINFO) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer?
        guard curlew_easy_getinfo_pointer(raw, info, &value) == CURLE_OK else { return nil }
        return value
    }

    /// `CURLINFO_PRIMARY_IP` or `CURLINFO_LOCAL_IP` (nil when empty). A kept-alive connection
    /// gives the same addresses transfer after transfer: the last string is reused when the
    /// bytes match, instead of decoding them again.
    func address(_ info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curlew_easy_getinfo_string(raw, info, &value) == CURLE_OK, let value, value.pointee != 0 else { return nil }
        let isLocal = info == CURLINFO_LOCAL_IP
        if let known = isLocal ? lastLocalAddress : lastPrimaryAddress,
            known.withCString({ strcmp($0, value) == 0 })
        {
            return known
        }
        let decoded = String(cString: value)
        if isLocal { lastLocalAddress = decoded } else { lastPrimaryAddress = decoded }
        return decoded
    }

    /// The last addresses `address(_:)` decoded.
    private var lastPrimaryAddress: String?
    private var lastLocalAddress: String?

    /// Seconds from a `*_TIME_T` (microseconds) info value.
    func seconds(_ info: CURLINFO) -> TimeInterval {
        Double(self.info(offset: info) ?? 0) / 1_000_000
    }
}
