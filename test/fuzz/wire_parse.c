// Fuzz target: the SSE parsers of wire_parse.h. The first input byte picks
// the wire (its value mod 3) and a split point; the rest is the response
// body. The entry must be the same whether the body is fed whole or in two
// pieces, must load as a replay entry (as_replay_entry_parse) and, unless a
// string holds a {{fromRequest: placeholder (recorded as it is), pass
// replay-serve's serving check; likewise the entry of a cut stream and of
// the body taken as an HTTP error answer.
#include "acpsnap.h"
#include "replay.h"
#include "wire_parse.h"
#include <stdlib.h>
#include <string.h>

static void die_is_a_bug(int code)
{
    (void)code;
    abort();
}

static void check(const as_buf *e)
{
    as_replay_entry r;
    as_replay_err err;
    if (as_replay_entry_parse(e->p, e->n, "entry 0", &r, &err)) abort();
    if (!memmem(e->p, e->n, "{{fromRequest:", 14) && as_replay_entry_servable(&r, "entry 0", &err)) abort();
    as_replay_entry_free(&r);
}

static void entry(as_wp_wire w, const char *s, size_t n, size_t a, const char *cut, as_buf *out)
{
    as_wp *p = as_wp_new(w);
    as_wp_feed(p, s, a);
    as_wp_feed(p, s + a, n - a);
    as_wp_finish(p, cut, out);
    as_wp_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_die_hook = die_is_a_bug;
    if (size < 1) return 0;
    as_wp_wire w = (as_wp_wire)(data[0] % 3);
    const char *s = (const char *)data + 1;
    size_t n = size - 1, a = n ? (size_t)data[0] * 7919 % (n + 1) : 0;
    as_buf whole = {0}, split = {0}, cut = {0}, http = {0};
    entry(w, s, n, n, NULL, &whole);
    entry(w, s, n, a, NULL, &split);
    if (whole.n != split.n || memcmp(whole.p, split.p, whole.n)) abort();
    check(&whole);
    entry(w, s, a, a, "cut", &cut);
    check(&cut);
    as_wp_http_error(400 + data[0] % 200, s, n, &http);
    check(&http);
    as_buf_free(&whole);
    as_buf_free(&split);
    as_buf_free(&cut);
    as_buf_free(&http);
    return 0;
}
