import Foundation
import SessionCore
#if canImport(Glibc)
import Glibc
#endif

/// `--session NAME`: cookies and headers kept between runs.
///
/// Two files per session in `$XDG_CONFIG_HOME/curlew/sessions` (else
/// `~/.config/curlew/sessions`): `NAME.cookies`, the cookie jar in curl's Netscape format
/// (`CookieJar.save(to:)`, readable by `curl -b`), and `NAME.headers.json`, the headers given
/// on earlier runs, kept per origin (scheme, host and port) and sent only to the origin they
/// were given for: an `Authorization` given for one API never goes to another host that a
/// later run of the same session names (the cookies are the jar's, matched by domain as
/// always). A NAME with a slash is a path to the cookie file itself.
///
/// Cookies and headers are credentials: directories are created 0700, files are written
/// 0600 through a new file renamed into place, and a directory or file that is a symbolic
/// link, belongs to someone else or that others may write to is refused, never read.
///
/// Two runs of one session at once (`curlew --session api … &` twice) each save only what
/// they changed, onto what the file holds then, under a lock (`NAME.cookies.lock`): neither
/// run's new cookies or headers are lost to the other's older copy.
struct SessionStore {
    /// What a run read from the session when it began: its changes are told from another
    /// run's by comparing with this.
    struct Snapshot: Sendable {
        /// The jar's lines as loaded (`CookieJar.storedLines()`).
        var cookieLines: Set<[UInt8]> = []
        /// The headers loaded for the run's origin.
        var headers: [String: String] = [:]
    }

    /// The jar file.
    let cookieFile: URL
    /// The headers file.
    let headerFile: URL

    /// Headers never kept: they describe one request's body or condition, not the session.
    static func isKept(header name: String) -> Bool {
        let lower = name.lowercased()
        return !(lower.hasPrefix("content-") || lower.hasPrefix("if-") || lower == "cookie" || lower == "host")
    }

    /// The session named `name`, its directory created if needed.
    init(name: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        if name.contains("/") {
            let file = URL(fileURLWithPath: (name as NSString).expandingTildeInPath)
            cookieFile = file
            headerFile = URL(fileURLWithPath: file.path + ".headers.json")
            try Self.checkDirectory(file.deletingLastPathComponent(), create: false)
        } else {
            guard !name.isEmpty, !name.hasPrefix("."),
                name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
            else { throw ToolFailure(.error, "--session: '\(name)' is not a session name (letters, digits, - _ .)") }
            let directory = try Self.sessionsDirectory(environment: environment)
            cookieFile = directory.appendingPathComponent(name + ".cookies")
            headerFile = directory.appendingPathComponent(name + ".headers.json")
        }
        try Self.checkFile(cookieFile)
        try Self.checkFile(headerFile)
    }

