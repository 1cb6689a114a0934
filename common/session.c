// session.c - the session log v0 codec (acpsnap-session(5)): decoding packed rows
// into events with envelopes (synthetic ones for projected input), strict row
// validation, canonical packing of delta runs, projection.
#include "acpsnap.h"
#include "simd.h"
#include <fcntl.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAFE_MAX 9007199254740991LL

// The fields of a chunk-delta event, as byte spans (a NULL p: absent).
typedef as_span bspan;
typedef struct {
    as_delta kind;
    bspan turn, step, index, id, name, payload;
    bspan seq, time;    // when set: the spans the decoder read the envelope's values from
} member_f;

struct as_sess {
    as_in *in;
    as_buf header;
    as_form form;
    long form_line;        // first body line that fixed the form
    const char *line; size_t len;   // current source line
    as_json j;             // tokens of the current source line
    as_json ej;            // tokens of a synthesized event
    as_buf ebuf;           // synthesized event bytes
    int64_t nextseq;       // running count of decoded events
    // packed row expansion
    int row;               // 0 none, else the row's as_delta kind
    int row_projected;
    int64_t row_k, row_n, row_seq0, row_time;
    int mem;               // token of the next member
    int64_t *dtv; size_t dtcap;   // the row's dt values
    int turn, step, index, id, name;
    int templ;             // member lines may take the template (not at ACPSNAP_SIMD=scalar)
    member_f mf;           // the fields of the last event, when it is a member (as_event.member_f)
    int lazy;              // as_sess_lazy: members need no tokens
    int shallow;           // as_sess_shallow: other events need their root's tokens only
    int pieces;            // as_sess_pieces: projected lines are not restored
};

static const char *row_tag(int kind)
{
    return kind == AS_DELTA_TEXT ? "text-chunks" : kind == AS_DELTA_REASONING ? "reasoning-chunks" : "tool-call-chunks";
}

// The decoder being opened: a caller that catches a fatal error in
// as_sess_open releases it with as_sess_open_abandoned.
static as_sess *opening;

void as_sess_open_abandoned(void)
{
    as_sess_close(opening);
    opening = NULL;
}

static int templates = 1;
void as_sess_templates(int on) { templates = on; }

// A decoder over path's text: in, else the file.
static as_sess *sess_open(const char *path, const char *text, size_t n)
{
    as_sess *s = calloc(1, sizeof *s);
    if (!s) as_die(AS_TROUBLE, "out of memory");
    opening = s;
    s->in = text ? as_in_open_text(path, text, n) : as_in_open(path);
    s->templ = as_simd() != AS_SIMD_SCALAR && templates;
    const char *line;
    size_t len;
    if (!as_in_line(s->in, &line, &len))
        as_die_at(as_in_name(s->in), 0, 0, "empty file: a session log starts with a header line");
    if (as_json_parse(&s->j, line, len)) as_json_die(&s->j, as_in_name(s->in), 1);
    int ty = s->j.t[0].type == AS_JOBJ ? as_json_get(&s->j, 0, "type") : -1;
    if (ty < 0 || !as_json_streq(&s->j, ty, "session"))
        as_die_at(as_in_name(s->in), 1, 0, "not a session log: line 1 is not a header ({\"type\":\"session\",…})");
    as_buf_put(&s->header, line, len);
    opening = NULL;
    return s;
}

as_sess *as_sess_open(const char *path) { return sess_open(path, NULL, 0); }

// Appends line 1 of path to b: through the decoder when zstd, else its raw
// bytes (so a binary file is simply not a log). -1 when path cannot be opened.
static int first_line(const char *path, int zstd, as_buf *b)
{
    if (zstd) {
        as_in *in = as_in_open(path);
        const char *l;
        size_t n;
        if (as_in_line(in, &l, &n)) as_buf_put(b, l, n);
        as_in_close(in);
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n > 0) as_buf_put(b, line, (size_t)n);
    free(line);
    fclose(f);
    return 0;
}

int as_is_session_log(const char *path)
{
    static const char magic[4] = {0x28, (char)0xb5, 0x2f, (char)0xfd};
    char head[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = read(fd, head, 4);
    close(fd);
    int zstd = got == 4 && !memcmp(head, magic, 4);
    as_buf b = {0};
    as_json j = {0};
    int r = first_line(path, zstd, &b);
    if (r == 0 && b.n && as_json_parse(&j, b.p, b.n) == 0 && AS_TOK_IS(&j, as_json_get(&j, 0, "type"), "session"))
        r = 1 + zstd;
    as_buf_free(&b);
    as_json_free(&j);
    return r;
}

void as_sess_header(const as_sess *s, const char **line, size_t *len) { *line = s->header.p; *len = s->header.n; }
void as_sess_line(const as_sess *s, const char **line, size_t *len) { *line = s->line; *len = s->len; }
as_form as_sess_form(const as_sess *s) { return s->form; }
const as_json *as_sess_row_tokens(const as_sess *s) { return &s->j; }
const char *as_sess_name(const as_sess *s) { return as_in_name(s->in); }

void as_sess_close(as_sess *s)
{
    if (!s) return;
    if (s->in) as_in_close(s->in);
    as_buf_free(&s->header);
    as_buf_free(&s->ebuf);
    free(s->dtv);
    as_json_free(&s->j);
    as_json_free(&s->ej);
    free(s);
}

_Noreturn static void bad(as_sess *s, const char *fmt, const char *arg)
{
    as_die_at(as_in_name(s->in), as_in_lineno(s->in), 0, fmt, arg);
}

static void set_form(as_sess *s, as_form f)
{
    if (s->form == AS_FORM_UNKNOWN) { s->form = f; s->form_line = as_in_lineno(s->in); return; }
    if (s->form == f) return;
    as_die_at(as_in_name(s->in), as_in_lineno(s->in), 0,
              "projected and persisted lines are mixed: this line %s an envelope, line %ld %s",
              f == AS_FORM_PROJECTED ? "lacks" : "has", s->form_line,
              f == AS_FORM_PROJECTED ? "has one" : "does not");
}

static int is_num(const as_json *j, int tok) { return tok >= 0 && j->t[tok].type == AS_JNUM; }

// Validates a row-tagged line (kind) and arms its expansion.
static void start_row(as_sess *s, int kind)
{
    const as_json *j = &s->j;
    const char *tag = row_tag(kind);
    char why[160];
#define MALFORMED(...) do { snprintf(why, sizeof why, __VA_ARGS__); \
        as_die_at(as_in_name(s->in), as_in_lineno(s->in), 0, "malformed %s row: %s", tag, why); } while (0)
    int seq0 = as_json_get(j, 0, "seq0"), time0 = as_json_get(j, 0, "time0");
    if ((seq0 < 0) != (time0 < 0))
        MALFORMED("%s without %s", seq0 >= 0 ? "seq0" : "time0", seq0 >= 0 ? "time0" : "seq0");
    int projected = seq0 < 0;
    set_form(s, projected ? AS_FORM_PROJECTED : AS_FORM_PERSISTED);
    static const as_key env_full[] = {AS_KEY("type"), AS_KEY("seq0"), AS_KEY("time0"), AS_KEY("data")};
    static const as_key env_proj[] = {AS_KEY("type"), AS_KEY("data")};
    if (projected ? !as_json_exact(j, 0, env_proj, AS_NKEYS(env_proj), NULL)
                  : !as_json_exact(j, 0, env_full, AS_NKEYS(env_full), NULL))
        MALFORMED(projected ? "envelope must be exactly {type, data}" : "envelope must be exactly {type, seq0, time0, data}");
    int64_t vseq0 = s->nextseq, vtime0 = 0;
    if (!projected) {
        if (!as_json_int(j, seq0, &vseq0) || vseq0 < 0) MALFORMED("seq0 must be a non-negative safe integer");
        if (!as_json_int(j, time0, &vtime0)) MALFORMED("time0 must be a safe integer");
    }
    int data = as_json_get(j, 0, "data");
    if (j->t[data].type != AS_JOBJ) MALFORMED("data must be an object");
    const char *payload_key = kind == AS_DELTA_TOOL ? "args" : "texts";
    if (kind == AS_DELTA_TOOL) {
        static const as_key k1[] = {AS_KEY("turn"), AS_KEY("step"), AS_KEY("index"), AS_KEY("id"),
                                    AS_KEY("name"), AS_KEY("dt"), AS_KEY("args")};
        static const as_key k2[] = {AS_KEY("turn"), AS_KEY("step"), AS_KEY("index"), AS_KEY("id"),
                                    AS_KEY("dt"), AS_KEY("args")};
        int with_name = as_json_exact(j, data, k1, AS_NKEYS(k1), NULL);
        if (!with_name && !as_json_exact(j, data, k2, AS_NKEYS(k2), NULL))
            MALFORMED("data must be exactly {turn, step, index, id, name?, dt, args}");
        s->id = as_json_get(j, data, "id");
        s->name = with_name ? as_json_get(j, data, "name") : -1;
        if (j->t[s->id].type != AS_JSTR || (with_name && j->t[s->name].type != AS_JSTR))
            MALFORMED("id (and name when present) must be strings");
    } else {
        static const as_key k[] = {AS_KEY("turn"), AS_KEY("step"), AS_KEY("index"), AS_KEY("dt"), AS_KEY("texts")};
        if (!as_json_exact(j, data, k, AS_NKEYS(k), NULL)) MALFORMED("data must be exactly {turn, step, index, dt, texts}");
        s->id = s->name = -1;
    }
    s->turn = as_json_get(j, data, "turn");
    s->step = as_json_get(j, data, "step");
    s->index = as_json_get(j, data, "index");
    if (!is_num(j, s->turn) || !is_num(j, s->step) || !is_num(j, s->index))
        MALFORMED("turn/step/index must be numbers");
    int pay = as_json_get(j, data, payload_key);
    if (j->t[pay].type != AS_JARR || j->t[pay].count == 0)
        MALFORMED("%s must be a non-empty string array", payload_key);
    for (int e = as_json_first(j, pay); e >= 0; e = as_json_nextel(j, e))
        if (j->t[e].type != AS_JSTR) MALFORMED("%s must be a non-empty string array", payload_key);
    int dt = as_json_get(j, data, "dt");
    if (j->t[dt].type != AS_JARR) MALFORMED("dt must be an array of safe integers");
    if (s->dtcap < j->t[dt].count) {
        s->dtcap = j->t[dt].count * 2;
        s->dtv = as_xrealloc(s->dtv, s->dtcap * sizeof *s->dtv);
    }
    int64_t t = vtime0, *g = s->dtv;
    for (int e = as_json_first(j, dt); e >= 0; e = as_json_nextel(j, e), g++)
        if (!as_json_int(j, e, g)) MALFORMED("dt must be an array of safe integers");
    if (j->t[dt].count != j->t[pay].count - 1)
        MALFORMED("dt length %u does not match %u members", j->t[dt].count, j->t[pay].count);
    if (vseq0 + (int64_t)j->t[pay].count - 1 > SAFE_MAX) MALFORMED("member seqs must stay safe integers");
    for (uint32_t k = 0; k < j->t[dt].count; k++) {
        t += s->dtv[k];
        if (t > SAFE_MAX || t < -SAFE_MAX) MALFORMED("member times must stay safe integers");
    }
#undef MALFORMED
    s->row = kind;
    s->row_projected = projected;
    s->row_k = 0;
    s->row_n = j->t[pay].count;
    s->row_seq0 = vseq0;
    s->row_time = vtime0;
    s->mem = as_json_first(j, pay);
}

