import COpenSSL
import Foundation

/// Where the system's trusted roots are: the one rule shared by the policy's system store
/// (`TrustStore.system`) and the CA file SessionCore hands to libcurl for an HTTPS proxy
/// (`CURLOPT_PROXY_CAINFO`), so the two can never disagree about which roots
/// `SSL_CERT_FILE` names.
///
/// The rule is OpenSSL's (`X509_STORE_set_default_paths`):
/// 1. The file named by `SSL_CERT_FILE` (the name OpenSSL reports through
///    `X509_get_default_cert_file_env`), when set and not empty. It is used even if it
///    cannot be read (the store is then empty and says so): a variable set to narrow trust
///    never silently falls back to the system's roots.
/// 2. Otherwise the system default: OpenSSL's compiled-in file
///    (`X509_get_default_cert_file`, a link to Debian's bundle), else the first readable
///    well-known distribution bundle.
/// 3. The hashed directory named by `SSL_CERT_DIR` (`X509_get_default_cert_dir_env`), when
///    set and not empty, in addition to the file. Without it, OpenSSL's compiled-in
///    directory (Debian's `/etc/ssl/certs`, the same roots as the bundle, one file per root)
///    when it exists, unless `SSL_CERT_FILE` named the file: a variable set to narrow trust
///    gets no directory it did not name. `TrustStore.system` reads the directory first, on
///    demand, and parses the file only for a chain the directory cannot anchor.
package struct SystemTrustLocation: Sendable, Hashable {
    /// The CA bundle (PEM), or nil when there is none.
    package var file: String?
    /// A hashed certificate directory (`c_rehash` layout), or nil.
    package var directory: String?

    /// Creates a location.
    package init(file: String?, directory: String?) {
        self.file = file
        self.directory = directory
    }

    /// The environment variable OpenSSL reads for the CA file (`SSL_CERT_FILE`).
    package static let fileVariable = X509_get_default_cert_file_env().map { String(cString: $0) } ?? "SSL_CERT_FILE"
    /// The environment variable OpenSSL reads for the CA directory (`SSL_CERT_DIR`).
    package static let directoryVariable = X509_get_default_cert_dir_env().map { String(cString: $0) } ?? "SSL_CERT_DIR"

    /// The system default bundles, most preferred first: OpenSSL's compiled-in file, then
    /// the well-known bundles of Debian/Ubuntu, Fedora/RHEL, openSUSE and others.
    package static let defaultFiles: [String] = {
        var files: [String] = []
        if let file = X509_get_default_cert_file() { files.append(String(cString: file)) }
        files += [
            "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
            "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem",
        ]
        return files
    }()

    /// OpenSSL's compiled-in certificate directory.
    package static let defaultDirectory: String? = X509_get_default_cert_dir().map { String(cString: $0) }

    /// The location for this process, resolved once from its environment.
    package static let current = resolve(environment: ProcessInfo.processInfo.environment)

    /// Applies the rule to `environment`; `isReadableFile` and `isDirectory` are the file
    /// system checks (replaceable in tests).
    package static func resolve(
        environment: [String: String],
        defaultFiles: [String] = SystemTrustLocation.defaultFiles,
        defaultDirectory: String? = SystemTrustLocation.defaultDirectory,
        isReadableFile: (String) -> Bool = { FileManager.default.isReadableFile(atPath: $0) },
        isDirectory: (String) -> Bool = SystemTrustLocation.isDirectory
    ) -> SystemTrustLocation {
        let fileOverride = environment[fileVariable].flatMap { $0.isEmpty ? nil : $0 }
        let directoryOverride = environment[directoryVariable].flatMap { $0.isEmpty ? nil : $0 }
        let file = fileOverride ?? defaultFiles.first(where: isReadableFile)
        var directory = directoryOverride
        if directory == nil, fileOverride == nil, let fallback = defaultDirectory, isDirectory(fallback) {
            directory = fallback
        }
        return SystemTrustLocation(file: file, directory: directory)
    }

    /// True when `path` names an existing directory.
    package static func isDirectory(_ path: String) -> Bool {
        var flag: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &flag) && flag.boolValue
    }

    /// `file` when it can be read (what libcurl should load: naming an unreadable file would
    /// fail every TLS connection inside libcurl, even for policies that never use these roots).
    package var readableFile: String? {
        file.flatMap { FileManager.default.isReadableFile(atPath: $0) ? $0 : nil }
    }
}
