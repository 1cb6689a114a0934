// model_deepseek.c - the DeepSeek adapter: OpenAI-compatible chat
// completions with SSE streaming over libcurl, translated to the stream
// chunks of acpsnap-replay(5). Runs the transfer on its own thread.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "acpsnap.h"
#include "agent.h"

// libcurl is loaded with dlopen in live mode only: replay never even maps
// it, and start-up skips loading its ~30 shared-library dependencies.
static struct {
    void *lib;
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} cu;

typedef struct {
    int ds_index;               // DeepSeek's tool_calls[].index
    int block;                  // our block index
    char *id, *name;
    as_buf args;
} tcall;

typedef struct {
    stream *s;
    const config *cfg;
    char *url, *body;
    CURL *h;
    struct curl_slist *hdrs;
    long status;
    as_buf line, data, errbody;
    int saw_done, failed, idle_fired;
    char *fail_msg, *fail_code;
    int64_t last_byte;
    // translation state
    int nblocks, text_block, reas_block;
    as_buf text, reas;
    tcall *tc; int ntc;
    char *finish;
    as_buf usage;               // translated usage object
    int nfinish;
} ds;

void deepseek_global_init(void)
{
    cu.lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) as_die(AS_TROUBLE, "unable to load libcurl: %s", dlerror());
    struct { void **fn; const char *name; } syms[] = {
        {(void **)&cu.global_init, "curl_global_init"}, {(void **)&cu.global_cleanup, "curl_global_cleanup"},
        {(void **)&cu.easy_init, "curl_easy_init"}, {(void **)&cu.easy_setopt, "curl_easy_setopt"},
        {(void **)&cu.easy_perform, "curl_easy_perform"}, {(void **)&cu.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&cu.easy_cleanup, "curl_easy_cleanup"}, {(void **)&cu.easy_strerror, "curl_easy_strerror"},
        {(void **)&cu.slist_append, "curl_slist_append"}, {(void **)&cu.slist_free_all, "curl_slist_free_all"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(cu.lib, syms[i].name)))
            as_die(AS_TROUBLE, "unable to load libcurl: %s missing", syms[i].name);
    if (cu.global_init(CURL_GLOBAL_DEFAULT)) as_die(AS_TROUBLE, "unable to initialize libcurl");
}
void deepseek_global_cleanup(void)
{
    if (!cu.lib) return;
    cu.global_cleanup();
    dlclose(cu.lib);
    cu.lib = NULL;
}

static void fail(ds *d, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(ds *d, const char *code, const char *fmt, ...)
{
    if (d->failed) return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&d->fail_msg, fmt, ap) < 0) d->fail_msg = NULL;
    va_end(ap);
    d->fail_code = as_xstrdup(code);
    d->failed = 1;
}

static void push(ds *d, as_buf *b) { stream_push(d->s, b->p, b->n); as_buf_reset(b); }

static void block_start(ds *d, int idx, const char *type)
{
    as_buf b = {0};
    as_buf_printf(&b, "{\"type\":\"block-start\",\"index\":%d,\"blockType\":\"%s\"}", idx, type);
    push(d, &b);
    as_buf_free(&b);
}

// A <type>-delta chunk (type "text" or "reasoning") of block idx.
static void delta(ds *d, const char *type, int idx, const char *text, size_t n)
{
    as_buf b = {0};
    as_buf_printf(&b, "{\"type\":\"%s-delta\",\"index\":%d,\"text\":", type, idx);
    as_jstr_write(&b, text, n);
    as_buf_putc(&b, '}');
    push(d, &b);
    as_buf_free(&b);
}

static int64_t num(const as_json *j, int obj, const char *key, int *present)
{
    int v = obj >= 0 ? as_json_get(j, obj, key) : -1;
    int64_t n = 0;
    if (v >= 0 && as_json_int(j, v, &n)) { if (present) *present = 1; return n; }
    if (present) *present = 0;
    return 0;
}

