// lint.c - the secret and volatile lint of committed fixtures (lint.h,
// fixture-guard(1) LINT): one linear pass per line, each detector keyed on
// the first byte of what it finds, bounded look-behind only.
#include "acpsnap.h"
#include "lint.h"
#include "confine.h"
#include "fsat.h"
#include "simd.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __x86_64__
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

static const char *const KIND[AS_LK_N] = {
    "key", "bearer", "auth", "private-key", "home", "tmp", "time", "uuid", "epoch",
};

int as_lint_kind_of(const char *name, size_t n)
{
    for (int k = 0; k < AS_LK_N; k++)
        if (strlen(KIND[k]) == n && !memcmp(KIND[k], name, n)) return k;
    return -1;
}

// ---------------------------------------------------------------- bytes

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static int is_alpha(int c) { return is_upper(c) || (c >= 'a' && c <= 'z'); }
static int is_alnum(int c) { return is_alpha(c) || is_digit(c); }
static int is_hex(int c) { return is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
static int lower(int c) { return is_upper(c) ? c | 32 : c; }
// A key body byte: [A-Za-z0-9_-].
static int is_keych(int c) { return is_alnum(c) || c == '_' || c == '-'; }
// A token byte of a bearer or header value: [A-Za-z0-9._~+/=-].
static int is_tokch(int c) { return is_keych(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='; }
// A byte of a path token: anything but white space, quotes, a backslash,
// control bytes and the punctuation that ends a path in prose or shell.
static int is_pathch(int c)
{
    return c > ' ' && c != '"' && c != '\'' && c != '`' && c != '\\' && c != '<' && c != '>'
           && c != '|' && c != ';' && c != ',' && c != ')' && c != ']' && c != '}' && c != 127;
}

// 1 when s[k] is the letter of a JSON escape (\n, \t, ...): text starts after it.
static inline int esc_letter(const char *s, size_t k)
{
    char c = s[k];
    if (c != 'n' && c != 'r' && c != 't' && c != 'b' && c != 'f') return 0;
    return k >= 1 && s[k - 1] == '\\' && !(k >= 2 && s[k - 2] == '\\');
}

// A word starts at i: no letter, digit or underscore before it (a JSON escape letter does not count).
static int word_start(const char *s, size_t i)
{
    if (i == 0) return 1;
    int c = (unsigned char)s[i - 1];
    return !(is_alnum(c) || c == '_') || esc_letter(s, i - 1);
}

// Case-insensitive literal (lowercase lit) at s[i].
static int ci_at(const char *s, size_t i, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    if (i + k > n) return 0;
    for (size_t j = 0; j < k; j++) if (lower((unsigned char)s[i + j]) != lit[j]) return 0;
    return 1;
}

static int lit_at(const char *s, size_t i, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return i + k <= n && !memcmp(s + i, lit, k);
}

// End of the run of bytes in class f from i.
static size_t run(const char *s, size_t i, size_t n, int (*f)(int))
{
    while (i < n && f((unsigned char)s[i])) i++;
    return i;
}

// ---------------------------------------------------------------- the scanner

typedef struct {
    const char *s;
    size_t n;
    unsigned flags;
    as_lint_fn fn;
    void *ctx;
    size_t count;
    size_t last;       // end of the last hit: nothing before it is reported again
    size_t dt_end;     // (session) the end of the "dt" array being read
    size_t tb;         // (AVX-512) the triggers of the 64 bytes from tb: bit k for s[tb + k]
    uint64_t tm;
    int tset;          // tb and tm hold a block
} scan;

// Reports [off, off + len) unless a format place holds it; returns the end.
static size_t hit(scan *sc, int kind, size_t off, size_t len, size_t pre, const char *what)
{
    int fmt = !as_lint_secret(kind) && (sc->flags & AS_LF_HEADER);
    if (!fmt && off >= sc->last) {
        as_lint_hit h = { kind, off, len, pre, what };
        sc->fn(sc->ctx, &h);
        sc->count++;
    }
    sc->last = off + len;
    return off + len;
}

// A bearer/header value: 16 token bytes or more, or 8 or more with a digit.
static int secretish(const char *s, size_t a, size_t e)
{
    if (e - a >= 16) return 1;
    if (e - a < 8) return 0;
    for (size_t i = a; i < e; i++) if (is_digit((unsigned char)s[i])) return 1;
    return 0;
}

static int has_digit(const char *s, size_t a, size_t e)
{
    for (size_t i = a; i < e; i++) if (is_digit((unsigned char)s[i])) return 1;
    return 0;
}

// "Bearer <token>" at i (case-insensitive scheme): the end of the hit, or 0.
static size_t bearer(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (!ci_at(s, i, n, "bearer") || !word_start(s, i)) return 0;
    size_t a = i + 6;
    if (a >= n || (s[a] != ' ' && s[a] != '\t')) return 0;
    while (a < n && (s[a] == ' ' || s[a] == '\t')) a++;
    size_t e = run(s, a, n, is_tokch);
    if (!secretish(s, a, e)) return 0;
    return hit(sc, AS_LK_BEARER, i, e - i, a - i, "a bearer token");
}

// The names whose values are credentials, lowercase.
static const char *const AUTH[] = { "authorization", "x-api-key", "api-key", "api_key" };

// An Authorization / x-api-key / api-key / api_key member or header line at
// i, "name": "value", name: value or name=value: the end of the hit, or 0.
static size_t auth(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (i > 0 && is_alnum((unsigned char)s[i - 1]) && !esc_letter(s, i - 1)) return 0;
    size_t k = 0;
    while (k < 4 && !ci_at(s, i, n, AUTH[k])) k++;
    if (k == 4) return 0;
    size_t a = i + strlen(AUTH[k]);
    if (a < n && (is_keych((unsigned char)s[a]))) return 0;   // a longer name
    if (a < n && s[a] == '\\') a++;
    if (a < n && s[a] == '"') a++;
    while (a < n && (s[a] == ' ' || s[a] == '\t')) a++;
    if (a >= n || (s[a] != ':' && s[a] != '=')) return 0;
    a++;
    while (a < n && (s[a] == ' ' || s[a] == '\t')) a++;
    if (a < n && s[a] == '\\') a++;
    if (a < n && s[a] == '"') a++;
    if (ci_at(s, a, n, "bearer ")) return bearer(sc, a);
    if (ci_at(s, a, n, "basic ") || ci_at(s, a, n, "token ")) {
        while (a < n && s[a] != ' ') a++;
        while (a < n && s[a] == ' ') a++;
    }
    size_t e = run(s, a, n, is_tokch);
    if (!secretish(s, a, e)) return 0;
    return hit(sc, AS_LK_AUTH, a, e - a, 0, k == 0 ? "an Authorization value" : k == 1 ? "an x-api-key value" : "an api-key value");
}

// A key of fixed prefix pre (matched already) at i with a body of class f
// from i + strlen(pre): at least min bytes (exactly min when exact), a
// digit in it when digit; ends at a non-body byte.
static size_t key_shape(scan *sc, size_t i, const char *pre, int (*f)(int), size_t min, int exact, int digit, const char *what)
{
    const char *s = sc->s;
    size_t n = sc->n, a = i + strlen(pre);
    size_t e = run(s, a, n, f);
    if (e - a < min || (exact && e - a != min)) return 0;
    if (e < n && is_alnum((unsigned char)s[e])) return 0;
    if (digit && !has_digit(s, a, e)) return 0;
    return hit(sc, AS_LK_KEY, i, e - i, strlen(pre), what);
}

static int is_upnum(int c) { return is_upper(c) || is_digit(c); }

// The API key shapes keyed on their first byte at i (a word start): the end of the hit, or 0.
static size_t key(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (i > 0 && (is_keych((unsigned char)s[i - 1])) && !esc_letter(s, i - 1)) return 0;
    switch (s[i]) {
    case 's':
        if (lit_at(s, i, n, "sk-ant-")) return key_shape(sc, i, "sk-ant-", is_keych, 20, 0, 1, "an Anthropic API key");
        if (lit_at(s, i, n, "sk-")) return key_shape(sc, i, "sk-", is_keych, 20, 0, 1, "an API key");
        return 0;
    case 'A':
        if (lit_at(s, i, n, "AKIA")) return key_shape(sc, i, "AKIA", is_upnum, 16, 1, 0, "an AWS access key id");
        if (lit_at(s, i, n, "ASIA")) return key_shape(sc, i, "ASIA", is_upnum, 16, 1, 0, "an AWS access key id");
        if (lit_at(s, i, n, "AIza")) return key_shape(sc, i, "AIza", is_keych, 35, 0, 0, "a Google API key");
        return 0;
    case 'g':
        if (lit_at(s, i, n, "github_pat_")) return key_shape(sc, i, "github_pat_", is_keych, 20, 0, 0, "a GitHub token");
        if (lit_at(s, i, n, "gh") && i + 3 < n && strchr("posur", s[i + 2]) && s[i + 3] == '_')
            return key_shape(sc, i, "ghp_", is_alnum, 30, 0, 0, "a GitHub token");
        return 0;
    case 'x':
        if (lit_at(s, i, n, "xox") && i + 4 < n && strchr("abp", s[i + 3]) && s[i + 3] && s[i + 4] == '-')
            return key_shape(sc, i, "xoxb-", is_keych, 10, 0, 1, "a Slack token");
        return 0;
    }
    return 0;
}

// -----BEGIN ... PRIVATE KEY----- at i: the end of the hit, or 0.
static size_t private_key(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (!lit_at(s, i, n, "-----BEGIN ")) return 0;
    size_t lim = i + 11 + 40 < n ? i + 11 + 40 : n;
    static const char tail[] = "PRIVATE KEY-----";
    const char *m = memmem(s + i + 11, lim - (i + 11), tail, sizeof tail - 1);
    if (!m) return 0;
    return hit(sc, AS_LK_PRIVKEY, i, (size_t)(m - s) + sizeof tail - 1 - i, 11, "a private key block");
}

// dsh UUID_RE at u: 8-4-4-4-12 hex digits.
static int uuid_at(const char *u)
{
    for (int k = 0; k < 36; k++) {
        int c = (unsigned char)u[k];
        if (k == 8 || k == 13 || k == 18 || k == 23) { if (c != '-') return 0; }
        else if (!is_hex(c)) return 0;
    }
    return 1;
}

// A '-' at i that is the first dash of a UUID: the end of it, or 0.
static size_t uuid(scan *sc, size_t i)
{
    if (i < 8 || i + 28 > sc->n || i - 8 < sc->last || !uuid_at(sc->s + i - 8)) return 0;
    if (sc->flags & AS_LF_SESSION) { sc->last = i + 28; return i + 28; }   // scrub --session tokenizes every UUID
    return hit(sc, AS_LK_UUID, i - 8, 36, 0, "a UUID");
}

// An absolute path may start at i: no path byte before it (a JSON escape
// letter does not count), and no placeholder ({{cwd}}/home/x is relative).
static int path_start(const char *s, size_t i)
{
    if (i == 0) return 1;
    int c = (unsigned char)s[i - 1];
    if (c == '}') return 0;
    return !is_pathch(c) || c == '=' || c == ':' || c == '(' || c == '[' || esc_letter(s, i - 1);
}

// A path at i ('/'): home and temp directories. The end of the hit, or 0.
static size_t path(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (!path_start(s, i)) return 0;
    size_t p = i;
    if (lit_at(s, i, n, "/private/tmp/") || lit_at(s, i, n, "/private/var/folders/")) p = i + 8;
    size_t e = run(s, p, n, is_pathch);
    while (e > p + 1 && strchr(".:!?", s[e - 1])) e--;   // the end of a sentence, not of the path
    int kind = -1;
    const char *what = NULL;
    if (lit_at(s, p, e, "/home/") || lit_at(s, p, e, "/Users/")) {
        size_t u = p + (s[p + 1] == 'h' ? 6 : 7);
        if (u >= e || s[u] == '/' || lit_at(s, u, e, "{{")) return 0;   // a placeholder user is fine
        kind = AS_LK_HOME, what = "a home path";
    } else if (lit_at(s, p, e, "/root/")) {
        kind = AS_LK_HOME, what = "a home path";
    } else if (lit_at(s, p, e, "/tmp/") && e > p + 5) {
        // the snapshot spill root: dsh writes spill files there and the
        // comparison tokenizes them as {{spillLocator:<name>}}
        if (lit_at(s, p, e, "/tmp/dsh-acp-snap")) { sc->last = e; return e; }
        if (lit_at(s, p + 5, e, "{{")) return 0;
        kind = AS_LK_TMP, what = "a temp path";
    } else if (lit_at(s, p, e, "/var/folders/")) {
        kind = AS_LK_TMP, what = "a temp path";
    } else {
        return 0;
    }
    return hit(sc, kind, i, e - i, 0, what);
}

// C:\Users\ at i ('C' or 'c'), one or two backslashes or a slash as separators.
static size_t win_home(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    if (!word_start(s, i) || i + 2 >= n || s[i + 1] != ':') return 0;
    size_t a = i + 2, b;
    if (s[a] == '/') b = a + 1;
    else if (s[a] == '\\') b = a + 1 + (a + 1 < n && s[a + 1] == '\\');
    else return 0;
    if (!ci_at(s, b, n, "users") || b + 5 >= n || (s[b + 5] != '\\' && s[b + 5] != '/')) return 0;
    size_t e = b + 5;
    while (e < n && (is_pathch((unsigned char)s[e]) || s[e] == '\\')) e++;
    return hit(sc, AS_LK_HOME, i, e - i, 0, "a home path");
}

// n digits at s[i]: their value (n <= 4).
static int num(const char *s, size_t i, int k)
{
    int v = 0;
    for (int j = 0; j < k; j++) { if (!is_digit((unsigned char)s[i + j])) return -1; v = v * 10 + s[i + j] - '0'; }
    return v;
}

// YYYY-MM-DD[T ]HH:MM at i (a 4-digit run): the end of the timestamp, or 0.
static size_t iso_end(const char *s, size_t i, size_t n)
{
    if (i + 16 > n || s[i + 4] != '-' || s[i + 7] != '-' || (s[i + 10] != 'T' && s[i + 10] != ' ') || s[i + 13] != ':')
        return 0;
    int mo = num(s, i + 5, 2), d = num(s, i + 8, 2), h = num(s, i + 11, 2), mi = num(s, i + 14, 2);
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59) return 0;
    size_t e = i + 16;
    if (e + 2 < n && s[e] == ':' && num(s, e + 1, 2) >= 0) e += 3;
    if (e + 1 < n && s[e] == '.' && is_digit((unsigned char)s[e + 1])) e = run(s, e + 1, n, is_hex) ;
    if (e < n && s[e] == 'Z') e++;
    else if (e + 5 < n + 0 && (s[e] == '+' || s[e] == '-') && num(s, e + 1, 2) >= 0 && s[e + 3] == ':' && num(s, e + 4, 2) >= 0) e += 6;
    return e;
}

// The members whose numbers are time values the comparison zeroes
// (scrub(1) --session): the envelope and header times, hook durations, and
// the event times of event-read results.
static const char *const TIME_KEYS[] = { "time", "time0", "createdAt", "durationMs" };

// (session) 1 when the number at i is the value of a time member: "key": N,
// \"key\": N inside a string, spaces allowed around the colon.
static int time_member(const char *s, size_t i)
{
    size_t k = i;
    if (k > 0 && s[k - 1] == '-') k--;
    while (k > 0 && s[k - 1] == ' ') k--;
    if (k == 0 || s[k - 1] != ':') return 0;
    k--;
    while (k > 0 && s[k - 1] == ' ') k--;
    if (k == 0 || s[k - 1] != '"') return 0;
    size_t ke = --k;
    if (ke > 0 && s[ke - 1] == '\\') ke--;
    for (size_t t = 0; t < 4; t++) {
        size_t L = strlen(TIME_KEYS[t]);
        if (ke >= L + 1 && !memcmp(s + ke - L, TIME_KEYS[t], L)) {
            size_t q = ke - L;   // the opening quote, maybe escaped
            if (s[q - 1] == '"') return 1;
        }
    }
    return 0;
}

// (session) A '[' at i that opens a packed row's "dt" array: the time gaps.
static void dt_array(scan *sc, size_t i)
{
    const char *s = sc->s;
    if (i >= 5 && !memcmp(s + i - 5, "\"dt\":", 5)) {
        const char *e = memchr(s + i, ']', sc->n - i);
        sc->dt_end = e ? (size_t)(e - s) : sc->n;
    }
}

// A digit at i: timestamps and epoch times; returns where to go on.
static size_t digits(scan *sc, size_t i)
{
    const char *s = sc->s;
    size_t n = sc->n;
    size_t e = run(s, i, n, is_digit);
    if (!word_start(s, i) || (i > 0 && s[i - 1] == '.')) return e;
    size_t len = e - i;
    if (len == 4) {
        size_t t = iso_end(s, i, n);
        if (t) return hit(sc, AS_LK_TIME, i, t - i, 0, "an ISO-8601 timestamp");
        return e;
    }
    if ((len != 10 && len != 13) || s[i] != '1' || (e < n && (is_alpha((unsigned char)s[e]) || s[e] == '_'))) return e;
    if ((sc->flags & AS_LF_SESSION) && (i < sc->dt_end || time_member(s, i))) return e;
    return hit(sc, AS_LK_EPOCH, i, len, 0, len == 10 ? "an epoch time in seconds" : "an epoch time in milliseconds");
}

// The bytes a detector is keyed on.
static const char TRIGGERS[] = "0123456789-/BbCcAaXxsg[";

// What the scan below does at a byte: 0 nothing; 1 it may dispatch ('-',
// '/', '['); 2 it may dispatch unless the byte before is a word byte (a
// digit or a trigger letter: in a word a letter is passed over, and a
// digit run is no word start).
static unsigned char byte_class[256];
// A word byte for that rule: a letter or a digit, but none of the letters
// of a JSON escape (\n, \t, ...), which the detectors look at more closely.
static unsigned char word_byte[256];

static void classes_init(void)
{
    for (const char *t = TRIGGERS; *t; t++)
        byte_class[(unsigned char)*t] = *t == '-' || *t == '/' || *t == '[' ? 1 : 2;
    for (int c = 0; c < 256; c++) word_byte[c] = is_alnum(c) && !strchr("nrtbf", c);
}

// The first byte from i on where the scan may do something: every byte
// before it is one the per-byte loop would pass over (no trigger, or a
// trigger letter or digit right after a word byte). Sixteen bytes at a
// time where SSE2 is there.
static size_t next_trigger(const char *s, size_t n, size_t i)
{
    if (i == 0 && n && byte_class[(unsigned char)s[0]]) return 0;
    if (i == 0) i = 1;
#ifdef __SSE2__
    const __m128i zero9 = _mm_set1_epi8(9), c0 = _mm_set1_epi8('0'), sp = _mm_set1_epi8(0x20);
    const __m128i la = _mm_set1_epi8('a'), lb = _mm_set1_epi8('b'), lc = _mm_set1_epi8('c'), lx = _mm_set1_epi8('x');
    const __m128i ls = _mm_set1_epi8('s'), lg = _mm_set1_epi8('g'), dash = _mm_set1_epi8('-');
    const __m128i slash = _mm_set1_epi8('/'), brk = _mm_set1_epi8('['), l25 = _mm_set1_epi8(25);
    const __m128i en = _mm_set1_epi8('n'), er = _mm_set1_epi8('r'), et = _mm_set1_epi8('t'), ef = _mm_set1_epi8('f');
    for (; i + 16 <= n; i += 16) {
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i p = _mm_loadu_si128((const __m128i *)(const void *)(s + i - 1));
        __m128i d = _mm_sub_epi8(c, c0);
        __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(d, zero9), d);
        __m128i lo = _mm_or_si128(c, sp);
        __m128i letter = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(lo, la), _mm_cmpeq_epi8(lo, lb)),
                                      _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(lo, lc), _mm_cmpeq_epi8(lo, lx)),
                                                   _mm_or_si128(_mm_cmpeq_epi8(c, ls), _mm_cmpeq_epi8(c, lg))));
        __m128i always = _mm_or_si128(_mm_cmpeq_epi8(c, dash), _mm_or_si128(_mm_cmpeq_epi8(c, slash), _mm_cmpeq_epi8(c, brk)));
        __m128i pd = _mm_sub_epi8(p, c0);
        __m128i pl = _mm_sub_epi8(_mm_or_si128(p, sp), la);
        __m128i pword = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(pd, zero9), pd), _mm_cmpeq_epi8(_mm_min_epu8(pl, l25), pl));
        __m128i pesc = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(p, en), _mm_cmpeq_epi8(p, er)),
                                    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(p, et), _mm_cmpeq_epi8(p, lb)), _mm_cmpeq_epi8(p, ef)));
        pword = _mm_andnot_si128(pesc, pword);
        __m128i hit = _mm_or_si128(always, _mm_andnot_si128(pword, _mm_or_si128(digit, letter)));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m) return i + (size_t)__builtin_ctz(m);
    }
