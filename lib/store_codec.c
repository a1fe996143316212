/*
 * store_codec.c — the store's values as bytes: the bounded decoders
 * (sg_dedup_decode, ...) of the values the store holds and the changelog
 * carries, and the serialized header block of a parked event. Pure
 * functions over bytes; no LMDB. Formats in store_int.h.
 */
#include "store_int.h"

#include "metrics.h"

/* A DLQ reason fits beside the verdict in the dedup value's verdict byte. */
/* The dedup value's times fit their widths (store_int.h). */
_Static_assert(SG_TIME_MAX_MS < (INT64_C(1) << 48) &&
                       SG_DEADLINE_MAX_MS < (INT64_C(1) << 56),
               "dedup times outgrow their bytes");
_Static_assert(SG_R__CNT <= (1u << (8 - DEDUP_VERDICT_BITS)),
               "DLQ reasons outgrow the dedup verdict byte");

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- decoding ----------------------------------------------------------
 *
 * Values come back from LMDB and, in a changelog record, from the network:
 * one decoder per value kind (sg_dedup_decode, ...) serves both the reads
 * (sg_*_get) and restore (sg_store_apply_change), so a changelog record is
 * decoded fully, and refused, before anything of it is written. A decoder
 * reads through a bounded reader: every field, length and count is checked
 * against the bytes the value really has before it is used, nothing is
 * allocated or copied from a decoded number, enumerated fields must hold
 * one of their values, and a value has no trailing bytes. */

typedef struct rd {
        const unsigned char *p;
        size_t left;
        bool truncated; /* a field ran past the end of the value */
} rd_t;

static const unsigned char *rd_take(rd_t *r, size_t n) {
        if (r->truncated || r->left < n) {
                r->truncated = true;
                return NULL;
        }
        const unsigned char *q = r->p;
        r->p += n;
        r->left -= n;
        return q;
}
static uint64_t rd_u64(rd_t *r) {
        const unsigned char *q = rd_take(r, 8);
        return q ? get_u64(q) : 0;
}
static int64_t rd_i64(rd_t *r) {
        return (int64_t)rd_u64(r);
}
static uint32_t rd_u32(rd_t *r) {
        const unsigned char *q = rd_take(r, 4);
        return q ? get_u32(q) : 0;
}
static unsigned rd_u16(rd_t *r) {
        const unsigned char *q = rd_take(r, 2);
        return q ? ((unsigned)q[0] << 8) | q[1] : 0;
}
/* An unsigned big-endian number of @p n (<= 8) bytes. */
static uint64_t rd_be(rd_t *r, size_t n) {
        const unsigned char *q = rd_take(r, n);
        uint64_t v = 0;
        for (size_t i = 0; q && i < n; i++)
                v = (v << 8) | q[i];
        return v;
}
static unsigned rd_u8(rd_t *r) {
        const unsigned char *q = rd_take(r, 1);
        return q ? q[0] : 0;
}
/* A LEB128 varint: at most 10 bytes, the tenth at most 1, no redundant
 * final zero group (one encoding per number); one that is not is
 * "truncated" too (the value is refused). */
static uint64_t rd_varint(rd_t *r) {
        uint64_t v = 0;
        for (int i = 0; i < 10; i++) {
                const unsigned char *q = rd_take(r, 1);
                if (!q)
                        return 0;
                if (i == 9 && *q > 1)
                        break;
                v |= (uint64_t)(*q & 0x7f) << (7 * i);
                if (!(*q & 0x80)) {
                        if (i > 0 && *q == 0)
                                break;
                        return v;
                }
        }
        r->truncated = true;
        return 0;
}

static sg_err_t rd_end(const rd_t *r, const char *kind, size_t len,
                       char *errstr, size_t errstr_size) {
        if (r->truncated)
                return refuse(errstr, errstr_size,
                              "%s value of %zu bytes is truncated", kind, len);
        if (r->left)
                return refuse(errstr, errstr_size,
                              "%s value of %zu bytes has %zu trailing bytes",
                              kind, len, r->left);
        return SG_OK;
}

/* A processing time, and a deadline computed from one (semantics: times
 * are ms since the epoch, never negative). */
static bool is_time(int64_t ms) {
        return ms >= 0 && ms <= SG_TIME_MAX_MS;
}
static bool is_deadline(int64_t ms) {
        return ms >= 0 && ms <= SG_DEADLINE_MAX_MS;
}

/* ---- dedup ------------------------------------------------------------ */

