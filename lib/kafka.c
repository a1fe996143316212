/*
 * kafka.c — the Kafka loop (kafka.h): a librdkafka high-level consumer in a
 * consumer group and an idempotent producer, driving a processor
 * (processor.h) one batch at a time. The loop moves records; it never
 * decides.
 *
 * This file: sg_loop_create/connect/run/stop/destroy, polling a batch
 * (loop_collect), pauses, stats, retriable broker errors (sg_retry_t) and
 * the partition table. The other concerns, one file each (kafka_int.h
 * has the shared state): kafka_batch.c (the batch protocol and its
 * invariant), kafka_stats.c (lag, gauges, stats, the metrics
 * publication), kafka_commit.c (input offsets, group commits),
 * kafka_changelog.c (the changelog protocol and its writer),
 * kafka_produce.c (producing, delivery reports, refusals), kafka_txn.c
 * (Kafka transactions), kafka_restore.c (changelog restore), kafka_claim.c
 * (changelog claim, fence, repair), kafka_rebalance.c (rebalance
 * callbacks), kafka_admin.c
 * (topic checks, changelog topics, size limits), kafka_conf.c (client
 * configuration, sg_kafka_conf_new), kafka_redact.c (secrets out of log
 * lines), kafka_mock.c (librdkafka's mock cluster).
 *
 * Everything runs on the thread that calls sg_loop_run(): librdkafka's
 * rebalance, error, log and delivery-report callbacks are served from
 * rd_kafka_consumer_poll(), rd_kafka_poll() and rd_kafka_flush() (logs are
 * routed to the main queue with log.queue=true). Only sg_loop_stop() and
 * sg_loop_reload() may be called from elsewhere (each sets a sig_atomic_t
 * flag); the reload itself runs on the loop thread between two batches.
 *
 * Records handed to the processor point into the batch's
 * rd_kafka_message_t objects, which the loop keeps alive until the batch's
 * batch_commit or batch_abort returned (see kafka.h).
 *
 * Snapshot refetch over HTTP (semantics §4): the transfers' bookkeeping
 * is snapsrc_http_fetch.h's (sg_snapshot_http_t); the loop submits a batch's
 * SG_EFFECT_HTTP_GET effects, drains completed transfers into the next
 * batch, commits or aborts them with the batch, and polls the transfers
 * only between batches (loop_collect, back-off).
 */
#include "kafka_int.h"
#include "metrics_pub.h" /* sg_metrics_snap_t */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

