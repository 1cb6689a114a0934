// json.c - a strict RFC 8259 scanner. It validates one JSON text and records
// byte-span tokens so tools can copy unchanged bytes through and splice only
// what they change. No recursion: an open container's `next` field holds its
// parent's index until the container closes.
#include "acpsnap.h"
#include "simd.h"
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define DEFAULT_MAXDEPTH 10000
// Lines up to this size go through the structural index (4 bytes of index
// per byte at worst); longer ones, rare, take the byte-at-a-time path.
#define INDEX_MAX (1u << 20)

// 1 for bytes that may stand in a string body without further checks.
static const unsigned char plain[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0),                                   // 0x00-0x1f: control
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,   // 0x20-0x2f ('"' = 0x22)
    R16(1), R16(1),                                   // 0x30-0x4f
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,   // 0x50-0x5f ('\\' = 0x5c)
    R16(1), R16(1),                                   // 0x60-0x7f
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0),
#undef R16
};

static int sse2_ok = 1;   // 0 when ACPSNAP_SIMD=scalar: no vector code at all

static int fail(as_json *j, size_t pos, const char *msg)
{
    j->err = msg;
    j->errpos = pos;
    return -1;
}

static inline uint32_t push(as_json *j, int type, size_t start)
{
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->t = as_xrealloc(j->t, j->cap * sizeof *j->t);
    }
    as_tok *t = &j->t[j->n];
    t->type = (uint8_t)type;
    t->esc = 0;
    t->start = (uint32_t)start;
    t->end = (uint32_t)start;
    t->next = (uint32_t)j->n + 1;
    t->count = 0;
    return (uint32_t)j->n++;
}

// Opens the container whose bracket is s[p] inside container cur (-1: the
// root) and makes it the current one: its `next` holds the parent's index
// until it closes, +1 so that -1 fits.
static inline uint32_t open_container(as_json *j, char bracket, size_t p, long *cur)
{
    uint32_t i = push(j, bracket == '{' ? AS_JOBJ : AS_JARR, p);
    j->t[i].next = (uint32_t)(*cur + 1);
    *cur = i;
    return i;
}

// Closes container cur at its bracket s[p]; returns its parent.
static inline long close_container(as_json *j, long cur, size_t p)
{
    as_tok *t = &j->t[cur];
    t->end = (uint32_t)(p + 1);
    long parent = (long)t->next - 1;
    t->next = (uint32_t)j->n;
    return parent;
}

// The literal or number starting at s[p], as token; 0 and *endp, or -1.
static int number(as_json *j, size_t p, size_t *endp);
static int literal(as_json *j, size_t p, const char *word, size_t *endp);
static inline int scalar_token(as_json *j, size_t p, size_t *endp)
{
    char c = j->s[p];
    if (c == 't' || c == 'f' || c == 'n') {
        uint32_t i = push(j, c == 't' ? AS_JTRUE : c == 'f' ? AS_JFALSE : AS_JNULL, p);
        if (literal(j, p, c == 't' ? "true" : c == 'f' ? "false" : "null", endp)) return -1;
        j->t[i].end = (uint32_t)*endp;
        return 0;
    }
    uint32_t i = push(j, AS_JNUM, p);
    if (number(j, p, endp)) return -1;
    j->t[i].end = (uint32_t)*endp;
    return 0;
}

static inline size_t ws(const char *s, size_t p, size_t len)
{
    if (p < len && (unsigned char)s[p] > ' ') return p;   // compact JSON: the usual case
    while (p < len && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) p++;
    return p;
}

static int hex(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); }

