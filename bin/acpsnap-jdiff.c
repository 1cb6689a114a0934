// acpsnap-jdiff - a JSON-aware line diff of two JSONL files: each differing
// line summarized by the members that changed, each added or removed line
// named by what it is (common/jdiff.c).
#include "acpsnap.h"
#include "jdiff.h"
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: acpsnap-jdiff [-qu] [-U N] [--max N] [--color[=WHEN]] OLD NEW\n"
    "Compares two JSONL files (- is stdin; zstd by magic) line by line, aligned\n"
    "by a diff, and prints for each changed line its changed members\n"
    "(\"line 3 $.a.b: old → new\", \"line 3 + $.c: 1\"), and each added or removed\n"
    "line by its method and sessionUpdate, type or response id (\"+ line 7 (…)\").\n"
    "  -q, --quiet         print nothing; only the exit status\n"
    "  -m, --max N         differences printed per changed line (default 20, 0: all)\n"
    "  -u, -U N, --unified[=N]  then the unified diff, with N lines of context (3)\n"
    "      --color[=WHEN]  old values red, new green: auto (a terminal and no\n"
    "                      NO_COLOR, the default), always, never\n"
    "  -h, --help          this text\n"
    "      --version       the version\n"
    "Exit status: 0 same, 1 different, 2 trouble.\n";

static void print(void *ctx, const char *line, size_t n) { as_out_line(ctx, line, n); }

static int when(const char *arg)
{
    if (!arg || !strcmp(arg, "auto")) {
        const char *nc = getenv("NO_COLOR");
        return isatty(1) && !(nc && *nc);
    }
    if (!strcmp(arg, "always")) return 1;
    if (!strcmp(arg, "never")) return 0;
    as_die(AS_TROUBLE, "--color: expected auto, always or never, not '%s'", arg);
}

static int count(const char *arg, const char *opt)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < 0 || v > 1000000) as_die(AS_TROUBLE, "%s: expected a count, not '%s'", opt, arg);
    return (int)v;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"quiet", no_argument, 0, 'q'}, {"max", required_argument, 0, 'm'},
        {"unified", optional_argument, 0, 'U'}, {"color", optional_argument, 0, 'c'}, {"colour", optional_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    as_jdiff_opt o = {.max = 20, .emit = print, .color = -1};
    int c;
    as_setprog(argv[0]);
    while ((c = getopt_long(argc, argv, "qm:uU:h", lo, NULL)) != -1) {
        switch (c) {
        case 'q': o.quiet = 1; break;
        case 'm': o.max = count(optarg, "--max"); break;
        case 'u': o.unified = 1; o.context = 3; break;
        case 'U': o.unified = 1; o.context = optarg ? count(optarg, "--unified") : 3; break;
        case 'c': o.color = when(optarg ? optarg : "always"); break;
        case 'h': as_usage_exit(usage, 0);
        case 'V': as_version_exit();
        default: as_usage_exit(usage, AS_TROUBLE);
        }
    }
    if (argc - optind != 2) as_usage_exit(usage, AS_TROUBLE);
    const char *old = argv[optind], *new = argv[optind + 1];
    if (!strcmp(old, "-") && !strcmp(new, "-")) as_die(AS_TROUBLE, "OLD and NEW cannot both be standard input");
    if (o.color < 0) o.color = when("auto");
    as_jlines a = {0}, b = {0};
    as_jlines_read(&a, old);
    as_jlines_read(&b, new);
    o.name_a = old;
    o.name_b = new;
    as_out *out = as_out_stdout(0);
    o.ctx = out;
    long n = as_jdiff(&a, &b, &o);
    as_out_close(out);
    as_jlines_free(&a);
    as_jlines_free(&b);
    return n ? AS_NO : AS_OK;
}
