/// Whether a destination, the default route or an interface can currently carry traffic,
/// and over what kind of link (AFNetworking's `AFNetworkReachabilityStatus`).
public enum NetworkReachabilityStatus: Sendable, Hashable {
    /// Not determined yet (before the first kernel answer, or before monitoring starts).
    case unknown
    /// No usable route or interface.
    case notReachable
    /// Reachable over a cellular (WWAN) interface.
    case reachableViaWWAN
    /// Reachable over a Wi-Fi interface.
    case reachableViaWiFi
    /// Reachable over an Ethernet-type link, or over any other non-Wi-Fi, non-WWAN link
    /// (loopback, tunnels); `NetworkPath.interfaceKind` tells which.
    case reachableViaEthernet

    /// Reachable by any kind of link.
    public var isReachable: Bool {
        switch self {
        case .reachableViaWWAN, .reachableViaWiFi, .reachableViaEthernet: true
        case .unknown, .notReachable: false
        }
    }

    /// Reachable over a cellular interface.
    public var isReachableViaWWAN: Bool { self == .reachableViaWWAN }

    /// Reachable over a Wi-Fi interface. Strictly Wi-Fi: for "reachable and not metered",
    /// test `isReachable && !isReachableViaWWAN`.
    public var isReachableViaWiFi: Bool { self == .reachableViaWiFi }

    /// A human-readable name for the status (AFNetworking's `AFStringFromNetworkReachabilityStatus`).
    public var localizedDescription: String {
        switch self {
        case .unknown: "Unknown"
        case .notReachable: "Not Reachable"
        case .reachableViaWWAN: "Reachable via WWAN"
        case .reachableViaWiFi: "Reachable via WiFi"
        case .reachableViaEthernet: "Reachable via Ethernet"
        }
    }
}

extension NetworkReachabilityStatus: CustomStringConvertible {
    /// Same as `localizedDescription`.
    public var description: String { localizedDescription }
}
