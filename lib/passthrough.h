/*
 * passthrough.h — the benchmark baseline processor: every input record is
 * copied unchanged (same key, value, headers and timestamp) to its topic's
 * output topic, on the same partition (output_partitioning "input") or the
 * producer's murmur2 partitioner (output_partitioning "murmur2"). No state,
 * no dedup, no ordering, no DLQ.
 *
 * Driven by the same Kafka loop (kafka.h) as the engine, it measures "a plain
 * librdkafka consume→produce loop built from the same Kafka module", so the
 * difference to the engine's numbers is the cost of deciding.
 *
 * Effects point into the records' memory (no copies): this relies on the
 * loop's guarantee (kafka.h) that a batch's records stay valid until its
 * batch_commit or batch_abort returned.
 *
 * Thread-safety: one instance per loop thread.
 */
#ifndef SEQGATE_PASSTHROUGH_H
#define SEQGATE_PASSTHROUGH_H

#include "config.h"
#include "processor.h"
#include "seqgate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_passthrough sg_passthrough_t;

/**
 * Creates a pass-through processor for @p conf (borrowed; must outlive it).
 * @returns SG_OK, SG_ERR_INVALID (NULL argument), SG_ERR_NOMEM.
 */
sg_err_t sg_passthrough_new(const sg_config_t *conf, sg_passthrough_t **ptp);

/** Fills @p proc with the pass-through's processor interface. */
void sg_passthrough_processor(sg_passthrough_t *pt, sg_processor_t *proc);

/** Destroys @p pt. NULL is a no-op. */
void sg_passthrough_destroy(sg_passthrough_t *pt);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_PASSTHROUGH_H */