void sg_sleep_ms(int64_t ms) {
        struct timespec ts = {.tv_sec = ms / 1000,
                              .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

/** Logs a partition list as {"partitions":["topic/0",...], ...extra}. */
cJSON *sg_kafka_parts_json(const rd_kafka_topic_partition_list_t *l) {
        cJSON *o = cJSON_CreateObject();
        cJSON *a = cJSON_AddArrayToObject(o, "partitions");
        char buf[300];
        for (int i = 0; l && i < l->cnt; i++) {
                snprintf(buf, sizeof(buf), "%s/%" PRId32, l->elems[i].topic,
                         l->elems[i].partition);
                cJSON_AddItemToArray(a, cJSON_CreateString(buf));
        }
        return o;
}

void sg_loop_set_fatal(sg_loop_t *loop, sg_err_t err, const char *what) {
        if (loop->fatal == SG_OK) {
                loop->fatal = err;
                sg_errf(loop->fatal_str, sizeof(loop->fatal_str), "%s", what);
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "error", sg_err2str(err));
        cJSON_AddStringToObject(f, "detail", what);
        sg_loop_log(loop, SG_LOG_ERR, "fatal", f);
        loop->stop = 1;
}

/**
 * Stops the loop on the consumer's fatal error @p code (text @p fes). One
 * is the operator's to fix: FENCED_INSTANCE_ID, another consumer joined the
 * group with this one's group.instance.id (static membership, KIP-345: the
 * newer member takes the older one's place). A restart would fence that one
 * in turn, so it is SG_ERR_CONFIG (exit 2), naming the id and what to
 * change; any other is SG_ERR_FATAL.
 */
static void consumer_fatal(sg_loop_t *loop, rd_kafka_resp_err_t code,
                           const char *fes) {
        if (code != RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) {
                sg_loop_set_fatal(loop, SG_ERR_FATAL, fes);
                return;
        }
        const sg_config_t *c = loop->conf;
        const sg_kv_t *id = NULL;
        for (size_t i = 0; !id && i < c->kafka_consumer_cnt; i++)
                if (!strcmp(c->kafka_consumer[i].name, "group.instance.id"))
                        id = &c->kafka_consumer[i];
        for (size_t i = 0; !id && i < c->kafka_cnt; i++)
                if (!strcmp(c->kafka[i].name, "group.instance.id"))
                        id = &c->kafka[i];
        char what[1024];
        sg_errf(what, sizeof(what),
                "consumer fenced: another consumer joined group \"%s\" with "
                "this one's group.instance.id %s%s%s (static membership, "
                "KIP-345) and took its place; give every instance its own "
                "group.instance.id, or leave it unset: two with one id "
                "fence each other at every restart (%s)",
                c->group_id, id && !sg_config_kv_secret(id) ? "\"" : "",
                !id                       ? "(unknown)"
                : sg_config_kv_secret(id) ? "(from the environment)"
                                          : id->value,
                id && !sg_config_kv_secret(id) ? "\"" : "", fes);
        sg_loop_set_fatal(loop, SG_ERR_CONFIG, what);
}

/**
 * Stops the loop when the group coordinator refuses the consumer's
 * session.timeout.ms (INVALID_SESSION_TIMEOUT: outside the broker's
 * group.min.session.timeout.ms .. group.max.session.timeout.ms). Every
 * JoinGroup is refused the same way, so no retry can end it: it is the
 * operator's to fix, SG_ERR_CONFIG (exit 2), naming the value librdkafka
 * uses (a "6s" in the file is 6 ms: librdkafka reads the leading digits).
 */
static void session_refused(sg_loop_t *loop) {
        char what[768];
        sg_errf(what, sizeof(what),
                "the group coordinator refused session.timeout.ms %" PRId64
                " (INVALID_SESSION_TIMEOUT): it must lie within the "
                "broker's group.min.session.timeout.ms and "
                "group.max.session.timeout.ms (Kafka's defaults: 6000 and "
                "1800000 ms); set kafka.session.timeout.ms within them, in "
                "milliseconds",
                loop->session_timeout_ms);
        sg_loop_set_fatal(loop, SG_ERR_CONFIG, what);
}

/* ------------------------------------------------------------------ */
/* retriable broker errors (start-up, restores, metadata, admin calls)  */

/**
 * True for the broker and client errors that describe a passing state of
 * the cluster — a leader being elected or moved, a coordinator loading, a
 * request that timed out, a broker that is down — the ones Kafka's protocol
 * marks retriable (the Java client's RetriableException family).
 * UNKNOWN_TOPIC_OR_PART is retriable only for a topic known to exist (a
 * changelog topic right after its creation): for a configured topic it means
 * the topic is missing, a configuration error.
 */
bool sg_kafka_err_retriable(rd_kafka_resp_err_t e, bool topic_exists) {
        switch (e) {
        case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
                return topic_exists;
        case RD_KAFKA_RESP_ERR__TRANSPORT:
        case RD_KAFKA_RESP_ERR__TIMED_OUT:
        case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
        case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
        case RD_KAFKA_RESP_ERR__WAIT_COORD:
        case RD_KAFKA_RESP_ERR__WAIT_CACHE:
        case RD_KAFKA_RESP_ERR__RESOLVE:
        case RD_KAFKA_RESP_ERR__RETRY:
        case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
        case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
        case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
        case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
        case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
        case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
        case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        case RD_KAFKA_RESP_ERR_NOT_CONTROLLER:
        case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
        case RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS:
        case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
        case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
        case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
        case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_PREFERRED_LEADER_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT:
        case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
                return true;
        default:
                return false;
        }
}

void sg_retry_init(sg_retry_t *r, const char *during) {
        r->during = during;
        r->start_ms = sg_clock_mono_ms();
        r->backoff_ms = SG_BACKOFF_MIN_MS;
        r->attempt = 0;
}

static void loop_wait(sg_loop_t *loop, int64_t ms);

/**
 * After a failed attempt with @p code (@p detail: what failed, for the log
 * line): if the error is retriable (sg_kafka_err_retriable(), @p topic_exists) and
 * time is left and the loop is not stopping, logs "kafka_retry", waits the
 * back-off and returns true (try again); otherwise returns false, and
 * *gave_up (may be NULL) tells whether a retriable error ran out of time.
 */
bool sg_retry_again(sg_loop_t *loop, sg_retry_t *r, rd_kafka_resp_err_t code,
                    bool topic_exists, const char *detail, bool *gave_up) {
        int64_t budget = loop->conf->broker_retry_timeout_ms > 0
                                 ? loop->conf->broker_retry_timeout_ms
                                 : 120000;
        int64_t elapsed = sg_clock_mono_ms() - r->start_ms;
        bool retriable = sg_kafka_err_retriable(code, topic_exists);
        if (gave_up)
                *gave_up = false;
        /* A refused login is not a broker that is away: librdkafka would
         * try it for ever. Before the loop runs nothing is produced, so
         * serving the producer's queue runs its error callback and
         * nothing else. */
        if (!loop->connected && loop->producer)
                rd_kafka_poll(loop->producer, 0);
        if (atomic_load(&loop->klog.auth_state) == 2 ||
            atomic_load(&loop->klog.acl_state) == 2)
                return false;
        if (!retriable || loop->stop)
                return false;
        if (elapsed >= budget) {
                if (gave_up)
                        *gave_up = true;
                return false;
        }
        int64_t wait = r->backoff_ms;
        if (wait > budget - elapsed)
                wait = budget - elapsed;
        r->attempt++;
        sg_loop_impaired(loop, rd_kafka_err2name(code), r->start_ms);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "during", r->during);
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(code));
        cJSON_AddStringToObject(f, "detail", detail ? detail : "");
        cJSON_AddNumberToObject(f, "attempt", r->attempt);
        cJSON_AddNumberToObject(f, "backoff_ms", (double)wait);
        cJSON_AddNumberToObject(f, "retry_left_ms", (double)(budget - elapsed));
        sg_loop_log(loop, SG_LOG_WARNING, "kafka_retry", f);
        for (int64_t t = 0; t < wait && !loop->stop; t += 50)
                loop_wait(loop, wait - t < 50 ? wait - t : 50);
        r->backoff_ms = r->backoff_ms * 2 > SG_BACKOFF_MAX_MS
                                ? SG_BACKOFF_MAX_MS
                                : r->backoff_ms * 2;
        return !loop->stop;
}

