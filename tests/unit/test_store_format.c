/*
 * test_store_format.c — the store's on-disk format (store.h): the short
 * partition key prefix, the topic kept in the meta value and checked, the
 * format number (a store of an earlier format is rebuilt, a later one
 * refused), and changelog values of the earlier format still restoring.
 */
#include "envelope.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char err[512];

/* 26 bytes, the benchmark's topic length */
#define TOPIC "bench-in-20261201t182700zz"

static void setup(void) {
        tu_tmpdir(dir, sizeof(dir), "store_format");
}

static void teardown(void) {
        tu_rmrf(dir);
}

static sg_store_t *open_store(void) {
        sg_store_t *s;
        ck_assert_int_eq(
                sg_store_open(dir, 1 << 22, 1 << 22, &s, err, sizeof(err)),
                SG_OK);
        return s;
}

static sg_txn_t *wtxn(sg_store_t *s) {
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        return t;
}

static void put_be64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (unsigned char)v;
}

/* Writes one key of LMDB database @p db in @p dir by hand (creating it). */
static void poke(const char *db, const void *key, size_t key_len, const void *v,
                 size_t v_len) {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        ck_assert_int_eq(mdb_env_create(&env), 0);
        ck_assert_int_eq(mdb_env_set_maxdbs(env, 16), 0);
        ck_assert_int_eq(mdb_env_open(env, dir, 0, 0640), 0);
        ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
        ck_assert_int_eq(mdb_dbi_open(txn, db, MDB_CREATE, &dbi), 0);
        MDB_val k = {key_len, (void *)key}, val = {v_len, (void *)v};
        ck_assert_int_eq(mdb_put(txn, dbi, &k, &val, 0), 0);
        ck_assert_int_eq(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
}

typedef struct key_lens {
        size_t by_db[8];
        size_t n[8];
} key_lens_t;

static int lens_visit(void *opaque, int db, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        key_lens_t *l = opaque;
        (void)key;
        (void)value;
        (void)value_len;
        l->by_db[db] = key_len;
        l->n[db]++;
        return 0;
}

/* Every key starts with a 12-byte partition prefix whatever the topic's
 * length (store.h layout): the dedup key is prefix + key hash. */
START_TEST(keys_use_a_short_partition_prefix) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 2);
        ck_assert_uint_eq(tp.len, 12);
        unsigned char kh[32];
        sg_sha256("k", 1, kh);
        sg_dedup_rec_t r = {
                .verdict = SG_DV_APPLIED, .first_seen_ms = 5, .expiry_ms = 105};
        sg_meta_rec_t m = {.input_offset = 1,
                           .changelog_offset = -1,
                           .changelog_epoch = -1};
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        key_lens_t l;
        memset(&l, 0, sizeof(l));
        ck_assert_int_eq(sg_store_foreach(t, lens_visit, &l, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(l.n[SG_DB_DEDUP], 1);
        ck_assert_uint_eq(l.by_db[SG_DB_DEDUP], 12 + 32);
        ck_assert_uint_eq(l.by_db[1], 12 + 8 + 32); /* expiry index */
        ck_assert_uint_eq(l.by_db[SG_DB_META], 12);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

typedef struct parts_seen {
        char topic[256];
        int32_t partition;
        int n;
} parts_seen_t;

static int meta_visit(void *opaque, const char *topic, int32_t partition,
                      const sg_meta_rec_t *rec) {
        parts_seen_t *p = opaque;
        (void)rec;
        snprintf(p->topic, sizeof(p->topic), "%s", topic);
        p->partition = partition;
        p->n++;
        return 0;
}

/* The topic lives in the meta value: the walk over partitions names it,
 * and a partition of another topic with the same prefix (a 64-bit hash
 * collision, simulated) is refused, never read as this one's. */
START_TEST(meta_names_its_topic_and_refuses_a_prefix_collision) {
        sg_store_t *s = open_store();
        sg_tp_t tp, other;
        sg_tp_make(&tp, TOPIC, 7);
        sg_tp_make(&other, "payments", 7);
        memcpy(other.b, tp.b, tp.len); /* as if the hashes collided */
        sg_meta_rec_t m = {.input_offset = 42,
                           .changelog_offset = -1,
                           .changelog_epoch = -1},
                      g;
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_meta_get(t, &tp, &g), SG_OK);
        ck_assert_str_eq(g.topic, TOPIC);
        ck_assert_int_eq(g.input_offset, 42);
        parts_seen_t seen = {.n = 0};
        ck_assert_int_eq(sg_meta_foreach(t, meta_visit, &seen), SG_OK);
        ck_assert_int_eq(seen.n, 1);
        ck_assert_str_eq(seen.topic, TOPIC);
        ck_assert_int_eq(seen.partition, 7);
        ck_assert_int_eq(sg_meta_get(t, &other, &g), SG_ERR_STORE);
        ck_assert_msg(strstr(sg_txn_errdetail(t), "key prefix"), "detail %s",
                      sg_txn_errdetail(t));
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A store the previous binary wrote (its layout: tp = topic length | topic
 * | partition, no format number) is never read: opened, it is removed and
 * reported rebuilt (the engine restores from the changelog); a read-only
 * open refuses it clearly. */
START_TEST(store_of_an_earlier_format_is_rebuilt) {
        static const char *dbs[] = {"dedup", "expiry", "agg",     "parked",
                                    "since", "meta",   "snapreq", "snapdue"};
        for (int i = 0; i < 8; i++)
                poke(dbs[i], "x", 1, "", 0); /* creates the database */
        unsigned char k[1 + 6 + 4] = {6,   'o', 'r', 'd', 'e', 'r',
                                      's', 0,   0,   0,   0};
        unsigned char v[1 + 255 + 8 * 8];
        memset(v, 0, sizeof(v));
        poke("meta", k, sizeof(k), v, sizeof(v));

        sg_store_t *ro;
        ck_assert_int_eq(sg_store_open_readonly(dir, &ro, err, sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_msg(strstr(err, "earlier store format"), "err %s", err);

        sg_store_t *s = open_store();
        const char *why = NULL;
        ck_assert(sg_store_rebuilt(s, &why));
        ck_assert_msg(why && strstr(why, "earlier store format"), "why %s",
                      why ? why : "(null)");
        ck_assert_uint_eq(sg_store_entries(s), 0);
        /* the old store is set aside, not deleted: a changelog that turns
         * out to be incomplete must not have cost the only copy; the
         * reason names where it is */
        const char *kept = strstr(why, "kept in ");
        ck_assert_msg(kept, "why %s", why);
        /* a store before format numbers is format 1 (docs/upgrade.md "Store
         * format 2": <data_dir>/store-format-1-<unix seconds>/) */
        ck_assert_msg(strstr(kept, "/store-format-1-"), "why %s", why);
        char old_data[4300];
        snprintf(old_data, sizeof(old_data), "%.*s/data.mdb",
                 (int)strcspn(kept + 8, " ;)"), kept + 8);
        struct stat ost;
        ck_assert_msg(stat(old_data, &ost) == 0 && ost.st_size > 0, "%s",
                      old_data);
        sg_store_close(s);

        /* the new store has this format: kept at the next open */
        s = open_store();
        ck_assert(!sg_store_rebuilt(s, NULL));
        sg_store_close(s);
        ck_assert_int_eq(sg_store_open_readonly(dir, &ro, err, sizeof(err)),
                         SG_OK);
        sg_store_close(ro);
}
END_TEST

/* What the operator tools (read-only open) say about a store they do not
 * read: an unconverted one, what to do with it; the copy set aside at the
 * upgrade, what it is and where to look instead. */
START_TEST(readonly_open_says_what_an_old_store_is) {
        static const char *dbs[] = {"dedup", "expiry", "agg",     "parked",
                                    "since", "meta",   "snapreq", "snapdue"};
        for (int i = 0; i < 8; i++)
                poke(dbs[i], "x", 1, "", 0);
        sg_store_t *ro;
        ck_assert_int_eq(sg_store_open_readonly(dir, &ro, err, sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_msg(strstr(err, "earlier store format"), "err %s", err);
        ck_assert_msg(strstr(err, "start seqgate on this data_dir once"),
                      "err %s", err);

        sg_store_t *s = open_store(); /* sets it aside */
        const char *why = NULL;
        ck_assert(sg_store_rebuilt(s, &why));
        const char *kept = strstr(why, "kept in ");
        ck_assert_ptr_nonnull(kept);
        char kdir[4300];
        snprintf(kdir, sizeof(kdir), "%.*s", (int)strcspn(kept + 8, " ;)"),
                 kept + 8);
        sg_store_close(s);
        ck_assert_int_eq(sg_store_open_readonly(kdir, &ro, err, sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_msg(strstr(err, "set aside"), "err %s", err);
        ck_assert_msg(strstr(err, "data_dir seqgate runs on"), "err %s", err);
}
END_TEST

/* A store of a later format is left alone and refused. */
START_TEST(store_of_a_later_format_is_refused) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        sg_meta_rec_t m = {.input_offset = 1,
                           .changelog_offset = -1,
                           .changelog_epoch = -1};
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
        unsigned char later[4] = {0, 0, 0, SG_STORE_FORMAT + 1};
        poke("format", "version", 7, later, 4);
        ck_assert_int_eq(
                sg_store_open(dir, 1 << 22, 1 << 22, &s, err, sizeof(err)),
                SG_ERR_STORE);
        ck_assert_msg(strstr(err, "newer than this seqgate"), "err %s", err);
        char p[128];
        struct stat st;
        snprintf(p, sizeof(p), "%s/data.mdb", dir);
        ck_assert_int_eq(stat(p, &st), 0); /* not removed */
}
END_TEST

/* A changelog meta value of the earlier format (no topic) restores: it is
 * re-encoded with the partition's topic. */
START_TEST(earlier_changelog_meta_value_restores) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 1);
        /* group_len | group (255) | 8 x i64 | changelog_epoch | fp flag +
         * 5 x 8: the value the previous binary wrote */
        unsigned char v[1 + 255 + 8 * 8 + 8 + 1 + 40];
        memset(v, 0, sizeof(v));
        v[0] = 1;
        v[1] = 'g';
        put_be64(v + 256, 77);                /* input offset */
        put_be64(v + 264, (uint64_t)-1);      /* changelog offset */
        put_be64(v + 256 + 64, (uint64_t)-1); /* changelog epoch */
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_META, NULL, 0, v,
                                               sizeof(v), err, sizeof(err)),
                         SG_OK);
        sg_meta_rec_t g;
        ck_assert_int_eq(sg_meta_get(t, &tp, &g), SG_OK);
        ck_assert_int_eq(g.input_offset, 77);
        ck_assert_str_eq(g.group, "g");
        ck_assert_str_eq(g.topic, TOPIC);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A dedup value of store format 1 (digest 32 | verdict | i64 times, 49
 * bytes) from the changelog restores; the store keeps it as 30 bytes
 * (16 of the digest) and reads the same record back. */
START_TEST(earlier_changelog_dedup_value_restores) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        unsigned char kh[32], v[49];
        sg_sha256("k", 1, kh);
        sg_sha256("payload", 7, v); /* the digest */
        v[32] = SG_DV_DLQ | (4 << 3);
        put_be64(v + 33, UINT64_C(1764612000000));
        put_be64(v + 41, UINT64_C(1764612000000) + 86400000);
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32, v,
                                               sizeof(v), err, sizeof(err)),
                         SG_OK);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_DLQ);
        ck_assert_int_eq(g.reason, 4);
        ck_assert_int_eq(g.first_seen_ms, INT64_C(1764612000000));
        ck_assert_int_eq(g.expiry_ms, INT64_C(1764612000000) + 86400000);
        ck_assert(sg_dedup_digest_eq(&g, v));
        const void *sv;
        size_t svlen;
        ck_assert_int_eq(
                sg_store_get_change(t, &tp, SG_DB_DEDUP, kh, 32, &sv, &svlen),
                SG_OK);
        ck_assert_uint_eq(svlen, 30);
        /* the digest tells another payload apart in its first 16 bytes */
        unsigned char other[32];
        sg_sha256("payload2", 8, other);
        ck_assert(!sg_dedup_digest_eq(&g, other));
        /* the restore's window (sg_store_batch_*) stores it the same way */
        unsigned char kh2[32];
        sg_sha256("k2", 2, kh2);
        sg_store_batch_t *b = NULL;
        ck_assert_int_eq(sg_store_batch_new(&b), SG_OK);
        ck_assert_int_eq(sg_store_batch_add(b, t, &tp, SG_DB_DEDUP, kh2, 32, v,
                                            sizeof(v), err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_batch_flush(b, t, &tp, err, sizeof(err)),
                         SG_OK);
        sg_store_batch_destroy(b);
        ck_assert_int_eq(
                sg_store_get_change(t, &tp, SG_DB_DEDUP, kh2, 32, &sv, &svlen),
                SG_OK);
        ck_assert_uint_eq(svlen, 30);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh2, &g), SG_OK);
        ck_assert_int_eq(g.reason, 4);
        ck_assert_int_eq(g.expiry_ms, INT64_C(1764612000000) + 86400000);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A batch's expiry index entries share their time and differ in a random
 * key hash: made in put order they split the index's last pages half-full
 * (~95 bytes of page per 62-byte entry); made in key order at the index's
 * next read or the commit (sg_db_put_index), pages stay full. */
