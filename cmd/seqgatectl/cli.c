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
        "       seqgatectl -V | --version | version\n"
        "       seqgatectl -h | --help | help\n"
        "\n"
        "Commands (seqgatectl COMMAND --help says more):\n"
        "  inspect     an aggregate, or the aggregates that need attention, "
        "from the\n"
        "              store (read-only; safe while seqgate runs)\n"
        "  lookup      what happened to an event (the result query), from "
        "the store\n"
        "  partitions  every partition in the store with its meta\n"
        "  replay      produce DLQ records back to their input topic\n"
        "  release     end an aggregate's quarantine (a control record)\n"
        "  simulate    run the engine offline over an NDJSON file of "
        "records\n"
        "  dlq summary what is in the DLQ: counts by reason, aggregate and "
        "hour\n"
        "  dlq tail    the last DLQ records, and with -f the new ones\n"
        "  sizing      how large the store and the changelog grow\n"
        "  audit       a topic's duplicates, gaps and disorder, before "
        "adopting seqgate\n"
        "\n"
        "Common options (every command):\n"
        "  -c, --config FILE      the seqgate configuration file\n"
        "      --log-level LEVEL  print messages and librdkafka log lines of "
        "LEVEL\n"
        "                         and worse: error, warning (default), "
        "notice, info,\n"
        "                         debug\n"
        "      --json             one JSON object per line\n"
        "  -h, --help             the command's help\n"
        "Where a command reads a store (lookup, inspect, partitions, "
        "sizing,\n"
        "  release: to find the partition, and with --wait):\n"
        "      --data-dir DIR     the store directory instead of the "
        "config's data_dir\n"
        "Where a command talks to Kafka (replay, release, dlq summary, "
        "dlq tail,\n"
        "  audit):\n"
        "  -X NAME=VALUE          a librdkafka property for every Kafka "
        "client the\n"
        "                         command creates, on top of the config's "
        "\"kafka\"\n"
        "                         block; repeatable, a later one wins; the "
        "properties\n"
        "                         seqgate refuses in the config are refused "
        "here\n"
        "  -V, --version          seqgate's version and its libraries'\n"
        "A topic, partition or DLQ topic left out is inferred when the "
        "config (or\n"
        "the store) leaves one choice, and said on stderr: \"seqgatectl: "
        "using ...\".\n"
        "\n"
        "Exit status: 0 ok, 1 runtime error, 2 usage or configuration error;\n"
        "lookup: 1 unknown, 3 unknown in a store that is not current (see\n"
        "seqgatectl lookup --help).\n";

sg_log_level_t cli_log_level = SG_LOG_WARNING;

void warnf(const char *fmt, ...) {
        va_list ap;
        if (cli_log_level < SG_LOG_WARNING)
                return;
        fprintf(stderr, "%s: warning: ", prog);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* The subcommand cli_getopt() parses, for usage errors; NULL before. */
static const char *g_cmd;

void usage_print(const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "%s%s%s: ", prog, g_cmd ? " " : "", g_cmd ? g_cmd : "");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry '%s%s%s --help' for more information.\n", prog,
                g_cmd ? " " : "", g_cmd ? g_cmd : "");
}

/* ------------------------------------------------------------------ */
/* the common options                                                  */

enum { OPT_DATA_DIR = 1000, OPT_LOG_LEVEL };

static const struct option common_opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"data-dir", required_argument, NULL, OPT_DATA_DIR},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
};

/* The common options' part of a command's --help. */
static void help_print(const cli_common_t *cc) {
        fputs(cc->help, stdout);
        fputs("\nCommon options:\n"
              "  -c, --config FILE      the seqgate configuration file\n",
              stdout);
        if (cc->uses & CLI_USES_STORE)
                fputs("      --data-dir DIR     the store directory instead "
                      "of the config's data_dir\n",
                      stdout);
        if (cc->uses & CLI_USES_KAFKA)
                fputs("  -X NAME=VALUE          a librdkafka property for "
                      "every Kafka client this\n"
                      "                         command creates, on top of "
                      "the config's \"kafka\"\n"
                      "                         block; repeatable, a later "
                      "one wins; the properties\n"
                      "                         seqgate refuses in the "
                      "config are refused here\n",
                      stdout);
        fputs("      --log-level LEVEL  print messages and librdkafka log "
              "lines of LEVEL\n"
              "                         and worse: error, warning "
              "(default), notice, info,\n"
              "                         debug\n"
              "      --json             one JSON object per line\n"
              "  -h, --help             this help\n",
              stdout);
        fputs(cc->exit_status ? cc->exit_status
                              : "Exit status: 0 ok, 1 runtime error, 2 usage "
                                "or configuration error.\n",
              stdout);
}

