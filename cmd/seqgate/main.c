/*
 * seqgate — the sidecar daemon: flags, signals and wiring only.
 *
 * config (config.h) → LMDB store (store.h) → engine (engine.h), or the
 * pass-through benchmark baseline (passthrough.h) → Kafka loop (kafka.h).
 * SIGTERM and SIGINT ask the loop to finish its batch, commit, leave the
 * consumer group and return; one during the start-up ends its retries at
 * once. SIGHUP reloads the configuration file, as nginx, HAProxy and
 * Prometheus do (semantics "Reloading the configuration"): at the loop's
 * next reload point, between two batches (on_reload). Every signal is
 * named in a "signal_received" line. Logs are JSON lines on stderr:
 *   {"ts":"2026-11-30T08:00:00.123Z","level":"info","event":"...",...}
 * The configuration's Kafka property values are never logged (they may hold
 * secrets); the library's own log fields never carry one either.
 */
#include "config.h"
#include "engine.h"
#include "http.h"
#include "instance_claim.h"
#include "kafka.h"
#include "metrics.h"
#include "metrics_pub.h"
#include "passthrough.h"
#include "seqgate.h"
#include "http_query.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* logging                                                             */

/** The least severe level written: --log-level, else the configuration's
 *  log_level (a reload changes it). Read by the signal handler too. */
static volatile sig_atomic_t g_log_level = SG_LOG_INFO;

/**
 * Writes one JSON log line: ts, level, event, then the members of
 * @p fields, a JSON object text ("{...}", sg_log_cb's shape) or NULL.
 */
static void log_line(sg_log_level_t level, const char *event,
                     const char *fields) {
        char ts[64];

        if ((int)level > g_log_level)
                return;
        sg_iso_time(sg_clock_wall_ms(), ts, sizeof(ts));

        const char *m = fields ? fields : "";
        size_t mlen = strlen(m);
        if (mlen >= 2 && m[0] == '{' && m[mlen - 1] == '}') {
                m++; /* its members go beside ts, level and event */
                mlen -= 2;
        } else {
                mlen = 0; /* not an object: not sg_log_cb's shape */
        }
        /* One write per line, so lines do not interleave. */
        char *line = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&line, &len);
        if (!f)
                return;
        fprintf(f, "{\"ts\":\"%s\",\"level\":\"%s\",\"event\":\"%s\"", ts,
                sg_log_level_name(level), event);
        if (mlen > 0) {
                fputc(',', f);
                fwrite(m, 1, mlen, f);
        }
        fputs("}\n", f);
        fclose(f);
        fwrite(line, 1, len, stderr);
        free(line);
}

/** sg_log_cb for the library. */
static void on_log(void *opaque, sg_log_level_t level, const char *event,
                   const char *fields_json) {
        (void)opaque;
        log_line(level, event, fields_json);
}

/** The loaded configuration, whose secrets and values from the
 *  environment main's own log lines are scrubbed of (NULL before). */
static const sg_config_t *g_log_conf;

/** Builds a log line from a cJSON object (consumed). */
static void log_json(sg_log_level_t level, const char *event, cJSON *fields) {
        sg_kafka_log_redact(g_log_conf, fields);
        char *txt = fields ? cJSON_PrintUnformatted(fields) : NULL;
        log_line(level, event, txt);
        cJSON_free(txt);
        cJSON_Delete(fields);
}

static void log_msg(sg_log_level_t level, const char *event, const char *key,
                    const char *value) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, key, value);
        log_json(level, event, f);
}

/* ------------------------------------------------------------------ */
/* stats                                                               */

typedef struct opts opts_t;

typedef struct app {
        const opts_t *opts;    /**< the command line */
        sg_config_t *conf;     /**< the running configuration */
        sg_engine_t *engine;   /**< NULL in pass-through mode */
        sg_store_t *store;     /**< NULL in pass-through mode */
        sg_pub_t *pub;         /**< the HTTP endpoint's; NULL: none */
        sg_query_api_t *api;   /**< the read API (/v1/); NULL: none */
        int64_t start_s;       /**< process start, Unix seconds */
        int64_t store_entries; /**< last sg_store_entries() */
} app_t;

/** sg_loop_publish_cb (loop thread): adds the engine's and the store's
 *  numbers to the loop's snapshot and publishes it for the HTTP thread
 *  (metrics_pub.h). */
static void on_publish(void *opaque, sg_metrics_snap_t *snap) {
        app_t *app = opaque;
        snap->start_time_seconds = app->start_s;
        snap->has_engine = app->engine != NULL;
        if (app->engine) {
                const sg_metrics_t *m;
                const char *topic;
                snap->topic_cnt = 0;
                for (size_t i = 0;
                     (m = sg_engine_topic_metrics(app->engine, i, &topic)); i++)
                        (void)sg_metrics_snap_topic_add(snap, topic, m);
                for (size_t i = 0; i < snap->part_cnt; i++)
                        (void)sg_engine_part_gauges(
                                app->engine, snap->parts[i].topic,
                                snap->parts[i].partition, &snap->parts[i]);
        }
        if (app->store) {
                uint64_t map = 0, used = 0;
                sg_store_usage(app->store, &map, &used);
                snap->store_map_size_bytes = (int64_t)map;
                snap->store_used_bytes = (int64_t)used;
                /* a read transaction only beside no write transaction
                 * (a publish during a restore may find one open) */
                if (sg_store_txns_open(app->store, true) == 0)
                        app->store_entries =
                                (int64_t)sg_store_entries(app->store);
                snap->store_entries = app->store_entries;
        }
        if (app->engine) {
                /* the store's checkpoints, counted by the engine */
                const sg_metrics_t *em = sg_engine_metrics(app->engine);
                snap->checkpoints_total = em->checkpoints_total;
                snap->checkpoint_ms = em->checkpoint_ms;
        }
        sg_pub_publish(app->pub, snap);
}

/** Stats line: the loop's counters and gauges, then the engine's metrics,
 *  as one object. */
static void on_stats(void *opaque, const sg_loop_stats_t *s) {
        app_t *app = opaque;
        char buf[16384];
        buf[0] = '{';
        int n = sg_loop_stats_json(s, buf + 1, sizeof(buf) - 2);
        if (n < 0 || (size_t)n >= sizeof(buf) - 2)
                return;
        n++;
        if (app->engine) {
                char mbuf[12288];
                int m = sg_metrics_json(sg_engine_metrics(app->engine), mbuf,
                                        sizeof(mbuf));
                if (m > 0 && (size_t)m < sizeof(mbuf) &&
                    (size_t)n + 2 + (size_t)m < sizeof(buf))
                        n += snprintf(buf + n, sizeof(buf) - (size_t)n, ",%s",
                                      mbuf);
        }
        snprintf(buf + n, sizeof(buf) - (size_t)n, "}");
        log_line(SG_LOG_INFO, "stats", buf);
}

/* ------------------------------------------------------------------ */
/* signals                                                             */

static sg_loop_t *volatile g_loop;
static volatile sig_atomic_t g_stop_early;
static volatile sig_atomic_t g_reload_asked; /**< SIGHUP before the loop */

