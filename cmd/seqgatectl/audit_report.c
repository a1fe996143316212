/*
 * audit_report.c — the report of seqgatectl audit (docs/seqgatectl.md "Audit a
 * topic before adopting seqgate"). One JSON document is built from what
 * audit_drive.c measured; --json prints it, and the terminal text and the
 * HTML page are both drawn from that same document (parsed back), so the
 * three never disagree.
 *
 * The HTML page is self-contained: a summary at the top (the first finding,
 * the suggested settings and the store estimate, each with how sure it is;
 * each line carries data-path and data-value), inline CSS, charts as inline
 * SVG written here (each bar carries data-label and data-value, each chart
 * data-total),
 * the JSON document embedded (<script type="application/json"
 * id="audit-data">) and a small inline script that checks every chart's
 * bars and every summary line against it and marks the page (body
 * data-check="ok") — no network, no external file.
 */
#include "audit.h"
#include "cli.h"
#include "sizing_calc.h"

#include "metrics.h"
#include "seqgate.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS_H 3600000.0
#define MS_DAY 86400000.0
#define TOP_N 10
/* The keys the report names, as the configuration file spells them (the
 * key table: sg_config_topic_key), so that a suggestion reads as the line
 * to write. */
static const char *gap_key(void) {
        static char buf[64];
        return sg_config_topic_key(offsetof(sg_topic_config_t, gap_timeout_ms),
                                   buf, sizeof(buf));
}

static const char *ttl_key(void) {
        static char buf[64];
        return sg_config_topic_key(offsetof(sg_topic_config_t, dedup_ttl_ms),
                                   buf, sizeof(buf));
}

/* The least gap_timeout_ms and dedup TTL the audit suggests, ms
 * (docs/seqgatectl.md "Audit a topic before adopting seqgate"): below a second
 * a suggestion fits the audited records exactly, not the next producer retry or
 * broker hiccup, and dedup.ttl_ms takes nothing below 1000. */
#define SUGGEST_FLOOR_MS 1000
/* Below these an estimate is printed with its basis and a warning
 * (docs/seqgatectl.md "How sure the estimates are"): below
 * AU_SIZING_MIN_KEYS dedup records the bytes per record are seqgatectl
 * sizing's estimate, not measured (a few records do not fill the
 * temporary store's pages); events/day is extrapolated from the audited
 * span, which must hold a day's rhythm at least roughly. A quantile q of
 * fewer than 1 / (1 - q) samples is their maximum, not that quantile. */
#define SAMPLE_MIN_SPAN_MS 3600000

/* Histogram bucket upper bounds (inclusive); the last bucket is +Inf. */
static const int64_t ms_bounds[] = {0,     10,     100,     1000,    10000,
                                    60000, 600000, 3600000, 86400000};
static const int64_t ver_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 1024};
#define NBOUNDS(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* the JSON document                                                   */

static void j_rate(cJSON *o, const char *name, uint64_t n, int64_t span) {
        if (span > 0)
                cJSON_AddNumberToObject(
                        o, name,
                        round((double)n * MS_H / (double)span * 1000) / 1000);
        else
                cJSON_AddNullToObject(o, name);
}

static void j_count(cJSON *parent, const char *name, uint64_t n, int64_t span) {
        cJSON *o = cJSON_AddObjectToObject(parent, name);
        j_u64(o, "count", n);
        j_rate(o, "per_hour", n, span);
}

/* A distribution: count, quantiles, max and the histogram. */
static cJSON *j_dist(au_samples_t *s, const int64_t *bounds, size_t nb) {
        cJSON *o = cJSON_CreateObject();
        j_u64(o, "count", s->cnt);
        j_i64(o, "p50", au_quantile(s, 0.5));
        j_i64(o, "p99", au_quantile(s, 0.99));
        j_i64(o, "p999", au_quantile(s, 0.999));
        j_i64(o, "max", s->cnt ? s->v[s->cnt - 1] : 0);
        cJSON_AddBoolToObject(o, "samples_capped", s->cap_hit);
        cJSON *h = cJSON_AddArrayToObject(o, "histogram");
        for (size_t b = 0; b <= nb; b++) {
                uint64_t n = 0;
                for (size_t i = 0; i < s->cnt; i++)
                        if ((b == nb || s->v[i] <= bounds[b]) &&
                            (b == 0 || s->v[i] > bounds[b - 1]))
                                n++;
                cJSON *e = cJSON_CreateObject();
                if (b < nb)
                        j_i64(e, "le", bounds[b]);
                else
                        cJSON_AddNullToObject(e, "le");
                j_u64(e, "count", n);
                cJSON_AddItemToArray(h, e);
        }
        return o;
}

static int cmp_refusals(const void *a, const void *b) {
        const au_agg_t *x = *(au_agg_t *const *)a, *y = *(au_agg_t *const *)b;
        return (x->refusals < y->refusals) - (x->refusals > y->refusals);
}
static int cmp_gaps(const void *a, const void *b) {
        const au_agg_t *x = *(au_agg_t *const *)a, *y = *(au_agg_t *const *)b;
        return (x->gaps < y->gaps) - (x->gaps > y->gaps);
}

static cJSON *j_top(au_drive_t *d, bool gaps) {
        cJSON *arr = cJSON_CreateArray();
        au_agg_t **v = malloc((d->agg_cnt + 1) * sizeof(*v));
        if (!v)
                return arr;
        size_t n = 0;
        for (size_t i = 0; i < d->agg_slots; i++)
                if (d->aggs[i].hash &&
                    (gaps ? d->aggs[i].gaps : d->aggs[i].refusals))
                        v[n++] = &d->aggs[i];
        qsort(v, n, sizeof(*v), gaps ? cmp_gaps : cmp_refusals);
        for (size_t i = 0; i < n && i < TOP_N; i++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "aggregate", v[i]->name);
                j_u64(e, "count", gaps ? v[i]->gaps : v[i]->refusals);
                cJSON_AddItemToArray(arr, e);
        }
        free(v);
        return arr;
}

/* The samples a quantile @p q needs to be more than their maximum. */
static size_t samples_needed(double q) {
        return (size_t)llround(1.0 / (1.0 - q));
}

/* How sure a quantile suggestion is: "samples" (@p n), and "enough"
 * when there are samples_needed(q) of them. */
static void j_samples(cJSON *e, size_t n, double q) {
        j_u64(e, "samples", n);
        cJSON_AddBoolToObject(e, "enough", n >= samples_needed(q));
}

/* Semantics §2 co-partitioning, the report's first finding: the aggregates
 * whose records came from more than one partition, the ones with the most
 * records off their first partition listed. */
