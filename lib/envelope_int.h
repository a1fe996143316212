/*
 * envelope_int.h — private to lib/envelope*.c: the SHA-256 helpers the
 * envelope's digest paths share with envelope_text.c; the idempotency
 * key's encoding buffer (envelope_key.c) the parse fills.
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

/** The idempotency key's encoding being built (semantics §2): on the
 *  stack unless unusually long. */
typedef struct sg_envelope_keybuf {
        unsigned char *p;
        size_t len, cap;
        unsigned char stack[512];
} sg_envelope_keybuf_t;

/** Starts @p kb empty (on its stack buffer). */
void sg_envelope_keybuf_init(sg_envelope_keybuf_t *kb);
/** Appends @p len bytes of @p data with their 4-byte big-endian length.
 *  @returns false when out of memory. */
bool sg_envelope_keybuf_add(sg_envelope_keybuf_t *kb, const void *data,
                            size_t len);
/** Frees what sg_envelope_keybuf_add allocated. */
void sg_envelope_keybuf_free(sg_envelope_keybuf_t *kb);

#endif
