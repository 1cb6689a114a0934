// norm.c - the normalizer core: a run's volatile values scrubbed out of ACP
// transcripts and session logs, on byte spans (see norm.h).
//
// The string rules follow dsh's acp-snapshot normalizer (the corpus is the
// ground truth): each rule below is a hand-written scanner for one of its
// regular expressions, with JavaScript's semantics (leftmost match, global
// replacement, \s including the Unicode spaces).
#include "acpsnap.h"
#include "norm.h"
#include "sidecar.h"   // as_js_number
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#include "simd.h"
#define AS_NORM_AVX2 1     // line_prep_avx2, at ACPSNAP_SIMD avx2 and above
#endif

typedef struct { char *p; size_t n; } str;

struct as_norm {
    str cwd;
    str *alias; size_t nalias;
    str *id; size_t nid;
    str *sp; size_t nsp;       // cwd spellings, longest first
    int native;
    unsigned char trig[256];   // T_* bits: bytes that may start a volatile value
    unsigned char tb[8];       // the same bytes as a list (for the SIMD scan)
    int ntb;                   // 0: too many, use the table
    // line_prep_avx2's second looks, which pass over trigger bytes line_hit
    // would pass over: a '-' needs a '-' five bytes on (a UUID's first two
    // dashes), a '/' one of the bytes of slash_next after it. 0: no such look.
    int dash5;
    unsigned char slash_next[4];
    int nslash_next;
    int plain_ids;             // some id is not UUID-shaped (searched with memmem)
    int sp_sep;                // every cwd spelling holds a separator (cannot hide in a UUID)
    // stdout id renumbering: open addressing over the id token bytes
    struct idslot { char *k; size_t n; long v; } *tab;
    size_t tcap, tn;
    as_buf s1, s2, dec, val, cb, sv;   // scratch
    as_buf idk, ids;               // scratch: an id's key, its decoded string
    as_json cj;                    // a compact re-parse
    str *esp;                      // the spellings as JSON.stringify writes them (no quotes)
    size_t nesp;
    uint32_t *cand;                // candidate offsets of the record being edited
    size_t ncand, ccap;
    int full;                      // the record needs every string examined
};

static const char CWD_TOK[] = "{{cwd}}";
static const char SID_TOK[] = "{{sessionId}}";

static void str_set(str *s, const char *p, size_t n)
{
    free(s->p);
    s->p = as_xmalloc(n + 1);
    memcpy(s->p, p, n);
    s->p[n] = 0;
    s->n = n;
}

static void str_push(str **arr, size_t *n, const char *p, size_t len)
{
    *arr = as_xrealloc(*arr, (*n + 1) * sizeof **arr);
    (*arr)[*n].p = NULL;
    str_set(&(*arr)[*n], p, len);
    (*n)++;
}

static void str_clear(str **arr, size_t *n)
{
    for (size_t i = 0; i < *n; i++) free((*arr)[i].p);
    free(*arr);
    *arr = NULL;
    *n = 0;
}

static void rebuild_trig(as_norm *n);

as_norm *as_norm_new(void)
{
    as_norm *n = as_xmalloc(sizeof *n);
    memset(n, 0, sizeof *n);
    rebuild_trig(n);
    return n;
}

void as_norm_reset_ids(as_norm *n)
{
    for (size_t i = 0; i < n->tcap; i++) free(n->tab[i].k);
    free(n->tab);
    n->tab = NULL;
    n->tcap = n->tn = 0;
}

void as_norm_clear(as_norm *n)
{
    free(n->cwd.p);
    n->cwd.p = NULL;
    n->cwd.n = 0;
    str_clear(&n->alias, &n->nalias);
    str_clear(&n->id, &n->nid);
    str_clear(&n->sp, &n->nsp);
    rebuild_trig(n);
}

void as_norm_free(as_norm *n)
{
    if (!n) return;
    as_norm_clear(n);
    for (size_t i = 0; i < n->nesp; i++) free(n->esp[i].p);
    free(n->esp);
    as_norm_reset_ids(n);
    as_buf_free(&n->s1);
    as_buf_free(&n->s2);
    as_buf_free(&n->dec);
    as_buf_free(&n->val);
    as_buf_free(&n->sv);
    as_buf_free(&n->cb);
    as_buf_free(&n->idk);
    as_buf_free(&n->ids);
    as_json_free(&n->cj);
    free(n->cand);
    free(n);
}

static int sp_has(const as_norm *n, const char *p, size_t len)
{
    for (size_t i = 0; i < n->nsp; i++)
        if (n->sp[i].n == len && !memcmp(n->sp[i].p, p, len)) return 1;
    return 0;
}

// dsh's cwdSpellings: unique [cwd, ...aliases], then "/private" + each that
// starts with '/' but not "/private/", unique, stable-sorted longest first.
static void rebuild_spellings(as_norm *n)
{
    str_clear(&n->sp, &n->nsp);
    size_t nbase = 0;
    str *base = NULL;
    if (n->cwd.n) str_push(&base, &nbase, n->cwd.p, n->cwd.n);
    for (size_t i = 0; i < n->nalias; i++) str_push(&base, &nbase, n->alias[i].p, n->alias[i].n);
    for (size_t i = 0; i < nbase; i++)
        if (!sp_has(n, base[i].p, base[i].n)) str_push(&n->sp, &n->nsp, base[i].p, base[i].n);
    size_t nu = n->nsp;
    for (size_t i = 0; i < nu; i++) {
        const str *s = &n->sp[i];
        if (s->n == 0 || s->p[0] != '/' || (s->n >= 9 && !memcmp(s->p, "/private/", 9))) continue;
        as_buf b = {0};
        as_buf_puts(&b, "/private");
        as_buf_put(&b, s->p, s->n);
        if (!sp_has(n, b.p, b.n)) str_push(&n->sp, &n->nsp, b.p, b.n);
        as_buf_free(&b);
    }
    str_clear(&base, &nbase);
    // stable insertion sort, longest first
    for (size_t i = 1; i < n->nsp; i++) {
        str t = n->sp[i];
        size_t k = i;
        while (k > 0 && n->sp[k - 1].n < t.n) { n->sp[k] = n->sp[k - 1]; k--; }
        n->sp[k] = t;
    }
}

enum { T_SP = 1, T_ID = 2, T_BRACE = 4, T_SEP = 8, T_DASH = 16 };

static int uuid_at(const char *u);

static void rebuild_trig(as_norm *n)
{
    memset(n->trig, 0, sizeof n->trig);
    n->trig['{'] |= T_BRACE;
    n->trig['/'] |= T_SEP;
    n->trig['\\'] |= T_SEP;
    n->trig['-'] |= T_DASH;
    for (size_t i = 0; i < n->nsp; i++) n->trig[(unsigned char)n->sp[i].p[0]] |= T_SP;
    // UUID-shaped ids are found through the UUID rule's '-' trigger
    n->sp_sep = 1;
    for (size_t i = 0; i < n->nsp; i++)
        if (!memchr(n->sp[i].p, '/', n->sp[i].n) && !memchr(n->sp[i].p, '\\', n->sp[i].n)) n->sp_sep = 0;
    n->plain_ids = 0;
    for (size_t i = 0; i < n->nid; i++)
        if (n->id[i].n != 36 || !uuid_at(n->id[i].p)) n->plain_ids = 1;
    for (size_t i = 0; n->esp && i < n->nesp; i++) free(n->esp[i].p);
    free(n->esp);
    n->esp = n->nsp ? as_xmalloc(n->nsp * sizeof *n->esp) : NULL;
    n->nesp = n->nsp;
    for (size_t i = 0; i < n->nsp; i++) {
        as_buf b = {0};
        as_jstr_write(&b, n->sp[i].p, n->sp[i].n);
        n->esp[i].p = as_xmalloc(b.n - 1);
        memcpy(n->esp[i].p, b.p + 1, b.n - 2);
        n->esp[i].n = b.n - 2;
        as_buf_free(&b);
    }
    // '-' stops line_hit only at a UUID's first dash, unless a spelling
    // starts with it; '/' only where a spelling or a snapshot root starts
    // (each at least two bytes, the snapshot root's second 't').
    n->dash5 = !(n->trig['-'] & T_SP);
    n->nslash_next = 0;
    n->slash_next[n->nslash_next++] = 't';
    for (size_t i = 0; i < n->nesp && n->nslash_next >= 0; i++) {
        if (n->esp[i].p[0] != '/') continue;
        if (n->esp[i].n < 2) { n->nslash_next = -1; break; }
        int k = 0;
        while (k < n->nslash_next && n->slash_next[k] != (unsigned char)n->esp[i].p[1]) k++;
        if (k < n->nslash_next) continue;
        if (n->nslash_next == (int)sizeof n->slash_next) { n->nslash_next = -1; break; }
        n->slash_next[n->nslash_next++] = (unsigned char)n->esp[i].p[1];
    }
    if (n->nslash_next < 0) n->nslash_next = 0;
    n->ntb = 0;
    for (int c = 0; c < 256; c++) {
        if (!n->trig[c] || n->trig[c] == T_BRACE) continue;   // {{cwd}} is searched per record
        if (n->ntb == (int)sizeof n->tb) { n->ntb = 0; break; }
        n->tb[n->ntb++] = (unsigned char)c;
    }
}

