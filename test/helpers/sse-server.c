// sse-server - a scripted HTTP server on 127.0.0.1 for the DeepSeek adapter
// tests (test/agent-deepseek.bats). Built by the suite's setup_file.
//
//   sse-server PORTFILE LOGFILE [RESPONSE...]
//
// Listens on an ephemeral loopback port (written to PORTFILE), accepts
// connections one at a time, logs each request ("== connection N" line, then
// the request head and body) to LOGFILE, and answers connection N with file
// RESPONSE[N] sent as is, except for directive lines:
//   @@sleep MS        pause
//   @@keepalive N MS  send ": keep-alive\n\n" N times, MS apart
// then closes the connection. Connections past the last RESPONSE are closed
// at once. Runs until killed.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w; n -= (size_t)w;
    }
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: sse-server PORTFILE LOGFILE [RESPONSE...]\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16) || getsockname(s, (struct sockaddr *)&a, &al)) {
        perror("sse-server");
        return 2;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *pf = fopen(tmp, "w");
    fprintf(pf, "%d\n", ntohs(a.sin_port));
    fclose(pf);
    rename(tmp, argv[1]);
    for (int n = 0; ; n++) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        // the request: head, then Content-Length bytes of body
        char *req = NULL; size_t len = 0, cap = 0, head = 0, want = 0;
        for (;;) {
            if (len + 4096 > cap) { cap = 2 * cap + 8192; req = realloc(req, cap); }
            ssize_t r = recv(c, req + len, cap - len - 1, 0);
            if (r <= 0) break;
            len += (size_t)r;
            req[len] = 0;
            if (!head) {
                char *e = strstr(req, "\r\n\r\n");
                if (e) {
                    head = (size_t)(e - req) + 4;
                    char *cl = strcasestr(req, "content-length:");
                    want = cl && cl < e ? strtoul(cl + 15, NULL, 10) : 0;
                }
            }
            if (head && len >= head + want) break;
        }
        FILE *log = fopen(argv[2], "a");
        fprintf(log, "== connection %d\n", n + 1);
        if (req) fwrite(req, 1, len, log);
        fputc('\n', log);
        fclose(log);
        free(req);
        if (3 + n < argc) {
            FILE *f = fopen(argv[3 + n], "r");
            char *line = NULL; size_t lcap = 0; ssize_t ln;
            while (f && (ln = getline(&line, &lcap, f)) > 0) {
                int ms, k;
                if (sscanf(line, "@@sleep %d", &ms) == 1) usleep((useconds_t)ms * 1000);
                else if (sscanf(line, "@@keepalive %d %d", &k, &ms) == 2)
                    for (int i = 0; i < k; i++) { send_all(c, ": keep-alive\n\n", 14); usleep((useconds_t)ms * 1000); }
                else send_all(c, line, (size_t)ln);
            }
            free(line);
            if (f) fclose(f);
        }
        shutdown(c, SHUT_RDWR);
        close(c);
    }
}
