import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Documents from and to Codable values.
@Suite struct CodableTests {
    struct Address: Codable, Equatable {
        var street: String
        var city: String
        var floor: Int?
    }

    struct Person: Codable, Equatable {
        var name: String
        var age: Int
        var height: Double
        var admin: Bool
        var born: Date
        var tags: [String]
        var address: Address
        var nickname: String?
        var manager: String?
        var scores: [String: Int]
        var avatar: Data
    }

    static let sample = Person(
        name: "Naomi Nagata", age: 34, height: 1.92, admin: true,
        born: Date(timeIntervalSince1970: 1_700_000_000.5), tags: ["engineer", "belter", "ünïcödé ✓"],
        address: Address(street: "Ring 3", city: "Tycho", floor: nil), nickname: "Nao", manager: nil,
        scores: ["a": 1, "b": -2], avatar: Data([0, 1, 2, 254, 255]))

    @Test func codableRoundTripThroughTheDatabase() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let doc = try MutableDocument(id: "naomi", encoding: Self.sample)
        #expect(doc.string(forKey: "name") == "Naomi Nagata")
        #expect(doc.date(forKey: "born") == Self.sample.born)
        try db.saveDocument(doc)

        let read = try #require(try db.document(withID: "naomi"))
        let decoded = try read.decode(Person.self)
        #expect(decoded == Self.sample)
        #expect(read.int(forKey: "age") == 34)
        #expect(read.double(forKey: "height") == 1.92)
        #expect(read.bool(forKey: "admin"))
        #expect(read.string(forKey: "born") == "2023-11-14T22:13:20.500Z")
        #expect(read.dictionary(forKey: "address")?["city"] == "Tycho")
        #expect(read.array(forKey: "tags")?.count == 3)
        #expect(!read.contains(key: "manager") || read["manager"] == .null)

        // A mutable copy decodes the same, and an edit through the typed API round-trips.
        let m = read.toMutable()
        m.setInt(35, forKey: "age")
        try db.saveDocument(m)
        var older = Self.sample
        older.age = 35
        #expect(try db.document(withID: "naomi")?.decode(Person.self) == older)
        #expect(try m.decode(Person.self) == older)

        // Reading back into an unrelated type fails cleanly.
        struct Wrong: Decodable { var name: Int }
        #expect(setteeError { _ = try read.decode(Wrong.self) }?.code == .invalidParameter)
        // A value that does not encode as an object is not a document.
        #expect(setteeError { _ = try MutableDocument(id: "x", encoding: [1, 2, 3]) }?.code == .invalidParameter)
        #expect(setteeError { _ = try MutableDocument(id: "x", encoding: "text") }?.code == .invalidParameter)
    }

    @Test func encodedKeysAreCheckedLikeAnyOther() throws {
        struct Reserved: Codable { var _id: String }
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let doc = try MutableDocument(id: "r", encoding: Reserved(_id: "sneaky"))
        #expect(setteeError { try db.saveDocument(doc) }?.code == .invalidParameter)
    }
}
