/*
 * kafka_stats.c — what the Kafka loop reports of itself (kafka.h "Logs",
 * metrics.h): each partition's consumer lag, the sampled gauges (assigned,
 * paused, lag, impairment, HTTP transfers in flight), the stats callback
 * every stats_interval_ms, and the snapshot it publishes for the HTTP
 * thread (sg_loop_publish, metrics_pub.h). It reads the loop's state and
 * changes none of it but the gauges.
 */
#include "kafka_int.h"
#include "metrics_pub.h" /* sg_metrics_snap_t, SG_PUB_INTERVAL_MS */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/**
 * The records of partition @p p not yet processed (semantics §7
 * consumer_lag), -1 when not known: the end a read_committed consumer can
 * read to minus the next offset processed.
 *
 * The next offset processed: the later of the offset seqgate committed to
 * the group, the store's (durable: at_least_once's group commit has it
 * ahead of the group's) and the offset the partition started at (the
 * restored store's may be ahead of a group offset a crash left behind);
 * and the consumer's position @p pos when every record the consumer handed
 * over (seen) is processed: what lies between is no record — a
 * transaction's commit or abort marker, or aborted records, which
 * librdkafka steps over without handing them to the application. Before
 * anything is known, the position.
 *
 * The end: where the consumer last reported reading to the end (EOF, at
 * the partition's last stable offset), if no record came since; else the
 * high watermark @p hi (-1: not known), which counts the records of a
 * transaction still open upstream.
 */
static int64_t part_lag(const sg_part_t *p, int64_t pos, int64_t hi) {
        int64_t done = p->committed;
        if (p->durable > done)
                done = p->durable;
        if (p->start > done)
                done = p->start;
        if (pos >= 0 && (done < 0 || (pos > done && p->seen <= done)))
                done = pos;
        int64_t end = p->eof >= 0 ? p->eof : hi;
        if (done < 0 || end < 0)
                return -1;
        return end > done ? end - done : 0;
}

/** The sampled gauges of the stats line and the HTTP endpoint: partitions
 *  assigned and paused, and the consumer lag (the sum, and each
 *  partition's in part.lag; part_lag()). */
static void loop_gauges(sg_loop_t *loop) {
        sg_loop_stats_t *s = &loop->stats;
        int64_t assigned = 0, paused = 0, lag = 0;
        bool lag_known = true;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->part_cnt ? loop->part_cnt : 1));
        for (size_t i = 0; i < loop->part_cnt; i++) {
                loop->parts[i].lag = -1;
                if (!loop->parts[i].assigned)
                        continue;
                assigned++;
                if (loop->parts[i].paused_until)
                        paused++;
                rd_kafka_topic_partition_list_add(l, loop->parts[i].topic,
                                                  loop->parts[i].partition);
        }
        if (l->cnt > 0 && loop->consumer)
                rd_kafka_position(loop->consumer, l);
        for (int i = 0; i < l->cnt; i++) {
                int64_t lo, hi = -1;
                size_t pi = sg_loop_part(loop, l->elems[i].topic,
                                         l->elems[i].partition);
                if (rd_kafka_get_watermark_offsets(
                            loop->consumer, l->elems[i].topic,
                            l->elems[i].partition, &lo, &hi) != 0)
                        hi = -1;
                int64_t n = part_lag(&loop->parts[pi], l->elems[i].offset, hi);
                if (n < 0) {
                        lag_known = false;
                        continue;
                }
                lag += n;
                loop->parts[pi].lag = n;
        }
        rd_kafka_topic_partition_list_destroy(l);
        s->assigned_partitions = assigned;
        s->paused_partitions = paused;
        /* a broker outage shows even when the group took every partition
         * away (a session that expired during it): readiness and lag
         * cannot say so then */
        s->kafka_impaired_ms =
                loop->impaired_ms ? sg_clock_mono_ms() - loop->impaired_ms : 0;
        s->consumer_lag = lag_known ? lag : -1;
        s->snapshot_http_in_flight =
                (int64_t)sg_snapshot_http_in_flight(loop->http);
}

