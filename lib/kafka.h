/*
 * kafka.h — the Kafka loop: a librdkafka high-level consumer in a consumer
 * group and an idempotent producer, driving a processor (processor.h) batch
 * by batch. The loop moves records; it never decides.
 *
 * Batch protocol, at_least_once (semantics §6):
 *   1. poll up to batch.max_records records or batch.max_ms;
 *   2. processor: steps 1-4 of processor.h's batch protocol (batch_begin,
 *      process each record, position, tick);
 *   3. produce every output and DLQ effect (enable.idempotence=true,
 *      acks=all; while the batch is decided, an eighth of
 *      batch.max_records at a time: produce while deciding) and, if the
 *      processor keeps state (it has
 *      restore_begin), right behind them the batch's changelog records,
 *      each with the header SG_CHANGELOG_HEADER (kafka_changelog.h); wait
 *      for every delivery report;
 *   4. only if all were delivered: check that each changelog partition's
 *      records landed right after this owner's previous ones; then one
 *      marker per changelog partition, delivered and placed likewise
 *      ("Changelog fencing" below). A batch's changelog records are void
 *      until its marker, so no complete batch describes output Kafka did
 *      not accept; a failed batch's records are repaired under its own
 *      sequence (kafka_changelog.h "repair");
 *   5. only then: processor batch_commit (LMDB), then the input offsets:
 *      with a changelog, committed synchronously at most every
 *      commit_interval_ms and before partitions are revoked (group commit;
 *      the restored store's offset wins at the next assignment), without
 *      one (the pass-through), synchronously after every batch;
 *   6. on any failure: batch_abort and seek every partition of the batch
 *      back to its committed position; the records are read again. Never
 *      skip a record to make progress. A failure from the first changelog
 *      record on also marks the batch's partitions for a restore (the
 *      unfinished batch's records are void, their keys rewritten) before
 *      their records are judged again.
 * On SG_ERR_MAP_FULL from the processor the batch is aborted, the store
 * grown (processor grow) and the same records re-run. A batch_commit that
 * fails after step 4 leaves the store behind its changelog: logged as
 * "store_behind_changelog", the partitions are restored (not re-read).
 *
 * Batch protocol, exactly_once (semantics §6; Kafka Streams' model):
 *   the producer is transactional (transactional.id = the config's
 *   <group.id>-<instance_id>, stable so that a restarted instance fences its
 *   zombie; init_transactions at start; transaction.timeout.ms 10 s unless
 *   set), the consumer reads with isolation.level=read_committed. Per batch
 *   with a record to write or an offset to move:
 *   begin_transaction (before the batch's first record is produced) →
 *   produce every effect (output, DLQ, changelog, snapshot requests; while
 *   the batch is decided, an eighth of batch.max_records at a time, the
 *   changelog after tick: produce while deciding) → wait
 *   for every delivery; processor delivered(i,
 *   offset) for each → send_offsets_to_transaction with the batch's next
 *   offsets and the consumer group metadata (KIP-447; with no offset to
 *   move, the assigned partitions' committed offsets, so every transaction
 *   is fenced by the group generation) → commit_transaction (retried while
 *   retriable) → processor batch_commit (LMDB). rd_kafka_commit is never
 *   called. An abortable error (delivery failure, timeout, KIP-447
 *   generation fencing) aborts the transaction and the batch and rewinds as
 *   in step 5. A fatal producer error (fenced by a newer producer with the
 *   same transactional.id) logs one "fenced" (or "fatal_producer_error")
 *   line and stops the loop: sg_loop_run returns SG_ERR_FATAL. If
 *   batch_commit fails after the transaction committed, the store is behind
 *   its changelog: logged as "store_behind_changelog", every assigned
 *   partition is restored before the next batch.
 *
 * Changelog topics (both guarantees, when the processor keeps state):
 * sg_loop_new ensures each input topic's changelog_topic exists with as
 * many partitions as the input topic and cleanup.policy containing
 * compact: created if missing (replication factor -1: the broker default),
 * checked if present (SG_ERR_CONFIG naming the topic on a mismatch). The
 * group consumer does not subscribe to them.
 *
 * Restore (processor restore_begin/apply/end): inside the rebalance
 * callback, for every newly assigned input partition, before the partition
 * is handed to the consumer (so none of its records is read first): a
 * dedicated group-less read_committed consumer first reads the changelog
 * partition at the offset of the changelog id record the store keeps
 * (changelog_id_get; kafka_changelog.h "The changelog id": not that record
 * there is SG_ERR_FOREIGN), then from the offset restore_begin returns up to
 * its stable end (the
 * partition EOF; if the high watermark is beyond it, an undecided
 * transaction — a dead owner's — is waited for, at most 120 s), through a
 * changelog reader (kafka_changelog.h) that hands restore_apply the records to
 * apply (exactly_once's all; at_least_once's complete batches of the
 * epochs in force), then restore_end. SG_ERR_MAP_FULL grows the store and
 * restarts that partition's restore. One "restore_done" log line per
 * partition (records, void_records, epoch, changelog_id, ms). A changelog
 * partition restored without finding an id record, for a store that keeps
 * none, gets one once the restores are done ("changelog_id_written";
 * exactly_once in a transaction of its own). A failed restore stops the
 * loop (SG_ERR_FATAL; a refusal, SG_ERR_FOREIGN or SG_ERR_CONFIG, with its
 * own code, also when it comes from a restore rerun while running).
 * exactly_once: committed input offsets still held by an open transaction
 * are waited for (at most 120 s) before the partition starts.
 *
 * Changelog fencing (at_least_once; kafka_changelog.h has the record formats
 * and the reader's rule). Without transactions nothing stops an old owner from
 * writing, so the changelog itself says whose records count:
 *   - on assignment, before the restore, per input partition: a claim
 *     record (its offset is the partition's new EPOCH), then a synchronous
 *     offset commit of the group's committed offsets (OffsetCommit carries
 *     the member's generation: it fails once the group moved on, so every
 *     claim that passed precedes, in the log, the claim of any later
 *     owner), then a confirm record. A claim whose check failed is never
 *     confirmed; the assignment is abandoned ("assignment_abandoned") until
 *     the next rebalance;
 *   - every changelog record carries (epoch, batch sequence); a batch counts
 *     only with its marker (or a later batch of the same owner); records of
 *     an epoch older than the newest confirmed one are void;
 *   - after the restore the owner writes the current value of every key the
 *     reader found void, and tombstones of older confirms (the repair,
 *     "changelog_repaired"); a repair or batch whose records do not land
 *     right after the owner's own means another writer is active: the
 *     partition is read again (a newer confirm: "changelog_fenced", the
 *     partition is paused and never written again until revoked).
 * Why a zombie (an owner whose session expired while it was stalled, and
 * which then finishes the batch it had in flight) can only duplicate:
 * (1) its output records are duplicates — the new owner reads the input
 * from the group's committed offset, and the zombie's offset commits fail
 * (generation); (2) its changelog records either precede the new owner's
 * confirm — then the new owner's restore read them, a complete batch is in
 * its store, an incomplete one is void and rewritten — or follow it — then
 * they are void for every reader, and the new owner sees them at its next
 * write (its records do not land right after its own), reads them and
 * rewrites their keys; (3) the zombie itself never commits that batch to
 * LMDB (its records did not land right after its own) and never writes a
 * marker for it. The one window left: compaction may remove a key's valid
 * record once a void record of the key is in a cleaned segment; if the new
 * owner crashed before it rewrote that key, a later restore would miss the
 * key. The log cleaner only cleans inactive segments, so this needs a
 * zombie write, a segment roll and a cleaner pass between the write and
 * the owner's next batch, and a crash of the owner in that interval.
 *
 * Start offset on assignment: exactly_once, the transactional committed
 * offset only (the store is rebuilt from the changelog to match it);
 * at_least_once with a changelog, the later of the group's committed offset
 * and the input offset of the RESTORED store (the changelog holds a batch
 * only once its output was delivered, and an offset is committed only after
 * its batch's changelog: neither can be past a record whose decision is not
 * in Kafka; the local store before the restore is never used — it may lag
 * its changelog, or hold another owner's past); a stateless processor, the
 * later of the committed offset and its store's.
 *
 * Snapshots (snapshot refetch, semantics §4 step 1): the consumer also subscribes to
 * every "kafka" snapshot source's reply_topic; its records go to process()
 * like any other and their offsets are committed the same way. Effects of
 * kind SG_EFFECT_HTTP_GET are not produced: once the batch committed (step
 * 4) the loop starts them on its HTTP fetcher (snapsrc_http_fetch.h, 1 MiB body
 * bound). Completed transfers are kept by the loop and enter the next batch
 * after its Kafka records, as records of SG_SNAPSHOT_HTTP_TOPIC (partition
 * -1, offset -1; processor.h); they have no offset to commit, seek or pause,
 * survive an aborted batch and are freed once a batch holding them
 * committed. SG_PAUSE on such a record is taken as processed. While
 * transfers are in flight the loop drives them between consumer polls, and
 * an idle loop runs a batch as soon as one completes.
 *
 * Records Kafka cannot take (semantics §3 "A record the output topic cannot
 * take"; the loop reports, the processor decides): once connected the loop
 * tells the processor the size limits it found (processor size_limit: the
 * producer's message.max.bytes, every output, DLQ, snapshot request and
 * changelog topic's max.message.bytes less the record batch framing; one
 * "size_limits" log line). A record the producer or the broker refuses for
 * what it is (MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD) is
 * reported (processor refused(index), "output_refused"); if the processor
 * will route it, the batch is aborted and run again at once, without a
 * back-off ("batch_rerun"). When several records of one produce request were
 * refused together, the re-run produces one record at a time until the
 * refused one is named. Nothing is skipped and nothing committed for
 * output Kafka did not accept.
 *
 * Rebalance: before partitions are revoked, the records already polled are
 * processed and committed (steps 2–5) — unless the assignment was lost
 * (session timeout, max.poll.interval.ms): the partitions already belong to
 * another member, and the polled records are dropped unjudged
 * ("batch_dropped_lost"; the new owner reads them). A store owned by
 * another consumer group is refused (SG_ERR_FOREIGN, the loop stops with an
 * error). Both eager and cooperative (KIP-429) assignment strategies are
 * handled: in both, a partition is revoked only after the callback finished
 * its batch, and assigned to the next owner only after that.
 *
 * Properties: the config's "kafka" properties go to both clients verbatim,
 * then "kafka_consumer" / "kafka_producer". The loop sets, unless given:
 * enable.auto.commit=false, enable.auto.offset.store=false,
 * auto.offset.reset=earliest, enable.partition.eof=true (the consumer
 * lag's end), queued.max.messages.kbytes=
 * SG_KAFKA_QUEUED_MAX_KBYTES (consumer); enable.idempotence=true, acks=all
 * (producer; a config that sets them otherwise is rejected). exactly_once
 * adds, always: isolation.level=read_committed (consumer), transactional.id
 * (producer); unless given: transaction.timeout.ms=10000. The restore
 * consumer takes "kafka" and "kafka_consumer" minus the consumer group's
 * own properties (group.*, session/heartbeat/poll intervals, assignment
 * strategy).
 *
 * Logs (docs/operating.md "Logs"): one line per broker event
 * (sg_kafka_log_t); while the loop is impaired — kafka_error lines at
 * warning or worse, consume errors, broker retries, failed batches — it
 * counts the errors, and the first progress after them writes one
 * "kafka_recovered" line {impaired_ms, errors, first_error, last_error,
 * by}: by "batch" (a batch of records or effects committed), "assignment"
 * (the consumer group assigned partitions), or, when idle, "probe" (every
 * assigned partition's leader answered a ListOffsets request, or with
 * none assigned the cluster a metadata request; tried at most every
 * SG_PROBE_INTERVAL_MS once no error came for as long, each try waiting at
 * most SG_PROBE_TIMEOUT_MS). No log field carries a librdkafka sentinel
 * offset: an offset not known is null.
 *
 * Record lifetime: the records the loop passes to process() (key, value,
 * headers, topic) stay valid until that batch's batch_commit or batch_abort
 * has returned, so a processor may point its effects into them without
 * copying (the pass-through processor, passthrough.h, does).
 *
 * Thread-safety: one thread runs the loop; sg_loop_stop() and
 * sg_loop_reload() may be called from any thread or a signal handler.
 */
