// wire.c - a replay entry as the stream replay-serve(1) sends (replay.h):
// the wire picked by the endpoint, and the chat-completions translation:
// each provider-neutral chunk back into the chat.completion.chunk objects
// DeepSeek streams, in DeepSeek's field order, so that an agent's DeepSeek
// adapter turns them into the same chunks again. The item wires (Responses,
// Messages) share the block walk below (wire.h) and their error shapes.
//
// Every string that goes on the wire is a JSON string token of the entry
// (its bytes copied, or resolved and re-encoded when it holds a
// {{fromRequest:…}} placeholder), so each event is one JSON value even for
// an entry whose members are missing or mistyped (those read as empty).
#include "acpsnap.h"
#include "replay.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const as_sse_req *q;
    as_sse *s;
    int thinking;
    // neutral block index → wire tool index; blocks that had deltas
    struct { int64_t block; int wire; } tools[64]; int ntools;
    int64_t delta_blocks[256]; int ndelta;
    char *err; size_t errn;
} gen;

static void event_end(as_sse *s)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->end = as_xrealloc(s->end, s->cap * sizeof *s->end);
    }
    s->end[s->n++] = s->out.n;
}

void as_sse_free(as_sse *s)
{
    as_buf_free(&s->out);
    free(s->end);
    memset(s, 0, sizeof *s);
}

static int tool_wire(gen *g, int64_t block, int *is_new)
{
    for (int i = 0; i < g->ntools; i++)
        if (g->tools[i].block == block) { *is_new = 0; return g->tools[i].wire; }
    *is_new = 1;
    if (g->ntools < 64) { g->tools[g->ntools].block = block; g->tools[g->ntools].wire = g->ntools; g->ntools++; }
    return g->ntools - 1;
}

static void saw_delta(gen *g, int64_t block)
{
    for (int i = 0; i < g->ndelta; i++) if (g->delta_blocks[i] == block) return;
    if (g->ndelta < 256) g->delta_blocks[g->ndelta++] = block;
}

static int had_delta(const gen *g, int64_t block)
{
    for (int i = 0; i < g->ndelta; i++) if (g->delta_blocks[i] == block) return 1;
    return 0;
}

static void chunk_open(gen *g)
{
    as_buf *b = &g->s->out;
    as_buf_printf(b, "data: {\"id\":\"00000000-0000-4000-8000-%012lx\",\"object\":\"chat.completion.chunk\","
                  "\"created\":%lld,\"model\":", (unsigned long)g->q->request + 1, g->q->created);
    as_buf_put(b, g->q->model, g->q->model_len);
    as_buf_puts(b, ",\"system_fingerprint\":\"fp_replay_serve\",\"choices\":[{\"index\":0,\"delta\":");
}

static void chunk_close(gen *g)
{
    as_buf *b = &g->s->out;
    as_buf_puts(b, ",\"logprobs\":null,\"finish_reason\":null}]");
    if (g->q->include_usage) as_buf_puts(b, ",\"usage\":null");
    as_buf_puts(b, "}\n\n");
    event_end(g->s);
}

// String member tok (-1 absent) as a JSON string, placeholders resolved;
// anything but a string goes out as "".
static int put_str(gen *g, const as_json *j, int tok)
{
    if (tok < 0 || j->t[tok].type != AS_JSTR) {
        as_buf_puts(&g->s->out, "\"\"");
        return 0;
    }
    return as_replay_resolve_str(j, tok, g->q->hay, g->q->lim, &g->s->out, g->err, g->errn);
}

// delta {"content":…} with the thinking-mode companion field.
static int emit_content(gen *g, const as_json *j, int strtok)
{
    chunk_open(g);
    as_buf *b = &g->s->out;
    as_buf_puts(b, "{\"content\":");
    if (put_str(g, j, strtok)) return -1;
    if (g->thinking) as_buf_puts(b, ",\"reasoning_content\":null");
    as_buf_putc(b, '}');
    chunk_close(g);
    return 0;
}

static int emit_reasoning(gen *g, const as_json *j, int strtok)
{
    chunk_open(g);
    as_buf *b = &g->s->out;
    as_buf_puts(b, "{\"content\":null,\"reasoning_content\":");
    if (put_str(g, j, strtok)) return -1;
    as_buf_putc(b, '}');
    chunk_close(g);
    return 0;
}

