extension String {
    /// The text with every control character (line breaks, escape sequences, U+0000…U+001F,
    /// U+007F…U+009F, U+2028 and U+2029) written as `\u{…}` and every backslash doubled, so
    /// that a value from a document or a request (an ID `doc\n…`) cannot end a log line, forge
    /// another one or drive a terminal.
    ///
    /// ```swift
    /// logger.warning("map index \(name): document \(id.escapedForLog): \(error)")
    /// ```
    @_spi(Server) public var escapedForLog: String {
        guard unicodeScalars.contains(where: { $0 == "\\" || Self.needsEscape($0) }) else { return self }
        var out = ""
        out.reserveCapacity(utf8.count + 8)
        for s in unicodeScalars {
            if s == "\\" {
                out += "\\\\"
            } else if Self.needsEscape(s) {
                out += "\\u{" + String(s.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(s)
            }
        }
        return out
    }

    private static func needsEscape(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (0x7F ... 0x9F).contains(s.value) || s.value == 0x2028 || s.value == 0x2029
    }
}
