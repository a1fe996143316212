/*
 * test_store.c — the LMDB store: round trips of every record kind, the TTL
 * expiry index, the gap-deadline index, partition isolation and drop,
 * reopen after close, and map growth after MDB_MAP_FULL.
 */
#include "envelope.h"
#include "store.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char err[512];

static void setup(void) {
        snprintf(dir, sizeof(dir), "/tmp/sg_test_store_XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
}

static sg_store_t *open_store(uint64_t map, uint64_t growth) {
        sg_store_t *s;
        ck_assert_int_eq(sg_store_open(dir, map, growth, &s, err, sizeof(err)),
                         SG_OK);
        return s;
}

static sg_txn_t *wtxn(sg_store_t *s) {
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        return t;
}

static void hash_of(const char *s, unsigned char h[32]) {
        sg_sha256(s, strlen(s), h);
}

START_TEST(dedup_roundtrip_and_reopen) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 3);
        unsigned char kh[32];
        hash_of("key", kh);
        sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED, .first_seen_ms = 5,
                            .expiry_ms = 105};
        memset(r.digest, 0xab, 32);
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);

        s = open_store(1 << 22, 1 << 22);
        t = wtxn(s);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_APPLIED);
        ck_assert_int_eq(g.first_seen_ms, 5);
        ck_assert_int_eq(g.expiry_ms, 105);
        ck_assert_int_eq(memcmp(g.digest, r.digest, 32), 0);
        /* another partition of the same topic does not see it */
        sg_tp_t tp2;
        sg_tp_make(&tp2, "orders", 4);
        ck_assert_int_eq(sg_dedup_get(t, &tp2, kh, &g), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(dedup_sweep_uses_expiry_index) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = wtxn(s);
        for (int i = 0; i < 10; i++) {
                char k[16];
                unsigned char kh[32];
                snprintf(k, sizeof(k), "k%d", i);
                hash_of(k, kh);
                sg_dedup_rec_t r = {.verdict = i == 0 ? SG_DV_PARKED
                                                      : SG_DV_APPLIED,
                                    .first_seen_ms = 0,
                                    .expiry_ms = 100 + i};
                ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)),
                                 SG_OK);
        }
        int removed;
        /* nothing expired at 99 */
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 99, 1000, 100, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 0);
        /* at 104: k0..k4 due; k0 is parked → re-armed, not removed; bound 3 */
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 104, 1000, 3, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 2);
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 104, 1000, 100, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 2);
        unsigned char kh[32];
        sg_dedup_rec_t g;
        hash_of("k0", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(g.expiry_ms, 1104);
        hash_of("k4", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_NOT_FOUND);
        hash_of("k5", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        /* changing the expiry moves the index entry: old one is gone */
        g.expiry_ms = 5000;
        ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &g, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 200, 1000, 100, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 4); /* k6..k9, not k5 */
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(agg_and_since_index) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a1[32], a2[32], got[32];
        hash_of("agg1", a1);
        hash_of("agg2", a2);
        sg_txn_t *t = wtxn(s);
        sg_agg_rec_t r = {.has_last = true, .last_version = 10,
                          .flags = SG_AGG_QUARANTINED, .parked_cnt = 2,
                          .parked_bytes = 99, .parked_since_ms = 500};
        snprintf(r.state, sizeof(r.state), "PAID");
        snprintf(r.aggregate, sizeof(r.aggregate), "agg1");
        r.aggregate_len = 4;
        ck_assert_int_eq(sg_agg_put(t, &tp, a1, &r, 0, err, sizeof(err)), SG_OK);
        r.parked_since_ms = 300;
        ck_assert_int_eq(sg_agg_put(t, &tp, a2, &r, 0, err, sizeof(err)), SG_OK);
        sg_agg_rec_t g;
        ck_assert_int_eq(sg_agg_get(t, &tp, a1, &g), SG_OK);
        ck_assert(g.has_last);
        ck_assert_uint_eq(g.last_version, 10);
        ck_assert_uint_eq(g.flags, SG_AGG_QUARANTINED);
        ck_assert_str_eq(g.state, "PAID");
        ck_assert_str_eq(g.aggregate, "agg1");
        ck_assert_uint_eq(g.parked_cnt, 2);
        int64_t since;
        ck_assert_int_eq(sg_since_first(t, &tp, 299, got, &since),
                         SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_since_first(t, &tp, 1000, got, &since), SG_OK);
        ck_assert_int_eq(since, 300);
        ck_assert_int_eq(memcmp(got, a2, 32), 0);
        /* agg2's gap is resolved: its index entry goes */
        r.parked_since_ms = 0;
        ck_assert_int_eq(sg_agg_put(t, &tp, a2, &r, 300, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_since_first(t, &tp, 1000, got, &since), SG_OK);
        ck_assert_int_eq(since, 500);
        uint64_t n;
        ck_assert_int_eq(sg_since_count(t, &tp, 501, 10, &n), SG_OK);
        ck_assert_uint_eq(n, 1);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(parked_roundtrip_order_and_nulls) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a[32];
        hash_of("agg", a);
        sg_header_t hs[] = {{"h1", "v1", 2}, {"h2", NULL, 0}};
        void *blob;
        size_t blen;
        ck_assert_int_eq(sg_headers_serialize(hs, 2, &blob, &blen), SG_OK);
        sg_txn_t *t = wtxn(s);
        uint64_t versions[] = {12, 3, 256, 7};
        for (int i = 0; i < 4; i++) {
                sg_parked_rec_t r = {.parked_at_ms = 1000 - i, .offset = i,
                                     .timestamp_ms = 9, .type = "t.x",
                                     .type_len = 3, .key = "k", .key_len = 1,
                                     .value = i == 1 ? NULL : "val",
                                     .value_len = i == 1 ? SIZE_MAX : 3,
                                     .headers = blob, .headers_len = blen};
                ck_assert_int_eq(sg_parked_put(t, &tp, a, versions[i], &r, err,
                                               sizeof(err)),
                                 SG_OK);
        }
        free(blob);
        uint64_t v;
        sg_parked_rec_t g;
        ck_assert_int_eq(sg_parked_first(t, &tp, a, &v, &g), SG_OK);
        ck_assert_uint_eq(v, 3); /* versions sort numerically (big-endian) */
        ck_assert_ptr_null(g.value);
        ck_assert_uint_eq(g.value_len, SIZE_MAX);
        ck_assert_int_eq(g.offset, 1);
        int64_t oldest;
        ck_assert_int_eq(sg_parked_oldest(t, &tp, a, &oldest), SG_OK);
        ck_assert_int_eq(oldest, 997);
        ck_assert_int_eq(sg_parked_get(t, &tp, a, 256, &g), SG_OK);
        ck_assert_uint_eq(g.value_len, 3);
        ck_assert_int_eq(memcmp(g.value, "val", 3), 0);
        ck_assert_uint_eq(g.type_len, 3);
        sg_header_t out[4];
        ck_assert_int_eq(sg_headers_parse(g.headers, g.headers_len, out, 4), 2);
        ck_assert_str_eq(out[0].name, "h1");
        ck_assert_int_eq(memcmp(out[0].value, "v1", 2), 0);
        ck_assert_ptr_null(out[1].value);
        ck_assert_int_eq(sg_headers_parse(g.headers, g.headers_len, out, 1), -1);
        ck_assert_int_eq(sg_headers_parse(g.headers, 5, out, 4), -1);
        ck_assert_int_eq(sg_parked_del(t, &tp, a, 3, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_parked_first(t, &tp, a, &v, NULL), SG_OK);
        ck_assert_uint_eq(v, 7);
        ck_assert_int_eq(sg_parked_get(t, &tp, a, 3, &g), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(meta_and_partition_drop) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t p0, p1;
        sg_tp_make(&p0, "orders", 0);
        sg_tp_make(&p1, "orders", 1);
        sg_txn_t *t = wtxn(s);
        sg_meta_rec_t m = {.input_offset = 42, .changelog_offset = -1,
                           .clock_ms = 7, .parked_cnt = 3};
        snprintf(m.group, sizeof(m.group), "grp");
        ck_assert_int_eq(sg_meta_put(t, &p0, &m, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_meta_put(t, &p1, &m, err, sizeof(err)), SG_OK);
        unsigned char kh[32];
        hash_of("k", kh);
        sg_dedup_rec_t r = {.verdict = 1, .expiry_ms = 10};
        ck_assert_int_eq(sg_dedup_put(t, &p0, kh, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_dedup_put(t, &p1, kh, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_store_partition_drop(t, &p0, err, sizeof(err)),
                         SG_OK);
        sg_meta_rec_t g;
        ck_assert_int_eq(sg_meta_get(t, &p0, &g), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_dedup_get(t, &p0, kh, &r), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_meta_get(t, &p1, &g), SG_OK);
        ck_assert_str_eq(g.group, "grp");
        ck_assert_int_eq(g.input_offset, 42);
        ck_assert_uint_eq(g.parked_cnt, 3);
        ck_assert_int_eq(sg_dedup_get(t, &p1, kh, &r), SG_OK);
        int removed;
        ck_assert_int_eq(sg_dedup_sweep(t, &p1, 10, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 1);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Fills a small map until MDB_MAP_FULL, grows, and redoes the same batch:
 * nothing of the batch is lost (semantics: grow and retry). */
START_TEST(map_full_grow_and_retry) {
        sg_store_t *s = open_store(1 << 20, 1 << 21);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        static char big[4000];
        memset(big, 'x', sizeof(big));
        int full = 0, batches = 0;
        for (int b = 0; b < 8; b++) {
                for (int attempt = 0; attempt < 3; attempt++) {
                        sg_txn_t *t = wtxn(s);
                        sg_err_t e = SG_OK;
                        for (int i = 0; i < 200 && !e; i++) {
                                unsigned char a[32];
                                char k[32];
                                snprintf(k, sizeof(k), "%d/%d", b, i);
                                hash_of(k, a);
                                sg_parked_rec_t r = {.key = k,
                                                     .key_len = strlen(k),
                                                     .value = big,
                                                     .value_len = sizeof(big)};
                                e = sg_parked_put(t, &tp, a, 1, &r, err,
                                                  sizeof(err));
                        }
                        if (!e)
                                e = sg_txn_commit(t, err, sizeof(err));
                        else
                                sg_txn_abort(t);
                        if (e == SG_OK) {
                                batches++;
                                break;
                        }
                        ck_assert_int_eq(e, SG_ERR_MAP_FULL);
                        full++;
                        ck_assert_int_eq(sg_store_grow(s, err, sizeof(err)),
                                         SG_OK);
                }
        }
        ck_assert_int_eq(batches, 8);
        ck_assert_int_ge(full, 1);
        uint64_t size, used;
        sg_store_usage(s, &size, &used);
        ck_assert_uint_gt(size, 1 << 20);
        sg_store_close(s);
        /* reopen keeps everything, the map keeps its grown size */
        s = open_store(1 << 20, 1 << 21);
        sg_txn_t *t = wtxn(s);
        for (int b = 0; b < 8; b++) {
                unsigned char a[32];
                char k[32];
                snprintf(k, sizeof(k), "%d/199", b);
                hash_of(k, a);
                sg_parked_rec_t g;
                ck_assert_int_eq(sg_parked_get(t, &tp, a, 1, &g), SG_OK);
                ck_assert_uint_eq(g.value_len, sizeof(big));
        }
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(open_bad_dir) {
        sg_store_t *s;
        ck_assert_int_eq(sg_store_open("/proc/nonexistent/x", 1 << 20, 1 << 20,
                                       &s, err, sizeof(err)),
                         SG_ERR_IO);
        ck_assert_ptr_nonnull(strstr(err, "/proc/nonexistent/x"));
}
END_TEST


/* Changes captured in one store, applied to another (the changelog path),
 * give the same state and the same derived indexes. */
START_TEST(capture_and_apply_changes) {
        sg_store_t *a = open_store(1 << 22, 1 << 22);
        char dir2[128];
        snprintf(dir2, sizeof(dir2), "%s/replica", dir);
        sg_store_t *b;
        ck_assert_int_eq(sg_store_open(dir2, 1 << 22, 1 << 22, &b, err,
                                       sizeof(err)),
                         SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 2);
        unsigned char k1[32], k2[32], ag[32];
        hash_of("k1", k1);
        hash_of("k2", k2);
        hash_of("agg", ag);
        sg_txn_t *t = wtxn(a);
        sg_txn_capture(t, true);
        sg_dedup_rec_t d = {.verdict = SG_DV_PARKED, .expiry_ms = 500};
        ck_assert_int_eq(sg_dedup_put(t, &tp, k1, &d, err, sizeof(err)), SG_OK);
        d.verdict = SG_DV_APPLIED; /* overwritten in the same txn */
        ck_assert_int_eq(sg_dedup_put(t, &tp, k1, &d, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_dedup_put(t, &tp, k2, &d, err, sizeof(err)), SG_OK);
        sg_agg_rec_t r = {.has_last = true, .last_version = 4, .parked_cnt = 1,
                          .parked_since_ms = 77, .aggregate_len = 3};
        memcpy(r.aggregate, "agg", 3);
        ck_assert_int_eq(sg_agg_put(t, &tp, ag, &r, 0, err, sizeof(err)), SG_OK);
        sg_parked_rec_t pr = {.parked_at_ms = 77, .key = "agg", .key_len = 3,
                              .value = "v6", .value_len = 2};
        ck_assert_int_eq(sg_parked_put(t, &tp, ag, 6, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_put(t, &tp, ag, 7, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_del(t, &tp, ag, 7, err, sizeof(err)), SG_OK);
        sg_snapreq_rec_t sr = {.seq = 3, .attempt = 1,
                               .state = SG_SNAP_INFLIGHT, .due_ms = 900,
                               .aggregate_len = 3};
        memcpy(sr.aggregate, "agg", 3);
        ck_assert_int_eq(sg_snapreq_put(t, &tp, ag, &sr, 0, err, sizeof(err)),
                         SG_OK);
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        /* k1 once (last write), k2, agg, parked 6, parked 7 tombstone,
         * snapreq: the expiry/since/snapdue indexes are not logged */
        ck_assert_uint_eq(n, 6);
        int tombstones = 0;
        sg_txn_t *u = wtxn(b);
        for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(memcmp(ch[i].key, tp.b, tp.len), 0);
                tombstones += ch[i].value == NULL;
                ck_assert_int_eq(
                    sg_store_apply_change(u, &tp, ch[i].db,
                                          (const char *)ch[i].key + tp.len,
                                          ch[i].key_len - tp.len, ch[i].value,
                                          ch[i].value_len, err, sizeof(err)),
                    SG_OK);
        }
        ck_assert_int_eq(tombstones, 1);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        /* the replica has the state ... */
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(u, &tp, k1, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_APPLIED);
        sg_agg_rec_t ga;
        ck_assert_int_eq(sg_agg_get(u, &tp, ag, &ga), SG_OK);
        ck_assert_uint_eq(ga.last_version, 4);
        ck_assert_str_eq(ga.aggregate, "agg");
        sg_parked_rec_t gp;
        ck_assert_int_eq(sg_parked_get(u, &tp, ag, 6, &gp), SG_OK);
        ck_assert_int_eq(sg_parked_get(u, &tp, ag, 7, &gp), SG_ERR_NOT_FOUND);
        /* ... and the derived indexes */
        unsigned char h[32];
        int64_t at;
        ck_assert_int_eq(sg_since_first(u, &tp, 100, h, &at), SG_OK);
        ck_assert_int_eq(at, 77);
        ck_assert_int_eq(sg_snapdue_first(u, &tp, 1000, h, &at), SG_OK);
        ck_assert_int_eq(at, 900);
        int removed;
        ck_assert_int_eq(sg_dedup_sweep(u, &tp, 600, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 2);
        /* a record seqgate did not write is refused */
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_DEDUP, "x", 1, "y",
                                               1, err, sizeof(err)),
                         SG_ERR_INVALID);
        sg_txn_abort(u);
        sg_store_close(a);
        sg_store_close(b);
}
END_TEST


/* sg_store_foreach: every raw pair of one database under one partition's
 * prefix, in key order, the derived indexes included; a visitor can stop. */
typedef struct walk {
        size_t n, stop_after;
        unsigned char keys[8][SG_TP_MAX + 64];
        size_t key_lens[8], value_lens[8];
} walk_t;

static int walk_visit(void *opaque, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        walk_t *w = opaque;
        (void)value;
        ck_assert_uint_lt(w->n, 8);
        memcpy(w->keys[w->n], key, key_len);
        w->key_lens[w->n] = key_len;
        w->value_lens[w->n] = value_len;
        w->n++;
        return w->stop_after && w->n == w->stop_after;
}

START_TEST(foreach_walks_one_partition_of_one_database) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp, other;
        sg_tp_make(&tp, "orders", 1);
        sg_tp_make(&other, "orders", 2);
        unsigned char k1[32], k2[32];
        hash_of("k1", k1);
        hash_of("k2", k2);
        sg_txn_t *t = wtxn(s);
        sg_dedup_rec_t d = {.verdict = SG_DV_APPLIED, .expiry_ms = 500};
        ck_assert_int_eq(sg_dedup_put(t, &tp, k1, &d, err, sizeof(err)), SG_OK);
        d.expiry_ms = 400;
        ck_assert_int_eq(sg_dedup_put(t, &tp, k2, &d, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_dedup_put(t, &other, k1, &d, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);

        sg_txn_t *r;
        ck_assert_int_eq(sg_txn_begin(s, false, &r, err, sizeof(err)), SG_OK);
        walk_t w = {0};
        ck_assert_int_eq(sg_store_foreach(r, &tp, SG_DB_DEDUP, walk_visit, &w),
                         SG_OK);
        ck_assert_uint_eq(w.n, 2); /* not the other partition's */
        for (size_t i = 0; i < w.n; i++) {
                ck_assert_uint_eq(w.key_lens[i], tp.len + 32);
                ck_assert_int_eq(memcmp(w.keys[i], tp.b, tp.len), 0);
                ck_assert_uint_eq(w.value_lens[i], 32 + 1 + 8 + 8);
        }
        ck_assert_int_lt(memcmp(w.keys[0], w.keys[1], tp.len + 32), 0);
        /* the expiry index, in expiry order: k2 (400) before k1 (500) */
        memset(&w, 0, sizeof(w));
        ck_assert_int_eq(sg_store_foreach(r, &tp, SG_DB_EXPIRY, walk_visit, &w),
                         SG_OK);
        ck_assert_uint_eq(w.n, 2);
        ck_assert_uint_eq(w.key_lens[0], tp.len + 8 + 32);
        ck_assert_int_eq(memcmp(w.keys[0] + tp.len + 8, k2, 32), 0);
        ck_assert_int_eq(memcmp(w.keys[1] + tp.len + 8, k1, 32), 0);
        ck_assert_uint_eq(w.value_lens[0], 0);
        /* the visitor stops the walk */
        memset(&w, 0, sizeof(w));
        w.stop_after = 1;
        ck_assert_int_eq(sg_store_foreach(r, &tp, SG_DB_DEDUP, walk_visit, &w),
                         SG_OK);
        ck_assert_uint_eq(w.n, 1);
        /* empty databases and a database that does not exist */
        memset(&w, 0, sizeof(w));
        for (int db = 0; db < SG_DB__CNT; db++)
                if (db != SG_DB_DEDUP && db != SG_DB_EXPIRY)
                        ck_assert_int_eq(sg_store_foreach(r, &tp, db,
                                                          walk_visit, &w),
                                         SG_OK);
        ck_assert_uint_eq(w.n, 0);
        ck_assert_int_eq(sg_store_foreach(r, &tp, SG_DB__CNT, walk_visit, &w),
                         SG_ERR_INVALID);
        ck_assert_int_eq(sg_store_foreach(r, &tp, -1, walk_visit, &w),
                         SG_ERR_INVALID);
        sg_txn_abort(r);
        sg_store_close(s);
}
END_TEST

/* One writer per data_dir: a second open fails while the first holds it. */
START_TEST(data_dir_locked_by_one_writer) {
        sg_store_t *a = open_store(1 << 20, 1 << 20), *b = NULL;
        ck_assert_int_eq(sg_store_open(dir, 1 << 20, 1 << 20, &b, err,
                                       sizeof(err)),
                         SG_ERR_IO);
        ck_assert_ptr_nonnull(strstr(err, "in use by another seqgate"));
        sg_store_close(a);
        b = open_store(1 << 20, 1 << 20); /* released on close */
        sg_store_close(b);
}
END_TEST

int main(void) {
        Suite *s = suite_create("store");
        TCase *tc = tcase_create("store");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, dedup_roundtrip_and_reopen);
        tcase_add_test(tc, dedup_sweep_uses_expiry_index);
        tcase_add_test(tc, agg_and_since_index);
        tcase_add_test(tc, parked_roundtrip_order_and_nulls);
        tcase_add_test(tc, meta_and_partition_drop);
        tcase_add_test(tc, map_full_grow_and_retry);
        tcase_add_test(tc, open_bad_dir);
        tcase_add_test(tc, capture_and_apply_changes);
        tcase_add_test(tc, data_dir_locked_by_one_writer);
        tcase_add_test(tc, foreach_walks_one_partition_of_one_database);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
