import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a manager keeps cookies: libcurl's RFC 6265 cookie engine.
///
/// libcurl matches cookies to each request by domain, path and the `Secure` flag (a `Secure`
/// cookie never goes over plain `http://`, except to `localhost`, `127.0.0.1` and `::1`, which
/// libcurl, like browsers, treats as secure contexts), stores `Set-Cookie` headers of every
/// response, redirects included, and refuses cookies for public suffixes (`Domain=co.uk`,
/// `Domain=com`) with the public-suffix list of libpsl.
///
/// Every manager has a jar of its own by default (``URLSessionManager/cookieJar``). Give two
/// managers the same jar through ``SessionConfiguration/cookieJar`` and they see each other's
/// cookies; they then also share one DNS cache and one TLS session cache (libcurl keeps all
/// three in one share handle). That is safe across different security policies: a TLS session
/// verified under another manager's policy is refused before any request byte is sent and the
/// request is retried on a fresh connection, at the cost of that extra handshake.
///
/// The jar's methods may be called from any thread, also while transfers run; they are
/// serialised with each other and with libcurl's own use of the store.
///
/// ```swift
/// let jar = CookieJar()
/// try jar.add(setCookie: "session=abc; Path=/; HttpOnly", for: URL(string: "https://example.com/login")!)
/// var configuration = SessionConfiguration.default
/// configuration.cookieJar = jar
/// ```
public final class CookieJar: Sendable {
    /// The share; nil when libcurl could not create it (see ``isAvailable``).
    let share: CookieShare?

    /// Creates an empty jar.
    public init() {
        share = CookieShare(sharesHSTS: false)
    }

    /// A jar for one manager, whose share also holds that manager's HSTS cache (libcurl 7.88
    /// cannot share HSTS between threads: only a jar no other manager is given may hold it).
    init(holdingHSTSForOneManager: Bool) {
        share = CookieShare(sharesHSTS: holdingHSTSForOneManager)
    }

    /// Whether libcurl's cookie store could be created. When false (libcurl unusable or out
    /// of memory), managers given the jar send and store no cookies, and the jar's throwing
    /// methods throw ``CookieJarError/unavailable(_:)``.
    public var isAvailable: Bool { share != nil }

    /// Runs `body` on the store, under the jar's lock.
    private func withStore<T: Sendable>(_ body: (UnsafeMutableRawPointer) -> T) throws(CookieJarError) -> T {
        guard let share else { throw .unavailable("libcurl could not create a cookie store") }
        guard let result = share.withEasyHandle(body) else { throw .unavailable("libcurl could not create an easy handle") }
        return result
    }

    private func storedCookies(_ easy: UnsafeMutableRawPointer, now: Date) -> [Cookie] {
        let lines = CookieShare.cookieLines(easy) ?? []
        return lines.compactMap { line -> Cookie? in
            guard let cookie = try? NetscapeCookieFormat.cookie(fromLine: Substring(line)) else { return nil }
            if let expires = cookie.expires, expires <= now { return nil }  // expired, not purged yet
            return cookie
        }
    }

    // MARK: - Reading

    /// Every unexpired cookie, ordered by domain, path and name. Empty when the jar is not
    /// ``isAvailable``. A value whose bytes are not UTF-8 shows U+FFFD here; the store keeps
    /// and sends its bytes, and ``save(to:)`` writes them.
    ///
    /// There is no public "cookies for this URL": libcurl offers no way to ask which cookies it
    /// would send other than sending a request. Only `SessionTask.curlDescription` repeats its
    /// matching (`cookies(matching:)`), to write them as `-b`; transfers never use that copy.
    public var cookies: [Cookie] {
        let now = Date()
        let all = (try? withStore { easy in storedCookies(easy, now: now) }) ?? []
        return all.sorted { ($0.domain, $0.path, $0.name) < ($1.domain, $1.path, $1.name) }
    }

    // MARK: - Adding

    /// Stores `cookie`, replacing the stored one with the same name, domain, subdomain flag
    /// and path. A cookie whose expiry date has passed removes that stored one instead.
    ///
    /// - Throws: ``CookieJarError/invalidCookie(_:)`` for an empty name, a control character,
    ///   tab or `;` in the name or value, a name plus value over 4096 bytes, an empty domain, a
    ///   path not starting with `/`, or a broken `__Secure-`/`__Host-` prefix rule;
    ///   ``CookieJarError/unavailable(_:)``.
    public func add(_ cookie: Cookie) throws(CookieJarError) {
        try add([cookie])
    }