/** Appends the decimal @p v, at least @p width digits, at *@p o. */
static char *put_num(char *o, int64_t v, int width) {
        char d[24];
        int n = 0;
        do {
                d[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v > 0 || n < width);
        while (n > 0)
                *o++ = d[--n];
        return o;
}

/** Appends @p t at *@p o. */
static char *put_str(char *o, const char *t) {
        while (*t)
                *o++ = *t++;
        return o;
}

/**
 * The "signal_received" log line, written from the signal handler itself:
 * only async-signal-safe calls (clock_gettime, write), the date computed
 * by hand (days to civil date, H. Hinnant's algorithm), one write(2), so it
 * comes when the signal does, also during a long batch or the start-up.
 */
static void log_signal(const char *name, const char *action) {
        if (g_log_level < SG_LOG_NOTICE)
                return;
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
                return;
        int64_t days = ts.tv_sec / 86400, sec = ts.tv_sec % 86400;
        int64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
        int64_t m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
        char buf[256], *o = buf;
        o = put_str(o, "{\"ts\":\"");
        o = put_num(o, y, 4);
        *o++ = '-';
        o = put_num(o, m, 2);
        *o++ = '-';
        o = put_num(o, d, 2);
        *o++ = 'T';
        o = put_num(o, sec / 3600, 2);
        *o++ = ':';
        o = put_num(o, sec / 60 % 60, 2);
        *o++ = ':';
        o = put_num(o, sec % 60, 2);
        *o++ = '.';
        o = put_num(o, ts.tv_nsec / 1000000, 3);
        o = put_str(o, "Z\",\"level\":\"notice\",\"event\":"
                       "\"signal_received\",\"signal\":\"");
        o = put_str(o, name);
        o = put_str(o, "\",\"action\":\"");
        o = put_str(o, action);
        o = put_str(o, "\"}\n");
        ssize_t w = write(STDERR_FILENO, buf, (size_t)(o - buf));
        (void)w; /* nothing to do about a log line that cannot be written */
}

/** SIGTERM, SIGINT: a clean stop. SIGHUP: a reload at the loop's next
 *  reload point (sg_loop_reload; one asked before the loop exists is
 *  passed on when it does). */
static void on_signal(int sig) {
        int saved = errno;
        if (sig == SIGHUP) {
                log_signal("SIGHUP", "reload");
                g_reload_asked = 1;
                if (g_loop)
                        sg_loop_reload(g_loop);
        } else {
                log_signal(sig == SIGTERM ? "SIGTERM" : "SIGINT", "stop");
                g_stop_early = 1;
                if (g_loop)
                        sg_loop_stop(g_loop);
        }
        errno = saved;
}

static void install_signals(void) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* one handler at a time: their lines do not interleave */
        sigaddset(&sa.sa_mask, SIGTERM);
        sigaddset(&sa.sa_mask, SIGINT);
        sigaddset(&sa.sa_mask, SIGHUP);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &sa, NULL);
        /* A file size limit (ulimit -f, systemd's LimitFSIZE) reached by
         * the store's growth is a full disk to it: the write fails with
         * EFBIG, the batch is aborted and retried (semantics §6 "Disk
         * space"). SIGXFSZ's default action would kill the process
         * instead, with a core. */
        sigaction(SIGXFSZ, &sa, NULL);
}

/* ------------------------------------------------------------------ */
/* exit statuses                                                       */

/* Prints @p text (the cursor at column @p indent), wrapped before column
 * 79, continuation lines indented to @p indent. */
static void print_wrapped(FILE *out, const char *text, int indent) {
        int col = indent;
        for (const char *w = text; *w;) {
                size_t n = strcspn(w, " ");
                if (col > indent && col + 1 + (int)n > 78) {
                        fprintf(out, "\n%*s", indent, "");
                        col = indent;
                } else if (col > indent) {
                        fputc(' ', out);
                        col++;
                }
                fprintf(out, "%.*s", (int)n, w);
                col += (int)n;
                w += n;
                while (*w == ' ')
                        w++;
        }
        fputc('\n', out);
}

/* ------------------------------------------------------------------ */
/* flags                                                               */

/* The four synopsis lines: what a usage error prints, with a pointer to
 * --help, instead of the whole help (as GNU tools do). */
static void usage_synopsis(FILE *out) {
        fputs("usage: seqgate --config FILE [options]\n"
              "       seqgate --check-config FILE [--cluster]\n"
              "       seqgate --print-config FILE [--data-dir DIR] "
              "[--instance-id ID]\n"
              "       seqgate --version | --help\n",
              out);
}

/* After a usage error (getopt or the caller printed it): the synopsis and
 * where the rest is; exit status 2. */
static int usage_error(void) {
        usage_synopsis(stderr);
        fputs("Try 'seqgate --help' for the options and exit statuses.\n",
              stderr);
        return 2;
}

static void usage(FILE *out) {
        usage_synopsis(out);
        fputs("\n"
              "Drops duplicate events, orders each aggregate's events by "
              "version\nand dead-letters what it refuses, beside a Kafka "
              "consumer group.\n"
              "\n"
              "  -c, --config FILE           run with the configuration FILE "
              "(JSON, or YAML\n"
              "                              for a .yaml or .yml name)\n"
              "      --check-config FILE     validate FILE (and the files "
              "its Kafka clients\n"
              "                              read: ssl.ca.location, ...; "
              "that data_dir and the\n"
              "                              http.address port are free), "
              "print \"config ok\"\n"
              "                              and exit (exit 2 on an invalid "
              "configuration)\n"
              "      --cluster               with --check-config: also "
              "connect and check the\n"
              "                              cluster (topics, partitions, "
              "changelog settings,\n"
              "                              replicas, group and ACLs, TTL "
              "against retention),\n"
              "                              every problem on a line of its "
              "own; changes nothing\n"
              "      --print-config FILE     print the effective "
              "configuration of FILE (every\n"
              "                              default filled in, secrets "
              "and values from the\n"
              "                              environment as \"***\") as "
              "JSON and exit\n"
              "      --data-dir DIR          override the configuration's "
              "data_dir\n"
              "      --instance-id ID        override the configuration's "
              "instance_id (one per\n"
              "                              instance: the transactional id "
              "is <group.id>-ID;\n"
              "                              e.g. the pod name of a "
              "StatefulSet)\n"
              "      --log-level LEVEL       error, warning, notice, info "
              "(default), debug;\n"
              "                              wins over the configuration's "
              "log_level\n"
              "      --embedded-kafka        start librdkafka's in-process "
              "mock cluster and\n"
              "                              use it as bootstrap.servers "
              "(demo and tests only)\n"
              "      --embedded-partitions N partitions per topic of the "
              "mock cluster (default 1)\n"
              "      --bootstrap-file PATH   write the mock cluster's "
              "bootstrap address to PATH\n"
              "      --passthrough           benchmark baseline: copy every "
              "record to its output\n"
              "                              topic unchanged (no state, no "
              "decisions)\n"
              "      --accept-key-change     adopt changed envelope settings "
              "(format, id, scope,\n"
              "                              digest, aggregate) for stores "
              "written with the old\n"
              "                              ones; without it such a store "
              "is refused (exit 2)\n"
              "  -V, --version               print the version and exit\n"
              "  -h, --help                  print this help and exit\n"
              "\n"
              "Signals: SIGTERM and SIGINT finish the batch in flight, commit "
              "it, leave the\nconsumer group and exit 0. SIGHUP reloads the "
              "configuration file between two\nbatches: the whole file is "
              "validated first; a key that cannot change while\nseqgate "
              "runs (Kafka clients, topics, envelope, data_dir, guarantee) "
              "refuses it,\nnamed in the log, and seqgate runs on with the "
              "configuration it had.\n"
              "\n"
              "Exit status:\n",
              out);
        const sg_exit_status_t *x;
        for (size_t i = 0; (x = sg_exit_status(i)); i++) {
                /* sized to the row: a status's text is not cut */
                int n = snprintf(NULL, 0, "%d  %s: %s", x->status, x->name,
                                 x->doc);
                char *row = n < 0 ? NULL : malloc((size_t)n + 1);
                if (!row)
                        continue;
                snprintf(row, (size_t)n + 1, "%d  %s: %s", x->status, x->name,
                         x->doc);
                fputs("  ", out);
                print_wrapped(out, row, 5);
                free(row);
        }
}

