// jdiff.c - the JSON-aware line diff behind acpsnap-jdiff (jdiff.h): line
// identities, a bounded Myers alignment, label pairing within each
// differing region, and the member-by-member report of a changed line.
#include "jdiff.h"
#include <stdlib.h>
#include <string.h>

#define WIDTH 80          // a printed value longer than this is shortened
#define LCS_CELLS (1u << 20)   // label pairing of a region: table size limit

// ------------------------------------------------------------------ lines

int as_jlines_add(as_jlines *f, as_json *j, const char *s, size_t n)
{
    if (as_json_parse(j, s, n)) return -1;
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 256;
        f->off = as_xrealloc(f->off, f->cap * sizeof *f->off);
        f->len = as_xrealloc(f->len, f->cap * sizeof *f->len);
    }
    f->off[f->n] = f->text.n;
    f->len[f->n++] = n;
    as_buf_put(&f->text, s, n);
    as_buf_putc(&f->text, '\n');
    return 0;
}

void as_jlines_read(as_jlines *f, const char *path)
{
    as_in *in = as_in_open(path);
    as_json j = {0};
    const char *s;
    size_t n;
    while (as_in_line(in, &s, &n))
        if (as_jlines_add(f, &j, s, n)) as_json_die(&j, as_in_name(in), as_in_lineno(in));
    as_json_free(&j);
    as_in_close(in);
}

void as_jlines_free(as_jlines *f)
{
    as_buf_free(&f->text);
    free(f->off);
    free(f->len);
    memset(f, 0, sizeof *f);
}

static const char *line_p(const as_jlines *f, size_t i) { return f->text.p + f->off[i]; }

// ------------------------------------------------------------- identities

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

// ida[i], idb[i]: equal numbers for lines with equal bytes.
static void identities(const as_jlines *a, const as_jlines *b, uint32_t *ida, uint32_t *idb)
{
    size_t total = a->n + b->n, cap = 16;
    while (cap < total * 2) cap *= 2;
    struct slot { uint64_t h; const as_jlines *f; size_t i; uint32_t id; } *tab = calloc(cap, sizeof *tab);
    if (!tab) as_die(AS_TROUBLE, "out of memory");
    uint32_t next = 0;
    for (int side = 0; side < 2; side++) {
        const as_jlines *f = side ? b : a;
        uint32_t *ids = side ? idb : ida;
        for (size_t i = 0; i < f->n; i++) {
            const char *s = line_p(f, i);
            uint64_t h = hash(s, f->len[i]);
            size_t k = (size_t)h & (cap - 1);
            for (;; k = (k + 1) & (cap - 1)) {
                struct slot *e = &tab[k];
                if (!e->f) { *e = (struct slot){h, f, i, next++}; break; }
                if (e->h == h && e->f->len[e->i] == f->len[i] && !memcmp(line_p(e->f, e->i), s, f->len[i])) break;
            }
            ids[i] = tab[k].id;
        }
    }
    free(tab);
}

// -------------------------------------------------------------- alignment

// The edit script, in order: each op is an equal pair, a removed line of a
// or an inserted line of b.
enum { EQ, DEL, INS };
typedef struct { uint8_t op; size_t i, j; } edit;
typedef struct { edit *e; size_t n, cap; } script;

static void push_edit(script *s, int op, size_t i, size_t j)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->e = as_xrealloc(s->e, s->cap * sizeof *s->e);
    }
    s->e[s->n++] = (edit){(uint8_t)op, i, j};
}

