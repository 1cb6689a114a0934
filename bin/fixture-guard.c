// fixture-guard - check a snapshots directory against its scenario table
// (DESIGN.md §5): files, orphans, strays, canonical fixtures, header pins and
// sidecars; or discover every session log under a tree and check its layout.
#include "acpsnap.h"
#include "table.h"
#include "sidecar.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: fixture-guard [--list] DIR...\n"
    "       fixture-guard --discover ROOT...\n"
    "Checks each snapshots directory DIR against DIR/scenarios.jsonl: required,\n"
    "missing, orphaned and stray files, canonical projected fixtures with\n"
    "tokenized request headers, header pins and their sidecars, the table rows\n"
    "and every input.json. Prints one line per problem; exit 1 when any.\n"
    "  -l, --list      print each scenario and its roles instead of checking\n"
    "  -d, --discover  find every .jsonl under ROOT whose first line is a session\n"
    "                  header and check that it is canonical and projected\n"
    "  -h, --help      this text\n"
    "  -V, --version   version\n";

static long nproblems;
static int quiet;        // --list: pin rules are not reported

static void problem(const char *file, long line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void problem(const char *file, long line, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (quiet) return;
    as_warn_at(file, line, 0, "%s", msg);
    nproblems++;
}

static void table_report(void *ctx, const char *file, long line, const char *msg)
{
    problem(file, line, "%s", msg);
}

// Reads a whole plain file; 0 on success, -1 (errno set) when it cannot.
static int slurp(const char *path, as_buf *b)
{
    as_buf_reset(b);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    for (;;) {
        as_buf_grow(b, 65536);
        ssize_t r = read(fd, b->p + b->n, b->cap - b->n - 1);
        if (r < 0) { if (errno == EINTR) continue; int e = errno; close(fd); errno = e; return -1; }
        if (r == 0) break;
        b->n += (size_t)r;
    }
    b->p[b->n] = 0;
    close(fd);
    return 0;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// ------------------------------------------------------------ session fixtures

typedef struct {
    long headers, changes;      // request/header events; those with reason "change"
    long notools_line;          // first header without "tools":"{{tools}}", 0 = none
    int ok;                     // readable as a session log at all
} fxinfo;

enum { FX_LAYOUT = 1, FX_CONTENT = 2, FX_PIN = 4 };

static int tokeq(const as_json *j, int tok, const char *lit)
{
    return tok >= 0 && j->t[tok].type == AS_JSTR && as_json_streq(j, tok, lit);
}

// Checks one session log file. FX_LAYOUT: a header line, one JSON object per
// line, projected (no envelopes), LF endings and a final LF, canonical packing.
// FX_CONTENT adds the committed-fixture rules: tokenized request headers
// (system and tools always; prefix messages too unless FX_PIN), no
// /private{{cwd}}, no UNKNOWN_TOOL results. Fills *info.
static void check_fixture(const char *path, unsigned what, fxinfo *info)
{
    static as_buf b;
    static as_json j;
    memset(info, 0, sizeof *info);
    if (slurp(path, &b) < 0) as_die_sys("read %s", path);
    const char *s = b.p ? b.p : "";
    size_t n = b.n;
    if (n >= 4 && !memcmp(s, "\x28\xb5\x2f\xfd", 4)) {
        problem(path, 0, "zstd-compressed; committed session fixtures are plain JSONL (decompress it with jsonl-project)");
        return;
    }
    if (n == 0) { problem(path, 0, "empty file; a session fixture starts with a session header line"); return; }
    int structural = 0;
    long envelope = 0;
    long ln = 0;
    for (size_t pos = 0; pos < n;) {
        const char *nl = memchr(s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - s) : n;
        const char *line = s + pos;
        size_t len = end - pos;
        ln++;
        pos = nl ? end + 1 : n;
        if (!nl) { problem(path, ln, "no final newline; end the last record with LF"); structural = 1; }
        if (len && line[len - 1] == '\r') { problem(path, ln, "CR-LF line ending; fixtures use LF only"); structural = 1; break; }
        if (len == 0) { problem(path, ln, "blank line; a fixture holds one JSON record per line"); structural = 1; break; }
        if (as_json_parse(&j, line, len) < 0) {
            problem(path, ln, "invalid JSON at column %ld: %s", as_json_errcol(&j), j.err);
            structural = 1;
            break;
        }
        int ty = j.t[0].type == AS_JOBJ ? as_json_get(&j, 0, "type") : -1;
        if (ln == 1) {
            if (!tokeq(&j, ty, "session")) {
                problem(path, 1, "line 1 is not a session header ({\"type\":\"session\",...}); a session fixture starts with one");
                return;
            }
            info->ok = 1;
            continue;
        }
        if (ty < 0 || j.t[ty].type != AS_JSTR) {
            problem(path, ln, "not a JSON object with a string \"type\"; every record needs one");
            structural = 1;
            break;
        }
        if (!envelope && (as_json_get(&j, 0, "seq") >= 0 || as_json_get(&j, 0, "time") >= 0
                          || as_json_get(&j, 0, "seq0") >= 0 || as_json_get(&j, 0, "time0") >= 0))
            envelope = ln;
        if (!(what & FX_CONTENT)) continue;
        int data = as_json_get(&j, 0, "data");
        if (data < 0 || j.t[data].type != AS_JOBJ) continue;
        if (as_json_streq(&j, ty, "request/header")) {
            int h = as_json_get(&j, data, "header");
            if (h < 0 || j.t[h].type != AS_JOBJ) continue;
            info->headers++;
            if (tokeq(&j, as_json_get(&j, data, "reason"), "change")) info->changes++;
            int sys = as_json_get(&j, h, "system"), tools = as_json_get(&j, h, "tools");
            if (sys >= 0 && !tokeq(&j, sys, "{{system}}"))
                problem(path, ln, "request header carries its system prompt; tokenize it as \"{{system}}\" (scrub --fixture) and keep the text in the pin's system-prompt.expected.md");
            if (tools >= 0 && !tokeq(&j, tools, "{{tools}}"))
                problem(path, ln, "request header carries its tool schemas; tokenize them as \"{{tools}}\" (scrub --fixture) and keep them in the pin's tool-schemas.expected.json");
            if (!tokeq(&j, tools, "{{tools}}") && !info->notools_line) info->notools_line = ln;
            int msgs = as_json_get(&j, h, "messages");
            if (!(what & FX_PIN) && msgs >= 0 && j.t[msgs].type == AS_JARR) {
                for (int e = as_json_first(&j, msgs); e >= 0; e = as_json_nextel(&j, e))
                    if (!tokeq(&j, e, "{{messagePrefix}}")) {
                        problem(path, ln, "request header carries session prefix messages; tokenize each as \"{{messagePrefix}}\" (scrub --fixture)");
                        break;
                    }
            }
        } else if (as_json_streq(&j, ty, "tool/result")) {
            int err = as_json_get(&j, data, "error");
            if (err >= 0 && j.t[err].type == AS_JOBJ && tokeq(&j, as_json_get(&j, err, "code"), "UNKNOWN_TOOL"))
                problem(path, ln, "tool result reports UNKNOWN_TOOL; a snapshot fixture must not accept an unregistered tool");
        }
    }
    if (what & FX_CONTENT) {
        const char *p = s;
        for (const char *m; (m = memmem(p, n - (size_t)(p - s), "/private{{cwd}}", 15)); p = m + 15)
            problem(path, as_line_of(s, (size_t)(m - s)), "non-canonical cwd token \"/private{{cwd}}\"; write \"{{cwd}}\"");
    }
    if (structural) return;
    if (envelope) {
        problem(path, envelope, "not projected: the record keeps its seq/time envelope; rewrite the fixture with jsonl-project");
        return;
    }
    long bad = 0;
    int r = as_sess_check_soft(path, &bad);   // 2: malformed, the decoder said why
    if (r == 1)
        problem(path, bad, "not in the canonical packed layout from this line on; rewrite the fixture with jsonl-pack");
    else if (r == 2)
        nproblems++;
}

// ------------------------------------------------------------------ the table

typedef struct {
    const as_scenario *sc;
    int pin_idx;                // index of its class pin in t->v, -1 none
    int prompt_src, schema_src; // (pins) index of the resolved sources, -1 unusable
    int owns_prompt, owns_schemas;
    int exists;                 // scenario directory present
    int nsess;                  // contiguous session fixtures (primary + children), 0 = no primary
    fxinfo primary;
} scen;

static int in_list(const int *v, size_t n, int k)
{
    for (size_t i = 0; i < n; i++) if (v[i] == k) return 1;
    return 0;
}

// Parses "<prefix>N<suffix>" with N a positive decimal without leading zero; returns N or 0.
static int child_index(const char *name, const char *prefix, const char *suffix)
{
    size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
    if (n <= np + ns || strncmp(name, prefix, np) || strcmp(name + n - ns, suffix)) return 0;
    const char *d = name + np, *e = name + n - ns;
    if (*d < '1' || *d > '9' || e - d > 6) return 0;
    int v = 0;
    for (; d < e; d++) { if (*d < '0' || *d > '9') return 0; v = v * 10 + (*d - '0'); }
    return v;
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

// stdout.expected.jsonl: every line one JSON object.
static void check_stdout(const char *path)
{
    static as_buf b;
    static as_json j;
    if (slurp(path, &b) < 0) as_die_sys("read %s", path);
    const char *s = b.p ? b.p : "";
    long ln = 0;
    for (size_t pos = 0; pos < b.n;) {
        const char *nl = memchr(s + pos, '\n', b.n - pos);
        size_t end = nl ? (size_t)(nl - s) : b.n, len = end - pos;
        const char *line = s + pos;
        pos = nl ? end + 1 : b.n;
        ln++;
        if (len == 0 && b.n == 1) break;   // the empty transcript
        if (as_json_parse(&j, line, len) < 0) {
            problem(path, ln, "invalid JSON at column %ld: %s; stdout.expected.jsonl holds one normalized ACP frame per line", as_json_errcol(&j), j.err);
            return;
        }
        if (j.t[0].type != AS_JOBJ) {
            problem(path, ln, "not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line");
            return;
        }
    }
}

// Reads a sidecar; NULL (after a report) when missing or unreadable.
static int read_sidecar(const char *path, as_buf *b)
{
    if (slurp(path, b) < 0) {
        if (errno != ENOENT) as_die_sys("read %s", path);
        return 0;
    }
    return 1;
}

static void check_scenario(const char *dir, const as_table *t, scen *sv, size_t i)
{
    scen *S = &sv[i];
    const as_scenario *sc = S->sc;
    char *sdir = as_path_join(dir, sc->name);
    DIR *d = opendir(sdir);
    if (!d) {
        if (errno != ENOENT && errno != ENOTDIR) as_die_sys("open directory %s", sdir);
        problem(sdir, 0, "missing scenario directory for table row %ld; create it (input.json, stdout.expected.jsonl, session.jsonl) or drop the row", sc->line);
        free(sdir);
        return;
    }
    S->exists = 1;
    char **names = NULL;
    size_t nn = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (e->d_type != DT_REG && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) continue;
        char *p = as_path_join(sdir, e->d_name);
        int reg = e->d_type == DT_REG || is_file(p);
        free(p);
        if (!reg) continue;
        if (nn == cap) { cap = cap ? 2 * cap : 16; names = as_xrealloc(names, cap * sizeof *names); }
        names[nn++] = as_xstrdup(e->d_name);
    }
    closedir(d);
    // Sorted for stable output.
    for (size_t a = 1; a < nn; a++)
        for (size_t c = a; c > 0 && strcmp(names[c - 1], names[c]) > 0; c--) { char *x = names[c]; names[c] = names[c - 1]; names[c - 1] = x; }

    int has_input = 0, has_stdout = 0, has_primary = 0, has_override = 0, has_win = 0;
    int maxchild = 0;
    char *childseen = calloc(1, 1);
    for (size_t k = 0; k < nn; k++) {
        const char *f = names[k];
        char *fp = as_path_join(sdir, f);
        int ci;
        if (!strcmp(f, "input.json")) has_input = 1;
        else if (!strcmp(f, "stdout.expected.jsonl")) has_stdout = 1;
        else if (!strcmp(f, "stdout.expected.windows.jsonl")) has_win = 1;
        else if (!strcmp(f, "session.jsonl")) has_primary = 1;
        else if (!strcmp(f, "replay.override.json")) has_override = 1;
        else if (!strcmp(f, "system-prompt.expected.md")) {
            if (!S->owns_prompt)
                problem(fp, 0, "stray sidecar: no header pin takes its system prompt from %s; delete it or name %s as the class pin's systemPromptSource", sc->name, sc->name);
        } else if (!strcmp(f, "tool-schemas.expected.json")) {
            if (!S->owns_schemas)
                problem(fp, 0, "stray sidecar: no header pin takes its tool schemas from %s; delete it or name %s as the class pin's toolSchemasSource", sc->name, sc->name);
        } else if ((ci = child_index(f, "system-prompt.", ".expected.md"))) {
            if (!in_list(sc->childPrompts, sc->nchildPrompts, ci))
                problem(fp, 0, "stray child sidecar: pinsChildSystemPrompts does not declare child %d; declare it or delete the file", ci);
        } else if ((ci = child_index(f, "tool-schemas.", ".expected.json"))) {
            if (!in_list(sc->childSchemas, sc->nchildSchemas, ci))
                problem(fp, 0, "stray child sidecar: pinsChildToolSchemas does not declare child %d; declare it or delete the file", ci);
        } else if ((ci = child_index(f, "session.", ".jsonl"))) {
            if (ci > maxchild) { childseen = as_xrealloc(childseen, (size_t)ci + 1); memset(childseen + maxchild + 1, 0, (size_t)(ci - maxchild)); maxchild = ci; }
            childseen[ci] = 1;
        } else if (starts(f, "session.") && strlen(f) > 6 && !strcmp(f + strlen(f) - 6, ".jsonl")) {
            problem(fp, 0, "invalid child session fixture name; children are session.1.jsonl, session.2.jsonl, ... (rename or delete it)");
        } else if (starts(f, "session.") || starts(f, "stdout.expected.") || starts(f, "replay.override.")
                   || starts(f, "system-prompt.") || starts(f, "tool-schemas.")) {
            problem(fp, 0, "stray fixture file the harness does not read (not a fixture name the table declares); rename or delete it");
        }
        free(fp);
    }
    char *p;
    if (!has_input) { p = as_path_join(sdir, "input.json"); problem(p, 0, "missing; every scenario needs its drive script"); free(p); }
    if (!has_stdout) { p = as_path_join(sdir, "stdout.expected.jsonl"); problem(p, 0, "missing; every scenario needs its expected stdout"); free(p); }
    if (!has_primary) { p = as_path_join(sdir, "session.jsonl"); problem(p, 0, "missing; every scenario needs its session fixture (header-only when there is no model call)"); free(p); }
    if (has_override != sc->overridden) {
        p = as_path_join(sdir, "replay.override.json");
        if (has_override) problem(p, 0, "present but the row is not \"overridden\": true, and replay would apply it silently; set overridden or delete it");
        else problem(p, 0, "missing, but the row is \"overridden\": true; add the override or unset overridden");
        free(p);
    }
    if (has_win != sc->pinsNativeWindowsStdout) {
        p = as_path_join(sdir, "stdout.expected.windows.jsonl");
        if (has_win) problem(p, 0, "stray platform variant: the row does not set pinsNativeWindowsStdout; set it or delete the file");
        else problem(p, 0, "missing, but the row sets pinsNativeWindowsStdout; add the Windows transcript or unset it");
        free(p);
    }
    // Children contiguous from 1.
    int nchild = 0;
    while (nchild < maxchild && childseen[nchild + 1]) nchild++;
    if (nchild < maxchild) {
        int next = nchild + 2;
        while (!childseen[next]) next++;
        char f[64];
        snprintf(f, sizeof f, "session.%d.jsonl", next);
        p = as_path_join(sdir, f);
        problem(p, 0, "child session fixtures must be contiguous: session.%d.jsonl is missing; renumber the children", nchild + 1);
        free(p);
    }
    S->nsess = has_primary ? 1 + nchild : 0;
    free(childseen);

    // Fixture contents.
    unsigned what = FX_LAYOUT | FX_CONTENT | (sc->pinsHeader ? FX_PIN : 0);
    if (has_primary) {
        p = as_path_join(sdir, "session.jsonl");
        check_fixture(p, what, &S->primary);
        free(p);
    }
    for (int c = 1; c <= maxchild; c++) {
        char f[64];
        fxinfo fi;
        snprintf(f, sizeof f, "session.%d.jsonl", c);
        p = as_path_join(sdir, f);
        if (is_file(p)) check_fixture(p, what, &fi);   // a pin's children keep their prefixes too, as in dsh
        free(p);
    }
    if (has_stdout) { p = as_path_join(sdir, "stdout.expected.jsonl"); check_stdout(p); free(p); }
    if (has_input) {
        as_input in;
        p = as_path_join(sdir, "input.json");
        as_input_load(p, &in, table_report, NULL);
        as_input_free(&in);
        free(p);
    }
    for (size_t k = 0; k < nn; k++) free(names[k]);
    free(names);
    free(sdir);
}

// ------------------------------------------------------------ pins and sidecars

typedef struct {
    as_buf prompt, schemas;      // owner sidecar texts
    int has_prompt, has_schemas;
    int prompt_ok, schemas_ok;   // well-formed
    int nsets;                   // schema sets in the schemas sidecar
} owned;

static void check_owned(const char *dir, scen *sv, owned *ov, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        scen *S = &sv[i];
        if (!S->exists) continue;
        char *sdir = as_path_join(dir, S->sc->name);
        if (S->owns_prompt) {
            char *p = as_path_join(sdir, "system-prompt.expected.md");
            if (!(ov[i].has_prompt = read_sidecar(p, &ov[i].prompt)))
                problem(p, 0, "missing, but %s owns the system-prompt sidecar of a header pin; write it with sidecar-dedupe from the pin's raw capture", S->sc->name);
            else if (ov[i].prompt.n == 0 || strspn(ov[i].prompt.p, " \t\r\n") == ov[i].prompt.n)
                problem(p, 0, "empty; a system-prompt sidecar holds the pinned prompt text (regenerate it with sidecar-dedupe)");
            else if (ov[i].prompt.p[ov[i].prompt.n - 1] != '\n')
                problem(p, 0, "no final newline; regenerate it with sidecar-dedupe");
            else
                ov[i].prompt_ok = 1;
            free(p);
        }
        if (S->owns_schemas) {
            char *p = as_path_join(sdir, "tool-schemas.expected.json");
            int nini = 0;
            const char *err;
            if (!(ov[i].has_schemas = read_sidecar(p, &ov[i].schemas)))
                problem(p, 0, "missing, but %s owns the tool-schema sidecar of a header pin; write it with sidecar-dedupe from the pin's raw capture", S->sc->name);
            else if ((err = as_schemas_sidecar_check(ov[i].schemas.p, ov[i].schemas.n, &ov[i].nsets, &nini)))
                problem(p, 0, "%s; regenerate it with sidecar-dedupe", err);
            else
                ov[i].schemas_ok = 1;
            free(p);
        }
        free(sdir);
    }
    // Each distinct sidecar version committed once.
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < i; k++) {
            for (int w = 0; w < 2; w++) {
                as_buf *a = w ? &ov[i].schemas : &ov[i].prompt, *b = w ? &ov[k].schemas : &ov[k].prompt;
                int ha = w ? ov[i].has_schemas : ov[i].has_prompt, hb = w ? ov[k].has_schemas : ov[k].has_prompt;
                if (!ha || !hb || a->n != b->n || memcmp(a->p, b->p, a->n)) continue;
                const char *f = w ? "tool-schemas.expected.json" : "system-prompt.expected.md";
                char *pi = as_path_join(dir, sv[i].sc->name), *pk = as_path_join(dir, sv[k].sc->name);
                char *fi = as_path_join(pi, f);
                problem(fi, 0, "identical to %s/%s; commit it once: name %s as the %s of the pins that use %s, and delete this copy",
                        pk, f, sv[k].sc->name, w ? "toolSchemasSource" : "systemPromptSource", sv[i].sc->name);
                free(pi); free(pk); free(fi);
            }
        }
}