/* ------------------------------------------------------------------ */
/* impaired and recovered (kafka.h "Logs")                             */

void sg_loop_impaired(sg_loop_t *loop, const char *error, int64_t since_ms) {
        int64_t now = sg_clock_mono_ms();
        if (since_ms <= 0 || since_ms > now)
                since_ms = now;
        if (!loop->impaired_ms) {
                loop->impaired_ms = since_ms;
                loop->impaired_errors = 0;
                snprintf(loop->first_error, sizeof(loop->first_error), "%s",
                         error);
        }
        loop->impaired_errors++;
        loop->error_ms = now;
        snprintf(loop->last_error, sizeof(loop->last_error), "%s", error);
}

/** The idle loop's probe of the cluster: every assigned partition's leader
 *  answers a ListOffsets request (what the consumer fetches from), or,
 *  with none assigned, a broker a metadata request; at most
 *  SG_PROBE_TIMEOUT_MS. */
static bool loop_probe(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->part_cnt ? loop->part_cnt : 1));
        for (size_t i = 0; i < loop->part_cnt; i++)
                if (loop->parts[i].assigned)
                        rd_kafka_topic_partition_list_add(
                                l, loop->parts[i].topic,
                                loop->parts[i].partition)
                                ->offset = RD_KAFKA_OFFSET_END;
        bool ok;
        if (l->cnt > 0) {
                ok = rd_kafka_offsets_for_times(loop->consumer, l,
                                                SG_PROBE_TIMEOUT_MS) ==
                     RD_KAFKA_RESP_ERR_NO_ERROR;
                for (int i = 0; ok && i < l->cnt; i++)
                        ok = l->elems[i].err == RD_KAFKA_RESP_ERR_NO_ERROR;
        } else {
                const struct rd_kafka_metadata *md = NULL;
                ok = rd_kafka_metadata(loop->consumer, 0, NULL, &md,
                                       SG_PROBE_TIMEOUT_MS) ==
                     RD_KAFKA_RESP_ERR_NO_ERROR;
                if (md)
                        rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_partition_list_destroy(l);
        return ok;
}

/** Takes the clients' kafka_error lines since the last call (klog.errors)
 *  into the impairment. */
static void loop_errors_take(sg_loop_t *loop) {
        if (loop->klog.errors == loop->klog_errors_seen)
                return;
        uint64_t n = loop->klog.errors - loop->klog_errors_seen;
        loop->klog_errors_seen = loop->klog.errors;
        sg_loop_impaired(loop, loop->klog.last_error,
                         loop->klog.errors_since_ms);
        loop->klog.errors_since_ms = 0;
        loop->impaired_errors += n - 1;
}

/**
 * After a turn of the loop: takes in the clients' kafka_error lines
 * (klog.errors), and ends an impairment at the first progress with one
 * "kafka_recovered" line — @p batch: a batch of records or effects
 * committed; else an assignment since the last turn; else, idle, with no
 * error for SG_PROBE_INTERVAL_MS and no partition lost since the last
 * assignment (then only the consumer group's next assignment shows it), a
 * probe that succeeds (loop_probe, at most every SG_PROBE_INTERVAL_MS).
 */
static void loop_recovery(sg_loop_t *loop, bool batch) {
        loop_errors_take(loop);
        bool assigned = loop->assign_progress;
        loop->assign_progress = false;
        if (!loop->impaired_ms)
                return;
        int64_t now = sg_clock_mono_ms();
        const char *by = batch ? "batch" : assigned ? "assignment" : NULL;
        if (!by && !loop->lost &&
            now - loop->error_ms >= SG_PROBE_INTERVAL_MS &&
            now - loop->probe_ms >= SG_PROBE_INTERVAL_MS) {
                loop->probe_ms = now;
                if (loop_probe(loop))
                        by = "probe";
        }
        if (!by)
                return;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "impaired_ms",
                                (double)(now - loop->impaired_ms));
        cJSON_AddNumberToObject(f, "errors", (double)loop->impaired_errors);
        cJSON_AddStringToObject(f, "first_error", loop->first_error);
        cJSON_AddStringToObject(f, "last_error", loop->last_error);
        cJSON_AddStringToObject(f, "by", by);
        sg_loop_log(loop, SG_LOG_INFO, "kafka_recovered", f);
        loop->impaired_ms = 0;
        loop->impaired_errors = 0;
}

/** The partition table entry of @p topic [@p partition], or SG_NO_PART. */
size_t sg_loop_part(sg_loop_t *loop, const char *topic, int32_t partition) {
        if (loop->last_part < loop->part_cnt &&
            loop->parts[loop->last_part].partition == partition &&
            !strcmp(loop->parts[loop->last_part].topic, topic))
                return loop->last_part;
        for (size_t i = 0; i < loop->part_cnt; i++)
                if (loop->parts[i].partition == partition &&
                    !strcmp(loop->parts[i].topic, topic))
                        return loop->last_part = i;
        return SG_NO_PART;
}

/** Finds or adds the entry (on assignment, the only place a partition
 *  enters the table). SG_NO_PART when out of memory: the library never
 *  exits (seqgate.h), the caller stops the loop with SG_ERR_NOMEM. */
