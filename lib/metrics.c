/*
 * metrics.c — counters operators watch (semantics §7), their stable names,
 * and their JSON rendering for the stats log line.
 */
#include "metrics.h"

#include "kafka.h" /* sg_loop_stats_t */

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static const char *const reason_names[SG_R__CNT] = {
        [SG_R_NONE] = "",
        [SG_R_MALFORMED] = "malformed",
        [SG_R_IDEMPOTENCY_CONFLICT] = "idempotency_conflict",
        [SG_R_AGGREGATE_QUARANTINED] = "aggregate_quarantined",
        [SG_R_STALE_VERSION] = "stale_version",
        [SG_R_ILLEGAL_TRANSITION] = "illegal_transition",
        [SG_R_UNKNOWN_EVENT_TYPE] = "unknown_event_type",
        [SG_R_VERSION_JUMP] = "version_jump",
        [SG_R_GAP_TIMEOUT] = "gap_timeout",
        [SG_R_PARK_OVERFLOW] = "park_overflow",
        [SG_R_VERSION_CONFLICT] = "version_conflict",
        [SG_R_OUTPUT_REJECTED] = "output_rejected",
        [SG_R_FENCED_EPOCH] = "fenced_epoch",
};

const char *sg_reason_name(sg_reason_t r) {
        if ((int)r < 0 || r >= SG_R__CNT)
                return "";
        return reason_names[r];
}

static const int64_t hist_bounds_ms[SG_HIST_BUCKETS] = SG_HIST_BOUNDS_MS;

int64_t sg_hist_bound_ms(int i) {
        return i >= 0 && i < SG_HIST_BUCKETS ? hist_bounds_ms[i] : INT64_MAX;
}

void sg_hist_observe(sg_hist_t *h, int64_t ms) {
        int i = 0;
        if (ms < 0)
                ms = 0;
        while (i < SG_HIST_BUCKETS && ms > hist_bounds_ms[i])
                i++;
        if (i < SG_HIST_BUCKETS)
                h->bucket[i]++;
        h->count++;
        h->sum_ms += ms;
}

void sg_hist_merge(sg_hist_t *h, const sg_hist_t *d) {
        for (int i = 0; i < SG_HIST_BUCKETS; i++)
                h->bucket[i] += d->bucket[i];
        h->count += d->count;
        h->sum_ms += d->sum_ms;
}

/* The merge: counters add, gauges copy, LATEST rows by hand below. */
#define ADD_COUNTER(name) m->name += d->name;
#define ADD_GAUGE(name) m->name = d->name;
#define ADD_GAUGE_MS(name) m->name = d->name;
#define ADD_LATEST(name)
#define ADD_LATEST_MS(name)
#define ADD_HIST(name) sg_hist_merge(&m->name, &d->name);
#define ADD(name, kind, prom, help) ADD_##kind(name)

void sg_metrics_add(sg_metrics_t *m, const sg_metrics_t *d) {
        SG_ENGINE_METRICS_HEAD(ADD)
        for (int i = 0; i < SG_R__CNT; i++)
                m->dlq_total[i] += d->dlq_total[i];
        SG_ENGINE_METRICS_TAIL(ADD)
        /* kept from the last batch that resolved a snapshot */
        if (d->snapshot_resolve_ms_last) {
                m->snapshot_resolve_ms_last = d->snapshot_resolve_ms_last;
                if (d->snapshot_resolve_ms_max > m->snapshot_resolve_ms_max)
                        m->snapshot_resolve_ms_max = d->snapshot_resolve_ms_max;
        }
}

/* The sum over topics (metrics_list.h): counters and gauges add up, a
 * _MS gauge takes the largest, histograms merge, LATEST rows by hand. */
#define SUM_COUNTER(name) t->name += m->name;
#define SUM_GAUGE(name) t->name += m->name;
#define SUM_GAUGE_MS(name)                                                     \
        if (m->name > t->name)                                                 \
                t->name = m->name;
