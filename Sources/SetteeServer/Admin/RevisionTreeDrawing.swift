import Settee

/// A document's revision tree drawn as SVG: one node per revision, a row per generation (the
/// oldest at the top), branches side by side with the winner's branch leftmost.
///
/// What a node is shows in its shape and classes (styled by `admin.css`, explained by
/// ``legend``): the winner has a ring (`winner`), the other undeleted leaves are the conflicts
/// (`conflict`), a tombstone is a square (`deleted`), a revision whose body is still kept is
/// filled (`kept`) and one whose body is gone is hollow. Each node links to `?rev=` so that
/// choosing it shows its body, without JavaScript.
///
/// A value type; safe to share between threads.
struct RevisionTreeDrawing {
    struct Node {
        let info: RevisionInfo
        var column = 0
        var row = 0
        var isWinner = false
    }

    private(set) var nodes: [Node] = []
    private(set) var columns = 0
    private(set) var rows = 0

    static let columnWidth = 170
    static let rowHeight = 46
    static let margin = 24

    init(tree: RevisionTree) {
        let byID = Dictionary(tree.revisions.map { ($0.revisionID, $0) }, uniquingKeysWith: { a, _ in a })
        var children: [String: [String]] = [:]
        var roots: [String] = []
        for r in tree.revisions {
            if let p = r.parentRevisionID, byID[p] != nil {
                children[p, default: []].append(r.revisionID)
            } else {
                roots.append(r.revisionID)
            }
        }
        // The winner's ancestors, so that its branch is drawn first (leftmost).
        var winnerPath: Set<String> = []
        var cursor: String? = tree.currentRevisionID
        while let c = cursor, let r = byID[c], winnerPath.insert(c).inserted { cursor = r.parentRevisionID }
        func order(_ ids: [String]) -> [String] {
            ids.sorted { a, b in
                let wa = winnerPath.contains(a), wb = winnerPath.contains(b)
                return wa != wb ? wa : a < b
            }
        }
        // A row per generation the tree holds, in order: generations are read from peers and may
        // be far apart (a branch at 2^53 beside one at 1), so rows are ranks, never differences.
        let rowOf = Dictionary(uniqueKeysWithValues: Set(tree.revisions.map(\.generation)).sorted().enumerated().map { ($1, $0) })
        var column: [String: Int] = [:]
        var next = 0
        // Iterative depth-first placement (a tree may be a thousand revisions deep): a leaf takes
        // the next column, a parent its first child's.
        for root in order(roots) {
            var stack: [(id: String, expanded: Bool)] = [(root, false)]
            while let (id, expanded) = stack.popLast() {
                let kids = order(children[id] ?? [])
                if kids.isEmpty {
                    column[id] = next
                    next += 1
                } else if !expanded {
                    stack.append((id, true))
                    for k in kids.reversed() { stack.append((k, false)) }
                } else {
                    column[id] = kids.first.flatMap { column[$0] } ?? next
                }
            }
        }
        columns = max(next, 1)
        nodes = tree.revisions.map { r in
            var n = Node(info: r)
            n.column = column[r.revisionID] ?? 0
            n.row = rowOf[r.generation] ?? 0
            n.isWinner = r.revisionID == tree.currentRevisionID
            return n
        }
        rows = (nodes.map(\.row).max() ?? 0) + 1
    }

    /// The classes of a node: `rev`, and `winner`, `conflict`, `leaf`, `deleted`, `kept`,
    /// `selected` as they apply.
    static func classes(_ n: Node, selected: String?) -> String {
        var c = ["rev"]
        if n.isWinner { c.append("winner") }
        if n.info.isLeaf { c.append("leaf") }
        if n.info.isLeaf && !n.isWinner && !n.info.isDeleted { c.append("conflict") }
        if n.info.isDeleted { c.append("deleted") }
        if n.info.hasBody { c.append("kept") }
        if n.info.revisionID == selected { c.append("selected") }
        return c.joined(separator: " ")
    }

    /// The label of a node: the generation and the first digits of the digest.
    static func label(_ revisionID: String) -> String {
        guard let dash = revisionID.firstIndex(of: "-") else { return revisionID }
        let digest = revisionID[revisionID.index(after: dash)...]
        return String(revisionID[..<dash]) + "-" + String(digest.prefix(8))
    }

