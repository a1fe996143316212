/*
 * test_engine.c — every row of the decision table (semantics §3), the
 * ordering modes (§3b), gap policies and caps (§4), TTL expiry, replay,
 * batch abort and restart, driven through the processor interface exactly
 * as the Kafka loop drives it, with no broker.
 */
#include "config.h"
#include "engine.h"
#include "envelope.h"
#include "store.h"
#define TU_ENGINE_HARNESS
#include "testutil.h"
#include "suites.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- rows ------------------------------------------------------------- */

START_TEST(row1_malformed) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "abc"));
        ck_assert_uint_eq(h.out_cnt, 1);
        assert_out(&h.out[0], SG_EFFECT_DLQ, "A", "abc", "malformed");
        ck_assert_str_eq(h.out[0].topic, "dlq");
        ck_assert_ptr_nonnull(strstr(h.out[0].detail, "abc"));
        ck_assert_uint_eq(M(&h)->malformed_total, 1);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_MALFORMED], 1);
        /* dead-lettered at the batch's processing time, RFC 3339 UTC with
         * milliseconds, also its Kafka timestamp (the input's is
         * __seqgate.errors.timestamp) */
        char at[40];
        ck_assert_str_eq(h.out[0].dead_lettered_at,
                         sg_iso_time(T0, at, sizeof(at)));
        ck_assert_str_eq(at, "2023-11-14T22:13:20.000Z");
        ck_assert_int_eq(h.out[0].timestamp_ms, T0);
        /* nothing else changed: v1 still applies */
        ONE(&h, EV("A", "e2", "t", "1"));
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "1", NULL);
        h_free(&h);
}
END_TEST

/* Semantics §3 row 1: a malformed record whose idempotency key and digest
 * parse is recorded dead_lettered (malformed), so that the result query
 * answers it; its DLQ record names the aggregate and version that parsed.
 * The record claims no key: a well-formed copy is judged as new (even with
 * the same value: only a header was wrong), a plain redelivery of the
 * malformed copy is a duplicate, a replayed one is dead-lettered again. */
START_TEST(row1_malformed_records_its_key) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "one"));
        ck_assert_uint_eq(h.out_cnt, 1);
        assert_out(&h.out[0], SG_EFFECT_DLQ, "A", "one", "malformed");
        /* the fields that parsed are in its headers; no version parsed */
        ck_assert_pstr_eq(h.out[0].aggregate, "A");
        ck_assert_pstr_eq(h.out[0].actual, "");
        ck_assert_pstr_eq(h.out[0].expected, "");
        /* the key is recorded: dead_lettered, malformed */
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        unsigned char kh[32];
        const char *scope[] = {"/shop"};
        ASSERT_OK(sg_envelope_key_hash("orders", scope, 1, "e1", kh), "");
        sg_txn_t *t;
        char err[256];
        ASSERT_OK(sg_txn_begin(h.store, false, &t, err, sizeof(err)), err);
        sg_dedup_rec_t dr;
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &dr), SG_OK);
        sg_txn_abort(t);
        ck_assert_int_eq(dr.verdict, SG_DV_DLQ);
        ck_assert_int_eq(dr.reason, SG_R_MALFORMED);
        /* a plain redelivery: a duplicate, no second DLQ record */
        ONE(&h, EV("A", "e1", "t", "one"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        ck_assert_uint_eq(M(&h)->malformed_total, 1);
        /* replayed: malformed again, dead-lettered again */
        ONE(&h, EV("A", "e1", "t", "one", .replay = true));
        ck_assert_uint_eq(h.out_cnt, 2);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "one", "malformed");
        /* corrected (same value, the version header fixed): judged as new,
         * applied, and its verdict replaces the malformed one */
        ONE(&h, EV("A", "e1", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[2], SG_EFFECT_OUTPUT, "A", "1", NULL);
        ASSERT_OK(sg_txn_begin(h.store, false, &t, err, sizeof(err)), err);
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &dr), SG_OK);
        sg_txn_abort(t);
        ck_assert_int_eq(dr.verdict, SG_DV_APPLIED);
        /* ... and now it is the event: its copy is a duplicate, another
         * payload a conflict */
        ONE(&h, EV("A", "e1", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 3);
        ONE(&h, EV("A", "e1", "t", "1", .value = "other"));
        assert_out(&h.out[3], SG_EFFECT_DLQ, "A", "1", "idempotency_conflict");
        /* a malformed copy with another payload, then a corrected one
         * with a third: never a conflict with the malformed one; parked */
        ONE(&h, EV("A", "e3", "t", "x3", .value = "{\"n\":3,\"bad\":1}"));
        assert_out(&h.out[4], SG_EFFECT_DLQ, "A", "x3", "malformed");
        ONE(&h, EV("A", "e3", "t", "3", .value = "{\"n\":3}"));
        ck_assert_uint_eq(h.out_cnt, 5);
        ck_assert_uint_eq(M(&h)->parked_total, 1);
        ck_assert_uint_eq(M(&h)->idempotency_parameter_conflicts_total, 1);
        ck_assert_uint_eq(M(&h)->malformed_total, 3);
        h_free(&h);
        /* an epoch topic: the version parsed, the epoch did not */
        h_t h2 = {0};
        h_open(&h2, "\"ordering\":{\"epoch\":\"ce:epoch\"}");
        ONE(&h2, EV("B", "b1", "t", "7", .epoch = "x"));
        assert_out(&h2.out[0], SG_EFFECT_DLQ, "B", "7", "malformed");
        ck_assert_pstr_eq(h2.out[0].aggregate, "B");
        ck_assert_pstr_eq(h2.out[0].actual, "7");
        ck_assert_ptr_nonnull(strstr(h2.out[0].detail, "epoch"));
        h_free(&h2);
}
END_TEST

/* Semantics §3 row 1: a record whose key does not parse records nothing
 * (there is no key to record): a redelivery is dead-lettered again. */
START_TEST(row1_malformed_without_key) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "", "t", "1"));
        ONE(&h, EV("A", "", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 2);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "1", "malformed");
        /* the aggregate and version parsed: both named */
        ck_assert_pstr_eq(h.out[1].aggregate, "A");
        ck_assert_pstr_eq(h.out[1].actual, "1");
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 0);
        h_free(&h);
}
END_TEST

START_TEST(row2_duplicate) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e1", "t", "1"));
        ONE(&h, EV("A", "e1", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 2);
        ck_assert_uint_eq(M(&h)->applied_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(row3_conflict) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1", .value = "{\"amount\":1}"));
        ONE(&h, EV("A", "e1", "t", "1", .value = "{\"amount\":2}"));
        ck_assert_uint_eq(h.out_cnt, 2);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "1", "idempotency_conflict");
        ck_assert_str_eq(h.out[1].value, "{\"amount\":2}");
        ck_assert_uint_eq(M(&h)->idempotency_parameter_conflicts_total, 1);
        /* the original record is untouched: its copy is still a duplicate */
        ONE(&h, EV("A", "e1", "t", "1", .value = "{\"amount\":1}"));
        ck_assert_uint_eq(h.out_cnt, 2);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(row5_stale) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"),
            EV("A", "e3", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "1", "stale_version");
        ck_assert_uint_eq(M(&h)->stale_version_rejections_total, 1);
        /* terminal verdicts record the key: a redelivery is a duplicate */
        ONE(&h, EV("A", "e3", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 3);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        /* a new aggregate below first_version is stale too */
        ONE(&h, EV("B", "e4", "t", "0"));
        assert_out(&h.out[3], SG_EFFECT_DLQ, "B", "0", "stale_version");
        h_free(&h);
}
END_TEST

START_TEST(row5_stale_drop) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"stale\":\"drop\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_uint_eq(M(&h)->stale_version_rejections_total, 1);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_STALE_VERSION], 0);
        h_free(&h);
}
END_TEST

START_TEST(row6_apply_and_drain_in_one_batch) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        /* 3 parked, then 1 2 4 5 → 1 2 3 4 5 (semantics §3) */
        ONE(&h, EV("A", "e3", "t", "3"), EV("A", "e1", "t", "1"),
            EV("A", "e2", "t", "2"), EV("A", "e4", "t", "4"),
            EV("A", "e5", "t", "5"));
        ck_assert_uint_eq(h.out_cnt, 5);
        for (int i = 0; i < 5; i++) {
                char v[8];
                snprintf(v, sizeof(v), "%d", i + 1);
                assert_out(&h.out[i], SG_EFFECT_OUTPUT, "A", v, NULL);
                ck_assert_str_eq(h.out[i].topic, "out");
                ck_assert_int_eq(h.out[i].partition, 0);
        }
        ck_assert_uint_eq(M(&h)->parked_total, 1);
        ck_assert_uint_eq(M(&h)->event_sequence_gaps_total, 1);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        /* the drained event's key is recorded as applied */
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 5);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(row6_swap_across_batches) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"));
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_int_eq(M(&h)->parked_events, 1);
        /* duplicate of a parked event is row 2 */
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        ONE(&h, EV("A", "e2", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "2", NULL);
        assert_out(&h.out[2], SG_EFFECT_OUTPUT, "A", "3", NULL);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        h_free(&h);
}
END_TEST

START_TEST(row7_illegal_transition_and_unknown_type) {
        h_t h = {0};
        h_open(&h, sm_json);
        ONE(&h, EV("O", "c", "order.created", "1"),
            EV("O", "p", "order.paid", "2"), EV("O", "s", "order.shipped", "3"),
            EV("O", "d", "order.completed", "4"),
            EV("O", "x", "order.created", "5"));
        ck_assert_uint_eq(h.out_cnt, 5);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(h.out[i].kind, SG_EFFECT_OUTPUT);
        assert_out(&h.out[4], SG_EFFECT_DLQ, "O", "5", "illegal_transition");
        ck_assert_ptr_nonnull(strstr(h.out[4].detail, "COMPLETED"));
        ck_assert_uint_eq(M(&h)->illegal_transitions_total, 1);
        /* L moved to 5: later versions are not blocked */
        ONE(&h, EV("O", "u", "order.teleported", "6"));
        assert_out(&h.out[5], SG_EFFECT_DLQ, "O", "6", "unknown_event_type");
        ONE(&h, EV("O", "y", "order.created", "5"));
        assert_out(&h.out[6], SG_EFFECT_DLQ, "O", "5", "stale_version");
        /* SHIPPED → RETURNING → CANCELLED on another order */
        ONE(&h, EV("P", "1", "order.created", "1"),
            EV("P", "2", "order.paid", "2"), EV("P", "3", "order.shipped", "3"),
            EV("P", "4", "order.cancelled", "4"),
            EV("P", "5", "order.returning", "5"),
            EV("P", "6", "order.cancelled", "6"));
        ck_assert_uint_eq(h.out_cnt, 13);
        assert_out(&h.out[10], SG_EFFECT_DLQ, "P", "4", "illegal_transition");
        assert_out(&h.out[11], SG_EFFECT_OUTPUT, "P", "5", NULL);
        assert_out(&h.out[12], SG_EFFECT_OUTPUT, "P", "6", NULL);
        h_free(&h);
}
END_TEST

START_TEST(row7_state_machine_in_drain) {
        h_t h = {0};
        h_open(&h, sm_json);
        /* v3 (illegal from PAID? no: shipped is legal from PAID) parked */
        ONE(&h, EV("O", "s", "order.created", "3"),
            EV("O", "c", "order.created", "1"),
            EV("O", "p", "order.paid", "2"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "O", "1", NULL);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "O", "2", NULL);
        /* the drained v3 goes through the state machine: created from PAID */
        assert_out(&h.out[2], SG_EFFECT_DLQ, "O", "3", "illegal_transition");
        h_free(&h);
}
END_TEST

START_TEST(row8_park_and_version_jump) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"max_version_jump\":10}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e5", "t", "5"),
            EV("A", "e6", "t", "6"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_uint_eq(M(&h)->parked_total, 2);
        ck_assert_uint_eq(M(&h)->event_sequence_gaps_total,
                          1); /* counted once */
        ck_assert_int_eq(M(&h)->parked_events, 2);
        ONE(&h, EV("A", "j", "t", "12"));
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "12", "version_jump");
        ONE(&h, EV("A", "j2", "t", "11"));
        ck_assert_uint_eq(h.out_cnt, 2); /* 11 = L + 10: parked */
        h_free(&h);
}
END_TEST

START_TEST(new_aggregate_modes) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"new_aggregate\":\"trust_first_seen\","
                   "\"first_version\":1}");
        ONE(&h, EV("A", "e7", "t", "7"), EV("A", "e8", "t", "8"),
            EV("A", "e6", "t", "6"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "7", NULL);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "8", NULL);
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "6", "stale_version");
        h_free(&h);

        h_t s = {0};
        h_open(&s, "\"ordering\":{\"new_aggregate\":\"strict\"}");
        ONE(&s, EV("A", "e7", "t", "7"));
        ck_assert_uint_eq(s.out_cnt, 0);
        ck_assert_int_eq(M(&s)->parked_events, 1);
        h_free(&s);
}
END_TEST

/* ---- gaps ------------------------------------------------------------- */

static char logged[4096];
static void log_collect(void *opaque, sg_log_level_t level, const char *event,
                        const char *fields) {
        (void)opaque;
        (void)level;
        size_t n = strlen(logged);
        snprintf(logged + n, sizeof(logged) - n, "%s%s\n", event,
                 fields ? fields : "{}");
}

/* semantics §7: stuck_processing_over_5m counts aggregates parked longer
 * than metrics.stuck_threshold_ms; the per-partition gauges of /metrics
 * (sg_engine_part_gauges) follow the same walk. */
START_TEST(stuck_threshold_configurable) {
        h_t h = {.root = "\"guarantee\":\"at_least_once\",\"metrics\":{"
                         "\"stuck_threshold_ms\":60000},"};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":3600000,"
                   "\"gap_policy\":\"hold\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 59000);
        batch(&h, NULL, 0);
        ck_assert_int_eq(M(&h)->stuck_parked, 0);
        h_clock(&h, T0 + 61000);
        batch(&h, NULL, 0);
        ck_assert_int_eq(M(&h)->stuck_parked, 1);
        sg_part_stats_t ps = {0};
        ck_assert(sg_engine_part_gauges(h.eng, "orders", 0, &ps));
        ck_assert_int_eq(ps.parked_events, 1);
        ck_assert_int_eq(ps.oldest_parked_age_ms, 61000);
        ck_assert(!sg_engine_part_gauges(h.eng, "orders", 7, &ps));
        h_free(&h);
}
END_TEST

START_TEST(gap_policy_dlq_quarantines) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":5000,\"gap_policy\":\"dlq\"}");
        logged[0] = '\0';
        sg_engine_set_log(h.eng, log_collect, NULL);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"),
            EV("A", "e4", "t", "4"));
        ck_assert_uint_eq(h.out_cnt, 1);
        h_clock(&h, T0 + 4999);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0); /* not yet */
        h_clock(&h, T0 + 5000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 2);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "3", "gap_timeout");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "4", "gap_timeout");
        ck_assert_uint_eq(M(&h)->gap_timeouts_total, 1);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        /* an operator finds both in the log, with the aggregate */
        ck_assert_ptr_nonnull(
                strstr(logged, "gap_timeout{\"topic\":\"orders\""));
        ck_assert_ptr_nonnull(strstr(logged, "aggregate_quarantined{"));
        ck_assert_ptr_nonnull(strstr(logged, "\"aggregate\":\"A\""));
        /* row 4: quarantined — even the missing v2 */
        ONE(&h, EV("A", "e2", "t", "2"));
        assert_out(&h.out[3], SG_EFFECT_DLQ, "A", "2", "aggregate_quarantined");
        /* a redelivered timed-out event is a duplicate, not a second DLQ */
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 4);
        /* other aggregates keep flowing */
        ONE(&h, EV("B", "b1", "t", "1"));
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "B", "1", NULL);
        h_free(&h);
}
END_TEST

START_TEST(gap_policy_skip) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":"
                   "\"skip\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e4", "t", "4"),
            EV("A", "e5", "t", "5"));
        h_clock(&h, T0 + 1000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 2);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "4", NULL);
        ck_assert_str_eq(h.out[1].extra_name, SG_H_GAP_SKIPPED);
        ck_assert_str_eq(h.out[1].extra_val, "2-3");
        assert_out(&h.out[2], SG_EFFECT_OUTPUT, "A", "5", NULL);
        ck_assert_str_eq(h.out[2].extra_name, "");
        ck_assert_uint_eq(M(&h)->skipped_versions_total, 2);
        /* the skipped version arriving late is stale */
        ONE(&h, EV("A", "e2", "t", "2"));
        assert_out(&h.out[3], SG_EFFECT_DLQ, "A", "2", "stale_version");
        h_free(&h);
}
END_TEST

START_TEST(gap_policy_hold) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":"
                   "\"hold\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 400000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        ck_assert_int_eq(M(&h)->parked_events, 1);
        ck_assert_int_eq(M(&h)->stuck_parked, 1);
        ck_assert_int_ge(M(&h)->oldest_parked_age_ms, 399000);
        ONE(&h, EV("A", "e2", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 3);
        h_free(&h);
}
END_TEST

START_TEST(gap_deadline_from_oldest_parked) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 900);
        ONE(&h, EV("A", "e5", "t", "5"));
        h_clock(&h, T0 + 999);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        h_clock(&h, T0 + 1000); /* deadline of the oldest (v3), not of v5 */
        ck_assert_uint_eq(batch(&h, NULL, 0), 2);
        h_free(&h);
}
END_TEST

START_TEST(caps_pause_and_dlq) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"max_parked_per_aggregate\":2,"
                   "\"on_park_overflow\":\"pause\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"),
            EV("A", "e4", "t", "4"));
        ck_assert_int_eq(h.last_result, SG_PROCESSED);
        ONE(&h, EV("A", "e5", "t", "5"));
        ck_assert_int_eq(h.last_result, SG_PAUSE);
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_int_eq(M(&h)->parked_events, 2);
        /* not consumed: after the gap fills it is accepted */
        ONE(&h, EV("A", "e2", "t", "2"), EV("A", "e5", "t", "5"));
        ck_assert_int_eq(h.last_result, SG_PROCESSED);
        ck_assert_uint_eq(h.out_cnt, 5);
        h_free(&h);

        h_t d = {0};
        h_open(&d, "\"ordering\":{\"max_parked_total\":1,\"max_parked_per_"
                   "aggregate\":1,"
                   "\"on_park_overflow\":\"dlq\"}");
        ONE(&d, EV("A", "e3", "t", "3"), EV("B", "b3", "t", "3"));
        ck_assert_uint_eq(d.out_cnt, 1);
        assert_out(&d.out[0], SG_EFFECT_DLQ, "B", "3", "park_overflow");
        ck_assert_ptr_nonnull(strstr(d.out[0].detail, "max_parked_total"));
        ck_assert_uint_eq(M(&d)->park_overflow_total, 1);
        h_free(&d);
}
END_TEST

