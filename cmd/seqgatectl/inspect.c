/*
 * inspect.c — seqgatectl inspect: one aggregate of an input partition, or
 * the aggregates that need attention, read from the daemon's LMDB store
 * (semantics §7 "What operators watch", §4 quarantine).
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

typedef struct attention {
        cJSON *arr;
        const sg_topic_config_t *tc;
        int64_t limit;
        int64_t count;    /* aggregates listed */
        int64_t matching; /* aggregates that need attention */
        uint64_t scanned;
} attention_t;

static int attention_visit(void *opaque, const unsigned char ah[32],
                           const sg_agg_rec_t *r) {
        (void)ah;
        attention_t *a = opaque;
        a->scanned++;
        if (!(r->flags & (SG_AGG_QUARANTINED | SG_AGG_REFETCHING)) &&
            r->parked_cnt == 0)
                return 0;
        a->matching++;
        if (a->count < a->limit) {
                cJSON_AddItemToArray(a->arr, sg_query_agg_json(r, a->tc));
                a->count++;
        }
        return 0;
}

/* ------------------------------------------------------------------ */
/* inspect                                                             */

/* The partition's meta record as "meta" of @p out (null: none).
 * Returns 0, or EXIT_RUNTIME after printing why. */
static int add_meta(sg_txn_t *txn, const char *topic, int64_t partition,
                    cJSON *out, bool *have_metap) {
        sg_tp_t tp;
        sg_tp_make(&tp, topic, (int32_t)partition);
        sg_meta_rec_t meta;
        sg_err_t err = sg_meta_get(txn, &tp, &meta);
        if (have_metap)
                *have_metap = err == SG_OK;
        if (err == SG_OK) {
                cJSON_AddItemToObject(out, "meta", meta_json(&meta));
        } else if (err == SG_ERR_NOT_FOUND) {
                cJSON_AddNullToObject(out, "meta");
        } else {
                errf("%s/%" PRId64 ": meta record unreadable (%s)", topic,
                     partition, sg_err2str(err));
                return EXIT_RUNTIME;
        }
        return 0;
}

/* inspect --aggregate: the aggregate's record, parked events and snapshot
 * request (sg_query_aggregate), searched in every stored partition of
 * @p topic, or only in @p partition (>= 0); one output object per
 * partition that holds it. Returns 0, or EXIT_RUNTIME after printing why
 * (not found, unreadable). */
static int inspect_aggregate(sg_store_t *store, sg_txn_t *txn,
                             const sg_config_t *conf, const char *topic,
                             int64_t partition, const char *aggregate,
                             int64_t max_age, bool json) {
        char es[512];
        cJSON *q = NULL;
        sg_err_t err =
                sg_query_aggregate(store, conf, topic, aggregate,
                                   sg_clock_wall_ms(), &q, es, sizeof(es));
        if (err == SG_ERR_NOT_FOUND) {
                errf("aggregate '%s' not found in %s (never seen, or its "
                     "state expired)",
                     aggregate, topic);
                return EXIT_RUNTIME;
        }
        if (err) {
                errf("aggregate '%s': %s (%s)", aggregate, es, sg_err2str(err));
                return EXIT_RUNTIME;
        }
        int rc = 0, shown = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(q, "found")) {
                int64_t p = -1;
                const cJSON *pj = cJSON_GetObjectItem(a, "partition");
                parse_i64(pj ? pj->valuestring : NULL, 0, INT32_MAX, &p);
                if (partition >= 0 && p != partition)
                        continue;
                cJSON *out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "topic", topic);
                j_i64(out, "partition", p);
                if ((rc = add_meta(txn, topic, p, out, NULL))) {
                        cJSON_Delete(out);
                        break;
                }
                cJSON_AddItemReferenceToObject(out, "aggregate", (cJSON *)a);
                (void)store_freshness(conf->data_dir, txn, topic, p,
                                      sg_clock_wall_ms(), max_age, out);
                if (json)
                        print_json_line(out);
                else
                        print_human(out, 0, false);
                cJSON_Delete(out);
                shown++;
        }
        cJSON_Delete(q);
        if (!rc && !shown) {
                errf("aggregate '%s' not found in %s/%" PRId64
                     " (never seen, or its state expired)",
                     aggregate, topic, partition);
                rc = EXIT_RUNTIME;
        }
        return rc;
}

/* inspect without --aggregate: up to limit aggregates that need attention
 * and the counts, added to out. Returns 0, or EXIT_RUNTIME after printing
 * why (unreadable; no state at all for the partition). */