sg_err_t sg_dedup_decode(const void *value, size_t len, sg_dedup_rec_t *out,
                         char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        /* store format 1's changelog values: a 32-byte digest, i64 times */
        bool v1 = len == DEDUP_VLEN_1;
        size_t dlen = v1 ? 32 : SG_DEDUP_DIGEST_LEN;
        const unsigned char *digest = rd_take(&r, dlen);
        unsigned vbyte = rd_u8(&r);
        unsigned verdict = vbyte & DEDUP_VERDICT_MASK;
        unsigned reason = vbyte >> DEDUP_VERDICT_BITS;
        int64_t first_seen = v1 ? rd_i64(&r) : (int64_t)rd_be(&r, 6);
        int64_t expiry = v1 ? rd_i64(&r) : (int64_t)rd_be(&r, 7);
        sg_err_t err = rd_end(&r, "dedup", len, errstr, errstr_size);
        if (err)
                return err;
        if (verdict < SG_DV_APPLIED || verdict > SG_DV_SUPERSEDED)
                return refuse(errstr, errstr_size,
                              "dedup value: unknown verdict %u", verdict);
        if (reason >= SG_R__CNT || (reason && verdict != SG_DV_DLQ))
                return refuse(errstr, errstr_size,
                              "dedup value: reason %u with verdict %u", reason,
                              verdict);
        if (!is_time(first_seen) || !is_deadline(expiry))
                return refuse(errstr, errstr_size,
                              "dedup value: time out of range (first seen "
                              "%" PRId64 ", expiry %" PRId64 ")",
                              first_seen, expiry);
        memset(out, 0, sizeof(*out));
        memcpy(out->digest, digest, SG_DEDUP_DIGEST_LEN);
        out->verdict = (uint8_t)verdict;
        out->reason = (uint8_t)reason;
        out->first_seen_ms = first_seen;
        out->expiry_ms = expiry;
        return SG_OK;
}

size_t sg_dedup_encode(const sg_dedup_rec_t *rec,
                       unsigned char v[SG_DEDUP_VALUE_LEN]) {
        _Static_assert(SG_DEDUP_VALUE_LEN == DEDUP_VLEN, "dedup value length");
        unsigned char t8[8];
        int64_t fs = rec->first_seen_ms < 0                ? 0
                     : rec->first_seen_ms > SG_TIME_MAX_MS ? SG_TIME_MAX_MS
                                                           : rec->first_seen_ms;
        int64_t ex = rec->expiry_ms < 0                    ? 0
                     : rec->expiry_ms > SG_DEADLINE_MAX_MS ? SG_DEADLINE_MAX_MS
                                                           : rec->expiry_ms;
        memcpy(v, rec->digest, SG_DEDUP_DIGEST_LEN);
        unsigned char *q = v + SG_DEDUP_DIGEST_LEN;
        *q++ = (unsigned char)((rec->verdict & DEDUP_VERDICT_MASK) |
                               (rec->reason << DEDUP_VERDICT_BITS));
        put_u64(t8, (uint64_t)fs);
        memcpy(q, t8 + 2, 6);
        put_u64(t8, (uint64_t)ex);
        memcpy(q + 6, t8 + 1, 7);
        return DEDUP_VLEN;
}

size_t sg_dedup_seg_encode(const sg_dedup_rec_t *rec, int64_t base_ms,
                           int64_t ttl_ms, unsigned char *out) {
        unsigned f = rec->verdict & DEDUP_VERDICT_MASK;
        int64_t implied = rec->first_seen_ms + ttl_ms;
        if (rec->reason)
                f |= DS_REASON;
        if (rec->expiry_ms != implied)
                f |= DS_EXPIRY;
        if (rec->v2)
                f |= DS_V2;
        size_t n = 0;
        out[n++] = (unsigned char)f;
        if (rec->reason)
                out[n++] = rec->reason;
        memcpy(out + n, rec->digest, SG_DEDUP_DIGEST_LEN);
        n += SG_DEDUP_DIGEST_LEN;
        n += put_varint(out + n, zz_enc(rec->first_seen_ms - base_ms));
        if (f & DS_EXPIRY)
                n += put_varint(out + n, zz_enc(rec->expiry_ms - implied));
        if (rec->v2) {
                memcpy(out + n, rec->v2_tail, 16);
                n += 16;
        }
        return n;
}

