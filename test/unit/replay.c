// Unit test: the replay model API as adapters and servers use it
// (as_replay_from_session, as_replay_load, entry fields and chunk spans).
#include "acpsnap.h"
#include "replay.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

static char *tmpfile_with(const char *text)
{
    char *path = as_xstrdup("/tmp/acpsnap-unit-replay.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) as_die_sys("create %s", path);
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) as_die_sys("write %s", path);
    close(fd);
    return path;
}

static int chunk_is(const as_replay_entry *e, size_t k, const char *bytes)
{
    return k < e->nchunks && e->chunk[k].len == strlen(bytes)
        && memcmp(e->json + e->chunk[k].off, bytes, e->chunk[k].len) == 0;
}

#define TD "{\"type\":\"text-delta\",\"index\":0,\"text\":\"caf\\u00e9\"}"
#define FIN "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}"

static void test_from_session(void)
{
    char *log = tmpfile_with(
        "{\"type\":\"session\",\"id\":\"s\",\"createdAt\":1}\n"
        "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":" TD "}}\n"
        "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":" FIN "}}\n"
        "{\"type\":\"compaction/summary\",\"data\":{\"llmStreamCall\":true,\"rawOutput\":[{\"type\":\"text\",\"text\":\"x\"}],\"usage\":{\"inputTokens\":1}}}\n");
    char *ov = tmpfile_with(
        "{ \"patches\": [\n"
        "  { \"at\": 2, \"entry\": { \"kind\": \"throw\", \"chunks\": [ " TD " ],\n"
        "      \"message\": \"line\\nbreak\", \"code\": \"E_X\" } }\n"
        "] }\n");
    as_replay_script sc = {0};
    as_replay_from_session(log, ov, 1, &sc);
    CHECK(sc.n == 3);
    if (sc.n == 3) {
        CHECK(sc.e[0].kind == AS_REPLAY_CHUNKS && sc.e[0].nchunks == 2);
        CHECK(chunk_is(&sc.e[0], 0, TD) && sc.e[0].chunk[0].type == AS_CHUNK_TEXT_DELTA);
        CHECK(chunk_is(&sc.e[0], 1, FIN) && sc.e[0].chunk[1].type == AS_CHUNK_FINISH);
        CHECK(strcmp(sc.e[0].json, "{\"kind\":\"chunks\",\"chunks\":[" TD "," FIN "]}") == 0);
        CHECK(sc.e[1].nchunks == 4 && sc.e[1].chunk[0].type == AS_CHUNK_BLOCK_START
              && sc.e[1].chunk[1].type == AS_CHUNK_BLOCK_END && sc.e[1].chunk[2].type == AS_CHUNK_USAGE);
        CHECK(chunk_is(&sc.e[1], 1, "{\"type\":\"block-end\",\"index\":0,\"block\":{\"type\":\"text\",\"text\":\"x\"}}"));
        CHECK(sc.e[2].kind == AS_REPLAY_THROW && sc.e[2].nchunks == 1 && chunk_is(&sc.e[2], 0, TD));
        CHECK(sc.e[2].message && strcmp(sc.e[2].message, "line\nbreak") == 0);
        CHECK(sc.e[2].code && strcmp(sc.e[2].code, "E_X") == 0);
        CHECK(strchr(sc.e[2].json, '\n') == NULL && strchr(sc.e[2].json, ' ') == NULL);
    }
    as_replay_script_free(&sc);
    CHECK(sc.n == 0 && sc.e == NULL);
    unlink(log); unlink(ov);
    free(log); free(ov);
}

static void test_load(void)
{
    char *path = tmpfile_with(
        "{\"kind\":\"hang\",\"readyFile\":\".ready\"}\n"
        "{\"kind\":\"hang\"}\n"
        "{\"code\":\"c\",\"kind\":\"throw\",\"message\":\"m\",\"chunks\":[]}\n");
    as_replay_script sc = {0};
    as_replay_load(path, &sc);
    CHECK(sc.n == 3);
    if (sc.n == 3) {
        CHECK(sc.e[0].kind == AS_REPLAY_HANG && sc.e[0].ready_file && strcmp(sc.e[0].ready_file, ".ready") == 0);
        CHECK(sc.e[1].kind == AS_REPLAY_HANG && sc.e[1].ready_file == NULL && sc.e[1].nchunks == 0);
        CHECK(sc.e[2].kind == AS_REPLAY_THROW && strcmp(sc.e[2].message, "m") == 0 && sc.e[2].nchunks == 0);
        CHECK(sc.e[2].len == strlen(sc.e[2].json));
    }
    as_replay_script_free(&sc);
    unlink(path);
    free(path);
}

