/*
 * store_seg_merge.c — a partition's dedup segments over time (store_seg.c
 * has their states and invariants): the compaction jobs that seal a
 * FROZEN segment or merge SEALED ones of a bucket, in bounded steps, and
 * expiry by whole buckets with the changelog's tombstones (semantics §3
 * "Expiry"), both driven by sg_dedup_sweep once a batch.
 */
#include "store_seg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- compaction jobs -------------------------------------------------------- */

/* Empties segment @p g's database and forgets the segment. */
static sg_err_t seg_drop(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g) {
        int rc;
        MDB_dbi dbi = sg_seg_dbi(t, p, g, false, &rc);
        if (!rc && dbi)
                rc = sg_lmdb_drop(t, dbi);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "dedup segment drop", NULL, 0);
        unsigned char fk[SG_TP_LEN + 4];
        sg_seg_filter_key(p, g->id, fk);
        sg_err_t err = g->fblocks ? sg_db_del(t, DB_DEDUP, t->store->filter_dbi,
                                              fk, sizeof(fk), NULL, 0)
                                  : SG_OK;
        if (!err)
                err = sg_seg_rec_del(t, p, g->id);
        if (!err)
                sg_seg_remove(st, g);
        return err;
}

static sg_err_t job_start(sg_txn_t *t, pdb_t *p, segtab_t *st,
                          const uint32_t *ids, int n) {
        uint64_t keys = 0;
        int level = 0;
        seg_t *first = sg_seg_by_id(st, ids[0]);
        int64_t bucket = first->bucket, base = first->base_ms,
                ttl = first->ttl_ms;
        for (int i = 0; i < n; i++) {
                seg_t *g = sg_seg_by_id(st, ids[i]);
                keys += sg_seg_entries(t, p, g);
                if (g->level + (n > 1) > level)
                        level = g->level + (n > 1);
                if (g->base_ms < base)
                        base = g->base_ms;
        }
        seg_t *d;
        sg_err_t err = sg_seg_new(t, p, st, bucket, SEG_TARGET, base, ttl, &d);
        if (err)
                return err;
        d->level = (uint8_t)level;
        st->job_dst = d->id;
        st->job_nsrc = n;
        memcpy(st->job_src, ids, (size_t)n * sizeof(*ids));
        st->job_pos_set = false;
        st->job_fblocks = sg_seg_filter_blocks(keys);
        free(st->job_filter);
        if (!(st->job_filter = calloc(st->job_fblocks, FILTER_BLOCK)))
                return SG_ERR_NOMEM;
        if ((err = sg_seg_rec_put(t, p, d)))
                return err;
        return sg_seg_hdr_put(t, p, st);
}

static sg_err_t job_cancel(sg_txn_t *t, pdb_t *p, segtab_t *st) {
        seg_t *d = sg_seg_by_id(st, st->job_dst);
        sg_err_t err = d ? seg_drop(t, p, st, d) : SG_OK;
        free(st->job_filter);
        st->job_filter = NULL;
        st->job_dst = 0;
        st->job_nsrc = 0;
        st->job_pos_set = false;
        return err ? err : sg_seg_hdr_put(t, p, st);
}

static sg_err_t job_finish(sg_txn_t *t, pdb_t *p, segtab_t *st) {
        uint32_t src[JOB_SRC_MAX];
        int n = st->job_nsrc;
        memcpy(src, st->job_src, sizeof(src));
        seg_t *d = sg_seg_by_id(st, st->job_dst);
        unsigned char fk[SG_TP_LEN + 4];
        sg_seg_filter_key(p, d->id, fk);
        sg_err_t err = sg_db_put(t, DB_DEDUP, t->store->filter_dbi, fk,
                                 sizeof(fk), st->job_filter,
                                 st->job_fblocks * FILTER_BLOCK, NULL, 0);
        if (err)
                return err;
        d->state = SEG_SEALED;
        d->fblocks = st->job_fblocks;
        d->filter = st->job_filter;
        st->job_filter = NULL;
        if ((err = sg_seg_rec_put(t, p, d)))
                return err;
        st->job_dst = 0;
        st->job_nsrc = 0;
        st->job_pos_set = false;
        for (int i = 0; !err && i < n; i++) {
                seg_t *g = sg_seg_by_id(st, src[i]);
                if (g)
                        err = seg_drop(t, p, st, g);
        }
        return err ? err : sg_seg_hdr_put(t, p, st);
}

