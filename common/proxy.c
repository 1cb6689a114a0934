// proxy.c - replay-serve(1)'s recording mode (proxy.h).
#include "acpsnap.h"
#include "proxy.h"
#include "wire_parse.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum { ERRBODY_MAX = 1 << 20 };

typedef struct { long n; char *json; size_t len; } rec;

struct as_proxy {
    as_proxy_conf conf;
    const char *key;            // from the environment; never copied anywhere else
    size_t base_len;            // the upstream without trailing slashes
    pthread_mutex_t mu;
    rec *e; size_t n, cap;
    int failures;
};

// One forwarded request, owned by its response (freed by its free callback).
typedef struct {
    as_proxy *px;
    long n;
    CURLM *m;
    CURL *h;
    struct curl_slist *hdrs;
    long status;
    int head;                   // the final header block is complete
    as_buf ctype;
    as_buf pend;                // received, not yet handed to the client
    size_t pos;
    as_buf errbody;             // status >= 400: the body, for the entry's message
    as_wp *wp;
    int finished;
    CURLcode rc;
    int recorded;
    int client_fd;              // the client's socket, watched for its going away
    const char **outcome;
    char errmsg[CURL_ERROR_SIZE];
} fwd;

// ---------------------------------------------------------------- entries

static void store(as_proxy *px, long n, as_buf *entry)
{
    pthread_mutex_lock(&px->mu);
    if (px->n == px->cap) {
        px->cap = px->cap ? 2 * px->cap : 16;
        px->e = as_xrealloc(px->e, px->cap * sizeof *px->e);
    }
    px->e[px->n++] = (rec){ n, entry->p, entry->n };
    pthread_mutex_unlock(&px->mu);
    memset(entry, 0, sizeof *entry);
}

// The entry of f, once: its HTTP error, or its stream (cut: why it was cut
// short on our side, NULL when the transfer ended by itself).
static void record(fwd *f, const char *cut)
{
    if (f->recorded) return;
    f->recorded = 1;
    as_buf e = {0};
    if (f->status >= 400) {
        as_wp_http_error((int)f->status, f->errbody.p, f->errbody.n, &e);
    } else {
        if (!cut && f->finished && f->rc != CURLE_OK) cut = "the upstream connection was cut mid-stream";
        as_wp_finish(f->wp, cut, &e);
    }
    store(f->px, f->n, &e);
}

static int by_request(const void *a, const void *b)
{
    long x = ((const rec *)a)->n, y = ((const rec *)b)->n;
    return x < y ? -1 : x > y;
}

void as_proxy_finish(as_proxy *px)
{
    if (px->n) qsort(px->e, px->n, sizeof *px->e, by_request);
    as_out *o = as_out_atomic(px->conf.record, 0);
    for (size_t i = 0; i < px->n; i++) as_out_line(o, px->e[i].json, px->e[i].len);
    as_out_commit(o);
    for (size_t i = 0; i < px->n; i++) free(px->e[i].json);
    free(px->e);
    pthread_mutex_destroy(&px->mu);
    curl_global_cleanup();
    free(px);
}

int as_proxy_failures(as_proxy *px)
{
    pthread_mutex_lock(&px->mu);
    int n = px->failures;
    pthread_mutex_unlock(&px->mu);
    return n;
}

// ---------------------------------------------------------------- the transfer

static size_t on_header(char *p, size_t sz, size_t nm, void *ctx)
{
    fwd *f = ctx;
    size_t n = sz * nm;
    if (n >= 5 && !memcmp(p, "HTTP/", 5)) {           // a status line: a new header block
        curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &f->status);
        as_buf_reset(&f->ctype);
    } else if (n >= 13 && !strncasecmp(p, "content-type:", 13)) {
        size_t a = 13, b = n;
        while (a < b && (p[a] == ' ' || p[a] == '\t')) a++;
        while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' ')) b--;
        as_buf_reset(&f->ctype);
        as_buf_put(&f->ctype, p + a, b - a);
    } else if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
        if (f->status >= 200) f->head = 1;           // 1xx blocks are followed by another
    }
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx)
{
    fwd *f = ctx;
    size_t n = sz * nm;
    as_buf_put(&f->pend, p, n);
    if (f->status >= 400) {
        if (f->errbody.n < ERRBODY_MAX) as_buf_put(&f->errbody, p, n);
    } else {
        as_wp_feed(f->wp, p, n);
    }
    return n;
}