struct opts {
        const char *config;
        const char *check_config;
        const char *data_dir;
        const char *instance_id;
        const char *bootstrap_file;
        bool embedded;
        int embedded_partitions;
        bool passthrough;
        bool accept_key_change;
        bool log_level_given; /**< --log-level: wins over log_level */
        bool cluster;         /**< --cluster (with --check-config) */
        const char *print_config;
};

enum {
        OPT_CHECK = 256,
        OPT_DATA_DIR,
        OPT_INSTANCE_ID,
        OPT_LOG_LEVEL,
        OPT_EMBEDDED,
        OPT_EMBEDDED_PARTS,
        OPT_BOOTSTRAP_FILE,
        OPT_PASSTHROUGH,
        OPT_ACCEPT_KEY_CHANGE,
        OPT_PRINT,
        OPT_CLUSTER,
};

/** Parses argv; returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, opts_t *o) {
        static const struct option longopts[] = {
                {"config", required_argument, NULL, 'c'},
                {"check-config", required_argument, NULL, OPT_CHECK},
                {"data-dir", required_argument, NULL, OPT_DATA_DIR},
                {"instance-id", required_argument, NULL, OPT_INSTANCE_ID},
                {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
                {"embedded-kafka", no_argument, NULL, OPT_EMBEDDED},
                {"embedded-partitions", required_argument, NULL,
                 OPT_EMBEDDED_PARTS},
                {"bootstrap-file", required_argument, NULL, OPT_BOOTSTRAP_FILE},
                {"passthrough", no_argument, NULL, OPT_PASSTHROUGH},
                {"accept-key-change", no_argument, NULL, OPT_ACCEPT_KEY_CHANGE},
                {"print-config", required_argument, NULL, OPT_PRINT},
                {"cluster", no_argument, NULL, OPT_CLUSTER},
                {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int c;
        char *end;

        memset(o, 0, sizeof(*o));
        o->embedded_partitions = 1;
        while ((c = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        o->config = optarg;
                        break;
                case OPT_CHECK:
                        o->check_config = optarg;
                        break;
                case OPT_DATA_DIR:
                        o->data_dir = optarg;
                        break;
                case OPT_INSTANCE_ID:
                        o->instance_id = optarg;
                        break;
                case OPT_ACCEPT_KEY_CHANGE:
                        o->accept_key_change = true;
                        break;
                case OPT_LOG_LEVEL: {
                        sg_log_level_t level;
                        if (!sg_log_level_parse(optarg, &level)) {
                                fprintf(stderr,
                                        "seqgate: --log-level: unknown level "
                                        "\"%s\"; allowed: error, warning, "
                                        "notice, info, debug\n",
                                        optarg);
                                return 2;
                        }
                        g_log_level = level;
                        o->log_level_given = true;
                        break;
                }
                case OPT_PRINT:
                        o->print_config = optarg;
                        break;
                case OPT_CLUSTER:
                        o->cluster = true;
                        break;
                case OPT_EMBEDDED:
                        o->embedded = true;
                        break;
                case OPT_EMBEDDED_PARTS:
                        errno = 0;
                        long v = strtol(optarg, &end, 10);
                        if (errno || *end || end == optarg || v < 1 ||
                            v > 1000) {
                                fprintf(stderr,
                                        "seqgate: --embedded-partitions: "
                                        "expected 1..1000\n");
                                return 2;
                        }
                        o->embedded_partitions = (int)v;
                        break;
                case OPT_BOOTSTRAP_FILE:
                        o->bootstrap_file = optarg;
                        break;
                case OPT_PASSTHROUGH:
                        o->passthrough = true;
                        break;
                case 'V': {
                        char vt[1024];
                        sg_version_text(vt, sizeof(vt));
                        fputs(vt, stdout);
                        return 0;
                }
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        return usage_error();
                }
        }
        if (optind < argc) {
                fprintf(stderr, "seqgate: unexpected argument \"%s\"\n",
                        argv[optind]);
                return 2;
        }
        if (!o->config && !o->check_config && !o->print_config) {
                fprintf(stderr, "seqgate: --config, --check-config or "
                                "--print-config FILE is needed\n");
                return usage_error();
        }
        if (o->cluster && !o->check_config) {
                fprintf(stderr, "seqgate: --cluster needs --check-config\n");
                return 2;
        }
        if (o->bootstrap_file && !o->embedded) {
                fprintf(stderr,
                        "seqgate: --bootstrap-file needs --embedded-kafka\n");
                return 2;
        }
        return -1;
}

/* ------------------------------------------------------------------ */
/* wiring                                                              */

/** Points every kafka "bootstrap.servers" entry at @p servers. */
static bool set_bootstrap(sg_config_t *conf, const char *servers) {
        bool found = false;
        for (size_t i = 0; i < conf->kafka_cnt; i++) {
                if (strcmp(conf->kafka[i].name, "bootstrap.servers"))
                        continue;
                char *v = strdup(servers);
                if (!v)
                        return false;
                free(conf->kafka[i].value);
                conf->kafka[i].value = v;
                found = true;
        }
        if (found)
                return true;
        sg_kv_t *kv = realloc(conf->kafka, (conf->kafka_cnt + 1) * sizeof(*kv));
        if (!kv)
                return false;
        conf->kafka = kv;
        kv[conf->kafka_cnt].name = strdup("bootstrap.servers");
        kv[conf->kafka_cnt].value = strdup(servers);
        kv[conf->kafka_cnt].from_env = false;
        if (!kv[conf->kafka_cnt].name || !kv[conf->kafka_cnt].value) {
                free(kv[conf->kafka_cnt].name);
                free(kv[conf->kafka_cnt].value);
                return false;
        }
        conf->kafka_cnt++;
        return true;
}

/** Writes @p text to @p path atomically (temp file + rename). */
static bool write_file(const char *path, const char *text) {
        char tmp[4096];
        if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
            (int)sizeof(tmp))
                return false;
        FILE *f = fopen(tmp, "w");
        if (!f)
                return false;
        bool ok = fprintf(f, "%s\n", text) > 0;
        ok = (fclose(f) == 0) && ok;
        if (ok && rename(tmp, path) != 0)
                ok = false;
        if (!ok)
                unlink(tmp);
        return ok;
}

