/// Everything the engines write and read, generated once from the seed before any timing, and identical
/// for every engine.
final class Dataset {
    /// How many single-document durable commits `durable-commit` makes.
    static let updateCount = 2000
    /// Documents per commit in `bulk-load` and `rev-insert`.
    static let batchSize = 1000

    let documentCount: Int
    let generator: DocumentGenerator

    /// Document `i`'s key (`doc-%08d`), first version (`1-…`) and body.
    private let keys: ByteTable
    private let versions: ByteTable
    private let bodies: ByteTable

    /// `insertionOrder[p]` is the document inserted at position `p`, with sequence `p + 1`.
    let insertionOrder: [Int]
    /// The documents `point-get` reads: first the untimed warm-up, then the timed run.
    let warmUpGets: [Int]
    let timedGets: [Int]
    /// The documents `durable-commit` updates, in order, each with its new version and body.
    let updatedDocuments: [Int]
    private let updateVersions: ByteTable
    private let updateBodies: ByteTable

    init(documentCount: Int, seed: UInt64, progress: Progress) {
        self.documentCount = documentCount
        let generator = DocumentGenerator(seed: seed)
        self.generator = generator

        keys = ByteTable(byteCapacity: documentCount * 16, entryCapacity: documentCount)
        versions = ByteTable(byteCapacity: documentCount * 40, entryCapacity: documentCount)
        bodies = ByteTable(byteCapacity: documentCount * DocumentGenerator.bodySizes.upperBound,
                           entryCapacity: documentCount)
        for index in 0 ..< documentCount {
            keys.append(DocumentGenerator.key(index))
            versions.append(generator.version(of: index, generation: 1))
            bodies.append(generator.body(of: index, generation: 1))
            progress.update(index + 1)
        }

        // Fisher-Yates over 0..<N: the one insertion order every engine uses.
        var order = Array(0 ..< documentCount)
        var random = SplitMix64(seed: seed, stream: Stream.insertionOrder, item: 0)
        for position in stride(from: documentCount - 1, to: 0, by: -1) {
            order.swapAt(position, random.bounded(position + 1))
        }
        insertionOrder = order

        func uniformDocuments(_ count: Int, stream: UInt64) -> [Int] {
            var random = SplitMix64(seed: seed, stream: stream, item: 0)
            return (0 ..< count).map { _ in random.bounded(documentCount) }
        }
        warmUpGets = uniformDocuments(documentCount, stream: Stream.warmUpGets)
        timedGets = uniformDocuments(documentCount, stream: Stream.timedGets)

        // Updates pick documents uniformly, repeats allowed; a document's next update is its next generation.
        updatedDocuments = uniformDocuments(Self.updateCount, stream: Stream.updates)
        updateVersions = ByteTable(byteCapacity: Self.updateCount * 40, entryCapacity: Self.updateCount)
        updateBodies = ByteTable(byteCapacity: Self.updateCount * DocumentGenerator.bodySizes.upperBound,
                                 entryCapacity: Self.updateCount)
        var generations: [Int: Int] = [:]
        for index in updatedDocuments {
            let generation = generations[index, default: 1] + 1
            generations[index] = generation
            updateVersions.append(generator.version(of: index, generation: generation))
            updateBodies.append(generator.body(of: index, generation: generation))
        }
    }

    func key(_ index: Int) -> UnsafeRawBufferPointer { keys[index] }
    func version(_ index: Int) -> UnsafeRawBufferPointer { versions[index] }
    func body(_ index: Int) -> UnsafeRawBufferPointer { bodies[index] }

    /// The documents inserted at `positions`, with their sequences, as one batch.
    func insertion(_ positions: Range<Int>) -> DocumentBatch {
        DocumentBatch(dataset: self, positions: positions)
    }

    /// The documents inserted at `positions` as `rev-insert` writes them: each a replicated revision with its
    /// history. The histories are generated here, before any clock starts.
    func replication(_ positions: Range<Int>) -> ReplicatedBatch {
        ReplicatedBatch(dataset: self, positions: positions)
    }

    /// The history `rev-insert` gives document `index`, newest first (`10-…` … `1-…`).
    func replicatedHistory(of index: Int) -> [[UInt8]] {
        stride(from: ReplicatedBatch.historyDepth, through: 1, by: -1).map {
            generator.replicatedRevisionID(of: index, generation: $0)
        }
    }

    /// The `number`th update (0-based) of `durable-commit`: sequence `N + number + 1`.
    func update(_ number: Int) -> Document {
        let index = updatedDocuments[number]
        return Document(key: keys[index], sequence: UInt64(documentCount + number + 1),
                        version: updateVersions[number], body: updateBodies[number])
    }

    /// The body document `index` has once every update has been made.
    func finalBody(of index: Int) -> UnsafeRawBufferPointer {
        guard let last = updatedDocuments.lastIndex(of: index) else { return bodies[index] }
        return updateBodies[last]
    }

    /// The total size of the bodies `point-get` reads in its timed run.
    var timedGetBytes: Int { timedGets.reduce(0) { $0 + bodies[$1].count } }

    /// What `changes-scan` must see after the load: every document, in insertion order.
    var expectedScan: ReadSink.Summary {
        let sink = ReadSink()
        for index in insertionOrder {
            sink.acceptChange(key: keys[index], version: versions[index], body: bodies[index])
        }
        return sink.summary
    }

    /// The total size of keys, versions and bodies.
    var byteCount: Int { keys.byteCount + versions.byteCount + bodies.byteCount }
}

/// One document as an engine writes it. The buffers belong to the `Dataset`.
struct Document {
    let key: UnsafeRawBufferPointer
    let sequence: UInt64
    let version: UnsafeRawBufferPointer
    let body: UnsafeRawBufferPointer
}

/// The documents of one bulk-load commit, in insertion order.
struct DocumentBatch: RandomAccessCollection {
    let dataset: Dataset
    let positions: Range<Int>

    var startIndex: Int { positions.lowerBound }
    var endIndex: Int { positions.upperBound }

    subscript(position: Int) -> Document {
        let index = dataset.insertionOrder[position]
        return Document(key: dataset.key(index), sequence: UInt64(position + 1),
                        version: dataset.version(index), body: dataset.body(index))
    }
}