static void translate_usage(ds *d, const as_json *j, int u)
{
    int has_hit, has_cached, has_reas;
    int64_t prompt = num(j, u, "prompt_tokens", NULL), completion = num(j, u, "completion_tokens", NULL);
    int64_t hit = num(j, u, "prompt_cache_hit_tokens", &has_hit);
    int ptd = as_json_get(j, u, "prompt_tokens_details");
    int ctd = as_json_get(j, u, "completion_tokens_details");
    if (!has_hit) hit = num(j, ptd >= 0 && j->t[ptd].type == AS_JOBJ ? ptd : -1, "cached_tokens", &has_cached);
    else has_cached = 1;
    int64_t reas = num(j, ctd >= 0 && j->t[ctd].type == AS_JOBJ ? ctd : -1, "reasoning_tokens", &has_reas);
    as_buf_reset(&d->usage);
    as_buf_printf(&d->usage, "{\"inputTokens\":%lld,\"outputTokens\":%lld", (long long)(prompt - hit),
                  (long long)completion);
    if (has_cached) as_buf_printf(&d->usage, ",\"cacheReadTokens\":%lld", (long long)hit);
    if (has_reas) as_buf_printf(&d->usage, ",\"reasoningTokens\":%lld", (long long)reas);
    as_buf_putc(&d->usage, '}');
}

// A non-empty string delta tok of kind type ("reasoning" or "text"): a
// <type>-delta chunk in *block (opened on first use), its text kept in acc.
static void text_delta(ds *d, const as_json *j, int tok, int *block, const char *type, as_buf *acc)
{
    if (tok < 0 || j->t[tok].type != AS_JSTR || as_tok_len(j, tok) <= 2) return;
    as_buf t = {0};
    as_json_str(j, tok, &t);
    if (*block < 0) { *block = d->nblocks++; block_start(d, *block, type); }
    delta(d, type, *block, t.p, t.n);
    as_buf_put(acc, t.p, t.n);
    as_buf_free(&t);
}

// One SSE data payload (a chat.completion.chunk).
static void on_chunk(ds *d, const char *s, size_t n)
{
    as_json j = {0};
    if (as_json_parse(&j, s, n) || j.t[0].type != AS_JOBJ) {
        fail(d, "MALFORMED_RESPONSE", "malformed chunk in the model stream: %s", j.err ? j.err : "not an object");
        as_json_free(&j);
        return;
    }
    int err = as_json_get(&j, 0, "error");
    if (err >= 0 && j.t[err].type == AS_JOBJ) {
        char *m = json_getstr(&j, err, "message");
        fail(d, "SERVER", "%s", m ? m : "error event in the model stream");
        free(m);
        as_json_free(&j);
        return;
    }
    int u = as_json_get(&j, 0, "usage");
    if (u >= 0 && j.t[u].type == AS_JOBJ) translate_usage(d, &j, u);
    int ch = as_json_get(&j, 0, "choices");
    int c0 = ch >= 0 && j.t[ch].type == AS_JARR ? as_json_first(&j, ch) : -1;
    if (c0 < 0 || j.t[c0].type != AS_JOBJ) { as_json_free(&j); return; }
    int dl = as_json_get(&j, c0, "delta");
    if (dl >= 0 && j.t[dl].type == AS_JOBJ) {
        text_delta(d, &j, as_json_get(&j, dl, "reasoning_content"), &d->reas_block, "reasoning", &d->reas);
        text_delta(d, &j, as_json_get(&j, dl, "content"), &d->text_block, "text", &d->text);
        int tcs = as_json_get(&j, dl, "tool_calls");
        for (int el = tcs >= 0 && j.t[tcs].type == AS_JARR ? as_json_first(&j, tcs) : -1; el >= 0;
             el = as_json_nextel(&j, el)) {
            if (j.t[el].type != AS_JOBJ) continue;
            int64_t k = num(&j, el, "index", NULL);
            tcall *t = NULL;
            for (int i = 0; i < d->ntc; i++) if (d->tc[i].ds_index == k) t = &d->tc[i];
            int fn = as_json_get(&j, el, "function");
            if (fn >= 0 && j.t[fn].type != AS_JOBJ) fn = -1;
            if (!t) {
                d->tc = as_xrealloc(d->tc, (size_t)(d->ntc + 1) * sizeof *d->tc);
                t = &d->tc[d->ntc++];
                memset(t, 0, sizeof *t);
                t->ds_index = (int)k;
                t->block = d->nblocks++;
                t->id = json_getstr(&j, el, "id");
                t->name = fn >= 0 ? json_getstr(&j, fn, "name") : NULL;
                if (!t->id) t->id = as_xstrdup("");
                if (!t->name) t->name = as_xstrdup("");
                block_start(d, t->block, "tool-call");
            }
            as_buf a = {0}, b = {0};
            int ar = fn >= 0 ? as_json_get(&j, fn, "arguments") : -1;
            if (ar >= 0 && j.t[ar].type == AS_JSTR) as_json_str(&j, ar, &a);
            as_buf_put(&t->args, a.p ? a.p : "", a.n);
            as_buf_printf(&b, "{\"type\":\"tool-call-delta\",\"index\":%d,\"id\":", t->block);
            jstr(&b, t->id);
            as_buf_puts(&b, ",\"name\":");
            jstr(&b, t->name);
            as_buf_puts(&b, ",\"argumentsDelta\":");
            as_jstr_write(&b, a.p ? a.p : "", a.n);
            as_buf_putc(&b, '}');
            push(d, &b);
            as_buf_free(&a);
            as_buf_free(&b);
        }
    }
    int fr = as_json_get(&j, c0, "finish_reason");
    if (fr >= 0 && j.t[fr].type == AS_JSTR) { free(d->finish); d->finish = json_getstr(&j, c0, "finish_reason"); }
    as_json_free(&j);
}

