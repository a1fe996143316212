/*
 * store_records.c — one record at a time: the gets, puts and deletes of
 * aggregates, parked events, meta and snapshot requests, each keeping its
 * derived index (since, snapdue) in step, and restore's
 * sg_store_apply_change / sg_store_get_change (changelog, semantics §6),
 * which also convert the records of store format 2; a window's restore
 * (sg_store_batch_*) is store_batch.c. Dedup records are store_seg.c's.
 *
 * Invariant relied on by the engine: every write of a batch goes through the
 * one write transaction the engine holds; nothing here commits on its own.
 */
#include "store_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- keys ------------------------------------------------------------- */

/* The key tp | a [| b] the changelog names a record by (capture). */
static size_t lkey(unsigned char *k, const sg_tp_t *tp, const void *a,
                   size_t alen, const void *b, size_t blen) {
        memcpy(k, tp->b, SG_TP_LEN);
        if (alen)
                memcpy(k + SG_TP_LEN, a, alen);
        if (blen)
                memcpy(k + SG_TP_LEN + alen, b, blen);
        return SG_TP_LEN + alen + blen;
}

/* An aux database key: kind | a [| b]. */
size_t sg_rec_akey(unsigned char *k, int kind, const void *a, size_t alen,
                   const void *b, size_t blen) {
        k[0] = (unsigned char)kind;
        memcpy(k + 1, a, alen);
        if (blen)
                memcpy(k + 1 + alen, b, blen);
        return 1 + alen + blen;
}

/* Captures a tombstone for the format 2 key tp | ah (32) [| b]. */
static sg_err_t v2_tombstone(sg_txn_t *t, int db, const sg_tp_t *tp,
                             const unsigned char ah[32], const void *b,
                             size_t blen) {
        unsigned char k[SG_TP_LEN + 48];
        size_t kl = lkey(k, tp, ah, SG_KEY_HASH_LEN_2, b, blen);
        return sg_change_capture(t, db, k, kl, NULL, 0);
}

/* Whether aggregate @p ah's records may remain under store format 2 keys
 * (its stored record's v2), or, writing format 2's changelog (a rolling
 * upgrade's first step), whether its whole hash is known (@p ah's own
 * rest, or the record's): then *full its 32-byte hash. */
static bool agg_v2(sg_txn_t *t, const sg_tp_t *tp, const unsigned char *ah,
                   unsigned char full[32]) {
        sg_agg_rec_t r;
        const unsigned char *tail =
                t->store->cl_format == 2 ? hash_tail(ah) : NULL;
        if (!tail && !sg_agg_get(t, tp, ah, &r) && r.v2)
                tail = r.v2_tail;
        if (!tail)
                return false;
        memmove(full + HL, tail, 16);
        memcpy(full, ah, HL);
        return true;
}

/* Whether this store writes format 2's changelog records (store.h
 * sg_store_set_changelog_format). */
static bool writes_v2(const sg_txn_t *t) {
        return t->store->cl_format == 2;
}

pdb_t *sg_rec_pdb_for(sg_txn_t *t, const sg_tp_t *tp, bool create,
                      sg_err_t *errp) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, create, &rc);
        *errp = p              ? SG_OK
                : rc || create ? sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND,
                                                 "partition databases", NULL, 0)
                               : SG_ERR_NOT_FOUND;
        return p;
}

/* A get of a reader whose snapshot predates the database is a miss. */
static sg_err_t get_of(sg_txn_t *t, int db, MDB_dbi dbi, const void *k,
                       size_t klen, MDB_val *v) {
        if (!dbi)
                return SG_ERR_NOT_FOUND;
        MDB_val key = {klen, (void *)k};
        int rc = sg_lmdb_get(t, dbi, &key, v);
        if (!rc)
                return SG_OK;
        if (rc == MDB_NOTFOUND || (!t->write && lmdb_no_db(rc)))
                return SG_ERR_NOT_FOUND;
        char what[32];
        sg_errf(what, sizeof(what), "%s get", sg_store_db_names[db]);
        return sg_txn_lmdb_err(t, rc, what, NULL, 0);
}

