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

void as_buf_put(as_buf *b, const void *s, size_t n)
{
    as_buf_grow(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void as_buf_putc(as_buf *b, char c)
{
    as_buf_grow(b, 1);
    b->p[b->n++] = c;
    b->p[b->n] = 0;
}

void as_buf_puts(as_buf *b, const char *s) { as_buf_put(b, s, strlen(s)); }

void as_buf_printf(as_buf *b, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        as_buf_grow(b, (size_t)n);
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, aq);
        b->n += (size_t)n;
    }
    va_end(aq);
}

void as_buf_puti(as_buf *b, int64_t v)
{
    char tmp[24];
    int i = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--i] = '-';
    as_buf_put(b, tmp + i, sizeof tmp - (size_t)i);
}

void as_buf_free(as_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
