// rx.c - a linear-time matcher for POSIX extended regular expressions (rx.h).
//
// The pattern is parsed into a tree, then compiled into a Pike-VM program
// whose jumps are absolute. A search first computes, backwards over the
// text, the set of program states from which a match can still be reached
// ("live" sets, one bit per instruction and position); the forward Pike VM
// then runs only the threads that can still match. So the leftmost start is
// found by a bit test per position, and a search stops right after the end
// of its longest match: an iteration over every match is linear in the
// text. Live sets are kept at every 1024th position and a block of 1024 is
// recomputed from them when the forward scan enters it.
#include "acpsnap.h"
#include "rx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { I_CHAR, I_MATCH, I_JMP, I_SPLIT, I_SAVE, I_ASSERT };
enum { A_BOL, A_EOL, A_WORDB, A_NWORDB };
typedef struct { uint8_t op, arg; uint32_t x, y; } inst;   // CHAR: x = set; JMP: x; SPLIT: x (preferred), y
typedef struct { uint64_t w[4]; } set256;

struct as_rx {
    inst *ins; size_t n;            // the program; ins[n - 1] is the only MATCH
    set256 *sets; size_t nsets;
    uint32_t *rev_off, *rev;        // ε-predecessors of t: rev[rev_off[t] .. rev_off[t + 1])
    int groups;
    uint8_t cls[256]; int nclasses; // bytes no set tells apart share a class
    int wordctx;                    // \b or \B: the byte before a position matters too
};

// ---------------------------------------------------------------- parsing

enum { N_SET, N_EMPTY, N_CAT, N_ALT, N_REP, N_GROUP, N_ASSERT };
typedef struct { uint8_t type, arg; int kid, next; int min, max; int val; } node;   // CAT/ALT: kids via next; REP: max -1 = inf

#define MAX_DEPTH 100     // nested groups
#define MAX_STACKED 2     // quantifiers in a row (a+? is two)
#define MAX_COUNT 255

typedef struct {
    const unsigned char *p; size_t n, i;
    node *nd; size_t nnd, capnd;
    set256 *sets; size_t nsets, capsets;
    int groups, depth;
    char *err; size_t errn;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->errn, fmt, ap);
        va_end(ap);
    }
    ps->failed = 1;
    return -1;
}

static int new_node(parser *ps, int type)
{
    if (ps->nnd == ps->capnd) {
        ps->capnd = ps->capnd ? 2 * ps->capnd : 32;
        ps->nd = as_xrealloc(ps->nd, ps->capnd * sizeof *ps->nd);
    }
    node *d = &ps->nd[ps->nnd];
    memset(d, 0, sizeof *d);
    d->type = (uint8_t)type;
    d->kid = d->next = -1;
    return (int)ps->nnd++;
}

static void set_add(set256 *s, unsigned c) { s->w[c >> 6] |= (uint64_t)1 << (c & 63); }
static int set_has(const set256 *s, unsigned c) { return (int)((s->w[c >> 6] >> (c & 63)) & 1); }
static void set_range(set256 *s, unsigned lo, unsigned hi) { for (unsigned c = lo; c <= hi; c++) set_add(s, c); }
static void set_union(set256 *s, const set256 *o) { for (int k = 0; k < 4; k++) s->w[k] |= o->w[k]; }
static void set_invert(set256 *s) { for (int k = 0; k < 4; k++) s->w[k] = ~s->w[k]; }

static int set_node(parser *ps, const set256 *s)
{
    if (ps->nsets == ps->capsets) {
        ps->capsets = ps->capsets ? 2 * ps->capsets : 16;
        ps->sets = as_xrealloc(ps->sets, ps->capsets * sizeof *ps->sets);
    }
    ps->sets[ps->nsets] = *s;
    int d = new_node(ps, N_SET);
    ps->nd[d].val = (int)ps->nsets++;
    return d;
}

