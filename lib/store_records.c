/*
 * store_records.c — one record at a time: the gets, puts and deletes of
 * dedup records, aggregates, parked events, meta and snapshot requests,
 * each keeping its derived index (expiry, since, snapdue) in step, and
 * restore's sg_store_apply_change / sg_store_get_change (changelog,
 * semantics §6).
 *
 * Invariant relied on by the engine: every write of a batch goes through the
 * one write transaction the engine holds; nothing here commits on its own.
 */
#include "store_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- dedup ------------------------------------------------------------ */

sg_err_t sg_dedup_get(sg_txn_t *t, const sg_tp_t *tp,
                      const unsigned char kh[32], sg_dedup_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, kh, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = sg_db_get(t, DB_DEDUP, k, klen, &v);
        if (err)
                return err;
        char why[160];
        err = sg_dedup_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        return stored(t, err, why);
}

/* The value of @p rec in this store format (store_int.h: DEDUP_VLEN), also
 * for a record decoded from an earlier format's changelog value. */
static void dedup_encode(const sg_dedup_rec_t *rec,
                         unsigned char v[DEDUP_VLEN]) {
        unsigned char t8[8];
        memcpy(v, rec->digest, SG_DEDUP_DIGEST_LEN);
        unsigned char *q = v + SG_DEDUP_DIGEST_LEN;
        *q++ = (unsigned char)(rec->verdict |
                               (rec->reason << DEDUP_VERDICT_BITS));
        put_u64(t8, (uint64_t)rec->first_seen_ms);
        memcpy(q, t8 + 2, 6);
        put_u64(t8, (uint64_t)rec->expiry_ms);
        memcpy(q + 6, t8 + 1, 7);
}

sg_err_t sg_dedup_put_known(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char kh[32],
                            const sg_dedup_rec_t *rec,
                            const sg_dedup_rec_t *old, char *errstr,
                            size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ek[SG_TP_MAX + 64], ts[8];
        sg_err_t err;
        /* the times sg_dedup_decode reads back fit 6 and 7 bytes */
        if (rec->first_seen_ms < 0 || rec->first_seen_ms > SG_TIME_MAX_MS ||
            rec->expiry_ms < 0 || rec->expiry_ms > SG_DEADLINE_MAX_MS)
                return refuse(errstr, errstr_size,
                              "dedup record: time out of range (first seen "
                              "%" PRId64 ", expiry %" PRId64 ")",
                              rec->first_seen_ms, rec->expiry_ms);
        if (!old || old->expiry_ms != rec->expiry_ms) {
                if (old) {
                        put_u64(ts, ts_key(old->expiry_ms));
                        size_t eklen = key2(ek, tp, ts, 8, kh, 32);
                        if ((err = sg_db_del(t, DB_EXPIRY, ek, eklen, errstr,
                                             errstr_size)))
                                return err;
                }
                put_u64(ts, ts_key(rec->expiry_ms));
                size_t eklen = key2(ek, tp, ts, 8, kh, 32);
                if ((err = sg_db_put_index(t, DB_EXPIRY, ek, eklen, errstr,
                                           errstr_size)))
                        return err;
        }
        size_t klen = key2(k, tp, kh, 32, NULL, 0);
        unsigned char v[DEDUP_VLEN];
        dedup_encode(rec, v);
        return sg_db_put(t, DB_DEDUP, k, klen, v, sizeof(v), errstr,
                         errstr_size);
}

sg_err_t sg_dedup_put(sg_txn_t *t, const sg_tp_t *tp,
                      const unsigned char kh[32], const sg_dedup_rec_t *rec,
                      char *errstr, size_t errstr_size) {
        sg_dedup_rec_t old;
        sg_err_t err = sg_dedup_get(t, tp, kh, &old);
        if (err && err != SG_ERR_NOT_FOUND)
                return err;
        return sg_dedup_put_known(t, tp, kh, rec, err ? NULL : &old, errstr,
                                  errstr_size);
}

/* ---- aggregates ------------------------------------------------------- */

