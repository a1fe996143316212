/*
 * kafka_int.h — private to the Kafka loop (kafka.h): the loop's state and
 * the functions its files (lib/kafka*.c, one per concern) share. Not
 * installed, not for other modules.
 */
#ifndef SEQGATE_KAFKA_INT_H
#define SEQGATE_KAFKA_INT_H

#include "kafka.h"
#include "kafka_changelog.h"
#include "metrics.h"
#include "snapsrc_http_fetch.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SG_METADATA_TIMEOUT_MS 10000
#define SG_COMMITTED_TIMEOUT_MS 10000
#define SG_SEEK_TIMEOUT_MS 5000
#define SG_IDLE_POLL_MS 100
#define SG_BACKOFF_MIN_MS 100
#define SG_BACKOFF_MAX_MS 5000
#define SG_HTTP_SLICE_MS 5 /* consumer/fetcher turn while GETs run */
#define SG_HTTP_MAX_BODY (1024 * 1024) /* snapshot response bound: 1 MiB */
/* kafka_recovered's probe of an idle, impaired loop (kafka.h "Logs"): at
 * most this often, once no error came for as long; each waits at most
 * SG_PROBE_TIMEOUT_MS */
#define SG_PROBE_INTERVAL_MS 2000
/** How long a revoke or a stop waits for the answers of group commits
 *  sent before it (sg_loop_commit_durable with wait) */
#define SG_COMMIT_WAIT_MS 10000
/** A wait for Kafka's answers (deliveries) is cut into slices this long,
 *  sg_loop_waiting() between them */
#define SG_WAIT_SLICE_MS 250
#define SG_PROBE_TIMEOUT_MS 500

/** A topic-partition the loop has seen, with its batch bookkeeping. */
typedef struct sg_part {
        char *topic; /**< owned */
        int32_t partition;
        bool assigned;        /**< currently assigned to this consumer */
        int64_t committed;    /**< next offset committed by us, -1 unknown */
        int64_t durable;      /**< at_least_once group commit: next offset
                                    of the last batch LMDB committed, not yet
                                    committed to the group if > committed;
                                    -1 none */
        int64_t start;        /**< offset reading started at on assignment,
                                    -1 unknown (the group's or
                                    auto.offset.reset) */
        int64_t paused_until; /**< monotonic ms to resume at, 0: not paused */
        /* batch state, valid while in_batch */
        bool in_batch;
        int64_t first_offset; /**< first offset of this partition in the batch */
        int64_t next_offset;  /**< offset after the last processed record */
        int64_t pause_offset; /**< record the processor paused at, -1 none */
        /* the changelog (input partitions of a stateful processor) */
        bool restore; /**< restore before its next batch */
        /* at_least_once changelog (kafka.h "Changelog fencing") */
        int64_t cl_epoch;          /**< this owner's epoch (its claim's offset),
                                    -1: not claimed */
        int64_t cl_seq;            /**< last batch sequence used in cl_epoch */
        int64_t cl_m1, cl_m2;      /**< sequences of this owner's last two
                                    markers (0: none): a batch drops the
                                    one of two batches back */
        int64_t cl_next;           /**< offset our next changelog record must be
                                    written at (nobody else wrote since) */
        bool cl_fenced;            /**< a newer owner confirmed: never write
                                    again (paused until revoked) */
        bool cl_id_write;          /**< its restore found no changelog id:
                                    write one (kafka_changelog.h "The changelog
                                    id") once the restores are done */
        size_t cl_cnt;             /**< changelog records in this attempt */
        int64_t cl_first, cl_last; /**< their offsets, as delivered */
        /* published numbers (sg_loop_publish) */
        int64_t lag;             /**< records not yet processed (loop_gauges),
                                      -1 unknown */
        int64_t seen;            /**< offset after the last record the
                                      consumer handed the loop since the
                                      assignment, -1 none */
        int64_t eof;             /**< the end (EOF) the consumer reported
                                      read to: its last stable offset then;
                                      -1 not at the end (a record since, a
                                      seek, a new assignment) */
        bool restoring;          /**< its changelog restore is running */
        int64_t restore_records; /**< records the current/last restore read */
        int64_t restore_target;  /**< offsets it had to read, -1 unknown */
} sg_part_t;

