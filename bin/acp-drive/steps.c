// steps.c - input.json's steps (acpsnap-scenarios(5)), driven one at a
// time over ACP. One table says, for each kind of step, its handler and what
// the handler reads: flags, and for the waits the condition on the persisted
// log, the field that parameterises it, its default and the failure message.
#include "drive.h"

#include <stdlib.h>
#include <string.h>

enum { SESSION = 1, EXPECT_ERROR = 2, CONTENT = 4, AWAIT_TEXT = 8 };

typedef struct step_kind step_kind;
struct step_kind {
    void (*fn)(run *r, int st, const step_kind *k);
    unsigned flags;         // SESSION: needs newSession first; the others: see do_prompt
    int what;               // waits: the condition on the log (W_*)
    const char *field;      // waits: the step field it takes
    int64_t dflt;           // … its default, when a number
    const char *msg;        // waits: what did not happen (%s, %lld: the field's value)
};

// ---------------------------------------------------------------- step fields
static long step_timeout(const run *r, int obj)
{
    const as_json *j = &r->in.j;
    int t = obj >= 0 ? as_json_get(j, obj, "timeoutMs") : -1;
    int64_t v;
    return t >= 0 && as_json_int(j, t, &v) && v > 0 ? (long)v : r->timeout;
}

static int64_t step_int(const run *r, int obj, const char *key, int64_t def)
{
    int t = as_json_get(&r->in.j, obj, key);
    int64_t v;
    return t >= 0 && as_json_int(&r->in.j, t, &v) ? v : def;
}

static char *step_str(const run *r, int obj, const char *key)
{
    int t = as_json_get(&r->in.j, obj, key);
    as_buf b = {0};
    as_buf_puts(&b, "");
    if (t >= 0 && r->in.j.t[t].type == AS_JSTR) as_json_str(&r->in.j, t, &b);
    return b.p;
}

// ---------------------------------------------------------------- session and prompts
static void do_initialize(run *r, int st, const step_kind *k)
{
    as_buf params = {0}, msg = {0};
    as_buf_puts(&params, "{\"protocolVersion\":1,\"clientCapabilities\":");
    client_capabilities(r, &params);
    as_buf_putc(&params, '}');
    long id = request(r, "initialize", &params);
    const char *resp = await_response(r, id, "initialize", r->rpc_timeout);
    if (resp && response_error(resp, &msg)) fail(r, "initialize failed: %s", msg.p ? msg.p : "");
    as_buf_free(&params);
    as_buf_free(&msg);
}

static void take_session_id(run *r, const char *resp)
{
    as_json rj = {0};
    as_json_parse(&rj, resp, strlen(resp));
    int res = as_json_get(&rj, 0, "result");
    int sid = res >= 0 && rj.t[res].type == AS_JOBJ ? as_json_get(&rj, res, "sessionId") : -1;
    if (sid < 0 || rj.t[sid].type != AS_JSTR) fail(r, "session/new answered without a string sessionId");
    else {
        as_buf s = {0};
        as_json_str(&rj, sid, &s);
        free(r->session_id);
        r->session_id = s.p ? s.p : as_xstrdup("");
    }
    as_json_free(&rj);
}

static void do_new_session(run *r, int st, const step_kind *k)
{
    const as_json *j = &r->in.j;
    as_buf params = {0}, msg = {0};
    as_buf_puts(&params, "{\"cwd\":");
    as_jstr_write(&params, r->cwd, strlen(r->cwd));
    as_buf_puts(&params, ",\"mcpServers\":[]");
    int ad = as_json_get(j, st, "additionalDirectories");
    if (ad >= 0) { as_buf_puts(&params, ",\"additionalDirectories\":"); as_json_compact(as_tok_p(j, ad), as_tok_len(j, ad), &params); }
    as_buf_putc(&params, '}');
    long id = request(r, "session/new", &params);
    const char *resp = await_response(r, id, "session/new", r->rpc_timeout);
    int err = resp && response_error(resp, &msg);
    if (!resp) {}
    else if (k->flags & EXPECT_ERROR) { if (!err) fail(r, "expected session/new to be rejected but it succeeded"); }
    else if (err) fail(r, "session/new failed: %s", msg.p ? msg.p : "");
    else take_session_id(r, resp);
    as_buf_free(&params);
    as_buf_free(&msg);
}

// session/prompt params with a text block, or the step's content array.
// Values from input.json go into the frame compact (one frame, one line),
// their strings and numbers spelled as written.
static void prompt_params(const run *r, int st, int content, as_buf *b)
{
    const as_json *j = &r->in.j;
    as_buf_puts(b, "{\"sessionId\":");
    as_jstr_write(b, r->session_id, strlen(r->session_id));
    as_buf_puts(b, ",\"prompt\":");
    if (content) {
        int c = as_json_get(j, st, "content");
        as_json_compact(as_tok_p(j, c), as_tok_len(j, c), b);
    } else {
        as_buf_puts(b, "[{\"type\":\"text\",\"text\":");
        int t = as_json_get(j, st, "text");
        as_buf_put(b, as_tok_p(j, t), as_tok_len(j, t));
        as_buf_puts(b, "}]");
    }
    as_buf_putc(b, '}');
}

