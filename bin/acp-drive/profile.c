// profile.c - variables, their ${NAME} expansion, and the agent's profile
// (acpsnap-profile(5)): key = value lines, # comments.
#include "drive.h"
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

char *vxasprintf(const char *fmt, va_list ap)
{
    as_buf b = {0};
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    as_buf_grow(&b, (size_t)n + 1);
    vsnprintf(b.p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return b.p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vxasprintf(fmt, ap);
    va_end(ap);
    return s;
}

// ---------------------------------------------------------------- variables
void vars_set(vars *vs, const char *k, const char *v)
{
    for (size_t i = 0; i < vs->n; i++)
        if (!strcmp(vs->k[i], k)) { free(vs->v[i]); vs->v[i] = as_xstrdup(v); return; }
    if (vs->n == vs->cap) {
        vs->cap = vs->cap ? 2 * vs->cap : 32;
        vs->k = as_xrealloc(vs->k, vs->cap * sizeof *vs->k);
        vs->v = as_xrealloc(vs->v, vs->cap * sizeof *vs->v);
    }
    vs->k[vs->n] = as_xstrdup(k); vs->v[vs->n] = as_xstrdup(v); vs->n++;
}

static const char *vars_get(const vars *vs, const char *k)
{
    for (size_t i = 0; i < vs->n; i++) if (!strcmp(vs->k[i], k)) return vs->v[i];
    return NULL;
}

void vars_free(vars *vs)
{
    for (size_t i = 0; i < vs->n; i++) { free(vs->k[i]); free(vs->v[i]); }
    free(vs->k); free(vs->v);
    memset(vs, 0, sizeof *vs);
}

// Index of the } closing the ${ at s[i], or n when there is none.
static size_t closing_brace(const char *s, size_t n, size_t i)
{
    size_t k = i + 2, depth = 1;
    while (k < n && depth) {
        if (s[k] == '{') depth++;
        else if (s[k] == '}' && --depth == 0) break;
        k++;
    }
    return k;
}

// The default (after ":-") is expanded in turn.
static void expand_into(as_buf *b, const char *s, size_t n, const vars *vs, const char *file, long line)
{
    for (size_t i = 0; i < n;) {
        if (s[i] != '$' || i + 1 >= n || s[i + 1] != '{') { as_buf_putc(b, s[i++]); continue; }
        size_t k = closing_brace(s, n, i);
        if (k >= n) as_die_at(file, line, 0, "unterminated ${ in value");
        const char *body = s + i + 2;
        size_t blen = k - i - 2;
        const char *dflt = memmem(body, blen, ":-", 2);
        size_t nlen = dflt ? (size_t)(dflt - body) : blen;
        char *name = strndup(body, nlen);
        const char *v = vars_get(vs, name);
        if (!v) v = getenv(name);
        if (v && (*v || !dflt)) as_buf_puts(b, v);
        else if (dflt) expand_into(b, dflt + 2, blen - nlen - 2, vs, file, line);
        else as_die_at(file, line, 0, "unknown variable ${%s}", name);
        free(name);
        i = k + 1;
    }
}

char *expand(const char *s, const vars *vs, const char *file, long line)
{
    as_buf b = {0};
    as_buf_puts(&b, "");
    expand_into(&b, s, strlen(s), vs, file, line);
    return b.p;
}

// ---------------------------------------------------------------- the profile
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

static long ms_value(const char *v, const char *file, long line, const char *key)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x <= 0) as_die_at(file, line, 0, "%s must be a positive number of milliseconds", key);
    return x;
}

static void free_words(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
}