static int cmp_elsewhere(const void *a, const void *b) {
        const au_agg_t *x = *(au_agg_t *const *)a, *y = *(au_agg_t *const *)b;
        return (x->elsewhere < y->elsewhere) - (x->elsewhere > y->elsewhere);
}

static cJSON *j_copart(au_drive_t *d) {
        cJSON *o = cJSON_CreateObject();
        j_u64(o, "aggregates_on_several_partitions", d->spanning);
        au_agg_t **v = malloc((d->agg_cnt + 1) * sizeof(*v));
        size_t n = 0;
        uint64_t off = 0;
        for (size_t i = 0; v && i < d->agg_slots; i++)
                if (d->aggs[i].hash && d->aggs[i].part_cnt > 1) {
                        v[n++] = &d->aggs[i];
                        off += d->aggs[i].elsewhere;
                }
        j_u64(o, "records_off_first_partition", off);
        cJSON *ex = cJSON_AddArrayToObject(o, "aggregates");
        if (v)
                qsort(v, n, sizeof(*v), cmp_elsewhere);
        for (size_t i = 0; v && i < n && i < TOP_N; i++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "aggregate", v[i]->name);
                cJSON *ps = cJSON_AddArrayToObject(e, "partitions");
                for (size_t k = 0; k < v[i]->part_cnt; k++)
                        cJSON_AddItemToArray(
                                ps, cJSON_CreateNumber(v[i]->parts[k]));
                cJSON_AddBoolToObject(e, "more_partitions", v[i]->parts_more);
                j_u64(e, "records_off_first_partition", v[i]->elsewhere);
                cJSON_AddItemToArray(ex, e);
        }
        free(v);
        j_u64(o, "records_aggregate_not_record_key",
              d->final.aggregate_not_record_key_total);
        /* past --max-aggregates the rest were not looked at */
        cJSON_AddBoolToObject(o, "every_aggregate_checked", !d->aggs_cap_hit);
        return o;
}

/* The gap_timeout_ms that would have resolved quantile @p q of the gaps:
 * over filled gaps (their durations) and gaps the deadline ended (at
 * least the time they waited: a lower bound). A gap of d ms is filled in
 * time when gap_timeout_ms > d (the deadline fires once parked_at +
 * gap_timeout_ms <= now, semantics §4): the quantile + 1 ms, at least
 * SUGGEST_FLOOR_MS ("floored" then). */
static void j_gap_suggest(cJSON *o, const char *name, au_drive_t *d, double q) {
        size_t n = d->gap_ms.cnt + d->gap_timeout_ms.cnt;
        cJSON *e = cJSON_AddObjectToObject(o, name);
        if (!n) {
                cJSON_AddNullToObject(e, "ms");
                cJSON_AddBoolToObject(e, "lower_bound", false);
                cJSON_AddBoolToObject(e, "floored", false);
                j_samples(e, 0, q);
                return;
        }
        au_samples_t all = {malloc(n * sizeof(int64_t)), 0, n, false};
        if (!all.v)
                return;
        if (d->gap_ms.cnt)
                memcpy(all.v, d->gap_ms.v, d->gap_ms.cnt * sizeof(int64_t));
        if (d->gap_timeout_ms.cnt)
                memcpy(all.v + d->gap_ms.cnt, d->gap_timeout_ms.v,
                       d->gap_timeout_ms.cnt * sizeof(int64_t));
        all.cnt = n;
        int64_t v = au_quantile(&all, q);
        free(all.v);
        bool lower = false;
        for (size_t i = 0; i < d->gap_timeout_ms.cnt; i++)
                lower |= d->gap_timeout_ms.v[i] <= v;
        bool floored = v + 1 < SUGGEST_FLOOR_MS;
        j_i64(e, "ms", floored ? SUGGEST_FLOOR_MS : v + 1);
        cJSON_AddBoolToObject(e, "lower_bound", lower);
        cJSON_AddBoolToObject(e, "floored", floored);
        j_samples(e, n, q);
}

