// client.c - the client side of ACP: the capabilities acp-drive advertises
// in initialize (the profile's client line, else the scenario's "client"),
// and the agent->client methods it then serves: fs/read_text_file,
// fs/write_text_file and terminal/*. Every path is confined to the scenario's
// cwd (confine.h); terminals run in process groups of their own, their output
// bounded, and are killed at the end of the run.
#include "drive.h"
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { READ_MAX = 16 << 20, OUTPUT_DEFAULT = 1 << 20, OUTPUT_MAX = 16 << 20 };
enum { E_PARAMS = -32602, E_INTERNAL = -32603, E_NOT_FOUND = -32002 };

struct term {
    long id;
    pid_t pid;
    int fd;                 // its stdout and stderr, non-blocking (-1: at end)
    as_buf out;             // the retained output (the last `limit` bytes)
    size_t limit;
    int truncated, exited, status;
    char **waits; size_t nwaits;   // ids (JSON) of terminal/wait_for_exit requests to answer
};

// ---------------------------------------------------------------- selection
void client_select(run *r)
{
    if (!r->in.has_client) { r->client = r->pf.client; return; }
    r->client = 0;
    for (size_t i = 0; i < r->in.nclient; i++) r->client |= client_bit(r->in.client[i]);
}

void client_capabilities(const run *r, as_buf *b)
{
    unsigned c = r->client;
    as_buf_putc(b, '{');
    if (c & (CLIENT_FS_READ | CLIENT_FS_WRITE)) {
        as_buf_puts(b, "\"fs\":{");
        if (c & CLIENT_FS_READ) as_buf_puts(b, "\"readTextFile\":true");
        if ((c & CLIENT_FS_READ) && (c & CLIENT_FS_WRITE)) as_buf_putc(b, ',');
        if (c & CLIENT_FS_WRITE) as_buf_puts(b, "\"writeTextFile\":true");
        as_buf_putc(b, '}');
    }
    if (c & CLIENT_TERMINAL) as_buf_puts(b, c & (CLIENT_FS_READ | CLIENT_FS_WRITE) ? ",\"terminal\":true" : "\"terminal\":true");
    as_buf_putc(b, '}');
}

// ---------------------------------------------------------------- answers
static void answer_head(as_buf *b, const char *id, size_t idlen)
{
    as_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    as_buf_put(b, id, idlen);
}

static void answer_error(run *r, const char *id, size_t idlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void answer_error(run *r, const char *id, size_t idlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = vxasprintf(fmt, ap);
    va_end(ap);
    as_buf b = {0};
    answer_head(&b, id, idlen);
    as_buf_printf(&b, ",\"error\":{\"code\":%d,\"message\":", code);
    as_jstr_write(&b, m, strlen(m));
    as_buf_puts(&b, "}}");
    send_line(r, &b);
    as_buf_free(&b);
    free(m);
}

// Sends {"jsonrpc":"2.0","id":…,"result":<result>}.
static void answer_result(run *r, const char *id, size_t idlen, const char *result, size_t n)
{
    as_buf b = {0};
    answer_head(&b, id, idlen);
    as_buf_puts(&b, ",\"result\":");
    as_buf_put(&b, result, n);
    as_buf_putc(&b, '}');
    send_line(r, &b);
    as_buf_free(&b);
}

// Length of the valid UTF-8 sequence at p (n bytes left), 0 when invalid.
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++) if ((p[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) return 0;
    if (len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))) return 0;
    return len;
}

// Appends bytes as a JSON string, each invalid UTF-8 byte as U+FFFD.
static void put_text(as_buf *b, const char *s, size_t n)
{
    as_buf t = {0};
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (k) { as_buf_put(&t, s + i, k); i += k; }
        else { as_buf_puts(&t, "\xef\xbf\xbd"); i++; }
    }
    as_jstr_write(b, t.p ? t.p : "", t.n);
    as_buf_free(&t);
}

// ---------------------------------------------------------------- params
typedef struct {
    run *r;
    const as_json *j;
    int params;
    const char *id; size_t idlen;
} req;

// The string param key (decoded, caller frees), or NULL (absent, not a string).
static char *param_str(const req *q, const char *key)
{
    int t = q->params >= 0 ? as_json_get(q->j, q->params, key) : -1;
    if (t < 0 || q->j->t[t].type != AS_JSTR) return NULL;
    as_buf b = {0};
    as_json_str(q->j, t, &b);
    return b.p ? b.p : as_xstrdup("");
}