/** A partition this instance is standby for (kafka_standby.c, semantics
 *  §6 "Standby replicas"): its changelog tailed into the store. */
typedef struct sg_standby_part {
        char *topic; /**< the input topic */
        int32_t partition;
        const sg_topic_config_t *tc;
        bool ready;       /**< caught up once: tailed from next */
        bool refused;     /**< its store cannot follow this changelog
                                (another group's, another log): not tailed */
        bool has_id;      /**< the store keeps a changelog id */
        int64_t retry_ms; /**< monotonic: not tried again before */
        int64_t lo;       /**< log start, read at the catch-up */
        int64_t next;     /**< offset after the last record fed */
        int64_t applied;  /**< the store's checkpoint (changelog offset) */
        int64_t floor;    /**< the reader's FLOOR (at_least_once epochs) */
        sg_changelog_reader_t *rd; /**< kept across turns: at_least_once
                                        batches held back until complete */
        bool keep;                 /**< scratch: still placed here */
} sg_standby_part_t;

struct sg_loop {
        const sg_config_t *conf;
        sg_processor_t proc;
        sg_kafka_log_t klog; /**< the log callback; every client's
                                      opaque (sg_kafka_conf_new) */
        sg_loop_stats_cb *stats_cb;
        void *stats_opaque;

        rd_kafka_t *consumer;
        rd_kafka_t *producer;

        volatile sig_atomic_t stop;
        volatile sig_atomic_t reload; /**< sg_loop_reload() asked */
        sg_loop_reload_cb *reload_cb;
        void *reload_opaque;
        bool connected; /**< sg_loop_connect() succeeded */
        sg_err_t fatal; /**< SG_OK, or why the loop must stop */
        char fatal_str[512];

        sg_loop_stats_t stats;
        char abort_str[512];   /**< why the last batch was aborted, while
                                  stats.batches_aborted_in_a_row > 0 */
        int64_t next_stats_ms; /**< monotonic */
        int64_t backoff_ms;

        /* the batch being collected / run */
        rd_kafka_message_t **msgs;
        size_t msg_cnt, msg_cap;
        sg_record_t *recs;
        size_t *rec_part; /**< index into parts, per record */
        sg_header_t *hdrs;
        size_t hdr_cap;
        size_t *batch_parts; /**< indexes of the partitions in the batch */
        size_t batch_part_cnt;
        bool batch_running;
        bool batch_idle; /* the committed attempt was an idle poll (no
                            record, snapshot result or effect) */

        sg_part_t *parts;
        size_t part_cnt, part_cap;
        size_t last_part; /**< last sg_loop_part() hit: records come in runs */

        /* delivery reports of the current attempt: a message's opaque is
         * dr_base + 1 + its effect index, so a report of an earlier
         * (aborted) attempt falls outside (dr_base, dr_base + dr_cnt] */
        uintptr_t dr_base;
        size_t dr_cnt;    /**< effects of the current attempt */
        int64_t *dr_offs; /**< per effect: offset written at, or -1 */
        rd_kafka_resp_err_t *dr_errs; /**< per effect: its delivery error */
        size_t dr_offs_cap;
        size_t dr_ok, dr_fail;
        rd_kafka_resp_err_t dr_err;
        bool dr_note_after_abort; /**< exactly_once: producing failed while
                                      reports were outstanding; the refused
                                      records are looked for once the abort
                                      served them (sg_loop_batch) */

        /* the producer's topic handles (kafka_produce.c): one per topic it
         * writes, created on first use, destroyed with the producer
         * (sg_loop_topics_destroy) */
        rd_kafka_topic_t **rkts;
        size_t rkt_cnt, rkt_cap;

        /* records Kafka refuses for what they are (semantics §3
         * output_rejected): the processor decides, the loop re-runs */
        bool rerun;       /**< the processor will route a refused
                                      record: run the same records again */
        bool isolate;     /**< refusals hit several records of one
                                      produce request: produce one record at
                                      a time to find the refused one */
        size_t reruns;    /**< re-runs of the batch in progress */
        int rerun_follow; /**< re-runs for a failure that followed
                                      a refusal's re-run (exactly_once) */

