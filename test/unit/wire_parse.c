// Unit test: the SSE parsers of the three wires (wire_parse.h) over the
// committed transcripts test/data/wire-parse/<wire>-<case>.sse, each
// expected to give the entry in <wire>-<case>.json (one line). Every
// transcript is fed whole, at every split point into two pieces, and one
// byte at a time: the entry must not depend on where the bytes were split.
// Each entry must load as a replay entry that replay-serve can serve.
// Also: the wire of a path, and HTTP errors as throw entries.
//
// Run from the top of the tree (make unit), or with the data directory as
// the argument. WIRE_PARSE_UPDATE=1 rewrites the .json files instead.
#include "acpsnap.h"
#include "replay.h"
#include "wire_parse.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

// The entry of s[0..n) fed in the pieces [0, a) [a, b) [b, n); cut: as as_wp_finish.
static void entry(as_wp_wire w, const char *s, size_t n, size_t a, size_t b, const char *cut, as_buf *out)
{
    as_wp *p = as_wp_new(w);
    as_wp_feed(p, s, a);
    as_wp_feed(p, s + a, b - a);
    as_wp_feed(p, s + b, n - b);
    as_buf_reset(out);
    as_wp_finish(p, cut, out);
    as_wp_free(p);
}

static void check_servable(const char *name, const as_buf *e)
{
    as_replay_entry r;
    as_replay_err err;
    if (as_replay_entry_parse(e->p, e->n, "entry 0", &r, &err)) {
        fprintf(stderr, "%s: the entry does not load: %s\n", name, err.msg);
        fails++;
        return;
    }
    if (as_replay_entry_servable(&r, "entry 0", &err)) {
        fprintf(stderr, "%s: the entry cannot be served: %s\n", name, err.msg);
        fails++;
    }
    as_replay_entry_free(&r);
}

static void transcript(const char *dir, const char *file)
{
    static const struct { const char *prefix; as_wp_wire w; } pre[] = {
        { "chat-", AS_WP_CHAT }, { "responses-", AS_WP_RESPONSES }, { "messages-", AS_WP_MESSAGES } };
    int w = -1;
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (!strncmp(file, pre[i].prefix, strlen(pre[i].prefix))) w = (int)pre[i].w;
    if (w < 0) { fprintf(stderr, "%s: no wire by that name\n", file); fails++; return; }
    char *path = as_path_join(dir, file);
    as_buf sse = {0}, want = {0}, got = {0}, other = {0};
    as_read_raw(path, &sse);
    size_t n = sse.n;
    entry((as_wp_wire)w, sse.p, n, n, n, NULL, &got);
    check_servable(file, &got);
    as_buf jp = {0};
    as_buf_put(&jp, path, strlen(path) - 4);
    as_buf_puts(&jp, ".json");
    free(path);
    path = jp.p;   // owned now through path
    if (getenv("WIRE_PARSE_UPDATE")) {
        FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "%s\n", got.p) < 0 || fclose(f)) as_die_sys("write %s", path);
    } else if (as_read_raw(path, &want) || want.n != got.n + 1 || memcmp(want.p, got.p, got.n)) {
        fprintf(stderr, "%s: entry\n  got  %s\n  want %s", file, got.p, want.p ? want.p : "(no file)\n");
        fails++;
    }
    for (size_t a = 0; a <= n; a++) {
        entry((as_wp_wire)w, sse.p, n, a, a, NULL, &other);
        if (other.n != got.n || memcmp(other.p, got.p, got.n)) {
            fprintf(stderr, "%s: split at %zu gives another entry\n  %s\n", file, a, other.p);
            fails++;
            break;
        }
    }
    as_wp *p = as_wp_new((as_wp_wire)w);
    for (size_t i = 0; i < n; i++) as_wp_feed(p, sse.p + i, 1);
    as_buf_reset(&other);
    as_wp_finish(p, NULL, &other);
    as_wp_free(p);
    CHECK(other.n == got.n && !memcmp(other.p, got.p, got.n));
    // Cut short anywhere before its end, a transcript is a throw (or, past
    // the final event, the same entry).
    for (size_t a = 0; a < n; a += 7) {
        entry((as_wp_wire)w, sse.p, a, a, a, "cut", &other);
        int same = other.n == got.n && !memcmp(other.p, got.p, got.n);
        if (!same && !strstr(other.p, "{\"kind\":\"throw\"")) {
            fprintf(stderr, "%s: cut at %zu: %s\n", file, a, other.p);
            fails++;
            break;
        }
        check_servable(file, &other);
    }
    free(path);
    as_buf_free(&sse);
    as_buf_free(&want);
    as_buf_free(&got);
    as_buf_free(&other);
}

