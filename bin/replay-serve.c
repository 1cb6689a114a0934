// replay-serve - serve a replay script as DeepSeek-compatible chat-completions SSE.
//
// One model call per entry, positionally, one stream at a time
// (acpsnap-replay(5)). Each entry's provider-neutral chunks are translated
// back into the chat.completion.chunk objects DeepSeek sends, in DeepSeek's
// field order, so that an agent's real DeepSeek adapter turns them into the
// same chunks again.
// Anything the client does that the script did not foresee (a request past the
// end, a second concurrent stream, a malformed request) is answered with an
// HTTP error and recorded; the exit status at shutdown says so.
#include "acpsnap.h"
#include "confine.h"
#include "replay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: replay-serve [--port N] [--port-file FILE] [--log FILE] [--keep-alive MS]\n"
    "             [--pace MS] [--ready-dir DIR] [--created SECS] [--model NAME] script.jsonl\n"
    "Serves a replay script (acpsnap-replay(5)) on 127.0.0.1 as DeepSeek-compatible\n"
    "chat-completions SSE, one stream at a time, in order.\n"
    "  --port N            the port; 0 (default) picks a free one (the URL is printed)\n"
    "  --port-file FILE    also write the port there once listening\n"
    "  --log FILE          one JSON line per request\n"
    "  --keep-alive MS     \": keep-alive\" comments before each stream and while hanging\n"
    "  --pace MS           sleep between events\n"
    "  --ready-dir DIR     where relative readyFile paths resolve\n"
    "  --created SECS      the chunks' created value (default: the start time)\n"
    "  --model NAME        the model echoed in the chunks (default: the request's)\n"
    "  -h, --help, --version\n"
    "Exit status: 0 every entry served as scripted, 1 a failure was recorded\n"
    "(past the end, concurrent, unconsumed), 2 trouble.\n";

// ---------------------------------------------------------------- state
static struct {
    as_replay_script sc;
    const char *path;
    const char *log_path, *ready_dir, *model;
    long keepalive_ms, pace_ms;
    long long created;
    FILE *log;
    pthread_mutex_t mu;
    size_t next;            // next entry to serve
    long requests;          // requests seen
    long busy;              // request number of the stream in flight, -1 none
    int failures;
    volatile sig_atomic_t stop;
} S = { .busy = -1, .mu = PTHREAD_MUTEX_INITIALIZER };

static void failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failure(const char *fmt, ...)
{
    va_list ap;
    char msg[512];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&S.mu);
    S.failures++;
    pthread_mutex_unlock(&S.mu);
    as_warn("%s", msg);
}

// One request. The stream is generated whole before the first byte is sent:
// `out` holds every SSE event, `ends` the end offset of each (for pacing).
typedef enum { T_DONE, T_ABORT, T_HANG } tail;
typedef struct {
    long n;                 // request number, from 0
    as_buf body;            // the request body
    int owns_stream;        // this request holds S.busy
    long entry;             // entry served, -1 none
    int status;
    const char *outcome;    // for the log
    struct MHD_Connection *conn;
    // the stream
    as_buf out;
    size_t *ends; size_t nends, cap_ends, sent_events;
    size_t pos;
    tail tail;
    int ready_done;
    const char *ready_file;
    long last_ka_ms;
} req;

static void event_end(req *r)
{
    if (r->nends == r->cap_ends) {
        r->cap_ends = r->cap_ends ? 2 * r->cap_ends : 64;
        r->ends = as_xrealloc(r->ends, r->cap_ends * sizeof *r->ends);
    }
    r->ends[r->nends++] = r->out.n;
}

// ---------------------------------------------------------------- translation
typedef struct {
    req *r;
    const as_buf *hay;
    int thinking, include_usage;
    const char *model; size_t model_len;   // JSON string bytes, quoted
    // neutral block index → wire tool index; blocks that had deltas
    struct { int64_t block; int wire; } tools[64]; int ntools;
    int64_t delta_blocks[256]; int ndelta;
    char err[256];
} gen;

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

static int had_delta(gen *g, int64_t block)
{
    for (int i = 0; i < g->ndelta; i++) if (g->delta_blocks[i] == block) return 1;
    return 0;
}

