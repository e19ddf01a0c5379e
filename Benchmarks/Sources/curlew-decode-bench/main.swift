// curlew-decode-bench: Curlew's `Image(data:scale:options:)` against the codec libraries
// called directly from C (CImageCodecBench), same files, same process, alternating decodes.
//
// Usage: curlew-decode-bench --dir DIR [--runs N] [--cases a,b] [--only curlew|c] [--list]
// `--only` decodes with one side only (for perf / callgrind) and prints no table.
#if canImport(Glibc)
import Glibc
#endif
import CImageCodecBench
import Foundation
import ImageLoading

/// One benchmark row: a file, and how both sides decode it.
struct DecodeCase {
    let name: String
    let file: String
    /// Curlew's `maximumPixelSize` (nil: full size).
    let maximumPixelSize: Int?
    /// The C call; returns 0 on success.
    let baseline: (UnsafePointer<UInt8>, Int, inout icb_result) -> Int32
}

let jpegScales: [(suffix: String, maximum: Int?, denominator: Int32)] = [
    ("", nil, 1), (" 1/2", 2000, 2), (" 1/4", 1000, 4), (" 1/8", 500, 8),
]
var cases: [DecodeCase] = []
for (label, file) in [("JPEG baseline", "photo-baseline.jpg"), ("JPEG progressive", "photo-progressive.jpg")] {
    for scale in jpegScales {
        cases.append(DecodeCase(name: label + scale.suffix, file: file, maximumPixelSize: scale.maximum) { data, count, result in
            icb_decode_jpeg(data, count, scale.denominator, &result)
        })
    }
}
// Curlew turns it upright (3000 × 4000); the C side only decodes (4000 × 3000), so the ratio
// is what honouring the orientation costs on top of the decode.
cases.append(DecodeCase(name: "JPEG EXIF 6 (C: no rotation)", file: "photo-exif6.jpg", maximumPixelSize: nil) {
    icb_decode_jpeg($0, $1, 1, &$2)
})
cases.append(DecodeCase(name: "JPEG EXIF 3 (C: no rotation)", file: "photo-exif3.jpg", maximumPixelSize: nil) {
    icb_decode_jpeg($0, $1, 1, &$2)
})
// PNG, GIF and WebP with alpha cannot be scaled by their codecs: the C side decodes whole and
// runs a plain C area resampler (the same filter as Curlew's; see image_codec_bench.h).
for maximum in [nil, 1200, 600] as [Int?] {
    cases.append(DecodeCase(name: "PNG RGBA" + (maximum.map { " → \($0)" } ?? ""), file: "photo.png", maximumPixelSize: maximum) {
        icb_decode_png($0, $1, Int32(maximum ?? 0), &$2)
    })
}
for maximum in [nil, 400] as [Int?] {
    cases.append(DecodeCase(name: "GIF animated" + (maximum.map { " → \($0)" } ?? ""), file: "animation.gif", maximumPixelSize: maximum) {
        icb_decode_gif($0, $1, Int32(maximum ?? 0), &$2)
    })
}
cases.append(DecodeCase(name: "WebP lossy", file: "photo.webp", maximumPixelSize: nil) {
    icb_decode_webp($0, $1, 0, 0, &$2)
})
// 4000 × 3000 fitted into 1000: libwebp's rescaler to the same size on the C side.
cases.append(DecodeCase(name: "WebP lossy → 1000", file: "photo.webp", maximumPixelSize: 1000) {
    icb_decode_webp($0, $1, 1000, 750, &$2)
})
// An animation (the GIF's 20 frames, lossy, with alpha): every frame kept, or downscaled.
for maximum in [nil, 400] as [Int?] {
    cases.append(DecodeCase(name: "WebP animated" + (maximum.map { " → \($0)" } ?? ""), file: "animation.webp",
                            maximumPixelSize: maximum) {
        icb_decode_webp_animation($0, $1, Int32(maximum ?? 0), &$2)
    })
}
// With alpha: decoded whole and resampled on both sides.
cases.append(DecodeCase(name: "WebP alpha → 1000", file: "photo-alpha.webp", maximumPixelSize: 1000) {
    icb_decode_webp_fit($0, $1, 1000, &$2)
})

// MARK: Arguments

