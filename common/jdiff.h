// jdiff.h - a JSON-aware line diff of two JSONL texts (acpsnap-jdiff(1)).
//
// Lines are aligned by a Myers diff over line identities (equal bytes, equal
// identity), bounded: past AS_JDIFF_DMAX inserted plus removed lines the
// middle of the files is paired by position instead. Each differing region
// then pairs its removed and inserted lines by their labels (method and
// sessionUpdate, type, response id); a pair is reported member by member,
// the others as whole added or removed lines. Values are printed from their
// source bytes, never re-serialized.
//
// Typical use:
//     as_jlines a = {0}, b = {0};
//     as_jlines_read(&a, "old.jsonl");          // dies (exit 2) on bad JSON
//     as_jlines_read(&b, "new.jsonl");
//     as_jdiff_opt o = {.max = 20, .emit = print, .ctx = out};
//     long n = as_jdiff(&a, &b, &o);            // differing lines reported
//     as_jlines_free(&a); as_jlines_free(&b);
#ifndef ACPSNAP_JDIFF_H
#define ACPSNAP_JDIFF_H

#include "acpsnap.h"

// Edit distance (lines inserted plus removed) the line alignment searches
// up to; beyond it the unmatched middle is paired by position.
#define AS_JDIFF_DMAX 1024

// A JSONL text held whole: line i is text.p + off[i], len[i] bytes (no LF).
typedef struct {
    as_buf text;
    size_t *off, *len, n, cap;
} as_jlines;
// Reads path ("-" = stdin; zstd by magic) line by line into f, each line
// checked as one JSON value. Dies (exit 2) "file:line:col: invalid JSON: …".
void as_jlines_read(as_jlines *f, const char *path);
// Appends one line to f after checking it with j: 0, or -1 with j->err and
// j->errpos set (nothing appended).
int as_jlines_add(as_jlines *f, as_json *j, const char *s, size_t n);
void as_jlines_free(as_jlines *f);

typedef struct {
    int max;      // differences reported per line pair, then "… and K more" (0: no limit)
    int color;    // 1: old values red, new values green (ANSI SGR)
    int quiet;    // 1: report nothing, only count
    int unified;  // 1: then the unified diff, with `context` lines of context
    int context;
    const char *name_a, *name_b;   // its "---" and "+++" names
    // Receives each report line (no LF).
    void (*emit)(void *ctx, const char *line, size_t n);
    void *ctx;
} as_jdiff_opt;
// Compares a (old) with b (new) and reports through o->emit (then, with
// o->unified, the unified diff of the same alignment). Returns the
// number of lines of either file not matched by an equal line (0: same).
long as_jdiff(const as_jlines *a, const as_jlines *b, const as_jdiff_opt *o);

#endif