static int is_word(unsigned c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The POSIX classes in the C locale.
static int named_class(const char *name, size_t n, set256 *s)
{
    static const char *const names[] = {"alpha", "digit", "alnum", "upper", "lower", "space",
                                        "blank", "punct", "print", "graph", "cntrl", "xdigit"};
    int k = -1;
    for (int i = 0; i < 12; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n)) k = i;
    for (unsigned c = 0; c < 256 && k >= 0; c++) {
        int up = c >= 'A' && c <= 'Z', lo = c >= 'a' && c <= 'z', dig = c >= '0' && c <= '9';
        int graph = c > 0x20 && c < 0x7f;
        int in[12] = {up || lo, dig, up || lo || dig, up, lo,
                      c == ' ' || (c >= '\t' && c <= '\r'), c == ' ' || c == '\t',
                      graph && !up && !lo && !dig, graph || c == ' ', graph, c < 0x20 || c == 0x7f,
                      dig || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')};
        if (in[k]) set_add(s, c);
    }
    return k;
}

// \d \D \w \W \s \S into s: 1, or 0 when c is not a class letter.
static int escape_class(unsigned c, set256 *s)
{
    set256 t = {{0}};
    switch (c | 0x20) {
    case 'd': set_range(&t, '0', '9'); break;
    case 'w': for (unsigned k = 0; k < 256; k++) if (is_word(k)) set_add(&t, k); break;
    case 's': set_add(&t, ' '); set_range(&t, '\t', '\r'); break;
    default: return 0;
    }
    if (c >= 'A' && c <= 'Z') set_invert(&t);
    set_union(s, &t);
    return 1;
}

// The byte an escape stands for (\n, \t, …, punctuation), or -1 after
// reporting an escape that is refused.
static int escape_char(parser *ps, unsigned c)
{
    static const char ctl[] = "n\nt\tr\rf\fv\v";
    for (int k = 0; ctl[k]; k += 2)
        if (c == (unsigned char)ctl[k]) return (unsigned char)ctl[k + 1];
    if (c == '0') return 0;
    if (c >= '1' && c <= '9')
        return fail(ps, "back-references (\\%c) are not supported", (char)c);
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return fail(ps, "unsupported escape \\%c", (char)c);
    return (int)c;
}

// One bracket element into s: a byte (returned, for ranges) or a class (-2).
static int bracket_elem(parser *ps, set256 *s)
{
    const unsigned char *p = ps->p;
    if (p[ps->i] == '[' && ps->i + 1 < ps->n && strchr(":=.", p[ps->i + 1])) {
        char kind = (char)p[ps->i + 1];
        size_t a = ps->i + 2, e = a;
        while (e + 1 < ps->n && !(p[e] == (unsigned char)kind && p[e + 1] == ']')) e++;
        if (e + 1 >= ps->n) return fail(ps, "unmatched [%c", kind);
        ps->i = e + 2;
        if (kind == ':') {
            if (named_class((const char *)p + a, e - a, s) < 0)
                return fail(ps, "invalid character class [:%.*s:]", (int)(e - a > 20 ? 20 : e - a), p + a);
            return -2;
        }
        if (e - a != 1) return fail(ps, "invalid collating element [%c%.*s%c]", kind, (int)(e - a > 20 ? 20 : e - a), p + a, kind);
        return p[a];
    }
    if (p[ps->i] == '\\') {
        if (ps->i + 1 >= ps->n) return fail(ps, "trailing backslash");
        unsigned c = p[ps->i + 1];
        ps->i += 2;
        if (escape_class(c, s)) return -2;
        return escape_char(ps, c);
    }
    return p[ps->i++];
}

static int parse_bracket(parser *ps)
{
    set256 s = {{0}};
    int neg = 0, first = 1;
    ps->i++;   // '['
    if (ps->i < ps->n && ps->p[ps->i] == '^') { neg = 1; ps->i++; }
    for (;;) {
        if (ps->i >= ps->n) return fail(ps, "unmatched [");
        if (ps->p[ps->i] == ']' && !first) { ps->i++; break; }
        first = 0;
        int lo = bracket_elem(ps, &s);
        if (lo == -1) return -1;
        if (lo >= 0 && ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            ps->i++;
            int hi = bracket_elem(ps, &s);
            if (hi == -1) return -1;
            if (hi < 0 || hi < lo) return fail(ps, "invalid range in a bracket expression");
            set_range(&s, (unsigned)lo, (unsigned)hi);
        } else if (lo >= 0) {
            set_add(&s, (unsigned)lo);
        }
    }
    if (neg) set_invert(&s);
    return set_node(ps, &s);
}

static int parse_alt(parser *ps);

static int parse_escape(parser *ps)
{
    if (ps->i + 1 >= ps->n) return fail(ps, "trailing backslash");
    unsigned c = ps->p[ps->i + 1];
    ps->i += 2;
    set256 s = {{0}};
    if (escape_class(c, &s)) return set_node(ps, &s);
    if (c == 'b' || c == 'B') {
        int d = new_node(ps, N_ASSERT);
        ps->nd[d].arg = c == 'b' ? A_WORDB : A_NWORDB;
        return d;
    }
    int ch = escape_char(ps, c);
    if (ch < 0) return -1;
    set_add(&s, (unsigned)ch);
    return set_node(ps, &s);
}

static int parse_atom(parser *ps)
{
    unsigned c = ps->p[ps->i];
    set256 s = {{0}};
    switch (c) {
    case '(': {
        if (++ps->depth > MAX_DEPTH) return fail(ps, "pattern nests too deeply");
        int idx = ++ps->groups;
        ps->i++;
        int kid = parse_alt(ps);
        if (kid < 0) return -1;
        if (ps->i >= ps->n || ps->p[ps->i] != ')') return fail(ps, "unmatched (");
        ps->i++;
        ps->depth--;
        int d = new_node(ps, N_GROUP);
        ps->nd[d].kid = kid;
        ps->nd[d].val = idx;
        return d;
    }
    case '[': return parse_bracket(ps);
    case '\\': return parse_escape(ps);
    case '^': case '$': {
        ps->i++;
        int d = new_node(ps, N_ASSERT);
        ps->nd[d].arg = c == '^' ? A_BOL : A_EOL;
        return d;
    }
    case '.':
        ps->i++;
        set_invert(&s);
        return set_node(ps, &s);
    case '*': case '+': case '?':
        return fail(ps, "nothing to repeat before %c", (char)c);
    default:
        ps->i++;
        set_add(&s, c);
        return set_node(ps, &s);
    }
}

static int read_count(parser *ps, int *v)
{
    const unsigned char *p = ps->p;
    if (ps->i >= ps->n || p[ps->i] < '0' || p[ps->i] > '9') return 0;
    long x = 0;
    while (ps->i < ps->n && p[ps->i] >= '0' && p[ps->i] <= '9') {
        x = x * 10 + (p[ps->i++] - '0');
        if (x > MAX_COUNT) x = MAX_COUNT + 1;
    }
    *v = (int)x;
    return 1;
}

// {m} {m,} {m,n} after an atom: 1 and *min/*max (-1: no limit); 0 when the
// brace is not an interval (a literal brace then); -1 on a bad interval.
static int parse_interval(parser *ps, int *min, int *max)
{
    size_t at = ps->i;
    ps->i++;
    if (!read_count(ps, min)) { ps->i = at; return 0; }
    *max = *min;
    if (ps->i < ps->n && ps->p[ps->i] == ',') {
        ps->i++;
        if (!read_count(ps, max)) *max = -1;
    }
    if (ps->i >= ps->n || ps->p[ps->i] != '}') return fail(ps, "invalid interval at offset %zu", at);
    ps->i++;
    if (*min > MAX_COUNT || *max > MAX_COUNT) return fail(ps, "repetition count over %d", MAX_COUNT);
    if (*max >= 0 && *max < *min) return fail(ps, "invalid interval {%d,%d}", *min, *max);
    return 1;
}

// An atom and its quantifiers.
static int parse_rep(parser *ps)
{
    int d = parse_atom(ps);
    int stacked = 0;
    while (d >= 0 && ps->i < ps->n) {
        unsigned c = ps->p[ps->i];
        int min, max;
        if (c == '*') { min = 0; max = -1; ps->i++; }
        else if (c == '+') { min = 1; max = -1; ps->i++; }
        else if (c == '?') { min = 0; max = 1; ps->i++; }
        else if (c == '{') {
            int r = parse_interval(ps, &min, &max);
            if (r < 0) return -1;
            if (r == 0) break;
        } else break;
        if (ps->nd[d].type == N_ASSERT) return fail(ps, "nothing to repeat before %c", (char)c);
        if (++stacked > MAX_STACKED) return fail(ps, "too many quantifiers in a row before %c", (char)c);
        int r = new_node(ps, N_REP);
        ps->nd[r].kid = d;
        ps->nd[r].min = min;
        ps->nd[r].max = max;
        d = r;
    }
    return d;
}

// A concatenation (possibly empty) up to | or ) or the end.
static int parse_cat(parser *ps)
{
    int cat = new_node(ps, N_CAT), last = -1;
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        int d = parse_rep(ps);
        if (d < 0) return -1;
        if (last < 0) ps->nd[cat].kid = d; else ps->nd[last].next = d;
        last = d;
    }
    return cat;
}

