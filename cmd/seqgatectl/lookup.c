/*
 * lookup.c — seqgatectl lookup: what happened to event X? (semantics §7,
 * the result query; lib/query.h). Reads the daemon's store read-only and
 * prints the event's answer: applied, parked, dead_lettered, dropped or
 * unknown. Exit status: 0 the event is known, 1 unknown (never seen, or
 * past its dedup TTL), 2 usage, configuration or store error.
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
        "  -i, --id I             the event's id\n";

int cmd_lookup(int argc, char **argv) {
        static const struct option opts[] = {
                {"topic", required_argument, NULL, 't'},
                {"source", required_argument, NULL, 's'},
                {"id", required_argument, NULL, 'i'},
                {NULL, 0, NULL, 0}};
        /* grep's convention: 1 is an answer (unknown), so an error is 2 */
        cli_common_t cc = {.help = lookup_help,
                           .uses = CLI_USES_STORE,
                           .exit_status = "Exit status: 0 known, 1 unknown, 2 "
                                          "usage, configuration or store "
                                          "error.\n"};
        const char *topic = NULL, *id = NULL;
        const char *scope[MAX_SCOPE];
        size_t scope_cnt = 0;
        int c;
        while ((c = cli_getopt(&cc, argc, argv, "t:s:i:", opts)) >= 0) {
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
                }
        }
        if (c == CLI_STOP)
                return cc.rc;
        bool json = cc.json;
        if (!cc.config || !id)
                return usage_error("--config and --id are required");

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
        sg_txn_abort(txn); /* the query reads in its own transaction */
        char es[512];
        cJSON *ans = NULL;
        sg_err_t err =
                sg_query_event(store, conf, topic, scope, scope_cnt, id, NULL,
                               sg_clock_wall_ms(), &ans, es, sizeof(es));
        if (err == SG_ERR_INVALID) {
                rc = usage_error("%s", es);
        } else if (err) {
                errf("lookup: %s (%s)", es, sg_err2str(err));
                rc = EXIT_USAGE;
        } else {
                if (json)
                        print_json_line(ans);
                else
                        print_human(ans, 0, false);
                const cJSON *st = cJSON_GetObjectItem(ans, "status");
                rc = cJSON_IsString(st) && !strcmp(st->valuestring, "unknown")
                             ? 1
                             : 0;
        }
        cJSON_Delete(ans);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}