// After [DONE]: every block's end in index order, the usage, the finish.
static void on_done(ds *d)
{
    as_buf b = {0};
    for (int i = 0; i < d->nblocks; i++) {
        as_buf_printf(&b, "{\"type\":\"block-end\",\"index\":%d,\"block\":", i);
        if (i == d->text_block || i == d->reas_block) {
            as_buf_printf(&b, "{\"type\":\"%s\",\"text\":", i == d->text_block ? "text" : "reasoning");
            as_buf *t = i == d->text_block ? &d->text : &d->reas;
            as_jstr_write(&b, t->p ? t->p : "", t->n);
        } else {
            for (int k = 0; k < d->ntc; k++) {
                if (d->tc[k].block != i) continue;
                as_buf_puts(&b, "{\"type\":\"tool-call\",\"id\":");
                jstr(&b, d->tc[k].id);
                as_buf_puts(&b, ",\"name\":");
                jstr(&b, d->tc[k].name);
                as_buf_puts(&b, ",\"arguments\":");
                as_jstr_write(&b, d->tc[k].args.p ? d->tc[k].args.p : "", d->tc[k].args.n);
            }
        }
        as_buf_puts(&b, "}}");
        push(d, &b);
    }
    if (d->usage.n) {
        as_buf_puts(&b, "{\"type\":\"usage\",\"usage\":");
        as_buf_put(&b, d->usage.p, d->usage.n);
        as_buf_putc(&b, '}');
        push(d, &b);
    }
    const char *f = d->finish ? d->finish : "stop";
    if (!strcmp(f, "insufficient_system_resource")) {
        as_buf_puts(&b, "{\"type\":\"finish\",\"reason\":{\"kind\":\"error\",\"failure\":{\"message\":"
                        "\"the provider ran short of resources and interrupted generation\",\"code\":\"SERVER\"}}}");
    } else {
        const char *kind = !strcmp(f, "tool_calls") ? "tool-calls" : !strcmp(f, "length") ? "max-tokens"
                         : !strcmp(f, "content_filter") ? "refusal" : "stop";
        as_buf_printf(&b, "{\"type\":\"finish\",\"reason\":{\"kind\":\"%s\"}}", kind);
    }
    push(d, &b);
    as_buf_free(&b);
}

// One complete SSE line (without its LF).
static void on_line(ds *d, const char *s, size_t n)
{
    if (n && s[n - 1] == '\r') n--;
    if (n == 0) {                       // blank line: dispatch the event
        if (!d->data.n) return;
        if (d->data.n == 6 && !memcmp(d->data.p, "[DONE]", 6)) d->saw_done = 1;
        else if (d->saw_done) fail(d, "MALFORMED_RESPONSE", "data after [DONE] in the model stream");
        else on_chunk(d, d->data.p, d->data.n);
        as_buf_reset(&d->data);
        return;
    }
    if (s[0] == ':') return;            // a comment: keep-alive
    if (n >= 5 && !memcmp(s, "data:", 5)) {
        s += 5; n -= 5;
        if (n && *s == ' ') { s++; n--; }
        if (d->data.n) as_buf_putc(&d->data, '\n');
        as_buf_put(&d->data, s, n);
    }
    // other fields (event:, id:, retry:) are ignored
}