#endif
    for (; i < n; i++) {
        int k = byte_class[(unsigned char)s[i]];
        if (k == 1 || (k == 2 && !word_byte[(unsigned char)s[i - 1]])) return i;
    }
    return n;
}

#ifdef __x86_64__
// The triggers among the 64 bytes from b (bytes past n count as none): the
// rule of next_trigger, a bit a byte, byte b - 1 (none at b = 0) before the
// first; and of those only the ones whose detector can find something from
// the bytes after: a letter followed by what its test of c1 in as_lint_line
// wants, a digit run of 4 or more (a shorter one is no timestamp nor epoch
// time), a '-' that can open a UUID's second group or "-----BEGIN", a '/'
// followed by the first letter of a path that path() knows. The others
// would each be dispatched to find nothing.
// The lanes of a 64-byte block from a that lie below n.
static inline uint64_t below(size_t n, size_t a)
{
    return a >= n ? 0 : n - a >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << (n - a)) - 1;
}

__attribute__((target("avx512f,avx512bw")))
static uint64_t triggers_avx512(const char *s, size_t n, size_t b)
{
#define EQ(v, ch) _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(ch))
#define DIGIT(v) _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, c0), nine)
#define AT(k) _mm512_maskz_loadu_epi8(below(n, b + (k)), s + b + (k))   // the bytes k on (0 past the end)
    __mmask64 in = below(n, b);
    const __m512i sp = _mm512_set1_epi8(0x20), c0 = _mm512_set1_epi8('0'), la = _mm512_set1_epi8('a');
    const __m512i nine = _mm512_set1_epi8(9), l25 = _mm512_set1_epi8(25);
    __m512i c = AT(0), a = AT(1), a5 = AT(5);
    // the bytes before: lane 0 of the first block has none (masked off, never read)
    __m512i p = _mm512_maskz_loadu_epi8(b ? in : in & ~(__mmask64)1, s + b - 1);
    __m512i lo = _mm512_or_si512(c, sp), alo = _mm512_or_si512(a, sp);
    __mmask64 digit = DIGIT(c) & DIGIT(a) & DIGIT(AT(2)) & DIGIT(AT(3));
    __mmask64 up = EQ(alo, 'u') | EQ(alo, 'p');
    __mmask64 letter = (EQ(lo, 'b') & EQ(alo, 'e')) | (EQ(lo, 'c') & EQ(a, ':'))
                       | (EQ(c, 'a') & up) | (EQ(c, 'A') & (up | EQ(a, 'K') | EQ(a, 'S') | EQ(a, 'I')))
                       | (EQ(lo, 'x') & EQ(a, '-')) | (EQ(c, 'x') & EQ(a, 'o'))
                       | (EQ(c, 's') & EQ(a, 'k')) | (EQ(c, 'g') & (EQ(a, 'i') | EQ(a, 'h')));
    __mmask64 always = (EQ(c, '-') & (EQ(a, '-') | EQ(a5, '-')))
                       | (EQ(c, '/') & (EQ(a, 'h') | EQ(a, 'U') | EQ(a, 'r') | EQ(a, 't') | EQ(a, 'v') | EQ(a, 'p')))
                       | EQ(c, '[');
    __mmask64 pword = DIGIT(p) | _mm512_cmple_epu8_mask(_mm512_sub_epi8(_mm512_or_si512(p, sp), la), l25);
    __mmask64 pesc = EQ(p, 'n') | EQ(p, 'r') | EQ(p, 't') | EQ(p, 'b') | EQ(p, 'f');
    return (always | ((digit | letter) & ~(pword & ~pesc))) & in;
#undef EQ
#undef DIGIT
#undef AT
}