// The integer param key: 1 and *v, 0 absent (or null), -1 not a non-negative integer.
static int param_uint(const req *q, const char *key, int64_t *v)
{
    int t = q->params >= 0 ? as_json_get(q->j, q->params, key) : -1;
    if (t < 0 || q->j->t[t].type == AS_JNULL) return 0;
    return as_json_int(q->j, t, v) && *v >= 0 ? 1 : -1;
}

// A path the agent named, as a path relative to the cwd (caller frees; NULL
// for the cwd itself when root_ok): absolute inside the cwd (as spelled or
// resolved), or relative; then by the rule of confine.h. NULL and *why
// when refused.
static char *confine(const run *r, const char *path, int root_ok, const char **why)
{
    const char *rel = path;
    *why = NULL;
    if (*path == '/') {
        const char *roots[] = { r->cwd, r->cwd_real };
        rel = NULL;
        for (int i = 0; i < 2 && !rel; i++) {
            size_t n = strlen(roots[i]);
            if (strncmp(path, roots[i], n)) continue;
            if (path[n] == 0) rel = "";
            else if (path[n] == '/') rel = path + n + 1;
        }
        if (!rel) { *why = "outside the session cwd"; return NULL; }
    }
    if (!*rel && root_ok) return NULL;
    if (as_rel_check(rel, why)) return NULL;
    return as_xstrdup(rel);
}

// The path param, confined: NULL when refused (answered).
static char *confined_path(const req *q, char **path)
{
    *path = param_str(q, "path");
    if (!*path) { answer_error(q->r, q->id, q->idlen, E_PARAMS, "missing string param \"path\""); return NULL; }
    const char *why;
    char *rel = confine(q->r, *path, 0, &why);
    if (!rel) answer_error(q->r, q->id, q->idlen, E_PARAMS, "%.200s: refused: %s", *path, why);
    return rel;
}

// A failed confined open or read, answered.
static void answer_errno(const req *q, const char *path, int e)
{
    int code = e == ENOENT ? E_NOT_FOUND : e == EXDEV || e == ELOOP || e == EINVAL ? E_PARAMS : E_INTERNAL;
    answer_error(q->r, q->id, q->idlen, code, "%.200s: %s", path, as_beneath_strerror(e));
}

// ---------------------------------------------------------------- fs
// The lines [line, line + limit) of text (line 1-based; limit -1: to the end).
static void slice_lines(const char *s, size_t n, int64_t line, int64_t limit, size_t *from, size_t *to)
{
    size_t i = 0;
    for (int64_t l = 1; l < line && i < n; l++) {
        const char *nl = memchr(s + i, '\n', n - i);
        i = nl ? (size_t)(nl - s) + 1 : n;
    }
    *from = i;
    for (int64_t k = 0; (limit < 0 || k < limit) && i < n; k++) {
        const char *nl = memchr(s + i, '\n', n - i);
        i = nl ? (size_t)(nl - s) + 1 : n;
    }
    *to = i;
}

static void fs_read(const req *q)
{
    char *path, *rel = confined_path(q, &path);
    int64_t line = 1, limit = -1;
    int hl = rel ? param_uint(q, "line", &line) : 0, hm = rel ? param_uint(q, "limit", &limit) : 0;
    if (!rel) {}
    else if (hl < 0 || hm < 0 || (hl && line < 1))
        answer_error(q->r, q->id, q->idlen, E_PARAMS, "line must be a positive integer, limit a non-negative one");
    else {
        int fd = as_open_under(q->r->cwd, rel, O_RDONLY | O_NONBLOCK, 0);
        struct stat st;
        as_buf text = {0};
        int e = fd < 0 ? errno : fstat(fd, &st) ? errno : !S_ISREG(st.st_mode) ? EISDIR : st.st_size > READ_MAX ? EFBIG : 0;
        char tmp[65536];
        for (ssize_t k; !e && (k = read(fd, tmp, sizeof tmp)) != 0;) {
            if (k < 0) e = errno;
            else if (text.n + (size_t)k > READ_MAX) e = EFBIG;
            else as_buf_put(&text, tmp, (size_t)k);
        }
        if (fd >= 0) close(fd);
        if (e) answer_errno(q, path, e);
        else {
            size_t from, to;
            slice_lines(text.p ? text.p : "", text.n, line, hm ? limit : -1, &from, &to);
            as_buf res = {0};
            as_buf_puts(&res, "{\"content\":");
            put_text(&res, text.p ? text.p + from : "", to - from);
            as_buf_putc(&res, '}');
            answer_result(q->r, q->id, q->idlen, res.p, res.n);
            as_buf_free(&res);
        }
        as_buf_free(&text);
    }
    free(rel); free(path);
}

