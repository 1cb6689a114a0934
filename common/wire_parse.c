// wire_parse.c - provider SSE streams back into replay entries (wire_parse.h).
//
// The SSE framing is shared (lines, "data:" fields joined by LF, an event
// dispatched at its blank line, comments and other fields skipped); each wire
// is one event handler in a table keyed by the endpoint suffix. The handlers
// build the chunks dsh's adapters build: a block-start at a block's first
// delta (Chat Completions) or at its start event, one delta chunk per
// non-empty wire delta, a block-end carrying the whole block, then usage and
// finish. Every string written is decoded and re-encoded (JSON.stringify), so
// the entry bytes depend on the stream's content only, never on its framing.
#include "acpsnap.h"
#include "wire_parse.h"

#include <stdlib.h>
#include <string.h>

enum { B_TEXT, B_REASONING, B_TOOL };
static const char *const block_type[] = { "text", "reasoning", "tool-call" };

typedef struct {
    int64_t key;            // the wire's handle: chat tool index (text, reasoning: -1, -2), output_index, index
    int type;               // B_*
    int ended;              // its block-end is out
    char *id, *name;        // tool-call
    as_buf acc;             // the text or arguments so far
} block;

typedef enum { S_OPEN, S_DONE, S_FAILED } state;

struct as_wp {
    as_wp_wire wire;
    as_buf line, data;
    int has_data;
    state st;
    char *fail_msg, *fail_code;
    as_buf chunks;          // the chunk objects so far, comma-separated
    block *b; size_t nb;
    as_buf usage;           // the usage object, or empty
    const char *finish;     // the finish reason object (static text), NULL: none yet
    // Anthropic: the usage members as they arrive
    int64_t in, out, cache, think;
    int has_usage, has_cache, has_think;
};

// ---------------------------------------------------------------- building

static void chunk(as_wp *p, const as_buf *c)
{
    if (p->chunks.n) as_buf_putc(&p->chunks, ',');
    as_buf_put(&p->chunks, c->p, c->n);
}

static block *block_of(as_wp *p, int64_t key)
{
    for (size_t i = 0; i < p->nb; i++)
        if (p->b[i].key == key) return &p->b[i];
    return NULL;
}

// A new block (its block-start chunk out); id and name are copied (tool-call).
static block *block_open(as_wp *p, int64_t key, int type, const char *id, const char *name)
{
    p->b = as_xrealloc(p->b, (p->nb + 1) * sizeof *p->b);
    block *k = &p->b[p->nb++];
    memset(k, 0, sizeof *k);
    k->key = key;
    k->type = type;
    if (type == B_TOOL) {
        k->id = as_xstrdup(id ? id : "");
        k->name = as_xstrdup(name ? name : "");
    }
    as_buf c = {0};
    as_buf_printf(&c, "{\"type\":\"block-start\",\"index\":%zu,\"blockType\":\"%s\"}", p->nb - 1, block_type[type]);
    chunk(p, &c);
    as_buf_free(&c);
    return k;
}

// A delta of block k: text (n bytes, UTF-8) into a text, reasoning or
// tool-call delta chunk; empty deltas are no chunk.
static void block_delta(as_wp *p, block *k, const char *s, size_t n)
{
    if (!n || k->ended) return;
    as_buf c = {0};
    size_t idx = (size_t)(k - p->b);
    if (k->type == B_TOOL) {
        as_buf_printf(&c, "{\"type\":\"tool-call-delta\",\"index\":%zu,\"id\":", idx);
        as_jstr_write(&c, k->id, strlen(k->id));
        as_buf_puts(&c, ",\"name\":");
        as_jstr_write(&c, k->name, strlen(k->name));
        as_buf_puts(&c, ",\"argumentsDelta\":");
    } else {
        as_buf_printf(&c, "{\"type\":\"%s-delta\",\"index\":%zu,\"text\":", block_type[k->type], idx);
    }
    as_jstr_write(&c, s, n);
    as_buf_putc(&c, '}');
    chunk(p, &c);
    as_buf_free(&c);
    as_buf_put(&k->acc, s, n);
}

