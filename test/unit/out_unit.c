// Unit tests of common/out.c: atomic files get the umask's mode; on a fatal
// exit the output stops at a line boundary (nothing for a small output, only
// complete zstd frames) and no temp file stays behind.
#include "acpsnap.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; fprintf(stderr, "out_unit: %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char dir[] = "/tmp/out_unit.XXXXXX";

static char *in_dir(const char *name) { return as_path_join(dir, name); }

static void atomic_mode(mode_t mask, mode_t want)
{
    char *p = in_dir("atomic");
    mode_t old = umask(mask);
    as_out *o = as_out_atomic(p, 0);
    as_out_line(o, "x", 1);
    as_out_commit(o);
    umask(old);
    struct stat st;
    CHECK(!stat(p, &st) && (st.st_mode & 0777) == want, "umask %03o: mode %03o, want %03o",
          (unsigned)mask, (unsigned)(st.st_mode & 0777), (unsigned)want);
    unlink(p);
    free(p);
}

// Runs fn in a child whose stdout is the file `out` (as_die exits 2).
static void in_child(void (*fn)(void), const char *out)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0) _exit(9);
        close(fd);
        freopen("/dev/null", "w", stderr);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "child: status %d, want exit 2", st);
}

static void die_mid_atomic(void)
{
    as_out *o = as_out_atomic(in_dir("gone"), 0);
    as_out_line(o, "x", 1);
    as_die(AS_TROUBLE, "trouble");
}

static void die_zstd(void)
{
    as_out *o = as_out_stdout(1);
    as_out_line(o, "head", 4);
    as_out_frame(o);
    for (int i = 0; i < 3; i++) as_out_line(o, "body", 4);
    as_die(AS_TROUBLE, "trouble");
}

// Lines of incompressible text: enough to write part of the body frame.
#define NLINES 400
static void die_zstd_big(void)
{
    as_out *o = as_out_stdout(1);
    as_out_line(o, "head", 4);
    as_out_frame(o);
    unsigned x = 1;
    char line[1001];
    for (int i = 0; i < NLINES; i++) {
        for (int k = 0; k < 1000; k++) { x = x * 1103515245u + 12345u; line[k] = "0123456789abcdef"[(x >> 16) & 15]; }
        as_out_line(o, line, 1000);
    }
    as_out_write(o, "part", 4);   // a partial line: never written
    as_die(AS_TROUBLE, "trouble");
}

static void die_zstd_nothing(void)
{
    as_out *o = as_out_stdout(1);
    as_out_frame(o);
    (void)o;
    as_die(AS_TROUBLE, "trouble");
}

static char *big;
#define BIG (200u * 1024)

static void die_after_big_line(void)
{
    as_out *o = as_out_stdout(0);
    as_out_line(o, "a", 1);
    as_out_line(o, big, BIG);
    as_out_write(o, "partial", 7);
    as_die(AS_TROUBLE, "trouble");
}

static void read_all(const char *path, as_buf *b)
{
    CHECK(as_read_raw(path, b) == 0, "read %s", path);
}

int main(void)
{
    as_setprog("out_unit");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    atomic_mode(022, 0644);
    atomic_mode(077, 0600);
    atomic_mode(0, 0666);

    // a fatal exit removes the atomic writer's temp file and creates nothing
    char *out = in_dir("stdout");
    in_child(die_mid_atomic, out);
    DIR *d = opendir(dir);
    int others = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "stdout")) others++;
    closedir(d);
    CHECK(others == 0, "%d files left behind by a fatal exit", others);

    // zstd: a small output writes nothing, not even its header frame
    as_buf b = {0};
    in_child(die_zstd, out);
    read_all(out, &b);
    CHECK(b.n == 0, "small zstd output: %zu bytes written", b.n);
    in_child(die_zstd_nothing, out);
    read_all(out, &b);
    CHECK(b.n == 0, "an empty frame was written (%zu bytes)", b.n);
    // a large one: complete frames holding whole lines
    in_child(die_zstd_big, out);
    read_all(out, &b);
    size_t at = 0, frames = 0;
    while (at < b.n) {
        size_t f = ZSTD_findFrameCompressedSize(b.p + at, b.n - at);
        CHECK(!ZSTD_isError(f), "frame %zu at %zu is incomplete", frames, at);
        if (ZSTD_isError(f)) break;
        at += f;
        frames++;
    }
    CHECK(frames == 2, "%zu frames, want 2", frames);
    size_t cap = 5 + NLINES * 1001;
    char *text = as_xmalloc(cap);
    size_t n = ZSTD_decompress(text, cap, b.p, b.n);
    CHECK(!ZSTD_isError(n) && n > 5 && n < cap && (n - 5) % 1001 == 0 && text[n - 1] == '\n',
          "zstd output: %zu bytes", n);
    free(text);

    // plain: a line longer than the buffer keeps its LF, a partial line is dropped
    big = as_xmalloc(BIG);
    memset(big, 'x', BIG);
    in_child(die_after_big_line, out);
    read_all(out, &b);
    CHECK(b.n == BIG + 3 && b.p[b.n - 1] == '\n', "plain output: %zu bytes", b.n);
    free(big);
    as_buf_free(&b);
    unlink(out);
    free(out);
    rmdir(dir);
    return fails ? 1 : 0;
}