size_t sg_loop_part_add(sg_loop_t *loop, const char *topic, int32_t partition) {
        size_t pi = sg_loop_part(loop, topic, partition);
        if (pi != SG_NO_PART)
                return pi;
        if (loop->part_cnt == loop->part_cap) {
                size_t cap = loop->part_cap ? loop->part_cap * 2 : 16;
                sg_part_t *p = realloc(loop->parts, cap * sizeof(*p));
                if (!p)
                        return SG_NO_PART;
                loop->parts = p;
                loop->part_cap = cap;
        }
        sg_part_t *p = &loop->parts[loop->part_cnt];
        memset(p, 0, sizeof(*p));
        p->topic = strdup(topic);
        if (!p->topic)
                return SG_NO_PART;
        p->partition = partition;
        p->committed = -1;
        p->durable = -1;
        p->start = -1;
        p->pause_offset = -1;
        p->cl_epoch = -1;
        p->cl_next = -1;
        p->lag = -1;
        p->seen = -1;
        p->eof = -1;
        p->restore_target = -1;
        return loop->last_part = loop->part_cnt++;
}

/* ------------------------------------------------------------------ */
/* HTTP snapshot transfers (snapsrc_http_fetch.h)                      */

/** sg_snapshot_http_log_cb: the transfers' events go out like the loop's
 *  own (redacted, sg_loop_log). */
static void http_log(void *opaque, sg_log_level_t level, const char *event,
                     cJSON *fields) {
        sg_loop_log(opaque, level, event, fields);
}

/** Drives the fetcher, waiting at most @p wait_ms; completed transfers are
 *  kept for the next batch. Never called while a batch runs. */
static void http_drive(sg_loop_t *loop, int wait_ms) {
        if (sg_snapshot_http_in_flight(loop->http) == 0 || loop->batch_running)
                return;
        loop->http_polled_ms = sg_clock_mono_ms();
        sg_snapshot_http_poll(loop->http, wait_ms);
        loop->stats.snapshot_http_in_flight =
                (int64_t)sg_snapshot_http_in_flight(loop->http);
}

static bool http_busy(const sg_loop_t *loop) {
        return sg_snapshot_http_in_flight(loop->http) > 0;
}

/** Waits @p ms (back-off) while still driving the HTTP transfers. */
static void loop_wait(sg_loop_t *loop, int64_t ms) {
        int64_t end = sg_clock_mono_ms() + ms, left;
        while (http_busy(loop) && (left = end - sg_clock_mono_ms()) > 0)
                http_drive(loop, (int)left);
        if ((left = end - sg_clock_mono_ms()) > 0)
                sg_sleep_ms(left);
}

/** The input topic whose changelog_topic is @p name, or NULL. */
const sg_topic_config_t *sg_loop_topic_of_changelog(const sg_loop_t *loop,
                                                    const char *name) {
        for (size_t i = 0; i < loop->conf->topic_cnt; i++)
                if (loop->conf->topics[i].changelog_topic &&
                    !strcmp(loop->conf->topics[i].changelog_topic, name))
                        return &loop->conf->topics[i];
        return NULL;
}

