internal import CCurl
import Foundation

/// The C entry points libcurl calls during `curl_multi_perform`, on the driver thread.
///
/// Each receives the easy handle's `EasyHandle.transferSlot`, which holds the transfer's
/// `TaskDelegate` as an opaque pointer that the driver retained (`Unmanaged.passRetained`)
/// when it added the handle and releases (emptying the slot) only after
/// `curl_multi_remove_handle`: a callback can never outlive its object. No user code runs
/// here; the delegate only records and, where needed, hops to the manager's queues.
enum CurlCallbacks {
    /// The delegate in the slot `pointer` points at; nil for no slot or an empty one.
    static func delegate(_ pointer: UnsafeMutableRawPointer?) -> TaskDelegate? {
        occupant(of: pointer).map { Unmanaged<TaskDelegate>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The opaque delegate pointer in the slot `pointer` points at.
    @inline(__always)
    private static func occupant(of pointer: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        pointer?.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
    }

    /// Calls `body` with the slot's delegate without retaining it for the call: the driver's
    /// retained reference (released only after `curl_multi_remove_handle`) keeps it alive,
    /// and the header and write callbacks run several times per response.
    @inline(__always)
    private static func withDelegate<Result>(
        _ pointer: UnsafeMutableRawPointer?, otherwise: Result, _ body: (TaskDelegate) -> Result
    ) -> Result {
        guard let delegate = occupant(of: pointer) else { return otherwise }
        return Unmanaged<TaskDelegate>.fromOpaque(delegate)._withUnsafeGuaranteedRef(body)
    }

    static let header: curl_write_callback = { buffer, size, count, userdata in
        let length = size * count
        guard let buffer else { return 0 }
        return withDelegate(userdata, otherwise: 0) { delegate in
            delegate.didReceiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
        }
    }

    static let write: curl_write_callback = { buffer, size, count, userdata in
        let length = size * count
        guard let buffer else { return 0 }
        return withDelegate(userdata, otherwise: 0) { delegate in
            switch delegate.didReceiveBody(UnsafeRawBufferPointer(start: buffer, count: length)) {
            case .accepted: return length
            case .pause: return Int(CURL_WRITEFUNC_PAUSE)
            case .abort: return 0
            }
        }
    }

    static let read: curl_read_callback = { buffer, size, count, userdata in
        guard let buffer, let delegate = CurlCallbacks.delegate(userdata) else { return Int(CURL_READFUNC_ABORT) }
        if delegate.state.isSuspended { return Int(CURL_READFUNC_PAUSE) }  // see didReceiveBody
        if delegate.answeredWhole {
            // See didProgress. Not while libcurl holds answer bytes Curlew paused (a response
            // hook deciding, a consumer behind): its `downloaded` counted them, and the abort
            // would free them. The receive's unpause hands them over; the next pass lifts the
            // send pause again (`answeredWholeWaits`), and this ends it.
            guard delegate.state.holdsReceiving || delegate.lastWritePaused else { return Int(CURL_READFUNC_ABORT) }
            delegate.answeredWholeWaits = true
            return Int(CURL_READFUNC_PAUSE)
        }
        switch delegate.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count)) {
        case .bytes(let count): return count
        case .pause: return Int(CURL_READFUNC_PAUSE)  // the body pump's wake-up resumes it
        case .failed: return Int(CURL_READFUNC_ABORT)
        }
    }

    static let seek: curl_seek_callback = { userdata, offset, origin in
        guard let delegate = CurlCallbacks.delegate(userdata), offset == 0, origin == SEEK_SET else {
            return Int32(CURL_SEEKFUNC_CANTSEEK)
        }
        return delegate.rewindBody() ? Int32(CURL_SEEKFUNC_OK) : Int32(CURL_SEEKFUNC_CANTSEEK)
    }

    static let progress: curl_xferinfo_callback = { userdata, downloadTotal, downloaded, uploadTotal, uploaded in
        guard let delegate = CurlCallbacks.delegate(userdata) else { return 1 }
        let continues = delegate.didProgress(
            uploaded: Int64(uploaded), uploadTotal: Int64(uploadTotal),
            downloaded: Int64(downloaded), downloadTotal: Int64(downloadTotal))
        return continues ? 0 : 1
    }

    // The connection callbacks: the transfer has left libcurl's queue for a connection (it
    // resolves, connects, or was handed a connection), so its idle clock may run
    // (`TransferClock.Hold.noConnection`). A transfer waiting under libcurl's connection
    // limits gets none of them.

    /// `CURLOPT_RESOLVER_START_FUNCTION`: a name lookup for a new connection begins (not
    /// called when the DNS cache answers; the socket callback follows at once then).
    static let resolverStarted: curl_resolver_start_callback = { _, _, userdata in
        withDelegate(userdata, otherwise: ()) { $0.isConnecting() }
        return 0
    }

    /// `CURLOPT_SOCKOPTFUNCTION`: a socket for a new connection was made, before connect(2).
    static let socketOpened: curl_sockopt_callback = { userdata, _, _ in
        withDelegate(userdata, otherwise: ()) { $0.isConnecting() }
        return CURL_SOCKOPT_OK
    }

    /// `CURLOPT_PREREQFUNCTION`: the connection (new or reused) is ready and the request is
    /// about to be sent; TLS admission decides here too (`TLSHandshakeContext.admitRequest`).
    static let prerequest: curl_prereq_callback = { userdata, _, _, _, _ in
        withDelegate(userdata, otherwise: CURL_PREREQFUNC_ABORT) { delegate in
            delegate.connectionIsReady() ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
        }
    }
}
