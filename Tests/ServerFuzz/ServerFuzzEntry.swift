import Foundation
import SetteeFuzzReplay
import SetteeServerFuzzKit

// Built two ways. With `-sanitize=fuzzer -DSETTEE_LIBFUZZER` (scripts/fuzz), libFuzzer calls the
// entry point below through its driver. Built normally, it replays inputs: every file named on
// the command line, or every file in a directory named there.

/// libFuzzer's entry point: one input, answered as an HTTP request by a server in this process
/// (`ServerFuzzing.oneInput`).
///
/// ```swift
/// let bytes: [UInt8] = Array(try Data(contentsOf: URL(fileURLWithPath: "crash-1234")))
/// bytes.withUnsafeBufferPointer { _ = serverFuzzOneInput($0.baseAddress, $0.count) }
/// ```
@_cdecl("LLVMFuzzerTestOneInput")
public func serverFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    ServerFuzzing.oneInput(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// libFuzzer calls this once before fuzzing: writes the seed corpus where SETTEE_FUZZ_SEEDS says.
///
/// ```sh
/// SETTEE_FUZZ_SEEDS=/tmp/seeds settee-server-fuzz corpus/ /tmp/seeds -max_total_time=60
/// ```
@_cdecl("LLVMFuzzerInitialize")
public func serverFuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzReplay.writeSeeds { try ServerFuzzing.writeSeedCorpus(to: $0) }
    return 0
}

#if SETTEE_LIBFUZZER
/// SwiftPM links an executable's entry point under this name; hand control to libFuzzer's driver.
///
/// ```sh
/// settee-server-fuzz corpus/ -max_total_time=60   # runs libFuzzer through this function
/// ```
@_cdecl("settee_server_fuzz_main")
public func serverFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzReplay.runLibFuzzer(argc, argv) { data, size in serverFuzzOneInput(data, size) }
}
#else
@main
struct Replay {
    static func main() throws {
        let count = try FuzzReplay.run(arguments: Array(CommandLine.arguments.dropFirst())) { bytes in
            _ = serverFuzzOneInput(bytes.baseAddress, bytes.count)
        }
        print("replayed \(count) inputs")
    }
}
#endif
