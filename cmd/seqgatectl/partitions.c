/*
 * partitions.c — seqgatectl partitions: every partition the store holds,
 * with its meta, and the store's map size and bytes in use (semantics §7).
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

/* ------------------------------------------------------------------ */
/* partitions                                                          */

typedef struct part_list {
        bool json;
        size_t count;
} part_list_t;

static int partitions_visit(void *opaque, const char *topic, int32_t partition,
                            const sg_meta_rec_t *m) {
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

static const char partitions_help[] =
        "usage: seqgatectl partitions --config FILE [--data-dir DIR] "
        "[--json]\n"
        "\n"
        "Every partition in the store with its meta; the store's map size "
        "and\n"
        "bytes in use (read-only; safe while seqgate runs).\n";

int cmd_partitions(int argc, char **argv) {
        cli_common_t cc = {.help = partitions_help, .uses = CLI_USES_STORE};
        int c = cli_getopt(&cc, argc, argv, "", NULL);
        if (c == CLI_STOP)
                return cc.rc;
        if (c != CLI_END)
                return usage_error("invalid option");
        bool json = cc.json;
        sg_config_t *conf = NULL;
        int rc = cli_config_load(&cc, &conf);
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
                /* whether the CLOCK column still moves (docs/
                 * troubleshooting.md "Is the answer current?") */
                long pid = 0;
                sg_store_writer_t wr = sg_store_writer(conf->data_dir, &pid);
                const char *wname = wr == SG_STORE_WRITER_RUNNING ? "running"
                                    : wr == SG_STORE_WRITER_NONE ? "not_running"
                                                                 : "unknown";
                if (wr == SG_STORE_WRITER_NONE)
                        warnf("the store in %s is not being written: no "
                              "process holds %s/seqgate.lock (seqgate is not "
                              "running on this data_dir); each partition is "
                              "as of its CLOCK",
                              conf->data_dir, conf->data_dir);
                if (json) {
                        cJSON *o = cJSON_CreateObject();
                        cJSON_AddStringToObject(o, "kind", "store");
                        cJSON_AddStringToObject(o, "data_dir", conf->data_dir);
                        j_u64(o, "map_size_bytes", map_size);
                        j_u64(o, "used_bytes", used);
                        j_u64(o, "partitions", pl.count);
                        cJSON_AddStringToObject(o, "writer", wname);
                        if (wr == SG_STORE_WRITER_RUNNING && pid > 0)
                                j_i64(o, "writer_pid", pid);
                        else
                                cJSON_AddNullToObject(o, "writer_pid");
                        print_json_line(o);
                        cJSON_Delete(o);
                } else {
                        printf("\nstore %s: %zu partition(s), %" PRIu64
                               " of %" PRIu64 " bytes used (%.1f%%)\n",
                               conf->data_dir, pl.count, used, map_size,
                               map_size
                                       ? 100.0 * (double)used / (double)map_size
                                       : 0.0);
                        if (wr == SG_STORE_WRITER_RUNNING)
                                printf("writer: running (pid %ld holds its "
                                       "lock); CLOCK is each partition's last "
                                       "write\n",
                                       pid);
                        else if (wr == SG_STORE_WRITER_NONE)
                                printf("writer: not running (no process holds "
                                       "its lock): the store is not being "
                                       "written\n");
                        else
                                printf("writer: unknown (/proc/locks "
                                       "unreadable)\n");
                }
        }
        sg_txn_abort(txn);
        sg_store_close(store);
        sg_config_destroy(conf);
        return rc;
}
