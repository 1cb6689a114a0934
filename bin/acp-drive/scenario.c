// scenario.c - the scenario (acpsnap-scenarios(5)): its directory,
// input.json and table row; the run's directories; the variables and the
// agent's environment; replay preparation, and replay-serve when the
// profile's provider is.
#include "drive.h"
#include "confine.h"
#include "replay.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/file.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)ftw;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) && errno != ENOENT ? -1 : 0;
}

// Removes a directory tree we created (symlinks are removed, not followed).
void rm_rf(const char *path)
{
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
        as_warn("unable to remove %s: %s", path, strerror(errno));
}

// The run's outputs are scratch files for the pipeline: plain writes, no
// fsync (the pipelines stage what they commit).
void write_plain(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) as_die_sys("open %s", path);
    if (fwrite(p, 1, n, f) != n || fclose(f)) as_die_sys("write %s", path);
}

static void report_die(void *ctx, const char *file, long line, const char *msg)
{
    (void)ctx;
    as_warn_at(file, line, 0, "%s", msg);
}

// The scenario's directory as the user spelled it: its name is the last
// component, its table the scenarios.jsonl of the parent as spelled (a
// linked scenario directory keeps its name and its table). Sets scen_dir
// (the real parent, then the name) and snap_dir (the real parent).
static void locate_scenario(run *r, const char *arg)
{
    const char *slash = strrchr(arg, '/'), *base = slash ? slash + 1 : arg;
    int plain = *base && strcmp(base, ".") && strcmp(base, "..");
    char *parent = !plain ? NULL : !slash ? as_xstrdup(".") : slash == arg ? as_xstrdup("/") : strndup(arg, (size_t)(slash - arg));
    if (plain && realpath(parent, r->snap_dir)) {
        int n = snprintf(r->scen_dir, sizeof r->scen_dir, "%s%s%s", r->snap_dir, strcmp(r->snap_dir, "/") ? "/" : "", base);
        if (n < 0 || (size_t)n >= sizeof r->scen_dir) *r->scen_dir = 0;
    } else if (!plain && realpath(arg, r->scen_dir)) {     // "." or "..": its real name
        snprintf(r->snap_dir, sizeof r->snap_dir, "%s", r->scen_dir);
        *strrchr(r->snap_dir, '/') = 0;
    } else *r->scen_dir = 0;
    free(parent);
    if (!*r->scen_dir || !as_is_dir(r->scen_dir)) as_die(AS_TROUBLE, "%s: not a scenario directory", arg);
    r->name = strrchr(r->scen_dir, '/') + 1;
}

// The scenario: its directory, input.json, its table row (when there is a
// table: then the scenario must have a row). Messages name input.json and
// the table as the user spelled the scenario's path.
const as_scenario *load_scenario(run *r, const char *arg0, as_table *table)
{
    char *arg = as_xstrdup(arg0);
    for (size_t n = strlen(arg); n > 1 && arg[n - 1] == '/'; n--) arg[n - 1] = 0;
    locate_scenario(r, arg);
    r->input_path = xasprintf("%s/input.json", arg);
    r->scen_arg = arg;
    if (access(r->input_path, R_OK)) as_die(AS_TROUBLE, "%s: unable to read: %s", r->input_path, strerror(errno));
    if (as_input_load(r->input_path, &r->in, report_die, NULL)) exit(AS_TROUBLE);
    const char *slash = strrchr(arg, '/'), *base = slash ? slash + 1 : arg;
    char *table_path = xasprintf("%s/scenarios.jsonl", r->snap_dir);
    char *table_arg = !strcmp(base, ".") || !strcmp(base, "..") ? as_xstrdup(table_path)
                    : slash ? xasprintf("%.*s/scenarios.jsonl", (int)(slash - arg), arg) : as_xstrdup("scenarios.jsonl");
    const as_scenario *row = NULL;
    if (!access(table_path, R_OK)) {
        as_table_load(table_path, table, NULL, NULL);
        if (!(row = as_table_find(table, r->name)))
            as_die(AS_TROUBLE, "%s: no row named %s in %s", arg, r->name, table_arg);
        r->transcript_only = !row->sessionLog;
        r->has_model_turn = row->hasModelTurn;
        if (r->transcript_only && as_input_log_waits(&r->in, report_die, NULL)) exit(AS_TROUBLE);
    }
    free(table_path);
    free(table_arg);
    return row;
}

