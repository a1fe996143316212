/*
 * test_kafka.c — the Kafka loop (kafka.h) against librdkafka's in-process
 * mock cluster (no real broker): the batch protocol of semantics §6 under
 * injected failures.
 *
 * Every loop case produces NREC records to input topic "in" (NPART
 * partitions, NKEYS keys, key k goes to partition k % NPART; value "k<k>:<seq>",
 * headers h-seq=<seq> and h-null=NULL, CreateTime TS0 + i), runs one
 * consumer-group member until its processor has committed every record (or
 * another thread stops it), then reads output topic "out" back from the
 * beginning and the group's committed offsets, and checks:
 *   - nothing missing: every input record is in the output;
 *   - per-key order of the first occurrences (at-least-once allows
 *     duplicates; where they can be predicted their number is asserted);
 *   - records intact: key, value, headers (NULL-valued too), timestamp and
 *     partition (output_partitioning "input");
 *   - committed offsets == end offsets of "in" after the loop stopped (the
 *     stop-midway case: == what its processor committed);
 *   - from the processor's side: each partition is read on from exactly its
 *     committed position (no gap, no re-read of a committed record).
 *
 * The processor used by the fault cases wraps the real pass-through
 * (passthrough.h) and injects: process errors, batch_commit failures,
 * SG_ERR_MAP_FULL, SG_PAUSE. Delivery failures come from the mock cluster
 * (rd_kafka_mock_push_request_errors on Produce).
 *
 * Not covered here: a second consumer joining the group. The eager
 * two-member case is not written yet (it needs a slowed processor so that
 * the second member joins mid-stream, and costs two more mock group joins);
 * the cooperative-sticky two-member case is left out on purpose: it crashes
 * inside librdkafka 2.0.2's sticky assignor (librdkafka issue #4312).
 *
 * Secrets: librdkafka 2.0.2 never echoes the value of a secret-named
 * property in a rd_kafka_conf_set() error, so the errstr case
 * (test_kafka_startup.c) guards the loop's own texts (and future librdkafka
 * messages); a compression.codec control shows the same path does carry a
 * non-secret value.
 *
 * The loop's other suites: test_kafka_eos.c (exactly_once),
 * test_kafka_rebalance.c (at_least_once: a partition moving between
 * instances), test_kafka_startup.c (start-up, secrets); what they all
 * share: kafka_harness.h.
 *
 * SG_TEST_ONLY=<test name> runs one test; SG_TEST_VERBOSE=1 prints the
 * loop's log events and each committed batch.
 */
#include "kafka_harness.h"

/* ------------------------------------------------------------------ */
/* allocation failure (the executable links with -Wl,--wrap=strdup, so   */
/* libseqgate's strdup() calls come here; librdkafka's do not)           */

char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
/** While set, strdup() of exactly this string fails (ENOMEM). */
static const char *volatile g_fail_strdup;
static atomic_int g_failed_strdups;

char *__wrap_strdup(const char *s) {
        const char *f = g_fail_strdup;
        if (f && s && !strcmp(s, f)) {
                atomic_fetch_add(&g_failed_strdups, 1);
                errno = ENOMEM;
                return NULL;
        }
        return __real_strdup(s);
}

/* ------------------------------------------------------------------ */
/* (1) clean run                                                       */

START_TEST(clean_run_exactly_once_in_order) {
        sg_passthrough_t *pt;
        sg_processor_t proc;
        sg_loop_t *loop = NULL;
        stopper_t st = {.loopp = &loop};
        run_t r;
        outres_t o;

        ck_assert_int_eq(sg_passthrough_new(g_conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &proc);
        run_loop(&proc, &loop, stop_at_end, &st, &r);
        sg_passthrough_destroy(pt);
        ck_assert(atomic_load(&st.reached));

        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_uint_eq(r.stats.delivery_failures_total, 0);
        ck_assert_uint_ge(r.stats.batches_total, NREC / BATCH_MAX);
        ck_assert_int_eq(g_logs.aborted, 0);

        read_output(&o);
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0);
        ck_assert_int_eq(o.total, NREC);
        assert_committed_at_end();
}
END_TEST

