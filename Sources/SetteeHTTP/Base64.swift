import Foundation

/// Base64 as RFC 4648 writes it, read strictly: the standard alphabet, a length that is a
/// multiple of 4, padding only as the last one or two characters, and no bits past the last byte.
/// Foundation's decoder takes more than that (extra `=`, for one), so two different texts would
/// name the same bytes and a malformed one would be stored as if it were data.
package enum Base64 {
    /// The bytes `text` encodes, or nil when it is not strict base64.
    package static func decode(_ text: String) -> Data? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return nil }
        var out = Data()
        out.reserveCapacity(bytes.count / 4 * 3)
        var i = 0
        while i < bytes.count {
            let last = i + 4 == bytes.count
            var values: [UInt8] = [0, 0, 0, 0]
            var padding = 0
            for k in 0 ..< 4 {
                let c = bytes[i + k]
                if c == UInt8(ascii: "=") {
                    // Only in the last group, only its last one or two characters.
                    guard last, k >= 2 else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0, let v = value(c) else { return nil }
                values[k] = v
            }
            let n = (UInt32(values[0]) << 18) | (UInt32(values[1]) << 12) | (UInt32(values[2]) << 6) | UInt32(values[3])
            out.append(UInt8(n >> 16))
            switch padding {
            case 0:
                out.append(UInt8((n >> 8) & 0xFF))
                out.append(UInt8(n & 0xFF))
            case 1:
                guard n & 0xFF == 0 else { return nil }   // bits past the last byte
                out.append(UInt8((n >> 8) & 0xFF))
            default:
                guard n & 0xFFFF == 0 else { return nil }
            }
            i += 4
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A") ... UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a") ... UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
