/*
 * kafka.c — the Kafka loop (kafka.h): a librdkafka high-level consumer in a
 * consumer group and an idempotent producer, driving a processor
 * (processor.h) one batch at a time. The loop moves records; it never
 * decides.
 *
 * Invariant (semantics §6, at_least_once), relied on by loop_batch():
 *     produce every effect → every delivery report succeeded
 *     → processor batch_commit (LMDB) → commit the input offsets.
 * LMDB is never committed before Kafka accepted the batch's output, and an
 * input offset is never committed before LMDB. Any failure aborts the
 * processor's batch and seeks every partition of the batch back to its
 * first record in the batch, so the records are read again; nothing is
 * skipped to make progress.
 *
 * Everything runs on the thread that calls sg_loop_run(): librdkafka's
 * rebalance, error, log and delivery-report callbacks are served from
 * rd_kafka_consumer_poll(), rd_kafka_poll() and rd_kafka_flush() (logs are
 * routed to the main queue with log.queue=true). Only sg_loop_stop() may be
 * called from elsewhere (it sets a sig_atomic_t flag).
 *
 * Records handed to the processor point into the batch's
 * rd_kafka_message_t objects, which the loop keeps alive until the batch's
 * batch_commit or batch_abort returned (see kafka.h).
 *
 * Snapshot refetch over HTTP (issue 3): SG_EFFECT_HTTP_GET effects are
 * copied out of the processor before batch_commit and started on the
 * fetcher only after the batch committed (so the request is durable in the
 * store before it is sent). Completed transfers are copied into
 * loop->http_done by the fetcher callback, which only runs between batches
 * (loop_collect, back-off), never while a batch points into that array; the
 * next batch feeds them to the processor after its Kafka records as
 * SG_SNAPSHOT_HTTP_TOPIC records and frees them only once it committed.
 */
#include "kafka.h"
#include "snapshot_http.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SG_METADATA_TIMEOUT_MS 10000
#define SG_COMMITTED_TIMEOUT_MS 10000
#define SG_SEEK_TIMEOUT_MS 5000
#define SG_IDLE_POLL_MS 100
#define SG_BACKOFF_MIN_MS 100
#define SG_BACKOFF_MAX_MS 5000
#define SG_HTTP_SLICE_MS 5            /* consumer/fetcher turn while GETs run */
#define SG_HTTP_MAX_BODY (1024 * 1024) /* snapshot response bound: 1 MiB */

/** A completed HTTP snapshot transfer waiting for (or in) a batch. */
typedef struct sg_http_done {
        char *request_id;      /**< owned; the record's key */
        char *body;            /**< owned; NULL when no response came */
        size_t body_len;
        char *error;           /**< owned; curl's message, or NULL */
        char status[24];       /**< decimal HTTP status, "0": no response */
        sg_header_t hdrs[2];   /**< SG_H_HTTP_STATUS [, SG_H_HTTP_ERROR] */
} sg_http_done_t;

/** An SG_EFFECT_HTTP_GET copied out of the processor (its memory ends with
 *  batch_commit; the GET starts after it). */
typedef struct sg_http_req {
        char *request_id, *url, *auth_env; /**< owned; auth_env may be NULL */
        int64_t timeout_ms;
} sg_http_req_t;

/** A topic-partition the loop has seen, with its batch bookkeeping. */
typedef struct sg_part {
        char *topic;           /**< owned */
        int32_t partition;
        bool assigned;         /**< currently assigned to this consumer */
        int64_t committed;     /**< next offset committed by us, -1 unknown */
        int64_t paused_until;  /**< monotonic ms to resume at, 0: not paused */
        /* batch state, valid while in_batch */
        bool in_batch;
        int64_t first_offset;  /**< first offset of this partition in the batch */
        int64_t next_offset;   /**< offset after the last processed record */
        int64_t pause_offset;  /**< record the processor paused at, -1 none */
} sg_part_t;

struct sg_loop {
        const sg_config_t *conf;
        sg_processor_t proc;
        sg_log_cb *log_cb;
        void *log_opaque;
        sg_loop_stats_cb *stats_cb;
        void *stats_opaque;

        rd_kafka_t *consumer;
        rd_kafka_t *producer;

        volatile sig_atomic_t stop;
        sg_err_t fatal;          /**< SG_OK, or why the loop must stop */
        char fatal_str[512];

        sg_loop_stats_t stats;
        int64_t next_stats_ms;   /**< monotonic */
        int64_t backoff_ms;

        /* the batch being collected / run */
        rd_kafka_message_t **msgs;
        size_t msg_cnt, msg_cap;
        sg_record_t *recs;
        size_t *rec_part;        /**< index into parts, per record */
        sg_header_t *hdrs;
        size_t hdr_cap;
        size_t *batch_parts;     /**< indexes of the partitions in the batch */
        size_t batch_part_cnt;
        bool batch_running;

        sg_part_t *parts;
        size_t part_cnt, part_cap;
        size_t last_part;        /**< last loop_part() hit: records come in runs */

        /* delivery reports of the current batch (generation-tagged) */
        uintptr_t batch_gen;
        size_t dr_ok, dr_fail;
        rd_kafka_resp_err_t dr_err;

        /* HTTP snapshot refetch (snapshot_http.h) */
        sg_fetcher_t *fetcher;   /**< NULL until an "http" source needs it */
        sg_http_done_t *http_done; /**< completed, not yet committed */
        size_t http_done_cnt, http_done_cap;
        size_t http_batch_cnt;   /**< http_done[0..n) are in the batch */
        sg_record_t *http_recs;  /**< their records, built per batch */
        size_t http_recs_cap;
        sg_http_req_t *http_reqs; /**< GETs of the batch, started on commit */
        size_t http_req_cnt, http_req_cap;
        int64_t http_polled_ms;  /**< last fetcher drive (monotonic) */
};

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

