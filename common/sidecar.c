// sidecar.c - dsh's sidecar formatting: JSON.stringify(v, null, 2) over
// scanner tokens, prompt sections, tool-schema documents.
#include "acpsnap.h"
#include "sidecar.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void as_js_number(const as_json *j, int tok, as_buf *out)
{
    const char *p = as_tok_p(j, tok);
    size_t n = as_tok_len(j, tok), k = p[0] == '-';
    size_t digits = n - k;
    int plain = 1;
    for (size_t i = k; i < n; i++) plain &= p[i] >= '0' && p[i] <= '9';
    // A plain integer of up to 15 digits is exact in a double and prints as written.
    if (plain && digits <= 15 && !(k && digits == 1 && p[1] == '0')) { as_buf_put(out, p, n); return; }
    char tmp[64];
    if (n >= sizeof tmp) { as_buf_put(out, p, n); return; }   // absurd literal: keep
    memcpy(tmp, p, n); tmp[n] = 0;
    double v = strtod(tmp, NULL);
    if (v == 0) { as_buf_putc(out, '0'); return; }           // -0 prints as 0
    if (isinf(v)) { as_buf_puts(out, "null"); return; }      // JSON.stringify(Infinity)
    // Shortest round-tripping significand.
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    // e: [-]d[.ddd]e[+-]xx
    const char *q = e;
    if (*q == '-') { as_buf_putc(out, '-'); q++; }
    char dig[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++) if (*q != '.') dig[nd++] = *q;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int x = atoi(q + 1) + 1;   // value = 0.dig × 10^x
    if (nd <= x && x <= 21) {
        as_buf_put(out, dig, (size_t)nd);
        for (int i = nd; i < x; i++) as_buf_putc(out, '0');
    } else if (0 < x && x <= 21) {
        as_buf_put(out, dig, (size_t)x); as_buf_putc(out, '.'); as_buf_put(out, dig + x, (size_t)(nd - x));
    } else if (-6 < x && x <= 0) {
        as_buf_puts(out, "0.");
        for (int i = 0; i < -x; i++) as_buf_putc(out, '0');
        as_buf_put(out, dig, (size_t)nd);
    } else {
        as_buf_putc(out, dig[0]);
        if (nd > 1) { as_buf_putc(out, '.'); as_buf_put(out, dig + 1, (size_t)(nd - 1)); }
        as_buf_printf(out, "e%c%d", x - 1 < 0 ? '-' : '+', abs(x - 1));
    }
}

static void indent(as_buf *out, int depth)
{
    as_buf_putc(out, '\n');
    for (int i = 0; i < depth; i++) as_buf_put(out, "  ", 2);
}

static void str_out(const as_json *j, int tok, int is_path, as_scrub_fn scrub, void *ctx, as_buf *out)
{
    if (!scrub && !j->t[tok].esc) { as_buf_put(out, as_tok_p(j, tok), as_tok_len(j, tok)); return; }
    as_buf raw = {0}, s = {0};
    as_json_str(j, tok, &raw);
    if (scrub) scrub(ctx, raw.p ? raw.p : "", raw.n, is_path, &s);
    const as_buf *src = scrub ? &s : &raw;
    as_jstr_write(out, src->p ? src->p : "", src->n);
    as_buf_free(&raw);
    as_buf_free(&s);
}

void as_pretty(const as_json *j, int tok, int depth, as_scrub_fn scrub, void *ctx, as_buf *out)
{
    const as_tok *t = &j->t[tok];
    if (t->type == AS_JSTR) { str_out(j, tok, 0, scrub, ctx, out); return; }
    if (t->type == AS_JNUM) { as_js_number(j, tok, out); return; }
    if (t->type != AS_JARR && t->type != AS_JOBJ) { as_buf_put(out, as_tok_p(j, tok), as_tok_len(j, tok)); return; }
    int obj = t->type == AS_JOBJ;
    if (!t->count) { as_buf_puts(out, obj ? "{}" : "[]"); return; }
    as_buf_putc(out, obj ? '{' : '[');
    int c = tok + 1;   // the element, or the member's key
    for (uint32_t i = 0; i < t->count; i++, c = (int)j->t[c].next) {
        if (i) as_buf_putc(out, ',');
        indent(out, depth + 1);
        int is_path = 0;
        if (obj) {
            str_out(j, c, 0, NULL, NULL, out);
            as_buf_put(out, ": ", 2);
            is_path = as_json_streq(j, c, "path");
            c++;
        }
        if (j->t[c].type == AS_JSTR) str_out(j, c, is_path, scrub, ctx, out);
        else as_pretty(j, c, depth + 1, scrub, ctx, out);
    }
    indent(out, depth);
    as_buf_putc(out, obj ? '}' : ']');
}

#define MARK "\n<!-- request/header change "

void as_prompt_sidecar_begin(as_buf *out, const char *prompt, size_t len)
{
    as_buf_put(out, prompt, len);
    if (!len || prompt[len - 1] != '\n') as_buf_putc(out, '\n');
}

void as_prompt_sidecar_change(as_buf *out, int k, const char *prompt, size_t len)
{
    as_buf_printf(out, "\n<!-- request/header change %d -->\n\n", k);
    as_buf_put(out, prompt, len);
    if (!len || prompt[len - 1] != '\n') as_buf_putc(out, '\n');
}

size_t as_prompt_sidecar_initial(const char *s, size_t len)
{
    const char *m = memmem(s, len, MARK, sizeof MARK - 1);
    return m ? (size_t)(m - s) : len;
}

int as_prompt_sidecar_changes(const char *s, size_t len)
{
    int n = 0;
    const char *p = s, *e = s + len, *m;
    while ((m = memmem(p, (size_t)(e - p), MARK, sizeof MARK - 1))) { n++; p = m + 1; }
    return n;
}

const char *as_schemas_sidecar_check(const char *s, size_t len, int *nsets, int *ninitial)
{
    as_json j = {0};
    const char *err = NULL;
    if (as_json_parse(&j, s, len) < 0) { err = "is not valid JSON"; goto out; }
    if (j.t[0].type != AS_JOBJ) { err = "must be a JSON object {\"initial\": [...], \"changes\": [...]}"; goto out; }
    int ini = as_json_get(&j, 0, "initial"), ch = as_json_get(&j, 0, "changes");
    if (ini < 0 || ch < 0 || j.t[ini].type != AS_JARR || j.t[ch].type != AS_JARR) {
        err = "must carry array-valued \"initial\" and \"changes\" fields"; goto out;
    }
    for (int e = as_json_first(&j, ch); e >= 0; e = as_json_nextel(&j, e))
        if (j.t[e].type != AS_JARR) { err = "must carry array-valued \"initial\" and \"changes\" fields"; goto out; }
    *nsets = 1 + (int)j.t[ch].count;
    *ninitial = (int)j.t[ini].count;
    as_buf b = {0};
    as_buf_puts(&b, "{\n  \"initial\": ");
    as_pretty(&j, ini, 1, NULL, NULL, &b);
    as_buf_puts(&b, ",\n  \"changes\": ");
    as_pretty(&j, ch, 1, NULL, NULL, &b);
    as_buf_puts(&b, "\n}\n");
    if (b.n != len || memcmp(b.p, s, len)) err = "is not in canonical JSON formatting (JSON.stringify with 2-space indent and a final newline)";
    as_buf_free(&b);
out:
    as_json_free(&j);
    return err;
}
