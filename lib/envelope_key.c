/*
 * envelope_key.c — the idempotency key's encoding (semantics §2): topic,
 * scope parts and id, each with a 4-byte big-endian length prefix, hashed
 * with SHA-256 into the key the store keeps. The parse builds it as it
 * reads the fields (envelope.c parse_key); sg_envelope_key_hash
 * (envelope.h) builds it from given strings, for a lookup by event.
 */
#include "envelope.h"
#include "envelope_int.h"

#include <stdlib.h>
#include <string.h>

bool sg_envelope_keybuf_add(sg_envelope_keybuf_t *kb, const void *data,
                            size_t len) {
        if (kb->cap - kb->len < 4 + len) {
                size_t ncap = kb->cap * 2;
                unsigned char *np;
                while (ncap - kb->len < 4 + len)
                        ncap *= 2;
                np = malloc(ncap);
                if (!np)
                        return false;
                memcpy(np, kb->p, kb->len);
                if (kb->p != kb->stack)
                        free(kb->p);
                kb->p = np;
                kb->cap = ncap;
        }
        /* 4-byte big-endian length prefix (semantics §2). */
        kb->p[kb->len++] = (unsigned char)(len >> 24);
        kb->p[kb->len++] = (unsigned char)(len >> 16);
        kb->p[kb->len++] = (unsigned char)(len >> 8);
        kb->p[kb->len++] = (unsigned char)len;
        if (len)
                memcpy(kb->p + kb->len, data, len);
        kb->len += len;
        return true;
}

void sg_envelope_keybuf_init(sg_envelope_keybuf_t *kb) {
        kb->p = kb->stack;
        kb->len = 0;
        kb->cap = sizeof(kb->stack);
}

void sg_envelope_keybuf_free(sg_envelope_keybuf_t *kb) {
        if (kb->p != kb->stack)
                free(kb->p);
}

sg_err_t sg_envelope_key_hash(const char *topic, const char *const *scope,
                              size_t scope_cnt, const char *id,
                              unsigned char out[SG_HASH_LEN]) {
        sg_envelope_keybuf_t kb;
        sg_envelope_keybuf_init(&kb);
        /* the order of parse(): topic, scope parts..., id */
        bool ok = sg_envelope_keybuf_add(&kb, topic, strlen(topic));
        for (size_t i = 0; ok && i < scope_cnt; i++)
                ok = sg_envelope_keybuf_add(&kb, scope[i], strlen(scope[i]));
        ok = ok && sg_envelope_keybuf_add(&kb, id, strlen(id)) &&
             sg_sha256_ctx(NULL, kb.p, kb.len, out);
        sg_envelope_keybuf_free(&kb);
        return ok ? SG_OK : SG_ERR_NOMEM;
}