static int64_t sg_mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t sg_wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sg_sleep_ms(int64_t ms) {
        struct timespec ts = {.tv_sec = ms / 1000,
                              .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

static void sg_errf(char *errstr, size_t size, const char *fmt, ...) {
        va_list ap;
        if (!errstr || size == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(errstr, size, fmt, ap);
        va_end(ap);
}

/** Emits @p event with @p fields (consumed, may be NULL) to the log callback. */
static void loop_log(sg_loop_t *loop, sg_log_level_t level, const char *event,
                     cJSON *fields) {
        if (loop->log_cb) {
                char *txt = fields ? cJSON_PrintUnformatted(fields) : NULL;
                loop->log_cb(loop->log_opaque, level, event, txt);
                cJSON_free(txt);
        }
        cJSON_Delete(fields);
}

/** Logs a partition list as {"partitions":["topic/0",...], ...extra}. */
static cJSON *parts_json(const rd_kafka_topic_partition_list_t *l) {
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

static void loop_set_fatal(sg_loop_t *loop, sg_err_t err, const char *what) {
        if (loop->fatal == SG_OK) {
                loop->fatal = err;
                snprintf(loop->fatal_str, sizeof(loop->fatal_str), "%s", what);
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "error", sg_err2str(err));
        cJSON_AddStringToObject(f, "detail", what);
        loop_log(loop, SG_LOG_ERR, "fatal", f);
        loop->stop = 1;
}

/** Finds (or adds) the partition table entry; returns its index. */
static size_t loop_part(sg_loop_t *loop, const char *topic, int32_t partition) {
        if (loop->last_part < loop->part_cnt &&
            loop->parts[loop->last_part].partition == partition &&
            !strcmp(loop->parts[loop->last_part].topic, topic))
                return loop->last_part;
        for (size_t i = 0; i < loop->part_cnt; i++)
                if (loop->parts[i].partition == partition &&
                    !strcmp(loop->parts[i].topic, topic))
                        return loop->last_part = i;
        if (loop->part_cnt == loop->part_cap) {
                size_t cap = loop->part_cap ? loop->part_cap * 2 : 16;
                sg_part_t *p = realloc(loop->parts, cap * sizeof(*p));
                if (!p)
                        abort(); /* tiny allocation; nothing sane to do */
                loop->parts = p;
                loop->part_cap = cap;
        }
        sg_part_t *p = &loop->parts[loop->part_cnt];
        memset(p, 0, sizeof(*p));
        p->topic = strdup(topic);
        if (!p->topic)
                abort();
        p->partition = partition;
        p->committed = -1;
        p->pause_offset = -1;
        return loop->last_part = loop->part_cnt++;
}

/* ------------------------------------------------------------------ */
/* HTTP snapshot transfers                                             */

static void http_done_free(sg_http_done_t *d) {
        free(d->request_id);
        free(d->body);
        free(d->error);
}

/** sg_fetch_cb: keeps a completed transfer for the next batch. Runs only
 *  between batches (see the file comment). */
static void http_on_done(void *opaque, const sg_fetch_result_t *res) {
        sg_loop_t *loop = opaque;
        if (loop->http_done_cnt == loop->http_done_cap) {
                size_t cap = loop->http_done_cap ? loop->http_done_cap * 2
                                                 : 16;
                sg_http_done_t *d =
                        realloc(loop->http_done, cap * sizeof(*d));
                if (!d)
                        goto nomem;
                loop->http_done = d;
                loop->http_done_cap = cap;
        }
        sg_http_done_t *d = &loop->http_done[loop->http_done_cnt];
        memset(d, 0, sizeof(*d));
        d->request_id = strdup(res->request_id);
        if (res->body) {
                d->body = malloc(res->body_len ? res->body_len : 1);
                if (d->body && res->body_len)
                        memcpy(d->body, res->body, res->body_len);
                d->body_len = res->body_len;
        }
        if (res->error)
                d->error = strdup(res->error);
        if (!d->request_id || (res->body && !d->body) ||
            (res->error && !d->error)) {
                http_done_free(d);
                goto nomem;
        }
        snprintf(d->status, sizeof(d->status), "%ld", res->status);
        loop->http_done_cnt++;
        return;
nomem:;
        /* The processor's own request timeout re-issues the request. */
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "request_id", res->request_id);
        cJSON_AddStringToObject(f, "error", "out of memory");
        loop_log(loop, SG_LOG_WARNING, "snapshot_http_result_dropped", f);
}

/** Drives the fetcher, waiting at most @p wait_ms; completed transfers go
 *  to loop->http_done. Never called while a batch runs. */
static void http_drive(sg_loop_t *loop, int wait_ms) {
        if (!loop->fetcher || sg_fetcher_in_flight(loop->fetcher) == 0 ||
            loop->batch_running)
                return;
        loop->http_polled_ms = sg_mono_ms();
        sg_fetcher_poll(loop->fetcher, wait_ms, http_on_done, loop);
        loop->stats.snapshot_http_in_flight =
                (int64_t)sg_fetcher_in_flight(loop->fetcher);
}

static bool http_busy(const sg_loop_t *loop) {
        return loop->fetcher && sg_fetcher_in_flight(loop->fetcher) > 0;
}

/** Waits @p ms (back-off) while still driving the HTTP transfers. */
static void loop_wait(sg_loop_t *loop, int64_t ms) {
        int64_t end = sg_mono_ms() + ms, left;
        while (http_busy(loop) && (left = end - sg_mono_ms()) > 0)
                http_drive(loop, (int)left);
        if ((left = end - sg_mono_ms()) > 0)
                sg_sleep_ms(left);
}

static void http_reqs_clear(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->http_req_cnt; i++) {
                free(loop->http_reqs[i].request_id);
                free(loop->http_reqs[i].url);
                free(loop->http_reqs[i].auth_env);
        }
        loop->http_req_cnt = 0;
}

/** Copies an SG_EFFECT_HTTP_GET effect (before batch_commit). */
static sg_err_t http_req_add(sg_loop_t *loop, const sg_effect_t *ef,
                             char *errstr, size_t errstr_size) {
        if (!ef->url || !ef->request_id) {
                sg_errf(errstr, errstr_size,
                        "HTTP_GET effect without url or request_id");
                return SG_ERR_INVALID;
        }
        if (loop->http_req_cnt == loop->http_req_cap) {
                size_t cap = loop->http_req_cap ? loop->http_req_cap * 2 : 16;
                sg_http_req_t *r = realloc(loop->http_reqs, cap * sizeof(*r));
                if (!r)
                        goto nomem;
                loop->http_reqs = r;
                loop->http_req_cap = cap;
        }
        sg_http_req_t *r = &loop->http_reqs[loop->http_req_cnt];
        r->request_id = strdup(ef->request_id);
        r->url = strdup(ef->url);
        r->auth_env = ef->auth_env ? strdup(ef->auth_env) : NULL;
        r->timeout_ms = ef->timeout_ms;
        if (!r->request_id || !r->url || (ef->auth_env && !r->auth_env)) {
                free(r->request_id);
                free(r->url);
                free(r->auth_env);
                goto nomem;
        }
        loop->http_req_cnt++;
        return SG_OK;
nomem:
        sg_errf(errstr, errstr_size, "out of memory copying HTTP requests");
        return SG_ERR_NOMEM;
}

/** Starts the committed batch's GETs. A GET that cannot start is logged:
 *  the processor's request timeout re-issues it. */
static void http_reqs_start(sg_loop_t *loop) {
        char es[512];
        if (loop->http_req_cnt > 0 && !loop->fetcher &&
            sg_fetcher_new(SG_HTTP_MAX_BODY, &loop->fetcher, es,
                           sizeof(es)) != SG_OK) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", es);
                cJSON_AddNumberToObject(f, "requests",
                                        (double)loop->http_req_cnt);
                loop_log(loop, SG_LOG_ERR, "snapshot_http_submit_failed", f);
        }
        for (size_t i = 0; loop->fetcher && i < loop->http_req_cnt; i++) {
                const sg_http_req_t *r = &loop->http_reqs[i];
                es[0] = '\0';
                sg_err_t err = sg_fetcher_submit(loop->fetcher, r->request_id,
                                                 r->url, r->auth_env,
                                                 r->timeout_ms, es, sizeof(es));
                if (err) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "request_id",
                                                r->request_id);
                        cJSON_AddStringToObject(f, "error", sg_err2str(err));
                        cJSON_AddStringToObject(f, "reason", es);
                        loop_log(loop, SG_LOG_WARNING,
                                 "snapshot_http_submit_failed", f);
                }
        }
        http_reqs_clear(loop);
        if (loop->fetcher)
                loop->stats.snapshot_http_in_flight =
                        (int64_t)sg_fetcher_in_flight(loop->fetcher);
}

