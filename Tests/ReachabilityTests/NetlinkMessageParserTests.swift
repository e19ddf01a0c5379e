import XCTest
import Glibc
@testable import Reachability

/// The parser on crafted bytes: valid messages decode; truncated, oversized and zero
/// lengths throw instead of reading out of bounds.
final class NetlinkMessageParserTests: XCTestCase {
    /// An RTM_NEWLINK for index 7, "crl0", ARPHRD_ETHER, UP|RUNNING, kind "veth".
    static func linkMessage(sequence: UInt32 = 1) -> NetlinkMessage {
        var payload: [UInt8] = [0, 0]
        payload.appendHostOrder(UInt16(1))
        payload.appendHostOrder(Int32(7))
        payload.appendHostOrder(UInt32(0x41))
        payload.appendHostOrder(UInt32(0))
        NetlinkAttribute(type: 3, value: Array("crl0".utf8) + [0]).append(to: &payload)
        var info: [UInt8] = []
        NetlinkAttribute(type: 1, value: Array("veth".utf8) + [0]).append(to: &info)
        NetlinkAttribute(type: 18 | 0x8000, value: info).append(to: &payload)  // NLA_F_NESTED set
        return NetlinkMessage(type: Netlink.newLink, flags: Netlink.flagMulti, sequence: sequence, portID: 0, payload: payload)
    }

    /// An RTM_NEWROUTE reply for 198.51.100.7 via 198.18.0.1 on index 7.
    static func routeMessage() -> NetlinkMessage {
        var payload: [UInt8] = [2, 32, 0, 0, 254, 3, 0, 1]
        payload.appendHostOrder(UInt32(0))
        NetlinkAttribute(type: 1, value: [198, 51, 100, 7]).append(to: &payload)
        NetlinkAttribute(type: 4, value: withUnsafeBytes(of: Int32(7)) { Array($0) }).append(to: &payload)
        NetlinkAttribute(type: 5, value: [198, 18, 0, 1]).append(to: &payload)
        NetlinkAttribute(type: 7, value: [198, 18, 0, 2]).append(to: &payload)
        NetlinkAttribute(type: 15, value: withUnsafeBytes(of: UInt32(254)) { Array($0) }).append(to: &payload)
        return NetlinkMessage(type: Netlink.newRoute, flags: 0, sequence: 2, portID: 0, payload: payload)
    }

    func testValidMessagesRoundTrip() throws {
        let datagram = Self.linkMessage().serialized() + Self.routeMessage().serialized()
        let messages = try NetlinkMessageParser.messages(in: datagram)
        XCTAssertEqual(messages, [Self.linkMessage(), Self.routeMessage()])

        let link = try NetlinkMessageParser.link(from: messages[0])
        XCTAssertEqual(link, LinkMessage(index: 7, name: "crl0", hardwareType: 1, flags: 0x41, kind: "veth"))
        XCTAssertTrue(link.isUsable)

        let route = try NetlinkMessageParser.route(from: messages[1])
        XCTAssertEqual(route.type, Netlink.routeUnicast)
        XCTAssertEqual(route.outputInterface, 7)
        XCTAssertEqual(route.gateway?.description, "198.18.0.1")
        XCTAssertEqual(route.preferredSource?.description, "198.18.0.2")
        XCTAssertEqual(route.destination?.description, "198.51.100.7")
        XCTAssertEqual(route.table, 254)
        XCTAssertTrue(route.carriesTraffic)
    }

    func testIPv6GatewayViaRTAVIAAndErrorMessages() throws {
        var payload: [UInt8] = [2, 32, 0, 0, 254, 3, 0, 1]
        payload.appendHostOrder(UInt32(0))
        var via: [UInt8] = []
        via.appendHostOrder(UInt16(10))
        via += [0xFE, 0x80] + Array(repeating: 0, count: 13) + [1]
        NetlinkAttribute(type: 18, value: via).append(to: &payload)
        let route = try NetlinkMessageParser.route(from: NetlinkMessage(type: 24, flags: 0, sequence: 1, portID: 0, payload: payload))
        XCTAssertEqual(route.gateway?.description, "fe80::1")

        var error: [UInt8] = []
        error.appendHostOrder(Int32(-101))
        XCTAssertEqual(try NetlinkMessageParser.errorCode(of: NetlinkMessage(type: 2, flags: 0, sequence: 1, portID: 0, payload: error)), -101)
        XCTAssertThrowsError(try NetlinkMessageParser.errorCode(of: NetlinkMessage(type: 2, flags: 0, sequence: 1, portID: 0, payload: [1, 2])))
    }

