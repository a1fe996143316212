/*
 * metrics_pub.h — what the HTTP endpoint serves (/metrics, /healthz,
 * /readyz; docs/operating.md "HTTP endpoint"), published by the loop
 * thread for the HTTP thread.
 *
 * Thread-safety, the design: the loop thread owns every counter, the engine
 * and the store; the HTTP thread (http.h) never reads them. The loop thread
 * fills a snapshot (sg_metrics_snap_t: plain structs copied from the loop's
 * stats, the engine's metrics and a per-partition array; no allocation per
 * record) and hands it to sg_pub_publish(), which copies it under the
 * publication's mutex — after every committed batch, on every turn of the
 * loop at most every SG_PUB_INTERVAL_MS, during a changelog restore, and
 * on every rebalance (kafka.h sg_loop_set_publish()). The HTTP handlers
 * render from the published copy under the same mutex (so a publish waits
 * at most one rendering, tens of microseconds). What a scrape shows is
 * therefore at most one loop turn old.
 */
#ifndef SEQGATE_METRICS_PUB_H
#define SEQGATE_METRICS_PUB_H

#include "http.h"
#include "kafka.h"
#include "metrics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** /readyz answers 503 once this many batches in a row were aborted: one
 *  abort is the ordinary answer to a rebalance or a broker restart (the
 *  batch is read again at once), two in a row is a loop that fails. */
#define SG_READY_MAX_ABORTS 2

/** The loop publishes at most this often, besides the forced publishes
 *  (a committed batch, a rebalance, the end of the loop). */
#define SG_PUB_INTERVAL_MS 100

/** Everything /metrics, /healthz and /readyz show; one value of it. */
typedef struct sg_metrics_snap {
        sg_loop_stats_t loop; /**< the Kafka loop's counters and gauges */
        bool has_engine;      /**< false in pass-through mode */
        SG_PROCESS_METRICS(SG_METRIC_FIELD)
        sg_topic_stats_t *topics; /**< the engine's committed metrics, per
                                       configured input topic */
        size_t topic_cnt;
        size_t topic_cap;       /**< allocated entries of topics */
        sg_part_stats_t *parts; /**< assigned input partitions */
        size_t part_cnt;
        size_t part_cap;    /**< allocated entries of parts */
        bool assigned_once; /**< the consumer group assigned partitions
                                 (possibly none) at least once */
        bool stopped;       /**< the loop returned */
        bool fatal;         /**< it stopped for an error: fatal_str */
        char fatal_str[512];
        char abort_str[512];  /**< why the last batch was aborted, while
                                  loop.batches_aborted_in_a_row > 0 */
        bool restore_failing; /**< the restore of partitions behind their
                                   changelog failed, and none has succeeded
                                   since: restore_str says why */
        char restore_str[512];
        int64_t assign_wait_ms;     /**< monotonic time the consumer group's
                                     first assignment has been awaited
                                     since (subscribed); 0: not waiting
                                     (it came, or its rebalance callback
                                     runs: restoring) */
        int64_t session_timeout_ms; /**< the consumer's session.timeout.ms
                                         (-1: unknown) */
        char group_id[256];         /**< the consumer group (cut) */
        int64_t published_ms;       /**< monotonic; set by sg_pub_publish() */
} sg_metrics_snap_t;

/** After this long without a first assignment the loop logs
 *  assignment_waiting once (sg_assign_hint), milliseconds. */
#define SG_ASSIGN_HINT_MS 5000

/**
 * Writes into @p buf (@p size bytes, cut, terminated) why a member that
 * has waited @p waited_ms for consumer group @p group's first assignment
 * may wait on, and how to look: after a crash or kill -9 of the previous
 * instance the group coordinator counts its member until the session
 * expires (session.timeout.ms, @p session_ms; -1: not said), or a
 * rebalance is still running (Kafka's group membership protocol); the
 * kafka-consumer-groups.sh command that describes the group's members.
 * The text of /readyz's "hint" and of the assignment_waiting log line.
 * Thread-safety: reentrant.
 */
void sg_assign_hint(char *buf, size_t size, const char *group,
                    int64_t session_ms, int64_t waited_ms);

/**
 * Makes room for @p n partitions in @p snap->parts (keeps what is there).
 * @returns SG_OK, SG_ERR_NOMEM. Thread-safety: the snapshot's owner.
 */
sg_err_t sg_metrics_snap_reserve(sg_metrics_snap_t *snap, size_t n);

/**
 * Appends input topic @p topic's engine metrics @p m (copied) to
 * @p snap->topics. @returns SG_OK, SG_ERR_NOMEM (nothing appended).
 * Thread-safety: the snapshot's owner.
 */
sg_err_t sg_metrics_snap_topic_add(sg_metrics_snap_t *snap, const char *topic,
                                   const sg_metrics_t *m);

/** Frees @p snap's partition and topic arrays (not @p snap). */
void sg_metrics_snap_free(sg_metrics_snap_t *snap);

