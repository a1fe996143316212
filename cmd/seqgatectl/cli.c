/*
 * cli.c — what seqgatectl's subcommands share (cli.h): messages and the
 * usage text, option value parsing, JSON output, the config and the
 * read-only store, and the librdkafka client configuration.
 */
#include "cli.h"

#include "config.h"
#include "envelope.h"
#include "kafka.h"
#include "query.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "seqgatectl";

void errf(const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "%s: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

const char usage_text[] =
        "usage: seqgatectl COMMAND [OPTIONS]\n"
        "\n"
        "Commands:\n"
        "  inspect     --config FILE --topic T --partition P [--aggregate ID]\n"
        "              [--limit N] [--json]\n"
        "      Show an aggregate's last applied version, state, flags, parked\n"
        "      events and snapshot request, and the partition's meta, from "
        "the\n"
        "      store (read-only; safe while seqgate runs). With --aggregate,\n"
        "      --partition may be left out (every partition of T is "
        "searched)\n"
        "      and --topic too when the config has one input topic. Without\n"
        "      --aggregate: the partition's meta and up to N (default 1000)\n"
        "      aggregates that are quarantined, refetching or have parked\n"
        "      events.\n"
        "  lookup      --config FILE [--topic T] --source S [--source S2 ...] "
        "--id I\n"
        "              [--json]\n"
        "      What happened to event I (the result query): applied, parked\n"
        "      (waiting for which version, until when), dead_lettered (why),\n"
        "      dropped, or unknown (never seen, or past its dedup TTL). "
        "--source\n"
        "      gives the idempotency scope parts in order (the CloudEvents\n"
        "      source by default; none for an empty scope). Exit status: 0\n"
        "      known, 1 unknown, 2 usage, configuration or store error.\n"
        "  partitions  --config FILE [--json]\n"
        "      Every partition in the store with its meta; the store's map "
        "size\n"
        "      and bytes in use.\n"
        "  replay      --config FILE --dlq TOPIC [--reason R ...] [--aggregate "
        "ID]\n"
        "              [--dlq-partition P] [--from-offset N] [--until-offset "
        "N]\n"
        "              [--limit N] [--dry-run] [--timeout-ms MS] [--json]\n"
        "      Read the DLQ topic (every partition, or P) from the start or "
        "offset\n"
        "      N up to its end offsets (or before --until-offset, exclusive) "
        "and\n"
        "      produce each selected record back to its original topic and\n"
        "      partition without its __seqgate.errors.* headers, with\n"
        "      __seqgate.replay: <dlq>/<partition>/<offset>. Records are "
        "selected\n"
        "      by reason (any of the --reason values) and aggregate; --limit\n"
        "      stops after N selected records; --dry-run only prints them.\n"
        "  release     --config FILE --topic T --partition P --aggregate ID\n"
        "              [--version S] [--state X] [--wait [--timeout-ms MS]]\n"
        "      Release a quarantined aggregate: produce a control record\n"
        "      (header __seqgate.control: release) to input topic T, partition "
        "P\n"
        "      (the __seqgate.errors.partition of its DLQ records), which the\n"
        "      seqgate that owns the partition applies in order: the "
        "quarantine\n"
        "      ends; with --version the last applied version becomes S (S >= "
        "L)\n"
        "      and with --state the state becomes X (a state of the topic's\n"
        "      state machine; anything else is refused before sending). An\n"
        "      aggregate that is not quarantined can be released only with\n"
        "      --version, and only while it waits on a gap. --wait reads the\n"
        "      data_dir of the seqgate that owns the partition (run it beside\n"
        "      that seqgate): it checks the same rules before sending, then "
        "waits\n"
        "      (--timeout-ms, default 30000) until the store has passed the\n"
        "      control record and says \"released\" (exit 0) or \"refused\"\n"
        "      (exit 1; seqgate's control_refused log line says why). Then\n"
        "      replay its DLQ records.\n"
        "  simulate    --config FILE INPUT [--json] [--expect FILE]\n"
        "  dlq         summary|tail --config FILE [...]\n"
        "  sizing      --config FILE --events-per-day N [--data-dir D]\n"
        "      Offline run of the engine over NDJSON, DLQ counts and last\n"
        "      records, store size estimate: see 'seqgatectl COMMAND -h'.\n"
        "  audit       --config FILE --topic T [--from TIME|OFFSET]\n"
        "              [--to TIME|OFFSET] [--json] [--html FILE]\n"
        "              [--max-aggregates N] [--max-keys N] [--timeout-ms MS]\n"
        "      Read topic T (every partition, nothing committed or produced)\n"
        "      through seqgate's engine over a temporary store, and report\n"
        "      its duplicates, conflicts, stale events, gaps and disorder,\n"
        "      with the gap_timeout_ms and dedup TTL they call for. TIME is\n"
        "      RFC 3339 (2026-11-30T08:00:00Z); --to is exclusive.\n"
        "\n"
        "Common options: --json (one JSON object per line), -h/--help.\n"
        "Exit status: 0 ok, 1 runtime error, 2 usage or configuration error.\n";

void usage_print(const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "%s: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (try '%s --help')\n", prog);
}

