/*
 * store_seg.c — a partition's dedup records in time segments (store.h
 * "Dedup segments"; semantics §3 "Expiry"), the layout of Kafka Streams'
 * segmented window stores.
 *
 * A segment is one LMDB database (a slot of the partition, store_parts.c)
 * holding the keys whose expiry falls in one bucket [b·W, (b+1)·W) of the
 * partition's bucket width W (its dedup TTL / SG_DEDUP_BUCKETS). Its
 * states:
 *   OPEN    takes new keys of its bucket (at most one per bucket); random
 *           inserts, so its pages are about two thirds full, but it is
 *           small (SG_SEG_KEYS_DEFAULT keys) and its pages stay hot
 *   FROZEN  full (or its bucket past): takes no new key, waits to be sealed
 *   SEALED  written in key order with MDB_APPEND (full pages) with a
 *           blocked Bloom filter of 2 bytes a key
 *   TARGET  being written by a compaction job; invisible to lookups
 * A compaction job copies its sources (up to four FROZEN segments of a
 * bucket: a seal; or up to four SEALED ones of a bucket: a merge) into a
 * TARGET in key order, a
 * bounded number of keys each sweep (once a batch), building its filter;
 * when done the TARGET is SEALED and the sources are emptied. A key of a
 * source updated or deleted after the job copied it is updated or deleted
 * in the TARGET too, so the TARGET is its sources when it takes over.
 *
 * Invariants: a key lives in one visible segment; a key's expiry lies in
 * its segment's bucket (a record whose expiry moves moves to the segment
 * of its new bucket), so a bucket whose end has passed holds only expired
 * keys and is dropped as a whole once walked for the changelog's
 * tombstones.
 *
 * The segment table (its records in the partition's aux database) is read
 * by every transaction from its own snapshot; the writer keeps a copy with
 * the sealed segments' filters in memory (pdb_t.segs), dropped when a write
 * transaction aborts (sg_pdb_txn_end). Readers other than the writer probe
 * every segment without filters (a filter only saves probes).
 */
#include "store_seg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

void sg_segtab_free(segtab_t *st) {
        if (!st)
                return;
        for (int i = 0; i < st->cnt; i++)
                free(st->seg[i].filter);
        free(st->job_filter);
        free(st);
}

/* ---- the blocked Bloom filter -------------------------------------------
 *
 * One 64-byte block per key (chosen by the key hash's first 4 bytes), in
 * which FILTER_K bits (9 bits of the hash each, from bytes 4..11) are set:
 * one cache line per probe. The key hashes are SHA-256 prefixes, uniform,
 * so no further hashing. 16 bits a key: about 0.2 % false positives
 * (test_store_seg measures it). A false positive costs a B-tree probe that
 * finds nothing; it never changes an answer. */

uint64_t sg_seg_filter_blocks(uint64_t keys) {
        uint64_t b = (keys * FILTER_BITS_PER_KEY + FILTER_BLOCK * 8 - 1) /
                     (FILTER_BLOCK * 8);
        return b ? b : 1;
}

unsigned char *sg_seg_filter_block(unsigned char *f, uint64_t nblocks,
                                   const unsigned char *kh) {
        uint64_t h = get_u32(kh);
        return f + ((h * nblocks) >> 32) * FILTER_BLOCK;
}

void sg_seg_filter_add(unsigned char *f, uint64_t nblocks,
                       const unsigned char *kh) {
        unsigned char *b = sg_seg_filter_block(f, nblocks, kh);
        uint64_t x = get_u64(kh + 4);
        for (int i = 0; i < FILTER_K; i++, x >>= 9) {
                unsigned bit = (unsigned)(x & 511);
                b[bit >> 3] |= (unsigned char)(1u << (bit & 7));
        }
}

bool sg_seg_filter_block_maybe(const unsigned char *b,
                               const unsigned char *kh) {
        uint64_t x = get_u64(kh + 4);
        for (int i = 0; i < FILTER_K; i++, x >>= 9) {
                unsigned bit = (unsigned)(x & 511);
                if (!(b[bit >> 3] & (1u << (bit & 7))))
                        return false;
        }
        return true;
}

/* ---- the segment table in the aux database -------------------------------
 *
 * 'h' → version u8 (1) | width i64 | next_id u32 | job_dst u32 |
 *       job_nsrc u8 | job_src u32 × 4 | job_pos_set u8 | job_pos 16 |
 *       job_fblocks u64 | walk_seg u32 | walk_pos_set u8 | walk_pos 16
 * 'g' | id (BE u32) → slot u8 | state u8 | level u8 | bucket i64 |
 *       base i64 | ttl i64 | fblocks u64
 * and in the shared filter database tp | id (BE u32) → the filter. */
#define HDR_LEN (1 + 8 + 4 + 4 + 1 + 4 * JOB_SRC_MAX + 1 + HL + 8 + 4 + 1 + HL)
#define SEGREC_LEN (3 + 8 + 8 + 8 + 8)

