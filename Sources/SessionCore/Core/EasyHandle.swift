internal import CCurl
import Foundation

/// A libcurl easy handle, owned by one `TransferDriver` and touched only on its thread.
///
/// Handles are pooled and reused (`curl_easy_reset` keeps the handle's TLS session and DNS
/// caches): a fresh handle per request costs ~15% throughput and loses TLS resumption.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// Holds curl's error message for the last transfer (`CURLOPT_ERRORBUFFER`).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Strings whose memory libcurl borrows must stay alive: curl copies strings passed to
    /// setopt since 7.17, so only the slist needs keeping.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The cookie jar's share this handle joined (Features/Cookies/CookieShare.swift); the
    /// strong reference keeps the share alive while the handle uses it.
    var cookieShare: CookieShare?

    init?() {
        guard let handle = curl_easy_init() else { return nil }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        cookieShare?.leave(self)
        curl_easy_cleanup(raw)
        if let list = headerList { curl_slist_free_all(list) }
        errorBuffer.deallocate()
    }

    /// Forgets every option of the previous transfer, keeping connection-independent caches.
    func reset() {
        // libcurl 7.88 leaks the CURLOPT_COOKIEFILE list on curl_easy_reset (fixed in 8.0.0,
        // curl #10709): free it first. An idle handle belongs to no cookie share.
        _ = curlew_easy_setopt_string(raw, CURLOPT_COOKIEFILE, nil)
        cookieShare?.leave(self)
        curl_easy_reset(raw)
        if let list = headerList {
            curl_slist_free_all(list)
            headerList = nil
        }
        errorBuffer[0] = 0
        _ = curlew_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer)
    }

    /// curl's message for the last failure, empty if none.
    var errorMessage: String { String(cString: errorBuffer) }

    // MARK: Options

    @discardableResult
    func set(_ option: CURLoption, _ value: Int) -> Bool {
        curlew_easy_setopt_long(raw, option, value) == CURLE_OK
    }

    @discardableResult
    func set(_ option: CURLoption, offset value: Int64) -> Bool {
        curlew_easy_setopt_off_t(raw, option, curl_off_t(value)) == CURLE_OK
    }

    @discardableResult
    func set(_ option: CURLoption, _ value: String?) -> Bool {
        guard let value else { return curlew_easy_setopt_string(raw, option, nil) == CURLE_OK }
        return value.withCString { curlew_easy_setopt_string(raw, option, $0) == CURLE_OK }
    }

    @discardableResult
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) -> Bool {
        curlew_easy_setopt_pointer(raw, option, value) == CURLE_OK
    }

    /// Installs the request headers; the list is freed on the next `reset()` or `deinit`.
    /// Returns false when libcurl could not allocate the list.
    func setHeaders(_ lines: [String]) -> Bool {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let appended = curl_slist_append(list, line) else {
                if let list { curl_slist_free_all(list) }
                return false
            }
            list = appended
        }
        if let old = headerList { curl_slist_free_all(old) }
        headerList = list
        return curlew_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, list) == CURLE_OK
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

    /// Seconds from a `*_TIME_T` (microseconds) info value.
    func seconds(_ info: CURLINFO) -> TimeInterval {
        Double(self.info(offset: info) ?? 0) / 1_000_000
    }
}