static size_t on_write(char *p, size_t sz, size_t nm, void *ctx)
{
    ds *d = ctx;
    size_t n = sz * nm;
    d->last_byte = now_ms();
    if (!d->status) cu.easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &d->status);
    if (d->status >= 400) {
        if (d->errbody.n < 65536) as_buf_put(&d->errbody, p, n);
        return n;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') { on_line(d, d->line.p ? d->line.p : "", d->line.n); as_buf_reset(&d->line); }
        else as_buf_putc(&d->line, p[i]);
    }
    return d->failed ? 0 : n;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t e)
{
    ds *d = ctx;
    pthread_mutex_lock(&ag.mu);
    int gone = d->s->abandon;
    pthread_mutex_unlock(&ag.mu);
    if (gone) return 1;
    if (now_ms() - d->last_byte > d->cfg->idle_timeout_ms) { d->idle_fired = 1; return 1; }
    return 0;
}

static const char *classify(long status, const char *msg)
{
    if (status == 401 || status == 403) return "AUTH";
    if (status == 402) return "QUOTA";
    if (status == 429) return strcasestr(msg, "balance") || strcasestr(msg, "quota") ? "QUOTA" : "RATE_LIMIT";
    if (status >= 500) return "SERVER";
    if (status == 400 && (strcasestr(msg, "context length") || strcasestr(msg, "context window") ||
                          strcasestr(msg, "maximum context") || strcasestr(msg, "too long")))
        return "CONTEXT_WINDOW_EXCEEDED";
    return "INVALID_REQUEST";
}

static void http_error(ds *d)
{
    as_buf m = {0};
    as_json j = {0};
    if (d->errbody.n && as_json_parse(&j, d->errbody.p, d->errbody.n) == 0 && j.t[0].type == AS_JOBJ) {
        int e = as_json_get(&j, 0, "error");
        char *msg = e >= 0 && j.t[e].type == AS_JOBJ ? json_getstr(&j, e, "message") : NULL;
        if (msg) as_buf_puts(&m, msg);
        free(msg);
    }
    as_json_free(&j);
    if (!m.n && d->errbody.n) {         // a plain-text body (legacy 422)
        size_t n = d->errbody.n;
        while (n && (d->errbody.p[n - 1] == '\n' || d->errbody.p[n - 1] == '\r' || d->errbody.p[n - 1] == ' ')) n--;
        as_buf_put(&m, d->errbody.p, n > 500 ? 500 : n);
    }
    if (!m.p) as_buf_puts(&m, "");
    as_buf full = {0};
    as_buf_printf(&full, "HTTP %ld%s%s", d->status, m.n ? ": " : "", m.p);
    fail(d, classify(d->status, m.p), "%s", full.p);
    as_buf_free(&m);
    as_buf_free(&full);
}

static void *ds_thread(void *arg)
{
    ds *d = arg;
    d->last_byte = now_ms();
    CURLcode rc = cu.easy_perform(d->h);
    if (!d->status) cu.easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &d->status);
    pthread_mutex_lock(&ag.mu);
    int gone = d->s->abandon;
    pthread_mutex_unlock(&ag.mu);
    if (gone) { stream_end(d->s, "the model stream was abandoned", "CANCELLED"); return NULL; }
    if (d->status >= 400) http_error(d);
    else if (d->failed) ;
    else if (rc == CURLE_ABORTED_BY_CALLBACK && d->idle_fired)
        fail(d, "TIMEOUT", "the model stream was idle for more than %ld ms", d->cfg->idle_timeout_ms);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        fail(d, "TIMEOUT", "the model request took more than %ld ms", d->cfg->request_timeout_ms);
    else if (rc != CURLE_OK)
        fail(d, "TRANSPORT", "%s", cu.easy_strerror(rc));
    else {
        if (d->line.n) on_line(d, d->line.p, d->line.n);   // a final line without LF
        if (!d->saw_done) fail(d, "STREAM_CLOSED", "the model stream ended without [DONE]");
    }
    if (d->failed) stream_end(d->s, d->fail_msg ? d->fail_msg : "model stream failed", d->fail_code);
    else { on_done(d); stream_end(d->s, NULL, NULL); }
    return NULL;
}

