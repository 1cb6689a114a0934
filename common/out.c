// out.c - the checked buffered writer: plain bytes or zstd frames with
// checksums, to stdout or atomically to a file (temp sibling + rename).
#include "acpsnap.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define OUTSZ (1u << 17)

struct as_out {
    int fd;
    int zstd;
    int framed;            // zstd: bytes were written into the current frame
    ZSTD_CCtx *cctx;
    char *buf; size_t n;   // pending plain bytes (input of the compressor when zstd)
    char *zbuf;            // compressed output buffer
    char *path, *tmp;      // atomic writer
};

static void fd_write(as_out *o, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(o->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) as_die_sys("write %s", o->path ? o->path : "standard output");
        p += w;
        n -= (size_t)w;
    }
}

static void z_run(as_out *o, ZSTD_EndDirective mode)
{
    ZSTD_inBuffer ib = {o->buf, o->n, 0};
    for (;;) {
        ZSTD_outBuffer ob = {o->zbuf, ZSTD_CStreamOutSize(), 0};
        size_t r = ZSTD_compressStream2(o->cctx, &ob, &ib, mode);
        if (ZSTD_isError(r)) as_die(AS_TROUBLE, "zstd compression failed: %s", ZSTD_getErrorName(r));
        fd_write(o, o->zbuf, ob.pos);
        if (mode == ZSTD_e_continue ? ib.pos == ib.size : r == 0) break;
    }
    o->n = 0;
}

static void flush(as_out *o)
{
    if (!o->n) return;
    if (o->zstd) { o->framed = 1; z_run(o, ZSTD_e_continue); }
    else { fd_write(o, o->buf, o->n); o->n = 0; }
}

static as_out *make(int fd, int zstd)
{
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
        o->zbuf = as_xmalloc(ZSTD_CStreamOutSize());
    }
    return o;
}

as_out *as_out_stdout(int zstd)
{
    if (zstd && isatty(1))
        as_die(AS_TROUBLE, "refusing to write compressed data to a terminal");
    return make(1, zstd);
}

as_out *as_out_atomic(const char *path, int zstd)
{
    size_t n = strlen(path);
    char *tmp = as_xmalloc(n + 16);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp.XXXXXX", 12);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) as_die_sys("create a temporary file beside %s", path);
    as_out *o = make(fd, zstd);
    o->path = as_xstrdup(path);
    o->tmp = tmp;
    return o;
}

void as_out_write(as_out *o, const void *p, size_t n)
{
    if (!n) return;
    if (o->n + n > OUTSZ) {
        flush(o);
        if (n > OUTSZ) {   // large write: straight through
            if (o->zstd) {
                ZSTD_inBuffer ib = {p, n, 0};
                o->framed = 1;
                while (ib.pos < ib.size) {
                    ZSTD_outBuffer ob = {o->zbuf, ZSTD_CStreamOutSize(), 0};
                    size_t r = ZSTD_compressStream2(o->cctx, &ob, &ib, ZSTD_e_continue);
                    if (ZSTD_isError(r)) as_die(AS_TROUBLE, "zstd compression failed: %s", ZSTD_getErrorName(r));
                    fd_write(o, o->zbuf, ob.pos);
                }
            } else {
                fd_write(o, p, n);
            }
            return;
        }
    }
    memcpy(o->buf + o->n, p, n);
    o->n += n;
}

void as_out_line(as_out *o, const void *p, size_t n)
{
    as_out_write(o, p, n);
    as_out_write(o, "\n", 1);
}

void as_out_frame(as_out *o)
{
    if (!o->zstd) return;
    if (!o->n && !o->framed) return;
    z_run(o, ZSTD_e_end);
    o->framed = 0;
}

static void finish(as_out *o)
{
    if (o->zstd) as_out_frame(o);
    else flush(o);
}

static void release(as_out *o)
{
    ZSTD_freeCCtx(o->cctx);
    free(o->buf);
    free(o->zbuf);
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
