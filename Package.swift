// swift-tools-version: 6.1
import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode is the package default;
/// `MemberImportVisibility` keeps each file honest about what it imports.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Curlew",
    products: [
        .library(name: "SessionCore", targets: ["SessionCore"]),
        .library(name: "Serialization", targets: ["Serialization"]),
        .library(name: "Security", targets: ["Security"]),
        .library(name: "Reachability", targets: ["Reachability"]),
        .library(name: "ImageLoading", targets: ["ImageLoading"]),
        // swift-http-types conversions and calls; a product of its own so that SessionCore's
        // users build no extra package.
        .library(name: "CurlewHTTPTypes", targets: ["CurlewHTTPTypes"]),
        // The swift-openapi-runtime transport; only its users build swift-openapi-runtime.
        .library(name: "CurlewOpenAPI", targets: ["CurlewOpenAPI"]),
        .executable(name: "curlew", targets: ["curlew"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
    ],
    targets: [
        // MARK: C shims (only what Swift cannot call: variadic functions and macros)
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // libjpeg's setjmp error recovery and the image libraries' headers (Scripts/lib/setup.sh
        // installs libpng-dev, libjpeg62-turbo-dev, libgif-dev and libwebp-dev).
        .target(
            name: "CImageCodecs",
            linkerSettings: [
                .linkedLibrary("png16"), .linkedLibrary("jpeg"), .linkedLibrary("gif"),
                .linkedLibrary("webp"), .linkedLibrary("webpdemux"),
            ]
        ),

        // MARK: Libraries
        .target(
            name: "Serialization",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Security",
            dependencies: ["COpenSSL"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SessionCore",
            dependencies: [
                "CCurl", "Serialization", "Security", "COpenSSL", "Reachability",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Reachability",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CurlewHTTPTypes",
            dependencies: [
                "SessionCore", "Serialization",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CurlewOpenAPI",
            dependencies: [
                "SessionCore", "CurlewHTTPTypes",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ImageLoading",
            dependencies: ["SessionCore", "Serialization", "CImageCodecs"],
            swiftSettings: swiftSettings
        ),

        // MARK: Command-line tool
        // The tool's commands and logic live in `CurlewCLI`, a target of its own (not a
        // product): the unit tests import it to check argument parsing and output formatting
        // without starting a process, and `curlew` is only the entry point that runs it.
        .target(
            name: "CurlewCLI",
            dependencies: [
                "SessionCore", "Serialization", "Security", "Reachability", "ImageLoading",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "curlew",
            dependencies: ["CurlewCLI"],
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .target(
            name: "CurlewTestSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            path: "Tests/CurlewTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SessionCoreTests",
            dependencies: [
                "SessionCore", "Serialization", "Security", "CurlewTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SerializationTests",
            dependencies: ["Serialization", "CurlewTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SecurityTests",
            dependencies: ["Security", "COpenSSL", "CurlewTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ImageLoadingTests",
            dependencies: ["ImageLoading", "SessionCore", "Serialization", "CurlewTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CurlewCLITests",
            dependencies: ["CurlewCLI", "SessionCore", "Serialization", "Security", "CurlewTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CurlewOpenAPITests",
            dependencies: [
                "CurlewOpenAPI", "CurlewHTTPTypes", "SessionCore", "Serialization", "Security", "CurlewTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            // The document and the generator's settings the committed `Generated/` code was
            // made from (Tests/CurlewOpenAPITests/OpenAPI/README.md says how to make it again).
            exclude: ["OpenAPI"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReachabilityTests",
            // SessionCore for `waitsForConnectivity`, whose tests need the namespaces here.
            dependencies: ["Reachability", "SessionCore"],
            swiftSettings: swiftSettings
        ),
    ]
)
