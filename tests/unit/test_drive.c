/*
 * test_drive.c — the offline driver (drive.h): the batch protocol as the
 * Kafka loop runs it (kafka_batch.c): a full map grown until the batch
 * fits, paused records kept and offered again pause_retry_ms later, a
 * paused partition's lag unknown, effects reported by the step that added
 * them and delivered at per-partition offsets.
 */
#include "config.h"
#include "drive.h"
#include "engine.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1767225600000LL /* 2026-01-01T00:00:00Z */

/* What the hooks saw. */
typedef struct seen {
        const sg_record_t *batch_recs; /* the caller's, for origin checks */
        size_t steps, tick_steps, origin_ok;
        size_t outputs, dlq_gap_timeout;
        int64_t out_offs[64];
        size_t out_off_cnt;
        size_t lag_calls;
        size_t batches;
        unsigned grows;
        sg_process_result_t results[16];
        char aggs[16][16];
        size_t last_cnt;
        int64_t last_now;
} seen_t;

static bool hdr_is(const sg_header_t *h, size_t n, const char *name,
                   const char *val) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(h[i].name, name))
                        return h[i].value_len == strlen(val) &&
                               !memcmp(h[i].value, val, h[i].value_len);
        return false;
}

static sg_err_t on_effects(void *opaque, const sg_record_t *origin,
                           const sg_effect_t *efs, const int64_t *offsets,
                           size_t cnt, char *errstr, size_t errstr_size) {
        seen_t *s = opaque;
        (void)errstr;
        (void)errstr_size;
        s->steps++;
        if (!origin)
                s->tick_steps++;
        for (size_t i = 0; i < cnt; i++) {
                if (efs[i].kind == SG_EFFECT_OUTPUT) {
                        s->outputs++;
                        if (s->out_off_cnt < 64)
                                s->out_offs[s->out_off_cnt++] = offsets[i];
                        /* an output record is about the record whose
                         * process() added it */
                        if (origin && origin->key_len == efs[i].key_len &&
                            !memcmp(origin->key, efs[i].key, efs[i].key_len))
                                s->origin_ok++;
                }
                if (efs[i].kind == SG_EFFECT_DLQ &&
                    hdr_is(efs[i].extra, efs[i].extra_cnt, SG_DLQ_H_REASON,
                           "gap_timeout"))
                        s->dlq_gap_timeout++;
        }
        return SG_OK;
}

static void on_committed(void *opaque, const sg_drive_batch_t *b) {
        seen_t *s = opaque;
        s->batches++;
        s->grows += b->grows;
        s->last_cnt = b->cnt;
        s->last_now = b->now_ms;
        for (size_t i = 0; i < b->cnt && i < 16; i++) {
                s->results[i] = b->results[i];
                snprintf(s->aggs[i], sizeof(s->aggs[i]), "%.*s",
                         (int)b->recs[i].key_len, (const char *)b->recs[i].key);
        }
}

static int64_t on_lag(void *opaque, const char *topic, int32_t partition) {
        seen_t *s = opaque;
        (void)topic;
        (void)partition;
        s->lag_calls++;
        return 0;
}

/* A CloudEvents binary-mode record of aggregate @p agg, version @p v. */
typedef struct ev {
        sg_record_t rec;
        sg_header_t h[5];
        char id[56] /* agg, '-', a uint64 */, seq[24], agg[32], value[800];
} ev_t;