/* Copies up to *budget keys of the job's sources into its target, in key
 * order (MDB_APPEND: full pages), re-encoded on the target's time base;
 * *budget is lowered by the keys copied, *donep set when all are. */
static sg_err_t job_step(sg_txn_t *t, pdb_t *p, segtab_t *st, uint64_t *budget,
                         bool *donep) {
        *donep = false;
        seg_t *d = sg_seg_by_id(st, st->job_dst);
        if (!d)
                return sg_seg_corrupt_table(t, "a job without its target");
        seg_t dst = *d; /* the table does not change below */
        kwalk_t w;
        sg_err_t err =
                sg_seg_kwalk_open(t, p, st, st->job_src, st->job_nsrc,
                                  st->job_pos_set ? st->job_pos : NULL, &w);
        if (err)
                return err;
        int rc;
        MDB_dbi ddbi = sg_seg_dbi(t, p, &dst, true, &rc);
        MDB_cursor *dc = NULL;
        if (!rc && ddbi)
                rc = sg_lmdb_cursor_open(t, ddbi, &dc);
        int m = -1;
        while (!rc && *budget > 0 && (m = sg_seg_kwalk_min(&w)) >= 0) {
                const seg_t *g = sg_seg_by_id(st, w.id[m]);
                MDB_val k = w.k[m], v = w.v[m];
                unsigned char nv[DEDUP_SVLEN_MAX];
                if (g->base_ms != dst.base_ms || g->ttl_ms != dst.ttl_ms) {
                        sg_dedup_rec_t r;
                        if ((err = sg_seg_decode(t, g, &v, &r)))
                                break;
                        v = (MDB_val){sg_dedup_seg_encode(&r, dst.base_ms,
                                                          dst.ttl_ms, nv),
                                      nv};
                }
                if (k.mv_size != HL) {
                        err = sg_seg_corrupt_table(t, "a dedup key's length");
                        break;
                }
                memcpy(st->job_pos, k.mv_data, HL);
                st->job_pos_set = true;
                sg_seg_filter_add(st->job_filter, st->job_fblocks, st->job_pos);
                MDB_val kk = {HL, st->job_pos};
                if ((rc = sg_lmdb_cursor_put(t, dc, &kk, &v, MDB_APPEND)))
                        break;
                (*budget)--;
                rc = sg_seg_kwalk_next(&w, m);
        }
        if (dc)
                mdb_cursor_close(dc);
        bool done = !rc && !err && sg_seg_kwalk_min(&w) < 0;
        sg_seg_kwalk_close(&w);
        if (err)
                return err;
        if (rc)
                return sg_txn_lmdb_err(t, rc, "dedup compaction", NULL, 0);
        if (done) {
                *donep = true;
                return job_finish(t, p, st);
        }
        return sg_seg_hdr_put(t, p, st);
}

/* The oldest frozen segment not in a bucket below @p expired, and with it
 * the other frozen segments of its bucket (up to JOB_SRC_MAX): in @p ids,
 * *np of them; one seal writes them into one sealed segment, each key
 * copied once as when sealed apart (a restore leaves a bucket's keys in
 * several full frozen segments, which sealed apart would take merges
 * after). false: none. */
