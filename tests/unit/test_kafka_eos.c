/*
 * test_kafka_eos.c — the Kafka loop (kafka.h) with exactly_once on
 * librdkafka's mock cluster: transactions, their aborts and commit
 * failures, restores from the changelog and their retries, and output
 * produced while the batch is still being decided (semantics §6). What
 * every loop case checks, and the harness: test_kafka.c, kafka_harness.h.
 *
 * SG_TEST_ONLY=<test name> runs one test; SG_TEST_VERBOSE=1 prints the
 * loop's log events and each committed batch.
 */
#include "kafka_harness.h"

/* ------------------------------------------------------------------ */
/* (8) exactly_once: transactions on the mock cluster                   */
/*
 * librdkafka 2.0.2's mock cluster runs transactions (InitProducerId,
 * AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) but does
 * not store offsets sent with send_offsets_to_transaction (checked: the
 * group's committed offset stays unset), and has no transaction markers /
 * stable offsets. So these cases stop on the processor's count, not on the
 * group's committed offsets; committed offsets, read_committed filtering of
 * aborted transactions and fencing are checked on a real broker
 * (tests/integration/test_exactly_once.py).
 */

static void tp_eos_interface(tproc_t *t, sg_processor_t *p) {
        tp_interface(t, p);
        p->delivered = tp_delivered;
        p->restore_begin = tp_restore_begin;
        p->restore_apply = tp_restore_apply;
        p->restore_end = tp_restore_end;
}

/* A clean run: every batch is one transaction holding its output and its
 * input offsets (no rd_kafka_commit); the output read with read_committed
 * is exact; delivered() is told every effect's offset; each assigned
 * partition was restored before it was read. */
START_TEST(eos_clean_run_transactions) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_uint_gt(r.stats.transactions_total, 0);
        ck_assert_uint_le(r.stats.transactions_total, r.stats.batches_total);
        ck_assert_uint_eq(r.stats.transactions_aborted_total, 0);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        ck_assert_int_eq(t->delivered, NREC);
        ck_assert_int_eq(t->delivered_bad, 0);
        ck_assert_int_eq(t->out_disorder, 0);
        ck_assert_int_eq(t->restore_begins, NPART);
        ck_assert_int_eq(t->restore_ends, NPART);
        ck_assert_int_eq(t->restore_bad, 0);
        ck_assert_int_eq(g_logs.restore_done, NPART);
        ck_assert_int_eq(t->gaps, 0);
        ck_assert_int_eq(t->recommitted, 0);

        assert_tp_consistent(t);
        read_output(&o); /* librdkafka's default isolation: read_committed */
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0);
        tp_destroy(t);
}
END_TEST

/* batch_commit (LMDB) fails after the transaction committed: the batch is
 * NOT re-read (Kafka has its output and offsets exactly once); the loop
 * logs store_behind_changelog and restores every assigned partition before
 * the next batch. */
START_TEST(eos_commit_failure_restores_not_rereads) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->kafka_commits = true;
        t->commit_fail_period = 3, t->commit_fail_max = 2;
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->commit_fails, 2);
        ck_assert_int_eq(g_logs.store_behind, 2);
        ck_assert_int_eq(g_logs.aborted, 0);
        ck_assert_uint_eq(r.stats.transactions_aborted_total, 0);
        /* NPART at the assignment, NPART after each failed LMDB commit */
        ck_assert_int_eq(t->restore_begins, NPART * 3);
        ck_assert_int_eq(t->restore_ends, NPART * 3);
        ck_assert_int_eq(t->restore_bad, 0);
        ck_assert_int_eq(t->recommitted, 0);
        ck_assert_int_eq(t->gaps, 0); /* read on after, never re-read */
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_eq(t->next_off[p], PER_PART);

        read_output(&o);
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0); /* at_least_once would duplicate */
        tp_destroy(t);
}
END_TEST

