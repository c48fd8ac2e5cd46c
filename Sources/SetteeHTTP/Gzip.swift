import CZlib
import Foundation

/// gzip, for attachments a peer sends encoded (CouchDB's replicator sends text, JSON, JavaScript
/// and XML attachments as it stores them: gzip-compressed).
package enum Gzip {
    /// The decompressed bytes of a gzip stream, at most `limit` of them.
    package static func decompress(_ data: Data, limit: Int) throws -> Data {
        var stream = z_stream()
        guard inflateInit2_(&stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw WireError("bad_request", "cannot start gzip decompression")
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var input = [UInt8](data)
        let count = input.count
        return try input.withUnsafeMutableBufferPointer { inBuffer -> Data in
            stream.next_in = inBuffer.baseAddress
            stream.avail_in = uInt(count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { out -> Int32 in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                output.append(contentsOf: chunk[0 ..< produced])
                guard output.count <= limit else { throw WireError("too_large", "a gzip-encoded attachment expands beyond \(limit) bytes", status: 413) }
                if status == Z_STREAM_END { return output }
                guard status == Z_OK else { throw WireError("bad_request", "an attachment's gzip encoding is damaged") }
                if stream.avail_in == 0 && produced == 0 { throw WireError("bad_request", "an attachment's gzip encoding is truncated") }
            }
        }
    }
}
