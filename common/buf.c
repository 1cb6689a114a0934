// buf.c - growable byte buffers; p stays NUL-terminated.
#include "acpsnap.h"
#include <stdlib.h>
#include <string.h>

void as_buf_grow(as_buf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    b->p = as_xrealloc(b->p, cap);
    b->cap = cap;
}

void as_buf_puts(as_buf *b, const char *s) { as_buf_put(b, s, strlen(s)); }

void as_buf_vprintf(as_buf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n > 0) {
        as_buf_grow(b, (size_t)n);
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
        b->n += (size_t)n;
    }
}

void as_buf_printf(as_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    as_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

size_t as_fmt_i(char *d, int64_t v)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char tmp[24];
    int i = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    // eight digits at a time in 32-bit arithmetic (a millisecond time has 13)
    while (u >= 100000000) {
        uint32_t r8 = (uint32_t)(u % 100000000);
        u /= 100000000;
        for (int k = 0; k < 4; k++, r8 /= 100) {
            unsigned r = r8 % 100;
            tmp[--i] = pairs[2 * r + 1];
            tmp[--i] = pairs[2 * r];
        }
    }
    uint32_t w = (uint32_t)u;
    while (w >= 100) {
        unsigned r = w % 100;
        w /= 100;
        tmp[--i] = pairs[2 * r + 1];
        tmp[--i] = pairs[2 * r];
    }
    u = w;
    if (u >= 10) {
        tmp[--i] = pairs[2 * u + 1];
        tmp[--i] = pairs[2 * u];
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0) tmp[--i] = '-';
    size_t n = sizeof tmp - (size_t)i;
    memcpy(d, tmp + i, n);
    return n;
}

void as_buf_puti(as_buf *b, int64_t v)
{
    if (b->n + AS_FMT_I_MAX + 1 > b->cap) as_buf_grow(b, AS_FMT_I_MAX);
    b->n += as_fmt_i(b->p + b->n, v);
    b->p[b->n] = 0;
}

void as_buf_free(as_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