sg_err_t sg_agg_get(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    sg_agg_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = sg_db_get(t, DB_AGG, k, klen, &v);
        if (err)
                return err;
        char why[160];
        err = sg_agg_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        return stored(t, err, why);
}

static sg_err_t since_key_op(sg_txn_t *t, const sg_tp_t *tp, int64_t since,
                             const unsigned char ah[32], bool add, char *errstr,
                             size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ts[8];
        put_u64(ts, ts_key(since));
        size_t klen = key2(k, tp, ts, 8, ah, 32);
        return add ? sg_db_put_index(t, DB_SINCE, k, klen, errstr, errstr_size)
                   : sg_db_del(t, DB_SINCE, k, klen, errstr, errstr_size);
}

sg_err_t sg_agg_put(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    const sg_agg_rec_t *r, int64_t old_since, char *errstr,
                    size_t errstr_size) {
        sg_err_t err;
        int64_t new_since = sg_agg_indexed_since(r);
        if (old_since != new_since) {
                if (old_since &&
                    (err = since_key_op(t, tp, old_since, ah, false, errstr,
                                        errstr_size)))
                        return err;
                if (new_since && (err = since_key_op(t, tp, new_since, ah, true,
                                                     errstr, errstr_size)))
                        return err;
        }
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        unsigned char
                v[AGG_FIXED + 3 + SG_STATE_MAX + sizeof(r->aggregate) + 8];
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
        if (r->has_epoch) { /* semantics §4b: a trailer, absent before */
                put_u64(v + off, r->epoch);
                off += 8;
        }
        return sg_db_put(t, DB_AGG, k, klen, v, off, errstr, errstr_size);
}

/* ---- parked events ---------------------------------------------------- */

sg_err_t sg_parked_put(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       const sg_parked_rec_t *r, char *errstr,
                       size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        const void *ptrs[4] = {r->type, r->key, r->value, r->headers};
        size_t lens[4] = {r->type_len, r->key_len, r->value_len,
                          r->headers_len};
        size_t total = 24 + 32 + 16 + (r->has_epoch ? 8 : 0);
        for (int i = 0; i < 4; i++) {
                if (!ptrs[i] || lens[i] == SIZE_MAX)
                        lens[i] = SIZE_MAX; /* null */
                else
                        total += lens[i];
        }
        MDB_val key = {klen, k}, val = {total, NULL};
        int rc = sg_lmdb_put(t, DB_PARKED, &key, &val, MDB_RESERVE);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "parked", errstr, errstr_size);
        unsigned char *p = val.mv_data;
        put_u64(p, (uint64_t)r->parked_at_ms);
        put_u64(p + 8, (uint64_t)r->offset);
        put_u64(p + 16, (uint64_t)r->timestamp_ms);
        memcpy(p + 24, r->key_hash, 32);
        size_t off = 56;
        for (int i = 0; i < 4; i++) {
                put_u32(p + off,
                        lens[i] == SIZE_MAX ? UINT32_MAX : (uint32_t)lens[i]);
                off += 4;
                if (lens[i] != SIZE_MAX && lens[i]) {
                        memcpy(p + off, ptrs[i], lens[i]);
                        off += lens[i];
                }
        }
        if (r->has_epoch) /* semantics §4b: a trailer, absent before */
                put_u64(p + off, r->epoch);
        if (t->capture)
                return sg_change_capture(t, DB_PARKED, k, klen, p, total);
        return SG_OK;
}

sg_err_t sg_parked_get(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       sg_parked_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        MDB_val v;
        sg_err_t err = sg_db_get(t, DB_PARKED, k, klen, &v);
        return err ? err : parked_decode(t, &v, out);
}

sg_err_t sg_parked_del(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       char *errstr, size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        return sg_db_del(t, DB_PARKED, k, klen, errstr, errstr_size);
}

/* ---- meta --------------------------------------------------------------- */