// next_trigger over the masks of whole blocks: one block's mask serves
// every trigger in it.
static size_t next_trigger_avx512(scan *sc, size_t i)
{
    for (;;) {
        if (!sc->tset || i - sc->tb >= 64) {
            sc->tb = i;
            sc->tm = triggers_avx512(sc->s, sc->n, i);
            sc->tset = 1;
        }
        uint64_t m = sc->tm >> (i - sc->tb);
        if (m) return i + (size_t)__builtin_ctzll(m);
        i = sc->tb + 64;
        if (i >= sc->n) return sc->n;
    }
}
#endif

static int avx512 = -1;   // the AVX-512 trigger scan: -1 undecided (as_simd decides)
void as_lint_simd(int on) { avx512 = on ? -1 : 0; }

size_t as_lint_line(const char *s, size_t n, unsigned flags, as_lint_fn fn, void *ctx)
{
    if (!byte_class['/']) classes_init();
    if (avx512 < 0) avx512 = as_simd() == AS_SIMD_AVX512;
    scan sc = { s, n, flags, fn, ctx, 0, 0, 0, 0, 0, 0 };
    for (size_t i = 0; i < n;) {
#ifdef __x86_64__
        i = avx512 ? next_trigger_avx512(&sc, i) : next_trigger(s, n, i);
#else
        i = next_trigger(s, n, i);
#endif
        if (i == n) break;
        // every letter-keyed detector wants a word start: most letters are inside words
        if (is_alpha((unsigned char)s[i]) && i > 0 && is_alnum((unsigned char)s[i - 1]) && !esc_letter(s, i - 1)) { i++; continue; }
        size_t e = 0;
        // The letter-keyed detectors first test the byte after: made here,
        // it spares the call for most word starts (c1 is 0 past the end).
        int c1 = i + 1 < n ? (unsigned char)s[i + 1] : 0, l1 = c1 | 32;
        switch (s[i]) {
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
            e = digits(&sc, i);
            break;
        case '-': e = uuid(&sc, i); if (!e && c1 == '-') e = private_key(&sc, i); break;
        case '/': e = path(&sc, i); break;
        case 'B': case 'b': if (l1 == 'e') e = bearer(&sc, i); break;   // bearer
        case 'C': case 'c': if (c1 == ':') e = win_home(&sc, i); break;   // C:
        case 'A': case 'a': case 'X': case 'x':
            // authorization, api-key, api_key; x-api-key
            if ((s[i] | 32) == 'a' ? l1 == 'u' || l1 == 'p' : c1 == '-') e = auth(&sc, i);
            // AKIA, ASIA, AIza; xox
            if (!e && (s[i] == 'A' ? c1 == 'K' || c1 == 'S' || c1 == 'I' : s[i] == 'x' && c1 == 'o')) e = key(&sc, i);
            break;
        case 's': if (c1 == 'k') e = key(&sc, i); break;   // sk-
        case 'g': if (c1 == 'i' || c1 == 'h') e = key(&sc, i); break;   // github_pat_, gh?_
        case '[': if (flags & AS_LF_SESSION) dt_array(&sc, i); break;
        }
        i = e > i ? e : i + 1;
    }
    return sc.count;
}

