import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Validates an image response and decodes its body into an ``Image``
/// (AFNetworking's `AFImageResponseSerializer`).
///
/// Validation is the ``HTTPResponseSerializer``'s (status code, then content type — checked
/// only when there is a body). The body's format is then sniffed from its bytes, so a JPEG
/// served as `image/png` decodes and an HTML page served as `image/png` fails with
/// ``ImageError/unsupportedFormat(detected:)``; decoding errors are thrown as ``ImageError``,
/// validation errors as `SerializationError`, and an empty body as ``ImageError/emptyData``.
///
/// Decoding never runs on a manager's driver thread: the session engine runs this serializer
/// on its shared concurrent processing queue (``prefersConcurrentProcessing``), then the
/// completion handler on the completion queue, so responses finishing together decode in
/// parallel (`object(for:serializer:)` decodes in the calling Swift task). At most
/// ``maximumConcurrentDecodes`` images decode at once in the whole process; further decodes
/// wait their turn.
public struct ImageResponseSerializer: ResponseSerialization, EngineResponseSerialization, Codable {
    /// AFNetworking's image MIME types plus `image/webp`.
    public static let defaultAcceptableContentTypes: Set<String> = [
        "image/tiff", "image/jpeg", "image/gif", "image/png", "image/ico", "image/x-icon",
        "image/bmp", "image/x-bmp", "image/x-xbitmap", "image/x-win-bitmap", "image/webp",
    ]

    /// How many images the serializers decode at once across the process: one per active
    /// processor, and at least 2.
    public static var maximumConcurrentDecodes: Int { DecoderConcurrencyLimit.shared.limit }

    /// True: decoding is heavy, so the engine runs it on its concurrent processing queue.
    package var prefersConcurrentProcessing: Bool { true }

    /// The status codes that pass validation; 200..<300 by default.
    public var acceptableStatusCodes = IndexSet(integersIn: 200..<300)
    /// The MIME types that pass validation (compared without regard to case); nil accepts any.
    /// ``defaultAcceptableContentTypes`` by default. TIFF, ICO and BMP are accepted here as in
    /// AFNetworking, but only PNG, JPEG, GIF and WebP decode: the others fail with
    /// ``ImageError/unsupportedFormat(detected:)``.
    public var acceptableContentTypes: Set<String>? = ImageResponseSerializer.defaultAcceptableContentTypes
    /// The ``Image/scale`` given to decoded images (pixels per point); 1 by default, since
    /// Linux has no main screen scale to default to.
    public var imageScale: Double = 1
    /// Kept from AFNetworking, where `true` forced the decoding that UIKit otherwise postpones
    /// until first draw. A Curlew ``Image`` always holds decoded pixels, so images are inflated
    /// whatever this says: the flag changes nothing and exists so code and archives written
    /// for AFNetworking's serializer keep working.
    public var automaticallyInflatesResponseImage = true
    /// When set, images are downsampled while decoding so their longer side is at most this
    /// many pixels (see ``Image/DecodingOptions/maximumPixelSize``: a JPEG is decoded by
    /// libjpeg at a reduced scale, never at full size). Nil (the default) keeps the full size.
    public var maximumPixelSize: Int?

    /// A serializer with AFNetworking's defaults and an image scale of 1.
    public init() {}

    /// What tells this serializer's images apart from the defaults' (nil with the defaults): a
    /// downloader adds it to its images' cache key, so that a cache shared with a downloader
    /// that decodes otherwise never answers with the other's variant (a thumbnail for a full
    /// size image, `@1x` for `@2x`). Starts with a space, which no absolute URL holds.
    var cacheVariant: String? {
        let size = Image.DecodingOptions(maximumPixelSize: maximumPixelSize).targetPixelSize
        guard size != nil || imageScale != 1 else { return nil }
        return " decoded:" + (size.map { "maximumPixelSize=\($0)," } ?? "") + "scale=\(imageScale)"
    }

    /// The HTTP validation this serializer delegates to.
    private var validator: HTTPResponseSerializer {
        var validator = HTTPResponseSerializer()
        validator.acceptableStatusCodes = acceptableStatusCodes
        validator.acceptableContentTypes = acceptableContentTypes
        return validator
    }

    /// Throws `SerializationError` when the status code or the content type is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws {
        try validator.validate(response, data: data)
    }

    /// Validates the response (when there is one) and decodes the body.
    ///
    /// - Throws: `SerializationError` for an unacceptable status code or content type,
    ///   ``ImageError`` when the body is empty or is not a decodable image.
    public func responseObject(for response: HTTPURLResponse?, data: Data?) throws -> Image {
        if let response { try validate(response, data: data) }
        return try decode(data)
    }

    /// Validates from the head (its `HTTPURLResponse` is built only for an error) and decodes.
    package func responseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws -> Image {
        _ = try validator.responseObject(for: request, head: head, data: data)
        return try decode(data)
    }

    /// ``responseObject(for:head:data:)``, boxed.
    package func sendableResponseObject(for request: URLRequest?, head: HTTPResponseHead?, data: Data?) throws
        -> (any Sendable)?
    {
        try responseObject(for: request, head: head, data: data)
    }

    /// Decodes under the process-wide concurrency limit.
    private func decode(_ data: Data?) throws -> Image {
        guard let data, !data.isEmpty else { throw ImageError.emptyData }
        let options = Image.DecodingOptions(maximumPixelSize: maximumPixelSize)
        return try DecoderConcurrencyLimit.shared.run {
            try Image(data: data, scale: imageScale, options: options)
        }
    }

    private enum CodingKeys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes, imageScale, automaticallyInflatesResponseImage
        case maximumPixelSize
    }

    /// Decodes the settings; missing keys keep their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        acceptableStatusCodes = try container.decodeIfPresent(IndexSet.self, forKey: .acceptableStatusCodes)
            ?? IndexSet(integersIn: 200..<300)
        // An archive without the key keeps the image types; an explicit null accepts any type.
        if container.contains(.acceptableContentTypes) {
            acceptableContentTypes = try container.decodeIfPresent(Set<String>.self, forKey: .acceptableContentTypes)
        }
        imageScale = try container.decodeIfPresent(Double.self, forKey: .imageScale) ?? 1
        automaticallyInflatesResponseImage =
            try container.decodeIfPresent(Bool.self, forKey: .automaticallyInflatesResponseImage) ?? true
        maximumPixelSize = try container.decodeIfPresent(Int.self, forKey: .maximumPixelSize)
    }

    /// Encodes the settings (a nil ``acceptableContentTypes`` as an explicit null).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(acceptableStatusCodes, forKey: .acceptableStatusCodes)
        try container.encode(acceptableContentTypes, forKey: .acceptableContentTypes)
        try container.encode(imageScale, forKey: .imageScale)
        try container.encode(automaticallyInflatesResponseImage, forKey: .automaticallyInflatesResponseImage)
        try container.encodeIfPresent(maximumPixelSize, forKey: .maximumPixelSize)
    }
}
