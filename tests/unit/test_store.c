/*
 * test_store.c — the LMDB store: round trips of every record kind, the TTL
 * expiry index, the gap-deadline index, partition isolation and drop,
 * reopen after close, and map growth after MDB_MAP_FULL.
 */
#include "arena.h"
#include "envelope.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <lmdb.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char err[512];

static void setup(void) {
        tu_tmpdir(dir, sizeof(dir), "store");
}

static void teardown(void) {
        tu_rmrf(dir);
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
        sg_dedup_rec_t r = {
                .verdict = SG_DV_APPLIED, .first_seen_ms = 5, .expiry_ms = 105};
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
        ck_assert(sg_dedup_digest_eq(&g, r.digest));
        /* another partition of the same topic does not see it */
        sg_tp_t tp2;
        sg_tp_make(&tp2, "orders", 4);
        ck_assert_int_eq(sg_dedup_get(t, &tp2, kh, &g), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* The DLQ reason rides in the verdict byte (result query, semantics §7):
 * it round-trips, a value written before it existed (the bare verdict)
 * reads as reason unknown, and a reason beside a verdict other than DLQ,
 * or past the last reason, is refused. */
START_TEST(dedup_reason_in_verdict_byte) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32];
        hash_of("key", kh);
        sg_dedup_rec_t r = {.verdict = SG_DV_DLQ,
                            .reason = 4 /* SG_R_STALE_VERSION */,
                            .first_seen_ms = 5,
                            .expiry_ms = 105};
        sg_txn_t *t = wtxn(s);
        ASSERT_OK(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), err);
        sg_dedup_rec_t g;
        ASSERT_OK(sg_dedup_get(t, &tp, kh, &g), sg_txn_errdetail(t));
        ck_assert_int_eq(g.verdict, SG_DV_DLQ);
        ck_assert_int_eq(g.reason, 4);
        const void *v;
        size_t vlen;
        ASSERT_OK(sg_store_get_change(t, &tp, SG_DB_DEDUP, kh, 32, &v, &vlen),
                  sg_txn_errdetail(t));
        ck_assert_int_eq(vlen,
                         30); /* digest 16, verdict, 6 + 7 bytes of times */
        sg_txn_abort(t);
        sg_store_close(s);

        /* the format before the reason: digest, bare verdict, two times */
        unsigned char old[49] = {0};
        old[32] = SG_DV_DLQ;
        old[40] = 5;
        old[48] = 105;
        memset(&g, 0xff, sizeof(g));
        ASSERT_OK(sg_dedup_decode(old, sizeof(old), &g, err, sizeof(err)), err);
        ck_assert_int_eq(g.verdict, SG_DV_DLQ);
        ck_assert_int_eq(g.reason, 0);
        ck_assert_int_eq(g.first_seen_ms, 5);
        ck_assert_int_eq(g.expiry_ms, 105);

        old[32] = SG_DV_APPLIED | (4 << 3);
        ck_assert_int_eq(
                sg_dedup_decode(old, sizeof(old), &g, err, sizeof(err)),
                SG_ERR_INVALID);
        old[32] = SG_DV_DLQ | (31 << 3);
        ck_assert_int_eq(
                sg_dedup_decode(old, sizeof(old), &g, err, sizeof(err)),
                SG_ERR_INVALID);
}
END_TEST

/* sg_store_db_stats (seqgatectl sizing): entries and pages per kind of
 * database, summed over the partitions: dedup keys and their segments'
 * pages, the aggregates apart from the rest of the state. */
START_TEST(db_stats_count_entries_and_pages) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp, tp1;
        sg_tp_make(&tp, "orders", 0);
        sg_tp_make(&tp1, "orders", 1);
        sg_txn_t *t = wtxn(s);
        sg_db_stat_t st[SG_STORE_DB_CNT];
        ck_assert_int_eq(sg_store_db_stats(t, st, err, sizeof(err)), SG_OK);
        ck_assert_str_eq(st[SG_STAT_DEDUP].name, "dedup");
        ck_assert_uint_eq(st[SG_STAT_DEDUP].entries, 0);
        ck_assert_uint_eq(st[SG_STAT_DEDUP].pages, 0);
        for (int i = 0; i < 300; i++) {
                char k[16];
                unsigned char kh[32];
                snprintf(k, sizeof(k), "key-%d", i);
                hash_of(k, kh);
                sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED,
                                    .first_seen_ms = 5,
                                    .expiry_ms = 105 + i};
                ck_assert_int_eq(sg_dedup_put(t, i % 2 ? &tp1 : &tp, kh, &r,
                                              err, sizeof(err)),
                                 SG_OK);
        }
        unsigned char ah[32];
        hash_of("agg", ah);
        sg_agg_rec_t a = {.has_last = true, .last_version = 3};
        ck_assert_int_eq(sg_agg_put(t, &tp, ah, &a, 0, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_db_stats(t, st, err, sizeof(err)), SG_OK);
        ck_assert_str_eq(st[SG_STAT_FILTER].name, "filter");
        ck_assert_str_eq(st[SG_STAT_AGG].name, "agg");
        ck_assert_str_eq(st[SG_STAT_STATE].name, "state");
        ck_assert_str_eq(st[SG_STAT_META].name, "meta");
        ck_assert_uint_eq(st[SG_STAT_DEDUP].entries, 300);
        ck_assert_uint_eq(st[SG_STAT_AGG].entries, 1);
        ck_assert_uint_eq(st[SG_STAT_FILTER].entries, 0); /* none sealed */
        /* 150 records of ~20 bytes in each partition's open segment */
        ck_assert_uint_ge(st[SG_STAT_DEDUP].pages, 2);
        ck_assert_uint_gt(st[SG_STAT_DEDUP].page_size, 0);
        ck_assert_uint_eq(st[SG_STAT_AGG].pages, 1);
        /* each partition's segment table: a header and a segment */
        ck_assert_uint_eq(st[SG_STAT_STATE].entries, 4);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* data_dir "created if missing" (docs/configuration.md): its missing
 * parents too. */
START_TEST(open_creates_missing_parents) {
        char base[64];
        tu_tmpdir(base, sizeof(base), "store_parents");
        char nested[128];
        snprintf(nested, sizeof(nested), "%s/nest/a/b", base);
        sg_store_t *s = NULL;
        ck_assert_msg(sg_store_open(nested, 1 << 22, 1 << 22, &s, err,
                                    sizeof(err)) == SG_OK,
                      "%s", err);
        sg_store_close(s);
        tu_rmrf(base);
}
END_TEST

/* Who writes a data_dir (seqgatectl's "is this store still written?",
 * docs/troubleshooting.md): the holder of its lock while a writer has it
 * open, nobody once it closed, nobody where no seqgate ever ran. */
START_TEST(writer_is_the_lock_holder) {
        long pid = -1;
        ck_assert_int_eq(sg_store_writer(dir, &pid), SG_STORE_WRITER_NONE);
        ck_assert_int_eq(pid, 0);
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        ck_assert_int_eq(sg_store_writer(dir, &pid), SG_STORE_WRITER_RUNNING);
        ck_assert_int_eq(pid, (long)getpid());
        /* a reader beside it changes nothing */
        sg_store_t *r;
        ck_assert_int_eq(sg_store_open_readonly(dir, &r, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_writer(dir, NULL), SG_STORE_WRITER_RUNNING);
        sg_store_close(s);
        ck_assert_int_eq(sg_store_writer(dir, &pid), SG_STORE_WRITER_NONE);
        ck_assert_int_eq(pid, 0);
        sg_store_close(r);
}
END_TEST

/* ---- durability of a store that defers its syncs (exactly_once) ---- */

/* A child process opens the store, defers its syncs, commits one dedup
 * record and stops: without closing (a killed process) or after a clean
 * close. */
static void deferred_child(bool clean) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sg_store_t *s;
                if (sg_store_open(dir, 1 << 22, 1 << 22, &s, err,
                                  sizeof(err)) ||
                    sg_store_defer_sync(s, err, sizeof(err)) ||
                    !sg_store_deferred(s))
                        _exit(3);
                sg_tp_t tp;
                sg_tp_make(&tp, "orders", 0);
                unsigned char kh[32];
                hash_of("key", kh);
                sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED,
                                    .first_seen_ms = 5,
                                    .expiry_ms = 105};
                sg_txn_t *t;
                if (sg_txn_begin(s, true, &t, err, sizeof(err)) ||
                    sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)) ||
                    sg_txn_commit(t, err, sizeof(err)))
                        _exit(4);
                if (clean)
                        sg_store_close(s);
                _exit(0); /* no close: as a killed process */
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit %d",
                      WEXITSTATUS(st));
}

static void session_read(char *line, size_t n) {
        char p[128];
        snprintf(p, sizeof(p), "%s/seqgate.session", dir);
        FILE *f = fopen(p, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, (int)n, f));
        fclose(f);
}

/* The machine "rebooted": the session file names another boot. */
static void session_other_boot(void) {
        char line[256], p[128];
        session_read(line, sizeof(line));
        char *boot = strrchr(line, ' ');
        ck_assert_ptr_nonnull(boot);
        snprintf(boot + 1, sizeof(line) - (size_t)(boot + 1 - line),
                 "00000000-0000-0000-0000-000000000000\n");
        snprintf(p, sizeof(p), "%s/seqgate.session", dir);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(line, f);
        fclose(f);
}

static sg_err_t dedup_key_get(sg_store_t *s) {
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32];
        hash_of("key", kh);
        sg_txn_t *t = wtxn(s);
        sg_dedup_rec_t g;
        sg_err_t e = sg_dedup_get(t, &tp, kh, &g);
        sg_txn_abort(t);
        return e;
}

/* A process stop loses nothing: every commit is in the page cache. The
 * store is used (and synced, and its session closed). */
START_TEST(deferred_store_kept_after_process_stop) {
        deferred_child(false);
        char line[256];
        session_read(line, sizeof(line));
        ck_assert_msg(strstr(line, " open ") != NULL, "session: %s", line);
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        ck_assert(!sg_store_rebuilt(s, NULL));
        ck_assert_int_eq(dedup_key_get(s), SG_OK);
        session_read(line, sizeof(line));
        ck_assert_msg(strstr(line, " closed ") != NULL, "session: %s", line);
        sg_store_close(s);
}
END_TEST

/* A machine stop may have lost the unsynced writes: the store is never
 * used, it is removed (and then rebuilt from the changelog). */
START_TEST(deferred_store_rebuilt_after_machine_stop) {
        deferred_child(false);
        session_other_boot();
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        const char *why = NULL;
        ck_assert(sg_store_rebuilt(s, &why));
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strstr(why, "machine stopped") != NULL, "why: %s", why);
        ck_assert_int_eq(dedup_key_get(s), SG_ERR_NOT_FOUND);
        sg_store_close(s);
        /* and the new store is trusted from then on */
        s = open_store(1 << 22, 1 << 22);
        ck_assert(!sg_store_rebuilt(s, NULL));
        sg_store_close(s);
}
END_TEST

/* An unreadable session file cannot rule a machine stop out: the store is
 * rebuilt, and the reason says the file is unreadable. */
START_TEST(deferred_store_rebuilt_on_unreadable_session) {
        deferred_child(false);
        char p[128];
        snprintf(p, sizeof(p), "%s/seqgate.session", dir);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs("garbage\n", f);
        fclose(f);
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        const char *why = NULL;
        ck_assert(sg_store_rebuilt(s, &why));
        ck_assert_msg(strstr(why, "unreadable") != NULL, "why: %s", why);
        ck_assert_int_eq(dedup_key_get(s), SG_ERR_NOT_FOUND);
        sg_store_close(s);
}
END_TEST

