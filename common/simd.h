// simd.h - stage 1 of the JSON scanner: byte classes 64 bytes at a time.
//
// as_simd() picks one implementation per process: the best the CPU runs
// (AVX-512BW, AVX2, SSE2, else portable C), or the one ACPSNAP_SIMD names
// (avx512, avx2, sse2, scalar or auto). A forced level the CPU lacks, or an
// unknown name, is trouble (exit 2). Every level computes the same bits.
#ifndef ACPSNAP_SIMD_H
#define ACPSNAP_SIMD_H

#include <stddef.h>
#include <stdint.h>

enum { AS_SIMD_SCALAR, AS_SIMD_SSE2, AS_SIMD_AVX2, AS_SIMD_AVX512, AS_SIMD_LEVELS };

// Bit i of each mask describes byte i of a 64-byte block.
typedef struct {
    uint64_t quote;     // '"'
    uint64_t bslash;    // '\\'
    uint64_t op;        // { } [ ] : ,
    uint64_t space;     // ' '
    uint64_t ctrl;      // 0x00-0x1f
    uint64_t hi;        // 0x80-0xff
} as_blk;

// The structural index of one line: the positions, in order, of every
// unescaped quote, every backslash that starts an escape, and every
// { } [ ] : , outside strings, then a sentinel entry holding the line's
// length. Returns the entry count (sentinel excluded), or -1 when the line
// is not a compact JSON text the fast path takes: any control byte, a space,
// backslash or non-ASCII byte outside a string, an invalid escape, an
// unterminated string, or invalid UTF-8. -1 decides nothing: the caller
// falls back to the byte-at-a-time scanner, which is the reference.
// ix must hold len + AS_INDEX_SLACK entries (it writes past the sentinel).
#define AS_INDEX_SLACK 64
typedef long (*as_index_fn)(const uint8_t *s, size_t len, uint32_t *ix);

int as_simd_pick(void);                  // (as_simd's first call)
extern int as_simd_level;                // -1 until picked
static inline int as_simd(void)          // the level in use (first call decides)
{
    return as_simd_level >= 0 ? as_simd_level : as_simd_pick();
}
const char *as_simd_name(int level);     // "avx512", "avx2", "sse2", "scalar"
int as_simd_supported(int level);        // 1 when this CPU runs level
as_index_fn as_simd_index(int level);    // the index builder of one level (tests)
static inline long as_json_index(const uint8_t *s, size_t len, uint32_t *ix)
{
    extern as_index_fn as_simd_index_fn;
    if (!as_simd_index_fn) as_simd();
    return as_simd_index_fn(s, len, ix);
}
// Classifies one 64-byte block at the given level (tests compare levels).
void as_simd_classify(int level, const uint8_t *p, as_blk *b);

#endif
