// replay-serve - serve a replay script as a model's streaming wire API: chat
// completions (DeepSeek, OpenAI), OpenAI Responses or Anthropic Messages.
//
// One model call per entry, positionally, one stream at a time
// (acpsnap-replay(5)). The request's endpoint picks the wire; each entry's
// provider-neutral chunks are translated back into that wire's events
// (common/wire*.c).
// Anything the client does that the script did not foresee (a request past the
// end, a second concurrent stream, a malformed request, a stream it leaves
// before the end) is answered with an HTTP error or recorded; the exit status
// at shutdown says so.
//
// The script and the requests are untrusted: every member the wire needs is
// checked when the script is loaded, request bodies, connections and their
// time are bounded (--max-request-bytes, --max-connections, --idle-timeout),
// and fromRequest searches run in linear time under a time limit. A
// connection is one thread (libmicrohttpd's thread per connection); past
// --max-connections the oldest connection that is not being answered is
// closed to make room, so a flood of idle sockets cannot lock a client out.
#include "acpsnap.h"
#include "confine.h"
#include "proxy.h"
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
    "             [--pace MS] [--ready-dir DIR] [--created SECS] [--model NAME]\n"
    "             [--max-request-bytes N] [--max-connections N] [--idle-timeout SECS] script.jsonl\n"
    "       replay-serve --upstream URL [--upstream-key-env NAME] --record FILE [options]\n"
    "Serves a replay script (acpsnap-replay(5)) on 127.0.0.1 as streaming model\n"
    "responses, one stream at a time, in order: POST .../chat/completions (DeepSeek,\n"
    "OpenAI chat completions), .../responses (OpenAI Responses), .../messages\n"
    "(Anthropic Messages).\n"
    "  --port N            the port; 0 (default) picks a free one (the URL is printed)\n"
    "  --port-file FILE    also write the port there once listening\n"
    "  --log FILE          one JSON line per request\n"
    "  --keep-alive MS     \": keep-alive\" comments before each stream and while hanging\n"
    "  --pace MS           sleep between events\n"
    "  --ready-dir DIR     where relative readyFile paths resolve\n"
    "  --created SECS      the chunks' created value (default: the start time)\n"
    "  --model NAME        the model echoed in the chunks (default: the request's)\n"
    "  --max-request-bytes N  larger request bodies get 413 (default 8388608)\n"
    "  --max-connections N    connections at once (default 64)\n"
    "  --idle-timeout SECS    a connection must send its request within SECS (default 10)\n"
    "  --upstream URL      record: forward each request to URL, answer with its stream\n"
    "  --upstream-key-env NAME  the upstream's API key is in the environment variable NAME\n"
    "  --record FILE       record: write a replay entry per request to FILE at the end\n"
    "  -h, --help, --version\n"
    "Exit status: 0 every entry served as scripted, 1 a failure was recorded\n"
    "(past the end, concurrent, unconsumed, not delivered), 2 trouble.\n";

enum { DEF_MAX_BODY = 8 << 20, DEF_MAX_CONNS = 64, DEF_IDLE_S = 10, BODY_BUDGET = 4 };

// ---------------------------------------------------------------- state
// A connection, registered while libmicrohttpd holds it.
typedef struct {
    struct MHD_Connection *c;
    int fd;
    long since_ms;          // opened, or its last request ended
    int busy;               // answering a request that took an entry: never closed for room
    int closing;            // shut down by us, not yet closed
} conn;

static struct {
    as_replay_script sc;
    const char *path;
    const char *log_path, *ready_dir, *model;
    long keepalive_ms, pace_ms;
    long long created;
    size_t max_body;        // --max-request-bytes
    unsigned max_conns;     // --max-connections
    long idle_ms;           // --idle-timeout
    FILE *log;
    int trouble;            // a log write failed: exit 2
    pthread_mutex_t mu;
    size_t next;            // next entry to serve
    long requests;          // requests seen
    long busy;              // request number of the stream in flight, -1 none
    int failures;
    size_t held;            // request body bytes held by all connections
    conn *conns; size_t nconns;
    as_proxy *px;           // recording (--upstream): requests go to the proxy
    volatile sig_atomic_t stop;
} S = { .busy = -1, .mu = PTHREAD_MUTEX_INITIALIZER };