static void ds_close(stream *s)
{
    ds *d = s->impl;
    if (!d) return;
    cu.easy_cleanup(d->h);
    cu.slist_free_all(d->hdrs);
    free(d->url); free(d->body); free(d->fail_msg); free(d->fail_code); free(d->finish);
    as_buf_free(&d->line); as_buf_free(&d->data); as_buf_free(&d->errbody);
    as_buf_free(&d->text); as_buf_free(&d->reas); as_buf_free(&d->usage);
    for (int i = 0; i < d->ntc; i++) { free(d->tc[i].id); free(d->tc[i].name); as_buf_free(&d->tc[i].args); }
    free(d->tc);
    free(d);
}

stream *deepseek_start(const config *c, const model_req *r)
{
    stream *s = as_xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->close = ds_close;
    if (!c->api_key) {
        stream_end(s, "no DeepSeek API key: set api_key, DEEPSEEK_API_KEY or a .env line", "AUTH");
        return s;
    }
    ds *d = as_xmalloc(sizeof *d);
    memset(d, 0, sizeof *d);
    d->s = s; d->cfg = c;
    d->text_block = d->reas_block = -1;
    s->impl = d;
    as_buf u = {0}, b = {0}, h = {0};
    size_t bl = strlen(c->base_url);
    while (bl && c->base_url[bl - 1] == '/') bl--;
    as_buf_put(&u, c->base_url, bl);
    as_buf_puts(&u, "/chat/completions");
    d->url = u.p;
    as_buf_puts(&b, "{\"model\":");
    jstr(&b, c->model);
    as_buf_puts(&b, ",\"messages\":");
    as_buf_puts(&b, r->messages);
    if (r->tools) { as_buf_puts(&b, ",\"tools\":"); as_buf_puts(&b, r->tools); }
    as_buf_printf(&b, ",\"thinking\":{\"type\":\"%s\"}", c->thinking ? "enabled" : "disabled");
    if (c->max_tokens) as_buf_printf(&b, ",\"max_tokens\":%ld", c->max_tokens);
    as_buf_puts(&b, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    d->body = b.p;
    as_buf_printf(&h, "Authorization: Bearer %s", c->api_key);
    d->hdrs = cu.slist_append(NULL, "Content-Type: application/json");
    d->hdrs = cu.slist_append(d->hdrs, "Accept: text/event-stream");
    d->hdrs = cu.slist_append(d->hdrs, h.p);
    as_buf_free(&h);
    d->h = cu.easy_init();
    if (!d->h) { stream_end(s, "unable to create a libcurl handle", "TRANSPORT"); return s; }
    cu.easy_setopt(d->h, CURLOPT_URL, d->url);
    cu.easy_setopt(d->h, CURLOPT_POSTFIELDS, d->body);
    cu.easy_setopt(d->h, CURLOPT_POSTFIELDSIZE, (long)b.n);
    cu.easy_setopt(d->h, CURLOPT_HTTPHEADER, d->hdrs);
    cu.easy_setopt(d->h, CURLOPT_NOSIGNAL, 1L);
    cu.easy_setopt(d->h, CURLOPT_TIMEOUT_MS, c->request_timeout_ms);
    cu.easy_setopt(d->h, CURLOPT_CONNECTTIMEOUT_MS, c->idle_timeout_ms);
    cu.easy_setopt(d->h, CURLOPT_WRITEFUNCTION, on_write);
    cu.easy_setopt(d->h, CURLOPT_WRITEDATA, d);
    cu.easy_setopt(d->h, CURLOPT_NOPROGRESS, 0L);
    cu.easy_setopt(d->h, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu.easy_setopt(d->h, CURLOPT_XFERINFODATA, d);
    cu.easy_setopt(d->h, CURLOPT_USERAGENT, "acpsnap-agent/" ACPSNAP_VERSION);
    if (pthread_create(&s->th, NULL, ds_thread, d)) as_die_sys("start the model stream thread");
    s->has_thread = 1;
    return s;
}