/* A restore after a failed LMDB commit fails too (the disk is still
 * full): the loop logs restore_failed, waits and tries again, with the
 * consumer's queue full of fetched records — it must not serve that queue
 * with rd_kafka_poll (the consumer's queue is the main queue:
 * rd_kafka_poll_set_consumer; librdkafka asserts on a fetched message
 * there) — and once the restore succeeds it goes on, reading nothing
 * twice. */
START_TEST(eos_failed_restore_retries_without_polling) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;

        t->kafka_commits = true;
        t->commit_fail_period = 3, t->commit_fail_max = 1;
        t->restore_fail_max = 2;
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->commit_fails, 1);
        ck_assert_int_eq(t->restore_fails, 2);
        ck_assert_int_eq(g_logs.store_behind, 1);
        ck_assert_int_eq(t->restore_begins, NPART * 2);
        ck_assert_int_eq(t->restore_bad, 0);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);
        tp_destroy(t);
}
END_TEST

/* What /readyz said at each publish of a run whose restore reruns fail. */
typedef struct restoreseen {
        sg_pub_t *pub;
        tproc_t *t;
        int not_ready_failing; /**< 503 naming the restore's error */
        int ready_failing;     /**< 200 after a failed rerun, none good yet */
        int ready_after;       /**< 200 once a rerun succeeded */
        char body[1024];       /**< the first 503 body */
} restoreseen_t;

static void restore_publish(void *o, struct sg_metrics_snap *snap) {
        restoreseen_t *rs = o;
        int st = 0;
        char *b = NULL;
        sg_pub_publish(rs->pub, snap);
        if (!snap->assigned_once || snap->stopped)
                return;
        ck_assert_int_eq(sg_pub_ready(rs->pub, &st, &b), SG_OK);
        /* failing: a rerun failed, and none has begun well since */
        bool failing =
                rs->t->restore_fails > 0 && rs->t->restore_begins == NPART;
        if (failing && st == 503 && strstr(b, "test: restore_begin fails")) {
                if (!rs->body[0])
                        snprintf(rs->body, sizeof(rs->body), "%s", b);
                rs->not_ready_failing++;
        } else if (failing && st == 200) {
                rs->ready_failing++;
        } else if (!failing && st == 200 && rs->not_ready_failing) {
                rs->ready_after++;
        }
        free(b);
}

/* While the restore a failed checkpoint commit calls for keeps failing
 * (a full disk: semantics §6 "Disk space"), /readyz says not ready, with
 * the restore's error, until a restore succeeds: the loop judges nothing
 * meanwhile, as when its batches are aborted. */
START_TEST(eos_failing_restore_is_not_ready) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        restoreseen_t rs = {.t = t};

        ck_assert_int_eq(sg_pub_new(60000, &rs.pub), SG_OK);
        t->kafka_commits = true;
        t->commit_fail_period = 3, t->commit_fail_max = 1;
        t->restore_fail_max = 3;
        tp_eos_interface(t, &proc);
        g_publish_cb = restore_publish;
        g_publish_opaque = &rs;
        run_loop(&proc, &t->loop, NULL, NULL, &r);
        g_publish_cb = NULL;

        ck_assert_int_eq(t->restore_fails, 3);
        ck_assert_msg(rs.not_ready_failing > 0 && rs.ready_failing == 0,
                      "/readyz while the restore fails: %d not ready, "
                      "%d ready",
                      rs.not_ready_failing, rs.ready_failing);
        ck_assert_msg(strstr(rs.body, "\"status\":\"not_ready\"") &&
                              strstr(rs.body, "\"reason\":\"restore "),
                      "%s", rs.body);
        ck_assert_int_gt(rs.ready_after, 0);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);
        sg_pub_destroy(rs.pub);
        tp_destroy(t);
}
END_TEST

/* exactly_once: commit_interval_ms bounds how long a batch (one
 * transaction) stays open, as Kafka Streams' commit.interval.ms bounds its
 * transactions under exactly_once_v2: with batch.max_ms at its longest
 * (60 s), the last batch, short of batch.max_records, is committed
 * within a commit interval, not after a minute (docs/configuration.md,
 * commit_interval_ms). */
