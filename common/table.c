// table.c - scenarios.jsonl and input.json readers with strict validation.
#include "acpsnap.h"
#include "confine.h"
#include "table.h"
#include <stdlib.h>
#include <string.h>

long as_line_of(const char *s, size_t off)
{
    long line = 1;
    for (const char *p = s, *e = s + off; (p = memchr(p, '\n', (size_t)(e - p))); p++) line++;
    return line;
}

static void report(as_report_fn fn, void *ctx, const char *file, long line, as_buf *msg)
{
    if (!fn) as_die_at(file, line, 0, "%s", msg->p);
    fn(ctx, file, line, msg->p);
    as_buf_reset(msg);
}

// ------------------------------------------------------------------ the table

enum { T_BOOL, T_STR, T_IDX, T_UINT, T_ENV };
#define FIELD(key, bit, type) {AS_KEY(key), bit, type}
static const struct field {
    as_key key; unsigned bit; int type;
} fields[] = {
    FIELD("name", AS_F_NAME, T_STR),
    FIELD("hasModelTurn", AS_F_HASMODELTURN, T_BOOL),
    FIELD("recorded", AS_F_RECORDED, T_BOOL),
    FIELD("comparesLog", AS_F_COMPARESLOG, T_BOOL),
    FIELD("overridden", AS_F_OVERRIDDEN, T_BOOL),
    FIELD("pinsHeader", AS_F_PINSHEADER, T_BOOL),
    FIELD("headerClass", AS_F_HEADERCLASS, T_STR),
    FIELD("systemPromptSource", AS_F_PROMPTSRC, T_STR),
    FIELD("toolSchemasSource", AS_F_SCHEMASRC, T_STR),
    FIELD("pinsChildToolSchemas", AS_F_CHILDSCHEMAS, T_IDX),
    FIELD("pinsChildSystemPrompts", AS_F_CHILDPROMPTS, T_IDX),
    FIELD("expectedHeaderChanges", AS_F_HEADERCHANGES, T_UINT),
    FIELD("workspaceParent", AS_F_WORKSPACEPARENT, T_STR),
    FIELD("posixOnly", AS_F_POSIXONLY, T_BOOL),
    FIELD("pwshOnly", AS_F_PWSHONLY, T_BOOL),
    FIELD("env", AS_F_ENV, T_ENV),
    FIELD("configPath", AS_F_CONFIGPATH, T_STR),
    FIELD("prepareWorkspace", AS_F_PREPARE, T_BOOL),
    FIELD("pinsNativeWindowsStdout", AS_F_WINSTDOUT, T_BOOL),
    FIELD("sessionLog", AS_F_SESSIONLOG, T_BOOL),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

// The field key token kt names, or NULL.
static const struct field *field_of(const as_json *j, int kt)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (as_json_key_is(j, kt, &fields[i].key)) return &fields[i];
    return NULL;
}

static const char *type_name(int t)
{
    switch (t) {
    case T_BOOL: return "a boolean";
    case T_STR: return "a non-empty string (no NUL character)";
    case T_IDX: return "an array of distinct child indices (integers from 1)";
    case T_UINT: return "a non-negative integer";
    default: return "an object of string values (no NUL character)";
    }
}

// The decoded string token tok, in a block of its size (nul: set to 1 when
// it holds a NUL byte).
static char *tokstr_nul(const as_json *j, int tok, int *nul)
{
    as_buf b = {0};
    as_json_str(j, tok, &b);
    if (nul) *nul = b.n && memchr(b.p, 0, b.n);
    return b.p ? as_xrealloc(b.p, b.n + 1) : as_xstrdup("");
}

static char *tokstr(const as_json *j, int tok) { return tokstr_nul(j, tok, NULL); }

// 1 when string token tok decodes to bytes holding a NUL, which a C string
// (and a shell reading jq's output) would cut or drop.
static int has_nul(const as_json *j, int tok)
{
    as_buf b = {0};
    as_json_str(j, tok, &b);
    int nul = b.n && memchr(b.p, 0, b.n);
    as_buf_free(&b);
    return nul;
}