static void chunk_open(gen *g)
{
    as_buf *b = &g->r->out;
    as_buf_printf(b, "data: {\"id\":\"00000000-0000-4000-8000-%012lx\",\"object\":\"chat.completion.chunk\","
                  "\"created\":%lld,\"model\":", (unsigned long)g->r->n + 1, S.created);
    as_buf_put(b, g->model, g->model_len);
    as_buf_puts(b, ",\"system_fingerprint\":\"fp_replay_serve\",\"choices\":[{\"index\":0,\"delta\":");
}

static void chunk_close(gen *g)
{
    as_buf *b = &g->r->out;
    as_buf_puts(b, ",\"logprobs\":null,\"finish_reason\":null}]");
    if (g->include_usage) as_buf_puts(b, ",\"usage\":null");
    as_buf_puts(b, "}\n\n");
    event_end(g->r);
}

// delta {"content":…} with the thinking-mode companion field.
static int emit_content(gen *g, const as_json *j, int strtok)
{
    chunk_open(g);
    as_buf *b = &g->r->out;
    as_buf_puts(b, "{\"content\":");
    if (as_replay_resolve_str(j, strtok, g->hay, b, g->err, sizeof g->err)) return -1;
    if (g->thinking) as_buf_puts(b, ",\"reasoning_content\":null");
    as_buf_putc(b, '}');
    chunk_close(g);
    return 0;
}

static int emit_reasoning(gen *g, const as_json *j, int strtok)
{
    chunk_open(g);
    as_buf *b = &g->r->out;
    as_buf_puts(b, "{\"content\":null,\"reasoning_content\":");
    if (as_replay_resolve_str(j, strtok, g->hay, b, g->err, sizeof g->err)) return -1;
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
    as_buf *b = &g->r->out;
    as_buf_printf(b, "{\"tool_calls\":[{\"index\":%d,", w);
    if (is_new) {
        as_buf_puts(b, "\"id\":");
        if (id >= 0) { if (as_replay_resolve_str(j, id, g->hay, b, g->err, sizeof g->err)) return -1; }
        else as_buf_puts(b, "\"\"");
        as_buf_puts(b, ",\"type\":\"function\",\"function\":{");
        if (name >= 0) {
            as_buf_puts(b, "\"name\":");
            if (as_replay_resolve_str(j, name, g->hay, b, g->err, sizeof g->err)) return -1;
            as_buf_putc(b, ',');
        }
    } else {
        as_buf_puts(b, "\"function\":{");
    }
    as_buf_puts(b, "\"arguments\":");
    if (args >= 0) { if (as_replay_resolve_str(j, args, g->hay, b, g->err, sizeof g->err)) return -1; }
    else as_buf_puts(b, "\"\"");
    as_buf_puts(b, "}}]}");
    chunk_close(g);
    return 0;
}

static int64_t get_int(const as_json *j, int obj, const char *key, int *present)
{
    int v = as_json_get(j, obj, key);
    int64_t x = 0;
    *present = v >= 0 && as_json_int(j, v, &x);
    return x;
}

// The final chunk: finish_reason mapped back from the neutral reason, usage
// mapped back to DeepSeek's fields (prompt_tokens includes cache hits).
static void emit_final(gen *g, const as_json *fj, int reason, const as_json *uj, int usage)
{
    as_buf *b = &g->r->out;
    chunk_open(g);
    as_buf_puts(b, g->thinking ? "{\"content\":\"\",\"reasoning_content\":null}" : "{\"content\":\"\"}");
    as_buf_puts(b, ",\"logprobs\":null,\"finish_reason\":");
    const char *fr = "stop";
    as_buf code = {0};
    if (fj && reason >= 0) {
        int k = as_json_get(fj, reason, "kind");
        if (k >= 0 && as_json_streq(fj, k, "tool-calls")) fr = "tool_calls";
        else if (k >= 0 && as_json_streq(fj, k, "max-tokens")) fr = "length";
        else if (k >= 0 && as_json_streq(fj, k, "error")) {
            // dsh maps an unknown wire reason R to code upper(R); map back.
            int f = as_json_get(fj, reason, "failure");
            int c = f >= 0 && fj->t[f].type == AS_JOBJ ? as_json_get(fj, f, "code") : -1;
            if (c < 0 || fj->t[c].type != AS_JSTR) {
                fr = "insufficient_system_resource";
            } else if (!as_json_streq(fj, c, "EMPTY_RESPONSE")) {   // that one is a stop with no content
                as_json_str(fj, c, &code);
                for (size_t i = 0; i < code.n; i++)
                    if (code.p[i] >= 'A' && code.p[i] <= 'Z') code.p[i] = (char)(code.p[i] - 'A' + 'a');
                fr = code.p;
            }
        }
    }
    as_jstr_write(b, fr, strlen(fr));
    as_buf_free(&code);
    as_buf_puts(b, "}]");
    if (uj && usage >= 0 && uj->t[usage].type == AS_JOBJ) {
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
    } else if (g->include_usage) {
        as_buf_puts(b, ",\"usage\":null");
    }
    as_buf_puts(b, "}\n\n");
    event_end(g->r);
}

