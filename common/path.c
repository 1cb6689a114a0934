// path.c - file names: joining, what a name stands for, directory
// arguments; reading a file beneath an open directory (fsat.h).
#include "acpsnap.h"
#include "fsat.h"
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *as_path_join(const char *dir, const char *name)
{
    size_t na = strlen(dir), nb = strlen(name);
    char *p = as_xmalloc(na + nb + 2);
    memcpy(p, dir, na);
    p[na] = '/';
    memcpy(p + na + 1, name, nb + 1);
    return p;
}

char *as_path_join3(const char *dir, const char *name, const char *file)
{
    char *d = as_path_join(dir, name), *p = as_path_join(d, file);
    free(d);
    return p;
}

int as_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int as_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *as_dir_arg(const char *arg)
{
    char *dir = as_xstrdup(arg);
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/';) dir[--n] = 0;
    struct stat st;
    if (stat(dir, &st) < 0) as_die_sys("open directory %s", dir);
    if (!S_ISDIR(st.st_mode)) as_die_at(dir, 0, 0, "not a directory");
    return dir;
}

// The reader's own window back in place, when it showed a fetched file.
static void give_back(as_lines *r)
{
    if (r->lent) r->b = r->own, r->lent = 0;
}

int as_lines_open_at(as_lines *r, int dfd, const char *name, const char *path)
{
    const char *f;
    size_t n;
    give_back(r);
    r->path = path;
    r->b.n = 0, r->pos = 0, r->eof = 0, r->whole = 1, r->reg = 0;
    if (as_fetched(dfd, name, &f, &n)) {   // the whole file, shown where it was fetched: no open, no copy
        r->own = r->b, r->lent = 1;
        r->b = (as_buf){(char *)f, n, n + 1};
        r->fd = -1, r->eof = 1;
        return 0;
    }
    r->fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    return r->fd < 0 ? -1 : 0;
}

int as_lines_open_reg(as_lines *r, int dfd, const char *name, const char *path)
{
    int rc = as_lines_open_at(r, dfd, name, path);
    r->reg = 1;
    return rc;
}

// Reads more of the file after what the window holds, keeping [pos, n).
static void lines_fill(as_lines *r)
{
    // (a window read to its end starts again only when it has no room left,
    // so a file that fits stays whole: rewinds are free, the text usable)
    if (r->pos && r->pos == r->b.n && r->b.cap - r->b.n <= 4096) r->b.n = r->pos = 0, r->whole = 0;
    else if (r->pos > r->b.cap / 2) {   // keep the unread tail only
        memmove(r->b.p, r->b.p + r->pos, r->b.n - r->pos);
        r->b.n -= r->pos, r->pos = 0, r->whole = 0;
    }
    as_buf_grow(&r->b, r->b.cap - r->b.n > 4096 ? r->b.cap - r->b.n - 1 : 262144);
    for (;;) {
        size_t want = r->b.cap - r->b.n - 1;
        ssize_t got = read(r->fd, r->b.p + r->b.n, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) as_die_sys("read %s", r->path);
        if (got == 0 || (r->reg && (size_t)got < want)) r->eof = 1;
        r->b.n += (size_t)got;
        r->b.p[r->b.n] = 0;
        return;
    }
}

int as_lines_next(as_lines *r, const char **line, size_t *len, int *has_lf)
{
    for (;;) {
        const char *p = r->pos < r->b.n ? r->b.p + r->pos : NULL, *nl = p ? memchr(p, '\n', r->b.n - r->pos) : NULL;
        if (nl) {
            *line = p, *len = (size_t)(nl - p), *has_lf = 1;
            r->pos += *len + 1;
            return 1;
        }
        if (r->eof) {
            if (r->pos == r->b.n) return 0;
            *line = p, *len = r->b.n - r->pos, *has_lf = 0;
            r->pos = r->b.n;
            return 1;
        }
        lines_fill(r);
    }
}

size_t as_lines_head(as_lines *r, size_t min, const char **p)
{
    while (!r->eof && r->b.n < min) lines_fill(r);
    *p = r->b.p ? r->b.p : "";
    return r->b.n;
}

void as_lines_rewind(as_lines *r)
{
    r->pos = 0;
    if (r->whole) return;
    if (lseek(r->fd, 0, SEEK_SET) < 0) as_die_sys("read %s", r->path);
    r->b.n = 0, r->eof = 0, r->whole = 1;
}

void as_lines_close(as_lines *r)
{
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    give_back(r);
}

// The kernel's record (getdents64(2)); glibc declares the call, not the record.
struct as_dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

int as_dir_each(int dfd, void (*fn)(void *ctx, const char *name, unsigned char type), void *ctx)
{
    union { char b[16384]; struct as_dirent64 align; } u;
    for (;;) {
        ssize_t got = getdents64(dfd, u.b, sizeof u.b);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) return 0;
        for (ssize_t k = 0; k < got;) {
            const struct as_dirent64 *e = (const struct as_dirent64 *)(u.b + k);
            const char *n = e->name;
            if (!(n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))) fn(ctx, n, e->type);
            k += e->reclen;
        }
    }
}
