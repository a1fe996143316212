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
        memset(out->digest, 0, sizeof(out->digest));
        memcpy(out->digest, digest, SG_DEDUP_DIGEST_LEN);
        out->verdict = (uint8_t)verdict;
        out->reason = (uint8_t)reason;
        out->first_seen_ms = first_seen;
        out->expiry_ms = expiry;
        return SG_OK;
}

/* ---- aggregates ------------------------------------------------------- */

sg_err_t sg_agg_decode(const void *value, size_t len, sg_agg_rec_t *out,
                       char *errstr, size_t errstr_size) {
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
        int64_t parked_at = rd_i64(&r), offset = rd_i64(&r),
                timestamp = rd_i64(&r);
        const unsigned char *kh = rd_take(&r, 32);
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
        memcpy(out->key_hash, kh, 32);
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
