// A short tour of the storage engine: create a store, write a batch, read it back, reopen,
// check integrity. Usage: settee-storage-demo [directory] [count]
import Foundation
import SetteeStorage

let args = CommandLine.arguments
let directory = args.count > 1 ? args[1] : NSTemporaryDirectory() + "settee-demo-\(ProcessInfo.processInfo.processIdentifier)"
let count = args.count > 2 ? Int(args[2]) ?? 100_000 : 100_000
let removeAfter = args.count <= 1

func now() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}

func key(_ i: Int) -> [UInt8] {
    var s = String(i)
    while s.count < 8 { s = "0" + s }
    return Array("key-\(s)".utf8)
}

do {
    var store = try Store(directory: directory)
    let tree = try store.write { tx in try tx.createTree(named: "demo") }
    var t0 = now()
    var i = 0
    while i < count {
        try store.write { tx in
            for j in i..<min(i + 1000, count) {
                let value = Array("value \(j) ".utf8) + [UInt8](repeating: UInt8(j % 251), count: 100)
                try tx.put(key(j), value, in: tree)
            }
        }
        i += 1000
    }
    print("wrote \(count) entries in \(count / 1000) durable commits: \(Int(Double(count) / (now() - t0))) entries/s")
    t0 = now()
    var found = 0
    try store.read { tx in
        for j in stride(from: 0, to: count, by: 7) where try tx.withValue(forKey: key(j), in: tree, { $0.count }) != nil {
            found += 1
        }
    }
    print("read back \(found) of \(count / 7 + (count % 7 == 0 ? 0 : 1)) sampled keys in \(ms(now() - t0))")
    try store.close()
    t0 = now()
    store = try Store(directory: directory)
    let reopened = try store.read { tx in try tx.count(in: tx.tree(named: "demo")!) }
    print("reopened in \(ms(now() - t0)): \(reopened) entries; file \(store.fileSize) bytes")
    let report = try store.check()
    print("check: \(report)")
    try store.close()
    if removeAfter { try? FileManager.default.removeItem(atPath: directory) }
} catch {
    print("error: \(error)")
    exit(1)
}

func ms(_ seconds: Double) -> String { "\(Int(seconds * 1000)) ms" }
