/*
 * seqgatectl — the operator CLI of seqgate (semantics §7 "What operators
 * watch", §3 "Replay", §4 quarantine).
 *
 *   inspect     one aggregate of an input partition, read from the daemon's
 *               LMDB store: last applied version, state, flags, parked
 *               events, snapshot request, and the partition's meta; without
 *               --aggregate, the aggregates that need attention
 *               (quarantined, refetching or with parked events).
 *   partitions  every partition the store holds, with its meta, and the
 *               store's map size and bytes in use.
 *   replay      the DLQ replay tool: reads a DLQ topic up to its end offsets,
 *               selects records by reason / aggregate, and produces each back
 *               to its original topic and partition with the original key,
 *               value, timestamp and headers, minus every __seqgate.errors.*
 *               header, plus __seqgate.replay: <dlq>/<partition>/<offset>,
 *               so the daemon judges it again from row 4 (semantics §3).
 *
 * The store is opened read-only (MDB_RDONLY): a read transaction sees the
 * last committed batch and never blocks the running daemon. Kafka
 * properties come from the config's "kafka" and "kafka_producer" blocks,
 * verbatim, as the daemon uses them.
 *
 * Output: human-readable by default; with --json one JSON object per line.
 * Errors go to stderr. Exit status: 0 ok, 1 runtime error (store, Kafka,
 * undelivered records), 2 usage or configuration error.
 */
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "envelope.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

#define DLQ_HDR_PREFIX "__seqgate.errors."

static const char *prog = "seqgatectl";

static void errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errf(const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "%s: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static const char usage_text[] =
    "usage: seqgatectl COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  inspect     --config FILE --topic T --partition P [--aggregate ID]\n"
    "              [--limit N] [--json]\n"
    "      Show an aggregate's last applied version, state, flags, parked\n"
    "      events and snapshot request, and the partition's meta, from the\n"
    "      store (read-only; safe while seqgate runs). Without --aggregate:\n"
    "      the partition's meta and up to N (default 1000) aggregates that\n"
    "      are quarantined, refetching or have parked events.\n"
    "  partitions  --config FILE [--json]\n"
    "      Every partition in the store with its meta; the store's map size\n"
    "      and bytes in use.\n"
    "  replay      --config FILE --dlq TOPIC [--reason R ...] [--aggregate ID]\n"
    "              [--dlq-partition P] [--from-offset N] [--until-offset N]\n"
    "              [--limit N] [--dry-run] [--timeout-ms MS] [--json]\n"
    "      Read the DLQ topic (every partition, or P) from the start or offset\n"
    "      N up to its end offsets (or before --until-offset, exclusive) and\n"
    "      produce each selected record back to its original topic and\n"
    "      partition without its __seqgate.errors.* headers, with\n"
    "      __seqgate.replay: <dlq>/<partition>/<offset>. Records are selected\n"
    "      by reason (any of the --reason values) and aggregate; --limit\n"
    "      stops after N selected records; --dry-run only prints them.\n"
    "  release     --config FILE --topic T --partition P --aggregate ID\n"
    "              [--version S] [--state X] [--wait [--timeout-ms MS]]\n"
    "      Release a quarantined aggregate: produce a control record\n"
    "      (header __seqgate.control: release) to input topic T, partition P\n"
    "      (the __seqgate.errors.partition of its DLQ records), which the\n"
    "      seqgate that owns the partition applies in order: the quarantine\n"
    "      ends; with --version the last applied version becomes S (S >= L)\n"
    "      and with --state the state becomes X (a state of the topic's\n"
    "      state machine; anything else is refused before sending). An\n"
    "      aggregate that is not quarantined can be released only with\n"
    "      --version, and only while it waits on a gap. --wait reads the\n"
    "      data_dir of the seqgate that owns the partition (run it beside\n"
    "      that seqgate): it checks the same rules before sending, then waits\n"
    "      (--timeout-ms, default 30000) until the store has passed the\n"
    "      control record and says \"released\" (exit 0) or \"refused\"\n"
    "      (exit 1; seqgate's control_refused log line says why). Then\n"
    "      replay its DLQ records.\n"
    "\n"
    "Common options: --json (one JSON object per line), -h/--help.\n"
    "Exit status: 0 ok, 1 runtime error, 2 usage or configuration error.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "%s: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (try '%s --help')\n", prog);
        return EXIT_USAGE;
}

/* Parses a decimal integer in [min, max]; false on anything else. */
static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
        if (!s || !*s)
                return false;
        errno = 0;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return false;
        *out = v;
        return true;
}

/* Parses a version: a decimal unsigned 64-bit integer, digits only
 * (semantics §2: no sign, no spaces, no overflow). */
