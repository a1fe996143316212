/*
 * kafka_harness.h — what the Kafka loop's suites (test_kafka*.c) share:
 * librdkafka's in-process mock cluster and its fixtures, the input they
 * produce and the output they read back, the fault-injecting processor
 * (tproc_t), running a loop under a watchdog, and the threads that stop
 * it. The cases and what they check: test_kafka.c's opening comment.
 *
 * Test code: not thread-safe unless said; Check runs each case in a
 * process of its own.
 */
#ifndef SG_KAFKA_HARNESS_H
#define SG_KAFKA_HARNESS_H

#include "kafka_changelog.h"
#include "config.h"
#include "engine.h"
#include "kafka.h"
#include "metrics_pub.h"
#include "passthrough.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NPART 3
#define NKEYS 12 /* multiple of NPART: record i goes to partition i % NPART */
#define NREC 600
#define PER_KEY (NREC / NKEYS)
#define PER_PART (NREC / NPART)
#define TS0 1700000000000LL
#define BATCH_MAX 50
#define PAUSE_RETRY_MS 300
#define WATCHDOG_MS 60000
#define SECRET "S3cr3t-value-never-shown-42"

int64_t mono_ms(void);

/** Log events of the loop, counted (loop thread only; read after run). */
typedef struct logs {
        int aborted, paused, resumed, grown, fatal, recreated;
        int store_behind, restore_done; /**< exactly_once */
        int retries;            /**< "kafka_retry": a retriable broker error */
        int reruns;             /**< "batch_rerun": a refused record re-run */
        int secret_leaks;       /**< log texts that contained SECRET */
        int dlq_lines;          /**< "dlq": a DLQ record produced (debug) */
        int stats_lines;        /**< "stats" callbacks (stats_interval_ms) */
        int64_t stats_ms[4096]; /**< monotonic ms of the first of them */
} logs_t;

extern logs_t g_logs;

void log_cb(void *opaque, sg_log_level_t level, const char *event,
            const char *fields);

extern char *g_bs;

extern rd_kafka_mock_cluster_t *g_mc;

extern sg_config_t *g_conf;

/** Top-level guarantee member: the loop cases run at_least_once (its
 *  offset commits are what they check), the "exactly_once" case sets it. */
#define ALOS "\"guarantee\":\"at_least_once\","

extern const char *g_root_extra;

sg_config_t *conf_parse(const char *bs, const char *topics,
                        const char *kafka_extra);

#define TOPICS_IN                                                              \
        "\"in\":{\"output_topic\":\"out\",\"dlq_topic\":\"dlq\","              \
        "\"ordering\":{\"mode\":\"none\"}}"

/** Starts the mock cluster (one broker) with the topics of @p topics,
 *  NPART partitions each, forgets the logs, and parses g_conf for it
 *  (@p kafka_extra: as conf_parse's). */
void mock_start(const char *topics, const char *kafka_extra);

void mock_setup(void);

void mock_teardown(void);

rd_kafka_t *client_new(rd_kafka_type_t type, const char *group,
                       bool idempotent);

void loop_setup(void);

/** exactly_once: sg_mock_start also creates changelog "g-in-changelog". */
void eos_setup(void);

void eos_teardown(void);

/** High watermarks of @p topic. */
void end_offsets(const char *topic, int64_t hi[NPART]);

void committed_offsets(int64_t off[NPART]);

/** What came out on "out". */
typedef struct outres {
        int total;    /**< records read */
        int dups;     /**< records already seen (same key, seq) */
        int missing;  /**< input records never seen */
        int disorder; /**< first occurrences out of per-key order */
        int bad;      /**< wrong key/headers/timestamp/partition, or garbage */
        int count[NKEYS][PER_KEY]; /**< occurrences of each input record */
} outres_t;

/** Reads @p topic from the start of each partition to its end as it is
 *  now (end_offsets), with a "verify" consumer, for 20 s at most, and hands
 *  each record (error events left out) to @p on. */
void read_topic(const char *topic,
                void (*on)(void *opaque, const rd_kafka_message_t *m),
                void *opaque);

void read_output(outres_t *r);

/** Nothing missing, first occurrences in per-key order, records intact. */
void assert_superset_in_order(const outres_t *r);

void assert_committed_at_end(void);

