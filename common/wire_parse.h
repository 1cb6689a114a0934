// wire_parse.h - provider SSE streams back into replay entries
// (acpsnap-replay(5)): the recording side of replay-serve(1).
//
// One parser per wire, chosen by the endpoint's path suffix:
//     /chat/completions   OpenAI / DeepSeek Chat Completions
//     /responses          OpenAI Responses
//     /messages           Anthropic Messages
// A parser is fed the response body as it arrives, split anywhere, and at the
// end yields one entry: chunks when the stream ended as the wire says a
// stream ends, else a throw whose chunks are the prefix received.
//
//     as_wp_wire w;
//     if (as_wp_wire_of(path, &w) == 0) {
//         as_wp *p = as_wp_new(w);
//         as_wp_feed(p, bytes, n);          // any number of times
//         as_buf entry = {0};
//         as_wp_finish(p, NULL, &entry);    // or a cut: as_wp_finish(p, "why", &entry)
//         as_wp_free(p);
//     }
#ifndef ACPSNAP_WIRE_PARSE_H
#define ACPSNAP_WIRE_PARSE_H

#include "acpsnap.h"

typedef enum { AS_WP_CHAT = 0, AS_WP_RESPONSES, AS_WP_MESSAGES } as_wp_wire;

// The wire of a request path by its suffix (a query string is ignored):
// 0 and *w, or -1 when no wire ends the path.
int as_wp_wire_of(const char *path, as_wp_wire *w);
// The wire's path suffix, "/chat/completions" …
const char *as_wp_suffix(as_wp_wire w);

typedef struct as_wp as_wp;
as_wp *as_wp_new(as_wp_wire w);        // never NULL; as_wp_free releases it
// The next n bytes of the body. Bytes after the end of the stream (or after a
// failure it reported) are ignored.
void as_wp_feed(as_wp *p, const char *s, size_t n);
// Appends the entry to out, compact, without LF: a "chunks" entry when the
// stream ended properly; else a "throw" entry with the chunks so far and a
// code: the stream's own error event (its message; code by its type), a
// malformed event (MALFORMED_RESPONSE), a transfer cut (cut: the message,
// code TRANSPORT), or an end without the wire's final event (STREAM_CLOSED).
void as_wp_finish(as_wp *p, const char *cut, as_buf *out);
void as_wp_free(as_wp *p);

// An HTTP error answer (status 400..599, body n bytes) as a throw entry
// without chunks: the error's message (error.message of a JSON body, else
// "HTTP <status>"), a code by the status (AUTH 401/403, QUOTA 402,
// RATE_LIMIT 429, INVALID_REQUEST other 4xx, SERVER_OVERLOADED 503 and 529,
// SERVER other 5xx) and the status itself. Appended to out.
void as_wp_http_error(int status, const char *body, size_t n, as_buf *out);

#endif
