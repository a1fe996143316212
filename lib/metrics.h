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

#include "seqgate.h"

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
        SG_R_OUTPUT_REJECTED, /**< Kafka cannot take the output record (too
                                   large once seqgate's headers are added,
                                   or refused as invalid; semantics §3) */
        SG_R__CNT
} sg_reason_t;

/** "malformed", "idempotency_conflict", ... ; "" for SG_R_NONE. */
const char *sg_reason_name(sg_reason_t r);

typedef struct sg_metrics {
        uint64_t records_total;          /**< records judged */
        uint64_t applied_total;          /**< records emitted to the output topic */
        uint64_t dedup_hits_total;       /**< row 2 */
        uint64_t idempotency_parameter_conflicts_total; /**< row 3 */
        uint64_t malformed_total;        /**< row 1 */
        uint64_t stale_version_rejections_total; /**< row 5 (DLQ or drop) */
        uint64_t illegal_transitions_total; /**< row 7 (both reasons) */
        uint64_t event_sequence_gaps_total; /**< row 8, a new gap; latest_wins gaps */
        uint64_t parked_total;           /**< records parked */
        uint64_t gap_timeouts_total;     /**< aggregates whose gap deadline fired */
        uint64_t skipped_versions_total; /**< versions given up by gap_policy skip */
        uint64_t park_overflow_total;    /**< cap reached (pause or DLQ) */
        uint64_t dedup_expired_total;    /**< dedup records removed by the TTL sweep */
        uint64_t dlq_total[SG_R__CNT];   /**< DLQ records by reason */
        /* snapshot refetch (semantics §4) */
        uint64_t snapshot_requests_total;  /**< requests sent (retries included) */
        uint64_t snapshot_applied_total;   /**< replies applied (S >= L) */
        uint64_t snapshot_late_total;      /**< replies with S < L, ignored */
        uint64_t snapshot_ignored_total;   /**< unknown request id, or the
                                                aggregate no longer waits */
        uint64_t snapshot_timeouts_total;  /**< attempts without a reply in time */
        uint64_t snapshot_failures_total;  /**< failed attempts (HTTP error,
                                                refused, bad body, no version) */
        uint64_t snapshot_gave_up_total;   /**< aggregates handed to the gap
                                                policy after max_attempts */
        uint64_t snapshot_superseded_total;/**< parked events at or below a
                                                version a snapshot or a
                                                release moved L to: dropped */
        uint64_t releases_total;           /**< operator releases applied
                                                (seqgatectl release) */
        uint64_t control_ignored_total;    /**< control records refused
                                                (unknown aggregate, bad body,
                                                version below L, unknown
                                                state, ...; logged as
                                                control_refused) */
        int64_t snapshot_resolve_ms_last;  /**< first request → applied */
        int64_t snapshot_resolve_ms_max;
        int64_t snapshot_in_flight;        /**< gauge: sent, unanswered */
        /* gauges, sampled at the end of each committed batch */
        int64_t parked_events;           /**< parked now (assigned partitions) */
        int64_t parked_bytes;
        int64_t quarantined_aggregates;  /**< quarantined now (assigned partitions) */
        int64_t stuck_parked_over_5m;    /**< aggregates parked > 5 min (the seed's
                                              stuck_processing_over_5m), capped count */
        int64_t oldest_parked_age_ms;    /**< age of the oldest parked event, 0 none */
} sg_metrics_t;

/** Adds every counter of @p delta to @p m (gauges are copied). */
void sg_metrics_add(sg_metrics_t *m, const sg_metrics_t *delta);

/**
 * Writes @p m as JSON object members (no braces), e.g.
 * "\"applied_total\":3,\"dlq_total\":{\"stale_version\":1},...",
 * into @p buf. Returns the length that was (or would have been) written, as
 * snprintf does.
 */
int sg_metrics_json(const sg_metrics_t *m, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_METRICS_H */
