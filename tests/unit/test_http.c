/*
 * test_http.c — the HTTP endpoint: the Prometheus exposition writer
 * (metrics_prom.c: format, label escaping, cumulative histogram buckets,
 * counters ending in _total, milliseconds as seconds), /healthz and /readyz
 * (metrics_pub.c), http.address parsing and the server itself (http.c: a
 * real libmicrohttpd on 127.0.0.1, a kernel-chosen port, asked with
 * libcurl: routes by prefix, query arguments, 404, 405, HEAD, read_api).
 */
#include "config.h"
#include "http.h"
#include "metrics_pub.h"
#include "testutil.h"

#include <check.h>
#include <arpa/inet.h>
#include <crypt.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the exposition --------------------------------------------------- */

/** A snapshot with known numbers; the caller frees it with
 *  sg_metrics_snap_free(). */
static void snap_fill(sg_metrics_snap_t *s) {
        memset(s, 0, sizeof(*s));
        s->has_engine = true;
        sg_metrics_t m = {0}, p = {0};
        m.dedup_hits_total = 3;
        m.stale_version_rejections_total = 2;
        m.event_sequence_gaps_total = 1;
        m.idempotency_parameter_conflicts_total = 4;
        m.stuck_parked = 5;
        m.stuck_threshold_ms = 300000;
        m.dlq_total[SG_R_STALE_VERSION] = 2;
        p.dedup_hits_total = 30;
        p.stuck_parked = 1;
        p.stuck_threshold_ms = 300000;
        p.dlq_total[SG_R_MALFORMED] = 7;
        ck_assert_int_eq(sg_metrics_snap_topic_add(s, "orders", &m), SG_OK);
        ck_assert_int_eq(sg_metrics_snap_topic_add(s, "pay\"ments", &p), SG_OK);
        s->loop.commit_latency_ms_last = 1500;
        sg_hist_observe(&s->loop.commit_latency_ms, 3);
        sg_hist_observe(&s->loop.commit_latency_ms, 7);
        sg_hist_observe(&s->loop.commit_latency_ms, 400000);
        ck_assert_int_eq(sg_metrics_snap_reserve(s, 2), SG_OK);
        s->part_cnt = 2;
        memset(s->parts, 0, 2 * sizeof(*s->parts));
        snprintf(s->parts[0].topic, sizeof(s->parts[0].topic), "orders");
        s->parts[0].partition = 0;
        s->parts[0].consumer_lag = 17;
        s->parts[0].oldest_parked_age_ms = 2500;
        snprintf(s->parts[1].topic, sizeof(s->parts[1].topic), "we\"ird\\t\n");
        s->parts[1].partition = 3;
        s->parts[1].consumer_lag = -1; /* unknown: no sample */
}

static char *render(const sg_metrics_snap_t *s) {
        char *buf = NULL;
        size_t len = 0;
        ck_assert_int_eq(sg_metrics_prom(s, "1.2.3", &buf, &len), SG_OK);
        ck_assert_uint_eq(strlen(buf), len);
        return buf;
}

#define HAS(text, line)                                                        \
        ck_assert_msg(strstr(text, line) != NULL, "missing: %s", line)

START_TEST(test_prom_seed_names) {
        sg_metrics_snap_t s;
        snap_fill(&s);
        char *t = render(&s);
        HAS(t, "# TYPE seqgate_dedup_hits_total counter\n"
               "seqgate_dedup_hits_total{topic=\"orders\"} 3\n");
        HAS(t, "\nseqgate_idempotency_parameter_conflicts_total{topic="
               "\"orders\"} 4\n");
        HAS(t, "\nseqgate_stale_version_rejections_total{topic=\"orders\"} "
               "2\n");
        HAS(t, "\nseqgate_event_sequence_gaps_total{topic=\"orders\"} 1\n");
        /* the seed's name stays, beside the one without the threshold */
        HAS(t, "# TYPE seqgate_stuck_processing_over_5m gauge\n"
               "seqgate_stuck_processing_over_5m{topic=\"orders\"} 5\n");
        HAS(t, "# TYPE seqgate_stuck_processing gauge\n"
               "seqgate_stuck_processing{topic=\"orders\"} 5\n");
        HAS(t, "\nseqgate_stuck_threshold_seconds{topic=\"orders\"} "
               "300.000\n");
        HAS(t, "\nseqgate_dlq_records_total{topic=\"orders\",reason="
               "\"stale_version\"} 2\n");
        HAS(t, "\nseqgate_dlq_records_total{topic=\"orders\",reason="
               "\"malformed\"} 0\n");
        HAS(t, "\nseqgate_build_info{version=\"1.2.3\"} 1\n");
        /* /readyz as a gauge: no assignment yet */
        HAS(t, "# TYPE seqgate_ready gauge\nseqgate_ready 0\n");
        s.assigned_once = true;
        free(t);
        t = render(&s);
        HAS(t, "\nseqgate_ready 1\n");
        HAS(t, "# HELP seqgate_dedup_hits_total duplicates");
        /* milliseconds are exported in seconds */
        HAS(t, "\nseqgate_commit_latency_seconds_last 1.500\n");
        ck_assert_ptr_null(strstr(t, "_ms"));
        free(t);
        sg_metrics_snap_free(&s);
}
END_TEST

/* Every engine series carries the label topic: one sample per input
 * topic, none without it (metrics_list.h). */
START_TEST(test_prom_per_topic) {
        sg_metrics_snap_t s;
        snap_fill(&s);
        char *t = render(&s);
        HAS(t, "\nseqgate_dedup_hits_total{topic=\"pay\\\"ments\"} 30\n");
        HAS(t, "\nseqgate_dlq_records_total{topic=\"pay\\\"ments\",reason="
               "\"malformed\"} 7\n");
        HAS(t, "\nseqgate_stuck_processing_over_5m{topic=\"pay\\\"ments\"} "
               "1\n");
        ck_assert_ptr_null(strstr(t, "\nseqgate_dedup_hits_total "));
        ck_assert_ptr_null(strstr(t, "\nseqgate_dlq_records_total{reason"));
        ck_assert_ptr_null(strstr(t, "\nseqgate_records_total "));
        free(t);
        sg_metrics_snap_free(&s);
}
END_TEST

/* The stats line's sum over topics (metrics_list.h): counters and gauges
 * add up, an age or a threshold (_ms gauge) takes the largest. */