// Myers's greedy alignment of a[0,n) with b[0,m) (offsets ao, bo in the
// files), appended to s. Returns 0, or -1 when the distance exceeds DMAX
// (s unchanged). The furthest-reaching x of diagonal k after d edits is
// kept for every d, d² entries in all, to walk the path back.
static int myers(const uint32_t *a, size_t n, const uint32_t *b, size_t m, size_t ao, size_t bo, script *s)
{
    long N = (long)n, M = (long)m, dmax = AS_JDIFF_DMAX, D = -1;
    if (N + M < dmax) dmax = N + M;
    long *v = as_xmalloc((size_t)(dmax + 1) * (size_t)(dmax + 1) * sizeof *v);
#define V(d, k) v[(d) * (d) + (k) + (d)]
    for (long d = 0; d <= dmax && D < 0; d++) {
        for (long k = -d; k <= d; k += 2) {
            long x;
            if (d == 0) x = 0;
            else if (k == -d || (k != d && V(d - 1, k - 1) < V(d - 1, k + 1))) x = V(d - 1, k + 1);
            else x = V(d - 1, k - 1) + 1;
            long y = x - k;
            while (x < N && y < M && a[x] == b[y]) x++, y++;
            V(d, k) = x;
            if (x >= N && y >= M) { D = d; break; }
        }
    }
    if (D < 0) { free(v); return -1; }
    // Walk back from (N, M), collecting the ops in reverse.
    edit *rev = as_xmalloc((size_t)(N + M + 1) * sizeof *rev);
    size_t r = 0;
    long x = N, y = M;
    for (long d = D; d > 0; d--) {
        long k = x - y, pk;
        if (k == -d || (k != d && V(d - 1, k - 1) < V(d - 1, k + 1))) pk = k + 1;
        else pk = k - 1;
        long px = V(d - 1, pk), py = px - pk;
        long sx = pk == k + 1 ? px : px + 1;   // where the snake after the edit starts
        while (x > sx) { x--; y--; rev[r++] = (edit){EQ, (size_t)x, (size_t)y}; }
        if (pk == k + 1) rev[r++] = (edit){INS, (size_t)px, (size_t)py};
        else rev[r++] = (edit){DEL, (size_t)px, (size_t)py};
        x = px;
        y = py;
    }
    while (x > 0) { x--; y--; rev[r++] = (edit){EQ, (size_t)x, (size_t)y}; }
#undef V
    while (r > 0) {
        edit e = rev[--r];
        push_edit(s, e.op, e.i + ao, e.j + bo);
    }
    free(rev);
    free(v);
    return 0;
}

// The whole edit script: common head and tail, Myers in between, or, past
// DMAX, every middle line removed and inserted (paired later by label).
static void align(const uint32_t *a, size_t n, const uint32_t *b, size_t m, script *s)
{
    size_t h = 0, t = 0;
    while (h < n && h < m && a[h] == b[h]) h++;
    while (t < n - h && t < m - h && a[n - 1 - t] == b[m - 1 - t]) t++;
    for (size_t i = 0; i < h; i++) push_edit(s, EQ, i, i);
    if (myers(a + h, n - h - t, b + h, m - h - t, h, h, s)) {
        for (size_t i = h; i < n - t; i++) push_edit(s, DEL, i, 0);
        for (size_t j = h; j < m - t; j++) push_edit(s, INS, 0, j);
    }
    for (size_t k = t; k > 0; k--) push_edit(s, EQ, n - k, m - k);
}

// ---------------------------------------------------------------- printing

typedef struct {
    const as_jdiff_opt *o;
    as_json ja, jb;
    as_buf line, path, tmp, tmp2;
    long count;           // differences found in the current line pair
} ctx;

static void emit(ctx *c)
{
    if (!c->o->quiet && c->o->emit) c->o->emit(c->o->ctx, c->line.p ? c->line.p : "", c->line.n);
    as_buf_reset(&c->line);
}

static void color(ctx *c, int which)   // 0 reset, 1 old (red), 2 new (green)
{
    if (!c->o->color) return;
    as_buf_puts(&c->line, which == 1 ? "\033[31m" : which == 2 ? "\033[32m" : "\033[m");
}

// Appends s[from, to) moved to UTF-8 character boundaries.
static void put_chars(as_buf *b, const char *s, size_t n, size_t from, size_t to)
{
    while (from > 0 && from < n && ((unsigned char)s[from] & 0xc0) == 0x80) from++;
    while (to < n && to > from && ((unsigned char)s[to] & 0xc0) == 0x80) to--;
    as_buf_put(b, s + from, to - from);
}

