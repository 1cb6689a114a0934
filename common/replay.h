// replay.h - the replay model (acpsnap-replay(5)): replay entries, scripts,
// derivation from a session log, override documents.
//
// A replay script is a sequence of entries, one per model call, served
// positionally. Each entry keeps its compact JSON bytes (copied through from
// the log or the override file, never re-serialized) plus its decoded kind
// and fields, so a server can stream the chunk bytes as they are.
//
// Typical use (a replay adapter or server):
//     as_replay_script sc = {0};
//     as_replay_load("script.jsonl", &sc);              // a replay-derive output
//   or
//     as_replay_from_session("session.jsonl", "replay.override.json", 1, &sc);
//     for (size_t i = 0; i < sc.n; i++) {
//         const as_replay_entry *e = &sc.e[i];
//         for (size_t k = 0; k < e->nchunks; k++)
//             use(e->json + e->chunk[k].off, e->chunk[k].len, e->chunk[k].type);
//         if (e->kind == AS_REPLAY_THROW) fail(e->message, e->code);
//     }
//     as_replay_script_free(&sc);
#ifndef ACPSNAP_REPLAY_H
#define ACPSNAP_REPLAY_H

#include "acpsnap.h"

#include <signal.h>

typedef enum { AS_REPLAY_CHUNKS = 0, AS_REPLAY_THROW, AS_REPLAY_HANG } as_replay_kind;

// Stream chunk types (acpsnap-replay(5)).
typedef enum {
    AS_CHUNK_BLOCK_START = 0, AS_CHUNK_TEXT_DELTA, AS_CHUNK_REASONING_DELTA,
    AS_CHUNK_TOOL_CALL_DELTA, AS_CHUNK_BLOCK_END, AS_CHUNK_USAGE, AS_CHUNK_FINISH
} as_chunk_type;
extern const char *const as_chunk_type_names[];   // "block-start", … indexed by as_chunk_type

typedef struct {
    uint32_t off, len;      // the chunk object's bytes: json + off, len bytes (compact)
    uint8_t type;           // as_chunk_type
} as_replay_chunk;

typedef struct {
    as_replay_kind kind;
    char *json; size_t len;         // the compact entry (no LF), NUL-terminated; owned
    as_replay_chunk *chunk; size_t nchunks;   // chunks / throw: the chunks in order; owned
    char *message, *code;           // throw: decoded UTF-8, NUL-terminated; else NULL; owned
    char *ready_file;               // hang: decoded readyFile or NULL; owned
    int status;                     // throw: its HTTP status (400..599), 0 when none
} as_replay_entry;

typedef struct { as_replay_entry *e; size_t n, cap; } as_replay_script;

// An error of validation: a message (lowercase, no final period) and the byte
// offset in the parsed text it refers to (or -1).
typedef struct { char msg[256]; long pos; } as_replay_err;

// Validates one replay entry (a JSON value: exactly the keys of its kind,
// chunks an array of objects with a known "type", throw message/code and
// hang readyFile non-empty strings, a throw's optional status an integer
// from 400 to 599) and fills *e with its compacted bytes.
// `where` names the entry in messages ("entry 3", "patch 0.entry").
// Returns 0, or -1 with *err set (nothing to free then).
int as_replay_entry_parse(const char *s, size_t len, const char *where,
                          as_replay_entry *e, as_replay_err *err);
void as_replay_entry_free(as_replay_entry *e);
// Checks what replay-serve(1) translates from entry e (already parsed): each
// chunk's members by its type, with their JSON types (acpsnap-replay(5),
// "Stream chunks": index a non-negative integer, text/id/argumentsDelta
// strings, name an optional string, block an object with a string type and
// the strings of a text, reasoning or tool-call block, usage an object whose
// token counts are non-negative integers, reason an object with a string
// kind), that a status comes only on a throw without chunks, and that every
// {{fromRequest:…}} placeholder compiles. `where`
// names the entry. Returns 0, or -1 with *err (pos: the offset in e->json).
int as_replay_entry_servable(const as_replay_entry *e, const char *where, as_replay_err *err);
// Appends entry e (taking ownership of its contents) to sc.
void as_replay_script_push(as_replay_script *sc, as_replay_entry *e);
void as_replay_script_free(as_replay_script *sc);

// Loads a replay script file (one entry per line, blank lines rejected, zstd
// detected) into sc (appends). Dies (exit 2) with file:line:col on any error.
void as_replay_load(const char *path, as_replay_script *sc);

