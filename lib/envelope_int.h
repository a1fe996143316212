/*
 * envelope_int.h — private to lib/envelope*.c: the SHA-256 helpers the
 * envelope's digest paths share with envelope_text.c.
 */
#ifndef SEQGATE_ENVELOPE_INT_H
#define SEQGATE_ENVELOPE_INT_H

#include <openssl/evp.h>

#include <stdbool.h>
#include <stddef.h>

/** SHA-256, fetched once per process (an implicit fetch on every call takes
 *  a lock and a lookup: measurable on the per-record path). Thread-safe. */
const EVP_MD *sg_sha256_md(void);

/** SHA-256 of @p data (NULL allowed when @p len is 0) into @p out
 *  (SG_HASH_LEN bytes), reusing @p ctx when given (NULL: one-shot).
 *  @returns false only if libcrypto failed (allocation). */
bool sg_sha256_ctx(EVP_MD_CTX *ctx, const void *data, size_t len,
                   unsigned char *out);

#endif
