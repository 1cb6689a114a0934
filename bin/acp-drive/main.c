// acp-drive - run one scenario against an ACP agent through its profile.
//
// Creates the scenario's cwd, seeds it from workspace/, boots the agent as the
// profile says (acpsnap-profile(5)), drives input.json over ACP
// (acpsnap-scenarios(5)), answers permission requests, waits on durable
// boundaries by reading the persisted logs as they grow, then closes stdin,
// waits for the agent to exit and harvests every session log, primary first.
// Writes the raw capture (stdout.raw.jsonl, stderr.txt, session*.jsonl,
// run.json) into the output directory. Exit 0: the run completed; 1: the
// scenario failed (a step timed out, the agent crashed or exited non-zero, an
// expectation of input.json did not hold); 2: trouble (usage, profile,
// input.json, the fixture).
#include "drive.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: acp-drive -p PROFILE -o OUTDIR [--record] [--timeout MS] [--rpc-timeout MS]\n"
    "          [--exit-timeout MS] [--workspace-parent DIR] [--env K=V]... [--keep]\n"
    "          [--provider-script FILE] [--compare stdout|all] SCENARIO_DIR\n"
    "       acp-drive -p PROFILE --serve [OPTION]...\n"
    "Runs one scenario against an agent: a fresh cwd with workspace/ copied in,\n"
    "the agent booted through its profile (acpsnap-profile(5)), input.json driven\n"
    "over ACP, raw stdout captured, the session logs harvested, and run.json\n"
    "written for scrub --context, all into OUTDIR.\n"
    "  -p, --profile FILE        the agent profile\n"
    "  -o, --out DIR             the output directory (created with its parents)\n"
    "  -r, --record              record mode: no fixture; the profile's record.env\n"
    "      --timeout MS          waiting steps (default: the profile's, else 10000)\n"
    "      --rpc-timeout MS      each ACP request (default 60000; 600000 recording)\n"
    "      --exit-timeout MS     the agent's exit after stdin closes (default 10000)\n"
    "      --workspace-parent DIR   overrides the table's workspaceParent\n"
    "  -e, --env K=V             adds to the agent's environment, last (repeatable)\n"
    "      --keep                keep the cwd and the sessions root\n"
    "      --provider-script FILE   record mode: replay-serve on FILE is the provider\n"
    "      --compare stdout|all  after a completed replay, compare the normalized\n"
    "                            transcript (all: and session logs) with the\n"
    "                            scenario's committed files, then make the run's\n"
    "                            checks (sidecar-dedupe --verify); the outcome\n"
    "                            (same, differs or unknown) in OUTDIR/compared\n"
    "      --serve               no SCENARIO_DIR or -o: the runs of the requests on\n"
    "                            stdin (acp-drive(1), SERVE)\n"
    "  -j, --jobs N              with --serve: up to N runs at once (default 1)\n"
    "      --scratch             with --serve: a run that compared the same removes\n"
    "                            its OUTDIR once it has answered\n"
    "  -h, --help, --version\n"
    "Exit status: 0 the run completed, 1 the scenario failed, 2 trouble.\n";

// The options that are not the run's own.
typedef struct {
    const char *profile, *out, *wp;
    const char *provider;                      // --provider-script
    int compare;                               // --compare: 0 no, 1 stdout, 2 all
    int serve;                                 // --serve
    int answer;                                // a --serve run: where it answers early, else -1
    int go;                                    // a --serve run: where it waits for its turn, else -1
    int scratch;                               // --scratch (with --serve)
    long jobs;                                 // --jobs (with --serve), 0: not given
    long timeout, rpc_timeout, exit_timeout;   // -1: not given
    char **env; size_t nenv;                   // --env K=V, in order
} opts;

enum { SERVE_MAX = 256, SPARE_DELAY = 2 };   // --jobs' bound

static long num_opt(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v <= 0) as_die(AS_TROUBLE, "invalid %s: %s", opt, s);
    return v;
}

// --compare's argument: 1 stdout, 2 all.
static int compare_mode(const char *m)
{
    if (!strcmp(m, "stdout")) return 1;
    if (!strcmp(m, "all")) return 2;
    as_die(AS_TROUBLE, "invalid --compare: %s (stdout or all)", m);
}

