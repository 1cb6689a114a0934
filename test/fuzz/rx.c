// Fuzz target: the linear-time ERE matcher (rx.h). The input is a pattern,
// a NUL byte, then a text. A pattern that compiles must give matches inside
// the text (group 1 inside its match), a leftmost match that no later start
// beats, a search from any offset that agrees with the one from 0 when the
// iteration passes through it, and an as_rx_last equal to iterating
// as_rx_search by hand.
#include "acpsnap.h"
#include "rx.h"
#include <stdlib.h>
#include <string.h>

static void die_is_a_bug(int code)
{
    (void)code;
    abort();
}

static void check_span(const size_t m[4], size_t from, size_t n)
{
    if (m[0] < from || m[0] > m[1] || m[1] > n) abort();
    if ((m[2] == AS_RX_NONE) != (m[3] == AS_RX_NONE)) abort();
    if (m[2] != AS_RX_NONE && (m[2] < m[0] || m[2] > m[3] || m[3] > m[1])) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_die_hook = die_is_a_bug;
    const char *p = (const char *)data;
    const char *nul = memchr(p, 0, size);
    size_t plen = nul ? (size_t)(nul - p) : size;
    const char *t = nul ? nul + 1 : "";
    size_t n = nul ? size - plen - 1 : 0;
    if (n > 300) n = 300;   // the hand iteration is quadratic: keep runs short
    as_rx *rx;
    char err[160] = "";
    if (as_rx_compile(p, plen, &rx, err, sizeof err)) {
        if (!err[0]) abort();
        return 0;
    }
    // the iteration by hand, each match checked
    size_t m[4], last[4] = {0}, from = 0;
    int found = 0;
    while (from <= n) {
        int rc = as_rx_search(rx, t, n, from, NULL, m);
        if (rc == AS_RX_NOMATCH) break;
        if (rc != AS_RX_MATCH) abort();
        check_span(m, from, n);
        if (m[0] > from) {   // no match may start between from and m[0]
            size_t k[4];
            if (as_rx_search(rx, t, n, m[0], NULL, k) != AS_RX_MATCH || k[0] != m[0] || k[1] != m[1]) abort();
        }
        memcpy(last, m, sizeof m);
        found = 1;
        from = m[1] > m[0] ? m[1] : m[1] + 1;
    }
    int rc = as_rx_last(rx, t, n, NULL, m);
    if (rc != (found ? AS_RX_MATCH : AS_RX_NOMATCH)) abort();
    if (found && memcmp(m, last, sizeof m)) abort();
    as_rx_free(rx);
    return 0;
}