/** Frees the completed transfers a committed batch consumed. */
static void http_done_consumed(sg_loop_t *loop) {
        size_t n = loop->http_batch_cnt;
        if (n == 0)
                return;
        for (size_t i = 0; i < n; i++)
                http_done_free(&loop->http_done[i]);
        memmove(loop->http_done, loop->http_done + n,
                (loop->http_done_cnt - n) * sizeof(*loop->http_done));
        loop->http_done_cnt -= n;
        loop->http_batch_cnt = 0;
}

/* ------------------------------------------------------------------ */
/* librdkafka callbacks                                                */

static void cb_log(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
        sg_loop_t *loop = rd_kafka_opaque(rk);
        if (!loop || !loop->log_cb)
                return;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "client", rd_kafka_name(rk));
        cJSON_AddStringToObject(f, "fac", fac);
        cJSON_AddStringToObject(f, "message", buf);
        if (level < SG_LOG_ERR)
                level = SG_LOG_ERR;
        if (level > SG_LOG_DEBUG)
                level = SG_LOG_DEBUG;
        loop_log(loop, (sg_log_level_t)level, "librdkafka", f);
}

static void cb_error(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque) {
        sg_loop_t *loop = opaque;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "client", rd_kafka_name(rk));
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(err));
        cJSON_AddStringToObject(f, "reason", reason);
        loop_log(loop,
                 err == RD_KAFKA_RESP_ERR__FATAL ? SG_LOG_ERR : SG_LOG_WARNING,
                 "kafka_error", f);
}

static void cb_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        sg_loop_t *loop = opaque;
        (void)rk;
        if ((uintptr_t)m->_private != loop->batch_gen)
                return; /* a report for an aborted batch */
        if (m->err) {
                loop->dr_fail++;
                if (!loop->dr_err)
                        loop->dr_err = m->err;
        } else {
                loop->dr_ok++;
        }
}

static sg_err_t loop_batch(sg_loop_t *loop, const char *why);

static void on_assign(sg_loop_t *loop, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts,
                      bool cooperative) {
        char es[512];
        int i;
        sg_err_t err = SG_OK;

        loop->stats.rebalances_total++;
        for (i = 0; i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];
                int64_t stored = -1;
                es[0] = '\0';
                err = loop->proc.assign(loop->proc.opaque, tp->topic,
                                        tp->partition, loop->conf->group_id,
                                        &stored, es, sizeof(es));
                if (err == SG_ERR_MAP_FULL && loop->proc.grow &&
                    loop->proc.grow(loop->proc.opaque, es, sizeof(es)) ==
                            SG_OK) {
                        loop->stats.map_grows_total++;
                        err = loop->proc.assign(loop->proc.opaque, tp->topic,
                                                tp->partition,
                                                loop->conf->group_id, &stored,
                                                es, sizeof(es));
                }
                if (err != SG_OK)
                        break;
                tp->offset = stored >= 0 ? stored : RD_KAFKA_OFFSET_INVALID;
        }
        if (err != SG_OK) {
                char what[800];
                snprintf(what, sizeof(what), "assign %s/%" PRId32 ": %s",
                         parts->elems[i].topic, parts->elems[i].partition, es);
                for (int j = 0; j < i; j++)
                        if (loop->proc.revoke)
                                loop->proc.revoke(loop->proc.opaque,
                                                  parts->elems[j].topic,
                                                  parts->elems[j].partition);
                loop_set_fatal(loop,
                               err == SG_ERR_FOREIGN ? SG_ERR_FOREIGN
                                                     : SG_ERR_FATAL,
                               what);
                if (!cooperative)
                        rd_kafka_assign(rk, NULL);
                return;
        }

        /* Start at max(group's committed offset, store's offset). */
        rd_kafka_topic_partition_list_t *c =
                rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_resp_err_t cerr =
                rd_kafka_committed(rk, c, SG_COMMITTED_TIMEOUT_MS);
        if (cerr) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(cerr));
                loop_log(loop, SG_LOG_WARNING, "committed_offsets_unknown", f);
        }
        for (i = 0; i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];
                int64_t committed = -1;
                if (!cerr && !c->elems[i].err && c->elems[i].offset >= 0)
                        committed = c->elems[i].offset;
                if (committed >= 0 && committed > tp->offset)
                        tp->offset = committed;
                size_t pi = loop_part(loop, tp->topic, tp->partition);
                loop->parts[pi].assigned = true;
                loop->parts[pi].paused_until = 0;
                loop->parts[pi].committed = committed;
        }
        rd_kafka_topic_partition_list_destroy(c);

        if (cooperative) {
                rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
                if (e) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_error_string(e));
                        loop_log(loop, SG_LOG_ERR, "assign_failed", f);
                        rd_kafka_error_destroy(e);
                }
        } else {
                rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
                if (e) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(e));
                        loop_log(loop, SG_LOG_ERR, "assign_failed", f);
                }
        }
        /* A partition we paused before losing it must not stay paused. */
        rd_kafka_resume_partitions(rk, parts);

        cJSON *f = parts_json(parts);
        cJSON *offs = cJSON_AddArrayToObject(f, "start_offsets");
        for (i = 0; i < parts->cnt; i++)
                cJSON_AddItemToArray(
                        offs, cJSON_CreateNumber((double)parts->elems[i].offset));
        cJSON_AddStringToObject(f, "protocol",
                                cooperative ? "COOPERATIVE" : "EAGER");
        loop_log(loop, SG_LOG_INFO, "partitions_assigned", f);
}

static void on_revoke(sg_loop_t *loop, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts,
                      bool cooperative, bool lost) {
        loop->stats.rebalances_total++;
        /* Finish what was polled before giving the partitions away. */
        if (loop->msg_cnt > 0 && !loop->batch_running)
                loop_batch(loop, lost ? "partitions lost" :
                                        "partitions revoked");

        for (int i = 0; i < parts->cnt; i++) {
                size_t pi = loop_part(loop, parts->elems[i].topic,
                                      parts->elems[i].partition);
                if (!loop->parts[pi].assigned)
                        continue;
                if (loop->proc.revoke)
                        loop->proc.revoke(loop->proc.opaque,
                                          parts->elems[i].topic,
                                          parts->elems[i].partition);
                loop->parts[pi].assigned = false;
                loop->parts[pi].paused_until = 0;
                loop->parts[pi].committed = -1;
        }
        if (cooperative) {
                rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);
                if (e)
                        rd_kafka_error_destroy(e);
        } else {
                rd_kafka_assign(rk, NULL);
        }
        cJSON *f = parts_json(parts);
        cJSON_AddBoolToObject(f, "lost", lost);
        loop_log(loop, SG_LOG_INFO, "partitions_revoked", f);
}

static void cb_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts,
                         void *opaque) {
        sg_loop_t *loop = opaque;
        bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");

        switch (err) {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                if (loop->fatal != SG_OK) {
                        /* Stopping: take nothing on. */
                        if (!coop)
                                rd_kafka_assign(rk, NULL);
                        return;
                }
                on_assign(loop, rk, parts, coop);
                break;
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
                on_revoke(loop, rk, parts, coop,
                          rd_kafka_assignment_lost(rk) != 0);
                break;
        default: {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(err));
                loop_log(loop, SG_LOG_ERR, "rebalance_failed", f);
                rd_kafka_assign(rk, NULL);
                break;
        }
        }
}

/* ------------------------------------------------------------------ */
/* client creation                                                     */

