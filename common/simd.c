// simd.c - stage 1 of the JSON scanner (see simd.h): classify 64 bytes at a
// time, resolve escapes and string spans with bit arithmetic, and list the
// structural positions of a line for json.c's stage 2. One implementation
// of the index builder, instantiated once per instruction set; the per-level
// parts are only the block classifier and the prefix XOR.
#include "acpsnap.h"
#include "simd.h"
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#define AS_X86 1
#include <immintrin.h>
#endif

// ---------------------------------------------------------------- classes

enum { C_Q = 1, C_B = 2, C_O = 4, C_S = 8, C_C = 16, C_H = 32 };
static const unsigned char cls[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(C_C), R16(C_C),
    ['"'] = C_Q, ['\\'] = C_B, [' '] = C_S,
    ['{'] = C_O, ['}'] = C_O, ['['] = C_O, [']'] = C_O, [':'] = C_O, [','] = C_O,
    [0x80] = R16(C_H), R16(C_H), R16(C_H), R16(C_H), R16(C_H), R16(C_H), R16(C_H), R16(C_H),
#undef R16
};

static inline __attribute__((always_inline)) void classify_scalar(const uint8_t *p, as_blk *b)
{
    uint64_t m[6] = {0};
    for (int i = 0; i < 64; i++) {
        unsigned c = cls[p[i]];
        for (int k = 0; k < 6; k++) m[k] |= (uint64_t)((c >> k) & 1) << i;
    }
    b->quote = m[0]; b->bslash = m[1]; b->op = m[2]; b->space = m[3]; b->ctrl = m[4]; b->hi = m[5];
}

static inline __attribute__((always_inline)) uint64_t prefix_xor_scalar(uint64_t x)
{
    x ^= x << 1; x ^= x << 2; x ^= x << 4; x ^= x << 8; x ^= x << 16; x ^= x << 32;
    return x;
}

#ifdef AS_X86
__attribute__((target("sse2")))
static inline void classify_sse2(const uint8_t *p, as_blk *b)
{
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(' ');
    const __m128i lb = _mm_set1_epi8('{'), rb = _mm_set1_epi8('}'), co = _mm_set1_epi8(':');
    const __m128i cm = _mm_set1_epi8(','), x20 = _mm_set1_epi8(0x20);
    uint64_t m[6] = {0};
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i f = _mm_or_si128(v, x20);   // '[' ']' fold onto '{' '}'
        __m128i op = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(f, lb), _mm_cmpeq_epi8(f, rb)),
                                  _mm_or_si128(_mm_cmpeq_epi8(v, co), _mm_cmpeq_epi8(v, cm)));
        uint64_t hi = (uint32_t)_mm_movemask_epi8(v);
        int s = 16 * k;
        m[0] |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)) << s;
        m[1] |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)) << s;
        m[2] |= (uint64_t)(uint32_t)_mm_movemask_epi8(op) << s;
        m[3] |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, sp)) << s;
        m[4] |= ((uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmplt_epi8(v, x20)) & ~hi) << s;
        m[5] |= hi << s;
    }
    b->quote = m[0]; b->bslash = m[1]; b->op = m[2]; b->space = m[3]; b->ctrl = m[4]; b->hi = m[5];
}

__attribute__((target("avx2")))
static inline uint64_t mask32x2(__m256i lo, __m256i hi)
{
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(lo) | (uint64_t)(uint32_t)_mm256_movemask_epi8(hi) << 32;
}

