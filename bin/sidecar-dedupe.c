// sidecar-dedupe - extract the request-header sequence of a scenario's raw
// capture into its header pin's sidecars, byte-identical to dsh, once per
// distinct version; or check committed sidecars against the table and the
// raw captures (acpsnap-scenarios(5)).
#include "acpsnap.h"
#include "norm.h"
#include "sidecar.h"
#include "table.h"
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

// -------------------------------------------------------------- extraction

// The normalized header sequence of one log: prompt strings and schema sets
// (each printed at depth 0, re-indented when placed).
typedef struct {
    as_buf *prompts; size_t np;
    as_buf *sets; size_t ns;
    // for --verify: each header's line and seq (-1: none), the changed
    // headers, and the lines of tool results that report UNKNOWN_TOOL
    long *hline, *hseq; size_t nh;
    as_buf *rest;                   // each header's other members, scrubbed
    long changes;
    long *unknown; size_t nunknown;
} seq;

static void seq_free(seq *q)
{
    for (size_t i = 0; i < q->np; i++) as_buf_free(&q->prompts[i]);
    for (size_t i = 0; i < q->ns; i++) as_buf_free(&q->sets[i]);
    free(q->prompts);
    free(q->sets);
    for (size_t i = 0; i < q->nh; i++) as_buf_free(&q->rest[i]);
    free(q->hline); free(q->hseq); free(q->unknown); free(q->rest);
    memset(q, 0, sizeof *q);
}

static void scrub_cb(void *ctx, const char *s, size_t len, int is_path, as_buf *out)
{
    as_norm_str(ctx, s, len, is_path, out);
}

// A tool/result line whose data.error.code is UNKNOWN_TOOL: its line number.
// (A line that does not parse is left to the header pass and the guard.)
static void unknown_tool(seq *q, as_json *j, const char *line, size_t len, long ln)
{
    if (as_json_parse(j, line, len) < 0 || j->t[0].type != AS_JOBJ) return;
    int ty = as_json_get(j, 0, "type"), d = as_json_get(j, 0, "data");
    if (ty < 0 || !as_json_streq(j, ty, "tool/result") || d < 0 || j->t[d].type != AS_JOBJ) return;
    int e = as_json_get(j, d, "error");
    int c = e >= 0 && j->t[e].type == AS_JOBJ ? as_json_get(j, e, "code") : -1;
    if (c < 0 || !as_json_streq(j, c, "UNKNOWN_TOOL")) return;
    q->unknown = as_xrealloc(q->unknown, (q->nunknown + 1) * sizeof *q->unknown);
    q->unknown[q->nunknown++] = ln;
}

// A request header's line, seq and reason (data is its data object), and
// its members but system and tools, each "key": value, scrubbed.
static void header_place(seq *q, const as_json *j, int data, int h, const as_norm *n, long ln)
{
    q->rest = as_xrealloc(q->rest, (q->nh + 1) * sizeof *q->rest);
    as_buf *b = &q->rest[q->nh];
    memset(b, 0, sizeof *b);
    as_buf_puts(b, "");
    for (int k = as_json_firstkey(j, h); k >= 0; k = as_json_nextkey(j, k)) {
        if (as_json_streq(j, k, "system") || as_json_streq(j, k, "tools")) continue;
        as_buf_put(b, as_tok_p(j, k), as_tok_len(j, k));
        as_buf_puts(b, ": ");
        as_pretty(j, k + 1, 0, scrub_cb, (void *)n, b);
        as_buf_putc(b, '\n');
    }
    int sq = as_json_get(j, 0, "seq"), why = as_json_get(j, data, "reason");
    int64_t v = -1;
    if (sq < 0 || !as_json_int(j, sq, &v)) v = -1;
    q->hline = as_xrealloc(q->hline, (q->nh + 1) * sizeof *q->hline);
    q->hseq = as_xrealloc(q->hseq, (q->nh + 1) * sizeof *q->hseq);
    q->hline[q->nh] = ln;
    q->hseq[q->nh++] = (long)v;
    if (why >= 0 && as_json_streq(j, why, "change")) q->changes++;
}

