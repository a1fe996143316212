/*
 * test_store_seg.c — a partition's dedup records in time segments
 * (store.h "Dedup segments", store_seg.c): an open segment frozen when full
 * and sealed in key order with its filter; sealed segments merged; a
 * filter's false positive never changing an answer; expiry by whole
 * buckets with the changelog's tombstones bounded per sweep and PARKED
 * keys carried forward; a record moving to its new bucket; sealed segments
 * and filters across a restart and an aborted transaction; restore into
 * buckets; the partition's drop.
 */
#include "envelope.h"
#include "store_int.h"
#define TU_STORE_FIXTURE
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

#define TTL 8000 /* bucket width 1000 ms: */
_Static_assert(SG_DEDUP_BUCKETS == 8, "these tests' times assume buckets "
                                      "of TTL / 8 = 1000 ms");

/* The suite's store in the test's directory (tu_store_fixture). */
static sg_store_t *open_store(void) {
        return tu_store_open(1 << 26, 1 << 24);
}

/* The suite's store with segments of @p seg_keys keys, partition
 * "orders" [0] in *tp, and a write transaction on it. */
static sg_txn_t *open_seg(uint64_t seg_keys, sg_store_t **sp, sg_tp_t *tp) {
        *sp = open_store();
        sg_store_set_segment_keys(*sp, seg_keys);
        sg_tp_make(tp, "orders", 0);
        return tu_wtxn(*sp);
}

static void key(int i, unsigned char kh[32]) {
        char k[32];
        snprintf(k, sizeof(k), "key-%d", i);
        sg_sha256(k, strlen(k), kh);
}

/* Records key @p i first seen at @p at, expiring TTL later. */
static void put(sg_txn_t *t, const sg_tp_t *tp, int i, int64_t at,
                int verdict) {
        unsigned char kh[32];
        key(i, kh);
        sg_dedup_rec_t r = {.verdict = (uint8_t)verdict,
                            .first_seen_ms = at,
                            .expiry_ms = at + TTL};
        sg_sha256(&i, sizeof(i), r.digest);
        ck_assert_int_eq(sg_dedup_put(t, tp, kh, &r, err, sizeof(err)), SG_OK);
}

static void found(sg_txn_t *t, const sg_tp_t *tp, int i, int64_t at) {
        unsigned char kh[32], dg[32];
        key(i, kh);
        sg_sha256(&i, sizeof(i), dg);
        sg_dedup_rec_t g;
        ck_assert_msg(sg_dedup_get(t, tp, kh, &g) == SG_OK, "key %d: %s", i,
                      sg_txn_errdetail(t));
        ck_assert(sg_dedup_digest_eq(&g, dg));
        ck_assert_int_eq(g.first_seen_ms, at);
        ck_assert_int_eq(g.expiry_ms, at + TTL);
}

static void absent(sg_txn_t *t, const sg_tp_t *tp, int i) {
        unsigned char kh[32];
        key(i, kh);
        sg_dedup_rec_t g;
        ck_assert_msg(sg_dedup_get(t, tp, kh, &g) == SG_ERR_NOT_FOUND,
                      "key %d is there", i);
}

