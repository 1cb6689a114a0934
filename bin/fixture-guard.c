// fixture-guard - check a snapshots directory against its scenario table
// (acpsnap-scenarios(5)): files, orphans, strays, canonical fixtures, header pins and
// sidecars; or discover every session log under a tree and check its layout.
#include "acpsnap.h"
#include "norm.h"
#include "table.h"
#include "sidecar.h"
#include "lint.h"
#include "replay.h"
#include "fsat.h"
#include "confine.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: fixture-guard [--list | --table | --rows | --no-lint | --lint-only] [--unreferenced=MODE] DIR...\n"
    "       fixture-guard --discover ROOT...\n"
    "Checks each snapshots directory DIR against DIR/scenarios.jsonl: required,\n"
    "missing, orphaned and stray files, canonical projected fixtures with\n"
    "tokenized request headers, header pins and their sidecars, the table rows\n"
    "and every input.json, then lints every fixture for secrets and volatile\n"
    "values that escaped normalization (DIR/.acpsnap-allow lists exceptions).\n"
    "Prints one line per problem; exit 1 when any.\n"
    "  -l, --list      print each scenario and its roles instead of checking\n"
    "  -t, --table     the table's checks only: its rows (the name and path\n"
    "                  rules among them), header pins, and no scenario directory\n"
    "                  or file of one that is a symbolic link\n"
    "  -r, --rows      the checks of --table, then, when they pass, each row on\n"
    "                  a line for scripts: name, hasModelTurn, recorded,\n"
    "                  comparesLog, workspaceParent, pinsHeader, pwshOnly, the\n"
    "                  number of child pins and sessionLog, with defaults\n"
    "                  applied, separated by US (0x1f)\n"
    "  --unreferenced=reject|warn|delete\n"
    "                  a scenario directory no row names: a problem (the\n"
    "                  default), a warning, or removed\n"
    "  -n, --no-lint   skip the secret and volatile lint of the fixtures\n"
    "  -L, --lint-only only the secret and volatile lint (and the table)\n"
    "  -s, --serial    one process (a tree of 64 scenarios or more is otherwise\n"
    "                  checked by two; the output is the same)\n"
    "  -d, --discover  find every .jsonl under ROOT whose first line is a session\n"
    "                  header and check that it is canonical and projected\n"
    "  -h, --help      this text\n"
    "  -V, --version   version\n";

static as_problems probs;   // quiet while --list resolves the pins

// The lint of the tree being checked (NULL: none), and of the scenario
// being checked (lint_now): the checks hand it the bytes of each file they
// read whole, so that a file is read once. Its messages wait in lint_out
// until the checks' are out.
static as_lint *lint_tree, *lint_now;
static as_buf lint_out;

// A problem about the file name in directory dir (no line).
#define PROBLEM_IN(dir, name, ...) do { char *p_ = as_path_join(dir, name); \
        as_problem(&probs, p_, 0, __VA_ARGS__); free(p_); } while (0)

// ------------------------------------------------------------ session fixtures

typedef struct {
    long headers, changes;      // request/header events; those with reason "change"
    long notools_line;          // first header without "tools":"{{tools}}", 0 = none
    int ok;                     // readable as a session log at all
} fxinfo;

enum { FX_LAYOUT = 1, FX_CONTENT = 2 };

// The file being read (fsat.h): one window, reused from file to file.
static as_lines rd;

// Hands the file rd has read (name beneath dfd) to the lint when it holds
// the whole of it; else the lint reads it later (as_lint_rest).
static void lint_rd(int dfd, const char *name)
{
    if (lint_now && rd.whole && rd.eof) as_lint_file(lint_now, dfd, name, rd.b.p, rd.b.n);
}

// Opens name beneath directory dfd (path: for messages) as rd, a regular
// file (the callers have listed it so). Dies when it cannot.
static void open_at(int dfd, const char *name, const char *path)
{
    if (as_lines_open_reg(&rd, dfd, name, path) < 0) as_die_sys("read %s", path);
}

// Calls fn(ctx, line, len, lineno, has_lf) on each line of rd from where it
// stands, its bytes as they are (without its LF; has_lf 0 for an
// unterminated last line), while fn returns 0; returns what stopped it, or
// 0. Holds one line at a time (rd's window).
typedef int (*line_fn)(void *ctx, const char *line, size_t len, long ln, int has_lf);
static int each_line(line_fn fn, void *ctx)
{
    const char *line;
    size_t len;
    long ln = 0;
    int r = 0, lf;
    while (!r && as_lines_next(&rd, &line, &len, &lf)) r = fn(ctx, line, len, ++ln, lf);
    return r;
}

// One session fixture being read.
typedef struct {
    const char *path;
    unsigned what;              // FX_*
    fxinfo *info;
    as_json j;                  // the record being read
    long envelope;              // first record keeping an envelope member, 0 = none
    int structural;             // a line is broken: the layout checks are moot
    int stopped;                // fx_line stopped reading (FX_STOP)
    int private_cwd;            // (FX_CONTENT) a line holds "/private{{cwd}}"
} fxscan;

enum { FX_NEXT = 0, FX_STOP, FX_DROP };   // read on; stop reading (structural); drop the file

static int fx_broken(fxscan *x, long ln, const char *msg)
{
    as_problem(&probs, x->path, ln, "%s", msg);
    x->structural = 1;
    return FX_STOP;
}

static int has_envelope(const as_json *j)
{
    static const as_key env[] = {AS_KEY("seq"), AS_KEY("time"), AS_KEY("seq0"), AS_KEY("time0")};
    int idx[4];
    as_json_pick(j, 0, env, 4, idx);
    return idx[0] >= 0 || idx[1] >= 0 || idx[2] >= 0 || idx[3] >= 0;
}

// A request/header record whose data.header is an object: tokenized bulk.
static void fx_request_header(fxscan *x, const as_json *j, int data, int hdr, long ln)
{
    x->info->headers++;
    if (AS_TOK_IS(j, as_json_get(j, data, "reason"), "change")) x->info->changes++;
    if (as_norm_header_state(j, AS_HDR_SYSTEM) == AS_HDR_RAW)
        as_problem(&probs, x->path, ln, "request header carries its system prompt; tokenize it as \"{{system}}\" (scrub --fixture) and keep the text in the pin's system-prompt.expected.md");
    if (as_norm_header_state(j, AS_HDR_TOOLS) == AS_HDR_RAW)
        as_problem(&probs, x->path, ln, "request header carries its tool schemas; tokenize them as \"{{tools}}\" (scrub --fixture) and keep them in the pin's tool-schemas.expected.json");
    if (!AS_TOK_IS(j, as_json_get(j, hdr, "tools"), AS_TOKEN_TOOLS) && !x->info->notools_line)
        x->info->notools_line = ln;
}

// The committed-fixture rules of body record ln (type ty, a string).
static void fx_content(fxscan *x, const as_json *j, int ty, long ln)
{
    int data = as_json_get(j, 0, "data");
    if (data < 0 || j->t[data].type != AS_JOBJ) return;
    if (AS_TOK_IS(j, ty, "request/header")) {
        int h = as_json_get(j, data, "header");
        if (h >= 0 && j->t[h].type == AS_JOBJ) fx_request_header(x, j, data, h, ln);
    } else if (AS_TOK_IS(j, ty, "tool/result")) {
        int err = as_json_get(j, data, "error");
        if (err >= 0 && j->t[err].type == AS_JOBJ && AS_TOK_IS(j, as_json_get(j, err, "code"), "UNKNOWN_TOOL"))
            as_problem(&probs, x->path, ln, "tool result reports UNKNOWN_TOOL; a snapshot fixture must not accept an unregistered tool");
    }
}