// A tool-call delta: the first one of a call carries id, type and name.
static int emit_tool(gen *g, const as_json *j, int64_t block, int id, int name, int args)
{
    int is_new;
    int w = tool_wire(g, block, &is_new);
    chunk_open(g);
    as_buf *b = &g->s->out;
    as_buf_printf(b, "{\"tool_calls\":[{\"index\":%d,", w);
    if (is_new) {
        as_buf_puts(b, "\"id\":");
        if (put_str(g, j, id)) return -1;
        as_buf_puts(b, ",\"type\":\"function\",\"function\":{");
        if (name >= 0 && j->t[name].type == AS_JSTR) {
            as_buf_puts(b, "\"name\":");
            if (put_str(g, j, name)) return -1;
            as_buf_putc(b, ',');
        }
    } else {
        as_buf_puts(b, "\"function\":{");
    }
    as_buf_puts(b, "\"arguments\":");
    if (put_str(g, j, args)) return -1;
    as_buf_puts(b, "}}]}");
    chunk_close(g);
    return 0;
}

static int64_t get_int(const as_json *j, int obj, const char *key, int *present)
{
    int v = as_json_get(j, obj, key);
    int64_t x = 0;
    *present = v >= 0 && as_json_int(j, v, &x);
    return *present ? x : 0;
}

// finish_reason from the neutral reason (tok -1: stop): tool-calls, length,
// an error's code in lower case (dsh maps an unknown wire reason R to code
// upper(R)); written as a JSON string.
static void finish_reason(const as_json *fj, int reason, as_buf *b)
{
    const char *fr = "stop";
    as_buf code = {0};
    int k = as_json_get(fj, reason, "kind");
    if (k >= 0 && as_json_streq(fj, k, "tool-calls")) fr = "tool_calls";
    else if (k >= 0 && as_json_streq(fj, k, "max-tokens")) fr = "length";
    else if (k >= 0 && as_json_streq(fj, k, "error")) {
        int f = as_json_get(fj, reason, "failure");
        int c = as_json_get(fj, f, "code");
        if (c < 0 || fj->t[c].type != AS_JSTR) {
            fr = "insufficient_system_resource";
        } else if (!as_json_streq(fj, c, "EMPTY_RESPONSE")) {   // that one is a stop with no content
            as_json_str(fj, c, &code);
            for (size_t i = 0; i < code.n; i++)
                if (code.p[i] >= 'A' && code.p[i] <= 'Z') code.p[i] = (char)(code.p[i] - 'A' + 'a');
            fr = code.p;
        }
    }
    as_jstr_write(b, fr, strlen(fr));
    as_buf_free(&code);
}

// usage mapped back to DeepSeek's fields (prompt_tokens includes cache hits).
static void usage_fields(const as_json *uj, int usage, as_buf *b)
{
    int hi, ho, hc, hr;
    int64_t in = get_int(uj, usage, "inputTokens", &hi);
    int64_t outp = get_int(uj, usage, "outputTokens", &ho);
    int64_t cache = get_int(uj, usage, "cacheReadTokens", &hc);
    int64_t reas = get_int(uj, usage, "reasoningTokens", &hr);
    as_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld",
                  (long long)(in + cache), (long long)outp, (long long)(in + cache + outp));
    if (hc) as_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%lld}", (long long)cache);
    if (hr) as_buf_printf(b, ",\"completion_tokens_details\":{\"reasoning_tokens\":%lld}", (long long)reas);
    if (hc) as_buf_printf(b, ",\"prompt_cache_hit_tokens\":%lld,\"prompt_cache_miss_tokens\":%lld",
                          (long long)cache, (long long)in);
    as_buf_putc(b, '}');
}

// The final chunk: finish_reason, and usage when the entry had one.
static void emit_final(gen *g, const as_json *fj, int reason, const as_json *uj, int usage)
{
    as_buf *b = &g->s->out;
    chunk_open(g);
    as_buf_puts(b, g->thinking ? "{\"content\":\"\",\"reasoning_content\":null}" : "{\"content\":\"\"}");
    as_buf_puts(b, ",\"logprobs\":null,\"finish_reason\":");
    if (fj && reason >= 0 && fj->t[reason].type == AS_JOBJ) finish_reason(fj, reason, b);
    else as_buf_puts(b, "\"stop\"");
    as_buf_puts(b, "}]");
    if (uj && usage >= 0 && uj->t[usage].type == AS_JOBJ) usage_fields(uj, usage, b);
    else if (g->q->include_usage) as_buf_puts(b, ",\"usage\":null");
    as_buf_puts(b, "}\n\n");
    event_end(g->s);
}

