import Foundation

/// HTML text built for the admin pages. Everything from a database (IDs, bodies, channel and
/// user names) goes in through ``text(_:)`` or ``escape(_:)``, never ``raw(_:)``: an ID or a body
/// holding `<script>` shows as text.
///
/// A value type; not shared between threads.
struct HTML {
    private(set) var output = ""

    /// Markup written by this module.
    mutating func raw(_ s: String) { output += s }

    /// Text, escaped.
    mutating func text(_ s: String) { output += Self.escape(s) }

    /// `<tag class="…">text</tag>`, the text escaped.
    mutating func element(_ tag: String, _ content: String, class cls: String? = nil) {
        output += "<\(tag)\(cls.map { " class=\"\($0)\"" } ?? "")>" + Self.escape(content) + "</\(tag)>"
    }

    /// A link to `href` (already a path built with ``path(_:)``), its text escaped.
    mutating func link(_ href: String, _ content: String, class cls: String? = nil) {
        output += "<a href=\"\(Self.escape(href))\"\(cls.map { " class=\"\($0)\"" } ?? "")>" + Self.escape(content) + "</a>"
    }

    /// Escapes the five characters that matter in text and in quoted attribute values.
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            // Control characters other than tab and newlines would make the page invalid.
            case "\u{0}" ... "\u{8}", "\u{B}", "\u{C}", "\u{E}" ... "\u{1F}", "\u{7F}":
                out += "\u{FFFD}"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// An absolute path from segments, each percent-encoded (an ID may hold `/`, `?` or `#`).
    static func path(_ segments: String...) -> String {
        "/" + segments.map(segment).joined(separator: "/")
    }

    /// One path segment, percent-encoded: only unreserved characters stay as they are.
    static func segment(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// A query string from pairs, each value percent-encoded (pairs with a nil value left out).
    static func query(_ pairs: [(String, String?)]) -> String {
        let parts = pairs.compactMap { k, v in v.map { "\(k)=\(segment($0))" } }
        return parts.isEmpty ? "" : "?" + parts.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn:
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A byte count as people read it: `512 B`, `1.5 KiB`, `3.2 MiB`.
    static func bytes(_ n: UInt64) -> String {
        if n < 1024 { return "\(n) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var v = Double(n) / 1024
        var i = 0
        while v >= 1024 && i < units.count - 1 {
            v /= 1024
            i += 1
        }
        return String(format: "%.1f", v) + " " + units[i]
    }
}