/* A broker that answers late (restarting, a leader or coordinator moving)
 * must not stop the loop: the first request of @p api_key is answered
 * after 4 s while the loop runs at least 5 s with a stats line every
 * 100 ms; none may be 2 s late. (A stop waits for the answers, as a Kafka
 * consumer's close does: not counted.) */
static void slow_answer_run(int16_t api_key) {
        sg_passthrough_t *pt;
        sg_processor_t proc;
        sg_loop_t *loop = NULL;
        stopper_t st = {.loopp = &loop};
        run_t r;

        sg_config_destroy(g_conf);
        g_root_extra = ALOS "\"stats_interval_ms\":100,";
        g_conf = conf_parse(g_bs, TOPICS_IN, NULL);
        g_root_extra = ALOS;
        ck_assert_int_eq(
                rd_kafka_mock_broker_push_request_error_rtts(
                        g_mc, 1, api_key, 1, RD_KAFKA_RESP_ERR_NO_ERROR, 4000),
                RD_KAFKA_RESP_ERR_NO_ERROR);
        ck_assert_int_eq(sg_passthrough_new(g_conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &proc);
        st.not_before_ms = mono_ms() + 5000;
        run_loop(&proc, &loop, stop_at_end, &st, &r);
        sg_passthrough_destroy(pt);
        ck_assert(atomic_load(&st.reached));
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        int64_t gap = 0, n = 0;
        for (int i = 1; i < g_logs.stats_lines && i < 4096 &&
                        g_logs.stats_ms[i] <= st.stop_ms;
             i++, n++)
                if (g_logs.stats_ms[i] - g_logs.stats_ms[i - 1] > gap)
                        gap = g_logs.stats_ms[i] - g_logs.stats_ms[i - 1];
        ck_assert_int_ge(n, 10);
        ck_assert_msg(gap < 2000,
                      "no stats line for %" PRId64 " ms: the loop waited "
                      "for the broker's answer (ApiKey %d)",
                      gap, (int)api_key);
        assert_committed_at_end();
}

/* The offset commit is sent and its answer served by a later turn
 * (semantics §6 "group commit"). */
START_TEST(slow_offset_commit_does_not_stop_the_loop) {
        slow_answer_run(8 /* OffsetCommit */);
}
END_TEST

/* The deliveries are awaited in slices, the loop's stats and published
 * metrics served between them (semantics §3 "Deliveries"). */
START_TEST(slow_delivery_does_not_stop_the_stats) {
        slow_answer_run(0 /* Produce */);
}
END_TEST

/* A passthrough that counts the batches it committed with records in
 * them: the latency histograms describe those, not the idle polls between
 * them (an idle batch commits nothing). */
typedef struct busy {
        sg_processor_t inner;
        bool had_records;
        uint64_t busy_commits;
} busy_t;

static sg_err_t busy_begin(void *o, int64_t now, char *es, size_t n) {
        busy_t *b = o;
        b->had_records = false;
        return b->inner.batch_begin(b->inner.opaque, now, es, n);
}
static sg_err_t busy_process(void *o, const sg_record_t *rec,
                             sg_process_result_t *res, char *es, size_t n) {
        busy_t *b = o;
        b->had_records = true;
        return b->inner.process(b->inner.opaque, rec, res, es, n);
}
static sg_err_t busy_commit(void *o, char *es, size_t n) {
        busy_t *b = o;
        sg_err_t err = b->inner.batch_commit(b->inner.opaque, es, n);
        if (!err && b->had_records)
                b->busy_commits++;
        return err;
}
static size_t busy_effects(void *o, const sg_effect_t **efs) {
        busy_t *b = o;
        return b->inner.effects(b->inner.opaque, efs);
}
static void busy_abort(void *o) {
        busy_t *b = o;
        b->inner.batch_abort(b->inner.opaque);
}

START_TEST(latency_histograms_skip_idle_batches) {
        sg_passthrough_t *pt;
        busy_t b = {0};
        sg_loop_t *loop = NULL;
        stopper_t st = {.loopp = &loop};
        run_t r;

        ck_assert_int_eq(sg_passthrough_new(g_conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &b.inner);
        sg_processor_t proc = b.inner;
        proc.opaque = &b;
        proc.batch_begin = busy_begin;
        proc.process = busy_process;
        proc.batch_commit = busy_commit;
        proc.effects = busy_effects;
        proc.batch_abort = busy_abort;
        run_loop(&proc, &loop, stop_at_end, &st, &r);
        sg_passthrough_destroy(pt);
        ck_assert(atomic_load(&st.reached));
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_uint_gt(b.busy_commits, 0);
        /* the loop polled idle between and after the batches */
        ck_assert_uint_gt(r.stats.batches_total, b.busy_commits);
        ck_assert_uint_eq(r.stats.batch_duration_ms.count, b.busy_commits);
        ck_assert_uint_eq(r.stats.commit_latency_ms.count, b.busy_commits);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (2) process errors and batch_commit failures                        */

START_TEST(process_and_commit_failures_reread) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->proc_fail_mod = 50, t->proc_fail_rem = 7; /* 4 per partition */
        t->commit_fail_period = 3, t->commit_fail_max = 3;
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->proc_fails, 4 * NPART);
        ck_assert_int_eq(t->commit_fails, 3);
        ck_assert_int_gt(t->dup_expected, 0);
        /* One aborted batch per injected failure, nothing else. */
        ck_assert_uint_eq(r.stats.batches_aborted_total,
                          (uint64_t)(t->proc_fails + t->commit_fails));
        ck_assert_int_eq(t->aborts, t->proc_fails + t->commit_fails);
        ck_assert_int_eq(g_logs.aborted, t->proc_fails + t->commit_fails);
        ck_assert_uint_eq(r.stats.batches_total, (uint64_t)t->commits_ok);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        assert_tp_consistent(t);

        read_output(&o);
        assert_superset_in_order(&o);
        /* Exactly the output of the batches whose commit failed is there
         * twice, and that of the records a failed attempt decided before
         * its process error (produced while deciding, delivered before the
         * rewind). */
        ck_assert_int_eq(o.dups, t->dup_expected);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (3) SG_ERR_MAP_FULL: grow, re-run the same records                   */

/* What /readyz said at each publish of the full-disk run. */
typedef struct readyseen {
        sg_pub_t *pub;
        tproc_t *t;
        int not_ready_full; /**< 503 naming the disk error, disk full */
        int ready_full;     /**< 200 while grows kept failing */
        int ready_after;    /**< 200 after a 503, the disk freed */
        char body[1024];    /**< the first 503 body */
} readyseen_t;

static void ready_publish(void *o, struct sg_metrics_snap *snap) {
        readyseen_t *rs = o;
        int st = 0;
        char *b = NULL;
        sg_pub_publish(rs->pub, snap);
        if (!snap->assigned_once || snap->stopped)
                return;
        ck_assert_int_eq(sg_pub_ready(rs->pub, &st, &b), SG_OK);
        bool full = rs->t->disk_full && rs->t->grow_fails >= 2;
        if (st == 503 && strstr(b, "No space left on device")) {
                if (!rs->body[0])
                        snprintf(rs->body, sizeof(rs->body), "%s", b);
                if (full)
                        rs->not_ready_full++;
        } else if (st == 200 && full) {
                rs->ready_full++;
        } else if (st == 200 && !rs->t->disk_full && rs->not_ready_full) {
                rs->ready_after++;
        }
        free(b);
}

/* A full disk (semantics §6 "Disk space"): the store's growth cannot be
 * allocated, so every batch is aborted and tried again after the back-off
 * until space is freed. /readyz says not ready meanwhile, with the reason,
 * and ready again once a batch commits; nothing is lost or reordered. */
START_TEST(full_disk_is_not_ready_until_a_batch_commits) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;
        readyseen_t rs = {.t = t};

        ck_assert_int_eq(sg_pub_new(60000, &rs.pub), SG_OK);
        t->disk_full = true;
        t->grow_fail_max = 5;
        tp_interface(t, &proc);
        g_publish_cb = ready_publish;
        g_publish_opaque = &rs;
        run_loop(&proc, &t->loop, NULL, NULL, &r);
        g_publish_cb = NULL;

        ck_assert_int_eq(t->grow_fails, 5);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 5);
        ck_assert_msg(rs.not_ready_full > 0 && rs.ready_full == 0,
                      "/readyz while every batch is aborted: %d not ready, "
                      "%d ready",
                      rs.not_ready_full, rs.ready_full);
        ck_assert_msg(strstr(rs.body, "\"status\":\"not_ready\"") &&
                              strstr(rs.body, "\"reason\""),
                      "%s", rs.body);
        ck_assert_int_gt(rs.ready_after, 0);
        ck_assert_uint_eq(r.stats.batches_aborted_in_a_row, 0);
        assert_tp_consistent(t);
        read_output(&o);
        assert_superset_in_order(&o);
        assert_committed_at_end();
        sg_pub_destroy(rs.pub);
        tp_destroy(t);
}
END_TEST