// ---------------------------------------------------------------- the allow-list

typedef struct {
    int kind;
    char *glob;
    long line;          // 0 = any line
    char *value;        // NULL = any value
    size_t vn;
    int prefix;         // value ends in '*': a prefix
    long src;           // line in the allow file
    long used;
} allow_entry;

struct as_allow {
    char *path;
    allow_entry *v;
    size_t n;
    unsigned char *shared;   // use marks in memory shared with forked processes (allow_share), or NULL
};

// A field as a message shows it: at most 32 bytes, control bytes as '?'.
static void show(as_buf *b, const char *p, size_t n)
{
    for (size_t i = 0; i < n && i < 32; i++) as_buf_putc(b, (unsigned char)p[i] < ' ' || p[i] == 127 ? '?' : p[i]);
    if (n > 32) as_buf_puts(b, "…");
}

_Noreturn static void bad_entry(as_allow *a, long ln, long col, const char *what, const char *p, size_t n)
{
    as_buf m = {0};
    as_buf_puts(&m, what);
    if (p) { as_buf_puts(&m, " \""); show(&m, p, n); as_buf_putc(&m, '"'); }
    char *path = a->path;
    a->path = NULL;
    as_allow_free(a);
    as_die_at(path, ln, col, "%s; an entry is KIND PLACE [VALUE], KIND one of key, bearer, auth, private-key, home, tmp, time, uuid, epoch", m.p);
}

