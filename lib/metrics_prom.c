/*
 * metrics_prom.c — the Prometheus text exposition (format 0.0.4) of a
 * metrics snapshot (metrics_pub.h), generated from the rows of
 * metrics_list.h.
 */
#include "metrics_pub.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t sg_prom_escape(const char *v, char *out, size_t size) {
        size_t n = 0;
        for (; *v; v++) {
                const char *rep = NULL;
                char one[2] = {*v, '\0'};
                if (*v == '\\')
                        rep = "\\\\";
                else if (*v == '"')
                        rep = "\\\"";
                else if (*v == '\n')
                        rep = "\\n";
                else
                        rep = one;
                for (const char *r = rep; *r; r++, n++)
                        if (size && n < size - 1)
                                out[n] = *r;
        }
        if (size)
                out[n < size ? n : size - 1] = '\0';
        return n;
}

/** # HELP and # TYPE of family seqgate_@p prom (HELP text escaped: a
 *  backslash and a newline). */
static void fam(FILE *f, const char *prom, const char *type, const char *help) {
        fprintf(f, "# HELP seqgate_%s ", prom);
        for (const char *h = help; *h; h++) {
                if (*h == '\\')
                        fputs("\\\\", f);
                else if (*h == '\n')
                        fputs("\\n", f);
                else
                        fputc(*h, f);
        }
        fprintf(f, "\n# TYPE seqgate_%s %s\n", prom, type);
}

/** The sample name and its labels: seqgate_<prom><suffix>{<labels>}. */
static void name(FILE *f, const char *prom, const char *suffix,
                 const char *labels) {
        fprintf(f, "seqgate_%s%s", prom, suffix);
        if (labels[0])
                fprintf(f, "{%s}", labels);
        fputc(' ', f);
}

static void put_u64(FILE *f, const char *prom, const char *labels, uint64_t v) {
        name(f, prom, "", labels);
        fprintf(f, "%" PRIu64 "\n", v);
}

static void put_i64(FILE *f, const char *prom, const char *labels, int64_t v) {
        name(f, prom, "", labels);
        fprintf(f, "%" PRId64 "\n", v);
}

/** Milliseconds as seconds, exactly (three decimals). */
static void secs(FILE *f, int64_t ms) {
        if (ms < 0) {
                fputc('-', f);
                ms = -ms;
        }
        fprintf(f, "%" PRId64 ".%03" PRId64, ms / 1000, ms % 1000);
}

static void put_ms(FILE *f, const char *prom, const char *labels, int64_t ms) {
        name(f, prom, "", labels);
        secs(f, ms);
        fputc('\n', f);
}

/** _bucket{le} (cumulative, then +Inf), _sum and _count, in seconds. */
static void put_hist(FILE *f, const char *prom, const char *labels,
                     const sg_hist_t *h) {
        uint64_t cum = 0;
        const char *sep = labels[0] ? "," : "";
        for (int i = 0; i < SG_HIST_BUCKETS; i++) {
                cum += h->bucket[i];
                fprintf(f, "seqgate_%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n",
                        prom, labels, sep, (double)sg_hist_bound_ms(i) / 1000.0,
                        cum);
        }
        fprintf(f, "seqgate_%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", prom,
                labels, sep, h->count);
        name(f, prom, "_sum", labels);
        secs(f, h->sum_ms);
        fputc('\n', f);
        name(f, prom, "_count", labels);
        fprintf(f, "%" PRIu64 "\n", h->count);
}

#define PUT_COUNTER(f, prom, labels, v) put_u64(f, prom, labels, v)
#define PUT_GAUGE(f, prom, labels, v) put_i64(f, prom, labels, v)
#define PUT_LATEST(f, prom, labels, v) put_i64(f, prom, labels, v)
#define PUT_GAUGE_MS(f, prom, labels, v) put_ms(f, prom, labels, v)
#define PUT_LATEST_MS(f, prom, labels, v) put_ms(f, prom, labels, v)
#define PUT_HIST(f, prom, labels, v) put_hist(f, prom, labels, &(v))