// A line of a session fixture (a line_fn over an fxscan).
static int fx_line(void *ctx, const char *line, size_t len, long ln, int has_lf)
{
    fxscan *x = ctx;
    if (!has_lf) { as_problem(&probs, x->path, ln, "no final newline; end the last record with LF"); x->structural = 1; }
    if (len && line[len - 1] == '\r') return fx_broken(x, ln, "CR-LF line ending; fixtures use LF only");
    if (len == 0) return fx_broken(x, ln, "blank line; a fixture holds one JSON record per line");
    // the root's members serve, but for the records whose content is checked
    if (as_json_parse_shallow(&x->j, line, len) < 0) {
        as_problem(&probs, x->path, ln, "invalid JSON at column %ld: %s", as_json_errcol(&x->j), x->j.err);
        x->structural = 1;
        return FX_STOP;
    }
    int ty = as_json_get(&x->j, 0, "type");
    if ((x->what & FX_CONTENT) && (AS_TOK_IS(&x->j, ty, "request/header") || AS_TOK_IS(&x->j, ty, "tool/result"))) {
        as_json_parse(&x->j, line, len);
        ty = as_json_get(&x->j, 0, "type");
    }
    if (ln == 1) {
        if (AS_TOK_IS(&x->j, ty, "session")) { x->info->ok = 1; return FX_NEXT; }
        as_problem(&probs, x->path, 1, "line 1 is not a session header ({\"type\":\"session\",...}); a session fixture starts with one");
        return FX_DROP;
    }
    if (ty < 0 || x->j.t[ty].type != AS_JSTR)
        return fx_broken(x, ln, "not a JSON object with a string \"type\"; every record needs one");
    if (!x->envelope && has_envelope(&x->j)) x->envelope = ln;
    if (x->what & FX_CONTENT) fx_content(x, &x->j, ty, ln);
    return FX_NEXT;
}

static const char PRIVATE_CWD[] = "/private{{cwd}}";

// A line of a session fixture as the scan reads on: fx_line until it stops
// (structural), and for the committed-fixture rules the cwd token on every
// line, read to the end for it.
static int fx_scan_line(void *ctx, const char *line, size_t len, long ln, int has_lf)
{
    fxscan *x = ctx;
    if (!x->stopped) {
        int r = fx_line(ctx, line, len, ln, has_lf);
        if (r == FX_DROP) return r;
        x->stopped = r == FX_STOP;
    }
    if ((x->what & FX_CONTENT) && !x->private_cwd)
        x->private_cwd = memmem(line, len, PRIVATE_CWD, sizeof PRIVATE_CWD - 1) != NULL;
    return x->stopped && (!(x->what & FX_CONTENT) || x->private_cwd) ? FX_STOP : FX_NEXT;
}

// Each "/private{{cwd}}" of a line (a line_fn; ctx: the path).
static int private_cwd_line(void *ctx, const char *line, size_t len, long ln, int has_lf)
{
    const size_t n = sizeof PRIVATE_CWD - 1;
    for (const char *p = line, *m; (m = memmem(p, len - (size_t)(p - line), PRIVATE_CWD, n)); p = m + n)
        as_problem(&probs, ctx, ln, "non-canonical cwd token \"/private{{cwd}}\"; write \"{{cwd}}\"");
    return 0;
}

// Whole-file layout of a fixture whose lines all read: projected and
// canonical. The codec's check compares with rd's text when rd holds the
// whole file.
static void fx_layout(const fxscan *x)
{
    if (x->envelope) {
        as_problem(&probs, x->path, x->envelope, "not projected: the record keeps its seq/time envelope; rewrite the fixture with jsonl-project");
        return;
    }
    long bad = 0;
    int r = rd.whole && rd.eof ? as_sess_check_text(x->path, rd.b.p, rd.b.n, &bad)
                               : as_sess_check_soft(x->path, &bad);   // 2: malformed, the decoder said why
    if (r == 1)
        as_problem(&probs, x->path, bad, "not in the canonical packed layout from this line on; rewrite the fixture with jsonl-pack");
    else if (r == 2)
        probs.count++;
}

// The start of a session fixture (rd): 0 when it is text to read, else 1,
// reported (zstd-compressed, or empty).
static int not_text(const char *path)
{
    const char *head;
    size_t got = as_lines_head(&rd, 4, &head);
    if (got >= 4 && !memcmp(head, "\x28\xb5\x2f\xfd", 4))
        as_problem(&probs, path, 0, "zstd-compressed; committed session fixtures are plain JSONL (decompress it with jsonl-project)");
    else if (got == 0)
        as_problem(&probs, path, 0, "empty file; a session fixture starts with a session header line");
    else
        return 0;
    return 1;
}