void as_norm_set_cwd(as_norm *n, const char *cwd, size_t len)
{
    if (!len) return;
    str_set(&n->cwd, cwd, len);
    rebuild_spellings(n);
    rebuild_trig(n);
}

void as_norm_add_alias(as_norm *n, const char *alias, size_t len)
{
    if (!len) return;
    str_push(&n->alias, &n->nalias, alias, len);
    rebuild_spellings(n);
    rebuild_trig(n);
}

void as_norm_add_session_id(as_norm *n, const char *id, size_t len)
{
    if (!len) return;   // an empty id would split every character (dsh); ignore it
    for (size_t i = 0; i < n->nid; i++)   // duplicates change nothing (dsh lists them)
        if (n->id[i].n == len && !memcmp(n->id[i].p, id, len)) return;
    str_push(&n->id, &n->nid, id, len);
    rebuild_trig(n);
}

void as_norm_set_native(as_norm *n, int native) { n->native = native; }

int as_norm_has_context(const as_norm *n) { return n->cwd.n > 0 || n->nid > 0 || n->nalias > 0; }

// ---------------------------------------------------------------- context loading

const char *as_norm_load_json(as_norm *n, const as_json *j, int obj)
{
    if (obj < 0 || j->t[obj].type != AS_JOBJ) return "context is not a JSON object";
    int nc = as_json_get(j, obj, "normalizeContext");
    if (nc >= 0) {
        if (j->t[nc].type != AS_JOBJ) return "normalizeContext is not an object";
        obj = nc;
    }
    int ids = as_json_get(j, obj, "sessionIds");
    int cwd = as_json_get(j, obj, "cwd");
    int al = as_json_get(j, obj, "cwdAliases");
    if (ids < 0 && cwd < 0 && al < 0) return "context has none of sessionIds, cwd, cwdAliases";
    if (cwd >= 0 && j->t[cwd].type != AS_JSTR) return "context cwd is not a string";
    if (ids >= 0 && j->t[ids].type != AS_JARR) return "context sessionIds is not an array";
    if (al >= 0 && j->t[al].type != AS_JARR) return "context cwdAliases is not an array";
    for (int pass = 0; pass < 2; pass++) {
        int arr = pass ? al : ids;
        if (arr < 0) continue;
        for (int e = as_json_first(j, arr); e >= 0; e = as_json_nextel(j, e))
            if (j->t[e].type != AS_JSTR)
                return pass ? "context cwdAliases holds a non-string" : "context sessionIds holds a non-string";
    }
    as_buf b = {0};
    if (cwd >= 0) { as_json_str(j, cwd, &b); as_norm_set_cwd(n, b.p ? b.p : "", b.n); }
    if (ids >= 0)
        for (int e = as_json_first(j, ids); e >= 0; e = as_json_nextel(j, e)) {
            as_buf_reset(&b);
            as_json_str(j, e, &b);
            as_norm_add_session_id(n, b.p ? b.p : "", b.n);
        }
    if (al >= 0)
        for (int e = as_json_first(j, al); e >= 0; e = as_json_nextel(j, e)) {
            as_buf_reset(&b);
            as_json_str(j, e, &b);
            as_norm_add_alias(n, b.p ? b.p : "", b.n);
        }
    as_buf_free(&b);
    return NULL;
}

void as_norm_context_json(const as_norm *n, as_buf *out)
{
    as_buf_puts(out, "{\"cwd\":");
    if (n->cwd.p) as_jstr_write(out, n->cwd.p, n->cwd.n);
    else as_buf_puts(out, "null");
    as_buf_puts(out, ",\"cwdAliases\":[");
    for (size_t i = 0; i < n->nalias; i++) {
        if (i) as_buf_putc(out, ',');
        as_jstr_write(out, n->alias[i].p, n->alias[i].n);
    }
    as_buf_puts(out, "],\"sessionIds\":[");
    for (size_t i = 0; i < n->nid; i++) {
        if (i) as_buf_putc(out, ',');
        as_jstr_write(out, n->id[i].p, n->id[i].n);
    }
    as_buf_puts(out, "]}");
}

void as_norm_load_file(as_norm *n, const char *path)
{
    as_buf b = {0};
    as_json j = {0};
    as_read_file(path, &b);
    if (as_json_parse(&j, b.p ? b.p : "", b.n) < 0) {
        // report line and column of the error inside the file
        long line = 1, col = 1;
        for (size_t i = 0; i < j.errpos && i < b.n; i++) {
            if (b.p[i] == '\n') { line++; col = 1; } else col++;
        }
        as_die_at(path, line, col, "invalid JSON: %s", j.err);
    }
    const char *err = as_norm_load_json(n, &j, 0);
    if (err) as_die_at(path, 0, 0, "%s", err);
    as_json_free(&j);
    as_buf_free(&b);
}

void as_norm_from_header(as_norm *n, const as_json *hdr)
{
    as_norm_clear(n);
    if (hdr->t[0].type != AS_JOBJ) return;
    as_buf b = {0};
    int id = as_json_get(hdr, 0, "id");
    if (id >= 0 && hdr->t[id].type == AS_JSTR) {
        as_json_str(hdr, id, &b);
        as_norm_add_session_id(n, b.p ? b.p : "", b.n);
    }
    int cwd = as_json_get(hdr, 0, "cwd");
    if (cwd >= 0 && hdr->t[cwd].type == AS_JSTR) {
        as_buf_reset(&b);
        as_json_str(hdr, cwd, &b);
        as_norm_set_cwd(n, b.p ? b.p : "", b.n);
    }
    as_buf_free(&b);
}

// ---------------------------------------------------------------- character classes

// Length of the JavaScript \s character at s[i] (0 when none). Covers
// [\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff].
static size_t js_space_at(const char *s, size_t i, size_t n)
{
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c < 0xc2) return 0;
    const unsigned char *u = (const unsigned char *)s + i;
    if (c == 0xc2) return i + 1 < n && u[1] == 0xa0 ? 2 : 0;
    if (i + 2 >= n) return 0;
    if (c == 0xe1) return u[1] == 0x9a && u[2] == 0x80 ? 3 : 0;
    if (c == 0xe2) {
        if (u[1] == 0x80) return (u[2] <= 0x8a && u[2] >= 0x80) || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf ? 3 : 0;
        return u[1] == 0x81 && u[2] == 0x9f ? 3 : 0;
    }
    if (c == 0xe3) return u[1] == 0x80 && u[2] == 0x80 ? 3 : 0;
    if (c == 0xef) return u[1] == 0xbb && u[2] == 0xbf ? 3 : 0;
    return 0;
}

// 1 when the character ending right before s[i] is a JavaScript \s.
static int js_space_before(const char *s, size_t i)
{
    unsigned char c = (unsigned char)s[i - 1];
    if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
    size_t k = i - 1;
    int back = 0;
    while (k > 0 && back < 3 && ((unsigned char)s[k] & 0xc0) == 0x80) { k--; back++; }
    size_t len = js_space_at(s, k, i);
    return len && k + len == i;
}

// dsh PATH_TEXT_BOUNDARY_RE minus \s: the ASCII punctuation part.
static int boundary_punct(unsigned char c)
{
    switch (c) {
    case '<': case '>': case '\'': case '"': case '`': case '(': case ')': case '[': case ']':
    case '{': case '}': case ',': case ';': case ':': case '!': case '?': case '=':
        return 1;
    }
    return 0;
}

static int boundary_at(const char *s, size_t i, size_t n)
{
    return boundary_punct((unsigned char)s[i]) || js_space_at(s, i, n) > 0;
}

static int boundary_before(const char *s, size_t i)
{
    return boundary_punct((unsigned char)s[i - 1]) || js_space_before(s, i);
}

static int is_sep(char c) { return c == '/' || c == '\\'; }
static int is_lhex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
// bit 1: [0-9a-f], bit 2: [0-9A-Fa-f]
static const unsigned char hexclass[256] = {
    ['0'] = 3, ['1'] = 3, ['2'] = 3, ['3'] = 3, ['4'] = 3, ['5'] = 3, ['6'] = 3, ['7'] = 3, ['8'] = 3, ['9'] = 3,
    ['a'] = 3, ['b'] = 3, ['c'] = 3, ['d'] = 3, ['e'] = 3, ['f'] = 3,
    ['A'] = 2, ['B'] = 2, ['C'] = 2, ['D'] = 2, ['E'] = 2, ['F'] = 2,
};
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alnum(char c) { return is_alpha(c) || is_digit(c); }

