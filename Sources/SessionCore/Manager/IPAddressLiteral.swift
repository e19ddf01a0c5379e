import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Recognises IP address literals with the C library's own parser (`inet_pton`), the one
/// libcurl's resolver uses for them too.
enum IPAddressLiteral {
    enum Family { case v4, v6 }

    /// The family of `text` when it is an address literal (no brackets, no zone), else nil.
    static func family(of text: String) -> Family? {
        guard !text.isEmpty, text.utf8.count < 64, !text.utf8.contains(0) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &buffer) == 1 { return .v4 }
        if inet_pton(AF_INET6, text, &buffer) == 1 { return .v6 }
        return nil
    }
}