static int inspect_attention(sg_txn_t *txn, const sg_tp_t *tp,
                             const sg_topic_config_t *tc, const char *topic,
                             int64_t partition, bool have_meta, int64_t limit,
                             const char *data_dir, cJSON *out) {
        sg_err_t err;
        attention_t at = {.arr = cJSON_CreateArray(), .tc = tc, .limit = limit};
        err = sg_agg_foreach(txn, tp, attention_visit, &at);
        if (err) {
                cJSON_Delete(at.arr);
                errf("%s/%" PRId64 ": aggregates unreadable (%s)", topic,
                     partition, sg_err2str(err));
                return EXIT_RUNTIME;
        }
        if (!have_meta && at.scanned == 0) {
                cJSON_Delete(at.arr);
                errf("no state for %s/%" PRId64 " in %s (not a "
                     "partition this store processed)",
                     topic, partition, data_dir);
                return EXIT_RUNTIME;
        }
        j_u64(out, "aggregates", at.scanned);
        j_i64(out, "attention_count", at.matching);
        cJSON_AddItemToObject(out, "attention", at.arr);
        if (at.matching > at.count)
                errf("listed %" PRId64 " of %" PRId64
                     " aggregates that need attention (--limit)",
                     at.count, at.matching);
        return 0;
}

/* The partitions of @p topic the store holds (a meta record each), in
 * ascending order. */
typedef struct topic_parts {
        const char *topic;
        int32_t p[1024];
        size_t cnt;
        bool more; /* more than fit */
} topic_parts_t;

static int topic_parts_visit(void *opaque, const char *topic, int32_t partition,
                             const sg_meta_rec_t *rec) {
        (void)rec;
        topic_parts_t *tp = opaque;
        if (strcmp(topic, tp->topic) != 0)
                return 0;
        if (tp->cnt < sizeof(tp->p) / sizeof(tp->p[0]))
                tp->p[tp->cnt++] = partition;
        else
                tp->more = true;
        return 0;
}

/* inspect without --partition: the partitions of @p topic in the store
 * into @p tp (a choice_add() says which). Returns 0, or EXIT_RUNTIME
 * after printing why (unreadable, or none). */
static int inspect_partitions(sg_txn_t *txn, const char *topic,
                              const char *data_dir, topic_parts_t *tp) {
        tp->topic = topic;
        sg_err_t err = sg_meta_foreach(txn, topic_parts_visit, tp);
        if (err) {
                errf("%s: partitions unreadable (%s)", data_dir,
                     sg_err2str(err));
                return EXIT_RUNTIME;
        }
        if (!tp->cnt) {
                errf("no partition of %s in the store at %s (not a topic "
                     "this store processed)",
                     topic, data_dir);
                return EXIT_RUNTIME;
        }
        if (tp->cnt == 1) {
                choice_add("partition %" PRId32 " (the store's one partition "
                           "of %s)",
                           tp->p[0], topic);
                return 0;
        }
        char list[256] = "";
        size_t l = 0;
        for (size_t i = 0; i < tp->cnt && l < sizeof(list); i++)
                l += (size_t)snprintf(list + l, sizeof(list) - l, "%s%" PRId32,
                                      i ? ", " : "", tp->p[i]);
        choice_add("partitions %s%s (every partition of %s in the store)", list,
                   l >= sizeof(list) || tp->more ? ", ..." : "", topic);
        return 0;
}

/* inspect without --aggregate, one partition: its meta and the
 * aggregates that need attention, printed. */
static int inspect_one(sg_txn_t *txn, const sg_topic_config_t *tc,
                       const char *topic, int64_t partition, int64_t limit,
                       const char *data_dir, int64_t max_age, bool json) {
        sg_tp_t tp;
        sg_tp_make(&tp, topic, (int32_t)partition);
        cJSON *out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "topic", topic);
        j_i64(out, "partition", partition);
        bool have_meta;
        int rc = add_meta(txn, topic, partition, out, &have_meta);
        if (!rc)
                rc = inspect_attention(txn, &tp, tc, topic, partition,
                                       have_meta, limit, data_dir, out);
        if (!rc && have_meta)
                (void)store_freshness(data_dir, txn, topic, partition,
                                      sg_clock_wall_ms(), max_age, out);
        if (!rc && json)
                print_json_line(out);
        else if (!rc)
                print_human(out, 0, false);
        cJSON_Delete(out);
        return rc;
}

