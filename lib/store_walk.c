/*
 * store_walk.c — the store's cursor walks over a partition's aux and agg
 * databases: the first entry of the since and snapdue time indexes, the
 * lowest parked version, the foreach walks of operator tools and gauges,
 * the partition's drop, the void parked events of a restore, and the
 * whole-store dump and statistics. (The dedup segments' walks are
 * store_seg.c's.)
 */
#include "store_int.h"

#include <errno.h>
#include <stdlib.h>

/* An LMDB error @p rc of a cursor on kind @p db: SG_ERR_MAP_FULL when the
 * map filled, else SG_ERR_STORE; the detail in @p t. */
static sg_err_t cursor_err(sg_txn_t *t, int db, int rc) {
        return sg_txn_fail(
                t,
                rc == MDB_MAP_FULL || rc == MDB_TXN_FULL ? SG_ERR_MAP_FULL
                                                         : SG_ERR_STORE,
                "LMDB %s cursor: %s", sg_store_db_names[db], mdb_strerror(rc));
}

/* The partition's databases for a walk: NULL when it has none (nothing to
 * walk: *errp SG_OK) or on an error (*errp set). */
static pdb_t *walk_pdb(sg_txn_t *t, const sg_tp_t *tp, sg_err_t *errp) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        *errp = p || !rc ? SG_OK
                         : sg_txn_lmdb_err(t, rc, "partition databases", NULL,
                                           0);
        return p;
}

/* A cursor on @p dbi; *curp NULL (and SG_OK) when a reader's snapshot
 * predates the database. */
static sg_err_t walk_cursor(sg_txn_t *t, int db, MDB_dbi dbi,
                            MDB_cursor **curp) {
        *curp = NULL;
        if (!dbi)
                return SG_OK;
        int rc = sg_lmdb_cursor_open(t, dbi, curp);
        if (rc && !t->write && lmdb_no_db(rc))
                return SG_OK;
        return rc ? cursor_err(t, db, rc) : SG_OK;
}

/* The first entry at or after @p k (klen bytes) of @p cur whose key starts with
 * @p pre (plen bytes): 0 and *key, *val; MDB_NOTFOUND; or an LMDB code. */
static int first_with(MDB_cursor *cur, const void *k, size_t klen,
                      const void *pre, size_t plen, MDB_val *key,
                      MDB_val *val) {
        *key = (MDB_val){klen, (void *)k};
        int rc = mdb_cursor_get(cur, key, val, MDB_SET_RANGE);
        if (rc == 0 &&
            (key->mv_size < plen || memcmp(key->mv_data, pre, plen) != 0))
                rc = MDB_NOTFOUND;
        return rc;
}

sg_err_t sg_parked_first(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char ah[32], uint64_t *versionp,
                         sg_parked_rec_t *out) {
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        MDB_cursor *cur;
        if (!p || (err = walk_cursor(t, DB_PARKED, p->aux, &cur)) || !cur)
                return err ? err : SG_ERR_NOT_FOUND;
        unsigned char k[1 + HL];
        k[0] = AUX_PARKED;
        memcpy(k + 1, ah, HL);
        MDB_val key, val;
        int rc = first_with(cur, k, sizeof(k), k, sizeof(k), &key, &val);
        err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == sizeof(k) + 8) {
                *versionp =
                        get_u64((const unsigned char *)key.mv_data + sizeof(k));
                err = out ? parked_decode(t, &val, out) : SG_OK;
        } else if (rc && rc != MDB_NOTFOUND) {
                err = cursor_err(t, DB_PARKED, rc);
        }
        mdb_cursor_close(cur);
        return err;
}

/* ---- gap deadline and snapshot due indexes ---------------------------- */

/* The first entry of a time index (kind | ms (BE) | agg hash) due at or
 * before @p upto_ms: the gap deadline index and the snapshot due index.
 * @p ah_out gets the hash (its last 16 bytes 0). */
