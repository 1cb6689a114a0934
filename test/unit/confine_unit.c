// Unit tests of common/confine.c: the path rule, confined opens (openat2 and
// the O_NOFOLLOW walk), confined mkdir -p and the workspace copy.
#include "acpsnap.h"
#include "confine.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; fprintf(stderr, "confine_unit: %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void rule(const char *rel, int ok)
{
    const char *why;
    int r = as_rel_check(rel, &why);
    CHECK((r == 0) == ok, "as_rel_check(\"%s\") = %d (%s)", rel, r, why ? why : "ok");
}

static void name(const char *n, int ok)
{
    const char *why;
    int r = as_name_check(n, &why);
    CHECK((r == 0) == ok, "as_name_check(\"%s\") = %d (%s)", n, r, why ? why : "ok");
}

static void rules(void)
{
    rule("a", 1); rule("a/b/c.txt", 1); rule(".acpsnap-ready", 1); rule("a..b", 1); rule("..a", 1);
    rule("", 0); rule("/etc/passwd", 0); rule("..", 0); rule("../x", 0); rule("a/../../x", 0);
    rule("a/./b", 0); rule(".", 0); rule("a//b", 0); rule("a/b/", 0); rule("a\nb", 0);
    rule("a\x7f", 0); rule("-x", 1); rule("a b/c d", 1);
    char big[AS_PATH_MAX + 2];
    memset(big, 'a', sizeof big - 1); big[sizeof big - 1] = 0;
    rule(big, 0);
    name("text-turn", 1); name("a.b_c", 1); name("", 0); name("../../tmp/victim", 0); name(".hidden", 0);
    name("-rf", 0); name("a\nb", 0); name("a\tb", 0); name("x/y", 0);
    char longname[AS_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname - 1); longname[sizeof longname - 1] = 0;
    name(longname, 0);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(2); }
    fputs(text, f);
    fclose(f);
}

static void opens(const char *tmp, const char *mode)
{
    setenv("ACPSNAP_NO_OPENAT2", mode, 1);
    if (!*mode) unsetenv("ACPSNAP_NO_OPENAT2");
    char *root = as_path_join(tmp, "root"), *victim = as_path_join(tmp, "victim");
    int rfd = open(root, O_RDONLY | O_DIRECTORY);
    CHECK(rfd >= 0, "open root");
    int fd = as_open_beneath(rfd, "sub/f.txt", O_RDONLY, 0);
    CHECK(fd >= 0, "[%s] plain file beneath: %s", mode, strerror(errno));
    if (fd >= 0) close(fd);
    errno = 0;
    CHECK(as_open_beneath(rfd, "link", O_WRONLY | O_TRUNC, 0) < 0 && errno == ELOOP, "[%s] final link: errno %d", mode, errno);
    errno = 0;
    CHECK(as_open_beneath(rfd, "dirlink/x", O_WRONLY | O_CREAT, 0644) < 0 && errno == ELOOP, "[%s] link in the middle: errno %d", mode, errno);
    errno = 0;
    CHECK(as_open_beneath(rfd, "../victim", O_RDONLY, 0) < 0 && errno == EINVAL, "[%s] climb: errno %d", mode, errno);
    errno = 0;
    CHECK(as_open_beneath(rfd, "/etc/passwd", O_RDONLY, 0) < 0 && errno == EINVAL, "[%s] absolute: errno %d", mode, errno);
    fd = as_open_beneath(rfd, "new.txt", O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0, "[%s] create: %s", mode, strerror(errno));
    if (fd >= 0) close(fd);
    errno = 0;
    CHECK(as_open_beneath(rfd, "new.txt", O_WRONLY | O_CREAT | O_EXCL, 0644) < 0 && errno == EEXIST, "[%s] excl", mode);
    char *newp = as_path_join(root, "new.txt");
    unlink(newp);
    free(newp);
    CHECK(!as_mkdirs_beneath(rfd, "d1/d2/d3", 1, 0755), "[%s] mkdirs: %s", mode, strerror(errno));
    CHECK(!as_mkdirs_beneath(rfd, "d1/d2/d3/file", 0, 0755), "[%s] mkdirs again", mode);
    errno = 0;
    CHECK(as_mkdirs_beneath(rfd, "dirlink/deeper", 1, 0755) < 0 && errno == ELOOP, "[%s] mkdirs through a link: errno %d", mode, errno);
    struct stat st;
    CHECK(stat(victim, &st) == 0 && st.st_size == 6, "[%s] the victim is untouched", mode);
    char *d1 = as_path_join(root, "d1/d2/d3"); rmdir(d1); free(d1);
    d1 = as_path_join(root, "d1/d2"); rmdir(d1); free(d1);
    d1 = as_path_join(root, "d1"); rmdir(d1); free(d1);
    close(rfd);
    free(root);
    free(victim);
}

