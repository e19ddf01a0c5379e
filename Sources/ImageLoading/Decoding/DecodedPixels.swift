extension Array where Element == UInt8 {
    /// A `count`-byte pixel buffer that `decode` fills completely, without zero-filling it
    /// first: a 12-megapixel image is 48 MB, and the zero-fill was a whole extra pass over it
    /// (and took the page faults the decoder then no longer does, so it cost time of its own).
    ///
    /// `decode` must write every byte or throw: the bytes are uninitialised until it does, and
    /// a thrown error discards the buffer. Only for decoders that write whole rows of the whole
    /// image on success (libjpeg's rows, libpng's `png_image_finish_read`, `WebPDecode`).
    static func decodedPixels(count: Int, _ decode: (UnsafeMutablePointer<UInt8>) throws -> Void) rethrows -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initializedCount in
            guard let base = buffer.baseAddress, count > 0 else { return }
            try decode(base)
            initializedCount = count
        }
    }
}
