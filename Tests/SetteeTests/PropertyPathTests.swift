import Testing
@testable import Settee

/// Property paths as queries and indexes name them: dots, `[index]`, backslash escapes, and
/// MISSING (nil) apart from `null`.
@Suite struct PropertyPathTests {
    let doc: [String: JSONValue] = [
        "type": "task", "title": .null,
        "list": ["id": "list-7", "owner": ["name": "ann"]],
        "tags": ["a", "b", ["deep": true]],
        "a.b": 1, "a": ["b": 2],
        "odd[key]": "x", "back\\slash": "y",
    ]

    @Test func pathsLeadToValuesOrToMissing() throws {
        #expect(try PropertyPath("type").value(in: doc) == "task")
        #expect(try PropertyPath("list.id").value(in: doc) == "list-7")
        #expect(try PropertyPath("list.owner.name").value(in: doc) == "ann")
        #expect(try PropertyPath("tags[0]").value(in: doc) == "a")
        #expect(try PropertyPath("tags[-1].deep").value(in: doc) == true)
        #expect(try PropertyPath("tags[2].deep").value(in: doc) == true)
        // null is a value; MISSING is none.
        #expect(try PropertyPath("title").value(in: doc) == .some(.null))
        for missing in ["nope", "list.nope", "tags[3]", "tags[-4]", "type.length", "list[0]", "tags.a", "title.x"] {
            #expect(try PropertyPath(missing).value(in: doc) == nil, "\(missing)")
        }
    }

    @Test func escapesNameDotsAndBrackets() throws {
        #expect(try PropertyPath("a\\.b").value(in: doc) == 1)
        #expect(try PropertyPath("a.b").value(in: doc) == 2)
        #expect(try PropertyPath("odd\\[key\\]").value(in: doc) == "x")
        #expect(try PropertyPath("back\\\\slash").value(in: doc) == "y")
        for text in ["a\\.b", "list.owner.name", "tags[-1].deep", "odd\\[key\\]", "back\\\\slash", "m[1][2]"] {
            let path = try PropertyPath(text)
            #expect(try PropertyPath(path.description) == path, "\(text) round-trips")
        }
        #expect(try PropertyPath("m[1][2]").components == [.name("m"), .index(1), .index(2)])
    }

    @Test func malformedPathsNameThePosition() throws {
        let cases: [(String, String)] = [
            ("", "position 0"), (".a", "position 0"), ("a.", "position 2"), ("a..b", "position 2"),
            ("a[", "position 1"), ("a[x]", "position 2"), ("a[]", "position 2"), ("a]", "position 1"),
            ("[0]", "position 0"), ("a[0]b", "position 4"), ("a\\", "position 1"),
            ("a[99999999999]", "position 2"),
        ]
        for (text, position) in cases {
            #expect {
                try PropertyPath(text)
            } throws: { error in
                guard let e = error as? SetteeError else { return false }
                return e.code == .invalidParameter && e.message.contains(position)
            }
        }
        let long = Array(repeating: "a", count: PropertyPath.maxComponents + 1).joined(separator: ".")
        #expect(throws: SetteeError.self) { try PropertyPath(long) }
        #expect(try PropertyPath(Array(repeating: "a", count: PropertyPath.maxComponents).joined(separator: ".")).components.count
                == PropertyPath.maxComponents)
    }
}
