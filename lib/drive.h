/*
 * drive.h — the engine driven offline, without Kafka: the one driver of
 * the batch protocol (processor.h) for the tools that judge records
 * without a Kafka loop (seqgatectl simulate and audit; tests).
 *
 * What it does as the Kafka loop does (kafka_batch.c sg_loop_batch; the
 * protocol's statement is processor.h):
 *  - per batch: batch_begin → process() each record (Kafka records in the
 *    order given, then records of SG_SNAPSHOT_HTTP_TOPIC) → position() for
 *    every assigned partition → tick() → the effects, each "delivered" at
 *    the next offset of its topic partition (delivered()) → batch_commit;
 *  - SG_ERR_MAP_FULL before the commit point: batch_abort, grow(), and the
 *    same records again, for as long as the store grows (the loop's
 *    policy: no retry cap; a growth that fails ends the batch with
 *    "growing the store: ..."); store.map_size_bytes and
 *    store.map_growth_bytes size the temporary store as they size the
 *    daemon's;
 *  - SG_PAUSE (semantics §4 caps): that partition's batch stops at the
 *    record; the record and every later one of the partition are kept by
 *    the driver (copied) and offered again, in offset order, in the first
 *    batch at or after pause_retry_ms past the pause — after an empty
 *    batch at that time first, as the loop keeps ticking while a
 *    partition is paused. Records of a paused partition given meanwhile
 *    wait behind the kept ones (a paused partition is not fetched). A
 *    paused partition's lag is reported unknown (-1), as the loop reports
 *    it; the others' comes from the caller's lag hook (none: 0, read to
 *    the end);
 *  - durability (semantics §6 "Durability of the store"): the temporary
 *    store gets the guarantee's durability (sg_engine_store_durability:
 *    deferred syncs), as the daemon's does.
 * What differs, because there is no changelog topic (semantics §6
 * "Checkpoints"): every batch is a checkpoint (processor.h checkpoint()
 * right after batch_commit), so an aborted batch never takes an earlier
 * one with it; and the driver keeps a copy of the batch's changelog
 * effects until it committed, so that a batch_commit or checkpoint that
 * fails once the effects were reported (a full map: the store grown
 * first) is answered as the loop answers it — the batch stays committed
 * and the partitions behind() are restored (restore_begin/apply/end) from
 * those records. A restore that fails leaves the driver refusing every
 * later batch (SG_ERR_INVALID).
 *
 * Effects reach the caller before batch_commit (the loop produces them
 * before it commits), grouped by the step that added them: one call per
 * process() that added any, then one for tick(). An attempt that fails
 * before its effects are reported (a full map: aborted and run again)
 * reports nothing. Memory handed to a hook is borrowed for the call.
 *
 * Thread-safety: one driver per thread; nothing here prints or exits.
 */
#ifndef SEQGATE_DRIVE_H
#define SEQGATE_DRIVE_H

#include "config.h"
#include "engine.h"
#include "processor.h"
#include "seqgate.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_drive sg_drive_t;

/** What one committed batch was (sg_drive_hooks_t committed). */
typedef struct sg_drive_batch {
        int64_t now_ms; /**< its processing time, ms since the epoch */
        /** the records offered (the caller's and kept ones offered again),
         *  in the order processed; results[i] what became of recs[i]:
         *  SG_PROCESSED, or SG_PAUSE (kept: the record the partition paused
         *  at, or a later one of the partition, not offered) */
        const sg_record_t *recs;
        const sg_process_result_t *results;
        size_t cnt;
        unsigned grows; /**< store growths the batch needed (MAP_FULL) */
} sg_drive_batch_t;

typedef struct sg_drive_hooks {
        void *opaque; /**< passed to every hook */
        /**
         * The effects [0, cnt) one step of the batch added: process() of
         * @p origin, or (@p origin NULL) tick(); @p offsets[i] the offset
         * efs[i] is delivered at (-1: an HTTP GET, started after the
         * commit). Called once the batch reached its commit point, before
         * delivered() and batch_commit. An error aborts the batch and is
         * returned by sg_drive_batch. May be NULL.
         */
        sg_err_t (*effects)(void *opaque, const sg_record_t *origin,
                            const sg_effect_t *efs, const int64_t *offsets,
                            size_t cnt, char *errstr, size_t errstr_size);
        /** After each batch's batch_commit and checkpoint: what it was.
         *  The engine's metrics and store show the batch. May be NULL. */
        void (*committed)(void *opaque, const sg_drive_batch_t *batch);
        /** Records of partition @p topic [@p partition] not yet given to
         *  the driver (processor.h position()). May be NULL: 0. */
        int64_t (*lag)(void *opaque, const char *topic, int32_t partition);
} sg_drive_hooks_t;

/**
 * Creates a driver of a new engine over @p conf (borrowed; it must outlive
 * the driver) on @p store (borrowed; NULL: a store in a new temporary
 * directory named @p tmp_prefix + "XXXXXX" under $TMPDIR or /tmp, removed
 * by sg_drive_destroy). @p group_id: what assign() is told. @p hooks is
 * copied (NULL: none).
 * @returns SG_OK, SG_ERR_IO (the temporary directory), SG_ERR_NOMEM, or a
 *          store or engine error (errstr says why).
 */
sg_err_t sg_drive_new(const sg_config_t *conf, sg_store_t *store,
                      const char *tmp_prefix, const char *group_id,
                      const sg_drive_hooks_t *hooks, sg_drive_t **drivep,
                      char *errstr, size_t errstr_size);

/** Destroys the engine, closes a temporary store and removes its
 *  directory. Kept records are dropped. NULL: no-op. */
void sg_drive_destroy(sg_drive_t *drive);

/** The driver's engine and store (owned by the driver, or the caller's
 *  store): read them between batches only. */
sg_engine_t *sg_drive_engine(sg_drive_t *drive);
sg_store_t *sg_drive_store(sg_drive_t *drive);

/**
 * Assigns partition @p topic [@p partition] (processor.h assign), once;
 * sg_drive_batch assigns a record's partition by itself before its first
 * record. @returns SG_OK or the engine's error.
 */
sg_err_t sg_drive_assign(sg_drive_t *drive, const char *topic,
                         int32_t partition, char *errstr, size_t errstr_size);

/**
 * Runs the records @p recs [0, @p cnt) (borrowed for the call; none: a
 * tick) as one batch at processing time @p now_ms (ms since the epoch;
 * the engine's clock, sg_engine_set_clock) — after the records kept by a
 * pause whose pause_retry_ms passed by then (preceded by a batch of their
 * own, see above). Records of a partition paused at @p now_ms are kept.
 * @returns SG_OK once committed (SG_ERR_INVALID: a batch failed for good
 *          before, SG_ERR_NOMEM, the engine's or the store's error, or
 *          the effects hook's; errstr says why — "growing the store: ..."
 *          when a growth failed).
 */
sg_err_t sg_drive_batch(sg_drive_t *drive, const sg_record_t *recs, size_t cnt,
                        int64_t now_ms, char *errstr, size_t errstr_size);

/** Records the driver keeps for paused partitions. */
size_t sg_drive_kept(const sg_drive_t *drive);

/** The earliest time (ms since the epoch) a kept record is offered
 *  again, or -1 when none is kept. */
int64_t sg_drive_resume_ms(const sg_drive_t *drive);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_DRIVE_H */