static bool frozen_pick(const segtab_t *st, int64_t expired, uint32_t *ids,
                        int *np) {
        int n = 0;
        int64_t bucket = 0;
        for (int i = st->cnt - 1; i >= 0 && n < JOB_SRC_MAX; i--) {
                const seg_t *g = &st->seg[i];
                if (g->state == SEG_FROZEN && g->bucket >= expired &&
                    (!n || g->bucket == bucket)) {
                        bucket = g->bucket;
                        ids[n++] = g->id;
                }
        }
        *np = n;
        return n > 0;
}

/* Whether the job in progress seals (a source is frozen) rather than
 * merges sealed segments. */
static bool job_seals(const segtab_t *st) {
        for (int i = 0; i < st->job_nsrc; i++)
                for (int j = 0; j < st->cnt; j++)
                        if (st->seg[j].id == st->job_src[i] &&
                            st->seg[j].state == SEG_FROZEN)
                                return true;
        return false;
}

/* Picks the next job: the oldest frozen segments' seal; else four sealed
 * segments of one bucket and level; else the sealed segments of a past
 * bucket (up to four, smallest level first); never in a bucket below
 * @p expired (its end has passed: it is walked and dropped). false:
 * nothing to do. */
static bool job_pick(const segtab_t *st, int64_t cur_bucket, int64_t expired,
                     uint32_t *ids, int *np) {
        if (frozen_pick(st, expired, ids, np))
                return true;
        for (int pass = 0; pass < 2; pass++) {
                for (int i = st->cnt - 1; i >= 0; i--) {
                        const seg_t *a = &st->seg[i];
                        if (a->state != SEG_SEALED || a->bucket < expired ||
                            (pass == 1 && a->bucket >= cur_bucket))
                                continue;
                        int n = 0;
                        for (int lv = 0; lv < 256 && n < JOB_SRC_MAX; lv++) {
                                for (int j = st->cnt - 1; j >= 0; j--) {
                                        const seg_t *b = &st->seg[j];
                                        if (b->state == SEG_SEALED &&
                                            b->bucket == a->bucket &&
                                            (pass == 1
                                                     ? b->level == lv
                                                     : b->level == a->level) &&
                                            n < JOB_SRC_MAX)
                                                ids[n++] = b->id;
                                }
                                if (pass == 0)
                                        break;
                        }
                        if (n >= (pass == 0 ? JOB_SRC_MAX : 2)) {
                                *np = n;
                                return true;
                        }
                }
        }
        return false;
}

/* ---- expiry ------------------------------------------------------------- */

/* Walks the oldest expired bucket's segments: up to @p max keys get their
 * tombstones (PARKED ones move to bucket of @p now + @p ttl); a segment
 * walked to its end is emptied. */