static void block_end(as_wp *p, block *k)
{
    if (k->ended) return;
    k->ended = 1;
    as_buf c = {0};
    as_buf_printf(&c, "{\"type\":\"block-end\",\"index\":%zu,\"block\":{\"type\":\"%s\",", (size_t)(k - p->b),
                  block_type[k->type]);
    if (k->type == B_TOOL) {
        as_buf_puts(&c, "\"id\":");
        as_jstr_write(&c, k->id, strlen(k->id));
        as_buf_puts(&c, ",\"name\":");
        as_jstr_write(&c, k->name, strlen(k->name));
        as_buf_puts(&c, ",\"arguments\":");
    } else {
        as_buf_puts(&c, "\"text\":");
    }
    as_jstr_write(&c, k->acc.p ? k->acc.p : "", k->acc.n);
    as_buf_puts(&c, "}}");
    chunk(p, &c);
    as_buf_free(&c);
}

// The stream failed (the first failure counts): message and code are copied.
static void fail(as_wp *p, const char *msg, size_t n, const char *code)
{
    if (p->st != S_OPEN) return;
    p->st = S_FAILED;
    as_buf m = {0};
    as_buf_put(&m, n ? msg : "error event in the stream", n ? n : 25);
    p->fail_msg = m.p;
    p->fail_code = as_xstrdup(code);
}

static void usage_set(as_wp *p, int64_t in, int64_t out, int has_cache, int64_t cache, int has_reas, int64_t reas)
{
    as_buf_reset(&p->usage);
    if (in < 0) in = 0;
    as_buf_printf(&p->usage, "{\"inputTokens\":%lld,\"outputTokens\":%lld", (long long)in, (long long)out);
    if (has_cache) as_buf_printf(&p->usage, ",\"cacheReadTokens\":%lld", (long long)cache);
    if (has_reas) as_buf_printf(&p->usage, ",\"reasoningTokens\":%lld", (long long)reas);
    as_buf_putc(&p->usage, '}');
}

// The end of a proper stream: blocks still open ended in index order, the
// usage, the finish.
static void done(as_wp *p, const char *finish)
{
    if (p->st != S_OPEN) return;
    for (size_t i = 0; i < p->nb; i++) block_end(p, &p->b[i]);
    as_buf c = {0};
    if (p->usage.n) {
        as_buf_puts(&c, "{\"type\":\"usage\",\"usage\":");
        as_buf_put(&c, p->usage.p, p->usage.n);
        as_buf_putc(&c, '}');
        chunk(p, &c);
        as_buf_reset(&c);
    }
    as_buf_printf(&c, "{\"type\":\"finish\",\"reason\":%s}", finish);
    chunk(p, &c);
    as_buf_free(&c);
    p->st = S_DONE;
}

static const char R_STOP[] = "{\"kind\":\"stop\"}", R_TOOLS[] = "{\"kind\":\"tool-calls\"}",
                  R_MAX[] = "{\"kind\":\"max-tokens\"}", R_REFUSAL[] = "{\"kind\":\"refusal\"}",
                  R_RESOURCES[] = "{\"kind\":\"error\",\"failure\":{\"message\":"
                                  "\"the provider ran short of resources and interrupted generation\",\"code\":\"SERVER\"}}";

// ---------------------------------------------------------------- JSON helpers

static int64_t num(const as_json *j, int obj, const char *key, int *present)
{
    int v = obj >= 0 && j->t[obj].type == AS_JOBJ ? as_json_get(j, obj, key) : -1;
    int64_t x = 0;
    int ok = v >= 0 && as_json_int(j, v, &x) && x >= 0;
    if (present) *present = ok;
    return ok ? x : 0;
}

static int obj(const as_json *j, int parent, const char *key)
{
    int v = parent >= 0 && j->t[parent].type == AS_JOBJ ? as_json_get(j, parent, key) : -1;
    return v >= 0 && j->t[v].type == AS_JOBJ ? v : -1;
}

// String member key of parent decoded into out (emptied first): 1, or 0 when
// it is not a string.
static int str(const as_json *j, int parent, const char *key, as_buf *out)
{
    as_buf_reset(out);
    int v = parent >= 0 && j->t[parent].type == AS_JOBJ ? as_json_get(j, parent, key) : -1;
    if (v < 0 || j->t[v].type != AS_JSTR) return 0;
    as_json_str(j, v, out);
    return 1;
}

