/*
 * engine.h — the decision engine: every row of the decision table
 * (semantics §3), the ordering modes (§3b), gap deadlines, gap policies and
 * parking caps (§4), and the shape of output and DLQ records (§5).
 *
 * The engine is pure with respect to Kafka: it reads and writes the store
 * (store.h) inside the batch's LMDB write transaction and returns effects
 * (records to produce). It implements the processor interface
 * (processor.h) that the Kafka loop drives.
 *
 * Processing time: the engine's clock is wall-clock at start-up, never
 * earlier than the clock persisted in any assigned partition's store, and
 * advanced by CLOCK_MONOTONIC afterwards, so a wall clock that jumps while
 * seqgate runs neither fires every gap deadline at once nor none at all.
 * Deadlines fired per batch are bounded (deadline_max_per_batch) as is TTL
 * sweeping (sweep_max_per_batch): no stop-the-world scan.
 *
 * Headers added to output records (semantics §5):
 *   __seqgate.source     "topic/partition/offset" of the input record
 *   __seqgate.gap.skipped "A-B": versions given up (gap_policy skip)
 *   __seqgate.gap.missing "A-B": versions never seen (latest_wins)
 * Headers added to DLQ records: see SG_DLQ_H_* below and docs/dlq.md "DLQ
 * headers".
 *
 * Thread-safety: one engine per processing thread.
 */
#ifndef SEQGATE_ENGINE_H
#define SEQGATE_ENGINE_H

#include "config.h"
#include "metrics.h"
#include "processor.h"
#include "seqgate.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SG_H_SOURCE "__seqgate.source"
#define SG_H_GAP_SKIPPED "__seqgate.gap.skipped"
#define SG_H_GAP_MISSING "__seqgate.gap.missing"
/** On a snapshot record (snapshot refetch, semantics §4): the snapshot's version S, and state. */
#define SG_H_SNAPSHOT "__seqgate.snapshot"
#define SG_H_SNAPSHOT_STATE "__seqgate.snapshot.state"
/**
 * Operator control record on an input topic (seqgatectl release): header
 * "__seqgate.control: release", value {"aggregate": ID, "version": S
 * (optional), "state": X (optional)}. Releases a quarantined aggregate
 * (semantics §4 "until a snapshot or an operator resolves it"): the
 * quarantine and any refetch end; with a version, L = S (S >= L) and the
 * state is set. It is not an event: not deduplicated, not forwarded.
 */
#define SG_H_CONTROL "__seqgate.control"
/** Set by the operator's DLQ replay tool: a key recorded with a DLQ verdict
 *  is judged again from row 4 (semantics §3 "Replay"). */
#define SG_H_REPLAY "__seqgate.replay"

#define SG_DLQ_H_REASON "__seqgate.errors.reason"
#define SG_DLQ_H_DETAIL "__seqgate.errors.detail"
#define SG_DLQ_H_TOPIC "__seqgate.errors.topic"
#define SG_DLQ_H_PARTITION "__seqgate.errors.partition"
#define SG_DLQ_H_OFFSET "__seqgate.errors.offset"
#define SG_DLQ_H_TIMESTAMP "__seqgate.errors.timestamp"
#define SG_DLQ_H_GROUP "__seqgate.errors.group"
#define SG_DLQ_H_AGGREGATE "__seqgate.errors.aggregate"
#define SG_DLQ_H_EXPECTED "__seqgate.errors.expected_version"
#define SG_DLQ_H_ACTUAL "__seqgate.errors.actual_version"
#define SG_DLQ_H_STATE "__seqgate.errors.state"
#define SG_DLQ_H_INSTANCE "__seqgate.errors.instance"
/* When seqgate dead-lettered the record: the batch's processing time, RFC
 * 3339 UTC with milliseconds ("2026-12-01T15:30:00.123Z"); also the DLQ
 * record's Kafka timestamp (the input's is SG_DLQ_H_TIMESTAMP). */
#define SG_DLQ_H_DEAD_LETTERED_AT "__seqgate.errors.dead_lettered_at"
/** On a DLQ record that goes without the input record's value (the value is
 *  what Kafka cannot take, semantics §3 output_rejected; or the DLQ topic
 *  cannot take the record): the value's length in bytes. Fetch the record
 *  from __seqgate.errors.topic/.partition/.offset. */
#define SG_DLQ_H_VALUE_DROPPED "__seqgate.errors.value_dropped"
/** The same for the input record's headers (their count), dropped when the
 *  DLQ topic cannot take the record even without its value. */
#define SG_DLQ_H_HEADERS_DROPPED "__seqgate.errors.headers_dropped"

