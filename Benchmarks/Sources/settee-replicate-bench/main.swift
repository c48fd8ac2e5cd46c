import Foundation
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
import Synchronization

// `replicate-http` (scripts/bench-http runs it against a `settee serve` it started in another
// process, so this process's memory is the replicator's alone):
//
// - push: N documents of about 500 B saved in a local database (untimed, 1000 per batch), then a
//   one-shot push into the server's empty database `db`, timed from start() until stopped → docs/s;
// - pull: the same N documents pulled into a new empty local database → docs/s;
// - no-op: a local database of M documents and the server's database `noop` in step (pushed and
//   exchanged once, untimed); then a one-shot push-and-pull with nothing new, timed, the median of
//   11 runs → ms, and the requests each run makes (counted at the peer);
// - attachment: a document with an A MB attachment (a file) pushed, then pulled into a new
//   database; the replicator's resident memory sampled every 20 ms → growth over the baseline.
//
// - channel (`--channel-url`, `--plain-url`): the server's database behind --channel-url gets C
//   documents spread over 100 channels (`ch-0` … `ch-99`, pushed untimed), the one behind
//   --plain-url C/100 documents with no channel; then, timed, the median of 3 one-shot pulls into
//   empty databases: as a user who reads one channel (`ch-7`, C/100 documents) from the first,
//   and as a user who reads everything from the second.
//
// Usage: settee-replicate-bench --url URL --noop-url URL [--docs N] [--noop-docs M] [--attachment-mb A] [--dir D]
//        settee-replicate-bench --channel-url URL --plain-url URL [--channel-docs C] [--dir D]
// Prints one JSON object.

struct Options {
    var url = ""
    var noopURL = ""
    var docs = 100_000
    var noopDocs = 1_000_000
    var attachmentMB = 100
    var channelURL = ""
    var plainURL = ""
    var channelDocs = 1_000_000
    var directory = NSTemporaryDirectory() + "settee-replicate-bench-\(getpid())"
}

func parse() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    while let a = args.popFirst() {
        guard let v = args.popFirst() else { fatalError("\(a) needs a value") }
        switch a {
        case "--url": o.url = v
        case "--noop-url": o.noopURL = v
        case "--docs": o.docs = Int(v) ?? o.docs
        case "--noop-docs": o.noopDocs = Int(v) ?? o.noopDocs
        case "--attachment-mb": o.attachmentMB = Int(v) ?? o.attachmentMB
        case "--channel-url": o.channelURL = v
        case "--plain-url": o.plainURL = v
        case "--channel-docs": o.channelDocs = Int(v) ?? o.channelDocs
        case "--dir": o.directory = v
        default: fatalError("unknown option \(a)")
        }
    }
    return o
}

func log(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }

func open(_ dir: String, _ name: String) throws -> Database {
    try Database(name: name, config: DatabaseConfiguration(directory: dir))
}

/// About 500 bytes of JSON, as bench-http's documents.
func body(_ i: Int) -> [String: JSONValue] {
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    var x = UInt64(i) &* 0x9E37_79B9_7F4A_7C15
    func word() -> JSONValue {
        x ^= x >> 29; x &*= 0xBF58_476D_1CE4_E5B9; x ^= x >> 32
        return .string(words[Int(x % 10)])
    }
    return ["title": .string((0 ..< 8).map { _ in word().stringValue! }.joined(separator: " ")), "n": .int(Int64(i)),
            "tags": .array((0 ..< 5).map { _ in word() }), "body": .string(String(repeating: "x", count: 350))]
}

func load(_ db: Database, _ range: Range<Int>, channels: Int = 0) throws {
    for start in stride(from: range.lowerBound, to: range.upperBound, by: 1000) {
        try db.inBatch {
            for i in start ..< min(start + 1000, range.upperBound) {
                var data = body(i)
                if channels > 0 { data["channels"] = ["ch-\(i % channels)"] }
                try db.saveDocument(MutableDocument(id: String(format: "doc-%08d", i), data: data))
            }
        }
    }
}

