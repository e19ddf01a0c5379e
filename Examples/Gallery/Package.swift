// swift-tools-version: 6.1
import PackageDescription

/// The gallery lives in its own package so that Curlew's users never build SDL2 bindings: only
/// `Examples/Gallery/test.sh` (or a `swift build` here) does.
/// SwiftPM names a path dependency after its directory, so Curlew's identity is the name of
/// whatever directory this checkout lives in (`main`, `curlew`, a worktree's name...).
let curlewPackage: String = {
    let components = "\(#filePath)".split(separator: "/")
    guard components.count >= 4 else { return "curlew" }
    return components[components.count - 4].lowercased()
}()

let package = Package(
    name: "CurlewGallery",
    dependencies: [
        .package(path: "../.."),
    ],
    targets: [
        // SDL2's header only: the library is called directly from Swift. No pkgConfig: sdl2.pc's
        // cflags carry -D_REENTRANT, which SwiftPM refuses with a warning on every build, and the
        // header needs no flag (<SDL2/SDL.h> is on the default include path; libsdl2-dev).
        .systemLibrary(
            name: "CSDL2",
            providers: [.apt(["libsdl2-dev"])]
        ),
        .executableTarget(
            name: "Gallery",
            dependencies: [
                "CSDL2",
                .product(name: "ImageLoading", package: curlewPackage),
                .product(name: "SessionCore", package: curlewPackage),
            ],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
    ]
)