// ------------------------------------------------------------ member bytes

static bspan tok_span(const as_json *j, int tok)
{
    return tok < 0 ? (bspan){NULL, 0} : (bspan){as_tok_p(j, tok), as_tok_len(j, tok)};
}

// Where the bytes of a member event go: written at d (its room made
// beforehand: member_room), or, with d NULL, compared with the expected
// bytes p[0, n) (ok drops to 0 on a difference). Inlined into both users,
// so that each gets its own straight-line code.
typedef struct { char *d; const char *p; size_t n, at; int ok; } msink;
#define MINLINE static inline __attribute__((always_inline))

MINLINE void mput(msink *m, const char *s, size_t n)
{
    if (m->d) { if (n) memcpy(m->d, s, n); m->d += n; return; }
    // a span of the compared bytes themselves, at its place, is equal
    if (m->ok && n <= m->n - m->at && (s == m->p + m->at || !memcmp(m->p + m->at, s, n))) m->at += n;
    else m->ok = 0;
}
#define MPUTS(m, lit) mput((m), lit, sizeof(lit) - 1)

// The decimal spelling of v. Compared by reading the expected digits (no
// division): the spelling is the one digit string of v's value without a
// leading zero, and "-" only before a non-zero one. When the decoder read v
// from the span `read` (as_json_int: a plain integer, and JSON has no
// leading zero), the one other spelling left is -0.
MINLINE void mputi(msink *m, int64_t v, bspan read)
{
    if (m->d) { m->d += as_fmt_i(m->d, v); return; }
    if (!m->ok) return;
    if (read.p) {
        if (read.n == 2 && read.p[0] == '-' && read.p[1] == '0') m->ok = 0;
        else mput(m, read.p, read.n);
        return;
    }
    const char *s = m->p + m->at, *e = m->p + m->n, *d = s;
    int neg = d < e && *d == '-';
    d += neg;
    const char *first = d, *stop = e - d > 19 ? d + 19 : e;
    uint64_t u = 0;
    for (unsigned c; d < stop && (c = (unsigned)((unsigned char)*d - '0')) < 10; d++) u = u * 10 + c;
    uint64_t want = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t digits = (size_t)(d - first);
    if (!digits || u != want || neg != (v < 0) || (digits > 1 && *first == '0')
        || (d < e && (unsigned)((unsigned char)*d - '0') < 10))
        m->ok = 0;
    else
        m->at += (size_t)(d - s);
}

// The one serialization of a member event (acpsnap-session(5) "Packed
// rows"): with its envelope when env is set, else projected. The decoder
// writes it, the packer compares an event with it.
MINLINE void member_bytes(msink *m, const member_f *f, int env, int64_t seq, int64_t time)
{
    MPUTS(m, "{\"type\":\"assistant/chunk\"");
    if (env) {
        MPUTS(m, ",\"seq\":");
        mputi(m, seq, f->seq);
        MPUTS(m, ",\"time\":");
        mputi(m, time, f->time);
    }
    MPUTS(m, ",\"data\":{\"turn\":");
    mput(m, f->turn.p, f->turn.n);
    MPUTS(m, ",\"step\":");
    mput(m, f->step.p, f->step.n);
    if (f->kind == AS_DELTA_TEXT) MPUTS(m, ",\"chunk\":{\"type\":\"text-delta\",\"index\":");
    else if (f->kind == AS_DELTA_REASONING) MPUTS(m, ",\"chunk\":{\"type\":\"reasoning-delta\",\"index\":");
    else MPUTS(m, ",\"chunk\":{\"type\":\"tool-call-delta\",\"index\":");
    mput(m, f->index.p, f->index.n);
    if (f->kind == AS_DELTA_TOOL) {
        MPUTS(m, ",\"id\":");
        mput(m, f->id.p, f->id.n);
        if (f->name.p) { MPUTS(m, ",\"name\":"); mput(m, f->name.p, f->name.n); }
        MPUTS(m, ",\"argumentsDelta\":");
    } else {
        MPUTS(m, ",\"text\":");
    }
    mput(m, f->payload.p, f->payload.n);
    MPUTS(m, "}}}");
}

// The most bytes member_bytes can write for f: its fixed bytes (the longest
// chunk type's), the spans, two integers.
static size_t member_room(const member_f *f)
{
    return sizeof "{'type':'assistant/chunk','seq':,'time':,'data':{'turn':,'step':"
           ",'chunk':{'type':'reasoning-delta','index':,'id':,'name':,'argumentsDelta':}}}"
           + 2 * AS_FMT_I_MAX + f->turn.n + f->step.n + f->index.n + f->id.n + f->name.n + f->payload.n;
}