static void hdr_encode(const segtab_t *st, unsigned char *v) {
        size_t o = 0;
        v[o++] = 1;
        put_u64(v + o, (uint64_t)st->width_ms);
        o += 8;
        put_u32(v + o, st->next_id);
        o += 4;
        put_u32(v + o, st->job_dst);
        o += 4;
        v[o++] = (unsigned char)st->job_nsrc;
        for (int i = 0; i < JOB_SRC_MAX; i++, o += 4)
                put_u32(v + o, i < st->job_nsrc ? st->job_src[i] : 0);
        v[o++] = st->job_pos_set;
        memcpy(v + o, st->job_pos, HL);
        o += HL;
        put_u64(v + o, st->job_fblocks);
        o += 8;
        put_u32(v + o, st->walk_seg);
        o += 4;
        v[o++] = st->walk_pos_set;
        memcpy(v + o, st->walk_pos, HL);
}

static bool hdr_decode(segtab_t *st, const unsigned char *v, size_t len) {
        if (len != HDR_LEN || v[0] != 1)
                return false;
        size_t o = 1;
        st->width_ms = (int64_t)get_u64(v + o);
        o += 8;
        st->next_id = get_u32(v + o);
        o += 4;
        st->job_dst = get_u32(v + o);
        o += 4;
        st->job_nsrc = v[o++];
        if (st->job_nsrc > JOB_SRC_MAX || st->width_ms < 0)
                return false;
        for (int i = 0; i < JOB_SRC_MAX; i++, o += 4)
                st->job_src[i] = get_u32(v + o);
        st->job_pos_set = v[o++] != 0;
        memcpy(st->job_pos, v + o, HL);
        o += HL;
        st->job_fblocks = get_u64(v + o);
        o += 8;
        st->walk_seg = get_u32(v + o);
        o += 4;
        st->walk_pos_set = v[o++] != 0;
        memcpy(st->walk_pos, v + o, HL);
        return true;
}

static void segrec_encode(const seg_t *g, unsigned char *v) {
        v[0] = g->slot;
        v[1] = g->state;
        v[2] = g->level;
        put_u64(v + 3, (uint64_t)g->bucket);
        put_u64(v + 11, (uint64_t)g->base_ms);
        put_u64(v + 19, (uint64_t)g->ttl_ms);
        put_u64(v + 27, g->fblocks);
}

static bool segrec_decode(seg_t *g, uint32_t id, const unsigned char *v,
                          size_t len) {
        if (len != SEGREC_LEN || v[0] >= SEG_SLOTS || v[1] < SEG_OPEN ||
            v[1] > SEG_TARGET)
                return false;
        memset(g, 0, sizeof(*g));
        g->id = id;
        g->slot = v[0];
        g->state = v[1];
        g->level = v[2];
        g->bucket = (int64_t)get_u64(v + 3);
        g->base_ms = (int64_t)get_u64(v + 11);
        g->ttl_ms = (int64_t)get_u64(v + 19);
        g->fblocks = get_u64(v + 27);
        return g->fblocks < (UINT64_C(1) << 40);
}

sg_err_t sg_seg_corrupt_table(sg_txn_t *t, const char *what) {
        return sg_txn_fail(t, SG_ERR_STORE, "corrupt dedup segment table: %s",
                           what);
}

sg_err_t sg_seg_hdr_put(sg_txn_t *t, pdb_t *p, const segtab_t *st) {
        unsigned char k = AUX_SEGHDR, v[HDR_LEN];
        hdr_encode(st, v);
        return sg_db_put(t, DB_DEDUP, p->aux, &k, 1, v, sizeof(v), NULL, 0);
}

sg_err_t sg_seg_rec_put(sg_txn_t *t, pdb_t *p, const seg_t *g) {
        unsigned char k[5], v[SEGREC_LEN];
        k[0] = AUX_SEG;
        put_u32(k + 1, g->id);
        segrec_encode(g, v);
        return sg_db_put(t, DB_DEDUP, p->aux, k, sizeof(k), v, sizeof(v), NULL,
                         0);
}

sg_err_t sg_seg_rec_del(sg_txn_t *t, pdb_t *p, uint32_t id) {
        unsigned char k[5];
        k[0] = AUX_SEG;
        put_u32(k + 1, id);
        return sg_db_del(t, DB_DEDUP, p->aux, k, sizeof(k), NULL, 0);
}

void sg_seg_filter_key(const pdb_t *p, uint32_t id, unsigned char *k) {
        memcpy(k, p->tp, SG_TP_LEN);
        put_u32(k + SG_TP_LEN, id);
}

seg_t *sg_seg_by_id(segtab_t *st, uint32_t id) {
        for (int i = 0; i < st->cnt; i++)
                if (st->seg[i].id == id)
                        return &st->seg[i];
        return NULL;
}

/* A segment's handle for reading: 0 (rc 0) when its database is not in
 * this transaction's view (a reader's snapshot before it existed). */
MDB_dbi sg_seg_dbi(sg_txn_t *t, pdb_t *p, const seg_t *g, bool create,
                   int *rcp) {
        return sg_pdb_slot(t, p, g->slot, create, rcp);
}

