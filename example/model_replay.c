// model_replay.c - the replay adapter: serves a replay script positionally
// (DESIGN.md §4.2, §4.5). Never touches the network or .env.
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent.h"
#include "replay.h"

static struct {
    as_replay_script sc;
    size_t next;            // index of the next entry to serve
    int in_flight;
    int failures;
} rp;

// 1 when the first line of path is a session header (a log to derive from).
static int is_session_log(const char *path) {
    as_in *in = as_in_open(path);
    const char *line; size_t len;
    int yes = 0;
    if (as_in_line(in, &line, &len)) {
        as_json j = {0};
        if (as_json_parse(&j, line, len) == 0 && j.t[0].type == AS_JOBJ) {
            int t = as_json_get(&j, 0, "type");
            yes = t >= 0 && as_json_streq(&j, t, "session");
        }
        as_json_free(&j);
    }
    as_in_close(in);
    return yes;
}

int replay_init(const config *c) {
    if (is_session_log(c->replay_script))
        as_replay_from_session(c->replay_script, c->replay_override, 1, &rp.sc);  // child logs skip their seed
    else {
        if (c->replay_override)
            as_die(AS_TROUBLE, "%s: replay_override applies only to a session log", c->replay_script);
        as_replay_load(c->replay_script, &rp.sc);
    }
    return 0;
}

int replay_finish(void) {
    if (rp.next < rp.sc.n) {
        as_warn("replay: %zu of %zu entries not consumed", rp.sc.n - rp.next, rp.sc.n);
        rp.failures++;
    }
    as_replay_script_free(&rp.sc);
    return rp.failures;
}

static void replay_close(stream *s) {
    pthread_mutex_lock(&ag.mu);
    if (s->impl) rp.in_flight = 0;
    pthread_mutex_unlock(&ag.mu);
}

static void write_ready_file(const char *cwd, const char *rel) {
    as_buf p = {0};
    if (rel[0] == '/') as_buf_puts(&p, rel);
    else as_buf_printf(&p, "%s/%s", cwd, rel);
    int fd = open(p.p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) as_warn("replay: unable to write readyFile %s: %s", p.p, strerror(errno));
    else close(fd);
    as_buf_free(&p);
}

// ---------------------------------------------------------------- {{fromRequest:…}}

// Every string leaf of the request messages, joined by LF.
static void leaves(const as_json *j, int tok, as_buf *hay, int *n) {
    if (j->t[tok].type == AS_JSTR) {
        if ((*n)++) as_buf_putc(hay, '\n');
        as_json_str(j, tok, hay);
    } else if (j->t[tok].type == AS_JARR) {
        for (int e = as_json_first(j, tok); e >= 0; e = as_json_nextel(j, e)) leaves(j, e, hay, n);
    } else if (j->t[tok].type == AS_JOBJ) {
        for (int k = as_json_firstkey(j, tok); k >= 0; k = as_json_nextkey(j, k)) leaves(j, k + 1, hay, n);
    }
}

// The last match of pattern pat in hay: its first group, else the whole match.
static int from_request(const char *pat, size_t plen, const as_buf *hay, as_buf *out, char *err, size_t errn) {
    as_buf ere = {0};
    for (size_t i = 0; i < plen; i++) {    // the JavaScript class escapes ERE lacks
        static const char *const cls[][2] = {{"d", "[0-9]"}, {"D", "[^0-9]"}, {"w", "[A-Za-z0-9_]"},
                                             {"W", "[^A-Za-z0-9_]"}, {"s", "[[:space:]]"}, {"S", "[^[:space:]]"}};
        const char *rep = NULL;
        if (pat[i] == '\\' && i + 1 < plen)
            for (size_t k = 0; k < 6; k++) if (pat[i + 1] == cls[k][0][0]) rep = cls[k][1];
        if (rep) { as_buf_puts(&ere, rep); i++; }
        else as_buf_putc(&ere, pat[i]);
    }
    regex_t re;
    int rc = regcomp(&re, ere.p ? ere.p : "", REG_EXTENDED);
    as_buf_free(&ere);
    if (rc) {
        snprintf(err, errn, "fromRequest pattern %.*s is invalid", (int)(plen > 60 ? 60 : plen), pat);
        return -1;
    }
    const char *h = hay->p ? hay->p : "";
    regmatch_t m[2];
    regoff_t so = -1, eo = -1;
    for (size_t off = 0; off <= hay->n && regexec(&re, h + off, 2, m, off ? REG_NOTBOL : 0) == 0; ) {
        int g = m[1].rm_so >= 0 ? 1 : 0;
        so = (regoff_t)off + m[g].rm_so;
        eo = (regoff_t)off + m[g].rm_eo;
        off += m[0].rm_eo > 0 ? (size_t)m[0].rm_eo : 1;
    }
    regfree(&re);
    if (so < 0) {
        snprintf(err, errn, "fromRequest pattern %.*s matched nothing in the request", (int)(plen > 60 ? 60 : plen), pat);
        return -1;
    }
    as_buf_put(out, h + so, (size_t)(eo - so));
    return 0;
}