static int has_lhex(const char *s, size_t n) { for (size_t i = 0; i < n; i++) if (!is_lhex(s[i])) return 0; return 1; }
static int has_hex(const char *s, size_t n)
{
    unsigned ok = 2;
    for (size_t i = 0; i < n; i++) ok &= hexclass[(unsigned char)s[i]];
    return ok != 0;
}

#ifdef __SSE2__
// The hex digits (any case) and the dashes among u[0, 16), as bit masks.
static inline void hex_dash16(const char *u, unsigned *hex, unsigned *dash)
{
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)u), l = _mm_or_si128(c, _mm_set1_epi8(0x20));
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(c, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(c, _mm_set1_epi8('9' + 1)));
    __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(l, _mm_set1_epi8('f' + 1)));
    *hex = (unsigned)_mm_movemask_epi8(_mm_or_si128(digit, alpha));
    *dash = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c, _mm_set1_epi8('-')));
}
#endif

// dsh UUID_RE at u (36 bytes available): 8-4-4-4-12 hex digits, any case.
static int uuid_at(const char *u)
{
#ifdef __SSE2__
    // sixteen bytes at a time: dashes at 8, 13 (first half), 18, 23 (second)
    const unsigned da = 1u << 8 | 1u << 13, db = 1u << 2 | 1u << 7;
    unsigned ha, xa, hb, xb;
    hex_dash16(u, &ha, &xa);
    hex_dash16(u + 16, &hb, &xb);
    return ha == (0xffffu & ~da) && xa == da && hb == (0xffffu & ~db) && xb == db && has_hex(u + 32, 4);
#else
    return has_hex(u, 8) && u[8] == '-' && has_hex(u + 9, 4) && u[13] == '-' && has_hex(u + 14, 4)
           && u[18] == '-' && has_hex(u + 19, 4) && u[23] == '-' && has_hex(u + 24, 12);
#endif
}

static int starts(const char *s, size_t i, size_t n, const char *lit, size_t ln)
{
    return i + ln <= n && !memcmp(s + i, lit, ln);
}
#define STARTS(s, i, n, lit) starts(s, i, n, lit, sizeof lit - 1)

// memmem for the short needles used here: glibc's generic memmem costs
// hundreds of instructions per call on short haystacks.
static const char *find(const char *s, size_t from, size_t n, const char *lit, size_t ln)
{
    if (ln == 0 || from >= n || n - from < ln) return NULL;
    const char *p = s + from, *last = s + n - ln;
#ifdef __SSE2__
    // Sixteen places at a time where the first two bytes match, then the
    // rest compared: a two-byte prefix is rare where one byte ('{') is not.
    if (ln >= 2) {
        const __m128i a = _mm_set1_epi8(lit[0]), b = _mm_set1_epi8(lit[1]);
        for (; p + 17 <= s + n; p += 16) {   // reads p[0, 17)
            __m128i x = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), a);
            __m128i y = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 1)), b);
            for (unsigned m = (unsigned)_mm_movemask_epi8(_mm_and_si128(x, y)); m; m &= m - 1) {
                const char *c = p + __builtin_ctz(m);
                if (c > last) return NULL;
                if (!memcmp(c + 2, lit + 2, ln - 2)) return c;
            }
        }
    }
#endif
    while (p <= last) {
        p = memchr(p, lit[0], (size_t)(last - p) + 1);
        if (!p) return NULL;
        if (!memcmp(p + 1, lit + 1, ln - 1)) return p;
        p++;
    }
    return NULL;
}
#define FIND(s, from, n, lit) find(s, from, n, lit, sizeof lit - 1)

// 1 and *at = the offset of the first lit in s[from, n), or 0 when there is none.
static int next_at(const char *s, size_t n, size_t from, const char *lit, size_t ln, size_t *at)
{
    const char *m = find(s, from, n, lit, ln);
    if (m) *at = (size_t)(m - s);
    return m != NULL;
}
#define NEXT_AT(s, n, from, lit, at) next_at(s, n, from, lit, sizeof lit - 1, at)

// ---------------------------------------------------------------- splicing

// A pass's output: s[0, n) with some spans replaced, written left to right
// into out. Nothing is written before the first replacement; cur is the
// first byte of s not yet written (the end of the last replaced span). Each
// pass_* below is one rule of dsh's scrubString over a splice (see STEP).
typedef struct { const char *s; size_t n; as_buf *out; size_t cur; int changed; } splice;

// Writes s[cur, from) and passes over s[from, to); the caller writes what
// stands for it next.
static void sp_cut(splice *sp, size_t from, size_t to)
{
    as_buf_put(sp->out, sp->s + sp->cur, from - sp->cur);
    sp->cur = to;
    sp->changed = 1;
}

// Replaces s[from, to) with rep.
static void sp_rep(splice *sp, size_t from, size_t to, const char *rep, size_t rn)
{
    sp_cut(sp, from, to);
    as_buf_put(sp->out, rep, rn);
}
#define SP_REP(sp, from, to, lit) sp_rep(sp, from, to, lit, sizeof lit - 1)

static void put_slashed(as_buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) as_buf_putc(out, s[i] == '\\' ? '/' : s[i]);
}

// Replaces s[from, to) with itself, backslashes turned into '/'.
static void sp_slash(splice *sp, size_t from, size_t to)
{
    sp_cut(sp, from, to);
    put_slashed(sp->out, sp->s + from, to - from);
}

// Writes what is left of s after cur.
static void sp_rest(splice *sp)
{
    as_buf_put(sp->out, sp->s + sp->cur, sp->n - sp->cur);
    sp->cur = sp->n;
}

// Ends a pass: the rest written when anything was replaced; 1 then, else 0.
static int sp_end(splice *sp)
{
    if (sp->changed) sp_rest(sp);
    return sp->changed;
}

// ---------------------------------------------------------------- cwd spellings

// dsh FILE_URI_PATH_PREFIX_RE: s[0..start) ends with file:// or file:///
// whose "file" starts the string or follows a character outside [a-z0-9+.-]/i.
static int file_uri_before(const char *s, size_t start)
{
    static const char *const forms[] = { "file:///", "file://" };
    for (int f = 0; f < 2; f++) {
        size_t k = strlen(forms[f]);
        if (start < k || strncasecmp(s + start - k, forms[f], 4) || memcmp(s + start - k + 4, forms[f] + 4, k - 4))
            continue;
        size_t p = start - k;
        if (p == 0) return 1;
        char c = s[p - 1];
        if (!(is_alnum(c) || c == '+' || c == '.' || c == '-')) return 1;
    }
    return 0;
}

static int cwd_match(const char *s, size_t n, size_t start, size_t len)
{
    size_t end = start + len;
    int before = start == 0 || boundary_before(s, start) || file_uri_before(s, start);
    if (!before) return 0;
    if (end == n) return 1;
    char c = s[end];
    if (is_sep(c) || boundary_at(s, end, n)) return 1;
    return c == '.' && (end + 1 == n || boundary_at(s, end + 1, n));
}

// One spelling → {{cwd}} at path boundaries; a non-boundary occurrence is skipped whole.
static void pass_spelling(splice *sp, const str *w)
{
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t start; next_at(s, n, from, w->p, w->n, &start);) {
        from = start + w->n;
        if (cwd_match(s, n, start, w->n)) SP_REP(sp, start, from, CWD_TOK);
    }
}

// Literal split/join: every occurrence of lit → rep.
static void pass_literal(splice *sp, const char *lit, size_t ln, const char *rep, size_t rn)
{
    for (size_t at; next_at(sp->s, sp->n, sp->cur, lit, ln, &at);) sp_rep(sp, at, at + ln, rep, rn);
}

// dsh CWD_ROOTED_PATH_RE: {{cwd}} then a separator and a run of characters up
// to whitespace or <>"'` — backslashes in that run become '/'.
static void pass_cwd_rooted(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t at; NEXT_AT(s, n, from, "{{cwd}}", &at);) {
        size_t e = at + 7;
        from = e;
        if (e >= n || !is_sep(s[e])) continue;
        size_t k = e + 1;
        while (k < n) {
            unsigned char c = (unsigned char)s[k];
            if (c == '<' || c == '>' || c == '"' || c == '\'' || c == '`' || js_space_at(s, k, n)) break;
            k++;
        }
        if (k == e + 1) continue;
        if (memchr(s + e, '\\', k - e)) sp_slash(sp, e, k);
        from = k;
    }
}

// dsh canonicalizeEmbeddedPaths: <path>…</path> bodies and the rest of an
// "Additional instructions from: " line get '/' separators.
static void pass_path_tags(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t at; NEXT_AT(s, n, from, "<path>", &at);) {
        size_t b = at + 6;
        const char *lt = memchr(s + b, '<', n - b);
        from = at + 1;
        if (!lt) break;
        size_t q = (size_t)(lt - s);
        if (!STARTS(s, q, n, "</path>")) continue;
        from = q + 7;
        if (memchr(s + b, '\\', q - b)) sp_slash(sp, b, q);
    }
}

