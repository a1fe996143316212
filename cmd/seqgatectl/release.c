/*
 * release.c — seqgatectl release: ends an aggregate's quarantine with a
 * control record the owning seqgate applies in order (semantics §4
 * quarantine), optionally waiting for the outcome in its store.
 */
#include "cli.h"

#include "config.h"
#include "engine.h"
#include "envelope.h"
#include "query.h"
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

/* ------------------------------------------------------------------ */
/* release                                                             */

static volatile int g_release_err = -1;
static int64_t g_release_offset = -1;

static void release_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                       void *opaque) {
        (void)rk;
        (void)opaque;
        g_release_err = m->err;
        g_release_offset = m->offset;
}

/* What the store says of the aggregate (read-only, while seqgate runs).
 * Returns 0 and fills *recp (*foundp false: no such aggregate), or
 * EXIT_RUNTIME. *input_offsetp: the partition's next input offset the
 * store reflects (-1 none). */
static int release_read(const sg_config_t *conf, const char *topic,
                        int32_t partition, const char *agg, bool *foundp,
                        sg_agg_rec_t *recp, int64_t *input_offsetp) {
        sg_store_t *store;
        sg_txn_t *txn;
        int rc = open_store(conf, &store, &txn);
        if (rc)
                return rc;
        sg_tp_t tp;
        sg_tp_make(&tp, topic, partition);
        sg_meta_rec_t m;
        *input_offsetp =
                sg_meta_get(txn, &tp, &m) == SG_OK ? m.input_offset : -1;
        unsigned char ah[32];
        sg_sha256(agg, strlen(agg), ah);
        sg_err_t err = sg_agg_get(txn, &tp, ah, recp);
        *foundp = err == SG_OK;
        sg_txn_abort(txn);
        sg_store_close(store);
        if (err && err != SG_ERR_NOT_FOUND) {
                errf("release: reading aggregate %s: %s", agg, sg_err2str(err));
                return EXIT_RUNTIME;
        }
        return 0;
}

/* The rules the engine applies to a release (sg_release_refusal), checked
 * before sending: the state must be one the topic's state machine knows;
 * with wait, the whole rule against the aggregate in the owner's store.
 * Returns 0, EXIT_USAGE (refused, printed why) or EXIT_RUNTIME (the store
 * unreadable). */
static int release_check(const sg_config_t *conf, const sg_topic_config_t *tc,
                         const char *topic, int64_t partition, const char *agg,
                         bool has_version, uint64_t version, const char *state,
                         bool wait) {
        /* the state must be one the topic's state machine knows: the
         * engine refuses any other, so say so before sending */
        char why_buf[160];
        const char *why = NULL;
        if (state) {
                sg_agg_rec_t any = {.flags = SG_AGG_QUARANTINED};
                why = sg_release_refusal(tc, &any, false, 0, state, why_buf,
                                         sizeof(why_buf));
        }
        if (why) {
                errf("release: refused: %s", why);
                return EXIT_USAGE;
        }
        sg_agg_rec_t before;
        bool found = false;
        int64_t in_off = -1;
        if (wait) {
                /* --wait reads the store of the seqgate that owns the
                 * partition: the same rule first, then the outcome */
                int rc = release_read(conf, topic, (int32_t)partition, agg,
                                      &found, &before, &in_off);
                if (rc)
                        return rc;
                if ((why = sg_release_refusal(tc, found ? &before : NULL,
                                              has_version, version, state,
                                              why_buf, sizeof(why_buf)))) {
                        errf("release: refused: %s", why);
                        return EXIT_USAGE;
                }
        }
        return 0;
}

/* The control record's value: {"aggregate", "version" (decimal text),
 * "state"}, NULL when out of memory; owned by the caller (cJSON_free). */
static char *release_body(const char *agg, bool has_version, uint64_t version,
                          const char *state) {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "aggregate", agg);
        if (has_version) {
                char vs[32];
                snprintf(vs, sizeof(vs), "%" PRIu64, version);
                cJSON_AddStringToObject(body, "version", vs);
        }
        if (state)
                cJSON_AddStringToObject(body, "state", state);
        char *val = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        return val;
}