static int parse_alt(parser *ps)
{
    int first = parse_cat(ps);
    if (first < 0 || ps->i >= ps->n || ps->p[ps->i] != '|') return first;
    int alt = new_node(ps, N_ALT), last = first;
    ps->nd[alt].kid = first;
    while (ps->i < ps->n && ps->p[ps->i] == '|') {
        ps->i++;
        int d = parse_cat(ps);
        if (d < 0) return -1;
        ps->nd[last].next = d;
        last = d;
    }
    return alt;
}

// ---------------------------------------------------------------- compiling

#define TOO_BIG ((size_t)AS_RX_MAX_PROGRAM + 1)

static size_t cap_add(size_t a, size_t b) { return a + b > TOO_BIG ? TOO_BIG : a + b; }
static size_t cap_mul(size_t a, size_t k) { return k && a > TOO_BIG / k ? TOO_BIG : cap_add(0, a * k); }

// The number of instructions node d compiles to (TOO_BIG when over the limit).
static size_t size_of(const parser *ps, int d)
{
    const node *x = &ps->nd[d];
    size_t s = 0, k = 0;
    switch (x->type) {
    case N_SET: case N_ASSERT: return 1;
    case N_EMPTY: return 0;
    case N_CAT:
        for (int c = x->kid; c >= 0; c = ps->nd[c].next) s = cap_add(s, size_of(ps, c));
        return s;
    case N_ALT:
        for (int c = x->kid; c >= 0; c = ps->nd[c].next, k++) s = cap_add(s, size_of(ps, c));
        return cap_add(s, 2 * (k - 1));
    case N_GROUP:
        return cap_add(size_of(ps, x->kid), x->val == 1 ? 2 : 0);
    default: {   // N_REP
        size_t l = size_of(ps, x->kid);
        if (x->max < 0) return x->min == 0 ? cap_add(l, 2) : cap_add(cap_mul(l, (size_t)x->min), 1);
        return cap_add(cap_mul(l, (size_t)x->min), cap_mul(l + 1, (size_t)(x->max - x->min)));
    }
    }
}

