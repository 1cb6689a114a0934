// tools.c - bash, read_file, write_file.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "acpsnap.h"
#include "agent.h"
#include "confine.h"

#define P_BASH "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\",\"description\":\"The bash command to run.\"},\"description\":{\"type\":\"string\",\"description\":\"What the command does, in a few words.\"}},\"required\":[\"command\"]}"
#define P_READ "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"File to read, relative to the working directory (an absolute path must lie beneath it).\"}},\"required\":[\"path\"]}"
#define P_WRITE "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"File to write, relative to the working directory (an absolute path must lie beneath it).\"},\"content\":{\"type\":\"string\",\"description\":\"The complete new content.\"}},\"required\":[\"path\",\"content\"]}"
#define D_BASH "Run a command with bash -c in a fresh shell in the working directory and return its combined stdout and stderr. Long output is cut and the full output saved to a file whose path is given."
#define D_READ "Read a UTF-8 text file and return its content."
#define D_WRITE "Create or overwrite a file with the given content."

static const char HEADER_TOOLS[] =
    "[{\"name\":\"bash\",\"description\":\"" D_BASH "\",\"parameters\":" P_BASH "},"
    "{\"name\":\"read_file\",\"description\":\"" D_READ "\",\"parameters\":" P_READ "},"
    "{\"name\":\"write_file\",\"description\":\"" D_WRITE "\",\"parameters\":" P_WRITE "}]";
static const char OPENAI_TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"description\":\"" D_BASH "\",\"parameters\":" P_BASH "}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"" D_READ "\",\"parameters\":" P_READ "}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"description\":\"" D_WRITE "\",\"parameters\":" P_WRITE "}}]";

const char *tools_header_json(void) { return HEADER_TOOLS; }
const char *tools_openai_json(void) { return OPENAI_TOOLS; }
int tool_known(const char *n) { return !strcmp(n, "bash") || !strcmp(n, "read_file") || !strcmp(n, "write_file"); }
int tool_needs_permission(const char *n) { return !strcmp(n, "bash") || !strcmp(n, "write_file"); }

// Appends s with invalid UTF-8 replaced by U+FFFD, so results are valid JSON text.
static void put_utf8(as_buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        unsigned c = *p;
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len && p + len <= e;
        for (size_t i = 1; ok && i < len; i++) ok = (p[i] & 0xc0) == 0x80;
        if (ok && len == 2) ok = c >= 0xc2;
        if (ok && len == 3) {
            unsigned cp = ((c & 15) << 12) | ((p[1] & 63) << 6) | (p[2] & 63);
            ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
        }
        if (ok && len == 4) {
            unsigned cp = ((c & 7) << 18) | ((p[1] & 63) << 12) | ((p[2] & 63) << 6) | (p[3] & 63);
            ok = cp >= 0x10000 && cp <= 0x10ffff;
        }
        if (ok) { as_buf_put(b, p, len); p += len; }
        else { as_buf_puts(b, "\xef\xbf\xbd"); p++; }
    }
}

static void result(tool_result *out, int is_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// The part of absolute path p below directory dir ("dir/rest" -> "rest"), or NULL.
static const char *below(const char *dir, const char *p)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    return !strncmp(p, dir, n) && p[n] == '/' ? p + n + 1 : NULL;
}

// The model's path relative to the session cwd, for a confined open: a
// relative path as it is; an absolute one only beneath the cwd (as given, or
// resolved). NULL with *why when it is not beneath the cwd (confine.h's rule).
static const char *beneath_cwd(const char *cwd, const char *path, const char **why)
{
    const char *rel = path;
    if (path[0] == '/') {
        char real[PATH_MAX];
        rel = below(cwd, path);
        if (!rel && realpath(cwd, real)) rel = below(real, path);
        if (!rel) { *why = "an absolute path outside the working directory"; return NULL; }
    }
    return as_rel_check(rel, why) ? NULL : rel;
}

