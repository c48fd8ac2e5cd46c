/// The one error type of the storage engine.
///
/// Match on ``code`` or use the `~=` pattern with a code:
///
/// ```swift
/// do {
///     let store = try Store(directory: path)
/// } catch StorageError.Code.locked {
///     print("another process has the database open")
/// }
/// ```
///
/// Descriptions name offsets, trees and system calls, never the bytes of keys or values.
/// A value type; safe to share between threads.
public struct StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// ```swift
    /// if error.code == .locked { print("open elsewhere") }
    /// ```
    public enum Code: String, Sendable, Equatable {
        /// Another process (or another `Store` in this process) has the database open.
        case locked
        /// The file is damaged; ``StorageError/offset`` says where.
        case corrupted
        /// A system call failed; ``StorageError/errno`` and ``StorageError/operation`` say which.
        case io
        /// The file was written by a format version this build cannot read.
        case versionMismatch
        /// A key longer than ``StoreConfiguration/maxKeyLength``, or empty.
        case invalidKey
        /// A value larger than ``StoreConfiguration/maxValueLength``.
        case valueTooLarge
        /// A tree handle that does not belong to this database, or an unknown tree.
        case noSuchTree
        /// A ``ValueRef`` that does not point at a stored value.
        case invalidValueRef
        /// An earlier write or `fdatasync` failed; the store refuses writes until it is reopened.
        case poisoned
        /// The file system, or the user's quota, is full (`ENOSPC`, `EDQUOT`;
        /// ``StorageError/errno`` and ``StorageError/operation`` say which call). Nothing of the
        /// write that met it was kept; unless a sync of writes not yet durable failed with it
        /// (then the store is ``poisoned``), the store stays usable and a later write, once
        /// space is freed, succeeds.
        case noSpace
        /// The store was closed.
        case closed
        /// An argument or configuration value is out of range.
        case invalidArgument
    }

    /// What went wrong.
    ///
    /// ```swift
    /// switch error.code { case .corrupted: repair(); default: throw error }
    /// ```
    public var code: Code
    /// A short explanation, free of user data.
    ///
    /// ```swift
    /// print(error.reason)
    /// ```
    public var reason: String
    /// The file offset concerned, for ``Code/corrupted``.
    ///
    /// ```swift
    /// if let at = error.offset { print("damage at byte", at) }
    /// ```
    public var offset: UInt64?
    /// The tree concerned, when there is one.
    ///
    /// ```swift
    /// print(error.tree ?? "no tree")
    /// ```
    public var tree: String?
    /// The system error number, for ``Code/io``.
    ///
    /// ```swift
    /// if error.errno == ENOSPC { print("disk full") }
    /// ```
    public var errno: Int32?
    /// The system call that failed, for ``Code/io``.
    ///
    /// ```swift
    /// print(error.operation ?? "")   // "fdatasync"
    /// ```
    public var operation: String?

    /// Creates an error; the engine's factories below are the usual way.
    ///
    /// ```swift
    /// throw StorageError(code: .invalidArgument, reason: "negative size")
    /// ```
    public init(code: Code, reason: String, offset: UInt64? = nil, tree: String? = nil, errno: Int32? = nil, operation: String? = nil) {
        self.code = code
        self.reason = reason
        self.offset = offset
        self.tree = tree
        self.errno = errno
        self.operation = operation
    }

    public var description: String {
        var s = "StorageError.\(code.rawValue): \(reason)"
        if let offset { s += " (offset \(offset))" }
        if let tree { s += " (tree '\(tree)')" }
        if let operation { s += " (\(operation)" + (errno.map { ", errno \($0)" } ?? "") + ")" }
        return s
    }

    static func corrupted(_ reason: String, offset: UInt64?, tree: String? = nil) -> StorageError {
        StorageError(code: .corrupted, reason: reason, offset: offset, tree: tree)
    }

    static func io(_ operation: String, errno: Int32) -> StorageError {
        if System.isOutOfSpace(errno) {
            return StorageError(code: .noSpace, reason: "the file system is full", errno: errno, operation: operation)
        }
        return StorageError(code: .io, reason: "system call failed", errno: errno, operation: operation)
    }

    /// The error of a simulated full disk (the crash kit's fault-injecting file).
    package static func noSpace(_ operation: String) -> StorageError { io(operation, errno: System.noSpaceError) }
}

extension StorageError.Code {
    /// Lets `catch StorageError.Code.corrupted` match any error with that code.
    ///
    /// ```swift
    /// do { try store.check() } catch StorageError.Code.corrupted { print("damaged") }
    /// ```
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? StorageError)?.code == code
    }
}
