internal import CCurl
import Foundation
import Security

/// Process-wide libcurl facts and its one-time initialisation.
///
/// `curl_global_init` runs exactly once, before the first handle is created (Swift's lazy
/// globals are initialised under `swift_once`). libcurl 7.84+ built `threadsafe` makes that
/// safe from any thread; the version check below refuses older or non-OpenSSL builds.
enum CurlRuntime {
    /// The outcome of initialising libcurl, computed once.
    static let state: Result<Info, SessionError> = initialise()

    /// What this process's libcurl is.
    struct Info: Sendable {
        let version: String
        let sslVersion: String
        let supportsHTTP2: Bool
        let supportsBrotli: Bool
        let supportsZstd: Bool
        let supportsLibz: Bool
        let isOpenSSL: Bool
        /// Built with c-ares, the one resolver `CURLOPT_DNS_SERVERS` works with.
        let hasCAres: Bool
        /// `curl_version_info`'s `version_num`: 0xXXYYZZ for version XX.YY.ZZ.
        let versionNumber: UInt32

        /// Whether a cleartext HTTP/2 connection made with prior knowledge can carry a second
        /// stream. Before 8.0 libcurl set up a second HTTP/2 layer on such a connection when it
        /// reused it (curl issue 10634): every request after the first on it failed with "Error
        /// in the HTTP2 framing layer", one after another or side by side.
        var reusesPriorKnowledgeConnections: Bool { versionNumber >= 0x08_00_00 }

        /// Whether libcurl can leave HTTP/2 frames it already read in its connection buffer
        /// with no transfer marked to process them. Before 8.1, when the transfer whose full
        /// buffer paused frame processing ends (its body complete by Content-Length), the
        /// rest of the buffer (often other streams' last DATA frames) waits for the socket to
        /// become readable, which it may never be again; and the filter's `data_pending`
        /// check compares the wrong way round, so nothing else notices. The streams stall
        /// until their timeout (7.88.1 against nghttpd: one run in 60 of a test of 20
        /// side-by-side 50 KB downloads with both cores busy; raw libcurl in about one round
        /// of 20 in five). 8.1 rewrote that buffering. `DriverLoop.probe` works around it.
        var strandsBufferedStreamInput: Bool { versionNumber < 0x08_01_00 }

        /// Whether a receive cap on one HTTP/2 stream holds up the other streams of its
        /// connection. Before 8.2 libcurl paced a capped transfer by leaving its connection
        /// unread, and the other streams' frames waited there (7.88.1 against nghttpd: ten
        /// 1 MiB siblings of a download capped at 256 KB/s arrived only as it ended). 8.2 (curl
        /// pull request 11115) sizes the capped stream's window to its rate instead.
        var pacesWholeHTTP2Connections: Bool { versionNumber < 0x08_02_00 }

        /// Whether an easy handle keeps the host a custom `Host` field named for every later
        /// transfer. Before 8.20 libcurl kept that name (`state.aptr.cookiehost`) until
        /// `curl_easy_cleanup`: neither a transfer without the field nor `curl_easy_reset`
        /// cleared it, and it picks which of the jar's cookies go out and where a response's
        /// cookies are stored. 8.20 scoped it to one request (curl commit 3a19987a87).
        var keepsCookieHost: Bool { versionNumber < 0x08_14_00 }

        /// Whether an OpenSSL connection's app data is libcurl's connection filter, whose type
        /// names the TLS layer ("SSL" for the origin's, "SSL-PROXY" for an HTTPS proxy's):
        /// from 7.88 (7.87 kept the filter in ex_data slots of its own, leaving the app data
        /// empty) to 8.21, the newest release read. A later one is not trusted blind: its
        /// layout may have moved, and the server name decides there.
        var namesTLSLayers: Bool { versionNumber >= 0x07_58_00 && versionNumber < 0x08_16_00 }

        /// What libcurl sends for `CURLOPT_ACCEPT_ENCODING` "" (every coding it decodes), in
        /// its order: "deflate, gzip, br, zstd" with all of them built in.
        var allContentEncodings: String {
            var codings: [String] = []
            if supportsLibz { codings += ["deflate", "gzip"] }
            if supportsBrotli { codings.append("br") }
            if supportsZstd { codings.append("zstd") }
            return codings.isEmpty ? "identity" : codings.joined(separator: ", ")
        }
    }

