// jstr.c - JSON string bodies: decoding to UTF-8 (WTF-8 for lone surrogates)
// and writing exactly as JavaScript's JSON.stringify does.
#include "acpsnap.h"
#include <string.h>

static unsigned hexval(const char *s)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 32) - 'a' + 10);
    }
    return v;
}

static void put_cp(as_buf *out, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xc0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
    }
    as_buf_put(out, u, n);
}

void as_jstr_decode(const char *s, size_t n, as_buf *out)
{
    size_t i = 0;
    while (i < n) {
        const char *bs = memchr(s + i, '\\', n - i);
        size_t run = bs ? (size_t)(bs - (s + i)) : n - i;
        as_buf_put(out, s + i, run);
        i += run;
        if (i >= n) break;
        char e = s[i + 1];
        switch (e) {
        case 'b': as_buf_putc(out, '\b'); i += 2; break;
        case 'f': as_buf_putc(out, '\f'); i += 2; break;
        case 'n': as_buf_putc(out, '\n'); i += 2; break;
        case 'r': as_buf_putc(out, '\r'); i += 2; break;
        case 't': as_buf_putc(out, '\t'); i += 2; break;
        case 'u': {
            unsigned cp = hexval(s + i + 2);
            i += 6;
            if (cp >= 0xd800 && cp <= 0xdbff && i + 6 <= n && s[i] == '\\' && s[i + 1] == 'u') {
                unsigned lo = hexval(s + i + 2);
                if (lo >= 0xdc00 && lo <= 0xdfff) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    i += 6;
                }
            }
            put_cp(out, cp);   // a lone surrogate becomes its 3-byte WTF-8 form
            break;
        }
        default: as_buf_putc(out, e); i += 2; break;   // \" \\ \/
        }
    }
}

void as_json_str(const as_json *j, int tok, as_buf *out)
{
    const as_tok *t = &j->t[tok];
    const char *s = j->s + t->start + 1;
    size_t n = t->end - t->start - 2;
    if (!t->esc) as_buf_put(out, s, n);
    else as_jstr_decode(s, n, out);
}

void as_jstr_write(as_buf *b, const char *s, size_t n)
{
    static const char hexd[] = "0123456789abcdef";
    as_buf_grow(b, n + 2);
    as_buf_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        size_t adv = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c < 0x20) {
            switch (c) {
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            default:
                memcpy(tmp, "\\u00", 4);
                tmp[4] = hexd[c >> 4]; tmp[5] = hexd[c & 15]; tmp[6] = 0;
                esc = tmp;
            }
        } else if (c == 0xed && i + 2 < n + 0 && (unsigned char)s[i + 1] >= 0xa0) {
            // WTF-8 surrogate (only lone ones reach here): \udxxx
            unsigned cp = 0xd000 | (((unsigned char)s[i + 1] & 0x3f) << 6) | ((unsigned char)s[i + 2] & 0x3f);
            tmp[0] = '\\'; tmp[1] = 'u';
            tmp[2] = hexd[cp >> 12]; tmp[3] = hexd[(cp >> 8) & 15];
            tmp[4] = hexd[(cp >> 4) & 15]; tmp[5] = hexd[cp & 15]; tmp[6] = 0;
            esc = tmp;
            adv = 3;
        }
        if (esc) {
            as_buf_put(b, s + i - run, run);
            run = 0;
            as_buf_puts(b, esc);
            i += adv;
        } else {
            run++;
            i++;
        }
    }
    as_buf_put(b, s + n - run, run);
    as_buf_putc(b, '"');
}