__attribute__((target("avx2")))
static inline void classify_avx2(const uint8_t *p, as_blk *b)
{
    const __m256i q = _mm256_set1_epi8('"'), bs = _mm256_set1_epi8('\\'), sp = _mm256_set1_epi8(' ');
    const __m256i lb = _mm256_set1_epi8('{'), rb = _mm256_set1_epi8('}'), co = _mm256_set1_epi8(':');
    const __m256i cm = _mm256_set1_epi8(','), x20 = _mm256_set1_epi8(0x20);
    __m256i v0 = _mm256_loadu_si256((const __m256i *)p), v1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i f0 = _mm256_or_si256(v0, x20), f1 = _mm256_or_si256(v1, x20);
#define OP(v, f) _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(f, lb), _mm256_cmpeq_epi8(f, rb)), \
                                 _mm256_or_si256(_mm256_cmpeq_epi8(v, co), _mm256_cmpeq_epi8(v, cm)))
    b->quote = mask32x2(_mm256_cmpeq_epi8(v0, q), _mm256_cmpeq_epi8(v1, q));
    b->bslash = mask32x2(_mm256_cmpeq_epi8(v0, bs), _mm256_cmpeq_epi8(v1, bs));
    b->op = mask32x2(OP(v0, f0), OP(v1, f1));
    b->space = mask32x2(_mm256_cmpeq_epi8(v0, sp), _mm256_cmpeq_epi8(v1, sp));
    b->hi = mask32x2(v0, v1);
    b->ctrl = mask32x2(_mm256_cmpgt_epi8(x20, v0), _mm256_cmpgt_epi8(x20, v1)) & ~b->hi;
#undef OP
}

__attribute__((target("avx512f,avx512bw")))
static inline void classify_avx512_v(__m512i v, as_blk *b)
{
    __m512i f = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
    b->quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('"'));
    b->bslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\\'));
    b->op = _mm512_cmpeq_epi8_mask(f, _mm512_set1_epi8('{')) | _mm512_cmpeq_epi8_mask(f, _mm512_set1_epi8('}'))
          | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(':')) | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(','));
    b->space = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(' '));
    b->ctrl = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
    b->hi = _mm512_movepi8_mask(v);
}
__attribute__((target("avx512f,avx512bw")))
static inline void classify_avx512(const uint8_t *p, as_blk *b)
{
    classify_avx512_v(_mm512_loadu_si512((const void *)p), b);
}

// The last n (< 64) bytes of a line: a masked load, the bytes past them
// read as 'a' (a byte of no class) without touching memory.
__attribute__((target("avx512f,avx512bw")))
static inline void classify_avx512_tail(const uint8_t *p, size_t n, as_blk *b)
{
    classify_avx512_v(_mm512_mask_loadu_epi8(_mm512_set1_epi8('a'), (__mmask64)((1ULL << n) - 1), (const void *)p), b);
}

// Carry-less multiplication by all ones: the running XOR of the bits.
__attribute__((target("pclmul,sse2")))
static inline uint64_t prefix_xor_clmul(uint64_t x)
{
    __m128i r = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)x), _mm_set1_epi8((char)0xff), 0);
    return (uint64_t)_mm_cvtsi128_si64(r);
}
#endif

// ---------------------------------------------------------------- UTF-8

// Length of the valid UTF-8 sequence at s[p] (lead byte >= 0x80), or 0.
static inline int utf8len(const uint8_t *s, size_t p, size_t len)
{
    unsigned c = s[p], lo = 0x80, hi = 0xbf;
    int n;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; else if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; else if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (p + (size_t)n > len || s[p + 1] < lo || s[p + 1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if ((s[p + (size_t)k] & 0xc0) != 0x80) return 0;
    return n;
}

// ---------------------------------------------------------------- the index

static int hexd(unsigned c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); }

// The escapes whose backslash is in bs (bit i = s[base + i]): each is
// checked, and the byte after each escaping backslash is marked in the
// returned mask; *carry carries a mark into the next block. Sets *bad on an
// invalid escape.
static inline __attribute__((always_inline)) uint64_t escapes(const uint8_t *s, size_t len, size_t base,
                                                              uint64_t bs, uint64_t *carry, int *bad)
{
    uint64_t esc = *carry;
    *carry = 0;
    while (bs) {
        unsigned i = (unsigned)__builtin_ctzll(bs);
        bs &= bs - 1;
        if (esc >> i & 1) continue;             // an escaped backslash
        size_t p = base + i;
        if (p + 1 >= len) { *bad = 1; break; }
        unsigned e = s[p + 1];
        if (e == 'u') {
            if (p + 6 > len || !hexd(s[p + 2]) || !hexd(s[p + 3]) || !hexd(s[p + 4]) || !hexd(s[p + 5])) {
                *bad = 1;
                break;
            }
        } else if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't')) {
            *bad = 1;
            break;
        }
        if (i == 63) *carry = 1;
        else esc |= 1ULL << (i + 1);
    }
    return esc;
}

