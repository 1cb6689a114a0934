// acpsnap.h - the one public header of the acpsnap shared library (common/).
//
// Topics, one file each in common/:
//   err.c      program name, messages, problem tallies, exit codes, checked allocation
//   path.c     file names: joining, existence and kind tests, directory arguments
//   buf.c      growable byte buffers
//   in.c       line reader over files and stdin, zstd detected by magic
//   out.c      checked buffered writer, plain or zstd frames; atomic file writes
//   json.c     strict RFC 8259 scanner producing byte-span tokens
//   simd.c     its stage 1: byte classes 64 at a time (AVX-512BW, AVX2, SSE2, C)
//   jstr.c     string decoding and JSON.stringify-exact string writing
//   jedit.c    splicing object members (remove keys, insert members)
//   session.c  the session log codec: decode (rows → events), pack, project
//   loop.c     the shared record loop over file arguments
//
// Conventions: functions prefixed as_; a function that can fail on input
// either returns a status or dies with exit 2 (documented per function);
// "dies" means: message on stderr in the house format, exit(AS_TROUBLE).
#ifndef ACPSNAP_H
#define ACPSNAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>

#define ACPSNAP_VERSION "0.1.0"

// Exit statuses, like diff/cmp.
enum { AS_OK = 0, AS_NO = 1, AS_TROUBLE = 2 };

