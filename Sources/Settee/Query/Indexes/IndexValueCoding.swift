internal import SetteeStorage

/// The binary form of a value index entry's values (Formats/indexes.md, "Value index entries"):
/// each value one tagged element, one after the other, so a scan steps over the values it does
/// not read by their tags and lengths (no text to follow) and decodes only those it reads, and
/// a number or string is decoded without parsing text.
///
/// ```
/// 00 MISSING · 01 null · 02 false · 03 true · 04 integer: zig-zag varint · 05 number: f64 LE
/// 06 string: varint length ‖ UTF-8 · 07 array or object: varint length ‖ JSON text
/// ```
///
/// The same value always has the same bytes (arrays and objects aside, whose JSON text a
/// dictionary's order may change), so an entry's value can be compared with an equality value
/// by its bytes (``starts(_:with:)``).
enum IndexValueCoding {
    enum Tag: UInt8 {
        case missing = 0, null, `false`, `true`, integer, number, string, json
    }

    /// Appends the element of one value (nil: MISSING).
    static func append(_ value: JSONValue?, to out: inout [UInt8]) throws(SetteeError) {
        guard let value else { out.append(Tag.missing.rawValue); return }
        switch value {
        case .null: out.append(Tag.null.rawValue)
        case .bool(let b): out.append(b ? Tag.true.rawValue : Tag.false.rawValue)
        case .int(let n):
            out.append(Tag.integer.rawValue)
            // Zig-zag: small magnitudes of either sign take few bytes.
            Varint.append(UInt64(bitPattern: (n &<< 1) ^ (n >> 63)), to: &out)
        case .double(let d):
            out.append(Tag.number.rawValue)
            withUnsafeBytes(of: d.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        case .string(var s):
            out.append(Tag.string.rawValue)
            s.withUTF8 { utf8 in
                Varint.append(UInt64(utf8.count), to: &out)
                out.append(contentsOf: utf8)
            }
        case .array, .object:
            var text: [UInt8] = []
            try JSONWriter.write(value, into: &text)
            out.append(Tag.json.rawValue)
            Varint.append(UInt64(text.count), to: &out)
            out.append(contentsOf: text)
        }
    }

    /// The element of one value alone: what an entry holds for it.
    static func encoded(_ value: JSONValue?) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        try append(value, to: &out)
        return out
    }

    /// The values as an entry holds them.
    static func encoded(_ values: [JSONValue?]) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 10)
        for v in values { try append(v, to: &out) }
        return out
    }

    private static var malformed: SetteeError { SetteeError(.corrupted, "an index entry's values are malformed") }

    /// The length of the element at `position` (its tag included); throws when it runs past the end.
    private static func elementLength(_ bytes: UnsafeRawBufferPointer, at position: Int) throws(SetteeError) -> Int {
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[position...]))
        guard let t = r.u8().flatMap(Tag.init(rawValue:)) else { throw malformed }
        switch t {
        case .missing, .null, .false, .true: break
        case .integer: guard r.varint() != nil else { throw malformed }
        case .number: guard r.bytes(8) != nil else { throw malformed }
        case .string, .json: guard let n = r.count(limit: r.remaining), r.bytes(n) != nil else { throw malformed }
        }
        return r.position
    }

    /// One element's value (nil: MISSING).
    static func decode(_ element: UnsafeRawBufferPointer) throws(SetteeError) -> JSONValue? {
        var r = ByteReader(element)
        guard let t = r.u8().flatMap(Tag.init(rawValue:)) else { throw malformed }
        let value: JSONValue?
        switch t {
        case .missing: value = nil
        case .null: value = .null
        case .false: value = .bool(false)
        case .true: value = .bool(true)
        case .integer:
            guard let z = r.varint() else { throw malformed }
            value = .int(Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1))
        case .number:
            guard let bits = r.u64() else { throw malformed }
            let d = Double(bitPattern: bits)
            // A document's numbers are finite; other bits are damage, not a value.
            guard d.isFinite else { throw malformed }
            value = .double(d)
        case .string:
            guard let n = r.count(limit: r.remaining), let b = r.bytes(n), let s = makeString(b) else { throw malformed }
            value = .string(s)
        case .json:
            guard let n = r.count(limit: r.remaining), let b = r.bytes(n) else { throw malformed }
            do {
                value = try JSONParser.parse(b)
            } catch {
                throw SetteeError(.corrupted, "an index entry's values are malformed: \(error.message)")
            }
        }
        guard r.atEnd else { throw malformed }
        return value
    }

    /// The `count` values of an entry, each element's bytes reported to `element`, which
    /// returns whether to decode it (the others are nil); from position `upTo` on nothing is
    /// read (nil). The bytes must hold exactly `count` elements when read to the end.
    static func values(_ bytes: UnsafeRawBufferPointer, count: Int, upTo: Int? = nil,
                       _ element: (Int, UnsafeRawBufferPointer) -> Bool) throws(SetteeError) -> [JSONValue?] {
        let last = min(upTo ?? count, count)
        var out: [JSONValue?] = []
        out.reserveCapacity(count)
        var position = 0
        for i in 0 ..< last {
            guard position < bytes.count else { throw malformed }
            let n = try elementLength(bytes, at: position)
            let e = UnsafeRawBufferPointer(rebasing: bytes[position ..< position + n])
            out.append(element(i, e) ? try decode(e) : nil)
            position += n
        }
        if last == count, position != bytes.count { throw malformed }
        while out.count < count { out.append(nil) }
        return out
    }

    /// Every value of an entry.
    static func values(_ bytes: UnsafeRawBufferPointer, count: Int) throws(SetteeError) -> [JSONValue?] {
        try values(bytes, count: count) { _, _ in true }
    }

    /// Whether an entry's first values have these elements, byte for byte (the same bytes are
    /// the same value); reads no further than the last one and allocates nothing.
    static func starts(_ bytes: UnsafeRawBufferPointer, with elements: [[UInt8]]) throws(SetteeError) -> Bool {
        var position = 0
        for e in elements {
            guard position < bytes.count else { return false }
            let n = try elementLength(bytes, at: position)
            guard Bytes.equal(UnsafeRawBufferPointer(rebasing: bytes[position ..< position + n]), e) else { return false }
            position += n
        }
        return true
    }
}