// Checks one session log file. FX_LAYOUT: a header line, one JSON object per
// line, projected (no envelopes), LF endings and a final LF, canonical packing.
// FX_CONTENT adds the committed-fixture rules: tokenized request headers
// (system and tools; the session prefix messages stay as recorded, as dsh
// keeps them), no /private{{cwd}}, no UNKNOWN_TOOL results. Fills *info. The
// file (name beneath directory dfd) is read once, whole, and its lines
// scanned line by line (a second time for the cwd tokens when it has some:
// no read when the file fits the window); then the codec's check decodes it
// and compares with what the window holds.
static void check_fixture(int dfd, const char *name, const char *path, unsigned what, fxinfo *info, int lint_it)
{
    static fxscan x;
    memset(info, 0, sizeof *info);
    open_at(dfd, name, path);
    if (not_text(path)) { as_lines_close(&rd); return; }
    x.path = path, x.what = what, x.info = info, x.envelope = 0, x.structural = 0;
    x.stopped = 0, x.private_cwd = 0;
    int r = each_line(fx_scan_line, &x);
    if (r != FX_DROP && x.private_cwd) {
        as_lines_rewind(&rd);
        each_line(private_cwd_line, (void *)path);
    }
    if (r != FX_DROP && !x.structural) fx_layout(&x);
    if (lint_it) lint_rd(dfd, name);
    as_lines_close(&rd);
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

// A line of stdout.expected.jsonl (a line_fn; ctx: the path): one JSON object.
static int stdout_line(void *ctx, const char *line, size_t len, long ln, int has_lf)
{
    static as_json j;
    if (as_json_parse(&j, line, len) < 0) {
        as_problem(&probs, ctx, ln, "invalid JSON at column %ld: %s; stdout.expected.jsonl holds one normalized ACP frame per line", as_json_errcol(&j), j.err);
        return 1;
    }
    if (j.t[0].type != AS_JOBJ) {
        as_problem(&probs, ctx, ln, "not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line");
        return 1;
    }
    return 0;
}

// stdout.expected.jsonl: every line one JSON object (a lone LF: the empty transcript).
static void check_stdout(int dfd, const char *path)
{
    open_at(dfd, "stdout.expected.jsonl", path);
    const char *head;
    int empty = as_lines_head(&rd, 2, &head) == 1 && head[0] == '\n';
    if (!empty) each_line(stdout_line, (void *)path);
    lint_rd(dfd, "stdout.expected.jsonl");
    as_lines_close(&rd);
}

// Reads a sidecar: 1, or 0 when it does not exist. Dies when it cannot be read.
static int read_sidecar(const char *path, as_buf *b)
{
    if (as_read_raw(path, b) < 0) {
        if (errno != ENOENT) as_die_sys("read %s", path);
        return 0;
    }
    return 1;
}

// The files of a scenario directory, as the checks below see them.
typedef struct {
    char **names; size_t n;     // its regular files (symbolic links followed), sorted
    int input, out, primary, override, win;   // input.json, stdout.expected.jsonl, session.jsonl, ...
    int provider;               // (a transcript-only row) provider.jsonl
    int maxchild;               // highest N of a session.N.jsonl, 0 = none
    char *childseen;            // [1..maxchild]: session.N.jsonl present
} inventory;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// ------------------------------------------------------------ links
// Nothing the pipelines write through or read from a scenario directory is a
// symbolic link (acpsnap-scenarios(5), TRUST MODEL): neither the directory
// nor a file in it; workspace/ may hold links that stay inside it (acp-drive).

// 1 when entry name (its type a DT_*) of directory sdir is a symbolic link (reported).
static int entry_link(const char *sdir, const char *name, unsigned char type)
{
    struct stat st;
    char *p = as_path_join(sdir, name);
    int link = type == DT_LNK || (type == DT_UNKNOWN && !lstat(p, &st) && S_ISLNK(st.st_mode));
    if (link) as_problem(&probs, p, 0, "a symbolic link; a scenario's files are regular files (links are not followed)");
    free(p);
    return link;
}

static const char DIR_LINK[] = "a symbolic link; a scenario directory is a directory of the snapshots tree (links are not followed)";

// 1 when the scenario directory sdir is a symbolic link (reported).
static int dir_link(const char *sdir)
{
    struct stat st;
    if (lstat(sdir, &st) || !S_ISLNK(st.st_mode)) return 0;
    as_problem(&probs, sdir, 0, DIR_LINK);
    return 1;
}

// The link rules alone, over every row's directory (--table).
static void table_links(const char *dir, const as_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        char *sdir = as_path_join(dir, t->v[i].name);
        DIR *d = dir_link(sdir) ? NULL : opendir(sdir);
        for (struct dirent *e; d && (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entry_link(sdir, e->d_name, e->d_type);
        if (d) closedir(d);
        free(sdir);
    }
}

// ------------------------------------------------------------ scenario files
// A directory being listed (list_entry).
typedef struct { const char *sdir; int dfd; inventory *iv; size_t cap; } listing;

static void list_entry(void *ctx, const char *name, unsigned char type)
{
    listing *l = ctx;
    inventory *iv = l->iv;
    struct stat st;
    if (type != DT_REG && type != DT_LNK && type != DT_UNKNOWN) return;
    if (entry_link(l->sdir, name, type)) return;
    if (type != DT_REG && !(fstatat(l->dfd, name, &st, 0) == 0 && S_ISREG(st.st_mode))) return;
    if (iv->n == l->cap) { l->cap = l->cap ? 2 * l->cap : 16; iv->names = as_xrealloc(iv->names, l->cap * sizeof *iv->names); }
    iv->names[iv->n++] = as_xstrdup(name);
}

// Lists the regular files of directory dfd (named sdir) into iv, sorted for stable output.
static void list_files(int dfd, const char *sdir, inventory *iv)
{
    listing l = {sdir, dfd, iv, 0};
    if (as_dir_each(dfd, list_entry, &l) < 0) as_die_sys("read directory %s", sdir);
    if (iv->n) qsort(iv->names, iv->n, sizeof *iv->names, by_name);
}

static void saw_child(inventory *iv, int ci)
{
    if (ci > iv->maxchild) {
        iv->childseen = as_xrealloc(iv->childseen, (size_t)ci + 1);
        memset(iv->childseen + iv->maxchild + 1, 0, (size_t)(ci - iv->maxchild));
        iv->maxchild = ci;
    }
    iv->childseen[ci] = 1;
}

// A sidecar name: 1 (reported when the table gives it no reader), else 0.
static int take_sidecar(const scen *S, const char *fp, const char *f)
{
    const as_scenario *sc = S->sc;
    int ci;
    if (!strcmp(f, AS_PROMPT_SIDECAR)) {
        if (!S->owns_prompt)
            as_problem(&probs, fp, 0, "stray sidecar: no header pin takes its system prompt from %s; delete it or name %s as the class pin's systemPromptSource", sc->name, sc->name);
    } else if (!strcmp(f, AS_SCHEMAS_SIDECAR)) {
        if (!S->owns_schemas)
            as_problem(&probs, fp, 0, "stray sidecar: no header pin takes its tool schemas from %s; delete it or name %s as the class pin's toolSchemasSource", sc->name, sc->name);
    } else if ((ci = child_index(f, "system-prompt.", ".expected.md"))) {
        if (!in_list(sc->childPrompts, sc->nchildPrompts, ci))
            as_problem(&probs, fp, 0, "stray child sidecar: pinsChildSystemPrompts does not declare child %d; declare it or delete the file", ci);
    } else if ((ci = child_index(f, "tool-schemas.", ".expected.json"))) {
        if (!in_list(sc->childSchemas, sc->nchildSchemas, ci))
            as_problem(&probs, fp, 0, "stray child sidecar: pinsChildToolSchemas does not declare child %d; declare it or delete the file", ci);
    } else {
        return 0;
    }
    return 1;
}

// Files named like a fixture that no fixture name matches.
static void take_other(inventory *iv, const char *fp, const char *f)
{
    int ci;
    if ((ci = child_index(f, "session.", ".jsonl")))
        saw_child(iv, ci);
    else if (starts(f, "session.") && strlen(f) > 6 && !strcmp(f + strlen(f) - 6, ".jsonl"))
        as_problem(&probs, fp, 0, "invalid child session fixture name; children are session.1.jsonl, session.2.jsonl, ... (rename or delete it)");
    else if (starts(f, "session.") || starts(f, "stdout.expected.") || starts(f, "replay.override.")
             || starts(f, "system-prompt.") || starts(f, "tool-schemas."))
        as_problem(&probs, fp, 0, "stray fixture file the harness does not read (not a fixture name the table declares); rename or delete it");
}

// A staging entry an interrupted record/refresh/update left (acpsnap-replay(1),
// ATOMIC WRITES): a hidden name with .acpsnap-new or .acpsnap-old in it, as
// .<scenario>.acpsnap-new.<pid> beside a scenario or .<file>.acpsnap-new
// inside one (earlier versions). Returns 1 for one, 2 when it is an
// .acpsnap-old one.
static int staging_name(const char *name)
{
    if (name[0] != '.') return 0;
    if (strstr(name, ".acpsnap-old")) return 2;
    return strstr(name, ".acpsnap-new") != NULL;
}

// A session log's name: session*.jsonl, plain or zstd.
static int session_name(const char *f)
{
    static const char *const ends[] = {".jsonl", ".jsonl.zst", ".jsonl.zstd"};
    size_t n = strlen(f);
    for (size_t k = 0; k < 3; k++) {
        size_t e = strlen(ends[k]);
        if (starts(f, "session") && n >= 7 + e && !strcmp(f + n - e, ends[k])) return 1;
    }
    return 0;
}

// One file of the scenario directory: noted when it is a fixture, reported when stray.
static void take_file(const scen *S, inventory *iv, const char *sdir, const char *f)
{
    char *fp = as_path_join(sdir, f);
    if (staging_name(f))
        as_problem(&probs, fp, 0, "a staging file left by an interrupted record/refresh; remove it");
    else if (!S->sc->sessionLog && session_name(f))
        as_problem(&probs, fp, 0, "stray session log: the row sets \"sessionLog\": false, so nothing reads or compares it; delete it, or drop \"sessionLog\": false and record the scenario");
    else if (!S->sc->sessionLog && !strcmp(f, "provider.jsonl")) iv->provider = 1;
    else if (!strcmp(f, "input.json")) iv->input = 1;
    else if (!strcmp(f, "stdout.expected.jsonl")) iv->out = 1;
    else if (!strcmp(f, "stdout.expected.windows.jsonl")) iv->win = 1;
    else if (!strcmp(f, "session.jsonl")) iv->primary = 1;
    else if (!strcmp(f, "replay.override.json")) iv->override = 1;
    else if (!take_sidecar(S, fp, f)) take_other(iv, fp, f);
    free(fp);
}
// A transcript-only row ("sessionLog": false): its provider script exactly
// when it has a model turn, no override (provider.jsonl is the whole script).
static void report_missing_transcript(const as_scenario *sc, const char *sdir, const inventory *iv)
{
    if (iv->override)
        PROBLEM_IN(sdir, "replay.override.json", "present, but a \"sessionLog\": false scenario is replayed from provider.jsonl alone; put its entries there and delete it");
    if (!iv->provider && sc->hasModelTurn)
        PROBLEM_IN(sdir, "provider.jsonl", "missing; a \"sessionLog\": false scenario with a model turn is replayed from its provider script (acpsnap-replay(5) entries, one a line)");
    else if (iv->provider && !sc->hasModelTurn)
        PROBLEM_IN(sdir, "provider.jsonl", "present, but the row has no model turn (\"hasModelTurn\": false), so nothing serves it; delete it or set hasModelTurn");
    if (iv->win && !sc->pinsNativeWindowsStdout)
        PROBLEM_IN(sdir, "stdout.expected.windows.jsonl", "stray platform variant: the row does not set pinsNativeWindowsStdout; set it or delete the file");
    else if (!iv->win && sc->pinsNativeWindowsStdout)
        PROBLEM_IN(sdir, "stdout.expected.windows.jsonl", "missing, but the row sets pinsNativeWindowsStdout; add the Windows transcript or unset it");
}

// The fixtures every scenario has, and those its row makes present or absent.
static void report_missing(const as_scenario *sc, const char *sdir, const inventory *iv)
{
    if (!iv->input) PROBLEM_IN(sdir, "input.json", "missing; every scenario needs its drive script");
    if (!iv->out) PROBLEM_IN(sdir, "stdout.expected.jsonl", "missing; every scenario needs its expected stdout");
    if (!sc->sessionLog) { report_missing_transcript(sc, sdir, iv); return; }
    if (!iv->primary)
        PROBLEM_IN(sdir, "session.jsonl", "missing; every scenario needs its session fixture (header-only when there is no model call)");
    if (iv->override && !sc->overridden)
        PROBLEM_IN(sdir, "replay.override.json", "present but the row is not \"overridden\": true, and replay would apply it silently; set overridden or delete it");
    else if (!iv->override && sc->overridden)
        PROBLEM_IN(sdir, "replay.override.json", "missing, but the row is \"overridden\": true; add the override or unset overridden");
    if (iv->win && !sc->pinsNativeWindowsStdout)
        PROBLEM_IN(sdir, "stdout.expected.windows.jsonl", "stray platform variant: the row does not set pinsNativeWindowsStdout; set it or delete the file");
    else if (!iv->win && sc->pinsNativeWindowsStdout)
        PROBLEM_IN(sdir, "stdout.expected.windows.jsonl", "missing, but the row sets pinsNativeWindowsStdout; add the Windows transcript or unset it");
}

// Child session fixtures are contiguous from 1: returns how many are, after
// reporting the first gap.
static int contiguous_children(const char *sdir, const inventory *iv)
{
    int nchild = 0;
    while (nchild < iv->maxchild && iv->childseen[nchild + 1]) nchild++;
    if (nchild < iv->maxchild) {
        int next = nchild + 2;
        while (!iv->childseen[next]) next++;
        char f[64];
        snprintf(f, sizeof f, "session.%d.jsonl", next);
        PROBLEM_IN(sdir, f, "child session fixtures must be contiguous: session.%d.jsonl is missing; renumber the children", nchild + 1);
    }
    return nchild;
}

// A provider script being read: the entries so far.
typedef struct { const char *path; size_t n; } provscan;

// A line of provider.jsonl (a line_fn over a provscan): one replay entry
// as replay-serve loads it (as_replay_line_servable), LF-terminated.
static int provider_line(void *ctx, const char *line, size_t len, long ln, int has_lf)
{
    provscan *x = ctx;
    as_replay_entry e;
    as_replay_err err;
    if (!has_lf) as_problem(&probs, x->path, ln, "no final newline; end the last entry with LF");
    if (len && line[len - 1] == '\r') {
        as_problem(&probs, x->path, ln, "CR-LF line ending; a replay script uses LF only");
        len--;
    }
    if (as_replay_line_servable(line, len, x->n++, &e, &err) != 0) {
        as_warn_at(x->path, ln, err.pos + 1, "%s", err.msg);
        probs.count++;
    } else {
        as_replay_entry_free(&e);
    }
    return 0;
}

// provider.jsonl: every entry servable, at least one (a model turn needs it).
static void check_provider(int dfd, const char *path)
{
    provscan x = {path, 0};
    open_at(dfd, "provider.jsonl", path);
    each_line(provider_line, &x);
    lint_rd(dfd, "provider.jsonl");
    as_lines_close(&rd);
    if (!x.n) as_problem(&probs, path, 0, "empty; the scenario has a model turn, which needs at least one entry");
}

// input.json: loaded from its bytes when they are plain text, else as the
// loader reads a file (decompressed, a NUL byte fatal).
static void check_input(const scen *S, const char *path, as_buf *text)
{
    as_input in;
    size_t problems = !as_zstd_magic(text->p, text->n) && !memchr(text->p, 0, text->n)
                          ? as_input_take(path, text, &in, as_problem_report, &probs)
                          : as_input_load(path, &in, as_problem_report, &probs);
    if (!problems && !S->sc->sessionLog) as_input_log_waits(&in, as_problem_report, &probs);
    as_input_free(&in);
}

// The contents of the fixtures present: session logs, stdout, the drive
// script. The lint (lint_now) is handed each file read whole, the drive
// script first (the temp paths it names are the author's in every file).
static void check_contents(scen *S, int dfd, const char *sdir, const inventory *iv)
{
    static as_buf input;
    unsigned what = FX_LAYOUT | FX_CONTENT;
    char *p;
    if (iv->input) {
        p = as_path_join(sdir, "input.json");
        if (as_read_raw_at(dfd, "input.json", p, &input, 1) < 0) as_die_sys("read %s", p);
        free(p);
        if (lint_now) as_lint_input(lint_now, dfd, input.p, input.n);
    }
    if (iv->primary) {
        p = as_path_join(sdir, "session.jsonl");
        check_fixture(dfd, "session.jsonl", p, what, &S->primary, 1);
        free(p);
    }
    for (int c = 1; c <= iv->maxchild; c++) {
        char f[64];
        fxinfo fi;
        struct stat st;
        snprintf(f, sizeof f, "session.%d.jsonl", c);
        // a listed one is a regular file; another may be reached through a link (not linted)
        if (!iv->childseen[c] && !(fstatat(dfd, f, &st, 0) == 0 && S_ISREG(st.st_mode))) continue;
        p = as_path_join(sdir, f);
        check_fixture(dfd, f, p, what, &fi, iv->childseen[c]);
        free(p);
    }
    if (iv->out) { p = as_path_join(sdir, "stdout.expected.jsonl"); check_stdout(dfd, p); free(p); }
    if (iv->provider && S->sc->hasModelTurn) { p = as_path_join(sdir, "provider.jsonl"); check_provider(dfd, p); free(p); }
    if (iv->input) {
        p = as_path_join(sdir, "input.json");
        check_input(S, p, &input);
        free(p);
    }
}

// One row's scenario directory (beneath the snapshots directory dir, open
// as dirfd): its files, what is missing or stray, the fixtures.
static void check_scenario(const char *dir, int dirfd, scen *S)
{
    const as_scenario *sc = S->sc;
    char *sdir = as_path_join(dir, sc->name);
    struct stat st;
    int dfd = openat(dirfd, sc->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        if (fstatat(dirfd, sc->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            as_problem(&probs, sdir, 0, DIR_LINK);
            free(sdir);
            return;
        }
        errno = e;
        if (errno != ENOENT && errno != ENOTDIR) as_die_sys("open directory %s", sdir);
        as_problem(&probs, sdir, 0, "missing scenario directory for table row %ld; create it (input.json, stdout.expected.jsonl, %s) or drop the row",
                   sc->line, sc->sessionLog ? "session.jsonl" : "provider.jsonl");
        free(sdir);
        return;
    }
    S->exists = 1;
    const char *why;
    if (lint_tree && !as_name_check(sc->name, &why)) as_lint_begin(lint_now = lint_tree, sc->name, sdir);
    inventory iv = {0};
    list_files(dfd, sdir, &iv);
    as_fetch(dfd, iv.names, iv.n);   // every file read once, all at once
    for (size_t k = 0; k < iv.n; k++) take_file(S, &iv, sdir, iv.names[k]);
    report_missing(sc, sdir, &iv);
    int nchild = contiguous_children(sdir, &iv);
    S->nsess = iv.primary ? 1 + nchild : 0;
    check_contents(S, dfd, sdir, &iv);
    if (lint_now) {
        as_lint_rest(lint_now, dfd, iv.names, iv.n);
        as_lint_end(lint_now, &lint_out);
        lint_now = NULL;
    }
    as_fetch_drop();
    as_fetch_close(dfd);
    for (size_t k = 0; k < iv.n; k++) free(iv.names[k]);
    free(iv.names);
    free(iv.childseen);
    free(sdir);
}

// ------------------------------------------------------------ pins and sidecars

typedef struct {
    as_buf prompt, schemas;      // owner sidecar texts
    int has_prompt, has_schemas;
    int prompt_ok, schemas_ok;   // well-formed
    int nsets;                   // schema sets in the schemas sidecar
} owned;

// 1 when b holds nothing but white space.
static int blank(const as_buf *b) { return b->n == 0 || strspn(b->p, " \t\r\n") == b->n; }

// The prompt sidecar a row owns: present, not blank, LF-terminated.
static void owner_prompt(const char *dir, const as_scenario *sc, owned *o)
{
    char *p = as_path_join3(dir, sc->name, AS_PROMPT_SIDECAR);
    if (!(o->has_prompt = read_sidecar(p, &o->prompt)))
        as_problem(&probs, p, 0, "missing, but %s owns the system-prompt sidecar of a header pin; write it with sidecar-dedupe from the pin's raw capture", sc->name);
    else if (blank(&o->prompt))
        as_problem(&probs, p, 0, "empty; a system-prompt sidecar holds the pinned prompt text (regenerate it with sidecar-dedupe)");
    else if (o->prompt.p[o->prompt.n - 1] != '\n')
        as_problem(&probs, p, 0, "no final newline; regenerate it with sidecar-dedupe");
    else
        o->prompt_ok = 1;
    free(p);
}

// The tool-schema sidecar a row owns: present and printed as dsh prints it.
static void owner_schemas(const char *dir, const as_scenario *sc, owned *o)
{
    char *p = as_path_join3(dir, sc->name, AS_SCHEMAS_SIDECAR);
    int nini = 0;
    const char *err;
    if (!(o->has_schemas = read_sidecar(p, &o->schemas)))
        as_problem(&probs, p, 0, "missing, but %s owns the tool-schema sidecar of a header pin; write it with sidecar-dedupe from the pin's raw capture", sc->name);
    else if ((err = as_schemas_sidecar_check(o->schemas.p, o->schemas.n, &o->nsets, &nini)))
        as_problem(&probs, p, 0, "%s; regenerate it with sidecar-dedupe", err);
    else
        o->schemas_ok = 1;
    free(p);
}

// Each distinct sidecar version is committed once: a later owner's copy of
// an earlier one's is reported.
static void same_sidecars(const char *dir, const scen *sv, const owned *ov, size_t n)
{
    size_t *own = as_xmalloc((n + 1) * sizeof *own), no = 0;   // the rows holding a sidecar: few
    for (size_t i = 0; i < n; i++)
        if (ov[i].has_prompt || ov[i].has_schemas) own[no++] = i;
    for (size_t oi = 0; oi < no; oi++)
        for (size_t ok = 0; ok < oi; ok++)
            for (int w = 0; w < 2; w++) {
                size_t i = own[oi], k = own[ok];
                const as_buf *a = w ? &ov[i].schemas : &ov[i].prompt, *b = w ? &ov[k].schemas : &ov[k].prompt;
                int ha = w ? ov[i].has_schemas : ov[i].has_prompt, hb = w ? ov[k].has_schemas : ov[k].has_prompt;
                if (!ha || !hb || a->n != b->n || memcmp(a->p, b->p, a->n)) continue;
                const char *f = w ? AS_SCHEMAS_SIDECAR : AS_PROMPT_SIDECAR;
                char *fi = as_path_join3(dir, sv[i].sc->name, f), *pk = as_path_join(dir, sv[k].sc->name);
                as_problem(&probs, fi, 0, "identical to %s/%s; commit it once: name %s as the %s of the pins that use %s, and delete this copy",
                           pk, f, sv[k].sc->name, w ? "toolSchemasSource" : "systemPromptSource", sv[i].sc->name);
                free(pk);
                free(fi);
            }
    free(own);
}

// The sidecars of the rows that own some: read into ov and checked.
static void check_owned(const char *dir, const scen *sv, owned *ov, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!sv[i].exists) continue;
        if (sv[i].owns_prompt) owner_prompt(dir, sv[i].sc, &ov[i]);
        if (sv[i].owns_schemas) owner_schemas(dir, sv[i].sc, &ov[i]);
    }
    same_sidecars(dir, sv, ov, n);
}

// A header pin against its fixture: header counts, the tools token, and the
// section counts of the sidecars it takes.
static void check_pin(const char *dir, const scen *sv, const owned *ov, size_t i)
{
    const scen *S = &sv[i];
    const as_scenario *sc = S->sc;
    if (!S->exists || !S->nsess || !S->primary.ok) return;
    char *fx = as_path_join3(dir, sc->name, "session.jsonl");
    long H = S->primary.headers, want = 1 + (long)sc->expectedHeaderChanges;
    if (H != want)
        as_problem(&probs, fx, 0, "the pin carries %ld request headers; a pin carries 1 + expectedHeaderChanges = %ld (fix expectedHeaderChanges or the fixture)", H, want);
    if (S->primary.changes != sc->expectedHeaderChanges)
        as_problem(&probs, fx, 0, "the pin carries %ld changed request headers (reason \"change\"), but the row declares expectedHeaderChanges = %lld",
                   S->primary.changes, (long long)sc->expectedHeaderChanges);
    if (S->primary.notools_line && H > 0)
        as_problem(&probs, fx, S->primary.notools_line, "the pin's request header has no \"tools\": \"{{tools}}\" to restore its sidecar schemas into");
    free(fx);
    int ss = S->schema_src, ps = S->prompt_src;
    if (ss >= 0 && ov[ss].schemas_ok && H > 0 && ov[ss].nsets != H) {
        char *f = as_path_join3(dir, sv[ss].sc->name, AS_SCHEMAS_SIDECAR);
        as_problem(&probs, f, 0, "holds %d tool-schema sets, but %s/session.jsonl has %ld request headers; regenerate it with sidecar-dedupe", ov[ss].nsets, sc->name, H);
        free(f);
    }
    int np = ps >= 0 && ov[ps].prompt_ok ? 1 + as_prompt_sidecar_changes(ov[ps].prompt.p, ov[ps].prompt.n) : 0;
    if (np && H > 0 && np != H) {
        char *f = as_path_join3(dir, sv[ps].sc->name, AS_PROMPT_SIDECAR);
        as_problem(&probs, f, 0, "holds %d prompt sections, but %s/session.jsonl has %ld request headers; regenerate it with sidecar-dedupe", np, sc->name, H);
        free(f);
    }
}

// Child c's sidecar p (schemas when w, else prompt), read into b. cp: the
// class pin's prompt sidecar, when there is one.
static void child_sidecar(const char *p, int w, int c, const char *field, const owned *cp, as_buf *b)
{
    if (!read_sidecar(p, b)) {
        as_problem(&probs, p, 0, "missing, but %s declares child %d; record the scenario (or run sidecar-dedupe) to write it, or drop %d from %s", field, c, c, field);
    } else if (w) {
        int nsets, nini;
        const char *err = as_schemas_sidecar_check(b->p, b->n, &nsets, &nini);
        if (err) as_problem(&probs, p, 0, "%s; regenerate it with sidecar-dedupe", err);
        else if (nini == 0) as_problem(&probs, p, 0, "pins no schema (\"initial\" is empty); regenerate it with sidecar-dedupe");
        // A child schema sidecar equal to the class pin's is legitimate:
        // dsh's record run writes exactly that for the corpus' rec-child.
        // Only a child prompt must differ (dsh's assertChildSystemPromptSnapshot).
    } else if (blank(b)) {
        as_problem(&probs, p, 0, "empty; a child prompt sidecar holds the child's prompt text");
    } else if (b->p[b->n - 1] != '\n') {
        as_problem(&probs, p, 0, "no final newline; regenerate it with sidecar-dedupe");
    } else if (cp && cp->has_prompt && as_prompt_sidecar_initial(cp->prompt.p, cp->prompt.n) == b->n
               && !memcmp(cp->prompt.p, b->p, b->n)) {
        as_problem(&probs, p, 0, "identical to its class pin's system prompt; drop %d from %s and delete it", c, field);
    }
}

// The child sidecars a row declares (pinsChildSystemPrompts, pinsChildToolSchemas).
static void check_children(const char *dir, const scen *sv, const owned *ov, size_t i)
{
    const scen *S = &sv[i];
    const as_scenario *sc = S->sc;
    if (!S->exists || !sc->sessionLog) return;   // a transcript-only row's child pins are row errors
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
                as_problem(&probs, sdir, 0, "%s names child %d, but there is no session.%d.jsonl; drop %d from %s", field, c, c, c, field);
            snprintf(f, sizeof f, w ? AS_CHILD_SCHEMAS_SIDECAR : AS_CHILD_PROMPT_SIDECAR, c);
            char *p = as_path_join(sdir, f);
            child_sidecar(p, w, c, field, cp, &b);
            free(p);
        }
    }
    as_buf_free(&b);
    free(sdir);
}