    /// The SVG element; `link` gives the URL a node leads to.
    func svg(selected: String?, link: (String) -> String) -> String {
        let m = Self.margin, cw = Self.columnWidth, rh = Self.rowHeight
        let width = columns * cw + 2 * m, height = rows * rh + 2 * m
        func x(_ n: Node) -> Int { m + 12 + n.column * cw }
        func y(_ n: Node) -> Int { m + n.row * rh }
        var h = HTML()
        h.raw("<svg id=\"revtree\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" role=\"img\" aria-label=\"revision tree\">")
        let position = Dictionary(nodes.map { ($0.info.revisionID, $0) }, uniquingKeysWith: { a, _ in a })
        for n in nodes {
            guard let p = n.info.parentRevisionID.flatMap({ position[$0] }) else { continue }
            let x1 = x(p), y1 = y(p), x2 = x(n), y2 = y(n)
            let path = x1 == x2 ? "M\(x1) \(y1) L\(x2) \(y2)"
                : "M\(x1) \(y1) C\(x1) \(y1 + rh / 2) \(x2) \(y2 - rh / 2) \(x2) \(y2)"
            h.raw("<path class=\"edge\" d=\"\(path)\"/>")
        }
        for n in nodes {
            let cx = x(n), cy = y(n)
            h.raw("<a href=\"\(HTML.escape(link(n.info.revisionID)))\"><g class=\"\(Self.classes(n, selected: selected))\" data-rev=\"\(HTML.escape(n.info.revisionID))\">")
            h.raw("<title>")
            h.text(n.info.revisionID + Self.describe(n))
            h.raw("</title>")
            if n.isWinner { h.raw("<circle class=\"ring\" cx=\"\(cx)\" cy=\"\(cy)\" r=\"14\"/>") }
            if n.info.isDeleted {
                h.raw("<rect class=\"mark\" x=\"\(cx - 9)\" y=\"\(cy - 9)\" width=\"18\" height=\"18\"/>")
                h.raw("<path class=\"cross\" d=\"M\(cx - 5) \(cy - 5) L\(cx + 5) \(cy + 5) M\(cx + 5) \(cy - 5) L\(cx - 5) \(cy + 5)\"/>")
            } else {
                h.raw("<circle class=\"mark\" cx=\"\(cx)\" cy=\"\(cy)\" r=\"9\"/>")
            }
            h.raw("<text x=\"\(cx + 20)\" y=\"\(cy + 4)\">")
            h.text(Self.label(n.info.revisionID))
            h.raw("</text></g></a>")
        }
        h.raw("</svg>")
        return h.output
    }

    /// What a node is, in words (its tooltip and the page's description of a revision).
    static func describe(_ n: Node) -> String {
        var parts: [String] = []
        if n.isWinner { parts.append("winner") } else if n.info.isLeaf && !n.info.isDeleted { parts.append("conflicting leaf") }
        if n.info.isDeleted { parts.append("tombstone") }
        parts.append(n.info.hasBody ? "body kept" : "body not kept")
        return " (" + parts.joined(separator: ", ") + ")"
    }

    /// The legend: each kind of node as the drawing shows it.
    static var legend: String {
        let items: [(String, String)] = [
            ("rev winner leaf kept", "winner (current revision)"),
            ("rev conflict leaf kept", "conflicting leaf"),
            ("rev deleted leaf kept", "tombstone"),
            ("rev kept", "body kept"),
            ("rev", "body not kept (compacted)"),
        ]
        var h = HTML()
        h.raw("<ul id=\"legend\">")
        for (cls, text) in items {
            h.raw("<li><svg width=\"34\" height=\"34\" viewBox=\"0 0 34 34\" aria-hidden=\"true\"><g class=\"\(cls)\">")
            if cls.contains("winner") { h.raw("<circle class=\"ring\" cx=\"17\" cy=\"17\" r=\"14\"/>") }
            if cls.contains("deleted") {
                h.raw("<rect class=\"mark\" x=\"8\" y=\"8\" width=\"18\" height=\"18\"/><path class=\"cross\" d=\"M12 12 L22 22 M22 12 L12 22\"/>")
            } else {
                h.raw("<circle class=\"mark\" cx=\"17\" cy=\"17\" r=\"9\"/>")
            }
            h.raw("</g></svg>")
            h.text(text)
            h.raw("</li>")
        }
        h.raw("</ul>")
        return h.output
    }
}
