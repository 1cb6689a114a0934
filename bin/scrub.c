// scrub - normalization of ACP transcripts and session logs (scrub(1)):
// the run's volatile values (session ids, the generated cwd, UUIDs, spill
// paths, times) become stable tokens, so `scrub | diff` shows what changed.
#include "acpsnap.h"
#include "norm.h"
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <jq.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: scrub (--stdout | --session | --fixture) [options] [file...]\n"
    "Normalizes a run's volatile values into stable tokens.\n"
    "  -o, --stdout           an ACP stdout transcript: every line a JSON object,\n"
    "                         JSON-RPC ids renumbered 1, 2, ... in first-seen order\n"
    "  -s, --session          a session log (raw or projected) → the comparison form\n"
    "  -F, --fixture          a harvested log → the committed fixture form\n"
    "  -c, --cwd DIR          the run's generated cwd (→ {{cwd}})\n"
    "  -a, --cwd-alias DIR    another spelling of the cwd (repeatable)\n"
    "  -i, --session-id ID    a session id of the run (→ {{sessionId}}; repeatable)\n"
    "  -C, --context FILE     the context as JSON: {sessionIds, cwd, cwdAliases}\n"
    "                         or a whole run.json (its normalizeContext)\n"
    "  -f, --rules FILE       a jq program applied to each record afterwards: it\n"
    "                         must give one object (see RULE FILES in scrub(1))\n"
    "  -N, --scenario NAME    the scenario's name, $scenario in the rule program\n"
    "  -n, --native-paths     keep cwd-rooted path separators as captured\n"
    "  -P, --persisted        --session: keep the envelopes (times zeroed)\n"
    "  -k, --keep-cwd         --fixture: leave the cwd literal (workspaceParent runs)\n"
    "  -h, --help             this text\n"
    "      --version          the version\n"
    "Without a context, --session takes each log's own header id and cwd.\n"
    "Exit status: 0 ok, 2 trouble.\n";

enum { M_NONE, M_STDOUT, M_SESSION, M_FIXTURE };

typedef struct {
    int mode;
    int persisted, keep_cwd;
    as_norm *norm;        // the context given on the command line
    as_norm *own;         // per-file context (session mode without one; fixture mode)
    as_out *out;
    const char *rules_path;
    const char *scenario;  // $scenario of the rules (NULL: null)
    jq_state *jq;
    as_buf prog;           // the rule program behind the prelude
    const as_norm *bound;  // the context the program was compiled with
    jv ids, counts;        // renumber: "name:base64(id)" → its number; name → numbers given
    char nonce[17];        // renumber's placeholders carry it (a record cannot forge one)
    as_json j, j2, jr;
    as_buf a, b, c;
    long lineno;
    const char *file;
} scrub;

// ---------------------------------------------------------------- jq rules
//
// A rule file is untrusted: one self-contained jq program that maps each
// record to exactly one object. Module directives are refused before jq
// sees them (libjq would search the file system), the library path is empty
// (modulemeta finds nothing), `input`/`inputs` find no further input, and
// `debug`/`stderr` print on stderr in the house format. A program that gives
// no value or several, halts or errors is trouble naming the record.

static as_buf jq_msgs;

// Appends s with its control characters escaped (\n kept when keep_nl), so
// no message of a rule file can drive the terminal.
static void put_clean(as_buf *o, const char *s, size_t n, int keep_nl)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && !(keep_nl && (c == '\n' || c == '\t'))) || c == 0x7f) as_buf_printf(o, "\\u%04x", c);
        else as_buf_putc(o, (char)c);
    }
}

static void jq_err(void *data, jv msg)
{
    (void)data;
    if (jv_get_kind(msg) == JV_KIND_STRING) {
        if (jq_msgs.n) as_buf_putc(&jq_msgs, '\n');
        put_clean(&jq_msgs, jv_string_value(msg), (size_t)jv_string_length_bytes(jv_copy(msg)), 1);
    }
    jv_free(msg);
}

static void jq_nomem(void *data)
{
    (void)data;
    as_die(AS_TROUBLE, "out of memory");
}

