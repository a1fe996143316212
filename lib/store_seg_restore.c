/*
 * store_seg_restore.c — a partition's dedup records restored from its
 * changelog into their segments (store_seg.c has their states and
 * invariants): one record (sg_dedup_restore, a tombstone under a store
 * format 2 key taking only a record that may have come from it), or a
 * window's records (sg_dedup_restore_many, store_batch.c's flush): put
 * in (bucket, key) order and written into each bucket's open segment (a
 * full one frozen first when a long run follows), the window's own filter
 * (sg_rfilter_*) sparing the lookups of keys it did not write.
 */
#include "store_seg_int.h"

#include <stdlib.h>

/* ---- restore of one record (store.h sg_dedup_restore) --------------- */

static sg_err_t dedup_restore(sg_txn_t *t, const sg_tp_t *tp,
                              const unsigned char *kh,
                              const sg_dedup_rec_t *rec, bool v2key,
                              char *errstr, size_t errstr_size) {
        sg_dedup_rec_t old;
        sg_err_t err = sg_dedup_get(t, tp, kh, &old);
        if (err && err != SG_ERR_NOT_FOUND)
                return err;
        bool had = err == SG_OK;
        if (rec)
                return sg_seg_dedup_write(t, tp, kh, rec, had ? &old : NULL,
                                          false, errstr, errstr_size);
        /* a tombstone under a format 2 key removes only a record that may
         * have come from it (its writer tombstones both keys when the key
         * goes, and the old one before it writes the new) */
        if (!had || (v2key && !old.v2))
                return SG_OK;
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        segtab_t *st;
        if (!p)
                return sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND, "dedup",
                                       errstr, errstr_size);
        if ((err = sg_segtab_get(t, p, &st)))
                return err;
        seg_t *g = sg_seg_by_id(st, old._seg);
        return g ? sg_seg_del(t, p, st, g, kh, errstr, errstr_size) : SG_OK;
}

sg_err_t sg_dedup_restore(sg_txn_t *t, const sg_tp_t *tp,
                          const unsigned char *kh, const sg_dedup_rec_t *rec,
                          bool v2key, char *errstr, size_t errstr_size) {
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return sg_seg_with_detail(
                t, dedup_restore(t, tp, kh, rec, v2key, errstr, errstr_size),
                errstr, errstr_size);
}

/* ---- restore in windows (store_batch.c) --------------------------------- */

void sg_rfilter_init(rfilter_t *rf, uint64_t keys) {
        free(rf->bits);
        memset(rf, 0, sizeof(*rf));
        /* 8 bits a key (~2 % false positives: each costs the probes of a
         * lookup); at least 1 MiB, at most 256 MiB */
        uint64_t bytes = keys;
        if (bytes < (1u << 20))
                bytes = 1u << 20;
        if (bytes > ((uint64_t)256 << 20))
                bytes = (uint64_t)256 << 20;
        rf->nblocks = bytes / FILTER_BLOCK;
        rf->bits = calloc(rf->nblocks, FILTER_BLOCK);
        if (!rf->bits)
                rf->nblocks = 0;
}

void sg_rfilter_free(rfilter_t *rf) {
        free(rf->bits);
        memset(rf, 0, sizeof(*rf));
}

void sg_rfilter_add(rfilter_t *rf, const unsigned char *kh) {
        if (rf->bits)
                sg_seg_filter_add(rf->bits, rf->nblocks, kh);
}

/* Whether key @p kh may have been written by this restore (no filter: it
 * may). */
static bool rf_maybe(const rfilter_t *rf, const unsigned char *kh) {
        return !rf->bits ||
               sg_seg_filter_block_maybe(
                       sg_seg_filter_block(rf->bits, rf->nblocks, kh), kh);
}

static int ditem_cmp(const void *x, const void *y) {
        const dedup_item_t *a = *(dedup_item_t *const *)x,
                           *b = *(dedup_item_t *const *)y;
        if (a->bucket != b->bucket)
                return a->bucket < b->bucket ? -1 : 1;
        return memcmp(a->kh, b->kh, HL);
}

/* Keys of a bucket a restore window must bring for restore_freeze to
 * start a segment for them, and the slots it leaves free. */
#define RESTORE_FREEZE_MIN 4096
#define RESTORE_FREEZE_SLOTS_FREE 16
/* Frozen segments at most (a lookup probes each until it is sealed) */
#define RESTORE_FROZEN_MAX 8

