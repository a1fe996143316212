/*
 * dlq.c — seqgatectl dlq summary | tail: what is in the DLQ topic, read
 * from its records' headers (docs/dlq.md "DLQ headers") with the DLQ reader
 * replay uses (dlqread.h: group-less, read_committed, nothing committed).
 *
 *   summary  counts by reason, the aggregates with the most records and
 *            counts by hour (of the record timestamp: when it was
 *            dead-lettered) over the records up to the end (or --to)
 *   tail     the last N records (by timestamp over every partition), and
 *            with -f the new ones as they come, until SIGINT / SIGTERM
 */
#include "cli.h"
#include "dlqread.h"
#include "timeparse.h"

#include "config.h"
#include "engine.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char dlq_help[] =
        "usage: seqgatectl dlq summary --config FILE [--dlq TOPIC] [--from "
        "TIME|OFFSET]\n"
        "                              [--to TIME|OFFSET] [--top N] "
        "[-X NAME=VALUE ...]\n"
        "                              [--json]\n"
        "       seqgatectl dlq tail --config FILE [--dlq TOPIC] [-n N] [-f]\n"
        "                           [-X NAME=VALUE ...] [--json]\n"
        "\n"
        "What is in the DLQ topic (default: every dlq_topic of the config), "
        "read\n"
        "without joining a consumer group or committing (read_committed).\n"
        "\n"
        "Commands (seqgatectl dlq COMMAND --help says more):\n"
        "  summary     counts by reason, the top aggregates and counts by "
        "hour\n"
        "  tail        the last records, and with -f the new ones as they "
        "come\n";

static const char dlq_summary_help[] =
        "usage: seqgatectl dlq summary --config FILE [--dlq TOPIC] [--from "
        "TIME|OFFSET]\n"
        "                              [--to TIME|OFFSET] [--top N] "
        "[-X NAME=VALUE ...]\n"
        "                              [--json]\n"
        "\n"
        "Read the DLQ topic (default: every dlq_topic of the config) without\n"
        "joining a consumer group or committing (read_committed) up to its "
        "end\n"
        "offsets when the command starts (or before --to) and print the "
        "records\n"
        "by reason, the aggregates with the most records and the records by "
        "hour\n"
        "(UTC, of the record timestamp).\n"
        "\n"
        "  -d, --dlq TOPIC        the DLQ topic\n"
        "      --from TIME|OFFSET start at an RFC 3339 time or an offset "
        "(every\n"
        "                         partition); default: the log start\n"
        "      --to TIME|OFFSET   stop before an RFC 3339 time or an offset\n"
        "                         (exclusive); default: the end offsets\n"
        "      --top N            list the N aggregates with the most "
        "records\n"
        "                         (default 10)\n";

static const char dlq_tail_help[] =
        "usage: seqgatectl dlq tail --config FILE [--dlq TOPIC] [-n N] [-f]\n"
        "                           [-X NAME=VALUE ...] [--json]\n"
        "\n"
        "Print the last N DLQ records, oldest first (by timestamp over every\n"
        "partition): DLQ position, timestamp, reason, aggregate, origin, "
        "version\n"
        "and detail, from the DLQ headers. With -f, then the new records as "
        "they\n"
        "come, until SIGINT or SIGTERM (exit 0).\n"
        "\n"
        "  -d, --dlq TOPIC        the DLQ topic (required with -f when the "
        "config\n"
        "                         has several)\n"
        "  -n, --lines N          print the last N records (default 10)\n"
        "  -f, --follow           then print new records as they come\n";

/* One DLQ record's headers, as tools show them. */
typedef struct dlq_rec {
        char dlq[256];
        int32_t dlq_partition;
        int64_t dlq_offset;
        int64_t ts; /* the record timestamp (when it was dead-lettered), ms */
        char reason[64], topic[256], partition[16], offset[24], agg[1100],
                detail[512], expected[24], actual[24];
} dlq_rec_t;

