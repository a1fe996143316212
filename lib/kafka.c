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
 * Invariant (semantics §6, exactly_once, issue 4), relied on by
 * loop_attempt() and loop_batch():
 *     begin_transaction → produce every effect (changelog included) → every
 *     delivery succeeded → send_offsets_to_transaction (KIP-447 group
 *     metadata) → commit_transaction → processor batch_commit (LMDB).
 * The transaction is the commit point: LMDB only follows it. A failure
 * before commit_transaction aborts the transaction and rewinds exactly as
 * above; a batch_commit failure after it is not a rewind (Kafka already
 * holds the batch's output and offsets) but a store behind its changelog,
 * repaired by restoring every assigned partition before the next batch.
 * Restores (loop_restore) run inside the rebalance callback before the
 * input partitions are handed to the consumer, on a third, group-less
 * read_committed consumer (loop->restorer). A fatal producer error (fenced)
 * stops the loop; the producer is never re-created under the same
 * transactional.id.
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

        /* delivery reports of the current attempt: a message's opaque is
         * dr_base + 1 + its effect index, so a report of an earlier
         * (aborted) attempt falls outside (dr_base, dr_base + dr_cnt] */
        uintptr_t dr_base;
        size_t dr_cnt;           /**< effects of the current attempt */
        int64_t *dr_offs;        /**< per effect: offset written at, or -1 */
        size_t dr_offs_cap;
        size_t dr_ok, dr_fail;
        rd_kafka_resp_err_t dr_err;

        /* exactly_once (issue 4, semantics §6) */
        bool eos;                /**< guarantee exactly_once */
        rd_kafka_t *restorer;    /**< changelog restore consumer (no group) */
        bool txn_open;           /**< a Kafka transaction is in progress */
        bool kafka_committed;    /**< this attempt's transaction committed */
        bool restore_needed;     /**< LMDB fell behind the changelog: restore
                                      every assigned partition before the
                                      next batch */

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

static void sg_sleep_ms(int64_t ms) {
        struct timespec ts = {.tv_sec = ms / 1000,
                              .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

/** Emits @p event with @p fields (consumed, may be NULL) to the log callback. */
/* Replaces every occurrence of @p secret in @p s (malloc'd result, or NULL
 * when @p s does not contain it). */
static char *redact_one(const char *s, const char *secret) {
        size_t sl = strlen(secret), n = 0;
        if (!sl)
                return NULL;
        for (const char *q = strstr(s, secret); q; q = strstr(q + sl, secret))
                n++;
        if (!n)
                return NULL;
        char *out = malloc(strlen(s) + n * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (const char *q; (q = strstr(s, secret)); s = q + sl) {
                memcpy(o, s, (size_t)(q - s));
                o += q - s;
                memcpy(o, "***", 3);
                o += 3;
        }
        strcpy(o, s);
        return out;
}

static void redact_str(cJSON *node, const char *secret) {
        char *r = redact_one(node->valuestring, secret);
        if (r) {
                cJSON_SetValuestring(node, r);
                free(r);
        }
}

/* A secret value and, since librdkafka may quote only a part of one (e.g.
 * "... beginning at: <rest of sasl.oauthbearer.config>"), each of its
 * space/comma/equals separated parts of 4 bytes or more. */
static void redact_kv(cJSON *node, const sg_kv_t *kv, size_t cnt) {
        for (size_t i = 0; i < cnt; i++) {
                if (!sg_config_is_secret(kv[i].name) || !kv[i].value)
                        continue;
                redact_str(node, kv[i].value);
                char part[512];
                const char *v = kv[i].value;
                while (*v) {
                        size_t n = strcspn(v, " \t,=");
                        if (n >= 4 && n < sizeof(part)) {
                                memcpy(part, v, n);
                                part[n] = '\0';
                                redact_str(node, part);
                        }
                        v += n;
                        v += strspn(v, " \t,=");
                }
        }
}

/* No log line may carry a secret (sg_log_cb): librdkafka quotes a bad value
 * in some error texts (e.g. sasl.oauthbearer.config), so every string of a
 * log event is scrubbed of the configured secret values. */
static void redact_json(const sg_config_t *conf, cJSON *node) {
        for (; node; node = node->next) {
                if (cJSON_IsString(node) && node->valuestring) {
                        redact_kv(node, conf->kafka, conf->kafka_cnt);
                        redact_kv(node, conf->kafka_consumer,
                                  conf->kafka_consumer_cnt);
                        redact_kv(node, conf->kafka_producer,
                                  conf->kafka_producer_cnt);
                }
                redact_json(conf, node->child);
        }
}

static void loop_log(sg_loop_t *loop, sg_log_level_t level, const char *event,
                     cJSON *fields) {
        if (loop->log_cb) {
                if (fields)
                        redact_json(loop->conf, fields->child);
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
        loop->http_polled_ms = sg_clock_mono_ms();
        sg_fetcher_poll(loop->fetcher, wait_ms, http_on_done, loop);
        loop->stats.snapshot_http_in_flight =
                (int64_t)sg_fetcher_in_flight(loop->fetcher);
}

static bool http_busy(const sg_loop_t *loop) {
        return loop->fetcher && sg_fetcher_in_flight(loop->fetcher) > 0;
}

/** Waits @p ms (back-off) while still driving the HTTP transfers. */
static void loop_wait(sg_loop_t *loop, int64_t ms) {
        int64_t end = sg_clock_mono_ms() + ms, left;
        while (http_busy(loop) && (left = end - sg_clock_mono_ms()) > 0)
                http_drive(loop, (int)left);
        if ((left = end - sg_clock_mono_ms()) > 0)
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
        uintptr_t v = (uintptr_t)m->_private;
        (void)rk;
        if (v <= loop->dr_base || v - loop->dr_base > loop->dr_cnt)
                return; /* a report for an aborted attempt */
        if (m->err) {
                loop->dr_fail++;
                if (!loop->dr_err)
                        loop->dr_err = m->err;
        } else {
                loop->dr_ok++;
                loop->dr_offs[v - loop->dr_base - 1] = m->offset;
        }
}

/* ------------------------------------------------------------------ */
/* Kafka transactions (exactly_once, KIP-98 / KIP-447)                  */

static bool err_is_fenced(rd_kafka_resp_err_t code) {
        return code == RD_KAFKA_RESP_ERR__FENCED ||
               code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
               code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/** The transactional producer hit a fatal error (typically: fenced by a
 *  newer instance with the same transactional.id). Logs one line, event
 *  "fenced" or "fatal_producer_error", and stops the loop (SG_ERR_FATAL:
 *  the daemon exits non-zero). */
static void loop_producer_fatal(sg_loop_t *loop, rd_kafka_resp_err_t code,
                                const char *during, const char *reason) {
        bool fenced = err_is_fenced(code);
        char what[700];
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "transactional_id",
                                loop->conf->transactional_id
                                        ? loop->conf->transactional_id
                                        : "");
        cJSON_AddStringToObject(f, "during", during);
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(code));
        cJSON_AddStringToObject(f, "reason", reason);
        if (fenced)
                cJSON_AddStringToObject(
                        f, "detail",
                        "another instance with the same transactional.id "
                        "(instance_id) took over; this one stops");
        loop_log(loop, SG_LOG_ERR, fenced ? "fenced" : "fatal_producer_error",
                 f);
        snprintf(what, sizeof(what), "%s: %s (%s)",
                 fenced ? "producer fenced" : "fatal producer error", reason,
                 during);
        loop_set_fatal(loop, SG_ERR_FATAL, what);
}

/** Takes a transactional API error (freed here): a fatal one stops the loop
 *  (SG_ERR_FATAL), any other returns SG_ERR_KAFKA (the caller aborts the
 *  transaction and the batch). */
static sg_err_t loop_txn_error(sg_loop_t *loop, rd_kafka_error_t *e,
                               const char *during, char *errstr,
                               size_t errstr_size) {
        sg_err_t err = SG_ERR_KAFKA;
        sg_errf(errstr, errstr_size, "%s: %s", during,
                rd_kafka_error_string(e));
        if (rd_kafka_error_is_fatal(e)) {
                char fes[512] = "";
                rd_kafka_resp_err_t code =
                        rd_kafka_fatal_error(loop->producer, fes, sizeof(fes));
                if (!code) {
                        code = rd_kafka_error_code(e);
                        snprintf(fes, sizeof(fes), "%s",
                                 rd_kafka_error_string(e));
                }
                loop_producer_fatal(loop, code, during, fes);
                err = SG_ERR_FATAL;
        }
        rd_kafka_error_destroy(e);
        return err;
}

#define SG_TXN_RETRIES 10

/** Runs one transactional call, retrying it while librdkafka says the error
 *  is retriable (and neither fatal nor abortable). */
#define TXN_CALL(loop, call, during, errstr, errstr_size, errp)               \
        do {                                                                  \
                for (int tries_ = 0;; tries_++) {                             \
                        rd_kafka_error_t *e_ = (call);                        \
                        if (!e_) {                                            \
                                *(errp) = SG_OK;                              \
                                break;                                        \
                        }                                                     \
                        if (rd_kafka_error_is_retriable(e_) &&                \
                            !rd_kafka_error_is_fatal(e_) &&                   \
                            !rd_kafka_error_txn_requires_abort(e_) &&         \
                            tries_ < SG_TXN_RETRIES && !(loop)->stop) {       \
                                cJSON *f_ = cJSON_CreateObject();             \
                                cJSON_AddStringToObject(f_, "during", during);\
                                cJSON_AddStringToObject(                      \
                                        f_, "error",                          \
                                        rd_kafka_error_string(e_));           \
                                loop_log(loop, SG_LOG_WARNING,                \
                                         "transaction_retry", f_);            \
                                rd_kafka_error_destroy(e_);                   \
                                continue;                                     \
                        }                                                     \
                        *(errp) = loop_txn_error(loop, e_, during, errstr,    \
                                                 errstr_size);                \
                        break;                                                \
                }                                                             \
        } while (0)

static sg_err_t loop_batch(sg_loop_t *loop, const char *why);

/* ------------------------------------------------------------------ */
/* restore from the changelog (exactly_once, issue 4)                  */

#define SG_RESTORE_POLL_MS 100
#define SG_RESTORE_PENDING_MAX_MS 120000 /* open transaction on a changelog */
#define SG_RESTORE_STALL_MS 120000       /* no record, no EOF */
#define SG_STABLE_OFFSETS_MAX_MS 120000  /* committed offsets still pending */

/** The configuration of input topic @p name, or NULL (a reply topic). */
static const sg_topic_config_t *loop_input_topic(const sg_loop_t *loop,
                                                 const char *name) {
        for (size_t i = 0; i < loop->conf->topic_cnt; i++)
                if (!strcmp(loop->conf->topics[i].name, name))
                        return &loop->conf->topics[i];
        return NULL;
}

/**
 * Reads changelog partition @p changelog [@p partition] from @p from to its
 * read_committed end, giving every record to restore_apply. The end is where
 * the restore consumer reports the partition's EOF; if the high watermark
 * is beyond it a transaction on the changelog is still undecided (a dead
 * owner's, until the coordinator aborts it; or one committed whose marker
 * is not written yet), and the read goes on until the end reaches the high
 * watermark: the state must include every transaction whose input offsets
 * are committed.
 */
static sg_err_t loop_restore_read(sg_loop_t *loop, const char *topic,
                                  int32_t partition, const char *changelog,
                                  int64_t from, int64_t *endp, uint64_t *np,
                                  char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, changelog, partition)->offset =
                from;
        rd_kafka_resp_err_t e = rd_kafka_assign(loop->restorer, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                sg_errf(errstr, errstr_size, "changelog %s [%" PRId32
                        "]: assign: %s", changelog, partition,
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        int64_t end = from, first_eof = 0, progress = sg_clock_mono_ms();
        uint64_t n = 0;
        bool eof = false, waiting = false;
        sg_err_t err = SG_OK;
        while (!err) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(
                        loop->restorer, SG_RESTORE_POLL_MS);
                if (m && !m->err) {
                        err = pr->restore_apply(pr->opaque, topic, partition,
                                                m->offset, m->key, m->key_len,
                                                m->payload,
                                                m->payload ? m->len : 0,
                                                errstr, errstr_size);
                        end = m->offset + 1;
                        n++;
                        eof = false;
                        progress = sg_clock_mono_ms();
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (m && m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        end = m->offset;
                        eof = true;
                        progress = sg_clock_mono_ms();
                        if (!first_eof)
                                first_eof = progress;
                } else if (m) {
                        char fes[512];
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "changelog", changelog);
                        cJSON_AddNumberToObject(f, "partition", partition);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2name(m->err));
                        cJSON_AddStringToObject(f, "message",
                                                rd_kafka_message_errstr(m));
                        loop_log(loop, SG_LOG_WARNING, "restore_consume_error",
                                 f);
                        if (m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE ||
                            m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                            rd_kafka_fatal_error(loop->restorer, fes,
                                                 sizeof(fes))) {
                                sg_errf(errstr, errstr_size,
                                        "changelog %s [%" PRId32 "] at offset "
                                        "%" PRId64 ": %s",
                                        changelog, partition, end,
                                        rd_kafka_message_errstr(m));
                                err = SG_ERR_KAFKA;
                        }
                }
                if (m)
                        rd_kafka_message_destroy(m);
                if (err)
                        break;
                int64_t now = sg_clock_mono_ms();
                if (eof) {
                        int64_t wlo = -1, whi = -1;
                        rd_kafka_get_watermark_offsets(loop->restorer,
                                                       changelog, partition,
                                                       &wlo, &whi);
                        if (whi <= end)
                                break; /* nothing undecided beyond */
                        if (!waiting) {
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(f, "changelog",
                                                        changelog);
                                cJSON_AddNumberToObject(f, "partition",
                                                        partition);
                                cJSON_AddNumberToObject(f, "stable_offset",
                                                        (double)end);
                                cJSON_AddNumberToObject(f, "high_watermark",
                                                        (double)whi);
                                loop_log(loop, SG_LOG_NOTICE,
                                         "restore_waiting_for_transaction", f);
                                waiting = true;
                        }
                        if (now - first_eof > SG_RESTORE_PENDING_MAX_MS) {
                                sg_errf(errstr, errstr_size,
                                        "changelog %s [%" PRId32 "]: a "
                                        "transaction stayed undecided for "
                                        "%d s (stable offset %" PRId64
                                        ", high watermark %" PRId64 ")",
                                        changelog, partition,
                                        SG_RESTORE_PENDING_MAX_MS / 1000, end,
                                        whi);
                                err = SG_ERR_KAFKA;
                        }
                } else if (now - progress > SG_RESTORE_STALL_MS) {
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%" PRId32 "]: no progress for "
                                "%d s at offset %" PRId64,
                                changelog, partition,
                                SG_RESTORE_STALL_MS / 1000, end);
                        err = SG_ERR_KAFKA;
                }
                if (!err && loop->stop) {
                        sg_errf(errstr, errstr_size,
                                "stopped during the restore of %s [%" PRId32
                                "]", changelog, partition);
                        err = SG_ERR_KAFKA;
                }
        }
        rd_kafka_assign(loop->restorer, NULL);
        *endp = end;
        *np = n;
        return err;
}

/**
 * Restores input partition @p topic [@p partition] from its changelog
 * (processor.h restore_begin → restore_apply … → restore_end). On
 * SG_ERR_MAP_FULL the store is grown and the partition's restore starts
 * again from restore_begin. Adds the time taken to *msp.
 */
static sg_err_t loop_restore_part(sg_loop_t *loop, const char *topic,
                                  int32_t partition, int64_t *msp,
                                  char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        const sg_topic_config_t *tc = loop_input_topic(loop, topic);
        if (!tc || !tc->changelog_topic || !pr->restore_begin ||
            !pr->restore_apply || !pr->restore_end || !loop->restorer)
                return SG_OK; /* a reply topic, or nothing to restore */
        for (int attempt = 0;; attempt++) {
                int64_t t0 = sg_clock_mono_ms(), lo = -1, hi = -1, from = -1,
                        end = -1;
                uint64_t n = 0;
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
                        loop->restorer, tc->changelog_topic, partition, &lo,
                        &hi, SG_METADATA_TIMEOUT_MS);
                if (e) {
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%" PRId32
                                "]: reading its offsets: %s",
                                tc->changelog_topic, partition,
                                rd_kafka_err2str(e));
                        return SG_ERR_KAFKA;
                }
                sg_err_t err = pr->restore_begin(pr->opaque, topic, partition,
                                                 lo, hi, &from, errstr,
                                                 errstr_size);
                if (!err)
                        err = loop_restore_read(loop, topic, partition,
                                                tc->changelog_topic, from,
                                                &end, &n, errstr, errstr_size);
                if (!err)
                        err = pr->restore_end(pr->opaque, topic, partition,
                                              end, errstr, errstr_size);
                int64_t ms = sg_clock_mono_ms() - t0;
                *msp += ms;
                if (err == SG_ERR_MAP_FULL && pr->grow && attempt < 16) {
                        char ges[400] = "";
                        if (pr->grow(pr->opaque, ges, sizeof(ges))) {
                                sg_errf(errstr, errstr_size,
                                        "growing the store during the "
                                        "restore of %s [%" PRId32 "]: %s",
                                        topic, partition, ges);
                                return SG_ERR_MAP_FULL;
                        }
                        loop->stats.map_grows_total++;
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "during", "restore");
                        loop_log(loop, SG_LOG_NOTICE, "store_grown", f);
                        continue;
                }
                if (err)
                        return err;
                loop->stats.restored_records_total += n;
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "topic", topic);
                cJSON_AddNumberToObject(f, "partition", partition);
                cJSON_AddStringToObject(f, "changelog", tc->changelog_topic);
                cJSON_AddNumberToObject(f, "log_start", (double)lo);
                cJSON_AddNumberToObject(f, "from", (double)from);
                cJSON_AddNumberToObject(f, "end", (double)end);
                cJSON_AddNumberToObject(f, "records", (double)n);
                cJSON_AddNumberToObject(f, "ms", (double)ms);
                loop_log(loop, SG_LOG_INFO, "restore_done", f);
                return SG_OK;
        }
}

