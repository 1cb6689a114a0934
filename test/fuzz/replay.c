// Fuzz target: the replay entry and override validators. Every accepted
// entry has compact bytes that parse again as the same entry, and chunk
// spans that lie inside them and start with '{'.
#include "replay.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_entry(const as_replay_entry *e)
{
    if (!e->json || strlen(e->json) != e->len) abort();
    for (size_t k = 0; k < e->nchunks; k++) {
        const as_replay_chunk *c = &e->chunk[k];
        if ((size_t)c->off + c->len > e->len || e->json[c->off] != '{' || c->type > AS_CHUNK_FINISH) abort();
    }
    if ((e->kind == AS_REPLAY_THROW) != (e->message && e->code && *e->message && *e->code)) abort();
    as_replay_entry again;
    as_replay_err err;
    if (as_replay_entry_parse(e->json, e->len, "entry", &again, &err)) abort();
    if (again.len != e->len || memcmp(again.json, e->json, e->len) || again.nchunks != e->nchunks) abort();
    as_replay_entry_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_replay_entry e;
    as_replay_err err;
    if (as_replay_entry_parse((const char *)data, size, "entry 0", &e, &err) == 0) {
        check_entry(&e);
        as_replay_entry_free(&e);
    } else if (err.pos > (long)size || !err.msg[0]) {
        abort();
    }
    as_replay_override ov;
    if (as_replay_override_parse((const char *)data, size, &ov, &err) == 0) {
        for (size_t i = 0; i < ov.script.n; i++) check_entry(&ov.script.e[i]);
        for (size_t i = 0; i < ov.npatch; i++) check_entry(&ov.patch[i].entry);
        as_replay_override_free(&ov);
    } else if (err.pos > (long)size || !err.msg[0] || ov.npatch || ov.script.n) {
        abort();
    }
    return 0;
}
