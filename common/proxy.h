// proxy.h - replay-serve(1)'s recording mode: each model request forwarded
// to an upstream provider (libcurl), its answer streamed back to the client
// unchanged as it arrives and parsed at the same time into one replay entry
// (wire_parse.h); at the end every entry is written to the record file.
//
// Runs inside a libmicrohttpd server with a thread per connection: a request
// is answered on its connection's thread, which pumps the upstream transfer
// from the response callback, so nothing is buffered beyond what arrived and
// was not yet sent. Credentials live in the request headers to the upstream
// only: never in a message, the log or the record file.
#ifndef ACPSNAP_PROXY_H
#define ACPSNAP_PROXY_H

#include "acpsnap.h"

#include <microhttpd.h>
#include <signal.h>

typedef struct {
    const char *upstream;       // --upstream: the base URL, http:// or https://
    const char *key_env;        // --upstream-key-env: the variable holding the key, or NULL
    const char *record;         // --record: the file written at the end
    const volatile sig_atomic_t *stop;   // set when the server stops: open streams are cut
} as_proxy_conf;

typedef struct as_proxy as_proxy;
// Checks the configuration and that the record file can be created beside
// its name (a temporary file made and removed); dies (exit 2) with the house
// message otherwise. Call before any thread starts (libcurl's global init).
as_proxy *as_proxy_new(const as_proxy_conf *conf);
// Answers request n (method, url, the body of len bytes) on c: forwarded to
// the upstream and queued as a streamed response with its status, or an
// error of our own (404 unknown endpoint, 400 not a streaming JSON request)
// counted as a failure. *status gets the status answered (0: the connection
// dropped) and *outcome the log's outcome; both must stay valid until the
// request completes.
enum MHD_Result as_proxy_serve(as_proxy *px, struct MHD_Connection *c, long n, const char *method, const char *url,
                               const char *body, size_t len, int *status, const char **outcome);
// Failures so far (requests refused).
int as_proxy_failures(as_proxy *px);
// Writes every entry recorded, in request order, one line each, to the
// record file atomically (dies on error), then frees px. Call once the
// server has stopped.
void as_proxy_finish(as_proxy *px);

#endif