// Copies chunk json to out with every placeholder in its strings resolved.
static int expand(const char *json, size_t len, const as_buf *hay, as_buf *out, char *err, size_t errn) {
    static const char OPEN[] = "{{fromRequest:";
    as_json j = {0};
    if (as_json_parse(&j, json, len)) { as_json_free(&j); snprintf(err, errn, "unparsable chunk"); return -1; }
    size_t last = 0;
    int rc = 0;
    for (size_t i = 0; i < j.n && !rc; i++) {
        const char *p = as_tok_p(&j, (int)i);
        size_t n = as_tok_len(&j, (int)i);
        if (j.t[i].type != AS_JSTR || !memmem(p, n, OPEN, sizeof OPEN - 1)) continue;
        as_buf txt = {0}, res = {0};
        as_json_str(&j, (int)i, &txt);
        for (size_t cur = 0; ; ) {
            const char *o = memmem(txt.p + cur, txt.n - cur, OPEN, sizeof OPEN - 1);
            if (!o) { as_buf_put(&res, txt.p + cur, txt.n - cur); break; }
            size_t po = (size_t)(o - txt.p) + sizeof OPEN - 1;
            const char *c = memmem(txt.p + po, txt.n - po, "}}", 2);
            if (!c) { snprintf(err, errn, "fromRequest placeholder is unterminated"); rc = -1; break; }
            size_t pc = (size_t)(c - txt.p);
            while (pc + 2 < txt.n && txt.p[pc + 2] == '}') pc++;   // a pattern ending in a {n} quantifier
            as_buf_put(&res, txt.p + cur, (size_t)(o - txt.p) - cur);
            if ((rc = from_request(txt.p + po, pc - po, hay, &res, err, errn))) break;
            cur = pc + 2;
        }
        if (!rc) {
            as_buf_put(out, json + last, j.t[i].start - last);
            as_jstr_write(out, res.p ? res.p : "", res.n);
            last = j.t[i].end;
        }
        as_buf_free(&txt);
        as_buf_free(&res);
    }
    if (!rc) as_buf_put(out, json + last, len - last);
    as_json_free(&j);
    return rc;
}

stream *replay_start(const model_req *r) {
    stream *s = as_xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->close = replay_close;
    char msg[400];
    pthread_mutex_lock(&ag.mu);
    size_t call = rp.next + 1;
    const as_replay_entry *e = NULL;
    if (rp.in_flight) {
        snprintf(msg, sizeof msg, "replay: model call %zu started while another stream is in flight", call);
    } else if (rp.next >= rp.sc.n) {
        snprintf(msg, sizeof msg, "replay: model call %zu is past the end of the script (%zu entries)",
                 call, rp.sc.n);
    } else {
        e = &rp.sc.e[rp.next++];
        rp.in_flight = 1;
        s->impl = s;    // marks "holds the in-flight slot"
    }
    if (!e) rp.failures++;
    pthread_mutex_unlock(&ag.mu);
    if (!e) {
        as_warn("%s", msg);
        stream_end(s, msg, "REPLAY");
        return s;
    }
    if (e->kind == AS_REPLAY_HANG) {
        static const char p0[] = "{\"type\":\"block-start\",\"index\":0,\"blockType\":\"text\"}";
        static const char p1[] = "{\"type\":\"text-delta\",\"index\":0,\"text\":\"partial\"}";
        stream_push(s, p0, sizeof p0 - 1);
        stream_push(s, p1, sizeof p1 - 1);
        if (e->ready_file) write_ready_file(r->cwd, e->ready_file);
        return s;     // never ends: the loop waits for a cancel
    }
    as_buf hay = {0}, x = {0};
    int templated = memmem(e->json, e->len, "{{fromRequest:", 14) != NULL;
    if (templated) {
        as_json j = {0};
        int n = 0;
        if (as_json_parse(&j, r->messages, strlen(r->messages)) == 0) leaves(&j, 0, &hay, &n);
        as_json_free(&j);
    }
    for (size_t k = 0; k < e->nchunks; k++) {
        const char *c = e->json + e->chunk[k].off;
        size_t n = e->chunk[k].len;
        if (templated && memmem(c, n, "{{fromRequest:", 14)) {
            char err[200];
            as_buf_reset(&x);
            if (expand(c, n, &hay, &x, err, sizeof err)) {
                snprintf(msg, sizeof msg, "replay: model call %zu: %s", call, err);
                as_warn("%s", msg);
                pthread_mutex_lock(&ag.mu);
                rp.failures++;
                pthread_mutex_unlock(&ag.mu);
                stream_end(s, msg, "REPLAY");
                as_buf_free(&hay);
                as_buf_free(&x);
                return s;
            }
            c = x.p; n = x.n;
        }
        stream_push(s, c, n);
    }
    as_buf_free(&hay);
    as_buf_free(&x);
    if (e->kind == AS_REPLAY_THROW) stream_end(s, e->message, e->code);
    else stream_end(s, NULL, NULL);
    return s;
}