static int is(const as_json *j, int parent, const char *key, const char *lit)
{
    int v = parent >= 0 && j->t[parent].type == AS_JOBJ ? as_json_get(j, parent, key) : -1;
    return v >= 0 && as_json_streq(j, v, lit);
}

// An error object's message and a code: "type" or "code" upper-cased, mapped.
static void fail_with(as_wp *p, const as_json *j, int err)
{
    as_buf m = {0}, t = {0};
    str(j, err, "message", &m);
    if (!str(j, err, "type", &t) || !t.n) str(j, err, "code", &t);
    const char *code = "SERVER";
    if (t.p && (!strcmp(t.p, "overloaded_error") || !strcmp(t.p, "server_is_overloaded"))) code = "SERVER_OVERLOADED";
    else if (t.p && (!strcmp(t.p, "rate_limit_error") || !strcmp(t.p, "rate_limit_exceeded"))) code = "RATE_LIMIT";
    else if (t.p && !strcmp(t.p, "context_length_exceeded")) code = "CONTEXT_WINDOW_EXCEEDED";
    else if (t.p && !strcmp(t.p, "insufficient_quota")) code = "QUOTA";
    fail(p, m.p, m.n, code);
    as_buf_free(&m);
    as_buf_free(&t);
}

// ---------------------------------------------------------------- Chat Completions

static void chat_text(as_wp *p, const as_json *j, int delta, const char *key, int64_t bkey, int type, as_buf *s)
{
    if (!str(j, delta, key, s) || !s->n) return;
    block *k = block_of(p, bkey);
    if (!k) k = block_open(p, bkey, type, NULL, NULL);
    block_delta(p, k, s->p, s->n);
}

static void chat_usage(as_wp *p, const as_json *j, int u)
{
    int has_hit, has_cached, has_reas;
    int64_t prompt = num(j, u, "prompt_tokens", NULL), completion = num(j, u, "completion_tokens", NULL);
    int64_t hit = num(j, u, "prompt_cache_hit_tokens", &has_hit);
    if (!has_hit) hit = num(j, obj(j, u, "prompt_tokens_details"), "cached_tokens", &has_cached);
    else has_cached = 1;
    int64_t reas = num(j, obj(j, u, "completion_tokens_details"), "reasoning_tokens", &has_reas);
    usage_set(p, prompt - hit, completion, has_cached, hit, has_reas, reas);
}

static void chat_event(as_wp *p, const char *data, size_t n, const as_json *j)
{
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        done(p, p->finish ? p->finish : R_STOP);
        return;
    }
    if (!j) {
        fail(p, "malformed event in the stream", 29, "MALFORMED_RESPONSE");
        return;
    }
    int err = obj(j, 0, "error");
    if (err >= 0) { fail_with(p, j, err); return; }
    int u = obj(j, 0, "usage");
    if (u >= 0) chat_usage(p, j, u);
    int ch = as_json_get(j, 0, "choices");
    int c0 = ch >= 0 && j->t[ch].type == AS_JARR ? as_json_first(j, ch) : -1;
    if (c0 < 0 || j->t[c0].type != AS_JOBJ) return;
    int d = obj(j, c0, "delta");
    as_buf s = {0}, id = {0}, name = {0};
    chat_text(p, j, d, "reasoning_content", -2, B_REASONING, &s);
    chat_text(p, j, d, "content", -1, B_TEXT, &s);
    int tcs = d >= 0 ? as_json_get(j, d, "tool_calls") : -1;
    for (int el = tcs >= 0 && j->t[tcs].type == AS_JARR ? as_json_first(j, tcs) : -1; el >= 0;
         el = as_json_nextel(j, el)) {
        if (j->t[el].type != AS_JOBJ) continue;
        int64_t wi = num(j, el, "index", NULL);
        int fn = obj(j, el, "function");
        block *k = block_of(p, wi);
        if (!k) {
            str(j, el, "id", &id);
            str(j, fn, "name", &name);
            k = block_open(p, wi, B_TOOL, id.p, name.p);
        }
        str(j, fn, "arguments", &s);
        block_delta(p, k, s.p, s.n);
    }
    int fr = as_json_get(j, c0, "finish_reason");
    if (fr >= 0 && j->t[fr].type == AS_JSTR)
        p->finish = as_json_streq(j, fr, "tool_calls") ? R_TOOLS : as_json_streq(j, fr, "length") ? R_MAX
                  : as_json_streq(j, fr, "content_filter") ? R_REFUSAL
                  : as_json_streq(j, fr, "insufficient_system_resource") ? R_RESOURCES : R_STOP;
    as_buf_free(&s);
    as_buf_free(&id);
    as_buf_free(&name);
}