// ------------------------------------------------------------------ one DIR

// Calls fn(dir, name, ctx) for each entry of directory dir but . and .., in
// alphabetical order. Dies when dir cannot be read.
static void each_entry(const char *dir, void (*fn)(const char *dir, const char *name, void *ctx), void *ctx)
{
    struct dirent **ents;
    int ne = scandir(dir, &ents, NULL, alphasort);
    if (ne < 0) as_die_sys("open directory %s", dir);
    for (int k = 0; k < ne; k++) {
        const char *nm = ents[k]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..")) fn(dir, nm, ctx);
        free(ents[k]);
    }
    free(ents);
}

// Table-level pin rules (common/table.c), copied into the per-row state.
static void check_classes(const as_table *t, scen *sv)
{
    as_pinrole *r = as_xmalloc((t->n + 1) * sizeof *r);
    as_table_pins(t, r, as_problem_report, &probs);
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

static void list_dir(const as_table *t, scen *sv)
{
    as_out *o = as_out_stdout(0);
    as_buf b = {0};
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        as_buf_reset(&b);
        as_buf_printf(&b, "%s\t%s\t", s->name, s->sessionLog ? s->headerClass : "-");
        if (s->pinsHeader) as_buf_puts(&b, "pin,");
        if (sv[i].owns_prompt) as_buf_puts(&b, "prompt-owner,");
        if (sv[i].owns_schemas) as_buf_puts(&b, "schemas-owner,");
        as_buf_puts(&b, s->hasModelTurn ? "model," : "no-model,");
        as_buf_puts(&b, s->recorded ? "recorded" : "authored");
        if (s->comparesLog) as_buf_puts(&b, ",compares-log");
        if (s->overridden) as_buf_puts(&b, ",overridden");
        if (!s->sessionLog) as_buf_puts(&b, ",no-session-log");
        for (size_t k = 0; k < s->nchildPrompts; k++) as_buf_printf(&b, ",child-prompt-pin=%d", s->childPrompts[k]);
        for (size_t k = 0; k < s->nchildSchemas; k++) as_buf_printf(&b, ",child-schemas-pin=%d", s->childSchemas[k]);
        if (s->posixOnly) as_buf_puts(&b, ",posix-only");
        if (s->pwshOnly) as_buf_puts(&b, ",pwsh-only");
        as_out_line(o, b.p, b.n);
    }
    as_out_close(o);
    as_buf_free(&b);
}