/* ---- modes, TTL, replay -------------------------------------------------- */

START_TEST(mode_latest_wins) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"mode\":\"latest_wins\"}");
        ONE(&h, EV("D", "1", "t", "1"), EV("D", "5", "t", "5"),
            EV("D", "3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "D", "5", NULL);
        ck_assert_str_eq(h.out[1].extra_name, SG_H_GAP_MISSING);
        ck_assert_str_eq(h.out[1].extra_val, "2-4");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "D", "3", "stale_version");
        ck_assert_uint_eq(M(&h)->event_sequence_gaps_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(mode_none_dedup_only) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"mode\":\"none\"}");
        ONE(&h, EV("D", "1", "t", "5"), EV("D", "2", "t", "1"),
            EV("D", "2", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 2);
        ck_assert_int_eq(h.out[0].kind, SG_EFFECT_OUTPUT);
        ck_assert_int_eq(h.out[1].kind, SG_EFFECT_OUTPUT);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(dedup_ttl_expiry) {
        h_t h = {0};
        h_open(&h, "\"dedup\":{\"ttl_ms\":10000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        ONE(&h, EV("B", "e2", "t", "1"));
        h_clock(&h, T0 + 9999);
        ONE(&h, EV("A", "e1", "t", "1"));
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        /* past the TTL the key is forgotten, stored or not: v1 is now
         * judged stale */
        h_clock(&h, T0 + 10000);
        ONE(&h, EV("A", "e1", "t", "1"));
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "1", "stale_version");
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 0);
        /* its segment's bucket (a width of TTL / SG_DEDUP_BUCKETS) ends
         * one width after its expiry: e2 goes (e1, recorded again, lives
         * in a later bucket) */
        int64_t w = 10000 / SG_DEDUP_BUCKETS;
        h_clock(&h, T0 + 10000 + w - 1);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 0);
        h_clock(&h, T0 + 10000 + w);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(dedup_ttl_sweep_is_bounded) {
        h_t h = {0};
        h_open(&h,
               "\"dedup\":{\"ttl_ms\":1000},\"ordering\":{\"mode\":\"none\"}");
        ev_t evs[50];
        char ids[50][8];
        for (int i = 0; i < 50; i++) {
                snprintf(ids[i], sizeof(ids[i]), "i%d", i);
                evs[i] = EV("A", ids[i], "t", "1");
        }
        batch(&h, evs, 50);
        h.conf->sweep_max_per_batch = 20;
        /* expiry T0 + 1000, in the bucket [T0 + 1000, T0 + 2000) */
        h_clock(&h, T0 + 2000);
        batch(&h, NULL, 0);
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 20);
        batch(&h, NULL, 0);
        batch(&h, NULL, 0);
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 50);
        h_free(&h);
}
END_TEST

START_TEST(replay_rejudges_dlq_verdicts_only) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"),
            EV("A", "s", "t", "1"));
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "1", "stale_version");
        /* replayed DLQ record: judged again (still stale → DLQ again) */
        ONE(&h, EV("A", "s", "t", "1", .replay = true));
        ck_assert_uint_eq(h.out_cnt, 4);
        assert_out(&h.out[3], SG_EFFECT_DLQ, "A", "1", "stale_version");
        /* replayed applied record: never applied twice */
        ONE(&h, EV("A", "e2", "t", "2", .replay = true));
        ck_assert_uint_eq(h.out_cnt, 4);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        /* a DLQ'd-then-fixed case: v3 timed out, replay after quarantine is
         * still quarantined (row 4) */
        h_free(&h);
}
END_TEST

/* docs/troubleshooting.md "Replaying the DLQ after a fix": a replayed
 * illegal_transition comes back stale_version (row 7 consumed its version). */
START_TEST(replay_of_illegal_transition_is_stale) {
        char tj[2048];
        snprintf(tj, sizeof(tj), "\"ordering\":{\"gap_timeout_ms\":1000},%s",
                 sm_json);
        h_t h = {0};
        h_open(&h, tj);
        ONE(&h, EV("A", "e1", "order.created", "1"),
            EV("A", "e2", "order.shipped", "2"));
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "2", "illegal_transition");
        ONE(&h, EV("A", "e2", "order.shipped", "2", .replay = true));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "2", "stale_version");
        h_free(&h);
}
END_TEST

/* ---- batches and restarts ------------------------------------------------ */

START_TEST(abort_forgets_everything) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        char err[256];
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        sg_header_t hd[] = {{"ce_specversion", "1.0", 3},
                            {"ce_id", "e1", 2},
                            {"ce_source", "/s", 2},
                            {"ce_type", "t", 1},
                            {"ce_sequence", "1", 1}};
        sg_record_t rec = {.topic = "orders",
                           .key = "A",
                           .key_len = 1,
                           .value = "x",
                           .value_len = 1,
                           .headers = hd,
                           .header_cnt = 5};
        sg_process_result_t r;
        ck_assert_int_eq(
                h.proc.process(h.proc.opaque, &rec, &r, err, sizeof(err)),
                SG_OK);
        const sg_effect_t *ef;
        ck_assert_uint_eq(h.proc.effects(h.proc.opaque, &ef), 1);
        h.proc.batch_abort(h.proc.opaque);
        ck_assert_uint_eq(M(&h)->records_total, 0);
        /* re-read: the same decision, not a duplicate */
        ONE(&h, EV("A", "e1", "t", "1", .value = "x"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_int_eq(h.out[0].kind, SG_EFFECT_OUTPUT);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 0);
        h_free(&h);
}
END_TEST

START_TEST(restart_keeps_state) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_close(&h);
        h.out_cnt = 0;
        h_open(&h, "\"envelope\":{}");
        int64_t off;
        char err[128];
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 0, "g", &off,
                                       err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(off, 2); /* the store reflects offsets 0..1 */
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 2); /* e1 duplicate; 2 and parked 3 */
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "2", NULL);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "3", NULL);
        h_free(&h);
}
END_TEST

START_TEST(foreign_group_refused) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        int64_t off;
        char err[512];
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 0, "other",
                                       &off, err, sizeof(err)),
                         SG_ERR_FOREIGN);
        ck_assert_ptr_nonnull(strstr(err, "\"g\""));
        h_free(&h);
}
END_TEST

START_TEST(dlq_headers_complete) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        char err[256];
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        sg_header_t hd[] = {{"ce_specversion", "1.0", 3},
                            {"ce_id", "e1", 2},
                            {"ce_source", "/s", 2},
                            {"ce_type", "t", 1},
                            {"ce_sequence", "0", 1}};
        sg_record_t rec = {.topic = "orders",
                           .partition = 0,
                           .offset = 42,
                           .timestamp_ms = 77,
                           .key = "A",
                           .key_len = 1,
                           .value = "x",
                           .value_len = 1,
                           .headers = hd,
                           .header_cnt = 5};
        sg_process_result_t r;
        ck_assert_int_eq(
                h.proc.process(h.proc.opaque, &rec, &r, err, sizeof(err)),
                SG_OK);
        const sg_effect_t *ef;
        ck_assert_uint_eq(h.proc.effects(h.proc.opaque, &ef), 1);
        const char *want[][2] = {
                {SG_DLQ_H_REASON, "stale_version"},
                {SG_DLQ_H_TOPIC, "orders"},
                {SG_DLQ_H_PARTITION, "0"},
                {SG_DLQ_H_OFFSET, "42"},
                {SG_DLQ_H_TIMESTAMP, "77"},
                {SG_DLQ_H_GROUP, "g"},
                {SG_DLQ_H_AGGREGATE, "A"},
                {SG_DLQ_H_EXPECTED, "1"},
                {SG_DLQ_H_ACTUAL, "0"},
                {SG_DLQ_H_INSTANCE, h.conf->instance_id},
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                bool found = false;
                for (size_t j = 0; j < ef[0].extra_cnt; j++) {
                        if (strcmp(ef[0].extra[j].name, want[i][0]))
                                continue;
                        found = true;
                        ck_assert_int_eq(ef[0].extra[j].value_len,
                                         strlen(want[i][1]));
                        ck_assert_msg(memcmp(ef[0].extra[j].value, want[i][1],
                                             strlen(want[i][1])) == 0,
                                      "header %s: got %.*s", want[i][0],
                                      (int)ef[0].extra[j].value_len,
                                      (const char *)ef[0].extra[j].value);
                }
                ck_assert_msg(found, "missing header %s", want[i][0]);
        }
        /* input headers are carried unchanged */
        ck_assert_uint_eq(ef[0].header_cnt, 5);
        h.proc.batch_abort(h.proc.opaque);
        h_free(&h);
}
END_TEST

/* ---- snapshot refetch (semantics §4) ----------------------------------- */

static const char *snap_kafka =
        "\"ordering\":{\"gap_timeout_ms\":1000},\"snapshot\":{\"source\":"
        "\"kafka\","
        "\"request_topic\":\"snap.req\",\"reply_topic\":\"snap.rep\","
        "\"timeout_ms\":2000,\"max_attempts\":2,\"backoff_ms\":100,"
        "\"backoff_max_ms\":100}";

/* The request id of the latest request record (Kafka source). */
static void last_request(h_t *h, char *rid, size_t n, int *attempt) {
        for (size_t i = h->out_cnt; i > 0; i--) {
                const out_t *o = &h->out[i - 1];
                if (strcmp(o->topic, "snap.req") != 0)
                        continue;
                const char *p = strstr(o->value, "\"request_id\":\"");
                ck_assert_ptr_nonnull(p);
                p += 14;
                const char *q = strchr(p, '"');
                snprintf(rid, n, "%.*s", (int)(q - p), p);
                const char *a = strstr(o->value, "\"attempt\":");
                *attempt = a ? atoi(a + 10) : -1;
                return;
        }
        ck_abort_msg("no request record");
}

static size_t count_topic(const h_t *h, const char *topic) {
        size_t n = 0;
        for (size_t i = 0; i < h->out_cnt; i++)
                n += strcmp(h->out[i].topic, topic) == 0;
        return n;
}

static void reply(h_t *h, const char *rid, const char *agg, const char *ver,
                  const char *state) {
        char v[1024];
        snprintf(v, sizeof(v),
                 "{\"request_id\":\"%s\",\"aggregate\":\"%s\",\"version\":%s%s%"
                 "s%s,"
                 "\"data\":{\"snap\":true}}",
                 rid, agg, ver, state ? ",\"state\":\"" : "",
                 state ? state : "", state ? "\"" : "");
        feed_raw(h, "snap.rep", agg, v, NULL, 0);
}

START_TEST(snapshot_kafka_resolves_gap) {
        h_t h = {0};
        h_open(&h, snap_kafka);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"),
            EV("A", "e4", "t", "4"), EV("A", "e6", "t", "6"),
            EV("B", "b1", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 2);
        h_clock(&h, T0 + 1000); /* deadline: a request, not the policy */
        ck_assert_uint_eq(batch(&h, NULL, 0), 1);
        ck_assert_str_eq(h.out[2].topic, "snap.req");
        ck_assert_str_eq(h.out[2].key, "A");
        ck_assert_ptr_nonnull(strstr(h.out[2].value, "\"want_version\":2"));
        ck_assert_ptr_nonnull(strstr(h.out[2].value, "\"have_version\":1"));
        ck_assert_ptr_nonnull(
                strstr(h.out[2].value, "\"reply_to\":\"snap.rep\""));
        ck_assert_uint_eq(M(&h)->snapshot_requests_total, 1);
        ck_assert_int_eq(M(&h)->snapshot_in_flight, 1);
        /* no second request while it waits, and no gap_timeout DLQ */
        h_clock(&h, T0 + 1500);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        /* other aggregates keep flowing */
        ONE(&h, EV("B", "b2", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 4);
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        ck_assert_int_eq(attempt, 1);
        reply(&h, rid, "A", "4", NULL);
        /* snapshot record; v3, v4 superseded; v5 missing so v6 stays parked */
        ck_assert_uint_eq(h.out_cnt, 5);
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "A", NULL, NULL);
        ck_assert_str_eq(h.out[4].topic, "out");
        ck_assert_str_eq(h.out[4].extra_name, SG_H_SNAPSHOT);
        ck_assert_str_eq(h.out[4].extra_val, "4");
        ck_assert_str_eq(h.out[4].value, "{\"snap\":true}");
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        ck_assert_uint_eq(M(&h)->snapshot_superseded_total, 2);
        ck_assert_int_eq(M(&h)->parked_events, 1);
        ck_assert_int_eq(M(&h)->snapshot_in_flight, 0);
        ck_assert_int_eq(M(&h)->snapshot_resolve_ms_last, 500);
        /* a superseded event's key is recorded as seen */
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(h.out_cnt, 5);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        /* v5 drains v6 */
        ONE(&h, EV("A", "e5", "t", "5"));
        ck_assert_uint_eq(h.out_cnt, 7);
        assert_out(&h.out[5], SG_EFFECT_OUTPUT, "A", "5", NULL);
        assert_out(&h.out[6], SG_EFFECT_OUTPUT, "A", "6", NULL);
        /* the same reply again: the aggregate no longer waits */
        reply(&h, rid, "A", "4", NULL);
        ck_assert_uint_eq(h.out_cnt, 7);
        ck_assert_uint_eq(M(&h)->snapshot_ignored_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_late_and_unknown_replies) {
        h_t h = {0};
        h_open(&h, snap_kafka);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"),
            EV("A", "e4", "t", "4"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        size_t before = h.out_cnt;
        reply(&h, rid, "A", "1", NULL); /* S < L */
        ck_assert_uint_eq(M(&h)->snapshot_late_total, 1);
        feed_raw(&h, "snap.rep", "A", "{\"request_id\":\"nope\",\"version\":9}",
                 NULL, 0);
        feed_raw(&h, "snap.rep", "A", "not json", NULL, 0);
        ck_assert_uint_eq(M(&h)->snapshot_ignored_total, 2);
        ck_assert_uint_eq(h.out_cnt, before);
        /* S == L is applied: the parked v4 stays, a new deadline starts */
        reply(&h, rid, "A", "2", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        ck_assert_int_eq(M(&h)->parked_events, 1);
        h_free(&h);
}
END_TEST

/* A reply's JSON number version is judged by its text (semantics §2): an
 * integer of at most 2^53, no fraction, no exponent. 9007199254740993 must
 * not be read as 9007199254740992, nor 2.0 or 2e0 as 2. */
START_TEST(snapshot_reply_version_judged_by_text) {
        h_t h = {0};
        h_open(&h, snap_kafka);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e4", "t", "4"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        reply(&h, rid, "A", "9007199254740993", NULL);
        reply(&h, rid, "A", "2.0", NULL);
        reply(&h, rid, "A", "2e0", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 0);
        ck_assert_uint_eq(M(&h)->snapshot_failures_total, 3);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_retries_then_policy_then_release) {
        h_t h = {0};
        h_open(&h, snap_kafka); /* max_attempts 2, timeout 2000, backoff 100 */
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        char rid1[256], rid2[256];
        int attempt;
        last_request(&h, rid1, sizeof(rid1), &attempt);
        h_clock(&h, T0 + 3000); /* attempt 1 times out; backoff <= 150 ms */
        batch(&h, NULL, 0);
        ck_assert_uint_eq(M(&h)->snapshot_timeouts_total, 1);
        ck_assert_uint_eq(count_topic(&h, "snap.req"), 1);
        h_clock(&h, T0 + 3200);
        batch(&h, NULL, 0);
        ck_assert_uint_eq(count_topic(&h, "snap.req"), 2);
        last_request(&h, rid2, sizeof(rid2), &attempt);
        ck_assert_int_eq(attempt, 2);
        ck_assert_str_ne(rid1, rid2);
        h_clock(&h, T0 + 5200); /* attempt 2 times out: gave up → dlq policy */
        batch(&h, NULL, 0);
        ck_assert_uint_eq(M(&h)->snapshot_gave_up_total, 1);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_DLQ, "A", "3",
                   "gap_timeout");
        size_t reqs = count_topic(&h, "snap.req");
        ONE(&h, EV("A", "e4", "t", "4"));
        assert_out(&h.out[h.out_cnt - 2], SG_EFFECT_DLQ, "A", "4",
                   "aggregate_quarantined");
        /* an event of a quarantined aggregate asks its authority again */
        ck_assert_uint_eq(count_topic(&h, "snap.req"), reqs + 1);
        ONE(&h, EV("A", "e4b", "t", "4"));
        ck_assert_uint_eq(count_topic(&h, "snap.req"),
                          reqs + 1); /* one at a time */
        /* a late reply to the FIRST attempt is still judged by version and
         * releases the quarantine */
        reply(&h, rid1, "A", "4", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 0);
        ONE(&h, EV("A", "e5", "t", "5"));
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "5", NULL);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_new_aggregate_and_state) {
        char conf[2048];
        snprintf(conf, sizeof(conf),
                 "\"snapshot\":{\"source\":\"kafka\",\"request_topic\":"
                 "\"snap.req\",\"reply_topic\":\"snap.rep\",\"max_attempts\":3,"
                 "\"backoff_ms\":100,\"backoff_max_ms\":100},%s",
                 sm_json);
        h_t h = {0};
        h_open(&h, conf);
        /* a new aggregate above first_version: request at once */
        ONE(&h, EV("O", "s", "order.shipped", "3"));
        ck_assert_uint_eq(count_topic(&h, "snap.req"), 1);
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        ck_assert_ptr_nonnull(strstr(h.out[0].value, "\"have_version\":null"));
        /* with a state machine a reply without state is a failed attempt */
        reply(&h, rid, "O", "2", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_failures_total, 1);
        h_clock(&h, T0 + 200);
        batch(&h, NULL, 0);
        last_request(&h, rid, sizeof(rid), &attempt);
        ck_assert_int_eq(attempt, 2);
        ck_assert_int_eq(attempt, 2);
        reply(&h, rid, "O", "2", "LOST"); /* not a declared state */
        ck_assert_uint_eq(M(&h)->snapshot_failures_total, 2);
        h_clock(&h, T0 + 400);
        batch(&h, NULL, 0);
        last_request(&h, rid, sizeof(rid), &attempt);
        ck_assert_int_eq(attempt, 3);
        reply(&h, rid, "O", "2", "PAID");
        /* v3 shipped drains from state PAID: legal */
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "O", "3", NULL);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_max_in_flight_and_cancel) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000},\"snapshot\":{"
                   "\"source\":\"kafka\",\"request_topic\":\"snap.req\","
                   "\"reply_topic\":\"snap.rep\",\"max_in_flight\":1,"
                   "\"timeout_ms\":60000,\"backoff_ms\":50}");
        ONE(&h, EV("A", "a1", "t", "1"), EV("A", "a3", "t", "3"),
            EV("B", "b1", "t", "1"), EV("B", "b3", "t", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        ck_assert_uint_eq(count_topic(&h, "snap.req"), 1);
        ck_assert_int_eq(M(&h)->snapshot_in_flight, 1);
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        const char *first = h.out[h.out_cnt - 1].key[0] == 'A' ? "A" : "B";
        const char *second = first[0] == 'A' ? "B" : "A";
        /* the gap closes by itself: the request is cancelled, capacity freed */
        ev_t fill = {.agg = first,
                     .id = first[0] == 'A' ? "a2" : "b2",
                     .type = "t",
                     .seq = "2"};
        batch(&h, &fill, 1);
        /* ... and in the same batch the queued request goes out */
        ck_assert_int_eq(M(&h)->snapshot_in_flight, 1);
        ck_assert_uint_eq(count_topic(&h, "snap.req"), 2);
        ck_assert_str_eq(h.out[h.out_cnt - 1].key, second);
        /* a reply to the cancelled request is ignored */
        reply(&h, rid, first, "9", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_ignored_total, 1);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_http_effects_and_failures) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000},\"snapshot\":{"
                   "\"source\":\"http\",\"url\":\"http://127.0.0.1:1/o/"
                   "{aggregate}\","
                   "\"timeout_ms\":500,\"max_attempts\":3,\"backoff_ms\":10,"
                   "\"backoff_max_ms\":10}");
        ONE(&h, EV("A/1", "e1", "t", "1"), EV("A/1", "e3", "t", "3"));
        h_clock(&h, T0 + 1000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 1);
        ck_assert_int_eq(h.out[1].kind, SG_EFFECT_HTTP_GET);
        ck_assert_str_eq(h.out[1].url, "http://127.0.0.1:1/o/A%2F1");
        char rid[256];
        snprintf(rid, sizeof(rid), "%s", h.out[1].request_id);
        sg_header_t st500[] = {{SG_H_HTTP_STATUS, "500", 3}};
        feed_raw(&h, SG_SNAPSHOT_HTTP_TOPIC, rid, "oops", st500, 1);
        ck_assert_uint_eq(M(&h)->snapshot_failures_total, 1);
        h_clock(&h, T0 + 1100);
        ck_assert_uint_eq(batch(&h, NULL, 0), 1); /* retry */
        snprintf(rid, sizeof(rid), "%s", h.out[2].request_id);
        sg_header_t st200[] = {{SG_H_HTTP_STATUS, "200", 3}};
        feed_raw(&h, SG_SNAPSHOT_HTTP_TOPIC, rid, "{\"version\":\"2\"}", st200,
                 1);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        /* snapshot record (no data: null value), then v3 drains */
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A/1", "3", NULL);
        ck_assert_str_eq(h.out[h.out_cnt - 2].extra_name, SG_H_SNAPSHOT);
        h_free(&h);
}
END_TEST

