import Foundation

// Target: the JPEG decoder (Sources/ImageLoading/Decoding/), through `Image(data:scale:options:)` as
// an image downloader calls it. Budgets per input: the decoder's own pixel budget (2^22 pixels
// here, 16 MiB of RGBA; the default is 2^26), and libFuzzer's -malloc_limit_mb, -rss_limit_mb and
// -timeout (Scripts/fuzz.sh). The first byte chooses full size or a downsampled decode (the
// resampling path). Properties: a decoded image has a positive size within the budget and
// exactly width × height × 4 bytes of pixels in every frame.

private let budget = 1 << 22

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJPEG(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 1 else { return 0 }
    let choice = data[0]
    let bytes = Data(bytes: data + 1, count: size - 1)
    guard ImageFormat(sniffing: bytes) == .jpeg else { return 0 }
    // The EXIF orientation reader runs on every JPEG; it is also run on its own here so that
    // inputs the decoder refuses early still reach it.
    let orientation = JPEGDecoder.exifOrientation(in: bytes)
    fuzzCheck((1...8).contains(orientation), "orientation \(orientation)")
    let options = Image.DecodingOptions(
        maximumPixelSize: choice & 1 == 0 ? nil : Int(choice >> 1) + 1, pixelBudget: budget)
    guard let image = try? Image(data: bytes, scale: 1, options: options) else { return 0 }
    fuzzCheck(image.width > 0 && image.height > 0 && image.width * image.height <= budget, "size \(image.width)×\(image.height)")
    fuzzCheck(image.pixels.count == image.width * image.height * 4, "pixels \(image.pixels.count)")
    for frame in image.frames {
        fuzzCheck(frame.pixels.count == image.pixels.count, "frame pixels \(frame.pixels.count)")
    }
    return 0
}
