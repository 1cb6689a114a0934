// loop.c - the agent loop: a turn is steps; a step is one model call plus the
// tool calls it asked for. Runs on a turn thread per session/prompt.
#include <stdlib.h>
#include <string.h>
#include "acpsnap.h"
#include "agent.h"

enum { CALL_OK, CALL_FAILED, CALL_CANCELLED };
enum { B_NONE, B_TEXT, B_REASONING, B_TOOL };

typedef struct {
    int kind;
    as_buf acc;                 // deltas: text, or tool-call arguments
    char *id, *name;
    as_buf end;                 // the block-end "block" bytes, when seen
    // final values (after finalize)
    char *text;                 // text / reasoning / tool arguments, decoded
    as_buf bytes;               // the content block bytes
} block;

typedef struct {
    block *b; int nb;
    as_buf usage;               // usage object bytes
    char *finish;               // finish reason kind
    as_buf failure;             // finish reason "failure" object bytes (error finish)
    as_buf seqs;                // comma-separated chunk event seqs
    int nchunks, status;
    char *err_msg, *err_code;
} call;

static void call_free(call *c)
{
    for (int i = 0; i < c->nb; i++) {
        block *b = &c->b[i];
        as_buf_free(&b->acc); as_buf_free(&b->end); as_buf_free(&b->bytes);
        free(b->id); free(b->name); free(b->text);
    }
    free(c->b);
    as_buf_free(&c->usage); as_buf_free(&c->failure); as_buf_free(&c->seqs);
    free(c->finish); free(c->err_msg); free(c->err_code);
    memset(c, 0, sizeof *c);
}

static block *blk(call *c, int64_t idx)
{
    if (idx < 0 || idx > 4096) return NULL;
    if (idx >= c->nb) {
        c->b = as_xrealloc(c->b, (size_t)(idx + 1) * sizeof *c->b);
        memset(c->b + c->nb, 0, (size_t)(idx + 1 - c->nb) * sizeof *c->b);
        c->nb = (int)idx + 1;
    }
    return &c->b[idx];
}

static void setdup(char **dst, char *v) { if (v) { free(*dst); *dst = v; } }

// Folds one chunk into the call's blocks.
static void fold(call *c, const char *json, size_t len)
{
    as_json j = {0};
    if (as_json_parse(&j, json, len) || j.t[0].type != AS_JOBJ) { as_json_free(&j); return; }
    int t = as_json_get(&j, 0, "type"), ix = as_json_get(&j, 0, "index");
    int64_t idx = -1;
    if (ix >= 0) as_json_int(&j, ix, &idx);
    block *b = idx >= 0 ? blk(c, idx) : NULL;
    if (t < 0) { as_json_free(&j); return; }
    if (as_json_streq(&j, t, "block-start") && b) {
        int bt = as_json_get(&j, 0, "blockType");
        b->kind = bt < 0 ? B_NONE : as_json_streq(&j, bt, "text") ? B_TEXT
                : as_json_streq(&j, bt, "reasoning") ? B_REASONING
                : as_json_streq(&j, bt, "tool-call") ? B_TOOL : B_NONE;
    } else if ((as_json_streq(&j, t, "text-delta") || as_json_streq(&j, t, "reasoning-delta")) && b) {
        if (!b->kind) b->kind = as_json_streq(&j, t, "text-delta") ? B_TEXT : B_REASONING;
        int x = as_json_get(&j, 0, "text");
        if (x >= 0 && j.t[x].type == AS_JSTR) as_json_str(&j, x, &b->acc);
    } else if (as_json_streq(&j, t, "tool-call-delta") && b) {
        b->kind = B_TOOL;
        setdup(&b->id, json_getstr(&j, 0, "id"));
        setdup(&b->name, json_getstr(&j, 0, "name"));
        int x = as_json_get(&j, 0, "argumentsDelta");
        if (x >= 0 && j.t[x].type == AS_JSTR) as_json_str(&j, x, &b->acc);
    } else if (as_json_streq(&j, t, "block-end") && b) {
        int x = as_json_get(&j, 0, "block");
        if (x >= 0 && j.t[x].type == AS_JOBJ) {
            as_buf_reset(&b->end);
            as_buf_put(&b->end, as_tok_p(&j, x), as_tok_len(&j, x));
        }
    } else if (as_json_streq(&j, t, "usage")) {
        int x = as_json_get(&j, 0, "usage");
        if (x >= 0) { as_buf_reset(&c->usage); as_buf_put(&c->usage, as_tok_p(&j, x), as_tok_len(&j, x)); }
    } else if (as_json_streq(&j, t, "finish")) {
        int r = as_json_get(&j, 0, "reason");
        free(c->finish);
        c->finish = r >= 0 && j.t[r].type == AS_JOBJ ? json_getstr(&j, r, "kind") : NULL;
        if (!c->finish) c->finish = as_xstrdup("stop");
        int f = r >= 0 && j.t[r].type == AS_JOBJ ? as_json_get(&j, r, "failure") : -1;
        if (f >= 0) as_buf_put(&c->failure, as_tok_p(&j, f), as_tok_len(&j, f));
    }
    as_json_free(&j);
}