/** Loads the configuration at @p path; on error prints every error as
 *  "seqgate: config error: ...", one line each (at most
 *  SG_CONFIG_ERRORS_MAX, then "and N more"), then the count line, on
 *  stderr. */
static sg_err_t load_config(const char *path, sg_config_t **confp) {
        sg_config_errors_t errs = {0};
        char es[512] = "";
        sg_err_t err = sg_config_errors(path, confp, &errs, es, sizeof(es));
        if (err && errs.total == 0)
                fprintf(stderr, "seqgate: config error: %s\n",
                        err == SG_ERR_NOMEM ? "out of memory" : es);
        for (size_t i = 0; i < errs.cnt; i++)
                fprintf(stderr, "seqgate: config error: %s\n", errs.lines[i]);
        if (errs.total > errs.cnt)
                fprintf(stderr, "seqgate: config error: and %zu more\n",
                        errs.total - errs.cnt);
        if (errs.total > 0)
                fprintf(stderr, "seqgate: %zu configuration error%s in %s\n",
                        errs.total, errs.total == 1 ? "" : "s", path);
        sg_config_errors_clear(&errs);
        return err;
}

/** The command line's overrides of @p conf: --data-dir, --instance-id
 *  (the transactional id follows it), --accept-key-change, and with
 *  --embedded-kafka the mock cluster's bootstrap.servers from @p running
 *  (NULL: none yet). false: refused or out of memory, reported on stderr
 *  into @p es (may be NULL). */
static bool apply_overrides(const opts_t *o, sg_config_t *conf,
                            const sg_config_t *running, char *es,
                            size_t es_size) {
        char ies[256] = "";
        if (o->data_dir && !o->data_dir[0]) {
                sg_errf(es, es_size, "--data-dir: must not be empty");
                return false;
        }
        if (o->data_dir) {
                char *d = strdup(o->data_dir);
                if (!d) {
                        sg_errf(es, es_size, "out of memory");
                        return false;
                }
                free(conf->data_dir);
                conf->data_dir = d;
        }
        conf->accept_key_change = o->accept_key_change;
        sg_err_t err = o->instance_id
                               ? sg_config_set_instance_id(conf, o->instance_id,
                                                           ies, sizeof(ies))
                               : SG_OK;
        if (err) {
                sg_errf(es, es_size, "--instance-id: %s",
                        err == SG_ERR_NOMEM ? "out of memory" : ies);
                return false;
        }
        const char *bs = NULL;
        for (size_t i = 0; o->embedded && running && i < running->kafka_cnt;
             i++)
                if (!strcmp(running->kafka[i].name, "bootstrap.servers"))
                        bs = running->kafka[i].value;
        if (bs && !set_bootstrap(conf, bs)) {
                sg_errf(es, es_size, "out of memory");
                return false;
        }
        return true;
}

/** run, step 1: loads the configuration into *confp with the command
 *  line's overrides. @returns 0, or the exit status (nothing to free). */
static int run_config(const opts_t *o, sg_config_t **confp) {
        sg_config_t *conf = NULL;
        char es[512] = "";
        sg_err_t err = load_config(o->config, &conf);
        if (err)
                return 2;
        if (!apply_overrides(o, conf, NULL, es, sizeof(es))) {
                fprintf(stderr, "seqgate: %s\n", es);
                sg_config_destroy(conf);
                return strstr(es, "out of memory") ? 1 : 2;
        }
        if (!o->log_level_given)
                g_log_level = sg_config_log_level(conf);
        *confp = conf;
        g_log_conf = conf;
        return 0;
}

/** A JSON array of the configuration's error lines (and "and N more"). */
static cJSON *errors_json(const sg_config_errors_t *errs, const char *es) {
        cJSON *a = cJSON_CreateArray();
        char more[64];
        for (size_t i = 0; i < errs->cnt; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(errs->lines[i]));
        if (errs->total > errs->cnt) {
                snprintf(more, sizeof(more), "and %zu more",
                         errs->total - errs->cnt);
                cJSON_AddItemToArray(a, cJSON_CreateString(more));
        }
        if (errs->total == 0 && es && *es)
                cJSON_AddItemToArray(a, cJSON_CreateString(es));
        return a;
}

/** The keys of @p d whose live is @p live, with their values where the
 *  diff shows them ({"key", "from", "to"}). */
static cJSON *changes_json(const sg_config_diff_t *d, bool live) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < d->cnt; i++) {
                const sg_config_change_t *c = &d->changes[i];
                if (c->live != live)
                        continue;
                cJSON *x = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "key", c->key);
                if (c->old_json)
                        cJSON_AddItemToObject(x, "from",
                                              cJSON_Parse(c->old_json));
                if (c->new_json)
                        cJSON_AddItemToObject(x, "to",
                                              cJSON_Parse(c->new_json));
                cJSON_AddItemToArray(a, x);
        }
        return a;
}

/**
 * sg_loop_reload_cb, SIGHUP's reload (semantics "Reloading the
 * configuration"), on the loop thread between two batches: the file is
 * loaded and validated in full, with the command line's overrides; a file
 * with errors ("config_reload_failed", each error) or a change of a key
 * that cannot change while seqgate runs ("config_reload_refused", each
 * key) changes nothing. Otherwise the running configuration takes the new
 * values, the read API held off meanwhile, and "config_reloaded" lists
 * every key that changed, from and to.
 */
static void on_reload(void *opaque) {
        app_t *app = opaque;
        const opts_t *o = app->opts;
        sg_config_t *next = NULL;
        sg_config_errors_t errs = {0};
        sg_config_diff_t d = {0};
        char es[1024] = "";
        sg_err_t err =
                sg_config_errors(o->config, &next, &errs, es, sizeof(es));
        if (!err && !apply_overrides(o, next, app->conf, es, sizeof(es)))
                err = SG_ERR_CONFIG;
        if (err) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "path", o->config);
                cJSON_AddItemToObject(f, "errors", errors_json(&errs, es));
                cJSON_AddStringToObject(f, "action",
                                        "nothing changed: seqgate runs on "
                                        "with the configuration it had");
                log_json(SG_LOG_ERR, "config_reload_failed", f);
                goto out;
        }
        sg_query_api_lock(app->api);
        err = sg_config_reload(app->conf, next, &d, es, sizeof(es));
        sg_query_api_unlock(app->api);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", o->config);
        if (err) {
                cJSON_AddItemToObject(f, "refused", changes_json(&d, false));
                cJSON_AddStringToObject(f, "detail", es);
                cJSON_AddStringToObject(f, "action",
                                        "nothing changed: seqgate runs on "
                                        "with the configuration it had; "
                                        "restart it to apply these keys");
                log_json(SG_LOG_ERR, "config_reload_refused", f);
                goto out;
        }
        cJSON_AddItemToObject(f, "changed", changes_json(&d, true));
        log_json(SG_LOG_NOTICE, "config_reloaded", f);
        if (!o->log_level_given)
                g_log_level = sg_config_log_level(app->conf);
        sg_loop_set_log_level(g_loop, (sg_log_level_t)g_log_level);
        if (app->engine) /* the reload runs on the processing thread */
                sg_engine_set_log_level(app->engine,
                                        (sg_log_level_t)g_log_level);