#ifndef SEQGATE_KAFKA_H
#define SEQGATE_KAFKA_H

#include "config.h"
#include "processor.h"
#include "seqgate.h"

#include <librdkafka/rdkafka.h>

#include <stdatomic.h>

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_loop sg_loop_t;

/** Loop counters (committed batches) and gauges; the fields and their
 *  help are in metrics_list.h (SG_LOOP_STATS). */
#include "metrics_list.h"
typedef struct sg_loop_stats {
        SG_LOOP_STATS(SG_METRIC_FIELD)
} sg_loop_stats_t;

/** Called from the loop thread every stats_interval_ms, and once at exit. */
typedef void(sg_loop_stats_cb)(void *opaque, const sg_loop_stats_t *stats);

/**
 * Creates the consumer and producer, subscribes to the configured input
 * topics (and snapshot reply topics) and checks the topics: every input,
 * output, DLQ, snapshot request and snapshot reply topic must exist;
 * with output_partitioning "input" the output topic must have at least as many
 * partitions as its input topic (otherwise SG_ERR_CONFIG naming both). The
 * cluster preflight (sg_preflight_files, before any client, then
 * sg_preflight_cluster) finds every such problem at once: each is logged
 * (kafka_file_problem, cluster_problem; warnings and notes beside them)
 * and SG_ERR_CONFIG's errstr counts and names them all.
 * exactly_once: also ensures the changelog topics (see above; needs the
 * CreateTopics/DescribeConfigs ACLs when created by seqgate) and calls
 * init_transactions, which fences an older instance with the same
 * transactional.id.
 *
 * @param conf       configuration (borrowed, must outlive the loop).
 * @param proc       processor (copied; its opaque must outlive the loop).
 * @param log_cb     log callback (may be NULL), with @p log_opaque.
 * @param stats_cb   stats callback (may be NULL), with @p stats_opaque.
 * An HTTP fetcher (snapsrc_http_fetch.h) is created when a topic's snapshot
 * source is "http".
 * Retriable broker errors (a leader being elected, a coordinator loading, a
 * request timed out) are retried with back-off, one "kafka_retry" log line
 * each, for at most broker_retry_timeout_ms; then SG_ERR_KAFKA.
 * @returns SG_OK, SG_ERR_CONFIG (bad property: the error names the property
 *          but never a secret's value; a missing topic, a topic the cluster
 *          refuses for what it is), SG_ERR_KAFKA, SG_ERR_FATAL (libcurl
 *          could not be initialised).
 */