// One entry line [p, e) (line ln, no LF): parsed into a.
static void allow_entry_parse(as_allow *a, const char *line, size_t len, long ln)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i == len || line[i] == '#') return;
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)line[k] < ' ' && line[k] != '\t') bad_entry(a, ln, (long)k + 1, "a control byte in the entry", NULL, 0);
    size_t ks = i;
    while (i < len && line[i] != ' ' && line[i] != '\t') i++;
    int kind = as_lint_kind_of(line + ks, i - ks);
    if (kind < 0) bad_entry(a, ln, (long)ks + 1, "unknown kind", line + ks, i - ks);
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    size_t ps = i;
    while (i < len && line[i] != ' ' && line[i] != '\t') i++;
    size_t pe = i;
    if (pe == ps) bad_entry(a, ln, (long)ps + 1, "no place (a glob over scenario/file)", NULL, 0);
    long at = 0;
    const char *colon = memrchr(line + ps, ':', pe - ps);
    if (colon) {
        size_t c = (size_t)(colon - line) + 1;
        if (c == pe || pe - c > 9 || c - 1 == ps) bad_entry(a, ln, (long)c, "bad place", line + ps, pe - ps);
        for (size_t k = c; k < pe; k++) {
            if (!is_digit((unsigned char)line[k])) bad_entry(a, ln, (long)c, "bad line number in place", line + ps, pe - ps);
            at = at * 10 + (line[k] - '0');
        }
        if (at == 0) bad_entry(a, ln, (long)c + 1, "bad line number in place", line + ps, pe - ps);
        pe = c - 1;
    }
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    size_t vs = i, ve = len;
    while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t')) ve--;
    a->v = as_xrealloc(a->v, (a->n + 1) * sizeof *a->v);
    allow_entry *en = &a->v[a->n++];
    memset(en, 0, sizeof *en);
    en->kind = kind, en->line = at, en->src = ln;
    en->glob = as_xmalloc(pe - ps + 1);
    memcpy(en->glob, line + ps, pe - ps);
    en->glob[pe - ps] = 0;
    if (ve > vs) {
        en->prefix = line[ve - 1] == '*';
        en->vn = ve - vs - (size_t)en->prefix;
        en->value = as_xmalloc(en->vn + 1);
        memcpy(en->value, line + vs, en->vn);
        en->value[en->vn] = 0;
    }
}

