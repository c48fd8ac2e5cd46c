import Foundation
import SetteeFuzzReplay
import SetteeCrashKit

// Built two ways. With `-sanitize=fuzzer -DSETTEE_LIBFUZZER` (scripts/fuzz), libFuzzer supplies
// `main` and calls the entry point below. Built normally, it replays inputs: every file named on
// the command line, or every file in a directory named there (the corpus, in the tests).

nonisolated(unsafe) private var scratch = FuzzTargets.scratchDirectory()

/// libFuzzer's entry point: one input, opened as a database log and walked in full, or, when it
/// starts with "D", fed to the document layer's decoders (`FuzzTargets.oneInput`).
///
/// ```swift
/// let bytes: [UInt8] = Array(try Data(contentsOf: URL(fileURLWithPath: "crash-1234")))
/// bytes.withUnsafeBufferPointer { _ = fuzzOneInput($0.baseAddress, $0.count) }
/// ```
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTargets.oneInput(UnsafeRawBufferPointer(start: data, count: size), directory: scratch)
    return 0
}

/// libFuzzer calls this once before fuzzing: caps file sizes and writes the seed corpus where
/// SETTEE_FUZZ_SEEDS says.
///
/// ```sh
/// SETTEE_FUZZ_SEEDS=/tmp/seeds settee-fuzz corpus/ /tmp/seeds -max_total_time=60
/// ```
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    // No input may make the engine write a file beyond 256 MiB: past it the kernel raises
    // SIGXFSZ, which libFuzzer reports as a finding.
    var limit = rlimit(rlim_cur: 256 << 20, rlim_max: 256 << 20)
    setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
    FuzzReplay.writeSeeds { try FuzzTargets.writeSeedCorpus(to: $0) }
    return 0
}

#if SETTEE_LIBFUZZER
/// SwiftPM links an executable's entry point under this name; hand control to libFuzzer's driver.
///
/// ```sh
/// settee-fuzz corpus/ -max_total_time=60   # runs libFuzzer through this function
/// ```
@_cdecl("settee_fuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzReplay.runLibFuzzer(argc, argv) { data, size in fuzzOneInput(data, size) }
}
#else
@main
struct Replay {
    static func main() throws {
        let count = try FuzzReplay.run(arguments: Array(CommandLine.arguments.dropFirst())) { bytes in
            _ = fuzzOneInput(bytes.baseAddress, bytes.count)
        }
        try? FileManager.default.removeItem(atPath: scratch)
        print("replayed \(count) inputs")
    }
}
#endif