START_TEST(snapshot_request_survives_restart) {
        h_t h = {0};
        h_open(&h, snap_kafka);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        char rid1[256];
        int attempt;
        last_request(&h, rid1, sizeof(rid1), &attempt);
        h_close(&h);
        h_open(&h, snap_kafka);
        /* after the restart the request is re-issued when it times out */
        h_clock(&h, T0 + 3000);
        batch(&h, NULL, 0);
        h_clock(&h, T0 + 3200);
        batch(&h, NULL, 0);
        char rid2[256];
        last_request(&h, rid2, sizeof(rid2), &attempt);
        ck_assert_int_eq(attempt, 2);
        /* the previous incarnation's reply is still judged by version */
        reply(&h, rid1, "A", "2", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "3", NULL);
        h_free(&h);
}
END_TEST

/* ---- exactly_once: changelog and restore (semantics §6) ---------------- */

typedef tu_clrec_t clrec_t;

static clrec_t changelog[512];
static size_t changelog_cnt;

/* One batch as the exactly_once loop runs it: every effect "delivered" at
 * the next offset of its topic, changelog records kept for a restore. */
static size_t eos_batch(h_t *h, const ev_t *evs, size_t cnt) {
        char err[512];
        static sg_header_t hds[64][6];
        size_t outputs = 0;
        ck_assert_uint_le(cnt, sizeof(hds) / sizeof(hds[0]));
        ck_assert_int_eq(
                h->proc.batch_begin(h->proc.opaque, 0, err, sizeof(err)),
                SG_OK);
        for (size_t i = 0; i < cnt; i++) {
                sg_header_t *hd = hds[i];
                hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
                hd[1] = (sg_header_t){"ce_id", evs[i].id, strlen(evs[i].id)};
                hd[2] = (sg_header_t){"ce_source", "/shop", 5};
                hd[3] = (sg_header_t){"ce_type", evs[i].type,
                                      strlen(evs[i].type)};
                hd[4] = (sg_header_t){"ce_sequence", evs[i].seq,
                                      strlen(evs[i].seq)};
                size_t hc = 5;
                if (evs[i].epoch)
                        hd[hc++] = (sg_header_t){"ce_epoch", evs[i].epoch,
                                                 strlen(evs[i].epoch)};
                sg_record_t rec = {.topic = "orders",
                                   .partition = 0,
                                   .offset = h->offset++,
                                   .key = evs[i].agg,
                                   .key_len = strlen(evs[i].agg),
                                   .value = evs[i].id,
                                   .value_len = strlen(evs[i].id),
                                   .headers = hd,
                                   .header_cnt = hc};
                ck_assert_int_eq(h->proc.process(h->proc.opaque, &rec,
                                                 &h->last_result, err,
                                                 sizeof(err)),
                                 SG_OK);
        }
        ck_assert_int_eq(h->proc.tick(h->proc.opaque, err, sizeof(err)), SG_OK);
        const sg_effect_t *ef;
        size_t n = h->proc.effects(h->proc.opaque, &ef);
        for (size_t i = 0; i < n; i++) {
                if (ef[i].kind == SG_EFFECT_OUTPUT)
                        outputs++;
                if (ef[i].kind != SG_EFFECT_CHANGELOG) {
                        h->proc.delivered(h->proc.opaque, i, 1000 + (int64_t)i);
                        continue;
                }
                ck_assert_str_eq(ef[i].topic, "g-orders-changelog");
                ck_assert_int_eq(ef[i].partition, 0);
                ck_assert_uint_lt(changelog_cnt,
                                  sizeof(changelog) / sizeof(changelog[0]));
                tu_clrec_set(&changelog[changelog_cnt], &ef[i]);
                h->proc.delivered(h->proc.opaque, i, (int64_t)changelog_cnt);
                changelog_cnt++;
        }
        ck_assert_int_eq(h->proc.batch_commit(h->proc.opaque, err, sizeof(err)),
                         SG_OK);
        return outputs;
}

static void restore_all(h_t *h, int64_t log_start, int64_t want_from) {
        char err[512];
        int64_t from = -1;
        ck_assert_int_eq(h->proc.restore_begin(h->proc.opaque, "orders", 0,
                                               log_start,
                                               (int64_t)changelog_cnt, &from,
                                               err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(from, want_from);
        for (int64_t o = from; o < (int64_t)changelog_cnt; o++) {
                const clrec_t *c = &changelog[o];
                ck_assert_int_eq(
                        h->proc.restore_apply(h->proc.opaque, "orders", 0, o,
                                              c->key, c->key_len,
                                              c->tombstone ? NULL : c->value,
                                              c->value_len, err, sizeof(err)),
                        SG_OK);
        }
        ck_assert_int_eq(h->proc.restore_end(h->proc.opaque, "orders", 0,
                                             (int64_t)changelog_cnt, err,
                                             sizeof(err)),
                         SG_OK);
}

/* The restore cases' instance: exactly_once, a 60 s gap deadline, a fresh
 * store (h_open). */
#define eos_open(h) eos_open_at(__FILE__, __LINE__, h)
static void eos_open_at(const char *file, int line, h_t *h) {
        memset(h, 0, sizeof(*h));
        h->root = "\"guarantee\":\"exactly_once\",";
        h_open_at(file, line, h, "\"ordering\":{\"gap_timeout_ms\":60000}");
}

/* Restores @p h's partition 0 from changelog[] (restore_begin from offset
 * 0 to its end) until a record is refused. Returns the refusal (SG_OK:
 * none) with its text in @p err; *lastp: the offset of the last record
 * passed to restore_apply. */
static sg_err_t restore_until_refused(h_t *h, int64_t *lastp, char *err,
                                      size_t err_size) {
        int64_t from = -1;
        ck_assert_int_eq(h->proc.restore_begin(h->proc.opaque, "orders", 0, 0,
                                               (int64_t)changelog_cnt, &from,
                                               err, err_size),
                         SG_OK);
        sg_err_t e = SG_OK;
        int64_t o;
        for (o = from; o < (int64_t)changelog_cnt && !e; o++)
                e = h->proc.restore_apply(
                        h->proc.opaque, "orders", 0, o, changelog[o].key,
                        changelog[o].key_len,
                        changelog[o].tombstone ? NULL : changelog[o].value,
                        changelog[o].value_len, err, err_size);
        *lastp = o - 1;
        return e;
}

/* Both guarantees keep the changelog (semantics §6): _i 0 at_least_once,
 * 1 exactly_once. */
static const char *const cl_roots[2] = {"\"guarantee\":\"at_least_once\",",
                                        "\"guarantee\":\"exactly_once\","};

/* A restore leaves its dedup keys sealed (store.h sg_dedup_seal): no open
 * segment over its size and no frozen one waiting for the batches' sweeps
 * (each lookup probes those without a filter), and the sealed keys answer
 * as before: every event again is a duplicate. */
START_TEST(restore_leaves_dedup_keys_sealed) {
        enum { N = 150, SEG = 40 };
        changelog_cnt = 0;
        h_t a = {0};
        eos_open(&a);
        static char aggs[N][16], ids[N][16];
        ev_t evs[N];
        for (int i = 0; i < N; i++) {
                snprintf(aggs[i], sizeof(aggs[i]), "agg-%d", i);
                snprintf(ids[i], sizeof(ids[i]), "id-%d", i);
                evs[i] = EV(aggs[i], ids[i], "t", "1");
        }
        size_t outputs = 0;
        for (int i = 0; i < N; i += 50) /* batches within eos_batch's 64 */
                outputs += eos_batch(&a, evs + i, N - i < 50 ? N - i : 50);
        ck_assert_uint_eq(outputs, N);
        int64_t offset = a.offset;
        h_free(&a);

        h_t b = {0};
        eos_open(&b);
        sg_store_set_segment_keys(b.store, SEG);
        b.offset = offset;
        restore_all(&b, 0, 0);
        char err[256];
        sg_txn_t *t;
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ck_assert_int_eq(sg_txn_begin(b.store, false, &t, err, sizeof(err)),
                         SG_OK);
        sg_seg_stat_t ss;
        ck_assert_int_eq(sg_dedup_seg_stat(t, &tp, &ss), SG_OK);
        sg_txn_abort(t);
        ck_assert_uint_eq(ss.keys, N);
        ck_assert_int_eq(ss.open, 0);
        ck_assert_int_eq(ss.frozen, 0);
        ck_assert_int_eq(ss.merging, 0);
        ck_assert_int_eq(ss.sealed, 1);
        ck_assert_uint_gt(ss.filter_bytes, 0);
        for (int i = 0; i < N; i += 50)
                ck_assert_uint_eq(
                        eos_batch(&b, evs + i, N - i < 50 ? N - i : 50), 0);
        ck_assert_uint_eq(M(&b)->dedup_hits_total, N);
        h_free(&b);
}
END_TEST

START_TEST(store_follows_partition_through_changelog) {
        changelog_cnt = 0;
        h_t a = {.root = cl_roots[_i]};
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ck_assert_ptr_nonnull(a.proc.restore_begin);
        restore_all(&a, 0, 0); /* empty changelog: nothing to restore */
        ev_t b1[] = {EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"),
                     EV("B", "b1", "t", "1")};
        ck_assert_uint_eq(eos_batch(&a, b1, 3), 2);
        size_t first = changelog_cnt;
        /* dedup ×3, agg ×2, parked ×1, meta ×1: one record per key */
        ck_assert_uint_eq(first, 7);
        ev_t b2[] = {EV("B", "b2", "t", "2")};
        ck_assert_uint_eq(eos_batch(&a, b2, 1), 1);
        ck_assert_uint_gt(changelog_cnt, first);
        h_close(&a);

        /* the partition moves to an instance with an empty store */
        h_t b = {.root = cl_roots[_i]};
        h_open(&b, "\"ordering\":{\"gap_timeout_ms\":60000}");
        b.offset = a.offset;
        restore_all(&b, 0, 0);
        ck_assert_int_eq(M(&b)->parked_events, 0); /* gauges: next commit */
        ev_t b3[] = {EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"),
                     EV("B", "b2", "t", "2")};
        /* e1, b2 are duplicates; e2 applies and the restored parked v3 drains */
        ck_assert_uint_eq(eos_batch(&b, b3, 3), 2);
        ck_assert_uint_eq(M(&b)->dedup_hits_total, 2);
        ck_assert_uint_eq(M(&b)->applied_total, 2);
        ck_assert_int_eq(M(&b)->parked_events, 0);
        /* the parked event's tombstone is in the changelog */
        bool tomb = false;
        for (size_t i = 0; i < changelog_cnt; i++)
                tomb |= changelog[i].tombstone &&
                        changelog[i].key[0] == SG_DB_PARKED;
        ck_assert(tomb);
        h_free(&b);

        /* the first instance comes back: only the delta is read */
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        int64_t cp = 0;
        char err[256];
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0,
                                              (int64_t)changelog_cnt, &cp, err,
                                              sizeof(err)),
                         SG_OK);
        ck_assert_int_gt(cp, 0);
        ck_assert_int_lt(cp, (int64_t)changelog_cnt);
        for (int64_t o = cp; o < (int64_t)changelog_cnt; o++)
                ck_assert_int_eq(
                        a.proc.restore_apply(
                                a.proc.opaque, "orders", 0, o, changelog[o].key,
                                changelog[o].key_len,
                                changelog[o].tombstone ? NULL
                                                       : changelog[o].value,
                                changelog[o].value_len, err, sizeof(err)),
                        SG_OK);
        ck_assert_int_eq(a.proc.restore_end(a.proc.opaque, "orders", 0,
                                            (int64_t)changelog_cnt, err,
                                            sizeof(err)),
                         SG_OK);
        ev_t b4[] = {EV("A", "e3", "t", "3"), EV("A", "e4", "t", "4")};
        ck_assert_uint_eq(eos_batch(&a, b4, 2),
                          1); /* e3 duplicate, v4 applies */
        /* a changelog that no longer holds the checkpoint: full restore */
        h_close(&a);
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        int64_t from;
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0,
                                              (int64_t)changelog_cnt + 5,
                                              (int64_t)changelog_cnt + 5, &from,
                                              err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(from, (int64_t)changelog_cnt + 5);
        h_free(&a);
}
END_TEST

/* A store whose changelog checkpoint lies beyond the changelog's end (the
 * changelog topic was deleted and created again, or lost records): the
 * restore refuses, and keeps the store, rather than dropping every
 * dedup record and aggregate of the partition (semantics §6). */
START_TEST(store_ahead_of_changelog_is_refused) {
        changelog_cnt = 0;
        h_t a = {.root = cl_roots[_i]};
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        restore_all(&a, 0, 0);
        ev_t b1[] = {EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2")};
        ck_assert_uint_eq(eos_batch(&a, b1, 2), 2);
        h_close(&a);

        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        int64_t from = -1;
        char err[512] = "";
        /* the changelog is empty again */
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0, 0,
                                              &from, err, sizeof(err)),
                         SG_ERR_FOREIGN);
        ck_assert_ptr_nonnull(strstr(err, "g-orders-changelog"));
        ck_assert_ptr_nonnull(strstr(err, "ends at offset 0"));
        ck_assert_ptr_nonnull(strstr(err, "data_dir"));
        h_close(&a);
        /* nothing was dropped: with the real changelog, the delta only,
         * and e1 is still a duplicate */
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0,
                                              (int64_t)changelog_cnt, &from,
                                              err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(from, (int64_t)changelog_cnt);
        ck_assert_int_eq(a.proc.restore_end(a.proc.opaque, "orders", 0,
                                            (int64_t)changelog_cnt, err,
                                            sizeof(err)),
                         SG_OK);
        ev_t b2[] = {EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3")};
        ck_assert_uint_eq(eos_batch(&a, b2, 2), 1);
        ck_assert_uint_eq(M(&a)->dedup_hits_total, 1);
        h_free(&a);
}
END_TEST

/* A restore commits its checkpoint each window (engine_changelog.c
 * SG_RESTORE_COMMIT_EVERY, 500,000 records, or earlier when the map's room
 * runs low) with the window's records: an instance that stops mid-restore
 * finds them in its store and resumes at that checkpoint, not at the start
 * (semantics §6 restore). */
