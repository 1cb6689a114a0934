// confine.c - confinement of paths that come from scenario data (confine.h).
#include "confine.h"
#include "acpsnap.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/openat2.h>
#endif

static int bad_byte(unsigned char c) { return c < 0x20 || c == 0x7f; }

int as_rel_check(const char *rel, const char **why)
{
    size_t n = strlen(rel);
    *why = NULL;
    if (n == 0) *why = "an empty path";
    else if (n > AS_PATH_MAX) *why = "a path longer than 1024 bytes";
    else if (rel[0] == '/') *why = "an absolute path";
    for (const char *p = rel; !*why && *p; p++)
        if (bad_byte((unsigned char)*p)) *why = "a control character in a path";
    for (const char *c = rel; !*why && *c;) {
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            *why = "a '.' or '..' component in a path";
        else if (len == 0 && c != rel)
            *why = "an empty component in a path";
        else if (c[len] == '/' && c[len + 1] == 0)
            *why = "a path ending in '/'";
        c += len + (c[len] == '/');
    }
    return *why ? -1 : 0;
}

int as_name_check(const char *name, const char **why)
{
    *why = NULL;
    if (!*name) *why = "an empty name";
    else if (strchr(name, '/')) *why = "a '/' in the name";
    else if (name[0] == '.' || name[0] == '-') *why = "a name starting with '.' or '-'";
    for (const char *p = name; !*why && *p; p++)
        if (bad_byte((unsigned char)*p)) *why = "a control character in the name";
    if (!*why && strlen(name) > AS_NAME_MAX) *why = "a name longer than 128 bytes";
    return *why ? -1 : 0;
}

#ifdef SYS_openat2
// ENOSYS when the walk must do it: no openat2 (an old kernel, or a seccomp
// filter that answers ENOSYS or EPERM for it), or a resolution that kept
// racing (EAGAIN); the walk gives the same answers without it.
static int try_openat2(int rootfd, const char *rel, int flags, mode_t mode)
{
    static _Atomic int absent;   // the kernel refused openat2 once: walk from now on
    if (absent || getenv("ACPSNAP_NO_OPENAT2")) { errno = ENOSYS; return -1; }
    struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .mode = (flags & O_CREAT) ? mode & 07777 : 0,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    int fd = -1;
    for (int tries = 0; tries < 16; tries++) {
        fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN) break;
    }
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) { absent = 1; errno = ENOSYS; }
    if (fd < 0 && errno == EAGAIN) errno = ENOSYS;
    return fd;
}
#else
static int try_openat2(int rootfd, const char *rel, int flags, mode_t mode)
{
    (void)rootfd, (void)rel, (void)flags, (void)mode;
    errno = ENOSYS;
    return -1;
}
#endif

// The portable walk: every directory component opened O_NOFOLLOW|O_DIRECTORY
// from the one before, the last with the caller's flags plus O_NOFOLLOW.
// O_NOFOLLOW on a symlink says ELOOP, or ENOTDIR with O_DIRECTORY: make it ELOOP.
static int link_errno(int dfd, const char *comp)
{
    struct stat st;
    if (errno == ENOTDIR && !fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode)) errno = ELOOP;
    return -1;
}

static int walk_open(int rootfd, const char *rel, int flags, mode_t mode)
{
    char comp[AS_PATH_MAX + 1];
    int dfd = rootfd, fd = -1;
    const char *c = rel;
    for (;;) {
        size_t len = strcspn(c, "/");
        memcpy(comp, c, len);
        comp[len] = 0;
        if (c[len] == 0) {
            fd = openat(dfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            if (fd < 0) link_errno(dfd, comp);
            break;
        }
        int next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) link_errno(dfd, comp);
        if (dfd != rootfd) close(dfd);
        if (next < 0) return -1;
        dfd = next;
        c += len + 1;
    }
    int e = errno;
    if (dfd != rootfd) close(dfd);
    errno = e;
    return fd;
}

int as_open_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
    const char *why;
    if (as_rel_check(rel, &why)) { errno = EINVAL; return -1; }
    int fd = try_openat2(rootfd, rel, flags, mode);
    if (fd >= 0 || errno != ENOSYS) return fd;
    return walk_open(rootfd, rel, flags, mode);
}

const char *as_beneath_strerror(int err)
{
    switch (err) {
    case ELOOP: return "a symbolic link on the way (links are not followed)";
    case EXDEV: return "it leaves its root";
    case EINVAL: return "not a relative path beneath its root";
    default: return strerror(err);
    }
}

int as_open_under(const char *root, const char *rel, int flags, mode_t mode)
{
    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0) return -1;
    int fd = as_open_beneath(rfd, rel, flags, mode);
    int e = errno;
    close(rfd);
    errno = e;
    return fd;
}

