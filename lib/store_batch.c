/*
 * store_batch.c — restore in windows (store.h sg_store_batch_*): a
 * changelog window's dedup and aggregate records held in memory, the last
 * of each key kept, then written in key order (dedup records by expiry
 * bucket into their segments, aggregates with their since index) in one
 * flush. Restoring a record at a time is store_records.c's
 * sg_store_apply_change, which this one's key check and errors follow.
 */
#include "store_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A dedup or aggregate record held in a batch. */
typedef struct batch_rec {
        unsigned char hash[HL]; /* key or aggregate hash */
        unsigned char tail[16]; /* a format 2 key's last 16 bytes */
        unsigned char db;       /* DB_DEDUP or DB_AGG */
        bool tomb, v2key;
        uint32_t seq;      /* arrival order: the last of a key wins */
        size_t voff, vlen; /* the value, in bytes */
} batch_rec_t;

/* A since index entry to add or remove at the flush's end. */
typedef struct batch_idx {
        uint64_t ts;            /* ts_key(ms) */
        unsigned char hash[HL]; /* the aggregate */
        bool add;
} batch_idx_t;

/* A record's place in the flush's order (batch_sort): its key's first
 * and last 8 bytes, as big-endian integers, and its index (arrival). */
typedef struct batch_ord {
        uint64_t hi, lo;
        uint32_t idx;
} batch_ord_t; /* within one bucket: one database */

struct sg_store_batch {
        batch_rec_t *recs;
        size_t cnt, cap;
        size_t ndedup; /* of cnt, dedup records */
        /* ord2: the records' places in key order (batch_sort), read
         * through to recs (a sorted copy of the records would double the
         * window's largest array) */
        batch_ord_t *ord, *ord2;
        size_t ord_cap;
        uint32_t *bucket; /* BATCH_BUCKETS + 1 counters */
        unsigned char *bytes;
        size_t len, bcap;
        batch_idx_t *idx;
        size_t icnt, icap;
        dedup_item_t *items;
        size_t item_cap;
        rfilter_t rf; /* the dedup keys this restore wrote */
        uint64_t expect;
};

sg_err_t sg_store_batch_new(sg_store_batch_t **bp) {
        *bp = calloc(1, sizeof(**bp));
        return *bp ? SG_OK : SG_ERR_NOMEM;
}

void sg_store_batch_expect(sg_store_batch_t *b, uint64_t records) {
        b->expect = records;
}

void sg_store_batch_destroy(sg_store_batch_t *b) {
        if (!b)
                return;
        free(b->recs);
        free(b->ord);
        free(b->ord2);
        free(b->bucket);
        free(b->bytes);
        free(b->idx);
        free(b->items);
        sg_rfilter_free(&b->rf);
        free(b);
}

void sg_store_batch_clear(sg_store_batch_t *b) {
        b->cnt = b->len = b->icnt = b->ndedup = 0;
        /* the restore's transaction was aborted: what it wrote is gone */
        sg_rfilter_free(&b->rf);
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
        int hl = 0; /* set by sg_rec_key_check() on success */
        if ((db != DB_DEDUP && db != DB_AGG) ||
            sg_rec_key_check(db, suffix_len, &hl, NULL, 0))
                /* other kinds, and keys to refuse: at once */
                return sg_store_apply_change(t, tp, db, suffix, suffix_len,
                                             value, value_len, errstr,
                                             errstr_size);
        assert(!t->capture && "restore with change capture on");
        sg_err_t err;
        /* decoded (and refused) now; kept as the changelog's bytes */
        if (value && db == DB_DEDUP) {
                sg_dedup_rec_t nr;
                if ((err = sg_dedup_decode(value, value_len, &nr, errstr,
                                           errstr_size)))
                        return err;
        } else if (value) {
                sg_agg_rec_t nr;
                if ((err = sg_agg_decode(value, value_len, &nr, errstr,
                                         errstr_size)))
                        return err;
        }
        size_t vlen = value ? value_len : 0;
        if (b->cnt >= UINT32_MAX ||
            !grow((void **)&b->recs, &b->cap, b->cnt + 1, sizeof(*b->recs)) ||
            !grow((void **)&b->bytes, &b->bcap, b->len + vlen, 1))
                return SG_ERR_NOMEM;
        batch_rec_t *r = &b->recs[b->cnt];
        memcpy(r->hash, suffix, HL);
        r->v2key = hl == SG_KEY_HASH_LEN_2;
        if (r->v2key)
                memcpy(r->tail, (const unsigned char *)suffix + HL, 16);
        r->db = (unsigned char)db;
        r->tomb = !value;
        r->seq = (uint32_t)b->cnt++;
        b->ndedup += db == DB_DEDUP;
        r->voff = b->len;
        r->vlen = vlen;
        if (vlen)
                memcpy(b->bytes + b->len, value, vlen);
        b->len += vlen;
        return SG_OK;
}