START_TEST(restore_resumes_at_its_window_checkpoint) {
        enum { WINDOW = 500000, N = WINDOW + 3 };
        changelog_cnt = 0;
        h_t a = {.root = cl_roots[1]};
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ev_t b1[] = {EV("A", "e1", "t", "1")};
        ck_assert_uint_eq(eos_batch(&a, b1, 1), 1);
        const clrec_t *tpl = NULL;
        for (size_t i = 0; i < changelog_cnt; i++)
                if (changelog[i].key[0] == SG_DB_DEDUP)
                        tpl = &changelog[i];
        ck_assert_ptr_nonnull(tpl);
        ck_assert_uint_eq(tpl->key_len, 1 + SG_KEY_HASH_LEN);
        h_free(&a);

        h_t b = {.root = cl_roots[1]};
        h_open(&b, "\"ordering\":{\"gap_timeout_ms\":60000}");
        char err[512];
        int64_t from = -1;
        /* room for the window up front (a restart from the checkpoint on
         * MAP_FULL, below, would re-apply up to a window each time) */
        for (int g = 0; g < 6; g++)
                ck_assert_int_eq(sg_store_grow(b.store, err, sizeof(err)),
                                 SG_OK);
        ck_assert_int_eq(b.proc.restore_begin(b.proc.opaque, "orders", 0, 0, N,
                                              &from, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(from, 0);
        unsigned char key[33];
        key[0] = SG_DB_DEDUP;
        for (uint32_t i = 0; i < N; i++) {
                sg_sha256(&i, sizeof(i), key + 1);
                sg_err_t e = b.proc.restore_apply(
                        b.proc.opaque, "orders", 0, i, key, sizeof(key),
                        tpl->value, tpl->value_len, err, sizeof(err));
                if (e == SG_ERR_MAP_FULL) {
                        /* as the loop does: grow, and begin again */
                        ck_assert_int_eq(
                                sg_store_grow(b.store, err, sizeof(err)),
                                SG_OK);
                        ck_assert_int_eq(b.proc.restore_begin(
                                                 b.proc.opaque, "orders", 0, 0,
                                                 N, &from, err, sizeof(err)),
                                         SG_OK);
                        i = (uint32_t)from - 1; /* from: a window's end */
                        continue;
                }
                ck_assert_msg(e == SG_OK, "offset %u: %s", i, err);
        }
        h_close(&b); /* stopped before restore_end */

        h_open(&b, "\"ordering\":{\"gap_timeout_ms\":60000}");
        /* the last window's end, committed with its records */
        sg_txn_t *t;
        sg_meta_rec_t m;
        ck_assert_int_eq(sg_txn_begin(b.store, false, &t, err, sizeof(err)),
                         SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ck_assert_int_eq(sg_meta_get(t, &tp, &m), SG_OK);
        sg_txn_abort(t);
        int64_t cp = m.changelog_offset;
        ck_assert_int_gt(cp, 0);
        ck_assert_int_le(cp, WINDOW);
        uint32_t probe[] = {0, (uint32_t)cp - 1, (uint32_t)cp, N - 1};
        for (size_t j = 0; j < 4; j++) {
                void *v = NULL;
                size_t vl = 0;
                sg_sha256(&probe[j], sizeof(probe[j]), key + 1);
                ck_assert_int_eq(b.proc.changelog_value(b.proc.opaque, "orders",
                                                        0, key, sizeof(key), &v,
                                                        &vl, err, sizeof(err)),
                                 SG_OK);
                if (probe[j] < cp) { /* committed with the checkpoint */
                        ck_assert_ptr_nonnull(v);
                        ck_assert_uint_eq(vl, tpl->value_len);
                        ck_assert_int_eq(memcmp(v, tpl->value, vl), 0);
                } else {
                        ck_assert_ptr_null(v);
                }
                free(v);
        }
        ck_assert_int_eq(b.proc.restore_begin(b.proc.opaque, "orders", 0, 0, N,
                                              &from, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(from, cp);
        h_free(&b);
}
END_TEST

/* at_least_once repair support (kafka.h "Changelog fencing"): the store
 * value a changelog key names is what its last changelog record carried
 * (NULL after a tombstone), and the epoch given during a restore is kept
 * with the checkpoint, across a restart. */
START_TEST(changelog_value_and_epoch) {
        changelog_cnt = 0;
        char err[256];
        h_t a = {0};
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        restore_all(&a, 0, 0);
        ev_t b1[] = {EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3")};
        eos_batch(&a, b1, 2);
        ev_t b2[] = {EV("A", "e2", "t", "2")}; /* drains v3: parked → gone */
        eos_batch(&a, b2, 1);
        size_t checked = 0, tombs = 0;
        for (size_t i = 0; i < changelog_cnt; i++) {
                const clrec_t *c = &changelog[i];
                bool last = true; /* the key's last record? */
                for (size_t j = i + 1; j < changelog_cnt; j++)
                        last &= c->key_len != changelog[j].key_len ||
                                memcmp(c->key, changelog[j].key, c->key_len);
                if (!last || c->key[0] == SG_DB_META)
                        continue; /* meta's local checkpoint differs */
                void *v = NULL;
                size_t vl = 0;
                ck_assert_int_eq(a.proc.changelog_value(
                                         a.proc.opaque, "orders", 0, c->key,
                                         c->key_len, &v, &vl, err, sizeof(err)),
                                 SG_OK);
                if (c->tombstone) {
                        ck_assert_ptr_null(v);
                        tombs++;
                } else {
                        ck_assert_ptr_nonnull(v);
                        ck_assert_uint_eq(vl, c->value_len);
                        ck_assert(!memcmp(v, c->value, vl));
                }
                free(v);
                checked++;
        }
        ck_assert_uint_ge(checked, 4); /* 3 dedup, 1 agg */
        ck_assert_uint_ge(tombs, 1);   /* the drained parked v3 */
        /* the epoch: none yet, then kept with restore_end's checkpoint */
        int64_t cp;
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0,
                                              (int64_t)changelog_cnt, &cp, err,
                                              sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(a.proc.changelog_epoch_get(a.proc.opaque, "orders", 0),
                         -1);
        a.proc.changelog_epoch_set(a.proc.opaque, "orders", 0, 4242);
        ck_assert_int_eq(a.proc.restore_end(a.proc.opaque, "orders", 0,
                                            (int64_t)changelog_cnt, err,
                                            sizeof(err)),
                         SG_OK);
        h_close(&a);
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0,
                                              (int64_t)changelog_cnt, &cp, err,
                                              sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(cp, (int64_t)changelog_cnt); /* the delta: none */
        ck_assert_int_eq(a.proc.changelog_epoch_get(a.proc.opaque, "orders", 0),
                         4242);
        ck_assert_int_eq(a.proc.restore_end(a.proc.opaque, "orders", 0,
                                            (int64_t)changelog_cnt, err,
                                            sizeof(err)),
                         SG_OK);
        /* a batch keeps it too */
        ev_t b3[] = {EV("A", "e4", "t", "4")};
        eos_batch(&a, b3, 1);
        h_close(&a);
        h_open(&a, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ck_assert_int_eq(a.proc.restore_begin(a.proc.opaque, "orders", 0, 0,
                                              (int64_t)changelog_cnt, &cp, err,
                                              sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(a.proc.changelog_epoch_get(a.proc.opaque, "orders", 0),
                         4242);
        ck_assert_int_eq(a.proc.restore_end(a.proc.opaque, "orders", 0, cp, err,
                                            sizeof(err)),
                         SG_OK);
        h_free(&a);
}
END_TEST

/* A step that blocks (a write transaction left open: LMDB's next
 * mdb_txn_begin waits forever) fails the test instead of hanging it. */
static void on_alarm(int sig) {
        (void)sig;
        ck_abort_msg("blocked: an LMDB write transaction was left open");
}

static void watchdog(unsigned seconds) {
        signal(SIGALRM, on_alarm);
        alarm(seconds);
}

START_TEST(restore_empty_key_closes_txn) {
        changelog_cnt = 0;
        h_t h;
        eos_open(&h);
        char err[512] = "";
        int64_t from = -1;
        ck_assert_int_eq(h.proc.restore_begin(h.proc.opaque, "orders", 0, 0, 1,
                                              &from, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(h.proc.restore_apply(h.proc.opaque, "orders", 0, 0, "",
                                              0, "v", 1, err, sizeof(err)),
                         SG_ERR_CORRUPT);
        ck_assert_ptr_nonnull(strstr(err, "g-orders-changelog [0] offset 0"));
        /* the restore's transaction is gone: a batch can begin */
        watchdog(3);
        ev_t b[] = {EV("A", "e1", "t", "1")};
        ck_assert_uint_eq(eos_batch(&h, b, 1), 1);
        alarm(0);
        h_free(&h);
}
END_TEST

/* A restored parked event at or below its aggregate's L is void (semantics
 * §6): its writer resolved it, and only its record outlived it (a record
 * under a key of store format 2, whose tombstone went to the new key).
 * Here the changelog's last aggregate record says L = 4 with nothing
 * parked beside the record of v3 parked under L = 1: the restore drops it,
 * and v5 applies next. */
START_TEST(restore_voids_parked_events_at_or_below_l) {
        changelog_cnt = 0;
        h_t a;
        eos_open(&a);
        ev_t b1[] = {EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3")};
        ck_assert_uint_eq(eos_batch(&a, b1, 2), 1);
        h_free(&a);
        clrec_t *agg = NULL;
        bool parked = false;
        for (size_t i = 0; i < changelog_cnt; i++) {
                if (changelog[i].key[0] == SG_DB_AGG)
                        agg = &changelog[i];
                parked |= changelog[i].key[0] == SG_DB_PARKED &&
                          !changelog[i].tombstone;
        }
        ck_assert(agg && parked);
        clrec_t *c = &changelog[changelog_cnt++];
        *c = *agg;
        sg_agg_rec_t r;
        char why[128];
        ck_assert_int_eq(
                sg_agg_decode(c->value, c->value_len, &r, why, sizeof(why)),
                SG_OK);
        ck_assert_uint_eq(r.parked_cnt, 1);
        r.last_version = 4;
        r.parked_cnt = 0;
        r.parked_bytes = 0;
        r.parked_since_ms = 0;
        unsigned char v[SG_AGG_VALUE_MAX];
        c->value_len = sg_agg_encode(&r, v);
        memcpy(c->value, v, c->value_len);

        h_t b;
        eos_open(&b);
        restore_all(&b, 0, 0);
        unsigned char ah[32];
        sg_sha256("A", 1, ah);
        sg_txn_t *t;
        char err[256];
        ck_assert_int_eq(sg_txn_begin(b.store, false, &t, err, sizeof(err)),
                         SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_parked_rec_t pr;
        ck_assert_int_eq(sg_parked_get(t, &tp, ah, 3, &pr), SG_ERR_NOT_FOUND);
        sg_txn_abort(t);
        /* v5 is the next version: applied (one output), not parked */
        ev_t b2[] = {EV("A", "e5", "t", "5")};
        ck_assert_uint_eq(eos_batch(&b, b2, 1), 1);
        h_free(&b);
}
END_TEST

/* A changelog record that does not decode (here a parked event whose header
 * block claims 2^32-1 headers) stops the partition's restore right there,
 * with an error naming the changelog, partition and offset; it is never
 * restored to fail every later batch that drains it. */
START_TEST(restore_refuses_corrupt_parked_record) {
        changelog_cnt = 0;
        h_t a;
        eos_open(&a);
        ev_t b1[] = {EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3")};
        ck_assert_uint_eq(eos_batch(&a, b1, 2), 1);
        h_free(&a);
        int64_t bad = -1;
        for (size_t i = 0; i < changelog_cnt; i++)
                if (changelog[i].key[0] == SG_DB_PARKED)
                        bad = (int64_t)i;
        ck_assert_int_ge(bad, 0);
        /* parked value: tag | 3 × i64 | key hash | type | key | value |
         * headers, each a u32 length and its bytes; find the header block */
        clrec_t *c = &changelog[bad];
        ck_assert_int_eq(c->value[0], 0x03);
        size_t off = 1 + 24 + SG_KEY_HASH_LEN;
        for (int f = 0; f < 3; f++) {
                uint32_t l = ((uint32_t)c->value[off] << 24) |
                             ((uint32_t)c->value[off + 1] << 16) |
                             ((uint32_t)c->value[off + 2] << 8) |
                             c->value[off + 3];
                off += 4 + (l == UINT32_MAX ? 0 : l);
        }
        memset(c->value + off + 4, 0xff, 4);

        h_t b;
        eos_open(&b);
        char err[512] = "";
        int64_t last;
        sg_err_t e = restore_until_refused(&b, &last, err, sizeof(err));
        ck_assert_msg(e == SG_ERR_CORRUPT, "restored (%s)", sg_err2str(e));
        ck_assert_int_eq(last, bad);
        char want[64];
        snprintf(want, sizeof(want), "g-orders-changelog [0] offset %" PRId64,
                 bad);
        ck_assert_msg(strstr(err, want) != NULL, "error: %s", err);
        ck_assert_ptr_nonnull(strstr(err, "header"));
        ck_assert_uint_eq(sg_store_txns_open(b.store, false), 0);
        h_free(&b);
}
END_TEST

/* A restored meta record carries the partition's processing clock, which
 * the engine's clock never goes below: one far in the future (here near
 * INT64_MAX) would make every deadline and TTL computed from it overflow.
 * It does not decode: times end with the year 9999. */
START_TEST(restore_refuses_clock_past_year_9999) {
        changelog_cnt = 0;
        h_t a;
        eos_open(&a);
        ev_t b1[] = {EV("A", "e1", "t", "1")};
        ck_assert_uint_eq(eos_batch(&a, b1, 1), 1);
        h_free(&a);
        int64_t bad = -1;
        for (size_t i = 0; i < changelog_cnt; i++)
                if (changelog[i].key[0] == SG_DB_META &&
                    !changelog[i].tombstone)
                        bad = (int64_t)i;
        ck_assert_int_ge(bad, 0);
        /* meta value: group length, 255 group bytes, input offset,
         * changelog offset, clock (big-endian i64 at byte 272) */
        unsigned char *clock = changelog[bad].value + 256 + 16;
        clock[0] = 0x7f;
        memset(clock + 1, 0xff, 6);
        clock[7] = 0x00;

        h_t b;
        eos_open(&b);
        char err[512] = "";
        int64_t last;
        sg_err_t e = restore_until_refused(&b, &last, err, sizeof(err));
        ck_assert_msg(e == SG_ERR_CORRUPT, "restored (%s)", sg_err2str(e));
        ck_assert_int_eq(last, bad);
        ck_assert_msg(strstr(err, "clock") != NULL, "error: %s", err);
        h_free(&b);
}
END_TEST

/* One record of @p ev on "orders" [0] into the open batch: process()'s
 * result. */
static sg_err_t process_one(h_t *h, const ev_t *ev, char *err, size_t n) {
        sg_header_t hd[] = {{"ce_specversion", "1.0", 3},
                            {"ce_id", ev->id, strlen(ev->id)},
                            {"ce_source", "/shop", 5},
                            {"ce_type", ev->type, strlen(ev->type)},
                            {"ce_sequence", ev->seq, strlen(ev->seq)}};
        sg_record_t rec = {.topic = "orders",
                           .offset = h->offset++,
                           .key = ev->agg,
                           .key_len = strlen(ev->agg),
                           .value = ev->id,
                           .value_len = strlen(ev->id),
                           .headers = hd,
                           .header_cnt = 5};
        return h->proc.process(h->proc.opaque, &rec, &h->last_result, err, n);
}

/* The map's room might not take a batch's dirty aggregates at the
 * checkpoint's commit (sg_txn_settle: 600 new aggregates at four pages
 * each past half of the harness's 16 MiB map), so they are written back
 * at the batch's tick, and the map fills there (store_aggc.c): the batch
 * fails before its output and changelog records are produced, so the
 * loop aborts it, grows the map and runs it again (semantics §8 "The
 * aggregate cache") — not at the checkpoint's commit after Kafka took the
 * batch, which leaves the store behind its changelog. */
#define LOW_ROOM_AGGS 600

static int count_agg(void *opaque, const unsigned char agg_hash[32],
                     const sg_agg_rec_t *rec) {
        (void)agg_hash;
        (void)rec;
        ++*(size_t *)opaque;
        return 0;
}
START_TEST(agg_cache_low_room_fails_the_batch) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":60000}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("B", "f1", "t", "1"));
        char err[512] = "";
        static char names[LOW_ROOM_AGGS][2][16];
        ev_t evs[LOW_ROOM_AGGS + 2] = {EV("A", "e2", "t", "2"),
                                       EV("B", "f2", "t", "2")};
        for (size_t i = 0; i < LOW_ROOM_AGGS; i++) {
                snprintf(names[i][0], 16, "n%zu", i);
                snprintf(names[i][1], 16, "n%zu-1", i);
                evs[2 + i] = EV(names[i][0], names[i][1], "t", "1");
        }
        size_t n = LOW_ROOM_AGGS + 2;
        sg_store_fault_inject(h.store, SG_STORE_OP_AGG_WRITEBACK, 1,
                              MDB_MAP_FULL);
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(process_one(&h, &evs[i], err, sizeof(err)),
                                 SG_OK);
        sg_err_t e = h.proc.tick(h.proc.opaque, err, sizeof(err));
        bool fired = false;
        (void)sg_store_fault_count(h.store, &fired);
        ck_assert_msg(fired, "no aggregate written back at the tick");
        ck_assert_msg(e == SG_ERR_MAP_FULL, "tick: %s (%s), not map_full",
                      sg_err2str(e), err);
        ck_assert_str_ne(err, "");
        /* as the loop does: abort, grow, the same records again (in
         * the harness's batches) */
        h.proc.batch_abort(h.proc.opaque);
        ck_assert_uint_eq(sg_store_txns_open(h.store, true), 0);
        sg_store_fault_inject(h.store, 0, 0, 0);
        ck_assert_int_eq(h.proc.grow(h.proc.opaque, err, sizeof(err)), SG_OK);
        size_t outs = 0;
        for (size_t i = 0; i < n; i += 64) {
                h.out_cnt = 0; /* (h.out holds 256) */
                batch(&h, evs + i, n - i < 64 ? n - i : 64);
                if (i == 0) {
                        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "2", NULL);
                        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "B", "2", NULL);
                }
                outs += h.out_cnt;
        }
        ck_assert_uint_eq(outs, n);
        /* committed: v3 follows at once, v2 again is a duplicate */
        h.out_cnt = 0;
        ONE(&h, EV("A", "e3", "t", "3"), EV("B", "f2", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 1);
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "3", NULL);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        h_free(&h);
}
END_TEST

/* With room in the map, a batch's dirty aggregates stay in the cache
 * until the checkpoint's commit writes them back once (sg_txn_settle): the
 * batch's tick and commit write nothing back. If that write-back fails
 * (the map full after all), the checkpoint fails and takes its batches
 * from the store: the partition is behind its changelog (processor.h
 * behind), to be restored before its next record, and nothing of the
 * failed transaction stays readable (semantics §6 "Checkpoints"). */
START_TEST(agg_cache_written_back_at_the_checkpoint) {
        h_t h = {0};
        h.batch_held = true;
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":60000}");
        char err[512] = "";
        sg_store_fault_inject(h.store, SG_STORE_OP_AGG_WRITEBACK, 1,
                              MDB_MAP_FULL);
        ONE(&h, EV("A", "e1", "t", "1"), EV("B", "f1", "t", "1"));
        ONE(&h, EV("A", "e2", "t", "2"));
        bool fired = false;
        (void)sg_store_fault_count(h.store, &fired);
        ck_assert_msg(!fired, "written back before the checkpoint");
        ck_assert(!h.proc.behind(h.proc.opaque, "orders", 0));
        sg_err_t e = h.proc.checkpoint(h.proc.opaque, err, sizeof(err));
        (void)sg_store_fault_count(h.store, &fired);
        ck_assert_msg(fired, "nothing written back at the checkpoint");
        ck_assert_msg(e == SG_ERR_MAP_FULL, "checkpoint: %s (%s)",
                      sg_err2str(e), err);
        ck_assert_uint_eq(sg_store_txns_open(h.store, true), 0);
        ck_assert(h.proc.behind(h.proc.opaque, "orders", 0));
        sg_store_fault_inject(h.store, 0, 0, 0);
        /* the lost transaction's aggregates are not in the store */
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(h.store, false, &t, err, sizeof(err)),
                         SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        size_t aggs = 0;
        ck_assert_int_eq(sg_agg_foreach(t, &tp, count_agg, &aggs), SG_OK);
        ck_assert_uint_eq(aggs, 0);
        sg_txn_abort(t);
        h_free(&h);
}
END_TEST

/* The meta write of a new partition's assignment fails (map full): the
 * assignment's transaction is gone, so the map can grow and the
 * assignment succeed the second time, as the Kafka loop retries it. */
START_TEST(assign_meta_write_fails_closes_txn) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":60000}");
        char err[512] = "";
        int64_t off;
        sg_store_fault_inject(h.store, SG_STORE_OP_PUT, 1, MDB_MAP_FULL);
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 1, "g", &off,
                                       err, sizeof(err)),
                         SG_ERR_MAP_FULL);
        ck_assert_str_ne(err, "");
        ck_assert_uint_eq(sg_store_txns_open(h.store, false), 0);
        sg_store_fault_inject(h.store, 0, 0, 0);
        ck_assert_int_eq(h.proc.grow(h.proc.opaque, err, sizeof(err)), SG_OK);
        watchdog(3);
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 1, "g", &off,
                                       err, sizeof(err)),
                         SG_OK);
        alarm(0);
        ck_assert_int_eq(off, -1);
        h_free(&h);
}
END_TEST

/* A record of a partition the loop never assigned (here inside a batch,
 * whose write transaction is open) is refused with a reason: the engine
 * neither adopts the partition behind the loop's back (no restore) nor
 * begins a second write transaction, which would wait for the batch's own
 * forever. */
static void unassigned_partition_refused(const char *root) {
        h_t h = {.root = root};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":60000}");
        char err[512] = "";
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        sg_header_t hd[] = {{"ce_specversion", "1.0", 3},
                            {"ce_id", "e1", 2},
                            {"ce_source", "/shop", 5},
                            {"ce_type", "t", 1},
                            {"ce_sequence", "1", 1}};
        sg_record_t rec = {.topic = "orders",
                           .partition = 7,
                           .offset = 0,
                           .key = "A",
                           .key_len = 1,
                           .value = "e1",
                           .value_len = 2,
                           .headers = hd,
                           .header_cnt = 5};
        sg_process_result_t r;
        watchdog(3);
        ck_assert_int_eq(
                h.proc.process(h.proc.opaque, &rec, &r, err, sizeof(err)),
                SG_ERR_INVALID);
        alarm(0);
        ck_assert_msg(strstr(err, "orders [7]") && strstr(err, "not assigned"),
                      "error: %s", err);
        ck_assert_uint_eq(sg_store_txns_open(h.store, true), 1);
        h.proc.batch_abort(h.proc.opaque);
        h_free(&h);
}

START_TEST(record_of_unassigned_partition_refused) {
        unassigned_partition_refused(NULL);
        unassigned_partition_refused("\"guarantee\":\"exactly_once\",");
}
END_TEST

START_TEST(operator_release_of_quarantine) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0); /* v3 → DLQ gap_timeout, A quarantined */
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        sg_header_t rel[] = {{SG_H_CONTROL, "release", 7}};
        /* ignored: unknown aggregate, bad command, version below L */
        feed_raw(&h, "orders", "Z", "{\"aggregate\":\"Z\"}", rel, 1);
        sg_header_t bad[] = {{SG_H_CONTROL, "explode", 7}};
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\"}", bad, 1);
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\",\"version\":0}", rel,
                 1);
        ck_assert_uint_eq(M(&h)->control_ignored_total, 3);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        size_t before = h.out_cnt;
        /* the operator knows the authority is at v3 */
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\",\"version\":\"3\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->releases_total, 1);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 0);
        ck_assert_uint_eq(h.out_cnt, before); /* not an event: no output */
        ck_assert_uint_eq(M(&h)->records_total, 2);
        ONE(&h, EV("A", "e4", "t", "4"));
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "4", NULL);
        h_free(&h);
}
END_TEST

