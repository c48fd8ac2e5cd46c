import Foundation
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// What every request goes through, read byte by byte: the same answers as the slower ways they
/// replaced (Foundation's percent-encoding, a base64 decoder, formatted random bytes).
@Suite struct RequestPathTests {
    @Test func basicCredentialsAreReadAsBefore() {
        func header(_ scheme: String, _ credentials: String, padding: String = "") -> String {
            "\(scheme) \(padding)\(Data(credentials.utf8).base64EncodedString())\(padding)"
        }
        func read(_ header: String) -> [String]? { CouchAPI.basicCredentials(header).map { [$0.0, $0.1] } }
        #expect(read(header("Basic", "alice:secret")) == ["alice", "secret"])
        // Any case of the scheme; blanks around the credentials; a colon in the password.
        #expect(read(header("bAsIc", "bob:a:b:c")) == ["bob", "a:b:c"])
        #expect(read(header("Basic", "bob:pw", padding: " \t ")) == ["bob", "pw"])
        #expect(read("  " + header("Basic", "bob:pw")) == ["bob", "pw"])
        #expect(read(header("Basic", "zoë:пароль")) == ["zoë", "пароль"])
        #expect(read(header("Basic", ":")) == ["", ""])
        // Refused: another scheme, no separator, no colon, not base64, not UTF-8, nothing.
        for bad in [header("Bearer", "bob:pw"), "Basic", "Basic ", "Basicx " + Data("a:b".utf8).base64EncodedString(),
                    header("Basic", "no-colon"), "Basic a:b", "Basic YWJj=", "Basic " + Data([0x61, 0x3A, 0xFF]).base64EncodedString(), ""] {
            #expect(CouchAPI.basicCredentials(bad) == nil, "\(bad)")
        }
    }

    @Test func segmentsAreEncodedAsFoundationEncodesThem() {
        let seed = ProcessInfo.processInfo.environment["SETTEE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0 ... .max)
        print("segmentsAreEncodedAsFoundationEncodesThem seed \(seed) (SETTEE_SEED=\(seed) replays it)")
        var rng = KillRecoveryTests.SplitMix64(seed: seed)
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#")
        let pieces = ["a", "Z", "0", "-", ".", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":", "@",
                      "/", "?", "#", "%", " ", "\"", "<", ">", "[", "]", "\\", "^", "`", "{", "|", "}", "\u{7F}", "\u{1}",
                      "é", "日本", "🙂", "\u{301}"]
        for _ in 0 ..< 2000 {
            let id = (0 ..< Int.random(in: 0 ... 12, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            #expect(CouchAPI.percentEncoded(id) == id.addingPercentEncoding(withAllowedCharacters: allowed), "seed \(seed): \(id)")
        }
        #expect(CouchAPI.percentEncoded("a/b c") == "a%2Fb%20c")
    }

    @Test func madeUpRequestIDsAreTenHexDigitsAndDistinct() {
        var seen = Set<String>()
        var malformed: [String] = []
        for _ in 0 ..< 100_000 {
            let id = CouchAPI.newRequestID()
            if !(id.utf8.count == 10 && id.utf8.allSatisfy({ (48 ... 57).contains($0) || (97 ... 102).contains($0) })) { malformed.append(id) }
            seen.insert(id)
        }
        #expect(malformed.isEmpty, "\(malformed.prefix(5))")
        #expect(seen.count == 100_000)
        // A client's own ID is echoed only when it could be neither a header nor a log line.
        #expect(CouchAPI.requestID("abc-DEF_123") == "abc-DEF_123")
        #expect(CouchAPI.requestID("a\r\nb") != "a\r\nb")
    }

    @Test func aThrottleRemembersOnlyAfterAFailure() throws {
        let throttle = ClientThrottle(perClient: 3, overall: 1000, window: 60)
        #expect(!throttle.remembersAnyone)
        try throttle.check("10.0.0.1")
        throttle.succeeded("10.0.0.1")
        #expect(!throttle.remembersAnyone)
        throttle.failed("10.0.0.1")
        #expect(throttle.remembersAnyone)
    }
}
