// Fuzz target: the session codec. Every line scans the same on both of the
// scanner's paths and every instruction set, and every event's tokens (and
// every packed row's) are those a fresh scan of its bytes makes
// (scan_agree.h). For every body x that decodes:
//   - it packs and projects to the same bytes with the member and row
//     templates off (as_sess_templates(0)) as on;
//   - packing never changes bytes: unpack(pack(x)) == unpack(x), byte for byte;
//   - pack(x) is canonical (the check accepts it), and so is project(x);
//   - pack∘unpack is the identity on pack(x) in x's form (a projected log
//     with a short row excepted: projecting unpacked events drops their
//     times, and only such a row keeps them; acpsnap-session(5)).
#include "acpsnap.h"
#include "scan_agree.h"
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static jmp_buf back;
static void hook(int code) { longjmp(back, 1); }
static void emit(void *ctx, const char *line, size_t len, long src)
{
    as_buf_put(ctx, line, len);
    as_buf_putc(ctx, '\n');
}

static int memfile(const void *p, size_t n, char *path)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0 || write(fd, p, n) != (ssize_t)n) abort();
    sprintf(path, "/proc/self/fd/%d", fd);
    return fd;
}

// The decoder and packer of the pass under way, released when a rejected
// input longjmps out of it.
static as_sess *cur_s;
static as_packer *cur_p;

// What a pass saw of its input.
typedef struct { as_form form; int short_rows; } seen;

// Packs (or unpacks) the log at path into out.
static seen run(const char *path, int unpack, int mode, as_buf *out)
{
    seen w = {AS_FORM_UNKNOWN, 0};
    as_sess *s = cur_s = as_sess_open(path);
    const char *h;
    size_t hn;
    as_sess_header(s, &h, &hn);
    as_buf_put(out, h, hn);
    as_buf_putc(out, '\n');
    as_packer *p = cur_p = as_packer_new(mode, emit, out);
    as_event ev;
    int last = -1;   // member index of the previous event, -1 for a plain line
    while (as_sess_next(s, &ev)) {
        if (last >= 0 && last < 2 && ev.member != last + 1) w.short_rows++;
        last = ev.member;
        tokens_agree(ev.j, ev.json, ev.len);
        if (ev.member == 0) {   // a packed row: its line's tokens, written by the row template or scanned
            const char *l;
            size_t ln;
            as_sess_line(s, &l, &ln);
            tokens_agree(as_sess_row_tokens(s), l, ln);
        }
        if (unpack) { as_buf_put(out, ev.json, ev.len); as_buf_putc(out, '\n'); }
        else as_packer_push(p, &ev);
    }
    if (last >= 0 && last < 2) w.short_rows++;
    as_packer_finish(p);
    as_packer_free(p);
    w.form = as_sess_form(s);
    as_sess_close(s);
    cur_s = NULL;
    cur_p = NULL;
    return w;
}

static int same(const as_buf *a, const as_buf *b) { return a->n == b->n && !memcmp(a->p, b->p, a->n); }

// jsonl-pack --unpack's own path (as_sess_transcode: a projected line is
// written around its envelope, through the output buffer or, long, in one
// writev) gives the bytes of the restoring decoder, want; the log at path
// is valid.
static void transcode_agrees(const char *path, const as_buf *want)
{
    int m = memfd_create("fuzz-out", 0), saved = dup(1);
    if (m < 0 || saved < 0 || dup2(m, 1) < 0) abort();
    as_out *o = as_out_stdout(0);
    as_sess_transcode(path, o, AS_PACK_KEEP, 1);
    as_out_close(o);   // (closes fd 1)
    if (dup2(saved, 1) < 0) abort();
    close(saved);
    off_t n = lseek(m, 0, SEEK_END);
    char *got = malloc((size_t)n + 1);
    if (!got || pread(m, got, (size_t)n, 0) != n) abort();
    close(m);
    if ((size_t)n != want->n || memcmp(got, want->p, want->n)) abort();
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char hdr[] = "{\"type\":\"session\",\"id\":\"f\"}\n";
    scan_agree_lines(data, size);
    as_buf in = {0}, a = {0}, ux = {0}, ua = {0}, b = {0}, px = {0};
    char path[64];
    as_buf_put(&in, hdr, sizeof hdr - 1);
    as_buf_put(&in, data, size);
    int fd = memfile(in.p, in.n, path);
    // the check of a log whose text the caller holds decides as the one
    // that reads the file, at the same line
    long bad1 = 0, bad2 = 0;
    if (as_sess_check_soft(path, &bad1) != as_sess_check_text(path, in.p, in.n, &bad2) || bad1 != bad2) abort();
    as_die_hook = hook;
    if (setjmp(back)) {   // malformed input: rejected, fine
        close(fd);
        as_packer_free(cur_p);
        as_sess_close(cur_s);   // closes the reader's descriptor too
        if (!cur_s) as_sess_open_abandoned();   // it died opening
        cur_p = NULL;
        cur_s = NULL;
        as_buf_free(&in); as_buf_free(&a); as_buf_free(&ux); as_buf_free(&ua); as_buf_free(&b); as_buf_free(&px);
        return 0;
    }
    seen x = run(path, 0, AS_PACK_KEEP, &a);
    as_die_hook = NULL;   // from here on, any failure is a bug
    run(path, 1, AS_PACK_KEEP, &ux);
    transcode_agrees(path, &ux);
    run(path, 0, AS_PACK_PROJECTED, &px);
    // the same without the templates: every line scanned
    as_buf r1 = {0}, r2 = {0};
    as_sess_templates(0);
    run(path, 0, AS_PACK_KEEP, &r1);
    run(path, 0, AS_PACK_PROJECTED, &r2);
    as_sess_templates(1);
    if (!same(&a, &r1) || !same(&px, &r2)) abort();
    as_buf_free(&r1); as_buf_free(&r2);
    close(fd);
    long bad = 0;
    int fp = memfile(px.p, px.n, path);
    if (as_sess_check(path, &bad)) abort();   // a projection is canonical
    close(fp);
    int fa = memfile(a.p, a.n, path);
    if (as_sess_check(path, &bad)) abort();
    seen pa = run(path, 1, AS_PACK_KEEP, &ua);
    close(fa);
    if (!same(&ux, &ua)) abort();   // packing lost bytes
    int fu = memfile(ua.p, ua.n, path);
    // the unpacked stream carries (restored) envelopes: pack it back in the input's form
    run(path, 0, x.form == AS_FORM_PROJECTED ? AS_PACK_PROJECTED : AS_PACK_PERSISTED, &b);
    close(fu);
    if (!same(&a, &b) && !(x.form == AS_FORM_PROJECTED && pa.short_rows)) abort();
    as_buf_free(&in); as_buf_free(&a); as_buf_free(&ux); as_buf_free(&ua); as_buf_free(&b); as_buf_free(&px);
    return 0;
}
