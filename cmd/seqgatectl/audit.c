/*
 * audit.c — seqgatectl audit: reads a topic once, from --from to --to,
 * with a group-less reader (every partition read from its own start
 * offset, read_committed, no group.id at all: nothing joined or
 * committed; nothing produced) and runs its records through the
 * daemon's engine over a temporary store (audit_drive.c), then reports
 * what seqgate would have met: duplicates, idempotency conflicts, stale
 * versions, gaps and their durations, disorder, and the sizing that
 * follows (semantics §7, §8; docs/seqgatectl.md "Audit a topic before adopting
 * seqgate").
 *
 * The partitions are read one by one (rd_kafka_consume) and merged by record
 * timestamp (one record ahead per partition), so that the engine's clock,
 * which is the records' time, moves as it would have moved live.
 */
#include "audit.h"
#include "cli.h"

#include "config.h"
#include "seqgate.h"

#include <librdkafka/rdkafka.h>

#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct audit_opts {
        const char *config, *topic, *from, *to, *html;
        bool json;
        int64_t timeout_ms;
        int64_t max_aggs, max_keys;
} audit_opts_t;

/* A --from / --to value: an offset (digits) or an RFC 3339 time. */
typedef struct au_pos {
        bool set, is_time;
        int64_t v; /* offset, or ms since the epoch */
} au_pos_t;

/* Parses RFC 3339 ("2026-11-30T08:00:00Z", ".123", "+02:00"; 't', ' '
 * and 'z' accepted) into ms since the epoch. */
static bool parse_rfc3339(const char *s, int64_t *msp) {
        int Y, M, D, h, m, sec, n = 0;
        char sep;
        if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%n", &Y, &M, &D, &sep, &h, &m,
                   &sec, &n) != 7 ||
            n != 19 || (sep != 'T' && sep != 't' && sep != ' '))
                return false;
        if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
                return false;
        const char *p = s + n;
        int64_t frac = 0;
        if (*p == '.') {
                int digits = 0;
                for (p++; isdigit((unsigned char)*p); p++, digits++)
                        if (digits < 3)
                                frac = frac * 10 + (*p - '0');
                if (!digits)
                        return false;
                for (; digits < 3; digits++)
                        frac *= 10;
        }
        int64_t off = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int oh, om, k = 0;
                if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5)
                        return false;
                off = (int64_t)(oh * 60 + om) * 60000 * (*p == '+' ? 1 : -1);
                p += 6;
        } else {
                return false;
        }
        if (*p)
                return false;
        struct tm tm = {.tm_year = Y - 1900,
                        .tm_mon = M - 1,
                        .tm_mday = D,
                        .tm_hour = h,
                        .tm_min = m,
                        .tm_sec = sec};
        time_t t = timegm(&tm);
        if (t == (time_t)-1)
                return false;
        *msp = (int64_t)t * 1000 + frac - off;
        return true;
}

static bool parse_pos(const char *s, au_pos_t *p) {
        if (!s)
                return true;
        p->set = true;
        if (parse_i64(s, 0, INT64_MAX, &p->v))
                return true;
        p->is_time = true;
        return parse_rfc3339(s, &p->v);
}

/* ------------------------------------------------------------------ */
/* the reader                                                          */

typedef struct audit {
        const audit_opts_t *o;
        rd_kafka_t *rk;
        rd_kafka_topic_t *rkt; /* the audited topic, once reading started */
        au_part_t *parts;
        size_t part_cnt;
} audit_t;

/* Offsets of the records at or after time @p ms in every partition (-1:
 * none, i.e. the end), into @p offs. */
static int offsets_for_time(audit_t *a, int64_t ms, int64_t *offs) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)a->part_cnt);
        for (size_t i = 0; i < a->part_cnt; i++)
                rd_kafka_topic_partition_list_add(l, a->o->topic,
                                                  a->parts[i].partition)
                        ->offset = ms;
        rd_kafka_resp_err_t e =
                rd_kafka_offsets_for_times(a->rk, l, (int)a->o->timeout_ms);
        for (int i = 0; !e && i < l->cnt; i++) {
                e = l->elems[i].err;
                offs[i] = l->elems[i].offset;
        }
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                errf("%s: offsets for time: %s", a->o->topic,
                     rd_kafka_err2str(e));
                return EXIT_RUNTIME;
        }
        return 0;
}

/* The plan: every partition with [from, to), where the end is fixed now
 * (records written while the audit runs are not read). */
