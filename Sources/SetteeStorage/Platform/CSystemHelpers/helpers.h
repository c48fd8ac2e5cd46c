#ifndef SETTEE_SYSTEM_HELPERS_H
#define SETTEE_SYSTEM_HELPERS_H

// The C half of the platform seam (Sources/SetteeStorage/Platform, docs/platforms.md): the few
// system calls and CPU instructions Swift cannot reach well (durable writes, checksums, reader
// announcements, membarrier, SHA-1), declared for each platform family. Header-only, every
// function static inline, so a function nobody calls links nothing.
// Only the seam's Swift files import this module.

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

#if defined(__linux__)
// pwritev2 with RWF_DSYNC (Linux only): a write that is durable when it returns, in one system
// call. Declared here because the C library hides it without _GNU_SOURCE. Returns -1 with errno
// on failure (ENOSYS where the C library or kernel lacks it).
#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
extern ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags);
static inline ssize_t settee_pwrite_dsync(int fd, const void *buf, size_t n, off_t offset) {
    struct iovec iov = { (void *)buf, n };
    return pwritev2(fd, &iov, 1, offset, RWF_DSYNC);
}
#endif

#if defined(__APPLE__)
#include <fcntl.h>
// Darwin's syncs (fcntl(2)): F_FULLFSYNC asks the drive to write its cache to the medium, which
// plain fsync does not on Apple's systems, and is what a durable commit needs; F_BARRIERFSYNC only
// orders the writes before it ahead of the writes after it. fcntl is variadic, which Swift cannot
// call, hence these. Return -1 with errno on failure (a file system without them: ENOTSUP).
static inline int settee_full_fsync(int fd) { return fcntl(fd, F_FULLFSYNC); }
static inline int settee_barrier_fsync(int fd) {
#ifdef F_BARRIERFSYNC
    return fcntl(fd, F_BARRIERFSYNC);
#else
    return fcntl(fd, F_FULLFSYNC);
#endif
}
#endif

// CRC32C (Castagnoli). Uses the SSE4.2 instruction when the CPU has it, a table otherwise.
// Kept here because Swift has no portable access to the instruction and the engine checksums
// every record it writes and every node and value it reads.

// The byte-at-a-time table of the reflected polynomial, built on first use.
static inline const uint32_t *settee_crc32c_table(void) {
    static uint32_t table[256];
    static int ready = 0;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
            table[i] = c;
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return table;
}

static inline uint32_t settee_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    const uint32_t *table = settee_crc32c_table();
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
// One stream of the instruction runs at a third of its throughput (each step waits for the
// previous one), so long inputs go three blocks at a time, in three independent streams, joined
// at the end of each round: the register after block A then B then C is Z2(a) ^ Z1(b) ^ c, where
// a, b and c are the streams' registers (b and c started from 0) and Z1, Z2 carry a register over
// one and two blocks of zeros. Both are linear over GF(2), so each is kept as four tables of 256
// entries, one per byte of the register. Built once, from the table of the portable path.
#define SETTEE_CRC_BLOCK 128

// A register carried over n zero bytes (no pre- or post-inversion, as the instruction works).
static inline uint32_t settee_crc_zeros(uint32_t reg, size_t n) {
    const uint32_t *table = settee_crc32c_table();
    while (n--) reg = table[reg & 0xFF] ^ (reg >> 8);
    return reg;
}

