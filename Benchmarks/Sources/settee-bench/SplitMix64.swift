/// SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator, so every run and every engine sees the
/// same data. `bounded(_:)` is written out here rather than taken from the standard library, whose
/// `random(in:using:)` does not promise the same sequence across Swift versions.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    /// A generator for one item of a stream, independent of the order items are generated in.
    init(seed: UInt64, stream: UInt64, item: UInt64) {
        state = SplitMix64.mix(seed ^ SplitMix64.mix(stream &* 0x9E37_79B9_7F4A_7C15 &+ item))
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return SplitMix64.mix(state)
    }

    /// A uniform integer in `0..<bound` (Lemire's multiply-and-reject).
    mutating func bounded(_ bound: Int) -> Int {
        precondition(bound > 0)
        let range = UInt64(bound)
        var product = next().multipliedFullWidth(by: range)
        if product.low < range {
            let threshold = (0 &- range) % range
            while product.low < threshold {
                product = next().multipliedFullWidth(by: range)
            }
        }
        return Int(product.high)
    }

    /// A uniform integer in `range`.
    mutating func between(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + bounded(range.count)
    }

    /// True with probability `numerator / denominator`.
    mutating func chance(_ numerator: Int, in denominator: Int) -> Bool {
        bounded(denominator) < numerator
    }

    mutating func pick<T>(_ items: [T]) -> T {
        items[bounded(items.count)]
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
