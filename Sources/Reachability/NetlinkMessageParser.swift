/// Splits netlink datagrams into messages and messages into attributes, checking every
/// length field against the bytes that are really there. Nothing here trusts the kernel:
/// a zero, truncated or oversized length throws `NetlinkParseError` instead of reading
/// out of bounds or looping forever.
enum NetlinkMessageParser {
    /// The messages in one datagram (`count` bytes of `buffer`), in order.
    static func messages(in buffer: [UInt8], count: Int? = nil) throws -> [NetlinkMessage] {
        let reader = ByteReader(bytes: buffer)
        let end = min(max(count ?? buffer.count, 0), buffer.count)
        var result: [NetlinkMessage] = []
        var offset = 0
        // Each pass advances by at least one header (length >= 16 is checked), so the loop
        // ends after at most end / 16 iterations.
        while offset < end {
            guard end - offset >= Netlink.headerSize,
                  let length32 = reader.read(UInt32.self, at: offset),
                  let type = reader.read(UInt16.self, at: offset + 4),
                  let flags = reader.read(UInt16.self, at: offset + 6),
                  let sequence = reader.read(UInt32.self, at: offset + 8),
                  let portID = reader.read(UInt32.self, at: offset + 12)
            else { throw NetlinkParseError.truncatedHeader(offset: offset) }
            let length = Int(length32)
            guard length >= Netlink.headerSize, length <= end - offset,
                  let payload = reader.slice(at: offset + Netlink.headerSize, count: length - Netlink.headerSize)
            else { throw NetlinkParseError.invalidLength(offset: offset, length: length) }
            result.append(NetlinkMessage(type: type, flags: flags, sequence: sequence, portID: portID, payload: payload))
            // The last message's padding may be missing from the datagram; clamp to the end.
            offset += min(Netlink.align(length), end - offset)
        }
        return result
    }

    /// The attributes in `bytes` starting at `offset` (the size of the family header that
    /// precedes them), in order.
    static func attributes(in bytes: [UInt8], from offset: Int = 0) throws -> [NetlinkAttribute] {
        let reader = ByteReader(bytes: bytes)
        var result: [NetlinkAttribute] = []
        var position = max(offset, 0)
        // Each pass advances by at least four bytes (length >= 4 is checked).
        while position < bytes.count {
            guard let length16 = reader.read(UInt16.self, at: position),
                  let rawType = reader.read(UInt16.self, at: position + 2)
            else { throw NetlinkParseError.truncatedHeader(offset: position) }
            let length = Int(length16)
            guard length >= Netlink.attributeHeaderSize, length <= bytes.count - position,
                  let value = reader.slice(at: position + Netlink.attributeHeaderSize,
                                           count: length - Netlink.attributeHeaderSize)
            else { throw NetlinkParseError.invalidLength(offset: position, length: length) }
            result.append(NetlinkAttribute(type: rawType & Netlink.attributeTypeMask, value: value))
            position += min(Netlink.align(length), bytes.count - position)
        }
        return result
    }

    /// The negative errno (or 0 for an acknowledgement) carried by an NLMSG_ERROR message.
    static func errorCode(of message: NetlinkMessage) throws -> Int32 {
        guard let code = ByteReader(bytes: message.payload).read(Int32.self, at: 0) else {
            throw NetlinkParseError.truncatedPayload(expected: 4, actual: message.payload.count)
        }
        return code
    }

    /// Decodes RTM_NEWLINK / RTM_DELLINK: `ifinfomsg` (16 bytes) and its attributes.
    static func link(from message: NetlinkMessage) throws -> LinkMessage {
        let reader = ByteReader(bytes: message.payload)
        guard let hardwareType = reader.read(UInt16.self, at: 2),
              let index = reader.read(Int32.self, at: 4),
              let flags = reader.read(UInt32.self, at: 8),
              message.payload.count >= 16
        else { throw NetlinkParseError.truncatedPayload(expected: 16, actual: message.payload.count) }
        var link = LinkMessage(index: index, name: nil, hardwareType: hardwareType, flags: flags, kind: nil)
        for attribute in try attributes(in: message.payload, from: 16) {
            switch attribute.type {
            case Netlink.linkAttributeName:
                link.name = cString(attribute.value)
            case Netlink.linkAttributeLinkInfo:
                for nested in try attributes(in: attribute.value) where nested.type == Netlink.linkInfoKind {
                    link.kind = cString(nested.value)
                }
            default:
                break
            }
        }
        return link
    }

    /// Decodes RTM_NEWROUTE (also the reply to RTM_GETROUTE): `rtmsg` (12 bytes) and attributes.
    static func route(from message: NetlinkMessage) throws -> RouteMessage {
        let payload = message.payload
        guard payload.count >= 12, let flags = ByteReader(bytes: payload).read(UInt32.self, at: 8) else {
            throw NetlinkParseError.truncatedPayload(expected: 12, actual: payload.count)
        }
        var route = RouteMessage(family: payload[0], destinationLength: payload[1], table: UInt32(payload[4]),
                                 protocol: payload[5], scope: payload[6], type: payload[7], flags: flags)
        for attribute in try attributes(in: payload, from: 12) {
            let reader = ByteReader(bytes: attribute.value)
            switch attribute.type {
            case Netlink.routeAttributeDestination:
                route.destination = IPAddress(family: route.family, bytes: attribute.value)
            case Netlink.routeAttributeGateway:
                route.gateway = IPAddress(family: route.family, bytes: attribute.value)
            case Netlink.routeAttributeVia:
                // struct rtvia { __kernel_sa_family_t rtvia_family; __u8 rtvia_addr[]; }
                if let family = reader.read(UInt16.self, at: 0), family <= UInt16(UInt8.max) {
                    route.gateway = IPAddress(family: UInt8(family), bytes: Array(attribute.value.dropFirst(2)))
                }
            case Netlink.routeAttributePreferredSource:
                route.preferredSource = IPAddress(family: route.family, bytes: attribute.value)
            case Netlink.routeAttributeOutputInterface:
                route.outputInterface = reader.read(Int32.self, at: 0)
            case Netlink.routeAttributePriority:
                route.priority = reader.read(UInt32.self, at: 0)
            case Netlink.routeAttributeTable:
                if let table = reader.read(UInt32.self, at: 0) { route.table = table }
            default:
                break
            }
        }
        return route
    }

    /// A NUL-terminated (or unterminated) attribute string, decoded as UTF-8 with repair.
    static func cString(_ bytes: [UInt8]) -> String {
        let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