void sg_loop_stats_emit(sg_loop_t *loop) {
        loop_gauges(loop);
        if (loop->restorer) {
                /* idle between restores: serve its logs and errors */
                rd_kafka_message_t *m =
                        rd_kafka_consumer_poll(loop->restorer, 0);
                if (m)
                        rd_kafka_message_destroy(m);
        }
        if (loop->stats_cb)
                loop->stats_cb(loop->stats_opaque, &loop->stats);
}

/* The stats callback, when stats_interval_ms passed since the last. */
void sg_loop_stats_due(sg_loop_t *loop) {
        if (loop->conf->stats_interval_ms > 0 &&
            sg_clock_mono_ms() >= loop->next_stats_ms) {
                sg_loop_stats_emit(loop);
                loop->next_stats_ms =
                        sg_clock_mono_ms() + loop->conf->stats_interval_ms;
        }
}

void sg_loop_set_publish(sg_loop_t *loop, sg_loop_publish_cb *cb,
                         void *opaque) {
        loop->publish_cb = cb;
        loop->publish_opaque = opaque;
}

void sg_loop_restore_outcome(sg_loop_t *loop, sg_err_t err, const char *es) {
        bool was = loop->restore_failing;
        loop->restore_failing = err != SG_OK;
        snprintf(loop->restore_str, sizeof(loop->restore_str), "%s",
                 err ? (es && es[0] ? es : sg_err2str(err)) : "");
        if (err || was)
                sg_loop_publish(loop, true);
}

void sg_loop_publish(sg_loop_t *loop, bool force) {
        if (!loop->publish_cb)
                return;
        int64_t now = sg_clock_mono_ms();
        if (!force && now - loop->published_ms < SG_PUB_INTERVAL_MS)
                return;
        if (!loop->pub_snap &&
            !(loop->pub_snap = calloc(1, sizeof(*loop->pub_snap))))
                return;
        loop->published_ms = now;
        loop_gauges(loop);
        sg_metrics_snap_t *snap = loop->pub_snap;
        snap->loop = loop->stats;
        snap->assigned_once = loop->assigned_once;
        snap->assign_wait_ms = loop->assign_wait_ms;
        snap->session_timeout_ms = loop->session_timeout_ms;
        snprintf(snap->group_id, sizeof(snap->group_id), "%s",
                 loop->conf->group_id ? loop->conf->group_id : "");
        snap->stopped = loop->run_ended;
        snap->fatal = loop->fatal != SG_OK;
        snprintf(snap->fatal_str, sizeof(snap->fatal_str), "%s",
                 snap->fatal ? loop->fatal_str : "");
        snprintf(snap->abort_str, sizeof(snap->abort_str), "%s",
                 loop->stats.batches_aborted_in_a_row ? loop->abort_str : "");
        snap->restore_failing = loop->restore_failing;
        snprintf(snap->restore_str, sizeof(snap->restore_str), "%s",
                 loop->restore_failing ? loop->restore_str : "");
        snap->part_cnt = 0;
        for (size_t i = 0; i < loop->part_cnt; i++) {
                const sg_part_t *p = &loop->parts[i];
                if (!p->assigned || !sg_config_topic(loop->conf, p->topic) ||
                    sg_metrics_snap_reserve(snap, snap->part_cnt + 1))
                        continue;
                sg_part_stats_t *o = &snap->parts[snap->part_cnt++];
                memset(o, 0, sizeof(*o));
                snprintf(o->topic, sizeof(o->topic), "%s", p->topic);
                o->partition = p->partition;
                o->consumer_lag = p->lag;
                o->restoring = p->restoring || p->restore;
                o->restore_records = p->restore_records;
                o->restore_target = p->restore_target;
                o->standby_lag = -1;
        }
        sg_loop_standby_publish(loop, snap);
        loop->publish_cb(loop->publish_opaque, snap);
}
