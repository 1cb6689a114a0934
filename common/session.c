// session.c - the session log v0 codec (acpsnap-session(5)): decoding packed rows
// into events with envelopes (synthetic ones for projected input), strict row
// validation, canonical packing of delta runs, projection.
#include "acpsnap.h"
#include <fcntl.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAFE_MAX 9007199254740991LL

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
    int dt;                // token of the next dt element
    int turn, step, index, id, name;
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

as_sess *as_sess_open(const char *path)
{
    as_sess *s = calloc(1, sizeof *s);
    if (!s) as_die(AS_TROUBLE, "out of memory");
    opening = s;
    s->in = as_in_open(path);
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
const char *as_sess_name(const as_sess *s) { return as_in_name(s->in); }

void as_sess_close(as_sess *s)
{
    if (!s) return;
    if (s->in) as_in_close(s->in);
    as_buf_free(&s->header);
    as_buf_free(&s->ebuf);
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
    int64_t t = vtime0, g;
    for (int e = as_json_first(j, dt); e >= 0; e = as_json_nextel(j, e))
        if (!as_json_int(j, e, &g)) MALFORMED("dt must be an array of safe integers");
    if (j->t[dt].count != j->t[pay].count - 1)
        MALFORMED("dt length %u does not match %u members", j->t[dt].count, j->t[pay].count);
    if (vseq0 + (int64_t)j->t[pay].count - 1 > SAFE_MAX) MALFORMED("member seqs must stay safe integers");
    for (int e = as_json_first(j, dt); e >= 0; e = as_json_nextel(j, e)) {
        as_json_int(j, e, &g);
        t += g;
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
    s->dt = as_json_first(j, dt);
}

// ------------------------------------------------------------ member bytes

// The fields of a chunk-delta event, as byte spans (a NULL p: absent).
typedef struct { const char *p; size_t n; } bspan;
typedef struct {
    as_delta kind;
    bspan turn, step, index, id, name, payload;
    bspan seq, time;    // when set: the spans the decoder read the envelope's values from
} member_f;

static bspan tok_span(const as_json *j, int tok)
{
    return tok < 0 ? (bspan){NULL, 0} : (bspan){as_tok_p(j, tok), as_tok_len(j, tok)};
}

// Where the bytes of a member event go: appended to b, or, with b NULL,
// compared with the expected bytes p[0, n) (ok drops to 0 on a difference).
// Inlined into both users, so that each gets its own straight-line code.
typedef struct { as_buf *b; const char *p; size_t n, at; int ok; } msink;
#define MINLINE static inline __attribute__((always_inline))

MINLINE void mput(msink *m, const char *s, size_t n)
{
    if (m->b) { as_buf_put(m->b, s, n); return; }
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
    if (m->b) { as_buf_puti(m->b, v); return; }
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

// 1 when s[0, n) is exactly member_bytes(f, env, seq, time).
static int is_member_bytes(const char *s, size_t n, const member_f *f, int env, int64_t seq, int64_t time)
{
    msink m = {NULL, s, n, 0, 1};
    member_bytes(&m, f, env, seq, time);
    return m.ok && m.at == n;
}

// Builds member row_k of the current row as an event.
static void row_member(as_sess *s, as_event *ev)
{
    const as_json *j = &s->j;
    if (s->row_k > 0) {
        int64_t g = 0;
        as_json_int(j, s->dt, &g);
        s->row_time += g;
        s->dt = as_json_nextel(j, s->dt);
    }
    as_buf *b = &s->ebuf;
    as_buf_reset(b);
    member_f f = {s->row, tok_span(j, s->turn), tok_span(j, s->step), tok_span(j, s->index),
                  tok_span(j, s->id), tok_span(j, s->name), tok_span(j, s->mem), {NULL, 0}, {NULL, 0}};
    msink m = {b, NULL, 0, 0, 1};
    member_bytes(&m, &f, 1, s->row_seq0 + s->row_k, s->row_time);
    if (as_json_parse(&s->ej, b->p, b->n)) as_die(AS_TROUBLE, "internal error: bad member event");
    ev->json = b->p;
    ev->len = b->n;
    ev->j = &s->ej;
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

int as_sess_next(as_sess *s, as_event *ev)
{
    if (s->row) { row_member(s, ev); return 1; }
    const char *line;
    size_t len;
    if (!as_in_line(s->in, &line, &len)) return 0;
    s->line = line;
    s->len = len;
    const char *name = as_in_name(s->in);
    long ln = as_in_lineno(s->in);
    if (len == 0) as_die_at(name, ln, 0, "empty line");
    as_json *j = &s->j;
    if (as_json_parse(j, line, len)) as_json_die(j, name, ln);
    if (j->t[0].type != AS_JOBJ) bad(s, "not a JSON object%s", "");
    static const as_key rk[] = {AS_KEY("type"), AS_KEY("seq"), AS_KEY("time"), AS_KEY("data")};
    int *r = ev->root + 1;
    ev->root[0] = as_json_pick(j, 0, rk, 4, r);
    ev->root_j = j;
    int ty = r[0];
    if (ty < 0) bad(s, "missing \"type\"%s", "");
    if (j->t[ty].type != AS_JSTR) bad(s, "\"type\" must be a string%s", "");
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
    } else {
        set_form(s, AS_FORM_PROJECTED);
        as_buf m = {0};
        as_buf_puts(&m, "\"seq\":");
        as_buf_puti(&m, s->nextseq);
        as_buf_puts(&m, ",\"time\":0");
        as_buf_reset(&s->ebuf);
        as_json_insert_after(j, 0, "type", m.p, m.n, &s->ebuf);
        as_buf_free(&m);
        if (as_json_parse(&s->ej, s->ebuf.p, s->ebuf.n)) as_die(AS_TROUBLE, "internal error: bad restored event");
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

// The shape the packer accepts before comparing bytes: an assistant/chunk
// event with exactly the keys of a member, string payloads, integer
// envelope. Fills f with the spans of its fields.
static as_delta classify(const as_event *ev, member_f *f)
{
    const as_json *j = ev->j;
    static const as_key env[] = {AS_KEY("type"), AS_KEY("seq"), AS_KEY("time"), AS_KEY("data")};
    static const as_key dk[] = {AS_KEY("turn"), AS_KEY("step"), AS_KEY("chunk")};
    static const as_key ck[] = {AS_KEY("type"), AS_KEY("index"), AS_KEY("text"), AS_KEY("id"),
                                AS_KEY("name"), AS_KEY("argumentsDelta")};
    int e[4], d[3], c[6];
    if (!ev->has_int_envelope || ev->seq < 0) return AS_DELTA_NONE;
    f->seq = f->time = (bspan){NULL, 0};
    if (ev->root_j == j) {   // picked by the decoder already, which read seq and time there
        if (ev->root[0] != 4) return AS_DELTA_NONE;
        memcpy(e, ev->root + 1, sizeof e);
        for (int i = 0; i < 4; i++)
            if (e[i] < 0) return AS_DELTA_NONE;
        f->seq = tok_span(j, e[1]);
        f->time = tok_span(j, e[2]);
    } else if (!as_json_exact(j, 0, env, 4, e)) {
        return AS_DELTA_NONE;
    }
    if (!AS_TOK_IS(j, e[0], "assistant/chunk")) return AS_DELTA_NONE;
    if (!as_json_exact(j, e[3], dk, 3, d)) return AS_DELTA_NONE;
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
    if (projected) as_json_drop_keys(ev->j, 0, env, out);
    else as_buf_put(out, ev->json, ev->len);
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

// 1 when ev, written as a plain line in the output form, has exactly the
// bytes its member in a row would unpack to: only then may it join a run
// (packing may lose compression, never bytes). Key order, spellings and
// white space all count; so do the envelope's digits, except in projected
// output, which drops them.
static int packs_exactly(as_packer *p, const as_event *ev, const member_f *f, int projected)
{
    if (is_member_bytes(ev->json, ev->len, f, 1, ev->seq, ev->time)) return 1;
    if (!projected || ev->projected) return 0;
    as_buf_reset(&p->line);
    as_event_line(ev, 1, &p->line);
    return is_member_bytes(p->line.p, p->line.n, f, 0, 0, 0);
}

void as_packer_push(as_packer *p, const as_event *ev)
{
    member_f f;
    int projected = out_projected(p, ev);
    as_delta k = classify(ev, &f);
    if (k && !packs_exactly(p, ev, &f, projected)) k = AS_DELTA_NONE;
    if (k && p->kind == k && projected == p->projected && ev->seq == p->lastseq + 1
        && ev->time - p->lasttime <= SAFE_MAX && ev->time - p->lasttime >= -SAFE_MAX
        && same_span(&p->turn, f.turn) && same_span(&p->step, f.step) && same_span(&p->index, f.index)
        && (k != AS_DELTA_TOOL || (same_span(&p->id, f.id) && (f.name.p != NULL) == p->has_name
                                   && (!f.name.p || same_span(&p->name, f.name))))) {
        if (p->n < 2) {
            as_buf_reset(&p->early[p->n]);
            as_event_line(ev, projected, &p->early[p->n]);
            p->early_line[p->n] = ev->lineno;
        }
        if (p->n > 1) as_buf_putc(&p->dt, ',');
        as_buf_puti(&p->dt, ev->time - p->lasttime);
        as_buf_putc(&p->payloads, ',');
        as_buf_put(&p->payloads, f.payload.p, f.payload.n);
        p->n++;
        p->lastseq = ev->seq;
        p->lasttime = ev->time;
        return;
    }
    flush_run(p);
    if (!k) {
        as_buf_reset(&p->out);
        as_event_line(ev, projected, &p->out);
        p->emit(p->ctx, p->out.p, p->out.n, ev->lineno);
        return;
    }
    p->kind = k;
    p->projected = projected;
    p->src_projected = ev->projected;
    p->n = 1;
    p->seq0 = p->lastseq = ev->seq;
    p->time0 = p->lasttime = ev->time;
    p->srcline = ev->lineno;
    set_span(&p->turn, f.turn);
    set_span(&p->step, f.step);
    set_span(&p->index, f.index);
    set_span(&p->id, f.id);
    set_span(&p->name, f.name);
    p->has_name = f.name.p != NULL;
    as_buf_reset(&p->dt);
    as_buf_reset(&p->payloads);
    as_buf_put(&p->payloads, f.payload.p, f.payload.n);
    as_buf_reset(&p->early[0]);
    as_event_line(ev, projected, &p->early[0]);
    p->early_line[0] = ev->lineno;
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

typedef struct qline { char *p; size_t n; long line; struct qline *next; } qline;
typedef struct { qline *head, *tail; long bad; } checkq;

static void check_emit(void *ctx, const char *line, size_t len, long srcline)
{
    checkq *q = ctx;
    if (q->bad) return;
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

static int check(const char *path, long *badline, checkrun *c)
{
    c->s = as_sess_open(path);
    c->p = as_packer_new(AS_PACK_KEEP, check_emit, &c->q);
    as_event ev;
    long last = 1;
    while (!c->q.bad && as_sess_next(c->s, &ev)) {
        if (ev.lineno != last) {   // queue each source line once
            const char *l;
            size_t n;
            as_sess_line(c->s, &l, &n);
            qline *e = as_xmalloc(sizeof *e);
            e->p = as_xmalloc(n ? n : 1);
            memcpy(e->p, l, n);
            e->n = n;
            e->line = ev.lineno;
            e->next = NULL;
            if (c->q.tail) c->q.tail->next = e; else c->q.head = e;
            c->q.tail = e;
            last = ev.lineno;
        }
        as_packer_push(c->p, &ev);
    }
    if (!c->q.bad) as_packer_finish(c->p);
    if (!c->q.bad && c->q.head) c->q.bad = c->q.head->line;
    *badline = c->q.bad;
    check_release(c);
    return *badline ? 1 : 0;
}

int as_sess_check(const char *path, long *badline)
{
    checkrun c = {0};
    return check(path, badline, &c);
}

static jmp_buf soft_back;
static void soft_hook(int code) { longjmp(soft_back, 1); }

int as_sess_check_soft(const char *path, long *badline)
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
    int r = check(path, badline, &c);
    as_die_hook = saved;
    return r;
}

// ---------------------------------------------------------------- transcode

static void out_emit(void *ctx, const char *line, size_t len, long srcline)
{
    as_out_line(ctx, line, len);
}

void as_sess_transcode(const char *path, as_out *o, int mode, int unpack)
{
    as_sess *s = as_sess_open(path);
    const char *h;
    size_t hn;
    as_sess_header(s, &h, &hn);
    as_out_line(o, h, hn);
    as_out_frame(o);
    as_event ev;
    if (unpack) {
        while (as_sess_next(s, &ev)) as_out_line(o, ev.json, ev.len);
    } else {
        as_packer *p = as_packer_new(mode, out_emit, o);
        while (as_sess_next(s, &ev)) as_packer_push(p, &ev);
        as_packer_finish(p);
        as_packer_free(p);
    }
    as_out_frame(o);
    as_sess_close(s);
}