as_allow *as_allow_parse(const char *path, const char *text, size_t n)
{
    as_allow *a = as_xmalloc(sizeof *a);
    a->path = as_xstrdup(path), a->v = NULL, a->n = 0, a->shared = NULL;
    long ln = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n, len = e - i;
        ln++;
        if (len && text[e - 1] == '\r') len--;
        allow_entry_parse(a, text + i, len, ln);
        i = e + 1;
    }
    return a;
}

int as_allow_match(as_allow *a, const char *rel, long ln, int kind, const char *v, size_t vn)
{
    if (!a) return 0;
    for (size_t k = 0; k < a->n; k++) {
        allow_entry *en = &a->v[k];
        if (en->kind != kind || (en->line && en->line != ln)) continue;
        if (en->value && (en->prefix ? vn < en->vn : vn != en->vn)) continue;
        if (en->value && memcmp(en->value, v, en->vn)) continue;
        if (fnmatch(en->glob, rel, 0)) continue;
        if (a->shared) __atomic_store_n(&a->shared[k], 1, __ATOMIC_RELAXED);
        else en->used++;
        return 1;
    }
    return 0;
}

// The use marks from now on in memory a process forked later shares: an
// entry one of them uses is used.
static void allow_share(as_allow *a)
{
    if (!a || !a->n) return;
    void *m = mmap(NULL, a->n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) as_die(AS_TROUBLE, "out of memory");
    a->shared = m;
    for (size_t k = 0; k < a->n; k++) a->shared[k] = a->v[k].used != 0;
}

long as_allow_stale(const as_allow *a)
{
    long stale = 0;
    for (size_t k = 0; a && k < a->n; k++)
        if (!(a->shared ? __atomic_load_n(&a->shared[k], __ATOMIC_RELAXED) : a->v[k].used)) {
            as_warn_at(a->path, a->v[k].src, 0, "warning: stale allow entry: it allows nothing; remove it");
            stale++;
        }
    return stale;
}

void as_allow_free(as_allow *a)
{
    if (!a) return;
    for (size_t k = 0; k < a->n; k++) { free(a->v[k].glob); free(a->v[k].value); }
    if (a->shared) munmap(a->shared, a->n);
    free(a->v);
    free(a->path);
    free(a);
}

// ---------------------------------------------------------------- the tree

// A file's messages, kept until its scenario's end.
typedef struct { char *name; as_buf msgs; } lintmsgs;

struct as_lint {
    char *dir;
    as_allow *allow;
    as_problems *probs;
    // the scenario being linted (as_lint_begin .. as_lint_end)
    const char *scen, *sdir;
    char **authored; size_t nauthored;   // temp paths its drive script names
    char **done; size_t ndone;           // its files linted so far
    lintmsgs *m; size_t nm;              // its files with messages
    as_buf rel, path;
};

// The scan of one file.
typedef struct {
    as_lint *L;
    const char *path, *rel;      // dir/<scenario>/<file>, <scenario>/<file>
    long ln;
    const char *line;
    as_buf *msgs;                // where its messages go (NULL: none yet)
    const char *name;            // its name, for its messages' place
    int collect;                 // input.json: its temp paths are the author's
} lintfile;