static int message_seen(run *r, const void *ctx) { (void)ctx; return r->want_seen; }

// promptAndWaitForAgentMessage: after the prompt's response, the message.
static void await_message(run *r, const char *want)
{
    char *late = xasprintf("agent message \"%.60s\" did not arrive", want);
    char *gone = xasprintf("the agent exited before the agent message \"%.60s\"", want);
    wait_until(r, message_seen, NULL, r->timeout, late, gone);
    free(gone); free(late);
}

// prompt, promptContent (CONTENT), promptExpectError (EXPECT_ERROR),
// promptAndWaitForAgentMessage (AWAIT_TEXT).
static void do_prompt(run *r, int st, const step_kind *k)
{
    char *want = k->flags & AWAIT_TEXT ? step_str(r, st, "waitForText") : NULL;
    if (want) { r->want_text = want; r->want_seen = 0; }
    as_buf params = {0}, msg = {0};
    prompt_params(r, st, k->flags & CONTENT, &params);
    long id = request(r, "session/prompt", &params);
    const char *resp = await_response(r, id, "session/prompt", r->rpc_timeout);
    int err = resp && response_error(resp, &msg);
    if (!resp) {}
    else if (k->flags & EXPECT_ERROR) { if (!err) fail(r, "expected the prompt to fail but it succeeded"); }
    else if (err) fail(r, "session/prompt failed: %s", msg.p ? msg.p : "");
    if (want && !r->fail) await_message(r, want);
    r->want_text = NULL;
    free(want);
    as_buf_free(&params);
    as_buf_free(&msg);
}

// ---------------------------------------------------------------- waits and cancels
// Waits for the file named by the path field of the step object obj.
static void wait_file_at(run *r, int obj)
{
    char *p = step_str(r, obj, "path");
    wait_file(r, p, step_timeout(r, obj));
    free(p);
}

// The step's waitForFile, when it has one: waits for it and returns 1.
static int wait_file_field(run *r, int st)
{
    int wf = as_json_get(&r->in.j, st, "waitForFile");
    if (wf >= 0) wait_file_at(r, wf);
    return wf >= 0;
}

static void do_wait_file(run *r, int st, const step_kind *k) { wait_file_at(r, st); }

static const char TURN_START[] = "the session did not persist turn/start";

static int kind_seen(run *r, const void *ctx) { return update_seen(&r->updates_seen, ctx, strlen(ctx)); }
static int kind_since(run *r, const void *ctx) { return update_seen(&r->updates_since, ctx, strlen(ctx)); }

// A session/update of the kind (among those the condition reads: the run's,
// or those since the last promptAndCancel's prompt), within timeout.
static void wait_update(run *r, cond_fn seen, const char *kind, long timeout)
{
    char *late = xasprintf("no session/update \"%.60s\" arrived", kind);
    char *gone = xasprintf("the agent exited before a session/update \"%.60s\"", kind);
    wait_until(r, seen, kind, timeout, late, gone);
    free(gone); free(late);
}

// Cancels once the turn is under way: its ready file, else its durable
// turn/start; then, with waitForSessionUpdate, once the agent has sent that
// update since the prompt too (what the stream gave it so far, out before
// the cancel).
static void do_prompt_and_cancel(run *r, int st, const step_kind *k)
{
    as_buf params = {0}, msg = {0};
    prompt_params(r, st, 0, &params);
    as_buf_reset(&r->updates_since);
    long id = request(r, "session/prompt", &params);
    r->watch_id = id;       // a prompt that fails meanwhile ends the wait at once
    r->watch_method = "session/prompt";
    if (!wait_file_field(r, st))
        wait_log(r, W_TURNSTART, 1, NULL, 0, r->timeout, TURN_START);
    if (!r->fail && as_json_get(&r->in.j, st, "waitForSessionUpdate") >= 0) {
        char *kind = step_str(r, st, "waitForSessionUpdate");
        wait_update(r, kind_since, kind, r->timeout);
        free(kind);
    }
    r->watch_id = -1;
    if (!r->fail) {
        notify_cancel(r);
        const char *resp = await_response(r, id, "session/prompt", r->rpc_timeout);
        if (resp && response_error(resp, &msg)) fail(r, "session/prompt failed after cancel: %s", msg.p ? msg.p : "");
    }
    as_buf_free(&params);
    as_buf_free(&msg);
}

static void do_cancel(run *r, int st, const step_kind *k)
{
    wait_file_field(r, st);
    if (!r->fail) notify_cancel(r);
}