// Checks the value token v against type t; on success stores it in sc.
static int take(const as_json *j, int v, const struct field *f, as_scenario *sc)
{
    const as_tok *t = &j->t[v];
    switch (f->type) {
    case T_BOOL: {
        if (t->type != AS_JTRUE && t->type != AS_JFALSE) return 0;
        int b = t->type == AS_JTRUE;
        switch (f->bit) {
        case AS_F_HASMODELTURN: sc->hasModelTurn = b; break;
        case AS_F_RECORDED: sc->recorded = b; break;
        case AS_F_COMPARESLOG: sc->comparesLog = b; break;
        case AS_F_OVERRIDDEN: sc->overridden = b; break;
        case AS_F_PINSHEADER: sc->pinsHeader = b; break;
        case AS_F_POSIXONLY: sc->posixOnly = b; break;
        case AS_F_PWSHONLY: sc->pwshOnly = b; break;
        case AS_F_PREPARE: sc->prepareWorkspace = b; break;
        case AS_F_WINSTDOUT: sc->pinsNativeWindowsStdout = b; break;
        case AS_F_SESSIONLOG: sc->sessionLog = b; break;
        }
        return 1;
    }
    case T_STR: {
        if (t->type != AS_JSTR || t->end - t->start <= 2) return 0;
        int nul;
        char *v8 = tokstr_nul(j, v, &nul);
        if (nul) { free(v8); return 0; }
        char **dst = f->bit == AS_F_NAME ? &sc->name
                   : f->bit == AS_F_HEADERCLASS ? &sc->headerClass
                   : f->bit == AS_F_PROMPTSRC ? &sc->systemPromptSource
                   : f->bit == AS_F_SCHEMASRC ? &sc->toolSchemasSource
                   : f->bit == AS_F_WORKSPACEPARENT ? &sc->workspaceParent
                   : &sc->configPath;
        *dst = v8;
        return 1;
    }
    case T_UINT: {
        int64_t n;
        if (t->type != AS_JNUM || !as_json_int(j, v, &n) || n < 0) return 0;
        sc->expectedHeaderChanges = n;
        return 1;
    }
    case T_IDX: {
        if (t->type != AS_JARR) return 0;
        int *out = as_xmalloc((t->count ? t->count : 1) * sizeof *out);
        size_t n = 0;
        for (int e = as_json_first(j, v); e >= 0; e = as_json_nextel(j, e)) {
            int64_t k;
            int dup = 0;
            if (j->t[e].type != AS_JNUM || !as_json_int(j, e, &k) || k < 1 || k > 1000000) { free(out); return 0; }
            for (size_t i = 0; i < n; i++) dup |= out[i] == (int)k;
            if (dup) { free(out); return 0; }
            out[n++] = (int)k;
        }
        if (f->bit == AS_F_CHILDSCHEMAS) { sc->childSchemas = out; sc->nchildSchemas = n; }
        else { sc->childPrompts = out; sc->nchildPrompts = n; }
        return 1;
    }
    default: {
        if (t->type != AS_JOBJ) return 0;
        for (int k = as_json_firstkey(j, v); k >= 0; k = as_json_nextkey(j, k))
            if (j->t[k + 1].type != AS_JSTR || has_nul(j, k) || has_nul(j, k + 1)) return 0;
        sc->envKeys = as_xmalloc((t->count ? t->count : 1) * sizeof(char *));
        sc->envVals = as_xmalloc((t->count ? t->count : 1) * sizeof(char *));
        for (int k = as_json_firstkey(j, v); k >= 0; k = as_json_nextkey(j, k)) {
            sc->envKeys[sc->nenv] = tokstr(j, k);
            sc->envVals[sc->nenv++] = tokstr(j, k + 1);
        }
        return 1;
    }
    }
}

static void scen_free(as_scenario *sc)
{
    free(sc->name); free(sc->headerClass); free(sc->systemPromptSource);
    free(sc->toolSchemasSource); free(sc->workspaceParent); free(sc->configPath);
    free(sc->childSchemas); free(sc->childPrompts);
    for (size_t i = 0; i < sc->nenv; i++) { free(sc->envKeys[i]); free(sc->envVals[i]); }
    free(sc->envKeys); free(sc->envVals);
}

// ------------------------------------------------------ what may form paths
// Values of a row that name files or directories, or reach the agent's
// environment, obey confine.h's rules (acpsnap-scenarios(5), TRUST MODEL).

// workspaceParent: "$TMPDIR" or "$HOME", then optionally "/" and a relative path.
static int parent_ok(const char *wp, const char **why)
{
    const char *rest = !strncmp(wp, "$TMPDIR", 7) ? wp + 7 : !strncmp(wp, "$HOME", 5) ? wp + 5 : NULL;
    *why = "it is not \"$TMPDIR\" or \"$HOME\"";
    if (!rest || (*rest && *rest != '/')) return 0;
    return !*rest || !as_rel_check(rest + 1, why);
}

// Variables a row may not set: the loader's, the shell's, and those the
// harness sets for the run (acp-drive(1)).
static int env_reserved(const char *k)
{
    static const char *const names[] = {
        "PATH", "HOME", "TMPDIR", "SHELL", "IFS", "ENV", "BASH_ENV", "CDPATH", "PS4", "SHELLOPTS",
        "BASHOPTS", "GLOBIGNORE", "ACPSNAP_SNAPSHOT", "ACPSNAP_SCENARIO", "ACPSNAP_SCENARIO_DIR",
        "ACPSNAP_CWD", "ACPSNAP_SESSIONS_ROOT", "ACPSNAP_RUN_ROOT", "ACPSNAP_SPILL_ROOT", "ACPSNAP_OUT", "ACPSNAP_CONFIG_PATH",
        "ACPSNAP_FIXTURE", "ACPSNAP_OVERRIDE", "ACPSNAP_CHILD_FIXTURES", "ACPSNAP_REPLAY_SCRIPT",
        "ACPSNAP_PROVIDER_URL", "ACPSNAP_PROVIDER_KEY", NULL,
    };
    if (!strncmp(k, "LD_", 3) || !strncmp(k, "DYLD_", 5)) return 1;
    for (int i = 0; names[i]; i++)
        if (!strcmp(k, names[i])) return 1;
    return 0;
}