sg_err_t sg_loop_create(const sg_config_t *conf, const sg_processor_t *proc,
                        sg_log_cb *log_cb, void *log_opaque,
                        sg_loop_stats_cb *stats_cb, void *stats_opaque,
                        sg_loop_t **loopp, char *errstr, size_t errstr_size) {
        if (!conf || !proc || !loopp || !proc->batch_begin || !proc->process ||
            !proc->tick || !proc->effects || !proc->batch_commit ||
            !proc->batch_abort || !proc->assign || conf->topic_cnt == 0) {
                sg_errf(errstr, errstr_size, "sg_loop_new: invalid argument");
                return SG_ERR_INVALID;
        }
        if (conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE &&
            !conf->transactional_id) {
                sg_errf(errstr, errstr_size,
                        "exactly_once without a transactional id");
                return SG_ERR_INVALID;
        }
        sg_loop_t *loop = calloc(1, sizeof(*loop));
        if (!loop)
                return SG_ERR_NOMEM;
        loop->conf = conf;
        loop->proc = *proc;
        loop->klog = (sg_kafka_log_t){
                .conf = conf, .log_cb = log_cb, .log_opaque = log_opaque};
        loop->stats_cb = stats_cb;
        loop->stats_opaque = stats_opaque;
        loop->stats.consumer_lag = -1;
        loop->eos = conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE;
        loop->msg_cap = conf->batch_max_records > 0
                                ? (size_t)conf->batch_max_records
                                : 1000;
        loop->msgs = calloc(loop->msg_cap, sizeof(*loop->msgs));
        loop->recs = calloc(loop->msg_cap, sizeof(*loop->recs));
        loop->rec_part = calloc(loop->msg_cap, sizeof(*loop->rec_part));
        loop->batch_parts = calloc(loop->msg_cap, sizeof(*loop->batch_parts));
        if (!loop->msgs || !loop->recs || !loop->rec_part ||
            !loop->batch_parts ||
            sg_snapshot_http_new(SG_HTTP_MAX_BODY, http_log, loop,
                                 &loop->http) != SG_OK) {
                sg_loop_destroy(loop);
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        *loopp = loop;
        return SG_OK;
}

/* sg_loop_connect's Kafka steps, in order, each only once the one before
 * succeeded: the files the clients read, the clients, the cluster
 * preflight (kafka_preflight.c: every problem at once), the topic checks, the changelog topics and the
 * restore consumer (exactly_once, or at_least_once with a changelog), the
 * size limits, init_transactions (exactly_once). */
static sg_err_t loop_start_clients(sg_loop_t *loop, char *errstr,
                                   size_t errstr_size) {
        sg_err_t err;
        /* every file the clients read, and then every finding of the
         * cluster preflight, all at once: one start for every problem */
        if ((err = sg_loop_preflight_files(loop, errstr, errstr_size)))
                return err;
        if ((err = sg_loop_client_new(loop, false, &loop->producer, errstr,
                                      errstr_size)))
                return err;
        if ((err = sg_loop_client_new(loop, true, &loop->consumer, errstr,
                                      errstr_size)))
                return err;
        /* NULL (no memory): group commits wait for their answer */
        loop->commit_q = rd_kafka_queue_new(loop->consumer);
        if ((err = sg_loop_preflight(loop, errstr, errstr_size)) ||
            (err = sg_loop_check_topics(loop, errstr, errstr_size)))
                return err;
        if (loop->eos || loop->alos_cl) {
                if ((err = sg_loop_ensure_changelogs(loop, errstr,
                                                     errstr_size)))
                        return err;
                if ((err = sg_loop_restorer_new(loop, errstr, errstr_size)))
                        return err;
                if ((err = sg_loop_standby_new(loop, errstr, errstr_size)))
                        return err;
        }
        if ((err = sg_loop_size_limits(loop, errstr, errstr_size)))
                return err;
        if (loop->eos)
                return sg_loop_init_transactions(loop, errstr, errstr_size);
        return SG_OK;
}

sg_err_t sg_loop_connect(sg_loop_t *loop, char *errstr, size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        sg_err_t err;
        if (loop->producer || loop->consumer) {
                sg_errf(errstr, errstr_size, "sg_loop_connect: called twice");
                return SG_ERR_INVALID;
        }
        /* A processor that restores keeps state that must follow its
         * partitions: a changelog in both guarantees (semantics §6). */
        loop->changelog = loop->proc.restore_begin &&
                          loop->proc.restore_apply && loop->proc.restore_end;
        loop->alos_cl = !loop->eos && loop->changelog;
        /* the restore consumer's group.id: <transactional id>.restore */
        char id[512];
        snprintf(loop->restore_group, sizeof(loop->restore_group), "%s.restore",
                 sg_loop_transactional_id(conf, id, sizeof(id)));
        snprintf(loop->txid, sizeof(loop->txid), "%s",
                 sg_loop_transactional_id(conf, id, sizeof(id)));
        if ((err = loop_start_clients(loop, errstr, errstr_size))) {
                if (loop->producer)
                        rd_kafka_poll(loop->producer, 0);
                /* what failed first was the login, however it showed */
                if (sg_kafka_auth_failed(&loop->klog, loop->producer, errstr,
                                         errstr_size) ||
                    sg_kafka_acl_denied(&loop->klog, errstr, errstr_size))
                        return SG_ERR_CONFIG;
                if (err == SG_ERR_FATAL && loop->fatal != SG_OK)
                        sg_errf(errstr, errstr_size, "%s", loop->fatal_str);
                return err == SG_ERR_FATAL ? SG_ERR_KAFKA : err;
        }

        bool http = false;
        for (size_t i = 0; i < conf->topic_cnt; i++)
                http |= conf->topics[i].snapshot.source == SG_SNAP_HTTP;
        if (http &&
            (err = sg_snapshot_http_open(loop->http, errstr, errstr_size)))
                return err;

        /* Input topics, then every snapshot reply topic (snapshot refetch, semantics §4), each
         * name once. */
        rd_kafka_topic_partition_list_t *sub =
                rd_kafka_topic_partition_list_new((int)conf->topic_cnt * 2);
        for (size_t i = 0; i < 2 * conf->topic_cnt; i++) {
                const sg_topic_config_t *tc =
                        &conf->topics[i % conf->topic_cnt];
                const char *name = i < conf->topic_cnt ? tc->name
                                   : tc->snapshot.source == SG_SNAP_KAFKA
                                           ? tc->snapshot.reply_topic
                                           : NULL;
                if (name && !rd_kafka_topic_partition_list_find(
                                    sub, name, RD_KAFKA_PARTITION_UA))
                        rd_kafka_topic_partition_list_add(
                                sub, name, RD_KAFKA_PARTITION_UA);
        }
        rd_kafka_resp_err_t e = rd_kafka_subscribe(loop->consumer, sub);
        rd_kafka_topic_partition_list_destroy(sub);
        if (e) {
                sg_errf(errstr, errstr_size, "subscribing: %s",
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        loop->connected = true;
        /* from here the group's first assignment is awaited (/readyz,
         * assignment_waiting) */
        loop->assign_wait_ms = sg_clock_mono_ms();
        char st[32];
        size_t stn = sizeof(st);
        loop->session_timeout_ms =
                rd_kafka_conf_get(rd_kafka_conf(loop->consumer),
                                  "session.timeout.ms", st,
                                  &stn) == RD_KAFKA_CONF_OK
                        ? strtoll(st, NULL, 10)
                        : -1;
        return SG_OK;
}

/** Once, SG_ASSIGN_HINT_MS into a wait for the group's first assignment:
 *  a log line that says why it may last (the previous member's session,
 *  a rebalance) and how to look (sg_assign_hint). A restart after a
 *  kill -9 is otherwise silent until the session expires. */
static void loop_assign_hint(sg_loop_t *loop) {
        int64_t waited = sg_clock_mono_ms() - loop->assign_wait_ms;
        if (!loop->assign_wait_ms || loop->assign_hinted ||
            waited < SG_ASSIGN_HINT_MS)
                return;
        loop->assign_hinted = true;
        const char *group = loop->conf->group_id ? loop->conf->group_id : "";
        char hint[768];
        sg_assign_hint(hint, sizeof(hint), group, loop->session_timeout_ms,
                       waited);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "group_id", group);
        cJSON_AddNumberToObject(f, "waiting_ms", (double)waited);
        if (loop->session_timeout_ms >= 0)
                cJSON_AddNumberToObject(f, "session_timeout_ms",
                                        (double)loop->session_timeout_ms);
        cJSON_AddStringToObject(f, "hint", hint);
        sg_loop_log(loop, SG_LOG_NOTICE, "assignment_waiting", f);
}

sg_err_t sg_loop_new(const sg_config_t *conf, const sg_processor_t *proc,
                     sg_log_cb *log_cb, void *log_opaque,
                     sg_loop_stats_cb *stats_cb, void *stats_opaque,
                     sg_loop_t **loopp, char *errstr, size_t errstr_size) {
        sg_loop_t *loop = NULL;
        sg_err_t err = sg_loop_create(conf, proc, log_cb, log_opaque, stats_cb,
                                      stats_opaque, &loop, errstr, errstr_size);
        if (!err && (err = sg_loop_connect(loop, errstr, errstr_size))) {
                sg_loop_destroy(loop);
                loop = NULL;
        }
        if (!err)
                *loopp = loop;
        return err;
}

/* ------------------------------------------------------------------ */
/* run                                                                 */

static void loop_resume_due(sg_loop_t *loop) {
        int64_t now = sg_clock_mono_ms();
        rd_kafka_topic_partition_list_t *l = NULL;
        for (size_t i = 0; i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (!p->paused_until || p->paused_until > now)
                        continue;
                p->paused_until = 0;
                if (!p->assigned)
                        continue;
                if (!l)
                        l = rd_kafka_topic_partition_list_new(4);
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
        }
        if (l) {
                rd_kafka_resume_partitions(loop->consumer, l);
                sg_loop_log(loop, SG_LOG_INFO, "partitions_resumed",
                            sg_kafka_parts_json(l));
                rd_kafka_topic_partition_list_destroy(l);
        }
}

/** Polls one batch: up to batch.max_records, or until sg_config_batch_ms()
 *  after the batch's window opened (≥ 100 ms idle without a record).
 *
 *  The window opens when the batch's oldest record may have arrived
 *  (semantics §6 "Batches and latency"): at the end of the previous
 *  collection when a record was already waiting as this one began (it
 *  came while the previous batch was decided and committed), else when
 *  the first record comes. So a record waits at most batch.max_ms to be
 *  collected plus one batch's processing, not the previous batch's as
 *  well; once the window has passed, the batch takes what is already
 *  fetched (polls that do not wait) up to batch.max_records, and closes. */
static void loop_collect(sg_loop_t *loop) {
        int64_t start = sg_clock_mono_ms();
        int64_t max_ms = sg_config_batch_ms(loop->conf);
        int64_t deadline = start + max_ms; /* set by the first record */
        int64_t idle_deadline =
                start + (max_ms > SG_IDLE_POLL_MS ? max_ms : SG_IDLE_POLL_MS);
        bool first = true;   /* the first poll: what is already fetched */
        bool waited = false; /* a poll was allowed to wait */
        bool got = false;    /* the last poll returned something */
        http_drive(loop, 0); /* transfers that completed during the batch */
        /* the clock is read once per record: the loop's condition reads
         * it for the next turn's timeout */
        int64_t now = sg_clock_mono_ms();
        do {
                int64_t left = (loop->msg_cnt ? deadline : idle_deadline) - now;
                if (first)
                        left = 0;
                first = false;
                /* HTTP transfers in flight: take turns with the fetcher. */
                bool busy = http_busy(loop);
                if (busy && left > SG_HTTP_SLICE_MS)
                        left = SG_HTTP_SLICE_MS;
                if (loop->msg_cnt == 0 &&
                    sg_snapshot_http_pending(loop->http) > 0)
                        left = 0; /* results to judge: do not idle */
                if (left > 0)
                        waited = true;
                rd_kafka_message_t *m = rd_kafka_consumer_poll(
                        loop->consumer, left > 0 ? (int)left : 0);
                got = m != NULL;
                if (busy && (!m || sg_clock_mono_ms() != loop->http_polled_ms))
                        http_drive(loop, m ? 0 : (int)(left > 0 ? left : 0));
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && m->rkt) {
                        /* read to the end a read_committed consumer can
                         * read (its last stable offset): the lag's end */
                        size_t pi =
                                sg_loop_part(loop, rd_kafka_topic_name(m->rkt),
                                             m->partition);
                        if (pi != SG_NO_PART && loop->parts[pi].assigned &&
                            m->offset >= 0)
                                loop->parts[pi].eof = m->offset;
                }
                if (m->err) {
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                sg_loop_impaired(loop,
                                                 rd_kafka_err2name(m->err), 0);
                                char fes[512];
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(
                                        f, "error", rd_kafka_err2name(m->err));
                                cJSON_AddStringToObject(
                                        f, "message",
                                        rd_kafka_message_errstr(m));
                                if (m->rkt)
                                        cJSON_AddStringToObject(
                                                f, "topic",
                                                rd_kafka_topic_name(m->rkt));
                                sg_loop_log(loop, SG_LOG_WARNING,
                                            "consume_error", f);
                                /* the consumer group (joining, committing)
                                 * or an input topic (fetching) */
                                char res[300];
                                bool grp =
                                        m->err ==
                                        RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED;
                                snprintf(res, sizeof(res), "%s \"%s\"",
                                         grp ? "group" : "topic",
                                         grp      ? loop->conf->group_id
                                         : m->rkt ? rd_kafka_topic_name(m->rkt)
                                                  : "?");
                                sg_kafka_acl_note(&loop->klog, loop->consumer,
                                                  m->err, "Read", res);
                                rd_kafka_resp_err_t fe = rd_kafka_fatal_error(
                                        loop->consumer, fes, sizeof(fes));
                                if (fe)
                                        consumer_fatal(loop, fe, fes);
                                else if (
                                        m->err ==
                                        RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT)
                                        session_refused(loop);
                        }
                        rd_kafka_message_destroy(m);
                        continue;
                }
                size_t pi = sg_loop_part(loop, rd_kafka_topic_name(m->rkt),
                                         m->partition);
                if (pi == SG_NO_PART || loop->parts[pi].paused_until ||
                    !loop->parts[pi].assigned) {
                        /* Fetched before the pause (or the assignment):
                         * read again on resume. */
                        rd_kafka_message_destroy(m);
                        continue;
                }
                loop->parts[pi].seen = m->offset + 1;
                loop->parts[pi].eof = -1;
                if (loop->msg_cnt == 0) {
                        /* the window opens: waiting since the previous
                         * collection ended, or arrived now */
                        int64_t opened = !waited && loop->collected_ms
                                                 ? loop->collected_ms
                                                 : sg_clock_mono_ms();
                        deadline = opened + max_ms;
                }
                loop->rec_part[loop->msg_cnt] = pi;
                loop->msgs[loop->msg_cnt++] = m;
        } while (!loop->stop && loop->fatal == SG_OK &&
                 loop->msg_cnt < loop->msg_cap &&
                 /* an idle loop judges HTTP results at once */
                 (loop->msg_cnt > 0 ||
                  sg_snapshot_http_pending(loop->http) == 0) &&
                 ((now = sg_clock_mono_ms()) <
                          (loop->msg_cnt ? deadline : idle_deadline) ||
                  (loop->msg_cnt && got)));
        loop->collected_ms = sg_clock_mono_ms();
}

