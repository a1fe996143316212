/*
 * test_faultsim.c — LMDB fault simulation (in the spirit of SQLite's
 * do_faultsim_test): a representative run of the engine — records that
 * apply, park, drain, are duplicates or dead-lettered, a snapshot request
 * and its cancellation, a TTL sweep, assign/revoke, a delta restore and a
 * full restore — is driven exactly as the exactly_once Kafka loop drives it
 * (processor.h), once without a fault and then once for every n with the
 * n-th LMDB operation (begin, put, del, commit) failing, until a run no
 * longer reaches the fault. The store holds committed batches in one LMDB
 * transaction until a checkpoint (semantics §6; at the default
 * store.checkpoint_interval_ms of processing time, and at assign, revoke,
 * restore and the stop), so the faults also meet checkpoint commits and
 * aborts that take earlier batches with them; the scenario runs again with
 * a checkpoint after every batch. Every faulted run must:
 *   - report the failure (the right code, a non-empty errstr), never
 *     swallow it;
 *   - leave no transaction open (a later write transaction begins at once);
 *   - after the loop's retry without the fault (grow on MDB_MAP_FULL, re-run
 *     an aborted batch, restore after a failed LMDB commit, restore the
 *     partitions the engine says are behind after an abort or a failed
 *     checkpoint, processor.h "Checkpoints"), end with the
 *     same store contents, the same changelog and the same output as the
 *     run that never faulted: nothing lost, nothing half-written.
 */
#include "config.h"
#include "engine.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T0 1700000000000LL

/* %s: the store block */
#define CONF_JSON                                                              \
        "{\"data_dir\":\"/tmp/x\",\"guarantee\":\"exactly_once\",%s"           \
        "\"kafka\":{\"bootstrap.servers\":\"x:1\",\"group.id\":\"g\"},"        \
        "\"topics\":{\"orders\":{\"output_topic\":\"out\",\"dlq_topic\":"      \
        "\"dlq\","                                                             \
        "\"dedup\":{\"ttl_ms\":10000},"                                        \
        "\"ordering\":{\"gap_timeout_ms\":1000},"                              \
        "\"snapshot\":{\"source\":\"kafka\",\"request_topic\":\"snap.req\","   \
        "\"reply_topic\":\"snap.rep\",\"timeout_ms\":600000,\"max_attempts\":" \
        "2,"                                                                   \
        "\"backoff_ms\":100,\"backoff_max_ms\":100}}}}"

/* A growable byte buffer: a store dump, a changelog, the output. */
typedef struct buf {
        unsigned char *p;
        size_t len, size;
} buf_t;

static void buf_add(buf_t *b, const void *p, size_t n) {
        /* !b->p: scan-build assumes the sum may wrap on the first call */
        if (!b->p || b->len + n + 8 > b->size) {
                size_t ns = (b->size ? b->size * 2 : 4096) + n + 8;
                b->p = realloc(b->p, ns);
                ck_assert_ptr_nonnull(b->p);
                b->size = ns;
        }
        /* length-prefixed, so concatenations cannot collide */
        uint64_t l = n;
        memcpy(b->p + b->len, &l, 8);
        if (n)
                memcpy(b->p + b->len + 8, p, n);
        b->len += 8 + n;
}

static void buf_free(buf_t *b) {
        free(b->p);
        memset(b, 0, sizeof(*b));
}

/* A changelog record (the value NULL: a tombstone). */
typedef tu_clrec_t clrec_t;

#define CL_MAX 256

/* The exactly_once Kafka loop, reduced to what it does with the processor. */
typedef struct loop {
        char dir[128];
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t proc;
        clrec_t cl[2][CL_MAX]; /* committed changelog per partition */
        size_t cl_cnt[2];
        clrec_t tent[CL_MAX]; /* this attempt's changelog records */
        int32_t tent_part[CL_MAX];
        size_t tent_cnt;
        bool assigned[2];
        bool every_batch;  /* store.checkpoint_interval_ms 0 */
        int64_t offset[2]; /* next input offset */
        buf_t out;         /* committed output and DLQ records */
        int rc;            /* the LMDB error being injected */
        bool fired;        /* the fault fired and was reported */
        int failures;      /* failed steps (one per faulted run) */
        const char *step;  /* for messages */
} loop_t;

/* A step that blocks (a write transaction left open) fails the test. */
static void on_alarm(int sig) {
        (void)sig;
        ck_abort_msg("blocked: an LMDB write transaction was left open");
}