/* A clean close synced everything: a later boot uses the store. */
START_TEST(deferred_store_kept_after_clean_close) {
        deferred_child(true);
        char line[256];
        session_read(line, sizeof(line));
        ck_assert_msg(strstr(line, " closed ") != NULL, "session: %s", line);
        session_other_boot();
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        ck_assert(!sg_store_rebuilt(s, NULL));
        ck_assert_int_eq(dedup_key_get(s), SG_OK);
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
        sg_agg_rec_t r = {.has_last = true,
                          .last_version = 10,
                          .flags = SG_AGG_QUARANTINED,
                          .parked_cnt = 2,
                          .parked_bytes = 99,
                          .parked_since_ms = 500};
        snprintf(r.state, sizeof(r.state), "PAID");
        snprintf(r.aggregate, sizeof(r.aggregate), "agg1");
        r.aggregate_len = 4;
        r.has_epoch = true; /* semantics §4b */
        r.epoch = 42;
        ck_assert_int_eq(sg_agg_put(t, &tp, a1, &r, 0, err, sizeof(err)),
                         SG_OK);
        r.has_epoch = false;
        r.parked_since_ms = 300;
        ck_assert_int_eq(sg_agg_put(t, &tp, a2, &r, 0, err, sizeof(err)),
                         SG_OK);
        sg_agg_rec_t g;
        ck_assert_int_eq(sg_agg_get(t, &tp, a1, &g), SG_OK);
        ck_assert(g.has_last);
        ck_assert_uint_eq(g.last_version, 10);
        ck_assert_uint_eq(g.flags, SG_AGG_QUARANTINED);
        ck_assert_str_eq(g.state, "PAID");
        ck_assert_str_eq(g.aggregate, "agg1");
        ck_assert_uint_eq(g.parked_cnt, 2);
        ck_assert(g.has_epoch);
        ck_assert_uint_eq(g.epoch, 42);
        ck_assert_int_eq(sg_agg_get(t, &tp, a2, &g), SG_OK);
        ck_assert(!g.has_epoch);
        int64_t since;
        ck_assert_int_eq(sg_since_first(t, &tp, 299, got, &since),
                         SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_since_first(t, &tp, 1000, got, &since), SG_OK);
        ck_assert_int_eq(since, 300);
        /* the key hash (SG_KEY_HASH_LEN bytes), the rest 0 */
        ck_assert_int_eq(memcmp(got, a2, SG_KEY_HASH_LEN), 0);
        for (int i = SG_KEY_HASH_LEN; i < 32; i++)
                ck_assert_int_eq(got[i], 0);
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

/* ---- the writer's aggregate cache (store.h "Aggregate cache") ---------- */

/* Aggregate @p ah's L in @p t, 0 when absent. */
static uint64_t agg_last(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char ah[32]) {
        sg_agg_rec_t g;
        sg_err_t e = sg_agg_get(t, tp, ah, &g);
        if (e == SG_ERR_NOT_FOUND)
                return 0;
        ck_assert_int_eq(e, SG_OK);
        return g.last_version;
}

static void agg_set(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    uint64_t last) {
        sg_agg_rec_t r = {.has_last = true, .last_version = last};
        snprintf(r.state, sizeof(r.state), "open");
        ck_assert_int_eq(sg_agg_put(t, tp, ah, &r, 0, err, sizeof(err)), SG_OK);
}

/* An aborted transaction's aggregate writes vanish from the cache as from
 * LMDB: the next transaction reads the committed value, whether the
 * transaction was aborted or its commit failed; a reader never sees a
 * write not committed, and sees a committed one (written back first). */
START_TEST(agg_cache_abort_leaves_the_committed_value) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a1[32];
        hash_of("agg1", a1);
        sg_txn_t *t = wtxn(s);
        agg_set(t, &tp, a1, 5);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        /* write through the cache, read it back, abort */
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 5);
        agg_set(t, &tp, a1, 6);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 6);
        sg_txn_t *r;
        ck_assert_int_eq(sg_txn_begin_reader(s, &r, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(agg_last(r, &tp, a1), 5); /* not committed */
        sg_txn_abort(r);
        sg_txn_abort(t);
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 5);
        /* a new aggregate written and aborted is absent again */
        unsigned char a2[32];
        hash_of("agg2", a2);
        agg_set(t, &tp, a2, 1);
        ck_assert_uint_eq(agg_last(t, &tp, a2), 1);
        sg_txn_abort(t);
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a2), 0);
        /* a commit that fails: as an abort */
        agg_set(t, &tp, a1, 7);
        sg_store_fault_inject(s, SG_STORE_OP_COMMIT, 1, MDB_PANIC);
        ck_assert_int_ne(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_fault_inject(s, 0, 0, 0);
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 5);
        /* a commit: the reader of another transaction sees it */
        agg_set(t, &tp, a1, 8);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_begin_reader(s, &r, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(agg_last(r, &tp, a1), 8);
        sg_txn_abort(r);
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 8);
        sg_txn_abort(t);
        /* the reads above went through the cache */
        uint64_t hits, misses;
        size_t n;
        sg_aggc_stats(s, &hits, &misses, &n);
        ck_assert_uint_gt(hits, 0);
        sg_store_close(s);
        /* and what the commits left is what a reopened store holds */
        s = open_store(1 << 22, 1 << 22);
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 8);
        ck_assert_uint_eq(agg_last(t, &tp, a2), 0);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* A batch's aggregate writes, written back within the transaction
 * (sg_txn_flush, at each batch's end) and kept in the cache as clean
 * entries, are not committed: the transaction's abort (a failed batch
 * takes every batch since the last checkpoint) drops them too, so the
 * next transaction reads the committed value, not the aborted one. */