static cJSON *build(au_drive_t *d, const au_part_t *parts, size_t part_cnt) {
        const sg_metrics_t *m = &d->final;
        int64_t span = d->records && d->last_ts > d->first_ts
                               ? d->last_ts - d->first_ts
                               : 0;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "topic", d->tc->name);
        cJSON *ps = cJSON_AddArrayToObject(r, "partitions");
        for (size_t i = 0; i < part_cnt; i++) {
                cJSON *p = cJSON_CreateObject();
                j_i64(p, "partition", parts[i].partition);
                j_i64(p, "from_offset", parts[i].from);
                j_i64(p, "to_offset", parts[i].to);
                j_u64(p, "records", parts[i].records);
                cJSON_AddItemToArray(ps, p);
        }
        j_u64(r, "records", d->records);
        j_time(r, "first_timestamp", d->records ? d->first_ts : 0);
        j_time(r, "last_timestamp", d->records ? d->last_ts : 0);
        j_i64(r, "span_ms", span);
        /* the rates per hour below are the span's counts scaled to an
         * hour: from a span under an hour, an extrapolation (80 records
         * in 1.5 s read as 192,000 an hour), said as the sizing says its
         * own (docs/seqgatectl.md "How sure the estimates are") */
        bool per_hour_enough = span >= SAMPLE_MIN_SPAN_MS;
        cJSON_AddBoolToObject(r, "per_hour_enough", per_hour_enough);
        if (per_hour_enough) {
                cJSON_AddNullToObject(r, "per_hour_warning");
        } else {
                char w[256];
                if (span > 0)
                        snprintf(w, sizeof(w),
                                 "a span of %.1f s, under an hour: the "
                                 "rates per hour are extrapolated from it; "
                                 "audit a longer range (--from, --to)",
                                 (double)span / 1000.0);
                else
                        snprintf(w, sizeof(w),
                                 "no span (fewer than two record "
                                 "timestamps): no rate per hour");
                cJSON_AddStringToObject(r, "per_hour_warning", w);
        }
        cJSON_AddStringToObject(r, "refetch", "unavailable");
        /* the first finding: without co-partitioning nothing else holds */
        cJSON_AddItemToObject(r, "co_partitioning", j_copart(d));

        cJSON *c = cJSON_AddObjectToObject(r, "counters");
        j_count(c, "dedup_hits", m->dedup_hits_total, span);
        j_count(c, "idempotency_parameter_conflicts",
                m->idempotency_parameter_conflicts_total, span);
        j_count(c, "stale_version_rejections",
                m->stale_version_rejections_total, span);
        j_count(c, "event_sequence_gaps", m->event_sequence_gaps_total, span);
        j_count(c, "applied", m->applied_total, span);
        j_count(c, "malformed", m->malformed_total, span);
        j_count(c, "gap_timeouts", m->gap_timeouts_total, span);
        cJSON *dl = cJSON_AddObjectToObject(r, "dlq");
        for (int i = SG_R_NONE + 1; i < SG_R__CNT; i++)
                j_count(dl, sg_reason_name((sg_reason_t)i), m->dlq_total[i],
                        span);
        cJSON *end = cJSON_AddObjectToObject(r, "at_end");
        j_i64(end, "parked_events", m->parked_events);
        j_i64(end, "quarantined_aggregates", m->quarantined_aggregates);
        j_u64(end, "records_left_paused", d->left_paused);

        cJSON *top = cJSON_AddObjectToObject(r, "top_aggregates");
        cJSON_AddItemToObject(top, "by_refusals", j_top(d, false));
        cJSON_AddItemToObject(top, "by_gaps", j_top(d, true));

        cJSON *ro = cJSON_AddObjectToObject(r, "reorder");
        j_u64(ro, "events", d->reorder_versions.cnt);
        cJSON_AddItemToObject(
                ro, "versions_late",
                j_dist(&d->reorder_versions, ver_bounds, NBOUNDS(ver_bounds)));
        cJSON_AddItemToObject(
                ro, "ms_late",
                j_dist(&d->reorder_ms, ms_bounds, NBOUNDS(ms_bounds)));

        cJSON *g = cJSON_AddObjectToObject(r, "gaps");
        j_u64(g, "filled", d->gap_ms.cnt);
        j_u64(g, "timed_out", d->gap_timeout_ms.cnt);
        j_i64(g, "gap_timeout_ms", d->tc->gap_timeout_ms);
        cJSON_AddItemToObject(
                g, "duration_ms",
                j_dist(&d->gap_ms, ms_bounds, NBOUNDS(ms_bounds)));
        cJSON_AddItemToObject(
                g, "timed_out_waited_ms",
                j_dist(&d->gap_timeout_ms, ms_bounds, NBOUNDS(ms_bounds)));
        cJSON *gs = cJSON_AddObjectToObject(g, "suggested_gap_timeout_ms");
        j_gap_suggest(gs, "p99", d, 0.99);
        j_gap_suggest(gs, "p999", d, 0.999);

        cJSON *du = cJSON_AddObjectToObject(r, "duplicates");
        j_u64(du, "repeats", d->dup_delay_ms.cnt);
        cJSON_AddItemToObject(
                du, "delay_ms",
                j_dist(&d->dup_delay_ms, ms_bounds, NBOUNDS(ms_bounds)));
        /* a repeat d ms after the first is a duplicate while the dedup
         * record has not expired: dedup TTL > d (semantics §3 row 2); at
         * least SUGGEST_FLOOR_MS */
        int64_t ttl = d->dup_delay_ms.cnt
                              ? au_quantile(&d->dup_delay_ms, 0.999) + 1
                              : -1;
        bool ttl_floored = ttl >= 0 && ttl < SUGGEST_FLOOR_MS;
        if (ttl_floored)
                ttl = SUGGEST_FLOOR_MS;
        if (ttl >= 0)
                j_i64(du, "suggested_dedup_ttl_ms", ttl);
        else
                cJSON_AddNullToObject(du, "suggested_dedup_ttl_ms");
        cJSON_AddBoolToObject(du, "suggested_dedup_ttl_floored", ttl_floored);
        j_u64(du, "suggested_dedup_ttl_samples", d->dup_delay_ms.cnt);
        cJSON_AddBoolToObject(du, "suggested_dedup_ttl_enough",
                              d->dup_delay_ms.cnt >= samples_needed(0.999));
        j_i64(du, "dedup_ttl_ms", d->tc->dedup_ttl_ms);

        /* semantics §8: events/day × bytes per dedup record × TTL */
        cJSON *sz = cJSON_AddObjectToObject(r, "sizing");
        uint64_t gone = m->dedup_hits_total +
                        m->idempotency_parameter_conflicts_total +
                        m->malformed_total + m->dedup_expired_total;
        uint64_t keys = m->records_total > gone ? m->records_total - gone : 0;
        double epd = span > 0 ? (double)d->records * MS_DAY / (double)span : 0;
        /* the sample's dedup records' own bytes once they fill pages (a
         * page holds ~90 sealed records; below AU_SIZING_MIN_KEYS a
         * page's overhead is most of it), else seqgatectl sizing's
         * estimate */
        bool measured = d->dedup_keys >= AU_SIZING_MIN_KEYS;
        double bpr = measured ? (double)d->dedup_bytes / (double)d->dedup_keys
                              : SG_SIZING_DEDUP_EST_BYTES;
        int64_t sttl = ttl > 0 ? ttl : d->tc->dedup_ttl_ms;
        j_u64(sz, "dedup_records", keys);
        j_u64(sz, "store_bytes_used", d->store_used);
        if (span > 0)
                j_i64(sz, "events_per_day", (int64_t)llround(epd));
        else
                cJSON_AddNullToObject(sz, "events_per_day");
        j_i64(sz, "bytes_per_dedup_record", (int64_t)llround(bpr));
        cJSON_AddStringToObject(sz, "bytes_per_dedup_record_from",
                                measured ? "measured" : "estimate");
        j_i64(sz, "ttl_ms", sttl);
        cJSON_AddStringToObject(sz, "ttl_from",
                                ttl > 0 ? "suggested_dedup_ttl_ms"
                                        : "dedup_ttl_ms");
        if (span > 0)
                j_i64(sz, "estimated_bytes",
                      (int64_t)llround(epd * bpr * (double)sttl / MS_DAY));
        else
                cJSON_AddNullToObject(sz, "estimated_bytes");
        /* the same with the configured TTL, which must also cover the
         * topic's retention and replay periods (semantics §8) */
        if (span > 0)
                j_i64(sz, "estimated_bytes_at_dedup_ttl_ms",
                      (int64_t)llround(epd * bpr * (double)d->tc->dedup_ttl_ms /
                                       MS_DAY));
        else
                cJSON_AddNullToObject(sz, "estimated_bytes_at_dedup_ttl_ms");
        /* how sure: the basis, and a warning below the sample sizes */
        char basis[256], warn[512] = "";
        snprintf(basis, sizeof(basis),
                 "%" PRIu64 " records over %.0f s; %" PRIu64
                 " dedup records in a temporary store of %" PRIu64 " bytes",
                 d->records, (double)span / 1000.0, keys, d->store_used);
        size_t wl = 0;
        if (!measured)
                wl += (size_t)snprintf(
                        warn + wl, sizeof(warn) - wl,
                        "%" PRIu64 " dedup records, fewer than %d: the "
                        "bytes per record are seqgatectl sizing's "
                        "estimate, not measured",
                        keys, AU_SIZING_MIN_KEYS);
        if (span <= 0 && wl < sizeof(warn))
                snprintf(warn + wl, sizeof(warn) - wl,
                         "%sno span (fewer than two record timestamps): "
                         "no events/day, so no estimate",
                         wl ? "; " : "");
        else if (span < SAMPLE_MIN_SPAN_MS && wl < sizeof(warn))
                snprintf(warn + wl, sizeof(warn) - wl,
                         "%sa span of %.0f s, under an hour: "
                         "events/day is extrapolated from it",
                         wl ? "; " : "", (double)span / 1000.0);
        cJSON_AddStringToObject(sz, "basis", basis);
        cJSON_AddBoolToObject(sz, "enough", !warn[0]);
        if (warn[0])
                cJSON_AddStringToObject(sz, "warning", warn);
        else
                cJSON_AddNullToObject(sz, "warning");

        cJSON *hr = cJSON_AddArrayToObject(r, "hourly");
        for (size_t i = 0; i < d->hour_cnt; i++) {
                cJSON *e = cJSON_CreateObject();
                j_time(e, "hour", (d->hour0 + (int64_t)i) * 3600000);
                j_u64(e, "records", d->hours[i].records);
                j_u64(e, "duplicates", d->hours[i].duplicates);
                j_u64(e, "gaps", d->hours[i].gaps);
                cJSON_AddItemToArray(hr, e);
        }

        cJSON *l = cJSON_AddObjectToObject(r, "limits");
        j_u64(l, "max_aggregates", d->max_aggs);
        j_u64(l, "tracked_aggregates", d->agg_cnt);
        cJSON_AddBoolToObject(l, "aggregates_cap_hit", d->aggs_cap_hit);
        j_u64(l, "max_keys", d->max_keys);
        j_u64(l, "tracked_keys", d->key_cnt);
        cJSON_AddBoolToObject(l, "keys_cap_hit", d->keys_cap_hit);
        j_u64(l, "hours_dropped_records", d->hours_dropped);
        return r;
}