        /* exactly_once (semantics §6) */
        bool eos;             /**< guarantee exactly_once */
        rd_kafka_t *restorer; /**< changelog restore consumer (no group) */
        bool txn_open;        /**< a Kafka transaction is in progress */
        bool txn_renew;       /**< exactly_once: the transactional producer
                                   is unusable though no other instance
                                   fenced it (a fatal error of another kind,
                                   an abort that failed): replaced before
                                   the next attempt (sg_loop_producer_renew) */
        /* the writer of a transaction (kafka_changelog.h "The writer of a
         * transaction"): the changelog partitions the open transaction
         * named its writer in (sg_loop_txn_began empties it) */
        struct sg_txn_tag *txn_tags;
        size_t txn_tag_cnt, txn_tag_cap;
        char txid[512];       /**< this instance's transactional id */
        char *member_id;      /**< the consumer's group member id as of the
                              last rebalance (rd_kafka_memberid; NULL:
                              not read since) */
        bool kafka_committed; /**< this attempt is in Kafka: its
                                      transaction committed (exactly_once)
                                      or its changelog markers were
                                      acknowledged (at_least_once) */
        bool restore_needed;  /**< some partition's part.restore is set:
                                      restore those before the next batch */
        bool restore_failing; /**< the last restore of restore_needed's
                                      partitions failed (restore_str says
                                      why); /readyz: not ready */
        char restore_str[512];
        /* the changelog, both guarantees (semantics §6) */
        bool changelog;             /**< the processor keeps state that follows
                                      a partition (it has restore_begin) */
        bool alos_cl;               /**< at_least_once with a changelog: claims,
                                      framed records, markers, repairs */
        char restore_group[512];    /**< group.id of the restore consumer */
        int64_t commit_due_ms;      /**< at_least_once group commit: monotonic
                                      ms by which the durable offsets are
                                      committed (commit_interval_ms after
                                      the first one waited); 0: none wait */
        rd_kafka_queue_t *commit_q; /**< the answers of the group commits
                                      sent without waiting
                                      (sg_loop_commits_serve) */
        int commits_inflight;       /**< of those, not answered yet */
        rd_kafka_topic_partition_list_t *pending_offsets; /**< at_least_once:
                                      input offsets of batches whose LMDB
                                      commit failed after their changelog
                                      was complete; committed once the
                                      restore brought LMDB up to it */

        /* standby replicas (kafka_standby.c; semantics §6 "Standby
         * replicas"); none unless standby_replicas > 0 */
        rd_kafka_t *standby; /**< changelog tail consumer (no group) */
        bool sby_reassign;   /**< the tail consumer's assignment is
                                         to be set again */
        /* the group describer thread (kafka_standby.c): the only state it
         * shares with the loop thread */
        pthread_t sby_th;
        bool sby_th_started;
        pthread_mutex_t sby_mu;
        struct sg_sby_group *sby_latest; /**< its newest answer, under
                                              sby_mu; taken by the loop */
        atomic_bool sby_kick;            /**< describe again now */
        atomic_bool sby_quit;            /**< the thread ends */
        int64_t sby_drain_ms;            /**< next drain due, monotonic */
        sg_standby_part_t *sby;          /**< the standby partitions */
        size_t sby_cnt;

        /* HTTP snapshot refetch (snapsrc_http_fetch.h) */
        sg_snapshot_http_t *http;     /**< the transfers' bookkeeping */
        const sg_record_t *http_recs; /**< completed transfers drained into
                                      the batch (owned by http) */
        size_t http_batch_cnt;        /**< their number */
        int64_t http_polled_ms;       /**< last fetcher drive (monotonic) */

        int64_t collected_ms; /**< the last collection's end (monotonic; 0
                                   none yet): a batch's window opens there
                                   when its first record was waiting
                                   (loop_collect) */

        /* the HTTP endpoint's publication (sg_loop_set_publish) */
        sg_loop_publish_cb *publish_cb;
        void *publish_opaque;
        struct sg_metrics_snap *pub_snap; /**< scratch, reused */
        int64_t published_ms;             /**< last publish (monotonic) */
        bool assigned_once;               /**< a rebalance assigned once */
        int64_t assign_wait_ms;     /**< the first assignment awaited since
                                     (monotonic; subscribed); 0: it came
                                     (its callback runs or ran) */
        bool assign_hinted;         /**< assignment_waiting was logged */
        int64_t session_timeout_ms; /**< the consumer's; -1: unknown */
        bool run_ended;             /**< sg_loop_run() is returning */

