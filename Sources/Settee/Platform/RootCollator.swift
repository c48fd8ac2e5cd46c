import CCollation

/// ICU's root collator (the Unicode Collation Algorithm's default order), from the ICU each
/// platform carries: libicucore on Apple's systems, Foundation's `_FoundationICU` elsewhere
/// (Package.swift links the one that applies). The document layer's collation
/// (Formats/collation.md) is built on it; the engine itself never compares text.
///
/// ```swift
/// var status: Int32 = 0
/// if let collator = RootCollator(status: &status) {
///     var a = "a", b = "B"
///     let order = a.withUTF8 { x in b.withUTF8 { y in collator.compare(x, y, status: &status) } }   // -1
/// } else {
///     print("ICU cannot open its root collator: status \(status)")
/// }
/// ```
///
/// Not thread-safe: ICU asks for one collator per thread; pool them.
final class RootCollator {
    private let handle: UnsafeMutableRawPointer

    /// Opens the root collator; nil, with ICU's error code in `status`, when ICU cannot.
    init?(status: inout Int32) {
        status = 0
        guard let h = settee_collator_open_root(&status), status <= 0 else { return nil }
        handle = h
    }

    deinit { settee_collator_close(handle) }

    /// The collator's version (four numbers): sort keys made under one may order differently
    /// under another.
    var version: (UInt8, UInt8, UInt8, UInt8) {
        var info: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &info) { b in
            guard let base = b.baseAddress else { return }   // never nil: four bytes
            settee_collator_version(handle, base.assumingMemoryBound(to: UInt8.self))
        }
        return info
    }

    /// The order of two UTF-8 strings: -1, 0 or 1; `status` above 0 when ICU failed. Strings
    /// longer than `Int32.max` bytes are refused with status 1 (ICU's U_ILLEGAL_ARGUMENT_ERROR).
    func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>, status: inout Int32) -> Int {
        status = 0
        guard let ac = Int32(exactly: a.count), let bc = Int32(exactly: b.count) else {
            status = 1
            return 0
        }
        let r = a.withMemoryRebound(to: CChar.self) { x in
            b.withMemoryRebound(to: CChar.self) { y in
                settee_collator_compare_utf8(handle, x.baseAddress, ac, y.baseAddress, bc, &status)
            }
        }
        return r < 0 ? -1 : (r > 0 ? 1 : 0)
    }

    /// Writes the sort key of the UTF-16 text `source` (its bytes order as the collator orders
    /// texts; no zero byte but the last) into `result`, and returns its whole length: when that
    /// is more than `result.count`, only part of it was written; 0 when ICU failed.
    func sortKey(_ source: UnsafeBufferPointer<UInt16>, into result: UnsafeMutableBufferPointer<UInt8>) -> Int {
        guard let n = Int32(exactly: source.count), let capacity = Int32(exactly: result.count) else { return 0 }
        return Int(settee_collator_sort_key(handle, source.baseAddress, n, result.baseAddress, capacity))
    }
}
