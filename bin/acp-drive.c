// acp-drive - run one scenario against an ACP agent through its profile.
//
// Creates the scenario's cwd, seeds it from workspace/, boots the agent as the
// profile says (acpsnap-profile(5)), drives input.json over ACP (DESIGN.md
// §5.2), answers permission requests, waits on durable boundaries by reading
// the persisted logs as they grow, then closes stdin, waits for the agent to
// exit and harvests every session log, primary first. Writes the raw capture
// (stdout.raw.jsonl, stderr.txt, session*.jsonl, run.json) into the output
// directory. Exit 0: the run completed; 1: the scenario failed (a step timed
// out, the agent crashed or exited non-zero, an expectation of input.json did
// not hold); 2: trouble (usage, profile, input.json, the fixture).
#include "acpsnap.h"
#include "replay.h"
#include "table.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

extern char **environ;

static const char USAGE[] =
    "usage: acp-drive -p PROFILE -o OUTDIR [--record] [--timeout MS] [--rpc-timeout MS]\n"
    "          [--exit-timeout MS] [--workspace-parent DIR] [--env K=V]... [--keep] SCENARIO_DIR\n"
    "Runs one scenario against an agent: a fresh cwd with workspace/ copied in,\n"
    "the agent booted through its profile (acpsnap-profile(5)), input.json driven\n"
    "over ACP, raw stdout captured, the session logs harvested, and run.json\n"
    "written for scrub --context, all into OUTDIR.\n"
    "  -p, --profile FILE        the agent profile\n"
    "  -o, --out DIR             the output directory (created when missing)\n"
    "  -r, --record              record mode: no fixture; the profile's record.env\n"
    "      --timeout MS          waiting steps (default: the profile's, else 10000)\n"
    "      --rpc-timeout MS      each ACP request (default 60000; 600000 recording)\n"
    "      --exit-timeout MS     the agent's exit after stdin closes (default 10000)\n"
    "      --workspace-parent DIR   overrides the table's workspaceParent\n"
    "  -e, --env K=V             adds to the agent's environment, last (repeatable)\n"
    "      --keep                keep the cwd and the sessions root\n"
    "  -h, --help, --version\n"
    "Exit status: 0 the run completed, 1 the scenario failed, 2 trouble.\n";

// ---------------------------------------------------------------- small utilities
static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    as_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    as_buf_grow(&b, (size_t)n + 1);
    vsnprintf(b.p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return b.p;
}

static int is_dir(const char *p) { struct stat st; return !stat(p, &st) && S_ISDIR(st.st_mode); }
static int exists(const char *p) { struct stat st; return !lstat(p, &st); }

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)ftw;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) && errno != ENOENT ? -1 : 0;
}

// Removes a directory tree we created (symlinks are removed, not followed).
static void rm_rf(const char *path)
{
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
        as_warn("unable to remove %s: %s", path, strerror(errno));
}

// Variables: acp-drive's own (exported to the agent) and the profile's env.
typedef struct { char **k, **v; size_t n, cap; } vars;
static void vars_set(vars *vs, const char *k, const char *v)
{
    for (size_t i = 0; i < vs->n; i++)
        if (!strcmp(vs->k[i], k)) { free(vs->v[i]); vs->v[i] = as_xstrdup(v); return; }
    if (vs->n == vs->cap) {
        vs->cap = vs->cap ? 2 * vs->cap : 32;
        vs->k = as_xrealloc(vs->k, vs->cap * sizeof *vs->k);
        vs->v = as_xrealloc(vs->v, vs->cap * sizeof *vs->v);
    }
    vs->k[vs->n] = as_xstrdup(k); vs->v[vs->n] = as_xstrdup(v); vs->n++;
}
static const char *vars_get(const vars *vs, const char *k)
{
    for (size_t i = 0; i < vs->n; i++) if (!strcmp(vs->k[i], k)) return vs->v[i];
    return NULL;
}
static void vars_free(vars *vs)
{
    for (size_t i = 0; i < vs->n; i++) { free(vs->k[i]); free(vs->v[i]); }
    free(vs->k); free(vs->v);
    memset(vs, 0, sizeof *vs);
}

// ---------------------------------------------------------------- the profile
typedef struct {
    char *path, *dir;
    char **argv; size_t argc;
    char **env; size_t nenv;        // "K=V" after expansion, in file order (mode-filtered)
    long *env_line;
    char **harvest; size_t nharvest;
    int serve;                      // provider = replay-serve
    long timeout, rpc_timeout, exit_timeout;   // -1: not set
} profile;

// Expands ${NAME} and ${NAME:-default} (default expanded in turn) from vs,
// then the environment. Dies on an unknown name without a default.
static void expand_into(as_buf *b, const char *s, size_t n, const vars *vs, const char *file, long line)
{
    for (size_t i = 0; i < n;) {
        if (s[i] != '$' || i + 1 >= n || s[i + 1] != '{') { as_buf_putc(b, s[i++]); continue; }
        size_t k = i + 2, depth = 1;
        while (k < n && depth) {
            if (s[k] == '{') depth++;
            else if (s[k] == '}' && --depth == 0) break;
            k++;
        }
        if (k >= n) as_die_at(file, line, 0, "unterminated ${ in value");
        const char *body = s + i + 2;
        size_t blen = k - i - 2;
        const char *dflt = memmem(body, blen, ":-", 2);
        size_t nlen = dflt ? (size_t)(dflt - body) : blen;
        char *name = strndup(body, nlen);
        const char *v = vars_get(vs, name);
        if (!v) v = getenv(name);
        if (v && (*v || !dflt)) as_buf_puts(b, v);
        else if (dflt) expand_into(b, dflt + 2, blen - nlen - 2, vs, file, line);
        else as_die_at(file, line, 0, "unknown variable ${%s}", name);
        free(name);
        i = k + 1;
    }
}

static char *expand(const char *s, const vars *vs, const char *file, long line)
{
    as_buf b = {0};
    as_buf_puts(&b, "");
    expand_into(&b, s, strlen(s), vs, file, line);
    return b.p;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

static long ms_value(const char *v, const char *file, long line, const char *key)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x <= 0) as_die_at(file, line, 0, "%s must be a positive number of milliseconds", key);
    return x;
}