static void check_pin(const char *dir, scen *sv, owned *ov, size_t i)
{
    scen *S = &sv[i];
    const as_scenario *sc = S->sc;
    if (!S->exists || !S->nsess || !S->primary.ok) return;
    char *sdir = as_path_join(dir, sc->name), *fx = as_path_join(sdir, "session.jsonl");
    long H = S->primary.headers, want = 1 + (long)sc->expectedHeaderChanges;
    if (H != want)
        problem(fx, 0, "the pin carries %ld request headers; a pin carries 1 + expectedHeaderChanges = %ld (fix expectedHeaderChanges or the fixture)", H, want);
    if (S->primary.changes != sc->expectedHeaderChanges)
        problem(fx, 0, "the pin carries %ld changed request headers (reason \"change\"), but the row declares expectedHeaderChanges = %lld",
                S->primary.changes, (long long)sc->expectedHeaderChanges);
    if (S->primary.notools_line && H > 0)
        problem(fx, S->primary.notools_line, "the pin's request header has no \"tools\": \"{{tools}}\" to restore its sidecar schemas into");
    int ss = S->schema_src, ps = S->prompt_src;
    if (ss >= 0 && ov[ss].schemas_ok && H > 0 && ov[ss].nsets != H) {
        char *o = as_path_join(dir, sv[ss].sc->name), *f = as_path_join(o, "tool-schemas.expected.json");
        problem(f, 0, "holds %d tool-schema sets, but %s/session.jsonl has %ld request headers; regenerate it with sidecar-dedupe", ov[ss].nsets, sc->name, H);
        free(o); free(f);
    }
    if (ps >= 0 && ov[ps].prompt_ok && H > 0) {
        int np = 1 + as_prompt_sidecar_changes(ov[ps].prompt.p, ov[ps].prompt.n);
        if (np != H) {
            char *o = as_path_join(dir, sv[ps].sc->name), *f = as_path_join(o, "system-prompt.expected.md");
            problem(f, 0, "holds %d prompt sections, but %s/session.jsonl has %ld request headers; regenerate it with sidecar-dedupe", np, sc->name, H);
            free(o); free(f);
        }
    }
    free(fx);
    free(sdir);
}

