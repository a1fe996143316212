/*
 * replay.c — seqgatectl replay: the DLQ replay tool (semantics §3
 * "Replay"): reads a DLQ topic up to its end offsets, selects records by
 * reason / aggregate and produces each back to its original topic and
 * partition, minus every __seqgate.errors.* header, plus
 * __seqgate.replay: <dlq>/<partition>/<offset>.
 */
#include "cli.h"
#include "dlqread.h"

#include "config.h"
#include "engine.h"
#include "envelope.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DLQ_HDR_PREFIX "__seqgate.errors."

/* ------------------------------------------------------------------ */
/* replay                                                              */

typedef struct replay_opts {
        const char *dlq;
        const char **reasons;
        size_t reason_cnt;
        const char *aggregate;
        int64_t dlq_partition; /* -1: all */
        int64_t from, until;   /* -1: start / end */
        int64_t limit;         /* -1: none */
        int64_t timeout_ms;    /* no progress for this long: give up */
        bool dry_run;
        bool json;
} replay_opts_t;

typedef struct replay_stats {
        uint64_t read, selected, replayed, skipped, failed;
} replay_stats_t;

/* What a delivery report needs to say which DLQ record it was. */
typedef struct replay_msg {
        replay_stats_t *stats;
        bool json;
        char *dlq_topic;
        int32_t dlq_partition;
        int64_t dlq_offset;
        char *reason;    /* may be NULL */
        char *aggregate; /* may be NULL */
} replay_msg_t;

static void replay_msg_free(replay_msg_t *m) {
        if (!m)
                return;
        free(m->dlq_topic);
        free(m->reason);
        free(m->aggregate);
        free(m);
}

/* One record line (--json) or text line. */
static void print_record(bool json, const char *action, const char *dlq,
                         int32_t dlq_part, int64_t dlq_off, const char *topic,
                         int32_t part, int64_t off, const char *reason,
                         const char *aggregate, const char *error) {
        if (json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "kind", "record");
                cJSON_AddStringToObject(o, "action", action);
                cJSON_AddStringToObject(o, "dlq_topic", dlq);
                j_i64(o, "dlq_partition", dlq_part);
                j_i64(o, "dlq_offset", dlq_off);
                if (topic)
                        cJSON_AddStringToObject(o, "topic", topic);
                else
                        cJSON_AddNullToObject(o, "topic");
                j_i64(o, "partition", part);
                if (off >= 0)
                        j_i64(o, "offset", off);
                if (reason)
                        cJSON_AddStringToObject(o, "reason", reason);
                else
                        cJSON_AddNullToObject(o, "reason");
                if (aggregate)
                        cJSON_AddStringToObject(o, "aggregate", aggregate);
                else
                        cJSON_AddNullToObject(o, "aggregate");
                if (error)
                        cJSON_AddStringToObject(o, "error", error);
                print_json_line(o);
                cJSON_Delete(o);
                return;
        }
        FILE *f = error ? stderr : stdout;
        fprintf(f, "%s%s %s/%" PRId32 "/%" PRId64 " -> %s/%" PRId32,
                error ? "seqgatectl: " : "", action, dlq, dlq_part, dlq_off,
                topic ? topic : "?", part);
        if (off >= 0)
                fprintf(f, "/%" PRId64, off);
        fprintf(f, "  reason=%s aggregate=%s", reason ? reason : "-",
                aggregate ? aggregate : "-");
        if (error)
                fprintf(f, "  error: %s", error);
        fputc('\n', f);
}

static void replay_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                      void *opaque) {
        (void)rk;
        (void)opaque;
        replay_msg_t *rm = m->_private;
        if (!rm)
                return;
        const char *topic = rd_kafka_topic_name(m->rkt);
        if (m->err) {
                rm->stats->failed++;
                print_record(rm->json, "failed", rm->dlq_topic,
                             rm->dlq_partition, rm->dlq_offset, topic,
                             m->partition, -1, rm->reason, rm->aggregate,
                             rd_kafka_err2str(m->err));
        } else {
                rm->stats->replayed++;
                print_record(rm->json, "replayed", rm->dlq_topic,
                             rm->dlq_partition, rm->dlq_offset, topic,
                             m->partition, m->offset, rm->reason, rm->aggregate,
                             NULL);
        }
        replay_msg_free(rm);
}