static void rec_read(dlq_rec_t *r, const char *dlq,
                     const rd_kafka_message_t *m) {
        rd_kafka_headers_t *h = NULL;
        if (rd_kafka_message_headers(m, &h))
                h = NULL;
        memset(r, 0, sizeof(*r));
        snprintf(r->dlq, sizeof(r->dlq), "%s", dlq);
        r->dlq_partition = m->partition;
        r->dlq_offset = m->offset;
        r->ts = rd_kafka_message_timestamp(m, NULL);
        struct {
                const char *name;
                char *buf;
                size_t size;
        } f[] = {
                {SG_DLQ_H_REASON, r->reason, sizeof(r->reason)},
                {SG_DLQ_H_TOPIC, r->topic, sizeof(r->topic)},
                {SG_DLQ_H_PARTITION, r->partition, sizeof(r->partition)},
                {SG_DLQ_H_OFFSET, r->offset, sizeof(r->offset)},
                {SG_DLQ_H_AGGREGATE, r->agg, sizeof(r->agg)},
                {SG_DLQ_H_DETAIL, r->detail, sizeof(r->detail)},
                {SG_DLQ_H_EXPECTED, r->expected, sizeof(r->expected)},
                {SG_DLQ_H_ACTUAL, r->actual, sizeof(r->actual)},
        };
        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
                if (!dlq_hdr_str(h, f[i].name, f[i].buf, f[i].size))
                        f[i].buf[0] = '\0';
}

/* A JSON string member, null when empty. */
static void j_str(cJSON *o, const char *name, const char *v) {
        if (v[0])
                cJSON_AddStringToObject(o, name, v);
        else
                cJSON_AddNullToObject(o, name);
}

/* A decimal header as a JSON number (raw text), null when absent. */
static void j_num(cJSON *o, const char *name, const char *v) {
        int64_t n;
        if (parse_i64(v, INT64_MIN, INT64_MAX, &n))
                j_i64(o, name, n);
        else
                cJSON_AddNullToObject(o, name);
}

static void rec_print(const dlq_rec_t *r, bool json) {
        char tb[48];
        if (json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "kind", "record");
                cJSON_AddStringToObject(o, "dlq_topic", r->dlq);
                j_i64(o, "dlq_partition", r->dlq_partition);
                j_i64(o, "dlq_offset", r->dlq_offset);
                j_time(o, "timestamp", r->ts);
                j_str(o, "reason", r->reason);
                j_str(o, "topic", r->topic);
                j_num(o, "partition", r->partition);
                j_num(o, "offset", r->offset);
                j_str(o, "aggregate", r->agg);
                j_str(o, "detail", r->detail);
                j_num(o, "expected_version", r->expected);
                j_num(o, "actual_version", r->actual);
                print_json_line(o);
                cJSON_Delete(o);
                return;
        }
        printf("%s/%" PRId32 "/%" PRId64 "  %s  %s  %s  from %s/%s/%s", r->dlq,
               r->dlq_partition, r->dlq_offset,
               r->ts > 0 ? sg_iso_time(r->ts, tb, sizeof(tb)) : "-",
               r->reason[0] ? r->reason : "-", r->agg[0] ? r->agg : "-",
               r->topic[0] ? r->topic : "?",
               r->partition[0] ? r->partition : "?",
               r->offset[0] ? r->offset : "?");
        if (r->actual[0])
                printf("  v%s", r->actual);
        if (r->detail[0])
                printf("  (%s)", r->detail);
        putchar('\n');
}

/* ---- options ------------------------------------------------------------ */

typedef struct dlq_opts {
        cli_common_t cc; /* --config, -X, --json */
        const char *dlq; /* NULL: every dlq_topic of the config */
        dlq_range_t rg;
        int64_t top;
        int64_t n;
        bool follow;
        bool json;
} dlq_opts_t;

/* --from / --to: an offset (digits) or an RFC 3339 time. */
static bool parse_bound(const char *s, int64_t *off, int64_t *ms) {
        return parse_i64(s, 0, INT64_MAX, off) || parse_rfc3339(s, ms);
}

