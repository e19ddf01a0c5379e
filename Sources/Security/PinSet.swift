import Foundation

/// Public-key pins for the hosts one pattern names: the TLS server of such a host must have
/// at least one of `pins` in its verified chain (see `PinningPolicy`).
///
/// ```swift
/// import Foundation
/// import Security
///
/// let api = PinSet(
///     host: "**.api.example.com",
///     pins: [
///         "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",  // the current key
///         "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=",  // the backup key, kept offline
///     ],
///     expires: Date(timeIntervalSinceNow: 180 * 24 * 3600))
/// ```
///
/// Host patterns are compared case-insensitively, a trailing dot ignored, international
/// names as their A-labels (`xn--…`):
/// - `example.com`: that host only (and every name below it with `includeSubdomains`);
/// - `*.example.com`: exactly one label below `example.com` (`a.example.com`, not
///   `a.b.example.com`, not `example.com`);
/// - `**.example.com`: one or more labels below `example.com`, not `example.com` itself;
/// - an IP address (`192.0.2.1`, `::1` or `[::1]`): that address only, never a name.
///
/// A pattern that cannot be read matches no host; a pin that is not `sha256/` followed by
/// the base64 of 32 bytes matches no certificate (``malformedPins`` lists them).
public struct PinSet: Sendable, Hashable, Codable {
    /// The host pattern: an exact name, `*.example.com`, `**.example.com` or an IP address.
    public var host: String
    /// SHA-256 hashes of SubjectPublicKeyInfo, as `sha256/BASE64` (OkHttp's form; what
    /// `curlew pin` and `Certificate.publicKeySHA256` give). Backup pins are simply more pins.
    public var pins: Set<String>
    /// From this moment on the set is neither enforced nor reported (nil: never expires), so
    /// an app that is never updated cannot lock itself out once its pinned keys are retired.
    public var expires: Date?
    /// With an exact host: also every name below it (`example.com` then covers
    /// `a.b.example.com`). With `*.` it widens the pattern to any depth, like `**.`.
    public var includeSubdomains: Bool
    /// Report a failure through `PinningPolicy.report` but let the handshake go on.
    public var reportOnly: Bool

    /// Creates a pin set; see the type's description for the forms of `host` and `pins`.
    public init(host: String, pins: Set<String>, expires: Date? = nil, includeSubdomains: Bool = false, reportOnly: Bool = false) {
        self.host = host
        self.pins = pins
        self.expires = expires
        self.includeSubdomains = includeSubdomains
        self.reportOnly = reportOnly
    }

    /// Whether this set's pattern covers `host` (a URL's host: a name or an IP address).
    public func matches(host candidate: String) -> Bool {
        HostPattern(host, includeSubdomains: includeSubdomains).matches(candidate)
    }

    /// Whether the set has expired at `date` (`expires` is at or before it).
    public func isExpired(at date: Date = .now) -> Bool {
        guard let expires else { return false }
        return expires <= date
    }

    /// The pins that can never match: not `sha256/` followed by the base64 of 32 bytes.
    public var malformedPins: Set<String> { pins.filter { Self.digest(ofPin: $0) == nil } }

    /// The `sha256/BASE64` pin of a certificate's public key (SPKI).
    public static func pin(of certificate: Certificate) -> String {
        "sha256/" + certificate.publicKeySHA256
    }

    /// The 32 digest bytes of a well-formed pin, nil for a malformed one.
    static func digest(ofPin pin: String) -> Data? {
        guard pin.hasPrefix("sha256/"), let digest = Data(base64Encoded: String(pin.dropFirst(7))), digest.count == 32
        else { return nil }
        return digest
    }

    /// The digests of the well-formed pins.
    var digests: Set<Data> { Set(pins.compactMap(Self.digest(ofPin:))) }

    private enum CodingKeys: String, CodingKey {
        case host, pins, expires, includeSubdomains, reportOnly
    }

    /// Decodes a set; `expires`, `includeSubdomains` and `reportOnly` may be left out
    /// (their defaults: never, false, false), so a hand-written configuration stays short.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        host = try container.decode(String.self, forKey: .host)
        pins = try container.decode(Set<String>.self, forKey: .pins)
        expires = try container.decodeIfPresent(Date.self, forKey: .expires)
        includeSubdomains = try container.decodeIfPresent(Bool.self, forKey: .includeSubdomains) ?? false
        reportOnly = try container.decodeIfPresent(Bool.self, forKey: .reportOnly) ?? false
    }

    /// Encodes every field (`expires` only when set).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(host, forKey: .host)
        try container.encode(pins.sorted(), forKey: .pins)
        try container.encodeIfPresent(expires, forKey: .expires)
        try container.encode(includeSubdomains, forKey: .includeSubdomains)
        try container.encode(reportOnly, forKey: .reportOnly)
    }
}