// A staging entry beside the scenarios. An .acpsnap-old one whose scenario
// is missing is that scenario, whole: acpsnap-exchange's fallback stopped
// between its renames.
static void staging_entry(const char *dir, const char *name, int kind, const as_table *t)
{
    char *p = as_path_join(dir, name), *row = as_xstrdup(name + 1);
    char *e = strstr(row, ".acpsnap-old.");
    int pid = e && e[13] && strspn(e + 13, "0123456789") == strlen(e + 13);   // .<row>.acpsnap-old.<pid>
    if (e) *e = 0;
    char *rp = as_path_join(dir, row);
    struct stat st;
    if (kind == 2 && pid && as_table_find(t, row) && lstat(rp, &st) < 0 && errno == ENOENT)
        as_problem(&probs, p, 0, "the whole previous %s, left by an interrupted record/refresh between two renames; rename it to %s (the next record, refresh or update does)", row, rp);
    else
        as_problem(&probs, p, 0, "a staging %s left by an interrupted record/refresh; remove it", as_is_dir(p) ? "directory" : "file");
    free(rp);
    free(row);
    free(p);
}

static int lint = 1;        // the secret and volatile lint (common/lint.c), --no-lint clears it

// --unreferenced: what becomes of a snapshot directory the table does not name.
enum { UNREF_REJECT, UNREF_WARN, UNREF_DELETE };
static int unreferenced = UNREF_REJECT;

