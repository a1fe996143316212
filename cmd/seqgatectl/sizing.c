/*
 * sizing.c — seqgatectl sizing: the store's size for a traffic, the seed's
 * estimate (semantics §8) with bytes per record measured from a real store
 * (sg_store_db_stats: LMDB pages per entry) when it holds records, else
 * the documented estimates (sizing_calc.h), each term printed.
 */
#include "cli.h"
#include "sizing_calc.h"

#include "config.h"
#include "processor.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char sizing_help[] =
        "usage: seqgatectl sizing --config FILE [--data-dir DIR] "
        "--events-per-day N\n"
        "                         [--aggregates A] [--json]\n"
        "\n"
        "Estimate the store and its changelog (semantics §8), term by term: "
        "N x\n"
        "bytes per dedup record x dedup.ttl_ms in days, plus A x bytes per\n"
        "aggregate record, plus the compacted changelog (one record per "
        "live\n"
        "key). Bytes per record are measured from the store (read-only) "
        "when it\n"
        "holds records, else the documented estimates (labelled ESTIMATE);\n"
        "the basis is printed, with a warning when fewer than 1000 records "
        "of a\n"
        "kind were measured.\n"
        "\n"
        "  -e, --events-per-day N the events a day (required)\n"
        "  -a, --aggregates A     the number of aggregates (default: the "
        "store's\n"
        "                         count)\n";

/* Bytes as "140.00 GB" (10^9, as the seed counts). */
static const char *human(double b, char *buf, size_t size) {
        const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
        int i = 0;
        while (b >= 1000.0 && i < 5) {
                b /= 1000.0;
                i++;
        }
        snprintf(buf, size, i ? "%.2f %s" : "%.0f %s", b, u[i]);
        return buf;
}

static void j_num(cJSON *o, const char *name, double v) {
        cJSON_AddNumberToObject(o, name, v);
}

/* The estimate's basis as text, and a warning ("" none) when a kind has
 * records, but fewer than SG_SIZING_MIN_SAMPLE: its bytes per record are
 * then the documented estimate, and what those records measured (the
 * total @p sampled_total) is said beside it, never as the headline. */
static void sizing_basis(const char *dir, bool have_store,
                         const sg_sizing_rates_t *r, double sampled_total,
                         char *basis, size_t bsize, char *warn, size_t wsize) {
        char b1[32];
        warn[0] = '\0';
        bool few_d = r->dedup_sampled_bytes > 0;
        bool few_a = r->agg_sampled_bytes > 0;
        if (!have_store ||
            (!r->dedup_measured && !r->agg_measured && !few_d && !few_a)) {
                snprintf(basis, bsize,
                         "the documented estimates (no record in the store "
                         "at %s)",
                         dir);
                return;
        }
        if (r->dedup_measured || r->agg_measured)
                snprintf(basis, bsize,
                         "bytes per record measured in %s from %" PRIu64
                         " dedup records and %" PRIu64 " aggregates%s",
                         dir, r->dedup_entries, r->agg_entries,
                         few_d || few_a ? " (a kind with too few: the "
                                          "documented estimate)"
                                        : "");
        else
                snprintf(basis, bsize,
                         "the documented estimates: %" PRIu64
                         " dedup records and %" PRIu64 " aggregates in %s "
                         "are too few to measure",
                         r->dedup_entries, r->agg_entries, dir);
        if (!few_d && !few_a)
                return;
        char nd[48] = "", na[48] = "";
        if (few_d)
                snprintf(nd, sizeof(nd), "%" PRIu64 " dedup records",
                         r->dedup_entries);
        if (few_a)
                snprintf(na, sizeof(na), "%" PRIu64 " aggregates",
                         r->agg_entries);
        snprintf(warn, wsize,
                 "only %s%s%s, fewer than %d: the documented estimate "
                 "stands in for their bytes per record; measured from "
                 "them the total would be %s, overstated (every "
                 "database's own pages outweigh so few records), not an "
                 "estimate; measure a store that ran real traffic",
                 nd, few_d && few_a ? " and " : "", na, SG_SIZING_MIN_SAMPLE,
                 human(sampled_total, b1, sizeof(b1)));
}

/* A measured-from-too-few figure for JSON: the number, or null. */
static void j_sampled(cJSON *o, const char *name, double v) {
        if (v > 0)
                cJSON_AddNumberToObject(o, name, v);
        else
                cJSON_AddNullToObject(o, name);
}