// One line of a replay script as replay-serve(1) loads it: entry n
// (as_replay_entry_parse, named "entry n"), then what the wire needs from
// it (as_replay_entry_servable). Returns 0 with *e filled, or -1 with *err
// set (pos: the byte offset in the line of an invalid value, -1 for a
// member the wire needs) and nothing to free.
int as_replay_line_servable(const char *line, size_t len, size_t n, as_replay_entry *e, as_replay_err *err);
// Loads a replay script file for serving, each line by
// as_replay_line_servable, into sc (appends). Dies (exit 2) at the first
// problem: file:line:col for an invalid entry, file:line for a member the
// wire needs. replay-serve(1) and acp-drive(1) load provider scripts so.
void as_replay_load_servable(const char *path, as_replay_script *sc);

// An override document (acpsnap-replay(5)): a bare array of entries replacing
// the derived script, or {"patches":[{"at":i,"entry":…}]}.
typedef struct { size_t at; long line, col; as_replay_entry entry; } as_replay_patch;  // line/col: of the patch
typedef struct {
    int replace;                    // 1: bare array (script), 0: patches
    as_replay_script script;        // replace: the entries
    as_replay_patch *patch; size_t npatch;   // patches, in document order
} as_replay_override;
// Loads and validates an override file. Dies (exit 2) with file:line:col and
// a precise message on invalid JSON, a wrong document shape, an invalid entry
// or chunk, a non-integer or negative `at`. Indexes against the derived
// length (range, duplicates) are checked by as_replay_patches_check.
void as_replay_override_load(const char *path, as_replay_override *ov);
// The same over text s (n bytes): 0, or -1 with *err (pos: byte offset in s)
// and ov left empty.
int as_replay_override_parse(const char *s, size_t n, as_replay_override *ov, as_replay_err *err);
void as_replay_override_free(as_replay_override *ov);
// Applies ov to a derived script: replace swaps in the whole array, patches
// swap entry `at` (at == length appends, in document order). Dies on an
// out-of-range or repeated `at` (path names the override in the message). Entries are
// moved out of ov (ov is left empty).
void as_replay_override_apply(as_replay_override *ov, const char *path, as_replay_script *sc);
// Checks patches against a derived length n in document order, as the
// reference does: an index past n, then a repeated index. Dies on failure.
void as_replay_patches_check(const as_replay_override *ov, const char *path, size_t n);

// Streaming derivation (acpsnap-replay(5)) over an open session decoder:
// calls emit(ctx, json, len) with each entry's compact bytes as soon as its
// model call closes (json valid only during the call). skip_seed: skip the
// first header.seedLength decoded events (child logs). Returns the number of
// entries emitted. Dies (exit 2) on a thrown stream (an open call at a
// (turn, step) change, a compaction summary or EOF), a marked summary
// without rawOutput, or a malformed chunk event, naming file:line.
typedef void (*as_replay_emit_fn)(void *ctx, const char *json, size_t len);
size_t as_replay_derive(as_sess *s, int skip_seed, as_replay_emit_fn emit, void *ctx);

// The whole replay script of a session log, as the reference replay plugin
// loads it: a bare-array override file replaces the script (the log is not
// derived); a patches override is applied to the derived script; with
// override_path NULL the script is derived. Fills sc (empty on entry);
// dies on any error.
void as_replay_from_session(const char *path, const char *override_path, int skip_seed,
                            as_replay_script *sc);

// {{fromRequest:<regex>}} placeholders (acpsnap-replay(5)), resolved at stream
// time against the live request. The pattern is a POSIX extended regular
// expression without back-references, with the JavaScript escapes \d \w \s
// and their negations (rx.h), searched in linear time. The last match wins;
// its first group, else the whole match, substitutes. Errors (a bad pattern,
// no match, an unterminated placeholder, a search over its time limit)
// return -1 with a message in err naming the placeholder, e.g.
// "{{fromRequest:id=([0-9]+)}} matched nothing in the request".
//
// What may cut a search short: its time (budget_ms per placeholder; 0 or a
// NULL limits: AS_REPLAY_SEARCH_MS) and a stop flag (NULL: none).
#define AS_REPLAY_SEARCH_MS 1000
typedef struct {
    long budget_ms;
    const volatile sig_atomic_t *stop;
} as_replay_limits;
//
// Appends every string leaf of JSON value tok (the request messages), joined
// by LF: the text the patterns search.
void as_replay_haystack(const as_json *j, int tok, as_buf *hay);
// Appends string token tok as a JSON string: its bytes verbatim when it holds
// no placeholder, else resolved against hay and re-encoded (JSON.stringify).
// lim may be NULL.
int as_replay_resolve_str(const as_json *j, int tok, const as_buf *hay, const as_replay_limits *lim,
                          as_buf *out, char *err, size_t errn);
