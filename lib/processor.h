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
        SG_EFFECT_OUTPUT = 1, /**< a record for the output topic */
        SG_EFFECT_DLQ = 2,    /**< a record for the DLQ topic */
} sg_effect_kind_t;

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
} sg_processor_t;

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_PROCESSOR_H */