// ---------------------------------------------------------------- Responses

static void responses_added(as_wp *p, const as_json *j, int64_t oi)
{
    int item = obj(j, 0, "item");
    int type = is(j, item, "type", "message") ? B_TEXT : is(j, item, "type", "reasoning") ? B_REASONING
             : is(j, item, "type", "function_call") ? B_TOOL : -1;
    if (type < 0 || block_of(p, oi)) return;
    as_buf id = {0}, name = {0};
    str(j, item, "call_id", &id);
    str(j, item, "name", &name);
    block_open(p, oi, type, id.p, name.p);
    as_buf_free(&id);
    as_buf_free(&name);
}

static void responses_completed(as_wp *p, const as_json *j, int resp)
{
    int u = obj(j, resp, "usage");
    if (u >= 0) {
        int has_cached, has_reas;
        int64_t cached = num(j, obj(j, u, "input_tokens_details"), "cached_tokens", &has_cached);
        int64_t reas = num(j, obj(j, u, "output_tokens_details"), "reasoning_tokens", &has_reas);
        usage_set(p, num(j, u, "input_tokens", NULL) - cached, num(j, u, "output_tokens", NULL), has_cached, cached,
                  has_reas, reas);
    }
    int tools = 0;
    for (size_t i = 0; i < p->nb; i++) tools |= p->b[i].type == B_TOOL;
    done(p, tools ? R_TOOLS : R_STOP);
}

static void responses_event(as_wp *p, const char *data, size_t n, const as_json *j)
{
    if (!j) return;   // non-JSON data ([DONE] from some gateways) is skipped, as codex does
    int64_t oi = num(j, 0, "output_index", NULL);
    as_buf s = {0};
    int t = as_json_get(j, 0, "type");
    block *k = block_of(p, oi);
    if (t < 0) {
    } else if (as_json_streq(j, t, "response.output_item.added")) {
        responses_added(p, j, oi);
    } else if (as_json_streq(j, t, "response.output_text.delta") || as_json_streq(j, t, "response.reasoning_text.delta")
               || as_json_streq(j, t, "response.reasoning_summary_text.delta")
               || as_json_streq(j, t, "response.function_call_arguments.delta")) {
        if (k && str(j, 0, "delta", &s)) block_delta(p, k, s.p, s.n);
    } else if (as_json_streq(j, t, "response.output_item.done")) {
        int item = obj(j, 0, "item");
        if (k && k->type == B_TOOL && !k->acc.n && str(j, item, "arguments", &s)) as_buf_put(&k->acc, s.p, s.n);
        if (k) block_end(p, k);
    } else if (as_json_streq(j, t, "response.completed")) {
        responses_completed(p, j, obj(j, 0, "response"));
    } else if (as_json_streq(j, t, "response.incomplete")) {
        int det = obj(j, obj(j, 0, "response"), "incomplete_details");
        done(p, is(j, det, "reason", "content_filter") ? R_REFUSAL : R_MAX);
    } else if (as_json_streq(j, t, "response.failed")) {
        fail_with(p, j, obj(j, obj(j, 0, "response"), "error"));
    } else if (as_json_streq(j, t, "error")) {
        int e = obj(j, 0, "error");
        fail_with(p, j, e >= 0 ? e : 0);
    }
    as_buf_free(&s);
    (void)data; (void)n;
}

// ---------------------------------------------------------------- Anthropic Messages

static void messages_usage(as_wp *p, const as_json *j, int u)
{
    if (u < 0) return;
    int pr;
    int64_t x;
    p->has_usage = 1;
    if ((x = num(j, u, "input_tokens", &pr)), pr) p->in = x;
    if ((x = num(j, u, "output_tokens", &pr)), pr) p->out = x;
    if ((x = num(j, u, "cache_read_input_tokens", &pr)), pr) { p->cache = x; p->has_cache = 1; }
    if ((x = num(j, obj(j, u, "output_tokens_details"), "thinking_tokens", &pr)), pr) { p->think = x; p->has_think = 1; }
}