/* ------------------------------------------------------------------ */
/* reading the document back                                           */

static double num(const cJSON *o, const char *path) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        const cJSON *c = o;
        for (char *save, *k = strtok_r(buf, ".", &save); k && c;
             k = strtok_r(NULL, ".", &save))
                c = cJSON_GetObjectItemCaseSensitive(c, k);
        return cJSON_IsNumber(c) ? cJSON_GetNumberValue(c) : 0;
}

static const char *str(const cJSON *o, const char *name) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, name);
        return cJSON_IsString(c) ? c->valuestring : "";
}

/* A histogram bucket's label: "<=10ms", ">1d", "<=4". */
static void bucket_label(const cJSON *hist, int i, bool ms, char *buf,
                         size_t size) {
        const cJSON *e = cJSON_GetArrayItem(hist, i);
        const cJSON *le = cJSON_GetObjectItemCaseSensitive(e, "le");
        double v;
        const char *op = "<=";
        if (!cJSON_IsNumber(le)) {
                const cJSON *prev = cJSON_GetArrayItem(hist, i - 1);
                v = num(prev, "le");
                op = ">";
        } else {
                v = le->valuedouble;
        }
        if (!ms)
                snprintf(buf, size, "%s%.0f", op, v);
        else if (v >= MS_DAY)
                snprintf(buf, size, "%s%.0fd", op, v / MS_DAY);
        else if (v >= MS_H)
                snprintf(buf, size, "%s%.0fh", op, v / MS_H);
        else if (v >= 60000)
                snprintf(buf, size, "%s%.0fm", op, v / 60000);
        else if (v >= 1000)
                snprintf(buf, size, "%s%.0fs", op, v / 1000);
        else
                snprintf(buf, size, "%s%.0fms", op, v);
}

/* ------------------------------------------------------------------ */
/* terminal text                                                       */

static void text_row(const char *name, const cJSON *c) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "per_hour");
        if (cJSON_IsNumber(r))
                printf("  %-34s %12.0f %12.3f\n", name, num(c, "count"),
                       r->valuedouble);
        else
                printf("  %-34s %12.0f %12s\n", name, num(c, "count"), "-");
}

static void text_hist(const char *title, const cJSON *dist, bool ms) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(dist, "histogram");
        double max = 0;
        int n = cJSON_GetArraySize(h);
        printf("  %s: %.0f; p50 %.0f, p99 %.0f, p99.9 %.0f, max %.0f\n", title,
               num(dist, "count"), num(dist, "p50"), num(dist, "p99"),
               num(dist, "p999"), num(dist, "max"));
        if (!num(dist, "count"))
                return;
        for (int i = 0; i < n; i++)
                if (num(cJSON_GetArrayItem(h, i), "count") > max)
                        max = num(cJSON_GetArrayItem(h, i), "count");
        for (int i = 0; i < n; i++) {
                double v = num(cJSON_GetArrayItem(h, i), "count");
                if (!v)
                        continue;
                char label[32], bar[41];
                bucket_label(h, i, ms, label, sizeof(label));
                int w = max > 0 ? (int)ceil(v * 40 / max) : 0;
                memset(bar, '#', (size_t)w);
                bar[w] = '\0';
                printf("    %8s %-40s %.0f\n", label, bar, v);
        }
}

static void text_top(const char *title, const cJSON *arr) {
        printf("  %s:", title);
        int n = cJSON_GetArraySize(arr);
        if (!n)
                printf(" none");
        for (int i = 0; i < n; i++) {
                const cJSON *e = cJSON_GetArrayItem(arr, i);
                printf("%s %s (%.0f)", i ? "," : "", str(e, "aggregate"),
                       num(e, "count"));
        }
        printf("\n");
}

/* " (a guess from N: a PCT percentile needs M)" when a quantile
 * suggestion has fewer samples than it needs, else "". */
static const char *few_note(const cJSON *enough, double n, const char *what,
                            const char *pct, double need, char *buf,
                            size_t size) {
        if (!cJSON_IsFalse(enough) || n <= 0)
                return "";
        snprintf(buf, size,
                 " (warning: from %.0f %s, their maximum; a %s "
                 "percentile needs %.0f)",
                 n, what, pct, need);
        return buf;
}