// Appends member_bytes(f, env, seq, time) to b, its room made once.
static void member_put(as_buf *b, const member_f *f, int env, int64_t seq, int64_t time)
{
    size_t room = member_room(f);
    if (b->n + room + 1 > b->cap) as_buf_grow(b, room);
    if (!b->p) __builtin_unreachable();   // (grown: never NULL; tells the compiler so)
    char *at = b->p + b->n;
    msink m = {at, NULL, 0, 0, 1};
    member_bytes(&m, f, env, seq, time);
    if ((size_t)(m.d - at) > room) as_die(AS_TROUBLE, "internal error: a member of %zu bytes, room for %zu", (size_t)(m.d - at), room);
    b->n = (size_t)(m.d - b->p);
    b->p[b->n] = 0;
}

// 1 when s[0, n) is exactly member_bytes(f, env, seq, time).
static int is_member_bytes(const char *s, size_t n, const member_f *f, int env, int64_t seq, int64_t time)
{
    msink m = {NULL, s, n, 0, 1};
    member_bytes(&m, f, env, seq, time);
    return m.ok && m.at == n;
}

// ------------------------------------------------------------ synthesized tokens
//
// The decoder makes two kinds of event bytes itself: a row member, and a
// projected line with its envelope restored. Their layout is known, so their
// tokens are written as the bytes are, never scanned again: tw lays tokens
// over the bytes at a cursor, exactly as as_json_parse would make them (the
// codec fuzz target compares every event's tokens with a fresh scan).
typedef struct { as_json *j; size_t pos; } tw;

// The writer's user makes room for all its tokens first (tw_room).
static void tw_room(as_json *j, size_t n)
{
    if (j->cap >= n) return;
    j->cap = n < 64 ? 64 : n;
    j->t = as_xrealloc(j->t, j->cap * sizeof *j->t);
}
MINLINE uint32_t tw_tok(tw *w, int type, size_t start, size_t end, int esc)
{
    as_json *j = w->j;
    as_tok *t = &j->t[j->n];
    t->type = (uint8_t)type;
    t->esc = (uint8_t)esc;
    t->start = (uint32_t)start;
    t->end = (uint32_t)end;
    t->next = (uint32_t)j->n + 1;
    t->count = 0;
    return (uint32_t)j->n++;
}
// A key of n bytes (quotes included) at the cursor, and its ':'.
MINLINE void tw_key(tw *w, size_t n) { tw_tok(w, AS_JSTR, w->pos, w->pos + n, 0); w->pos += n + 1; }
// A scalar of n bytes at the cursor.
MINLINE void tw_val(tw *w, int type, size_t n, int esc) { tw_tok(w, type, w->pos, w->pos + n, esc); w->pos += n; }
MINLINE void tw_comma(tw *w) { w->pos++; }
// An object of count members opening at the cursor.
MINLINE uint32_t tw_open(tw *w, uint32_t count) { uint32_t i = tw_tok(w, AS_JOBJ, w->pos++, 0, 0); w->j->t[i].count = count; return i; }
// Closes object i at the cursor's '}'.
MINLINE void tw_close(tw *w, uint32_t i) { w->j->t[i].end = (uint32_t)++w->pos; w->j->t[i].next = (uint32_t)w->j->n; }
// The plain integer at the cursor (member envelopes: seq, time).
MINLINE void tw_int(tw *w, const char *p)
{
    size_t e = w->pos + (p[w->pos] == '-');
    while (p[e] >= '0' && p[e] <= '9') e++;
    tw_val(w, AS_JNUM, e - w->pos, 0);
}

// The tokens of member_bytes(f, env = 1, …) as written at p[0, n); esc: the
// escape flags of the id, name and payload strings.
static void member_tokens(as_json *j, const char *p, size_t n, const member_f *f, const int esc[3])
{
    tw w = {j, 0};
    j->s = p;
    j->len = n;
    j->n = 0;
    j->err = NULL;
    tw_room(j, 24);   // 22 tokens at most
    int tool = f->kind == AS_DELTA_TOOL;
    uint32_t root = tw_open(&w, 4);
    tw_key(&w, 6);                              // "type"
    tw_val(&w, AS_JSTR, 17, 0);                 // "assistant/chunk"
    tw_comma(&w);
    tw_key(&w, 5);                              // "seq"
    tw_int(&w, p);
    tw_comma(&w);
    tw_key(&w, 6);                              // "time"
    tw_int(&w, p);
    tw_comma(&w);
    tw_key(&w, 6);                              // "data"
    uint32_t data = tw_open(&w, 3);
    tw_key(&w, 6);                              // "turn"
    tw_val(&w, AS_JNUM, f->turn.n, 0);
    tw_comma(&w);
    tw_key(&w, 6);                              // "step"
    tw_val(&w, AS_JNUM, f->step.n, 0);
    tw_comma(&w);
    tw_key(&w, 7);                              // "chunk"
    uint32_t chunk = tw_open(&w, tool ? (f->name.p ? 5 : 4) : 3);
    tw_key(&w, 6);                              // "type"
    tw_val(&w, AS_JSTR, f->kind == AS_DELTA_TEXT ? 12 : 17, 0);
    tw_comma(&w);
    tw_key(&w, 7);                              // "index"
    tw_val(&w, AS_JNUM, f->index.n, 0);
    tw_comma(&w);
    if (tool) {
        tw_key(&w, 4);                          // "id"
        tw_val(&w, AS_JSTR, f->id.n, esc[0]);
        tw_comma(&w);
        if (f->name.p) {
            tw_key(&w, 6);                      // "name"
            tw_val(&w, AS_JSTR, f->name.n, esc[1]);
            tw_comma(&w);
        }
        tw_key(&w, 16);                         // "argumentsDelta"
    } else {
        tw_key(&w, 6);                          // "text"
    }
    tw_val(&w, AS_JSTR, f->payload.n, esc[2]);
    tw_close(&w, chunk);
    tw_close(&w, data);
    tw_close(&w, root);
    if (w.pos != n) as_die(AS_TROUBLE, "internal error: member tokens end at %zu of %zu", w.pos, n);
}

// Builds member row_k of the current row as an event.
static void row_member(as_sess *s, as_event *ev)
{
    const as_json *j = &s->j;
    if (s->row_k > 0) s->row_time += s->dtv[s->row_k - 1];
    as_buf *b = &s->ebuf;
    as_buf_reset(b);
    member_f *f = &s->mf;
    *f = (member_f){s->row, tok_span(j, s->turn), tok_span(j, s->step), tok_span(j, s->index),
                    tok_span(j, s->id), tok_span(j, s->name), tok_span(j, s->mem), {NULL, 0}, {NULL, 0}};
    member_put(b, f, 1, s->row_seq0 + s->row_k, s->row_time);
    int esc[3] = {s->id >= 0 && j->t[s->id].esc, s->name >= 0 && j->t[s->name].esc, j->t[s->mem].esc};
    if (!s->lazy) member_tokens(&s->ej, b->p, b->n, f, esc);
    ev->member_f = f;
    ev->member_of = b->p;
    ev->json = b->p;
    ev->len = b->n;
    ev->j = s->lazy ? NULL : &s->ej;
    ev->root_j = NULL;
    ev->seq = s->row_seq0 + s->row_k;
    ev->time = s->row_time;
    ev->has_int_envelope = 1;
    ev->lineno = as_in_lineno(s->in);
    ev->member = (int)s->row_k;
    ev->projected = s->row_projected;
    s->mem = as_json_nextel(j, s->mem);
    if (++s->row_k == s->row_n) s->row = 0;
    s->nextseq++;
}

// The synthetic envelope of a projected line's event seq, as inserted after
// its "type" member.
static void put_envelope(as_buf *b, int64_t seq)
{
    as_buf_puts(b, ",\"seq\":");
    as_buf_puti(b, seq);
    as_buf_puts(b, ",\"time\":0");
}