static void profile_load(profile *pf, const char *path, int record, const vars *vs)
{
    memset(pf, 0, sizeof *pf);
    pf->timeout = pf->rpc_timeout = pf->exit_timeout = -1;
    pf->path = as_xstrdup(path);
    char *slash = strrchr(pf->path, '/');
    pf->dir = slash ? strndup(pf->path, (size_t)(slash - pf->path)) : as_xstrdup(".");
    char rp[PATH_MAX];
    if (realpath(pf->dir, rp)) { free(pf->dir); pf->dir = as_xstrdup(rp); }
    as_buf src = {0};
    as_read_file(path, &src);
    char *save = NULL;
    long line = 0;
    char *text = src.p ? src.p : (char *)"";
    for (char *l = text; l; ) {
        char *nl = strchr(l, '\n');
        if (nl) *nl = 0;
        line++;
        char *s = trim(l);
        l = nl ? nl + 1 : NULL;
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) as_die_at(path, line, 0, "expected key = value");
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        if (!strcmp(key, "command")) {
            char *x = expand(val, vs, path, line);
            for (size_t i = 0; i < pf->argc; i++) free(pf->argv[i]);
            free(pf->argv);
            pf->argv = NULL; pf->argc = 0;
            for (char *w = strtok_r(x, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                pf->argv = as_xrealloc(pf->argv, (pf->argc + 2) * sizeof *pf->argv);
                // Words naming paths relative to the profile are made absolute:
                // the agent runs in the scenario's generated cwd.
                pf->argv[pf->argc++] = (!strncmp(w, "./", 2) || !strncmp(w, "../", 3))
                    ? xasprintf("%s/%s", pf->dir, w) : as_xstrdup(w);
                pf->argv[pf->argc] = NULL;
            }
            free(x);
            if (!pf->argc) as_die_at(path, line, 0, "empty command");
        } else if (!strcmp(key, "env") || !strcmp(key, "replay.env") || !strcmp(key, "record.env")) {
            if (!strcmp(key, "replay.env") && record) continue;
            if (!strcmp(key, "record.env") && !record) continue;
            char *e2 = strchr(val, '=');
            if (!e2 || e2 == val) as_die_at(path, line, 0, "%s must be NAME=VALUE", key);
            pf->env = as_xrealloc(pf->env, (pf->nenv + 1) * sizeof *pf->env);
            pf->env_line = as_xrealloc(pf->env_line, (pf->nenv + 1) * sizeof *pf->env_line);
            pf->env_line[pf->nenv] = line;
            pf->env[pf->nenv++] = as_xstrdup(val);     // expanded at launch (vars may change)
        } else if (!strcmp(key, "harvest")) {
            for (size_t i = 0; i < pf->nharvest; i++) free(pf->harvest[i]);
            pf->nharvest = 0;
            char *x = as_xstrdup(val);
            for (char *w = strtok_r(x, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                pf->harvest = as_xrealloc(pf->harvest, (pf->nharvest + 1) * sizeof *pf->harvest);
                pf->harvest[pf->nharvest++] = as_xstrdup(w);
            }
            free(x);
        } else if (!strcmp(key, "provider")) {
            if (!strcmp(val, "replay-serve")) pf->serve = 1;
            else if (!strcmp(val, "agent")) pf->serve = 0;
            else as_die_at(path, line, 0, "provider must be agent or replay-serve");
        } else if (!strcmp(key, "timeout")) {
            pf->timeout = ms_value(val, path, line, key);
        } else if (!strcmp(key, "rpc-timeout")) {
            pf->rpc_timeout = ms_value(val, path, line, key);
        } else if (!strcmp(key, "exit-timeout")) {
            pf->exit_timeout = ms_value(val, path, line, key);
        } else {
            as_die_at(path, line, 0, "unknown key \"%.40s\"", key);
        }
    }
    as_buf_free(&src);
    if (!pf->argv) as_die_at(path, 0, 0, "no command");
    if (!pf->nharvest) {
        static const char *const def[] = { "*.jsonl", "*.jsonl.zst", "*.jsonl.zstd" };
        pf->harvest = as_xmalloc(3 * sizeof *pf->harvest);
        for (int i = 0; i < 3; i++) pf->harvest[i] = as_xstrdup(def[i]);
        pf->nharvest = 3;
    }
}

static void profile_free(profile *pf)
{
    for (size_t i = 0; i < pf->argc; i++) free(pf->argv[i]);
    for (size_t i = 0; i < pf->nenv; i++) free(pf->env[i]);
    for (size_t i = 0; i < pf->nharvest; i++) free(pf->harvest[i]);
    free(pf->argv); free(pf->env); free(pf->env_line); free(pf->harvest); free(pf->path); free(pf->dir);
}

// ---------------------------------------------------------------- logs
// Reads a session log that may still be growing: raw or zstd, keeping only
// complete lines (a torn tail or an unfinished frame is "not yet").
static void read_growing(const char *path, as_buf *out)
{
    as_buf_reset(out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    as_buf raw = {0};
    char tmp[65536];
    for (ssize_t k; (k = read(fd, tmp, sizeof tmp)) > 0;) as_buf_put(&raw, tmp, (size_t)k);
    close(fd);
    static const unsigned char MAGIC[4] = { 0x28, 0xb5, 0x2f, 0xfd };
    if (raw.n >= 4 && !memcmp(raw.p, MAGIC, 4)) {
        ZSTD_DStream *z = ZSTD_createDStream();
        ZSTD_initDStream(z);
        ZSTD_inBuffer in = { raw.p, raw.n, 0 };
        while (in.pos < in.size) {
            as_buf_grow(out, 131072);
            ZSTD_outBuffer o = { out->p + out->n, out->cap - out->n - 1, 0 };
            size_t r = ZSTD_decompressStream(z, &o, &in);
            out->n += o.pos;
            out->p[out->n] = 0;
            if (ZSTD_isError(r)) break;
            if (o.pos == 0 && in.pos < in.size && r != 0 && o.size > 0 && in.pos == in.size) break;
        }
        ZSTD_freeDStream(z);
    } else {
        as_buf_put(out, raw.p ? raw.p : "", raw.n);
    }
    as_buf_free(&raw);
    while (out->n && out->p[out->n - 1] != '\n') out->n--;
    if (out->p) out->p[out->n] = 0;
}

typedef struct {
    char *path, *rel;               // absolute, relative to the sessions root
    char *id;
    int64_t created;
    int child;                      // header has parentSession
} logfile;
typedef struct { logfile *v; size_t n; } loglist;

static void loglist_free(loglist *l)
{
    for (size_t i = 0; i < l->n; i++) { free(l->v[i].path); free(l->v[i].rel); free(l->v[i].id); }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void walk(const char *root, const char *rel, const profile *pf, loglist *l)
{
    char *dirp = rel[0] ? xasprintf("%s/%s", root, rel) : as_xstrdup(root);
    DIR *d = opendir(dirp);
    if (!d) { free(dirp); return; }
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *r = rel[0] ? xasprintf("%s/%s", rel, e->d_name) : as_xstrdup(e->d_name);
        char *full = xasprintf("%s/%s", root, r);
        struct stat st;
        if (!lstat(full, &st) && S_ISDIR(st.st_mode)) {
            walk(root, r, pf, l);
        } else if (!lstat(full, &st) && S_ISREG(st.st_mode)) {
            for (size_t i = 0; i < pf->nharvest; i++)
                if (!fnmatch(pf->harvest[i], r, 0)) {
                    l->v = as_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
                    l->v[l->n++] = (logfile){ .path = full, .rel = r };
                    full = r = NULL;
                    break;
                }
        }
        free(full); free(r);
    }
    closedir(d);
    free(dirp);
}

static int log_order(const void *a, const void *b)
{
    const logfile *x = a, *y = b;
    if (x->child != y->child) return x->child - y->child;
    if (x->created != y->created) return x->created < y->created ? -1 : 1;
    return strcmp(x->id ? x->id : "", y->id ? y->id : "");
}

// Lists the logs under root with a readable header, primary first, then
// children by createdAt (then id), as the reference harness orders them.
static void list_logs(const char *root, const profile *pf, loglist *l, as_buf *scratch)
{
    loglist all = {0};
    walk(root, "", pf, &all);
    as_json j = {0};
    for (size_t i = 0; i < all.n; i++) {
        logfile *f = &all.v[i];
        read_growing(f->path, scratch);
        char *nl = scratch->p ? memchr(scratch->p, '\n', scratch->n) : NULL;
        if (!nl || as_json_parse(&j, scratch->p, (size_t)(nl - scratch->p)) || j.t[0].type != AS_JOBJ) continue;
        int ty = as_json_get(&j, 0, "type");
        if (ty < 0 || !as_json_streq(&j, ty, "session")) continue;
        int id = as_json_get(&j, 0, "id"), ca = as_json_get(&j, 0, "createdAt");
        as_buf s = {0};
        if (id >= 0 && j.t[id].type == AS_JSTR) as_json_str(&j, id, &s);
        f->id = s.p ? s.p : as_xstrdup("");
        if (ca >= 0) as_json_int(&j, ca, &f->created);
        f->child = as_json_get(&j, 0, "parentSession") >= 0;
        l->v = as_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
        l->v[l->n++] = *f;
        memset(f, 0, sizeof *f);
    }
    as_json_free(&j);
    loglist_free(&all);
    if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, log_order);
}

// ---------------------------------------------------------------- the run
typedef struct {
    const char *scen_dir, *name;
    char *input_path;
    as_input in;
    profile pf;
    vars vs;
    int record, keep;
    long timeout, rpc_timeout, exit_timeout;
    char *cwd, *sessions_root, *spill_root, *tmp_root, *outdir;
    char cwd_real[PATH_MAX];
    // the agent
    pid_t pid;
    int pidfd;                      // readable when the agent exits (-1: not available)
    int fin, fout, ferr;
    int out_eof, err_eof, exited, status;
    as_buf line;                    // partial stdout line
    as_buf errbuf;                  // stderr collected
    FILE *raw;                      // stdout.raw.jsonl
    long frames;
    // the protocol
    long next_id;
    char **resp; size_t nresp;      // response line per client request id (NULL until answered)
    char *session_id;
    size_t answer_next;
    char *script_error;
    // promptAndWaitForAgentMessage
    const char *want_text; int want_seen;
    // replay-serve
    pid_t serve_pid;
    char *serve_log;
    // failure
    char *fail;
    long fail_line; int fail_step; const char *fail_op;
    as_buf scratch;
} run;

static run R;
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    if (R.fail) return;
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    R.fail = as_xmalloc((size_t)n + 1);
    vsnprintf(R.fail, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
}

static void send_line(const as_buf *b)
{
    if (R.fin < 0) return;
    as_buf l = {0};
    as_buf_put(&l, b->p, b->n);
    as_buf_putc(&l, '\n');
    size_t off = 0;
    while (off < l.n) {
        ssize_t k = write(R.fin, l.p + off, l.n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EPIPE) {     // it is gone: the waits report it, with its status
            close(R.fin); R.fin = -1;
            break;
        }
        if (k <= 0) { fail("unable to write to the agent's stdin: %s", strerror(errno)); break; }
        off += (size_t)k;
    }
    as_buf_free(&l);
}

// Sends a request; returns its id.
static long request(const char *method, const as_buf *params)
{
    long id = R.next_id++;
    R.resp = as_xrealloc(R.resp, (size_t)R.next_id * sizeof *R.resp);
    R.resp[id] = NULL;
    R.nresp = (size_t)R.next_id;
    as_buf b = {0};
    as_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":", id);
    as_jstr_write(&b, method, strlen(method));
    as_buf_puts(&b, ",\"params\":");
    as_buf_put(&b, params->p, params->n);
    as_buf_putc(&b, '}');
    send_line(&b);
    as_buf_free(&b);
    return id;
}