/* (hash, arrival), within a bucket (batch_sort: one database each). */
static int batch_ord_cmp(const void *x, const void *y) {
        const batch_ord_t *a = x, *c = y;
        if (a->hi != c->hi)
                return a->hi < c->hi ? -1 : 1;
        if (a->lo != c->lo)
                return a->lo < c->lo ? -1 : 1;
        return a->idx < c->idx ? -1 : a->idx > c->idx;
}

/* Buckets of the flush's sort: the database, then the key's first 16 bits
 * (SHA-256 prefixes: uniform, a few records a bucket at most windows'
 * sizes). */
#define BATCH_BUCKET_BITS 16
#define BATCH_BUCKETS (2u << BATCH_BUCKET_BITS)
#define BATCH_SMALL 24 /* a bucket insertion-sorted; a larger one qsort()s */

/* A record's bucket: DB_DEDUP's before DB_AGG's, then its first 16 key
 * bits. */
static size_t batch_bucket(const batch_rec_t *r) {
        return ((size_t)(r->db == DB_AGG) << BATCH_BUCKET_BITS) |
               ((size_t)r->hash[0] << 8 | r->hash[1]);
}

/* The window's records in key order (per database, then key, then
 * arrival: the last of a key last), as their indices in b->ord2, as a
 * qsort of b->recs by (db, hash, seq) would put them. One counting pass over the records'
 * first 16 key bits, then each bucket sorted on its own: insertion sort
 * when small, qsort when not (keys chosen to share a prefix cost no more
 * than a qsort). qsort of the 56-byte records was ~40 % of a restore's
 * CPU. false when out of memory. */
static bool batch_sort(sg_store_batch_t *b) {
        size_t n = b->cnt;
        if (n > b->ord_cap) {
                size_t c = b->ord_cap ? b->ord_cap : 1024;
                while (c < n)
                        c *= 2;
                batch_ord_t *o1 = realloc(b->ord, c * sizeof(*o1));
                if (o1)
                        b->ord = o1;
                batch_ord_t *o2 = o1 ? realloc(b->ord2, c * sizeof(*o2)) : NULL;
                if (o2)
                        b->ord2 = o2;
                if (!o1 || !o2)
                        return false;
                b->ord_cap = c;
        }
        if (!b->bucket &&
            !(b->bucket = malloc((BATCH_BUCKETS + 1) * sizeof(*b->bucket))))
                return false;
        uint32_t *cnt = b->bucket;
        memset(cnt, 0, (BATCH_BUCKETS + 1) * sizeof(*cnt));
        batch_ord_t *in = b->ord, *out = b->ord2;
        for (size_t i = 0; i < n; i++) {
                const batch_rec_t *r = &b->recs[i];
                in[i] = (batch_ord_t){get_u64(r->hash), get_u64(r->hash + 8),
                                      (uint32_t)i};
                cnt[batch_bucket(r) + 1]++;
        }
        for (size_t k = 1; k <= BATCH_BUCKETS; k++)
                cnt[k] += cnt[k - 1];
        /* in arrival order into each bucket: stable */
        for (size_t i = 0; i < n; i++)
                out[cnt[batch_bucket(&b->recs[i])]++] = in[i];
        /* cnt[k] is now bucket k's end */
        size_t start = 0;
        for (size_t k = 0; k < BATCH_BUCKETS; k++) {
                size_t end = cnt[k];
                if (end - start > BATCH_SMALL) {
                        qsort(out + start, end - start, sizeof(*out),
                              batch_ord_cmp);
                } else {
                        for (size_t i = start + 1; i < end; i++) {
                                batch_ord_t x = out[i];
                                size_t j = i;
                                while (j > start &&
                                       batch_ord_cmp(&out[j - 1], &x) > 0) {
                                        out[j] = out[j - 1];
                                        j--;
                                }
                                out[j] = x;
                        }
                }
                start = end;
        }
        return true;
}

