// table.h - the scenario table (scenarios.jsonl) and the drive script
// (input.json): readers with strict validation (acpsnap-scenarios(5)).
// Shared by fixture-guard, sidecar-dedupe and acp-drive.
//
// Problems are reported through an as_report_fn. With a NULL reporter every
// problem is fatal (house-format message, exit 2), which is what a runner
// wants; a guard passes a reporter and keeps going.
#ifndef ACPSNAP_TABLE_H
#define ACPSNAP_TABLE_H

#include "acpsnap.h"

// One problem: file, 1-based line (0 = none), message (lowercase, no period).
typedef void (*as_report_fn)(void *ctx, const char *file, long line, const char *msg);

// Bits of as_scenario.set: which fields the row spells out.
enum {
    AS_F_NAME = 1u << 0, AS_F_HASMODELTURN = 1u << 1, AS_F_RECORDED = 1u << 2,
    AS_F_COMPARESLOG = 1u << 3, AS_F_OVERRIDDEN = 1u << 4, AS_F_PINSHEADER = 1u << 5,
    AS_F_HEADERCLASS = 1u << 6, AS_F_PROMPTSRC = 1u << 7, AS_F_SCHEMASRC = 1u << 8,
    AS_F_CHILDSCHEMAS = 1u << 9, AS_F_CHILDPROMPTS = 1u << 10, AS_F_HEADERCHANGES = 1u << 11,
    AS_F_WORKSPACEPARENT = 1u << 12, AS_F_POSIXONLY = 1u << 13, AS_F_PWSHONLY = 1u << 14,
    AS_F_ENV = 1u << 15, AS_F_CONFIGPATH = 1u << 16, AS_F_PREPARE = 1u << 17,
    AS_F_WINSTDOUT = 1u << 18, AS_F_SESSIONLOG = 1u << 19,
};
// The fields of the session-log tier alone (comparesLog … expectedHeaderChanges):
// a row with "sessionLog": false may set none of them.
#define AS_F_LOG_ONLY (AS_F_COMPARESLOG | AS_F_OVERRIDDEN | AS_F_PINSHEADER | AS_F_HEADERCLASS \
                       | AS_F_PROMPTSRC | AS_F_SCHEMASRC | AS_F_CHILDSCHEMAS | AS_F_CHILDPROMPTS \
                       | AS_F_HEADERCHANGES)

// One row with dsh's defaults applied. Strings are owned by the table.
typedef struct {
    char *name;
    long line;                    // line of the row in scenarios.jsonl
    unsigned set;                 // AS_F_* bits of the fields present
    int hasModelTurn, recorded;
    int sessionLog;               // default true; false: the transcript-only tier (no
                                  // session log, replayed from provider.jsonl)
    int comparesLog;              // default: hasModelTurn
    int overridden, pinsHeader;   // default false
    char *headerClass;            // default "default"
    char *systemPromptSource;     // default: name
    char *toolSchemasSource;      // default: name
    int *childSchemas; size_t nchildSchemas;   // pinsChildToolSchemas (ascending as written)
    int *childPrompts; size_t nchildPrompts;   // pinsChildSystemPrompts
    int64_t expectedHeaderChanges;             // default 0
    char *workspaceParent;        // NULL = platform temp directory
    char *configPath;             // NULL = the profile's default config
    int posixOnly, pwshOnly, prepareWorkspace, pinsNativeWindowsStdout;
    char **envKeys, **envVals; size_t nenv;    // env, in row order
    int valid;                    // 0 when the row had a problem that makes it unusable
} as_scenario;

typedef struct {
    char *path;                   // the table file as opened
    as_scenario *v; size_t n;
    size_t *slot; size_t nslot;   // (internal) name index: open addressing, row + 1, 0 = empty
} as_table;

// Reads path (a scenarios.jsonl). Invalid JSON or a line that is not an
// object is trouble: dies (exit 2) whatever the reporter. Unknown fields,
// wrong types, missing required fields (name, hasModelTurn, recorded) and
// duplicate names go to report (or die when report is NULL). Blank lines are
// skipped. Returns the number of problems reported; rows with problems stay
// in t with valid = 0 unless the name itself is unusable (then dropped).
size_t as_table_load(const char *path, as_table *t, as_report_fn report, void *ctx);
// The row named name, or NULL (hashed: constant time on a loaded table).
const as_scenario *as_table_find(const as_table *t, const char *name);
void as_table_free(as_table *t);