// A command line (command, prepare): expanded, then split on blanks into
// *v (NULL-terminated, *n words). Words naming paths relative to the
// profile are made absolute: the command runs in the scenario's generated
// cwd.
static void set_words(profile *pf, const char *val, const vars *vs, long line, char ***v, size_t *n,
                      const char *what)
{
    char *x = expand(val, vs, pf->path, line), *save = NULL;
    free_words(*v, *n);
    free(*v);
    *v = NULL; *n = 0;
    for (char *w = strtok_r(x, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        *v = as_xrealloc(*v, (*n + 2) * sizeof **v);
        (*v)[(*n)++] = (!strncmp(w, "./", 2) || !strncmp(w, "../", 3))
            ? xasprintf("%s/%s", pf->dir, w) : as_xstrdup(w);
        (*v)[*n] = NULL;
    }
    free(x);
    if (!*n) as_die_at(pf->path, line, 0, "empty %s", what);
}

// env, replay.env, record.env = [?]NAME=VALUE: kept for the mode, expanded
// at launch (the variables may change until then).
static void add_env(profile *pf, const char *key, const char *val, int record, long line)
{
    if (!strcmp(key, "replay.env") && record) return;
    if (!strcmp(key, "record.env") && !record) return;
    const char *eq = strchr(val, '=');
    if (!eq || eq == val + (*val == '?')) as_die_at(pf->path, line, 0, "%s must be NAME=VALUE or ?NAME=VALUE", key);
    pf->env = as_xrealloc(pf->env, (pf->nenv + 1) * sizeof *pf->env);
    pf->env_line = as_xrealloc(pf->env_line, (pf->nenv + 1) * sizeof *pf->env_line);
    pf->env_file = as_xrealloc(pf->env_file, (pf->nenv + 1) * sizeof *pf->env_file);
    pf->env_line[pf->nenv] = line;
    pf->env_file[pf->nenv] = as_xstrdup(pf->path);
    pf->env[pf->nenv++] = as_xstrdup(val);
}

// harvest = GLOBS: the last line wins.
static void set_harvest(profile *pf, const char *val)
{
    free_words(pf->harvest, pf->nharvest);
    pf->nharvest = 0;
    char *x = as_xstrdup(val), *save = NULL;
    for (char *w = strtok_r(x, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        pf->harvest = as_xrealloc(pf->harvest, (pf->nharvest + 1) * sizeof *pf->harvest);
        pf->harvest[pf->nharvest++] = as_xstrdup(w);
    }
    free(x);
}

static void set_provider(profile *pf, const char *val, long line)
{
    if (!strcmp(val, "replay-serve")) pf->serve = 1;
    else if (!strcmp(val, "agent")) pf->serve = 0;
    else as_die_at(pf->path, line, 0, "provider must be agent or replay-serve");
}

static void set_spill_root(profile *pf, const char *val, long line)
{
    if (!strcmp(val, "tmpdir")) pf->spill_tmpdir = 1;
    else if (!strcmp(val, "tmp")) pf->spill_tmpdir = 0;
    else as_die_at(pf->path, line, 0, "spill-root must be tmp or tmpdir");
}

// term-timeout = MS | none (0).
static void set_term(profile *pf, const char *val, long line)
{
    pf->term_timeout = !strcmp(val, "none") ? 0 : ms_value(val, pf->path, line, "term-timeout");
}

// mkdir = NAME: a directory to create beneath the run root (confine.h's rule).
static void add_mkdir(profile *pf, const char *val, long line)
{
    const char *why;
    if (as_rel_check(val, &why)) as_die_at(pf->path, line, 0, "mkdir \"%.60s\": %s", val, why);
    pf->mkdirs = as_xrealloc(pf->mkdirs, (pf->nmkdirs + 1) * sizeof *pf->mkdirs);
    pf->mkdirs[pf->nmkdirs++] = as_xstrdup(val);
}

unsigned client_bit(const char *w)
{
    return !strcmp(w, "fs-read") ? CLIENT_FS_READ : !strcmp(w, "fs-write") ? CLIENT_FS_WRITE
         : !strcmp(w, "terminal") ? CLIENT_TERMINAL : 0;
}

// client = WORD... | none: the last line wins.
static void set_client(profile *pf, const char *val, long line)
{
    char *x = as_xstrdup(val), *save = NULL;
    unsigned bits = 0;
    int n = 0, none = 0;
    for (char *w = strtok_r(x, " \t", &save); w; w = strtok_r(NULL, " \t", &save), n++) {
        unsigned b = client_bit(w);
        if (!b && strcmp(w, "none"))
            as_die_at(pf->path, line, 0, "client: unknown capability \"%.40s\" (fs-read, fs-write, terminal or none)", w);
        none |= !b;
        bits |= b;
    }
    free(x);
    if (!n || (none && n > 1)) as_die_at(pf->path, line, 0, "client must be none or some of fs-read, fs-write, terminal");
    pf->client = bits;
    pf->client_set = 1;
}

static void load_file(profile *pf, const char *path, int record, const vars *vs, int depth);

// include = FILE: relative to the including file's directory; read in
// place, so later lines override it. Nesting is bounded; a cycle is trouble.
enum { INCLUDE_DEPTH = 8 };
static void include(profile *pf, const char *val, int record, const vars *vs, long line, int depth)
{
    if (!*val) as_die_at(pf->path, line, 0, "empty include");
    const char *slash = strrchr(pf->path, '/');   // spelled from the including file's path, for messages
    char *p = *val == '/' || !slash ? as_xstrdup(val) : xasprintf("%.*s/%s", (int)(slash - pf->path), pf->path, val);
    char rp[PATH_MAX];
    if (!realpath(p, rp)) as_die_at(pf->path, line, 0, "include \"%.60s\": %s", val, strerror(errno));
    for (size_t i = 0; i < pf->nchain; i++)
        if (!strcmp(pf->chain[i], rp)) as_die_at(pf->path, line, 0, "include \"%.60s\" makes a cycle", val);
    if (depth >= INCLUDE_DEPTH) as_die_at(pf->path, line, 0, "include \"%.60s\": nested deeper than %d", val, INCLUDE_DEPTH);
    char *path = pf->path, *dir = pf->dir;
    load_file(pf, p, record, vs, depth + 1);
    pf->path = path; pf->dir = dir;
    free(p);
}

// One non-blank, non-comment line (trimmed).
static void profile_line(profile *pf, char *s, int record, const vars *vs, long line, int depth)
{
    char *eq = strchr(s, '=');
    if (!eq) as_die_at(pf->path, line, 0, "expected key = value");
    *eq = 0;
    char *key = trim(s), *val = trim(eq + 1);
    if (!strcmp(key, "command")) set_words(pf, val, vs, line, &pf->argv, &pf->argc, "command");
    else if (!strcmp(key, "env") || !strcmp(key, "replay.env") || !strcmp(key, "record.env"))
        add_env(pf, key, val, record, line);
    else if (!strcmp(key, "harvest")) set_harvest(pf, val);
    else if (!strcmp(key, "provider")) set_provider(pf, val, line);
    else if (!strcmp(key, "spill-root")) set_spill_root(pf, val, line);
    else if (!strcmp(key, "prepare")) set_words(pf, val, vs, line, &pf->prep, &pf->nprep, "prepare command");
    else if (!strcmp(key, "prepare-timeout")) pf->prep_timeout = ms_value(val, pf->path, line, key);
    else if (!strcmp(key, "timeout")) pf->timeout = ms_value(val, pf->path, line, key);
    else if (!strcmp(key, "rpc-timeout")) pf->rpc_timeout = ms_value(val, pf->path, line, key);
    else if (!strcmp(key, "exit-timeout")) pf->exit_timeout = ms_value(val, pf->path, line, key);
    else if (!strcmp(key, "term-timeout")) set_term(pf, val, line);
    else if (!strcmp(key, "mkdir")) add_mkdir(pf, val, line);
    else if (!strcmp(key, "client")) set_client(pf, val, line);
    else if (!strcmp(key, "include")) include(pf, val, record, vs, line, depth);
    else if (!strcmp(key, "rules")) { if (!*val) as_die_at(pf->path, line, 0, "empty rules"); }   // the pipelines' (scrub -f)
    else as_die_at(pf->path, line, 0, "unknown key \"%.40s\"", key);
}

// The file's path, and its directory resolved (relative words hang off it).
// The names stay owned by the profile until profile_free.
static void set_file(profile *pf, const char *path)
{
    pf->path = as_xstrdup(path);
    char *slash = strrchr(pf->path, '/');
    pf->dir = slash ? strndup(pf->path, (size_t)(slash - pf->path)) : as_xstrdup(".");
    char rp[PATH_MAX];
    if (realpath(pf->dir, rp)) { free(pf->dir); pf->dir = as_xstrdup(rp); }
    pf->names = as_xrealloc(pf->names, (pf->nnames + 2) * sizeof *pf->names);
    pf->names[pf->nnames++] = pf->path;
    pf->names[pf->nnames++] = pf->dir;
}

// Reads one profile file (the top one, or an included one at depth).
static void load_file(profile *pf, const char *path, int record, const vars *vs, int depth)
{
    set_file(pf, path);
    char rp[PATH_MAX];
    pf->chain = as_xrealloc(pf->chain, (pf->nchain + 1) * sizeof *pf->chain);
    pf->chain[pf->nchain++] = as_xstrdup(realpath(path, rp) ? rp : path);
    as_buf src = {0};
    as_read_file(path, &src);
    long line = 0;
    for (char *l = src.p ? src.p : (char *)""; l;) {
        char *nl = strchr(l, '\n');
        if (nl) *nl = 0;
        line++;
        char *s = trim(l);
        l = nl ? nl + 1 : NULL;
        if (*s && *s != '#') profile_line(pf, s, record, vs, line, depth);
    }
    as_buf_free(&src);
    free(pf->chain[--pf->nchain]);
}

void profile_load(profile *pf, const char *path, int record, const vars *vs)
{
    memset(pf, 0, sizeof *pf);
    pf->timeout = pf->rpc_timeout = pf->exit_timeout = pf->prep_timeout = pf->term_timeout = -1;
    load_file(pf, path, record, vs, 0);
    free(pf->chain);
    pf->chain = NULL;
    if (!pf->argv) as_die_at(path, 0, 0, "no command");
    if (!pf->nharvest) set_harvest(pf, "*.jsonl *.jsonl.zst *.jsonl.zstd");
}

void profile_free(profile *pf)
{
    free_words(pf->argv, pf->argc);
    free_words(pf->env, pf->nenv);
    free_words(pf->harvest, pf->nharvest);
    free_words(pf->prep, pf->nprep);
    free_words(pf->env_file, pf->nenv);
    free_words(pf->mkdirs, pf->nmkdirs);
    free_words(pf->names, pf->nnames);
    free(pf->prep); free(pf->env_file); free(pf->mkdirs); free(pf->names);
    free(pf->argv); free(pf->env); free(pf->env_line); free(pf->harvest);
}