// Appends s, shortened to about WIDTH bytes with "…" in the middle.
static void put_short(as_buf *b, const char *s, size_t n)
{
    if (n <= WIDTH) { as_buf_put(b, s, n); return; }
    put_chars(b, s, n, 0, WIDTH / 2 - 1);
    as_buf_puts(b, "…");
    put_chars(b, s, n, n - (WIDTH / 2 - 1), n);
}

// Appends the string token bytes s (quotes included) as a window of about
// WIDTH bytes around offset p, marking the cut ends with "…".
static void put_window(as_buf *b, const char *s, size_t n, size_t p)
{
    if (n <= WIDTH) { as_buf_put(b, s, n); return; }
    size_t from = p > WIDTH / 3 ? p - WIDTH / 3 : 0, to = from + WIDTH - 6;
    if (to > n) { to = n; from = n > WIDTH - 6 ? n - (WIDTH - 6) : 0; }
    if (from > 0) as_buf_puts(b, "\"…");
    put_chars(b, s, n, from, to);
    if (to < n) as_buf_puts(b, "…\"");
}

// The compact bytes of token t of j, in c->tmp (or tmp2 with second set).
static as_buf *compact(ctx *c, const as_json *j, int t, int second)
{
    as_buf *b = second ? &c->tmp2 : &c->tmp;
    as_buf_reset(b);
    as_json_compact(as_tok_p(j, t), as_tok_len(j, t), b);
    return b;
}

static void head(ctx *c, const char *prefix)
{
    as_buf_puts(&c->line, prefix);
    as_buf_put(&c->line, c->path.p ? c->path.p : "", c->path.n);
}

// One difference found: 1 when it is to be printed (within max).
static int counted(ctx *c)
{
    c->count++;
    return !c->o->max || c->count <= c->o->max;
}

// "PREFIX$.path: old → new"
static void changed(ctx *c, const char *prefix, int ta, int tb)
{
    if (!counted(c)) return;
    head(c, prefix);
    as_buf_puts(&c->line, ": ");
    as_buf *x = compact(c, &c->ja, ta, 0), *y = compact(c, &c->jb, tb, 1);
    int strs = c->ja.t[ta].type == AS_JSTR && c->jb.t[tb].type == AS_JSTR;
    size_t p = 0;
    while (p < x->n && p < y->n && x->p[p] == y->p[p]) p++;
    color(c, 1);
    if (strs) put_window(&c->line, x->p, x->n, p); else put_short(&c->line, x->p, x->n);
    color(c, 0);
    as_buf_puts(&c->line, " → ");
    color(c, 2);
    if (strs) put_window(&c->line, y->p, y->n, p); else put_short(&c->line, y->p, y->n);
    color(c, 0);
    emit(c);
}

// "PREFIX+ $.path: value" (side 2) or "PREFIX- $.path: value" (side 1)
static void member(ctx *c, const char *prefix, int side, int t)
{
    if (!counted(c)) return;
    as_buf_puts(&c->line, prefix);
    color(c, side);
    as_buf_puts(&c->line, side == 2 ? "+ " : "- ");
    as_buf_put(&c->line, c->path.p ? c->path.p : "", c->path.n);
    as_buf_puts(&c->line, ": ");
    as_buf *x = compact(c, side == 2 ? &c->jb : &c->ja, t, 0);
    put_short(&c->line, x->p, x->n);
    color(c, 0);
    emit(c);
}

static void note(ctx *c, const char *prefix, const char *what)
{
    if (!counted(c)) return;
    head(c, prefix);
    as_buf_puts(&c->line, ": ");
    as_buf_puts(&c->line, what);
    emit(c);
}

// ------------------------------------------------------------ member diff

static int ident(const char *s, size_t n)
{
    if (!n || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) return 0;
    }
    return 1;
}

