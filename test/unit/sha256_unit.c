// Unit tests of common/sha256.c: the FIPS 180-4 examples, the padding
// boundaries, a long input, and the reference spill keys.
#include "sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

static void check(const char *what, const void *p, size_t n, const char *want)
{
    char got[65];
    as_sha256_hex(p, n, got);
    if (strcmp(got, want)) { fails++; fprintf(stderr, "sha256_unit: %s: got %s, want %s\n", what, got, want); }
}

int main(void)
{
    check("empty", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check("abc", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check("448 bits", m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check("896 bits", m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    // 55, 56 and 64 bytes: the padding fits, spills into a second block, fills one
    static char a[1000000];
    memset(a, 'a', sizeof a);
    check("55 a", a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    check("56 a", a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    check("64 a", a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    check("a million a", a, sizeof a, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // the reference implementation's spill keys, as its fixtures spell them
    check("bash-spill", "bash-spill", 10, "ee77dff02126f4962b9b1ae84a9ef98b2105dbd4ba1704e7da6f18101826b11d");
    check("session-query-spill", "session-query-spill", 19, "035d1d054bccd5521491721dfb82240a323e74b0de9320f280b457c4ee4290e4");
    if (fails) return 1;
    return 0;
}