static void check_children(const char *dir, scen *sv, owned *ov, size_t i)
{
    scen *S = &sv[i];
    const as_scenario *sc = S->sc;
    if (!S->exists) return;
    char *sdir = as_path_join(dir, sc->name);
    int pin = S->pin_idx;
    const owned *cp = pin >= 0 && sv[pin].prompt_src >= 0 ? &ov[sv[pin].prompt_src] : NULL;
    as_buf b = {0};
    for (int w = 0; w < 2; w++) {
        const int *v = w ? sc->childSchemas : sc->childPrompts;
        size_t nv = w ? sc->nchildSchemas : sc->nchildPrompts;
        const char *field = w ? "pinsChildToolSchemas" : "pinsChildSystemPrompts";
        for (size_t k = 0; k < nv; k++) {
            int c = v[k];
            char f[64];
            if (S->nsess && c >= S->nsess)
                problem(sdir, 0, "%s names child %d, but there is no session.%d.jsonl; drop %d from %s", field, c, c, c, field);
            snprintf(f, sizeof f, w ? "tool-schemas.%d.expected.json" : "system-prompt.%d.expected.md", c);
            char *p = as_path_join(sdir, f);
            if (!read_sidecar(p, &b)) {
                problem(p, 0, "missing, but %s declares child %d; record the scenario (or run sidecar-dedupe) to write it, or drop %d from %s", field, c, c, field);
            } else if (w) {
                int nsets, nini;
                const char *err = as_schemas_sidecar_check(b.p, b.n, &nsets, &nini);
                if (err) problem(p, 0, "%s; regenerate it with sidecar-dedupe", err);
                else if (nini == 0) problem(p, 0, "pins no schema (\"initial\" is empty); regenerate it with sidecar-dedupe");
                // A child schema sidecar equal to the class pin's is legitimate:
                // dsh's record run writes exactly that for the corpus' rec-child.
                // Only a child prompt must differ (dsh's assertChildSystemPromptSnapshot).
            } else {
                if (b.n == 0 || strspn(b.p, " \t\r\n") == b.n) problem(p, 0, "empty; a child prompt sidecar holds the child's prompt text");
                else if (b.p[b.n - 1] != '\n') problem(p, 0, "no final newline; regenerate it with sidecar-dedupe");
                else if (cp && cp->has_prompt && as_prompt_sidecar_initial(cp->prompt.p, cp->prompt.n) == b.n
                         && !memcmp(cp->prompt.p, b.p, b.n))
                    problem(p, 0, "identical to its class pin's system prompt; drop %d from %s and delete it", c, field);
            }
            free(p);
        }
    }
    as_buf_free(&b);
    free(sdir);
}

