import Glibc

/// Errors from the netlink socket layer, carrying the errno that caused them.
struct NetlinkSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The failing call ("socket", "bind", "sendto", "recv", …).
    var operation: String
    /// errno at the time of the failure.
    var code: Int32

    var description: String { "\(operation): \(String(cString: strerror(code))) (errno \(code))" }
}

/// A NETLINK_ROUTE socket descriptor. A plain value on purpose: the monitor thread is the
/// only owner after start-up and closes it exactly once on its way out, so there is no
/// shared mutable state to protect.
struct NetlinkSocket: Sendable {
    /// The file descriptor.
    let descriptor: Int32

    /// The outcome of one receive.
    enum Received: Equatable {
        /// `count` bytes of one datagram are in the buffer.
        case datagram(count: Int)
        /// Nothing to read right now (EAGAIN on a non-blocking read, or the receive timeout).
        case wouldBlock
        /// The kernel dropped messages because the receive buffer was full (ENOBUFS).
        /// Reported once per overflow, not once per lost message, so state must be re-read.
        case overrun
    }

    /// Opens, configures and binds a socket in the calling thread's network namespace.
    /// - Parameters:
    ///   - groups: RTMGRP_* mask to subscribe to (0 for a request/reply socket).
    ///   - extraGroups: group numbers that do not fit the mask, joined with NETLINK_ADD_MEMBERSHIP.
    ///   - receiveBufferSize: SO_RCVBUF(FORCE) in bytes, or nil for the system default.
    ///   - receiveTimeout: SO_RCVTIMEO in seconds for blocking reads, or nil for none.
    static func open(groups: UInt32, extraGroups: [UInt32] = [], receiveBufferSize: Int?,
                     receiveTimeout: Double?) throws -> NetlinkSocket {
        let fd = socket(Netlink.addressFamily, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                        Netlink.protocolRoute)
        guard fd >= 0 else { throw NetlinkSocketError(operation: "socket", code: errno) }
        let sock = NetlinkSocket(descriptor: fd)
        do {
            if let size = receiveBufferSize {
                var value = Int32(clamping: size)
                // SO_RCVBUFFORCE passes rmem_max when privileged; SO_RCVBUF is the fallback.
                if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &value, socklen_t(MemoryLayout<Int32>.size)) != 0,
                   setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                    throw NetlinkSocketError(operation: "setsockopt(SO_RCVBUF)", code: errno)
                }
            }
            if let seconds = receiveTimeout {
                var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
                if setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) != 0 {
                    throw NetlinkSocketError(operation: "setsockopt(SO_RCVTIMEO)", code: errno)
                }
            }
            // struct sockaddr_nl { sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid; __u32 nl_groups; }
            // built byte by byte because Glibc's module does not export it. nl_pid 0 lets
            // the kernel assign a unique port id.
            var address = [UInt8]()
            address.appendHostOrder(UInt16(Netlink.addressFamily))
            address.appendHostOrder(UInt16(0))
            address.appendHostOrder(UInt32(0))
            address.appendHostOrder(groups)
            let bound = address.withUnsafeBytes { raw -> Int32 in
                guard let base = raw.baseAddress else { return -1 }
                return bind(fd, base.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            guard bound == 0 else { throw NetlinkSocketError(operation: "bind", code: errno) }
            for group in extraGroups {
                var number = group
                // Best effort: an older kernel without the group still gives correct results,
                // only later (on the next other event).
                _ = setsockopt(fd, Netlink.socketLevel, Netlink.addMembership, &number,
                               socklen_t(MemoryLayout<UInt32>.size))
            }
        } catch {
            sock.close()
            throw error
        }
        return sock
    }

    /// Sends one request to the kernel (port 0).
    func send(_ bytes: [UInt8]) throws {
        var kernel = [UInt8]()
        kernel.appendHostOrder(UInt16(Netlink.addressFamily))
        kernel.append(contentsOf: repeatElement(0, count: 10))
        let sent = bytes.withUnsafeBytes { payload in
            kernel.withUnsafeBytes { address -> Int in
                guard let base = address.baseAddress else { return -1 }
                return sendto(descriptor, payload.baseAddress, payload.count, 0,
                              base.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
            }
        }
        guard sent == bytes.count else {
            throw NetlinkSocketError(operation: "sendto", code: sent < 0 ? errno : EMSGSIZE)
        }
    }

    /// Receives one datagram into `buffer`, growing it when the datagram is larger
    /// (MSG_PEEK | MSG_TRUNC reports the real size without consuming it).
    func receive(into buffer: inout [UInt8], blocking: Bool) throws -> Received {
        let baseFlags = blocking ? Int32(0) : Int32(MSG_DONTWAIT)
        // Bounded: at most one retry after growing, plus EINTR retries capped at 16.
        for _ in 0 ..< 16 {
            let peeked = buffer.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress, $0.count, baseFlags | Int32(MSG_PEEK) | Int32(MSG_TRUNC))
            }
            if peeked < 0 {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return .wouldBlock
                case ENOBUFS: return .overrun
                case let code: throw NetlinkSocketError(operation: "recv", code: code)
                }
            }
            if peeked > buffer.count {
                buffer = [UInt8](repeating: 0, count: min(peeked, 1 << 24))
            }
            let received = buffer.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if received < 0 {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return .wouldBlock
                case ENOBUFS: return .overrun
                case let code: throw NetlinkSocketError(operation: "recv", code: code)
                }
            }
            return .datagram(count: received)
        }
        return .wouldBlock
    }

    /// Closes the descriptor. Called once, by the owner.
    func close() {
        _ = Glibc.close(descriptor)
    }
}
