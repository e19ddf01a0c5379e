import CImagePipelineBench
import Foundation
import ImageLoading

/// Runs the C baseline with as many decoding threads as Curlew decodes at once.
func runCBaseline(_ options: PipelineOptions) -> PassResult {
    let urls = options.urls
    let pointers = urls.map { strdup($0) }
    defer { pointers.forEach { free($0) } }
    var constPointers = pointers.map { UnsafePointer($0) }
    var result = ipb_result()
    let start = Usage.now()
    let status = constPointers.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var config = ipb_config(
            urls: buffer.baseAddress, count: buffer.count, concurrency: options.concurrency,
            decode_threads: ImageResponseSerializer.maximumConcurrentDecodes, max_pixel_size: options.size)
        return ipb_run(&config, &result)
    }
    let end = Usage.now()
    let errors = status == 0 ? result.errors : options.count
    var pass = PassResult(variant: "c", images: result.decoded, errors: errors, start: start, end: end,
                          width: result.last_width, height: result.last_height)
    pass.transferSeconds = result.transfer_seconds
    return pass
}