// ------------------------------------------------------------------ one DIR

static char *strip_slashes(const char *d)
{
    char *s = as_xstrdup(d);
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/') s[--n] = 0;
    return s;
}

// Table-level pin rules (common/table.c), copied into the per-row state.
static void check_classes(const as_table *t, scen *sv)
{
    as_pinrole *r = as_xmalloc((t->n + 1) * sizeof *r);
    as_table_pins(t, r, table_report, NULL);
    for (size_t i = 0; i < t->n; i++) {
        sv[i].sc = &t->v[i];
        sv[i].pin_idx = r[i].pin;
        sv[i].prompt_src = r[i].prompt_src;
        sv[i].schema_src = r[i].schema_src;
        sv[i].owns_prompt = r[i].owns_prompt;
        sv[i].owns_schemas = r[i].owns_schemas;
    }
    free(r);
}

static void list_dir(const char *dir, const as_table *t, scen *sv)
{
    as_out *o = as_out_stdout(0);
    as_buf b = {0};
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        as_buf_reset(&b);
        as_buf_printf(&b, "%s\t%s\t", s->name, s->headerClass);
        if (s->pinsHeader) as_buf_puts(&b, "pin,");
        if (sv[i].owns_prompt) as_buf_puts(&b, "prompt-owner,");
        if (sv[i].owns_schemas) as_buf_puts(&b, "schemas-owner,");
        as_buf_puts(&b, s->hasModelTurn ? "model," : "no-model,");
        as_buf_puts(&b, s->recorded ? "recorded" : "authored");
        if (s->comparesLog) as_buf_puts(&b, ",compares-log");
        if (s->overridden) as_buf_puts(&b, ",overridden");
        for (size_t k = 0; k < s->nchildPrompts; k++) as_buf_printf(&b, ",child-prompt-pin=%d", s->childPrompts[k]);
        for (size_t k = 0; k < s->nchildSchemas; k++) as_buf_printf(&b, ",child-schemas-pin=%d", s->childSchemas[k]);
        if (s->posixOnly) as_buf_puts(&b, ",posix-only");
        if (s->pwshOnly) as_buf_puts(&b, ",pwsh-only");
        as_out_line(o, b.p, b.n);
    }
    as_out_close(o);
    as_buf_free(&b);
}