/* ---- faults found from outside (fuzzer, black-box, fresh user) --------- */

static int count_parked_cb(void *opaque, uint64_t version,
                           const sg_parked_rec_t *rec) {
        (void)version;
        (void)rec;
        (*(int *)opaque)++;
        return 0;
}

/* Parked events of aggregate @p agg as the store holds them. */
static int store_parked(h_t *h, const char *agg) {
        unsigned char ah[32];
        sg_sha256(agg, strlen(agg), ah);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *txn;
        char err[256];
        ck_assert_int_eq(sg_txn_begin(h->store, false, &txn, err, sizeof(err)),
                         SG_OK);
        int n = 0;
        ck_assert_int_eq(sg_parked_foreach(txn, &tp, ah, count_parked_cb, &n),
                         SG_OK);
        sg_txn_abort(txn);
        return n;
}

/* semantics §6, durability of the store: the changelog is the durable copy
 * in both guarantees (at_least_once's markers are acknowledged before its
 * LMDB commit), so both defer the store's syncs to it. */
START_TEST(store_durability_defers_in_both_guarantees) {
        const char *roots[] = {"\"guarantee\":\"exactly_once\",",
                               "\"guarantee\":\"at_least_once\","};
        for (int i = 0; i < 2; i++) {
                h_t h = {0};
                h.root = roots[i];
                h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000}");
                char err[256];
                ck_assert_int_eq(sg_engine_store_durability(h.conf, h.store,
                                                            err, sizeof(err)),
                                 SG_OK);
                ck_assert_msg(sg_store_deferred(h.store), "%s: deferred %d",
                              roots[i], sg_store_deferred(h.store));
                h_free(&h);
        }
}
END_TEST

/* A stored value that does not decode (a store error) reaches the loop
 * with its reason: the store's last-error detail, not an empty errstr
 * that leaves the operator a fatal line without a cause. */
START_TEST(store_error_reports_its_detail) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":100000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_int_eq(store_parked(&h, "A"), 1);
        /* the parked v3 gets a header block that does not decode */
        unsigned char ah[32];
        sg_sha256("A", 1, ah);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *txn;
        char err[512];
        ck_assert_int_eq(sg_txn_begin(h.store, true, &txn, err, sizeof(err)),
                         SG_OK);
        sg_parked_rec_t pr = {.parked_at_ms = 1,
                              .key = "A",
                              .key_len = 1,
                              .value = "v",
                              .value_len = 1,
                              .headers = "\xff\xff\xff\xff",
                              .headers_len = 4};
        ck_assert_int_eq(sg_parked_put(txn, &tp, ah, 3, &pr, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_txn_commit(txn, err, sizeof(err)), SG_OK);
        /* v2 applies and drains v3, which cannot be read */
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        sg_header_t hd[5] = {{"ce_specversion", "1.0", 3},
                             {"ce_id", "e2", 2},
                             {"ce_source", "/shop", 5},
                             {"ce_type", "t", 1},
                             {"ce_sequence", "2", 1}};
        sg_record_t rec = {.topic = "orders",
                           .partition = 0,
                           .offset = h.offset++,
                           .timestamp_ms = 1000,
                           .key = "A",
                           .key_len = 1,
                           .value = "e2",
                           .value_len = 2,
                           .headers = hd,
                           .header_cnt = 5};
        sg_process_result_t r;
        err[0] = '\0';
        sg_err_t rc = h.proc.process(h.proc.opaque, &rec, &r, err, sizeof(err));
        ck_assert_int_eq(rc, SG_ERR_STORE);
        ck_assert_msg(strstr(err, "header block") != NULL,
                      "errstr \"%s\" does not say why", err);
        h.proc.batch_abort(h.proc.opaque);
        h_close(&h);
}
END_TEST

/* Row 8b: a second, different event for a version already parked is
 * judged (DLQ version_conflict naming the holder), never overwrites it. */
START_TEST(row8b_version_conflict_never_overwrites) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"}");
        /* in one batch */
        ONE(&h, EV("A", "e3", "t", "2"), EV("A", "e5", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 1);
        assert_out(&h.out[0], SG_EFFECT_DLQ, "A", "2", "version_conflict");
        ck_assert_ptr_nonnull(strstr(h.out[0].detail, "offset 0"));
        ck_assert_int_eq(M(&h)->parked_events, 1);
        ck_assert_int_eq(store_parked(&h, "A"), 1);
        /* across batches, and a redelivered copy of the loser stays a
         * plain duplicate */
        ONE(&h, EV("A", "e6", "t", "2"));
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "2", "version_conflict");
        ONE(&h, EV("A", "e5", "t", "2"));
        ck_assert_uint_eq(h.out_cnt, 2);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_VERSION_CONFLICT], 2);
        /* the holder drains; every gauge equals the store */
        ONE(&h, EV("A", "e1", "t", "1"));
        ck_assert_uint_eq(h.out_cnt, 4);
        assert_out(&h.out[2], SG_EFFECT_OUTPUT, "A", "1", NULL);
        assert_out(&h.out[3], SG_EFFECT_OUTPUT, "A", "2", NULL);
        ck_assert_str_eq(h.out[3].value, "e3");
        ck_assert_int_eq(M(&h)->parked_events, 0);
        ck_assert_int_eq(M(&h)->parked_bytes, 0);
        ck_assert_int_eq(store_parked(&h, "A"), 0);
        h_free(&h);
}
END_TEST

/* The output versions of aggregate @p agg, in order, as "1 5 3". */
static void out_versions(const h_t *h, const char *agg, char *buf, size_t n) {
        buf[0] = '\0';
        for (size_t i = 0; i < h->out_cnt; i++) {
                if (h->out[i].kind != SG_EFFECT_OUTPUT ||
                    strcmp(h->out[i].key, agg) != 0)
                        continue;
                size_t l = strlen(buf);
                snprintf(buf + l, n - l, "%s%s", l ? " " : "",
                         h->out[i].version);
        }
}

/* L never decreases (semantics §3): a release below the parked versions,
 * then gap_policy skip, must not apply a version twice. */
START_TEST(release_and_skip_never_lower_last_version) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":"
                   "\"skip\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"),
            EV("A", "e5", "t", "5"));
        sg_header_t rel[] = {{SG_H_CONTROL, "release", 7}};
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\",\"version\":\"4\"}",
                 rel, 1);
        h_clock(&h, T0 + 5000);
        batch(&h, NULL, 0);
        ONE(&h, EV("A", "f4", "t", "4"), EV("A", "f5", "t", "5"));
        char v[128];
        out_versions(&h, "A", v, sizeof(v));
        /* the release to 4 supersedes v3 and drains v5 */
        ck_assert_str_eq(v, "1 5");
        ck_assert_uint_eq(M(&h)->snapshot_superseded_total, 1);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        ck_assert_int_eq(store_parked(&h, "A"), 0);
        h_free(&h);
}
END_TEST

/* A release with a version below L is refused and changes nothing; a
 * release of an aggregate that neither waits nor is quarantined too. */
START_TEST(release_refuses_lower_version_and_idle_aggregate) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":"
                   "\"skip\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "2"),
            EV("A", "e5", "t", "5"));
        sg_header_t rel[] = {{SG_H_CONTROL, "release", 7}};
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\",\"version\":\"1\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->control_ignored_total, 1);
        ONE(&h, EV("B", "b1", "t", "1"));
        feed_raw(&h, "orders", "B", "{\"aggregate\":\"B\",\"version\":\"7\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->control_ignored_total, 2);
        ck_assert_uint_eq(M(&h)->releases_total, 0);
        ONE(&h, EV("A", "e3", "t", "3"), EV("B", "b2", "t", "2"));
        char v[128];
        out_versions(&h, "A", v, sizeof(v));
        ck_assert_str_eq(v, "1 2 3");
        out_versions(&h, "B", v, sizeof(v));
        ck_assert_str_eq(v, "1 2");
        h_free(&h);
}
END_TEST

/* A release's state must be a state of the topic's machine. */
START_TEST(release_refuses_unknown_state) {
        char tj[2048];
        snprintf(
                tj, sizeof(tj),
                "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"},"
                "%s",
                sm_json);
        h_t h = {0};
        h_open(&h, tj);
        logged[0] = '\0';
        sg_engine_set_log(h.eng, log_collect, NULL);
        ONE(&h, EV("A", "e1", "order.created", "1"),
            EV("A", "e3", "order.shipped", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0); /* quarantined */
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        sg_header_t rel[] = {{SG_H_CONTROL, "release", 7}};
        feed_raw(&h, "orders", "A",
                 "{\"aggregate\":\"A\",\"version\":\"2\",\"state\":\"BOGUS\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->control_ignored_total, 1);
        ck_assert_uint_eq(M(&h)->releases_total, 0);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 1);
        ck_assert_ptr_nonnull(strstr(logged, "control_refused{"));
        ck_assert_ptr_nonnull(strstr(logged, "BOGUS"));
        feed_raw(&h, "orders", "A",
                 "{\"aggregate\":\"A\",\"version\":\"2\",\"state\":\"PAID\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->releases_total, 1);
        ONE(&h, EV("A", "e3b", "order.shipped", "3"));
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "3", NULL);
        h_free(&h);
}
END_TEST

/* L = 2^64-1 has no successor (semantics §2): nothing applies after it. */
START_TEST(version_wrap_at_u64_max) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\","
               "\"new_aggregate\":\"trust_first_seen\"}");
        ONE(&h, EV("A", "e1", "t", "18446744073709551615"));
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "18446744073709551615",
                   NULL);
        ONE(&h, EV("A", "e2", "t", "0"), EV("A", "e3", "t", "5"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "0", "stale_version");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "5", "stale_version");
        ck_assert_int_eq(M(&h)->parked_events, 0);
        h_clock(&h, T0 + 10000);
        batch(&h, NULL, 0);
        ck_assert_int_eq(M(&h)->quarantined_aggregates, 0);
        ck_assert_uint_eq(M(&h)->gap_timeouts_total, 0);
        /* one below the top: the top applies, then nothing */
        ONE(&h, EV("B", "b1", "t", "18446744073709551614"),
            EV("B", "b2", "t", "18446744073709551615"),
            EV("B", "b3", "t", "0"));
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "B", "18446744073709551615",
                   NULL);
        assert_out(&h.out[5], SG_EFFECT_DLQ, "B", "0", "stale_version");
        h_free(&h);
}
END_TEST

/* Every operator log line's fields are one valid JSON object (sg_log_cb:
 * the same shape as the Kafka loop's), whatever the sizes of its strings
 * (a 1,004-byte key with quotes and backslashes). */
static int json_lines_checked;
static void log_check_json(void *opaque, sg_log_level_t level,
                           const char *event, const char *fields) {
        (void)opaque;
        (void)level;
        ck_assert_ptr_nonnull(fields);
        cJSON *j = cJSON_Parse(fields);
        ck_assert_msg(cJSON_IsObject(j), "%s: not a JSON object: %.200s", event,
                      fields);
        if (!strcmp(event, "dlq_summary")) { /* per topic: no aggregate */
                cJSON_Delete(j);
                return;
        }
        const cJSON *agg = cJSON_GetObjectItemCaseSensitive(j, "aggregate");
        ck_assert(cJSON_IsString(agg));
        ck_assert_uint_eq(strlen(agg->valuestring), 1004);
        cJSON_Delete(j);
        json_lines_checked++;
}

START_TEST(log_lines_are_json_whatever_the_key) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"}");
        json_lines_checked = 0;
        sg_engine_set_log(h.eng, log_check_json, NULL);
        static char key[1005];
        for (size_t i = 0; i < 1004; i++)
                key[i] = "ab\"\\c"[i % 5];
        key[1004] = '\0';
        ONE(&h, EV(key, "e1", "t", "1"), EV(key, "e3", "t", "3"));
        h_clock(&h, T0 + 1000);
        batch(&h, NULL, 0);
        /* gap_timeout and aggregate_quarantined */
        ck_assert_int_eq(json_lines_checked, 2);
        h_free(&h);
}
END_TEST

/* docs/operating.md "Logs": one "dlq_summary" line per input topic at most
 * once per stats_interval_ms (10 s by default), with the DLQ records by
 * reason since the last one; none while nothing was dead-lettered. */
typedef struct dlq_lines {
        int n;
        char last[512];
} dlq_lines_t;
static void log_dlq_summary(void *opaque, sg_log_level_t level,
                            const char *event, const char *fields) {
        dlq_lines_t *c = opaque;
        if (strcmp(event, "dlq_summary") != 0)
                return;
        ck_assert_int_eq(level, SG_LOG_INFO);
        c->n++;
        snprintf(c->last, sizeof(c->last), "%s", fields);
}