// Decides each block's final bytes and decoded values. interrupted: tool
// calls that were not completed are dropped.
static void finalize(call *c, int interrupted)
{
    for (int i = 0; i < c->nb; i++) {
        block *b = &c->b[i];
        as_buf_reset(&b->bytes);
        if (b->end.n) {
            as_json j = {0};
            if (as_json_parse(&j, b->end.p, b->end.n) == 0) {
                char *type = json_getstr(&j, 0, "type");
                if (type && !strcmp(type, "text")) b->kind = B_TEXT;
                else if (type && !strcmp(type, "reasoning")) b->kind = B_REASONING;
                else if (type && !strcmp(type, "tool-call")) b->kind = B_TOOL;
                free(type);
                if (b->kind == B_TOOL) {
                    setdup(&b->id, json_getstr(&j, 0, "id"));
                    setdup(&b->name, json_getstr(&j, 0, "name"));
                    setdup(&b->text, json_getstr(&j, 0, "arguments"));
                } else setdup(&b->text, json_getstr(&j, 0, "text"));
            }
            as_json_free(&j);
            as_buf_put(&b->bytes, b->end.p, b->end.n);
            if (!b->text) b->text = as_xstrdup("");
            continue;
        }
        if (b->kind == B_NONE || (b->kind == B_TOOL && interrupted)) { b->kind = B_NONE; continue; }
        b->text = as_xstrdup(b->acc.p ? b->acc.p : "");
        if (b->kind == B_TOOL) {
            as_buf_puts(&b->bytes, "{\"type\":\"tool-call\",\"id\":");
            jstr(&b->bytes, b->id ? b->id : "");
            as_buf_puts(&b->bytes, ",\"name\":");
            jstr(&b->bytes, b->name ? b->name : "");
            as_buf_puts(&b->bytes, ",\"arguments\":");
            jstr(&b->bytes, b->text);
            as_buf_putc(&b->bytes, '}');
        } else {
            as_buf_puts(&b->bytes, b->kind == B_TEXT ? "{\"type\":\"text\",\"text\":" : "{\"type\":\"reasoning\",\"text\":");
            jstr(&b->bytes, b->text);
            as_buf_putc(&b->bytes, '}');
        }
    }
}

// ---------------------------------------------------------------- requests

static char *system_prompt(const session *s)
{
    as_buf b = {0};
    for (const char *p = ag.cfg.system_prompt; *p; ) {
        if (!strncmp(p, "{{cwd}}", 7)) { as_buf_puts(&b, s->cwd); p += 7; }
        else if (!strncmp(p, "{{model}}", 9)) { as_buf_puts(&b, ag.cfg.model); p += 9; }
        else as_buf_putc(&b, *p++);
    }
    if (!b.p) as_buf_puts(&b, "");
    return b.p;
}

static void render_messages(const session *s, const char *sys, const char *extra_user, as_buf *out)
{
    as_buf_puts(out, "[{\"role\":\"system\",\"content\":");
    jstr(out, sys);
    as_buf_putc(out, '}');
    for (size_t i = 0; i < s->nhist; i++) {
        as_buf_putc(out, ',');
        as_buf_put(out, s->hist[i].p, s->hist[i].n);
    }
    if (extra_user) {
        as_buf_puts(out, ",{\"role\":\"user\",\"content\":");
        jstr(out, extra_user);
        as_buf_putc(out, '}');
    }
    as_buf_putc(out, ']');
}

static size_t context_estimate(const session *s, const char *sys)
{
    size_t n = strlen(sys);
    for (size_t i = 0; i < s->nhist; i++) n += s->hist[i].n;
    return n / 4;
}

static void push_user(session *s, const char *text)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"role\":\"user\",\"content\":");
    jstr(&b, text);
    as_buf_putc(&b, '}');
    hist_push(s, b.p, b.n);
    as_buf_free(&b);
}