static int batch_idx_cmp(const void *x, const void *y) {
        const batch_idx_t *a = x, *c = y;
        if (a->ts != c->ts)
                return a->ts < c->ts ? -1 : 1;
        return memcmp(a->hash, c->hash, HL);
}

/* Applies record @p r as sg_store_apply_change() does (the one-by-one
 * path of a key whose records in the window mix both formats). */
static sg_err_t batch_rec_apply(sg_store_batch_t *b, sg_txn_t *t,
                                const sg_tp_t *tp, const batch_rec_t *r,
                                char *errstr, size_t errstr_size) {
        unsigned char sx[SG_KEY_HASH_LEN_2];
        memcpy(sx, r->hash, HL);
        memcpy(sx + HL, r->tail, 16);
        return sg_store_apply_change(t, tp, r->db, sx,
                                     r->v2key ? SG_KEY_HASH_LEN_2 : HL,
                                     r->tomb ? NULL : b->bytes + r->voff,
                                     r->vlen, errstr, errstr_size);
}

static bool idx_queue(sg_store_batch_t *b, int64_t ms,
                      const unsigned char *hash, bool add) {
        if (!grow((void **)&b->idx, &b->icap, b->icnt + 1, sizeof(*b->idx)))
                return false;
        batch_idx_t *x = &b->idx[b->icnt++];
        x->ts = ts_key(ms);
        memcpy(x->hash, hash, HL);
        x->add = add;
        return true;
}

/* Writes the last record @p r of an aggregate through cursor @p cur,
 * queueing its since entries to remove and add. */
static sg_err_t batch_agg_apply(sg_store_batch_t *b, sg_txn_t *t,
                                MDB_cursor *cur, const batch_rec_t *r,
                                char *errstr, size_t errstr_size) {
        MDB_val key = {HL, (void *)r->hash}, val;
        sg_agg_rec_t old, nr;
        int64_t old_since = 0;
        bool had = false;
        char why[160];
        sg_err_t err;
        int rc = mdb_cursor_get(cur, &key, &val, MDB_SET);
        if (rc == 0) {
                had = true;
                if (sg_agg_decode(val.mv_data, val.mv_size, &old, why,
                                  sizeof(why)))
                        return sg_rec_stored_err(SG_ERR_STORE, "aggregate",
                                                 errstr, errstr_size);
                old_since = sg_agg_indexed_since(&old);
        } else if (rc != MDB_NOTFOUND) {
                return sg_txn_lmdb_err(t, rc, "agg", errstr, errstr_size);
        }
        if (r->tomb) {
                if (had && (rc = sg_lmdb_cursor_del(t, cur)))
                        return sg_txn_lmdb_err(t, rc, "agg", errstr,
                                               errstr_size);
                if (old_since && !idx_queue(b, old_since, r->hash, false))
                        return SG_ERR_NOMEM;
                return SG_OK;
        }
        if ((err = sg_agg_decode(b->bytes + r->voff, r->vlen, &nr, errstr,
                                 errstr_size)))
                return err;
        if (r->v2key) {
                nr.v2 = true;
                memcpy(nr.v2_tail, r->tail, 16);
        } else if (had && old.v2 && !nr.v2) {
                nr.v2 = true;
                memcpy(nr.v2_tail, old.v2_tail, 16);
        }
        /* stored in this format, whichever the record's */
        unsigned char v[SG_AGG_VALUE_MAX];
        val = (MDB_val){sg_agg_encode(&nr, v), v};
        key = (MDB_val){HL, (void *)r->hash};
        if ((rc = sg_lmdb_cursor_put(t, cur, &key, &val, 0)))
                return sg_txn_lmdb_err(t, rc, "agg", errstr, errstr_size);
        int64_t new_since = sg_agg_indexed_since(&nr);
        if (old_since != new_since) {
                if (old_since && !idx_queue(b, old_since, r->hash, false))
                        return SG_ERR_NOMEM;
                if (new_since && !idx_queue(b, new_since, r->hash, true))
                        return SG_ERR_NOMEM;
        }
        return SG_OK;
}

