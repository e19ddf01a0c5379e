import Foundation
import Glibc
import Synchronization
import XCTest

/// The audit that runs after every namespace test (`ReachabilityNamespaceTestCase`) must
/// see a thread that sits in another namespace; otherwise its silence would prove nothing.
/// Like every namespace test this runs in a child process of its own.
final class NetworkNamespaceAuditTests: ReachabilityNamespaceTestCase {
    /// Where the thread inside the namespace reports its kernel task id.
    private final class TaskIDBox: Sendable {
        let value = Mutex<Int32?>(nil)
    }

    func testAuditFindsAThreadInsideANamespaceUntilItExits() throws {
        XCTAssertEqual(try NetworkNamespaceAudit.strayThreads(), [], "no thread has joined a namespace yet")

        let client = try XCTUnwrap(client)
        let box = TaskIDBox()
        let joined = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = try? client.perform {
                box.value.withLock { $0 = Self.currentTaskID() }
                joined.signal()
                _ = release.wait(timeout: .now() + 60)
            }
            finished.signal()
        }.start()
        XCTAssertEqual(joined.wait(timeout: .now() + 30), .success, "the thread did not join the namespace")

        let taskID = try XCTUnwrap(box.value.withLock { $0 })
        let stray = try NetworkNamespaceAudit.strayThreads()
        XCTAssertEqual(stray.map(\.taskID), [taskID], "the audit must find exactly the thread inside: \(stray)")
        XCTAssertEqual(stray.first?.namespace, try namespaceLinkText(of: client))

        release.signal()
        XCTAssertEqual(finished.wait(timeout: .now() + 30), .success)
        // The thread's /proc entry goes once the kernel has finished its exit; bounded wait.
        var remaining = try NetworkNamespaceAudit.strayThreads()
        for _ in 0 ..< 3000 where !remaining.isEmpty {
            usleep(10_000)
            remaining = try NetworkNamespaceAudit.strayThreads()
        }
        XCTAssertEqual(remaining, [], "a thread that left stays reported")
    }

    /// "net:[INODE]", as /proc/…/ns/net reads for a thread inside `namespace`.
    private func namespaceLinkText(of namespace: NetworkNamespace) throws -> String {
        var info = stat()
        guard stat("/var/run/netns/\(namespace.name)", &info) == 0 else {
            throw NetworkNamespaceAudit.AuditError(description: "stat /var/run/netns/\(namespace.name): errno \(errno)")
        }
        return "net:[\(info.st_ino)]"
    }

    /// The calling thread's kernel task id, from the /proc/thread-self link ("PID/task/TID").
    private static func currentTaskID() -> Int32? {
        guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else { return nil }
        return link.split(separator: "/").last.flatMap { Int32($0) }
    }
}