// The tables live inside a function: Swift imports this header, and emits a function's statics
// but not a header's own.
static inline const uint32_t (*settee_crc_shift_tables(void))[4][256] {
    static uint32_t shift[2][4][256];
    static int ready = 0;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        // Racing threads compute and store the same values; the flag is set after every store.
        for (int z = 0; z < 2; z++) {
            uint32_t basis[32];
            for (int bit = 0; bit < 32; bit++) basis[bit] = settee_crc_zeros((uint32_t)1 << bit, (size_t)SETTEE_CRC_BLOCK * (z + 1));
            for (int byte = 0; byte < 4; byte++) {
                for (int v = 0; v < 256; v++) {
                    uint32_t image = 0;
                    for (int bit = 0; bit < 8; bit++) if (v & (1 << bit)) image ^= basis[byte * 8 + bit];
                    shift[z][byte][v] = image;
                }
            }
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return (const uint32_t (*)[4][256])shift;
}

static inline uint32_t settee_crc_shift_by(const uint32_t (*t)[256], uint32_t reg) {
    return t[0][reg & 0xFF] ^ t[1][(reg >> 8) & 0xFF] ^ t[2][(reg >> 16) & 0xFF] ^ t[3][reg >> 24];
}

__attribute__((target("sse4.2")))
static inline uint32_t settee_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu;
    if (n >= 3 * SETTEE_CRC_BLOCK) {
        const uint32_t (*shift)[4][256] = settee_crc_shift_tables();
        do {
            uint64_t b = 0, d = 0;
            for (size_t k = 0; k < SETTEE_CRC_BLOCK; k += 8) {
                uint64_t va, vb, vd;
                memcpy(&va, p + k, 8);
                memcpy(&vb, p + SETTEE_CRC_BLOCK + k, 8);
                memcpy(&vd, p + 2 * SETTEE_CRC_BLOCK + k, 8);
                c = __builtin_ia32_crc32di(c, va);
                b = __builtin_ia32_crc32di(b, vb);
                d = __builtin_ia32_crc32di(d, vd);
            }
            c = settee_crc_shift_by(shift[1], (uint32_t)c) ^ settee_crc_shift_by(shift[0], (uint32_t)b) ^ (uint32_t)d;
            p += 3 * SETTEE_CRC_BLOCK;
            n -= 3 * SETTEE_CRC_BLOCK;
        } while (n >= 3 * SETTEE_CRC_BLOCK);
    }
    while (n >= 8) { uint64_t v; memcpy(&v, p, 8); c = __builtin_ia32_crc32di(c, v); p += 8; n -= 8; }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

#endif

static inline uint32_t settee_crc32c(uint32_t crc, const void *data, size_t n) {
#if defined(__x86_64__)
    static int hw = -1;
    int h = __atomic_load_n(&hw, __ATOMIC_RELAXED);
    if (h < 0) { __builtin_cpu_init(); h = __builtin_cpu_supports("sse4.2") ? 1 : 0; __atomic_store_n(&hw, h, __ATOMIC_RELAXED); }
    if (h) return settee_crc32c_hw(crc, (const uint8_t *)data, n);
#endif
    return settee_crc32c_sw(crc, (const uint8_t *)data, n);
}

// Atomic bit operations on a shared bitmap (the record-verification cache). Relaxed ordering:
// a lost or late bit only means one more checksum, never a wrong answer.
static inline int settee_bit_test(const uint64_t *words, uint64_t bit) {
    return (__atomic_load_n(&words[bit >> 6], __ATOMIC_RELAXED) >> (bit & 63)) & 1;
}
// Asks for every cache line of [p, p+n) at once, so a value's misses overlap instead of queueing.
static inline void settee_prefetch(const void *p, size_t n) {
    const char *c = (const char *)p;
    for (size_t i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 3);
}
// A load and a store, not a locked read-modify-write: a locked instruction waits for every
// earlier load and store to finish, and readers and the writer set a bit for each value they
// check or write. Two threads setting bits of one word at once may lose one of them, which
// costs only a checksum later; a bit is never set that nobody set.
static inline void settee_bit_set(uint64_t *words, uint64_t bit) {
    uint64_t *word = &words[bit >> 6];
    __atomic_store_n(word, __atomic_load_n(word, __ATOMIC_RELAXED) | ((uint64_t)1 << (bit & 63)), __ATOMIC_RELAXED);
}

// SHA-1 blocks with the SHA extensions (SHA-NI), for revision IDs and blob digests: about four
// times the speed of the portable Swift rounds on CPUs that have them. Returns 0 without touching
// `state` when the CPU lacks them; the caller then hashes in Swift.
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3")))
static inline void settee_sha1_blocks_ni(uint32_t state[5], const uint8_t *p, size_t blocks) {
    // Lanes hold words high to low: A in lane 3 down to D in lane 0; E alone in lane 3.
    const __m128i swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)state), 0x1B);
    __m128i e0 = _mm_set_epi32((int)state[4], 0, 0, 0);
    for (; blocks > 0; blocks--, p += 64) {
        const __m128i abcd_in = abcd, e_in = e0;
        // w[i]: the schedule's words 4i .. 4i+3, a ring of four.
        __m128i w[4];
        for (int i = 0; i < 4; i++) w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), swap);
        __m128i e = _mm_add_epi32(e0, w[0]), prev;
        // Twenty groups of four rounds; group g uses the round function g / 5. From the second
        // group on, E comes from the ABCD of the group before (sha1nexte), and the schedule
        // grows by one vector per group: w[g] = msg2(msg1(w[g-4], w[g-3]) ^ w[g-2], w[g-1]).