    private static func initialise() -> Result<Info, SessionError> {
        let code = curl_global_init(Int(CURL_GLOBAL_ALL))
        guard code == CURLE_OK else {
            return .failure(.curl(code: Int(code.rawValue), message: "curl_global_init failed"))
        }
        guard let data = curl_version_info(curlew_version_now())?.pointee else {
            return .failure(.curl(code: -1, message: "curl_version_info returned nothing"))
        }
        let features = Int(data.features)
        let ssl = data.ssl_version.map { String(cString: $0) } ?? ""
        let info = Info(
            version: data.version.map { String(cString: $0) } ?? "?",
            sslVersion: ssl,
            supportsHTTP2: features & Int(CURL_VERSION_HTTP2) != 0,
            supportsBrotli: features & Int(CURL_VERSION_BROTLI) != 0,
            supportsZstd: features & Int(CURL_VERSION_ZSTD) != 0,
            supportsLibz: features & Int(CURL_VERSION_LIBZ) != 0,
            isOpenSSL: ssl.hasPrefix("OpenSSL/"),
            hasCAres: data.ares != nil,
            versionNumber: UInt32(data.version_num)
        )
        // Curlew needs CURLOPT_PREREQFUNCTION (7.80), thread-safe global init (7.84) and the
        // CA-store cache (7.87).
        if data.version_num < 0x07_57_00 {
            return .failure(.curl(code: -1, message: "libcurl \(info.version) is too old: Curlew needs 7.87 or newer"))
        }
        return .success(info)
    }

    /// The `Accept-Encoding` line for a request that leaves the choice to libcurl. Curlew
    /// sends the line itself: libcurl then skips formatting its own with its `printf` on every
    /// request (about 4,600 instructions on the driver thread), and still decodes what it
    /// announced, as `CURLOPT_ACCEPT_ENCODING` stays set.
    static let defaultAcceptEncodingLine: String = {
        guard case .success(let info) = state else { return "Accept-Encoding: identity" }
        return "Accept-Encoding: " + info.allContentEncodings
    }()

    /// The header lines of a request that sets no field of its own (the session adds none
    /// either): `defaultAcceptEncodingLine` alone, one shared array instead of one per request.
    static let defaultHeaderLines: [String] = [defaultAcceptEncodingLine]

    /// Whether this libcurl can reuse a cleartext HTTP/2 prior-knowledge connection
    /// (`Info.reusesPriorKnowledgeConnections`).
    static var reusesPriorKnowledgeConnections: Bool {
        guard case .success(let info) = state else { return false }
        return info.reusesPriorKnowledgeConnections
    }

    /// Whether a capped transfer must stay off shared HTTP/2 connections
    /// (`Info.pacesWholeHTTP2Connections`).
    static let pacesWholeHTTP2Connections: Bool = {
        guard case .success(let info) = state else { return false }
        return info.pacesWholeHTTP2Connections
    }()

    /// Whether a handle that sent a custom `Host` field must not be used again
    /// (`Info.keepsCookieHost`).
    static let keepsCookieHost: Bool = {
        guard case .success(let info) = state else { return true }
        return info.keepsCookieHost
    }()

    /// Whether a handshake's TLS layer can be read from its connection (`Info.namesTLSLayers`).
    static let namesTLSLayers: Bool = {
        guard case .success(let info) = state else { return false }
        return info.namesTLSLayers
    }()

    /// Whether silent transfers need probing (`Info.strandsBufferedStreamInput`).
    static let strandsBufferedStreamInput: Bool = {
        guard case .success(let info) = state else { return false }
        return info.strandsBufferedStreamInput
    }()

    /// Whether `CURLOPT_DNS_SERVERS` can work here (libcurl built with c-ares).
    static var supportsDNSServers: Bool {
        guard case .success(let info) = state else { return false }
        return info.hasCAres
    }

    /// Human-readable libcurl version, e.g. "libcurl/7.88.1 OpenSSL/3.0.19".
    static var versionDescription: String {
        switch state {
        case .success(let info): return "libcurl/\(info.version) \(info.sslVersion)"
        case .failure(let error): return "libcurl unavailable: \(error)"
        }
    }

    /// The CA bundle named to libcurl for an HTTPS proxy's handshake, which OpenSSL verifies
    /// itself (`CURLOPT_PROXY_CAINFO`, unless the configuration names a CA file): the file of
    /// `SystemTrustLocation.current`, the one rule the security policy's system store also
    /// follows (`SSL_CERT_FILE` first, as OpenSSL, then the system default), when readable.
    ///
    /// Only a CA *file* lets libcurl 7.87+ cache the parsed store between connections
    /// (Debian's default CA *path* re-parses ~140 roots on every handshake: ~17 ms of CPU
    /// each), so Curlew names the file and clears the path. The origin's handshake is given
    /// no CA at all: its trust is decided by the policy's own store in the verify callback.
    static let systemCABundle: String? = SystemTrustLocation.current.readableFile
}