/**
 * Every DLQ header above, in the order a DLQ record carries them, with
 * what it holds: X(NAME, "doc"). docs/dlq.md's table is generated from
 * this list (docs/gen), and its test fails when an SG_DLQ_H_* name is
 * missing here. The headers themselves are written by engine_effects.c.
 */
#define SG_DLQ_HEADERS(X)                                                      \
        X(SG_DLQ_H_REASON, "the reason code")                                  \
        X(SG_DLQ_H_DETAIL, "human-readable detail, e.g. `version 3 <= last "   \
                           "applied version 5`")                               \
        X(SG_DLQ_H_TOPIC, "the input record's topic")                          \
        X(SG_DLQ_H_PARTITION, "the input record's partition")                  \
        X(SG_DLQ_H_OFFSET, "the input record's offset")                        \
        X(SG_DLQ_H_TIMESTAMP, "the input record's timestamp, milliseconds "    \
                              "(the DLQ record's own is dead_lettered_at)")    \
        X(SG_DLQ_H_GROUP, "the consumer group")                                \
        X(SG_DLQ_H_AGGREGATE, "the aggregate id (when known)")                 \
        X(SG_DLQ_H_EXPECTED, "the version seqgate waited for")                 \
        X(SG_DLQ_H_ACTUAL, "the record's version")                             \
        X(SG_DLQ_H_STATE, "the aggregate's state (with a state machine)")      \
        X(SG_DLQ_H_INSTANCE, "`instance_id`")                                  \
        X(SG_DLQ_H_DEAD_LETTERED_AT,                                           \
          "when seqgate dead-lettered it (the batch's processing time), RFC "  \
          "3339 UTC with milliseconds, e.g. `2026-12-01T15:30:00.123Z`; also " \
          "the DLQ record's Kafka timestamp")                                  \
        X(SG_DLQ_H_VALUE_DROPPED,                                              \
          "only on a record sent without the input's value: the value's "      \
          "length in bytes")                                                   \
        X(SG_DLQ_H_HEADERS_DROPPED,                                            \
          "only on a record sent without the input's headers too: how many "   \
          "there were")

typedef struct sg_engine sg_engine_t;

/**
 * Applies the guarantee's durability to @p store (semantics §6, "Durability
 * of the store"): both guarantees defer the store's syncs to the changelog
 * (sg_store_defer_sync), which holds every committed batch before LMDB does
 * (exactly_once: in the Kafka transaction; at_least_once: its markers are
 * acknowledged before the LMDB commit, and the input offsets are committed
 * only after it). Call once after sg_store_open, before the engine's first
 * batch. @p conf is borrowed. Not thread-safe (the store's owner calls it).
 * @returns SG_OK, SG_ERR_INVALID (a system without a boot id: commits stay
 *          synced, errstr says why — not an error to stop for), or the
 *          store's error.
 */
sg_err_t sg_engine_store_durability(const sg_config_t *conf, sg_store_t *store,
                                    char *errstr, size_t errstr_size);

/**
 * Creates an engine over @p store with configuration @p conf (both borrowed;
 * they must outlive the engine). The configuration's limits (state name
 * lengths, field sizes with a snapshot source) are checked when it is parsed
 * (sg_config_parse), so any parsed configuration is accepted here; @p errstr
 * is kept for errors a later check may report.
 * @returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_engine_new(const sg_config_t *conf, sg_store_t *store,
                       sg_engine_t **enginep, char *errstr, size_t errstr_size);

/** Destroys the engine. An open batch, and every batch committed since the
 *  last checkpoint, are dropped from the store as a kill drops them (they
 *  are in the changelog: the next assignment restores them, semantics §6):
 *  call sg_engine_checkpoint() first for a clean close. NULL is a no-op. */
void sg_engine_destroy(sg_engine_t *engine);

/**
 * A checkpoint (semantics §6 "Checkpoints"): commits the store's write
 * transaction that holds the batches committed since the last one, so
 * that a read-only transaction (another thread's, another process's:
 * seqgatectl) and the next start see them. The engine checkpoints by
 * itself (processor.h batch_commit: store.checkpoint_interval_ms, a size,
 * low map room; and before an assignment, a revoke, a restore); call it
 * before sg_engine_destroy for a clean close, and before reading the
 * store with a transaction of your own. No batch may be open.
 * @returns SG_OK (also when nothing was open), SG_ERR_INVALID (a batch is
 *          open), or the store's error: then those batches are lost from
 *          the store and their partitions are behind their changelog
 *          (processor.h behind) until restored.
 * Thread-safety: the processing thread, between batches.
 */
sg_err_t sg_engine_checkpoint(sg_engine_t *engine, char *errstr,
                              size_t errstr_size);