typedef struct { inst *ins; size_t n; } prog;

static void put(prog *g, int op, int arg, size_t x, size_t y)
{
    g->ins[g->n++] = (inst){(uint8_t)op, (uint8_t)arg, (uint32_t)x, (uint32_t)y};
}

static void emit(const parser *ps, int d, prog *g);

static void emit_rep(const parser *ps, const node *x, prog *g)
{
    size_t l = size_of(ps, x->kid);
    if (x->max < 0 && x->min == 0) {   // L: SPLIT body, out; body; JMP L
        size_t at = g->n;
        put(g, I_SPLIT, 0, at + 1, at + l + 2);
        emit(ps, x->kid, g);
        put(g, I_JMP, 0, at, 0);
        return;
    }
    int copies = x->max < 0 ? x->min - 1 : x->min;
    for (int k = 0; k < copies; k++) emit(ps, x->kid, g);
    if (x->max < 0) {   // the last copy loops: L: body; SPLIT L, out
        size_t at = g->n;
        emit(ps, x->kid, g);
        put(g, I_SPLIT, 0, at, g->n + 1);
        return;
    }
    size_t end = g->n + (size_t)(x->max - x->min) * (l + 1);
    for (int k = x->min; k < x->max; k++) {   // nested optional copies, all leaving to end
        put(g, I_SPLIT, 0, g->n + 1, end);
        emit(ps, x->kid, g);
    }
}

static void emit(const parser *ps, int d, prog *g)
{
    const node *x = &ps->nd[d];
    switch (x->type) {
    case N_SET: put(g, I_CHAR, 0, (size_t)x->val, 0); break;
    case N_ASSERT: put(g, I_ASSERT, x->arg, 0, 0); break;
    case N_EMPTY: break;
    case N_CAT:
        for (int c = x->kid; c >= 0; c = ps->nd[c].next) emit(ps, c, g);
        break;
    case N_ALT: {
        size_t end = g->n + size_of(ps, d);
        for (int c = x->kid; c >= 0; c = ps->nd[c].next) {
            if (ps->nd[c].next < 0) { emit(ps, c, g); break; }
            size_t at = g->n;
            put(g, I_SPLIT, 0, at + 1, at + size_of(ps, c) + 2);
            emit(ps, c, g);
            put(g, I_JMP, 0, end, 0);
        }
        break;
    }
    case N_GROUP:
        if (x->val == 1) put(g, I_SAVE, 0, 0, 0);
        emit(ps, x->kid, g);
        if (x->val == 1) put(g, I_SAVE, 1, 0, 0);
        break;
    default: emit_rep(ps, x, g); break;
    }
}

// Byte classes: runs of bytes that no set (nor, with word assertions, the
// word test) tells apart: a new class starts wherever a set's membership
// changes from one byte to the next.
static void byte_classes(as_rx *rx)
{
    set256 starts = {{0}}, word = {{0}};
    for (unsigned c = 0; c < 256; c++) if (is_word(c)) set_add(&word, c);
    for (size_t k = 0; k <= rx->nsets; k++) {
        const set256 *s = k < rx->nsets ? &rx->sets[k] : &word;
        if (k == rx->nsets && !rx->wordctx) break;
        for (int w = 0; w < 4; w++) {   // bit c: membership of c differs from c - 1
            uint64_t prev = (s->w[w] << 1) | (w ? s->w[w - 1] >> 63 : s->w[0] & 1);
            starts.w[w] |= s->w[w] ^ prev;
        }
    }
    int n = 0;
    for (unsigned c = 0; c < 256; c++) {
        if (c && set_has(&starts, c)) n++;
        rx->cls[c] = (uint8_t)n;
    }
    rx->nclasses = n + 1;
}

