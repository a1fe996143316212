/*
 * store_walk.c — the store's cursor walks: the dedup TTL sweep over the
 * expiry index, the first entry of the since and snapdue time indexes, the
 * lowest parked version, the foreach walks of operator tools and gauges,
 * and the whole-partition drop and whole-store dump.
 */
#include "store_int.h"

#include <errno.h>

/* An LMDB error @p rc of a cursor on database @p db: SG_ERR_MAP_FULL when
 * the map filled (opening a cursor on a time index makes its gathered
 * puts, sg_db_put_index), else SG_ERR_STORE; the detail in @p t. */
static sg_err_t cursor_err(sg_txn_t *t, int db, int rc) {
        return sg_txn_fail(t,
                           rc == MDB_MAP_FULL || rc == MDB_TXN_FULL
                                   ? SG_ERR_MAP_FULL
                                   : SG_ERR_STORE,
                           "LMDB %s cursor: %s", db_name(db), mdb_strerror(rc));
}

sg_err_t sg_dedup_sweep(sg_txn_t *t, const sg_tp_t *tp, int64_t now_ms,
                        int64_t ttl_ms, int max, int *removedp, char *errstr,
                        size_t errstr_size) {
        int removed = 0;
        *removedp = 0;
        for (int i = 0; i < max; i++) {
                MDB_cursor *cur;
                int rc = sg_lmdb_cursor_open(t, DB_EXPIRY, &cur);
                if (rc)
                        return sg_txn_lmdb_err(t, rc, "expiry cursor", errstr,
                                               errstr_size);
                MDB_val key = {tp->len, (void *)tp->b}, val;
                rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
                if (rc == MDB_NOTFOUND ||
                    (rc == 0 && (key.mv_size != tp->len + 40 ||
                                 memcmp(key.mv_data, tp->b, tp->len)))) {
                        mdb_cursor_close(cur);
                        break;
                }
                if (rc) {
                        mdb_cursor_close(cur);
                        return sg_txn_lmdb_err(t, rc, "expiry cursor", errstr,
                                               errstr_size);
                }
                unsigned char ek[SG_TP_MAX + 64];
                memcpy(ek, key.mv_data, key.mv_size);
                size_t eklen = key.mv_size;
                mdb_cursor_close(cur);
                int64_t exp = (int64_t)get_u64(ek + tp->len);
                if (exp > now_ms)
                        break;
                const unsigned char *kh = ek + tp->len + 8;
                sg_err_t err =
                        sg_db_del(t, DB_EXPIRY, ek, eklen, errstr, errstr_size);
                if (err)
                        return err;
                sg_dedup_rec_t rec;
                err = sg_dedup_get(t, tp, kh, &rec);
                if (err == SG_ERR_NOT_FOUND)
                        continue;
                if (err)
                        return err;
                if (rec.expiry_ms != exp)
                        continue; /* stale index entry */
                if (rec.verdict == SG_DV_PARKED) {
                        /* still parked: re-arm (the old index entry is
                         * already gone, so index as new) */
                        rec.expiry_ms = now_ms + ttl_ms;
                        if ((err = sg_dedup_put_known(t, tp, kh, &rec, NULL,
                                                      errstr, errstr_size)))
                                return err;
                        continue;
                }
                unsigned char k[SG_TP_MAX + 64];
                size_t klen = key2(k, tp, kh, 32, NULL, 0);
                if ((err = sg_db_del(t, DB_DEDUP, k, klen, errstr,
                                     errstr_size)))
                        return err;
                removed++;
        }
        *removedp = removed;
        return SG_OK;
}

sg_err_t sg_parked_first(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char ah[32], uint64_t *versionp,
                         sg_parked_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t plen = key2(k, tp, ah, 32, NULL, 0);
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, DB_PARKED, &cur);
        if (rc)
                return cursor_err(t, DB_PARKED, rc);
        MDB_val key = {plen, k}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        sg_err_t err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == plen + 8 &&
            memcmp(key.mv_data, k, plen) == 0) {
                *versionp = get_u64((const unsigned char *)key.mv_data + plen);
                err = out ? parked_decode(t, &val, out) : SG_OK;
        } else if (rc && rc != MDB_NOTFOUND) {
                err = cursor_err(t, DB_PARKED, rc);
        }
        mdb_cursor_close(cur);
        return err;
}