static sg_err_t time_index_first(sg_txn_t *t, int db, int kind,
                                 const sg_tp_t *tp, int64_t upto_ms,
                                 unsigned char ah_out[32], int64_t *msp) {
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        MDB_cursor *cur;
        if (!p || (err = walk_cursor(t, db, p->aux, &cur)) || !cur)
                return err ? err : SG_ERR_NOT_FOUND;
        unsigned char k = (unsigned char)kind;
        MDB_val key, val;
        int rc = first_with(cur, &k, 1, &k, 1, &key, &val);
        err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == 1 + 8 + HL) {
                const unsigned char *q = key.mv_data;
                int64_t ms = (int64_t)get_u64(q + 1);
                if (ms <= upto_ms) {
                        memset(ah_out, 0, 32);
                        memcpy(ah_out, q + 9, HL);
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
        return time_index_first(t, DB_SINCE, AUX_SINCE, tp, upto_ms, ah_out,
                                sincep);
}

sg_err_t sg_since_count(sg_txn_t *t, const sg_tp_t *tp, int64_t before_ms,
                        uint64_t max, uint64_t *countp) {
        *countp = 0;
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        MDB_cursor *cur;
        if (!p || (err = walk_cursor(t, DB_SINCE, p->aux, &cur)) || !cur)
                return err;
        unsigned char k = AUX_SINCE;
        MDB_val key, val;
        int rc = first_with(cur, &k, 1, &k, 1, &key, &val);
        while (rc == 0 && *countp < max && key.mv_size == 1 + 8 + HL &&
               ((const unsigned char *)key.mv_data)[0] == AUX_SINCE) {
                int64_t since = (int64_t)get_u64(
                        (const unsigned char *)key.mv_data + 1);
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
        return time_index_first(t, DB_SNAPDUE, AUX_SNAPDUE, tp, upto_ms, ah_out,
                                duep);
}

sg_err_t sg_store_partition_drop(sg_txn_t *t, const sg_tp_t *tp, char *errstr,
                                 size_t errstr_size) {
        int rc;
        /* the aggregate cache: its other partitions' writes kept, then
         * everything forgotten, this partition's included (store_aggc.c) */
        sg_err_t err = sg_aggc_flush(t);
        sg_aggc_clear(t->store);
        if (err) {
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                return err;
        }
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (p) {
                /* emptied, not deleted: the handles stay (store_parts.c) */
                if (!(err = sg_seg_drop_all(t, p))) {
                        if (p->agg && (rc = sg_lmdb_drop(t, p->agg)))
                                err = sg_txn_lmdb_err(t, rc, "drop", errstr,
                                                      errstr_size);
                        else if (p->aux && (rc = sg_lmdb_drop(t, p->aux)))
                                err = sg_txn_lmdb_err(t, rc, "drop", errstr,
                                                      errstr_size);
                }
        } else if (rc) {
                err = sg_txn_lmdb_err(t, rc, "drop", errstr, errstr_size);
        }
        if (err) {
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                return err;
        }
        return sg_db_del(t, DB_META, t->store->meta_dbi, tp->b, tp->len, errstr,
                         errstr_size);
}

sg_err_t sg_meta_foreach(sg_txn_t *t, sg_meta_visit_cb *cb, void *opaque) {
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, t->store->meta_dbi, &cur);
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

/* Walks the keys [kind |] agg hash of @p dbi (agg: no kind byte, @p kind
 * -1; snapreq: AUX_SNAPREQ) in hash order, calling @p visit with each hash
 * (its last 16 bytes 0) and value until it returns non-zero (1: stop,
 * SG_ERR_*: < 0, the walk's result). */
typedef int(agg_key_visit_fn)(void *ctx, const unsigned char ah[32],
                              const MDB_val *val);
static sg_err_t agg_keys_walk(sg_txn_t *t, int db, MDB_dbi dbi, int kind,
                              agg_key_visit_fn *visit, void *ctx) {
        MDB_cursor *cur;
        /* a walk of an aggregate database sees the cached writes
         * (store_aggc.c) */
        sg_err_t err = db == DB_AGG ? sg_aggc_flush(t) : SG_OK;
        if (!err)
                err = walk_cursor(t, db, dbi, &cur);
        if (err || !cur)
                return err;
        unsigned char k = (unsigned char)kind;
        size_t pl = kind < 0 ? 0 : 1;
        MDB_val key, val;
        int rc = pl ? first_with(cur, &k, 1, &k, 1, &key, &val)
                    : mdb_cursor_get(cur, &key, &val, MDB_FIRST);
        for (; rc == 0 && (!pl || ((const unsigned char *)key.mv_data)[0] == k);
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                if (key.mv_size != pl + HL) {
                        err = sg_txn_fail(t, SG_ERR_STORE,
                                          "%s key of %zu bytes is not a hash",
                                          sg_store_db_names[db], key.mv_size);
                        break;
                }
                unsigned char ah[32] = {0};
                memcpy(ah, (const unsigned char *)key.mv_data + pl, HL);
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
        char why[160];
        sg_err_t err = stored(w->t,
                              sg_agg_decode(val->mv_data, val->mv_size, &rec,
                                            why, sizeof(why)),
                              why);
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
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        if (!p)
                return err;
        agg_walk_t w = {.t = t, .tp = tp, .agg_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_AGG, p->agg, -1, agg_visit, &w);
}

sg_err_t sg_snapreq_foreach(sg_txn_t *t, const sg_tp_t *tp,
                            sg_snapreq_visit_cb *cb, void *opaque) {
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        if (!p)
                return err;
        agg_walk_t w = {.t = t, .tp = tp, .req_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_SNAPREQ, p->aux, AUX_SNAPREQ, snapreq_visit,
                             &w);
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
 * event's aggregate hash too (its last 16 bytes 0). */
typedef int(parked_walk_cb)(void *opaque, const unsigned char ah[32],
                            uint64_t version, const sg_parked_rec_t *rec);

static sg_err_t parked_walk(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char *ah, parked_walk_cb *cb,
                            void *opaque) {
        sg_err_t err;
        pdb_t *p = walk_pdb(t, tp, &err);
        MDB_cursor *cur;
        if (!p || (err = walk_cursor(t, DB_PARKED, p->aux, &cur)) || !cur)
                return err;
        unsigned char k[1 + HL];
        k[0] = AUX_PARKED;
        size_t plen = 1;
        if (ah) {
                memcpy(k + 1, ah, HL);
                plen += HL;
        }
        MDB_val key, val;
        int rc;
        for (rc = first_with(cur, k, plen, k, plen, &key, &val);
             rc == 0 && key.mv_size == 1 + HL + 8 &&
             memcmp(key.mv_data, k, plen) == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                sg_parked_rec_t rec;
                if ((err = parked_decode(t, &val, &rec)))
                        break;
                const unsigned char *kp = key.mv_data;
                unsigned char h[32] = {0};
                memcpy(h, kp + 1, HL);
                if (cb(opaque, h, get_u64(kp + 1 + HL), &rec))
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
        if (memcmp(rec->key_hash, f->kh, HL) != 0)
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

/* ---- the restore's void parked events ------------------------------------ */

typedef struct void_walk {
        sg_txn_t *t;
        const sg_tp_t *tp;
        unsigned char (*keys)[HL + 8];
        size_t cnt, cap;
        sg_err_t err;
} void_walk_t;

static int void_visit(void *opaque, const unsigned char ah[32],
                      uint64_t version, const sg_parked_rec_t *rec) {
        void_walk_t *w = opaque;
        (void)rec;
        sg_agg_rec_t a;
        sg_err_t err = sg_agg_get(w->t, w->tp, ah, &a);
        if (err && err != SG_ERR_NOT_FOUND) {
                w->err = err;
                return 1;
        }
        if (err || !a.has_last || version > a.last_version)
                return 0;
        if (w->cnt == w->cap) {
                size_t n = w->cap ? 2 * w->cap : 16;
                void *nk = realloc(w->keys, n * sizeof(*w->keys));
                if (!nk) {
                        w->err = SG_ERR_NOMEM;
                        return 1;
                }
                w->keys = nk;
                w->cap = n;
        }
        memcpy(w->keys[w->cnt], ah, HL);
        put_u64(w->keys[w->cnt] + HL, version);
        w->cnt++;
        return 0;
}

sg_err_t sg_parked_void(sg_txn_t *t, const sg_tp_t *tp, uint64_t *voidedp,
                        char *errstr, size_t errstr_size) {
        *voidedp = 0;
        void_walk_t w = {.t = t, .tp = tp};
        sg_err_t err = parked_walk(t, tp, NULL, void_visit, &w);
        if (!err)
                err = w.err;
        int rc;
        pdb_t *p = err ? NULL : sg_pdb_get(t, tp, false, &rc);
        for (size_t i = 0; !err && p && i < w.cnt; i++) {
                unsigned char k[1 + HL + 8];
                k[0] = AUX_PARKED;
                memcpy(k + 1, w.keys[i], HL + 8);
                err = sg_db_del(t, DB_PARKED, p->aux, k, sizeof(k), errstr,
                                errstr_size);
                if (!err)
                        (*voidedp)++;
        }
        free(w.keys);
        return err;
}

/* ---- the whole store ----------------------------------------------------- */

/* Calls @p fn for every partition that has databases in the store (their
 * names in LMDB's main database, "p<24 hex>.x": store_parts.c), in
 * the order of their prefixes, until it sets *stopp or fails. */
typedef sg_err_t(part_visit_fn)(void *ctx, pdb_t *p, bool *stopp);

static sg_err_t parts_foreach(sg_txn_t *t, part_visit_fn *fn, void *ctx) {
        MDB_cursor *cur;
        int rc = mdb_cursor_open(t->txn, 1 /* the main database */, &cur);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "partition list", NULL, 0);
        MDB_val key = {1, (void *)"p"}, val;
        sg_err_t err = SG_OK;
        bool stop = false;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
             rc == 0 && !err && !stop;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                const char *n = key.mv_data;
                if (key.mv_size < 1 || n[0] != 'p')
                        break;
                sg_tp_t tp;
                memset(&tp, 0, sizeof(tp));
                tp.len = SG_TP_LEN;
                if (!sg_pdb_name_parse(key.mv_data, key.mv_size, tp.b))
                        continue;
                int prc;
                pdb_t *p = sg_pdb_get(t, &tp, false, &prc);
                if (!p) {
                        if (prc)
                                err = sg_txn_lmdb_err(
                                        t, prc, "partition databases", NULL, 0);
                        continue;
                }
                err = fn(ctx, p, &stop);
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND
                       ? sg_txn_lmdb_err(t, rc, "partition list", NULL, 0)
                       : SG_OK;
}

typedef struct dump {
        sg_txn_t *t;
        sg_store_visit_cb *cb;
        void *opaque;
        int kind; /* the pass: DB_* */
} dump_t;

/* One partition's entries of the pass's kind, keys as store.h names them
 * (tp | the key without its aux kind byte). */
static sg_err_t dump_part(void *ctx, pdb_t *p, bool *stopp) {
        dump_t *d = ctx;
        sg_txn_t *t = d->t;
        if (d->kind == DB_DEDUP)
                return sg_seg_foreach(t, p, d->cb, d->opaque, stopp);
        MDB_dbi dbi = d->kind == DB_AGG ? p->agg : p->aux;
        int akind = d->kind == DB_PARKED    ? AUX_PARKED
                    : d->kind == DB_SINCE   ? AUX_SINCE
                    : d->kind == DB_SNAPREQ ? AUX_SNAPREQ
                    : d->kind == DB_SNAPDUE ? AUX_SNAPDUE
                                            : -1;
        MDB_cursor *cur;
        sg_err_t err = walk_cursor(t, d->kind, dbi, &cur);
        if (err || !cur)
                return err;
        unsigned char ak = (unsigned char)akind;
        size_t pl = akind < 0 ? 0 : 1;
        MDB_val key, val;
        int rc = pl ? first_with(cur, &ak, 1, &ak, 1, &key, &val)
                    : mdb_cursor_get(cur, &key, &val, MDB_FIRST);
        for (; rc == 0 && (!pl || ((unsigned char *)key.mv_data)[0] == ak);
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                unsigned char k[SG_TP_LEN + 64];
                size_t kl = key.mv_size - pl;
                if (kl > 64)
                        continue;
                memcpy(k, p->tp, SG_TP_LEN);
                memcpy(k + SG_TP_LEN, (unsigned char *)key.mv_data + pl, kl);
                if (d->cb(d->opaque, d->kind, k, SG_TP_LEN + kl, val.mv_data,
                          val.mv_size)) {
                        *stopp = true;
                        break;
                }
        }
        mdb_cursor_close(cur);
        return rc && rc != MDB_NOTFOUND ? cursor_err(t, d->kind, rc) : SG_OK;
}

sg_err_t sg_store_foreach(sg_txn_t *t, sg_store_visit_cb *cb, void *opaque,
                          char *errstr, size_t errstr_size) {
        static const int kinds[] = {DB_DEDUP, DB_AGG,     DB_PARKED,
                                    DB_SINCE, DB_SNAPREQ, DB_SNAPDUE};
        dump_t d = {.t = t, .cb = cb, .opaque = opaque};
        /* the aggregate cache's writes first (store_aggc.c) */
        sg_err_t ferr = sg_aggc_flush(t);
        if (ferr) {
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                return ferr;
        }
        /* meta first in key order, then each kind, partition by
         * partition */
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, t->store->meta_dbi, &cur);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "meta", errstr, errstr_size);
        MDB_val key, val;
        bool stopped = false;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
                if (cb(opaque, DB_META, key.mv_data, key.mv_size, val.mv_data,
                       val.mv_size)) {
                        stopped = true;
                        break;
                }
        mdb_cursor_close(cur);
        if (stopped)
                return SG_OK;
        if (rc != MDB_NOTFOUND)
                return sg_txn_lmdb_err(t, rc, "meta", errstr, errstr_size);
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                d.kind = kinds[i];
                sg_err_t err = parts_foreach(t, dump_part, &d);
                if (err) {
                        sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                        return err;
                }
        }
        return SG_OK;
}

typedef struct stats {
        sg_txn_t *t;
        sg_db_stat_t *out;
} stats_t;

static void stat_add(sg_db_stat_t *o, sg_txn_t *t, MDB_dbi dbi) {
        MDB_stat ms;
        if (!dbi || mdb_stat(t->txn, dbi, &ms))
                return;
        o->entries += ms.ms_entries;
        o->pages +=
                ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages;
        o->page_size = ms.ms_psize;
}

static sg_err_t stats_part(void *ctx, pdb_t *p, bool *stopp) {
        stats_t *s = ctx;
        (void)stopp;
        stat_add(&s->out[SG_STAT_AGG], s->t, p->agg);
        stat_add(&s->out[SG_STAT_STATE], s->t, p->aux);
        uint64_t psize = 0;
        sg_err_t err = sg_seg_stats(s->t, p, &s->out[SG_STAT_DEDUP].entries,
                                    &s->out[SG_STAT_DEDUP].pages, &psize);
        if (psize)
                s->out[SG_STAT_DEDUP].page_size = psize;
        return err;
}

sg_err_t sg_store_db_stats(sg_txn_t *t, sg_db_stat_t *out, char *errstr,
                           size_t errstr_size) {
        static const char *const names[SG_STORE_DB_CNT] = {
                "dedup", "filter", "agg", "state", "meta"};
        MDB_stat ms;
        /* the aggregate cache's writes counted (store_aggc.c) */
        sg_err_t ferr = sg_aggc_flush(t);
        if (ferr) {
                sg_errf(errstr, errstr_size, "database statistics: %s",
                        sg_txn_errdetail(t));
                return ferr;
        }
        int rc = mdb_env_stat(t->store->env, &ms);
        for (int i = 0; i < SG_STORE_DB_CNT; i++)
                out[i] = (sg_db_stat_t){.name = names[i],
                                        .page_size = rc ? 4096 : ms.ms_psize};
        stat_add(&out[SG_STAT_FILTER], t, t->store->filter_dbi);
        stat_add(&out[SG_STAT_META], t, t->store->meta_dbi);
        stats_t s = {t, out};
        sg_err_t err = parts_foreach(t, stats_part, &s);
        if (err)
                sg_errf(errstr, errstr_size, "database statistics: %s",
                        sg_txn_errdetail(t));
        return err;
}