static void wires(void)
{
    as_wp_wire w = AS_WP_MESSAGES;
    CHECK(as_wp_wire_of("/chat/completions", &w) == 0 && w == AS_WP_CHAT);
    CHECK(as_wp_wire_of("/v1/chat/completions?beta=1", &w) == 0 && w == AS_WP_CHAT);
    CHECK(as_wp_wire_of("/v1/responses", &w) == 0 && w == AS_WP_RESPONSES);
    CHECK(as_wp_wire_of("/anthropic/v1/messages", &w) == 0 && w == AS_WP_MESSAGES);
    CHECK(as_wp_wire_of("/v1/embeddings", &w) == -1);
    CHECK(as_wp_wire_of("/chat/completions/x", &w) == -1);
    CHECK(!strcmp(as_wp_suffix(AS_WP_RESPONSES), "/responses"));
}

static void http_errors(void)
{
    static const struct { int status; const char *body, *want; } t[] = {
        { 429, "{\"error\":{\"message\":\"Rate Limit Reached\",\"type\":\"rate_limit_error\"}}",
          "{\"kind\":\"throw\",\"chunks\":[],\"message\":\"Rate Limit Reached\",\"code\":\"RATE_LIMIT\",\"status\":429}" },
        { 529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
          "{\"kind\":\"throw\",\"chunks\":[],\"message\":\"Overloaded\",\"code\":\"SERVER_OVERLOADED\",\"status\":529}" },
        { 422, "Failed to deserialize the JSON body",
          "{\"kind\":\"throw\",\"chunks\":[],\"message\":\"HTTP 422\",\"code\":\"INVALID_REQUEST\",\"status\":422}" },
        { 401, "{\"error\":{\"message\":\"Authentication Fails \\u2014 \\\"key\\\"\"}}",
          "{\"kind\":\"throw\",\"chunks\":[],\"message\":\"Authentication Fails — \\\"key\\\"\",\"code\":\"AUTH\",\"status\":401}" },
        { 500, "", "{\"kind\":\"throw\",\"chunks\":[],\"message\":\"HTTP 500\",\"code\":\"SERVER\",\"status\":500}" },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        as_buf b = {0};
        as_wp_http_error(t[i].status, t[i].body, strlen(t[i].body), &b);
        if (strcmp(b.p, t[i].want)) { fprintf(stderr, "http %d: got %s\n", t[i].status, b.p); fails++; }
        check_servable("http error", &b);
        as_buf_free(&b);
    }
}

int main(int argc, char **argv)
{
    as_setprog(argv[0]);
    const char *dir = argc > 1 ? argv[1] : "test/data/wire-parse";
    DIR *d = opendir(dir);
    if (!d) as_die_sys("open %s", dir);
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".sse")) { transcript(dir, e->d_name); seen++; }
    }
    closedir(d);
    CHECK(seen >= 12);
    wires();
    http_errors();
    if (fails) { fprintf(stderr, "wire_parse: %d failure(s)\n", fails); return 1; }
    printf("wire_parse: ok (%d transcripts)\n", seen);
    return 0;
}
