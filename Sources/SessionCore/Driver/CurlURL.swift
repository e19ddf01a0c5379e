internal import CCurl

/// A request URL parsed by libcurl's URL API (`CURLU`) on the caller's thread, handed to the
/// easy handle with `CURLOPT_CURLU`.
///
/// Given `CURLOPT_URL` alone, libcurl parses the string again at the start of every
/// transfer, on the driver thread (`curl_url_set`: ~5,600 instructions for a short URL), and
/// prints it back (`curl_url_get`: ~6,900 more). Given a parsed handle as well, it copies
/// the handle (`curl_url_dup`) and keeps the string as the effective URL, so the parse
/// happens once, where the request is prepared, and off the thread every transfer shares.
///
/// The easy handle that uses it keeps a reference (`EasyHandle.setURL`) until the transfer
/// ends, when it clears the option: libcurl keeps the pointer, never a copy.
///
/// `@unchecked Sendable`: immutable once `init` returns. libcurl only reads a `CURLOPT_CURLU`
/// handle (`curl_url_dup` when a transfer connects, `curl_url_get` when it starts) and never
/// changes it, so the driver thread may read it after the caller's thread made it.
final class CurlURL: @unchecked Sendable {
    /// The `CURLU *`, owned: freed by `deinit`.
    let handle: OpaquePointer

    /// Parses `string` as libcurl parses `CURLOPT_URL` (the same flags); `badURL` with
    /// libcurl's reason when it rejects the URL.
    ///
    /// The path goes as given (`CURLU_PATH_AS_IS`, with `CURLOPT_PATH_AS_IS` for the string):
    /// libcurl otherwise removes `.` and `..` segments, and `/notes/..` — a path parameter
    /// of "..", rendered by an OpenAPI client — went to `/`, another resource. URLSession sends
    /// the path as given too; a relative redirect is resolved by Foundation, which removes
    /// them as RFC 3986 says.
    init(parsing string: String) throws(SessionError) {
        guard let handle = curl_url() else { throw .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory") }
        let flags = UInt32(CURLU_GUESS_SCHEME) | UInt32(CURLU_NON_SUPPORT_SCHEME) | UInt32(CURLU_PATH_AS_IS)
        let code = string.withCString { curl_url_set(handle, CURLUPART_URL, $0, flags) }
        guard code == CURLUE_OK else {
            curl_url_cleanup(handle)
            throw .badURL("libcurl rejected '\(string)': \(String(cString: curl_url_strerror(code)))")
        }
        self.handle = handle
    }

    deinit { curl_url_cleanup(handle) }
}