out:
        sg_config_diff_clear(&d);
        sg_config_errors_clear(&errs);
        sg_config_destroy(next);
}

/** run, step 2: logs "starting". */
static void run_log_starting(const opts_t *o, const sg_config_t *conf) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "version", SG_VERSION_STR);
        cJSON_AddStringToObject(f, "instance", conf->instance_id);
        cJSON_AddStringToObject(f, "group", conf->group_id);
        cJSON_AddNumberToObject(f, "topics", (double)conf->topic_cnt);
        cJSON_AddStringToObject(f, "processor",
                                o->passthrough ? "passthrough" : "engine");
        cJSON_AddStringToObject(f, "data_dir", conf->data_dir);
        cJSON_AddBoolToObject(f, "embedded_kafka", o->embedded);
        log_json(SG_LOG_INFO, "starting", f);
}

/** run, step 3a: logs store_rebuilt when sg_store_open() started the store
 *  empty: its files were removed (its machine stopped while syncs were
 *  deferred: docs/guarantees.md "Durability of the store") or, a store of an
 *  earlier format, set aside in data_dir/store-format-N-SECONDS
 *  (docs/upgrade.md "Store format 3"); the reason says which, and where a
 *  set-aside copy is. Every partition is then restored from its changelog. Then
 *  applies the guarantee's durability (semantics §6): deferred syncs, or
 * store_sync_kept with the reason they stay on. */
static void run_store_durability(const sg_config_t *conf, sg_store_t *store) {
        const char *why;
        if (sg_store_rebuilt(store, &why)) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "data_dir", conf->data_dir);
                cJSON_AddStringToObject(f, "reason", why);
                cJSON_AddStringToObject(f, "action",
                                        "started empty (the old store "
                                        "removed, or kept where the "
                                        "reason says); every partition "
                                        "is restored from its changelog");
                log_json(SG_LOG_WARNING, "store_rebuilt", f);
        }
        char es[512] = "";
        if (sg_engine_store_durability(conf, store, es, sizeof(es)))
                log_msg(SG_LOG_WARNING, "store_sync_kept", "reason", es);
}

/** run, step 3: the processor *procp — the passthrough (*ptp) or the engine
 *  (*enginep, on the store *storep); each the caller's to destroy, also on
 *  error. */
static sg_err_t run_processor(const opts_t *o, sg_config_t *conf, app_t *app,
                              sg_passthrough_t **ptp, sg_store_t **storep,
                              sg_engine_t **enginep, sg_processor_t *procp,
                              char *es, size_t es_size) {
        sg_err_t err;
        if (o->passthrough) {
                if ((err = sg_passthrough_new(conf, ptp))) {
                        sg_errf(es, es_size, "%s", sg_err2str(err));
                        return err;
                }
                sg_passthrough_processor(*ptp, procp);
                return SG_OK;
        }
        if ((err = sg_store_open(conf->data_dir, conf->map_size_bytes,
                                 conf->map_growth_bytes, storep, es, es_size)))
                return err;
        run_store_durability(conf, *storep);
        if ((err = sg_engine_new(conf, *storep, enginep, es, es_size)))
                return err;
        sg_engine_set_log(*enginep, on_log, NULL);
        /* lines on_log would drop are not built */
        sg_engine_set_log_level(*enginep, (sg_log_level_t)g_log_level);
        sg_engine_processor(*enginep, procp);
        app->engine = *enginep;
        app->store = *storep;
        if (app->api)
                sg_query_api_set_store(app->api, *storep);
        return SG_OK;
}

/** run, step 2b': the HTTP endpoint's TLS and credentials (http.h, the
 *  http block's tls_server_config, basic_auth_users, bearer_tokens and
 *  auth_excluded_paths). A file that cannot be read is a configuration
 *  error. */
static sg_err_t run_http_security(const sg_config_t *conf, sg_http_t *srv,
                                  char *es, size_t es_size) {
        sg_err_t err = SG_OK;
        if (conf->http_tls_cert_file &&
            (err = sg_http_tls_set(srv, conf->http_tls_cert_file,
                                   conf->http_tls_key_file, es, es_size)))
                return err == SG_ERR_NOMEM ? err : SG_ERR_CONFIG;
        for (size_t i = 0; !err && i < conf->http_basic_auth_user_cnt; i++)
                err = sg_http_user_add(srv, conf->http_basic_auth_users[i].name,
                                       conf->http_basic_auth_users[i].value, es,
                                       es_size);
        for (size_t i = 0; !err && i < conf->http_bearer_token_cnt; i++)
                err = sg_http_token_add(srv, conf->http_bearer_tokens[i].name,
                                        conf->http_bearer_tokens[i].value, es,
                                        es_size);
        /* NULL: the default list (the count is 0 then: config.c sets it
         * only with the array, which scan-build cannot see) */
        char **ex = conf->http_auth_excluded_paths;
        if (!err && ex && !conf->http_auth_excluded_path_cnt)
                err = sg_http_auth_exclude(srv, NULL, es, es_size); /* none */
        for (size_t i = 0; !err && ex && i < conf->http_auth_excluded_path_cnt;
             i++)
                err = sg_http_auth_exclude(srv, ex[i], es, es_size);
        return err == SG_ERR_INVALID ? SG_ERR_CONFIG : err;
}

/** run, step 2b: starts the HTTP endpoint (http.address; docs/operating.md
 *  "HTTP endpoint") into *srvp and app->pub, and logs "http_listening". Nothing
 *  when the address is off. A port that cannot be bound is a configuration
 * error (exit 2). */
