import Glibc

/// Resolves a host name with getaddrinfo (files, DNS, … as nsswitch.conf says).
enum DomainResolver {
    /// At most this many addresses are checked per domain, to bound the route look-ups.
    static let maximumAddresses = 8

    /// Whether `domain` can be a host name at all (used by `init?(domain:)`).
    static func isPlausibleHostName(_ domain: String) -> Bool {
        guard !domain.isEmpty, domain.utf8.count <= 253 else { return false }
        return !domain.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F || $0 == "/" }
    }

    /// The name's addresses in resolver order without duplicates; empty when it does not resolve.
    /// Blocking: called on a resolver thread of its own, never on the monitor thread.
    static func resolve(_ domain: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(domain, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var node = list
        // Bounded by the list getaddrinfo returned and by maximumAddresses.
        while let current = node, addresses.count < maximumAddresses {
            node = current.pointee.ai_next
            guard let raw = current.pointee.ai_addr else { continue }
            let address: IPAddress?
            switch current.pointee.ai_family {
            case AF_INET where current.pointee.ai_addrlen >= socklen_t(MemoryLayout<sockaddr_in>.size):
                address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { IPAddress($0.pointee) }
            case AF_INET6 where current.pointee.ai_addrlen >= socklen_t(MemoryLayout<sockaddr_in6>.size):
                address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { IPAddress($0.pointee) }
            default:
                address = nil
            }
            if let address, !addresses.contains(address) { addresses.append(address) }
        }
        return addresses
    }
}