static int audit_plan(audit_t *a, const au_pos_t *from, const au_pos_t *to) {
        const audit_opts_t *o = a->o;
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(a->rk, o->topic, NULL);
        rd_kafka_resp_err_t e =
                rd_kafka_metadata(a->rk, 0, rkt, &md, (int)o->timeout_ms);
        int rc = 0;
        if (e || md->topic_cnt != 1 || md->topics[0].err) {
                errf("topic %s: %s", o->topic,
                     e               ? rd_kafka_err2str(e)
                     : md->topic_cnt ? rd_kafka_err2str(md->topics[0].err)
                                     : "not in the metadata");
                rc = EXIT_RUNTIME;
        }
        const struct rd_kafka_metadata_topic *mt = rc ? NULL : &md->topics[0];
        if (mt) {
                a->part_cnt = (size_t)mt->partition_cnt;
                a->parts = calloc(a->part_cnt + 1, sizeof(*a->parts));
                if (!a->parts)
                        rc = EXIT_RUNTIME;
        }
        for (size_t i = 0; !rc && i < a->part_cnt; i++) {
                au_part_t *p = &a->parts[i];
                int64_t lo, hi;
                p->partition = mt->partitions[i].id;
                e = rd_kafka_query_watermark_offsets(a->rk, o->topic,
                                                     p->partition, &lo, &hi,
                                                     (int)o->timeout_ms);
                if (e) {
                        errf("%s [%" PRId32 "]: watermarks: %s", o->topic,
                             p->partition, rd_kafka_err2str(e));
                        rc = EXIT_RUNTIME;
                }
                p->from = lo;
                p->to = hi;
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        int64_t *offs = rc ? NULL : calloc(a->part_cnt + 1, sizeof(*offs));
        if (!rc && !offs)
                rc = EXIT_RUNTIME;
        for (int side = 0; !rc && side < 2; side++) {
                const au_pos_t *pos = side ? to : from;
                if (!pos->set)
                        continue;
                if (pos->is_time && (rc = offsets_for_time(a, pos->v, offs)))
                        break;
                for (size_t i = 0; i < a->part_cnt; i++) {
                        au_part_t *p = &a->parts[i];
                        int64_t v = pos->is_time ? offs[i] : pos->v;
                        if (v < 0 || v > p->to)
                                v = p->to; /* no record at or after it */
                        if (side == 0)
                                p->from = v > p->from ? v : p->from;
                        else
                                p->to = v;
                }
        }
        free(offs);
        for (size_t i = 0; !rc && i < a->part_cnt; i++)
                a->parts[i].done = a->parts[i].from >= a->parts[i].to;
        return rc;
}

/* Starts reading every partition with anything to read, each on its own
 * (librdkafka's per-partition consume_start: no consumer group at all,
 * so no group coordinator is even looked up), so that they can be merged
 * by timestamp. */
static int audit_assign(audit_t *a) {
        a->rkt = rd_kafka_topic_new(a->rk, a->o->topic, NULL);
        if (!a->rkt) {
                errf("%s: %s", a->o->topic,
                     rd_kafka_err2str(rd_kafka_last_error()));
                return EXIT_RUNTIME;
        }
        for (size_t i = 0; i < a->part_cnt; i++) {
                au_part_t *p = &a->parts[i];
                if (p->done)
                        continue;
                if (rd_kafka_consume_start(a->rkt, p->partition, p->from)) {
                        errf("%s [%" PRId32 "]: start reading at %" PRId64
                             ": %s",
                             a->o->topic, p->partition, p->from,
                             rd_kafka_err2str(rd_kafka_last_error()));
                        return EXIT_RUNTIME;
                }
                p->started = true;
        }
        return 0;
}

/* Fills the head of open partition @p p (waiting up to @p wait_ms).
 * Returns 0 (head set, done, or nothing yet) or EXIT_RUNTIME. */
static int part_fill(audit_t *a, au_part_t *p, int wait_ms) {
        rd_kafka_message_t *m = rd_kafka_consume(a->rkt, p->partition, wait_ms);
        if (!m)
                return 0;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                /* read_committed: the end is the last stable offset */
                if (m->offset >= p->to)
                        p->done = true;
                rd_kafka_message_destroy(m);
                return 0;
        }
        if (m->err) {
                errf("reading %s [%" PRId32 "]: %s", a->o->topic, p->partition,
                     rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                return EXIT_RUNTIME;
        }
        if (m->offset >= p->to) {
                p->done = true;
                rd_kafka_message_destroy(m);
                return 0;
        }
        p->head = m;
        return 0;
}

/* Reads every partition to its end, handing the records to the engine
 * in timestamp order (ties: partition order). */
static int audit_read(audit_t *a, au_drive_t *d) {
        int64_t last = sg_clock_mono_ms();
        for (;;) {
                bool waiting = false, open = false;
                for (size_t i = 0; i < a->part_cnt; i++) {
                        au_part_t *p = &a->parts[i];
                        if (p->done || p->head)
                                continue;
                        int rc = part_fill(a, p, 100);
                        if (rc)
                                return rc;
                        if (!p->done && !p->head)
                                waiting = true;
                }
                rd_kafka_poll(a->rk, 0); /* logs and errors */
                if (g_fatal) {
                        errf("kafka %s", g_kafka_error);
                        return EXIT_RUNTIME;
                }
                au_part_t *best = NULL;
                int64_t best_ts = 0;
                for (size_t i = 0; i < a->part_cnt; i++) {
                        au_part_t *p = &a->parts[i];
                        if (p->done && !p->head)
                                continue;
                        open = true;
                        if (!p->head)
                                continue;
                        int64_t ts = rd_kafka_message_timestamp(p->head, NULL);
                        if (!best || ts < best_ts) {
                                best = p;
                                best_ts = ts;
                        }
                }
                if (!open)
                        return 0;
                if (waiting) {
                        if (sg_clock_mono_ms() - last > a->o->timeout_ms) {
                                errf("no progress reading %s for %" PRId64
                                     " ms%s%s",
                                     a->o->topic, a->o->timeout_ms,
                                     g_kafka_error[0] ? "; last error: " : "",
                                     g_kafka_error);
                                return EXIT_RUNTIME;
                        }
                        continue; /* every open partition needs its head */
                }
                last = sg_clock_mono_ms();
                rd_kafka_message_t *m = best->head;
                best->head = NULL;
                best->records++;
                if (m->offset + 1 >= best->to)
                        best->done = true;
                int rc = au_drive_add(d, m);
                if (rc)
                        return rc;
        }
}

static void audit_close(audit_t *a) {
        for (size_t i = 0; i < a->part_cnt; i++) {
                if (a->parts[i].head)
                        rd_kafka_message_destroy(a->parts[i].head);
                if (a->parts[i].started)
                        rd_kafka_consume_stop(a->rkt, a->parts[i].partition);
        }
        if (a->rkt)
                rd_kafka_topic_destroy(a->rkt);
        if (a->rk)
                rd_kafka_destroy(a->rk);
        free(a->parts);
}

static int audit_run(sg_config_t *conf, sg_topic_config_t *tc,
                     const audit_opts_t *o, const au_pos_t *from,
                     const au_pos_t *to) {
        char es[512];
        audit_t a = {.o = o};
        au_drive_t d;
        memset(&d, 0, sizeof(d));
        rd_kafka_conf_t *kc = kafka_conf(conf, false, NULL);
        if (!kc)
                return EXIT_USAGE;
        /* no group.id at all: librdkafka then has no consumer group handle
         * (nothing joined, looked up or committed) */
        if (rd_kafka_conf_set(kc, "group.id", "", es, sizeof(es)) !=
            RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(kc);
                errf("group.id: %s", es);
                return EXIT_USAGE;
        }
        if (!(a.rk = kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es)))) {
                rd_kafka_conf_destroy(kc);
                errf("kafka consumer: %s", es);
                return EXIT_USAGE;
        }
        int rc = audit_plan(&a, from, to);
        if (!rc)
                rc = au_drive_open(&d, conf, tc, a.parts, a.part_cnt,
                                   (size_t)o->max_aggs, (size_t)o->max_keys);
        if (!rc)
                rc = audit_assign(&a);
        if (!rc)
                rc = audit_read(&a, &d);
        if (!rc)
                rc = au_drive_finish(&d);
        if (!rc)
                rc = au_report(&d, a.parts, a.part_cnt, o->json, o->html);
        au_drive_close(&d);
        audit_close(&a);
        return rc;
}

