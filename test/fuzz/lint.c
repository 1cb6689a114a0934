// Fuzz target: the secret and volatile lint (common/lint.c): the line
// scanner, whose hits must lie inside the line, be non-empty and come in
// column order, under every flag, and be the same whether its triggers are
// found a block at a time (AVX-512, where the CPU runs it) or byte by byte;
// and the allow-list parser, whose answer to a malformed entry is to die
// (longjmp out of the die hook here), then matching against what the
// scanner found.
#include "acpsnap.h"
#include "lint.h"
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf back;
static void hook(int code) { longjmp(back, 1); }

typedef struct { size_t n, end; as_buf hits; } seen;

static void on_hit(void *ctx, const as_lint_hit *h)
{
    seen *s = ctx;
    if (h->len == 0 || h->off + h->len > s->n || h->off < s->end || h->pre > h->len || h->kind < 0 || h->kind >= AS_LK_N
        || !h->what)
        abort();
    s->end = h->off + h->len;
    as_lint_hit c;
    memset(&c, 0, sizeof c);   // (no padding bytes in the comparison)
    c.kind = h->kind, c.off = h->off, c.len = h->len, c.pre = h->pre, c.what = h->what;
    as_buf_put(&s->hits, (const char *)&c, sizeof c);
}

static as_allow *allow;
static const char *line;
static void match_hit(void *ctx, const as_lint_hit *h)
{
    as_allow_match(allow, "text-turn/stdout.expected.jsonl", 3, h->kind, line + h->off, h->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    const char *s = (const char *)d;
    for (unsigned fl = 0; fl < 4; fl++) {
        seen a = { n, 0, {0} }, b = { n, 0, {0} };
        as_lint_line(s, n, fl, on_hit, &a);
        as_lint_simd(0);
        as_lint_line(s, n, fl, on_hit, &b);
        as_lint_simd(1);
        if (a.hits.n != b.hits.n || memcmp(a.hits.p, b.hits.p, a.hits.n)) abort();
        as_buf_free(&a.hits);
        as_buf_free(&b.hits);
    }
    if (memchr(d, 0, n)) return 0;
    as_die_hook = hook;
    if (setjmp(back)) { as_die_hook = NULL; allow = NULL; return 0; }   // malformed: rejected, fine
    allow = as_allow_parse(".acpsnap-allow", s, n);
    as_die_hook = NULL;
    line = s;
    as_lint_line(s, n, 0, match_hit, NULL);
    as_allow_free(allow);
    allow = NULL;
    return 0;
}
