// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Settee",
    products: [
        .library(name: "SetteeStorage", targets: ["SetteeStorage"]),
    ],
    targets: [
        // Debian's liblz4-dev, plus a few C helpers (CRC32C, atomic bit operations) in the shim header.
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        .target(
            name: "SetteeStorage",
            dependencies: ["CLZ4"],
            swiftSettings: [
                // `swift build -Xswiftc -DSETTEE_INTERNAL_CHECKS` walks tree invariants after every
                // write; it invalidates every performance figure.
                .define("SETTEE_INTERNAL_CHECKS", .when(configuration: .debug)),
            ]
        ),
        .executableTarget(
            name: "settee-storage-demo",
            dependencies: ["SetteeStorage"],
            path: "Sources/settee-storage-demo"
        ),
        .testTarget(
            name: "SetteeStorageTests",
            dependencies: ["SetteeStorage"],
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
