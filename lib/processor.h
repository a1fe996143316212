/*
 * processor.h — the seam between the Kafka loop (kafka.h), which moves
 * records, and whatever decides about them (the engine, engine.h, or the
 * benchmark's pass-through).
 *
 * The loop calls, per batch:
 *     batch_begin → process (each record, in offset order per partition)
 *     → tick → effects → [produce every effect, wait for all deliveries]
 *     → batch_commit (only after every delivery succeeded) → commit offsets
 * or, on any failure, batch_abort and a rewind to the committed offsets.
 * The processor never calls Kafka; the loop never decides (style.md).
 *
 * Invariant (semantics §6): a processor must not make any decision durable
 * before batch_commit, because batch_commit is only called once Kafka has
 * accepted the batch's output.
 */
#ifndef SEQGATE_PROCESSOR_H
#define SEQGATE_PROCESSOR_H

#include "seqgate.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sg_effect_kind {
        SG_EFFECT_OUTPUT = 1, /**< a record for the output topic (also used for
                                   snapshot request records to a request topic) */
        SG_EFFECT_DLQ = 2,    /**< a record for the DLQ topic */
        SG_EFFECT_HTTP_GET = 3, /**< not a record: an HTTP GET the loop starts
                                     only AFTER batch_commit succeeded (so the
                                     request is durable before it is sent).
                                     url, request_id, auth_env, timeout_ms set;
                                     topic/key/value unused. */
        SG_EFFECT_CHANGELOG = 4, /**< a changelog record (exactly_once,
                                      issue 4): topic = the input topic's
                                      changelog, partition = the input
                                      partition; value NULL = tombstone */
} sg_effect_kind_t;

/**
 * Snapshot replies fetched over HTTP re-enter the processor as records of
 * this pseudo topic (partition -1, offset -1, no offset to commit):
 *   key     = the request id
 *   value   = the response body (NULL when the transfer failed)
 *   headers = SG_H_HTTP_STATUS ("200", ...; "0" when no response) and, on a
 *             transfer error, SG_H_HTTP_ERROR (curl's message)
 * The loop feeds every completed transfer to process() in the next batch.
 */
#define SG_SNAPSHOT_HTTP_TOPIC "__seqgate.snapshot.http"
#define SG_H_HTTP_STATUS "__seqgate.http.status"
#define SG_H_HTTP_ERROR "__seqgate.http.error"

/**
 * A record to produce. Memory (key, value, headers, extra) is owned by the
 * processor and stays valid until batch_commit or batch_abort returns.
 * Output headers = headers[0..header_cnt) followed by extra[0..extra_cnt).
 */
typedef struct sg_effect {
        sg_effect_kind_t kind;
        const char *topic;         /**< destination topic */
        int32_t partition;         /**< destination partition, or -1: the
                                        producer's partitioner (murmur2) */
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        int64_t timestamp_ms;      /**< record timestamp to keep, or 0 */
        const sg_header_t *headers;
        size_t header_cnt;
        const sg_header_t *extra;
        size_t extra_cnt;
        /* SG_EFFECT_HTTP_GET only: */
        const char *url;           /**< absolute URL, already percent-encoded */
        const char *request_id;    /**< echoed back as the reply record's key */
        const char *auth_env;      /**< env variable holding the Authorization
                                        header value, or NULL */
        int64_t timeout_ms;        /**< whole-transfer timeout */
} sg_effect_t;

/** What process() did with a record. */
typedef enum sg_process_result {
        SG_PROCESSED = 0, /**< consumed; the input offset advances past it */
        SG_PAUSE = 1,     /**< not consumed (back-pressure, semantics §4 caps):
                               the loop must stop this partition's batch at
                               this record, seek back to it and pause the
                               partition for pause_retry_ms */
} sg_process_result_t;