// The projected line s->j with "seq":<nextseq>,"time":0 inserted after its
// first "type" member (value token ty), as bytes in s->ebuf and as tokens in
// s->ej: the line's tokens, those after the insertion moved along by the
// inserted bytes and the four new tokens.
static void restore_envelope(as_sess *s, int ty)
{
    const as_json *j = &s->j;
    as_buf *b = &s->ebuf;
    // the root object's bytes (white space around it is not kept), split
    // after the "type" member
    uint32_t os = j->t[0].start, oe = j->t[0].end, at = j->t[ty].end;
    as_buf_reset(b);
    as_buf_put(b, j->s + os, at - os);
    put_envelope(b, s->nextseq);
    uint32_t shift = (uint32_t)b->n - (at - os);   // the inserted bytes
    as_buf_put(b, j->s + at, oe - at);
    as_json *e = &s->ej;
    tw_room(e, j->n + 4);
    e->s = b->p;
    e->len = b->n;
    e->err = NULL;
    e->n = (size_t)ty + 1;
    for (int i = 0; i <= ty; i++) {             // the root and the members up to "type"
        as_tok t = j->t[i];
        t.start -= os;
        t.end -= os;
        e->t[i] = t;
    }
    tw w = {e, at - os + 1};
    tw_key(&w, 5);                              // "seq"
    tw_int(&w, b->p);
    tw_comma(&w);
    tw_key(&w, 6);                              // "time"
    tw_val(&w, AS_JNUM, 1, 0);
    for (size_t i = (size_t)ty + 1; i < j->n; i++) {
        as_tok t = j->t[i];
        t.start = t.start - os + shift;
        t.end = t.end - os + shift;
        t.next += 4;
        e->t[e->n++] = t;
    }
    // Before the insertion only the root spans it; the subtrees of the
    // members before it, "type" included, end where they did.
    e->t[0].end = (uint32_t)b->n;
    e->t[0].next = (uint32_t)e->n;
    e->t[0].count += 2;
}

// ------------------------------------------------------------ the member template
//
// Most lines of a persisted log are chunk events written in the one layout
// of a row member with its envelope (member_bytes, env = 1). member_line
// matches a line against that layout byte for byte: on a match the line is
// valid JSON with exactly the tokens member_tokens writes, so it skips the
// scanner. Anything else (another spelling of a number, white space, a
// negative time, a string the scanner would reject) is no match and takes
// the general path, which decides.

// The literal lit (a string constant) at *q.
#define LIT(q, e, lit) lit_at(q, e, lit, sizeof(lit) - 1)
// (Eight bytes at a time: n is a constant here, so this unrolls into loads.)
MINLINE int lit_at(const char **q, const char *e, const char *lit, size_t n)
{
    if ((size_t)(e - *q) < n) return 0;
    uint64_t d = 0, a, b;
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        memcpy(&a, *q + k, 8);
        memcpy(&b, lit + k, 8);
        d |= a ^ b;
    }
    for (; k < n; k++) d |= (uint64_t)(unsigned char)((*q)[k] ^ lit[k]);
    if (d) return 0;
    *q += n;
    return 1;
}

// Eight bytes at p as a little-endian word.
MINLINE uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

// How many of the eight bytes at p are decimal digits before the first
// that is not (SWAR: a byte is a digit when its high nibble is 3 and
// adding 6 keeps it so).
MINLINE size_t digits8(const char *p)
{
    const uint64_t hi = 0xf0f0f0f0f0f0f0f0ULL, three = 0x3030303030303030ULL;
    uint64_t x = load8(p);
    uint64_t nd = ((x & hi) ^ three) | (((x + 0x0606060606060606ULL) & hi) ^ three);
    uint64_t top = (((nd & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL) | nd) & 0x8080808080808080ULL;
    return top ? (size_t)__builtin_ctzll(top) >> 3 : 8;
}

static const uint64_t pow10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};

// The value of the n (1 to 8) decimal digits at p (eight bytes readable):
// the digits moved up behind leading zeros, then combined in pairs, fours
// and eights.
MINLINE uint64_t value8(const char *p, size_t n)
{
    unsigned sh = 8 * (8 - (unsigned)n);
    uint64_t x = n == 8 ? load8(p) : load8(p) & ((1ULL << (8 * n)) - 1);
    x = (x << sh) - (0x3030303030303030ULL << sh);
    x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffULL;
    x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffULL;
    return (x * 10000 + (x >> 32)) & 0xffffffffULL;
}

// A plain non-negative integer of at most 15 digits (so a safe integer) at
// *q, without a leading zero: its span and, with v, its value.
MINLINE int uint_at(const char **q, const char *e, bspan *sp, int64_t *v)
{
    const char *d = *q;
    size_t n = 0;
    int64_t u = 0;
    if (e - d >= 16) {          // eight bytes at a time
        n = digits8(d);
        if (n == 8) n += digits8(d + 8);
        if (v && n && n <= 15)
            u = n > 8 ? (int64_t)(value8(d, 8) * pow10[n - 8] + value8(d + 8, n - 8)) : (int64_t)value8(d, n);
    } else {
        while (d + n < e && n < 16 && (unsigned)(d[n] - '0') < 10) u = u * 10 + (d[n++] - '0');
    }
    if (!n || n > 15 || (n > 1 && *d == '0')) return 0;
    *sp = (bspan){d, n};
    if (v) *v = u;
    *q = d + n;
    return 1;
}

// A valid JSON string at *q: its span, and *esc set when it holds an escape.
MINLINE int str_at(const char **q, const char *s, const char *e, bspan *sp, int *esc)
{
    size_t end = as_jstr_end(s, (size_t)(e - s), (size_t)(*q - s), esc);
    if (!end) return 0;
    *sp = (bspan){*q, (size_t)(s + end - *q)};
    *q = s + end;
    return 1;
}

// 1 when s[0, n) is member_bytes(f, env = 1, *seq, *time) for some fields:
// fills f (with the spans of seq and time), esc (escape flags of id, name,
// payload), *seq and *time.
static int member_line(const char *s, size_t n, member_f *f, int esc[3], int64_t *seq, int64_t *time)
{
    const char *q = s, *e = s + n;
    if (!LIT(&q, e, "{\"type\":\"assistant/chunk\",\"seq\":") || !uint_at(&q, e, &f->seq, seq)
        || !LIT(&q, e, ",\"time\":") || !uint_at(&q, e, &f->time, time)
        || !LIT(&q, e, ",\"data\":{\"turn\":") || !uint_at(&q, e, &f->turn, NULL)
        || !LIT(&q, e, ",\"step\":") || !uint_at(&q, e, &f->step, NULL)
        || !LIT(&q, e, ",\"chunk\":{\"type\":\""))
        return 0;
    if (LIT(&q, e, "text-delta\"")) f->kind = AS_DELTA_TEXT;
    else if (LIT(&q, e, "reasoning-delta\"")) f->kind = AS_DELTA_REASONING;
    else if (LIT(&q, e, "tool-call-delta\"")) f->kind = AS_DELTA_TOOL;
    else return 0;
    if (!LIT(&q, e, ",\"index\":") || !uint_at(&q, e, &f->index, NULL)) return 0;
    esc[0] = esc[1] = esc[2] = 0;
    f->id = (bspan){NULL, 0};   // (two stores: a chained one would be read back whole, stalling)
    f->name = (bspan){NULL, 0};
    if (f->kind == AS_DELTA_TOOL) {
        if (!LIT(&q, e, ",\"id\":") || !str_at(&q, s, e, &f->id, &esc[0])) return 0;
        if (LIT(&q, e, ",\"name\":") && !str_at(&q, s, e, &f->name, &esc[1])) return 0;
        if (!LIT(&q, e, ",\"argumentsDelta\":")) return 0;
    } else if (!LIT(&q, e, ",\"text\":")) {
        return 0;
    }
    return str_at(&q, s, e, &f->payload, &esc[2]) && LIT(&q, e, "}}}") && q == e;
}

// ------------------------------------------------------------ the row template
//
// A packed row in the layout the packer writes (flush_run) is matched byte
// for byte, its tokens written as it is read: on a match the line is valid
// JSON with exactly the tokens as_json_parse makes, and start_row validates
// them as ever. Another spelling (a fraction, white space, keys in another
// order) is no match and takes the scanner, which decides.

// Room for need tokens, doubling.
MINLINE void tw_grow(as_json *j, size_t need)
{
    if (__builtin_expect(j->cap < need, 0)) tw_room(j, j->cap * 2 > need ? j->cap * 2 : need);
}

// A key (lit: its quoted name and ':') at *q: its token.
MINLINE int key_at(tw *w, const char **q, const char *s, const char *e, const char *lit, size_t n)
{
    size_t at = (size_t)(*q - s);
    if (!lit_at(q, e, lit, n)) return 0;
    tw_tok(w, AS_JSTR, at, at + n - 1, 0);
    return 1;
}
#define KEY(w, q, s, e, lit) key_at(w, q, s, e, lit, sizeof(lit) - 1)