sg_err_t sg_dedup_seg_decode(const void *value, size_t len, int64_t base_ms,
                             int64_t ttl_ms, sg_dedup_rec_t *out, char *errstr,
                             size_t errstr_size) {
        rd_t r = {value, len, false};
        unsigned f = rd_u8(&r);
        unsigned verdict = f & DEDUP_VERDICT_MASK;
        unsigned reason = (f & DS_REASON) ? rd_u8(&r) : 0;
        const unsigned char *digest = rd_take(&r, SG_DEDUP_DIGEST_LEN);
        /* times out of range (an overflow too) are refused below */
        int64_t fs = 0, ex = 0, d;
        bool ovf = __builtin_add_overflow(base_ms, zz_dec(rd_varint(&r)), &fs);
        ovf |= __builtin_add_overflow(fs, ttl_ms, &ex);
        if (f & DS_EXPIRY) {
                d = zz_dec(rd_varint(&r));
                ovf |= __builtin_add_overflow(ex, d, &ex);
        }
        const unsigned char *tail = (f & DS_V2) ? rd_take(&r, 16) : NULL;
        sg_err_t err = rd_end(&r, "dedup", len, errstr, errstr_size);
        if (err)
                return err;
        if (f & ~(DEDUP_VERDICT_MASK | DS_REASON | DS_EXPIRY | DS_V2))
                return refuse(errstr, errstr_size,
                              "dedup value: unknown flags 0x%x", f);
        if (verdict < SG_DV_APPLIED || verdict > SG_DV_SUPERSEDED)
                return refuse(errstr, errstr_size,
                              "dedup value: unknown verdict %u", verdict);
        if ((f & DS_REASON) &&
            (reason == 0 || reason >= SG_R__CNT || verdict != SG_DV_DLQ))
                return refuse(errstr, errstr_size,
                              "dedup value: reason %u with verdict %u", reason,
                              verdict);
        if (ovf || !is_time(fs) || !is_deadline(ex))
                return refuse(errstr, errstr_size,
                              "dedup value: time out of range (first seen "
                              "%" PRId64 ", expiry %" PRId64 ")",
                              fs, ex);
        memset(out, 0, sizeof(*out));
        memcpy(out->digest, digest, SG_DEDUP_DIGEST_LEN);
        out->verdict = (uint8_t)verdict;
        out->reason = (uint8_t)reason;
        out->first_seen_ms = fs;
        out->expiry_ms = ex;
        if (tail) {
                out->v2 = true;
                memcpy(out->v2_tail, tail, 16);
        }
        return SG_OK;
}

/* ---- aggregates ------------------------------------------------------- */

/* The checks every aggregate value passes, whichever its format. */
static sg_err_t agg_check(const sg_agg_rec_t *o, unsigned has_last, size_t sl,
                          const unsigned char *state, uint64_t al, char *errstr,
                          size_t errstr_size) {
        if (has_last > 1)
                return refuse(errstr, errstr_size,
                              "aggregate value: has_last %u", has_last);
        if (o->flags & ~(uint32_t)(SG_AGG_QUARANTINED | SG_AGG_REFETCHING))
                return refuse(errstr, errstr_size,
                              "aggregate value: unknown flags 0x%" PRIx32,
                              o->flags);
        if (!is_time(o->parked_since_ms) || !is_time(o->gap_reported_ms))
                return refuse(errstr, errstr_size,
                              "aggregate value: time out of range (parked "
                              "since %" PRId64 ", gap reported %" PRId64 ")",
                              o->parked_since_ms, o->gap_reported_ms);
        if (o->skip_from ? o->skip_from > o->skip_to : o->skip_to != 0)
                return refuse(errstr, errstr_size,
                              "aggregate value: skipped versions %" PRIu64
                              "-%" PRIu64,
                              o->skip_from, o->skip_to);
        if (sl >= SG_STATE_MAX || (sl && memchr(state, '\0', sl)))
                return refuse(errstr, errstr_size,
                              "aggregate value: state of %zu bytes is not a "
                              "state name (at most %d bytes, no NUL)",
                              sl, SG_STATE_MAX - 1);
        if (al >= sizeof(o->aggregate))
                return refuse(errstr, errstr_size,
                              "aggregate value: aggregate id of %" PRIu64
                              " bytes (at most %zu)",
                              al, sizeof(o->aggregate) - 1);
        return SG_OK;
}