/* Checks a processor call's result: an error only from the injected fault,
 * reported with the right code and a reason; no fault swallowed. */
static bool failed(loop_t *l, sg_err_t err, const char *errstr,
                   const char *call) {
        bool fired;
        sg_store_fault_count(l->store, &fired);
        bool fresh = fired && !l->fired;
        if (err == SG_OK) {
                ck_assert_msg(!fresh,
                              "%s/%s: the injected fault was swallowed "
                              "(SG_OK)",
                              l->step, call);
                return false;
        }
        ck_assert_msg(fresh, "%s/%s: error %s (%s) without a fault", l->step,
                      call, sg_err2str(err), errstr);
        ck_assert_msg(errstr[0] != '\0', "%s/%s: %s with an empty errstr",
                      l->step, call, sg_err2str(err));
        if (l->rc == MDB_MAP_FULL)
                ck_assert_msg(err == SG_ERR_MAP_FULL,
                              "%s/%s: map full reported as %s (%s)", l->step,
                              call, sg_err2str(err), errstr);
        else
                ck_assert_msg(err != SG_ERR_MAP_FULL,
                              "%s/%s: I/O error reported as map full", l->step,
                              call);
        l->fired = true;
        l->failures++;
        return true;
}

/* After the loop's own clean-up of a failed step: nothing is open, a write
 * transaction begins at once, and the map can grow. */
static void nothing_open(loop_t *l, const char *call) {
        ck_assert_msg(sg_store_txns_open(l->store, false) == 0,
                      "%s/%s: %u transaction(s) left open", l->step, call,
                      sg_store_txns_open(l->store, false));
        char err[256];
        sg_txn_t *t;
        alarm(10);
        ck_assert_int_eq(sg_txn_begin(l->store, true, &t, err, sizeof(err)),
                         SG_OK);
        alarm(0);
        sg_txn_abort(t);
        if (l->rc == MDB_MAP_FULL) {
                ck_assert_msg(l->proc.grow(l->proc.opaque, err, sizeof(err)) ==
                                      SG_OK,
                              "%s/%s: grow: %s", l->step, call, err);
        }
}

static void loop_open(loop_t *l, int rc, bool every_batch) {
        char err[512], json[2048];
        memset(l, 0, sizeof(*l));
        l->rc = rc;
        l->every_batch = every_batch;
        struct stat st;
        snprintf(l->dir, sizeof(l->dir), "%s/sg_test_faultsim_XXXXXX",
                 stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
                                 access("/dev/shm", W_OK) == 0
                         ? "/dev/shm"
                         : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(l->dir));
        snprintf(json, sizeof(json), CONF_JSON,
                 every_batch ? "\"store\":{\"checkpoint_interval_ms\":0},"
                             : "");
        ck_assert_msg(sg_config_parse(json, &l->conf, err, sizeof(err)) ==
                              SG_OK,
                      "config: %s", err);
        ck_assert_int_eq(sg_store_open(l->dir, 1 << 22, 1 << 22, &l->store, err,
                                       sizeof(err)),
                         SG_OK);
        /* LMDB goes on with its open files: nothing is left behind, even
         * when a failed check ends the test here and there */
        const char *files[] = {"data.mdb", "lock.mdb", "seqgate.lock"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char p[200];
                snprintf(p, sizeof(p), "%s/%s", l->dir, files[i]);
                ck_assert_int_eq(unlink(p), 0);
        }
        ck_assert_int_eq(rmdir(l->dir), 0);
        ck_assert_int_eq(
                sg_engine_new(l->conf, l->store, &l->eng, err, sizeof(err)),
                SG_OK);
        sg_engine_processor(l->eng, &l->proc);
        ck_assert_ptr_nonnull(l->proc.restore_begin);
        sg_engine_set_clock(l->eng, T0);
        signal(SIGALRM, on_alarm);
}

static void loop_close(loop_t *l) {
        sg_engine_destroy(l->eng);
        sg_store_close(l->store);
        sg_config_destroy(l->conf);
        buf_free(&l->out);
}

/* Restore of one partition from its changelog (restore_begin → apply … →
 * restore_end), started again after a failure (the loop grows the map on
 * MDB_MAP_FULL; a restart meets anything else the same way). */
