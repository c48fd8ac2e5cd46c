import Foundation

/// File-system chores around the databases: none of them timed.
enum Files {
    /// A new empty directory under $TMPDIR (or /tmp).
    static func makeTemporaryDirectory() throws -> String {
        let parent = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array((parent + "/settee-bench-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw EngineError("cannot create a temporary directory in \(parent): \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// Writes back every dirty page of the system (sync(2)), so a timed phase does not pay for the
    /// writeback of what earlier phases or engines wrote: an fsync can wait on other files' data.
    /// Before a timed compaction: the history's writeback settled and its files read into the
    /// page cache, so the compaction measures copying, not the disk's first reads.
    static func warmBeforeCompaction(_ directory: String, engine name: String, bytes: Int) throws {
        settleWriteback()
        let cached = try readIntoPageCache(directory)
        Progress.log("  \(name) compaction: \(bytes) bytes before, \(cached) read into the page cache; compacting")
    }

    static func settleWriteback() {
        sync()
    }

    /// Reads every regular file under `directory` once, start to end, so all of it is in the OS page cache
    /// (clean, as `settleWriteback` was called first) when a timed phase reads it. Returns the bytes read.
    static func readIntoPageCache(_ directory: String) throws -> Int {
        guard let walk = FileManager.default.enumerator(atPath: directory) else {
            throw EngineError("cannot list \(directory)")
        }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var total = 0
        while let relative = walk.nextObject() as? String {
            guard walk.fileAttributes?[.type] as? FileAttributeType == .typeRegular else { continue }
            let descriptor = open(directory + "/" + relative, O_RDONLY)
            guard descriptor >= 0 else { throw EngineError("cannot open \(directory)/\(relative)") }
            defer { close(descriptor) }
            while true {
                let count = read(descriptor, buffer, 1 << 20)
                guard count > 0 else { break }
                total += count
            }
        }
        return total
    }

    static func createDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    static func isMissingOrEmpty(_ path: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: path) else {
            return !FileManager.default.fileExists(atPath: path)
        }
        return entries.isEmpty
    }

    static func remove(_ path: String) throws {
        try FileManager.default.removeItem(atPath: path)
    }

    /// The sizes (st_size) of the named files inside `directory`, those that exist.
    static func size(of names: [String], in directory: String) -> Int {
        names.reduce(0) { total, name in total + (fileSize(directory + "/" + name) ?? 0) }
    }

    /// The sizes (st_size) of every regular file under `directory`, at any depth.
    static func totalSize(of directory: String) throws -> Int {
        guard let walk = FileManager.default.enumerator(atPath: directory) else {
            throw EngineError("cannot list \(directory)")
        }
        var total = 0
        while let relative = walk.nextObject() as? String {
            if walk.fileAttributes?[.type] as? FileAttributeType == .typeRegular {
                total += fileSize(directory + "/" + relative) ?? 0
            }
        }
        return total
    }

    private static func fileSize(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }
}
