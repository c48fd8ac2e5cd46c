import Foundation

/// The names a user or a role may have, checked wherever one is made: the configuration, the
/// admin API's `_user` and `_role`, and `/_users` (an administrator's write or a sign-up).
///
/// A name is 1 to 200 bytes of UTF-8 in Unicode's composed form (NFC, so that one name has one
/// spelling), with at least one letter or digit, no space at either end and no other white
/// space than the plain space, and none of:
/// - `:` (Basic credentials end a name at the first colon, and `role:` names a role in a sync
///   function), `,`, `/`, `\` and `` ` `` (Sync Gateway refuses these too),
/// - `<`, `>`, `"`, `'` and `&` (a name is shown on pages and written to logs),
/// - control and format characters (zero-width joiners, direction overrides);
///
/// it does not start with `_` (CouchDB's names for the system: `_admin`), a user is not called
/// `guest` in any case but `GUEST` itself (anonymous access), and its letters come from one of
/// the scripts whose letters look alike (Latin, Greek, Cyrillic), so `аlice` with a Cyrillic
/// `а` is not a second `alice`. A name written wholly in another script that happens to look
/// like a Latin one (Cyrillic `асе`) is not detected: that is a known limit.
///
/// ```swift
/// if let problem = PrincipalName.problem(name, kind: .user) { throw CouchError.badRequest(problem) }
/// ```
enum PrincipalName {
    static let maxBytes = 200

    enum Kind: String { case user, role }

    /// Why `name` cannot name a user or a role, or nil when it can.
    static func problem(_ name: String, kind: Kind) -> String? {
        let what = "\(kind.rawValue) name"
        guard !name.isEmpty else { return "a \(what) cannot be empty" }
        guard name.utf8.count <= maxBytes else { return "a \(what) is at most \(maxBytes) bytes" }
        if kind == .user, name == User.guestName { return nil }
        guard name.unicodeScalars.elementsEqual(name.precomposedStringWithCanonicalMapping.unicodeScalars) else {
            return "a \(what) must be in Unicode's composed form (NFC)"
        }
        guard !name.hasPrefix("_") else { return "a \(what) cannot start with _ (reserved for the system)" }
        guard name.first != " ", name.last != " " else { return "a \(what) cannot start or end with a space" }
        if kind == .user, name.lowercased() == User.guestName.lowercased() {
            return "\(name) is GUEST's name (anonymous access)"
        }
        var scripts = Set<Script>()
        var sawLetterOrDigit = false
        for s in name.unicodeScalars {
            if let bad = forbidden(s) { return "a \(what) cannot hold \(bad)" }
            let p = s.properties
            if p.isAlphabetic || p.numericType != nil { sawLetterOrDigit = true }
            if p.isAlphabetic, let script = Script(s) { scripts.insert(script) }
        }
        guard sawLetterOrDigit else { return "a \(what) needs a letter or a digit" }
        guard scripts.count <= 1 else {
            return "a \(what) mixes \(scripts.map(\.rawValue).sorted().joined(separator: " and ")) letters, which look alike"
        }
        return nil
    }

    /// A character a name may not hold, described; nil when it may.
    private static func forbidden(_ s: Unicode.Scalar) -> String? {
        switch s {
        case ":", ",", "/", "\\", "`", "<", ">", "\"", "'", "&": return "\"\(s)\""
        case " ": return nil
        default: break
        }
        switch s.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator, .privateUse, .surrogate, .unassigned:
            return String(format: "U+%04X", s.value)
        default:
            return s.properties.isWhitespace || s.properties.isDefaultIgnorableCodePoint ? String(format: "U+%04X", s.value) : nil
        }
    }

    /// The scripts whose letters are confused with one another.
    private enum Script: String {
        case latin = "Latin", greek = "Greek", cyrillic = "Cyrillic"

        init?(_ s: Unicode.Scalar) {
            switch s.value {
            case 0x41 ... 0x5A, 0x61 ... 0x7A, 0xAA, 0xBA, 0xC0 ... 0x24F, 0x1D00 ... 0x1D7F, 0x1E00 ... 0x1EFF, 0x2C60 ... 0x2C7F,
                 0xA720 ... 0xA7FF, 0xAB30 ... 0xAB6F, 0xFF21 ... 0xFF3A, 0xFF41 ... 0xFF5A:
                self = .latin
            case 0x370 ... 0x3FF, 0x1F00 ... 0x1FFF:
                self = .greek
            case 0x400 ... 0x52F, 0x1C80 ... 0x1C8F, 0x2DE0 ... 0x2DFF, 0xA640 ... 0xA69F:
                self = .cyrillic
            default:
                return nil
            }
        }
    }
}