// A wait on the primary log, parameterised by a string field (or nothing).
static void do_wait(run *r, int st, const step_kind *k)
{
    char *arg = k->field ? step_str(r, st, k->field) : NULL;
    char *m = xasprintf(k->msg, arg);
    wait_log(r, k->what, 0, arg, 0, step_timeout(r, st), m);
    free(m); free(arg);
}

// waitForTurnStart: the message names the turn when the step does.
static void do_wait_turn_start(run *r, int st, const step_kind *k)
{
    int64_t min = step_int(r, st, k->field, k->dflt);
    char *m = as_json_get(&r->in.j, st, k->field) >= 0
        ? xasprintf("%s at or beyond turn %lld", k->msg, (long long)min) : as_xstrdup(k->msg);
    wait_log(r, k->what, min, NULL, 0, step_timeout(r, st), m);
    free(m);
}

// waitForSubagentTurnEnd: child (by harvest order) and minimumTurn.
static void do_wait_child(run *r, int st, const step_kind *k)
{
    int64_t child = step_int(r, st, k->field, k->dflt), min = step_int(r, st, "minimumTurn", 1);
    char *m = xasprintf(k->msg, (long long)child, (long long)min);
    wait_log(r, k->what, min, NULL, (long)child, step_timeout(r, st), m);
    free(m);
}

// waitForSessionUpdate: a session/update of the kind, already sent or to come.
// For what an agent announces on its own time (codex-acp's
// available_commands_update), so that it lands before the next step's frames.
static void do_wait_update(run *r, int st, const step_kind *k)
{
    char *kind = step_str(r, st, "sessionUpdate");
    wait_update(r, kind_seen, kind, step_timeout(r, st));
    free(kind);
}

// ---------------------------------------------------------------- the table
static const step_kind KINDS[] = {
    [AS_OP_INITIALIZE]              = { do_initialize, 0, 0, NULL, 0, NULL },
    [AS_OP_NEWSESSION]              = { do_new_session, 0, 0, NULL, 0, NULL },
    [AS_OP_NEWSESSIONEXPECTERROR]   = { do_new_session, EXPECT_ERROR, 0, NULL, 0, NULL },
    [AS_OP_PROMPT]                  = { do_prompt, SESSION, 0, NULL, 0, NULL },
    [AS_OP_PROMPTCONTENT]           = { do_prompt, SESSION | CONTENT, 0, NULL, 0, NULL },
    [AS_OP_PROMPTEXPECTERROR]       = { do_prompt, SESSION | EXPECT_ERROR, 0, NULL, 0, NULL },
    [AS_OP_PROMPTANDWAITFORAGENTMESSAGE] = { do_prompt, SESSION | AWAIT_TEXT, 0, NULL, 0, NULL },
    [AS_OP_PROMPTANDCANCEL]         = { do_prompt_and_cancel, SESSION, 0, NULL, 0, NULL },
    [AS_OP_CANCEL]                  = { do_cancel, SESSION, 0, NULL, 0, NULL },
    [AS_OP_WAITFORSESSIONUPDATE]    = { do_wait_update, SESSION, 0, NULL, 0, NULL },
    [AS_OP_WAITFORFILE]             = { do_wait_file, 0, 0, NULL, 0, NULL },
    [AS_OP_WAITFORTURNSTART]        = { do_wait_turn_start, SESSION, W_TURNSTART, "minimumTurn", 1, TURN_START },
    [AS_OP_WAITFORTURNEND]          = { do_wait, SESSION, W_TURNEND, NULL, 0,
                                        "the session did not persist turn/end" },
    [AS_OP_WAITFORSUBAGENTTURNEND]  = { do_wait_child, 0, W_CHILD, "child", 1,
                                        "subagent child #%lld did not persist closed turn %lld" },
    [AS_OP_WAITFORGOALPHASE]        = { do_wait, SESSION, W_GOAL, "phase", 0,
                                        "the session did not persist goal phase \"%s\"" },
    [AS_OP_WAITFORINBOXMESSAGE]     = { do_wait, SESSION, W_INBOX, "text", 0,
                                        "the session did not persist the expected inbox message" },
    [AS_OP_WAITFORTITLEAFTERTURNEND] = { do_wait, SESSION, W_TITLE, NULL, 0,
                                        "the session did not persist session/title after turn/end" },
    [AS_OP_WAITFOREVENTAFTERTURNEND] = { do_wait, SESSION, W_EVENT, "type", 0,
                                        "the session did not persist %s after turn/end" },
};

// Runs one step; a scripted permission answer the agent did not offer fails
// it once it has settled.
void run_step(run *r, const as_step *sp)
{
    const step_kind *k = (size_t)sp->op < sizeof KINDS / sizeof *KINDS ? &KINDS[sp->op] : NULL;
    if (!k || !k->fn) fail(r, "unknown input op");
    else if (!(k->flags & SESSION) || r->session_id) k->fn(r, sp->tok, k);
    else fail(r, "%s before newSession", as_op_name(sp->op));
    if (!r->fail && r->script_error) fail(r, "%s", r->script_error);
}