// A block that streamed no deltas (a rebuilt compaction call): the whole
// block goes out as one delta, from its block-end.
static int emit_block(gen *g, const as_json *j, int64_t idx)
{
    if (had_delta(g, idx)) return 0;
    int blk = as_json_get(j, 0, "block");
    int ty = as_json_get(j, blk, "type");
    if (ty < 0) return 0;
    saw_delta(g, idx);
    if (as_json_streq(j, ty, "text")) {
        int t = as_json_get(j, blk, "text");
        if (t >= 0 && j->t[t].type == AS_JSTR) return emit_content(g, j, t);
    } else if (as_json_streq(j, ty, "reasoning")) {
        int t = as_json_get(j, blk, "text");
        if (t >= 0 && j->t[t].type == AS_JSTR) return emit_reasoning(g, j, t);
    } else if (as_json_streq(j, ty, "tool-call")) {
        return emit_tool(g, j, idx, as_json_get(j, blk, "id"), as_json_get(j, blk, "name"),
                         as_json_get(j, blk, "arguments"));
    }
    return 0;
}

// Thinking mode: the entry has reasoning (a delta, or a whole reasoning block).
static int thinking(const as_replay_entry *e)
{
    for (size_t k = 0; k < e->nchunks; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (c->type == AS_CHUNK_REASONING_DELTA) return 1;
        if (c->type == AS_CHUNK_BLOCK_END && memmem(e->json + c->off, c->len, "\"type\":\"reasoning\"", 18)) return 1;
    }
    return 0;
}

// One delta chunk (parsed in j) onto the wire.
static int emit_chunk(gen *g, const as_json *j, int type)
{
    int pres;
    int64_t idx = get_int(j, 0, "index", &pres);
    switch (type) {
    case AS_CHUNK_TEXT_DELTA:
        saw_delta(g, idx);
        return emit_content(g, j, as_json_get(j, 0, "text"));
    case AS_CHUNK_REASONING_DELTA:
        saw_delta(g, idx);
        return emit_reasoning(g, j, as_json_get(j, 0, "text"));
    case AS_CHUNK_TOOL_CALL_DELTA:
        saw_delta(g, idx);
        return emit_tool(g, j, idx, as_json_get(j, 0, "id"), as_json_get(j, 0, "name"),
                         as_json_get(j, 0, "argumentsDelta"));
    case AS_CHUNK_BLOCK_END:
        return emit_block(g, j, idx);
    default:    // block-start: the wire opens a block with its first delta
        return 0;
    }
}

// The entry's chunks as events; with `final`, the final chunk and [DONE].
static int translate(gen *g, const as_replay_entry *e, int final)
{
    as_json j = {0}, fj = {0}, uj = {0};
    int reason = -1, usage = -1, rc = 0;
    g->thinking = thinking(e);
    chunk_open(g);
    as_buf_puts(&g->s->out, g->thinking ? "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"}"
                                        : "{\"role\":\"assistant\",\"content\":\"\"}");
    chunk_close(g);
    for (size_t k = 0; k < e->nchunks && !rc; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (as_json_parse(&j, e->json + c->off, c->len)) {
            snprintf(g->err, g->errn, "chunk %zu does not parse", k);
            rc = -1;
        } else if (c->type == AS_CHUNK_USAGE) {
            if (as_json_parse(&uj, e->json + c->off, c->len) == 0) usage = as_json_get(&uj, 0, "usage");
        } else if (c->type == AS_CHUNK_FINISH) {
            if (as_json_parse(&fj, e->json + c->off, c->len) == 0) reason = as_json_get(&fj, 0, "reason");
        } else {
            rc = emit_chunk(g, &j, c->type);
        }
        if (!rc && g->q->lim && g->q->lim->stop && *g->q->lim->stop) {
            snprintf(g->err, g->errn, "stopped (shutting down)");
            rc = -1;
        }
    }
    if (!rc && final) {
        emit_final(g, reason >= 0 ? &fj : NULL, reason, usage >= 0 ? &uj : NULL, usage);
        as_buf_puts(&g->s->out, "data: [DONE]\n\n");
        event_end(g->s);
    }
    as_json_free(&j);
    as_json_free(&fj);
    as_json_free(&uj);
    return rc;
}

// The fixed prefix of a hang (acpsnap-replay(5)): a text block holding "partial".
static const char HANG_PREFIX[] = "{\"type\":\"text-delta\",\"index\":0,\"text\":\"partial\"}";

