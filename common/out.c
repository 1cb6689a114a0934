// out.c - the checked buffered writer: plain bytes or zstd frames with
// checksums, to stdout or atomically to a file (temp sibling + rename).
//
// On trouble the output stops at a line boundary, and for outputs up to the
// buffer size (128 KiB) nothing at all is written: the file gets whole lines
// only (the buffer is handed on up to its last LF; as_out_line never splits a
// line) and compressed bytes are held back too, so a small -z output writes
// no frame on trouble. A fatal exit (as_die*, exit) with a stdout writer open
// runs an atexit handler: pending bytes are dropped, except that a zstd frame
// already partly written is ended, so every frame on the output is complete
// and ends at a line boundary. An atomic writer's temp file is removed.
// Writers are opened and closed from one thread.
#include "acpsnap.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define OUTSZ (1u << 17)

struct as_out {
    int fd;
    int zstd;
    int framed;            // zstd: bytes were given to the compressor in the current frame
    int frame_on_fd;       // zstd: bytes of the current frame were written to fd
    int midline;           // bytes handed on end inside a line (a long as_out_write)
    int broken;            // a write or compression failed: nothing more is written
    int soft;              // finishing on exit: failures are ignored, not fatal
    ZSTD_CCtx *cctx;
    char *buf; size_t n;   // pending plain bytes (input of the compressor when zstd)
    as_buf z;              // zstd: compressed bytes not yet written
    size_t zframe;         // offset in z where the current frame's bytes begin
    char *path, *tmp;      // atomic writer
    as_out *next;          // the open writers
};

static as_out *live;       // writers opened and not yet closed or committed

// A failure: fatal, unless finishing on exit (then the writer just stops).
static int fail(as_out *o)
{
    o->broken = 1;
    return o->soft;
}

// Writes the k pieces of v in order, all of them (v is consumed: one
// writev(2) when the descriptor takes it all); a failure is fail()'s or
// fatal.
static void fd_writev(as_out *o, struct iovec *v, int k)
{
    for (;;) {
        while (k && !v->iov_len) k--, v++;
        if (!k || o->broken) return;
        ssize_t w = writev(o->fd, v, k);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            if (fail(o)) return;
            as_die_sys("write %s", o->path ? o->path : "standard output");
        }
        for (; k && (size_t)w >= v->iov_len; k--, v++) w -= (ssize_t)v->iov_len;
        if (k) { v->iov_base = (char *)v->iov_base + w; v->iov_len -= (size_t)w; }
    }
}

int as_write_all(int fd, const void *p, size_t n)
{
    for (size_t k = 0; k < n;) {
        ssize_t w = write(fd, (const char *)p + k, n - k);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { errno = EIO; return -1; }
        k += (size_t)w;
    }
    return 0;
}

static void fd_write(as_out *o, const char *p, size_t n)
{
    struct iovec v = {(void *)p, n};
    fd_writev(o, &v, 1);
}

// Writes the held compressed bytes (at least OUTSZ of them unless `all`).
static void z_drain(as_out *o, int all)
{
    if (!o->z.n || (!all && o->z.n < OUTSZ)) return;
    if (o->framed && o->z.n > o->zframe) o->frame_on_fd = 1;
    fd_write(o, o->z.p, o->z.n);
    o->z.n = 0;
    o->zframe = 0;
}

// Runs the compressor over [p, p+n) (mode continue) or ends the frame.
static void z_run(as_out *o, const void *p, size_t n, ZSTD_EndDirective mode)
{
    ZSTD_inBuffer ib = {p, n, 0};
    if (n) o->framed = 1;
    while (!o->broken) {
        as_buf_grow(&o->z, ZSTD_CStreamOutSize());
        ZSTD_outBuffer ob = {o->z.p + o->z.n, ZSTD_CStreamOutSize(), 0};
        size_t r = ZSTD_compressStream2(o->cctx, &ob, &ib, mode);
        if (ZSTD_isError(r)) {
            if (fail(o)) return;
            as_die(AS_TROUBLE, "zstd compression failed: %s", ZSTD_getErrorName(r));
        }
        o->z.n += ob.pos;
        if (mode == ZSTD_e_continue ? ib.pos == ib.size : r == 0) break;
        z_drain(o, 0);
    }
    if (mode == ZSTD_e_end) {
        o->framed = o->frame_on_fd = 0;
        o->zframe = o->z.n;
    }
    z_drain(o, 0);
}

// Hands [p, p+n) on: to the compressor or the file.
static void pass(as_out *o, const void *p, size_t n)
{
    if (!n) return;
    if (o->zstd) z_run(o, p, n, ZSTD_e_continue);
    else fd_write(o, p, n);
}

// pass() of the k pieces of v in order.
static void passv(as_out *o, struct iovec *v, int k)
{
    if (!o->zstd) { fd_writev(o, v, k); return; }
    for (int i = 0; i < k; i++) pass(o, v[i].iov_base, v[i].iov_len);
}

// Hands the buffered bytes on up to the last LF (all of them when `all`),
// keeping the partial line that follows.
static void flush(as_out *o, int all)
{
    if (!o->n) return;
    size_t k = o->n;
    if (!all) {
        const char *lf = memrchr(o->buf, '\n', o->n);
        k = lf ? (size_t)(lf - o->buf) + 1 : 0;
    }
    if (!k) return;
    pass(o, o->buf, k);
    o->midline = o->buf[k - 1] != '\n';
    memmove(o->buf, o->buf + k, o->n - k);
    o->n -= k;
}