/* rd_kafka_flush until the monotonic deadline (ms); its result. */
static rd_kafka_resp_err_t release_flush(rd_kafka_t *prod, int64_t deadline) {
        int64_t left = deadline - sg_clock_mono_ms();
        return rd_kafka_flush(prod, left < 0         ? 0
                                    : left > INT_MAX ? INT_MAX
                                                     : (int)left);
}

/* Produces the control record (value: the JSON body val) to the input
 * partition, key the aggregate, and waits until the monotonic deadline
 * (ms, sg_clock_mono_ms; --timeout-ms) for its delivery report
 * (g_release_err, g_release_offset). Returns 0 once delivered, or
 * EXIT_RUNTIME after printing why (not delivered in time: the record is
 * purged, it is not sent later). */
static int release_send(const sg_config_t *conf, const char *topic,
                        int64_t partition, const char *agg, char *val,
                        int64_t deadline) {
        rd_kafka_conf_t *kc = kafka_conf(conf, true, release_dr);
        char es[512];
        rd_kafka_t *prod = NULL;
        if (kc) {
                prod = kafka_new(RD_KAFKA_PRODUCER, kc, es, sizeof(es));
                if (!prod) {
                        errf("release: %s", es);
                        rd_kafka_conf_destroy(kc);
                }
        }
        int rc = EXIT_RUNTIME;
        if (prod) {
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        prod, RD_KAFKA_V_TOPIC(topic),
                        RD_KAFKA_V_PARTITION((int32_t)partition),
                        RD_KAFKA_V_KEY(agg, strlen(agg)),
                        RD_KAFKA_V_VALUE(val, strlen(val)),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_HEADER(SG_H_CONTROL, "release", 7),
                        RD_KAFKA_V_END);
                if (e)
                        errf("release: %s", rd_kafka_err2str(e));
                else if (release_flush(prod, deadline) != 0 ||
                         g_release_err != 0)
                        errf("release: not delivered: %s%s%s",
                             g_release_err > 0 ? rd_kafka_err2str(g_release_err)
                                               : "timed out (--timeout-ms)",
                             g_kafka_error[0] ? "; last error: " : "",
                             g_kafka_error);
                else
                        rc = 0;
                /* not delivered: never sent after the command said so */
                rd_kafka_purge(prod, RD_KAFKA_PURGE_F_QUEUE |
                                             RD_KAFKA_PURGE_F_INFLIGHT);
                rd_kafka_destroy(prod);
        }
        return rc;
}

/* --wait: until the owner's store reflects the control record's offset
 * (g_release_offset), or the monotonic deadline (ms; --timeout-ms
 * timeout_ms from the start), then whether the aggregate was
 * released: not quarantined and, with has_version, at version or above.
 * *outcomep: "released", "refused", "timed_out", or NULL when the store
 * was unreadable. Returns 0 when released, else EXIT_RUNTIME after
 * printing why. */
static int release_wait(const sg_config_t *conf, const char *topic,
                        int64_t partition, const char *agg, bool has_version,
                        uint64_t version, int64_t timeout_ms, int64_t deadline,
                        const char **outcomep) {
        const char *outcome = NULL;
        int rc = 0;
        bool found;
        int64_t in_off;
        while (!outcome) {
                sg_agg_rec_t after;
                if ((rc = release_read(conf, topic, (int32_t)partition, agg,
                                       &found, &after, &in_off)))
                        break;
                if (in_off > g_release_offset) {
                        bool ok = found &&
                                  !(after.flags & SG_AGG_QUARANTINED) &&
                                  (!has_version ||
                                   (after.has_last &&
                                    after.last_version >= version));
                        outcome = ok ? "released" : "refused";
                        if (!ok) {
                                errf("release: seqgate refused it "
                                     "(its log line "
                                     "\"control_refused\" says why)");
                                rc = EXIT_RUNTIME;
                        }
                } else if (sg_clock_mono_ms() >= deadline) {
                        errf("release: not applied within %" PRId64
                             " ms (the store of %s [%" PRId64
                             "] is at offset %" PRId64
                             ", the release at %" PRId64 ")",
                             timeout_ms, topic, partition, in_off,
                             g_release_offset);
                        outcome = "timed_out";
                        rc = EXIT_RUNTIME;
                } else {
                        struct timespec ts = {0, 100 * 1000000L};
                        nanosleep(&ts, NULL);
                }
        }
        *outcomep = outcome;
        return rc;
}