/* Store format 3's value (store_int.h AG_* layout). */
static sg_err_t agg_decode_3(const void *value, size_t len, sg_agg_rec_t *out,
                             char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        sg_agg_rec_t o;
        memset(&o, 0, sizeof(o));
        unsigned a = rd_u8(&r), b = (a & AG_MORE) ? rd_u8(&r) : 0;
        uint64_t flags = 0, cnt = 0, since = 0, rep = 0, sk = 0, al = 0;
        o.has_last = a & AG_LAST;
        if (o.has_last)
                o.last_version = rd_varint(&r);
        size_t sl = (a & AG_STATE) ? rd_u8(&r) : 0;
        const unsigned char *state = sl ? rd_take(&r, sl) : NULL;
        o.has_epoch = a & AG_EPOCH;
        if (o.has_epoch)
                o.epoch = rd_varint(&r);
        if (b & AB_FLAGS)
                flags = rd_varint(&r);
        if (b & AB_PARKED) {
                cnt = rd_varint(&r);
                o.parked_bytes = rd_varint(&r);
                since = rd_varint(&r);
        }
        if (b & AB_GAPREP)
                rep = rd_varint(&r);
        if (b & AB_SKIP) {
                o.skip_from = rd_varint(&r);
                sk = rd_varint(&r);
        }
        const unsigned char *agg = NULL;
        if (b & AB_ID) {
                al = rd_varint(&r);
                if (al >= sizeof(o.aggregate)) /* too long: refused */
                        return agg_check(&o, 0, 0, NULL, al, errstr,
                                         errstr_size);
                agg = rd_take(&r, (size_t)al);
        }
        const unsigned char *tail = (b & AB_V2) ? rd_take(&r, 16) : NULL;
        sg_err_t err = rd_end(&r, "aggregate", len, errstr, errstr_size);
        if (err)
                return err;
        if ((a & ~(AG_TAG | AG_LAST | AG_STATE | AG_EPOCH | AG_MORE)) ||
            (b & ~(AB_FLAGS | AB_PARKED | AB_GAPREP | AB_SKIP | AB_ID | AB_V2)))
                return refuse(errstr, errstr_size,
                              "aggregate value: unknown fields 0x%02x 0x%02x",
                              a, b);
        if (flags > UINT32_MAX || cnt > UINT32_MAX ||
            since > (uint64_t)SG_TIME_MAX_MS ||
            rep > (uint64_t)SG_TIME_MAX_MS ||
            ((b & AB_SKIP) &&
             (o.skip_from == 0 || o.skip_from + sk < o.skip_from)))
                return refuse(errstr, errstr_size,
                              "aggregate value: a field out of range");
        o.flags = (uint32_t)flags;
        o.parked_cnt = (uint32_t)cnt;
        o.parked_since_ms = (int64_t)since;
        o.gap_reported_ms = (int64_t)rep;
        if (b & AB_SKIP)
                o.skip_to = o.skip_from + sk;
        if ((err = agg_check(&o, 0, sl, state, al, errstr, errstr_size)))
                return err;
        if (sl)
                memcpy(o.state, state, sl);
        if (agg) {
                memcpy(o.aggregate, agg, (size_t)al);
                o.aggregate_len = (size_t)al;
        }
        if (tail) {
                o.v2 = true;
                memcpy(o.v2_tail, tail, 16);
        }
        *out = o;
        return SG_OK;
}

size_t sg_agg_encode(const sg_agg_rec_t *r,
                     unsigned char out[SG_AGG_VALUE_MAX]) {
        _Static_assert(AGG_VMAX <= SG_AGG_VALUE_MAX, "aggregate value");
        unsigned a = AG_TAG, b = 0;
        size_t sl = strnlen(r->state, SG_STATE_MAX - 1);
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                            ? r->aggregate_len
                            : sizeof(r->aggregate) - 1;
        if (r->has_last)
                a |= AG_LAST;
        if (sl)
                a |= AG_STATE;
        if (r->has_epoch)
                a |= AG_EPOCH;
        if (r->flags)
                b |= AB_FLAGS;
        if (r->parked_cnt)
                b |= AB_PARKED;
        if (r->gap_reported_ms)
                b |= AB_GAPREP;
        if (r->skip_from)
                b |= AB_SKIP;
        if (agg_id_kept(r))
                b |= AB_ID;
        if (r->v2)
                b |= AB_V2;
        if (b)
                a |= AG_MORE;
        size_t n = 0;
        out[n++] = (unsigned char)a;
        if (b)
                out[n++] = (unsigned char)b;
        if (r->has_last)
                n += put_varint(out + n, r->last_version);
        if (sl) {
                out[n++] = (unsigned char)sl;
                memcpy(out + n, r->state, sl);
                n += sl;
        }
        if (r->has_epoch)
                n += put_varint(out + n, r->epoch);
        if (b & AB_FLAGS)
                n += put_varint(out + n, r->flags);
        if (b & AB_PARKED) {
                n += put_varint(out + n, r->parked_cnt);
                n += put_varint(out + n, r->parked_bytes);
                n += put_varint(out + n, ts_key(r->parked_since_ms));
        }
        if (b & AB_GAPREP)
                n += put_varint(out + n, ts_key(r->gap_reported_ms));
        if (b & AB_SKIP) {
                n += put_varint(out + n, r->skip_from);
                n += put_varint(out + n, r->skip_to - r->skip_from);
        }
        if (b & AB_ID) {
                n += put_varint(out + n, al);
                memcpy(out + n, r->aggregate, al);
                n += al;
        }
        if (r->v2) {
                memcpy(out + n, r->v2_tail, 16);
                n += 16;
        }
        return n;
}

size_t sg_agg_encode_v2(const sg_agg_rec_t *r,
                        unsigned char v[SG_AGG_VALUE_MAX]) {
        _Static_assert(AGG_FIXED + 3 + SG_STATE_MAX + 1025 + 8 <=
                               SG_AGG_VALUE_MAX,
                       "format 2 aggregate value");
        v[0] = r->has_last ? 1 : 0;
        put_u64(v + 1, r->last_version);
        put_u32(v + 9, r->flags);
        put_u32(v + 13, r->parked_cnt);
        put_u64(v + 17, r->parked_bytes);
        put_u64(v + 25, (uint64_t)r->parked_since_ms);
        put_u64(v + 33, (uint64_t)r->gap_reported_ms);
        put_u64(v + 41, r->skip_from);
        put_u64(v + 49, r->skip_to);
        size_t off = AGG_FIXED;
        size_t sl = strnlen(r->state, SG_STATE_MAX - 1);
        v[off++] = (unsigned char)sl;
        memcpy(v + off, r->state, sl);
        off += sl;
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                            ? r->aggregate_len
                            : sizeof(r->aggregate) - 1;
        v[off++] = (unsigned char)(al >> 8);
        v[off++] = (unsigned char)al;
        memcpy(v + off, r->aggregate, al);
        off += al;
        if (r->has_epoch) {
                put_u64(v + off, r->epoch);
                off += 8;
        }
        return off;
}

