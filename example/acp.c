// acp.c - ACP v1 over stdio: JSON-RPC dispatch, sessions, permission requests.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "acpsnap.h"
#include "agent.h"

struct pending {
    int64_t id;
    int done, outcome;          // outcome: 1 allowed, 0 rejected, -1 cancelled
    struct pending *next;
};

void acp_send(const char *line, size_t len)
{
    pthread_mutex_lock(&ag.out_mu);
    fwrite(line, 1, len, stdout);
    fputc('\n', stdout);
    if (fflush(stdout) || ferror(stdout)) {
        // The client went away: nothing more to say on stdout.
        if (!ag.failed) as_warn("unable to write stdout: %s", strerror(errno));
        ag.failed = 1;
        clearerr(stdout);
    }
    pthread_mutex_unlock(&ag.out_mu);
}

// Sends the message built in b (and frees it).
static void send_buf(as_buf *b)
{
    acp_send(b->p, b->n);
    as_buf_free(b);
}

// Starts a response to the request whose id has the JSON bytes id[0, idlen).
static void response_head(as_buf *b, const char *id, size_t idlen)
{
    as_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    as_buf_put(b, id, idlen);
}

// Starts a request (id >= 0) or a notification (id < 0) about session s,
// up to its params.sessionId.
static void session_message(as_buf *b, int64_t id, const char *method, const session *s)
{
    as_buf_puts(b, "{\"jsonrpc\":\"2.0\",");
    if (id >= 0) as_buf_printf(b, "\"id\":%lld,", (long long)id);
    as_buf_printf(b, "\"method\":\"%s\",\"params\":{\"sessionId\":", method);
    jstr(b, s->id);
}

static void send_result(const char *id, size_t idlen, const char *result)
{
    as_buf b = {0};
    response_head(&b, id, idlen);
    as_buf_printf(&b, ",\"result\":%s}", result);
    send_buf(&b);
}

static void send_error(const char *id, size_t idlen, int code, const char *msg)
{
    as_buf b = {0};
    response_head(&b, id, idlen);
    as_buf_printf(&b, ",\"error\":{\"code\":%d,\"message\":", code);
    jstr(&b, msg);
    as_buf_puts(&b, "}}");
    send_buf(&b);
}

void acp_notify_update(const session *s, const char *update)
{
    as_buf b = {0};
    session_message(&b, -1, "session/update", s);
    as_buf_printf(&b, ",\"update\":%s}}", update);
    send_buf(&b);
}

int acp_ask_permission(session *s, const char *call_id, const char *tool)
{
    struct pending pd = {0};
    pthread_mutex_lock(&ag.mu);
    pd.id = ag.next_req_id++;
    pd.next = ag.pending;
    ag.pending = &pd;
    pthread_mutex_unlock(&ag.mu);

    as_buf b = {0};
    session_message(&b, pd.id, "session/request_permission", s);
    as_buf_puts(&b, ",\"toolCall\":{\"toolCallId\":");
    jstr(&b, call_id);
    as_buf_puts(&b, ",\"title\":");
    jstr(&b, tool);
    as_buf_puts(&b, "},\"options\":[{\"optionId\":\"allow-once\",\"name\":\"Allow once\",\"kind\":\"allow_once\"},"
                    "{\"optionId\":\"reject-once\",\"name\":\"Reject\",\"kind\":\"reject_once\"}]}}");
    send_buf(&b);

    pthread_mutex_lock(&ag.mu);
    while (!pd.done && !s->cancel) pthread_cond_wait(&ag.cv, &ag.mu);
    int out = pd.done ? pd.outcome : -1;
    for (struct pending **pp = &ag.pending; *pp; pp = &(*pp)->next)
        if (*pp == &pd) { *pp = pd.next; break; }
    pthread_mutex_unlock(&ag.mu);
    return out;
}

// A response from the client to one of our requests.
static void on_response(const as_json *j)
{
    int id = as_json_get(j, 0, "id");
    int64_t n;
    if (id < 0 || !as_json_int(j, id, &n)) return;
    int outcome = 0;
    int res = as_json_get(j, 0, "result");
    if (res >= 0 && j->t[res].type == AS_JOBJ) {
        int oc = as_json_get(j, res, "outcome");
        if (oc >= 0 && j->t[oc].type == AS_JOBJ) {
            int kind = as_json_get(j, oc, "outcome");
            int opt = as_json_get(j, oc, "optionId");
            if (kind >= 0 && as_json_streq(j, kind, "cancelled")) outcome = -1;
            else if (opt >= 0 && as_json_streq(j, opt, "allow-once")) outcome = 1;
        }
    }
    pthread_mutex_lock(&ag.mu);
    for (struct pending *p = ag.pending; p; p = p->next)
        if (p->id == n && !p->done) { p->done = 1; p->outcome = outcome; break; }
    pthread_cond_broadcast(&ag.cv);
    pthread_mutex_unlock(&ag.mu);
}

