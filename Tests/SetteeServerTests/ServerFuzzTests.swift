import Foundation
import Testing
import SetteeServerFuzzKit

/// The server's fuzz target (`settee-server-fuzz`): its seed requests are all answered (none
/// with a 5xx), and every input it once found a problem with replays without one.
@Suite struct ServerFuzzTests {
    @Test func seedsAndRegressionsReplay() async throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let regressions = here.appendingPathComponent("../ServerFuzz/Regressions").standardized.path
        let inputs = try FileManager.default.contentsOfDirectory(atPath: regressions).filter { $0 != "README.md" }.map { regressions + "/" + $0 }
        // The target blocks its thread on each answer: on a thread of its own, not the
        // concurrency pool's, which answers it.
        let statuses: [Int] = try await withCheckedThrowingContinuation { c in
            Thread.detachNewThread {
                c.resume(with: Swift.Result {
                    let server = ServerFuzzing.makeServer()
                    defer { try? server.close() }
                    let statuses = ServerFuzzing.seedRequests.map { ServerFuzzing.answer($0, server) }
                    for input in inputs {
                        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: input)))
                        bytes.withUnsafeBytes { ServerFuzzing.oneInput($0) }
                    }
                    return statuses
                })
            }
        }
        for (r, status) in zip(ServerFuzzing.seedRequests, statuses) {
            #expect(status >= 200 && status < 500, "\(r.method) \(r.target): \(status)")
        }
        // Each seed decodes back to itself.
        for r in ServerFuzzing.seedRequests {
            let back = ServerFuzzing.encode(r).withUnsafeBytes { ServerFuzzing.decode($0) }
            #expect(back?.target == r.target && back?.body == r.body && back?.admin == r.admin, "\(r.target)")
        }
    }
}