// The OpenAI-style assistant message of a content block array (token arr of j).
static void oai_assistant(const as_json *j, int arr, as_buf *out)
{
    as_buf text = {0}, reas = {0}, calls = {0};
    int ncalls = 0;
    for (int el = as_json_first(j, arr); el >= 0; el = as_json_nextel(j, el)) {
        if (j->t[el].type != AS_JOBJ) continue;
        char *type = json_getstr(j, el, "type");
        if (!type) continue;
        if (!strcmp(type, "text") || !strcmp(type, "reasoning")) {
            int x = as_json_get(j, el, "text");
            if (x >= 0 && j->t[x].type == AS_JSTR) as_json_str(j, x, !strcmp(type, "text") ? &text : &reas);
        } else if (!strcmp(type, "tool-call")) {
            char *id = json_getstr(j, el, "id"), *name = json_getstr(j, el, "name"),
                 *args = json_getstr(j, el, "arguments");
            as_buf_puts(&calls, ncalls++ ? ",{\"id\":" : "{\"id\":");
            jstr(&calls, id ? id : "");
            as_buf_puts(&calls, ",\"type\":\"function\",\"function\":{\"name\":");
            jstr(&calls, name ? name : "");
            as_buf_puts(&calls, ",\"arguments\":");
            jstr(&calls, args ? args : "");
            as_buf_puts(&calls, "}}");
            free(id); free(name); free(args);
        }
        free(type);
    }
    as_buf_puts(out, "{\"role\":\"assistant\",\"content\":");
    as_jstr_write(out, text.p ? text.p : "", text.n);
    if (reas.n) { as_buf_puts(out, ",\"reasoning_content\":"); as_jstr_write(out, reas.p, reas.n); }
    if (ncalls) { as_buf_puts(out, ",\"tool_calls\":["); as_buf_put(out, calls.p, calls.n); as_buf_putc(out, ']'); }
    as_buf_putc(out, '}');
    as_buf_free(&text); as_buf_free(&reas); as_buf_free(&calls);
}

static void push_tool(session *s, const char *call_id, const char *text)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"role\":\"tool\",\"tool_call_id\":");
    jstr(&b, call_id);
    as_buf_puts(&b, ",\"content\":");
    jstr(&b, text);
    as_buf_putc(&b, '}');
    hist_push(s, b.p, b.n);
    as_buf_free(&b);
}

static void hist_clear(session *s)
{
    for (size_t i = 0; i < s->nhist; i++) as_buf_free(&s->hist[i]);
    s->nhist = 0;
}

// ---------------------------------------------------------------- one model call

// Streams one model call. record: persist its chunks as assistant/chunk.
static void model_call(session *s, int turn, int step, const char *messages, int with_tools,
                       int record, call *c)
{
    model_req req = {messages, with_tools ? tools_openai_json() : NULL, s->cwd};
    stream *st = ag.cfg.replay ? replay_start(&req) : deepseek_start(&ag.cfg, &req);
    as_buf data = {0};
    chunk *ch;
    while ((ch = stream_next(st, &s->cancel))) {
        c->nchunks++;
        if (record) {
            as_buf_reset(&data);
            as_buf_printf(&data, "{\"turn\":%d,\"step\":%d,\"chunk\":", turn, step);
            as_buf_put(&data, ch->json, ch->len);
            as_buf_putc(&data, '}');
            int64_t seq = persist_event(s->log, "assistant/chunk", data.p, data.n, NULL);
            as_buf_printf(&c->seqs, "%s%lld", c->seqs.n ? "," : "", (long long)seq);
        }
        fold(c, ch->json, ch->len);
        chunk_free(ch);
    }
    as_buf_free(&data);
    pthread_mutex_lock(&ag.mu);
    int done = st->done;
    if (done == 2) { c->err_msg = as_xstrdup(st->err_msg); c->err_code = as_xstrdup(st->err_code); }
    pthread_mutex_unlock(&ag.mu);
    stream_close(st);
    if (!done) c->status = CALL_CANCELLED;
    else if (done == 2) c->status = CALL_FAILED;
    else if (!c->finish) {
        c->status = CALL_FAILED;
        c->err_msg = as_xstrdup("the model stream ended without a finish chunk");
        c->err_code = as_xstrdup("STREAM_CLOSED");
    } else if (!strcmp(c->finish, "error")) {
        c->status = CALL_FAILED;
        as_json j = {0};
        if (c->failure.n && as_json_parse(&j, c->failure.p, c->failure.n) == 0) {
            c->err_msg = json_getstr(&j, 0, "message");
            c->err_code = json_getstr(&j, 0, "code");
        }
        as_json_free(&j);
        if (!c->err_msg) c->err_msg = as_xstrdup("the model stream finished with an error");
        if (!c->err_code) c->err_code = as_xstrdup("UNKNOWN");
    } else c->status = CALL_OK;
    finalize(c, c->status != CALL_OK);
}

// ---------------------------------------------------------------- events