START_TEST(agg_cache_abort_after_flush_leaves_the_committed_value) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a1[32], a2[32];
        hash_of("agg1", a1);
        hash_of("agg2", a2);
        sg_txn_t *t = wtxn(s);
        agg_set(t, &tp, a1, 5);
        ck_assert_int_eq(sg_txn_flush(t, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = wtxn(s);
        /* two batches: each written back at its end, then the abort */
        agg_set(t, &tp, a1, 6);
        agg_set(t, &tp, a2, 1);
        ck_assert_int_eq(sg_txn_flush(t, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 6);
        agg_set(t, &tp, a1, 7);
        ck_assert_int_eq(sg_txn_flush(t, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 7);
        ck_assert_int_eq(sg_txn_flush(t, err, sizeof(err)), SG_OK);
        sg_txn_abort(t);
        t = wtxn(s);
        ck_assert_uint_eq(agg_last(t, &tp, a1), 5);
        ck_assert_uint_eq(agg_last(t, &tp, a2), 0);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

typedef struct agg_seen {
        unsigned n;
        uint64_t sum; /* of the L's */
} agg_seen_t;

static int agg_count_visit(void *opaque, const unsigned char ah[32],
                           const sg_agg_rec_t *rec) {
        (void)ah;
        agg_seen_t *w = opaque;
        w->n++;
        w->sum += rec->last_version;
        return 0;
}

static int dump_count_visit(void *opaque, int db, const void *key,
                            size_t key_len, const void *value,
                            size_t value_len) {
        (void)key, (void)key_len, (void)value, (void)value_len;
        if (db == SG_DB_AGG)
                ((agg_seen_t *)opaque)->n++;
        return 0;
}

/* The aggregate writes still in the cache are in LMDB before anything
 * walks the aggregate database in the same transaction: sg_agg_foreach,
 * the dump, the statistics; a delete (a restored tombstone) too. A
 * restore window's cursor writes past the cache leave no stale entry. */
START_TEST(agg_cache_flushed_before_walk) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a[3][32];
        hash_of("agg1", a[0]);
        hash_of("agg2", a[1]);
        hash_of("agg3", a[2]);
        sg_txn_t *t = wtxn(s);
        agg_set(t, &tp, a[0], 1);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        t = wtxn(s);
        agg_set(t, &tp, a[0], 10);
        agg_set(t, &tp, a[1], 20);
        agg_set(t, &tp, a[2], 30);
        agg_seen_t w = {0};
        ck_assert_int_eq(sg_agg_foreach(t, &tp, agg_count_visit, &w), SG_OK);
        ck_assert_uint_eq(w.n, 3);
        ck_assert_uint_eq(w.sum, 60);
        /* more writes after the walk, and a restored tombstone */
        agg_set(t, &tp, a[1], 21);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_AGG, a[2],
                                               SG_KEY_HASH_LEN, NULL, 0, err,
                                               sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(agg_last(t, &tp, a[2]), 0);
        w = (agg_seen_t){0};
        ck_assert_int_eq(sg_agg_foreach(t, &tp, agg_count_visit, &w), SG_OK);
        ck_assert_uint_eq(w.n, 2);
        ck_assert_uint_eq(w.sum, 31);
        agg_set(t, &tp, a[2], 33);
        w = (agg_seen_t){0};
        ck_assert_int_eq(
                sg_store_foreach(t, dump_count_visit, &w, err, sizeof(err)),
                SG_OK);
        ck_assert_uint_eq(w.n, 3);
        agg_set(t, &tp, a[0], 11);
        ck_assert_int_eq(sg_store_apply_change(t, &tp, SG_DB_AGG, a[0],
                                               SG_KEY_HASH_LEN, NULL, 0, err,
                                               sizeof(err)),
                         SG_OK);
        sg_db_stat_t st[SG_STORE_DB_CNT];
        ck_assert_int_eq(sg_store_db_stats(t, st, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(st[SG_STAT_AGG].entries, 2);
        /* a restore window writes a[1] through its own cursor: read after,
         * the window's value, not the cache's */
        agg_set(t, &tp, a[1], 22);
        sg_store_batch_t *b;
        ck_assert_int_eq(sg_store_batch_new(&b), SG_OK);
        sg_agg_rec_t nr = {.has_last = true, .last_version = 40};
        unsigned char v[SG_AGG_VALUE_MAX];
        size_t vl = sg_agg_encode(&nr, v);
        ck_assert_int_eq(sg_store_batch_add(b, t, &tp, SG_DB_AGG, a[1],
                                            SG_KEY_HASH_LEN, v, vl, err,
                                            sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_batch_flush(b, t, &tp, err, sizeof(err)),
                         SG_OK);
        sg_store_batch_destroy(b);
        ck_assert_uint_eq(agg_last(t, &tp, a[1]), 40);
        ck_assert_uint_eq(agg_last(t, &tp, a[2]), 33);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        w = (agg_seen_t){0};
        ck_assert_int_eq(sg_agg_foreach(t, &tp, agg_count_visit, &w), SG_OK);
        ck_assert_uint_eq(w.n, 2);
        ck_assert_uint_eq(w.sum, 73);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* A cache of 4 entries and 200 aggregates written twice in one
 * transaction: every read right, before and after the commit, and the
 * cache never holds more than its bound. */
START_TEST(agg_cache_bounded) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_store_set_agg_cache(s, 4);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char a[200][32];
        for (int i = 0; i < 200; i++) {
                char id[16];
                snprintf(id, sizeof(id), "agg%d", i);
                hash_of(id, a[i]);
        }
        sg_txn_t *t = wtxn(s);
        for (int round = 1; round <= 2; round++)
                for (int i = 0; i < 200; i++) {
                        ck_assert_uint_eq(agg_last(t, &tp, a[i]),
                                          round == 1 ? 0 : (uint64_t)i + 1);
                        agg_set(t, &tp, a[i], (uint64_t)(round * 1000 + i));
                        agg_set(t, &tp, a[i], (uint64_t)i + round);
                }
        for (int i = 0; i < 200; i++)
                ck_assert_uint_eq(agg_last(t, &tp, a[i]), (uint64_t)i + 2);
        uint64_t hits, misses;
        size_t n;
        sg_aggc_stats(s, &hits, &misses, &n);
        ck_assert_uint_le(n, 4);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        for (int i = 0; i < 200; i++)
                ck_assert_uint_eq(agg_last(t, &tp, a[i]), (uint64_t)i + 2);
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
                sg_parked_rec_t r = {.parked_at_ms = 1000 - i,
                                     .offset = i,
                                     .timestamp_ms = 9,
                                     .type = "t.x",
                                     .type_len = 3,
                                     .key = "k",
                                     .key_len = 1,
                                     .value = i == 1 ? NULL : "val",
                                     .value_len = i == 1 ? SIZE_MAX : 3,
                                     .headers = blob,
                                     .headers_len = blen,
                                     /* semantics §4b: v7 keeps its epoch */
                                     .has_epoch = i == 3,
                                     .epoch = i == 3 ? UINT64_MAX - 1 : 0};
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
        ck_assert_int_eq(sg_parked_get(t, &tp, a, 7, &g), SG_OK);
        ck_assert(g.has_epoch);
        ck_assert_uint_eq(g.epoch, UINT64_MAX - 1);
        ck_assert_int_eq(sg_parked_get(t, &tp, a, 256, &g), SG_OK);
        ck_assert(!g.has_epoch);
        ck_assert_uint_eq(g.value_len, 3);
        ck_assert_int_eq(memcmp(g.value, "val", 3), 0);
        ck_assert_uint_eq(g.type_len, 3);
        sg_header_t out[4];
        ck_assert_int_eq(sg_headers_parse(g.headers, g.headers_len, out, 4), 2);
        ck_assert_str_eq(out[0].name, "h1");
        ck_assert_int_eq(memcmp(out[0].value, "v1", 2), 0);
        ck_assert_ptr_null(out[1].value);
        ck_assert_int_eq(sg_headers_parse(g.headers, g.headers_len, out, 1),
                         -1);
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
        sg_meta_rec_t m = {.input_offset = 42,
                           .changelog_offset = -1,
                           .clock_ms = 7,
                           .parked_cnt = 3};
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
        /* expiry 10: its bucket [0, 1000) (a width of at least 1 s) has
         * passed at 1000 */
        int removed;
        ck_assert_int_eq(sg_dedup_sweep(t, &p1, 1000, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 1);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* The changelog id in the partition meta (store_int.h): kept and read back;
 * left out when there is none and from the changelog's copy; a value
 * written before the field existed (the same bytes without it) reads as
 * none; a bad flag is refused. */
START_TEST(meta_changelog_id) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = wtxn(s);
        sg_meta_rec_t m = {.input_offset = 42,
                           .changelog_offset = 9,
                           .changelog_epoch = -1,
                           .clock_ms = 7};
        snprintf(m.group, sizeof(m.group), "grp");
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        const void *v;
        size_t without, with;
        sg_meta_rec_t g;
        ck_assert_int_eq(sg_meta_get(t, &tp, &g), SG_OK);
        ck_assert(!g.has_changelog_id);
        ck_assert_int_eq(
                sg_store_get_change(t, &tp, SG_DB_META, "", 0, &v, &without),
                SG_OK);
        m.has_changelog_id = true;
        memset(m.changelog_id.id, 0xab, sizeof(m.changelog_id.id));
        m.changelog_id.offset = 5;
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_meta_get(t, &tp, &g), SG_OK);
        ck_assert(g.has_changelog_id);
        ck_assert_int_eq(g.changelog_id.offset, 5);
        ck_assert(memcmp(g.changelog_id.id, m.changelog_id.id,
                         sizeof(g.changelog_id.id)) == 0);
        ck_assert_int_eq(g.input_offset, 42);
        ck_assert_int_eq(g.changelog_offset, 9);
        ck_assert_int_eq(
                sg_store_get_change(t, &tp, SG_DB_META, "", 0, &v, &with),
                SG_OK);
        ck_assert_uint_eq(with, without + 1 + 16 + 8);
        unsigned char buf[1024];
        memcpy(buf, v, with);
        ck_assert_int_eq(sg_meta_decode(buf, without, &g, err, sizeof(err)),
                         SG_OK);
        ck_assert(!g.has_changelog_id);
        ck_assert_int_eq(g.input_offset, 42);
        buf[without] = 2;
        ck_assert_int_eq(sg_meta_decode(buf, with, &g, err, sizeof(err)),
                         SG_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err, "changelog id flag 2"));
        buf[without] = 1;
        memset(buf + with - 8, 0xff, 8); /* offset -1 */
        ck_assert_int_eq(sg_meta_decode(buf, with, &g, err, sizeof(err)),
                         SG_ERR_INVALID);
        sg_txn_abort(t);
        /* the changelog's copy leaves it out (an earlier version restoring
         * it would refuse the bytes) */
        t = wtxn(s);
        sg_txn_capture(t, true);
        ck_assert_int_eq(sg_meta_put(t, &tp, &m, err, sizeof(err)), SG_OK);
        const sg_change_t *ch;
        ck_assert_uint_eq(sg_txn_changes(t, &ch), 1);
        ck_assert_uint_eq(ch[0].value_len, without);
        ck_assert_int_eq(sg_meta_get(t, &tp, &g), SG_OK);
        ck_assert(g.has_changelog_id);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Fills a small map until MDB_MAP_FULL, grows, and redoes the same batch:
 * nothing of the batch is lost (semantics: grow and retry). */
#define PARK_BYTES 4000

/* One batch: @p n parked events "b/0".."b/n-1" of 4000 bytes of 'x' in
 * one write transaction; the commit's result (SG_ERR_MAP_FULL when the
 * map is full; the transaction is then aborted). */
static sg_err_t park_batch(sg_store_t *s, const sg_tp_t *tp, int b, int n) {
        static char big[PARK_BYTES];
        memset(big, 'x', sizeof(big));
        sg_txn_t *t = wtxn(s);
        sg_err_t e = SG_OK;
        for (int i = 0; i < n && !e; i++) {
                unsigned char a[32];
                char k[32];
                snprintf(k, sizeof(k), "%d/%d", b, i);
                hash_of(k, a);
                sg_parked_rec_t r = {.key = k,
                                     .key_len = strlen(k),
                                     .value = big,
                                     .value_len = sizeof(big)};
                e = sg_parked_put(t, tp, a, 1, &r, err, sizeof(err));
        }
        if (!e)
                return sg_txn_commit(t, err, sizeof(err));
        sg_txn_abort(t);
        return e;
}

/* A reader of another thread (the result query beside the Kafka loop)
 * while the store's thread writes and grows the map: sg_store_grow waits
 * for the reader's transaction (LMDB remaps the file), the reader always
 * sees whole records. Run it under -Db_sanitize=address (or thread) too. */
typedef struct reader_arg {
        sg_store_t *s;
        atomic_bool stop;
        long reads, parked_seen;
        char fail[512];
} reader_arg_t;

static int reader_parked(void *opaque, uint64_t version,
                         const sg_parked_rec_t *p) {
        reader_arg_t *ra = opaque;
        (void)version;
        const char *v = p->value;
        for (size_t i = 0; i < p->value_len; i++)
                if (v[i] != 'x')
                        return snprintf(ra->fail, sizeof(ra->fail),
                                        "parked byte %zu is %d", i, v[i]);
        ra->parked_seen++;
        return 0;
}

static void *reader_main(void *arg) {
        reader_arg_t *ra = arg;
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32], ah[32];
        hash_of("probe", kh);
        char es[256];
        while (!atomic_load(&ra->stop) && !ra->fail[0]) {
                sg_txn_t *t;
                if (sg_txn_begin_reader(ra->s, &t, es, sizeof(es))) {
                        snprintf(ra->fail, sizeof(ra->fail), "begin: %s", es);
                        break;
                }
                sg_dedup_rec_t g;
                if (sg_dedup_get(t, &tp, kh, &g) || g.expiry_ms != 105)
                        snprintf(ra->fail, sizeof(ra->fail), "probe: %s",
                                 sg_txn_errdetail(t));
                for (int b = 0; b < 16 && !ra->fail[0]; b++) {
                        char k[32];
                        snprintf(k, sizeof(k), "%d/%d", b, 7);
                        hash_of(k, ah);
                        if (sg_parked_foreach(t, &tp, ah, reader_parked, ra) &&
                            !ra->fail[0])
                                snprintf(ra->fail, sizeof(ra->fail),
                                         "parked walk: %s",
                                         sg_txn_errdetail(t));
                }
                sg_txn_abort(t);
                ra->reads++;
        }
        return NULL;
}

START_TEST(reader_thread_while_writing_and_growing) {
        sg_store_t *s = open_store(1 << 20, 1 << 18);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32];
        hash_of("probe", kh);
        sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED, .expiry_ms = 105};
        sg_txn_t *t = wtxn(s);
        ASSERT_OK(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), err);
        ASSERT_OK(sg_txn_commit(t, err, sizeof(err)), err);

        reader_arg_t ra = {.s = s};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, reader_main, &ra), 0);
        int grows = 0;
        for (int b = 0; b < 16 && !ra.fail[0]; b++) {
                for (int attempt = 0; attempt < 8; attempt++) {
                        sg_err_t e = park_batch(s, &tp, b, 100);
                        /* grow after every batch: every grow remaps */
                        ASSERT_OK(sg_store_grow(s, err, sizeof(err)), err);
                        grows++;
                        if (e == SG_OK)
                                break;
                        ck_assert_int_eq(e, SG_ERR_MAP_FULL);
                }
        }
        atomic_store(&ra.stop, true);
        pthread_join(th, NULL);
        ck_assert_msg(!ra.fail[0], "reader: %s", ra.fail);
        ck_assert_int_ge(grows, 16);
        ck_assert_int_gt(ra.reads, 0);
        ck_assert_int_gt(ra.parked_seen, 0);
        ck_assert_int_eq(sg_store_txns_open(s, false), 0);
        sg_store_close(s);
}
END_TEST

/* write_bytes of /proc/self/io: the bytes this process dirtied in the page
 * cache (counted when a page, or a whole folio, turns dirty); 0 unknown. */
static uint64_t dirtied_bytes(void) {
        FILE *f = fopen("/proc/self/io", "re");
        char line[128];
        unsigned long long v = 0;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "write_bytes: %llu", &v) == 1)
                        break;
        if (f)
                fclose(f);
        return (uint64_t)v;
}

/* A transaction that changes a few records of a large store dirties about
 * the pages it copies, not the kernel's folios around them: with readahead
 * on the map, Linux (6.x, ext4) holds the file's pages in folios of up to
 * 2 MiB, and the first write to a clean folio dirties, accounts and writes
 * back all of it (store_open.c: MDB_NORDAHEAD). Where the test directory's
 * file system counts no write_bytes (tmpfs) it passes without saying
 * anything. */
