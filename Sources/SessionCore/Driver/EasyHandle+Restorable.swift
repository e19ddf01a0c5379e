internal import CCurl

extension EasyHandle {
    /// Options a transfer may set that `recycle()` puts back to libcurl's defaults, one
    /// `setopt` each, instead of the `curl_easy_reset` and the base options again that any
    /// other option costs the next transfer (~8,000 instructions per HTTPS request on the
    /// driver thread, callgrind: every HTTPS request sets the TLS verification options, and
    /// every HTTP/2 one its stream options).
    struct Restorable: OptionSet {
        let rawValue: UInt8
        /// `CURLOPT_SSL_VERIFYPEER` (default 1).
        static let verifyPeer = Restorable(rawValue: 1 << 0)
        /// `CURLOPT_SSL_VERIFYHOST` (default 2).
        static let verifyHost = Restorable(rawValue: 1 << 1)
        /// `CURLOPT_SSL_CTX_FUNCTION` and `CURLOPT_SSL_CTX_DATA` (default NULL).
        static let sslContext = Restorable(rawValue: 1 << 2)
        /// `CURLOPT_PIPEWAIT` (default 0).
        static let pipeWait = Restorable(rawValue: 1 << 3)
        /// `CURLOPT_STREAM_WEIGHT` (libcurl's 0 means nghttp2's default weight, 16; setopt
        /// takes 1...256, so 16 is set back).
        static let streamWeight = Restorable(rawValue: 1 << 4)

        /// The flag for `option`, nil when it is not restorable.
        static func flag(for option: CURLoption) -> Restorable? {
            switch option {
            case CURLOPT_SSL_VERIFYPEER: return .verifyPeer
            case CURLOPT_SSL_VERIFYHOST: return .verifyHost
            case CURLOPT_SSL_CTX_DATA: return .sslContext
            case CURLOPT_PIPEWAIT: return .pipeWait
            case CURLOPT_STREAM_WEIGHT: return .streamWeight
            default: return nil
            }
        }
    }
}