START_TEST(map_full_grows_and_reruns) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->mapfull_mod = 100, t->mapfull_rem = 30; /* 2 per partition */
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->mapfulls, 2 * NPART);
        ck_assert_int_eq(t->grows, t->mapfulls);
        ck_assert_uint_eq(r.stats.map_grows_total, (uint64_t)t->mapfulls);
        ck_assert_int_eq(g_logs.grown, t->mapfulls);
        /* Each attempt was aborted before the re-run, which then processed
         * the very same records in the same order and committed. */
        ck_assert_int_eq(t->aborts, t->mapfulls);
        ck_assert_int_eq(t->rerun_ok, t->mapfulls);
        ck_assert_int_eq(t->rerun_bad, 0);
        ck_assert(!t->rr_pending);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_int_eq(g_logs.aborted, 0);
        assert_tp_consistent(t);

        read_output(&o);
        assert_superset_in_order(&o);
        /* The records decided before the store filled were produced
         * while deciding and delivered before the rewind: each is there
         * exactly twice, nothing lost, first occurrences in order. */
        ck_assert_int_eq(o.dups, t->dup_expected);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (4) delivery failures from the mock cluster                          */

START_TEST(delivery_failures_abort_and_reread) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        /* The next 3 Produce requests (the loop's producer is the only one
         * left) fail with a non-retriable error (the broker's unexpected
         * error: an authorization error would stop the loop, a missing
         * ACL being the operator's to fix). */
        rd_kafka_mock_push_request_errors(
                g_mc, 0 /* Produce */, 3, RD_KAFKA_RESP_ERR_UNKNOWN,
                RD_KAFKA_RESP_ERR_UNKNOWN, RD_KAFKA_RESP_ERR_UNKNOWN);
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_uint_ge(r.stats.delivery_failures_total, 1);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        ck_assert_uint_eq(r.stats.batches_aborted_total, (uint64_t)t->aborts);
        ck_assert_int_eq(g_logs.aborted, t->aborts);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);

        read_output(&o);
        assert_superset_in_order(&o);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* A permanent delivery failure of a batch's first produce request while
 * later requests of the same output partition are in flight or queued
 * (a batch's output for one partition spans several requests whenever it
 * exceeds batch.num.messages or batch.size, or when the producer's thread
 * sends before the loop handed over the whole batch — which a busy
 * machine does): no later record of that partition may land, or the
 * batch's re-read puts its records after them and the partition's output
 * is out of order. The processor arms the failure at the last record of
 * a full batch (at_least_once hands the batch's output over at its end,
 * after that), so the failed request is that batch's first; with
 * batch.num.messages 5 the rest of each partition's records are in later
 * requests. The failure is the broker's unexpected error (an authorization
 * error would stop the loop: delivery_unauthorized_stops_naming_the_acl).
 * Before: librdkafka bumped the idempotent producer's epoch and
 * sent the later records (a gap), then the re-read wrote the failed ones
 * after them: read_output counted first occurrences out of order. */
