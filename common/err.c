// err.c - program name, house-format messages and problem tallies, exit codes,
// checked allocation.
#include "acpsnap.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *as_prog = "acpsnap";
unsigned long as_err_count;
void (*as_die_hook)(int code);

// A fatal error leaves its allocations behind on purpose; LeakSanitizer
// consults this hook at exit, so only the normal paths are leak-checked.
static int dying;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return dying; }

void as_die_abandoned(void) { dying = 1; }

static _Noreturn void leave(int code)
{
    if (as_die_hook) as_die_hook(code);
    dying = 1;
    exit(code);
}

void as_setprog(const char *argv0)
{
    const char *s = argv0 ? strrchr(argv0, '/') : NULL;
    as_prog = s ? s + 1 : (argv0 ? argv0 : "acpsnap");
}

static void vmsg(const char *file, long line, long col, const char *fmt, va_list ap)
{
    as_err_count++;
    fflush(stdout);
    fprintf(stderr, "%s: ", as_prog);
    if (file) {
        fprintf(stderr, "%s:", file);
        if (line > 0) fprintf(stderr, "%ld:", line);
        if (line > 0 && col > 0) fprintf(stderr, "%ld:", col);
        fputc(' ', stderr);
    }
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void as_msg_at(as_buf *b, const char *file, long line, long col, const char *fmt, ...)
{
    va_list ap;
    as_buf_printf(b, "%s: ", as_prog);
    if (file) {
        as_buf_printf(b, "%s:", file);
        if (line > 0) as_buf_printf(b, "%ld:", line);
        if (line > 0 && col > 0) as_buf_printf(b, "%ld:", col);
        as_buf_putc(b, ' ');
    }
    va_start(ap, fmt);
    as_buf_vprintf(b, fmt, ap);
    va_end(ap);
    as_buf_putc(b, '\n');
}

// The body of every varargs reporter below: the message of fmt and its arguments.
#define VMSG(file, line, col) do { va_list ap; va_start(ap, fmt); vmsg(file, line, col, fmt, ap); va_end(ap); } while (0)

void as_die(int code, const char *fmt, ...) { VMSG(NULL, 0, 0); leave(code); }
void as_die_at(const char *file, long line, long col, const char *fmt, ...) { VMSG(file, line, col); leave(AS_TROUBLE); }
void as_warn_at(const char *file, long line, long col, const char *fmt, ...) { VMSG(file, line, col); }
void as_warn(const char *fmt, ...) { VMSG(NULL, 0, 0); }

void as_problem(as_problems *p, const char *file, long line, const char *fmt, ...)
{
    if (p->quiet) return;
    VMSG(file, line, 0);
    p->count++;
}

void as_problem_report(void *ctx, const char *file, long line, const char *msg)
{
    as_problem(ctx, file, line, "%s", msg);
}

void as_die_sys(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: unable to ", as_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s\n", strerror(e));
    leave(AS_TROUBLE);
}

void *as_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) as_die(AS_TROUBLE, "out of memory");
    return p;
}

void *as_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) as_die(AS_TROUBLE, "out of memory");
    return p;
}

char *as_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(as_xmalloc(n), s, n);
}

void as_usage_exit(const char *usage, int code)
{
    if (code == 0) {
        fputs(usage, stdout);
        if (fflush(stdout) || ferror(stdout)) exit(AS_TROUBLE);
        exit(0);
    }
    // First line of the usage text only: "usage: …".
    const char *nl = strchr(usage, '\n');
    fprintf(stderr, "%.*s\n", (int)(nl ? nl - usage : (long)strlen(usage)), usage);
    exit(code);
}

void as_version_exit(void)
{
    printf("%s (acpsnap) %s\n", as_prog, ACPSNAP_VERSION);
    if (fflush(stdout) || ferror(stdout)) exit(AS_TROUBLE);
    exit(0);
}