static int authored(const as_lint *L, const char *v, size_t n)
{
    for (size_t k = 0; k < L->nauthored; k++)
        if (strlen(L->authored[k]) == n && !memcmp(L->authored[k], v, n)) return 1;
    return 0;
}

// The buffer for the messages of file f: one per file of the scenario.
static as_buf *msgs_of(lintfile *f)
{
    if (f->msgs) return f->msgs;
    as_lint *L = f->L;
    L->m = as_xrealloc(L->m, (L->nm + 1) * sizeof *L->m);
    lintmsgs *m = &L->m[L->nm++];
    m->name = as_xstrdup(f->name);
    m->msgs = (as_buf){0};
    return f->msgs = &m->msgs;
}

// A hit in the file (an as_lint_fn).
static void on_hit(void *ctx, const as_lint_hit *h)
{
    lintfile *f = ctx;
    as_lint *L = f->L;
    const char *v = f->line + h->off;
    if (h->kind == AS_LK_TMP && authored(L, v, h->len)) return;
    if (h->kind == AS_LK_TMP && f->collect) {   // (so never reported in input.json)
        L->authored = as_xrealloc(L->authored, (L->nauthored + 1) * sizeof *L->authored);
        char *c = as_xmalloc(h->len + 1);
        memcpy(c, v, h->len);
        c[h->len] = 0;
        L->authored[L->nauthored++] = c;
        return;
    }
    if (as_allow_match(L->allow, f->rel, f->ln, h->kind, v, h->len)) return;
    if (L->probs->quiet) return;
    L->probs->count++;
    if (as_lint_secret(h->kind)) {
        // never the secret: its fixed prefix and a few bytes (at most a quarter), and its length
        size_t more = (h->len - h->pre) / 4 < 4 ? (h->len - h->pre) / 4 : 4;
        as_msg_at(msgs_of(f), f->path, f->ln, (long)h->off + 1, "%s (%.*s…, %zu bytes) in a fixture; remove it (and revoke it)",
                  h->what, (int)(h->pre + more), v, h->len);
    } else {
        int cut = h->len > 60;
        as_msg_at(msgs_of(f), f->path, f->ln, (long)h->off + 1, "%s (%.*s%s) in a fixture; normalize it, or allow it in .acpsnap-allow",
                  h->what, cut ? 60 : (int)h->len, v, cut ? "…" : "");
    }
}

// 1 when the line is a session header ({"type":"session",...}).
static int header_line(const char *s, size_t n)
{
    static as_json j;
    if (as_json_parse(&j, s, n) < 0 || j.t[0].type != AS_JOBJ) return 0;
    return AS_TOK_IS(&j, as_json_get(&j, 0, "type"), "session");
}

// Line ln of the file; session fixtures (session: 1) know their header and body places.
static void lint_one(lintfile *f, const char *line, size_t len, int session)
{
    f->ln++;
    f->line = line;
    unsigned fl = session ? (f->ln == 1 && header_line(line, len) ? AS_LF_HEADER : AS_LF_SESSION) : 0;
    as_lint_line(line, len, fl, on_hit, f);
}

// Each line of text [0, n): as a line reader gives them, without their LF
// (an unterminated last line too).
static void lint_text(lintfile *f, const char *text, size_t n, int session)
{
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n;
        lint_one(f, text + i, e - i, session);
        i = e + 1;
    }
}

// Reads file name beneath directory dfd (f->path names it), zstd-compressed or not.
static void lint_read(lintfile *f, int dfd, const char *name, int session)
{
    static as_lines rd;   // one window for every file
    if (as_lines_open_reg(&rd, dfd, name, f->path) < 0) as_die_sys("read %s", f->path);
    const char *head, *line;
    size_t got = as_lines_head(&rd, 4, &head), len;
    if (as_zstd_magic(head, got)) {
        as_lines_close(&rd);
        as_in *in = as_in_open(f->path);
        while (as_in_line(in, &line, &len)) lint_one(f, line, len, session);
        as_in_close(in);
        return;
    }
    for (int lf; as_lines_next(&rd, &line, &len, &lf);) lint_one(f, line, len, session);
    as_lines_close(&rd);
}

static int ends(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

int as_lint_wants(const char *f)
{
    if (f[0] == '.') return 0;
    return !strcmp(f, "input.json") || !strcmp(f, "provider.jsonl") || !strcmp(f, "replay.override.json")
           || (!strncmp(f, "stdout.expected.", 16) && ends(f, ".jsonl"))
           || (!strncmp(f, "session.", 8) && ends(f, ".jsonl"))
           || strstr(f, ".expected.") != NULL;
}

as_lint *as_lint_open(const char *dir, as_problems *probs)
{
    as_lint *L = calloc(1, sizeof *L);
    if (!L) as_die(AS_TROUBLE, "out of memory");
    L->dir = as_xstrdup(dir);
    L->probs = probs;
    char *ap = as_path_join(dir, ".acpsnap-allow");
    as_buf b = {0};
    if (as_read_raw(ap, &b) == 0) {
        if (memchr(b.p, 0, b.n)) as_die_at(ap, 0, 0, "a NUL byte; the allow-list is text");
        L->allow = as_allow_parse(ap, b.p, b.n);
        allow_share(L->allow);
    } else if (errno != ENOENT) {
        as_die_sys("read %s", ap);
    }
    as_buf_free(&b);
    free(ap);
    return L;
}

void as_lint_begin(as_lint *L, const char *scenario, const char *sdir)
{
    L->scen = scenario, L->sdir = sdir;
}

// The scan of file name of the scenario (collect: its temp paths are the author's).
static void file_scan(as_lint *L, lintfile *f, const char *name, int collect)
{
    as_buf_reset(&L->path);
    as_buf_puts(&L->path, L->sdir);
    as_buf_putc(&L->path, '/');
    as_buf_puts(&L->path, name);
    as_buf_reset(&L->rel);
    as_buf_puts(&L->rel, L->scen);
    as_buf_putc(&L->rel, '/');
    as_buf_puts(&L->rel, name);
    *f = (lintfile){L, L->path.p, L->rel.p, 0, NULL, NULL, name, collect};
}

// Lints file name (text: its plain bytes, or NULL: read it beneath dfd).
static void lint_file(as_lint *L, int dfd, const char *name, const char *text, size_t n, int collect)
{
    lintfile f;
    int session = !strncmp(name, "session.", 8);
    file_scan(L, &f, name, collect);
    if (text && !as_zstd_magic(text, n)) lint_text(&f, text, n, session);
    else lint_read(&f, dfd, name, session);
    L->done = as_xrealloc(L->done, (L->ndone + 1) * sizeof *L->done);
    L->done[L->ndone++] = as_xstrdup(name);
}

void as_lint_input(as_lint *L, int dfd, const char *text, size_t n) { lint_file(L, dfd, "input.json", text, n, 1); }

void as_lint_file(as_lint *L, int dfd, const char *name, const char *text, size_t n) { lint_file(L, dfd, name, text, n, 0); }

void as_lint_rest(as_lint *L, int dfd, char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int done = !as_lint_wants(names[k]);
        for (size_t i = 0; i < L->ndone && !done; i++) done = !strcmp(L->done[i], names[k]);
        if (!done) as_lint_file(L, dfd, names[k], NULL, 0);
    }
}