static int unlink_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

// Whether directory p holds what a scenario holds: input.json, a log or
// transcript (*.jsonl, *.jsonl.zst, *.jsonl.zstd), an override
// (replay.override*.json) or workspace/. A directory with none of them (a
// folder of configurations or helpers beside the scenarios) is not a
// scenario directory, and no business of the guard's.
static void scenario_like_entry(const char *dir, const char *name, void *found)
{
    static const char *const ends[] = {".jsonl", ".jsonl.zst", ".jsonl.zstd"};
    int hit = !strcmp(name, "input.json") || !strcmp(name, "workspace")
           || !strncmp(name, "replay.override", 15);
    for (size_t k = 0; k < 3 && !hit; k++) {
        size_t n = strlen(name), e = strlen(ends[k]);
        hit = n > e && !strcmp(name + n - e, ends[k]);
    }
    if (hit) *(int *)found = 1;
}

// A directory of the snapshots directory no row names, nor any row's
// configPath or sidecar source, that holds a scenario's files: rejected,
// warned about or removed (only a real, non-hidden directory is; a hidden
// one or a link to a directory is always a problem, whatever it holds).
// Links inside it are removed, never followed.
static void unreferenced_entry(const char *dir, const char *name, const as_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        const char *ref[] = {s->configPath, s->systemPromptSource, s->toolSchemasSource};
        for (size_t k = 0; k < 3; k++)
            if (ref[k] && !strcmp(ref[k], name)) return;
    }
    char *p = as_path_join(dir, name);
    struct stat st;
    int real = lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && name[0] != '.';
    int like = 0;
    if (real) each_entry(p, scenario_like_entry, &like);
    if (!as_is_dir(p) || (real && !like)) ;
    else if (!real || unreferenced == UNREF_REJECT)
        as_problem(&probs, p, 0, "a snapshot directory the table does not name");
    else if (unreferenced == UNREF_WARN)
        as_warn_at(p, 0, 0, "a snapshot directory the table does not name");
    else {
        if (nftw(p, unlink_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) as_die_sys("remove %s", p);
        as_warn_at(p, 0, 0, "removed: a snapshot directory the table does not name");
    }
    free(p);
}

// An entry of a snapshots directory: a staging entry, or a directory no
// row names (unreferenced_entry).
static void orphan_entry(const char *dir, const char *name, void *table)
{
    int kind = staging_name(name);
    if (kind) { staging_entry(dir, name, kind, table); return; }
    if (as_table_find(table, name)) return;
    unreferenced_entry(dir, name, table);
}

// The entries of a snapshots directory no row names (orphan_entry), in
// name order: those a row names are passed over as they are read.
typedef struct { const as_table *t; char **names; size_t n, cap; } orphans;

static void orphan_candidate(void *ctx, const char *name, unsigned char type)
{
    orphans *o = ctx;
    if (!staging_name(name) && as_table_find(o->t, name)) return;
    if (o->n == o->cap) { o->cap = o->cap ? 2 * o->cap : 16; o->names = as_xrealloc(o->names, o->cap * sizeof *o->names); }
    o->names[o->n++] = as_xstrdup(name);
}

