import Foundation
internal import SetteeStorage

/// SHA-1 (FIPS 180-4), streaming.
///
/// Used for content digests (revision IDs, blob keys), not for security. Written here instead of
/// depending on swift-crypto, which costs far more build time than these lines. Whole blocks are
/// hashed straight from the caller's buffer; only a partial block is copied, into inline storage,
/// so hashing allocates nothing until ``finalize()`` returns the digest. `package`: the replicator
/// derives replication IDs with it (never for security either).
package struct SHA1: Sendable {
    struct State: Sendable {
        var a: UInt32 = 0x6745_2301
        var b: UInt32 = 0xEFCD_AB89
        var c: UInt32 = 0x98BA_DCFE
        var d: UInt32 = 0x1032_5476
        var e: UInt32 = 0xC3D2_E1F0
    }

    private var state = State()
    /// A partial block (64 bytes, inline).
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var pendingCount = 0
    /// Total bytes hashed so far.
    private var length: UInt64 = 0

    /// Hashes in Swift even where the CPU has SHA instructions (tests compare the two paths).
    private var portable = false

    package init() {}

    /// A hasher that never uses the CPU's SHA instructions.
    package init(portable: Bool) { self.portable = portable }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var p = bytes.baseAddress, bytes.count > 0 else { return }
        var n = bytes.count
        length &+= UInt64(n)
        if pendingCount > 0 {
            let take = min(64 - pendingCount, n)
            let offset = pendingCount
            withUnsafeMutableBytes(of: &pending) { ($0.baseAddress! + offset).copyMemory(from: p, byteCount: take) }
            pendingCount += take
            p += take
            n -= take
            guard pendingCount == 64 else { return }
            withUnsafeBytes(of: pending) { SHA1.compress(&state, $0.baseAddress!, blocks: 1, portable: portable) }
            pendingCount = 0
        }
        if n >= 64 {
            SHA1.compress(&state, p, blocks: n / 64, portable: portable)
            p += n & ~63
            n &= 63
        }
        if n > 0 {
            withUnsafeMutableBytes(of: &pending) { $0.baseAddress!.copyMemory(from: p, byteCount: n) }
            pendingCount = n
        }
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 20-byte digest of everything passed to `update`; the hasher then starts over.
    package mutating func finalize() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 20) { out, count in
            finalize(into: UnsafeMutableRawPointer(out.baseAddress!))
            count = 20
        }
    }

    /// Writes the 20-byte digest to `out` and resets the hasher, without allocating.
    package mutating func finalize(into out: UnsafeMutableRawPointer) {
        let bitLength = length &* 8
        // Padding: 0x80, zeros up to 56 mod 64, then the length in bits, big-endian.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { tail in
            let n = (pendingCount < 56 ? 64 : 128) - pendingCount
            tail.initialize(repeating: 0)
            tail[0] = 0x80
            for k in 0..<8 { tail[n - 1 - k] = UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(k))) }
            update(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(tail)[0 ..< n]))
        }
        let s = state
        out.storeBytes(of: s.a.bigEndian, toByteOffset: 0, as: UInt32.self)
        out.storeBytes(of: s.b.bigEndian, toByteOffset: 4, as: UInt32.self)
        out.storeBytes(of: s.c.bigEndian, toByteOffset: 8, as: UInt32.self)
        out.storeBytes(of: s.d.bigEndian, toByteOffset: 12, as: UInt32.self)
        out.storeBytes(of: s.e.bigEndian, toByteOffset: 16, as: UInt32.self)
        self = SHA1(portable: portable)
    }

    package static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = SHA1()
        hasher.update(bytes)
        return hasher.finalize()
    }

    package static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Lowercase hexadecimal, two digits per byte.
    package static func hex(_ digest: [UInt8]) -> String {
        digest.withUnsafeBufferPointer { d in
            String(unsafeUninitializedCapacity: d.count * 2) { out in
                writeHex(d, into: out.baseAddress!)
                return d.count * 2
            }
        }
    }

    /// Writes two lowercase hex digits per byte of `digest` at `out`.
    @inline(__always)
    static func writeHex(_ digest: UnsafeBufferPointer<UInt8>, into out: UnsafeMutablePointer<UInt8>) {
        for (k, byte) in digest.enumerated() {
            out[2 * k] = hexDigit(byte >> 4)
            out[2 * k + 1] = hexDigit(byte & 0x0F)
        }
    }

    @inline(__always) private static func hexDigit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "a") - 10 + v
    }

    /// Standard base64 with padding.
    static func base64(_ digest: [UInt8]) -> String {
        Data(digest).base64EncodedString()
    }

    // MARK: Compression

    /// Hashes `blocks` 64-byte blocks at `data` into `s`: with the CPU's SHA instructions when it
    /// has them (the platform seam's C half), else in Swift.
    private static func compress(_ s: inout State, _ data: UnsafeRawPointer, blocks: Int, portable: Bool) {
        // State is five UInt32s, laid out in order: what the C function takes.
        let done = !portable && withUnsafeMutableBytes(of: &s) { raw in
            CPU.sha1Blocks(raw.baseAddress!.assumingMemoryBound(to: UInt32.self), data, blocks: blocks)
        }
        guard !done else { return }
        for k in 0..<blocks { compressInSwift(&s, data + k &* 64) }
    }

    /// Hashes one 64-byte block at `block` into `s`.
    ///
    /// The message schedule is a 16-word ring on the stack; the 80 rounds are unrolled in groups
    /// of five so the working variables rotate by renaming instead of by moves.
    @inline(__always)
    static func compressInSwift(_ s: inout State, _ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { w in
            for t in 0..<16 {
                w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
            }
            var a = s.a, b = s.b, c = s.c, d = s.d, e = s.e

            // W[t] for t >= 16, computed in place in the ring.
            @inline(__always) func schedule(_ t: Int) -> UInt32 {
                if t < 16 { return w[t] }
                let x = w[(t &- 3) & 15] ^ w[(t &- 8) & 15] ^ w[(t &- 14) & 15] ^ w[t & 15]
                let next = rotl(x, 1)
                w[t & 15] = next
                return next
            }

            // Each call is one round; the caller passes the variables already renamed, so the
            // round only updates `e` and `b` in place.
            @inline(__always) func round(_ a: UInt32, _ b: inout UInt32, _ e: inout UInt32, _ f: UInt32, _ k: UInt32, _ t: Int) {
                e = e &+ rotl(a, 5) &+ f &+ k &+ schedule(t)
                b = rotl(b, 30)
            }

            var t = 0
            while t < 20 {
                round(a, &b, &e, (b & c) | (~b & d), 0x5A82_7999, t)
                round(e, &a, &d, (a & b) | (~a & c), 0x5A82_7999, t &+ 1)
                round(d, &e, &c, (e & a) | (~e & b), 0x5A82_7999, t &+ 2)
                round(c, &d, &b, (d & e) | (~d & a), 0x5A82_7999, t &+ 3)
                round(b, &c, &a, (c & d) | (~c & e), 0x5A82_7999, t &+ 4)
                t &+= 5
            }
            while t < 40 {
                round(a, &b, &e, b ^ c ^ d, 0x6ED9_EBA1, t)
                round(e, &a, &d, a ^ b ^ c, 0x6ED9_EBA1, t &+ 1)
                round(d, &e, &c, e ^ a ^ b, 0x6ED9_EBA1, t &+ 2)
                round(c, &d, &b, d ^ e ^ a, 0x6ED9_EBA1, t &+ 3)
                round(b, &c, &a, c ^ d ^ e, 0x6ED9_EBA1, t &+ 4)
                t &+= 5
            }
            while t < 60 {
                round(a, &b, &e, (b & c) | (b & d) | (c & d), 0x8F1B_BCDC, t)
                round(e, &a, &d, (a & b) | (a & c) | (b & c), 0x8F1B_BCDC, t &+ 1)
                round(d, &e, &c, (e & a) | (e & b) | (a & b), 0x8F1B_BCDC, t &+ 2)
                round(c, &d, &b, (d & e) | (d & a) | (e & a), 0x8F1B_BCDC, t &+ 3)
                round(b, &c, &a, (c & d) | (c & e) | (d & e), 0x8F1B_BCDC, t &+ 4)
                t &+= 5
            }
            while t < 80 {
                round(a, &b, &e, b ^ c ^ d, 0xCA62_C1D6, t)
                round(e, &a, &d, a ^ b ^ c, 0xCA62_C1D6, t &+ 1)
                round(d, &e, &c, e ^ a ^ b, 0xCA62_C1D6, t &+ 2)
                round(c, &d, &b, d ^ e ^ a, 0xCA62_C1D6, t &+ 3)
                round(b, &c, &a, c ^ d ^ e, 0xCA62_C1D6, t &+ 4)
                t &+= 5
            }

            s.a = s.a &+ a
            s.b = s.b &+ b
            s.c = s.c &+ c
            s.d = s.d &+ d
            s.e = s.e &+ e
        }
    }

    @inline(__always)
    private static func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 {
        (x << n) | (x >> (32 &- n))
    }
}
