internal import COpenSSL
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Who a request speaks for, as far as the response cache can tell: its `Authorization`,
/// `Proxy-Authorization` and `Cookie` values as sent (the caller's `Cookie` header, or the
/// jar's cookies libcurl adds), the URL's user and password, and the client certificate the
/// manager presents to servers that ask (mutual TLS identifies the user as surely as a
/// token). A stored response is reused only for a request with the same identity, so one
/// user's answer never reaches another.
///
/// The material holds secrets: it is only ever kept in memory while the request runs. An
/// entry remembers a salted SHA-256 of it (``tag()``), never the values.
struct CacheIdentity: Sendable, Equatable {
    /// Lower-cased names of the request fields the identity is made of. A `Vary` on one of
    /// them needs no value recorded: the identity already has to match.
    static let fieldNames: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// What identifies the request; empty for an anonymous one.
    private let material: [UInt8]

    /// An anonymous request: no credentials, no cookies.
    static let anonymous = CacheIdentity(material: [])

    private init(material: [UInt8]) { self.material = material }

    /// The identity of `request` (its header fields as they will be sent).
    ///
    /// - Parameter jarCookies: The jar's cookies when libcurl's cookie engine adds them to this
    ///   request (nil when it adds none). libcurl cannot be asked which cookies it will send,
    ///   so every unexpired cookie whose domain could match the host counts, whatever its path
    ///   or `Secure` flag: more than libcurl sends at most costs a miss, never a wrong answer.
    /// - Parameter clientCertificate: The certificate the manager presents when a server asks
    ///   (`SessionConfiguration.clientCertificate`). It counts whether or not this server asks:
    ///   that is only known during the handshake, and counting it at most costs a miss.
    /// - Parameter proxyIdentity: Whom the manager's proxy knows its requests as
    ///   (`SessionEngine.proxyIdentity(of:environmentNamesProxy:)`): libcurl sends that
    ///   credential as `Proxy-Authorization` itself, so the request's fields do not show it.
    /// - Parameter route: Where the request goes when not to its URL's host
    ///   (`SessionEngine.route(of:in:)`: a Unix socket, host overrides). Not a user's identity,
    ///   but it narrows an answer to the managers that ask the same server, as the identity does.
    init(
        request: URLRequest, jarCookies: [Cookie]?, clientCertificate: ClientCertificate? = nil, proxyIdentity: String? = nil,
        route: String? = nil
    ) {
        var material: [UInt8] = []
        func append(_ label: String, _ value: String?) {
            guard let value else { return }
            // Length-prefixed: no choice of values can make two identities' bytes equal.
            for part in [label, value] {
                withUnsafeBytes(of: UInt64(part.utf8.count).littleEndian) { material.append(contentsOf: $0) }
                material.append(contentsOf: part.utf8)
            }
        }
        append("authorization", request.value(forHTTPHeaderField: "Authorization"))
        append("proxy-authorization", request.value(forHTTPHeaderField: "Proxy-Authorization"))
        append("proxy-identity", proxyIdentity)
        append("route", route)
        append("cookie", request.value(forHTTPHeaderField: "Cookie"))
        append("user", request.url?.user)
        append("password", request.url?.password)
        switch clientCertificate {
        case .pemFiles(let certificate, let privateKey, _)?:
            // The files' paths, not their bytes: read at every lookup they would cost a read
            // of the disk; a certificate renewed in place is the same user's.
            append("client-certificate-file", certificate.path)
            append("client-key-file", privateKey.path)
        case .pem(let certificate, _, _)?:
            // The certificate (public): it names whom the server sees.
            append("client-certificate", certificate.base64EncodedString())
        case nil:
            break
        }
        if let jarCookies, let host = request.url?.host?.lowercased() {
            let name = host.hasSuffix(".") ? String(host.dropLast()) : host
            let sent = jarCookies.filter { name == $0.domain || name.hasSuffix("." + $0.domain) }
                .sorted { ($0.domain, $0.path, $0.name) < ($1.domain, $1.path, $1.name) }
            for cookie in sent {
                append("jar-cookie", "\(cookie.domain)\t\(cookie.path)\t\(cookie.isSecure)\t\(cookie.name)=\(cookie.value)")
            }
        }
        self.material = material
    }

    /// Whether the request carries no credentials and no cookies.
    var isAnonymous: Bool { material.isEmpty }

    /// Whether the request carries credentials for the origin (RFC 9111 §3.5 restricts what
    /// a shared cache stores for them): an `Authorization` field or a URL user.
    static func isAuthorized(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") != nil || request.url?.user != nil
    }

    /// What an entry remembers of this identity: nil when anonymous, else a random salt and
    /// the SHA-256 of salt and material, in hex ("salt.digest"). Salted, so equal credentials
    /// leave no equal traces and a guessed password cannot be checked against a table.
    func tag() -> String? {
        guard !material.isEmpty else { return nil }
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        guard let digest = Self.sha256(salt + material) else { return nil }
        return Self.hex(salt) + "." + Self.hex(digest)
    }

    /// A name for this identity that is equal for equal material within this process: the
    /// SHA-256 of one salt drawn per process and the material, in hex; nil when anonymous. It
    /// says nothing of the values, and nothing from one run to the next. Should hashing fail,
    /// a new random name each time: nothing is shared rather than the wrong thing.
    func processDigest() -> String? {
        guard !material.isEmpty else { return nil }
        guard let digest = Self.sha256(Self.processSalt + material) else { return UUID().uuidString }
        return Self.hex(digest)
    }

    /// The salt of ``processDigest()``, drawn once per process.
    private static let processSalt: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }()

    /// Whether an entry tagged `tag` was stored for this identity.
    func matches(_ tag: String?) -> Bool {
        guard let tag else { return material.isEmpty }
        guard !material.isEmpty else { return false }
        let parts = tag.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let salt = Self.bytes(fromHex: parts[0]), salt.count == 16,
            let digest = Self.sha256(salt + material)
        else { return false }
        return Self.hex(digest) == parts[1]
    }

    /// SHA-256 of `bytes`; nil should OpenSSL fail.
    static func sha256(_ bytes: [UInt8]) -> [UInt8]? {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { raw in EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil) }
        guard ok == 1, length == 32 else { return nil }
        return Array(digest.prefix(32))
    }

    /// `bytes` in lower-case hex.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func bytes(fromHex text: Substring) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
