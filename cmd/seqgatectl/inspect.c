/*
 * inspect.c — seqgatectl inspect: one aggregate of an input partition, or
 * the aggregates that need attention, read from the daemon's LMDB store
 * (semantics §7 "What operators watch", §4 quarantine).
 */
#include "cli.h"

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

/* Human rendering of an inspect object: "name: value" lines, nested objects
 * and lists of objects indented, in the order the fields were added. */
static void print_human(const cJSON *o, int indent, bool list_item) {
        const cJSON *it;
        bool first = true;
        cJSON_ArrayForEach(it, o) {
                int pad = indent;
                const char *lead = "";
                if (list_item) {
                        lead = first ? "- " : "  ";
                        pad = indent - 2;
                }
                first = false;
                printf("%*s%s%s:", pad, "", lead, it->string);
                if (cJSON_IsObject(it)) {
                        putchar('\n');
                        print_human(it, indent + 2, false);
                } else if (cJSON_IsArray(it)) {
                        if (!cJSON_GetArraySize(it)) {
                                puts(" none");
                                continue;
                        }
                        putchar('\n');
                        const cJSON *el;
                        cJSON_ArrayForEach(el, it) {
                                if (cJSON_IsObject(el)) {
                                        print_human(el, indent + 4, true);
                                } else {
                                        char *s = cJSON_PrintUnformatted(el);
                                        printf("%*s- %s\n", indent + 2, "",
                                               s ? s : "?");
                                        free(s);
                                }
                        }
                } else if (cJSON_IsNull(it)) {
                        puts(" none");
                } else if (cJSON_IsBool(it)) {
                        puts(cJSON_IsTrue(it) ? " yes" : " no");
                } else if (cJSON_IsString(it) || cJSON_IsRaw(it)) {
                        printf(" %s\n", it->valuestring);
                } else {
                        char *s = cJSON_PrintUnformatted(it);
                        printf(" %s\n", s ? s : "?");
                        free(s);
                }
        }
}

static cJSON *flags_json(uint32_t flags) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddBoolToObject(f, "quarantined", flags & SG_AGG_QUARANTINED);
        cJSON_AddBoolToObject(f, "refetching", flags & SG_AGG_REFETCHING);
        return f;
}

/* The aggregate record's own fields (no parked list, no request). */
static cJSON *agg_json(const sg_agg_rec_t *r, const sg_topic_config_t *tc) {
        cJSON *o = cJSON_CreateObject();
        j_bytes(o, "id", r->aggregate, r->aggregate_len);
        if (r->has_last)
                j_u64(o, "last_version", r->last_version);
        else
                cJSON_AddNullToObject(o, "last_version");
        if (r->state[0])
                cJSON_AddStringToObject(o, "state", r->state);
        else
                cJSON_AddNullToObject(o, "state");
        cJSON_AddItemToObject(o, "flags", flags_json(r->flags));
        j_u64(o, "parked_count", r->parked_cnt);
        j_u64(o, "parked_bytes", r->parked_bytes);
        j_time(o, "oldest_parked_at", r->parked_since_ms);
        /* The gap deadline (semantics §4): oldest parked_at + gap_timeout,
         * while the aggregate waits (not refetching, not quarantined). */
        if (tc && r->parked_since_ms > 0 && tc->gap_policy != SG_GAP_HOLD &&
            !(r->flags & (SG_AGG_REFETCHING | SG_AGG_QUARANTINED)))
                j_time(o, "gap_deadline",
                       r->parked_since_ms + tc->gap_timeout_ms);
        if (r->skip_from) {
                char b[64];
                snprintf(b, sizeof(b), "%" PRIu64 "-%" PRIu64, r->skip_from,
                         r->skip_to);
                cJSON_AddStringToObject(o, "skipped_versions", b);
        }
        return o;
}

static int parked_visit(void *opaque, uint64_t version,
                        const sg_parked_rec_t *p) {
        cJSON *arr = opaque;
        cJSON *o = cJSON_CreateObject();
        j_u64(o, "version", version);
        j_time(o, "parked_at", p->parked_at_ms);
        j_i64(o, "offset", p->offset);
        if (p->timestamp_ms >= 0)
                j_time(o, "timestamp", p->timestamp_ms);
        j_bytes(o, "type", p->type, p->type ? p->type_len : SIZE_MAX);
        j_bytes(o, "key", p->key, p->key_len);
        if (p->value && p->value_len != SIZE_MAX)
                j_u64(o, "value_bytes", p->value_len);
        else
                cJSON_AddNullToObject(o, "value_bytes");
        cJSON_AddItemToArray(arr, o);
        return 0;
}

static cJSON *snapreq_json(const sg_snapreq_rec_t *q) {
        cJSON *o = cJSON_CreateObject();
        j_u64(o, "attempt", q->attempt);
        cJSON_AddStringToObject(o, "state",
                                q->state == SG_SNAP_INFLIGHT  ? "in_flight"
                                : q->state == SG_SNAP_WAITING ? "waiting"
                                                              : "unknown");
        j_time(o, "due", q->due_ms);
        j_u64(o, "seq", q->seq);
        if (q->has_have)
                j_u64(o, "have_version", q->have_version);
        else
                cJSON_AddNullToObject(o, "have_version");
        j_u64(o, "want_version", q->want_version);
        j_time(o, "issued_at", q->issued_at_ms);
        j_time(o, "sent_at", q->sent_at_ms);
        return o;
}

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
                cJSON_AddItemToArray(a->arr, agg_json(r, a->tc));
                a->count++;
        }
        return 0;
}

