/*
 * sizing_calc.h — the arithmetic of seqgatectl sizing (semantics §8, the
 * seed's estimate): events/day × bytes per dedup record × TTL in days,
 * plus aggregates × bytes per aggregate record, plus the changelog (a
 * compacted topic holds about one record per live store key). Pure; the
 * CLI (sizing.c) measures the inputs from a store and prints the terms.
 */
#ifndef SEQGATECTL_SIZING_CALC_H
#define SEQGATECTL_SIZING_CALC_H

#include "store.h"

#include <stdbool.h>
#include <stdint.h>

/* The documented per-record estimates used when the store has no record
 * of a kind to measure (docs/seqgatectl.md "seqgatectl sizing"), store
 * format 3 measured with bench/store_bytes (1 M events, sealed segments
 * and their filters, LMDB's page overhead included, the map's headroom
 * not): ~55 B per dedup record (the seed counted ~200 B, semantics §8),
 * ~45 B per aggregate record. */
#define SG_SIZING_DEDUP_EST_BYTES 55.0
#define SG_SIZING_AGG_EST_BYTES 45.0

/* Fewer records of a kind than this and its bytes per record are not
 * measured but estimated (docs/seqgatectl.md "seqgatectl sizing"): every
 * LMDB database has its own pages, so a few records measure mostly empty
 * page space (8 dedup records measured ~12 times the estimate). */
#define SG_SIZING_MIN_SAMPLE 1000

/* Per-record sizes, measured from a store or estimated. */
typedef struct sg_sizing_rates {
        double dedup_bytes;         /* per dedup record, its share of the
                                    segments' filters included */
        double dedup_log_bytes;     /* its changelog record (value + key +
                                    record framing) */
        bool dedup_measured;        /* false: the estimate */
        double dedup_sampled_bytes; /* measured from fewer than
                                        SG_SIZING_MIN_SAMPLE records, so
                                        not used (0: none) */
        double agg_bytes;           /* per aggregate record */
        double agg_log_bytes;       /* its changelog record */
        bool agg_measured;
        double agg_sampled_bytes; /* as dedup_sampled_bytes */
        uint64_t dedup_entries;   /* in the measured store */
        uint64_t agg_entries;
} sg_sizing_rates_t;

/* The estimate's terms, in bytes. */
typedef struct sg_sizing {
        double ttl_days;
        double dedup_records; /* live: events/day × TTL days */
        double dedup_total;
        double agg_total;
        double changelog_records; /* live dedup keys + aggregates */
        double changelog_total;
        double total;
        /* just before a dedup bucket ends: its expired keys still in the
         * store and the changelog, up to a bucket's width (TTL /
         * SG_DEDUP_BUCKETS, semantics §3 "Expiry") of events more */
        double peak_total;
} sg_sizing_t;

/*
 * Per-record sizes from @p st (sg_store_db_stats): a kind's pages × page
 * size / its entries (B-tree overhead and free space in its pages
 * included, so a real store's bytes per record); dedup counts the
 * filters' pages too. A changelog record: a dedup record's key and
 * 30-byte value, an aggregate's bytes in the store (its key and value,
 * about), each plus @p framing_bytes (the record's framing,
 * sg_record_wire_size of an empty record). A kind with fewer than
 * SG_SIZING_MIN_SAMPLE entries gets its SG_SIZING_*_EST_BYTES (measured
 * false), what its entries measured kept in *_sampled_bytes; *_entries
 * is the store's count either way. @p st NULL: no store, estimates only.
 */
void sg_sizing_rates_measure(const sg_db_stat_t *st, double framing_bytes,
                             sg_sizing_rates_t *out);

/* The terms for @p events_per_day, a dedup TTL of @p ttl_ms and
 * @p aggregates live aggregates. */
void sg_sizing_compute(const sg_sizing_rates_t *r, uint64_t events_per_day,
                       int64_t ttl_ms, uint64_t aggregates, sg_sizing_t *out);

#endif