static void pass_additional(splice *sp)
{
    static const char lit[] = "Additional instructions from: ";
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t at; NEXT_AT(s, n, from, lit, &at);) {
        size_t b = at + sizeof lit - 1, q = b;
        while (q < n && s[q] != '\r' && s[q] != '\n') q++;
        from = q > b ? q : at + 1;
        if (q > b && memchr(s + b, '\\', q - b)) sp_slash(sp, b, q);
    }
}

// ---------------------------------------------------------------- spill paths

static int spill_name_char(char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '~' || c == '-';
}

// The lazy name of a spill path starting at i: returns its end, or 0 when the
// lookahead (". Use read with offset/limit", \s, ')' or the end) never holds.
static size_t spill_name_end(const char *s, size_t i, size_t n)
{
    size_t q = i;
    while (q < n && spill_name_char(s[q])) {
        q++;
        if (q == n || s[q] == ')' || js_space_at(s, q, n) || STARTS(s, q, n, ". Use read with offset/limit"))
            return q;
    }
    return 0;
}

// "session-<12 hex><sep><12 hex>-" at i: returns the index after it, or 0.
static size_t spill_tail(const char *s, size_t i, size_t n)
{
    if (!STARTS(s, i, n, "session-")) return 0;
    i += 8;
    if (i + 26 > n || !has_lhex(s + i, 12) || !is_sep(s[i + 12]) || !has_lhex(s + i + 13, 12) || s[i + 25] != '-')
        return 0;
    return i + 26;
}

// Replaces s[from, to) with {{spillLocator:<the name s[ns, ne)>}}.
static void sp_locator(splice *sp, size_t from, size_t to, size_t ns, size_t ne)
{
    sp_cut(sp, from, to);
    as_buf_puts(sp->out, "{{spillLocator:");
    as_buf_put(sp->out, sp->s + ns, ne - ns);
    as_buf_puts(sp->out, "}}");
}

// dsh LOCAL_SPILL_PATH_RE: {{cwd}}/.spill/session-<12>/<12>-<name>.
static void pass_local_spill(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t p; NEXT_AT(s, n, from, "{{cwd}}", &p);) {
        size_t i = p + 7;
        from = p + 1;
        if (!(i + 8 <= n && is_sep(s[i]) && !memcmp(s + i + 1, ".spill", 6) && is_sep(s[i + 7]))) continue;
        size_t ns = spill_tail(s, i + 8, n);
        if (!ns) continue;
        size_t ne = spill_name_end(s, ns, n);
        if (!ne) continue;
        sp_locator(sp, p, ne, ns, ne);
        from = ne;
    }
}

// 1 when the separator s[i] starts <sep>tmp<sep>dsh-acp-snap or <sep>t<sep>dsh-acp-snap.
static int snap_root_at(const char *s, size_t i, size_t n)
{
    return (STARTS(s, i + 1, n, "tmp") && i + 4 < n && is_sep(s[i + 4]) && STARTS(s, i + 5, n, "dsh-acp-snap"))
           || (i + 2 < n && s[i + 1] == 't' && is_sep(s[i + 2]) && STARTS(s, i + 3, n, "dsh-acp-snap"));
}

// dsh SNAPSHOT_SPILL_PATH_RE: [X:]<sep>(tmp|t)<sep>(dsh-acp-snap-<9 hex>|
// dsh-acp-snapshot-spill)<sep>session-<12>/<12>-<name>.
static void pass_snapshot_spill(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n, from = 0;
    for (size_t a; NEXT_AT(s, n, from, "dsh-acp-snap", &a);) {
        size_t p;
        from = a + 1;
        if (a >= 5 && is_sep(s[a - 5]) && !memcmp(s + a - 4, "tmp", 3) && is_sep(s[a - 1])) p = a - 5;
        else if (a >= 3 && is_sep(s[a - 3]) && s[a - 2] == 't' && is_sep(s[a - 1])) p = a - 3;
        else continue;
        if (p < sp->cur) continue;
        size_t i;
        if (STARTS(s, a, n, "dsh-acp-snap-") && a + 22 <= n && has_lhex(s + a + 13, 9)) i = a + 22;
        else if (STARTS(s, a, n, "dsh-acp-snapshot-spill")) i = a + 22;
        else continue;
        if (i >= n || !is_sep(s[i])) continue;
        size_t ns = spill_tail(s, i + 1, n);
        if (!ns) continue;
        size_t ne = spill_name_end(s, ns, n);
        if (!ne) continue;
        if (p >= sp->cur + 2 && s[p - 1] == ':' && is_alpha(s[p - 2])) p -= 2;
        sp_locator(sp, p, ne, ns, ne);
        from = ne;
    }
}

// ---------------------------------------------------------------- event-read results

// \r?\n at i: the index after it, or 0.
static size_t eol(const char *s, size_t i, size_t n)
{
    if (i < n && s[i] == '\r') i++;
    return i < n && s[i] == '\n' ? i + 1 : 0;
}

// A JavaScript line terminator (for ^ and $ in multiline mode) at i: its length.
static size_t js_eol_at(const char *s, size_t i, size_t n)
{
    if (s[i] == '\n' || s[i] == '\r') return 1;
    if (i + 2 < n && (unsigned char)s[i] == 0xe2 && (unsigned char)s[i + 1] == 0x80
        && ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9)) return 3;
    return 0;
}

// dsh EVENT_READ_TARGET_REGION_RE: the end of the fenced target region of an
// exact event-read result, or 0 when the string is not one.
static size_t event_read_region(const char *s, size_t n)
{
    if (!STARTS(s, 0, n, "Session ")) return 0;
    size_t e = 8;
    while (e < n && s[e] != '\r' && s[e] != '\n') e++;
    // "Session X — Y": some " — " with one character or more on each side
    if (e < 8 + 1 + 5 + 1) return 0;
    static const char dash[] = " \xe2\x80\x94 ";
    if (!memmem(s + 9, e - 1 - 9, dash, 5)) return 0;
    size_t i = eol(s, e, n);
    if (!i || !STARTS(s, i, n, "Target event seq ")) return 0;
    i += 17;
    size_t d = i;
    while (i < n && is_digit(s[i])) i++;
    if (i == d || i >= n || s[i] != ':') return 0;
    if (!(i = eol(s, i + 1, n)) || !STARTS(s, i, n, "```json")) return 0;
    if (!(i = eol(s, i + 7, n)) || !STARTS(s, i, n, "{")) return 0;
    if (!(i = eol(s, i + 1, n))) return 0;
    for (size_t q = i; q < n; q++) {
        if (s[q] != '\r' && s[q] != '\n') continue;
        size_t t = eol(s, q, n);
        if (!t) continue;
        if (STARTS(s, t, n, "```")) {
            size_t u = t + 3;
            if (u == n || eol(s, u, n)) return q;
        }
        size_t t2 = eol(s, t, n);
        if (t2 && STARTS(s, t2, n, "(Omitted ")) return q;
    }
    return 0;
}

static void pass_event_read(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n;
    size_t r = event_read_region(s, n);
    if (!r) return;
    // ^(  "time": )\d+(?=,\r?$) per line of the region
    for (size_t ls = 0; ls < r;) {
        if (STARTS(s, ls, r, "  \"time\": ")) {
            size_t d = ls + 10, k = d;
            while (k < r && is_digit(s[k])) k++;
            if (k > d && k < r && s[k] == ',' && (k + 1 == r || js_eol_at(s, k + 1, r)))
                SP_REP(sp, d, k, "{{eventTime}}");
        }
        size_t k = ls;
        while (k < r && !js_eol_at(s, k, r)) k++;
        if (k >= r) break;
        ls = k + js_eol_at(s, k, r);
    }
    // (\r?\n\r?\n\(Omitted )\d+( bytes\.) over the whole string
    size_t from = 0;
    for (size_t p; NEXT_AT(s, n, from, "(Omitted ", &p);) {
        from = p + 1;
        if (!(p >= 2 && s[p - 1] == '\n' && (s[p - 2] == '\n' || (p >= 3 && s[p - 2] == '\r' && s[p - 3] == '\n'))))
            continue;
        size_t d = p + 9, k = d;
        while (k < n && is_digit(s[k])) k++;
        if (k == d || !STARTS(s, k, n, " bytes.") || d < sp->cur) continue;
        SP_REP(sp, d, k, "{{eventOmittedBytes}}");
        from = k;
    }
}

// ---------------------------------------------------------------- ids

// dsh UUID_RE (case-insensitive, no boundaries) → {{sessionId}}.
static void pass_uuid(splice *sp)
{
    const char *s = sp->s;
    size_t n = sp->n, i = 0;
    const char *m;
    while (i < n && (m = memchr(s + i, '-', n - i))) {
        size_t d = (size_t)(m - s);
        i = d + 1;
        if (d < sp->cur + 8 || d + 28 > n || !uuid_at(s + d - 8)) continue;
        i = d - 8 + 36;
        SP_REP(sp, d - 8, i, SID_TOK);
    }
}

// ---------------------------------------------------------------- the string pipeline

