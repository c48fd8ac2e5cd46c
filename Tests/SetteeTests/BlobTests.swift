import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Blobs: content-addressed storage, deduplication, streaming of large content
/// (DESIGN "Semantics decided" 8).
@Suite struct BlobTests {
    static func blobFiles(_ db: Database) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: db.path + "/blobs").filter { $0.hasSuffix(".blob") }.sorted()
    }

    @Test func blobIsSavedAndReadBack() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let content = Data("hello world".utf8)
        let blob = Blob(contentType: "text/plain", data: content)
        // SHA-1("hello world") = 2aae6c35c94fcfb415dbe95f408b9ce91ee846ed
        #expect(blob.digest == "sha1-Kq5sNclPz7QV2+lfQIuc6R7oRu0=")
        #expect(blob.length == 11)
        #expect(blob.properties == ["@type": "blob", "content_type": "text/plain",
                                    "digest": "sha1-Kq5sNclPz7QV2+lfQIuc6R7oRu0=", "length": 11])
        let doc = MutableDocument(id: "note", data: ["title": "greeting"])
        doc.setBlob(blob, forKey: "attachment")
        #expect(doc.blob(forKey: "attachment")?.content == content)   // before saving, from memory
        try db.saveDocument(doc)

        let read = try #require(try db.document(withID: "note"))
        let stored = try #require(read.blob(forKey: "attachment"))
        #expect(stored.digest == blob.digest)
        #expect(stored.length == 11)
        #expect(stored.contentType == "text/plain")
        #expect(stored.content == content)
        #expect(stored == blob)
        #expect(read.blob(forKey: "title") == nil)
        #expect(read.dictionary(forKey: "attachment")?["digest"] == .string(blob.digest))
        // Streamed.
        let stream = try #require(stored.contentStream)
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 4)
        var bytes: [UInt8] = []
        while case let n = stream.read(&buffer, maxLength: buffer.count), n > 0 { bytes += buffer[0 ..< n] }
        stream.close()
        #expect(Data(bytes) == content)
        #expect(try Self.blobFiles(db) == ["2aae6c35c94fcfb415dbe95f408b9ce91ee846ed.blob"])
        #expect(try db.revisionTree(withID: "note") != nil)

        // By digest.
        #expect(try db.blob(withDigest: blob.digest, contentType: "text/plain")?.content == content)
        #expect(try db.blob(withDigest: "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA=") == nil)
        #expect(try db.blob(withDigest: "sha1-../../etc/passwd") == nil)
        // An empty blob is fine too.
        let empty = MutableDocument(id: "empty")
        empty.setBlob(Blob(contentType: "application/octet-stream", data: Data()), forKey: "nothing")
        try db.saveDocument(empty)
        #expect(try db.document(withID: "empty")?.blob(forKey: "nothing")?.content == Data())
        #expect(try db.document(withID: "empty")?.blob(forKey: "nothing")?.digest == "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=")
    }

    @Test func sameContentIsStoredOnce() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let bytes = Data((0 ..< 10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        for id in ["first", "second"] {
            let doc = MutableDocument(id: id)
            doc.setBlob(Blob(contentType: "image/png", data: bytes), forKey: "image")
            try db.saveDocument(doc)
        }
        // Nested in an array, after saveBlob.
        let page = Blob(contentType: "image/png", data: bytes)
        try db.saveBlob(page)
        let book = MutableDocument(id: "book")
        book.setValue(.array([.object(page.properties), .object(page.properties)]), forKey: "pages")
        try db.saveDocument(book)

        #expect(try Self.blobFiles(db).count == 1)
        let other = Blob(contentType: "text/plain", data: Data("different".utf8))
        let third = MutableDocument(id: "third")
        third.setBlob(other, forKey: "text")
        try db.saveDocument(third)
        #expect(try Self.blobFiles(db).count == 2)
        #expect(try db.document(withID: "second")?.blob(forKey: "image")?.content == bytes)
        // Nothing left behind in the temporary directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: db.path + "/blobs/tmp").isEmpty)
    }

    @Test func aBlobWhoseContentIsMissingCannotBeSaved() throws {
        let dir = try TemporaryDirectory()
        let source = try openDatabase(dir, "source")
        let target = try openDatabase(dir, "target")
        let doc = MutableDocument(id: "doc")
        doc.setBlob(Blob(contentType: "text/plain", data: Data("only in source".utf8)), forKey: "file")
        try source.saveDocument(doc)
        // Copy the properties only (not the content) into another database.
        let props = try #require(try source.document(withID: "doc")).toDictionary()
        let copy = MutableDocument(id: "doc", data: props)
        #expect(setteeError { try target.saveDocument(copy) }?.code == .notFound)
        #expect(try target.document(withID: "doc") == nil)
        // A blob read from one database can be set on a document of another: its content follows.
        let fromSource = try #require(try source.document(withID: "doc")?.blob(forKey: "file"))
        let carrier = MutableDocument(id: "doc")
        carrier.setBlob(fromSource, forKey: "file")
        try target.saveBlob(fromSource)
        try target.saveDocument(carrier)
        #expect(try target.document(withID: "doc")?.blob(forKey: "file")?.content == Data("only in source".utf8))
        // A changed source file no longer matches its digest: rejected, nothing stored.
        let path = dir.path + "/changing.txt"
        try Data("version 1".utf8).write(to: URL(fileURLWithPath: path))
        let fileBlob = try Blob(contentType: "text/plain", fileURL: URL(fileURLWithPath: path))
        try Data("version 2!".utf8).write(to: URL(fileURLWithPath: path))
        let changed = MutableDocument(id: "changed")
        changed.setBlob(fileBlob, forKey: "file")
        #expect(setteeError { try target.saveDocument(changed) }?.code == .invalidParameter)
        #expect(try target.document(withID: "changed") == nil)
        #expect(setteeError { _ = try Blob(contentType: "x", fileURL: URL(fileURLWithPath: dir.path + "/absent")) }?.code == .io)
    }
}

