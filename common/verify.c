// verify.c - the request headers of a session log, and the checks of one
// replay run (verify.h).
#include "verify.h"
#include "sidecar.h"
#include "table.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void as_hseq_free(as_hseq *q)
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
static void unknown_tool(as_hseq *q, as_json *j, const char *line, size_t len, long ln)
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
static void header_place(as_hseq *q, const as_json *j, int data, int h, const as_norm *n, long ln)
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
void as_hseq_extract(const char *log, const as_norm *n, as_hseq *q)
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

// A prompt is written as UTF-8 text: a lone surrogate (3-byte WTF-8 from a
// \udxxx escape) becomes U+FFFD, as Node's utf8 writeFile does.
void as_utf8_text(as_buf *b)
{
    for (size_t i = 0; i + 2 < b->n; i++)
        if ((unsigned char)b->p[i] == 0xed && (unsigned char)b->p[i + 1] >= 0xa0) {
            b->p[i] = (char)0xef; b->p[i + 1] = (char)0xbf; b->p[i + 2] = (char)0xbd;
            i += 2;
        }
}

// The context of a capture: its run.json, else the logs' own headers.
void as_hseq_context(as_norm *n, const char *rawdir, const char *primary)
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

// acpsnap-replay's checks of one replay run (acpsnap-replay(1), CHECKS), as
// dsh's harness makes them on every run: no tool result reports
// UNKNOWN_TOOL; each log carries as many changed request headers as its row
// expects; every header's system prompt and tool schemas are those of its
// class pin's sidecars. Findings go to the given stream, "LOG:LINE: message".

typedef struct {
    const char *dir;            // the snapshots directory
    as_buf prompt, schemas;     // the sidecar texts (empty: not checked)
    char *prompt_name, *schemas_name;   // as named in messages: <scenario>/<file>
    as_json sj;                 // schemas parsed
    as_hseq pinq;                   // the class pin's fixture headers (pinq_name: none)
    char *pinq_name;
    long found;
    FILE *out;                  // where findings go (NULL: counted only)
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
    v->found++;
    if (!v->out) return;
    va_list ap;
    va_start(ap, fmt);
    if (line > 0) fprintf(v->out, "%s:%ld: ", log, line); else fprintf(v->out, "%s: ", log);
    vfprintf(v->out, fmt, ap);
    putc('\n', v->out);
    va_end(ap);
}

// The class pin's primary fixture, its headers read with its own context
// (the fields the sidecars leave tokenized: config, model and the rest).
static void load_pin_fixture(verifier *v, const char *pin)
{
    char *f = as_path_join3(v->dir, pin, "session.jsonl");
    if (as_is_file(f)) {
        as_norm *n = as_norm_new();
        as_hseq_context(n, NULL, f);
        as_hseq_extract(f, n, &v->pinq);
        as_norm_free(n);
        v->pinq_name = as_path_join(pin, "session.jsonl");
    }
    free(f);
}

// Header k of log (its prompt, set and other members) against pin section sec.
static void check_header(verifier *v, const char *log, const as_hseq *q, size_t k, size_t sec)
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
        as_utf8_text(&t);
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
static void verify_log(verifier *v, const char *label, const as_hseq *q, long want)
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

long as_verify_run(const char *rundir, const char *dirarg, const char *name, FILE *out, as_problems *probs)
{
    char *dir = as_dir_arg(dirarg), *tpath = as_path_join(dir, "scenarios.jsonl");
    as_table t = {0};
    if (access(tpath, R_OK) < 0) as_die_sys("read the scenario table %s", tpath);
    as_table_load(tpath, &t, NULL, NULL);
    as_pinrole *roles = as_xmalloc((t.n + 1) * sizeof *roles);
    as_table_pins(&t, roles, as_problem_report, probs);
    const as_scenario *sc = as_table_find(&t, name);
    if (!sc) as_die(AS_TROUBLE, "%s: no scenario named \"%s\"", tpath, name);
    size_t i = (size_t)(sc - t.v);
    verifier v = {.dir = dir, .out = out};
    if (roles[i].pin >= 0) load_pin_fixture(&v, t.v[roles[i].pin].name);
    char *primary = as_path_join(rundir, "session.jsonl");
    as_norm *n = as_norm_new();
    if (as_is_file(primary)) as_hseq_context(n, rundir, primary);
    for (int c = 0;; c++) {
        char f[64];
        if (c) snprintf(f, sizeof f, "session.%d.jsonl", c); else snprintf(f, sizeof f, "session.jsonl");
        char *log = as_path_join(rundir, f);
        if (!as_is_file(log)) { free(log); break; }
        as_hseq q = {0};
        as_hseq_extract(log, n, &q);
        pin_of(&v, &t, roles, i, c);
        verify_log(&v, f, &q, c == 0 && sc->pinsHeader ? (long)sc->expectedHeaderChanges : 0);
        as_hseq_free(&q);
        free(log);
    }
    as_norm_free(n);
    as_json_free(&v.sj);
    as_buf_free(&v.prompt); as_buf_free(&v.schemas);
    free(v.prompt_name); free(v.schemas_name); free(v.pinq_name);
    as_hseq_free(&v.pinq);
    free(primary); free(roles); free(tpath); free(dir);
    as_table_free(&t);
    return v.found;
}