// Reads log and collects its request headers' system prompts and tool sets,
// scrubbed with n as dsh's normalizeSessionLog does.
static void extract(const char *log, const as_norm *n, seq *q)
{
    as_in *in = as_in_open(log);
    as_json j = {0};
    const char *line;
    size_t len;
    while (as_in_line(in, &line, &len)) {
        if (as_in_lineno(in) == 1) continue;
        if (memmem(line, len, "UNKNOWN_TOOL", 12)) unknown_tool(q, &j, line, len, as_in_lineno(in));
        if (!memmem(line, len, "\"request/header\"", 16)) continue;
        if (as_json_parse(&j, line, len) < 0) as_json_die(&j, log, as_in_lineno(in));
        if (j.t[0].type != AS_JOBJ) continue;
        int ty = as_json_get(&j, 0, "type"), d = as_json_get(&j, 0, "data");
        if (ty < 0 || !as_json_streq(&j, ty, "request/header") || d < 0 || j.t[d].type != AS_JOBJ) continue;
        int h = as_json_get(&j, d, "header");
        if (h < 0 || j.t[h].type != AS_JOBJ) continue;
        header_place(q, &j, d, h, n, as_in_lineno(in));
        int sys = as_json_get(&j, h, "system"), tools = as_json_get(&j, h, "tools");
        if (sys >= 0 && j.t[sys].type == AS_JSTR) {
            as_buf raw = {0};
            q->prompts = as_xrealloc(q->prompts, (q->np + 1) * sizeof *q->prompts);
            memset(&q->prompts[q->np], 0, sizeof *q->prompts);
            as_json_str(&j, sys, &raw);
            as_norm_str(n, raw.p ? raw.p : "", raw.n, 0, &q->prompts[q->np++]);
            as_buf_free(&raw);
        }
        if (tools >= 0 && j.t[tools].type == AS_JARR) {
            q->sets = as_xrealloc(q->sets, (q->ns + 1) * sizeof *q->sets);
            memset(&q->sets[q->ns], 0, sizeof *q->sets);
            as_pretty(&j, tools, 0, scrub_cb, (void *)n, &q->sets[q->ns++]);
        }
    }
    as_json_free(&j);
    as_in_close(in);
}

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

// A prompt is written as UTF-8 text: a lone surrogate (3-byte WTF-8 from a
// \udxxx escape) becomes U+FFFD, as Node's utf8 writeFile does.
static void utf8_text(as_buf *b)
{
    for (size_t i = 0; i + 2 < b->n; i++)
        if ((unsigned char)b->p[i] == 0xed && (unsigned char)b->p[i + 1] >= 0xa0) {
            b->p[i] = (char)0xef; b->p[i + 1] = (char)0xbf; b->p[i + 2] = (char)0xbd;
            i += 2;
        }
}

// dsh's formatSystemPromptSnapshot (initial only when child).
static void format_prompt(const seq *q, int child, as_buf *out)
{
    as_prompt_sidecar_begin(out, q->prompts[0].p ? q->prompts[0].p : "", q->prompts[0].n);
    for (size_t k = 1; !child && k < q->np; k++)
        as_prompt_sidecar_change(out, (int)k, q->prompts[k].p ? q->prompts[k].p : "", q->prompts[k].n);
    utf8_text(out);
}

// dsh's formatToolSchemasSnapshot(initial, changes).
static void format_schemas(const seq *q, as_buf *out)
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

