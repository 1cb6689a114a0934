// jedit.c - splicing object members while copying every other byte verbatim.
#include "acpsnap.h"
#include <string.h>

static int listed(const as_json *j, int key, const char *const *names)
{
    for (; *names; names++)
        if (as_json_streq(j, key, *names)) return 1;
    return 0;
}

void as_json_drop_keys(const as_json *j, int obj, const char *const *drop, as_buf *out)
{
    const char *s = j->s;
    size_t from = j->t[obj].start;   // next byte not yet copied
    size_t prev_end = 0;             // end of the last kept member's value
    int kept = 0;
    for (int k = as_json_firstkey(j, obj); k >= 0; k = as_json_nextkey(j, k)) {
        size_t ks = j->t[k].start, ve = j->t[k + 1].end;
        if (!listed(j, k, drop)) {
            prev_end = ve;
            kept = 1;
            continue;
        }
        // Drop [ks, ve) with one adjacent comma: the one before it when a
        // member was kept before, else the one after it.
        if (kept) {
            if (prev_end > from) as_buf_put(out, s + from, prev_end - from);
            from = ve;
        } else {
            as_buf_put(out, s + from, ks - from);
            size_t q = ve;
            while (q < j->len && s[q] != ',' && s[q] != '}') q++;
            from = (s[q] == ',') ? q + 1 : ve;
            while (from < j->len && (s[from] == ' ' || s[from] == '\t' || s[from] == '\n' || s[from] == '\r')) from++;
        }
    }
    as_buf_put(out, s + from, j->t[obj].end - from);
}