static bool parse_u64(const char *s, uint64_t *out) {
        if (!s || !*s)
                return false;
        uint64_t v = 0;
        for (const char *c = s; *c; c++) {
                if (*c < '0' || *c > '9')
                        return false;
                unsigned d = (unsigned)(*c - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *out = v;
        return true;
}

/* ------------------------------------------------------------------ */
/* JSON and text helpers                                               */

/* ISO 8601 UTC with milliseconds (as the daemon's logs print times). */
/* Integers go into JSON as raw decimal text: cJSON numbers are doubles and
 * would round versions and offsets above 2^53. */
static void j_i64(cJSON *o, const char *name, int64_t v) {
        char b[32];
        snprintf(b, sizeof(b), "%" PRId64, v);
        cJSON_AddRawToObject(o, name, b);
}
static void j_u64(cJSON *o, const char *name, uint64_t v) {
        char b[32];
        snprintf(b, sizeof(b), "%" PRIu64, v);
        cJSON_AddRawToObject(o, name, b);
}
/* A processing time (ms since the epoch) as ISO text, null when 0. */
static void j_time(cJSON *o, const char *name, int64_t ms) {
        char b[48];
        if (ms <= 0)
                cJSON_AddNullToObject(o, name);
        else
                cJSON_AddStringToObject(o, name, sg_iso_time(ms, b, sizeof(b)));
}

/* Bytes as a JSON string when they are UTF-8 without NUL, else as
 * name + "_hex"; len SIZE_MAX or p NULL: null. */
static void j_bytes(cJSON *o, const char *name, const void *p, size_t len) {
        if (!p || len == SIZE_MAX) {
                cJSON_AddNullToObject(o, name);
                return;
        }
        if (sg_utf8_valid(p, len) && !memchr(p, '\0', len)) {
                char *s = malloc(len + 1);
                if (!s)
                        return;
                memcpy(s, p, len);
                s[len] = '\0';
                cJSON_AddStringToObject(o, name, s);
                free(s);
                return;
        }
        char *h = malloc(2 * len + 1);
        if (!h)
                return;
        sg_hex_encode(p, len, h);
        char n2[64];
        snprintf(n2, sizeof(n2), "%s_hex", name);
        cJSON_AddStringToObject(o, n2, h);
        free(h);
}

static void print_json_line(const cJSON *o) {
        char *s = cJSON_PrintUnformatted(o);
        if (s) {
                puts(s);
                free(s);
        }
}

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

/* ------------------------------------------------------------------ */
/* store access                                                        */

static int load_config(const char *path, sg_config_t **confp) {
        char es[512];
        if (!path)
                return usage_error("--config FILE is required");
        sg_err_t err = sg_config_load(path, confp, es, sizeof(es));
        if (err) {
                if (err == SG_ERR_IO) /* the text names the file */
                        errf("%s", es);
                else
                        errf("%s: %s", path, es);
                return EXIT_USAGE;
        }
        return 0;
}

static int open_store(const sg_config_t *conf, sg_store_t **storep,
                      sg_txn_t **txnp) {
        char es[512];
        sg_err_t err = sg_store_open_readonly(conf->data_dir, storep, es,
                                              sizeof(es));
        if (err) {
                errf("%s", es);
                return EXIT_RUNTIME;
        }
        err = sg_txn_begin(*storep, false, txnp, es, sizeof(es));
        if (err) {
                errf("read transaction: %s", es);
                sg_store_close(*storep);
                return EXIT_RUNTIME;
        }
        return 0;
}

static cJSON *meta_json(const sg_meta_rec_t *m) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "group", m->group);
        if (m->input_offset < 0)
                cJSON_AddNullToObject(o, "input_offset");
        else
                j_i64(o, "input_offset", m->input_offset);
        if (m->changelog_offset < 0)
                cJSON_AddNullToObject(o, "changelog_offset");
        else
                j_i64(o, "changelog_offset", m->changelog_offset);
        j_time(o, "clock", m->clock_ms);
        j_u64(o, "parked_count", m->parked_cnt);
        j_u64(o, "parked_bytes", m->parked_bytes);
        j_u64(o, "quarantined_count", m->quarantined);
        j_u64(o, "snapshot_requests_in_flight", m->snap_in_flight);
        return o;
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
                j_time(o, "gap_deadline", r->parked_since_ms + tc->gap_timeout_ms);
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
        int64_t count;     /* aggregates listed */
        int64_t matching;  /* aggregates that need attention */
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

static int cmd_inspect(int argc, char **argv) {
        static const struct option opts[] = {
            {"config", required_argument, NULL, 'c'},
            {"topic", required_argument, NULL, 't'},
            {"partition", required_argument, NULL, 'p'},
            {"aggregate", required_argument, NULL, 'a'},
            {"limit", required_argument, NULL, 'l'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *config = NULL, *topic = NULL, *aggregate = NULL;
        int64_t partition = -1, limit = 1000;
        bool json = false;
        int c;
        while ((c = getopt_long(argc, argv, "c:t:p:a:l:jh", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 't':
                        topic = optarg;
                        break;
                case 'p':
                        if (!parse_i64(optarg, 0, INT32_MAX, &partition))
                                return usage_error("--partition: '%s' is not a "
                                                   "partition number", optarg);
                        break;
                case 'a':
                        aggregate = optarg;
                        break;
                case 'l':
                        if (!parse_i64(optarg, 0, INT64_MAX, &limit))
                                return usage_error("--limit: '%s' is not a "
                                                   "non-negative number", optarg);
                        break;
                case 'j':
                        json = true;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        return usage_error("inspect: invalid option");
                }
        }
        if (optind < argc)
                return usage_error("inspect: unexpected argument '%s'",
                                   argv[optind]);
        if (!config || !topic || partition < 0)
                return usage_error("inspect needs --config, --topic and "
                                   "--partition");
        if (strlen(topic) > 249)
                return usage_error("--topic: a topic name has at most 249 "
                                   "characters");

        sg_config_t *conf = NULL;
        int rc = load_config(config, &conf);
        if (rc)
                return rc;
        const sg_topic_config_t *tc = sg_config_topic(conf, topic);
        if (!tc)
                errf("warning: %s is not an input topic of %s", topic, config);

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

        if (aggregate) {
                unsigned char ah[32];
                char ahex[65];
                sg_sha256(aggregate, strlen(aggregate), ah);
                sg_hex_encode(ah, 32, ahex);
                sg_agg_rec_t rec;
                err = sg_agg_get(txn, &tp, ah, &rec);
                if (err == SG_ERR_NOT_FOUND) {
                        errf("aggregate '%s' not found in %s/%" PRId64
                             " (never seen, or its state expired)",
                             aggregate, topic, partition);
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                if (err) {
                        errf("aggregate '%s': record unreadable (%s)",
                             aggregate, sg_err2str(err));
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                cJSON *a = agg_json(&rec, tc);
                cJSON_AddStringToObject(a, "hash", ahex);
                cJSON *parked = cJSON_AddArrayToObject(a, "parked");
                if ((err = sg_parked_foreach(txn, &tp, ah, parked_visit,
                                             parked))) {
                        cJSON_Delete(a);
                        errf("aggregate '%s': parked events unreadable (%s)",
                             aggregate, sg_err2str(err));
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                sg_snapreq_rec_t q;
                err = sg_snapreq_get(txn, &tp, ah, &q);
                if (err == SG_OK) {
                        cJSON_AddItemToObject(a, "snapshot_request",
                                              snapreq_json(&q));
                } else if (err == SG_ERR_NOT_FOUND) {
                        cJSON_AddNullToObject(a, "snapshot_request");
                } else {
                        cJSON_Delete(a);
                        errf("aggregate '%s': snapshot request unreadable (%s)",
                             aggregate, sg_err2str(err));
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                cJSON_AddItemToObject(out, "aggregate", a);
        } else {
                attention_t at = {.arr = cJSON_CreateArray(), .tc = tc,
                                  .limit = limit};
                err = sg_agg_foreach(txn, &tp, attention_visit, &at);
                if (err) {
                        cJSON_Delete(at.arr);
                        errf("%s/%" PRId64 ": aggregates unreadable (%s)",
                             topic, partition, sg_err2str(err));
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                if (!have_meta && at.scanned == 0) {
                        cJSON_Delete(at.arr);
                        errf("no state for %s/%" PRId64 " in %s (not a "
                             "partition this store processed)",
                             topic, partition, conf->data_dir);
                        rc = EXIT_RUNTIME;
                        goto done;
                }
                j_u64(out, "aggregates", at.scanned);
                j_i64(out, "attention_count", at.matching);
                cJSON_AddItemToObject(out, "attention", at.arr);
                if (at.matching > at.count)
                        errf("listed %" PRId64 " of %" PRId64
                             " aggregates that need attention (--limit)",
                             at.count, at.matching);
        }
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

/* ------------------------------------------------------------------ */
/* partitions                                                          */

typedef struct part_list {
        bool json;
        size_t count;
} part_list_t;

static int partitions_visit(void *opaque, const char *topic,
                            int32_t partition, const sg_meta_rec_t *m) {
        part_list_t *pl = opaque;
        pl->count++;
        if (pl->json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "kind", "partition");
                cJSON_AddStringToObject(o, "topic", topic);
                j_i64(o, "partition", partition);
                cJSON *mj = meta_json(m);
                cJSON *it = mj->child;
                /* flatten the meta fields into the line */
                while (it) {
                        cJSON *next = it->next;
                        cJSON_AddItemToObject(
                            o, it->string,
                            cJSON_DetachItemViaPointer(mj, it));
                        it = next;
                }
                cJSON_Delete(mj);
                print_json_line(o);
                cJSON_Delete(o);
                return 0;
        }
        char in[24] = "-", cl[24] = "-", ck[48] = "-";
        if (m->input_offset >= 0)
                snprintf(in, sizeof(in), "%" PRId64, m->input_offset);
        if (m->changelog_offset >= 0)
                snprintf(cl, sizeof(cl), "%" PRId64, m->changelog_offset);
        if (m->clock_ms > 0)
                sg_iso_time(m->clock_ms, ck, sizeof(ck));
        char name[300];
        snprintf(name, sizeof(name), "%s/%" PRId32, topic, partition);
        printf("%-28s %-20s %12s %12s %8" PRIu64 " %12" PRIu64 " %11" PRIu64
               " %8" PRIu64 "  %s\n",
               name, m->group[0] ? m->group : "-", in, cl, m->parked_cnt,
               m->parked_bytes, m->quarantined, m->snap_in_flight, ck);
        return 0;
}

static int cmd_partitions(int argc, char **argv) {
        static const struct option opts[] = {
            {"config", required_argument, NULL, 'c'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *config = NULL;
        bool json = false;
        int c;
        while ((c = getopt_long(argc, argv, "c:jh", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 'j':
                        json = true;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        return usage_error("partitions: invalid option");
                }
        }
        if (optind < argc)
                return usage_error("partitions: unexpected argument '%s'",
                                   argv[optind]);
        sg_config_t *conf = NULL;
        int rc = load_config(config, &conf);
        if (rc)
                return rc;
        sg_store_t *store = NULL;
        sg_txn_t *txn = NULL;
        if ((rc = open_store(conf, &store, &txn))) {
                sg_config_destroy(conf);
                return rc;
        }
        if (!json)
                printf("%-28s %-20s %12s %12s %8s %12s %11s %8s  %s\n",
                       "PARTITION", "GROUP", "INPUT_OFF", "CHANGELOG", "PARKED",
                       "PARKED_BYTES", "QUARANTINED", "SNAP_REQ", "CLOCK");
        part_list_t pl = {.json = json};
        sg_err_t err = sg_meta_foreach(txn, partitions_visit, &pl);
        if (err) {
                errf("meta database unreadable (%s)", sg_err2str(err));
                rc = EXIT_RUNTIME;
        } else {
                uint64_t map_size = 0, used = 0;
                sg_store_usage(store, &map_size, &used);
                if (json) {
                        cJSON *o = cJSON_CreateObject();
                        cJSON_AddStringToObject(o, "kind", "store");
                        cJSON_AddStringToObject(o, "data_dir", conf->data_dir);
                        j_u64(o, "map_size_bytes", map_size);
                        j_u64(o, "used_bytes", used);
                        j_u64(o, "partitions", pl.count);
                        print_json_line(o);
                        cJSON_Delete(o);
                } else {
                        printf("\nstore %s: %zu partition(s), %" PRIu64
                               " of %" PRIu64 " bytes used (%.1f%%)\n",
                               conf->data_dir, pl.count, used, map_size,
                               map_size ? 100.0 * (double)used / (double)map_size
                                        : 0.0);
                }
        }
        sg_txn_abort(txn);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}

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

static volatile bool g_fatal;
static char g_kafka_error[512];

static void kafka_log(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
        (void)rk;
        if (level <= 4)
                fprintf(stderr, "%s: kafka %s: %s\n", prog, fac, buf);
}

static void kafka_error(rd_kafka_t *rk, int err, const char *reason,
                        void *opaque) {
        (void)opaque;
        char es[256];
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
                rd_kafka_fatal_error(rk, es, sizeof(es));
                snprintf(g_kafka_error, sizeof(g_kafka_error), "fatal: %s", es);
                g_fatal = true;
                return;
        }
        snprintf(g_kafka_error, sizeof(g_kafka_error), "%s: %s",
                 rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

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
        fprintf(f, "%s%s %s/%" PRId32 "/%" PRId64 " -> %s/%" PRId32, error ? "seqgatectl: " : "",
                action, dlq, dlq_part, dlq_off, topic ? topic : "?", part);
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
                             m->partition, m->offset, rm->reason,
                             rm->aggregate, NULL);
        }
        replay_msg_free(rm);
}

/* Sets one property; errors never echo the value of a secret property. */
static bool conf_set(rd_kafka_conf_t *kc, const char *block, const char *name,
                     const char *value) {
        char es[512];
        if (rd_kafka_conf_set(kc, name, value, es, sizeof(es)) ==
            RD_KAFKA_CONF_OK)
                return true;
        if (sg_config_is_secret(name))
                errf("%s.%s: rejected by librdkafka", block, name);
        else
                errf("%s.%s: %s", block, name, es);
        return false;
}

/* librdkafka configuration from the config's blocks, verbatim. group.id
 * (required in "kafka" for the daemon) is left out: the replay tool never
 * joins the consumer group nor commits its offsets. */
static rd_kafka_conf_t *kafka_conf(const sg_config_t *conf, bool producer) {
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        bool ok = true;
        if (!producer) {
                /* Only committed records: a transactional (exactly_once)
                 * DLQ may hold aborted ones. Overridable in "kafka". */
                ok = conf_set(kc, "default", "isolation.level",
                              "read_committed");
        }
        for (size_t i = 0; ok && i < conf->kafka_cnt; i++)
                if (strcmp(conf->kafka[i].name, "group.id") != 0)
                        ok = conf_set(kc, "kafka", conf->kafka[i].name,
                                      conf->kafka[i].value);
        if (producer) {
                for (size_t i = 0; ok && i < conf->kafka_producer_cnt; i++)
                        ok = conf_set(kc, "kafka_producer",
                                      conf->kafka_producer[i].name,
                                      conf->kafka_producer[i].value);
                /* No transactional.id: replayed records are plain records. */
                ok = ok &&
                     conf_set(kc, "replay", "enable.idempotence", "true") &&
                     conf_set(kc, "replay", "acks", "all");
                if (ok)
                        rd_kafka_conf_set_dr_msg_cb(kc, replay_dr);
        } else {
                /* An unjoined, never-committing reader: assign() needs a
                 * group.id in librdkafka, so a throw-away one is used. */
                char gid[128];
                snprintf(gid, sizeof(gid), "seqgatectl-replay-%ld-%ld",
                         (long)getpid(), (long)time(NULL));
                ok = conf_set(kc, "replay", "group.id", gid) &&
                     conf_set(kc, "replay", "enable.auto.commit", "false") &&
                     conf_set(kc, "replay", "enable.auto.offset.store",
                              "false") &&
                     conf_set(kc, "replay", "enable.partition.eof", "true");
        }
        if (!ok) {
                rd_kafka_conf_destroy(kc);
                return NULL;
        }
        rd_kafka_conf_set_log_cb(kc, kafka_log);
        rd_kafka_conf_set_error_cb(kc, kafka_error);
        return kc;
}

static bool hdr_str(rd_kafka_headers_t *h, const char *name, char *buf,
                    size_t size) {
        const void *v;
        size_t n;
        if (!h || rd_kafka_header_get_last(h, name, &v, &n) != 0 || !v ||
            n >= size)
                return false;
        memcpy(buf, v, n);
        buf[n] = '\0';
        return true;
}

typedef struct dlq_part {
        int32_t partition;
        int64_t start, end; /* read [start, end) */
        bool done;
} dlq_part_t;

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
                if (strncmp(name, DLQ_HDR_PREFIX, strlen(DLQ_HDR_PREFIX)) == 0 ||
                    strcmp(name, SG_H_REPLAY) == 0)
                        continue;
                rd_kafka_header_add(out, name, -1, val, val ? (ssize_t)size : 0);
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
                if (!err)
                        return true; /* headers now owned by librdkafka */
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

static int replay_run(const sg_config_t *conf, const replay_opts_t *o) {
        replay_stats_t st = {0};
        rd_kafka_t *cons = NULL, *prod = NULL;
        rd_kafka_topic_t *rkt = NULL;
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_partition_list_t *assign = NULL;
        dlq_part_t *parts = NULL;
        size_t part_cnt = 0, open_cnt = 0;
        int rc = EXIT_RUNTIME;
        char es[512];
        const int meta_timeout = 10000;

        rd_kafka_conf_t *kc = kafka_conf(conf, false);
        if (!kc)
                return EXIT_USAGE;
        if (!(cons = rd_kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es)))) {
                rd_kafka_conf_destroy(kc);
                errf("kafka consumer: %s", es);
                return EXIT_USAGE;
        }
        rkt = rd_kafka_topic_new(cons, o->dlq, NULL);
        rd_kafka_resp_err_t kerr =
            rd_kafka_metadata(cons, 0, rkt, &md, meta_timeout);
        if (kerr) {
                errf("DLQ topic %s: metadata: %s", o->dlq,
                     rd_kafka_err2str(kerr));
                goto out;
        }
        if (md->topic_cnt != 1 || md->topics[0].err) {
                errf("DLQ topic %s: %s", o->dlq,
                     md->topic_cnt ? rd_kafka_err2str(md->topics[0].err)
                                   : "not in the metadata");
                goto out;
        }
        const struct rd_kafka_metadata_topic *mt = &md->topics[0];
        parts = calloc((size_t)mt->partition_cnt + 1, sizeof(*parts));
        assign = rd_kafka_topic_partition_list_new(mt->partition_cnt + 1);
        if (!parts || !assign) {
                errf("out of memory");
                goto out;
        }
        bool found = o->dlq_partition < 0;
        for (int i = 0; i < mt->partition_cnt; i++) {
                int32_t p = mt->partitions[i].id;
                if (o->dlq_partition >= 0 && p != o->dlq_partition)
                        continue;
                found = true;
                int64_t lo, hi;
                kerr = rd_kafka_query_watermark_offsets(cons, o->dlq, p, &lo,
                                                        &hi, meta_timeout);
                if (kerr) {
                        errf("DLQ %s/%" PRId32 ": end offsets: %s", o->dlq, p,
                             rd_kafka_err2str(kerr));
                        goto out;
                }
                /* The end is fixed now: records the daemon dead-letters
                 * again while this runs are not read (no replay loop). */
                dlq_part_t *dp = &parts[part_cnt++];
                dp->partition = p;
                dp->start = o->from > lo ? o->from : lo;
                dp->end = o->until >= 0 && o->until < hi ? o->until : hi;
                dp->done = dp->start >= dp->end;
                if (!dp->done) {
                        rd_kafka_topic_partition_list_add(assign, o->dlq, p)
                            ->offset = dp->start;
                        open_cnt++;
                }
        }
        if (!found) {
                errf("DLQ topic %s has no partition %" PRId64, o->dlq,
                     o->dlq_partition);
                rc = EXIT_USAGE;
                goto out;
        }

        if (open_cnt && !o->dry_run) {
                rd_kafka_conf_t *pc = kafka_conf(conf, true);
                if (!pc) {
                        rc = EXIT_USAGE;
                        goto out;
                }
                if (!(prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, es,
                                          sizeof(es)))) {
                        rd_kafka_conf_destroy(pc);
                        errf("kafka producer: %s", es);
                        rc = EXIT_USAGE;
                        goto out;
                }
        }
        if (open_cnt && (kerr = rd_kafka_assign(cons, assign))) {
                errf("assign %s: %s", o->dlq, rd_kafka_err2str(kerr));
                goto out;
        }

        struct timespec last;
        clock_gettime(CLOCK_MONOTONIC, &last);
        bool limit_hit = false;
        while (open_cnt && !limit_hit && !g_fatal) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 100);
                if (prod)
                        rd_kafka_poll(prod, 0);
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (!m) {
                        int64_t idle = (now.tv_sec - last.tv_sec) * 1000 +
                                       (now.tv_nsec - last.tv_nsec) / 1000000;
                        if (idle > o->timeout_ms) {
                                errf("no progress reading %s for %" PRId64
                                     " ms%s%s",
                                     o->dlq, o->timeout_ms,
                                     g_kafka_error[0] ? "; last error: " : "",
                                     g_kafka_error);
                                goto out;
                        }
                        continue;
                }
                last = now;
                dlq_part_t *dp = NULL;
                for (size_t i = 0; i < part_cnt; i++)
                        if (parts[i].partition == m->partition)
                                dp = &parts[i];
                if (m->err) {
                        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                /* At the end (read_committed: at the last
                                 * stable offset). */
                                if (dp && !dp->done) {
                                        dp->done = true;
                                        open_cnt--;
                                }
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        errf("reading %s/%" PRId32 ": %s", o->dlq,
                             m->partition, rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        goto out;
                }
                if (!dp || dp->done || m->offset >= dp->end) {
                        if (dp && !dp->done) {
                                dp->done = true;
                                open_cnt--;
                        }
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (m->offset + 1 >= dp->end) {
                        dp->done = true;
                        open_cnt--;
                }
                st.read++;

                rd_kafka_headers_t *h = NULL;
                if (rd_kafka_message_headers(m, &h))
                        h = NULL;
                char reason[128], agg[1100], topic[256], pbuf[32], tbuf[32];
                bool has_reason = hdr_str(h, SG_DLQ_H_REASON, reason,
                                          sizeof(reason));
                bool has_agg = hdr_str(h, SG_DLQ_H_AGGREGATE, agg, sizeof(agg));
                bool selected = true;
                if (o->reason_cnt) {
                        selected = false;
                        for (size_t i = 0; has_reason && i < o->reason_cnt; i++)
                                if (!strcmp(reason, o->reasons[i]))
                                        selected = true;
                }
                if (o->aggregate && (!has_agg || strcmp(agg, o->aggregate)))
                        selected = false;
                if (!selected) {
                        st.skipped++;
                        rd_kafka_message_destroy(m);
                        continue;
                }
                st.selected++;
                if (o->limit >= 0 && (int64_t)st.selected >= o->limit)
                        limit_hit = true;

                int64_t opart = -1, ts = 0;
                bool origin = hdr_str(h, SG_DLQ_H_TOPIC, topic, sizeof(topic)) &&
                              topic[0] &&
                              hdr_str(h, SG_DLQ_H_PARTITION, pbuf,
                                      sizeof(pbuf)) &&
                              parse_i64(pbuf, 0, INT32_MAX, &opart);
                if (!hdr_str(h, SG_DLQ_H_TIMESTAMP, tbuf, sizeof(tbuf)) ||
                    !parse_i64(tbuf, 1, INT64_MAX, &ts))
                        ts = rd_kafka_message_timestamp(m, NULL);
                if (!origin) {
                        st.failed++;
                        print_record(o->json, "failed", o->dlq, m->partition,
                                     m->offset, NULL, -1, -1,
                                     has_reason ? reason : NULL,
                                     has_agg ? agg : NULL,
                                     "no valid " SG_DLQ_H_TOPIC " / "
                                     SG_DLQ_H_PARTITION " header");
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (o->dry_run) {
                        print_record(o->json, "would_replay", o->dlq,
                                     m->partition, m->offset, topic,
                                     (int32_t)opart, -1,
                                     has_reason ? reason : NULL,
                                     has_agg ? agg : NULL, NULL);
                        rd_kafka_message_destroy(m);
                        continue;
                }
                replay_msg_t *rm = calloc(1, sizeof(*rm));
                if (!rm || !(rm->dlq_topic = strdup(o->dlq)) ||
                    (has_reason && !(rm->reason = strdup(reason))) ||
                    (has_agg && !(rm->aggregate = strdup(agg)))) {
                        replay_msg_free(rm);
                        rd_kafka_message_destroy(m);
                        errf("out of memory");
                        goto out;
                }
                rm->stats = &st;
                rm->json = o->json;
                rm->dlq_partition = m->partition;
                rm->dlq_offset = m->offset;
                replay_one(prod, m, h, topic, (int32_t)opart, ts, rm);
                rd_kafka_message_destroy(m);
        }
        if (g_fatal) {
                errf("kafka %s", g_kafka_error);
                goto out;
        }
        rc = 0;
out:
        if (prod) {
                /* Every delivery is waited for and checked. */
                int64_t wait = o->timeout_ms > 60000 ? o->timeout_ms : 60000;
                rd_kafka_flush(prod, (int)(wait > INT_MAX ? INT_MAX : wait));
                int left = rd_kafka_outq_len(prod);
                if (left > 0) {
                        errf("%d record(s) not delivered after %" PRId64
                             " ms%s%s",
                             left, wait,
                             g_kafka_error[0] ? "; last error: " : "",
                             g_kafka_error);
                        /* Purged records get failed delivery reports
                         * (counted there, opaques freed there); whatever
                         * reports never come are counted here. */
                        uint64_t before = st.failed;
                        rd_kafka_purge(prod, RD_KAFKA_PURGE_F_QUEUE |
                                                 RD_KAFKA_PURGE_F_INFLIGHT);
                        rd_kafka_flush(prod, 5000);
                        if (st.failed - before < (uint64_t)left)
                                st.failed = before + (uint64_t)left;
                }
                rd_kafka_destroy(prod);
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        if (assign)
                rd_kafka_topic_partition_list_destroy(assign);
        free(parts);
        if (cons) {
                rd_kafka_consumer_close(cons);
                rd_kafka_destroy(cons);
        }
        print_summary(o, &st);
        if (rc == 0 && st.failed)
                rc = EXIT_RUNTIME;
        return rc;
}

static int cmd_replay(int argc, char **argv) {
        static const struct option opts[] = {
            {"config", required_argument, NULL, 'c'},
            {"dlq", required_argument, NULL, 'd'},
            {"reason", required_argument, NULL, 'r'},
            {"aggregate", required_argument, NULL, 'a'},
            {"dlq-partition", required_argument, NULL, 'P'},
            {"from-offset", required_argument, NULL, 'f'},
            {"until-offset", required_argument, NULL, 'u'},
            {"limit", required_argument, NULL, 'l'},
            {"timeout-ms", required_argument, NULL, 'T'},
            {"dry-run", no_argument, NULL, 'n'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        replay_opts_t o = {.dlq_partition = -1, .from = -1, .until = -1,
                           .limit = -1, .timeout_ms = 30000};
        const char *config = NULL;
        const char **reasons = calloc((size_t)argc + 1, sizeof(*reasons));
        if (!reasons) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        o.reasons = reasons;
        int c, rc = 0;
        while (!rc && (c = getopt_long(argc, argv, "c:d:r:a:P:f:u:l:T:njh",
                                       opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 'd':
                        o.dlq = optarg;
                        break;
                case 'r': {
                        bool known = false;
                        for (int r = 1; r < SG_R__CNT && !known; r++)
                                known = !strcmp(optarg,
                                                sg_reason_name((sg_reason_t)r));
                        if (!known)
                                rc = usage_error("--reason: '%s' is not a DLQ "
                                                 "reason (see README \"DLQ "
                                                 "records\")",
                                                 optarg);
                        reasons[o.reason_cnt++] = optarg;
                        break;
                }
                case 'a':
                        o.aggregate = optarg;
                        break;
                case 'P':
                        if (!parse_i64(optarg, 0, INT32_MAX, &o.dlq_partition))
                                rc = usage_error("--dlq-partition: '%s' is not "
                                                 "a partition number", optarg);
                        break;
                case 'f':
                        if (!parse_i64(optarg, 0, INT64_MAX, &o.from))
                                rc = usage_error("--from-offset: '%s' is not "
                                                 "an offset", optarg);
                        break;
                case 'u':
                        if (!parse_i64(optarg, 0, INT64_MAX, &o.until))
                                rc = usage_error("--until-offset: '%s' is not "
                                                 "an offset", optarg);
                        break;
                case 'l':
                        if (!parse_i64(optarg, 1, INT64_MAX, &o.limit))
                                rc = usage_error("--limit: '%s' is not a "
                                                 "positive number", optarg);
                        break;
                case 'T':
                        if (!parse_i64(optarg, 1, INT32_MAX, &o.timeout_ms))
                                rc = usage_error("--timeout-ms: '%s' is not a "
                                                 "positive number", optarg);
                        break;
                case 'n':
                        o.dry_run = true;
                        break;
                case 'j':
                        o.json = true;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        free(reasons);
                        return 0;
                default:
                        rc = usage_error("replay: invalid option");
                }
        }
        if (!rc && optind < argc)
                rc = usage_error("replay: unexpected argument '%s'",
                                 argv[optind]);
        if (!rc && (!config || !o.dlq))
                rc = usage_error("replay needs --config and --dlq");
        if (!rc && o.from >= 0 && o.until >= 0 && o.until <= o.from)
                rc = usage_error("--until-offset must be above --from-offset");
        sg_config_t *conf = NULL;
        if (!rc)
                rc = load_config(config, &conf);
        if (!rc) {
                bool is_dlq = false;
                for (size_t i = 0; i < conf->topic_cnt; i++)
                        if (!strcmp(conf->topics[i].dlq_topic, o.dlq))
                                is_dlq = true;
                if (!is_dlq)
                        errf("warning: %s is not a dlq_topic of %s", o.dlq,
                             config);
                rc = replay_run(conf, &o);
        }
        sg_config_destroy(conf);
        free(reasons);
        return rc;
}


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
        *input_offsetp = sg_meta_get(txn, &tp, &m) == SG_OK ? m.input_offset
                                                              : -1;
        unsigned char ah[32];
        sg_sha256(agg, strlen(agg), ah);
        sg_err_t err = sg_agg_get(txn, &tp, ah, recp);
        *foundp = err == SG_OK;
        sg_txn_abort(txn);
        sg_store_close(store);
        if (err && err != SG_ERR_NOT_FOUND) {
                errf("release: reading aggregate %s: %s", agg,
                     sg_err2str(err));
                return EXIT_RUNTIME;
        }
        return 0;
}

static int cmd_release(int argc, char **argv) {
        static const struct option opts[] = {
            {"config", required_argument, NULL, 'c'},
            {"topic", required_argument, NULL, 't'},
            {"partition", required_argument, NULL, 'p'},
            {"aggregate", required_argument, NULL, 'a'},
            {"version", required_argument, NULL, 'v'},
            {"state", required_argument, NULL, 's'},
            {"wait", no_argument, NULL, 'w'},
            {"timeout-ms", required_argument, NULL, 'T'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *config = NULL, *topic = NULL, *agg = NULL, *state = NULL;
        int64_t partition = -1, timeout_ms = 30000;
        uint64_t version = 0;
        bool json = false, has_version = false, wait = false;
        int c;
        while ((c = getopt_long(argc, argv, "c:t:p:a:v:s:wT:jh", opts,
                                NULL)) != -1) {
                switch (c) {
                case 'c': config = optarg; break;
                case 't': topic = optarg; break;
                case 'a': agg = optarg; break;
                case 's': state = optarg; break;
                case 'j': json = true; break;
                case 'p':
                        if (!parse_i64(optarg, 0, INT32_MAX, &partition))
                                return usage_error("--partition: '%s' is not a "
                                                   "partition number", optarg);
                        break;
                case 'v':
                        if (!parse_u64(optarg, &version))
                                return usage_error("--version: '%s' is not a "
                                                   "version (a decimal "
                                                   "unsigned 64-bit integer)",
                                                   optarg);
                        has_version = true;
                        break;
                case 'w': wait = true; break;
                case 'T':
                        if (!parse_i64(optarg, 1, INT32_MAX, &timeout_ms))
                                return usage_error("--timeout-ms: '%s' is not "
                                                   "a positive number",
                                                   optarg);
                        break;
                case 'h': fputs(usage_text, stdout); return 0;
                default: return usage_error("release: bad option");
                }
        }
        if (!config || !topic || partition < 0 || !agg)
                return usage_error("release needs --config, --topic, "
                                   "--partition and --aggregate");
        sg_config_t *conf;
        int rc = load_config(config, &conf);
        if (rc)
                return rc;
        const sg_topic_config_t *tc = sg_config_topic(conf, topic);
        if (!tc) {
                errf("release: '%s' is not an input topic of %s", topic,
                     config);
                sg_config_destroy(conf);
                return EXIT_USAGE;
        }
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
                sg_config_destroy(conf);
                return EXIT_USAGE;
        }
        sg_agg_rec_t before;
        bool found = false;
        int64_t in_off = -1;
        if (wait) {
                /* --wait reads the store of the seqgate that owns the
                 * partition: the same rule first, then the outcome */
                if ((rc = release_read(conf, topic, (int32_t)partition, agg,
                                       &found, &before, &in_off))) {
                        sg_config_destroy(conf);
                        return rc;
                }
                if ((why = sg_release_refusal(tc, found ? &before : NULL,
                                              has_version, version, state,
                                              why_buf, sizeof(why_buf)))) {
                        errf("release: refused: %s", why);
                        sg_config_destroy(conf);
                        return EXIT_USAGE;
                }
        }
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
        rd_kafka_conf_t *kc = kafka_conf(conf, true);
        char es[512];
        rd_kafka_t *prod = NULL;
        if (kc) {
                rd_kafka_conf_set_dr_msg_cb(kc, release_dr);
                prod = rd_kafka_new(RD_KAFKA_PRODUCER, kc, es, sizeof(es));
                if (!prod) {
                        errf("release: %s", es);
                        rd_kafka_conf_destroy(kc);
                }
        }
        rc = EXIT_RUNTIME;
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
                else if (rd_kafka_flush(prod, 30000) != 0 ||
                         g_release_err != 0)
                        errf("release: not delivered: %s",
                             g_release_err > 0
                                 ? rd_kafka_err2str(g_release_err)
                                 : "timed out");
                else
                        rc = 0;
                rd_kafka_destroy(prod);
        }
        /* --wait: until the owner's store reflects the control record's
         * offset, then whether the aggregate was released */
        const char *outcome = "sent";
        if (rc == 0 && wait) {
                int64_t deadline = sg_clock_mono_ms() + timeout_ms;
                outcome = NULL;
                while (!outcome) {
                        sg_agg_rec_t after;
                        if ((rc = release_read(conf, topic, (int32_t)partition,
                                               agg, &found, &after, &in_off)))
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
        }
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
                               agg, outcome, topic, partition,
                               g_release_offset, val);
        }
        cJSON_free(val);
        sg_config_destroy(conf);
        return rc;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
        if (argc < 2)
                return usage_error("a command is required");
        const char *cmd = argv[1];
        if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") ||
            !strcmp(cmd, "help")) {
                fputs(usage_text, stdout);
                return 0;
        }
        if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
                printf("seqgatectl %s (librdkafka %s)\n", SG_VERSION_STR,
                       rd_kafka_version_str());
                return 0;
        }
        /* getopt_long sees the command as argv[0]. */
        if (!strcmp(cmd, "inspect"))
                return cmd_inspect(argc - 1, argv + 1);
        if (!strcmp(cmd, "partitions"))
                return cmd_partitions(argc - 1, argv + 1);
        if (!strcmp(cmd, "replay"))
                return cmd_replay(argc - 1, argv + 1);
        if (!strcmp(cmd, "release"))
                return cmd_release(argc - 1, argv + 1);
        return usage_error("unknown command '%s'", cmd);
}