/* A restore window's new keys of one bucket (@p ins from @p i on, while
 * the bucket lasts) that cannot be appended to the bucket's open segment
 * @p g: when @p g is full (it holds seg_keys, as a sweep would freeze it)
 * and the run is long, @p g is frozen now, so that the keys go to a new
 * open segment in key order (MDB_APPEND, full pages) instead of landing
 * at random over @p g's pages (every window rewrote most of them: ~30 %
 * of a restore's CPU). Never when fewer than RESTORE_FREEZE_SLOTS_FREE
 * slots would stay free, nor past RESTORE_FROZEN_MAX frozen segments (a
 * lookup probes each, without a filter, until a sweep has sealed it): a
 * long restore then inserts as before. The sweeps seal the frozen
 * segments afterwards, as they do a full open one. true: frozen. */
static bool restore_freeze(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g,
                           dedup_item_t **ins, size_t i, size_t n,
                           sg_err_t *errp) {
        size_t j = i;
        while (j < n && j - i < RESTORE_FREEZE_MIN &&
               ins[j]->bucket == ins[i]->bucket)
                j++;
        int frozen = 0;
        for (int k = 0; k < st->cnt; k++)
                frozen += st->seg[k].state == SEG_FROZEN;
        if (g->state != SEG_OPEN || g->bucket != ins[i]->bucket ||
            j - i < RESTORE_FREEZE_MIN || frozen >= RESTORE_FROZEN_MAX ||
            st->cnt + RESTORE_FREEZE_SLOTS_FREE >= SEG_SLOTS ||
            sg_seg_entries(t, p, g) < t->store->seg_keys)
                return false;
        g->state = SEG_FROZEN;
        if ((*errp = sg_seg_rec_put(t, p, g)))
                return false;
        return true;
}

/* Puts @p ins (in key order, as the window's items are) in (bucket, key)
 * order as ditem_cmp would, by a stable pass over its few buckets instead
 * of a qsort (which was ~6 % of a restore's CPU). false when it cannot
 * (more than 64 buckets, or no memory): the caller qsort()s. */
static bool by_bucket(dedup_item_t **ins, size_t n) {
        enum { MAXB = 64 };
        int64_t bk[MAXB];
        size_t cnt[MAXB] = {0}, nb = 0;
        bool sorted = true;
        for (size_t i = 0; i < n; i++) {
                size_t k = 0;
                while (k < nb && bk[k] != ins[i]->bucket)
                        k++;
                if (k == nb) {
                        if (nb == MAXB)
                                return false;
                        bk[nb++] = ins[i]->bucket;
                }
                cnt[k]++;
                sorted &= i == 0 || ins[i - 1]->bucket <= ins[i]->bucket;
        }
        if (sorted)
                return true; /* one bucket (the usual window), or ordered */
        dedup_item_t **tmp = malloc(n * sizeof(*tmp));
        if (!tmp)
                return false;
        /* each bucket's start: buckets in ascending order */
        size_t start[MAXB];
        for (size_t k = 0; k < nb; k++) {
                start[k] = 0;
                for (size_t m = 0; m < nb; m++)
                        if (bk[m] < bk[k])
                                start[k] += cnt[m];
        }
        for (size_t i = 0; i < n; i++) {
                size_t k = 0;
                while (bk[k] != ins[i]->bucket)
                        k++;
                tmp[start[k]++] = ins[i];
        }
        memcpy(ins, tmp, n * sizeof(*ins));
        free(tmp);
        return true;
}