static void do_restore(loop_t *l, int32_t part, int64_t log_start) {
        char err[512];
        for (int attempt = 0;; attempt++) {
                ck_assert_int_lt(attempt, 3);
                int64_t from = -1, end = (int64_t)l->cl_cnt[part];
                err[0] = '\0';
                sg_err_t e = l->proc.restore_begin(l->proc.opaque, "orders",
                                                   part, log_start, end, &from,
                                                   err, sizeof(err));
                if (failed(l, e, err, "restore_begin")) {
                        nothing_open(l, "restore_begin");
                        continue;
                }
                ck_assert_int_ge(from, log_start);
                ck_assert_int_le(from, end);
                for (int64_t o = from; o < end && !e; o++) {
                        const clrec_t *c = &l->cl[part][o];
                        err[0] = '\0';
                        e = l->proc.restore_apply(
                                l->proc.opaque, "orders", part, o, c->key,
                                c->key_len, c->tombstone ? NULL : c->value,
                                c->value_len, err, sizeof(err));
                }
                if (failed(l, e, err, "restore_apply")) {
                        nothing_open(l, "restore_apply");
                        continue;
                }
                err[0] = '\0';
                e = l->proc.restore_end(l->proc.opaque, "orders", part, end,
                                        err, sizeof(err));
                if (failed(l, e, err, "restore_end")) {
                        nothing_open(l, "restore_end");
                        continue;
                }
                return;
        }
}

/* After a failure: the partitions the engine lost committed batches of
 * (an abort, a failed checkpoint) are restored before anything else, as
 * the loop does (processor.h behind). */
static void restore_behind(loop_t *l) {
        for (int32_t p = 0; p < 2; p++)
                if (l->assigned[p] &&
                    l->proc.behind(l->proc.opaque, "orders", p))
                        do_restore(l, p, 0);
}

/* A checkpoint, as the loop asks for one (revoke, stop). */
static void do_checkpoint(loop_t *l) {
        char err[512] = "";
        sg_err_t e = l->proc.checkpoint(l->proc.opaque, err, sizeof(err));
        if (failed(l, e, err, "checkpoint")) {
                nothing_open(l, "checkpoint");
                restore_behind(l);
        }
}

static void do_assign(loop_t *l, int32_t part) {
        char err[512];
        for (int attempt = 0;; attempt++) {
                ck_assert_int_lt(attempt, 3);
                int64_t off;
                err[0] = '\0';
                sg_err_t e = l->proc.assign(l->proc.opaque, "orders", part, "g",
                                            &off, err, sizeof(err));
                if (failed(l, e, err, "assign")) {
                        nothing_open(l, "assign");
                        restore_behind(l);
                        continue;
                }
                break;
        }
        l->assigned[part] = true;
        do_restore(l, part, 0);
}

static void do_revoke(loop_t *l, int32_t part) {
        do_checkpoint(l);
        l->proc.revoke(l->proc.opaque, "orders", part);
        l->assigned[part] = false;
}

typedef struct ev {
        int32_t part;
        const char *agg, *id, *seq, *value;
} ev_t;

/* One batch as the exactly_once loop runs it: effects "delivered" (the
 * changelog records at the next offsets of their partition), the Kafka
 * transaction committed, then batch_commit. A failure before the Kafka
 * commit aborts and re-runs the batch; a failed batch_commit leaves the
 * store behind its changelog, which a restore of every assigned partition
 * repairs (the batch is not re-run: Kafka has it). */