/* ---- gap deadline and snapshot due indexes ---------------------------- */

/* The first entry of a time index (tp | ms (BE) | agg hash) due at or before
 * @p upto_ms: the gap deadline index and the snapshot due index. */
static sg_err_t time_index_first(sg_txn_t *t, int db, const sg_tp_t *tp,
                                 int64_t upto_ms, unsigned char ah_out[32],
                                 int64_t *msp) {
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, db, &cur);
        if (rc)
                return cursor_err(t, db, rc);
        MDB_val key = {tp->len, (void *)tp->b}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        sg_err_t err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == tp->len + 40 &&
            memcmp(key.mv_data, tp->b, tp->len) == 0) {
                const unsigned char *p = key.mv_data;
                int64_t ms = (int64_t)get_u64(p + tp->len);
                if (ms <= upto_ms) {
                        memcpy(ah_out, p + tp->len + 8, 32);
                        *msp = ms;
                        err = SG_OK;
                }
        } else if (rc && rc != MDB_NOTFOUND) {
                err = cursor_err(t, db, rc);
        }
        mdb_cursor_close(cur);
        return err;
}

sg_err_t sg_since_first(sg_txn_t *t, const sg_tp_t *tp, int64_t upto_ms,
                        unsigned char ah_out[32], int64_t *sincep) {
        return time_index_first(t, DB_SINCE, tp, upto_ms, ah_out, sincep);
}

sg_err_t sg_since_count(sg_txn_t *t, const sg_tp_t *tp, int64_t before_ms,
                        uint64_t max, uint64_t *countp) {
        MDB_cursor *cur;
        *countp = 0;
        int rc = sg_lmdb_cursor_open(t, DB_SINCE, &cur);
        if (rc)
                return cursor_err(t, DB_SINCE, rc);
        MDB_val key = {tp->len, (void *)tp->b}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        while (rc == 0 && *countp < max && key.mv_size == tp->len + 40 &&
               memcmp(key.mv_data, tp->b, tp->len) == 0) {
                int64_t since = (int64_t)get_u64(
                        (const unsigned char *)key.mv_data + tp->len);
                if (since >= before_ms)
                        break;
                (*countp)++;
                rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
        }
        mdb_cursor_close(cur);
        return rc && rc != MDB_NOTFOUND ? cursor_err(t, DB_SINCE, rc) : SG_OK;
}

sg_err_t sg_snapdue_first(sg_txn_t *t, const sg_tp_t *tp, int64_t upto_ms,
                          unsigned char ah_out[32], int64_t *duep) {
        return time_index_first(t, DB_SNAPDUE, tp, upto_ms, ah_out, duep);
}

sg_err_t sg_store_partition_drop(sg_txn_t *t, const sg_tp_t *tp, char *errstr,
                                 size_t errstr_size) {
        for (int db = 0; db < DB__CNT; db++) {
                MDB_cursor *cur;
                int rc = sg_lmdb_cursor_open(t, db, &cur);
                if (rc)
                        return sg_txn_lmdb_err(t, rc, "drop", errstr,
                                               errstr_size);
                MDB_val key = {tp->len, (void *)tp->b}, val;
                rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
                while (rc == 0 && key.mv_size >= tp->len &&
                       memcmp(key.mv_data, tp->b, tp->len) == 0) {
                        if ((rc = sg_lmdb_cursor_del(t, cur)))
                                break;
                        rc = mdb_cursor_get(cur, &key, &val, MDB_GET_CURRENT);
                        if (rc == MDB_NOTFOUND || rc == EINVAL)
                                rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
                }
                mdb_cursor_close(cur);
                if (rc && rc != MDB_NOTFOUND)
                        return sg_txn_lmdb_err(t, rc, "drop", errstr,
                                               errstr_size);
        }
        return SG_OK;
}

