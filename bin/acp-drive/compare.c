// compare.c - --compare stdout|all: the comparison of acpsnap-replay's replay
// mode, done without its helper processes. The run's transcript normalized as
// `scrub --stdout --context run.json` writes it, against the scenario's
// stdout.expected.jsonl; with all, each harvested session log normalized as
// `scrub --session --context run.json` writes it, against the committed
// fixture of the same name normalized as `scrub --session` writes it; byte
// for byte, as cmp(1) compares. The same code (common/norm.c) does the
// normalizing. Then, when all is the same and the scenario's directory has
// a table, the run's checks as `sidecar-dedupe --verify` makes them
// (common/verify.c). The outcome lands
// in OUTDIR/compared: "same" (the same, and the checks pass), "differs"
// (something differs or a check fails), or "unknown" when a reader gave up
// on its input (scrub or sidecar-dedupe then says why).
//
// It runs in acp-drive's own process once the run is released: a new
// process costs more than the comparison of a typical scenario. The readers
// of common/ die on malformed input; here their death is caught
// (as_die_hook), silenced (scrub says why) and read as "unknown".
#include "drive.h"
#include "norm.h"
#include "verify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void parse_object(as_json *j, const char *line, size_t len)
{
    if (as_json_parse(j, line, len) < 0 || j->t[0].type != AS_JOBJ) as_die(AS_TROUBLE, "not a JSON object");
}

// scrub --stdout with the context n.
static void norm_stdout(as_norm *n, const char *path, as_buf *out)
{
    as_in *in = as_in_open(path);
    as_json j = {0};
    const char *line;
    size_t len;
    as_norm_reset_ids(n);
    while (as_in_line(in, &line, &len)) {
        if (!len) as_die(AS_TROUBLE, "an empty line");
        if (as_norm_stdout_line(n, &j, line, len, out)) as_die(AS_TROUBLE, "not a JSON object");
        as_buf_putc(out, '\n');
    }
    as_in_close(in);
    as_json_free(&j);
}

// scrub --session with the context n (the log's header's when n has none).
static void norm_session(const as_norm *n, const char *path, as_buf *out)
{
    as_sess *s = as_sess_open(path);
    as_norm *own = NULL;
    const as_norm *ctx = n;
    as_json j = {0};
    const char *line;
    size_t len;
    as_sess_header(s, &line, &len);
    parse_object(&j, line, len);
    if (!as_norm_has_context(n)) {
        own = as_norm_new();
        as_norm_from_header(own, &j);
        ctx = own;
    }
    as_norm_session_record(ctx, &j, AS_NS_COMPARE | AS_NS_HEADER, out);
    as_buf_putc(out, '\n');
    as_event ev;
    while (as_sess_next(s, &ev)) {
        if (ev.member > 0) continue;   // a packed row is one line: done at its first member
        if (ev.member < 0 && !ev.projected) {
            as_norm_session_record(ctx, ev.j, AS_NS_COMPARE, out);
        } else {
            as_sess_line(s, &line, &len);
            parse_object(&j, line, len);
            as_norm_session_record(ctx, &j, AS_NS_COMPARE, out);
        }
        as_buf_putc(out, '\n');
    }
    as_sess_close(s);
    as_json_free(&j);
    if (own) as_norm_free(own);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The session logs of a directory as acpsnap-replay globs them
// (session.jsonl, session.[1-9]*.jsonl; existing, links followed), sorted.
static size_t session_files(const char *dir, char ***names)
{
    size_t n = 0;
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    as_buf p = {0};
    struct stat st;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, "session.jsonl") && fnmatch("session.[1-9]*.jsonl", e->d_name, 0)) continue;
        as_buf_reset(&p);
        as_buf_printf(&p, "%s/%s", dir, e->d_name);
        if (stat(p.p, &st)) continue;
        *names = as_xrealloc(*names, (n + 1) * sizeof **names);
        (*names)[n++] = as_xstrdup(e->d_name);
    }
    closedir(d);
    as_buf_free(&p);
    if (n) qsort(*names, n, sizeof **names, by_name);
    return n;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

// 1 when every compared pair is the same.
static int same(const run *r, const char *dir, int logs)
{
    as_buf path = {0}, got = {0}, want = {0};
    as_buf_printf(&path, "%s/run.json", r->outdir);
    as_norm *n = as_norm_new();
    as_norm_load_file(n, path.p);
    as_buf_reset(&path);
    as_buf_printf(&path, "%s/stdout.raw.jsonl", r->outdir);
    norm_stdout(n, path.p, &got);
    as_buf_reset(&path);
    as_buf_printf(&path, "%s/stdout.expected.jsonl", dir);
    int ok = !as_read_raw(path.p, &want) && got.n == want.n && !memcmp(got.p ? got.p : "", want.p ? want.p : "", got.n);
    if (ok && logs) {
        char **fix, **har;
        size_t nf = session_files(dir, &fix), nh = session_files(r->outdir, &har);
        as_norm *none = as_norm_new();
        ok = nf == nh;
        for (size_t i = 0; ok && i < nf; i++) {
            ok = !strcmp(fix[i], har[i]);
            if (!ok) break;
            as_buf_reset(&got); as_buf_reset(&want);
            as_buf_reset(&path);
            as_buf_printf(&path, "%s/%s", r->outdir, har[i]);
            norm_session(n, path.p, &got);
            as_buf_reset(&path);
            as_buf_printf(&path, "%s/%s", dir, fix[i]);
            norm_session(none, path.p, &want);
            ok = got.n == want.n && !memcmp(got.p ? got.p : "", want.p ? want.p : "", got.n);
        }
        as_norm_free(none);
        free_names(fix, nf);
        free_names(har, nh);
    }
    as_norm_free(n);
    as_buf_free(&path); as_buf_free(&got); as_buf_free(&want);
    return ok;
}

// The outcome when the comparison runs to its end: "same" also needs the
// run's checks to pass.
static const char *outcome(const run *r, const char *dir, int logs)
{
    if (!same(r, dir, logs)) return "differs";
    char *table = xasprintf("%s/scenarios.jsonl", r->snap_dir);
    int none = access(table, F_OK) < 0 && errno == ENOENT;
    free(table);
    if (none) return "same";   // no table: nothing to check against
    as_problems probs = {0};   // (printed to the silenced stderr, counted)
    long found = as_verify_run(r->outdir, r->snap_dir, r->name, NULL, &probs);
    return probs.count ? "unknown" : found ? "differs" : "same";
}

static jmp_buf gave_up;
static void give_up(int code) { (void)code; longjmp(gave_up, 1); }

int compare(const run *r, const char *dir, int logs)
{
    const char *volatile verdict = "unknown";
    fflush(NULL);
    int err = dup(2), nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (nul >= 0) { dup2(nul, 2); close(nul); }
    void (*hook)(int) = as_die_hook;
    if (!setjmp(gave_up)) {
        as_die_hook = give_up;
        verdict = outcome(r, dir, logs);
    } else {
        as_die_abandoned();   // what the reader held is left behind
    }
    as_die_hook = hook;
    if (err >= 0) { dup2(err, 2); close(err); }
    char *p = xasprintf("%s/compared", r->outdir);
    FILE *f = fopen(p, "w");
    if (!f || fprintf(f, "%s\n", verdict) < 0 || fclose(f)) as_die_sys("write %s", p);
    free(p);
    return !strcmp(verdict, "same");
}
