import Foundation

/// The parts of a `multipart/form-data` body, appended inside the block of
/// ``HTTPRequestSerializing/multipartFormRequest(method:urlString:parameters:constructingBodyWith:)``
/// (AFNetworking's `AFMultipartFormData`).
///
/// File and stream parts are read lazily, in chunks, while the body is sent: a large file never
/// enters memory. The object is used from one thread, inside the block, and must not be kept
/// after the block returns.
///
/// Part names and file names are escaped as WHATWG specifies (`"` → `%22`, CR → `%0D`,
/// LF → `%0A`), so they cannot add headers or parts. A MIME type or custom header holding CR or
/// LF makes the request method throw ``SerializationError/invalidHeader(field:value:)``.
public protocol MultipartFormData: AnyObject {
    /// Appends the file at `fileURL`; the file name is its last path component and the MIME
    /// type is guessed from its extension (``MIMETypeTable``).
    ///
    /// The file is read when its bytes are sent. It must still be the file it was when
    /// appended (a symbolic link is followed): one replaced, grown, cut or modified meanwhile
    /// fails the body with ``SerializationError/multipartFileUnreadable(_:reason:)`` saying
    /// what changed, so the upload never carries other bytes than those counted, nor a retry
    /// other bytes than its first attempt.
    ///
    /// - Throws: ``SerializationError/multipartNotAFileURL(_:)``,
    ///   ``SerializationError/multipartFileNotFound(_:)``,
    ///   ``SerializationError/multipartFileUnreadable(_:reason:)`` (a directory, a special file,
    ///   no read permission).
    func appendPart(withFileURL fileURL: URL, name: String) throws

    /// Appends the file at `fileURL` with an explicit file name and MIME type.
    ///
    /// - Throws: as ``appendPart(withFileURL:name:)``, and
    ///   ``SerializationError/invalidHeader(field:value:)`` for a MIME type holding CR or LF.
    func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws

    /// Appends exactly `length` bytes read from `inputStream` when the body is sent. The stream
    /// is opened then, read in chunks and closed; if it ends early the body stream fails.
    func appendPart(with inputStream: InputStream, name: String, fileName: String, length: Int64, mimeType: String)

    /// Appends in-memory data as a file part.
    func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String)

    /// Appends a form field: `Content-Disposition: form-data; name="…"` and the data.
    func appendPart(withFormData data: Data, name: String)

    /// Appends a part with headers of your own (`Content-Disposition` first, the rest sorted).
    func appendPart(withHeaders headers: [String: String], body: Data)

    /// Limits the upload rate: the body stream hands out at most `numberOfBytes` per read and
    /// waits `delay` seconds after each such packet (AFNetworking's
    /// `throttleBandwidthWithPacketSize:delay:`).
    func throttleBandwidth(withPacketSize numberOfBytes: Int, delay: TimeInterval)
}