/** Sets one property; a secret's value never reaches errstr. */
static sg_err_t conf_set(rd_kafka_conf_t *kc, const char *name,
                         const char *value, char *errstr, size_t errstr_size) {
        char es[512];
        if (rd_kafka_conf_set(kc, name, value, es, sizeof(es)) ==
            RD_KAFKA_CONF_OK)
                return SG_OK;
        if (sg_config_is_secret(name))
                sg_errf(errstr, errstr_size,
                        "kafka property \"%s\": invalid value (not shown: "
                        "secret)",
                        name);
        else
                sg_errf(errstr, errstr_size, "kafka property \"%s\": %s",
                        name, es);
        return SG_ERR_CONFIG;
}

static sg_err_t conf_set_list(rd_kafka_conf_t *kc, const sg_kv_t *kv,
                              size_t cnt, bool producer, char *errstr,
                              size_t errstr_size) {
        for (size_t i = 0; i < cnt; i++) {
                /* The required kafka.group.id only makes a producer warn. */
                if (producer && !strcmp(kv[i].name, "group.id"))
                        continue;
                sg_err_t err = conf_set(kc, kv[i].name, kv[i].value, errstr,
                                        errstr_size);
                if (err)
                        return err;
        }
        return SG_OK;
}

/** Builds a client configuration: defaults, then "kafka", then @p specific. */
static sg_err_t loop_conf(sg_loop_t *loop, bool consumer, rd_kafka_conf_t **kcp,
                          char *errstr, size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        sg_err_t err = SG_OK;
        static const char *const cdefs[][2] = {
                {"enable.auto.commit", "false"},
                {"enable.auto.offset.store", "false"},
                {"auto.offset.reset", "earliest"},
                {"enable.partition.eof", "false"},
        };
        static const char *const pdefs[][2] = {
                {"enable.idempotence", "true"},
                {"acks", "all"},
                {"linger.ms", "5"},
                /* Java client's partitioner for records without a
                 * partition (output_partitioning murmur2, semantics §5). */
                {"partitioner", "murmur2_random"},
        };
        const char *const(*defs)[2] = consumer ? cdefs : pdefs;
        size_t ndefs = consumer ? sizeof(cdefs) / sizeof(cdefs[0])
                                : sizeof(pdefs) / sizeof(pdefs[0]);

        for (size_t i = 0; !err && i < ndefs; i++)
                err = conf_set(kc, defs[i][0], defs[i][1], errstr,
                               errstr_size);
        if (!err)
                err = conf_set(kc, "log.queue", "true", errstr, errstr_size);
        if (!err && consumer && conf->group_id)
                err = conf_set(kc, "group.id", conf->group_id, errstr,
                               errstr_size);
        if (!err)
                err = conf_set_list(kc, conf->kafka, conf->kafka_cnt,
                                    !consumer, errstr, errstr_size);
        if (!err && consumer)
                err = conf_set_list(kc, conf->kafka_consumer,
                                    conf->kafka_consumer_cnt, false, errstr,
                                    errstr_size);
        if (!err && !consumer)
                err = conf_set_list(kc, conf->kafka_producer,
                                    conf->kafka_producer_cnt, true, errstr,
                                    errstr_size);
        if (!err && !consumer) {
                /* semantics §6: idempotent producer, acks=all. */
                char v[32];
                size_t vs = sizeof(v);
                if (rd_kafka_conf_get(kc, "enable.idempotence", v, &vs) ==
                            RD_KAFKA_CONF_OK &&
                    strcmp(v, "true")) {
                        sg_errf(errstr, errstr_size,
                                "kafka property \"enable.idempotence\" must be "
                                "true (semantics §6)");
                        err = SG_ERR_CONFIG;
                }
                vs = sizeof(v);
                if (!err &&
                    rd_kafka_conf_get(kc, "acks", v, &vs) ==
                            RD_KAFKA_CONF_OK &&
                    strcmp(v, "all") && strcmp(v, "-1")) {
                        sg_errf(errstr, errstr_size,
                                "kafka property \"acks\" must be all "
                                "(semantics §6)");
                        err = SG_ERR_CONFIG;
                }
        }
        if (err) {
                rd_kafka_conf_destroy(kc);
                return err;
        }
        rd_kafka_conf_set_opaque(kc, loop);
        rd_kafka_conf_set_log_cb(kc, cb_log);
        rd_kafka_conf_set_error_cb(kc, cb_error);
        if (consumer)
                rd_kafka_conf_set_rebalance_cb(kc, cb_rebalance);
        else
                rd_kafka_conf_set_dr_msg_cb(kc, cb_dr);
        *kcp = kc;
        return SG_OK;
}

static sg_err_t loop_client_new(sg_loop_t *loop, bool consumer,
                                rd_kafka_t **rkp, char *errstr,
                                size_t errstr_size) {
        rd_kafka_conf_t *kc;
        char es[512];
        sg_err_t err = loop_conf(loop, consumer, &kc, errstr, errstr_size);
        if (err)
                return err;
        rd_kafka_t *rk = rd_kafka_new(
                consumer ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, kc, es,
                sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "creating the %s: %s",
                        consumer ? "consumer" : "producer", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_set_log_queue(rk, NULL); /* logs served by poll */
        if (consumer)
                rd_kafka_poll_set_consumer(rk);
        *rkp = rk;
        return SG_OK;
}

static const rd_kafka_metadata_topic_t *
md_topic(const rd_kafka_metadata_t *md, const char *name) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, name))
                        return md->topics[i].err ? NULL : &md->topics[i];
        return NULL;
}