static sg_err_t walk_step(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t now,
                          int64_t ttl, int max, int *removedp, char *errstr,
                          size_t errstr_size) {
        seg_t *w = NULL;
        for (int i = 0; i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                if (g->state == SEG_TARGET ||
                    (g->bucket + 1) * st->width_ms > now)
                        continue;
                /* the oldest bucket; in it the walk's segment, else its
                 * oldest */
                if (!w || g->bucket < w->bucket ||
                    (g->bucket == w->bucket &&
                     (g->id == st->walk_seg ||
                      (w->id != st->walk_seg && g->id < w->id))))
                        w = g;
        }
        if (!w)
                return SG_OK;
        uint32_t wid = w->id;
        sg_err_t err;
        const seg_t *d = st->job_dst ? sg_seg_by_id(st, st->job_dst) : NULL;
        if (d && d->bucket == w->bucket) {
                /* a job on an expired bucket is work thrown away */
                if ((err = job_cancel(t, p, st)))
                        return err;
        }
        if (st->walk_seg != wid) {
                st->walk_seg = wid;
                st->walk_pos_set = false;
        }
        int n = 0;
        bool done = false;
        while (n < max && !done) {
                kwalk_t kw;
                if ((err = sg_seg_kwalk_open(
                             t, p, st, &wid, 1,
                             st->walk_pos_set ? st->walk_pos : NULL, &kw)))
                        return err;
                w = sg_seg_by_id(st, wid);
                sg_dedup_rec_t r;
                bool carry = false;
                int rc = 0;
                while (n < max && sg_seg_kwalk_min(&kw) == 0) {
                        MDB_val v = kw.v[0];
                        if (kw.k[0].mv_size != HL) {
                                err = sg_seg_corrupt_table(
                                        t, "a dedup key's length");
                                break;
                        }
                        memcpy(st->walk_pos, kw.k[0].mv_data, HL);
                        st->walk_pos_set = true;
                        n++;
                        if ((err = sg_seg_decode(t, w, &v, &r)))
                                break;
                        if (r.verdict == SG_DV_PARKED) {
                                /* still waiting: the key stays (semantics
                                 * §3), moved to the current bucket */
                                rc = sg_lmdb_cursor_del(t, kw.cur[0]);
                                carry = !rc;
                                break;
                        }
                        if ((err = sg_seg_dedup_capture(
                                     t, p, st->walk_pos, NULL,
                                     r.v2 ? r.v2_tail : NULL)))
                                break;
                        (*removedp)++;
                        if ((rc = sg_seg_kwalk_next(&kw, 0)))
                                break;
                }
                done = !err && !rc && !carry && sg_seg_kwalk_min(&kw) < 0;
                sg_seg_kwalk_close(&kw);
                if (rc)
                        return sg_txn_lmdb_err(t, rc, "dedup segment", errstr,
                                               errstr_size);
                if (err)
                        return err;
                if (carry) {
                        sg_dedup_rec_t old = r, nr = r;
                        old._seg = 0; /* gone from the walked segment */
                        nr.expiry_ms = now + ttl;
                        unsigned char kh[32] = {0}; /* its rest: old's */
                        memcpy(kh, st->walk_pos, HL);
                        if ((err = sg_seg_dedup_write_p(t, p, st, kh, &nr, &old,
                                                        true, errstr,
                                                        errstr_size)))
                                return err;
                }
                if (!done && n >= max)
                        break;
        }
        if (done) {
                if ((err = seg_drop(t, p, st, sg_seg_by_id(st, wid))))
                        return err;
                st->walk_seg = 0;
                st->walk_pos_set = false;
        }
        return sg_seg_hdr_put(t, p, st);
}

/* Freezes the open segments that are full, or whose bucket new keys
 * (bucket @p cur) have left. */
static sg_err_t freeze_full(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t cur) {
        for (int i = 0; i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                if (g->state == SEG_OPEN &&
                    (g->bucket < cur ||
                     sg_seg_entries(t, p, g) >= t->store->seg_keys)) {
                        g->state = SEG_FROZEN;
                        sg_err_t err = sg_seg_rec_put(t, p, g);
                        if (err)
                                return err;
                }
        }
        return SG_OK;
}