// Appends the path step of key token k of j: .name, or ["raw key"].
static void path_key(as_buf *path, const as_json *j, int k)
{
    const char *s = as_tok_p(j, k);
    size_t n = as_tok_len(j, k);
    if (!j->t[k].esc && ident(s + 1, n - 2)) {
        as_buf_putc(path, '.');
        as_buf_put(path, s + 1, n - 2);
    } else {
        as_buf_putc(path, '[');
        as_buf_put(path, s, n);
        as_buf_putc(path, ']');
    }
}

static int same_bytes(const as_json *x, int a, const as_json *y, int b)
{
    size_t n = as_tok_len(x, a);
    return n == as_tok_len(y, b) && !memcmp(as_tok_p(x, a), as_tok_p(y, b), n);
}

static int same_key(ctx *c, int ka, int kb)
{
    if (same_bytes(&c->ja, ka, &c->jb, kb)) return 1;
    if (!c->ja.t[ka].esc && !c->jb.t[kb].esc) return 0;
    as_buf x = {0}, y = {0};
    as_json_str(&c->ja, ka, &x);
    as_json_str(&c->jb, kb, &y);
    int eq = x.n == y.n && (!x.n || !memcmp(x.p, y.p, x.n));
    as_buf_free(&x);
    as_buf_free(&y);
    return eq;
}

static void walk(ctx *c, const char *prefix, int ta, int tb);

// Objects as maps: members matched by key (the k-th of a key in a with the
// k-th in b), a common key order that differs is a difference of its own.
static void walk_obj(ctx *c, const char *prefix, int ta, int tb)
{
    size_t na = c->ja.t[ta].count, nb = c->jb.t[tb].count;
    int *kb = as_xmalloc((nb + 1) * sizeof *kb);     // key tokens of b, by ordinal
    char *used = calloc(nb + 1, 1);
    if (!used) as_die(AS_TROUBLE, "out of memory");
    size_t i = 0;
    for (int k = as_json_firstkey(&c->jb, tb); k >= 0; k = as_json_nextkey(&c->jb, k)) kb[i++] = k;
    int *match = as_xmalloc((na + 1) * sizeof *match);   // ordinal in b of a's member, or -1
    size_t hint = 0, ia = 0;
    int unordered = 0;
    long last = -1;
    for (int k = as_json_firstkey(&c->ja, ta); k >= 0; k = as_json_nextkey(&c->ja, k), ia++) {
        match[ia] = -1;
        // from the ordinal after the last match on, wrapping: linear when orders agree
        for (size_t s = 0; s < nb; s++) {
            size_t q = (hint + s) % nb;
            if (!used[q] && same_key(c, k, kb[q])) { match[ia] = (int)q; used[q] = 1; hint = q + 1; break; }
        }
        if (match[ia] >= 0) {
            if ((long)match[ia] < last) unordered = 1;
            last = match[ia];
        }
    }
    size_t mark = c->path.n;
    if (unordered) note(c, prefix, "key order differs");
    ia = 0;
    for (int k = as_json_firstkey(&c->ja, ta); k >= 0; k = as_json_nextkey(&c->ja, k), ia++) {
        path_key(&c->path, &c->ja, k);
        if (match[ia] < 0) member(c, prefix, 1, k + 1);
        else walk(c, prefix, k + 1, kb[match[ia]] + 1);
        c->path.n = mark;
        c->path.p[mark] = 0;
    }
    for (size_t q = 0; q < nb; q++) {
        if (used[q]) continue;
        path_key(&c->path, &c->jb, kb[q]);
        member(c, prefix, 2, kb[q] + 1);
        c->path.n = mark;
        c->path.p[mark] = 0;
    }
    free(match);
    free(used);
    free(kb);
}