static void failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failure(const char *fmt, ...)
{
    va_list ap;
    char msg[768];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&S.mu);
    S.failures++;
    pthread_mutex_unlock(&S.mu);
    as_warn("%s", msg);
}

// One request. The stream is generated whole before the first byte is sent:
// sse.out holds every SSE event, sse.end the end offset of each (for pacing).
typedef enum { T_DONE, T_ABORT, T_HANG } tail;
typedef struct {
    long n;                 // request number, from 0
    as_wire wire;           // by the endpoint (chat completions for an unknown one)
    as_buf body;            // the request body
    size_t held;            // bytes of it counted in S.held
    int reject;             // 413 or 503: the body is being discarded
    int owns_stream;        // this request holds S.busy
    long entry;             // entry served, -1 none
    int status;
    const char *outcome;    // for the log
    struct MHD_Connection *conn;
    // the stream
    as_sse sse;
    int deliver;            // a scripted answer was queued: it must reach the client
    size_t sent_events;
    size_t pos;
    tail tail;
    int hung;               // a hang's prefix went out
    int ready_done;
    const char *ready_file;
    long last_ka_ms;
} req;

// ---------------------------------------------------------------- connections
static conn *conn_of(struct MHD_Connection *c)
{
    for (size_t i = 0; i < S.nconns; i++)
        if (S.conns[i].c == c) return &S.conns[i];
    return NULL;
}

static void conn_close(conn *k)
{
    k->closing = 1;
    shutdown(k->fd, SHUT_RDWR);   // libmicrohttpd sees the end and closes it
}

// Over the limit: the connection idle (or incomplete) the longest goes.
static void make_room(void)
{
    size_t open = 0;
    conn *old = NULL;
    for (size_t i = 0; i < S.nconns; i++) {
        conn *k = &S.conns[i];
        if (k->closing) continue;
        open++;
        if (!k->busy && (!old || k->since_ms < old->since_ms)) old = k;
    }
    if (open > S.max_conns && old) conn_close(old);
}

// libmicrohttpd's connection notices (MHD_OPTION_NOTIFY_CONNECTION). CLOSED
// comes before it closes the socket, so a registered fd is always open.
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode toe)
{
    (void)cls; (void)ctx;
    pthread_mutex_lock(&S.mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && S.nconns <= S.max_conns) {   // libmicrohttpd admits max_conns + 1
            S.conns[S.nconns++] = (conn){ .c = c, .fd = ci->connect_fd, .since_ms = as_now_ms() };
            make_room();
        }
    } else {
        conn *k = conn_of(c);
        if (k) *k = S.conns[--S.nconns];
    }
    pthread_mutex_unlock(&S.mu);
}

static void conn_mark(struct MHD_Connection *c, int busy)
{
    pthread_mutex_lock(&S.mu);
    conn *k = conn_of(c);
    if (k) {
        k->busy = busy;
        k->since_ms = as_now_ms();
    }
    pthread_mutex_unlock(&S.mu);
}

// Closes the connections that have not sent their request in time.
static void reap(void)
{
    long now = as_now_ms();
    pthread_mutex_lock(&S.mu);
    for (size_t i = 0; i < S.nconns; i++) {
        conn *k = &S.conns[i];
        if (!k->busy && !k->closing && now - k->since_ms > S.idle_ms) conn_close(k);
    }
    pthread_mutex_unlock(&S.mu);
}

// Sleeps ms milliseconds, less when stopping.
static void nap(long ms)
{
    long end = as_now_ms() + ms;
    for (long left; !S.stop && (left = end - as_now_ms()) > 0;) {
        struct timespec ts = { 0, (left > 10 ? 10 : left) * 1000000L };
        nanosleep(&ts, NULL);
    }
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
    if (!S.trouble && (fwrite(b.p, 1, b.n, S.log) != b.n || fflush(S.log))) {
        S.trouble = 1;   // reported once; the exit status says the log is incomplete
        as_warn("unable to write %s: %s", S.log_path, strerror(errno));
    }
    pthread_mutex_unlock(&S.mu);
    as_buf_free(&b);
}

