import Foundation

extension DownloadResumeData {
    /// A new partial-file URL in `directory` that resume data may name.
    ///
    /// `downloadTask(withResumeData:)` accepts only a partial file in the manager's download
    /// directory named the way Curlew names its own (it truncates and writes that file, so
    /// resume data must never point it at an arbitrary one). To continue a file some other
    /// tool started, move it to this URL (in the download directory) and build resume data
    /// for it with ``init(url:headers:timeoutInterval:partialFileURL:bytesReceived:entityTag:lastModified:expectedLength:rangeFirst:rangeLast:)``.
    public static func newPartialFileURL(in directory: URL) -> URL {
        directory.appendingPathComponent("\(DownloadOptions.partialFilePrefix)\(UUID().uuidString).tmp")
    }
}