static int dlq_parse(int argc, char **argv, bool tail, dlq_opts_t *o) {
        enum { OPT_FROM = 256, OPT_TO, OPT_TOP };
        static const struct option summary_opts[] = {
                {"dlq", required_argument, NULL, 'd'},
                {"from", required_argument, NULL, OPT_FROM},
                {"to", required_argument, NULL, OPT_TO},
                {"top", required_argument, NULL, OPT_TOP},
                {NULL, 0, NULL, 0}};
        static const struct option tail_opts[] = {
                {"dlq", required_argument, NULL, 'd'},
                {"lines", required_argument, NULL, 'n'},
                {"follow", no_argument, NULL, 'f'},
                {NULL, 0, NULL, 0}};
        cli_common_t *cc = &o->cc;
        *cc = (cli_common_t){.help = tail ? dlq_tail_help : dlq_summary_help,
                             .uses = CLI_USES_KAFKA,
                             .name = tail ? "dlq tail" : "dlq summary"};
        int c;
        while ((c = cli_getopt(cc, argc, argv, tail ? "d:n:f" : "d:",
                               tail ? tail_opts : summary_opts)) >= 0) {
                switch (c) {
                case 'd':
                        o->dlq = optarg;
                        break;
                case OPT_FROM:
                        if (!parse_bound(optarg, &o->rg.from, &o->rg.from_ms))
                                return usage_error(
                                        "--from: '%s' is neither an offset "
                                        "nor an RFC 3339 time",
                                        optarg);
                        break;
                case OPT_TO:
                        if (!parse_bound(optarg, &o->rg.until, &o->rg.until_ms))
                                return usage_error(
                                        "--to: '%s' is neither an offset nor "
                                        "an RFC 3339 time",
                                        optarg);
                        break;
                case OPT_TOP:
                        if (!parse_i64(optarg, 1, 1000000, &o->top))
                                return usage_error("--top: '%s' is not a "
                                                   "positive number",
                                                   optarg);
                        break;
                case 'n':
                        if (!parse_i64(optarg, 0, 1000000, &o->n))
                                return usage_error("-n: '%s' is not a number "
                                                   "of records",
                                                   optarg);
                        break;
                case 'f':
                        o->follow = true;
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc->rc ? cc->rc : -1;
        o->json = cc->json;
        if (!cc->config)
                return usage_error("--config FILE is required");
        return 0;
}

/* "seqgatectl dlq" without a subcommand, or with one it does not know:
 * its --help (the subcommands), or a usage error. */
static int dlq_bare(int argc, char **argv) {
        cli_common_t cc = {
                .help = dlq_help, .uses = CLI_USES_KAFKA, .operands = 1};
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "", NULL)) >= 0)
                ;
        if (c == CLI_STOP)
                return cc.rc;
        if (optind < argc)
                return usage_error("unknown subcommand '%s': summary or tail",
                                   argv[optind]);
        return usage_error("a subcommand is required: summary or tail");
}

/* The DLQ topics to read: --dlq, or each distinct dlq_topic (said on
 * stderr: choices_print). */
static size_t dlq_topics(const sg_config_t *conf, const dlq_opts_t *o,
                         const char **out) {
        if (o->dlq) {
                out[0] = o->dlq;
                return 1;
        }
        size_t n = 0;
        char list[512] = "";
        size_t l = 0;
        for (size_t i = 0; i < conf->topic_cnt; i++) {
                bool seen = false;
                for (size_t j = 0; j < n && !seen; j++)
                        seen = !strcmp(out[j], conf->topics[i].dlq_topic);
                if (seen)
                        continue;
                out[n++] = conf->topics[i].dlq_topic;
                if (l < sizeof(list))
                        l += (size_t)snprintf(list + l, sizeof(list) - l,
                                              "%s%s", n > 1 ? ", " : "",
                                              out[n - 1]);
        }
        if (n == 1)
                choice_add("DLQ %s (the config's one dlq_topic)", list);
        else
                choice_add("DLQ %s (every dlq_topic of the config)", list);
        return n;
}

