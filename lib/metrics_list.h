/*
 * metrics_list.h — every counter, gauge and histogram of seqgate, one row
 * each (an X-macro list): the rows generate the fields of sg_metrics_t
 * (metrics.h), sg_loop_stats_t (kafka.h) and sg_part_stats_t (metrics.h),
 * the merge of a batch's engine delta (sg_metrics_add()), the stats line
 * (sg_metrics_json(), sg_loop_stats_json()) and the Prometheus exposition
 * of /metrics (sg_metrics_prom(), metrics_prom.c), in row order. Adding a
 * metric is one row here.
 *
 * A row is X(name, KIND, "prom", "help"):
 *   name  the C field and its stats-line JSON member;
 *   prom  its Prometheus name without the "seqgate_" prefix; "" when the
 *         row is not exported as one number (a sum over partitions that
 *         /metrics exports per partition, SG_PART_METRICS);
 *   help  what is counted: the # HELP text.
 * KIND:
 *   COUNTER   uint64_t, only grows; merged by adding. Prometheus counter
 *             (the names end in _total).
 *   GAUGE     int64_t, sampled; merged by copying. Prometheus gauge.
 *   GAUGE_MS  a GAUGE in milliseconds, exported in seconds (÷ 1000).
 *   LATEST    int64_t, a gauge merged by hand (sg_metrics_add(): kept from
 *             the last batch that set it).
 *   LATEST_MS a LATEST in milliseconds, exported in seconds.
 *             (The help of a _MS row names the stats line's unit, ms;
 *             the Prometheus name says seconds.)
 *   HIST      sg_hist_t, observations in milliseconds into the fixed
 *             bounds SG_HIST_BOUNDS_MS; merged by adding. Prometheus
 *             histogram in seconds (_bucket{le}, _sum, _count); not in
 *             the stats line (that line stays as it was).
 * SG_METRIC_TYPE_<KIND> is the C type, SG_METRIC_PROM_<KIND> the
 * Prometheus metric type.
 *
 * The engine's rows (SG_ENGINE_METRICS_HEAD, DLQ records by reason,
 * SG_ENGINE_METRICS_TAIL) are kept per configured input topic: /metrics
 * exports them with the label topic (one sample per input topic; DLQ
 * records with the labels topic and reason), and the stats line writes
 * their sum over the topics (sg_metrics_sum(): a COUNTER, a GAUGE and a
 * HIST add up; a GAUGE_MS — an age, a threshold — takes the largest; the
 * LATEST rows by hand). SG_METRIC_ALIASES exports some of them under a
 * second name too.
 *
 * Rules (semantics §7, §3 rows, §4 gaps, §6 guarantees) are stated by the
 * code that counts; the help text says what is counted.
 */
#ifndef SEQGATE_METRICS_LIST_H
#define SEQGATE_METRICS_LIST_H

#include <stdint.h>

/** Upper bounds (le) of every histogram's buckets, milliseconds; +Inf is
 *  implied. Chosen for batch durations and commit latencies (a few ms to
 *  seconds) and snapshot resolve times (up to minutes of retries): 1 ms,
 *  5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5, 10, 30, 60, 300 s. */
#define SG_HIST_BOUNDS_MS                                                      \
        {                                                                      \
                1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,      \
                        30000, 60000, 300000                                   \
        }
#define SG_HIST_BUCKETS 15

/** A histogram: per bucket the observations <= its bound (not cumulative;
 *  the exposition adds them up), plus the count and the sum. */
typedef struct sg_hist {
        uint64_t bucket[SG_HIST_BUCKETS]; /**< observations in (prev, le] */
        uint64_t count;                   /**< all observations (+Inf) */
        int64_t sum_ms;                   /**< their sum, milliseconds */
} sg_hist_t;

#define SG_METRIC_TYPE_COUNTER uint64_t
#define SG_METRIC_TYPE_GAUGE int64_t
#define SG_METRIC_TYPE_GAUGE_MS int64_t
#define SG_METRIC_TYPE_LATEST int64_t
#define SG_METRIC_TYPE_LATEST_MS int64_t
#define SG_METRIC_TYPE_HIST sg_hist_t
#define SG_METRIC_PROM_COUNTER "counter"
#define SG_METRIC_PROM_GAUGE "gauge"
#define SG_METRIC_PROM_GAUGE_MS "gauge"
#define SG_METRIC_PROM_LATEST "gauge"
#define SG_METRIC_PROM_LATEST_MS "gauge"
#define SG_METRIC_PROM_HIST "histogram"

