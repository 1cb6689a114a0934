// Fuzz target: the strict JSON scanner. Both of its paths and every
// instruction set agree (scan_agree.h). Every accepted text has consistent
// tokens, and every string re-encoded with the JSON.stringify writer parses
// back to the same decoded bytes.
#include "acpsnap.h"
#include "scan_agree.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static as_json j, k;
    scan_agree((const char *)data, size);
    if (as_json_parse(&j, (const char *)data, size)) {
        if (j.errpos > size) abort();
        return 0;
    }
    as_buf dec = {0}, enc = {0}, dec2 = {0};
    for (size_t i = 0; i < j.n; i++) {
        as_tok *t = &j.t[i];
        if (t->end > size || t->start >= t->end || t->next <= i || t->next > j.n) abort();
        if (t->type != AS_JSTR) continue;
        as_buf_reset(&dec);
        as_buf_reset(&enc);
        as_buf_reset(&dec2);
        as_json_str(&j, (int)i, &dec);
        as_jstr_write(&enc, dec.p ? dec.p : "", dec.n);
        if (as_json_parse(&k, enc.p, enc.n) || k.t[0].type != AS_JSTR) abort();
        as_json_str(&k, 0, &dec2);
        if (dec.n != dec2.n || (dec.n && memcmp(dec.p, dec2.p, dec.n))) abort();
    }
    as_buf_free(&dec);
    as_buf_free(&enc);
    as_buf_free(&dec2);
    return 0;
}