/**
 * Renders @p snap as the Prometheus text exposition format 0.0.4 into a
 * malloc'd, NUL-terminated *bufp of *lenp bytes (the caller frees it):
 * every row of metrics_list.h with a Prometheus name, "seqgate_"
 * prefixed, with # HELP and # TYPE; milliseconds converted to seconds;
 * the engine's rows per input topic with the label topic, DLQ records
 * by reason as seqgate_dlq_records_total{topic,reason}, and the aliases
 * (SG_METRIC_ALIASES) with the same samples; the per-partition rows with
 * labels topic and partition (values escaped: backslash, double quote,
 * newline); histograms as _bucket{le} (cumulative, with +Inf), _sum and
 * _count in seconds; seqgate_build_info{version} 1; seqgate_ready 1 or 0
 * (sg_metrics_snap_ready()).
 * @p version: the build's version string.
 * @returns SG_OK, SG_ERR_NOMEM. Thread-safety: reentrant.
 */
sg_err_t sg_metrics_prom(const sg_metrics_snap_t *snap, const char *version,
                         char **bufp, size_t *lenp);

/**
 * Whether @p snap is ready as /readyz answers it (200): the consumer group
 * assigned partitions at least once, the loop runs, no assigned partition
 * is being restored, and fewer than SG_READY_MAX_ABORTS batches aborted in
 * a row. Exported as seqgate_ready. Pure.
 */
bool sg_metrics_snap_ready(const sg_metrics_snap_t *snap);

/**
 * Writes the label value @p v escaped for the exposition format (\\ for a
 * backslash, \" for a double quote, \n for a newline) into @p out of
 * @p size bytes, NUL-terminated, truncated if needed.
 * @returns the length the escaped text needs (as snprintf).
 */
size_t sg_prom_escape(const char *v, char *out, size_t size);

typedef struct sg_pub sg_pub_t;

/**
 * Creates a publication. /healthz answers 503 once no snapshot was
 * published for @p stall_ms (the loop made no progress: a batch or a
 * restore is stuck longer than the loop's own timeouts allow).
 * @returns SG_OK, SG_ERR_NOMEM.
 */
sg_err_t sg_pub_new(int64_t stall_ms, sg_pub_t **pubp);

/** Frees @p pub (after the HTTP server that reads it). NULL: no-op. */
void sg_pub_destroy(sg_pub_t *pub);

/**
 * Copies @p snap into @p pub under its mutex and stamps it with the
 * monotonic time. Allocates only when the number of partitions grew.
 * Thread-safety: any thread (the loop thread in seqgate).
 */
void sg_pub_publish(sg_pub_t *pub, const sg_metrics_snap_t *snap);

/**
 * Registers /metrics (text/plain; version=0.0.4), /healthz and /readyz
 * (application/json) on @p srv, served from @p pub:
 *   /healthz 200 {"status":"ok"} while the loop runs and published within
 *            stall_ms; else 503 {"status":"unhealthy","reason":...}
 *            (the fatal error's text, "stopped", "not started", or "no
 *            progress for N s").
 *   /readyz  200 {"status":"ready","partitions":N} when the consumer group
 *            assigned partitions at least once and none of them is being
 *            restored (a member with zero partitions is ready, like Kafka
 *            Streams' RUNNING); else 503 {"status":"not_ready","reason":
 *            "no partitions assigned"} before the first assignment (while
 *            it is awaited, with "waiting_ms", "session_timeout_ms",
 *            "group_id" and "hint": sg_assign_hint's text), or
 *            {"status":"not_ready","partitions":[{"topic":..,"partition":
 *            ..,"state":"restoring","restore_records_read":..,
 *            "restore_records_target":..},...]} listing those restoring,
 *            or, from SG_READY_MAX_ABORTS batches aborted in a row (a
 *            full disk: semantics §6) until a batch with records commits,
 *            {"status":"not_ready","reason":"batches aborted: N in a row,
 *            the last: <error>","batches_aborted_in_a_row":N} (with
 *            "partitions" too when some restore), or, while the restore
 *            of partitions whose store fell behind their changelog (a
 *            checkpoint's commit failed after Kafka took the batch)
 *            fails, until one succeeds (semantics §6 "Disk space"),
 *            {"status":"not_ready","reason":"restore failing: <error>"}.
 *            With standby partitions (semantics §6 "Standby replicas")
 *            every answer also has "standbys":[{"topic":..,"partition":
 *            ..,"standby_lag":..},...] (standby_lag absent while unknown);
 *            they never make it 503.
 * @p version: for seqgate_build_info (borrowed, must outlive @p srv).
 * @returns what sg_http_route_add() returns.
 */
sg_err_t sg_pub_routes_add(sg_pub_t *pub, sg_http_t *srv, const char *version,
                           char *errstr, size_t errstr_size);

/**
 * The bodies of /healthz and /readyz for the published snapshot at
 * monotonic time @p now_ms: *statusp 200 or 503, *bodyp malloc'd JSON.
 * @returns SG_OK, SG_ERR_NOMEM. Thread-safety: any thread.
 */
sg_err_t sg_pub_health(sg_pub_t *pub, int64_t now_ms, int *statusp,
                       char **bodyp);
sg_err_t sg_pub_ready(sg_pub_t *pub, int *statusp, char **bodyp);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_METRICS_PUB_H */