START_TEST(time_index_pages_stay_full) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        unsigned n = 0;
        for (int b = 0; b < 10; b++) {
                sg_txn_t *t = wtxn(s);
                for (int i = 0; i < 600; i++, n++) {
                        unsigned char kh[32];
                        sg_sha256(&n, sizeof(n), kh);
                        sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED,
                                            .first_seen_ms = b,
                                            .expiry_ms = 1000 + b};
                        ck_assert_int_eq(sg_dedup_put_known(t, &tp, kh, &r,
                                                            NULL, err,
                                                            sizeof(err)),
                                         SG_OK);
                }
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        }
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        sg_db_stat_t st[SG_STORE_DB_CNT];
        ck_assert_int_eq(sg_store_db_stats(t, st, err, sizeof(err)), SG_OK);
        ck_assert_str_eq(st[1].name, "expiry");
        ck_assert_uint_eq(st[1].entries, n);
        double per = (double)st[1].pages * (double)st[1].page_size / n;
        ck_assert_msg(per < 70.0, "%.1f bytes of page per expiry entry", per);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Gathered index puts are seen by the transaction that made them: a moved
 * expiry and the sweep in the same transaction. */
START_TEST(gathered_index_puts_are_seen_in_the_txn) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        unsigned char k1[32], k2[32];
        sg_sha256("k1", 2, k1);
        sg_sha256("k2", 2, k2);
        sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED, .expiry_ms = 100};
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_dedup_put(t, &tp, k1, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_dedup_put(t, &tp, k2, &r, err, sizeof(err)), SG_OK);
        r.expiry_ms = 200; /* k1 moves: its entry at 100 is deleted */
        ck_assert_int_eq(sg_dedup_put(t, &tp, k1, &r, err, sizeof(err)), SG_OK);
        int removed = -1;
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 150, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 1); /* k2 */
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, k2, &g), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_dedup_get(t, &tp, k1, &g), SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = wtxn(s);
        ck_assert_int_eq(sg_dedup_sweep(t, &tp, 250, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 1); /* k1, indexed at 200 */
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(sg_store_entries(s), 0);
        sg_store_close(s);
}
END_TEST

int main(void) {
        Suite *su = suite_create("store_format");
        TCase *tc = tcase_create("format");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, keys_use_a_short_partition_prefix);
        tcase_add_test(tc, meta_names_its_topic_and_refuses_a_prefix_collision);
        tcase_add_test(tc, store_of_an_earlier_format_is_rebuilt);
        tcase_add_test(tc, store_of_a_later_format_is_refused);
        tcase_add_test(tc, readonly_open_says_what_an_old_store_is);
        tcase_add_test(tc, earlier_changelog_meta_value_restores);
        tcase_add_test(tc, earlier_changelog_dedup_value_restores);
        tcase_add_test(tc, time_index_pages_stay_full);
        tcase_add_test(tc, gathered_index_puts_are_seen_in_the_txn);
        suite_add_tcase(su, tc);
        return tu_run_suite(su);
}
