// acpsnap-agent - the reference ACP agent: main(), shared helpers.
#include <fcntl.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "acpsnap.h"
#include "agent.h"

static const char USAGE[] =
    "acpsnap-agent [-c config] [--replay script] [--check-config]\n"
    "  an ACP agent on stdin/stdout; see acpsnap-agent(1) and example/README\n"
    "  -c, --config FILE   read settings from FILE\n"
    "  --replay FILE       replay mode, serving model calls from FILE\n"
    "  --check-config      print the effective settings and exit\n"
    "  --help, --version\n";

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void random_bytes(unsigned char *p, size_t n)
{
    static int fd = -1;
    if (fd < 0) fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, p, n) != (ssize_t)n) as_die_sys("read /dev/urandom");
}

void uuid_v4(char out[37])
{
    unsigned char r[16];
    random_bytes(r, sizeof r);
    r[6] = (r[6] & 0x0f) | 0x40;
    r[8] = (r[8] & 0x3f) | 0x80;
    static const char hx[] = "0123456789abcdef";
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *o++ = '-';
        *o++ = hx[r[i] >> 4];
        *o++ = hx[r[i] & 15];
    }
    *o = 0;
}

void random_hex(char *out, size_t n)
{
    unsigned char r[64];
    if (n > 2 * sizeof r) n = 2 * sizeof r;
    random_bytes(r, (n + 1) / 2);
    for (size_t i = 0; i < n; i++) out[i] = "0123456789abcdef"[(r[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[n] = 0;
}

char *json_getstr(const as_json *j, int obj, const char *key)
{
    int v = as_json_get(j, obj, key);
    if (v < 0 || j->t[v].type != AS_JSTR) return NULL;
    as_buf b = {0};
    as_json_str(j, v, &b);
    if (!b.p) as_buf_puts(&b, "");
    return b.p;
}

struct agent ag = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .out_mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, 0, 'c'},
        {"replay", required_argument, 0, 'r'},
        {"check-config", no_argument, 0, 'k'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    const char *cfgpath = NULL, *replay = NULL;
    int check = 0, o;
    as_setprog(argv[0]);
#ifdef M_ARENA_MAX
    // one malloc arena: a turn's thread allocates from the heap already
    // made, not from a new arena of its own (its pages each a fault)
    mallopt(M_ARENA_MAX, 1);
#endif
    while ((o = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
        switch (o) {
        case 'c': cfgpath = optarg; break;
        case 'r': replay = optarg; break;
        case 'k': check = 1; break;
        case 'h': as_usage_exit(USAGE, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(USAGE, AS_TROUBLE);
        }
    }
    if (optind != argc) as_usage_exit(USAGE, AS_TROUBLE);
    signal(SIGPIPE, SIG_IGN);

    config_load(&ag.cfg, cfgpath, replay);
    if (check) {
        config_print(&ag.cfg, stdout);
        config_free(&ag.cfg);
        if (fflush(stdout) || ferror(stdout)) as_die_sys("write stdout");
        return 0;
    }
    if (ag.cfg.replay) replay_init(&ag.cfg);
    else deepseek_global_init();

    char *line = NULL; size_t cap = 0; ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        acp_dispatch(line, (size_t)n);
    }
    free(line);
    acp_shutdown();
    int rc = ag.failed ? AS_TROUBLE : 0;
    if (ag.cfg.replay) { if (replay_finish()) rc = 3; }
    else deepseek_global_cleanup();
    config_free(&ag.cfg);
    return rc;
}
