import Foundation
import Glibc
import XCTest

/// An HTTP/2 server over TLS (ALPN "h2", the test certificates' leaf for `localhost`) that
/// misbehaves on request, for the fault tests: Python with hyper-h2 (`h2`, installed into
/// `.build/venv` by Scripts/lib/setup.sh), because nghttpd cannot be made to reset a stream,
/// go away or starve a window. Not cleartext with prior knowledge: libcurl 7.88.1 fails every
/// reuse of such a connection ("Error in the HTTP2 framing layer", curl issue 10634, fixed in
/// 8.0), so no second stream could share one.
///
/// The path picks the behaviour (the query is ignored):
/// - `/ok`: 200 "hello"; `/slow`: the same after 0.3 s (keeps a sibling stream in flight).
/// - `/rst-headers`: the 200 head, then RST_STREAM(INTERNAL_ERROR).
/// - `/rst-body`: the head with a Content-Length of 100,000, 1,000 bytes, then RST_STREAM(INTERNAL_ERROR).
/// - `/refuse-always`: RST_STREAM(REFUSED_STREAM) before any head, every time.
/// - `/refuse-once/KEY`: refused the first time KEY is asked for, "hello" after.
/// - `/drop-once/KEY`: the first time KEY is asked for, the TCP connection is closed without
///   GOAWAY or any answer (a server that died or dropped an idle connection); "hello" after.
/// - `/goaway/KEY/N`: held unanswered until the connection holds N of them; then GOAWAY
///   (NO_ERROR) whose last-stream-id is the second-lowest held stream: those two are answered,
///   the later ones were never processed. After that, KEY answers "hello" at once.
/// - `/close`: the head with a Content-Length of 100,000, 1,000 bytes, then the TCP connection is closed.
/// - `/bigheaders`: a head of 40 headers with 1,000 random characters each (about 40 KB,
///   sent as HEADERS and CONTINUATION frames).
/// - `/window`: a request body is read but never acknowledged (no WINDOW_UPDATE), never answered.
/// - `/slowframes`: 20 DATA frames of 50 bytes, 30 ms apart ("0123456789" repeated).
/// - `/early413`: a request body's first DATA, then (0.1 s later) 413 "early" with END_STREAM,
///   before the rest of the body (RFC 9113 §8.1: a complete answer to an incomplete request).
/// - `/early200`: the same with a 200 (the server needs no more of the body).
/// - `/early200rst`: the same 200, then (0.05 s later) RST_STREAM(NO_ERROR), which RFC 9113
///   §8.1 says a client must not take to discard the answer.
/// Any other path is a 404.
final class FaultHTTP2Peer {
    /// Why the peer cannot run here (the test is skipped).
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    let port: UInt16
    private let process: Process

    private static let script = #"""
        import os, random, select, socket, ssl, string, sys, threading, time
        try:
            import h2.config, h2.connection, h2.errors, h2.events
        except ImportError as error:
            print("no-h2", error, flush=True)
            sys.exit(0)

        parent = os.getppid()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        context.set_alpn_protocols(["h2"])
        state_lock = threading.Lock()
        refused_once = set()
        gone_away = set()

        # One connection, served by one thread: reads, timers and writes all happen in its
        # loop (an SSL socket must not be read and written from two threads at once).
        class Connection:
            def __init__(self, sock):
                self.sock = sock
                self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
                self.held = []
                self.answered = set()
                self.paths = {}
                self.timers = []
                self.closed = False

            def flush(self):
                data = self.conn.data_to_send()
                if data and not self.closed:
                    self.sock.sendall(data)

            def later(self, delay, action):
                self.timers.append((time.monotonic() + delay, action))

            def respond(self, stream, body, status="200", extra=()):
                headers = [(":status", status), ("content-length", str(len(body)))] + list(extra)
                self.conn.send_headers(stream, headers)
                self.conn.send_data(stream, body, end_stream=True)

            def request(self, stream, path):
                path = path.split("?")[0]
                parts = path.strip("/").split("/")
                if path == "/ok":
                    self.respond(stream, b"hello")
                elif path == "/slow":
                    self.later(0.3, lambda: self.respond(stream, b"hello"))
                elif path == "/rst-headers":
                    self.conn.send_headers(stream, [(":status", "200"), ("content-length", "5")])
                    self.conn.reset_stream(stream, h2.errors.ErrorCodes.INTERNAL_ERROR)
                elif path in ("/rst-body", "/close"):
                    self.conn.send_headers(stream, [(":status", "200"), ("content-length", "100000")])
                    self.conn.send_data(stream, b"x" * 1000)
                    if path == "/rst-body":
                        self.later(0.1, lambda: self.conn.reset_stream(stream, h2.errors.ErrorCodes.INTERNAL_ERROR))
                    else:
                        self.later(0.1, self.hang_up)
                elif path == "/refuse-always":
                    self.conn.reset_stream(stream, h2.errors.ErrorCodes.REFUSED_STREAM)
                elif parts[0] == "refuse-once" and len(parts) == 2:
                    with state_lock:
                        first = parts[1] not in refused_once
                        refused_once.add(parts[1])
                    if first:
                        self.conn.reset_stream(stream, h2.errors.ErrorCodes.REFUSED_STREAM)
                    else:
                        self.respond(stream, b"hello")
                elif parts[0] == "drop-once" and len(parts) == 2:
                    with state_lock:
                        first = parts[1] not in refused_once
                        refused_once.add(parts[1])
                    if first:
                        self.hang_up()  # the TCP connection closes, no GOAWAY, nothing answered
                    else:
                        self.respond(stream, b"hello")
                elif parts[0] == "goaway" and len(parts) == 3:
                    self.goaway(stream, parts[1], int(parts[2]))
                elif path == "/bigheaders":
                    letters = string.ascii_letters + string.digits
                    extra = [("x-big-%d" % i, "".join(random.choice(letters) for _ in range(1000))) for i in range(40)]
                    self.respond(stream, b"hello", extra=extra)
                elif path in ("/window", "/early413", "/early200", "/early200rst"):
                    pass
                elif path == "/slowframes":
                    self.conn.send_headers(stream, [(":status", "200"), ("content-length", "1000")])
                    for i in range(20):
                        self.later(0.03 * (i + 1), lambda last=(i == 19): self.conn.send_data(stream, b"0123456789" * 5, end_stream=last))
                else:
                    self.respond(stream, b"not found", status="404")