static void batch(loop_t *l, int64_t now, const ev_t *evs, size_t cnt) {
        char err[512];
        static sg_header_t hds[16][5];
        ck_assert_uint_le(cnt, 16);
        sg_engine_set_clock(l->eng, now);
        for (int attempt = 0;; attempt++) {
                ck_assert_int_lt(attempt, 3);
                const char *call = "batch_begin";
                int64_t off[2] = {l->offset[0], l->offset[1]};
                err[0] = '\0';
                sg_err_t e = l->proc.batch_begin(l->proc.opaque, now, err,
                                                 sizeof(err));
                for (size_t i = 0; i < cnt && !e; i++) {
                        sg_header_t *hd = hds[i];
                        hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
                        hd[1] = (sg_header_t){"ce_id", evs[i].id,
                                              strlen(evs[i].id)};
                        hd[2] = (sg_header_t){"ce_source", "/shop", 5};
                        hd[3] = (sg_header_t){"ce_type", "t", 1};
                        hd[4] = (sg_header_t){"ce_sequence", evs[i].seq,
                                              strlen(evs[i].seq)};
                        const char *v = evs[i].value ? evs[i].value : evs[i].id;
                        sg_record_t rec = {.topic = "orders",
                                           .partition = evs[i].part,
                                           .offset = off[evs[i].part]++,
                                           .timestamp_ms = 1000,
                                           .key = evs[i].agg,
                                           .key_len = strlen(evs[i].agg),
                                           .value = v,
                                           .value_len = strlen(v),
                                           .headers = hd,
                                           .header_cnt = 5};
                        sg_process_result_t r;
                        call = "process";
                        err[0] = '\0';
                        e = l->proc.process(l->proc.opaque, &rec, &r, err,
                                            sizeof(err));
                        if (!e)
                                ck_assert_int_eq(r, SG_PROCESSED);
                }
                if (!e) {
                        call = "tick";
                        err[0] = '\0';
                        e = l->proc.tick(l->proc.opaque, err, sizeof(err));
                }
                if (failed(l, e, err, call)) {
                        l->proc.batch_abort(l->proc.opaque);
                        nothing_open(l, call);
                        restore_behind(l);
                        continue;
                }
                /* deliveries; the changelog records of this attempt */
                const sg_effect_t *ef;
                size_t n = l->proc.effects(l->proc.opaque, &ef);
                buf_t out = {0};
                l->tent_cnt = 0;
                size_t next[2] = {l->cl_cnt[0], l->cl_cnt[1]};
                for (size_t i = 0; i < n; i++) {
                        if (ef[i].kind != SG_EFFECT_CHANGELOG) {
                                buf_add(&out, ef[i].topic, strlen(ef[i].topic));
                                buf_add(&out, ef[i].key, ef[i].key_len);
                                buf_add(&out, ef[i].value, ef[i].value_len);
                                l->proc.delivered(l->proc.opaque, i,
                                                  (int64_t)i);
                                continue;
                        }
                        int32_t p = ef[i].partition;
                        ck_assert(p == 0 || p == 1);
                        ck_assert_uint_lt(l->tent_cnt, CL_MAX);
                        clrec_t *c = &l->tent[l->tent_cnt];
                        l->tent_part[l->tent_cnt++] = p;
                        tu_clrec_set(c, &ef[i]);
                        l->proc.delivered(l->proc.opaque, i,
                                          (int64_t)next[p]++);
                }
                /* the Kafka transaction commits: output, changelog, offsets */
                buf_add(&l->out, out.p, out.len);
                buf_free(&out);
                for (size_t i = 0; i < l->tent_cnt; i++) {
                        int32_t p = l->tent_part[i];
                        ck_assert_uint_lt(l->cl_cnt[p], CL_MAX);
                        l->cl[p][l->cl_cnt[p]++] = l->tent[i];
                }
                l->offset[0] = off[0];
                l->offset[1] = off[1];
                err[0] = '\0';
                e = l->proc.batch_commit(l->proc.opaque, err, sizeof(err));
                if (failed(l, e, err, "batch_commit")) {
                        /* the store is behind its changelog */
                        l->proc.batch_abort(l->proc.opaque);
                        nothing_open(l, "batch_commit");
                        for (int32_t p = 0; p < 2; p++)
                                if (l->assigned[p])
                                        do_restore(l, p, 0);
                }
                return;
        }
}

#define EVP(p, a, i, q, ...)                                                   \
        ((ev_t){.part = (p), .agg = (a), .id = (i), .seq = (q), __VA_ARGS__})
#define EV(a, i, q, ...) EVP(0, a, i, q, __VA_ARGS__)

static void scenario(loop_t *l) {
        l->step = "assign";
        do_assign(l, 0);
        l->step = "apply, park, dedup, DLQ";
        ev_t b1[] = {EV("A", "a1", "1"),
                     EV("A", "a3", "3"),
                     EV("B", "b1", "1"),
                     EV("A", "a1", "1"),
                     EV("A", "a1", "1", .value = "other payload"),
                     EV("B", "b1x", "1")};
        batch(l, T0, b1, 6);
        l->step = "drain";
        ev_t b2[] = {EV("A", "a2", "2")};
        batch(l, T0 + 10, b2, 1);
        l->step = "park for a snapshot";
        ev_t b3[] = {EV("C", "c1", "1"), EV("C", "c3", "3")};
        batch(l, T0 + 20, b3, 2);
        l->step = "snapshot request";
        batch(l, T0 + 1100, NULL, 0);
        l->step = "TTL sweep";
        batch(l, T0 + 20000, NULL, 0);
        l->step = "revoke, assign, delta restore";
        do_revoke(l, 0);
        do_assign(l, 0);
        l->step = "full restore";
        /* partition 1's changelog holds partition 0's records: its store is
         * dropped and rebuilt from them */
        memcpy(l->cl[1], l->cl[0], l->cl_cnt[0] * sizeof(clrec_t));
        l->cl_cnt[1] = l->cl_cnt[0];
        do_assign(l, 1);
        l->step = "drain cancels the snapshot request";
        ev_t b4[] = {EVP(1, "C", "c2", "2"), EV("D", "d1", "1")};
        batch(l, T0 + 20010, b4, 2);
        l->step = "two batches, then a batch that fails";
        ev_t b5[] = {EV("E", "e1", "1")}, b6[] = {EVP(1, "F", "f1", "1")},
             b7[] = {EV("E", "e2", "2"), EVP(1, "F", "f2", "2")};
        batch(l, T0 + 20020, b5, 1);
        batch(l, T0 + 20030, b6, 1);
        batch(l, T0 + 20040, b7, 2);
        l->step = "stop";
        do_checkpoint(l);
}