// The ε-predecessors of every instruction, as compressed rows.
static void build_rev(as_rx *rx)
{
    size_t n = rx->n;
    rx->rev_off = calloc(n + 2, sizeof *rx->rev_off);
    if (!rx->rev_off) as_die(AS_TROUBLE, "out of memory");
    uint32_t *fill = calloc(n + 1, sizeof *fill);
    if (!fill) as_die(AS_TROUBLE, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        for (size_t q = 0; q < n; q++) {
            const inst *in = &rx->ins[q];
            uint32_t to[2];
            int k = 0;
            if (in->op == I_JMP) to[k++] = in->x;
            else if (in->op == I_SPLIT) { to[k++] = in->x; to[k++] = in->y; }
            else if (in->op == I_SAVE || in->op == I_ASSERT) to[k++] = (uint32_t)q + 1;
            for (int e = 0; e < k; e++) {
                if (pass == 0) rx->rev_off[to[e] + 1]++;
                else rx->rev[rx->rev_off[to[e]] + fill[to[e]]++] = (uint32_t)q;
            }
        }
        if (pass == 0) {
            for (size_t t = 0; t < n; t++) rx->rev_off[t + 1] += rx->rev_off[t];
            rx->rev = as_xmalloc((rx->rev_off[n] + 1) * sizeof *rx->rev);
        }
    }
    free(fill);
}

int as_rx_compile(const char *p, size_t n, as_rx **out, char *err, size_t errn)
{
    parser ps = {.p = (const unsigned char *)p, .n = n, .err = err, .errn = errn};
    *out = NULL;
    int root = parse_alt(&ps);
    if (root >= 0 && ps.i < ps.n) fail(&ps, "unmatched )");
    size_t size = ps.failed ? 0 : size_of(&ps, root);
    if (!ps.failed && size + 1 > AS_RX_MAX_PROGRAM)
        fail(&ps, "pattern is too large (over %d instructions)", AS_RX_MAX_PROGRAM);
    if (ps.failed) {
        free(ps.nd);
        free(ps.sets);
        return -1;
    }
    as_rx *rx = as_xmalloc(sizeof *rx);
    prog g = {as_xmalloc((size + 1) * sizeof *g.ins), 0};
    emit(&ps, root, &g);
    put(&g, I_MATCH, 0, 0, 0);
    rx->ins = g.ins;
    rx->n = g.n;
    rx->sets = ps.sets;
    rx->nsets = ps.nsets;
    rx->groups = ps.groups;
    rx->wordctx = 0;
    for (size_t k = 0; k < rx->n; k++)
        if (rx->ins[k].op == I_ASSERT && (rx->ins[k].arg == A_WORDB || rx->ins[k].arg == A_NWORDB)) rx->wordctx = 1;
    byte_classes(rx);
    build_rev(rx);
    free(ps.nd);
    *out = rx;
    return 0;
}

void as_rx_free(as_rx *rx)
{
    if (!rx) return;
    free(rx->ins);
    free(rx->sets);
    free(rx->rev_off);
    free(rx->rev);
    free(rx);
}


// ---------------------------------------------------------------- live sets

#ifndef BLOCK
#define BLOCK 1024              // positions between two kept live sets
#endif
#ifndef CACHE_BYTES
#define CACHE_BYTES (4u << 20)  // of the transition cache
#endif
#define CHECK_EVERY 4096
#define NONE32 ((uint32_t)-1)

// A cache of backward transitions: distinct live sets get ids, and
// (id of live[i + 1], context of i) → id of live[i]. Flushed when full.
typedef struct {
    uint64_t *bits;         // cap sets
    uint32_t *trans;        // cap × nctx: id + 1, 0 unknown
    uint32_t *slot;         // hcap: id + 1, 0 empty
    size_t n, cap, hcap, nctx;
} dcache;

typedef struct {
    const as_rx *rx;
    const unsigned char *t; size_t n;
    size_t words;                   // per set
    uint64_t *ckpt;                 // live[b * BLOCK] for every block b from first
    size_t first;                   // first block kept
    uint64_t *blk; size_t cur;      // block cur materialized, SIZE_MAX none
    uint64_t *tmp;                  // scratch set
    uint32_t *work;
    dcache dc;
    const as_rx_limits *lim;
    long steps;
    int status;                     // 0, AS_RX_TIMEOUT, AS_RX_STOPPED
} scan;

static int bit(const uint64_t *s, size_t k) { return (int)((s[k >> 6] >> (k & 63)) & 1); }
static void setbit(uint64_t *s, size_t k) { s[k >> 6] |= (uint64_t)1 << (k & 63); }

