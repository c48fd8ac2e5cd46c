import Foundation

/// What a fuzz target's executable does when it is built without libFuzzer: replays inputs.
///
/// ```swift
/// let count = try FuzzReplay.run(arguments: Array(CommandLine.arguments.dropFirst())) { bytes in one(bytes) }
/// ```
public enum FuzzReplay {
    /// Hands the bytes of every file named in `arguments`, or in a directory named there (sorted
    /// by name), to `input`, and returns how many. A name that does not exist exits with 2.
    public static func run(arguments: [String], _ input: (UnsafeBufferPointer<UInt8>) -> Void) throws -> Int {
        var files: [String] = []
        for arg in arguments {
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
            bytes.withUnsafeBufferPointer(input)
        }
        return files.count
    }

    /// Writes a target's seed corpus into the directory `SETTEE_FUZZ_SEEDS` names, if it names
    /// one (libFuzzer's initializer calls this); a failure exits with 2.
    public static func writeSeeds(_ write: (String) throws -> Void) {
        guard let seeds = ProcessInfo.processInfo.environment["SETTEE_FUZZ_SEEDS"] else { return }
        do {
            try write(seeds)
        } catch {
            FileHandle.standardError.write(Data("cannot write the seed corpus: \(error)\n".utf8))
            exit(2)
        }
    }

    #if SETTEE_LIBFUZZER
    /// Hands the process to libFuzzer's driver, which calls `callback` with each input.
    public static func runLibFuzzer(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32 {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments, callback)
    }
    #endif
}

#if SETTEE_LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32
#endif
