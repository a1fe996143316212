/*
 * seqgatectl — the operator CLI of seqgate (semantics §7 "What operators
 * watch", §3 "Replay", §4 quarantine).
 *
 *   inspect     one aggregate of an input partition, read from the daemon's
 *               LMDB store: last applied version, state, flags, parked
 *               events, snapshot request, and the partition's meta; without
 *               --aggregate, the aggregates that need attention
 *               (quarantined, refetching or with parked events).
 *   lookup      what happened to event X (the result query, semantics §7):
 *               applied, parked, dead-lettered (why), dropped or unknown.
 *   partitions  every partition the store holds, with its meta, and the
 *               store's map size and bytes in use.
 *   replay      the DLQ replay tool: reads a DLQ topic up to its end offsets,
 *               selects records by reason / aggregate, and produces each back
 *               to its original topic and partition with the original key,
 *               value, timestamp and headers, minus every __seqgate.errors.*
 *               header, plus __seqgate.replay: <dlq>/<partition>/<offset>,
 *               so the daemon judges it again from row 4 (semantics §3).
 *   audit       reads a topic (group-less, nothing committed or produced)
 *               through the engine over a temporary store and reports its
 *               duplicates, conflicts, gaps and disorder (audit.h).
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

#include "cli.h"

#include "seqgate.h"

#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <string.h>

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
        if (!strcmp(cmd, "lookup"))
                return cmd_lookup(argc - 1, argv + 1);
        if (!strcmp(cmd, "simulate"))
                return cmd_simulate(argc - 1, argv + 1);
        if (!strcmp(cmd, "dlq"))
                return cmd_dlq(argc - 1, argv + 1);
        if (!strcmp(cmd, "sizing"))
                return cmd_sizing(argc - 1, argv + 1);
        if (!strcmp(cmd, "audit"))
                return cmd_audit(argc - 1, argv + 1);
        return usage_error("unknown command '%s'", cmd);
}
