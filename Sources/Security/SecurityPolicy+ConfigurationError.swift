/// A policy that is set up so that it can never accept a server.
extension SecurityPolicy {
    /// Thrown by `SecurityPolicy.validateConfiguration()`.
    public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The kind of configuration mistake.
        public enum Code: String, Sendable, Hashable {
            /// A pinning mode with an empty `pinnedCertificates`.
            case noPinnedCertificates
        }

        /// The kind of configuration mistake.
        public let code: Code
        /// What to change, in words.
        public let detail: String

        /// One line describing the mistake.
        public var description: String { "invalid security policy: \(detail)" }
    }
}