sg_err_t sg_agg_decode(const void *value, size_t len, sg_agg_rec_t *out,
                       char *errstr, size_t errstr_size) {
        if (len > 0 && (*(const unsigned char *)value & AG_TAG))
                return agg_decode_3(value, len, out, errstr, errstr_size);
        /* store format 2 */
        rd_t r = {value, len, false};
        unsigned has_last = rd_u8(&r);
        uint64_t last = rd_u64(&r);
        uint32_t flags = rd_u32(&r), parked_cnt = rd_u32(&r);
        uint64_t parked_bytes = rd_u64(&r);
        int64_t since = rd_i64(&r), reported = rd_i64(&r);
        uint64_t skip_from = rd_u64(&r), skip_to = rd_u64(&r);
        unsigned sl = rd_u8(&r);
        const unsigned char *state = rd_take(&r, sl);
        unsigned al = rd_u16(&r);
        const unsigned char *agg = rd_take(&r, al);
        /* the epoch (semantics §4b): a trailer that values written before
         * epochs, or without one, do not have */
        bool has_epoch = !r.truncated && r.left > 0;
        uint64_t epoch = has_epoch ? rd_u64(&r) : 0;
        sg_err_t err = rd_end(&r, "aggregate", len, errstr, errstr_size);
        if (err)
                return err;
        if (has_last > 1)
                return refuse(errstr, errstr_size,
                              "aggregate value: has_last %u", has_last);
        if (flags & ~(uint32_t)(SG_AGG_QUARANTINED | SG_AGG_REFETCHING))
                return refuse(errstr, errstr_size,
                              "aggregate value: unknown flags 0x%" PRIx32,
                              flags);
        if (!is_time(since) || !is_time(reported))
                return refuse(errstr, errstr_size,
                              "aggregate value: time out of range (parked "
                              "since %" PRId64 ", gap reported %" PRId64 ")",
                              since, reported);
        if (skip_from ? skip_from > skip_to : skip_to != 0)
                return refuse(errstr, errstr_size,
                              "aggregate value: skipped versions %" PRIu64
                              "-%" PRIu64,
                              skip_from, skip_to);
        if (sl >= SG_STATE_MAX || memchr(state, '\0', sl))
                return refuse(errstr, errstr_size,
                              "aggregate value: state of %u bytes is not a "
                              "state name (at most %d bytes, no NUL)",
                              sl, SG_STATE_MAX - 1);
        if (al >= sizeof(out->aggregate))
                return refuse(errstr, errstr_size,
                              "aggregate value: aggregate id of %u bytes "
                              "(at most %zu)",
                              al, sizeof(out->aggregate) - 1);
        memset(out, 0, sizeof(*out));
        out->has_last = has_last;
        out->last_version = last;
        out->flags = flags;
        out->parked_cnt = parked_cnt;
        out->parked_bytes = parked_bytes;
        out->parked_since_ms = since;
        out->gap_reported_ms = reported;
        out->skip_from = skip_from;
        out->skip_to = skip_to;
        memcpy(out->state, state, sl);
        memcpy(out->aggregate, agg, al);
        out->aggregate_len = al;
        out->has_epoch = has_epoch;
        out->epoch = epoch;
        return SG_OK;
}

/* ---- parked events ---------------------------------------------------- */

/* A serialized header block (sg_headers_serialize): u32 count, then per
 * header u32 name length, the name and a NUL byte, u32 value length
 * (UINT32_MAX: null), the value. *cntp receives the count. */
static sg_err_t headers_check(const unsigned char *p, size_t len, size_t *cntp,
                              char *errstr, size_t errstr_size) {
        rd_t r = {p, len, false};
        uint32_t cnt = rd_u32(&r);
        /* each header takes at least 9 bytes: checked before the walk */
        if (!r.truncated && cnt > r.left / 9)
                return refuse(errstr, errstr_size,
                              "parked value: header block of %zu bytes "
                              "claims %" PRIu32 " headers",
                              len, cnt);
        for (uint32_t i = 0; i < cnt && !r.truncated; i++) {
                uint32_t nl = rd_u32(&r);
                const unsigned char *name =
                        nl == UINT32_MAX ? NULL : rd_take(&r, (size_t)nl + 1);
                if (!name)
                        break;
                if (name[nl] != '\0' || memchr(name, '\0', nl))
                        return refuse(errstr, errstr_size,
                                      "parked value: header %" PRIu32
                                      "'s name is not a NUL-terminated "
                                      "string of %" PRIu32 " bytes",
                                      i, nl);
                uint32_t vl = rd_u32(&r);
                if (vl != UINT32_MAX)
                        rd_take(&r, vl);
        }
        sg_err_t err = rd_end(&r, "parked value: header block", len, errstr,
                              errstr_size);
        if (!err)
                *cntp = cnt;
        return err;
}