static int guard_dir(const char *arg, void *ctx)
{
    int listing = *(int *)ctx;
    char *dir = strip_slashes(arg);
    struct stat st;
    if (stat(dir, &st) < 0) as_die_sys("open directory %s", dir);
    if (!S_ISDIR(st.st_mode)) as_die_at(dir, 0, 0, "not a directory");
    char *tpath = as_path_join(dir, "scenarios.jsonl");
    if (access(tpath, R_OK) < 0) as_die_sys("read the scenario table %s", tpath);
    long before = nproblems;
    as_table t;
    as_table_load(tpath, &t, table_report, NULL);
    scen *sv = calloc(t.n + 1, sizeof *sv);
    owned *ov = calloc(t.n + 1, sizeof *ov);
    if (!sv || !ov) as_die(AS_TROUBLE, "out of memory");
    quiet = listing;
    check_classes(&t, sv);
    quiet = 0;
    if (listing) {
        list_dir(dir, &t, sv);
    } else {
        // Orphans: directories without a row.
        struct dirent **ents;
        int ne = scandir(dir, &ents, NULL, alphasort);
        if (ne < 0) as_die_sys("open directory %s", dir);
        for (int k = 0; k < ne; k++) {
            const char *nm = ents[k]->d_name;
            if (strcmp(nm, ".") && strcmp(nm, "..") && !as_table_find(&t, nm)) {
                char *p = as_path_join(dir, nm);
                struct stat es;
                if (stat(p, &es) == 0 && S_ISDIR(es.st_mode))
                    problem(p, 0, "orphaned scenario directory: no row of scenarios.jsonl names it; register it or delete it");
                free(p);
            }
            free(ents[k]);
        }
        free(ents);
        for (size_t i = 0; i < t.n; i++) check_scenario(dir, &t, sv, i);
        check_owned(dir, sv, ov, t.n);
        for (size_t i = 0; i < t.n; i++)
            if (t.v[i].pinsHeader && sv[i].pin_idx == (int)i) check_pin(dir, sv, ov, i);
        for (size_t i = 0; i < t.n; i++) check_children(dir, sv, ov, i);
    }
    for (size_t i = 0; i < t.n; i++) { as_buf_free(&ov[i].prompt); as_buf_free(&ov[i].schemas); }
    free(ov);
    free(sv);
    as_table_free(&t);
    free(tpath);
    free(dir);
    return nproblems > before ? AS_NO : AS_OK;
}

