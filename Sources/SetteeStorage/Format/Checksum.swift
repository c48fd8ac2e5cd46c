/// The starting value of every record and value checksum: the database's salt and the offset where
/// the bytes live. A valid-looking record copied elsewhere, or crafted by someone who does not know
/// the salt, does not check.
@inline(__always) func checksumSeed(salt: UInt64, offset: UInt64) -> UInt32 {
    var words = (salt.littleEndian, offset.littleEndian)
    return withUnsafeBytes(of: &words) { crc32c(0, $0.baseAddress!, 16) }
}

/// Whether a stored checksum matches the computed one. Fuzzing builds
/// (`-DSETTEE_FUZZ_IGNORE_CHECKSUMS`, set by `scripts/fuzz`) accept every checksum so the fuzzer
/// reaches the parsers behind them: a hostile file can carry valid checksums, so those parsers
/// must hold on their own.
@inline(__always) func checksumMatches(_ computed: UInt32, _ stored: UInt32) -> Bool {
    #if SETTEE_FUZZ_IGNORE_CHECKSUMS
    return true
    #else
    return computed == stored
    #endif
}
