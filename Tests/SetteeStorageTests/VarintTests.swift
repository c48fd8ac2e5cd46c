import Testing
@testable import SetteeStorage

/// The one varint codec (LEB128) every format uses: round trips at every length boundary, and
/// damaged input (cut short, longer than 10 bytes, a tenth byte past bit 63) is refused, never
/// truncated to a wrong value.
@Suite struct VarintTests {
    private func encode(_ v: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        Varint.append(v, to: &out)
        var raw = [UInt8](repeating: 0xEE, count: Varint.maxLength)
        let n = raw.withUnsafeMutableBytes { Varint.encode(v, into: $0.baseAddress!) }
        #expect(Array(raw.prefix(n)) == out)
        return out
    }

    private func decode(_ bytes: [UInt8]) -> (value: UInt64, length: Int)? {
        bytes.withUnsafeBytes { b in b.isEmpty ? nil : Varint.decode(b.baseAddress!, count: b.count) }
    }

    @Test func roundTripsAtEveryLengthBoundary() {
        var values: [UInt64] = [0, 1, 127, 128, 255, 300, UInt64.max, UInt64.max - 1, 1 << 63]
        for bits in stride(from: 7, through: 63, by: 7) { values += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits)] }
        for v in values {
            let bytes = encode(v)
            let expectedLength = v == 0 ? 1 : (64 - v.leadingZeroBitCount + 6) / 7
            #expect(bytes.count == expectedLength)
            let d = decode(bytes)
            #expect(d?.value == v && d?.length == bytes.count)
            // Trailing bytes are not read.
            #expect(decode(bytes + [0xFF, 0x01])?.value == v)
        }
    }

    @Test func refusesDamagedInput() {
        #expect(decode([0x80]) == nil)                                         // cut short
        #expect(decode([0xFF, 0xFF]) == nil)
        let max = encode(UInt64.max)
        #expect(max.count == 10 && max.last == 1)
        #expect(decode(Array(max.dropLast()) + [0x02]) == nil)                 // bit 64 and above
        #expect(decode(Array(max.dropLast()) + [0x7F]) == nil)
        #expect(decode(Array(max.dropLast()) + [0x81, 0x00]) == nil)           // an eleventh byte
        #expect(decode([UInt8](repeating: 0x80, count: 10) + [0x00]) == nil)
        // Overlong but in range: the value it spells.
        #expect(decode([0x80, 0x00])?.value == 0)
    }
}