static sg_err_t run_http(const sg_config_t *conf, app_t *app, sg_http_t **srvp,
                         char *es, size_t es_size) {
        sg_http_addr_t addr;
        sg_err_t err;
        if ((err = sg_http_address_parse(conf->http_address, &addr, es,
                                         es_size)))
                return err;
        if (addr.off) {
                log_msg(SG_LOG_INFO, "http_disabled", "address",
                        conf->http_address ? conf->http_address : "");
                return SG_OK;
        }
        /* /healthz: unhealthy once the loop made no turn for longer than
         * the longest wait a healthy loop has (deliveries, broker
         * retries), plus 30 s */
        int64_t stall =
                conf->delivery_timeout_ms > conf->broker_retry_timeout_ms
                        ? conf->delivery_timeout_ms
                        : conf->broker_retry_timeout_ms;
        if ((err = sg_pub_new(stall + 30000, &app->pub)) ||
            (err = sg_http_new(&addr, conf->http_read_api, srvp, es,
                               es_size)) ||
            (err = run_http_security(conf, *srvp, es, es_size)) ||
            (err = sg_pub_routes_add(app->pub, *srvp, SG_VERSION_STR, es,
                                     es_size)))
                return err;
        /* the read API (/v1/): the store is attached once it is open */
        if (conf->http_read_api &&
            ((err = sg_query_api_new(conf, &app->api, es, es_size)) ||
             (err = sg_query_api_routes_add(app->api, *srvp, es, es_size))))
                return err;
        if (sg_http_start(*srvp, es, es_size) != SG_OK) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "address", addr.text);
                cJSON_AddStringToObject(f, "error", es);
                log_json(SG_LOG_ERR, "http_listen_failed", f);
                return SG_ERR_CONFIG;
        }
        /* healthy while starting: a first, empty snapshot */
        sg_metrics_snap_t first = {.start_time_seconds = app->start_s};
        sg_pub_publish(app->pub, &first);
        char where[96];
        const char *colon = strrchr(addr.text, ':');
        snprintf(where, sizeof(where), "%.*s:%u",
                 (int)(colon ? colon - addr.text : 0), addr.text,
                 (unsigned)sg_http_port(*srvp));
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "address", where);
        cJSON_AddNumberToObject(f, "port", sg_http_port(*srvp));
        cJSON_AddBoolToObject(f, "read_api", conf->http_read_api);
        cJSON_AddBoolToObject(f, "tls", conf->http_tls_cert_file != NULL);
        cJSON_AddNumberToObject(f, "basic_auth_users",
                                (double)conf->http_basic_auth_user_cnt);
        cJSON_AddNumberToObject(f, "bearer_tokens",
                                (double)conf->http_bearer_token_cnt);
        log_json(SG_LOG_INFO, "http_listening", f);
        return SG_OK;
}

/** run, step 4 (--embedded-kafka): starts the mock cluster *mockp (the
 *  caller's to destroy, also on error) and points bootstrap.servers at
 *  it. */
static sg_err_t run_embedded(const opts_t *o, sg_config_t *conf, void **mockp,
                             char *es, size_t es_size) {
        char *bs = NULL;
        sg_err_t err;
        if ((err = sg_mock_start(conf, 1, o->embedded_partitions, mockp, &bs,
                                 es, es_size)))
                return err;
        bool ok = set_bootstrap(conf, bs);
        if (ok) {
                cJSON *mf = cJSON_CreateObject();
                cJSON_AddStringToObject(mf, "bootstrap_servers", bs);
                cJSON_AddNumberToObject(mf, "partitions",
                                        o->embedded_partitions);
                log_json(SG_LOG_INFO, "embedded_kafka_started", mf);
        }
        free(bs);
        if (!ok) {
                sg_errf(es, es_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        return SG_OK;
}

/** run, step 5 (--embedded-kafka --bootstrap-file): writes the mock
 *  cluster's bootstrap.servers to the file. */
static sg_err_t run_write_bootstrap(const opts_t *o, const sg_config_t *conf,
                                    char *es, size_t es_size) {
        const char *bs = NULL;
        for (size_t i = 0; i < conf->kafka_cnt; i++)
                if (!strcmp(conf->kafka[i].name, "bootstrap.servers"))
                        bs = conf->kafka[i].value;
        if (!bs || !write_file(o->bootstrap_file, bs)) {
                sg_errf(es, es_size, "writing %s: %s", o->bootstrap_file,
                        strerror(errno));
                return SG_ERR_IO;
        }
        log_msg(SG_LOG_INFO, "bootstrap_file_written", "path",
                o->bootstrap_file);
        return SG_OK;
}

/** run, the way out on a signal during the start-up's retries: logs
 *  "stopped" (nothing was read or committed yet). */
static void run_log_stopped_early(const char *es) {
        cJSON *sf = cJSON_CreateObject();
        cJSON_AddStringToObject(sf, "result", sg_err2str(SG_OK));
        cJSON_AddStringToObject(sf, "during", "start-up");
        cJSON_AddStringToObject(sf, "detail", es);
        log_json(SG_LOG_INFO, "stopped", sf);
}

static int run(const opts_t *o) {
        char es[1024] = "";
        sg_config_t *conf = NULL;
        sg_store_t *store = NULL;
        sg_engine_t *engine = NULL;
        sg_passthrough_t *pt = NULL;
        sg_processor_t proc;
        sg_loop_t *loop = NULL;
        void *mock = NULL;
        sg_http_t *http = NULL;
        app_t app = {.start_s = sg_clock_wall_ms() / 1000, .opts = o};
        int status, claim_fd = -1;
        sg_err_t err;

        if ((status = run_config(o, &conf)))
                return status;
        app.conf = conf;
        run_log_starting(o, conf);
        /* one process per (group.id, instance_id) on this host, held until
         * exit (instance_claim.h): a second one would fence this one, and
         * its restarts this one, forever. Before anything else is bound or
         * opened; not for the demo's private mock cluster. */
        if (!o->embedded &&
            (err = sg_instance_claim_take(conf->group_id, conf->instance_id,
                                          &claim_fd, NULL, es, sizeof(es))))
                goto fail;
        if ((err = run_http(conf, &app, &http, es, sizeof(es))))
                goto fail;

        if ((err = run_processor(o, conf, &app, &pt, &store, &engine, &proc, es,
                                 sizeof(es))))
                goto fail;
        if (o->embedded && (err = run_embedded(o, conf, &mock, es, sizeof(es))))
                goto fail;

        if ((err = sg_loop_create(conf, &proc, on_log, NULL, on_stats, &app,
                                  &loop, es, sizeof(es))))
                goto fail;
        if (app.pub)
                sg_loop_set_publish(loop, on_publish, &app);
        sg_loop_set_reload(loop, on_reload, &app);
        /* lines on_log would drop are not built */
        sg_loop_set_log_level(loop, (sg_log_level_t)g_log_level);
        /* From here a signal stops the loop, the start-up's retries too;
         * a reload asked before waits for the loop's first reload point. */
        g_loop = loop;
        if (g_stop_early)
                sg_loop_stop(loop);
        if (g_reload_asked)
                sg_loop_reload(loop);
        if ((err = sg_loop_connect(loop, es, sizeof(es)))) {
                if (g_stop_early && err != SG_ERR_CONFIG) {
                        /* asked to stop while retrying: nothing was read
                         * or committed yet */
                        g_loop = NULL;
                        run_log_stopped_early(es);
                        status = 0;
                        goto out;
                }
                goto fail;
        }

        if (o->embedded && o->bootstrap_file &&
            (err = run_write_bootstrap(o, conf, es, sizeof(es))))
                goto fail;

        log_msg(SG_LOG_INFO, "running", "group", conf->group_id);
        err = sg_loop_run(loop, es, sizeof(es));
        g_loop = NULL;
        if (err)
                goto fail;
        log_msg(SG_LOG_INFO, "stopped", "result", sg_err2str(SG_OK));
        status = 0;
        goto out;

fail : {
        g_loop = NULL;
        /* the error by its code and in words, and the exit status it
         * ends in (sg_exit_status_of: the statuses' one table) */
        const sg_exit_status_t *xc = sg_exit_status_of(err);
        cJSON *ff = cJSON_CreateObject();
        cJSON_AddStringToObject(ff, "error", sg_err2str(err));
        cJSON_AddStringToObject(ff, "error_text", sg_err_text(err));
        cJSON_AddStringToObject(ff, "detail", es);
        cJSON_AddNumberToObject(ff, "exit_status", xc->status);
        cJSON_AddStringToObject(ff, "exit_class", xc->name);
        log_json(SG_LOG_ERR, "exiting", ff);
        status = xc->status;
}
out:
        sg_http_destroy(http); /* before what its handlers read */
        sg_pub_destroy(app.pub);
        sg_query_api_destroy(app.api);
        sg_loop_destroy(loop);
        /* a clean close: what the loop's stop did not checkpoint (nothing,
         * after sg_loop_run) is committed before the engine goes */
        if (engine)
                (void)sg_engine_checkpoint(engine, NULL, 0);
        sg_engine_destroy(engine);
        sg_store_close(store);
        sg_passthrough_destroy(pt);
        sg_mock_destroy(mock);
        sg_instance_claim_release(claim_fd);
        g_log_conf = NULL;
        sg_config_destroy(conf);
        return status;
}

/** --print-config: the effective configuration of @p o->print_config,
 *  with --data-dir and --instance-id, on stdout (sg_config_print). */
static int print_config(const opts_t *o) {
        sg_config_t *conf = NULL;
        char es[512] = "";
        if (load_config(o->print_config, &conf) != SG_OK)
                return 2;
        if (!apply_overrides(o, conf, NULL, es, sizeof(es))) {
                fprintf(stderr, "seqgate: %s\n", es);
                sg_config_destroy(conf);
                return 2;
        }
        char *text = sg_config_print(conf);
        sg_config_destroy(conf);
        if (!text) {
                fprintf(stderr, "seqgate: out of memory\n");
                return 1;
        }
        fputs(text, stdout);
        free(text);
        return fflush(stdout) == 0 ? 0 : 1;
}

/** Prints every finding of @p pf, "seqgate: KIND error|warning|note: ..."
 *  one line each, on stderr. */
static void print_findings(const sg_preflight_t *pf, const char *kind) {
        static const char *const sev[] = {[SG_PF_ERROR] = "error",
                                          [SG_PF_WARNING] = "warning",
                                          [SG_PF_NOTE] = "note"};
        for (size_t i = 0; i < pf->cnt; i++)
                fprintf(stderr, "seqgate: %s %s: %s\n", kind,
                        sev[pf->items[i].sev], pf->items[i].text);
}

/* --check-config --cluster's client: the reason of its last broker error
 * ("kafka_error": "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092
 * failed: Connection refused ..."), for the message that says why no broker
 * answered. Set from the thread that polls the client (the error
 * callback), read by the same; the mutex keeps it whole regardless. */
static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_check_reason[512];

/** sg_log_cb of the check's client: keeps the last kafka_error's reason
 *  (not "all brokers are down", which follows the one that says why). */
static void on_check_log(void *opaque, sg_log_level_t level, const char *event,
                         const char *fields_json) {
        (void)opaque;
        (void)level;
        if (strcmp(event, "kafka_error") != 0)
                return;
        cJSON *f = cJSON_Parse(fields_json);
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(f, "error"));
        const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(f, "reason"));
        if (r && *r && !(e && !strcmp(e, "_ALL_BROKERS_DOWN"))) {
                pthread_mutex_lock(&g_check_mu);
                snprintf(g_check_reason, sizeof(g_check_reason), "%s", r);
                pthread_mutex_unlock(&g_check_mu);
        }
        cJSON_Delete(f);
}

