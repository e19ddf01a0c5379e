import Glibc

/// Request/reply conversations with the kernel over a group-less NETLINK_ROUTE socket:
/// link dumps and per-destination route lookups. Kept apart from the event socket so that
/// replies never interleave with multicast notifications. Confined to the monitor thread.
final class RtnetlinkClient {
    private let socket: NetlinkSocket
    private var sequence: UInt32 = 0
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// How often a dump flagged NLM_F_DUMP_INTR is retried before its data is used anyway
    /// (moby's policy; the data is still a consistent-enough snapshot for reachability).
    static let dumpRetries = 5
    /// Upper bound on datagrams read for one reply, so a confused socket cannot spin forever.
    static let maximumDatagramsPerReply = 100_000

    /// Whether the most recent link dump had to be used although it was still interrupted.
    private(set) var lastDumpWasInconsistent = false

    init(socket: NetlinkSocket) {
        self.socket = socket
    }

    /// All links in the socket's namespace (RTM_GETLINK dump), retried on NLM_F_DUMP_INTR.
    func dumpLinks() throws -> [LinkMessage] {
        var links: [LinkMessage] = []
        for attempt in 0 ..< Self.dumpRetries {
            var interrupted = false
            links = []
            try converse(type: Netlink.getLink, flags: Netlink.flagRequest | Netlink.flagDump,
                         payload: [UInt8](repeating: 0, count: 16)) { message in
                if message.flags & Netlink.flagDumpInterrupted != 0 { interrupted = true }
                if message.type == Netlink.newLink { links.append(try NetlinkMessageParser.link(from: message)) }
            }
            lastDumpWasInconsistent = interrupted
            if !interrupted || attempt == Self.dumpRetries - 1 { break }
        }
        return links
    }

    /// One link by index (RTM_GETLINK with ifi_index), or nil when it does not exist.
    func link(index: Int32) throws -> LinkMessage? {
        var payload = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: index) { payload.replaceSubrange(4 ..< 8, with: $0) }
        var found: LinkMessage?
        do {
            try converse(type: Netlink.getLink, flags: Netlink.flagRequest, payload: payload) { message in
                if message.type == Netlink.newLink { found = try NetlinkMessageParser.link(from: message) }
            }
        } catch let error as NetlinkSocketError where error.code == ENODEV {
            return nil
        }
        return found
    }

    /// The route the kernel would use for `destination` (RTM_GETROUTE with RTA_DST), so
    /// policy rules, VPN routes, metrics and unreachable routes all count exactly as they
    /// would for a real connect(). Throws NetlinkSocketError(code: ENETUNREACH, …) and the
    /// like when the kernel has no usable route.
    func route(to destination: IPAddress) throws -> RouteMessage? {
        // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type; flags.
        var payload: [UInt8] = [destination.family, destination.hostPrefixLength, 0, 0, 0, 0, 0, 0]
        payload.appendHostOrder(UInt32(0))
        NetlinkAttribute(type: Netlink.routeAttributeDestination, value: destination.bytes).append(to: &payload)
        var found: RouteMessage?
        try converse(type: Netlink.getRoute, flags: Netlink.flagRequest, payload: payload) { message in
            if message.type == Netlink.newRoute { found = try NetlinkMessageParser.route(from: message) }
        }
        return found
    }

    /// Sends one request and feeds every reply message with its sequence number to
    /// `handle`, until NLMSG_DONE, an NLMSG_ERROR, or the single reply of a non-dump request.
    private func converse(type: UInt16, flags: UInt16, payload: [UInt8],
                          handle: (NetlinkMessage) throws -> Void) throws {
        sequence &+= 1
        let expected = sequence
        let request = NetlinkMessage(type: type, flags: flags, sequence: expected, portID: 0, payload: payload)
        try socket.send(request.serialized())
        let isDump = flags & Netlink.flagDump == Netlink.flagDump
        for _ in 0 ..< Self.maximumDatagramsPerReply {
            switch try socket.receive(into: &buffer, blocking: true) {
            case .wouldBlock:
                // SO_RCVTIMEO expired: the kernel always answers, so treat silence as an error
                // rather than waiting forever on the monitor thread.
                throw NetlinkSocketError(operation: "recv", code: ETIMEDOUT)
            case .overrun:
                // A reply was dropped; the conversation cannot be completed.
                throw NetlinkSocketError(operation: "recv", code: ENOBUFS)
            case .datagram(let count):
                for message in try NetlinkMessageParser.messages(in: buffer, count: count) {
                    guard message.sequence == expected else { continue } // a stale reply
                    switch message.type {
                    case Netlink.done:
                        return
                    case Netlink.error:
                        let code = try NetlinkMessageParser.errorCode(of: message)
                        if code == 0 { return }  // an acknowledgement
                        throw NetlinkSocketError(operation: "rtnetlink", code: code == Int32.min ? EINVAL : -code)
                    case Netlink.overrun:
                        throw NetlinkSocketError(operation: "rtnetlink", code: ENOBUFS)
                    default:
                        try handle(message)
                        if !isDump && message.flags & Netlink.flagMulti == 0 { return }
                    }
                }
            }
        }
        throw NetlinkSocketError(operation: "recv", code: EOVERFLOW)
    }
}
