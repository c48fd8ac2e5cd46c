import Foundation

/// Base64 as RFC 4648 writes it, read strictly: the standard alphabet, a length that is a
/// multiple of 4, padding only as the last one or two characters, and no bits past the last byte.
/// Foundation's decoder takes more than that (extra `=`, for one), so two different texts would
/// name the same bytes and a malformed one would be stored as if it were data.
package enum Base64 {
    /// The bytes `text` encodes, or nil when it is not strict base64.
    package static func decode(_ text: String) -> Data? {
        var text = text
        return text.withUTF8 { decodeBytes($0) }.map { Data($0) }
    }

    /// The bytes `encoded` (base64 text's UTF-8) encodes, or nil when it is not strict base64.
    /// One allocation, for the result: a Basic credential is decoded on every request.
    package static func decodeBytes(_ encoded: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = encoded.count
        guard count % 4 == 0 else { return nil }
        guard count > 0 else { return [] }
        let padding = encoded[count - 1] == UInt8(ascii: "=") ? (encoded[count - 2] == UInt8(ascii: "=") ? 2 : 1) : 0
        let length = count / 4 * 3 - padding
        var failed = false
        let out = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            var o = 0
            var i = 0
            while i < count {
                let last = i + 4 == count
                // Padding only in the last group, only as its last one or two characters.
                let real = last ? 4 - padding : 4
                var n: UInt32 = 0
                for k in 0 ..< 4 {
                    let v: UInt8
                    if k < real {
                        v = table[Int(encoded[i + k])]
                        guard v < 64 else { failed = true; initialized = o; return }
                    } else {
                        v = 0
                    }
                    n = n << 6 | UInt32(v)
                }
                buffer[o] = UInt8(truncatingIfNeeded: n >> 16)
                o += 1
                if real >= 3 { buffer[o] = UInt8(truncatingIfNeeded: n >> 8); o += 1 }
                if real == 4 { buffer[o] = UInt8(truncatingIfNeeded: n); o += 1 }
                // No bits past the last byte.
                if real == 3, n & 0xFF != 0 { failed = true; initialized = o; return }
                if real == 2, n & 0xFFFF != 0 { failed = true; initialized = o; return }
                i += 4
            }
            initialized = o
        }
        return failed ? nil : out
    }

    /// Each byte's value in the alphabet, 64 and above for a byte outside it (`=` included:
    /// where padding may stand is decided by position).
    private static let table: [UInt8] = (0 ... 255).map { c -> UInt8 in
        switch UInt8(c) {
        case UInt8(ascii: "A") ... UInt8(ascii: "Z"): UInt8(c) - UInt8(ascii: "A")
        case UInt8(ascii: "a") ... UInt8(ascii: "z"): UInt8(c) - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): UInt8(c) - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: 255
        }
    }
}