/* The keys a segment's database holds (mdb_stat: no walk). */
uint64_t sg_seg_entries(sg_txn_t *t, pdb_t *p, const seg_t *g) {
        int rc;
        MDB_dbi dbi = sg_seg_dbi(t, p, g, false, &rc);
        MDB_stat ms;
        if (!dbi || mdb_stat(t->txn, dbi, &ms))
                return 0;
        return ms.ms_entries;
}

/* Loads the job's in-memory filter from its target's keys (after the
 * writer's copy was dropped mid-job). */
static sg_err_t job_filter_rebuild(sg_txn_t *t, pdb_t *p, segtab_t *st) {
        seg_t *d = sg_seg_by_id(st, st->job_dst);
        if (!d || !st->job_fblocks)
                return sg_seg_corrupt_table(t, "a job without its target");
        st->job_filter = calloc(st->job_fblocks, FILTER_BLOCK);
        if (!st->job_filter)
                return SG_ERR_NOMEM;
        int rc;
        MDB_dbi dbi = sg_seg_dbi(t, p, d, true, &rc);
        MDB_cursor *cur;
        if (!rc)
                rc = sg_lmdb_cursor_open(t, dbi, &cur);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "dedup segment", NULL, 0);
        MDB_val k, v;
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
                if (k.mv_size == HL)
                        sg_seg_filter_add(st->job_filter, st->job_fblocks,
                                          k.mv_data);
        mdb_cursor_close(cur);
        return rc == MDB_NOTFOUND
                       ? SG_OK
                       : sg_txn_lmdb_err(t, rc, "dedup segment", NULL, 0);
}

/* Reads @p p's segment table from @p t's snapshot into a new *stp (with
 * the sealed filters when @p filters). */
static sg_err_t segtab_read(sg_txn_t *t, pdb_t *p, bool filters,
                            segtab_t **stp) {
        segtab_t *st = calloc(1, sizeof(*st));
        if (!st)
                return SG_ERR_NOMEM;
        st->next_id = 1;
        st->filters = filters;
        sg_err_t err = SG_OK;
        MDB_val k = {1, (void *)"h"}, v;
        int rc = p->aux ? sg_lmdb_get(t, p->aux, &k, &v) : MDB_NOTFOUND;
        if (rc == 0 && !hdr_decode(st, v.mv_data, v.mv_size))
                err = sg_seg_corrupt_table(t, "header");
        else if (rc && !lmdb_no_db(rc))
                err = sg_txn_lmdb_err(t, rc, "dedup segment table", NULL, 0);
        MDB_cursor *cur = NULL;
        if (!err && !rc) {
                rc = sg_lmdb_cursor_open(t, p->aux, &cur);
                unsigned char g = AUX_SEG;
                k = (MDB_val){1, &g};
                if (!rc)
                        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
                while (!err && rc == 0 && k.mv_size == 5 &&
                       ((unsigned char *)k.mv_data)[0] == AUX_SEG) {
                        if (st->cnt == SEG_SLOTS ||
                            !segrec_decode(
                                    &st->seg[st->cnt],
                                    get_u32((unsigned char *)k.mv_data + 1),
                                    v.mv_data, v.mv_size))
                                err = sg_seg_corrupt_table(t, "segment record");
                        else
                                st->cnt++;
                        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
                }
                if (!err && rc && rc != MDB_NOTFOUND)
                        err = sg_txn_lmdb_err(t, rc, "dedup segment table",
                                              NULL, 0);
                if (cur)
                        mdb_cursor_close(cur);
        }
        /* newest first: ids ascend in key order */
        for (int i = 0; i < st->cnt / 2; i++) {
                seg_t x = st->seg[i];
                st->seg[i] = st->seg[st->cnt - 1 - i];
                st->seg[st->cnt - 1 - i] = x;
        }
        for (int i = 0; !err && filters && i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                if (g->state != SEG_SEALED)
                        continue;
                unsigned char fk[SG_TP_LEN + 4];
                sg_seg_filter_key(p, g->id, fk);
                MDB_val key = {sizeof(fk), fk}, fv;
                rc = sg_lmdb_get(t, t->store->filter_dbi, &key, &fv);
                if (rc == 0 && fv.mv_size == g->fblocks * FILTER_BLOCK) {
                        if (!(g->filter = malloc(fv.mv_size)))
                                err = SG_ERR_NOMEM;
                        else
                                memcpy(g->filter, fv.mv_data, fv.mv_size);
                } else if (rc == 0 || rc == MDB_NOTFOUND) {
                        err = sg_seg_corrupt_table(t,
                                                   "a sealed segment's filter");
                } else {
                        err = sg_txn_lmdb_err(t, rc, "filter", NULL, 0);
                }
        }
        if (!err && filters && st->job_dst)
                err = job_filter_rebuild(t, p, st);
        if (err) {
                sg_segtab_free(st);
                return err;
        }
        *stp = st;
        return SG_OK;
}

/* The segment table of @p p as @p t sees it: the writer's copy, or the
 * reader's, read once per transaction. */