START_TEST(test_metrics_sum) {
        sg_metrics_t a = {0}, b = {0}, t = {0};
        a.records_total = 3;
        a.dlq_total[SG_R_MALFORMED] = 1;
        a.parked_events = 2;
        a.oldest_parked_age_ms = 500;
        a.stuck_threshold_ms = 300000;
        sg_hist_observe(&a.snapshot_resolve_ms, 10);
        b.records_total = 4;
        b.dlq_total[SG_R_MALFORMED] = 2;
        b.parked_events = 5;
        b.oldest_parked_age_ms = 9000;
        b.stuck_threshold_ms = 300000;
        b.snapshot_resolve_ms_max = 70;
        sg_hist_observe(&b.snapshot_resolve_ms, 20);
        sg_metrics_sum(&t, &a);
        sg_metrics_sum(&t, &b);
        ck_assert_uint_eq(t.records_total, 7);
        ck_assert_uint_eq(t.dlq_total[SG_R_MALFORMED], 3);
        ck_assert_int_eq(t.parked_events, 7);
        ck_assert_int_eq(t.oldest_parked_age_ms, 9000);
        ck_assert_int_eq(t.stuck_threshold_ms, 300000);
        ck_assert_int_eq(t.snapshot_resolve_ms_max, 70);
        ck_assert_uint_eq(t.snapshot_resolve_ms.count, 2);
        ck_assert_int_eq(t.snapshot_resolve_ms.sum_ms, 30);
}
END_TEST

START_TEST(test_prom_counters_total) {
        sg_metrics_snap_t s;
        snap_fill(&s);
        char *t = render(&s);
        int counters = 0;
        for (char *l = t; l && *l;
             l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                char name[256], type[32];
                if (sscanf(l, "# TYPE %255s %31s", name, type) != 2)
                        continue;
                size_t n = strlen(name);
                if (!strcmp(type, "counter")) {
                        counters++;
                        ck_assert_msg(n > 6 && !strcmp(name + n - 6, "_total"),
                                      "counter %s does not end in _total",
                                      name);
                } else {
                        ck_assert_msg(n < 6 || strcmp(name + n - 6, "_total"),
                                      "%s %s ends in _total", type, name);
                }
                ck_assert_msg(!strncmp(name, "seqgate_", 8), "%s", name);
        }
        ck_assert_int_gt(counters, 20);
        free(t);
        sg_metrics_snap_free(&s);
}
END_TEST

START_TEST(test_prom_histogram_cumulative) {
        sg_metrics_snap_t s;
        snap_fill(&s);
        char *t = render(&s);
        HAS(t, "# TYPE seqgate_commit_latency_seconds histogram\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"0.001\"} 0\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"0.005\"} 1\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"0.01\"} 2\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"60\"} 2\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"300\"} 2\n");
        HAS(t, "\nseqgate_commit_latency_seconds_bucket{le=\"+Inf\"} 3\n");
        HAS(t, "\nseqgate_commit_latency_seconds_sum 400.010\n");
        HAS(t, "\nseqgate_commit_latency_seconds_count 3\n");
        /* every histogram's buckets never decrease */
        const char *p = t;
        while ((p = strstr(p, "_bucket{"))) {
                const char *le = strstr(p, "le=\"");
                if (!strncmp(le + 4, "0.001\"", 6)) {
                        unsigned long long prev = 0, v;
                        const char *q = p;
                        for (int i = 0; i <= SG_HIST_BUCKETS; i++) {
                                q = strstr(q, "} ");
                                ck_assert(sscanf(q + 2, "%llu", &v) == 1);
                                ck_assert_uint_ge(v, prev);
                                prev = v;
                                q += 2;
                        }
                }
                p += 8;
        }
        free(t);
        sg_metrics_snap_free(&s);
}
END_TEST

START_TEST(test_prom_partition_labels) {
        sg_metrics_snap_t s;
        snap_fill(&s);
        char *t = render(&s);
        HAS(t, "\nseqgate_consumer_lag{topic=\"orders\",partition=\"0\"} 17\n");
        /* the help says what is measured, in records, and from where */
        HAS(t, "# HELP seqgate_consumer_lag records of the partition a "
               "read_committed consumer can read and seqgate has not "
               "processed: the end it last read to (the last stable offset), "
               "or the high watermark, minus the next offset processed");
        HAS(t, "\nseqgate_oldest_parked_age_seconds{topic=\"orders\","
               "partition=\"0\"} 2.500\n");
        /* escaped: backslash, double quote, newline */
        HAS(t, "\nseqgate_parked_events{topic=\"we\\\"ird\\\\t\\n\","
               "partition=\"3\"} 0\n");
        /* an unknown lag has no sample */
        ck_assert_ptr_null(strstr(t, "seqgate_consumer_lag{topic=\"we"));
        /* the sums the partitions replace are not exported unlabelled */
        ck_assert_ptr_null(strstr(t, "\nseqgate_consumer_lag "));
        ck_assert_ptr_null(strstr(t, "\nseqgate_parked_events "));
        free(t);
        sg_metrics_snap_free(&s);
}
END_TEST

START_TEST(test_prom_escape) {
        char out[64];
        ck_assert_uint_eq(sg_prom_escape("a\"b\\c\nd", out, sizeof(out)), 10);
        ck_assert_str_eq(out, "a\\\"b\\\\c\\nd");
        ck_assert_uint_eq(sg_prom_escape("abcdef", out, 4), 6);
        ck_assert_str_eq(out, "abc");
}
END_TEST

START_TEST(test_prom_passthrough) {
        sg_metrics_snap_t s;
        memset(&s, 0, sizeof(s));
        char *t = render(&s);
        HAS(t, "\nseqgate_batches_total 0\n");
        ck_assert_ptr_null(strstr(t, "seqgate_dedup_hits_total"));
        free(t);
}
END_TEST

/* ---- /healthz, /readyz -------------------------------------------------- */

static int health(sg_pub_t *p, int64_t now, char **body) {
        int st = 0;
        ck_assert_int_eq(sg_pub_health(p, now, &st, body), SG_OK);
        return st;
}

static int ready(sg_pub_t *p, char **body) {
        int st = 0;
        ck_assert_int_eq(sg_pub_ready(p, &st, body), SG_OK);
        return st;
}

START_TEST(test_health) {
        sg_pub_t *p;
        char *b;
        ck_assert_int_eq(sg_pub_new(5000, &p), SG_OK);
        ck_assert_int_eq(health(p, sg_clock_mono_ms(), &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "not started"));
        free(b);
        sg_metrics_snap_t s = {0};
        sg_pub_publish(p, &s);
        int64_t now = sg_clock_mono_ms();
        ck_assert_int_eq(health(p, now, &b), 200);
        ck_assert_str_eq(b, "{\"status\":\"ok\"}\n");
        free(b);
        /* no publish for longer than the stall limit */
        ck_assert_int_eq(health(p, now + 6000, &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "no progress"));
        free(b);
        s.fatal = s.stopped = true;
        snprintf(s.fatal_str, sizeof(s.fatal_str), "fenced");
        sg_pub_publish(p, &s);
        ck_assert_int_eq(health(p, sg_clock_mono_ms(), &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "fatal: fenced"));
        free(b);
        sg_pub_destroy(p);
}
END_TEST

