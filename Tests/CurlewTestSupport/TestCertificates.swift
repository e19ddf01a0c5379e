import Foundation

/// Certificates and keys for TLS tests, generated at test time with the `openssl`
/// command-line tool (Debian package `openssl`) into a temporary folder, once per process.
///
/// Every certificate uses its own P-256 key (fast to generate) and a SHA-256 signature,
/// except `reissuedLeafSameKey`, which re-uses `leaf`'s key on purpose, and the two weak
/// ones that OpenSSL's security level 2 refuses (`weakKeyLeaf`, `sha1Intermediate`). All
/// server leaves except the deliberately wrong ones are valid for `localhost`, `127.0.0.1`
/// and `::1`.
///
/// ```
/// root ─┬─ intermediate ─┬─ leaf, reissuedLeafSameKey, leafNewKey       (valid now)
///       │                ├─ expiredLeaf (2020-01-01 … 2021-01-01)
///       │                ├─ notYetValidLeaf (starts a year from now)
///       │                ├─ wrongHostLeaf (wrong.example.com only)
///       │                ├─ wildcardLeaf (*.wild.test, f*.partial.test)
///       │                ├─ commonNameOnlyLeaf (CN=cnonly.test, no subjectAltName)
///       │                ├─ weakKeyLeaf (RSA-1024 key)
///       │                └─ client (clientAuth, for mutual TLS)
///       └─ sha1Intermediate (signed with SHA-1) ── sha1IntermediateLeaf
/// unrelatedRoot ── unrelatedLeaf (localhost, from a root nothing else trusts)
/// selfSigned (localhost, self-signed, not a CA)
/// ```
///
/// Only Foundation is used, so any test target can depend on this file.
public struct TestCertificates: Sendable {
    /// The files of one certificate. PEM files hold one PEM block each.
    public struct Files: Sendable, Hashable {
        /// Short name, also the file stem (`leaf`, `root`, ...).
        public let name: String
        /// The certificate, PEM.
        public let certificatePEM: URL
        /// The certificate, DER.
        public let certificateDER: URL
        /// Its private key, PEM (PKCS#8, unencrypted).
        public let privateKeyPEM: URL
        /// The certificate followed by its issuers, excluding the root: what a TLS server
        /// sends. For a root or a self-signed certificate, just the certificate.
        public let chainPEM: URL
        /// `chainPEM` plus the root at the end.
        public let fullChainPEM: URL
    }

    /// Why generation failed: the command, its exit status and its standard error.
    public struct GenerationError: Error, Sendable, CustomStringConvertible {
        /// What went wrong, with the failing command when there is one.
        public let description: String
    }

    /// The folder holding every generated file.
    public let directory: URL
    /// Self-signed root CA ("Curlew Test Root CA").
    public let root: Files
    /// Intermediate CA issued by `root`.
    public let intermediate: Files
    /// Server leaf for localhost / 127.0.0.1 / ::1, issued by `intermediate`, valid now.
    public let leaf: Files
    /// Same key as `leaf`, new serial and validity (a renewal that keeps the key).
    public let reissuedLeafSameKey: Files
    /// Same names as `leaf`, a new key (a renewal that rotates the key).
    public let leafNewKey: Files
    /// Valid for localhost, but only from 2020-01-01 to 2021-01-01.
    public let expiredLeaf: Files
    /// Valid for localhost, but only from `notYetValidStart` (a year after generation).
    public let notYetValidLeaf: Files
    /// Valid now, but only for `wrong.example.com`.
    public let wrongHostLeaf: Files
    /// Valid now for `*.wild.test` and the partial wildcard `f*.partial.test`.
    public let wildcardLeaf: Files
    /// Valid now, subject CN `cnonly.test`, no subjectAltName at all.
    public let commonNameOnlyLeaf: Files
    /// Client certificate (extended key usage clientAuth) issued by `intermediate`.
    public let client: Files
    /// Valid now for localhost, issued by `intermediate`, but its key is RSA-1024 (80-bit
    /// security: refused from OpenSSL security level 2, `X509_V_ERR_EE_KEY_TOO_SMALL`).
    public let weakKeyLeaf: Files
    /// An intermediate CA issued by `root` with a SHA-1 signature (refused from OpenSSL
    /// security level 1, `X509_V_ERR_CA_MD_TOO_WEAK`).
    public let sha1Intermediate: Files
    /// Server leaf for localhost issued by `sha1Intermediate` (itself SHA-256 signed).
    public let sha1IntermediateLeaf: Files
    /// A second, unrelated self-signed root CA.
    public let unrelatedRoot: Files
    /// Server leaf for localhost issued directly by `unrelatedRoot`.
    public let unrelatedLeaf: Files
    /// Self-signed server certificate for localhost (not a CA, no issuer).
    public let selfSigned: Files
    /// When `notYetValidLeaf` becomes valid.
    public let notYetValidStart: Date

