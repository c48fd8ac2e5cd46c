import Foundation
internal import SetteeStorage
import Synchronization
internal import Logging

extension Database {
    /// Compares every ready index of `tx`'s snapshot with the entries its documents make,
    /// reports each difference, and returns the names of the indexes that differ (rebuilt by
    /// a repair).
    func checkIndexes(_ tx: some StoreReading, report: inout DatabaseCheckReport) throws -> [String] {
        var drifted: [String] = []
        for (name, reason) in core.parts.queries.indexSet.withLock({ $0.broken }).sorted(by: { $0.key < $1.key }) {
            report.problems.append(.init(documentID: nil, message: "index \(name) cannot be read (\(reason)); delete it and create it again",
                                         isRepairable: false))
        }
        // A map index's rows are what the application's function made: there is nothing to
        // compare them with here. Its group counts are compared with its rows.
        for index in try core.readyIndexes(tx) where index.isMap {
            let counted = try MapIndexStore.countedSummaries(tx, tree: index.tree)
            let stored = try MapIndexStore.storedSummaries(tx, tree: index.tree)
            let wrong = Set(counted.keys).union(stored.keys).filter { counted[$0] != stored[$0] }.count
            guard wrong > 0 else { continue }
            report.problems.append(.init(documentID: nil, message: "index \(index.name): \(wrong) group count\(wrong == 1 ? " differs" : "s differ") "
                                         + "from its rows; a repair counts them again", isRepairable: true))
            drifted.append(index.name)
        }
        for index in try core.readyIndexes(tx) where !index.isMap {
            var expected: [[UInt8]: [UInt8]] = [:]
            // A full-text index numbers its documents as they come: the records expected are
            // made with the numbers the index gives, and a document it has no number for is
            // missing.
            var numbers: [String: UInt64] = [:]
            var unnumbered = 0
            var texts: [(id: String, number: UInt64, entry: FullTextDocumentEntry)] = []
            let stats = index.analyzer == nil ? FullTextIndexStore.Stats() : try FullTextIndexStore.stats(tx, tree: index.tree)
            if index.analyzer != nil {
                try tx.forEach(in: index.tree, from: [FullTextIndexStore.Tag.document.rawValue], reverse: false) { k, v in
                    guard k.first == FullTextIndexStore.Tag.document.rawValue else { return false }
                    if let n = FullTextIndexStore.readNumber(v), n < stats.nextNumber {
                        numbers[String(decoding: k.dropFirst(), as: UTF8.self)] = n
                    }
                    return true
                }
            }
            try tx.forEach(in: core.trees.byID, from: nil, reverse: false) { k, v in
                guard let meta = try? DocMeta(decoding: v), !meta.flags.contains(.deleted) else { return true }
                // A document that cannot be read is reported with the document by the
                // document checks.
                let id = String(decoding: k, as: UTF8.self)
                guard let row = try? core.queryRow(tx, id: id, meta: meta, keys: index.documentKeys) else { return true }
                if index.analyzer != nil {
                    guard let t = try? index.textEntry(for: row) else { return true }
                    if let n = numbers[id] { texts.append((id, n, t)) } else { unnumbered += 1 }
                } else if let e = try? index.entry(for: row) {
                    expected[e.key] = e.value
                    expected[IndexEntry.backKey(id)] = e.key
                    if index.definition.byChannel {
                        // Routing that cannot be read is reported by the routing checks.
                        let channels = (try? RoutingRecord.load(tx, core.trees, key: Array(k), sequence: meta.sequence))??.record.applied.channels ?? []
                        expected.merge(IndexEntry.channelRecords(e, id: id, channels: channels)) { a, _ in a }
                    }
                }
                return true
            }
            if index.analyzer != nil { expected = FullTextIndexStore.records(of: texts, nextNumber: stats.nextNumber) }
            var stale = 0
            var different = 0
            try tx.forEach(in: index.tree, from: nil, reverse: false) { k, v in
                if let want = expected.removeValue(forKey: Array(k)) {
                    if !want.elementsEqual(v) { different += 1 }
                } else {
                    stale += 1
                }
                return true
            }
            let missing = expected.count + unnumbered
            guard missing + stale + different > 0 else { continue }
            var parts: [String] = []
            if index.analyzer != nil {
                if unnumbered > 0 { parts.append("\(unnumbered) document\(unnumbered == 1 ? " is" : "s are") missing from it") }
                if expected.count > 0 { parts.append("\(expected.count) record\(expected.count == 1 ? " is" : "s are") missing from it") }
            } else if missing > 0 {
                parts.append("\(missing) document\(missing == 1 ? " is" : "s are") missing from it")
            }
            if stale > 0 { parts.append("\(stale) entr\(stale == 1 ? "y matches" : "ies match") no document's current values") }
            if different > 0 { parts.append("\(different) entr\(different == 1 ? "y holds" : "ies hold") other values than the document's") }
            report.problems.append(.init(documentID: nil, message: "index \(index.name): " + parts.joined(separator: ", ")
                                         + "; a repair rebuilds it", isRepairable: true))
            drifted.append(index.name)
        }
        return drifted
    }
}