sg_err_t sg_meta_foreach(sg_txn_t *t, sg_meta_visit_cb *cb, void *opaque) {
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, DB_META, &cur);
        if (rc)
                return cursor_err(t, DB_META, rc);
        MDB_val key, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                const unsigned char *k = key.mv_data;
                /* key = tp = topic hash | partition (BE); the topic is in
                 * the value, which must hash to the key */
                if (key.mv_size != SG_TP_LEN) {
                        err = sg_txn_fail(t, SG_ERR_STORE,
                                          "meta key of %zu bytes is not a "
                                          "partition",
                                          key.mv_size);
                        break;
                }
                sg_meta_rec_t rec;
                char why[160];
                if ((err = stored(t,
                                  sg_meta_decode(val.mv_data, val.mv_size, &rec,
                                                 why, sizeof(why)),
                                  why)))
                        break;
                int32_t partition = (int32_t)get_u32(k + 8);
                sg_tp_t tp;
                sg_tp_make(&tp, rec.topic, partition);
                if (memcmp(tp.b, k, SG_TP_LEN) != 0) {
                        err = sg_txn_fail(t, SG_ERR_STORE,
                                          "meta record of topic \"%s\" "
                                          "under another topic's key",
                                          rec.topic);
                        break;
                }
                const char *topic = rec.topic;
                if (cb(opaque, topic, partition, &rec))
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? cursor_err(t, DB_META, rc) : SG_OK;
}

/* Walks the keys tp | aggregate hash of database @p db (agg, snapreq) in
 * hash order, calling @p visit with each hash and value until it returns
 * non-zero (1: stop, SG_ERR_*: < 0, the walk's result). */
typedef int(agg_key_visit_fn)(void *ctx, const unsigned char ah[32],
                              const MDB_val *val);
static sg_err_t agg_keys_walk(sg_txn_t *t, int db, const sg_tp_t *tp,
                              agg_key_visit_fn *visit, void *ctx) {
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, db, &cur);
        if (rc)
                return cursor_err(t, db, rc);
        MDB_val key = {tp->len, (void *)tp->b}, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
             rc == 0 && key.mv_size >= tp->len &&
             memcmp(key.mv_data, tp->b, tp->len) == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                if (key.mv_size != tp->len + 32) {
                        err = sg_txn_fail(t, SG_ERR_STORE,
                                          "%s key of %zu bytes is not the "
                                          "partition's and a hash",
                                          db_name(db), key.mv_size);
                        break;
                }
                unsigned char ah[32];
                memcpy(ah, (const unsigned char *)key.mv_data + tp->len, 32);
                int r = visit(ctx, ah, &val);
                if (r < 0)
                        err = (sg_err_t)r;
                if (r)
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? cursor_err(t, db, rc) : SG_OK;
}

typedef struct agg_walk {
        sg_txn_t *t;
        const sg_tp_t *tp;
        sg_agg_visit_cb *agg_cb;
        sg_snapreq_visit_cb *req_cb;
        void *opaque;
} agg_walk_t;

static int agg_visit(void *ctx, const unsigned char ah[32],
                     const MDB_val *val) {
        agg_walk_t *w = ctx;
        sg_agg_rec_t rec;
        (void)val;
        sg_err_t err = sg_agg_get(w->t, w->tp, ah, &rec);
        if (err)
                return err;
        return w->agg_cb(w->opaque, ah, &rec) ? 1 : 0;
}

static int snapreq_visit(void *ctx, const unsigned char ah[32],
                         const MDB_val *val) {
        agg_walk_t *w = ctx;
        sg_snapreq_rec_t rec;
        char why[160];
        sg_err_t err = stored(w->t,
                              sg_snapreq_decode(val->mv_data, val->mv_size,
                                                &rec, why, sizeof(why)),
                              why);
        if (err)
                return err;
        return w->req_cb(w->opaque, ah, &rec) ? 1 : 0;
}

sg_err_t sg_agg_foreach(sg_txn_t *t, const sg_tp_t *tp, sg_agg_visit_cb *cb,
                        void *opaque) {
        agg_walk_t w = {.t = t, .tp = tp, .agg_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_AGG, tp, agg_visit, &w);
}

sg_err_t sg_snapreq_foreach(sg_txn_t *t, const sg_tp_t *tp,
                            sg_snapreq_visit_cb *cb, void *opaque) {
        agg_walk_t w = {.t = t, .tp = tp, .req_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_SNAPREQ, tp, snapreq_visit, &w);
}

static int oldest_visit(void *opaque, uint64_t version,
                        const sg_parked_rec_t *rec) {
        int64_t *oldest = opaque;
        (void)version;
        if (*oldest == 0 || rec->parked_at_ms < *oldest)
                *oldest = rec->parked_at_ms;
        return 0;
}

