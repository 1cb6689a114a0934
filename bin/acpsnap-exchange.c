// acpsnap-exchange - atomically exchange two paths (renameat2 RENAME_EXCHANGE),
// the one step by which record, refresh and update replace a scenario
// directory with its staged successor. Where the kernel or file system has
// no exchange, a three-rename sequence that never shows a mix of the two.
#include "acpsnap.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static const char usage[] =
    "usage: acpsnap-exchange [-f] A B\n"
    "Atomically exchanges the paths A and B (files or directories, on one file\n"
    "system): afterwards A names what B named and B what A named. Everything\n"
    "under B is flushed to disk (fsync) first, and the directories after.\n"
    "Without an atomic exchange (EINVAL, ENOSYS) it renames A to\n"
    ".<A's name>.acpsnap-old.<pid> beside A, B to A, and that to B: a kill\n"
    "in between leaves A missing or new, never a mix of the two.\n"
    "  -f, --fallback  use the three renames even where the exchange works\n"
    "  -h, --help      this text\n"
    "      --version   the version\n"
    "Exit status: 0 exchanged, 2 trouble.\n";

static const char *pa, *pb;   // the operands, for messages

static _Noreturn void fail(int e)
{
    errno = e;
    as_die_sys("exchange %s and %s", pa, pb);
}

// fsync one path (an nftw callback): files and directories alike.
static int sync_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    if (type != FTW_F && type != FTW_D && type != FTW_DP) return 0;   // links, special files
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (S_ISDIR(st->st_mode) ? O_DIRECTORY : 0));
    if (fd < 0) return errno == EACCES || errno == EPERM ? 0 : errno;   // unreadable: nothing of ours to flush
    int r = fsync(fd) < 0 && errno != EINVAL ? errno : 0;   // EINVAL: a file system without fsync
    close(fd);
    return r;
}

// The directory that holds path (a copy).
static char *parent_of(const char *path)
{
    char *d = as_xstrdup(path);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') d[--n] = 0;
    char *s = strrchr(d, '/');
    if (!s) { free(d); return as_xstrdup("."); }
    if (s == d) s[1] = 0; else *s = 0;
    return d;
}

static void sync_dir(const char *path)
{
    char *d = parent_of(path);
    struct stat st;
    if (stat(d, &st) == 0) {
        struct FTW f = {0};
        int r = sync_one(d, &st, FTW_D, &f);
        if (r) { free(d); fail(r); }
    }
    free(d);
}

// The fallback: A → .<name>.acpsnap-old.<pid> (beside A), B → A, that → B.
static void three_renames(const char *a, const char *b)
{
    char *dir = parent_of(a);
    const char *base = strrchr(a, '/');
    base = base ? base + 1 : a;
    size_t n = strlen(dir) + strlen(base) + 64;
    char *tmp = as_xmalloc(n);
    snprintf(tmp, n, "%s/.%s.acpsnap-old.%ld", dir, base, (long)getpid());
    free(dir);
    // Keep the window short: no SIGINT, SIGTERM, SIGHUP or SIGQUIT until the
    // three renames are done (SIGKILL cannot be kept off: that is the case
    // the names are for).
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT), sigaddset(&block, SIGTERM), sigaddset(&block, SIGHUP), sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, NULL);
    if (rename(a, tmp) < 0) fail(errno);
    if (rename(b, a) < 0) {
        int e = errno;
        if (rename(tmp, a) < 0) as_warn("%s: unable to move it back to %s: %s", tmp, a, strerror(errno));
        fail(e);
    }
    if (rename(tmp, b) < 0) {
        int e = errno;
        as_warn("%s: the old %s is left here: %s", tmp, a, strerror(e));
        fail(e);
    }
    free(tmp);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"fallback", no_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int fallback = 0, c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "fh", lo, NULL)) != -1) {
        switch (c) {
        case 'f': fallback = 1; break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(usage, AS_TROUBLE);
        }
    }
    if (argc - optind != 2) as_usage_exit(usage, AS_TROUBLE);
    pa = argv[optind], pb = argv[optind + 1];
    struct stat sa, sb;
    if (lstat(pa, &sa) < 0 || lstat(pb, &sb) < 0) fail(errno);
    if (sa.st_dev != sb.st_dev) fail(EXDEV);
    // What B holds reaches the disk before any name points at it.
    int r = nftw(pb, sync_one, 16, FTW_PHYS);
    if (r) fail(r > 0 ? r : errno);
    if (!fallback) {
#ifdef SYS_renameat2
        if (syscall(SYS_renameat2, AT_FDCWD, pa, AT_FDCWD, pb, RENAME_EXCHANGE) == 0) goto done;
#else
        errno = ENOSYS;
#endif
        if (errno != EINVAL && errno != ENOSYS) fail(errno);
    }
    three_renames(pa, pb);
done:
    sync_dir(pa);
    char *da = parent_of(pa), *db = parent_of(pb);
    if (strcmp(da, db)) sync_dir(pb);
    free(da);
    free(db);
    return AS_OK;
}