static const char audit_help[] =
        "usage: seqgatectl audit --config FILE [--topic T] [--from "
        "TIME|OFFSET]\n"
        "                        [--to TIME|OFFSET] [--html FILE] "
        "[--max-aggregates N]\n"
        "                        [--max-keys N] [--timeout-ms MS] "
        "[-X NAME=VALUE ...]\n"
        "                        [--json]\n"
        "\n"
        "Read topic T once (every partition, no consumer group, nothing\n"
        "committed or produced) through seqgate's engine over a temporary "
        "store,\n"
        "with the record timestamps as its clock, and report first the "
        "aggregates\n"
        "whose events span partitions (semantics §2 co-partitioning), then "
        "its\n"
        "duplicates, conflicts, stale events, gaps and disorder, with the\n"
        "ordering.gap_timeout_ms and dedup.ttl_ms they call for and the "
        "semantics §8 "
        "sizing,\n"
        "each estimate with its basis (a warning below 1000 dedup records "
        "or an\n"
        "hour of records, or too few samples for a percentile).\n"
        "\n"
        "  -t, --topic T          the input topic (a topic of the config; "
        "default:\n"
        "                         the config's one input topic)\n"
        "      --from TIME|OFFSET start at an RFC 3339 time "
        "(2026-11-30T08:00:00Z)\n"
        "                         or an offset (every partition); default: "
        "the log\n"
        "                         start\n"
        "      --to TIME|OFFSET   stop before it (exclusive); default: the "
        "end\n"
        "                         offsets when the command starts\n"
        "      --html FILE        also write a self-contained HTML page with "
        "charts\n"
        "      --max-aggregates N track at most N aggregates (default "
        "100000)\n"
        "      --max-keys N       track at most N idempotency keys (default\n"
        "                         1000000)\n"
        "      --timeout-ms MS    bound each Kafka request and the wait for "
        "records\n"
        "                         (default 30000)\n";