// Opens the model's path beneath cwd with flags (no link followed), a regular
// file only. The fd, or -1 with the error result set (verb: "read", "write").
static int open_tool_file(const char *cwd, const char *path, int flags, const char *verb, tool_result *out)
{
    const char *why;
    const char *rel = beneath_cwd(cwd, path, &why);
    if (!rel) {
        result(out, 1, "error: unable to %s %s: %s; the file tools reach only files beneath the working directory",
               verb, path, why);
        return -1;
    }
    int fd = as_open_under(cwd, rel, flags | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0) why = as_beneath_strerror(errno);
    else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { close(fd); fd = -1; why = "not a regular file"; }
    if (fd < 0) result(out, 1, "error: unable to %s %s: %s", verb, path, why);
    return fd;
}

static void result(tool_result *out, int is_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) as_die_sys("allocate");
    va_end(ap);
    out->text = s;
    out->is_error = is_error;
}

static void run_read(const char *cwd, const char *path, tool_result *out)
{
    int fd = open_tool_file(cwd, path, O_RDONLY, "read", out);
    if (fd < 0) return;
    as_buf data = {0}, txt = {0};
    char tmp[65536];
    ssize_t r;
    while ((r = read(fd, tmp, sizeof tmp)) > 0 && data.n < (8u << 20)) as_buf_put(&data, tmp, (size_t)r);
    int err = r < 0 ? errno : 0;
    close(fd);
    if (err) { result(out, 1, "error: unable to read %s: %s", path, strerror(err)); as_buf_free(&data); return; }
    put_utf8(&txt, data.p ? data.p : "", data.n);
    if (!txt.p) as_buf_puts(&txt, "");
    out->text = txt.p;
    out->is_error = 0;
    as_buf_free(&data);
}

static void run_write(const char *cwd, const char *path, const char *content, tool_result *out)
{
    int fd = open_tool_file(cwd, path, O_WRONLY | O_CREAT | O_TRUNC, "write", out);
    if (fd < 0) return;
    size_t n = strlen(content);
    const char *p = content;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { result(out, 1, "error: unable to write %s: %s", path, strerror(errno)); close(fd); return; }
        p += w; left -= (size_t)w;
    }
    if (close(fd)) { result(out, 1, "error: unable to write %s: %s", path, strerror(errno)); return; }
    result(out, 0, "wrote %zu bytes to %s", n, path);
}

// Spills the full output to <spill_root>/session-<12 hex>/<12 hex>-bash.txt.
static char *spill(const config *c, const char *session_id, const char *data, size_t n)
{
    char sid[13] = {0}, rnd[13];
    for (size_t i = 0, k = 0; session_id[i] && k < 12; i++)
        if (session_id[i] != '-') sid[k++] = session_id[i];
    random_hex(rnd, 12);
    as_buf dir = {0}, path = {0};
    as_buf_printf(&dir, "%s/session-%s", c->spill_root, sid);
    if (mkdir(c->spill_root, 0700) && errno != EEXIST) goto fail;
    if (mkdir(dir.p, 0700) && errno != EEXIST) goto fail;
    as_buf_printf(&path, "%s/%s-bash.txt", dir.p, rnd);
    int fd = open(path.p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) goto fail;
    for (size_t off = 0; off < n; ) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) { close(fd); goto fail; }
        off += (size_t)w;
    }
    close(fd);
    as_buf_free(&dir);
    return path.p;
fail:
    as_warn("unable to write spill file under %s: %s", c->spill_root, strerror(errno));
    as_buf_free(&dir);
    as_buf_free(&path);
    return NULL;
}

// HOME=<sessions root>/<session id>/home (absolute, created 0700): bash never
// sees the user's home directory.
static int bash_home(const config *c, const char *session_id, as_buf *eh)
{
    char root[PATH_MAX];
    as_buf_printf(eh, "HOME=%s/%s/home", realpath(c->sessions_root, root) ? root : c->sessions_root, session_id);
    return mkdir(eh->p + 5, 0700) && errno != EEXIST ? -1 : 0;
}