int as_sse_entry(const as_replay_entry *e, const as_sse_req *q, as_sse *s, char *err, size_t errn)
{
    as_replay_chunk ch = { .off = 0, .len = sizeof HANG_PREFIX - 1, .type = AS_CHUNK_TEXT_DELTA };
    as_replay_entry h = { .kind = AS_REPLAY_HANG, .json = (char *)HANG_PREFIX, .len = sizeof HANG_PREFIX - 1,
                          .chunk = &ch, .nchunks = 1 };
    if (e->kind == AS_REPLAY_HANG) e = &h;
    if (q->wire == AS_WIRE_RESPONSES) return as_wire_walk(e, q, s, &as_wire_responses, err, errn);
    if (q->wire == AS_WIRE_MESSAGES) return as_wire_walk(e, q, s, &as_wire_messages, err, errn);
    gen g = { .q = q, .s = s, .err = err, .errn = errn };
    return translate(&g, e, e->kind == AS_REPLAY_CHUNKS);
}

// ---------------------------------------------------------------- endpoints
static int ends_with(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && !memcmp(s + n - k, lit, k);
}

int as_wire_of_path(const char *path)
{
    size_t n = strlen(path);
    if (ends_with(path, n, "/chat/completions")) return AS_WIRE_CHAT;
    if (ends_with(path, n, "/responses")) return AS_WIRE_RESPONSES;
    if (ends_with(path, n, "/messages")) return AS_WIRE_MESSAGES;
    return -1;
}

int as_wire_cuts(as_wire w, const as_replay_entry *e)
{
    if (e->kind != AS_REPLAY_THROW) return 0;
    if (w == AS_WIRE_CHAT) return strcmp(e->code, "STREAM_CLOSED") != 0;
    return !strcmp(e->code, "TRANSPORT");
}

void as_wire_throw_status(as_wire w, const char *code, int *status, const char **type)
{
    static const struct { const char *code; int status; const char *openai, *anthropic; } T[] = {
        { "AUTH", 401, "authentication_error", "authentication_error" },
        { "QUOTA", 402, "unknown_error", "billing_error" },
        { "RATE_LIMIT", 429, "rate_limit_error", "rate_limit_error" },
        { "CONTEXT_WINDOW_EXCEEDED", 400, "invalid_request_error", "invalid_request_error" },
        { "INVALID_REQUEST", 400, "invalid_request_error", "invalid_request_error" },
        { "SERVER_OVERLOADED", 503, "server_error", "overloaded_error" },
    };
    *status = 500;
    *type = w == AS_WIRE_MESSAGES ? "api_error" : "server_error";
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (!strcmp(code, T[i].code)) {
            *status = T[i].status;
            *type = w == AS_WIRE_MESSAGES ? T[i].anthropic : T[i].openai;
        }
    if (w == AS_WIRE_MESSAGES && *status == 503) *status = 529;   // Anthropic's overloaded status
}

// Anthropic's error type of an HTTP status.
static const char *anthropic_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return "api_error";
    }
}

void as_wire_error_body(as_wire w, int status, const char *type, int from_throw, const char *msg, as_buf *out)
{
    if (w == AS_WIRE_MESSAGES) {
        if (!from_throw) type = anthropic_type(status);
        as_buf_puts(out, "{\"type\":\"error\",\"error\":{\"type\":");
        as_jstr_write(out, type, strlen(type));
        as_buf_puts(out, ",\"message\":");
        as_jstr_write(out, msg, strlen(msg));
        as_buf_puts(out, "}}");
        return;
    }
    as_buf_puts(out, "{\"error\":{\"message\":");
    as_jstr_write(out, msg, strlen(msg));
    as_buf_puts(out, ",\"type\":");
    as_jstr_write(out, type, strlen(type));
    as_buf_puts(out, ",\"param\":null,\"code\":");
    as_jstr_write(out, type, strlen(type));
    as_buf_puts(out, "}}");
}

// ---------------------------------------------------------------- item wires
void as_wire_ev(as_wgen *g, const char *type, int seq)
{
    as_buf_printf(&g->s->out, "event: %s\ndata: {\"type\":\"%s\"", type, type);
    if (seq) as_buf_printf(&g->s->out, ",\"sequence_number\":%ld", g->seq++);
}

void as_wire_ev_end(as_wgen *g)
{
    as_buf_puts(&g->s->out, "}\n\n");
    event_end(g->s);
}