START_TEST(eos_commit_interval_bounds_the_transaction) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;

        g_conf->batch_max_records = BATCH_MAX - 1; /* NREC % 49 = 12 */
        g_conf->batch_max_ms = 60000;
        g_conf->commit_interval_ms = 200;
        tp_eos_interface(t, &proc);
        int64_t t0 = mono_ms();
        run_loop(&proc, &t->loop, NULL, NULL, &r);
        int64_t took = mono_ms() - t0;

        ck_assert_int_eq(atomic_load(&t->committed_cnt), NREC);
        ck_assert_uint_gt(r.stats.transactions_total, 0);
        ck_assert_uint_eq(r.stats.transactions_aborted_total, 0);
        ck_assert_msg(took < 20000, "took %" PRId64 " ms", took);
        assert_tp_consistent(t);
        tp_destroy(t);
}
END_TEST

/* A process error aborts before the transaction begins; a delivery failure
 * aborts the open transaction: its records never reach a read_committed
 * reader, the batch is re-read. */
START_TEST(eos_failures_abort_transaction) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->proc_fail_mod = 100, t->proc_fail_rem = 11; /* 2 per partition */
        rd_kafka_mock_push_request_errors(g_mc, 0 /* Produce */, 2,
                                          RD_KAFKA_RESP_ERR_UNKNOWN,
                                          RD_KAFKA_RESP_ERR_UNKNOWN);
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->proc_fails, 2 * NPART);
        ck_assert_uint_gt(r.stats.delivery_failures_total, 0);
        ck_assert_uint_gt(r.stats.transactions_aborted_total, 0);
        /* A process error after the attempt produced its first records
         * (produce while deciding) aborts an open transaction too. */
        ck_assert_uint_ge(r.stats.batches_aborted_total,
                          (uint64_t)t->proc_fails);
        ck_assert_uint_le(r.stats.batches_aborted_total,
                          (uint64_t)t->proc_fails +
                                  r.stats.transactions_aborted_total);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);

        /* No markers on the mock: an aborted transaction's records are
         * still read back, so duplicates are not asserted here (the real
         * broker case: test_exactly_once.py). Nothing may be missing. */
        read_output(&o);
        assert_superset_in_order(&o);
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (9) retriable broker errors in restores (at start-up:                */
/* test_kafka_startup.c)                                                */

/* The changelog partition's leader moves while the partition is restored
 * (the broker answers ListOffsets with NOT_LEADER_FOR_PARTITION, which
 * librdkafka does not retry itself): the restore retries, the run
 * completes. Before: "restore: changelog ... reading its offsets: Broker:
 * Not leader for partition", the loop stopped (exit 1). */
START_TEST(eos_restore_retries_not_leader) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;

        rd_kafka_mock_push_request_errors(
                g_mc, 2 /* ListOffsets */, 3,
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_ge(g_logs.retries, 1);
        ck_assert_int_eq(t->restore_begins, NPART);
        ck_assert_int_eq(t->restore_ends, NPART);
        ck_assert_int_eq(g_logs.restore_done, NPART);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);
        tp_destroy(t);
}
END_TEST

/* Control: a non-retriable error in a restore still stops the loop, at
 * once (no retry). */