/** Start-up checks: topics exist; partition counts fit (semantics §5). */
static sg_err_t loop_check_topics(sg_loop_t *loop, char *errstr,
                                  size_t errstr_size) {
        const rd_kafka_metadata_t *md;
        rd_kafka_resp_err_t e = rd_kafka_metadata(loop->producer, 1, NULL, &md,
                                                  SG_METADATA_TIMEOUT_MS);
        if (e) {
                sg_errf(errstr, errstr_size,
                        "reading cluster metadata: %s", rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < loop->conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &loop->conf->topics[i];
                const char *names[3] = {tc->name, tc->output_topic,
                                        tc->dlq_topic};
                const rd_kafka_metadata_topic_t *mt[3];
                for (int k = 0; k < 3; k++) {
                        mt[k] = md_topic(md, names[k]);
                        if (!mt[k]) {
                                sg_errf(errstr, errstr_size,
                                        "topic \"%s\" (%s of input topic "
                                        "\"%s\") does not exist",
                                        names[k],
                                        k == 0 ? "input"
                                        : k == 1 ? "output"
                                                 : "DLQ",
                                        tc->name);
                                err = SG_ERR_CONFIG;
                                break;
                        }
                }
                if (!err && tc->snapshot.source == SG_SNAP_KAFKA) {
                        const char *sn[2] = {tc->snapshot.request_topic,
                                             tc->snapshot.reply_topic};
                        for (int k = 0; !err && k < 2; k++) {
                                if (sn[k] && md_topic(md, sn[k]))
                                        continue;
                                sg_errf(errstr, errstr_size,
                                        "topic \"%s\" (snapshot %s topic of "
                                        "input topic \"%s\") does not exist",
                                        sn[k] ? sn[k] : "(none)",
                                        k == 0 ? "request" : "reply",
                                        tc->name);
                                err = SG_ERR_CONFIG;
                        }
                }
                if (!err && tc->output_partitioning == SG_PART_INPUT &&
                    mt[1]->partition_cnt < mt[0]->partition_cnt) {
                        sg_errf(errstr, errstr_size,
                                "output topic \"%s\" has %d partition(s), "
                                "fewer than input topic \"%s\" (%d); "
                                "output_partitioning \"input\" needs at "
                                "least as many (semantics §5)",
                                tc->output_topic, mt[1]->partition_cnt,
                                tc->name, mt[0]->partition_cnt);
                        err = SG_ERR_CONFIG;
                }
        }
        rd_kafka_metadata_destroy(md);
        return err;
}

sg_err_t sg_loop_new(const sg_config_t *conf, const sg_processor_t *proc,
                     sg_log_cb *log_cb, void *log_opaque,
                     sg_loop_stats_cb *stats_cb, void *stats_opaque,
                     sg_loop_t **loopp, char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (!conf || !proc || !loopp || !proc->batch_begin || !proc->process ||
            !proc->tick || !proc->effects || !proc->batch_commit ||
            !proc->batch_abort || !proc->assign || conf->topic_cnt == 0) {
                sg_errf(errstr, errstr_size, "sg_loop_new: invalid argument");
                return SG_ERR_INVALID;
        }
        sg_loop_t *loop = calloc(1, sizeof(*loop));
        if (!loop)
                return SG_ERR_NOMEM;
        loop->conf = conf;
        loop->proc = *proc;
        loop->log_cb = log_cb;
        loop->log_opaque = log_opaque;
        loop->stats_cb = stats_cb;
        loop->stats_opaque = stats_opaque;
        loop->stats.consumer_lag = -1;
        loop->msg_cap = conf->batch_max_records > 0
                                ? (size_t)conf->batch_max_records
                                : 1000;
        loop->msgs = calloc(loop->msg_cap, sizeof(*loop->msgs));
        loop->recs = calloc(loop->msg_cap, sizeof(*loop->recs));
        loop->rec_part = calloc(loop->msg_cap, sizeof(*loop->rec_part));
        loop->batch_parts = calloc(loop->msg_cap, sizeof(*loop->batch_parts));
        if (!loop->msgs || !loop->recs || !loop->rec_part ||
            !loop->batch_parts) {
                sg_loop_destroy(loop);
                return SG_ERR_NOMEM;
        }

        if ((err = loop_client_new(loop, false, &loop->producer, errstr,
                                   errstr_size)) ||
            (err = loop_client_new(loop, true, &loop->consumer, errstr,
                                   errstr_size)) ||
            (err = loop_check_topics(loop, errstr, errstr_size))) {
                sg_loop_destroy(loop);
                return err;
        }

        bool http = false;
        for (size_t i = 0; i < conf->topic_cnt; i++)
                http |= conf->topics[i].snapshot.source == SG_SNAP_HTTP;
        if (http && (err = sg_fetcher_new(SG_HTTP_MAX_BODY, &loop->fetcher,
                                          errstr, errstr_size))) {
                sg_loop_destroy(loop);
                return err;
        }

        /* Input topics, then every snapshot reply topic (issue 3), each
         * name once. */
        rd_kafka_topic_partition_list_t *sub =
                rd_kafka_topic_partition_list_new((int)conf->topic_cnt * 2);
        for (size_t i = 0; i < 2 * conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i % conf->topic_cnt];
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
                sg_loop_destroy(loop);
                return SG_ERR_KAFKA;
        }
        *loopp = loop;
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* one batch                                                           */

/** Turns the collected messages into records; fills the batch's partition list. */
static sg_err_t loop_prepare(sg_loop_t *loop) {
        size_t nh = 0;
        for (size_t i = 0; i < loop->msg_cnt; i++) {
                rd_kafka_headers_t *h = NULL;
                if (!rd_kafka_message_headers(loop->msgs[i], &h))
                        nh += rd_kafka_header_cnt(h);
        }
        if (nh > loop->hdr_cap) {
                sg_header_t *hs = realloc(loop->hdrs, nh * sizeof(*hs));
                if (!hs)
                        return SG_ERR_NOMEM;
                loop->hdrs = hs;
                loop->hdr_cap = nh;
        }
        loop->batch_part_cnt = 0;
        nh = 0;
        for (size_t i = 0; i < loop->msg_cnt; i++) {
                rd_kafka_message_t *m = loop->msgs[i];
                sg_record_t *r = &loop->recs[i];
                rd_kafka_headers_t *h = NULL;
                rd_kafka_timestamp_type_t tst;

                r->topic = rd_kafka_topic_name(m->rkt);
                r->partition = m->partition;
                r->offset = m->offset;
                r->timestamp_ms = rd_kafka_message_timestamp(m, &tst);
                r->key = m->key;
                r->key_len = m->key_len;
                r->value = m->payload;
                r->value_len = m->len;
                r->headers = loop->hdrs + nh;
                r->header_cnt = 0;
                if (!rd_kafka_message_headers(m, &h)) {
                        const char *name;
                        const void *val;
                        size_t vs;
                        for (size_t k = 0; !rd_kafka_header_get_all(
                                     h, k, &name, &val, &vs);
                             k++) {
                                loop->hdrs[nh].name = name;
                                loop->hdrs[nh].value = val;
                                loop->hdrs[nh].value_len = val ? vs : 0;
                                nh++;
                                r->header_cnt++;
                        }
                }
                size_t pi = loop->rec_part[i]; /* set by loop_collect() */
                if (!loop->parts[pi].in_batch) {
                        loop->parts[pi].in_batch = true;
                        loop->parts[pi].first_offset = r->offset;
                        loop->batch_parts[loop->batch_part_cnt++] = pi;
                }
        }

        /* Completed HTTP transfers: records of the pseudo topic, no offset
         * (processor.h). They stay in http_done until a batch commits. */
        if (loop->http_done_cnt > loop->http_recs_cap) {
                sg_record_t *hr = realloc(loop->http_recs,
                                          loop->http_done_cnt * sizeof(*hr));
                if (!hr)
                        return SG_ERR_NOMEM;
                loop->http_recs = hr;
                loop->http_recs_cap = loop->http_done_cnt;
        }
        loop->http_batch_cnt = loop->http_done_cnt;
        for (size_t i = 0; i < loop->http_batch_cnt; i++) {
                sg_http_done_t *d = &loop->http_done[i];
                d->hdrs[0] = (sg_header_t){.name = SG_H_HTTP_STATUS,
                                           .value = d->status,
                                           .value_len = strlen(d->status)};
                d->hdrs[1] = (sg_header_t){
                        .name = SG_H_HTTP_ERROR,
                        .value = d->error,
                        .value_len = d->error ? strlen(d->error) : 0};
                loop->http_recs[i] = (sg_record_t){
                        .topic = SG_SNAPSHOT_HTTP_TOPIC,
                        .partition = -1,
                        .offset = -1,
                        .timestamp_ms = -1,
                        .key = d->request_id,
                        .key_len = strlen(d->request_id),
                        .value = d->body,
                        .value_len = d->body ? d->body_len : 0,
                        .headers = d->hdrs,
                        .header_cnt = d->error ? 2 : 1,
                };
        }
        return SG_OK;
}

/** Produces one effect, waiting while the producer's queue is full. */
static sg_err_t loop_produce(sg_loop_t *loop, const sg_effect_t *ef,
                             char *errstr, size_t errstr_size) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(ef->header_cnt +
                                                     ef->extra_cnt);
        for (size_t k = 0; k < ef->header_cnt; k++)
                rd_kafka_header_add(h, ef->headers[k].name, -1,
                                    ef->headers[k].value,
                                    (ssize_t)ef->headers[k].value_len);
        for (size_t k = 0; k < ef->extra_cnt; k++)
                rd_kafka_header_add(h, ef->extra[k].name, -1,
                                    ef->extra[k].value,
                                    (ssize_t)ef->extra[k].value_len);
        for (;;) {
                /* RD_KAFKA_MSG_F_COPY: after a flush timeout a message may
                 * still be in flight when batch_abort frees the processor's
                 * memory; a copy makes that harmless. */
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        loop->producer, RD_KAFKA_V_TOPIC(ef->topic),
                        RD_KAFKA_V_PARTITION(ef->partition >= 0
                                                     ? ef->partition
                                                     : RD_KAFKA_PARTITION_UA),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(ef->key, ef->key_len),
                        RD_KAFKA_V_VALUE((void *)ef->value, ef->value_len),
                        RD_KAFKA_V_TIMESTAMP(ef->timestamp_ms > 0
                                                     ? ef->timestamp_ms
                                                     : 0),
                        RD_KAFKA_V_HEADERS(h),
                        RD_KAFKA_V_OPAQUE((void *)loop->batch_gen),
                        RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                        return SG_OK; /* h now owned by the message */
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(loop->producer, 100);
                        continue;
                }
                rd_kafka_headers_destroy(h);
                sg_errf(errstr, errstr_size, "producing to %s [%" PRId32
                        "]: %s", ef->topic, ef->partition,
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
}

/** Commits the batch's input offsets (after LMDB); failure is logged only. */
static void loop_commit_offsets(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)loop->batch_part_cnt);
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                int64_t off = p->pause_offset >= 0 ? p->pause_offset
                                                   : p->next_offset;
                if (off <= p->committed)
                        continue;
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition)
                        ->offset = off;
        }
        if (l->cnt > 0) {
                rd_kafka_resp_err_t e = rd_kafka_commit(loop->consumer, l, 0);
                for (int i = 0; !e && i < l->cnt; i++)
                        if (l->elems[i].err)
                                e = l->elems[i].err;
                if (e) {
                        /* The store's offset wins at the next assignment;
                         * re-read records are duplicates (semantics §3). */
                        cJSON *f = parts_json(l);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(e));
                        loop_log(loop, SG_LOG_WARNING, "offset_commit_failed",
                                 f);
                } else {
                        for (int i = 0; i < l->cnt; i++) {
                                size_t pi = loop_part(loop, l->elems[i].topic,
                                                      l->elems[i].partition);
                                loop->parts[pi].committed = l->elems[i].offset;
                        }
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/** Seeks the batch's partitions back to their first offset in the batch,
 *  or (@p to_pause) pauses those the processor paused and seeks them to the
 *  paused record. */
static void loop_seek(sg_loop_t *loop, bool to_pause) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)loop->batch_part_cnt);
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                if (to_pause && p->pause_offset < 0)
                        continue;
                if (!p->assigned)
                        continue;
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition)
                        ->offset = to_pause ? p->pause_offset
                                            : p->first_offset;
        }
        if (l->cnt > 0) {
                if (to_pause) {
                        rd_kafka_pause_partitions(loop->consumer, l);
                        int64_t until = sg_mono_ms() + loop->conf->pause_retry_ms;
                        for (int i = 0; i < l->cnt; i++) {
                                size_t pi = loop_part(loop, l->elems[i].topic,
                                                      l->elems[i].partition);
                                loop->parts[pi].paused_until = until > 0 ? until : 1;
                                loop->stats.pauses_total++;
                        }
                        loop_log(loop, SG_LOG_INFO, "partitions_paused",
                                 parts_json(l));
                }
                rd_kafka_error_t *e = rd_kafka_seek_partitions(
                        loop->consumer, l, SG_SEEK_TIMEOUT_MS);
                const char *bad = NULL;
                for (int i = 0; !e && i < l->cnt; i++)
                        if (l->elems[i].err)
                                bad = rd_kafka_err2str(l->elems[i].err);
                if (e || bad) {
                        cJSON *f = parts_json(l);
                        cJSON_AddStringToObject(
                                f, "error", e ? rd_kafka_error_string(e) : bad);
                        loop_log(loop, SG_LOG_ERR, "seek_failed", f);
                }
                if (e)
                        rd_kafka_error_destroy(e);
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/**
 * One attempt at the batch: processor, produce, deliveries, LMDB commit,
 * offsets. On error the processor batch is still open (caller aborts it),
 * except when the error came from batch_commit.
 */
static sg_err_t loop_attempt(sg_loop_t *loop, size_t *consumedp,
                             char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err;
        size_t consumed = 0;

        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                p->next_offset = p->first_offset;
                p->pause_offset = -1;
        }
        if ((err = pr->batch_begin(pr->opaque, sg_wall_ms(), errstr,
                                   errstr_size)))
                return err;
        for (size_t i = 0; i < loop->msg_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->rec_part[i]];
                sg_process_result_t res = SG_PROCESSED;
                if (p->pause_offset >= 0)
                        continue; /* re-read after the pause */
                if ((err = pr->process(pr->opaque, &loop->recs[i], &res,
                                       errstr, errstr_size)))
                        return err;
                if (res == SG_PAUSE) {
                        p->pause_offset = loop->recs[i].offset;
                } else {
                        p->next_offset = loop->recs[i].offset + 1;
                        consumed++;
                }
        }
        /* HTTP snapshot results after the Kafka records; no offset, so
         * nothing to pause at: SG_PAUSE counts as processed. */
        for (size_t i = 0; i < loop->http_batch_cnt; i++) {
                sg_process_result_t res = SG_PROCESSED;
                if ((err = pr->process(pr->opaque, &loop->http_recs[i], &res,
                                       errstr, errstr_size)))
                        return err;
        }
        if ((err = pr->tick(pr->opaque, errstr, errstr_size)))
                return err;

        const sg_effect_t *efs = NULL;
        size_t cnt = pr->effects(pr->opaque, &efs);
        size_t n = 0; /* records produced */
        int64_t t0 = sg_mono_ms();
        loop->batch_gen++;
        loop->dr_ok = loop->dr_fail = 0;
        loop->dr_err = RD_KAFKA_RESP_ERR_NO_ERROR;
        http_reqs_clear(loop);
        for (size_t i = 0; i < cnt; i++) {
                /* An HTTP GET is not a record: copied now, started only
                 * after batch_commit (processor.h). */
                if (efs[i].kind == SG_EFFECT_HTTP_GET)
                        err = http_req_add(loop, &efs[i], errstr, errstr_size);
                else if (!(err = loop_produce(loop, &efs[i], errstr,
                                              errstr_size)))
                        n++;
                if (err)
                        return err;
        }
        if (n > 0) {
                rd_kafka_resp_err_t e = rd_kafka_flush(
                        loop->producer, (int)loop->conf->delivery_timeout_ms);
                if (e) {
                        sg_errf(errstr, errstr_size,
                                "waiting for %zu deliveries: %s", n,
                                rd_kafka_err2str(e));
                        return SG_ERR_KAFKA;
                }
        } else {
                rd_kafka_poll(loop->producer, 0); /* serve producer logs */
        }
        if (loop->dr_fail > 0 || loop->dr_ok != n) {
                loop->stats.delivery_failures_total += loop->dr_fail;
                sg_errf(errstr, errstr_size,
                        "%zu of %zu deliveries failed: %s", loop->dr_fail, n,
                        rd_kafka_err2str(loop->dr_err));
                return SG_ERR_KAFKA;
        }

        /* Output durable → LMDB → input offsets (semantics §6). */
        if ((err = pr->batch_commit(pr->opaque, errstr, errstr_size)))
                return err;
        loop_commit_offsets(loop);
        int64_t lat = sg_mono_ms() - t0;
        loop->stats.commit_latency_ms_last = lat;
        if (lat > loop->stats.commit_latency_ms_max)
                loop->stats.commit_latency_ms_max = lat;
        loop->stats.records_out_total += n;
        *consumedp = consumed;
        return SG_OK;
}

