// sidecar-dedupe - extract the request-header sequence of a scenario's raw
// capture into its header pin's sidecars, byte-identical to dsh, once per
// distinct version; or check committed sidecars against the table and the
// raw captures (acpsnap-scenarios(5)).
#include "acpsnap.h"
#include "norm.h"
#include "sidecar.h"
#include "table.h"
#include "verify.h"
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: sidecar-dedupe [-r RAWDIR] DIR [SCENARIO...]\n"
    "       sidecar-dedupe --check [-r RAWDIR] DIR\n"
    "       sidecar-dedupe --prompt|--schemas [--child] [-c CONTEXT] LOG...\n"
    "       sidecar-dedupe --verify RUNDIR DIR SCENARIO\n"
    "Writes each header pin's system-prompt.expected.md and tool-schemas.expected.json\n"
    "(into the scenario its systemPromptSource / toolSchemasSource names) and each\n"
    "declared child sidecar, from the raw capture RAWDIR/<scenario>/session*.jsonl\n"
    "normalized with RAWDIR/<scenario>/run.json. RAWDIR defaults to DIR/../raw.\n"
    "  -k, --check        write nothing; report sidecars that are missing, stray,\n"
    "                     duplicated, or differ from what their claimants generate\n"
    "  -v, --verify RUN   check one run's harvested logs (RUN: acp-drive's output\n"
    "                     directory) for SCENARIO: UNKNOWN_TOOL results, the count\n"
    "                     of changed headers, each header against its class pin\n"
    "  -r, --raw DIR      directory of raw captures, one subdirectory per scenario\n"
    "  -p, --prompt       print the prompt sidecar of LOG (a raw session log)\n"
    "  -s, --schemas      print the tool-schema sidecar of LOG\n"
    "      --child        child form: the initial prompt only\n"
    "  -c, --context F    run.json or normalizeContext for --prompt/--schemas\n"
    "                     (default: the log header's id and cwd)\n"
    "  -h, --help         this text\n"
    "  -V, --version      version\n";

static as_problems probs;

// Appends s re-indented to depth (its newlines are all structural).
static void put_indented(as_buf *out, const as_buf *s, int depth)
{
    const char *p = s->p ? s->p : "", *e = p + s->n, *nl;
    while ((nl = memchr(p, '\n', (size_t)(e - p)))) {
        as_buf_put(out, p, (size_t)(nl - p + 1));
        for (int i = 0; i < depth; i++) as_buf_put(out, "  ", 2);
        p = nl + 1;
    }
    as_buf_put(out, p, (size_t)(e - p));
}

// dsh's formatSystemPromptSnapshot (initial only when child).
static void format_prompt(const as_hseq *q, int child, as_buf *out)
{
    as_prompt_sidecar_begin(out, q->prompts[0].p ? q->prompts[0].p : "", q->prompts[0].n);
    for (size_t k = 1; !child && k < q->np; k++)
        as_prompt_sidecar_change(out, (int)k, q->prompts[k].p ? q->prompts[k].p : "", q->prompts[k].n);
    as_utf8_text(out);
}

// dsh's formatToolSchemasSnapshot(initial, changes).
static void format_schemas(const as_hseq *q, as_buf *out)
{
    as_buf_puts(out, "{\n  \"initial\": ");
    put_indented(out, &q->sets[0], 1);
    as_buf_puts(out, ",\n  \"changes\": ");
    if (q->ns < 2) as_buf_puts(out, "[]");
    else {
        as_buf_puts(out, "[");
        for (size_t k = 1; k < q->ns; k++) {
            as_buf_puts(out, k > 1 ? ",\n    " : "\n    ");
            put_indented(out, &q->sets[k], 2);
        }
        as_buf_puts(out, "\n  ]");
    }
    as_buf_puts(out, "\n}\n");
}

// ------------------------------------------------------------- the table run

typedef struct {
    as_buf text;
    int claimant;      // first row that generated it, -1 none
    int diverged;
} claim;

typedef struct {
    const char *dir, *raw;
    int checking;
    as_table t;
    as_pinrole *roles;
    claim *prompt, *schemas;   // per owner row
} run;

static void claim_put(run *r, claim *c, int owner, int claimant, const as_buf *text, const char *file)
{
    if (c->claimant < 0) {
        c->claimant = claimant;
        as_buf_put(&c->text, text->p, text->n);
        return;
    }
    if (c->diverged || (c->text.n == text->n && !memcmp(c->text.p, text->p, text->n))) return;
    c->diverged = 1;
    char *f = as_path_join3(r->dir, r->t.v[owner].name, file);
    as_problem(&probs, f, 0, "pins %s and %s generate different bytes for this shared sidecar; give one of them its own source",
               r->t.v[c->claimant].name, r->t.v[claimant].name);
    free(f);
}

