// sha256.h - SHA-256 (FIPS 180-4), one shot: for names keyed like the
// reference implementation's (acp-drive's spill root).
#ifndef AS_SHA256_H
#define AS_SHA256_H

#include <stddef.h>

// The digest of the n bytes at p into out (32 bytes).
void as_sha256(const void *p, size_t n, unsigned char out[32]);
// The digest of the n bytes at p as lowercase hex into out (65 bytes, NUL-terminated).
void as_sha256_hex(const void *p, size_t n, char out[65]);

#endif