        /* impaired since the last progress (kafka.h "Logs",
         * sg_loop_impaired) */
        int64_t impaired_ms;       /**< first error since, monotonic; 0 not
                                        impaired */
        int64_t error_ms;          /**< the last error, monotonic */
        uint64_t impaired_errors;  /**< errors since impaired_ms */
        uint64_t klog_errors_seen; /**< klog.errors counted so far */
        char first_error[64];      /**< error names, for kafka_recovered */
        char last_error[64];
        int64_t probe_ms;     /**< the last probe, monotonic */
        bool lost;            /**< partitions were lost (revoked, lost)
                                    since the last assignment: only an
                                    assignment or a batch shows recovery */
        bool assign_progress; /**< partitions assigned since the last
                                    check (assign_hand_over) */
};
/** One operation retried while the cluster answers with retriable errors:
 *  back-off from SG_BACKOFF_MIN_MS doubling to SG_BACKOFF_MAX_MS, for at
 *  most broker_retry_timeout_ms in all. */
typedef struct sg_retry {
        const char *during; /**< what is retried, for the log line */
        int64_t start_ms;   /**< monotonic */
        int64_t backoff_ms;
        int attempt;
} sg_retry_t;
#define SG_NO_PART SIZE_MAX

/** The loop whose klog @p log is (a client's opaque, sg_kafka_conf_new). */
#define SG_LOOP_OF(log)                                                        \
        ((sg_loop_t *)(void *)((char *)(log)-offsetof(sg_loop_t, klog)))
/* The restore consumer's poll: rd_kafka_consume_batch_queue waits until
 * SG_RESTORE_BATCH messages or the timeout, so the timeout is what the
 * last, short batch of a partition (its EOF) waits. */
#define SG_RESTORE_POLL_MS 10
#define SG_RESTORE_BATCH 1000
#define SG_RESTORE_PENDING_MAX_MS 120000 /* open transaction on a changelog */
#define SG_RESTORE_STALL_MS 120000       /* no record, no EOF */
#define SG_STABLE_OFFSETS_MAX_MS 120000  /* committed offsets still pending */
/* exactly_once: how long a restore waits at an open transaction on a
 * changelog partition before it asks who wrote it (semantics §6 "Taking
 * over from a dead owner"): a committed transaction's markers land in
 * milliseconds; then again every SG_TAKEOVER_RETRY_MS while it waits */
#define SG_TAKEOVER_AFTER_MS 500
#define SG_TAKEOVER_RETRY_MS 5000

/** A record the loop writes itself (at_least_once changelog: claims,
 *  confirms, markers, repairs). */
typedef struct sg_send {
        sg_effect_t ef; /**< topic, partition, key, value */
        bool framed;    /**< carries SG_CHANGELOG_HEADER = frame */
        unsigned char frame[SG_CHANGELOG_FRAME_LEN];
        int64_t offset; /**< out: where it was written */
} sg_send_t;

/* the loop: create, connect, run, stop, destroy; shared helpers (kafka.c) */
void sg_sleep_ms(int64_t ms);
cJSON *sg_kafka_parts_json(const rd_kafka_topic_partition_list_t *l);
void sg_loop_set_fatal(sg_loop_t *loop, sg_err_t err, const char *what);
bool sg_kafka_err_retriable(rd_kafka_resp_err_t e, bool topic_exists);
void sg_retry_init(sg_retry_t *r, const char *during);
bool sg_retry_again(sg_loop_t *loop, sg_retry_t *r, rd_kafka_resp_err_t code,
                    bool topic_exists, const char *detail, bool *gave_up);
size_t sg_loop_part(sg_loop_t *loop, const char *topic, int32_t partition);
size_t sg_loop_part_add(sg_loop_t *loop, const char *topic, int32_t partition);
const sg_topic_config_t *sg_loop_topic_of_changelog(const sg_loop_t *loop,
                                                    const char *name);
/** Counts an error (@p error: its name, e.g. "_TRANSPORT") toward the
 *  loop's impairment, which the next progress ends with a
 *  "kafka_recovered" line (kafka.h "Logs"); @p since_ms (monotonic; 0:
 *  now): when the failed operation started — a synchronous call that
 *  failed after a long wait impaired the loop from its start. */