// One step of an array walk: element x of a (index i) against y of b
// (index j), either absent (-1): changed ones under a's index, added ones
// under b's.
static void element(ctx *c, const char *prefix, int x, size_t i, int y, size_t j)
{
    size_t mark = c->path.n;
    as_buf_printf(&c->path, "[%zu]", x >= 0 ? i : j);
    if (x >= 0 && y >= 0) walk(c, prefix, x, y);
    else if (x >= 0) member(c, prefix, 1, x);
    else member(c, prefix, 2, y);
    c->path.n = mark;
    c->path.p[mark] = 0;
}

// Arrays: when the lengths differ (and the arrays are not too long), the
// elements with equal bytes are aligned first (a longest common
// subsequence), so an inserted element is one addition; the elements in
// between are compared in order, the longer side's extras added or removed.
static void walk_arr(ctx *c, const char *prefix, int ta, int tb)
{
    size_t na = c->ja.t[ta].count, nb = c->jb.t[tb].count;
    int *xa = as_xmalloc((na + 1) * sizeof *xa), *xb = as_xmalloc((nb + 1) * sizeof *xb);
    size_t n = 0;
    for (int x = as_json_first(&c->ja, ta); x >= 0; x = as_json_nextel(&c->ja, x)) xa[n++] = x;
    n = 0;
    for (int y = as_json_first(&c->jb, tb); y >= 0; y = as_json_nextel(&c->jb, y)) xb[n++] = y;
    // anchors: matched (i, j) pairs, then (na, nb) as the last
    size_t *ai = as_xmalloc((na + nb + 1) * sizeof *ai), *aj = as_xmalloc((na + nb + 1) * sizeof *aj), nk = 0;
    if (na != nb && (na + 1) * (nb + 1) <= LCS_CELLS / 16) {
        uint32_t *t = as_xmalloc((na + 1) * (nb + 1) * sizeof *t);
#define T(i, j) t[(i) * (nb + 1) + (j)]
#define EQ_EL(i, j) same_bytes(&c->ja, xa[i], &c->jb, xb[j])
        for (size_t i = na + 1; i-- > 0;)
            for (size_t j = nb + 1; j-- > 0;) {
                if (i == na || j == nb) T(i, j) = 0;
                else if (EQ_EL(i, j)) T(i, j) = T(i + 1, j + 1) + 1;
                else T(i, j) = T(i + 1, j) >= T(i, j + 1) ? T(i + 1, j) : T(i, j + 1);
            }
        for (size_t i = 0, j = 0; i < na && j < nb;) {
            if (EQ_EL(i, j) && T(i, j) == T(i + 1, j + 1) + 1) { ai[nk] = i++; aj[nk++] = j++; }
            else if (T(i + 1, j) >= T(i, j + 1)) i++;
            else j++;
        }
#undef EQ_EL
#undef T
        free(t);
    }
    ai[nk] = na;
    aj[nk] = nb;
    size_t i = 0, j = 0;
    for (size_t k = 0; k <= nk; k++) {
        for (; i < ai[k] && j < aj[k]; i++, j++) element(c, prefix, xa[i], i, xb[j], j);
        for (; i < ai[k]; i++) element(c, prefix, xa[i], i, -1, 0);
        for (; j < aj[k]; j++) element(c, prefix, -1, 0, xb[j], j);
        i++;
        j++;
    }
    free(ai);
    free(aj);
    free(xa);
    free(xb);
}

static void walk(ctx *c, const char *prefix, int ta, int tb)
{
    if (same_bytes(&c->ja, ta, &c->jb, tb)) return;
    int x = c->ja.t[ta].type, y = c->jb.t[tb].type;
    if (x == AS_JOBJ && y == AS_JOBJ) walk_obj(c, prefix, ta, tb);
    else if (x == AS_JARR && y == AS_JARR) walk_arr(c, prefix, ta, tb);
    else if (x != y || (x != AS_JOBJ && x != AS_JARR)) changed(c, prefix, ta, tb);
}

// ------------------------------------------------------------------ labels

// Appends the body of string token t (its source bytes between the quotes).
static void put_body(as_buf *b, const as_json *j, int t)
{
    as_buf_put(b, as_tok_p(j, t) + 1, as_tok_len(j, t) - 2);
}

