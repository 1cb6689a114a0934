// agent.h - the reference ACP agent's internal interfaces (example/).
//
// Threads: the main thread reads ACP lines from stdin and dispatches them;
// each session/prompt runs its turn on a turn thread (loop.c); the DeepSeek
// adapter streams on its own thread. One process-wide mutex (ag.mu) with one
// condition variable (ag.cv) guards every piece of shared state below; stdout
// writes take ag.out_mu.
#ifndef AGENT_H
#define AGENT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "acpsnap.h"

// ---------------------------------------------------------------- config.c
typedef struct {
    int replay;                 // 0 live (DeepSeek), 1 replay
    char *replay_script;        // replay script, or a session log to derive from
    char *replay_override;      // override document for a session log (may be NULL)
    char *sessions_root;
    char *spill_root;
    int raw;                    // persistence: 0 zstd, 1 raw JSONL
    int nosync;                 // sync: 0 fsync each durable batch, 1 none (the page cache only)
    char *base_url, *api_key, *model, *provider;
    int thinking;               // 1 enabled
    long max_tokens, max_steps;
    int permission;             // PERM_*
    long bash_timeout_ms, output_cap, context_budget;
    long request_timeout_ms, idle_timeout_ms;
    char *system_prompt;
    long crash_at_batch;        // test hook, 0 = off
} config;
enum { PERM_ALLOW = 0, PERM_ASK, PERM_REJECT };

// Fills c from defaults, the config file (path may be NULL), the snapshot
// overlay, the environment and the command line overrides already in c
// (replay_script when replay_cli). Dies (exit 2) on a bad setting.
void config_load(config *c, const char *path, const char *cli_replay);
void config_print(const config *c, FILE *f);
void config_free(config *c);

// ---------------------------------------------------------------- util (main.c)
int64_t now_ms(void);
void uuid_v4(char out[37]);
void random_hex(char *out, size_t n);     // n hex digits + NUL
// Appends s as a JSON string literal (JSON.stringify escaping).
static inline void jstr(as_buf *b, const char *s) { as_jstr_write(b, s, strlen(s)); }
// Decoded string value of `key` in object obj, or NULL when absent / not a string (caller frees).
char *json_getstr(const as_json *j, int obj, const char *key);

// ---------------------------------------------------------------- stream chunks
enum { CH_BLOCK_START, CH_TEXT, CH_REASONING, CH_TOOL, CH_BLOCK_END, CH_USAGE, CH_FINISH };
typedef struct chunk {
    struct chunk *next;
    char *json; size_t len;     // the compact chunk object
} chunk;
chunk *chunk_new(const char *json, size_t len);   // copies json (compacted)
void chunk_free(chunk *c);

// A model stream: chunks arrive (from a producer thread or all at once) into
// a queue guarded by ag.mu; the consumer takes them with stream_next.
typedef struct stream {
    chunk *head, *tail;
    int done;                   // 1 finished ok, 2 failed
    char *err_msg, *err_code;   // failed: message and code
    int abandon;                // consumer went away: producer stops
    pthread_t th; int has_thread;
    void *impl;                 // adapter state
    void (*close)(struct stream *);
} stream;
// Producer side (takes ag.mu itself).
void stream_push(stream *s, const char *json, size_t len);
void stream_end(stream *s, const char *err_msg, const char *err_code);
// Consumer: waits for the next chunk; NULL when the stream ended (s->done set)
// or *cancel became non-zero (then s->done is 0).
chunk *stream_next(stream *s, const _Atomic int *cancel);
void stream_close(stream *s);     // abandons and frees

// A model request: the rendered pieces an adapter needs.
typedef struct {
    const char *messages;       // JSON array of OpenAI-style messages (system first)
    const char *tools;          // JSON array of OpenAI-style tool definitions, or NULL
    const char *cwd;            // session cwd (replay readyFile base)
} model_req;