static void at_exit(void);

static as_out *make(int fd, int zstd)
{
    static int registered;
    if (!registered) { atexit(at_exit); registered = 1; }
    as_out *o = calloc(1, sizeof *o);
    if (!o) as_die(AS_TROUBLE, "out of memory");
    o->fd = fd;
    o->zstd = zstd;
    o->buf = as_xmalloc(OUTSZ);
    if (zstd) {
        o->cctx = ZSTD_createCCtx();
        if (!o->cctx) as_die(AS_TROUBLE, "out of memory");
        ZSTD_CCtx_setParameter(o->cctx, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(o->cctx, ZSTD_c_compressionLevel, 3);
    }
    o->next = live;
    live = o;
    return o;
}

static void unlink_live(as_out *o)
{
    for (as_out **pp = &live; *pp; pp = &(*pp)->next)
        if (*pp == o) { *pp = o->next; return; }
}

as_out *as_out_stdout(int zstd)
{
    if (zstd && isatty(1))
        as_die(AS_TROUBLE, "refusing to write compressed data to a terminal");
    return make(1, zstd);
}

// Creates path's sibling temp file "<path>.tmp.<6 hex>" exclusively, with mode
// 0666 as restricted by the umask (as any new file); returns its fd.
static int create_tmp(const char *path, char *tmp, size_t cap)
{
    static unsigned long long seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long x = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 20) ^ (uintptr_t)tmp;
    for (int tries = 0; tries < 1000; tries++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL + ++seq;
        snprintf(tmp, cap, "%s.tmp.%06llx", path, (x >> 40) & 0xffffff);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

as_out *as_out_atomic(const char *path, int zstd)
{
    size_t cap = strlen(path) + 16;
    char *tmp = as_xmalloc(cap);
    int fd = create_tmp(path, tmp, cap);
    if (fd < 0) { free(tmp); as_die_sys("create a temporary file beside %s", path); }
    as_out *o = make(fd, zstd);
    o->path = as_xstrdup(path);
    o->tmp = tmp;
    return o;
}

void as_out_write(as_out *o, const void *p, size_t n)
{
    if (!n) return;
    if (o->n + n > OUTSZ) {
        flush(o, 0);
        if (o->n + n > OUTSZ) {   // still no room: everything goes straight through, in order
            flush(o, 1);
            pass(o, p, n);
            o->midline = ((const char *)p)[n - 1] != '\n';
            return;
        }
    }
    memcpy(o->buf + o->n, p, n);
    o->n += n;
}

// A line of up to three pieces, then LF, never split: in the buffer, or
// (longer than it) straight through.
static inline __attribute__((always_inline)) void put_line(as_out *o, const void *a, size_t an,
                                                           const void *b, size_t bn, const void *c, size_t cn)
{
    size_t n = an + bn + cn;
    if (o->n + n + 1 > OUTSZ) flush(o, 0);
    if (o->n + n + 1 > OUTSZ) {   // a line longer than the buffer: straight through, with its LF
        flush(o, 1);
        struct iovec v[4] = {{(void *)a, an}, {(void *)b, bn}, {(void *)c, cn}, {"\n", 1}};
        passv(o, v, 4);
        o->midline = 0;
        return;
    }
    char *d = o->buf + o->n;
    memcpy(d, a, an);
    if (bn) memcpy(d + an, b, bn);
    if (cn) memcpy(d + an + bn, c, cn);
    d[n] = '\n';
    o->n += n + 1;
}

void as_out_line(as_out *o, const void *p, size_t n) { put_line(o, p, n, NULL, 0, NULL, 0); }

void as_out_line3(as_out *o, const void *a, size_t an, const void *b, size_t bn, const void *c, size_t cn)
{
    put_line(o, a, an, b, bn, c, cn);
}

void as_out_frame(as_out *o)
{
    if (!o->zstd) return;
    flush(o, 1);
    if (!o->framed) return;
    z_run(o, NULL, 0, ZSTD_e_end);
    o->framed = 0;
}

static void finish(as_out *o)
{
    if (o->zstd) { as_out_frame(o); z_drain(o, 1); }
    else flush(o, 1);
}

static void release(as_out *o)
{
    unlink_live(o);
    ZSTD_freeCCtx(o->cctx);
    free(o->buf);
    as_buf_free(&o->z);
    free(o->path);
    free(o->tmp);
    free(o);
}

void as_out_close(as_out *o)
{
    finish(o);
    if (close(o->fd) && errno != EINTR) as_die_sys("close standard output");
    release(o);
}

void as_out_commit(as_out *o)
{
    finish(o);
    if (fsync(o->fd)) as_die_sys("sync %s", o->tmp);
    if (close(o->fd)) as_die_sys("close %s", o->tmp);
    if (rename(o->tmp, o->path)) as_die_sys("rename %s to %s", o->tmp, o->path);
    release(o);
}

// A fatal exit with writers open: pending bytes are dropped, but a zstd
// frame partly written already is ended (it holds whole lines only, unless
// the writer stopped inside one); an atomic writer's temp file is removed.
static void at_exit(void)
{
    while (live) {
        as_out *o = live;
        live = o->next;
        o->soft = 1;
        if (o->tmp) { unlink(o->tmp); continue; }
        if (o->broken || o->midline || !o->frame_on_fd) continue;
        z_run(o, NULL, 0, ZSTD_e_end);
        z_drain(o, 1);
    }
}