static void loop_release(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->batch_part_cnt; i++)
                loop->parts[loop->batch_parts[i]].in_batch = false;
        loop->batch_part_cnt = 0;
        for (size_t i = 0; i < loop->msg_cnt; i++)
                rd_kafka_message_destroy(loop->msgs[i]);
        loop->msg_cnt = 0;
}

/**
 * Runs the collected messages as one batch (re-running it after a store
 * growth), then releases them. @returns SG_OK if committed.
 */
static sg_err_t loop_batch(sg_loop_t *loop, const char *why) {
        char es[512] = "";
        size_t consumed = 0;
        sg_err_t err;

        loop->batch_running = true;
        err = loop_prepare(loop);
        if (err)
                snprintf(es, sizeof(es), "out of memory preparing records");
        while (!err) {
                err = loop_attempt(loop, &consumed, es, sizeof(es));
                if (err == SG_OK)
                        break;
                loop->proc.batch_abort(loop->proc.opaque);
                /* Messages of the attempt must not be sent after the
                 * re-read batch's own output. */
                rd_kafka_purge(loop->producer, RD_KAFKA_PURGE_F_QUEUE);
                if (err != SG_ERR_MAP_FULL || !loop->proc.grow)
                        break;
                char ges[400] = "";
                if (loop->proc.grow(loop->proc.opaque, ges, sizeof(ges))) {
                        snprintf(es, sizeof(es), "growing the store: %s", ges);
                        break;
                }
                loop->stats.map_grows_total++;
                loop_log(loop, SG_LOG_NOTICE, "store_grown", NULL);
                err = SG_OK; /* re-run the same records */
        }
        if (err == SG_OK) {
                loop->stats.batches_total++;
                loop->stats.records_in_total += consumed;
                loop->backoff_ms = 0;
                loop_seek(loop, true);
                /* Committed: the HTTP results are judged and durable, the
                 * batch's requests durable; now start those. */
                http_done_consumed(loop);
                http_reqs_start(loop);
        } else {
                /* HTTP results stay for the next attempt; the requests are
                 * forgotten with the batch (the re-run issues them again). */
                loop->http_batch_cnt = 0;
                http_reqs_clear(loop);
                loop->stats.batches_aborted_total++;
                loop_seek(loop, false);
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", sg_err2str(err));
                cJSON_AddStringToObject(f, "reason", es);
                cJSON_AddNumberToObject(f, "records", (double)loop->msg_cnt);
                if (why)
                        cJSON_AddStringToObject(f, "during", why);
                loop_log(loop, SG_LOG_ERR, "batch_aborted", f);
                if (err == SG_ERR_FATAL)
                        loop_set_fatal(loop, SG_ERR_FATAL, es);
                char fes[512];
                if (rd_kafka_fatal_error(loop->producer, fes, sizeof(fes))) {
                        /* An idempotent producer's fatal error: start over
                         * with a new producer (new producer id). */
                        rd_kafka_t *np = NULL;
                        char nes[512];
                        cJSON *pf = cJSON_CreateObject();
                        cJSON_AddStringToObject(pf, "error", fes);
                        loop_log(loop, SG_LOG_ERR, "producer_recreated", pf);
                        rd_kafka_purge(loop->producer,
                                       RD_KAFKA_PURGE_F_QUEUE |
                                               RD_KAFKA_PURGE_F_INFLIGHT);
                        rd_kafka_destroy(loop->producer);
                        loop->producer = NULL;
                        if (loop_client_new(loop, false, &np, nes,
                                            sizeof(nes)) == SG_OK)
                                loop->producer = np;
                        else
                                loop_set_fatal(loop, SG_ERR_FATAL, nes);
                }
        }
        loop_release(loop);
        loop->batch_running = false;
        return err;
}