sg_err_t sg_segtab_get(sg_txn_t *t, pdb_t *p, segtab_t **stp) {
        if (!p->segs) {
                sg_err_t err = segtab_read(t, p, t->write, &p->segs);
                if (err)
                        return err;
        }
        *stp = p->segs;
        return SG_OK;
}

/* ---- buckets and open segments -------------------------------------------- */

int64_t sg_seg_bucket_of(const segtab_t *st, int64_t expiry_ms) {
        return expiry_ms / st->width_ms; /* expiry >= 0 */
}

sg_err_t sg_seg_width_set(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t ttl) {
        if (st->width_ms)
                return SG_OK;
        int64_t w = ttl / SG_DEDUP_BUCKETS;
        st->width_ms = w > 1000 ? w : 1000;
        return sg_seg_hdr_put(t, p, st);
}

/* Inserts @p g into the table, newest first. */
static seg_t *seg_insert(segtab_t *st, const seg_t *g) {
        int i = 0;
        while (i < st->cnt && st->seg[i].id > g->id)
                i++;
        memmove(&st->seg[i + 1], &st->seg[i], (st->cnt - i) * sizeof(seg_t));
        st->seg[i] = *g;
        st->cnt++;
        return &st->seg[i];
}

void sg_seg_remove(segtab_t *st, seg_t *g) {
        free(g->filter);
        int i = (int)(g - st->seg);
        memmove(&st->seg[i], &st->seg[i + 1],
                (st->cnt - i - 1) * sizeof(seg_t));
        st->cnt--;
}

/* A new segment of @p bucket in state @p state in a free slot, its
 * database created (empty: a slot is emptied when its segment goes). */
sg_err_t sg_seg_new(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t bucket,
                    int state, int64_t base_ms, int64_t ttl_ms, seg_t **gp) {
        bool used[SEG_SLOTS] = {false};
        for (int i = 0; i < st->cnt; i++)
                used[st->seg[i].slot] = true;
        int slot = 0;
        while (slot < SEG_SLOTS && used[slot])
                slot++;
        if (slot == SEG_SLOTS)
                return sg_txn_fail(t, SG_ERR_STORE,
                                   "all %d dedup segments of the partition "
                                   "are in use",
                                   SEG_SLOTS);
        int rc;
        seg_t g = {.id = st->next_id++,
                   .slot = (uint8_t)slot,
                   .state = (uint8_t)state,
                   .bucket = bucket,
                   .base_ms = base_ms,
                   .ttl_ms = ttl_ms};
        if (!sg_seg_dbi(t, p, &g, true, &rc))
                return sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND,
                                       "dedup segment", NULL, 0);
        sg_err_t err = sg_seg_rec_put(t, p, &g);
        if (!err)
                err = sg_seg_hdr_put(t, p, st);
        if (err)
                return err;
        *gp = seg_insert(st, &g);
        return SG_OK;
}

/* The segment a new key of expiry @p expiry_ms goes to: its bucket's open
 * one, made when there is none; when no slot is free, the open segment of
 * the latest later bucket (a key there outlives its expiry, never the
 * other way round). */
sg_err_t sg_seg_open_for(sg_txn_t *t, pdb_t *p, segtab_t *st,
                         const sg_dedup_rec_t *rec, seg_t **gp) {
        int64_t b = sg_seg_bucket_of(st, rec->expiry_ms);
        seg_t *later = NULL;
        for (int i = 0; i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                if (g->state != SEG_OPEN)
                        continue;
                if (g->bucket == b) {
                        *gp = g;
                        return SG_OK;
                }
                if (g->bucket > b && (!later || g->bucket > later->bucket))
                        later = g;
        }
        /* the TTL the segment's records are written with: the
         * partition's, else (before its first sweep) this record's */
        int64_t ttl =
                st->ttl_ms ? st->ttl_ms : rec->expiry_ms - rec->first_seen_ms;
        sg_err_t err = sg_seg_new(t, p, st, b, SEG_OPEN, rec->first_seen_ms,
                                  ttl > 0 ? ttl : 0, gp);
        if (err == SG_ERR_STORE && later) {
                *gp = later;
                return SG_OK;
        }
        return err;
}

/* ---- one key ------------------------------------------------------------- */

/* Finds key @p kh in the visible segments (with ids below @p below, 0:
 * all), newest first: *gp and its value in *val, or SG_ERR_NOT_FOUND.
 * Sealed segments are probed only when their filter may hold the key
 * (their blocks prefetched together first). */
