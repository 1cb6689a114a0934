// replay.c - the replay model (acpsnap-replay(5)): entries, scripts, overrides, derivation.
#include "acpsnap.h"
#include "confine.h"
#include "replay.h"
#include "rx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const as_chunk_type_names[] = {
    "block-start", "text-delta", "reasoning-delta", "tool-call-delta",
    "block-end", "usage", "finish", NULL
};

static const char MSG_THROWN[] =
    "model call %s ended without a finish chunk (a thrown stream); "
    "this scenario needs a replay.override.json sidecar";

// ---------------------------------------------------------------- helpers

static int chunk_type_of(const as_json *j, int tok)
{
    if (j->t[tok].type != AS_JSTR) return -1;
    for (int k = 0; as_chunk_type_names[k]; k++)
        if (as_json_streq(j, tok, as_chunk_type_names[k])) return k;
    return -1;
}

static void seterr(as_replay_err *err, long pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(as_replay_err *err, long pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->pos = pos;
}

// A short JSON rendering of token tok for messages (JSON.stringify-like for
// strings, the compact source bytes otherwise), cut at 48 bytes.
static void short_repr(const as_json *j, int tok, char *dst, size_t cap)
{
    as_buf b = {0}, d = {0};
    if (tok < 0) {
        as_buf_puts(&b, "undefined");
    } else if (j->t[tok].type == AS_JSTR) {
        as_json_str(j, tok, &d);
        as_jstr_write(&b, d.p ? d.p : "", d.n);
    } else {
        as_json_compact(as_tok_p(j, tok), as_tok_len(j, tok), &b);
    }
    if (b.n > 48) {
        size_t cut = 45;
        while (cut > 0 && ((unsigned char)b.p[cut] & 0xC0) == 0x80) cut--;  // whole UTF-8 chars
        b.n = cut;
        as_buf_puts(&b, "...");
    }
    snprintf(dst, cap, "%s", b.p ? b.p : "");
    as_buf_free(&b);
    as_buf_free(&d);
}

static char *decode_str(const as_json *j, int tok)
{
    as_buf b = {0};
    as_json_str(j, tok, &b);
    if (!b.p) return as_xstrdup("");
    return b.p;   // NUL-terminated; ownership passes to the caller
}

static void pos_linecol(const char *s, size_t pos, long *line, long *col)
{
    long l = 1;
    size_t bol = 0;
    for (size_t i = 0; i < pos; i++)
        if (s[i] == '\n') { l++; bol = i + 1; }
    *line = l;
    *col = (long)(pos - bol) + 1;
}

// ---------------------------------------------------------------- entries

static int read_chunks(const as_json *j, int tok, const char *where, as_replay_err *err)
{
    if (tok < 0 || j->t[tok].type != AS_JARR) {
        seterr(err, tok < 0 ? -1 : (long)j->t[tok].start, "%s chunks must be an array", where);
        return -1;
    }
    int i = 0;
    for (int c = as_json_first(j, tok); c >= 0; c = as_json_nextel(j, c), i++) {
        int ty = j->t[c].type == AS_JOBJ ? as_json_get(j, c, "type") : -1;
        if (ty < 0 || chunk_type_of(j, ty) < 0) {
            seterr(err, (long)j->t[ty >= 0 ? ty : c].start,
                   "%s.chunks[%d] must have a known StreamChunk type", where, i);
            return -1;
        }
    }
    return 0;
}

static int nonempty_str(const as_json *j, int tok)
{
    return tok >= 0 && j->t[tok].type == AS_JSTR && as_tok_len(j, tok) > 2;
}

// A readyFile is created beneath the session cwd (or --ready-dir): it must
// obey the path rule of confine.h.
static int ready_file_check(const as_json *j, int rf, const char *where, as_replay_err *err)
{
    as_buf b = {0};
    as_json_str(j, rf, &b);
    const char *why = "a NUL in a path";
    int bad = memchr(b.p, 0, b.n) || as_rel_check(b.p, &why);
    as_buf_free(&b);
    if (!bad) return 0;
    char repr[64];
    short_repr(j, rf, repr, sizeof repr);
    seterr(err, (long)j->t[rf].start, "%s readyFile %s must be a relative path beneath the cwd: %s", where, repr, why);
    return -1;
}

// Validates the entry at token tok of j (positions are j's source offsets).
static int entry_check(const as_json *j, int tok, const char *where, as_replay_err *err)
{
    // hasExactKeys of the reference, per kind
    static const as_key k_chunks[] = {AS_KEY("kind"), AS_KEY("chunks")};
    static const as_key k_throw[] = {AS_KEY("kind"), AS_KEY("chunks"), AS_KEY("message"), AS_KEY("code"),
                                     AS_KEY("status")};
    static const as_key k_hang_rf[] = {AS_KEY("kind"), AS_KEY("readyFile")};
    long at = (long)j->t[tok].start;
    if (j->t[tok].type != AS_JOBJ) {
        seterr(err, at, "%s must be an object", where);
        return -1;
    }
    int kind = as_json_get(j, tok, "kind");
    if (kind >= 0 && as_json_streq(j, kind, "chunks")) {
        if (!as_json_exact(j, tok, k_chunks, AS_NKEYS(k_chunks), NULL)) {
            seterr(err, at, "%s has invalid chunks-entry fields (want exactly kind, chunks)", where);
            return -1;
        }
        return read_chunks(j, as_json_get(j, tok, "chunks"), where, err);
    }
    if (kind >= 0 && as_json_streq(j, kind, "throw")) {
        int st = as_json_get(j, tok, "status");   // replay-serve's addition: the HTTP status of an early throw
        if (!as_json_exact(j, tok, k_throw, AS_NKEYS(k_throw) - (st < 0), NULL)) {
            seterr(err, at, "%s has invalid throw-entry fields (want exactly kind, chunks, message, code)", where);
            return -1;
        }
        int64_t sv = 0;
        if (st >= 0 && !(as_json_int(j, st, &sv) && sv >= 400 && sv <= 599)) {
            seterr(err, (long)j->t[st].start, "%s status must be an integer from 400 to 599", where);
            return -1;
        }
        int m = as_json_get(j, tok, "message"), c = as_json_get(j, tok, "code");
        if (!nonempty_str(j, m)) {
            seterr(err, (long)j->t[m].start, "%s message must be a non-empty string", where);
            return -1;
        }
        if (!nonempty_str(j, c)) {
            seterr(err, (long)j->t[c].start, "%s code must be a non-empty string", where);
            return -1;
        }
        return read_chunks(j, as_json_get(j, tok, "chunks"), where, err);
    }
    if (kind >= 0 && as_json_streq(j, kind, "hang")) {
        int rf = as_json_get(j, tok, "readyFile");
        if (!as_json_exact(j, tok, k_hang_rf, rf < 0 ? 1 : 2, NULL)) {   // kind, readyFile?
            seterr(err, at, "%s has invalid hang-entry fields (want kind and optional readyFile)", where);
            return -1;
        }
        if (rf >= 0 && !nonempty_str(j, rf)) {
            seterr(err, (long)j->t[rf].start, "%s readyFile must be a non-empty string", where);
            return -1;
        }
        return rf >= 0 ? ready_file_check(j, rf, where, err) : 0;
    }
    char repr[64];
    short_repr(j, kind, repr, sizeof repr);
    seterr(err, kind >= 0 ? (long)j->t[kind].start : at, "%s has unknown kind %s", where, repr);
    return -1;
}

// Fills e from a validated entry: compact bytes, chunk spans, decoded fields.
static void entry_fill(const as_json *src, int tok, as_replay_entry *e)
{
    memset(e, 0, sizeof *e);
    as_buf b = {0};
    as_json_compact(as_tok_p(src, tok), as_tok_len(src, tok), &b);
    as_json j = {0};
    if (as_json_parse(&j, b.p, b.n) != 0)   // cannot happen: the source was valid
        as_die(AS_TROUBLE, "internal error: compacted entry does not parse");
    int kind = as_json_get(&j, 0, "kind");
    e->kind = as_json_streq(&j, kind, "chunks") ? AS_REPLAY_CHUNKS
            : as_json_streq(&j, kind, "throw") ? AS_REPLAY_THROW : AS_REPLAY_HANG;
    int arr = as_json_get(&j, 0, "chunks");
    if (arr >= 0 && j.t[arr].count > 0) {
        e->chunk = as_xmalloc(j.t[arr].count * sizeof *e->chunk);
        for (int c = as_json_first(&j, arr); c >= 0; c = as_json_nextel(&j, c)) {
            as_replay_chunk *k = &e->chunk[e->nchunks++];
            k->off = j.t[c].start;
            k->len = j.t[c].end - j.t[c].start;
            k->type = (uint8_t)chunk_type_of(&j, as_json_get(&j, c, "type"));
        }
    }
    if (e->kind == AS_REPLAY_THROW) {
        e->message = decode_str(&j, as_json_get(&j, 0, "message"));
        e->code = decode_str(&j, as_json_get(&j, 0, "code"));
        int st = as_json_get(&j, 0, "status");
        int64_t sv = 0;
        if (st >= 0 && as_json_int(&j, st, &sv)) e->status = (int)sv;
    }
    int rf = as_json_get(&j, 0, "readyFile");
    if (e->kind == AS_REPLAY_HANG && rf >= 0) e->ready_file = decode_str(&j, rf);
    as_json_free(&j);
    e->json = b.p;
    e->len = b.n;
}

int as_replay_entry_parse(const char *s, size_t len, const char *where,
                          as_replay_entry *e, as_replay_err *err)
{
    as_json j = {0};
    int rc = -1;
    if (as_json_parse(&j, s, len) != 0) {
        seterr(err, (long)j.errpos, "invalid JSON: %s", j.err);
    } else if (entry_check(&j, 0, where, err) == 0) {
        entry_fill(&j, 0, e);
        rc = 0;
    }
    as_json_free(&j);
    return rc;
}

void as_replay_entry_free(as_replay_entry *e)
{
    free(e->json);
    free(e->chunk);
    free(e->message);
    free(e->code);
    free(e->ready_file);
    memset(e, 0, sizeof *e);
}

// ---------------------------------------------------------------- serving: the members of each chunk

// What a member must be: a string, a non-negative safe integer or an object.
enum { M_STR, M_INT, M_OBJ };
typedef struct { const char *key; uint8_t type, required; } member;

static const char *const member_what[] = {"a string", "a non-negative integer", "an object"};

// Checks member `key` of object obj; 0, or -1 with err set.
static int member_check(const as_json *j, int obj, const member *m, const char *where, as_replay_err *err)
{
    int v = as_json_get(j, obj, m->key);
    if (v < 0) {
        if (!m->required) return 0;
        seterr(err, (long)j->t[obj].start, "%s: \"%s\" must be %s (it is missing)", where, m->key, member_what[m->type]);
        return -1;
    }
    int64_t x = 0;
    int ok = m->type == M_STR ? j->t[v].type == AS_JSTR
           : m->type == M_OBJ ? j->t[v].type == AS_JOBJ
           : as_json_int(j, v, &x) && x >= 0;
    if (ok) return 0;
    char repr[64];
    short_repr(j, v, repr, sizeof repr);
    seterr(err, (long)j->t[v].start, "%s: \"%s\" must be %s, not %s", where, m->key, member_what[m->type], repr);
    return -1;
}

static int members_check(const as_json *j, int obj, const member *ms, size_t n, const char *where, as_replay_err *err)
{
    for (size_t k = 0; k < n; k++)
        if (member_check(j, obj, &ms[k], where, err)) return -1;
    return 0;
}

#define CHECK_MEMBERS(j, obj, ms, where, err) members_check((j), (obj), (ms), sizeof(ms) / sizeof *(ms), (where), (err))

// The whole block of a block-end: its type, and the fields the wire carries.
static int block_check(const as_json *j, int blk, const char *where, as_replay_err *err)
{
    static const member m_type[] = {{"type", M_STR, 1}};
    static const member m_text[] = {{"text", M_STR, 1}};
    static const member m_tool[] = {{"id", M_STR, 1}, {"name", M_STR, 0}, {"arguments", M_STR, 1}};
    char w[160];
    snprintf(w, sizeof w, "%s block", where);
    if (CHECK_MEMBERS(j, blk, m_type, w, err)) return -1;
    int ty = as_json_get(j, blk, "type");
    if (as_json_streq(j, ty, "text") || as_json_streq(j, ty, "reasoning")) return CHECK_MEMBERS(j, blk, m_text, w, err);
    if (as_json_streq(j, ty, "tool-call")) return CHECK_MEMBERS(j, blk, m_tool, w, err);
    return 0;
}

static int finish_check(const as_json *j, int c, const char *where, as_replay_err *err)
{
    static const member m_kind[] = {{"kind", M_STR, 1}, {"failure", M_OBJ, 0}};
    static const member m_code[] = {{"code", M_STR, 0}};
    char w[160];
    snprintf(w, sizeof w, "%s reason", where);
    int r = as_json_get(j, c, "reason");
    if (CHECK_MEMBERS(j, r, m_kind, w, err)) return -1;
    int f = as_json_get(j, r, "failure");
    snprintf(w, sizeof w, "%s reason.failure", where);
    return f >= 0 ? CHECK_MEMBERS(j, f, m_code, w, err) : 0;
}

// The members of chunk c by its type (acpsnap-replay(5), "Stream chunks").
static int chunk_members(const as_json *j, int c, int type, const char *where, as_replay_err *err)
{
    static const member m_start[] = {{"index", M_INT, 1}, {"blockType", M_STR, 1}};
    static const member m_delta[] = {{"index", M_INT, 1}, {"text", M_STR, 1}};
    static const member m_tool[] = {{"index", M_INT, 1}, {"id", M_STR, 1}, {"name", M_STR, 0}, {"argumentsDelta", M_STR, 1}};
    static const member m_end[] = {{"index", M_INT, 1}, {"block", M_OBJ, 1}};
    static const member m_usage[] = {{"usage", M_OBJ, 1}};
    static const member m_tokens[] = {{"inputTokens", M_INT, 0}, {"outputTokens", M_INT, 0},
                                      {"cacheReadTokens", M_INT, 0}, {"reasoningTokens", M_INT, 0}};
    static const member m_finish[] = {{"reason", M_OBJ, 1}};
    switch (type) {
    case AS_CHUNK_BLOCK_START: return CHECK_MEMBERS(j, c, m_start, where, err);
    case AS_CHUNK_TEXT_DELTA: case AS_CHUNK_REASONING_DELTA: return CHECK_MEMBERS(j, c, m_delta, where, err);
    case AS_CHUNK_TOOL_CALL_DELTA: return CHECK_MEMBERS(j, c, m_tool, where, err);
    case AS_CHUNK_BLOCK_END:
        return CHECK_MEMBERS(j, c, m_end, where, err) || block_check(j, as_json_get(j, c, "block"), where, err) ? -1 : 0;
    case AS_CHUNK_USAGE: {
        if (CHECK_MEMBERS(j, c, m_usage, where, err)) return -1;
        char w[160];
        snprintf(w, sizeof w, "%s usage", where);
        return CHECK_MEMBERS(j, as_json_get(j, c, "usage"), m_tokens, w, err);
    }
    default:
        return CHECK_MEMBERS(j, c, m_finish, where, err) || finish_check(j, c, where, err) ? -1 : 0;
    }
}

// Every {{fromRequest:…}} in the strings of chunk c must compile.
static int chunk_placeholders(const as_json *j, int c, const char *where, as_replay_err *err)
{
    for (int t = c; t < (int)j->t[c].next; t++) {
        if (j->t[t].type != AS_JSTR || !memmem(as_tok_p(j, t), as_tok_len(j, t), "{{fromRequest:", 14)) continue;
        as_buf s = {0};
        char msg[200];
        as_json_str(j, t, &s);
        int rc = as_replay_placeholders_check(s.p, s.n, msg, sizeof msg);
        as_buf_free(&s);
        if (rc) {
            seterr(err, (long)j->t[t].start, "%s: %s", where, msg);
            return -1;
        }
    }
    return 0;
}

int as_replay_entry_servable(const as_replay_entry *e, const char *where, as_replay_err *err)
{
    as_json j = {0};
    int rc = 0;
    if (e->status && e->nchunks) {   // a status is the answer before any byte of a stream
        char *at = strstr(e->json, "\"status\":");
        seterr(err, at ? (long)(at - e->json) : -1, "%s: a status applies only to a throw without chunks", where);
        return -1;
    }
    for (size_t k = 0; k < e->nchunks && !rc; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        char w[128];
        snprintf(w, sizeof w, "%s chunk %zu (%s)", where, k, as_chunk_type_names[c->type]);
        if (as_json_parse(&j, e->json + c->off, c->len) != 0)   // cannot happen: the entry was valid
            as_die(AS_TROUBLE, "internal error: a chunk of %s does not parse", where);
        rc = chunk_members(&j, 0, c->type, w, err) || chunk_placeholders(&j, 0, w, err) ? -1 : 0;
        if (rc && err->pos >= 0) err->pos += (long)c->off;
    }
    as_json_free(&j);
    return rc;
}

void as_replay_script_push(as_replay_script *sc, as_replay_entry *e)
{
    if (sc->n == sc->cap) {
        sc->cap = sc->cap ? 2 * sc->cap : 16;
        sc->e = as_xrealloc(sc->e, sc->cap * sizeof *sc->e);
    }
    sc->e[sc->n++] = *e;
    memset(e, 0, sizeof *e);
}

void as_replay_script_free(as_replay_script *sc)
{
    for (size_t i = 0; i < sc->n; i++) as_replay_entry_free(&sc->e[i]);
    free(sc->e);
    memset(sc, 0, sizeof *sc);
}

void as_replay_load(const char *path, as_replay_script *sc)
{
    as_in *in = as_in_open(path);
    const char *line;
    size_t len;
    char where[48];
    while (as_in_line(in, &line, &len)) {
        as_replay_entry e;
        as_replay_err err;
        snprintf(where, sizeof where, "entry %zu", sc->n);
        if (as_replay_entry_parse(line, len, where, &e, &err) != 0)
            as_die_at(as_in_name(in), as_in_lineno(in), err.pos + 1, "%s", err.msg);
        as_replay_script_push(sc, &e);
    }
    as_in_close(in);
}

int as_replay_line_servable(const char *line, size_t len, size_t n, as_replay_entry *e, as_replay_err *err)
{
    char where[48];
    snprintf(where, sizeof where, "entry %zu", n);
    if (as_replay_entry_parse(line, len, where, e, err) != 0) return -1;
    if (as_replay_entry_servable(e, where, err) == 0) return 0;
    as_replay_entry_free(e);
    err->pos = -1;
    return -1;
}

void as_replay_load_servable(const char *path, as_replay_script *sc)
{
    as_in *in = as_in_open(path);
    const char *line;
    size_t len;
    while (as_in_line(in, &line, &len)) {
        as_replay_entry e;
        as_replay_err err;
        if (as_replay_line_servable(line, len, sc->n, &e, &err) != 0)
            as_die_at(as_in_name(in), as_in_lineno(in), err.pos + 1, "%s", err.msg);
        as_replay_script_push(sc, &e);
    }
    as_in_close(in);
}

// ---------------------------------------------------------------- overrides

// at: a non-negative safe integer (JavaScript's Number.isSafeInteger; 2.0 and
// 1e2 qualify, as they do in the reference).
static int safe_index(const as_json *j, int tok, size_t *out)
{
    if (j->t[tok].type != AS_JNUM) return 0;
    char tmp[64];
    size_t n = as_tok_len(j, tok);
    if (n >= sizeof tmp) return 0;
    memcpy(tmp, as_tok_p(j, tok), n);
    tmp[n] = 0;
    double v = strtod(tmp, NULL);
    if (!(v >= 0) || v > 9007199254740991.0 || floor(v) != v) return 0;
    *out = (size_t)v;
    return 1;
}

int as_replay_override_parse(const char *s, size_t n, as_replay_override *ov, as_replay_err *err)
{
    static const as_key k_doc[] = {AS_KEY("patches")};
    static const as_key k_patch[] = {AS_KEY("at"), AS_KEY("entry")};
    memset(ov, 0, sizeof *ov);
    as_json j = {0};
    char where[64];
    if (as_json_parse(&j, s ? s : "", n) != 0) {
        seterr(err, (long)j.errpos, "invalid JSON: %s", j.err);
        goto bad;
    }
    if (j.t[0].type == AS_JARR) {
        ov->replace = 1;
        size_t i = 0;
        for (int t = as_json_first(&j, 0); t >= 0; t = as_json_nextel(&j, t), i++) {
            snprintf(where, sizeof where, "entry %zu", i);
            if (entry_check(&j, t, where, err) != 0) goto bad;
            as_replay_entry e;
            entry_fill(&j, t, &e);
            as_replay_script_push(&ov->script, &e);
        }
    } else {
        int arr = as_json_exact(&j, 0, k_doc, AS_NKEYS(k_doc), NULL) ? as_json_get(&j, 0, "patches") : -1;
        if (arr < 0 || j.t[arr].type != AS_JARR) {
            seterr(err, (long)j.t[arr < 0 ? 0 : arr].start,
                   "document must be a ReplayEntry[] or { patches: [...] }");
            goto bad;
        }
        ov->patch = as_xmalloc((j.t[arr].count ? j.t[arr].count : 1) * sizeof *ov->patch);
        size_t i = 0;
        for (int t = as_json_first(&j, arr); t >= 0; t = as_json_nextel(&j, t), i++) {
            as_replay_patch *p = &ov->patch[ov->npatch];
            pos_linecol(s, j.t[t].start, &p->line, &p->col);
            if (!as_json_exact(&j, t, k_patch, AS_NKEYS(k_patch), NULL)) {
                seterr(err, (long)j.t[t].start, "patch %zu must contain exactly at and entry", i);
                goto bad;
            }
            int at = as_json_get(&j, t, "at");
            if (!safe_index(&j, at, &p->at)) {
                seterr(err, (long)j.t[at].start, "patch %zu at must be a non-negative safe integer", i);
                goto bad;
            }
            snprintf(where, sizeof where, "patch %zu.entry", i);
            int et = as_json_get(&j, t, "entry");
            if (entry_check(&j, et, where, err) != 0) goto bad;
            entry_fill(&j, et, &p->entry);
            ov->npatch++;
        }
    }
    as_json_free(&j);
    return 0;
bad:
    as_json_free(&j);
    as_replay_override_free(ov);
    return -1;
}

void as_replay_override_load(const char *path, as_replay_override *ov)
{
    as_buf text = {0};
    as_replay_err err;
    as_read_file(path, &text);
    if (as_replay_override_parse(text.p, text.n, ov, &err) != 0) {
        long line, col;
        pos_linecol(text.p, (size_t)(err.pos < 0 ? 0 : err.pos), &line, &col);
        as_die_at(path, line, col, "%s", err.msg);
    }
    as_buf_free(&text);
}

void as_replay_override_free(as_replay_override *ov)
{
    as_replay_script_free(&ov->script);
    for (size_t i = 0; i < ov->npatch; i++) as_replay_entry_free(&ov->patch[i].entry);
    free(ov->patch);
    memset(ov, 0, sizeof *ov);
}

// Checks the patches against a derived length n, in document order, as the
// reference does: an index past n, then a repeated index. Dies on failure.
void as_replay_patches_check(const as_replay_override *ov, const char *path, size_t n)
{
    for (size_t i = 0; i < ov->npatch; i++) {
        const as_replay_patch *p = &ov->patch[i];
        if (p->at > n)
            as_die_at(path, p->line, p->col,
                      "patch %zu: override patch index %zu out of range "
                      "(derived script has %zu call(s); == length appends)", i, p->at, n);
        for (size_t k = 0; k < i; k++)
            if (ov->patch[k].at == p->at)
                as_die_at(path, p->line, p->col, "patch %zu: duplicate override patch index %zu (as patch %zu)", i, p->at, k);
    }
}

void as_replay_override_apply(as_replay_override *ov, const char *path, as_replay_script *sc)
{
    if (ov->replace) {
        as_replay_script_free(sc);
        *sc = ov->script;
        memset(&ov->script, 0, sizeof ov->script);
        return;
    }
    size_t n = sc->n;
    as_replay_patches_check(ov, path, n);
    for (size_t i = 0; i < ov->npatch; i++) {
        as_replay_patch *p = &ov->patch[i];
        if (p->at == n) {
            as_replay_script_push(sc, &p->entry);
        } else {
            as_replay_entry_free(&sc->e[p->at]);
            sc->e[p->at] = p->entry;
            memset(&p->entry, 0, sizeof p->entry);
        }
    }
}

// ---------------------------------------------------------------- derivation

int64_t as_replay_seed_length(const char *hdr, size_t len, const char *file)
{
    as_json j = {0};
    int64_t v = 0;
    if (as_json_parse(&j, hdr, len) == 0 && j.t[0].type == AS_JOBJ) {
        int t = as_json_get(&j, 0, "seedLength");
        if (t >= 0 && j.t[t].type == AS_JNUM && (!as_json_int(&j, t, &v) || v < 0))
            as_die_at(file, 1, (long)j.t[t].start + 1, "seedLength must be a non-negative integer");
    }
    as_json_free(&j);
    return v;
}

typedef struct {
    as_buf chunks;      // the open call's entry so far: prefix, then its chunks comma-separated
    size_t nchunks;
    as_buf key;         // "<turn>/<step>" of the open call
    long line;          // source line of its first chunk
    as_buf entry;       // scratch for a rebuilt summary call
    size_t emitted;
    as_replay_emit_fn emit;
    void *ctx;
    const char *file;
} deriver;

// The reference's `${turn}/${step}`: strings decoded, other values as written,
// an absent member "undefined".
static void key_part(const as_json *j, int tok, as_buf *out)
{
    if (tok < 0) as_buf_puts(out, "undefined");
    else if (j->t[tok].type == AS_JSTR) as_json_str(j, tok, out);
    else as_buf_put(out, as_tok_p(j, tok), as_tok_len(j, tok));
}

static const char ENTRY_PREFIX[] = "{\"kind\":\"chunks\",\"chunks\":[";

static void emit_entry(deriver *d, as_buf *b)
{
    d->emit(d->ctx, b->p, b->n);
    d->emitted++;
    as_buf_reset(b);
}

// Closes the open call: emits it, or dies when it did not end with a finish.
// The entry is built in place (one copy of the call in memory).
static void close_call(deriver *d, int finished)
{
    if (d->nchunks == 0) return;
    if (!finished) as_die_at(d->file, d->line, 0, MSG_THROWN, d->key.p);
    as_buf_puts(&d->chunks, "]}");
    emit_entry(d, &d->chunks);
    d->nchunks = 0;
}

// A compaction/summary marked llmStreamCall: one call rebuilt from rawOutput.
static void summary_call(deriver *d, const as_event *ev, int data)
{
    const as_json *j = ev->j;
    int raw = as_json_get(j, data, "rawOutput");
    if (raw < 0)
        as_die_at(d->file, ev->lineno, 0, "compaction/summary marks an LLM stream call without rawOutput");
    if (j->t[raw].type != AS_JARR)
        as_die_at(d->file, ev->lineno, 0, "compaction/summary rawOutput must be an array of blocks");
    as_buf *b = &d->entry;
    as_buf_puts(b, ENTRY_PREFIX);
    int i = 0;
    for (int blk = as_json_first(j, raw); blk >= 0; blk = as_json_nextel(j, blk), i++) {
        // blockType: the block's type as written; absent (undefined) when the
        // block has none, as JSON.stringify drops it.
        int ty = j->t[blk].type == AS_JOBJ ? as_json_get(j, blk, "type") : -1;
        as_buf_printf(b, "%s{\"type\":\"block-start\",\"index\":%d", i ? "," : "", i);
        if (ty >= 0) {
            as_buf_puts(b, ",\"blockType\":");
            as_buf_put(b, as_tok_p(j, ty), as_tok_len(j, ty));
        }
        as_buf_printf(b, "},{\"type\":\"block-end\",\"index\":%d,\"block\":", i);
        as_buf_put(b, as_tok_p(j, blk), as_tok_len(j, blk));
        as_buf_putc(b, '}');
    }
    int usage = as_json_get(j, data, "usage");
    if (usage >= 0) {
        as_buf_puts(b, i ? "," : "");
        as_buf_puts(b, "{\"type\":\"usage\",\"usage\":");
        as_buf_put(b, as_tok_p(j, usage), as_tok_len(j, usage));
        as_buf_putc(b, '}');
        i++;
    }
    as_buf_puts(b, i ? "," : "");
    as_buf_puts(b, "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]}");
    emit_entry(d, b);
}

// The event's "type" is one of the two the derivation reads: 1 assistant/chunk,
// 2 compaction/summary, 0 otherwise. Unescaped tags compare as raw bytes.
static int event_kind(const as_event *ev)
{
    static const char chunk[] = "\"assistant/chunk\"", summary[] = "\"compaction/summary\"";
    const as_json *j = ev->j;
    int t = as_json_get(j, 0, "type");
    if (t < 0 || j->t[t].type != AS_JSTR) return 0;
    if (j->t[t].esc)
        return as_json_streq(j, t, "assistant/chunk") ? 1 : as_json_streq(j, t, "compaction/summary") ? 2 : 0;
    const char *p = as_tok_p(j, t);
    size_t n = as_tok_len(j, t);
    if (n == sizeof chunk - 1 && memcmp(p, chunk, n) == 0) return 1;
    if (n == sizeof summary - 1 && memcmp(p, summary, n) == 0) return 2;
    return 0;
}

size_t as_replay_derive(as_sess *s, int skip_seed, as_replay_emit_fn emit, void *ctx)
{
    deriver d = {.emit = emit, .ctx = ctx, .file = as_sess_name(s)};
    int64_t skip = 0;
    if (skip_seed) {
        const char *hdr;
        size_t hlen;
        as_sess_header(s, &hdr, &hlen);
        skip = as_replay_seed_length(hdr, hlen, d.file);
    }
    as_buf key = {0};
    as_event ev;
    as_member m;
    as_sess_shallow(s);   // a member comes as its parts (as_event_member); other events are read at their root
    while (as_sess_next(s, &ev)) {
        if (skip > 0) { skip--; continue; }
        const as_json *j = ev.j;
        int chunk = -1, finish = 0;
        as_buf_reset(&key);
        if (as_event_member(&ev, &m)) {   // a text, reasoning or tool-call delta
            as_buf_put(&key, m.turn.p, m.turn.n);
            as_buf_putc(&key, '/');
            as_buf_put(&key, m.step.p, m.step.n);
        } else {
            int kind = event_kind(&ev);
            if (kind == 0) continue;
            int summary = kind == 2;
            int data = as_json_get(j, 0, "data");
            if (data < 0 || j->t[data].type != AS_JOBJ)
                as_die_at(d.file, ev.lineno, 0, "%s event without a data object",
                          summary ? "compaction/summary" : "assistant/chunk");
            if (summary) {
                close_call(&d, 0);   // an open call here never saw its finish
                int mark = as_json_get(j, data, "llmStreamCall");
                if (mark >= 0 && j->t[mark].type == AS_JTRUE) summary_call(&d, &ev, data);
                continue;
            }
            chunk = as_json_get(j, data, "chunk");
            if (chunk < 0 || j->t[chunk].type != AS_JOBJ)
                as_die_at(d.file, ev.lineno, 0, "assistant/chunk event without a chunk object");
            key_part(j, as_json_get(j, data, "turn"), &key);
            as_buf_putc(&key, '/');
            key_part(j, as_json_get(j, data, "step"), &key);
            int ty = as_json_get(j, chunk, "type");
            finish = ty >= 0 && as_json_streq(j, ty, "finish");
        }
        if (d.nchunks > 0 && (key.n != d.key.n || memcmp(key.p, d.key.p, key.n) != 0))
            close_call(&d, 0);   // a finish closes its call at once, so this one is open
        if (d.nchunks == 0) {
            as_buf_reset(&d.key);
            as_buf_put(&d.key, key.p, key.n);
            d.line = ev.lineno;
            as_buf_puts(&d.chunks, ENTRY_PREFIX);
        } else {
            as_buf_putc(&d.chunks, ',');
        }
        if (chunk < 0) as_buf_put(&d.chunks, m.chunk.p, m.chunk.n);
        else as_buf_put(&d.chunks, as_tok_p(j, chunk), as_tok_len(j, chunk));
        d.nchunks++;
        if (finish) close_call(&d, 1);
    }
    close_call(&d, 0);
    size_t n = d.emitted;
    as_buf_free(&key);
    as_buf_free(&d.key);
    as_buf_free(&d.chunks);
    as_buf_free(&d.entry);
    return n;
}

typedef struct { as_replay_script *sc; const char *file; } collect;

static void push_derived(void *ctx, const char *json, size_t len)
{
    collect *c = ctx;
    as_replay_entry e;
    as_replay_err err;
    char where[48];
    snprintf(where, sizeof where, "derived call %zu", c->sc->n);
    // The codec does not constrain chunk types; a chunk no replay can
    // serve is reported here rather than at stream time.
    if (as_replay_entry_parse(json, len, where, &e, &err) != 0)
        as_die_at(c->file, 0, 0, "%s", err.msg);
    as_replay_script_push(c->sc, &e);
}

void as_replay_from_session(const char *path, const char *override_path, int skip_seed,
                            as_replay_script *sc)
{
    as_replay_override ov;
    int have_ov = override_path != NULL;
    if (have_ov) as_replay_override_load(override_path, &ov);
    if (have_ov && ov.replace) {
        as_replay_override_apply(&ov, override_path, sc);
        as_replay_override_free(&ov);
        return;
    }
    if (!path)
        as_die(AS_TROUBLE, "%s: a patches override needs the session log it patches",
               override_path ? override_path : "replay");
    as_sess *s = as_sess_open(path);
    collect c = {sc, as_sess_name(s)};
    as_replay_derive(s, skip_seed, push_derived, &c);
    as_sess_close(s);
    if (have_ov) {
        as_replay_override_apply(&ov, override_path, sc);
        as_replay_override_free(&ov);
    }
}

// ---------------------------------------------------------------- {{fromRequest:…}}

static void leaves(const as_json *j, int tok, as_buf *hay, size_t *n)
{
    const as_tok *t = &j->t[tok];
    if (t->type == AS_JSTR) {
        if ((*n)++) as_buf_putc(hay, '\n');   // joined like Array.join: empty leaves count
        as_json_str(j, tok, hay);
    } else if (t->type == AS_JARR) {
        for (int e = as_json_first(j, tok); e >= 0; e = as_json_nextel(j, e)) leaves(j, e, hay, n);
    } else if (t->type == AS_JOBJ) {
        for (int k = as_json_firstkey(j, tok); k >= 0; k = as_json_nextkey(j, k)) leaves(j, k + 1, hay, n);
    }
}

void as_replay_haystack(const as_json *j, int tok, as_buf *hay)
{
    size_t n = 0;
    leaves(j, tok, hay, &n);
}

static const char FROM_OPEN[] = "{{fromRequest:";

// The placeholder as written, for messages: {{fromRequest:PATTERN}} with
// control bytes escaped, the pattern cut at 60 bytes (whole UTF-8 chars).
static void show_placeholder(const char *pat, size_t n, char *dst, size_t cap)
{
    as_buf b = {0};
    as_buf_puts(&b, FROM_OPEN);
    size_t cut = n;
    if (cut > 60) {
        cut = 57;
        while (cut > 0 && ((unsigned char)pat[cut] & 0xC0) == 0x80) cut--;
    }
    for (size_t i = 0; i < cut; i++) {
        unsigned char c = (unsigned char)pat[i];
        if (c == '\n') as_buf_puts(&b, "\\n");
        else if (c == '\t') as_buf_puts(&b, "\\t");
        else if (c < 0x20 || c == 0x7f) as_buf_printf(&b, "\\x%02x", c);
        else as_buf_putc(&b, (char)c);
    }
    as_buf_puts(&b, cut < n ? "...}}" : "}}");
    snprintf(dst, cap, "%s", b.p);
    as_buf_free(&b);
}

// The next placeholder in t[cur..tn): 1 with the pattern at t[*po..*pc) and
// the placeholder ending at *pc + 2; 0 when there is none (*po = tn); -1
// when one is unterminated (*po: its pattern).
static int next_placeholder(const char *t, size_t tn, size_t cur, size_t *o, size_t *po, size_t *pc)
{
    const char *f = memmem(t + cur, tn - cur, FROM_OPEN, sizeof FROM_OPEN - 1);
    if (!f) { *o = *po = *pc = tn; return 0; }
    *o = (size_t)(f - t);
    *po = *o + sizeof FROM_OPEN - 1;
    const char *c = memmem(t + *po, tn - *po, "}}", 2);
    if (!c) { *pc = tn; return -1; }
    *pc = (size_t)(c - t);
    while (*pc + 2 < tn && t[*pc + 2] == '}') (*pc)++;   // a pattern may end in a {n} quantifier
    return 1;
}

static int compile_pattern(const char *pat, size_t plen, as_rx **rx, char *err, size_t errn)
{
    char why[160], shown[128];
    if (as_rx_compile(pat, plen, rx, why, sizeof why) == 0) return 0;
    show_placeholder(pat, plen, shown, sizeof shown);
    snprintf(err, errn, "%s: invalid pattern: %s", shown, why);
    return -1;
}

// One pattern against hay: appends the last match's first group, else the
// whole match.
static int resolve_pattern(const char *pat, size_t plen, const as_buf *hay, const as_replay_limits *lim,
                           as_buf *out, char *err, size_t errn)
{
    as_rx *rx;
    if (compile_pattern(pat, plen, &rx, err, errn)) return -1;
    long budget = lim && lim->budget_ms > 0 ? lim->budget_ms : AS_REPLAY_SEARCH_MS;
    as_rx_limits rl = { as_now_ms() + budget, lim ? lim->stop : NULL };
    const char *h = hay && hay->p ? hay->p : "";
    size_t m[4];
    int rc = as_rx_last(rx, h, hay ? hay->n : 0, &rl, m);
    as_rx_free(rx);
    if (rc == AS_RX_MATCH) {
        int g = m[2] != AS_RX_NONE;
        size_t so = m[g ? 2 : 0], eo = m[g ? 3 : 1], n = hay ? hay->n : 0;
        // bytes are matched as they are: a span that cuts a character
        // takes the whole of it, so the substitution stays UTF-8
        while (so > 0 && ((unsigned char)h[so] & 0xC0) == 0x80) so--;
        while (eo < n && ((unsigned char)h[eo] & 0xC0) == 0x80) eo++;
        as_buf_put(out, h + so, eo - so);
        return 0;
    }
    char shown[128];
    show_placeholder(pat, plen, shown, sizeof shown);
    if (rc == AS_RX_NOMATCH) snprintf(err, errn, "%s matched nothing in the request", shown);
    else if (rc == AS_RX_TIMEOUT)
        snprintf(err, errn, "%s: the search took more than %ld ms (the limit of one placeholder)", shown, budget);
    else snprintf(err, errn, "%s: the search was stopped (shutting down)", shown);
    return -1;
}

int as_replay_placeholders_check(const char *t, size_t tn, char *err, size_t errn)
{
    size_t cur = 0, o, po, pc;
    for (int r; (r = next_placeholder(t, tn, cur, &o, &po, &pc)) != 0; cur = pc + 2) {
        if (r < 0) {
            char shown[128];
            show_placeholder(t + po, tn - po, shown, sizeof shown);
            snprintf(err, errn, "%.*s has no closing }}", (int)(strlen(shown) - 2), shown);
            return -1;
        }
        as_rx *rx;
        if (compile_pattern(t + po, pc - po, &rx, err, errn)) return -1;
        as_rx_free(rx);
    }
    return 0;
}

int as_replay_resolve_str(const as_json *j, int tok, const as_buf *hay, const as_replay_limits *lim,
                          as_buf *out, char *err, size_t errn)
{
    const char *p = as_tok_p(j, tok);
    size_t n = as_tok_len(j, tok);
    if (!memmem(p, n, FROM_OPEN, sizeof FROM_OPEN - 1)) { as_buf_put(out, p, n); return 0; }
    as_buf txt = {0}, res = {0};
    as_json_str(j, tok, &txt);
    const char *t = txt.p;
    size_t cur = 0, tn = txt.n, o, po, pc;
    int rc = as_replay_placeholders_check(t, tn, err, errn);
    for (int r; !rc && (r = next_placeholder(t, tn, cur, &o, &po, &pc)) > 0; cur = pc + 2) {
        as_buf_put(&res, t + cur, o - cur);
        rc = resolve_pattern(t + po, pc - po, hay, lim, &res, err, errn);
    }
    if (!rc) {
        as_buf_put(&res, t + cur, tn - cur);
        as_jstr_write(out, res.p, res.n);
    }
    as_buf_free(&txt);
    as_buf_free(&res);
    return rc;
}

int as_replay_expand(const char *json, size_t len, const as_buf *hay, as_buf *out, char *err, size_t errn)
{
    as_json j = {0};
    if (as_json_parse(&j, json, len)) {
        as_json_free(&j);
        snprintf(err, errn, "unparsable chunk");
        return -1;
    }
    size_t last = 0;
    int rc = 0;
    for (size_t i = 0; i < j.n && !rc; i++) {
        if (j.t[i].type != AS_JSTR || !memmem(as_tok_p(&j, (int)i), as_tok_len(&j, (int)i), FROM_OPEN, sizeof FROM_OPEN - 1))
            continue;
        as_buf_put(out, json + last, j.t[i].start - last);
        rc = as_replay_resolve_str(&j, (int)i, hay, NULL, out, err, errn);
        last = j.t[i].end;
    }
    if (!rc) as_buf_put(out, json + last, len - last);
    as_json_free(&j);
    return rc;
}