// An integer (-?(0|[1-9][0-9]*), no fraction or exponent) at *q: its token.
MINLINE int int_tok(tw *w, const char **q, const char *s, const char *e)
{
    const char *d = *q;
    d += d < e && *d == '-';
    if (d >= e || (unsigned)(*d - '0') >= 10) return 0;
    if (*d == '0') d++;
    else while (d < e && (unsigned)(*d - '0') < 10) d++;
    if (d < e && (*d == '.' || (*d | 32) == 'e' || (unsigned)(*d - '0') < 10)) return 0;
    tw_tok(w, AS_JNUM, (size_t)(*q - s), (size_t)(d - s), 0);
    *q = d;
    return 1;
}

// A string at *q (checked by the scanner's own string routine): its token.
MINLINE int str_tok(tw *w, const char **q, const char *s, const char *e)
{
    int esc = 0;   // (as_jstr_end sets it only for an escape)
    size_t end = as_jstr_end(s, (size_t)(e - s), (size_t)(*q - s), &esc);
    if (!end) return 0;
    tw_tok(w, AS_JSTR, (size_t)(*q - s), end, esc);
    *q = s + end;
    return 1;
}

// Closes container token i at *q (its closing byte): its end, next and count.
MINLINE void tw_end(tw *w, uint32_t i, const char **q, const char *s, uint32_t count)
{
    as_tok *t = &w->j->t[i];
    t->end = (uint32_t)(++*q - s);
    t->next = (uint32_t)w->j->n;
    t->count = count;
}

// A non-empty array of strings, or a possibly empty one of integers, at *q.
static int array_tok(tw *w, const char **q, const char *s, const char *e, int strings)
{
    if (*q >= e || **q != '[') return 0;
    uint32_t a = tw_tok(w, AS_JARR, (size_t)(*q - s), 0, 0), count = 0;
    ++*q;
    if (!strings && *q < e && **q == ']') { tw_end(w, a, q, s, 0); return 1; }
    for (;;) {
        tw_grow(w->j, w->j->n + 1);
        if (!(strings ? str_tok(w, q, s, e) : int_tok(w, q, s, e))) return 0;
        count++;
        if (*q >= e) return 0;
        if (**q == ']') break;
        if (**q != ',') return 0;
        ++*q;
    }
    tw_end(w, a, q, s, count);
    return 1;
}

// 1 when line s[0, n) is a packed row in the packer's layout: its tokens in
// s->j, its kind in *kind.
static int row_line(as_sess *ss, const char *s, size_t n, int *kind)
{
    const char *q = s, *e = s + n;
    if (n < 2 || n >= UINT32_MAX - 1 || s[0] != '{') return 0;
    as_json *j = &ss->j;
    j->s = s;
    j->len = n;
    j->n = 0;
    j->err = NULL;
    tw_grow(j, 32);   // 23 tokens at most besides the arrays' elements
    tw w = {j, 0};
    uint32_t root = tw_tok(&w, AS_JOBJ, 0, 0, 0), members = 2;
    q++;
    if (!KEY(&w, &q, s, e, "\"type\":")) return 0;
    size_t at = (size_t)(q - s);
    if (LIT(&q, e, "\"text-chunks\"")) *kind = AS_DELTA_TEXT;
    else if (LIT(&q, e, "\"reasoning-chunks\"")) *kind = AS_DELTA_REASONING;
    else if (LIT(&q, e, "\"tool-call-chunks\"")) *kind = AS_DELTA_TOOL;
    else return 0;
    tw_tok(&w, AS_JSTR, at, (size_t)(q - s), 0);
    if (!LIT(&q, e, ",")) return 0;
    if (KEY(&w, &q, s, e, "\"seq0\":")) {
        if (!int_tok(&w, &q, s, e) || !LIT(&q, e, ",") || !KEY(&w, &q, s, e, "\"time0\":") || !int_tok(&w, &q, s, e)
            || !LIT(&q, e, ","))
            return 0;
        members = 4;
    }
    if (!KEY(&w, &q, s, e, "\"data\":") || q >= e || *q != '{') return 0;
    uint32_t data = tw_tok(&w, AS_JOBJ, (size_t)(q - s), 0, 0), fields = 5;
    q++;
    if (!KEY(&w, &q, s, e, "\"turn\":") || !int_tok(&w, &q, s, e)
        || !LIT(&q, e, ",") || !KEY(&w, &q, s, e, "\"step\":") || !int_tok(&w, &q, s, e)
        || !LIT(&q, e, ",") || !KEY(&w, &q, s, e, "\"index\":") || !int_tok(&w, &q, s, e)
        || !LIT(&q, e, ",") || !KEY(&w, &q, s, e, "\"dt\":") || !array_tok(&w, &q, s, e, 0) || !LIT(&q, e, ","))
        return 0;
    tw_grow(j, j->n + 8);
    if (*kind == AS_DELTA_TOOL) {
        if (!KEY(&w, &q, s, e, "\"id\":") || !str_tok(&w, &q, s, e) || !LIT(&q, e, ",")) return 0;
        fields = 6;
        if (KEY(&w, &q, s, e, "\"name\":")) {
            if (!str_tok(&w, &q, s, e) || !LIT(&q, e, ",")) return 0;
            fields = 7;
        }
        if (!KEY(&w, &q, s, e, "\"args\":")) return 0;
    } else if (!KEY(&w, &q, s, e, "\"texts\":")) {
        return 0;
    }
    if (!array_tok(&w, &q, s, e, 1) || q >= e || *q != '}') return 0;
    tw_end(&w, data, &q, s, fields);
    if (q >= e || *q != '}') return 0;
    tw_end(&w, root, &q, s, members);
    return q == e;
}

// The event of a line member_line matched (the persisted branch of
// as_sess_next, with the tokens written instead of scanned).
static void member_event(as_sess *s, as_event *ev, const char *line, size_t len, const int esc[3])
{
    if (!s->lazy) member_tokens(&s->j, line, len, &s->mf, esc);
    set_form(s, AS_FORM_PERSISTED);
    ev->root[0] = 4;          // type, seq, time, data: member_tokens' tokens 2, 4, 6, 8
    ev->root[1] = 2;
    ev->root[2] = 4;
    ev->root[3] = 6;
    ev->root[4] = 8;
    ev->root_j = &s->j;
    ev->json = line;
    ev->len = len;
    ev->j = s->lazy ? NULL : &s->j;
    ev->has_int_envelope = 1;
    ev->projected = 0;
    ev->member = -1;
    ev->lineno = as_in_lineno(s->in);
    ev->member_f = &s->mf;
    ev->member_of = line;
    s->nextseq++;
}

// 1 for the types whose events are read below their root: packed rows
// (start_row), chunk events (the packer's chunk_fields, the deriver) and
// compaction summaries (the deriver).
static int deep_type(const as_json *j, int ty)
{
    return AS_TOK_IS(j, ty, "assistant/chunk") || AS_TOK_IS(j, ty, "text-chunks")
           || AS_TOK_IS(j, ty, "reasoning-chunks") || AS_TOK_IS(j, ty, "tool-call-chunks")
           || AS_TOK_IS(j, ty, "compaction/summary");
}

// 1 when a line starts as an event of such a type does.
static int deep_start(const char *s, size_t n)
{
    const char *q = s, *e = s + n;
    if (!LIT(&q, e, "{\"type\":\"")) return 0;
    return LIT(&q, e, "assistant/chunk\"") || LIT(&q, e, "text-chunks\"") || LIT(&q, e, "reasoning-chunks\"")
           || LIT(&q, e, "tool-call-chunks\"") || LIT(&q, e, "compaction/summary\"");
}

