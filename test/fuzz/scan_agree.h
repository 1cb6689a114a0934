// scan_agree.h - a check shared by the fuzz targets that feed the JSON
// scanner: the two-stage parse agrees with the byte-at-a-time scanner
// (verdict, error, every token), so does the shallow parse (shallow_agree.h),
// and every instruction set this CPU runs builds the same structural index
// as the portable C. Aborts otherwise.
#ifndef SCAN_AGREE_H
#define SCAN_AGREE_H
#include "acpsnap.h"
#include "simd.h"
#include "shallow_agree.h"
#include <stdlib.h>
#include <string.h>

static void scan_agree(const char *s, size_t n)
{
    static as_json a, b;
    static uint32_t *ref, *got;
    static size_t cap;
    int ra = as_json_parse(&a, s, n), rb = as_json_parse_bytes(&b, s, n);
    if (ra != rb) abort();
    if (ra && (a.err != b.err || a.errpos != b.errpos)) abort();
    if (!ra && a.n != b.n) abort();
    for (size_t i = 0; !ra && i < a.n; i++) {
        const as_tok *x = &a.t[i], *y = &b.t[i];
        if (x->type != y->type || x->esc != y->esc || x->start != y->start || x->end != y->end
            || x->next != y->next || x->count != y->count) abort();
    }
    if (shallow_differs(s, n, &b, rb)) abort();
    if (cap < n + AS_INDEX_SLACK) {
        cap = n + AS_INDEX_SLACK;
        ref = realloc(ref, cap * sizeof *ref);
        got = realloc(got, cap * sizeof *got);
    }
    long r = as_simd_index(AS_SIMD_SCALAR)((const uint8_t *)s, n, ref);
    for (int l = AS_SIMD_SSE2; l < AS_SIMD_LEVELS; l++) {
        if (!as_simd_supported(l)) continue;
        long g = as_simd_index(l)((const uint8_t *)s, n, got);
        if (g != r || (r >= 0 && memcmp(ref, got, (size_t)(r + 1) * sizeof *ref))) abort();
    }
}

// The tokens t hold for s[0, n) are those a fresh byte-at-a-time scan makes
// (events the decoder synthesizes: row members, restored envelopes).
static void tokens_agree(const as_json *t, const char *s, size_t n)
{
    static as_json b;
    if (t->s != s || t->len != n || as_json_parse_bytes(&b, s, n) || t->n != b.n) abort();
    for (size_t i = 0; i < b.n; i++) {
        const as_tok *x = &t->t[i], *y = &b.t[i];
        if (x->type != y->type || x->esc != y->esc || x->start != y->start || x->end != y->end
            || x->next != y->next || x->count != y->count) abort();
    }
}

// scan_agree on each line of data[0, size).
static void scan_agree_lines(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *e = p + size;
    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
        scan_agree(p, n);
        p += n + 1;
    }
}
#endif