typedef struct tproc {
        sg_passthrough_t *pt;
        sg_processor_t in; /**< the pass-through's interface */
        sg_loop_t *loop;
        bool stop_when_done;
        int begin_sleep_ms;

        /* a full disk: while set, the first record of every attempt is
         * SG_ERR_MAP_FULL and grow() fails, grow_fail_max times; then the
         * grow succeeds and disk_full clears */
        bool disk_full;
        int grow_fail_max, grow_fails;

        /* injection settings (mod 0: off); each fires once per offset */
        int proc_fail_mod, proc_fail_rem;
        int mapfull_mod, mapfull_rem;
        int commit_fail_period, commit_fail_max;
        int32_t pause_part; /**< -1: the partition of the first record */
        int64_t pause_off;  /**< -1: never pause */

        unsigned char injected[NPART][PER_PART];

        /* the current attempt: records processed, in call order */
        int32_t att_p[BATCH_MAX];
        int64_t att_o[BATCH_MAX];
        size_t att_n;
        int64_t att_next[NPART]; /**< next offset expected per partition */

        /* MAP_FULL re-run check */
        int32_t rr_p[BATCH_MAX];
        int64_t rr_o[BATCH_MAX];
        size_t rr_n, rr_pos;
        bool rr_pending;
        int rerun_ok, rerun_bad;

        /* pause bookkeeping */
        bool pause_done;
        int64_t pause_ms, resume_ms;
        int pause_calls;        /**< process() calls for the paused record */
        int other_during_pause; /**< other partitions' records meanwhile */
        /** other partitions' records not yet processed when the pause
         *  came (0: the others had nothing left to go on with) */
        int other_left_at_pause;
        int paused_part_wrong; /**< paused partition moved on without it */

        /* committed state */
        unsigned char committed[NPART][PER_PART];
        atomic_int committed_cnt;
        int64_t next_off[NPART]; /**< after the last committed record */
        int recommitted;         /**< committed records handed out again */
        int gaps;                /**< a record not at the expected offset */

        /* counts */
        int proc_fails, mapfulls, commit_calls, commit_calls_nonempty;
        int commit_fails, commits_ok;
        int grows, aborts, pauses, assigns, revokes;
        int dup_expected; /**< output delivered by batches whose commit failed */

        /* exactly_once hooks */
        int delivered, delivered_bad; /**< calls; index/offset out of range */
        int64_t out_last[NPART];      /**< last output offset per partition */
        int out_disorder;             /**< output offsets not increasing */
        int restore_begins, restore_ends, restore_bad;
        int restore_fail_max, restore_fails; /**< restore_begin fails after
                                                  the assignment's restores */
        bool restore_open;
        bool kafka_commits; /**< exactly_once: a batch whose batch_commit
                                 failed is still done (its transaction
                                 committed) and counts toward the stop */

        /* delivery_failure_lands_no_later_record: the failure is armed */
        int gap_armed;

        /* refused() calls: records Kafka refused for what they are */
        int refused_calls;
        size_t refused_index;
        char refused_reason[128];

        /* produce while deciding: at the OVERLAP_AT-th record of an
         * attempt, wait (at most OVERLAP_WAIT_MS) for "out" to grow past
         * its end offsets at batch_begin, i.e. for the records decided
         * before it to be delivered while the batch is still being
         * decided; probes left, and what they saw */
        int overlap_probes;
        int overlap_seen, overlap_missed;
        int64_t overlap_base;   /**< sum of "out"'s end offsets, -1: none */
        rd_kafka_t *overlap_rk; /**< the probe's client */
        /* when set, the mock cluster answers the next Produce request
         * with this error, pushed at the first record decided (so that it
         * hits a record of that batch, not a claim written at the
         * assignment), once */
        rd_kafka_resp_err_t produce_err_at_first_record;
} tproc_t;

sg_err_t tp_process(void *o, const sg_record_t *r, sg_process_result_t *res,
                    char *es, size_t n);

void tp_delivered(void *o, size_t index, int64_t offset);

sg_err_t tp_restore_begin(void *o, const char *topic, int32_t p, int64_t lo,
                          int64_t hi, int64_t *from, char *es, size_t n);

sg_err_t tp_restore_apply(void *o, const char *topic, int32_t p, int64_t off,
                          const void *k, size_t kl, const void *v, size_t vl,
                          char *es, size_t n);

sg_err_t tp_restore_end(void *o, const char *topic, int32_t p, int64_t end,
                        char *es, size_t n);

bool tp_refused(void *o, size_t index, bool too_large, const char *reason);

tproc_t *tp_new(void);

void tp_interface(tproc_t *t, sg_processor_t *p);

void tp_destroy(tproc_t *t);

/** Processor-side invariants every fault case must keep. */
void assert_tp_consistent(const tproc_t *t);

/** Stops the loop after WATCHDOG_MS so that a broken loop fails, not hangs. */
typedef struct watchdog {
        pthread_t th;
        sg_loop_t *loop;
        atomic_bool done;
        atomic_bool fired;
} watchdog_t;

void *watchdog_main(void *a);

typedef struct run {
        sg_err_t rc;
        char errstr[512];
        sg_loop_stats_t stats;
        bool watchdog_fired;
} run_t;

/* When set (not 0), run_loop() sets the loop's log level to it. */
extern sg_log_level_t g_log_level;

/* When set, run_loop() installs it as the loop's publish callback. */
extern sg_loop_publish_cb *g_publish_cb;

extern void *g_publish_opaque;

/** Creates a loop for @p proc, runs it until stopped, destroys it. */
void run_loop(const sg_processor_t *proc, sg_loop_t **loopp,
              void *(*other)(void *), void *other_arg, run_t *r);

typedef struct stopper {
        sg_loop_t **loopp;   /**< set by run_loop() before this thread starts */
        int64_t want[NPART]; /**< offsets of "in" the group is to commit */
        atomic_bool reached; /**< the committed offsets reached want */
        int64_t not_before_ms; /**< monotonic ms: no stop before (0: any) */
        int64_t stop_ms;       /**< monotonic ms it asked the loop to stop */
} stopper_t;

/** Polls group "g"'s committed offsets for "in" from its own client, for
 *  WATCHDOG_MS at most; stops the loop once they equal stopper_t.want, not
 *  before not_before_ms. */
void *stop_at(void *a);

/** stop_at() at the end of "in" as produce_input() wrote it. */
void *stop_at_end(void *a);

/** SG_TEST_ONLY=<test name> runs one test (for debugging). */
void add(TCase *tc, const TTest *t);

#endif