START_TEST(test_ready) {
        sg_pub_t *p;
        char *b;
        ck_assert_int_eq(sg_pub_new(5000, &p), SG_OK);
        sg_metrics_snap_t s = {0};
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "no partitions assigned"));
        ck_assert_ptr_null(strstr(b, "hint"));
        free(b);
        /* awaiting the group's first assignment: why, and how to look */
        s.assign_wait_ms = sg_clock_mono_ms() - 7000;
        s.session_timeout_ms = 45000;
        snprintf(s.group_id, sizeof(s.group_id), "orders-sg");
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_nonnull(
                strstr(b, "\"reason\":\"no partitions assigned\""));
        ck_assert_ptr_nonnull(strstr(b, "\"session_timeout_ms\":45000"));
        ck_assert_ptr_nonnull(strstr(b, "\"group_id\":\"orders-sg\""));
        ck_assert_msg(strstr(b, "waited 7 s") &&
                              strstr(b, "previous member's session to expire "
                                        "(session.timeout.ms 45000)") &&
                              strstr(b, "--describe --group orders-sg"),
                      "%s", b);
        free(b);
        /* its rebalance callback runs (restoring): not waiting any more */
        s.assign_wait_ms = 0;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_null(strstr(b, "hint"));
        free(b);
        /* assigned, one partition restoring */
        s.assigned_once = true;
        ck_assert_int_eq(sg_metrics_snap_reserve(&s, 2), SG_OK);
        memset(s.parts, 0, 2 * sizeof(*s.parts));
        s.part_cnt = 2;
        snprintf(s.parts[0].topic, sizeof(s.parts[0].topic), "orders");
        snprintf(s.parts[1].topic, sizeof(s.parts[1].topic), "orders");
        s.parts[1].partition = 1;
        s.parts[1].restoring = 1;
        s.parts[1].restore_records = 10;
        s.parts[1].restore_target = 40;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_nonnull(
                strstr(b, "\"partitions\":[{\"topic\":\"orders\",\"partition\":"
                          "1,\"state\":\"restoring\",\"restore_records_read\":"
                          "10,\"restore_records_target\":40}]"));
        free(b);
        s.parts[1].restoring = 0;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 200);
        ck_assert_ptr_nonnull(strstr(b, "\"partitions\":2"));
        free(b);
        /* batches failing: one abort is a rebalance's or a broker
         * restart's, two in a row a loop that fails (a full disk) */
        s.loop.batches_aborted_in_a_row = 1;
        snprintf(s.abort_str, sizeof(s.abort_str), "store error: ENOSPC");
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 200);
        free(b);
        s.loop.batches_aborted_in_a_row = 2;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_str_eq(b, "{\"status\":\"not_ready\",\"reason\":\"batches "
                            "aborted: 2 in a row, the last: store error: "
                            "ENOSPC\",\"batches_aborted_in_a_row\":2}\n");
        free(b);
        s.parts[1].restoring = 1; /* and a restore: both said */
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "\"batches_aborted_in_a_row\":2"));
        ck_assert_ptr_nonnull(strstr(b, "\"state\":\"restoring\""));
        free(b);
        s.parts[1].restoring = 0;
        s.loop.batches_aborted_in_a_row = 0;
        s.abort_str[0] = '\0';
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 200);
        free(b);
        /* a member left with zero partitions is ready */
        s.part_cnt = 0;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 200);
        free(b);
        sg_metrics_snap_free(&s);
        sg_pub_destroy(p);
}
END_TEST

/* Standby partitions (semantics §6 "Standby replicas"): listed with their
 * lag in every /readyz answer, not counted as assigned, never a reason for
 * 503 (even "restoring" set by mistake); seqgate_standby_lag has a sample
 * for them only, and their other per-partition gauges (unknown) none. */
START_TEST(test_ready_standbys) {
        sg_pub_t *p;
        char *b;
        ck_assert_int_eq(sg_pub_new(5000, &p), SG_OK);
        sg_metrics_snap_t s = {0};
        s.assigned_once = true;
        ck_assert_int_eq(sg_metrics_snap_reserve(&s, 3), SG_OK);
        memset(s.parts, 0, 3 * sizeof(*s.parts));
        s.part_cnt = 3;
        for (int i = 0; i < 3; i++) {
                snprintf(s.parts[i].topic, sizeof(s.parts[i].topic), "orders");
                s.parts[i].partition = i;
                s.parts[i].consumer_lag = 0;
                s.parts[i].standby_lag = -1;
        }
        for (int i = 1; i < 3; i++) {
                s.parts[i].standby = true;
                s.parts[i].consumer_lag = s.parts[i].parked_events = -1;
                s.parts[i].parked_bytes = s.parts[i].oldest_parked_age_ms = -1;
                s.parts[i].quarantined_aggregates = -1;
                s.parts[i].restore_records = s.parts[i].restore_target = -1;
        }
        s.parts[1].standby_lag = 12;
        s.parts[2].restoring = 1;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 200);
        ck_assert_str_eq(
                b, "{\"status\":\"ready\",\"partitions\":1,\"standbys\":[{"
                   "\"topic\":\"orders\",\"partition\":1,\"standby_lag\":12},"
                   "{\"topic\":\"orders\",\"partition\":2}]}\n");
        free(b);
        char *t = render(&s);
        HAS(t, "\nseqgate_standby_lag{topic=\"orders\",partition=\"1\"} "
               "12\n");
        ck_assert_ptr_null(strstr(t, "seqgate_standby_lag{topic=\"orders\","
                                     "partition=\"0\"}"));
        ck_assert_ptr_null(strstr(t, "seqgate_consumer_lag{topic=\"orders\","
                                     "partition=\"1\"}"));
        free(t);
        /* not ready for a reason of its own: the standbys still listed */
        s.parts[0].restoring = 1;
        sg_pub_publish(p, &s);
        ck_assert_int_eq(ready(p, &b), 503);
        ck_assert_ptr_nonnull(strstr(b, "\"standbys\":[{"));
        free(b);
        sg_metrics_snap_free(&s);
        sg_pub_destroy(p);
}
END_TEST

/* ---- http.address -------------------------------------------------------- */

