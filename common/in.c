// in.c - the line reader: files or stdin, plain text or zstd frames (detected
// by magic), decoded as a stream so memory stays at one line plus buffers.
// Text holds no NUL byte, and no CR except the one of a CRLF line end: the
// reader dies naming file:line:col on either, so no tool ever copies a stray
// CR (JSON whitespace) or a NUL into its output.
#include "acpsnap.h"
#include "fsat.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define RAWSZ (1u << 17)

struct as_in {
    int fd;
    char *name;
    int zstd;              // -1 unknown, 0 plain, 1 zstd
    int eof;               // raw input exhausted
    char *raw; size_t rpos, rn;   // raw bytes (zstd input)
    uint64_t rawoff;       // offset of raw[0] in the file
    uint64_t frame_start;  // offset where the current zstd frame began
    size_t zret;           // last ZSTD_decompressStream hint (0 = frame complete)
    ZSTD_DCtx *dctx;
    as_buf d; size_t dpos; // decoded bytes, read position
    uint64_t doff;         // offset of d.p[0] in the decoded text
    int64_t nul;           // decoded offset of the first NUL read, or -1
    long lineno;
    const char *text; size_t tn, tpos;   // as_in_open_text: the bytes read
};

as_in *as_in_open(const char *path)
{
    int stdin_ = !path || !strcmp(path, "-");
    int fd = stdin_ ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) as_die_sys("open %s", path);   // before allocating: nothing to leak
    as_in *in = calloc(1, sizeof *in);
    if (!in) as_die(AS_TROUBLE, "out of memory");
    in->fd = fd;
    in->name = as_xstrdup(stdin_ ? "<stdin>" : path);
    in->zstd = -1;
    in->nul = -1;
    in->raw = as_xmalloc(RAWSZ);
    return in;
}

as_in *as_in_open_text(const char *name, const char *text, size_t n)
{
    as_in *in = calloc(1, sizeof *in);
    if (!in) as_die(AS_TROUBLE, "out of memory");
    in->fd = -1;
    in->name = as_xstrdup(name);
    in->zstd = 0;
    in->nul = -1;
    in->text = text ? text : "";
    in->tn = n;
    return in;
}

// read(2) of the input: the file's, or the text's next bytes.
static ssize_t src_read(as_in *in, char *p, size_t cap)
{
    if (!in->text) return read(in->fd, p, cap);
    size_t k = in->tn - in->tpos < cap ? in->tn - in->tpos : cap;
    memcpy(p, in->text + in->tpos, k);
    in->tpos += k;
    return (ssize_t)k;
}

// Reads more raw bytes after the unread ones; returns bytes read (0 at EOF).
static size_t raw_fill(as_in *in)
{
    if (in->rpos > 0) {
        memmove(in->raw, in->raw + in->rpos, in->rn - in->rpos);
        in->rawoff += in->rpos;
        in->rn -= in->rpos;
        in->rpos = 0;
    }
    for (;;) {
        ssize_t r = src_read(in, in->raw + in->rn, RAWSZ - in->rn);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) as_die_sys("read %s", in->name);
        if (r == 0) in->eof = 1;
        in->rn += (size_t)r;
        return (size_t)r;
    }
}