/* Merges the command's options with the common ones the command takes. */
static void getopt_setup(cli_common_t *cc, const char *shortopts,
                         const struct option *longopts) {
        size_t n = 0, max = sizeof(cc->opts) / sizeof(cc->opts[0]) - 1;
        for (size_t i = 0; longopts && longopts[i].name && n < max; i++)
                cc->opts[n++] = longopts[i];
        for (size_t i = 0;
             i < sizeof(common_opts) / sizeof(common_opts[0]) && n < max; i++)
                if (common_opts[i].val != OPT_DATA_DIR ||
                    (cc->uses & CLI_USES_STORE))
                        cc->opts[n++] = common_opts[i];
        cc->opts[n] = (struct option){NULL, 0, NULL, 0};
        /* ':' first: a missing argument is ':', not '?' (no getopt
         * message: usage_print says it once) */
        snprintf(cc->shortopts, sizeof(cc->shortopts), ":%sc:jh%s",
                 shortopts ? shortopts : "",
                 cc->uses & CLI_USES_KAFKA ? "X:" : "");
}

int cli_getopt(cli_common_t *cc, int argc, char **argv, const char *shortopts,
               const struct option *longopts) {
        if (!cc->shortopts[0]) {
                g_cmd = cc->name ? cc->name : argv[0];
                opterr = 0;
                getopt_setup(cc, shortopts, longopts);
        }
        for (;;) {
                int c = getopt_long(argc, argv, cc->shortopts, cc->opts, NULL);
                const char *opt = argv[optind - 1];
                switch (c) {
                case -1:
                        if (argc - optind > cc->operands) {
                                cc->rc = usage_error(
                                        "unexpected argument '%s'",
                                        argv[optind + cc->operands]);
                                return CLI_STOP;
                        }
                        return CLI_END;
                case 'c':
                        cc->config = optarg;
                        continue;
                case 'j':
                        cc->json = true;
                        continue;
                case OPT_DATA_DIR:
                        if (!*optarg) {
                                cc->rc = usage_error("--data-dir: must not be "
                                                     "empty");
                                return CLI_STOP;
                        }
                        cc->data_dir = optarg;
                        continue;
                case OPT_LOG_LEVEL:
                        if (!sg_log_level_parse(optarg, &cli_log_level)) {
                                cc->rc = usage_error(
                                        "--log-level: unknown level '%s'; "
                                        "allowed: error, warning, notice, "
                                        "info, debug",
                                        optarg);
                                return CLI_STOP;
                        }
                        continue;
                case 'X': {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                cc->rc = usage_error("-X: '%s' is not "
                                                     "NAME=VALUE",
                                                     optarg);
                                return CLI_STOP;
                        }
                        if (cc->prop_cnt == CLI_PROPS_MAX) {
                                cc->rc = usage_error("-X: more than %d "
                                                     "properties",
                                                     CLI_PROPS_MAX);
                                return CLI_STOP;
                        }
                        cc->props[cc->prop_cnt++] = optarg;
                        continue;
                }
                case 'h':
                        help_print(cc);
                        cc->rc = 0;
                        return CLI_STOP;
                case ':':
                        cc->rc = usage_error("option '%s' requires an "
                                             "argument",
                                             opt);
                        return CLI_STOP;
                case '?':
                        if (!strncmp(opt, "--", 2))
                                cc->rc = usage_error("unrecognized option "
                                                     "'%s'",
                                                     opt);
                        else
                                cc->rc = usage_error("invalid option '-%c'",
                                                     optopt);
                        return CLI_STOP;
                default:
                        return c;
                }
        }
}

int cli_config_load(const cli_common_t *cc, sg_config_t **confp) {
        /* --data-dir replaces the config's data_dir, which may be absent */
        int rc = load_config_data_dir(cc->config, cc->data_dir, confp);
        if (rc)
                return rc;
        sg_config_t *conf = *confp;
        char es[512];
        for (size_t i = 0; !rc && i < cc->prop_cnt; i++) {
                const char *eq = strchr(cc->props[i], '=');
                char name[256];
                snprintf(name, sizeof(name), "%.*s", (int)(eq - cc->props[i]),
                         cc->props[i]);
                sg_err_t err =
                        sg_config_kafka_set(conf, name, eq + 1, es, sizeof(es));
                if (err) {
                        /* es names the property, never a secret's value */
                        rc = usage_error("-X %s: %s", name, es);
                }
        }
        if (rc) {
                sg_config_destroy(conf);
                *confp = NULL;
        }
        return rc;
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
        return load_config_data_dir(path, NULL, confp);
}