// Length of the valid UTF-8 sequence at s[p] (lead byte >= 0x80), or 0.
static inline int utf8len(const unsigned char *s, size_t p, size_t len)
{
    unsigned c = s[p];
    int n;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; else if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; else if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (p + (size_t)n > len) return 0;
    if (s[p + 1] < lo || s[p + 1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if ((s[p + (size_t)k] & 0xc0) != 0x80) return 0;
    return n;
}

// Scans the string starting at the quote s[p] of s[0, len): returns 0 with
// *pp just past the closing quote, or -1 with *pp at the fault and *why its
// message. *esc becomes 1 at a backslash escape. sse: the 16-byte skip may
// run (0 at ACPSNAP_SIMD=scalar).
static inline __attribute__((always_inline)) int str_scan(const unsigned char *s, size_t len, size_t *pp,
                                                          int *esc, const char **why, int sse)
{
    size_t p = *pp, open = p;
    p++;
    for (;;) {
#ifdef __SSE2__
        // Sixteen bytes at a time: stop at '"', '\\', a control byte or a
        // non-ASCII byte (the signed compare catches both of the latter).
        if (sse) {
            const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
            while (p + 16 <= len) {
                __m128i v = _mm_loadu_si128((const __m128i *)(s + p));
                __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)),
                                         _mm_cmplt_epi8(v, sp));
                unsigned mask = (unsigned)_mm_movemask_epi8(m);
                if (mask) { p += (size_t)__builtin_ctz(mask); goto special; }
                p += 16;
            }
        }
#endif
        while (p < len && plain[s[p]]) p++;
        if (p >= len) { *pp = open; *why = "unterminated string"; return -1; }
#ifdef __SSE2__
    special:;
#endif
        unsigned c = s[p];
        if (c == '"') { *pp = p + 1; return 0; }
        if (c == '\\') {
            *esc = 1;
            if (p + 1 >= len) { *pp = open; *why = "unterminated string"; return -1; }
            unsigned e = s[p + 1];
            if (e == 'u') {
                if (p + 6 > len || !hex(s[p + 2]) || !hex(s[p + 3]) || !hex(s[p + 4]) || !hex(s[p + 5])) {
                    *pp = p; *why = "invalid \\u escape"; return -1;
                }
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                *pp = p; *why = "invalid escape"; return -1;
            }
            continue;
        }
        if (c < 0x20) { *pp = p; *why = "raw control character in string"; return -1; }
        int n = utf8len(s, p, len);
        if (!n) { *pp = p; *why = "invalid UTF-8"; return -1; }
        p += (size_t)n;
    }
}

// Scans the string starting at the quote s[p]; returns 0 and sets *endp
// just past the closing quote, or -1.
static inline __attribute__((always_inline)) int string(as_json *j, size_t p, size_t *endp, int *esc)
{
    const char *why;
    if (str_scan((const unsigned char *)j->s, j->len, &p, esc, &why, sse2_ok)) return fail(j, p, why);
    *endp = p;
    return 0;
}

size_t as_jstr_end(const char *s, size_t len, size_t p, int *esc)
{
    const char *why;
    if (p >= len || s[p] != '"') return 0;
    return str_scan((const unsigned char *)s, len, &p, esc, &why, as_simd() != AS_SIMD_SCALAR) ? 0 : p;
}

// Records the string token whose quote is s[p]; returns 0 and sets *endp
// just past its closing quote, or -1.
static inline __attribute__((always_inline)) int string_token(as_json *j, size_t p, size_t *endp)
{
    uint32_t i = push(j, AS_JSTR, p);
    int esc = 0;
    if (string(j, p, endp, &esc)) return -1;
    j->t[i].end = (uint32_t)*endp;
    j->t[i].esc = (uint8_t)esc;
    return 0;
}