#define GAP_RTT_MS 500

static sg_err_t gap_process(void *o, const sg_record_t *r,
                            sg_process_result_t *res, char *es, size_t n) {
        tproc_t *t = o;
        if (t->gap_armed == 0 && t->att_n == BATCH_MAX - 1) {
                t->gap_armed = 1;
                /* answered GAP_RTT_MS late (and the requests after it
                 * behind it, in order), so that the whole batch is with
                 * the producer before the failure is known */
                ck_assert_int_eq(rd_kafka_mock_broker_push_request_error_rtts(
                                         g_mc, 1 /* the only broker */,
                                         0 /* Produce */, 1,
                                         RD_KAFKA_RESP_ERR_UNKNOWN, GAP_RTT_MS),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        return tp_process(o, r, res, es, n);
}

START_TEST(delivery_failure_lands_no_later_record) {
        sg_config_destroy(g_conf);
        g_root_extra = ALOS "\"kafka_producer\":{\"batch.num.messages\":5},";
        g_conf = conf_parse(g_bs, TOPICS_IN, NULL);
        g_root_extra = ALOS;

        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        tp_interface(t, &proc);
        proc.process = gap_process;
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->gap_armed, 1);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);

        read_output(&o);
        assert_superset_in_order(&o);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (5) SG_PAUSE: partition paused, the record read again later          */

START_TEST(pause_rereads_after_pause_retry) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        /* The partition read first, so that the others still have records
         * to go on with while it is paused. */
        t->pause_part = -1, t->pause_off = 5;
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->pauses, 1);
        ck_assert_uint_eq(r.stats.pauses_total, 1);
        ck_assert_int_eq(g_logs.paused, 1);
        ck_assert_int_ge(g_logs.resumed, 1);
        /* Once refused, once consumed — not before pause_retry_ms. */
        ck_assert_int_eq(t->pause_calls, 2);
        ck_assert_int_gt(t->resume_ms, 0);
        ck_assert_int_ge(t->resume_ms - t->pause_ms, PAUSE_RETRY_MS);
        /* The paused partition did not move on without the paused record;
         * the others went on meanwhile — when they had records left: the
         * fetches' order decides that (under load every other partition
         * was once read before the paused record's partition got to
         * offset 5, and nothing was left to go on with). */
        ck_assert_int_eq(t->paused_part_wrong, 0);
        ck_assert_msg(t->other_left_at_pause == 0 || t->other_during_pause > 0,
                      "%d records of other partitions were left at the "
                      "pause, none was processed during it",
                      t->other_left_at_pause);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        assert_tp_consistent(t);

        read_output(&o);
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (8) sg_loop_stop from another thread                                */

