#ifndef SETTEE_CLZ4_SHIM_H
#define SETTEE_CLZ4_SHIM_H

#include <lz4.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

// pwritev2 with RWF_DSYNC: a write that is durable when it returns, in one system call. Declared
// here because the C library hides it without _GNU_SOURCE. Returns -1 with errno on failure.
#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
extern ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags);
static inline ssize_t settee_pwrite_dsync(int fd, const void *buf, size_t n, off_t offset) {
    struct iovec iov = { (void *)buf, n };
    return pwritev2(fd, &iov, 1, offset, RWF_DSYNC);
}

// CRC32C (Castagnoli). Uses the SSE4.2 instruction when the CPU has it, a table otherwise.
// Kept here because Swift has no portable access to the instruction and the engine checksums
// every record it writes and every node and value it reads.

static inline uint32_t settee_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
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
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static inline uint32_t settee_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu;
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
static inline void settee_bit_set(uint64_t *words, uint64_t bit) {
    __atomic_fetch_or(&words[bit >> 6], (uint64_t)1 << (bit & 63), __ATOMIC_RELAXED);
}

#endif