static void copies(const char *tmp)
{
    char *src = as_path_join(tmp, "seed"), *dst = as_path_join(tmp, "copy"), *bad = NULL;
    char *p;
    mkdir(src, 0755);
    p = as_path_join(src, "a"); mkdir(p, 0755); free(p);
    p = as_path_join(src, "a/file"); put(p, "x"); free(p);
    p = as_path_join(src, "a/up"); CHECK(!symlink("../top", p), "symlink"); free(p);
    p = as_path_join(src, "top"); put(p, "t"); free(p);
    mkdir(dst, 0755);
    CHECK(!as_copy_tree(src, dst, &bad), "copy an inside link: %s", bad ? bad : "");
    free(bad);
    p = as_path_join(dst, "a/up");
    char t[64] = {0};
    CHECK(readlink(p, t, sizeof t - 1) > 0 && !strcmp(t, "../top"), "the inside link is kept as a link");
    free(p);
    // an outside link is refused, and named
    p = as_path_join(src, "a/out"); CHECK(!symlink("../../victim", p), "symlink"); free(p);
    char *dst2 = as_path_join(tmp, "copy2");
    mkdir(dst2, 0755);
    CHECK(as_copy_tree(src, dst2, &bad) < 0 && bad && !strcmp(bad, "a/out") && errno == ELOOP, "outside link refused: %s", bad ? bad : "(none)");
    free(bad);
    p = as_path_join(src, "a/out"); unlink(p); free(p);
    p = as_path_join(src, "abs"); CHECK(!symlink("/etc/passwd", p), "symlink"); free(p);
    char *dst3 = as_path_join(tmp, "copy3");
    mkdir(dst3, 0755);
    CHECK(as_copy_tree(src, dst3, &bad) < 0 && bad && !strcmp(bad, "abs"), "absolute link refused: %s", bad ? bad : "(none)");
    free(bad);
    p = as_path_join(src, "abs"); unlink(p); free(p);
    // a fifo is refused (and the copy does not block on it)
    p = as_path_join(src, "a/pipe"); CHECK(!mkfifo(p, 0644), "mkfifo"); free(p);
    char *dst4 = as_path_join(tmp, "copy4");
    mkdir(dst4, 0755);
    CHECK(as_copy_tree(src, dst4, &bad) < 0 && bad && !strcmp(bad, "a/pipe"), "fifo refused: %s", bad ? bad : "(none)");
    free(bad);
    free(src); free(dst); free(dst2); free(dst3); free(dst4);
}

int main(void)
{
    rules();
    char tmpl[] = "/tmp/confine_unit.XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    if (!tmp) { perror("mkdtemp"); return 2; }
    char *p;
    p = as_path_join(tmp, "root"); mkdir(p, 0755); free(p);
    p = as_path_join(tmp, "root/sub"); mkdir(p, 0755); free(p);
    p = as_path_join(tmp, "root/sub/f.txt"); put(p, "inside"); free(p);
    p = as_path_join(tmp, "victim"); put(p, "victim"); free(p);
    p = as_path_join(tmp, "root/link"); CHECK(!symlink("../victim", p), "symlink"); free(p);
    p = as_path_join(tmp, "root/dirlink"); CHECK(!symlink("..", p), "symlink"); free(p);
    opens(tmp, "");
    opens(tmp, "1");
    copies(tmp);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fails++;
    if (fails) fprintf(stderr, "confine_unit: %d failures\n", fails);
    return fails ? 1 : 0;
}
