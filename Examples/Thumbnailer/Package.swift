// swift-tools-version: 6.1
import PackageDescription

/// The thumbnailer lives in its own package, like the gallery, so that Curlew's users never
/// build it: only `Examples/Thumbnailer/test.sh` (or a `swift build` here) does.
/// SwiftPM names a path dependency after its directory, so Curlew's identity is the name of
/// whatever directory this checkout lives in (`main`, `curlew`, a worktree's name...).
let curlewPackage: String = {
    let components = "\(#filePath)".split(separator: "/")
    guard components.count >= 4 else { return "curlew" }
    return components[components.count - 4].lowercased()
}()

let package = Package(
    name: "CurlewThumbnailer",
    dependencies: [
        .package(path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "Thumbnailer",
            dependencies: [
                .product(name: "ImageLoading", package: curlewPackage),
                .product(name: "SessionCore", package: curlewPackage),
                .product(name: "Serialization", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
    ]
)