static void text_suggest(const char *name, const char *pct, const cJSON *o,
                         double need) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "ms");
        const cJSON *lb = cJSON_GetObjectItemCaseSensitive(o, "lower_bound");
        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(o, "floored");
        char few[160];
        if (cJSON_IsNumber(ms))
                printf("  %s for %s of gaps: %s%.0f%s%s\n", gap_key(), name,
                       cJSON_IsTrue(lb) ? ">= " : "", ms->valuedouble,
                       cJSON_IsTrue(fl) ? " (the floor: the gaps were "
                                          "shorter)"
                                        : "",
                       few_note(cJSON_GetObjectItemCaseSensitive(o, "enough"),
                                num(o, "samples"), "gaps", pct, need, few,
                                sizeof(few)));
        else
                printf("  %s for %s of gaps: - (no gaps)\n", gap_key(), name);
}

/* The first finding (semantics §2 co-partitioning). */
static void text_copart(const cJSON *r) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "co_partitioning");
        double n = num(c, "aggregates_on_several_partitions");
        double nk = num(c, "records_aggregate_not_record_key");
        if (n > 0) {
                printf("FIRST: %.0f aggregate%s on more than one partition "
                       "(%.0f records off their first partition). seqgate "
                       "orders each partition on its own: such an aggregate "
                       "parks and is quarantined where its start is missing. "
                       "Key the records by the aggregate id, or by what all "
                       "its events share (semantics §2 co-partitioning):\n",
                       n, n == 1 ? " has events" : "s have events",
                       num(c, "records_off_first_partition"));
                const cJSON *e;
                cJSON_ArrayForEach(
                        e, cJSON_GetObjectItemCaseSensitive(c, "aggregates")) {
                        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(
                                e, "partitions");
                        const cJSON *p;
                        int i = 0;
                        printf("  %s: partitions", str(e, "aggregate"));
                        cJSON_ArrayForEach(p, ps) printf(
                                "%s %.0f", i++ ? "," : "", p->valuedouble);
                        printf("%s; %.0f records off partition %.0f\n",
                               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                       e, "more_partitions"))
                                       ? ", more"
                                       : "",
                               num(e, "records_off_first_partition"),
                               cJSON_GetNumberValue(cJSON_GetArrayItem(ps, 0)));
                }
        } else {
                printf("co-partitioning: every aggregate's events are on one "
                       "partition%s\n",
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                               c, "every_aggregate_checked"))
                               ? ""
                               : " (of the aggregates tracked: "
                                 "--max-aggregates)");
        }
        if (nk > 0)
                printf("  %.0f records have an aggregate that is not their "
                       "record key (harmless if that key is shared by all of "
                       "an aggregate's events)\n",
                       nk);
        printf("\n");
}

static void print_text(const cJSON *r) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(r, "partitions");
        int np = cJSON_GetArraySize(ps);
        const char *pl = np == 1 ? "" : "s";
        if (num(r, "records") > 0)
                printf("audit of topic %s: %.0f record%s in %d partition%s, "
                       "%s .. %s (%.2f h)\n",
                       str(r, "topic"), num(r, "records"),
                       num(r, "records") == 1 ? "" : "s", np, pl,
                       str(r, "first_timestamp"), str(r, "last_timestamp"),
                       num(r, "span_ms") / MS_H);
        else
                printf("audit of topic %s: no records in %d partition%s in "
                       "the range\n",
                       str(r, "topic"), np, pl);
        printf("refetch: unavailable (gap deadlines go to the gap policy)\n\n");
        text_copart(r);
        const cJSON *phw =
                cJSON_GetObjectItemCaseSensitive(r, "per_hour_warning");
        if (cJSON_IsString(phw))
                printf("  warning: %s\n", phw->valuestring);
        printf("  %-34s %12s %12s\n", "counter", "count", "per hour");
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "counters"))
                text_row(c->string, c);
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "dlq")) {
                char name[80];
                snprintf(name, sizeof(name), "dlq %s", c->string);
                text_row(name, c);
        }
        const cJSON *end = cJSON_GetObjectItemCaseSensitive(r, "at_end");
        printf("  at the end: %.0f parked, %.0f quarantined\n\n",
               num(end, "parked_events"), num(end, "quarantined_aggregates"));

        const cJSON *top =
                cJSON_GetObjectItemCaseSensitive(r, "top_aggregates");
        text_top("top aggregates by refusals",
                 cJSON_GetObjectItemCaseSensitive(top, "by_refusals"));
        text_top("top aggregates by gaps",
                 cJSON_GetObjectItemCaseSensitive(top, "by_gaps"));
        printf("\n");

        const cJSON *ro = cJSON_GetObjectItemCaseSensitive(r, "reorder");
        printf("reorder (events that arrived after a higher version):\n");
        text_hist("versions late",
                  cJSON_GetObjectItemCaseSensitive(ro, "versions_late"), false);
        text_hist("ms late", cJSON_GetObjectItemCaseSensitive(ro, "ms_late"),
                  true);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "gaps");
        printf("gaps (park -> filled, record time): %.0f filled, %.0f timed "
               "out (%s %.0f)\n",
               num(g, "filled"), num(g, "timed_out"), gap_key(),
               num(g, "gap_timeout_ms"));
        text_hist("duration ms",
                  cJSON_GetObjectItemCaseSensitive(g, "duration_ms"), true);
        const cJSON *gs =
                cJSON_GetObjectItemCaseSensitive(g, "suggested_gap_timeout_ms");
        text_suggest("99%", "99th", cJSON_GetObjectItemCaseSensitive(gs, "p99"),
                     (double)samples_needed(0.99));
        text_suggest("99.9%", "99.9th",
                     cJSON_GetObjectItemCaseSensitive(gs, "p999"),
                     (double)samples_needed(0.999));
        const cJSON *du = cJSON_GetObjectItemCaseSensitive(r, "duplicates");
        printf("duplicates (first seen -> repeat, same payload):\n");
        text_hist("delay ms", cJSON_GetObjectItemCaseSensitive(du, "delay_ms"),
                  true);
        const cJSON *st =
                cJSON_GetObjectItemCaseSensitive(du, "suggested_dedup_ttl_ms");
        bool stf = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                du, "suggested_dedup_ttl_floored"));
        char few[160];
        if (cJSON_IsNumber(st))
                printf("  dedup TTL for 99.9%% of duplicates: %.0f ms %s"
                       "(configured %s %.0f; it must also cover the topic's "
                       "retention and any replay period, semantics §8)%s\n",
                       st->valuedouble,
                       stf ? "(the floor: the repeats came sooner) " : "",
                       ttl_key(), num(du, "dedup_ttl_ms"),
                       few_note(cJSON_GetObjectItemCaseSensitive(
                                        du, "suggested_dedup_ttl_enough"),
                                num(du, "suggested_dedup_ttl_samples"),
                                "repeats", "99.9th",
                                (double)samples_needed(0.999), few,
                                sizeof(few)));
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(r, "sizing");
        printf("sizing (semantics §8): %.0f events/day x %.0f B per dedup "
               "record (%s) x %.0f ms TTL (%s) = %.0f bytes\n",
               num(sz, "events_per_day"), num(sz, "bytes_per_dedup_record"),
               !strcmp(str(sz, "bytes_per_dedup_record_from"), "measured")
                       ? "measured in the sample's store"
                       : "ESTIMATE: too few records to measure",
               num(sz, "ttl_ms"),
               strcmp(str(sz, "ttl_from"), "dedup_ttl_ms") ? "suggested"
                                                           : ttl_key(),
               num(sz, "estimated_bytes"));
        printf("  with the configured %s %.0f: %.0f bytes\n", ttl_key(),
               num(du, "dedup_ttl_ms"),
               num(sz, "estimated_bytes_at_dedup_ttl_ms"));
        printf("  basis: %s\n", str(sz, "basis"));
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(sz, "warning")))
                printf("  warning: a rough estimate: %s; audit a longer "
                       "range (--from, --to), or size with seqgatectl sizing "
                       "--events-per-day N\n",
                       str(sz, "warning"));
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "limits");
        if (cJSON_IsTrue(
                    cJSON_GetObjectItemCaseSensitive(l, "aggregates_cap_hit")))
                printf("note: more than %.0f aggregates; the others are not "
                       "in the reorder and top lists (--max-aggregates)\n",
                       num(l, "max_aggregates"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "keys_cap_hit")))
                printf("note: more than %.0f idempotency keys; repeats of the "
                       "others are not in the delay distribution "
                       "(--max-keys)\n",
                       num(l, "max_keys"));
}

