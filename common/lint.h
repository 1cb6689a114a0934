// lint.h - the secret and volatile lint of committed fixtures
// (fixture-guard(1), LINT): a scanner of lines for credentials and for
// volatile values (home and temp paths, timestamps, UUIDs, epoch times) that
// escaped normalization, the allow-list of a snapshots tree
// (<snapshots>/.acpsnap-allow), and the walk over a tree's fixture files.
//
// To be included after acpsnap.h.
#ifndef ACPSNAP_LINT_H
#define ACPSNAP_LINT_H

#include "acpsnap.h"
#include "table.h"

// What a hit is. Its names ("key", "bearer", ...) are those of the allow-list.
typedef enum {
    AS_LK_KEY,        // a well-known API key shape (sk-, AKIA, ghp_, xoxb-, AIza, ...)
    AS_LK_BEARER,     // "Bearer <token>"
    AS_LK_AUTH,       // the value of an Authorization / x-api-key / api-key / api_key member or header
    AS_LK_PRIVKEY,    // -----BEGIN ... PRIVATE KEY-----
    AS_LK_HOME,       // /home/<user>/, /Users/<user>/, /root/, C:\Users\ (escaped)
    AS_LK_TMP,        // /tmp/<x>, /var/folders/ (escaped)
    AS_LK_TIME,       // an ISO-8601 timestamp
    AS_LK_UUID,       // 8-4-4-4-12 hex digits
    AS_LK_EPOCH,      // a 10- or 13-digit epoch time
    AS_LK_N
} as_lint_kind;

// 1 for the credential kinds (never exempted by a format place).
static inline int as_lint_secret(int kind) { return kind <= AS_LK_PRIVKEY; }
int as_lint_kind_of(const char *name, size_t n);   // the kind named so, or -1

// One hit in a line: [off, off + len) is the offending token, what a static
// description ("an API key"), without the value.
typedef struct {
    int kind;
    size_t off, len;
    size_t pre;         // bytes of its fixed prefix (sk-, Bearer and its spaces), shown in messages
    const char *what;
} as_lint_hit;

// Scanning flags: where the line sits in the format.
enum {
    AS_LF_HEADER = 1,    // a session header line: its own fields are format places (no volatile kind)
    AS_LF_SESSION = 2,   // a session fixture's body: UUIDs and the time members are format places
};

// Scans one line (its bytes without LF) in one linear pass and calls
// fn(ctx, hit) for each hit, in column order. Returns the number of hits.
typedef void (*as_lint_fn)(void *ctx, const as_lint_hit *hit);
size_t as_lint_line(const char *s, size_t n, unsigned flags, as_lint_fn fn, void *ctx);
// The lint finds its trigger bytes a 64-byte block at a time where the CPU
// runs AVX-512 (on, the default), or byte by byte (off): for tests.
void as_lint_simd(int on);

// ---------------------------------------------------------------- the allow-list
// <snapshots>/.acpsnap-allow, one entry a line (fixture-guard(1), LINT):
//   KIND  PLACE  [VALUE]
// KIND one of the kind names; PLACE a glob (fnmatch(3), no flags) over
// "<scenario>/<file>", optionally ":<line>"; VALUE the rest of the line: the
// hit's exact bytes, or a prefix of them when it ends in '*'. Fields are
// separated by spaces or tabs; '#' at the start of a line and blank lines
// are ignored.
typedef struct as_allow as_allow;
// Parses text (n bytes, from path). Dies (exit 2, path:line[:col]) on a
// malformed entry. Caller frees with as_allow_free.
as_allow *as_allow_parse(const char *path, const char *text, size_t n);
// 1 when an entry allows hit h of kind at rel ("<scenario>/<file>"), line ln,
// value v (vn bytes); the entry is marked used.
int as_allow_match(as_allow *a, const char *rel, long ln, int kind, const char *v, size_t vn);
// Warns about each entry that allowed nothing ("stale allow entry"); returns their count.
long as_allow_stale(const as_allow *a);
void as_allow_free(as_allow *a);

// ---------------------------------------------------------------- the tree
// The lint of a snapshots tree dir: every committed fixture file of every
// row (the files fixture-guard(1) LINT names), with dir's allow-list when
// it has one; each hit not allowed is a problem counted in probs, reported
// as "dir/<scenario>/<file>:line:col: <what> in a fixture". Dies (exit 2)
// on an unreadable file or a malformed allow-list.
void as_lint_tree(const char *dir, const as_table *t, as_problems *probs);

// The same lint, scenario by scenario, for a caller that reads the files
// anyway and hands over their bytes. as_lint_open reads the allow-list;
// its use marks are shared with processes forked after it. For each
// scenario (name, its directory sdir, open as dfd): as_lint_begin; the drive
// script before any other file (as_lint_input, when it has input.json: the
// temp paths it names are the author's, in every file of the scenario);
// each other fixture file once (as_lint_file: text, n its plain bytes, or
// text NULL to read it beneath dfd, a regular file; as_lint_rest for the
// files of a list not linted yet); then
// as_lint_end appends the scenario's messages to out, file by file in name
// order, whatever order the files came in. as_lint_close lints the configs
// the rows of t name, warns about stale allow entries (stderr) and frees.
typedef struct as_lint as_lint;
as_lint *as_lint_open(const char *dir, as_problems *probs);
int as_lint_wants(const char *name);   // 1: a file name the lint reads
void as_lint_begin(as_lint *L, const char *scenario, const char *sdir);
void as_lint_input(as_lint *L, int dfd, const char *text, size_t n);
void as_lint_file(as_lint *L, int dfd, const char *name, const char *text, size_t n);
void as_lint_rest(as_lint *L, int dfd, char *const *names, size_t n);
void as_lint_end(as_lint *L, as_buf *out);
void as_lint_close(as_lint *L, const as_table *t);

#endif
