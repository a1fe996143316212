/*
 * simrun.h — the engine run offline over a stream of records (seqgatectl
 * simulate; reusable by any tool that judges records without a Kafka
 * loop): the offline driver (drive.h: a store in a fresh temporary
 * directory, the real engine, and the batch protocol of processor.h run as
 * the Kafka loop runs it — assignment before a partition's first record,
 * every effect "delivered" at the next offset of its topic partition, the
 * store grown on a full map, paused records kept and offered again); HTTP
 * snapshot GETs only after batch_commit, their replies fed back as records
 * of SG_SNAPSHOT_HTTP_TOPIC in a later batch.
 *
 * Every record is its own batch, so each verdict can be told from the
 * batch's effects and the committed counters' change (metrics.h). The
 * clock is the caller's: sg_sim_clock_set() moves it (never back) and runs
 * an empty batch, whose tick fires what is due (gap deadlines, snapshot
 * timeouts and retries, the TTL sweep).
 *
 * Results reach the caller through a callback, one call per verdict: the
 * input record's own (kind "record") and then one per effect that is not
 * about the record itself (kind "effect": an event released from the
 * park, a snapshot record, a snapshot request, a parked event
 * dead-lettered by a deadline). Changelog effects are not reported.
 *
 * Thread-safety: one runner per thread. Nothing here prints or exits.
 */
#ifndef SEQGATECTL_SIMRUN_H
#define SEQGATECTL_SIMRUN_H

#include "config.h"
#include "seqgate.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sg_sim sg_sim_t;

/** One verdict. Strings are borrowed for the callback's duration; NULL
 *  (or has_* false) when unknown or not applicable. */
typedef struct sg_sim_verdict {
        const char *kind;    /**< "record" or "effect" */
        const char *verdict; /**< record: applied, duplicate, parked, dlq,
                                  stale_dropped, superseded, release,
                                  control_refused, snapshot_reply, none;
                                  effect: released (from the park),
                                  snapshot, snapshot_request, dlq, output */
        const char *topic;   /**< the input record's (effects: the origin
                                  record's, when known) */
        int32_t partition;   /**< -1 when unknown */
        int64_t offset;      /**< -1 when unknown */
        const char *aggregate;
        bool has_version;
        uint64_t version; /**< the event's version; snapshot: S */
        const char *type;
        const char *reason; /**< dlq: the DLQ reason */
        const char *detail; /**< dlq: __seqgate.errors.detail; applied:
                                 the gap header's text when one is set */
        bool has_waiting_for;
        uint64_t waiting_for;   /**< parked: the version the aggregate waits
                                   for (L + 1) */
        const char *state;      /**< snapshot: the snapshot's state */
        const char *request_id; /**< snapshot_request */
        const char *url;        /**< snapshot_request (http) */
} sg_sim_verdict_t;

typedef void sg_sim_cb(void *opaque, const sg_sim_verdict_t *v);

/**
 * Lag the loop would report for a partition (records of it not yet given
 * to the runner; processor.h position()); NULL callback: 0, read to the
 * end.
 */
typedef int64_t sg_sim_lag_cb(void *opaque, const char *topic,
                              int32_t partition);

/**
 * Creates a runner over @p conf (borrowed; it must outlive the runner)
 * with a store in a new temporary directory under $TMPDIR (or /tmp) and
 * the engine clock at @p now_ms (ms since the epoch). @p cb receives every
 * verdict, @p lag (may be NULL) the partitions' lag, both with @p opaque.
 * @returns SG_OK, SG_ERR_IO (temporary directory), a store or engine error.
 */
sg_err_t sg_sim_new(const sg_config_t *conf, int64_t now_ms, sg_sim_cb *cb,
                    sg_sim_lag_cb *lag, void *opaque, sg_sim_t **simp,
                    char *errstr, size_t errstr_size);

/** Destroys the runner and removes its temporary directory. NULL: no-op. */
void sg_sim_destroy(sg_sim_t *sim);

/**
 * Judges one record (borrowed for the call) in a batch of its own; the
 * partition is assigned first if it is new. rec->offset must be above the
 * partition's previous record's (SG_ERR_INVALID otherwise).
 * @p pausedp (may be NULL): set when the engine paused the partition at
 * the record (back-pressure, semantics §4 caps): nothing was consumed; the
 * runner keeps the record and offers it again in the first batch
 * pause_retry_ms later (sg_sim_clock_set), as the loop does.
 * @returns SG_OK, SG_ERR_CONFIG (a topic the config does not name),
 *          SG_ERR_INVALID, or the engine's error (errstr says why).
 */
sg_err_t sg_sim_record(sg_sim_t *sim, const sg_record_t *rec, bool *pausedp,
                       char *errstr, size_t errstr_size);

/** Records kept for a paused partition, not judged yet (sg_sim_record). */
size_t sg_sim_pending(const sg_sim_t *sim);

/**
 * Moves the clock to @p now_ms (an earlier time is SG_ERR_INVALID) and
 * runs an empty batch: its tick fires what is due by then.
 */
sg_err_t sg_sim_clock_set(sg_sim_t *sim, int64_t now_ms, char *errstr,
                          size_t errstr_size);

/** The runner's clock (ms since the epoch). */
int64_t sg_sim_clock(const sg_sim_t *sim);

/**
 * Answers the oldest unanswered snapshot request for @p aggregate (or,
 * with @p request_id non-NULL, that request), as its source would:
 *  - http: a completed transfer with HTTP status @p status (0: the
 *    transfer failed) and body @p body of @p body_len bytes (NULL: none),
 *    a record of SG_SNAPSHOT_HTTP_TOPIC in a batch of its own, as the loop
 *    feeds it;
 *  - kafka: a record of the source's reply topic (partition 0, the next
 *    offset) whose value is @p body — a JSON object — with "request_id"
 *    added as its first member (@p status is not used).
 * @returns SG_OK, SG_ERR_NOT_FOUND (no such request unanswered),
 *          SG_ERR_INVALID (kafka: the body is not a JSON object), or the
 *          engine's error.
 */
sg_err_t sg_sim_snapshot_reply(sg_sim_t *sim, const char *aggregate,
                               const char *request_id, int status,
                               const void *body, size_t body_len, char *errstr,
                               size_t errstr_size);

#endif
