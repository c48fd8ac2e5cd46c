import Foundation
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
    if let seeds = ProcessInfo.processInfo.environment["SETTEE_FUZZ_SEEDS"] {
        do {
            try ServerFuzzing.writeSeedCorpus(to: seeds)
        } catch {
            FileHandle.standardError.write(Data("cannot write the seed corpus: \(error)\n".utf8))
            exit(2)
        }
    }
    return 0
}

#if SETTEE_LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// SwiftPM links an executable's entry point under this name; hand control to libFuzzer's driver.
///
/// ```sh
/// settee-server-fuzz corpus/ -max_total_time=60   # runs libFuzzer through this function
/// ```
@_cdecl("settee_server_fuzz_main")
public func serverFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in serverFuzzOneInput(data, size) }
}
#else
@main
struct Replay {
    static func main() throws {
        var files: [String] = []
        for arg in CommandLine.arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: arg, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such file: \(arg)\n".utf8))
                exit(2)
            }
            if isDirectory.boolValue {
                for name in try FileManager.default.contentsOfDirectory(atPath: arg).sorted() { files.append(arg + "/" + name) }
            } else {
                files.append(arg)
            }
        }
        for file in files {
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: file)))
            bytes.withUnsafeBufferPointer { _ = serverFuzzOneInput($0.baseAddress, $0.count) }
        }
        print("replayed \(files.count) inputs")
    }
}
#endif