/* ---- summary ------------------------------------------------------------ */

typedef struct summary {
        uint64_t total;
        uint64_t by_reason[SG_R__CNT + 1]; /* last: unknown reason */
        char **aggs;                       /* every record's aggregate */
        size_t agg_cnt, agg_cap;
        int64_t *hours; /* every record's hour (ms, floored) */
        size_t hour_cnt, hour_cap;
        int64_t first_ts, last_ts;
        const char *dlq;
        bool nomem;
} summary_t;

static int summary_each(void *opaque, const rd_kafka_message_t *m, bool *stop) {
        (void)stop;
        summary_t *s = opaque;
        dlq_rec_t r;
        rec_read(&r, s->dlq, m);
        s->total++;
        int k = SG_R__CNT;
        for (int i = 1; i < SG_R__CNT; i++)
                if (!strcmp(r.reason, sg_reason_name((sg_reason_t)i)))
                        k = i;
        s->by_reason[k]++;
        if (r.agg[0]) {
                if (s->agg_cnt == s->agg_cap) {
                        size_t cap = s->agg_cap ? 2 * s->agg_cap : 256;
                        char **n = realloc(s->aggs, cap * sizeof(*n));
                        if (!n)
                                goto nomem;
                        s->aggs = n;
                        s->agg_cap = cap;
                }
                if (!(s->aggs[s->agg_cnt] = strdup(r.agg)))
                        goto nomem;
                s->agg_cnt++;
        }
        if (r.ts > 0) {
                if (s->hour_cnt == s->hour_cap) {
                        size_t cap = s->hour_cap ? 2 * s->hour_cap : 256;
                        int64_t *n = realloc(s->hours, cap * sizeof(*n));
                        if (!n)
                                goto nomem;
                        s->hours = n;
                        s->hour_cap = cap;
                }
                s->hours[s->hour_cnt++] = r.ts - r.ts % 3600000;
                if (!s->first_ts || r.ts < s->first_ts)
                        s->first_ts = r.ts;
                if (r.ts > s->last_ts)
                        s->last_ts = r.ts;
        }
        return 0;
nomem:
        errf("out of memory");
        return EXIT_RUNTIME;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

typedef struct agg_count {
        const char *agg;
        uint64_t n;
} agg_count_t;

/* Most records first, then by name. */
static int cmp_count(const void *a, const void *b) {
        const agg_count_t *x = a, *y = b;
        if (x->n != y->n)
                return x->n > y->n ? -1 : 1;
        return strcmp(x->agg, y->agg);
}

static int summary_print(summary_t *s, const char **topics, size_t tcnt,
                         const dlq_opts_t *o) {
        if (s->agg_cnt) /* qsort's array must not be NULL, even empty */
                qsort(s->aggs, s->agg_cnt, sizeof(*s->aggs), cmp_str);
        agg_count_t *ac = calloc(s->agg_cnt + 1, sizeof(*ac));
        if (!ac) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        size_t acn = 0;
        for (size_t i = 0; i < s->agg_cnt; i++) {
                if (acn && !strcmp(ac[acn - 1].agg, s->aggs[i]))
                        ac[acn - 1].n++;
                else
                        ac[acn++] = (agg_count_t){s->aggs[i], 1};
        }
        qsort(ac, acn, sizeof(*ac), cmp_count);
        size_t top = acn < (size_t)o->top ? acn : (size_t)o->top;
        if (s->hour_cnt) /* no records: s->hours is NULL */
                qsort(s->hours, s->hour_cnt, sizeof(*s->hours), cmp_i64);
        char tb[48];
        if (o->json) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "kind", "summary");
                cJSON *t = cJSON_AddArrayToObject(j, "dlq_topics");
                for (size_t i = 0; i < tcnt; i++)
                        cJSON_AddItemToArray(t, cJSON_CreateString(topics[i]));
                j_u64(j, "records", s->total);
                j_time(j, "first_timestamp", s->first_ts);
                j_time(j, "last_timestamp", s->last_ts);
                cJSON *br = cJSON_AddObjectToObject(j, "by_reason");
                for (int i = 1; i <= SG_R__CNT; i++)
                        if (s->by_reason[i])
                                j_u64(br,
                                      i == SG_R__CNT
                                              ? "unknown"
                                              : sg_reason_name((sg_reason_t)i),
                                      s->by_reason[i]);
                cJSON *ta = cJSON_AddArrayToObject(j, "top_aggregates");
                for (size_t i = 0; i < top; i++) {
                        cJSON *a = cJSON_CreateObject();
                        cJSON_AddStringToObject(a, "aggregate", ac[i].agg);
                        j_u64(a, "records", ac[i].n);
                        cJSON_AddItemToArray(ta, a);
                }
                cJSON *bh = cJSON_AddObjectToObject(j, "by_hour");
                for (size_t i = 0; i < s->hour_cnt;) {
                        size_t k = i;
                        while (k < s->hour_cnt && s->hours[k] == s->hours[i])
                                k++;
                        j_u64(bh, sg_iso_time(s->hours[i], tb, sizeof(tb)),
                              k - i);
                        i = k;
                }
                print_json_line(j);
                cJSON_Delete(j);
                free(ac);
                return 0;
        }
        printf("DLQ");
        for (size_t i = 0; i < tcnt; i++)
                printf(" %s", topics[i]);
        printf(": %" PRIu64 " record(s)", s->total);
        if (s->first_ts) {
                printf(", %s", sg_iso_time(s->first_ts, tb, sizeof(tb)));
                printf(" .. %s", sg_iso_time(s->last_ts, tb, sizeof(tb)));
        }
        printf("\nby reason:\n");
        for (int i = 1; i <= SG_R__CNT; i++)
                if (s->by_reason[i])
                        printf("  %-24s %" PRIu64 "\n",
                               i == SG_R__CNT ? "unknown"
                                              : sg_reason_name((sg_reason_t)i),
                               s->by_reason[i]);
        printf("top aggregates:\n");
        for (size_t i = 0; i < top; i++)
                printf("  %-24s %" PRIu64 "\n", ac[i].agg, ac[i].n);
        printf("by hour (UTC):\n");
        for (size_t i = 0; i < s->hour_cnt;) {
                size_t k = i;
                while (k < s->hour_cnt && s->hours[k] == s->hours[i])
                        k++;
                printf("  %.13s:00  %zu\n",
                       sg_iso_time(s->hours[i], tb, sizeof(tb)), k - i);
                i = k;
        }
        free(ac);
        return 0;
}