static int env_name_ok(const char *k)
{
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_')) return 0;
    return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strlen(k);
}

// Appends s to msg as a JSON string (a newline shows as \n).
static void put_quoted(as_buf *msg, const char *s) { as_jstr_write(msg, s, strlen(s)); }

// The rules above on one row; each problem reported. Returns their number.
static size_t row_rules(as_scenario *sc, as_report_fn fn, void *ctx, const char *path, long ln, as_buf *msg)
{
    size_t np = 0;
    const char *why;
    const char *src[2] = {sc->systemPromptSource, sc->toolSchemasSource};
    for (int w = 0; w < 2; w++) {
        if (!src[w] || !strcmp(src[w], "<not-included>") || !as_name_check(src[w], &why)) continue;
        as_buf_printf(msg, "field \"%s\" ", w ? "toolSchemasSource" : "systemPromptSource");
        put_quoted(msg, src[w]);
        as_buf_printf(msg, " is not a scenario name: %s", why);
        report(fn, ctx, path, ln, msg); np++;
    }
    if (sc->configPath && as_name_check(sc->configPath, &why)) {
        as_buf_puts(msg, "field \"configPath\" ");
        put_quoted(msg, sc->configPath);
        as_buf_printf(msg, " must name a file of the snapshots directory (a plain name): %s", why);
        report(fn, ctx, path, ln, msg); np++;
    }
    if (sc->workspaceParent && !parent_ok(sc->workspaceParent, &why)) {
        as_buf_puts(msg, "field \"workspaceParent\" ");
        put_quoted(msg, sc->workspaceParent);
        as_buf_printf(msg, " must be \"$TMPDIR\" or \"$HOME\", optionally followed by /<relative path>: %s", why);
        report(fn, ctx, path, ln, msg); np++;
    }
    for (size_t i = 0; i < sc->nenv; i++) {
        const char *k = sc->envKeys[i];
        if (env_name_ok(k) && !env_reserved(k)) continue;
        as_buf_puts(msg, "field \"env\" sets ");
        put_quoted(msg, k);
        as_buf_puts(msg, env_name_ok(k) ? ", which a scenario may not set (the loader's, the shell's and the harness's own variables are reserved)"
                                        : ", which is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
        report(fn, ctx, path, ln, msg); np++;
    }
    if (np) sc->valid = 0;
    return np;
}

// A transcript-only row ("sessionLog": false) has no session log, so none
// of the session-log fields (AS_F_LOG_ONLY) means anything on it: each one
// set is reported. Returns their number.
static size_t tier_rules(as_scenario *sc, as_report_fn fn, void *ctx, const char *path, long ln, as_buf *msg)
{
    size_t np = 0;
    if (sc->sessionLog) return 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        if (!(fields[i].bit & AS_F_LOG_ONLY & sc->set)) continue;
        as_buf_printf(msg, "field \"%s\" does not apply to a \"sessionLog\": false scenario (no session log, header pins or sidecars); drop it",
                      fields[i].key.s);
        report(fn, ctx, path, ln, msg); np++;
    }
    if (np) sc->valid = 0;
    return np;
}

static void index_row(as_table *t, size_t i);