static int number(as_json *j, size_t p, size_t *endp)
{
    const char *s = j->s;
    size_t len = j->len, st = p;
    if (s[p] == '-') {
        p++;
        if (p < len && (s[p] == 'I' || s[p] == 'N')) return fail(j, st, "NaN and Infinity are not valid JSON");
    }
    if (p >= len || s[p] < '0' || s[p] > '9') return fail(j, st, "invalid number");
    if (s[p] == '0') {
        p++;
        if (p < len && s[p] >= '0' && s[p] <= '9') return fail(j, st, "leading zeros are not allowed");
    } else {
        while (p < len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < len && s[p] == '.') {
        p++;
        if (p >= len || s[p] < '0' || s[p] > '9') return fail(j, p, "invalid number");
        while (p < len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < len && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= len || s[p] < '0' || s[p] > '9') return fail(j, p, "invalid number");
        while (p < len && s[p] >= '0' && s[p] <= '9') p++;
    }
    *endp = p;
    return 0;
}

static int literal(as_json *j, size_t p, const char *word, size_t *endp)
{
    size_t n = strlen(word);
    if (p + n > j->len || memcmp(j->s + p, word, n)) return fail(j, p, "expected a value");
    *endp = p + n;
    return 0;
}

// The byte-at-a-time scanner: the reference for what is valid JSON, and the
// one that names and places every error.
static int parse_bytes(as_json *j, const char *s, size_t len)
{
    if (len > UINT32_MAX - 1) return fail(j, 0, "line too long");
    int maxdepth = j->maxdepth > 0 ? j->maxdepth : DEFAULT_MAXDEPTH;
    int depth = 0;
    long cur = -1;          // innermost open container
    size_t p = ws(s, 0, len);

value:
    if (p >= len) return fail(j, p, "unexpected end of input");
    if (cur >= 0) j->t[cur].count += j->t[cur].type == AS_JARR;
    switch (s[p]) {
    case '{':
    case '[': {
        if (++depth > maxdepth) return fail(j, p, "nesting too deep");
        uint32_t i = open_container(j, s[p], p, &cur);
        p = ws(s, p + 1, len);
        if (p < len && s[p] == (j->t[i].type == AS_JOBJ ? '}' : ']')) goto close;
        if (j->t[i].type == AS_JOBJ) goto key;
        goto value;
    }
    case '"':
        if (string_token(j, p, &p)) return -1;
        break;
    case 't': case 'f': case 'n':
        if (scalar_token(j, p, &p)) return -1;
        break;
    case 'N': case 'I':
        return fail(j, p, "NaN and Infinity are not valid JSON");
    case '+':
        return fail(j, p, "'+' is not allowed before a number");
    default:
        if (s[p] == '-' || (s[p] >= '0' && s[p] <= '9')) {
            if (scalar_token(j, p, &p)) return -1;
            break;
        }
        return fail(j, p, "expected a value");
    }

after:
    p = ws(s, p, len);
    if (cur < 0) {
        if (p != len) return fail(j, p, "trailing characters after the value");
        return 0;
    }
    if (p >= len) return fail(j, p, "unexpected end of input");
    if (j->t[cur].type == AS_JOBJ) {
        if (s[p] == '}') goto close;
        if (s[p] != ',') return fail(j, p, "expected ',' or '}'");
        p = ws(s, p + 1, len);
        goto key;
    }
    if (s[p] == ']') goto close;
    if (s[p] != ',') return fail(j, p, "expected ',' or ']'");
    p = ws(s, p + 1, len);
    goto value;

key:
    if (p >= len) return fail(j, p, "unexpected end of input");
    if (s[p] != '"') return fail(j, p, "expected a string key");
    {
        size_t e;
        if (string_token(j, p, &e)) return -1;
        j->t[cur].count++;
        p = ws(s, e, len);
        if (p >= len) return fail(j, p, "unexpected end of input");
        if (s[p] != ':') return fail(j, p, "expected ':'");
        p = ws(s, p + 1, len);
        if (p >= len) return fail(j, p, "unexpected end of input");
        // the member's value is not counted again for objects
        goto value;
    }

close:
    cur = close_container(j, cur, p);
    depth--;
    p++;
    goto after;
}

// The string token i opening at the quote ix[*k] (a line's structural index,
// simd.h): past its escapes to its closing quote; returns the byte after it.
static inline size_t indexed_string(as_json *j, uint32_t i, const uint32_t *ix, size_t *k)
{
    const char *s = j->s;
    size_t q = *k + 1;
    if (s[ix[q]] == '\\') {
        j->t[i].esc = 1;
        do q++; while (s[ix[q]] == '\\');
    }
    *k = q + 1;
    j->t[i].end = ix[q] + 1;
    return ix[q] + 1;
}

// 1 when s[p, e) is an integer in JSON's spelling, -?(0|[1-9][0-9]*): a
// number that ends at the next structural byte e needs no more checks.
static inline int plain_int(const char *s, size_t p, size_t e)
{
    p += s[p] == '-';
    if (p >= e) return 0;
    if (s[p] == '0') return p + 1 == e;
    for (; p < e; p++)
        if ((unsigned)(s[p] - '0') > 9) return 0;
    return 1;
}

// The string opening at the quote ix[*k], without a token: past its escapes
// to its closing quote; returns the byte after it.
static inline size_t skipped_string(const char *s, const uint32_t *ix, size_t *k)
{
    size_t q = *k + 1;
    while (s[ix[q]] == '\\') q++;
    *k = q + 1;
    return ix[q] + 1;
}

// The container opening at s[*pp] (= s[ix[*kp]]), depth levels below the
// root's, validated over the index as parse_indexed would, without tokens:
// 0 with *pp and *kp just past its closing bracket and its member or
// element count in *count; -1 hands the line to parse_bytes. A bit per
// open level says object (1) or array.
static int skip_indexed(as_json *j, const uint32_t *ix, size_t *pp, size_t *kp, int depth, int maxdepth,
                        uint32_t *count)
{
    const char *s = j->s;
    size_t len = j->len, p = *pp, k = *kp;
    uint64_t obj[DEFAULT_MAXDEPTH / 64 + 1];
    int d = 0;                  // levels open within the container
    uint32_t n = 0;

#define IN_OBJ (obj[(d - 1) >> 6] >> ((d - 1) & 63) & 1)
open:           // s[p] is the bracket at ix[k]
    if (depth + d + 1 > maxdepth || d + 1 > DEFAULT_MAXDEPTH) return -1;
    if (s[p] == '{') obj[d >> 6] |= 1ULL << (d & 63);
    else obj[d >> 6] &= ~(1ULL << (d & 63));
    d++;
    k++;
    p++;
    if (p < len && s[p] == (IN_OBJ ? '}' : ']')) goto close;
    if (IN_OBJ) goto key;

value:
    if (p >= len) return -1;
    n += d == 1 && !IN_OBJ;     // an element (a member counts at its key)
    switch (s[p]) {
    case '{':
    case '[':
        goto open;
    case '"':
        p = skipped_string(s, ix, &k);
        goto after;
    case 't': case 'f': case 'n':
        if (literal(j, p, s[p] == 't' ? "true" : s[p] == 'f' ? "false" : "null", &p) || p != ix[k]) return -1;
        goto after;
    case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        if (plain_int(s, p, ix[k])) p = ix[k];
        else if (number(j, p, &p) || p != ix[k]) return -1;
        goto after;
    default:
        return -1;
    }

key:
    if (p >= len || s[p] != '"') return -1;
    n += d == 1;
    p = skipped_string(s, ix, &k);
    if (p >= len || s[p] != ':' || ix[k] != p) return -1;
    k++;
    p++;
    goto value;

after:
    if (p >= len || ix[k] != p) return -1;
    if (IN_OBJ) {
        if (s[p] == '}') goto close;
        if (s[p] != ',') return -1;
        k++;
        p++;
        goto key;
    }
    if (s[p] == ']') goto close;
    if (s[p] != ',') return -1;
    k++;
    p++;
    goto value;

close:          // s[p] is the bracket at ix[k]
    k++;
    p++;
    if (--d > 0) goto after;
#undef IN_OBJ
    *pp = p;
    *kp = k;
    *count = n;
    return 0;
}

// Stage 2 over the structural index ix[0, m] (simd.h): the grammar of
// parse_bytes with every string span, escape flag and separator read off the
// index instead of the bytes. Stage 1 admitted only compact text with valid
// strings, so there is no whitespace to skip and no string byte to check.
// Returns 0 with the same tokens parse_bytes makes, or -1 to hand the line
// to parse_bytes (never a verdict of its own). Shallow: a container below
// the root is validated by skip_indexed and stands as one token.
static inline __attribute__((always_inline)) int parse_indexed(as_json *j, const uint32_t *ix, int shallow)
{
    const char *s = j->s;
    size_t len = j->len, p = 0, k = 0;    // ix[k]: the first entry at or after p
    int maxdepth = j->maxdepth > 0 ? j->maxdepth : DEFAULT_MAXDEPTH, depth = 0;
    long cur = -1;
    uint32_t i;

value:
    if (p >= len) return -1;
    if (cur >= 0) j->t[cur].count += j->t[cur].type == AS_JARR;
    switch (s[p]) {
    case '{':
    case '[':
        if (shallow && depth == 1) {
            uint32_t count;
            i = push(j, s[p] == '{' ? AS_JOBJ : AS_JARR, p);
            if (skip_indexed(j, ix, &p, &k, depth, maxdepth, &count)) return -1;
            j->t[i].end = (uint32_t)p;
            j->t[i].count = count;
            goto after;
        }
        if (++depth > maxdepth) return -1;
        i = open_container(j, s[p], p, &cur);
        k++;
        p++;
        if (p < len && s[p] == (j->t[i].type == AS_JOBJ ? '}' : ']')) goto close;
        if (j->t[i].type == AS_JOBJ) goto key;
        goto value;
    case '"':
        p = indexed_string(j, push(j, AS_JSTR, p), ix, &k);
        goto after;
    case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        if (plain_int(s, p, ix[k])) {
            i = push(j, AS_JNUM, p);    // (apart: push may move j->t)
            j->t[i].end = ix[k];
            p = ix[k];
            goto after;
        }
        // fall through
    case 't': case 'f': case 'n':
        // a scalar ends where the next structural byte is
        if (scalar_token(j, p, &p) || p != ix[k]) return -1;
        goto after;
    default:
        return -1;
    }

key:
    if (p >= len || s[p] != '"') return -1;
    j->t[cur].count++;
    p = indexed_string(j, push(j, AS_JSTR, p), ix, &k);
    if (p >= len || s[p] != ':' || ix[k] != p) return -1;
    k++;
    p++;
    goto value;

after:
    if (cur < 0) return p == len ? 0 : -1;
    if (p >= len || ix[k] != p) return -1;
    if (j->t[cur].type == AS_JOBJ) {
        if (s[p] == '}') goto close;
        if (s[p] != ',') return -1;
        k++;
        p++;
        goto key;
    }
    if (s[p] == ']') goto close;
    if (s[p] != ',') return -1;
    k++;
    p++;
    goto value;

close:          // s[p] is the bracket at ix[k]
    k++;
    cur = close_container(j, cur, p);
    depth--;
    p++;
    goto after;
}

static int parse_full(as_json *j, const uint32_t *ix) { return parse_indexed(j, ix, 0); }
static int parse_shallow(as_json *j, const uint32_t *ix) { return parse_indexed(j, ix, 1); }

static int parse(as_json *j, const char *s, size_t len, int (*indexed)(as_json *, const uint32_t *))
{
    j->s = s;
    j->len = len;
    j->n = 0;
    j->err = NULL;
    j->compact = 0;
    if (len > UINT32_MAX - 1) return fail(j, 0, "line too long");
    int level = as_simd();
    sse2_ok = level != AS_SIMD_SCALAR;
    if (level != AS_SIMD_SCALAR && len && len <= INDEX_MAX) {
        if (j->ixcap < len + AS_INDEX_SLACK) {
            size_t cap = j->ixcap ? 2 * j->ixcap : 4096;
            j->ixcap = cap > len + AS_INDEX_SLACK ? cap : len + AS_INDEX_SLACK;
            free(j->ix);
            j->ix = as_xmalloc(j->ixcap * sizeof *j->ix);
        }
        if (as_json_index((const uint8_t *)s, len, j->ix) >= 0 && !indexed(j, j->ix)) {
            j->compact = 1;
            return 0;
        }
        j->n = 0;
        j->err = NULL;
    }
    return parse_bytes(j, s, len);
}

int as_json_parse(as_json *j, const char *s, size_t len) { return parse(j, s, len, parse_full); }
int as_json_parse_shallow(as_json *j, const char *s, size_t len) { return parse(j, s, len, parse_shallow); }

int as_json_parse_bytes(as_json *j, const char *s, size_t len)
{
    j->s = s;
    j->len = len;
    j->n = 0;
    j->err = NULL;
    j->compact = 0;
    sse2_ok = as_simd() != AS_SIMD_SCALAR;
    return parse_bytes(j, s, len);
}

void as_json_free(as_json *j)
{
    free(j->t);
    free(j->ix);
    j->t = NULL;
    j->ix = NULL;
    j->ixcap = 0;
    j->n = j->cap = 0;
}

void as_json_die(const as_json *j, const char *file, long line)
{
    as_die_at(file, line, as_json_errcol(j), "invalid JSON: %s", j->err);
}

int as_json_firstkey(const as_json *j, int obj)
{
    if (obj < 0 || j->t[obj].type != AS_JOBJ || j->t[obj].count == 0) return -1;
    return obj + 1;
}

int as_json_nextkey(const as_json *j, int key)
{
    uint32_t nx = j->t[key + 1].next;
    // The next key exists when nx is still inside the parent; callers walk from
    // firstkey, so the parent's end is found by position.
    if (nx >= j->n || j->t[nx].start >= j->len) return -1;
    // A key is always a string immediately following a value at the same level:
    // check the byte before it (after whitespace) is a comma.
    const char *s = j->s;
    size_t q = j->t[key + 1].end;
    while (q < j->len && (s[q] == ' ' || s[q] == '\t' || s[q] == '\n' || s[q] == '\r')) q++;
    return (q < j->len && s[q] == ',') ? (int)nx : -1;
}

int as_json_first(const as_json *j, int arr)
{
    if (arr < 0 || j->t[arr].type != AS_JARR || j->t[arr].count == 0) return -1;
    return arr + 1;
}

int as_json_nextel(const as_json *j, int el)
{
    uint32_t nx = j->t[el].next;
    const char *s = j->s;
    size_t q = j->t[el].end;
    while (q < j->len && (s[q] == ' ' || s[q] == '\t' || s[q] == '\n' || s[q] == '\r')) q++;
    return (q < j->len && s[q] == ',' && nx < j->n) ? (int)nx : -1;
}

int as_json_get(const as_json *j, int obj, const char *key)
{
    size_t n = strlen(key);
    for (int k = as_json_firstkey(j, obj); k >= 0; k = as_json_nextkey(j, k)) {
        const as_tok *t = &j->t[k];
        if (!t->esc) {
            if (t->end - t->start - 2 == n && j->s[t->start + 1] == key[0]
                && !memcmp(j->s + t->start + 1, key, n))
                return k + 1;
        } else if (as_json_streq(j, k, key)) {
            return k + 1;
        }
    }
    return -1;
}

// a[0, n) == b[0, n) for short keys: two overlapping word compares for 4 to
// 8 bytes, bytes below, memcmp above.
static inline int short_eq(const char *a, const char *b, size_t n)
{
    if (n >= 4 && n <= 8) {
        uint32_t x, y, u, v;
        memcpy(&x, a, 4); memcpy(&y, b, 4);
        memcpy(&u, a + n - 4, 4); memcpy(&v, b + n - 4, 4);
        return x == y && u == v;
    }
    if (n > 8) return !memcmp(a, b, n);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

// 1 when key token k spells keys[i].
static inline int key_is(const as_json *j, const as_tok *t, int k, const as_key *key)
{
    if (t->esc) return as_json_streq(j, k, key->s);
    size_t len = t->end - t->start - 2;
    const char *ks = j->s + t->start + 1;
    return len == key->n && ks[0] == key->s[0] && short_eq(ks, key->s, len);
}

int as_json_key_is(const as_json *j, int k, const as_key *key) { return key_is(j, &j->t[k], k, key); }

int as_json_pick(const as_json *j, int obj, const as_key *keys, int n, int *idx)
{
    if (obj < 0 || j->t[obj].type != AS_JOBJ) return -1;
    for (int i = 0; i < n; i++) idx[i] = -1;
    uint32_t count = j->t[obj].count;
    int k = obj + 1, hint = 0;
    // Members are key, value pairs: the next key follows the value's subtree.
    // Objects mostly list their keys in the order asked for, so the key after
    // the last one found is tried first.
    for (uint32_t m = 0; m < count; m++, k = (int)j->t[k + 1].next) {
        const as_tok *t = &j->t[k];
        if (hint < n && key_is(j, t, k, &keys[hint])) {
            if (idx[hint] < 0) idx[hint] = k + 1;
            hint++;
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (i != hint && key_is(j, t, k, &keys[i])) {
                if (idx[i] < 0) idx[i] = k + 1;
                hint = i + 1;
                break;
            }
        }
    }
    return (int)count;
}

int as_json_exact(const as_json *j, int obj, const as_key *keys, int n, int *idx)
{
    int own[16];
    if (!idx) {
        if (n > 16) as_die(AS_TROUBLE, "internal error: as_json_exact over %d keys", n);
        idx = own;
    }
    if (as_json_pick(j, obj, keys, n, idx) != n) return 0;
    for (int i = 0; i < n; i++)
        if (idx[i] < 0) return 0;
    return 1;
}

void as_json_compact(const char *s, size_t n, as_buf *out)
{
    as_buf_grow(out, n);
    int instr = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (instr) {
            out->p[out->n++] = c;
            if (c == '\\' && i + 1 < n) out->p[out->n++] = s[++i];
            else if (c == '"') instr = 0;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else {
            out->p[out->n++] = c;
            if (c == '"') instr = 1;
        }
    }
    out->p[out->n] = 0;
}

int as_json_streq(const as_json *j, int tok, const char *lit)
{
    const as_tok *t = &j->t[tok];
    if (t->type != AS_JSTR) return 0;
    size_t n = strlen(lit);
    if (!t->esc)
        return t->end - t->start - 2 == n && !memcmp(j->s + t->start + 1, lit, n);
    as_buf b = {0};
    as_json_str(j, tok, &b);
    int eq = b.n == n && !memcmp(b.p, lit, n);
    as_buf_free(&b);
    return eq;
}

int as_json_int(const as_json *j, int tok, int64_t *out)
{
    const as_tok *t = &j->t[tok];
    if (t->type != AS_JNUM) return 0;
    const char *s = j->s + t->start;
    size_t n = t->end - t->start, i = 0;
    int neg = 0;
    if (s[0] == '-') { neg = 1; i = 1; }
    if (n - i > 16) return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 9007199254740991LL) return 0;
    *out = neg ? -v : v;
    return 1;
}