/** The last broker error's reason into @p buf ("" none). */
static const char *check_reason(char *buf, size_t size) {
        pthread_mutex_lock(&g_check_mu);
        snprintf(buf, size, "%s", g_check_reason);
        pthread_mutex_unlock(&g_check_mu);
        return buf;
}

/** bootstrap.servers of @p conf as printed: "***" for a value from the
 *  environment (never shown), "(none)" when absent. */
static const char *bootstrap_text(const sg_config_t *conf) {
        for (size_t i = 0; i < conf->kafka_cnt; i++)
                if (!strcmp(conf->kafka[i].name, "bootstrap.servers"))
                        return sg_config_kv_secret(&conf->kafka[i])
                                       ? "*** (from the environment)"
                                       : conf->kafka[i].value;
        return "(none)";
}

/**
 * --check-config --cluster, step 1: reach the cluster through @p rk within
 * @p budget_ms, each attempt a metadata request of at most 2 s that
 * librdkafka's connection attempts run under. Says first what it waits for
 * and how long at most, then every 5 s that no broker answered yet and
 * why (librdkafka's reason: connection refused, a timeout, a name that does
 * not resolve). @returns true once a broker answered; false after the
 * error line naming bootstrap.servers, the wait and the last reason.
 */
static bool check_reach(const sg_config_t *conf, rd_kafka_t *rk,
                        int64_t budget_ms, const char *limit) {
        const char *bs = bootstrap_text(conf);
        int64_t start = sg_clock_mono_ms(), end = start + budget_ms;
        int64_t said = start;
        char why[512];
        fprintf(stderr,
                "seqgate: cluster: connecting to bootstrap.servers %s "
                "(waiting at most %.1f s: %s)\n",
                bs, (double)budget_ms / 1000, limit);
        for (;;) {
                int64_t now = sg_clock_mono_ms();
                int64_t t = end - now < 2000 ? end - now : 2000;
                const struct rd_kafka_metadata *md = NULL;
                rd_kafka_resp_err_t e =
                        rd_kafka_metadata(rk, 0, NULL, &md, t > 0 ? (int)t : 1);
                if (md)
                        rd_kafka_metadata_destroy(md);
                (void)rd_kafka_poll(rk, 0); /* the error callback */
                if (!e)
                        return true;
                now = sg_clock_mono_ms();
                check_reason(why, sizeof(why));
                if (now >= end) {
                        fprintf(stderr,
                                "seqgate: cluster error: no broker of "
                                "bootstrap.servers %s answered within %.1f s "
                                "(%s): %s\n",
                                bs, (double)(now - start) / 1000, limit,
                                *why ? why : rd_kafka_err2str(e));
                        return false;
                }
                if (now - said >= 5000 || said == start) {
                        fprintf(stderr,
                                "seqgate: cluster: no answer from "
                                "bootstrap.servers %s yet (%s); trying "
                                "for %.0f s more\n",
                                bs, *why ? why : rd_kafka_err2str(e),
                                (double)(end - now) / 1000);
                        said = now;
                }
        }
}

/** --check-config --cluster: the cluster preflight (sg_preflight_cluster)
 *  with a producer of @p conf, after the cluster answered (check_reach);
 *  the whole check waits at most 30 s (or broker_retry_timeout_ms, if
 *  shorter), retriable errors tried again within it. @returns the exit
 *  status: 0, 2 (a problem, or no broker answered), 1 (out of memory). */
