// loop.c - the shared record loop: each file argument in turn, or stdin.
#include "acpsnap.h"

int as_loop(int argc, char **argv, as_file_fn fn, void *ctx)
{
    if (argc == 0) return fn("-", ctx);
    int worst = 0;
    for (int i = 0; i < argc; i++) {
        int r = fn(argv[i], ctx);
        if (r > worst) worst = r;
    }
    return worst;
}
