// Unit tests of common/fetch.c: the files of a directory read at once, and
// the readers (as_lines_open_at, as_read_raw_at) handing them out: the same
// bytes as a read, whatever was fetched; what cannot be fetched whole (too
// long, missing, a directory, past the first AS_FETCH_MAX) left to the
// readers; a forked process's own ring; ACPSNAP_IO_URING=0.
#include "acpsnap.h"
#include "fsat.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; fprintf(stderr, "fetch_unit: %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

enum { NFILES = AS_FETCH_MAX + 4 };
// names[0, 2): a directory and a missing file, among the first fetched;
// names[2, NFILES + 2): files of sizes[]
static char *names[NFILES + 2];
static size_t sizes[NFILES + 2];

static void put_file(int dfd, const char *name, size_t n, int seed)
{
    char *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = (char)(i % 61 == 60 ? '\n' : 'a' + (int)((i * 7 + (size_t)seed) % 26));
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, b, n) != (ssize_t)n || close(fd) < 0) { perror(name); exit(2); }
    free(b);
}

// The bytes of names[i] as a plain read gives them.
static void expect(int dfd, size_t i, as_buf *want)
{
    as_buf_reset(want);
    as_buf_put(want, "", 0);   // (p set for an empty file too)
    int fd = openat(dfd, names[i], O_RDONLY);
    char b[65536];
    for (ssize_t r; fd >= 0 && (r = read(fd, b, sizeof b)) > 0;) as_buf_put(want, b, (size_t)r);
    if (fd >= 0) close(fd);
}

// Both readers give each listed file's bytes; returns how many were fetched.
static size_t check_dir(int dfd)
{
    static as_lines rd;
    as_buf want = {0}, got = {0};
    size_t fetched = 0;
    as_fetch(dfd, names, NFILES + 2);
    for (size_t i = 0; i < NFILES + 2; i++) {
        const char *p;
        size_t n;
        int hit = as_fetched(dfd, names[i], &p, &n);
        fetched += (size_t)hit;
        if (i < 2) { CHECK(!hit, "%s: fetched", names[i]); continue; }   // the directory, the missing file
        CHECK(!hit || (i < AS_FETCH_MAX && sizes[i] < AS_FETCH_WINDOW), "%s: fetched, but it could not be", names[i]);
        expect(dfd, i, &want);
        CHECK(!hit || (n == want.n && !memcmp(p, want.p, n)), "%s: fetched bytes differ", names[i]);
        CHECK(as_read_raw_at(dfd, names[i], names[i], &got, 1) == 0 && got.n == want.n && !memcmp(got.p, want.p, got.n),
              "%s: as_read_raw_at differs", names[i]);
        CHECK(as_lines_open_reg(&rd, dfd, names[i], names[i]) == 0, "%s: as_lines_open_reg", names[i]);
        as_buf_reset(&got);
        as_buf_put(&got, "", 0);
        const char *line;
        size_t len;
        for (int lf; as_lines_next(&rd, &line, &len, &lf);) { as_buf_put(&got, line, len); if (lf) as_buf_putc(&got, '\n'); }
        as_lines_close(&rd);
        CHECK(got.n == want.n && !memcmp(got.p, want.p, got.n), "%s: as_lines differs", names[i]);
    }
    CHECK(as_read_raw_at(dfd, "missing", "missing", &got, 1) < 0, "missing: read");
    const char *p;
    size_t n;
    CHECK(!as_fetched(AT_FDCWD, names[2], &p, &n), "fetched beneath another directory");
    as_fetch_drop();
    CHECK(!as_fetched(dfd, names[0], &p, &n), "fetched after the drop");
    as_buf_free(&want);
    as_buf_free(&got);
    return fetched;
}

int main(void)
{
    char dir[] = "/tmp/fetch_unit.XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    static const size_t fixed[] = {0, 1, 422, 8191, 65536, AS_FETCH_WINDOW - 1, AS_FETCH_WINDOW, AS_FETCH_WINDOW + 1, 3 * AS_FETCH_WINDOW};
    names[0] = "sub", names[1] = "missing";
    mkdirat(dfd, "sub", 0755);
    for (size_t i = 2; i < NFILES + 2; i++) {
        char n[32];
        snprintf(n, sizeof n, "f%02zu.jsonl", i);
        names[i] = strdup(n);
        sizes[i] = i - 2 < sizeof fixed / sizeof *fixed ? fixed[i - 2] : 100 + i;
        put_file(dfd, names[i], sizes[i], (int)i);
    }

    // of the first AS_FETCH_MAX names, 2 are no file and 3 too long; none without io_uring
    size_t parent = check_dir(dfd);
    CHECK(parent == 0 || parent == AS_FETCH_MAX - 5, "%zu fetched", parent);
    pid_t pid = fork();
    if (pid == 0) {   // the child's own ring; then one turned off
        size_t child = check_dir(dfd);
        CHECK(child == parent, "the child fetched %zu, the parent %zu", child, parent);
        if (fork() == 0) {
            setenv("ACPSNAP_IO_URING", "0", 1);
            CHECK(check_dir(dfd) == 0, "fetched with ACPSNAP_IO_URING=0");
            _exit(fails ? 1 : 0);
        }
        int st;
        wait(&st);
        _exit(fails || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked checks failed");
    CHECK(check_dir(dfd) == parent, "the parent's ring after the fork");
    for (size_t i = 2; i < NFILES + 2; i++) unlinkat(dfd, names[i], 0);
    unlinkat(dfd, "sub", AT_REMOVEDIR);
    close(dfd);
    rmdir(dir);
    if (fails) return 1;
    printf("fetch_unit: ok (%s)\n", parent ? "io_uring: files fetched" : "no io_uring here: every file read as ever");
    return 0;
}
