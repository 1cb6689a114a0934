// drive.c - the agent under drive: spawning it, the pump that reads its
// stdout (one ACP frame a line) and stderr, requests and their responses,
// answers to its own requests, and its end.
#include "drive.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// The signal last caught: the run fails at the next pump. The only state
// outside the run, as a signal handler can reach nothing else.
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }
int signal_caught(void) { return interrupted; }

void catch_signals(void)
{
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void fail(run *r, const char *fmt, ...)
{
    if (r->fail) return;
    va_list ap;
    va_start(ap, fmt);
    r->fail = vxasprintf(fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------- spawning
// Runs argv in cwd with its stdio on pipes, in its own process group (the
// stop policy signals it whole), SIGPIPE at its default; NULL, or why it
// could not run (then the pipes are closed). posix_spawn: no copy of this
// process's page tables, and the C library makes the child signal-safe
// until its exec.
static char *spawn_cmd(char *const argv[], const char *cwd, int *fin, int *fout, int *ferr, char **envp, pid_t *pid)
{
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) as_die_sys("create pipes");
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    if (posix_spawn_file_actions_init(&fa) || posix_spawnattr_init(&at)
        || posix_spawn_file_actions_adddup2(&fa, in[0], 0) || posix_spawn_file_actions_adddup2(&fa, out[1], 1)
        || posix_spawn_file_actions_adddup2(&fa, err[1], 2)
        || (cwd && posix_spawn_file_actions_addchdir_np(&fa, cwd))
        || posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF)
        || posix_spawnattr_setpgroup(&at, 0) || posix_spawnattr_setsigdefault(&at, &def))
        as_die(AS_TROUBLE, "unable to set up the agent's start: out of memory");
    int e = posix_spawnp(pid, argv[0], &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]); close(out[1]); close(err[1]);
    if (e) {
        *pid = 0;
        close(in[1]); close(out[0]); close(err[0]);
        return xasprintf("unable to run %s: %s", argv[0], strerror(e));
    }
    *fin = in[1]; *fout = out[0]; *ferr = err[0];
    return NULL;
}

char *start_agent(run *r, char **envp)
{
    char *err = spawn_cmd(r->pf.argv, r->cwd, &r->fin, &r->fout, &r->ferr, envp, &r->pid);
    if (err) {
        r->exited = 1;     // (nothing runs)
        return err;
    }
#ifdef SYS_pidfd_open
    r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
#endif
    return NULL;
}

// ---------------------------------------------------------------- writing
void send_line(run *r, const as_buf *b)
{
    if (r->fin < 0) return;
    as_buf l = {0};
    as_buf_put(&l, b->p, b->n);
    as_buf_putc(&l, '\n');
    size_t off = 0;
    while (off < l.n) {
        ssize_t k = write(r->fin, l.p + off, l.n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EPIPE) {     // it is gone: the waits report it, with its status
            close(r->fin); r->fin = -1;
            break;
        }
        if (k <= 0) { fail(r, "unable to write to the agent's stdin: %s", strerror(errno)); break; }
        off += (size_t)k;
    }
    as_buf_free(&l);
}

// Sends a request; returns its id.
long request(run *r, const char *method, const as_buf *params)
{
    long id = r->next_id++;
    r->resp = as_xrealloc(r->resp, (size_t)r->next_id * sizeof *r->resp);
    r->resp[id] = NULL;
    r->nresp = (size_t)r->next_id;
    as_buf b = {0};
    as_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":", id);
    as_jstr_write(&b, method, strlen(method));
    as_buf_puts(&b, ",\"params\":");
    as_buf_put(&b, params->p, params->n);
    as_buf_putc(&b, '}');
    send_line(r, &b);
    as_buf_free(&b);
    return id;
}

void notify_cancel(run *r)
{
    as_buf b = {0};
    as_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":");
    as_jstr_write(&b, r->session_id, strlen(r->session_id));
    as_buf_puts(&b, "}}");
    send_line(r, &b);
    as_buf_free(&b);
}

// ---------------------------------------------------------------- the agent's requests
// The first offered option (in opts) whose kind is kind, or -1; every offered
// kind listed into offered.
static int pick_option(const as_json *j, int opts, const char *kind, as_buf *offered)
{
    int chosen = -1;
    for (int o = as_json_first(j, opts); o >= 0; o = as_json_nextel(j, o)) {
        if (j->t[o].type != AS_JOBJ) continue;
        int k = as_json_get(j, o, "kind"), oid = as_json_get(j, o, "optionId");
        if (k < 0 || j->t[k].type != AS_JSTR) continue;
        if (offered->n) as_buf_puts(offered, ", ");
        as_json_str(j, k, offered);
        if (chosen < 0 && oid >= 0 && as_json_streq(j, k, kind)) chosen = oid;
    }
    return chosen;
}

