import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SessionCore

/// What the mixed soak does with one task: which request, and what it does to it meanwhile.
/// Drawn from the seed and the task number, so a failing task can be run again alone.
struct MixedPlan: Sendable {
    enum Kind: String, Sendable, CaseIterable {
        /// GET /small.txt (100 bytes).
        case small
        /// POST to the upload sink, 1 B – 64 KiB.
        case upload
        /// A download task of 1 KiB – 257 KiB of /1g.bin (a byte range) to a file.
        case download
        /// GET /soak-redirect: nginx answers 301 to /soak-redirect/ (a directory), whose
        /// index.html is a copy of small.txt.
        case redirect
    }
    enum Action: String, Sendable, CaseIterable {
        case none
        case cancelBeforeResume
        case cancelAfterResume
        case cancelLater
        case suspendThenResume
        case suspendThenCancel
    }

    let id: Int
    let kind: Kind
    let action: Action
    /// Body bytes: the upload's size or the download's range length.
    let size: Int
    /// Microseconds before the delayed step (a late cancel, a suspend).
    let delay: Int
    /// Microseconds a suspended task stays suspended.
    let pause: Int

    init(id: Int, seed: UInt64) {
        var dice = Dice(seed: seed, id: id)
        self.id = id
        let kinds: [Kind] = [.small, .small, .small, .small, .upload, .upload, .download, .download, .redirect, .redirect]
        kind = kinds[dice.below(kinds.count)]
        let roll = dice.below(100)
        switch roll {
        case 0..<6: action = .cancelBeforeResume      // 20% cancelled in all
        case 6..<11: action = .cancelAfterResume
        case 11..<17: action = .cancelLater
        case 17..<20: action = .suspendThenCancel
        case 20..<30: action = .suspendThenResume     // 10% suspended and resumed
        default: action = .none
        }
        switch kind {
        case .upload: size = 1 + dice.below(64 * 1024)
        case .download: size = 1024 + dice.below(256 * 1024)
        case .small, .redirect: size = 100
        }
        delay = dice.below(3_000)
        pause = dice.below(5_000)
    }

    var cancels: Bool { [.cancelBeforeResume, .cancelAfterResume, .cancelLater, .suspendThenCancel].contains(action) }

    /// Checks a successful response; returns nil when it is the expected one, else why not.
    func problem(with response: DataResponse, destination: URL) -> String? {
        guard let head = response.response else { return "no response" }
        let body = response.data ?? Data()
        switch kind {
        case .small:
            if head.statusCode != 200 || body.count != 100 { return "status \(head.statusCode), \(body.count) bytes" }
        case .redirect:
            let url = head.url?.absoluteString ?? ""
            if head.statusCode != 200 || body.count != 100 || !url.hasSuffix("/soak-redirect/") {
                return "status \(head.statusCode), \(body.count) bytes, at \(url)"
            }
        case .upload:
            if head.statusCode != 200 || body != Data("ok\n".utf8) { return "status \(head.statusCode), \(body.count) bytes" }
        case .download:
            var info = stat()
            let found = stat(destination.path, &info) == 0 ? Int(info.st_size) : -1
            if head.statusCode != 206 || response.fileURL?.path != destination.path || found != size {
                return "status \(head.statusCode), file \(response.fileURL?.path ?? "none") of \(found) bytes, expected \(size)"
            }
        }
        return nil
    }
}
