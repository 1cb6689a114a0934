// Unit test: the linear-time ERE matcher (rx.h) behind {{fromRequest:…}}:
// syntax and refusals, leftmost-longest matches, group 1, the last match of
// the iteration, assertions, limits, and that the known quadratic and
// exponential shapes stay fast.
#include "acpsnap.h"
#include "rx.h"

#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

// "so,eo" of the first match from `from` (group 1 as "so,eo/g1so,g1eo"),
// "none", or the error message.
static const char *first(const char *pat, const char *text, size_t from)
{
    static char out[160];
    as_rx *rx;
    if (as_rx_compile(pat, strlen(pat), &rx, out, sizeof out)) return out;
    size_t m[4];
    int rc = as_rx_search(rx, text, strlen(text), from, NULL, m);
    as_rx_free(rx);
    if (rc != AS_RX_MATCH) snprintf(out, sizeof out, rc == AS_RX_NOMATCH ? "none" : "error %d", rc);
    else if (m[2] == AS_RX_NONE) snprintf(out, sizeof out, "%zu,%zu", m[0], m[1]);
    else snprintf(out, sizeof out, "%zu,%zu/%zu,%zu", m[0], m[1], m[2], m[3]);
    return out;
}

// The text the last match substitutes (group 1, else the whole match), or "none".
static const char *last(const char *pat, const char *text)
{
    static char out[160];
    as_rx *rx;
    if (as_rx_compile(pat, strlen(pat), &rx, out, sizeof out)) return out;
    size_t m[4];
    int rc = as_rx_last(rx, text, strlen(text), NULL, m);
    as_rx_free(rx);
    if (rc != AS_RX_MATCH) return "none";
    int g = m[2] != AS_RX_NONE;
    snprintf(out, sizeof out, "%.*s", (int)(m[g ? 3 : 1] - m[g ? 2 : 0]), text + m[g ? 2 : 0]);
    return out;
}

static void test_syntax(void)
{
    static const struct { const char *pat, *msg; } bad[] = {
        {"(a", "unmatched ("}, {"a)", "unmatched )"}, {"[ab", "unmatched ["},
        {"*a", "nothing to repeat before *"}, {"a|+", "nothing to repeat before +"},
        {"^*", "nothing to repeat before *"}, {"a***", "too many quantifiers in a row before *"},
        {"a{2,1}", "invalid interval {2,1}"}, {"a{1,x}", "invalid interval at offset 1"},
        {"a{256}", "repetition count over 255"}, {"[z-a]", "invalid range in a bracket expression"},
        {"[[:nope:]]", "invalid character class [:nope:]"}, {"(.*)\\1", "back-references (\\1) are not supported"},
        {"[\\9]", "back-references (\\9) are not supported"}, {"\\x41", "unsupported escape \\x"},
        {"a\\", "trailing backslash"}, {"(a{255}){255}", "pattern is too large (over 4096 instructions)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *got = first(bad[i].pat, "", 0);
        if (strcmp(got, bad[i].msg)) fprintf(stderr, "pattern %s: got \"%s\"\n", bad[i].pat, got);
        CHECK(!strcmp(got, bad[i].msg));
    }
    char deep[256] = "";
    for (int i = 0; i < 101; i++) strcat(deep, "(");
    CHECK(!strcmp(first(deep, "", 0), "pattern nests too deeply"));
    // braces that are no interval are literal
    CHECK(!strcmp(first("\"a\":{", "x \"a\":{1}", 0), "2,7"));
    CHECK(!strcmp(first("a{,2}", "a{,2}", 0), "0,5"));
}

static void test_matching(void)
{
    CHECK(!strcmp(first("a|ab", "xab", 0), "1,3"));             // leftmost-longest, not first alternative
    CHECK(!strcmp(first("(a|ab)(c|bcd)", "abcd", 0), "0,4/0,1"));   // group 1 on the preferred path
    CHECK(!strcmp(first("(a*)*b", "aab", 0), "0,3/0,2"));
    CHECK(!strcmp(first("x*", "aaa", 1), "1,1"));
    CHECK(!strcmp(first("b", "abab", 2), "3,4"));
    CHECK(!strcmp(first("^a", "aa", 1), "none"));                // ^ is the start of the text only
    CHECK(!strcmp(first("a$", "aa", 0), "1,2"));
    CHECK(!strcmp(first("\\bis\\b", "this is", 0), "5,7"));
    CHECK(!strcmp(first("\\Bis", "this is", 0), "2,4"));
    CHECK(!strcmp(first("\\bb", "ab b", 1), "3,4"));             // the context before `from` counts
    CHECK(!strcmp(first("[[:digit:]]+-\\d+", "x 12-345 y", 0), "2,8"));
    CHECK(!strcmp(first("[^\\s]+", "  ab c", 0), "2,4"));
    CHECK(!strcmp(first("[\\]a-]+", "x]-a]", 0), "1,5"));
    CHECK(!strcmp(first("[]x]", "a]", 0), "1,2"));
    CHECK(!strcmp(first("\\n\\t\\.", "a\n\t.", 0), "1,4"));
    CHECK(!strcmp(first("a{2,3}", "aaaa", 0), "0,3"));
    CHECK(!strcmp(first("(ab){2}", "ababab", 0), "0,4/2,4"));
    CHECK(!strcmp(first("", "ab", 1), "1,1"));
    CHECK(!strcmp(first("(x)?y", "y", 0), "0,1"));             // group 1 took no part
}

static void test_last(void)
{
    CHECK(!strcmp(last("goal (g-[0-9a-f]{4})", "goal g-1a2b, then goal g-9f3c"), "g-9f3c"));
    CHECK(!strcmp(last("[0-9]+", "12345"), "12345"));          // the iteration, not the rightmost start
    CHECK(!strcmp(last("a*", "aab"), ""));                      // an empty match at the end is last
    CHECK(!strcmp(last("id=([0-9]+)", "id=1 id=22 id="), "22"));
    CHECK(!strcmp(last("zzz", "abc"), "none"));
    CHECK(!strcmp(last("a.*z|a", "a a z a"), "a"));
    CHECK(!strcmp(last("a.*z|a", "a a z"), "a a z"));
}

static long time_last(const char *pat, const char *fill, size_t n, int *rc)
{
    char *t = as_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) t[i] = fill[i % strlen(fill)];
    t[n] = 0;
    as_rx *rx;
    char err[128];
    if (as_rx_compile(pat, strlen(pat), &rx, err, sizeof err)) { fprintf(stderr, "%s: %s\n", pat, err); exit(1); }
    size_t m[4];
    long t0 = as_now_ms();
    as_rx_limits lim = { t0 + 10000, NULL };
    *rc = as_rx_last(rx, t, n, &lim, m);
    long dt = as_now_ms() - t0;
    as_rx_free(rx);
    free(t);
    return dt;
}