/* Parses a decimal integer in [min, max]; false on anything else. */
bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
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
bool parse_u64(const char *s, uint64_t *out) {
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

/* The result query's JSON helpers (query.h), one implementation. */
void j_i64(cJSON *o, const char *name, int64_t v) {
        sg_json_add_i64(o, name, v);
}
void j_u64(cJSON *o, const char *name, uint64_t v) {
        sg_json_add_u64(o, name, v);
}
void j_time(cJSON *o, const char *name, int64_t ms) {
        sg_json_add_time(o, name, ms, false);
}
void j_bytes(cJSON *o, const char *name, const void *p, size_t len) {
        sg_json_add_bytes(o, name, p, len);
}

void print_json_line(const cJSON *o) {
        char *s = cJSON_PrintUnformatted(o);
        if (s) {
                puts(s);
                free(s);
        }
}

void print_human(const cJSON *o, int indent, bool list_item) {
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

int load_config(const char *path, sg_config_t **confp) {
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

int open_store(const sg_config_t *conf, sg_store_t **storep, sg_txn_t **txnp) {
        char es[512];
        sg_err_t err =
                sg_store_open_readonly(conf->data_dir, storep, es, sizeof(es));
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

int default_topic(const sg_config_t *conf, const char **topicp) {
        if (*topicp)
                return 0;
        if (conf->topic_cnt != 1)
                return usage_error("--topic is required: the config has %zu "
                                   "input topics",
                                   conf->topic_cnt);
        *topicp = conf->topics[0].name;
        return 0;
}

cJSON *meta_json(const sg_meta_rec_t *m) {
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

volatile bool g_fatal;
char g_kafka_error[512];

/* librdkafka's lines, redacted by sg_kafka_conf_new(): warnings and worse
 * go to stderr. */
static void ctl_kafka_log(void *opaque, sg_log_level_t level, const char *event,
                          const char *fields_json) {
        (void)opaque;
        if (level <= SG_LOG_WARNING)
                fprintf(stderr, "%s: kafka %s: %s\n", prog, event,
                        fields_json ? fields_json : "{}");
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

/* The same client configuration as the daemon's (sg_kafka_conf_new, one
 * place for every client): a READER (group-less, read_committed, never
 * commits: the replay tool never joins the consumer group) or a plain
 * idempotent PRODUCER (no transactional.id: replayed records are plain
 * records). The sink outlives every client (static). */
static sg_kafka_log_t g_klog;

rd_kafka_conf_t *kafka_conf(const sg_config_t *conf, bool producer,
                            void (*dr_msg_cb)(rd_kafka_t *rk,
                                              const rd_kafka_message_t *m,
                                              void *opaque)) {
        char gid[128], es[512];
        snprintf(gid, sizeof(gid), "seqgatectl-replay-%ld-%ld", (long)getpid(),
                 (long)time(NULL));
        g_klog = (sg_kafka_log_t){conf, ctl_kafka_log, NULL};
        rd_kafka_conf_t *kc;
        if (sg_kafka_conf_new(conf,
                              producer ? SG_KAFKA_PRODUCER : SG_KAFKA_READER,
                              gid, &g_klog, &kc, es, sizeof(es))) {
                errf("%s", es);
                return NULL;
        }
        if (producer && dr_msg_cb)
                rd_kafka_conf_set_dr_msg_cb(kc, dr_msg_cb);
        rd_kafka_conf_set_error_cb(kc, kafka_error);
        return kc;
}

rd_kafka_t *kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *kc, char *es,
                      size_t es_size) {
        rd_kafka_t *rk = rd_kafka_new(type, kc, es, es_size);
        if (rk) /* sg_kafka_conf_new sets log.queue: served by the polls */
                rd_kafka_set_log_queue(rk, NULL);
        return rk;
}
