// Unit tests of common/: the JSON.stringify string writer, decoding, member
// splicing, the scanner's token spans, exact key sets and compaction.
#include "acpsnap.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; fprintf(stderr, "json_unit: %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

#define PARSE(text) (!as_json_parse(&j, text, strlen(text)))   // into the as_json j in scope

static void write_is(const char *in, size_t n, const char *want)
{
    as_buf b = {0};
    as_jstr_write(&b, in, n);
    CHECK(b.n == strlen(want) && !memcmp(b.p, want, b.n), "write: got %s want %s", b.p, want);
    as_buf_free(&b);
}

static void roundtrip(const char *json, const char *decoded_utf8, const char *rewritten)
{
    as_json j = {0};
    as_buf d = {0};
    CHECK(!as_json_parse(&j, json, strlen(json)), "parse %s: %s", json, j.err);
    as_json_str(&j, 0, &d);
    CHECK(d.n == strlen(decoded_utf8) && !memcmp(d.p, decoded_utf8, d.n), "decode %s", json);
    write_is(d.p, d.n, rewritten);
    as_buf_free(&d);
    as_json_free(&j);
}

static void drop_is(const char *obj, const char *const *keys, const char *want)
{
    as_json j = {0};
    as_buf b = {0};
    CHECK(!as_json_parse(&j, obj, strlen(obj)), "parse %s", obj);
    as_json_drop_keys(&j, 0, keys, &b);
    CHECK(b.n == strlen(want) && !memcmp(b.p, want, b.n), "drop: got %s want %s", b.p, want);
    as_buf_free(&b);
    as_json_free(&j);
}

// as_buf_puti against printf: the edges of its 8-digit and 2-digit steps,
// the int64 limits, and a million pseudo-random values of every magnitude.
static void puti_is(int64_t v)
{
    char want[32];
    as_buf b = {0};
    as_buf_puti(&b, v);
    snprintf(want, sizeof want, "%" PRId64, v);
    CHECK(b.n == strlen(want) && !memcmp(b.p, want, b.n), "puti: got %.*s want %s", (int)b.n, b.p, want);
    as_buf_free(&b);
}

static void puti_all(void)
{
    static const int64_t edge[] = {0, 1, 9, 10, 99, 100, 101, 999, 99999999, 100000000, 100000001, 1000000000,
                                   9999999999999999LL, 10000000000000000LL, 1796028374883, 9007199254740991LL,
                                   INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        puti_is(edge[i]);
        if (edge[i] != INT64_MIN) puti_is(-edge[i]);
    }
    uint64_t x = 88172645463325252ULL;
    for (int k = 0; k < 1000000; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int64_t v = (int64_t)(x >> (x & 63));
        puti_is(k & 1 && v != INT64_MIN ? -v : v);
    }
}

int main(void)
{
    puti_all();
    // JSON.stringify: short escapes, other C0 as lowercase \u00xx, DEL and
    // non-ASCII raw, '/' unescaped.
    write_is("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    write_is("\b\f\n\r\t", 5, "\"\\b\\f\\n\\r\\t\"");
    write_is("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\"");
    write_is("/é中🙂", strlen("/é中🙂"), "\"/é中🙂\"");
    write_is("", 0, "\"\"");
    // escapes decode; a pair joins; lone surrogates survive as \udxxx
    roundtrip("\"\\u00e9\\u4e2d\"", "é中", "\"é中\"");
    roundtrip("\"\\ud83d\\ude42\"", "🙂", "\"🙂\"");
    roundtrip("\"\\ud83d\"", "\xed\xa0\xbd", "\"\\ud83d\"");
    roundtrip("\"x\\udc00y\"", "x\xed\xb0\x80y", "\"x\\udc00y\"");
    roundtrip("\"\\/\\u0041\\u001F\"", "/A\x1f", "\"/A\\u001f\"");
    // member splicing keeps every other byte
    static const char *const env[] = {"seq", "time", NULL};
    drop_is("{\"type\":\"a\",\"seq\":1,\"time\":2,\"data\":{}}", env, "{\"type\":\"a\",\"data\":{}}");
    drop_is("{\"seq\":1,\"time\":2,\"type\":\"a\"}", env, "{\"type\":\"a\"}");
    drop_is("{\"type\":\"a\",\"data\":1,\"seq\":1,\"time\":2}", env, "{\"type\":\"a\",\"data\":1}");
    drop_is("{\"seq\":1}", env, "{}");
    drop_is("{ \"a\" : 1 , \"seq\" : 2 }", env, "{ \"a\" : 1 }");
    // spans and lookups
    as_json j = {0};
    const char *t = " {\"a\":[1,{\"b\":null}],\"c\":\"d\"} ";
    CHECK(!as_json_parse(&j, t, strlen(t)), "parse");
    int c = as_json_get(&j, 0, "c");
    CHECK(c > 0 && as_json_streq(&j, c, "d"), "get c");
    int a = as_json_get(&j, 0, "a");
    CHECK(a > 0 && j.t[a].count == 2 && as_tok_len(&j, a) == strlen("[1,{\"b\":null}]"), "array span");
    CHECK(as_json_get(&j, 0, "b") == -1, "b is not a member of the root");
    int64_t v;
    CHECK(!as_json_parse(&j, "9007199254740991", 16) && as_json_int(&j, 0, &v) && v == 9007199254740991LL, "safe max");
    CHECK(!as_json_parse(&j, "9007199254740992", 16) && !as_json_int(&j, 0, &v), "past safe max");
    CHECK(!as_json_parse(&j, "1.0", 3) && !as_json_int(&j, 0, &v), "1.0 is not a plain integer");
    // exact key sets (hasExactKeys): no extra, no missing, no repeated key
    static const as_key kd[] = {AS_KEY("kind"), AS_KEY("chunks")};
    int idx[2];
    CHECK(PARSE("{\"chunks\":[],\"kind\":\"x\"}") && as_json_exact(&j, 0, kd, 2, idx)
          && idx[0] == 4 && idx[1] == 2, "exact keys in any order");
    CHECK(PARSE("{\"kind\":1,\"chunks\":2,\"x\":3}") && !as_json_exact(&j, 0, kd, 2, NULL), "an extra key");
    CHECK(PARSE("{\"kind\":1,\"kind\":2}") && !as_json_exact(&j, 0, kd, 2, NULL), "a repeated key");
    CHECK(PARSE("{\"kind\":1}") && !as_json_exact(&j, 0, kd, 2, NULL) && as_json_exact(&j, 0, kd, 1, NULL),
          "a missing key; a prefix of the list");
    CHECK(PARSE("[]") && !as_json_exact(&j, 0, kd, 0, NULL), "an array is no object");
    // AS_TOK_IS on an absent member
    CHECK(PARSE("{\"t\":\"x\"}") && AS_TOK_IS(&j, as_json_get(&j, 0, "t"), "x")
          && !AS_TOK_IS(&j, as_json_get(&j, 0, "u"), "x"), "AS_TOK_IS and -1");
    // compaction keeps string bytes
    as_buf cb = {0};
    static const char loose[] = "{ \"a\" :\t[1, \" x \\\" y\"]\n}";
    as_json_compact(loose, strlen(loose), &cb);
    CHECK(!strcmp(cb.p, "{\"a\":[1,\" x \\\" y\"]}"), "compact: got %s", cb.p);
    as_buf_free(&cb);
    as_json_free(&j);
    if (fails) return 1;
    puts("json_unit: ok");
    return 0;
}
