// swift-tools-version: 6.0
import PackageDescription

// `SETTEE_SERVER_FUZZ=1 swift build --product settee-server-fuzz` (scripts/fuzz): the server's
// modules compiled with libFuzzer's coverage and the fuzz target linked with libFuzzer, in the
// build directory the tests use, so that only Settee's own modules are compiled again.
let serverFuzzingBuild = Context.environment["SETTEE_SERVER_FUZZ"] == "1"
let serverFuzzing: [SwiftSetting] = serverFuzzingBuild ? [.unsafeFlags(["-sanitize=fuzzer"])] : []

// `SETTEE_PORTABLE_IO=1 swift build` (scripts/test): the engine makes the system calls the Darwin
// implementation makes where POSIX has them (pwrite, fsync, no membarrier), so that the logic
// Apple's systems rely on runs the test suite and the crash rounds on Linux (docs/platforms.md).
let portableIO: [SwiftSetting] = Context.environment["SETTEE_PORTABLE_IO"] == "1" ? [.define("SETTEE_PORTABLE_IO")] : []

/// Apple's platforms, for the conditions below.
let darwin: [Platform] = [.macOS, .iOS, .tvOS, .watchOS, .visionOS, .macCatalyst]

let package = Package(
    name: "Settee",
    // The minimums the API needs: Synchronization's `Mutex` and `Atomic`. Linux and Android need
    // no entry (docs/platforms.md says what is built and tested where).
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Settee", targets: ["Settee"]),
        .library(name: "SetteeStorage", targets: ["SetteeStorage"]),
        .library(name: "SetteeReplicator", targets: ["SetteeReplicator"]),
        .library(name: "SetteeHTTP", targets: ["SetteeHTTP"]),
        .library(name: "SetteeServer", targets: ["SetteeServer"]),
        .executable(name: "settee", targets: ["settee"]),
        // Built by the bench's package in CI (scripts/test), so that one release build of the
        // libraries serves the crash rounds and the bench.
        .executable(name: "crash-harness", targets: ["crash-harness"]),
    ],
    dependencies: [
        // `swift package generate-documentation` (the DocC catalogs under Sources/*/*.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Where background work (automatic compaction, the expiry sweeper) reports failures.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // The sync server's HTTP stack.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Salted password hashes (PBKDF2-SHA256) for the server's users.
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        // The replicator's HTTP client (URLEndpoint), and TLS for a pinned server certificate.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        // What `GET /_metrics` answers: swift-metrics' API, written in Prometheus' text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The `settee` command line.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.0"),
    ],
    targets: [
        // Debian's liblz4-dev: LZ4 and nothing else. Linux and Android only: Apple's systems use
        // their Compression framework for the same block format (Platform/LZ4.swift).
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // The C half of the engine's platform seam (Sources/SetteeStorage/Platform): the system
        // calls and CPU instructions Swift cannot reach well (pwritev2 with RWF_DSYNC, Darwin's
        // fcntl syncs, CRC32C, SHA-1 with the SHA extensions, atomics for reader slots,
        // membarrier, prefetch): header-only, every function inline.
        .systemLibrary(name: "CSystemHelpers", path: "Sources/SetteeStorage/Platform/CSystemHelpers"),
        .target(
            name: "SetteeStorage",
            dependencies: [.target(name: "CLZ4", condition: .when(platforms: [.linux, .android])), "CSystemHelpers"],
            exclude: ["Platform/CSystemHelpers"],
            swiftSettings: [
                // `swift build -Xswiftc -DSETTEE_INTERNAL_CHECKS` walks tree invariants after every
                // write; it invalidates every performance figure.
                .define("SETTEE_INTERNAL_CHECKS", .when(configuration: .debug)),
            ] + portableIO
        ),
        // The C half of the library's collator (Sources/Settee/Platform/RootCollator.swift):
        // ICU's collation entry points, which only indexes and queries use; header-only.
        .systemLibrary(name: "CCollation", path: "Sources/Settee/Platform/CCollation"),
        // Debian's libstemmer-dev: Snowball's stemmers for full-text indexes in 28 languages
        // (Sources/Settee/Platform/SnowballStemmer.swift). Linux and Android only: Apple's
        // systems ship none, and there English is stemmed by Settee's own Porter2.
        .systemLibrary(
            name: "CStemmer",
            path: "Sources/Settee/Platform/CStemmer",
            providers: [.apt(["libstemmer-dev"])]
        ),
        // The document API: documents, revision trees, conflicts, blobs, change feeds.
        .target(
            name: "Settee",
            dependencies: [
                "SetteeStorage", "CCollation", .target(name: "CStemmer", condition: .when(platforms: [.linux, .android])),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Platform/CCollation", "Platform/CStemmer"],
            swiftSettings: [
                // The decoders' fuzz entry points (`DecoderFuzzing`): in debug builds (the tests)
                // and `scripts/fuzz`, never in a release build an application ships.
                .define("SETTEE_DECODER_FUZZING", .when(configuration: .debug)),
            ] + serverFuzzing,
            // ICU for the root collator (the document layer's collation, Formats/collation.md):
            // as Foundation carries it on Linux and Android, the system's libicucore on Apple's
            // platforms. The storage engine links none: it never compares text.
            linkerSettings: [
                .linkedLibrary("_FoundationICU", .when(platforms: [.linux, .android])),
                .linkedLibrary("icucore", .when(platforms: darwin)),
            ]
        ),
        // Push, pull and continuous replication between peers (the CouchDB replication protocol's
        // steps), conflict resolution, filters, checkpoints. Above the document API only: it
        // never imports the engine.
        .target(
            name: "SetteeReplicator",
            dependencies: ["Settee"]
        ),
        // URLEndpoint: the CouchDB replication protocol over HTTP(S), a remote peer for the
        // replicator; and the wire format (documents, attachments, multipart bodies) the server
        // shares with it.
        .target(
            name: "SetteeHTTP",
            dependencies: [
                "Settee", "SetteeReplicator",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                "CZlib",
            ],
            swiftSettings: serverFuzzing
        ),
        // Debian's zlib1g-dev, for the gzip-encoded attachments CouchDB's replicator sends.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // JavaScriptCore's C API for the server's JavaScript (the sync function, design documents'
        // filters and validate_doc_update): Debian's libjavascriptcoregtk-4.1-dev on Linux, the system
        // framework on macOS (linked by SetteeServer). Its header also declares the execution time
        // limit, which the library exports but no shipped header declares.
        .systemLibrary(
            name: "CJavaScriptCore",
            pkgConfig: "javascriptcoregtk-4.1",
            providers: [.apt(["libjavascriptcoregtk-4.1-dev"])]
        ),
        // JavaScriptCore's options, set in the environment by the loader, before any thread runs.
        .target(name: "CScriptOptions", path: "Sources/CScriptOptions"),
        // The sync server: CouchDB's HTTP API on Hummingbird, Sync Gateway's configuration, users
        // and sessions. Above the document API only: it never imports the engine. A Linux and
        // macOS product (docs/platforms.md).
        .target(
            name: "SetteeServer",
            dependencies: [
                "Settee",
                "SetteeReplicator",
                "SetteeHTTP",
                "CZlib",
                "CJavaScriptCore",
                "CScriptOptions",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                // HTTPParserError: a malformed body (a bad chunk) is the client's 400.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: serverFuzzing,
            linkerSettings: [.linkedFramework("JavaScriptCore", .when(platforms: [.macOS]))]
        ),
        // The command-line tool: `settee serve`, `settee info`, `ls`, `cat`, … (Sources/settee).
        .executableTarget(
            name: "settee",
            dependencies: [
                "SetteeServer", "Settee", "SetteeHTTP", "SetteeReplicator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The bare Hummingbird route scripts/bench-http measures the server against.
        .executableTarget(
            name: "settee-http-baseline",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird")]
        ),
        .executableTarget(
            name: "settee-storage-demo",
            dependencies: ["SetteeStorage"],
            path: "Sources/settee-storage-demo"
        ),
        // The crash and corruption machinery: a fault-injecting file, the seeded workload, the
        // SIGKILL, power-loss and corruption rounds (storage engine and document layer), and the
        // fuzz entry points.
        .target(
            name: "SetteeCrashKit",
            dependencies: ["SetteeStorage", "Settee"],
            path: "Tests/CrashKit",
            swiftSettings: [.define("SETTEE_DECODER_FUZZING", .when(configuration: .debug))]
        ),
        .executableTarget(
            name: "crash-harness",
            dependencies: ["SetteeCrashKit", "SetteeStorage"],
            path: "Tests/CrashHarness"
        ),
        // libFuzzer target (scripts/fuzz); built normally it replays a corpus.
        // What both fuzz targets do when built without libFuzzer: replay inputs from files.
        .target(name: "SetteeFuzzReplay", path: "Tests/FuzzReplay",
                swiftSettings: serverFuzzingBuild ? [.define("SETTEE_LIBFUZZER")] : []),
        .executableTarget(
            name: "settee-fuzz",
            dependencies: ["SetteeCrashKit", "SetteeFuzzReplay"],
            path: "Tests/Fuzz",
            exclude: ["Regressions"]
        ),
        // The sync server's request handling as a fuzz target (scripts/fuzz): one HTTP request
        // per input, answered in process.
        .target(
            name: "SetteeServerFuzzKit",
            dependencies: [
                "SetteeServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/ServerFuzzKit",
            swiftSettings: serverFuzzing
        ),
        .executableTarget(
            name: "settee-server-fuzz",
            dependencies: ["SetteeServerFuzzKit", "SetteeFuzzReplay"],
            path: "Tests/ServerFuzz",
            exclude: ["Regressions"],
            swiftSettings: serverFuzzing + (serverFuzzingBuild ? [.define("SETTEE_LIBFUZZER")] : []),
            linkerSettings: serverFuzzingBuild ? [.unsafeFlags(["-sanitize=fuzzer"])] : []
        ),
        // Debian's libsqlite3-dev: the query tests run the same queries on SQLite's JSON functions.
        .systemLibrary(
            name: "CSQLite3",
            path: "Tests/CSQLite3",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // What the test targets share: child processes started without Foundation's `Process`.
        .target(name: "SetteeTestSupport", path: "Tests/TestSupport"),
        .testTarget(
            name: "SetteeTests",
            dependencies: ["Settee", "SetteeCrashKit", "CSQLite3"],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SetteeReplicatorTests",
            dependencies: ["SetteeReplicator", "Settee", "SetteeCrashKit"]
        ),
        .testTarget(
            name: "SetteeServerTests",
            dependencies: [
                "SetteeServer", "Settee", "SetteeHTTP", "SetteeServerFuzzKit",
                // The crash kit's simulated full disk, under a served database.
                "SetteeCrashKit", "SetteeStorage", "SetteeTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SetteeHTTPTests",
            dependencies: [
                "SetteeHTTP", "SetteeServer", "SetteeReplicator", "Settee", "SetteeTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // A hostile peer: a server that answers what no honest one would.
                .product(name: "Hummingbird", package: "hummingbird"),
                // The fault-injecting TCP proxy of the convergence test.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "SetteeStorageTests",
            dependencies: ["SetteeStorage", "SetteeCrashKit", "SetteeTestSupport"],
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