int as_mkdirs_beneath(int rootfd, const char *rel, int last, mode_t mode)
{
    const char *why;
    if (as_rel_check(rel, &why)) { errno = EINVAL; return -1; }
    char sub[AS_PATH_MAX + 1];
    size_t n = strlen(rel);
    for (size_t i = 0; i <= n; i++) {
        if (rel[i] != '/' && !(i == n && last)) continue;
        memcpy(sub, rel, i);
        sub[i] = 0;
        int fd = as_open_beneath(rootfd, sub, O_RDONLY | O_DIRECTORY, 0);
        if (fd >= 0) { close(fd); continue; }
        if (errno != ENOENT) return -1;
        // mkdirat in the parent, itself opened beneath the root
        char *slash = strrchr(sub, '/');
        int pfd = rootfd;
        if (slash) {
            *slash = 0;
            pfd = as_open_beneath(rootfd, sub, O_RDONLY | O_DIRECTORY, 0);
            if (pfd < 0) return -1;
            *slash = '/';
        }
        int r = mkdirat(pfd, slash ? slash + 1 : sub, mode);
        int e = errno;
        if (pfd != rootfd) close(pfd);
        if (r && e != EEXIST) { errno = e; return -1; }
    }
    return 0;
}

// ---------------------------------------------------------------- copy_tree
// A link stays inside when its target is relative, climbs at most to the
// root with leading ".." components only, then only descends.
static int link_inside(const char *rel, const char *target)
{
    if (!*target || target[0] == '/') return 0;
    int depth = 0;
    for (const char *p = rel; *p; p++) depth += *p == '/';
    int up = 1;
    for (const char *c = target; *c;) {
        size_t len = strcspn(c, "/");
        int dotdot = len == 2 && c[0] == '.' && c[1] == '.';
        if (dotdot && (!up || --depth < 0)) return 0;
        if (!dotdot && len > 0) {
            up = 0;
            if (len == 1 && c[0] == '.') return 0;
        }
        c += len + (c[len] == '/');
    }
    return 1;
}

// A regular file (checked again on the open file: no fifo swapped in blocks
// us); permission bits only, no set-id or sticky bit.
static int copy_file(int sfd, int dfd, const char *name, mode_t mode)
{
    int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (in < 0) return -1;
    struct stat st;
    if (fstat(in, &st) || !S_ISREG(st.st_mode)) { close(in); errno = EPERM; return -1; }
    int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
    if (out < 0) { int e = errno; close(in); errno = e; return -1; }
    char buf[65536];
    ssize_t r;
    int rc = 0;
    while ((r = read(in, buf, sizeof buf)) > 0)
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0) { if (errno == EINTR) continue; rc = -1; break; }
            off += w;
        }
    if (r < 0) rc = -1;
    int e = errno;
    close(in);
    if (close(out) && !rc) { rc = -1; e = errno; }
    errno = e;
    return rc;
}

static int copy_dir(int sfd, int dfd, const char *rel, char **bad);

// *bad = rel (the refused entry), errno kept; -1.
static int named(char **bad, const char *rel)
{
    int e = errno;
    *bad = as_xstrdup(rel);
    errno = e;
    return -1;
}

static int copy_entry(int sfd, int dfd, const char *name, const char *rel, char **bad)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW)) goto fail;
    if (S_ISREG(st.st_mode)) {
        if (copy_file(sfd, dfd, name, st.st_mode)) goto fail;
    } else if (S_ISDIR(st.st_mode)) {
        if (mkdirat(dfd, name, (st.st_mode & 0777) | 0700)) goto fail;
        int s2 = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int d2 = s2 < 0 ? -1 : openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = d2 < 0 ? -1 : copy_dir(s2, d2, rel, bad);
        int e = errno;
        if (s2 >= 0) close(s2);
        if (d2 >= 0) close(d2);
        errno = e;
        if (rc) { if (*bad) return -1; goto fail; }
    } else if (S_ISLNK(st.st_mode)) {
        char target[AS_PATH_MAX + 1];
        ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);
        if (n < 0) goto fail;
        target[n] = 0;
        if (!link_inside(rel, target)) { errno = ELOOP; goto fail; }
        if (symlinkat(target, dfd, name)) goto fail;
    } else {
        errno = EPERM;
        goto fail;
    }
    return 0;
fail:
    return named(bad, rel);
}

static int copy_dir(int sfd, int dfd, const char *rel, char **bad)
{
    int fd = dup(sfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) { int e = errno; if (fd >= 0) close(fd); errno = e; return named(bad, *rel ? rel : "."); }
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *sub = *rel ? as_path_join(rel, de->d_name) : as_xstrdup(de->d_name);
        rc = copy_entry(sfd, dfd, de->d_name, sub, bad);
        free(sub);
    }
    int e = errno;
    closedir(d);
    errno = e;
    return rc;
}

int as_copy_tree(const char *src, const char *dst, char **bad)
{
    *bad = NULL;
    int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0) return named(bad, ".");
    int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { int e = errno; close(sfd); errno = e; return named(bad, "."); }
    int rc = copy_dir(sfd, dfd, "", bad);
    int e = errno;
    close(sfd);
    close(dfd);
    errno = e;
    return rc;
}
