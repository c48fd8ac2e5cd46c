/// ICU's root sort keys of ASCII text, made without ICU: the same bytes, so keys made either
/// way sit together in one index (`Formats/collation.md`, "ASCII keys").
///
/// In the root collation an ASCII character has at most one collation element: a primary
/// weight of one or two bytes, the common secondary weight, and a tertiary weight (common for
/// lowercase letters, digits and punctuation, another for capitals), or none at all (control
/// characters are ignorable). A sort key is then the primaries in order, `01`, the count of
/// secondaries as ICU compresses a run of common weights, `01`, the tertiaries with their
/// common runs compressed the same way, and `00`.
///
/// The weights are read from ICU itself (the key of each character alone), and the model is
/// checked against ICU's keys of probe strings (runs past the compression limits, capitals
/// between common weights, every character) before it is used: with an ICU whose keys the model
/// does not give, there are no ASCII keys and every string goes to ICU.
///
/// ```swift
/// var key: [UInt8] = []
/// if let keys = ASCIISortKeys.shared, keys.append("list-4".utf8, to: &key) { /* ICU's bytes */ }
/// ```
///
/// - Note: Immutable once made; safe to share between threads.
struct ASCIISortKeys: Sendable {
    /// Per ASCII byte: its primary's bytes (`count` 0 for an ignorable character), its
    /// tertiary byte, and whether the model holds for it (else text holding it goes to ICU).
    private var primary0 = [UInt8](repeating: 0, count: 128)
    private var primary1 = [UInt8](repeating: 0, count: 128)
    private var primaryCount = [UInt8](repeating: 0, count: 128)
    private var tertiary = [UInt8](repeating: 0, count: 128)
    private var usable = [Bool](repeating: false, count: 128)

    /// ICU's compression of runs of common weights (its `CollationKeys`): the common byte, the
    /// byte written for each full run, the top of the range counted down before a higher
    /// weight, and a full run's length, per level.
    private static let common: UInt8 = 0x05
    private static let secondaryMiddle: UInt8 = 0x25
    private static let secondaryMaxRun = 0x21
    private static let tertiaryMiddle: UInt8 = 0x65
    private static let tertiaryHigh: UInt8 = 0xC5
    private static let tertiaryMaxRun = 0x61

    /// Made once from ICU's root collator; nil when the model does not give ICU's keys.
    static let shared: ASCIISortKeys? = {
        let made = Swift.Result { () throws(SetteeError) -> ASCIISortKeys? in
            try JSONCollation.withRootCollator { (collator: RootCollator) throws(SetteeError) -> ASCIISortKeys? in
                try ASCIISortKeys(icuKey: { (s: String) throws(SetteeError) -> [UInt8] in try JSONCollation.icuSortKey(s, with: collator) })
            }
        }
        return (try? made.get()) ?? nil
    }()

    /// Reads each character's weights from `icuKey` and checks the model against it.
    init?(icuKey: (String) throws(SetteeError) -> [UInt8]) throws(SetteeError) {
        for b in 0 ..< 128 {
            let key = try icuKey(String(UnicodeScalar(UInt8(b))))
            let levels = key.split(separator: 1, omittingEmptySubsequences: false)
            guard levels.count == 3, key.last == 0 else { continue }
            let p = Array(levels[0]), s = Array(levels[1]), t = Array(levels[2].dropLast())
            if p.isEmpty && s.isEmpty && t.isEmpty {
                usable[b] = true   // ignorable: no weight at any level
                continue
            }
            guard (1 ... 2).contains(p.count), s == [Self.common], t.count == 1, t[0] >= Self.common,
                  t[0] < Self.tertiaryMiddle || t[0] > Self.tertiaryHigh || t[0] == Self.common else { continue }
            primary0[b] = p[0]
            primary1[b] = p.count == 2 ? p[1] : 0
            primaryCount[b] = UInt8(p.count)
            tertiary[b] = t[0]
            usable[b] = true
        }
        // The probes: every character alone and between others, runs of common weights past
        // each level's limit, capitals after and before such runs.
        var probes = ["", "ab", "aB", "Ab", "AB", "list-4", "Task", "TASK", "a-b c.d", String(repeating: "a", count: 150),
                      String(repeating: "A", count: 40), "A" + String(repeating: "a", count: 130) + "B",
                      String(repeating: "aB", count: 70), String(repeating: "x", count: 34) + "Y" + String(repeating: "z", count: 98)]
        for b in 0 ..< 128 where usable[b] {
            let c = String(UnicodeScalar(UInt8(b)))
            probes.append("a" + c + "B" + c + c + "z")
            probes.append(String(repeating: c, count: 35) + "Q")
        }
        for probe in probes {
            var made: [UInt8] = []
            guard append(probe.utf8, to: &made), made == (try icuKey(probe)) else { return nil }
        }
    }

    /// Appends ICU's sort key of `text` to `out` and returns true, or leaves `out` as it was and
    /// returns false when `text` is not all ASCII the model holds for.
    func append(_ text: String.UTF8View, to out: inout [UInt8]) -> Bool {
        let start = out.count
        var secondaries = 0
        var commonTertiaries = 0
        var tertiaries: [UInt8] = []
        for b in text {
            guard b < 0x80, usable[Int(b)] else {
                out.removeSubrange(start...)
                return false
            }
            let n = primaryCount[Int(b)]
            if n == 0 { continue }
            out.append(primary0[Int(b)])
            if n == 2 { out.append(primary1[Int(b)]) }
            secondaries += 1
            let t = tertiary[Int(b)]
            if t == Self.common {
                commonTertiaries += 1
                continue
            }
            if commonTertiaries > 0 {
                // A run of common weights before a higher one: counted down from the top.
                Self.appendRun(commonTertiaries, middle: Self.tertiaryMiddle, maxRun: Self.tertiaryMaxRun,
                               downFrom: Self.tertiaryHigh, to: &tertiaries)
                commonTertiaries = 0
            }
            tertiaries.append(t)
        }
        out.append(1)
        // The secondaries are all common: one run, ended by the level separator (lower).
        Self.appendRun(secondaries, middle: Self.secondaryMiddle, maxRun: Self.secondaryMaxRun, downFrom: nil, to: &out)
        out.append(1)
        out.append(contentsOf: tertiaries)
        Self.appendRun(commonTertiaries, middle: Self.tertiaryMiddle, maxRun: Self.tertiaryMaxRun, downFrom: nil, to: &out)
        out.append(0)
        return true
    }

    /// Appends ICU's compression of a run of `count` common weights (none for 0): `middle` for
    /// each full run of `maxRun`, then the rest counted up from the common byte (before a lower
    /// weight or the level's end) or down from `downFrom` (before a higher weight).
    private static func appendRun(_ count: Int, middle: UInt8, maxRun: Int, downFrom high: UInt8?, to out: inout [UInt8]) {
        guard count > 0 else { return }
        var c = count - 1
        while c >= maxRun {
            out.append(middle)
            c -= maxRun
        }
        out.append(high.map { $0 - UInt8(c) } ?? common + UInt8(c))
    }
}