static void fs_write(const req *q)
{
    char *path, *rel = confined_path(q, &path), *content = rel ? param_str(q, "content") : NULL;
    if (rel && !content) answer_error(q->r, q->id, q->idlen, E_PARAMS, "missing string param \"content\"");
    else if (rel) {
        int root = open(q->r->cwd, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, e = 0;
        if (root < 0 || as_mkdirs_beneath(root, rel, 0, 0755)) e = errno;
        else if ((fd = as_open_beneath(root, rel, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) e = errno;
        size_t n = strlen(content);
        for (size_t off = 0; !e && off < n;) {
            ssize_t k = write(fd, content + off, n - off);
            if (k < 0 && errno != EINTR) e = errno;
            else if (k > 0) off += (size_t)k;
        }
        if (fd >= 0 && close(fd) && !e) e = errno;
        if (root >= 0) close(root);
        if (e) answer_errno(q, path, e);
        else answer_result(q->r, q->id, q->idlen, "{}", 2);
    }
    free(content); free(rel); free(path);
}

// ---------------------------------------------------------------- terminals
// Keeps the last t->limit bytes, cut at a character boundary.
static void bound_output(struct term *t)
{
    if (t->out.n <= t->limit) return;
    size_t cut = t->out.n - t->limit;
    while (cut < t->out.n && ((unsigned char)t->out.p[cut] & 0xc0) == 0x80) cut++;
    memmove(t->out.p, t->out.p + cut, t->out.n - cut);
    t->out.n -= cut;
    t->truncated = 1;
}

// Reads what the terminal wrote (a bounded amount a call: a command that
// writes without end cannot hold the pump); reaps it.
static void term_poll(struct term *t)
{
    char buf[65536];
    for (int reads = 0; t->fd >= 0 && reads < 64; reads++) {
        ssize_t k = read(t->fd, buf, sizeof buf);
        if (k > 0) { as_buf_put(&t->out, buf, (size_t)k); bound_output(t); continue; }
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) break;
        close(t->fd);
        t->fd = -1;
    }
    if (!t->exited && waitpid(t->pid, &t->status, WNOHANG) == t->pid) t->exited = 1;
}

// {"exitCode":N,"signal":null} or {"exitCode":null,"signal":"SIGKILL"}.
static void put_exit(as_buf *b, int st)
{
    if (WIFEXITED(st)) { as_buf_printf(b, "{\"exitCode\":%d,\"signal\":null}", WEXITSTATUS(st)); return; }
    const char *name = sigabbrev_np(WTERMSIG(st));
    as_buf_puts(b, "{\"exitCode\":null,\"signal\":");
    if (name) { as_buf_puts(b, "\"SIG"); as_buf_puts(b, name); as_buf_putc(b, '"'); }
    else as_buf_printf(b, "\"%d\"", WTERMSIG(st));
    as_buf_putc(b, '}');
}

// Answers the terminal's pending terminal/wait_for_exit requests once it exited.
static void answer_waits(run *r, struct term *t)
{
    if (!t->exited || !t->nwaits) return;
    as_buf res = {0};
    put_exit(&res, t->status);
    for (size_t i = 0; i < t->nwaits; i++) {
        answer_result(r, t->waits[i], strlen(t->waits[i]), res.p, res.n);
        free(t->waits[i]);
    }
    t->nwaits = 0;
    as_buf_free(&res);
}

void client_poll(run *r)
{
    for (size_t i = 0; i < r->nterms; i++) {
        term_poll(&r->terms[i]);
        answer_waits(r, &r->terms[i]);
    }
}

// envp with the env param's {name, value} pairs set (later ones win).
static char **term_env(const req *q, int env)
{
    vars e = {0};
    for (char **p = q->r->envp; p && *p; p++) {
        char *eq = strchr(*p, '=');
        if (!eq) continue;
        char *k = strndup(*p, (size_t)(eq - *p));
        vars_set(&e, k, eq + 1);
        free(k);
    }
    for (int el = env >= 0 ? as_json_first(q->j, env) : -1; el >= 0; el = as_json_nextel(q->j, el)) {
        int n = as_json_get(q->j, el, "name"), v = as_json_get(q->j, el, "value");
        as_buf nb = {0}, vb = {0};
        as_json_str(q->j, n, &nb);
        as_json_str(q->j, v, &vb);
        if (nb.p && *nb.p && !strchr(nb.p, '=')) vars_set(&e, nb.p, vb.p ? vb.p : "");
        as_buf_free(&nb); as_buf_free(&vb);
    }
    char **envp = as_xmalloc((e.n + 1) * sizeof *envp);
    for (size_t i = 0; i < e.n; i++) envp[i] = xasprintf("%s=%s", e.k[i], e.v[i]);
    envp[e.n] = NULL;
    vars_free(&e);
    return envp;
}

// 1 when tok is an array of strings (or absent); with objs, of {name, value} strings.
static int string_array(const as_json *j, int tok, int objs)
{
    if (tok < 0 || j->t[tok].type == AS_JNULL) return 1;
    if (j->t[tok].type != AS_JARR) return 0;
    for (int el = as_json_first(j, tok); el >= 0; el = as_json_nextel(j, el)) {
        if (!objs) { if (j->t[el].type != AS_JSTR) return 0; continue; }
        int n = j->t[el].type == AS_JOBJ ? as_json_get(j, el, "name") : -1;
        int v = j->t[el].type == AS_JOBJ ? as_json_get(j, el, "value") : -1;
        if (n < 0 || v < 0 || j->t[n].type != AS_JSTR || j->t[v].type != AS_JSTR) return 0;
    }
    return 1;
}

// Forks the command in dirfd, its output on a pipe; the child's pid.
static pid_t term_spawn(char **argv, char **envp, int dirfd, int *fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) as_die_sys("create a pipe");
    pid_t pid = fork();
    if (pid < 0) as_die_sys("fork");
    if (pid == 0) {
        setpgid(0, 0);
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0 || fchdir(dirfd)) _exit(126);
        signal(SIGPIPE, SIG_DFL);
        execvpe(argv[0], argv, envp);
        dprintf(2, "unable to run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *fd = p[0];
    return pid;
}

static void term_create(const req *q)
{
    const as_json *j = q->j;
    run *r = q->r;
    char *cmd = param_str(q, "command"), *cwd = param_str(q, "cwd"), *rel = NULL;
    int args = q->params >= 0 ? as_json_get(j, q->params, "args") : -1;
    int env = q->params >= 0 ? as_json_get(j, q->params, "env") : -1;
    int64_t limit = OUTPUT_DEFAULT;
    const char *why = NULL;
    int hl = param_uint(q, "outputByteLimit", &limit);
    if (!cmd || !*cmd) answer_error(r, q->id, q->idlen, E_PARAMS, "missing string param \"command\"");
    else if (!string_array(j, args, 0) || !string_array(j, env, 1) || hl < 0)
        answer_error(r, q->id, q->idlen, E_PARAMS, "args must be strings, env {name, value} strings, outputByteLimit a non-negative integer");
    else if (cwd && !(rel = confine(r, cwd, 1, &why)) && why)
        answer_error(r, q->id, q->idlen, E_PARAMS, "%.200s: refused: %s", cwd, why);
    else {
        int dirfd = rel ? as_open_under(r->cwd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
                        : open(r->cwd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) answer_errno(q, cwd ? cwd : r->cwd, errno);
        else {
            size_t n = 1;
            char **argv = as_xmalloc(((args >= 0 && j->t[args].type == AS_JARR ? (size_t)j->t[args].count : 0) + 2) * sizeof *argv);
            argv[0] = cmd;
            for (int el = args >= 0 && j->t[args].type == AS_JARR ? as_json_first(j, args) : -1; el >= 0; el = as_json_nextel(j, el)) {
                as_buf b = {0};
                as_json_str(j, el, &b);
                argv[n++] = b.p ? b.p : as_xstrdup("");
            }
            argv[n] = NULL;
            char **envp = term_env(q, env >= 0 && j->t[env].type == AS_JARR ? env : -1);
            r->terms = as_xrealloc(r->terms, (r->nterms + 1) * sizeof *r->terms);
            struct term *t = &r->terms[r->nterms++];
            memset(t, 0, sizeof *t);
            t->id = ++r->next_term;
            t->limit = limit > OUTPUT_MAX ? OUTPUT_MAX : (size_t)limit;
            t->pid = term_spawn(argv, envp, dirfd, &t->fd);
            close(dirfd);
            for (size_t i = 1; i < n; i++) free(argv[i]);
            free(argv);
            for (char **e = envp; *e; e++) free(*e);
            free(envp);
            char res[64];
            int k = snprintf(res, sizeof res, "{\"terminalId\":\"term-%ld\"}", t->id);
            answer_result(r, q->id, q->idlen, res, (size_t)k);
        }
    }
    free(cmd); free(cwd); free(rel);
}

// The terminal the terminalId param names, or NULL (answered).
static struct term *term_of(const req *q)
{
    char *id = param_str(q, "terminalId");
    struct term *t = NULL;
    long n;
    char tail;
    if (id && sscanf(id, "term-%ld%c", &n, &tail) == 1)
        for (size_t i = 0; i < q->r->nterms && !t; i++) if (q->r->terms[i].id == n) t = &q->r->terms[i];
    if (!t) answer_error(q->r, q->id, q->idlen, E_PARAMS, "unknown terminalId %.60s", id ? id : "(none)");
    free(id);
    return t;
}

static void term_output(const req *q)
{
    struct term *t = term_of(q);
    if (!t) return;
    term_poll(t);
    as_buf res = {0};
    as_buf_puts(&res, "{\"output\":");
    put_text(&res, t->out.p ? t->out.p : "", t->out.n);
    as_buf_puts(&res, t->truncated ? ",\"truncated\":true" : ",\"truncated\":false");
    if (t->exited) { as_buf_puts(&res, ",\"exitStatus\":"); put_exit(&res, t->status); }
    as_buf_putc(&res, '}');
    answer_result(q->r, q->id, q->idlen, res.p, res.n);
    as_buf_free(&res);
}

static void term_wait(const req *q)
{
    struct term *t = term_of(q);
    if (!t) return;
    t->waits = as_xrealloc(t->waits, (t->nwaits + 1) * sizeof *t->waits);
    t->waits[t->nwaits++] = strndup(q->id, q->idlen);
    term_poll(t);
    answer_waits(q->r, t);
}

// Kills the terminal's process group and reaps it.
static void term_stop(struct term *t)
{
    if (t->exited) return;
    kill(-t->pid, SIGKILL);
    waitpid(t->pid, &t->status, 0);
    t->exited = 1;
}

static void term_free(struct term *t)
{
    if (t->fd >= 0) close(t->fd);
    for (size_t i = 0; i < t->nwaits; i++) free(t->waits[i]);
    free(t->waits);
    as_buf_free(&t->out);
}

static void term_kill(const req *q)
{
    struct term *t = term_of(q);
    if (!t) return;
    term_stop(t);
    term_poll(t);
    answer_waits(q->r, t);
    answer_result(q->r, q->id, q->idlen, "{}", 2);
}

static void term_release(const req *q)
{
    struct term *t = term_of(q);
    if (!t) return;
    term_stop(t);
    answer_waits(q->r, t);
    term_free(t);
    size_t i = (size_t)(t - q->r->terms);
    memmove(t, t + 1, (q->r->nterms - i - 1) * sizeof *t);
    q->r->nterms--;
    answer_result(q->r, q->id, q->idlen, "{}", 2);
}

// ---------------------------------------------------------------- dispatch
static const struct {
    const char *method;
    unsigned bit;
    void (*fn)(const req *q);
} METHODS[] = {
    { "fs/read_text_file", CLIENT_FS_READ, fs_read },
    { "fs/write_text_file", CLIENT_FS_WRITE, fs_write },
    { "terminal/create", CLIENT_TERMINAL, term_create },
    { "terminal/output", CLIENT_TERMINAL, term_output },
    { "terminal/wait_for_exit", CLIENT_TERMINAL, term_wait },
    { "terminal/kill", CLIENT_TERMINAL, term_kill },
    { "terminal/release", CLIENT_TERMINAL, term_release },
};

int client_serve(run *r, const as_json *j, int id, int method)
{
    for (size_t i = 0; i < sizeof METHODS / sizeof *METHODS; i++) {
        if (!(r->client & METHODS[i].bit) || !as_json_streq(j, method, METHODS[i].method)) continue;
        int params = as_json_get(j, 0, "params");
        req q = { r, j, params >= 0 && j->t[params].type == AS_JOBJ ? params : -1, as_tok_p(j, id), as_tok_len(j, id) };
        METHODS[i].fn(&q);
        return 1;
    }
    return 0;
}

void client_end(const run *r)
{
    for (size_t i = 0; i < r->nterms; i++) {
        const struct term *t = &r->terms[i];
        if (t->exited) continue;
        kill(-t->pid, SIGKILL);
        waitpid(t->pid, NULL, 0);
    }
}

void client_free(run *r)
{
    for (size_t i = 0; i < r->nterms; i++) term_free(&r->terms[i]);
    free(r->terms);
    r->terms = NULL;
    r->nterms = 0;
}
