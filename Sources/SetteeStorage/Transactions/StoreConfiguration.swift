/// How a ``Store`` writes.
///
/// ```swift
/// var config = StoreConfiguration()
/// config.durability = .synchronous      // the default: fdatasync before a commit returns
/// config.checkpointInterval = 64 << 20  // replay at most about 64 MiB of operations on open
/// let store = try Store(directory: "/tmp/db", configuration: config)
/// ```
///
/// A value type; safe to share between threads.
public struct StoreConfiguration: Sendable, Equatable {
    /// When a commit is durable.
    ///
    /// ```swift
    /// config.durability = .none   // a bulk import, synced by close()
    /// ```
    public enum Durability: Sendable, Equatable {
        /// `fdatasync` before ``Store/write(_:)`` returns: a returned commit survives power loss.
        case synchronous
        /// No sync per commit (checkpoints still sync): a crash can lose recent commits, never
        /// corrupt older ones. For bulk imports and tests.
        case none
    }

    /// When a commit is durable; default ``Durability/synchronous``.
    ///
    /// ```swift
    /// config.durability = .synchronous
    /// ```
    public var durability: Durability = .synchronous

    /// Out-of-line values of at least this many bytes are LZ4-compressed when that saves at least
    /// an eighth. `Int.max` turns compression off.
    ///
    /// ```swift
    /// config.compressionThreshold = .max   // never compress
    /// ```
    public var compressionThreshold: Int = 256

    /// Operation bytes (everything a commit holds but its values) after which the in-memory index
    /// nodes are written out (a checkpoint). Opening replays about this much; values in the log
    /// are skipped by their length, so they do not count. The log after a checkpoint is also
    /// capped at 16 times this. Larger values mean fewer checkpoints and less write amplification,
    /// smaller ones faster opening after a crash.
    public var checkpointInterval: Int = 64 << 20

    /// In-memory index nodes after which a checkpoint is made whatever the log size, bounding memory.
    ///
    /// ```swift
    /// config.maxDirtyNodes = 16_384   // bound memory more tightly
    /// ```
    public var maxDirtyNodes: Int = 65_536

    /// The address space reserved for the log's memory map, in bytes (rounded up to whole
    /// pages); nil reserves the most the system grants, from 1 TiB down to 4 GiB. The log can
    /// never grow past it: an append that would is refused with `io` (`EFBIG`). Tests set a
    /// small one to reach that limit.
    ///
    /// ```swift
    /// config.mapReservation = 4 << 20   // the log stops at 4 MiB
    /// ```
    package var mapReservation: Int? = nil

    /// Creates the default configuration.
    public init() {}

    /// Longest key, in bytes.
    ///
    /// ```swift
    /// precondition(key.count <= StoreConfiguration.maxKeyLength)
    /// ```
    public static let maxKeyLength = 1024
    /// Values up to this size are kept inside tree nodes; larger ones are stored out of line.
    ///
    /// ```swift
    /// let inline = value.count <= StoreConfiguration.maxInlineValueLength
    /// ```
    public static let maxInlineValueLength = 512
    /// Largest value (and largest commit payload), in bytes.
    ///
    /// ```swift
    /// precondition(blob.count <= StoreConfiguration.maxValueLength)
    /// ```
    public static let maxValueLength = 1 << 29
}

/// A named ordered map from byte-string keys to byte-string values inside a ``Store``.
///
/// Get one from ``WriteTransaction/createTree(named:)`` or ``ReadTransaction/tree(named:)``; it
/// stays valid for the life of the store.
///
/// ```swift
/// let byID = try store.write { tx in try tx.createTree(named: "by-id") }
/// ```
///
/// A value type; safe to share between threads.
public struct Tree: Hashable, Sendable, CustomStringConvertible {
    /// The tree's name.
    ///
    /// ```swift
    /// print(tree.name)   // "people"
    /// ```
    public let name: String
    let id: UInt32
    let storeID: ObjectIdentifier

    public var description: String { "Tree(\(name))" }
}

/// The location of a value stored out of line with ``WriteTransaction/appendValue(_:)-(UnsafeRawBufferPointer)``.
///
/// Embed ``rawValue`` (8 bytes) in your own tree values; read it back with
/// ``ReadTransaction/withValue(at:_:)``.
///
/// ```swift
/// let ref = try store.write { tx in try tx.appendValue(Array("body".utf8)) }
/// let text = try store.read { tx in try tx.withValue(at: ref) { String(decoding: $0, as: UTF8.self) } }
/// ```
///
/// A value type; safe to share between threads.
public struct ValueRef: Hashable, Sendable {
    /// The file offset of the value's entry.
    ///
    /// ```swift
    /// let stored = withUnsafeBytes(of: ref.rawValue.littleEndian) { Array($0) }
    /// ```
    public var rawValue: UInt64
    /// Wraps a raw offset read back from a stored value.
    ///
    /// ```swift
    /// let ref = ValueRef(rawValue: UInt64(littleEndian: value.loadUnaligned(as: UInt64.self)))
    /// ```
    public init(rawValue: UInt64) { self.rawValue = rawValue }
}
