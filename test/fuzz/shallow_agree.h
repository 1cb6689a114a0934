// shallow_agree.h - the shallow parse (as_json_parse_shallow) against the
// full one: the same verdict and error, and the same token for the root and
// for each of its children (a child container may stand without its
// subtree). Shared by simd_unit and the fuzz targets (scan_agree.h).
#ifndef SHALLOW_AGREE_H
#define SHALLOW_AGREE_H
#include "acpsnap.h"

static inline int shallow_same_tok(const as_tok *x, const as_tok *y)
{
    return x->type == y->type && x->esc == y->esc && x->start == y->start && x->end == y->end && x->count == y->count;
}

// NULL when the shallow parse of s[0, n) agrees with b, the full parse
// (verdict rb); else what differs.
static inline const char *shallow_differs(const char *s, size_t n, const as_json *b, int rb)
{
    static as_json c;
    int rc = as_json_parse_shallow(&c, s, n);
    if (rc != rb) return "verdicts differ";
    if (rc) return c.err == b->err && c.errpos == b->errpos ? NULL : "errors differ";
    if (!shallow_same_tok(&c.t[0], &b->t[0]) || c.t[0].next != c.n) return "root tokens differ";
    if (c.t[0].type != AS_JOBJ && c.t[0].type != AS_JARR) return c.n == 1 ? NULL : "a scalar root with children";
    size_t x = 1, y = 1, children = c.t[0].count * (c.t[0].type == AS_JOBJ ? 2 : 1);
    for (size_t i = 0; i < children; i++) {
        if (x >= c.n || !shallow_same_tok(&c.t[x], &b->t[y])) return "a child token differs";
        if (c.t[x].next != x + 1 && c.t[x].next - x != b->t[y].next - y) return "a child's subtree differs";
        x = c.t[x].next;
        y = b->t[y].next;
    }
    return x == c.n ? NULL : "tokens after the root's children";
}
#endif