static session *find_session(const as_json *j, int params)
{
    if (params < 0) return NULL;
    char *id = json_getstr(j, params, "sessionId");
    if (!id) return NULL;
    session *s;
    pthread_mutex_lock(&ag.mu);
    for (s = ag.sessions; s; s = s->next)
        if (!strcmp(s->id, id)) break;
    pthread_mutex_unlock(&ag.mu);
    free(id);
    return s;
}

static session *session_add(const char *id, const char *cwd)
{
    session *s = as_xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->cwd = as_xstrdup(cwd);
    pthread_mutex_lock(&ag.mu);
    s->next = ag.sessions;
    ag.sessions = s;
    pthread_mutex_unlock(&ag.mu);
    return s;
}

void hist_push(session *s, const char *json, size_t len)
{
    if (s->nhist == s->caphist) {
        s->caphist = s->caphist ? 2 * s->caphist : 16;
        s->hist = as_xrealloc(s->hist, s->caphist * sizeof *s->hist);
    }
    as_buf *b = &s->hist[s->nhist++];
    memset(b, 0, sizeof *b);
    as_buf_put(b, json, len);
}

// Checks session/new and session/load params: an absolute cwd and, when
// present, an mcpServers array. Returns the cwd or NULL after answering.
static char *check_cwd(const as_json *j, int params, const char *id, size_t idlen)
{
    char *cwd = params >= 0 ? json_getstr(j, params, "cwd") : NULL;
    if (!cwd || cwd[0] != '/') {
        send_error(id, idlen, -32602, "invalid params: cwd must be an absolute path");
        free(cwd);
        return NULL;
    }
    int mcp = as_json_get(j, params, "mcpServers");
    if (mcp >= 0 && j->t[mcp].type != AS_JARR) {
        send_error(id, idlen, -32602, "invalid params: mcpServers must be an array");
        free(cwd);
        return NULL;
    }
    return cwd;
}

static void on_new(const as_json *j, int params, const char *id, size_t idlen)
{
    char *cwd = check_cwd(j, params, id, idlen);
    if (!cwd) return;
    char sid[37];
    uuid_v4(sid);
    session *s = session_add(sid, cwd);
    free(cwd);
    s->log = persist_create(&ag.cfg, sid, s->cwd);
    as_buf r = {0};
    as_buf_puts(&r, "{\"sessionId\":");
    jstr(&r, sid);
    as_buf_putc(&r, '}');
    send_result(id, idlen, r.p);
    as_buf_free(&r);
}

static void on_load(const as_json *j, int params, const char *id, size_t idlen)
{
    char *sid = json_getstr(j, params, "sessionId");
    char *cwd = check_cwd(j, params, id, idlen);
    if (!cwd) { free(sid); return; }
    if (!sid || strlen(sid) != 36 || strchr(sid, '/') || find_session(j, params)) {
        send_error(id, idlen, -32602, sid && find_session(j, params) ? "invalid params: session is already open"
                                                                    : "invalid params: unknown sessionId");
        free(sid); free(cwd);
        return;
    }
    session *s = session_add(sid, cwd);
    char *logcwd = NULL;
    s->log = persist_open(&ag.cfg, sid, load_event, s, &logcwd);
    free(logcwd);
    if (!s->log) {
        pthread_mutex_lock(&ag.mu);
        ag.sessions = s->next;
        pthread_mutex_unlock(&ag.mu);
        free(s->cwd); free(s);
        send_error(id, idlen, -32002, "resource not found: no session log for this sessionId");
        free(sid); free(cwd);
        return;
    }
    session_replay_history(s);
    send_result(id, idlen, "null");
    free(sid); free(cwd);
}