static int dump_visit(void *opaque, int db, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        buf_t *b = opaque;
        unsigned char d = (unsigned char)db;
        buf_add(b, &d, 1);
        buf_add(b, key, key_len);
        buf_add(b, value, value_len);
        return 0;
}

static void dump(loop_t *l, buf_t *b) {
        char err[256];
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(l->store, false, &t, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_foreach(t, dump_visit, b, err, sizeof(err)),
                         SG_OK);
        sg_txn_abort(t);
}

static void changelog(const loop_t *l, buf_t *b) {
        for (int p = 0; p < 2; p++)
                for (size_t i = 0; i < l->cl_cnt[p]; i++) {
                        const clrec_t *c = &l->cl[p][i];
                        buf_add(b, c->key, c->key_len);
                        if (!c->tombstone)
                                buf_add(b, c->value, c->value_len);
                        else
                                buf_add(b, "tombstone", 9);
                }
}

/* Where two dumps first differ (database, key bytes), for the message. */
static void first_diff(const buf_t *a, const buf_t *b, char *msg, size_t n) {
        size_t i = 0;
        while (i < a->len && i < b->len && a->p[i] == b->p[i])
                i++;
        snprintf(msg, n, "sizes %zu/%zu, first difference at byte %zu", a->len,
                 b->len, i);
}