/* The per-record label of a kind: measured, or why it is the estimate. */
static const char *rate_label(bool measured, double sampled, uint64_t n,
                              const char *how, char *b, size_t size) {
        if (measured)
                snprintf(b, size, "measured: %s", how);
        else if (sampled > 0)
                snprintf(b, size,
                         "ESTIMATE: %" PRIu64 " in the store, too few to "
                         "measure; they measure %.0f B",
                         n, sampled);
        else
                snprintf(b, size, "ESTIMATE");
        return b;
}

static void print_sizing(const char *dir, bool have_store,
                         const sg_sizing_rates_t *r, uint64_t epd,
                         int64_t ttl_ms, uint64_t aggs, bool aggs_given,
                         const sg_sizing_t *z, double sampled_total,
                         bool json) {
        char basis[512], warn[600];
        sizing_basis(dir, have_store, r, sampled_total, basis, sizeof(basis),
                     warn, sizeof(warn));
        if (json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "kind", "sizing");
                cJSON_AddStringToObject(o, "data_dir", dir);
                cJSON_AddBoolToObject(o, "store", have_store);
                j_u64(o, "events_per_day", epd);
                j_i64(o, "dedup_ttl_ms", ttl_ms);
                j_num(o, "ttl_days", z->ttl_days);
                cJSON *d = cJSON_AddObjectToObject(o, "dedup");
                j_num(d, "records", z->dedup_records);
                j_num(d, "bytes_per_record", r->dedup_bytes);
                cJSON_AddBoolToObject(d, "measured", r->dedup_measured);
                j_sampled(d, "measured_bytes_per_record",
                          r->dedup_sampled_bytes);
                j_u64(d, "store_entries", r->dedup_entries);
                j_num(d, "bytes", z->dedup_total);
                cJSON *a = cJSON_AddObjectToObject(o, "aggregates");
                j_u64(a, "records", aggs);
                cJSON_AddStringToObject(a, "records_from",
                                        aggs_given ? "option" : "store");
                j_num(a, "bytes_per_record", r->agg_bytes);
                cJSON_AddBoolToObject(a, "measured", r->agg_measured);
                j_sampled(a, "measured_bytes_per_record", r->agg_sampled_bytes);
                j_num(a, "bytes", z->agg_total);
                cJSON *c = cJSON_AddObjectToObject(o, "changelog");
                j_num(c, "records", z->changelog_records);
                j_num(c, "bytes_per_dedup_record", r->dedup_log_bytes);
                j_num(c, "bytes_per_aggregate_record", r->agg_log_bytes);
                j_num(c, "bytes", z->changelog_total);
                j_num(o, "total_bytes", z->total);
                j_num(o, "peak_total_bytes", z->peak_total);
                /* what too few records measure: beside, never the total */
                j_sampled(o, "measured_total_bytes",
                          warn[0] ? sampled_total : 0);
                cJSON_AddStringToObject(o, "basis", basis);
                cJSON_AddBoolToObject(o, "enough", !warn[0]);
                if (warn[0])
                        cJSON_AddStringToObject(o, "warning", warn);
                else
                        cJSON_AddNullToObject(o, "warning");
                print_json_line(o);
                cJSON_Delete(o);
                return;
        }
        char b1[32], b2[32], key[64], lab[128];
        if (!have_store)
                printf("store: none in %s: every size below is the documented "
                       "estimate\n",
                       dir);
        else if (!r->dedup_measured && !r->agg_measured && !r->dedup_entries &&
                 !r->agg_entries)
                printf("store: %s is empty: every size below is the "
                       "documented estimate\n",
                       dir);
        else if (!r->dedup_measured && !r->agg_measured)
                printf("store: %s (%" PRIu64 " dedup records, %" PRIu64
                       " aggregates: too few to measure, every size below "
                       "is the documented estimate)\n",
                       dir, r->dedup_entries, r->agg_entries);
        else
                printf("store: %s (%" PRIu64 " dedup records, %" PRIu64
                       " aggregates measured)\n",
                       dir, r->dedup_entries, r->agg_entries);
        printf("dedup:      %" PRIu64 " events/day x %.2f days "
               "(%s %" PRId64 ") x %.0f B per record (%s) = %s\n",
               epd, z->ttl_days,
               sg_config_topic_key(offsetof(sg_topic_config_t, dedup_ttl_ms),
                                   key, sizeof(key)),
               ttl_ms, r->dedup_bytes,
               rate_label(r->dedup_measured, r->dedup_sampled_bytes,
                          r->dedup_entries, "segment + filter pages / keys",
                          lab, sizeof(lab)),
               human(z->dedup_total, b1, sizeof(b1)));
        printf("aggregates: %" PRIu64 " aggregates (%s) x %.0f B per record "
               "(%s) = %s\n",
               aggs, aggs_given ? "--aggregates" : "the store's count",
               r->agg_bytes,
               rate_label(r->agg_measured, r->agg_sampled_bytes, r->agg_entries,
                          "agg pages / entries", lab, sizeof(lab)),
               human(z->agg_total, b1, sizeof(b1)));
        printf("changelog:  %.0f live keys (compacted: one record per live "
               "key): %.0f x %.0f B + %" PRIu64 " x %.0f B = %s\n",
               z->changelog_records, z->dedup_records, r->dedup_log_bytes, aggs,
               r->agg_log_bytes, human(z->changelog_total, b2, sizeof(b2)));
        printf("total:      %s (%.0f bytes; before replicas)\n",
               human(z->total, b1, sizeof(b1)), z->total);
        printf("peak:       %s, just before a dedup bucket ends (its expired "
               "keys stay up\n            to TTL / %d after their expiry)\n",
               human(z->peak_total, b1, sizeof(b1)), SG_DEDUP_BUCKETS);
        printf("basis:      %s\n", basis);
        if (warn[0])
                printf("warning:    %s\n", warn);
}

