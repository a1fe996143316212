/*
 * metrics_list.h — every counter and gauge of seqgate, one row each (an
 * X-macro list): the rows generate the fields of sg_metrics_t (metrics.h)
 * and sg_loop_stats_t (kafka.h), the merge of a batch's engine delta
 * (sg_metrics_add()) and the stats line (sg_metrics_json(),
 * sg_loop_stats_json()), in row order. Adding a metric is one row here.
 *
 * A row is X(name, KIND, "help"). KIND:
 *   COUNTER  uint64_t, only grows; merged by adding. Its Prometheus name is
 *            seqgate_<name> (the names already end in _total).
 *   GAUGE    int64_t, sampled; merged by copying. Prometheus seqgate_<name>.
 *   LATEST   int64_t, a gauge merged by hand (sg_metrics_add(): kept from
 *            the last batch that set it).
 * SG_METRIC_TYPE_<KIND> is the C type, SG_METRIC_PROM_<KIND> the
 * Prometheus metric type.
 *
 * Rules (semantics §7, §3 rows, §4 gaps, §6 guarantees) are stated by the
 * code that counts; the help text says what is counted.
 */
#ifndef SEQGATE_METRICS_LIST_H
#define SEQGATE_METRICS_LIST_H

#include <stdint.h>

#define SG_METRIC_TYPE_COUNTER uint64_t
#define SG_METRIC_TYPE_GAUGE int64_t
#define SG_METRIC_TYPE_LATEST int64_t
#define SG_METRIC_PROM_COUNTER "counter"
#define SG_METRIC_PROM_GAUGE "gauge"
#define SG_METRIC_PROM_LATEST "gauge"

/** A struct field for a row. */
#define SG_METRIC_FIELD(name, kind, help) SG_METRIC_TYPE_##kind name;

/* Engine metrics (sg_metrics_t) before dlq_total[] (DLQ records by reason,
 * an array: its sum and its rows by reason are written by hand). */
#define SG_ENGINE_METRICS_HEAD(X)                                              \
        X(records_total, COUNTER, "records judged")                            \
        X(applied_total, COUNTER, "records emitted to the output topic")       \
        X(dedup_hits_total, COUNTER, "duplicates (decision row 2)")            \
        X(idempotency_parameter_conflicts_total, COUNTER,                      \
          "same idempotency key, other payload (row 3)")                       \
        X(malformed_total, COUNTER, "malformed records (row 1)")               \
        X(stale_version_rejections_total, COUNTER,                             \
          "stale versions, dead-lettered or dropped (row 5)")                  \
        X(illegal_transitions_total, COUNTER,                                  \
          "illegal transitions and unknown event types (row 7)")               \
        X(event_sequence_gaps_total, COUNTER,                                  \
          "new gaps (row 8), and latest_wins gaps")                            \
        X(parked_total, COUNTER, "records parked")                             \
        X(gap_timeouts_total, COUNTER, "aggregates whose gap deadline fired")  \
        X(skipped_versions_total, COUNTER,                                     \
          "versions given up by gap_policy skip")                              \
        X(park_overflow_total, COUNTER, "parking caps reached (pause or DLQ)") \
        X(fenced_epoch_total, COUNTER, "events of a lower epoch (§4b)")        \
        X(dedup_expired_total, COUNTER,                                        \
          "dedup records removed by the TTL sweep")

/* Engine metrics after dlq_total[]. */
#define SG_ENGINE_METRICS_TAIL(X)                                              \
        X(snapshot_requests_total, COUNTER,                                    \
          "snapshot requests sent (retries included)")                         \
        X(snapshot_applied_total, COUNTER,                                     \
          "snapshot replies applied (S >= L)")                                 \
        X(snapshot_late_total, COUNTER,                                        \
          "snapshot replies with S < L, ignored")                              \
        X(snapshot_ignored_total, COUNTER,                                     \
          "replies to an unknown request, or for an aggregate that no "        \
          "longer waits")                                                      \
        X(snapshot_timeouts_total, COUNTER,                                    \
          "snapshot attempts without a reply in time")                         \
        X(snapshot_failures_total, COUNTER,                                    \
          "failed snapshot attempts (HTTP error, refused, bad body, no "       \
          "version)")                                                          \
        X(snapshot_gave_up_total, COUNTER,                                     \
          "aggregates handed to the gap policy after max_attempts")            \
        X(snapshot_superseded_total, COUNTER,                                  \
          "parked events at or below a version a snapshot or a release "       \
          "moved L to: dropped")                                               \
        X(snapshot_resolve_ms_last, LATEST,                                    \
          "first snapshot request to applied, last one, milliseconds")         \
        X(snapshot_resolve_ms_max, LATEST,                                     \
          "first snapshot request to applied, longest, milliseconds")          \
        X(snapshot_in_flight, GAUGE, "snapshot requests sent, unanswered")     \
        X(releases_total, COUNTER,                                             \
          "operator releases applied (seqgatectl release)")                    \
        X(control_ignored_total, COUNTER,                                      \
          "control records refused (logged as control_refused)")               \
        X(parked_events, GAUGE, "parked now (assigned partitions)")            \
        X(parked_bytes, GAUGE, "parked bytes now (assigned partitions)")       \
        X(quarantined_aggregates, GAUGE,                                       \
          "quarantined now (assigned partitions)")                             \
        X(stuck_parked_over_5m, GAUGE,                                         \
          "aggregates parked over 5 minutes (capped count)")                   \
        X(oldest_parked_age_ms, GAUGE,                                         \
          "age of the oldest parked event, milliseconds; 0 none")

/* Kafka loop stats (sg_loop_stats_t): committed batches, and gauges. */
#define SG_LOOP_STATS(X)                                                       \
        X(batches_total, COUNTER, "committed batches")                         \
        X(batches_aborted_total, COUNTER, "batches aborted and re-read")       \
        X(records_in_total, COUNTER, "input records in committed batches")     \
        X(records_out_total, COUNTER, "output and DLQ records delivered")      \
        X(delivery_failures_total, COUNTER, "output deliveries that failed")   \
        X(map_grows_total, COUNTER, "LMDB map size increases")                 \
        X(rebalances_total, COUNTER, "consumer group rebalances")              \
        X(pauses_total, COUNTER, "partitions paused by back-pressure")         \
        X(commit_latency_ms_last, GAUGE,                                       \
          "produce to offsets committed, last batch, milliseconds")            \
        X(commit_latency_ms_max, GAUGE,                                        \
          "produce to offsets committed, longest, milliseconds")               \
        X(assigned_partitions, GAUGE, "partitions assigned now")               \
        X(paused_partitions, GAUGE, "partitions paused now")                   \
        X(consumer_lag, GAUGE, "sum over assigned partitions; -1 unknown")     \
        X(snapshot_http_in_flight, GAUGE,                                      \
          "HTTP snapshot GETs started and not completed (0 without an "        \
          "http snapshot source)")                                             \
        X(transactions_total, COUNTER,                                         \
          "Kafka transactions committed (exactly_once)")                       \
        X(transactions_aborted_total, COUNTER,                                 \
          "Kafka transactions aborted, their batch re-read (exactly_once)")    \
        X(restored_records_total, COUNTER,                                     \
          "changelog records applied by restores")                             \
        X(restore_ms_last, GAUGE, "wall time of the last restore, milliseconds")

#endif /* SEQGATE_METRICS_LIST_H */