/* Adds or removes the queued since entries, in their key order. */
static sg_err_t batch_idx_apply(sg_store_batch_t *b, sg_txn_t *t, pdb_t *p,
                                char *errstr, size_t errstr_size) {
        if (!b->icnt)
                return SG_OK;
        if (b->icnt > 1)
                qsort(b->idx, b->icnt, sizeof(*b->idx), batch_idx_cmp);
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, p->aux, &cur);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "since", errstr, errstr_size);
        for (size_t i = 0; !rc && i < b->icnt; i++) {
                const batch_idx_t *x = &b->idx[i];
                unsigned char ts[8], k[1 + 8 + HL];
                put_u64(ts, x->ts);
                MDB_val key = {sg_rec_akey(k, AUX_SINCE, ts, 8, x->hash, HL),
                               k},
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
        mdb_cursor_close(cur);
        return rc ? sg_txn_lmdb_err(t, rc, "since", errstr, errstr_size)
                  : SG_OK;
}

sg_err_t sg_store_batch_flush(sg_store_batch_t *b, sg_txn_t *t,
                              const sg_tp_t *tp, char *errstr,
                              size_t errstr_size) {
        sg_err_t err = SG_OK;
        if (!b->cnt)
                return SG_OK;
        /* the window writes the aggregates through its own cursor, past
         * the writer's aggregate cache: that writes back and forgets
         * first, and forgets again after (store_aggc.c) */
        if ((err = sg_aggc_flush(t))) {
                sg_store_batch_clear(b);
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
                return err;
        }
        sg_aggc_clear(t->store);
        if (!b->rf.bits)
                sg_rfilter_init(&b->rf, b->expect);
        pdb_t *p = sg_rec_pdb_for(t, tp, true, &err);
        if (!p || !batch_sort(b) ||
            !grow((void **)&b->items, &b->item_cap, b->ndedup,
                  sizeof(*b->items))) {
                sg_store_batch_clear(b);
                return p ? SG_ERR_NOMEM : err;
        }
        const batch_ord_t *O = b->ord2; /* in key order */
#define R(i) (b->recs[O[i].idx])
        MDB_cursor *acur = NULL;
        size_t ni = 0;
        for (size_t i = 0; !err && i < b->cnt;) {
                /* the key's records in the window: i .. j - 1 */
                size_t j = i + 1;
                bool mixed = false;
                while (j < b->cnt && R(j).db == R(i).db &&
                       !memcmp(R(j).hash, R(i).hash, HL)) {
                        mixed |= R(j).v2key != R(i).v2key;
                        j++;
                }
                const batch_rec_t *r = &R(j - 1);
                if (mixed) {
                        /* both formats: each applies (a tombstone of one
                         * must not take the other's record) */
                        for (size_t k = i; !err && k < j; k++)
                                err = batch_rec_apply(b, t, tp, &R(k), errstr,
                                                      errstr_size);
                        if (!err && r->db == DB_DEDUP && b->rf.bits)
                                sg_rfilter_add(&b->rf, r->hash);
                } else if (r->db == DB_DEDUP) {
                        dedup_item_t *it = &b->items[ni++];
                        memset(it, 0, sizeof(*it));
                        memcpy(it->kh, r->hash, HL);
                        it->tomb = r->tomb;
                        it->v2key = r->v2key;
                        if (!r->tomb &&
                            !(err = sg_dedup_decode(b->bytes + r->voff, r->vlen,
                                                    &it->rec, errstr,
                                                    errstr_size)) &&
                            r->v2key) {
                                it->rec.v2 = true;
                                memcpy(it->rec.v2_tail, r->tail, 16);
                        }
                } else {
                        int rc = acur ? 0
                                      : sg_lmdb_cursor_open(t, p->agg, &acur);
                        err = rc ? sg_txn_lmdb_err(t, rc, "agg", errstr,
                                                   errstr_size)
                                 : batch_agg_apply(b, t, acur, r, errstr,
                                                   errstr_size);
                }
                i = j;
        }
#undef R
        if (acur)
                mdb_cursor_close(acur);
        if (!err)
                err = sg_dedup_restore_many(t, tp, b->items, ni, &b->rf, errstr,
                                            errstr_size);
        if (!err)
                err = batch_idx_apply(b, t, p, errstr, errstr_size);
        if (!err && (err = sg_aggc_flush(t)))
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
        sg_aggc_clear(t->store);
        b->cnt = b->len = b->icnt = b->ndedup = 0;
        if (err)
                sg_store_batch_clear(b);
        return err;
}
