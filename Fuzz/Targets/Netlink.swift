// Target: the netlink message parser (Sources/Reachability/NetlinkMessageParser.swift): a
// datagram as the kernel would send it. The first byte chooses how many of the bytes count as
// received. Properties: every message's payload is inside the datagram and exactly as long as
// its header says; re-serialising the messages gives the datagram back (modulo the padding of
// the last one); link, route and error decoding accept or throw, never read out of bounds.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNetlink(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let shortening = Int(input.byte())
    let datagram = input.rest()
    let count = shortening < 200 ? datagram.count : max(0, datagram.count - (shortening - 200))
    guard let messages = try? NetlinkMessageParser.messages(in: datagram, count: count) else { return 0 }
    var offset = 0
    for message in messages {
        let serialized = message.serialized()
        let length = Netlink.headerSize + message.payload.count
        fuzzCheck(offset + length <= count, "message at \(offset) of \(length) bytes beyond \(count)")
        fuzzCheck(Array(datagram[offset..<(offset + length)]) == Array(serialized[0..<length]), "message at \(offset) differs")
        offset += min(Netlink.align(length), count - offset)
        switch message.type {
        case Netlink.newLink, Netlink.deleteLink:
            if let link = try? NetlinkMessageParser.link(from: message) { _ = link.name; _ = link.kind }
        case Netlink.newRoute, Netlink.deleteRoute:
            if let route = try? NetlinkMessageParser.route(from: message) {
                _ = route.destination?.description
                _ = route.gateway?.description
                _ = route.preferredSource?.description
            }
        case Netlink.error:
            _ = try? NetlinkMessageParser.errorCode(of: message)
        default:
            if let attributes = try? NetlinkMessageParser.attributes(in: message.payload, from: 0) {
                var rebuilt: [UInt8] = []
                for attribute in attributes { attribute.append(to: &rebuilt) }
                fuzzCheck(rebuilt.count >= message.payload.count, "attributes shrank")
            }
        }
    }
    fuzzCheck(offset == count, "parsed \(offset) of \(count) bytes")
    return 0
}