// An HTTP error in the wire's error shape; type: chat and Responses error
// type, Messages too with from_throw (else Messages types by status).
static enum MHD_Result respond_error(struct MHD_Connection *c, req *r, int status, const char *type,
                                     int from_throw, const char *msg)
{
    as_buf b = {0};
    as_wire_error_body(r->wire, status, type, from_throw, msg, &b);
    struct MHD_Response *resp = MHD_create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_COPY);
    as_buf_free(&b);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, req *r, int status, const char *type,
                                    const char *msg)
{
    return respond_error(c, r, status, type, 0, msg);
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
    const as_sse *s = &r->sse;
    if (r->pos < s->out.n) {
        // Pace between events (not before the first).
        if (S.pace_ms > 0 && r->sent_events > 0 && r->sent_events < s->n && r->pos == s->end[r->sent_events - 1])
            nap(S.pace_ms);
        if (S.stop) return MHD_CONTENT_READER_END_WITH_ERROR;
        size_t lim = s->out.n;
        while (r->sent_events < s->n && s->end[r->sent_events] <= r->pos) r->sent_events++;
        if (S.pace_ms > 0 && r->sent_events < s->n) lim = s->end[r->sent_events];
        size_t n = lim - r->pos;
        if (n > max) n = max;
        memcpy(buf, s->out.p + r->pos, n);
        r->pos += n;
        if (r->sent_events < s->n && r->pos >= s->end[r->sent_events]) r->sent_events++;
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
    r->hung = 1;
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
    if (idx >= 0) {
        conn_mark(c, 1);
        return idx;
    }
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
    as_wire_throw_status(r->wire, e->code, &status, &type);
    if (e->status) status = e->status;   // a recorded HTTP error keeps its status
    r->outcome = "error";
    r->deliver = 1;
    return respond_error(c, r, status, type, 1, e->message);
}

// What the generation takes from the request (into q): the wire,
// include_usage, the model to echo (JSON string bytes into model), the
// haystack of fromRequest placeholders (acpsnap-replay(5)) into hay: the
// messages, after the instructions (Responses: instructions and input;
// Messages: system and messages).
static void sse_req_init(as_sse_req *q, const req *r, const as_json *j, as_buf *model, as_buf *hay)
{
    int so = as_json_get(j, 0, "stream_options");
    int iu = as_json_get(j, so, "include_usage");
    static const char *const keys[][2] = { { NULL, "messages" }, { "instructions", "input" }, { "system", "messages" } };
    q->wire = r->wire;
    q->request = r->n;
    q->created = S.created;
    q->include_usage = iu >= 0 && j->t[iu].type == AS_JTRUE;
    if (S.model) as_jstr_write(model, S.model, strlen(S.model));
    else {
        int m = as_json_get(j, 0, "model");
        if (m >= 0 && j->t[m].type == AS_JSTR) as_buf_put(model, as_tok_p(j, m), as_tok_len(j, m));
        else as_buf_puts(model, "\"deepseek-chat\"");
    }
    q->model = model->p; q->model_len = model->n;
    for (int k = 0; k < 2; k++) {
        int t = keys[r->wire][k] ? as_json_get(j, 0, keys[r->wire][k]) : -1;
        if (t < 0) continue;
        if (hay->n) as_buf_putc(hay, '\n');   // one join for the two members as for their leaves
        as_replay_haystack(j, t, hay);
    }
    q->hay = hay;
}

// Queues r->sse as the SSE response, a keep-alive comment first when
// keep-alives are on (DeepSeek sends them while it is busy).
static enum MHD_Result stream(struct MHD_Connection *c, req *r)
{
    if (S.keepalive_ms > 0) {
        as_buf ka = {0};
        as_buf_puts(&ka, ": keep-alive\n\n");
        as_buf_put(&ka, r->sse.out.p, r->sse.out.n);
        for (size_t i = 0; i < r->sse.n; i++) r->sse.end[i] += 14;
        as_buf_free(&r->sse.out);
        r->sse.out = ka;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader, r, NULL);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (r->wire == AS_WIRE_CHAT) {
        char trace[40];
        snprintf(trace, sizeof trace, "%032lx", (unsigned long)r->n + 1);
        MHD_add_response_header(resp, "x-ds-trace-id", trace);
    }
    r->status = 200;
    r->deliver = 1;
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

// Serves entry idx to the request j: an early throw, or its stream.
static enum MHD_Result serve_entry(struct MHD_Connection *c, req *r, const as_json *j, long idx)
{
    static const as_replay_limits lim = { AS_REPLAY_SEARCH_MS, &S.stop };
    r->entry = idx;
    const as_replay_entry *e = &S.sc.e[idx];
    if (e->kind == AS_REPLAY_THROW && e->nchunks == 0) return throw_early(c, r, e);
    as_sse_req q = { .lim = &lim };
    as_buf model = {0}, hay = {0};
    sse_req_init(&q, r, j, &model, &hay);
    char err[400];
    enum MHD_Result ret;
    r->tail = e->kind == AS_REPLAY_HANG ? T_HANG : as_wire_cuts(r->wire, e) ? T_ABORT : T_DONE;
    r->ready_file = e->ready_file;
    if (!as_sse_entry(e, &q, &r->sse, err, sizeof err)) ret = stream(c, r);
    else {
        // model call idx + 1 (counted from 1, as the agent does) is line idx + 1 of the script
        char msg[600];
        snprintf(msg, sizeof msg, "replay-serve: %s:%ld: call %ld: %s", S.path, idx + 1, idx + 1, err);
        failure("%s", msg + 14);
        as_sse_free(&r->sse);
        ret = respond_json(c, r, 500, "server_error", msg);
    }
    as_buf_free(&hay);
    as_buf_free(&model);
    return ret;
}

static enum MHD_Result serve(struct MHD_Connection *c, req *r, const char *url, const char *method)
{
    if (S.px) {   // recording: the stream is answered as long as the upstream's lasts
        conn_mark(c, 1);
        return as_proxy_serve(S.px, c, r->n, method, url, r->body.p, r->body.n, &r->status, &r->outcome);
    }
    if (strcmp(method, "POST") || as_wire_of_path(url) < 0) {
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

// A request body refused (status 413: over --max-request-bytes; 503: the
// bodies held at once would pass their bound): recorded and answered.
static enum MHD_Result refuse_body(struct MHD_Connection *c, req *r)
{
    char msg[256];
    if (r->reject == 413)
        snprintf(msg, sizeof msg, "replay-serve: request %ld: the request body is over %zu bytes (--max-request-bytes)",
                 r->n, S.max_body);
    else
        snprintf(msg, sizeof msg, "replay-serve: request %ld: too many request bodies at once (over %zu bytes held)",
                 r->n, BODY_BUDGET * S.max_body);
    failure("%s", msg + 14);
    return respond_json(c, r, r->reject, r->reject == 413 ? "invalid_request_error" : "server_error", msg);
}

// The first call of a request (its header is complete): the wire by url; a
// body announced over the limit is refused at once, before any of it is read.
static enum MHD_Result request_start(struct MHD_Connection *c, const char *url, void **con_cls)
{
    req *r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    int w = as_wire_of_path(url);
    r->wire = w < 0 ? AS_WIRE_CHAT : (as_wire)w;
    r->entry = -1;
    r->conn = c;
    pthread_mutex_lock(&S.mu);
    r->n = S.requests++;
    pthread_mutex_unlock(&S.mu);
    *con_cls = r;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end;
    errno = 0;
    unsigned long long len = cl ? strtoull(cl, &end, 10) : 0;
    if (cl && (errno || len > S.max_body)) {
        r->reject = 413;
        return refuse_body(c, r);
    }
    return MHD_YES;
}

// A piece of the body: kept while within the limits, else discarded (the
// answer goes out once the body is in: libmicrohttpd cannot answer earlier).
static void body_piece(req *r, const char *p, size_t n)
{
    if (r->reject) return;
    pthread_mutex_lock(&S.mu);
    int over = r->body.n + n > S.max_body ? 413 : S.held + n > BODY_BUDGET * S.max_body ? 503 : 0;
    if (!over) { S.held += n; r->held += n; }
    pthread_mutex_unlock(&S.mu);
    if (over) {
        r->reject = over;
        as_buf_free(&r->body);
    } else {
        as_buf_put(&r->body, p, n);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls; (void)version;
    req *r = *con_cls;
    if (!r) return request_start(c, url, con_cls);
    if (*upload_size) {
        body_piece(r, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->reject) return refuse_body(c, r);
    return serve(c, r, url, method);
}

// Was the scripted answer delivered? A stream to its end (a throw's prefix
// to the cut, a hang's prefix), an early error response whole.
static int delivered(const req *r, enum MHD_RequestTerminationCode tc)
{
    switch (r->tail) {
    case T_DONE: return tc == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    case T_ABORT: return r->outcome && !strcmp(r->outcome, "aborted");
    default: return r->hung;
    }
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls;
    req *r = *con_cls;
    if (!r) return;
    if (r->owns_stream) {
        if (r->deliver && !delivered(r, tc)) {
            r->outcome = "client-closed";
            if (S.stop)
                failure("request %ld: entry %ld: the stream was cut short by the shutdown (%zu of %zu bytes sent)",
                        r->n, r->entry, r->pos, r->sse.out.n);
            else
                failure("request %ld: entry %ld: the client went away before the answer was delivered in full "
                        "(%zu of %zu bytes sent)", r->n, r->entry, r->pos, r->sse.out.n);
        }
        pthread_mutex_lock(&S.mu);
        S.busy = -1;
        pthread_mutex_unlock(&S.mu);
    }
    pthread_mutex_lock(&S.mu);
    S.held -= r->held;
    pthread_mutex_unlock(&S.mu);
    conn_mark(c, 0);
    log_request(r);
    as_buf_free(&r->body);
    as_sse_free(&r->sse);
    free(r);
    *con_cls = NULL;
}

// ---------------------------------------------------------------- main
static long num_arg(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max) as_die(AS_TROUBLE, "invalid %s: %s", opt, s);
    return v;
}

// The port into path, atomically: a temporary sibling renamed over it; on
// failure nothing is left behind. 0, or -1 (errno set).
static int write_port_file(const char *path, unsigned port)
{
    as_buf tmp = {0};
    as_buf_printf(&tmp, "%s.tmp.XXXXXX", path);
    int fd = mkostemp(tmp.p, O_CLOEXEC), rc = -1;
    if (fd >= 0) {
        char b[16];
        int n = snprintf(b, sizeof b, "%u\n", port);
        int ok = write(fd, b, (size_t)n) == n && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (ok && rename(tmp.p, path) == 0) rc = 0;
        int e = errno;
        if (rc) unlink(tmp.p);
        errno = e;
    }
    as_buf_free(&tmp);
    return rc;
}

// Recording (acpsnap-replay(5) entries from a live upstream): the options
// belong together, and no script is served.
static as_proxy *proxy_start(const as_proxy_conf *pc, int nargs)
{
    if (!pc->upstream) as_die(AS_TROUBLE, "%s needs --upstream", pc->record ? "--record" : "--upstream-key-env");
    if (!pc->record) as_die(AS_TROUBLE, "--upstream needs --record");
    if (nargs) as_die(AS_TROUBLE, "no script is served while recording (--upstream)");
    return as_proxy_new(pc);
}

static struct MHD_Daemon *listen_on(long port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    S.conns = as_xmalloc((S.max_conns + 1) * sizeof *S.conns);
    unsigned idle_s = (unsigned)((S.idle_ms + 999) / 1000);
    return MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL, NULL, on_request, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_CONNECTION_LIMIT, S.max_conns + 1,   // one more: the newcomer that makes room
        MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_END);
}

// Until SIGTERM, SIGINT or SIGHUP; meanwhile connections late with their
// request are closed.
static void run(const sigset_t *set)
{
    struct timespec tick = { 0, 100 * 1000000L };
    while (sigtimedwait(set, NULL, &tick) < 0) reap();
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "port", required_argument, 0, 'p' }, { "port-file", required_argument, 0, 'P' },
        { "log", required_argument, 0, 'l' }, { "keep-alive", required_argument, 0, 'k' },
        { "pace", required_argument, 0, 'd' }, { "ready-dir", required_argument, 0, 'r' },
        { "created", required_argument, 0, 'c' }, { "model", required_argument, 0, 'm' },
        { "max-request-bytes", required_argument, 0, 'B' }, { "max-connections", required_argument, 0, 'C' },
        { "idle-timeout", required_argument, 0, 'T' }, { "upstream", required_argument, 0, 'U' },
        { "upstream-key-env", required_argument, 0, 'K' }, { "record", required_argument, 0, 'R' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    long port = 0;
    const char *port_file = NULL;
    as_proxy_conf pc = { .stop = &S.stop };
    as_setprog(argv[0]);
    S.created = (long long)time(NULL);
    S.max_body = DEF_MAX_BODY;
    S.max_conns = DEF_MAX_CONNS;
    S.idle_ms = DEF_IDLE_S * 1000L;
    for (int ch; (ch = getopt_long(argc, argv, "p:l:h", lo, NULL)) != -1;) {
        switch (ch) {
        case 'p': port = num_arg("--port", optarg, 0, 65535); break;
        case 'P': port_file = optarg; break;
        case 'l': S.log_path = optarg; break;
        case 'k': S.keepalive_ms = num_arg("--keep-alive", optarg, 0, 86400000); break;
        case 'd': S.pace_ms = num_arg("--pace", optarg, 0, 60000); break;
        case 'r': S.ready_dir = optarg; break;
        case 'c': S.created = num_arg("--created", optarg, 0, 1L << 40); break;
        case 'm': S.model = optarg; break;
        case 'B': S.max_body = (size_t)num_arg("--max-request-bytes", optarg, 1, 1L << 30); break;
        case 'C': S.max_conns = (unsigned)num_arg("--max-connections", optarg, 1, 4096); break;
        case 'T': S.idle_ms = 1000L * num_arg("--idle-timeout", optarg, 1, 86400); break;
        case 'U': pc.upstream = optarg; break;
        case 'K': pc.key_env = optarg; break;
        case 'R': pc.record = optarg; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (pc.upstream || pc.record || pc.key_env) S.px = proxy_start(&pc, argc - optind);
    else if (argc - optind != 1) as_usage_exit(USAGE, AS_TROUBLE);
    else as_replay_load_servable(S.path = argv[optind], &S.sc);   // what the wire needs from every entry, file:line named
    if (S.log_path && !(S.log = fopen(S.log_path, "w"))) as_die_sys("open %s", S.log_path);

    // Signals are taken synchronously by main; the server threads inherit the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT); sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct MHD_Daemon *d = listen_on(port);
    if (!d) as_die(AS_TROUBLE, "unable to listen on 127.0.0.1:%ld", port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_in got;
    socklen_t gl = sizeof got;
    if (!di || getsockname(di->listen_fd, (struct sockaddr *)&got, &gl)) as_die_sys("read the listening port");
    unsigned bound = ntohs(got.sin_port);
    if (port_file && write_port_file(port_file, bound)) {
        int e = errno;
        MHD_stop_daemon(d);
        errno = e;
        as_die_sys("write the port file %s", port_file);
    }
    printf("http://127.0.0.1:%u\n", bound);
    if (fflush(stdout)) as_die_sys("write stdout");

    run(&set);
    S.stop = 1;
    MHD_stop_daemon(d);

    if (S.px) {
        S.failures += as_proxy_failures(S.px);
        as_proxy_finish(S.px);
    }
    if (S.next < S.sc.n)
        failure("%s: %zu of %zu entries not consumed", S.path, S.sc.n - S.next, S.sc.n);
    if (S.log && fclose(S.log)) as_die_sys("close %s", S.log_path);
    as_replay_script_free(&S.sc);
    free(S.conns);
    return S.trouble ? AS_TROUBLE : S.failures ? AS_NO : AS_OK;
}