#define SETTEE_SHA1_GROUP(g, f)                                                                   \
        if (g > 0) {                                                                              \
            if (g >= 4) w[g & 3] = _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32(w[g & 3],   \
                w[(g + 1) & 3]), w[(g + 2) & 3]), w[(g + 3) & 3]);                                  \
            e = _mm_sha1nexte_epu32(prev, w[g & 3]);                                              \
        }                                                                                         \
        prev = abcd;                                                                              \
        abcd = _mm_sha1rnds4_epu32(abcd, e, f);
        SETTEE_SHA1_GROUP(0, 0) SETTEE_SHA1_GROUP(1, 0) SETTEE_SHA1_GROUP(2, 0) SETTEE_SHA1_GROUP(3, 0) SETTEE_SHA1_GROUP(4, 0)
        SETTEE_SHA1_GROUP(5, 1) SETTEE_SHA1_GROUP(6, 1) SETTEE_SHA1_GROUP(7, 1) SETTEE_SHA1_GROUP(8, 1) SETTEE_SHA1_GROUP(9, 1)
        SETTEE_SHA1_GROUP(10, 2) SETTEE_SHA1_GROUP(11, 2) SETTEE_SHA1_GROUP(12, 2) SETTEE_SHA1_GROUP(13, 2) SETTEE_SHA1_GROUP(14, 2)
        SETTEE_SHA1_GROUP(15, 3) SETTEE_SHA1_GROUP(16, 3) SETTEE_SHA1_GROUP(17, 3) SETTEE_SHA1_GROUP(18, 3) SETTEE_SHA1_GROUP(19, 3)
#undef SETTEE_SHA1_GROUP
        e0 = _mm_sha1nexte_epu32(prev, e_in);
        abcd = _mm_add_epi32(abcd, abcd_in);
    }
    _mm_storeu_si128((__m128i *)state, _mm_shuffle_epi32(abcd, 0x1B));
    state[4] = (uint32_t)_mm_extract_epi32(e0, 3);
}
#endif

static inline int settee_sha1_blocks(uint32_t state[5], const void *data, size_t blocks) {
#if defined(__x86_64__)
    static int hw = -1;
    int h = __atomic_load_n(&hw, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3") ? 1 : 0;
        __atomic_store_n(&hw, h, __ATOMIC_RELAXED);
    }
    if (h) { settee_sha1_blocks_ni(state, (const uint8_t *)data, blocks); return 1; }
#endif
    (void)state; (void)data; (void)blocks;
    return 0;
}

// Reader slots (see ReaderTable.swift). A reader announces the snapshot epoch it reads under with
// plain stores; the writer reads the announcements before it frees an old snapshot. These are the
// loads and stores both sides use: C11 atomics that compile to plain moves on x86-64.
static inline uint64_t settee_load_acquire_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void settee_store_relaxed_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void settee_store_release_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void *settee_load_acquire_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void settee_store_release_ptr(void **p, void *v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// A full fence: what a reader pays after its announcement when the writer cannot fence for it.
static inline void settee_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// Keeps the compiler from moving loads above the announcement when the writer's membarrier
// orders them at run time.
static inline void settee_compiler_fence(void) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// membarrier(2): the writer makes every running thread of the process execute a full barrier,
// so readers need none of their own. Registers once; returns 0 when the kernel refuses
// (older than 4.14, or filtered by seccomp), and callers then fence on the reading side.
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#ifndef SETTEE_MEMBARRIER_PRIVATE_EXPEDITED
#define SETTEE_MEMBARRIER_QUERY 0
#define SETTEE_MEMBARRIER_PRIVATE_EXPEDITED (1 << 3)
#define SETTEE_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#endif
static inline int settee_membarrier_register(void) {
#if defined(__linux__) && defined(SYS_membarrier)
    long supported = syscall(SYS_membarrier, SETTEE_MEMBARRIER_QUERY, 0, 0);
    if (supported < 0 || !(supported & SETTEE_MEMBARRIER_PRIVATE_EXPEDITED)) return 0;
    return syscall(SYS_membarrier, SETTEE_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    return 0;
#endif
}
static inline int settee_membarrier(void) {
#if defined(__linux__) && defined(SYS_membarrier)
    return syscall(SYS_membarrier, SETTEE_MEMBARRIER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    return 0;
#endif
}

#endif
