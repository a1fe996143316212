/*
 * processor.h — the seam between the Kafka loop (kafka.h), which moves
 * records, and whatever decides about them (the engine, engine.h, or the
 * benchmark's pass-through).
 *
 * The batch protocol. This is its one statement; the Kafka loop
 * (kafka.h: what each guarantee does with Kafka around it), the offline
 * driver (drive.h, which runs it without Kafka) and the test harnesses
 * cite it.
 * Per batch, the caller calls:
 *   1. batch_begin(now);
 *   2. process() for each record polled, in offset order per partition.
 *      SG_PAUSE: that partition's batch stops at the record (seek back to
 *      it, pause the partition for pause_retry_ms). SG_ERR_MAP_FULL:
 *      batch_abort(), grow(), the partitions behind() restored, and the
 *      same records again;
 *   3. position() for every assigned partition: how far behind the end of
 *      its log it is once the batch's records are processed;
 *   4. tick();
 *   5. effects(): each one is produced (the loop may start while steps 2-4
 *      run: effects are append-only within an attempt; at_least_once sends
 *      the output and DLQ records first, then the changelog records), every
 *      delivery is awaited, and delivered(index, offset) is told for each;
 *      exactly_once commits the Kafka transaction, with the input offsets
 *      in it, here;
 *   6. batch_commit(), only once every effect was delivered (and the
 *      transaction committed);
 *   7. at_least_once: the input offsets are committed; HTTP GET effects
 *      are started.
 * On any failure: batch_abort() and a rewind to the committed offsets; the
 * records are judged again once the partitions behind() are restored.
 * Between batches (no batch open): assign(), revoke(), grow(),
 * checkpoint(), behind(), and restore_begin/apply/end.
 * The processor never calls Kafka; the loop never decides
 * (docs/ARCHITECTURE.md "The one seam").
 *
 * Invariant (semantics §6): a processor must not make any decision durable
 * before batch_commit, because batch_commit is only called once Kafka has
 * accepted the batch's output.
 *
 * Checkpoints (semantics §6): a processor may keep the batches it committed
 * in one store transaction and make them durable together later (the
 * engine: store.checkpoint_interval_ms). Kafka holds each of them already
 * (the changelog), so what such a transaction loses — a kill, a
 * batch_abort (which takes the batches before it with it), a failed
 * checkpoint — is restored from the changelog: the loop asks behind() after
 * every batch_abort, failed batch_commit and failed checkpoint, and
 * restores those partitions before it processes any of their records
 * again; a kill is answered by the restore every assignment makes.
 */
#ifndef SEQGATE_PROCESSOR_H
#define SEQGATE_PROCESSOR_H

#include "kafka_changelog.h"
#include "seqgate.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sg_effect_kind {
        SG_EFFECT_OUTPUT = 1, /**< a record for the output topic (also used for
                                   snapshot request records to a request topic) */
        SG_EFFECT_DLQ = 2,    /**< a record for the DLQ topic */
        SG_EFFECT_HTTP_GET = 3,  /**< not a record: an HTTP GET the loop starts
                                     only AFTER batch_commit succeeded (so the
                                     request is durable before it is sent).
                                     url, request_id, auth_env, timeout_ms set;
                                     topic/key/value unused. */
        SG_EFFECT_CHANGELOG = 4, /**< a changelog record (semantics §6, both
                                      guarantees): topic = the input topic's
                                      changelog, partition = the input
                                      partition; key = the database byte
                                      (SG_DB_*, never 0xFF: the loop's own
                                      records) and the store key without
                                      the partition prefix; value NULL =
                                      tombstone */
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
        const char *topic; /**< destination topic */
        int32_t partition; /**< destination partition, or -1: the
                                        producer's partitioner (murmur2) */
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        int64_t timestamp_ms; /**< record timestamp to keep, or 0 */
        const sg_header_t *headers;
        size_t header_cnt;
        const sg_header_t *extra;
        size_t extra_cnt;
        /* SG_EFFECT_HTTP_GET only: */
        const char *url;        /**< absolute URL, already percent-encoded */
        const char *request_id; /**< echoed back as the reply record's key */
        const char *auth_env;   /**< env variable holding the Authorization
                                        header value, or NULL */
        int64_t timeout_ms;     /**< whole-transfer timeout */
} sg_effect_t;

/**
 * The size of a record as librdkafka's producer counts it against
 * message.max.bytes (rdkafka_msg.c: the v2 record's largest framing, 36
 * bytes, plus key, value and every header's name, value and their varint
 * lengths): @p headers then @p extra, as an effect carries them. The broker
 * counts the same record plus its record batch's framing (61 bytes)
 * against the topic's max.message.bytes. Pure; thread-safe.
 */
size_t sg_record_wire_size(size_t key_len, size_t value_len,
                           const sg_header_t *headers, size_t header_cnt,
                           const sg_header_t *extra, size_t extra_cnt);