// The label of a line: "method sessionUpdate", "method id N", "response id N",
// "error id N", or "type" (a session log row): 1. Else 0 and its kind
// ("object", "array" or "value"): pairing a line needs only that, and
// naming it shows its shortened bytes instead (name).
static int label(as_json *j, const char *s, size_t n, as_buf *out)
{
    as_buf_reset(out);
    if (as_json_parse(j, s, n)) as_die(AS_TROUBLE, "internal error: a checked line does not parse");
    static const as_key keys[] = {AS_KEY("method"), AS_KEY("id"), AS_KEY("result"), AS_KEY("error"),
                                  AS_KEY("type"), AS_KEY("params")};
    int idx[6];
    if (as_json_pick(j, 0, keys, 6, idx) >= 0) {
        int method = idx[0], id = idx[1];
        if (method >= 0 && j->t[method].type == AS_JSTR) {
            put_body(out, j, method);
            int u = idx[5] >= 0 ? as_json_get(j, idx[5], "update") : -1;
            int su = u >= 0 ? as_json_get(j, u, "sessionUpdate") : -1;
            if (su >= 0 && j->t[su].type == AS_JSTR) { as_buf_putc(out, ' '); put_body(out, j, su); }
            if (id >= 0) { as_buf_puts(out, " id "); put_short(out, as_tok_p(j, id), as_tok_len(j, id)); }
            return 1;
        }
        if (id >= 0 && (idx[2] >= 0 || idx[3] >= 0)) {
            as_buf_puts(out, idx[3] >= 0 ? "error id " : "response id ");
            put_short(out, as_tok_p(j, id), as_tok_len(j, id));
            return 1;
        }
        if (idx[4] >= 0 && j->t[idx[4]].type == AS_JSTR) { put_body(out, j, idx[4]); return 1; }
    }
    as_buf_puts(out, j->t[0].type == AS_JOBJ ? "object" : j->t[0].type == AS_JARR ? "array" : "value");
    return 0;
}

// ------------------------------------------------------------------ report

// "+ line N (label)", or "+ line N: shortened bytes" for a line without one.
static void whole(ctx *c, const as_jlines *f, size_t i, int side, const as_buf *lab, int named)
{
    color(c, side);
    as_buf_printf(&c->line, "%c line %zu", side == 2 ? '+' : '-', i + 1);
    if (named) {
        as_buf_puts(&c->line, " (");
        as_buf_put(&c->line, lab->p, lab->n);
        as_buf_putc(&c->line, ')');
    } else {
        as_buf_puts(&c->line, ": ");
        as_buf_reset(&c->tmp);
        as_json_compact(line_p(f, i), f->len[i], &c->tmp);
        put_short(&c->line, c->tmp.p, c->tmp.n);
    }
    color(c, 0);
    emit(c);
}

static void pair(ctx *c, const as_jlines *a, size_t i, const as_jlines *b, size_t j)
{
    char prefix[64];
    if (i == j) snprintf(prefix, sizeof prefix, "line %zu ", i + 1);
    else snprintf(prefix, sizeof prefix, "line %zu → %zu ", i + 1, j + 1);
    if (as_json_parse(&c->ja, line_p(a, i), a->len[i]) || as_json_parse(&c->jb, line_p(b, j), b->len[j]))
        as_die(AS_TROUBLE, "internal error: a checked line does not parse");
    c->count = 0;
    as_buf_reset(&c->path);
    as_buf_putc(&c->path, '$');
    walk(c, prefix, 0, 0);
    if (c->count == 0) note(c, prefix, "white space differs");
    if (c->o->max && c->count > c->o->max && !c->o->quiet) {
        as_buf_printf(&c->line, "%s… and %ld more", prefix, c->count - c->o->max);
        emit(c);
    }
}

