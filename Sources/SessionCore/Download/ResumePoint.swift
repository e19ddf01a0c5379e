import Foundation

/// Where a stopped download can continue from, as the driver saw it: the partial file, how
/// many bytes it holds, what vouches for them and where they lie in the representation.
/// Turned into `DownloadResumeData` off the driver thread (`resumeData(for:)`); a
/// `DownloadFile` also keeps one for the bytes an earlier task or attempt left it.
struct ResumePoint: Sendable {
    var fileURL: URL
    var bytesReceived: Int64
    var entityTag: String?
    var lastModified: String?
    var expectedLength: Int64?
    /// The byte range the file is for (nil, nil: the whole body).
    var rangeFirst: Int64?
    var rangeLast: Int64?
}