int load_config_data_dir(const char *path, const char *data_dir,
                         sg_config_t **confp) {
        char es[512];
        if (!path)
                return usage_error("--config FILE is required");
        sg_err_t err =
                sg_config_load_data_dir(path, data_dir, confp, es, sizeof(es));
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
        if (err == SG_ERR_NOT_FOUND) {
                /* the config's data_dir is often not where the store is
                 * (another host's copy, a pod's volume, a demo's --keep) */
                errf("%s; a store elsewhere: --data-dir DIR", es);
                return EXIT_RUNTIME;
        }
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

/* What the command chose for the user, "topic orders (the config's one
 * input topic)", joined with ", " until choices_print(). */
static char g_choices[1024];

void choice_add(const char *fmt, ...) {
        size_t l = strlen(g_choices);
        if (l && l + 2 < sizeof(g_choices)) {
                memcpy(g_choices + l, ", ", 3);
                l += 2;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_choices + l, sizeof(g_choices) - l, fmt, ap);
        va_end(ap);
}

void choices_print(void) {
        if (g_choices[0] && cli_log_level >= SG_LOG_WARNING)
                fprintf(stderr, "%s: using %s\n", prog, g_choices);
        g_choices[0] = '\0';
}

int default_topic(const sg_config_t *conf, const char **topicp) {
        if (*topicp)
                return 0;
        if (conf->topic_cnt != 1) {
                char names[512] = "";
                size_t l = 0;
                for (size_t i = 0; i < conf->topic_cnt && l < sizeof(names);
                     i++)
                        l += (size_t)snprintf(names + l, sizeof(names) - l,
                                              "%s%s", i ? ", " : "",
                                              conf->topics[i].name);
                return usage_error("--topic is required: the config has %zu "
                                   "input topics (%s)",
                                   conf->topic_cnt, names);
        }
        *topicp = conf->topics[0].name;
        choice_add("topic %s (the config's one input topic)", *topicp);
        return 0;
}

int default_dlq(const sg_config_t *conf, const char **dlqp) {
        if (*dlqp)
                return 0;
        const char *one = NULL;
        char names[512] = "";
        size_t l = 0, n = 0;
        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const char *d = conf->topics[i].dlq_topic;
                bool seen = false;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = !strcmp(conf->topics[j].dlq_topic, d);
                if (seen)
                        continue;
                one = d;
                n++;
                if (l < sizeof(names))
                        l += (size_t)snprintf(names + l, sizeof(names) - l,
                                              "%s%s", n > 1 ? ", " : "", d);
        }
        if (n != 1)
                return usage_error("--dlq is required: the config has %zu "
                                   "DLQ topics (%s)",
                                   n, names);
        *dlqp = one;
        choice_add("DLQ %s (the config's one dlq_topic)", one);
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
        /* the changelog id record the store checks its changelog by
         * (semantics §6 "The changelog's identity"), null: none yet */
        if (m->has_changelog_id) {
                char hex[SG_CHANGELOG_ID_HEX];
                cJSON_AddStringToObject(
                        o, "changelog_id",
                        sg_changelog_id_hex(m->changelog_id.id, hex));
                j_i64(o, "changelog_id_offset", m->changelog_id.offset);
        } else {
                cJSON_AddNullToObject(o, "changelog_id");
                cJSON_AddNullToObject(o, "changelog_id_offset");
        }
        return o;
}

volatile bool g_fatal;
char g_kafka_error[512];

/* librdkafka's lines, redacted by sg_kafka_conf_new(): those of
 * --log-level and worse go to stderr. */
static void ctl_kafka_log(void *opaque, sg_log_level_t level, const char *event,
                          const char *fields_json) {
        (void)opaque;
        if (level <= cli_log_level)
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
        g_klog = (sg_kafka_log_t){.conf = conf, .log_cb = ctl_kafka_log};
        rd_kafka_conf_t *kc;
        if (sg_kafka_conf_new(conf,
                              producer ? SG_KAFKA_PRODUCER : SG_KAFKA_READER,
                              gid, &g_klog, &kc, es, sizeof(es))) {
                errf("%s", es);
                return NULL;
        }
        /* librdkafka's lines as they happen, from its threads (stderr is
         * locked per line): nothing here polls while a call such as
         * rd_kafka_metadata() blocks, so queued lines would never show */
        if (rd_kafka_conf_set(kc, "log.queue", "false", es, sizeof(es)) !=
            RD_KAFKA_CONF_OK) {
                errf("%s", es);
                rd_kafka_conf_destroy(kc);
                return NULL;
        }
        if (producer && dr_msg_cb)
                rd_kafka_conf_set_dr_msg_cb(kc, dr_msg_cb);
        rd_kafka_conf_set_error_cb(kc, kafka_error);
        return kc;
}

rd_kafka_t *kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *kc, char *es,
                      size_t es_size) {
        return rd_kafka_new(type, kc, es, es_size);
}