static void each_orphan(const char *dir, const as_table *t)
{
    orphans o = {t, NULL, 0, 0};
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || as_dir_each(fd, orphan_candidate, &o) < 0) as_die_sys("open directory %s", dir);
    close(fd);
    if (o.n) qsort(o.names, o.n, sizeof *o.names, by_name);
    for (size_t k = 0; k < o.n; k++) { orphan_entry(dir, o.names[k], (void *)t); free(o.names[k]); }
    free(o.names);
}

// ------------------------------------------------------------ two processes
//
// A tree of many scenarios is checked by two processes. After the walk of
// the snapshots directory a worker is forked: it takes scenarios from the
// last one back while this process takes them from the first on, until the
// two meet. Each scenario's checks lint its files as they go (lint_now). The
// worker's messages go to files in memory, scenario by scenario (its checks'
// as it makes them, its lint's at its end), which this process prints where
// one process would have printed them: the worker's checks after its own,
// in table order, then the pins and sidecars, then the lint, scenario by
// scenario. So the output is the same wherever they met; and when the
// worker dies (exit 2), its messages up to its death come where the one
// process would have died.

enum { WORKER_MIN = 64 };      // fewer scenarios: not worth a fork
static int serial;             // --serial: never fork

typedef struct { off_t start, end; } segment;

// What the worker leaves for this process, in shared memory.
typedef struct {
    uint64_t claim;            // [lo, hi), lo | hi << 32: the scenarios neither has taken
    long count;                // its problems
    size_t dying;              // 1 + the scenario it is checking, 0 none: where it died
    segment *lint;             // [n]: a scenario's lint messages in its lint file
    segment seg[];             // [n]: a scenario's check messages in its check file
} shared;

typedef struct {
    pid_t pid;                 // 0: no worker
    int lint_fd, check_fd;     // its messages
    shared *sh;
    size_t len;
} worker;

static void *shared_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) as_die(AS_TROUBLE, "out of memory");
    return p;
}

// The next scenario to check, from the front or from the back; SIZE_MAX when
// none is left.
static size_t claim(shared *sh, int back)
{
    uint64_t c = __atomic_load_n(&sh->claim, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t lo = c & 0xffffffff, hi = c >> 32;
        if (lo >= hi) return SIZE_MAX;
        uint64_t next = back ? lo | (hi - 1) << 32 : (lo + 1) | hi << 32;
        if (__atomic_compare_exchange_n(&sh->claim, &c, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return back ? hi - 1 : lo;
    }
}

static off_t err_pos(void) { return lseek(2, 0, SEEK_CUR); }

// Checks scenario i, its lint's messages appended to lint_out at lint[i].
static void check_one(const char *dir, int dirfd, scen *sv, size_t i, segment *lseg)
{
    lseg[i].start = (off_t)lint_out.n;
    check_scenario(dir, dirfd, &sv[i]);
    lseg[i].end = (off_t)lint_out.n;
}

// The worker: messages to its files, scenarios from the back.
_Noreturn static void worker_run(const worker *w, pid_t parent, const char *dir, int dirfd, scen *sv)
{
    shared *sh = w->sh;
    prctl(PR_SET_PDEATHSIG, SIGKILL);   // this process died (exit 2): the worker goes too
    if (getppid() != parent) _exit(AS_TROUBLE);
    long before = probs.count;
    as_buf_reset(&lint_out);
    dup2(w->check_fd, 2);
    off_t pos = err_pos();
    for (size_t i; (i = claim(sh, 1)) != SIZE_MAX;) {
        unsigned long said = as_err_count;
        sh->seg[i].start = pos;
        sh->dying = i + 1;
        check_one(dir, dirfd, sv, i, sh->lint);
        sh->dying = 0;
        if (as_err_count != said) pos = err_pos();   // (no message: the file's end has not moved)
        sh->seg[i].end = pos;
    }
    if (as_write_all(w->lint_fd, lint_out.p, lint_out.n) < 0) as_die_sys("write the worker's messages");
    sh->count = probs.count - before;
    _exit(0);
}

static void worker_free(worker *w)
{
    if (w->lint_fd >= 0) close(w->lint_fd);
    if (w->check_fd >= 0) close(w->check_fd);
    if (w->sh) munmap(w->sh, w->len);
    *w = (worker){0, -1, -1, NULL, 0};
}

// Forks a worker for the n scenarios when they are many; w->pid 0 when not
// (a failed fork too: one process gives the same output). Either way
// w->sh->lint holds the lint segments of n scenarios.
static void worker_start(worker *w, const char *dir, int dirfd, size_t n, scen *sv)
{
    *w = (worker){0, -1, -1, NULL, 0};
    int fork_it = !serial && n >= WORKER_MIN;
    w->len = sizeof *w->sh + (fork_it ? n : 0) * sizeof w->sh->seg[0] + n * sizeof(segment);
    w->sh = shared_alloc(w->len);
    w->sh->claim = (uint64_t)n << 32;
    w->sh->lint = (segment *)((char *)w->sh + w->len - n * sizeof(segment));
    if (!fork_it) return;
    w->lint_fd = memfd_create("fixture-guard-lint", MFD_CLOEXEC);
    w->check_fd = memfd_create("fixture-guard-check", MFD_CLOEXEC);
    fflush(stdout);
    pid_t parent = getpid();
    if (w->lint_fd < 0 || w->check_fd < 0 || (w->pid = fork()) < 0) {
        if (w->lint_fd >= 0) close(w->lint_fd);
        if (w->check_fd >= 0) close(w->check_fd);
        w->lint_fd = w->check_fd = -1, w->pid = 0;
        return;
    }
    if (w->pid == 0) worker_run(w, parent, dir, dirfd, sv);
}

// Copies [from, to) of the worker's file fd to standard error (to -1: its end).
static void copy_out(int fd, off_t from, off_t to)
{
    char buf[65536];
    fflush(stderr);
    while (to < 0 || from < to) {
        size_t want = to < 0 || to - from > (off_t)sizeof buf ? sizeof buf : (size_t)(to - from);
        ssize_t got = pread(fd, buf, want, from);
        if (got < 0) as_die_sys("read the worker's messages");
        if (got == 0) break;
        for (ssize_t k = 0, put; k < got; k += put)
            if ((put = write(2, buf + k, (size_t)(got - k))) <= 0) return;   // as stderr drops what it cannot write
        from += got;
    }
}

// Once this process has no scenario left: waits for the worker, prints its
// checks' messages in table order, or up to where it died, and dies so.
static void worker_checks(worker *w, size_t n)
{
    int st;
    while (waitpid(w->pid, &st, 0) < 0)
        if (errno != EINTR) as_die_sys("wait for the worker");
    if (!WIFEXITED(st)) as_die(AS_TROUBLE, "internal error: the worker was killed by signal %d", WTERMSIG(st));
    shared *sh = w->sh;
    size_t first = sh->claim & 0xffffffff;   // where the two met
    for (size_t i = first; i < n; i++) {
        if (WEXITSTATUS(st) && sh->dying == i + 1) {
            copy_out(w->check_fd, sh->seg[i].start, -1);
            exit(WEXITSTATUS(st));
        }
        copy_out(w->check_fd, sh->seg[i].start, sh->seg[i].end);
    }
    if (WEXITSTATUS(st)) as_die(AS_TROUBLE, "internal error: the worker failed (exit %d)", WEXITSTATUS(st));
    probs.count += sh->count;
}

// The lint's messages, scenario by scenario: this process's (lint_out) up
// to where the two met, the worker's after.
static void lint_messages(const worker *w, size_t n)
{
    size_t first = w->pid ? w->sh->claim & 0xffffffff : n;
    const segment *l = w->sh->lint;
    if (lint_out.n) { fflush(stdout); fflush(stderr); }
    for (size_t i = 0; i < n; i++) {
        if (l[i].start == l[i].end) continue;
        if (i >= first) copy_out(w->lint_fd, l[i].start, l[i].end);
        else if (as_write_all(2, lint_out.p + l[i].start, (size_t)(l[i].end - l[i].start)) < 0) return;   // as stderr drops what it cannot write
    }
}

// ------------------------------------------------------------ one DIR, checked

// Every check of a snapshots directory against its table, in message order,
// then the lint's messages (when lint is set).
static void check_dir(const char *dir, const as_table *t, scen *sv)
{
    owned *ov = calloc(t->n + 1, sizeof *ov);
    if (!ov) as_die(AS_TROUBLE, "out of memory");
    each_orphan(dir, t);
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);   // no read permission needed
    if (dirfd < 0) as_die_sys("open directory %s", dir);
    if (lint) lint_tree = as_lint_open(dir, &probs);
    as_buf_reset(&lint_out);
    worker w;
    worker_start(&w, dir, dirfd, t->n, sv);
    if (w.pid) {
        for (size_t i; (i = claim(w.sh, 0)) != SIZE_MAX;) check_one(dir, dirfd, sv, i, w.sh->lint);
        worker_checks(&w, t->n);
    } else {
        for (size_t i = 0; i < t->n; i++) check_one(dir, dirfd, sv, i, w.sh->lint);
    }
    close(dirfd);
    check_owned(dir, sv, ov, t->n);
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].pinsHeader && sv[i].pin_idx == (int)i) check_pin(dir, sv, ov, i);
    for (size_t i = 0; i < t->n; i++) check_children(dir, sv, ov, i);
    for (size_t i = 0; i < t->n; i++) { as_buf_free(&ov[i].prompt); as_buf_free(&ov[i].schemas); }
    free(ov);
    if (lint_tree) {
        lint_messages(&w, t->n);
        as_lint_close(lint_tree, t);
        lint_tree = NULL;
    }
    as_buf_free(&lint_out);
    worker_free(&w);
}