sg_err_t sg_loop_new(const sg_config_t *conf, const sg_processor_t *proc,
                     sg_log_cb *log_cb, void *log_opaque,
                     sg_loop_stats_cb *stats_cb, void *stats_opaque,
                     sg_loop_t **loopp, char *errstr, size_t errstr_size);

/**
 * sg_loop_new() in two steps, so that a caller can stop the start-up:
 * sg_loop_create() only allocates (no Kafka client, no I/O; arguments as
 * sg_loop_new(), SG_OK, SG_ERR_INVALID or SG_ERR_NOMEM); sg_loop_connect()
 * does the rest (clients, topic checks, changelogs, init_transactions,
 * subscribe) and returns what sg_loop_new() returns. Retriable broker
 * errors met on the way are retried with back-off for at most the config's
 * broker_retry_timeout_ms (docs/operating.md "Transient broker errors"); an
 * sg_loop_stop() meanwhile (another thread, a signal handler) ends the
 * retries at once and connect returns the error it had. After a failed
 * connect the loop can only be destroyed.
 */
sg_err_t sg_loop_create(const sg_config_t *conf, const sg_processor_t *proc,
                        sg_log_cb *log_cb, void *log_opaque,
                        sg_loop_stats_cb *stats_cb, void *stats_opaque,
                        sg_loop_t **loopp, char *errstr, size_t errstr_size);