static void bash_result(const config *c, const char *session_id, tool_result *out, as_buf *data,
                        int status, int cancelled, int timed_out);

// Starts bash (argv, envp) in cwd, in a process group of its own, stdin on
// /dev/null, stdout and stderr on the pipe's end out: 0 and *pid, else the
// error. posix_spawn: no copy of this process's memory (a fork of it, with
// its threads, cost a tool call more than bash's own start here).
static int spawn_bash(char *const argv[], char *const envp[], const char *cwd, int out, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int e = posix_spawn_file_actions_init(&fa);
    if (e) return e;
    if ((e = posix_spawnattr_init(&at))) { posix_spawn_file_actions_destroy(&fa); return e; }
    if (!(e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0))
        && !(e = posix_spawn_file_actions_adddup2(&fa, out, 1))
        && !(e = posix_spawn_file_actions_adddup2(&fa, out, 2))
        && !(e = posix_spawn_file_actions_addchdir_np(&fa, cwd))
        && !(e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP))
        && !(e = posix_spawnattr_setpgroup(&at, 0)))
        e = posix_spawn(pid, "/bin/bash", &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return e;
}

// After bash could not start (error *e): 1 when cwd is a directory this
// process may enter (so /bin/bash is what failed), else 0 with *e the
// reason it may not.
static int is_dir_we_enter(const char *cwd, int *e)
{
    struct stat st;
    if (stat(cwd, &st)) { *e = errno; return 0; }
    if (!S_ISDIR(st.st_mode)) { *e = ENOTDIR; return 0; }
    if (access(cwd, X_OK)) { *e = errno; return 0; }
    return 1;
}