sg_err_t sg_meta_get(sg_txn_t *t, const sg_tp_t *tp, sg_meta_rec_t *out) {
        MDB_val v;
        sg_err_t err = sg_db_get(t, DB_META, tp->b, tp->len, &v);
        if (err)
                return err;
        char why[160];
        err = sg_meta_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        if ((err = stored(t, err, why)))
                return err;
        /* the key prefix is a hash of the topic (store.h): a partition of
         * another topic with the same prefix is refused, never mixed */
        if (strcmp(out->topic, tp->topic) != 0)
                return sg_txn_fail(t, SG_ERR_STORE,
                                   "partition %" PRId32 " of topic \"%s\" "
                                   "has the store key prefix of topic "
                                   "\"%s\"'s",
                                   tp->partition, tp->topic, out->topic);
        return SG_OK;
}

sg_err_t sg_meta_put(sg_txn_t *t, const sg_tp_t *tp, const sg_meta_rec_t *r,
                     char *errstr, size_t errstr_size) {
        unsigned char v[META_VLEN + 1 + sizeof(tp->topic) + META_ID_LEN];
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
        size_t tl = strnlen(tp->topic, sizeof(tp->topic) - 1);
        v[META_VLEN] = (unsigned char)tl;
        memcpy(v + META_VLEN + 1, tp->topic, tl);
        size_t len = META_VLEN + 1 + tl;
        if (!r->has_changelog_id) /* none: the field is left out */
                return sg_db_put(t, DB_META, tp->b, tp->len, v, len, errstr,
                                 errstr_size);
        unsigned char *id = v + len;
        id[0] = 1;
        memcpy(id + 1, r->changelog_id.id, SG_CHANGELOG_ID_LEN);
        put_u64(id + 1 + SG_CHANGELOG_ID_LEN, (uint64_t)r->changelog_id.offset);
        /* The changelog's copy leaves the id out: it is what this store
         * checked its changelog by, not state a changelog carries (a
         * restore records its own), and an earlier version restoring the
         * changelog would refuse bytes it does not know. */
        bool cap = t->capture;
        t->capture = false;
        sg_err_t err = sg_db_put(t, DB_META, tp->b, tp->len, v,
                                 len + META_ID_LEN, errstr, errstr_size);
        t->capture = cap;
        if (err)
                return err;
        return sg_change_capture(t, DB_META, tp->b, tp->len, v, len);
}

/* ---- snapshot requests ------------------------------------------------ */

static sg_err_t snapdue_op(sg_txn_t *t, const sg_tp_t *tp, int64_t due,
                           const unsigned char ah[32], bool add, char *errstr,
                           size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ts[8];
        put_u64(ts, ts_key(due));
        size_t klen = key2(k, tp, ts, 8, ah, 32);
        return add ? sg_db_put_index(t, DB_SNAPDUE, k, klen, errstr,
                                     errstr_size)
                   : sg_db_del(t, DB_SNAPDUE, k, klen, errstr, errstr_size);
}

sg_err_t sg_snapreq_get(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], sg_snapreq_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = sg_db_get(t, DB_SNAPREQ, k, klen, &v);
        if (err)
                return err;
        char why[160];
        err = sg_snapreq_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        return stored(t, err, why);
}

sg_err_t sg_snapreq_put(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], const sg_snapreq_rec_t *r,
                        int64_t old_due, char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (old_due != r->due_ms) {
                if (old_due && (err = snapdue_op(t, tp, old_due, ah, false,
                                                 errstr, errstr_size)))
                        return err;
                if ((err = snapdue_op(t, tp, r->due_ms, ah, true, errstr,
                                      errstr_size)))
                        return err;
        }
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                            ? r->aggregate_len
                            : sizeof(r->aggregate) - 1;
        unsigned char v[SNAPREQ_FIXED + sizeof(r->aggregate)];
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
        return sg_db_put(t, DB_SNAPREQ, k, klen, v, SNAPREQ_FIXED + al, errstr,
                         errstr_size);
}

sg_err_t sg_snapreq_del(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], int64_t due, char *errstr,
                        size_t errstr_size) {
        sg_err_t err;
        if (due &&
            (err = snapdue_op(t, tp, due, ah, false, errstr, errstr_size)))
                return err;
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        return sg_db_del(t, DB_SNAPREQ, k, klen, errstr, errstr_size);
}