/** A struct field for a row. */
#define SG_METRIC_FIELD(name, kind, prom, help) SG_METRIC_TYPE_##kind name;

/* Engine metrics (sg_metrics_t) before dlq_total[] (DLQ records by reason,
 * an array: its sum and its rows by reason are written by hand). */
#define SG_ENGINE_METRICS_HEAD(X)                                              \
        X(records_total, COUNTER, "records_total", "records judged")           \
        X(applied_total, COUNTER, "applied_total",                             \
          "records emitted to the output topic")                               \
        X(dedup_hits_total, COUNTER, "dedup_hits_total",                       \
          "duplicates (decision row 2)")                                       \
        X(idempotency_parameter_conflicts_total, COUNTER,                      \
          "idempotency_parameter_conflicts_total",                             \
          "same idempotency key, other payload (row 3)")                       \
        X(malformed_total, COUNTER, "malformed_total",                         \
          "malformed records (row 1)")                                         \
        X(stale_version_rejections_total, COUNTER,                             \
          "stale_version_rejections_total",                                    \
          "stale versions, dead-lettered or dropped (row 5)")                  \
        X(illegal_transitions_total, COUNTER, "illegal_transitions_total",     \
          "illegal transitions and unknown event types (row 7)")               \
        X(event_sequence_gaps_total, COUNTER, "event_sequence_gaps_total",     \
          "new gaps (row 8), and latest_wins gaps")                            \
        X(parked_total, COUNTER, "parked_total", "records parked")             \
        X(gap_timeouts_total, COUNTER, "gap_timeouts_total",                   \
          "aggregates whose gap deadline fired")                               \
        X(skipped_versions_total, COUNTER, "skipped_versions_total",           \
          "versions given up by gap_policy skip")                              \
        X(park_overflow_total, COUNTER, "park_overflow_total",                 \
          "parking caps reached (pause or DLQ)")                               \
        X(fenced_epoch_total, COUNTER, "fenced_epoch_total",                   \
          "events of a lower epoch (semantics 4b)")                            \
        X(dedup_expired_total, COUNTER, "dedup_expired_total",                 \
          "expired dedup records removed (a changelog tombstone each)")        \
        X(aggregate_not_record_key_total, COUNTER,                             \
          "aggregate_not_record_key_total",                                    \
          "records whose aggregate, read from the value or a header, is not "  \
          "their record key (semantics 2, co-partitioning)")                   \
        X(aggregate_on_two_partitions_total, COUNTER,                          \
          "aggregate_on_two_partitions_total",                                 \
          "records whose aggregate this instance saw on another partition "    \
          "of the topic (semantics 2, co-partitioning)")                       \
        X(checkpoints_total, COUNTER, "",                                      \
          "store checkpoints: LMDB write transactions committed, each "        \
          "holding the batches since the one before (semantics 6); the "       \
          "store's, not a topic's: seqgate_checkpoints_total has no topic")    \
        X(checkpoint_ms, HIST, "",                                             \
          "one checkpoint's LMDB commit and the start of its writeback")