size_t as_table_load(const char *path, as_table *t, as_report_fn fn, void *ctx)
{
    memset(t, 0, sizeof *t);
    t->path = as_xstrdup(path);
    as_in *in = as_in_open(path);
    as_json j = {0};
    as_buf msg = {0};
    size_t cap = 0, problems = 0;
    const char *line;
    size_t len;
    while (as_in_line(in, &line, &len)) {
        long ln = as_in_lineno(in);
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k == len) continue;
        if (as_json_parse(&j, line, len) < 0) as_json_die(&j, path, ln);
        if (j.t[0].type != AS_JOBJ) as_die_at(path, ln, 0, "a scenario row must be a JSON object");
        as_scenario sc = {0};
        sc.line = ln;
        sc.valid = 1;
        for (int kt = as_json_firstkey(&j, 0); kt >= 0; kt = as_json_nextkey(&j, kt)) {
            const struct field *f = field_of(&j, kt);
            if (!f) {
                as_buf_puts(&msg, "unknown field ");
                as_buf_put(&msg, as_tok_p(&j, kt), as_tok_len(&j, kt));
                as_buf_puts(&msg, "; see acpsnap-scenarios(5) for the fields");
                report(fn, ctx, path, ln, &msg); problems++; sc.valid = 0;
                continue;
            }
            if (sc.set & f->bit) {
                as_buf_printf(&msg, "field \"%s\" appears twice; keep one", f->key.s);
                report(fn, ctx, path, ln, &msg); problems++; sc.valid = 0;
                continue;
            }
            if (!take(&j, kt + 1, f, &sc)) {
                as_buf_printf(&msg, "field \"%s\" must be %s", f->key.s, type_name(f->type));
                report(fn, ctx, path, ln, &msg); problems++; sc.valid = 0;
                sc.set |= f->bit;   // present, though unusable: not "missing" too
                continue;
            }
            sc.set |= f->bit;
        }
        const char *why;
        if (sc.name && as_name_check(sc.name, &why)) {
            as_buf_puts(&msg, "scenario name ");
            put_quoted(&msg, sc.name);
            as_buf_printf(&msg, " breaks the name rule: %s; see acpsnap-scenarios(5)", why);
            report(fn, ctx, path, ln, &msg); problems++;
            free(sc.name); sc.name = NULL;
        }
        problems += row_rules(&sc, fn, ctx, path, ln, &msg);
        if (!(sc.set & AS_F_SESSIONLOG)) sc.sessionLog = 1;
        problems += tier_rules(&sc, fn, ctx, path, ln, &msg);
        for (unsigned req = AS_F_NAME; req <= AS_F_RECORDED; req <<= 1) {
            if (sc.set & req) continue;
            const char *key = req == AS_F_NAME ? "name" : req == AS_F_HASMODELTURN ? "hasModelTurn" : "recorded";
            as_buf_printf(&msg, "missing required field \"%s\"", key);
            report(fn, ctx, path, ln, &msg); problems++; sc.valid = 0;
        }
        if (!sc.name) { scen_free(&sc); continue; }
        if (as_table_find(t, sc.name)) {
            as_buf_printf(&msg, "duplicate scenario name \"%s\" (first on line %ld); rename one",
                          sc.name, as_table_find(t, sc.name)->line);
            report(fn, ctx, path, ln, &msg); problems++;
            scen_free(&sc);
            continue;
        }
        if (!(sc.set & AS_F_COMPARESLOG)) sc.comparesLog = sc.hasModelTurn && sc.sessionLog;
        if (!sc.headerClass) sc.headerClass = as_xstrdup("default");
        if (!sc.systemPromptSource) sc.systemPromptSource = as_xstrdup(sc.name);
        if (!sc.toolSchemasSource) sc.toolSchemasSource = as_xstrdup(sc.name);
        if (t->n == cap) { cap = cap ? 2 * cap : 64; t->v = as_xrealloc(t->v, cap * sizeof *t->v); }
        t->v[t->n] = sc;
        index_row(t, t->n);
        t->n++;
    }
    as_in_close(in);
    as_json_free(&j);
    as_buf_free(&msg);
    return problems;
}

// ---------------------------------------------------------------- name index
// Rows by name: open addressing over FNV-1a, the row index + 1 in each slot,
// at most half full. Built as as_table_load appends rows.

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

// The slot of name: its row's, or the empty one where it would go.
static size_t name_slot(const as_table *t, const char *name)
{
    size_t m = t->nslot - 1, k = name_hash(name) & m;
    while (t->slot[k] && strcmp(t->v[t->slot[k] - 1].name, name)) k = (k + 1) & m;
    return k;
}

static void index_row(as_table *t, size_t i)
{
    if (2 * (t->n + 1) > t->nslot) {
        free(t->slot);
        t->nslot = t->nslot ? 2 * t->nslot : 128;
        while (2 * (t->n + 1) > t->nslot) t->nslot *= 2;
        t->slot = calloc(t->nslot, sizeof *t->slot);
        if (!t->slot) as_die(AS_TROUBLE, "out of memory");
        for (size_t k = 0; k < t->n; k++) if (k != i) t->slot[name_slot(t, t->v[k].name)] = k + 1;
    }
    t->slot[name_slot(t, t->v[i].name)] = i + 1;
}

const as_scenario *as_table_find(const as_table *t, const char *name)
{
    if (!t->nslot) {   // a table built by hand
        for (size_t i = 0; i < t->n; i++)
            if (!strcmp(t->v[i].name, name)) return &t->v[i];
        return NULL;
    }
    size_t k = t->slot[name_slot(t, name)];
    return k ? &t->v[k - 1] : NULL;
}

void as_table_free(as_table *t)
{
    for (size_t i = 0; i < t->n; i++) scen_free(&t->v[i]);
    free(t->v);
    free(t->slot);
    free(t->path);
    memset(t, 0, sizeof *t);
}

// ----------------------------------------------------------------- header pins

static int find_idx(const as_table *t, const char *name)
{
    const as_scenario *s = as_table_find(t, name);
    return s ? (int)(s - t->v) : -1;
}