    /// Stores several cookies: all of them, or (when one is invalid) none.
    ///
    /// - Throws: As ``add(_:)-(Cookie)``, naming the first invalid cookie.
    public func add(_ cookies: [Cookie]) throws(CookieJarError) {
        var lines: [String] = []
        for cookie in cookies { lines.append(try NetscapeCookieFormat.line(for: cookie)) }
        guard try withStore({ easy in CookieShare.addLines(lines, easy) }) else {
            throw .unavailable("libcurl refused the cookies (out of memory)")
        }
    }

    /// Stores the cookie a `Set-Cookie` response header from `url` sets, with the checks
    /// libcurl applies to responses: the `Domain` must contain the URL's host and must not be
    /// a public suffix; `Secure` needs an `https` URL (or localhost); without `Domain` the
    /// cookie is host-only; without `Path` it takes the URL's directory (RFC 6265 §5.1.4); and
    /// from an origin that is not secure, a cookie that is not `Secure` may not replace a
    /// `Secure` one of the same name, domain and path (RFC 6265bis "Strict Secure", as libcurl).
    ///
    /// - Parameters:
    ///   - header: The header's value, e.g. `"id=42; Max-Age=3600; Path=/"`; a leading
    ///     `Set-Cookie:` is accepted.
    ///   - url: The URL of the response that set it.
    /// - Returns: The cookie as stored.
    /// - Throws: ``CookieJarError/rejected(_:)``, ``CookieJarError/invalidURL(_:)``,
    ///   ``CookieJarError/unavailable(_:)``.
    @discardableResult
    public func add(setCookie header: String, for url: URL) throws(CookieJarError) -> Cookie {
        let cookie = try SetCookieParser.cookie(from: header, for: url)
        if !cookie.isSecure, !SetCookieParser.isSecureContext(url),
            SetCookieParser.overlaysSecureCookie(cookie, in: try withStore { storedCookies($0, now: Date()) })
        {
            throw .rejected("'\(cookie.name)' would overlay a Secure cookie of that name, from '\(url.absoluteString)', which is not a secure origin")
        }
        try add(cookie)
        return cookie
    }

    // MARK: - Removing

    /// Removes the cookies named `name` whose domain is `domain` (host-only or not), and whose
    /// path is `path` when one is given. Returns how many were removed (0 when the jar is not
    /// ``isAvailable``).
    @discardableResult
    public func remove(name: String, domain: String, path: String? = nil) -> Int {
        let domain = Cookie(name: name, value: "", domain: domain).domain
        let now = Date()
        let removed = try? withStore { easy -> Int in
            // libcurl has no "delete one cookie": an expired copy replaces it (same name,
            // domain, subdomain flag and path) and libcurl purges it.
            let matches = storedCookies(easy, now: now).filter {
                $0.name == name && $0.domain == domain && (path == nil || $0.path == path)
            }
            let lines = matches.compactMap { cookie -> String? in
                var expired = cookie
                expired.expires = Date(timeIntervalSince1970: 1)
                return try? NetscapeCookieFormat.line(for: expired)
            }
            return CookieShare.addLines(lines, easy) ? lines.count : 0
        }
        return removed ?? 0
    }

    /// Removes every cookie (`CURLOPT_COOKIELIST "ALL"`). No-op when not ``isAvailable``.
    public func removeAll() {
        _ = try? withStore { easy in CookieShare.addLines(["ALL"], easy) }
    }

    /// Removes the session cookies, those without an expiry date (`CURLOPT_COOKIELIST "SESS"`),
    /// as a browser does when it quits. No-op when not ``isAvailable``.
    public func removeSessionCookies() {
        _ = try? withStore { easy in CookieShare.addLines(["SESS"], easy) }
    }

    // MARK: - Files

    /// The largest cookie file ``load(from:)`` reads.
    public static let maximumFileSize = 64 << 20

