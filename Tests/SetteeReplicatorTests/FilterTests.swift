import Foundation
@_spi(Replication) import Settee
import Testing
@_spi(Replication) @testable import SetteeReplicator

@Suite struct FilterTests {
    @Test func filteredPushAndADeletionThatKeepsItsRoutingProperty() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 10 { try save(a, "item-\(i)", ["shared": .bool(i % 2 == 0), "n": .int(Int64(i))]) }
        let config: (inout ReplicatorConfiguration) -> Void = { $0.pushFilter = { doc, _ in doc["shared"] == true } }
        #expect(await replicate(a, b, .push, configure: config).error == nil)
        #expect(try b.count == 5)
        #expect(try (0 ..< 10).allSatisfy { i in try (b.document(withID: "item-\(i)") != nil) == (i % 2 == 0) })

        // A tombstone keeping `shared` passes the filter; a plain one does not (seed 003).
        let keep = try #require(try await a.document(withID: "item-0")).toMutable()
        keep.setData(["shared": true])
        keep.isDeletion = true
        try await a.saveDocument(keep)
        try await a.deleteDocument(try #require(try a.document(withID: "item-2")))
        let recorder = Recorder()
        #expect(await replicate(a, b, .push, recorder: recorder, configure: config).error == nil)
        #expect(try await b.document(withID: "item-0") == nil)
        #expect(try await b.document(withID: "item-2") != nil)
        #expect(await recorder.waitFor { $0.contains { $0.1.id == "item-0" && $0.1.flags.contains(.deleted) } })
    }

    @Test func filteredPullWithParameters() async throws {
        let dir = try TestDirectory()
        let server = try dir.open("server"), device = try dir.open("device")
        for i in 0 ..< 12 { try save(server, "job-\(i)", ["worker_id": .string("w-\(i % 3)"), "n": .int(Int64(i))]) }
        let endpoint = DatabaseEndpoint(database: server, filters: [
            "by_worker": { doc, params in doc["worker_id"] != nil && doc["worker_id"] == params["worker_id"] },
        ])
        let config: (inout ReplicatorConfiguration) -> Void = {
            $0.filterName = "by_worker"
            $0.filterParameters = ["worker_id": "w-1"]
        }
        #expect(await replicate(device, endpoint, .pull, configure: config).error == nil)
        #expect(try device.count == 4)
        #expect(try await device.document(withID: "job-1") != nil)
        #expect(try await device.document(withID: "job-2") == nil)

        // Filtered delete (seed 003): the tombstone that keeps worker_id reaches the device; a
        // plain DELETE-style tombstone does not pass the filter.
        let kept = try #require(try await server.document(withID: "job-1")).toMutable()
        kept.setData(["worker_id": "w-1", "deleted_by": "ops"])
        kept.isDeletion = true
        try await server.saveDocument(kept)
        try await server.deleteDocument(try #require(try server.document(withID: "job-4")))
        #expect(await replicate(device, endpoint, .pull, configure: config).error == nil)
        #expect(try await device.document(withID: "job-1") == nil)
        #expect(try await device.document(withID: "job-4") != nil)

        // An unknown filter is an error of the run.
        let bad = await replicate(device, endpoint, .pull) { $0.filterName = "nope" }
        #expect(bad.error?.code == .invalidRequest)
    }

    @Test func pullFilterDocumentIDsAndChannels() async throws {
        let dir = try TestDirectory()
        let server = try dir.open("server")
        for i in 0 ..< 9 {
            try save(server, "d-\(i)", ["type": .string(i < 3 ? "task" : "note"), "channels": .array([.string("ch-\(i % 3)")])])
        }
        let byClosure = try dir.open("closure")
        #expect(await replicate(byClosure, server, .pull) { $0.pullFilter = { doc, _ in doc["type"] == "task" } }.error == nil)
        #expect(try Set(shapes(byClosure).keys) == ["d-0", "d-1", "d-2"])

        let byID = try dir.open("ids")
        #expect(await replicate(byID, server, .pull) { $0.documentIDs = ["d-4", "d-7"] }.error == nil)
        #expect(try Set(shapes(byID).keys) == ["d-4", "d-7"])

        let byChannel = try dir.open("channels")
        #expect(await replicate(byChannel, server, .pull) { $0.channels = ["ch-2"] }.error == nil)
        #expect(try Set(shapes(byChannel).keys) == ["d-2", "d-5", "d-8"])

        // Pushing with channels and document IDs filters the local feed the same way.
        let pushedTo = try dir.open("pushed")
        #expect(await replicate(server, pushedTo, .push) { $0.channels = ["ch-0"]; $0.documentIDs = ["d-0", "d-1", "d-3"] }.error == nil)
        #expect(try Set(shapes(pushedTo).keys) == ["d-0", "d-3"])
    }

    @Test func aValidationRejectingPulledRevisionsIsReportedPerDocument() async throws {
        let dir = try TestDirectory()
        let server = try dir.open("server"), device = try dir.open("device")
        for i in 0 ..< 10 { try save(server, "doc-\(i)", ["created_at": .string(i == 3 || i == 7 ? "yesterday" : "2026-11-21")]) }
        device.addValidation(named: "created_at") { new, _ in
            if !new.isDeleted, new["created_at"] == "yesterday" { throw SetteeError.forbidden("invalid date") }
        }
        let recorder = Recorder()
        let status = await replicate(device, server, .pull, recorder: recorder)
        #expect(status.error == nil)
        #expect(try device.count == 8)
        #expect(await recorder.waitFor { $0.count == 10 })
        let failed = recorder.documents.value.filter { $0.1.error != nil }
        #expect(Set(failed.map(\.1.id)) == ["doc-3", "doc-7"])
        #expect(failed.allSatisfy { $0.1.error?.code == .rejected && $0.1.error?.underlying?.code == .forbidden })
        #expect(failed.allSatisfy { $0.1.error?.message == "invalid date" })
    }
}