// Translates the entry's chunks into SSE events in r->out. Returns 0 or -1
// (g->err set: a placeholder that cannot be resolved).
static int translate(gen *g, const as_replay_entry *e, int final)
{
    as_json j = {0}, fj = {0}, uj = {0};
    int reason = -1, usage = -1, rc = 0;
    for (size_t k = 0; k < e->nchunks; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (c->type == AS_CHUNK_REASONING_DELTA) { g->thinking = 1; break; }
        if (c->type == AS_CHUNK_BLOCK_END && memmem(e->json + c->off, c->len, "\"type\":\"reasoning\"", 18)) {
            g->thinking = 1; break;
        }
    }
    chunk_open(g);
    as_buf_puts(&g->r->out, g->thinking ? "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"}"
                                        : "{\"role\":\"assistant\",\"content\":\"\"}");
    chunk_close(g);
    for (size_t k = 0; k < e->nchunks && !rc; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if (as_json_parse(&j, e->json + c->off, c->len)) { snprintf(g->err, sizeof g->err, "chunk %zu does not parse", k); rc = -1; break; }
        int pres;
        int64_t idx = get_int(&j, 0, "index", &pres);
        switch (c->type) {
        case AS_CHUNK_TEXT_DELTA:
            saw_delta(g, idx);
            rc = emit_content(g, &j, as_json_get(&j, 0, "text"));
            break;
        case AS_CHUNK_REASONING_DELTA:
            saw_delta(g, idx);
            rc = emit_reasoning(g, &j, as_json_get(&j, 0, "text"));
            break;
        case AS_CHUNK_TOOL_CALL_DELTA:
            saw_delta(g, idx);
            rc = emit_tool(g, &j, idx, as_json_get(&j, 0, "id"), as_json_get(&j, 0, "name"),
                           as_json_get(&j, 0, "argumentsDelta"));
            break;
        case AS_CHUNK_BLOCK_END: {
            // A block that streamed no deltas (a rebuilt compaction call):
            // the whole block goes out as one delta.
            if (had_delta(g, idx)) break;
            int blk = as_json_get(&j, 0, "block");
            if (blk < 0 || j.t[blk].type != AS_JOBJ) break;
            int ty = as_json_get(&j, blk, "type");
            if (ty < 0) break;
            saw_delta(g, idx);
            if (as_json_streq(&j, ty, "text")) {
                int t = as_json_get(&j, blk, "text");
                if (t >= 0 && j.t[t].type == AS_JSTR) rc = emit_content(g, &j, t);
            } else if (as_json_streq(&j, ty, "reasoning")) {
                int t = as_json_get(&j, blk, "text");
                if (t >= 0 && j.t[t].type == AS_JSTR) rc = emit_reasoning(g, &j, t);
            } else if (as_json_streq(&j, ty, "tool-call")) {
                rc = emit_tool(g, &j, idx, as_json_get(&j, blk, "id"), as_json_get(&j, blk, "name"),
                               as_json_get(&j, blk, "arguments"));
            }
            break;
        }
        case AS_CHUNK_USAGE:
            if (as_json_parse(&uj, e->json + c->off, c->len) == 0) usage = as_json_get(&uj, 0, "usage");
            break;
        case AS_CHUNK_FINISH:
            if (as_json_parse(&fj, e->json + c->off, c->len) == 0) reason = as_json_get(&fj, 0, "reason");
            break;
        default:    // block-start: the wire opens a block with its first delta
            break;
        }
    }
    if (!rc && final) {
        emit_final(g, reason >= 0 ? &fj : NULL, reason, usage >= 0 ? &uj : NULL, usage);
        as_buf_puts(&g->r->out, "data: [DONE]\n\n");
        event_end(g->r);
    }
    as_json_free(&j);
    as_json_free(&fj);
    as_json_free(&uj);
    return rc;
}