static void print_summary(const replay_opts_t *o, const replay_stats_t *s) {
        if (o->json) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "kind", "summary");
                cJSON_AddStringToObject(j, "dlq_topic", o->dlq);
                cJSON_AddBoolToObject(j, "dry_run", o->dry_run);
                j_u64(j, "read", s->read);
                j_u64(j, "selected", s->selected);
                j_u64(j, "replayed", s->replayed);
                j_u64(j, "skipped", s->skipped);
                j_u64(j, "failed", s->failed);
                print_json_line(j);
                cJSON_Delete(j);
                return;
        }
        printf("%s%s: read %" PRIu64 ", selected %" PRIu64 ", %s %" PRIu64
               ", skipped %" PRIu64 ", failed %" PRIu64 "\n",
               o->dry_run ? "dry run, " : "", o->dlq, s->read, s->selected,
               o->dry_run ? "would replay" : "replayed",
               o->dry_run ? s->selected - s->failed : s->replayed, s->skipped,
               s->failed);
}

#ifdef __clang_analyzer__
/* scan-build only (never defined or linked): a pointer handed to
 * librdkafka as a message's opaque, through rd_kafka_producev's varargs,
 * which the analyzer does not follow; the delivery report frees it. */
void replay_analyzer_escape(void *p); /* not const: const would not escape */
#define HANDED_TO_LIBRDKAFKA(p) replay_analyzer_escape(p)
#else
#define HANDED_TO_LIBRDKAFKA(p) ((void)(p))
#endif

/* Produces one DLQ record back to its origin. Returns false on a local
 * error (counted as failed and reported). */
static bool replay_one(rd_kafka_t *prod, const rd_kafka_message_t *m,
                       rd_kafka_headers_t *in, const char *topic,
                       int32_t partition, int64_t ts, replay_msg_t *rm) {
        size_t cnt = 0;
        rd_kafka_headers_t *out;
        char replay_val[400];
        const char *name;
        const void *val;
        size_t size;
        if (in)
                cnt = rd_kafka_header_cnt(in);
        out = rd_kafka_headers_new(cnt + 1);
        for (size_t i = 0;
             in && rd_kafka_header_get_all(in, i, &name, &val, &size) == 0;
             i++) {
                if (strncmp(name, DLQ_HDR_PREFIX, strlen(DLQ_HDR_PREFIX)) ==
                            0 ||
                    strcmp(name, SG_H_REPLAY) == 0)
                        continue;
                rd_kafka_header_add(out, name, -1, val,
                                    val ? (ssize_t)size : 0);
        }
        snprintf(replay_val, sizeof(replay_val), "%s/%" PRId32 "/%" PRId64,
                 rm->dlq_topic, rm->dlq_partition, rm->dlq_offset);
        rd_kafka_header_add(out, SG_H_REPLAY, -1, replay_val, -1);
        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_producev(
                        prod, RD_KAFKA_V_TOPIC(topic),
                        RD_KAFKA_V_PARTITION(partition),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(m->key, m->key ? m->key_len : 0),
                        RD_KAFKA_V_VALUE(m->payload, m->payload ? m->len : 0),
                        RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                        RD_KAFKA_V_HEADERS(out), RD_KAFKA_V_OPAQUE(rm),
                        RD_KAFKA_V_END);
                if (!err) {
                        /* headers now owned by librdkafka, rm by the
                         * delivery report */
                        HANDED_TO_LIBRDKAFKA(rm);
                        return true;
                }
                if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(prod, 100);
                        continue;
                }
                rd_kafka_headers_destroy(out);
                rm->stats->failed++;
                print_record(rm->json, "failed", rm->dlq_topic,
                             rm->dlq_partition, rm->dlq_offset, topic,
                             partition, -1, rm->reason, rm->aggregate,
                             rd_kafka_err2str(err));
                replay_msg_free(rm);
                return false;
        }
}

/* One replay run: its clients, the DLQ reader and its counts (the
 * delivery reports count into st). */