    /// Adds the cookies of a file in curl's Netscape format (what ``save(to:)`` and the curl
    /// tool's `-c` write). Blank lines and `#` comments are skipped; `#HttpOnly_` lines are
    /// HttpOnly cookies. Cookies in the file replace stored ones with the same name, domain,
    /// subdomain flag and path; expired ones are skipped (they leave a stored cookie alone).
    ///
    /// The whole file is checked first: if any line is not a valid seven-field cookie line,
    /// nothing is added. A line that is not UTF-8 (curl writes a value's bytes as its server
    /// sent them) is read as Latin-1 and stored byte for byte.
    ///
    /// - Throws: ``CookieJarError/fileNotReadable(path:reason:)`` (missing, unreadable, a
    ///   directory, not a regular file — a FIFO, a device, `/dev/stdin` —, over
    ///   ``maximumFileSize``), ``CookieJarError/malformedFile(path:line:reason:)``,
    ///   ``CookieJarError/unavailable(_:)``.
    public func load(from file: URL) throws(CookieJarError) {
        let path = file.path
        let data = try Self.read(file)
        let now = Date()
        var lines: [[CChar]] = []
        var number = 0
        for var rawLine in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if rawLine.last == UInt8(ascii: "\r") { rawLine = rawLine.dropLast() }
            // A line that is not UTF-8 (curl writes a cookie's bytes as its server sent them,
            // Latin-1 say) is read byte for byte: checked as Latin-1 text, stored as the bytes.
            let utf8 = String(validating: rawLine, as: UTF8.self)
            let text = utf8 ?? Self.latin1Text(rawLine)
            let line: String
            do throws(CookieJarError) {
                guard let cookie = try NetscapeCookieFormat.cookie(fromLine: Substring(text)) else { continue }
                // An expired line is a stale copy: handed to libcurl it would delete the live
                // cookie of the same name the jar got since (that is how libcurl removes one).
                if let expires = cookie.expires, expires <= now { continue }
                line = try NetscapeCookieFormat.line(for: cookie)
            } catch {
                throw .malformedFile(path: path, line: number, reason: error.description)
            }
            lines.append(utf8 != nil ? Array(line.utf8CString) : Self.latin1Bytes(line))
        }
        guard try withStore({ easy in CookieShare.addLineBytes(lines, easy) }) else {
            throw .unavailable("libcurl refused the cookies (out of memory)")
        }
    }

    /// Bytes read as Latin-1: each byte the character of that code point.
    private static func latin1Text(_ bytes: some Sequence<UInt8>) -> String {
        String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }

    /// A line read as Latin-1, back to its bytes (NUL-terminated); its characters are all
    /// Latin-1, the normalising of ``NetscapeCookieFormat/line(for:)`` (a lower-cased domain)
    /// keeps them so.
    private static func latin1Bytes(_ line: String) -> [CChar] {
        line.unicodeScalars.map { CChar(bitPattern: UInt8(truncatingIfNeeded: min($0.value, 0xFF))) } + [0]
    }

    private static func read(_ file: URL) throws(CookieJarError) -> Data {
        let path = file.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .fileNotReadable(path: path, reason: "no such file")
        }
        guard !isDirectory.boolValue else { throw .fileNotReadable(path: path, reason: "it is a directory") }
        // Without waiting: a FIFO planted at the path (a shared `--session` directory) blocked
        // the open for good, and `save(to:mergingChangesSince:)` reads the file first. Only a
        // regular file is read; a device or a FIFO is refused.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            throw .fileNotReadable(path: path, reason: String(cString: strerror(errno)))
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw .fileNotReadable(path: path, reason: "not a regular file")
        }
        do {
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
            defer { close(descriptor) }
            // Bounded: the file may grow while it is read.
            let data = try handle.read(upToCount: maximumFileSize + 1) ?? Data()
            guard data.count <= maximumFileSize else {
                throw CookieJarError.fileNotReadable(path: path, reason: "larger than \(maximumFileSize) bytes")
            }
            return data
        } catch let error as CookieJarError {
            throw error
        } catch {
            throw .fileNotReadable(path: path, reason: "\(error.localizedDescription)")
        }
    }

    /// Writes every unexpired cookie to `file` in curl's Netscape format, readable by
    /// ``load(from:)`` and by the curl tool (`-b`). The file is replaced atomically and
    /// readable by its owner only (cookies are credentials); on failure no partial file is
    /// left and an existing one is unchanged.
    ///
    /// - Throws: ``CookieJarError/fileNotWritable(path:reason:)``, ``CookieJarError/unavailable(_:)``.
    public func save(to file: URL) throws(CookieJarError) {
        try Self.writeLines(Array(try storedLines()), to: file)
    }

    /// The jar's unexpired cookies as libcurl keeps them, one line each, byte for byte: a value
    /// that is not UTF-8 is written as its server sent it (as curl's `-c` writes it), not as
    /// U+FFFD. What ``save(to:mergingChangesSince:)`` compares with to tell this jar's changes
    /// from what another process wrote to the file meanwhile.
    package func storedLines() throws(CookieJarError) -> Set<[UInt8]> {
        let now = Date()
        let stored = try withStore { easy in CookieShare.cookieLineBytes(easy) ?? [] }
        var lines: Set<[UInt8]> = []
        for line in stored {
            let bytes = line.dropLast().map { UInt8(bitPattern: $0) }
            guard Self.key(ofLine: bytes, now: now) != nil else { continue }
            lines.insert(bytes)
        }
        return lines
    }

    /// Writes to `file` what it holds now with this jar's changes since `snapshot` (its
    /// ``storedLines()`` when it was loaded) applied: a cookie added or changed here replaces
    /// the file's of the same domain, subdomain flag, path and name; one alive at load and gone
    /// from here (deleted or expired by its server) leaves the file; every other line of the
    /// file stays, whoever wrote it. Two
    /// processes sharing a jar file (two runs of one `curlew --session`) then lose neither's
    /// cookies. The caller keeps other writers out while this runs (a lock).
    ///
    /// - Throws: As ``load(from:)`` for the file (a missing one is empty) and ``save(to:)``.
    package func save(to file: URL, mergingChangesSince snapshot: Set<[UInt8]>) throws(CookieJarError) {
        let now = Date()
        let current = try storedLines()
        var onDisk: [[UInt8]] = []
        if FileManager.default.fileExists(atPath: file.path) {
            let data = try Self.read(file)
            for var line in data.split(separator: UInt8(ascii: "\n")) {
                if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                onDisk.append(Array(line))
            }
        }
        // Only what was alive at load and is gone now was removed here: a cookie that merely
        // expired meanwhile says nothing about the file's newer copy of it.
        let keysBefore = Set(snapshot.compactMap { Self.key(ofLine: $0, now: now) })
        let keysNow = Set(current.compactMap { Self.key(ofLine: $0, now: nil) })
        let changed = current.subtracting(snapshot)
        var replaced = Set(changed.compactMap { Self.key(ofLine: $0, now: nil) })
        replaced.formUnion(keysBefore.subtracting(keysNow))  // removed here
        var merged = onDisk.filter { line in Self.key(ofLine: line, now: now).map { !replaced.contains($0) } ?? false }
        merged.append(contentsOf: changed)  // `storedLines()`: unexpired already
        try Self.writeLines(merged, to: file)
    }

    /// What names a cookie line in a store, as libcurl tells two cookies apart: the domain
    /// (lower-cased, without `#HttpOnly_`), the subdomain flag (`.example.com TRUE` and
    /// `example.com FALSE` are two cookies), the path and the name, as bytes (a value that is
    /// not UTF-8 changes nothing). Nil for a line that is no valid cookie, or one expired by
    /// `now`.
    private static func key(ofLine bytes: [UInt8], now: Date?) -> [UInt8]? {
        let text = String(validating: bytes, as: UTF8.self) ?? latin1Text(bytes)
        guard let cookie = try? NetscapeCookieFormat.cookie(fromLine: Substring(text)) else { return nil }
        if let now, let expires = cookie.expires, expires <= now { return nil }  // expired, not purged yet
        let fields = bytes.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
        guard fields.count >= 7 else { return nil }
        var domain = Array(fields[0])
        let httpOnly = Array("#HttpOnly_".utf8)
        if domain.starts(with: httpOnly) { domain.removeFirst(httpOnly.count) }
        if domain.first == UInt8(ascii: ".") { domain.removeFirst() }
        var key = domain.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        for field in [fields[1], fields[2], fields[5]] {
            key.append(0)
            key.append(contentsOf: field)
        }
        return key
    }

    /// Writes `lines` under curl's file header, sorted (a file that does not change from run
    /// to run when the cookies do not).
    private static func writeLines(_ lines: [[UInt8]], to file: URL) throws(CookieJarError) {
        var data = Data(NetscapeCookieFormat.fileHeader.utf8)
        for line in lines.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            data.append(contentsOf: line)
            data.append(UInt8(ascii: "\n"))
        }
        try writeAtomically(data, to: file)
    }

    /// Writes to a new file beside `file` (mode 0600) and renames it over `file`.
    private static func writeAtomically(_ data: Data, to file: URL) throws(CookieJarError) {
        let path = file.path
        let temporary = path + ".curlew-\(UUID().uuidString)"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .fileNotWritable(path: path, reason: String(cString: strerror(errno))) }
        var failure = DescriptorWrite.writeAll(data, to: descriptor)
        if close(descriptor) != 0, failure == nil { failure = String(cString: strerror(errno)) }
        if failure == nil, rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporary)
            throw .fileNotWritable(path: path, reason: failure)
        }
    }
}