typedef struct midstop {
        tproc_t *t;
        sg_loop_t **loopp; /**< set by run_loop() before this thread starts */
        atomic_int at;     /**< records committed when stop was called */
} midstop_t;

static void *stop_midway(void *a) {
        midstop_t *m = a;
        int64_t end = mono_ms() + WATCHDOG_MS;
        while (atomic_load(&m->t->committed_cnt) < NREC / 3 && mono_ms() < end)
                tu_sleep_ms(1);
        atomic_store(&m->at, atomic_load(&m->t->committed_cnt));
        sg_loop_stop(*m->loopp);
        return NULL;
}

START_TEST(stop_from_other_thread_commits_final_offsets) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;
        int64_t off[NPART];
        midstop_t m = {.t = t, .loopp = &t->loop};

        t->stop_when_done = false;
        t->begin_sleep_ms = 30; /* a batch in flight when stop comes */
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, stop_midway, &m, &r);

        int done = atomic_load(&t->committed_cnt);
        ck_assert_int_ge(atomic_load(&m.at), NREC / 3);
        ck_assert_int_ge(done, atomic_load(&m.at));
        ck_assert_int_lt(done, NREC); /* stopped midway */
        /* Whatever was processed was committed, in Kafka too. */
        ck_assert_int_eq(t->aborts, 0);
        ck_assert_int_eq(t->commit_calls, t->commits_ok);
        ck_assert_uint_eq(r.stats.batches_total, (uint64_t)t->commits_ok);
        ck_assert_uint_eq(r.stats.records_in_total, (uint64_t)done);
        ck_assert_int_eq(t->gaps, 0);
        ck_assert_int_eq(t->recommitted, 0);
        committed_offsets(off);
        for (int p = 0; p < NPART; p++)
                ck_assert_msg(off[p] == (t->next_off[p] > 0
                                                 ? t->next_off[p]
                                                 : RD_KAFKA_OFFSET_INVALID),
                              "partition %d: group committed %" PRId64
                              ", processor committed up to %" PRId64,
                              p, off[p], t->next_off[p]);

        /* The output holds exactly the committed records. */
        read_output(&o);
        ck_assert_int_eq(o.bad, 0);
        ck_assert_int_eq(o.dups, 0);
        ck_assert_int_eq(o.disorder, 0);
        ck_assert_int_eq(o.total, done);
        for (int i = 0; i < NREC; i++)
                ck_assert_int_eq(o.count[i % NKEYS][i / NKEYS],
                                 t->committed[i % NPART][i / NPART]);
        tp_destroy(t);
}
END_TEST