static void ev_make(ev_t *e, const char *agg, uint64_t v, int64_t offset,
                    size_t pad) {
        snprintf(e->agg, sizeof(e->agg), "%s", agg);
        snprintf(e->id, sizeof(e->id), "%s-%" PRIu64, agg, v);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, v);
        if (pad > sizeof(e->value) - 16)
                pad = sizeof(e->value) - 16;
        int n = snprintf(e->value, sizeof(e->value), "{\"p\":\"%*s\"}",
                         (int)pad, "");
        e->h[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        e->h[1] = (sg_header_t){"ce_id", e->id, strlen(e->id)};
        e->h[2] = (sg_header_t){"ce_source", "/t", 2};
        e->h[3] = (sg_header_t){"ce_type", "t", 1};
        e->h[4] = (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
        e->rec = (sg_record_t){.topic = "orders",
                               .partition = 0,
                               .offset = offset,
                               .timestamp_ms = T0,
                               .key = e->agg,
                               .key_len = strlen(e->agg),
                               .value = e->value,
                               .value_len = (size_t)n,
                               .headers = e->h,
                               .header_cnt = 5};
}

static sg_config_t *conf_new(const char *store, const char *ordering,
                             const char *root) {
        char json[2048], err[512];
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"/nonexistent/drive\",%s"
                 "\"kafka\":{\"bootstrap.servers\":\"x:1\",\"group.id\":"
                 "\"g\"},\"store\":{%s},\"topics\":{\"orders\":{"
                 "\"output_topic\":\"out\",\"dlq_topic\":\"dlq\","
                 "\"ordering\":{\"mode\":\"strict\",\"gap_policy\":\"dlq\"%s}"
                 "}}}",
                 root, store, ordering);
        sg_config_t *c = NULL;
        ck_assert_msg(sg_config_parse(json, &c, err, sizeof(err)) == SG_OK,
                      "config: %s", err);
        return c;
}

static size_t dir_entries(const char *dir) {
        DIR *d = opendir(dir);
        size_t n = 0;
        for (struct dirent *e; d && (e = readdir(d));)
                n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        if (d)
                closedir(d);
        return n;
}

/* One batch needs more than one growth of a 1 MiB map (the loop grows
 * until it fits; seqgatectl simulate used to retry once): every record
 * is judged, the parked payloads are in the store afterwards, and the
 * temporary store is removed. */
START_TEST(test_drive_grows_until_the_batch_fits) {
        char tmp[256], es[512];
        tu_tmpdir(tmp, sizeof(tmp), "drive");
        setenv("TMPDIR", tmp, 1);
        sg_config_t *c = conf_new(
                "\"map_size_bytes\":1048576,\"map_growth_bytes\":1048576",
                ",\"gap_timeout_ms\":600000", "");
        enum { N = 3000 };
        ev_t *evs = calloc(N, sizeof(*evs));
        sg_record_t *recs = calloc(N, sizeof(*recs));
        ck_assert_ptr_nonnull(evs);
        ck_assert_ptr_nonnull(recs);
        for (int i = 0; i < N; i++) {
                char agg[32];
                snprintf(agg, sizeof(agg), "a-%d", i);
                ev_make(&evs[i], agg, 2, i, 600); /* parked: waits for 1 */
                recs[i] = evs[i].rec;
        }
        seen_t s = {0};
        sg_drive_hooks_t hk = {
                .opaque = &s, .effects = on_effects, .committed = on_committed};
        sg_drive_t *d = NULL;
        ASSERT_OK(sg_drive_new(c, NULL, "drive-test.", "g", &hk, &d, es,
                               sizeof(es)),
                  es);
        ck_assert_uint_eq(dir_entries(tmp), 1);
        ASSERT_OK(sg_drive_batch(d, recs, N, T0, es, sizeof(es)), es);
        ck_assert_uint_eq(s.batches, 1);
        ck_assert_msg(s.grows >= 2, "grows %u", s.grows);
        const sg_metrics_t *m = sg_engine_metrics(sg_drive_engine(d));
        ck_assert_uint_eq(m->parked_total, N);
        ck_assert_uint_eq(m->parked_events, N);
        /* the store holds them: the next batch releases one */
        ev_t one;
        ev_make(&one, "a-7", 1, N, 0);
        ASSERT_OK(sg_drive_batch(d, &one.rec, 1, T0 + 1, es, sizeof(es)), es);
        m = sg_engine_metrics(sg_drive_engine(d));
        ck_assert_uint_eq(m->parked_events, N - 1);
        ck_assert_uint_eq(s.outputs, 2); /* a-7 v1 and v2 released */
        sg_drive_destroy(d);
        ck_assert_uint_eq(dir_entries(tmp), 0);
        sg_config_destroy(c);
        free(evs);
        free(recs);
        tu_rmrf(tmp);
}
END_TEST