sg_err_t sg_parked_decode(const void *value, size_t len, sg_parked_rec_t *out,
                          char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        /* store format 3 tags its values; format 2's first byte is 0 */
        bool v3 = len > 0 && *(const unsigned char *)value == PARKED_TAG;
        if (v3)
                rd_u8(&r);
        int64_t parked_at = rd_i64(&r), offset = rd_i64(&r),
                timestamp = rd_i64(&r);
        size_t khl = v3 ? SG_KEY_HASH_LEN : SG_KEY_HASH_LEN_2;
        const unsigned char *kh = rd_take(&r, khl);
        const void *ptrs[4] = {NULL, NULL, NULL, NULL};
        size_t lens[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
        for (int i = 0; i < 4 && !r.truncated; i++) {
                uint32_t l = rd_u32(&r);
                if (l != UINT32_MAX && !r.truncated) {
                        ptrs[i] = rd_take(&r, l);
                        lens[i] = l;
                }
        }
        /* the epoch it was parked under (semantics §4b): a trailer */
        bool has_epoch = !r.truncated && r.left > 0;
        uint64_t epoch = has_epoch ? rd_u64(&r) : 0;
        sg_err_t err = rd_end(&r, "parked", len, errstr, errstr_size);
        if (err)
                return err;
        /* a Kafka record's timestamp is -1 when it has none */
        if (!is_time(parked_at) || offset < 0 || timestamp < -1)
                return refuse(errstr, errstr_size,
                              "parked value: parked_at %" PRId64
                              ", offset %" PRId64 ", timestamp %" PRId64
                              " out of range",
                              parked_at, offset, timestamp);
        size_t header_cnt = 0;
        if (ptrs[3] && (err = headers_check(ptrs[3], lens[3], &header_cnt,
                                            errstr, errstr_size)))
                return err;
        out->parked_at_ms = parked_at;
        out->offset = offset;
        out->timestamp_ms = timestamp;
        memset(out->key_hash, 0, sizeof(out->key_hash));
        memcpy(out->key_hash, kh, khl);
        out->type = ptrs[0];
        out->type_len = lens[0];
        out->key = ptrs[1];
        out->key_len = lens[1];
        out->value = ptrs[2];
        out->value_len = lens[2];
        out->headers = ptrs[3];
        out->headers_len = lens[3];
        out->header_cnt = header_cnt;
        out->has_epoch = has_epoch;
        out->epoch = epoch;
        return SG_OK;
}

size_t sg_parked_len(const sg_parked_rec_t *r, size_t hl) {
        const void *ptrs[4] = {r->type, r->key, r->value, r->headers};
        size_t lens[4] = {r->type_len, r->key_len, r->value_len,
                          r->headers_len};
        size_t total = (hl == SG_KEY_HASH_LEN ? 1 : 0) + 24 + hl + 16 +
                       (r->has_epoch ? 8 : 0);
        for (int i = 0; i < 4; i++)
                if (ptrs[i] && lens[i] != SIZE_MAX)
                        total += lens[i];
        return total;
}

void sg_parked_encode(const sg_parked_rec_t *r, size_t hl, unsigned char *p) {
        const void *ptrs[4] = {r->type, r->key, r->value, r->headers};
        size_t lens[4] = {r->type_len, r->key_len, r->value_len,
                          r->headers_len};
        size_t off = 0;
        if (hl == SG_KEY_HASH_LEN)
                p[off++] = PARKED_TAG;
        put_u64(p + off, (uint64_t)r->parked_at_ms);
        put_u64(p + off + 8, (uint64_t)r->offset);
        put_u64(p + off + 16, (uint64_t)r->timestamp_ms);
        memcpy(p + off + 24, r->key_hash, hl);
        off += 24 + hl;
        for (int i = 0; i < 4; i++) {
                bool null = !ptrs[i] || lens[i] == SIZE_MAX;
                put_u32(p + off, null ? UINT32_MAX : (uint32_t)lens[i]);
                off += 4;
                if (!null && lens[i]) {
                        memcpy(p + off, ptrs[i], lens[i]);
                        off += lens[i];
                }
        }
        if (r->has_epoch) /* semantics §4b: a trailer, absent before */
                put_u64(p + off, r->epoch);
}

/* ---- meta --------------------------------------------------------------- */

sg_err_t sg_meta_decode(const void *value, size_t len, sg_meta_rec_t *out,
                        char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        unsigned gl = rd_u8(&r);
        const unsigned char *group = rd_take(&r, 255);
        int64_t input = rd_i64(&r), changelog = rd_i64(&r), clock = rd_i64(&r);
        uint64_t c[5];
        for (int i = 0; i < 5; i++)
                c[i] = rd_u64(&r);
        int64_t epoch = -1;
        if (r.left == 8 || r.left >= 8 + META_FP_LEN)
                epoch = rd_i64(&r);
        unsigned fp_flag = 0;
        const unsigned char *fp = NULL;
        if (r.left >= META_FP_LEN) {
                fp_flag = rd_u8(&r);
                fp = rd_take(&r, SG_META_FP_PARTS * 8);
        }
        /* store format 2: the topic its key prefix is a hash of */
        unsigned tl = 0;
        const unsigned char *topic = NULL;
        if (r.left > 0) {
                tl = rd_u8(&r);
                topic = rd_take(&r, tl);
        }
        /* then the changelog id (absent before it existed) */
        unsigned id_flag = 0;
        const unsigned char *id = NULL;
        int64_t id_offset = -1;
        if (r.left > 0) {
                id_flag = rd_u8(&r);
                id = rd_take(&r, SG_CHANGELOG_ID_LEN);
                id_offset = rd_i64(&r);
        }
        sg_err_t err = rd_end(&r, "meta", len, errstr, errstr_size);
        if (err)
                return err;
        if (memchr(group, '\0', gl))
                return refuse(errstr, errstr_size,
                              "meta value: consumer group of %u bytes with a "
                              "NUL byte",
                              gl);
        if (topic && (tl >= sizeof(out->topic) || memchr(topic, '\0', tl)))
                return refuse(errstr, errstr_size,
                              "meta value: topic of %u bytes is not a topic "
                              "name",
                              tl);
        if (fp_flag > 1)
                return refuse(errstr, errstr_size,
                              "meta value: key fingerprint flag %u", fp_flag);
        if (id_flag > 1 || (id_flag == 1 && id_offset < 0))
                return refuse(errstr, errstr_size,
                              "meta value: changelog id flag %u, offset "
                              "%" PRId64,
                              id_flag, id_offset);
        if (input < -1 || changelog < -1 || epoch < -1 || !is_time(clock))
                return refuse(errstr, errstr_size,
                              "meta value: input offset %" PRId64
                              ", changelog offset %" PRId64
                              ", changelog epoch %" PRId64 ", clock %" PRId64,
                              input, changelog, epoch, clock);
        memset(out, 0, sizeof(*out));
        memcpy(out->group, group, gl);
        if (topic)
                memcpy(out->topic, topic, tl);
        out->input_offset = input;
        out->changelog_offset = changelog;
        out->clock_ms = clock;
        out->parked_cnt = c[0];
        out->parked_bytes = c[1];
        out->quarantined = c[2];
        out->snap_in_flight = c[3];
        out->snap_seq = c[4];
        out->changelog_epoch = epoch;
        if (fp_flag == 1) {
                out->has_key_fp = true;
                memcpy(out->key_fp, fp, sizeof(out->key_fp));
        }
        if (id_flag == 1) {
                out->has_changelog_id = true;
                memcpy(out->changelog_id.id, id, SG_CHANGELOG_ID_LEN);
                out->changelog_id.offset = id_offset;
        }
        return SG_OK;
}

size_t sg_meta_encode(const sg_meta_rec_t *r, const char *topic,
                      unsigned char v[SG_META_VALUE_MAX]) {
        _Static_assert(META_VLEN + 1 + 249 <= SG_META_VALUE_MAX, "meta value");
        memset(v, 0, META_VLEN);
        size_t gl = strnlen(r->group, 255);
        v[0] = (unsigned char)gl;
        memcpy(v + 1, r->group, gl);
        unsigned char *q = v + 256;
        put_u64(q, (uint64_t)r->input_offset);
        put_u64(q + 8, (uint64_t)r->changelog_offset);
        put_u64(q + 16, (uint64_t)r->clock_ms);
        put_u64(q + 24, r->parked_cnt);
        put_u64(q + 32, r->parked_bytes);
        put_u64(q + 40, r->quarantined);
        put_u64(q + 48, r->snap_in_flight);
        put_u64(q + 56, r->snap_seq);
        put_u64(q + 64, (uint64_t)r->changelog_epoch);
        if (r->has_key_fp) {
                q[72] = 1;
                memcpy(q + 73, r->key_fp, sizeof(r->key_fp));
        }
        size_t tl = strnlen(topic, 249);
        v[META_VLEN] = (unsigned char)tl;
        memcpy(v + META_VLEN + 1, topic, tl);
        return META_VLEN + 1 + tl;
}

/* ---- snapshot requests ------------------------------------------------ */

sg_err_t sg_snapreq_decode(const void *value, size_t len, sg_snapreq_rec_t *out,
                           char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        uint64_t seq = rd_u64(&r);
        uint32_t attempt = rd_u32(&r);
        unsigned state = rd_u8(&r), has_have = rd_u8(&r);
        uint64_t have = rd_u64(&r), want = rd_u64(&r);
        int64_t issued = rd_i64(&r), sent = rd_i64(&r), due = rd_i64(&r);
        uint32_t al = rd_u32(&r);
        const unsigned char *agg = rd_take(&r, al);
        sg_err_t err = rd_end(&r, "snapshot request", len, errstr, errstr_size);
        if (err)
                return err;
        if (attempt == 0 ||
            (state != SG_SNAP_INFLIGHT && state != SG_SNAP_WAITING) ||
            has_have > 1)
                return refuse(errstr, errstr_size,
                              "snapshot request value: attempt %" PRIu32
                              ", state %u, has_have %u",
                              attempt, state, has_have);
        if (!is_time(issued) || !is_time(sent) || due <= 0 || !is_deadline(due))
                return refuse(errstr, errstr_size,
                              "snapshot request value: times issued %" PRId64
                              ", sent %" PRId64 ", due %" PRId64,
                              issued, sent, due);
        if (al >= sizeof(out->aggregate))
                return refuse(errstr, errstr_size,
                              "snapshot request value: aggregate id of "
                              "%" PRIu32 " bytes (at most %zu)",
                              al, sizeof(out->aggregate) - 1);
        memset(out, 0, sizeof(*out));
        out->seq = seq;
        out->attempt = attempt;
        out->state = (uint8_t)state;
        out->has_have = has_have;
        out->have_version = have;
        out->want_version = want;
        out->issued_at_ms = issued;
        out->sent_at_ms = sent;
        out->due_ms = due;
        memcpy(out->aggregate, agg, al);
        out->aggregate_len = al;
        return SG_OK;
}

size_t sg_snapreq_encode(const sg_snapreq_rec_t *r,
                         unsigned char v[SNAPREQ_FIXED + 1025]) {
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                            ? r->aggregate_len
                            : sizeof(r->aggregate) - 1;
        put_u64(v, r->seq);
        put_u32(v + 8, r->attempt);
        v[12] = r->state;
        v[13] = r->has_have ? 1 : 0;
        put_u64(v + 14, r->have_version);
        put_u64(v + 22, r->want_version);
        put_u64(v + 30, (uint64_t)r->issued_at_ms);
        put_u64(v + 38, (uint64_t)r->sent_at_ms);
        put_u64(v + 46, (uint64_t)r->due_ms);
        put_u32(v + 54, (uint32_t)al);
        memcpy(v + SNAPREQ_FIXED, r->aggregate, al);
        return SNAPREQ_FIXED + al;
}

/* ---- headers ---------------------------------------------------------- */

sg_err_t sg_headers_serialize(const sg_header_t *h, size_t cnt, void **bufp,
                              size_t *lenp) {
        size_t total = 4;
        for (size_t i = 0; i < cnt; i++)
                total += 4 + strlen(h[i].name) + 1 + 4 +
                         (h[i].value ? h[i].value_len : 0);
        unsigned char *p = malloc(total), *q;
        if (!p)
                return SG_ERR_NOMEM;
        q = p;
        put_u32(q, (uint32_t)cnt);
        q += 4;
        for (size_t i = 0; i < cnt; i++) {
                size_t nl = strlen(h[i].name);
                put_u32(q, (uint32_t)nl);
                q += 4;
                memcpy(q, h[i].name, nl + 1);
                q += nl + 1;
                if (!h[i].value) {
                        put_u32(q, UINT32_MAX);
                        q += 4;
                } else {
                        put_u32(q, (uint32_t)h[i].value_len);
                        q += 4;
                        memcpy(q, h[i].value, h[i].value_len);
                        q += h[i].value_len;
                }
        }
        *bufp = p;
        *lenp = total;
        return SG_OK;
}

ssize_t sg_headers_parse(const void *buf, size_t len, sg_header_t *out,
                         size_t max) {
        const unsigned char *p = buf, *end = p + len;
        if (len < 4)
                return len == 0 ? 0 : -1;
        uint32_t cnt = get_u32(p);
        p += 4;
        if (cnt > max)
                return -1;
        for (uint32_t i = 0; i < cnt; i++) {
                if (end - p < 4)
                        return -1;
                uint32_t nl = get_u32(p);
                p += 4;
                if ((size_t)(end - p) < (size_t)nl + 1 + 4 || p[nl] != '\0')
                        return -1;
                out[i].name = (const char *)p;
                p += nl + 1;
                uint32_t vl = get_u32(p);
                p += 4;
                if (vl == UINT32_MAX) {
                        out[i].value = NULL;
                        out[i].value_len = 0;
                        continue;
                }
                if ((size_t)(end - p) < vl)
                        return -1;
                out[i].value = p;
                out[i].value_len = vl;
                p += vl;
        }
        return (ssize_t)cnt;
}