/* Fails each LMDB operation of the kinds in @p ops_mask once, in turn. */
static void run_faults(unsigned ops_mask, int rc, bool every_batch) {
        loop_t *ref = calloc(1, sizeof(*ref)), *l = calloc(1, sizeof(*l));
        ck_assert_ptr_nonnull(ref);
        ck_assert_ptr_nonnull(l);
        buf_t ref_store = {0}, ref_cl = {0};

        /* the run that never faults; counting its operations */
        loop_open(ref, rc, every_batch);
        sg_store_fault_inject(ref->store, ops_mask, UINT64_MAX, rc);
        scenario(ref);
        bool fired;
        uint64_t ops = sg_store_fault_count(ref->store, &fired);
        ck_assert(!fired);
        ck_assert_int_eq(ref->failures, 0);
        sg_store_fault_inject(ref->store, 0, 0, 0);
        dump(ref, &ref_store);
        changelog(ref, &ref_cl);
        ck_assert_uint_gt(ops, ops_mask == SG_STORE_OP_ALL ? 50 : 3);
        /* the scenario does what it says */
        ck_assert_uint_gt(ref->cl_cnt[1], ref->cl_cnt[0]);
        const sg_metrics_t *m = sg_engine_metrics(ref->eng);
        ck_assert_uint_eq(m->dedup_hits_total, 1);
        ck_assert_uint_eq(m->idempotency_parameter_conflicts_total, 1);
        ck_assert_uint_eq(m->stale_version_rejections_total, 1);
        ck_assert_uint_eq(m->snapshot_requests_total, 1);
        ck_assert_uint_ge(m->dedup_expired_total, 1);
        ck_assert_uint_ge(m->applied_total, 6);
        /* C's snapshot request is in flight on partition 0, and was
         * cancelled on partition 1 by the drain */
        {
                char err[256];
                sg_txn_t *t;
                sg_tp_t tp0, tp1;
                unsigned char h[32];
                int64_t due;
                sg_tp_make(&tp0, "orders", 0);
                sg_tp_make(&tp1, "orders", 1);
                ck_assert_int_eq(
                        sg_txn_begin(ref->store, false, &t, err, sizeof(err)),
                        SG_OK);
                ck_assert_int_eq(sg_snapdue_first(t, &tp0, INT64_MAX, h, &due),
                                 SG_OK);
                ck_assert_int_eq(sg_snapdue_first(t, &tp1, INT64_MAX, h, &due),
                                 SG_ERR_NOT_FOUND);
                sg_txn_abort(t);
        }

        uint64_t n;
        for (n = 1;; n++) {
                loop_open(l, rc, every_batch);
                sg_store_fault_inject(l->store, ops_mask, n, rc);
                scenario(l);
                sg_store_fault_count(l->store, &fired);
                sg_store_fault_inject(l->store, 0, 0, 0);
                if (!fired) {
                        loop_close(l);
                        break;
                }
                ck_assert_msg(l->failures == 1, "n=%" PRIu64 ": %d failures", n,
                              l->failures);
                buf_t st = {0}, cl = {0};
                char msg[128];
                dump(l, &st);
                changelog(l, &cl);
                first_diff(&ref_store, &st, msg, sizeof(msg));
                ck_assert_msg(st.len == ref_store.len &&
                                      memcmp(st.p, ref_store.p, st.len) == 0,
                              "n=%" PRIu64 " (%s, %s): the store differs from "
                              "the run without a fault: %s",
                              n, rc == MDB_MAP_FULL ? "map full" : "EIO",
                              l->step, msg);
                ck_assert_msg(cl.len == ref_cl.len &&
                                      memcmp(cl.p, ref_cl.p, cl.len) == 0,
                              "n=%" PRIu64 ": the changelog differs", n);
                /* the output may repeat an aborted attempt's records only
                 * where Kafka aborted them; committed output is the same */
                ck_assert_msg(
                        l->out.len == ref->out.len &&
                                memcmp(l->out.p, ref->out.p, l->out.len) == 0,
                        "n=%" PRIu64 ": the committed output differs", n);
                buf_free(&st);
                buf_free(&cl);
                loop_close(l);
        }
        /* every operation of the run was failed once */
        ck_assert_uint_eq(n, ops + 1);
        printf("faultsim (%s%s, %s): %" PRIu64 " LMDB operations, each failed "
               "once; %zu + %zu changelog records; %" PRIu64 " checkpoints\n",
               rc == MDB_MAP_FULL ? "MDB_MAP_FULL" : "EIO",
               ops_mask == SG_STORE_OP_ALL ? "" : " at aggregate write-backs",
               every_batch ? "a checkpoint every batch"
                           : "checkpoints held across batches",
               ops, ref->cl_cnt[0], ref->cl_cnt[1], m->checkpoints_total);
        buf_free(&ref_store);
        buf_free(&ref_cl);
        loop_close(ref);
        free(ref);
        free(l);
}

START_TEST(faultsim_map_full) {
        run_faults(SG_STORE_OP_ALL, MDB_MAP_FULL, false);
}
END_TEST

START_TEST(faultsim_io_error) {
        run_faults(SG_STORE_OP_ALL, EIO, false);
}
END_TEST

START_TEST(faultsim_map_full_every_batch) {
        run_faults(SG_STORE_OP_ALL, MDB_MAP_FULL, true);
}
END_TEST

START_TEST(faultsim_io_error_every_batch) {
        run_faults(SG_STORE_OP_ALL, EIO, true);
}
END_TEST

/* The aggregate cache's write-backs at each batch's end (store_aggc.c),
 * which SG_STORE_OP_ALL does not count: a full map there is a failed
 * batch, run again, with the same store, changelog and output. */
START_TEST(faultsim_agg_writeback_map_full) {
        run_faults(SG_STORE_OP_AGG_WRITEBACK, MDB_MAP_FULL, false);
}
END_TEST

START_TEST(faultsim_agg_writeback_io_error_every_batch) {
        run_faults(SG_STORE_OP_AGG_WRITEBACK, EIO, true);
}
END_TEST

int main(void) {
        Suite *s = suite_create("faultsim");
        TCase *tc = tcase_create("lmdb");
        tcase_set_timeout(tc, 280);
        tcase_add_test(tc, faultsim_map_full);
        tcase_add_test(tc, faultsim_io_error);
        tcase_add_test(tc, faultsim_map_full_every_batch);
        tcase_add_test(tc, faultsim_io_error_every_batch);
        tcase_add_test(tc, faultsim_agg_writeback_map_full);
        tcase_add_test(tc, faultsim_agg_writeback_io_error_every_batch);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