/* ---- restore from the changelog --------------------------------------- */

_Static_assert(SG_DB_DEDUP == DB_DEDUP && SG_DB_AGG == DB_AGG &&
                       SG_DB_PARKED == DB_PARKED && SG_DB_META == DB_META &&
                       SG_DB_SNAPREQ == DB_SNAPREQ,
               "public database numbers");

/* The key suffix (after tp) of each logged database's records. */
static size_t suffix_size(int db) {
        switch (db) {
        case DB_DEDUP:
        case DB_AGG:
        case DB_SNAPREQ:
                return 32; /* key or aggregate hash */
        case DB_PARKED:
                return 40; /* aggregate hash | version */
        case DB_META:
                return 0;
        default:
                return SIZE_MAX;
        }
}

/* A stored record the change replaces could not be read. */
static sg_err_t stored_err(sg_err_t err, const char *kind, char *errstr,
                           size_t errstr_size) {
        if (err == SG_ERR_STORE)
                sg_errf(errstr, errstr_size,
                        "the stored %s record the changelog record replaces "
                        "is corrupt or unreadable",
                        kind);
        return err;
}

/* Restore's common case, a key the store does not hold yet (a full restore
 * writes into an emptied partition): writes @p value — a changelog value
 * the caller decoded, so well-formed, and the very bytes the writer's store
 * held — under key @p k only if the key is absent (MDB_NOOVERWRITE: one
 * B-tree descent instead of a get and a put), and sets *freshp. When the
 * key exists nothing is written, *freshp stays false, and the caller takes
 * the read-then-replace path that moves the derived index entries. */
static sg_err_t put_if_new(sg_txn_t *t, int db, const unsigned char *k,
                           size_t klen, const void *value, size_t value_len,
                           bool *freshp, char *errstr, size_t errstr_size) {
        MDB_val key = {klen, (void *)k}, val = {value_len, (void *)value};
        int rc = sg_lmdb_put(t, db, &key, &val, MDB_NOOVERWRITE);
        if (rc == MDB_KEYEXIST)
                return SG_OK;
        if (rc)
                return sg_txn_lmdb_err(t, rc, db_name(db), errstr, errstr_size);
        *freshp = true;
        return SG_OK;
}