// ---------------------------------------------------------------- HTTP
static void log_request(req *r)
{
    if (!S.log) return;
    as_buf b = {0};
    as_buf_printf(&b, "{\"request\":%ld,\"entry\":", r->n);
    if (r->entry >= 0) as_buf_printf(&b, "%ld", r->entry); else as_buf_puts(&b, "null");
    as_buf_puts(&b, ",\"kind\":");
    if (r->entry >= 0) {
        static const char *const kinds[] = { "\"chunks\"", "\"throw\"", "\"hang\"" };
        as_buf_puts(&b, kinds[S.sc.e[r->entry].kind]);
    } else {
        as_buf_puts(&b, "null");
    }
    as_buf_printf(&b, ",\"status\":%d,\"outcome\":\"%s\",\"body\":", r->status, r->outcome ? r->outcome : "error");
    as_json j = {0};
    if (r->body.n && as_json_parse(&j, r->body.p, r->body.n) == 0)
        as_buf_put(&b, r->body.p + j.t[0].start, as_tok_len(&j, 0));
    else
        as_buf_puts(&b, "null");
    as_json_free(&j);
    as_buf_puts(&b, "}\n");
    pthread_mutex_lock(&S.mu);
    if (fwrite(b.p, 1, b.n, S.log) != b.n || fflush(S.log)) as_warn("unable to write %s: %s", S.log_path, strerror(errno));
    pthread_mutex_unlock(&S.mu);
    as_buf_free(&b);
}

static enum MHD_Result respond_json(struct MHD_Connection *c, req *r, int status, const char *type,
                                    const char *msg)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"error\":{\"message\":");
    as_jstr_write(&b, msg, strlen(msg));
    as_buf_puts(&b, ",\"type\":");
    as_jstr_write(&b, type, strlen(type));
    as_buf_puts(&b, ",\"param\":null,\"code\":");
    as_jstr_write(&b, type, strlen(type));
    as_buf_puts(&b, "}}");
    struct MHD_Response *resp = MHD_create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_COPY);
    as_buf_free(&b);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