void sg_loop_waiting(sg_loop_t *loop) {
        loop_errors_take(loop);
        sg_loop_stats_due(loop);
        sg_loop_publish(loop, false);
}

void sg_loop_set_reload(sg_loop_t *loop, sg_loop_reload_cb *cb, void *opaque) {
        loop->reload_cb = cb;
        loop->reload_opaque = opaque;
}

void sg_loop_reload(sg_loop_t *loop) {
        if (loop)
                loop->reload = 1;
}

/** The reload point: the callback may have changed the configuration's
 *  live keys; a shorter stats period takes effect now, not after the old
 *  one ran out. */
static void loop_reload(sg_loop_t *loop) {
        loop->reload = 0;
        if (loop->reload_cb)
                loop->reload_cb(loop->reload_opaque);
        int64_t next = sg_clock_mono_ms() + loop->conf->stats_interval_ms;
        if (loop->conf->stats_interval_ms > 0 && next < loop->next_stats_ms)
                loop->next_stats_ms = next;
}

sg_err_t sg_loop_run(sg_loop_t *loop, char *errstr, size_t errstr_size) {
        if (!loop || !loop->connected) {
                sg_errf(errstr, errstr_size,
                        "sg_loop_run: the loop is not connected");
                return SG_ERR_INVALID;
        }
        loop->next_stats_ms =
                sg_clock_mono_ms() + loop->conf->stats_interval_ms;
        while (!loop->stop && loop->fatal == SG_OK) {
                char aes[1024];
                if (sg_kafka_acl_denied(&loop->klog, aes, sizeof(aes)) ||
                    sg_kafka_auth_failed(&loop->klog, loop->producer, aes,
                                         sizeof(aes))) {
                        /* a refused login (a password rotated on the
                         * brokers, not here) is the operator's to fix */
                        sg_loop_set_fatal(loop, SG_ERR_CONFIG, aes);
                        break;
                }
                if (loop->restore_needed) {
                        /* LMDB fell behind the changelog (batch_commit
                         * failed after the batch reached Kafka), or
                         * (at_least_once) a batch stopped half way through
                         * its changelog records: restore those partitions
                         * before judging anything more. */
                        char es[512] = "";
                        sg_loop_log(loop, SG_LOG_NOTICE, "restore_rerun", NULL);
                        sg_err_t rerr = sg_loop_restore(loop, NULL, NULL, es,
                                                        sizeof(es));
                        sg_loop_restore_outcome(loop, rerr, es);
                        if (rerr == SG_OK) {
                                loop->restore_needed = false;
                                sg_loop_commit_pending(loop);
                        } else if (sg_err_needs_operator(rerr)) {
                                /* a refusal (semantics §6: a store ahead
                                 * of its changelog, a changelog that is not
                                 * the store's): trying again cannot help;
                                 * stop as the assignment's restore does */
                                char what[600];
                                sg_errf(what, sizeof(what), "restore: %s", es);
                                sg_loop_set_fatal(loop, rerr, what);
                                break;
                        } else {
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(f, "error", es);
                                sg_loop_log(loop, SG_LOG_ERR, "restore_failed",
                                            f);
                                /* Wait and try again. Not rd_kafka_poll on
                                 * the consumer: its queue is the main queue
                                 * (rd_kafka_poll_set_consumer) and holds
                                 * fetched records, which librdkafka asserts
                                 * on there. Heartbeats go on in librdkafka's
                                 * threads; a restore failing longer than
                                 * max.poll.interval.ms loses the
                                 * partitions to a rebalance, which is
                                 * right for a member that cannot work. */
                                for (int t = 0; t < 20 && !loop->stop; t++)
                                        loop_wait(loop, 50);
                                continue;
                        }
                }
                /* between two batches: the reload point (kafka.h) */
                if (loop->reload)
                        loop_reload(loop);
                uint64_t batches = loop->stats.batches_total;
                sg_loop_commits_serve(loop, 0);
                loop_resume_due(loop);
                loop_collect(loop);
                loop_assign_hint(loop);
                if (loop->fatal != SG_OK)
                        break;
                if (loop->stop && loop->msg_cnt == 0)
                        break;
                int64_t t0 = sg_clock_mono_ms();
                bool failed = sg_loop_batch(loop, NULL) != SG_OK;
                if (failed)
                        sg_loop_impaired(loop, "batch_failed", t0);
                if (failed && !loop->stop) {
                        /* Back off 100 ms, doubling up to 5 s; stay stoppable. */
                        loop->backoff_ms = loop->backoff_ms
                                                   ? loop->backoff_ms * 2
                                                   : SG_BACKOFF_MIN_MS;
                        if (loop->backoff_ms > SG_BACKOFF_MAX_MS)
                                loop->backoff_ms = SG_BACKOFF_MAX_MS;
                        for (int64_t t = 0; t < loop->backoff_ms && !loop->stop;
                             t += 50)
                                loop_wait(loop, 50);
                }
                /* between two batches: the standby partitions' tails
                 * (semantics §6 "Standby replicas") */
                if (!failed && !loop->restore_needed)
                        sg_loop_standby_turn(loop);
                /* a committed batch publishes at once (sg_loop_publish) */
                sg_loop_publish(loop, loop->stats.batches_total != batches);
                loop_recovery(loop, loop->stats.batches_total != batches &&
                                            !loop->batch_idle);
                sg_loop_stats_due(loop);
        }
        sg_loop_release(loop); /* after a fatal error: read again next time */

        /* Leave the group: the revoke callback commits the input offsets
         * waiting for their group commit (no records are pending) and tells
         * the processor. */
        rd_kafka_resp_err_t e = rd_kafka_consumer_close(loop->consumer);
        if (e) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(e));
                sg_loop_log(loop, SG_LOG_WARNING, "consumer_close_failed", f);
        }
        /* a clean stop checkpoints (the revoke did, if there was one) */
        sg_loop_checkpoint(loop, "stop");
        if (loop->producer)
                rd_kafka_flush(loop->producer,
                               (int)loop->conf->delivery_timeout_ms);
        sg_loop_stats_emit(loop);
        loop->run_ended = true;
        sg_loop_publish(loop, true);
        if (loop->fatal != SG_OK) {
                sg_errf(errstr, errstr_size, "%s", loop->fatal_str);
                return loop->fatal;
        }
        sg_loop_log(loop, SG_LOG_INFO, "loop_stopped", NULL);
        return SG_OK;
}