/* Engine metrics after dlq_total[]. */
#define SG_ENGINE_METRICS_TAIL(X)                                              \
        X(snapshot_requests_total, COUNTER, "snapshot_requests_total",         \
          "snapshot requests sent (retries included)")                         \
        X(snapshot_applied_total, COUNTER, "snapshot_applied_total",           \
          "snapshot replies applied (S >= L)")                                 \
        X(snapshot_late_total, COUNTER, "snapshot_late_total",                 \
          "snapshot replies with S < L, ignored")                              \
        X(snapshot_ignored_total, COUNTER, "snapshot_ignored_total",           \
          "replies to an unknown request, or for an aggregate that no "        \
          "longer waits")                                                      \
        X(snapshot_timeouts_total, COUNTER, "snapshot_timeouts_total",         \
          "snapshot attempts without a reply in time")                         \
        X(snapshot_failures_total, COUNTER, "snapshot_failures_total",         \
          "failed snapshot attempts (HTTP error, refused, bad body, no "       \
          "version)")                                                          \
        X(snapshot_gave_up_total, COUNTER, "snapshot_gave_up_total",           \
          "aggregates handed to the gap policy after max_attempts")            \
        X(snapshot_superseded_total, COUNTER, "snapshot_superseded_total",     \
          "parked events at or below a version a snapshot or a release "       \
          "moved L to: dropped")                                               \
        X(snapshot_resolve_ms_last, LATEST_MS,                                 \
          "snapshot_resolve_seconds_last",                                     \
          "first snapshot request to applied, last one (ms in the stats "      \
          "line)")                                                             \
        X(snapshot_resolve_ms_max, LATEST_MS, "snapshot_resolve_seconds_max",  \
          "first snapshot request to applied, longest (ms in the stats line)") \
        X(snapshot_resolve_ms, HIST, "snapshot_resolve_seconds",               \
          "first snapshot request to applied")                                 \
        X(snapshot_in_flight, GAUGE, "snapshot_in_flight",                     \
          "snapshot requests sent, unanswered")                                \
        X(releases_total, COUNTER, "releases_total",                           \
          "operator releases applied (seqgatectl release)")                    \
        X(control_ignored_total, COUNTER, "control_ignored_total",             \
          "control records refused (logged as control_refused)")               \
        X(parked_events, GAUGE, "", "parked now (assigned partitions)")        \
        X(parked_bytes, GAUGE, "", "parked bytes now (assigned partitions)")   \
        X(quarantined_aggregates, GAUGE, "",                                   \
          "quarantined now (assigned partitions)")                             \
        X(stuck_parked, GAUGE, "stuck_processing",                             \
          "aggregates parked or refetching longer than the stuck threshold "   \
          "(stuck_threshold_seconds; capped count)")                           \
        X(stuck_threshold_ms, GAUGE_MS, "stuck_threshold_seconds",             \
          "the stuck threshold (the configuration's metrics block): how "      \
          "long an aggregate waits before it counts in stuck_processing (ms "  \
          "in the stats line)")                                                \
        X(oldest_parked_age_ms, GAUGE_MS, "",                                  \
          "age of the oldest parked event, milliseconds; 0 none")

/* Engine rows exported under a second Prometheus name as well, the same
 * samples: the seed's names, kept for the dashboards and alerts that use
 * them. X(prom alias, prom of the row, "help"). */
#define SG_METRIC_ALIASES(X)                                                   \
        X("stuck_processing_over_5m", "stuck_processing",                      \
          "seqgate_stuck_processing under its first name, whatever the "       \
          "stuck threshold is (5 minutes by default): use "                    \
          "seqgate_stuck_processing")

/* Kafka loop stats (sg_loop_stats_t): committed batches, and gauges. */
#define SG_LOOP_STATS(X)                                                       \
        X(batches_total, COUNTER, "batches_total", "committed batches")        \
        X(batches_aborted_total, COUNTER, "batches_aborted_total",             \
          "batches aborted and re-read")                                       \
        X(batches_aborted_in_a_row, GAUGE, "batches_aborted_in_a_row",         \
          "batches aborted one after another since a batch with records "      \
          "last committed (or the assignment changed); /readyz is 503 from "   \
          "2")                                                                 \
        X(records_in_total, COUNTER, "records_in_total",                       \
          "input records in committed batches")                                \
        X(records_out_total, COUNTER, "records_out_total",                     \
          "output and DLQ records delivered")                                  \
        X(delivery_failures_total, COUNTER, "delivery_failures_total",         \
          "output deliveries that failed")                                     \
        X(map_grows_total, COUNTER, "map_grows_total",                         \
          "LMDB map size increases")                                           \
        X(rebalances_total, COUNTER, "rebalances_total",                       \
          "consumer group rebalances")                                         \
        X(pauses_total, COUNTER, "pauses_total",                               \
          "partitions paused by back-pressure")                                \
        X(commit_latency_ms_last, GAUGE_MS, "commit_latency_seconds_last",     \
          "produce to offsets committed, last batch (ms in the stats line)")   \
        X(commit_latency_ms_max, GAUGE_MS, "commit_latency_seconds_max",       \
          "produce to offsets committed, longest (ms in the stats line)")      \
        X(commit_latency_ms, HIST, "commit_latency_seconds",                   \
          "produce to offsets or transaction committed, per batch; idle "      \
          "polls not observed")                                                \
        X(batch_duration_ms, HIST, "batch_duration_seconds",                   \
          "a committed batch, first attempt to its commit; idle polls not "    \
          "observed")                                                          \
        X(assigned_partitions, GAUGE, "assigned_partitions",                   \
          "partitions assigned now")                                           \
        X(paused_partitions, GAUGE, "paused_partitions",                       \
          "partitions paused now")                                             \
        X(kafka_impaired_ms, GAUGE_MS, "kafka_impaired_seconds",               \
          "how long the loop has met broker errors without making progress "   \
          "(0: it is not; kafka_recovered ends it): a broker outage shows "    \
          "here while partitions are assigned or not (ms in the stats line)")  \
        X(consumer_lag, GAUGE, "",                                             \
          "records not yet processed, summed over the assigned partitions "    \
          "(each one's consumer_lag); null when unknown")                      \
        X(snapshot_http_in_flight, GAUGE, "snapshot_http_in_flight",           \
          "HTTP snapshot GETs started and not completed (0 without an "        \
          "http snapshot source)")                                             \
        X(transactions_total, COUNTER, "transactions_total",                   \
          "Kafka transactions committed (exactly_once)")                       \
        X(transactions_aborted_total, COUNTER, "transactions_aborted_total",   \
          "Kafka transactions aborted, their batch re-read (exactly_once)")    \
        X(restored_records_total, COUNTER, "restored_records_total",           \
          "changelog records applied by restores")                             \
        X(takeover_fences_total, COUNTER, "takeover_fences_total",             \
          "open transactions of a dead owner that a new owner ended by "       \
          "fencing its transactional id (exactly_once)")                       \
        X(checkpoints_lost_total, COUNTER, "checkpoints_lost_total",           \
          "store transactions lost with batches in them (a failed batch or "   \
          "checkpoint): their partitions restored from the changelog")         \
        X(restore_ms_last, GAUGE_MS, "restore_seconds_last",                   \
          "wall time of the last restore (ms in the stats line)")

