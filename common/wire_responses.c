// wire_responses.c - a replay entry as the OpenAI Responses stream
// replay-serve(1) sends on .../responses: response.created and
// response.in_progress, each block as one output item (a message with one
// output_text part, a reasoning item with one summary part, a function_call)
// added, streamed and done, then one terminal event: response.completed,
// response.incomplete (max-tokens) or response.failed (an error finish; a
// throw, after an error event). Every event carries its sequence_number; ids are minted from the
// request number, so a stream is the same bytes on every run.
#include "acpsnap.h"
#include "replay.h"
#include "wire.h"

#include <string.h>

// Block b's deltas as one JSON string.
static void put_acc(as_buf *o, const as_wblock *b)
{
    as_buf_putc(o, '"');
    as_buf_put(o, b->acc.p, b->acc.n);
    as_buf_putc(o, '"');
}

static void ids(as_wgen *g, const as_wblock *b, as_buf *o)
{
    static const char *const pre[] = { "msg", "rs", "fc" };
    as_buf_printf(o, "\"%s_%012lx_%d\"", pre[b->kind], (unsigned long)g->q->request + 1, b->out);
}

static void item_ref(as_wgen *g, const as_wblock *b)
{
    as_buf *o = &g->s->out;
    as_buf_puts(o, ",\"item_id\":");
    ids(g, b, o);
    as_buf_printf(o, ",\"output_index\":%d", b->out);
}

// The item of block b: added (in progress, empty) or done (whole).
static void item(as_wgen *g, const as_wblock *b, int done, as_buf *o)
{
    as_buf_puts(o, "{\"id\":");
    ids(g, b, o);
    switch (b->kind) {
    case AS_WB_TEXT:
        as_buf_printf(o, ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                      done ? "completed" : "in_progress");
        if (done) {
            as_buf_puts(o, "{\"type\":\"output_text\",\"text\":");
            put_acc(o, b);
            as_buf_puts(o, ",\"annotations\":[]}");
        }
        as_buf_puts(o, "]}");
        break;
    case AS_WB_REASONING:
        as_buf_puts(o, ",\"type\":\"reasoning\",\"summary\":[");
        if (done) {
            as_buf_puts(o, "{\"type\":\"summary_text\",\"text\":");
            put_acc(o, b);
            as_buf_putc(o, '}');
        }
        as_buf_puts(o, "]}");
        break;
    default:
        as_buf_printf(o, ",\"type\":\"function_call\",\"status\":\"%s\",\"call_id\":", done ? "completed" : "in_progress");
        as_buf_put(o, b->id.p, b->id.n);
        as_buf_puts(o, ",\"name\":");
        as_buf_put(o, b->name.p, b->name.n);
        as_buf_puts(o, ",\"arguments\":");
        if (done) put_acc(o, b); else as_buf_puts(o, "\"\"");
        as_buf_putc(o, '}');
    }
}

static void usage(as_wgen *g, as_buf *o)
{
    if (g->usage < 0) { as_buf_puts(o, "null"); return; }
    int p;
    int64_t in = as_wire_int(&g->uj, g->usage, "inputTokens", &p);
    int64_t out = as_wire_int(&g->uj, g->usage, "outputTokens", &p);
    int64_t cache = as_wire_int(&g->uj, g->usage, "cacheReadTokens", &p);
    int64_t reas = as_wire_int(&g->uj, g->usage, "reasoningTokens", &p);
    as_buf_printf(o, "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":%lld},"
                  "\"output_tokens\":%lld,\"output_tokens_details\":{\"reasoning_tokens\":%lld},\"total_tokens\":%lld}",
                  (long long)(in + cache), (long long)cache, (long long)out, (long long)reas,
                  (long long)(in + cache + out));
}

// The error code Responses clients act on, from an acpsnap-replay(5) code.
static void error_code(const char *code, as_buf *o)
{
    static const char *const T[][2] = {
        { "CONTEXT_WINDOW_EXCEEDED", "context_length_exceeded" }, { "QUOTA", "insufficient_quota" },
        { "RATE_LIMIT", "rate_limit_exceeded" }, { "SERVER_OVERLOADED", "server_is_overloaded" },
        { "AUTH", "invalid_api_key" },
    };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (!strcmp(code, T[i][0])) { as_jstr_write(o, T[i][1], strlen(T[i][1])); return; }
    if (!*code) code = "server_error";
    as_buf low = {0};
    for (const char *c = code; *c; c++) as_buf_putc(&low, *c >= 'A' && *c <= 'Z' ? (char)(*c - 'A' + 'a') : *c);
    as_jstr_write(o, low.p, low.n);
    as_buf_free(&low);
}

// ,"response":{…} with the given status, error and incomplete_details (JSON
// text); final: the output holds the items done so far, and the usage.
static void response(as_wgen *g, const char *status, const char *error, const char *incomplete, int final)
{
    as_buf *o = &g->s->out;
    as_buf_printf(o, ",\"response\":{\"id\":\"resp_%012lx\",\"object\":\"response\",\"created_at\":%lld,"
                  "\"status\":\"%s\",\"error\":%s,\"incomplete_details\":%s,\"model\":",
                  (unsigned long)g->q->request + 1, g->q->created, status, error, incomplete);
    as_buf_put(o, g->q->model, g->q->model_len);
    as_buf_puts(o, ",\"output\":[");
    int first = 1;
    for (size_t i = 0; final && i < g->nb; i++) {
        if (!g->b[i].closed) continue;
        if (!first) as_buf_putc(o, ',');
        first = 0;
        item(g, &g->b[i], 1, o);
    }
    as_buf_puts(o, "],\"usage\":");
    if (final && !strcmp(status, "failed")) as_buf_puts(o, "null");
    else if (final) usage(g, o);
    else as_buf_puts(o, "null");
    as_buf_putc(o, '}');
}