void sg_loop_impaired(sg_loop_t *loop, const char *error, int64_t since_ms);

/* what the loop reports: lag, gauges, stats, publication (kafka_stats.c) */
/** Publishes a snapshot to the publish callback (if any): always when
 *  @p force, else at most every SG_PUB_INTERVAL_MS. */
void sg_loop_publish(sg_loop_t *loop, bool force);
/** Notes how a restore of the partitions behind their changelog ended
 *  (@p err, @p es: why it failed) for /readyz: a failure makes it not
 *  ready with @p es and publishes at once; SG_OK ends that (kafka_stats.c,
 *  semantics §6 "Disk space"). */
void sg_loop_restore_outcome(sg_loop_t *loop, sg_err_t err, const char *es);
/** Samples the gauges and calls the stats callback (if any) now. */
void sg_loop_stats_emit(sg_loop_t *loop);
/** sg_loop_stats_emit, when stats_interval_ms passed since the last. */
void sg_loop_stats_due(sg_loop_t *loop);

/* log redaction of secrets (kafka_redact.c) */
/** True when a line at @p level reaches @p log's callback: build a costly
 *  line (one per record) only then. */
bool sg_kafka_log_enabled(const sg_kafka_log_t *log, sg_log_level_t level);
void sg_kafka_log_emit(const sg_kafka_log_t *log, sg_log_level_t level,
                       const char *event, cJSON *fields);
void sg_loop_log(sg_loop_t *loop, sg_log_level_t level, const char *event,
                 cJSON *fields);

/* client configuration (kafka_conf.c) */
/** After the processor dropped batches it had committed (a batch_abort, a
 *  failed batch_commit or checkpoint; processor.h "Checkpoints"): marks
 *  every assigned partition it says is behind its changelog for a restore
 *  before the next batch, counts it (checkpoints_lost_total) and logs
 *  "checkpoint_lost". @returns whether any partition was. */
bool sg_loop_mark_behind(sg_loop_t *loop);
/** Asks the processor for a checkpoint (processor.h checkpoint) with no
 *  batch open, @p why for the log: before partitions are revoked or
 *  assigned, before a restore, at a clean stop. A failure is logged
 *  ("checkpoint_failed") and answered by sg_loop_mark_behind. */
void sg_loop_checkpoint(sg_loop_t *loop, const char *why);
/** The transactional id: the config's, else <group.id>-<instance_id>
 *  built in @p buf (kafka.h "Batch protocol, exactly_once"). */
const char *sg_loop_transactional_id(const sg_config_t *conf, char *buf,
                                     size_t size);
sg_err_t sg_loop_client_new(sg_loop_t *loop, bool consumer, rd_kafka_t **rkp,
                            char *errstr, size_t errstr_size);
sg_err_t sg_loop_restorer_new(sg_loop_t *loop, char *errstr,
                              size_t errstr_size);

/* the cluster preflight at start (kafka_preflight.c): every finding
 * logged (cluster_problem, cluster_warning, cluster_note); errors are
 * SG_ERR_CONFIG naming them all (files: before any client exists;
 * cluster: retriable ones retried, sg_retry_t) */
sg_err_t sg_loop_preflight_files(sg_loop_t *loop, char *errstr,
                                 size_t errstr_size);
sg_err_t sg_loop_preflight(sg_loop_t *loop, char *errstr, size_t errstr_size);
/** Adds a finding of severity @p sev to @p pf (printf-style text).
 *  @returns SG_OK or SG_ERR_NOMEM. */