sg_err_t sg_dedup_restore_many(sg_txn_t *t, const sg_tp_t *tp,
                               dedup_item_t *items, size_t n, rfilter_t *rf,
                               char *errstr, size_t errstr_size) {
        if (!n)
                return SG_OK;
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, true, &rc);
        if (!p)
                return sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND, "dedup",
                                       errstr, errstr_size);
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        if (!rf->first_set) {
                rf->first_id = st->next_id;
                rf->first_set = true;
        }
        dedup_item_t **ins = malloc(n * sizeof(*ins));
        if (!ins)
                return SG_ERR_NOMEM;
        size_t ni = 0;
        /* 1: each key where it is (in key order: the probes walk each
         * segment's B-tree forward) */
        for (size_t i = 0; !err && i < n; i++) {
                dedup_item_t *it = &items[i];
                seg_t *g = NULL;
                MDB_val v;
                /* the restore's own segments only when its filter says
                 * the key may be in them */
                uint32_t below = rf_maybe(rf, it->kh) ? 0 : rf->first_id;
                err = sg_seg_find_below(t, p, st, it->kh, below, &g, &v);
                sg_dedup_rec_t old;
                bool had = err == SG_OK;
                if (err == SG_ERR_NOT_FOUND)
                        err = SG_OK;
                if (!err && had)
                        err = sg_seg_decode(t, g, &v, &old);
                if (err)
                        break;
                if (it->tomb) {
                        /* a tombstone under a format 2 key removes only a
                         * record that may have come from it (store.h) */
                        if (had && (!it->v2key || old.v2))
                                err = sg_seg_del(t, p, st, g, it->kh, errstr,
                                                 errstr_size);
                        continue;
                }
                if (!err)
                        err = sg_seg_width_set(t, p, st,
                                               it->rec.expiry_ms -
                                                       it->rec.first_seen_ms);
                if (err)
                        break;
                if (had && old.v2 && !it->rec.v2) {
                        it->rec.v2 = true;
                        memcpy(it->rec.v2_tail, old.v2_tail, 16);
                }
                it->bucket = sg_seg_bucket_of(st, it->rec.expiry_ms);
                if (had && g->bucket == it->bucket) {
                        err = sg_seg_put(t, p, st, g, it->kh, &it->rec, errstr,
                                         errstr_size);
                        continue;
                }
                if (had && (err = sg_seg_del(t, p, st, g, it->kh, errstr,
                                             errstr_size)))
                        break;
                ins[ni++] = it;
        }
        /* 2: the new keys, bucket by bucket in key order: appended to an
         * open segment's end when they sort after its last key */
        if (!err && ni > 1 && !by_bucket(ins, ni))
                qsort(ins, ni, sizeof(*ins), ditem_cmp);
        MDB_cursor *cur = NULL;
        seg_t *g = NULL;
        uint32_t gid = 0;
        unsigned char last[HL];
        bool append = false;
        for (size_t i = 0; !err && i < ni; i++) {
                dedup_item_t *it = ins[i];
                for (bool frozen = false; !g || g->bucket != it->bucket;) {
                        if (cur)
                                mdb_cursor_close(cur);
                        cur = NULL;
                        if ((err = sg_seg_open_for(t, p, st, &it->rec, &g)))
                                break;
                        gid = g->id;
                        MDB_dbi dbi = sg_seg_dbi(t, p, g, true, &rc);
                        if (!rc)
                                rc = sg_lmdb_cursor_open(t, dbi, &cur);
                        MDB_val k, v;
                        int r2 =
                                rc ? rc : mdb_cursor_get(cur, &k, &v, MDB_LAST);
                        if (!rc && r2 && r2 != MDB_NOTFOUND)
                                rc = r2;
                        if (rc) {
                                err = sg_txn_lmdb_err(t, rc, "dedup segment",
                                                      errstr, errstr_size);
                                break;
                        }
                        append = r2 == MDB_NOTFOUND ||
                                 (k.mv_size == HL &&
                                  memcmp(k.mv_data, it->kh, HL) < 0);
                        if (!r2)
                                memcpy(last, k.mv_data, HL);
                        if (!append && !frozen &&
                            (frozen = restore_freeze(t, p, st, g, ins, i, ni,
                                                     &err))) {
                                /* then a new open segment for the
                                 * bucket: the keys appended to it */
                                g = NULL;
                                continue;
                        }
                        break;
                }
                if (err)
                        break;
                g = sg_seg_by_id(st, gid);
                if (append && i > 0 && ins[i - 1]->bucket == it->bucket &&
                    memcmp(last, it->kh, HL) >= 0)
                        append = false;
                unsigned char sv[DEDUP_SVLEN_MAX];
                MDB_val k = {HL, it->kh},
                        v = {sg_dedup_seg_encode(&it->rec, g->base_ms,
                                                 g->ttl_ms, sv),
                             sv};
                rc = sg_lmdb_cursor_put(t, cur, &k, &v,
                                        append ? MDB_APPEND : 0);
                if (rc == MDB_KEYEXIST && append) {
                        append = false;
                        rc = sg_lmdb_cursor_put(t, cur, &k, &v, 0);
                }
                if (rc) {
                        err = sg_txn_lmdb_err(t, rc, "dedup segment", errstr,
                                              errstr_size);
                        break;
                }
                memcpy(last, it->kh, HL);
        }
        if (cur)
                mdb_cursor_close(cur);
        for (size_t i = 0; !err && rf->bits && i < n; i++)
                if (!items[i].tomb)
                        sg_seg_filter_add(rf->bits, rf->nblocks, items[i].kh);
        free(ins);
        return sg_seg_with_detail(t, err, errstr, errstr_size);
}