static void messages_event(as_wp *p, const char *data, size_t n, const as_json *j)
{
    (void)data; (void)n;
    if (!j) {
        fail(p, "malformed event in the stream", 29, "MALFORMED_RESPONSE");
        return;
    }
    int t = as_json_get(j, 0, "type");
    int64_t ix = num(j, 0, "index", NULL);
    block *k = block_of(p, ix);
    as_buf s = {0}, name = {0};
    if (t < 0) {
    } else if (as_json_streq(j, t, "message_start")) {
        messages_usage(p, j, obj(j, obj(j, 0, "message"), "usage"));
    } else if (as_json_streq(j, t, "content_block_start")) {
        int cb = obj(j, 0, "content_block");
        int type = is(j, cb, "type", "text") ? B_TEXT : is(j, cb, "type", "thinking") ? B_REASONING
                 : is(j, cb, "type", "tool_use") ? B_TOOL : -1;
        if (type >= 0 && !k) {
            str(j, cb, "id", &s);
            str(j, cb, "name", &name);
            k = block_open(p, ix, type, s.p, name.p);
            // a start that carries text already (normally "")
            if (type != B_TOOL && str(j, cb, type == B_TEXT ? "text" : "thinking", &s)) block_delta(p, k, s.p, s.n);
        }
    } else if (as_json_streq(j, t, "content_block_delta")) {
        int d = obj(j, 0, "delta");
        const char *key = is(j, d, "type", "text_delta") ? "text" : is(j, d, "type", "thinking_delta") ? "thinking"
                        : is(j, d, "type", "input_json_delta") ? "partial_json" : NULL;
        if (k && key && str(j, d, key, &s)) block_delta(p, k, s.p, s.n);
    } else if (as_json_streq(j, t, "content_block_stop")) {
        if (k && k->type == B_TOOL && !k->acc.n) as_buf_puts(&k->acc, "{}");   // no fragments: the input is {}
        if (k) block_end(p, k);
    } else if (as_json_streq(j, t, "message_delta")) {
        messages_usage(p, j, obj(j, 0, "usage"));
        int d = obj(j, 0, "delta");
        if (is(j, d, "stop_reason", "tool_use")) p->finish = R_TOOLS;
        else if (is(j, d, "stop_reason", "max_tokens") || is(j, d, "stop_reason", "model_context_window_exceeded"))
            p->finish = R_MAX;
        else if (is(j, d, "stop_reason", "refusal")) p->finish = R_REFUSAL;
        else if (d >= 0) p->finish = R_STOP;
    } else if (as_json_streq(j, t, "message_stop")) {
        if (p->has_usage) usage_set(p, p->in, p->out, p->has_cache, p->cache, p->has_think, p->think);
        done(p, p->finish ? p->finish : R_STOP);
    } else if (as_json_streq(j, t, "error")) {
        int e = obj(j, 0, "error");
        fail_with(p, j, e >= 0 ? e : 0);
    }
    as_buf_free(&s);
    as_buf_free(&name);
}

// ---------------------------------------------------------------- the table, SSE framing

typedef void (*event_fn)(as_wp *p, const char *data, size_t n, const as_json *j);
static const struct { const char *suffix; event_fn event; const char *final; } wires[] = {
    [AS_WP_CHAT] = { "/chat/completions", chat_event, "data: [DONE]" },
    [AS_WP_RESPONSES] = { "/responses", responses_event, "a terminal response event" },
    [AS_WP_MESSAGES] = { "/messages", messages_event, "message_stop" },
};

int as_wp_wire_of(const char *path, as_wp_wire *w)
{
    size_t n = strcspn(path, "?");
    for (size_t i = 0; i < sizeof wires / sizeof *wires; i++) {
        size_t k = strlen(wires[i].suffix);
        if (n >= k && !memcmp(path + n - k, wires[i].suffix, k)) { *w = (as_wp_wire)i; return 0; }
    }
    return -1;
}

