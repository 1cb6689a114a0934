// model_replay.c - the replay adapter: serves a replay script positionally
// (acpsnap-replay(5)). Never touches the network or .env.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "acpsnap.h"
#include "agent.h"
#include "confine.h"
#include "replay.h"

static struct {
    as_replay_script sc;
    size_t next;            // index of the next entry to serve
    int in_flight;
    int failures;
} rp;

int replay_init(const config *c)
{
    int log = as_is_session_log(c->replay_script);   // else a replay script
    if (log < 0) as_die_sys("open %s", c->replay_script);
    if (log)
        as_replay_from_session(c->replay_script, c->replay_override, 1, &rp.sc);  // child logs skip their seed
    else {
        if (c->replay_override)
            as_die(AS_TROUBLE, "%s: replay_override applies only to a session log", c->replay_script);
        as_replay_load(c->replay_script, &rp.sc);
    }
    return 0;
}

int replay_finish(void)
{
    if (rp.next < rp.sc.n) {
        as_warn("replay: %zu of %zu entries not consumed", rp.sc.n - rp.next, rp.sc.n);
        rp.failures++;
    }
    as_replay_script_free(&rp.sc);
    return rp.failures;
}

static void replay_close(stream *s)
{
    pthread_mutex_lock(&ag.mu);
    if (s->impl) rp.in_flight = 0;
    pthread_mutex_unlock(&ag.mu);
}

// Creates the hang's readyFile beneath the session cwd (new, no link
// followed: acpsnap-replay(5)). 0, or -1 with the reason in msg.
static int write_ready_file(const char *cwd, const char *rel, size_t call, char *msg, size_t cap)
{
    int fd = as_open_under(cwd, rel, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) { close(fd); return 0; }
    snprintf(msg, cap, "replay: model call %zu: unable to create readyFile \"%s\" in the session cwd: %s",
             call, rel, errno == EEXIST ? "it exists already" : as_beneath_strerror(errno));
    return -1;
}

// A failed call: reported, counted (exit 3 at shutdown), the stream ended with msg.
static void call_failed(stream *s, const char *msg)
{
    as_warn("%s", msg);
    pthread_mutex_lock(&ag.mu);
    rp.failures++;
    pthread_mutex_unlock(&ag.mu);
    stream_end(s, msg, "REPLAY");
}

stream *replay_start(const model_req *r)
{
    stream *s = as_xmalloc(sizeof *s);
    memset(s, 0, sizeof *s);
    s->close = replay_close;
    char msg[400];
    pthread_mutex_lock(&ag.mu);
    size_t call = rp.next + 1;
    const as_replay_entry *e = NULL;
    if (rp.in_flight) {
        snprintf(msg, sizeof msg, "replay: model call %zu started while another stream is in flight", call);
    } else if (rp.next >= rp.sc.n) {
        snprintf(msg, sizeof msg, "replay: model call %zu is past the end of the script (%zu entries)",
                 call, rp.sc.n);
    } else {
        e = &rp.sc.e[rp.next++];
        rp.in_flight = 1;
        s->impl = s;    // marks "holds the in-flight slot"
    }
    if (!e) rp.failures++;
    pthread_mutex_unlock(&ag.mu);
    if (!e) {
        as_warn("%s", msg);
        stream_end(s, msg, "REPLAY");
        return s;
    }
    if (e->kind == AS_REPLAY_HANG) {
        static const char p0[] = "{\"type\":\"block-start\",\"index\":0,\"blockType\":\"text\"}";
        static const char p1[] = "{\"type\":\"text-delta\",\"index\":0,\"text\":\"partial\"}";
        stream_push(s, p0, sizeof p0 - 1);
        stream_push(s, p1, sizeof p1 - 1);
        if (e->ready_file && write_ready_file(r->cwd, e->ready_file, call, msg, sizeof msg))
            call_failed(s, msg);
        return s;     // never ends (but on a failure): the loop waits for a cancel
    }
    as_buf hay = {0}, x = {0};
    int templated = memmem(e->json, e->len, "{{fromRequest:", 14) != NULL;
    if (templated) {
        as_json j = {0};
        if (as_json_parse(&j, r->messages, strlen(r->messages)) == 0) as_replay_haystack(&j, 0, &hay);
        as_json_free(&j);
    }
    for (size_t k = 0; k < e->nchunks; k++) {
        const char *c = e->json + e->chunk[k].off;
        size_t n = e->chunk[k].len;
        if (templated && memmem(c, n, "{{fromRequest:", 14)) {
            char err[200];
            as_buf_reset(&x);
            if (as_replay_expand(c, n, &hay, &x, err, sizeof err)) {
                snprintf(msg, sizeof msg, "replay: model call %zu: %s", call, err);
                call_failed(s, msg);
                as_buf_free(&hay);
                as_buf_free(&x);
                return s;
            }
            c = x.p; n = x.n;
        }
        stream_push(s, c, n);
    }
    as_buf_free(&hay);
    as_buf_free(&x);
    if (e->kind == AS_REPLAY_THROW) stream_end(s, e->message, e->code);
    else stream_end(s, NULL, NULL);
    return s;
}