static void notify_cancel(void)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":");
    as_jstr_write(&b, R.session_id, strlen(R.session_id));
    as_buf_puts(&b, "}}");
    send_line(&b);
    as_buf_free(&b);
}

// Answers an agent request: permission by the scripted kind, else "method not found".
static void answer_agent(const as_json *j, int id, int method)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    as_buf_put(&b, as_tok_p(j, id), as_tok_len(j, id));
    if (as_json_streq(j, method, "session/request_permission")) {
        int params = as_json_get(j, 0, "params");
        int opts = params >= 0 && j->t[params].type == AS_JOBJ ? as_json_get(j, params, "options") : -1;
        const char *kind = R.answer_next < R.in.nanswers ? R.in.answers[R.answer_next++] : NULL;
        int chosen = -1;
        as_buf offered = {0};
        if (kind && opts >= 0 && j->t[opts].type == AS_JARR) {
            for (int o = as_json_first(j, opts); o >= 0; o = as_json_nextel(j, o)) {
                if (j->t[o].type != AS_JOBJ) continue;
                int k = as_json_get(j, o, "kind"), oid = as_json_get(j, o, "optionId");
                if (k < 0 || j->t[k].type != AS_JSTR) continue;
                if (offered.n) as_buf_puts(&offered, ", ");
                as_json_str(j, k, &offered);
                if (chosen < 0 && oid >= 0 && as_json_streq(j, k, kind)) chosen = oid;
            }
        }
        if (chosen >= 0) {
            as_buf_puts(&b, ",\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":");
            as_buf_put(&b, as_tok_p(j, chosen), as_tok_len(j, chosen));
            as_buf_puts(&b, "}}}");
        } else {
            // The agent sees a well-defined cancel; a scripted kind it did not
            // offer fails the run once the step settles.
            if (kind && !R.script_error)
                R.script_error = xasprintf("scripted permission answer %s not among the offered options [%s]",
                                           kind, offered.p ? offered.p : "");
            as_buf_puts(&b, ",\"result\":{\"outcome\":{\"outcome\":\"cancelled\"}}}");
        }
        as_buf_free(&offered);
    } else {
        as_buf_puts(&b, ",\"error\":{\"code\":-32601,\"message\":\"method not found\"}}");
    }
    send_line(&b);
    as_buf_free(&b);
}

static void on_frame(const char *p, size_t n)
{
    static as_json j;
    R.frames++;
    if (as_json_parse(&j, p, n) || j.t[0].type != AS_JOBJ) return;   // purity is scrub's job
    int id = as_json_get(&j, 0, "id"), method = as_json_get(&j, 0, "method");
    if (method >= 0 && j.t[method].type == AS_JSTR) {
        if (id >= 0) { answer_agent(&j, id, method); return; }
        if (R.want_text && as_json_streq(&j, method, "session/update")) {
            int params = as_json_get(&j, 0, "params");
            int up = params >= 0 && j.t[params].type == AS_JOBJ ? as_json_get(&j, params, "update") : -1;
            int su = up >= 0 && j.t[up].type == AS_JOBJ ? as_json_get(&j, up, "sessionUpdate") : -1;
            int ct = up >= 0 && j.t[up].type == AS_JOBJ ? as_json_get(&j, up, "content") : -1;
            if (su >= 0 && as_json_streq(&j, su, "agent_message_chunk") && ct >= 0 && j.t[ct].type == AS_JOBJ) {
                int ty = as_json_get(&j, ct, "type"), tx = as_json_get(&j, ct, "text");
                if (ty >= 0 && as_json_streq(&j, ty, "text") && tx >= 0 && as_json_streq(&j, tx, R.want_text))
                    R.want_seen = 1;
            }
        }
        return;
    }
    int64_t rid;
    if (id >= 0 && as_json_int(&j, id, &rid) && rid >= 0 && (size_t)rid < R.nresp && !R.resp[rid])
        R.resp[rid] = strndup(p, n);
}

// Reads what the agent has written, waiting at most wait_ms.
static void pump(int wait_ms)
{
    if (interrupted && !R.fail) fail("interrupted by signal %d", (int)interrupted);
    struct pollfd p[2];
    int n = 0, io = -1, ie = -1;
    if (!R.out_eof) { io = n; p[n++] = (struct pollfd){ .fd = R.fout, .events = POLLIN }; }
    if (!R.err_eof) { ie = n; p[n++] = (struct pollfd){ .fd = R.ferr, .events = POLLIN }; }
    if (!n) {       // both pipes closed: only the exit is left to see (bounded by the caller)
        if (!R.exited && waitpid(R.pid, &R.status, WNOHANG) == R.pid) { R.exited = 1; return; }
        if (R.pidfd >= 0 && !R.exited) {
            struct pollfd pf = { .fd = R.pidfd, .events = POLLIN };
            poll(&pf, 1, wait_ms);
        } else {
            poll(NULL, 0, wait_ms);
        }
        goto reap;
    }
    if (poll(p, (nfds_t)n, wait_ms) <= 0) goto reap;
    char buf[65536];
    if (io >= 0 && p[io].revents) {
        ssize_t k = read(R.fout, buf, sizeof buf);
        if (k <= 0) { R.out_eof = 1; }
        else {
            if (fwrite(buf, 1, (size_t)k, R.raw) != (size_t)k) as_die_sys("write stdout.raw.jsonl");
            as_buf_put(&R.line, buf, (size_t)k);
            size_t start = 0;
            for (size_t i = 0; i < R.line.n; i++)
                if (R.line.p[i] == '\n') { on_frame(R.line.p + start, i - start); start = i + 1; }
            memmove(R.line.p, R.line.p + start, R.line.n - start);
            R.line.n -= start;
        }
    }
    if (ie >= 0 && p[ie].revents) {
        ssize_t k = read(R.ferr, buf, sizeof buf);
        if (k <= 0) R.err_eof = 1;
        else as_buf_put(&R.errbuf, buf, (size_t)k);
    }
reap:
    if (!R.exited && waitpid(R.pid, &R.status, WNOHANG) == R.pid) R.exited = 1;
}

static int agent_gone(void) { return R.out_eof || R.exited; }

// Waits for the response to request id; returns the line or NULL (failed).
static const char *await_response(long id, const char *method, long timeout)
{
    long deadline = now_ms() + timeout;
    while (!R.resp[id]) {
        if (agent_gone()) { fail("the agent exited before answering %s", method); return NULL; }
        if (R.fail) return NULL;
        if (now_ms() >= deadline) { fail("no response to %s within %ld ms", method, timeout); return NULL; }
        pump(10);
    }
    return R.resp[id];
}