enum { G_CHECK, G_LIST, G_TABLE, G_ROWS, G_LINT };

// --rows: each row's fields as the replay scripts read them (acpsnap-replay
// splits at US). A value is printed as it is; the table's checks have
// refused a control character in any of them.
static void rows_dir(const as_table *t)
{
    as_out *o = as_out_stdout(0);
    as_buf b = {0};
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        as_buf_reset(&b);
        as_buf_printf(&b, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%zu\x1f%s", s->name,
                      s->hasModelTurn ? "true" : "false", s->recorded ? "true" : "false",
                      s->comparesLog ? "true" : "false", s->workspaceParent ? s->workspaceParent : "",
                      s->pinsHeader ? "true" : "false", s->pwshOnly ? "true" : "false",
                      s->nchildSchemas + s->nchildPrompts, s->sessionLog ? "true" : "false");
        for (size_t k = 0; k < b.n; k++)
            if ((unsigned char)b.p[k] < 0x20 && b.p[k] != 0x1f)
                as_die(AS_TROUBLE, "%s: row %zu: a value holds a control character; no rows printed", s->name, i + 1);
        as_out_line(o, b.p, b.n);
    }
    as_out_close(o);
    as_buf_free(&b);
}

static int guard_dir(const char *arg, void *ctx)
{
    int mode = *(int *)ctx;
    char *dir = as_dir_arg(arg);
    char *tpath = as_path_join(dir, "scenarios.jsonl");
    if (access(tpath, R_OK) < 0) as_die_sys("read the scenario table %s", tpath);
    long before = probs.count;
    as_table t;
    as_table_load(tpath, &t, as_problem_report, &probs);
    // shared: a worker process fills the rows it checks (check_dir)
    size_t svlen = (t.n + 1) * sizeof(scen);
    scen *sv = shared_alloc(svlen);
    probs.quiet = mode == G_LIST || mode == G_LINT;   // --lint-only: the pin rules are not its business
    check_classes(&t, sv);
    probs.quiet = 0;
    if (mode == G_LIST) list_dir(&t, sv);
    else if (mode == G_TABLE || mode == G_ROWS) table_links(dir, &t);
    if (mode == G_ROWS && probs.count == before) rows_dir(&t);
    else if (mode == G_CHECK) check_dir(dir, &t, sv);
    if (mode == G_LINT) as_lint_tree(dir, &t, &probs);
    munmap(sv, svlen);
    as_table_free(&t);
    free(tpath);
    free(dir);
    return probs.count > before ? AS_NO : AS_OK;
}

// ------------------------------------------------------------------ discover

// A .jsonl file met by --discover: a session log has the layout of a fixture.
static void discover_file(const char *path)
{
    int kind = as_is_session_log(path);
    fxinfo fi;
    if (kind < 0) as_die_sys("read %s", path);
    if (kind == 2) as_problem(&probs, path, 0, "zstd-compressed session log; a committed log is plain JSONL (decompress it with jsonl-project)");
    else if (kind == 1) check_fixture(AT_FDCWD, path, path, FX_LAYOUT, &fi, 0);
}

static void walk(const char *dir);

// An entry of the tree: hidden ones and node_modules are passed over, links not followed.
static void walk_entry(const char *dir, const char *name, void *ctx)
{
    if (name[0] == '.' || !strcmp(name, "node_modules")) return;
    char *p = strcmp(dir, ".") ? as_path_join(dir, name) : as_xstrdup(name);
    size_t n = strlen(name);
    struct stat st;
    int known = lstat(p, &st) == 0;
    if (known && S_ISDIR(st.st_mode)) walk(p);
    else if (known && S_ISREG(st.st_mode) && n > 6 && !strcmp(name + n - 6, ".jsonl")) discover_file(p);
    free(p);
}

static void walk(const char *dir) { each_entry(dir, walk_entry, NULL); }

static int discover(const char *arg, void *ctx)
{
    long before = probs.count;
    char *root = as_dir_arg(arg);
    walk(root);
    free(root);
    return probs.count > before ? AS_NO : AS_OK;
}

// The --unreferenced argument; a bad one is a usage error.
static int unreferenced_arg(const char *a)
{
    if (!strcmp(a, "reject")) return UNREF_REJECT;
    if (!strcmp(a, "warn")) return UNREF_WARN;
    if (!strcmp(a, "delete")) return UNREF_DELETE;
    as_warn("--unreferenced: expected reject, warn or delete, not \"%s\"", a);
    as_usage_exit(USAGE, AS_TROUBLE);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"list", no_argument, 0, 'l'}, {"table", no_argument, 0, 't'}, {"rows", no_argument, 0, 'r'},
        {"discover", no_argument, 0, 'd'},
        {"unreferenced", required_argument, 0, 'u'},
        {"no-lint", no_argument, 0, 'n'}, {"lint-only", no_argument, 0, 'L'}, {"serial", no_argument, 0, 's'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    int mode = G_CHECK, disc = 0, c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "ltrdnLshV", opts, NULL)) != -1) {
        switch (c) {
        case 'l': if (mode != G_CHECK) as_usage_exit(USAGE, AS_TROUBLE); mode = G_LIST; break;
        case 't': if (mode != G_CHECK) as_usage_exit(USAGE, AS_TROUBLE); mode = G_TABLE; break;
        case 'r': if (mode != G_CHECK) as_usage_exit(USAGE, AS_TROUBLE); mode = G_ROWS; break;
        case 'd': disc = 1; break;
        case 'u': unreferenced = unreferenced_arg(optarg); break;
        case 'n': lint = 0; break;
        case 's': serial = 1; break;
        case 'L': if (mode != G_CHECK) as_usage_exit(USAGE, AS_TROUBLE); mode = G_LINT; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (optind >= argc || (mode != G_CHECK && disc) || (mode == G_LINT && !lint)) as_usage_exit(USAGE, AS_TROUBLE);
    int worst = AS_OK;
    for (int i = optind; i < argc; i++) {
        int r = disc ? discover(argv[i], NULL) : guard_dir(argv[i], &mode);
        if (r > worst) worst = r;
    }
    return worst;
}
