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

int cmd_lookup(int argc, char **argv) {
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"topic", required_argument, NULL, 't'},
                {"source", required_argument, NULL, 's'},
                {"id", required_argument, NULL, 'i'},
                {"json", no_argument, NULL, 'j'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0}};
        const char *config = NULL, *topic = NULL, *id = NULL;
        const char *scope[MAX_SCOPE];
        size_t scope_cnt = 0;
        bool json = false;
        int c;
        while ((c = getopt_long(argc, argv, "c:t:s:i:jh", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
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
                case 'j':
                        json = true;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        return usage_error("lookup: invalid option");
                }
        }
        if (optind < argc)
                return usage_error("lookup: unexpected argument '%s'",
                                   argv[optind]);
        if (!config || !id)
                return usage_error("lookup needs --config and --id");

        sg_config_t *conf = NULL;
        int rc = load_config(config, &conf);
        if (rc)
                return rc;
        if ((rc = default_topic(conf, &topic))) {
                sg_config_destroy(conf);
                return rc;
        }
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
                rc = usage_error("lookup: %s", es);
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