    func testMalformedAddressAttributesAreIgnored() throws {
        var payload: [UInt8] = [2, 32, 0, 0, 254, 3, 0, 1]
        payload.appendHostOrder(UInt32(0))
        NetlinkAttribute(type: 5, value: [198, 18, 0]).append(to: &payload)       // 3-byte IPv4 gateway
        NetlinkAttribute(type: 4, value: [7]).append(to: &payload)                // 1-byte interface index
        NetlinkAttribute(type: 18, value: [10]).append(to: &payload)              // RTA_VIA without address
        let route = try NetlinkMessageParser.route(from: NetlinkMessage(type: 24, flags: 0, sequence: 1, portID: 0, payload: payload))
        XCTAssertNil(route.gateway)
        XCTAssertNil(route.outputInterface)
    }

    func testZeroLengthHeaderThrows() {
        var datagram = Self.linkMessage().serialized()
        datagram.replaceSubrange(0 ..< 4, with: [0, 0, 0, 0])
        XCTAssertThrowsError(try NetlinkMessageParser.messages(in: datagram)) { error in
            XCTAssertEqual(error as? NetlinkParseError, .invalidLength(offset: 0, length: 0))
        }
    }

    func testOversizedHeaderLengthThrows() {
        var datagram = Self.linkMessage().serialized()
        Swift.withUnsafeBytes(of: UInt32(datagram.count + 1)) { datagram.replaceSubrange(0 ..< 4, with: $0) }
        XCTAssertThrowsError(try NetlinkMessageParser.messages(in: datagram))
        Swift.withUnsafeBytes(of: UInt32.max) { datagram.replaceSubrange(0 ..< 4, with: $0) }
        XCTAssertThrowsError(try NetlinkMessageParser.messages(in: datagram))
    }

    func testTruncatedDatagramsThrowAtEveryCut() {
        let datagram = Self.linkMessage().serialized() + Self.routeMessage().serialized()
        let firstLength = Self.linkMessage().serialized().count
        for cut in 0 ..< datagram.count where cut != 0 && cut != firstLength {
            XCTAssertThrowsError(try NetlinkMessageParser.messages(in: Array(datagram.prefix(cut))), "cut at \(cut)")
            // The same cut expressed as a received byte count inside a larger buffer.
            XCTAssertThrowsError(try NetlinkMessageParser.messages(in: datagram, count: cut), "count \(cut)")
        }
        XCTAssertEqual(try NetlinkMessageParser.messages(in: datagram, count: 0), [])
        XCTAssertEqual(try NetlinkMessageParser.messages(in: datagram, count: firstLength).count, 1)
        XCTAssertEqual(try NetlinkMessageParser.messages(in: datagram, count: datagram.count + 100).count, 2,
                       "a count beyond the buffer is clamped")
    }

    func testAttributeLengthsAreChecked() {
        let valid = Self.linkMessage()
        // Attribute length 0, 3 (smaller than its header) and one past the payload.
        for badLength in [UInt16(0), 3, UInt16(valid.payload.count - 16 + 1), UInt16.max] {
            var message = valid
            Swift.withUnsafeBytes(of: badLength) { message.payload.replaceSubrange(16 ..< 18, with: $0) }
            XCTAssertThrowsError(try NetlinkMessageParser.link(from: message), "attribute length \(badLength)")
        }
        // A truncated attribute header (two bytes after ifinfomsg).
        var short = valid
        short.payload = Array(valid.payload.prefix(18))
        XCTAssertThrowsError(try NetlinkMessageParser.link(from: short))
        // A nested attribute whose inner length lies.
        var nested = valid
        let nestedStart = nested.payload.count - 12 // the inner rtattr inside IFLA_LINKINFO
        Swift.withUnsafeBytes(of: UInt16(200)) { nested.payload.replaceSubrange(nestedStart ..< nestedStart + 2, with: $0) }
        XCTAssertThrowsError(try NetlinkMessageParser.link(from: nested))
    }

    func testFamilyHeadersMustFit() {
        for size in 0 ..< 16 {
            let message = NetlinkMessage(type: 16, flags: 0, sequence: 0, portID: 0, payload: Array(repeating: 0, count: size))
            XCTAssertThrowsError(try NetlinkMessageParser.link(from: message), "ifinfomsg of \(size) bytes")
            if size < 12 {
                XCTAssertThrowsError(try NetlinkMessageParser.route(from: message), "rtmsg of \(size) bytes")
            }
        }
    }