START_TEST(test_address_parse) {
        sg_http_addr_t a;
        char es[256];
        ck_assert_int_eq(
                sg_http_address_parse("127.0.0.1:9464", &a, es, sizeof(es)),
                SG_OK);
        ck_assert(!a.off);
        ck_assert_str_eq(a.text, "127.0.0.1:9464");
        ck_assert_int_eq(sg_http_address_parse("0.0.0.0:0", &a, es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_address_parse("[::1]:80", &a, es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(a.ss.ss_family, AF_INET6);
        ck_assert_str_eq(a.text, "[::1]:80");
        ck_assert_int_eq(
                sg_http_address_parse("localhost:1", &a, es, sizeof(es)),
                SG_OK);
        ck_assert_str_eq(a.text, "127.0.0.1:1");
        ck_assert_int_eq(sg_http_address_parse("off", &a, es, sizeof(es)),
                         SG_OK);
        ck_assert(a.off);
        ck_assert_int_eq(sg_http_address_parse("", &a, es, sizeof(es)), SG_OK);
        ck_assert(a.off);
        static const char *const bad[] = {
                "9464",         "127.0.0.1",    "127.0.0.1:65536",
                "127.0.0.1:-1", "127.0.0.1:9x", "example.com:80",
                "::1:80",       "[::1]80",      "[nope]:80",
                "127.0.0.1:",   "[::1]:",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(
                        sg_http_address_parse(bad[i], &a, es, sizeof(es)) ==
                                SG_ERR_CONFIG,
                        "%s accepted", bad[i]);
}
END_TEST

START_TEST(test_config_keys_http) {
        char es[4096] = "";
        sg_config_t *c = NULL;
#define BASE                                                                   \
        "{\"data_dir\":\"/tmp/x\",\"kafka\":{\"bootstrap.servers\":"           \
        "\"x:1\",\"group.id\":\"g\"},%s\"topics\":{\"in\":{"                   \
        "\"output_topic\":\"out\",\"dlq_topic\":\"dlq\",\"envelope\":"         \
        "{\"format\":\"json\",\"id\":\"/id\",\"aggregate\":\"key\","           \
        "\"version\":\"/v\"}}}}"
        char text[2048];
        snprintf(text, sizeof(text), BASE, "");
        ck_assert_msg(sg_config_parse(text, &c, es, sizeof(es)) == SG_OK, "%s",
                      es);
        ck_assert_str_eq(c->http_address, "127.0.0.1:9464");
        ck_assert(c->http_read_api);
        ck_assert_int_eq(c->metrics_stuck_threshold_ms, 300000);
        sg_config_destroy(c);
        snprintf(text, sizeof(text), BASE,
                 "\"http\":{\"address\":\"[::]:9000\",\"read_api\":false},"
                 "\"metrics\":{\"stuck_threshold_ms\":60000},");
        ck_assert_msg(sg_config_parse(text, &c, es, sizeof(es)) == SG_OK, "%s",
                      es);
        ck_assert_str_eq(c->http_address, "[::]:9000");
        ck_assert(!c->http_read_api);
        ck_assert_int_eq(c->metrics_stuck_threshold_ms, 60000);
        sg_config_destroy(c);
        snprintf(text, sizeof(text), BASE,
                 "\"http\":{\"address\":\"nohost\"},");
        ck_assert_int_eq(sg_config_parse(text, &c, es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "http.address") != NULL, "%s", es);
        snprintf(text, sizeof(text), BASE, "\"http\":{\"port\":1},");
        ck_assert_int_eq(sg_config_parse(text, &c, es, sizeof(es)),
                         SG_ERR_CONFIG);

        /* TLS and credentials (Prometheus exporter-toolkit's web config) */
#define H60 "$2y$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
#define D64                                                                    \
        "sha256:"                                                              \
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        snprintf(text, sizeof(text), BASE,
                 "\"http\":{\"tls_server_config\":{\"cert_file\":\"/c\","
                 "\"key_file\":\"/k\"},\"basic_auth_users\":{\"prom\":"
                 "\"" H60 "\"},\"bearer_tokens\":{\"grafana\":\"" D64
                 "\"},\"auth_excluded_paths\":[\"/healthz\"]},");
        ck_assert_msg(sg_config_parse(text, &c, es, sizeof(es)) == SG_OK, "%s",
                      es);
        ck_assert_str_eq(c->http_tls_cert_file, "/c");
        ck_assert_str_eq(c->http_tls_key_file, "/k");
        ck_assert_uint_eq(c->http_basic_auth_user_cnt, 1);
        ck_assert_str_eq(c->http_basic_auth_users[0].name, "prom");
        ck_assert_str_eq(c->http_basic_auth_users[0].value, H60);
        ck_assert_uint_eq(c->http_bearer_token_cnt, 1);
        ck_assert_str_eq(c->http_bearer_tokens[0].value, D64);
        ck_assert_uint_eq(c->http_auth_excluded_path_cnt, 1);
        ck_assert_str_eq(c->http_auth_excluded_paths[0], "/healthz");
        sg_config_destroy(c);
        static const char *const bad[][2] = {
                {"\"tls_server_config\":{\"cert_file\":\"/c\"}", "go together"},
                {"\"tls_server_config\":{\"cert\":\"/c\"}", "cert"},
                {"\"basic_auth_users\":{\"prom\":\"secret\"}",
                 "http.basic_auth_users.prom"},
                {"\"basic_auth_users\":{\"a:b\":\"" H60 "\"}", "':'"},
                {"\"bearer_tokens\":{\"g\":\"abc\"}", "http.bearer_tokens.g"},
                {"\"auth_excluded_paths\":[\"healthz\"]",
                 "http.auth_excluded_paths[0]"},
                {"\"auth_excluded_paths\":\"/healthz\"",
                 "http.auth_excluded_paths"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char http[512];
                snprintf(http, sizeof(http), "\"http\":{%s},", bad[i][0]);
                snprintf(text, sizeof(text), BASE, http);
                c = NULL;
                ck_assert_msg(sg_config_parse(text, &c, es, sizeof(es)) ==
                                      SG_ERR_CONFIG,
                              "accepted: %s", bad[i][0]);
                ck_assert_msg(strstr(es, bad[i][1]) != NULL, "%s: %s",
                              bad[i][0], es);
        }
#undef H60
#undef D64
#undef BASE
}
END_TEST

/* ---- the server ---------------------------------------------------------- */

typedef struct got {
        char body[65536];
        size_t len;
        char ctype[128];
        long status;
        char allow[64];
        char www[256]; /**< the WWW-Authenticate headers, joined by " | " */
        char retry_after[16];
        CURLcode rc; /**< fetch_ex(): the transfer's result */
} got_t;

static size_t on_body(char *p, size_t sz, size_t n, void *opaque) {
        got_t *g = opaque;
        size_t len = sz * n;
        if (g->len + len < sizeof(g->body)) {
                memcpy(g->body + g->len, p, len);
                g->len += len;
                g->body[g->len] = '\0';
        }
        return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *opaque) {
        got_t *g = opaque;
        size_t len = sz * n;
        if (len > 7 && !strncasecmp(p, "Allow: ", 7))
                snprintf(g->allow, sizeof(g->allow), "%.*s", (int)(len - 9),
                         p + 7);
        if (len > 18 && !strncasecmp(p, "WWW-Authenticate: ", 18)) {
                size_t used = strlen(g->www);
                snprintf(g->www + used, sizeof(g->www) - used, "%s%.*s",
                         used ? " | " : "", (int)(len - 20), p + 18);
        }
        if (len > 13 && !strncasecmp(p, "Retry-After: ", 13))
                snprintf(g->retry_after, sizeof(g->retry_after), "%.*s",
                         (int)(len - 15), p + 13);
        return len;
}

static void fetch(uint16_t port, const char *method, const char *path,
                  got_t *g) {
        char url[256];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port,
                 path);
        memset(g, 0, sizeof(*g));
        CURL *c = curl_easy_init();
        ck_assert_ptr_nonnull(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, g);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        if (!strcmp(method, "HEAD"))
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else if (strcmp(method, "GET"))
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ct)
                snprintf(g->ctype, sizeof(g->ctype), "%s", ct);
        curl_easy_cleanup(c);
}

/* GET @p path over https (with @p cafile trusted) or http, with header
 * "Authorization: @p auth" unless NULL; g->rc says whether a transfer
 * happened at all. */
static void fetch_ex(uint16_t port, bool https, const char *cafile,
                     const char *auth, const char *path, got_t *g) {
        char url[256], hdr[512];
        snprintf(url, sizeof(url), "%s://127.0.0.1:%u%s",
                 https ? "https" : "http", (unsigned)port, path);
        memset(g, 0, sizeof(*g));
        CURL *c = curl_easy_init();
        ck_assert_ptr_nonnull(c);
        struct curl_slist *h = NULL;
        if (auth) {
                snprintf(hdr, sizeof(hdr), "Authorization: %s", auth);
                h = curl_slist_append(h, hdr);
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        }
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, g);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        if (cafile)
                curl_easy_setopt(c, CURLOPT_CAINFO, cafile);
        g->rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
}

/* "Basic base64(user:pass)" into @p out. */
static const char *basic(const char *user, const char *pass, char *out,
                         size_t size) {
        char up[256];
        unsigned char b64[400];
        int n = snprintf(up, sizeof(up), "%s:%s", user, pass);
        EVP_EncodeBlock(b64, (const unsigned char *)up, n);
        snprintf(out, size, "Basic %s", b64);
        return out;
}

/* /v1/echo: "<path> id=<id arg>" */
static void on_echo(void *opaque, const sg_http_request_t *req,
                    sg_http_response_t *resp) {
        const char *tag = opaque;
        const char *id = sg_http_request_arg(req, "id");
        char buf[512];
        int n = snprintf(buf, sizeof(buf), "%s %s id=%s", tag,
                         sg_http_request_path(req), id ? id : "-");
        resp->status = 200;
        resp->content_type = "text/plain";
        resp->body = strdup(buf);
        resp->body_len = (size_t)n;
}

/* The request deadline server() sets; 0: the default. */
static int64_t g_request_timeout_ms;

/* A publisher (60 s staleness) with snap_fill()'s snapshot @p s published;
 * the caller frees both (sg_pub_destroy, sg_metrics_snap_free). */
static sg_pub_t *pub_filled(sg_metrics_snap_t *s) {
        sg_pub_t *pub;
        ck_assert_int_eq(sg_pub_new(60000, &pub), SG_OK);
        snap_fill(s);
        sg_pub_publish(pub, s);
        return pub;
}

/* A server on 127.0.0.1, its port chosen when it starts; not started. */
static sg_http_t *server_new(bool read_api) {
        sg_http_addr_t a;
        sg_http_t *srv = NULL;
        char es[256];
        ck_assert_int_eq(
                sg_http_address_parse("127.0.0.1:0", &a, es, sizeof(es)),
                SG_OK);
        ck_assert_int_eq(sg_http_new(&a, read_api, &srv, es, sizeof(es)),
                         SG_OK);
        return srv;
}

static sg_http_t *server(bool read_api, sg_pub_t *pub) {
        sg_http_t *srv = server_new(read_api);
        char es[256];
        if (g_request_timeout_ms)
                ck_assert_int_eq(
                        sg_http_set_request_timeout(srv, g_request_timeout_ms,
                                                    es, sizeof(es)),
                        SG_OK);
        ck_assert_int_eq(sg_http_set_request_timeout(srv, 0, es, sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_int_eq(sg_pub_routes_add(pub, srv, "9.9", es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_route_add(srv, "/v1/events", on_echo,
                                           (void *)"events", es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_route_add(srv, "/v1/events/special", on_echo,
                                           (void *)"special", es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_route_add(srv, "/v1/events", on_echo, NULL, es,
                                           sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_int_eq(sg_http_start(srv, es, sizeof(es)), SG_OK);
        ck_assert_uint_gt(sg_http_port(srv), 0);
        ck_assert_int_eq(
                sg_http_route_add(srv, "/late", on_echo, NULL, es, sizeof(es)),
                SG_ERR_INVALID);
        ck_assert_int_eq(sg_http_set_request_timeout(srv, 1000, es, sizeof(es)),
                         SG_ERR_INVALID);
        return srv;
}

START_TEST(test_server_routes) {
        got_t g;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        sg_http_t *srv = server(true, pub);
        uint16_t port = sg_http_port(srv);

        fetch(port, "GET", "/metrics", &g);
        ck_assert_int_eq(g.status, 200);
        ck_assert_ptr_nonnull(strstr(g.ctype, "text/plain; version=0.0.4"));
        ck_assert_ptr_nonnull(strstr(g.body, "\nseqgate_dedup_hits_total{topic="
                                             "\"orders\"} 3\n"));
        ck_assert_ptr_nonnull(
                strstr(g.body, "seqgate_build_info{version=\"9.9\"} 1"));
        fetch(port, "GET", "/healthz", &g);
        ck_assert_int_eq(g.status, 200);
        ck_assert_str_eq(g.ctype, "application/json");
        ck_assert_str_eq(g.body, "{\"status\":\"ok\"}\n");
        fetch(port, "GET", "/readyz", &g);
        ck_assert_int_eq(g.status, 503);
        fetch(port, "HEAD", "/healthz", &g);
        ck_assert_int_eq(g.status, 200);
        ck_assert_uint_eq(g.len, 0);
        fetch(port, "POST", "/metrics", &g);
        ck_assert_int_eq(g.status, 405);
        ck_assert_str_eq(g.allow, "GET, HEAD");
        fetch(port, "DELETE", "/nope", &g);
        ck_assert_int_eq(g.status, 405);
        fetch(port, "GET", "/nope", &g);
        ck_assert_int_eq(g.status, 404);
        fetch(port, "GET", "/metricsx", &g); /* not below /metrics */
        ck_assert_int_eq(g.status, 404);
        fetch(port, "GET", "/v1/events?id=a%20b", &g);
        ck_assert_int_eq(g.status, 200);
        ck_assert_str_eq(g.body, "events /v1/events id=a b");
        fetch(port, "GET", "/v1/events/e-1", &g);
        ck_assert_str_eq(g.body, "events /v1/events/e-1 id=-");
        fetch(port, "GET", "/v1/events/special/x", &g); /* the longest */
        ck_assert_str_eq(g.body, "special /v1/events/special/x id=-");
        /* a path or argument that is not UTF-8 text: 400 before any route
         * sees it (a NUL would cut "e-1%00x" to "e-1") */
        const char *bad[] = {"/v1/events?id=e-1%00x", "/v1/events?id=e-%FF",
                             "/v1/events/e-1%00x", "/v1/events/%C3%28",
                             "/v1/events?id=ok&id=%00"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                fetch(port, "GET", bad[i], &g);
                ck_assert_msg(g.status == 400, "%s: %ld", bad[i], g.status);
                ck_assert_ptr_nonnull(strstr(g.body, "UTF-8"));
        }
        fetch(port, "GET", "/v1/events?id=%C3%A9", &g); /* é is fine */
        ck_assert_int_eq(g.status, 200);
        ck_assert_str_eq(g.body, "events /v1/events id=\xc3\xa9");
        sg_http_destroy(srv);

        /* read_api false: nothing under /v1/ */
        srv = server(false, pub);
        fetch(sg_http_port(srv), "GET", "/v1/events", &g);
        ck_assert_int_eq(g.status, 404);
        fetch(sg_http_port(srv), "GET", "/metrics", &g);
        ck_assert_int_eq(g.status, 200);
        sg_http_destroy(srv);
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
}
END_TEST

START_TEST(test_server_port_in_use) {
        sg_pub_t *pub;
        ck_assert_int_eq(sg_pub_new(60000, &pub), SG_OK);
        sg_http_t *srv = server(true, pub);
        char text[64], es[256];
        snprintf(text, sizeof(text), "127.0.0.1:%u",
                 (unsigned)sg_http_port(srv));
        sg_http_addr_t a;
        sg_http_t *two = NULL;
        ck_assert_int_eq(sg_http_address_parse(text, &a, es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_new(&a, true, &two, es, sizeof(es)), SG_OK);
        ck_assert_int_eq(sg_http_start(two, es, sizeof(es)), SG_ERR_IO);
        ck_assert_msg(strstr(es, text) != NULL, "%s", es);
        /* the probe (--check-config) sees it too, and takes nothing */
        es[0] = '\0';
        ck_assert_int_eq(sg_http_address_probe(&a, es, sizeof(es)), SG_ERR_IO);
        ck_assert_int_eq(errno, EADDRINUSE);
        ck_assert_msg(strstr(es, text) && strstr(es, "http.address"), "%s", es);
        sg_http_destroy(two);
        sg_http_destroy(srv);
        /* the port once free: the probe passes and leaves it free */
        ck_assert_int_eq(sg_http_address_probe(&a, es, sizeof(es)), SG_OK);
        ck_assert_int_eq(sg_http_new(&a, true, &two, es, sizeof(es)), SG_OK);
        ck_assert_int_eq(sg_http_start(two, es, sizeof(es)), SG_OK);
        sg_http_destroy(two);
        ck_assert_int_eq(sg_http_address_parse("off", &a, es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_http_address_probe(&a, es, sizeof(es)), SG_OK);
        sg_pub_destroy(pub);
}
END_TEST

/* Connections that never finish their request, all from one peer
 * (127.0.0.2), must not lock the probes out for another (127.0.0.1): a
 * peer on the pod network could otherwise fail the liveness probe and
 * have the pod restarted, restore and all (docs/operating.md "HTTP endpoint").
 * */
START_TEST(test_server_idle_peer_cannot_lock_out_probes) {
        got_t g;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        sg_http_t *srv = server(true, pub);
        uint16_t port = sg_http_port(srv);
        enum { IDLE = 80 };
        int fds[IDLE];
        for (int i = 0; i < IDLE; i++) {
                fds[i] = socket(AF_INET, SOCK_STREAM, 0);
                ck_assert_int_ge(fds[i], 0);
                struct sockaddr_in src = {.sin_family = AF_INET};
                inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
                ck_assert_int_eq(
                        bind(fds[i], (struct sockaddr *)&src, sizeof(src)), 0);
                struct sockaddr_in dst = {.sin_family = AF_INET,
                                          .sin_port = htons(port)};
                inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
                /* refused once the per-peer limit is reached: fine */
                if (connect(fds[i], (struct sockaddr *)&dst, sizeof(dst)) == 0)
                        (void)!write(fds[i], "GET /metrics HTTP/1.1\r\n", 23);
        }
        tu_sleep_ms(200); /* the server has accepted what it accepts */
        fetch(port, "GET", "/healthz", &g);
        ck_assert_int_eq(g.status, 200);
        for (int i = 0; i < IDLE; i++)
                close(fds[i]);
        sg_http_destroy(srv);
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
}
END_TEST

/* ---- hostile requests ------------------------------------------------- */

/** Sends @p req (len bytes; NULL: nothing) on a new connection to @p port
 *  and reads the answer until the server closes or @p wait_ms pass;
 *  returns the status of its status line (0: none) and copies up to
 *  @p size - 1 bytes of the answer into @p out. */
static int raw_request(uint16_t port, const char *req, size_t len, int wait_ms,
                       char *out, size_t size) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in dst = {.sin_family = AF_INET,
                                  .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
        struct timeval tv = {.tv_sec = wait_ms / 1000,
                             .tv_usec = (wait_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        for (size_t off = 0; req && off < len;) {
                ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
                if (w <= 0)
                        break; /* the server answered and closed early */
                off += (size_t)w;
        }
        size_t got = 0;
        for (;;) {
                ssize_t r = recv(fd, out + got, size - 1 - got, 0);
                if (r <= 0)
                        break;
                got += (size_t)r;
                if (got == size - 1)
                        break;
        }
        out[got] = '\0';
        close(fd);
        int status = 0;
        if (sscanf(out, "HTTP/1.%*d %d", &status) != 1)
                status = 0;
        return status;
}

/* What an attacker may send to the endpoint (docs/operating.md "HTTP endpoint"):
 * each is refused with a 4xx before a route sees it, never answered as if
 * it were another request, and the server answers the next request. */
START_TEST(test_server_hostile_requests) {
        got_t g;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        sg_http_t *srv = server(true, pub);
        uint16_t port = sg_http_port(srv);

        /* a malformed %-escape: not taken literally ("e-1%zz" is no id
         * anybody meant) */
        const char *bad[] = {"/v1/events?id=e-1%zz", "/v1/events?id=e-1%2",
                             "/v1/events?id=%",      "/v1/events/%G1",
                             "/v1/events?i%d=x",     "/v1/events?id=a%%20"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                fetch(port, "GET", bad[i], &g);
                ck_assert_msg(g.status == 400, "%s: %ld %s", bad[i], g.status,
                              g.body);
                ck_assert_msg(strstr(g.body, "escape") != NULL, "%s: %s",
                              bad[i], g.body);
        }
        fetch(port, "GET", "/v1/events?id=a%2Fb%2fc", &g); /* both cases */
        ck_assert_int_eq(g.status, 200);
        ck_assert_str_eq(g.body, "events /v1/events id=a/b/c");

        /* a very long URL, a very long header, many headers: refused
         * (414 / 431) within the connection's memory, then closed */
        enum { BIG = 200000 };
        char *req = malloc(BIG + 256), ans[4096];
        ck_assert_ptr_nonnull(req);
        int n = snprintf(req, 64, "GET /v1/events?id=");
        memset(req + n, 'a', BIG);
        n += BIG;
        n += snprintf(req + n, 64, " HTTP/1.1\r\nHost: x\r\n\r\n");
        int st = raw_request(port, req, (size_t)n, 5000, ans, sizeof(ans));
        ck_assert_msg(st == 414, "long URL: %d %.200s", st, ans);
        n = snprintf(req, 64, "GET /healthz HTTP/1.1\r\nX-Long: ");
        memset(req + n, 'b', BIG);
        n += BIG;
        n += snprintf(req + n, 64, "\r\nHost: x\r\n\r\n");
        st = raw_request(port, req, (size_t)n, 5000, ans, sizeof(ans));
        ck_assert_msg(st == 431, "long header: %d %.200s", st, ans);
        n = snprintf(req, 64, "GET /healthz HTTP/1.1\r\n");
        while (n < BIG)
                n += snprintf(req + n, 64, "X-H%d: v\r\n", n);
        n += snprintf(req + n, 64, "Host: x\r\n\r\n");
        st = raw_request(port, req, (size_t)n, 5000, ans, sizeof(ans));
        ck_assert_msg(st == 431, "many headers: %d %.200s", st, ans);
        free(req);

        /* a request line that is not HTTP: 400 */
        const char junk[] = "GARBAGE\r\n\r\n";
        st = raw_request(port, junk, sizeof(junk) - 1, 5000, ans, sizeof(ans));
        ck_assert_msg(st == 400 || st == 0, "junk: %d %.200s", st, ans);

        fetch(port, "GET", "/healthz", &g); /* and the server still serves */
        ck_assert_int_eq(g.status, 200);
        sg_http_destroy(srv);
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
}
END_TEST

/* A client that sends its request a byte at a time, each byte within the
 * idle timeout, holds a connection for as long as it likes unless the
 * request as a whole has a deadline: with 32 such connections per peer
 * address, a few peers would hold all 512 (docs/operating.md "HTTP endpoint"). The
 * deadline is 1 s here (10 s by default). */
START_TEST(test_server_slow_client_is_cut) {
        got_t g;
        g_request_timeout_ms = 1000;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        sg_http_t *srv = server(true, pub);
        uint16_t port = sg_http_port(srv);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in dst = {.sin_family = AF_INET,
                                  .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
        const char head[] = "GET /healthz HTTP/1.1\r\nX-Slow: ";
        ck_assert_int_eq(send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL),
                         (ssize_t)sizeof(head) - 1);
        int64_t t0 = sg_clock_mono_ms(), cut_ms = -1;
        while (sg_clock_mono_ms() - t0 < 6000) {
                tu_sleep_ms(100);
                if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
                        cut_ms = sg_clock_mono_ms() - t0;
                        break;
                }
                char c;
                ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
                if (r == 0 ||
                    (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                        cut_ms = sg_clock_mono_ms() - t0;
                        break;
                }
                ck_assert_msg(r < 0, "the server answered a request it "
                                     "never received whole");
        }
        close(fd);
        ck_assert_msg(cut_ms >= 0, "a request trickling for 6 s was not cut");
        ck_assert_msg(cut_ms >= 500 && cut_ms < 4000, "cut after %lld ms",
                      (long long)cut_ms);
        fetch(port, "GET", "/healthz", &g); /* others are served */
        ck_assert_int_eq(g.status, 200);
        sg_http_destroy(srv);
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
}
END_TEST

/* ---- TLS and credentials ------------------------------------------------ */

/* A self-signed certificate for IP 127.0.0.1 (its own CA) and its P-256
 * key: PEM files cert.pem and key.pem in @p dir. */
static void make_cert(const char *dir, char *cert, char *key, size_t size) {
        snprintf(cert, size, "%s/cert.pem", dir);
        snprintf(key, size, "%s/key.pem", dir);
        EVP_PKEY *pk = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        ck_assert(pk && x);
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), -60);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_set_pubkey(x, pk);
        X509_NAME *n = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                   (const unsigned char *)"seqgate test", -1,
                                   -1, 0);
        X509_set_issuer_name(x, n);
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        const char *exts[][2] = {{"subjectAltName", "IP:127.0.0.1"},
                                 {"basicConstraints", "critical,CA:TRUE"}};
        for (size_t i = 0; i < 2; i++) {
                X509_EXTENSION *e =
                        X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);
                ck_assert_ptr_nonnull(e);
                X509_add_ext(x, e, -1);
                X509_EXTENSION_free(e);
        }
        ck_assert_int_gt(X509_sign(x, pk, EVP_sha256()), 0);
        FILE *fc = fopen(cert, "w"), *fk = fopen(key, "w");
        ck_assert(fc && fk);
        ck_assert_int_eq(PEM_write_X509(fc, x), 1);
        ck_assert_int_eq(
                PEM_write_PrivateKey(fk, pk, NULL, NULL, 0, NULL, NULL), 1);
        fclose(fc);
        fclose(fk);
        X509_free(x);
        EVP_PKEY_free(pk);
}

/* HTTPS with tls_server_config: a client that trusts the certificate is
 * served; plain HTTP to the same port is not; a file that cannot be read
 * is an error naming it. */
START_TEST(test_server_tls) {
        char dir[64], cert[128], key[128], es[256];
        tu_tmpdir(dir, sizeof(dir), "http_tls");
        make_cert(dir, cert, key, sizeof(cert));
        got_t g;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        sg_http_t *srv = server_new(true);
        ck_assert_int_eq(
                sg_http_tls_set(srv, "/nonexistent/c.pem", key, es, sizeof(es)),
                SG_ERR_IO);
        ck_assert_msg(strstr(es, "/nonexistent/c.pem") != NULL, "%s", es);
        ck_assert_int_eq(sg_http_tls_set(srv, cert, key, es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(sg_pub_routes_add(pub, srv, "9.9", es, sizeof(es)),
                         SG_OK);
        ck_assert_msg(sg_http_start(srv, es, sizeof(es)) == SG_OK, "%s", es);
        uint16_t port = sg_http_port(srv);
        fetch_ex(port, true, cert, NULL, "/healthz", &g);
        ck_assert_msg(g.rc == CURLE_OK, "%s", curl_easy_strerror(g.rc));
        ck_assert_int_eq(g.status, 200);
        ck_assert_str_eq(g.body, "{\"status\":\"ok\"}\n");
        fetch_ex(port, false, NULL, NULL, "/healthz", &g); /* plain HTTP */
        ck_assert_msg(g.rc != CURLE_OK || g.status != 200, "plain HTTP: %ld",
                      g.status);
        fetch_ex(port, true, NULL, NULL, "/healthz", &g); /* untrusted */
        ck_assert_int_ne(g.rc, CURLE_OK);
        sg_http_destroy(srv);
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
        tu_rmrf(dir);
}
END_TEST

#define PASSWORD "correct horse battery staple"
#define TOKEN "tok-5b3e0c9a1f7d4e2b8c6a9f0e1d2c3b4a"

/* A bcrypt hash (cost 4: the fastest, for the test) of @p pw. */
static void bcrypt_of(const char *pw, char *out, size_t size) {
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        struct crypt_data cd;
        memset(&cd, 0, sizeof(cd));
        ck_assert_ptr_nonnull(
                crypt_gensalt_rn("$2y$", 4, NULL, 0, salt, sizeof(salt)));
        const char *h = crypt_rn(pw, salt, &cd, sizeof(cd));
        ck_assert(h && h[0] == '$');
        snprintf(out, size, "%s", h);
}

/* "sha256:<hex>" of @p token. */
static void token_digest(const char *token, char *out, size_t size) {
        unsigned char d[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)token, strlen(token), d);
        int n = snprintf(out, size, "sha256:");
        for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
                n += snprintf(out + n, size - (size_t)n, "%02x", d[i]);
}

/* basic_auth_users and bearer_tokens: /v1/ needs credentials, the probes
 * and the scrape do not (unless auth_excluded_paths says otherwise);
 * wrong or missing credentials are 401 with both challenges; password
 * checks beyond SG_HTTP_BCRYPT_PER_S a second are 429, not run. */
START_TEST(test_server_auth) {
        char hash[128], digest[80], es[256], hdr[512];
        bcrypt_of(PASSWORD, hash, sizeof(hash));
        ck_assert(sg_http_bcrypt_hash_ok(hash));
        ck_assert(!sg_http_bcrypt_hash_ok("$2y$03$abc"));
        ck_assert(!sg_http_bcrypt_hash_ok(PASSWORD));
        token_digest(TOKEN, digest, sizeof(digest));
        ck_assert(sg_http_token_hash_ok(digest));
        ck_assert(!sg_http_token_hash_ok("sha256:abc"));
        got_t g;
        sg_metrics_snap_t s;
        sg_pub_t *pub = pub_filled(&s);
        for (int round = 0; round < 2; round++) {
                sg_http_t *srv = server_new(true);
                ck_assert_int_eq(
                        sg_http_user_add(srv, "prom", hash, es, sizeof(es)),
                        SG_OK);
                ck_assert_int_eq(
                        sg_http_user_add(srv, "a:b", hash, es, sizeof(es)),
                        SG_ERR_INVALID);
                ck_assert_int_eq(sg_http_token_add(srv, "grafana", digest, es,
                                                   sizeof(es)),
                                 SG_OK);
                if (round == 1) /* only /healthz goes without */
                        ck_assert_int_eq(sg_http_auth_exclude(srv, "/healthz",
                                                              es, sizeof(es)),
                                         SG_OK);
                ck_assert_int_eq(
                        sg_pub_routes_add(pub, srv, "9.9", es, sizeof(es)),
                        SG_OK);
                ck_assert_int_eq(sg_http_route_add(srv, "/v1/events", on_echo,
                                                   (void *)"events", es,
                                                   sizeof(es)),
                                 SG_OK);
                ck_assert_int_eq(sg_http_start(srv, es, sizeof(es)), SG_OK);
                uint16_t port = sg_http_port(srv);

                fetch_ex(port, false, NULL, NULL, "/v1/events?id=e1", &g);
                ck_assert_int_eq(g.status, 401);
                ck_assert_msg(strstr(g.www, "Basic realm=\"seqgate\"") &&
                                      strstr(g.www, "Bearer"),
                              "%s", g.www);
                ck_assert_ptr_null(strstr(g.body, "e1"));
                fetch_ex(port, false, NULL,
                         basic("prom", PASSWORD, hdr, sizeof(hdr)),
                         "/v1/events?id=e1", &g);
                ck_assert_int_eq(g.status, 200);
                ck_assert_str_eq(g.body, "events /v1/events id=e1");
                fetch_ex(port, false, NULL,
                         basic("prom", "wrong", hdr, sizeof(hdr)), "/v1/events",
                         &g);
                ck_assert_int_eq(g.status, 401);
                fetch_ex(port, false, NULL,
                         basic("nobody", PASSWORD, hdr, sizeof(hdr)),
                         "/v1/events", &g);
                ck_assert_int_eq(g.status, 401);
                fetch_ex(port, false, NULL, "Bearer " TOKEN, "/v1/events", &g);
                ck_assert_int_eq(g.status, 200);
                fetch_ex(port, false, NULL, "Bearer " TOKEN "x", "/v1/events",
                         &g);
                ck_assert_int_eq(g.status, 401);
                fetch_ex(port, false, NULL, "Basic !!!", "/v1/events", &g);
                ck_assert_int_eq(g.status, 401);
                fetch_ex(port, false, NULL, NULL, "/healthz", &g);
                ck_assert_int_eq(g.status, 200);
                fetch_ex(port, false, NULL, NULL, "/metrics", &g);
                ck_assert_int_eq(g.status, round == 0 ? 200 : 401);

                if (round == 1) {
                        /* a burst of guesses: each one a bcrypt unless
                         * throttled; the right password, once checked, is
                         * cached and served through the throttle */
                        int ok = 0, denied = 0, throttled = 0;
                        int64_t t0 = sg_clock_mono_ms();
                        for (int i = 0; i < 24; i++) {
                                char pw[32];
                                snprintf(pw, sizeof(pw), "guess-%d", i);
                                fetch_ex(port, false, NULL,
                                         basic("prom", pw, hdr, sizeof(hdr)),
                                         "/v1/events", &g);
                                denied += g.status == 401;
                                throttled += g.status == 429;
                                if (g.status == 429)
                                        ck_assert_str_eq(g.retry_after, "1");
                        }
                        double secs = (double)(sg_clock_mono_ms() - t0) / 1e3;
                        ck_assert_int_eq(denied + throttled, 24);
                        /* the bucket: 4 at once, 4 more each second */
                        ck_assert_msg(denied <= 4 + 4 * secs + 1,
                                      "%d bcrypt checks in %.2f s", denied,
                                      secs);
                        fetch_ex(port, false, NULL,
                                 basic("prom", PASSWORD, hdr, sizeof(hdr)),
                                 "/v1/events", &g);
                        ok += g.status == 200;
                        ck_assert_int_eq(ok, 1);
                }
                sg_http_destroy(srv);
        }
        sg_pub_destroy(pub);
        sg_metrics_snap_free(&s);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("http");
        TCase *tp = tcase_create("prometheus");
        tcase_add_test(tp, test_prom_seed_names);
        tcase_add_test(tp, test_prom_per_topic);
        tcase_add_test(tp, test_metrics_sum);
        tcase_add_test(tp, test_prom_counters_total);
        tcase_add_test(tp, test_prom_histogram_cumulative);
        tcase_add_test(tp, test_prom_partition_labels);
        tcase_add_test(tp, test_prom_escape);
        tcase_add_test(tp, test_prom_passthrough);
        suite_add_tcase(s, tp);
        TCase *th = tcase_create("health");
        tcase_add_test(th, test_health);
        tcase_add_test(th, test_ready);
        tcase_add_test(th, test_ready_standbys);
        tcase_add_test(th, test_address_parse);
        tcase_add_test(th, test_config_keys_http);
        suite_add_tcase(s, th);
        TCase *ts = tcase_create("server");
        tcase_add_test(ts, test_server_routes);
        tcase_add_test(ts, test_server_port_in_use);
        tcase_add_test(ts, test_server_idle_peer_cannot_lock_out_probes);
        tcase_add_test(ts, test_server_hostile_requests);
        tcase_add_test(ts, test_server_slow_client_is_cut);
        tcase_add_test(ts, test_server_tls);
        tcase_add_test(ts, test_server_auth);
        suite_add_tcase(s, ts);
        return s;
}

int main(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = tu_run_suite(suite());
        curl_global_cleanup();
        return rc;
}