/// `replicate-channel`: a one-channel user's pull from a large database in 100 channels, next to
/// a pull of as many documents from a database without channels.
func channelBench(_ o: Options) async throws {
    guard let channelURL = URL(string: o.channelURL), let plainURL = URL(string: o.plainURL) else { fatalError("bad URL") }
    try? FileManager.default.removeItem(atPath: o.directory)
    try FileManager.default.createDirectory(atPath: o.directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: o.directory) }
    let perChannel = o.channelDocs / 100
    log("replicate-channel: loading \(o.channelDocs) documents in 100 channels and \(perChannel) without (untimed)")
    let all = try open(o.directory, "all")
    try load(all, 0 ..< o.channelDocs, channels: 100)
    _ = try await replicate(all, URLEndpoint(url: channelURL), .push)
    try all.close()
    let plain = try open(o.directory, "plain")
    try load(plain, 0 ..< perChannel)
    _ = try await replicate(plain, URLEndpoint(url: plainURL), .push)
    try plain.close()
    var channelTimes: [Double] = []
    var plainTimes: [Double] = []
    for run in 0 ..< 3 {
        // The user `reader` reads ch-7 only (the server's configuration says so).
        let one = try open(o.directory, "channel-\(run)")
        let userURL = URL(string: o.channelURL.replacingOccurrences(of: "bench:bench-password", with: "reader:reader-password"))!
        channelTimes.append(try await replicate(one, URLEndpoint(url: userURL), .pull))
        let got = try one.count
        guard got == UInt64(perChannel) else { fatalError("the channel pull got \(got) of \(perChannel)") }
        try one.close()
        let other = try open(o.directory, "plain-\(run)")
        plainTimes.append(try await replicate(other, URLEndpoint(url: plainURL), .pull))
        let gotPlain = try other.count
        guard gotPlain == UInt64(perChannel) else { fatalError("the plain pull got \(gotPlain)") }
        try other.close()
    }
    channelTimes.sort()
    plainTimes.sort()
    let result: [String: JSONValue] = [
        "channel_pull_s": .double(channelTimes[1]), "plain_pull_s": .double(plainTimes[1]),
        "channel_docs": .int(Int64(o.channelDocs)), "pulled_docs": .int(Int64(perChannel)),
    ]
    print(try JSONValue.object(result).jsonText())
}

/// Counts the requests a replication makes (one per peer call that reaches the server).
final class Counter: Sendable {
    let calls = Mutex(0)
    func tick() { calls.withLock { $0 += 1 } }
}

struct CountingPeer: ReplicationPeer {
    let inner: any ReplicationPeer
    let counter: Counter
    var identifier: String { inner.identifier }
    func configured(for c: ReplicatorConfiguration) -> any ReplicationPeer { CountingPeer(inner: inner.configured(for: c), counter: counter) }
    func info() async throws -> PeerInfo { counter.tick(); return try await inner.info() }
    func changes(_ r: ChangesRequest) async throws -> ChangesPage { counter.tick(); return try await inner.changes(r) }
    func waitForChanges(after s: ReplicationSequence) async throws { counter.tick(); try await inner.waitForChanges(after: s) }
    func revsDiff(_ r: [String: [String]]) async throws -> [String: RevsDiffResult] { counter.tick(); return try await inner.revsDiff(r) }
    func revisions(_ r: [RevisionRequest]) async throws -> [ReplicatedRevision] { counter.tick(); return try await inner.revisions(r) }
    func missingBlobs(_ d: [String]) async throws -> [String] { try await inner.missingBlobs(d) }
    func blob(withDigest d: String) async throws -> Blob? { try await inner.blob(withDigest: d) }
    func saveBlob(_ b: Blob) async throws { try await inner.saveBlob(b) }
    func insertRevisions(_ r: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        counter.tick()
        return try await inner.insertRevisions(r)
    }
    func localDocument(withID id: String) async throws -> [String: JSONValue]? { counter.tick(); return try await inner.localDocument(withID: id) }
    func saveLocalDocument(_ p: [String: JSONValue], withID id: String) async throws { counter.tick(); try await inner.saveLocalDocument(p, withID: id) }
}