START_TEST(few_changes_dirty_few_pages) {
        sg_store_t *s = open_store(256u << 20, 64u << 20);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        enum { BATCHES = 48, AGGS = 1000, CHANGED = 16 };
        /* ~90 MiB written through the map in order, as a restore writes:
         * parked values of 4000 bytes, aggregates among them */
        for (int b = 0; b < BATCHES; b++) {
                ck_assert_int_eq(park_batch(s, &tp, b, 480), SG_OK);
                sg_txn_t *t = wtxn(s);
                for (int i = 0; i < AGGS; i++) {
                        char k[24];
                        unsigned char ah[32];
                        snprintf(k, sizeof(k), "agg-%d-%d", b, i);
                        hash_of(k, ah);
                        sg_agg_rec_t a = {.has_last = true, .last_version = 1};
                        ck_assert_int_eq(
                                sg_agg_put(t, &tp, ah, &a, 0, err, sizeof(err)),
                                SG_OK);
                }
                ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        }
        /* the store's pages written out: clean, as between checkpoints */
        char path[128];
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        int fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fdatasync(fd), 0);
        close(fd);
        uint64_t before = dirtied_bytes();
        sg_txn_t *t = wtxn(s);
        for (int i = 0; i < CHANGED; i++) {
                char k[24];
                unsigned char ah[32];
                snprintf(k, sizeof(k), "agg-%d-%d", i * (BATCHES / CHANGED), i);
                hash_of(k, ah);
                sg_agg_rec_t a = {.has_last = true, .last_version = 2};
                ck_assert_int_eq(
                        sg_agg_put(t, &tp, ah, &a, 0, err, sizeof(err)), SG_OK);
        }
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        uint64_t dirtied = dirtied_bytes() - before;
        /* a leaf and its branches a change, the free list, the meta
         * page: 25 pages of 4 KiB measured, 91 with readahead's folios */
        ck_assert_msg(dirtied <= 64 * 4096,
                      "%d changed records dirtied %llu KiB", CHANGED,
                      (unsigned long long)(dirtied >> 10));
        sg_store_close(s);
}
END_TEST