    func testRandomBytesNeverCrash() {
        // Deterministic xorshift generator so a failure is reproducible.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let seed = Self.linkMessage().serialized() + Self.routeMessage().serialized()
        var parsed = 0
        for _ in 0 ..< 20_000 {
            var bytes = seed
            // Mutate a few bytes, favouring the length fields, and sometimes truncate.
            for _ in 0 ..< Int(next() % 4) + 1 {
                let index = Int(next() % UInt64(bytes.count))
                bytes[index] = UInt8(truncatingIfNeeded: next())
            }
            if next() % 3 == 0 { bytes = Array(bytes.prefix(Int(next() % UInt64(bytes.count + 1)))) }
            if let messages = try? NetlinkMessageParser.messages(in: bytes) {
                for message in messages {
                    _ = try? NetlinkMessageParser.link(from: message)
                    _ = try? NetlinkMessageParser.route(from: message)
                    _ = try? NetlinkMessageParser.errorCode(of: message)
                    parsed += 1
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
    }

    func testByteReaderBounds() {
        let reader = ByteReader(bytes: [1, 2, 3, 4])
        XCTAssertNotNil(reader.read(UInt32.self, at: 0))
        XCTAssertNil(reader.read(UInt32.self, at: 1))
        XCTAssertNil(reader.read(UInt8.self, at: -1))
        XCTAssertNil(reader.read(UInt8.self, at: Int.max))
        XCTAssertNil(reader.slice(at: 2, count: 3))
        XCTAssertNil(reader.slice(at: 1, count: Int.max))
        XCTAssertEqual(reader.slice(at: 4, count: 0), [])
        XCTAssertNil(ByteReader(bytes: []).read(UInt16.self, at: 0))
    }

    func testIPAddressValidation() {
        XCTAssertNil(IPAddress(family: 2, bytes: [1, 2, 3]))
        XCTAssertNil(IPAddress(family: 10, bytes: [1, 2, 3, 4]))
        XCTAssertNil(IPAddress(family: 99, bytes: [1, 2, 3, 4]))
        XCTAssertEqual(IPAddress(family: 2, bytes: [0, 0, 0, 0])?.isUnspecified, true)
    }

    /// A kernel that does not route a family (booted with `ipv6.disable=1`: EOPNOTSUPP for an
    /// IPv6 lookup) has no route to it: taken for a broken socket, the error threw the whole
    /// evaluation away, and no status was published while IPv4 was down. (A namespace cannot
    /// take IPv6 away from its kernel: this checks the classification the evaluator applies.)
    func testAFamilyTheKernelDoesNotRouteMeansNoRoute() {
        for code in [EOPNOTSUPP, EAFNOSUPPORT, ENETUNREACH] {
            XCTAssertTrue(PathEvaluator.noRouteErrors.contains(code), "errno \(code)")
        }
        XCTAssertFalse(PathEvaluator.noRouteErrors.contains(ENOBUFS), "an overrun is a resynchronisation, not a verdict")
    }

    /// A bridge port's link notifications (`ifi_family` AF_BRIDGE) leave the device's entry
    /// alone: the RTM_DELLINK a port leaving its bridge sends dropped the device from the table.
    func testABridgePortsLinkMessagesLeaveTheDeviceAlone() throws {
        let socket = try NetlinkSocket.open(groups: 0, receiveBufferSize: nil, receiveTimeout: 1)
        let evaluator = PathEvaluator(client: RtnetlinkClient(socket: socket), classifier: InterfaceClassifier(sysfsRoot: "/nonexistent"))
        func linkMessage(_ type: UInt16, family: UInt8) -> NetlinkMessage {
            var payload: [UInt8] = [family, 0]
            payload.appendHostOrder(UInt16(1))  // ARPHRD_ETHER
            payload.appendHostOrder(Int32(4242))
            payload.appendHostOrder(UInt32(IFF_UP | IFF_RUNNING))
            payload.appendHostOrder(UInt32(0))
            return NetlinkMessage(type: type, flags: 0, sequence: 0, portID: 0, payload: payload)
        }
        _ = try evaluator.apply(linkMessage(Netlink.newLink, family: UInt8(AF_UNSPEC)))
        XCTAssertNotNil(evaluator.links[4242])
        _ = try evaluator.apply(linkMessage(Netlink.deleteLink, family: UInt8(AF_BRIDGE)))
        XCTAssertNotNil(evaluator.links[4242], "a bridge port's notification removed the device")
        _ = try evaluator.apply(linkMessage(Netlink.deleteLink, family: UInt8(AF_UNSPEC)))
        XCTAssertNil(evaluator.links[4242])
    }
}