int as_sess_next(as_sess *s, as_event *ev)
{
    ev->env_at = 0;
    if (s->row) { row_member(s, ev); return 1; }
    const char *line;
    size_t len;
    if (!as_in_line(s->in, &line, &len)) return 0;
    s->line = line;
    s->len = len;
    int esc[3];
    if (s->templ && member_line(line, len, &s->mf, esc, &ev->seq, &ev->time)) {
        member_event(s, ev, line, len, esc);
        return 1;
    }
    ev->member_f = NULL;
    int kind;
    if (s->templ && row_line(s, line, len, &kind)) {
        start_row(s, kind);
        row_member(s, ev);
        return 1;
    }
    const char *name = as_in_name(s->in);
    long ln = as_in_lineno(s->in);
    if (len == 0) as_die_at(name, ln, 0, "empty line");
    as_json *j = &s->j;
    int shallow = s->shallow && !deep_start(line, len);
    if ((shallow ? as_json_parse_shallow : as_json_parse)(j, line, len)) as_json_die(j, name, ln);
    if (j->t[0].type != AS_JOBJ) bad(s, "not a JSON object%s", "");
    static const as_key rk[] = {AS_KEY("type"), AS_KEY("seq"), AS_KEY("time"), AS_KEY("data")};
    int *r = ev->root + 1;
    ev->root[0] = as_json_pick(j, 0, rk, 4, r);
    ev->root_j = j;
    int ty = r[0];
    if (ty < 0) bad(s, "missing \"type\"%s", "");
    if (j->t[ty].type != AS_JSTR) bad(s, "\"type\" must be a string%s", "");
    if (shallow && deep_type(j, ty)) {   // (its "type" is not its first member)
        as_json_parse(j, line, len);
        ev->root[0] = as_json_pick(j, 0, rk, 4, r);
        ty = r[0];
    }
    if (AS_TOK_IS(j, ty, "text-chunks")) start_row(s, AS_DELTA_TEXT);
    else if (AS_TOK_IS(j, ty, "reasoning-chunks")) start_row(s, AS_DELTA_REASONING);
    else if (AS_TOK_IS(j, ty, "tool-call-chunks")) start_row(s, AS_DELTA_TOOL);
    if (s->row) { row_member(s, ev); return 1; }
    if (AS_TOK_IS(j, ty, "session")) bad(s, "a second session header%s", "");

    int seq = r[1], time = r[2];
    if ((seq < 0) != (time < 0))
        bad(s, seq >= 0 ? "event has \"seq\" without \"time\"%s" : "event has \"time\" without \"seq\"%s", "");
    ev->lineno = ln;
    ev->member = -1;
    if (seq >= 0) {
        set_form(s, AS_FORM_PERSISTED);
        ev->json = line;
        ev->len = len;
        ev->j = j;
        ev->has_int_envelope = as_json_int(j, seq, &ev->seq) && as_json_int(j, time, &ev->time) && ev->seq >= 0;
        if (!ev->has_int_envelope) ev->seq = ev->time = 0;
        ev->projected = 0;
    } else if (s->pieces) {
        set_form(s, AS_FORM_PROJECTED);
        uint32_t os = j->t[0].start;            // (white space around the root is not kept)
        ev->json = line + os;
        ev->len = j->t[0].end - os;
        ev->env_at = j->t[ty].end - os;         // after the "type" member
        ev->j = NULL;
        ev->root_j = NULL;
        ev->seq = s->nextseq;
        ev->time = 0;
        ev->has_int_envelope = 1;
        ev->projected = 1;
    } else {
        set_form(s, AS_FORM_PROJECTED);
        restore_envelope(s, ty);
        ev->json = s->ebuf.p;
        ev->len = s->ebuf.n;
        ev->j = &s->ej;
        ev->root_j = NULL;
        ev->seq = s->nextseq;
        ev->time = 0;
        ev->has_int_envelope = 1;
        ev->projected = 1;
    }
    s->nextseq++;
    return 1;
}

// ---------------------------------------------------------------- packing

// The root of event ev: its type and data tokens (-1 when absent); 1 when
// it has exactly the keys type, seq, time, data, with a plain integer
// envelope. The decoder's pick serves when it made one, and then f gets the
// spans it read seq and time from.
static int event_root(const as_event *ev, int *ty, int *data, member_f *f)
{
    static const as_key env[] = {AS_KEY("type"), AS_KEY("seq"), AS_KEY("time"), AS_KEY("data")};
    const as_json *j = ev->j;
    int e[4] = {-1, -1, -1, -1}, n;
    if (ev->root_j == j) {
        n = ev->root[0];
        memcpy(e, ev->root + 1, sizeof e);
    } else {
        n = as_json_pick(j, 0, env, 4, e);
    }
    *ty = e[0];
    *data = e[3];
    f->seq = f->time = (bspan){NULL, 0};
    if (n != 4 || e[0] < 0 || e[1] < 0 || e[2] < 0 || e[3] < 0 || !ev->has_int_envelope || ev->seq < 0) return 0;
    if (ev->root_j == j) {
        f->seq = tok_span(j, e[1]);
        f->time = tok_span(j, e[2]);
    }
    return 1;
}

// The shape the packer accepts before comparing bytes, from an event's
// type and data: an assistant/chunk with exactly the keys of a member at
// every level, numbers for turn, step and index, string payloads. Fills f
// with the spans of its fields.
static as_delta chunk_fields(const as_json *j, int ty, int data, member_f *f)
{
    static const as_key dk[] = {AS_KEY("turn"), AS_KEY("step"), AS_KEY("chunk")};
    static const as_key ck[] = {AS_KEY("type"), AS_KEY("index"), AS_KEY("text"), AS_KEY("id"),
                                AS_KEY("name"), AS_KEY("argumentsDelta")};
    int d[3], c[6];
    if (!AS_TOK_IS(j, ty, "assistant/chunk") || data < 0 || !as_json_exact(j, data, dk, 3, d)) return AS_DELTA_NONE;
    if (!is_num(j, d[0]) || !is_num(j, d[1])) return AS_DELTA_NONE;
    int nc = as_json_pick(j, d[2], ck, 6, c);
    if (nc < 0 || c[0] < 0 || !is_num(j, c[1])) return AS_DELTA_NONE;
    f->turn = tok_span(j, d[0]);
    f->step = tok_span(j, d[1]);
    f->index = tok_span(j, c[1]);
    f->id = f->name = (bspan){NULL, 0};
    if (AS_TOK_IS(j, c[0], "text-delta") || AS_TOK_IS(j, c[0], "reasoning-delta")) {
        if (nc != 3 || c[2] < 0 || j->t[c[2]].type != AS_JSTR) return AS_DELTA_NONE;
        f->payload = tok_span(j, c[2]);
        return f->kind = AS_TOK_IS(j, c[0], "text-delta") ? AS_DELTA_TEXT : AS_DELTA_REASONING;
    }
    if (AS_TOK_IS(j, c[0], "tool-call-delta")) {
        if (nc != (c[4] >= 0 ? 5 : 4) || c[2] >= 0 || c[3] < 0 || c[5] < 0) return AS_DELTA_NONE;
        if (c[4] >= 0 && j->t[c[4]].type != AS_JSTR) return AS_DELTA_NONE;
        if (j->t[c[3]].type != AS_JSTR || j->t[c[5]].type != AS_JSTR) return AS_DELTA_NONE;
        f->id = tok_span(j, c[3]);
        f->name = tok_span(j, c[4]);
        f->payload = tok_span(j, c[5]);
        return f->kind = AS_DELTA_TOOL;
    }
    return AS_DELTA_NONE;
}

struct as_packer {
    int mode;
    as_emit_fn emit;
    void *ctx;
    // the open run
    as_delta kind;
    int64_t n, seq0, time0, lastseq, lasttime;
    int projected;          // output form of the run
    int src_projected;      // its events came from a projected log
    int last_int;           // its last member has a plain integer envelope
    int64_t elapsed;        // the sum of its dt
    long srcline;
    as_buf turn, step, index, id, name;
    int has_name;
    as_buf dt, payloads;
    as_buf early[2];        // the first two members as plain lines
    long early_line[2];
    as_buf out;
    as_buf line;            // scratch: an event's projected line
};

as_packer *as_packer_new(int mode, as_emit_fn emit, void *ctx)
{
    as_packer *p = calloc(1, sizeof *p);
    if (!p) as_die(AS_TROUBLE, "out of memory");
    p->mode = mode;
    p->emit = emit;
    p->ctx = ctx;
    return p;
}