// The shapes that are quadratic or exponential in backtracking or
// restart-per-position matchers: each in well under a second (generous
// bounds: the suite may run on a loaded machine).
static void test_speed(void)
{
    static const struct { const char *pat, *fill; size_t n; int want; } cases[] = {
        {"a.*z|a", "a", 40000, AS_RX_MATCH}, {"(.*)(.*)(.*)z", "a", 200000, AS_RX_NOMATCH},
        {"(a|aa)*b", "a", 200000, AS_RX_NOMATCH}, {"(x+x+)+y", "x", 200000, AS_RX_NOMATCH},
        {".{0,255}z", "a", 100000, AS_RX_NOMATCH}, {"(.*a){20}", "a", 20000, AS_RX_MATCH},
        {"([a-z]+)", "ab cd ", 400000, AS_RX_MATCH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc;
        long ms = time_last(cases[i].pat, cases[i].fill, cases[i].n, &rc);
        if (rc != cases[i].want || ms > 2000) fprintf(stderr, "%s on %zu bytes: rc %d in %ld ms\n", cases[i].pat, cases[i].n, rc, ms);
        CHECK(rc == cases[i].want && ms <= 2000);
    }
}

static void test_limits(void)
{
    size_t n = 1 << 20;
    char *t = as_xmalloc(n);
    memset(t, 'a', n);
    as_rx *rx;
    char err[128];
    CHECK(as_rx_compile("(.{0,200}){1,10}z", 17, &rx, err, sizeof err) == 0);
    size_t m[4];
    as_rx_limits past = { as_now_ms() - 1, NULL };
    CHECK(as_rx_last(rx, t, n, &past, m) == AS_RX_TIMEOUT);
    volatile sig_atomic_t stop = 1;
    as_rx_limits stopped = { 0, &stop };
    CHECK(as_rx_last(rx, t, n, &stopped, m) == AS_RX_STOPPED);
    as_rx_free(rx);
    free(t);
}

int main(int argc, char **argv)
{
    as_setprog(argv[0]);
    (void)argc;
    test_syntax();
    test_matching();
    test_last();
    test_speed();
    test_limits();
    if (fails) { fprintf(stderr, "rx: %d check(s) failed\n", fails); return 1; }
    return 0;
}