    /// The host names and addresses every valid localhost leaf carries.
    public static let localhostNames = ["localhost", "127.0.0.1", "::1"]
    /// `expiredLeaf`'s validity period.
    public static let expiredValidity: ClosedRange<Date> =
        Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_609_459_200)
    /// When the CAs (`root`, `intermediate`, `unrelatedRoot`) become valid: early enough
    /// that the expired leaf can be checked inside its own validity.
    public static let certificateAuthorityStart = Date(timeIntervalSince1970: 1_546_300_800)

    /// The process-wide set, generated on first use into a fresh temporary folder.
    public static func shared() throws -> TestCertificates {
        try cached.get()
    }

    // Swift initialises a static `let` once, thread-safely, on first access.
    private static let cached: Result<TestCertificates, GenerationError> = {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("curlew-test-certificates-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
        do {
            return .success(try generate(in: folder))
        } catch let error as GenerationError {
            return .failure(error)
        } catch {
            return .failure(GenerationError(description: "\(error)"))
        }
    }()

    /// Generates a complete set into `directory` (created if needed). Takes about a second.
    public static func generate(in directory: URL) throws -> TestCertificates {
        let generator = try Generator(directory: directory)
        return try generator.run()
    }
}

// MARK: - Generation

/// Drives `openssl` for one set. `openssl ca` (rather than `x509 -req`) is used because
/// OpenSSL 3.0's `x509` cannot set an arbitrary start date; `ca` takes `-startdate`.
private struct Generator {
    let directory: URL
    let openssl: URL
    /// Whole seconds: `DateFormatter` rounds a date to the millisecond before it prints the
    /// second, so a `now` ending in .9995 s or more was written into the certificates one second
    /// later than `notYetValidStart` said (CertificateTests failed once in a run that way).
    let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))

    init(directory: URL) throws {
        self.directory = directory
        guard let openssl = Generator.findExecutable("openssl") else {
            throw TestCertificates.GenerationError(
                description: "the 'openssl' command was not found on PATH (Debian/Ubuntu: apt-get install openssl)")
        }
        self.openssl = openssl
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw TestCertificates.GenerationError(description: "cannot create \(directory.path): \(error)")
        }
    }

    func run() throws -> TestCertificates {
        try write(Generator.requestConfig, to: "req.cnf")
        try write(Generator.extensionsConfig, to: "ext.cnf")

        let caStart = Generator.timestamp(TestCertificates.certificateAuthorityStart)
        let caEnd = Generator.timestamp(now.addingTimeInterval(10 * 365 * 86_400))
        let nowStart = Generator.timestamp(now.addingTimeInterval(-86_400))
        let nowEnd = Generator.timestamp(now.addingTimeInterval(365 * 86_400))
        let futureStartDate = now.addingTimeInterval(366 * 86_400)
        let futureStart = Generator.timestamp(futureStartDate)
        let futureEnd = Generator.timestamp(now.addingTimeInterval(2 * 366 * 86_400))
        let expiredStart = Generator.timestamp(TestCertificates.expiredValidity.lowerBound)
        let expiredEnd = Generator.timestamp(TestCertificates.expiredValidity.upperBound)

        // Certificate authorities.
        try makeKey("root")
        try makeRequest("root", subject: "/O=Curlew Tests/CN=Curlew Test Root CA")
        try sign("root", issuer: nil, database: "root-db", start: caStart, end: caEnd, extensions: "v3_root")
        try makeKey("intermediate")
        try makeRequest("intermediate", subject: "/O=Curlew Tests/CN=Curlew Test Intermediate CA")
        try sign("intermediate", issuer: "root", database: "root-db", start: caStart, end: caEnd, extensions: "v3_intermediate")
        try makeKey("sha1-intermediate")
        try makeRequest("sha1-intermediate", subject: "/O=Curlew Tests/CN=Curlew Test SHA-1 Intermediate CA")
        try sign("sha1-intermediate", issuer: "root", database: "root-db", start: caStart, end: caEnd,
                 extensions: "v3_intermediate", digest: "sha1")
        try makeKey("unrelated-root")
        try makeRequest("unrelated-root", subject: "/O=Curlew Unrelated/CN=Curlew Unrelated Root CA")
        try sign("unrelated-root", issuer: nil, database: "unrelated-db", start: caStart, end: caEnd, extensions: "v3_root")

        // Leaves issued by the intermediate.
        let issued: [(name: String, subject: String, key: String?, start: String, end: String, extensions: String)] = [
            ("leaf", "/O=Curlew Tests/CN=localhost", nil, nowStart, nowEnd, "server_localhost"),
            ("reissued-leaf-same-key", "/O=Curlew Tests/CN=localhost", "leaf", nowStart, nowEnd, "server_localhost"),
            ("leaf-new-key", "/O=Curlew Tests/CN=localhost", nil, nowStart, nowEnd, "server_localhost"),
            ("expired-leaf", "/O=Curlew Tests/CN=localhost", nil, expiredStart, expiredEnd, "server_localhost"),
            ("not-yet-valid-leaf", "/O=Curlew Tests/CN=localhost", nil, futureStart, futureEnd, "server_localhost"),
            ("wrong-host-leaf", "/O=Curlew Tests/CN=wrong.example.com", nil, nowStart, nowEnd, "server_wrong_host"),
            ("wildcard-leaf", "/O=Curlew Tests/CN=*.wild.test", nil, nowStart, nowEnd, "server_wildcard"),
            ("cn-only-leaf", "/O=Curlew Tests/CN=cnonly.test", nil, nowStart, nowEnd, "server_cn_only"),
            ("client", "/O=Curlew Tests/CN=Curlew Test Client", nil, nowStart, nowEnd, "client"),
        ]
        for item in issued {
            if let key = item.key {
                try copy("\(key).key", to: "\(item.name).key")
            } else {
                try makeKey(item.name)
            }
            try makeRequest(item.name, subject: item.subject)
            try sign(item.name, issuer: "intermediate", database: "intermediate-db",
                     start: item.start, end: item.end, extensions: item.extensions)
        }

        try makeKey("weak-key-leaf", rsaBits: 1024)
        try makeRequest("weak-key-leaf", subject: "/O=Curlew Tests/CN=localhost")
        try sign("weak-key-leaf", issuer: "intermediate", database: "intermediate-db",
                 start: nowStart, end: nowEnd, extensions: "server_localhost")
        try makeKey("sha1-intermediate-leaf")
        try makeRequest("sha1-intermediate-leaf", subject: "/O=Curlew Tests/CN=localhost")
        try sign("sha1-intermediate-leaf", issuer: "sha1-intermediate", database: "sha1-intermediate-db",
                 start: nowStart, end: nowEnd, extensions: "server_localhost")

        try makeKey("unrelated-leaf")
        try makeRequest("unrelated-leaf", subject: "/O=Curlew Unrelated/CN=localhost")
        try sign("unrelated-leaf", issuer: "unrelated-root", database: "unrelated-db",
                 start: nowStart, end: nowEnd, extensions: "server_localhost")

        try makeKey("self-signed")
        try makeRequest("self-signed", subject: "/O=Curlew Self-Signed/CN=localhost")
        try sign("self-signed", issuer: nil, database: "self-signed-db", start: nowStart, end: nowEnd, extensions: "server_localhost")

        let intermediateChain = ["intermediate"]
        return TestCertificates(
            directory: directory,
            root: try files("root", issuers: [], root: "root"),
            intermediate: try files("intermediate", issuers: [], root: "root"),
            leaf: try files("leaf", issuers: intermediateChain, root: "root"),
            reissuedLeafSameKey: try files("reissued-leaf-same-key", issuers: intermediateChain, root: "root"),
            leafNewKey: try files("leaf-new-key", issuers: intermediateChain, root: "root"),
            expiredLeaf: try files("expired-leaf", issuers: intermediateChain, root: "root"),
            notYetValidLeaf: try files("not-yet-valid-leaf", issuers: intermediateChain, root: "root"),
            wrongHostLeaf: try files("wrong-host-leaf", issuers: intermediateChain, root: "root"),
            wildcardLeaf: try files("wildcard-leaf", issuers: intermediateChain, root: "root"),
            commonNameOnlyLeaf: try files("cn-only-leaf", issuers: intermediateChain, root: "root"),
            client: try files("client", issuers: intermediateChain, root: "root"),
            weakKeyLeaf: try files("weak-key-leaf", issuers: intermediateChain, root: "root"),
            sha1Intermediate: try files("sha1-intermediate", issuers: [], root: "root"),
            sha1IntermediateLeaf: try files("sha1-intermediate-leaf", issuers: ["sha1-intermediate"], root: "root"),
            unrelatedRoot: try files("unrelated-root", issuers: [], root: "unrelated-root"),
            unrelatedLeaf: try files("unrelated-leaf", issuers: [], root: "unrelated-root"),
            selfSigned: try files("self-signed", issuers: [], root: "self-signed"),
            notYetValidStart: futureStartDate  // whole seconds, as written into the certificate
        )
    }

    // MARK: Steps

    /// A P-256 key, or an RSA key of `rsaBits` bits (only for the deliberately weak leaf).
    private func makeKey(_ name: String, rsaBits: Int? = nil) throws {
        if let rsaBits {
            try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(rsaBits)",
                         "-out", path("\(name).key")])
        } else {
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                         "-out", path("\(name).key")])
        }
    }

    private func makeRequest(_ name: String, subject: String) throws {
        try openssl(["req", "-new", "-config", path("req.cnf"), "-key", path("\(name).key"),
                     "-subj", subject, "-out", path("\(name).csr")])
    }

    /// Signs `name.csr` with `issuer`'s key and certificate (nil: self-signed) through a
    /// per-issuer `openssl ca` database, with explicit validity, extensions and digest.
    private func sign(_ name: String, issuer: String?, database: String,
                      start: String, end: String, extensions: String, digest: String = "sha256") throws {
        let databaseFolder = directory.appendingPathComponent(database)
        let config = databaseFolder.appendingPathComponent("ca.cnf")
        if !FileManager.default.fileExists(atPath: config.path) {
            do {
                try FileManager.default.createDirectory(at: databaseFolder, withIntermediateDirectories: true)
                try Data().write(to: databaseFolder.appendingPathComponent("index.txt"))
                // A random starting serial, so two generated sets never share serials.
                let serial = (0..<8).map { _ in String(format: "%02X", UInt8.random(in: 0...255) & 0x7F) }.joined()
                try Data("\(serial)\n".utf8).write(to: databaseFolder.appendingPathComponent("serial"))
                try Data(Generator.caConfig(folder: databaseFolder.path).utf8).write(to: config)
            } catch {
                throw TestCertificates.GenerationError(description: "cannot prepare \(databaseFolder.path): \(error)")
            }
        }
        var arguments = ["ca", "-batch", "-notext", "-config", config.path, "-md", digest,
                         "-startdate", start, "-enddate", end, "-preserveDN",
                         "-extfile", path("ext.cnf"), "-extensions", extensions,
                         "-in", path("\(name).csr"), "-out", path("\(name).pem")]
        if let issuer {
            arguments += ["-cert", path("\(issuer).pem"), "-keyfile", path("\(issuer).key")]
        } else {
            arguments += ["-selfsign", "-keyfile", path("\(name).key")]
        }
        try openssl(arguments)
    }

    /// Writes the DER and chain files of `name` and describes them.
    private func files(_ name: String, issuers: [String], root: String) throws -> TestCertificates.Files {
        let pem = try readText("\(name).pem")
        guard let der = Generator.derFromPEM(pem) else {
            throw TestCertificates.GenerationError(description: "\(path("\(name).pem")) holds no PEM certificate")
        }
        do {
            try der.write(to: url("\(name).der"))
        } catch {
            throw TestCertificates.GenerationError(description: "cannot write \(path("\(name).der")): \(error)")
        }
        let chain = try ([name] + issuers).map { try readText("\($0).pem") }.joined()
        try write(chain, to: "\(name)-chain.pem")
        let full = chain + (root == name ? "" : try readText("\(root).pem"))
        try write(full, to: "\(name)-fullchain.pem")
        return TestCertificates.Files(
            name: name,
            certificatePEM: url("\(name).pem"),
            certificateDER: url("\(name).der"),
            privateKeyPEM: url("\(name).key"),
            chainPEM: url("\(name)-chain.pem"),
            fullChainPEM: url("\(name)-fullchain.pem"))
    }

    // MARK: Files and processes

    private func url(_ file: String) -> URL { directory.appendingPathComponent(file) }
    private func path(_ file: String) -> String { url(file).path }

    private func write(_ text: String, to file: String) throws {
        do {
            try Data(text.utf8).write(to: url(file))
        } catch {
            throw TestCertificates.GenerationError(description: "cannot write \(path(file)): \(error)")
        }
    }

    private func readText(_ file: String) throws -> String {
        do {
            return try String(contentsOf: url(file), encoding: .utf8)
        } catch {
            throw TestCertificates.GenerationError(description: "cannot read \(path(file)): \(error)")
        }
    }

    private func copy(_ file: String, to destination: String) throws {
        do {
            try FileManager.default.copyItem(at: url(file), to: url(destination))
        } catch {
            throw TestCertificates.GenerationError(description: "cannot copy \(path(file)): \(error)")
        }
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = openssl
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw TestCertificates.GenerationError(description: "cannot run \(openssl.path): \(error)")
        }
        // Read before waiting, so a chatty command cannot block on a full pipe.
        let output = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: output, as: UTF8.self)
            throw TestCertificates.GenerationError(
                description: "openssl \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): \(text)")
        }
    }

    private static func findExecutable(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        let folders = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"]
        for folder in folders {
            let candidate = URL(fileURLWithPath: folder).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    /// `openssl ca` date format: GeneralizedTime, UTC.
    private static func timestamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss'Z'"
        return formatter.string(from: date)
    }

    /// The DER inside the first PEM CERTIFICATE block.
    private static func derFromPEM(_ pem: String) -> Data? {
        var inside = false
        var base64 = ""
        for line in pem.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("-----BEGIN CERTIFICATE-----") { inside = true; continue }
            if line.hasPrefix("-----END CERTIFICATE-----") { break }
            if inside { base64 += line.trimmingCharacters(in: .whitespaces) }
        }
        return base64.isEmpty ? nil : Data(base64Encoded: base64)
    }

    // MARK: Configuration files

    /// `req` needs a distinguished_name section; the subject always comes from `-subj`.
    private static let requestConfig = """
        [ req ]
        distinguished_name = dn
        prompt = no
        [ dn ]
        CN = unused

        """

    private static func caConfig(folder: String) -> String {
        """
        [ ca ]
        default_ca = test_ca
        [ test_ca ]
        dir = \(folder)
        database = $dir/index.txt
        serial = $dir/serial
        new_certs_dir = $dir
        default_md = sha256
        policy = policy_anything
        unique_subject = no
        copy_extensions = none
        email_in_dn = no
        [ policy_anything ]
        organizationName = optional
        commonName = supplied

        """
    }

    private static let extensionsConfig = """
        [ v3_root ]
        basicConstraints = critical, CA:true
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash

        [ v3_intermediate ]
        basicConstraints = critical, CA:true, pathlen:0
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        [ server_localhost ]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

        [ server_wrong_host ]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        subjectAltName = DNS:wrong.example.com

        [ server_wildcard ]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        subjectAltName = DNS:*.wild.test, DNS:f*.partial.test

        [ server_cn_only ]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        [ client ]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = clientAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        """
}
