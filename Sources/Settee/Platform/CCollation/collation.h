#ifndef SETTEE_COLLATION_H
#define SETTEE_COLLATION_H

// The C half of the library's collator (Sources/Settee/Platform/RootCollator.swift,
// docs/platforms.md): ICU's collation, which only indexes and queries use, kept out of the
// storage engine (the engine never compares text). Header-only, every function static inline.
// Only RootCollator.swift imports this module.

#include <stdint.h>

// ICU's collation (Formats/collation.md), for indexes and queries: the five functions used,
// declared here because no platform ships ICU's headers to applications. Apple's systems export
// them unrenamed from libicucore; elsewhere Swift's Foundation carries ICU as _FoundationICU,
// whose entry points have the prefix swift_. A collator is opaque; statuses are ICU's
// UErrorCode (0 success, below 0 a warning, above 0 an error); results of a comparison are -1,
// 0 and 1. UChar is a UTF-16 unit.
#if defined(__APPLE__)
#define SETTEE_ICU(name) name
#else
#define SETTEE_ICU(name) swift_##name
#endif
extern void *SETTEE_ICU(ucol_open)(const char *locale, int32_t *status);
extern void SETTEE_ICU(ucol_close)(void *collator);
extern int32_t SETTEE_ICU(ucol_getSortKey)(const void *collator, const uint16_t *source, int32_t sourceLength,
                                           uint8_t *result, int32_t resultCapacity);
extern int32_t SETTEE_ICU(ucol_strcollUTF8)(const void *collator, const char *a, int32_t aLength,
                                            const char *b, int32_t bLength, int32_t *status);
extern void SETTEE_ICU(ucol_getVersion)(const void *collator, uint8_t version[4]);

static inline void *settee_collator_open_root(int32_t *status) { return SETTEE_ICU(ucol_open)("", status); }
static inline void settee_collator_close(void *c) { SETTEE_ICU(ucol_close)(c); }
static inline int32_t settee_collator_sort_key(const void *c, const uint16_t *s, int32_t n, uint8_t *out, int32_t capacity) {
    return SETTEE_ICU(ucol_getSortKey)(c, s, n, out, capacity);
}
static inline int32_t settee_collator_compare_utf8(const void *c, const char *a, int32_t an, const char *b, int32_t bn, int32_t *status) {
    return SETTEE_ICU(ucol_strcollUTF8)(c, a, an, b, bn, status);
}
static inline void settee_collator_version(const void *c, uint8_t version[4]) { SETTEE_ICU(ucol_getVersion)(c, version); }
#undef SETTEE_ICU

#endif