// One differing region: removed lines del[0,nd) of a, inserted ins[0,ni) of
// b. Lines with equal labels are paired in order (a longest common
// subsequence of labels; by position when the region is too large); each
// pair is a changed line, the others are removed or inserted whole.
static void region(ctx *c, const as_jlines *a, const size_t *del, size_t nd,
                   const as_jlines *b, const size_t *ins, size_t ni)
{
    as_buf *la = calloc(nd + 1, sizeof *la), *lb = calloc(ni + 1, sizeof *lb);
    char *na = as_xmalloc(nd + 1), *nb = as_xmalloc(ni + 1);   // 1: a real label
    size_t *pa = as_xmalloc((nd + ni + 1) * sizeof *pa), *pb = as_xmalloc((nd + ni + 1) * sizeof *pb), np = 0;
    if (!la || !lb) as_die(AS_TROUBLE, "out of memory");
    for (size_t i = 0; i < nd; i++) na[i] = (char)label(&c->ja, line_p(a, del[i]), a->len[del[i]], &la[i]);
    for (size_t j = 0; j < ni; j++) nb[j] = (char)label(&c->jb, line_p(b, ins[j]), b->len[ins[j]], &lb[j]);
    if (nd && ni && (nd + 1) * (ni + 1) <= LCS_CELLS) {
        uint32_t *t = as_xmalloc((nd + 1) * (ni + 1) * sizeof *t);   // t[i][j]: LCS of suffixes
#define T(i, j) t[(i) * (ni + 1) + (j)]
        for (size_t i = nd + 1; i-- > 0;)
            for (size_t j = ni + 1; j-- > 0;) {
                if (i == nd || j == ni) T(i, j) = 0;
                else if (la[i].n == lb[j].n && !memcmp(la[i].p, lb[j].p, la[i].n)) T(i, j) = T(i + 1, j + 1) + 1;
                else T(i, j) = T(i + 1, j) >= T(i, j + 1) ? T(i + 1, j) : T(i, j + 1);
            }
        for (size_t i = 0, j = 0; i < nd && j < ni;) {
            if (la[i].n == lb[j].n && !memcmp(la[i].p, lb[j].p, la[i].n) && T(i, j) == T(i + 1, j + 1) + 1) {
                pa[np] = i++; pb[np++] = j++;
            } else if (T(i + 1, j) >= T(i, j + 1)) i++;
            else j++;
        }
#undef T
        free(t);
    } else   // too large: by position
        for (; np < nd && np < ni; np++) pa[np] = pb[np] = np;
    // Between two pairs, as many removed lines as inserted ones are
    // replaced lines (their labels differ: a changed id, method or type).
    size_t i = 0, j = 0;
    for (size_t k = 0; k <= np; k++) {
        size_t ei = k < np ? pa[k] : nd, ej = k < np ? pb[k] : ni;
        if (ei - i == ej - j)
            for (; i < ei; i++, j++) pair(c, a, del[i], b, ins[j]);
        for (; i < ei; i++) whole(c, a, del[i], 1, &la[i], na[i]);
        for (; j < ej; j++) whole(c, b, ins[j], 2, &lb[j], nb[j]);
        if (k < np) { pair(c, a, del[i], b, ins[j]); i++; j++; }
    }
    for (size_t k = 0; k < nd; k++) as_buf_free(&la[k]);
    for (size_t k = 0; k < ni; k++) as_buf_free(&lb[k]);
    free(la);
    free(lb);
    free(na);
    free(nb);
    free(pa);
    free(pb);
}

// ----------------------------------------------------------------- unified

// "START,LEN" of a hunk as diff -u writes it: ",1" left out, and for an
// empty range the line before it.
static void range(as_buf *b, size_t start, size_t len)
{
    if (len == 1) as_buf_printf(b, "%zu", start + 1);
    else as_buf_printf(b, "%zu,%zu", len ? start + 1 : start, len);
}