/** Restores every input partition of @p l, or (NULL) every assigned one.
 *  Sets restore_ms_last. @returns the first error (errstr names the
 *  partition). */
static sg_err_t loop_restore(sg_loop_t *loop,
                             const rd_kafka_topic_partition_list_t *l,
                             char *errstr, size_t errstr_size) {
        int64_t ms = 0;
        sg_err_t err = SG_OK;
        if (!loop->eos || !loop->proc.restore_begin)
                return SG_OK;
        if (l) {
                for (int i = 0; !err && i < l->cnt; i++)
                        err = loop_restore_part(loop, l->elems[i].topic,
                                                l->elems[i].partition, &ms,
                                                errstr, errstr_size);
        } else {
                for (size_t i = 0; !err && i < loop->part_cnt; i++)
                        if (loop->parts[i].assigned)
                                err = loop_restore_part(
                                        loop, loop->parts[i].topic,
                                        loop->parts[i].partition, &ms, errstr,
                                        errstr_size);
        }
        loop->stats.restore_ms_last = ms;
        return err;
}

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
                /* at_least_once: the store may be ahead of the group's
                 * offsets (crash between LMDB and offset commit).
                 * exactly_once: the transactional offsets are the truth —
                 * the store is rebuilt from the changelog to match them, so
                 * its own offset must never move the start (a full rebuild
                 * would otherwise skip records). */
                tp->offset = !loop->eos && stored >= 0
                                     ? stored
                                     : RD_KAFKA_OFFSET_INVALID;
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
                /* a foreign store, or one whose key fingerprint the
                 * configuration does not match (exit 2), keep their code */
                loop_set_fatal(loop,
                               err == SG_ERR_FOREIGN || err == SG_ERR_CONFIG
                                       ? err
                                       : SG_ERR_FATAL,
                               what);
                if (!cooperative)
                        rd_kafka_assign(rk, NULL);
                return;
        }

        /* Start at the group's committed offset (at_least_once: or the
         * store's, whichever is later).
         * exactly_once: committed offsets a transaction still holds are
         * unstable (KIP-447); wait until they are decided. */
        rd_kafka_topic_partition_list_t *c =
                rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_resp_err_t cerr;
        int64_t cdeadline = sg_clock_mono_ms() + SG_STABLE_OFFSETS_MAX_MS;
        for (bool logged = false;; logged = true) {
                cerr = rd_kafka_committed(rk, c, SG_COMMITTED_TIMEOUT_MS);
                for (i = 0; loop->eos && !cerr && i < c->cnt; i++)
                        if (c->elems[i].err)
                                cerr = c->elems[i].err;
                if (!cerr || !loop->eos || loop->stop ||
                    sg_clock_mono_ms() >= cdeadline)
                        break;
                if (!logged) {
                        cJSON *f = parts_json(parts);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(cerr));
                        loop_log(loop, SG_LOG_NOTICE,
                                 "committed_offsets_pending", f);
                }
                sg_sleep_ms(200);
        }
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

        /* exactly_once: each partition's store is brought up to its
         * changelog's end before any of its records is read (the input
         * partitions are assigned to the consumer only after this). */
        es[0] = '\0';
        if ((err = loop_restore(loop, parts, es, sizeof(es)))) {
                char what[800];
                snprintf(what, sizeof(what), "restore: %s", es);
                for (i = 0; i < parts->cnt; i++) {
                        size_t pi = loop_part(loop, parts->elems[i].topic,
                                              parts->elems[i].partition);
                        loop->parts[pi].assigned = false;
                        if (loop->proc.revoke)
                                loop->proc.revoke(loop->proc.opaque,
                                                  parts->elems[i].topic,
                                                  parts->elems[i].partition);
                }
                loop_set_fatal(loop,
                               err == SG_ERR_FOREIGN || err == SG_ERR_CONFIG
                                       ? err
                                       : SG_ERR_FATAL,
                               what);
                if (!cooperative)
                        rd_kafka_assign(rk, NULL);
                return;
        }

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
        /* exactly_once: a dead instance's open transaction holds back the
         * changelog's and the input's stable offsets until it times out;
         * 10 s (Kafka Streams' exactly-once default) rather than 60 s keeps
         * a partition's failover short. The transaction spans only the
         * produce → commit of one batch. */
        if (!err && loop->eos && !consumer)
                err = conf_set(kc, "transaction.timeout.ms", "10000", errstr,
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
        if (!err && loop->eos && consumer)
                /* exactly_once: aborted input is never judged (config.c
                 * refuses any other value). */
                err = conf_set(kc, "isolation.level", "read_committed",
                               errstr, errstr_size);
        if (!err && loop->eos && !consumer)
                /* Stable per instance (<group.id>-<instance_id>): a
                 * restarted instance fences its zombie (KIP-98). */
                err = conf_set(kc, "transactional.id",
                               conf->transactional_id, errstr, errstr_size);
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

/** Properties of the group consumer that a group-less consumer must not
 *  take (the restore consumer), or that it sets itself. */
static bool restorer_skips(const char *name) {
        static const char *const skip[] = {
                "partition.assignment.strategy", "session.timeout.ms",
                "heartbeat.interval.ms", "max.poll.interval.ms",
                "enable.auto.commit", "auto.commit.interval.ms",
                "enable.auto.offset.store", "auto.offset.reset",
                "isolation.level", "enable.partition.eof",
        };
        if (!strncmp(name, "group.", 6))
                return true;
        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
                if (!strcmp(name, skip[i]))
                        return true;
        return false;
}

/** exactly_once: the changelog restore consumer — never joins a consumer
 *  group (only assign(), no offsets committed); read_committed; EOF
 *  reported at the stable end. */
static sg_err_t loop_restorer_new(sg_loop_t *loop, char *errstr,
                                  size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        static const char *const rdefs[][2] = {
                {"enable.auto.commit", "false"},
                {"enable.auto.offset.store", "false"},
                {"isolation.level", "read_committed"},
                {"enable.partition.eof", "true"},
                /* a checkpoint the log no longer holds is restore_begin's
                 * business, never a silent jump */
                {"auto.offset.reset", "error"},
                /* the end of a partition is found by an empty fetch: do not
                 * let the broker hold it 500 ms */
                {"fetch.wait.max.ms", "10"},
                {"log.queue", "true"},
        };
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        sg_err_t err = SG_OK;
        char es[512];
        for (size_t i = 0; !err && i < conf->kafka_cnt; i++)
                if (!restorer_skips(conf->kafka[i].name))
                        err = conf_set(kc, conf->kafka[i].name,
                                       conf->kafka[i].value, errstr,
                                       errstr_size);
        for (size_t i = 0; !err && i < conf->kafka_consumer_cnt; i++)
                if (!restorer_skips(conf->kafka_consumer[i].name))
                        err = conf_set(kc, conf->kafka_consumer[i].name,
                                       conf->kafka_consumer[i].value, errstr,
                                       errstr_size);
        for (size_t i = 0; !err && i < sizeof(rdefs) / sizeof(rdefs[0]); i++)
                err = conf_set(kc, rdefs[i][0], rdefs[i][1], errstr,
                               errstr_size);
        /* librdkafka 2.0.2 refuses assign() without a group.id ("Unknown
         * group"); this one is never joined (no subscribe) and never
         * commits. */
        char gid[512];
        snprintf(gid, sizeof(gid), "%s.restore", conf->transactional_id);
        if (!err)
                err = conf_set(kc, "group.id", gid, errstr, errstr_size);
        if (err) {
                rd_kafka_conf_destroy(kc);
                return err;
        }
        rd_kafka_conf_set_opaque(kc, loop);
        rd_kafka_conf_set_log_cb(kc, cb_log);
        rd_kafka_conf_set_error_cb(kc, cb_error);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size,
                        "creating the changelog restore consumer: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_set_log_queue(rk, NULL);
        rd_kafka_poll_set_consumer(rk);
        loop->restorer = rk;
        return SG_OK;
}

#define SG_ADMIN_TIMEOUT_MS 30000

/** Waits for the admin result of type @p type on @p q. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q,
                                    rd_kafka_event_type_t type) {
        int64_t deadline = sg_clock_mono_ms() + SG_ADMIN_TIMEOUT_MS + 5000;
        while (sg_clock_mono_ms() < deadline) {
                rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 1000);
                if (!ev)
                        continue;
                if (rd_kafka_event_type(ev) == type)
                        return ev;
                rd_kafka_event_destroy(ev);
        }
        return NULL;
}

/**
 * exactly_once, at start: every input topic's changelog topic exists, with
 * as many partitions as the input topic and cleanup.policy=compact (one
 * changelog partition per input partition; a compacted log keeps each store
 * key's last value). A missing changelog is created (replication factor -1:
 * the broker's default.replication.factor, KIP-464); an existing one is
 * checked. A mismatch is SG_ERR_CONFIG naming the topic. On librdkafka's mock
 * cluster (--embedded-kafka; its cluster id starts with "mockCluster"),
 * which has no admin API and no topic configs, the changelogs must exist
 * (sg_mock_start creates them) and cleanup.policy is not checked, logged as
 * "changelog_config_unchecked".
 */
static sg_err_t loop_ensure_changelogs(sg_loop_t *loop, char *errstr,
                                       size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        const rd_kafka_metadata_t *md;
        rd_kafka_t *rk = loop->producer;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md,
                                                  SG_METADATA_TIMEOUT_MS);
        if (e) {
                sg_errf(errstr, errstr_size, "reading cluster metadata: %s",
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        sg_err_t err = SG_OK;
        char es[512];
        /* librdkafka's mock cluster (--embedded-kafka, sg_mock_start) has
         * neither CreateTopics nor DescribeConfigs (2.0.2: the requests
         * time out): it is told by the cluster id it reports. */
        char *cid = rd_kafka_clusterid(rk, SG_METADATA_TIMEOUT_MS);
        bool admin = !(cid && !strncmp(cid, "mockCluster", 11));
        if (cid)
                rd_kafka_mem_free(rk, cid);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_NewTopic_t **nt = calloc(conf->topic_cnt, sizeof(*nt));
        size_t nt_cnt = 0;
        if (!nt)
                err = SG_ERR_NOMEM;
        /* 1. partition counts; collect the missing ones */
        for (size_t i = 0; !err && i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                const rd_kafka_metadata_topic_t *in = md_topic(md, tc->name);
                const rd_kafka_metadata_topic_t *cl =
                        md_topic(md, tc->changelog_topic);
                if (!in) { /* checked before; be safe */
                        sg_errf(errstr, errstr_size,
                                "input topic \"%s\" does not exist",
                                tc->name);
                        err = SG_ERR_CONFIG;
                } else if (cl && cl->partition_cnt != in->partition_cnt) {
                        sg_errf(errstr, errstr_size,
                                "changelog topic \"%s\" has %d partition(s), "
                                "input topic \"%s\" has %d: a changelog needs "
                                "exactly one partition per input partition "
                                "(semantics §6)",
                                tc->changelog_topic, cl->partition_cnt,
                                tc->name, in->partition_cnt);
                        err = SG_ERR_CONFIG;
                } else if (!cl && !admin) {
                        sg_errf(errstr, errstr_size,
                                "changelog topic \"%s\" does not exist and "
                                "librdkafka's mock cluster cannot create it",
                                tc->changelog_topic);
                        err = SG_ERR_CONFIG;
                } else if (!cl) {
                        nt[nt_cnt] = rd_kafka_NewTopic_new(
                                tc->changelog_topic, in->partition_cnt, -1,
                                es, sizeof(es));
                        if (!nt[nt_cnt] ||
                            rd_kafka_NewTopic_set_config(
                                    nt[nt_cnt], "cleanup.policy", "compact")) {
                                sg_errf(errstr, errstr_size,
                                        "changelog topic \"%s\": %s",
                                        tc->changelog_topic, es);
                                err = SG_ERR_CONFIG;
                        }
                        if (nt[nt_cnt])
                                nt_cnt++;
                }
        }
        rd_kafka_metadata_destroy(md);
        /* 2. create the missing ones */
        if (!err && nt_cnt > 0) {
                rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(
                        rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
                rd_kafka_AdminOptions_set_operation_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_AdminOptions_set_request_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_CreateTopics(rk, nt, nt_cnt, ao, q);
                rd_kafka_AdminOptions_destroy(ao);
                rd_kafka_event_t *ev =
                        admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT);
                if (!ev) {
                        sg_errf(errstr, errstr_size,
                                "creating changelog topics: no answer");
                        err = SG_ERR_KAFKA;
                } else if (rd_kafka_event_error(ev)) {
                        sg_errf(errstr, errstr_size,
                                "creating changelog topics: %s",
                                rd_kafka_event_error_string(ev));
                        err = SG_ERR_KAFKA;
                } else {
                        size_t rc;
                        const rd_kafka_topic_result_t **tr =
                                rd_kafka_CreateTopics_result_topics(
                                        rd_kafka_event_CreateTopics_result(ev),
                                        &rc);
                        for (size_t i = 0; !err && i < rc; i++) {
                                rd_kafka_resp_err_t te =
                                        rd_kafka_topic_result_error(tr[i]);
                                const char *tn =
                                        rd_kafka_topic_result_name(tr[i]);
                                if (te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                                        continue; /* another instance won */
                                if (te) {
                                        const char *tes =
                                                rd_kafka_topic_result_error_string(
                                                        tr[i]);
                                        sg_errf(errstr, errstr_size,
                                                "creating changelog topic "
                                                "\"%s\": %s",
                                                tn, tes ? tes
                                                        : rd_kafka_err2str(te));
                                        err = te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                                                              te == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED ||
                                                              te == RD_KAFKA_RESP_ERR_INVALID_CONFIG ||
                                                              te == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR
                                                      ? SG_ERR_CONFIG
                                                      : SG_ERR_KAFKA;
                                        continue;
                                }
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(f, "topic", tn);
                                cJSON_AddStringToObject(f, "cleanup.policy",
                                                        "compact");
                                loop_log(loop, SG_LOG_NOTICE,
                                         "changelog_topic_created", f);
                        }
                }
                if (ev)
                        rd_kafka_event_destroy(ev);
        }
        for (size_t i = 0; i < nt_cnt; i++)
                rd_kafka_NewTopic_destroy(nt[i]);
        free(nt);
        /* 3. cleanup.policy of every changelog (the ones just created too:
         *    the broker may have refused or altered nothing, but check) */
        if (!err && !admin) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(
                        f, "detail",
                        "librdkafka's mock cluster (--embedded-kafka) has no "
                        "topic configs: cleanup.policy of the changelog "
                        "topics not checked");
                loop_log(loop, SG_LOG_WARNING, "changelog_config_unchecked",
                         f);
                rd_kafka_queue_destroy(q);
                return SG_OK;
        }
        rd_kafka_ConfigResource_t **cr =
                err ? NULL : calloc(conf->topic_cnt, sizeof(*cr));
        if (!err && !cr)
                err = SG_ERR_NOMEM;
        for (size_t i = 0; !err && i < conf->topic_cnt; i++)
                cr[i] = rd_kafka_ConfigResource_new(
                        RD_KAFKA_RESOURCE_TOPIC,
                        conf->topics[i].changelog_topic);
        /* a topic just created may not be known to every broker yet */
        for (int tries = 0; !err; tries++) {
                bool retry = false;
                rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(
                        rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
                rd_kafka_AdminOptions_set_request_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_DescribeConfigs(rk, cr, conf->topic_cnt, ao, q);
                rd_kafka_AdminOptions_destroy(ao);
                rd_kafka_event_t *ev =
                        admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
                rd_kafka_resp_err_t ee =
                        ev ? rd_kafka_event_error(ev)
                           : RD_KAFKA_RESP_ERR__TIMED_OUT;
                if (ee == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
                    ee == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2name(ee));
                        cJSON_AddStringToObject(
                                f, "detail",
                                "the broker does not support DescribeConfigs "
                                "(older than Kafka 0.11): cleanup.policy of "
                                "the changelog topics not checked");
                        loop_log(loop, SG_LOG_WARNING,
                                 "changelog_config_unchecked", f);
                } else if (ee) {
                        sg_errf(errstr, errstr_size,
                                "describing changelog topics: %s",
                                ev ? rd_kafka_event_error_string(ev)
                                   : "no answer");
                        err = SG_ERR_KAFKA;
                } else {
                        size_t rc;
                        const rd_kafka_ConfigResource_t **res =
                                rd_kafka_DescribeConfigs_result_resources(
                                        rd_kafka_event_DescribeConfigs_result(
                                                ev),
                                        &rc);
                        for (size_t i = 0; !err && i < rc; i++) {
                                const char *tn =
                                        rd_kafka_ConfigResource_name(res[i]);
                                if (rd_kafka_ConfigResource_error(res[i]) ==
                                            RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                                    tries < 40) {
                                        retry = true;
                                        break;
                                }
                                if (rd_kafka_ConfigResource_error(res[i])) {
                                        sg_errf(errstr, errstr_size,
                                                "describing changelog topic "
                                                "\"%s\": %s",
                                                tn,
                                                rd_kafka_ConfigResource_error_string(
                                                        res[i]));
                                        err = SG_ERR_KAFKA;
                                        break;
                                }
                                size_t ec;
                                const rd_kafka_ConfigEntry_t **ce =
                                        rd_kafka_ConfigResource_configs(
                                                res[i], &ec);
                                const char *policy = NULL;
                                for (size_t k = 0; k < ec; k++)
                                        if (!strcmp(rd_kafka_ConfigEntry_name(
                                                            ce[k]),
                                                    "cleanup.policy"))
                                                policy =
                                                        rd_kafka_ConfigEntry_value(
                                                                ce[k]);
                                if (!policy || !strstr(policy, "compact")) {
                                        sg_errf(errstr, errstr_size,
                                                "changelog topic \"%s\" has "
                                                "cleanup.policy=%s; it must "
                                                "contain compact (a changelog "
                                                "keeps each store key's last "
                                                "value, semantics §6)",
                                                tn, policy ? policy : "(unset)");
                                        err = SG_ERR_CONFIG;
                                }
                        }
                }
                if (ev)
                        rd_kafka_event_destroy(ev);
                if (!retry)
                        break;
                sg_sleep_ms(250);
        }
        for (size_t i = 0; cr && i < conf->topic_cnt; i++)
                if (cr[i])
                        rd_kafka_ConfigResource_destroy(cr[i]);
        free(cr);
        rd_kafka_queue_destroy(q);
        return err;
}

/** exactly_once: registers the transactional.id with its coordinator,
 *  fencing any older producer with the same id (its open transaction is
 *  aborted by the coordinator). Retried while retriable. */
static sg_err_t loop_init_transactions(sg_loop_t *loop, char *errstr,
                                       size_t errstr_size) {
        sg_err_t err;
        TXN_CALL(loop,
                 rd_kafka_init_transactions(
                         loop->producer, (int)loop->conf->delivery_timeout_ms),
                 "init_transactions", errstr, errstr_size, &err);
        if (err == SG_OK) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "transactional_id",
                                        loop->conf->transactional_id);
                loop_log(loop, SG_LOG_INFO, "transactions_initialised", f);
        }
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

        loop->eos = conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE;
        if (loop->eos && !conf->transactional_id) {
                sg_errf(errstr, errstr_size,
                        "exactly_once without a transactional id");
                sg_loop_destroy(loop);
                return SG_ERR_INVALID;
        }
        if ((err = loop_client_new(loop, false, &loop->producer, errstr,
                                   errstr_size)) ||
            (err = loop_client_new(loop, true, &loop->consumer, errstr,
                                   errstr_size)) ||
            (err = loop_check_topics(loop, errstr, errstr_size)) ||
            (loop->eos &&
             ((err = loop_ensure_changelogs(loop, errstr, errstr_size)) ||
              (err = loop_restorer_new(loop, errstr, errstr_size)) ||
              (err = loop_init_transactions(loop, errstr, errstr_size))))) {
                if (err == SG_ERR_FATAL && loop->fatal != SG_OK)
                        sg_errf(errstr, errstr_size, "%s", loop->fatal_str);
                sg_loop_destroy(loop);
                return err == SG_ERR_FATAL ? SG_ERR_KAFKA : err;
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
                             size_t index, char *errstr, size_t errstr_size) {
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
                        RD_KAFKA_V_OPAQUE(
                                (void *)(loop->dr_base + 1 + index)),
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

/** The batch's next input offsets that move a partition forward (the
 *  paused record, or the one after the last processed). Caller destroys. */
static rd_kafka_topic_partition_list_t *loop_batch_offsets(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(
                        (int)(loop->batch_part_cnt ? loop->batch_part_cnt : 1));
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                int64_t off = p->pause_offset >= 0 ? p->pause_offset
                                                   : p->next_offset;
                if (off <= p->committed)
                        continue;
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition)
                        ->offset = off;
        }
        return l;
}