// One round of the transfer: waits up to 50 ms for the upstream.
static void pump(fwd *f)
{
    int running = 0;
    curl_multi_perform(f->m, &running);
    int left;
    for (CURLMsg *msg; (msg = curl_multi_info_read(f->m, &left));)
        if (msg->msg == CURLMSG_DONE) { f->finished = 1; f->rc = msg->data.result; }
    if (!f->finished && running) curl_multi_poll(f->m, NULL, 0, 50, NULL);
}

static void fwd_free(void *cls)
{
    fwd *f = cls;
    record(f, "the client went away before the end of the stream");
    if (f->m && f->h) curl_multi_remove_handle(f->m, f->h);
    if (f->h) curl_easy_cleanup(f->h);
    if (f->m) curl_multi_cleanup(f->m);
    curl_slist_free_all(f->hdrs);
    as_buf_free(&f->ctype);
    as_buf_free(&f->pend);
    as_buf_free(&f->errbody);
    as_wp_free(f->wp);
    free(f);
}

// Has the client gone away (EOF or an error on its socket)?
static int client_gone(const fwd *f)
{
    struct pollfd p = { .fd = f->client_fd, .events = POLLIN | POLLRDHUP };
    if (f->client_fd < 0 || poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return 1;
    char ch;
    ssize_t k = recv(f->client_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// The response body: what arrived, as it arrived; the end as the upstream
// ended (a cut upstream is a cut answer).
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    fwd *f = cls;
    for (;;) {
        if (f->pos < f->pend.n) {
            size_t n = f->pend.n - f->pos;
            if (n > max) n = max;
            memcpy(buf, f->pend.p + f->pos, n);
            f->pos += n;
            if (f->pos == f->pend.n) { as_buf_reset(&f->pend); f->pos = 0; }
            return (ssize_t)n;
        }
        if (f->finished) {
            record(f, NULL);
            *f->outcome = f->rc == CURLE_OK ? "complete" : "aborted";
            if (f->rc != CURLE_OK)
                as_warn("request %ld: the upstream stream was cut: %s", f->n, f->errmsg[0] ? f->errmsg : curl_easy_strerror(f->rc));
            return f->rc == CURLE_OK ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (*f->px->conf.stop) {
            record(f, "the recording stopped before the end of the stream");
            *f->outcome = "aborted";
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (client_gone(f)) {   // the free callback records the stream so far
            *f->outcome = "client-closed";
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        pump(f);
    }
}

// The headers sent upstream: the body's type, the client's Accept and
// anthropic-* headers, the key by the wire's convention.
static void headers(fwd *f, struct MHD_Connection *c, as_wp_wire w)
{
    static const char *const pass[] = { "Accept", "anthropic-version", "anthropic-beta", NULL };
    as_buf h = {0};
    f->hdrs = curl_slist_append(f->hdrs, "Content-Type: application/json");
    f->hdrs = curl_slist_append(f->hdrs, "Expect:");
    for (int i = 0; pass[i]; i++) {
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, pass[i]);
        if (!v) continue;
        as_buf_reset(&h);
        as_buf_printf(&h, "%s: %s", pass[i], v);
        f->hdrs = curl_slist_append(f->hdrs, h.p);
    }
    if (f->px->key) {
        as_buf_reset(&h);
        if (w == AS_WP_MESSAGES) as_buf_printf(&h, "x-api-key: %s", f->px->key);
        else as_buf_printf(&h, "Authorization: Bearer %s", f->px->key);
        f->hdrs = curl_slist_append(f->hdrs, h.p);
        memset(h.p, 0, h.n);   // the key's copy goes no further
    }
    as_buf_free(&h);
}

static fwd *start(as_proxy *px, struct MHD_Connection *c, long n, as_wp_wire w, const char *url,
                  const char *body, size_t len)
{
    fwd *f = as_xmalloc(sizeof *f);
    memset(f, 0, sizeof *f);
    f->px = px;
    f->n = n;
    f->wp = as_wp_new(w);
    headers(f, c, w);
    as_buf u = {0};
    as_buf_put(&u, px->conf.upstream, px->base_len);
    as_buf_puts(&u, url);
    f->h = curl_easy_init();
    f->m = curl_multi_init();
    if (!f->h || !f->m) as_die(AS_TROUBLE, "unable to start a transfer (libcurl)");
    curl_easy_setopt(f->h, CURLOPT_URL, u.p);
    curl_easy_setopt(f->h, CURLOPT_POST, 1L);
    curl_easy_setopt(f->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(f->h, CURLOPT_COPYPOSTFIELDS, body ? body : "");
    curl_easy_setopt(f->h, CURLOPT_HTTPHEADER, f->hdrs);
    curl_easy_setopt(f->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(f->h, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(f->h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->h, CURLOPT_ERRORBUFFER, f->errmsg);
    curl_easy_setopt(f->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_multi_add_handle(f->m, f->h);
    as_buf_free(&u);
    return f;
}

// ---------------------------------------------------------------- requests

static void failure(as_proxy *px, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failure(as_proxy *px, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&px->mu);
    px->failures++;
    pthread_mutex_unlock(&px->mu);
    as_warn("%s", msg);
}

static enum MHD_Result refuse(struct MHD_Connection *c, int code, const char *msg, int *status)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"error\":{\"message\":");
    as_jstr_write(&b, msg, strlen(msg));
    as_buf_puts(&b, ",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}");
    struct MHD_Response *resp = MHD_create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_COPY);
    as_buf_free(&b);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    *status = code;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, resp);
    MHD_destroy_response(resp);
    return ret;
}

// A streaming request: a JSON object with "stream": true.
static int streaming(const char *body, size_t len)
{
    as_json j = {0};
    int ok = as_json_parse(&j, body ? body : "", len) == 0 && j.t[0].type == AS_JOBJ;
    int st = ok ? as_json_get(&j, 0, "stream") : -1;
    ok = st >= 0 && j.t[st].type == AS_JTRUE;
    as_json_free(&j);
    return ok;
}

enum MHD_Result as_proxy_serve(as_proxy *px, struct MHD_Connection *c, long n, const char *method, const char *url,
                               const char *body, size_t len, int *status, const char **outcome)
{
    as_wp_wire w;
    char msg[400];
    *outcome = "error";
    if (strcmp(method, "POST") || as_wp_wire_of(url, &w)) {
        failure(px, "request %ld: no such endpoint: %s %.200s", n, method, url);
        snprintf(msg, sizeof msg, "replay-serve: no such endpoint: %s %.200s", method, url);
        return refuse(c, 404, msg, status);
    }
    if (!streaming(body, len)) {
        failure(px, "request %ld: not a streaming request (\"stream\": true is required)", n);
        return refuse(c, 400, "replay-serve: only streaming requests are recorded (\"stream\": true)", status);
    }
    fwd *f = start(px, c, n, w, url, body, len);
    f->outcome = outcome;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    f->client_fd = ci ? ci->connect_fd : -1;
    while (!f->head && !f->finished && !*px->conf.stop) pump(f);
    if (!f->head) {
        // Nothing came back: the client's connection is dropped, as a
        // TRANSPORT throw without chunks is served.
        if (f->finished)
            as_warn("request %ld: the upstream did not answer: %s", n, f->errmsg[0] ? f->errmsg : curl_easy_strerror(f->rc));
        f->status = 0;
        record(f, f->finished ? "the upstream did not answer" : "the recording stopped before the upstream answered");
        *status = 0;
        *outcome = "dropped";
        fwd_free(f);
        return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, f, fwd_free);
    if (!resp) { fwd_free(f); return MHD_NO; }
    if (f->ctype.n) MHD_add_response_header(resp, "Content-Type", f->ctype.p);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    *status = (int)f->status;
    *outcome = "client-closed";
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)f->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

// ---------------------------------------------------------------- setup

static void check_record(const char *path)
{
    as_buf tmp = {0};
    as_buf_printf(&tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp.p);
    if (fd < 0) as_die_sys("create a file beside %s (--record)", path);
    close(fd);
    unlink(tmp.p);
    as_buf_free(&tmp);
}

as_proxy *as_proxy_new(const as_proxy_conf *conf)
{
    const char *u = conf->upstream;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))
        as_die(AS_TROUBLE, "invalid --upstream (an http:// or https:// URL is wanted)");
    const char *key = NULL;
    if (conf->key_env) {
        key = getenv(conf->key_env);
        if (!key || !*key) as_die(AS_TROUBLE, "--upstream-key-env: %s is not set or empty", conf->key_env);
        if (strpbrk(key, "\r\n")) as_die(AS_TROUBLE, "--upstream-key-env: %s holds a line break", conf->key_env);
    }
    check_record(conf->record);
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) as_die(AS_TROUBLE, "unable to initialize libcurl");
    as_proxy *px = as_xmalloc(sizeof *px);
    memset(px, 0, sizeof *px);
    px->conf = *conf;
    px->key = key;
    px->base_len = strlen(u);
    while (px->base_len > 8 && u[px->base_len - 1] == '/') px->base_len--;
    pthread_mutex_init(&px->mu, NULL);
    return px;
}