sg_err_t sg_loop_connect(sg_loop_t *loop, char *errstr, size_t errstr_size);

/**
 * Runs batches until sg_loop_stop() is called or a fatal error occurs. On
 * stop: finishes and commits the batch in flight, leaves the group
 * (rd_kafka_consumer_close) and returns SG_OK. exactly_once: a fenced
 * producer, a failed restore or a failed transaction abort is fatal
 * (SG_ERR_FATAL).
 * A changelog restore retries retriable broker errors like the start-up
 * (broker_retry_timeout_ms).
 * @returns SG_OK, SG_ERR_FOREIGN, SG_ERR_FATAL (detail in errstr),
 *          SG_ERR_INVALID (the loop is not connected).
 */
sg_err_t sg_loop_run(sg_loop_t *loop, char *errstr, size_t errstr_size);

/** Asks sg_loop_run() to return after the current batch. Async-signal-safe. */
void sg_loop_stop(sg_loop_t *loop);

/**
 * The reload point (semantics "Reloading the configuration"): called on
 * the loop thread between two batches — no batch open, no effect of one
 * pending, nothing of the loop or the processor pointing into a text of
 * the configuration that a reload may replace — once after each
 * sg_loop_reload() (several requests before it: once). The callee may
 * change the loop's configuration there with sg_config_reload(); the loop
 * and the processor read the keys a reload may change anew at each use, so
 * a change applies from the next batch on (a stats period from the next
 * line, a commit interval from the next commit).
 */
