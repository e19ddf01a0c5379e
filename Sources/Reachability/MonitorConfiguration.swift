/// Tunables of a monitor. The defaults suit applications; tests shrink the buffer to
/// force ENOBUFS.
struct MonitorConfiguration: Sendable {
    /// SO_RCVBUF(FORCE) for the event socket. 1 MiB absorbs long flap storms; overflow is
    /// still handled by re-dumping.
    var eventBufferSize: Int? = 1 << 20
    /// An evaluation waits until no event arrived for this long …
    var quietPeriod: Double = 0.15
    /// … but never longer than this after the first event, so a storm cannot starve it.
    var maximumDelay: Double = 0.5
    /// SO_RCVTIMEO for request/reply conversations: the kernel answers at once, so a silent
    /// socket is an error, not a reason to block the monitor forever.
    var queryTimeout: Double = 2
    /// Where interface kinds are looked up.
    var sysfsRoot: String = "/sys/class/net"
}
