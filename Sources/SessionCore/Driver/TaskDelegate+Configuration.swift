internal import CCurl
import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The curl options of each exchange (driver thread).
extension TaskDelegate {
    // MARK: - Configuring the easy handle

    /// Sets every option of the next request on the easy handle: freshly reset, or reused as
    /// it was when its last transfer set only options this sets again (`EasyHandle.needsReset`).
    func configure(share: UnsafeMutableRawPointer, network: NetworkOptions, shareHoldsHSTS: Bool) -> SessionError? {
        let url = prepared.url
        // Parsed on the caller's thread (`CurlURL`): curl copies the parsed handle instead of
        // parsing the string again; the handle keeps it while curl may read it.
        var ok = easy.setURL(prepared.urlString, parsed: prepared.curlURL)
        if !easy.hasBaseOptions {
            // The same for every transfer: kept by a handle reused without a reset.
            ok = ok && easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_NOSIGNAL, 1)
            easy.set(CURLOPT_PATH_AS_IS, 1)  // as `CurlURL` parses: the path as given
            _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_HEADERFUNCTION, CurlCallbacks.header)
            _ = curlew_easy_setopt_write_function(easy.raw, CURLOPT_WRITEFUNCTION, CurlCallbacks.write)
            // Always install the read callback: without one, curl reads request bodies from stdin.
            _ = curlew_easy_setopt_read_function(easy.raw, CurlCallbacks.read)
            _ = curlew_easy_setopt_seek_function(easy.raw, CurlCallbacks.seek)
            easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
            easy.set(CURLOPT_TCP_KEEPALIVE, 1)
            // The callbacks' user data: the handle's slot, which names the running transfer.
            let slot = UnsafeMutableRawPointer(easy.transferSlot)
            easy.set(CURLOPT_PRIVATE, pointer: slot)
            easy.set(CURLOPT_HEADERDATA, pointer: slot)
            easy.set(CURLOPT_WRITEDATA, pointer: slot)
            easy.set(CURLOPT_READDATA, pointer: slot)
            easy.set(CURLOPT_SEEKDATA, pointer: slot)
            // When the transfer gets a connection: its idle clock starts then, and TLS
            // admission runs in the prerequest callback.
            _ = curlew_easy_setopt_resolver_start_function(easy.raw, CurlCallbacks.resolverStarted)
            easy.set(CURLOPT_RESOLVER_START_DATA, pointer: slot)
            _ = curlew_easy_setopt_sockopt_function(easy.raw, CurlCallbacks.socketOpened)
            easy.set(CURLOPT_SOCKOPTDATA, pointer: slot)
            _ = curlew_easy_setopt_prereq_function(easy.raw, CurlCallbacks.prerequest)
            easy.set(CURLOPT_PREREQDATA, pointer: slot)
            // The manager's HTTP version, proxy and socket: the same for every transfer of its
            // handles (two string options fewer per request on a reused handle).
            switch engine.configuration.httpVersion {
            case .http1_1: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
            case .http2: easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            case .http2PriorKnowledge:
                easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE))
                if !CurlRuntime.reusesPriorKnowledgeConnections {
                    // libcurl before 8.0 breaks a prior-knowledge connection it reuses (curl
                    // issue 10634): one connection per request there, slower but every request
                    // answered. (An https URL negotiates HTTP/2 by ALPN and is not affected,
                    // but a handle's base options cannot tell its URLs apart.)
                    easy.set(CURLOPT_FRESH_CONNECT, 1)
                    easy.set(CURLOPT_FORBID_REUSE, 1)
                }
            }
            switch engine.configuration.proxy {
            case .environment where !engine.environmentNamesProxy:
                // No proxy variable was set when the manager was made: "no proxy" said outright,
                // and an explicit `NOPROXY`, spare libcurl its five `getenv` scans per request.
                easy.set(CURLOPT_PROXY, "")
                easy.set(CURLOPT_NOPROXY, "")
            case .environment:
                if let bypass = engine.proxyBypass { easy.set(CURLOPT_NOPROXY, bypass) }
                // An `https://` proxy from the environment is judged as one set outright: by
                // the system's authorities and the configured file (ignored for a plain proxy).
                easy.set(CURLOPT_PROXY_CAINFO, engine.configuration.certificateAuthorityFile ?? CurlRuntime.systemCABundle)
                configureProxyCredential()
            case .none: easy.set(CURLOPT_PROXY, "")
            case .url(let proxy):
                easy.set(CURLOPT_PROXY, proxy)
                if engine.configuration.proxy.isHTTPS {
                    // The proxy's own certificate: the system's authorities and the configured file.
                    easy.set(CURLOPT_PROXY_CAINFO, engine.configuration.certificateAuthorityFile ?? CurlRuntime.systemCABundle)
                }
                // Only the configured bypass list: an empty one overrides a `no_proxy` in the
                // environment, which libcurl would otherwise apply to an explicit proxy too.
                easy.set(CURLOPT_NOPROXY, engine.proxyBypass ?? "")
                configureProxyCredential()
            }
            if let path = engine.configuration.unixSocketPath { easy.set(CURLOPT_UNIX_SOCKET_PATH, path) }
            if let error = network.apply(to: easy) { return error }
            easy.hasBaseOptions = ok
        } else {
            network.reloadResolve(on: easy)
        }
        if let addresses = engine.proxyBypassAddresses, addresses.bypasses(host: prepared.url.host ?? "") {
            // An IPv6 entry of the bypass list, which libcurl 7.88 cannot match: this request
            // goes direct by an option of its own (the handle is reset after it).
            easy.noteTransferSpecificOption()
            easy.set(CURLOPT_NOPROXY, "*")
        }
        easy.transferSlot.pointee = unmanagedSelf
        let receiveIsCapped = configureRates()
        if bodyReader != nil || receiveIsCapped {
            // Upload counters (and the idle clock of a body the server stops reading) come
            // from curl's progress callback, and so do the counts a cap's waits are measured
            // on; an uncapped request without a body needs none: curl would call it on every
            // pass of the loop for nothing.
            easy.noteTransferSpecificOption()
            _ = curlew_easy_setopt_xferinfo_function(easy.raw, CurlCallbacks.progress)
            easy.set(CURLOPT_XFERINFODATA, pointer: UnsafeMutableRawPointer(easy.transferSlot))
            easy.set(CURLOPT_NOPROGRESS, 0)
        }
        joinShare(share)  // and libcurl's cookie engine on or off (Features/Cookies)
        // After the join: a file named on a handle without the share's cache would fill a
        // private one.
        if shareHoldsHSTS { network.loadHSTSFileIfNeeded(on: easy) }

        var multiplexes = PreparedRequest.canMultiplex(prepared.urlOrigin, version: engine.configuration.httpVersion)
        if multiplexes, receiveIsCapped, CurlRuntime.pacesWholeHTTP2Connections {
            // libcurl before 8.2 paces a capped HTTP/2 stream by not reading its connection:
            // every other stream on it waited behind the capped one (ten 1 MiB siblings of an
            // 8 MiB download capped at 256 KB/s took 30 s). A capped transfer opens a connection
            // of its own instead of joining one (still HTTP/2: a server may speak nothing else),
            // and does not wait to multiplex; libcurl gives the next requests the older
            // connections first. The connection closes after it: under a manager-wide cap every
            // transfer opens one, and kept they would pile up in the pool. (The cap marks the
            // handle for a reset before its next transfer.)
            easy.set(CURLOPT_FRESH_CONNECT, 1)
            easy.set(CURLOPT_FORBID_REUSE, 1)
            // Nor may a later request join it as a new stream, which happened whenever the
            // capped connection was the only one to the host (the request then waited for the
            // capped download to end). libcurl reuses a TLS connection only for a transfer of
            // the same TLS options, so the capped one's carry a flag only Windows' Schannel
            // reads (revocation checks best-effort; OpenSSL, the only back end Curlew runs on,
            // ignores it): the same handshake, and a connection no uncapped request matches.
            // (Its TLS sessions are kept apart the same way: it resumes only another capped
            // transfer's.) A cleartext prior-knowledge connection has no TLS options to tell it
            // apart; before libcurl 8.0 it is fresh and closed for every transfer anyway.
            easy.set(CURLOPT_SSL_OPTIONS, Int(CURLSSLOPT_REVOKE_BEST_EFFORT))
            multiplexes = false
        }
        // PIPEWAIT makes a transfer wait for a connection whose multiplexing is not known
        // yet rather than open another. Only where multiplexing can happen: on a cleartext
        // http:// URL under `.http2` (HTTP/1.1 only), it made parallel requests to one host
        // queue behind each other's response heads.
        if multiplexes {
            easy.set(CURLOPT_PIPEWAIT, 1)
            // The task's priority as its HTTP/2 stream weight, 1...256 (weights only matter
            // relative to the other streams of the connection: the default 0.5 gives 129).
            easy.set(CURLOPT_STREAM_WEIGHT, 1 + Int((Double(task.priority) * 255).rounded()))
        }
        easy.setAcceptEncoding(decodesBody ? prepared.acceptEncoding : nil)

        var headerLines = download?.headerLines(adding: prepared.headerLines) ?? prepared.headerLines
        // curl adds "Expect: 100-continue" to bodies over 1 MiB and then waits up to a second
        // for an answer many servers never send. URLSession never sends it; neither does Curlew
        // unless the caller asks. Only a body makes curl add it: without one the list stays
        // shorter (curl walks it for every header it might write).
        if dropsExpectation {
            // A 417 refused the caller's expectation: the request goes without it, and without
            // the one curl would add (RFC 9110 §10.1.1).
            headerLines = Self.droppingContinueExpectation(from: headerLines)
        } else if bodyReader != nil && !prepared.hasExpectHeader {
            headerLines.append("Expect:")
        }
        if easy.isBoundToCookieHost, !prepared.namesHost {
            // This libcurl keeps the name an earlier request's `Host` field gave this handle
            // (a hop before a redirect whose hook sent a request without the field): naming the
            // hop's own authority replaces it, or the jar's cookies would be picked for that name.
            headerLines.append("Host: " + RedirectPolicy.authority(of: prepared.url))
        }
        guard easy.setHeaders(headerLines) else { return .curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory") }
        if prepared.namesHost && CurlRuntime.keepsCookieHost { easy.isBoundToCookieHost = true }

        configureMethodAndBody()
        // libcurl upgrades an http:// URL of a host it knows from HSTS while it connects,
        // after this: the security policy must already be in place for that handshake.
        mayBecomeHTTPS = shareHoldsHSTS && !prepared.urlOrigin.isHTTPS
        // Timeouts are the driver's (`TransferClock`), not curl's low-speed check: curl's
        // averages over a window and fired seconds after the last byte moved.
        if let error = configureTLS() { return error }

        let bufferSize = engine.configuration.receiveBufferSize
            ?? (multiplexes ? task.options.multiplexedReceiveBufferSize : nil) ?? task.options.defaultReceiveBufferSize
        // Never below libcurl's default 16 KiB: libcurl 7.88 keeps a transfer's buffer when the
        // transfer ends on an HTTP/2 connection still in use, `curl_easy_reset` sets the size
        // back to 16 KiB, and a new size is refused while the old buffer exists. A smaller
        // buffer kept that way would then be read into as if it held 16 KiB.
        // A capped receive reads through the smallest buffer: libcurl 7.88 reads up to 100
        // buffers in one pass before its rate check, so the buffer bounds the burst (unless
        // the handle's size is the kept one's).
        easy.setReceiveBufferSize(receiveIsCapped ? 16 << 10 : max(16 << 10, min(bufferSize, 10 << 20)))
        // What libcurl reads with, which a refused size leaves as it was (the size a kept
        // buffer was made with, unless a reset set it back): the guard's bound on a read.
        receiveBufferBytes = Int64(easy.receiveBufferSize)
        return ok ? nil : .badURL("libcurl rejected '\(url.absoluteString)'")
    }

    func configureProxyCredential() {
        guard let credential = engine.configuration.proxyCredential, let user = credential.user else { return }
        easy.set(CURLOPT_PROXYUSERNAME, user)
        easy.set(CURLOPT_PROXYPASSWORD, credential.password ?? "")
        // Basic, sent with the first request: asking the proxy which scheme it wants would cost
        // a 407 round trip per request (curl forgets the answer when the handle is reset).
        easy.set(CURLOPT_PROXYAUTH, HTTPAuthenticationScheme.basic.curlAuthBit)
    }

    func configureMethodAndBody() {
        let kind = prepared.methodKind
        if kind == .head {
            easy.set(CURLOPT_NOBODY, 1)
        } else if bodyReader == nil && kind == .get {
            easy.set(CURLOPT_HTTPGET, 1)
        } else if bodyReader == nil && kind == .other {
            easy.set(CURLOPT_CUSTOMREQUEST, prepared.method)  // DELETE, OPTIONS, ... without a body
        } else {
            // Any method with a body (or POST/PUT/PATCH with an empty one): POST mechanics
            // with the caller's method name; the read callback supplies the bytes.
            easy.set(CURLOPT_POST, 1)
            easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: bodyReader.map { $0.length ?? -1 } ?? 0)
            if kind != .post { easy.set(CURLOPT_CUSTOMREQUEST, prepared.method) }
        }
    }

    func configureTLS() -> SessionError? {
        // Each hop is configured afresh, so an http:// hop needs no TLS options (a redirect
        // to https:// sets them when it is configured).
        guard prepared.urlOrigin.isHTTPS || mayBecomeHTTPS else { return configureSecurity() }
        let version = switch engine.configuration.tlsMinimumVersion {
        case .tls1_2: Int(CURL_SSLVERSION_TLSv1_2)
        case .tls1_3: Int(CURL_SSLVERSION_TLSv1_3)
        }
        // No CA file and no CA path for libcurl: the policy decides the origin's trust with
        // its own store in the verify callback, which replaces OpenSSL's verification, so a
        // store libcurl loaded would never be read. Naming the system bundle made libcurl parse
        // it at each multi handle's first handshake, on the driver thread, besides the policy's
        // own parse (~230M instructions, callgrind: half of a manager's first HTTPS request).
        // A handshake that somehow ran without the callback would find no anchor: closed.
        guard easy.setOriginAuthorities(file: nil, minimumVersion: version) else {
            return .tlsHandshakeFailed("libcurl refused the certificate authorities or the TLS version")
        }
        return configureSecurity()
    }
}