// ------------------------------------------------------------------ discover

static int is_session_log(const char *path)
{
    as_buf b = {0};
    as_json j = {0};
    int r = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) as_die_sys("read %s", path);
    char head[4];
    ssize_t got = read(fd, head, 4);
    close(fd);
    if (got == 4 && !memcmp(head, "\x28\xb5\x2f\xfd", 4)) {
        as_in *in = as_in_open(path);
        const char *l;
        size_t n;
        if (as_in_line(in, &l, &n)) as_buf_put(&b, l, n);
        as_in_close(in);
    } else {
        FILE *f = fopen(path, "r");
        if (!f) as_die_sys("read %s", path);
        char *line = NULL;
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, f);
        if (n > 0) as_buf_put(&b, line, (size_t)n);
        free(line);
        fclose(f);
    }
    if (b.n && as_json_parse(&j, b.p, b.n) == 0 && j.t[0].type == AS_JOBJ)
        r = tokeq(&j, as_json_get(&j, 0, "type"), "session") ? 1 + (got == 4 && !memcmp(head, "\x28\xb5\x2f\xfd", 4)) : 0;
    as_buf_free(&b);
    as_json_free(&j);
    return r;
}

static void walk(const char *dir)
{
    struct dirent **ents;
    int ne = scandir(dir, &ents, NULL, alphasort);
    if (ne < 0) as_die_sys("open directory %s", dir);
    for (int k = 0; k < ne; k++) {
        const char *nm = ents[k]->d_name;
        if (nm[0] != '.' && strcmp(nm, "node_modules")) {
            char *p = strcmp(dir, ".") ? as_path_join(dir, nm) : as_xstrdup(nm);
            struct stat st;
            if (lstat(p, &st) == 0) {
                if (S_ISDIR(st.st_mode)) walk(p);
                else if (S_ISREG(st.st_mode) && strlen(nm) > 6 && !strcmp(nm + strlen(nm) - 6, ".jsonl")) {
                    int kind = is_session_log(p);
                    fxinfo fi;
                    if (kind == 2) problem(p, 0, "zstd-compressed session log; a committed log is plain JSONL (decompress it with jsonl-project)");
                    else if (kind == 1) check_fixture(p, FX_LAYOUT, &fi);
                }
            }
            free(p);
        }
        free(ents[k]);
    }
    free(ents);
}

static int discover(const char *arg, void *ctx)
{
    long before = nproblems;
    char *root = strip_slashes(arg);
    struct stat st;
    if (stat(root, &st) < 0) as_die_sys("open directory %s", root);
    if (!S_ISDIR(st.st_mode)) as_die_at(root, 0, 0, "not a directory");
    walk(root);
    free(root);
    return nproblems > before ? AS_NO : AS_OK;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"list", no_argument, 0, 'l'}, {"discover", no_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    int listing = 0, disc = 0, c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "ldhV", opts, NULL)) != -1) {
        switch (c) {
        case 'l': listing = 1; break;
        case 'd': disc = 1; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (optind >= argc || (listing && disc)) as_usage_exit(USAGE, AS_TROUBLE);
    int worst = AS_OK;
    for (int i = optind; i < argc; i++) {
        int r = disc ? discover(argv[i], NULL) : guard_dir(argv[i], &listing);
        if (r > worst) worst = r;
    }
    return worst;
}
