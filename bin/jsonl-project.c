// jsonl-project - persisted session log → projected fixture in canonical
// layout; --restore goes back to a persisted log with synthetic envelopes.
#include "acpsnap.h"
#include <getopt.h>

static const char usage[] =
    "usage: jsonl-project [-r] [-z] [file...]\n"
    "Projects session logs (raw or zstd, packed, unpacked or mixed) into the\n"
    "committed fixture form: header untouched, body envelopes (seq/time,\n"
    "seq0/time0) dropped, chunk-delta runs packed canonically.\n"
    "  -r, --restore  the reverse: add synthetic envelopes (seq from 0, time 0)\n"
    "  -z, --zstd     write zstd frames (header frame, then the body)\n"
    "  -h, --help     this text\n"
    "      --version  the version\n"
    "Exit status: 0 ok, 2 trouble.\n";

static int one(const char *path, void *ctx)
{
    int *mode = ((int **)ctx)[0];
    as_out *out = ((as_out **)ctx)[1];
    as_sess_transcode(path, out, *mode, 0);
    return AS_OK;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"restore", no_argument, 0, 'r'}, {"zstd", no_argument, 0, 'z'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int mode = AS_PACK_PROJECTED, zstd = 0, c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "rzh", lo, NULL)) != -1) {
        switch (c) {
        case 'r': mode = AS_PACK_PERSISTED; break;
        case 'z': zstd = 1; break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(usage, AS_TROUBLE);
        }
    }
    as_out *out = as_out_stdout(zstd);
    void *ctx[2] = {&mode, out};
    int r = as_loop(argc - optind, argv + optind, one, ctx);
    as_out_close(out);
    return r;
}