typedef void(sg_loop_reload_cb)(void *opaque);

/** Installs @p cb (NULL removes it). Call before sg_loop_run(). */
void sg_loop_set_reload(sg_loop_t *loop, sg_loop_reload_cb *cb, void *opaque);

/**
 * Asks the loop to call its reload callback at its next reload point (one
 * that arrives during the start-up waits for the first). Never stops the
 * loop. Async-signal-safe (SIGHUP's handler calls it).
 */
void sg_loop_reload(sg_loop_t *loop);

struct sg_metrics_snap;

/**
 * Called from the loop thread with a snapshot the loop filled (metrics_pub.h:
 * its stats, the assigned input partitions with their consumer lag and
 * restore progress, whether partitions were assigned once, and at the end
 * whether it stopped and why). The callee may add to it (the engine's
 * numbers) and publish it; it must not keep the pointer.
 */
typedef void(sg_loop_publish_cb)(void *opaque, struct sg_metrics_snap *snap);

/**
 * Installs @p cb: called after every committed batch, on every turn of the
 * loop at most every SG_PUB_INTERVAL_MS, during a changelog restore, after
 * every rebalance and once when sg_loop_run() returns (the HTTP endpoint,
 * metrics_pub.h). Call before sg_loop_run(). NULL removes it.
 */
void sg_loop_set_publish(sg_loop_t *loop, sg_loop_publish_cb *cb, void *opaque);

/**
 * Lines more detailed than @p level (a "dlq" line at debug while the log
 * callback lets info through) are neither built nor passed to the loop's
 * log callback: set it to what the callback keeps, at the start and after
 * every change (a reload). Until set, every level is passed on, for the
 * callback to filter. Thread-safety: any thread (the loop's own and
 * librdkafka's threads read it atomically).
 */
void sg_loop_set_log_level(sg_loop_t *loop, sg_log_level_t level);

/** Current stats (loop thread, or after run returned). */
const sg_loop_stats_t *sg_loop_stats(const sg_loop_t *loop);

/** Destroys the clients. NULL is a no-op. */
void sg_loop_destroy(sg_loop_t *loop);

/** How many librdkafka "FAIL" log lines wait for their client error at
 *  most (sg_kafka_log_t). */
#define SG_KAFKA_FAIL_PENDING 8

/** Where a client's librdkafka log lines and errors go (sg_kafka_conf_new):
 *  events "librdkafka" {client, fac, message} and "kafka_error" {client,
 *  error, reason} to @p log_cb, every string scrubbed of @p conf's secret
 *  values first (sg_config_is_secret).
 *
 *  One line per broker event: librdkafka reports a broker connection's
 *  failure twice, as a log line of facility "FAIL" and as a client error
 *  with the same text (rd_kafka_broker_fail() in librdkafka 2.0.2). The
 *  FAIL line is not written; it is kept in fail[] until the error with its
 *  text comes, and the one "kafka_error" line takes the FAIL line's level
 *  (librdkafka logs an idle connection the broker closed at info, a
 *  refused connection at error), no worse than warning for an error that
 *  passes by itself (sg_kafka_err_retriable(): a broker restarting is not
 *  an error of seqgate's; it becomes one when broker_retry_timeout_ms runs
 *  out). errors and last_error count the kafka_error lines at warning or
 *  worse, for the loop's "kafka_recovered" line (kafka.h "Logs").
 *
 *  Initialise the first three members by name; the rest start zeroed. The
 *  callbacks run on the thread that polls the client. */
