/*
 * sizing_calc.c — the arithmetic of seqgatectl sizing (sizing_calc.h).
 */
#include "sizing_calc.h"

#include <string.h>

/* Bytes per entry of the databases @p a and (-1: none) @p b, counted
 * against @p a's entries; 0 when @p a has none. */
static double per_entry(const sg_db_stat_t *st, int a, int b) {
        if (!st[a].entries)
                return 0;
        double bytes = (double)st[a].pages * (double)st[a].page_size;
        if (b >= 0)
                bytes += (double)st[b].pages * (double)st[b].page_size;
        return bytes / (double)st[a].entries;
}

void sg_sizing_rates_measure(const sg_db_stat_t *st, double framing_bytes,
                             sg_sizing_rates_t *out) {
        memset(out, 0, sizeof(*out));
        /* a dedup record's changelog record: its key (the database byte
         * and the key hash) and its value (store.h) */
        double dedup_log = 1 + SG_KEY_HASH_LEN + SG_DEDUP_VALUE_LEN;
        out->dedup_log_bytes = dedup_log + framing_bytes;
        out->dedup_bytes = SG_SIZING_DEDUP_EST_BYTES;
        out->agg_bytes = SG_SIZING_AGG_EST_BYTES;
        if (st && st[SG_STAT_DEDUP].entries) {
                out->dedup_entries = st[SG_STAT_DEDUP].entries;
                double b = per_entry(st, SG_STAT_DEDUP, SG_STAT_FILTER);
                out->dedup_measured =
                        out->dedup_entries >= SG_SIZING_MIN_SAMPLE;
                if (out->dedup_measured)
                        out->dedup_bytes = b;
                else
                        out->dedup_sampled_bytes = b;
        }
        if (st && st[SG_STAT_AGG].entries) {
                out->agg_entries = st[SG_STAT_AGG].entries;
                double b = per_entry(st, SG_STAT_AGG, -1);
                out->agg_measured = out->agg_entries >= SG_SIZING_MIN_SAMPLE;
                if (out->agg_measured)
                        out->agg_bytes = b;
                else
                        out->agg_sampled_bytes = b;
        }
        /* its key and value, about its bytes in the store */
        out->agg_log_bytes = out->agg_bytes + framing_bytes;
}

void sg_sizing_compute(const sg_sizing_rates_t *r, uint64_t events_per_day,
                       int64_t ttl_ms, uint64_t aggregates, sg_sizing_t *out) {
        memset(out, 0, sizeof(*out));
        out->ttl_days = (double)ttl_ms / 86400000.0;
        out->dedup_records = (double)events_per_day * out->ttl_days;
        out->dedup_total = out->dedup_records * r->dedup_bytes;
        out->agg_total = (double)aggregates * r->agg_bytes;
        out->changelog_records = out->dedup_records + (double)aggregates;
        out->changelog_total = out->dedup_records * r->dedup_log_bytes +
                               (double)aggregates * r->agg_log_bytes;
        out->total = out->dedup_total + out->agg_total + out->changelog_total;
        double linger = out->dedup_records / SG_DEDUP_BUCKETS;
        out->peak_total =
                out->total + linger * (r->dedup_bytes + r->dedup_log_bytes);
}
