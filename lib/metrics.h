/*
 * metrics.h — the counters operators watch (semantics §7; the seed's
 * dedup_hits, idempotency_parameter_conflicts, stuck_processing_over_5m,
 * stale_version_rejections, event_sequence_gaps).
 *
 * Counters (_total) only ever grow and count committed batches only: the
 * engine keeps a batch-local delta and adds it at batch_commit, so an aborted
 * and re-read batch is not counted twice. Gauges are sampled.
 *
 * Thread-safety: plain integers, written by the processing thread; another
 * thread may read them for a stats line (a torn read of one 64-bit aligned
 * counter does not happen on the platforms seqgate supports).
 */
#ifndef SEQGATE_METRICS_H
#define SEQGATE_METRICS_H

#include "metrics_list.h"
#include "seqgate.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** DLQ reason codes (semantics §3, §4). Stable strings: sg_reason_name(). */
typedef enum sg_reason {
        SG_R_NONE = 0,
        SG_R_MALFORMED,
        SG_R_IDEMPOTENCY_CONFLICT,
        SG_R_AGGREGATE_QUARANTINED,
        SG_R_STALE_VERSION,
        SG_R_ILLEGAL_TRANSITION,
        SG_R_UNKNOWN_EVENT_TYPE,
        SG_R_VERSION_JUMP,
        SG_R_GAP_TIMEOUT,
        SG_R_PARK_OVERFLOW,
        SG_R_VERSION_CONFLICT, /**< row 8b: another event holds the version */
        SG_R_OUTPUT_REJECTED,  /**< Kafka cannot take the output record (too
                                   large once seqgate's headers are added,
                                   or refused as invalid; semantics §3) */
        SG_R_FENCED_EPOCH,     /**< an event of an epoch below the
                                   aggregate's (semantics §4b) */
        SG_R__CNT
} sg_reason_t;

/** "malformed", "idempotency_conflict", ... ; "" for SG_R_NONE. */
const char *sg_reason_name(sg_reason_t r);

/** Engine metrics; the fields and their help are in metrics_list.h. */
typedef struct sg_metrics {
        SG_ENGINE_METRICS_HEAD(SG_METRIC_FIELD)
        uint64_t dlq_total[SG_R__CNT]; /**< DLQ records by reason */
        SG_ENGINE_METRICS_TAIL(SG_METRIC_FIELD)
} sg_metrics_t;

/** Counts one observation of @p ms milliseconds (negative: 0) into @p h:
 *  the first bucket whose bound (SG_HIST_BOUNDS_MS) is >= @p ms, or only
 *  count and sum above the last bound. Thread-safety: the caller's. */
void sg_hist_observe(sg_hist_t *h, int64_t ms);

/** Adds every bucket, the count and the sum of @p d to @p h. */
void sg_hist_merge(sg_hist_t *h, const sg_hist_t *d);

/** Bound @p i (0 .. SG_HIST_BUCKETS-1) of SG_HIST_BOUNDS_MS, milliseconds;
 *  INT64_MAX outside. */
int64_t sg_hist_bound_ms(int i);

/** One assigned (or standby) input partition's numbers for /metrics and /readyz
 *  (metrics_pub.h): the fields and their help are in metrics_list.h
 *  (SG_PART_METRICS); the loop fills lag and restore, the engine the rest
 *  (sg_engine_part_gauges()). */
typedef struct sg_part_stats {
        char topic[256]; /**< Kafka topic names have at most 249 bytes */
        int32_t partition;
        bool standby; /**< a standby partition, not assigned (semantics §6
                           "Standby replicas"): only standby_lag is set */
        SG_PART_METRICS(SG_METRIC_FIELD)
} sg_part_stats_t;

/** Adds every counter of @p delta to @p m (gauges are copied). */
void sg_metrics_add(sg_metrics_t *m, const sg_metrics_t *delta);

/**
 * Adds one input topic's metrics @p m into the sum over topics @p total
 * (metrics_list.h): counters, gauges and histograms add up, a _MS gauge
 * (an age, a threshold) takes the largest, snapshot_resolve_ms_last is
 * @p m's when set and snapshot_resolve_ms_max the largest. Start from a
 * zeroed @p total. Thread-safety: the caller's.
 */
void sg_metrics_sum(sg_metrics_t *total, const sg_metrics_t *m);

/** One configured input topic's engine metrics, for /metrics (label
 *  topic; metrics_pub.h). */
typedef struct sg_topic_stats {
        char topic[256]; /**< Kafka topic names have at most 249 bytes */
        sg_metrics_t m;
} sg_topic_stats_t;

/**
 * Writes @p m as JSON object members (no braces), e.g.
 * "\"applied_total\":3,\"dlq_total\":{\"stale_version\":1},...",
 * into @p buf. Returns the length that was (or would have been) written, as
 * snprintf does.
 */
int sg_metrics_json(const sg_metrics_t *m, char *buf, size_t size);

struct sg_loop_stats;

/**
 * Writes @p s (kafka.h) as JSON object members (no braces), in the order
 * of SG_LOOP_STATS (metrics_list.h), into @p buf. Returns the length that
 * was (or would have been) written, as snprintf does. Thread-safety:
 * reentrant.
 */
int sg_loop_stats_json(const struct sg_loop_stats *s, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_METRICS_H */
