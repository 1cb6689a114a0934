// waits.c - waits on durable boundaries: the persisted session logs are read
// as they grow until a condition holds on them (a turn started or ended, a
// subagent's turn closed, a goal phase, an inbox message, a title or an
// event after the last turn/end), or a workspace file appears.
#include "drive.h"
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// What the scan of one log has seen; idx counts the lines after the header.
typedef struct {
    int what;                       // W_*
    int64_t minturn;
    const char *arg;
    long idx, last_start, last_end, last_title, last_ev, last_desc, last_hdr;
    int64_t start_turn;
    int start_valid, goal, inbox, closed_min;
    as_json j;
    as_buf t, s;                    // the record's type; scratch
} scan;

// Type of a line (an object with a string "type"), decoded into t; 0 if none.
static int line_type(as_json *j, const char *p, size_t n, as_buf *t)
{
    as_buf_reset(t);
    if (as_json_parse(j, p, n) || j->t[0].type != AS_JOBJ) return 0;
    int ty = as_json_get(j, 0, "type");
    if (ty < 0 || j->t[ty].type != AS_JSTR) return 0;
    as_json_str(j, ty, t);
    return 1;
}

// The integer data.turn of a record, 1 when there is one.
static int data_turn(const as_json *j, int data, int64_t *turn)
{
    int tu = data >= 0 ? as_json_get(j, data, "turn") : -1;
    return tu >= 0 && as_json_int(j, tu, turn);
}

// 1 when the goal/change record's data.goal.phase is the one awaited.
static int goal_is(scan *sc, int data)
{
    const as_json *j = &sc->j;
    int g = data >= 0 ? as_json_get(j, data, "goal") : -1;
    int ph = g >= 0 && j->t[g].type == AS_JOBJ ? as_json_get(j, g, "phase") : -1;
    return ph >= 0 && as_json_streq(j, ph, sc->arg);
}

// 1 when a text block of the message holds the awaited text.
static int message_has(scan *sc, int m)
{
    const as_json *j = &sc->j;
    int c = j->t[m].type == AS_JOBJ ? as_json_get(j, m, "content") : -1;
    if (c < 0 || j->t[c].type != AS_JARR) return 0;
    for (int b = as_json_first(j, c); b >= 0; b = as_json_nextel(j, b)) {
        int bt = j->t[b].type == AS_JOBJ ? as_json_get(j, b, "type") : -1;
        int tx = j->t[b].type == AS_JOBJ ? as_json_get(j, b, "text") : -1;
        if (bt < 0 || !as_json_streq(j, bt, "text") || tx < 0 || j->t[tx].type != AS_JSTR) continue;
        as_buf_reset(&sc->s);
        as_json_str(j, tx, &sc->s);
        if (sc->s.p && strstr(sc->s.p, sc->arg)) return 1;
    }
    return 0;
}

// 1 when an agent/inbox/spliced record inserted a message holding the text.
static int inbox_has(scan *sc, int data)
{
    const as_json *j = &sc->j;
    int ins = data >= 0 ? as_json_get(j, data, "inserted") : -1;
    if (ins < 0 || j->t[ins].type != AS_JARR) return 0;
    for (int m = as_json_first(j, ins); m >= 0; m = as_json_nextel(j, m))
        if (message_has(sc, m)) return 1;
    return 0;
}

// One record of type sc->t, its data object (or -1).
static void scan_record(scan *sc, int data)
{
    const char *t = sc->t.p;
    int64_t v;
    if (!strcmp(t, "turn/start")) {
        sc->last_start = sc->idx;
        sc->start_valid = data_turn(&sc->j, data, &sc->start_turn) && sc->start_turn >= 1;
    } else if (!strcmp(t, "turn/end")) {
        sc->last_end = sc->idx;
        if (data_turn(&sc->j, data, &v) && v == sc->minturn) sc->closed_min = 1;
    } else if (!strcmp(t, "session/title")) sc->last_title = sc->idx;
    else if (!strcmp(t, "subagent/descriptor")) sc->last_desc = sc->idx;
    else if (!strcmp(t, "request/header")) sc->last_hdr = sc->idx;
    else if (!strcmp(t, "goal/change") && sc->what == W_GOAL) sc->goal |= goal_is(sc, data);
    else if (!strcmp(t, "agent/inbox/spliced") && sc->what == W_INBOX && !sc->inbox) sc->inbox = inbox_has(sc, data);
    if (sc->what == W_EVENT && !strcmp(t, sc->arg)) sc->last_ev = sc->idx;
}