sg_err_t sg_store_apply_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                               const void *suffix, size_t suffix_len,
                               const void *value, size_t value_len,
                               char *errstr, size_t errstr_size) {
        assert(!t->capture && "restore with change capture on");
        size_t want = suffix_size(db);
        if (want == SIZE_MAX)
                return refuse(errstr, errstr_size,
                              "changelog record for database %d: not a "
                              "database seqgate logs",
                              db);
        if (suffix_len != want)
                return refuse(errstr, errstr_size,
                              "changelog record for the %s database: key of "
                              "%zu bytes after the partition (want %zu)",
                              db_name(db), suffix_len, want);
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, suffix, suffix_len, NULL, 0);
        sg_err_t err;
        /* every value is decoded in full before anything is written */
        switch (db) {
        case DB_DEDUP: {
                sg_dedup_rec_t old, nr;
                if (value && (err = sg_dedup_decode(value, value_len, &nr,
                                                    errstr, errstr_size)))
                        return err;
                bool fresh = false;
                unsigned char nv[DEDUP_VLEN];
                if (value)
                        dedup_encode(&nr, nv); /* an earlier format's too */
                if (value &&
                    (err = put_if_new(t, DB_DEDUP, k, klen, nv, sizeof(nv),
                                      &fresh, errstr, errstr_size)))
                        return err;
                if (fresh) { /* a new key: only its expiry entry is missing */
                        unsigned char ts[8], ek[SG_TP_MAX + 64];
                        put_u64(ts, ts_key(nr.expiry_ms));
                        size_t eklen = key2(ek, tp, ts, 8, suffix, 32);
                        return sg_db_put(t, DB_EXPIRY, ek, eklen, "", 0, errstr,
                                         errstr_size);
                }
                err = sg_dedup_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "dedup", errstr, errstr_size);
                bool had = err == SG_OK;
                if (value)
                        return sg_dedup_put_known(t, tp, suffix, &nr,
                                                  had ? &old : NULL, errstr,
                                                  errstr_size);
                if (had) {
                        unsigned char ts[8], ek[SG_TP_MAX + 64];
                        put_u64(ts, ts_key(old.expiry_ms));
                        size_t eklen = key2(ek, tp, ts, 8, suffix, 32);
                        if ((err = sg_db_del(t, DB_EXPIRY, ek, eklen, errstr,
                                             errstr_size)))
                                return err;
                }
                return sg_db_del(t, DB_DEDUP, k, klen, errstr, errstr_size);
        }
        case DB_AGG: {
                sg_agg_rec_t old, nr;
                if (value && (err = sg_agg_decode(value, value_len, &nr, errstr,
                                                  errstr_size)))
                        return err;
                bool fresh = false;
                if (value &&
                    (err = put_if_new(t, DB_AGG, k, klen, value, value_len,
                                      &fresh, errstr, errstr_size)))
                        return err;
                if (fresh) { /* a new key: only its since entry is missing */
                        int64_t since = sg_agg_indexed_since(&nr);
                        return since ? since_key_op(t, tp, since, suffix, true,
                                                    errstr, errstr_size)
                                     : SG_OK;
                }
                err = sg_agg_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "aggregate", errstr,
                                          errstr_size);
                int64_t old_since =
                        err == SG_OK ? sg_agg_indexed_since(&old) : 0;
                if (value)
                        return sg_agg_put(t, tp, suffix, &nr, old_since, errstr,
                                          errstr_size);
                if (old_since &&
                    (err = since_key_op(t, tp, old_since, suffix, false, errstr,
                                        errstr_size)))
                        return err;
                return sg_db_del(t, DB_AGG, k, klen, errstr, errstr_size);
        }
        case DB_PARKED: {
                sg_parked_rec_t nr;
                if (!value)
                        return sg_db_del(t, DB_PARKED, k, klen, errstr,
                                         errstr_size);
                if ((err = sg_parked_decode(value, value_len, &nr, errstr,
                                            errstr_size)))
                        return err;
                return sg_db_put(t, DB_PARKED, k, klen, value, value_len,
                                 errstr, errstr_size);
        }
        case DB_SNAPREQ: {
                sg_snapreq_rec_t old, nr;
                if (value && (err = sg_snapreq_decode(value, value_len, &nr,
                                                      errstr, errstr_size)))
                        return err;
                err = sg_snapreq_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "snapshot request", errstr,
                                          errstr_size);
                int64_t old_due = err == SG_OK ? old.due_ms : 0;
                if (value)
                        return sg_snapreq_put(t, tp, suffix, &nr, old_due,
                                              errstr, errstr_size);
                return err == SG_OK ? sg_snapreq_del(t, tp, suffix, old_due,
                                                     errstr, errstr_size)
                                    : SG_OK;
        }
        default: { /* DB_META */
                sg_meta_rec_t nr;
                if (!value)
                        return sg_db_del(t, DB_META, k, klen, errstr,
                                         errstr_size);
                if ((err = sg_meta_decode(value, value_len, &nr, errstr,
                                          errstr_size)))
                        return err;
                if (nr.topic[0] && strcmp(nr.topic, tp->topic) != 0)
                        return refuse(errstr, errstr_size,
                                      "changelog meta record of topic "
                                      "\"%s\" restored into topic \"%s\"",
                                      nr.topic, tp->topic);
                /* re-encoded: a value of an earlier format lacks the topic */
                return sg_meta_put(t, tp, &nr, errstr, errstr_size);
        }
        }
}

/* ---- restore in windows (store.h sg_store_batch_*) ---------------------- */

