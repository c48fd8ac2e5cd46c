// swift-tools-version: 6.0
import PackageDescription

// `settee-bench`: the same workloads on Settee (its storage engine and its document API), SQLite and LMDB,
// side by side.
// Its own package so that the library never depends on SQLite or LMDB; run it with `scripts/bench`.
let package = Package(
    name: "SetteeBenchmarks",
    dependencies: [
        // Named so the product reference does not depend on the directory the repository is cloned into.
        .package(name: "Settee", path: ".."),
    ],
    targets: [
        // Debian's libsqlite3-dev (pkg-config `sqlite3`).
        .systemLibrary(
            name: "CSQLite3",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // Debian's liblmdb-dev (pkg-config `lmdb`).
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .executableTarget(
            name: "settee-bench",
            dependencies: [
                "CSQLite3",
                "CLMDB",
                .product(name: "SetteeStorage", package: "Settee"),
                .product(name: "Settee", package: "Settee"),
                .product(name: "SetteeReplicator", package: "Settee"),
            ]
        ),
        // replicate-http (scripts/bench-http): the replicator against a `settee serve` in another process.
        .executableTarget(
            name: "settee-replicate-bench",
            dependencies: [
                .product(name: "Settee", package: "Settee"),
                .product(name: "SetteeReplicator", package: "Settee"),
                .product(name: "SetteeHTTP", package: "Settee"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