// 1 when the response is an error; its message into msg.
static int response_error(const char *line, as_buf *msg)
{
    as_json j = {0};
    int err = 0;
    if (!as_json_parse(&j, line, strlen(line)) && j.t[0].type == AS_JOBJ) {
        int e = as_json_get(&j, 0, "error");
        if (e >= 0) {
            err = 1;
            int m = j.t[e].type == AS_JOBJ ? as_json_get(&j, e, "message") : -1;
            if (msg && m >= 0 && j.t[m].type == AS_JSTR) as_json_str(&j, m, msg);
        }
    }
    as_json_free(&j);
    return err;
}

// ---------------------------------------------------------------- durable-boundary waits
typedef struct { as_json j; } scan;

// Type of a line (an object with a string "type"), decoded into t; 0 if none.
static int line_type(as_json *j, const char *p, size_t n, as_buf *t)
{
    as_buf_reset(t);
    if (as_json_parse(j, p, n) || j->t[0].type != AS_JOBJ) return 0;
    int ty = as_json_get(j, 0, "type");
    if (ty < 0 || j->t[ty].type != AS_JSTR) return 0;
    as_json_str(j, ty, t);
    return 1;
}

enum { W_TURNSTART, W_TURNEND, W_CHILD, W_GOAL, W_INBOX, W_TITLE, W_EVENT };

// Checks the condition on the log text. Returns 1 met, 0 not yet, -1 invalid record.
static int check_log(const char *text, size_t len, int what, int64_t minturn, const char *arg)
{
    as_json j = {0};
    as_buf t = {0}, s = {0};
    long last_start = -1, last_end = -1, last_title = -1, last_ev = -1, last_desc = -1, last_hdr = -1, idx = 0;
    int64_t start_turn = -1;
    int start_valid = 1, goal = 0, inbox = 0, closed_min = 0;
    const char *p = text, *end = text + len;
    int first = 1;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        if (first) { first = 0; p = nl + 1; continue; }   // the header
        if (line_type(&j, p, (size_t)(nl - p), &t)) {
            int data = as_json_get(&j, 0, "data");
            if (data >= 0 && j.t[data].type != AS_JOBJ) data = -1;
            if (!strcmp(t.p, "turn/start")) {
                last_start = idx;
                int tu = data >= 0 ? as_json_get(&j, data, "turn") : -1;
                start_valid = tu >= 0 && as_json_int(&j, tu, &start_turn) && start_turn >= 1;
            } else if (!strcmp(t.p, "turn/end")) {
                last_end = idx;
                int tu = data >= 0 ? as_json_get(&j, data, "turn") : -1;
                int64_t v;
                if (tu >= 0 && as_json_int(&j, tu, &v) && v == minturn) closed_min = 1;
            } else if (!strcmp(t.p, "session/title")) {
                last_title = idx;
            } else if (!strcmp(t.p, "subagent/descriptor")) {
                last_desc = idx;
            } else if (!strcmp(t.p, "request/header")) {
                last_hdr = idx;
            } else if (!strcmp(t.p, "goal/change") && what == W_GOAL) {
                int g = data >= 0 ? as_json_get(&j, data, "goal") : -1;
                int ph = g >= 0 && j.t[g].type == AS_JOBJ ? as_json_get(&j, g, "phase") : -1;
                if (ph >= 0 && as_json_streq(&j, ph, arg)) goal = 1;
            } else if (!strcmp(t.p, "agent/inbox/spliced") && what == W_INBOX) {
                int ins = data >= 0 ? as_json_get(&j, data, "inserted") : -1;
                if (ins >= 0 && j.t[ins].type == AS_JARR)
                    for (int m = as_json_first(&j, ins); m >= 0 && !inbox; m = as_json_nextel(&j, m)) {
                        int c = j.t[m].type == AS_JOBJ ? as_json_get(&j, m, "content") : -1;
                        if (c < 0 || j.t[c].type != AS_JARR) continue;
                        for (int b = as_json_first(&j, c); b >= 0; b = as_json_nextel(&j, b)) {
                            int bt = j.t[b].type == AS_JOBJ ? as_json_get(&j, b, "type") : -1;
                            int tx = j.t[b].type == AS_JOBJ ? as_json_get(&j, b, "text") : -1;
                            if (bt < 0 || !as_json_streq(&j, bt, "text") || tx < 0 || j.t[tx].type != AS_JSTR) continue;
                            as_buf_reset(&s);
                            as_json_str(&j, tx, &s);
                            if (s.p && strstr(s.p, arg)) { inbox = 1; break; }
                        }
                    }
            }
            if (what == W_EVENT && !strcmp(t.p, arg)) last_ev = idx;
        }
        idx++;
        p = nl + 1;
    }
    as_json_free(&j);
    as_buf_free(&t);
    as_buf_free(&s);
    int closed = last_end >= 0 && last_end > last_start;
    switch (what) {
    case W_TURNSTART:
        if (last_start < 0 || last_start < last_end) return 0;
        if (!start_valid) return -1;
        return start_turn >= minturn;
    case W_TURNEND: return closed;
    case W_CHILD: return closed && last_desc >= 0 && last_hdr > last_desc && closed_min;
    case W_GOAL: return goal;
    case W_INBOX: return inbox;
    case W_TITLE: return last_end >= 0 && last_title > last_end;
    case W_EVENT: return last_end >= 0 && last_ev > last_end;
    }
    return 0;
}

// Polls the persisted logs until the condition holds (or the timeout).
static void wait_log(int what, int64_t minturn, const char *arg, long child, long timeout, const char *what_msg)
{
    long deadline = now_ms() + timeout;
    as_buf text = {0};
    for (;;) {
        loglist l = {0};
        list_logs(R.sessions_root, &R.pf, &l, &R.scratch);
        const logfile *f = NULL;
        if (what == W_CHILD) f = (size_t)child < l.n ? &l.v[child] : NULL;
        else for (size_t i = 0; i < l.n && !f; i++) if (R.session_id && !strcmp(l.v[i].id, R.session_id)) f = &l.v[i];
        int rc = 0;
        if (f) {
            read_growing(f->path, &text);
            rc = check_log(text.p ? text.p : "", text.n, what, minturn, arg);
        }
        loglist_free(&l);
        if (rc < 0) { fail("invalid persisted turn/start record"); break; }
        if (rc > 0) break;
        if (now_ms() >= deadline) { fail("%s within %ld ms", what_msg, timeout); break; }
        if (agent_gone()) { fail("the agent exited while waiting: %s", what_msg); break; }
        pump(10);
        if (R.fail) break;
    }
    as_buf_free(&text);
}

static void wait_file(const char *rel, long timeout)
{
    char *p = xasprintf("%s/%s", R.cwd, rel);
    long deadline = now_ms() + timeout;
    while (!exists(p)) {
        if (now_ms() >= deadline) { fail("workspace file \"%s\" did not appear within %ld ms", rel, timeout); break; }
        if (agent_gone()) { fail("the agent exited while waiting for workspace file \"%s\"", rel); break; }
        pump(10);
        if (R.fail) break;
    }
    free(p);
}

// ---------------------------------------------------------------- steps
static long step_timeout(const as_json *j, int obj)
{
    int t = obj >= 0 ? as_json_get(j, obj, "timeoutMs") : -1;
    int64_t v;
    return t >= 0 && as_json_int(j, t, &v) && v > 0 ? (long)v : R.timeout;
}

static int64_t step_int(const as_json *j, int obj, const char *key, int64_t def)
{
    int t = as_json_get(j, obj, key);
    int64_t v;
    return t >= 0 && as_json_int(j, t, &v) ? v : def;
}

static char *step_str(const as_json *j, int obj, const char *key)
{
    int t = as_json_get(j, obj, key);
    as_buf b = {0};
    as_buf_puts(&b, "");
    if (t >= 0 && j->t[t].type == AS_JSTR) as_json_str(j, t, &b);
    return b.p;
}