// The context of a capture: its run.json, else the logs' own headers.
static void load_context(as_norm *n, const char *rawdir, const char *primary)
{
    char *rj = rawdir ? as_path_join(rawdir, "run.json") : NULL;
    if (rj && as_is_file(rj)) {
        as_norm_load_file(n, rj);
    } else {
        as_in *in = as_in_open(primary);
        const char *line;
        size_t len;
        as_json j = {0};
        if (as_in_line(in, &line, &len) && as_json_parse(&j, line, len) == 0) as_norm_from_header(n, &j);
        as_json_free(&j);
        as_in_close(in);
    }
    free(rj);
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
    seq q = {0};
    as_buf text = {0};
    extract(primary, n, &q);
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
    seq_free(&q);
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
    seq q = {0};
    as_buf text = {0};
    if (!as_is_file(log)) {
        as_problem(&probs, rawdir, 0, "no child log session.%d.jsonl in the raw capture, but %s declares child %d",
                   c, w ? "pinsChildToolSchemas" : "pinsChildSystemPrompts", c);
    } else {
        extract(log, n, &q);
        if (w ? q.ns == 0 : q.np == 0) {
            as_problem(&probs, log, 0, "no request header with %s; a pinned child's capture needs one", w ? "tool schemas" : "a system prompt");
        } else {
            if (w) format_schemas(&q, &text); else format_prompt(&q, 1, &text);
            if (r->checking) compare_committed(out, &text, sc->name, rawdir);
            else write_if_changed(out, &text);
        }
    }
    as_buf_free(&text);
    seq_free(&q);
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
        load_context(n, rawdir, primary);
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

// ------------------------------------------------------------- one run (--verify)
// acpsnap-replay's checks of one replay run (acpsnap-replay(1), CHECKS), as
// dsh's harness makes them on every run: no tool result reports
// UNKNOWN_TOOL; each log carries as many changed request headers as its row
// expects; every header's system prompt and tool schemas are those of its
// class pin's sidecars. Findings go to stdout, "LOG:LINE: message".

typedef struct {
    const char *dir;            // the snapshots directory
    as_buf prompt, schemas;     // the sidecar texts (empty: not checked)
    char *prompt_name, *schemas_name;   // as named in messages: <scenario>/<file>
    as_json sj;                 // schemas parsed
    seq pinq;                   // the class pin's fixture headers (pinq_name: none)
    char *pinq_name;
    long found;
} verifier;

// Loads the sidecar dir/<owner>/<file> into text and name (nothing when absent).
static void load_sidecar(verifier *v, const char *owner, const char *file, as_buf *text, char **name)
{
    char *p = as_path_join3(v->dir, owner, file);
    as_buf_reset(text);
    free(*name);
    *name = NULL;
    if (as_is_file(p)) { as_read_file(p, text); *name = as_path_join(owner, file); }
    free(p);
}

// Token of schema set k in the loaded sidecar, or -1.
static int schema_set(verifier *v, size_t k)
{
    if (!v->schemas_name) return -1;
    as_json *j = &v->sj;
    if (j->t[0].type != AS_JOBJ) return -1;
    if (k == 0) return as_json_get(j, 0, "initial");
    int ch = as_json_get(j, 0, "changes"), n = 1;
    if (ch < 0 || j->t[ch].type != AS_JARR) return -1;
    for (int e = as_json_first(j, ch); e >= 0; e = as_json_nextel(j, e), n++)
        if ((size_t)n == k) return e;
    return -1;
}

// Section k of a prompt sidecar (0: the initial prompt) → *off, *n; 0 when
// it has no such section.
static int prompt_section(const as_buf *t, size_t k, size_t *off, size_t *n)
{
    static const char MARK[] = "\n<!-- request/header change ";
    const char *s = t->p ? t->p : "", *e = s + t->n;
    if (k == 0) { *off = 0; *n = as_prompt_sidecar_initial(s, t->n); return 1; }
    char m[64];
    snprintf(m, sizeof m, "%s%zu -->\n\n", MARK, k);
    const char *p = memmem(s, t->n, m, strlen(m));
    if (!p) return 0;
    p += strlen(m);
    const char *q = memmem(p, (size_t)(e - p), MARK, sizeof MARK - 1);
    *off = (size_t)(p - s);
    *n = (size_t)((q ? q : e) - p);
    return 1;
}

static void finding(verifier *v, const char *log, long line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void finding(verifier *v, const char *log, long line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (line > 0) printf("%s:%ld: ", log, line); else printf("%s: ", log);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    v->found++;
}

// The class pin's primary fixture, its headers read with its own context
// (the fields the sidecars leave tokenized: config, model and the rest).
static void load_pin_fixture(verifier *v, const char *pin)
{
    char *f = as_path_join3(v->dir, pin, "session.jsonl");
    if (as_is_file(f)) {
        as_norm *n = as_norm_new();
        load_context(n, NULL, f);
        extract(f, n, &v->pinq);
        as_norm_free(n);
        v->pinq_name = as_path_join(pin, "session.jsonl");
    }
    free(f);
}

// Header k of log (its prompt, set and other members) against pin section sec.
static void check_header(verifier *v, const char *log, const seq *q, size_t k, size_t sec)
{
    char where[64];
    if (q->hseq[k] >= 0) snprintf(where, sizeof where, "request/header seq %ld", q->hseq[k]);
    else snprintf(where, sizeof where, "line %ld", q->hline[k]);
    if (v->pinq_name && (sec >= v->pinq.nh || v->pinq.rest[sec].n != q->rest[k].n ||
                         memcmp(v->pinq.rest[sec].p, q->rest[k].p, q->rest[k].n)))
        finding(v, log, q->hline[k], "header %zu (%s) differs from its pin %s", k + 1, where, v->pinq_name);
    if (v->prompt_name) {
        size_t off, n;
        as_buf t = {0};
        as_prompt_sidecar_begin(&t, q->prompts[k].p ? q->prompts[k].p : "", q->prompts[k].n);
        utf8_text(&t);
        if (!prompt_section(&v->prompt, sec, &off, &n) || n != t.n || memcmp(v->prompt.p + off, t.p, n))
            finding(v, log, q->hline[k], "header %zu (%s) differs from its pin %s", k + 1, where, v->prompt_name);
        as_buf_free(&t);
    }
    int tok = schema_set(v, sec);
    if (v->schemas_name) {
        as_buf t = {0};
        if (tok >= 0) as_pretty(&v->sj, tok, 0, NULL, NULL, &t);
        if (tok < 0 || t.n != q->sets[k].n || memcmp(t.p, q->sets[k].p, t.n))
            finding(v, log, q->hline[k], "header %zu (%s) differs from its pin %s", k + 1, where, v->schemas_name);
        as_buf_free(&t);
    }
}

// One harvested log (named label in findings) that the row expects want
// changed headers in.
static void verify_log(verifier *v, const char *label, const seq *q, long want)
{
    for (size_t i = 0; i < q->nunknown; i++)
        finding(v, label, q->unknown[i], "UNKNOWN_TOOL: a tool result names a tool the agent does not have; a snapshot scenario must not accept one");
    if (q->changes != want)
        finding(v, label, 0, "%ld header%s changed; the row expects %ld", q->changes, q->changes == 1 ? "" : "s", want);
    if (q->np != q->nh || q->ns != q->nh) {
        finding(v, label, 0, "%zu request headers, %zu with a string system prompt and %zu with tool schemas; every header needs both",
                q->nh, q->np, q->ns);
        return;
    }
    for (size_t k = 0; k < q->nh; k++) check_header(v, label, q, k, want > 0 ? k : 0);
}

// The class pin's sidecars for log c of row i (a pinned child's own).
static void pin_of(verifier *v, const as_table *t, const as_pinrole *roles, size_t i, int c)
{
    const as_scenario *sc = &t->v[i];
    int pin = roles[i].pin, cp = 0, cs = 0;
    char f[64];
    for (size_t k = 0; c && k < sc->nchildPrompts; k++) cp |= sc->childPrompts[k] == c;
    for (size_t k = 0; c && k < sc->nchildSchemas; k++) cs |= sc->childSchemas[k] == c;
    snprintf(f, sizeof f, AS_CHILD_PROMPT_SIDECAR, c);
    if (cp) load_sidecar(v, sc->name, f, &v->prompt, &v->prompt_name);
    else if (pin >= 0 && roles[pin].prompt_src >= 0) load_sidecar(v, t->v[roles[pin].prompt_src].name, AS_PROMPT_SIDECAR, &v->prompt, &v->prompt_name);
    else { free(v->prompt_name); v->prompt_name = NULL; }
    snprintf(f, sizeof f, AS_CHILD_SCHEMAS_SIDECAR, c);
    if (cs) load_sidecar(v, sc->name, f, &v->schemas, &v->schemas_name);
    else if (pin >= 0 && roles[pin].schema_src >= 0) load_sidecar(v, t->v[roles[pin].schema_src].name, AS_SCHEMAS_SIDECAR, &v->schemas, &v->schemas_name);
    else { free(v->schemas_name); v->schemas_name = NULL; }
    if (v->schemas_name && as_json_parse(&v->sj, v->schemas.p, v->schemas.n) < 0) {
        finding(v, v->schemas_name, 0, "is not valid JSON");
        free(v->schemas_name);
        v->schemas_name = NULL;
    }
}

static int verify_run(const char *rundir, const char *dirarg, const char *name)
{
    char *dir = as_dir_arg(dirarg), *tpath = as_path_join(dir, "scenarios.jsonl");
    as_table t = {0};
    if (access(tpath, R_OK) < 0) as_die_sys("read the scenario table %s", tpath);
    as_table_load(tpath, &t, NULL, NULL);
    as_pinrole *roles = as_xmalloc((t.n + 1) * sizeof *roles);
    as_table_pins(&t, roles, as_problem_report, &probs);
    const as_scenario *sc = as_table_find(&t, name);
    if (!sc) as_die(AS_TROUBLE, "%s: no scenario named \"%s\"", tpath, name);
    size_t i = (size_t)(sc - t.v);
    verifier v = {.dir = dir};
    if (roles[i].pin >= 0) load_pin_fixture(&v, t.v[roles[i].pin].name);
    char *primary = as_path_join(rundir, "session.jsonl");
    as_norm *n = as_norm_new();
    if (as_is_file(primary)) load_context(n, rundir, primary);
    for (int c = 0;; c++) {
        char f[64];
        if (c) snprintf(f, sizeof f, "session.%d.jsonl", c); else snprintf(f, sizeof f, "session.jsonl");
        char *log = as_path_join(rundir, f);
        if (!as_is_file(log)) { free(log); break; }
        seq q = {0};
        extract(log, n, &q);
        pin_of(&v, &t, roles, i, c);
        verify_log(&v, f, &q, c == 0 && sc->pinsHeader ? (long)sc->expectedHeaderChanges : 0);
        seq_free(&q);
        free(log);
    }
    if (fflush(stdout) || ferror(stdout)) as_die_sys("write stdout");
    as_norm_free(n);
    as_json_free(&v.sj);
    as_buf_free(&v.prompt); as_buf_free(&v.schemas);
    free(v.prompt_name); free(v.schemas_name); free(v.pinq_name);
    seq_free(&v.pinq);
    free(primary); free(roles); free(tpath); free(dir);
    as_table_free(&t);
    if (probs.count) return AS_TROUBLE;
    return v.found ? AS_NO : AS_OK;
}

// ------------------------------------------------------------- single logs

static int print_one(const char *log, const char *ctxfile, int schemas, int child)
{
    as_norm *n = as_norm_new();
    if (ctxfile) as_norm_load_file(n, ctxfile);
    else load_context(n, NULL, log);
    seq q = {0};
    extract(log, n, &q);
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
    seq_free(&q);
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
        return verify_run(verify, argv[optind], argv[optind + 1]);
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
