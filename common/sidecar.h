// sidecar.h - request-header pin sidecars (acpsnap-scenarios(5)): dsh's exact
// formatting of system-prompt[.N].expected.md and tool-schemas[.N].expected.json,
// and JSON.stringify(value, null, 2) over scanner tokens.
#ifndef ACPSNAP_SIDECAR_H
#define ACPSNAP_SIDECAR_H

#include "acpsnap.h"

// The sidecar files of a scenario directory: a header pin's (at the row that
// owns them), and a pinned child N's (printf formats of N).
#define AS_PROMPT_SIDECAR "system-prompt.expected.md"
#define AS_SCHEMAS_SIDECAR "tool-schemas.expected.json"
#define AS_CHILD_PROMPT_SIDECAR "system-prompt.%d.expected.md"
#define AS_CHILD_SCHEMAS_SIDECAR "tool-schemas.%d.expected.json"

// A string scrubber: appends the scrubbed form of s to out (is_path: the
// value of a member named "path"). as_norm_str (norm.h) fits with a cast-free
// wrapper; sidecar.c does not depend on norm.c.
typedef void (*as_scrub_fn)(void *ctx, const char *s, size_t len, int is_path, as_buf *out);

// Appends token tok of j as JSON.stringify(value, null, 2) would print it at
// nesting depth `depth` (0 at the top): 2-space indent, "key": value, empty
// containers as [] and {}, numbers in JavaScript's shortest form, strings
// escaped like JSON.stringify. When scrub is non-NULL every string value is
// scrubbed first (a member named "path" with is_path set), as dsh's
// normalizeSessionLog does before it formats a sidecar.
void as_pretty(const as_json *j, int tok, int depth, as_scrub_fn scrub, void *ctx, as_buf *out);

// Appends number token tok in JavaScript's Number → string form.
void as_js_number(const as_json *j, int tok, as_buf *out);

// dsh's formatSystemPromptSnapshot: prompt (with a final LF added when
// missing), then for each change k (1-based) "\n<!-- request/header change k -->\n\n"
// and the change text (final LF added when missing).
void as_prompt_sidecar_begin(as_buf *out, const char *prompt, size_t len);
void as_prompt_sidecar_change(as_buf *out, int k, const char *prompt, size_t len);
// Length of the initial-prompt part of a prompt sidecar (before the first
// change marker).
size_t as_prompt_sidecar_initial(const char *s, size_t len);
// Number of change sections in a prompt sidecar.
int as_prompt_sidecar_changes(const char *s, size_t len);

// Checks a tool-schema sidecar text: a JSON object {"initial": [...],
// "changes": [[...], ...]} printed exactly as dsh prints it. Returns NULL
// when it is, else a static message. *nsets receives 1 + the number of
// changes and *ninitial the length of initial (when the shape is right).
const char *as_schemas_sidecar_check(const char *s, size_t len, int *nsets, int *ninitial);

#endif