/* ------------------------------------------------------------------ */
/* HTML                                                                */

static void html_esc(FILE *f, const char *s) {
        for (; *s; s++) {
                switch (*s) {
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '&':
                        fputs("&amp;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                case '\'':
                        fputs("&#39;", f);
                        break;
                default:
                        fputc(*s, f);
                }
        }
}

/* A bar chart: one bar per label, values from 0. */
static void svg_bars(FILE *f, const char *id, const char *title,
                     const char *const *labels, const double *vals, int n) {
        double max = 0, total = 0;
        for (int i = 0; i < n; i++) {
                total += vals[i];
                if (vals[i] > max)
                        max = vals[i];
        }
        const int H = 160, top = 20, bottom = 40, left = 40;
        int bw = n > 0 ? (n > 48 ? 12 : 36) : 36;
        int W = left + n * (bw + 4) + 10;
        fprintf(f, "<figure><figcaption>");
        html_esc(f, title);
        fprintf(f,
                "</figcaption>\n<svg id=\"%s\" class=\"chart\" "
                "data-total=\"%.0f\" width=\"%d\" height=\"%d\" viewBox=\"0 0 "
                "%d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                id, total, W, H + top + bottom, W, H + top + bottom);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                "class=\"axis\"/>\n",
                left - 2, top + H, W - 5, top + H);
        fprintf(f, "<text x=\"2\" y=\"%d\" class=\"tick\">%.0f</text>\n",
                top + 4, max);
        for (int i = 0; i < n; i++) {
                int h = max > 0 ? (int)lround(vals[i] * H / max) : 0;
                int x = left + i * (bw + 4);
                fprintf(f, "<rect class=\"bar\" data-label=\"");
                html_esc(f, labels[i]);
                fprintf(f,
                        "\" data-value=\"%.0f\" x=\"%d\" y=\"%d\" width=\"%d\" "
                        "height=\"%d\"><title>",
                        vals[i], x, top + H - h, bw, h);
                html_esc(f, labels[i]);
                fprintf(f, ": %.0f</title></rect>\n", vals[i]);
                if (vals[i] > 0)
                        fprintf(f,
                                "<text x=\"%d\" y=\"%d\" "
                                "class=\"val\">%.0f</text>\n",
                                x + 2, top + H - h - 3, vals[i]);
                if (n <= 48 || i % 6 == 0) {
                        fprintf(f,
                                "<text x=\"%d\" y=\"%d\" class=\"lbl\" "
                                "transform=\"rotate(30 %d %d)\">",
                                x, top + H + 14, x, top + H + 14);
                        html_esc(f, labels[i]);
                        fprintf(f, "</text>\n");
                }
        }
        fprintf(f, "</svg></figure>\n");
}

/* Fills bar @p i of a chart drawn from the array @p arr: its label and
 * value. */
typedef void(bar_fn)(const cJSON *arr, int i, const void *arg, char *label,
                     size_t size, double *val);

/* A histogram bucket (@p arg: bool, the bounds are milliseconds). */
static void hist_bar(const cJSON *arr, int i, const void *arg, char *label,
                     size_t size, double *val) {
        bucket_label(arr, i, *(const bool *)arg, label, size);
        *val = num(cJSON_GetArrayItem(arr, i), "count");
}

/* An hour of "hourly" (@p arg: the field to draw). */
static void hour_bar(const cJSON *arr, int i, const void *arg, char *label,
                     size_t size, double *val) {
        const cJSON *e = cJSON_GetArrayItem(arr, i);
        /* "2026-11-30T08:00:00.000Z" → "11-30 08h" */
        const char *s = str(e, "hour");
        label[0] = '\0';
        if (strlen(s) >= 13)
                snprintf(label, size, "%.5s %.2sh", s + 5, s + 11);
        *val = num(e, arg);
}

/* A bar chart of one bar per element of @p arr. */
static void svg_chart(FILE *f, const char *id, const char *title,
                      const cJSON *arr, bar_fn *fn, const void *arg) {
        int n = cJSON_GetArraySize(arr);
        char(*lb)[32] = calloc((size_t)n + 1, sizeof(*lb));
        const char **labels = calloc((size_t)n + 1, sizeof(*labels));
        double *vals = calloc((size_t)n + 1, sizeof(*vals));
        if (lb && labels && vals) {
                for (int i = 0; i < n; i++) {
                        fn(arr, i, arg, lb[i], sizeof(lb[i]), &vals[i]);
                        labels[i] = lb[i];
                }
                svg_bars(f, id, title, labels, vals, n);
        }
        free(lb);
        free(labels);
        free(vals);
}

static void svg_hist(FILE *f, const char *id, const char *title,
                     const cJSON *dist, bool ms) {
        svg_chart(f, id, title,
                  cJSON_GetObjectItemCaseSensitive(dist, "histogram"), hist_bar,
                  &ms);
}

static void html_row(FILE *f, const char *key, const char *name,
                     const cJSON *c) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "per_hour");
        fprintf(f, "<tr data-counter=\"");
        html_esc(f, key);
        fprintf(f, "\"><td>");
        html_esc(f, name);
        fprintf(f, "</td><td class=\"count\">%.0f</td><td class=\"rate\">",
                num(c, "count"));
        if (cJSON_IsNumber(r))
                fprintf(f, "%.3f", r->valuedouble);
        else
                fputs("-", f);
        fprintf(f, "</td></tr>\n");
}