func replicate(_ db: Database, _ peer: any ReplicationPeer, _ type: ReplicatorType) async throws -> Double {
    var config = ReplicatorConfiguration(database: db, target: peer)
    config.replicatorType = type
    config.logHandler = { level, message in if level >= .warning { log("replicator: \(message)") } }
    let replicator = Replicator(config: config)
    let started = ContinuousClock.now
    replicator.start()
    let status = await replicator.waitUntilStopped()
    let elapsed = ContinuousClock.now - started
    if let e = status.error { throw e }
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func residentMiB() -> Double {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = Double(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else { return 0 }
    return kb / 1024
}

/// The highest resident size seen while `body` runs, sampled every 20 ms.
func peakResident(during body: () async throws -> Void) async rethrows -> Double {
    let peak = Mutex(residentMiB())
    let sampling = Task.detached {
        while !Task.isCancelled {
            let now = residentMiB()
            peak.withLock { $0 = max($0, now) }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
    try await body()
    sampling.cancel()
    _ = await sampling.value
    return peak.withLock { max($0, residentMiB()) }
}

let o = parse()
if !o.channelURL.isEmpty {
    try await channelBench(o)
    exit(0)
}
guard let url = URL(string: o.url), let noopURL = URL(string: o.noopURL) else { fatalError("--url and --noop-url are needed") }
try? FileManager.default.removeItem(atPath: o.directory)
try FileManager.default.createDirectory(atPath: o.directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: o.directory) }

log("replicate-http: loading \(o.docs) documents (untimed)")
let source = try open(o.directory, "source")
try load(source, 0 ..< o.docs)
log("replicate-http: push")
let pushSeconds = try await replicate(source, URLEndpoint(url: url), .push)
log("replicate-http: pull")
let pulled = try open(o.directory, "pulled")
let pullSeconds = try await replicate(pulled, URLEndpoint(url: url), .pull)
let pulledCount = try pulled.count
guard pulledCount == UInt64(o.docs) else { fatalError("pulled \(pulledCount) of \(o.docs)") }
try source.close()
try pulled.close()

log("replicate-http: loading \(o.noopDocs) documents and bringing the server in step (untimed)")
let big = try open(o.directory, "big")
try load(big, 0 ..< o.noopDocs)
_ = try await replicate(big, URLEndpoint(url: noopURL), .push)
_ = try await replicate(big, URLEndpoint(url: noopURL), .pushAndPull)
var noop: [Double] = []
var requests: [Int] = []
for _ in 0 ..< 11 {
    let counter = Counter()
    noop.append(try await replicate(big, CountingPeer(inner: URLEndpoint(url: noopURL), counter: counter), .pushAndPull) * 1000)
    requests.append(counter.calls.withLock { $0 })
}
noop.sort()
try big.close()

log("replicate-http: a \(o.attachmentMB) MB attachment, pushed then pulled")
let file = URL(fileURLWithPath: o.directory + "/attachment.bin")
FileManager.default.createFile(atPath: file.path, contents: nil)
let handle = try FileHandle(forWritingTo: file)
var x: UInt64 = 42
for _ in 0 ..< o.attachmentMB {
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    for i in stride(from: 0, to: chunk.count, by: 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17
        withUnsafeBytes(of: x) { for (j, b) in $0.enumerated() { chunk[i + j] = b } }
    }
    try handle.write(contentsOf: chunk)
}
try handle.close()
let withAttachment = try open(o.directory, "attachment-source")
let blob = try Blob(contentType: "application/octet-stream", fileURL: file)
try withAttachment.saveBlob(blob)
let doc = MutableDocument(id: "video", data: ["title": "large"])
doc.setValue(["video.bin": .object(blob.properties)], forKey: "_attachments")
try withAttachment.saveDocument(doc)
let attachmentURL = URL(string: o.url.replacingOccurrences(of: "/db", with: "/attachments"))!
let pushBase = residentMiB()
let pushPeak = try await peakResident { _ = try await replicate(withAttachment, URLEndpoint(url: attachmentURL), .push) }
let attachmentTarget = try open(o.directory, "attachment-target")
let pullBase = residentMiB()
let pullPeak = try await peakResident { _ = try await replicate(attachmentTarget, URLEndpoint(url: attachmentURL), .pull) }
guard try attachmentTarget.blob(withDigest: blob.digest)?.length == blob.length else { fatalError("the attachment did not arrive whole") }

let result: [String: JSONValue] = [
    "push_docs_per_s": .double(Double(o.docs) / pushSeconds),
    "pull_docs_per_s": .double(Double(o.docs) / pullSeconds),
    "noop_median_ms": .double(noop[noop.count / 2]),
    "noop_requests": .array(requests.map { .int(Int64($0)) }),
    "attachment_push_rss_growth_mib": .double(pushPeak - pushBase),
    "attachment_pull_rss_growth_mib": .double(pullPeak - pullBase),
    "docs": .int(Int64(o.docs)), "noop_docs": .int(Int64(o.noopDocs)), "attachment_mb": .int(Int64(o.attachmentMB)),
]
print(try JSONValue.object(result).jsonText())