sg_err_t sg_seg_find_below(sg_txn_t *t, pdb_t *p, segtab_t *st,
                           const unsigned char *kh, uint32_t below, seg_t **gp,
                           MDB_val *val) {
        const unsigned char *blk[SEG_SLOTS];
        for (int i = 0; i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                blk[i] = NULL;
                if (g->state == SEG_SEALED && g->filter) {
                        blk[i] = sg_seg_filter_block(g->filter, g->fblocks, kh);
                        __builtin_prefetch(blk[i]);
                }
        }
        MDB_val k = {HL, (void *)kh};
        for (int i = 0; i < st->cnt; i++) {
                seg_t *g = &st->seg[i];
                if (g->state == SEG_TARGET || (below && g->id >= below) ||
                    (blk[i] && !sg_seg_filter_block_maybe(blk[i], kh)))
                        continue;
                int rc;
                MDB_dbi dbi = sg_seg_dbi(t, p, g, false, &rc);
                if (!dbi) {
                        if (rc)
                                return sg_txn_lmdb_err(t, rc, "dedup segment",
                                                       NULL, 0);
                        continue;
                }
                rc = sg_lmdb_get(t, dbi, &k, val);
                if (rc == 0) {
                        *gp = g;
                        return SG_OK;
                }
                if (rc != MDB_NOTFOUND && !(!t->write && lmdb_no_db(rc)))
                        return sg_txn_lmdb_err(t, rc, "dedup get", NULL, 0);
        }
        return SG_ERR_NOT_FOUND;
}

static sg_err_t seg_find(sg_txn_t *t, pdb_t *p, segtab_t *st,
                         const unsigned char *kh, seg_t **gp, MDB_val *val) {
        return sg_seg_find_below(t, p, st, kh, 0, gp, val);
}

sg_err_t sg_seg_decode(sg_txn_t *t, const seg_t *g, const MDB_val *v,
                       sg_dedup_rec_t *out) {
        char why[160];
        sg_err_t err = sg_dedup_seg_decode(v->mv_data, v->mv_size, g->base_ms,
                                           g->ttl_ms, out, why, sizeof(why));
        if (!err)
                out->_seg = g->id;
        return stored(t, err, why);
}

sg_err_t sg_dedup_get(sg_txn_t *t, const sg_tp_t *tp,
                      const unsigned char kh[32], sg_dedup_rec_t *out) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (!p)
                return rc ? sg_txn_lmdb_err(t, rc, "dedup", NULL, 0)
                          : SG_ERR_NOT_FOUND;
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        seg_t *g;
        MDB_val v;
        if ((err = seg_find(t, p, st, kh, &g, &v)))
                return err;
        return sg_seg_decode(t, g, &v, out);
}

/* Whether a change of key @p kh in segment @p g must be made in the job's
 * target too: @p g is a source and the job has copied the key. */
static seg_t *job_mirror(segtab_t *st, const seg_t *g,
                         const unsigned char *kh) {
        if (!st->job_dst || !st->job_pos_set || memcmp(kh, st->job_pos, HL) > 0)
                return NULL;
        for (int i = 0; i < st->job_nsrc; i++)
                if (st->job_src[i] == g->id)
                        return sg_seg_by_id(st, st->job_dst);
        return NULL;
}

/* Writes @p rec under @p kh into segment @p g (and its job's target). */
sg_err_t sg_seg_put(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g,
                    const unsigned char *kh, const sg_dedup_rec_t *rec,
                    char *errstr, size_t errstr_size) {
        for (int pass = 0; pass < 2; pass++) {
                unsigned char v[DEDUP_SVLEN_MAX];
                size_t n = sg_dedup_seg_encode(rec, g->base_ms, g->ttl_ms, v);
                int rc;
                MDB_dbi dbi = sg_seg_dbi(t, p, g, true, &rc);
                if (!dbi)
                        return sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND,
                                               "dedup segment", errstr,
                                               errstr_size);
                sg_err_t err = sg_db_put(t, DB_DEDUP, dbi, kh, HL, v, n, errstr,
                                         errstr_size);
                if (err || !(g = job_mirror(st, g, kh)))
                        return err;
        }
        return SG_OK;
}

/* Deletes @p kh from segment @p g (and its job's target). */
sg_err_t sg_seg_del(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g,
                    const unsigned char *kh, char *errstr, size_t errstr_size) {
        for (int pass = 0; pass < 2 && g; pass++) {
                int rc;
                MDB_dbi dbi = sg_seg_dbi(t, p, g, false, &rc);
                if (!dbi)
                        return rc ? sg_txn_lmdb_err(t, rc, "dedup segment",
                                                    errstr, errstr_size)
                                  : SG_OK;
                sg_err_t err = sg_db_del(t, DB_DEDUP, dbi, kh, HL, errstr,
                                         errstr_size);
                if (err)
                        return err;
                g = job_mirror(st, g, kh);
        }
        return SG_OK;
}

/* The changelog's records of key @p kh: its value (@p rec) or a tombstone
 * (NULL), under its key; and when @p v2_tail, a tombstone under the store
 * format 2 key (the 32-byte hash) a record may still hold. */
sg_err_t sg_seg_dedup_capture(sg_txn_t *t, const pdb_t *p,
                              const unsigned char *kh,
                              const sg_dedup_rec_t *rec,
                              const unsigned char *v2_tail) {
        if (!t->capture)
                return SG_OK;
        unsigned char k[SG_TP_LEN + SG_KEY_HASH_LEN_2], v[SG_DEDUP_VALUE_LEN];
        memcpy(k, p->tp, SG_TP_LEN);
        memcpy(k + SG_TP_LEN, kh, HL);
        sg_err_t err;
        if (v2_tail) {
                memcpy(k + SG_TP_LEN + HL, v2_tail, 16);
                if ((err = sg_change_capture(t, DB_DEDUP, k,
                                             SG_TP_LEN + SG_KEY_HASH_LEN_2,
                                             NULL, 0)))
                        return err;
                /* a rolling upgrade's first step writes no format 3 key an
                 * earlier version would refuse (a tombstone neither) */
                if (!rec && t->store->cl_format == 2)
                        return SG_OK;
        }
        if (rec)
                sg_dedup_encode(rec, v);
        return sg_change_capture(t, DB_DEDUP, k, SG_TP_LEN + HL, rec ? v : NULL,
                                 rec ? sizeof(v) : 0);
}