static void on_prompt(const as_json *j, int params, const char *id, size_t idlen)
{
    session *s = find_session(j, params);
    if (!s) { send_error(id, idlen, -32602, "invalid params: unknown sessionId"); return; }
    int pr = as_json_get(j, params, "prompt");
    if (pr < 0 || j->t[pr].type != AS_JARR) { send_error(id, idlen, -32602, "invalid params: prompt must be an array"); return; }
    as_buf text = {0};
    for (int el = as_json_first(j, pr); el >= 0; el = as_json_nextel(j, el)) {
        if (j->t[el].type != AS_JOBJ) continue;
        char *type = json_getstr(j, el, "type");
        char *t = NULL;
        if (type && !strcmp(type, "text")) t = json_getstr(j, el, "text");
        else if (type && !strcmp(type, "resource_link")) {
            char *uri = json_getstr(j, el, "uri");
            if (uri) { as_buf u = {0}; as_buf_printf(&u, "[resource: %s]", uri); t = u.p; free(uri); }
        }
        if (t) { if (text.n) as_buf_putc(&text, '\n'); as_buf_puts(&text, t); free(t); }
        free(type);
    }
    if (!text.p) as_buf_puts(&text, "");
    pthread_mutex_lock(&ag.mu);
    int busy = s->running;
    pthread_mutex_unlock(&ag.mu);
    if (busy) {
        send_error(id, idlen, -32602, "invalid params: a prompt is already running in this session");
        as_buf_free(&text);
        return;
    }
    if (s->joinable) { pthread_join(s->th, NULL); s->joinable = 0; }
    as_buf_reset(&s->prompt_id);
    as_buf_put(&s->prompt_id, id, idlen);
    free(s->prompt_text);
    s->prompt_text = text.p;
    s->cancel = 0;
    s->running = 1;
    turn_start_thread(s);
}

void acp_dispatch(const char *line, size_t len)
{
    as_json j = {0};
    static const char null_id[] = "null";
    if (as_json_parse(&j, line, len) || j.t[0].type != AS_JOBJ) {
        send_error(null_id, 4, -32700, "parse error");
        as_json_free(&j);
        return;
    }
    int m = as_json_get(&j, 0, "method");
    int idt = as_json_get(&j, 0, "id");
    if (m < 0) {
        if (idt >= 0) on_response(&j);
        as_json_free(&j);
        return;
    }
    char *method = j.t[m].type == AS_JSTR ? json_getstr(&j, 0, "method") : NULL;
    int params = as_json_get(&j, 0, "params");
    if (params >= 0 && j.t[params].type != AS_JOBJ) params = -1;
    const char *id = idt >= 0 ? as_tok_p(&j, idt) : NULL;
    size_t idlen = idt >= 0 ? as_tok_len(&j, idt) : 0;
    if (!method) {
        if (id) send_error(id, idlen, -32600, "invalid request");
    } else if (!id) {
        // notifications
        if (!strcmp(method, "session/cancel")) {
            session *s = find_session(&j, params);
            if (s) {
                pthread_mutex_lock(&ag.mu);
                s->cancel = 1;
                pthread_cond_broadcast(&ag.cv);
                pthread_mutex_unlock(&ag.mu);
            }
        }
    } else if (!strcmp(method, "initialize")) {
        send_result(id, idlen,
                    "{\"protocolVersion\":1,\"agentCapabilities\":{\"loadSession\":true,"
                    "\"promptCapabilities\":{\"image\":false,\"audio\":false,\"embeddedContext\":false}},"
                    "\"agentInfo\":{\"name\":\"acpsnap-agent\",\"version\":\"" ACPSNAP_VERSION "\"},"
                    "\"authMethods\":[]}");
    } else if (!strcmp(method, "session/new")) {
        on_new(&j, params, id, idlen);
    } else if (!strcmp(method, "session/load")) {
        on_load(&j, params, id, idlen);
    } else if (!strcmp(method, "session/prompt")) {
        on_prompt(&j, params, id, idlen);
    } else {
        send_error(id, idlen, -32601, "method not found");
    }
    free(method);
    as_json_free(&j);
}

void acp_shutdown(void)
{
    pthread_mutex_lock(&ag.mu);
    for (session *s = ag.sessions; s; s = s->next) s->cancel = 1;
    pthread_cond_broadcast(&ag.cv);
    pthread_mutex_unlock(&ag.mu);
    for (session *s = ag.sessions, *n; s; s = n) {
        n = s->next;
        if (s->joinable) pthread_join(s->th, NULL);
        persist_close(s->log);
        for (size_t i = 0; i < s->nhist; i++) as_buf_free(&s->hist[i]);
        free(s->hist);
        free(s->cwd);
        free(s->last_header);
        free(s->prompt_text);
        as_buf_free(&s->prompt_id);
        free(s);
    }
    ag.sessions = NULL;
}