typedef struct {
    as_buf *b[2];
    int which;
    const char *cur;
    size_t n;
    int changed;
} chain;

static as_buf *chain_out(chain *c)
{
    as_buf *d = c->b[c->which];
    as_buf_reset(d);
    return d;
}

static void chain_took(chain *c, int did)
{
    if (!did) return;
    as_buf *d = c->b[c->which];
    c->cur = d->p ? d->p : "";
    c->n = d->n;
    c->which ^= 1;
    c->changed = 1;
}
// One pass over the chain's current text: call uses sp_, a splice of it onto
// the other buffer, which becomes current when the pass replaced anything.
#define STEP(c, call) do { splice s_ = { (c)->cur, (c)->n, chain_out(c), 0, 0 }, *sp_ = &s_; \
        call; chain_took(c, sp_end(sp_)); } while (0)

enum { F_SP = 1, F_ID = 2, F_CWDTOK = 4, F_BS = 8, F_SNAP = 16, F_UUID = 32, F_EVENT = 64 };

// The next byte at or after i that may start a volatile value (len when none).
static size_t next_trigger(const as_norm *n, const char *s, size_t i, size_t len)
{
#ifdef __SSE2__
    if (n->ntb) {
        __m128i t[8];
        for (int k = 0; k < n->ntb; k++) t[k] = _mm_set1_epi8((char)n->tb[k]);
        for (; i + 16 <= len; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            __m128i m = _mm_cmpeq_epi8(v, t[0]);
            for (int k = 1; k < n->ntb; k++) m = _mm_or_si128(m, _mm_cmpeq_epi8(v, t[k]));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            if (mask) return i + (size_t)__builtin_ctz(mask);
        }
    }
#endif
    for (; i < len; i++)
        if (n->trig[(unsigned char)s[i]]) return i;
    return len;
}

// One pass over the string: which rules could apply (a superset; 0 = none).
static unsigned features(const as_norm *n, const char *s, size_t len)
{
    unsigned f = STARTS(s, 0, len, "Session ") ? F_EVENT : 0;
    if (find(s, 0, len, "{{cwd}}", 7)) f |= F_CWDTOK;   // '{' is not among the SIMD triggers
    if (n->plain_ids)
        for (size_t k = 0; k < n->nid; k++)
            if (find(s, 0, len, n->id[k].p, n->id[k].n)) f |= F_ID;
    for (size_t i = 0; (i = next_trigger(n, s, i, len)) < len; i++) {
        unsigned t = n->trig[(unsigned char)s[i]];
        if (t & T_SP)
            for (size_t k = 0; k < n->nsp; k++)
                if (starts(s, i, len, n->sp[k].p, n->sp[k].n)) f |= F_SP;
        if (t & T_SEP) {
            if (s[i] == '\\') f |= F_BS;
            if (snap_root_at(s, i, len)) f |= F_SNAP;
        }
        // a UUID (and so a UUID-shaped session id) has 8 hex digits before its first '-'
        if ((t & T_DASH) && i >= 8 && i + 28 <= len && has_hex(s + i - 8, 8) && has_hex(s + i + 1, 4))
            f |= F_UUID | F_ID;
    }
    return f;
}

static int scrub_chain(const as_norm *nc, chain *c, unsigned f, int is_path)
{
    int cwdtok = (f & F_CWDTOK) != 0;
    if (f & F_SP) {
        for (size_t i = 0; i < nc->nsp; i++) STEP(c, pass_spelling(sp_, &nc->sp[i]));
        cwdtok |= c->changed;
    }
    if (cwdtok) STEP(c, pass_literal(sp_, "/private{{cwd}}", 15, CWD_TOK, 7));
    if (!nc->native && (f & F_BS)) {
        if (cwdtok) STEP(c, pass_cwd_rooted(sp_));
        STEP(c, pass_path_tags(sp_));
        STEP(c, pass_additional(sp_));
    }
    if (cwdtok) STEP(c, pass_local_spill(sp_));
    if (f & F_SNAP) STEP(c, pass_snapshot_spill(sp_));
    if (f & F_EVENT) STEP(c, pass_event_read(sp_));
    if (f & F_ID)
        for (size_t i = 0; i < nc->nid; i++)
            STEP(c, pass_literal(sp_, nc->id[i].p, nc->id[i].n, SID_TOK, sizeof SID_TOK - 1));
    if (f & F_UUID) STEP(c, pass_uuid(sp_));
    if (is_path && !nc->native && (f & F_BS) && memchr(c->cur, '\\', c->n)) STEP(c, sp_slash(sp_, 0, c->n));
    return c->changed;
}


int as_norm_str(const as_norm *nc, const char *s, size_t len, int is_path, as_buf *out)
{
    as_norm *n = (as_norm *)nc;   // scratch buffers only
    chain c = { { &n->s1, &n->s2 }, 0, s, len, 0 };
    unsigned f = features(nc, s, len);
    if (!f) {
        as_buf_put(out, s, len);
        return 0;
    }
    int changed = scrub_chain(nc, &c, f, is_path);
    as_buf_put(out, c.cur, c.n);
    return changed;
}

// ---------------------------------------------------------------- the record walker
//
// A record is edited in place: the output is its source bytes with some spans
// replaced (a scrubbed string, a zeroed time, a tokenized header) or skipped
// (a dropped envelope member). That needs compact source, so a record with
// whitespace between its tokens is first re-emitted compactly and re-parsed.


// The compact form of subtree tok: containers re-punctuated, keys verbatim,
// each scalar written by leaf (its bytes verbatim when leaf is NULL).
typedef void (*leaf_fn)(const void *ctx, const as_json *j, int tok, as_buf *out);
static void cwalk(const as_json *j, int tok, leaf_fn leaf, const void *ctx, as_buf *out)
{
    const as_tok *t = &j->t[tok];
    if (t->type != AS_JOBJ && t->type != AS_JARR) {
        if (leaf) leaf(ctx, j, tok, out);
        else as_buf_put(out, j->s + t->start, t->end - t->start);
        return;
    }
    as_buf_putc(out, t->type == AS_JOBJ ? '{' : '[');
    int c = tok + 1;
    for (uint32_t i = 0; i < t->count; i++) {
        if (i) as_buf_putc(out, ',');
        if (t->type == AS_JOBJ) {
            as_buf_put(out, as_tok_p(j, c), as_tok_len(j, c));
            as_buf_putc(out, ':');
            c++;
        }
        cwalk(j, c, leaf, ctx, out);
        c = (int)j->t[c].next;
    }
    as_buf_putc(out, t->type == AS_JOBJ ? '}' : ']');
}

// 1 when subtree tok has no whitespace between its tokens.
static int is_compact(const as_json *j, int tok)
{
    size_t want = 0;
    for (uint32_t i = (uint32_t)tok; i < j->t[tok].next; i++) {
        const as_tok *t = &j->t[i];
        if (t->type == AS_JOBJ || t->type == AS_JARR)
            want += 2 + (t->count ? t->count - 1 : 0) + (t->type == AS_JOBJ ? t->count : 0);
        else
            want += t->end - t->start;
    }
    return want == j->t[tok].end - j->t[tok].start;
}

// Scratch for callers without a context.
static as_norm *scratch(const as_norm *n)
{
    static as_norm *own;
    if (n) return (as_norm *)n;
    if (!own) own = as_norm_new();
    return own;
}

// Subtree *tok of j in compact form: j itself, or a compact re-parsed copy (then *tok = 0).
static const as_json *compacted(as_norm *n, const as_json *j, int *tok)
{
    if (is_compact(j, *tok)) return j;
    as_buf_reset(&n->cb);
    cwalk(j, *tok, NULL, NULL, &n->cb);
    if (as_json_parse(&n->cj, n->cb.p, n->cb.n) < 0) as_die(AS_TROUBLE, "internal error: compact form does not parse");
    *tok = 0;
    return &n->cj;
}

typedef struct {
    as_norm *n;          // the context; scrub strings only when scrub is set
    int scrub;
    const as_json *j;
    splice sp;           // over the record's bytes, onto the output
    size_t ci;           // next candidate (n->cand) to consider
} ed;

static void cand_push(as_norm *n, size_t pos)
{
    if (n->ncand == n->ccap) {
        n->ccap = n->ccap ? n->ccap * 2 : 64;
        n->cand = as_xrealloc(n->cand, n->ccap * sizeof *n->cand);
    }
    n->cand[n->ncand++] = (uint32_t)pos;
}

