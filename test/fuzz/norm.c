// Fuzz target: the normalizer core. For any JSON object line, the stdout,
// session and fixture normalizations produce one valid JSON object (the
// stdout one the same from the raw line as from its tokens), and a
// tokenized request header reads as tokenized. (Not idempotence: as in dsh,
// a "path" value's backslashes become '/' after the cwd rule ran, which can
// reveal a cwd spelling to a second pass.)
#include "acpsnap.h"
#include "norm.h"
#include <stdlib.h>
#include <string.h>

// A context: a cwd with two aliases, a UUID session id and, when plain,
// a Windows alias and a session id that is no UUID (then every string is
// examined); without them the SIMD trigger scan and the lone-UUID edit of
// as_norm_stdout_line are the ones that run.
static as_norm *make_ctx(int plain)
{
    as_norm *n = as_norm_new();
    static const char cwd[] = "/tmp/acp-snap-cwd-ab12cd34";
    as_norm_set_cwd(n, cwd, sizeof cwd - 1);
    as_norm_add_alias(n, "/real/tmp/acp-snap-cwd-ab12cd34", 31);
    as_norm_add_alias(n, plain ? "C:\\w\\cwd" : "/Users/me/w", plain ? 8 : 11);
    as_norm_add_session_id(n, "dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b", 36);
    if (plain) as_norm_add_session_id(n, "run-7", 5);
    return n;
}

static as_norm *ctx(void)
{
    static as_norm *n;
    if (!n) n = make_ctx(1);
    return n;
}

static as_norm *ctx_uuid(void)
{
    static as_norm *n;
    if (!n) n = make_ctx(0);
    return n;
}

// as_norm_stdout_line on the raw bytes writes what as_norm_stdout_frame
// writes from j's tokens.
static void same_stdout(as_norm *n, const as_json *j, const uint8_t *data, size_t size)
{
    static as_json l;
    as_buf a = {0}, b = {0};
    as_norm_reset_ids(n);
    as_norm_stdout_frame(n, j, &a);
    as_norm_reset_ids(n);
    if (as_norm_stdout_line(n, &l, (const char *)data, size, &b) || b.n != a.n || memcmp(b.p, a.p, a.n)) abort();
    as_buf_free(&a);
    as_buf_free(&b);
}

static void must_parse(as_json *j, const as_buf *b)
{
    if (as_json_parse(j, b->p ? b->p : "", b->n) || j->t[0].type != AS_JOBJ) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static as_json j, k;
    as_norm *n = ctx();
    if (as_json_parse(&j, (const char *)data, size) || j.t[0].type != AS_JOBJ) return 0;
    as_buf a = {0};

    as_norm_reset_ids(n);
    as_norm_stdout_frame(n, &j, &a);
    must_parse(&k, &a);
    same_stdout(n, &j, data, size);
    same_stdout(ctx_uuid(), &j, data, size);

    as_buf_reset(&a);
    as_norm_session_record(n, &j, AS_NS_COMPARE, &a);
    must_parse(&k, &a);
    as_buf_reset(&a);
    as_norm_session_record(n, &j, AS_NS_COMPARE | AS_NS_HEADER, &a);
    must_parse(&k, &a);
    as_buf_reset(&a);
    as_norm_session_record(NULL, &j, AS_NS_PROJECT | AS_NS_TOKENIZE, &a);
    must_parse(&k, &a);
    if (as_norm_header_state(&k, AS_HDR_ALL) == AS_HDR_RAW) abort();

    as_buf_reset(&a);
    as_norm_fixture_cwd(n, "acp-snap-cwd-ab12cd34", 21, &j, &a);
    must_parse(&k, &a);
    as_buf_free(&a);
    return 0;
}