/* A delivery refused for a missing ACL (TOPIC_AUTHORIZATION_FAILED) is
 * not a failure that a re-read can mend: the loop stops with
 * SG_ERR_CONFIG (exit 2) naming the principal's missing ACL, instead of
 * aborting and re-reading the batch for ever (docs/operating.md "Transient broker
 * errors"). */
START_TEST(delivery_unauthorized_stops_naming_the_acl) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        char es[512] = "";
        sg_loop_t *loop = NULL;

        rd_kafka_mock_push_request_errors(
                g_mc, 0 /* Produce */, 1,
                RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
        tp_interface(t, &proc);
        ck_assert_int_eq(sg_loop_new(g_conf, &proc, log_cb, &g_logs, NULL, NULL,
                                     &loop, es, sizeof(es)),
                         SG_OK);
        t->loop = loop;
        watchdog_t w = {.loop = loop};
        pthread_create(&w.th, NULL, watchdog_main, &w);
        sg_err_t err = sg_loop_run(loop, es, sizeof(es));
        atomic_store(&w.done, true);
        pthread_join(w.th, NULL);
        sg_loop_destroy(loop);
        ck_assert_msg(err == SG_ERR_CONFIG && !atomic_load(&w.fired),
                      "got %s: %s", sg_err2str(err), es);
        ck_assert_msg(strstr(es, "needs an ACL allowing Write on topic "
                                 "\"out\""),
                      "errstr: %s", es);
        ck_assert_int_le(g_logs.aborted, 1);
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (11) a record Kafka refuses for what it is                           */

/* The broker refuses two produce requests with INVALID_RECORD (the mock
 * fails every record of a request). A refusal of one record names it: the
 * processor is told which (refused(index)) and the batch runs again at
 * once — no back-off, no aborted batch. A refusal of several records of
 * one request does not say which (when the first batch holds more than
 * one record): the loop runs the batch again producing one record at a
 * time, and the next refusal names one. Either way the first record of the
 * batch is named and the batch commits. Before: every attempt was an
 * aborted batch re-read after a back-off, and nobody was told. */
/* at_least_once hands a batch's effects to the producer while the batch
 * is decided, as exactly_once does (an eighth of batch.max_records at a
 * time), so librdkafka sends the first records while the processor
 * decides the rest, and the end of the batch waits only for the tail.
 * Before: at_least_once produced nothing until every record of the batch
 * was decided, so "out" never grew during a batch and every probe missed. */
START_TEST(alo_overlap_delivers_while_deciding) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->overlap_probes = 3;
        t->overlap_rk = client_new(RD_KAFKA_CONSUMER, "probe", false);
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->overlap_missed, 0);
        ck_assert_int_eq(t->overlap_seen, 3);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        assert_tp_consistent(t);
        read_output(&o);
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* at_least_once, producing while deciding: a delivery failure of a
 * batch's first records, reported while the processor still decides its
 * later records (the probe waits for the first produce request to be
 * answered). The failure stops the producer before a later record of the
 * partition lands (enable.gapless.guarantee); the loop replaces it and
 * re-reads the batch: nothing lost, first occurrences in order (this order
 * broke when at_least_once first produced while deciding, before the
 * gap-less producer), the offsets at the end. */
START_TEST(alo_overlap_early_delivery_failure_rewinds) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        /* pushed at the first record decided: pushed here, before the
         * loop started, the error could meet a claim written at the
         * assignment instead (the sanitizer build's timing: no delivery
         * failure at all) */
        t->produce_err_at_first_record = RD_KAFKA_RESP_ERR_UNKNOWN;
        t->overlap_probes = 2;
        t->overlap_rk = client_new(RD_KAFKA_CONSUMER, "probe", false);
        tp_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->overlap_seen + t->overlap_missed, 2);
        /* the failed request stopped the producer (a fatal gap-less
         * error), which the loop replaced; the batch learns of it by a
         * failed delivery report or, when its next produce() comes
         * first, by that call's fatal error (dr_fail 0): either aborts
         * the batch */
        ck_assert_int_ge(g_logs.recreated, 1);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        ck_assert_uint_eq(r.stats.batches_aborted_total, (uint64_t)t->aborts);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);
        read_output(&o);
        assert_superset_in_order(&o);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