// Appends the JSON value json[0..len) with every placeholder in its strings
// resolved (default limits); unchanged bytes are copied through.
int as_replay_expand(const char *json, size_t len, const as_buf *hay, as_buf *out, char *err, size_t errn);
// Checks the placeholders of decoded text t[0..n): each terminated and its
// pattern compiling. 0, or -1 with the message in err.
int as_replay_placeholders_check(const char *t, size_t n, char *err, size_t errn);

// ---------------------------------------------------------------- wire.c
// The model wire APIs replay-serve(1) speaks, picked by the request's
// endpoint: DeepSeek (OpenAI) chat completions, OpenAI Responses, Anthropic
// Messages. One replay entry, three translations (wire.c,
// wire_responses.c, wire_messages.c).
typedef enum { AS_WIRE_CHAT = 0, AS_WIRE_RESPONSES, AS_WIRE_MESSAGES } as_wire;
// The wire of a URL path (no query string): ".../chat/completions",
// ".../responses", ".../messages"; -1 for any other path.
int as_wire_of_path(const char *path);
// 1 when the stream of entry e on wire w ends by cutting the connection
// (after its events) rather than by ending the body: on chat completions a
// throw with prefix chunks (but STREAM_CLOSED); on the other wires, which
// carry a throw as an error event, only code TRANSPORT.
int as_wire_cuts(as_wire w, const as_replay_entry *e);
// The HTTP status and error type of a throw before any chunk, by its code
// (acpsnap-replay(5) codes), as wire w's provider answers it.
void as_wire_throw_status(as_wire w, const char *code, int *status, const char **type);
// Appends wire w's JSON error body for an HTTP error: chat and Responses
// {"error":{"message","type","param","code"}} (type as given), Messages
// {"type":"error","error":{"type","message"}} (its type by status, unless
// given for a throw: from_throw).
void as_wire_error_body(as_wire w, int status, const char *type, int from_throw, const char *msg, as_buf *out);

// The stream of one entry, as replay-serve(1) sends it on wire q->wire: on
// chat completions DeepSeek's chat.completion.chunk objects in its field
// order, one SSE event ("data: …" and a blank line) each; on Responses and
// Messages "event: <type>" and "data: …" lines per event.
typedef struct {
    as_wire wire;                   // which translation (0: chat completions)
    long request;                   // request number from 0: the chunk ids
    long long created;              // the chunks' created value
    const char *model; size_t model_len;   // the model echoed: JSON string bytes, quotes included
    int include_usage;              // stream_options.include_usage: "usage":null on the other chunks
    const as_buf *hay;              // the fromRequest haystack (NULL: empty)
    const as_replay_limits *lim;    // of the fromRequest searches (NULL: defaults)
} as_sse_req;
typedef struct {
    as_buf out;                     // the events, back to back
    size_t *end; size_t n, cap;     // the end offset of each event in out
} as_sse;
// Appends the events of entry e to s: a chunks entry whole (chat: through
// its final chunk and "data: [DONE]"; Responses: through response.completed;
// Messages: through message_stop); a throw entry's prefix chunks (then, but
// on chat completions and for STREAM_CLOSED and TRANSPORT, the wire's error
// event); a hang entry's fixed prefix (a text block holding "partial").
// Every event is one JSON value (or [DONE]) for any entry
// as_replay_entry_parse accepts; as_replay_entry_servable makes sure
// nothing the wire needs is missing.
// Returns 0, or -1 with err set (a placeholder that does not resolve).
int as_sse_entry(const as_replay_entry *e, const as_sse_req *q, as_sse *s, char *err, size_t errn);
void as_sse_free(as_sse *s);

// The seedLength of a header line: 0 when absent or not a number. Dies when
// it is negative or not an integer (file names the log).
int64_t as_replay_seed_length(const char *hdr, size_t len, const char *file);

#endif