static void run_bash(const config *c, const char *session_id, const char *cwd, const char *cmd,
                     const _Atomic int *cancel, tool_result *out)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) { result(out, 1, "error: unable to create a pipe: %s", strerror(errno)); return; }
    const char *tmp = getenv("TMPDIR");
    as_buf eh = {0}, et = {0};
    if (bash_home(c, session_id, &eh)) {
        result(out, 1, "error: unable to create the bash home %s: %s", eh.p + 5, strerror(errno));
        close(pfd[0]); close(pfd[1]); as_buf_free(&eh);
        return;
    }
    as_buf_printf(&et, "TMPDIR=%s", tmp && *tmp ? tmp : "/tmp");
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", eh.p, et.p, "LANG=C.UTF-8", "TERM=dumb", NULL};
    char *argv[] = {"bash", "-c", (char *)cmd, NULL};
    as_buf data = {0};
    pid_t pid = -1;
    int e = spawn_bash(argv, envp, cwd, pfd[1], &pid);
    close(pfd[1]);
    as_buf_free(&eh);
    as_buf_free(&et);
    if (e) {   // as bash's own failure to start: its message as its output, its status
        close(pfd[0]);
        int entered = is_dir_we_enter(cwd, &e);
        if (!entered) as_buf_printf(&data, "bash tool: unable to enter %s: %s\n", cwd, strerror(e));
        else as_buf_printf(&data, "bash tool: unable to run /bin/bash: %s\n", strerror(e));
        bash_result(c, session_id, out, &data, (entered ? 127 : 126) << 8, 0, 0);
        return;
    }
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);

    int64_t start = now_ms(), exited_at = 0;
    int status = 0, reaped = 0, timed_out = 0, cancelled = 0, eof = 0;
    const size_t hard_cap = 64u << 20;
    // bash's exit wakes the loop as its output does (no pidfd: polled)
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    // until bash is reaped and its output is drained (or given up on)
    while (!eof || !reaped) {
        struct pollfd pf[2] = {{pfd[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
        struct pollfd *pp = eof ? pf + 1 : pf;
        nfds_t np = (nfds_t)(eof ? 0 : 1) + (pidfd >= 0 && !reaped ? 1 : 0);
        int pr = poll(pp, np, eof ? 10 : 50);
        if (pr > 0 && !eof && pf[0].revents) {
            char buf[65536];
            ssize_t r;
            while ((r = read(pfd[0], buf, sizeof buf)) > 0)
                if (data.n < hard_cap) as_buf_put(&data, buf, (size_t)r);
            if (r == 0) eof = 1;
        }
        if (!reaped && waitpid(pid, &status, WNOHANG) == pid) { reaped = 1; exited_at = now_ms(); }
        if (*cancel && !cancelled) { cancelled = 1; kill(-pid, SIGKILL); }
        if (!cancelled && !timed_out && now_ms() - start > c->bash_timeout_ms) { timed_out = 1; kill(-pid, SIGKILL); }
        // a background grandchild holding the pipe open: stop waiting soon after bash exits
        if (reaped && !eof && now_ms() - exited_at > 200) { kill(-pid, SIGKILL); break; }
        if ((cancelled || timed_out) && reaped && now_ms() - exited_at > 200) break;
    }
    close(pfd[0]);
    if (pidfd >= 0) close(pidfd);
    if (!reaped) { kill(-pid, SIGKILL); waitpid(pid, &status, 0); }
    bash_result(c, session_id, out, &data, status, cancelled, timed_out);
}

// The tool's result from bash's output, its wait status, and whether it was
// cancelled or timed out: the output (capped, the rest spilled), then a note.
static void bash_result(const config *c, const char *session_id, tool_result *out, as_buf *data,
                        int status, int cancelled, int timed_out)
{
    as_buf text = {0};
    size_t cap = (size_t)c->output_cap;
    if (data->n > cap) {
        char *sp = spill(c, session_id, data->p, data->n);
        put_utf8(&text, data->p, cap);
        as_buf_printf(&text, "\n\n(Omitted %zu bytes. Full output stored at: %s)", data->n - cap,
                      sp ? sp : "(unavailable)");
        free(sp);
    } else {
        put_utf8(&text, data->p ? data->p : "", data->n);
    }
    int is_error = 0;
    if (cancelled) { as_buf_puts(&text, text.n ? "\n[cancelled]" : "[cancelled]"); is_error = 1; }
    else if (timed_out) { as_buf_printf(&text, "%s[timed out after %ld ms]", text.n ? "\n" : "", c->bash_timeout_ms); is_error = 1; }
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        as_buf_printf(&text, "%s[exit code: %d]", text.n ? "\n" : "", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        as_buf_printf(&text, "%s[killed by signal %d]", text.n ? "\n" : "", WTERMSIG(status));
    if (!text.p) as_buf_puts(&text, "");
    out->text = text.p;
    out->is_error = is_error;
    as_buf_free(data);
}

void tool_run(const config *c, const char *session_id, const char *cwd, const char *name,
              const char *args, const _Atomic int *cancel, tool_result *out)
{
    as_json j = {0};
    memset(out, 0, sizeof *out);
    if (as_json_parse(&j, args, strlen(args)) || j.t[0].type != AS_JOBJ) {
        result(out, 1, "error: the arguments of %s are not a JSON object", name);
        as_json_free(&j);
        return;
    }
    if (!strcmp(name, "bash")) {
        char *cmd = json_getstr(&j, 0, "command");
        if (!cmd) result(out, 1, "error: bash needs a string \"command\"");
        else run_bash(c, session_id, cwd, cmd, cancel, out);
        free(cmd);
    } else if (!strcmp(name, "read_file")) {
        char *p = json_getstr(&j, 0, "path");
        if (!p) result(out, 1, "error: read_file needs a string \"path\"");
        else run_read(cwd, p, out);
        free(p);
    } else if (!strcmp(name, "write_file")) {
        char *p = json_getstr(&j, 0, "path"), *content = json_getstr(&j, 0, "content");
        if (!p || !content) result(out, 1, "error: write_file needs string \"path\" and \"content\"");
        else run_write(cwd, p, content, out);
        free(p);
        free(content);
    } else {
        result(out, 1, "error: unknown tool %s", name);
    }
    as_json_free(&j);
}
