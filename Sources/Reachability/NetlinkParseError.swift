/// Why a netlink datagram or attribute list was rejected. The monitor answers any of these
/// by re-reading the kernel's state, never by trusting part of a malformed message.
enum NetlinkParseError: Error, Equatable, Sendable {
    /// Fewer bytes remained than a header needs (`offset` is where the header would start).
    case truncatedHeader(offset: Int)
    /// A length field smaller than its own header, or larger than the bytes that remain.
    case invalidLength(offset: Int, length: Int)
    /// A fixed-size family header (ifinfomsg, rtmsg, …) did not fit in the payload.
    case truncatedPayload(expected: Int, actual: Int)
}