// The result of a permission request, by the next scripted kind. The agent
// sees a well-defined cancel when it did not offer it; the run fails once the
// step settles.
static void answer_permission(run *r, const as_json *j, as_buf *b)
{
    int params = as_json_get(j, 0, "params");
    int opts = params >= 0 && j->t[params].type == AS_JOBJ ? as_json_get(j, params, "options") : -1;
    const char *kind = r->answer_next < r->in.nanswers ? r->in.answers[r->answer_next++] : NULL;
    as_buf offered = {0};
    int chosen = kind && opts >= 0 && j->t[opts].type == AS_JARR ? pick_option(j, opts, kind, &offered) : -1;
    if (chosen >= 0) {
        as_buf_puts(b, ",\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":");
        as_buf_put(b, as_tok_p(j, chosen), as_tok_len(j, chosen));
        as_buf_puts(b, "}}}");
    } else {
        if (kind && !r->script_error)
            r->script_error = xasprintf("scripted permission answer %s not among the offered options [%s]",
                                        kind, offered.p ? offered.p : "");
        as_buf_puts(b, ",\"result\":{\"outcome\":{\"outcome\":\"cancelled\"}}}");
    }
    as_buf_free(&offered);
}

// Answers an agent request: permission by the scripted kind, a selected
// client method (client.c), else "method not found".
static void answer_agent(run *r, const as_json *j, int id, int method)
{
    if (client_serve(r, j, id, method)) return;
    as_buf b = {0};
    as_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    as_buf_put(&b, as_tok_p(j, id), as_tok_len(j, id));
    if (as_json_streq(j, method, "session/request_permission")) answer_permission(r, j, &b);
    else as_buf_puts(&b, ",\"error\":{\"code\":-32601,\"message\":\"method not found\"}}");
    send_line(r, &b);
    as_buf_free(&b);
}

// ---------------------------------------------------------------- reading
// 1 when the notification is an agent_message_chunk whose text is the
// awaited one.
static int is_awaited(const run *r, const as_json *j, int method)
{
    if (!as_json_streq(j, method, "session/update")) return 0;
    int params = as_json_get(j, 0, "params");
    int up = params >= 0 && j->t[params].type == AS_JOBJ ? as_json_get(j, params, "update") : -1;
    int su = up >= 0 && j->t[up].type == AS_JOBJ ? as_json_get(j, up, "sessionUpdate") : -1;
    int ct = up >= 0 && j->t[up].type == AS_JOBJ ? as_json_get(j, up, "content") : -1;
    if (su < 0 || !as_json_streq(j, su, "agent_message_chunk") || ct < 0 || j->t[ct].type != AS_JOBJ) return 0;
    int ty = as_json_get(j, ct, "type"), tx = as_json_get(j, ct, "text");
    return ty >= 0 && as_json_streq(j, ty, "text") && tx >= 0 && as_json_streq(j, tx, r->want_text);
}

// An error response to no request of ours (id null or absent), or a parse
// error (-32700): the agent could not read what it was sent, and no answer
// will come. Fails the run at once with its message.
static int stray_error(run *r, const as_json *j, int id)
{
    int e = as_json_get(j, 0, "error");
    if (e < 0 || j->t[e].type != AS_JOBJ) return 0;
    int c = as_json_get(j, e, "code"), m = as_json_get(j, e, "message");
    int64_t code = 0;
    int has_code = c >= 0 && as_json_int(j, c, &code);
    if (id >= 0 && j->t[id].type != AS_JNULL && !(has_code && code == -32700)) return 0;
    as_buf msg = {0};
    if (m >= 0 && j->t[m].type == AS_JSTR) as_json_str(j, m, &msg);
    else as_buf_puts(&msg, "");
    if (has_code && code == -32700) fail(r, "the agent could not parse what it was sent (error -32700): %.200s", msg.p);
    else if (has_code) fail(r, "the agent answered error %lld to no request: %.200s", (long long)code, msg.p);
    else fail(r, "the agent answered an error to no request: %.200s", msg.p);
    as_buf_free(&msg);
    return 1;
}

// Adds kind k ("\nkind\n", no LF inside) to the kinds noted in b, once.
static void note_kind(as_buf *b, const as_buf *k)
{
    if (!update_seen(b, k->p + 1, k->n - 2)) as_buf_put(b, k->p + (b->n ? 1 : 0), k->n - (b->n ? 1 : 0));
}

// Notes the sessionUpdate kind of a session/update notification.
static void note_update(run *r, const as_json *j, int method)
{
    if (!as_json_streq(j, method, "session/update")) return;
    int params = as_json_get(j, 0, "params");
    int up = params >= 0 && j->t[params].type == AS_JOBJ ? as_json_get(j, params, "update") : -1;
    int su = up >= 0 && j->t[up].type == AS_JOBJ ? as_json_get(j, up, "sessionUpdate") : -1;
    if (su < 0 || j->t[su].type != AS_JSTR) return;
    as_buf k = {0};
    as_buf_putc(&k, '\n');
    as_json_str(j, su, &k);
    as_buf_putc(&k, '\n');
    if (!memchr(k.p + 1, '\n', k.n - 2)) { note_kind(&r->updates_seen, &k); note_kind(&r->updates_since, &k); }
    as_buf_free(&k);
}

int update_seen(const as_buf *b, const char *kind, size_t n)
{
    for (size_t i = 0; i + n + 2 <= b->n; i++)
        if (b->p[i] == '\n' && b->p[i + n + 1] == '\n' && !memcmp(b->p + i + 1, kind, n)) return 1;
    return 0;
}

static void on_frame(run *r, const char *p, size_t n)
{
    as_json *j = &r->frame;
    r->frames++;
    if (as_json_parse(j, p, n) || j->t[0].type != AS_JOBJ) return;   // purity is scrub's job
    int id = as_json_get(j, 0, "id"), method = as_json_get(j, 0, "method");
    if (method >= 0 && j->t[method].type == AS_JSTR) {
        if (id >= 0) answer_agent(r, j, id, method);
        else {
            if (r->want_text && is_awaited(r, j, method)) r->want_seen = 1;
            note_update(r, j, method);
        }
        return;
    }
    if (stray_error(r, j, id)) return;
    int64_t rid;
    if (id >= 0 && as_json_int(j, id, &rid) && rid >= 0 && (size_t)rid < r->nresp && !r->resp[rid]) {
        r->resp[rid] = strndup(p, n);
        as_buf msg = {0};
        if (rid == r->watch_id && response_error(r->resp[rid], &msg))
            fail(r, "%s failed: %s", r->watch_method, msg.p ? msg.p : "");
        as_buf_free(&msg);
    }
}

static void read_stdout(run *r)
{
    char buf[65536];
    ssize_t k = read(r->fout, buf, sizeof buf);
    if (k <= 0) { r->out_eof = 1; return; }
    if (fwrite(buf, 1, (size_t)k, r->raw) != (size_t)k) as_die_sys("write stdout.raw.jsonl");
    as_buf_put(&r->line, buf, (size_t)k);
    size_t start = 0;
    for (size_t i = 0; i < r->line.n; i++)
        if (r->line.p[i] == '\n') { on_frame(r, r->line.p + start, i - start); start = i + 1; }
    memmove(r->line.p, r->line.p + start, r->line.n - start);
    r->line.n -= start;
}

static void read_stderr(run *r)
{
    char buf[65536];
    ssize_t k = read(r->ferr, buf, sizeof buf);
    if (k <= 0) r->err_eof = 1;
    else as_buf_put(&r->errbuf, buf, (size_t)k);
}

// 1 when this call saw the agent exit.
static int reap(run *r)
{
    if (r->exited || waitpid(r->pid, &r->status, WNOHANG) != r->pid) return 0;
    r->exited = 1;
    return 1;
}

// Both pipes closed: only the exit is left to see (bounded by the caller).
static void await_exit(run *r, int wait_ms)
{
    if (reap(r)) return;
    if (r->pidfd >= 0 && !r->exited) poll(&(struct pollfd){ .fd = r->pidfd, .events = POLLIN }, 1, wait_ms);
    else poll(NULL, 0, wait_ms);
}

// Reads what the agent has written, waiting at most wait_ms.
int pump(run *r, int wait_ms)
{
    if (interrupted && !r->fail) fail(r, "interrupted by signal %d", (int)interrupted);
    struct pollfd p[2];
    int n = 0, io = -1, ie = -1, got = 0;
    if (!r->out_eof) { io = n; p[n++] = (struct pollfd){ .fd = r->fout, .events = POLLIN }; }
    if (!r->err_eof) { ie = n; p[n++] = (struct pollfd){ .fd = r->ferr, .events = POLLIN }; }
    if (!n) await_exit(r, wait_ms);
    else if (poll(p, (nfds_t)n, wait_ms) > 0) {
        if (io >= 0 && p[io].revents) { read_stdout(r); got = 1; }
        if (ie >= 0 && p[ie].revents) { read_stderr(r); got = 1; }
    }
    if (r->nterms) client_poll(r);
    reap(r);
    return got;
}

int agent_gone(const run *r) { return r->out_eof || r->exited; }

// ---------------------------------------------------------------- waiting
// Waits for the response to request id; returns the line or NULL (failed).
const char *await_response(run *r, long id, const char *method, long timeout)
{
    long deadline = as_now_ms() + timeout;
    while (!r->resp[id]) {
        if (agent_gone(r)) { fail(r, "the agent exited before answering %s", method); return NULL; }
        if (r->fail) return NULL;
        if (as_now_ms() >= deadline) { fail(r, "no response to %s within %ld ms", method, timeout); return NULL; }
        pump(r, 10);
    }
    return r->resp[id];
}

// 1 when the response is an error; its message into msg.
int response_error(const char *line, as_buf *msg)
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

// Pumps until cond holds (1). Fails the run with "<late> within <timeout> ms"
// at the deadline, with gone when the agent exits first; returns 0 then, or
// when the run failed meanwhile.
// The condition is checked again whenever the agent writes, and then,
// while it is silent, after 1, 2, 4 and 8 ms, then every 10 ms: a file or a
// log line comes soon after the message before it, so a short wait stays
// short without a file watch to set up and tear down (closing an inotify
// descriptor waits for a kernel grace period: milliseconds).
int wait_until(run *r, cond_fn cond, const void *ctx, long timeout, const char *late, const char *gone)
{
    long deadline = as_now_ms() + timeout;
    for (int step = 1;;) {
        int c = cond(r, ctx);
        if (c) return c > 0;
        if (as_now_ms() >= deadline) { fail(r, "%s within %ld ms", late, timeout); return 0; }
        if (agent_gone(r)) { fail(r, "%s", gone); return 0; }
        step = pump(r, step) ? 1 : step < 8 ? 2 * step : 10;
        if (r->fail) return 0;
    }
}

// ---------------------------------------------------------------- the end
// The agent and whatever it started in its process group.
static void kill_agent(run *r)
{
    kill(-r->pid, SIGKILL);
    kill(r->pid, SIGKILL);
    waitpid(r->pid, &r->status, 0);
    r->exited = 1;
}

// The stop policy (acpsnap-profile(5)): its stdin closed; after the term
// timeout (when shorter than the exit timeout) SIGTERM to its process
// group; at the exit timeout, counted from stdin closing, SIGKILL, and the
// run fails. Waits for the exit and both pipes' end.
void stop_agent(run *r)
{
    if (r->fin >= 0) { close(r->fin); r->fin = -1; }
    long t0 = as_now_ms(), deadline = t0 + r->exit_timeout;
    long term_at = r->term_timeout > 0 && r->term_timeout < r->exit_timeout ? t0 + r->term_timeout : -1;
    while (!(r->exited && r->out_eof && r->err_eof)) {
        long now = as_now_ms();
        if (term_at >= 0 && !r->termed && !r->exited && now >= term_at) {
            kill(-r->pid, SIGTERM);
            r->termed = 1;
        }
        if (now >= deadline) {
            if (!r->exited) {
                kill_agent(r);
                if (r->termed)
                    fail(r, "the agent did not exit within %ld ms of stdin closing, nor within %ld ms of SIGTERM (killed)",
                         r->exit_timeout, r->exit_timeout - r->term_timeout);
                else
                    fail(r, "the agent did not exit within %ld ms of stdin closing (killed)", r->exit_timeout);
            }
            break;     // a descendant may hold the pipes: stop reading
        }
        pump(r, 10);
    }
}

int clean_exit(const run *r)
{
    if (WIFEXITED(r->status)) return WEXITSTATUS(r->status) == 0;
    return r->termed && WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGTERM;
}

// After a failure: the agent killed, then what it wrote drained; a
// descendant may keep the pipes open: bounded.
void abort_agent(run *r)
{
    if (r->fin >= 0) { close(r->fin); r->fin = -1; }
    if (!r->exited) kill_agent(r);
    for (long end = as_now_ms() + 1000; (!r->err_eof || !r->out_eof) && as_now_ms() < end;) pump(r, 20);
}

char *describe_status(int st)
{
    if (WIFEXITED(st)) return xasprintf("exit status %d", WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return xasprintf("killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    return as_xstrdup("unknown status");
}
