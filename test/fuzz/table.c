// Fuzz target: the scenario table and drive-script readers (common/table.c)
// and the tool-schema sidecar check (common/sidecar.c). Inputs that the
// readers reject by dying (trouble: invalid table JSON, NUL bytes, a CR that
// does not end a line, a corrupt zstd frame) are filtered first, since a die
// is their documented answer.
#include "acpsnap.h"
#include "sidecar.h"
#include "table.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void nop(void *ctx, const char *file, long line, const char *msg) { (*(size_t *)ctx)++; }

static int table_ok(const char *s, size_t n)
{
    as_json j = {0};
    int ok = 1;
    for (size_t pos = 0; pos < n && ok;) {
        const char *nl = memchr(s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - s) : n, len = end - pos;
        if (len && s[end - 1] == '\r') len--;
        size_t k = 0;
        while (k < len && (s[pos + k] == ' ' || s[pos + k] == '\t')) k++;
        if (k < len) ok = as_json_parse(&j, s + pos, len) == 0 && j.t[0].type == AS_JOBJ;
        pos = nl ? end + 1 : n;
    }
    as_json_free(&j);
    return ok;
}

// 1 when a CR stands anywhere but right before an LF or at the very end.
static int stray_cr(const char *s, size_t n)
{
    for (const char *p = s; (p = memchr(p, '\r', (size_t)(s + n - p))); p++)
        if (p + 1 < s + n && p[1] != '\n') return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static char path[64];
    const char *s = (const char *)d;
    int sets, ini;
    as_schemas_sidecar_check(s, n, &sets, &ini);
    as_prompt_sidecar_changes(s, n);
    as_prompt_sidecar_initial(s, n);
    if (memchr(d, 0, n) || as_zstd_magic(d, n) || stray_cr(s, n)) return 0;
    if (!*path) snprintf(path, sizeof path, "/tmp/acpsnap-fuzz-table-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(d, 1, n, f);
    fclose(f);
    size_t problems = 0;
    as_input in;
    as_input_load(path, &in, nop, &problems);
    as_input_free(&in);
    if (table_ok(s, n)) {
        as_table t;
        as_pinrole *roles;
        as_table_load(path, &t, nop, &problems);
        roles = as_xmalloc((t.n + 1) * sizeof *roles);
        as_table_pins(&t, roles, nop, &problems);
        free(roles);
        as_table_free(&t);
    }
    unlink(path);
    return 0;
}