// Header pins (acpsnap-scenarios(5)), resolved as dsh does; rows with
// "sessionLog": false belong to no header class. For row i:
typedef struct {
    int pin;            // index of the pin of its headerClass, -1 when none
    int prompt_src;     // pins only: index of the row owning its prompt sidecar, -1 unusable
    int schema_src;     // pins only: index of the row owning its schema sidecar, -1 unusable
    int owns_prompt;    // some class pin takes its system-prompt.expected.md from this row
    int owns_schemas;   // … its tool-schemas.expected.json
} as_pinrole;
// Fills roles[0..t->n) and reports the table-level pin rules: *Source fields
// off a pin, two pins in a class, a class without a pin, sources that are
// "<not-included>", unknown, not pins, not owners of their sidecar, or that
// declare a different expectedHeaderChanges. Messages are prefixed
// "<row name>: " where they concern one row and carry the row's line.
// Returns the number of problems.
size_t as_table_pins(const as_table *t, as_pinrole *roles, as_report_fn report, void *ctx);

// ----------------------------------------------------------------- input.json
typedef enum {
    AS_OP_UNKNOWN = 0,
    AS_OP_INITIALIZE, AS_OP_NEWSESSION, AS_OP_NEWSESSIONEXPECTERROR, AS_OP_PROMPT,
    AS_OP_PROMPTCONTENT, AS_OP_PROMPTANDWAITFORAGENTMESSAGE, AS_OP_PROMPTEXPECTERROR,
    AS_OP_PROMPTANDCANCEL, AS_OP_WAITFORFILE, AS_OP_WAITFORTURNSTART, AS_OP_WAITFORTURNEND,
    AS_OP_WAITFORSUBAGENTTURNEND, AS_OP_WAITFORGOALPHASE, AS_OP_WAITFORINBOXMESSAGE,
    AS_OP_WAITFORTITLEAFTERTURNEND, AS_OP_WAITFOREVENTAFTERTURNEND, AS_OP_CANCEL,
    AS_OP_WAITFORSESSIONUPDATE,
    AS_OP_LAST = AS_OP_WAITFORSESSIONUPDATE,
} as_op;
const char *as_op_name(as_op op);       // "initialize", …; "?" for AS_OP_UNKNOWN

typedef struct {
    as_op op;
    int tok;                      // the step object's token in as_input.j
    long line;                    // line of the step in input.json
} as_step;

// A parsed drive script. Read step fields with as_json_get(&in->j, step.tok, "text")
// and friends: the loader has checked every field's presence and type.
typedef struct {
    char *path;
    as_buf src;                   // the file bytes (tokens point into it)
    as_json j;                    // root 0: the script object
    as_step *steps; size_t nsteps;
    char **answers; size_t nanswers;   // permissionAnswers kinds, FIFO order
    char **client; size_t nclient;     // "client" capability names, as written
    int has_client;                    // … the field is present (maybe empty)
} as_input;

// Reads and validates path. Invalid JSON is a reported problem here (input.json
// is a fixture, not a table): returns the number of problems, each reported
// (or fatal when report is NULL). On problems the script is not usable.
size_t as_input_load(const char *path, as_input *in, as_report_fn report, void *ctx);
// The same for the text of path read already: src, its bytes once
// as_read_file would give them (decompressed, no NUL byte), taken over (src
// is left empty).
size_t as_input_take(const char *path, as_buf *src, as_input *in, as_report_fn report, void *ctx);
void as_input_free(as_input *in);
// The steps of a loaded script (no problems) that wait on the session log:
// the durable-boundary waits, and a promptAndCancel without waitForFile. A
// transcript-only scenario ("sessionLog": false) has no log to wait on: each
// is reported (fatal when report is NULL). Returns their number.
size_t as_input_log_waits(const as_input *in, as_report_fn report, void *ctx);

// 1-based line of byte offset off in s.
long as_line_of(const char *s, size_t off);

#endif