void as_event_line(const as_event *ev, int projected, as_buf *out)
{
    static const char *const env[] = {"seq", "time", NULL};
    if (!projected) {
        as_buf_put(out, ev->json, ev->len);
    } else if (ev->member_f && ev->member_of == ev->json) {   // the member's bytes without "seq" and "time"
        member_put(out, ev->member_f, 0, 0, 0);
    } else {
        as_json_drop_keys(ev->j, 0, env, out);
    }
}

void as_sess_lazy(as_sess *s) { s->lazy = 1; }
void as_sess_shallow(as_sess *s) { s->lazy = s->shallow = 1; }
void as_sess_pieces(as_sess *s) { s->lazy = s->shallow = s->pieces = 1; }

int as_event_member(const as_event *ev, as_member *m)
{
    if (!ev->member_f || ev->member_of != ev->json) return 0;
    const member_f *f = ev->member_f;
    // In the member layout the first '{' after the root's opens "data" and
    // the next one "chunk" (only fixed keys and numbers stand before them);
    // the chunk closes two bytes before the end.
    const char *d = memchr(ev->json + 1, '{', ev->len - 1);
    const char *c = d ? memchr(d + 1, '{', (size_t)(ev->json + ev->len - d - 1)) : NULL;
    if (!c) as_die(AS_TROUBLE, "internal error: a member event without its chunk");
    *m = (as_member){f->kind, f->turn, f->step, f->index, {c, (size_t)(ev->json + ev->len - 2 - c)},
                     f->id, f->name, f->payload, f->seq, f->time};
    return 1;
}

static int out_projected(const as_packer *p, const as_event *ev)
{
    return p->mode == AS_PACK_KEEP ? ev->projected : p->mode == AS_PACK_PROJECTED;
}

// A short run stays events, unless they would lose its times: a projected
// event has no time, and a projected log's own times (a row's dt) are kept
// only in a row.
static int short_run_stays_events(const as_packer *p)
{
    return p->n < 3 && !(p->projected && p->src_projected && (p->time0 != 0 || p->lasttime != 0));
}

static void flush_run(as_packer *p)
{
    if (!p->kind) return;
    if (short_run_stays_events(p)) {
        for (int64_t k = 0; k < p->n; k++) p->emit(p->ctx, p->early[k].p, p->early[k].n, p->early_line[k]);
        p->kind = AS_DELTA_NONE;
        return;
    }
    as_buf *o = &p->out;
    as_buf_reset(o);
    as_buf_puts(o, "{\"type\":\"");
    as_buf_puts(o, row_tag(p->kind));
    as_buf_putc(o, '"');
    if (!p->projected) {
        as_buf_puts(o, ",\"seq0\":");
        as_buf_puti(o, p->seq0);
        as_buf_puts(o, ",\"time0\":");
        as_buf_puti(o, p->time0);
    }
    as_buf_puts(o, ",\"data\":{\"turn\":");
    as_buf_put(o, p->turn.p, p->turn.n);
    as_buf_puts(o, ",\"step\":");
    as_buf_put(o, p->step.p, p->step.n);
    as_buf_puts(o, ",\"index\":");
    as_buf_put(o, p->index.p, p->index.n);
    as_buf_puts(o, ",\"dt\":[");
    as_buf_put(o, p->dt.p, p->dt.n);
    as_buf_putc(o, ']');
    if (p->kind == AS_DELTA_TOOL) {
        as_buf_puts(o, ",\"id\":");
        as_buf_put(o, p->id.p, p->id.n);
        if (p->has_name) { as_buf_puts(o, ",\"name\":"); as_buf_put(o, p->name.p, p->name.n); }
        as_buf_puts(o, ",\"args\":[");
    } else {
        as_buf_puts(o, ",\"texts\":[");
    }
    as_buf_put(o, p->payloads.p, p->payloads.n);
    as_buf_puts(o, "]}}");
    p->emit(p->ctx, o->p, o->n, p->srcline);
    p->kind = AS_DELTA_NONE;
}

static int same_span(const as_buf *b, bspan t)
{
    return b->n == t.n && !memcmp(b->p, t.p, t.n);
}

static void set_span(as_buf *b, bspan t)
{
    as_buf_reset(b);
    if (t.p) as_buf_put(b, t.p, t.n);
}

// Projected output of a persisted event drops its envelope, and the reader
// of the output gives it a synthetic one: so there its seq and time need
// not be plain integers nor follow on for it to pack (the row's dt keeps
// the gaps it can: 0 stands for one that is no safe integer or would take
// the members' times, counted from 0, out of the safe range). Otherwise the
// output would not be canonical.
static int drops_envelope(const as_event *ev, int projected) { return projected && !ev->projected; }

// The kind of ev when it may join a run, else AS_DELTA_NONE; f: its fields.
// It may when its line in the output form has exactly the bytes its member
// in a row would unpack to (packing may lose compression, never bytes): key
// order, spellings and white space all count; so do the envelope's digits,
// except in projected output, which drops them.
static as_delta exact_member(as_packer *p, const as_event *ev, int projected, member_f *f)
{
    if (ev->member_f && ev->member_of == ev->json) {   // the decoder's: a member by construction
        *f = *(const member_f *)ev->member_f;
        return f->kind;
    }
    int ty, data, full = event_root(ev, &ty, &data, f);
    as_delta k = chunk_fields(ev->j, ty, data, f);
    if (!k) return AS_DELTA_NONE;
    if (full && is_member_bytes(ev->json, ev->len, f, 1, ev->seq, ev->time)) return k;
    if (!drops_envelope(ev, projected)) return AS_DELTA_NONE;
    as_buf_reset(&p->line);   // drop_keys copies data verbatim: f's spans hold
    as_event_line(ev, 1, &p->line);
    return is_member_bytes(p->line.p, p->line.n, f, 0, 0, 0) ? k : AS_DELTA_NONE;
}

static int same_fields(const as_packer *p, const member_f *f)
{
    return same_span(&p->turn, f->turn) && same_span(&p->step, f->step) && same_span(&p->index, f->index)
           && (f->kind != AS_DELTA_TOOL || (same_span(&p->id, f->id) && (f->name.p != NULL) == p->has_name
                                            && (!f->name.p || same_span(&p->name, f->name))));
}

// 1 when ev, of kind k (exact, fields f), continues the open run; *gap is
// then its dt.
static int continues(const as_packer *p, const as_event *ev, as_delta k, const member_f *f, int projected,
                     int64_t *gap)
{
    if (!k || p->kind != k || projected != p->projected || !same_fields(p, f)) return 0;
    *gap = ev->time - p->lasttime;   // both within ±(2^53-1): no overflow
    int timed = ev->has_int_envelope && p->last_int && *gap <= SAFE_MAX && *gap >= -SAFE_MAX;
    if (drops_envelope(ev, projected)) {
        if (!timed || p->elapsed + *gap > SAFE_MAX || p->elapsed + *gap < -SAFE_MAX) *gap = 0;
        return 1;
    }
    return timed && ev->seq == p->lastseq + 1;
}

static void start_run(as_packer *p, const as_event *ev, as_delta k, const member_f *f, int projected)
{
    p->kind = k;
    p->projected = projected;
    p->src_projected = ev->projected;
    p->n = 1;
    p->seq0 = p->lastseq = ev->seq;
    p->time0 = p->lasttime = ev->time;
    p->last_int = ev->has_int_envelope;
    p->elapsed = 0;
    p->srcline = ev->lineno;
    set_span(&p->turn, f->turn);
    set_span(&p->step, f->step);
    set_span(&p->index, f->index);
    set_span(&p->id, f->id);
    set_span(&p->name, f->name);
    p->has_name = f->name.p != NULL;
    as_buf_reset(&p->dt);
    as_buf_reset(&p->payloads);
    as_buf_put(&p->payloads, f->payload.p, f->payload.n);
    as_buf_reset(&p->early[0]);
    as_event_line(ev, projected, &p->early[0]);
    p->early_line[0] = ev->lineno;
}

