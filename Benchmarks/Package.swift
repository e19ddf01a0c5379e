// swift-tools-version: 6.1
import PackageDescription

/// The benchmark suite lives in its own package so that Curlew's users never build
/// AsyncHTTPClient: only `Scripts/bench.sh` (or a `swift build` here) does.
/// SwiftPM names a path dependency after its directory, so Curlew's identity is the name of
/// whatever directory this checkout lives in (`main`, `curlew`, a worktree's name...).
let curlewPackage: String = {
    let components = "\(#filePath)".split(separator: "/")
    guard components.count >= 3 else { return "curlew" }
    return components[components.count - 3].lowercased()
}()

let package = Package(
    name: "CurlewBenchmarks",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        // The reference client: raw libcurl multi, written in C as a libcurl user would.
        .target(
            name: "CLibcurlBench",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        .executableTarget(
            name: "curlew-bench",
            dependencies: [
                "CLibcurlBench",
                .product(name: "SessionCore", package: curlewPackage),
                .product(name: "Serialization", package: curlewPackage),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // The image pipeline's C baseline: libcurl multi + libjpeg(-turbo) scaled decoding on a
        // pool of threads (Scripts/bench-pipeline.sh).
        .target(
            name: "CImagePipelineBench",
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("jpeg"), .linkedLibrary("pthread")]
        ),
        // The image pipeline workload: ImageDownloader against CImagePipelineBench, then the
        // image cache and the HTTP disk cache (Scripts/bench-pipeline.sh).
        .executableTarget(
            name: "curlew-image-pipeline",
            dependencies: [
                "CImagePipelineBench",
                .product(name: "ImageLoading", package: curlewPackage),
                .product(name: "SessionCore", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // The curlew client's small-GET loop alone, for valgrind (see Docs/Performance.md).
        .executableTarget(
            name: "curlew-profile",
            dependencies: [
                .product(name: "SessionCore", package: curlewPackage),
                .product(name: "Serialization", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // The soak and load runs (Scripts/soak.sh, Docs/Reliability.md "Soak and load").
        .executableTarget(
            name: "curlew-soak",
            dependencies: [
                .product(name: "SessionCore", package: curlewPackage),
                .product(name: "Serialization", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // The decode benchmark's baseline: libjpeg-turbo, libpng, giflib and libwebp called
        // directly, as a C user would (Scripts/bench-decode.sh).
        .target(
            name: "CImageCodecBench",
            linkerSettings: [
                .linkedLibrary("jpeg"), .linkedLibrary("png16"), .linkedLibrary("gif"), .linkedLibrary("webp"),
                .linkedLibrary("webpdemux"),
            ]
        ),
        .executableTarget(
            name: "curlew-decode-bench",
            dependencies: [
                "CImageCodecBench",
                .product(name: "ImageLoading", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
    ]
)