int as_wire_put_str(as_wgen *g, const as_json *j, int tok, as_buf *out)
{
    if (tok < 0 || j->t[tok].type != AS_JSTR) {
        as_buf_puts(out, "\"\"");
        return 0;
    }
    return as_replay_resolve_str(j, tok, g->q->hay, g->q->lim, out, g->err, g->errn);
}

int64_t as_wire_int(const as_json *j, int obj, const char *key, int *present)
{
    return get_int(j, obj, key, present);
}

const char *as_wire_finish_kind(const as_wgen *g, as_buf *code)
{
    const as_json *fj = &g->fj;
    if (g->reason < 0 || fj->t[g->reason].type != AS_JOBJ) return "stop";
    int k = as_json_get(fj, g->reason, "kind");
    if (k >= 0 && as_json_streq(fj, k, "tool-calls")) return "tool-calls";
    if (k >= 0 && as_json_streq(fj, k, "max-tokens")) return "max-tokens";
    if (k >= 0 && as_json_streq(fj, k, "error")) {
        int c = as_json_get(fj, as_json_get(fj, g->reason, "failure"), "code");
        if (c >= 0 && fj->t[c].type == AS_JSTR) as_json_str(fj, c, code);
        return "error";
    }
    return "stop";
}

// Closes the open block (one at most: a block opens after the others closed).
static int close_open(as_wgen *g, const as_wire_ops *ops)
{
    if (g->open < 0) return 0;
    as_wblock *b = &g->b[g->open];
    g->open = -1;
    b->closed = 1;
    return ops->close(g, b);
}

static size_t slot_of(const as_wgen *g, int64_t idx)
{
    uint64_t h = (uint64_t)idx * 0x9E3779B97F4A7C15u;
    return (size_t)(h >> 32) & (g->nslot - 1);
}

// The last block with neutral index idx, or NULL (a hash of index to the
// newest block: a hostile entry of many blocks costs linear time).
static as_wblock *find_block(as_wgen *g, int64_t idx)
{
    if (!g->nslot) return NULL;
    for (size_t i = slot_of(g, idx);; i = (i + 1) & (g->nslot - 1)) {
        int k = g->slot[i];
        if (k < 0) return NULL;
        if (g->b[k].index == idx) return &g->b[k];
    }
}

// Block k is now the newest of its index.
static void index_block(as_wgen *g, int k)
{
    if (2 * (size_t)(g->nb + 1) > g->nslot) {   // grow, and re-enter the newest of each index
        free(g->slot);
        g->nslot = g->nslot ? 2 * g->nslot : 16;
        g->slot = as_xmalloc(g->nslot * sizeof *g->slot);
        for (size_t i = 0; i < g->nslot; i++) g->slot[i] = -1;
        for (int j = 0; j < k; j++) index_block(g, j);
    }
    size_t i = slot_of(g, g->b[k].index);
    while (g->slot[i] >= 0 && g->b[g->slot[i]].index != g->b[k].index) i = (i + 1) & (g->nslot - 1);
    g->slot[i] = k;
}

// Block idx of kind open for a delta: the open one, else a new one (the
// others closed first) named from j's id and name members (tool calls).
static as_wblock *take_block(as_wgen *g, const as_wire_ops *ops, int64_t idx, int kind,
                             const as_json *j, int obj, int *rc)
{
    as_wblock *b = find_block(g, idx);
    if (b && !b->closed && b->kind == kind) return b;
    if ((*rc = close_open(g, ops))) return NULL;
    if (g->nb == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->b = as_xrealloc(g->b, g->cap * sizeof *g->b);
    }
    b = &g->b[g->nb];
    *b = (as_wblock){ .index = idx, .kind = kind, .out = (int)g->nb };
    index_block(g, (int)g->nb);
    g->nb++;
    g->open = b->out;
    if (kind == AS_WB_TOOL && ((*rc = as_wire_put_str(g, j, as_json_get(j, obj, "id"), &b->id)) ||
                               (*rc = as_wire_put_str(g, j, as_json_get(j, obj, "name"), &b->name))))
        return NULL;
    if ((*rc = ops->open(g, b))) return NULL;
    return b;
}

// One delta: string member tok of j onto block b.
static int walk_delta(as_wgen *g, const as_wire_ops *ops, as_wblock *b, const as_json *j, int tok)
{
    as_buf_reset(&g->tmp);
    if (as_wire_put_str(g, j, tok, &g->tmp)) return -1;
    as_buf_put(&b->acc, g->tmp.p + 1, g->tmp.n - 2);
    return ops->delta(g, b, g->tmp.p, g->tmp.n);
}