// zstd frames (magic 0xFD2FB528) and skippable frames (0x184D2A50..5F),
// both little-endian: a zstd stream may start with either.
int as_zstd_magic(const void *p, size_t n)
{
    const unsigned char *b = p;
    if (n < 4) return 0;
    if (b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return 1;
    return (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18;
}

static void detect(as_in *in)
{
    while (!in->eof && in->rn < 4) raw_fill(in);
    in->zstd = as_zstd_magic(in->raw, in->rn);
    if (in->zstd) {
        in->dctx = ZSTD_createDCtx();
        if (!in->dctx) as_die(AS_TROUBLE, "out of memory");
        in->zret = 1;
    }
}

// Notes the first NUL among the decoded bytes from `from` on. It is trouble
// when the line holding it is reached, so that the lines before it come first
// whatever the sizes of the reads, and nothing is read past it.
static void nul_note(as_in *in, size_t from)
{
    const char *z = in->nul < 0 ? memchr(in->d.p + from, 0, in->d.n - from) : NULL;
    if (z) in->nul = (int64_t)(in->doff + (uint64_t)(z - in->d.p));
}

// Dies for the NUL at decoded offset in->nul, in line number `line` that
// starts at bol.
_Noreturn static void nul_die(const as_in *in, long line, const char *bol)
{
    long col = (long)((uint64_t)in->nul - in->doff - (uint64_t)(bol - in->d.p)) + 1;
    if (in->zstd) as_die_at(in->name, line, col, "NUL byte in the decompressed text");
    as_die_at(in->name, line, col, "not a text or zstd file (NUL byte at offset %llu)", (unsigned long long)in->nul);
}

// Appends more decoded bytes to in->d; returns 0 when nothing more will come.
static int fill(as_in *in)
{
    if (!in->zstd) {
        if (in->rpos < in->rn) {   // bytes read during detection
            size_t from = in->d.n;
            as_buf_put(&in->d, in->raw + in->rpos, in->rn - in->rpos);
            in->rpos = in->rn;
            nul_note(in, from);
            return 1;
        }
        if (in->eof) return 0;
        // Plain text is read straight into the line buffer.
        as_buf_grow(&in->d, RAWSZ);
        for (;;) {
            ssize_t r = src_read(in, in->d.p + in->d.n, in->d.cap - in->d.n - 1);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) as_die_sys("read %s", in->name);
            if (r == 0) { in->eof = 1; return 0; }
            size_t from = in->d.n;
            in->d.n += (size_t)r;
            in->d.p[in->d.n] = 0;
            nul_note(in, from);
            return 1;
        }
    }
    for (;;) {
        if (in->rpos == in->rn) {
            if (in->eof || raw_fill(in) == 0) {
                if (in->zret != 0)
                    as_die_at(in->name, 0, 0, "truncated zstd frame at byte offset %llu",
                              (unsigned long long)in->frame_start);
                return 0;
            }
        }
        as_buf_grow(&in->d, RAWSZ * 4);
        ZSTD_inBuffer ib = {in->raw, in->rn, in->rpos};
        ZSTD_outBuffer ob = {in->d.p + in->d.n, in->d.cap - in->d.n - 1, 0};
        if (in->zret == 0) in->frame_start = in->rawoff + in->rpos;
        size_t r = ZSTD_decompressStream(in->dctx, &ob, &ib);
        if (ZSTD_isError(r))
            as_die_at(in->name, 0, 0, "corrupt zstd data in the frame at byte offset %llu: %s",
                      (unsigned long long)in->frame_start, ZSTD_getErrorName(r));
        in->zret = r;
        in->rpos = ib.pos;
        size_t from = in->d.n;
        in->d.n += ob.pos;
        in->d.p[in->d.n] = 0;
        if (ob.pos > 0) { nul_note(in, from); return 1; }
    }
}

// 1 when the NUL noted lies in [s, s+n) of the buffer.
static int nul_in(const as_in *in, const char *s, size_t n)
{
    if (in->nul < 0) return 0;
    uint64_t off = in->doff + (uint64_t)(s - in->d.p);
    return (uint64_t)in->nul >= off && (uint64_t)in->nul < off + n;
}

// Returns the line [s, s+n) (its LF excluded): a NUL in it is trouble, the CR
// of a CRLF end is dropped, any other CR is trouble.
static int give(as_in *in, char *s, size_t n, const char **line, size_t *len)
{
    in->lineno++;
    if (nul_in(in, s, n)) nul_die(in, in->lineno, s);
    if (n && s[n - 1] == '\r') n--;
    const char *cr = memchr(s, '\r', n);
    if (cr)
        as_die_at(in->name, in->lineno, (long)(cr - s) + 1,
                  "carriage return inside a line (only a CRLF line end is accepted)");
    *line = s;
    *len = n;
    return 1;
}

int as_in_line(as_in *in, const char **line, size_t *len)
{
    if (in->zstd < 0) detect(in);
    size_t scan = in->dpos;
    for (;;) {
        char *nl = in->d.p ? memchr(in->d.p + scan, '\n', in->d.n - scan) : NULL;
        if (nl) {
            char *s = in->d.p + in->dpos;
            size_t n = (size_t)(nl - s);
            in->dpos += n + 1;
            return give(in, s, n, line, len);
        }
        // Compact before reading more so the buffer holds one line at most.
        if (in->dpos > 0) {
            memmove(in->d.p, in->d.p + in->dpos, in->d.n - in->dpos);
            in->d.n -= in->dpos;
            in->doff += in->dpos;
            in->dpos = 0;
        }
        scan = in->d.n;
        if (in->nul >= 0) nul_die(in, in->lineno + 1, in->d.p);   // in this partial line
        if (!fill(in)) break;
    }
    if (in->d.n == in->dpos) return 0;
    char *s = in->d.p + in->dpos;
    size_t n = in->d.n - in->dpos;
    in->dpos = in->d.n;
    return give(in, s, n, line, len);
}

long as_in_lineno(const as_in *in) { return in->lineno; }
const char *as_in_name(const as_in *in) { return in->name; }

void as_in_close(as_in *in)
{
    if (!in) return;
    if (in->fd > 0) close(in->fd);
    ZSTD_freeDCtx(in->dctx);
    free(in->raw);
    free(in->name);
    as_buf_free(&in->d);
    free(in);
}

void as_read_file(const char *path, as_buf *b)
{
    as_in *in = as_in_open(path);
    if (in->zstd < 0) detect(in);
    while (fill(in)) {}
    if (in->nul >= 0) {   // whole file in d: count the lines before the NUL
        long line = 1;
        const char *bol = in->d.p, *z = in->d.p + in->nul;
        for (const char *q = bol; (q = memchr(q, '\n', (size_t)(z - q))); q++) { line++; bol = q + 1; }
        nul_die(in, line, bol);
    }
    as_buf_put(b, in->d.p ? in->d.p : "", in->d.n);
    as_in_close(in);
}

int as_read_raw_at(int dfd, const char *name, const char *path, as_buf *b, int reg)
{
    const char *f;
    size_t n;
    as_buf_reset(b);
    if (as_fetched(dfd, name, &f, &n)) {
        as_buf_put(b, f, n);
        return 0;
    }
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    for (;;) {
        as_buf_grow(b, 65536);
        size_t want = b->cap - b->n - 1;
        ssize_t r = read(fd, b->p + b->n, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) as_die_sys("read %s", path);
        if (r == 0) break;
        b->n += (size_t)r;
        if (reg && (size_t)r < want) break;
    }
    b->p[b->n] = 0;
    close(fd);
    return 0;
}

int as_read_raw(const char *path, as_buf *b) { return as_read_raw_at(AT_FDCWD, path, path, b, 0); }