// ---------------------------------------------------------------- models
// Both return a started stream. Replay misuse is recorded (replay_failures)
// and returns a stream that fails with code REPLAY.
stream *replay_start(const model_req *r);
int replay_init(const config *c);          // loads the script; dies on a bad one
int replay_finish(void);                   // at shutdown: 0 ok, else failures reported
stream *deepseek_start(const config *c, const model_req *r);
void deepseek_global_init(void);
void deepseek_global_cleanup(void);

// ---------------------------------------------------------------- persist.c
typedef struct persist persist;
// Creates <root>/<id>/session.jsonl[.zstd] with its header; dies on error.
persist *persist_create(const config *c, const char *id, const char *cwd);
// Opens an existing log for append: repairs a torn tail (reported on stderr),
// decodes it, calls ev(ctx, event) for each event. NULL when there is no log.
typedef void (*persist_ev_fn)(void *ctx, const as_event *ev);
persist *persist_open(const config *c, const char *id, persist_ev_fn ev, void *ctx,
                      char **cwd_out);
// Appends one event {"type":type,"seq":..,"time":..,"data":data[,extra]};
// extra is raw members (no leading comma) or NULL. Returns its seq.
int64_t persist_event(persist *p, const char *type, const char *data, size_t dlen,
                      const char *extra);
int64_t persist_next_seq(const persist *p);
void persist_flush(persist *p);            // durable batch: write + fsync
void persist_close(persist *p);            // flush and free
const char *persist_path(const persist *p);

// ---------------------------------------------------------------- tools.c
typedef struct {
    char *text;                 // model-facing result text (owned)
    int is_error;
} tool_result;
// Tool schemas as an OpenAI "tools" array, and as the request header's
// [{name,description,parameters}] array.
const char *tools_openai_json(void);
const char *tools_header_json(void);
int tool_known(const char *name);
int tool_needs_permission(const char *name);
// Runs tool `name` with JSON arguments args in cwd. cancel: polled; a set flag
// kills a running bash process group.
void tool_run(const config *c, const char *session_id, const char *cwd, const char *name,
              const char *args, const _Atomic int *cancel, tool_result *out);

// ---------------------------------------------------------------- acp.c / loop.c
typedef struct session {
    char id[37];
    char *cwd;
    persist *log;
    int header_reason;          // 0 initial, 1 resume, 2 change (next header to write)
    char *last_header;          // the last request/header data written
    as_buf *hist; size_t nhist, caphist;   // OpenAI messages after the system one
    int turn;                   // last turn number
    int running;                // a turn thread is active
    _Atomic int cancel;
    pthread_t th; int joinable;
    as_buf prompt_id;  // JSON-RPC id of the running prompt (raw bytes)
    char *prompt_text;          // the prompt of the running turn
    struct session *next;
} session;

struct agent {
    config cfg;
    pthread_mutex_t mu, out_mu;
    pthread_cond_t cv;
    session *sessions;
    int64_t next_req_id;        // agent → client request ids
    struct pending *pending;    // outstanding agent → client requests
    int failed;                 // a fatal persistence error happened
};
extern struct agent ag;

// Writes one JSON-RPC line to stdout (adds LF, flushes). Thread-safe.
void acp_send(const char *line, size_t len);
void acp_notify_update(const session *s, const char *update);   // session/update
// Sends session/request_permission and waits for the answer or cancel.
// Returns 1 allowed, 0 rejected, -1 cancelled.
int acp_ask_permission(session *s, const char *call_id, const char *tool);
void acp_dispatch(const char *line, size_t len);   // one stdin line
void acp_shutdown(void);                           // stdin EOF
void hist_push(session *s, const char *json, size_t len);
void turn_start_thread(session *s);                // loop.c
void session_replay_history(session *s);           // loop.c: session/load notifications
// loop.c: rebuilds the conversation of a loaded log, one event at a time
// (a persist_ev_fn; ctx is the session).
void load_event(void *ctx, const as_event *ev);

#endif