/* Per assigned input partition (sg_part_stats_t, metrics.h): exported
 * with the labels topic and partition; the loop's and the engine's sums
 * over partitions (prom "" above) are these added up. */
#define SG_PART_METRICS(X)                                                     \
        X(consumer_lag, GAUGE, "consumer_lag",                                 \
          "records of the partition a read_committed consumer can read and "   \
          "seqgate has not processed: the end it last read to (the last "      \
          "stable offset), or the high watermark, minus the next offset "      \
          "processed (the latest of the one committed, the store's and the "   \
          "one reading started at; past transaction markers); no sample "      \
          "when unknown")                                                      \
        X(parked_events, GAUGE, "parked_events", "parked now")                 \
        X(parked_bytes, GAUGE, "parked_bytes", "parked bytes now")             \
        X(oldest_parked_age_ms, GAUGE_MS, "oldest_parked_age_seconds",         \
          "age of the oldest parked or refetching event; 0 none")              \
        X(quarantined_aggregates, GAUGE, "quarantined_aggregates",             \
          "quarantined aggregates now")                                        \
        X(restoring, GAUGE, "partition_restoring",                             \
          "1 while the changelog restore of the partition runs or is due")     \
        X(restore_records, GAUGE, "restore_records_read",                      \
          "changelog records read by the partition's current or last restore") \
        X(restore_target, GAUGE, "restore_records_target",                     \
          "changelog offsets the current or last restore had to read "         \
          "(high watermark minus its start; compaction makes records fewer)")  \
        X(standby_lag, GAUGE, "standby_lag",                                   \
          "a partition this instance is standby for (standby_replicas): its "  \
          "changelog's high watermark minus the offset its store is "          \
          "checkpointed at, what a failover here would restore; no sample "    \
          "for an assigned partition")

/* The store and the process (sg_metrics_snap_t, metrics_pub.h). */
#define SG_PROCESS_METRICS(X)                                                  \
        X(store_used_bytes, GAUGE, "store_used_bytes",                         \
          "LMDB pages in use, bytes")                                          \
        X(store_map_size_bytes, GAUGE, "store_map_size_bytes",                 \
          "LMDB map size, bytes")                                              \
        X(store_entries, GAUGE, "store_entries",                               \
          "LMDB entries in every database (all partitions)")                   \
        X(checkpoints_total, COUNTER, "checkpoints_total",                     \
          "store checkpoints: LMDB write transactions committed, each "        \
          "holding the batches since the one before (semantics 6)")            \
        X(checkpoint_ms, HIST, "checkpoint_seconds",                           \
          "one checkpoint's LMDB commit and the start of its writeback")       \
        X(start_time_seconds, GAUGE, "process_start_time_seconds",             \
          "start time of the process since the Unix epoch, seconds")

#endif /* SEQGATE_METRICS_LIST_H */