START_TEST(dlq_summary_once_per_interval) {
        h_t h = {0};
        dlq_lines_t c = {0};
        h_open(&h, "\"ordering\":{\"stale\":\"dlq\"}");
        sg_engine_set_log(h.eng, log_dlq_summary, &c);
        ONE(&h, EV("A", "a1", "t", "1"), EV("A", "a2", "t", "2"),
            EV("A", "a3", "t", "1")); /* stale */
        ck_assert_int_eq(c.n, 1);
        ck_assert_str_eq(c.last,
                         "{\"topic\":\"orders\",\"dlq_topic\":\"dlq\","
                         "\"records\":1,\"reasons\":{\"stale_version\":1},"
                         "\"since_ms\":0}");
        /* within the interval: counted, not logged */
        h_clock(&h, T0 + 5000);
        ONE(&h, EV("A", "a4", "t", "2"), EV("A", "a5", "t", "1"));
        ck_assert_int_eq(c.n, 1);
        /* the interval passed: the records since the last line */
        h_clock(&h, T0 + 10000);
        batch(&h, NULL, 0);
        ck_assert_int_eq(c.n, 2);
        ck_assert_str_eq(c.last,
                         "{\"topic\":\"orders\",\"dlq_topic\":\"dlq\","
                         "\"records\":2,\"reasons\":{\"stale_version\":2},"
                         "\"since_ms\":10000}");
        /* nothing new: no line */
        h_clock(&h, T0 + 30000);
        batch(&h, NULL, 0);
        ck_assert_int_eq(c.n, 2);
        /* the one topic's metrics are the engine's */
        const char *topic = NULL;
        const sg_metrics_t *m = sg_engine_topic_metrics(h.eng, 0, &topic);
        ck_assert_str_eq(topic, "orders");
        ck_assert_uint_eq(m->dlq_total[SG_R_STALE_VERSION], 3);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_STALE_VERSION], 3);
        ck_assert_uint_eq(m->records_total, M(&h)->records_total);
        ck_assert_ptr_null(sg_engine_topic_metrics(h.eng, 1, NULL));
        h_free(&h);
}
END_TEST

/* The lines of one log event kept by log_keep(). */
typedef struct kept_log {
        const char *event; /* the event to keep */
        int count;
        char last[512]; /* its last fields */
        sg_log_level_t level;
} kept_log_t;

static void log_keep(void *opaque, sg_log_level_t level, const char *event,
                     const char *fields_json) {
        kept_log_t *k = opaque;
        for (; k->event; k++) {
                if (strcmp(k->event, event) != 0)
                        continue;
                k->count++;
                k->level = level;
                snprintf(k->last, sizeof(k->last), "%s", fields_json);
        }
}

/* Semantics §2 "co-partitioning": producers keyed by customer and the
 * aggregate read from the value (/orderId), v1 of o-50 on partition 0 and
 * v2, v3 on partition 1. The engine counts the records whose aggregate is
 * not their record key and those whose aggregate it saw on another
 * partition of the topic, and says each once per aggregate at warning. */
START_TEST(copartition_watch) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{\"aggregate\":\"/data/orderId\"}");
        char err[256];
        int64_t off;
        ASSERT_OK(h.proc.assign(h.proc.opaque, "orders", 1, "g", &off, err,
                                sizeof(err)),
                  err);
        kept_log_t logs[] = {{.event = "aggregate_not_record_key"},
                             {.event = "aggregate_on_two_partitions"},
                             {0}};
        sg_engine_set_log(h.eng, log_keep, logs);
        const char *o50 = "{\"orderId\":\"o-50\"}";
        ONE(&h, EV("c-1", "e1", "t", "1", .value = o50));
        ck_assert_uint_eq(M(&h)->aggregate_not_record_key_total, 1);
        ck_assert_uint_eq(M(&h)->aggregate_on_two_partitions_total, 0);
        ONE(&h, EV("c-2", "e2", "t", "2", .value = o50, .partition = 1),
            EV("c-2", "e3", "t", "3", .value = o50, .partition = 1));
        /* partition 1 parks them: its own L is none */
        ck_assert_uint_eq(M(&h)->parked_total, 2);
        ck_assert_uint_eq(M(&h)->aggregate_not_record_key_total, 3);
        ck_assert_uint_eq(M(&h)->aggregate_on_two_partitions_total, 2);
        /* once per aggregate, at warning, naming both partitions */
        ck_assert_int_eq(logs[0].count, 1);
        ck_assert_int_eq(logs[0].level, SG_LOG_WARNING);
        ck_assert_ptr_nonnull(strstr(logs[0].last, "\"aggregate\":\"o-50\""));
        ck_assert_ptr_nonnull(strstr(logs[0].last, "\"key\":\"c-1\""));
        ck_assert_int_eq(logs[1].count, 1);
        ck_assert_int_eq(logs[1].level, SG_LOG_WARNING);
        ck_assert_ptr_nonnull(strstr(logs[1].last, "\"aggregate\":\"o-50\""));
        ck_assert_ptr_nonnull(strstr(logs[1].last, "\"partition\":1"));
        ck_assert_ptr_nonnull(strstr(logs[1].last, "\"first_partition\":0"));
        /* a record keyed by its aggregate is not counted; nor a duplicate */
        ONE(&h, EV("o-7", "e4", "t", "1", .value = "{\"orderId\":\"o-7\"}"),
            EV("c-1", "e1", "t", "1", .value = o50));
        ck_assert_uint_eq(M(&h)->aggregate_not_record_key_total, 3);
        ck_assert_uint_eq(M(&h)->aggregate_on_two_partitions_total, 2);
        /* another aggregate: its own line */
        ONE(&h, EV("c-3", "e5", "t", "1", .value = "{\"orderId\":\"o-9\"}"));
        ck_assert_int_eq(logs[0].count, 2);
        ck_assert_ptr_nonnull(strstr(logs[0].last, "\"aggregate\":\"o-9\""));
        h_free(&h);

        /* the default aggregate, the record key: nothing to count */
        h_t k = {0};
        h_open(&k, "\"envelope\":{}");
        ONE(&k, EV("o-1", "e1", "t", "1"));
        ck_assert_uint_eq(M(&k)->aggregate_not_record_key_total, 0);
        h_free(&k);
}
END_TEST

/* Every line of every event, in order. */
static char all_lines[64][512];
static int all_line_cnt;
static void log_all(void *opaque, sg_log_level_t level, const char *event,
                    const char *fields_json) {
        (void)opaque;
        (void)level;
        if (all_line_cnt < 64)
                snprintf(all_lines[all_line_cnt++], sizeof(all_lines[0]),
                         "%s %s", event, fields_json);
}

/* The co-partitioning warnings are bounded: at most
 * SG_COPART_LOG_PER_MIN lines a minute of processing time, the rest
 * counted in the next line's "suppressed"; the counters count every
 * record. */
START_TEST(copartition_warnings_bounded) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{\"aggregate\":\"/data/orderId\"}");
        all_line_cnt = 0;
        sg_engine_set_log(h.eng, log_all, NULL);
        char ids[40][8], vals[40][32];
        for (int round = 0; round < 2; round++) {
                ev_t evs[20];
                for (int i = 0; i < 20; i++) {
                        int n = round * 20 + i;
                        snprintf(ids[n], sizeof(ids[n]), "e%d", n);
                        snprintf(vals[n], sizeof(vals[n]),
                                 "{\"orderId\":\"o-%d\"}", n);
                        evs[i] = EV("c", ids[n], "t", "1", .value = vals[n]);
                }
                batch(&h, evs, 20);
                if (round == 0) {
                        ck_assert_int_eq(all_line_cnt, SG_COPART_LOG_PER_MIN);
                        h_clock(&h, T0 + 60000);
                }
        }
        ck_assert_uint_eq(M(&h)->aggregate_not_record_key_total, 40);
        ck_assert_int_eq(all_line_cnt, 2 * SG_COPART_LOG_PER_MIN);
        for (int i = 0; i < all_line_cnt; i++)
                ck_assert_msg(
                        !strncmp(all_lines[i], "aggregate_not_record_key ", 25),
                        "%s", all_lines[i]);
        /* the first line of the second minute says how many were left out */
        char want[64];
        snprintf(want, sizeof(want), "\"suppressed\":%d",
                 20 - SG_COPART_LOG_PER_MIN);
        ck_assert_msg(strstr(all_lines[SG_COPART_LOG_PER_MIN], want), "%s",
                      all_lines[SG_COPART_LOG_PER_MIN]);
        ck_assert_ptr_nonnull(strstr(all_lines[0], "\"suppressed\":0"));
        h_free(&h);
}
END_TEST

/* Semantics §4: a gap never times out while its fill may be waiting unread
 * in the partition. Behind the end of the log, the deadline is measured
 * against the newest record timestamp read, not against processing time. */
START_TEST(gap_deadline_waits_for_the_backlog) {
        h_t h = {0};
        h_open(&h,
               "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":\"dlq\"}");
        h.lag_set = true;
        h.lag = 50; /* a backlog, e.g. after a restart */
        ONE(&h, EV("A", "e1", "t", "1", .ts = T0),
            EV("A", "e3", "t", "3", .ts = T0));
        h_clock(&h, T0 + 10000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        ONE(&h, EV("B", "b1", "t", "1", .ts = T0 + 500));
        ck_assert_uint_eq(M(&h)->gap_timeouts_total, 0);
        /* the fill was in the backlog */
        ONE(&h, EV("A", "e2", "t", "2", .ts = T0 + 600));
        char v[64];
        out_versions(&h, "A", v, sizeof(v));
        ck_assert_str_eq(v, "1 2 3");
        ck_assert_uint_eq(M(&h)->gap_timeouts_total, 0);
        /* still behind: a record timestamped past the deadline fires it */
        ONE(&h, EV("C", "c1", "t", "1", .ts = T0 + 700),
            EV("C", "c3", "t", "3", .ts = T0 + 700)); /* parked at T0+10000 */
        h_clock(&h, T0 + 20000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        ONE(&h, EV("B", "b2", "t", "2", .ts = T0 + 11000));
        ck_assert_uint_eq(M(&h)->gap_timeouts_total, 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_DLQ, "C", "3",
                   "gap_timeout");
        /* read to the end of the log: processing time alone */
        ONE(&h, EV("D", "d1", "t", "1", .ts = 5),
            EV("D", "d3", "t", "3", .ts = 5));
        h.lag = 0;
        h_clock(&h, T0 + 21000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_DLQ, "D", "3",
                   "gap_timeout");
        /* lag unknown counts as behind */
        ONE(&h, EV("E", "x1", "t", "1", .ts = 5),
            EV("E", "x3", "t", "3", .ts = 5));
        h.lag = -1;
        h_clock(&h, T0 + 30000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
        h_free(&h);
}
END_TEST

/* Semantics §4 "Which clock": a partition paused at a park cap reads
 * nothing past the paused record, so the fill of its gap cannot arrive
 * while it waits; its deadline runs on processing time from where its
 * horizon stood when it blocked. Behind its log (the lag the loop reports
 * for a paused partition is unknown, -1, and a backlog stays a backlog),
 * the newest record read never moves again: before, such a gap never
 * timed out and the partition stayed paused for good. */
START_TEST(gap_deadline_runs_while_paused_at_a_cap) {
        for (int lag = -1; lag <= 50; lag += 51) {
                h_t h = {0};
                h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,"
                           "\"max_parked_per_aggregate\":3,"
                           "\"on_park_overflow\":\"pause\"}");
                h.lag_set = true;
                h.lag = lag;
                h_clock(&h, T0);
                ONE(&h, EV("G", "g1", "t", "1", .ts = T0),
                    EV("G", "g3", "t", "3", .ts = T0),
                    EV("G", "g4", "t", "4", .ts = T0),
                    EV("G", "g5", "t", "5", .ts = T0));
                ck_assert_int_eq(h.last_result, SG_PROCESSED);
                h_clock(&h, T0 + 200);
                ONE(&h, EV("G", "g6", "t", "6", .ts = T0));
                ck_assert_int_eq(h.last_result, SG_PAUSE);
                /* paused: no record of the partition is read; processing
                 * time passes the deadline by far */
                h_clock(&h, T0 + 1199);
                ck_assert_uint_eq(batch(&h, NULL, 0), 0);
                h_clock(&h, T0 + 60000);
                /* gap_timeout x3 (the parked v3..v5) */
                ck_assert_uint_eq(batch(&h, NULL, 0), 3);
                assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_DLQ, "G", "5",
                           "gap_timeout");
                ck_assert_uint_eq(M(&h)->gap_timeouts_total, 1);
                /* the paused record is read again and taken: the partition
                 * moves on */
                ONE(&h, EV("G", "g6", "t", "6", .ts = T0),
                    EV("H", "h1", "t", "1", .ts = T0));
                ck_assert_int_eq(h.last_result, SG_PROCESSED);
                assert_out(&h.out[h.out_cnt - 2], SG_EFFECT_DLQ, "G", "6",
                           "aggregate_quarantined");
                assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "H", "1",
                           NULL);
                /* consuming again ends the block: a backlog is a backlog */
                if (lag > 0) {
                        ONE(&h, EV("J", "j1", "t", "1", .ts = T0),
                            EV("J", "j3", "t", "3", .ts = T0));
                        h_clock(&h, T0 + 120000);
                        ck_assert_uint_eq(batch(&h, NULL, 0), 0);
                }
                h_free(&h);
        }
}
END_TEST

/* Changing a setting that defines keys or digests on an existing store is
 * refused (naming it) unless the operator accepts the change. Both the
 * refusal and the key_fingerprint_adopted line name every setting by its
 * full key path (topics.<topic>.envelope.<key>). */
START_TEST(key_fingerprint_change_refused) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        h_close(&h);
        char json[4096], err[512];
        snprintf(json, sizeof(json), BASE_CONF,
                 "\"guarantee\":\"at_least_once\",",
                 "\"envelope\":{\"scope\":[\"ce:source\",\"ce:type\"],"
                 "\"digest\":\"/data\"}");
        ck_assert_int_eq(sg_config_parse(json, &h.conf, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_store_open(h.dir, 1 << 24, 1 << 24, &h.store, err,
                                       sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(
                sg_engine_new(h.conf, h.store, &h.eng, err, sizeof(err)),
                SG_OK);
        sg_engine_processor(h.eng, &h.proc);
        int64_t off;
        err[0] = '\0';
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 0, "g", &off,
                                       err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(err, "topics.orders.envelope.scope, "
                                  "topics.orders.envelope.digest"),
                      "%s", err);
        ck_assert_ptr_null(strstr(err, "envelope.id"));
        ck_assert_ptr_nonnull(strstr(err, "--accept-key-change"));
        /* accepted: adopted once, then the store is at the new settings */
        h.conf->accept_key_change = true;
        logged[0] = '\0';
        sg_engine_set_log(h.eng, log_collect, NULL);
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 0, "g", &off,
                                       err, sizeof(err)),
                         SG_OK);
        ck_assert_msg(strstr(logged, "key_fingerprint_adopted") &&
                              strstr(logged,
                                     "\"settings\":\"topics.orders.envelope."
                                     "scope, topics.orders.envelope.digest\""),
                      "%s", logged);
        h.conf->accept_key_change = false;
        ck_assert_int_eq(h.proc.assign(h.proc.opaque, "orders", 0, "g", &off,
                                       err, sizeof(err)),
                         SG_OK);
        h_free(&h);
}
END_TEST

/* ---- records Kafka cannot take (semantics §3, output_rejected) ---------- */

/* One CloudEvents record of aggregate "A" at version @p seq, value @p value
 * (kept alive by the caller for the batch), at offset @p off. */
static sg_header_t g_big_hd[8][5];
static void process_ev(h_t *h, int slot, int64_t off, const char *id,
                       const char *seq, const char *value) {
        char err[256];
        sg_header_t *hd = g_big_hd[slot];
        hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        hd[1] = (sg_header_t){"ce_id", id, strlen(id)};
        hd[2] = (sg_header_t){"ce_source", "/shop", 5};
        hd[3] = (sg_header_t){"ce_type", "t", 1};
        hd[4] = (sg_header_t){"ce_sequence", seq, strlen(seq)};
        sg_record_t rec = {.topic = "orders",
                           .partition = 0,
                           .offset = off,
                           .timestamp_ms = 5,
                           .key = "A",
                           .key_len = 1,
                           .value = value,
                           .value_len = strlen(value),
                           .headers = hd,
                           .header_cnt = 5};
        sg_process_result_t r;
        ck_assert_int_eq(
                h->proc.process(h->proc.opaque, &rec, &r, err, sizeof(err)),
                SG_OK);
        ck_assert_int_eq(r, SG_PROCESSED);
}

/* The batch's effects (*efp) and how many are records for the output or
 * the DLQ: the changelog records both guarantees keep come after them. */
static size_t effects_no_changelog(h_t *h, const sg_effect_t **efp) {
        size_t n = h->proc.effects(h->proc.opaque, efp), k = 0;
        while (k < n && (*efp)[k].kind != SG_EFFECT_CHANGELOG)
                k++;
        for (size_t i = k; i < n; i++)
                ck_assert_int_eq((*efp)[i].kind, SG_EFFECT_CHANGELOG);
        return k;
}

static const char *xhdr(const sg_effect_t *ef, const char *name, char *buf,
                        size_t n) {
        for (size_t j = 0; j < ef->extra_cnt; j++)
                if (!strcmp(ef->extra[j].name, name)) {
                        snprintf(buf, n, "%.*s", (int)ef->extra[j].value_len,
                                 (const char *)ef->extra[j].value);
                        return buf;
                }
        return NULL;
}

/* An output record above the size limits the loop reported is not
 * produced: its input record goes to the DLQ as output_rejected, without
 * its value (the value is what made it too large) and with its source
 * coordinates; the aggregate moves on (v3 applies); a redelivery of it is
 * a duplicate; counted in dlq_total[output_rejected], not applied. */
