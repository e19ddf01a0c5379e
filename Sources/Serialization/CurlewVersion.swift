/// Curlew's version, as sent in the default `User-Agent` header.
public enum CurlewVersion {
    /// The version string, `major.minor.patch`.
    public static let string = "0.1.0"
}
