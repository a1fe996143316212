/*
 * cli.h — what seqgatectl's subcommands share: messages and the usage
 * text, option value parsing, JSON output, the config and the read-only
 * store, and the librdkafka client configuration.
 *
 * Single-threaded: seqgatectl runs one subcommand on the main thread
 * (librdkafka's callbacks run there too, from its poll/flush calls).
 * Nothing here exits: each function reports and returns, the subcommand
 * returns an exit status (0, EXIT_RUNTIME or EXIT_USAGE) to main().
 */
#ifndef SEQGATECTL_CLI_H
#define SEQGATECTL_CLI_H

#include "config.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status: runtime error (store, Kafka, undelivered records). */
#define EXIT_RUNTIME 1
/* Exit status: usage or configuration error. */
#define EXIT_USAGE 2
/* lookup: unknown in a store that is not current (store_freshness) */
#define EXIT_NOT_CURRENT 3

/* The text of "seqgatectl --help": the commands and the common options. */
extern const char usage_text[];

/* The level of the messages seqgatectl prints and of librdkafka's log
 * lines it shows (--log-level; default SG_LOG_WARNING): a line is printed
 * when its level is this or worse. Errors are always printed. */
extern sg_log_level_t cli_log_level;

/* Prints "seqgatectl: <message>\n" to stderr (an error: always). */
void errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "seqgatectl: warning: <message>\n" to stderr unless --log-level
 * is error. */
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error, as GNU tools print it: "seqgatectl COMMAND: <message>"
 * and "Try 'seqgatectl COMMAND --help' for more information." on stderr
 * (COMMAND: the one cli_getopt() parses; none before: "seqgatectl:" and
 * 'seqgatectl --help'). */
void usage_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* usage_print, then the value EXIT_USAGE. A macro so that the value is
 * seen at the call site (by the compiler and clang's static analyzer,
 * which does not look into other files). */
#define usage_error(...) (usage_print(__VA_ARGS__), EXIT_USAGE)

/* What a subcommand uses, so which common options it takes (cli_common_t
 * uses): --data-dir only where a store is read, -X only where a Kafka
 * client is made. */
#define CLI_USES_STORE 1u /* reads a data_dir: takes --data-dir DIR */
#define CLI_USES_KAFKA 2u /* makes Kafka clients: takes -X NAME=VALUE */

/* cli_getopt(): the options end (every argument was an option), or the
 * command must return cli_common_t.rc now (--help printed: 0; a usage
 * error printed: EXIT_USAGE). */
#define CLI_END (-1)
#define CLI_STOP (-2)
/* Most -X properties one command line takes. */
#define CLI_PROPS_MAX 64

/* The options every subcommand takes, parsed by cli_getopt():
 *   -c, --config FILE     the seqgate configuration
 *       --data-dir DIR    (CLI_USES_STORE) the store instead of data_dir
 *   -X NAME=VALUE         (CLI_USES_KAFKA) a librdkafka property for every
 *                         Kafka client, on top of the config's "kafka"
 *                         block; repeated, a later one wins
 *       --log-level LEVEL error, warning (default), notice, info, debug
 *       --json            one JSON object per line
 *   -h, --help            the command's help (cli_common_t help)
 * Set help and uses, zero the rest; cli_getopt fills them in. */
typedef struct cli_common {
        const char *help;        /* the command's --help text (usage and options
                             of its own; the common ones are appended) */
        unsigned uses;           /* CLI_USES_* */
        const char *name;        /* the command as usage errors name it ("dlq
                             summary"); NULL: argv[0] */
        int operands;            /* most non-option arguments the command takes
                             (INPUT); left at argv[optind..] */
        const char *exit_status; /* the help's "Exit status: ..." line when
                                    the command's differs; NULL: 0 ok, 1
                                    runtime error, 2 usage */
        const char *config;
        const char *data_dir;
        const char *props[CLI_PROPS_MAX]; /* "NAME=VALUE", in order */
        size_t prop_cnt;
        bool json;
        int rc; /* when cli_getopt returned CLI_STOP: the exit status */
        /* cli_getopt's merged option tables */
        struct option opts[40];
        char shortopts[96];
} cli_common_t;

/* getopt_long() over the command's own options (shortopts, longopts:
 * without the common ones, which it adds and handles itself) for
 * subcommand argv[0]: returns the next option of the command's own
 * (optarg set), CLI_END when the options end (more than cc->operands
 * non-option arguments is a usage error: CLI_STOP; the operands are
 * argv[optind..argc-1]), or CLI_STOP with cc->rc. Prints the usage
 * errors of the common options and of options getopt does not know.
 * At most 32 long options of the command's own. */
int cli_getopt(cli_common_t *cc, int argc, char **argv, const char *shortopts,
               const struct option *longopts);

/* load_config_data_dir(cc->config, cc->data_dir), then -X on top of it:
 * --data-dir replaces data_dir (which the file may then leave out), each
 * -X is added to the "kafka" block
 * through the daemon's checks (sg_config_kafka_set). Returns 0 with *confp
 * owned by the caller, or EXIT_USAGE after printing why. */
int cli_config_load(const cli_common_t *cc, sg_config_t **confp);

/* Parses a decimal integer in [min, max] into *out; false on anything else
 * (empty, trailing text, out of range), *out then unchanged. */
bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Parses a version: a decimal unsigned 64-bit integer, digits only
 * (semantics §2: no sign, no spaces, no overflow). false on anything
 * else, *out then unchanged. */
bool parse_u64(const char *s, uint64_t *out);

/* JSON output. Integers are added as raw decimal text (cJSON numbers are
 * doubles and would round versions and offsets above 2^53). */