/* ---- aggregates ------------------------------------------------------- */

/* Aggregate @p ah's stored value: the writer's cache first (store_aggc.c),
 * then LMDB, whose answer the cache keeps. */
static sg_err_t agg_value(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                          MDB_val *v) {
        int hit = sg_aggc_get(t, p, ah, v);
        if (hit != 1)
                return (sg_err_t)hit;
        sg_err_t err = get_of(t, DB_AGG, p->agg, ah, HL, v);
        if (!err || err == SG_ERR_NOT_FOUND)
                sg_aggc_fill(t, p, ah, err ? NULL : v);
        return err;
}

/* Writes aggregate @p ah's value @p v (@p n bytes; NULL: deletes it):
 * into the writer's cache, or LMDB when it does not keep it. */
static sg_err_t agg_store(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                          const void *v, size_t n, char *errstr,
                          size_t errstr_size) {
        bool kept;
        sg_err_t err = sg_aggc_put(t, p, ah, v, n, &kept);
        if (err) {
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                return err;
        }
        if (kept)
                return SG_OK;
        return v ? sg_db_put(t, DB_AGG, p->agg, ah, HL, v, n, errstr,
                             errstr_size)
                 : sg_db_del(t, DB_AGG, p->agg, ah, HL, errstr, errstr_size);
}

sg_err_t sg_agg_get(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    sg_agg_rec_t *out) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
        if (!p) {
                /* never SG_OK then (pdb_for); scan-build does not always
                 * follow it, and *out stays unwritten */
                assert(err != SG_OK);
                return err;
        }
        MDB_val v;
        if ((err = agg_value(t, p, ah, &v)))
                return err;
        char why[160];
        err = sg_agg_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        return stored(t, err, why);
}

static sg_err_t since_key_op(sg_txn_t *t, pdb_t *p, int kind, int64_t ms,
                             const unsigned char ah[32], bool add, char *errstr,
                             size_t errstr_size) {
        unsigned char k[1 + 8 + HL], ts[8];
        put_u64(ts, ts_key(ms));
        size_t klen = sg_rec_akey(k, kind, ts, 8, ah, HL);
        int db = kind == AUX_SINCE ? DB_SINCE : DB_SNAPDUE;
        return add ? sg_db_put(t, db, p->aux, k, klen, "", 0, errstr,
                               errstr_size)
                   : sg_db_del(t, db, p->aux, k, klen, errstr, errstr_size);
}

/* Writes aggregate @p r (its since entry moved from @p old_since), for the
 * changelog (when capturing) under its format 3 key, or when @p v2_tail
 * under its format 2 key in format 2's value. */
static sg_err_t agg_write(sg_txn_t *t, const sg_tp_t *tp, pdb_t *p,
                          const unsigned char *ah, const sg_agg_rec_t *r,
                          int64_t old_since, const unsigned char *v2_tail,
                          char *errstr, size_t errstr_size) {
        sg_err_t err;
        int64_t new_since = sg_agg_indexed_since(r);
        if (old_since != new_since) {
                if (old_since &&
                    (err = since_key_op(t, p, AUX_SINCE, old_since, ah, false,
                                        errstr, errstr_size)))
                        return err;
                if (new_since &&
                    (err = since_key_op(t, p, AUX_SINCE, new_since, ah, true,
                                        errstr, errstr_size)))
                        return err;
        }
        unsigned char v[SG_AGG_VALUE_MAX];
        size_t n = sg_agg_encode(r, v);
        if ((err = agg_store(t, p, ah, v, n, errstr, errstr_size)) ||
            !t->capture)
                return err;
        unsigned char k[SG_TP_LEN + SG_KEY_HASH_LEN_2];
        if (v2_tail) {
                n = sg_agg_encode_v2(r, v);
                lkey(k, tp, ah, HL, v2_tail, 16);
                return sg_change_capture(t, DB_AGG, k, sizeof(k), v, n);
        }
        return sg_change_capture(t, DB_AGG, k, lkey(k, tp, ah, HL, NULL, 0), v,
                                 n);
}