#define SUM_LATEST(name)
#define SUM_LATEST_MS(name)
#define SUM_HIST(name) sg_hist_merge(&t->name, &m->name);
#define SUM(name, kind, prom, help) SUM_##kind(name)

void sg_metrics_sum(sg_metrics_t *t, const sg_metrics_t *m) {
        SG_ENGINE_METRICS_HEAD(SUM)
        for (int i = 0; i < SG_R__CNT; i++)
                t->dlq_total[i] += m->dlq_total[i];
        SG_ENGINE_METRICS_TAIL(SUM)
        /* the last resolve of any topic (none is more recent than another
         * within one batch), and the longest */
        if (m->snapshot_resolve_ms_last)
                t->snapshot_resolve_ms_last = m->snapshot_resolve_ms_last;
        if (m->snapshot_resolve_ms_max > t->snapshot_resolve_ms_max)
                t->snapshot_resolve_ms_max = m->snapshot_resolve_ms_max;
}

#undef SUM
#undef SUM_COUNTER
#undef SUM_GAUGE
#undef SUM_GAUGE_MS
#undef SUM_LATEST
#undef SUM_LATEST_MS
#undef SUM_HIST

#undef ADD
#undef ADD_COUNTER
#undef ADD_GAUGE
#undef ADD_GAUGE_MS
#undef ADD_LATEST
#undef ADD_LATEST_MS
#undef ADD_HIST

/** Appends to @p buf (snprintf-style: @p off counts what would have been
 *  written). Returns false on an encoding error. */
static bool append(char *buf, size_t size, size_t *off, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static bool append(char *buf, size_t size, size_t *off, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf ? buf + (*off < size ? *off : size) : NULL,
                      *off < size ? size - *off : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return false;
        *off += (size_t)n;
        return true;
}

/* One member per row, ',' before all but the first of the object. */
#define PUT_COUNTER(name)                                                      \
        if (!append(buf, size, &off, "%s\"" #name "\":%" PRIu64,               \
                    off ? "," : "", (uint64_t)m->name))                        \
                return -1;
#define PUT_SIGNED(name)                                                       \
        if (!append(buf, size, &off, "%s\"" #name "\":%" PRId64,               \
                    off ? "," : "", (int64_t)m->name))                         \
                return -1;
/* a gauge not known (negative: a lag no offset gave yet) is null, never a
 * sentinel number (docs/operating.md "Logs") */
#define PUT_GAUGE(name)                                                        \
        if (m->name < 0) {                                                     \
                if (!append(buf, size, &off, "%s\"" #name "\":null",           \
                            off ? "," : ""))                                   \
                        return -1;                                             \
        } else                                                                 \
                PUT_SIGNED(name)
#define PUT_GAUGE_MS(name) PUT_GAUGE(name)
#define PUT_LATEST(name) PUT_SIGNED(name)
#define PUT_LATEST_MS(name) PUT_SIGNED(name)
#define PUT_HIST(name) /* not in the stats line */
#define PUT(name, kind, prom, help) PUT_##kind(name)

int sg_metrics_json(const sg_metrics_t *m, char *buf, size_t size) {
        size_t off = 0;

        SG_ENGINE_METRICS_HEAD(PUT)
        uint64_t dlq = 0;
        for (int i = 1; i < SG_R__CNT; i++)
                dlq += m->dlq_total[i];
        if (!append(buf, size, &off,
                    ",\"dlq_total\":%" PRIu64 ",\"dlq_by_reason\":{", dlq))
                return -1;
        for (int i = 1; i < SG_R__CNT; i++)
                if (!append(buf, size, &off, "%s\"%s\":%" PRIu64,
                            i > 1 ? "," : "", reason_names[i], m->dlq_total[i]))
                        return -1;
        if (!append(buf, size, &off, "}"))
                return -1;
        SG_ENGINE_METRICS_TAIL(PUT)
        return (int)off;
}

int sg_loop_stats_json(const sg_loop_stats_t *m, char *buf, size_t size) {
        size_t off = 0;

        SG_LOOP_STATS(PUT)
        return (int)off;
}