typedef struct sg_processor {
        void *opaque;
        /** Starts a batch at processing time @p now_ms. */
        sg_err_t (*batch_begin)(void *opaque, int64_t now_ms, char *errstr,
                                size_t errstr_size);
        /** Judges one record; may add effects. SG_ERR_MAP_FULL: the loop
         *  aborts, calls grow, and re-runs the whole batch. */
        sg_err_t (*process)(void *opaque, const sg_record_t *rec,
                            sg_process_result_t *result, char *errstr,
                            size_t errstr_size);
        /** Time-driven work (gap deadlines, TTL sweep) for the assigned
         *  partitions; may add effects. Bounded work per call. */
        sg_err_t (*tick)(void *opaque, char *errstr, size_t errstr_size);
        /** The batch's effects so far. */
        size_t (*effects)(void *opaque, const sg_effect_t **effectsp);
        /** Makes the batch's decisions durable (called only after every
         *  effect was delivered). */
        sg_err_t (*batch_commit)(void *opaque, char *errstr,
                                 size_t errstr_size);
        /** Forgets the batch's decisions. Never fails. */
        void (*batch_abort)(void *opaque);
        /** Grows the store after SG_ERR_MAP_FULL (no batch open). May be NULL. */
        sg_err_t (*grow)(void *opaque, char *errstr, size_t errstr_size);
        /**
         * A partition was assigned (no batch open). Sets *offsetp to the
         * input offset the store reflects (next offset to read), or -1 if
         * none. SG_ERR_FOREIGN: the store belongs to another group.
         */
        sg_err_t (*assign)(void *opaque, const char *topic, int32_t partition,
                           const char *group_id, int64_t *offsetp,
                           char *errstr, size_t errstr_size);
        /** A partition was revoked or lost (no batch open). May be NULL. */
        void (*revoke)(void *opaque, const char *topic, int32_t partition);
        /**
         * How far behind the end of its log partition @p topic [@p partition]
         * is read, once the batch's records are processed: @p lag records
         * between the next offset to read and the high watermark (0: read
         * to the end; -1: unknown, e.g. the partition is paused or has no
         * watermark yet). Called for every assigned partition after the
         * batch's process() calls and before tick(). Gap deadlines use it
         * (semantics §4: a deadline fires only once the partition has been
         * read to the end of its log, or to records timestamped past the
         * deadline). May be NULL: every partition counts as read to the end.
         */
        void (*position)(void *opaque, const char *topic, int32_t partition,
                         int64_t lag);

        /* ---- exactly_once (issue 4); all may be NULL ---- */

        /** Tells the offset effect @p index of the batch was written at.
         *  Called for every delivered effect, before batch_commit. */
        void (*delivered)(void *opaque, size_t index, int64_t offset);
        /**
         * Restore, step 1: where to start reading the partition's changelog.
         * @p log_start / @p log_end: the changelog partition's first offset
         * and its read_committed end. *offsetp receives the offset to read
         * from: the store's checkpoint when it is there and not older than
         * log_start, else log_start (a full restore: the partition's local
         * state is dropped first). Called after assign, before any input
         * record of the partition is processed; no batch open.
         */
        sg_err_t (*restore_begin)(void *opaque, const char *topic,
                                  int32_t partition, int64_t log_start,
                                  int64_t log_end, int64_t *offsetp,
                                  char *errstr, size_t errstr_size);
        /** Restore, step 2: one changelog record, in offset order (value
         *  NULL: a tombstone). */
        sg_err_t (*restore_apply)(void *opaque, const char *topic,
                                  int32_t partition, int64_t offset,
                                  const void *key, size_t key_len,
                                  const void *value, size_t value_len,
                                  char *errstr, size_t errstr_size);
        /** Restore, step 3: the changelog was read up to @p end_offset
         *  (exclusive); makes the restored state and checkpoint durable. */
        sg_err_t (*restore_end)(void *opaque, const char *topic,
                                int32_t partition, int64_t end_offset,
                                char *errstr, size_t errstr_size);
} sg_processor_t;

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_PROCESSOR_H */