void sg_loop_stop(sg_loop_t *loop) {
        if (loop)
                loop->stop = 1;
}

const sg_loop_stats_t *sg_loop_stats(const sg_loop_t *loop) {
        return &loop->stats;
}

void sg_loop_destroy(sg_loop_t *loop) {
        if (!loop)
                return;
        sg_loop_release(loop);
        if (loop->commit_q)
                rd_kafka_queue_destroy(loop->commit_q);
        if (loop->consumer)
                rd_kafka_destroy(loop->consumer);
        sg_loop_topics_destroy(loop);
        free(loop->rkts);
        if (loop->producer)
                rd_kafka_destroy(loop->producer);
        sg_loop_standby_destroy(loop);
        if (loop->restorer) {
                rd_kafka_consumer_close(loop->restorer);
                rd_kafka_destroy(loop->restorer);
        }
        sg_loop_takeover_destroy(loop);
        free(loop->dr_offs);
        free(loop->dr_errs);
        if (loop->pending_offsets)
                rd_kafka_topic_partition_list_destroy(loop->pending_offsets);
        for (size_t i = 0; i < loop->part_cnt; i++)
                free(loop->parts[i].topic);
        free(loop->parts);
        free(loop->msgs);
        free(loop->recs);
        free(loop->rec_part);
        free(loop->batch_parts);
        free(loop->hdrs);
        sg_snapshot_http_destroy(loop->http);
        if (loop->pub_snap)
                sg_metrics_snap_free(loop->pub_snap);
        free(loop->pub_snap);
        free(loop);
}