/** sg_record_wire_size() of effect @p ef. */
size_t sg_effect_wire_size(const sg_effect_t *ef);

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
        /** The batch's effects so far. Append-only within an attempt: an
         *  effect, once process() or tick() returned, is never changed or
         *  withdrawn by a later call of the same batch, and its memory
         *  stays until batch_commit/batch_abort — the loop produces effects
         *  while the batch is still being decided (docs/guarantees.md
         *  "Producing while deciding", kafka_batch.c). */
        size_t (*effects)(void *opaque, const sg_effect_t **effectsp);
        /** Commits the batch's decisions (called only after every effect
         *  was delivered): the next batch sees them; they are durable in
         *  the store at once or at the next checkpoint (see above). An
         *  error: the batch's decisions and those since the last
         *  checkpoint may be lost from the store (behind()). */
        sg_err_t (*batch_commit)(void *opaque, char *errstr,
                                 size_t errstr_size);
        /** Forgets the batch's decisions, and (checkpoints) those of the
         *  batches committed since the last checkpoint: their partitions
         *  are then behind(). Never fails. */
        void (*batch_abort)(void *opaque);
        /** Makes every committed batch durable in the store now (a
         *  checkpoint), with no batch open: before partitions are revoked,
         *  before an assignment, at a clean stop. An error: those batches
         *  are lost from the store and their partitions behind(). May be
         *  NULL (nothing held back). */
        sg_err_t (*checkpoint)(void *opaque, char *errstr, size_t errstr_size);
        /** Whether the store of partition @p topic [@p partition] lost
         *  committed batches (see above) and must be restored from its
         *  changelog (restore_begin … restore_end clears it) before any of
         *  its records is processed: the processor refuses them until then.
         *  May be NULL: never. */
        bool (*behind)(void *opaque, const char *topic, int32_t partition);
        /** Grows the store after SG_ERR_MAP_FULL (no batch open). May be NULL. */
        sg_err_t (*grow)(void *opaque, char *errstr, size_t errstr_size);
        /**
         * A partition was assigned (no batch open). Sets *offsetp to the
         * input offset the store reflects (next offset to read), or -1 if
         * none. SG_ERR_FOREIGN: the store belongs to another group.
         */
        sg_err_t (*assign)(void *opaque, const char *topic, int32_t partition,
                           const char *group_id, int64_t *offsetp, char *errstr,
                           size_t errstr_size);
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

        /* ---- records Kafka cannot take (semantics §3 "A record the
         *      output topic cannot take"); both may be NULL ---- */

        /**
         * The largest record, in sg_record_wire_size() bytes, that Kafka
         * takes for @p topic (an output, DLQ, snapshot request or
         * changelog topic: the smaller of the producer's message.max.bytes
         * and the topic's max.message.bytes less its batch framing), or,
         * with @p topic NULL, for every topic (the producer's own limit).
         * Told by the loop once it connected, before any batch; a topic it
         * could not describe gets no call. @p topic is borrowed for the
         * call only.
         */
        void (*size_limit)(void *opaque, const char *topic, size_t max_bytes);
        /**
         * Kafka refused effect @p index of the batch for the record it is
         * (MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD;
         * @p too_large: for its size; @p reason: the broker's words), when
         * producing it or in its delivery report. Called while the batch is
         * open; the loop then aborts the batch and runs the same records
         * again. @returns true when the processor will route that record
         * differently in the re-run (a DLQ record output_rejected, or a DLQ
         * record without its value), false when it cannot (the batch then
         * fails as after any delivery error and is re-read after a
         * back-off). The processor decides; the loop only reports.
         */
        bool (*refused)(void *opaque, size_t index, bool too_large,
                        const char *reason);

        /* ---- the changelog (semantics §6); all may be NULL: a processor
         * without restore_begin keeps no state that follows a partition,
         * and the loop then uses no changelog ---- */

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
        /** Restore, instead of step 3 (a standby's read that failed,
         *  semantics §6 "Standby replicas"): forgets what the open restore
         *  applied since its last checkpoint; the store stays as that
         *  checkpoint left it. Nothing open: nothing. May be NULL (then no
         *  standby is kept). Never fails. */
        void (*restore_abort)(void *opaque, const char *topic,
                              int32_t partition);

        /* at_least_once changelog fencing (kafka.h "Changelog fencing") */

        /** The changelog epoch kept with the checkpoint restore_begin just
         *  returned, -1 if none (a full restore, or a store written before
         *  epochs). Called between restore_begin and restore_end. */
        int64_t (*changelog_epoch_get)(void *opaque, const char *topic,
                                       int32_t partition);
        /** The epoch in force at the restore's read position: kept with
         *  every checkpoint committed from now on (restore_apply's periodic
         *  ones, restore_end, and the batches after it). */
        void (*changelog_epoch_set)(void *opaque, const char *topic,
                                    int32_t partition, int64_t epoch);

        /* the changelog id, both guarantees (kafka_changelog.h "The changelog
         * id"; semantics §6 "The changelog's identity"); both may be NULL:
         * then no id is written or checked */

        /** The id record the partition's store expects its changelog to
         *  hold (kept in its meta) into *out; false if none. Called after
         *  restore_begin (which reads it from the store). */
        bool (*changelog_id_get)(void *opaque, const char *topic,
                                 int32_t partition, sg_changelog_id_t *out);
        /** The id record to keep with the partition's store from now on
         *  (NULL: none): during a restore, with its checkpoints; after one
         *  (no batch open), written into the store at once.
         *  @returns SG_OK, SG_ERR_INVALID (no batch may be open), a store
         *  error. */
        sg_err_t (*changelog_id_set)(void *opaque, const char *topic,
                                     int32_t partition,
                                     const sg_changelog_id_t *id, char *errstr,
                                     size_t errstr_size);
        /**
         * The committed store value the changelog key @p key names (the
         * key of an SG_EFFECT_CHANGELOG record), so that the loop can
         * rewrite a key whose last changelog record is void. *valuep:
         * malloc'd (caller frees), NULL when the key is absent (the loop
         * writes a tombstone). Only with no batch and no restore open.
         * @returns SG_OK, SG_ERR_INVALID, SG_ERR_NOMEM, a store error.
         */
        sg_err_t (*changelog_value)(void *opaque, const char *topic,
                                    int32_t partition, const void *key,
                                    size_t key_len, void **valuep,
                                    size_t *value_lenp, char *errstr,
                                    size_t errstr_size);
} sg_processor_t;

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_PROCESSOR_H */