/* The partition of @p topic that holds aggregate @p agg, found in the
 * store as inspect finds it (sg_query_aggregate; a choice_add() says
 * which). Returns 0 with *partitionp, or EXIT_USAGE after printing why
 * --partition is needed (no store, not in it, or in more than one
 * partition), or EXIT_RUNTIME (unreadable). */
static int release_find_partition(const sg_config_t *conf, const char *topic,
                                  const char *agg, int64_t *partitionp) {
        char es[512];
        sg_store_t *store = NULL;
        if (sg_store_open_readonly(conf->data_dir, &store, es, sizeof(es)))
                return usage_error("--partition is required: no store to "
                                   "find aggregate %s in (%s); give the "
                                   "__seqgate.errors.partition of its DLQ "
                                   "records, or --data-dir the store of the "
                                   "seqgate that owns it",
                                   agg, es);
        cJSON *q = NULL;
        sg_err_t err =
                sg_query_aggregate(store, conf, topic, agg, sg_clock_wall_ms(),
                                   &q, es, sizeof(es));
        sg_store_close(store);
        if (err == SG_ERR_NOT_FOUND)
                return usage_error("--partition is required: aggregate %s is "
                                   "not in the store at %s (not a partition "
                                   "it holds); give the "
                                   "__seqgate.errors.partition of its DLQ "
                                   "records",
                                   agg, conf->data_dir);
        if (err) {
                errf("release: aggregate %s: %s (%s)", agg, es,
                     sg_err2str(err));
                return EXIT_RUNTIME;
        }
        const cJSON *found = cJSON_GetObjectItem(q, "found");
        char list[128] = "";
        size_t l = 0;
        int64_t p = -1;
        const cJSON *a;
        cJSON_ArrayForEach(a, found) {
                const cJSON *pj = cJSON_GetObjectItem(a, "partition");
                parse_i64(pj ? pj->valuestring : NULL, 0, INT32_MAX, &p);
                if (l < sizeof(list))
                        l += (size_t)snprintf(list + l, sizeof(list) - l,
                                              "%s%" PRId64, l ? ", " : "", p);
        }
        int n = cJSON_GetArraySize(found);
        cJSON_Delete(q);
        if (n != 1 || p < 0)
                return usage_error("--partition is required: aggregate %s is "
                                   "in partitions %s of the store (its "
                                   "events span partitions, semantics §2 "
                                   "co-partitioning)",
                                   agg, list);
        *partitionp = p;
        choice_add("partition %" PRId64 " (the store's partition holding "
                   "aggregate %s)",
                   p, agg);
        return 0;
}

static const char release_help[] =
        "usage: seqgatectl release --config FILE [--topic T] [--partition P] "
        "--aggregate ID\n"
        "                          [--version S] [--state X] [--wait] "
        "[--timeout-ms MS]\n"
        "                          [--data-dir DIR] [-X NAME=VALUE ...] "
        "[--json]\n"
        "\n"
        "Release a quarantined aggregate: produce a control record (header\n"
        "__seqgate.control: release) to input topic T, partition P (the\n"
        "__seqgate.errors.partition of its DLQ records; without --partition "
        "the\n"
        "partition of T that holds the aggregate in the store, as inspect "
        "finds\n"
        "it), which the seqgate that owns the partition applies in order: "
        "the\n"
        "quarantine ends; with --version\n"
        "the last applied version becomes S (S >= L) and with --state the "
        "state\n"
        "becomes X (a state of the topic's state machine; anything else is\n"
        "refused before sending). An aggregate that is not quarantined can "
        "be\n"
        "released only with --version, and only while it waits on a gap. "
        "Then\n"
        "replay its DLQ records.\n"
        "\n"
        "  -t, --topic T          the input topic (default: the config's one "
        "input\n"
        "                         topic)\n"
        "  -p, --partition P      its partition (default: the one holding "
        "the\n"
        "                         aggregate in the data_dir or --data-dir "
        "store)\n"
        "  -a, --aggregate ID     the aggregate\n"
        "  -v, --version S        the last applied version after the "
        "release\n"
        "  -s, --state X          the state after the release\n"
        "  -w, --wait             read the data_dir (or --data-dir) of the "
        "seqgate\n"
        "                         that owns the partition (run it beside "
        "that\n"
        "                         seqgate): check the same rules before "
        "sending,\n"
        "                         then wait until the store has passed the\n"
        "                         control record and say \"released\" "
        "(exit 0) or\n"
        "                         \"refused\" (exit 1; seqgate's "
        "control_refused\n"
        "                         log line says why)\n"
        "  -T, --timeout-ms MS    how long the command waits in all "
        "(default\n"
        "                         30000): for the control record's delivery\n"
        "                         and, with --wait, then for the store; "
        "when it\n"
        "                         runs out: exit 1\n";

