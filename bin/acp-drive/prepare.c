// prepare.c - the profile's preparation hook (acpsnap-profile(5)): a command
// run in the fresh cwd, after workspace/ is copied and before the agent
// starts, for a row with prepareWorkspace (acpsnap-scenarios(5)).
#include "drive.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// envp plus ACPSNAP_SNAPSHOTS (the table's directory). Caller frees the array,
// not the strings it shares with envp, except the last one added.
static char **hook_env(const run *r, char **envp, char **added)
{
    size_t n = 0;
    while (envp[n]) n++;
    char **e = as_xmalloc((n + 2) * sizeof *e);
    memcpy(e, envp, n * sizeof *e);
    char *snap = xasprintf("%s/..", r->scen_dir), rp[PATH_MAX];
    *added = xasprintf("ACPSNAP_SNAPSHOTS=%s", realpath(snap, rp) ? rp : snap);
    free(snap);
    e[n] = *added;
    e[n + 1] = NULL;
    return e;
}

// Runs argv in cwd (its own process group, stdin /dev/null, stdout and
// stderr into errp); its wait status, or -1 when it outlived timeout ms
// (then its group was killed).
static int spawn_wait(char **argv, const char *cwd, char **envp, const char *errp, long timeout, pid_t *pid)
{
    *pid = fork();
    if (*pid < 0) as_die_sys("fork");
    if (*pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDONLY), out = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || chdir(cwd)) _exit(126);
        dup2(in, 0); dup2(out, 1); dup2(out, 2);
        signal(SIGPIPE, SIG_DFL);
        execvpe(argv[0], argv, envp);
        dprintf(2, "unable to run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(*pid, *pid);
    long deadline = as_now_ms() + timeout;
    for (int st;;) {
        pid_t w = waitpid(*pid, &st, WNOHANG);
        if (w == *pid) return st;
        if (w < 0 && errno != EINTR) as_die_sys("wait for the prepare hook");
        if (as_now_ms() >= deadline) {
            kill(-*pid, SIGKILL);
            waitpid(*pid, NULL, 0);
            return -1;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
}

// Its output, indented under the failure line.
static void show_output(const char *errp)
{
    as_buf b = {0};
    as_read_file(errp, &b);
    if (!b.n) { as_buf_free(&b); return; }
    fprintf(stderr, "%s: prepare hook output:\n", as_prog);
    fwrite(b.p, 1, b.n, stderr);
    if (b.p[b.n - 1] != '\n') fputc('\n', stderr);
    as_buf_free(&b);
}

int run_prepare(run *r, const as_scenario *row, char **envp)
{
    if (!row || !row->prepareWorkspace) return AS_OK;
    if (!r->pf.nprep) {
        as_warn("%s: the row sets prepareWorkspace, but the profile %s has no prepare hook", r->name, r->pf.path);
        return AS_TROUBLE;
    }
    long timeout = r->pf.prep_timeout > 0 ? r->pf.prep_timeout : 10000;
    char *added, **e = hook_env(r, envp, &added);
    char *errp = xasprintf("%s/prepare.out", r->tmp_root);
    pid_t pid;
    int st = spawn_wait(r->pf.prep, r->cwd, e, errp, timeout, &pid), rc = AS_OK;
    if (st == -1) {
        as_warn("%s: the prepare hook %s did not finish within %ld ms (killed)", r->name, r->pf.prep[0], timeout);
        rc = AS_NO;
    } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        char *d = describe_status(st);
        as_warn("%s: the prepare hook %s failed: %s", r->name, r->pf.prep[0], d);
        free(d);
        rc = AS_NO;
    }
    if (rc) show_output(errp);
    unlink(errp);
    free(errp); free(added); free(e);
    return rc;
}
