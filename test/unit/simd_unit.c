// Unit tests of the scanner's two stages (common/simd.c, common/json.c):
//  - every instruction set this CPU runs classifies blocks exactly as the
//    portable C does, and builds the same structural index;
//  - as_json_parse (index, then grammar) agrees with the byte-at-a-time
//    scanner on every text: verdict, message, error offset and every token;
//    so does as_json_parse_shallow, on the root's tokens.
// Texts: built-in cases, every line of the files named as arguments, and
// seeded mutations of all of them at every byte (special bytes swapped in).
// Run under each ACPSNAP_SIMD level by test/simd.bats.
#include "acpsnap.h"
#include "simd.h"
#include "../fuzz/shallow_agree.h"
#include <stdlib.h>
#include <string.h>

static int fails;
static long texts;
#define CHECK(cond, ...) do { if (!(cond)) { if (fails++ < 20) { fprintf(stderr, "simd_unit: %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static const unsigned char special[] = {'"', '\\', '{', '}', '[', ']', ':', ',', ' ', '\t', 0x01, 0x1f,
                                        0x7f, 0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff, 'u', '0', '-', 'e', 'n', 'a'};

static void same_parse(const char *s, size_t n)
{
    static as_json a, b;
    texts++;
    int ra = as_json_parse(&a, s, n), rb = as_json_parse_bytes(&b, s, n);
    const char *why = shallow_differs(s, n, &b, rb);
    CHECK(!why, "shallow parse: %s on %.*s", why, (int)(n > 200 ? 200 : n), s);
    CHECK(ra == rb, "verdicts differ (%d vs %d) on %.*s", ra, rb, (int)(n > 200 ? 200 : n), s);
    if (ra != rb) return;
    if (ra) {
        CHECK(a.err == b.err && a.errpos == b.errpos, "errors differ: %s@%zu vs %s@%zu", a.err, a.errpos, b.err, b.errpos);
        return;
    }
    CHECK(a.n == b.n, "token counts differ (%zu vs %zu) on %.*s", a.n, b.n, (int)(n > 200 ? 200 : n), s);
    if (a.n != b.n) return;
    for (size_t i = 0; i < a.n; i++) {
        const as_tok *x = &a.t[i], *y = &b.t[i];
        CHECK(x->type == y->type && x->esc == y->esc && x->start == y->start && x->end == y->end
              && x->next == y->next && x->count == y->count, "token %zu differs on %.*s", i, (int)(n > 200 ? 200 : n), s);
    }
}

static void same_index(const char *s, size_t n)
{
    static uint32_t *ref, *got;
    static size_t cap;
    if (cap < n + AS_INDEX_SLACK) {
        cap = n + AS_INDEX_SLACK;
        ref = as_xrealloc(ref, cap * sizeof *ref);
        got = as_xrealloc(got, cap * sizeof *got);
    }
    long r = as_simd_index(AS_SIMD_SCALAR)((const uint8_t *)s, n, ref);
    for (int l = AS_SIMD_SSE2; l < AS_SIMD_LEVELS; l++) {
        if (!as_simd_supported(l)) continue;
        long g = as_simd_index(l)((const uint8_t *)s, n, got);
        CHECK(g == r && (r < 0 || !memcmp(ref, got, (size_t)(r + 1) * sizeof *ref)),
              "%s index differs from scalar (%ld vs %ld) on %.*s", as_simd_name(l), g, r, (int)(n > 200 ? 200 : n), s);
    }
}

static void one(const char *s, size_t n)
{
    same_parse(s, n);
    same_index(s, n);
}

// The text, then mutations: each byte in turn replaced by a special byte,
// and a few random multi-byte edits.
static void with_mutations(const char *s, size_t n, int every)
{
    one(s, n);
    char *m = as_xmalloc(n + 1);
    for (size_t i = 0; i < n; i += (size_t)every) {
        memcpy(m, s, n);
        m[i] = (char)special[next() % sizeof special];
        one(m, n);
    }
    for (int k = 0; k < 8 && n; k++) {
        memcpy(m, s, n);
        for (int e = 0; e < 3; e++) m[next() % n] = (char)special[next() % sizeof special];
        one(m, n);
        one(m, next() % n);      // a cut
    }
    free(m);
}

static void blocks(void)
{
    uint8_t p[64];
    for (int r = 0; r < 200000; r++) {
        for (int i = 0; i < 64; i++) p[i] = (next() & 3) ? special[next() % sizeof special] : (uint8_t)next();
        as_blk ref, got;
        as_simd_classify(AS_SIMD_SCALAR, p, &ref);
        for (int l = AS_SIMD_SSE2; l < AS_SIMD_LEVELS; l++) {
            if (!as_simd_supported(l)) continue;
            as_simd_classify(l, p, &got);
            CHECK(!memcmp(&ref, &got, sizeof ref), "%s classifies a block differently", as_simd_name(l));
        }
    }
}

