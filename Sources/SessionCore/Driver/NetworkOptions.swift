internal import CCurl
import Foundation

/// The manager's name-resolution, address, HSTS and alt-svc settings as libcurl options,
/// built once per driver from its configuration and set on each easy handle with its base
/// options (once until the handle's next reset: the configuration never changes).
///
/// Confinement: the driver thread. The option lists (`CURLOPT_RESOLVE`, `CURLOPT_CONNECT_TO`)
/// are borrowed by libcurl, not copied: every handle that was given them keeps this object
/// (`EasyHandle.networkOptions`), so they are freed only after the last such handle.
final class NetworkOptions {
    private let resolve: UnsafeMutablePointer<curl_slist>?
    private let connectTo: UnsafeMutablePointer<curl_slist>?
    private let interface: String?
    private let ipResolve: Int
    private let happyEyeballsMilliseconds: Int?
    private let dnsCacheSeconds: Int?
    private let dnsServers: String?
    private let alternativeServices: SessionConfiguration.AlternativeServices
    /// Why no transfer of this manager can run as configured (a setting this libcurl cannot
    /// apply), or nil.
    private(set) var configurationError: SessionError?
    /// The HSTS file, and whether it still has to be read into the share (by the next transfer).
    private let hstsFile: String?
    private var hstsFileToLoad: String?

    init(_ configuration: SessionConfiguration) {
        var failure: SessionError?
        func list(_ lines: [String]) -> UnsafeMutablePointer<curl_slist>? {
            var head: UnsafeMutablePointer<curl_slist>?
            for line in lines {
                guard let appended = curl_slist_append(head, line) else {
                    failure = .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory")
                    return head
                }
                head = appended
            }
            return head
        }
        let overrides = configuration.hostOverrides
        resolve = list(overrides.filter { if case .resolve = $0.kind { return true } else { return false } }.map(\.curlLine))
        connectTo = list(overrides.filter { if case .connect = $0.kind { return true } else { return false } }.map(\.curlLine))
        interface = configuration.localEndpoint?.curlValue
        switch configuration.addressFamily {
        case .any: ipResolve = Int(CURL_IPRESOLVE_WHATEVER)
        case .ipv4: ipResolve = Int(CURL_IPRESOLVE_V4)
        case .ipv6: ipResolve = Int(CURL_IPRESOLVE_V6)
        }
        happyEyeballsMilliseconds = configuration.happyEyeballsDelay.map { delay in
            delay.isNaN ? 200 : Int((min(60, max(0, delay)) * 1000).rounded())
        }
        dnsCacheSeconds = configuration.dnsCacheLifetime.map { lifetime in
            // -1 is libcurl's "forever"; a lifetime of more than a century is forever too.
            guard !lifetime.isNaN, lifetime >= 0, lifetime < 3_153_600_000 else { return -1 }
            return Int(lifetime.rounded(.up))
        }
        if configuration.dnsServers.isEmpty {
            dnsServers = nil
        } else {
            dnsServers = configuration.dnsServers.map(\.description).joined(separator: ",")
            if !CurlRuntime.supportsDNSServers {
                failure = failure ?? .invalidConfiguration(
                    "dnsServers needs libcurl built with c-ares; this libcurl (\(CurlRuntime.versionDescription)) "
                        + "uses the system's resolver (SessionConfiguration.supportsDNSServers is false)")
            }
        }
        alternativeServices = configuration.alternativeServices
        if case .file(let path) = configuration.strictTransportSecurity { hstsFile = path } else { hstsFile = nil }
        hstsFileToLoad = hstsFile
        configurationError = failure
    }

    /// Fails every transfer with `error` (a setting that cannot be applied safely).
    func refuse(_ error: SessionError) {
        if configurationError == nil { configurationError = error }
    }

    /// The share's HSTS cache has a file to be written to when the manager ends.
    var savesHSTSFile: Bool { hstsFile != nil }

    /// A new share (after a security policy change) starts from the file again.
    func shareReplaced() { hstsFileToLoad = hstsFile }

    /// Sets the `.resolve` overrides again on a handle that keeps its base options. libcurl
    /// loads them into the DNS cache of the share the handle is in at its next start, and
    /// only after the option is set: a handle moved to a new share (a policy change, a reset,
    /// another manager of the cookie jar replacing its caches) asked the system's resolver
    /// for the overridden names, and a real name went to the real server.
    func reloadResolve(on easy: EasyHandle) {
        if resolve != nil { _ = easy.set(CURLOPT_RESOLVE, list: resolve) }
    }

    deinit {
        curl_slist_free_all(resolve)
        curl_slist_free_all(connectTo)
    }

    /// Whether the manager's transfers share an HSTS cache (`CURL_LOCK_DATA_HSTS`).
    static func sharesHSTS(_ configuration: SessionConfiguration) -> Bool {
        configuration.strictTransportSecurity != .disabled
    }

    /// Sets the options on a handle that has no base options yet. Returns the error that keeps
    /// the transfer from running, if any.
    func apply(to easy: EasyHandle) -> SessionError? {
        if let configurationError { return configurationError }
        easy.networkOptions = self
        var refused: [String] = []
        if resolve != nil, !easy.set(CURLOPT_RESOLVE, list: resolve) { refused.append("hostOverrides (resolve)") }
        if connectTo != nil, !easy.set(CURLOPT_CONNECT_TO, list: connectTo) { refused.append("hostOverrides (connect)") }
        if let interface, !easy.set(CURLOPT_INTERFACE, interface) { refused.append("localEndpoint") }
        if ipResolve != Int(CURL_IPRESOLVE_WHATEVER), !easy.set(CURLOPT_IPRESOLVE, ipResolve) { refused.append("addressFamily") }
        if let happyEyeballsMilliseconds, !easy.set(CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, happyEyeballsMilliseconds) {
            refused.append("happyEyeballsDelay")
        }
        if let dnsCacheSeconds, !easy.set(CURLOPT_DNS_CACHE_TIMEOUT, dnsCacheSeconds) { refused.append("dnsCacheLifetime") }
        if let dnsServers, !easy.set(CURLOPT_DNS_SERVERS, dnsServers) { refused.append("dnsServers") }
        switch alternativeServices {
        case .disabled: break
        case .inMemory, .file:
            // The cache is the handle's own and outlives `curl_easy_reset`: a file is read
            // into it once, and written back from it when the handle is freed.
            if case .file(let path) = alternativeServices, !easy.hasAltSvcFile {
                if easy.set(CURLOPT_ALTSVC, path) { easy.hasAltSvcFile = true } else { refused.append("alternativeServices") }
            }
            if !easy.set(CURLOPT_ALTSVC_CTRL, Int(CURLALTSVC_H1 | CURLALTSVC_H2)) { refused.append("alternativeServices") }
        }
        guard refused.isEmpty else { return .invalidConfiguration("libcurl refused " + refused.joined(separator: ", ")) }
        return nil
    }

    /// Reads the HSTS file into the share's cache with this transfer, once per share: libcurl
    /// reads the files named on a handle at every transfer of it, and a re-read would bring
    /// back an entry a `max-age=0` removed. The handle forgets the file at its next reset
    /// (`EasyHandle.reset`); the share's cache remembers it and writes itself back to it
    /// when the driver ends (`DriverLoop.teardown`).
    func loadHSTSFileIfNeeded(on easy: EasyHandle) {
        guard let path = hstsFileToLoad else { return }
        if easy.set(CURLOPT_HSTS, path) {
            easy.hasHSTSFileList = true
            hstsFileToLoad = nil
        }
    }
}