START_TEST(map_full_grow_and_retry) {
        sg_store_t *s = open_store(1 << 20, 1 << 21);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        int full = 0, batches = 0;
        for (int b = 0; b < 8; b++) {
                for (int attempt = 0; attempt < 3; attempt++) {
                        sg_err_t e = park_batch(s, &tp, b, 200);
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
                ck_assert_uint_eq(g.value_len, PARK_BYTES);
        }
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* sg_txn_changes(): the last change of each key, in the order the last
 * changes were written, among thousands of keys; one suffix in two
 * databases is two keys; a key deleted then written again is its value. */
START_TEST(changes_last_write_in_write_order) {
        sg_store_t *a = open_store(1 << 24, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 1);
        enum { N = 3000 };
        static unsigned char kh[N][32];
        char name[32];
        sg_txn_t *t = wtxn(a);
        sg_txn_capture(t, true);
        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "k%d", i);
                hash_of(name, kh[i]);
                sg_dedup_rec_t d = {.verdict = SG_DV_PARKED,
                                    .expiry_ms = 1000 + i};
                ck_assert_int_eq(
                        sg_dedup_put(t, &tp, kh[i], &d, err, sizeof(err)),
                        SG_OK);
        }
        for (int i = N - 1; i >= 0; i--) {
                if (i % 3)
                        continue;
                sg_dedup_rec_t d = {.verdict = SG_DV_APPLIED,
                                    .expiry_ms = 1000 + i};
                ck_assert_int_eq(
                        sg_dedup_put(t, &tp, kh[i], &d, err, sizeof(err)),
                        SG_OK);
        }
        sg_agg_rec_t r = {.has_last = true, .last_version = 2};
        ck_assert_int_eq(sg_agg_put(t, &tp, kh[5], &r, 0, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pr = {.parked_at_ms = 1, .value = "v", .value_len = 1};
        ck_assert_int_eq(sg_parked_put(t, &tp, kh[7], 6, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_del(t, &tp, kh[7], 6, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_put(t, &tp, kh[7], 6, &pr, err, sizeof(err)),
                         SG_OK);
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        ck_assert_uint_eq(n, N + 2);
        size_t at = 0;
        for (int pass = 0; pass < 2; pass++)
                for (int k = 0; k < N; k++) {
                        int i = pass ? N - 1 - k : k;
                        if ((i % 3 == 0) != (pass == 1))
                                continue;
                        const sg_change_t *c = &ch[at++];
                        ck_assert_int_eq(c->db, SG_DB_DEDUP);
                        ck_assert_uint_eq(c->key_len, tp.len + SG_KEY_HASH_LEN);
                        ck_assert_int_eq(memcmp((const char *)c->key + tp.len,
                                                kh[i], SG_KEY_HASH_LEN),
                                         0);
                        sg_dedup_rec_t g;
                        ck_assert_int_eq(sg_dedup_decode(c->value, c->value_len,
                                                         &g, err, sizeof(err)),
                                         SG_OK);
                        ck_assert_int_eq(g.verdict,
                                         pass ? SG_DV_APPLIED : SG_DV_PARKED);
                        ck_assert_int_eq(g.expiry_ms, 1000 + i);
                }
        ck_assert_int_eq(ch[N].db, SG_DB_AGG);
        ck_assert_int_eq(memcmp((const char *)ch[N].key + tp.len, kh[5],
                                SG_KEY_HASH_LEN),
                         0);
        ck_assert_int_eq(ch[N + 1].db, SG_DB_PARKED);
        ck_assert_ptr_nonnull(ch[N + 1].value);
        sg_txn_abort(t);
        sg_store_close(a);
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

/* A data_dir that cannot be made (a path through a file) is the
 * operator's to fix: SG_ERR_CONFIG (exit 2), naming the path in the way
 * and the errno; the check (--check-config) says the same and creates
 * nothing, and passes a directory that can be made. */
START_TEST(open_refuses_a_data_dir_under_a_file) {
        char base[64], file[128], sub[160], fresh[160];
        tu_tmpdir(base, sizeof(base), "store_under_file");
        snprintf(file, sizeof(file), "%s/a-file", base);
        snprintf(sub, sizeof(sub), "%s/sub/dir", file);
        FILE *f = fopen(file, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        char want[512];
        snprintf(want, sizeof(want),
                 "data_dir %s cannot be created: %s is not a directory "
                 "(ENOTDIR)",
                 sub, file);
        sg_store_t *s = NULL;
        ck_assert_int_eq(
                sg_store_open(sub, 1 << 20, 1 << 20, &s, err, sizeof(err)),
                SG_ERR_CONFIG);
        ck_assert_str_eq(err, want);
        int e = 0;
        err[0] = '\0';
        ck_assert_int_eq(sg_store_dir_check(sub, &e, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_str_eq(err, want);
        ck_assert_int_eq(e, ENOTDIR);
        /* the file itself as the data_dir, also written with a slash */
        ck_assert_int_eq(sg_store_dir_check(file, &e, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(strstr(err, "cannot be used"));
        char slashed[160];
        snprintf(slashed, sizeof(slashed), "%s/", file);
        ck_assert_int_eq(sg_store_dir_check(slashed, &e, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_int_eq(e, ENOTDIR);
        /* a directory that can be made: nothing made by the check */
        snprintf(fresh, sizeof(fresh), "%s/new/dir/", base);
        ck_assert_int_eq(sg_store_dir_check(fresh, &e, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(e, 0);
        struct stat st;
        snprintf(fresh, sizeof(fresh), "%s/new", base);
        ck_assert_int_ne(stat(fresh, &st), 0);
        tu_rmrf(base);
}
END_TEST

/* Changes captured in one store, applied to another (the changelog path),
 * give the same state and the same derived indexes. */
START_TEST(capture_and_apply_changes) {
        sg_store_t *a = open_store(1 << 22, 1 << 22);
        char dir2[128];
        snprintf(dir2, sizeof(dir2), "%s/replica", dir);
        sg_store_t *b;
        ck_assert_int_eq(
                sg_store_open(dir2, 1 << 22, 1 << 22, &b, err, sizeof(err)),
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
        sg_agg_rec_t r = {.has_last = true,
                          .last_version = 4,
                          .parked_cnt = 1,
                          .parked_since_ms = 77,
                          .aggregate_len = 3};
        memcpy(r.aggregate, "agg", 3);
        ck_assert_int_eq(sg_agg_put(t, &tp, ag, &r, 0, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pr = {.parked_at_ms = 77,
                              .key = "agg",
                              .key_len = 3,
                              .value = "v6",
                              .value_len = 2};
        ck_assert_int_eq(sg_parked_put(t, &tp, ag, 6, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_put(t, &tp, ag, 7, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_parked_del(t, &tp, ag, 7, err, sizeof(err)), SG_OK);
        sg_snapreq_rec_t sr = {.seq = 3,
                               .attempt = 1,
                               .state = SG_SNAP_INFLIGHT,
                               .due_ms = 900,
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
                ck_assert_int_eq(sg_store_apply_change(
                                         u, &tp, ch[i].db,
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
        /* expiry 500: its bucket [0, 1000) has passed at 1000 */
        int removed;
        ck_assert_int_eq(sg_dedup_sweep(u, &tp, 1000, 1000, 10, &removed, err,
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

/* The changelog value of store key @p k after @p put ran in a captured
 * write transaction of @p s (committed), copied to @p out; its length. */
static size_t captured_value(sg_store_t *s, const sg_tp_t *tp, int db,
                             const unsigned char k[32], const sg_dedup_rec_t *d,
                             const sg_agg_rec_t *r, unsigned char *out) {
        sg_txn_t *t = wtxn(s);
        sg_txn_capture(t, true);
        if (db == SG_DB_DEDUP)
                ck_assert_int_eq(sg_dedup_put(t, tp, k, d, err, sizeof(err)),
                                 SG_OK);
        else {
                sg_agg_rec_t old;
                int64_t since = sg_agg_get(t, tp, k, &old) == SG_OK
                                        ? sg_agg_indexed_since(&old)
                                        : 0;
                ck_assert_int_eq(
                        sg_agg_put(t, tp, k, r, since, err, sizeof(err)),
                        SG_OK);
        }
        const sg_change_t *ch;
        ck_assert_uint_eq(sg_txn_changes(t, &ch), 1);
        size_t n = ch[0].value_len;
        memcpy(out, ch[0].value, n);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        return n;
}

/* Restore applies records of one key one after another (a key changed in
 * several batches): the first creates the key and its index entry, each
 * later one replaces the value and moves the entry, a tombstone removes
 * both — the same state as the writer's, however the apply finds the key
 * absent or present (semantics §6). */
START_TEST(apply_changes_to_one_key_move_its_index) {
        sg_store_t *a = open_store(1 << 22, 1 << 22);
        char dir2[128];
        snprintf(dir2, sizeof(dir2), "%s/replica", dir);
        sg_store_t *b;
        ck_assert_int_eq(
                sg_store_open(dir2, 1 << 22, 1 << 22, &b, err, sizeof(err)),
                SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 1);
        unsigned char k[32], ag[32], v1[256], v2[256], a1[512], a2[512];
        hash_of("k", k);
        hash_of("agg", ag);
        sg_dedup_rec_t d = {.verdict = SG_DV_PARKED, .expiry_ms = 500};
        size_t n1 = captured_value(a, &tp, SG_DB_DEDUP, k, &d, NULL, v1);
        d.verdict = SG_DV_APPLIED;
        d.expiry_ms = 900;
        size_t n2 = captured_value(a, &tp, SG_DB_DEDUP, k, &d, NULL, v2);
        sg_agg_rec_t r = {.has_last = true,
                          .last_version = 4,
                          .parked_cnt = 1,
                          .parked_since_ms = 77,
                          .aggregate_len = 3};
        memcpy(r.aggregate, "agg", 3);
        size_t m1 = captured_value(a, &tp, SG_DB_AGG, ag, NULL, &r, a1);
        r.last_version = 6;
        r.parked_since_ms = 88;
        size_t m2 = captured_value(a, &tp, SG_DB_AGG, ag, NULL, &r, a2);

        sg_txn_t *u = wtxn(b);
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_DEDUP, k, 32, v1,
                                               n1, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_DEDUP, k, 32, v2,
                                               n2, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_AGG, ag, 32, a1,
                                               m1, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_AGG, ag, 32, a2,
                                               m2, err, sizeof(err)),
                         SG_OK);
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(u, &tp, k, &g), SG_OK);
        ck_assert_int_eq(g.verdict, SG_DV_APPLIED);
        ck_assert_int_eq(g.expiry_ms, 900);
        sg_agg_rec_t ga;
        ck_assert_int_eq(sg_agg_get(u, &tp, ag, &ga), SG_OK);
        ck_assert_uint_eq(ga.last_version, 6);
        /* one since entry, the second's */
        unsigned char h[32];
        int64_t at;
        ck_assert_int_eq(sg_since_first(u, &tp, 80, h, &at), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_since_first(u, &tp, 100, h, &at), SG_OK);
        ck_assert_int_eq(at, 88);
        /* one expiry entry, the second's: nothing expires at 600 */
        int removed = -1;
        ck_assert_int_eq(sg_dedup_sweep(u, &tp, 600, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 0);
        ck_assert_int_eq(sg_dedup_get(u, &tp, k, &g), SG_OK);
        /* tombstones remove the keys and their entries */
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_DEDUP, k, 32, NULL,
                                               0, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_apply_change(u, &tp, SG_DB_AGG, ag, 32, NULL,
                                               0, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_dedup_get(u, &tp, k, &g), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_since_first(u, &tp, 100, h, &at), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_dedup_sweep(u, &tp, 2000, 1000, 10, &removed, err,
                                        sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(removed, 0);
        sg_txn_abort(u);
        sg_store_close(a);
        sg_store_close(b);
}
END_TEST

/* A store's whole contents as sg_store_foreach() gives them: kind, key
 * and value of each entry, concatenated. */
typedef struct dump_buf {
        unsigned char *p;
        size_t len, cap, entries;
} dump_buf_t;

static int dump_entry(void *opaque, int db, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        dump_buf_t *d = opaque;
        size_t need = d->len + 1 + 8 + key_len + value_len;
        if (need > d->cap) {
                d->cap = need * 2;
                d->p = realloc(d->p, d->cap);
                ck_assert_ptr_nonnull(d->p);
        }
        d->p[d->len++] = (unsigned char)db;
        unsigned char l[8] = {(unsigned char)key_len, (unsigned char)value_len,
                              (unsigned char)(value_len >> 8)};
        memcpy(d->p + d->len, l, 8);
        d->len += 8;
        memcpy(d->p + d->len, key, key_len);
        d->len += key_len;
        memcpy(d->p + d->len, value, value_len);
        d->len += value_len;
        d->entries++;
        return 0;
}

static void dump_store(const char *d, dump_buf_t *out) {
        sg_store_t *s;
        sg_txn_t *t;
        memset(out, 0, sizeof(*out));
        ck_assert_int_eq(sg_store_open_readonly(d, &s, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_store_foreach(t, dump_entry, out, err, sizeof(err)),
                         SG_OK);
        sg_txn_abort(t);
        sg_store_close(s);
}

/* The closed stores in @p d1 and @p d2 hold the same state: every kind,
 * derived indexes included (however the dedup keys are spread over their
 * segments). */
static void assert_same_store(const char *d1, const char *d2) {
        dump_buf_t a, b;
        dump_store(d1, &a);
        dump_store(d2, &b);
        ck_assert_uint_gt(a.entries, 0);
        ck_assert_msg(a.entries == b.entries, "%zu entries against %zu",
                      a.entries, b.entries);
        ck_assert_msg(a.len == b.len && !memcmp(a.p, b.p, a.len),
                      "the stores differ");
        free(a.p);
        free(b.p);
}

/* A restore window applied as a batch (sg_store_batch_add, then
 * sg_store_batch_flush in key order, the last record of each key) leaves
 * every database — indexes included — as applying each record in order
 * does: keys that exist before the window, keys written several times in
 * one window and in several, tombstones of present and absent keys, and a
 * kind the batch applies at once (semantics §6). Run 1: every key shares
 * its first two bytes, half of them their first eight (the flush's sort
 * buckets keys by their first bits: one crowded bucket, keys told apart
 * only by their last bytes), and the dedup records' expiries fall in five
 * buckets (the new keys are written bucket by bucket). */
START_TEST(restore_batch_leaves_the_state_of_one_by_one) {
        sg_store_t *a = open_store(1 << 22, 1 << 22);
        char d1[128], d2[128];
        snprintf(d1, sizeof(d1), "%s/one", dir);
        snprintf(d2, sizeof(d2), "%s/batch", dir);
        sg_store_t *b1, *b2;
        ck_assert_int_eq(
                sg_store_open(d1, 1 << 22, 1 << 22, &b1, err, sizeof(err)),
                SG_OK);
        ck_assert_int_eq(
                sg_store_open(d2, 1 << 22, 1 << 22, &b2, err, sizeof(err)),
                SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 3);
        enum { KEYS = 24, RECS = 600 };
        static unsigned char vals[RECS][512];
        size_t lens[RECS];
        int dbs[RECS];
        unsigned char keys[RECS][32];
        bool tomb[RECS];
        uint64_t x = 12345;
        for (int i = 0; i < RECS; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                unsigned r = (unsigned)(x >> 33);
                char name[32];
                dbs[i] = r % 2 ? SG_DB_DEDUP : SG_DB_AGG;
                snprintf(name, sizeof(name), "%c%u", dbs[i] ? 'a' : 'd',
                         (r >> 1) % KEYS);
                hash_of(name, keys[i]);
                if (_i == 1) {
                        keys[i][0] = 0x5a;
                        keys[i][1] = 0x01;
                        if ((r >> 1) % KEYS % 2)
                                memset(keys[i] + 2, 0x77, 6);
                }
                tomb[i] = (r >> 8) % 7 == 0;
                lens[i] = 0;
                if (tomb[i])
                        continue;
                if (dbs[i] == SG_DB_DEDUP) {
                        sg_dedup_rec_t d = {.verdict = SG_DV_APPLIED,
                                            .first_seen_ms = i,
                                            .expiry_ms = 1000 + (r >> 12) % 5};
                        if (_i == 1) /* and five expiry buckets */
                                d.expiry_ms = 1000 + (r >> 12) % 5 * 5000;
                        lens[i] = captured_value(a, &tp, SG_DB_DEDUP, keys[i],
                                                 &d, NULL, vals[i]);
                } else {
                        sg_agg_rec_t g = {
                                .has_last = true,
                                .last_version = (uint64_t)i,
                                .parked_cnt = (r >> 12) % 2,
                                .parked_since_ms =
                                        (r >> 12) % 2 ? 50 + (r >> 14) % 4 : 0,
                                .aggregate_len = 3};
                        memcpy(g.aggregate, "agg", 3);
                        lens[i] = captured_value(a, &tp, SG_DB_AGG, keys[i],
                                                 NULL, &g, vals[i]);
                }
        }
        sg_parked_rec_t pr = {.parked_at_ms = 7,
                              .key = "k",
                              .key_len = 1,
                              .value = "v",
                              .value_len = 1};
        unsigned char pk[40], pv[256];
        memcpy(pk, keys[0], 32);
        memset(pk + 32, 0, 8);
        pk[39] = 9;
        sg_txn_t *t = wtxn(a);
        sg_txn_capture(t, true);
        ck_assert_int_eq(
                sg_parked_put(t, &tp, keys[0], 9, &pr, err, sizeof(err)),
                SG_OK);
        const sg_change_t *ch;
        ck_assert_uint_eq(sg_txn_changes(t, &ch), 1);
        size_t pvl = ch[0].value_len;
        memcpy(pv, ch[0].value, pvl);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);

        /* the first 100 records are there before (one by one in both) */
        sg_txn_t *u1 = wtxn(b1), *u2 = wtxn(b2);
        for (int i = 0; i < 100; i++) {
                ck_assert_int_eq(
                        sg_store_apply_change(u1, &tp, dbs[i], keys[i], 32,
                                              tomb[i] ? NULL : vals[i], lens[i],
                                              err, sizeof(err)),
                        SG_OK);
                ck_assert_int_eq(
                        sg_store_apply_change(u2, &tp, dbs[i], keys[i], 32,
                                              tomb[i] ? NULL : vals[i], lens[i],
                                              err, sizeof(err)),
                        SG_OK);
        }
        sg_store_batch_t *bt;
        ck_assert_int_eq(sg_store_batch_new(&bt), SG_OK);
        for (int i = 100; i < RECS; i++) {
                ck_assert_int_eq(
                        sg_store_apply_change(u1, &tp, dbs[i], keys[i], 32,
                                              tomb[i] ? NULL : vals[i], lens[i],
                                              err, sizeof(err)),
                        SG_OK);
                ck_assert_int_eq(sg_store_batch_add(bt, u2, &tp, dbs[i],
                                                    keys[i], 32,
                                                    tomb[i] ? NULL : vals[i],
                                                    lens[i], err, sizeof(err)),
                                 SG_OK);
                if (i == 300) { /* a kind applied at once */
                        ck_assert_int_eq(sg_store_apply_change(
                                                 u1, &tp, SG_DB_PARKED, pk, 40,
                                                 pv, pvl, err, sizeof(err)),
                                         SG_OK);
                        ck_assert_int_eq(sg_store_batch_add(
                                                 bt, u2, &tp, SG_DB_PARKED, pk,
                                                 40, pv, pvl, err, sizeof(err)),
                                         SG_OK);
                }
                if (i % 173 == 0) /* several windows */
                        ck_assert_int_eq(sg_store_batch_flush(bt, u2, &tp, err,
                                                              sizeof(err)),
                                         SG_OK);
        }
        ck_assert_uint_gt(sg_store_batch_count(bt), 0);
        ck_assert_int_eq(sg_store_batch_flush(bt, u2, &tp, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(sg_store_batch_count(bt), 0);
        /* a record that does not decode is refused when added */
        ck_assert_int_eq(sg_store_batch_add(bt, u2, &tp, SG_DB_DEDUP, keys[1],
                                            32, "y", 1, err, sizeof(err)),
                         SG_ERR_INVALID);
        ck_assert_uint_eq(sg_store_batch_count(bt), 0);
        sg_store_batch_destroy(bt);
        ck_assert_int_eq(sg_txn_commit(u1, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_commit(u2, err, sizeof(err)), SG_OK);
        sg_store_close(a);
        sg_store_close(b1);
        sg_store_close(b2);
        assert_same_store(d1, d2);
}
END_TEST

/* A restore window's new dedup keys that cannot be appended to their
 * bucket's full open segment go to a new segment (the full one frozen, as
 * a sweep would), appended in key order: the state is the one applying
 * each record in order leaves, every key is found where it lives (new,
 * updated in a frozen segment, tombstoned there), the frozen segments
 * seal as any, and a window of few new keys, or a bucket whose open
 * segment is not full, inserts as before. */
START_TEST(restore_batch_freezes_a_full_segment) {
        char d1[128], d2[128];
        snprintf(d1, sizeof(d1), "%s/one", dir);
        snprintf(d2, sizeof(d2), "%s/batch", dir);
        sg_store_t *b1, *b2;
        ck_assert_int_eq(
                sg_store_open(d1, 1 << 26, 1 << 24, &b1, err, sizeof(err)),
                SG_OK);
        ck_assert_int_eq(
                sg_store_open(d2, 1 << 26, 1 << 24, &b2, err, sizeof(err)),
                SG_OK);
        sg_store_set_segment_keys(b1, 2000);
        sg_store_set_segment_keys(b2, 2000);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 1);
        enum { WINDOWS = 4, NEW = 6000 };
        sg_store_batch_t *bt;
        ck_assert_int_eq(sg_store_batch_new(&bt), SG_OK);
        sg_store_batch_expect(bt, WINDOWS * NEW);
        sg_txn_t *u1 = wtxn(b1);
        int next = 0;
        for (int w = 0; w < WINDOWS; w++) {
                sg_txn_t *u2 = wtxn(b2);
                /* the last window brings few new keys: no segment for it */
                int fresh = w == WINDOWS - 1 ? 100 : NEW;
                int recs = fresh + (w ? 700 : 0);
                for (int i = 0; i < recs; i++) {
                        char name[32];
                        unsigned char kh[32], v[SG_DEDUP_VALUE_LEN];
                        /* new keys, then updates and tombstones of earlier
                         * windows' keys (in frozen segments by now) */
                        int key = i < fresh ? next + i : (i * 7919) % next;
                        bool tomb = i >= fresh && i % 3 == 0;
                        snprintf(name, sizeof(name), "key-%d", key);
                        hash_of(name, kh);
                        sg_dedup_rec_t d = {.verdict = SG_DV_APPLIED,
                                            .first_seen_ms = 1000 + w,
                                            .expiry_ms = 5000 + w};
                        memset(d.digest, w + 1, sizeof(d.digest));
                        size_t vl = sg_dedup_encode(&d, v);
                        ck_assert_int_eq(
                                sg_store_apply_change(u1, &tp, SG_DB_DEDUP, kh,
                                                      16, tomb ? NULL : v, vl,
                                                      err, sizeof(err)),
                                SG_OK);
                        ck_assert_int_eq(sg_store_batch_add(bt, u2, &tp,
                                                            SG_DB_DEDUP, kh, 16,
                                                            tomb ? NULL : v, vl,
                                                            err, sizeof(err)),
                                         SG_OK);
                }
                next += fresh;
                ck_assert_int_eq(
                        sg_store_batch_flush(bt, u2, &tp, err, sizeof(err)),
                        SG_OK);
                sg_seg_stat_t ss;
                ck_assert_int_eq(sg_dedup_seg_stat(u2, &tp, &ss), SG_OK);
                /* a full open segment (2,000 keys) frozen per window of
                 * 6,000 new keys; the few keys of the last one inserted */
                ck_assert_int_eq(ss.open, 1);
                ck_assert_int_eq(ss.frozen, w < WINDOWS - 1 ? w : w - 1);
                ck_assert_int_eq(sg_txn_commit(u2, err, sizeof(err)), SG_OK);
        }
        ck_assert_int_eq(sg_txn_commit(u1, err, sizeof(err)), SG_OK);
        sg_store_batch_destroy(bt);
        /* every key found in the batch's store as in the other */
        sg_txn_t *r1, *r2;
        ck_assert_int_eq(sg_txn_begin(b1, false, &r1, err, sizeof(err)), SG_OK);
        ck_assert_int_eq(sg_txn_begin(b2, false, &r2, err, sizeof(err)), SG_OK);
        for (int k = 0; k < next; k++) {
                char name[32];
                unsigned char kh[32];
                snprintf(name, sizeof(name), "key-%d", k);
                hash_of(name, kh);
                sg_dedup_rec_t x, y;
                sg_err_t e1 = sg_dedup_get(r1, &tp, kh, &x);
                sg_err_t e2 = sg_dedup_get(r2, &tp, kh, &y);
                ck_assert_int_eq(e1, e2);
                if (e1 == SG_OK)
                        ck_assert(x.expiry_ms == y.expiry_ms &&
                                  !memcmp(x.digest, y.digest, 32));
        }
        sg_txn_abort(r1);
        sg_txn_abort(r2);
        /* the sweeps seal the frozen segments; the state stays */
        for (int i = 0; i < 40; i++) {
                sg_txn_t *u = wtxn(b2);
                int removed;
                ck_assert_int_eq(sg_dedup_sweep(u, &tp, 2000, 4000, 1000,
                                                &removed, err, sizeof(err)),
                                 SG_OK);
                ck_assert_int_eq(removed, 0);
                ck_assert_int_eq(sg_txn_commit(u, err, sizeof(err)), SG_OK);
        }
        sg_txn_t *u = wtxn(b2);
        sg_seg_stat_t ss;
        ck_assert_int_eq(sg_dedup_seg_stat(u, &tp, &ss), SG_OK);
        ck_assert_int_eq(ss.frozen, 0);
        ck_assert_int_ge(ss.sealed, 1);
        sg_txn_abort(u);
        sg_store_close(b1);
        sg_store_close(b2);
        assert_same_store(d1, d2);
}
END_TEST

/* One writer per data_dir: a second open fails while the first holds it,
 * with its own code (the daemon exits 2 on it: an operator's mistake). */
START_TEST(data_dir_locked_by_one_writer) {
        sg_store_t *a = open_store(1 << 20, 1 << 20), *b = NULL;
        ck_assert_int_eq(
                sg_store_open(dir, 1 << 20, 1 << 20, &b, err, sizeof(err)),
                SG_ERR_LOCKED);
        ck_assert_ptr_nonnull(strstr(err, "in use by another seqgate"));
        /* the probe (--check-config) sees it, in the same words, and
         * leaves the holder holding */
        char perr[4200] = "";
        ck_assert_int_eq(sg_store_lock_probe(dir, perr, sizeof(perr)),
                         SG_ERR_LOCKED);
        char pid[48];
        snprintf(pid, sizeof(pid), "locked, by pid %ld)", (long)getpid());
        ck_assert_msg(strstr(perr, "in use by another seqgate") &&
                              strstr(perr, pid),
                      "%s", perr);
        ck_assert_int_eq(
                sg_store_open(dir, 1 << 20, 1 << 20, &b, err, sizeof(err)),
                SG_ERR_LOCKED);
        sg_store_close(a);
        ck_assert_int_eq(sg_store_lock_probe(dir, perr, sizeof(perr)), SG_OK);
        b = open_store(1 << 20, 1 << 20); /* released on close */
        sg_store_close(b);
}
END_TEST

/* ---- changelog records that seqgate did not write ------------------------ */

/* A valid value of each kind, captured as the changelog would carry it. */
typedef struct kind_val {
        int db;
        unsigned char suffix[64];
        size_t suffix_len;
        unsigned char v[2048];
        size_t len;
} kind_val_t;

static kind_val_t kinds[5];

static void capture_kinds(sg_store_t *s, const sg_tp_t *tp) {
        unsigned char h[32];
        hash_of("agg", h);
        sg_header_t hs[] = {{"ce_id", "e1", 2}, {"x", NULL, 0}};
        void *blob;
        size_t blen;
        ck_assert_int_eq(sg_headers_serialize(hs, 2, &blob, &blen), SG_OK);
        sg_txn_t *t = wtxn(s);
        sg_txn_capture(t, true);
        sg_dedup_rec_t d = {
                .verdict = SG_DV_PARKED, .first_seen_ms = 10, .expiry_ms = 500};
        ck_assert_int_eq(sg_dedup_put(t, tp, h, &d, err, sizeof(err)), SG_OK);
        sg_agg_rec_t a = {.has_last = true,
                          .last_version = 4,
                          .parked_cnt = 1,
                          .parked_bytes = 3,
                          .parked_since_ms = 77,
                          .skip_from = 2,
                          .skip_to = 3,
                          .aggregate_len = 3};
        memcpy(a.aggregate, "agg", 3);
        snprintf(a.state, sizeof(a.state), "PAID");
        ck_assert_int_eq(sg_agg_put(t, tp, h, &a, 0, err, sizeof(err)), SG_OK);
        sg_parked_rec_t pr = {.parked_at_ms = 77,
                              .type = "t",
                              .type_len = 1,
                              .key = "agg",
                              .key_len = 3,
                              .value = "v6",
                              .value_len = 2,
                              .headers = blob,
                              .headers_len = blen};
        ck_assert_int_eq(sg_parked_put(t, tp, h, 6, &pr, err, sizeof(err)),
                         SG_OK);
        sg_meta_rec_t m = {
                .input_offset = 5, .changelog_offset = 9, .clock_ms = 100};
        snprintf(m.group, sizeof(m.group), "g");
        ck_assert_int_eq(sg_meta_put(t, tp, &m, err, sizeof(err)), SG_OK);
        sg_snapreq_rec_t sr = {.seq = 3,
                               .attempt = 1,
                               .state = SG_SNAP_INFLIGHT,
                               .issued_at_ms = 50,
                               .sent_at_ms = 50,
                               .due_ms = 900,
                               .aggregate_len = 3};
        memcpy(sr.aggregate, "agg", 3);
        ck_assert_int_eq(sg_snapreq_put(t, tp, h, &sr, 0, err, sizeof(err)),
                         SG_OK);
        free(blob);
        const sg_change_t *ch;
        size_t n = sg_txn_changes(t, &ch);
        ck_assert_uint_eq(n, 5);
        for (size_t i = 0; i < n; i++) {
                kind_val_t *k = &kinds[i];
                k->db = ch[i].db;
                k->suffix_len = ch[i].key_len - tp->len;
                memcpy(k->suffix, (const char *)ch[i].key + tp->len,
                       k->suffix_len);
                ck_assert_uint_le(ch[i].value_len, sizeof(k->v));
                memcpy(k->v, ch[i].value, ch[i].value_len);
                k->len = ch[i].value_len;
        }
        sg_txn_abort(t);
}

static const kind_val_t *kind(int db) {
        for (int i = 0; i < 5; i++)
                if (kinds[i].db == db)
                        return &kinds[i];
        ck_abort_msg("no captured value of database %d", db);
        return NULL;
}

static void be32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
}

/* Applies @p v (a corrupted copy of a valid value) and expects it refused
 * with a reason, before anything of it was written. */
static void refused(sg_store_t *s, const sg_tp_t *tp, const kind_val_t *v,
                    const char *what) {
        sg_txn_t *t = wtxn(s);
        err[0] = '\0';
        sg_err_t e =
                sg_store_apply_change(t, tp, v->db, v->suffix, v->suffix_len,
                                      v->v, v->len, err, sizeof(err));
        ck_assert_msg(e == SG_ERR_INVALID, "%s: applied (%d)", what, e);
        ck_assert_msg(err[0] != '\0', "%s: no reason given", what);
        /* nothing of it was written, index included */
        unsigned char h[32];
        int64_t at;
        hash_of("agg", h);
        sg_agg_rec_t a;
        ck_assert_msg(sg_agg_get(t, tp, h, &a) == SG_ERR_NOT_FOUND,
                      "%s: half-written aggregate", what);
        ck_assert_msg(sg_since_first(t, tp, INT64_MAX, h, &at) ==
                              SG_ERR_NOT_FOUND,
                      "%s: half-written since index", what);
        sg_parked_rec_t pr;
        ck_assert_msg(sg_parked_get(t, tp, h, 6, &pr) == SG_ERR_NOT_FOUND,
                      "%s: half-written parked event", what);
        sg_txn_abort(t);
}

/* Every decoded field of every changelog value kind is checked against the
 * record's own length and range (the changelog is input from the network):
 * a record seqgate did not write is refused at restore time, with a reason. */
START_TEST(apply_change_refuses_corrupt_records) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        capture_kinds(s, &tp);
        kind_val_t v;
        /* dedup: digest 16 | verdict | first seen u48 | expiry u56 */
        v = *kind(SG_DB_DEDUP);
        v.v[16] = 0;
        refused(s, &tp, &v, "dedup verdict 0");
        v.v[16] = 9;
        refused(s, &tp, &v, "dedup verdict 9");
        v = *kind(SG_DB_DEDUP);
        v.v[23] = 0x80;
        refused(s, &tp, &v, "dedup expiry past the longest delay");
        v.len++;
        refused(s, &tp, &v, "dedup trailing byte");
        /* aggregate (store_int.h AG_* layout): 0x8b (last, state, more) |
         * 0x1a (parked, skip, id) | last 4 | state 4 "PAID" | parked 1, 3
         * bytes, since 77 | skip 2, +1 | id 3 "agg" */
        static const unsigned char agg3[] = {0x8b, 0x1a, 4,   4,   'P', 'A',
                                             'I',  'D',  1,   3,   77,  2,
                                             1,    3,    'a', 'g', 'g'};
        v = *kind(SG_DB_AGG);
        ck_assert_uint_eq(v.len, sizeof(agg3));
        ck_assert_int_eq(memcmp(v.v, agg3, sizeof(agg3)), 0);
        v.v[0] |= 0x10;
        refused(s, &tp, &v, "aggregate unknown field");
        v = *kind(SG_DB_AGG);
        v.v[1] |= 0x40;
        refused(s, &tp, &v, "aggregate unknown field of the second byte");
        v = *kind(SG_DB_AGG);
        v.v[11] = 0; /* skip from 0 */
        refused(s, &tp, &v, "aggregate skip range from 0");
        v = *kind(SG_DB_AGG);
        v.v[v.len++] = 'x';
        refused(s, &tp, &v, "aggregate trailing byte");
        v = *kind(SG_DB_AGG);
        v.v[3] = 200; /* state length past the value */
        refused(s, &tp, &v, "aggregate state length");
        v = *kind(SG_DB_AGG);
        v.v[4] = '\0'; /* a NUL inside the state name */
        refused(s, &tp, &v, "aggregate state with NUL");
        v = *kind(SG_DB_AGG);
        v.len = 10;
        refused(s, &tp, &v, "aggregate too short");
        v = *kind(SG_DB_AGG);
        v.v[2] = 0x84; /* last: 0x84 0x04, then the state length... */
        refused(s, &tp, &v, "aggregate varint running on");
        v = *kind(SG_DB_AGG);
        memmove(v.v + 3, v.v + 2, v.len - 2);
        v.v[2] = 0x84; /* last 4 as 0x84 0x00: a redundant zero group */
        v.v[3] = 0;
        v.len++;
        refused(s, &tp, &v, "aggregate varint not minimal");
        v = *kind(SG_DB_AGG);
        v.v[13] = 200; /* id length past the value */
        refused(s, &tp, &v, "aggregate id length");
        /* parked since past the year 9999: 2^48 as a varint */
        v = *kind(SG_DB_AGG);
        static const unsigned char big[] = {0x80, 0x80, 0x80, 0x80,
                                            0x80, 0x80, 0x80, 0x01};
        memmove(v.v + 10 + sizeof(big), v.v + 11, v.len - 11);
        memcpy(v.v + 10, big, sizeof(big));
        v.len += sizeof(big) - 1;
        refused(s, &tp, &v, "aggregate parked since past 9999");
        /* store format 2's value of the same aggregate: has_last u8 |
         * last u64 | flags u32 | parked_cnt u32 | parked_bytes u64 |
         * since i64 | gap_reported i64 | skip_from u64 | skip_to u64 |
         * state_len u8 | state | agg_len u16 | agg */
        kind_val_t v2 = *kind(SG_DB_AGG);
        memset(v2.v, 0, 60);
        v2.v[0] = 1;
        v2.v[8] = 4;
        v2.v[16] = 1;
        v2.v[24] = 3;
        v2.v[32] = 77;
        v2.v[48] = 2;
        v2.v[56] = 3;
        v2.v[57] = 4;
        memcpy(v2.v + 58, "PAID", 4);
        v2.v[62] = 0;
        v2.v[63] = 3;
        memcpy(v2.v + 64, "agg", 3);
        v2.len = 67;
        v = v2;
        v.v[0] = 2;
        refused(s, &tp, &v, "format 2 aggregate has_last 2");
        v = v2;
        v.v[12] = 0x80;
        refused(s, &tp, &v, "format 2 aggregate unknown flag");
        v = v2;
        v.v[41 + 7] = 9; /* skip_from 9 > skip_to 3 */
        refused(s, &tp, &v, "format 2 aggregate skip range reversed");
        v = v2;
        v.v[57] = 200;
        refused(s, &tp, &v, "format 2 aggregate state length");
        v = v2;
        v.v[25] = 0x01;
        refused(s, &tp, &v, "format 2 aggregate parked since past 9999");
        /* parked: tag 0x03 | 3 × i64 | key hash 16 | 4 × (u32 length |
         * bytes) */
        const kind_val_t *pk = kind(SG_DB_PARKED);
        ck_assert_int_eq(pk->v[0], 0x03);
        size_t toff = 1 + 24 + SG_KEY_HASH_LEN;     /* the type's length */
        size_t hoff = toff + 4 + 1 + 4 + 3 + 4 + 2; /* headers length field */
        v = *pk;
        be32(v.v + hoff + 4, UINT32_MAX); /* the block claims 2^32-1 headers */
        refused(s, &tp, &v, "parked header count");
        v = *pk;
        be32(v.v + hoff + 4, 3);
        refused(s, &tp, &v, "parked header count 3 of 2");
        v = *pk;
        be32(v.v + toff, 1000);
        refused(s, &tp, &v, "parked type length");
        v = *pk;
        be32(v.v + hoff, 2);
        refused(s, &tp, &v, "parked headers length");
        v = *pk;
        v.v[hoff + 4 + 4 + 4 + 5] = 'x'; /* the first name's NUL */
        refused(s, &tp, &v, "parked header name without NUL");
        v = *pk;
        v.v[v.len++] = 0;
        refused(s, &tp, &v, "parked trailing byte");
        v = *pk;
        v.len = toff + 2;
        refused(s, &tp, &v, "parked too short");
        v = *pk;
        v.v[1] = 0x80;
        refused(s, &tp, &v, "parked negative parked_at");
        v = *pk;
        v.v[0] = 0x04; /* neither format's first byte */
        refused(s, &tp, &v, "parked of no format");
        /* meta */
        v = *kind(SG_DB_META);
        v.len--;
        refused(s, &tp, &v, "meta too short");
        v = *kind(SG_DB_META);
        memset(v.v + 256, 0xff, 7);
        v.v[263] = 0xfb; /* input offset -5 */
        refused(s, &tp, &v, "meta input offset -5");
        v = *kind(SG_DB_META);
        v.v[0] = 3; /* group "g\0\0" */
        refused(s, &tp, &v, "meta group with NUL");
        /* snapshot request */
        const kind_val_t *sq = kind(SG_DB_SNAPREQ);
        v = *sq;
        v.v[12] = 0;
        refused(s, &tp, &v, "snapreq state 0");
        v.v[12] = 3;
        refused(s, &tp, &v, "snapreq state 3");
        v = *sq;
        be32(v.v + 8, 0);
        refused(s, &tp, &v, "snapreq attempt 0");
        v = *sq;
        v.v[13] = 5;
        refused(s, &tp, &v, "snapreq has_have 5");
        v = *sq;
        be32(v.v + 54, 2000);
        refused(s, &tp, &v, "snapreq aggregate length");
        v = *sq;
        v.v[v.len++] = 'x';
        refused(s, &tp, &v, "snapreq trailing byte");
        v = *sq;
        memset(v.v + 46, 0, 8);
        refused(s, &tp, &v, "snapreq due 0");
        /* times past the year 9999 */
        v = *kind(SG_DB_DEDUP);
        v.v[17] = 0xff; /* first seen ≈ 2^48 ms */
        refused(s, &tp, &v, "dedup first seen past 9999");
        v = *kind(SG_DB_META);
        v.v[272] = 0x7f; /* clock near INT64_MAX */
        refused(s, &tp, &v, "meta clock past 9999");
        v = *sq;
        v.v[46] = 0x7f;
        refused(s, &tp, &v, "snapreq due past the longest delay");
        v = *pk;
        memset(v.v + 17, 0xff, 7);
        v.v[24] = 0xfe; /* timestamp -2 */
        refused(s, &tp, &v, "parked timestamp -2");
        /* every kind: an empty (not null) value, a key of the wrong size */
        for (int i = 0; i < 5; i++) {
                v = kinds[i];
                v.len = 0;
                refused(s, &tp, &v, "empty value");
                v = kinds[i];
                v.suffix_len = v.suffix_len ? v.suffix_len - 1 : 1;
                refused(s, &tp, &v, "key size");
        }
        /* the index databases are derived, never in the changelog */
        int bad_db[] = {1, 4, 7, 8, 255};
        for (size_t i = 0; i < sizeof(bad_db) / sizeof(bad_db[0]); i++) {
                v = *kind(SG_DB_DEDUP);
                v.db = bad_db[i];
                refused(s, &tp, &v, "database");
        }
        /* the originals apply, and the format 2 aggregate */
        sg_txn_t *t = wtxn(s);
        ck_assert_msg(sg_store_apply_change(t, &tp, SG_DB_AGG, v2.suffix,
                                            v2.suffix_len, v2.v, v2.len, err,
                                            sizeof(err)) == SG_OK,
                      "format 2 aggregate: %s", err);
        sg_agg_rec_t ga;
        unsigned char gh[32];
        hash_of("agg", gh);
        ck_assert_int_eq(sg_agg_get(t, &tp, gh, &ga), SG_OK);
        ck_assert_uint_eq(ga.last_version, 4);
        ck_assert_str_eq(ga.state, "PAID");
        ck_assert_uint_eq(ga.skip_to, 3);
        ck_assert_str_eq(ga.aggregate, "agg");
        for (int i = 0; i < 5; i++)
                ck_assert_msg(sg_store_apply_change(
                                      t, &tp, kinds[i].db, kinds[i].suffix,
                                      kinds[i].suffix_len, kinds[i].v,
                                      kinds[i].len, err, sizeof(err)) == SG_OK,
                              "database %d: %s", kinds[i].db, err);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A parked event whose header block claims more headers than its bytes can
 * hold is corrupt when read, not a count to allocate for. */
START_TEST(parked_get_refuses_corrupt_headers) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char h[32];
        hash_of("agg", h);
        sg_parked_rec_t pr = {.parked_at_ms = 1,
                              .key = "k",
                              .key_len = 1,
                              .value = "v",
                              .value_len = 1,
                              .headers = "\xff\xff\xff\xff",
                              .headers_len = 4};
        sg_txn_t *t = wtxn(s);
        ck_assert_int_eq(sg_parked_put(t, &tp, h, 2, &pr, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t g;
        uint64_t ver;
        ck_assert_int_eq(sg_parked_get(t, &tp, h, 2, &g), SG_ERR_STORE);
        ck_assert_int_eq(sg_parked_first(t, &tp, h, &ver, &g), SG_ERR_STORE);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* ---- fault simulation ---------------------------------------------------- */

static void put_dedup(sg_txn_t *t, const sg_tp_t *tp, const char *key,
                      sg_err_t want) {
        unsigned char kh[32];
        hash_of(key, kh);
        sg_dedup_rec_t r = {.verdict = SG_DV_APPLIED, .expiry_ms = 100};
        err[0] = '\0';
        ck_assert_int_eq(sg_dedup_put(t, tp, kh, &r, err, sizeof(err)), want);
}

/* The n-th counted operation fails with the chosen error; the transaction is
 * broken from then on (as LMDB breaks one after a failed write), a commit
 * aborts it, and nothing of it reaches the store. */
START_TEST(fault_put_breaks_the_txn) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ck_assert_uint_eq(sg_store_txns_open(s, false), 0);
        sg_txn_t *t = wtxn(s);
        ck_assert_uint_eq(sg_store_txns_open(s, false), 1);
        ck_assert_uint_eq(sg_store_txns_open(s, true), 1);
        /* k1's record (with its partition's first dedup segment), then the
         * next put fails */
        put_dedup(t, &tp, "k1", SG_OK);
        sg_store_fault_inject(s, SG_STORE_OP_PUT, 1, EIO);
        put_dedup(t, &tp, "k2", SG_ERR_STORE);
        ck_assert_ptr_nonnull(strstr(err, "Input/output error"));
        bool fired = false;
        ck_assert_uint_eq(sg_store_fault_count(s, &fired), 1);
        ck_assert(fired);
        /* broken: reads and writes fail, the commit aborts */
        unsigned char kh[32];
        sg_dedup_rec_t g;
        hash_of("k1", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_STORE);
        put_dedup(t, &tp, "k3", SG_ERR_STORE);
        err[0] = '\0';
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_ERR_STORE);
        ck_assert_str_ne(err, "");
        ck_assert_uint_eq(sg_store_txns_open(s, false), 0);
        /* one-shot: the next transaction works, and k1 was never committed */
        t = wtxn(s);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_NOT_FOUND);
        put_dedup(t, &tp, "k1", SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

START_TEST(fault_map_full_then_grow) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_store_fault_inject(s, SG_STORE_OP_ALL, 2, MDB_MAP_FULL);
        sg_txn_t *t = wtxn(s);                    /* op 1: begin */
        put_dedup(t, &tp, "k1", SG_ERR_MAP_FULL); /* op 2 */
        ck_assert_str_ne(err, "");
        sg_txn_abort(t);
        uint64_t before, after;
        sg_store_usage(s, &before, NULL);
        ck_assert_int_eq(sg_store_grow(s, err, sizeof(err)), SG_OK);
        sg_store_usage(s, &after, NULL);
        ck_assert_uint_eq(after, before + (1 << 22));
        sg_store_close(s);
}
END_TEST

START_TEST(fault_begin_and_commit) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = NULL;
        sg_store_fault_inject(s, SG_STORE_OP_BEGIN, 1, EIO);
        err[0] = '\0';
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_str_ne(err, "");
        ck_assert_uint_eq(sg_store_txns_open(s, false), 0);
        /* a failed commit aborts: nothing of the transaction is kept */
        sg_store_fault_inject(s, SG_STORE_OP_COMMIT, 1, EIO);
        t = wtxn(s);
        put_dedup(t, &tp, "k1", SG_OK);
        err[0] = '\0';
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_ERR_STORE);
        ck_assert_str_ne(err, "");
        ck_assert_uint_eq(sg_store_txns_open(s, false), 0);
        t = wtxn(s);
        unsigned char kh[32];
        sg_dedup_rec_t g;
        hash_of("k1", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        /* disarmed: nothing counted, nothing fails */
        sg_store_fault_inject(s, SG_STORE_OP_ALL, 0, 0);
        t = wtxn(s);
        put_dedup(t, &tp, "k1", SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        bool fired = true;
        ck_assert_uint_eq(sg_store_fault_count(s, &fired), 0);
        ck_assert(!fired);
        sg_store_close(s);
}
END_TEST

/* A partition drop deletes through a cursor: a fault there is reported
 * too and leaves the partition whole. */
START_TEST(fault_partition_drop) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t = wtxn(s);
        put_dedup(t, &tp, "k1", SG_OK);
        put_dedup(t, &tp, "k2", SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);
        sg_store_fault_inject(s, SG_STORE_OP_DEL, 2, EIO);
        t = wtxn(s);
        err[0] = '\0';
        ck_assert_int_eq(sg_store_partition_drop(t, &tp, err, sizeof(err)),
                         SG_ERR_STORE);
        ck_assert_str_ne(err, "");
        sg_txn_abort(t);
        t = wtxn(s);
        unsigned char kh[32];
        sg_dedup_rec_t g;
        hash_of("k2", kh);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* Growing the map with a transaction open is a caller's bug (LMDB refuses
 * it): asserted, so the test build stops right there. */
/* ---- the transaction's last-error detail --------------------------------- */

/* Overwrites the stored value of LMDB key @p key of database @p db (an
 * LMDB name) with @p v, behind the store's back: a corrupt record. */
static void poke(const char *db, const void *key, size_t key_len, const void *v,
                 size_t v_len) {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        ck_assert_int_eq(mdb_env_create(&env), 0);
        ck_assert_int_eq(mdb_env_set_maxdbs(env, 16), 0);
        ck_assert_int_eq(mdb_env_open(env, dir, 0, 0640), 0);
        ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
        ck_assert_int_eq(mdb_dbi_open(txn, db, 0, &dbi), 0);
        MDB_val k = {key_len, (void *)key}, val = {v_len, (void *)v};
        ck_assert_int_eq(mdb_put(txn, dbi, &k, &val, 0), 0);
        ck_assert_int_eq(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
}

/* The reads that take no errstr (sg_dedup_get, sg_parked_get, ...) leave
 * why they failed in the transaction (sg_txn_errdetail): the LMDB error and
 * the database, or the decoder's reason for a corrupt value. */
START_TEST(txn_errdetail_names_the_cause) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32];
        hash_of("k1", kh);
        sg_txn_t *t = wtxn(s);
        ck_assert_str_eq(sg_txn_errdetail(t), "");
        put_dedup(t, &tp, "k1", SG_OK);
        ck_assert_int_eq(sg_txn_commit(t, err, sizeof(err)), SG_OK);

        /* a failed write breaks the transaction: the next read says so */
        sg_store_fault_inject(s, SG_STORE_OP_PUT, 1, EIO);
        t = wtxn(s);
        put_dedup(t, &tp, "k2", SG_ERR_STORE);
        ck_assert_ptr_nonnull(
                strstr(sg_txn_errdetail(t), "Input/output error"));
        sg_dedup_rec_t g;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_STORE);
        ck_assert_msg(strstr(sg_txn_errdetail(t), "dedup") &&
                              strstr(sg_txn_errdetail(t), "MDB_BAD_TXN"),
                      "detail \"%s\"", sg_txn_errdetail(t));
        sg_txn_abort(t);

        /* a corrupt value: the decoder's reason (k1 is in the partition's
         * first dedup segment, slot 0: "p<prefix in hex>.d0") */
        sg_store_close(s);
        char slot[64] = "p";
        for (size_t i = 0; i < tp.len; i++)
                snprintf(slot + 1 + 2 * i, 3, "%02x", tp.b[i]);
        strcat(slot, ".d0");
        poke(slot, kh, SG_KEY_HASH_LEN, "short", 5);
        s = open_store(1 << 22, 1 << 22);
        t = wtxn(s);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_ERR_STORE);
        ck_assert_msg(strstr(sg_txn_errdetail(t), "dedup value of 5 bytes "
                                                  "is truncated"),
                      "detail \"%s\"", sg_txn_errdetail(t));

        /* a parked event whose header block is corrupt, read and walked */
        unsigned char ah[32];
        hash_of("agg", ah);
        sg_parked_rec_t pr = {.parked_at_ms = 1,
                              .key = "k",
                              .key_len = 1,
                              .value = "v",
                              .value_len = 1,
                              .headers = "\xff\xff\xff\xff",
                              .headers_len = 4};
        ck_assert_int_eq(sg_parked_put(t, &tp, ah, 2, &pr, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pg;
        uint64_t ver;
        ck_assert_int_eq(sg_parked_get(t, &tp, ah, 2, &pg), SG_ERR_STORE);
        ck_assert_msg(strstr(sg_txn_errdetail(t), "header block"),
                      "detail \"%s\"", sg_txn_errdetail(t));
        ck_assert_int_eq(sg_dedup_get(t, &tp, ah, &g), SG_ERR_NOT_FOUND);
        ck_assert_int_eq(sg_parked_first(t, &tp, ah, &ver, &pg), SG_ERR_STORE);
        ck_assert_msg(strstr(sg_txn_errdetail(t), "header block"),
                      "detail \"%s\"", sg_txn_errdetail(t));
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

START_TEST(grow_with_txn_open_asserts) {
        sg_store_t *s = open_store(1 << 22, 1 << 22);
        sg_txn_t *t = wtxn(s);
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                fclose(stderr); /* the assertion's message is expected */
                sg_store_grow(s, err, sizeof(err));
                _exit(0);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(WTERMSIG(status), SIGABRT);
        sg_txn_abort(t);
        ck_assert_int_eq(sg_store_grow(s, err, sizeof(err)), SG_OK);
        sg_store_close(s);
}
END_TEST

/* A reset keeps the arena's chunks for the next batch: nothing is freed
 * and malloc'd again each batch (the store's change capture and the
 * engine's batch fill the same chunks every batch; freeing a 64 KiB chunk
 * made glibc consolidate its free lists each time), and the refill uses
 * no new memory. */
START_TEST(arena_reset_keeps_its_chunks) {
        arena_t a = {0};
        size_t filled = 0;
        for (int round = 0; round < 3; round++) {
                for (int i = 0; i < 300; i++) /* ~300 KB: 5 chunks */
                        ck_assert_ptr_nonnull(sg_arena_alloc(&a, 1000));
                ck_assert_ptr_nonnull(sg_arena_alloc(&a, 100000)); /* big */
                size_t held = mallinfo2().uordblks;
                if (round)
                        ck_assert_uint_eq(held, filled);
                filled = held;
                sg_arena_reset(&a);
                ck_assert_msg(mallinfo2().uordblks == held,
                              "reset freed %zu bytes",
                              held - mallinfo2().uordblks);
        }
        sg_arena_free(&a);
}
END_TEST

int main(void) {
        Suite *s = suite_create("store");
        TCase *tc = tcase_create("store");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, dedup_roundtrip_and_reopen);
        tcase_add_test(tc, open_creates_missing_parents);
        tcase_add_test(tc, writer_is_the_lock_holder);
        tcase_add_test(tc, open_refuses_a_data_dir_under_a_file);
        tcase_add_test(tc, dedup_reason_in_verdict_byte);
        tcase_add_test(tc, agg_and_since_index);
        tcase_add_test(tc, agg_cache_abort_leaves_the_committed_value);
        tcase_add_test(tc,
                       agg_cache_abort_after_flush_leaves_the_committed_value);
        tcase_add_test(tc, agg_cache_flushed_before_walk);
        tcase_add_test(tc, agg_cache_bounded);
        tcase_add_test(tc, parked_roundtrip_order_and_nulls);
        tcase_add_test(tc, meta_and_partition_drop);
        tcase_add_test(tc, meta_changelog_id);
        tcase_add_test(tc, map_full_grow_and_retry);
        tcase_add_test(tc, reader_thread_while_writing_and_growing);
        tcase_add_test(tc, open_bad_dir);
        tcase_add_test(tc, capture_and_apply_changes);
        tcase_add_test(tc, changes_last_write_in_write_order);
        tcase_add_test(tc, apply_changes_to_one_key_move_its_index);
        tcase_add_loop_test(tc, restore_batch_leaves_the_state_of_one_by_one, 0,
                            2);
        tcase_add_test(tc, restore_batch_freezes_a_full_segment);
        tcase_add_test(tc, data_dir_locked_by_one_writer);
        tcase_add_test(tc, apply_change_refuses_corrupt_records);
        tcase_add_test(tc, parked_get_refuses_corrupt_headers);
        tcase_add_test(tc, fault_put_breaks_the_txn);
        tcase_add_test(tc, fault_map_full_then_grow);
        tcase_add_test(tc, fault_begin_and_commit);
        tcase_add_test(tc, fault_partition_drop);
        tcase_add_test(tc, txn_errdetail_names_the_cause);
        tcase_add_test(tc, deferred_store_kept_after_process_stop);
        tcase_add_test(tc, deferred_store_rebuilt_after_machine_stop);
        tcase_add_test(tc, deferred_store_kept_after_clean_close);
        tcase_add_test(tc, deferred_store_rebuilt_on_unreadable_session);
        tcase_add_test(tc, few_changes_dirty_few_pages);
#ifndef NDEBUG
        tcase_add_test(tc, grow_with_txn_open_asserts);
        tcase_add_test(tc, db_stats_count_entries_and_pages);
        tcase_add_test(tc, arena_reset_keeps_its_chunks);
#endif
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
