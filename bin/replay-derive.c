// replay-derive - the replay script of a session log (acpsnap-replay(5)).
#include "acpsnap.h"
#include "replay.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: replay-derive [-cS] [-o FILE] [session.jsonl]\n"
    "  -o, --override FILE  apply a replay.override.json (bare array or patches)\n"
    "  -c, --count          print only the number of model calls\n"
    "  -S, --no-seed-skip   derive over the whole log, inherited seed events included\n"
    "  -h, --help           this help\n"
    "  -V, --version        version\n";

// Entries are held back up to this many bytes, so that a failure late in a
// small log leaves stdout empty; past it they stream (memory stays bounded).
#define SPOOL_MAX (1u << 20)

typedef struct {
    const char *override;
    int count, no_seed_skip;
    as_replay_override ov;
    int have_ov;
    as_out *out;
    as_buf spool;
    size_t n;               // derived entries seen
} derive_opts;

static void put_entry(derive_opts *o, const char *json, size_t len)
{
    if (o->count) return;
    if (o->spool.n + len >= SPOOL_MAX) {
        if (o->spool.n) as_out_write(o->out, o->spool.p, o->spool.n);
        as_buf_reset(&o->spool);
        if (len >= SPOOL_MAX) {     // a large entry goes straight out, never copied
            as_out_line(o->out, json, len);
            return;
        }
    }
    as_buf_put(&o->spool, json, len);
    as_buf_putc(&o->spool, '\n');
}

// Derived entry number o->n: served as derived unless a patch replaces it
// (the last patch naming it; duplicates fail at the end).
static void on_entry(void *ctx, const char *json, size_t len)
{
    derive_opts *o = ctx;
    const as_replay_entry *swap = NULL;
    for (size_t i = 0; o->have_ov && i < o->ov.npatch; i++)
        if (o->ov.patch[i].at == o->n) swap = &o->ov.patch[i].entry;
    if (swap) put_entry(o, swap->json, swap->len);
    else put_entry(o, json, len);
    o->n++;
}

static int derive_file(const char *path, void *ctx)
{
    derive_opts *o = ctx;
    as_sess *s = as_sess_open(path);
    size_t total;
    if (o->have_ov && o->ov.replace) {       // the override is the script; the log is not derived
        total = o->ov.script.n;
        for (size_t i = 0; i < o->ov.script.n; i++)
            put_entry(o, o->ov.script.e[i].json, o->ov.script.e[i].len);
    } else {
        as_replay_derive(s, !o->no_seed_skip, on_entry, o);
        total = o->n;
        if (o->have_ov) {
            as_replay_patches_check(&o->ov, o->override, o->n);
            for (size_t i = 0; i < o->ov.npatch; i++)
                if (o->ov.patch[i].at == o->n) {
                    put_entry(o, o->ov.patch[i].entry.json, o->ov.patch[i].entry.len);
                    total++;
                }
        }
    }
    as_sess_close(s);
    if (o->count) {
        char num[32];
        snprintf(num, sizeof num, "%zu", total);
        as_out_line(o->out, num, strlen(num));
    }
    if (o->spool.n) as_out_write(o->out, o->spool.p, o->spool.n);
    as_buf_reset(&o->spool);
    return AS_OK;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"override", required_argument, NULL, 'o'},
        {"count", no_argument, NULL, 'c'},
        {"no-seed-skip", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    derive_opts o = {0};
    int c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "o:cShV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.override = optarg; break;
        case 'c': o.count = 1; break;
        case 'S': o.no_seed_skip = 1; break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(usage, AS_TROUBLE);
        }
    }
    if (argc - optind > 1) as_usage_exit(usage, AS_TROUBLE);
    if (o.override) {
        as_replay_override_load(o.override, &o.ov);
        o.have_ov = 1;
    }
    o.out = as_out_stdout(0);
    int rc = as_loop(argc - optind, argv + optind, derive_file, &o);
    as_out_close(o.out);
    as_buf_free(&o.spool);
    if (o.have_ov) as_replay_override_free(&o.ov);
    return rc;
}
