internal import CCurl

/// A finished exchange's `CURLcode`, as the code outside `Driver/` may ask about it: the
/// result's meaning without libcurl's header (which only `Driver/` imports).
struct CurlCode: Equatable {
    let raw: CURLcode

    init(_ raw: CURLcode) { self.raw = raw }

    /// The exchange completed.
    var isOK: Bool { raw == CURLE_OK }

    /// libcurl's own certificate or host name check refused the peer.
    var isPeerVerificationFailure: Bool { raw == CURLE_PEER_FAILED_VERIFICATION }
}