int cmd_audit(int argc, char **argv) {
        enum {
                OPT_FROM = 256,
                OPT_TO,
                OPT_HTML,
                OPT_TIMEOUT,
                OPT_MAX_AGGS,
                OPT_MAX_KEYS
        };
        static const struct option lo[] = {
                {"topic", required_argument, NULL, 't'},
                {"from", required_argument, NULL, OPT_FROM},
                {"to", required_argument, NULL, OPT_TO},
                {"html", required_argument, NULL, OPT_HTML},
                {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
                {"max-aggregates", required_argument, NULL, OPT_MAX_AGGS},
                {"max-keys", required_argument, NULL, OPT_MAX_KEYS},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = audit_help, .uses = CLI_USES_KAFKA};
        audit_opts_t o = {
                .timeout_ms = 30000, .max_aggs = 100000, .max_keys = 1000000};
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:", lo)) >= 0) {
                switch (c) {
                case 't':
                        o.topic = optarg;
                        break;
                case OPT_FROM:
                        o.from = optarg;
                        break;
                case OPT_TO:
                        o.to = optarg;
                        break;
                case OPT_HTML:
                        o.html = optarg;
                        break;
                case OPT_TIMEOUT:
                        if (!parse_i64(optarg, 1, INT32_MAX, &o.timeout_ms))
                                return usage_error("--timeout-ms: a number of "
                                                   "milliseconds >= 1");
                        break;
                case OPT_MAX_AGGS:
                        if (!parse_i64(optarg, 1, INT32_MAX, &o.max_aggs))
                                return usage_error("--max-aggregates: a "
                                                   "number >= 1");
                        break;
                case OPT_MAX_KEYS:
                        if (!parse_i64(optarg, 1, INT32_MAX, &o.max_keys))
                                return usage_error("--max-keys: a number >= 1");
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        o.config = cc.config;
        o.json = cc.json;
        if (!o.config)
                return usage_error("--config FILE is required");
        au_pos_t from = {0}, to = {0};
        if (!parse_pos(o.from, &from))
                return usage_error("--from: an offset or an RFC 3339 time "
                                   "(2026-11-30T08:00:00Z), not '%s'",
                                   o.from);
        if (!parse_pos(o.to, &to))
                return usage_error("--to: an offset or an RFC 3339 time "
                                   "(2026-11-30T08:00:00Z), not '%s'",
                                   o.to);
        sg_config_t *conf;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        if ((rc = default_topic(conf, &o.topic))) {
                sg_config_destroy(conf);
                return rc;
        }
        choices_print();
        sg_topic_config_t *tc = NULL;
        for (size_t i = 0; i < conf->topic_cnt; i++)
                if (!strcmp(conf->topics[i].name, o.topic))
                        tc = &conf->topics[i];
        if (!tc) {
                sg_config_destroy(conf);
                return usage_error("topic %s is not in %s", o.topic, o.config);
        }
        rc = audit_run(conf, tc, &o, &from, &to);
        sg_config_destroy(conf);
        return rc;
}
