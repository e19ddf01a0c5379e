/// How many connections libcurl's connection cache may hold (`CURLMOPT_MAXCONNECTS`): the
/// connections in use and the idle ones kept for the next requests.
///
/// libcurl's own default is four times the number of easy handles in the multi handle *at the
/// moment a connection is returned*, and when the cache is over that it closes the oldest idle
/// connection. Curlew's transfers leave the multi handle as they end, and the next request of
/// a completion handler or an awaiting task arrives a thread hop later, so that number dips
/// below the load again and again: at 64 in flight the default closed the connections the next
/// requests were about to reuse, 1,300–2,600 new TCP connections per 150,000 small GETs where
/// 64 serve them all (`nstat`, `curlew-profile …/small.txt 150000 64`), each a handshake for the
/// server too, and for HTTPS a TLS handshake. One request at a time to five or more origins in
/// turn (an app polling several APIs) had a limit of four: every request opened a new
/// connection.
///
/// So the limit follows the most transfers the manager has held at once, four connections for
/// each as libcurl intends, and never falls below `floor`. It never shrinks: idle connections
/// leave the cache by age instead (libcurl closes one idle longer than `CURLOPT_MAXAGE_CONN`,
/// 118 seconds by default, when it next looks for a connection), and a cache that is full
/// still closes its oldest idle connection first. Never 0, which libcurl 7.88 reads as "no
/// limit" and later versions as their default. A value; the driver thread keeps one.
struct ConnectionCacheLimit: Equatable {
    /// The smallest limit: enough for a few dozen origins visited in turn.
    static let floor = 64
    /// Connections kept per transfer of the peak, as libcurl's own default counts them.
    static let connectionsPerTransfer = 4
    /// The largest limit set (libcurl 8 keeps the value in an `unsigned int`).
    static let ceiling = Int(Int32.max)

    /// The most transfers held at once so far.
    private(set) var peakTransfers = 0
    /// The limit now in force.
    private(set) var limit = ConnectionCacheLimit.floor

    /// Notes that `transfers` are held at once; returns the new limit when it grew (the
    /// driver then sets it), nil when the one in force still covers them.
    mutating func note(transfers: Int) -> Int? {
        guard transfers > peakTransfers else { return nil }
        peakTransfers = transfers
        let (product, overflow) = transfers.multipliedReportingOverflow(by: Self.connectionsPerTransfer)
        let wanted = overflow ? Self.ceiling : min(product, Self.ceiling)
        guard wanted > limit else { return nil }
        limit = wanted
        return wanted
    }
}