START_TEST(output_rejected_too_large) {
        h_t h = {0};
        char err[256], b[64];
        static char big[3001];
        memset(big, 'x', 3000);
        h_open(&h, "\"envelope\":{}");
        ck_assert_ptr_nonnull(h.proc.size_limit);
        h.proc.size_limit(h.proc.opaque, NULL, 100000); /* the producer */
        h.proc.size_limit(h.proc.opaque, "out", 2000);  /* the output topic */
        h.proc.size_limit(h.proc.opaque, "elsewhere", 10); /* not ours */
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        process_ev(&h, 0, 10, "e1", "1", "small-1");
        process_ev(&h, 1, 11, "e2", "2", big);
        process_ev(&h, 2, 12, "e3", "3", "small-3");
        ck_assert_int_eq(h.proc.tick(h.proc.opaque, err, sizeof(err)), SG_OK);
        const sg_effect_t *ef;
        ck_assert_uint_eq(effects_no_changelog(&h, &ef), 3);
        ck_assert_int_eq(ef[0].kind, SG_EFFECT_OUTPUT);
        ck_assert_int_eq(ef[1].kind, SG_EFFECT_DLQ);
        ck_assert_str_eq(ef[1].topic, "dlq");
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_REASON, b, sizeof(b)),
                         "output_rejected");
        ck_assert_ptr_null(ef[1].value);
        ck_assert_uint_eq(ef[1].value_len, 0);
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_VALUE_DROPPED, b, sizeof(b)),
                         "3000");
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_TOPIC, b, sizeof(b)), "orders");
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_PARTITION, b, sizeof(b)), "0");
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_OFFSET, b, sizeof(b)), "11");
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_ACTUAL, b, sizeof(b)), "2");
        ck_assert_uint_eq(ef[1].header_cnt, 5); /* the input's headers kept */
        ck_assert_ptr_null(
                xhdr(&ef[1], SG_DLQ_H_HEADERS_DROPPED, b, sizeof(b)));
        /* the record that was too large, not the DLQ one */
        ck_assert_uint_gt(
                sg_record_wire_size(1, 3000, ef[1].headers, 5, NULL, 0), 2000);
        ck_assert_uint_le(sg_effect_wire_size(&ef[1]), 2000);
        ck_assert_int_eq(ef[2].kind, SG_EFFECT_OUTPUT);
        ck_assert_ptr_nonnull(ef[2].value);
        ck_assert_int_eq(memcmp(ef[2].value, "small-3", 7), 0);
        ck_assert_int_eq(h.proc.batch_commit(h.proc.opaque, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(M(&h)->applied_total, 2);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_OUTPUT_REJECTED], 1);
        ck_assert_str_eq(sg_reason_name(SG_R_OUTPUT_REJECTED),
                         "output_rejected");
        /* a redelivered copy is a duplicate; v4 follows v3 */
        ONE(&h, EV("A", "e2", "t", "2", .value = big), EV("A", "e4", "t", "4"));
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "4", NULL);
        h_free(&h);
}
END_TEST

/* The broker refused an output record at delivery (refused()): the
 * re-run of the batch routes exactly that record to output_rejected, with
 * its value when it was refused as invalid; a DLQ record refused in turn
 * goes without its value, then without the input's headers; after that the
 * engine cannot route it (false: the loop retries as after any failure).
 * An aborted batch forgets nothing of this; a committed one uses it up. */
START_TEST(output_rejected_refused_at_delivery) {
        h_t h = {0};
        char err[256], b[64];
        const sg_effect_t *ef;
        h_open(&h, "\"envelope\":{}");
        ck_assert_ptr_nonnull(h.proc.refused);
        for (int run = 0; run < 5; run++) {
                ck_assert_int_eq(
                        h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                        SG_OK);
                process_ev(&h, 0, 7, "e1", "1", "payload-1");
                process_ev(&h, 1, 8, "e2", "2", "payload-2");
                ck_assert_int_eq(h.proc.tick(h.proc.opaque, err, sizeof(err)),
                                 SG_OK);
                ck_assert_uint_eq(effects_no_changelog(&h, &ef), 2);
                ck_assert_int_eq(ef[0].kind, SG_EFFECT_OUTPUT);
                if (run == 0) {
                        ck_assert_int_eq(ef[1].kind, SG_EFFECT_OUTPUT);
                        /* an index that is no effect: nothing to route */
                        ck_assert(
                                !h.proc.refused(h.proc.opaque, 9, false, "x"));
                        ck_assert(h.proc.refused(
                                h.proc.opaque, 1, false,
                                "Broker: Broker failed to validate record"));
                } else {
                        ck_assert_int_eq(ef[1].kind, SG_EFFECT_DLQ);
                        ck_assert_str_eq(
                                xhdr(&ef[1], SG_DLQ_H_REASON, b, sizeof(b)),
                                "output_rejected");
                        ck_assert_str_eq(
                                xhdr(&ef[1], SG_DLQ_H_OFFSET, b, sizeof(b)),
                                "8");
                }
                if (run == 1) { /* refused as invalid: the value is kept */
                        ck_assert_ptr_nonnull(ef[1].value);
                        ck_assert_int_eq(memcmp(ef[1].value, "payload-2", 9),
                                         0);
                        ck_assert_ptr_nonnull(strstr(
                                xhdr(&ef[1], SG_DLQ_H_DETAIL, b, sizeof(b)),
                                "refused"));
                        ck_assert(h.proc.refused(h.proc.opaque, 1, true,
                                                 "Broker: Message size too "
                                                 "large"));
                }
                if (run == 2) { /* the DLQ refused it: no value */
                        ck_assert_ptr_null(ef[1].value);
                        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_VALUE_DROPPED, b,
                                              sizeof(b)),
                                         "9");
                        ck_assert_uint_eq(ef[1].header_cnt, 5);
                        ck_assert(h.proc.refused(h.proc.opaque, 1, true,
                                                 "again"));
                }
                if (run == 3) { /* again: no headers either */
                        ck_assert_ptr_null(ef[1].value);
                        ck_assert_uint_eq(ef[1].header_cnt, 0);
                        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_HEADERS_DROPPED,
                                              b, sizeof(b)),
                                         "5");
                        /* nothing left to drop */
                        ck_assert(!h.proc.refused(h.proc.opaque, 1, true,
                                                  "again"));
                }
                if (run < 4) {
                        h.proc.batch_abort(h.proc.opaque);
                        continue;
                }
                ck_assert_int_eq(
                        h.proc.batch_commit(h.proc.opaque, err, sizeof(err)),
                        SG_OK);
        }
        ck_assert_uint_eq(M(&h)->applied_total, 1);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_OUTPUT_REJECTED], 1);
        /* used up: the next record at another offset is not affected */
        ONE(&h, EV("A", "e3", "t", "3"));
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "3", NULL);
        h_free(&h);
}
END_TEST

/* A DLQ record the DLQ topic cannot take (a malformed record with a large
 * value) goes without its value. */
START_TEST(dlq_record_too_large_drops_value) {
        h_t h = {0};
        char err[256], b[64];
        static char big[3001];
        memset(big, 'y', 3000);
        h_open(&h, "\"envelope\":{}");
        h.proc.size_limit(h.proc.opaque, "dlq", 1500);
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        process_ev(&h, 0, 3, "e1", "not-a-version", big);
        const sg_effect_t *ef;
        ck_assert_uint_eq(h.proc.effects(h.proc.opaque, &ef), 1);
        ck_assert_str_eq(xhdr(&ef[0], SG_DLQ_H_REASON, b, sizeof(b)),
                         "malformed");
        ck_assert_ptr_null(ef[0].value);
        ck_assert_str_eq(xhdr(&ef[0], SG_DLQ_H_VALUE_DROPPED, b, sizeof(b)),
                         "3000");
        ck_assert_uint_le(sg_effect_wire_size(&ef[0]), 1500);
        ck_assert_int_eq(h.proc.batch_commit(h.proc.opaque, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_MALFORMED], 1);
        h_free(&h);
}
END_TEST

/* exactly_once: a parked event is a changelog record too; one larger than
 * the changelog topic takes is not parked but dead-lettered
 * (output_rejected), and the aggregate keeps waiting for v2. */
START_TEST(eos_park_too_large_for_changelog) {
        h_t h = {.root = "\"guarantee\":\"exactly_once\","};
        char err[256], b[128];
        static char big[3001];
        memset(big, 'z', 3000);
        h_open(&h, "\"envelope\":{}");
        h.proc.size_limit(h.proc.opaque, "g-orders-changelog", 2000);
        ck_assert_int_eq(h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                         SG_OK);
        process_ev(&h, 0, 0, "e1", "1", "one");
        process_ev(&h, 1, 1, "e3", "3", big);    /* would park: too large */
        process_ev(&h, 2, 2, "e4", "4", "four"); /* parks */
        const sg_effect_t *ef;
        size_t n = h.proc.effects(h.proc.opaque, &ef);
        ck_assert_uint_ge(n, 2);
        ck_assert_int_eq(ef[0].kind, SG_EFFECT_OUTPUT);
        ck_assert_int_eq(ef[1].kind, SG_EFFECT_DLQ);
        ck_assert_str_eq(xhdr(&ef[1], SG_DLQ_H_REASON, b, sizeof(b)),
                         "output_rejected");
        ck_assert_ptr_null(ef[1].value);
        ck_assert_ptr_nonnull(
                strstr(xhdr(&ef[1], SG_DLQ_H_DETAIL, b, sizeof(b)), "park"));
        h.proc.batch_abort(h.proc.opaque);
        h_free(&h);
}
END_TEST

/* A line the log level drops is not built and does not count against the
 * batch's 50 lines (sg_engine_set_log): at level warning, a batch whose notice
 * lines ("aggregate_epoch", one per aggregate) exceed the budget still
 * logs the warning that comes after them ("aggregate_not_record_key"),
 * and no notice line reaches the callback. */
static int lvl_notice_cnt, lvl_warning_cnt;
static void log_levels(void *opaque, sg_log_level_t level, const char *event,
                       const char *fields_json) {
        (void)opaque;
        (void)event;
        (void)fields_json;
        if (level == SG_LOG_NOTICE)
                lvl_notice_cnt++;
        else if (level == SG_LOG_WARNING)
                lvl_warning_cnt++;
}

START_TEST(log_level_drops_lines_unbuilt) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{\"aggregate\":\"/data/orderId\"},"
                   "\"ordering\":{\"epoch\":\"ce:epoch\"}");
        sg_engine_set_log(h.eng, log_levels, NULL);
        sg_engine_set_log_level(h.eng, SG_LOG_WARNING);
        enum { N = 60 }; /* more than a batch's 50 lines (engine.h) */
        static char aggs[N][16], ids[2][N][16], vals[N][48];
        ev_t evs[N + 1];
        for (int round = 0; round < 2; round++) {
                for (int i = 0; i < N; i++) {
                        snprintf(aggs[i], sizeof(aggs[i]), "A%d", i);
                        snprintf(ids[round][i], sizeof(ids[round][i]), "e%d-%d",
                                 round, i);
                        snprintf(vals[i], sizeof(vals[i]),
                                 "{\"orderId\":\"A%d\"}", i);
                        /* round 1 moves every aggregate to epoch 2: a
                         * notice line each */
                        evs[i] = EV(aggs[i], ids[round][i], "t",
                                    round ? "2" : "1", .value = vals[i],
                                    .epoch = round ? "2" : "1");
                }
                size_t n = N;
                if (round) /* an aggregate that is not the record key */
                        evs[n++] = EV("K", "w1", "t", "1",
                                      .value = "{\"orderId\":\"other\"}",
                                      .epoch = "1");
                batch(&h, evs, n);
        }
        ck_assert_uint_eq(M(&h)->aggregate_not_record_key_total, 1);
        ck_assert_int_eq(lvl_warning_cnt, 1);
        ck_assert_int_eq(lvl_notice_cnt, 0);
        /* back at notice: the lines come again */
        sg_engine_set_log_level(h.eng, SG_LOG_NOTICE);
        ONE(&h, EV("A0", "e2-0", "t", "3", .value = "{\"orderId\":\"A0\"}",
                   .epoch = "3"));
        ck_assert_int_eq(lvl_notice_cnt, 1);
        h_free(&h);
}
END_TEST

/* ---- epochs (semantics §4b) ------------------------------------------- */

#define EPOCH_CONF                                                             \
        "\"ordering\":{\"epoch\":\"ce:epoch\",\"gap_timeout_ms\":60000}"
#define EPOCH_RESTART_CONF                                                     \
        "\"ordering\":{\"epoch\":\"ce:epoch\",\"epoch_versions\":"             \
        "\"restart\",\"gap_timeout_ms\":60000}"

/* The first event sets E; a lower epoch is fenced whatever its version
 * (detail names both epochs, counted); its key is recorded (a redelivery
 * is a duplicate, dedup is unaffected by epochs); E's events go on. */
START_TEST(epoch_lower_fenced) {
        h_t h = {0};
        h_open(&h, EPOCH_CONF);
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "5"),
            EV("A", "e2", "t", "2", .epoch = "4"),
            EV("A", "e3", "t", "9", .epoch = "4"));
        ck_assert_uint_eq(h.out_cnt, 3);
        assert_out(&h.out[0], SG_EFFECT_OUTPUT, "A", "1", NULL);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "2", "fenced_epoch");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "9", "fenced_epoch");
        ck_assert_msg(strstr(h.out[1].detail, "epoch 4") &&
                              strstr(h.out[1].detail, "epoch 5"),
                      "detail: %s", h.out[1].detail);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 2);
        ck_assert_uint_eq(M(&h)->dlq_total[SG_R_FENCED_EPOCH], 2);
        /* a redelivered fenced event is a duplicate; so is e1 under
         * another epoch */
        ONE(&h, EV("A", "e2", "t", "2", .epoch = "4"),
            EV("A", "e1", "t", "1", .epoch = "6"));
        ck_assert_uint_eq(h.out_cnt, 3);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 2);
        /* E = 5 still expects 2 */
        ONE(&h, EV("A", "e4", "t", "2", .epoch = "5"));
        assert_out(&h.out[3], SG_EFFECT_OUTPUT, "A", "2", NULL);
        /* other aggregates have their own epoch */
        ONE(&h, EV("B", "b1", "t", "1", .epoch = "1"));
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "B", "1", NULL);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 2);
        h_free(&h);
}
END_TEST

/* A topic with an epoch field needs it on every event: missing or not a
 * decimal unsigned 64-bit integer (the version's strictness) is row 1. */
START_TEST(epoch_missing_or_invalid_is_malformed) {
        h_t h = {0};
        h_open(&h, EPOCH_CONF);
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e2", "t", "1", .epoch = "+1"),
            EV("A", "e3", "t", "1", .epoch = "1e3"),
            EV("A", "e4", "t", "1", .epoch = "18446744073709551616"));
        ck_assert_uint_eq(h.out_cnt, 4);
        for (size_t i = 0; i < 4; i++)
                assert_out(&h.out[i], SG_EFFECT_DLQ, "A", "1", "malformed");
        ck_assert_ptr_nonnull(strstr(h.out[0].detail, "epoch"));
        ck_assert_uint_eq(M(&h)->malformed_total, 4);
        /* nothing changed: version 1 applies under any first epoch */
        ONE(&h, EV("A", "e5", "t", "1", .epoch = "18446744073709551615"));
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "A", "1", NULL);
        h_free(&h);
}
END_TEST

/* epoch_versions "continue" (a Raft log index): a higher epoch continues
 * L; the events parked under the lower epoch are fenced, never drained,
 * even when the new epoch fills their gap; a gap parks in the new epoch;
 * stale is stale. */
START_TEST(epoch_continue_fences_parked) {
        h_t h = {0};
        h_open(&h, EPOCH_CONF);
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "1"),
            EV("A", "e3", "t", "3", .epoch = "1"),
            EV("A", "e4", "t", "4", .epoch = "1"));
        ck_assert_uint_eq(h.out_cnt, 1);
        ck_assert_int_eq(M(&h)->parked_events, 2);
        /* epoch 2's first event fills the gap: v3, v4 of epoch 1 are
         * fenced (in version order), not released */
        ONE(&h, EV("A", "n2", "t", "2", .epoch = "2"));
        ck_assert_uint_eq(h.out_cnt, 4);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "3", "fenced_epoch");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "4", "fenced_epoch");
        ck_assert_ptr_nonnull(strstr(h.out[1].detail, "epoch 2"));
        assert_out(&h.out[3], SG_EFFECT_OUTPUT, "A", "2", NULL);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 2);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        /* their keys are recorded: redelivered, they are duplicates */
        ONE(&h, EV("A", "e3", "t", "3", .epoch = "1"));
        ck_assert_uint_eq(h.out_cnt, 4);
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        /* a gap in epoch 2 parks, and drains in epoch 2 */
        ONE(&h, EV("A", "n4", "t", "4", .epoch = "2"));
        ck_assert_int_eq(M(&h)->parked_events, 1);
        ONE(&h, EV("A", "n3", "t", "3", .epoch = "2"));
        ck_assert_uint_eq(h.out_cnt, 6);
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "A", "3", NULL);
        assert_out(&h.out[5], SG_EFFECT_OUTPUT, "A", "4", NULL);
        /* a higher epoch with an old version is stale (L continues) */
        ONE(&h, EV("A", "m1", "t", "4", .epoch = "3"));
        assert_out(&h.out[6], SG_EFFECT_DLQ, "A", "4", "stale_version");
        /* ...and it moved E all the same: epoch 2 is fenced now */
        ONE(&h, EV("A", "n5", "t", "5", .epoch = "2"),
            EV("A", "m5", "t", "5", .epoch = "3"));
        assert_out(&h.out[7], SG_EFFECT_DLQ, "A", "5", "fenced_epoch");
        assert_out(&h.out[8], SG_EFFECT_OUTPUT, "A", "5", NULL);
        h_free(&h);
}
END_TEST

/* epoch_versions "restart" (a per-epoch sequence): a higher epoch expects
 * first_version again (the one way L goes down); the lower epoch's parked
 * events are fenced, so the new epoch's versions never meet them. */
START_TEST(epoch_restart_versions) {
        h_t h = {0};
        h_open(&h, EPOCH_RESTART_CONF);
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "1"),
            EV("A", "e2", "t", "2", .epoch = "1"),
            EV("A", "e4", "t", "4", .epoch = "1"));
        ck_assert_uint_eq(h.out_cnt, 2);
        ck_assert_int_eq(M(&h)->parked_events, 1);
        ONE(&h, EV("A", "n1", "t", "1", .epoch = "2"),
            EV("A", "n3", "t", "3", .epoch = "2"),
            EV("A", "n2", "t", "2", .epoch = "2"),
            EV("A", "n4", "t", "4", .epoch = "2"));
        ck_assert_uint_eq(h.out_cnt, 7);
        assert_out(&h.out[2], SG_EFFECT_DLQ, "A", "4", "fenced_epoch");
        assert_out(&h.out[3], SG_EFFECT_OUTPUT, "A", "1", NULL);
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "A", "2", NULL);
        assert_out(&h.out[5], SG_EFFECT_OUTPUT, "A", "3", NULL);
        assert_out(&h.out[6], SG_EFFECT_OUTPUT, "A", "4", NULL);
        /* within epoch 2, L never decreases: 2 is stale */
        ONE(&h, EV("A", "n2b", "t", "2", .epoch = "2"));
        assert_out(&h.out[7], SG_EFFECT_DLQ, "A", "2", "stale_version");
        /* the deposed epoch 1 goes on writing higher versions: fenced */
        ONE(&h, EV("A", "e5", "t", "5", .epoch = "1"));
        assert_out(&h.out[8], SG_EFFECT_DLQ, "A", "5", "fenced_epoch");
        /* epoch 3 starts below first_version? stale, and E moved */
        ONE(&h, EV("A", "m0", "t", "0", .epoch = "3"),
            EV("A", "m1", "t", "1", .epoch = "3"));
        assert_out(&h.out[9], SG_EFFECT_DLQ, "A", "0", "stale_version");
        assert_out(&h.out[10], SG_EFFECT_OUTPUT, "A", "1", NULL);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 2);
        h_free(&h);
}
END_TEST