sg_err_t sg_agg_put(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    const sg_agg_rec_t *in, int64_t old_since, char *errstr,
                    size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
        if (!p)
                return err;
        sg_agg_rec_t r = *in;
        if (writes_v2(t)) {
                /* a rolling upgrade's first step: format 2's key when the
                 * whole hash is known, and the record keeps its rest */
                const unsigned char *tail = hash_tail(ah);
                if (tail || r.v2) {
                        if (tail)
                                memcpy(r.v2_tail, tail, 16);
                        r.v2 = true;
                        return agg_write(t, tp, p, ah, &r, old_since, r.v2_tail,
                                         errstr, errstr_size);
                }
                return agg_write(t, tp, p, ah, &r, old_since, NULL, errstr,
                                 errstr_size);
        }
        if (r.v2) {
                /* the format 2 record goes; the tail stays while parked
                 * events or a snapshot request may remain under format 2
                 * keys (their deletes tombstone those) */
                unsigned char full[32];
                memcpy(full, ah, HL);
                memcpy(full + HL, r.v2_tail, 16);
                if (t->capture &&
                    (err = v2_tombstone(t, DB_AGG, tp, full, NULL, 0)))
                        return err;
                if (!r.parked_cnt && !(r.flags & SG_AGG_REFETCHING))
                        r.v2 = false;
        }
        return agg_write(t, tp, p, ah, &r, old_since, NULL, errstr,
                         errstr_size);
}

/* ---- parked events ---------------------------------------------------- */

sg_err_t sg_parked_put(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       const sg_parked_rec_t *r, char *errstr,
                       size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
        if (!p)
                return err;
        unsigned char k[1 + HL + 8], vb[8], full[32];
        put_u64(vb, version);
        size_t klen = sg_rec_akey(k, AUX_PARKED, ah, HL, vb, 8);
        /* a rolling upgrade's first step: format 2's key and value (its
         * 32-byte key hash) when both hashes are known whole */
        bool v2 = writes_v2(t) && hash_tail(r->key_hash) &&
                  agg_v2(t, tp, ah, full);
        size_t hl = v2 ? SG_KEY_HASH_LEN_2 : HL;
        size_t total = sg_parked_len(r, hl);
        MDB_val key = {klen, k}, val = {total, NULL};
        int rc = sg_lmdb_put(t, p->aux, &key, &val, MDB_RESERVE);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "parked", errstr, errstr_size);
        sg_parked_encode(r, hl, val.mv_data);
        if (!t->capture)
                return SG_OK;
        unsigned char lk[SG_TP_LEN + SG_KEY_HASH_LEN_2 + 8];
        size_t lkl = v2 ? lkey(lk, tp, full, SG_KEY_HASH_LEN_2, vb, 8)
                        : lkey(lk, tp, ah, HL, vb, 8);
        return sg_change_capture(t, DB_PARKED, lk, lkl, val.mv_data, total);
}

sg_err_t sg_parked_get(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       sg_parked_rec_t *out) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
        if (!p)
                return err;
        unsigned char k[1 + HL + 8], vb[8];
        put_u64(vb, version);
        MDB_val v;
        err = get_of(t, DB_PARKED, p->aux, k,
                     sg_rec_akey(k, AUX_PARKED, ah, HL, vb, 8), &v);
        return err ? err : parked_decode(t, &v, out);
}