// The tag of a value that the prelude's `stderr` hands to the debug callback
// (libjq 1.6 has no stderr callback: its `stderr` writes raw JSON).
#define STDERR_TAG "acpsnap:scrub:stderr"
// The prelude, on the program's first line so that line numbers stay:
// `stderr`, and renumber(re; name), which replaces each match in the strings
// of its input with a placeholder "\0<nonce>:<name>:<base64 of the id>\0";
// put_str turns each into {{name:N}} when the record is written, N kept
// across the records of one input (libjq keeps no state across records).
static const char prelude_fmt[] =
    "def stderr: . as $__v | ([\"" STDERR_TAG "\", $__v] | debug | empty), $__v; "
    "def renumber($__re; $__name): "
    "if ($__name | type) != \"string\" or ($__name | test(\"\\\\A[A-Za-z][A-Za-z0-9_]*\\\\z\") | not) "
    "then error(\"renumber: the name must be a letter, then letters, digits or _\") "
    "else def __rn: if type == \"string\" then . as $__s "
    "| reduce (match($__re; \"g\") | select(.length > 0)) as $__m ({o: \"\", at: 0}; "
    ".o += $__s[.at:$__m.offset] + \"\\u0000%s:\" + $__name + \":\" + ($__m.string | @base64) + \"\\u0000\" "
    "| .at = $__m.offset + $__m.length) | .o + $__s[.at:] "
    "elif type == \"array\" then map(__rn) elif type == \"object\" then map_values(__rn) else . end; "
    "__rn end; ";

// `debug` and the prelude's `stderr`: "scrub: file:line: rules: debug: <json>".
static void jq_debug(void *data, jv v)
{
    const scrub *sc = data;
    const char *what = "debug";
    if (jv_get_kind(v) == JV_KIND_ARRAY && jv_array_length(jv_copy(v)) == 2) {
        jv tag = jv_array_get(jv_copy(v), 0);
        if (jv_get_kind(tag) == JV_KIND_STRING && !strcmp(jv_string_value(tag), STDERR_TAG)) {
            what = "stderr";
            v = jv_array_get(v, 1);
        }
        jv_free(tag);
    }
    jv s = jv_dump_string(v, 0);
    as_warn_at(sc->file, sc->lineno, 0, "%s: %s: %s", sc->rules_path, what, jv_string_value(s));
    jv_free(s);
}

// `input` and `inputs`: a rule sees one record, nothing more.
static jv jq_input(jq_state *jq, void *data)
{
    (void)jq, (void)data;
    return jv_invalid_with_msg(jv_string("input and inputs are not available: a rule program sees one record at a time"));
}

// Dies when the program starts with a module directive (module, import,
// include), the only place where jq's grammar allows one.
static void refuse_modules(const char *path, const char *p)
{
    long line = 1;
    for (;;) {
        if (*p == '\n') line++;
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        else if (*p == '#') p += strcspn(p, "\n");
        else break;
    }
    static const char *const kw[] = {"module", "import", "include"};
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++) {
        size_t n = strlen(kw[i]);
        char c = p[n];
        if (!strncmp(p, kw[i], n) && !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                       (c >= '0' && c <= '9') || (c == ':' && p[n + 1] == ':')))
            as_die_at(path, line, 0, "%s: module directives (module, import, include) are not supported: "
                      "a rule file is one self-contained jq program", kw[i]);
    }
}

// Dies with jq's compile messages, each "jq: error: MSG at <top-level>, line
// N:" (and the program's line after it) as "scrub: file:N: MSG"; jq's count
// of errors is dropped. Anything else is shown as jq wrote it.
_Noreturn static void compile_die(const scrub *sc)
{
    static const char pre[] = "jq: error: ", at[] = " at <top-level>, line ";
    const char *m = jq_msgs.p ? jq_msgs.p : "";
    as_buf first = {0};
    long first_line = 0;
    int n = 0;
    for (const char *p = m; (p = strstr(p, pre)); ) {
        const char *e = strstr(p, at), *nl = strchr(p, '\n');
        if (!e || (nl && nl < e)) break;
        char *end;
        long line = strtol(e + sizeof at - 1, &end, 10);
        if (*end != ':') break;
        p += sizeof pre - 1;
        if (n++) as_warn_at(sc->rules_path, first_line, 0, "%s", first.p);
        as_buf_reset(&first);
        as_buf_put(&first, p, (size_t)(e - p));
        first_line = line;
        p = end;
    }
    if (n) as_die_at(sc->rules_path, first_line, 0, "%s", first.p);
    as_die(AS_TROUBLE, "%s: %s", sc->rules_path, *m ? m : "jq program does not compile");
}