/* A dedup or aggregate record held in a batch. */
typedef struct batch_rec {
        unsigned char suffix[32]; /* key or aggregate hash */
        unsigned char db;         /* DB_DEDUP or DB_AGG */
        bool tomb;
        uint32_t seq;   /* arrival order: the last of a key wins */
        int64_t idx_ms; /* its index entry: expiry / indexed since (0: none) */
        size_t voff, vlen; /* the value, in bytes */
} batch_rec_t;

/* A derived index entry to add or remove at the flush's end. */
typedef struct batch_idx {
        uint64_t ts;              /* ts_key(ms): the key's first 8 bytes */
        unsigned char suffix[32]; /* the hash after it */
        unsigned char db;         /* DB_EXPIRY or DB_SINCE */
        bool add;
} batch_idx_t;

struct sg_store_batch {
        batch_rec_t *recs;
        size_t cnt, cap;
        unsigned char *bytes;
        size_t len, bcap;
        batch_idx_t *idx;
        size_t icnt, icap;
};

sg_err_t sg_store_batch_new(sg_store_batch_t **bp) {
        *bp = calloc(1, sizeof(**bp));
        return *bp ? SG_OK : SG_ERR_NOMEM;
}

void sg_store_batch_destroy(sg_store_batch_t *b) {
        if (!b)
                return;
        free(b->recs);
        free(b->bytes);
        free(b->idx);
        free(b);
}

void sg_store_batch_clear(sg_store_batch_t *b) {
        b->cnt = b->len = b->icnt = 0;
}

size_t sg_store_batch_count(const sg_store_batch_t *b) {
        return b->cnt;
}

size_t sg_store_batch_bytes(const sg_store_batch_t *b) {
        return b->len + b->cnt * sizeof(*b->recs);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
        if (need <= *cap)
                return true;
        size_t c = *cap ? *cap : 1024;
        while (c < need)
                c *= 2;
        void *q = realloc(*p, c * elem);
        if (!q)
                return false;
        *p = q;
        *cap = c;
        return true;
}

sg_err_t sg_store_batch_add(sg_store_batch_t *b, sg_txn_t *t, const sg_tp_t *tp,
                            int db, const void *suffix, size_t suffix_len,
                            const void *value, size_t value_len, char *errstr,
                            size_t errstr_size) {
        if ((db != DB_DEDUP && db != DB_AGG) || suffix_len != 32)
                /* other kinds, and keys to refuse: at once */
                return sg_store_apply_change(t, tp, db, suffix, suffix_len,
                                             value, value_len, errstr,
                                             errstr_size);
        assert(!t->capture && "restore with change capture on");
        int64_t idx_ms = 0;
        sg_err_t err;
        unsigned char nv[DEDUP_VLEN];
        if (value && db == DB_DEDUP) {
                sg_dedup_rec_t nr;
                if ((err = sg_dedup_decode(value, value_len, &nr, errstr,
                                           errstr_size)))
                        return err;
                idx_ms = nr.expiry_ms;
                /* stored in this format, whatever format the changelog
                 * record has (an earlier one's value is longer) */
                dedup_encode(&nr, nv);
                value = nv;
                value_len = sizeof(nv);
        } else if (value) {
                sg_agg_rec_t nr;
                if ((err = sg_agg_decode(value, value_len, &nr, errstr,
                                         errstr_size)))
                        return err;
                idx_ms = sg_agg_indexed_since(&nr);
        }
        size_t vlen = value ? value_len : 0;
        if (b->cnt >= UINT32_MAX ||
            !grow((void **)&b->recs, &b->cap, b->cnt + 1, sizeof(*b->recs)) ||
            !grow((void **)&b->bytes, &b->bcap, b->len + vlen, 1))
                return SG_ERR_NOMEM;
        batch_rec_t *r = &b->recs[b->cnt];
        memcpy(r->suffix, suffix, 32);
        r->db = (unsigned char)db;
        r->tomb = !value;
        r->seq = (uint32_t)b->cnt++;
        r->idx_ms = idx_ms;
        r->voff = b->len;
        r->vlen = vlen;
        if (vlen)
                memcpy(b->bytes + b->len, value, vlen);
        b->len += vlen;
        return SG_OK;
}

