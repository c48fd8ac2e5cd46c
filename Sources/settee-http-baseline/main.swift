// The bare HTTP route `scripts/bench-http` measures beside the sync server: Hummingbird on the same
// machine answering every GET with one fixed 500-byte JSON body. It is this machine's limit for an
// HTTP server and its load generator together; the server's figures are reported as ratios to it.
// Usage: settee-http-baseline PORT
import Foundation
import Hummingbird

let port = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 8090
// 500 bytes of JSON, as a document of the benchmark's size would be.
let filler = String(repeating: "x", count: 500 - #"{"_id":"doc-00000000","_rev":"1-0","body":""}"#.utf8.count)
let body = ByteBuffer(string: #"{"_id":"doc-00000000","_rev":"1-0","body":"\#(filler)"}"#)
precondition(body.readableBytes == 500)
let router = Router()
router.get("**") { _, _ in
    Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: body))
}
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "baseline"))
try await app.runService()