/* The changelog's record of key @p kh under its format 2 key (the 32-byte
 * hash: @p rec's v2_tail), a rolling upgrade's first step. */
static sg_err_t dedup_capture_v2(sg_txn_t *t, const pdb_t *p,
                                 const unsigned char *kh,
                                 const sg_dedup_rec_t *rec) {
        if (!t->capture)
                return SG_OK;
        unsigned char k[SG_TP_LEN + SG_KEY_HASH_LEN_2], v[SG_DEDUP_VALUE_LEN];
        memcpy(k, p->tp, SG_TP_LEN);
        memcpy(k + SG_TP_LEN, kh, HL);
        memcpy(k + SG_TP_LEN + HL, rec->v2_tail, 16);
        sg_dedup_encode(rec, v);
        return sg_change_capture(t, DB_DEDUP, k, sizeof(k), v, sizeof(v));
}

/* The write of a dedup record (store.h sg_dedup_put_known): @p old is the
 * stored record (its _seg where it was found) or NULL for none. The
 * engine's writes (@p engine) are captured for the changelog, and a record
 * the engine writes has no store format 2 key: the one a restored record
 * had gets its tombstone now. A restore's (!@p engine) keeps the record's
 * format 2 key, and the stored one's. */
sg_err_t sg_seg_dedup_write_p(sg_txn_t *t, pdb_t *p, segtab_t *st,
                              const unsigned char *kh, const sg_dedup_rec_t *in,
                              const sg_dedup_rec_t *old, bool engine,
                              char *errstr, size_t errstr_size) {
        if (in->first_seen_ms < 0 || in->first_seen_ms > SG_TIME_MAX_MS ||
            in->expiry_ms < 0 || in->expiry_ms > SG_DEADLINE_MAX_MS)
                return refuse(errstr, errstr_size,
                              "dedup record: time out of range (first seen "
                              "%" PRId64 ", expiry %" PRId64 ")",
                              in->first_seen_ms, in->expiry_ms);
        sg_err_t err =
                sg_seg_width_set(t, p, st, in->expiry_ms - in->first_seen_ms);
        if (err)
                return err;
        sg_dedup_rec_t rec = *in;
        const unsigned char *v2_tail = NULL;
        bool as_v2 = false; /* written under its format 2 key */
        if (engine && t->store->cl_format == 2) {
                /* a rolling upgrade's first step: format 2's key when the
                 * whole hash is known, and the record keeps its rest */
                const unsigned char *tail = hash_tail(kh);
                if (!tail && old && old->v2)
                        tail = old->v2_tail;
                if ((as_v2 = tail != NULL)) {
                        rec.v2 = true;
                        memmove(rec.v2_tail, tail, 16);
                } else {
                        rec.v2 = false;
                }
        } else if (engine) {
                rec.v2 = false;
                if (old && old->v2)
                        v2_tail = old->v2_tail;
        } else if (old && old->v2 && !rec.v2) {
                rec.v2 = true;
                memcpy(rec.v2_tail, old->v2_tail, 16);
        }
        seg_t *g = NULL;
        if (old) {
                g = old->_seg ? sg_seg_by_id(st, old->_seg) : NULL;
                MDB_val v;
                if (!g && (err = seg_find(t, p, st, kh, &g, &v)) &&
                    err != SG_ERR_NOT_FOUND)
                        return err;
        }
        int64_t b = sg_seg_bucket_of(st, rec.expiry_ms);
        if (g && g->state != SEG_TARGET && g->bucket == b) {
                err = sg_seg_put(t, p, st, g, kh, &rec, errstr, errstr_size);
        } else {
                if (g &&
                    (err = sg_seg_del(t, p, st, g, kh, errstr, errstr_size)))
                        return err;
                if (!(err = sg_seg_open_for(t, p, st, &rec, &g))) {
                        err = sg_seg_put(t, p, st, g, kh, &rec, errstr,
                                         errstr_size);
                        st->written++;
                }
        }
        if (err || !engine)
                return err;
        if (as_v2)
                return dedup_capture_v2(t, p, kh, &rec);
        return sg_seg_dedup_capture(t, p, kh, &rec, v2_tail);
}

sg_err_t sg_seg_dedup_write(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char *kh, const sg_dedup_rec_t *in,
                            const sg_dedup_rec_t *old, bool engine,
                            char *errstr, size_t errstr_size) {
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, true, &rc);
        if (!p)
                return sg_txn_lmdb_err(t, rc ? rc : MDB_NOTFOUND, "dedup",
                                       errstr, errstr_size);
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        return sg_seg_dedup_write_p(t, p, st, kh, in, old, engine, errstr,
                                    errstr_size);
}