static void uline(ctx *c, int side, const as_jlines *f, size_t i)
{
    if (side) color(c, side);
    as_buf_putc(&c->line, side == 1 ? '-' : side == 2 ? '+' : ' ');
    as_buf_put(&c->line, line_p(f, i), f->len[i]);
    if (side) color(c, 0);
    emit(c);
}

// The unified diff of script s, with o->context lines of context: hunks
// closer than twice that are merged, and in each run of changes the
// removed lines come before the inserted ones, as with diff -u.
static void unified(ctx *c, const script *s, const as_jlines *a, const as_jlines *b)
{
    size_t n = s->n, w = (size_t)c->o->context;
    size_t *pa = as_xmalloc((n + 1) * sizeof *pa), *pb = as_xmalloc((n + 1) * sizeof *pb);
    pa[0] = pb[0] = 0;
    for (size_t k = 0; k < n; k++) {
        pa[k + 1] = pa[k] + (s->e[k].op != INS);
        pb[k + 1] = pb[k] + (s->e[k].op != DEL);
    }
    as_buf_printf(&c->line, "--- %s", c->o->name_a ? c->o->name_a : "old");
    emit(c);
    as_buf_printf(&c->line, "+++ %s", c->o->name_b ? c->o->name_b : "new");
    emit(c);
    for (size_t k = 0; k < n;) {
        size_t f = k;
        while (f < n && s->e[f].op == EQ) f++;
        if (f == n) break;
        size_t start = f - k > w ? f - w : k, e = f;
        for (;;) {
            while (e < n && s->e[e].op != EQ) e++;
            size_t g = e;
            while (g < n && s->e[g].op == EQ) g++;
            if (g < n && g - e <= 2 * w) e = g;
            else break;
        }
        size_t end = n - e > w ? e + w : n;
        as_buf_puts(&c->line, "@@ -");
        range(&c->line, pa[start], pa[end] - pa[start]);
        as_buf_puts(&c->line, " +");
        range(&c->line, pb[start], pb[end] - pb[start]);
        as_buf_puts(&c->line, " @@");
        emit(c);
        for (size_t q = start; q < end;) {
            if (s->e[q].op == EQ) { uline(c, 0, a, pa[q]); q++; continue; }
            size_t r = q;
            while (r < end && s->e[r].op != EQ) r++;
            for (size_t t = q; t < r; t++) if (s->e[t].op == DEL) uline(c, 1, a, pa[t]);
            for (size_t t = q; t < r; t++) if (s->e[t].op == INS) uline(c, 2, b, pb[t]);
            q = r;
        }
        k = end;
    }
    free(pa);
    free(pb);
}

long as_jdiff(const as_jlines *a, const as_jlines *b, const as_jdiff_opt *o)
{
    uint32_t *ida = as_xmalloc((a->n + 1) * sizeof *ida), *idb = as_xmalloc((b->n + 1) * sizeof *idb);
    identities(a, b, ida, idb);
    script s = {0};
    align(ida, a->n, idb, b->n, &s);
    free(ida);
    free(idb);
    ctx c = {.o = o};
    size_t *del = as_xmalloc((a->n + 1) * sizeof *del), *ins = as_xmalloc((b->n + 1) * sizeof *ins);
    long differing = 0;
    for (size_t k = 0; k < s.n;) {
        if (s.e[k].op == EQ) { k++; continue; }
        size_t nd = 0, ni = 0;
        for (; k < s.n && s.e[k].op != EQ; k++) {
            if (s.e[k].op == DEL) del[nd++] = s.e[k].i;
            else ins[ni++] = s.e[k].j;
        }
        differing += (long)(nd + ni);
        if (!o->quiet) region(&c, a, del, nd, b, ins, ni);
    }
    if (differing && !o->quiet && o->unified) unified(&c, &s, a, b);
    free(del);
    free(ins);
    free(s.e);
    as_json_free(&c.ja);
    as_json_free(&c.jb);
    as_buf_free(&c.line);
    as_buf_free(&c.path);
    as_buf_free(&c.tmp);
    as_buf_free(&c.tmp2);
    return differing;
}