const char *as_wp_suffix(as_wp_wire w) { return wires[w].suffix; }

as_wp *as_wp_new(as_wp_wire w)
{
    as_wp *p = as_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->wire = w;
    return p;
}

static void dispatch(as_wp *p)
{
    if (!p->has_data) return;
    p->has_data = 0;
    as_json j = {0};
    int ok = as_json_parse(&j, p->data.p ? p->data.p : "", p->data.n) == 0 && j.t[0].type == AS_JOBJ;
    wires[p->wire].event(p, p->data.p ? p->data.p : "", p->data.n, ok ? &j : NULL);
    as_json_free(&j);
    as_buf_reset(&p->data);
}

// One line without its end: a field, a comment, or the blank line that
// dispatches the event.
static void line(as_wp *p, const char *s, size_t n)
{
    if (n && s[n - 1] == '\r') n--;
    if (!n) { dispatch(p); return; }
    if (n < 5 || memcmp(s, "data:", 5)) return;   // comments, event:, id:, retry:
    s += 5; n -= 5;
    if (n && *s == ' ') { s++; n--; }
    if (p->has_data) as_buf_putc(&p->data, '\n');
    as_buf_put(&p->data, s, n);
    p->has_data = 1;
}

void as_wp_feed(as_wp *p, const char *s, size_t n)
{
    while (n && p->st == S_OPEN) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) : n;
        if (!nl) { as_buf_put(&p->line, s, k); return; }
        if (p->line.n) {
            as_buf_put(&p->line, s, k);
            line(p, p->line.p, p->line.n);
            as_buf_reset(&p->line);
        } else {
            line(p, s, k);
        }
        s += k + 1; n -= k + 1;
    }
}

void as_wp_finish(as_wp *p, const char *cut, as_buf *out)
{
    if (p->st == S_OPEN) {
        as_buf m = {0};
        if (cut) {
            as_buf_puts(&m, cut);
        } else {
            as_buf_printf(&m, "the stream ended without %s", wires[p->wire].final);
        }
        fail(p, m.p, m.n, cut ? "TRANSPORT" : "STREAM_CLOSED");
        as_buf_free(&m);
    }
    as_buf_puts(out, p->st == S_DONE ? "{\"kind\":\"chunks\",\"chunks\":[" : "{\"kind\":\"throw\",\"chunks\":[");
    as_buf_put(out, p->chunks.p ? p->chunks.p : "", p->chunks.n);
    as_buf_putc(out, ']');
    if (p->st == S_FAILED) {
        as_buf_puts(out, ",\"message\":");
        as_jstr_write(out, p->fail_msg, strlen(p->fail_msg));
        as_buf_puts(out, ",\"code\":");
        as_jstr_write(out, p->fail_code, strlen(p->fail_code));
    }
    as_buf_putc(out, '}');
}

void as_wp_free(as_wp *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nb; i++) {
        free(p->b[i].id);
        free(p->b[i].name);
        as_buf_free(&p->b[i].acc);
    }
    free(p->b);
    as_buf_free(&p->line);
    as_buf_free(&p->data);
    as_buf_free(&p->chunks);
    as_buf_free(&p->usage);
    free(p->fail_msg);
    free(p->fail_code);
    free(p);
}

void as_wp_http_error(int status, const char *body, size_t n, as_buf *out)
{
    const char *code = status == 401 || status == 403 ? "AUTH" : status == 402 ? "QUOTA"
                     : status == 429 ? "RATE_LIMIT" : status == 503 || status == 529 ? "SERVER_OVERLOADED"
                     : status < 500 ? "INVALID_REQUEST" : "SERVER";
    as_json j = {0};
    as_buf m = {0};
    if (as_json_parse(&j, body ? body : "", n) == 0) str(&j, obj(&j, 0, "error"), "message", &m);
    if (!m.n) {
        as_buf_reset(&m);
        as_buf_printf(&m, "HTTP %d", status);
    }
    as_buf_puts(out, "{\"kind\":\"throw\",\"chunks\":[],\"message\":");
    as_jstr_write(out, m.p, m.n);
    as_buf_printf(out, ",\"code\":\"%s\",\"status\":%d}", code, status);
    as_json_free(&j);
    as_buf_free(&m);
}
