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
    jq_state *jq;
    as_json j, j2;
    as_buf a, b;
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
static const char prelude[] =
    "def stderr: . as $__v | ([\"" STDERR_TAG "\", $__v] | debug | empty), $__v; ";

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

static void rules_compile(scrub *sc)
{
    as_buf prog = {0}, full = {0};
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
    // Compiled as written first, for jq's messages; then behind the prelude,
    // on the same first line so that line numbers stay.
    if (!jq_compile(sc->jq, prog.p ? prog.p : ""))
        as_die(AS_TROUBLE, "%s: %s", sc->rules_path, jq_msgs.p ? jq_msgs.p : "jq program does not compile");
    as_buf_puts(&full, prelude);
    as_buf_put(&full, prog.p ? prog.p : "", prog.n);
    as_buf_reset(&jq_msgs);
    if (!jq_compile(sc->jq, full.p))
        as_die(AS_TROUBLE, "%s: %s", sc->rules_path, jq_msgs.p ? jq_msgs.p : "jq program does not compile");
    as_buf_free(&prog);
    as_buf_free(&full);
}

// Writes a jq value compactly as JSON.stringify would (strings escaped alike,
// integral numbers below 1e21 without exponent). -1 when it nests deeper
// than the JSON parser's limit.
static int put_jv(as_buf *o, jv v, int depth)
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
        as_jstr_write(o, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
        break;
    case JV_KIND_ARRAY: {
        as_buf_putc(o, '[');
        int n = jv_array_length(jv_copy(v));
        for (int i = 0; i < n && !r; i++) {
            if (i) as_buf_putc(o, ',');
            jv e = jv_array_get(jv_copy(v), i);
            r = put_jv(o, e, depth + 1);
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
            as_jstr_write(o, jv_string_value(k), (size_t)jv_string_length_bytes(jv_copy(k)));
            as_buf_putc(o, ':');
            r = put_jv(o, e, depth + 1);
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
    as_buf_reset(&sc->b);
    int deep = put_jv(&sc->b, r, 0);
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
        parse_object(sc, &sc->j, line, len, "stdout line");
        as_buf_reset(&sc->a);
        as_norm_stdout_frame(sc->norm, &sc->j, &sc->a);
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

// --session: the codec validates the log (header, types, forms, rows) as
// every tool does; each source line is normalized as it stands (no repacking).
static void do_session(scrub *sc, const char *path)
{
    as_sess *s = as_sess_open(path);
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
    }
    session_record(sc, ctx, &sc->j, flags | AS_NS_HEADER);
    as_event ev;
    while (as_sess_next(s, &ev)) {
        if (ev.member > 0) continue;   // a packed row is one line: done at its first member
        sc->lineno = ev.lineno;
        if (ev.member < 0 && !ev.projected) {   // a persisted event is its source line
            session_record(sc, ctx, ev.j, flags);
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
        base = as_xmalloc(cwd.n - k + 1);
        memcpy(base, cwd.p + k, cwd.n - k);
        bl = cwd.n - k;
        as_buf_free(&cwd);
        as_buf_reset(&sc->a);
        as_norm_fixture_cwd(sc->own, base, bl, &sc->j, &sc->a);
        emit(sc, sc->a.p, sc->a.n);
    } else {
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
        {"keep-cwd", no_argument, 0, 'k'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    scrub sc = {0};
    int c;
    as_setprog(argv[0]);
    opterr = 0;
    sc.norm = as_norm_new();
    sc.own = as_norm_new();
    while ((c = getopt_long(argc, argv, ":osFc:a:i:C:f:nPkh", lo, NULL)) != -1) {
        switch (c) {
        case 'o': set_mode(&sc, M_STDOUT); break;
        case 's': set_mode(&sc, M_SESSION); break;
        case 'F': set_mode(&sc, M_FIXTURE); break;
        case 'c': as_norm_set_cwd(sc.norm, optarg, dir_len(optarg)); break;
        case 'a': as_norm_add_alias(sc.norm, optarg, dir_len(optarg)); break;
        case 'i': as_norm_add_session_id(sc.norm, optarg, strlen(optarg)); break;
        case 'C': as_norm_load_file(sc.norm, optarg); break;
        case 'f': sc.rules_path = optarg; break;
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
    if (sc.jq) jq_teardown(&sc.jq);
    as_json_free(&sc.j);
    as_json_free(&sc.j2);
    as_buf_free(&sc.a);
    as_buf_free(&sc.b);
    as_buf_free(&jq_msgs);
    as_norm_free(sc.norm);
    as_norm_free(sc.own);
    return r;
}