static int dlq_summary(const sg_config_t *conf, const dlq_opts_t *o) {
        const char **topics = calloc(conf->topic_cnt + 1, sizeof(*topics));
        if (!topics) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        size_t tcnt = dlq_topics(conf, o, topics);
        choices_print();
        summary_t s = {0};
        int rc = 0;
        for (size_t i = 0; !rc && i < tcnt; i++) {
                dlq_reader_t r = {0};
                s.dlq = topics[i];
                rc = dlq_reader_open(&r, conf, topics[i], &o->rg);
                if (!rc)
                        rc = dlq_reader_run(&r, 30000, NULL, summary_each, &s,
                                            NULL);
                dlq_reader_close(&r);
        }
        if (!rc)
                rc = summary_print(&s, topics, tcnt, o);
        for (size_t i = 0; i < s.agg_cnt; i++)
                free(s.aggs[i]);
        free(s.aggs);
        free(s.hours);
        free(topics);
        return rc;
}

/* ---- tail --------------------------------------------------------------- */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
        (void)sig;
        g_stop = 1;
}

typedef struct tail {
        dlq_rec_t *recs;
        size_t cnt, cap;
        const char *dlq;
        bool print; /* following: print as they come */
        bool json;
} tail_t;

static int tail_each(void *opaque, const rd_kafka_message_t *m, bool *stop) {
        (void)stop;
        tail_t *t = opaque;
        dlq_rec_t r;
        rec_read(&r, t->dlq, m);
        if (t->print) {
                rec_print(&r, t->json);
                fflush(stdout);
                return 0;
        }
        if (t->cnt == t->cap) {
                size_t cap = t->cap ? 2 * t->cap : 64;
                dlq_rec_t *n = realloc(t->recs, cap * sizeof(*n));
                if (!n) {
                        errf("out of memory");
                        return EXIT_RUNTIME;
                }
                t->recs = n;
                t->cap = cap;
        }
        t->recs[t->cnt++] = r;
        return 0;
}

