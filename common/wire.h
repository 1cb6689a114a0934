// wire.h - what the wire translations share (wire.c, wire_responses.c,
// wire_messages.c); not a public interface.
//
// Responses and Messages are item wires: each content block is opened,
// streamed and closed, one at a time, in order. as_wire_walk turns an
// entry's chunks into those steps and calls the wire's hooks: a block opens
// at its first delta (or at its block-end when it streamed none, which then
// goes out as one delta) and closes when another block opens or the entry
// ends; a block-end of a block already closed is spent. Every string a hook
// gets is a JSON string token (quotes included), placeholders resolved.
#ifndef ACPSNAP_WIRE_H
#define ACPSNAP_WIRE_H

#include "replay.h"

enum { AS_WB_TEXT, AS_WB_REASONING, AS_WB_TOOL };

typedef struct {
    int64_t index;          // the neutral block index
    int kind;               // AS_WB_*
    int out;                // position on the wire: 0, 1, 2… in opening order
    as_buf acc;             // the deltas so far: JSON string bodies, back to back (no quotes)
    as_buf id, name;        // tool call: JSON string tokens
    int closed;
} as_wblock;

typedef struct as_wgen as_wgen;
typedef struct {
    int (*begin)(as_wgen *g);
    int (*open)(as_wgen *g, as_wblock *b);
    int (*delta)(as_wgen *g, as_wblock *b, const char *str, size_t n);   // str: a JSON string token
    int (*close)(as_wgen *g, as_wblock *b);
    int (*finish)(as_wgen *g);      // a chunks entry, after its last block closed
    int (*fail)(as_wgen *g);        // a throw entry, in band (not STREAM_CLOSED, not TRANSPORT)
} as_wire_ops;

struct as_wgen {
    const as_sse_req *q;
    as_sse *s;
    const as_replay_entry *e;
    char *err; size_t errn;
    as_wblock *b; size_t nb, cap;   // the blocks, in opening order
    int open;                       // the open block (in b), -1 none
    int *slot; size_t nslot;        // neutral index → its newest block (open addressing)
    long seq;                       // Responses: the next sequence_number
    as_json uj, fj;                 // the entry's usage and finish chunks (parsed when present)
    int usage, reason;              // their usage / reason tokens, or -1
    as_buf tmp;
};

// The item wires' hooks (wire_responses.c, wire_messages.c).
extern const as_wire_ops as_wire_responses, as_wire_messages;

// The events of entry e on an item wire (ops), into s. 0, or -1 with err.
int as_wire_walk(const as_replay_entry *e, const as_sse_req *q, as_sse *s, const as_wire_ops *ops,
                 char *err, size_t errn);
// Starts an event: "event: <type>", then "data: {"type":"<type>"" and, with
// seq, ","sequence_number":n". as_wire_ev_end closes the object and the event.
void as_wire_ev(as_wgen *g, const char *type, int seq);
void as_wire_ev_end(as_wgen *g);
// Appends string member tok (-1 absent) of j as a JSON string, placeholders
// resolved; anything but a string goes out as "". 0, or -1 with g->err.
int as_wire_put_str(as_wgen *g, const as_json *j, int tok, as_buf *out);
// The integer member key of object obj, 0 when absent (*present says).
int64_t as_wire_int(const as_json *j, int obj, const char *key, int *present);
// The finish reason's kind ("stop" when there is none), and for an error
// its failure code into code (decoded; empty when absent).
const char *as_wire_finish_kind(const as_wgen *g, as_buf *code);

#endif