static void add_member(as_packer *p, const as_event *ev, const member_f *f, int projected, int64_t gap)
{
    if (p->n < 2) {
        as_buf_reset(&p->early[p->n]);
        as_event_line(ev, projected, &p->early[p->n]);
        p->early_line[p->n] = ev->lineno;
    }
    if (p->n > 1) as_buf_putc(&p->dt, ',');
    as_buf_puti(&p->dt, gap);
    as_buf_putc(&p->payloads, ',');
    as_buf_put(&p->payloads, f->payload.p, f->payload.n);
    p->n++;
    p->lastseq = ev->seq;
    p->lasttime = ev->time;
    p->last_int = ev->has_int_envelope;
    p->elapsed += gap;
}

void as_packer_push(as_packer *p, const as_event *ev)
{
    member_f f;
    int64_t gap;
    int projected = out_projected(p, ev);
    as_delta k = exact_member(p, ev, projected, &f);
    if (continues(p, ev, k, &f, projected, &gap)) {
        add_member(p, ev, &f, projected, gap);
        return;
    }
    flush_run(p);
    if (k) {
        start_run(p, ev, k, &f, projected);
        return;
    }
    if (!projected) {   // the line as it is: no copy
        p->emit(p->ctx, ev->json, ev->len, ev->lineno);
        return;
    }
    as_buf_reset(&p->out);
    as_event_line(ev, projected, &p->out);
    p->emit(p->ctx, p->out.p, p->out.n, ev->lineno);
}

void as_packer_finish(as_packer *p) { flush_run(p); }

void as_packer_free(as_packer *p)
{
    if (!p) return;
    as_buf *bs[] = {&p->turn, &p->step, &p->index, &p->id, &p->name, &p->dt, &p->payloads,
                    &p->early[0], &p->early[1], &p->out, &p->line};
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) as_buf_free(bs[i]);
    free(p);
}

// ---------------------------------------------------------------- check
//
// pack(unpack(x)) is compared with x line by line as the packer emits:
// with the source lines queued as they are decoded (copied: the reader's
// line is gone by the time a run is flushed), or, when the caller holds the
// file's text, with that text in place.

typedef struct qline { char *p; size_t n; long line; struct qline *next; } qline;
typedef struct {
    qline *head, *tail;
    long bad;
    const char *at, *end;   // (text) the next source line to compare, the text's end; at NULL: queued
    long atline, decoded;   // (text) its number; the last line decoded
} checkq;

// The next line of the text as the reader gives it (without the CR of a
// CRLF end), or 0 when the decoder has not read it yet.
static int text_line(const checkq *q, const char **p, size_t *n)
{
    if (q->atline > q->decoded) return 0;
    const char *nl = memchr(q->at, '\n', (size_t)(q->end - q->at));
    *p = q->at;
    *n = (size_t)((nl ? nl : q->end) - q->at);
    if (*n && q->at[*n - 1] == '\r') --*n;
    return 1;
}

static void text_emit(checkq *q, const char *line, size_t len, long srcline)
{
    const char *p;
    size_t n;
    if (!text_line(q, &p, &n)) { q->bad = srcline; return; }
    if (n != len || memcmp(p, line, len)) { q->bad = q->atline; return; }
    const char *nl = memchr(q->at, '\n', (size_t)(q->end - q->at));
    q->at = nl ? nl + 1 : q->end;
    q->atline++;
}

static void check_emit(void *ctx, const char *line, size_t len, long srcline)
{
    checkq *q = ctx;
    if (q->bad) return;
    if (q->at) { text_emit(q, line, len, srcline); return; }
    qline *h = q->head;
    if (!h) { q->bad = srcline; return; }
    if (h->n != len || memcmp(h->p, line, len)) { q->bad = h->line; return; }
    q->head = h->next;
    if (!q->head) q->tail = NULL;
    free(h->p);
    free(h);
}

// What a check holds while it runs, so that a caller that catches a fatal
// error can release it.
typedef struct { as_sess *s; as_packer *p; checkq q; } checkrun;

static void check_release(checkrun *c)
{
    while (c->q.head) { qline *n = c->q.head->next; free(c->q.head->p); free(c->q.head); c->q.head = n; }
    c->q.tail = NULL;
    as_packer_free(c->p);
    as_sess_close(c->s);
    c->p = NULL;
    c->s = NULL;
}

// Source line ln (the decoder's current one) is now to be compared.
static void check_queue(checkrun *c, long ln)
{
    if (c->q.at) { c->q.decoded = ln; return; }
    const char *l;
    size_t n;
    as_sess_line(c->s, &l, &n);
    qline *e = as_xmalloc(sizeof *e);
    e->p = as_xmalloc(n ? n : 1);
    memcpy(e->p, l, n);
    e->n = n;
    e->line = ln;
    e->next = NULL;
    if (c->q.tail) c->q.tail->next = e; else c->q.head = e;
    c->q.tail = e;
}

// The check of path, compared with text[0, n) when text is set.
static int check(const char *path, const char *text, size_t n, long *badline, checkrun *c)
{
    c->s = sess_open(path, text, n);   // (text: the file's decoded bytes, read again no more)
    as_sess_shallow(c->s);
    c->p = as_packer_new(AS_PACK_KEEP, check_emit, &c->q);
    if (text) {   // line 1, the header, is no packer's business
        const char *nl = memchr(text, '\n', n);
        c->q.at = nl ? nl + 1 : text + n;
        c->q.end = text + n;
        c->q.atline = 2;
        c->q.decoded = 1;
    }
    as_event ev;
    long last = 1;
    while (!c->q.bad && as_sess_next(c->s, &ev)) {
        if (ev.lineno != last) {   // each source line once
            check_queue(c, ev.lineno);
            last = ev.lineno;
        }
        as_packer_push(c->p, &ev);
    }
    if (!c->q.bad) as_packer_finish(c->p);
    const char *p;
    size_t pn;
    if (!c->q.bad && c->q.head) c->q.bad = c->q.head->line;
    if (!c->q.bad && c->q.at && text_line(&c->q, &p, &pn)) c->q.bad = c->q.atline;
    *badline = c->q.bad;
    check_release(c);
    return *badline ? 1 : 0;
}

int as_sess_check(const char *path, long *badline)
{
    checkrun c = {0};
    return check(path, NULL, 0, badline, &c);
}

static jmp_buf soft_back;
static void soft_hook(int code) { longjmp(soft_back, 1); }

static int check_soft(const char *path, const char *text, size_t n, long *badline)
{
    // The decoder reports malformed input by dying; catch that here and
    // release what the abandoned check held.
    static checkrun c;
    void (*saved)(int) = as_die_hook;
    memset(&c, 0, sizeof c);
    if (setjmp(soft_back)) {
        as_die_hook = saved;
        if (!c.s) as_sess_open_abandoned();   // it died opening
        check_release(&c);
        *badline = 0;
        return 2;
    }
    as_die_hook = soft_hook;
    int r = check(path, text, n, badline, &c);
    as_die_hook = saved;
    return r;
}

int as_sess_check_soft(const char *path, long *badline) { return check_soft(path, NULL, 0, badline); }

int as_sess_check_text(const char *path, const char *text, size_t n, long *badline)
{
    return check_soft(path, text, n, badline);
}

// ---------------------------------------------------------------- transcode

static void out_emit(void *ctx, const char *line, size_t len, long srcline)
{
    as_out_line(ctx, line, len);
}

void as_sess_transcode(const char *path, as_out *o, int mode, int unpack)
{
    as_sess *s = as_sess_open(path);
    if (unpack) as_sess_pieces(s);
    else as_sess_shallow(s);
    const char *h;
    size_t hn;
    as_sess_header(s, &h, &hn);
    as_out_line(o, h, hn);
    as_out_frame(o);
    as_event ev;
    if (unpack) {
        as_buf env = {0};
        while (as_sess_next(s, &ev)) {
            if (!ev.env_at) { as_out_line(o, ev.json, ev.len); continue; }
            as_buf_reset(&env);
            put_envelope(&env, ev.seq);
            as_out_line3(o, ev.json, ev.env_at, env.p, env.n, ev.json + ev.env_at, ev.len - ev.env_at);
        }
        as_buf_free(&env);
    } else {
        as_packer *p = as_packer_new(mode, out_emit, o);
        while (as_sess_next(s, &ev)) as_packer_push(p, &ev);
        as_packer_finish(p);
        as_packer_free(p);
    }
    as_out_frame(o);
    as_sess_close(s);
}