/* One summary line: @p path (dotted, into the report) and its value
 * as data-path / data-value, so the page's script checks it against the
 * embedded report; the text follows, escaped. */
static void html_item(FILE *f, const char *id, const cJSON *r, const char *path,
                      const char *text) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        const cJSON *c = r;
        for (char *save, *k = strtok_r(buf, ".", &save); k && c;
             k = strtok_r(NULL, ".", &save))
                c = cJSON_GetObjectItemCaseSensitive(c, k);
        fprintf(f, "<li id=\"%s\" data-path=\"%s\" data-value=\"", id, path);
        /* (c &&: cJSON_IsNumber(NULL) is false; scan-build does not see
         * into cJSON) */
        if (c && cJSON_IsNumber(c))
                fprintf(f, "%.0f", c->valuedouble);
        else
                fputs("null", f);
        fputs("\">", f);
        html_esc(f, text);
        fputs("</li>\n", f);
}

/* The summary at the top of the page: the first finding (semantics §2
 * co-partitioning), the suggested gap_timeout_ms and dedup TTL and the
 * store estimate, each with how sure it is. */
static void html_summary(FILE *f, const cJSON *r) {
        char t[1024], few[160];
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "co_partitioning");
        fprintf(f, "<h2>Summary</h2>\n<ul id=\"summary\">\n");
        double n = num(c, "aggregates_on_several_partitions");
        if (n > 0) {
                size_t l = (size_t)snprintf(
                        t, sizeof(t),
                        "First: %.0f aggregate%s on more than one partition; "
                        "seqgate orders each partition on its own, so key the "
                        "records by the aggregate id (semantics §2 "
                        "co-partitioning):",
                        n, n == 1 ? " has events" : "s have events");
                const cJSON *e;
                int i = 0;
                cJSON_ArrayForEach(
                        e, cJSON_GetObjectItemCaseSensitive(c, "aggregates")) {
                        if (l >= sizeof(t))
                                break;
                        l += (size_t)snprintf(t + l, sizeof(t) - l, "%s %s",
                                              i++ ? "," : "",
                                              str(e, "aggregate"));
                }
        } else {
                snprintf(t, sizeof(t),
                         "Co-partitioning: every aggregate's events are on "
                         "one partition.");
        }
        html_item(f, "summary-co-partitioning", r,
                  "co_partitioning.aggregates_on_several_partitions", t);
        const cJSON *gs = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(r, "gaps"),
                "suggested_gap_timeout_ms");
        static const char *const qs[][4] = {
                {"p99", "99%", "99th", "summary-gap-timeout-p99"},
                {"p999", "99.9%", "99.9th", "summary-gap-timeout-p999"}};
        for (size_t i = 0; i < 2; i++) {
                const cJSON *g = cJSON_GetObjectItemCaseSensitive(gs, qs[i][0]);
                char path[64];
                snprintf(path, sizeof(path),
                         "gaps.suggested_gap_timeout_ms.%s.ms", qs[i][0]);
                if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(g, "ms")))
                        snprintf(t, sizeof(t),
                                 "Suggested %s for %s of gaps: "
                                 "%s%.0f%s",
                                 gap_key(), qs[i][1],
                                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                         g, "lower_bound"))
                                         ? ">= "
                                         : "",
                                 num(g, "ms"),
                                 few_note(cJSON_GetObjectItemCaseSensitive(
                                                  g, "enough"),
                                          num(g, "samples"), "gaps", qs[i][2],
                                          (double)samples_needed(i ? 0.999
                                                                   : 0.99),
                                          few, sizeof(few)));
                else
                        snprintf(t, sizeof(t),
                                 "Suggested %s for %s of gaps: "
                                 "none (no gaps)",
                                 gap_key(), qs[i][1]);
                html_item(f, qs[i][3], r, path, t);
        }
        const cJSON *du = cJSON_GetObjectItemCaseSensitive(r, "duplicates");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(
                    du, "suggested_dedup_ttl_ms")))
                snprintf(t, sizeof(t),
                         "Suggested dedup TTL for 99.9%% of duplicates: %.0f "
                         "ms (configured %s %.0f; it must also cover the "
                         "topic's retention and any replay period)%s",
                         num(du, "suggested_dedup_ttl_ms"), ttl_key(),
                         num(du, "dedup_ttl_ms"),
                         few_note(cJSON_GetObjectItemCaseSensitive(
                                          du, "suggested_dedup_ttl_enough"),
                                  num(du, "suggested_dedup_ttl_samples"),
                                  "repeats", "99.9th",
                                  (double)samples_needed(0.999), few,
                                  sizeof(few)));
        else
                snprintf(t, sizeof(t),
                         "Suggested dedup TTL: none (no duplicates; "
                         "configured %s %.0f)",
                         ttl_key(), num(du, "dedup_ttl_ms"));
        html_item(f, "summary-dedup-ttl", r,
                  "duplicates.suggested_dedup_ttl_ms", t);
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(r, "sizing");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(sz, "warning");
        snprintf(t, sizeof(t),
                 "Store estimate (semantics §8): %.0f bytes (%s)%s%s",
                 num(sz, "estimated_bytes"), str(sz, "basis"),
                 cJSON_IsString(w) ? ". Warning, a rough estimate: " : "",
                 cJSON_IsString(w) ? w->valuestring : "");
        html_item(f, "summary-sizing", r, "sizing.estimated_bytes", t);
        fprintf(f, "</ul>\n");
}

static const char html_css[] =
        "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}"
        "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}"
        "table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:"
        "1px solid #ddd;text-align:right}td:first-child,th:first-child{text-"
        "align:left}figure{display:inline-block;margin:0 2em 1em 0;vertical-"
        "align:top}figcaption{font-weight:600}.bar{fill:#4a7bd0}.bar:hover{"
        "fill:#e07b39}.axis{stroke:#888}.lbl,.tick,.val{font-size:10px;fill:"
        "#444}#check{color:#777;font-size:12px}"
        "pre{background:#f6f6f6;padding:1em;font-size:12px}";

