// Fuzz target: the session codec. Any body that decodes packs to a canonical
// log; unpacking and re-packing that log is the identity (pack∘unpack), and
// the canonical check accepts it.
#include "acpsnap.h"
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

// Packs (or unpacks) the log at path into out.
static as_form run(const char *path, int unpack, int mode, as_buf *out)
{
    as_sess *s = cur_s = as_sess_open(path);
    const char *h;
    size_t hn;
    as_sess_header(s, &h, &hn);
    as_buf_put(out, h, hn);
    as_buf_putc(out, '\n');
    as_packer *p = cur_p = as_packer_new(mode, emit, out);
    as_event ev;
    while (as_sess_next(s, &ev)) {
        if (unpack) { as_buf_put(out, ev.json, ev.len); as_buf_putc(out, '\n'); }
        else as_packer_push(p, &ev);
    }
    as_packer_finish(p);
    as_packer_free(p);
    as_form f = as_sess_form(s);
    as_sess_close(s);
    cur_s = NULL;
    cur_p = NULL;
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char hdr[] = "{\"type\":\"session\",\"id\":\"f\"}\n";
    as_buf in = {0}, a = {0}, u = {0}, b = {0};
    char path[64];
    as_buf_put(&in, hdr, sizeof hdr - 1);
    as_buf_put(&in, data, size);
    int fd = memfile(in.p, in.n, path);
    as_die_hook = hook;
    if (setjmp(back)) {   // malformed input: rejected, fine
        close(fd);
        as_packer_free(cur_p);
        as_sess_close(cur_s);   // closes the reader's descriptor too
        cur_p = NULL;
        cur_s = NULL;
        as_buf_free(&in); as_buf_free(&a); as_buf_free(&u); as_buf_free(&b);
        return 0;
    }
    as_form form = run(path, 0, AS_PACK_KEEP, &a);
    as_die_hook = NULL;   // from here on, any failure is a bug
    close(fd);
    int fa = memfile(a.p, a.n, path);
    long bad = 0;
    if (as_sess_check(path, &bad)) abort();
    run(path, 1, AS_PACK_KEEP, &u);
    close(fa);
    int fu = memfile(u.p, u.n, path);
    // the unpacked stream carries (restored) envelopes: pack it back in the input's form
    run(path, 0, form == AS_FORM_PROJECTED ? AS_PACK_PROJECTED : AS_PACK_PERSISTED, &b);
    close(fu);
    if (a.n != b.n || memcmp(a.p, b.p, a.n)) abort();
    as_buf_free(&in); as_buf_free(&a); as_buf_free(&u); as_buf_free(&b);
    return 0;
}
