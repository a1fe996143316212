/*
 * changelog_input.h — the framing of fuzz_changelog's input (and of the
 * seed files gen_changelog_corpus writes): a sequence of changelog records,
 * each
 *     flags u8 | key_len u8 | value_len u16 (big-endian) | key | value
 * flags bit 0: a tombstone (the record's value is NULL; its bytes, if any,
 * still feed the decoders). A record cut short ends the sequence. The key
 * is a changelog record's key as seqgate writes it: one database byte
 * (SG_DB_*), then the LMDB key after the topic-partition prefix.
 */
#ifndef SEQGATE_FUZZ_CHANGELOG_INPUT_H
#define SEQGATE_FUZZ_CHANGELOG_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CL_IN_TOMBSTONE 0x1u
#define CL_IN_HEADER 4

typedef struct cl_in {
        bool tombstone;
        const uint8_t *key;
        size_t key_len;
        const uint8_t *value;
        size_t value_len;
} cl_in_t;

/* Takes the next record from (*data, *size); false when none is left
 * whole. */
static inline bool cl_in_next(const uint8_t **data, size_t *size, cl_in_t *r) {
        if (*size < CL_IN_HEADER)
                return false;
        const uint8_t *p = *data;
        size_t kl = p[1], vl = ((size_t)p[2] << 8) | p[3];
        if (*size - CL_IN_HEADER < kl + vl)
                return false;
        r->tombstone = p[0] & CL_IN_TOMBSTONE;
        r->key = p + CL_IN_HEADER;
        r->key_len = kl;
        r->value = p + CL_IN_HEADER + kl;
        r->value_len = vl;
        *data += CL_IN_HEADER + kl + vl;
        *size -= CL_IN_HEADER + kl + vl;
        return true;
}

/* Frames one record into @p out (room for CL_IN_HEADER + 255 + 65535);
 * returns its length, 0 if the key or value is too long to frame. */
static inline size_t cl_in_frame(uint8_t *out, bool tombstone, const void *key,
                                 size_t key_len, const void *value,
                                 size_t value_len) {
        if (key_len > 255 || value_len > 65535)
                return 0;
        out[0] = tombstone ? CL_IN_TOMBSTONE : 0;
        out[1] = (uint8_t)key_len;
        out[2] = (uint8_t)(value_len >> 8);
        out[3] = (uint8_t)value_len;
        for (size_t i = 0; i < key_len; i++)
                out[CL_IN_HEADER + i] = ((const uint8_t *)key)[i];
        for (size_t i = 0; i < value_len; i++)
                out[CL_IN_HEADER + key_len + i] = ((const uint8_t *)value)[i];
        return CL_IN_HEADER + key_len + value_len;
}

#endif /* SEQGATE_FUZZ_CHANGELOG_INPUT_H */