// Polled every CHECK_EVERY steps: 0, or the reason to stop.
static int tick(scan *sc, long steps)
{
    sc->steps += steps;
    if (sc->steps < CHECK_EVERY || sc->status) return sc->status;
    sc->steps = 0;
    if (sc->lim && sc->lim->stop && *sc->lim->stop) sc->status = AS_RX_STOPPED;
    else if (sc->lim && sc->lim->deadline_ms && as_now_ms() >= sc->lim->deadline_ms) sc->status = AS_RX_TIMEOUT;
    return sc->status;
}

static int assert_holds(const scan *sc, int kind, size_t i)
{
    switch (kind) {
    case A_BOL: return i == 0;
    case A_EOL: return i == sc->n;
    default: {
        int before = i > 0 && is_word(sc->t[i - 1]), after = i < sc->n && is_word(sc->t[i]);
        return (before != after) == (kind == A_WORDB);
    }
    }
}

// live[i] into out from live[i + 1] (next; NULL at the end of the text).
static void live_step(scan *sc, size_t i, const uint64_t *next, uint64_t *out)
{
    const as_rx *rx = sc->rx;
    size_t nw = 0;
    memset(out, 0, sc->words * sizeof *out);
    setbit(out, rx->n - 1);
    sc->work[nw++] = (uint32_t)(rx->n - 1);
    if (next) {
        unsigned c = sc->t[i];
        for (size_t w = 0; w < sc->words; w++)
            for (uint64_t bits = next[w]; bits; bits &= bits - 1) {
                size_t to = w * 64 + (size_t)__builtin_ctzll(bits);
                if (to == 0) continue;
                const inst *in = &rx->ins[to - 1];
                if (in->op == I_CHAR && set_has(&rx->sets[in->x], c) && !bit(out, to - 1)) {
                    setbit(out, to - 1);
                    sc->work[nw++] = (uint32_t)(to - 1);
                }
            }
    }
    long steps = (long)sc->words;
    while (nw) {
        uint32_t to = sc->work[--nw];
        for (uint32_t e = rx->rev_off[to]; e < rx->rev_off[to + 1]; e++) {
            uint32_t q = rx->rev[e];
            steps++;
            if (bit(out, q)) continue;
            if (rx->ins[q].op == I_ASSERT && !assert_holds(sc, rx->ins[q].arg, i)) continue;
            setbit(out, q);
            sc->work[nw++] = q;
        }
    }
    tick(sc, steps);
}

static void dc_init(scan *sc)
{
    dcache *d = &sc->dc;
    d->nctx = (size_t)sc->rx->nclasses * (sc->rx->wordctx ? 2 : 1);
    d->cap = CACHE_BYTES / (sc->words * sizeof *d->bits + d->nctx * sizeof *d->trans);
    if (d->cap > sc->n + 2) d->cap = sc->n + 2;   // never more sets than positions
    if (d->cap < 4) d->cap = 4;
    if (d->cap > 65536) d->cap = 65536;
    for (d->hcap = 16; d->hcap < 2 * d->cap; d->hcap *= 2) {}
    d->bits = as_xmalloc(d->cap * sc->words * sizeof *d->bits);
    d->trans = calloc(d->cap * d->nctx, sizeof *d->trans);
    d->slot = calloc(d->hcap, sizeof *d->slot);
    if (!d->trans || !d->slot) as_die(AS_TROUBLE, "out of memory");
    d->n = 0;
}

static void dc_free(dcache *d)
{
    free(d->bits);
    free(d->trans);
    free(d->slot);
}

// The id of set s, added when new (the cache is flushed first when full).
static uint32_t dc_intern(scan *sc, const uint64_t *s)
{
    dcache *d = &sc->dc;
    size_t bytes = sc->words * sizeof *s;
    uint64_t h = 1469598103934665603ULL;
    for (size_t w = 0; w < sc->words; w++) h = (h ^ s[w]) * 1099511628211ULL;
    for (int again = 0; again < 2; again++) {
        for (size_t k = (size_t)(h ^ (h >> 29)) & (d->hcap - 1);; k = (k + 1) & (d->hcap - 1)) {
            uint32_t v = d->slot[k];
            if (v && !memcmp(d->bits + (size_t)(v - 1) * sc->words, s, bytes)) return v - 1;
            if (v) continue;
            if (d->n == d->cap) break;
            memcpy(d->bits + d->n * sc->words, s, bytes);
            d->slot[k] = (uint32_t)++d->n;
            return (uint32_t)(d->n - 1);
        }
        memset(d->trans, 0, d->cap * d->nctx * sizeof *d->trans);   // full: start over
        memset(d->slot, 0, d->hcap * sizeof *d->slot);
        d->n = 0;
    }
    as_die(AS_TROUBLE, "internal error: regex cache");
}

