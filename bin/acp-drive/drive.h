// drive.h - acp-drive's private header: the run, and what each topic offers.
//
//   main.c      options, the table of contents, the end of the run, cleanup
//   profile.c   variables, ${NAME} expansion, the profile (acpsnap-profile(5))
//   scenario.c  the scenario and its table row, directories, the agent's
//               environment, replay preparation and replay-serve
//   drive.c     the agent: spawning, the frame pump, requests and answers
//   client.c    the client side: capabilities, fs/* and terminal/* served
//   steps.c     input.json's steps (acpsnap-scenarios(5)): one table of kinds
//   waits.c     waits on durable boundaries in the persisted logs
//   harvest.c   session logs: reading as they grow, listing, harvest, run.json
//
// One run is driven per process; its state is one `run`, owned by main() and
// passed to whatever needs it.
#ifndef ACP_DRIVE_H
#define ACP_DRIVE_H

#include "acpsnap.h"
#include "table.h"

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

// ---------------------------------------------------------------- profile.c
// Variables: acp-drive's own (exported to the agent) and the profile's env.
typedef struct { char **k, **v; size_t n, cap; } vars;

typedef struct {
    char *path, *dir;               // the file being read (after: the top one)
    char **names; size_t nnames;    // every path and dir set, owned here
    char **chain; size_t nchain;    // the real paths of the files being read (include)
    char **argv; size_t argc;
    char **env; size_t nenv;        // "K=V" after expansion, in file order (mode-filtered)
    long *env_line;
    char **env_file;                // the file of each env line (an included one, or path)
    char **harvest; size_t nharvest;
    int serve;                      // provider = replay-serve
    int spill_tmpdir;               // spill-root = tmpdir
    long timeout, rpc_timeout, exit_timeout;   // -1: not set
    char **prep; size_t nprep;      // prepare = COMMAND (empty: none)
    long prep_timeout;              // prepare-timeout = MS (-1: not set)
    long term_timeout;              // term-timeout = MS (-1: not set, 0: none)
    char **mkdirs; size_t nmkdirs;  // mkdir = NAME, beneath the run root
    unsigned client;                // client = …: CLIENT_* bits
    int client_set;
} profile;

enum { CLIENT_FS_READ = 1, CLIENT_FS_WRITE = 2, CLIENT_TERMINAL = 4 };
// The CLIENT_* bit of a client word (fs-read, fs-write, terminal), 0 if none.
unsigned client_bit(const char *w);

char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *vxasprintf(const char *fmt, va_list ap);
void vars_set(vars *vs, const char *k, const char *v);
void vars_free(vars *vs);
// Expands ${NAME} and ${NAME:-default} from vs, then the environment; dies
// (file:line) on an unknown name without a default. Caller frees.
char *expand(const char *s, const vars *vs, const char *file, long line);
// Reads the profile at path for the mode; dies (exit 2) on any problem.
void profile_load(profile *pf, const char *path, int record, const vars *vs);
void profile_free(profile *pf);

// ---------------------------------------------------------------- the run
typedef struct {
    // the scenario
    char scen_dir[PATH_MAX];        // the real parent, then the name as spelled
    char snap_dir[PATH_MAX];        // the real parent: the table's directory
    const char *name;               // its last path component as spelled
    char *scen_arg;                 // the scenario's path as the user spelled it
    char *input_path;               // … and its input.json
    as_input in;
    profile pf;
    vars vs;
    int record, keep;
    int transcript_only;            // the row says "sessionLog": false: no log is waited on or harvested
    int has_model_turn;             // … and hasModelTurn: it has a provider script
    long timeout, rpc_timeout, exit_timeout;
    long term_timeout;              // after stdin closes, SIGTERM (0: never)
    char outdir[PATH_MAX];
    char *cwd, *sessions_root, *spill_root, *tmp_root;
    int spill_fd;                   // the spill root, locked while we own it
    char cwd_real[PATH_MAX];
    // the agent
    pid_t pid;
    int pidfd;                      // readable when the agent exits (-1: not available)
    int fin, fout, ferr;
    int out_eof, err_eof, exited, status;
    int termed;                     // the stop policy sent SIGTERM
    as_buf line;                    // partial stdout line
    as_json frame;                  // the stdout line last parsed
    as_buf errbuf;                  // stderr collected
    FILE *raw;                      // stdout.raw.jsonl
    long frames;
    // the protocol
    long next_id;
    char **resp; size_t nresp;      // response line per client request id (NULL until answered)
    char *session_id;
    unsigned client;                // CLIENT_* served (the profile's, else input.json's)
    char **envp;                    // the agent's environment (terminals start from it)
    struct term *terms; size_t nterms;
    long next_term;
    long watch_id;                  // a request whose error response fails the run at once (-1: none)
    const char *watch_method;
    size_t answer_next;
    char *script_error;
    // promptAndWaitForAgentMessage
    const char *want_text; int want_seen;
    // waitForSessionUpdate: each sessionUpdate kind seen so far, "\nkind\n"
    // each; the same since the prompt of the last promptAndCancel
    as_buf updates_seen, updates_since;
    // replay-serve
    pid_t serve_pid;
    char *serve_log;
    // phase timings for run.json, ms (-1: the phase did not run)
    long t_prepare, t_boot, t_exit, t_harvest;
    long *t_steps; size_t nt_steps;
    // failure: the first one wins
    char *fail;
    as_buf scratch;
} run;