// ---------------------------------------------------------------- directories
static char *workspace_parent(const char *wp)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    if (!wp) return as_xstrdup(tmp);
    if (!strncmp(wp, "$HOME", 5)) { const char *h = getenv("HOME"); return xasprintf("%s%s", h ? h : "", wp + 5); }
    if (!strncmp(wp, "$TMPDIR", 7)) return xasprintf("%s%s", tmp, wp + 7);
    return as_xstrdup(wp);
}

// Seeds the cwd from the scenario's workspace/ (confine.h's as_copy_tree):
// files, directories and links that stay inside; anything else is trouble,
// named as the user spelled the scenario's path.
static void copy_workspace(const run *r, const char *ws)
{
    char *bad = NULL;
    if (!as_copy_tree(ws, r->cwd, &bad)) return;
    const char *why = errno == ELOOP ? "a symbolic link that leaves the workspace"
                    : errno == EPERM ? "not a file, directory or link (a fifo, socket or device)" : strerror(errno);
    if (!strcmp(bad, ".")) as_die(AS_TROUBLE, "%s/workspace: unable to copy the workspace: %s", r->scen_arg, why);
    as_die(AS_TROUBLE, "%s/workspace/%s: %s", r->scen_arg, bad, why);
}

// The generated cwd, under the workspace parent (option, else the row's).
static void make_cwd(run *r, const char *wp_opt, const as_scenario *row)
{
    char *parent = workspace_parent(wp_opt ? wp_opt : row ? row->workspaceParent : NULL);
    r->cwd = xasprintf("%s/acp-snap-cwd-XXXXXX", parent);
    if (!mkdtemp(r->cwd)) as_die_sys("create a directory under %s", parent);
    free(parent);
    if (!realpath(r->cwd, r->cwd_real)) snprintf(r->cwd_real, sizeof r->cwd_real, "%s", r->cwd);
}

// mkdir -p: the existing part of the path is the user's (links there are
// followed, as chosen); each missing component is created, and must then be
// a directory. Dies on failure.
static void mkdir_parents(const char *path)
{
    if (!*path) as_die(AS_TROUBLE, "invalid --out: empty");
    char *p = as_xstrdup(path);
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0755) && (errno != EEXIST || stat(p, &st) || !S_ISDIR(st.st_mode))) {
            if (errno == EEXIST) errno = ENOTDIR;
            as_die_sys("create %s", p);
        }
        if (!(*s = c)) break;
        while (s[1] == '/') s++;
    }
    free(p);
}

// The run's directories: the output directory (and its parents), the generated cwd with the
// scenario's workspace/ copied in, a private sessions root.
void make_dirs(run *r, const char *out, const char *wp_opt, const as_scenario *row)
{
    mkdir_parents(out);
    if (!realpath(out, r->outdir)) as_die_sys("resolve %s", out);
    make_cwd(r, wp_opt, row);
    const char *tmp = getenv("TMPDIR");
    r->tmp_root = xasprintf("%s/acp-snap-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->tmp_root)) as_die_sys("create a temporary directory");
    r->sessions_root = xasprintf("%s/sessions", r->tmp_root);
    if (mkdir(r->sessions_root, 0700)) as_die_sys("create %s", r->sessions_root);
    char *ws = xasprintf("%s/workspace", r->scen_dir);
    if (as_is_dir(ws)) copy_workspace(r, ws);
    free(ws);
}

// The profile's mkdir lines: directories beneath the run root (mkdir -p,
// no link followed), before the agent or the prepare hook starts.
void make_profile_dirs(run *r)
{
    int fd = open(r->tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) as_die_sys("open %s", r->tmp_root);
    for (size_t i = 0; i < r->pf.nmkdirs; i++)
        if (as_mkdirs_beneath(fd, r->pf.mkdirs[i], 1, 0700))
            as_die(AS_TROUBLE, "%s: unable to create %s in the run root: %s", r->pf.path, r->pf.mkdirs[i],
                   as_beneath_strerror(errno));
    close(fd);
}

// Removes what a directory holds, not the directory.
static void empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d) as_die_sys("open %s", path);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = xasprintf("%s/%s", path, e->d_name);
        rm_rf(p);
        free(p);
    }
    closedir(d);
}