// live[i] from live[i + 1] (next, NULL at the end; *id its cache id or
// NONE32), through the cache inside the text. The result stays valid
// until the next call; *id becomes its id.
static const uint64_t *back_step(scan *sc, size_t i, const uint64_t *next, uint32_t *id)
{
    dcache *d = &sc->dc;
    uint32_t *tr = NULL;
    if (*id != NONE32 && next && i > 0) {
        size_t ctx = (size_t)sc->rx->cls[sc->t[i]] * (sc->rx->wordctx ? 2 : 1) +
                     (size_t)(sc->rx->wordctx && is_word(sc->t[i - 1]));
        tr = &d->trans[(size_t)*id * d->nctx + ctx];
        if (*tr) {
            *id = *tr - 1;
            tick(sc, 1);
            return d->bits + (size_t)*id * sc->words;
        }
    }
    live_step(sc, i, next, sc->tmp);
    size_t before = d->n;
    uint32_t nid = dc_intern(sc, sc->tmp);
    if (tr && d->n >= before) *tr = nid + 1;   // (not after a flush: *id is gone then)
    *id = nid;
    return d->bits + (size_t)nid * sc->words;
}

// Backwards from the end to block `first`: the checkpoints.
static void scan_init(scan *sc, const as_rx *rx, const char *t, size_t n, size_t from, const as_rx_limits *lim)
{
    memset(sc, 0, sizeof *sc);
    sc->rx = rx;
    sc->t = (const unsigned char *)t;
    sc->n = n;
    sc->lim = lim;
    sc->words = (rx->n + 63) / 64;
    sc->first = from / BLOCK;
    size_t nblocks = n / BLOCK + 1 - sc->first;
    sc->ckpt = as_xmalloc(nblocks * sc->words * sizeof *sc->ckpt);
    sc->blk = as_xmalloc((size_t)BLOCK * sc->words * sizeof *sc->blk);
    sc->tmp = as_xmalloc(sc->words * sizeof *sc->tmp);
    sc->work = as_xmalloc((rx->n + 1) * sizeof *sc->work);
    sc->cur = (size_t)-1;
    dc_init(sc);
    const uint64_t *next = NULL;
    uint32_t id = NONE32;
    for (size_t i = n + 1; i-- > sc->first * BLOCK;) {
        next = back_step(sc, i, next, &id);
        if (sc->status) return;
        if (i % BLOCK == 0) memcpy(sc->ckpt + (i / BLOCK - sc->first) * sc->words, next, sc->words * sizeof *next);
    }
}

static void scan_free(scan *sc)
{
    free(sc->ckpt);
    free(sc->blk);
    free(sc->tmp);
    free(sc->work);
    dc_free(&sc->dc);
}

// live[i] (i in [first block, n]); NULL when the scan was cut short.
static const uint64_t *live(scan *sc, size_t i)
{
    size_t b = i / BLOCK;
    if (b != sc->cur) {
        size_t lo = b * BLOCK, hi = lo + BLOCK;   // positions [lo, hi) of the block
        const uint64_t *next = NULL;
        uint32_t id = NONE32;
        if (hi <= sc->n) next = sc->ckpt + (b + 1 - sc->first) * sc->words;
        else hi = sc->n + 1;
        for (size_t k = hi; k-- > lo;) {
            next = back_step(sc, k, next, &id);
            if (sc->status) break;
            memcpy(sc->blk + (k - lo) * sc->words, next, sc->words * sizeof *next);
        }
        sc->cur = b;
    }
    return sc->status ? NULL : sc->blk + (i - b * BLOCK) * sc->words;
}

// ---------------------------------------------------------------- the Pike VM

typedef struct { uint32_t pc; size_t c0, c1; } thread;
typedef struct { thread *th; size_t n; } tlist;

typedef struct {
    scan *sc;
    uint32_t *mark, gen;
    thread *stack;
    tlist cl, nl;
} vm;

static void next_gen(vm *m)
{
    if (++m->gen == 0) {   // wrapped: forget every old mark
        memset(m->mark, 0, m->sc->rx->n * sizeof *m->mark);
        m->gen = 1;
    }
}