/**
 * The live state between batches: *txnp receives the engine's open
 * checkpoint transaction, which holds every committed batch (borrowed:
 * read only, never commit or abort it, and use it only until the next call
 * into the engine; *ownedp false), or, with none open, a new read-only
 * transaction on the last checkpoint (the caller ends it with sg_txn_abort;
 * *ownedp true). Every read function of store.h may be called on it.
 * @returns SG_OK, SG_ERR_INVALID (a batch is open), or the store's error.
 * Thread-safety: the processing thread, between batches.
 */
sg_err_t sg_engine_view(sg_engine_t *engine, sg_txn_t **txnp, bool *ownedp,
                        char *errstr, size_t errstr_size);

/** Fills @p proc with the engine's processor interface. */
void sg_engine_processor(sg_engine_t *engine, sg_processor_t *proc);

/** Committed counters (see metrics.h), summed over the input topics
 *  (sg_metrics_sum()). Borrowed; valid while the engine lives. */
const sg_metrics_t *sg_engine_metrics(const sg_engine_t *engine);

/**
 * The committed metrics of configured input topic @p i (0 ..
 * topic_cnt - 1, the configuration's order; metrics_list.h: every engine
 * row is kept per input topic), and its name in *@p topicp (may be NULL).
 * @returns NULL when @p i is past the last topic. Borrowed; valid while
 * the engine lives. Thread-safety: the processing thread (between
 * batches).
 */
const sg_metrics_t *sg_engine_topic_metrics(const sg_engine_t *engine, size_t i,
                                            const char **topicp);

/**
 * Fills the engine's gauges of input partition @p topic [@p partition]
 * into @p out (parked_events, parked_bytes, quarantined_aggregates as of
 * the last committed batch; oldest_parked_age_ms as of the last gauge walk,
 * at most a second old; semantics §7). Other fields are left alone.
 * @returns false when the engine does not hold the partition.
 * Thread-safety: the processing thread only (between batches).
 */
bool sg_engine_part_gauges(const sg_engine_t *engine, const char *topic,
                           int32_t partition, sg_part_stats_t *out);

/**
 * Installs the log callback for the decisions an operator looks for in the
 * log: "gap_timeout", "aggregate_quarantined", "snapshot_attempt_failed"
 * (with the HTTP status or the reason), "aggregate_released". At most 50
 * lines per batch (the counters count every one). Fields are a JSON
 * object's members: topic, partition, aggregate, ...; never a payload, never
 * a secret. Called from the processing thread during a batch (the batch may
 * still abort and be re-read).
 */
void sg_engine_set_log(sg_engine_t *engine, sg_log_cb *cb, void *opaque);

/**
 * Lines more detailed than @p level (a "gap_timeout" notice while the log
 * callback keeps warnings) are neither built nor passed to the log
 * callback, and do not count against a batch's 50 lines: set it to what
 * the callback keeps, at the start and after every change (a reload), as
 * sg_loop_set_log_level() for the loop. Until set, every level is passed
 * on, for the callback to filter. Thread-safety: the processing thread
 * only (between batches or inside one).
 */
void sg_engine_set_log_level(sg_engine_t *engine, sg_log_level_t level);

/**
 * The co-partitioning warnings (semantics §2 "Co-partitioning"):
 * "aggregate_not_record_key" (a record whose aggregate, read from its value
 * or a header, is not its record key) and "aggregate_on_two_partitions" (an
 * aggregate this engine saw on another partition of the same topic), each
 * at most once per aggregate while the engine remembers it (a fixed table
 * of SG_COPART_SLOTS recent aggregates), and together at most
 * SG_COPART_LOG_PER_MIN lines a minute of processing time; the lines left
 * out are counted in the next one's "suppressed". The counters
 * aggregate_not_record_key_total and aggregate_on_two_partitions_total
 * count every record.
 */
#define SG_COPART_LOG_PER_MIN 10
#define SG_COPART_SLOTS 8192

/**
 * The rule for an operator's release (SG_H_CONTROL; semantics §3
 * "Release"), shared by the engine and seqgatectl so that an operator hears
 * "no" before anything is sent: a release is accepted for a quarantined
 * aggregate, or — with a version (@p has_version, @p S) — for one waiting
 * on a gap (parked events or a snapshot request); S must be >= L, and
 * @p state (NULL: none) a state of @p tc's state machine.
 * @p r: the aggregate's record, NULL when the store has none.
 * @returns NULL when accepted, else the reason (a constant, or @p buf).
 * Thread-safety: pure.
 */
const char *sg_release_refusal(const sg_topic_config_t *tc,
                               const sg_agg_rec_t *r, bool has_version,
                               uint64_t S, const char *state, char *buf,
                               size_t size);

/**
 * Test hook: replaces the engine's clock. When set, @p now_ms is the
 * processing time of every following batch. 0 restores the real clock.
 */
void sg_engine_set_clock(sg_engine_t *engine, int64_t now_ms);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_ENGINE_H */
