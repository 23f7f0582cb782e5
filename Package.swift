// swift-tools-version:6.0
//
// smart-bff: a SMART-on-FHIR backend-for-frontend.
//
// Layers point one way (nothing imports upward):
//   BFFServer → BFF → {HTTPCore, HTTPClient, SMART, JWTVerification, Sessions, PostgresStore, Cryptography}
//   SMART → {JWTVerification, HTTPClient, Cryptography}; JWTVerification → Cryptography → COpenSSL
//   PostgresStore → {Sessions, Cryptography, CLibPQ}; HTTPClient → {CLibSSL, HTTPCore (its event loops)}; Sandbox → {HTTPCore, JWTVerification}
// Dependencies: swift-argument-parser (the ecosystem's command-line parser) and swift-log
// (the ecosystem's logging API). Everything else is our own code over libc, libpq and OpenSSL.
import PackageDescription

// Release builds optimize across modules: the hot path crosses HTTPCore, HTTPClient and BFF,
// and small functions of one (a byte-set test, a header lookup) were calls from another.
// Measured in four A/B runs of Benchmarks/fhir-proxy.sh: 2.6–5.6% less CPU per read.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

let package = Package(
    name: "smart-bff",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "smart-bff", targets: ["BFFServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        // libssl: TLS for the outbound client, and the tests' TLS server.
        .systemLibrary(name: "CLibSSL", pkgConfig: "libssl",
                       providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),

        .systemLibrary(name: "CLinux"),
        .target(name: "JSON", swiftSettings: swiftSettings),
        .target(name: "HTTPCore",
                dependencies: ["JSON", "CLinux", .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "HTTPClient",
                dependencies: ["CLibSSL", "CLinux", "HTTPCore"],
                swiftSettings: swiftSettings),
        .target(name: "Cryptography",
                dependencies: ["COpenSSL"],
                swiftSettings: swiftSettings),
        .target(name: "JWTVerification",
                dependencies: ["Cryptography", "JSON"],
                swiftSettings: swiftSettings),
        .target(name: "Sessions",
                dependencies: ["Cryptography"],
                swiftSettings: swiftSettings),
        .target(name: "PostgresStore",
                dependencies: ["CLibPQ", "CLinux", "Sessions", "Cryptography",
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "SMART",
                dependencies: ["JWTVerification", "HTTPClient", "HTTPCore", "Cryptography", "JSON"],
                swiftSettings: swiftSettings),
        .target(name: "Sandbox",
                dependencies: ["HTTPCore", "JWTVerification", "Cryptography", "JSON",
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .target(name: "BFF",
                dependencies: ["HTTPCore", "HTTPClient", "SMART", "JWTVerification", "Sessions",
                               "PostgresStore", "Cryptography", "JSON", "CLinux",
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        .executableTarget(name: "BFFServer",
                          dependencies: ["BFF", "Sandbox", "HTTPCore", "PostgresStore", "Sessions",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")],
                          swiftSettings: swiftSettings),
        .target(name: "BFFTesting",
                dependencies: ["CLibSSL", "Cryptography", "HTTPCore", "PostgresStore", "Sessions", .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),

        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: swiftSettings),
        .testTarget(name: "HTTPClientTests", dependencies: ["HTTPClient", "HTTPCore", "BFFTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "HTTPCoreTests", dependencies: ["HTTPCore", "BFFTesting"],
                    resources: [.copy("Fixtures")], swiftSettings: swiftSettings),
        .testTarget(name: "CryptographyTests", dependencies: ["Cryptography"],
                    resources: [.copy("Fixtures")], swiftSettings: swiftSettings),
        .testTarget(name: "JWTVerificationTests", dependencies: ["JWTVerification", "Cryptography"],
                    resources: [.copy("Fixtures")], swiftSettings: swiftSettings),
        .testTarget(name: "PostgresStoreTests", dependencies: ["PostgresStore", "Sessions", "Cryptography", "BFFTesting"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "BFFTests", dependencies: ["BFF", "Sandbox", "HTTPCore", "HTTPClient", "BFFTesting", "PostgresStore", "SMART"],
                    swiftSettings: swiftSettings),
        .testTarget(name: "SandboxTests", dependencies: ["Sandbox", "HTTPCore", "HTTPClient", "JSON", "Cryptography", "BFFTesting"],
                    swiftSettings: swiftSettings),
    ]
)

// Benchmarks stay out of the default build: BFF_BENCHMARKS=1 adds them.
if Context.environment["BFF_BENCHMARKS"] != nil {
    package.targets.append(.executableTarget(
        name: "BFFBench", dependencies: ["BFF", "Sandbox", "PostgresStore", "Sessions", "JWTVerification", "Cryptography", "JSON", "HTTPClient",
                                         .product(name: "Logging", package: "swift-log")],
        path: "Benchmarks/BFFBench", swiftSettings: swiftSettings))
}