/* A partition paused at a park cap keeps the record and every later one
 * (given later too) and offers them again in offset order once
 * pause_retry_ms passed — after an empty batch at that time, whose tick
 * fires the gap deadline that frees the cap, as the loop ticks while the
 * partition is paused. The paused partition's lag is not asked (the loop
 * reports it unknown). */
START_TEST(test_drive_pause_keeps_and_offers_again) {
        char tmp[256], es[512];
        tu_tmpdir(tmp, sizeof(tmp), "drive");
        setenv("TMPDIR", tmp, 1);
        sg_config_t *c = conf_new("",
                                  ",\"gap_timeout_ms\":300,"
                                  "\"max_parked_total\":1,"
                                  "\"max_parked_per_aggregate\":1,"
                                  "\"on_park_overflow\":\"pause\"",
                                  "\"pause_retry_ms\":500,");
        seen_t s = {0};
        sg_drive_hooks_t hk = {.opaque = &s,
                               .effects = on_effects,
                               .committed = on_committed,
                               .lag = on_lag};
        sg_drive_t *d = NULL;
        ASSERT_OK(sg_drive_new(c, NULL, "drive-test.", "g", &hk, &d, es,
                               sizeof(es)),
                  es);
        ev_t e[5];
        ev_make(&e[0], "o-1", 1, 0, 0); /* applied */
        ev_make(&e[1], "o-1", 3, 1, 0); /* parked: the cap is full */
        ev_make(&e[2], "o-2", 2, 2, 0); /* paused at the cap */
        ev_make(&e[3], "o-3", 1, 3, 0); /* behind the paused one */
        ev_make(&e[4], "o-4", 1, 4, 0); /* given while paused */
        sg_record_t b1[4] = {e[0].rec, e[1].rec, e[2].rec, e[3].rec};
        ASSERT_OK(sg_drive_batch(d, b1, 4, T0, es, sizeof(es)), es);
        ck_assert_uint_eq(s.last_cnt, 4);
        ck_assert_int_eq(s.results[0], SG_PROCESSED);
        ck_assert_int_eq(s.results[1], SG_PROCESSED);
        ck_assert_int_eq(s.results[2], SG_PAUSE);
        ck_assert_int_eq(s.results[3], SG_PAUSE);
        ck_assert_uint_eq(sg_drive_kept(d), 2);
        ck_assert_int_eq(sg_drive_resume_ms(d), T0 + 500);
        ck_assert_uint_eq(s.lag_calls, 0);
        /* the output of o-1 v1, from its own process() step */
        ck_assert_uint_eq(s.outputs, 1);
        ck_assert_uint_eq(s.origin_ok, 1);

        /* paused: o-4 is not offered, it waits behind */
        ASSERT_OK(sg_drive_batch(d, &e[4].rec, 1, T0 + 200, es, sizeof(es)),
                  es);
        ck_assert_uint_eq(s.batches, 2);
        ck_assert_uint_eq(s.last_cnt, 0);
        ck_assert_uint_eq(sg_drive_kept(d), 3);
        ck_assert_uint_eq(s.dlq_gap_timeout, 0);

        /* pause_retry_ms later: a tick first (the deadline, T0 + 300,
         * passed), then the kept records in offset order */
        ASSERT_OK(sg_drive_batch(d, NULL, 0, T0 + 500, es, sizeof(es)), es);
        ck_assert_uint_eq(s.batches, 4);
        ck_assert_uint_eq(s.dlq_gap_timeout, 1);
        ck_assert_uint_eq(s.last_cnt, 3);
        ck_assert_str_eq(s.aggs[0], "o-2");
        ck_assert_str_eq(s.aggs[1], "o-3");
        ck_assert_str_eq(s.aggs[2], "o-4");
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(s.results[i], SG_PROCESSED);
        ck_assert_uint_eq(sg_drive_kept(d), 0);
        ck_assert_int_eq(sg_drive_resume_ms(d), -1);
        ck_assert_uint_eq(s.lag_calls, 2); /* read on again */
        /* o-3 and o-4 applied: the output's offsets run on per partition */
        ck_assert_uint_eq(s.out_off_cnt, 3);
        for (size_t i = 0; i < s.out_off_cnt; i++)
                ck_assert_int_eq(s.out_offs[i], (int64_t)i);
        const sg_metrics_t *m = sg_engine_metrics(sg_drive_engine(d));
        ck_assert_uint_eq(m->parked_events, 1); /* o-2 v2 waits for v1 */
        sg_drive_destroy(d);
        sg_config_destroy(c);
        tu_rmrf(tmp);
}
END_TEST

