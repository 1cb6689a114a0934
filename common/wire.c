// wire.c - a replay entry as the DeepSeek chat-completions stream
// replay-serve(1) sends (replay.h): each provider-neutral chunk back into the
// chat.completion.chunk objects DeepSeek streams, in DeepSeek's field order,
// so that an agent's DeepSeek adapter turns them into the same chunks again.
//
// Every string that goes on the wire is a JSON string token of the entry
// (its bytes copied, or resolved and re-encoded when it holds a
// {{fromRequest:…}} placeholder), so each event is one JSON value even for
// an entry whose members are missing or mistyped (those read as empty).
#include "acpsnap.h"
#include "replay.h"

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

int as_sse_entry(const as_replay_entry *e, const as_sse_req *q, as_sse *s, char *err, size_t errn)
{
    gen g = { .q = q, .s = s, .err = err, .errn = errn };
    if (e->kind != AS_REPLAY_HANG) return translate(&g, e, e->kind == AS_REPLAY_CHUNKS);
    // The fixed prefix of a hang (acpsnap-replay(5)): a text block holding "partial".
    static const char PREFIX[] = "{\"type\":\"text-delta\",\"index\":0,\"text\":\"partial\"}";
    as_replay_chunk ch = { .off = 0, .len = sizeof PREFIX - 1, .type = AS_CHUNK_TEXT_DELTA };
    as_replay_entry h = { .kind = AS_REPLAY_HANG, .json = (char *)PREFIX, .len = sizeof PREFIX - 1,
                          .chunk = &ch, .nchunks = 1 };
    return translate(&g, &h, 0);
}