            def goaway(self, stream, key, count):
                with state_lock:
                    done = key in gone_away
                if done:
                    self.respond(stream, b"hello")
                    return
                self.held.append(stream)
                if len(self.held) < count:
                    return
                with state_lock:
                    gone_away.add(key)
                streams = sorted(self.held)
                # Written by hand: h2 sends nothing after its own GOAWAY, and the streams up to
                # last-stream-id are answered after it, as a draining server does.
                self.flush()
                frame = (8).to_bytes(3, "big") + bytes([7, 0]) + (0).to_bytes(4, "big")
                frame += streams[1].to_bytes(4, "big") + (0).to_bytes(4, "big")
                self.sock.sendall(frame)
                def answer():
                    for answered in streams[:2]:
                        self.respond(answered, b"hello")
                self.later(0.2, answer)
                self.later(0.6, self.hang_up)

            def hang_up(self):
                self.closed = True

            def receive(self):
                data = self.sock.recv(65536)
                if not data:
                    self.closed = True
                    return
                for event in self.conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        path = dict(event.headers).get(":path", "/")
                        self.paths[event.stream_id] = path
                        self.request(event.stream_id, path)
                    elif isinstance(event, h2.events.DataReceived):
                        path = self.paths.get(event.stream_id, "").split("?")[0]
                        if path != "/window":
                            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        if path == "/early413" and event.stream_id not in self.answered:
                            self.answered.add(event.stream_id)
                            self.later(0.1, lambda stream=event.stream_id: self.respond(stream, b"early", status="413"))
                        if path == "/early200" and event.stream_id not in self.answered:
                            self.answered.add(event.stream_id)
                            self.later(0.1, lambda stream=event.stream_id: self.respond(stream, b"early"))
                        if path == "/early200rst" and event.stream_id not in self.answered:
                            self.answered.add(event.stream_id)
                            self.later(0.1, lambda stream=event.stream_id: self.respond(stream, b"early"))
                            self.later(0.15, lambda stream=event.stream_id: self.conn.reset_stream(stream, 0))

            def serve(self):
                try:
                    self.sock = context.wrap_socket(self.sock, server_side=True)
                    self.conn.initiate_connection()
                    self.flush()
                    while not self.closed:
                        readable = self.sock.pending() > 0 or select.select([self.sock], [], [], 0.02)[0]
                        if readable:
                            self.receive()
                        now = time.monotonic()
                        due = [timer for timer in self.timers if timer[0] <= now]
                        self.timers = [timer for timer in self.timers if timer[0] > now]
                        for _, action in due:
                            if not self.closed:
                                action()
                        self.flush()
                except Exception as error:
                    print("connection ended:", repr(error), file=sys.stderr, flush=True)
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.sock.close()

        def accept(listener):
            while True:
                sock, _ = listener.accept()
                threading.Thread(target=Connection(sock).serve, daemon=True).start()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        threading.Thread(target=watch_parent, daemon=True).start()
        print("ready", listener.getsockname()[1], flush=True)
        accept(listener)
        """#

    /// The venv's Python, found from this file's path as CurlewTestSupport finds gunicorn.
    private static var python: URL {
        URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()  // SessionCoreTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // <repo>
            .appendingPathComponent(".build/venv/bin/python")
    }

    /// Starts a peer (one per test) serving `certificateChain` with `privateKey` (PEM files);
    /// `stop()` kills it. Throws `Unavailable` when the venv or `h2` is missing.
    init(certificateChain: URL, privateKey: URL) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            throw Unavailable(description: "\(Self.python.path) is missing: Scripts/test.sh (ensure_python_peers) creates the venv with h2")
        }
        process = Process()
        process.executableURL = Self.python
        process.arguments = ["-c", Self.script, certificateChain.path, privateKey.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Bounded: the script prints one line and flushes, or exits (end of file).
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let words = text.split(separator: " ")
        if words.first == "no-h2" {
            kill(process.processIdentifier, SIGKILL)
            throw Unavailable(description: "the h2 package is not installed in \(Self.python.path) "
                + "(Scripts/lib/setup.sh's ensure_python_peers adds it): \(text)")
        }
        guard words.count == 2, words[0] == "ready", let port = UInt16(words[1]) else {
            kill(process.processIdentifier, SIGKILL)
            throw Unavailable(description: "the HTTP/2 fault peer did not start: '\(text)'")
        }
        self.port = port
    }

    /// `https://localhost:<port><path>`.
    func url(_ path: String) throws -> URL {
        try XCTUnwrap(URL(string: "https://localhost:\(port)\(path)"))
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
