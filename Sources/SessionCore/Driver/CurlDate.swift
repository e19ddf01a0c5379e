internal import CCurl

/// libcurl's HTTP date parser (`curl_getdate`), for the code outside `Driver/`: the cookie
/// jar reads `Expires` exactly as libcurl's cookie engine does.
enum CurlDate {
    /// Seconds since 1970 for an HTTP date in any of the formats libcurl accepts; -1 when
    /// `text` is no date.
    static func seconds(_ text: String) -> Int {
        curl_getdate(text, nil)
    }
}