/** Marks @p l's offsets as committed by us. */
static void loop_offsets_committed(sg_loop_t *loop,
                                   const rd_kafka_topic_partition_list_t *l) {
        for (int i = 0; i < l->cnt; i++) {
                size_t pi = loop_part(loop, l->elems[i].topic,
                                      l->elems[i].partition);
                if (l->elems[i].offset > loop->parts[pi].committed)
                        loop->parts[pi].committed = l->elems[i].offset;
        }
}

/** Commits the batch's input offsets (after LMDB); failure is logged only. */
static void loop_commit_offsets(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l = loop_batch_offsets(loop);
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
                        loop_offsets_committed(loop, l);
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/** Aborts the open transaction (if any): its records are never seen by a
 *  read_committed reader and its offsets are not committed. A failure to
 *  abort leaves the producer unusable: the loop stops. */
static void loop_txn_abort(sg_loop_t *loop) {
        char es[512];
        sg_err_t err;
        if (!loop->txn_open)
                return;
        loop->txn_open = false;
        loop->stats.transactions_aborted_total++;
        TXN_CALL(loop,
                 rd_kafka_abort_transaction(loop->producer,
                                            (int)loop->conf->delivery_timeout_ms),
                 "abort_transaction", es, sizeof(es), &err);
        if (err == SG_ERR_KAFKA)
                loop_set_fatal(loop, SG_ERR_FATAL, es);
        else if (err == SG_OK)
                loop_log(loop, SG_LOG_NOTICE, "transaction_aborted", NULL);
}

/**
 * exactly_once, steps after the deliveries: the batch's input offsets join
 * the transaction with the consumer group metadata (KIP-447: a member whose
 * generation is stale is fenced), then the transaction commits (retried
 * while retriable). With no offset to move, the committed offsets of the
 * assigned partitions are sent again, so that every transaction — even one
 * holding only time-driven DLQ and changelog records — is fenced by the
 * group generation.
 */
static sg_err_t loop_txn_commit(sg_loop_t *loop, char *errstr,
                                size_t errstr_size) {
        sg_err_t err;
        rd_kafka_topic_partition_list_t *l = loop_batch_offsets(loop);
        if (l->cnt == 0)
                for (size_t i = 0; i < loop->part_cnt; i++) {
                        sg_part_t *p = &loop->parts[i];
                        if (p->assigned && p->committed >= 0)
                                rd_kafka_topic_partition_list_add(
                                        l, p->topic, p->partition)
                                        ->offset = p->committed;
                }
        if (l->cnt > 0) {
                rd_kafka_consumer_group_metadata_t *gm =
                        rd_kafka_consumer_group_metadata(loop->consumer);
                TXN_CALL(loop,
                         rd_kafka_send_offsets_to_transaction(
                                 loop->producer, l, gm,
                                 (int)loop->conf->delivery_timeout_ms),
                         "send_offsets_to_transaction", errstr, errstr_size,
                         &err);
                rd_kafka_consumer_group_metadata_destroy(gm);
                if (err) {
                        rd_kafka_topic_partition_list_destroy(l);
                        return err;
                }
        }
        TXN_CALL(loop,
                 rd_kafka_commit_transaction(
                         loop->producer, (int)loop->conf->delivery_timeout_ms),
                 "commit_transaction", errstr, errstr_size, &err);
        if (!err) {
                loop->txn_open = false;
                loop->kafka_committed = true;
                loop->stats.transactions_total++;
                loop_offsets_committed(loop, l);
        }
        rd_kafka_topic_partition_list_destroy(l);
        return err;
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
                        int64_t until = sg_clock_mono_ms() + loop->conf->pause_retry_ms;
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

/** Counts a committed attempt: latency since @p t0, output + DLQ records. */
static void loop_attempt_done(sg_loop_t *loop, const sg_effect_t *efs,
                              size_t cnt, int64_t t0) {
        int64_t lat = sg_clock_mono_ms() - t0;
        loop->stats.commit_latency_ms_last = lat;
        if (lat > loop->stats.commit_latency_ms_max)
                loop->stats.commit_latency_ms_max = lat;
        for (size_t i = 0; i < cnt; i++)
                if (efs[i].kind == SG_EFFECT_OUTPUT ||
                    efs[i].kind == SG_EFFECT_DLQ)
                        loop->stats.records_out_total++;
}

/**
 * One attempt at the batch: processor, produce, deliveries, LMDB commit,
 * offsets. On error the processor batch is still open (caller aborts it),
 * except when the error came from batch_commit.
 */
/* Tells the processor how far behind the end of its log each assigned
 * partition is read once this batch's records are processed (the
 * position() callback; semantics §4 backlog-aware gap deadlines): the
 * consumer's position (after the last record polled) against the high
 * watermark librdkafka cached from its last fetch. Paused partitions, and
 * those without a position or watermark yet, are reported unknown (-1). */
static void loop_report_positions(sg_loop_t *loop) {
        const sg_processor_t *pr = &loop->proc;
        if (!pr->position || !loop->consumer || loop->part_cnt == 0)
                return;
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)loop->part_cnt);
        if (!l)
                return;
        for (size_t i = 0; i < loop->part_cnt; i++)
                if (loop->parts[i].assigned)
                        rd_kafka_topic_partition_list_add(
                                l, loop->parts[i].topic,
                                loop->parts[i].partition);
        if (l->cnt > 0)
                rd_kafka_position(loop->consumer, l);
        for (int i = 0; i < l->cnt; i++) {
                const rd_kafka_topic_partition_t *e = &l->elems[i];
                const sg_part_t *p =
                        &loop->parts[loop_part(loop, e->topic, e->partition)];
                int64_t lo, hi, lag = -1;
                if (!p->paused_until && !(p->in_batch && p->pause_offset >= 0) &&
                    e->offset >= 0 &&
                    rd_kafka_get_watermark_offsets(loop->consumer, e->topic,
                                                   e->partition, &lo,
                                                   &hi) == 0 &&
                    hi >= 0)
                        lag = hi > e->offset ? hi - e->offset : 0;
                pr->position(pr->opaque, e->topic, e->partition, lag);
        }
        rd_kafka_topic_partition_list_destroy(l);
}