// 1 when fd (locked) is still the directory at path, ours, no link.
static int still_there(int fd, const char *path)
{
    struct stat a, b;
    return !fstat(fd, &a) && !lstat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino
           && S_ISDIR(b.st_mode) && b.st_uid == geteuid();
}

// The spill root: fixed-length and scenario-keyed as the reference
// implementation spells it, dsh-acp-snap-<the first 9 hex digits of the
// sha256 of the scenario's name>, under /tmp (or TMPDIR when the profile
// says spill-root = tmpdir). A run owns it by an exclusive flock on the
// directory, held until it has removed it: a concurrent run of the same
// scenario waits for that (its --timeout at most), then fails, never
// touching the other's files; a root that a killed run left (no lock) is
// taken over and emptied. A link, or a directory of another user, there is
// trouble.
void make_spill_root(run *r)
{
    const char *tmp = getenv("TMPDIR");
    const char *parent = r->pf.spill_tmpdir && tmp && *tmp ? tmp : "/tmp";
    char hex[65];
    as_sha256_hex(r->name, strlen(r->name), hex);
    char *path = xasprintf("%s/dsh-acp-snap-%.9s", parent, hex);
    long deadline = as_now_ms() + r->timeout;
    for (;;) {
        if (mkdir(path, 0700) && errno != EEXIST) as_die_sys("create %s", path);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT) as_die_sys("open the spill root %s (a link or not a directory?)", path);
        if (fd >= 0 && !flock(fd, LOCK_EX | LOCK_NB)) {
            if (still_there(fd, path)) {
                empty_dir(path);
                r->spill_fd = fd;
                break;
            }
            struct stat st;
            if (!lstat(path, &st) && st.st_uid != geteuid())
                as_die(AS_TROUBLE, "%s: the spill root of %s belongs to another user", path, r->name);
            close(fd);
            continue;   // removed or replaced meanwhile: again
        }
        if (fd >= 0 && errno != EWOULDBLOCK) as_die_sys("lock %s", path);
        if (fd >= 0) close(fd);
        if (as_now_ms() >= deadline)
            as_die(AS_TROUBLE, "%s: spill root of %s in use by another run for %ld ms", path, r->name, r->timeout);
        struct timespec ts = { 0, 20000000 };
        if (nanosleep(&ts, NULL) && errno == EINTR) as_die(AS_TROUBLE, "%s: interrupted waiting for the spill root %s", r->name, path);
    }
    r->spill_root = path;
    vars_set(&r->vs, "ACPSNAP_SPILL_ROOT", path);
}

// ---------------------------------------------------------------- variables and environment
// The row's configPath: a regular file of the snapshots directory (the
// table's), named plainly (the table reader saw to that), not a link.
static void set_config_path(run *r, const as_scenario *row)
{
    const char *rp = r->snap_dir;
    int fd = as_open_under(rp, row->configPath, O_RDONLY | O_NONBLOCK, 0);
    struct stat st;
    const char *why = fd < 0 ? as_beneath_strerror(errno) : fstat(fd, &st) || !S_ISREG(st.st_mode) ? "not a regular file" : NULL;
    if (fd >= 0) close(fd);
    if (why) as_die(AS_TROUBLE, "%s/scenarios.jsonl:%ld: configPath \"%s\": %s", rp, row->line, row->configPath, why);
    char *cp = xasprintf("%s/%s", rp, row->configPath);
    vars_set(&r->vs, "ACPSNAP_CONFIG_PATH", cp);
    free(cp);
}