/* Checks every chart against the embedded document; marks the body. */
static const char html_js[] =
        "(function(){var d=JSON.parse(document.getElementById('audit-data')."
        "textContent);function sum(a){return a.reduce(function(s,x){return "
        "s+x},0)}function bars(id){return Array.prototype.map.call(document."
        "querySelectorAll('#'+id+' rect.bar'),function(r){return Number(r."
        "getAttribute('data-value'))})}function hist(h){return h.histogram."
        "map(function(b){return b.count})}var want={'chart-hourly-duplicates':"
        "d.hourly.map(function(h){return h.duplicates}),'chart-hourly-gaps':"
        "d.hourly.map(function(h){return h.gaps}),'chart-reorder-versions':"
        "hist(d.reorder.versions_late),'chart-reorder-ms':hist(d.reorder."
        "ms_late),'chart-gap-duration':hist(d.gaps.duration_ms),'chart-dup-"
        "delay':hist(d.duplicates.delay_ms)};var bad=[];Object.keys(want)."
        "forEach(function(id){var b=bars(id);if(JSON.stringify(b)!==JSON."
        "stringify(want[id]))bad.push(id)});Array.prototype.forEach.call("
        "document.querySelectorAll('tr[data-counter]'),function(tr){var k=tr."
        "getAttribute('data-counter').split('.');var o=k[0]==='dlq'?d.dlq[k[1]"
        "]:d.counters[k[0]];if(!o||Number(tr.querySelector('.count')."
        "textContent)!==o.count)bad.push(tr.getAttribute('data-counter'))});"
        "Array.prototype.forEach.call(document.querySelectorAll('li[data-path]'"
        "),function(li){var v=li.getAttribute('data-path').split('.').reduce("
        "function(o,k){return o==null?o:o[k]},d);var s=li.getAttribute('data-"
        "value');if(String(v==null?null:Math.round(v))!==s)bad.push(li.id)});"
        "document.body.setAttribute('data-check',bad.length?'mismatch:'+bad."
        "join(','):'ok');document.getElementById('check').textContent=bad."
        "length?'charts disagree with the report: '+bad.join(', '):'every "
        "chart and counter matches the embedded report ('+Object.keys(want)."
        "length+' charts)';document.getElementById('json').textContent=JSON."
        "stringify(d,null,2)})();";

static int write_html(const cJSON *r, const char *json, const char *path) {
        FILE *f = fopen(path, "w");
        if (!f) {
                errf("%s: cannot write", path);
                return EXIT_RUNTIME;
        }
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
                   "charset=\"utf-8\"><title>seqgate audit: ");
        html_esc(f, str(r, "topic"));
        fprintf(f,
                "</title><style>%s</style></head>\n<body>\n<h1>seqgate "
                "audit of topic ",
                html_css);
        html_esc(f, str(r, "topic"));
        fprintf(f, "</h1>\n<p>%.0f records, ", num(r, "records"));
        html_esc(f, str(r, "first_timestamp"));
        fprintf(f, " .. ");
        html_esc(f, str(r, "last_timestamp"));
        fprintf(f,
                " (%.2f h). Refetch unavailable: gap deadlines go to the "
                "gap policy.</p>\n<p id=\"check\"></p>\n",
                num(r, "span_ms") / MS_H);
        html_summary(f, r);
        const cJSON *phw =
                cJSON_GetObjectItemCaseSensitive(r, "per_hour_warning");
        if (cJSON_IsString(phw)) {
                fprintf(f, "<p class=\"warning\" id=\"per-hour-warning\">"
                           "Warning: ");
                html_esc(f, phw->valuestring);
                fprintf(f, "</p>\n");
        }
        fprintf(f, "<h2>Counters</h2>\n<table id=\"counters\"><tr><th>counter"
                   "</th><th>count</th><th>per hour</th></tr>\n");
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "counters"))
                html_row(f, c->string, c->string, c);
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "dlq")) {
                char key[80], name[80];
                snprintf(key, sizeof(key), "dlq.%s", c->string);
                snprintf(name, sizeof(name), "DLQ %s", c->string);
                html_row(f, key, name, c);
        }
        fprintf(f, "</table>\n<h2>Over time (per hour)</h2>\n");
        const cJSON *hours = cJSON_GetObjectItemCaseSensitive(r, "hourly");
        svg_chart(f, "chart-hourly-duplicates", "duplicates per hour", hours,
                  hour_bar, "duplicates");
        svg_chart(f, "chart-hourly-gaps", "gaps per hour", hours, hour_bar,
                  "gaps");
        const cJSON *ro = cJSON_GetObjectItemCaseSensitive(r, "reorder");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "gaps");
        const cJSON *du = cJSON_GetObjectItemCaseSensitive(r, "duplicates");
        fprintf(f, "<h2>Distributions</h2>\n");
        svg_hist(f, "chart-reorder-versions", "reorder distance, versions late",
                 cJSON_GetObjectItemCaseSensitive(ro, "versions_late"), false);
        svg_hist(f, "chart-reorder-ms", "reorder distance, ms late",
                 cJSON_GetObjectItemCaseSensitive(ro, "ms_late"), true);
        svg_hist(f, "chart-gap-duration", "gap duration (park to filled), ms",
                 cJSON_GetObjectItemCaseSensitive(g, "duration_ms"), true);
        svg_hist(f, "chart-dup-delay",
                 "duplicate delay (first seen to "
                 "repeat), ms",
                 cJSON_GetObjectItemCaseSensitive(du, "delay_ms"), true);
        fprintf(f, "<h2>Report (JSON)</h2>\n<pre id=\"json\"></pre>\n<script "
                   "type=\"application/json\" id=\"audit-data\">");
        for (const char *p = json; *p; p++) /* no "</script>" inside */
                if (*p == '<')
                        fputs("\\u003c", f);
                else
                        fputc(*p, f);
        fprintf(f, "</script>\n<script>%s</script>\n</body></html>\n", html_js);
        if (fclose(f)) {
                errf("%s: write failed", path);
                return EXIT_RUNTIME;
        }
        return 0;
}

int au_report(au_drive_t *d, const au_part_t *parts, size_t part_cnt, bool json,
              const char *html_path) {
        cJSON *doc = build(d, parts, part_cnt);
        char *text = cJSON_PrintUnformatted(doc);
        cJSON_Delete(doc);
        cJSON *r = text ? cJSON_Parse(text) : NULL;
        if (!r) {
                free(text);
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        if (json)
                puts(text);
        else
                print_text(r);
        int rc = html_path ? write_html(r, text, html_path) : 0;
        cJSON_Delete(r);
        free(text);
        return rc;
}