// session/prompt params with a text block, or the step's content array verbatim.
static void prompt_params(const as_json *j, int st, int content, as_buf *b)
{
    as_buf_puts(b, "{\"sessionId\":");
    as_jstr_write(b, R.session_id, strlen(R.session_id));
    as_buf_puts(b, ",\"prompt\":");
    if (content) {
        int c = as_json_get(j, st, "content");
        as_buf_put(b, as_tok_p(j, c), as_tok_len(j, c));
    } else {
        as_buf_puts(b, "[{\"type\":\"text\",\"text\":");
        int t = as_json_get(j, st, "text");
        as_buf_put(b, as_tok_p(j, t), as_tok_len(j, t));
        as_buf_puts(b, "}]");
    }
    as_buf_putc(b, '}');
}

static int need_session(const char *op)
{
    if (R.session_id) return 1;
    fail("%s before newSession", op);
    return 0;
}

static void run_step(const as_step *sp)
{
    const as_json *j = &R.in.j;
    int st = sp->tok;
    const char *op = as_op_name(sp->op);
    as_buf params = {0}, msg = {0};
    long id;
    const char *resp;
    switch (sp->op) {
    case AS_OP_INITIALIZE:
        as_buf_puts(&params, "{\"protocolVersion\":1,\"clientCapabilities\":{}}");
        id = request("initialize", &params);
        if ((resp = await_response(id, "initialize", R.rpc_timeout)) && response_error(resp, &msg))
            fail("initialize failed: %s", msg.p ? msg.p : "");
        break;
    case AS_OP_NEWSESSION:
    case AS_OP_NEWSESSIONEXPECTERROR: {
        as_buf_puts(&params, "{\"cwd\":");
        as_jstr_write(&params, R.cwd, strlen(R.cwd));
        as_buf_puts(&params, ",\"mcpServers\":[]");
        int ad = as_json_get(j, st, "additionalDirectories");
        if (ad >= 0) { as_buf_puts(&params, ",\"additionalDirectories\":"); as_buf_put(&params, as_tok_p(j, ad), as_tok_len(j, ad)); }
        as_buf_putc(&params, '}');
        id = request("session/new", &params);
        if (!(resp = await_response(id, "session/new", R.rpc_timeout))) break;
        int err = response_error(resp, &msg);
        if (sp->op == AS_OP_NEWSESSIONEXPECTERROR) {
            if (!err) fail("expected session/new to be rejected but it succeeded");
            break;
        }
        if (err) { fail("session/new failed: %s", msg.p ? msg.p : ""); break; }
        as_json rj = {0};
        as_json_parse(&rj, resp, strlen(resp));
        int r = as_json_get(&rj, 0, "result");
        int sid = r >= 0 && rj.t[r].type == AS_JOBJ ? as_json_get(&rj, r, "sessionId") : -1;
        if (sid < 0 || rj.t[sid].type != AS_JSTR) fail("session/new answered without a string sessionId");
        else {
            as_buf s = {0};
            as_json_str(&rj, sid, &s);
            free(R.session_id);
            R.session_id = s.p ? s.p : as_xstrdup("");
        }
        as_json_free(&rj);
        break;
    }
    case AS_OP_PROMPT:
    case AS_OP_PROMPTCONTENT:
    case AS_OP_PROMPTEXPECTERROR:
    case AS_OP_PROMPTANDWAITFORAGENTMESSAGE: {
        if (!need_session(op)) break;
        char *want = NULL;
        if (sp->op == AS_OP_PROMPTANDWAITFORAGENTMESSAGE) {
            want = step_str(j, st, "waitForText");
            R.want_text = want; R.want_seen = 0;
        }
        prompt_params(j, st, sp->op == AS_OP_PROMPTCONTENT, &params);
        id = request("session/prompt", &params);
        if ((resp = await_response(id, "session/prompt", R.rpc_timeout))) {
            int err = response_error(resp, &msg);
            if (sp->op == AS_OP_PROMPTEXPECTERROR) {
                if (!err) fail("expected the prompt to fail but it succeeded");
            } else if (err) {
                fail("session/prompt failed: %s", msg.p ? msg.p : "");
            }
        }
        if (want && !R.fail) {
            long deadline = now_ms() + R.timeout;
            while (!R.want_seen) {
                if (now_ms() >= deadline) { fail("agent message \"%.60s\" did not arrive within %ld ms", want, R.timeout); break; }
                if (agent_gone()) { fail("the agent exited before the agent message \"%.60s\"", want); break; }
                pump(10);
                if (R.fail) break;
            }
        }
        R.want_text = NULL;
        free(want);
        break;
    }
    case AS_OP_PROMPTANDCANCEL: {
        if (!need_session(op)) break;
        prompt_params(j, st, 0, &params);
        id = request("session/prompt", &params);
        int wf = as_json_get(j, st, "waitForFile");
        if (wf >= 0) {
            char *p = step_str(j, wf, "path");
            wait_file(p, step_timeout(j, wf));
            free(p);
        } else {
            wait_log(W_TURNSTART, 1, NULL, 0, R.timeout,
                     "the session did not persist turn/start");
        }
        if (R.fail) break;
        notify_cancel();
        if ((resp = await_response(id, "session/prompt", R.rpc_timeout)) && response_error(resp, &msg))
            fail("session/prompt failed after cancel: %s", msg.p ? msg.p : "");
        break;
    }
    case AS_OP_CANCEL: {
        if (!need_session(op)) break;
        int wf = as_json_get(j, st, "waitForFile");
        if (wf >= 0) {
            char *p = step_str(j, wf, "path");
            wait_file(p, step_timeout(j, wf));
            free(p);
        }
        if (!R.fail) notify_cancel();
        break;
    }
    case AS_OP_WAITFORFILE: {
        char *p = step_str(j, st, "path");
        wait_file(p, step_timeout(j, st));
        free(p);
        break;
    }
    case AS_OP_WAITFORTURNSTART: {
        if (!need_session(op)) break;
        int64_t min = step_int(j, st, "minimumTurn", 1);
        char *m = as_json_get(j, st, "minimumTurn") >= 0
            ? xasprintf("the session did not persist turn/start at or beyond turn %lld", (long long)min)
            : as_xstrdup("the session did not persist turn/start");
        wait_log(W_TURNSTART, min, NULL, 0, step_timeout(j, st), m);
        free(m);
        break;
    }
    case AS_OP_WAITFORTURNEND:
        if (!need_session(op)) break;
        wait_log(W_TURNEND, 0, NULL, 0, step_timeout(j, st), "the session did not persist turn/end");
        break;
    case AS_OP_WAITFORSUBAGENTTURNEND: {
        int64_t child = step_int(j, st, "child", 1), min = step_int(j, st, "minimumTurn", 1);
        char *m = xasprintf("subagent child #%lld did not persist closed turn %lld", (long long)child, (long long)min);
        wait_log(W_CHILD, min, NULL, (long)child, step_timeout(j, st), m);
        free(m);
        break;
    }
    case AS_OP_WAITFORGOALPHASE: {
        if (!need_session(op)) break;
        char *ph = step_str(j, st, "phase");
        char *m = xasprintf("the session did not persist goal phase \"%s\"", ph);
        wait_log(W_GOAL, 0, ph, 0, step_timeout(j, st), m);
        free(m); free(ph);
        break;
    }
    case AS_OP_WAITFORINBOXMESSAGE: {
        if (!need_session(op)) break;
        char *tx = step_str(j, st, "text");
        wait_log(W_INBOX, 0, tx, 0, step_timeout(j, st), "the session did not persist the expected inbox message");
        free(tx);
        break;
    }
    case AS_OP_WAITFORTITLEAFTERTURNEND:
        if (!need_session(op)) break;
        wait_log(W_TITLE, 0, NULL, 0, step_timeout(j, st), "the session did not persist session/title after turn/end");
        break;
    case AS_OP_WAITFOREVENTAFTERTURNEND: {
        if (!need_session(op)) break;
        char *ty = step_str(j, st, "type");
        char *m = xasprintf("the session did not persist %s after turn/end", ty);
        wait_log(W_EVENT, 0, ty, 0, step_timeout(j, st), m);
        free(m); free(ty);
        break;
    }
    default:
        fail("unknown input op");
    }
    as_buf_free(&params);
    as_buf_free(&msg);
    if (!R.fail && R.script_error) fail("%s", R.script_error);
}

