// persist.c - session logs in format v0 (acpsnap-session(5)): one log per session,
// zstd frames (header frame, then one frame per durable batch) or raw JSONL,
// chunk-delta runs packed canonically by common/'s packer, write + fsync per
// batch, a torn tail cut off on load.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include "acpsnap.h"
#include "agent.h"

struct persist {
    char *path;
    int fd;
    int zstd;
    int64_t seq;            // next event seq
    as_packer *pk;
    as_buf batch;           // storage lines of the open batch
    as_buf ev;              // scratch: the event being pushed
    as_json j;
    long batches;           // batches written (the header is batch 0)
    long crash_at;
    int nosync;             // sync = none: no fsync (config.c)
    ZSTD_CCtx *cc;          // the log's compressor, made at its first frame and kept (its tables made once)
    as_buf frame;           // a frame's room
};

const char *persist_path(const persist *p) { return p->path; }
int64_t persist_next_seq(const persist *p) { return p->seq; }

static void emit(void *ctx, const char *line, size_t len, long srcline)
{
    persist *p = ctx;
    as_buf_put(&p->batch, line, len);
    as_buf_putc(&p->batch, '\n');
}

static void mkdirs(const char *path)
{
    as_buf b = {0};
    as_buf_puts(&b, path);
    for (char *s = b.p + 1; ; s++) {
        if (*s == '/' || !*s) {
            char c = *s; *s = 0;
            if (mkdir(b.p, 0755) && errno != EEXIST) {
                as_warn("unable to create %s: %s", b.p, strerror(errno));
                as_buf_free(&b);
                exit(AS_TROUBLE);
            }
            *s = c;
            if (!c) break;
        }
    }
    as_buf_free(&b);
}

static void write_all(persist *p, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(p->fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) as_die_sys("write %s", p->path);
        s += w; n -= (size_t)w;
    }
}

// Writes bytes as one durable batch (one zstd frame) and fsyncs.
static void write_batch(persist *p, const char *s, size_t n)
{
    if (p->zstd) {
        if (!p->cc) {
            if (!(p->cc = ZSTD_createCCtx())) as_die(AS_TROUBLE, "zstd: out of memory");
            ZSTD_CCtx_setParameter(p->cc, ZSTD_c_checksumFlag, 1);
            ZSTD_CCtx_setParameter(p->cc, ZSTD_c_compressionLevel, 3);
        }
        size_t cap = ZSTD_compressBound(n);
        as_buf_reset(&p->frame);
        as_buf_grow(&p->frame, cap);
        // (each call a new frame, the parameters kept: the bytes a new compressor would give)
        size_t r = ZSTD_compress2(p->cc, p->frame.p, cap, s, n);
        if (ZSTD_isError(r)) as_die(AS_TROUBLE, "zstd: %s", ZSTD_getErrorName(r));
        s = p->frame.p; n = r;
    }
    if (p->crash_at && p->batches == p->crash_at) {
        // Test hook: die in the middle of a write, as kill -9 would.
        size_t half = n / 2;
        if (half && s[half - 1] == '\n') half--;   // always a torn line in raw mode
        write_all(p, s, half);
        fsync(p->fd);
        kill(getpid(), SIGKILL);
    }
    write_all(p, s, n);
    if (!p->nosync && fsync(p->fd)) as_die_sys("fsync %s", p->path);
    p->batches++;
}

static persist *persist_new(const config *c, const char *id)
{
    persist *p = as_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    as_buf path = {0};
    as_buf_printf(&path, "%s/%s", c->sessions_root, id);
    mkdirs(path.p);
    p->path = path.p;
    p->crash_at = c->crash_at_batch;
    p->nosync = c->nosync;
    p->pk = as_packer_new(0, emit, p);
    return p;
}