sg_err_t sg_parked_del(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       char *errstr, size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
        if (!p)
                return err == SG_ERR_NOT_FOUND ? SG_OK : err;
        unsigned char k[1 + HL + 8], vb[8];
        put_u64(vb, version);
        size_t klen = sg_rec_akey(k, AUX_PARKED, ah, HL, vb, 8);
        MDB_val key = {klen, k};
        int rc = sg_lmdb_del(t, p->aux, &key);
        if (rc == MDB_NOTFOUND)
                return SG_OK;
        if (rc)
                return sg_txn_lmdb_err(t, rc, "parked", errstr, errstr_size);
        if (!t->capture)
                return SG_OK;
        unsigned char full[32];
        bool known = agg_v2(t, tp, ah, full);
        if (known && (err = v2_tombstone(t, DB_PARKED, tp, full, vb, 8)))
                return err;
        /* a rolling upgrade's first step writes no format 3 key an earlier
         * version would refuse (a tombstone neither) */
        if (known && writes_v2(t))
                return SG_OK;
        unsigned char lk[SG_TP_LEN + HL + 8];
        return sg_change_capture(t, DB_PARKED, lk, lkey(lk, tp, ah, HL, vb, 8),
                                 NULL, 0);
}

/* ---- meta --------------------------------------------------------------- */

sg_err_t sg_meta_get(sg_txn_t *t, const sg_tp_t *tp, sg_meta_rec_t *out) {
        MDB_val v;
        sg_err_t err =
                get_of(t, DB_META, t->store->meta_dbi, tp->b, tp->len, &v);
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
        unsigned char v[SG_META_VALUE_MAX + META_ID_LEN];
        size_t n = sg_meta_encode(r, tp->topic, v), sn = n;
        if (r->has_changelog_id) { /* none: the field is left out */
                unsigned char *id = v + n;
                id[0] = 1;
                memcpy(id + 1, r->changelog_id.id, SG_CHANGELOG_ID_LEN);
                put_u64(id + 1 + SG_CHANGELOG_ID_LEN,
                        (uint64_t)r->changelog_id.offset);
                sn += META_ID_LEN;
        }
        sg_err_t err = sg_db_put(t, DB_META, t->store->meta_dbi, tp->b, tp->len,
                                 v, sn, errstr, errstr_size);
        /* The changelog's copy leaves the id out: it is what this store
         * checked its changelog by, not state a changelog carries (a
         * restore records its own), and an earlier version restoring the
         * changelog would refuse bytes it does not know. */
        return err ? err : sg_change_capture(t, DB_META, tp->b, tp->len, v, n);
}

/* ---- snapshot requests ------------------------------------------------ */

sg_err_t sg_snapreq_get(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], sg_snapreq_rec_t *out) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
        if (!p) {
                /* never SG_OK then (pdb_for); scan-build does not always
                 * follow it, and *out stays unwritten */
                assert(err != SG_OK);
                return err;
        }
        unsigned char k[1 + HL];
        MDB_val v;
        if ((err = get_of(t, DB_SNAPREQ, p->aux, k,
                          sg_rec_akey(k, AUX_SNAPREQ, ah, HL, NULL, 0), &v)))
                return err;
        char why[160];
        err = sg_snapreq_decode(v.mv_data, v.mv_size, out, why, sizeof(why));
        return stored(t, err, why);
}

sg_err_t sg_snapreq_put(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], const sg_snapreq_rec_t *r,
                        int64_t old_due, char *errstr, size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
        if (!p)
                return err;
        if (old_due != r->due_ms) {
                if (old_due &&
                    (err = since_key_op(t, p, AUX_SNAPDUE, old_due, ah, false,
                                        errstr, errstr_size)))
                        return err;
                if ((err = since_key_op(t, p, AUX_SNAPDUE, r->due_ms, ah, true,
                                        errstr, errstr_size)))
                        return err;
        }
        unsigned char k[1 + HL], v[SNAPREQ_FIXED + 1025];
        size_t n = sg_snapreq_encode(r, v);
        if ((err = sg_db_put(t, DB_SNAPREQ, p->aux, k,
                             sg_rec_akey(k, AUX_SNAPREQ, ah, HL, NULL, 0), v, n,
                             errstr, errstr_size)) ||
            !t->capture)
                return err;
        unsigned char full[32], lk[SG_TP_LEN + SG_KEY_HASH_LEN_2];
        bool known = agg_v2(t, tp, ah, full);
        if (known && writes_v2(t)) /* a rolling upgrade's first step */
                return sg_change_capture(
                        t, DB_SNAPREQ, lk,
                        lkey(lk, tp, full, SG_KEY_HASH_LEN_2, NULL, 0), v, n);
        if (known && (err = v2_tombstone(t, DB_SNAPREQ, tp, full, NULL, 0)))
                return err;
        return sg_change_capture(t, DB_SNAPREQ, lk,
                                 lkey(lk, tp, ah, HL, NULL, 0), v, n);
}