/* ------------------------------------------------------------------ */
/* inspect                                                             */

/* inspect --aggregate: the aggregate's record, parked events and snapshot
 * request, added to out as "aggregate". Returns 0, or EXIT_RUNTIME after
 * printing why (not found, unreadable). */
static int inspect_aggregate(sg_txn_t *txn, const sg_tp_t *tp,
                             const sg_topic_config_t *tc, const char *topic,
                             int64_t partition, const char *aggregate,
                             cJSON *out) {
        sg_err_t err;
        unsigned char ah[32];
        char ahex[65];
        sg_sha256(aggregate, strlen(aggregate), ah);
        sg_hex_encode(ah, 32, ahex);
        sg_agg_rec_t rec;
        err = sg_agg_get(txn, tp, ah, &rec);
        if (err == SG_ERR_NOT_FOUND) {
                errf("aggregate '%s' not found in %s/%" PRId64
                     " (never seen, or its state expired)",
                     aggregate, topic, partition);
                return EXIT_RUNTIME;
        }
        if (err) {
                errf("aggregate '%s': record unreadable (%s)", aggregate,
                     sg_err2str(err));
                return EXIT_RUNTIME;
        }
        cJSON *a = agg_json(&rec, tc);
        cJSON_AddStringToObject(a, "hash", ahex);
        cJSON *parked = cJSON_AddArrayToObject(a, "parked");
        if ((err = sg_parked_foreach(txn, tp, ah, parked_visit, parked))) {
                cJSON_Delete(a);
                errf("aggregate '%s': parked events unreadable (%s)", aggregate,
                     sg_err2str(err));
                return EXIT_RUNTIME;
        }
        sg_snapreq_rec_t q;
        err = sg_snapreq_get(txn, tp, ah, &q);
        if (err == SG_OK) {
                cJSON_AddItemToObject(a, "snapshot_request", snapreq_json(&q));
        } else if (err == SG_ERR_NOT_FOUND) {
                cJSON_AddNullToObject(a, "snapshot_request");
        } else {
                cJSON_Delete(a);
                errf("aggregate '%s': snapshot request unreadable (%s)",
                     aggregate, sg_err2str(err));
                return EXIT_RUNTIME;
        }
        cJSON_AddItemToObject(out, "aggregate", a);
        return 0;
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

static const char inspect_help[] =
        "usage: seqgatectl inspect --config FILE [--data-dir DIR] --topic T "
        "--partition P\n"
        "                          [--aggregate ID] [--limit N] [--json]\n"
        "\n"
        "Show an aggregate's last applied version, state, flags, parked "
        "events\n"
        "and snapshot request, and the partition's meta, from the store\n"
        "(read-only; safe while seqgate runs). Without --aggregate: the\n"
        "partition's meta and up to N (default 1000) aggregates that are\n"
        "quarantined, refetching or have parked events.\n"
        "\n"
        "  -t, --topic T          the input topic\n"
        "  -p, --partition P      its partition\n"
        "  -a, --aggregate ID     one aggregate\n"
        "  -l, --limit N          list at most N aggregates (default 1000)\n";

int cmd_inspect(int argc, char **argv) {
        static const struct option opts[] = {
                {"topic", required_argument, NULL, 't'},
                {"partition", required_argument, NULL, 'p'},
                {"aggregate", required_argument, NULL, 'a'},
                {"limit", required_argument, NULL, 'l'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = inspect_help, .uses = CLI_USES_STORE};
        const char *topic = NULL, *aggregate = NULL;
        int64_t partition = -1, limit = 1000;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:p:a:l:", opts)) >= 0) {
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
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        const char *config = cc.config;
        bool json = cc.json;
        if (!config || !topic || partition < 0)
                return usage_error("--config, --topic and --partition are "
                                   "required");
        if (strlen(topic) > 249)
                return usage_error("--topic: a topic name has at most 249 "
                                   "characters");

        sg_config_t *conf = NULL;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        const sg_topic_config_t *tc = sg_config_topic(conf, topic);
        if (!tc)
                warnf("%s is not an input topic of %s", topic, config);

        sg_store_t *store = NULL;
        sg_txn_t *txn = NULL;
        if ((rc = open_store(conf, &store, &txn))) {
                sg_config_destroy(conf);
                return rc;
        }
        sg_tp_t tp;
        sg_tp_make(&tp, topic, (int32_t)partition);
        cJSON *out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "topic", topic);
        j_i64(out, "partition", partition);

        sg_meta_rec_t meta;
        sg_err_t err = sg_meta_get(txn, &tp, &meta);
        bool have_meta = err == SG_OK;
        if (err == SG_OK) {
                cJSON_AddItemToObject(out, "meta", meta_json(&meta));
        } else if (err == SG_ERR_NOT_FOUND) {
                cJSON_AddNullToObject(out, "meta");
        } else {
                errf("%s/%" PRId64 ": meta record unreadable (%s)", topic,
                     partition, sg_err2str(err));
                rc = EXIT_RUNTIME;
                goto done;
        }

        if (aggregate)
                rc = inspect_aggregate(txn, &tp, tc, topic, partition,
                                       aggregate, out);
        else
                rc = inspect_attention(txn, &tp, tc, topic, partition,
                                       have_meta, limit, conf->data_dir, out);
        if (rc)
                goto done;
        if (json)
                print_json_line(out);
        else
                print_human(out, 0, false);
done:
        cJSON_Delete(out);
        sg_txn_abort(txn);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}