extension HeavyTests {
    /// Must not share the process with other large allocations: it measures resident memory.
    @Suite struct LargeBlobTests {
        @Test func hundredMegabyteBlobIsStreamedNeverHeldInMemory() throws {
            let seed = UInt64.random(in: 0 ... .max)
            print("seed \(seed)")
            var rng = SeededGenerator(seed: seed)
            let dir = try TemporaryDirectory()
            let db = try openDatabase(dir)
            let chunk = 1 << 20
            let chunks = 100
            // Chunk i is a random 1 MiB pattern with i in its first 8 bytes.
            var pattern = [UInt8](repeating: 0, count: chunk)
            for i in stride(from: 0, to: chunk, by: 8) {
                let word = rng.next()
                pattern.withUnsafeMutableBytes { p in p.storeBytes(of: word, toByteOffset: i, as: UInt64.self) }
            }
            func stamp(_ buffer: inout [UInt8], _ i: Int) {
                withUnsafeBytes(of: UInt64(i).littleEndian) { b in buffer.replaceSubrange(0 ..< 8, with: b) }
            }

            let baseline = residentMemoryBytes()
            #expect(baseline > 0, "no VmRSS in /proc/self/status")
            let limit = baseline + (64 << 20)
            var peak = baseline
            func sample() {
                let now = residentMemoryBytes()
                peak = max(peak, now)
            }

            let sourcePath = dir.path + "/source.bin"
            #expect(FileManager.default.createFile(atPath: sourcePath, contents: nil))
            let handle = try #require(FileHandle(forWritingAtPath: sourcePath))
            var buffer = pattern
            for i in 0 ..< chunks {
                stamp(&buffer, i)
                try buffer.withUnsafeBytes { try handle.write(contentsOf: $0) }
            }
            try handle.close()
            defer { try? FileManager.default.removeItem(atPath: sourcePath) }

            let blob = try Blob(contentType: "video/mp4", fileURL: URL(fileURLWithPath: sourcePath))
            #expect(blob.length == UInt64(chunk * chunks))
            #expect(blob.digest.hasPrefix("sha1-"))
            sample()
            let doc = MutableDocument(id: "video", data: ["title": "big"])
            doc.setBlob(blob, forKey: "file")
            try db.saveDocument(doc)
            sample()
            #expect(residentMemoryBytes() < limit, "after saving: \(residentMemoryBytes() >> 20) MiB, baseline \(baseline >> 20) MiB")
            // The stored copy is what is read back: the source goes away.
            try FileManager.default.removeItem(atPath: sourcePath)
            let files = try BlobTests.blobFiles(db)
            #expect(files.count == 1)
            let size = try FileManager.default.attributesOfItem(atPath: db.path + "/blobs/" + files[0])[.size] as? NSNumber
            #expect(size?.intValue == chunk * chunks)

            let stored = try #require(try db.document(withID: "video")?.blob(forKey: "file"))
            #expect(stored.digest == blob.digest)
            #expect(stored.length == blob.length)
            let stream = try #require(stored.contentStream)
            stream.open()
            defer { stream.close() }
            var read = [UInt8](repeating: 0, count: 64 << 10)
            var assembled = [UInt8](repeating: 0, count: chunk)
            var filled = 0
            var index = 0
            var total = 0
            var mismatched: [Int] = []
            var expected = pattern
            while true {
                let n = stream.read(&read, maxLength: read.count)
                if n < 0 { Issue.record("stream error \(String(describing: stream.streamError))"); break }
                if n == 0 { break }
                total += n
                var offset = 0
                while offset < n {
                    let take = min(n - offset, chunk - filled)
                    assembled.withUnsafeMutableBytes { a in
                        read.withUnsafeBytes { r in
                            (a.baseAddress! + filled).copyMemory(from: r.baseAddress! + offset, byteCount: take)
                        }
                    }
                    filled += take
                    offset += take
                    if filled == chunk {
                        stamp(&expected, index)
                        let same = assembled.withUnsafeBytes { a in expected.withUnsafeBytes { e in memcmp(a.baseAddress!, e.baseAddress!, chunk) == 0 } }
                        if !same { mismatched.append(index) }
                        index += 1
                        filled = 0
                        if index % 10 == 0 {
                            sample()
                            #expect(residentMemoryBytes() < limit, "while streaming chunk \(index): \(residentMemoryBytes() >> 20) MiB")
                        }
                    }
                }
            }
            #expect(total == chunk * chunks)
            #expect(index == chunks)
            #expect(filled == 0)
            #expect(mismatched.isEmpty, "chunks that differ: \(mismatched.prefix(10))")
            print("100 MB blob: baseline \(baseline >> 20) MiB, peak \(peak >> 20) MiB")
            #expect(peak < limit)
            // The gauge itself works: holding 96 MB moves VmRSS by more than the 64 MiB allowance.
            // Measured against just before the allocation, since tests running alongside this
            // one may have grown or shrunk the process since the baseline was taken.
            let before = residentMemoryBytes()
            let ballast = [UInt8](repeating: 1, count: 96 << 20)
            #expect(Int64(residentMemoryBytes()) - Int64(before) > 64 << 20, "VmRSS did not see a 96 MB allocation")
            #expect(ballast[ballast.count - 1] == 1)
        }
    }
}
