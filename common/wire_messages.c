// wire_messages.c - a replay entry as the Anthropic Messages stream
// replay-serve(1) sends on .../messages: message_start (with the input
// usage), each block as content_block_start, its deltas (text_delta,
// thinking_delta, input_json_delta) and content_block_stop, a ping after the
// first block start, then message_delta (stop_reason, output usage) and
// message_stop; a throw ends with an error event instead. The message id is
// minted from the request number, so a stream is the same bytes on every run.
#include "acpsnap.h"
#include "replay.h"
#include "wire.h"

#include <string.h>

static int64_t usage_of(as_wgen *g, const char *key)
{
    int p;
    return g->usage < 0 ? 0 : as_wire_int(&g->uj, g->usage, key, &p);
}

static int begin(as_wgen *g)
{
    as_buf *o = &g->s->out;
    as_wire_ev(g, "message_start", 0);
    as_buf_printf(o, ",\"message\":{\"id\":\"msg_%012lx\",\"type\":\"message\",\"role\":\"assistant\",\"model\":",
                  (unsigned long)g->q->request + 1);
    as_buf_put(o, g->q->model, g->q->model_len);
    as_buf_printf(o, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":%lld,"
                  "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":%lld,\"output_tokens\":0}}",
                  (long long)usage_of(g, "inputTokens"), (long long)usage_of(g, "cacheReadTokens"));
    as_wire_ev_end(g);
    return 0;
}

static int open_block(as_wgen *g, as_wblock *b)
{
    as_buf *o = &g->s->out;
    as_wire_ev(g, "content_block_start", 0);
    as_buf_printf(o, ",\"index\":%d,\"content_block\":", b->out);
    if (b->kind == AS_WB_TEXT) as_buf_puts(o, "{\"type\":\"text\",\"text\":\"\"}");
    else if (b->kind == AS_WB_REASONING) as_buf_puts(o, "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}");
    else {
        as_buf_puts(o, "{\"type\":\"tool_use\",\"id\":");
        as_buf_put(o, b->id.p, b->id.n);
        as_buf_puts(o, ",\"name\":");
        as_buf_put(o, b->name.p, b->name.n);
        as_buf_puts(o, ",\"input\":{}}");
    }
    as_wire_ev_end(g);
    if (b->out == 0) {   // where Anthropic sends its first ping
        as_wire_ev(g, "ping", 0);
        as_wire_ev_end(g);
    }
    return 0;
}

static int delta(as_wgen *g, as_wblock *b, const char *str, size_t n)
{
    static const char *const field[] = { "text_delta\",\"text", "thinking_delta\",\"thinking",
                                         "input_json_delta\",\"partial_json" };
    as_buf *o = &g->s->out;
    as_wire_ev(g, "content_block_delta", 0);
    as_buf_printf(o, ",\"index\":%d,\"delta\":{\"type\":\"%s\":", b->out, field[b->kind]);
    as_buf_put(o, str, n);
    as_buf_putc(o, '}');
    as_wire_ev_end(g);
    return 0;
}

static int close_block(as_wgen *g, as_wblock *b)
{
    as_wire_ev(g, "content_block_stop", 0);
    as_buf_printf(&g->s->out, ",\"index\":%d", b->out);
    as_wire_ev_end(g);
    return 0;
}

static int finish(as_wgen *g)
{
    as_buf code = {0};
    const char *kind = as_wire_finish_kind(g, &code);
    const char *stop = !strcmp(kind, "tool-calls") ? "tool_use"
                     : !strcmp(kind, "max-tokens") ? "max_tokens"
                     : !strcmp(kind, "error") ? "refusal" : "end_turn";
    as_buf_free(&code);
    as_wire_ev(g, "message_delta", 0);
    as_buf_printf(&g->s->out, ",\"delta\":{\"stop_reason\":\"%s\",\"stop_sequence\":null},"
                  "\"usage\":{\"output_tokens\":%lld}", stop, (long long)usage_of(g, "outputTokens"));
    as_wire_ev_end(g);
    as_wire_ev(g, "message_stop", 0);
    as_wire_ev_end(g);
    return 0;
}

static int fail(as_wgen *g)
{
    int status;
    const char *type;
    as_wire_throw_status(AS_WIRE_MESSAGES, g->e->code, &status, &type);
    as_buf *o = &g->s->out;
    as_wire_ev(g, "error", 0);
    as_buf_printf(o, ",\"error\":{\"type\":\"%s\",\"message\":", type);
    as_jstr_write(o, g->e->message, strlen(g->e->message));
    as_buf_putc(o, '}');
    as_wire_ev_end(g);
    return 0;
}

const as_wire_ops as_wire_messages = { begin, open_block, delta, close_block, finish, fail };