/* @p err with its reason in errstr: the transaction's detail when the
 * failing call below had no errstr of its own. */
sg_err_t sg_seg_with_detail(sg_txn_t *t, sg_err_t err, char *errstr,
                            size_t errstr_size) {
        if (err && err != SG_ERR_NOT_FOUND && errstr && errstr_size &&
            !errstr[0])
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
        return err;
}

sg_err_t sg_dedup_put_known(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char kh[32],
                            const sg_dedup_rec_t *rec,
                            const sg_dedup_rec_t *old, char *errstr,
                            size_t errstr_size) {
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return sg_seg_with_detail(t,
                                  sg_seg_dedup_write(t, tp, kh, rec, old, true,
                                                     errstr, errstr_size),
                                  errstr, errstr_size);
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

/* ---- walking segments in key order ---------------------------------------- */

void sg_seg_kwalk_close(kwalk_t *w) {
        for (int i = 0; i < w->n; i++)
                if (w->cur[i])
                        mdb_cursor_close(w->cur[i]);
        w->n = 0;
}

/* Positions cursor @p i after @p from: 0 or an LMDB code. */
static int kwalk_seek(kwalk_t *w, int i, const unsigned char *from) {
        int rc;
        if (!from) {
                rc = mdb_cursor_get(w->cur[i], &w->k[i], &w->v[i], MDB_FIRST);
        } else {
                w->k[i] = (MDB_val){HL, (void *)from};
                rc = mdb_cursor_get(w->cur[i], &w->k[i], &w->v[i],
                                    MDB_SET_RANGE);
                if (rc == 0 && w->k[i].mv_size == HL &&
                    !memcmp(w->k[i].mv_data, from, HL))
                        rc = mdb_cursor_get(w->cur[i], &w->k[i], &w->v[i],
                                            MDB_NEXT);
        }
        w->live[i] = rc == 0;
        return rc == MDB_NOTFOUND ? 0 : rc;
}

sg_err_t sg_seg_kwalk_open(sg_txn_t *t, pdb_t *p, segtab_t *st,
                           const uint32_t *ids, int n,
                           const unsigned char *from, kwalk_t *w) {
        memset(w, 0, sizeof(*w));
        for (int i = 0; i < n; i++) {
                seg_t *g = sg_seg_by_id(st, ids[i]);
                int rc;
                MDB_dbi dbi = g ? sg_seg_dbi(t, p, g, false, &rc) : 0;
                if (!dbi) {
                        if (g && rc) {
                                sg_seg_kwalk_close(w);
                                return sg_txn_lmdb_err(t, rc, "dedup segment",
                                                       NULL, 0);
                        }
                        continue;
                }
                int j = w->n;
                w->id[j] = ids[i];
                if ((rc = sg_lmdb_cursor_open(t, dbi, &w->cur[j])) ||
                    (w->n++, rc = kwalk_seek(w, j, from))) {
                        sg_seg_kwalk_close(w);
                        if (!t->write && lmdb_no_db(rc))
                                continue; /* not in a reader's snapshot */
                        return sg_txn_lmdb_err(t, rc, "dedup segment", NULL, 0);
                }
        }
        return SG_OK;
}

/* The walk's next key: its cursor's index, -1 at the end. */
int sg_seg_kwalk_min(const kwalk_t *w) {
        int m = -1;
        for (int i = 0; i < w->n; i++)
                if (w->live[i] &&
                    (m < 0 || memcmp(w->k[i].mv_data, w->k[m].mv_data, HL) < 0))
                        m = i;
        return m;
}

int sg_seg_kwalk_next(kwalk_t *w, int i) {
        int rc = mdb_cursor_get(w->cur[i], &w->k[i], &w->v[i], MDB_NEXT);
        w->live[i] = rc == 0;
        return rc == MDB_NOTFOUND ? 0 : rc;
}

void sg_store_set_changelog_format(sg_store_t *s, int format) {
        s->cl_format = format == 2 ? 2 : SG_STORE_FORMAT;
}

void sg_store_set_segment_keys(sg_store_t *s, uint64_t keys) {
        s->seg_keys = keys ? keys : 1;
}

sg_err_t sg_dedup_seg_stat(sg_txn_t *t, const sg_tp_t *tp, sg_seg_stat_t *out) {
        memset(out, 0, sizeof(*out));
        int rc;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (!p)
                return rc ? sg_txn_lmdb_err(t, rc, "dedup", NULL, 0) : SG_OK;
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        for (int i = 0; i < st->cnt; i++) {
                const seg_t *g = &st->seg[i];
                switch (g->state) {
                case SEG_OPEN:
                        out->open++;
                        break;
                case SEG_FROZEN:
                        out->frozen++;
                        break;
                case SEG_SEALED:
                        out->sealed++;
                        out->filter_bytes += g->fblocks * FILTER_BLOCK;
                        break;
                default:
                        out->merging++;
                        continue;
                }
                out->keys += sg_seg_entries(t, p, g);
                int64_t end = (g->bucket + 1) * st->width_ms;
                if (!out->oldest_bucket_end_ms ||
                    end < out->oldest_bucket_end_ms)
                        out->oldest_bucket_end_ms = end;
        }
        return SG_OK;
}

/* ---- the partition as a whole ----------------------------------------------- */

sg_err_t sg_seg_drop_all(sg_txn_t *t, pdb_t *p) {
        for (int i = 0; i < SEG_SLOTS; i++) {
                int rc;
                MDB_dbi dbi = sg_pdb_slot(t, p, i, false, &rc);
                if (!rc && dbi)
                        rc = sg_lmdb_drop(t, dbi);
                if (rc)
                        return sg_txn_lmdb_err(t, rc, "dedup segment drop",
                                               NULL, 0);
        }
        /* the partition's filters: tp | id */
        MDB_cursor *cur;
        int rc = sg_lmdb_cursor_open(t, t->store->filter_dbi, &cur);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "filter", NULL, 0);
        MDB_val k = {SG_TP_LEN, p->tp}, v;
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        while (rc == 0 && k.mv_size >= SG_TP_LEN &&
               !memcmp(k.mv_data, p->tp, SG_TP_LEN)) {
                if ((rc = sg_lmdb_cursor_del(t, cur)))
                        break;
                rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT);
                if (rc == MDB_NOTFOUND || rc == EINVAL)
                        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        }
        mdb_cursor_close(cur);
        if (rc && rc != MDB_NOTFOUND)
                return sg_txn_lmdb_err(t, rc, "filter", NULL, 0);
        /* the table itself lives in the aux database the caller empties */
        sg_segtab_free(p->segs);
        p->segs = NULL;
        return SG_OK;
}