static const char *const cases[] = {
    "{}", "[]", "{\"a\":1}", "[1,2,3]", "\"x\"", "0", "-0", "1.5e+3", "true", "false", "null",
    "{\"a\":{\"b\":[{},[],\"\"]},\"c\":\"d\"}", "[[[[[[]]]]]]", "{\"\":\"\"}",
    "\"\\\\\"", "\"\\\\\\\"\"", "\"a\\\"b\"", "\"\\u00e9\\ud83d\\ude42\"", "\"\\/\\b\\f\\n\\r\\t\"",
    "\"é中🙂\"", "{\"k\\\"ey\":\"v\\\\\"}", "[\"\\\\\",\"\\\\\\\\\"]",
    // each is invalid somewhere
    "{", "}", "[1,]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1 2]", "\"abc", "\"a\\x\"", "\"\\u12\"",
    "\"\\u12g4\"", "01", "1.", "-", "+1", "NaN", "tru", "nul", "[true false]", "{\"a\":1}x", "{a:1}",
    "\"\x01\"", "\"\xc3\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "[1]\x80",
    "\\", "[\\]", "{\"a\":1\\}", " {\"a\":1} ", "{ \"a\" : 1 }", "[1,\t2]", "{\"a\":[1,2}", "[\"a\":1]",
    "{\"a\":1]", "[{]}", "\"\\", "\"\\u", "{\"a\"::1}", "[,1]", "{,}", "1 2", "[-]", "[1e]", "[0x1]",
};

// Texts that cross 64-byte blocks at every offset: escapes, quotes and
// multi-byte sequences straddling a boundary.
static void boundaries(void)
{
    static const char *const mids[] = {"\\\\", "\\\"", "\\u00e9", "é", "中", "🙂", "\\n", "\\\\\\\"", "\"", "\\"};
    char buf[512];
    for (size_t m = 0; m < sizeof mids / sizeof *mids; m++)
        for (int pad = 0; pad < 140; pad++) {
            int n = snprintf(buf, sizeof buf, "{\"k\":\"%*s%s tail\",\"n\":[1,2]}", pad, "", mids[m]);
            with_mutations(buf, (size_t)n, 7);
            n = snprintf(buf, sizeof buf, "[%.*s\"%s\"]", pad, "1111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111", mids[m]);
            one(buf, (size_t)n);
        }
}

// Long arrays of scalars, so that the token array grows (is moved) at
// every kind of token: under ASan a write through a stale pointer shows.
static void growth(void)
{
    static const char *const els[] = {"7", "-12", "0", "1.5", "true", "null", "\"s\"", "{}", "[]", "{\"a\":1}"};
    as_buf b = {0};
    for (size_t e = 0; e < sizeof els / sizeof *els; e++)
        for (int n = 1; n < 300; n += 1 + n / 16) {
            as_buf_reset(&b);
            as_buf_putc(&b, '[');
            for (int i = 0; i < n; i++) {
                if (i) as_buf_putc(&b, ',');
                as_buf_puts(&b, els[e]);
            }
            as_buf_puts(&b, "]");
            one(b.p, b.n);
        }
    as_buf_free(&b);
}

static void file(const char *path)
{
    as_in *in = as_in_open(path);
    const char *line;
    size_t len;
    while (as_in_line(in, &line, &len)) with_mutations(line, len, len > 2000 ? 97 : 3);
    as_in_close(in);
}

int main(int argc, char **argv)
{
    as_setprog("simd_unit");
    int level = as_simd();
    blocks();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) with_mutations(cases[i], strlen(cases[i]), 1);
    boundaries();
    growth();
    // deep nesting, at and past the limit
    {
        size_t d = 10001;
        char *s = as_xmalloc(2 * d + 1);
        memset(s, '[', d);
        memset(s + d, ']', d);
        one(s, 2 * d);
        one(s + 1, 2 * d - 2);
        free(s);
    }
    for (int i = 1; i < argc; i++) file(argv[i]);
    if (fails) { fprintf(stderr, "simd_unit: %d failures\n", fails); return 1; }
    printf("simd_unit: ok (%s; %ld texts; levels compared:", as_simd_name(level), texts);
    for (int l = 0; l < AS_SIMD_LEVELS; l++)
        if (as_simd_supported(l)) printf(" %s", as_simd_name(l));
    printf(")\n");
    return 0;
}
