// Fuzz target: the JSON-aware line diff. The input is two JSONL texts
// separated by a NUL byte; inputs with a line that is not JSON are skipped.
// A text compared with itself has no difference, two texts have one exactly
// when their lines differ, and every report line is well formed.
#include "jdiff.h"
#include <stdlib.h>
#include <string.h>

static void hook(int code) { abort(); }   // the differ never dies on valid input

static void check(void *ctx, const char *line, size_t n)
{
    if (n == 0 || memchr(line, '\n', n) || memchr(line, 0, n)) abort();
    ++*(long *)ctx;
}

// The lines of s[0, n) into f: 0, or -1 when one is not JSON.
static int split(as_jlines *f, as_json *j, const char *s, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t len = nl ? (size_t)(nl - s) : n;
        if (as_jlines_add(f, j, s, len)) return -1;
        s += len + (nl != NULL);
        n -= len + (nl != NULL);
    }
    return 0;
}

static int same(const as_jlines *a, const as_jlines *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->text.p + a->off[i], b->text.p + b->off[i], a->len[i])) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static as_json j;
    as_die_hook = hook;
    const char *s = (const char *)data, *nul = memchr(s, 0, size);
    if (!nul) return 0;
    as_jlines a = {0}, b = {0};
    if (!split(&a, &j, s, (size_t)(nul - s)) && !split(&b, &j, nul + 1, size - (size_t)(nul - s) - 1)) {
        long lines = 0;
        as_jdiff_opt o = {.max = 3, .color = (int)(size & 1), .unified = (int)(size >> 1 & 1),
                          .context = (int)(size >> 2 & 3), .emit = check, .ctx = &lines};
        long n = as_jdiff(&a, &b, &o);
        if ((n == 0) != same(&a, &b) || (n > 0) != (lines > 0)) abort();
        if (as_jdiff(&a, &a, &o) != 0 || as_jdiff(&b, &b, &o) != 0) abort();
        o.quiet = 1;
        if (as_jdiff(&b, &a, &o) != n) abort();
    }
    as_jlines_free(&a);
    as_jlines_free(&b);
    return 0;
}