START_TEST(refused_record_found_and_reported) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        rd_kafka_mock_push_request_errors(g_mc, 0 /* Produce */, 2,
                                          RD_KAFKA_RESP_ERR_INVALID_RECORD,
                                          RD_KAFKA_RESP_ERR_INVALID_RECORD);
        tp_interface(t, &proc);
        proc.refused = tp_refused;
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_ge(t->refused_calls, 1);
        ck_assert_int_le(t->refused_calls, 2);
        ck_assert_uint_eq(t->refused_index, 0); /* the first, alone */
        ck_assert_msg(strstr(t->refused_reason, "validate record") != NULL,
                      "reason: %s", t->refused_reason);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_int_eq(g_logs.aborted, 0);
        ck_assert_int_ge(g_logs.reruns, t->refused_calls);
        ck_assert_uint_ge(r.stats.delivery_failures_total, 2);
        assert_tp_consistent(t);
        read_output(&o);
        assert_superset_in_order(&o);
        assert_committed_at_end();
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (10) out of memory in the loop's partition table                    */

/* The library never exits (seqgate.h): an allocation that fails while the
 * loop records an assigned partition stops the loop with an error, nothing
 * of the partition processed or committed. Before: abort(). */
START_TEST(nomem_partition_table_stops_with_error) {
        sg_passthrough_t *pt;
        sg_processor_t proc;
        char es[512] = "";
        sg_loop_t *loop = NULL;

        ck_assert_int_eq(sg_passthrough_new(g_conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &proc);
        ck_assert_int_eq(sg_loop_new(g_conf, &proc, log_cb, &g_logs, NULL, NULL,
                                     &loop, es, sizeof(es)),
                         SG_OK);
        atomic_store(&g_failed_strdups, 0);
        g_fail_strdup = "in"; /* the partition table's copy of the topic */
        sg_err_t err = sg_loop_run(loop, es, sizeof(es));
        g_fail_strdup = NULL;
        const sg_loop_stats_t st = *sg_loop_stats(loop);
        sg_loop_destroy(loop);
        sg_passthrough_destroy(pt);

        ck_assert_int_ge(atomic_load(&g_failed_strdups), 1);
        ck_assert_msg(err == SG_ERR_NOMEM, "got %s: %s", sg_err2str(err), es);
        ck_assert_msg(strstr(es, "out of memory") != NULL, "errstr: %s", es);
        ck_assert_int_eq(g_logs.fatal, 1);
        ck_assert_uint_eq(st.records_in_total, 0);
        int64_t off[NPART];
        committed_offsets(off);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_lt(off[p], 0); /* nothing committed */
}
END_TEST

int main(void) {
        Suite *s = suite_create("kafka");

        TCase *tl = tcase_create("loop");
        tcase_add_checked_fixture(tl, loop_setup, mock_teardown);
        tcase_set_timeout(tl, 90);
        add(tl, clean_run_exactly_once_in_order);
        add(tl, slow_offset_commit_does_not_stop_the_loop);
        add(tl, slow_delivery_does_not_stop_the_stats);
        add(tl, latency_histograms_skip_idle_batches);
        add(tl, process_and_commit_failures_reread);
        add(tl, map_full_grows_and_reruns);
        add(tl, full_disk_is_not_ready_until_a_batch_commits);
        add(tl, delivery_failures_abort_and_reread);
        add(tl, delivery_unauthorized_stops_naming_the_acl);
        add(tl, delivery_failure_lands_no_later_record);
        add(tl, pause_rereads_after_pause_retry);
        add(tl, stop_from_other_thread_commits_final_offsets);
        add(tl, nomem_partition_table_stops_with_error);
        add(tl, refused_record_found_and_reported);
        add(tl, alo_overlap_delivers_while_deciding);
        add(tl, alo_overlap_early_delivery_failure_rewinds);
        suite_add_tcase(s, tl);

        return tu_run_suite(s);
}