// ---------------------------------------------------------------- setup and teardown
static char *spawn_cmd(char *const argv[], const char *cwd, int *fin, int *fout, int *ferr, char **envp, pid_t *pid)
{
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) as_die_sys("create pipes");
    int ex[2];
    if (pipe2(ex, O_CLOEXEC)) as_die_sys("create a pipe");
    *pid = fork();
    if (*pid < 0) as_die_sys("fork");
    if (*pid == 0) {
        dup2(in[0], 0); dup2(out[1], 1); dup2(err[1], 2);
        signal(SIGPIPE, SIG_DFL);
        if (cwd && chdir(cwd)) { int e = errno; if (write(ex[1], &e, sizeof e)) {} _exit(127); }
        execvpe(argv[0], argv, envp);
        int e = errno;
        if (write(ex[1], &e, sizeof e)) {}
        _exit(127);
    }
    close(in[0]); close(out[1]); close(err[1]); close(ex[1]);
    int e = 0;
    ssize_t k = read(ex[0], &e, sizeof e);
    close(ex[0]);
    *fin = in[1]; *fout = out[0]; *ferr = err[0];
    if (k == (ssize_t)sizeof e) {
        waitpid(*pid, NULL, 0);
        close(*fin); close(*fout); close(*ferr);
        return xasprintf("unable to run %s: %s", argv[0], strerror(e));
    }
    return NULL;
}

// Fixed-length, scenario-keyed spill root (FNV-1a of the name, 9 hex digits).
static char *spill_root_for(const char *name)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) { h ^= *p; h *= 1099511628211ULL; }
    // dsh's spelling, which scrub turns into {{spillLocator:<name>}}
    return xasprintf("/tmp/dsh-acp-snap-%09llx", (unsigned long long)(h & 0xfffffffffULL));
}

static char *workspace_parent(const char *wp)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    if (!wp) return as_xstrdup(tmp);
    if (!strncmp(wp, "$HOME", 5)) { const char *h = getenv("HOME"); return xasprintf("%s%s", h ? h : "", wp + 5); }
    if (!strncmp(wp, "$TMPDIR", 7)) return xasprintf("%s%s", tmp, wp + 7);
    return as_xstrdup(wp);
}

static int copy_tree(const char *from, const char *to)
{
    char *src = xasprintf("%s/.", from);
    pid_t pid = fork();
    if (pid == 0) { execlp("cp", "cp", "-a", "--", src, to, (char *)NULL); _exit(127); }
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    free(src);
    return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// The run's outputs are scratch files for the pipeline: plain writes, no
// fsync (the pipelines stage what they commit).
static void write_plain(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) as_die_sys("open %s", path);
    if (fwrite(p, 1, n, f) != n || fclose(f)) as_die_sys("write %s", path);
}

static void write_json_str(as_buf *o, const char *s)
{
    as_jstr_write(o, s, strlen(s));
}

// Copies harvested logs (plain text) into the output dir; writes run.json.
static void harvest(void)
{
    loglist l = {0};
    list_logs(R.sessions_root, &R.pf, &l, &R.scratch);
    as_buf text = {0};
    char **files = as_xmalloc((l.n + 1) * sizeof *files);
    for (size_t i = 0; i < l.n; i++) {
        files[i] = i ? xasprintf("session.%zu.jsonl", i) : as_xstrdup("session.jsonl");
        char *dst = xasprintf("%s/%s", R.outdir, files[i]);
        read_growing(l.v[i].path, &text);
        write_plain(dst, text.p ? text.p : "", text.n);
        free(dst);
    }
    char *rp = xasprintf("%s/run.json", R.outdir);
    as_buf ob = {0}, *o = &ob;
    as_buf_puts(o, "{\"scenario\":");
    write_json_str(o, R.name);
    as_buf_puts(o, ",\"mode\":");
    write_json_str(o, R.record ? "record" : "replay");
    as_buf_puts(o, ",\"cwd\":");
    write_json_str(o, R.cwd);
    as_buf_puts(o, ",\"cwdAliases\":[");
    write_json_str(o, R.cwd_real);
    as_buf_puts(o, "]");
    if (R.session_id) { as_buf_puts(o, ",\"sessionId\":"); write_json_str(o, R.session_id); }
    as_buf_puts(o, ",\"sessionLogs\":[");
    for (size_t i = 0; i < l.n; i++) {
        as_buf_puts(o, i ? ",{\"id\":" : "{\"id\":");
        write_json_str(o, l.v[i].id);
        as_buf_puts(o, ",\"persistedPath\":");
        write_json_str(o, l.v[i].rel);
        as_buf_puts(o, ",\"file\":");
        write_json_str(o, files[i]);
        as_buf_puts(o, "}");
    }
    as_buf_puts(o, "],\"normalizeContext\":{\"sessionIds\":[");
    int first = 1;
    if (R.session_id) { write_json_str(o, R.session_id); first = 0; }
    for (size_t i = 0; i < l.n; i++) { if (!first) as_buf_puts(o, ","); first = 0; write_json_str(o, l.v[i].id); }
    as_buf_puts(o, "],\"cwd\":");
    write_json_str(o, R.cwd);
    as_buf_puts(o, ",\"cwdAliases\":[");
    write_json_str(o, R.cwd_real);
    char tail[128];
    snprintf(tail, sizeof tail, "]},\"exitCode\":%d,\"frames\":%ld}\n",
             R.exited && WIFEXITED(R.status) ? WEXITSTATUS(R.status) : -1, R.frames);
    as_buf_puts(o, tail);
    write_plain(rp, ob.p, ob.n);
    as_buf_free(&ob);
    free(rp);
    for (size_t i = 0; i < l.n; i++) free(files[i]);
    free(files);
    as_buf_free(&text);
    loglist_free(&l);
}

static void stop_agent(void)
{
    if (R.fin >= 0) { close(R.fin); R.fin = -1; }
    long deadline = now_ms() + R.exit_timeout;
    while (!(R.exited && R.out_eof && R.err_eof)) {
        if (now_ms() >= deadline) {
            if (!R.exited) {
                kill(R.pid, SIGKILL);
                waitpid(R.pid, &R.status, 0);
                R.exited = 1;
                fail("the agent did not exit within %ld ms of stdin closing (killed)", R.exit_timeout);
            }
            break;     // a descendant may hold the pipes: stop reading
        }
        pump(10);
    }
}