// Adds the ε-closure of (pc, caps) at position i to l, in priority order,
// keeping only states that can still match (lv: live[i]).
static void add(vm *m, tlist *l, uint32_t pc, size_t c0, size_t c1, size_t i, const uint64_t *lv)
{
    const as_rx *rx = m->sc->rx;
    size_t sp = 0;
    long steps = 0;
    m->stack[sp++] = (thread){pc, c0, c1};
    while (sp) {
        thread t = m->stack[--sp];
        steps++;
        if (m->mark[t.pc] == m->gen) continue;
        m->mark[t.pc] = m->gen;
        if (!bit(lv, t.pc)) continue;
        const inst *in = &rx->ins[t.pc];
        switch (in->op) {
        case I_JMP: m->stack[sp++] = (thread){in->x, t.c0, t.c1}; break;
        case I_SPLIT:
            m->stack[sp++] = (thread){in->y, t.c0, t.c1};
            m->stack[sp++] = (thread){in->x, t.c0, t.c1};
            break;
        case I_SAVE:
            m->stack[sp++] = (thread){t.pc + 1, in->arg ? t.c0 : i, in->arg ? i : t.c1};
            break;
        case I_ASSERT:
            if (assert_holds(m->sc, in->arg, i)) m->stack[sp++] = (thread){t.pc + 1, t.c0, t.c1};
            break;
        default: l->th[l->n++] = t; break;   // CHAR, MATCH
        }
    }
    tick(m->sc, steps);
}

// The longest match starting at s (one exists: pc 0 is live at s).
static int run_from(vm *m, size_t s, size_t out[4])
{
    scan *sc = m->sc;
    const as_rx *rx = sc->rx;
    const uint64_t *lv = live(sc, s);
    if (!lv) return sc->status;
    next_gen(m);
    m->cl.n = 0;
    add(m, &m->cl, 0, AS_RX_NONE, AS_RX_NONE, s, lv);
    out[0] = s;
    out[1] = AS_RX_NONE;
    for (size_t i = s; m->cl.n; i++) {
        int matched = 0;
        const uint64_t *nv = NULL;
        if (i < sc->n && !(nv = live(sc, i + 1))) return sc->status;
        next_gen(m);
        m->nl.n = 0;
        for (size_t k = 0; k < m->cl.n; k++) {
            const thread *t = &m->cl.th[k];
            const inst *in = &rx->ins[t->pc];
            if (in->op == I_MATCH) {
                if (!matched) { out[1] = i; out[2] = t->c0; out[3] = t->c1; matched = 1; }
            } else if (nv && set_has(&rx->sets[in->x], sc->t[i])) {
                add(m, &m->nl, t->pc + 1, t->c0, t->c1, i + 1, nv);
            }
        }
        tlist x = m->cl; m->cl = m->nl; m->nl = x;
        if (sc->status) return sc->status;
    }
    if (out[2] == AS_RX_NONE || out[3] == AS_RX_NONE) out[2] = out[3] = AS_RX_NONE;
    return AS_RX_MATCH;
}

static int search_from(vm *m, size_t from, size_t out[4])
{
    scan *sc = m->sc;
    for (size_t i = from; i <= sc->n; i++) {
        const uint64_t *lv = live(sc, i);
        if (!lv) return sc->status;
        if (bit(lv, 0)) return run_from(m, i, out);
        if (tick(sc, 1)) return sc->status;
    }
    return AS_RX_NOMATCH;
}

static void vm_init(vm *m, scan *sc)
{
    size_t n = sc->rx->n;
    memset(m, 0, sizeof *m);
    m->sc = sc;
    m->mark = calloc(n, sizeof *m->mark);
    if (!m->mark) as_die(AS_TROUBLE, "out of memory");
    m->stack = as_xmalloc((2 * n + 2) * sizeof *m->stack);
    m->cl.th = as_xmalloc(n * sizeof *m->cl.th);
    m->nl.th = as_xmalloc(n * sizeof *m->nl.th);
}

static void vm_free(vm *m)
{
    free(m->mark);
    free(m->stack);
    free(m->cl.th);
    free(m->nl.th);
}

int as_rx_search(const as_rx *rx, const char *t, size_t n, size_t from,
                 const as_rx_limits *lim, size_t m[4])
{
    if (from > n) return AS_RX_NOMATCH;
    scan sc;
    vm v;
    scan_init(&sc, rx, t, n, from, lim);
    vm_init(&v, &sc);
    int rc = sc.status ? sc.status : search_from(&v, from, m);
    vm_free(&v);
    scan_free(&sc);
    return rc;
}

int as_rx_last(const as_rx *rx, const char *t, size_t n, const as_rx_limits *lim, size_t m[4])
{
    scan sc;
    vm v;
    scan_init(&sc, rx, t, n, 0, lim);
    vm_init(&v, &sc);
    int rc = sc.status, found = 0;
    size_t cur[4];
    for (size_t from = 0; !rc && from <= n;) {
        rc = search_from(&v, from, cur);
        if (rc != AS_RX_MATCH) break;
        rc = 0;
        found = 1;
        memcpy(m, cur, sizeof cur);
        from = cur[1] > cur[0] ? cur[1] : cur[1] + 1;
    }
    vm_free(&v);
    scan_free(&sc);
    if (rc < 0) return rc;
    return found ? AS_RX_MATCH : AS_RX_NOMATCH;
}