typedef struct sg_kafka_log {
        const sg_config_t *conf; /**< whose secrets are redacted */
        sg_log_cb *log_cb;       /**< NULL: nothing is logged */
        void *log_opaque;
        /** Set by the clients' error callback (any thread) when a broker
         *  refused a client's login (RD_KAFKA_RESP_ERR__AUTHENTICATION):
         *  0 none, 1 being written, 2 auth_reason holds librdkafka's
         *  text. Read with sg_kafka_auth_failed(). */
        atomic_int auth_state;
        char auth_reason[400];
        /** The first authorization error a client met (a missing ACL),
         *  as sg_kafka_unauthorized() words it: 0 none, 1 being written,
         *  2 set (sg_kafka_acl_denied()). */
        atomic_int acl_state;
        char acl_denied[400];
        /** The most detailed sg_log_level_t a line is built for
         *  (sg_kafka_log_enabled); 0, as zeroed: every level. Any thread
         *  reads it (librdkafka's log callback); sg_loop_set_log_level()
         *  sets the loop's. */
        atomic_int level;
        struct {
                char client[64];       /**< rd_kafka_name(); "" a free slot */
                char text[512];        /**< the text, without "[thrd:...]: " */
                int level;             /**< librdkafka's (syslog) level */
        } fail[SG_KAFKA_FAIL_PENDING]; /**< FAIL lines awaiting their error */
        unsigned fail_next;            /**< the slot the next one takes */
        uint64_t errors;               /**< kafka_error lines, warning or
                                            worse */
        int64_t errors_since_ms;       /**< sg_clock_mono_ms() when the first of
                                      the errors not taken yet by the
                                      loop was served (0: none): an
                                      impairment starts there, not when
                                      the loop looks */
        char last_error[64];           /**< the last one's error name */
} sg_kafka_log_t;

/**
 * True when a client configured with @p log was refused its login by a
 * broker (a wrong sasl.username or sasl.password, an unknown user, a
 * mechanism the listener does not offer): then @p buf (@p size bytes)
 * holds one sentence for the operator naming the principal, the
 * mechanism and the security protocol of @p rk (any client of the same
 * configuration; NULL: not named) and librdkafka's reason. librdkafka
 * retries a refused login for ever; a caller stops instead (Kafka's Java
 * clients raise SaslAuthenticationException, not retriable). An error
 * callback runs only where its client is polled: rd_kafka_poll() first.
 * Thread-safety: any thread.
 */
bool sg_kafka_auth_failed(sg_kafka_log_t *log, rd_kafka_t *rk, char *buf,
                          size_t size);

/**
 * Writes into @p buf (@p size bytes) what a broker's authorization error
 * @p err means for client @p rk: "not authorized: <principal> needs an ACL
 * allowing <operation> on <resource>" (e.g. operation "Read", resource
 * "topic \"orders\""); the principal is "User:<sasl.username>" under SASL
 * PLAIN or SCRAM. @returns true when @p err is an authorization error
 * (TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
 * false (@p buf untouched) otherwise. Thread-safety: reentrant.
 */
bool sg_kafka_unauthorized(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                           const char *operation, const char *resource,
                           char *buf, size_t size);

/**
 * Records for sg_kafka_acl_denied() that client @p rk met authorization
 * error @p err doing @p operation on @p resource (as
 * sg_kafka_unauthorized()); the first one is kept. @returns whether @p err
 * is an authorization error. Thread-safety: any thread.
 */
bool sg_kafka_acl_note(sg_kafka_log_t *log, rd_kafka_t *rk,
                       rd_kafka_resp_err_t err, const char *operation,
                       const char *resource);

/** True when a client of @p log met an authorization error (a missing
 *  ACL: retrying cannot help): @p buf gets sg_kafka_unauthorized()'s
 *  sentence. Thread-safety: any thread. */
bool sg_kafka_acl_denied(sg_kafka_log_t *log, char *buf, size_t size);

/**
 * Scrubs every string of the log event fields @p fields (a cJSON object,
 * changed in place) of @p conf's secret property values and of the values
 * that came from the environment (docs/configuration.md "Secrets and
 * environment variables"), as sg_kafka_conf_new()'s log lines are; for the
 * callers' own log lines. NULL @p conf or @p fields: nothing. Thread-safety: @p
 * fields must not be shared.
 */
struct cJSON;
void sg_kafka_log_redact(const sg_config_t *conf, struct cJSON *fields);

