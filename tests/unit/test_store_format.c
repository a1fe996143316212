/*
 * test_store_format.c — the store's on-disk format (store.h): a
 * partition's own databases keyed by 16-byte hashes, the topic kept in the
 * meta value and checked, the format number (a store of an earlier format
 * is rebuilt, a later one refused), and changelog records of the earlier
 * formats still restoring (store format 2's 32-byte key hashes
 * converted).
 */
#include "envelope.h"
#include "store.h"
#define TU_STORE_FIXTURE
#include "testutil.h"

#include <check.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];

/* 26 bytes, the benchmark's topic length */
#define TOPIC "bench-in-20261201t182700zz"

/* The suite's store in the test's directory (tu_store_fixture). */
static sg_store_t *open_store(void) {
        return tu_store_open(1 << 22, 1 << 22);
}

static void put_be64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (unsigned char)v;
}

/* Writes one key of LMDB database @p db in the test's directory by hand
 * (creating it). */
static void poke(const char *db, const void *key, size_t key_len, const void *v,
                 size_t v_len) {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        ck_assert_int_eq(mdb_env_create(&env), 0);
        ck_assert_int_eq(mdb_env_set_maxdbs(env, 16), 0);
        ck_assert_int_eq(mdb_env_open(env, tu_store_dir, 0, 0640), 0);
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

/* A partition's dedup key is its 16-byte hash in the partition's own
 * segment database (no prefix, whatever the topic's length); the store
 * and the changelog name it tp | hash (store.h layout); meta is keyed by
 * the 12-byte prefix. */
START_TEST(keys_are_16_byte_hashes_in_the_partitions_databases) {
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
        sg_txn_t *t = tu_wtxn(s);
        sg_txn_capture(t, true);
        ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        const sg_change_t *ch;
        ck_assert_uint_eq(sg_txn_changes(t, &ch), 2);
        ck_assert_uint_eq(ch[0].key_len, 12 + 16);
        ck_assert_uint_eq(ch[0].value_len, SG_DEDUP_VALUE_LEN);
        key_lens_t l;
        memset(&l, 0, sizeof(l));
        ck_assert_int_eq(sg_store_foreach(t, lens_visit, &l, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(l.n[SG_DB_DEDUP], 1);
        ck_assert_uint_eq(l.by_db[SG_DB_DEDUP], 12 + 16);
        ck_assert_uint_eq(l.n[1], 0); /* no expiry index */
        ck_assert_uint_eq(l.by_db[SG_DB_META], 12);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
        /* raw LMDB: the partition's first segment holds the bare hash */
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        char name[64] = "p";
        for (int i = 0; i < 12; i++)
                snprintf(name + 1 + 2 * i, 3, "%02x", tp.b[i]);
        strcat(name, ".d0");
        ck_assert_int_eq(mdb_env_create(&env), 0);
        ck_assert_int_eq(mdb_env_set_maxdbs(env, 16), 0);
        ck_assert_int_eq(mdb_env_open(env, tu_store_dir, MDB_RDONLY, 0640), 0);
        ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
        ck_assert_int_eq(mdb_dbi_open(txn, name, 0, &dbi), 0);
        MDB_val k = {16, kh}, v;
        ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
        /* flags | digest | first seen - the segment base (0: 1 byte) */
        ck_assert_uint_eq(v.mv_size, 18);
        mdb_txn_abort(txn);
        mdb_env_close(env);
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
        sg_txn_t *t = tu_wtxn(s);
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
        ck_assert_int_eq(
                sg_store_open_readonly(tu_store_dir, &ro, err, sizeof(err)),
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
        ck_assert_int_eq(
                sg_store_open_readonly(tu_store_dir, &ro, err, sizeof(err)),
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
        ck_assert_int_eq(
                sg_store_open_readonly(tu_store_dir, &ro, err, sizeof(err)),
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
        sg_txn_t *t = tu_wtxn(s);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
        unsigned char later[4] = {0, 0, 0, SG_STORE_FORMAT + 1};
        poke("format", "version", 7, later, 4);
        ck_assert_int_eq(sg_store_open(tu_store_dir, 1 << 22, 1 << 22, &s, err,
                                       sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_msg(strstr(err, "newer than this seqgate"), "err %s", err);
        char p[128];
        struct stat st;
        snprintf(p, sizeof(p), "%s/data.mdb", tu_store_dir);
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
        sg_txn_t *t = tu_wtxn(s);
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
        sg_txn_t *t = tu_wtxn(s);
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

/* A store of format 2 (its number recorded) is set aside and rebuilt,
 * and the operator tools say what it is. */
START_TEST(store_of_format_2_is_set_aside) {
        static const char *dbs[] = {"dedup", "expiry", "agg",     "parked",
                                    "since", "meta",   "snapreq", "snapdue"};
        for (int i = 0; i < 8; i++)
                poke(dbs[i], "x", 1, "", 0);
        unsigned char two[4] = {0, 0, 0, 2};
        poke("format", "version", 7, two, 4);
        sg_store_t *ro;
        ck_assert_int_eq(
                sg_store_open_readonly(tu_store_dir, &ro, err, sizeof(err)),
                SG_ERR_STORE);
        ck_assert_msg(strstr(err, "store format 2"), "err %s", err);
        sg_store_t *s = open_store();
        const char *why = NULL;
        ck_assert(sg_store_rebuilt(s, &why));
        ck_assert_msg(strstr(why, "/store-format-2-"), "why %s", why);
        ck_assert_uint_eq(sg_store_entries(s), 0);
        sg_store_close(s);
        ck_assert_int_eq(
                sg_store_open_readonly(tu_store_dir, &ro, err, sizeof(err)),
                SG_OK);
        sg_store_close(ro);
}
END_TEST

/* Changelog records of store format 2 (32-byte hashes in their keys)
 * restore under the 16-byte key, and keep the rest of the hash for the
 * tombstones of their old keys (store.h sg_dedup_rec_t.v2): a dedup
 * record, an aggregate, its parked event (format 2 value: a 32-byte key
 * hash) and its snapshot request. A tombstone under the old key removes
 * the record only while it came from that key. */
START_TEST(format_2_changelog_keys_convert) {
        sg_store_t *s = open_store();
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        unsigned char kh[32], ah[32], pk[40];
        sg_sha256("k", 1, kh);
        sg_sha256("agg", 3, ah);
        memcpy(pk, ah, 32);
        put_be64(pk + 32, 6);
        sg_txn_t *t = tu_wtxn(s);
        /* dedup */
        sg_dedup_rec_t d = {.verdict = SG_DV_PARKED,
                            .first_seen_ms = 1000,
                            .expiry_ms = 2000};
        unsigned char dv[SG_DEDUP_VALUE_LEN];
        size_t dn = sg_dedup_encode(&d, dv);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32, dv,
                                               dn, err, sizeof(err)),
                         SG_OK);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert(g.v2);
        ck_assert_int_eq(memcmp(g.v2_tail, kh + 16, 16), 0);
        /* aggregate of format 2 (value and key) */
        unsigned char av[100];
        memset(av, 0, sizeof(av));
        av[0] = 1;
        av[8] = 5;   /* L */
        av[16] = 1;  /* parked_cnt */
        av[24] = 2;  /* parked_bytes */
        av[32] = 50; /* since */
        av[57] = 0;  /* state "" */
        av[58] = 0;  /* agg len */
        av[59] = 3;
        memcpy(av + 60, "agg", 3);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_AGG, ah, 32, av,
                                               63, err, sizeof(err)),
                         SG_OK);
        sg_agg_rec_t a;
        ck_assert_int_eq(sg_agg_get(t, &tp, ah, &a), SG_OK);
        ck_assert_uint_eq(a.last_version, 5);
        ck_assert(a.v2);
        ck_assert_int_eq(memcmp(a.v2_tail, ah + 16, 16), 0);
        ck_assert_str_eq(a.aggregate, "agg");
        /* its parked event: format 2 value (32-byte key hash) */
        unsigned char pv[24 + 32 + 16 + 2];
        memset(pv, 0, sizeof(pv));
        put_be64(pv, 50);
        put_be64(pv + 8, 9);
        memcpy(pv + 24, kh, 32);
        unsigned char *q = pv + 56;
        memset(q, 0xff, 4);     /* type null */
        memset(q + 4, 0xff, 4); /* key null */
        q[8 + 3] = 2;
        memcpy(q + 12, "v6", 2);
        memset(q + 14, 0xff, 4); /* headers null */
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_PARKED, pk, 40, pv,
                                               sizeof(pv), err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pr;
        ck_assert_int_eq(sg_parked_get(t, &tp, ah, 6, &pr), SG_OK);
        ck_assert_int_eq(memcmp(pr.key_hash, kh, 32), 0);
        ck_assert_uint_eq(pr.value_len, 2);
        /* resolved by this store: the old keys get their tombstones */
        sg_txn_capture(t, true);
        ck_assert_int_eq(sg_parked_del(t, &tp, ah, 6, err, sizeof(err)), SG_OK);
        d.verdict = SG_DV_APPLIED;
        ck_assert_int_eq(
                sg_dedup_put_known(t, &tp, kh, &d, &g, err, sizeof(err)),
                SG_OK);
        a.parked_cnt = 0;
        a.parked_bytes = 0;
        a.parked_since_ms = 0;
        ck_assert_int_eq(sg_agg_put(t, &tp, ah, &a, 50, err, sizeof(err)),
                         SG_OK);
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        int old_keys = 0, new_keys = 0;
        for (size_t i = 0; i < n; i++) {
                size_t sl = ch[i].key_len - tp.len;
                bool old = sl == 32 || sl == 40;
                old_keys += old;
                new_keys += !old;
                if (old)
                        ck_assert_ptr_null(ch[i].value);
        }
        ck_assert_int_eq(old_keys, 3); /* parked, dedup, aggregate */
        ck_assert_int_eq(new_keys, 3);
        /* nothing parked: the aggregate no longer keeps the old hash */
        ck_assert_int_eq(sg_agg_get(t, &tp, ah, &a), SG_OK);
        ck_assert(!a.v2);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert(!g.v2);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        /* a tombstone of the old key removes a record that came from it,
         * not one written since under the new key */
        t = tu_wtxn(s);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32,
                                               NULL, 0, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32, dv,
                                               dn, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32,
                                               NULL, 0, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* The first step of a rolling upgrade (sg_store_set_changelog_format 2):
 * a record whose whole hash is known — the caller's 32 bytes, or the rest
 * a record keeps — is captured under its format 2 key with a value format
 * 2 reads (the aggregate's long form, a parked event's 32-byte key hash);
 * one restored from a format 3 key, whose rest is unknown, under its
 * format 3 key. The captures restore into another store as they were. */
START_TEST(rolling_upgrade_writes_format_2_records) {
        sg_store_t *s = open_store();
        sg_store_set_changelog_format(s, 2);
        sg_tp_t tp;
        sg_tp_make(&tp, TOPIC, 0);
        unsigned char kh[32], ah[32], other[32];
        sg_sha256("k", 1, kh);
        sg_sha256("agg", 3, ah);
        sg_sha256("other", 5, other);
        sg_txn_t *t = tu_wtxn(s);
        /* a key restored from format 3 (16 bytes: its rest unknown) */
        sg_dedup_rec_t d = {.verdict = SG_DV_APPLIED,
                            .first_seen_ms = 1000,
                            .expiry_ms = 2000};
        unsigned char dv[SG_DEDUP_VALUE_LEN];
        size_t dn = sg_dedup_encode(&d, dv);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_DEDUP, other, 16,
                                               dv, dn, err, sizeof(err)),
                         SG_OK);
        sg_txn_capture(t, true);
        d.verdict = SG_DV_PARKED;
        ck_assert_int_eq(sg_dedup_put(t, &tp, kh, &d, err, sizeof(err)), SG_OK);
        unsigned char other16[32] = {0}; /* as a walk of its segment has it */
        memcpy(other16, other, 16);
        ck_assert_int_eq(sg_dedup_put(t, &tp, other16, &d, err, sizeof(err)),
                         SG_OK);
        sg_agg_rec_t a = {.has_last = true,
                          .last_version = 1,
                          .parked_cnt = 1,
                          .parked_bytes = 2,
                          .parked_since_ms = 1000,
                          .aggregate_len = 3};
        memcpy(a.aggregate, "agg", 3);
        ck_assert_int_eq(sg_agg_put(t, &tp, ah, &a, 0, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pr = {
                .parked_at_ms = 1000, .value = "v3", .value_len = 2};
        memcpy(pr.key_hash, kh, 32);
        ck_assert_int_eq(sg_parked_put(t, &tp, ah, 3, &pr, err, sizeof(err)),
                         SG_OK);
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        ck_assert_uint_eq(n, 4);
        /* dedup k: 32-byte key; dedup other: 16; aggregate 32 (value of
         * format 2: its first byte has_last); parked 40 (value of format 2:
         * no tag, the 32-byte key hash) */
        ck_assert_uint_eq(ch[0].key_len, tp.len + 32);
        ck_assert_uint_eq(ch[1].key_len, tp.len + 16);
        ck_assert_uint_eq(ch[2].key_len, tp.len + 32);
        ck_assert_int_eq(((const unsigned char *)ch[2].value)[0], 1);
        ck_assert_uint_eq(ch[3].key_len, tp.len + 40);
        ck_assert_int_eq(((const unsigned char *)ch[3].value)[0], 0);
        ck_assert_int_eq(
                memcmp((const unsigned char *)ch[3].value + 24, kh, 32), 0);
        /* a later write from an index (the hash's rest unknown to the
         * caller) still goes under the format 2 key: the record kept it */
        unsigned char ah16[32] = {0};
        memcpy(ah16, ah, 16);
        ck_assert_int_eq(sg_agg_get(t, &tp, ah16, &a), SG_OK);
        ck_assert(a.v2); /* the rest of its hash, kept */
        a.parked_cnt = 0;
        a.parked_bytes = 0;
        a.parked_since_ms = 0;
        ck_assert_int_eq(sg_parked_del(t, &tp, ah16, 3, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_agg_put(t, &tp, ah16, &a, 1000, err, sizeof(err)),
                         SG_OK);
        n = sg_txn_changes(t, &ch);
        /* the parked event's tombstone under its format 2 key only: an
         * earlier version refuses any format 3 key, a tombstone too */
        ck_assert_uint_eq(n, 4);
        int agg32 = 0, parked40 = 0, parked24 = 0;
        for (size_t i = 0; i < n; i++) {
                size_t sl = ch[i].key_len - tp.len;
                agg32 += ch[i].db == SG_DB_AGG && sl == 32 && ch[i].value;
                parked40 +=
                        ch[i].db == SG_DB_PARKED && sl == 40 && !ch[i].value;
                parked24 +=
                        ch[i].db == SG_DB_PARKED && sl == 24 && !ch[i].value;
        }
        ck_assert_int_eq(agg32, 1);
        ck_assert_int_eq(parked40, 1);
        ck_assert_int_eq(parked24, 0);
        /* restored elsewhere: the same state */
        char d2[128];
        snprintf(d2, sizeof(d2), "%s/replica", tu_store_dir);
        sg_store_t *b;
        ck_assert_int_eq(
                sg_store_open(d2, 1 << 22, 1 << 22, &b, err, sizeof(err)),
                SG_OK);
        sg_txn_t *u = tu_wtxn(b);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(sg_store_apply_change(
                                         u, &tp, ch[i].db,
                                         (const char *)ch[i].key + tp.len,
                                         ch[i].key_len - tp.len, ch[i].value,
                                         ch[i].value_len, err, sizeof(err)),
                                 SG_OK);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(u, &tp, kh, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_PARKED);
        ck_assert(g.v2);
        sg_agg_rec_t ga;
        ck_assert_int_eq(sg_agg_get(u, &tp, ah, &ga), SG_OK);
        ck_assert_uint_eq(ga.last_version, 1);
        ck_assert_uint_eq(ga.parked_cnt, 0);
        ck_assert_int_eq(sg_parked_get(u, &tp, ah, 3, &pr), SG_ERR_NOT_FOUND);
        sg_txn_abort(u);
        sg_store_close(b);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

int main(void) {
        Suite *su = suite_create("store_format");
        TCase *tc = tcase_create("format");
        tu_store_fixture(tc, "store_format");
        tcase_add_test(tc, keys_are_16_byte_hashes_in_the_partitions_databases);
        tcase_add_test(tc, meta_names_its_topic_and_refuses_a_prefix_collision);
        tcase_add_test(tc, store_of_an_earlier_format_is_rebuilt);
        tcase_add_test(tc, store_of_a_later_format_is_refused);
        tcase_add_test(tc, readonly_open_says_what_an_old_store_is);
        tcase_add_test(tc, earlier_changelog_meta_value_restores);
        tcase_add_test(tc, earlier_changelog_dedup_value_restores);
        tcase_add_test(tc, store_of_format_2_is_set_aside);
        tcase_add_test(tc, format_2_changelog_keys_convert);
        tcase_add_test(tc, rolling_upgrade_writes_format_2_records);
        suite_add_tcase(su, tc);
        return tu_run_suite(su);
}