static int batch_rec_cmp(const void *x, const void *y) {
        const batch_rec_t *a = x, *c = y;
        if (a->db != c->db)
                return a->db < c->db ? -1 : 1;
        int d = memcmp(a->suffix, c->suffix, 32);
        if (d)
                return d;
        return a->seq < c->seq ? -1 : a->seq > c->seq;
}

static int batch_idx_cmp(const void *x, const void *y) {
        const batch_idx_t *a = x, *c = y;
        if (a->db != c->db)
                return a->db < c->db ? -1 : 1;
        if (a->ts != c->ts)
                return a->ts < c->ts ? -1 : 1;
        return memcmp(a->suffix, c->suffix, 32);
}

static bool idx_queue(sg_store_batch_t *b, int db, int64_t ms,
                      const unsigned char suffix[32], bool add) {
        if (!grow((void **)&b->idx, &b->icap, b->icnt + 1, sizeof(*b->idx)))
                return false;
        batch_idx_t *x = &b->idx[b->icnt++];
        x->ts = ts_key(ms);
        memcpy(x->suffix, suffix, 32);
        x->db = (unsigned char)db;
        x->add = add;
        return true;
}

/* The index entry (its time, 0 for none) of the stored value @p v of
 * database @p db. */
static sg_err_t stored_idx_ms(int db, const MDB_val *v, int64_t *msp,
                              char *errstr, size_t errstr_size) {
        char why[160];
        sg_err_t err;
        if (db == DB_DEDUP) {
                sg_dedup_rec_t old;
                err = sg_dedup_decode(v->mv_data, v->mv_size, &old, why,
                                      sizeof(why));
                *msp = old.expiry_ms;
        } else {
                sg_agg_rec_t old;
                err = sg_agg_decode(v->mv_data, v->mv_size, &old, why,
                                    sizeof(why));
                *msp = err ? 0 : sg_agg_indexed_since(&old);
        }
        return err ? stored_err(SG_ERR_STORE,
                                db == DB_DEDUP ? "dedup" : "aggregate", errstr,
                                errstr_size)
                   : SG_OK;
}

/* Writes the last record @p r of its key through cursor @p cur, queueing
 * the index entries to remove and add. */
static sg_err_t batch_rec_apply(sg_store_batch_t *b, sg_txn_t *t,
                                const sg_tp_t *tp, MDB_cursor *cur,
                                const batch_rec_t *r, char *errstr,
                                size_t errstr_size) {
        int db = r->db, idb = db == DB_DEDUP ? DB_EXPIRY : DB_SINCE;
        unsigned char k[SG_TP_MAX + 64];
        MDB_val key = {key2(k, tp, r->suffix, 32, NULL, 0), k}, val;
        int64_t old_ms = 0;
        bool had = false;
        sg_err_t err;
        int rc;
        if (r->tomb) {
                rc = mdb_cursor_get(cur, &key, &val, MDB_SET);
                if (rc == 0) {
                        had = true;
                        if ((err = stored_idx_ms(db, &val, &old_ms, errstr,
                                                 errstr_size)))
                                return err;
                        rc = sg_lmdb_cursor_del(t, cur);
                } else if (rc == MDB_NOTFOUND) {
                        rc = 0;
                }
        } else {
                val = (MDB_val){r->vlen, b->bytes + r->voff};
                rc = sg_lmdb_cursor_put(t, cur, &key, &val, MDB_NOOVERWRITE);
                if (rc == MDB_KEYEXIST) {
                        had = true;
                        if ((err = stored_idx_ms(db, &val, &old_ms, errstr,
                                                 errstr_size)))
                                return err;
                        val = (MDB_val){r->vlen, b->bytes + r->voff};
                        rc = sg_lmdb_cursor_put(t, cur, &key, &val, 0);
                }
        }
        if (rc)
                return sg_txn_lmdb_err(t, rc, db_name(db), errstr, errstr_size);
        int64_t new_ms = r->tomb ? 0 : r->idx_ms;
        bool dedup = db == DB_DEDUP; /* every dedup record has its entry */
        if (had && (dedup || old_ms) && (r->tomb || old_ms != new_ms) &&
            !idx_queue(b, idb, old_ms, r->suffix, false))
                return SG_ERR_NOMEM;
        if (!r->tomb && (dedup || new_ms) && (!had || old_ms != new_ms) &&
            !idx_queue(b, idb, new_ms, r->suffix, true))
                return SG_ERR_NOMEM;
        return SG_OK;
}

