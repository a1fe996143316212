/*
 * benchutil.h — what the engine-only benchmarks share (engine_bench,
 * store_bytes; now_s also envelope_bench and scale_prime): the clocks, the
 * CloudEvents (binary mode) they feed, the engine on a fresh store in a
 * temporary data_dir, and a batch run through the processor interface as
 * the Kafka loop runs it.
 *
 * Nothing here is timed by itself; each program says what its figures
 * include. Single-threaded, as the programs are.
 */
#ifndef SG_BENCHUTIL_H
#define SG_BENCHUTIL_H

#include "config.h"
#include "engine.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC (wall time between two calls). */
double bench_now_s(void);

/* The process's CPU seconds, user and sys (CLOCK_PROCESS_CPUTIME_ID). */
double bench_cpu_s(void);

/* One event with the buffers its record points into. */
typedef struct bench_ev {
        char agg[32], id[32], seq[24], value[200];
        sg_header_t hd[5];
        sg_record_t rec;
} bench_ev_t;

/* Event @p n: version @p version of aggregate @p agg ("agg-<agg>", the
 * record key), ce_id "ev-<n>", ce_type "order.updated", source "/bench",
 * at offset @p n of "orders" partition @p partition, timestamp 1 ms. The
 * value is {"order":"<agg>","amount":<n % 1000>} (about 30 bytes), and
 * with @p note a padding "note" string after it (engine_bench's value,
 * about 105 bytes). */
void bench_ev_make(bench_ev_t *e, uint64_t agg, uint64_t version, uint64_t n,
                   int32_t partition, bool note);

/* An engine on a fresh store in @p dir (a data_dir the caller made) for
 * topic "orders" (output "out", DLQ "dlq"), guarantee @p guarantee, a
 * 64 GiB map; @p store_extra: more keys of the "store" block, each after a
 * comma (e.g. ",\"checkpoint_interval_ms\":100"), or "". On success fills
 * *confp, *storep, *engp (the caller destroys them: sg_engine_destroy,
 * sg_store_close, sg_config_destroy) and *p, and returns 0; else prints
 * "@p who: error" on stderr and returns -1. */
int bench_engine_open(const char *who, const char *dir, const char *guarantee,
                      const char *store_extra, sg_config_t **confp,
                      sg_store_t **storep, sg_engine_t **engp,
                      sg_processor_t *p);

/* Runs one batch of @p cnt events through @p p as the Kafka loop does:
 * batch_begin, process each, tick, delivered() for the effects (offset:
 * the effect's index), batch_commit. @p outputs: NULL, every effect is
 * told delivered; else the output effects are counted into *outputs and
 * not told delivered (engine_bench's timed work). Returns 0, or -1 after
 * printing "@p who: error" on stderr. */
int bench_run_batch(const char *who, sg_processor_t *p, bench_ev_t *evs,
                    size_t cnt, size_t *outputs);

/* Removes @p dir and everything below it (rm -rf). Returns 0, or -1 when
 * the command failed. */
int bench_rmdir(const char *dir);

#endif