static int walk_chunk(as_wgen *g, const as_wire_ops *ops, const as_json *j, int type)
{
    int pres, rc = 0;
    int64_t idx = get_int(j, 0, "index", &pres);
    as_wblock *b;
    switch (type) {
    case AS_CHUNK_TEXT_DELTA:
    case AS_CHUNK_REASONING_DELTA:
        b = take_block(g, ops, idx, type == AS_CHUNK_TEXT_DELTA ? AS_WB_TEXT : AS_WB_REASONING, j, 0, &rc);
        return b ? walk_delta(g, ops, b, j, as_json_get(j, 0, "text")) : rc;
    case AS_CHUNK_TOOL_CALL_DELTA:
        b = take_block(g, ops, idx, AS_WB_TOOL, j, 0, &rc);
        return b ? walk_delta(g, ops, b, j, as_json_get(j, 0, "argumentsDelta")) : rc;
    case AS_CHUNK_BLOCK_END: {
        b = find_block(g, idx);
        if (b)   // it streamed: close it, unless another block did already
            return b->closed ? 0 : close_open(g, ops);
        // it streamed nothing: the whole block, as one delta
        int blk = as_json_get(j, 0, "block");
        int ty = as_json_get(j, blk, "type"), kind, content;
        if (AS_TOK_IS(j, ty, "text")) kind = AS_WB_TEXT, content = as_json_get(j, blk, "text");
        else if (AS_TOK_IS(j, ty, "reasoning")) kind = AS_WB_REASONING, content = as_json_get(j, blk, "text");
        else if (AS_TOK_IS(j, ty, "tool-call")) kind = AS_WB_TOOL, content = as_json_get(j, blk, "arguments");
        else return 0;
        b = take_block(g, ops, idx, kind, j, blk, &rc);
        if (!b) return rc;
        if (content >= 0 && as_tok_len(j, content) > 2 && walk_delta(g, ops, b, j, content)) return -1;
        return close_open(g, ops);
    }
    default:    // block-start: a block opens with its first delta
        return 0;
    }
}

int as_wire_walk(const as_replay_entry *e, const as_sse_req *q, as_sse *s, const as_wire_ops *ops,
                 char *err, size_t errn)
{
    as_wgen g = { .q = q, .s = s, .e = e, .err = err, .errn = errn, .usage = -1, .reason = -1, .open = -1 };
    as_json j = {0};
    int rc = 0;
    // usage and finish first: Messages announces the input tokens up front
    for (size_t k = 0; k < e->nchunks; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (c->type == AS_CHUNK_USAGE && as_json_parse(&g.uj, e->json + c->off, c->len) == 0)
            g.usage = as_json_get(&g.uj, 0, "usage");
        else if (c->type == AS_CHUNK_FINISH && as_json_parse(&g.fj, e->json + c->off, c->len) == 0)
            g.reason = as_json_get(&g.fj, 0, "reason");
    }
    if (g.usage >= 0 && g.uj.t[g.usage].type != AS_JOBJ) g.usage = -1;
    rc = ops->begin(&g);
    for (size_t k = 0; k < e->nchunks && !rc; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (as_json_parse(&j, e->json + c->off, c->len)) {
            snprintf(err, errn, "chunk %zu does not parse", k);
            rc = -1;
        } else if (c->type != AS_CHUNK_USAGE && c->type != AS_CHUNK_FINISH) {
            rc = walk_chunk(&g, ops, &j, c->type);
        }
        if (!rc && q->lim && q->lim->stop && *q->lim->stop) {
            snprintf(err, errn, "stopped (shutting down)");
            rc = -1;
        }
    }
    if (!rc && e->kind == AS_REPLAY_CHUNKS) {
        rc = close_open(&g, ops);
        if (!rc) rc = ops->finish(&g);
    } else if (!rc && e->kind == AS_REPLAY_THROW && strcmp(e->code, "STREAM_CLOSED") && strcmp(e->code, "TRANSPORT")) {
        rc = ops->fail(&g);
    }
    for (size_t i = 0; i < g.nb; i++) {
        as_buf_free(&g.b[i].acc);
        as_buf_free(&g.b[i].id);
        as_buf_free(&g.b[i].name);
    }
    free(g.b);
    free(g.slot);
    as_buf_free(&g.tmp);
    as_json_free(&j);
    as_json_free(&g.uj);
    as_json_free(&g.fj);
    return rc;
}