int cmd_release(int argc, char **argv) {
        static const struct option opts[] = {
                {"topic", required_argument, NULL, 't'},
                {"partition", required_argument, NULL, 'p'},
                {"aggregate", required_argument, NULL, 'a'},
                {"version", required_argument, NULL, 'v'},
                {"state", required_argument, NULL, 's'},
                {"wait", no_argument, NULL, 'w'},
                {"timeout-ms", required_argument, NULL, 'T'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = release_help,
                           .uses = CLI_USES_STORE | CLI_USES_KAFKA};
        const char *topic = NULL, *agg = NULL, *state = NULL;
        int64_t partition = -1, timeout_ms = 30000;
        uint64_t version = 0;
        bool has_version = false, wait = false;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:p:a:v:s:wT:", opts)) >= 0) {
                switch (c) {
                case 't':
                        topic = optarg;
                        break;
                case 'a':
                        agg = optarg;
                        break;
                case 's':
                        state = optarg;
                        break;
                case 'p':
                        if (!parse_i64(optarg, 0, INT32_MAX, &partition))
                                return usage_error("--partition: '%s' is not a "
                                                   "partition number",
                                                   optarg);
                        break;
                case 'v':
                        if (!parse_u64(optarg, &version))
                                return usage_error("--version: '%s' is not a "
                                                   "version (a decimal "
                                                   "unsigned 64-bit integer)",
                                                   optarg);
                        has_version = true;
                        break;
                case 'w':
                        wait = true;
                        break;
                case 'T':
                        if (!parse_i64(optarg, 1, INT32_MAX, &timeout_ms))
                                return usage_error("--timeout-ms: '%s' is not "
                                                   "a positive number",
                                                   optarg);
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        const char *config = cc.config;
        bool json = cc.json;
        if (!config || !agg)
                return usage_error(!config ? "--config FILE is required"
                                           : "--aggregate ID is required");
        sg_config_t *conf;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        if ((rc = default_topic(conf, &topic))) {
                sg_config_destroy(conf);
                return rc;
        }
        const sg_topic_config_t *tc = sg_config_topic(conf, topic);
        if (!tc) {
                errf("release: '%s' is not an input topic of %s", topic,
                     config);
                sg_config_destroy(conf);
                return EXIT_USAGE;
        }
        if (partition < 0 &&
            (rc = release_find_partition(conf, topic, agg, &partition))) {
                sg_config_destroy(conf);
                return rc;
        }
        choices_print();
        if ((rc = release_check(conf, tc, topic, partition, agg, has_version,
                                version, state, wait))) {
                sg_config_destroy(conf);
                return rc;
        }
        char *val = release_body(agg, has_version, version, state);
        /* --timeout-ms bounds the whole command: the delivery, then the
         * wait for the store */
        int64_t deadline = sg_clock_mono_ms() + timeout_ms;
        rc = release_send(conf, topic, partition, agg, val, deadline);
        /* --wait: until the owner's store reflects the control record's
         * offset, then whether the aggregate was released */
        const char *outcome = "sent";
        if (rc == 0 && wait)
                rc = release_wait(conf, topic, partition, agg, has_version,
                                  version, timeout_ms, deadline, &outcome);
        if (outcome && g_release_err == 0) {
                if (json)
                        printf("{\"released\":%s,\"outcome\":\"%s\","
                               "\"topic\":\"%s\",\"partition\":%" PRId64
                               ",\"offset\":%" PRId64 ",\"control\":%s}\n",
                               rc == 0 ? "true" : "false", outcome, topic,
                               partition, g_release_offset, val);
                else
                        printf("release of aggregate %s %s: %s [%" PRId64
                               "] offset %" PRId64 ": %s\n",
                               agg, outcome, topic, partition, g_release_offset,
                               val);
        }
        cJSON_free(val);
        sg_config_destroy(conf);
        return rc;
}