void j_i64(cJSON *o, const char *name, int64_t v);
void j_u64(cJSON *o, const char *name, uint64_t v);
/* A processing time (ms since the epoch) as ISO 8601 UTC text, null when
 * ms <= 0. */
void j_time(cJSON *o, const char *name, int64_t ms);
/* Bytes as a JSON string when they are UTF-8 without NUL, else as
 * name + "_hex"; len SIZE_MAX or p NULL: null. p is copied. */
void j_bytes(cJSON *o, const char *name, const void *p, size_t len);
/* Prints o unformatted on one line of stdout. */
void print_json_line(const cJSON *o);

/* Loads the config file at path (NULL: the usage error "--config FILE is
 * required"). Returns 0 with *confp owned by the caller
 * (sg_config_destroy), or EXIT_USAGE after printing why. */
int load_config(const char *path, sg_config_t **confp);

/* As load_config(), with @p data_dir (NULL: the file's) in place of the
 * file's data_dir, which may then be absent (sg_config_load_data_dir). */
int load_config_data_dir(const char *path, const char *data_dir,
                         sg_config_t **confp);

/* Opens conf->data_dir read-only (MDB_RDONLY: never blocks the running
 * daemon) and begins a read transaction on it. Returns 0 with *storep and
 * *txnp owned by the caller (sg_txn_abort, then sg_store_close), or
 * EXIT_RUNTIME after printing why (nothing left open). */
int open_store(const sg_config_t *conf, sg_store_t **storep, sg_txn_t **txnp);

/* What a command inferred instead of an option (docs/seqgatectl.md
 * "seqgatectl's command line"): choice_add() adds "topic orders (the
 * config's one input topic)" (printf format), choices_print() prints them
 * as one line "seqgatectl: using A, B" on stderr (unless --log-level
 * error) and forgets them. A command prints its choices once, before it
 * acts. */
void choice_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void choices_print(void);

/* *topicp, or when NULL the one input topic of conf (a choice_add()).
 * Returns 0, or EXIT_USAGE after printing why (no --topic with several
 * input topics: they are named). */
int default_topic(const sg_config_t *conf, const char **topicp);

/* *dlqp, or when NULL the config's one dlq_topic (every input topic's
 * dlq_topic the same; a choice_add()). Returns 0, or EXIT_USAGE after
 * printing why (several DLQ topics: they are named). */
int default_dlq(const sg_config_t *conf, const char **dlqp);

/* How current an answer from the store in @p dir is (freshness.c,
 * docs/troubleshooting.md "Is the answer current?"): adds "store" to
 * @p o — data_dir, writer ("running": a process holds the data_dir's
 * lock, "not_running", "unknown"), writer_pid, max_age_ms, partitions
 * (each: partition, last_write(_ms), last_write_age_ms, input_offset,
 * current), current, warning (null when current) — for the partitions of
 * @p topic in @p txn (@p partition >= 0: that one only). Not current: no
 * process writes the store, the store holds none of those partitions, or
 * one was last written more than @p max_age_ms before @p now_ms; the
 * warning is then also printed (warnf). Returns "current". */
#define FRESH_MAX_AGE_MS 300000 /* --max-age-ms's default: 5 min */
bool store_freshness(const char *dir, sg_txn_t *txn, const char *topic,
                     int64_t partition, int64_t now_ms, int64_t max_age_ms,
                     cJSON *o);

/* --max-age-ms's value @p arg into *max_age_ms (ms, ≥ 0). Returns 0, or
 * EXIT_USAGE after printing why (usage_error). */
int max_age_arg(const char *arg, int64_t *max_age_ms);

/* Human rendering of a JSON object: "name: value" lines, nested objects
 * and lists of objects indented, in the order the fields were added. */
void print_human(const cJSON *o, int indent, bool list_item);

/* A partition's meta record as a new JSON object (owned by the caller). */
cJSON *meta_json(const sg_meta_rec_t *m);

/* Set by the client's error callback: a fatal librdkafka error happened
 * (g_kafka_error says which). */
extern volatile bool g_fatal;
/* The last error librdkafka reported through the error callback, "" if
 * none. */
extern char g_kafka_error[512];

/* The librdkafka configuration of every seqgatectl client: the
 * config's "kafka" block verbatim except group.id (seqgatectl never joins
 * the consumer group nor commits its offsets), plus, for a producer, the
 * "kafka_producer" block, enable.idempotence true and acks all (no
 * transactional.id: plain records) and dr_msg_cb as the delivery report
 * callback (NULL: none); for a consumer, the daemon's group-less reader
 * (read_committed, a throw-away group.id for assign(), no offset commits,
 * partition EOF events). Both built by sg_kafka_conf_new (kafka.h), so
 * seqgatectl's clients take the properties the daemon's take, and the -X
 * ones (cli_config_load). librdkafka's log lines of --log-level and worse
 * go to stderr; errors set g_kafka_error / g_fatal.
 * Returns a conf owned by the caller (rd_kafka_new or
 * rd_kafka_conf_destroy), or NULL after printing the property librdkafka
 * rejected (never the value of a secret property). */
rd_kafka_conf_t *kafka_conf(const sg_config_t *conf, bool producer,
                            void (*dr_msg_cb)(rd_kafka_t *rk,
                                              const rd_kafka_message_t *m,
                                              void *opaque));
/* rd_kafka_new() of a kafka_conf() configuration (librdkafka's log lines
 * printed from its threads as they happen: log.queue false). NULL: es says
 * why. */
rd_kafka_t *kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *kc, char *es,
                      size_t es_size);

/* The subcommands: argv[0] is the subcommand's name; each returns the
 * exit status. */
int cmd_inspect(int argc, char **argv);
int cmd_partitions(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_release(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_dlq(int argc, char **argv);
int cmd_sizing(int argc, char **argv);
int cmd_audit(int argc, char **argv);

#endif