typedef struct replay {
        const sg_config_t *conf;
        const replay_opts_t *o;
        replay_stats_t st;
        dlq_reader_t rd;
        rd_kafka_t *prod;
} replay_t;

/* The producer, when there is something to replay and it is not a dry
 * run. Returns 0 or EXIT_USAGE (its configuration). */
static int replay_open_producer(replay_t *r) {
        char es[512];
        if (!r->rd.open_cnt || r->o->dry_run)
                return 0;
        rd_kafka_conf_t *pc = kafka_conf(r->conf, true, replay_dr);
        if (!pc)
                return EXIT_USAGE;
        if (!(r->prod = kafka_new(RD_KAFKA_PRODUCER, pc, es, sizeof(es)))) {
                rd_kafka_conf_destroy(pc);
                errf("kafka producer: %s", es);
                return EXIT_USAGE;
        }
        return 0;
}

/* Whether --reason (any of them) and --aggregate select a record with
 * these DLQ headers. */
static bool replay_selects(const replay_opts_t *o, bool has_reason,
                           const char *reason, bool has_agg, const char *agg) {
        bool selected = true;
        if (o->reason_cnt) {
                selected = false;
                for (size_t i = 0; has_reason && i < o->reason_cnt; i++)
                        if (!strcmp(reason, o->reasons[i]))
                                selected = true;
        }
        if (o->aggregate && (!has_agg || strcmp(agg, o->aggregate)))
                selected = false;
        return selected;
}

/* One record of a partition's planned range: skipped, or selected and
 * then failed (no valid origin headers), named (--dry-run) or produced
 * back to its origin (replay_one; the delivery report counts it).
 * *limit_hit is set when it is the --limit'th selected record. m stays
 * the caller's. Returns 0, or EXIT_RUNTIME when out of memory. */