// The condition, once every record has been seen: 1 met, 0 not yet, -1 invalid.
static int verdict(const scan *sc)
{
    int closed = sc->last_end >= 0 && sc->last_end > sc->last_start;
    switch (sc->what) {
    case W_TURNSTART:
        if (sc->last_start < 0 || sc->last_start < sc->last_end) return 0;
        if (!sc->start_valid) return -1;
        return sc->start_turn >= sc->minturn;
    case W_TURNEND: return closed;
    case W_CHILD: return closed && sc->last_desc >= 0 && sc->last_hdr > sc->last_desc && sc->closed_min;
    case W_GOAL: return sc->goal;
    case W_INBOX: return sc->inbox;
    case W_TITLE: return sc->last_end >= 0 && sc->last_title > sc->last_end;
    case W_EVENT: return sc->last_end >= 0 && sc->last_ev > sc->last_end;
    }
    return 0;
}

// Checks the condition on the log text. Returns 1 met, 0 not yet, -1 invalid record.
static int check_log(const char *text, size_t len, int what, int64_t minturn, const char *arg)
{
    scan sc = { .what = what, .minturn = minturn, .arg = arg, .last_start = -1, .last_end = -1,
                .last_title = -1, .last_ev = -1, .last_desc = -1, .last_hdr = -1, .start_turn = -1,
                .start_valid = 1 };
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);     // the header
    for (p = nl ? nl + 1 : end; p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        if (line_type(&sc.j, p, (size_t)(nl - p), &sc.t)) {
            int data = as_json_get(&sc.j, 0, "data");
            scan_record(&sc, data >= 0 && sc.j.t[data].type == AS_JOBJ ? data : -1);
        }
        sc.idx++;
    }
    as_json_free(&sc.j);
    as_buf_free(&sc.t);
    as_buf_free(&sc.s);
    return verdict(&sc);
}

// ---------------------------------------------------------------- waits
typedef struct {
    int what;
    int64_t minturn;
    const char *arg;
    long child;
    as_buf *text;
} log_cond;

// The log the wait is about: the child's (by harvest order), else the primary's.
static const logfile *log_of(const run *r, const loglist *l, const log_cond *c)
{
    if (c->what == W_CHILD) return (size_t)c->child < l->n ? &l->v[c->child] : NULL;
    for (size_t i = 0; i < l->n; i++)
        if (r->session_id && !strcmp(l->v[i].id, r->session_id)) return &l->v[i];
    return NULL;
}

static int log_holds(run *r, const void *ctx)
{
    const log_cond *c = ctx;
    loglist l = {0};
    list_logs(r->sessions_root, &r->pf, &l, &r->scratch);
    const logfile *f = log_of(r, &l, c);
    int rc = 0;
    if (f) {
        read_growing(f->path, c->text);
        rc = check_log(c->text->p ? c->text->p : "", c->text->n, c->what, c->minturn, c->arg);
    }
    loglist_free(&l);
    if (rc < 0) fail(r, "invalid persisted turn/start record");
    return rc;
}

// Polls the persisted logs until the condition holds (or the timeout).
void wait_log(run *r, int what, int64_t minturn, const char *arg, long child, long timeout, const char *what_msg)
{
    as_buf text = {0};
    log_cond c = { what, minturn, arg, child, &text };
    char *gone = xasprintf("the agent exited while waiting: %s", what_msg);
    wait_until(r, log_holds, &c, timeout, what_msg, gone);
    free(gone);
    as_buf_free(&text);
}


// A wait file: rel looked up beneath the cwd, no link followed; a symbolic
// link there is not the file (a seed cannot stand in for it). 1 there, 0 not
// yet, -1 failed.
typedef struct { const char *cwd, *rel; } wait_path;

static int file_exists(run *r, const void *ctx)
{
    const wait_path *w = ctx;
    int fd = as_open_under(w->cwd, w->rel, O_PATH | O_NOFOLLOW, 0);
    struct stat st;
    if (fd >= 0) {
        int there = !fstat(fd, &st) && !S_ISLNK(st.st_mode);
        close(fd);
        return there;
    }
    if (errno == ENOENT) return 0;
    fail(r, "workspace file \"%s\": %s", w->rel, as_beneath_strerror(errno));
    return -1;
}

void wait_file(run *r, const char *rel, long timeout)
{
    wait_path w = { r->cwd, rel };
    char *late = xasprintf("workspace file \"%s\" did not appear", rel);
    char *gone = xasprintf("the agent exited while waiting for workspace file \"%s\"", rel);
    wait_until(r, file_exists, &w, timeout, late, gone);
    free(gone); free(late);
}