sg_err_t sg_parked_oldest(sg_txn_t *t, const sg_tp_t *tp,
                          const unsigned char ah[32], int64_t *oldestp) {
        *oldestp = 0;
        return sg_parked_foreach(t, tp, ah, oldest_visit, oldestp);
}

/* Walks the parked events of aggregate @p ah of @p tp, or of every
 * aggregate of @p tp when @p ah is NULL, in key order; @p cb gets each
 * event's aggregate hash too. */
typedef int(parked_walk_cb)(void *opaque, const unsigned char ah[32],
                            uint64_t version, const sg_parked_rec_t *rec);

static sg_err_t parked_walk(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char *ah, parked_walk_cb *cb,
                            void *opaque) {
        unsigned char k[SG_TP_MAX + 64];
        size_t plen = key2(k, tp, ah, ah ? 32 : 0, NULL, 0);
        size_t klen = tp->len + 32 + 8; /* tp | agg hash | version */
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, DB_PARKED, &cur);
        if (rc)
                return cursor_err(t, DB_PARKED, rc);
        MDB_val key = {plen, k}, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
             rc == 0 && key.mv_size == klen &&
             memcmp(key.mv_data, k, plen) == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                sg_parked_rec_t rec;
                if ((err = parked_decode(t, &val, &rec)))
                        break;
                const unsigned char *kp = key.mv_data;
                if (cb(opaque, kp + tp->len, get_u64(kp + tp->len + 32), &rec))
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? cursor_err(t, DB_PARKED, rc) : SG_OK;
}

typedef struct one_agg {
        sg_parked_visit_cb *cb;
        void *opaque;
} one_agg_t;

static int one_agg_visit(void *opaque, const unsigned char ah[32],
                         uint64_t version, const sg_parked_rec_t *rec) {
        (void)ah;
        one_agg_t *o = opaque;
        return o->cb(o->opaque, version, rec);
}

sg_err_t sg_parked_foreach(sg_txn_t *t, const sg_tp_t *tp,
                           const unsigned char ah[32], sg_parked_visit_cb *cb,
                           void *opaque) {
        one_agg_t o = {cb, opaque};
        return parked_walk(t, tp, ah, one_agg_visit, &o);
}

typedef struct key_find {
        const unsigned char *kh;
        unsigned char *ah;
        uint64_t *versionp;
        sg_parked_rec_t *out;
        bool found;
} key_find_t;

static int key_find_visit(void *opaque, const unsigned char ah[32],
                          uint64_t version, const sg_parked_rec_t *rec) {
        key_find_t *f = opaque;
        if (memcmp(rec->key_hash, f->kh, 32) != 0)
                return 0;
        memcpy(f->ah, ah, 32);
        *f->versionp = version;
        *f->out = *rec;
        f->found = true;
        return 1;
}

sg_err_t sg_parked_find_key(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char key_hash[32],
                            unsigned char agg_hash_out[32], uint64_t *versionp,
                            sg_parked_rec_t *out) {
        key_find_t f = {key_hash, agg_hash_out, versionp, out, false};
        sg_err_t err = parked_walk(t, tp, NULL, key_find_visit, &f);
        if (err)
                return err;
        return f.found ? SG_OK : SG_ERR_NOT_FOUND;
}

sg_err_t sg_store_foreach(sg_txn_t *t, sg_store_visit_cb *cb, void *opaque,
                          char *errstr, size_t errstr_size) {
        for (int db = 0; db < DB__CNT; db++) {
                MDB_cursor *cur;
                int rc = sg_lmdb_cursor_open(t, db, &cur);
                if (rc)
                        return sg_txn_lmdb_err(t, rc, db_name(db), errstr,
                                               errstr_size);
                MDB_val key, val;
                bool stopped = false;
                for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
                     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                        if (cb(opaque, db, key.mv_data, key.mv_size,
                               val.mv_data, val.mv_size)) {
                                stopped = true;
                                break;
                        }
                }
                mdb_cursor_close(cur);
                if (stopped)
                        return SG_OK;
                if (rc != MDB_NOTFOUND)
                        return sg_txn_lmdb_err(t, rc, db_name(db), errstr,
                                               errstr_size);
        }
        return SG_OK;
}