sg_err_t sg_snapreq_del(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], int64_t due, char *errstr,
                        size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
        if (!p)
                return err == SG_ERR_NOT_FOUND ? SG_OK : err;
        if (due && (err = since_key_op(t, p, AUX_SNAPDUE, due, ah, false,
                                       errstr, errstr_size)))
                return err;
        unsigned char k[1 + HL];
        MDB_val key = {sg_rec_akey(k, AUX_SNAPREQ, ah, HL, NULL, 0), k};
        int rc = sg_lmdb_del(t, p->aux, &key);
        if (rc == MDB_NOTFOUND)
                return SG_OK;
        if (rc)
                return sg_txn_lmdb_err(t, rc, "snapreq", errstr, errstr_size);
        if (!t->capture)
                return SG_OK;
        unsigned char full[32];
        bool known = agg_v2(t, tp, ah, full);
        if (known && (err = v2_tombstone(t, DB_SNAPREQ, tp, full, NULL, 0)))
                return err;
        if (known && writes_v2(t)) /* as sg_parked_del */
                return SG_OK;
        unsigned char lk[SG_TP_LEN + HL];
        return sg_change_capture(t, DB_SNAPREQ, lk,
                                 lkey(lk, tp, ah, HL, NULL, 0), NULL, 0);
}

/* ---- restore from the changelog --------------------------------------- */

_Static_assert(SG_DB_DEDUP == DB_DEDUP && SG_DB_AGG == DB_AGG &&
                       SG_DB_PARKED == DB_PARKED && SG_DB_META == DB_META &&
                       SG_DB_SNAPREQ == DB_SNAPREQ,
               "public database numbers");

/* The hash a record's key starts with (dedup, agg, parked, snapreq): its
 * width in this key (SG_KEY_HASH_LEN, or SG_KEY_HASH_LEN_2 in a key of store
 * format 2), 0 for meta, -1 for a database seqgate does not log or a key
 * of another length. */
static int key_hash_len(int db, size_t suffix_len) {
        switch (db) {
        case DB_DEDUP:
        case DB_AGG:
        case DB_SNAPREQ:
                return suffix_len == HL                  ? HL
                       : suffix_len == SG_KEY_HASH_LEN_2 ? SG_KEY_HASH_LEN_2
                                                         : -1;
        case DB_PARKED: /* hash | version */
                return suffix_len == HL + 8                  ? HL
                       : suffix_len == SG_KEY_HASH_LEN_2 + 8 ? SG_KEY_HASH_LEN_2
                                                             : -1;
        case DB_META:
                return suffix_len == 0 ? 0 : -1;
        default:
                return -1;
        }
}

/* A stored record the change replaces could not be read. */
sg_err_t sg_rec_stored_err(sg_err_t err, const char *kind, char *errstr,
                           size_t errstr_size) {
        if (err == SG_ERR_STORE)
                sg_errf(errstr, errstr_size,
                        "the stored %s record the changelog record replaces "
                        "is corrupt or unreadable",
                        kind);
        return err;
}