// 1 when path is a regular file holding exactly text.
static int holds(const char *path, const as_buf *text)
{
    as_buf old = {0};
    if (!as_is_file(path)) return 0;
    as_read_file(path, &old);
    int same = old.n == text->n && !memcmp(old.p, text->p, text->n);
    as_buf_free(&old);
    return same;
}

// Writes text to path unless it already holds exactly those bytes.
static void write_if_changed(const char *path, const as_buf *text)
{
    if (holds(path, text)) return;
    as_out *o = as_out_atomic(path, 0);
    as_out_write(o, text->p, text->n);
    as_out_commit(o);
}

// Compares text with the committed file; reports a difference (check mode).
static void compare_committed(const char *path, const as_buf *text, const char *who, const char *rawdir)
{
    if (!as_is_file(path)) return;   // presence is reported by the ownership pass
    if (!holds(path, text))
        as_problem(&probs, path, 0, "differs from what %s generates from its raw capture %s; regenerate it with sidecar-dedupe", who, rawdir);
}

// A pin's generated sidecar for its source `owner`: compared with the
// committed file in check mode (every claimant), claimed for writing otherwise.
static void pin_claim(run *r, int owner, size_t pin, const as_buf *text, int schemas, const char *rawdir)
{
    const char *file = schemas ? AS_SCHEMAS_SIDECAR : AS_PROMPT_SIDECAR;
    if (r->checking) {
        char *f = as_path_join3(r->dir, r->t.v[owner].name, file);
        compare_committed(f, text, r->t.v[pin].name, rawdir);
        free(f);
    } else {
        claim_put(r, schemas ? &r->schemas[owner] : &r->prompt[owner], owner, (int)pin, text, file);
    }
}

// Row i, a header pin: its primary capture's header sequence, claimed for
// the rows its sidecars come from.
static void pin_sidecars(run *r, size_t i, const char *primary, const as_norm *n, const char *rawdir)
{
    as_hseq q = {0};
    as_buf text = {0};
    as_hseq_extract(primary, n, &q);
    if (q.np == 0) {
        as_problem(&probs, primary, 0, "no request header with a string system prompt; a pin's capture needs one");
    } else if (q.ns != q.np) {
        as_problem(&probs, primary, 0, "%zu request headers carry a system prompt but %zu carry tool schemas; a pin's sequences must match", q.np, q.ns);
    } else {
        if (r->roles[i].prompt_src >= 0) {
            format_prompt(&q, 0, &text);
            pin_claim(r, r->roles[i].prompt_src, i, &text, 0, rawdir);
        }
        if (r->roles[i].schema_src >= 0) {
            as_buf_reset(&text);
            format_schemas(&q, &text);
            pin_claim(r, r->roles[i].schema_src, i, &text, 1, rawdir);
        }
    }
    as_buf_free(&text);
    as_hseq_free(&q);
}

// The sidecar of pinned child c (schemas when w, else prompt) of row sc,
// from the child's raw log: written, or compared in check mode.
static void child_sidecar(run *r, const as_scenario *sc, int w, int c, const as_norm *n, const char *rawdir)
{
    char f[64];
    snprintf(f, sizeof f, "session.%d.jsonl", c);
    char *log = as_path_join(rawdir, f);
    snprintf(f, sizeof f, w ? AS_CHILD_SCHEMAS_SIDECAR : AS_CHILD_PROMPT_SIDECAR, c);
    char *out = as_path_join3(r->dir, sc->name, f);
    as_hseq q = {0};
    as_buf text = {0};
    if (!as_is_file(log)) {
        as_problem(&probs, rawdir, 0, "no child log session.%d.jsonl in the raw capture, but %s declares child %d",
                   c, w ? "pinsChildToolSchemas" : "pinsChildSystemPrompts", c);
    } else {
        as_hseq_extract(log, n, &q);
        if (w ? q.ns == 0 : q.np == 0) {
            as_problem(&probs, log, 0, "no request header with %s; a pinned child's capture needs one", w ? "tool schemas" : "a system prompt");
        } else {
            if (w) format_schemas(&q, &text); else format_prompt(&q, 1, &text);
            if (r->checking) compare_committed(out, &text, sc->name, rawdir);
            else write_if_changed(out, &text);
        }
    }
    as_buf_free(&text);
    as_hseq_free(&q);
    free(log);
    free(out);
}

