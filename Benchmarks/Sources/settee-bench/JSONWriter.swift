/// Writes compact JSON into a byte array: just enough for the generated documents and the results file.
/// Commas are placed by the writer; callers only open, name and close.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    /// One entry per open container: whether the next member needs a comma before it.
    private var needsComma: [Bool] = []
    /// A member name was just written, so the next value follows its colon without a comma.
    private var afterName = false

    init(reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    var count: Int { bytes.count }

    mutating func beginObject() { open(UInt8(ascii: "{")) }
    mutating func endObject() { close(UInt8(ascii: "}")) }
    mutating func beginArray() { open(UInt8(ascii: "[")) }
    mutating func endArray() { close(UInt8(ascii: "]")) }

    mutating func name(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
        afterName = true
    }

    mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0 ..< 0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array("\\u00".utf8))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func integer(_ value: some BinaryInteger) {
        raw(String(value))
    }

    /// A decimal with exactly `digits` digits after the point, e.g. `fixed(-87.1234, digits: 4)`.
    mutating func fixed(_ value: Double, digits: Int) {
        var scale = 1
        for _ in 0 ..< digits { scale *= 10 }
        let scaled = Int((abs(value) * Double(scale)).rounded())
        let fraction = String(scaled % scale)
        let padded = String(repeating: "0", count: digits - fraction.count) + fraction
        raw((value < 0 && scaled != 0 ? "-" : "") + String(scaled / scale) + (digits > 0 ? "." + padded : ""))
    }

    /// A number as Swift prints it (shortest form that reads back the same value).
    mutating func number(_ value: Double) {
        raw(value.isFinite ? value.description : "null")
    }

    mutating func bool(_ value: Bool) {
        raw(value ? "true" : "false")
    }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma.append(false)
    }

    private mutating func close(_ bracket: UInt8) {
        needsComma.removeLast()
        bytes.append(bracket)
    }

    private mutating func raw(_ text: String) {
        separate()
        bytes.append(contentsOf: text.utf8)
    }

    private mutating func separate() {
        if afterName {
            afterName = false
            return
        }
        guard let last = needsComma.indices.last else { return }
        if needsComma[last] { bytes.append(UInt8(ascii: ",")) }
        needsComma[last] = true
    }
}