sg_err_t sg_seg_foreach(sg_txn_t *t, pdb_t *p, sg_store_visit_cb *cb,
                        void *opaque, bool *stoppedp) {
        *stoppedp = false;
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        uint32_t ids[SEG_SLOTS];
        int n = 0;
        for (int i = 0; i < st->cnt; i++)
                if (st->seg[i].state != SEG_TARGET)
                        ids[n++] = st->seg[i].id;
        kwalk_t w;
        if ((err = sg_seg_kwalk_open(t, p, st, ids, n, NULL, &w)))
                return err;
        int m, rc = 0;
        while (!err && (m = sg_seg_kwalk_min(&w)) >= 0) {
                sg_dedup_rec_t r;
                const seg_t *g = sg_seg_by_id(st, w.id[m]);
                if (w.k[m].mv_size != HL) {
                        err = sg_seg_corrupt_table(t, "a dedup key's length");
                        break;
                }
                if ((err = sg_seg_decode(t, g, &w.v[m], &r)))
                        break;
                unsigned char k[SG_TP_LEN + HL], v[SG_DEDUP_VALUE_LEN];
                memcpy(k, p->tp, SG_TP_LEN);
                memcpy(k + SG_TP_LEN, w.k[m].mv_data, HL);
                sg_dedup_encode(&r, v);
                if (cb(opaque, DB_DEDUP, k, sizeof(k), v, sizeof(v))) {
                        *stoppedp = true;
                        break;
                }
                if ((rc = sg_seg_kwalk_next(&w, m)))
                        break;
        }
        sg_seg_kwalk_close(&w);
        if (!err && rc)
                err = sg_txn_lmdb_err(t, rc, "dedup segment", NULL, 0);
        return err;
}

sg_err_t sg_seg_stats(sg_txn_t *t, pdb_t *p, uint64_t *entries, uint64_t *pages,
                      uint64_t *psize) {
        segtab_t *st;
        sg_err_t err = sg_segtab_get(t, p, &st);
        if (err)
                return err;
        for (int i = 0; i < SEG_SLOTS; i++) {
                int rc;
                MDB_dbi dbi = sg_pdb_slot(t, p, i, false, &rc);
                MDB_stat ms;
                if (!dbi || mdb_stat(t->txn, dbi, &ms))
                        continue;
                *pages += ms.ms_branch_pages + ms.ms_leaf_pages +
                          ms.ms_overflow_pages;
                *psize = ms.ms_psize;
        }
        for (int i = 0; i < st->cnt; i++)
                if (st->seg[i].state != SEG_TARGET)
                        *entries += sg_seg_entries(t, p, &st->seg[i]);
        return SG_OK;
}

bool sg_seg_filter_maybe(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char kh[32], int *sealedp) {
        int rc;
        segtab_t *st;
        *sealedp = 0;
        pdb_t *p = sg_pdb_get(t, tp, false, &rc);
        if (!p || sg_segtab_get(t, p, &st))
                return false;
        bool maybe = false;
        for (int i = 0; i < st->cnt; i++) {
                const seg_t *g = &st->seg[i];
                if (g->state != SEG_SEALED || !g->filter)
                        continue;
                (*sealedp)++;
                maybe |= sg_seg_filter_block_maybe(
                        sg_seg_filter_block(g->filter, g->fblocks, kh), kh);
        }
        return maybe;
}