/* Oldest first: by timestamp, then DLQ topic, partition, offset. */
static int cmp_rec(const void *a, const void *b) {
        const dlq_rec_t *x = a, *y = b;
        if (x->ts != y->ts)
                return x->ts < y->ts ? -1 : 1;
        int c = strcmp(x->dlq, y->dlq);
        if (c)
                return c;
        if (x->dlq_partition != y->dlq_partition)
                return x->dlq_partition < y->dlq_partition ? -1 : 1;
        return x->dlq_offset < y->dlq_offset ? -1
                                             : x->dlq_offset > y->dlq_offset;
}

static int dlq_tail(const sg_config_t *conf, const dlq_opts_t *o) {
        const char **topics = calloc(conf->topic_cnt + 1, sizeof(*topics));
        if (!topics) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        size_t tcnt = dlq_topics(conf, o, topics);
        if (o->follow && tcnt != 1) {
                free(topics);
                return usage_error("dlq tail -f follows one DLQ topic: name "
                                   "it with --dlq");
        }
        choices_print();
        tail_t t = {.json = o->json};
        dlq_reader_t r = {0};
        int rc = 0;
        dlq_range_t rg = DLQ_RANGE_ALL;
        rg.last_n = o->n;
        for (size_t i = 0; !rc && i < tcnt; i++) {
                t.dlq = topics[i];
                rc = dlq_reader_open(&r, conf, topics[i], &rg);
                if (!rc)
                        rc = dlq_reader_run(&r, 30000, NULL, tail_each, &t,
                                            NULL);
                if (!o->follow || rc)
                        dlq_reader_close(&r);
        }
        if (!rc) {
                if (t.cnt) /* no records: t.recs is NULL */
                        qsort(t.recs, t.cnt, sizeof(*t.recs), cmp_rec);
                size_t from = t.cnt > (size_t)o->n ? t.cnt - (size_t)o->n : 0;
                for (size_t i = from; i < t.cnt; i++)
                        rec_print(&t.recs[i], o->json);
                fflush(stdout);
        }
        if (!rc && o->follow) {
                signal(SIGINT, on_signal);
                signal(SIGTERM, on_signal);
                t.print = true;
                rc = dlq_reader_follow(&r);
                if (!rc)
                        rc = dlq_reader_run(&r, 0, NULL, tail_each, &t,
                                            &g_stop);
                dlq_reader_close(&r);
        }
        free(t.recs);
        free(topics);
        return rc;
}

int cmd_dlq(int argc, char **argv) {
        if (argc < 2 || (strcmp(argv[1], "summary") && strcmp(argv[1], "tail")))
                return dlq_bare(argc, argv);
        bool tail = !strcmp(argv[1], "tail");
        dlq_opts_t o = {.rg = DLQ_RANGE_ALL, .top = 10, .n = 10};
        int rc = dlq_parse(argc - 1, argv + 1, tail, &o);
        if (rc)
                return rc < 0 ? 0 : rc;
        if (o.rg.from >= 0 && o.rg.until >= 0 && o.rg.until <= o.rg.from)
                return usage_error("--to must be above --from");
        sg_config_t *conf = NULL;
        if ((rc = cli_config_load(&o.cc, &conf)))
                return rc;
        rc = tail ? dlq_tail(conf, &o) : dlq_summary(conf, &o);
        sg_config_destroy(conf);
        return rc;
}
