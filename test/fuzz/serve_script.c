// Fuzz target: a replay script as replay-serve loads and serves it. The
// input is a script (one entry per line); each line goes through the entry
// parser and the serving check (as_replay_entry_servable), which the shared
// line loader (as_replay_line_servable) must agree with, and every entry
// the parser accepts is rendered through the SSE translation replay-serve
// uses (as_sse_entry) on each of its three wires, with the strings of the
// input's JSON lines as the fromRequest haystack.
// Chat completions: every event must be "data: " and one JSON value the
// strict parser accepts (or [DONE]), then a blank line. Responses and
// Messages: "event: <type>", then "data: " and one JSON object whose "type"
// is that name, then a blank line; on Responses its sequence_number counts
// 0, 1, 2… The event ends must tile the output.
#include "acpsnap.h"
#include "replay.h"
#include <stdlib.h>
#include <string.h>

static void die_is_a_bug(int code)
{
    (void)code;
    abort();
}

// One event's JSON (v, vn bytes): a strict JSON value; with name (Responses,
// Messages) an object whose type is name, numbered seq when seq >= 0.
static void check_json(const char *v, size_t vn, const char *name, size_t namen, long seq)
{
    static as_json j;
    if (memchr(v, '\n', vn)) abort();   // one line per event
    if (!name) {
        if (vn == 6 && !memcmp(v, "[DONE]", 6)) return;
        if (as_json_parse(&j, v, vn)) abort();
        return;
    }
    if (as_json_parse(&j, v, vn) || j.t[0].type != AS_JOBJ) abort();
    int t = as_json_get(&j, 0, "type");
    if (t < 0 || j.t[t].type != AS_JSTR || as_tok_len(&j, t) != namen + 2 || memcmp(as_tok_p(&j, t) + 1, name, namen))
        abort();
    if (seq >= 0) {
        int64_t n;
        int sn = as_json_get(&j, 0, "sequence_number");
        if (sn < 0 || !as_json_int(&j, sn, &n) || n != seq) abort();
    }
}

static void check_events(const as_sse *s, as_wire w)
{
    size_t at = 0;
    for (size_t k = 0; k < s->n; k++) {
        size_t end = s->end[k];
        if (end <= at || end > s->out.n) abort();
        const char *e = s->out.p + at;
        size_t n = end - at;
        if (n < 8 || memcmp(e + n - 2, "\n\n", 2)) abort();
        const char *name = NULL;
        size_t namen = 0;
        if (w != AS_WIRE_CHAT) {   // "event: <name>\n" first
            if (n < 7 || memcmp(e, "event: ", 7)) abort();
            const char *nl = memchr(e, '\n', n);
            if (!nl) abort();
            name = e + 7;
            namen = (size_t)(nl - name);
            n -= (size_t)(nl + 1 - e);
            e = nl + 1;
        }
        if (n < 8 || memcmp(e, "data: ", 6)) abort();
        check_json(e + 6, n - 8, name, namen, w == AS_WIRE_RESPONSES ? (long)k : -1);
        at = end;
    }
    if (at != s->out.n) abort();
}

static void render(const as_replay_entry *e, const as_buf *hay, long n)
{
    static const char model[] = "\"deepseek-chat\"";
    for (as_wire w = AS_WIRE_CHAT; w <= AS_WIRE_MESSAGES; w++) {
        as_sse_req q = { .wire = w, .request = n, .created = 1700000000, .model = model,
                         .model_len = sizeof model - 1, .include_usage = (int)(n & 1), .hay = hay };
        as_sse s = {0};
        char err[400] = "";
        if (as_sse_entry(e, &q, &s, err, sizeof err) == 0) check_events(&s, w);
        else if (!err[0]) abort();
        as_sse_free(&s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_die_hook = die_is_a_bug;
    const char *p = (const char *)data, *end = p + size;
    // the haystack: the strings of every line that is JSON, as replay-serve
    // takes them from a request (valid UTF-8, WTF-8 lone surrogates)
    static as_json j;
    as_buf hay = {0};
    for (const char *q = p; q < end;) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        size_t len = nl ? (size_t)(nl - q) : (size_t)(end - q);
        if (as_json_parse(&j, q, len) == 0) as_replay_haystack(&j, 0, &hay);
        q += len + 1;
    }
    for (long n = 0; p < end; n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        as_replay_entry e;
        as_replay_err err;
        if (as_replay_entry_parse(p, len, "entry", &e, &err)) {
            if (!err.msg[0] || err.pos > (long)len) abort();
            break;   // the script is refused at this line
        }
        int servable = as_replay_entry_servable(&e, "entry", &err) == 0;
        if (!servable && (!err.msg[0] || err.pos > (long)e.len)) abort();
        // the loader replay-serve, acp-drive and fixture-guard share agrees
        as_replay_entry e2;
        as_replay_err err2;
        if ((as_replay_line_servable(p, len, (size_t)n, &e2, &err2) == 0) != servable) abort();
        if (servable) as_replay_entry_free(&e2);
        else if (!err2.msg[0] || err2.pos != -1) abort();
        render(&e, &hay, n);   // also the entries the check refuses: the wire stays JSON
        as_replay_entry_free(&e);
        p += len + 1;
    }
    as_buf_free(&hay);
    return 0;
}