/* ------------------------------------------------------------------ */
/* run                                                                 */

static void loop_resume_due(sg_loop_t *loop) {
        int64_t now = sg_mono_ms();
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
                loop_log(loop, SG_LOG_INFO, "partitions_resumed",
                         parts_json(l));
                rd_kafka_topic_partition_list_destroy(l);
        }
}

/** Polls one batch: up to batch.max_records, or batch.max_ms (≥ 100 ms idle). */
static void loop_collect(sg_loop_t *loop) {
        int64_t start = sg_mono_ms();
        int64_t max_ms = loop->conf->batch_max_ms > 0 ? loop->conf->batch_max_ms
                                                      : 0;
        int64_t deadline = start + max_ms;
        int64_t idle_deadline =
                start + (max_ms > SG_IDLE_POLL_MS ? max_ms : SG_IDLE_POLL_MS);
        http_drive(loop, 0); /* transfers that completed during the batch */
        do {
                int64_t now = sg_mono_ms();
                int64_t left = (loop->msg_cnt ? deadline : idle_deadline) - now;
                /* HTTP transfers in flight: take turns with the fetcher. */
                bool busy = http_busy(loop);
                if (busy && left > SG_HTTP_SLICE_MS)
                        left = SG_HTTP_SLICE_MS;
                if (loop->msg_cnt == 0 && loop->http_done_cnt > 0)
                        left = 0; /* results to judge: do not idle */
                rd_kafka_message_t *m = rd_kafka_consumer_poll(
                        loop->consumer, left > 0 ? (int)left : 0);
                if (busy && (!m || sg_mono_ms() != loop->http_polled_ms))
                        http_drive(loop, m ? 0 : (int)(left > 0 ? left : 0));
                if (!m)
                        continue;
                if (m->err) {
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                char fes[512];
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(
                                        f, "error", rd_kafka_err2name(m->err));
                                cJSON_AddStringToObject(
                                        f, "message", rd_kafka_message_errstr(m));
                                if (m->rkt)
                                        cJSON_AddStringToObject(
                                                f, "topic",
                                                rd_kafka_topic_name(m->rkt));
                                loop_log(loop, SG_LOG_WARNING, "consume_error",
                                         f);
                                if (rd_kafka_fatal_error(loop->consumer, fes,
                                                         sizeof(fes)))
                                        loop_set_fatal(loop, SG_ERR_FATAL, fes);
                        }
                        rd_kafka_message_destroy(m);
                        continue;
                }
                size_t pi = loop_part(loop, rd_kafka_topic_name(m->rkt),
                                      m->partition);
                if (loop->parts[pi].paused_until || !loop->parts[pi].assigned) {
                        /* Fetched before the pause: read again on resume. */
                        rd_kafka_message_destroy(m);
                        continue;
                }
                loop->rec_part[loop->msg_cnt] = pi;
                loop->msgs[loop->msg_cnt++] = m;
        } while (!loop->stop && loop->fatal == SG_OK &&
                 loop->msg_cnt < loop->msg_cap &&
                 /* an idle loop judges HTTP results at once */
                 (loop->msg_cnt > 0 || loop->http_done_cnt == 0) &&
                 sg_mono_ms() < (loop->msg_cnt ? deadline : idle_deadline));
}