// One scenario with a raw capture: its pin claims and child sidecars.
static void do_scenario(run *r, size_t i, int named)
{
    const as_scenario *sc = &r->t.v[i];
    int pin = r->roles[i].pin == (int)i;
    if (!pin && !sc->nchildPrompts && !sc->nchildSchemas) {
        if (named) as_problem(&probs, r->t.path, sc->line, "%s: neither a header pin nor a scenario with child pins; it has no sidecars", sc->name);
        return;
    }
    char *rawdir = as_path_join(r->raw, sc->name), *primary = as_path_join(rawdir, "session.jsonl");
    if (!as_is_file(primary)) {
        if (named) as_problem(&probs, rawdir, 0, "no raw capture (session.jsonl) for %s; run the scenario first", sc->name);
    } else {
        as_norm *n = as_norm_new();
        as_hseq_context(n, rawdir, primary);
        if (pin) pin_sidecars(r, i, primary, n, rawdir);
        for (size_t k = 0; k < sc->nchildPrompts; k++) child_sidecar(r, sc, 0, sc->childPrompts[k], n, rawdir);
        for (size_t k = 0; k < sc->nchildSchemas; k++) child_sidecar(r, sc, 1, sc->childSchemas[k], n, rawdir);
        as_norm_free(n);
    }
    free(rawdir);
    free(primary);
}

static int owns(const run *r, size_t i, int w) { return w ? r->roles[i].owns_schemas : r->roles[i].owns_prompt; }

// Check mode, sidecar file of row i: an earlier owner's committed copy of it
// (text a) is reported.
static void same_as_earlier(const run *r, size_t i, const char *file, const char *p, const as_buf *a, int w)
{
    as_buf b = {0};
    for (size_t k = 0; k < i; k++) {
        if (!owns(r, k, w)) continue;
        char *kp = as_path_join3(r->dir, r->t.v[k].name, file);
        if (as_is_file(kp)) {
            as_buf_reset(&b);
            as_read_file(kp, &b);
            if (a->n == b.n && !memcmp(a->p, b.p, a->n))
                as_problem(&probs, p, 0, "identical to %s; commit it once and point the claimants' %s at %s",
                           kp, w ? "toolSchemasSource" : "systemPromptSource", r->t.v[k].name);
        }
        free(kp);
    }
    as_buf_free(&b);
}

// Check mode: sidecars present exactly at owners, each distinct version once.
static void check_ownership(const run *r)
{
    as_buf a = {0};
    for (int w = 0; w < 2; w++) {
        const char *file = w ? AS_SCHEMAS_SIDECAR : AS_PROMPT_SIDECAR;
        for (size_t i = 0; i < r->t.n; i++) {
            const char *name = r->t.v[i].name;
            char *sdir = as_path_join(r->dir, name), *p = as_path_join(sdir, file);
            int has = as_is_file(p);
            if (owns(r, i, w) && !has && as_is_dir(sdir))
                as_problem(&probs, p, 0, "missing, but %s owns this sidecar of a header pin; write it with sidecar-dedupe", name);
            else if (!owns(r, i, w) && has)
                as_problem(&probs, p, 0, "stray sidecar: no header pin takes its %s from %s; delete it or name %s as a source",
                           w ? "tool schemas" : "system prompt", name, name);
            if (owns(r, i, w) && has) {
                as_buf_reset(&a);
                as_read_file(p, &a);
                same_as_earlier(r, i, file, p, &a, w);
            }
            free(sdir);
            free(p);
        }
    }
    as_buf_free(&a);
}

// Writes each claimed sidecar version once, at its owner.
static void write_claims(run *r)
{
    for (size_t i = 0; i < r->t.n; i++)
        for (int w = 0; w < 2; w++) {
            claim *c = w ? &r->schemas[i] : &r->prompt[i];
            if (c->claimant < 0 || c->diverged) continue;
            char *sdir = as_path_join(r->dir, r->t.v[i].name), *p = as_path_join(sdir, w ? AS_SCHEMAS_SIDECAR : AS_PROMPT_SIDECAR);
            if (as_is_dir(sdir)) write_if_changed(p, &c->text);
            else as_problem(&probs, sdir, 0, "missing scenario directory; cannot write its sidecar");
            free(sdir);
            free(p);
        }
}

// Reads the table of r->dir, resolves its pins and sets up the claims.
static void run_open(run *r, const char *tpath)
{
    if (access(tpath, R_OK) < 0) as_die_sys("read the scenario table %s", tpath);
    as_table_load(tpath, &r->t, as_problem_report, &probs);
    r->roles = as_xmalloc((r->t.n + 1) * sizeof *r->roles);
    r->prompt = calloc(r->t.n + 1, sizeof *r->prompt);
    r->schemas = calloc(r->t.n + 1, sizeof *r->schemas);
    if (!r->prompt || !r->schemas) as_die(AS_TROUBLE, "out of memory");
    for (size_t i = 0; i < r->t.n; i++) r->prompt[i].claimant = r->schemas[i].claimant = -1;
    as_table_pins(&r->t, r->roles, as_problem_report, &probs);
}