int cmd_sizing(int argc, char **argv) {
        static const struct option opts[] = {
                {"events-per-day", required_argument, NULL, 'e'},
                {"aggregates", required_argument, NULL, 'a'},
                {NULL, 0, NULL, 0}};
        cli_common_t cc = {.help = sizing_help, .uses = CLI_USES_STORE};
        int64_t epd = -1, aggs = -1;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "e:a:", opts)) >= 0) {
                switch (c) {
                case 'e':
                        if (!parse_i64(optarg, 0, INT64_MAX, &epd))
                                return usage_error("--events-per-day: '%s' is "
                                                   "not a number",
                                                   optarg);
                        break;
                case 'a':
                        if (!parse_i64(optarg, 0, INT64_MAX, &aggs))
                                return usage_error("--aggregates: '%s' is not "
                                                   "a number",
                                                   optarg);
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        bool json = cc.json;
        if (!cc.config)
                return usage_error("--config FILE is required");
        if (epd < 0)
                return usage_error("--events-per-day N is required");
        sg_config_t *conf = NULL;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        const char *dir = conf->data_dir;
        /* the longest TTL of the config's topics: what the store keeps */
        int64_t ttl = 0;
        for (size_t i = 0; i < conf->topic_cnt; i++)
                if (conf->topics[i].dedup_ttl_ms > ttl)
                        ttl = conf->topics[i].dedup_ttl_ms;
        sg_store_t *store = NULL;
        sg_txn_t *txn = NULL;
        sg_db_stat_t st[SG_STORE_DB_CNT];
        char es[512];
        bool have = false;
        sg_err_t err = sg_store_open_readonly(dir, &store, es, sizeof(es));
        bool opened = err == SG_OK;
        if (opened) {
                err = sg_txn_begin(store, false, &txn, es, sizeof(es));
                if (!err)
                        err = sg_store_db_stats(txn, st, es, sizeof(es));
                sg_txn_abort(txn);
                sg_store_close(store);
                have = err == SG_OK;
        }
        if (err && err != SG_ERR_NOT_FOUND) {
                /* the open's reason names the directory, and for a store
                 * it does not read, what it is and what to do */
                if (opened)
                        errf("store %s: %s", dir, es);
                else
                        errf("%s; sizing without a store prints the "
                             "estimates: --data-dir a directory without one",
                             es);
                sg_config_destroy(conf);
                return EXIT_RUNTIME;
        }
        sg_sizing_rates_t r;
        sg_sizing_rates_measure(
                have ? st : NULL,
                (double)sg_record_wire_size(0, 0, NULL, 0, NULL, 0), &r);
        uint64_t na = aggs >= 0 ? (uint64_t)aggs : r.agg_entries;
        sg_sizing_t z, sampled;
        sg_sizing_compute(&r, (uint64_t)epd, ttl, na, &z);
        /* what a kind's too few records measure, said beside the
         * estimate that stands in for them (never the headline) */
        sg_sizing_rates_t sr = r;
        if (sr.dedup_sampled_bytes > 0)
                sr.dedup_bytes = sr.dedup_sampled_bytes;
        if (sr.agg_sampled_bytes > 0) {
                sr.agg_bytes = sr.agg_sampled_bytes;
                sr.agg_log_bytes =
                        sr.agg_bytes + (r.agg_log_bytes - r.agg_bytes);
        }
        sg_sizing_compute(&sr, (uint64_t)epd, ttl, na, &sampled);
        print_sizing(dir, have, &r, (uint64_t)epd, ttl, na, aggs >= 0, &z,
                     sampled.total, json);
        sg_config_destroy(conf);
        return 0;
}
