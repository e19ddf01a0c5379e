/// One netlink message split from a datagram: the `nlmsghdr` fields and the payload that
/// follows the header (exactly `nlmsg_len - 16` bytes, never more).
struct NetlinkMessage: Sendable, Equatable {
    /// `nlmsg_type`: RTM_NEWLINK, NLMSG_ERROR, …
    var type: UInt16
    /// `nlmsg_flags`: NLM_F_MULTI, NLM_F_DUMP_INTR, …
    var flags: UInt16
    /// `nlmsg_seq`, echoed by the kernel in replies so a reply can be matched to its request.
    var sequence: UInt32
    /// `nlmsg_pid`: the sender's port id (0 for the kernel).
    var portID: UInt32
    /// The bytes after the header.
    var payload: [UInt8]

    /// Serializes the message with a correct `nlmsg_len` and the payload padded to NLMSG_ALIGN.
    func serialized() -> [UInt8] {
        let length = Netlink.headerSize + payload.count
        var bytes = [UInt8]()
        bytes.reserveCapacity(Netlink.align(length))
        bytes.appendHostOrder(UInt32(length))
        bytes.appendHostOrder(type)
        bytes.appendHostOrder(flags)
        bytes.appendHostOrder(sequence)
        bytes.appendHostOrder(portID)
        bytes.append(contentsOf: payload)
        bytes.append(contentsOf: repeatElement(0, count: Netlink.align(length) - length))
        return bytes
    }
}

/// One `rtattr` / `nlattr`: its type (flag bits masked off) and its value bytes.
struct NetlinkAttribute: Sendable, Equatable {
    /// The attribute type without NLA_F_NESTED / NLA_F_NET_BYTEORDER.
    var type: UInt16
    /// The value: exactly `rta_len - 4` bytes.
    var value: [UInt8]

    /// Appends this attribute, padded to RTA_ALIGN, to a payload under construction.
    func append(to bytes: inout [UInt8]) {
        let length = Netlink.attributeHeaderSize + value.count
        bytes.appendHostOrder(UInt16(truncatingIfNeeded: length))
        bytes.appendHostOrder(type)
        bytes.append(contentsOf: value)
        bytes.append(contentsOf: repeatElement(0, count: Netlink.align(length) - length))
    }
}

extension Array where Element == UInt8 {
    /// Appends an integer in host byte order, which is what netlink uses for its headers.
    mutating func appendHostOrder<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value) { append(contentsOf: $0) }
    }
}

/// Bounds-checked reads of host-order integers from a byte array. Every read returns nil
/// instead of touching memory outside the array, so a lying length field cannot make the
/// parser read out of bounds.
struct ByteReader {
    let bytes: [UInt8]

    /// Reads a `T` at `offset`, or nil when `offset ..< offset + size` is not inside the bytes.
    func read<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T? {
        let size = MemoryLayout<T>.size
        guard offset >= 0, size <= bytes.count, offset <= bytes.count - size else { return nil }
        return bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }

    /// The bytes in `offset ..< offset + count`, or nil when that range is not inside the bytes.
    func slice(at offset: Int, count: Int) -> [UInt8]? {
        guard offset >= 0, count >= 0, offset <= bytes.count, count <= bytes.count - offset else { return nil }
        return Array(bytes[offset ..< offset + count])
    }
}