static char *describe_status(int st)
{
    if (WIFEXITED(st)) return xasprintf("exit status %d", WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return xasprintf("killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    return as_xstrdup("unknown status");
}

static char *self_dir(void)
{
    char p[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", p, sizeof p - 1);
    if (n <= 0) return NULL;
    p[n] = 0;
    char *s = strrchr(p, '/');
    if (s) *s = 0;
    return as_xstrdup(p);
}

static void start_serve(const char *script)
{
    char *dir = self_dir();
    char *bin = dir ? xasprintf("%s/replay-serve", dir) : NULL;
    if (!bin || access(bin, X_OK)) { free(bin); bin = as_xstrdup("replay-serve"); }
    char *pf = xasprintf("%s/replay-serve.port", R.tmp_root);
    R.serve_log = xasprintf("%s/replay-serve.log", R.outdir);
    char *argv[] = { bin, "--port-file", pf, "--ready-dir", R.cwd, "--log", R.serve_log, (char *)script, NULL };
    pid_t pid = fork();
    if (pid < 0) as_die_sys("fork");
    if (pid == 0) {
        char *errp = xasprintf("%s/replay-serve.stderr", R.outdir);
        int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) dup2(nul, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    R.serve_pid = pid;
    long deadline = now_ms() + 5000;
    as_buf port = {0};
    for (;;) {
        struct stat st;
        if (!stat(pf, &st) && st.st_size > 0) { as_read_file(pf, &port); break; }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) as_die(AS_TROUBLE, "replay-serve did not start (see %s/replay-serve.stderr)", R.outdir);
        if (now_ms() >= deadline) as_die(AS_TROUBLE, "replay-serve did not start within 5000 ms");
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    while (port.n && (port.p[port.n - 1] == '\n')) port.p[--port.n] = 0;
    char *url = xasprintf("http://127.0.0.1:%s", port.p);
    vars_set(&R.vs, "ACPSNAP_PROVIDER_URL", url);
    free(url); free(pf); free(bin); free(dir);
    as_buf_free(&port);
}

static int stop_serve(as_buf *err)
{
    if (R.serve_pid <= 0) return 0;
    kill(R.serve_pid, SIGTERM);
    int st = 0;
    waitpid(R.serve_pid, &st, 0);
    R.serve_pid = 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char *errp = xasprintf("%s/replay-serve.stderr", R.outdir);
    as_read_file(errp, err);
    free(errp);
    return 1;
}

// ---------------------------------------------------------------- main
// Runs at every exit, exit 2 from a dying helper included: no stray agent,
// server or temporary directory survives acp-drive.
static void at_exit(void)
{
    if (R.pid > 0 && !R.exited) { kill(R.pid, SIGKILL); waitpid(R.pid, NULL, 0); }
    if (R.serve_pid > 0) { kill(R.serve_pid, SIGKILL); waitpid(R.serve_pid, NULL, 0); }
    if (R.keep) return;
    if (R.cwd) rm_rf(R.cwd);
    if (R.tmp_root) rm_rf(R.tmp_root);
    if (R.spill_root) rm_rf(R.spill_root);
}

static long num_opt(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v <= 0) as_die(AS_TROUBLE, "invalid %s: %s", opt, s);
    return v;
}

static void report_die(void *ctx, const char *file, long line, const char *msg)
{
    (void)ctx;
    as_warn_at(file, line, 0, "%s", msg);
}

// The scenario: its directory, input.json, its table row (when there is a
// table). Messages name input.json as the user spelled the scenario's path.
static const as_scenario *load_scenario(const char *arg0, char *scen, as_table *table)
{
    if (!realpath(arg0, scen) || !is_dir(scen)) as_die(AS_TROUBLE, "%s: not a scenario directory", arg0);
    R.scen_dir = scen;
    R.name = strrchr(scen, '/') ? strrchr(scen, '/') + 1 : scen;
    char *arg = as_xstrdup(arg0);
    for (size_t n = strlen(arg); n > 1 && arg[n - 1] == '/'; n--) arg[n - 1] = 0;
    R.input_path = xasprintf("%s/input.json", arg);
    free(arg);
    if (access(R.input_path, R_OK)) as_die(AS_TROUBLE, "%s: unable to read: %s", R.input_path, strerror(errno));
    if (as_input_load(R.input_path, &R.in, report_die, NULL)) exit(AS_TROUBLE);
    char *table_path = xasprintf("%s/../scenarios.jsonl", scen);
    const as_scenario *row = NULL;
    if (!access(table_path, R_OK)) {
        as_table_load(table_path, table, NULL, NULL);
        if (!(row = as_table_find(table, R.name)))
            as_die(AS_TROUBLE, "%s: scenario %s is not in the table", table_path, R.name);
    }
    free(table_path);
    return row;
}

// The run's directories: the output directory, the generated cwd with the
// scenario's workspace/ copied in, a private sessions root, the spill root.
static void make_dirs(char *outabs, const char *wp_opt, const as_scenario *row)
{
    if (mkdir(R.outdir, 0755) && errno != EEXIST) as_die_sys("create %s", R.outdir);
    if (!realpath(R.outdir, outabs)) as_die_sys("resolve %s", R.outdir);
    R.outdir = outabs;
    char *parent = workspace_parent(wp_opt ? wp_opt : row ? row->workspaceParent : NULL);
    R.cwd = xasprintf("%s/acp-snap-cwd-XXXXXX", parent);
    if (!mkdtemp(R.cwd)) as_die_sys("create a directory under %s", parent);
    free(parent);
    if (!realpath(R.cwd, R.cwd_real)) snprintf(R.cwd_real, sizeof R.cwd_real, "%s", R.cwd);
    const char *tmp = getenv("TMPDIR");
    R.tmp_root = xasprintf("%s/acp-snap-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(R.tmp_root)) as_die_sys("create a temporary directory");
    R.sessions_root = xasprintf("%s/sessions", R.tmp_root);
    if (mkdir(R.sessions_root, 0700)) as_die_sys("create %s", R.sessions_root);
    R.spill_root = spill_root_for(R.name);
    char *ws = xasprintf("%s/workspace", R.scen_dir);
    if (is_dir(ws) && !copy_tree(ws, R.cwd)) as_die(AS_TROUBLE, "%s: unable to copy the workspace", ws);
    free(ws);
}

// Variables for the profile and the agent's environment.
static void set_vars(const as_scenario *row)
{
    vars_set(&R.vs, "ACPSNAP_SNAPSHOT", R.record ? "record" : "replay");
    vars_set(&R.vs, "ACPSNAP_SCENARIO", R.name);
    vars_set(&R.vs, "ACPSNAP_SCENARIO_DIR", R.scen_dir);
    vars_set(&R.vs, "ACPSNAP_CWD", R.cwd);
    vars_set(&R.vs, "ACPSNAP_SESSIONS_ROOT", R.sessions_root);
    vars_set(&R.vs, "ACPSNAP_SPILL_ROOT", R.spill_root);
    vars_set(&R.vs, "ACPSNAP_OUT", R.outdir);
    if (row && row->configPath) {
        // relative to the snapshots directory (the table's)
        char *cp = row->configPath[0] == '/' ? as_xstrdup(row->configPath)
                                             : xasprintf("%s/../%s", R.scen_dir, row->configPath);
        char rp[PATH_MAX];
        vars_set(&R.vs, "ACPSNAP_CONFIG_PATH", realpath(cp, rp) ? rp : cp);
        free(cp);
    }
}

// Replay: the fixture, override and child fixture variables, and the
// primary's replay script, derived here once (an agent with a replay adapter
// reads it; replay-serve serves it otherwise). Returns the script's path.
static char *prepare_replay(void)
{
    char *fixture = xasprintf("%s/session.jsonl", R.scen_dir);
    char *override = xasprintf("%s/replay.override.json", R.scen_dir);
    int has_ov = !access(override, R_OK);
    if (access(fixture, R_OK)) {
        // Without a fixture only a whole-script override can drive replay.
        int whole = 0;
        if (has_ov) {
            as_replay_override ov;
            as_replay_override_load(override, &ov);
            whole = ov.replace;
            as_replay_override_free(&ov);
        }
        if (!whole) as_die(AS_TROUBLE, "%s: missing fixture", fixture);
    }
    vars_set(&R.vs, "ACPSNAP_FIXTURE", fixture);
    if (has_ov) vars_set(&R.vs, "ACPSNAP_OVERRIDE", override);
    as_buf kids = {0};
    for (int i = 1;; i++) {
        char *c = xasprintf("%s/session.%d.jsonl", R.scen_dir, i);
        if (access(c, R_OK)) { free(c); break; }
        if (kids.n) as_buf_putc(&kids, ':');
        as_buf_puts(&kids, c);
        free(c);
    }
    vars_set(&R.vs, "ACPSNAP_CHILD_FIXTURES", kids.p ? kids.p : "");
    as_buf_free(&kids);
    as_replay_script sc = {0};
    as_replay_from_session(access(fixture, R_OK) ? NULL : fixture, has_ov ? override : NULL, 0, &sc);
    char *script = xasprintf("%s/replay.jsonl", R.outdir);
    as_buf sb = {0};
    for (size_t i = 0; i < sc.n; i++) { as_buf_put(&sb, sc.e[i].json, sc.e[i].len); as_buf_putc(&sb, '\n'); }
    write_plain(script, sb.p ? sb.p : "", sb.n);
    as_buf_free(&sb);
    as_replay_script_free(&sc);
    vars_set(&R.vs, "ACPSNAP_REPLAY_SCRIPT", script);
    free(fixture);
    free(override);
    return script;
}

// K=V into env.
static void env_put(vars *env, const char *kv)
{
    char *x = as_xstrdup(kv);
    char *eq = strchr(x, '=');
    *eq = 0;
    vars_set(env, x, eq + 1);
    free(x);
}

// The agent's environment: ours, the profile's, the scenario's, the command
// line's, later ones winning. Returns a NULL-terminated envp (caller frees).
static char **agent_env(const as_scenario *row, char **extra, size_t nextra)
{
    vars env = {0};
    for (char **e = environ; *e; e++)
        if (strchr(*e, '=')) env_put(&env, *e);
    for (size_t i = 0; i < R.vs.n; i++) vars_set(&env, R.vs.k[i], R.vs.v[i]);
    for (size_t i = 0; i < R.pf.nenv; i++) {
        char *x = expand(R.pf.env[i], &R.vs, R.pf.path, R.pf.env_line[i]);
        env_put(&env, x);
        free(x);
    }
    if (row) for (size_t i = 0; i < row->nenv; i++) vars_set(&env, row->envKeys[i], row->envVals[i]);
    for (size_t i = 0; i < nextra; i++) env_put(&env, extra[i]);
    char **envp = as_xmalloc((env.n + 1) * sizeof *envp);
    for (size_t i = 0; i < env.n; i++) envp[i] = xasprintf("%s=%s", env.k[i], env.v[i]);
    envp[env.n] = NULL;
    vars_free(&env);
    return envp;
}

// Drives input.json, stops the agent, writes its stderr, and reports a
// failed step, a failed shutdown or replay-serve failures. Returns the status.
static int drive(const char *rawp)
{
    size_t si = 0;
    for (; si < R.in.nsteps && !R.fail; si++) run_step(&R.in.steps[si]);
    if (!R.fail) stop_agent();
    else {
        if (R.fin >= 0) { close(R.fin); R.fin = -1; }
        if (!R.exited) { kill(R.pid, SIGKILL); waitpid(R.pid, &R.status, 0); R.exited = 1; }
        // Drain what it wrote; a descendant may keep the pipes open: bounded.
        for (long end = now_ms() + 1000; (!R.err_eof || !R.out_eof) && now_ms() < end;) pump(20);
    }
    if (fclose(R.raw)) as_die_sys("write %s", rawp);
    R.raw = NULL;
    char *ep = xasprintf("%s/stderr.txt", R.outdir);
    write_plain(ep, R.errbuf.p ? R.errbuf.p : "", R.errbuf.n);
    free(ep);
    as_buf serr = {0};
    int serve_failed = stop_serve(&serr), rc = AS_OK;
    if (R.fail) {
        const as_step *sp = &R.in.steps[si - 1];
        as_warn_at(R.input_path, sp->line, 0, "step %zu (%s): %s", si - 1, as_op_name(sp->op), R.fail);
        rc = AS_NO;
    } else if (!(WIFEXITED(R.status) && WEXITSTATUS(R.status) == 0)) {
        char *d = describe_status(R.status);
        as_warn("%s: the agent failed at shutdown: %s", R.name, d);
        free(d);
        rc = AS_NO;
    }
    if (rc != AS_OK) {
        char *d = describe_status(R.status);
        as_warn("%s: agent %s", R.name, d);
        free(d);
        if (R.errbuf.n) {
            fprintf(stderr, "%s: agent stderr:\n", as_prog);
            fwrite(R.errbuf.p, 1, R.errbuf.n, stderr);
            if (R.errbuf.p[R.errbuf.n - 1] != '\n') fputc('\n', stderr);
        }
    }
    if (serve_failed) {
        as_warn("%s: replay-serve reported failures:", R.name);
        if (serr.n) fwrite(serr.p, 1, serr.n, stderr);
        rc = AS_NO;
    }
    as_buf_free(&serr);
    harvest();
    return rc;
}

// Everything the run held, once the agent and replay-serve are gone.
static void release(char **envp)
{
    if (R.raw) fclose(R.raw);
    at_exit();
    if (R.keep) as_warn("kept %s and %s", R.cwd, R.tmp_root);
    for (size_t i = 0; i < R.nresp; i++) free(R.resp[i]);
    free(R.resp);
    for (char **e = envp; e && *e; e++) free(*e);
    free(envp);
    vars_free(&R.vs);
    profile_free(&R.pf);
    as_input_free(&R.in);
    as_buf_free(&R.line); as_buf_free(&R.errbuf); as_buf_free(&R.scratch);
    free(R.session_id); free(R.script_error); free(R.fail); free(R.serve_log);
    free(R.input_path); free(R.sessions_root);
    // at_exit has run: the directories are gone unless --keep
    free(R.cwd); free(R.tmp_root); free(R.spill_root);
    R.cwd = R.tmp_root = R.spill_root = NULL; R.pid = 0; R.serve_pid = 0;
    if (R.fin >= 0) close(R.fin);
    if (R.fout >= 0) close(R.fout);
    if (R.ferr >= 0) close(R.ferr);
    if (R.pidfd >= 0) close(R.pidfd);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "profile", required_argument, 0, 'p' }, { "out", required_argument, 0, 'o' },
        { "record", no_argument, 0, 'r' }, { "timeout", required_argument, 0, 't' },
        { "rpc-timeout", required_argument, 0, 'R' }, { "exit-timeout", required_argument, 0, 'x' },
        { "workspace-parent", required_argument, 0, 'w' }, { "env", required_argument, 0, 'e' },
        { "keep", no_argument, 0, 'k' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 } };
    const char *profile_path = NULL, *wp_opt = NULL;
    long t_opt = -1, rpc_opt = -1, exit_opt = -1;
    char **extra_env = NULL; size_t nextra = 0;
    as_setprog(argv[0]);
    R.fin = R.fout = R.ferr = R.pidfd = -1;
    for (int ch; (ch = getopt_long(argc, argv, "p:o:re:h", lo, NULL)) != -1;) {
        switch (ch) {
        case 'p': profile_path = optarg; break;
        case 'o': R.outdir = optarg; break;
        case 'r': R.record = 1; break;
        case 't': t_opt = num_opt("--timeout", optarg); break;
        case 'R': rpc_opt = num_opt("--rpc-timeout", optarg); break;
        case 'x': exit_opt = num_opt("--exit-timeout", optarg); break;
        case 'w': wp_opt = optarg; break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=') as_die(AS_TROUBLE, "invalid --env: %s", optarg);
            extra_env = as_xrealloc(extra_env, (nextra + 1) * sizeof *extra_env);
            extra_env[nextra++] = optarg;
            break;
        case 'k': R.keep = 1; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (argc - optind != 1 || !profile_path || !R.outdir) as_usage_exit(USAGE, AS_TROUBLE);
    signal(SIGPIPE, SIG_IGN);
    atexit(at_exit);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    char scen[PATH_MAX], outabs[PATH_MAX];
    as_table table = {0};
    const as_scenario *row = load_scenario(argv[optind], scen, &table);
    make_dirs(outabs, wp_opt, row);
    set_vars(row);
    char *script = R.record ? NULL : prepare_replay();
    profile_load(&R.pf, profile_path, R.record, &R.vs);
    R.timeout = t_opt > 0 ? t_opt : R.pf.timeout > 0 ? R.pf.timeout : 10000;
    R.rpc_timeout = rpc_opt > 0 ? rpc_opt : R.pf.rpc_timeout > 0 ? R.pf.rpc_timeout : (R.record ? 600000 : 60000);
    R.exit_timeout = exit_opt > 0 ? exit_opt : R.pf.exit_timeout > 0 ? R.pf.exit_timeout : 10000;
    if (!R.record && R.pf.serve) start_serve(script);
    char **envp = agent_env(row, extra_env, nextra);

    char *rawp = xasprintf("%s/stdout.raw.jsonl", R.outdir);
    if (!(R.raw = fopen(rawp, "w"))) as_die_sys("open %s", rawp);
    char *spawn_err = spawn_cmd(R.pf.argv, R.cwd, &R.fin, &R.fout, &R.ferr, envp, &R.pid);
    int rc;
    if (spawn_err) {
        R.exited = 1;     // spawn_cmd reaped it
        as_warn("%s: %s", R.pf.path, spawn_err);
        free(spawn_err);
        rc = AS_TROUBLE;
    } else {
#ifdef SYS_pidfd_open
        R.pidfd = (int)syscall(SYS_pidfd_open, R.pid, 0);
#endif
        rc = drive(rawp);
    }
    release(envp);
    as_table_free(&table);
    free(script); free(rawp); free(extra_env);
    return rc;
}