#ifdef AS_X86
// The positions of the set bits of bits (bit i: base + i) at w, sixteen
// lanes at a time by compression; returns w past them. Each store writes
// sixteen entries: those past the count lie in ix's slack or are
// overwritten.
__attribute__((target("avx512f")))
static inline uint32_t *positions_avx512(uint32_t *w, size_t base, uint64_t bits)
{
    __m512i at = _mm512_add_epi32(_mm512_set1_epi32((int)base),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (int c = 0; c < 4; c++, bits >>= 16) {
        __mmask16 m = (__mmask16)bits;
        _mm512_storeu_si512((void *)w, _mm512_maskz_compress_epi32(m, at));
        w += __builtin_popcount(m);
        at = _mm512_add_epi32(at, _mm512_set1_epi32(16));
    }
    return w;
}
#endif

typedef void (*classify_fn)(const uint8_t *, as_blk *);
typedef uint64_t (*pxor_fn)(uint64_t);

static inline __attribute__((always_inline)) long build_index(const uint8_t *s, size_t len, uint32_t *ix,
                                                              classify_fn classify, pxor_fn pxor, int avx512)
{
    uint64_t esc_carry = 0, in_carry = 0;
    size_t vpos = 0;    // UTF-8 is valid before here
    uint32_t *w = ix;
    int bad = 0;
    for (size_t base = 0; base < len; base += 64) {
        as_blk b;
        if (len - base >= 64) {
            classify(s + base, &b);
#ifdef AS_X86
        } else if (avx512) {
            classify_avx512_tail(s + base, len - base, &b);
#endif
        } else {
            uint8_t tail[64];
            memset(tail, 'a', sizeof tail);     // a byte of no class
            memcpy(tail, s + base, len - base);
            classify(tail, &b);
        }
        if (b.ctrl) return -1;
        uint64_t esc = b.bslash ? escapes(s, len, base, b.bslash, &esc_carry, &bad) : esc_carry;
        if (!b.bslash) esc_carry = 0;
        if (bad) return -1;
        uint64_t q = b.quote & ~esc;
        uint64_t in = pxor(q) ^ in_carry;       // inside a string: opening quote to before the closing one
        in_carry = (uint64_t)((int64_t)in >> 63);
        if ((b.space | b.bslash | b.hi) & ~in) return -1;
        // UTF-8: each sequence from its lead byte (a non-ASCII byte not
        // taken by the sequence before it)
        for (uint64_t h = b.hi; h;) {
            if (vpos > base) h = vpos - base >= 64 ? 0 : h & ~0ULL << (vpos - base);
            if (!h) break;
            size_t p = base + (size_t)__builtin_ctzll(h);
            int k = utf8len(s, p, len);
            if (!k) return -1;
            vpos = p + (size_t)k;
        }
        uint64_t bits = (b.op & ~in) | q | (b.bslash & ~esc);
#ifdef AS_X86
        if (avx512) {
            if (bits) w = positions_avx512(w, base, bits);
            continue;
        }
#endif
        // Eight entries at a time without a branch per bit (the ones past
        // the count are overwritten later, or lie in ix's slack)
        int cnt = __builtin_popcountll(bits);
        uint32_t *end = w + cnt;
        const uint64_t top = 1ULL << 63;    // no ctz of 0: a spent mask writes garbage, never UB
        if (cnt) {
            do {
                for (int k = 0; k < 8; k++) {
                    w[k] = (uint32_t)(base + (size_t)__builtin_ctzll(bits | top));
                    bits &= bits - 1;
                }
                w += 8;
            } while (bits);
        }
        w = end;
    }
    if (in_carry) return -1;                    // an unterminated string
    *w = (uint32_t)len;
    return w - ix;
}

static long index_scalar(const uint8_t *s, size_t len, uint32_t *ix)
{
    return build_index(s, len, ix, classify_scalar, prefix_xor_scalar, 0);
}
#ifdef AS_X86
__attribute__((target("sse2")))
static long index_sse2(const uint8_t *s, size_t len, uint32_t *ix)
{
    return build_index(s, len, ix, classify_sse2, prefix_xor_scalar, 0);
}
__attribute__((target("avx2,pclmul")))
static long index_avx2(const uint8_t *s, size_t len, uint32_t *ix)
{
    return build_index(s, len, ix, classify_avx2, prefix_xor_clmul, 0);
}
__attribute__((target("avx512f,avx512bw,pclmul")))
static long index_avx512(const uint8_t *s, size_t len, uint32_t *ix)
{
    return build_index(s, len, ix, classify_avx512, prefix_xor_clmul, 1);
}
#endif

// ---------------------------------------------------------------- dispatch

as_index_fn as_simd_index_fn;
int as_simd_level = -1;
static const char *const names[AS_SIMD_LEVELS] = {"scalar", "sse2", "avx2", "avx512"};

const char *as_simd_name(int l) { return l >= 0 && l < AS_SIMD_LEVELS ? names[l] : "?"; }

int as_simd_supported(int l)
{
#ifdef AS_X86
    __builtin_cpu_init();
    switch (l) {
    case AS_SIMD_SCALAR: return 1;
    case AS_SIMD_SSE2: return __builtin_cpu_supports("sse2");
    case AS_SIMD_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul");
    case AS_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
            && __builtin_cpu_supports("pclmul");
    }
    return 0;
#else
    return l == AS_SIMD_SCALAR;
#endif
}

as_index_fn as_simd_index(int l)
{
    switch (l) {
#ifdef AS_X86
    case AS_SIMD_SSE2: return index_sse2;
    case AS_SIMD_AVX2: return index_avx2;
    case AS_SIMD_AVX512: return index_avx512;
#endif
    default: return index_scalar;
    }
}

void as_simd_classify(int l, const uint8_t *p, as_blk *b)
{
    switch (l) {
#ifdef AS_X86
    case AS_SIMD_SSE2: classify_sse2(p, b); return;
    case AS_SIMD_AVX2: classify_avx2(p, b); return;
    case AS_SIMD_AVX512: classify_avx512(p, b); return;
#endif
    default: classify_scalar(p, b); return;
    }
}

int as_simd_pick(void)
{
    if (as_simd_level >= 0) return as_simd_level;
    int l = -1;
    const char *e = getenv("ACPSNAP_SIMD");
    if (e && *e && strcmp(e, "auto")) {
        for (int k = 0; k < AS_SIMD_LEVELS; k++)
            if (!strcmp(e, names[k])) l = k;
        if (l < 0)
            as_die(AS_TROUBLE, "ACPSNAP_SIMD=%s: unknown level (avx512, avx2, sse2, scalar or auto)", e);
        if (!as_simd_supported(l)) as_die(AS_TROUBLE, "ACPSNAP_SIMD=%s: this CPU cannot run it", e);
    } else {
        for (l = AS_SIMD_LEVELS - 1; l > 0 && !as_simd_supported(l); l--) {}
    }
    as_simd_index_fn = as_simd_index(l);
    as_simd_level = l;
    return l;
}