/**
 * queued.max.messages.kbytes (KiB, as librdkafka's property) of the group
 * consumer unless a "kafka" or "kafka_consumer" block or -X gives one
 * (docs/operating.md "Memory"): the most record bytes librdkafka prefetches
 * into the consumer queue. Anonymous memory measured 3–5× the queued bytes (the
 * fetch responses the records point into, the message structs);
 * librdkafka's default is 65536. About a second of the loop's input must
 * fit, or the loop waits for the fetcher.
 */
#define SG_KAFKA_QUEUED_MAX_KBYTES "32768"

/** How much a preflight finding weighs (sg_preflight_t). */
typedef enum sg_preflight_sev {
        SG_PF_ERROR,   /**< seqgate cannot work so: exit 2 */
        SG_PF_WARNING, /**< it works, but look (TTL below retention, too
                            few replicas) */
        SG_PF_NOTE,    /**< what could not be checked, and why */
} sg_preflight_sev_t;

typedef struct sg_preflight_item {
        sg_preflight_sev_t sev;
        char *text;     /**< one line, naming the key, topic, group or
                             file; never a secret or a value from the
                             environment */
        bool retriable; /**< an error of a passing state of the cluster
                             (a leader being elected): may go away */
} sg_preflight_item_t;

/** The findings of a cluster preflight, in the order found. Zero it
 *  before use; free it with sg_preflight_clear(). */
typedef struct sg_preflight {
        sg_preflight_item_t *items;
        size_t cnt, cap;
        size_t errors, warnings;
        rd_kafka_resp_err_t retry; /**< a retriable error met (a leader
                                        being elected, a request that timed
                                        out): run the pass again */
} sg_preflight_t;

/** Frees the findings of @p pf and zeroes it. NULL is a no-op. */
void sg_preflight_clear(sg_preflight_t *pf);

/**
 * The files the Kafka clients read (kafka_preflight_files.c): every
 * ssl.*.location, ssl.engine.location and sasl.kerberos.keytab of the
 * "kafka", "kafka_consumer" and "kafka_producer" blocks that a client
 * uses (TLS: security.protocol ssl or sasl_ssl; Kerberos: GSSAPI) must
 * name a file (a CA location: or a directory) that seqgate can read; each
 * that does not is an error naming the property (the path too, unless it
 * came from the environment). No client, no network.
 * @returns SG_OK or SG_ERR_NOMEM. Thread-safety: reentrant.
 */
sg_err_t sg_preflight_files(const sg_config_t *conf, sg_preflight_t *pf);

/**
 * One pass of the cluster preflight (kafka_preflight.c lists the checks):
 * topics, partition counts, the changelog topics' settings, replicas,
 * TTL against retention, the ACLs — every finding
 * added to @p pf, nothing stopped at the first. @p changelogs: the
 * processor keeps changelog topics (the engine; not the pass-through
 * baseline), checked too. @p rk: a client of
 * @p conf (a producer; sg_kafka_conf_new) used for metadata and admin
 * requests; nothing is written, created or changed, and no transactional
 * id is used. A retriable error met sets pf->retry.
 * @returns SG_OK or SG_ERR_NOMEM (the findings are in @p pf either way).
 * Thread-safety: one call per client at a time.
 */
sg_err_t sg_preflight_cluster(const sg_config_t *conf, rd_kafka_t *rk,
                              bool changelogs, sg_preflight_t *pf);

/**
 * The consumer group of the preflight (kafka_preflight.c), for
 * `seqgate --check-config --cluster`: a group consumer of @p conf that
 * never subscribes fetches the group's committed offsets of the input
 * topics (OffsetFetch: reads, joins nothing); GROUP_AUTHORIZATION_FAILED
 * is an error (seqgate needs READ on the group), another failure a note.
 * Not DescribeConsumerGroups, whose coordinator request librdkafka 2.0.2
 * aborts the process on when it is retried. Makes and destroys its own
 * client. @returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_preflight_group(const sg_config_t *conf, sg_preflight_t *pf);

/**
 * The replica rules of the preflight for a topic seqgate writes (@p role
 * "changelog topic", ...): min.insync.replicas above the replication
 * factor is an error (every acks=all write refused); on @p brokers >= 3,
 * fewer than 3 replicas or min.insync.replicas below 2 a warning.
 * @p min_isr -2: not known. Adds at most one finding. SG_OK or
 * SG_ERR_NOMEM. Pure but for @p pf.
 */