static sg_err_t loop_attempt(sg_loop_t *loop, size_t *consumedp,
                             char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err;
        size_t consumed = 0;

        loop->kafka_committed = false;
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                p->next_offset = p->first_offset;
                p->pause_offset = -1;
        }
        if ((err = pr->batch_begin(pr->opaque, sg_clock_wall_ms(), errstr,
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
        loop_report_positions(loop);
        if ((err = pr->tick(pr->opaque, errstr, errstr_size)))
                return err;

        const sg_effect_t *efs = NULL;
        size_t cnt = pr->effects(pr->opaque, &efs);
        size_t n = 0; /* records produced */
        int64_t t0 = sg_clock_mono_ms();
        if (cnt > loop->dr_offs_cap) {
                int64_t *o = realloc(loop->dr_offs, cnt * sizeof(*o));
                if (!o) {
                        sg_errf(errstr, errstr_size,
                                "out of memory for %zu delivery reports", cnt);
                        return SG_ERR_NOMEM;
                }
                loop->dr_offs = o;
                loop->dr_offs_cap = cnt;
        }
        for (size_t i = 0; i < cnt; i++)
                loop->dr_offs[i] = -1;
        loop->dr_base += loop->dr_cnt + 1;
        loop->dr_cnt = cnt;
        loop->dr_ok = loop->dr_fail = 0;
        loop->dr_err = RD_KAFKA_RESP_ERR_NO_ERROR;
        http_reqs_clear(loop);

        if (loop->eos) {
                /* One transaction per batch with anything to write or an
                 * offset to move (semantics §6, exactly_once). */
                bool records = false;
                for (size_t i = 0; !records && i < cnt; i++)
                        records = efs[i].kind != SG_EFFECT_HTTP_GET;
                rd_kafka_topic_partition_list_t *l = loop_batch_offsets(loop);
                bool moves = l->cnt > 0;
                rd_kafka_topic_partition_list_destroy(l);
                if (records || moves) {
                        rd_kafka_error_t *e =
                                rd_kafka_begin_transaction(loop->producer);
                        if (e)
                                return loop_txn_error(loop, e,
                                                      "begin_transaction",
                                                      errstr, errstr_size);
                        loop->txn_open = true;
                }
        }
        for (size_t i = 0; i < cnt; i++) {
                /* An HTTP GET is not a record: copied now, started only
                 * after the batch committed (processor.h). */
                if (efs[i].kind == SG_EFFECT_HTTP_GET)
                        err = http_req_add(loop, &efs[i], errstr, errstr_size);
                else if (!(err = loop_produce(loop, &efs[i], i, errstr,
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
        if (pr->delivered)
                for (size_t i = 0; i < cnt; i++)
                        if (efs[i].kind != SG_EFFECT_HTTP_GET)
                                pr->delivered(pr->opaque, i, loop->dr_offs[i]);

        if (loop->txn_open) {
                /* exactly_once: output, DLQ, changelog and input offsets
                 * commit atomically; LMDB after (semantics §6). No
                 * rd_kafka_commit of offsets in this mode. */
                if ((err = loop_txn_commit(loop, errstr, errstr_size)))
                        return err;
                /* done as far as Kafka is concerned, even if LMDB fails */
                loop_attempt_done(loop, efs, cnt, t0);
                *consumedp = consumed;
                return pr->batch_commit(pr->opaque, errstr, errstr_size);
        }
        /* Output durable → LMDB → input offsets (semantics §6). */
        if ((err = pr->batch_commit(pr->opaque, errstr, errstr_size)))
                return err;
        if (!loop->eos)
                loop_commit_offsets(loop);
        loop_attempt_done(loop, efs, cnt, t0);
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
                if (loop->kafka_committed) {
                        /* exactly_once: the transaction committed (output,
                         * changelog, offsets) but LMDB did not: the store is
                         * behind its changelog. The batch is done as far as
                         * Kafka is concerned; the designed recovery is a
                         * restore of every assigned partition before the
                         * next batch (sg_loop_run). */
                        loop->proc.batch_abort(loop->proc.opaque);
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error", sg_err2str(err));
                        cJSON_AddStringToObject(f, "reason", es);
                        cJSON_AddStringToObject(
                                f, "recovery",
                                "restore every assigned partition from its "
                                "changelog before the next batch");
                        loop_log(loop, SG_LOG_ERR, "store_behind_changelog",
                                 f);
                        if (err == SG_ERR_MAP_FULL && loop->proc.grow &&
                            loop->proc.grow(loop->proc.opaque, es,
                                            sizeof(es)) == SG_OK)
                                loop->stats.map_grows_total++;
                        loop->restore_needed = true;
                        err = SG_OK;
                        break;
                }
                /* An open transaction is aborted first: its records are
                 * never read (read_committed), its offsets never count. */
                loop_txn_abort(loop);
                loop->proc.batch_abort(loop->proc.opaque);
                /* Messages of the attempt must not be sent after the
                 * re-read batch's own output (a transactional producer's
                 * queue was purged by abort_transaction). */
                if (!loop->eos)
                        rd_kafka_purge(loop->producer, RD_KAFKA_PURGE_F_QUEUE);
                if (loop->fatal != SG_OK)
                        break;
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
                if (err == SG_ERR_FATAL && loop->fatal == SG_OK)
                        loop_set_fatal(loop, SG_ERR_FATAL, es);
                char fes[512];
                rd_kafka_resp_err_t fe = rd_kafka_fatal_error(
                        loop->producer, fes, sizeof(fes));
                if (fe && loop->eos) {
                        /* A transactional producer's fatal error (fenced):
                         * never start over under the same transactional.id
                         * with stale state; stop. */
                        if (loop->fatal == SG_OK)
                                loop_producer_fatal(loop, fe, "batch", fes);
                } else if (fe) {
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
                loop_log(loop, SG_LOG_INFO, "partitions_resumed",
                         parts_json(l));
                rd_kafka_topic_partition_list_destroy(l);
        }
}

/** Polls one batch: up to batch.max_records, or batch.max_ms (≥ 100 ms idle). */
static void loop_collect(sg_loop_t *loop) {
        int64_t start = sg_clock_mono_ms();
        int64_t max_ms = loop->conf->batch_max_ms > 0 ? loop->conf->batch_max_ms
                                                      : 0;
        int64_t deadline = start + max_ms;
        int64_t idle_deadline =
                start + (max_ms > SG_IDLE_POLL_MS ? max_ms : SG_IDLE_POLL_MS);
        http_drive(loop, 0); /* transfers that completed during the batch */
        do {
                int64_t now = sg_clock_mono_ms();
                int64_t left = (loop->msg_cnt ? deadline : idle_deadline) - now;
                /* HTTP transfers in flight: take turns with the fetcher. */
                bool busy = http_busy(loop);
                if (busy && left > SG_HTTP_SLICE_MS)
                        left = SG_HTTP_SLICE_MS;
                if (loop->msg_cnt == 0 && loop->http_done_cnt > 0)
                        left = 0; /* results to judge: do not idle */
                rd_kafka_message_t *m = rd_kafka_consumer_poll(
                        loop->consumer, left > 0 ? (int)left : 0);
                if (busy && (!m || sg_clock_mono_ms() != loop->http_polled_ms))
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
                 sg_clock_mono_ms() < (loop->msg_cnt ? deadline : idle_deadline));
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
        if (loop->restorer) {
                /* idle between restores: serve its logs and errors */
                rd_kafka_message_t *m =
                        rd_kafka_consumer_poll(loop->restorer, 0);
                if (m)
                        rd_kafka_message_destroy(m);
        }
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
        loop->next_stats_ms = sg_clock_mono_ms() + loop->conf->stats_interval_ms;
        while (!loop->stop && loop->fatal == SG_OK) {
                if (loop->restore_needed) {
                        /* exactly_once: LMDB fell behind the committed
                         * changelog (batch_commit failed after the Kafka
                         * commit): restore before judging anything more. */
                        char es[512] = "";
                        loop_log(loop, SG_LOG_NOTICE, "restore_rerun", NULL);
                        if (loop_restore(loop, NULL, es, sizeof(es)) ==
                            SG_OK) {
                                loop->restore_needed = false;
                        } else {
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(f, "error", es);
                                loop_log(loop, SG_LOG_ERR, "restore_failed",
                                         f);
                                for (int t = 0; t < 20 && !loop->stop; t++)
                                        loop_wait(loop, 50);
                                /* keep the group membership alive */
                                rd_kafka_poll(loop->consumer, 0);
                                continue;
                        }
                }
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
                    sg_clock_mono_ms() >= loop->next_stats_ms) {
                        loop_stats_emit(loop);
                        loop->next_stats_ms =
                                sg_clock_mono_ms() + loop->conf->stats_interval_ms;
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
        if (loop->restorer) {
                rd_kafka_consumer_close(loop->restorer);
                rd_kafka_destroy(loop->restorer);
        }
        free(loop->dr_offs);
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
                /* exactly_once: the changelog, one partition per input
                 * partition. The mock has no topic configs, so it is not
                 * compacted (nothing is ever cleaned in a mock) and the
                 * loop's cleanup.policy check is skipped there. */
                if (!err && conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE &&
                    tc->changelog_topic)
                        err = mock_topic(mc, tc->changelog_topic,
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
