/*
 * dlqread.c — reading a DLQ topic (dlqread.h), shared by replay and dlq.
 */
#include "dlqread.h"

#include "cli.h"

#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool dlq_hdr_str(rd_kafka_headers_t *h, const char *name, char *buf,
                 size_t size) {
        const void *v;
        size_t n;
        if (!h || rd_kafka_header_get_last(h, name, &v, &n) != 0 || !v ||
            n >= size)
                return false;
        memcpy(buf, v, n);
        buf[n] = '\0';
        return true;
}

/* The DLQ reader: an unjoined consumer (kafka_conf). Returns 0 or
 * EXIT_USAGE (its configuration). */
static int reader_consumer(dlq_reader_t *r, const sg_config_t *conf) {
        char es[512];
        rd_kafka_conf_t *kc = kafka_conf(conf, false, NULL);
        if (!kc)
                return EXIT_USAGE;
        if (!(r->cons = kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es)))) {
                rd_kafka_conf_destroy(kc);
                errf("kafka consumer: %s", es);
                return EXIT_USAGE;
        }
        return 0;
}

/* The first offset of partition @p p at or after timestamp @p ms (@p hi
 * when there is none). */
static int offset_for_time(dlq_reader_t *r, int32_t p, int64_t ms, int64_t hi,
                           int timeout_ms, int64_t *out) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, r->topic, p)->offset = ms;
        rd_kafka_resp_err_t kerr =
                rd_kafka_offsets_for_times(r->cons, l, timeout_ms);
        if (!kerr)
                kerr = l->elems[0].err;
        int64_t off = l->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(l);
        if (kerr) {
                errf("DLQ %s/%" PRId32 ": offset for a time: %s", r->topic, p,
                     rd_kafka_err2str(kerr));
                return EXIT_RUNTIME;
        }
        *out = off < 0 ? hi : off;
        return 0;
}

/* The plan: every partition of the topic (or rg->partition) with the
 * offsets [start, end) to read, and the assignment of those with anything
 * to read. */
static int reader_plan(dlq_reader_t *r, const dlq_range_t *rg) {
        /* the caller's bound on every broker answer (an unreachable
         * broker fails the command after it) */
        const int meta_timeout =
                rg->timeout_ms > 0 && rg->timeout_ms < INT32_MAX
                        ? (int)rg->timeout_ms
                        : 10000;
        r->rkt = rd_kafka_topic_new(r->cons, r->topic, NULL);
        rd_kafka_resp_err_t kerr =
                rd_kafka_metadata(r->cons, 0, r->rkt, &r->md, meta_timeout);
        if (kerr) {
                /* the error callback runs where the client is polled: a
                 * refused login says so instead of a transport failure,
                 * and is the operator's to fix (exit 2) */
                rd_kafka_poll(r->cons, 0);
                bool login = !strncmp(g_kafka_error, "_AUTHENTICATION", 15);
                errf("DLQ topic %s: metadata: %s%s%s", r->topic,
                     rd_kafka_err2str(kerr),
                     g_kafka_error[0] ? "; last error: " : "", g_kafka_error);
                return login ? EXIT_USAGE : EXIT_RUNTIME;
        }
        if (r->md->topic_cnt != 1 || r->md->topics[0].err) {
                errf("DLQ topic %s: %s", r->topic,
                     r->md->topic_cnt ? rd_kafka_err2str(r->md->topics[0].err)
                                      : "not in the metadata");
                return EXIT_RUNTIME;
        }
        const struct rd_kafka_metadata_topic *mt = &r->md->topics[0];
        r->parts = calloc((size_t)mt->partition_cnt + 1, sizeof(*r->parts));
        r->assign = rd_kafka_topic_partition_list_new(mt->partition_cnt + 1);
        if (!r->parts || !r->assign) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        bool found = rg->partition < 0;
        for (int i = 0; i < mt->partition_cnt; i++) {
                int32_t p = mt->partitions[i].id;
                if (rg->partition >= 0 && p != rg->partition)
                        continue;
                found = true;
                int64_t lo, hi;
                kerr = rd_kafka_query_watermark_offsets(r->cons, r->topic, p,
                                                        &lo, &hi, meta_timeout);
                if (kerr) {
                        errf("DLQ %s/%" PRId32 ": end offsets: %s", r->topic, p,
                             rd_kafka_err2str(kerr));
                        return EXIT_RUNTIME;
                }
                /* The end is fixed now: records dead-lettered again while
                 * this runs are not read (no replay loop), unless
                 * following. */
                dlq_part_t *dp = &r->parts[r->part_cnt++];
                dp->partition = p;
                dp->start = rg->from > lo ? rg->from : lo;
                dp->end = rg->until >= 0 && rg->until < hi ? rg->until : hi;
                int64_t t;
                int rc;
                if (rg->from_ms >= 0) {
                        if ((rc = offset_for_time(r, p, rg->from_ms, hi,
                                                  meta_timeout, &t)))
                                return rc;
                        if (t > dp->start)
                                dp->start = t;
                }
                if (rg->until_ms >= 0) {
                        if ((rc = offset_for_time(r, p, rg->until_ms, hi,
                                                  meta_timeout, &t)))
                                return rc;
                        if (t < dp->end)
                                dp->end = t;
                }
                if (rg->last_n >= 0 && dp->end - rg->last_n > dp->start)
                        dp->start = dp->end - rg->last_n;
                if (rg->follow)
                        dp->end = INT64_MAX;
                dp->done = dp->start >= dp->end;
                dp->next = dp->start;
                if (!dp->done) {
                        rd_kafka_topic_partition_list_add(r->assign, r->topic,
                                                          p)
                                ->offset = dp->start;
                        r->open_cnt++;
                }
        }
        if (!found) {
                errf("DLQ topic %s has no partition %" PRId64, r->topic,
                     rg->partition);
                return EXIT_USAGE;
        }
        return 0;
}