sg_err_t sg_preflight_replication(sg_preflight_t *pf, const char *role,
                                  const char *topic, int replicas,
                                  int64_t min_isr, int brokers);

/**
 * The dedup TTL against input topic @p topic's retention (semantics §8:
 * the TTL covers the topic's retention): a warning when @p ttl_ms is below
 * @p retention_ms, or the topic keeps records forever (retention.ms -1, or
 * @p policy without "delete": compacted). @p retention_ms -2: not known
 * (nothing said). SG_OK or SG_ERR_NOMEM. Pure but for @p pf.
 */
sg_err_t sg_preflight_retention(sg_preflight_t *pf, const char *topic,
                                int64_t ttl_ms, const char *policy,
                                int64_t retention_ms);

/** The kind of client sg_kafka_conf_new() configures. */
typedef enum sg_kafka_client {
        SG_KAFKA_GROUP_CONSUMER, /**< the consumer group member */
        SG_KAFKA_PRODUCER,       /**< idempotent producer, no transactions,
                                      gapless */
        SG_KAFKA_TXN_PRODUCER,   /**< exactly_once: + transactional.id */
        SG_KAFKA_READER,         /**< group-less read_committed reader that
                                      only assign()s (the changelog restore
                                      consumer; a DLQ reader) */
} sg_kafka_client_t;

/**
 * Builds the librdkafka configuration of a @p client from @p conf (see
 * "Properties" above for what each kind takes and what seqgate sets or
 * refuses): GROUP_CONSUMER and the producers take "kafka" then
 * "kafka_consumer" / "kafka_producer" over seqgate's defaults (the group
 * consumer's include queued.max.messages.kbytes=SG_KAFKA_QUEUED_MAX_KBYTES;
 * READER keeps librdkafka's), then the
 * controlled properties (exactly_once: isolation.level=read_committed;
 * transactional.id and, unless given, transaction.timeout.ms=10000 for
 * TXN_PRODUCER; enable.gapless.guarantee=true for PRODUCER, semantics §6
 * "Output order"); a producer config with enable.idempotence other than
 * true or acks other than all is refused (semantics §6). READER takes "kafka"
 * and "kafka_consumer" minus the consumer group's own properties, then
 * enable.auto.commit=false, enable.auto.offset.store=false,
 * isolation.level=read_committed, enable.partition.eof=true,
 * auto.offset.reset=error, fetch.wait.max.ms=10 and group.id
 * @p reader_group (never joined: librdkafka wants one for assign()).
 * Every kind gets log.queue=true (after rd_kafka_new, call
 * rd_kafka_set_log_queue(rk, NULL): the lines are then served by the
 * client's polls), the log and error callbacks of @p log and @p log as
 * the client's opaque; the caller may add a delivery report or rebalance
 * callback (they receive @p log as opaque) but must not replace the
 * opaque.
 * @param log          borrowed; must outlive the client.
 * @param reader_group READER only (required), else ignored.
 * @returns SG_OK (*kcp: the caller's, for rd_kafka_new or
 *          rd_kafka_conf_destroy), SG_ERR_CONFIG (a property librdkafka or
 *          semantics §6 refuses: errstr names it, never a secret's value),
 *          SG_ERR_INVALID (a NULL argument, READER without a group).
 * Thread-safety: none needed (touches only its arguments).
 */
sg_err_t sg_kafka_conf_new(const sg_config_t *conf, sg_kafka_client_t client,
                           const char *reader_group, sg_kafka_log_t *log,
                           rd_kafka_conf_t **kcp, char *errstr,
                           size_t errstr_size);

/**
 * Starts librdkafka's in-process mock cluster (for the demo and fast tests
 * of Kafka-loop edge cases only) with @p broker_cnt brokers, and creates every
 * topic the config names (snapshot request/reply topics included; with
 * exactly_once the changelog topics, which the mock cannot mark compacted)
 * with @p partition_cnt partitions. The brokers listen
 * on loopback. *bootstrapsp receives a malloc'd "host:port,..." the caller
 * frees; *handlep the mock's owner, destroyed with sg_mock_destroy().
 */
sg_err_t sg_mock_start(const sg_config_t *conf, int broker_cnt,
                       int partition_cnt, void **handlep, char **bootstrapsp,
                       char *errstr, size_t errstr_size);
void sg_mock_destroy(void *handle);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_KAFKA_H */