START_TEST(eos_restore_non_retriable_is_fatal) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        char es[512] = "";
        sg_loop_t *loop = NULL;

        rd_kafka_mock_push_request_errors(
                g_mc, 2 /* ListOffsets */, 2,
                RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
        tp_eos_interface(t, &proc);
        ck_assert_int_eq(sg_loop_new(g_conf, &proc, log_cb, &g_logs, NULL, NULL,
                                     &loop, es, sizeof(es)),
                         SG_OK);
        t->loop = loop;
        int64_t t0 = mono_ms();
        sg_err_t err = sg_loop_run(loop, es, sizeof(es));
        int64_t took = mono_ms() - t0;
        sg_loop_destroy(loop);
        ck_assert_msg(err == SG_ERR_FATAL, "got %s: %s", sg_err2str(err), es);
        ck_assert_msg(strstr(es, "restore") && strstr(es, "uthorization"),
                      "errstr: %s", es);
        ck_assert_int_lt(took, 20000);
        ck_assert_int_eq(g_logs.retries, 0);
        tp_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (9b) produce while deciding                                          */

/* exactly_once: the effects are handed to the producer while the batch is
 * decided (an eighth of batch.max_records at a time): the records decided
 * first are delivered while the processor still decides the rest of the
 * batch (librdkafka's threads send
 * on the other core). Before: nothing was produced until every record of
 * the batch was decided, so "out" never grew during a batch and every
 * probe missed. */
START_TEST(overlap_delivers_while_deciding) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        t->overlap_probes = 3;
        t->overlap_rk = client_new(RD_KAFKA_CONSUMER, "probe", false);
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        ck_assert_int_eq(t->overlap_missed, 0);
        ck_assert_int_eq(t->overlap_seen, 3);
        ck_assert_uint_eq(r.stats.batches_aborted_total, 0);
        ck_assert_uint_eq(r.stats.records_out_total, NREC);
        assert_tp_consistent(t);
        read_output(&o);
        assert_superset_in_order(&o);
        ck_assert_int_eq(o.dups, 0);
        tp_destroy(t);
}
END_TEST

/* A delivery failure of the first records of a batch, reported while the
 * processor still decides the batch's later records (the probe waits for
 * the first produce request to be answered): the transaction is aborted
 * and the whole batch re-read; nothing is lost and the offsets reach the
 * end. (No markers on the mock: the aborted transaction's records are
 * read back, so neither duplicates nor their order are asserted here; the
 * real broker case: test_exactly_once.py.) */
START_TEST(overlap_early_delivery_failure_rewinds) {
        tproc_t *t = tp_new();
        sg_processor_t proc;
        run_t r;
        outres_t o;

        rd_kafka_mock_push_request_errors(g_mc, 0 /* Produce */, 1,
                                          RD_KAFKA_RESP_ERR_UNKNOWN);
        t->overlap_probes = 2;
        t->overlap_rk = client_new(RD_KAFKA_CONSUMER, "probe", false);
        tp_eos_interface(t, &proc);
        run_loop(&proc, &t->loop, NULL, NULL, &r);

        /* the failed batch's later records may still land (they are not
         * in the failed request): "out" grows either way */
        ck_assert_int_eq(t->overlap_seen + t->overlap_missed, 2);
        ck_assert_uint_ge(r.stats.delivery_failures_total, 1);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        ck_assert_uint_ge(r.stats.transactions_aborted_total, 1);
        ck_assert_uint_eq(r.stats.batches_aborted_total, (uint64_t)t->aborts);
        ck_assert_uint_eq(r.stats.records_in_total, NREC);
        assert_tp_consistent(t);
        read_output(&o);
        ck_assert_int_eq(o.missing, 0);
        ck_assert_int_eq(o.bad, 0);
        tp_destroy(t);
}
END_TEST

int main(void) {
        Suite *s = suite_create("kafka_eos");

        TCase *te = tcase_create("exactly_once");
        tcase_add_checked_fixture(te, eos_setup, eos_teardown);
        tcase_set_timeout(te, 90);
        add(te, eos_clean_run_transactions);
        add(te, eos_commit_failure_restores_not_rereads);
        add(te, eos_failed_restore_retries_without_polling);
        add(te, eos_failing_restore_is_not_ready);
        add(te, eos_failures_abort_transaction);
        add(te, eos_commit_interval_bounds_the_transaction);
        add(te, overlap_delivers_while_deciding);
        add(te, overlap_early_delivery_failure_rewinds);
        add(te, eos_restore_retries_not_leader);
        add(te, eos_restore_non_retriable_is_fatal);
        suite_add_tcase(s, te);

        return tu_run_suite(s);
}