// Resolves a pin's prompt or schema source; reports and returns -1 when unusable.
static int resolve_source(const as_table *t, int pin, int prompt, as_report_fn fn, void *ctx, size_t *np, as_buf *msg)
{
    const as_scenario *p = &t->v[pin];
    const char *field = prompt ? "systemPromptSource" : "toolSchemasSource";
    const char *label = prompt ? "system prompt" : "tool schemas";
    const char *file = prompt ? "system-prompt.expected.md" : "tool-schemas.expected.json";
    const char *src = prompt ? p->systemPromptSource : p->toolSchemasSource;
    int k = find_idx(t, src);
    const as_scenario *q = k >= 0 ? &t->v[k] : NULL;
    const char *qsrc = q ? (prompt ? q->systemPromptSource : q->toolSchemasSource) : NULL;
    if (!strcmp(src, "<not-included>"))
        as_buf_printf(msg, "%s: %s names \"<not-included>\", a pin left out of this tree, so the %s sidecar (%s) has no source here; add that scenario or name an included pin",
                      p->name, field, label, file);
    else if (!q)
        as_buf_printf(msg, "%s: %s names unknown scenario \"%s\"; name a header-pinning scenario of the table", p->name, field, src);
    else if (!q->pinsHeader)
        as_buf_printf(msg, "%s: %s names \"%s\", which does not pin a header; name a header-pinning scenario", p->name, field, src);
    else if (strcmp(qsrc, q->name))
        as_buf_printf(msg, "%s: %s names \"%s\", which does not own its %s sidecar (it takes it from \"%s\"); name the owner", p->name, field, src, label, qsrc);
    else if (q->expectedHeaderChanges != p->expectedHeaderChanges)
        as_buf_printf(msg, "%s: %s names \"%s\", which declares %lld expected header changes, not %lld; shared sidecars need equal counts",
                      p->name, field, src, (long long)q->expectedHeaderChanges, (long long)p->expectedHeaderChanges);
    else
        return k;
    report(fn, ctx, t->path, p->line, msg);
    (*np)++;
    return -1;
}

// 1 when row s is of header class cls (a transcript-only row is of none).
static int in_class(const as_scenario *s, const char *cls)
{
    return s->sessionLog && !strcmp(s->headerClass, cls);
}

size_t as_table_pins(const as_table *t, as_pinrole *roles, as_report_fn fn, void *ctx)
{
    size_t np = 0;
    as_buf msg = {0};
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        roles[i] = (as_pinrole){-1, -1, -1, 0, 0};
        if (s->pinsHeader || !s->sessionLog) continue;
        for (int w = 0; w < 2; w++) {
            if (!(s->set & (w ? AS_F_SCHEMASRC : AS_F_PROMPTSRC))) continue;
            as_buf_printf(&msg, "%s: %s is only valid on a header-pinning scenario; set pinsHeader or drop the field",
                          s->name, w ? "toolSchemasSource" : "systemPromptSource");
            report(fn, ctx, t->path, s->line, &msg); np++;
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const as_scenario *s = &t->v[i];
        int first = s->sessionLog;
        for (size_t k = 0; k < i && first; k++) first = !in_class(&t->v[k], s->headerClass);
        if (!first) continue;
        int pin = -1;
        for (size_t k = i; k < t->n; k++) {
            if (!in_class(&t->v[k], s->headerClass) || !t->v[k].pinsHeader) continue;
            if (pin < 0) { pin = (int)k; continue; }
            as_buf_printf(&msg, "header class \"%s\" is pinned by both %s and %s; keep pinsHeader on one",
                          s->headerClass, t->v[pin].name, t->v[k].name);
            report(fn, ctx, t->path, t->v[k].line, &msg); np++;
        }
        if (pin < 0) {
            as_buf_printf(&msg, "header class \"%s\" has no pin (needed by ", s->headerClass);
            int any = 0;
            for (size_t k = i; k < t->n; k++)
                if (in_class(&t->v[k], s->headerClass)) { as_buf_printf(&msg, "%s%s", any ? ", " : "", t->v[k].name); any = 1; }
            as_buf_puts(&msg, "); set pinsHeader on one of its scenarios or add its pinning scenario");
            report(fn, ctx, t->path, s->line, &msg); np++;
        }
        for (size_t k = i; k < t->n; k++)
            if (in_class(&t->v[k], s->headerClass)) roles[k].pin = pin;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (!t->v[i].pinsHeader || roles[i].pin != (int)i) continue;
        roles[i].prompt_src = resolve_source(t, (int)i, 1, fn, ctx, &np, &msg);
        roles[i].schema_src = resolve_source(t, (int)i, 0, fn, ctx, &np, &msg);
        if (roles[i].prompt_src >= 0) roles[roles[i].prompt_src].owns_prompt = 1;
        if (roles[i].schema_src >= 0) roles[roles[i].schema_src].owns_schemas = 1;
    }
    as_buf_free(&msg);
    return np;
}

// ---------------------------------------------------------------- input.json

static const char *const opnames[] = {
    "?", "initialize", "newSession", "newSessionExpectError", "prompt", "promptContent",
    "promptAndWaitForAgentMessage", "promptExpectError", "promptAndCancel", "waitForFile",
    "waitForTurnStart", "waitForTurnEnd", "waitForSubagentTurnEnd", "waitForGoalPhase",
    "waitForInboxMessage", "waitForTitleAfterTurnEnd", "waitForEventAfterTurnEnd", "cancel",
    "waitForSessionUpdate",
};

const char *as_op_name(as_op op)
{
    return (unsigned)op < sizeof opnames / sizeof *opnames ? opnames[op] : "?";
}