static void test_entry_errors(void)
{
    static const struct { const char *in, *msg; long pos; } cases[] = {
        {"{\"kind\":\"hang\",\"readyFile\":3}", "e readyFile must be a non-empty string", 27},
        {"{\"kind\":\"hang\",\"readyFile\":\"../x\"}", "e readyFile \"../x\" must be a relative path beneath the cwd: a '.' or '..' component in a path", 27},
        {"{\"kind\":\"hang\",\"readyFile\":\"/tmp/x\"}", "e readyFile \"/tmp/x\" must be a relative path beneath the cwd: an absolute path", 27},
        {"{\"kind\":\"hang\",\"readyFile\":\"a\\u0000b\"}", "e readyFile \"a\\u0000b\" must be a relative path beneath the cwd: a NUL in a path", 27},
        {"{\"kind\":\"chunks\",\"chunks\":[{\"type\":\"nope\"}]}", "e.chunks[0] must have a known StreamChunk type", 35},
        {"[]", "e must be an object", 0},
        {"{\"kind\":\"x\"", NULL, 11},   // invalid JSON: message from the scanner
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        as_replay_entry e;
        as_replay_err err;
        int rc = as_replay_entry_parse(cases[i].in, strlen(cases[i].in), "e", &e, &err);
        CHECK(rc == -1);
        if (cases[i].msg) CHECK(strcmp(err.msg, cases[i].msg) == 0);
        else CHECK(strncmp(err.msg, "invalid JSON: ", 14) == 0);
        CHECK(err.pos == cases[i].pos);
    }
}

// expand(chunk) against the messages: 0 and the result, or -1 and the error.
static int expand(const char *messages, const char *chunk, as_buf *out, char *err, size_t errn)
{
    as_json j = {0};
    as_buf hay = {0};
    if (as_json_parse(&j, messages, strlen(messages))) return -2;
    as_replay_haystack(&j, 0, &hay);
    as_buf_reset(out);
    int rc = as_replay_expand(chunk, strlen(chunk), &hay, out, err, errn);
    as_buf_free(&hay);
    as_json_free(&j);
    return rc;
}

static void test_from_request(void)
{
    const char *msgs = "[{\"role\":\"user\",\"content\":\"goal g-1a2b, then goal g-9f3c\"},{\"content\":[\"\",\"id: 42\"]}]";
    as_buf out = {0};
    char err[200] = "";
    // the last match wins; its first group substitutes; other bytes verbatim
    CHECK(expand(msgs, "{\"type\":\"text-delta\",\"index\":0,\"text\":\"id {{fromRequest:goal (g-[0-9a-f]{4})}} \\u00e9\"}", &out, err, sizeof err) == 0);
    CHECK(out.p && !strcmp(out.p, "{\"type\":\"text-delta\",\"index\":0,\"text\":\"id g-9f3c é\"}"));
    // no group: the whole match; \d is translated; leaves join with LF, empty ones too
    CHECK(expand(msgs, "[\"{{fromRequest:id: \\\\d+}}\",\"{{fromRequest:3c\\n\\nid}}\",\"plain \\u00e9\"]", &out, err, sizeof err) == 0);
    CHECK(out.p && !strcmp(out.p, "[\"id: 42\",\"3c\\n\\nid\",\"plain \\u00e9\"]"));
    CHECK(expand(msgs, "[\"{{fromRequest:zzz}}\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:zzz}} matched nothing in the request"));
    CHECK(expand(msgs, "[\"{{fromRequest:goal\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:goal has no closing }}"));
    CHECK(expand(msgs, "[\"{{fromRequest:(g}}\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:(g}}: invalid pattern: unmatched ("));
    // back-references are refused, control bytes shown escaped
    CHECK(expand(msgs, "[\"{{fromRequest:(g)\\n\\\\1}}\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:(g)\\n\\1}}: invalid pattern: back-references (\\1) are not supported"));
    CHECK(expand(msgs, "[\"{{fromRequest:(g)\\n\\\\x}}\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:(g)\\n\\x}}: invalid pattern: unsupported escape \\x"));
    CHECK(expand(msgs, "[\"{{fromRequest:\\n(z)}}\"]", &out, err, sizeof err) == -1);
    CHECK(!strcmp(err, "{{fromRequest:\\n(z)}} matched nothing in the request"));
    // a match that cuts a UTF-8 character takes the whole of it
    CHECK(expand("[\"caf\\u00e9 ok\"]", "[\"{{fromRequest:caf.}}\"]", &out, err, sizeof err) == 0);
    CHECK(out.p && !strcmp(out.p, "[\"caf\u00e9\"]"));
    as_buf_free(&out);
}

int main(int argc, char **argv)
{
    as_setprog(argv[0]);
    (void)argc;
    test_from_session();
    test_load();
    test_entry_errors();
    test_from_request();
    if (fails) { fprintf(stderr, "replay: %d check(s) failed\n", fails); return 1; }
    return 0;
}