sg_err_t sg_preflight_add(sg_preflight_t *pf, sg_preflight_sev_t sev,
                          const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/** The value librdkafka takes for @p name in @p a then @p b (the last). */
const sg_kv_t *sg_preflight_kv2(const sg_kv_t *a, size_t an, const sg_kv_t *b,
                                size_t bn, const char *name);

/* topic administration (kafka_admin.c) */
sg_err_t sg_loop_check_topics(sg_loop_t *loop, char *errstr,
                              size_t errstr_size);
sg_err_t sg_loop_ensure_changelogs(sg_loop_t *loop, char *errstr,
                                   size_t errstr_size);
sg_err_t sg_loop_size_limits(sg_loop_t *loop, char *errstr, size_t errstr_size);

/* changelog restore (kafka_restore.c) */
sg_err_t sg_loop_restore(sg_loop_t *loop,
                         const rd_kafka_topic_partition_list_t *l,
                         bool *fencedp, char *errstr, size_t errstr_size);
void sg_loop_restore_all(sg_loop_t *loop);

/* changelog ownership, at_least_once: claim, fence, repair (kafka_claim.c) */
sg_err_t sg_loop_claim(sg_loop_t *loop,
                       const rd_kafka_topic_partition_list_t *parts,
                       const int64_t *committed, bool *lostp, char *errstr,
                       size_t errstr_size);
/** Stops partition @p pi for good: a newer owner confirmed its epoch on
 *  its changelog (paused, the processor told to forget it, logged). */
void sg_loop_fence(sg_loop_t *loop, size_t pi);
/** After a restore read partition @p pi's changelog to @p end: writes the
 *  repair (the void keys' current values, old confirms' tombstones, a
 *  marker) as this owner's next batch; *againp: another writer wrote
 *  meanwhile, read again from the checkpoint. */
sg_err_t sg_loop_repair(sg_loop_t *loop, size_t pi, const sg_topic_config_t *tc,
                        sg_changelog_reader_t *rd, int64_t end, bool *againp,
                        char *errstr, size_t errstr_size);

/** loop_restore_feed for a reader kept across reads (the standby tail):
 *  feeds @p m to @p rd, tells the processor a FLOOR that moved (*floorp)
 *  and, unless *has_idp, the first changelog id read (then sets it). */
sg_err_t sg_loop_restore_feed(sg_loop_t *loop, const char *topic,
                              int32_t partition, bool *has_idp,
                              sg_changelog_reader_t *rd,
                              const rd_kafka_message_t *m, int64_t *floorp,
                              char *errstr, size_t errstr_size);
/** The low and high watermarks of changelog @p tc [@p partition], asked of
 *  the broker (retried while retriable). */
sg_err_t sg_loop_restore_offsets(sg_loop_t *loop, const sg_topic_config_t *tc,
                                 int32_t partition, int64_t *lop, int64_t *hip,
                                 char *errstr, size_t errstr_size);
/** The changelog id check before a restore (semantics §6 "The changelog's
 *  identity"): SG_ERR_FOREIGN when the log at want->offset is not the
 *  store's; *keptp false when it cannot be known (logged, forgotten). */
sg_err_t sg_loop_restore_id_check(sg_loop_t *loop, const char *topic,
                                  int32_t partition,
                                  const sg_topic_config_t *tc, int64_t lo,
                                  const sg_changelog_id_t *want, bool *keptp,
                                  char *errstr, size_t errstr_size);

/* standby replicas (kafka_standby.c; semantics §6 "Standby replicas") */
/** Creates the changelog tail consumer when standby_replicas > 0 and the
 *  processor keeps a changelog; else nothing. */
sg_err_t sg_loop_standby_new(sg_loop_t *loop, char *errstr, size_t errstr_size);
/** Between batches, on the loop thread (the store's only writer): takes
 *  the group description's answer (placement), asks for the next one
 *  every SG_STANDBY_DESCRIBE_MS, catches new standby partitions up to
 *  their checkpoint and, at most every checkpoint interval (at least
 *  1 s), applies what the tail consumer fetched, bounded per turn. */
void sg_loop_standby_turn(sg_loop_t *loop);
/** Partitions @p parts are being assigned here: no longer tailed (before
 *  their restore, which reads the rest from the standby's checkpoint). */
void sg_loop_standby_drop(sg_loop_t *loop,
                          const rd_kafka_topic_partition_list_t *parts);
/** A rebalance happened: describe the group at the next turn. */
void sg_loop_standby_kick(sg_loop_t *loop);
/** Adds the standby partitions and their lag to @p snap (metrics). */
void sg_loop_standby_publish(sg_loop_t *loop, struct sg_metrics_snap *snap);
/** Closes the tail consumer and frees the standby partitions. */
void sg_loop_standby_destroy(sg_loop_t *loop);

/* rebalance callbacks (kafka_rebalance.c) */
void sg_loop_cb_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t *parts, void *opaque);

/* Kafka transactions (exactly_once) (kafka_txn.c) */
/** True for the errors of a producer another one with its transactional
 *  id fenced (KIP-98): it must stop, never start over. */