// Field kinds of step members.
enum { K_STR = 1, K_POSINT, K_NNINT, K_STRARR, K_CONTENT, K_WAITFILE, K_PHASE };
typedef struct { const char *key; int kind; int required; } stepfield;
static const stepfield op_fields[][4] = {
    [AS_OP_INITIALIZE] = {{0}},
    [AS_OP_NEWSESSION] = {{0}},
    [AS_OP_NEWSESSIONEXPECTERROR] = {{"additionalDirectories", K_STRARR, 0}},
    [AS_OP_PROMPT] = {{"text", K_STR, 1}},
    [AS_OP_PROMPTCONTENT] = {{"content", K_CONTENT, 1}},
    [AS_OP_PROMPTANDWAITFORAGENTMESSAGE] = {{"text", K_STR, 1}, {"waitForText", K_STR, 1}},
    [AS_OP_PROMPTEXPECTERROR] = {{"text", K_STR, 1}},
    [AS_OP_PROMPTANDCANCEL] = {{"text", K_STR, 1}, {"waitForFile", K_WAITFILE, 0}, {"waitForSessionUpdate", K_STR, 0}},
    [AS_OP_WAITFORFILE] = {{"path", K_STR, 1}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORTURNSTART] = {{"minimumTurn", K_POSINT, 0}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORTURNEND] = {{"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORSUBAGENTTURNEND] = {{"child", K_POSINT, 0}, {"minimumTurn", K_POSINT, 0}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORGOALPHASE] = {{"phase", K_PHASE, 1}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORINBOXMESSAGE] = {{"text", K_STR, 1}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFORTITLEAFTERTURNEND] = {{"timeoutMs", K_POSINT, 0}},
    [AS_OP_WAITFOREVENTAFTERTURNEND] = {{"type", K_STR, 1}, {"timeoutMs", K_POSINT, 0}},
    [AS_OP_CANCEL] = {{"waitForFile", K_WAITFILE, 0}},
    [AS_OP_WAITFORSESSIONUPDATE] = {{"sessionUpdate", K_STR, 1}, {"timeoutMs", K_POSINT, 0}},
};

static const char *kind_name(int k)
{
    switch (k) {
    case K_STR: return "a string";
    case K_POSINT: return "a positive integer";
    case K_STRARR: return "an array of strings";
    case K_CONTENT: return "an array of ACP content block objects (each with a string \"type\")";
    case K_WAITFILE: return "an object {\"path\": string, \"timeoutMs\"?: positive integer}";
    case K_PHASE: return "one of \"active\", \"paused\", \"blocked\", \"complete\"";
    default: return "?";
    }
}

static int posint(const as_json *j, int v)
{
    int64_t n;
    return j->t[v].type == AS_JNUM && as_json_int(j, v, &n) && n > 0;
}

static int kind_ok(const as_json *j, int v, int kind)
{
    const as_tok *t = &j->t[v];
    switch (kind) {
    case K_STR: return t->type == AS_JSTR;
    case K_POSINT: return posint(j, v);
    case K_STRARR:
        if (t->type != AS_JARR) return 0;
        for (int e = as_json_first(j, v); e >= 0; e = as_json_nextel(j, e))
            if (j->t[e].type != AS_JSTR) return 0;
        return 1;
    case K_CONTENT:
        if (t->type != AS_JARR || t->count == 0) return 0;
        for (int e = as_json_first(j, v); e >= 0; e = as_json_nextel(j, e)) {
            int ty;
            if (j->t[e].type != AS_JOBJ || (ty = as_json_get(j, e, "type")) < 0 || j->t[ty].type != AS_JSTR) return 0;
        }
        return 1;
    case K_WAITFILE: {
        if (t->type != AS_JOBJ) return 0;
        int seen = 0;
        for (int k = as_json_firstkey(j, v); k >= 0; k = as_json_nextkey(j, k)) {
            if (as_json_streq(j, k, "path") && j->t[k + 1].type == AS_JSTR) seen = 1;
            else if (!(as_json_streq(j, k, "timeoutMs") && posint(j, k + 1))) return 0;
        }
        return seen;
    }
    case K_PHASE:
        return t->type == AS_JSTR && (as_json_streq(j, v, "active") || as_json_streq(j, v, "paused")
               || as_json_streq(j, v, "blocked") || as_json_streq(j, v, "complete"));
    }
    return 0;
}

// The file a step waits for is looked up beneath the cwd: confine.h's rule.
static void check_wait_path(as_input *in, int st, size_t idx, as_op op, as_report_fn fn, void *ctx, size_t *problems, as_buf *msg)
{
    const as_json *j = &in->j;
    int wf = op == AS_OP_WAITFORFILE ? st : as_json_get(j, st, "waitForFile");
    int pt = wf >= 0 && j->t[wf].type == AS_JOBJ ? as_json_get(j, wf, "path") : -1;
    if (pt < 0 || j->t[pt].type != AS_JSTR) return;
    as_buf b = {0};
    as_json_str(j, pt, &b);
    const char *why = "a NUL in a path";
    if (!b.p) as_buf_puts(&b, "");
    if (memchr(b.p, 0, b.n) || as_rel_check(b.p, &why)) {
        as_buf_printf(msg, "steps[%zu] (%s): the file to wait for, ", idx, opnames[op]);
        as_buf_put(msg, as_tok_p(j, pt), as_tok_len(j, pt) > 60 ? 60 : as_tok_len(j, pt));
        as_buf_printf(msg, ", must be a path beneath the cwd: %s", why);
        report(fn, ctx, in->path, as_line_of(j->s, j->t[pt].start), msg); (*problems)++;
    }
    as_buf_free(&b);
}

static void check_step(as_input *in, int st, size_t idx, as_report_fn fn, void *ctx, size_t *problems, as_buf *msg)
{
    const as_json *j = &in->j;
    long ln = as_line_of(j->s, j->t[st].start);
    as_step step = {AS_OP_UNKNOWN, st, ln};
    if (j->t[st].type != AS_JOBJ) {
        as_buf_printf(msg, "steps[%zu] must be an object with an \"op\"", idx);
        report(fn, ctx, in->path, ln, msg); (*problems)++;
        return;
    }
    int op = as_json_get(j, st, "op");
    if (op < 0 || j->t[op].type != AS_JSTR) {
        as_buf_printf(msg, "steps[%zu] has no string \"op\"", idx);
        report(fn, ctx, in->path, ln, msg); (*problems)++;
        return;
    }
    for (int o = AS_OP_INITIALIZE; o <= AS_OP_LAST; o++)
        if (as_json_streq(j, op, opnames[o])) step.op = (as_op)o;
    if (step.op == AS_OP_UNKNOWN) {
        as_buf_printf(msg, "steps[%zu]: unknown op ", idx);
        as_buf_put(msg, as_tok_p(j, op), as_tok_len(j, op) > 60 ? 60 : as_tok_len(j, op));
        as_buf_puts(msg, "; see acpsnap-scenarios(5) for the ops");
        report(fn, ctx, in->path, ln, msg); (*problems)++;
        return;
    }
    const stepfield *sf = op_fields[step.op];
    size_t before = *problems;
    for (int k = as_json_firstkey(j, st); k >= 0; k = as_json_nextkey(j, k)) {
        if (as_json_streq(j, k, "op")) continue;
        const stepfield *f = NULL;
        for (int i = 0; i < 4 && sf[i].key && !f; i++)
            if (as_json_streq(j, k, sf[i].key)) f = &sf[i];
        if (!f) {
            as_buf_printf(msg, "steps[%zu] (%s): unknown field ", idx, opnames[step.op]);
            as_buf_put(msg, as_tok_p(j, k), as_tok_len(j, k) > 60 ? 60 : as_tok_len(j, k));
            report(fn, ctx, in->path, as_line_of(j->s, j->t[k].start), msg); (*problems)++;
        } else if (!kind_ok(j, k + 1, f->kind)) {
            as_buf_printf(msg, "steps[%zu] (%s): \"%s\" must be %s", idx, opnames[step.op], f->key, kind_name(f->kind));
            report(fn, ctx, in->path, as_line_of(j->s, j->t[k].start), msg); (*problems)++;
        }
    }
    for (int i = 0; i < 4 && sf[i].key; i++) {
        if (!sf[i].required || as_json_get(j, st, sf[i].key) >= 0) continue;
        as_buf_printf(msg, "steps[%zu] (%s): missing \"%s\"", idx, opnames[step.op], sf[i].key);
        report(fn, ctx, in->path, ln, msg); (*problems)++;
    }
    if (*problems == before) check_wait_path(in, st, idx, step.op, fn, ctx, problems, msg);
    if (*problems == before) in->steps[in->nsteps++] = step;
}

// "client": the client capabilities the drive advertises and serves for this
// scenario, an array of distinct "fs-read", "fs-write", "terminal" (maybe
// empty). Returns the number of problems.
static size_t check_client(as_input *in, int c, as_report_fn fn, void *ctx, as_buf *msg)
{
    const as_json *j = &in->j;
    static const char *const names[] = { "fs-read", "fs-write", "terminal" };
    int ok = j->t[c].type == AS_JARR;
    if (ok) in->client = as_xmalloc((j->t[c].count + 1) * sizeof(char *));
    for (int e = ok ? as_json_first(j, c) : -1; ok && e >= 0; e = as_json_nextel(j, e)) {
        int known = 0;
        for (size_t i = 0; i < 3 && j->t[e].type == AS_JSTR; i++) known |= as_json_streq(j, e, names[i]);
        for (size_t i = 0; known && i < in->nclient; i++) known = !as_json_streq(j, e, in->client[i]);
        if (!known) ok = 0;
        else in->client[in->nclient++] = tokstr(j, e);
    }
    in->has_client = 1;
    if (ok) return 0;
    as_buf_puts(msg, "\"client\" must be an array of distinct \"fs-read\", \"fs-write\", \"terminal\"");
    report(fn, ctx, in->path, as_line_of(j->s, j->t[c].start), msg);
    return 1;
}

size_t as_input_load(const char *path, as_input *in, as_report_fn fn, void *ctx)
{
    as_buf src = {0};
    as_read_file(path, &src);
    return as_input_take(path, &src, in, fn, ctx);
}

size_t as_input_take(const char *path, as_buf *src, as_input *in, as_report_fn fn, void *ctx)
{
    memset(in, 0, sizeof *in);
    in->path = as_xstrdup(path);
    in->src = *src;
    *src = (as_buf){0};
    as_buf msg = {0};
    size_t problems = 0;
    if (as_json_parse(&in->j, in->src.p ? in->src.p : "", in->src.n) < 0) {
        long ln = as_line_of(in->src.p, in->j.errpos);
        as_buf_printf(&msg, "invalid JSON: %s", in->j.err);
        report(fn, ctx, path, ln, &msg);
        as_buf_free(&msg);
        return 1;
    }
    const as_json *j = &in->j;
    if (j->t[0].type != AS_JOBJ) {
        as_buf_puts(&msg, "the script must be an object {\"steps\": [...]}");
        report(fn, ctx, path, 1, &msg);
        as_buf_free(&msg);
        return 1;
    }
    int steps = -1, answers = -1, client = -1;
    for (int k = as_json_firstkey(j, 0); k >= 0; k = as_json_nextkey(j, k)) {
        if (as_json_streq(j, k, "steps")) steps = k + 1;
        else if (as_json_streq(j, k, "permissionAnswers")) answers = k + 1;
        else if (as_json_streq(j, k, "client")) client = k + 1;
        else {
            as_buf_puts(&msg, "unknown top-level field ");
            as_buf_put(&msg, as_tok_p(j, k), as_tok_len(j, k) > 60 ? 60 : as_tok_len(j, k));
            as_buf_puts(&msg, "; the script has \"steps\", \"permissionAnswers\" and \"client\"");
            report(fn, ctx, path, as_line_of(j->s, j->t[k].start), &msg); problems++;
        }
    }
    if (steps < 0 || j->t[steps].type != AS_JARR) {
        as_buf_puts(&msg, steps < 0 ? "missing \"steps\"" : "\"steps\" must be an array");
        report(fn, ctx, path, steps < 0 ? 1 : as_line_of(j->s, j->t[steps].start), &msg); problems++;
    } else {
        in->steps = as_xmalloc((j->t[steps].count + 1) * sizeof *in->steps);
        size_t idx = 0;
        for (int e = as_json_first(j, steps); e >= 0; e = as_json_nextel(j, e))
            check_step(in, e, idx++, fn, ctx, &problems, &msg);
    }
    if (answers >= 0) {
        int ok = j->t[answers].type == AS_JARR;
        if (ok) {
            in->answers = as_xmalloc((j->t[answers].count + 1) * sizeof(char *));
            size_t idx = 0;
            for (int e = as_json_first(j, answers); e >= 0; e = as_json_nextel(j, e), idx++) {
                int kd = j->t[e].type == AS_JOBJ && j->t[e].count == 1 ? as_json_get(j, e, "kind") : -1;
                if (kd < 0 || j->t[kd].type != AS_JSTR
                    || !(as_json_streq(j, kd, "allow_once") || as_json_streq(j, kd, "allow_always")
                         || as_json_streq(j, kd, "reject_once") || as_json_streq(j, kd, "reject_always"))) {
                    as_buf_printf(&msg, "permissionAnswers[%zu] must be {\"kind\": \"allow_once\"|\"allow_always\"|\"reject_once\"|\"reject_always\"}", idx);
                    report(fn, ctx, path, as_line_of(j->s, j->t[e].start), &msg); problems++;
                    continue;
                }
                in->answers[in->nanswers++] = tokstr(j, kd);
            }
        } else {
            as_buf_puts(&msg, "\"permissionAnswers\" must be an array");
            report(fn, ctx, path, as_line_of(j->s, j->t[answers].start), &msg); problems++;
        }
    }
    if (client >= 0) problems += check_client(in, client, fn, ctx, &msg);
    as_buf_free(&msg);
    return problems;
}

size_t as_input_log_waits(const as_input *in, as_report_fn fn, void *ctx)
{
    size_t np = 0;
    as_buf msg = {0};
    for (size_t i = 0; i < in->nsteps; i++) {
        const as_step *st = &in->steps[i];
        int waits = st->op >= AS_OP_WAITFORTURNSTART && st->op <= AS_OP_WAITFOREVENTAFTERTURNEND;
        if (st->op == AS_OP_PROMPTANDCANCEL && as_json_get(&in->j, st->tok, "waitForFile") < 0) waits = 1;
        if (!waits) continue;
        as_buf_printf(&msg, "steps[%zu] (%s) waits on the session log, which a \"sessionLog\": false scenario does not have; wait on a file (waitForFile) instead",
                      i, opnames[st->op]);
        report(fn, ctx, in->path, st->line, &msg); np++;
    }
    as_buf_free(&msg);
    return np;
}

void as_input_free(as_input *in)
{
    for (size_t i = 0; i < in->nanswers; i++) free(in->answers[i]);
    for (size_t i = 0; i < in->nclient; i++) free(in->client[i]);
    free(in->answers);
    free(in->client);
    free(in->steps);
    as_json_free(&in->j);
    as_buf_free(&in->src);
    free(in->path);
    memset(in, 0, sizeof *in);
}