static int begin(as_wgen *g)
{
    as_wire_ev(g, "response.created", 1);
    response(g, "in_progress", "null", "null", 0);
    as_wire_ev_end(g);
    as_wire_ev(g, "response.in_progress", 1);
    response(g, "in_progress", "null", "null", 0);
    as_wire_ev_end(g);
    return 0;
}

static int open_item(as_wgen *g, as_wblock *b)
{
    as_buf *o = &g->s->out;
    as_wire_ev(g, "response.output_item.added", 1);
    as_buf_printf(o, ",\"output_index\":%d,\"item\":", b->out);
    item(g, b, 0, o);
    as_wire_ev_end(g);
    if (b->kind == AS_WB_TEXT) {
        as_wire_ev(g, "response.content_part.added", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}");
        as_wire_ev_end(g);
    } else if (b->kind == AS_WB_REASONING) {
        as_wire_ev(g, "response.reasoning_summary_part.added", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}");
        as_wire_ev_end(g);
    }
    return 0;
}

static int delta(as_wgen *g, as_wblock *b, const char *str, size_t n)
{
    as_buf *o = &g->s->out;
    static const char *const ev[] = { "response.output_text.delta", "response.reasoning_summary_text.delta",
                                      "response.function_call_arguments.delta" };
    as_wire_ev(g, ev[b->kind], 1);
    item_ref(g, b);
    if (b->kind == AS_WB_TEXT) as_buf_puts(o, ",\"content_index\":0");
    if (b->kind == AS_WB_REASONING) as_buf_puts(o, ",\"summary_index\":0");
    as_buf_puts(o, ",\"delta\":");
    as_buf_put(o, str, n);
    if (b->kind == AS_WB_TEXT) as_buf_puts(o, ",\"logprobs\":[]");
    as_wire_ev_end(g);
    return 0;
}

static int close_item(as_wgen *g, as_wblock *b)
{
    as_buf *o = &g->s->out;
    if (b->kind == AS_WB_TEXT) {
        as_wire_ev(g, "response.output_text.done", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"content_index\":0,\"text\":");
        put_acc(o, b);
        as_buf_puts(o, ",\"logprobs\":[]");
        as_wire_ev_end(g);
        as_wire_ev(g, "response.content_part.done", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":");
        put_acc(o, b);
        as_buf_puts(o, ",\"annotations\":[]}");
        as_wire_ev_end(g);
    } else if (b->kind == AS_WB_REASONING) {
        as_wire_ev(g, "response.reasoning_summary_text.done", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"summary_index\":0,\"text\":");
        put_acc(o, b);
        as_wire_ev_end(g);
        as_wire_ev(g, "response.reasoning_summary_part.done", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":");
        put_acc(o, b);
        as_buf_putc(o, '}');
        as_wire_ev_end(g);
    } else {
        as_wire_ev(g, "response.function_call_arguments.done", 1);
        item_ref(g, b);
        as_buf_puts(o, ",\"name\":");
        as_buf_put(o, b->name.p, b->name.n);
        as_buf_puts(o, ",\"arguments\":");
        put_acc(o, b);
        as_wire_ev_end(g);
    }
    as_wire_ev(g, "response.output_item.done", 1);
    as_buf_printf(o, ",\"output_index\":%d,\"item\":", b->out);
    item(g, b, 1, o);
    as_wire_ev_end(g);
    return 0;
}

// response.failed with error {code, message}: message a JSON string.
static void failed(as_wgen *g, const char *code, const char *message, size_t mlen)
{
    as_buf err = {0};
    as_buf_puts(&err, "{\"code\":");
    error_code(code, &err);
    as_buf_puts(&err, ",\"message\":");
    as_buf_put(&err, message, mlen);
    as_buf_putc(&err, '}');
    as_wire_ev(g, "response.failed", 1);
    response(g, "failed", err.p, "null", 1);
    as_wire_ev_end(g);
    as_buf_free(&err);
}

static int finish(as_wgen *g)
{
    as_buf code = {0};
    const char *kind = as_wire_finish_kind(g, &code);
    int rc = 0;
    if (!strcmp(kind, "max-tokens")) {
        as_wire_ev(g, "response.incomplete", 1);
        response(g, "incomplete", "null", "{\"reason\":\"max_output_tokens\"}", 1);
        as_wire_ev_end(g);
    } else if (!strcmp(kind, "error")) {
        as_buf msg = {0};
        int f = as_json_get(&g->fj, g->reason, "failure");
        rc = as_wire_put_str(g, &g->fj, as_json_get(&g->fj, f, "message"), &msg);
        if (!rc) failed(g, code.n ? code.p : "", msg.p, msg.n);
        as_buf_free(&msg);
    } else {
        as_wire_ev(g, "response.completed", 1);
        response(g, "completed", "null", "null", 1);
        as_wire_ev_end(g);
    }
    as_buf_free(&code);
    return rc;
}

// A throw: an error event (the SDK throws on it), then response.failed
// (codex acts on its code).
static int fail(as_wgen *g)
{
    as_buf msg = {0};
    as_jstr_write(&msg, g->e->message, strlen(g->e->message));
    as_wire_ev(g, "error", 1);
    as_buf_puts(&g->s->out, ",\"code\":");
    error_code(g->e->code, &g->s->out);
    as_buf_puts(&g->s->out, ",\"message\":");
    as_buf_put(&g->s->out, msg.p, msg.n);
    as_buf_puts(&g->s->out, ",\"param\":null");
    as_wire_ev_end(g);
    failed(g, g->e->code, msg.p, msg.n);
    as_buf_free(&msg);
    return 0;
}

const as_wire_ops as_wire_responses = { begin, open_item, delta, close_item, finish, fail };