/* One family per row with a Prometheus name, from struct @p src. */
#define ROW_OF(src, name_, kind, prom, help)                                   \
        if ((prom)[0]) {                                                       \
                fam(f, prom, SG_METRIC_PROM_##kind, help);                     \
                PUT_##kind(f, prom, "", (src).name_);                          \
        }
#define ROW_LOOP(n, kind, prom, help) ROW_OF(s->loop, n, kind, prom, help)
#define ROW_PROC(n, kind, prom, help) ROW_OF(*s, n, kind, prom, help)

/* An engine row's samples under family @p as: one per input topic, with
 * the label topic. */
#define TOPIC_SAMPLES(n, kind, as)                                             \
        for (size_t t = 0; t < s->topic_cnt; t++) {                            \
                topic_label(s->topics[t].topic, lbl, sizeof(lbl));             \
                PUT_##kind(f, as, lbl, s->topics[t].m.n);                      \
        }
/* One family per engine row with a Prometheus name. */
#define ROW_ENGINE(n, kind, prom, help)                                        \
        if ((prom)[0]) {                                                       \
                fam(f, prom, SG_METRIC_PROM_##kind, help);                     \
                TOPIC_SAMPLES(n, kind, prom)                                   \
        }
/* The family of alias @p alias_ (SG_METRIC_ALIASES): the samples of the
 * engine row whose Prometheus name is @p target_. */
#define ALIAS_OF(n, kind, prom, help)                                          \
        if (!strcmp(prom, target_)) {                                          \
                fam(f, alias_, SG_METRIC_PROM_##kind, ahelp_);                 \
                TOPIC_SAMPLES(n, kind, alias_)                                 \
        }
#define ALIAS(alias, target, ahelp)                                            \
        {                                                                      \
                const char *alias_ = alias, *target_ = target;                 \
                const char *ahelp_ = ahelp;                                    \
                SG_ENGINE_METRICS_HEAD(ALIAS_OF)                               \
                SG_ENGINE_METRICS_TAIL(ALIAS_OF)                               \
        }

/* A per-partition family: one sample per partition; a negative gauge is
 * unknown and has no sample. */
#define ROW_PART(n, kind, prom, help)                                          \
        fam(f, prom, SG_METRIC_PROM_##kind, help);                             \
        for (size_t i = 0; i < s->part_cnt; i++) {                             \
                if (s->parts[i].n < 0)                                         \
                        continue;                                              \
                part_labels(&s->parts[i], lbl, sizeof(lbl));                   \
                PUT_##kind(f, prom, lbl, s->parts[i].n);                       \
        }

static void topic_label(const char *topic, char *buf, size_t size) {
        char t[3 * sizeof(((sg_topic_stats_t *)0)->topic)];
        sg_prom_escape(topic, t, sizeof(t));
        snprintf(buf, size, "topic=\"%s\"", t);
}

static void part_labels(const sg_part_stats_t *p, char *buf, size_t size) {
        char topic[3 * sizeof(p->topic)];
        sg_prom_escape(p->topic, topic, sizeof(topic));
        snprintf(buf, size, "topic=\"%s\",partition=\"%" PRId32 "\"", topic,
                 p->partition);
}

sg_err_t sg_metrics_prom(const sg_metrics_snap_t *s, const char *version,
                         char **bufp, size_t *lenp) {
        char *buf = NULL;
        size_t len = 0;
        char lbl[2048];
        char ver[256];
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return SG_ERR_NOMEM;

        fam(f, "build_info", "gauge", "the build; always 1");
        sg_prom_escape(version ? version : "", ver, sizeof(ver));
        fprintf(f, "seqgate_build_info{version=\"%s\"} 1\n", ver);
        fam(f, "ready", "gauge",
            "1 while /readyz answers 200 (partitions assigned once, none "
            "being restored, batches not aborting in a row), else 0");
        fprintf(f, "seqgate_ready %d\n", sg_metrics_snap_ready(s) ? 1 : 0);
        SG_PROCESS_METRICS(ROW_PROC)
        SG_LOOP_STATS(ROW_LOOP)
        if (s->has_engine) {
                SG_ENGINE_METRICS_HEAD(ROW_ENGINE)
                fam(f, "dlq_records_total", "counter",
                    "records dead-lettered, by reason (semantics §3, §4)");
                for (size_t t = 0; t < s->topic_cnt; t++) {
                        char tl[1024];
                        topic_label(s->topics[t].topic, tl, sizeof(tl));
                        for (int r = 1; r < SG_R__CNT; r++) {
                                snprintf(lbl, sizeof(lbl), "%s,reason=\"%s\"",
                                         tl, sg_reason_name((sg_reason_t)r));
                                put_u64(f, "dlq_records_total", lbl,
                                        s->topics[t].m.dlq_total[r]);
                        }
                }
                SG_ENGINE_METRICS_TAIL(ROW_ENGINE)
                SG_METRIC_ALIASES(ALIAS)
        }
        SG_PART_METRICS(ROW_PART)
        if (fclose(f) != 0 || !buf) {
                free(buf);
                return SG_ERR_NOMEM;
        }
        *bufp = buf;
        *lenp = len;
        return SG_OK;
}
