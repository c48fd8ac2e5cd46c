import Foundation

/// The results as a table for people and as JSON for tools.
struct Report {
    let machine: String
    let documentCount: Int
    let seed: UInt64
    let measurements: [Measurement]

    // MARK: - Table

    /// Workload × engine: value, unit, the row's value divided by settee's and by settee-doc's (the second
    /// column only when settee-doc ran), and the durability note.
    func table() -> String {
        let references = [EngineName.settee] + (measurements.contains { $0.engine == .setteeDoc } ? [.setteeDoc] : [])
        let header = ["workload", "engine", "value", "unit"] + references.map { "÷ \($0.rawValue)" }
            + ["durability / method"]
        var rows: [[String]] = []
        for measurement in sorted() {
            let ratios = references.map { reference -> String in
                guard measurement.engine != reference,
                      let base = measurements.first(where: {
                          $0.workload == measurement.workload && $0.figure == measurement.figure && $0.engine == reference
                      }),
                      base.value > 0
                else { return "-" }
                return String(format: "%.2f", measurement.value / base.value)
            }
            rows.append([measurement.label, measurement.engine.rawValue,
                         Self.format(measurement.value, unit: measurement.unit), measurement.unit]
                        + ratios + [measurement.note])
        }
        let numeric = Set([2] + references.indices.map { 4 + $0 })
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            cells.indices.map { column in
                let padding = String(repeating: " ", count: widths[column] - cells[column].count)
                if column == cells.count - 1 { return cells[column] }
                return numeric.contains(column) ? padding + cells[column] : cells[column] + padding
            }.joined(separator: "  ")
        }
        var lines = ["settee-bench: \(Self.grouped(documentCount)) documents, seed \(seed); \(machine)", ""]
        lines.append(line(header))
        lines.append(line(widths.map { String(repeating: "-", count: $0) }))
        var previous: Workload?
        for (measurement, row) in zip(sorted(), rows) {
            if let previous, previous != measurement.workload { lines.append("") }
            previous = measurement.workload
            lines.append(line(row))
        }
        lines.append("")
        lines.append("÷ \(references.map(\.rawValue).joined(separator: ", ÷ ")): the row's value divided by that engine's. "
            + "docs/s, commits/s, queries/s and MB/s: higher is better;")
        lines.append("ns/op, bytes, ms and s: lower is better." + (measurements.contains { $0.unit == Figure.ratioUnit }
            ? " \(Figure.ratioUnit): see each figure's target (Benchmarks/README.md)." : ""))
        return lines.joined(separator: "\n") + "\n"
    }

    /// Grouped digits: one decimal for ns/op, commits/s and MB/s, three for seconds and ratios, none for the
    /// rest (docs/s, bytes).
    static func format(_ value: Double, unit: String) -> String {
        switch unit {
        case "queries/s" where value < 100:
            return String(format: "%.2f", value)
        case "ns/op", "commits/s", "MB/s", "ms", "queries/s":
            let tenths = Int((value * 10).rounded())
            return grouped(tenths / 10) + "." + String(tenths % 10)
        case "s", Figure.ratioUnit:
            let thousandths = Int((value * 1000).rounded())
            let fraction = String(thousandths % 1000)
            return grouped(thousandths / 1000) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
        default:
            return grouped(Int(value.rounded()))
        }
    }

    private static func grouped(_ value: Int) -> String {
        let digits = Array(String(value))
        var text = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0, (digits.count - offset) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return text
    }

    /// By workload, then figure (in `Figure` order, so the engines' values of one figure are together), then
    /// in the order measured.
    private func sorted() -> [Measurement] {
        func figureRank(_ measurement: Measurement) -> Int {
            measurement.figure.map { Figure.allCases.firstIndex(of: $0)! + 1 } ?? 0
        }
        return measurements.enumerated().sorted { lhs, rhs in
            if lhs.element.workload != rhs.element.workload { return lhs.element.workload < rhs.element.workload }
            let (left, right) = (figureRank(lhs.element), figureRank(rhs.element))
            return left != right ? left < right : lhs.offset < rhs.offset
        }.map(\.element)
    }

    // MARK: - JSON

    /// `{"machine": …, "docs": …, "seed": …, "results": [{"workload", "engine", "value", "unit"}, …]}`; rows of
    /// a group (`compaction`) also have `"figure"`.
    func json() -> [UInt8] {
        var json = JSONWriter()
        json.beginObject()
        json.name("machine"); json.string(machine)
        json.name("docs"); json.integer(documentCount)
        json.name("seed"); json.integer(seed)
        json.name("results")
        json.beginArray()
        for measurement in sorted() {
            json.beginObject()
            json.name("workload"); json.string(measurement.workload.rawValue)
            if let figure = measurement.figure { json.name("figure"); json.string(figure.rawValue) }
            json.name("engine"); json.string(measurement.engine.rawValue)
            let scale = ["s", Figure.ratioUnit, "queries/s"].contains(measurement.unit) ? 1000.0 : 10.0
            json.name("value"); json.number((measurement.value * scale).rounded() / scale)
            json.name("unit"); json.string(measurement.unit)
            json.endObject()
        }
        json.endArray()
        json.endObject()
        return json.bytes + [UInt8(ascii: "\n")]
    }

    // MARK: - Machine

    /// `uname -srm`, the CPU model and the number of cores.
    static func describeMachine() -> String {
        var names = utsname()
        uname(&names)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        let system = "\(field(names.sysname)) \(field(names.release)) \(field(names.machine))"
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n")
            .first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        return "\(system), \(model), \(ProcessInfo.processInfo.activeProcessorCount) cores"
    }
}