static const char inspect_help[] =
        "usage: seqgatectl inspect --config FILE [--data-dir DIR] [--topic T] "
        "[--partition P]\n"
        "                          [--aggregate ID] [--limit N] [--json]\n"
        "\n"
        "Show an aggregate's last applied version, state, flags, parked "
        "events\n"
        "and snapshot request, and the partition's meta, from the store\n"
        "(read-only; safe while seqgate runs). Without --aggregate: the "
        "partition's\n"
        "meta and up to N (default 1000) aggregates that are quarantined, "
        "refetching\n"
        "or have parked events. Without --partition every partition of T "
        "the store\n"
        "holds is shown (one object each; with --aggregate those that hold "
        "it).\n"
        "What was inferred is said on stderr (\"seqgatectl: using ...\").\n"
        "\n"
        "  -t, --topic T          the input topic (default: the config's one "
        "input\n"
        "                         topic)\n"
        "  -p, --partition P      its partition (default: every partition of "
        "T in\n"
        "                         the store)\n"
        "  -a, --aggregate ID     one aggregate\n"
        "  -l, --limit N          list at most N aggregates (default 1000)\n"
        "  -m, --max-age-ms MS    a partition not written for longer than "
        "MS\n"
        "                         (default 300000) is not current: a "
        "warning\n"
        "\n"
        "Each object says how current the store is (\"store\": whether a "
        "seqgate\n"
        "process writes it, the partition's last write), as lookup "
        "does.\n";

int cmd_inspect(int argc, char **argv) {
        static const struct option opts[] = {
                {"topic", required_argument, NULL, 't'},
                {"partition", required_argument, NULL, 'p'},
                {"aggregate", required_argument, NULL, 'a'},
                {"limit", required_argument, NULL, 'l'},
                {"max-age-ms", required_argument, NULL, 'm'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = inspect_help, .uses = CLI_USES_STORE};
        const char *topic = NULL, *aggregate = NULL;
        int64_t partition = -1, limit = 1000, max_age = FRESH_MAX_AGE_MS;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:p:a:l:m:", opts)) >= 0) {
                switch (c) {
                case 't':
                        topic = optarg;
                        break;
                case 'p':
                        if (!parse_i64(optarg, 0, INT32_MAX, &partition))
                                return usage_error("--partition: '%s' is not a "
                                                   "partition number",
                                                   optarg);
                        break;
                case 'a':
                        aggregate = optarg;
                        break;
                case 'l':
                        if (!parse_i64(optarg, 0, INT64_MAX, &limit))
                                return usage_error("--limit: '%s' is not a "
                                                   "non-negative number",
                                                   optarg);
                        break;
                case 'm':
                        if (max_age_arg(optarg, &max_age))
                                return EXIT_USAGE;
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        const char *config = cc.config;
        bool json = cc.json;
        if (!config)
                return usage_error("--config FILE is required");
        if (topic && strlen(topic) > 249)
                return usage_error("--topic: a topic name has at most 249 "
                                   "characters");

        sg_config_t *conf = NULL;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        if ((rc = default_topic(conf, &topic))) {
                sg_config_destroy(conf);
                return rc;
        }
        const sg_topic_config_t *tc = sg_config_topic(conf, topic);
        if (!tc && aggregate) {
                sg_config_destroy(conf);
                return usage_error("%s is not an input topic of %s", topic,
                                   config);
        }
        if (!tc)
                warnf("%s is not an input topic of %s", topic, config);

        sg_store_t *store = NULL;
        sg_txn_t *txn = NULL;
        if ((rc = open_store(conf, &store, &txn))) {
                sg_config_destroy(conf);
                return rc;
        }
        if (aggregate) {
                choices_print();
                rc = inspect_aggregate(store, txn, conf, topic, partition,
                                       aggregate, max_age, json);
                goto done;
        }
        topic_parts_t *tps = calloc(1, sizeof(*tps));
        if (!tps) {
                errf("out of memory");
                rc = EXIT_RUNTIME;
                goto done;
        }
        if (partition >= 0) {
                tps->p[tps->cnt++] = (int32_t)partition;
        } else if ((rc = inspect_partitions(txn, topic, conf->data_dir, tps))) {
                free(tps);
                goto done;
        }
        choices_print();
        for (size_t i = 0; !rc && i < tps->cnt; i++)
                rc = inspect_one(txn, tc, topic, tps->p[i], limit,
                                 conf->data_dir, max_age, json);
        free(tps);
done:
        sg_txn_abort(txn);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}