/* A snapshot reply carries its epoch: a lower one is late, a higher one
 * moves E (fencing what is parked under E) before S applies. */
START_TEST(epoch_snapshot_reply) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"epoch\":\"ce:epoch\",\"gap_timeout_ms\":"
                   "1000},\"snapshot\":{\"source\":\"kafka\","
                   "\"request_topic\":\"snap.req\",\"reply_topic\":"
                   "\"snap.rep\",\"timeout_ms\":2000,\"max_attempts\":2,"
                   "\"backoff_ms\":100,\"backoff_max_ms\":100}");
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "2"),
            EV("A", "e3", "t", "3", .epoch = "2"),
            EV("A", "e9", "t", "9", .epoch = "2"));
        h_clock(&h, T0 + 1000);
        ck_assert_uint_eq(batch(&h, NULL, 0), 1); /* the request */
        char rid[256];
        int attempt;
        last_request(&h, rid, sizeof(rid), &attempt);
        reply(&h, rid, "A", "5,\"epoch\":1", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_late_total, 1);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 0);
        reply(&h, rid, "A", "5,\"epoch\":\"x\"", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_failures_total, 1);
        size_t before = h.out_cnt;
        last_request(&h, rid, sizeof(rid), &attempt);
        reply(&h, rid, "A", "5,\"epoch\":3", NULL);
        ck_assert_uint_eq(M(&h)->snapshot_applied_total, 1);
        /* v3 and v9 of epoch 2 fenced, then the snapshot record */
        ck_assert_uint_eq(count_topic(&h, "dlq"), 2);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 2);
        ck_assert_int_eq(M(&h)->parked_events, 0);
        ck_assert_uint_gt(h.out_cnt, before);
        /* E = 3, L = 5 */
        ONE(&h, EV("A", "e6", "t", "6", .epoch = "2"),
            EV("A", "n6", "t", "6", .epoch = "3"));
        assert_out(&h.out[h.out_cnt - 2], SG_EFFECT_DLQ, "A", "6",
                   "fenced_epoch");
        assert_out(&h.out[h.out_cnt - 1], SG_EFFECT_OUTPUT, "A", "6", NULL);
        h_free(&h);
}
END_TEST

/* The epoch is part of the aggregate's state in the changelog: a restore
 * into an empty store reproduces E (and the epoch of what is parked). */
START_TEST(epoch_restored_from_changelog) {
        changelog_cnt = 0;
        h_t a = {.root = cl_roots[1]};
        h_open(&a, EPOCH_CONF);
        restore_all(&a, 0, 0);
        ev_t b1[] = {EV("A", "e1", "t", "1", .epoch = "1"),
                     EV("A", "n2", "t", "2", .epoch = "2"),
                     EV("A", "n4", "t", "4", .epoch = "2")};
        ck_assert_uint_eq(eos_batch(&a, b1, 3), 2);
        h_close(&a);

        h_t b = {.root = cl_roots[1]};
        h_open(&b, EPOCH_CONF);
        b.offset = a.offset;
        restore_all(&b, 0, 0);
        /* E = 2 survived: epoch 1 is fenced; the parked v4 (epoch 2)
         * drains behind v3 of epoch 2 */
        ev_t b2[] = {EV("A", "e3", "t", "3", .epoch = "1"),
                     EV("A", "n3", "t", "3", .epoch = "2")};
        ck_assert_uint_eq(eos_batch(&b, b2, 2), 2);
        ck_assert_uint_eq(M(&b)->fenced_epoch_total, 1);
        ck_assert_uint_eq(M(&b)->applied_total, 2);
        ck_assert_int_eq(M(&b)->parked_events, 0);
        h_free(&b);
        tu_rmrf(a.dir);
}
END_TEST

/* A drain never releases an event parked under an epoch below E, whatever
 * the store holds: here a changelog whose aggregate record says epoch 2
 * beside an event parked under epoch 1 (an epoch change fences the park
 * first, so only such a store has one). The drain dead-letters it
 * fenced_epoch. */
START_TEST(epoch_drain_never_releases_lower_epoch) {
        changelog_cnt = 0;
        h_t a = {.root = cl_roots[1]};
        h_open(&a, EPOCH_CONF);
        restore_all(&a, 0, 0);
        ev_t b1[] = {EV("A", "e1", "t", "1", .epoch = "1"),
                     EV("A", "e3", "t", "3", .epoch = "1")};
        ck_assert_uint_eq(eos_batch(&a, b1, 2), 1);
        h_close(&a);
        bool patched = false;
        for (size_t i = changelog_cnt; i > 0 && !patched; i--) {
                clrec_t *c = &changelog[i - 1];
                if (c->key[0] != SG_DB_AGG || c->tombstone)
                        continue;
                sg_agg_rec_t r;
                char why[128];
                ck_assert_int_eq(sg_agg_decode(c->value, c->value_len, &r, why,
                                               sizeof(why)),
                                 SG_OK);
                ck_assert(r.has_epoch);
                ck_assert_uint_eq(r.epoch, 1);
                r.epoch = 2;
                unsigned char v[SG_AGG_VALUE_MAX];
                c->value_len = sg_agg_encode(&r, v);
                ck_assert_uint_le(c->value_len, sizeof(c->value));
                memcpy(c->value, v, c->value_len);
                patched = true;
        }
        ck_assert(patched);

        h_t b = {.root = cl_roots[1]};
        h_open(&b, EPOCH_CONF);
        b.offset = a.offset;
        restore_all(&b, 0, 0);
        ev_t b2[] = {EV("A", "n2", "t", "2", .epoch = "2")};
        ck_assert_uint_eq(eos_batch(&b, b2, 1), 1); /* v2 only */
        ck_assert_uint_eq(M(&b)->fenced_epoch_total, 1);
        ck_assert_uint_eq(M(&b)->dlq_total[SG_R_FENCED_EPOCH], 1);
        ck_assert_int_eq(M(&b)->parked_events, 0);
        h_free(&b);
        tu_rmrf(a.dir);
}
END_TEST

/* An aggregate value written before epochs (no epoch trailer) reads as "no
 * epoch"; one with the trailer reads its epoch; any other tail is refused. */
START_TEST(epoch_old_aggregate_record_decodes) {
        unsigned char v[96] = {0};
        size_t n = 0;
        v[n++] = 1;   /* has_last */
        v[n + 7] = 7; /* last u64 = 7 */
        n += 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8;
        v[n++] = 0; /* state_len */
        v[n++] = 0; /* agg_len u16 */
        v[n++] = 1;
        v[n++] = 'A';
        sg_agg_rec_t r;
        char err[256];
        ck_assert_int_eq(sg_agg_decode(v, n, &r, err, sizeof(err)), SG_OK);
        ck_assert(r.has_last);
        ck_assert_uint_eq(r.last_version, 7);
        ck_assert(!r.has_epoch);
        ck_assert_str_eq(r.aggregate, "A");
        memset(v + n, 0, 8);
        v[n + 7] = 3;
        ck_assert_int_eq(sg_agg_decode(v, n + 8, &r, err, sizeof(err)), SG_OK);
        ck_assert(r.has_epoch);
        ck_assert_uint_eq(r.epoch, 3);
        ck_assert_int_eq(sg_agg_decode(v, n + 3, &r, err, sizeof(err)),
                         SG_ERR_INVALID);
        ck_assert_int_eq(sg_agg_decode(v, n + 9, &r, err, sizeof(err)),
                         SG_ERR_INVALID);
}
END_TEST

/* latest_wins judges epochs the same way: a lower epoch is fenced even
 * with the newest version; under restart a new epoch's F applies. */
START_TEST(epoch_latest_wins) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"mode\":\"latest_wins\",\"epoch\":"
                   "\"ce:epoch\",\"epoch_versions\":\"restart\"}");
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "1"),
            EV("A", "e5", "t", "5", .epoch = "1"),
            EV("A", "n1", "t", "1", .epoch = "2"),
            EV("A", "e9", "t", "9", .epoch = "1"),
            EV("A", "n3", "t", "3", .epoch = "2"));
        ck_assert_uint_eq(h.out_cnt, 5);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "A", "5", NULL);
        assert_out(&h.out[2], SG_EFFECT_OUTPUT, "A", "1", NULL);
        assert_out(&h.out[3], SG_EFFECT_DLQ, "A", "9", "fenced_epoch");
        assert_out(&h.out[4], SG_EFFECT_OUTPUT, "A", "3", NULL);
        ck_assert_str_eq(h.out[4].extra_val, "2-2"); /* the gap header */
        h_free(&h);
}
END_TEST

/* Without ordering.epoch an epoch header is just a header. */
START_TEST(epoch_unconfigured_ignored) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1", .epoch = "5"),
            EV("A", "e2", "t", "2", .epoch = "1"));
        ck_assert_uint_eq(M(&h)->applied_total, 2);
        ck_assert_uint_eq(M(&h)->fenced_epoch_total, 0);
        h_free(&h);
}
END_TEST

/* Every output record names its input in __seqgate.source (semantics §5):
 * "topic/partition/offset", the offset in full up to the largest one. */
START_TEST(output_source_header_text) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        const int64_t offs[] = {0, 9, 10, 4294967296LL, INT64_MAX - 1};
        const char *want[] = {"orders/0/0", "orders/0/9", "orders/0/10",
                              "orders/0/4294967296",
                              "orders/0/9223372036854775806"};
        char err[512], seq[8];
        for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
                snprintf(seq, sizeof(seq), "%zu", i + 1);
                sg_header_t hd[] = {
                        {"ce_specversion", "1.0", 3},      {"ce_id", seq, 1},
                        {"ce_source", "/shop", 5},         {"ce_type", "t", 1},
                        {"ce_sequence", seq, strlen(seq)},
                };
                sg_record_t rec = {.topic = "orders",
                                   .offset = offs[i],
                                   .timestamp_ms = 1000,
                                   .key = "A",
                                   .key_len = 1,
                                   .value = "{}",
                                   .value_len = 2,
                                   .headers = hd,
                                   .header_cnt = 5};
                sg_process_result_t r;
                ck_assert_int_eq(
                        h.proc.batch_begin(h.proc.opaque, 0, err, sizeof(err)),
                        SG_OK);
                ck_assert_int_eq(h.proc.process(h.proc.opaque, &rec, &r, err,
                                                sizeof(err)),
                                 SG_OK);
                ck_assert_int_eq(h.proc.tick(h.proc.opaque, err, sizeof(err)),
                                 SG_OK);
                const sg_effect_t *ef;
                size_t n = h.proc.effects(h.proc.opaque, &ef), outputs = 0;
                for (size_t j = 0; j < n; j++) {
                        if (ef[j].kind != SG_EFFECT_OUTPUT)
                                continue;
                        outputs++;
                        ck_assert_uint_eq(ef[j].extra_cnt, 1);
                        ck_assert_str_eq(ef[j].extra[0].name, SG_H_SOURCE);
                        ck_assert_uint_eq(ef[j].extra[0].value_len,
                                          strlen(want[i]));
                        ck_assert_int_eq(memcmp(ef[j].extra[0].value, want[i],
                                                strlen(want[i])),
                                         0);
                }
                ck_assert_uint_eq(outputs, 1);
                ck_assert_int_eq(
                        h.proc.batch_commit(h.proc.opaque, err, sizeof(err)),
                        SG_OK);
        }
        h_free(&h);
}
END_TEST

Suite *engine_suite(void) {
        Suite *s = suite_create("engine");
        TCase *rows = tcase_create("decision_table");
        tcase_add_test(rows, row1_malformed);
        tcase_add_test(rows, row1_malformed_records_its_key);
        tcase_add_test(rows, row1_malformed_without_key);
        tcase_add_test(rows, copartition_watch);
        tcase_add_test(rows, copartition_warnings_bounded);
        tcase_add_test(rows, log_level_drops_lines_unbuilt);
        tcase_add_test(rows, row2_duplicate);
        tcase_add_test(rows, row3_conflict);
        tcase_add_test(rows, row5_stale);
        tcase_add_test(rows, row5_stale_drop);
        tcase_add_test(rows, row6_apply_and_drain_in_one_batch);
        tcase_add_test(rows, row6_swap_across_batches);
        tcase_add_test(rows, row7_illegal_transition_and_unknown_type);
        tcase_add_test(rows, row7_state_machine_in_drain);
        tcase_add_test(rows, row8_park_and_version_jump);
        tcase_add_test(rows, new_aggregate_modes);
        tcase_add_test(rows, row8b_version_conflict_never_overwrites);
        tcase_add_test(rows, store_error_reports_its_detail);
        tcase_add_test(rows, store_durability_defers_in_both_guarantees);
        tcase_add_test(rows, version_wrap_at_u64_max);
        tcase_add_test(rows, output_source_header_text);
        suite_add_tcase(s, rows);
        TCase *gaps = tcase_create("gaps");
        tcase_add_test(gaps, gap_policy_dlq_quarantines);
        tcase_add_test(gaps, stuck_threshold_configurable);
        tcase_add_test(gaps, gap_policy_skip);
        tcase_add_test(gaps, gap_policy_hold);
        tcase_add_test(gaps, gap_deadline_from_oldest_parked);
        tcase_add_test(gaps, caps_pause_and_dlq);
        tcase_add_test(gaps, operator_release_of_quarantine);
        tcase_add_test(gaps, release_and_skip_never_lower_last_version);
        tcase_add_test(gaps, release_refuses_lower_version_and_idle_aggregate);
        tcase_add_test(gaps, release_refuses_unknown_state);
        tcase_add_test(gaps, log_lines_are_json_whatever_the_key);
        tcase_add_test(gaps, dlq_summary_once_per_interval);
        tcase_add_test(gaps, gap_deadline_waits_for_the_backlog);
        tcase_add_test(gaps, gap_deadline_runs_while_paused_at_a_cap);
        suite_add_tcase(s, gaps);
        TCase *modes = tcase_create("modes_ttl_replay");
        tcase_add_test(modes, mode_latest_wins);
        tcase_add_test(modes, mode_none_dedup_only);
        tcase_add_test(modes, dedup_ttl_expiry);
        tcase_add_test(modes, dedup_ttl_sweep_is_bounded);
        tcase_add_test(modes, replay_rejudges_dlq_verdicts_only);
        tcase_add_test(modes, replay_of_illegal_transition_is_stale);
        suite_add_tcase(s, modes);
        TCase *life = tcase_create("lifecycle");
        tcase_add_test(life, abort_forgets_everything);
        tcase_add_test(life, restart_keeps_state);
        tcase_add_test(life, foreign_group_refused);
        tcase_add_test(life, key_fingerprint_change_refused);
        tcase_add_test(life, assign_meta_write_fails_closes_txn);
        tcase_add_test(life, agg_cache_low_room_fails_the_batch);
        tcase_add_test(life, agg_cache_written_back_at_the_checkpoint);
        tcase_add_test(life, record_of_unassigned_partition_refused);
        tcase_add_test(life, dlq_headers_complete);
        tcase_add_test(life, output_rejected_too_large);
        tcase_add_test(life, output_rejected_refused_at_delivery);
        tcase_add_test(life, dlq_record_too_large_drops_value);
        suite_add_tcase(s, life);
        TCase *snap = tcase_create("snapshot");
        tcase_add_test(snap, snapshot_kafka_resolves_gap);
        tcase_add_test(snap, snapshot_late_and_unknown_replies);
        tcase_add_test(snap, snapshot_reply_version_judged_by_text);
        tcase_add_test(snap, snapshot_retries_then_policy_then_release);
        tcase_add_test(snap, snapshot_new_aggregate_and_state);
        tcase_add_test(snap, snapshot_max_in_flight_and_cancel);
        tcase_add_test(snap, snapshot_http_effects_and_failures);
        tcase_add_test(snap, snapshot_request_survives_restart);
        suite_add_tcase(s, snap);
        TCase *eos = tcase_create("exactly_once");
        tcase_add_loop_test(eos, store_follows_partition_through_changelog, 0,
                            2);
        tcase_add_loop_test(eos, store_ahead_of_changelog_is_refused, 0, 2);
        tcase_add_test(eos, changelog_value_and_epoch);
        tcase_add_test(eos, restore_resumes_at_its_window_checkpoint);
        tcase_add_test(eos, restore_leaves_dedup_keys_sealed);
        tcase_add_test(eos, eos_park_too_large_for_changelog);
        tcase_add_test(eos, restore_empty_key_closes_txn);
        tcase_add_test(eos, restore_refuses_corrupt_parked_record);
        tcase_add_test(eos, restore_voids_parked_events_at_or_below_l);
        tcase_add_test(eos, restore_refuses_clock_past_year_9999);
        suite_add_tcase(s, eos);
        TCase *ep = tcase_create("epochs");
        tcase_add_test(ep, epoch_lower_fenced);
        tcase_add_test(ep, epoch_missing_or_invalid_is_malformed);
        tcase_add_test(ep, epoch_continue_fences_parked);
        tcase_add_test(ep, epoch_restart_versions);
        tcase_add_test(ep, epoch_snapshot_reply);
        tcase_add_test(ep, epoch_restored_from_changelog);
        tcase_add_test(ep, epoch_drain_never_releases_lower_epoch);
        tcase_add_test(ep, epoch_old_aggregate_record_decodes);
        tcase_add_test(ep, epoch_unconfigured_ignored);
        tcase_add_test(ep, epoch_latest_wins);
        suite_add_tcase(s, ep);
        return s;
}

int main(void) {
        return tu_run_suite(engine_suite());
}