static sg_err_t dedup_sweep(sg_txn_t *t, const sg_tp_t *tp, int64_t now,
                            int64_t ttl, int max, int *removedp, char *errstr,
                            size_t errstr_size) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (!p)
                return rc ? sg_txn_lmdb_err(t, rc, "dedup", errstr, errstr_size)
                          : SG_OK;
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err || (!st->cnt && !st->job_dst))
                return err;
        if ((err = sg_seg_width_set(t, p, st, ttl)))
                return err;
        st->ttl_ms = ttl;
        int64_t cur = sg_seg_bucket_of(st, now + ttl);
        if ((err = freeze_full(t, p, st, cur)))
                return err;
        /* sealing and merging: about four times the keys written since
         * (a key is copied about four times: sealed, then merged up to
         * three levels), and a sixteenth of the frozen keys waiting (a
         * restore's), at most SEAL_STEP_MAX of those a sweep. Merges in a
         * bucket before the current one (it takes no new key: the merge
         * only saves lookups a filter probe) get at most the keys written
         * since, while at most half the slots are in use: a restore can
         * leave a past bucket in several sealed segments, and merging
         * them at four times the pace cost a 10 M-key store's first
         * million events 0.44 CPU-s on the loop's thread
         * (docs/benchmarks.md) */
        uint64_t base = max > 0 ? 4 * (uint64_t)max : 4000;
        uint64_t budget = 4 * st->written > base ? 4 * st->written : base;
        uint64_t past = st->written > base / 4 ? st->written : base / 4;
        uint64_t frozen = 0;
        for (int i = 0; i < st->cnt; i++)
                if (st->seg[i].state == SEG_FROZEN)
                        frozen += sg_seg_entries(t, p, &st->seg[i]);
        frozen /= 16;
        if (frozen > SEAL_STEP_MAX)
                frozen = SEAL_STEP_MAX;
        if (frozen > budget)
                budget = frozen;
        st->written = 0;
        while (budget > 0) {
                uint32_t ids[JOB_SRC_MAX];
                int n;
                if (!st->job_dst) {
                        if (!job_pick(st, cur, now / st->width_ms, ids, &n))
                                break;
                        if ((err = job_start(t, p, st, ids, n)))
                                return err;
                }
                const seg_t *d = sg_seg_by_id(st, st->job_dst);
                /* (not while slots are scarce: the current bucket's
                 * segments and merges need free ones) */
                bool paced = st->job_nsrc > 1 && d && d->bucket < cur &&
                             st->cnt <= SEG_SLOTS / 2 && !job_seals(st);
                uint64_t b = paced && past < budget ? past : budget;
                uint64_t b0 = b;
                bool done;
                if ((err = job_step(t, p, st, &b, &done)))
                        return err;
                budget -= b0 - b;
                if (paced)
                        past -= b0 - b;
                if (!done)
                        break;
        }
        return walk_step(t, p, st, now, ttl, max, removedp, errstr,
                         errstr_size);
}

sg_err_t sg_dedup_sweep(sg_txn_t *t, const sg_tp_t *tp, int64_t now,
                        int64_t ttl, int max, int *removedp, char *errstr,
                        size_t errstr_size) {
        *removedp = 0;
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return sg_seg_with_detail(t,
                                  dedup_sweep(t, tp, now, ttl, max, removedp,
                                              errstr, errstr_size),
                                  errstr, errstr_size);
}

/* store.h sg_dedup_seal: the sweep's freezing, then the job in progress
 * and the seals of every frozen segment, up to @p max_keys keys copied. */
static sg_err_t dedup_seal(sg_txn_t *t, const sg_tp_t *tp, int64_t now,
                           int64_t ttl, uint64_t max_keys, bool *donep) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (!p) {
                *donep = !rc;
                return rc ? sg_txn_lmdb_err(t, rc, "dedup", NULL, 0) : SG_OK;
        }
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err || (!st->cnt && !st->job_dst)) {
                *donep = !err;
                return err;
        }
        if ((err = sg_seg_width_set(t, p, st, ttl)))
                return err;
        st->ttl_ms = ttl;
        if ((err = freeze_full(t, p, st, sg_seg_bucket_of(st, now + ttl))))
                return err;
        uint64_t budget = max_keys;
        while (budget > 0) {
                if (!st->job_dst) {
                        uint32_t ids[JOB_SRC_MAX];
                        int n;
                        if (!frozen_pick(st, now / st->width_ms, ids, &n)) {
                                *donep = true;
                                break;
                        }
                        if ((err = job_start(t, p, st, ids, n)))
                                return err;
                }
                bool done;
                if ((err = job_step(t, p, st, &budget, &done)))
                        return err;
                if (!done)
                        break;
        }
        return SG_OK;
}

sg_err_t sg_dedup_seal(sg_txn_t *t, const sg_tp_t *tp, int64_t now, int64_t ttl,
                       uint64_t max_keys, bool *donep, char *errstr,
                       size_t errstr_size) {
        *donep = false;
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return sg_seg_with_detail(t,
                                  dedup_seal(t, tp, now, ttl, max_keys, donep),
                                  errstr, errstr_size);
}