/* Adds or removes the queued index entries, in their key order. */
static sg_err_t batch_idx_apply(sg_store_batch_t *b, sg_txn_t *t,
                                const sg_tp_t *tp, char *errstr,
                                size_t errstr_size) {
        if (b->icnt > 1)
                qsort(b->idx, b->icnt, sizeof(*b->idx), batch_idx_cmp);
        MDB_cursor *cur = NULL;
        int cur_db = -1, rc = 0;
        for (size_t i = 0; !rc && i < b->icnt; i++) {
                const batch_idx_t *x = &b->idx[i];
                if (x->db != cur_db) {
                        if (cur)
                                mdb_cursor_close(cur);
                        cur = NULL;
                        cur_db = x->db;
                        if ((rc = sg_lmdb_cursor_open(t, cur_db, &cur)))
                                break;
                }
                unsigned char ts[8], k[SG_TP_MAX + 64];
                put_u64(ts, x->ts);
                MDB_val key = {key2(k, tp, ts, 8, x->suffix, 32), k},
                        val = {0, ""};
                if (x->add) {
                        rc = sg_lmdb_cursor_put(t, cur, &key, &val, 0);
                } else if ((rc = mdb_cursor_get(cur, &key, &val, MDB_SET)) ==
                           0) {
                        rc = sg_lmdb_cursor_del(t, cur);
                } else if (rc == MDB_NOTFOUND) {
                        rc = 0;
                }
        }
        if (cur)
                mdb_cursor_close(cur);
        return rc ? sg_txn_lmdb_err(t, rc, db_name(cur_db), errstr, errstr_size)
                  : SG_OK;
}

sg_err_t sg_store_batch_flush(sg_store_batch_t *b, sg_txn_t *t,
                              const sg_tp_t *tp, char *errstr,
                              size_t errstr_size) {
        if (b->cnt > 1) /* (an empty batch has no array: qsort's is nonnull) */
                qsort(b->recs, b->cnt, sizeof(*b->recs), batch_rec_cmp);
        MDB_cursor *cur = NULL;
        int cur_db = -1;
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < b->cnt; i++) {
                const batch_rec_t *r = &b->recs[i];
                if (i + 1 < b->cnt && r->db == r[1].db &&
                    !memcmp(r->suffix, r[1].suffix, 32))
                        continue; /* a later record of the key replaces it */
                if (r->db != cur_db) {
                        if (cur)
                                mdb_cursor_close(cur);
                        cur = NULL;
                        cur_db = r->db;
                        int rc = sg_lmdb_cursor_open(t, cur_db, &cur);
                        if (rc) {
                                err = sg_txn_lmdb_err(t, rc, db_name(cur_db),
                                                      errstr, errstr_size);
                                break;
                        }
                }
                err = batch_rec_apply(b, t, tp, cur, r, errstr, errstr_size);
        }
        if (cur)
                mdb_cursor_close(cur);
        if (!err)
                err = batch_idx_apply(b, t, tp, errstr, errstr_size);
        sg_store_batch_clear(b);
        return err;
}

sg_err_t sg_store_get_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                             const void *suffix, size_t suffix_len,
                             const void **valuep, size_t *value_lenp) {
        unsigned char k[SG_TP_MAX + 64];
        if (!db_logged(db) || suffix_len > 48)
                return SG_ERR_INVALID;
        size_t klen = key2(k, tp, suffix, suffix_len, NULL, 0);
        MDB_val v;
        sg_err_t err = sg_db_get(t, db, k, klen, &v);
        if (err)
                return err;
        *valuep = v.mv_data;
        *value_lenp = v.mv_size;
        return SG_OK;
}