// One scan of the raw (escaped) bytes [from, to): the offsets where a rule may
// apply, so that strings without one are passed over without decoding. A \u
// or \/ escape (which could hide a trigger byte) or a non-UUID session id
// makes every string a candidate (n->full).
// Examines trigger byte s[i]; returns the index to resume from, or 0 to stop (full).
static size_t line_hit(as_norm *n, const char *s, size_t i, size_t to)
{
    unsigned char c = (unsigned char)s[i];
    if (c == '\\') {
        if (i + 1 < to && (s[i + 1] == 'u' || s[i + 1] == '/')) { n->full = 1; return 0; }
        if (i + 1 < to && s[i + 1] == '\\') cand_push(n, i);
        return i + 2;   // past the escaped character
    }
    unsigned t = n->trig[c];
    int hit = 0;
    if (t & T_SP)
        for (size_t k = 0; k < n->nesp && !hit; k++) hit = starts(s, i, to, n->esp[k].p, n->esp[k].n);
    if (!hit && c == '/') hit = snap_root_at(s, i, to);
    if (!hit && (t & T_DASH) && i >= 8 && i + 28 <= to && uuid_at(s + i - 8)) {
        cand_push(n, i);
        return i + 28;   // past the UUID
    }
    if (hit) cand_push(n, i);
    return i + 1;
}

// 1 when a mark of whole_line starts at or after i in [from, to).
static int marks_from(const char *s, size_t from, size_t i, size_t to)
{
    if (find(s, i, to, "{{cwd}}", 7)) return 1;
    for (const char *m = s + i; (m = find(s, (size_t)(m - s), to, "Session ", 8)); m++)
        if (m > s + from && m[-1] == '"') return 1;
    return 0;
}

// 1 when every string of the line [from, to) is to be examined: it holds
// already-tokenized input ("{{cwd}}": a committed fixture, an expected
// file), or an event-read result (a string starting "Session "). One pass
// for both: places where "{{" or "Se" starts, sixteen at a time.
static int whole_line(const char *s, size_t from, size_t to)
{
    size_t i = from;
#ifdef __SSE2__
    const __m128i lb = _mm_set1_epi8('{'), cS = _mm_set1_epi8('S'), ce = _mm_set1_epi8('e');
    for (; i + 17 <= to; i += 16) {   // reads s[i, i + 17)
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i w = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 1));
        __m128i m = _mm_or_si128(_mm_and_si128(_mm_cmpeq_epi8(v, lb), _mm_cmpeq_epi8(w, lb)),
                                 _mm_and_si128(_mm_cmpeq_epi8(v, cS), _mm_cmpeq_epi8(w, ce)));
        for (unsigned k = (unsigned)_mm_movemask_epi8(m); k; k &= k - 1) {
            size_t p = i + (size_t)__builtin_ctz(k);
            if (s[p] == '{' ? starts(s, p, to, "{{cwd}}", 7) : p > from && s[p - 1] == '"' && starts(s, p, to, "Session ", 8))
                return 1;
        }
    }
#endif
    return marks_from(s, from, i, to);
}

#ifdef AS_NORM_AVX2
// line_prep in one pass, 32 bytes at a time: the whole-line marks and the
// trigger bytes together. A mark anywhere makes the line full, whatever
// was found before it; a hit may consume bytes after it (skip), which are
// still searched for marks.
__attribute__((target("avx2")))
static void line_prep_avx2(as_norm *n, const char *s, size_t from, size_t to)
{
    __m256i t[8], nx[4];
    for (int k = 0; k < n->ntb; k++) t[k] = _mm256_set1_epi8((char)n->tb[k]);
    for (int k = 0; k < n->nslash_next; k++) nx[k] = _mm256_set1_epi8((char)n->slash_next[k]);
    const __m256i lb = _mm256_set1_epi8('{'), cS = _mm256_set1_epi8('S'), ce = _mm256_set1_epi8('e');
    const __m256i dash = _mm256_set1_epi8('-'), slash = _mm256_set1_epi8('/');
    size_t i = from, skip = from;
    // blocks of 32 at b, each reading s[b, b + 37); the last one, where a
    // whole block no longer fits, ends 5 bytes before the end and overlaps
    // the one before it (its bytes before i already scanned: kept out).
    while (i + 37 <= to || (to - from >= 37 && i + 5 < to)) {
        size_t b = i + 37 <= to ? i : to - 37;
        unsigned keep = ~0u << (i - b);
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(s + b));
        __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(s + b + 1));
        __m256i mark = _mm256_or_si256(_mm256_and_si256(_mm256_cmpeq_epi8(v, lb), _mm256_cmpeq_epi8(w, lb)),
                                       _mm256_and_si256(_mm256_cmpeq_epi8(v, cS), _mm256_cmpeq_epi8(w, ce)));
        for (unsigned k = (unsigned)_mm256_movemask_epi8(mark) & keep; k; k &= k - 1) {
            size_t p = b + (size_t)__builtin_ctz(k);
            if (s[p] == '{' ? starts(s, p, to, "{{cwd}}", 7) : p > from && s[p - 1] == '"' && starts(s, p, to, "Session ", 8)) {
                n->full = 1;
                return;
            }
        }
        __m256i m = _mm256_cmpeq_epi8(v, t[0]);
        for (int k = 1; k < n->ntb; k++) m = _mm256_or_si256(m, _mm256_cmpeq_epi8(v, t[k]));
        if (n->dash5) {   // a '-' without a '-' five bytes on: no UUID starts there
            __m256i v5 = _mm256_loadu_si256((const __m256i *)(const void *)(s + b + 5));
            __m256i lone = _mm256_andnot_si256(_mm256_cmpeq_epi8(v5, dash), _mm256_cmpeq_epi8(v, dash));
            m = _mm256_andnot_si256(lone, m);
        }
        if (n->nslash_next) {   // a '/' not followed by what a match needs
            __m256i ok = _mm256_cmpeq_epi8(w, nx[0]);
            for (int k = 1; k < n->nslash_next; k++) ok = _mm256_or_si256(ok, _mm256_cmpeq_epi8(w, nx[k]));
            m = _mm256_andnot_si256(_mm256_andnot_si256(ok, _mm256_cmpeq_epi8(v, slash)), m);
        }
        for (unsigned k = (unsigned)_mm256_movemask_epi8(m) & keep; k; k &= k - 1) {
            size_t p = b + (size_t)__builtin_ctz(k);
            if (p < skip) continue;
            size_t r = line_hit(n, s, p, to);
            if (!r) return;   // (full)
            skip = r;
        }
        i = b + 32;
    }
    if (marks_from(s, from, i, to)) { n->full = 1; return; }
    for (i = i > skip ? i : skip; i < to;) {
        unsigned c = n->trig[(unsigned char)s[i]];
        if (!c || c == T_BRACE) { i++; continue; }
        size_t r = line_hit(n, s, i, to);
        if (!r) return;
        i = r;
    }
}
#endif

static void line_prep(as_norm *n, const char *s, size_t from, size_t to)
{
    n->ncand = 0;
#ifdef AS_NORM_AVX2
    if (n->ntb && !n->plain_ids && as_simd() >= AS_SIMD_AVX2) {
        n->full = 0;
        line_prep_avx2(n, s, from, to);
        return;
    }
#endif
    n->full = n->plain_ids || whole_line(s, from, to);
    if (n->full) return;
    size_t i = from;
#ifdef __SSE2__
    if (n->ntb) {
        __m128i t[8];
        for (int k = 0; k < n->ntb; k++) t[k] = _mm_set1_epi8((char)n->tb[k]);
        while (i + 16 <= to) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            __m128i m = _mm_cmpeq_epi8(v, t[0]);
            for (int k = 1; k < n->ntb; k++) m = _mm_or_si128(m, _mm_cmpeq_epi8(v, t[k]));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            size_t base = i, next = i + 16;
            while (mask) {
                size_t p = base + (size_t)__builtin_ctz(mask);
                mask &= mask - 1;
                if (p < next && p != base - 1) {
                    // a hit may consume the byte after it (an escape pair)
                    size_t r = line_hit(n, s, p, to);
                    if (!r) return;
                    if (r > next) next = r;
                    while (mask && base + (size_t)__builtin_ctz(mask) < r) mask &= mask - 1;
                }
            }
            i = next;
        }
    }
#endif
    while (i < to) {
        unsigned t = n->trig[(unsigned char)s[i]];
        if (!t || t == T_BRACE) { i++; continue; }
        size_t r = line_hit(n, s, i, to);
        if (!r) return;
        i = r;
    }
}

// The text of string token tok: its body, decoded (into n's scratch) when it
// holds an escape. *len receives its length.
static const char *span_body(as_norm *n, const char *p, size_t n_, int esc, size_t *len)
{
    const char *body = p + 1;
    *len = n_ - 2;
    if (!esc) return body;
    as_buf_reset(&n->dec);
    as_jstr_decode(body, *len, &n->dec);
    *len = n->dec.n;
    return n->dec.p ? n->dec.p : "";
}
static const char *str_body(as_norm *n, const as_json *j, int tok, size_t *len)
{
    const as_tok *t = &j->t[tok];
    return span_body(n, j->s + t->start, t->end - t->start, t->esc, len);
}

// 1 when string token [start, end) holds a candidate (candidates are met in order).
static int ed_cand(ed *e, size_t start, size_t end)
{
    as_norm *n = e->n;
    if (n->full) return 1;
    while (e->ci < n->ncand && n->cand[e->ci] < start) e->ci++;
    return e->ci < n->ncand && n->cand[e->ci] < end;
}