/* The checkpoint after batch_commit fails on a full map once the effects
 * were reported: as the loop, the batch stays committed (reported once),
 * the store is grown and restored from the batch's changelog records, and
 * the next batches see its decisions. */
START_TEST(test_drive_failed_commit_restored) {
        char tmp[256], es[512];
        tu_tmpdir(tmp, sizeof(tmp), "drive");
        setenv("TMPDIR", tmp, 1);
        sg_config_t *c = conf_new("", ",\"gap_timeout_ms\":600000", "");
        seen_t s = {0};
        sg_drive_hooks_t hk = {
                .opaque = &s, .effects = on_effects, .committed = on_committed};
        sg_drive_t *d = NULL;
        ASSERT_OK(sg_drive_new(c, NULL, "drive-test.", "g", &hk, &d, es,
                               sizeof(es)),
                  es);
        ev_t e[4];
        ev_make(&e[0], "a-1", 1, 0, 0); /* applied */
        ev_make(&e[1], "a-1", 3, 1, 0); /* parked */
        ev_make(&e[2], "a-1", 2, 2, 0); /* applied, v3 released */
        ev_make(&e[3], "a-1", 1, 3, 0); /* a duplicate */
        sg_record_t b1[2] = {e[0].rec, e[1].rec};
        ASSERT_OK(sg_drive_assign(d, "orders", 0, es, sizeof(es)), es);
        sg_store_fault_inject(sg_drive_store(d), SG_STORE_OP_COMMIT, 1,
                              MDB_MAP_FULL);
        ASSERT_OK(sg_drive_batch(d, b1, 2, T0, es, sizeof(es)), es);
        bool fired = false;
        (void)sg_store_fault_count(sg_drive_store(d), &fired);
        ck_assert(fired);
        sg_store_fault_inject(sg_drive_store(d), 0, 0, 0);
        ck_assert_uint_eq(s.batches, 1);
        ck_assert_uint_eq(s.grows, 1);
        ck_assert_uint_eq(s.outputs, 1);
        ASSERT_OK(sg_drive_batch(d, &e[2].rec, 1, T0 + 1, es, sizeof(es)), es);
        ck_assert_uint_eq(s.outputs, 3);
        ASSERT_OK(sg_drive_batch(d, &e[3].rec, 1, T0 + 2, es, sizeof(es)), es);
        ck_assert_uint_eq(s.outputs, 3);
        const sg_metrics_t *m = sg_engine_metrics(sg_drive_engine(d));
        ck_assert_uint_eq(m->dedup_hits_total, 1);
        ck_assert_uint_eq(m->parked_events, 0);
        /* the delivered offsets ran on across the restore */
        for (size_t i = 0; i < s.out_off_cnt; i++)
                ck_assert_int_eq(s.out_offs[i], (int64_t)i);
        sg_drive_destroy(d);
        sg_config_destroy(c);
        tu_rmrf(tmp);
}
END_TEST

int main(void) {
        Suite *s = suite_create("drive");
        TCase *tc = tcase_create("drive");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_drive_grows_until_the_batch_fits);
        tcase_add_test(tc, test_drive_pause_keeps_and_offers_again);
        tcase_add_test(tc, test_drive_failed_commit_restored);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