// Variables for the profile and the agent's environment.
void set_vars(run *r, const as_scenario *row)
{
    vars_set(&r->vs, "ACPSNAP_SNAPSHOT", r->record ? "record" : "replay");
    vars_set(&r->vs, "ACPSNAP_SCENARIO", r->name);
    vars_set(&r->vs, "ACPSNAP_SCENARIO_DIR", r->scen_dir);
    vars_set(&r->vs, "ACPSNAP_CWD", r->cwd);
    vars_set(&r->vs, "ACPSNAP_SESSIONS_ROOT", r->sessions_root);
    vars_set(&r->vs, "ACPSNAP_RUN_ROOT", r->tmp_root);
    vars_set(&r->vs, "ACPSNAP_OUT", r->outdir);
    if (row && row->configPath) set_config_path(r, row);
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

// Removes K from env, when there.
static void env_del(vars *env, const char *k)
{
    for (size_t i = 0; i < env->n; i++) {
        if (strcmp(env->k[i], k)) continue;
        free(env->k[i]); free(env->v[i]);
        memmove(env->k + i, env->k + i + 1, (env->n - i - 1) * sizeof *env->k);
        memmove(env->v + i, env->v + i + 1, (env->n - i - 1) * sizeof *env->v);
        env->n--;
        return;
    }
}

// A profile line, expanded: K=V sets K; ?K=V sets K when V is not empty,
// else leaves K out of the environment.
static void env_line(vars *env, const char *x)
{
    if (*x != '?') { env_put(env, x); return; }
    const char *eq = strchr(x, '=');
    if (eq[1]) { env_put(env, x + 1); return; }
    char *k = strndup(x + 1, (size_t)(eq - x - 1));
    env_del(env, k);
    free(k);
}

// The agent's environment: ours, the profile's, the scenario's, the command
// line's, later ones winning. Returns a NULL-terminated envp (caller frees).
char **agent_env(run *r, const as_scenario *row, char **extra, size_t nextra)
{
    vars env = {0};
    for (char **e = environ; *e; e++)
        if (strchr(*e, '=')) env_put(&env, *e);
    for (size_t i = 0; i < r->vs.n; i++) vars_set(&env, r->vs.k[i], r->vs.v[i]);
    for (size_t i = 0; i < r->pf.nenv; i++) {
        char *x = expand(r->pf.env[i], &r->vs, r->pf.env_file[i], r->pf.env_line[i]);
        env_line(&env, x);
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

// ---------------------------------------------------------------- replay (acpsnap-replay(5))
// Without a fixture only a whole-script override can drive replay.
static void check_fixture(const char *fixture, const char *override, int has_ov)
{
    if (!access(fixture, R_OK)) return;
    int whole = 0;
    if (has_ov) {
        as_replay_override ov;
        as_replay_override_load(override, &ov);
        whole = ov.replace;
        as_replay_override_free(&ov);
    }
    if (!whole) as_die(AS_TROUBLE, "%s: missing fixture", fixture);
}

// ACPSNAP_CHILD_FIXTURES: session.1.jsonl, session.2.jsonl… while they exist.
static void set_child_fixtures(run *r)
{
    as_buf kids = {0};
    for (int i = 1;; i++) {
        char *c = xasprintf("%s/session.%d.jsonl", r->scen_dir, i);
        if (access(c, R_OK)) { free(c); break; }
        if (kids.n) as_buf_putc(&kids, ':');
        as_buf_puts(&kids, c);
        free(c);
    }
    vars_set(&r->vs, "ACPSNAP_CHILD_FIXTURES", kids.p ? kids.p : "");
    as_buf_free(&kids);
}

// The replay script of the fixture and override, into OUTDIR/replay.jsonl.
static char *write_script(run *r, const char *fixture, const char *override)
{
    as_replay_script sc = {0};
    as_replay_from_session(fixture, override, 0, &sc);
    char *script = xasprintf("%s/replay.jsonl", r->outdir);
    as_buf sb = {0};
    for (size_t i = 0; i < sc.n; i++) { as_buf_put(&sb, sc.e[i].json, sc.e[i].len); as_buf_putc(&sb, '\n'); }
    write_plain(script, sb.p ? sb.p : "", sb.n);
    as_buf_free(&sb);
    as_replay_script_free(&sc);
    return script;
}

// A transcript-only scenario's script: its provider.jsonl as it stands,
// loaded as replay-serve loads it (a bad entry is trouble, file:line named);
// without a model turn an empty script in OUTDIR/replay.jsonl.
static char *provider_script(run *r)
{
    if (!r->has_model_turn) {
        char *script = xasprintf("%s/replay.jsonl", r->outdir);
        write_plain(script, "", 0);
        return script;
    }
    char *script = xasprintf("%s/provider.jsonl", r->scen_arg);
    if (access(script, R_OK))
        as_die(AS_TROUBLE, "%s: missing provider script (a \"sessionLog\": false scenario with a model turn is replayed from it)", script);
    as_replay_script sc = {0};
    as_replay_load_servable(script, &sc);
    as_replay_script_free(&sc);
    return script;
}

// A transcript-only scenario is replayed only by replay-serve, which fails
// the run when the agent leaves an entry unconsumed.
void check_tier_profile(const run *r)
{
    if (r->transcript_only && !r->record && !r->pf.serve)
        as_die(AS_TROUBLE, "%s: a \"sessionLog\": false scenario is replayed from provider.jsonl by replay-serve, but the profile %s does not say provider = replay-serve",
               r->scen_arg, r->pf.path);
}

// Replay: the fixture, override and child fixture variables, and the
// primary's replay script, derived here once (an agent with a replay adapter
// reads it; replay-serve serves it otherwise); for a transcript-only
// scenario its provider script. Returns the script's path.
char *prepare_replay(run *r)
{
    if (r->transcript_only) {
        char *script = provider_script(r);
        vars_set(&r->vs, "ACPSNAP_REPLAY_SCRIPT", script);
        return script;
    }
    char *fixture = xasprintf("%s/session.jsonl", r->scen_dir);
    char *override = xasprintf("%s/replay.override.json", r->scen_dir);
    int has_ov = !access(override, R_OK);
    check_fixture(fixture, override, has_ov);
    vars_set(&r->vs, "ACPSNAP_FIXTURE", fixture);
    if (has_ov) vars_set(&r->vs, "ACPSNAP_OVERRIDE", override);
    set_child_fixtures(r);
    char *script = write_script(r, access(fixture, R_OK) ? NULL : fixture, has_ov ? override : NULL);
    vars_set(&r->vs, "ACPSNAP_REPLAY_SCRIPT", script);
    free(fixture);
    free(override);
    return script;
}

// ---------------------------------------------------------------- replay-serve
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

// replay-serve beside acp-drive, else on PATH: its pid. It serves script,
// or, with upstream set (record mode), records the provider's answers into
// outdir/provider.jsonl, the key named by key_env (may be NULL).
static pid_t spawn_serve(run *r, const char *script, const char *port_file, const char *upstream,
                         const char *key_env)
{
    char *dir = self_dir();
    char *bin = dir ? xasprintf("%s/replay-serve", dir) : NULL;
    if (!bin || access(bin, X_OK)) { free(bin); bin = as_xstrdup("replay-serve"); }
    r->serve_log = xasprintf("%s/replay-serve.log", r->outdir);
    char *rec = xasprintf("%s/provider.jsonl", r->outdir);
    char *argv[12];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--port-file"; argv[n++] = (char *)port_file;
    if (upstream) {   // nothing is created in the cwd while recording: no --ready-dir
        argv[n++] = "--log"; argv[n++] = r->serve_log;
        argv[n++] = "--upstream"; argv[n++] = (char *)upstream;
        if (key_env) { argv[n++] = "--upstream-key-env"; argv[n++] = (char *)key_env; }
        argv[n++] = "--record"; argv[n++] = rec;
    } else {
        argv[n++] = "--ready-dir"; argv[n++] = r->cwd;
        argv[n++] = "--log"; argv[n++] = r->serve_log;
        argv[n++] = (char *)script;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) as_die_sys("fork");
    if (pid == 0) {
        char *errp = xasprintf("%s/replay-serve.stderr", r->outdir);
        int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) dup2(nul, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    free(bin); free(dir); free(rec);
    return pid;
}

// Waits (5 s at most) for replay-serve's port file; dies when it does not come.
static void await_port(run *r, const char *port_file, as_buf *port)
{
    long deadline = as_now_ms() + 5000;
    for (;;) {
        struct stat st;
        if (!stat(port_file, &st) && st.st_size > 0) { as_read_file(port_file, port); break; }
        int status;
        if (waitpid(r->serve_pid, &status, WNOHANG) == r->serve_pid)
            as_die(AS_TROUBLE, "replay-serve did not start (see %s/replay-serve.stderr)", r->outdir);
        if (as_now_ms() >= deadline) as_die(AS_TROUBLE, "replay-serve did not start within 5000 ms");
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    while (port->n && (port->p[port->n - 1] == '\n')) port->p[--port->n] = 0;
}

// Starts replay-serve, on script or, with upstream set, as the recording
// proxy in front of that provider (its recording outdir/provider.jsonl, the
// key named by ACPSNAP_UPSTREAM_KEY_ENV). ACPSNAP_PROVIDER_URL is where it
// listens.
static void start_serve_on(run *r, const char *script, const char *upstream)
{
    const char *key_env = getenv("ACPSNAP_UPSTREAM_KEY_ENV");
    char *pf = xasprintf("%s/replay-serve.port", r->tmp_root);
    r->serve_pid = spawn_serve(r, script, pf, upstream, key_env && *key_env ? key_env : NULL);
    as_buf port = {0};
    await_port(r, pf, &port);
    char *url = xasprintf("http://127.0.0.1:%s", port.p);
    vars_set(&r->vs, "ACPSNAP_PROVIDER_URL", url);
    free(url); free(pf);
    as_buf_free(&port);
}

// Replay: replay-serve on the scenario's script.
void start_serve(run *r, const char *script) { start_serve_on(r, script, NULL); }

// Record mode: replay-serve on an authored provider script is the provider,
// started here so that a hang's readyFile lands in the agent's cwd, where
// waitForFile looks; ACPSNAP_PROVIDER_KEY is its literal, no key.
void start_provider(run *r, const char *script)
{
    start_serve_on(r, script, NULL);
    vars_set(&r->vs, "ACPSNAP_PROVIDER_KEY", "replay-serve");
}

// Record mode with ACPSNAP_UPSTREAM set: replay-serve as the recording proxy
// in front of that provider; without it a recording agent calls its provider
// itself. The proxy sends the key: the agent, its prepare hook and the
// profile's expansions never see it (the variable is gone from our
// environment once the proxy has it), and ACPSNAP_PROVIDER_KEY is
// replay-serve's literal, as with --provider-script.
void start_recording_proxy(run *r)
{
    const char *up = getenv("ACPSNAP_UPSTREAM");
    if (!up || !*up) return;
    start_serve_on(r, NULL, up);
    const char *key_env = getenv("ACPSNAP_UPSTREAM_KEY_ENV");
    if (key_env && *key_env) unsetenv(key_env);
    vars_set(&r->vs, "ACPSNAP_PROVIDER_KEY", "replay-serve");
}

// Stops replay-serve: 1 and its stderr in err when it reported failures.
int stop_serve(run *r, as_buf *err)
{
    if (r->serve_pid <= 0) return 0;
    kill(r->serve_pid, SIGTERM);
    int st = 0;
    waitpid(r->serve_pid, &st, 0);
    r->serve_pid = 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char *errp = xasprintf("%s/replay-serve.stderr", r->outdir);
    as_read_file(errp, err);
    free(errp);
    return 1;
}