// Starts editing record j0 (root 0) onto out: a compact copy of it when it
// is not compact, its candidate strings found when strings are scrubbed.
static void ed_begin(ed *e, as_norm *n, int scrub, const as_json *j0, as_buf *out)
{
    int root = 0;
    const as_json *j = compacted(n, j0, &root);
    *e = (ed){ n, scrub, j, { j->s, j->t[0].end, out, j->t[0].start, 0 }, 0 };
    if (scrub) line_prep(n, j->s, j->t[0].start, j->t[0].end);
}

static void ed_rep(ed *e, int tok, const char *rep, size_t rn)
{
    sp_rep(&e->sp, e->j->t[tok].start, e->j->t[tok].end, rep, rn);
}

// Replaces array tok with one as long whose every element is elem.
static void ed_rep_each(ed *e, int tok, const char *elem)
{
    as_buf *b = &e->n->val;
    as_buf_reset(b);
    as_buf_putc(b, '[');
    for (uint32_t m = 0; m < e->j->t[tok].count; m++) {
        if (m) as_buf_putc(b, ',');
        as_buf_puts(b, elem);
    }
    as_buf_putc(b, ']');
    ed_rep(e, tok, b->p, b->n);
}

// Drops member (key k) of an object; kept: members kept before it; last: no member after it.
static void ed_drop(ed *e, int k, int kept, int last)
{
    size_t from = e->j->t[k].start, to = e->j->t[k + 1].end;
    if (kept) from--;          // with the comma before it
    else if (!last) to++;      // with the comma after it
    sp_cut(&e->sp, from, to);
}

// The string [p, p + len) (quotes included; esc: it holds an escape)
// scrubbed: 1 and its new form (a JSON string) in n->sv, or 0 when no rule
// changes it.
static int scrub_string(as_norm *n, const char *p, size_t len, int esc, int is_path)
{
    as_buf_reset(&n->sv);
    // the common case of a string that is one UUID (a session id): no other rule can apply
    if (len == 38 && !esc && n->sp_sep && !n->plain_ids && uuid_at(p + 1)) {
        as_buf_put(&n->sv, "\"{{sessionId}}\"", 15);
        return 1;
    }
    size_t blen;
    const char *body = span_body(n, p, len, esc, &blen);
    unsigned f = features(n, body, blen);
    if (!f) return 0;
    chain c = { { &n->s1, &n->s2 }, 0, body, blen, 0 };
    if (!scrub_chain(n, &c, f, is_path)) return 0;
    as_jstr_write(&n->sv, c.cur, c.n);
    return 1;
}

static void ed_string(ed *e, int tok, int is_path)
{
    const as_tok *t = &e->j->t[tok];
    if (!ed_cand(e, t->start, t->end)) return;
    if (scrub_string(e->n, e->j->s + t->start, t->end - t->start, t->esc, is_path))
        ed_rep(e, tok, e->n->sv.p, e->n->sv.n);
}

void as_norm_record_string(const as_norm *nc, const char *p, size_t len, int is_path, as_buf *out)
{
    as_norm *n = scratch(nc);
    if (scrub_string(n, p, len, memchr(p, '\\', len) != NULL, is_path)) as_buf_put(out, n->sv.p, n->sv.n);
    else as_buf_put(out, p, len);
}

static void ed_walk(ed *e, int tok, int is_path)
{
    const as_json *j = e->j;
    const as_tok *t = &j->t[tok];
    if (!e->scrub || !ed_cand(e, t->start, t->end)) return;
    if (t->type == AS_JSTR) {
        ed_string(e, tok, is_path);
    } else if (t->type == AS_JOBJ) {
        int k = tok + 1;
        for (uint32_t i = 0; i < t->count; i++) {
            ed_walk(e, k + 1, AS_TOK_IS(j, k, "path"));
            k = (int)j->t[k + 1].next;
        }
    } else if (t->type == AS_JARR) {
        int el = tok + 1;
        for (uint32_t i = 0; i < t->count; i++) {
            ed_walk(e, el, 0);
            el = (int)j->t[el].next;
        }
    }
}


// ---------------------------------------------------------------- request headers

// data.header of a request/header record, or -1.
static int header_obj(const as_json *j)
{
    if (!AS_TOK_IS(j, as_json_get(j, 0, "type"), "request/header")) return -1;
    int hdr = as_json_get(j, as_json_get(j, 0, "data"), "header");
    return hdr >= 0 && j->t[hdr].type == AS_JOBJ ? hdr : -1;
}

as_hdr_state as_norm_header_state(const as_json *j, unsigned which)
{
    int hdr = header_obj(j);
    if (hdr < 0) return AS_HDR_NOT_HEADER;
    int v;
    if ((which & AS_HDR_SYSTEM) && (v = as_json_get(j, hdr, "system")) >= 0 && !AS_TOK_IS(j, v, AS_TOKEN_SYSTEM))
        return AS_HDR_RAW;
    if ((which & AS_HDR_TOOLS) && (v = as_json_get(j, hdr, "tools")) >= 0 && !AS_TOK_IS(j, v, AS_TOKEN_TOOLS))
        return AS_HDR_RAW;
    return AS_HDR_TOKENIZED;
}

// Edits header object hdr: its bulk tokenized, other members walked.
static void ed_header(ed *e, int hdr, unsigned which)
{
    const as_json *j = e->j;
    int k = hdr + 1;
    for (uint32_t i = 0; i < j->t[hdr].count; i++) {
        int v = k + 1;
        if ((which & AS_HDR_SYSTEM) && AS_TOK_IS(j, k, "system")) {
            ed_rep(e, v, "\"" AS_TOKEN_SYSTEM "\"", sizeof AS_TOKEN_SYSTEM + 1);
        } else if ((which & AS_HDR_TOOLS) && AS_TOK_IS(j, k, "tools")) {
            ed_rep(e, v, "\"" AS_TOKEN_TOOLS "\"", sizeof AS_TOKEN_TOOLS + 1);
        } else {
            ed_walk(e, v, AS_TOK_IS(j, k, "path"));
        }
        k = (int)j->t[v].next;
    }
}


// ---------------------------------------------------------------- session records

typedef struct {
    unsigned flags;
    int packed, hook, reqhdr, session;
} rec;

static void ed_data(ed *e, const rec *r, int data)
{
    const as_json *j = e->j;
    int vol = r->flags & AS_NS_VOLATILE;
    int k = data + 1;
    for (uint32_t i = 0; i < j->t[data].count; i++) {
        int v = k + 1;
        if (vol && r->packed && j->t[v].type == AS_JARR && AS_TOK_IS(j, k, "dt")) {
            ed_rep_each(e, v, "0");
        } else if (vol && r->hook && AS_TOK_IS(j, k, "durationMs")) {
            ed_rep(e, v, "0", 1);
        } else if ((r->flags & AS_NS_TOKENIZE) && r->reqhdr && j->t[v].type == AS_JOBJ && AS_TOK_IS(j, k, "header")) {
            ed_header(e, v, AS_HDR_ALL);
        } else {
            ed_walk(e, v, AS_TOK_IS(j, k, "path"));
        }
        k = (int)j->t[v].next;
    }
}

void as_norm_session_record(const as_norm *nc, const as_json *j0, unsigned flags, as_buf *out)
{
    ed e;
    ed_begin(&e, scratch(nc), nc && (flags & AS_NS_SCRUB), j0, out);
    const as_json *j = e.j;
    rec r = { flags, 0, 0, 0, 0 };
    int type = as_json_get(j, 0, "type");
    if (type >= 0) {
        r.session = AS_TOK_IS(j, type, "session");
        r.packed = AS_TOK_IS(j, type, "text-chunks") || AS_TOK_IS(j, type, "reasoning-chunks")
                   || AS_TOK_IS(j, type, "tool-call-chunks");
        r.hook = AS_TOK_IS(j, type, "hook/result");
        r.reqhdr = AS_TOK_IS(j, type, "request/header");
    }
    int project = (flags & AS_NS_PROJECT) && !(flags & AS_NS_HEADER);
    int vol = flags & AS_NS_VOLATILE;
    uint32_t count = j->t[0].count;
    int kept = 0, k = 1;
    for (uint32_t i = 0; i < count; i++) {
        int v = k + 1, key = k;
        k = (int)j->t[v].next;
        if (project && (AS_TOK_IS(j, key, "seq") || AS_TOK_IS(j, key, "time") || AS_TOK_IS(j, key, "seq0")
                        || AS_TOK_IS(j, key, "time0"))) {
            ed_drop(&e, key, kept, i + 1 == count);
            continue;
        }
        kept++;
        if (vol && r.session && AS_TOK_IS(j, key, "createdAt")) ed_rep(&e, v, "0", 1);
        else if (vol && r.packed && AS_TOK_IS(j, key, "time0")) ed_rep(&e, v, "0", 1);
        else if (vol && !r.session && !r.packed && AS_TOK_IS(j, key, "time")) ed_rep(&e, v, "0", 1);
        else if (j->t[v].type == AS_JOBJ && AS_TOK_IS(j, key, "data") && (r.packed || r.hook || r.reqhdr))
            ed_data(&e, &r, v);
        else ed_walk(&e, v, AS_TOK_IS(j, key, "path"));
    }
    sp_rest(&e.sp);
}

