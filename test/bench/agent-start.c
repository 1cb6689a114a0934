// agent-start - start-up to initialize response time of an ACP agent.
//   agent-start RUNS AGENT [ARGS...]
// Spawns the agent RUNS times, writes one initialize request, times the
// first stdout line, closes stdin and reaps the agent. Prints the median and
// the 90th percentile in microseconds.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}
static int cmp(const void *a, const void *b) { long x = *(const long *)a, y = *(const long *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: agent-start RUNS AGENT [ARGS...]\n"); return 2; }
    int runs = atoi(argv[1]);
    long *t = calloc((size_t)runs, sizeof *t);
    static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n";
    for (int r = 0; r < runs; r++) {
        int in[2], out[2];
        if (pipe(in) || pipe(out)) return 2;
        long t0 = us();
        pid_t pid = fork();
        if (pid == 0) {
            dup2(in[0], 0); dup2(out[1], 1);
            close(in[0]); close(in[1]); close(out[0]); close(out[1]);
            execv(argv[2], argv + 2);
            _exit(127);
        }
        close(in[0]); close(out[1]);
        if (write(in[1], init, sizeof init - 1) < 0) return 2;
        char buf[4096]; ssize_t n; int got = 0;
        while (!got && (n = read(out[0], buf, sizeof buf)) > 0) got = memchr(buf, '\n', (size_t)n) != NULL;
        t[r] = us() - t0;
        close(in[1]);
        while (read(out[0], buf, sizeof buf) > 0) ;
        close(out[0]);
        int st;
        waitpid(pid, &st, 0);
        if (!got) { fprintf(stderr, "agent-start: no initialize response\n"); return 1; }
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    printf("%ld %ld\n", t[runs / 2], t[(runs * 9) / 10]);
    free(t);
    return 0;
}
