// jsonl-pack - the session log codec: canonical packing of chunk-delta runs,
// unpacking to one event per line, and the canonical-layout check.
#include "acpsnap.h"
#include <getopt.h>
#include <string.h>

static const char usage[] =
    "usage: jsonl-pack [-u | -c] [-z] [file...]\n"
    "Packs session logs into the canonical layout (acpsnap-session(5)),\n"
    "keeping the input's form (projected or persisted).\n"
    "  -u, --unpack   one event per line, with envelopes (synthetic ones for\n"
    "                 projected input); the header line stays first\n"
    "  -c, --check    exit 1 naming the first line that is not canonical\n"
    "  -z, --zstd     write zstd frames (header frame, then the body)\n"
    "  -h, --help     this text\n"
    "      --version  the version\n"
    "Exit status: 0 ok, 1 not canonical (--check), 2 trouble.\n";

static struct { int unpack, check; as_out *out; } opt;

static int check_one(const char *path, void *ctx)
{
    long bad = 0;
    if (!as_sess_check(path, &bad)) return AS_OK;
    as_warn_at(strcmp(path, "-") ? path : "<stdin>", bad, 0,
               "not in canonical layout (jsonl-pack rewrites it)");
    return AS_NO;
}

static int pack_one(const char *path, void *ctx)
{
    as_sess_transcode(path, opt.out, AS_PACK_KEEP, opt.unpack);
    return AS_OK;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"unpack", no_argument, 0, 'u'}, {"check", no_argument, 0, 'c'},
        {"zstd", no_argument, 0, 'z'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int zstd = 0, c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "uczh", lo, NULL)) != -1) {
        switch (c) {
        case 'u': opt.unpack = 1; break;
        case 'c': opt.check = 1; break;
        case 'z': zstd = 1; break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(usage, AS_TROUBLE);
        }
    }
    if (opt.unpack && opt.check) as_die(AS_TROUBLE, "--unpack and --check exclude each other");
    if (opt.check && zstd) as_die(AS_TROUBLE, "--check writes nothing; --zstd makes no sense with it");
    if (opt.check) return as_loop(argc - optind, argv + optind, check_one, NULL);
    opt.out = as_out_stdout(zstd);
    int r = as_loop(argc - optind, argv + optind, pack_one, NULL);
    as_out_close(opt.out);
    return r;
}
