/*
 * lookup.c — seqgatectl lookup: what happened to event X? (semantics §7,
 * the result query; lib/query.h). Reads the daemon's store read-only and
 * prints the event's answer: applied, parked, dead_lettered, dropped or
 * unknown, with how current the store is (freshness.c). Exit status: 0
 * the event is known, 1 unknown (never seen, or past its dedup TTL) in a
 * current store, 2 usage, configuration or store error, 3 unknown in a
 * store that is not current (no process writes it, or a partition of the
 * topic was not written within --max-age-ms): not in this store, which
 * does not mean never seen.
 */
#include "cli.h"

#include "config.h"
#include "query.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_SCOPE 16 /* --source values: the scope parts, in order */

static const char lookup_help[] =
        "usage: seqgatectl lookup --config FILE [--data-dir DIR] [--topic T]\n"
        "                         [--source S [--source S2 ...]] --id I "
        "[--json]\n"
        "\n"
        "What happened to event I (the result query, semantics §7): "
        "applied,\n"
        "parked (waiting for which version, until when), dead_lettered "
        "(why),\n"
        "dropped, or unknown (never seen, or past its dedup TTL), from the "
        "store\n"
        "(read-only; safe while seqgate runs). Every partition of T is "
        "searched.\n"
        "\n"
        "  -t, --topic T          the input topic (default: the config's "
        "one input\n"
        "                         topic)\n"
        "  -s, --source S         a part of the idempotency scope (the "
        "CloudEvents\n"
        "                         source by default); one per configured "
        "scope\n"
        "                         part, in order; none for an empty scope\n"
        "  -i, --id I             the event's id\n"
        "  -m, --max-age-ms MS    a partition not written for longer "
        "than MS\n"
        "                         (default 300000) makes the answer not "
        "current:\n"
        "                         a warning, and exit 3 for unknown\n"
        "\n"
        "The answer says how current the store is (\"store\": whether a "
        "seqgate\n"
        "process writes it, each partition's last write); one from a store "
        "no\n"
        "process writes, or from a partition written longer ago than "
        "MS, is not\n"
        "current (a partition that moved to another instance keeps its "
        "last\n"
        "state here): a warning, and \"unknown\" exits 3, not 1.\n";

int cmd_lookup(int argc, char **argv) {
        static const struct option opts[] = {
                {"topic", required_argument, NULL, 't'},
                {"source", required_argument, NULL, 's'},
                {"id", required_argument, NULL, 'i'},
                {"max-age-ms", required_argument, NULL, 'm'},
                {NULL, 0, NULL, 0}};
        /* grep's convention: 1 is an answer (unknown), so an error is 2 */
        cli_common_t cc = {.help = lookup_help,
                           .uses = CLI_USES_STORE,
                           .exit_status = "Exit status: 0 known, 1 unknown, 2 "
                                          "usage, configuration or store "
                                          "error, 3 unknown in a store that "
                                          "is not current.\n"};
        const char *topic = NULL, *id = NULL;
        const char *scope[MAX_SCOPE];
        size_t scope_cnt = 0;
        int64_t max_age = FRESH_MAX_AGE_MS;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:s:i:m:", opts)) >= 0) {
                switch (c) {
                case 't':
                        topic = optarg;
                        break;
                case 's':
                        if (scope_cnt == MAX_SCOPE)
                                return usage_error("--source: at most %d "
                                                   "scope parts",
                                                   MAX_SCOPE);
                        scope[scope_cnt++] = optarg;
                        break;
                case 'i':
                        id = optarg;
                        break;
                case 'm':
                        if (max_age_arg(optarg, &max_age))
                                return EXIT_USAGE;
                        break;
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        bool json = cc.json;
        if (!cc.config || !id)
                return usage_error(!cc.config ? "--config FILE is required"
                                              : "--id I is required");

        sg_config_t *conf = NULL;
        int rc = cli_config_load(&cc, &conf);
        if (rc)
                return rc;
        if ((rc = default_topic(conf, &topic))) {
                sg_config_destroy(conf);
                return rc;
        }
        choices_print();
        sg_store_t *store = NULL;
        sg_txn_t *txn = NULL;
        if (open_store(conf, &store, &txn)) {
                sg_config_destroy(conf);
                return EXIT_USAGE;
        }
        char es[512];
        cJSON *ans = NULL;
        int64_t now = sg_clock_wall_ms();
        sg_err_t err = sg_query_event(store, conf, topic, scope, scope_cnt, id,
                                      NULL, now, &ans, es, sizeof(es));
        if (err == SG_ERR_INVALID) {
                rc = usage_error("%s", es);
        } else if (err) {
                errf("lookup: %s (%s)", es, sg_err2str(err));
                rc = EXIT_USAGE;
        } else {
                /* how current: the partition of the answer, or for
                 * "unknown" every partition searched (the query's own
                 * transaction began after this one: its meta is as new) */
                const cJSON *st = cJSON_GetObjectItem(ans, "status");
                const cJSON *pn = cJSON_GetObjectItem(ans, "partition");
                bool unknown = cJSON_IsString(st) &&
                               !strcmp(st->valuestring, "unknown");
                int64_t part = -1; /* an exact integer: raw JSON text */
                if (!unknown &&
                    !(cJSON_IsRaw(pn) &&
                      parse_i64(pn->valuestring, 0, INT32_MAX, &part)))
                        part = -1;
                bool current = store_freshness(conf->data_dir, txn, topic, part,
                                               now, max_age, ans);
                if (unknown && !current)
                        cJSON_ReplaceItemInObject(
                                ans, "detail",
                                cJSON_CreateString(
                                        "not in this store, which is not "
                                        "current (store.warning says why): "
                                        "an event that arrived after its "
                                        "last write is not in it, so this "
                                        "does not mean never seen"));
                if (json)
                        print_json_line(ans);
                else
                        print_human(ans, 0, false);
                rc = !unknown ? 0 : current ? 1 : EXIT_NOT_CURRENT;
        }
        sg_txn_abort(txn);
        cJSON_Delete(ans);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}