static int by_msgs_name(const void *a, const void *b)
{
    return strcmp(((const lintmsgs *)a)->name, ((const lintmsgs *)b)->name);
}

void as_lint_end(as_lint *L, as_buf *out)
{
    if (L->nm > 1) qsort(L->m, L->nm, sizeof *L->m, by_msgs_name);
    for (size_t k = 0; k < L->nm; k++) {
        as_buf_put(out, L->m[k].msgs.p, L->m[k].msgs.n);
        as_buf_free(&L->m[k].msgs);
        free(L->m[k].name);
    }
    for (size_t k = 0; k < L->nauthored; k++) free(L->authored[k]);
    for (size_t k = 0; k < L->ndone; k++) free(L->done[k]);
    L->nm = L->nauthored = L->ndone = 0;
    L->scen = L->sdir = NULL;
}

// 1 when p beneath directory dfd is a regular file, not a symbolic link.
static int plain_file(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

void as_lint_close(as_lint *L, const as_table *t)
{
    const char *why;
    // the configs the rows name, each once
    for (size_t i = 0; i < t->n; i++) {
        const char *c = t->v[i].configPath;
        int seen = 0;
        if (!c || as_name_check(c, &why)) continue;
        for (size_t k = 0; k < i && !seen; k++) seen = t->v[k].configPath && !strcmp(t->v[k].configPath, c);
        char *p = as_path_join(L->dir, c);
        if (!seen && plain_file(AT_FDCWD, p)) {
            as_buf msgs = {0};
            lintfile f = {L, p, c, 0, NULL, &msgs, c, 0};
            lint_read(&f, AT_FDCWD, p, 0);
            if (msgs.n) { fflush(stdout); fflush(stderr); }
            as_write_all(2, msgs.p, msgs.n);
            as_buf_free(&msgs);
        }
        free(p);
    }
    as_allow_stale(L->allow);
    as_allow_free(L->allow);
    free(L->authored);
    free(L->done);
    free(L->m);
    as_buf_free(&L->rel);
    as_buf_free(&L->path);
    free(L->dir);
    free(L);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The fixture files of a scenario directory (listing, an as_dir_each fn).
typedef struct { int dfd; char **names; size_t n; int input; } listing;

static void list_entry(void *ctx, const char *name, unsigned char type)
{
    listing *l = ctx;
    if (!as_lint_wants(name) || (type != DT_REG && type != DT_UNKNOWN)) return;
    if (type == DT_UNKNOWN && !plain_file(l->dfd, name)) return;
    l->names = as_xrealloc(l->names, (l->n + 1) * sizeof *l->names);
    l->names[l->n++] = as_xstrdup(name);
    l->input = l->input || !strcmp(name, "input.json");
}

// The fixtures of scenario name in dir (open as dirfd): its directory is
// opened beneath dirfd (not through a link), its files beneath that.
static void lint_scenario(as_lint *L, int dirfd, const char *name)
{
    int dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return;
    char *sdir = as_path_join(L->dir, name);
    listing l = {dfd, NULL, 0, 0};
    if (as_dir_each(dfd, list_entry, &l) < 0) as_die_sys("read directory %s", sdir);
    if (l.n) qsort(l.names, l.n, sizeof *l.names, by_name);
    as_lint_begin(L, name, sdir);
    if (l.input) as_lint_input(L, dfd, NULL, 0);
    as_lint_rest(L, dfd, l.names, l.n);
    as_buf msgs = {0};
    as_lint_end(L, &msgs);
    if (msgs.n) { fflush(stdout); fflush(stderr); }
    as_write_all(2, msgs.p, msgs.n);   // (as stderr does, it drops what it cannot write)
    as_buf_free(&msgs);
    close(dfd);
    for (size_t k = 0; k < l.n; k++) free(l.names[k]);
    free(l.names);
    free(sdir);
}

void as_lint_tree(const char *dir, const as_table *t, as_problems *probs)
{
    as_lint *L = as_lint_open(dir, probs);
    const char *why;
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);   // no read permission needed
    for (size_t i = 0; dirfd >= 0 && i < t->n; i++)
        if (!as_name_check(t->v[i].name, &why)) lint_scenario(L, dirfd, t->v[i].name);
    if (dirfd >= 0) close(dirfd);
    as_lint_close(L, t);
}