bool sg_loop_err_is_fenced(rd_kafka_resp_err_t code);
void sg_loop_producer_fatal(sg_loop_t *loop, rd_kafka_resp_err_t code,
                            const char *during, const char *reason);
sg_err_t sg_loop_txn_error(sg_loop_t *loop, rd_kafka_error_t *e,
                           const char *during, char *errstr,
                           size_t errstr_size);
sg_err_t sg_loop_init_transactions(sg_loop_t *loop, char *errstr,
                                   size_t errstr_size);
void sg_loop_txn_abort(sg_loop_t *loop);
sg_err_t sg_loop_txn_commit(sg_loop_t *loop, char *errstr, size_t errstr_size);
sg_err_t sg_loop_txn_send(sg_loop_t *loop, sg_send_t *recs, size_t n,
                          char *errstr, size_t errstr_size);
/** A transaction began (rd_kafka_begin_transaction succeeded): marks it
 *  open and forgets which changelog partitions the last one named its
 *  writer in. */
void sg_loop_txn_began(sg_loop_t *loop);

/* taking over from a dead owner (kafka_takeover.c; semantics §6 "Taking
 * over from a dead owner") */
/** exactly_once, a produce of changelog record @p topic [@p partition]
 *  within the open transaction: true (and remembered) if it is the
 *  transaction's first record there, which then carries the writer
 *  headers (sg_loop_writer_headers_add). False also when out of memory
 *  (the record goes without them: a later takeover waits instead). */
bool sg_loop_txn_tag_first(sg_loop_t *loop, const char *topic,
                           int32_t partition);
/** Adds the writer headers (SG_CHANGELOG_WRITER_TXID_HEADER,
 *  SG_CHANGELOG_WRITER_MEMBER_HEADER) to @p h. */
void sg_loop_writer_headers_add(sg_loop_t *loop, rd_kafka_headers_t *h);
/**
 * A restore of changelog @p changelog [@p partition] waits at an open
 * transaction (last stable offset @p lso below the high watermark) since
 * @p waited_ms: reads the first record at @p lso read_uncommitted (the
 * open transaction's first record there), and when the record names a
 * writer that is not this instance and not a member of the group now
 * (takeover.h), fences its transactional id (init_transactions under it:
 * the coordinator aborts its open transaction; its zombie can write
 * nothing more). Logs "takeover_fenced" and counts takeover_fences_total,
 * or logs "takeover_waiting" with the verdict or the error. Never fails
 * the restore: whatever it could not do, the restore goes on waiting for
 * the coordinator's own abort (transaction.timeout.ms). Blocks the loop
 * thread: at most a few seconds of round trips, plus
 * SG_TAKEOVER_FENCE_MAX_MS for the fence.
 * @returns true if the writer was fenced.
 */
bool sg_loop_takeover(sg_loop_t *loop, const char *changelog, int32_t partition,
                      int64_t lso, int64_t waited_ms);
/**
 * on_assign, exactly_once: the group's committed offsets of @p parts are
 * still pending (KIP-447: a transaction that sent them is undecided) after
 * @p waited_ms. A transaction produces its changelog records (and has them
 * delivered) before it sends its offsets, and every input partition a
 * batch read gets at least its meta record there, so the changelog
 * partitions of the input partitions it read hold it open: for each
 * changelog partition of @p parts whose last stable offset is below its
 * high watermark, the takeover of sg_loop_takeover (one reader for all;
 * its lines say "trigger": "committed_offsets"). When none is open (the
 * transaction wrote to partitions another member was assigned, or to no
 * changelog) or their offsets could not be read, logs "takeover_waiting"
 * saying so: the wait goes on (that member's takeover, or the
 * coordinator's own abort). Never fails; blocks the loop thread as sg_loop_takeover does,
 * once per open partition (a fence makes the next ones stable).
 * @returns true if a writer was fenced (its offsets are decided now).
 */
bool sg_loop_takeover_pending(sg_loop_t *loop,
                              const rd_kafka_topic_partition_list_t *parts,
                              int64_t waited_ms);
/** Frees the takeover's state (the transaction's tags, the member id). */
void sg_loop_takeover_destroy(sg_loop_t *loop);