// ---------------------------------------------------------------- scenario.c
void rm_rf(const char *path);
void write_plain(const char *path, const void *p, size_t n);
const as_scenario *load_scenario(run *r, const char *arg0, as_table *table);
void make_dirs(run *r, const char *out, const char *wp_opt, const as_scenario *row);
void set_vars(run *r, const as_scenario *row);
void make_spill_root(run *r);
void make_profile_dirs(run *r);
char *prepare_replay(run *r);
void check_tier_profile(const run *r);
char **agent_env(run *r, const as_scenario *row, char **extra, size_t nextra);
void start_serve(run *r, const char *script);
void start_provider(run *r, const char *script);
void start_recording_proxy(run *r);
int stop_serve(run *r, as_buf *err);

// ---------------------------------------------------------------- prepare.c
// The profile's prepare hook for a row with prepareWorkspace (acpsnap-profile(5)):
// run in the fresh cwd with the agent's environment. Returns AS_OK, or
// AS_NO (it failed: reported) or AS_TROUBLE (no hook for such a row).
int run_prepare(run *r, const as_scenario *row, char **envp);

// ---------------------------------------------------------------- drive.c
void fail(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void catch_signals(void);           // SIGTERM, SIGINT, SIGHUP fail the run
int signal_caught(void);            // the one caught since, else 0
char *start_agent(run *r, char **envp);   // NULL, or why it could not run
int pump(run *r, int wait_ms);
int agent_gone(const run *r);
long request(run *r, const char *method, const as_buf *params);
void send_line(run *r, const as_buf *b);    // one frame, a newline added
void notify_cancel(run *r);
const char *await_response(run *r, long id, const char *method, long timeout);
int response_error(const char *line, as_buf *msg);
// A condition to wait for: 1 holds, 0 not yet, -1 failed (it called fail).
typedef int (*cond_fn)(run *r, const void *ctx);
int wait_until(run *r, cond_fn cond, const void *ctx, long timeout, const char *late, const char *gone);
// 1 when the kinds noted in b (r->updates_seen or r->updates_since) hold
// this sessionUpdate kind (n bytes).
int update_seen(const as_buf *b, const char *kind, size_t n);
void stop_agent(run *r);
void abort_agent(run *r);
char *describe_status(int st);
// 1 when the agent's end was clean: exit status 0, or our SIGTERM.
int clean_exit(const run *r);

// ---------------------------------------------------------------- client.c
struct term;
// The client capabilities of the run: input.json's "client", else the profile's.
void client_select(run *r);
// initialize's clientCapabilities object for them, into b.
void client_capabilities(const run *r, as_buf *b);
// Serves an agent request (id and method tokens of j) when its method is a
// selected client method: 1 (answered, or deferred), 0 not served.
int client_serve(run *r, const as_json *j, int id, int method);
// Reads the terminals' output, reaps them, answers waits for their exit.
void client_poll(run *r);
// Kills every terminal still running (process groups), reaps them.
void client_end(const run *r);
void client_free(run *r);

// ---------------------------------------------------------------- steps.c
void run_step(run *r, const as_step *sp);

// ---------------------------------------------------------------- waits.c
enum { W_TURNSTART, W_TURNEND, W_CHILD, W_GOAL, W_INBOX, W_TITLE, W_EVENT };
void wait_log(run *r, int what, int64_t minturn, const char *arg, long child, long timeout,
              const char *what_msg);
void wait_file(run *r, const char *rel, long timeout);

// ---------------------------------------------------------------- harvest.c
typedef struct {
    char *path, *rel;               // absolute, relative to the sessions root
    char *id;
    int64_t created;
    int child;                      // header has parentSession
} logfile;
typedef struct { logfile *v; size_t n; } loglist;

void read_growing(const char *path, as_buf *out);
void list_logs(const char *root, const profile *pf, loglist *l, as_buf *scratch);
void loglist_free(loglist *l);
void harvest(run *r);

// compare.c: --compare, once the run has completed (its agent gone, its
// outputs written): writes OUTDIR/compared; 1 when it says same.
int compare(const run *r, const char *dir, int logs);

#endif
