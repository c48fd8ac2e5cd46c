import Glibc

/// Progress of long phases on stderr: a line at every tenth of the way.
final class Progress {
    private let label: String
    private let total: Int
    private var nextTenth = 1

    init(_ label: String, total: Int) {
        self.label = label
        self.total = max(total, 1)
    }

    @inline(__always)
    func update(_ done: Int) {
        guard done * 10 >= nextTenth * total else { return }
        report(done)
    }

    private func report(_ done: Int) {
        while done * 10 >= nextTenth * total { nextTenth += 1 }
        Progress.log("  \(label): \(done)/\(total)")
    }

    static func log(_ message: String) {
        let line = message + "\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }
}