// size - 1 random hex digits and a NUL into out.
static void nonce_hex(char *out, size_t size)
{
    unsigned char r[32] = {0};
    size_t n = (size - 1 + 1) / 2;
    if (n > sizeof r) n = sizeof r;
    if (getrandom(r, n, 0) != (ssize_t)n) {
        unsigned long x = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16) ^ (unsigned long)(uintptr_t)&r;
        for (size_t i = 0; i < n; i++, x = x * 6364136223846793005UL + 1442695040888963407UL) r[i] = (unsigned char)(x >> 56);
    }
    for (size_t i = 0; i + 1 < size; i++) out[i] = "0123456789abcdef"[(r[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[size - 1] = 0;
}

// Compiles the program with the rule variables of context ctx ($cwd,
// $cwdAliases, $sessionIds, $scenario); dies when it does not compile.
static void rules_bind(scrub *sc, const as_norm *ctx)
{
    as_buf c = {0};
    as_norm_context_json(ctx, &c);
    jv args = jv_parse_sized(c.p, (int)c.n);
    as_buf_free(&c);
    if (!jv_is_valid(args)) as_die(AS_TROUBLE, "%s: the rule variables do not parse", sc->rules_path);
    args = jv_object_set(args, jv_string("scenario"), sc->scenario ? jv_string(sc->scenario) : jv_null());
    as_buf_reset(&jq_msgs);
    if (!jq_compile_args(sc->jq, sc->prog.p, args)) compile_die(sc);
    sc->bound = ctx;
}

static void rules_compile(scrub *sc)
{
    as_buf prog = {0};
    as_read_file(sc->rules_path, &prog);
    refuse_modules(sc->rules_path, prog.p ? prog.p : "");
    sc->jq = jq_init();
    if (!sc->jq) as_die(AS_TROUBLE, "unable to initialise jq");
    jq_set_nomem_handler(sc->jq, jq_nomem, NULL);
    jq_set_error_cb(sc->jq, jq_err, NULL);
    jq_set_input_cb(sc->jq, jq_input, NULL);
    jq_set_debug_cb(sc->jq, jq_debug, sc);
    jq_set_attr(sc->jq, jv_string("JQ_LIBRARY_PATH"), jv_array());
    jq_set_attr(sc->jq, jv_string("JQ_ORIGIN"), jv_null());
    jq_set_attr(sc->jq, jv_string("PROGRAM_ORIGIN"), jv_null());
    nonce_hex(sc->nonce, sizeof sc->nonce);
    as_buf_printf(&sc->prog, prelude_fmt, sc->nonce);
    as_buf_put(&sc->prog, prog.p ? prog.p : "", prog.n);
    as_buf_free(&prog);
    sc->ids = jv_object();
    sc->counts = jv_object();
    rules_bind(sc, sc->norm);
}

// renumber's numbering starts over (each input file).
static void rules_reset(scrub *sc)
{
    if (!sc->jq) return;
    jv_free(sc->ids);
    jv_free(sc->counts);
    sc->ids = jv_object();
    sc->counts = jv_object();
}

// Writes the JSON string s[0..n) with each renumber placeholder replaced by
// {{name:N}}: N the number of its id, the next one for its name when the id
// is new.
static void put_str(scrub *sc, as_buf *o, const char *s, size_t n)
{
    char mark[20] = {0};
    size_t ml = (size_t)snprintf(mark + 1, sizeof mark - 1, "%s:", sc->nonce) + 1;
    const char *m = sc->jq ? memmem(s, n, mark, ml) : NULL;
    if (!m) { as_jstr_write(o, s, n); return; }
    as_buf t = {0};
    const char *p = s, *end = s + n;
    while (m) {
        const char *name = m + ml, *colon = memchr(name, ':', (size_t)(end - name));
        const char *stop = colon ? memchr(colon, 0, (size_t)(end - colon)) : NULL;
        if (!stop) break;   // (not a placeholder the prelude wrote: left as it is)
        as_buf_put(&t, p, (size_t)(m - p));
        jv key = jv_string_sized(name, (int)(stop - name));
        jv num = jv_object_get(jv_copy(sc->ids), jv_copy(key));
        if (!jv_is_valid(num)) {
            jv nk = jv_string_sized(name, (int)(colon - name));
            jv c = jv_object_get(jv_copy(sc->counts), jv_copy(nk));
            double k = (jv_is_valid(c) ? jv_number_value(c) : 0) + 1;
            jv_free(c);
            sc->counts = jv_object_set(sc->counts, nk, jv_number(k));
            num = jv_number(k);
            sc->ids = jv_object_set(sc->ids, jv_copy(key), jv_copy(num));
        }
        jv_free(key);
        as_buf_puts(&t, "{{");
        as_buf_put(&t, name, (size_t)(colon - name));
        as_buf_printf(&t, ":%.0f}}", jv_number_value(num));
        jv_free(num);
        p = stop + 1;
        m = memmem(p, (size_t)(end - p), mark, ml);
    }
    as_buf_put(&t, p, (size_t)(end - p));
    as_jstr_write(o, t.p ? t.p : "", t.n);
    as_buf_free(&t);
}

// Writes a jq value compactly as JSON.stringify would (strings escaped alike,
// integral numbers below 1e21 without exponent). -1 when it nests deeper
// than the JSON parser's limit.
static int put_jv(scrub *sc, as_buf *o, jv v, int depth)
{
    int r = 0;
    if (depth > 10000) return -1;
    switch (jv_get_kind(v)) {
    case JV_KIND_NULL: as_buf_puts(o, "null"); break;
    case JV_KIND_TRUE: as_buf_puts(o, "true"); break;
    case JV_KIND_FALSE: as_buf_puts(o, "false"); break;
    case JV_KIND_NUMBER: {
        double d = jv_number_value(v);
        if (d == 0) as_buf_putc(o, '0');
        else if (d == floor(d) && fabs(d) < 1e21) as_buf_printf(o, "%.0f", d);
        else if (isnan(d) || isinf(d)) as_buf_puts(o, "null");
        else {
            jv s = jv_dump_string(jv_copy(v), 0);
            as_buf_puts(o, jv_string_value(s));
            jv_free(s);
        }
        break;
    }
    case JV_KIND_STRING:
        put_str(sc, o, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
        break;
    case JV_KIND_ARRAY: {
        as_buf_putc(o, '[');
        int n = jv_array_length(jv_copy(v));
        for (int i = 0; i < n && !r; i++) {
            if (i) as_buf_putc(o, ',');
            jv e = jv_array_get(jv_copy(v), i);
            r = put_jv(sc, o, e, depth + 1);
            jv_free(e);
        }
        as_buf_putc(o, ']');
        break;
    }
    case JV_KIND_OBJECT: {
        as_buf_putc(o, '{');
        int first = 1;
        for (int it = jv_object_iter(v); !r && jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
            jv k = jv_object_iter_key(v, it), e = jv_object_iter_value(v, it);
            if (!first) as_buf_putc(o, ',');
            first = 0;
            put_str(sc, o, jv_string_value(k), (size_t)jv_string_length_bytes(jv_copy(k)));
            as_buf_putc(o, ':');
            r = put_jv(sc, o, e, depth + 1);
            jv_free(k);
            jv_free(e);
        }
        as_buf_putc(o, '}');
        break;
    }
    default: break;
    }
    return r;
}

// The member of object token obj (of the record j) whose key is k's bytes,
// the value token, or -1. *cur walks the record's keys in step with the
// program's value, so a record whose keys stay in order costs one step each.
static int member_of(const as_json *j, int obj, int *cur, jv k, as_buf *tmp)
{
    const char *ks = jv_string_value(k);
    size_t kn = (size_t)jv_string_length_bytes(jv_copy(k));
    for (int pass = 0; pass < 2; pass++) {
        int key = pass ? as_json_firstkey(j, obj) : *cur;
        for (int tries = 0; key >= 0; key = as_json_nextkey(j, key)) {
            as_buf_reset(tmp);
            as_json_str(j, key, tmp);
            if (tmp->n == kn && !memcmp(tmp->p ? tmp->p : "", ks, kn)) {
                *cur = as_json_nextkey(j, key);
                return key + 1;
            }
            if (!pass || ++tries > 64) break;   // (a scan of a large object stops early: re-serialized)
        }
    }
    return -1;
}

// put_jv, but a value equal to the record's own at tok (-1: none) keeps the
// record's bytes: a string or number the program left alone is not
// re-serialized, a container is walked member by member.
static int put_merged(scrub *sc, as_buf *o, jv v, const as_json *j, int tok, int depth)
{
    int r = 0;
    if (depth > 10000) return -1;
    jv_kind kind = jv_get_kind(v);
    int type = tok >= 0 ? j->t[tok].type : -1;
    if (kind == JV_KIND_STRING && type == AS_JSTR) {
        as_buf_reset(&sc->c);
        as_json_str(j, tok, &sc->c);
        size_t n = (size_t)jv_string_length_bytes(jv_copy(v));
        if (sc->c.n == n && !memcmp(sc->c.p ? sc->c.p : "", jv_string_value(v), n)) {
            as_buf_put(o, as_tok_p(j, tok), as_tok_len(j, tok));
            return 0;
        }
    } else if (kind == JV_KIND_NUMBER && type == AS_JNUM) {
        as_buf_reset(&sc->c);
        as_buf_put(&sc->c, as_tok_p(j, tok), as_tok_len(j, tok));
        as_buf_putc(&sc->c, 0);
        if (strtod(sc->c.p, NULL) == jv_number_value(v)) {
            as_buf_put(o, as_tok_p(j, tok), as_tok_len(j, tok));
            return 0;
        }
    } else if (kind == JV_KIND_ARRAY && type == AS_JARR) {
        as_buf_putc(o, '[');
        int n = jv_array_length(jv_copy(v)), el = as_json_first(j, tok);
        for (int i = 0; i < n && !r; i++) {
            if (i) as_buf_putc(o, ',');
            jv e = jv_array_get(jv_copy(v), i);
            r = put_merged(sc, o, e, j, el, depth + 1);
            jv_free(e);
            if (el >= 0) el = as_json_nextel(j, el);
        }
        as_buf_putc(o, ']');
        return r;
    } else if (kind == JV_KIND_OBJECT && type == AS_JOBJ) {
        as_buf_putc(o, '{');
        int first = 1, cur = as_json_firstkey(j, tok);
        as_buf tmp = {0};
        for (int it = jv_object_iter(v); !r && jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
            jv k = jv_object_iter_key(v, it), e = jv_object_iter_value(v, it);
            if (!first) as_buf_putc(o, ',');
            first = 0;
            int val = member_of(j, tok, &cur, k, &tmp);
            if (val >= 0) as_buf_put(o, as_tok_p(j, val - 1), as_tok_len(j, val - 1));
            else put_str(sc, o, jv_string_value(k), (size_t)jv_string_length_bytes(jv_copy(k)));
            as_buf_putc(o, ':');
            r = put_merged(sc, o, e, j, val, depth + 1);
            jv_free(k);
            jv_free(e);
        }
        as_buf_free(&tmp);
        as_buf_putc(o, '}');
        return r;
    }
    return put_jv(sc, o, v, depth) < 0 ? -1 : 0;
}

_Noreturn static void rules_die(const scrub *sc, const char *msg)
{
    as_die_at(sc->file, sc->lineno, 0, "%s: %s", sc->rules_path, msg);
}

// Dies with a message (escaped) that jq handed over: a string as it is,
// anything else as JSON. Consumes m.
_Noreturn static void rules_die_jv(scrub *sc, const char *pre, jv m)
{
    as_buf t = {0};
    as_buf_puts(&t, pre);
    if (jv_get_kind(m) == JV_KIND_STRING) {
        size_t n = (size_t)jv_string_length_bytes(jv_copy(m));
        const char *s = jv_string_value(m);
        if (*pre && n && s[n - 1] == '\n') n--;   // halt_error's message usually ends its line
        put_clean(&t, s, n, 0);
    } else {
        jv s = jv_dump_string(m, 0);
        m = jv_null();
        as_buf_puts(&t, jv_string_value(s));
        as_buf_puts(&t, *pre ? "" : " (not a string)");
        jv_free(s);
    }
    jv_free(m);
    rules_die(sc, t.p);
}

// The end of a run (r invalid): dies when the program halted or failed.
static void rules_end(scrub *sc, jv r)
{
    if (jq_halted(sc->jq)) {
        jv_free(r);
        jv code = jq_get_exit_code(sc->jq);
        if (jv_get_kind(code) != JV_KIND_NUMBER) {
            jv_free(code);
            rules_die(sc, "the program called halt; a rule must give exactly one value per record");
        }
        char pre[96];
        snprintf(pre, sizeof pre, "the program called halt_error (exit code %g): ", jv_number_value(code));
        jv_free(code);
        rules_die_jv(sc, pre, jq_get_error_message(sc->jq));
    }
    if (jv_invalid_has_msg(jv_copy(r))) rules_die_jv(sc, "", jv_invalid_get_msg(r));
    jv_free(r);
}

// Runs the rules over one normalized record and writes its one result.
static void rules_apply(scrub *sc, const char *line, size_t len)
{
    if (len > 0x7fffffff) rules_die(sc, "the record is too large for jq");
    jv in = jv_parse_sized(line, (int)len);
    if (!jv_is_valid(in)) rules_die_jv(sc, "jq cannot parse the record: ", jv_invalid_get_msg(in));
    jq_start(sc->jq, in, 0);
    jv r = jq_next(sc->jq);
    if (!jv_is_valid(r)) {
        rules_end(sc, r);
        rules_die(sc, "the program gave no value for this record; a rule must give exactly one");
    }
    jv more = jq_next(sc->jq);
    if (jv_is_valid(more)) {
        jv_free(more);
        jv_free(r);
        rules_die(sc, "the program gave more than one value for this record; a rule must give exactly one");
    }
    rules_end(sc, more);
    if (jv_get_kind(r) != JV_KIND_OBJECT) {
        jv_free(r);
        rules_die(sc, "the program's value for this record is not a JSON object");
    }
    // (the record again as tokens: what the program left alone keeps its bytes)
    if (as_json_parse(&sc->jr, line, len) < 0) as_json_die(&sc->jr, sc->file, sc->lineno);
    as_buf_reset(&sc->b);
    int deep = put_merged(sc, &sc->b, r, &sc->jr, 0, 0);
    jv_free(r);
    if (deep) rules_die(sc, "the program's value for this record nests deeper than 10000 levels");
    as_out_line(sc->out, sc->b.p, sc->b.n);
}

static void emit(scrub *sc, const char *line, size_t len)
{
    if (sc->jq) rules_apply(sc, line, len);
    else as_out_line(sc->out, line, len);
}

// ---------------------------------------------------------------- modes

// Parses one line into j; dies on invalid JSON or a non-object.
static void parse_object(scrub *sc, as_json *j, const char *line, size_t len, const char *what)
{
    if (as_json_parse(j, line, len) < 0) as_json_die(j, sc->file, sc->lineno);
    if (j->t[0].type != AS_JOBJ) as_die_at(sc->file, sc->lineno, 0, "%s is not a JSON object", what);
}

// --stdout: every line a JSON object; an empty line is trouble as in a
// session log (an empty input is an empty transcript).
static void do_stdout(scrub *sc, const char *path)
{
    as_in *in = as_in_open(path);
    const char *line;
    size_t len;
    sc->file = as_in_name(in);
    as_norm_reset_ids(sc->norm);
    while (as_in_line(in, &line, &len)) {
        sc->lineno = as_in_lineno(in);
        if (!len) as_die_at(sc->file, sc->lineno, 0, "empty line");
        as_buf_reset(&sc->a);
        int rc = as_norm_stdout_line(sc->norm, &sc->j, line, len, &sc->a);
        if (rc < 0) as_json_die(&sc->j, sc->file, sc->lineno);
        if (rc > 0) as_die_at(sc->file, sc->lineno, 0, "stdout line is not a JSON object");
        emit(sc, sc->a.p, sc->a.n);
    }
    as_in_close(in);
}

// One record of a session log (its tokens j, root 0), normalized and written.
static void session_record(scrub *sc, const as_norm *ctx, const as_json *j, unsigned flags)
{
    as_buf_reset(&sc->a);
    as_norm_session_record(ctx, j, flags, &sc->a);
    emit(sc, sc->a.p, sc->a.n);
}

// A chunk member line the decoder matched to its layout (as_event_member),
// normalized as as_norm_session_record would: the envelope dropped (or its
// time zeroed, --persisted), every string value scrubbed, all else as it
// stands; its layout is fixed, so it needs no tokens.
static void member_record(scrub *sc, const as_norm *ctx, const as_member *m, unsigned flags)
{
    as_buf *b = &sc->a;
    int scr = flags & AS_NS_SCRUB;
#define PUT(lit) as_buf_put(b, lit, sizeof lit - 1)
#define STR(sp) (scr ? as_norm_record_string(ctx, (sp).p, (sp).n, 0, b) : as_buf_put(b, (sp).p, (sp).n))
    static const as_span ty = {"\"assistant/chunk\"", 17};
    static const as_span kinds[] = {{"", 0}, {"\"text-delta\"", 12}, {"\"reasoning-delta\"", 17}, {"\"tool-call-delta\"", 17}};
    as_buf_reset(b);
    PUT("{\"type\":");
    STR(ty);
    if (!(flags & AS_NS_PROJECT)) {
        PUT(",\"seq\":");
        as_buf_put(b, m->seq.p, m->seq.n);
        PUT(",\"time\":");
        if (flags & AS_NS_VOLATILE) PUT("0"); else as_buf_put(b, m->time.p, m->time.n);
    }
    PUT(",\"data\":{\"turn\":");
    as_buf_put(b, m->turn.p, m->turn.n);
    PUT(",\"step\":");
    as_buf_put(b, m->step.p, m->step.n);
    PUT(",\"chunk\":{\"type\":");
    STR(kinds[m->kind]);
    PUT(",\"index\":");
    as_buf_put(b, m->index.p, m->index.n);
    if (m->kind == AS_DELTA_TOOL) {
        PUT(",\"id\":");
        STR(m->id);
        if (m->name.p) { PUT(",\"name\":"); STR(m->name); }
        PUT(",\"argumentsDelta\":");
    } else {
        PUT(",\"text\":");
    }
    STR(m->payload);
    PUT("}}}");
#undef STR
#undef PUT
    emit(sc, b->p, b->n);
}

// --session: the codec validates the log (header, types, forms, rows) as
// every tool does; each source line is normalized as it stands (no repacking).
static void do_session(scrub *sc, const char *path)
{
    as_sess *s = as_sess_open(path);
    as_sess_lazy(s);   // a member line is normalized from its parts (member_record)
    const char *line;
    size_t len;
    const as_norm *ctx = sc->norm;
    unsigned flags = sc->persisted ? AS_NS_COMPARE & ~AS_NS_PROJECT : AS_NS_COMPARE;
    sc->file = as_sess_name(s);
    sc->lineno = 1;
    as_sess_header(s, &line, &len);
    parse_object(sc, &sc->j, line, len, "record");
    if (!as_norm_has_context(sc->norm)) {
        as_norm_from_header(sc->own, &sc->j);
        ctx = sc->own;
        if (sc->jq) rules_bind(sc, ctx);   // $cwd and $sessionIds: this log's
    }
    session_record(sc, ctx, &sc->j, flags | AS_NS_HEADER);
    as_event ev;
    while (as_sess_next(s, &ev)) {
        if (ev.member > 0) continue;   // a packed row is one line: done at its first member
        sc->lineno = ev.lineno;
        if (ev.member < 0 && !ev.projected) {   // a persisted event is its source line
            as_member m;
            if (as_event_member(&ev, &m)) member_record(sc, ctx, &m, flags);
            else session_record(sc, ctx, ev.j, flags);
            continue;
        }
        as_sess_line(s, &line, &len);
        parse_object(sc, &sc->j, line, len, "record");
        session_record(sc, ctx, &sc->j, flags);
    }
    as_sess_close(s);
}

// --fixture: the packer's output lines.
static void fixture_emit(void *ctx, const char *line, size_t len, long srcline)
{
    scrub *sc = ctx;
    sc->lineno = srcline;
    emit(sc, line, len);
}

// The cwd-tokenized, header-tokenized form of one record into sc->b, parsed into sc->j2.
static void fixture_record(scrub *sc, const char *base, size_t bl, const as_json *j)
{
    const as_json *src = j;
    if (bl) {
        as_buf_reset(&sc->a);
        as_norm_fixture_cwd(sc->own, base, bl, j, &sc->a);
        if (as_json_parse(&sc->j2, sc->a.p, sc->a.n) < 0) as_json_die(&sc->j2, sc->file, sc->lineno);
        src = &sc->j2;
    }
    as_buf_reset(&sc->b);
    as_norm_session_record(NULL, src, AS_NS_TOKENIZE, &sc->b);
}

static void do_fixture(scrub *sc, const char *path)
{
    as_sess *s = as_sess_open(path);
    const char *hl;
    size_t hlen;
    sc->file = as_sess_name(s);
    as_sess_header(s, &hl, &hlen);
    sc->lineno = 1;
    if (as_json_parse(&sc->j, hl, hlen) < 0) as_json_die(&sc->j, sc->file, 1);
    // the header's cwd, its basename
    char *base = NULL;
    size_t bl = 0;
    as_norm_clear(sc->own);
    if (!sc->keep_cwd) {
        as_buf cwd = {0};
        int c = as_json_get(&sc->j, 0, "cwd");
        if (c >= 0 && sc->j.t[c].type == AS_JSTR) as_json_str(&sc->j, c, &cwd);
        size_t k = cwd.n;
        while (k > 0 && cwd.p[k - 1] != '/' && cwd.p[k - 1] != '\\') k--;
        if (k == cwd.n)
            as_die_at(sc->file, 1, 0, "the header cwd has no basename to tokenize (see --keep-cwd)");
        as_norm_set_cwd(sc->own, cwd.p, cwd.n);
        if (sc->jq) rules_bind(sc, sc->own);   // $cwd: this log's
        base = as_xmalloc(cwd.n - k + 1);
        memcpy(base, cwd.p + k, cwd.n - k);
        bl = cwd.n - k;
        as_buf_free(&cwd);
        as_buf_reset(&sc->a);
        as_norm_fixture_cwd(sc->own, base, bl, &sc->j, &sc->a);
        emit(sc, sc->a.p, sc->a.n);
    } else {
        if (sc->jq) rules_bind(sc, sc->own);
        emit(sc, hl, hlen);
    }
    as_out_frame(sc->out);
    as_packer *p = as_packer_new(AS_PACK_PROJECTED, fixture_emit, sc);
    as_event ev;
    while (as_sess_next(s, &ev)) {
        sc->lineno = ev.lineno;
        fixture_record(sc, base, bl, ev.j);
        if (as_json_parse(&sc->j2, sc->b.p, sc->b.n) < 0) as_json_die(&sc->j2, sc->file, sc->lineno);
        as_event e2 = ev;
        e2.json = sc->b.p;
        e2.len = sc->b.n;
        e2.j = &sc->j2;
        as_packer_push(p, &e2);
    }
    as_packer_finish(p);
    as_packer_free(p);
    free(base);
    as_sess_close(s);
}

static int one(const char *path, void *ctx)
{
    scrub *sc = ctx;
    rules_reset(sc);
    if (sc->mode == M_FIXTURE) {
        do_fixture(sc, path);
    } else if (sc->mode == M_STDOUT) {
        do_stdout(sc, path);
    } else {
        do_session(sc, path);
    }
    return AS_OK;
}

// A directory option without its trailing separators ("/tmp/w/" is "/tmp/w"),
// so that it matches the spellings in the records; "/" and "C:\" stay.
static size_t dir_len(const char *s)
{
    size_t n = strlen(s);
    while (n > 1 && (s[n - 1] == '/' || s[n - 1] == '\\') && !(n == 3 && s[1] == ':')) n--;
    return n;
}

static void set_mode(scrub *sc, int m)
{
    if (sc->mode != M_NONE && sc->mode != m) as_die(AS_TROUBLE, "choose one of --stdout, --session, --fixture");
    sc->mode = m;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"stdout", no_argument, 0, 'o'}, {"session", no_argument, 0, 's'},
        {"fixture", no_argument, 0, 'F'}, {"cwd", required_argument, 0, 'c'},
        {"cwd-alias", required_argument, 0, 'a'}, {"session-id", required_argument, 0, 'i'},
        {"context", required_argument, 0, 'C'}, {"rules", required_argument, 0, 'f'},
        {"native-paths", no_argument, 0, 'n'}, {"persisted", no_argument, 0, 'P'},
        {"keep-cwd", no_argument, 0, 'k'}, {"scenario", required_argument, 0, 'N'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    scrub sc = {0};
    int c;
    as_setprog(argv[0]);
    opterr = 0;
    sc.norm = as_norm_new();
    sc.own = as_norm_new();
    while ((c = getopt_long(argc, argv, ":osFc:a:i:C:f:N:nPkh", lo, NULL)) != -1) {
        switch (c) {
        case 'o': set_mode(&sc, M_STDOUT); break;
        case 's': set_mode(&sc, M_SESSION); break;
        case 'F': set_mode(&sc, M_FIXTURE); break;
        case 'c': as_norm_set_cwd(sc.norm, optarg, dir_len(optarg)); break;
        case 'a': as_norm_add_alias(sc.norm, optarg, dir_len(optarg)); break;
        case 'i': as_norm_add_session_id(sc.norm, optarg, strlen(optarg)); break;
        case 'C': as_norm_load_file(sc.norm, optarg); break;
        case 'f': sc.rules_path = optarg; break;
        case 'N': sc.scenario = optarg; break;
        case 'n': as_norm_set_native(sc.norm, 1); as_norm_set_native(sc.own, 1); break;
        case 'P': sc.persisted = 1; break;
        case 'k': sc.keep_cwd = 1; break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        case ':': as_warn("option '%s' needs an argument", argv[optind - 1]); as_usage_exit(usage, AS_TROUBLE);
        default: as_warn("unknown option '%s'", argv[optind - 1]); as_usage_exit(usage, AS_TROUBLE);
        }
    }
    if (sc.mode == M_NONE) as_die(AS_TROUBLE, "choose one of --stdout, --session, --fixture");
    if (sc.mode == M_FIXTURE && as_norm_has_context(sc.norm))
        as_die(AS_TROUBLE, "--fixture takes the cwd from each log's header; drop the context options");
    if (sc.rules_path) rules_compile(&sc);
    sc.out = as_out_stdout(0);
    int r = as_loop(argc - optind, argv + optind, one, &sc);
    as_out_close(sc.out);
    if (sc.jq) {
        jq_teardown(&sc.jq);
        jv_free(sc.ids);
        jv_free(sc.counts);
    }
    as_json_free(&sc.jr);
    as_buf_free(&sc.c);
    as_buf_free(&sc.prog);
    as_json_free(&sc.j);
    as_json_free(&sc.j2);
    as_buf_free(&sc.a);
    as_buf_free(&sc.b);
    as_buf_free(&jq_msgs);
    as_norm_free(sc.norm);
    as_norm_free(sc.own);
    return r;
}