// Is the client gone? (EOF or error on its socket.)
static int client_gone(req *r, int wait_ms)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = { .fd = ci->connect_fd, .events = POLLIN | POLLRDHUP };
    int n = poll(&p, 1, wait_ms);
    if (n <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return 1;
    char ch;
    ssize_t k = recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// The hang's readyFile, created new beneath --ready-dir (else the current
// directory), no link followed. 0, or -1 after reporting a failure.
static int write_ready(req *r)
{
    if (r->ready_done || !r->ready_file) return 0;
    r->ready_done = 1;
    const char *dir = S.ready_dir ? S.ready_dir : ".";
    int fd = as_open_under(dir, r->ready_file, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) { close(fd); return 0; }
    failure("request %ld: unable to create ready file \"%s\" in %s: %s", r->n, r->ready_file, dir,
            errno == EEXIST ? "it exists already" : as_beneath_strerror(errno));
    return -1;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    req *r = cls;
    if (r->pos < r->out.n) {
        // Pace between events (not before the first).
        if (S.pace_ms > 0 && r->sent_events > 0 && r->sent_events < r->nends &&
            r->pos == r->ends[r->sent_events - 1]) {
            struct timespec ts = { S.pace_ms / 1000, (S.pace_ms % 1000) * 1000000L };
            nanosleep(&ts, NULL);
        }
        size_t lim = r->out.n;
        while (r->sent_events < r->nends && r->ends[r->sent_events] <= r->pos) r->sent_events++;
        if (S.pace_ms > 0 && r->sent_events < r->nends) lim = r->ends[r->sent_events];
        size_t n = lim - r->pos;
        if (n > max) n = max;
        memcpy(buf, r->out.p + r->pos, n);
        r->pos += n;
        if (r->sent_events < r->nends && r->pos >= r->ends[r->sent_events]) r->sent_events++;
        return (ssize_t)n;
    }
    switch (r->tail) {
    case T_DONE:
        r->outcome = "complete";
        return MHD_CONTENT_READER_END_OF_STREAM;
    case T_ABORT:
        r->outcome = "aborted";
        return MHD_CONTENT_READER_END_WITH_ERROR;
    case T_HANG:
        break;
    }
    // A hang: the prefix has been handed over; mark readiness, then hold the
    // stream open (keep-alive comments only) until the client goes away.
    if (write_ready(r)) { r->outcome = "aborted"; return MHD_CONTENT_READER_END_WITH_ERROR; }
    r->outcome = "hang";
    if (!r->last_ka_ms) r->last_ka_ms = as_now_ms();
    for (;;) {
        if (S.stop) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (client_gone(r, 20)) { r->outcome = "client-closed"; return MHD_CONTENT_READER_END_WITH_ERROR; }
        if (S.keepalive_ms > 0 && as_now_ms() - r->last_ka_ms >= S.keepalive_ms) {
            r->last_ka_ms = as_now_ms();
            static const char KA[] = ": keep-alive\n\n";
            if (max < sizeof KA - 1) return 0;
            memcpy(buf, KA, sizeof KA - 1);
            return (ssize_t)(sizeof KA - 1);
        }
    }
}

// The HTTP error of a pre-stream throw, by the entry's code.
static void throw_status(const char *code, int *status, const char **type)
{
    *status = 500; *type = "server_error";
    if (!strcmp(code, "AUTH")) { *status = 401; *type = "authentication_error"; }
    else if (!strcmp(code, "QUOTA")) { *status = 402; *type = "unknown_error"; }
    else if (!strcmp(code, "RATE_LIMIT")) { *status = 429; *type = "rate_limit_error"; }
    else if (!strcmp(code, "CONTEXT_WINDOW_EXCEEDED") || !strcmp(code, "INVALID_REQUEST")) {
        *status = 400; *type = "invalid_request_error";
    } else if (!strcmp(code, "SERVER_OVERLOADED")) { *status = 503; *type = "server_error"; }
}

static int path_ok(const char *url)
{
    size_t n = strlen(url);
    static const char END[] = "/chat/completions";
    return n >= sizeof END - 1 && !strcmp(url + n - (sizeof END - 1), END);
}

// The request's JSON into j; NULL, or why it cannot be served (the failure
// recorded, the message for the response returned).
static const char *bad_request(req *r, as_json *j)
{
    if (as_json_parse(j, r->body.p ? r->body.p : "", r->body.n) || j->t[0].type != AS_JOBJ) {
        failure("request %ld: the request body is not a JSON object", r->n);
        return "replay-serve: the request body is not a JSON object";
    }
    int st = as_json_get(j, 0, "stream");
    if (st < 0 || j->t[st].type != AS_JTRUE) {
        failure("request %ld: not a streaming request (\"stream\": true is required)", r->n);
        return "replay-serve: only streaming requests are served (\"stream\": true)";
    }
    return NULL;
}

// Takes the next entry for r: its index, or -1 with the failure recorded and
// the error response queued (*ret): a stream in flight, or past the end.
static long take_entry(struct MHD_Connection *c, req *r, enum MHD_Result *ret)
{
    pthread_mutex_lock(&S.mu);
    long busy = S.busy, idx = -1;
    if (busy < 0 && S.next < S.sc.n) { idx = (long)S.next++; S.busy = r->n; r->owns_stream = 1; }
    pthread_mutex_unlock(&S.mu);
    if (idx >= 0) return idx;
    char msg[512];
    if (busy >= 0)
        snprintf(msg, sizeof msg, "replay-serve: model request %ld arrived while request %ld is still streaming "
                 "(replay serves one stream at a time)", r->n, busy);
    else
        snprintf(msg, sizeof msg, "replay-serve: model request %ld is past the end of the script (%zu entries)",
                 r->n, S.sc.n);
    failure("%s", msg + 14);
    *ret = respond_json(c, r, 500, "server_error", msg);
    return -1;
}

// A throw before any chunk: TRANSPORT drops the connection without a
// response; any other code is answered with its HTTP error.
static enum MHD_Result throw_early(struct MHD_Connection *c, req *r, const as_replay_entry *e)
{
    if (!strcmp(e->code, "TRANSPORT")) {
        r->status = 0; r->outcome = "dropped";
        return MHD_NO;
    }
    int status; const char *type;
    throw_status(e->code, &status, &type);
    r->outcome = "error";
    return respond_json(c, r, status, type, e->message);
}

// What the generation takes from the request: include_usage, the model to
// echo (JSON string bytes into model), the haystack of fromRequest
// placeholders (acpsnap-replay(5)) into hay.
static void gen_init(gen *g, const as_json *j, as_buf *model, as_buf *hay)
{
    int so = as_json_get(j, 0, "stream_options");
    int iu = so >= 0 && j->t[so].type == AS_JOBJ ? as_json_get(j, so, "include_usage") : -1;
    g->include_usage = iu >= 0 && j->t[iu].type == AS_JTRUE;
    if (S.model) as_jstr_write(model, S.model, strlen(S.model));
    else {
        int m = as_json_get(j, 0, "model");
        if (m >= 0 && j->t[m].type == AS_JSTR) as_buf_put(model, as_tok_p(j, m), as_tok_len(j, m));
        else as_buf_puts(model, "\"deepseek-chat\"");
    }
    g->model = model->p; g->model_len = model->n;
    int msgs = as_json_get(j, 0, "messages");
    if (msgs >= 0) as_replay_haystack(j, msgs, hay);
    g->hay = hay;
}

// The whole stream of the entry into r->out, and how it ends. Returns 0 or
// -1 (g->err set).
static int generate(gen *g, const as_replay_entry *e)
{
    req *r = g->r;
    if (e->kind != AS_REPLAY_HANG) {
        r->tail = e->kind == AS_REPLAY_CHUNKS ? T_DONE : (!strcmp(e->code, "STREAM_CLOSED") ? T_DONE : T_ABORT);
        return translate(g, e, e->kind == AS_REPLAY_CHUNKS);
    }
    // The fixed prefix of a hang (acpsnap-replay(5)): a text block holding "partial".
    static const char PREFIX[] = "{\"type\":\"text-delta\",\"index\":0,\"text\":\"partial\"}";
    as_replay_entry h = { .kind = AS_REPLAY_HANG, .json = (char *)PREFIX, .len = sizeof PREFIX - 1 };
    as_replay_chunk ch = { .off = 0, .len = sizeof PREFIX - 1, .type = AS_CHUNK_TEXT_DELTA };
    h.chunk = &ch; h.nchunks = 1;
    r->tail = T_HANG;
    r->ready_file = e->ready_file;
    return translate(g, &h, 0);
}

// Queues r->out as the SSE response, a keep-alive comment first when
// keep-alives are on (DeepSeek sends them while it is busy).
static enum MHD_Result stream(struct MHD_Connection *c, req *r)
{
    if (S.keepalive_ms > 0) {
        as_buf ka = {0};
        as_buf_puts(&ka, ": keep-alive\n\n");
        as_buf_put(&ka, r->out.p, r->out.n);
        for (size_t i = 0; i < r->nends; i++) r->ends[i] += 14;
        as_buf_free(&r->out);
        r->out = ka;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader, r, NULL);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    char trace[40];
    snprintf(trace, sizeof trace, "%032lx", (unsigned long)r->n + 1);
    MHD_add_response_header(resp, "x-ds-trace-id", trace);
    r->status = 200;
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

// Serves entry idx to the request j: an early throw, or its stream.
static enum MHD_Result serve_entry(struct MHD_Connection *c, req *r, const as_json *j, long idx)
{
    r->entry = idx;
    const as_replay_entry *e = &S.sc.e[idx];
    if (e->kind == AS_REPLAY_THROW && e->nchunks == 0) return throw_early(c, r, e);
    gen g = { .r = r };
    as_buf model = {0}, hay = {0};
    gen_init(&g, j, &model, &hay);
    enum MHD_Result ret;
    if (!generate(&g, e)) ret = stream(c, r);
    else {
        char msg[512];
        snprintf(msg, sizeof msg, "replay-serve: entry %ld: %s", idx, g.err);
        failure("request %ld: entry %ld: %s", r->n, idx, g.err);
        as_buf_reset(&r->out);
        ret = respond_json(c, r, 500, "server_error", msg);
    }
    as_buf_free(&hay);
    as_buf_free(&model);
    return ret;
}

static enum MHD_Result serve(struct MHD_Connection *c, req *r, const char *url, const char *method)
{
    if (strcmp(method, "POST") || !path_ok(url)) {
        char msg[512];
        snprintf(msg, sizeof msg, "replay-serve: no such endpoint: %s %.200s", method, url);
        as_warn("request %ld: no such endpoint: %s %.200s", r->n, method, url);
        return respond_json(c, r, 404, "invalid_request_error", msg);
    }
    as_json j = {0};
    enum MHD_Result ret;
    const char *bad = bad_request(r, &j);
    if (bad) ret = respond_json(c, r, 400, "invalid_request_error", bad);
    else {
        long idx = take_entry(c, r, &ret);
        if (idx >= 0) ret = serve_entry(c, r, &j, idx);
    }
    as_json_free(&j);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls; (void)version;
    req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->entry = -1;
        r->conn = c;
        pthread_mutex_lock(&S.mu);
        r->n = S.requests++;
        pthread_mutex_unlock(&S.mu);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        as_buf_put(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    return serve(c, r, url, method);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls; (void)c;
    req *r = *con_cls;
    if (!r) return;
    if (r->owns_stream) {
        if (r->tail == T_DONE && r->outcome && !strcmp(r->outcome, "complete") && tc != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            r->outcome = "client-closed";
        if (r->tail != T_HANG && (!r->outcome || strcmp(r->outcome, "complete")) &&
            tc == MHD_REQUEST_TERMINATED_CLIENT_ABORT)
            r->outcome = "client-closed";
        pthread_mutex_lock(&S.mu);
        S.busy = -1;
        pthread_mutex_unlock(&S.mu);
    }
    log_request(r);
    as_buf_free(&r->body);
    as_buf_free(&r->out);
    free(r->ends);
    free(r);
    *con_cls = NULL;
}

// ---------------------------------------------------------------- main
static long num_arg(const char *opt, const char *s, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > max) as_die(AS_TROUBLE, "invalid %s: %s", opt, s);
    return v;
}

static void write_port_file(const char *path, unsigned port)
{
    as_out *o = as_out_atomic(path, 0);
    char b[16];
    int n = snprintf(b, sizeof b, "%u\n", port);
    as_out_write(o, b, (size_t)n);
    as_out_commit(o);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "port", required_argument, 0, 'p' }, { "port-file", required_argument, 0, 'P' },
        { "log", required_argument, 0, 'l' }, { "keep-alive", required_argument, 0, 'k' },
        { "pace", required_argument, 0, 'd' }, { "ready-dir", required_argument, 0, 'r' },
        { "created", required_argument, 0, 'c' }, { "model", required_argument, 0, 'm' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    long port = 0;
    const char *port_file = NULL;
    as_setprog(argv[0]);
    S.created = (long long)time(NULL);
    for (int ch; (ch = getopt_long(argc, argv, "p:l:h", lo, NULL)) != -1;) {
        switch (ch) {
        case 'p': port = num_arg("--port", optarg, 65535); break;
        case 'P': port_file = optarg; break;
        case 'l': S.log_path = optarg; break;
        case 'k': S.keepalive_ms = num_arg("--keep-alive", optarg, 86400000); break;
        case 'd': S.pace_ms = num_arg("--pace", optarg, 60000); break;
        case 'r': S.ready_dir = optarg; break;
        case 'c': S.created = num_arg("--created", optarg, 1L << 40); break;
        case 'm': S.model = optarg; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (argc - optind != 1) as_usage_exit(USAGE, AS_TROUBLE);
    S.path = argv[optind];
    as_replay_load(S.path, &S.sc);
    if (S.log_path && !(S.log = fopen(S.log_path, "w"))) as_die_sys("open %s", S.log_path);

    // Signals are taken synchronously by main; the server threads inherit the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT); sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0, MHD_OPTION_END);
    if (!d) as_die(AS_TROUBLE, "unable to listen on 127.0.0.1:%ld", port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_in got;
    socklen_t gl = sizeof got;
    if (!di || getsockname(di->listen_fd, (struct sockaddr *)&got, &gl)) as_die_sys("read the listening port");
    unsigned bound = ntohs(got.sin_port);
    if (port_file) write_port_file(port_file, bound);
    printf("http://127.0.0.1:%u\n", bound);
    if (fflush(stdout)) as_die_sys("write stdout");

    int sig;
    sigwait(&set, &sig);
    S.stop = 1;
    MHD_stop_daemon(d);

    if (S.next < S.sc.n)
        failure("%s: %zu of %zu entries not consumed", S.path, S.sc.n - S.next, S.sc.n);
    if (S.log && fclose(S.log)) as_die_sys("close %s", S.log_path);
    as_replay_script_free(&S.sc);
    return S.failures ? AS_NO : AS_OK;
}