static void loop_stats_emit(sg_loop_t *loop) {
        sg_loop_stats_t *s = &loop->stats;
        int64_t assigned = 0, paused = 0, lag = 0;
        bool lag_known = true;
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(
                        (int)(loop->part_cnt ? loop->part_cnt : 1));
        for (size_t i = 0; i < loop->part_cnt; i++) {
                if (!loop->parts[i].assigned)
                        continue;
                assigned++;
                if (loop->parts[i].paused_until)
                        paused++;
                rd_kafka_topic_partition_list_add(l, loop->parts[i].topic,
                                                  loop->parts[i].partition);
        }
        if (l->cnt > 0 && loop->consumer)
                rd_kafka_position(loop->consumer, l);
        for (int i = 0; i < l->cnt; i++) {
                int64_t lo, hi;
                size_t pi = loop_part(loop, l->elems[i].topic,
                                      l->elems[i].partition);
                int64_t pos = loop->parts[pi].committed >= 0
                                      ? loop->parts[pi].committed
                                      : l->elems[i].offset;
                if (rd_kafka_get_watermark_offsets(
                            loop->consumer, l->elems[i].topic,
                            l->elems[i].partition, &lo, &hi) ||
                    hi < 0 || pos < 0) {
                        lag_known = false;
                        continue;
                }
                lag += hi > pos ? hi - pos : 0;
        }
        rd_kafka_topic_partition_list_destroy(l);
        s->assigned_partitions = assigned;
        s->paused_partitions = paused;
        s->consumer_lag = lag_known ? lag : -1;
        s->snapshot_http_in_flight =
                loop->fetcher ? (int64_t)sg_fetcher_in_flight(loop->fetcher)
                              : 0;
        if (loop->stats_cb)
                loop->stats_cb(loop->stats_opaque, s);
}

sg_err_t sg_loop_run(sg_loop_t *loop, char *errstr, size_t errstr_size) {
        loop->next_stats_ms = sg_mono_ms() + loop->conf->stats_interval_ms;
        while (!loop->stop && loop->fatal == SG_OK) {
                loop_resume_due(loop);
                loop_collect(loop);
                if (loop->fatal != SG_OK)
                        break;
                if (loop->stop && loop->msg_cnt == 0)
                        break;
                if (loop_batch(loop, NULL) != SG_OK && !loop->stop) {
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
                if (loop->conf->stats_interval_ms > 0 &&
                    sg_mono_ms() >= loop->next_stats_ms) {
                        loop_stats_emit(loop);
                        loop->next_stats_ms =
                                sg_mono_ms() + loop->conf->stats_interval_ms;
                }
        }
        loop_release(loop); /* after a fatal error: read again next time */

        /* Leave the group: the revoke callback commits nothing new (no
         * records are pending) and tells the processor. */
        rd_kafka_resp_err_t e = rd_kafka_consumer_close(loop->consumer);
        if (e) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(e));
                loop_log(loop, SG_LOG_WARNING, "consumer_close_failed", f);
        }
        if (loop->producer)
                rd_kafka_flush(loop->producer,
                               (int)loop->conf->delivery_timeout_ms);
        loop_stats_emit(loop);
        if (loop->fatal != SG_OK) {
                sg_errf(errstr, errstr_size, "%s", loop->fatal_str);
                return loop->fatal;
        }
        loop_log(loop, SG_LOG_INFO, "loop_stopped", NULL);
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
        loop_release(loop);
        if (loop->consumer)
                rd_kafka_destroy(loop->consumer);
        if (loop->producer)
                rd_kafka_destroy(loop->producer);
        for (size_t i = 0; i < loop->part_cnt; i++)
                free(loop->parts[i].topic);
        free(loop->parts);
        free(loop->msgs);
        free(loop->recs);
        free(loop->rec_part);
        free(loop->batch_parts);
        free(loop->hdrs);
        sg_fetcher_destroy(loop->fetcher);
        for (size_t i = 0; i < loop->http_done_cnt; i++)
                http_done_free(&loop->http_done[i]);
        free(loop->http_done);
        free(loop->http_recs);
        http_reqs_clear(loop);
        free(loop->http_reqs);
        free(loop);
}

/* ------------------------------------------------------------------ */
/* librdkafka's mock cluster                                            */

static void mock_log(const rd_kafka_t *rk, int level, const char *fac,
                     const char *buf) {
        (void)rk, (void)level, (void)fac, (void)buf;
}

static sg_err_t mock_topic(rd_kafka_mock_cluster_t *mc, const char *name,
                           int partition_cnt, char *errstr,
                           size_t errstr_size) {
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, name,
                                                           partition_cnt, 1);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                sg_errf(errstr, errstr_size, "mock topic \"%s\": %s", name,
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

sg_err_t sg_mock_start(const sg_config_t *conf, int broker_cnt,
                       int partition_cnt, void **handlep, char **bootstrapsp,
                       char *errstr, size_t errstr_size) {
        char es[512], num[16];
        if (!conf || broker_cnt < 1 || partition_cnt < 1 || !handlep ||
            !bootstrapsp) {
                sg_errf(errstr, errstr_size, "sg_mock_start: invalid argument");
                return SG_ERR_INVALID;
        }
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        snprintf(num, sizeof(num), "%d", broker_cnt);
        if (rd_kafka_conf_set(kc, "test.mock.num.brokers", num, es,
                              sizeof(es)) != RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "mock cluster: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_conf_set_log_cb(kc, mock_log);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "mock cluster: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(rk);
        sg_err_t err = mc ? SG_OK : SG_ERR_KAFKA;
        if (!mc)
                sg_errf(errstr, errstr_size, "mock cluster not available");
        for (size_t i = 0; !err && i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                err = mock_topic(mc, tc->name, partition_cnt, errstr,
                                 errstr_size);
                if (!err)
                        err = mock_topic(mc, tc->output_topic, partition_cnt,
                                         errstr, errstr_size);
                if (!err)
                        err = mock_topic(mc, tc->dlq_topic, partition_cnt,
                                         errstr, errstr_size);
                if (!err && tc->snapshot.source == SG_SNAP_KAFKA &&
                    tc->snapshot.request_topic)
                        err = mock_topic(mc, tc->snapshot.request_topic,
                                         partition_cnt, errstr, errstr_size);
                if (!err && tc->snapshot.source == SG_SNAP_KAFKA &&
                    tc->snapshot.reply_topic)
                        err = mock_topic(mc, tc->snapshot.reply_topic,
                                         partition_cnt, errstr, errstr_size);
        }
        char *bs = err ? NULL : strdup(rd_kafka_mock_cluster_bootstraps(mc));
        if (!err && !bs)
                err = SG_ERR_NOMEM;
        if (err) {
                rd_kafka_destroy(rk);
                return err;
        }
        *handlep = rk;
        *bootstrapsp = bs;
        return SG_OK;
}

void sg_mock_destroy(void *handle) {
        if (handle)
                rd_kafka_destroy(handle);
}