// ---------------------------------------------------------------- stdout frames

static uint64_t fnv(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 1099511628211ull; }
    return h;
}

static long id_number(as_norm *n, const char *p, size_t len)
{
    if (n->tn * 2 >= n->tcap) {
        size_t ncap = n->tcap ? n->tcap * 2 : 64;
        struct idslot *nt = as_xmalloc(ncap * sizeof *nt);
        memset(nt, 0, ncap * sizeof *nt);
        for (size_t i = 0; i < n->tcap; i++) {
            if (!n->tab[i].k) continue;
            size_t h = fnv(n->tab[i].k, n->tab[i].n) & (ncap - 1);
            while (nt[h].k) h = (h + 1) & (ncap - 1);
            nt[h] = n->tab[i];
        }
        free(n->tab);
        n->tab = nt;
        n->tcap = ncap;
    }
    size_t h = fnv(p, len) & (n->tcap - 1);
    while (n->tab[h].k) {
        if (n->tab[h].n == len && !memcmp(n->tab[h].k, p, len)) return n->tab[h].v;
        h = (h + 1) & (n->tcap - 1);
    }
    n->tab[h].k = as_xmalloc(len + 1);
    memcpy(n->tab[h].k, p, len);
    n->tab[h].n = len;
    n->tab[h].v = (long)++n->tn;
    return n->tab[h].v;
}

// The identity of id token v as dsh keys its map, JSON.stringify(id): a
// string re-escaped, a number in JavaScript's form (1.0 and 1e0 are 1), a
// container compacted (its members' spellings kept).
static const as_buf *id_key(as_norm *n, const as_json *j, int v)
{
    as_buf_reset(&n->idk);
    if (j->t[v].type == AS_JSTR && j->t[v].esc) {
        as_buf_reset(&n->ids);
        as_json_str(j, v, &n->ids);
        as_jstr_write(&n->idk, n->ids.p ? n->ids.p : "", n->ids.n);
    } else if (j->t[v].type == AS_JNUM) {
        as_js_number(j, v, &n->idk);
    } else if (j->t[v].type == AS_JARR || j->t[v].type == AS_JOBJ) {
        as_json_compact(as_tok_p(j, v), as_tok_len(j, v), &n->idk);
    } else {
        as_buf_put(&n->idk, as_tok_p(j, v), as_tok_len(j, v));
    }
    return &n->idk;
}

// 1 when every candidate of compact line s[0, len) is a UUID that stands
// alone as a string value (not a key): the string the UUID rule turns whole
// into "{{sessionId}}" when no cwd spelling can hide in a UUID. An ACP
// frame's usual candidate, its sessionId. Read off the bytes: a quote with
// no backslash before it, then 36 UUID bytes, is a string's opening quote.
static int uuid_values_only(const as_norm *n, const char *s, size_t len)
{
    if (!n->sp_sep || n->plain_ids) return 0;
    for (size_t i = 0; i < n->ncand; i++) {
        size_t c = n->cand[i];   // (a UUID's first dash)
        if (c < 10 || c + 29 >= len || s[c] != '-' || !uuid_at(s + c - 8)) return 0;
        if (s[c - 9] != '"' || s[c - 10] == '\\' || s[c + 28] != '"' || s[c + 29] == ':') return 0;
    }
    return 1;
}

// The frame being edited by e (root 0): its top-level id renumbered, every
// string scrubbed; walk: with its tokens in full, else (shallow tokens)
// every candidate a lone UUID (uuid_values_only).
static void stdout_edit(ed *e, int walk)
{
    as_norm *n = e->n;
    const as_json *j = e->j;
    int k = 1;
    size_t ci = 0;
    for (uint32_t i = 0; i < j->t[0].count; i++) {
        int v = k + 1;
        if (j->t[v].type != AS_JNULL && AS_TOK_IS(j, k, "id")) {
            char num[24], *q = num + sizeof num;
            const as_buf *key = id_key(n, j, v);
            unsigned long id = (unsigned long)id_number(n, key->p ? key->p : "", key->n);
            do *--q = (char)('0' + id % 10); while (id /= 10);
            ed_rep(e, v, q, (size_t)(num + sizeof num - q));
        } else if (walk) {
            ed_walk(e, v, AS_TOK_IS(j, k, "path"));
        } else {
            for (; ci < n->ncand && n->cand[ci] < j->t[v].end; ci++)
                if (n->cand[ci] > j->t[v].start)
                    SP_REP(&e->sp, n->cand[ci] - 9, n->cand[ci] + 29, "\"{{sessionId}}\"");
        }
        k = (int)j->t[v].next;
    }
    sp_rest(&e->sp);
}

void as_norm_stdout_frame(as_norm *n, const as_json *j, as_buf *out)
{
    ed e;
    ed_begin(&e, n, 1, j, out);
    stdout_edit(&e, 1);
}

int as_norm_stdout_line(as_norm *n, as_json *j, const char *s, size_t len, as_buf *out)
{
    // The candidates first, on the raw bytes: a line where no string can
    // change, or only lone UUIDs, needs only its root's members as tokens.
    line_prep(n, s, 0, len);
    int walk = n->full || (n->ncand && !uuid_values_only(n, s, len));
    if ((walk ? as_json_parse : as_json_parse_shallow)(j, s, len) < 0) return -1;
    if (j->t[0].type != AS_JOBJ) return 1;
    if (!j->compact) {   // (the byte scanner's full tokens; candidates found again on the compact copy)
        as_norm_stdout_frame(n, j, out);
        return 0;
    }
    ed e = { n, 1, j, { s, len, out, 0, 0 }, 0 };   // compact: the candidates stand
    stdout_edit(&e, walk);
    return 0;
}

// ---------------------------------------------------------------- fixture cwd

// dsh tokenizeFixtureString's absolute-path rule: [X:]<sep>(seg<sep>)*basename
// followed by the end, a separator, \s or <>'"()[]{},;:!?=.
static void pass_basename(splice *sp, const char *base, size_t bl)
{
    const char *s = sp->s;
    size_t n = sp->n;
    if (!find(s, 0, n, base, bl)) return;
    for (size_t p = 0; p < n; p++) {
        if (!is_sep(s[p])) continue;
        size_t c = p + 1, end = 0;
        for (;;) {
            if (starts(s, c, n, base, bl)) {
                size_t q = c + bl;
                // dsh's lookahead here is PATH_TEXT_BOUNDARY without the backtick
                if (q == n || is_sep(s[q]) || (s[q] != '`' && boundary_at(s, q, n))) end = q;
            }
            size_t q = c;
            while (q < n && !is_sep(s[q]) && s[q] != '<' && s[q] != '>' && s[q] != '"' && !js_space_at(s, q, n)) q++;
            if (q == c || q >= n || !is_sep(s[q])) break;
            c = q + 1;
        }
        if (!end) continue;
        size_t start = p;
        if (p >= sp->cur + 2 && s[p - 1] == ':' && is_alpha(s[p - 2])) start = p - 2;
        SP_REP(sp, start, end, CWD_TOK);
        p = end - 1;
    }
}

typedef struct { const as_norm *n; const char *base; size_t bl; } fix;

// A scalar of the record: a string rewritten when a rule applies, anything else verbatim.
static void fix_leaf(const void *ctx, const as_json *j, int tok, as_buf *out)
{
    const fix *f = ctx;
    const as_tok *t = &j->t[tok];
    as_norm *n = (as_norm *)f->n;   // scratch buffers only
    size_t blen;
    const char *body = t->type == AS_JSTR ? str_body(n, j, tok, &blen) : NULL;
    if (!body || (!find(body, 0, blen, f->base, f->bl) && !find(body, 0, blen, "/private{{cwd}}", 15))) {
        as_buf_put(out, j->s + t->start, t->end - t->start);
        return;
    }
    chain c = { { &n->s1, &n->s2 }, 0, body, blen, 0 };
    for (size_t i = 0; i < n->nsp; i++) STEP(&c, pass_spelling(sp_, &n->sp[i]));
    STEP(&c, pass_basename(sp_, f->base, f->bl));
    STEP(&c, pass_literal(sp_, "/private{{cwd}}", 15, CWD_TOK, 7));
    if (c.changed) as_jstr_write(out, c.cur, c.n);
    else as_buf_put(out, j->s + t->start, t->end - t->start);
}

void as_norm_fixture_cwd(const as_norm *n, const char *basename, size_t blen, const as_json *j, as_buf *out)
{
    fix f = { n, basename, blen };
    cwalk(j, 0, fix_leaf, &f, out);
}
