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
} as_replay_entry;

typedef struct { as_replay_entry *e; size_t n, cap; } as_replay_script;

// An error of validation: a message (lowercase, no final period) and the byte
// offset in the parsed text it refers to (or -1).
typedef struct { char msg[256]; long pos; } as_replay_err;

// Validates one replay entry (a JSON value: exactly the keys of its kind,
// chunks an array of objects with a known "type", throw message/code and
// hang readyFile non-empty strings) and fills *e with its compacted bytes.
// `where` names the entry in messages ("entry 3", "patch 0.entry").
// Returns 0, or -1 with *err set (nothing to free then).
int as_replay_entry_parse(const char *s, size_t len, const char *where,
                          as_replay_entry *e, as_replay_err *err);
void as_replay_entry_free(as_replay_entry *e);
// Appends entry e (taking ownership of its contents) to sc.
void as_replay_script_push(as_replay_script *sc, as_replay_entry *e);
void as_replay_script_free(as_replay_script *sc);

// Loads a replay script file (one entry per line, blank lines rejected, zstd
// detected) into sc (appends). Dies (exit 2) with file:line:col on any error.
void as_replay_load(const char *path, as_replay_script *sc);

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
// time against the live request. The pattern is JavaScript-flavoured; \d \w
// \s and their negations are translated to POSIX ERE. The last match wins; its
// first group, else the whole match, substitutes. Errors (a bad pattern, no
// match, an unterminated placeholder) return -1 with a message in err.
//
// Appends every string leaf of JSON value tok (the request messages), joined
// by LF: the text the patterns search.
void as_replay_haystack(const as_json *j, int tok, as_buf *hay);
// Appends string token tok as a JSON string: its bytes verbatim when it holds
// no placeholder, else resolved against hay and re-encoded (JSON.stringify).
int as_replay_resolve_str(const as_json *j, int tok, const as_buf *hay, as_buf *out, char *err, size_t errn);
// Appends the JSON value json[0..len) with every placeholder in its strings
// resolved; unchanged bytes are copied through.
int as_replay_expand(const char *json, size_t len, const as_buf *hay, as_buf *out, char *err, size_t errn);

// The seedLength of a header line: 0 when absent or not a number. Dies when
// it is negative or not an integer (file names the log).
int64_t as_replay_seed_length(const char *hdr, size_t len, const char *file);

#endif
