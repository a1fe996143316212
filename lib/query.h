/*
 * query.h — the result query (semantics §7): "what happened to event X?"
 * and "where is aggregate A?", answered from the store alone.
 *
 * A caller whose request timed out asks what became of its event instead of
 * assuming it failed. The answer comes from the event's dedup record (found
 * by the same idempotency key the engine records, sg_envelope_key_hash) and
 * the aggregate and parked records, in every partition of the topic the
 * store holds. The answers are JSON objects (snake_case names; times as
 * RFC 3339 UTC text plus a `_ms` number of ms since the epoch; versions and
 * offsets as JSON integers written as their exact decimal text):
 *
 *   status "applied"        emitted to the output topic ("output": topic,
 *                           and partition when output_partitioning is input)
 *   status "parked"         waiting: "awaiting_version" (L+1, or F for a new
 *                           aggregate), "gap_deadline" while one runs
 *   status "dead_lettered"  "reason" (a DLQ reason code, "unknown" for a
 *                           record stored before reasons were), "dlq_topic"
 *   status "dropped"        stale and dropped by config ("stale": "drop")
 *   status "superseded"     parked, then dropped without being emitted: a
 *                           snapshot or a release moved L past its version
 *   status "unknown"        "why": "not_found" (never seen, or swept after
 *                           dedup_ttl_ms) or "expired" (older than its TTL,
 *                           not swept yet): nothing older than dedup_ttl_ms
 *                           can be answered
 *
 * Offsets of the output or DLQ record are never part of an answer: the
 * store does not hold them (recording them would need a write per record
 * after delivery). The store keeps no count of a key's copies either: a
 * later copy with the same payload was dropped as a duplicate of the event
 * the answer describes; with a different payload it was dead-lettered
 * idempotency_conflict — pass its digest to be told so.
 *
 * Thread-safety: both functions read through sg_txn_begin_reader (store.h),
 * so they may run on any thread while the store's own thread writes and
 * grows it; @p cfg is only read.
 */
#ifndef SEQGATE_QUERY_H
#define SEQGATE_QUERY_H

#include "config.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * What happened to the event of input topic @p topic with scope parts
 * @p scope (@p scope_cnt strings in the topic's configured scope order:
 * for the default scope, one, the CloudEvents `source`) and id @p id.
 * @param digest  optional (NULL): the payload digest of the copy asked
 *                about, as the engine computes it (sg_envelope_t.digest);
 *                when it differs from the recorded one the answer is
 *                "dead_lettered" idempotency_conflict, with the recorded
 *                event's answer under "conflicts_with" (semantics §3 row 3).
 * @param now_ms  processing time (ms since the epoch), for expiry.
 * @param outp    receives a new cJSON object the caller owns (cJSON_Delete);
 *                set only on SG_OK ("unknown" is an answer, SG_OK).
 * @returns SG_OK, SG_ERR_INVALID (not a configured input topic, a scope
 *          of the wrong number of parts, or an empty id or scope part, which
 *          no event has; errstr says which), SG_ERR_STORE, SG_ERR_NOMEM.
 */
sg_err_t sg_query_event(sg_store_t *store, const sg_config_t *cfg,
                        const char *topic, const char *const *scope,
                        size_t scope_cnt, const char *id,
                        const unsigned char *digest, int64_t now_ms,
                        cJSON **outp, char *errstr, size_t errstr_size);

/**
 * Aggregate @p aggregate_id of input topic @p topic (NULL: every configured
 * input topic), searched in every partition of it the store holds: topic,
 * partition, last version L, state, flags (quarantined, refetching), the
 * awaited version and gap deadline while events are parked, the parked
 * events (version, parked_at, origin offset), the snapshot request in
 * flight (sg_query_agg_json). *outp: a new object the caller owns,
 * {"aggregate_id", "found":
 * [one object per partition that holds it; one unless the partition count
 * changed]}.
 * @returns SG_OK, SG_ERR_NOT_FOUND (no partition holds it; *outp not set),
 *          SG_ERR_INVALID (@p topic not configured, or @p aggregate_id
 *          empty), SG_ERR_STORE,
 *          SG_ERR_NOMEM.
 */
sg_err_t sg_query_aggregate(sg_store_t *store, const sg_config_t *cfg,
                            const char *topic, const char *aggregate_id,
                            int64_t now_ms, cJSON **outp, char *errstr,
                            size_t errstr_size);

/**
 * An aggregate record's own fields as a new object (NULL: no memory): id,
 * last_version, state, flags, parked count and bytes, oldest parked_at,
 * and while events are parked the awaited version and the gap deadline
 * (@p tc NULL: not known, left out). sg_query_aggregate's answers are
 * these plus topic, partition, hash, parked events and snapshot request.
 * Pure function: thread-safe.
 */
cJSON *sg_query_agg_json(const sg_agg_rec_t *r, const sg_topic_config_t *tc);

/* JSON helpers of the answers, shared with seqgatectl. @p o gets member
 * @p name; on allocation failure the member is missing. */
/** An integer as its exact decimal text (cJSON numbers are doubles). */
void sg_json_add_i64(cJSON *o, const char *name, int64_t v);
void sg_json_add_u64(cJSON *o, const char *name, uint64_t v);
/** A processing time: @p name as RFC 3339 UTC text (null when ms <= 0);
 *  with @p with_ms also @p name + "_ms", the number. */
void sg_json_add_time(cJSON *o, const char *name, int64_t ms, bool with_ms);
/** Bytes as a string when UTF-8 without NUL, else as @p name + "_hex";
 *  NULL or len SIZE_MAX: null. */
void sg_json_add_bytes(cJSON *o, const char *name, const void *p, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_QUERY_H */