/* producing and delivery reports (kafka_produce.c) */
void sg_loop_cb_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);
bool sg_loop_dr_reserve(sg_loop_t *loop, size_t n);
bool sg_loop_dr_begin(sg_loop_t *loop, size_t n);
bool sg_loop_dr_grow(sg_loop_t *loop, size_t n);
void sg_loop_topics_destroy(sg_loop_t *loop);
/** Replaces a producer that cannot go on by a new one, logging
 *  "producer_recreated"; its queued and in-flight messages are purged.
 *  at_least_once: an idempotent producer that raised a fatal error (a
 *  produce request failed for good, enable.gapless.guarantee: semantics §6
 *  "Output order"): a new producer id. exactly_once: a transactional
 *  producer marked txn_renew (semantics §6 "Waiting for Kafka": broken,
 *  not fenced): a new one under the same transactional id, whose
 *  init_transactions aborts what the old one left open. Nothing to
 *  replace: nothing. If the new one cannot be created (or, exactly_once,
 *  initialised within broker_retry_timeout_ms) the loop is fatal
 *  (loop->producer NULL). Loop thread. */
void sg_loop_producer_renew(sg_loop_t *loop);
sg_err_t sg_loop_send(sg_loop_t *loop, sg_send_t *recs, size_t n, char *errstr,
                      size_t errstr_size);
sg_err_t sg_loop_produce(sg_loop_t *loop, const sg_effect_t *ef, size_t index,
                         const unsigned char *frame, char *errstr,
                         size_t errstr_size);
sg_err_t sg_loop_deliver_one(sg_loop_t *loop, const sg_effect_t *ef,
                             size_t index, char *errstr, size_t errstr_size);
void sg_loop_note_refusals(sg_loop_t *loop, const sg_effect_t *efs, size_t cnt);
sg_err_t sg_loop_await(sg_loop_t *loop, size_t n, char *errstr,
                       size_t errstr_size);

/* the at_least_once changelog writer (kafka_changelog.c) */
/** Produces a batch's @p ncl changelog records (of its @p cnt effects, of
 *  which @p nout output and DLQ records are in flight, not yet
 *  acknowledged), framed; waits for all of them; then one marker per
 *  changelog partition; checks each landed right after this owner's
 *  previous record (kafka_changelog.h). A failure marks the partitions for
 *  a restore. */
sg_err_t sg_loop_changelog_write(sg_loop_t *loop, const sg_effect_t *efs,
                                 size_t cnt, size_t ncl, size_t nout,
                                 char *errstr, size_t errstr_size);

/* input offsets and group commits (kafka_commit.c) */
rd_kafka_topic_partition_list_t *sg_loop_batch_offsets(sg_loop_t *loop);
void sg_loop_offsets_committed(sg_loop_t *loop,
                               const rd_kafka_topic_partition_list_t *l);
/** Commits the batch's input offsets, once LMDB committed (at_least_once
 *  with a changelog: as durable offsets, a group commit). */
void sg_loop_commit_offsets(sg_loop_t *loop);
/** at_least_once: keeps the batch's input offsets for after the restore
 *  its failed LMDB commit calls for. */
void sg_loop_offsets_pending(sg_loop_t *loop);
void sg_loop_commit_pending(sg_loop_t *loop);
void sg_loop_commit_durable(sg_loop_t *loop, bool wait);
/** Serves the answers of the group commits sent without waiting (a
 *  confirmed one moves part.committed, a failed one is logged as
 *  offset_commit_failed and retried): waits at most @p timeout_ms for them
 *  (0: only those already in). Each turn of the loop calls it. */
void sg_loop_commits_serve(sg_loop_t *loop, int timeout_ms);

/* the batch protocol (kafka_batch.c) */
/** Tells the processor the offset every record effect of the batch's
 *  @p cnt landed at (the delivered() callback). */
void sg_loop_report_delivered(sg_loop_t *loop, const sg_effect_t *efs,
                              size_t cnt);
/** Between two slices of a wait for Kafka inside a batch: takes the
 *  clients' errors into the impairment, writes the stats line when due and
 *  publishes the metrics (at most every SG_PUB_INTERVAL_MS). Nothing of
 *  the batch is decided or committed. */
void sg_loop_waiting(sg_loop_t *loop);
void sg_loop_release(sg_loop_t *loop);
sg_err_t sg_loop_batch(sg_loop_t *loop, const char *why);

#endif /* SEQGATE_KAFKA_INT_H */
