internal import CCurl
import Foundation

extension SessionError {
    /// Memory ran out for something Curlew keeps (reported as curl's `CURLE_OUT_OF_MEMORY`).
    static func outOfMemory(_ message: String) -> SessionError {
        .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: message)
    }

    /// Maps a failed `CURLcode` to the case a caller can act on, keeping curl's message.
    init(curlCode code: CURLcode, message: String) {
        let detail = message.isEmpty ? String(cString: curl_easy_strerror(code)) : message
        // libcurl 8.6+ reports its header cap as CURLE_TOO_LARGE (100), which 7.88's headers
        // do not name; the message is the same.
        if code.rawValue == 100, let limit = Self.libcurlHeaderLimit(in: message) {
            self = .responseHeadersTooLarge(limit: limit)
            return
        }
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            self = .dnsFailure(detail)
        case CURLE_COULDNT_CONNECT, CURLE_INTERFACE_FAILED:
            self = .cannotConnect(detail)
        case CURLE_OPERATION_TIMEDOUT:
            self = .timedOut(detail)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_INITFAILED,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_SHUTDOWN_FAILED:
            self = .tlsHandshakeFailed(detail)
        case CURLE_RECV_ERROR:
            // libcurl caps a response's header block itself (300 KiB in 7.88), before the
            // engine's own `maximumResponseHeaderBytes` when that is set higher: the same refusal.
            if let limit = Self.libcurlHeaderLimit(in: message) {
                self = .responseHeadersTooLarge(limit: limit)
            } else {
                self = .networkLost(detail)
            }
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            self = .networkLost(detail)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_BAD_CONTENT_ENCODING,
            CURLE_HTTP3:
            self = .badServerResponse(detail)
        case CURLE_UNSUPPORTED_PROTOCOL:
            self = .unsupportedScheme(detail)
        case CURLE_URL_MALFORMAT:
            self = .badURL(detail)
        case CURLE_READ_ERROR:
            self = .bodyStreamFailed(detail)
        case CURLE_WRITE_ERROR:
            self = .fileWriteFailed(detail)
        case CURLE_ABORTED_BY_CALLBACK:
            self = .cancelled
        case CURLE_TOO_MANY_REDIRECTS:
            self = .tooManyRedirects(0)
        default:
            self = .curl(code: Int(code.rawValue), message: detail)
        }
    }

    /// The limit in libcurl's "Too large response headers: <size> > <limit>" (its words since
    /// 7.8x), or nil for any other receive error. Bytes only: this runs on the driver thread.
    static func libcurlHeaderLimit(in message: String) -> Int? {
        let prefix = "Too large response headers: ".utf8
        let bytes = Array(message.utf8)
        guard bytes.count > prefix.count, bytes.starts(with: prefix),
              let marker = bytes.lastIndex(of: UInt8(ascii: ">")) else { return nil }
        var limit = 0
        var digits = 0
        for byte in bytes[(marker + 1)...] where byte != UInt8(ascii: " ") {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 12 else { return nil }
            limit = limit * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return digits > 0 ? limit : nil
    }
}