static int replay_record(replay_t *r, const rd_kafka_message_t *m,
                         bool *limit_hit) {
        const replay_opts_t *o = r->o;
        rd_kafka_headers_t *h = NULL;
        if (rd_kafka_message_headers(m, &h))
                h = NULL;
        char reason[128], agg[1100], topic[256], pbuf[32], tbuf[32];
        bool has_reason =
                dlq_hdr_str(h, SG_DLQ_H_REASON, reason, sizeof(reason));
        bool has_agg = dlq_hdr_str(h, SG_DLQ_H_AGGREGATE, agg, sizeof(agg));
        if (!replay_selects(o, has_reason, reason, has_agg, agg)) {
                r->st.skipped++;
                return 0;
        }
        r->st.selected++;
        if (o->limit >= 0 && (int64_t)r->st.selected >= o->limit)
                *limit_hit = true;

        int64_t opart = -1, ts = 0;
        bool origin = dlq_hdr_str(h, SG_DLQ_H_TOPIC, topic, sizeof(topic)) &&
                      topic[0] &&
                      dlq_hdr_str(h, SG_DLQ_H_PARTITION, pbuf, sizeof(pbuf)) &&
                      parse_i64(pbuf, 0, INT32_MAX, &opart);
        /* the input's timestamp (the DLQ record's own is when it was
         * dead-lettered); none (-1): the broker's time, as for the input */
        if (!dlq_hdr_str(h, SG_DLQ_H_TIMESTAMP, tbuf, sizeof(tbuf)) ||
            !parse_i64(tbuf, INT64_MIN, INT64_MAX, &ts))
                ts = rd_kafka_message_timestamp(m, NULL);
        if (ts < 0)
                ts = 0;
        if (!origin) {
                r->st.failed++;
                print_record(o->json, "failed", o->dlq, m->partition, m->offset,
                             NULL, -1, -1, has_reason ? reason : NULL,
                             has_agg ? agg : NULL,
                             "no valid " SG_DLQ_H_TOPIC " / " SG_DLQ_H_PARTITION
                             " header");
                return 0;
        }
        /* A record dead-lettered without its value (or headers) is not the
         * input record: producing it back would put a different record on
         * the input topic. The operator fetches the original from the
         * offset the DLQ record names. */
        char dropped[32];
        const char *what =
                dlq_hdr_str(h, SG_DLQ_H_VALUE_DROPPED, dropped, sizeof(dropped))
                        ? SG_DLQ_H_VALUE_DROPPED
                : dlq_hdr_str(h, SG_DLQ_H_HEADERS_DROPPED, dropped,
                              sizeof(dropped))
                        ? SG_DLQ_H_HEADERS_DROPPED
                        : NULL;
        if (what) {
                char detail[512], obuf[32] = "?";
                dlq_hdr_str(h, SG_DLQ_H_OFFSET, obuf, sizeof(obuf));
                snprintf(detail, sizeof(detail),
                         "not replayable: dead-lettered without the input's "
                         "%s (%s: %s); the input record is %s/%" PRId64 "/%s",
                         strcmp(what, SG_DLQ_H_VALUE_DROPPED) ? "headers"
                                                              : "value",
                         what, dropped, topic, opart, obuf);
                r->st.failed++;
                print_record(o->json, "failed", o->dlq, m->partition, m->offset,
                             topic, (int32_t)opart, -1,
                             has_reason ? reason : NULL, has_agg ? agg : NULL,
                             detail);
                return 0;
        }
        if (o->dry_run) {
                print_record(o->json, "would_replay", o->dlq, m->partition,
                             m->offset, topic, (int32_t)opart, -1,
                             has_reason ? reason : NULL, has_agg ? agg : NULL,
                             NULL);
                return 0;
        }
        replay_msg_t *rm = calloc(1, sizeof(*rm));
        if (!rm || !(rm->dlq_topic = strdup(o->dlq)) ||
            (has_reason && !(rm->reason = strdup(reason))) ||
            (has_agg && !(rm->aggregate = strdup(agg)))) {
                replay_msg_free(rm);
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        rm->stats = &r->st;
        rm->json = o->json;
        rm->dlq_partition = m->partition;
        rm->dlq_offset = m->offset;
        replay_one(r->prod, m, h, topic, (int32_t)opart, ts, rm);
        return 0;
}

/* A planned record, for dlq_reader_run(): counted, then replay_record. */
static int replay_each(void *opaque, const rd_kafka_message_t *m, bool *stop) {
        replay_t *r = opaque;
        r->st.read++;
        return replay_record(r, m, stop);
}

/* Serves the producer's delivery reports between reads. */
static void replay_between(void *opaque) {
        replay_t *r = opaque;
        if (r->prod)
                rd_kafka_poll(r->prod, 0);
}

/* Waits for every delivery report (at least 60 s, or --timeout-ms);
 * records still undelivered then are purged and counted as failed. Then
 * the producer is destroyed. */
static void replay_flush(replay_t *r) {
        if (!r->prod)
                return;
        const replay_opts_t *o = r->o;
        /* Every delivery is waited for and checked. */
        int64_t wait = o->timeout_ms > 60000 ? o->timeout_ms : 60000;
        rd_kafka_flush(r->prod, (int)(wait > INT_MAX ? INT_MAX : wait));
        int left = rd_kafka_outq_len(r->prod);
        if (left > 0) {
                errf("%d record(s) not delivered after %" PRId64 " ms%s%s",
                     left, wait, g_kafka_error[0] ? "; last error: " : "",
                     g_kafka_error);
                /* Purged records get failed delivery reports (counted
                 * there, opaques freed there); whatever reports never come
                 * are counted here. */
                uint64_t before = r->st.failed;
                rd_kafka_purge(r->prod, RD_KAFKA_PURGE_F_QUEUE |
                                                RD_KAFKA_PURGE_F_INFLIGHT);
                rd_kafka_flush(r->prod, 5000);
                if (r->st.failed - before < (uint64_t)left)
                        r->st.failed = before + (uint64_t)left;
        }
        rd_kafka_destroy(r->prod);
        r->prod = NULL;
}

/* The replay (semantics §3 "Replay"): plan, read and produce, wait for
 * the deliveries, print the summary. Returns 0, EXIT_USAGE (client
 * configuration, no such DLQ partition) or EXIT_RUNTIME (Kafka, or any
 * record failed). */
static int replay_run(const sg_config_t *conf, const replay_opts_t *o) {
        replay_t r = {.conf = conf, .o = o};
        dlq_range_t rg = DLQ_RANGE_ALL;
        rg.partition = o->dlq_partition;
        rg.from = o->from;
        rg.until = o->until;
        rg.timeout_ms = o->timeout_ms;
        int rc = dlq_reader_open(&r.rd, conf, o->dlq, &rg);
        if (rc) {
                /* without a plan (no broker, no such topic) nothing was
                 * read: a summary ("would replay 0") would say the DLQ is
                 * empty */
                dlq_reader_close(&r.rd);
                return rc;
        }
        rc = replay_open_producer(&r);
        if (!rc)
                rc = dlq_reader_run(&r.rd, o->timeout_ms, replay_between,
                                    replay_each, &r, NULL);
        replay_flush(&r);
        dlq_reader_close(&r.rd);
        print_summary(o, &r.st);
        if (rc == 0 && r.st.failed)
                rc = EXIT_RUNTIME;
        return rc;
}

static const char replay_help[] =
        "usage: seqgatectl replay --config FILE [--dlq TOPIC] (--reason R ... "
        "| --all)\n"
        "                         [--aggregate ID] [--dlq-partition P] "
        "[--from-offset N]\n"
        "                         [--until-offset N] [--limit N] [--dry-run] "
        "[--timeout-ms MS]\n"
        "                         [-X NAME=VALUE ...] [--json]\n"
        "\n"
        "Read the DLQ topic (every partition, or P) from the start or offset "
        "N up\n"
        "to its end offsets (or before --until-offset, exclusive) and "
        "produce each\n"
        "selected record back to its original topic and partition without "
        "its\n"
        "__seqgate.errors.* headers, with __seqgate.replay: "
        "<dlq>/<partition>/<offset>.\n"
        "\n"
        "  -d, --dlq TOPIC        the DLQ topic (default: the config's "
        "dlq_topic,\n"
        "                         when every input topic has the same)\n"
        "  -r, --reason R         select the records dead-lettered for reason "
        "R;\n"
        "                         repeatable, or a comma list (R1,R2): any of "
        "them\n"
        "      --all              select every reason (--reason or --all is\n"
        "                         required)\n"
        "  -a, --aggregate ID     select the records of aggregate ID only\n"
        "  -P, --dlq-partition P  read DLQ partition P only\n"
        "  -f, --from-offset N    start at offset N (default: the log start)\n"
        "  -u, --until-offset N   stop before offset N (default: the end "
        "offsets\n"
        "                         when the command starts)\n"
        "  -l, --limit N          stop after N selected records\n"
        "  -n, --dry-run          print the selected records, produce "
        "nothing\n"
        "  -T, --timeout-ms MS    give up after MS ms without a record or "
        "broker\n"
        "                         answer (default 30000): exit 1\n";

/* --reason's value: one reason or a comma list of them, each one of the
 * DLQ reasons (sg_reason_name); added to reasons[] (room for every one).
 * Returns 0 or EXIT_USAGE after printing which is not a reason. */
static int replay_reasons(char *arg, const char **reasons, size_t *cnt) {
        for (char *save = NULL, *r = strtok_r(arg, ",", &save); r;
             r = strtok_r(NULL, ",", &save)) {
                bool known = false;
                for (int i = 1; i < SG_R__CNT && !known; i++)
                        known = !strcmp(r, sg_reason_name((sg_reason_t)i));
                if (!known) {
                        char all[512] = "";
                        size_t n = 0;
                        for (int i = 1; i < SG_R__CNT && n < sizeof(all); i++)
                                n += (size_t)snprintf(
                                        all + n, sizeof(all) - n, "%s%s",
                                        i > 1 ? ", " : "",
                                        sg_reason_name((sg_reason_t)i));
                        return usage_error("--reason: '%s' is not a DLQ "
                                           "reason (one of: %s)",
                                           r, all);
                }
                reasons[(*cnt)++] = r;
        }
        return 0;
}

int cmd_replay(int argc, char **argv) {
        enum { OPT_ALL = 256 };
        static const struct option opts[] = {
                {"dlq", required_argument, NULL, 'd'},
                {"reason", required_argument, NULL, 'r'},
                {"all", no_argument, NULL, OPT_ALL},
                {"aggregate", required_argument, NULL, 'a'},
                {"dlq-partition", required_argument, NULL, 'P'},
                {"from-offset", required_argument, NULL, 'f'},
                {"until-offset", required_argument, NULL, 'u'},
                {"limit", required_argument, NULL, 'l'},
                {"timeout-ms", required_argument, NULL, 'T'},
                {"dry-run", no_argument, NULL, 'n'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = replay_help, .uses = CLI_USES_KAFKA};
        replay_opts_t o = {.dlq_partition = -1,
                           .from = -1,
                           .until = -1,
                           .limit = -1,
                           .timeout_ms = 30000};
        bool all = false;
        /* room for every reason of every --reason (each at least 2 bytes
         * apart: "a,b") */
        size_t room = 0;
        for (int i = 0; i < argc; i++)
                room += strlen(argv[i]) / 2 + 1;
        const char **reasons = calloc(room + 1, sizeof(*reasons));
        if (!reasons) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        o.reasons = reasons;
        int c, rc = 0;
        while (!rc && (c = cli_getopt(&cc, argc, argv, "d:r:a:P:f:u:l:T:n",
                                      opts)) >= 0) {
                switch (c) {
                case 'd':
                        o.dlq = optarg;
                        break;
                case 'r':
                        rc = replay_reasons(optarg, reasons, &o.reason_cnt);
                        break;
                case OPT_ALL:
                        all = true;
                        break;
                case 'a':
                        o.aggregate = optarg;
                        break;
                case 'P':
                        if (!parse_i64(optarg, 0, INT32_MAX, &o.dlq_partition))
                                rc = usage_error("--dlq-partition: '%s' is not "
                                                 "a partition number",
                                                 optarg);
                        break;
                case 'f':
                        if (!parse_i64(optarg, 0, INT64_MAX, &o.from))
                                rc = usage_error("--from-offset: '%s' is not "
                                                 "an offset",
                                                 optarg);
                        break;
                case 'u':
                        if (!parse_i64(optarg, 0, INT64_MAX, &o.until))
                                rc = usage_error("--until-offset: '%s' is not "
                                                 "an offset",
                                                 optarg);
                        break;
                case 'l':
                        if (!parse_i64(optarg, 1, INT64_MAX, &o.limit))
                                rc = usage_error("--limit: '%s' is not a "
                                                 "positive number",
                                                 optarg);
                        break;
                case 'T':
                        if (!parse_i64(optarg, 1, INT32_MAX, &o.timeout_ms))
                                rc = usage_error("--timeout-ms: '%s' is not a "
                                                 "positive number",
                                                 optarg);
                        break;
                case 'n':
                        o.dry_run = true;
                        break;
                }
        }
        if (!rc && c == CLI_STOP) {
                free(reasons);
                return cc.rc;
        }
        const char *config = cc.config;
        o.json = cc.json;
        if (!rc && !config)
                rc = usage_error("--config FILE is required");
        if (!rc && !all && !o.reason_cnt)
                rc = usage_error("--reason R or --all is required (which "
                                 "DLQ records to replay)");
        if (!rc && all && o.reason_cnt)
                rc = usage_error("--all and --reason exclude each other");
        if (!rc && o.from >= 0 && o.until >= 0 && o.until <= o.from)
                rc = usage_error("--until-offset must be above --from-offset");
        sg_config_t *conf = NULL;
        if (!rc)
                rc = cli_config_load(&cc, &conf);
        if (!rc && !(rc = default_dlq(conf, &o.dlq))) {
                choices_print();
                bool is_dlq = false;
                for (size_t i = 0; i < conf->topic_cnt; i++)
                        if (!strcmp(conf->topics[i].dlq_topic, o.dlq))
                                is_dlq = true;
                if (!is_dlq)
                        warnf("%s is not a dlq_topic of %s", o.dlq, config);
                rc = replay_run(conf, &o);
        }
        sg_config_destroy(conf);
        free(reasons);
        return rc;
}