/* Checks a changelog record's key: @p db and @p suffix_len. */
sg_err_t sg_rec_key_check(int db, size_t suffix_len, int *hlp, char *errstr,
                          size_t errstr_size) {
        if (db < 0 || db >= DB__CNT || db == DB_EXPIRY || db == DB_SINCE ||
            db == DB_SNAPDUE)
                return refuse(errstr, errstr_size,
                              "changelog record for database %d: not a "
                              "database seqgate logs",
                              db);
        int hl = key_hash_len(db, suffix_len);
        if (hl < 0)
                return refuse(errstr, errstr_size,
                              "changelog record for the %s database: key of "
                              "%zu bytes after the partition (want %d, or "
                              "%d in store format 2)",
                              sg_store_db_names[db], suffix_len,
                              db == DB_PARKED ? HL + 8
                              : db == DB_META ? 0
                                              : HL,
                              db == DB_PARKED ? SG_KEY_HASH_LEN_2 + 8
                              : db == DB_META ? 0
                                              : SG_KEY_HASH_LEN_2);
        *hlp = hl;
        return SG_OK;
}

/* Restores one aggregate record: @p nr decoded (NULL: a tombstone), @p hl
 * the width of its key's hash (SG_KEY_HASH_LEN_2: store format 2, whose tail
 * the aggregate keeps). */
static sg_err_t agg_restore(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char *suffix, int hl,
                            sg_agg_rec_t *nr, char *errstr,
                            size_t errstr_size) {
        sg_err_t err;
        pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
        if (!p)
                return err;
        sg_agg_rec_t old;
        err = sg_agg_get(t, tp, suffix, &old);
        if (err && err != SG_ERR_NOT_FOUND)
                return sg_rec_stored_err(err, "aggregate", errstr, errstr_size);
        bool had = err == SG_OK;
        int64_t old_since = had ? sg_agg_indexed_since(&old) : 0;
        if (!nr) {
                if (!had)
                        return SG_OK;
                if (old_since &&
                    (err = since_key_op(t, p, AUX_SINCE, old_since, suffix,
                                        false, errstr, errstr_size)))
                        return err;
                return agg_store(t, p, suffix, NULL, 0, errstr, errstr_size);
        }
        if (hl == SG_KEY_HASH_LEN_2) {
                nr->v2 = true;
                memcpy(nr->v2_tail, suffix + HL, 16);
        } else if (had && old.v2 && !nr->v2) {
                nr->v2 = true; /* still tracked (sg_agg_put) */
                memcpy(nr->v2_tail, old.v2_tail, 16);
        }
        return agg_write(t, tp, p, suffix, nr, old_since, NULL, errstr,
                         errstr_size);
}

