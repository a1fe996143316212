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
 * last committed batch and never blocks the running daemon (--data-dir
 * names another store). Kafka properties come from the config's "kafka"
 * and "kafka_producer" blocks, verbatim, as the daemon uses them, and
 * -X NAME=VALUE on top (cli.h cli_getopt: the options every command
 * shares).
 *
 * Output: human-readable by default; with --json one JSON object per line.
 * Errors go to stderr. Exit status: 0 ok, 1 runtime error (store, Kafka,
 * undelivered records), 2 usage or configuration error; lookup's own
 * statuses are in lookup.c (1 unknown, 3 unknown in a store not current).
 */

#include "cli.h"

#include "seqgate.h"

#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <string.h>

/* The subcommands: one line each. */
static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
} commands[] = {
        {"inspect", cmd_inspect}, {"partitions", cmd_partitions},
        {"replay", cmd_replay},   {"release", cmd_release},
        {"lookup", cmd_lookup},   {"simulate", cmd_simulate},
        {"dlq", cmd_dlq},         {"sizing", cmd_sizing},
        {"audit", cmd_audit},
};

int main(int argc, char **argv) {
        if (argc < 2)
                return usage_error("a command is required");
        const char *cmd = argv[1];
        if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") ||
            !strcmp(cmd, "help")) {
                fputs(usage_text, stdout);
                return 0;
        }
        if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version") ||
            !strcmp(cmd, "version")) {
                char v[1024];
                sg_version_text(v, sizeof(v));
                fputs(v, stdout);
                return 0;
        }
        /* getopt_long sees the command as argv[0]. */
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(cmd, commands[i].name))
                        return commands[i].run(argc - 1, argv + 1);
        return usage_error("unknown command '%s'", cmd);
}
