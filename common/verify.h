// verify.h - the request headers of a session log, and the checks of one
// replay run (sidecar-dedupe(1) --verify, acp-drive(1) --compare): no tool
// result reports UNKNOWN_TOOL, each log carries as many changed request
// headers as its row expects, every header's system prompt and tool schemas
// are its class pin's sidecars.
#ifndef ACPSNAP_VERIFY_H
#define ACPSNAP_VERIFY_H

#include "acpsnap.h"
#include "norm.h"
#include <stdio.h>

// The normalized header sequence of one log: prompt strings and schema sets
// (each printed at depth 0, re-indented when placed).
typedef struct {
    as_buf *prompts; size_t np;
    as_buf *sets; size_t ns;
    // for --verify: each header's line and seq (-1: none), the changed
    // headers, and the lines of tool results that report UNKNOWN_TOOL
    long *hline, *hseq; size_t nh;
    as_buf *rest;                   // each header's other members, scrubbed
    long changes;
    long *unknown; size_t nunknown;
} as_hseq;

void as_hseq_free(as_hseq *q);
// Reads log and collects its request headers' system prompts and tool sets,
// scrubbed with n as dsh's normalizeSessionLog does.
void as_hseq_extract(const char *log, const as_norm *n, as_hseq *q);
// The context of a capture: rawdir/run.json, else primary's header.
void as_hseq_context(as_norm *n, const char *rawdir, const char *primary);
// A prompt as UTF-8 text: a lone surrogate (3-byte WTF-8) becomes U+FFFD.
void as_utf8_text(as_buf *b);

// The checks of the run in rundir (acp-drive's output) for scenario name of
// the snapshots directory dir: the number of findings, each written to out
// ("LOG:LINE: message"; out NULL: counted only). Trouble with the table or
// its pins goes to probs.
long as_verify_run(const char *rundir, const char *dir, const char *name, FILE *out, as_problems *probs);

#endif