sg_err_t sg_store_apply_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                               const void *suffix, size_t suffix_len,
                               const void *value, size_t value_len,
                               char *errstr, size_t errstr_size) {
        assert(!t->capture && "restore with change capture on");
        int hl = 0; /* set by sg_rec_key_check() on success */
        sg_err_t err =
                sg_rec_key_check(db, suffix_len, &hl, errstr, errstr_size);
        if (err)
                return err;
        const unsigned char *sx = suffix;
        /* every value is decoded in full before anything is written */
        switch (db) {
        case DB_DEDUP: {
                sg_dedup_rec_t nr;
                if (value && (err = sg_dedup_decode(value, value_len, &nr,
                                                    errstr, errstr_size)))
                        return err;
                if (value && hl == SG_KEY_HASH_LEN_2) {
                        nr.v2 = true;
                        memcpy(nr.v2_tail, sx + HL, 16);
                }
                return sg_dedup_restore(t, tp, sx, value ? &nr : NULL,
                                        hl == SG_KEY_HASH_LEN_2, errstr,
                                        errstr_size);
        }
        case DB_AGG: {
                sg_agg_rec_t nr;
                if (value && (err = sg_agg_decode(value, value_len, &nr, errstr,
                                                  errstr_size)))
                        return err;
                return agg_restore(t, tp, sx, hl, value ? &nr : NULL, errstr,
                                   errstr_size);
        }
        case DB_PARKED: {
                sg_parked_rec_t nr;
                if (value && (err = sg_parked_decode(value, value_len, &nr,
                                                     errstr, errstr_size)))
                        return err;
                pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
                if (!p)
                        return err;
                unsigned char k[1 + HL + 8];
                size_t klen = sg_rec_akey(k, AUX_PARKED, sx, HL, sx + hl, 8);
                /* the value's bytes as they came (either format decodes) */
                return value ? sg_db_put(t, DB_PARKED, p->aux, k, klen, value,
                                         value_len, errstr, errstr_size)
                             : sg_db_del(t, DB_PARKED, p->aux, k, klen, errstr,
                                         errstr_size);
        }
        case DB_SNAPREQ: {
                sg_snapreq_rec_t old, nr;
                if (value && (err = sg_snapreq_decode(value, value_len, &nr,
                                                      errstr, errstr_size)))
                        return err;
                err = sg_snapreq_get(t, tp, sx, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return sg_rec_stored_err(err, "snapshot request",
                                                 errstr, errstr_size);
                int64_t old_due = err == SG_OK ? old.due_ms : 0;
                unsigned char ah[32] = {0};
                memcpy(ah, sx, HL);
                if (value)
                        return sg_snapreq_put(t, tp, ah, &nr, old_due, errstr,
                                              errstr_size);
                return err == SG_OK ? sg_snapreq_del(t, tp, ah, old_due, errstr,
                                                     errstr_size)
                                    : SG_OK;
        }
        default: { /* DB_META */
                sg_meta_rec_t nr;
                if (!value)
                        return sg_db_del(t, DB_META, t->store->meta_dbi, tp->b,
                                         tp->len, errstr, errstr_size);
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

sg_err_t sg_store_get_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                             const void *suffix, size_t suffix_len,
                             const void **valuep, size_t *value_lenp) {
        int hl = 0; /* set by sg_rec_key_check() on success */
        if (sg_rec_key_check(db, suffix_len, &hl, NULL, 0))
                return SG_ERR_INVALID;
        const unsigned char *sx = suffix;
        sg_err_t err;
        MDB_val v;
        if (db == DB_META) {
                err = get_of(t, DB_META, t->store->meta_dbi, tp->b, tp->len,
                             &v);
        } else if (db == DB_DEDUP) {
                /* the changelog's form of the record, in the transaction's
                 * memory */
                sg_dedup_rec_t r;
                if ((err = sg_dedup_get(t, tp, sx, &r)))
                        return err;
                unsigned char *buf =
                        sg_arena_alloc(&t->cap, SG_DEDUP_VALUE_LEN);
                if (!buf)
                        return SG_ERR_NOMEM;
                *value_lenp = sg_dedup_encode(&r, buf);
                *valuep = buf;
                return SG_OK;
        } else {
                pdb_t *p = sg_rec_pdb_for(t, tp, false, &err);
                if (!p)
                        return err;
                unsigned char k[1 + HL + 8];
                if (db == DB_AGG)
                        err = agg_value(t, p, sx, &v);
                else if (db == DB_PARKED)
                        err = get_of(
                                t, db, p->aux, k,
                                sg_rec_akey(k, AUX_PARKED, sx, HL, sx + hl, 8),
                                &v);
                else
                        err = get_of(
                                t, db, p->aux, k,
                                sg_rec_akey(k, AUX_SNAPREQ, sx, HL, NULL, 0),
                                &v);
        }
        if (err)
                return err;
        if (db == DB_AGG && hl == SG_KEY_HASH_LEN_2) {
                /* under a format 2 key, format 2's value (a reader of that
                 * key may be the earlier version: a rolling upgrade) */
                sg_agg_rec_t r;
                char why[160];
                unsigned char *buf = sg_arena_alloc(&t->cap, SG_AGG_VALUE_MAX);
                if ((err = stored(t,
                                  sg_agg_decode(v.mv_data, v.mv_size, &r, why,
                                                sizeof(why)),
                                  why)))
                        return err;
                if (!buf)
                        return SG_ERR_NOMEM;
                *value_lenp = sg_agg_encode_v2(&r, buf);
                *valuep = buf;
                return SG_OK;
        }
        *valuep = v.mv_data;
        *value_lenp = v.mv_size;
        return SG_OK;
}