static void run_free(run *r)
{
    for (size_t i = 0; i < r->t.n; i++) { as_buf_free(&r->prompt[i].text); as_buf_free(&r->schemas[i].text); }
    free(r->prompt);
    free(r->schemas);
    free(r->roles);
    as_table_free(&r->t);
}

static int table_run(const char *dirarg, const char *rawarg, int checking, char **names, int nnames)
{
    char *dir = as_dir_arg(dirarg);
    char *raw = rawarg ? as_xstrdup(rawarg) : as_path_join(dir, "../raw");
    char *tpath = as_path_join(dir, "scenarios.jsonl");
    run r = {.dir = dir, .raw = raw, .checking = checking};
    run_open(&r, tpath);
    for (int k = 0; k < nnames; k++)
        if (!as_table_find(&r.t, names[k])) as_problem(&probs, tpath, 0, "no scenario named \"%s\"", names[k]);
    if (checking) check_ownership(&r);
    for (size_t i = 0; i < r.t.n; i++) {
        int named = 0, want = nnames == 0;
        for (int k = 0; k < nnames; k++) if (!strcmp(names[k], r.t.v[i].name)) named = want = 1;
        if (want) do_scenario(&r, i, named);
    }
    if (!checking) write_claims(&r);   // in check mode each claimant compared in do_scenario
    run_free(&r);
    free(tpath);
    free(raw);
    free(dir);
    return probs.count ? AS_NO : AS_OK;
}

// ------------------------------------------------------------- single logs

static int print_one(const char *log, const char *ctxfile, int schemas, int child)
{
    as_norm *n = as_norm_new();
    if (ctxfile) as_norm_load_file(n, ctxfile);
    else as_hseq_context(n, NULL, log);
    as_hseq q = {0};
    as_hseq_extract(log, n, &q);
    as_buf text = {0};
    int rc = AS_OK;
    if (schemas ? q.ns == 0 : q.np == 0) {
        as_warn_at(log, 0, 0, "no request header with %s", schemas ? "tool schemas" : "a system prompt");
        rc = AS_NO;
    } else {
        if (schemas) format_schemas(&q, &text); else format_prompt(&q, child, &text);
        as_out *o = as_out_stdout(0);
        as_out_write(o, text.p, text.n);
        as_out_close(o);
    }
    as_buf_free(&text);
    as_hseq_free(&q);
    as_norm_free(n);
    return rc;
}

int main(int argc, char **argv)
{
    enum { OPT_CHILD = 256 };
    static const struct option opts[] = {
        {"check", no_argument, 0, 'k'}, {"raw", required_argument, 0, 'r'},
        {"prompt", no_argument, 0, 'p'}, {"schemas", no_argument, 0, 's'},
        {"child", no_argument, 0, OPT_CHILD}, {"context", required_argument, 0, 'c'},
        {"verify", required_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    int checking = 0, prompt = 0, schemas = 0, child = 0, c;
    const char *raw = NULL, *ctxfile = NULL, *verify = NULL;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "kr:psc:v:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'k': checking = 1; break;
        case 'r': raw = optarg; break;
        case 'p': prompt = 1; break;
        case 's': schemas = 1; break;
        case OPT_CHILD: child = 1; break;
        case 'c': ctxfile = optarg; break;
        case 'v': verify = optarg; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (verify) {
        if (prompt || schemas || checking || raw || child || ctxfile || argc - optind != 2) as_usage_exit(USAGE, AS_TROUBLE);
        long found = as_verify_run(verify, argv[optind], argv[optind + 1], stdout, &probs);
        if (fflush(stdout) || ferror(stdout)) as_die_sys("write stdout");
        return probs.count ? AS_TROUBLE : found ? AS_NO : AS_OK;
    }
    if (prompt || schemas) {
        if ((prompt && schemas) || checking || raw || optind >= argc) as_usage_exit(USAGE, AS_TROUBLE);
        int worst = AS_OK;
        for (int i = optind; i < argc; i++) {
            int rc = print_one(argv[i], ctxfile, schemas, child);
            if (rc > worst) worst = rc;
        }
        return worst;
    }
    if (child || ctxfile || optind >= argc || (checking && argc - optind != 1)) as_usage_exit(USAGE, AS_TROUBLE);
    return table_run(argv[optind], raw, checking, argv + optind + 1, argc - optind - 1);
}