static void ev(session *s, const char *type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ev(session *s, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *d = NULL;
    if (vasprintf(&d, fmt, ap) < 0) as_die_sys("allocate");
    va_end(ap);
    persist_event(s->log, type, d, strlen(d), NULL);
    free(d);
}

static void agent_text(session *s, const char *text)
{
    as_buf u = {0};
    as_buf_puts(&u, "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":");
    jstr(&u, text);
    as_buf_puts(&u, "}}");
    acp_notify_update(s, u.p);
    as_buf_free(&u);
}

// The configured "provider":…,"model":… members.
static void provider_model(as_buf *b)
{
    as_buf_puts(b, "\"provider\":");
    jstr(b, ag.cfg.provider);
    as_buf_puts(b, ",\"model\":");
    jstr(b, ag.cfg.model);
}

// The blocks of c that hold content, as a JSON array appended to out;
// returns how many. With text non-NULL, the texts of its text blocks are
// appended to text too.
static int blocks_json(const call *c, as_buf *out, as_buf *text)
{
    int n = 0;
    as_buf_putc(out, '[');
    for (int i = 0; i < c->nb; i++) {
        const block *b = &c->b[i];
        if (b->kind == B_NONE || !b->bytes.n) continue;
        if (n++) as_buf_putc(out, ',');
        as_buf_put(out, b->bytes.p, b->bytes.n);
        if (text && b->kind == B_TEXT) as_buf_puts(text, b->text);
    }
    as_buf_putc(out, ']');
    return n;
}

// Records assistant/message for c and sends its committed text blocks.
// Returns 0 when nothing was recorded (an interrupted call with no content).
static int commit_message(session *s, int turn, int step, call *c, int interrupted)
{
    as_buf content = {0}, d = {0}, extra = {0};
    int n = blocks_json(c, &content, NULL);
    if (interrupted && !n) { as_buf_free(&content); return 0; }
    char mid[37];
    uuid_v4(mid);
    as_buf_printf(&d, "{\"turn\":%d,\"step\":%d,\"message\":{\"role\":\"assistant\",\"content\":", turn, step);
    as_buf_put(&d, content.p, content.n);
    as_buf_puts(&d, ",\"source\":{\"kind\":\"model\",");
    provider_model(&d);
    as_buf_puts(&d, "},\"id\":");
    jstr(&d, mid);
    as_buf_putc(&d, '}');
    if (c->usage.n) { as_buf_puts(&d, ",\"usage\":"); as_buf_put(&d, c->usage.p, c->usage.n); }
    if (interrupted) as_buf_puts(&d, ",\"interrupted\":true");
    as_buf_putc(&d, '}');
    as_buf_printf(&extra, "\"sourceEventSeqs\":[%s],\"surfaceOp\":\"append\"", c->seqs.p ? c->seqs.p : "");
    persist_event(s->log, "assistant/message", d.p, d.n, extra.p);
    // the conversation
    as_json j = {0};
    as_buf m = {0};
    if (as_json_parse(&j, content.p, content.n) == 0) {
        oai_assistant(&j, 0, &m);
        hist_push(s, m.p, m.n);
    }
    as_json_free(&j);
    for (int i = 0; i < c->nb; i++)
        if (c->b[i].kind == B_TEXT && c->b[i].text && *c->b[i].text) agent_text(s, c->b[i].text);
    as_buf_free(&m); as_buf_free(&content); as_buf_free(&d); as_buf_free(&extra);
    return 1;
}

static void write_header(session *s, const char *sys)
{
    as_buf h = {0};
    as_buf_puts(&h, "{\"config\":{");
    provider_model(&h);
    as_buf_puts(&h, "},\"system\":");
    jstr(&h, sys);
    as_buf_puts(&h, ",\"tools\":");
    as_buf_puts(&h, tools_header_json());
    as_buf_putc(&h, '}');
    if (!s->last_header || strcmp(s->last_header, h.p)) {
        static const char *reasons[] = {"initial", "resume", "change"};
        as_buf d = {0};
        as_buf_puts(&d, "{\"header\":");
        as_buf_put(&d, h.p, h.n);
        as_buf_printf(&d, ",\"reason\":\"%s\"}", reasons[s->header_reason]);
        persist_event(s->log, "request/header", d.p, d.n, NULL);
        as_buf_free(&d);
        free(s->last_header);
        s->last_header = h.p;
        s->header_reason = 2;
    } else as_buf_free(&h);
}

// Summarizes the conversation with one model call (no tools) and replaces the
// history with the summary. Returns the call status.
static int compact(session *s, int turn, int step, call *out)
{
    static const char INSTR[] =
        "Summarize the conversation so far for your own later use: the user's goals, what was "
        "done, the facts learned, and what remains. Reply with the summary only.";
    as_buf msgs = {0};
    render_messages(s, "You write concise, complete summaries of agent conversations.", INSTR, &msgs);
    model_call(s, turn, step, msgs.p, 0, 0, out);
    as_buf_free(&msgs);
    if (out->status != CALL_OK) {
        // the summarizer's partial output is not the step's assistant message
        for (int i = 0; i < out->nb; i++) out->b[i].kind = B_NONE, as_buf_reset(&out->b[i].bytes);
        return out->status;
    }
    as_buf summary = {0}, raw = {0}, d = {0};
    blocks_json(out, &raw, &summary);
    if (!summary.p) as_buf_puts(&summary, "");
    as_buf_printf(&d, "{\"turn\":%d,\"step\":%d,\"summary\":", turn, step);
    jstr(&d, summary.p);
    as_buf_puts(&d, ",\"rawOutput\":");
    as_buf_put(&d, raw.p, raw.n);
    if (out->usage.n) { as_buf_puts(&d, ",\"usage\":"); as_buf_put(&d, out->usage.p, out->usage.n); }
    as_buf_puts(&d, ",\"llmStreamCall\":true}");
    persist_event(s->log, "compaction/summary", d.p, d.n, NULL);
    hist_clear(s);
    as_buf m = {0};
    as_buf_printf(&m, "Summary of the conversation so far:\n%s", summary.p);
    push_user(s, m.p);
    if (step == 1) push_user(s, s->prompt_text);   // the prompt this turn works on
    as_buf_free(&m); as_buf_free(&summary); as_buf_free(&raw); as_buf_free(&d);
    return CALL_OK;
}

// ---------------------------------------------------------------- tools

static void tool_updates(session *s, const block *b)
{
    as_buf u = {0};
    static const char *kinds[][2] = {{"bash", "execute"}, {"read_file", "read"}, {"write_file", "edit"}};
    const char *kind = "other";
    for (size_t i = 0; i < 3; i++) if (b->name && !strcmp(b->name, kinds[i][0])) kind = kinds[i][1];
    as_buf_puts(&u, "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":");
    jstr(&u, b->id ? b->id : "");
    as_buf_puts(&u, ",\"title\":");
    jstr(&u, b->name ? b->name : "");
    as_buf_printf(&u, ",\"kind\":\"%s\",\"status\":\"pending\"", kind);
    as_json j = {0};
    if (b->text && as_json_parse(&j, b->text, strlen(b->text)) == 0 && j.t[0].type == AS_JOBJ) {
        as_buf_puts(&u, ",\"rawInput\":");
        as_json_compact(b->text, strlen(b->text), &u);
    }
    as_json_free(&j);
    as_buf_putc(&u, '}');
    acp_notify_update(s, u.p);
    as_buf_free(&u);
}

static void tool_done(session *s, int turn, int step, const block *b, int64_t call_seq,
                      const char *text, int is_error)
{
    char rid[37];
    uuid_v4(rid);
    as_buf d = {0}, extra = {0}, u = {0};
    as_buf_printf(&d, "{\"turn\":%d,\"step\":%d,\"message\":{\"source\":{\"kind\":\"tool\",\"callId\":", turn, step);
    jstr(&d, b->id);
    as_buf_puts(&d, "},\"content\":[{\"type\":\"tool-result\",\"toolCallId\":");
    jstr(&d, b->id);
    as_buf_puts(&d, ",\"content\":[{\"type\":\"text\",\"text\":");
    jstr(&d, text);
    as_buf_printf(&d, "}],\"isError\":%s}],\"role\":\"user\",\"id\":", is_error ? "true" : "false");
    jstr(&d, rid);
    as_buf_puts(&d, "}}");
    as_buf_printf(&extra, "\"sourceEventSeqs\":[%lld],\"surfaceOp\":\"append\"", (long long)call_seq);
    persist_event(s->log, "tool/result", d.p, d.n, extra.p);
    push_tool(s, b->id, text);
    as_buf_puts(&u, "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":");
    jstr(&u, b->id);
    as_buf_printf(&u, ",\"status\":\"%s\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":",
                  is_error ? "failed" : "completed");
    jstr(&u, text);
    as_buf_puts(&u, "}}]}");
    acp_notify_update(s, u.p);
    as_buf_free(&d); as_buf_free(&extra); as_buf_free(&u);
}

// Runs the step's tool calls. Returns 1 when the turn was cancelled.
static int run_tools(session *s, int turn, int step, call *c)
{
    int n = 0;
    for (int i = 0; i < c->nb; i++) if (c->b[i].kind == B_TOOL) n++;
    int64_t *seqs = as_xmalloc((size_t)(n ? n : 1) * sizeof *seqs);
    int k = 0;
    for (int i = 0; i < c->nb; i++) {
        block *b = &c->b[i];
        if (b->kind != B_TOOL) continue;
        if (!b->id) b->id = as_xstrdup("");
        if (!b->name) b->name = as_xstrdup("");
        as_buf d = {0};
        as_buf_printf(&d, "{\"turn\":%d,\"step\":%d,\"callId\":", turn, step);
        jstr(&d, b->id);
        as_buf_puts(&d, ",\"name\":");
        jstr(&d, b->name);
        as_buf_puts(&d, ",\"arguments\":");
        jstr(&d, b->text);
        as_buf_putc(&d, '}');
        seqs[k++] = persist_event(s->log, "tool/call", d.p, d.n, NULL);
        as_buf_free(&d);
        tool_updates(s, b);
    }
    int cancelled = 0;
    k = 0;
    for (int i = 0; i < c->nb; i++) {
        block *b = &c->b[i];
        if (b->kind != B_TOOL) continue;
        int64_t cseq = seqs[k++];
        if (cancelled || s->cancel) {
            cancelled = 1;
            tool_done(s, turn, step, b, cseq, "[cancelled]", 1);
            continue;
        }
        if (!tool_known(b->name)) {
            as_buf m = {0};
            as_buf_printf(&m, "error: unknown tool %s", b->name);
            tool_done(s, turn, step, b, cseq, m.p, 1);
            as_buf_free(&m);
            continue;
        }
        if (tool_needs_permission(b->name) && ag.cfg.permission != PERM_ALLOW) {
            int ok = 0;
            if (ag.cfg.permission == PERM_ASK) {
                char aid[37];
                uuid_v4(aid);
                as_buf d = {0};
                as_buf_puts(&d, "{\"id\":");
                jstr(&d, aid);
                as_buf_puts(&d, ",\"toolName\":");
                jstr(&d, b->name);
                as_buf_puts(&d, ",\"callId\":");
                jstr(&d, b->id);
                as_buf_puts(&d, ",\"reason\":\"the permission policy asks before this tool\"}");
                persist_event(s->log, "approval/asked", d.p, d.n, NULL);
                persist_flush(s->log);
                ok = acp_ask_permission(s, b->id, b->name);
                as_buf_reset(&d);
                as_buf_puts(&d, "{\"id\":");
                jstr(&d, aid);
                as_buf_printf(&d, ",\"outcome\":\"%s\"}", ok > 0 ? "allowed-once" : ok == 0 ? "rejected" : "cancelled");
                persist_event(s->log, "approval/decided", d.p, d.n, NULL);
                as_buf_free(&d);
            }
            if (ok < 0 || s->cancel) { cancelled = 1; tool_done(s, turn, step, b, cseq, "[cancelled]", 1); continue; }
            if (!ok) { tool_done(s, turn, step, b, cseq, "error: permission denied by the user", 1); continue; }
        }
        tool_result r;
        tool_run(&ag.cfg, s->id, s->cwd, b->name, b->text, &s->cancel, &r);
        if (s->cancel) cancelled = 1;
        tool_done(s, turn, step, b, cseq, r.text, r.is_error);
        free(r.text);
    }
    free(seqs);
    return cancelled;
}

// ---------------------------------------------------------------- the turn

static void respond(session *s, const char *stop_reason, const char *err)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    as_buf_put(&b, s->prompt_id.p, s->prompt_id.n);
    if (err) {
        as_buf_puts(&b, ",\"error\":{\"code\":-32603,\"message\":");
        jstr(&b, err);
        as_buf_puts(&b, "}}");
    } else as_buf_printf(&b, ",\"result\":{\"stopReason\":\"%s\"}}", stop_reason);
    pthread_mutex_lock(&ag.mu);
    s->running = 0;      // before the answer: the client may prompt again at once
    pthread_mutex_unlock(&ag.mu);
    acp_send(b.p, b.n);
    as_buf_free(&b);
}

static void end_turn(session *s, int turn, const char *reason_json)
{
    ev(s, "turn/end", "{\"turn\":%d,\"reason\":%s}", turn, reason_json);
    persist_flush(s->log);
}

static void turn_error(session *s, int turn, int step, const call *c)
{
    as_buf r = {0};
    as_buf_puts(&r, "{\"kind\":\"error\",\"error\":{\"message\":");
    jstr(&r, c->err_msg);
    as_buf_puts(&r, ",\"code\":");
    jstr(&r, c->err_code);
    as_buf_puts(&r, "}}");
    ev(s, "step/end", "{\"turn\":%d,\"step\":%d}", turn, step);
    end_turn(s, turn, r.p);
    as_buf_free(&r);
}

static void *turn_main(void *arg)
{
    session *s = arg;
    int turn = ++s->turn;
    char *sys = system_prompt(s);
    ev(s, "turn/start", "{\"turn\":%d}", turn);
    for (int step = 1; ; step++) {
        ev(s, "step/start", "{\"turn\":%d,\"step\":%d}", turn, step);
        if (step == 1) {
            char uid[37];
            uuid_v4(uid);
            as_buf d = {0};
            as_buf_puts(&d, "{\"content\":[{\"type\":\"text\",\"text\":");
            jstr(&d, s->prompt_text);
            as_buf_puts(&d, "}],\"source\":{\"kind\":\"user\"},\"role\":\"user\",\"id\":");
            jstr(&d, uid);
            as_buf_putc(&d, '}');
            persist_event(s->log, "user/message", d.p, d.n, "\"surfaceOp\":\"append\"");
            as_buf_free(&d);
            push_user(s, s->prompt_text);
        }
        call c = {0};
        int retried = 0;
        if (ag.cfg.context_budget && context_estimate(s, sys) > (size_t)ag.cfg.context_budget) {
            persist_flush(s->log);
            if (compact(s, turn, step, &c) != CALL_OK) goto call_failed;
            call_free(&c);
        }
        for (;;) {
            write_header(s, sys);
            persist_flush(s->log);
            as_buf msgs = {0};
            render_messages(s, sys, NULL, &msgs);
            model_call(s, turn, step, msgs.p, 1, 1, &c);
            as_buf_free(&msgs);
            if (c.status == CALL_FAILED && !retried && c.nchunks == 0 &&
                !strcmp(c.err_code, "CONTEXT_WINDOW_EXCEEDED")) {
                // the provider rejected the request for its length: compact, retry the step
                as_warn("model call %d/%d rejected for context length: compacting", turn, step);
                retried = 1;
                call_free(&c);
                if (compact(s, turn, step, &c) != CALL_OK) goto call_failed;
                call_free(&c);
                continue;
            }
            break;
        }
    call_failed:
        if (c.status == CALL_CANCELLED) {
            commit_message(s, turn, step, &c, 1);
            ev(s, "step/end", "{\"turn\":%d,\"step\":%d}", turn, step);
            end_turn(s, turn, "{\"kind\":\"aborted\",\"reason\":{\"kind\":\"user\"}}");
            respond(s, "cancelled", NULL);
            call_free(&c);
            break;
        }
        if (c.status == CALL_FAILED) {
            for (int i = 0; i < c.nb; i++)
                if (c.b[i].kind == B_TEXT && c.b[i].text && *c.b[i].text) agent_text(s, c.b[i].text);
            as_warn("model call %d/%d failed: %s (%s)", turn, step, c.err_msg, c.err_code);
            turn_error(s, turn, step, &c);
            respond(s, NULL, c.err_msg);
            call_free(&c);
            break;
        }
        commit_message(s, turn, step, &c, 0);
        int ntools = 0;
        for (int i = 0; i < c.nb; i++) ntools += c.b[i].kind == B_TOOL;
        if (ntools) {
            int cancelled = run_tools(s, turn, step, &c);
            ev(s, "step/end", "{\"turn\":%d,\"step\":%d}", turn, step);
            call_free(&c);
            if (cancelled) {
                end_turn(s, turn, "{\"kind\":\"aborted\",\"reason\":{\"kind\":\"user\"}}");
                respond(s, "cancelled", NULL);
                break;
            }
            if (step >= ag.cfg.max_steps) {
                end_turn(s, turn, "{\"kind\":\"max-steps\"}");
                respond(s, "max_turn_requests", NULL);
                break;
            }
            persist_flush(s->log);
            continue;
        }
        ev(s, "step/end", "{\"turn\":%d,\"step\":%d}", turn, step);
        const char *stop = "end_turn";
        if (!strcmp(c.finish, "max-tokens") || !strcmp(c.finish, "length")) {
            end_turn(s, turn, "{\"kind\":\"max-tokens\"}");
            stop = "max_tokens";
        } else {
            end_turn(s, turn, "{\"kind\":\"completed\"}");
            if (!strcmp(c.finish, "refusal") || !strcmp(c.finish, "content-filter")) stop = "refusal";
        }
        respond(s, stop, NULL);
        call_free(&c);
        break;
    }
    free(sys);
    return NULL;
}

void turn_start_thread(session *s)
{
    if (pthread_create(&s->th, NULL, turn_main, s)) as_die_sys("start a turn thread");
    s->joinable = 1;
}

// ---------------------------------------------------------------- session/load

static int load_open_turn;

// Rebuilds conversation state from one persisted event.
void load_event(void *ctx, const as_event *e)
{
    session *s = ctx;
    const as_json *j = e->j;
    int d = as_json_get(j, 0, "data");
    if (d < 0 || j->t[d].type != AS_JOBJ) return;
    char *type = json_getstr(j, 0, "type");
    if (!type) return;
    int64_t n;
    if (!strcmp(type, "turn/start")) {
        int t = as_json_get(j, d, "turn");
        if (t >= 0 && as_json_int(j, t, &n)) s->turn = (int)n;
        load_open_turn = 1;
    } else if (!strcmp(type, "turn/end")) {
        load_open_turn = 0;
    } else if (!strcmp(type, "user/message")) {
        int c = as_json_get(j, d, "content");
        as_buf text = {0};
        for (int el = c >= 0 ? as_json_first(j, c) : -1; el >= 0; el = as_json_nextel(j, el)) {
            int x = j->t[el].type == AS_JOBJ ? as_json_get(j, el, "text") : -1;
            if (x >= 0 && j->t[x].type == AS_JSTR) as_json_str(j, x, &text);
        }
        push_user(s, text.p ? text.p : "");
        as_buf_free(&text);
    } else if (!strcmp(type, "assistant/message")) {
        int m = as_json_get(j, d, "message");
        int c = m >= 0 ? as_json_get(j, m, "content") : -1;
        if (c >= 0 && j->t[c].type == AS_JARR) {
            as_buf b = {0};
            oai_assistant(j, c, &b);
            hist_push(s, b.p, b.n);
            as_buf_free(&b);
        }
    } else if (!strcmp(type, "tool/result")) {
        int m = as_json_get(j, d, "message");
        int c = m >= 0 ? as_json_get(j, m, "content") : -1;
        int r = c >= 0 ? as_json_first(j, c) : -1;
        if (r >= 0 && j->t[r].type == AS_JOBJ) {
            char *id = json_getstr(j, r, "toolCallId");
            int cc = as_json_get(j, r, "content");
            as_buf text = {0};
            for (int el = cc >= 0 ? as_json_first(j, cc) : -1; el >= 0; el = as_json_nextel(j, el)) {
                int x = j->t[el].type == AS_JOBJ ? as_json_get(j, el, "text") : -1;
                if (x >= 0 && j->t[x].type == AS_JSTR) as_json_str(j, x, &text);
            }
            push_tool(s, id ? id : "", text.p ? text.p : "");
            free(id);
            as_buf_free(&text);
        }
    } else if (!strcmp(type, "compaction/summary")) {
        char *sum = json_getstr(j, d, "summary");
        hist_clear(s);
        as_buf m = {0};
        as_buf_printf(&m, "Summary of the conversation so far:\n%s", sum ? sum : "");
        push_user(s, m.p);
        as_buf_free(&m);
        free(sum);
    } else if (!strcmp(type, "request/header")) {
        int h = as_json_get(j, d, "header");
        if (h >= 0) {
            free(s->last_header);
            s->last_header = as_xmalloc(as_tok_len(j, h) + 1);
            memcpy(s->last_header, as_tok_p(j, h), as_tok_len(j, h));
            s->last_header[as_tok_len(j, h)] = 0;
        }
    }
    free(type);
}

void session_replay_history(session *s)
{
    // the next header is a resume (a new loop over an existing log)
    s->header_reason = s->last_header ? 1 : 0;
    free(s->last_header);
    s->last_header = NULL;
    if (load_open_turn) {
        ev(s, "turn/end", "{\"turn\":%d,\"reason\":{\"kind\":\"interrupted\"}}", s->turn);
        persist_flush(s->log);
        load_open_turn = 0;
    }
    for (size_t i = 0; i < s->nhist; i++) {
        as_json j = {0};
        if (as_json_parse(&j, s->hist[i].p, s->hist[i].n) == 0) {
            int role = as_json_get(&j, 0, "role");
            char *text = json_getstr(&j, 0, "content");
            if (role >= 0 && text && *text) {
                int user = as_json_streq(&j, role, "user"), asst = as_json_streq(&j, role, "assistant");
                if (user || asst) {
                    as_buf u = {0};
                    as_buf_printf(&u, "{\"sessionUpdate\":\"%s\",\"content\":{\"type\":\"text\",\"text\":",
                                  user ? "user_message_chunk" : "agent_message_chunk");
                    jstr(&u, text);
                    as_buf_puts(&u, "}}");
                    acp_notify_update(s, u.p);
                    as_buf_free(&u);
                }
            }
            free(text);
        }
        as_json_free(&j);
    }
}
