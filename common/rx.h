// rx.h - a linear-time matcher for POSIX extended regular expressions
// without back-references: the {{fromRequest:…}} patterns of replay
// scripts (acpsnap-replay(5)), which come from untrusted scenario data.
//
// Syntax: POSIX ERE (alternation, groups, * + ? {m} {m,} {m,n} with counts
// up to 255, bracket expressions with [:class:], ^ and $ anywhere, . any
// byte) plus the JavaScript escapes \d \D \w \W \s \S, \b \B (word
// boundaries), \n \t \r \f \v \0, also inside brackets; a backslash before
// any other punctuation is that character. Back-references (\1..\9) and
// other letter escapes are refused when the pattern is compiled. Bytes are
// matched as they are (no locale, no case folding).
//
// Matching: leftmost-longest (POSIX) for the whole match; group 1 follows
// the preferred path to that match (quantifiers greedy, earlier
// alternatives first). The time of a search is linear in the text:
// O(text × program) with a memory of O(program × (text/1024 + 1024)) bits.
//
// Typical use:
//     as_rx *rx;
//     char err[128];
//     if (as_rx_compile(pat, patlen, &rx, err, sizeof err)) fail(err);
//     size_t m[4];
//     as_rx_limits lim = { as_now_ms() + 1000, &stop_flag };
//     switch (as_rx_last(rx, text, len, &lim, m)) { … }
//     as_rx_free(rx);
#ifndef ACPSNAP_RX_H
#define ACPSNAP_RX_H

#include <signal.h>
#include <stddef.h>

typedef struct as_rx as_rx;

// Most instructions a compiled pattern may have (counted repetitions
// multiply): a larger pattern is refused.
#define AS_RX_MAX_PROGRAM 4096

// Compiles pattern p[0..n): 0 and *out (free with as_rx_free), or -1 and a
// message in err (lowercase, no final period).
int as_rx_compile(const char *p, size_t n, as_rx **out, char *err, size_t errn);
void as_rx_free(as_rx *rx);

// What may cut a search short: a deadline on the as_now_ms clock (0: none)
// and a flag that stops it when it becomes non-zero (NULL: none). Both are
// looked at every few thousand steps.
typedef struct {
    long deadline_ms;
    const volatile sig_atomic_t *stop;
} as_rx_limits;

enum { AS_RX_NOMATCH = 0, AS_RX_MATCH = 1, AS_RX_TIMEOUT = -1, AS_RX_STOPPED = -2 };
#define AS_RX_NONE ((size_t)-1)

// The leftmost-longest match starting at or after `from` in t[0..n) (the
// whole text is the context of ^, $ and \b): AS_RX_MATCH and m[0..1] its
// span, m[2..3] group 1's or AS_RX_NONE when it took no part; AS_RX_NOMATCH;
// or AS_RX_TIMEOUT / AS_RX_STOPPED. lim may be NULL.
int as_rx_search(const as_rx *rx, const char *t, size_t n, size_t from,
                 const as_rx_limits *lim, size_t m[4]);
// The last match of the iteration that finds a match, then the next one
// from its end (one past it when empty): same results as as_rx_search for
// that match. Linear in n whatever the number of matches.
int as_rx_last(const as_rx *rx, const char *t, size_t n, const as_rx_limits *lim, size_t m[4]);

#endif