static void options(int argc, char **argv, opts *o, run *r)
{
    static const struct option lo[] = {
        { "profile", required_argument, 0, 'p' }, { "out", required_argument, 0, 'o' },
        { "record", no_argument, 0, 'r' }, { "timeout", required_argument, 0, 't' },
        { "rpc-timeout", required_argument, 0, 'R' }, { "exit-timeout", required_argument, 0, 'x' },
        { "workspace-parent", required_argument, 0, 'w' }, { "env", required_argument, 0, 'e' },
        { "keep", no_argument, 0, 'k' }, { "provider-script", required_argument, 0, 'P' },
        { "compare", required_argument, 0, 'C' }, { "serve", no_argument, 0, 'S' },
        { "jobs", required_argument, 0, 'j' }, { "scratch", no_argument, 0, 's' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 } };
    for (int ch; (ch = getopt_long(argc, argv, "p:o:re:j:h", lo, NULL)) != -1;) {
        switch (ch) {
        case 'p': o->profile = optarg; break;
        case 'o': o->out = optarg; break;
        case 'r': r->record = 1; break;
        case 't': o->timeout = num_opt("--timeout", optarg); break;
        case 'R': o->rpc_timeout = num_opt("--rpc-timeout", optarg); break;
        case 'x': o->exit_timeout = num_opt("--exit-timeout", optarg); break;
        case 'w': o->wp = optarg; break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=') as_die(AS_TROUBLE, "invalid --env: %s", optarg);
            o->env = as_xrealloc(o->env, (o->nenv + 1) * sizeof *o->env);
            o->env[o->nenv++] = optarg;
            break;
        case 'k': r->keep = 1; break;
        case 'P': o->provider = optarg; break;
        case 'C': o->compare = compare_mode(optarg); break;
        case 'S': o->serve = 1; break;
        case 'j': o->jobs = num_opt("--jobs", optarg); break;
        case 's': o->scratch = 1; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (o->serve) {
        if (argc != optind || !o->profile || o->out || o->compare) as_usage_exit(USAGE, AS_TROUBLE);
        if (r->record || o->provider) as_die(AS_TROUBLE, "--serve serves replays: drop --record");
        if (o->jobs > SERVE_MAX) as_die(AS_TROUBLE, "invalid --jobs: %ld (at most %d)", o->jobs, SERVE_MAX);
        return;
    }
    if (o->jobs) as_die(AS_TROUBLE, "--jobs needs --serve");
    if (o->scratch) as_die(AS_TROUBLE, "--scratch needs --serve");
    if (argc - optind != 1 || !o->profile || !o->out) as_usage_exit(USAGE, AS_TROUBLE);
    if (o->provider && !r->record) as_die(AS_TROUBLE, "--provider-script needs --record");
    if (o->compare && r->record) as_die(AS_TROUBLE, "--compare compares a replay: drop --record");
}

// The option, else the profile's, else the default.
static void set_timeouts(run *r, const opts *o)
{
    const profile *pf = &r->pf;
    r->timeout = o->timeout > 0 ? o->timeout : pf->timeout > 0 ? pf->timeout : 10000;
    r->rpc_timeout = o->rpc_timeout > 0 ? o->rpc_timeout
                   : pf->rpc_timeout > 0 ? pf->rpc_timeout : (r->record ? 600000 : 60000);
    r->exit_timeout = o->exit_timeout > 0 ? o->exit_timeout : pf->exit_timeout > 0 ? pf->exit_timeout : 10000;
    r->term_timeout = pf->term_timeout >= 0 ? pf->term_timeout : 2000;
}

// ---------------------------------------------------------------- the end of the run
// What the agent left: its status, and its stderr.
static void post_mortem(const run *r)
{
    char *d = describe_status(r->status);
    as_warn("%s: agent %s", r->name, d);
    free(d);
    if (!r->errbuf.n) return;
    fprintf(stderr, "%s: agent stderr:\n", as_prog);
    fwrite(r->errbuf.p, 1, r->errbuf.n, stderr);
    if (r->errbuf.p[r->errbuf.n - 1] != '\n') fputc('\n', stderr);
}

// Reports a failed step (steps[si - 1]; si 0: no step failed, the failure
// came at shutdown) or a failed shutdown: the status.
static int report(const run *r, size_t si)
{
    if (r->fail && si) {
        const as_step *sp = &r->in.steps[si - 1];
        as_warn_at(r->input_path, sp->line, 0, "step %zu (%s): %s", si - 1, as_op_name(sp->op), r->fail);
    } else if (r->fail) {
        as_warn("%s: at shutdown, after the last step: %s", r->name, r->fail);
    } else if (!clean_exit(r)) {
        char *d = describe_status(r->status);
        as_warn("%s: the agent failed at shutdown: %s", r->name, d);
        free(d);
    } else {
        return AS_OK;
    }
    post_mortem(r);
    return AS_NO;
}

// Drives input.json, stops the agent, writes its stderr, and reports a
// failed step, a failed shutdown or replay-serve failures. Returns the status.
static int drive(run *r, const char *rawp)
{
    size_t si = 0;
    r->t_steps = as_xmalloc((r->in.nsteps + 1) * sizeof *r->t_steps);
    for (; si < r->in.nsteps && !r->fail; si++) {
        long t0 = as_now_ms();
        run_step(r, &r->in.steps[si]);
        r->t_steps[r->nt_steps++] = as_now_ms() - t0;
    }
    size_t failed_step = r->fail ? si : 0;
    long t0 = as_now_ms();
    if (!r->fail) stop_agent(r);
    else abort_agent(r);
    r->t_exit = as_now_ms() - t0;
    if (fclose(r->raw)) as_die_sys("write %s", rawp);
    r->raw = NULL;
    char *ep = xasprintf("%s/stderr.txt", r->outdir);
    write_plain(ep, r->errbuf.p ? r->errbuf.p : "", r->errbuf.n);
    free(ep);
    as_buf serr = {0};
    int serve_failed = stop_serve(r, &serr), rc = report(r, failed_step);
    if (serve_failed) {
        as_warn("%s: replay-serve reported failures:", r->name);
        if (serr.n) fwrite(serr.p, 1, serr.n, stderr);
        rc = AS_NO;
    }
    as_buf_free(&serr);
    harvest(r);
    return rc;
}

// The file the agent's stdout is teed to: stdout.raw.jsonl (its path).
static char *open_raw(run *r)
{
    char *rawp = xasprintf("%s/stdout.raw.jsonl", r->outdir);
    if (!(r->raw = fopen(rawp, "w"))) as_die_sys("open %s", rawp);
    return rawp;
}

// Boots the agent with stdout teed to rawp (open_raw), then drives it.
static int run_agent(run *r, char **envp, char *rawp)
{
    long t0 = as_now_ms();
    char *spawn_err = start_agent(r, envp);
    r->t_boot = as_now_ms() - t0;
    int rc = AS_TROUBLE;
    if (spawn_err) as_warn("%s: %s", r->pf.path, spawn_err);
    else rc = drive(r, rawp);
    free(spawn_err);
    return rc;
}

// ---------------------------------------------------------------- cleanup
// No stray agent, server or temporary directory survives acp-drive.
static void cleanup(const run *r)
{
    if (r->pid > 0 && !r->exited) { kill(-r->pid, SIGKILL); kill(r->pid, SIGKILL); waitpid(r->pid, NULL, 0); }
    client_end(r);
    if (r->serve_pid > 0) { kill(r->serve_pid, SIGKILL); waitpid(r->serve_pid, NULL, 0); }
    if (r->spill_root) rm_rf(r->spill_root);     // ours (locked): --keep would leave it to the next run
    if (r->spill_fd >= 0) close(r->spill_fd);
    if (r->keep) return;
    if (r->cwd) rm_rf(r->cwd);
    if (r->tmp_root) rm_rf(r->tmp_root);
}

// An exit handler takes no argument: the run to clean up when a helper dies
// (exit 2), until release() has done it (main's run is gone by exit time);
// only in this process, not in a child that exits before its exec.
static const run *exiting;
static pid_t exiting_pid;
static void at_exit(void) { if (exiting && getpid() == exiting_pid) cleanup(exiting); }

// Everything the run held, once the agent and replay-serve are gone.
static void release(run *r, char **envp)
{
    if (r->raw) fclose(r->raw);
    cleanup(r);
    client_free(r);
    exiting = NULL;
    if (r->keep) as_warn("kept %s and %s", r->cwd, r->tmp_root);
    for (size_t i = 0; i < r->nresp; i++) free(r->resp[i]);
    free(r->resp);
    as_buf_free(&r->updates_seen); as_buf_free(&r->updates_since);
    for (char **e = envp; e && *e; e++) free(*e);
    free(envp);
    vars_free(&r->vs);
    profile_free(&r->pf);
    as_input_free(&r->in);
    as_json_free(&r->frame);
    as_buf_free(&r->line); as_buf_free(&r->errbuf); as_buf_free(&r->scratch);
    free(r->t_steps);
    free(r->session_id); free(r->script_error); free(r->fail); free(r->serve_log);
    free(r->scen_arg); free(r->input_path); free(r->sessions_root);
    free(r->cwd); free(r->tmp_root); free(r->spill_root);
    if (r->fin >= 0) close(r->fin);
    if (r->fout >= 0) close(r->fout);
    if (r->ferr >= 0) close(r->ferr);
    if (r->pidfd >= 0) close(r->pidfd);
}

static void answer_early(const opts *o);
static void await_turn(int fd);

// One run: scenario directory scen with the options o, as acp-drive runs
// one (in a --serve child too); its exit status.
static int run_scenario(const opts *o, run *r, const char *scen)
{
    exiting = r;
    exiting_pid = getpid();
    atexit(at_exit);
    catch_signals();

    as_table table = {0};
    const as_scenario *row = load_scenario(r, scen, &table);
    make_dirs(r, o->out, o->wp, row);
    set_vars(r, row);
    char *script = r->record ? NULL : prepare_replay(r);
    profile_load(&r->pf, o->profile, r->record, &r->vs);
    check_tier_profile(r);
    set_timeouts(r, o);
    client_select(r);
    make_profile_dirs(r);
    char *rawp = open_raw(r);
    // (a --serve run handed its request ahead waits here for its turn: what
    // follows is taken by one run at a time, or starts a program)
    if (o->go >= 0) await_turn(o->go);
    make_spill_root(r);
    if (!r->record && r->pf.serve) start_serve(r, script);
    else if (o->provider) start_provider(r, o->provider);
    else if (r->pf.serve) start_recording_proxy(r);
    char **envp = agent_env(r, row, o->env, o->nenv);
    r->envp = envp;
    long t0 = as_now_ms();
    int rc = run_prepare(r, row, envp);
    if (row && row->prepareWorkspace) r->t_prepare = as_now_ms() - t0;
    if (rc == AS_OK) rc = run_agent(r, envp, rawp);

    // compared before the release, so that a --serve run that compared the
    // same answers before its scratch directories are removed (answer_early)
    int early = o->compare && rc == AS_OK && compare(r, scen, o->compare == 2) && o->answer >= 0;
    if (early) answer_early(o);
    release(r, envp);
    if (early && o->scratch) rm_rf(r->outdir);   // (nothing in it is wanted: it was the same)
    as_table_free(&table);
    free(script);
    free(rawp);
    return rc;
}

// --serve (acpsnap-replay's replays): each request on stdin, four
// NUL-terminated fields (the --compare mode or empty, OUTDIR, SCENARIO_DIR
// and the file for the run's stderr), is run as acp-drive runs one, in a
// fork of this process: no exec and no loader, which is most of what a new
// acp-drive costs. Up to --jobs runs at once; each answers on stdout, once
// it is over, with one line: its exit status (128 + the signal when one
// ended it), a space and the request's number (0 the first), then " same"
// when it compared the same. Ends at the end of stdin, once the last run is
// over. With --scratch, a run that compared the same removes its OUTDIR
// with the rest of its clean-up.
//
// With a processor left over beside the runs (--jobs 1 on two), the fork is
// made before the request comes: a spare, forked while the run before it
// goes on, waits for its request on a pipe of its own (else the fork is
// made when the request comes, and handed it at once). A request that
// comes while the runs take every place goes to the spare at once: it
// makes the run's directories, its replay script and its stdout file while
// the run before it goes on, then waits for its turn (await_turn) before
// the spill root (one run's at a time) and anything that runs a program of
// the profile's (the prepare hook, the agent). A run that compared the same
// answers as soon as it knows (answer_early), then removes its scratch
// directories while the next one runs (it drains); one that did not answers
// when it is over, its exit status read by waitpid.
typedef struct {
    pid_t pid;
    int fd;     // the run's end: a byte (it compared the same), else EOF when it is over
    int req;    // a spare's request pipe, -1 once the request is sent
    int go;     // its turn: a byte (run), else EOF (exit); -1 once it is a run
    long seq;
} served;

// In a run handed its request ahead of its turn: waits for it. The end of
// the pipe with no byte (the server gone) or a signal ends the run (its
// directories removed at exit).
static void await_turn(int fd)
{
    char go;
    ssize_t got;
    while ((got = read(fd, &go, 1)) < 0 && errno == EINTR && !signal_caught()) {}
    close(fd);
    if (got != 1) exit(signal_caught() ? 128 + signal_caught() : AS_TROUBLE);
}

// In a run: it compared the same, so it is over but for its clean-up.
static void answer_early(const opts *o)
{
    char ok = 0;
    if (write(o->answer, &ok, 1) < 0) {}   // (the server gone: its end is no concern of this run)
    close(o->answer);
    if (nice(10) < 0) {}   // (what is left yields to the next run)
}

// A request's four fields at the front of in, when it holds them all: their
// starts in f, and the bytes they take; 0 when it does not (yet).
static size_t take_request(const as_buf *in, size_t at, char *f[4])
{
    size_t k = 0, i = at;
    for (; k < 4; k++) {
        if (i >= in->n) return 0;   // (nothing read yet: no buffer at all)
        char *z = memchr(in->p + i, '\0', in->n - i);
        if (!z) return 0;
        f[k] = in->p + i;
        i = (size_t)(z - in->p) + 1;
    }
    return i - at;
}

// In a spare, before its request: what a run would fault in page by page
// (its stack, a heap to grow into, the program's data and code) made its
// own now, while the runs before it go on, not on its run's way. (glibc's
// malloc and the GNU linker's symbols; Linux 5.14's MADV_POPULATE_*: a
// kernel without them refuses the madvise, and the run faults as before.)
static void prefault(void)
{
#if defined(__GLIBC__) && defined(MADV_POPULATE_WRITE)
    extern char __executable_start[], etext[], __data_start[], _end[];
    const uintptr_t pg = 4096;
    uintptr_t t0 = (uintptr_t)__executable_start & ~(pg - 1), t1 = ((uintptr_t)etext + pg - 1) & ~(pg - 1);
    uintptr_t d0 = (uintptr_t)__data_start & ~(pg - 1), d1 = ((uintptr_t)_end + pg - 1) & ~(pg - 1);
    madvise((void *)t0, t1 - t0, MADV_POPULATE_READ);
    madvise((void *)d0, d1 - d0, MADV_POPULATE_WRITE);
    volatile char stack[256 << 10];
    for (size_t i = 0; i < sizeof stack; i += pg) stack[i] = 0;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    size_t heap = 2 << 20;
    char *h = malloc(heap);
    if (h) {
        uintptr_t h0 = ((uintptr_t)h + pg - 1) & ~(pg - 1), h1 = ((uintptr_t)h + heap) & ~(pg - 1);
        madvise((void *)h0, h1 - h0, MADV_POPULATE_WRITE);
        free(h);
    }
#endif
}

// In a spare: its request, read whole from fd (the server sends it at once
// and closes its end); exits at an end before a whole request (no run).
static void await_request(int fd, as_buf *in, char *f[4])
{
    char buf[4096];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        as_buf_put(in, buf, (size_t)got);
    }
    close(fd);
    if (!take_request(in, 0, f)) _exit(0);
}

static served spare_fork(opts *o, const run *proto, int ahead)
{
    int done[2], req[2], go[2];
    if (pipe2(done, O_CLOEXEC) || pipe2(req, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) as_die_sys("pipe");
    fflush(stdout);
    // The server's signals held across the fork: the server passes one on
    // to the spare at once (serve_abort), maybe before the spare has run at
    // all, which must not catch it with the server's handler.
    sigset_t ends, was;
    sigemptyset(&ends);
    sigaddset(&ends, SIGTERM); sigaddset(&ends, SIGINT); sigaddset(&ends, SIGHUP);
    sigprocmask(SIG_BLOCK, &ends, &was);
    pid_t pid = fork();
    if (pid < 0) as_die_sys("fork");
    if (pid == 0) {   // (done[1] stays open, unseen by what it starts, until it exits)
        close(done[0]); close(req[1]); close(go[1]);
        signal(SIGTERM, SIG_DFL); signal(SIGINT, SIG_DFL); signal(SIGHUP, SIG_DFL);   // (the server's are not a spare's)
        sigprocmask(SIG_SETMASK, &was, NULL);   // (one that came meanwhile ends it now)
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul < 0) as_die_sys("open /dev/null");
        dup2(nul, 0); dup2(nul, 1);   // (the server's requests and answers are not this run's)
        if (ahead) prefault();
        as_buf in = {0};
        char *f[4];
        await_request(req[0], &in, f);
        int err = open(f[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (err < 0) as_die_sys("open %s", f[3]);
        dup2(err, 2);
        o->compare = *f[0] ? compare_mode(f[0]) : 0;
        o->out = f[1];
        o->answer = done[1];
        o->go = go[0];
        run r = *proto;
        exit(run_scenario(o, &r, f[2]));
    }
    sigprocmask(SIG_SETMASK, &was, NULL);
    close(done[1]); close(req[0]); close(go[0]);
    return (served){ pid, done[0], req[1], go[1], -1 };
}

// Hands the request in f to the spare s, which prepares its run.
static void serve_hand(served *s, char *f[4], long seq)
{
    size_t n = (size_t)(f[3] + strlen(f[3]) + 1 - f[0]);
    for (size_t o = 0; o < n;) {
        ssize_t w = write(s->req, f[0] + o, n - o);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) as_die_sys("hand a request to a run");   // (the spare is gone: died at its start)
        o += (size_t)w;
    }
    close(s->req);
    s->req = -1;
    s->seq = seq;
}

// The spare s, handed its request, runs: its turn.
static void serve_go(served *s)
{
    char go = 0;
    if (write(s->go, &go, 1) < 0) {}   // (one that died preparing: its answer says how)
    close(s->go);
    s->go = -1;
}

static int wait_for(pid_t pid, int flags)
{
    int st = 0;
    pid_t got;
    while ((got = waitpid(pid, &st, flags)) < 0)
        if (errno != EINTR) as_die_sys("wait for a run");
    return got ? st : -1;
}

// The draining runs that are over, reaped (all of them, waiting, when all).
static void reap_drained(pid_t *drain, int *ndrain, int all)
{
    for (int i = *ndrain - 1; i >= 0; i--)
        if (wait_for(drain[i], all ? 0 : WNOHANG) != -1) drain[i] = drain[--*ndrain];
}

// The run s has said it is over: its answer. One that answered early
// drains (its pid in drain, reaped later); else its exit status.
static void serve_answer(const served *s, pid_t *drain, int *ndrain)
{
    char ok;
    ssize_t got;
    while ((got = read(s->fd, &ok, 1)) < 0 && errno == EINTR) {}
    close(s->fd);
    int status = 0;
    if (got == 1) {
        if (*ndrain == SERVE_MAX) reap_drained(drain, ndrain, 1);
        drain[(*ndrain)++] = s->pid;
    } else {
        int st = wait_for(s->pid, 0);
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    printf("%d %ld%s\n", status, s->seq, got == 1 ? " same" : "");
    if (fflush(stdout)) as_die_sys("answer a request");
}

// A signal that ends the server (SIGTERM, SIGINT, SIGHUP) is passed on to
// its runs, which end as an interrupted acp-drive does (their agents
// stopped); once they are over, it ends the server. (One that comes just
// before the server waits is seen when the next run ends.)
static volatile sig_atomic_t serve_sig;
static void on_serve_signal(int sig) { serve_sig = sig; }

_Noreturn static void serve_abort(const served *runs, int nrun, const pid_t *drain, int ndrain)
{
    int sig = serve_sig;
    for (int i = 0; i < nrun; i++) {
        kill(runs[i].pid, SIGTERM);
        if (runs[i].req >= 0) close(runs[i].req);   // (a spare waiting for its request ends at its end too)
    }
    for (int i = 0; i < nrun; i++)
        while (waitpid(runs[i].pid, NULL, 0) < 0 && errno == EINTR) {}
    for (int i = 0; i < ndrain; i++)
        while (waitpid(drain[i], NULL, 0) < 0 && errno == EINTR) {}
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
}

static int serve(opts *o, const run *proto)
{
    long jobs = o->jobs ? o->jobs : 1, seq = 0;
    served runs[SERVE_MAX + 1];   // the runs, then the spare
    pid_t drain[SERVE_MAX];       // runs that answered early, not yet reaped (at most the runs answered since the last reaping)
    struct pollfd pf[SERVE_MAX + 1];
    int nrun = 0, ndrain = 0, eof = 0;
    as_buf in = {0};
    size_t at = 0;
    struct sigaction sa = { .sa_handler = on_serve_signal };   // (no SA_RESTART: poll returns)
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    // A spare ahead of the requests (prefaulted) when a processor is left
    // over for it beside the runs; else each run's fork when it is asked for.
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int ahead = jobs < ncpu;
    served spare = {0};   // (pid 0: no spare)
    if (ahead) spare = spare_fork(o, proto, 1);
    for (;;) {
        char *f[4];
        size_t k;
        if (serve_sig) { if (spare.pid) runs[nrun++] = spare; serve_abort(runs, nrun, drain, ndrain); }
        // a place free: the spare handed a request first, then the requests read
        while (nrun < jobs) {
            if (!spare.pid || spare.req >= 0) {   // (no spare with a request)
                if (!(k = take_request(&in, at, f))) break;
                at += k;
                if (!spare.pid) spare = spare_fork(o, proto, 0);
                serve_hand(&spare, f, seq++);
            }
            serve_go(&spare);
            runs[nrun++] = spare;
            spare.pid = 0;
        }
        // none free: the next request to the spare, which prepares its run
        if (spare.pid && spare.req >= 0 && (k = take_request(&in, at, f))) {
            at += k;
            serve_hand(&spare, f, seq++);
        }
        if (eof && !nrun) break;
        int np = 0, reading = !eof && (nrun < jobs || (spare.pid && spare.req >= 0));
        if (reading) pf[np++] = (struct pollfd){ .fd = 0, .events = POLLIN };
        for (int i = 0; i < nrun; i++) pf[np++] = (struct pollfd){ .fd = runs[i].fd, .events = POLLIN };
        // the next spare once the runs have started (SPARE_DELAY ms), not while they start
        int pr = poll(pf, (nfds_t)np, !ahead || spare.pid || eof ? -1 : SPARE_DELAY);
        if (pr < 0) {
            if (errno == EINTR) continue;
            as_die_sys("poll");
        }
        if (pr == 0) { spare = spare_fork(o, proto, 1); continue; }
        int base = 0;
        if (reading) {
            base = 1;
            if (pf[0].revents) {
                if (at) { memmove(in.p, in.p + at, in.n - at); in.n -= at; at = 0; }
                char buf[65536];
                ssize_t got = read(0, buf, sizeof buf);
                if (got < 0 && errno != EINTR) as_die_sys("read a request");
                if (got == 0) eof = 1;
                if (got > 0) as_buf_put(&in, buf, (size_t)got);
            }
        }
        for (int i = nrun - 1; i >= 0; i--) {
            if (!pf[base + i].revents) continue;
            serve_answer(&runs[i], drain, &ndrain);
            runs[i] = runs[--nrun];
        }
        reap_drained(drain, &ndrain, 0);
    }
    if (spare.pid) {
        close(spare.req);   // (its end of input: the spare exits)
        close(spare.go);
        close(spare.fd);
        wait_for(spare.pid, 0);
    }
    reap_drained(drain, &ndrain, 1);
    if (in.n > at) as_die(AS_TROUBLE, "--serve: a request ends before its four fields");
    as_buf_free(&in);
    return AS_OK;
}

int main(int argc, char **argv)
{
    run r = { .fin = -1, .fout = -1, .ferr = -1, .pidfd = -1, .spill_fd = -1, .watch_id = -1,
              .t_prepare = -1, .t_boot = -1, .t_exit = -1, .t_harvest = -1 };
    opts o = { .timeout = -1, .rpc_timeout = -1, .exit_timeout = -1, .answer = -1, .go = -1 };
    as_setprog(argv[0]);
    options(argc, argv, &o, &r);
    signal(SIGPIPE, SIG_IGN);
    int rc = o.serve ? serve(&o, &r) : run_scenario(&o, &r, argv[optind]);
    free(o.env);
    return rc;
}