    /// `$XDG_CONFIG_HOME/curlew/sessions` or `~/.config/curlew/sessions`, created 0700.
    static func sessionsDirectory(environment: [String: String]) throws -> URL {
        let config: URL
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            config = URL(fileURLWithPath: xdg)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            config = URL(fileURLWithPath: home).appendingPathComponent(".config")
        } else {
            throw ToolFailure(.error, "--session: neither XDG_CONFIG_HOME nor HOME is set")
        }
        var directory = config
        try checkDirectory(directory, create: true, isUsersOwnSetting: true)
        for component in ["curlew", "sessions"] {
            directory.appendPathComponent(component)
            try checkDirectory(directory, create: true)
        }
        return directory
    }

    /// Refuses a directory that is a link, someone else's, or writable by others; creates
    /// it 0700 when missing and `create` is true.
    ///
    /// `isUsersOwnSetting`: the configuration directory itself, which the user made (or their
    /// system did), not curlew. A link there is followed (dotfiles kept elsewhere and linked),
    /// and group write is allowed when the group is the user's private group (umask 002 makes
    /// `~/.config` 0775 on systems with such groups), as OpenSSH allows it for `~/.ssh`;
    /// `curlew/` and `sessions/` below it, which curlew makes 0700, get the strict rules.
    private static func checkDirectory(_ directory: URL, create: Bool, isUsersOwnSetting: Bool = false) throws {
        var info = stat()
        let inspect: (String, UnsafeMutablePointer<stat>) -> Int32 = isUsersOwnSetting ? { stat($0, $1) } : { lstat($0, $1) }
        if inspect(directory.path, &info) != 0 {
            guard errno == ENOENT, create else {
                throw ToolFailure(.error, "--session: \(directory.path): \(String(cString: strerror(errno)))")
            }
            guard mkdir(directory.path, 0o700) == 0 || errno == EEXIST else {
                throw ToolFailure(.error, "--session: cannot create \(directory.path): \(String(cString: strerror(errno)))")
            }
            guard inspect(directory.path, &info) == 0 else {
                throw ToolFailure(.error, "--session: \(directory.path): \(String(cString: strerror(errno)))")
            }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ToolFailure(.error, "--session: \(directory.path) is not a directory (a link is refused)")
        }
        guard info.st_uid == getuid() || info.st_uid == 0 else {
            throw ToolFailure(.error, "--session: \(directory.path) belongs to another user")
        }
        let othersMayWrite = info.st_mode & 0o002 != 0
            || (info.st_mode & 0o020 != 0 && !(isUsersOwnSetting && isPrivateGroup(info.st_gid)))
        guard !othersMayWrite || info.st_mode & S_ISVTX != 0 else {
            throw ToolFailure(.error, "--session: \(directory.path) may be written by others")
        }
    }

    /// Whether `gid` is this user's private group: their primary group, named as they are,
    /// with no other member.
    static func isPrivateGroup(_ gid: gid_t) -> Bool {
        guard let user = getpwuid(getuid()), user.pointee.pw_gid == gid, let name = user.pointee.pw_name,
            let group = getgrgid(gid), let groupName = group.pointee.gr_name, strcmp(name, groupName) == 0
        else { return false }
        var member = group.pointee.gr_mem
        while let entry = member?.pointee {
            if strcmp(entry, name) != 0 { return false }
            member = member?.advanced(by: 1)
        }
        return true
    }

    /// Refuses an existing file that is not this user's own regular file, private to them.
    private static func checkFile(_ file: URL) throws {
        var info = stat()
        guard lstat(file.path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else {
            throw ToolFailure(.error, "--session: \(file.path) is not a file of this user's own (a link is refused)")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw ToolFailure(.error, "--session: \(file.path) may be read by others (chmod 600 it)")
        }
    }

    /// The origin stored headers are bound to, as `scheme://host:port` (the port spelled out,
    /// the default one included, scheme and host in lower case); nil for a URL without a host.
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), var host = url.host?.lowercased(), !host.isEmpty else { return nil }
        if host.contains(":"), !host.hasPrefix("[") { host = "[" + host + "]" }  // an IPv6 literal, as in a URL
        let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
        return port < 0 ? "\(scheme)://\(host)" : "\(scheme)://\(host):\(port)"
    }

    /// The headers given on earlier runs for `url`'s origin (none for a new session, or for an
    /// origin the session has not been used with).
    func loadHeaders(for url: URL) throws -> [String: String] {
        guard let origin = Self.origin(of: url) else { return [:] }
        return try storedHeaders(warning: true)[origin] ?? [:]
    }

    /// Every origin's stored headers. A file of an earlier version (one set of headers, bound
    /// to no origin) gives none: nothing says which host they were meant for, so none is sent
    /// them, and they are replaced at the next save (`warning`: say so on stderr).
    private func storedHeaders(warning: Bool) throws -> [String: [String: String]] {
        guard FileManager.default.fileExists(atPath: headerFile.path) else { return [:] }
        guard let data = try? Data(contentsOf: headerFile) else {
            throw ToolFailure(.error, "--session: \(headerFile.path) cannot be read")
        }
        if let byOrigin = try? JSONDecoder().decode([String: [String: String]].self, from: data) { return byOrigin }
        if let unbound = try? JSONDecoder().decode([String: String].self, from: data) {
            if warning, !unbound.isEmpty {
                Terminal.standardError.write(
                    "curlew: warning: --session: \(headerFile.lastPathComponent) holds headers bound to no host "
                        + "(\(unbound.keys.sorted().joined(separator: ", "))); they are not sent and are dropped: give them again\n")
            }
            return [:]
        }
        throw ToolFailure(.error, "--session: \(headerFile.path) is not a headers file")
    }

    /// A jar with the stored cookies.
    func loadJar() throws -> CookieJar {
        let jar = CookieJar()
        guard FileManager.default.fileExists(atPath: cookieFile.path) else { return jar }
        do {
            try jar.load(from: cookieFile)
        } catch {
            throw ToolFailure(.error, "--session: \(ToolFailure.oneLine(error))")
        }
        return jar
    }

    /// The jar's lines as `jar` holds them now, for a ``Snapshot`` taken right after loading.
    static func cookieLines(of jar: CookieJar) throws -> Set<[UInt8]> {
        do {
            return try jar.storedLines()
        } catch {
            throw ToolFailure(.error, "--session: \(ToolFailure.oneLine(error))")
        }
    }

    /// Keeps the jar's cookies, and the headers (those worth keeping) for `url`'s origin, for
    /// the next run; other origins' headers stay as they were.
    ///
    /// With `snapshot` (what this run loaded), only this run's changes are written, onto what
    /// the files hold now: a cookie or header another run saved meanwhile stays unless this
    /// run changed or removed the same one. Without it, the jar and the origin's headers
    /// replace what is there.
    func save(jar: CookieJar?, headers: [String: String], for url: URL, since snapshot: Snapshot? = nil) throws {
        try withLock {
            try saveLocked(jar: jar, headers: headers, for: url, since: snapshot)
        }
    }

    private func saveLocked(jar: CookieJar?, headers: [String: String], for url: URL, since snapshot: Snapshot?) throws {
        // Checked again: the files are read now, and the request may have run for long enough
        // for something else to take their place (a FIFO would block the read, and the lock).
        try Self.checkFile(cookieFile)
        try Self.checkFile(headerFile)
        if let jar {
            do {
                if let snapshot {
                    try jar.save(to: cookieFile, mergingChangesSince: snapshot.cookieLines)
                } else {
                    try jar.save(to: cookieFile)
                }
            } catch {
                throw ToolFailure(.error, "--session: \(ToolFailure.oneLine(error))")
            }
        }
        guard let origin = Self.origin(of: url) else { return }
        var byOrigin = try storedHeaders(warning: false)
        var merged = headers
        if let snapshot {
            // This run's changes (set, changed, dropped) onto what the file holds now.
            merged = byOrigin[origin] ?? [:]
            func removeAny(_ name: String) {
                for key in merged.keys where key.caseInsensitiveCompare(name) == .orderedSame { merged[key] = nil }
            }
            for name in snapshot.headers.keys
            where !headers.keys.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) {
                removeAny(name)
            }
            for (name, value) in headers where snapshot.headers[name] != value {
                removeAny(name)
                merged[name] = value
            }
        }
        let kept = merged.filter { Self.isKept(header: $0.key) }
        byOrigin[origin] = kept.isEmpty ? nil : kept
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        guard let data = try? encoder.encode(byOrigin) else { return }
        try Self.writePrivately(data, to: headerFile)
    }

    /// Runs `body` holding the session's lock: an exclusive `flock` on `NAME.cookies.lock`
    /// beside the jar (made 0600; refused like the session's files when it is a link or
    /// someone else's). Held only while saving: a long download in one terminal does not keep
    /// a quick request in another from finishing.
    private func withLock<T>(_ body: () throws -> T) throws -> T {
        let path = cookieFile.path + ".lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw ToolFailure(.error, "--session: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else {
            throw ToolFailure(.error, "--session: \(path) is not a file of this user's own")
        }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw ToolFailure(.error, "--session: cannot lock \(path): \(String(cString: strerror(errno)))")
            }
        }
        return try body()
    }

    /// Writes a new 0600 file beside `file` and renames it over `file` (session files, and
    /// the resume data of a download, which carries its request's headers).
    static func writePrivately(_ data: Data, to file: URL) throws {
        let temporary = file.path + ".\(UUID().uuidString).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw ToolFailure(.error, "--session: cannot write \(file.path): \(String(cString: strerror(errno)))")
        }
        var failed = DescriptorWrite.writeAll(data, to: descriptor) != nil
        if close(descriptor) != 0 { failed = true }
        if failed || rename(temporary, file.path) != 0 {
            unlink(temporary)
            throw ToolFailure(.error, "--session: cannot write \(file.path)")
        }
    }
}