// ---------------------------------------------------------------- err.c
extern const char *as_prog;            // program name for messages
extern unsigned long as_err_count;     // messages written to stderr so far (as_warn*, as_problem)
void as_setprog(const char *argv0);    // sets as_prog to basename(argv0)
// "prog: message\n" on stderr, then exit(code).
_Noreturn void as_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// "prog: file:line[:col]: message\n" then exit(AS_TROUBLE); line/col 0 = omitted.
_Noreturn void as_die_at(const char *file, long line, long col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Like as_die_at but returns (for tools that report every problem).
void as_warn_at(const char *file, long line, long col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void as_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  // "prog: message"
// "prog: unable to <what>: strerror(errno)" then exit(AS_TROUBLE).
_Noreturn void as_die_sys(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// When set, called instead of exit() by the as_die* family (fuzz targets
// longjmp out of it); it must not return.
extern void (*as_die_hook)(int code);
// For a caller that caught a fatal error through the hook and carries on
// without freeing what the dead reader held: LeakSanitizer skips it at exit.
void as_die_abandoned(void);
void *as_xmalloc(size_t n);             // never NULL; dies on exhaustion
void *as_xrealloc(void *p, size_t n);
char *as_xstrdup(const char *s);
// Standard --help / --version handling: prints usage to stdout, exit 0.
_Noreturn void as_usage_exit(const char *usage, int code);  // code 0: stdout; else stderr "usage: ..." exit code
_Noreturn void as_version_exit(void);
// Milliseconds on CLOCK_MONOTONIC (clock.c): never decreases, unaffected by
// changes of the wall clock, cannot fail; its zero is arbitrary, so the value
// only means something as a difference (deadlines, intervals, pacing).
long as_now_ms(void);
// A problem tally, for tools that report every problem and go on (guards).
typedef struct {
    long count;      // problems reported so far
    int quiet;       // set: problems are neither printed nor counted
} as_problems;
// Reports one problem, "prog: file[:line]: message" (line 0 = omitted), and counts it.
void as_problem(as_problems *p, const char *file, long line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// as_problem as an as_report_fn (table.h): ctx is the as_problems.
void as_problem_report(void *ctx, const char *file, long line, const char *msg);

// ---------------------------------------------------------------- path.c
char *as_path_join(const char *dir, const char *name);   // "dir/name", caller frees
char *as_path_join3(const char *dir, const char *name, const char *file);   // "dir/name/file", caller frees
// 1 when path leads to a directory (stat: symbolic links followed).
int as_is_dir(const char *path);
// 1 when path leads to a regular file (stat: symbolic links followed).
int as_is_file(const char *path);
// A directory argument without its trailing slashes (caller frees). Dies
// "unable to open directory …" when it cannot be reached, "not a directory"
// when it is something else.
char *as_dir_arg(const char *arg);

// ---------------------------------------------------------------- buf.c
typedef struct { char *p; size_t n, cap; } as_buf;   // p is NUL-terminated when non-NULL
void as_buf_grow(as_buf *b, size_t extra);            // ensure room for extra bytes (+NUL)
static inline void as_buf_put(as_buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) as_buf_grow(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static inline void as_buf_putc(as_buf *b, char c)
{
    if (b->n + 2 > b->cap) as_buf_grow(b, 1);
    b->p[b->n++] = c;
    b->p[b->n] = 0;
}
void as_buf_puts(as_buf *b, const char *s);
void as_buf_printf(as_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void as_buf_vprintf(as_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
// Appends what as_warn_at prints ("prog: file:line[:col]: message\n") to b,
// for a message that is printed later, or elsewhere.
void as_msg_at(as_buf *b, const char *file, long line, long col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void as_buf_puti(as_buf *b, int64_t v);               // decimal integer
#define AS_FMT_I_MAX 20                                 // the longest: -9223372036854775808
size_t as_fmt_i(char *d, int64_t v);                  // v in decimal at d (no NUL); its length
static inline void as_buf_reset(as_buf *b) { b->n = 0; if (b->p) b->p[0] = 0; }
void as_buf_free(as_buf *b);

// ---------------------------------------------------------------- in.c
// A line reader. Lines are returned without their LF; a CR before the LF is
// dropped too (a CRLF line end); any other CR is trouble, so a line never
// holds a CR. A final line without LF is returned. zstd input (a
// concatenation of frames, skippable frames included, even first) is
// detected by its magic and decoded as a stream.
typedef struct as_in as_in;
// 1 when the n bytes at p start with a zstd frame or a skippable frame.
int as_zstd_magic(const void *p, size_t n);
// Opens path ("-" or NULL = stdin). Dies (exit 2) when it cannot be opened.
as_in *as_in_open(const char *path);
// A reader of text already in memory (n bytes, not copied: it must outlive
// the reader), taken as plain text however it starts; name is its file's.
as_in *as_in_open_text(const char *name, const char *text, size_t n);
// Next line: 1 and *line/*len set (valid until the next call), 0 at EOF.
// Dies on read errors, a corrupt or truncated zstd frame (with byte offset),
// a NUL byte ("file:line:col: not a text or zstd file (NUL byte at offset
// N)", or "NUL byte in the decompressed text") and a CR inside a line
// ("file:line:col: carriage return inside a line ...").
int as_in_line(as_in *in, const char **line, size_t *len);
long as_in_lineno(const as_in *in);     // number of the line last returned (1-based)
const char *as_in_name(const as_in *in);  // path as given, "<stdin>" for stdin
void as_in_close(as_in *in);
// Reads a whole (small) file, zstd or not, into b. Dies on error (a NUL
// byte too, as as_in_line; CRs are kept).
void as_read_file(const char *path, as_buf *b);
// Reads the bytes of path as they are (no zstd decoding) into b, replacing
// its content: 0, or -1 (errno set) when path cannot be opened. Dies on a
// read error.
int as_read_raw(const char *path, as_buf *b);
// The same for name beneath directory fd dfd (path: for messages). reg 1:
// the caller knows it is a regular file, and a short read is its end (see
// as_lines_open_reg, fsat.h).
int as_read_raw_at(int dfd, const char *name, const char *path, as_buf *b, int reg);

// ---------------------------------------------------------------- out.c
// Output stops at a line boundary, on trouble too: a fatal exit (as_die*,
// exit) with a stdout writer open writes its complete lines and, with zstd,
// ends the open frame, so every frame written is complete (and none is empty);
// an atomic writer's temp file is removed. Not thread-safe.
typedef struct as_out as_out;
// Writes [p, p + n) to fd, whole (EINTR and short writes resumed): 0, or -1
// with errno. For messages kept in memory and printed later.
int as_write_all(int fd, const void *p, size_t n);
// A writer on fd 1. zstd: write zstd frames with checksums; refuses a terminal.
as_out *as_out_stdout(int zstd);
// A writer to path, atomically: writes path's sibling temp file (created
// "<path>.tmp.XXXXXX", mode 0666 less the umask, like any new file);
// as_out_commit fsyncs and renames over path.
as_out *as_out_atomic(const char *path, int zstd);
void as_out_write(as_out *o, const void *p, size_t n);
void as_out_line(as_out *o, const void *p, size_t n);   // p then LF, never split
// a, b and c then LF, never split
void as_out_line3(as_out *o, const void *a, size_t an, const void *b, size_t bn, const void *c, size_t cn);
void as_out_frame(as_out *o);     // zstd: end the current frame (no-op when plain)
void as_out_close(as_out *o);     // stdout writer: flush, end frame, check close; dies on error
void as_out_commit(as_out *o);    // atomic writer: finish and rename; dies on error

// ---------------------------------------------------------------- json.c
typedef enum { AS_JNULL, AS_JFALSE, AS_JTRUE, AS_JNUM, AS_JSTR, AS_JARR, AS_JOBJ } as_jtype;
// A token: one JSON value, or one object key (a string token). Byte span
// [start, end) in the source; strings include their quotes. Containers list
// their children right after themselves: objects as key, value, key, value…
// `next` is the index of the first token after this token's subtree; `count`
// is the number of members (objects) or elements (arrays).
typedef struct {
    uint8_t type;
    uint8_t esc;        // strings: 1 when the body holds a backslash escape
    uint32_t start, end;
    uint32_t next;
    uint32_t count;
} as_tok;
typedef struct {
    as_tok *t; size_t n, cap;   // tokens; t[0] is the root value
    const char *s; size_t len;  // the source bytes last parsed
    size_t errpos;              // byte offset of the error
    const char *err;            // static message, NULL on success
    int maxdepth;               // 0 = default (10000)
    uint32_t *ix; size_t ixcap; // the structural index of the text (simd.h)
    int compact;                // 1: the parse went through stage 1, so the text
                                // is compact (no whitespace outside strings)
} as_json;
// Parses exactly one JSON value (surrounding whitespace allowed) strictly per
// RFC 8259: valid UTF-8, valid escapes (lone surrogate escapes accepted),
// numbers without leading zeros / '+' / NaN / Infinity, no raw control chars.
// Returns 0, or -1 with j->err and j->errpos set. The token array is reused.
// Two stages (simd.c, then the grammar over its index) for a compact line;
// anything else, and every error, through the byte-at-a-time scanner.
int as_json_parse(as_json *j, const char *s, size_t len);
// As as_json_parse (the same verdict and message), for a caller that reads
// only the root's members: a container below the root may stand as one
// token, its span and count without its children (its next is then its
// index + 1). The tokens may also be the full ones.
int as_json_parse_shallow(as_json *j, const char *s, size_t len);
// The byte-at-a-time scanner alone: same contract, same tokens (tests and
// fuzz targets compare the two).
int as_json_parse_bytes(as_json *j, const char *s, size_t len);
void as_json_free(as_json *j);
// 1-based column (in bytes) of j->errpos.
static inline long as_json_errcol(const as_json *j) { return (long)j->errpos + 1; }
// Dies with "file:line:col: invalid JSON: <err>".
_Noreturn void as_json_die(const as_json *j, const char *file, long line);
// Object lookup: index of the value token of `key` in object token `obj`, or -1.
int as_json_get(const as_json *j, int obj, const char *key);
// Key/value iteration: first member's key token index of obj, or -1; then
// as_json_nextkey(j, k) → next key index or -1. The value is k + 1.
int as_json_firstkey(const as_json *j, int obj);
int as_json_nextkey(const as_json *j, int key);
// Array iteration: first element index or -1; next element index or -1.
int as_json_first(const as_json *j, int arr);
int as_json_nextel(const as_json *j, int el);
// 1 when string token `tok` equals the C string lit (escapes decoded).
int as_json_streq(const as_json *j, int tok, const char *lit);
// A key name with its length, for as_json_pick (AS_KEY("type")).
typedef struct { const char *s; size_t n; } as_key;
#define AS_KEY(lit) {lit, sizeof(lit) - 1}
// One pass over object obj: idx[i] = value token of keys[i] or -1 (first
// occurrence). Returns the member count, or -1 when obj is not an object.
int as_json_pick(const as_json *j, int obj, const as_key *keys, int n, int *idx);
// 1 when key token k spells key (escapes decoded; a key without one by its bytes).
int as_json_key_is(const as_json *j, int k, const as_key *key);
// 1 when obj is an object holding exactly the n keys, each once (an extra or
// a repeated key fails); idx as for as_json_pick, or NULL when n <= 16.
int as_json_exact(const as_json *j, int obj, const as_key *keys, int n, int *idx);
#define AS_NKEYS(keys) ((int)(sizeof(keys) / sizeof *(keys)))
// Appends the bytes of a valid JSON text without its insignificant whitespace.
void as_json_compact(const char *s, size_t n, as_buf *out);
// 1 when token tok is a string equal to the literal (a compile-time string);
// 0 for tok -1 (an absent member).
#define AS_TOK_IS(j, tok, lit) as_json_tok_is((j), (tok), lit, sizeof(lit) - 1)
static inline int as_json_tok_is(const as_json *j, int tok, const char *lit, size_t n)
{
    if (tok < 0) return 0;
    const as_tok *t = &j->t[tok];
    if (t->type != AS_JSTR) return 0;
    if (t->esc) return as_json_streq(j, tok, lit);
    if (t->end - t->start - 2 != n) return 0;
    const char *s = j->s + t->start + 1;
    for (size_t i = 0; i < n; i++)   // short literals: a loop beats a call to memcmp
        if (s[i] != lit[i]) return 0;
    return 1;
}
// Plain integer (-?[0-9]+, no fraction/exponent) within ±(2^53−1): 1 and *out.
int as_json_int(const as_json *j, int tok, int64_t *out);
// The JSON string whose quote is s[p] of s[0, len), validated as
// as_json_parse would: the offset just past its closing quote, or 0 when it
// is not one (no message: a caller falls back to as_json_parse for that).
// *esc becomes 1 when it holds a backslash escape.
size_t as_jstr_end(const char *s, size_t len, size_t p, int *esc);
// Byte span helpers.
static inline const char *as_tok_p(const as_json *j, int tok) { return j->s + j->t[tok].start; }
static inline size_t as_tok_len(const as_json *j, int tok) { return j->t[tok].end - j->t[tok].start; }

// ---------------------------------------------------------------- jstr.c
// Appends the decoded UTF-8 of string token tok (quotes removed, escapes
// decoded; a lone surrogate escape becomes its 3-byte WTF-8 form).
void as_json_str(const as_json *j, int tok, as_buf *out);
// Decodes a raw JSON string body (between quotes, already validated).
void as_jstr_decode(const char *s, size_t n, as_buf *out);
// Appends s (UTF-8, WTF-8 lone surrogates allowed) as a JSON string literal
// with quotes, escaped exactly like JavaScript's JSON.stringify.
void as_jstr_write(as_buf *b, const char *s, size_t n);

// ---------------------------------------------------------------- jedit.c
// Appends to out the bytes of object token obj (from j) with the members whose
// keys are listed in drop (NULL-terminated) removed; all other bytes verbatim.
void as_json_drop_keys(const as_json *j, int obj, const char *const *drop, as_buf *out);

// ---------------------------------------------------------------- session.c
// Session log v0 (acpsnap-session(5)). A decoder yields the header, then one event
// at a time (packed rows expanded, synthetic envelopes for projected input).
typedef enum { AS_FORM_UNKNOWN = 0, AS_FORM_PERSISTED, AS_FORM_PROJECTED } as_form;
typedef enum { AS_DELTA_NONE = 0, AS_DELTA_TEXT, AS_DELTA_REASONING, AS_DELTA_TOOL } as_delta;
typedef struct {
    const char *json; size_t len;  // the complete event (with envelope), compact bytes as stored
    const as_json *j;              // its tokens (root 0); valid until the next call
    int64_t seq, time;             // envelope values (synthetic for projected input)
    int has_int_envelope;          // seq and time are plain safe integers
    long lineno;                   // source line
    int member;                    // index within a packed row, -1 for a plain line
    int projected;                 // 1 when the source line had no envelope
    // (internal) the decoder's pick of the root members of *root_j: count,
    // type, seq, time, data. Ignored unless root_j == j, so an event built
    // by hand (or a copy with rewritten bytes) is classified from scratch.
    const as_json *root_j;
    int root[5];
    // (internal) when the decoder knows the event is a chunk member in the
    // one layout a packed row unpacks to (acpsnap-session(5)), its fields,
    // for the packer. Ignored unless member_of == json.
    const void *member_f;
    const char *member_of;
    // Under as_sess_pieces, a projected plain line is not restored: json and
    // len are its bytes as stored (no tokens: j is NULL), and the event is
    // those bytes with ,"seq":<seq>,"time":0 inserted at env_at. 0: json is
    // the whole event.
    size_t env_at;
} as_event;
typedef struct as_sess as_sess;
// Opens a session log. Reads and checks line 1 (an object whose "type" is
// "session"); dies on an empty file, a header-less file or malformed JSON.
as_sess *as_sess_open(const char *path);
// For a caller whose as_die_hook longjmps out of as_sess_open: releases the
// decoder it was opening (a no-op when none was).
void as_sess_open_abandoned(void);
// Sniffs line 1 of path: 1 when it is a session header, 2 when it is one in
// a zstd-compressed file, 0 when not (a binary file too); -1 (errno set)
// when path cannot be opened. Dies on a corrupt zstd frame.
int as_is_session_log(const char *path);
void as_sess_header(const as_sess *s, const char **line, size_t *len);  // line 1 bytes
// The source line of the event last returned (a packed row's whole line).
void as_sess_line(const as_sess *s, const char **line, size_t *len);
as_form as_sess_form(const as_sess *s);      // form of the body seen so far
// Next event: 1 and *ev, 0 at EOF. Dies (exit 2) on malformed lines: invalid
// JSON, non-object, missing type, mixed projected/persisted envelopes,
// malformed packed rows (each class its own message).
int as_sess_next(as_sess *s, as_event *ev);
const char *as_sess_name(const as_sess *s);
// The parts of a chunk member event the decoder knows (member_f set): its
// kind, the bytes of data.turn, data.step and the chunk's index (plain
// numbers), of the whole data.chunk object, of its id, name (NULL: absent)
// and text or argumentsDelta (JSON strings, quotes included), and of the
// envelope's seq and time as the line spells them (NULL: a packed row's
// member, whose envelope the decoder made). 0 for any other event.
typedef struct { const char *p; size_t n; } as_span;
typedef struct {
    as_delta kind;
    as_span turn, step, index, chunk, id, name, payload, seq, time;
} as_member;
int as_event_member(const as_event *ev, as_member *m);
// For a caller that only copies events, packs them (as_packer_push,
// as_event_line) or reads members through as_event_member: a chunk member the decoder knows (member_f set) may then
// come without tokens, ev->j NULL.
void as_sess_lazy(as_sess *s);
// As as_sess_lazy, for a caller that also reads no other event below its
// root (it packs, projects, copies or derives): such an event's tokens may
// be shallow (as_json_parse_shallow). Packed rows, assistant/chunk and
// compaction/summary events keep all theirs.
void as_sess_shallow(as_sess *s);
// For a writer of the events' bytes alone (jsonl-pack --unpack): shallow,
// and a projected plain line is handed over unrestored (as_event.env_at).
void as_sess_pieces(as_sess *s);
// Decoders opened from now on match member lines and packed rows to their
// layouts (on, the default) or scan every line (off, as at
// ACPSNAP_SIMD=scalar): for tests.
void as_sess_templates(int on);
// The tokens of the current source line as the decoder holds them, while
// it expands a packed row (after the row's first member): for tests.
const as_json *as_sess_row_tokens(const as_sess *s);
void as_sess_close(as_sess *s);

// The packer: canonical packing of an event stream into storage lines. An
// event joins a run only when its bytes are exactly those its row member
// unpacks to, so packing never changes bytes (acpsnap-session(5)).
// emit(ctx, line, len, srcline) receives each output line (no LF) and the
// source line number of the first input line it stands for.
typedef void (*as_emit_fn)(void *ctx, const char *line, size_t len, long srcline);
typedef struct as_packer as_packer;
// mode: AS_PACK_PERSISTED emits envelopes, AS_PACK_PROJECTED omits them (no
// seq/time, no seq0/time0), AS_PACK_KEEP follows each event's source form.
enum { AS_PACK_PERSISTED = 0, AS_PACK_PROJECTED = 1, AS_PACK_KEEP = -1 };
as_packer *as_packer_new(int mode, as_emit_fn emit, void *ctx);
void as_packer_push(as_packer *p, const as_event *ev);   // copies what it keeps
void as_packer_finish(as_packer *p);                    // flushes the open run
void as_packer_free(as_packer *p);
// Writes ev as a plain line: with its envelope (projected = 0) or without.
void as_event_line(const as_event *ev, int projected, as_buf *out);
// Transcodes one log onto o: the header line (then a zstd frame boundary),
// then the body packed canonically in pack mode `mode` (AS_PACK_*), or, with
// unpack set, one event per line with its envelope. Dies on malformed input.
void as_sess_transcode(const char *path, as_out *o, int mode, int unpack);
// Canonical-layout check of a whole log (acpsnap-session(5)): 0 when pack(unpack(x))
// reproduces every line, else 1 and *badline = the first line that differs.
// Dies (exit 2) on malformed input, like the decoder.
int as_sess_check(const char *path, long *badline);
// As as_sess_check, but malformed input is not fatal: its message is printed
// (house format) and 2 is returned, so a guard can go on to the next file.
int as_sess_check_soft(const char *path, long *badline);
// As as_sess_check_soft, for a plain-text log whose bytes the caller holds:
// text[0, n), path's bytes as read. The decoded lines are compared with the
// text in place, not queued (no copy of any line).
int as_sess_check_text(const char *path, const char *text, size_t n, long *badline);

// ---------------------------------------------------------------- loop.c
// Runs fn over each file argument (or stdin when none), returns the worst status.
typedef int (*as_file_fn)(const char *path, void *ctx);
int as_loop(int argc, char **argv, as_file_fn fn, void *ctx);

// The topic headers of common/ build on this one and are included where
// used: replay.h (replay.c, wire.c), wire_parse.h, proxy.h, rx.h, norm.h,
// table.h, sidecar.h, jdiff.h.

#endif