int dlq_reader_open(dlq_reader_t *r, const sg_config_t *conf, const char *topic,
                    const dlq_range_t *rg) {
        r->topic = topic;
        r->follow = rg->follow;
        int rc = reader_consumer(r, conf);
        if (!rc)
                rc = reader_plan(r, rg);
        rd_kafka_resp_err_t kerr;
        if (!rc && r->open_cnt &&
            (kerr = rd_kafka_assign(r->cons, r->assign))) {
                errf("assign %s: %s", topic, rd_kafka_err2str(kerr));
                rc = EXIT_RUNTIME;
        }
        return rc;
}

/* The planned partition of that number, NULL if none. */
static dlq_part_t *reader_part(dlq_reader_t *r, int32_t partition) {
        dlq_part_t *dp = NULL;
        for (size_t i = 0; i < r->part_cnt; i++)
                if (r->parts[i].partition == partition)
                        dp = &r->parts[i];
        return dp;
}

/* A planned partition is read to its end (dp NULL or done: nothing). */
static void reader_part_done(dlq_reader_t *r, dlq_part_t *dp) {
        if (dp && !dp->done) {
                dp->done = true;
                r->open_cnt--;
        }
}

int dlq_reader_run(dlq_reader_t *r, int64_t timeout_ms,
                   void (*between)(void *opaque), dlq_record_fn *fn,
                   void *opaque, volatile sig_atomic_t *stopp) {
        struct timespec last;
        clock_gettime(CLOCK_MONOTONIC, &last);
        bool stop = false;
        while ((r->open_cnt || r->follow) && !stop && !g_fatal &&
               !(stopp && *stopp)) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(r->cons, 100);
                if (between)
                        between(opaque);
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (!m) {
                        int64_t idle = (now.tv_sec - last.tv_sec) * 1000 +
                                       (now.tv_nsec - last.tv_nsec) / 1000000;
                        if (!r->follow && idle > timeout_ms) {
                                errf("no progress reading %s for %" PRId64
                                     " ms%s%s",
                                     r->topic, timeout_ms,
                                     g_kafka_error[0] ? "; last error: " : "",
                                     g_kafka_error);
                                return EXIT_RUNTIME;
                        }
                        continue;
                }
                last = now;
                dlq_part_t *dp = reader_part(r, m->partition);
                if (m->err) {
                        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                /* At the end (read_committed: at the last
                                 * stable offset). */
                                if (!r->follow)
                                        reader_part_done(r, dp);
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        if (m->err ==
                            RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
                                /* the reader's group is never joined
                                 * (librdkafka 2.0.2 wants one for assign())
                                 * and needs no ACL: its coordinator lookup
                                 * failing for want of one costs nothing */
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        errf("reading %s/%" PRId32 ": %s", r->topic,
                             m->partition, rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        return EXIT_RUNTIME;
                }
                if (!dp || dp->done || m->offset >= dp->end) {
                        reader_part_done(r, dp);
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (m->offset + 1 >= dp->end)
                        reader_part_done(r, dp);
                dp->next = m->offset + 1;
                int rc = fn(opaque, m, &stop);
                rd_kafka_message_destroy(m);
                if (rc)
                        return rc;
        }
        if (g_fatal) {
                errf("kafka %s", g_kafka_error);
                return EXIT_RUNTIME;
        }
        return 0;
}

int dlq_reader_follow(dlq_reader_t *r) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)r->part_cnt + 1);
        for (size_t i = 0; i < r->part_cnt; i++) {
                dlq_part_t *dp = &r->parts[i];
                dp->end = INT64_MAX;
                dp->done = false;
                rd_kafka_topic_partition_list_add(l, r->topic, dp->partition)
                        ->offset = dp->next;
        }
        r->open_cnt = r->part_cnt;
        r->follow = true;
        rd_kafka_resp_err_t kerr = rd_kafka_assign(r->cons, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (kerr) {
                errf("assign %s: %s", r->topic, rd_kafka_err2str(kerr));
                return EXIT_RUNTIME;
        }
        return 0;
}

void dlq_reader_close(dlq_reader_t *r) {
        if (r->md)
                rd_kafka_metadata_destroy(r->md);
        if (r->rkt)
                rd_kafka_topic_destroy(r->rkt);
        if (r->assign)
                rd_kafka_topic_partition_list_destroy(r->assign);
        free(r->parts);
        if (r->cons) {
                rd_kafka_consumer_close(r->cons);
                rd_kafka_destroy(r->cons);
        }
        memset(r, 0, sizeof(*r));
}
