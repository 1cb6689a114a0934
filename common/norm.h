// norm.h - the normalizer core (scrub(1)): scrubbing of a run's volatile
// values out of ACP transcripts and session logs, and the request-header
// tokens of header pins (acpsnap-scenarios(5)).
//
// Everything works on byte spans: a record is walked token by token, the
// container punctuation is re-emitted compactly, scalar bytes are copied
// through, and a string value is re-encoded (as_jstr_write) only when the
// scrub actually changed it. So a compact input line whose strings hold no
// volatile value comes out byte-identical.
//
// To be included from acpsnap.h (until then include it after acpsnap.h).
// Not thread-safe: a context holds scratch buffers, and calls without a
// context share one static scratch context.
#ifndef ACPSNAP_NORM_H
#define ACPSNAP_NORM_H

#include "acpsnap.h"

// ---------------------------------------------------------------- the context
// The run's volatile values: session ids, the generated cwd and its aliases.
// Mirrors the corpus' run.json "normalizeContext" ({sessionIds, cwd, cwdAliases}).
typedef struct as_norm as_norm;

as_norm *as_norm_new(void);             // empty context; free with as_norm_free
void as_norm_free(as_norm *n);
// Setters copy their argument. An empty cwd, alias or id is ignored.
void as_norm_set_cwd(as_norm *n, const char *cwd, size_t len);
void as_norm_add_alias(as_norm *n, const char *alias, size_t len);
void as_norm_add_session_id(as_norm *n, const char *id, size_t len);
// Separator mode for cwd-rooted paths: 0 canonical '/' (default), 1 native (kept).
void as_norm_set_native(as_norm *n, int native);
// 1 when a cwd or a session id has been set.
int as_norm_has_context(const as_norm *n);
// Drops cwd, aliases and ids (keeps the mode), e.g. before as_norm_from_header.
void as_norm_clear(as_norm *n);
// Loads a context from a JSON file: either a normalizeContext object or a whole
// run.json (its "normalizeContext" member is used). Dies (exit 2) naming the
// file on unreadable/invalid input or a wrong shape.
void as_norm_load_file(as_norm *n, const char *path);
// Loads a context from object token obj of j; returns NULL, or a static message.
const char *as_norm_load_json(as_norm *n, const as_json *j, int obj);
// Appends the context as one JSON object, {"cwd":…|null,"cwdAliases":[…],
// "sessionIds":[…]}, the values as they were set (scrub's rule variables).
void as_norm_context_json(const as_norm *n, as_buf *out);
// dsh's fixtureContext: the session ids = [header.id] when it is a string, the
// cwd = header.cwd when a string (else an impossible sentinel), no aliases.
// hdr is the parsed header line (root 0). Replaces the current context.
void as_norm_from_header(as_norm *n, const as_json *hdr);

// ---------------------------------------------------------------- strings
// Scrubs one decoded string value (UTF-8) per dsh's scrubString: cwd spellings
// (longest first, path boundaries, /private aliases) → {{cwd}}, cwd-rooted
// separators → '/', <path> tags and "Additional instructions from:" paths → '/',
// spill paths → {{spillLocator:<name>}}, event-read times, session ids and
// any other UUID → {{sessionId}}. is_path: the value of a member named "path"
// (all backslashes → '/'). Appends the result to out; returns 1 when it
// differs from the input, 0 when it is identical (out then holds a copy).
int as_norm_str(const as_norm *n, const char *s, size_t len, int is_path, as_buf *out);

// ---------------------------------------------------------------- request headers
enum { AS_HDR_SYSTEM = 1, AS_HDR_TOOLS = 2, AS_HDR_ALL = 3 };
// The tokens that stand for request-header bulk.
#define AS_TOKEN_SYSTEM "{{system}}"
#define AS_TOKEN_TOOLS "{{tools}}"
// State of one record (root 0 of j) as a request header.
typedef enum {
    AS_HDR_NOT_HEADER = 0,  // not a request/header event with an object data.header
    AS_HDR_TOKENIZED,       // a request/header whose selected bulk is all tokens (or absent)
    AS_HDR_RAW,             // a request/header holding untokenized bulk
} as_hdr_state;
// which: AS_HDR_* bits (AS_HDR_ALL for the committed-fixture rule).
as_hdr_state as_norm_header_state(const as_json *j, unsigned which);

// ---------------------------------------------------------------- records
// stdout: one ACP frame (root 0 must be an object; the caller checks). The
// top-level JSON-RPC "id" (when present and not null) is renumbered 1, 2, …
// in first-seen order (state kept in n; as_norm_reset_ids starts over), then
// every string scrubbed. Appends the compact frame (no LF) to out.
void as_norm_stdout_frame(as_norm *n, const as_json *j, as_buf *out);
// The same for one raw line [s, s + len): parsed into j (only as deep as
// the edit needs: when no string of the line can change, the root's members
// alone), then normalized as above. Returns 0; -1 when the line is not JSON
// (j->err, j->errpos: as_json_die); 1 when it is not an object.
int as_norm_stdout_line(as_norm *n, as_json *j, const char *s, size_t len, as_buf *out);
void as_norm_reset_ids(as_norm *n);

// Session-log record flags.
enum {
    AS_NS_HEADER = 1,     // this is the log's first line (the session header)
    AS_NS_PROJECT = 2,    // drop seq/time/seq0/time0 on body records (dsh scrubSessionSnapshot)
    AS_NS_TOKENIZE = 4,   // tokenize request-header bulk (AS_HDR_ALL)
    AS_NS_VOLATILE = 8,   // zero createdAt, time, time0, dt gaps, hook/result durationMs
    AS_NS_SCRUB = 16,     // scrub every string with the context
    AS_NS_COMPARE = 2 | 4 | 8 | 16,  // the comparison form (oracle .normalized.jsonl)
};
// AS_NS_TOKENIZE does what dsh does to a request/header record:
// data.header.system → "{{system}}", data.header.tools → "{{tools}}" (when
// the key is present, whatever its value). Every other header member, the
// session prefix messages included, is kept and scrubbed like any value.
// Session log: one record (root 0 an object; the caller checks). Appends the
// normalized compact record (no LF) to out. n may be NULL when flags lack
// AS_NS_SCRUB. dsh's normalizeSessionLog(scrubSessionSnapshot(x), ctx), the
// oracle's .normalized.jsonl, is AS_NS_COMPARE (| AS_NS_HEADER on line 1).
void as_norm_session_record(const as_norm *n, const as_json *j, unsigned flags, as_buf *out);
// A string value of a session record, its JSON bytes [p, p + len) (quotes
// included), as as_norm_session_record with AS_NS_SCRUB leaves it (is_path:
// the value of a member named "path"): appended to out.
void as_norm_record_string(const as_norm *n, const char *p, size_t len, int is_path, as_buf *out);

// --fixture cwd tokenization (dsh tokenizeSessionFixtureCwd): every string of
// a record gets the header cwd's exact spellings and any absolute path whose
// last segment is the cwd basename replaced by {{cwd}}. basename: the last
// segment of the header cwd. Appends the compact record to out.
void as_norm_fixture_cwd(const as_norm *n, const char *basename, size_t blen,
                         const as_json *j, as_buf *out);

#endif