static int check_cluster(const sg_config_t *conf, const char *path) {
        char es[512] = "";
        sg_kafka_log_t klog = {.conf = conf, .log_cb = on_check_log};
        rd_kafka_conf_t *kc = NULL;
        rd_kafka_t *rk = NULL;
        if (sg_kafka_conf_new(conf, SG_KAFKA_PRODUCER, NULL, &klog, &kc, es,
                              sizeof(es)) ||
            !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, es, sizeof(es)))) {
                if (kc && !rk)
                        rd_kafka_conf_destroy(kc);
                fprintf(stderr, "seqgate: cluster error: %s\n", es);
                return 2;
        }
        bool own = conf->broker_retry_timeout_ms < 30000;
        int64_t budget = own ? conf->broker_retry_timeout_ms : 30000;
        int64_t end = sg_clock_mono_ms() + budget, wait = 250;
        if (!check_reach(conf, rk, budget,
                         own ? "broker_retry_timeout_ms"
                             : "--cluster's limit, or broker_retry_timeout_ms "
                               "if shorter")) {
                rd_kafka_destroy(rk);
                fprintf(stderr, "seqgate: 1 cluster problem for %s\n", path);
                return 2;
        }
        sg_preflight_t pf = {0};
        for (;;) {
                if (sg_preflight_cluster(conf, rk, true, &pf)) {
                        fprintf(stderr, "seqgate: out of memory\n");
                        sg_preflight_clear(&pf);
                        rd_kafka_destroy(rk);
                        return 1;
                }
                size_t lasting = 0;
                for (size_t i = 0; i < pf.cnt; i++)
                        lasting += pf.items[i].sev == SG_PF_ERROR &&
                                   !pf.items[i].retriable;
                if (!pf.errors || lasting || !pf.retry ||
                    sg_clock_mono_ms() + wait >= end)
                        break;
                sg_preflight_clear(&pf);
                struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};
                nanosleep(&ts, NULL);
                wait = wait * 2 > 4000 ? 4000 : wait * 2;
        }
        rd_kafka_destroy(rk);
        if (!pf.retry && sg_preflight_group(conf, &pf)) {
                fprintf(stderr, "seqgate: out of memory\n");
                sg_preflight_clear(&pf);
                return 1;
        }
        print_findings(&pf, "cluster");
        int status = pf.errors ? 2 : 0;
        if (pf.errors)
                fprintf(stderr, "seqgate: %zu cluster problem%s for %s\n",
                        pf.errors, pf.errors == 1 ? "" : "s", path);
        else
                printf("cluster ok: %zu warning%s\n", pf.warnings,
                       pf.warnings == 1 ? "" : "s");
        sg_preflight_clear(&pf);
        return status;
}

/** --check-config: the file, the files its clients read, and with
 *  --cluster the cluster; every problem at once. */
static int check_config(const opts_t *o) {
        const char *path = o->check_config;
        sg_config_t *conf = NULL;
        sg_preflight_t pf = {0};
        if (load_config(path, &conf) != SG_OK)
                return 2;
        if (sg_preflight_files(conf, &pf)) {
                fprintf(stderr, "seqgate: out of memory\n");
                sg_preflight_clear(&pf);
                sg_config_destroy(conf);
                return 1;
        }
        /* the data_dir: a directory seqgate may write, or can make one
         * (nothing is created here; what sg_store_open refuses at start).
         * A permission depends on the user: an error for the one seqgate
         * runs as (ExecStartPre), a warning for another (a check by hand
         * of a file deployed elsewhere). */
        char es[4608] = "";
        int dir_errno = 0;
        bool dir_bad = sg_store_dir_check(conf->data_dir, &dir_errno, es,
                                          sizeof(es)) != SG_OK;
        bool dir_perm = dir_errno == EACCES || dir_errno == EPERM;
        if (dir_bad && dir_perm)
                fprintf(stderr,
                        "seqgate: config warning: %s: seqgate running as "
                        "this user (uid %u) exits 2 at start\n",
                        es, (unsigned)geteuid());
        /* what a running seqgate holds: the data_dir's lock and the HTTP
         * port, each probed and let go (the start refuses both, exit 2) */
        char lock_es[4608] = "", port_es[512] = "";
        bool locked = !dir_bad && sg_store_lock_probe(conf->data_dir, lock_es,
                                                      sizeof(lock_es)) != SG_OK;
        sg_http_addr_t ha;
        bool port_bad = false, port_perm = false;
        if (sg_http_address_parse(conf->http_address, &ha, port_es,
                                  sizeof(port_es)) == SG_OK &&
            sg_http_address_probe(&ha, port_es, sizeof(port_es)) != SG_OK) {
                port_bad = true;
                /* what depends on where and as whom the check runs (a
                 * file checked for another host, a pod's address) is a
                 * warning, as for the data_dir */
                port_perm = errno == EACCES || errno == EPERM ||
                            errno == EADDRNOTAVAIL;
        }
        if (port_bad && port_perm)
                fprintf(stderr,
                        "seqgate: config warning: %s: seqgate running as "
                        "this user (uid %u) on this host exits 2 at start\n",
                        port_es, (unsigned)geteuid());
        /* A seqgate running on this data_dir (locked) is the common case
         * of a check before a reload or a restart (as `nginx -t` beside a
         * running nginx): the file is fine for it, and the port and the
         * host's (group.id, instance_id) claim are most likely its own.
         * All are warnings then; held while no seqgate holds the
         * data_dir, they are another process's: errors (its start would
         * exit 2). */
        char claim_es[1024] = "";
        bool claimed = sg_instance_claim_probe(
                               conf->group_id, conf->instance_id, NULL,
                               claim_es, sizeof(claim_es)) == SG_ERR_CONFIG;
        bool claim_own = claimed && locked;
        if (claim_own)
                fprintf(stderr,
                        "seqgate: config warning: %s (the seqgate holding "
                        "the data_dir, most likely)\n",
                        claim_es);
        if (locked) {
                fprintf(stderr,
                        "seqgate: config warning: %s; a start beside it "
                        "exits 2 (stop it first, or check a file for its "
                        "next start)\n",
                        lock_es);
                if (port_bad && !port_perm)
                        fprintf(stderr,
                                "seqgate: config warning: %s (the "
                                "seqgate holding the data_dir, most "
                                "likely)\n",
                                port_es);
        }
        size_t errors = pf.errors + (dir_bad && !dir_perm) +
                        (port_bad && !port_perm && !locked) +
                        (claimed && !claim_own);
        if (errors) {
                if (claimed && !claim_own)
                        fprintf(stderr, "seqgate: config error: %s\n",
                                claim_es);
                if (dir_bad && !dir_perm)
                        fprintf(stderr, "seqgate: config error: %s\n", es);
                if (port_bad && !port_perm && !locked)
                        fprintf(stderr, "seqgate: config error: %s\n", port_es);
                print_findings(&pf, "config");
                fprintf(stderr, "seqgate: %zu configuration error%s in %s\n",
                        errors, errors == 1 ? "" : "s", path);
                sg_preflight_clear(&pf);
                sg_config_destroy(conf);
                return 2;
        }
        sg_preflight_clear(&pf);
        printf("config ok: %zu topic(s)\n", conf->topic_cnt);
        fflush(stdout);
        int status = o->cluster ? check_cluster(conf, path) : 0;
        sg_config_destroy(conf);
        return status;
}

int main(int argc, char **argv) {
        opts_t o;
        int status = parse_args(argc, argv, &o);
        if (status >= 0)
                return status;
        if (o.check_config)
                return check_config(&o);
        if (o.print_config)
                return print_config(&o);
        install_signals();
        return run(&o);
}