static int sweep(sg_txn_t *t, const sg_tp_t *tp, int64_t now, int max) {
        int removed = -1;
        ck_assert_int_eq(sg_dedup_sweep(t, tp, now, TTL, max, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        return removed;
}

static sg_seg_stat_t stat(sg_txn_t *t, const sg_tp_t *tp) {
        sg_seg_stat_t st;
        ck_assert_int_eq(sg_dedup_seg_stat(t, tp, &st), SG_OK);
        return st;
}

/* An open segment that holds its keys is frozen at the next sweep and
 * sealed (its pages full, with a filter); new keys go to a new open one. */
START_TEST(open_segment_freezes_and_seals) {
        sg_store_t *s;
        sg_tp_t tp;
        sg_txn_t *t = open_seg(500, &s, &tp);
        for (int i = 0; i < 600; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.open, 1);
        ck_assert_int_eq(st.sealed, 0);
        ck_assert_uint_eq(st.keys, 600);
        sg_db_stat_t ds[SG_STORE_DB_CNT];
        ck_assert_int_eq(sg_store_db_stats(t, ds, err, sizeof(err)), SG_OK);
        double open_bytes = (double)ds[SG_STAT_DEDUP].pages *
                            (double)ds[SG_STAT_DEDUP].page_size / 600;
        ck_assert_int_eq(sweep(t, &tp, 200, 1000), 0);
        st = stat(t, &tp);
        ck_assert_int_eq(st.open, 0);
        ck_assert_int_eq(st.frozen, 0);
        ck_assert_int_eq(st.sealed, 1);
        ck_assert_uint_eq(st.keys, 600);
        /* 2 bytes of filter a key, rounded up to 64-byte blocks */
        ck_assert_uint_eq(st.filter_bytes, (600 * 2 + 63) / 64 * 64);
        ck_assert_int_eq(sg_store_db_stats(t, ds, err, sizeof(err)), SG_OK);
        double sealed_bytes = (double)ds[SG_STAT_DEDUP].pages *
                              (double)ds[SG_STAT_DEDUP].page_size / 600;
        /* ~46 bytes an entry (key 16, value 20, LMDB's 10): full pages */
        ck_assert_msg(sealed_bytes < 55.0 && sealed_bytes < open_bytes,
                      "%.1f bytes of page a key sealed, %.1f open",
                      sealed_bytes, open_bytes);
        ck_assert_uint_eq(ds[SG_STAT_FILTER].entries, 1);
        for (int i = 0; i < 600; i++)
                found(t, &tp, i, 100);
        put(t, &tp, 600, 150, SG_DV_APPLIED);
        st = stat(t, &tp);
        ck_assert_int_eq(st.open, 1);
        ck_assert_int_eq(st.sealed, 1);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A filter's false positive costs a probe, never an answer: a key the
 * filter may hold but the segment does not is absent, and is recorded as
 * new; every key the segment holds passes its filter; the false positive
 * rate stays near the design's (~0.1 % at 16 bits a key). */
START_TEST(filter_false_positive_never_changes_an_answer) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        enum { N = 4000 };
        for (int i = 0; i < N; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        sg_store_set_segment_keys(s, 1);
        sweep(t, &tp, 200, 1000);
        ck_assert_int_eq(stat(t, &tp).sealed, 1);
        int sealed;
        for (int i = 0; i < N; i++) {
                unsigned char kh[32];
                key(i, kh);
                ck_assert_msg(sg_seg_filter_maybe(t, &tp, kh, &sealed),
                              "key %d: a false negative", i);
        }
        ck_assert_int_eq(sealed, 1);
        int fp = 0, fp_keys[16];
        enum { PROBES = 200000 };
        for (int i = N; i < N + PROBES; i++) {
                unsigned char kh[32];
                key(i, kh);
                if (sg_seg_filter_maybe(t, &tp, kh, &sealed) && fp < 16)
                        fp_keys[fp] = i;
                fp += sg_seg_filter_maybe(t, &tp, kh, &sealed);
        }
        ck_assert_msg(fp > 0 && fp < PROBES / 200, "%d false positives of %d",
                      fp, PROBES);
        for (int j = 0; j < fp && j < 16; j++) {
                absent(t, &tp, fp_keys[j]);
                put(t, &tp, fp_keys[j], 150, SG_DV_APPLIED);
                found(t, &tp, fp_keys[j], 150);
        }
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.open, 1);
        ck_assert_uint_eq(st.keys, N + (fp < 16 ? fp : 16));
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* The changes captured for key @p i: its tombstones counted. */
static int tombstones(sg_txn_t *t, int *v2) {
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        int k = 0;
        *v2 = 0;
        for (size_t i = 0; i < n; i++)
                if (ch[i].db == SG_DB_DEDUP && !ch[i].value) {
                        k += ch[i].key_len == SG_TP_LEN + SG_KEY_HASH_LEN;
                        *v2 += ch[i].key_len == SG_TP_LEN + 32;
                }
        return k;
}

/* A bucket whose end has passed is walked a bounded number of keys a sweep
 * — a changelog tombstone each, a PARKED key moved to the current bucket —
 * and then dropped whole; until then its keys read as they are (the
 * caller judges them expired). */
START_TEST(expiry_drops_whole_buckets) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        for (int i = 0; i < 30; i++) /* expiry 8100: bucket 8, ends 9000 */
                put(t, &tp, i, 100, i == 7 ? SG_DV_PARKED : SG_DV_APPLIED);
        put(t, &tp, 100, 1100, SG_DV_APPLIED); /* bucket 9 */
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = tu_wtxn(s);
        sg_txn_capture(t, true);
        ck_assert_int_eq(sweep(t, &tp, 8999, 10), 0);
        int v2;
        ck_assert_int_eq(tombstones(t, &v2), 0);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        int total = 0, sweeps = 0;
        for (;;) {
                t = tu_wtxn(s);
                sg_txn_capture(t, true);
                int removed = sweep(t, &tp, 9000, 10);
                int ts = tombstones(t, &v2);
                ck_assert_int_eq(ts, removed);
                ck_assert_int_le(removed, 10);
                total += removed;
                sweeps++;
                sg_seg_stat_t st = stat(t, &tp);
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
                if (st.oldest_bucket_end_ms > 9000)
                        break;
                ck_assert_int_lt(sweeps, 10);
        }
        ck_assert_int_eq(total, 29);
        ck_assert_int_ge(sweeps, 3);
        t = tu_wtxn(s);
        for (int i = 0; i < 30; i++)
                if (i != 7)
                        absent(t, &tp, i);
        /* the PARKED key stays, expiring a TTL after the walk */
        unsigned char kh[32];
        key(7, kh);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_PARKED);
        ck_assert_int_eq(g.first_seen_ms, 100);
        ck_assert_int_eq(g.expiry_ms, 9000 + TTL);
        found(t, &tp, 100, 1100);
        ck_assert_int_eq(sweep(t, &tp, 10000, 10), 1); /* key 100 */
        absent(t, &tp, 100);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* By default a partition's bucket is its TTL / SG_DEDUP_BUCKETS wide (the
 * width of its first key's TTL), so a key leaves up to that long after
 * its expiry. */
START_TEST(default_bucket_width_is_the_ttl_over_the_buckets) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        int64_t w = TTL / SG_DEDUP_BUCKETS;
        put(t, &tp, 1, 100, SG_DV_APPLIED); /* expiry TTL + 100 */
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.oldest_bucket_end_ms, ((TTL + 100) / w + 1) * w);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = tu_wtxn(s);
        int64_t end = st.oldest_bucket_end_ms;
        ck_assert_int_eq(sweep(t, &tp, end - 1, 10), 0);
        found(t, &tp, 1, 100);
        ck_assert_int_eq(sweep(t, &tp, end, 10), 1);
        absent(t, &tp, 1);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* A record whose expiry moves to another bucket moves with it, so its old
 * bucket's walk neither drops it nor tombstones it. */
START_TEST(record_moves_with_its_expiry) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        for (int i = 0; i < 5; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        put(t, &tp, 3, 5000, SG_DV_APPLIED); /* seen again after a while */
        sg_txn_capture(t, true);
        int total = 0;
        for (int k = 0; k < 3; k++)
                total += sweep(t, &tp, 9000, 10);
        ck_assert_int_eq(total, 4);
        found(t, &tp, 3, 5000);
        for (int i = 0; i < 5; i++)
                if (i != 3)
                        absent(t, &tp, i);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Sealed segments four at a time of one bucket and level are merged into
 * one; every key is still found, and nothing else changes. */
START_TEST(sealed_segments_merge) {
        sg_store_t *s;
        sg_tp_t tp;
        sg_txn_t *t = open_seg(100, &s, &tp);
        int n = 0;
        for (int round = 0; round < 5; round++) {
                for (int i = 0; i < 120; i++, n++)
                        put(t, &tp, n, 100, SG_DV_APPLIED);
                sweep(t, &tp, 200, 1000);
        }
        sg_seg_stat_t st = stat(t, &tp);
        /* four sealed of level 0 merged into one, and the fifth */
        ck_assert_int_eq(st.sealed, 2);
        ck_assert_int_eq(st.open + st.frozen + st.merging, 0);
        ck_assert_uint_eq(st.keys, (uint64_t)n);
        for (int i = 0; i < n; i++)
                found(t, &tp, i, 100);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* Frozen segments of one bucket (what a restore leaves: each full one
 * frozen when its window's keys could not be appended) are sealed
 * together into one sealed segment, each key copied once, so that no
 * merge of the bucket is left to the sweeps after (store_seg_merge.c
 * frozen_pick). */
START_TEST(frozen_segments_of_a_bucket_seal_into_one) {
        sg_store_t *s;
        sg_tp_t tp;
        sg_txn_t *t = open_seg(100, &s, &tp);
        int n = 0;
        bool done = false;
        for (int round = 0; round < 3; round++) {
                for (int i = 0; i < 120; i++, n++)
                        put(t, &tp, n, 100, SG_DV_APPLIED);
                /* no key copied: only the full open segment frozen */
                ck_assert_int_eq(sg_dedup_seal(t, &tp, 200, TTL, 0, &done, err,
                                               sizeof(err)),
                                 SG_OK);
        }
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.frozen, 3);
        ck_assert_int_eq(st.sealed + st.open + st.merging, 0);
        ck_assert_int_eq(sg_dedup_seal(t, &tp, 200, TTL, 1000000, &done, err,
                                       sizeof(err)),
                         SG_OK);
        ck_assert(done);
        st = stat(t, &tp);
        ck_assert_int_eq(st.sealed, 1);
        ck_assert_int_eq(st.frozen + st.open + st.merging, 0);
        ck_assert_uint_eq(st.keys, (uint64_t)n);
        for (int i = 0; i < n; i++)
                found(t, &tp, i, 100);
        absent(t, &tp, n);
        /* nothing left for the sweeps to merge */
        sweep(t, &tp, 200, 1000);
        ck_assert_int_eq(stat(t, &tp).sealed, 1);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A seal copies a bounded number of keys a sweep; a key of its source
 * changed after the copy passed it is changed in the copy too, so the
 * sealed segment is its source when it takes over. */
START_TEST(seal_in_steps_keeps_late_changes) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        for (int i = 0; i < 400; i++)
                put(t, &tp, i, 100, SG_DV_PARKED);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        /* a restart: no keys written since, so a sweep copies 4 × max */
        sg_store_close(s);
        s = open_store();
        sg_store_set_segment_keys(s, 1);
        t = tu_wtxn(s);
        sweep(t, &tp, 200, 10);
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.frozen, 1);
        ck_assert_int_eq(st.merging, 1);
        /* every key's verdict changes (in place): some copied, some not */
        for (int i = 0; i < 400; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        for (int k = 0; k < 20 && stat(t = tu_wtxn(s), &tp).frozen; k++) {
                sweep(t, &tp, 200, 10);
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        }
        st = stat(t, &tp);
        ck_assert_int_eq(st.frozen, 0);
        ck_assert_int_eq(st.sealed, 1);
        for (int i = 0; i < 400; i++) {
                unsigned char kh[32];
                key(i, kh);
                sg_dedup_rec_t g;
                ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
                ck_assert_int_eq(g.verdict, SG_DV_APPLIED);
        }
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Sealed segments and their filters are in the store: a restart reads
 * them back (no rebuild); an aborted transaction leaves the segments as
 * they were (its new segment's database included) and the next one goes
 * on from there. */
START_TEST(restart_and_abort_keep_the_segments) {
        sg_store_t *s;
        sg_tp_t tp;
        sg_txn_t *t = open_seg(50, &s, &tp);
        for (int i = 0; i < 200; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        sweep(t, &tp, 200, 1000);
        ck_assert_int_eq(stat(t, &tp).sealed, 1);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
        s = open_store();
        sg_store_set_segment_keys(s, 50);
        t = tu_wtxn(s);
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.sealed, 1);
        ck_assert_uint_eq(st.filter_bytes, (200 * 2 + 63) / 64 * 64);
        unsigned char kh[32];
        key(5, kh);
        int sealed;
        ck_assert(sg_seg_filter_maybe(t, &tp, kh, &sealed));
        ck_assert_int_eq(sealed, 1);
        for (int i = 0; i < 200; i++)
                found(t, &tp, i, 100);
        /* an aborted transaction: a new open segment and another seal */
        for (int i = 200; i < 300; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        sweep(t, &tp, 200, 1000);
        ck_assert_int_eq(stat(t, &tp).sealed, 2);
        sg_txn_abort(t);
        t = tu_wtxn(s);
        st = stat(t, &tp);
        ck_assert_int_eq(st.sealed, 1);
        ck_assert_int_eq(st.open, 0);
        ck_assert_uint_eq(st.keys, 200);
        absent(t, &tp, 250);
        for (int i = 200; i < 300; i++)
                put(t, &tp, i, 100, SG_DV_APPLIED);
        sweep(t, &tp, 200, 1000);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = tu_wtxn(s);
        ck_assert_int_eq(stat(t, &tp).sealed, 2);
        for (int i = 0; i < 300; i++)
                found(t, &tp, i, 100);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Restore puts each record in the segment of its expiry's bucket; records
 * already expired are walked (and tombstoned) by the next sweeps like any
 * other. */
START_TEST(restore_fills_buckets) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = tu_wtxn(s);
        for (int i = 0; i < 90; i++) {
                unsigned char kh[32], v[SG_DEDUP_VALUE_LEN];
                key(i, kh);
                /* first seen over 9 seconds: buckets 8 .. 16 */
                sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED,
                                    .first_seen_ms = i * 100,
                                    .expiry_ms = i * 100 + TTL};
                sg_sha256(&i, sizeof(i), r.digest);
                size_t n = sg_dedup_encode(&r, v);
                ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh,
                                                       SG_KEY_HASH_LEN, v, n,
                                                       err, sizeof(err)),
                                 SG_OK);
        }
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.open, 9);
        ck_assert_uint_eq(st.keys, 90);
        for (int i = 0; i < 90; i++)
                found(t, &tp, i, i * 100);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        /* at 10000 the buckets ending by then (8, 9: keys 0..19) go */
        t = tu_wtxn(s);
        sg_txn_capture(t, true);
        int total = 0;
        for (int k = 0; k < 4; k++)
                total += sweep(t, &tp, 10000, 100);
        ck_assert_int_eq(total, 20);
        absent(t, &tp, 19);
        found(t, &tp, 20, 2000);
        st = stat(t, &tp);
        ck_assert_int_eq(st.open + st.frozen + st.sealed, 7);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* A partition's drop empties its segments and filters and nothing of
 * another partition; the dropped partition takes new keys again. */
START_TEST(partition_drop_empties_segments) {
        sg_store_t *s = open_store();
        sg_store_set_segment_keys(s, 50);
        sg_tp_t tp, other;
        sg_tp_make(&tp, "orders", 0);
        sg_tp_make(&other, "orders", 1);
        sg_txn_t *t = tu_wtxn(s);
        for (int i = 0; i < 120; i++) {
                put(t, &tp, i, 100, SG_DV_APPLIED);
                put(t, &other, i, 100, SG_DV_APPLIED);
        }
        sweep(t, &tp, 200, 1000);
        sweep(t, &other, 200, 1000);
        put(t, &tp, 500, 100, SG_DV_APPLIED); /* an open one too */
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = tu_wtxn(s);
        ck_assert_int_eq(sg_store_partition_drop(t, &tp, err, sizeof(err)),
                         SG_OK);
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_eq(st.open + st.frozen + st.sealed + st.merging, 0);
        ck_assert_uint_eq(st.keys, 0);
        absent(t, &tp, 5);
        absent(t, &tp, 500);
        sg_db_stat_t ds[SG_STORE_DB_CNT];
        ck_assert_int_eq(sg_store_db_stats(t, ds, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(ds[SG_STAT_FILTER].entries, 1); /* the other's */
        ck_assert_uint_eq(stat(t, &other).keys, 120);
        found(t, &other, 5, 100);
        put(t, &tp, 5, 300, SG_DV_APPLIED);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = tu_wtxn(s);
        found(t, &tp, 5, 300);
        ck_assert_uint_eq(stat(t, &tp).keys, 1);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* In a rolling upgrade's first step (store.h sg_store_set_changelog_format
 * 2) an expired key's tombstone goes under its format 2 key only (the
 * record kept the rest of its hash): an earlier version refuses format 3
 * keys, tombstones too. Afterwards (format 3) both keys get one. */
START_TEST(expiry_tombstones_in_a_rolling_upgrade) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        for (int fmt = 2; fmt <= 3; fmt++) {
                sg_store_set_changelog_format(s, 2);
                sg_txn_t *t = tu_wtxn(s);
                int base = fmt == 2 ? 0 : 100;
                for (int i = base; i < base + 5; i++)
                        put(t, &tp, i, 100 + 2000 * (fmt - 2), SG_DV_APPLIED);
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
                sg_store_set_changelog_format(s, fmt);
                t = tu_wtxn(s);
                sg_txn_capture(t, true);
                ck_assert_int_eq(sweep(t, &tp, 9000 + 2000 * (fmt - 2), 100),
                                 5);
                int v2;
                int v3 = tombstones(t, &v2);
                ck_assert_int_eq(v2, 5);
                ck_assert_int_eq(v3, fmt == 2 ? 0 : 5);
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        }
        sg_store_close(s);
}
END_TEST

/* The writer's reads and writes go through a cursor per database kept
 * for the whole transaction (store.c txn_cursor): whatever else changes
 * the databases meanwhile (records moving between buckets, deletes, seals
 * and merges copying and dropping segments, aggregates written between),
 * every get still answers what was last written. A model checks each
 * step, then the committed store after a reopen. */
#define CUR_KEYS 700
START_TEST(kept_cursors_follow_every_change) {
        sg_store_t *s = open_store();
        sg_store_set_segment_keys(s, 64);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        static int64_t at[CUR_KEYS];   /* 0: absent */
        static uint64_t ver[CUR_KEYS]; /* the aggregate's version, 0 none */
        memset(at, 0, sizeof(at));
        memset(ver, 0, sizeof(ver));
        uint64_t x = 88172645463325252ull;
        sg_txn_t *t = tu_wtxn(s);
        for (int step = 0; step < 12000; step++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                int i = (int)(x % CUR_KEYS), op = (int)((x >> 20) % 10);
                unsigned char kh[32], ah[32];
                key(i, kh);
                key(i + 1000000, ah);
                if (op < 4) { /* a key (again), in one of four buckets */
                        int64_t when = 100 + 1000 * (int64_t)((x >> 32) % 4);
                        put(t, &tp, i, when, SG_DV_APPLIED);
                        at[i] = when;
                } else if (op == 4 && at[i]) { /* deleted */
                        ck_assert_int_eq(sg_dedup_restore(t, &tp, kh, NULL,
                                                          false, err,
                                                          sizeof(err)),
                                         SG_OK);
                        at[i] = 0;
                } else if (op == 5) {
                        sweep(t, &tp, 200, 40);
                } else if (op < 8) { /* its aggregate read and written */
                        sg_agg_rec_t a;
                        sg_err_t e = sg_agg_get(t, &tp, ah, &a);
                        ck_assert_int_eq(e, ver[i] ? SG_OK : SG_ERR_NOT_FOUND);
                        if (ver[i])
                                ck_assert_uint_eq(a.last_version, ver[i]);
                        else
                                memset(&a, 0, sizeof(a));
                        a.has_last = true;
                        a.last_version = ++ver[i];
                        ck_assert_int_eq(
                                sg_agg_put(t, &tp, ah, &a, 0, err, sizeof(err)),
                                SG_OK);
                }
                if (at[i])
                        found(t, &tp, i, at[i]);
                else
                        absent(t, &tp, i);
                if (step % 3000 == 2999) { /* a checkpoint */
                        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)),
                                         SG_OK);
                        t = tu_wtxn(s);
                }
        }
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
        s = open_store();
        t = tu_wtxn(s);
        sg_seg_stat_t st = stat(t, &tp);
        ck_assert_int_gt(st.sealed, 0); /* seals and merges did happen */
        for (int i = 0; i < CUR_KEYS; i++) {
                if (at[i])
                        found(t, &tp, i, at[i]);
                else
                        absent(t, &tp, i);
                unsigned char ah[32];
                key(i + 1000000, ah);
                sg_agg_rec_t a;
                ck_assert_int_eq(sg_agg_get(t, &tp, ah, &a),
                                 ver[i] ? SG_OK : SG_ERR_NOT_FOUND);
                if (ver[i])
                        ck_assert_uint_eq(a.last_version, ver[i]);
        }
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

int main(void) {
        Suite *su = suite_create("store_seg");
        TCase *tc = tcase_create("segments");
        tu_store_fixture(tc, "store_seg");
        tcase_add_test(tc, open_segment_freezes_and_seals);
        tcase_add_test(tc, filter_false_positive_never_changes_an_answer);
        tcase_add_test(tc, expiry_drops_whole_buckets);
        tcase_add_test(tc, default_bucket_width_is_the_ttl_over_the_buckets);
        tcase_add_test(tc, record_moves_with_its_expiry);
        tcase_add_test(tc, sealed_segments_merge);
        tcase_add_test(tc, frozen_segments_of_a_bucket_seal_into_one);
        tcase_add_test(tc, seal_in_steps_keeps_late_changes);
        tcase_add_test(tc, restart_and_abort_keep_the_segments);
        tcase_add_test(tc, restore_fills_buckets);
        tcase_add_test(tc, partition_drop_empties_segments);
        tcase_add_test(tc, expiry_tombstones_in_a_rolling_upgrade);
        tcase_add_test(tc, kept_cursors_follow_every_change);
        suite_add_tcase(su, tc);
        return tu_run_suite(su);
}