extension TaskDelegate {
    /// The receive and send caps of this exchange: the manager's, the task's and (for
    /// sending) a throttled multipart body's, the lowest of each. Only a cap is set: a handle
    /// that had one is reset before its next transfer (`EasyHandle.needsReset`). Returns
    /// whether receiving is capped.
    func configureRates() -> Bool {
        // The engine's configuration is read field by field, here and on every per-request
        // path: `let configuration = engine.configuration` copied the whole struct (retaining
        // each of its references, then releasing them), ~700 instructions per request.
        let (taskReceive, taskSend) = task.protected.withLock { ($0.maximumReceiveRate, $0.maximumSendRate) }
        let receive = TransferRate.cap(engine.configuration.maximumReceiveRate, taskReceive)
        if let receive { easy.set(CURLOPT_MAX_RECV_SPEED_LARGE, offset: receive) }
        var send: Int64?
        if let bodyReader {
            send = TransferRate.cap(engine.configuration.maximumSendRate, taskSend, bodyReader.sendRateCap)
            if let send { easy.set(CURLOPT_MAX_SEND_SPEED_LARGE, offset: send) }
        }
        // libcurl's waits for the caps are not the server's silence (`RatePace`).
        if receive != nil || send != nil || state.clock.isRateCapped {
            state.capRates(receive: receive, send: send, now: passClock.now)
        }
        return receive != nil
    }

    /// `lines` without the `100-continue` expectation a 417 refused. Other expectations of an
    /// `Expect` line stay (the server may refuse those too: then the 417 is the answer); one
    /// whose value has a quoted string goes whole rather than be split at a comma inside it.
    /// Any element that mentions `100-continue` goes (`100-continue;ack=1` too): libcurl
    /// finds it as a substring, would wait for a 100 again and answer the next 417 by
    /// resending. With no expectation left, `Expect:` keeps curl from adding its own.
    static func droppingContinueExpectation(from lines: [String]) -> [String] {
        var result: [String] = []
        var keptExpectation = false
        for line in lines {
            guard line.utf8.count >= 7, line.prefix(7).lowercased() == "expect:" else {
                result.append(line)
                continue
            }
            let value = line.dropFirst(7)
            guard !value.contains("\"") else { continue }
            let others = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty && !$0.lowercased().contains("100-continue") }
            guard !others.isEmpty else { continue }
            result.append("Expect: " + others.joined(separator: ", "))
            keptExpectation = true
        }
        if !keptExpectation { result.append("Expect:") }
        return result
    }
}
