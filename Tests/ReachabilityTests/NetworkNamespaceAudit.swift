import Foundation

/// Finds threads of this process that sit in a network namespace other than the main
/// thread's. setns(2) moves only the calling thread, and every thread it creates inherits
/// its namespace, so a test that joins a namespace on a thread can leave threads behind
/// (libdispatch workers above all) that later open other tests' sockets in it.
enum NetworkNamespaceAudit {
    /// A thread found outside the main thread's network namespace.
    struct StrayThread: CustomStringConvertible, Equatable {
        /// The kernel's id of the thread (its directory under /proc/self/task).
        let taskID: Int32
        /// The thread's name (`comm`), e.g. "Curlew.Reachab" or a Dispatch worker's.
        let name: String
        /// The namespace it is in, as the link reads: "net:[4026532300]".
        let namespace: String

        var description: String { "thread \(taskID) \"\(name)\" in \(namespace)" }
    }

    struct AuditError: Error, CustomStringConvertible {
        var description: String
    }

    /// The main thread's network namespace: the one the test process started in, because
    /// no test moves the main thread (the namespace tests join namespaces on threads of
    /// their own, in a child process).
    static func originalNamespace() throws -> String {
        guard let namespace = namespaceLink(ofTask: getpid()) else {
            throw AuditError(description: "the main thread's /proc/self/task entry is unreadable")
        }
        return namespace
    }

    /// Every live thread of this process whose network namespace differs from the main
    /// thread's. A thread that exits while this runs is skipped (its entry vanishes).
    static func strayThreads() throws -> [StrayThread] {
        let original = try originalNamespace()
        let taskIDs = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { Int32($0) }
        guard !taskIDs.isEmpty else { throw AuditError(description: "/proc/self/task lists no threads") }
        return taskIDs.sorted().compactMap { taskID in
            guard let namespace = namespaceLink(ofTask: taskID), namespace != original else { return nil }
            let name = (try? String(contentsOfFile: "/proc/self/task/\(taskID)/comm", encoding: .utf8)) ?? "?"
            return StrayThread(taskID: taskID, name: name.trimmingCharacters(in: .whitespacesAndNewlines),
                               namespace: namespace)
        }
    }

    /// The target of /proc/self/task/TID/ns/net, or nil when the thread is gone.
    static func namespaceLink(ofTask taskID: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/task/\(taskID)/ns/net")
    }
}