var directory = ""
var runs = 15
var selected: Set<String>?
var only: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--dir": directory = arguments.next() ?? ""
    case "--runs": runs = max(1, Int(arguments.next() ?? "") ?? runs)
    case "--cases": selected = Set((arguments.next() ?? "").split(separator: ",").map(String.init))
    case "--only": only = arguments.next()
    case "--list":
        for item in cases { print(item.name) }
        exit(0)
    default:
        FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
        exit(2)
    }
}
guard !directory.isEmpty else {
    FileHandle.standardError.write(Data("--dir DIR is required (Scripts/bench-decode.sh makes the files)\n".utf8))
    exit(2)
}

// MARK: Timing

/// Wall and CPU (this process, user + system) seconds around `body`.
func measure(_ body: () -> Void) -> (wall: Double, cpu: Double) {
    var start = timespec(), end = timespec(), cpuStart = timespec(), cpuEnd = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpuStart)
    clock_gettime(CLOCK_MONOTONIC, &start)
    body()
    clock_gettime(CLOCK_MONOTONIC, &end)
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpuEnd)
    func seconds(_ a: timespec, _ b: timespec) -> Double {
        Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9
    }
    return (seconds(start, end), seconds(cpuStart, cpuEnd))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("curlew-decode-bench: \(message)\n".utf8))
    exit(1)
}

/// One Curlew decode; returns (width, height, frames).
func decodeCurlew(_ data: Data, _ item: DecodeCase) -> (Int, Int, Int) {
    do {
        let image = try Image(data: data, options: Image.DecodingOptions(maximumPixelSize: item.maximumPixelSize))
        return (image.width, image.height, max(1, image.frames.count))
    } catch {
        fail("\(item.name): Curlew failed: \(error)")
    }
}

/// One C decode; returns (width, height, frames).
func decodeC(_ data: Data, _ item: DecodeCase) -> (Int, Int, Int) {
    var result = icb_result()
    let status = data.withUnsafeBytes { raw in
        item.baseline(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), raw.count, &result)
    }
    if status != 0 { fail("\(item.name): the C decoder failed") }
    return (Int(result.width), Int(result.height), Int(result.frames))
}

print("| Case | Output | C ms | Curlew ms | C / Curlew | Curlew MP/s | C CPU ms | Curlew CPU ms | C / Curlew CPU |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
/// Source pixels (all frames) per file, for MP/s: what the codec decodes, whatever the output.
var sourceMegapixels: [String: Double] = [:]
for item in cases where selected?.contains(item.name) ?? true {
    let url = URL(fileURLWithPath: directory).appendingPathComponent(item.file)
    guard let data = try? Data(contentsOf: url) else { fail("cannot read \(url.path)") }
    if let only {
        for _ in 0..<runs { _ = only == "c" ? decodeC(data, item) : decodeCurlew(data, item) }
        continue
    }
    // One untimed decode each (page cache, lazy binding), then alternate so noise hits both.
    let curlewSize = decodeCurlew(data, item)
    let cSize = decodeC(data, item)
    let rotated = item.file == "photo-exif6.jpg" && curlewSize == (cSize.1, cSize.0, cSize.2)
    guard curlewSize == cSize || rotated else { fail("\(item.name): Curlew gave \(curlewSize), C gave \(cSize)") }
    var cWall: [Double] = [], cCPU: [Double] = [], curlewWall: [Double] = [], curlewCPU: [Double] = []
    for run in 0..<runs {
        let order = run % 2 == 0 ? [true, false] : [false, true]
        for isC in order {
            let time = measure { _ = isC ? decodeC(data, item) : decodeCurlew(data, item) }
            if isC { cWall.append(time.wall); cCPU.append(time.cpu) } else { curlewWall.append(time.wall); curlewCPU.append(time.cpu) }
        }
    }
    let (width, height, frames) = curlewSize
    if sourceMegapixels[item.file] == nil {
        let full = (try? Image(data: data)).map { Double($0.width * $0.height * max(1, $0.frames.count)) / 1e6 }
        sourceMegapixels[item.file] = full ?? 0
    }
    let megapixels = sourceMegapixels[item.file] ?? 0
    let c = median(cWall), curlew = median(curlewWall)
    let output = "\(width)×\(height)" + (frames > 1 ? " ×\(frames)" : "")
    print(String(format: "| %@ | %@ | %.1f | %.1f | %.2f | %.0f | %.1f | %.1f | %.2f |", item.name, output, c * 1000,
                 curlew * 1000, c / curlew, megapixels / curlew, median(cCPU) * 1000, median(curlewCPU) * 1000,
                 median(cCPU) / median(curlewCPU)))
}