persist *persist_create(const config *c, const char *id, const char *cwd)
{
    persist *p = persist_new(c, id);
    p->zstd = !c->raw;
    as_buf path = {0};
    as_buf_printf(&path, "%s/session.jsonl%s", p->path, p->zstd ? ".zstd" : "");
    free(p->path);
    p->path = path.p;
    p->fd = open(p->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (p->fd < 0) as_die_sys("create %s", p->path);
    as_buf h = {0};
    as_buf_puts(&h, "{\"type\":\"session\",\"version\":0,\"id\":");
    jstr(&h, id);
    as_buf_printf(&h, ",\"createdAt\":%lld,\"cwd\":", (long long)now_ms());
    jstr(&h, cwd);
    as_buf_puts(&h, ",\"delegationDepth\":0}\n");
    write_batch(p, h.p, h.n);
    as_buf_free(&h);
    return p;
}

int64_t persist_event(persist *p, const char *type, const char *data, size_t dlen,
                      const char *extra)
{
    as_buf *b = &p->ev;
    as_buf_reset(b);
    int64_t seq = p->seq++, t = now_ms();
    as_buf_puts(b, "{\"type\":");
    jstr(b, type);
    as_buf_printf(b, ",\"seq\":%lld,\"time\":%lld,\"data\":", (long long)seq, (long long)t);
    as_buf_put(b, data, dlen);
    if (extra) { as_buf_putc(b, ','); as_buf_puts(b, extra); }
    as_buf_putc(b, '}');
    if (as_json_parse(&p->j, b->p, b->n))
        as_die(AS_TROUBLE, "internal error: event %s is not valid JSON: %s", type, p->j.err);
    as_event ev = {
        .json = b->p, .len = b->n, .j = &p->j, .seq = seq, .time = t,
        .has_int_envelope = 1, .lineno = 0, .member = -1, .projected = 0,
    };
    as_packer_push(p->pk, &ev);
    return seq;
}

void persist_flush(persist *p)
{
    if (!p->batch.n) return;
    write_batch(p, p->batch.p, p->batch.n);
    as_buf_reset(&p->batch);
}

void persist_close(persist *p)
{
    if (!p) return;
    as_packer_finish(p->pk);
    persist_flush(p);
    as_packer_free(p->pk);
    if (close(p->fd)) as_warn("unable to close %s: %s", p->path, strerror(errno));
    as_buf_free(&p->batch);
    as_buf_free(&p->frame);
    ZSTD_freeCCtx(p->cc);
    as_buf_free(&p->ev);
    as_json_free(&p->j);
    free(p->path);
    free(p);
}

// ---------------------------------------------------------------- load

// Reads the whole file into b: 0, or -1 when it does not exist. Dies when
// it cannot be read.
static int read_log(const char *path, as_buf *b)
{
    if (as_read_raw(path, b) == 0) return 0;
    if (errno != ENOENT) as_die_sys("open %s", path);
    return -1;
}

// Length of the longest prefix of complete, intact frames (zstd) or complete
// lines (raw).
static size_t intact_prefix(const as_buf *b, int zstd)
{
    if (!zstd) {
        size_t n = b->n;
        while (n > 0 && b->p[n - 1] != '\n') n--;
        return n;
    }
    size_t off = 0;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    char out[65536];
    while (off < b->n) {
        size_t fs = ZSTD_findFrameCompressedSize(b->p + off, b->n - off);
        if (ZSTD_isError(fs)) break;
        // decode the frame fully: the checksum proves it intact
        ZSTD_DCtx_reset(dc, ZSTD_reset_session_only);
        ZSTD_inBuffer in = {b->p + off, fs, 0};
        size_t r = 1;
        int bad = 0;
        while (in.pos < in.size || r != 0) {
            ZSTD_outBuffer o = {out, sizeof out, 0};
            r = ZSTD_decompressStream(dc, &o, &in);
            if (ZSTD_isError(r)) { bad = 1; break; }
            if (in.pos == in.size && r != 0 && o.pos == 0) { bad = 1; break; }
        }
        if (bad) break;
        off += fs;
    }
    ZSTD_freeDCtx(dc);
    return off;
}

persist *persist_open(const config *c, const char *id, persist_ev_fn evfn, void *ctx,
                      char **cwd_out)
{
    as_buf dir = {0}, path = {0}, data = {0};
    as_buf_printf(&dir, "%s/%s", c->sessions_root, id);
    int zstd = 1;
    as_buf_printf(&path, "%s/session.jsonl.zstd", dir.p);
    if (read_log(path.p, &data) < 0) {
        zstd = 0;
        as_buf_reset(&path);
        as_buf_printf(&path, "%s/session.jsonl", dir.p);
        if (read_log(path.p, &data) < 0) {
            as_buf_free(&dir); as_buf_free(&path); as_buf_free(&data);
            return NULL;
        }
    }
    as_buf_free(&dir);
    size_t keep = intact_prefix(&data, zstd);
    if (keep < data.n) {
        as_warn("%s: cut a torn tail of %zu bytes at offset %zu", path.p, data.n - keep, keep);
        if (truncate(path.p, (off_t)keep)) as_die_sys("truncate %s", path.p);
    }
    as_buf_free(&data);
    if (keep == 0) as_die(AS_TROUBLE, "%s: no intact header, cannot load", path.p);

    as_sess *s = as_sess_open(path.p);
    const char *hdr; size_t hlen;
    as_sess_header(s, &hdr, &hlen);
    if (cwd_out) {
        as_json j = {0};
        *cwd_out = NULL;
        if (as_json_parse(&j, hdr, hlen) == 0) *cwd_out = json_getstr(&j, 0, "cwd");
        as_json_free(&j);
    }
    persist *p = as_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->path = path.p;
    p->zstd = zstd;
    p->crash_at = c->crash_at_batch;
    p->nosync = c->nosync;
    p->batches = 1;
    as_event ev;
    while (as_sess_next(s, &ev)) {
        evfn(ctx, &ev);
        p->seq = ev.seq + 1;
    }
    as_sess_close(s);
    p->pk = as_packer_new(0, emit, p);
    p->fd = open(p->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (p->fd < 0) as_die_sys("open %s", p->path);
    return p;
}
