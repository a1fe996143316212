/*
 * kafka_produce.c — the Kafka loop (kafka.h): producing and delivery reports.
 */
#include "kafka_int.h"

#include "engine.h" /* the DLQ header names, SG_DLQ_H_* */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sg_loop_cb_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        sg_loop_t *loop = SG_LOOP_OF(opaque);
        uintptr_t v = (uintptr_t)m->_private;
        if (v <= loop->dr_base || v - loop->dr_base > loop->dr_cnt)
                return; /* a report for an aborted attempt */
        if (m->err) {
                char res[300];
                snprintf(res, sizeof(res), "topic \"%s\"",
                         m->rkt ? rd_kafka_topic_name(m->rkt) : "?");
                sg_kafka_acl_note(&loop->klog, rk, m->err, "Write", res);
                loop->dr_fail++;
                loop->dr_errs[v - loop->dr_base - 1] = m->err;
                if (!loop->dr_err)
                        loop->dr_err = m->err;
        } else {
                loop->dr_ok++;
                loop->dr_offs[v - loop->dr_base - 1] = m->offset;
        }
}

/* Room for @p n delivery reports (offsets and errors, sg_loop_cb_dr). Keeps the
 * old arrays on failure. */
bool sg_loop_dr_reserve(sg_loop_t *loop, size_t n) {
        if (n <= loop->dr_offs_cap)
                return true;
        int64_t *o = realloc(loop->dr_offs, n * sizeof(*o));
        if (!o)
                return false;
        loop->dr_offs = o;
        rd_kafka_resp_err_t *de = realloc(loop->dr_errs, n * sizeof(*de));
        if (!de)
                return false;
        loop->dr_errs = de;
        loop->dr_offs_cap = n;
        return true;
}

/* Starts the delivery reports of a new attempt of @p n records (cb_dr
 * counts only these: a report of an earlier attempt falls outside). False
 * when out of memory. */
bool sg_loop_dr_begin(sg_loop_t *loop, size_t n) {
        if (!sg_loop_dr_reserve(loop, n))
                return false;
        for (size_t i = 0; i < n; i++) {
                loop->dr_offs[i] = -1;
                loop->dr_errs[i] = RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        loop->dr_base += loop->dr_cnt + 1;
        loop->dr_cnt = n;
        loop->dr_ok = loop->dr_fail = 0;
        loop->dr_err = RD_KAFKA_RESP_ERR_NO_ERROR;
        return true;
}

/* Extends the current attempt's delivery reports to its first @p n effects
 * (the effects the processor emitted so far: the loop produces each
 * record's effects as soon as it is decided, so an attempt's count grows
 * while it runs). The reports already in keep their place; the new ones
 * start unreported. Reports are served on the loop's thread only (poll,
 * flush), so the arrays never move under sg_loop_cb_dr. False when out of
 * memory. */
bool sg_loop_dr_grow(sg_loop_t *loop, size_t n) {
        if (n <= loop->dr_cnt)
                return true;
        if (n > loop->dr_offs_cap &&
            !sg_loop_dr_reserve(loop, n > 2 * loop->dr_offs_cap
                                              ? n
                                              : 2 * loop->dr_offs_cap))
                return false;
        for (size_t i = loop->dr_cnt; i < n; i++) {
                loop->dr_offs[i] = -1;
                loop->dr_errs[i] = RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        loop->dr_cnt = n;
        return true;
}

/* The producer's handle of topic @p name, created on first use (one
 * topic lookup and reference per topic, not per record: RD_KAFKA_V_RKT).
 * The handles go with the producer (sg_loop_topics_destroy). NULL when
 * out of memory or librdkafka refuses the topic (errno). */
static rd_kafka_topic_t *loop_topic(sg_loop_t *loop, const char *name) {
        for (size_t i = 0; i < loop->rkt_cnt; i++)
                if (!strcmp(rd_kafka_topic_name(loop->rkts[i]), name))
                        return loop->rkts[i];
        if (loop->rkt_cnt == loop->rkt_cap) {
                size_t cap = loop->rkt_cap ? 2 * loop->rkt_cap : 8;
                rd_kafka_topic_t **n = realloc(loop->rkts, cap * sizeof(*n));
                if (!n)
                        return NULL;
                loop->rkts = n;
                loop->rkt_cap = cap;
        }
        /* NULL conf: the producer's default topic configuration, exactly
         * what RD_KAFKA_V_TOPIC uses */
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(loop->producer, name, NULL);
        if (rkt)
                loop->rkts[loop->rkt_cnt++] = rkt;
        return rkt;
}

/** Destroys the producer's topic handles; called before the producer is
 *  destroyed (loop destroy, an idempotent producer re-created). */
void sg_loop_topics_destroy(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->rkt_cnt; i++)
                rd_kafka_topic_destroy(loop->rkts[i]);
        loop->rkt_cnt = 0;
}

/* Waits (delivery_timeout_ms) for the delivery reports of the @p n records
 * produced in this attempt, in slices of SG_WAIT_SLICE_MS with the loop's
 * stats and published metrics served between them (sg_loop_waiting: a
 * broker away for a minute is seen while it is away); with none, only
 * serves the producer's logs. Returns rd_kafka_flush()'s error
 * (__TIMED_OUT: some are not reported). */
static rd_kafka_resp_err_t loop_flush(sg_loop_t *loop, size_t n) {
        if (n == 0) {
                rd_kafka_poll(loop->producer, 0); /* serve producer logs */
                return RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        int64_t end = sg_clock_mono_ms() + loop->conf->delivery_timeout_ms;
        for (;;) {
                int64_t left = end - sg_clock_mono_ms();
                rd_kafka_resp_err_t e = rd_kafka_flush(
                        loop->producer,
                        (int)(left < 0                  ? 0
                              : left > SG_WAIT_SLICE_MS ? SG_WAIT_SLICE_MS
                                                        : left));
                if (e != RD_KAFKA_RESP_ERR__TIMED_OUT || left <= 0)
                        return e;
                sg_loop_waiting(loop);
        }
}

/* After loop_flush() returned @p flush_err: SG_OK when each of the @p n
 * records was delivered; otherwise counts the failed deliveries and says
 * how many of the @p what failed (SG_ERR_KAFKA). */
static sg_err_t loop_delivered(sg_loop_t *loop, size_t n,
                               rd_kafka_resp_err_t flush_err, const char *what,
                               char *errstr, size_t errstr_size) {
        if (!flush_err && loop->dr_fail == 0 && loop->dr_ok == n)
                return SG_OK;
        loop->stats.delivery_failures_total += loop->dr_fail;
        sg_errf(errstr, errstr_size, "%zu of %zu %s failed: %s",
                flush_err ? n - loop->dr_ok : loop->dr_fail, n, what,
                rd_kafka_err2str(flush_err ? flush_err : loop->dr_err));
        return SG_ERR_KAFKA;
}

/**
 * Produces @p n records of the loop's own (idempotent producer, at most one
 * attempt's delivery reports are counted: see sg_loop_cb_dr) and waits for every
 * delivery (delivery_timeout_ms); fills each record's offset. Only while no
 * batch attempt waits for its own reports. at_least_once only (a
 * transactional producer writes inside transactions).
 * @returns SG_OK, or SG_ERR_KAFKA if a record was not delivered.
 */
sg_err_t sg_loop_send(sg_loop_t *loop, sg_send_t *recs, size_t n, char *errstr,
                      size_t errstr_size) {
        if (n == 0)
                return SG_OK;
        sg_loop_producer_renew(loop); /* after an earlier failure */
        if (!loop->producer) {
                sg_errf(errstr, errstr_size, "no producer: %s",
                        loop->fatal_str);
                return SG_ERR_KAFKA;
        }
        if (!sg_loop_dr_begin(loop, n)) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                sg_err_t err =
                        sg_loop_produce(loop, &recs[i].ef, i,
                                        recs[i].framed ? recs[i].frame : NULL,
                                        errstr, errstr_size);
                if (err) {
                        rd_kafka_purge(loop->producer, RD_KAFKA_PURGE_F_QUEUE);
                        return err;
                }
        }
        sg_err_t err =
                loop_delivered(loop, n, loop_flush(loop, n),
                               "changelog deliveries", errstr, errstr_size);
        if (err)
                return err;
        for (size_t i = 0; i < n; i++)
                recs[i].offset = loop->dr_offs[i];
        return SG_OK;
}

/** Errors with which Kafka refuses a record for what it is, not for a
 *  passing state: retrying the same record cannot succeed (semantics §3 "A
 *  record the output topic cannot take"). */
static bool err_refused(rd_kafka_resp_err_t e) {
        return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
               e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE ||
               e == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

/**
 * Kafka refused effect @p index (@p code): tells the processor, which
 * decides whether the re-run routes that record differently
 * (processor.h refused()); if it will, the loop runs the same records
 * again at once (sg_loop_batch). Logged as "output_refused".
 */
static void loop_refused(sg_loop_t *loop, const sg_effect_t *ef, size_t index,
                         rd_kafka_resp_err_t code) {
        const sg_processor_t *pr = &loop->proc;
        bool too_large = code != RD_KAFKA_RESP_ERR_INVALID_RECORD;
        bool routed = pr->refused && pr->refused(pr->opaque, index, too_large,
                                                 rd_kafka_err2str(code));
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", ef->topic);
        cJSON_AddNumberToObject(f, "partition", ef->partition);
        cJSON_AddNumberToObject(f, "bytes", (double)sg_effect_wire_size(ef));
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(code));
        cJSON_AddBoolToObject(f, "rerouted", routed);
        sg_loop_log(loop, routed ? SG_LOG_NOTICE : SG_LOG_ERR, "output_refused",
                    f);
        if (routed)
                loop->rerun = true;
}

/** Longest untrusted field quoted into a "dlq" line. */
#define DLQ_LOG_QUOTE_MAX 256

/**
 * A "dlq" line at debug level (not info: one line per refused record
 * would be the volume of the input): the DLQ record @p ef the loop
 * produces — where its input record was (topic, partition, offset), the
 * reason, the aggregate and the detail, read from its DLQ headers
 * (engine.h SG_DLQ_H_*, docs/dlq.md "DLQ headers"); aggregate and detail are
 * input bytes, quoted through sg_quote. The engine decided; this says what
 * is produced. Fields of headers the record lacks are left out. Built
 * only when debug lines are kept (sg_loop_set_log_level): in a stream of
 * refusals, building and redacting a line per record the log callback
 * then drops was most of the loop thread's time.
 */
static void loop_log_dlq(sg_loop_t *loop, const sg_effect_t *ef) {
        static const struct {
                const char *header, *field;
                bool number;
        } fields[] = {
                {SG_DLQ_H_TOPIC, "topic", false},
                {SG_DLQ_H_PARTITION, "partition", true},
                {SG_DLQ_H_OFFSET, "offset", true},
                {SG_DLQ_H_REASON, "reason", false},
                {SG_DLQ_H_AGGREGATE, "aggregate", false},
                {SG_DLQ_H_DETAIL, "detail", false},
        };
        if (!sg_kafka_log_enabled(&loop->klog, SG_LOG_DEBUG))
                return;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "dlq_topic", ef->topic);
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const sg_header_t *x = NULL;
                for (size_t k = 0; k < ef->extra_cnt; k++)
                        if (!strcmp(ef->extra[k].name, fields[i].header))
                                x = &ef->extra[k];
                if (!x || !x->value)
                        continue;
                char q[DLQ_LOG_QUOTE_MAX + 4];
                /* trusted values are short and printable; quoting keeps a
                 * line one line whatever they hold */
                sg_quote(q, x->value, x->value_len, DLQ_LOG_QUOTE_MAX);
                if (fields[i].number)
                        cJSON_AddNumberToObject(f, fields[i].field,
                                                (double)strtoll(q, NULL, 10));
                else
                        cJSON_AddStringToObject(f, fields[i].field, q);
        }
        sg_loop_log(loop, SG_LOG_DEBUG, "dlq", f);
}

/** Produces one effect, waiting while the producer's queue is full;
 *  @p frame (SG_CHANGELOG_FRAME_LEN bytes, or NULL) becomes its
 *  SG_CHANGELOG_HEADER header (at_least_once changelog records). On a
 *  refusal of the record itself (producev checks message.max.bytes) the
 *  processor is told (loop_refused). */
sg_err_t sg_loop_produce(sg_loop_t *loop, const sg_effect_t *ef, size_t index,
                         const unsigned char *frame, char *errstr,
                         size_t errstr_size) {
        rd_kafka_topic_t *rkt = loop_topic(loop, ef->topic);
        if (!rkt) {
                sg_errf(errstr, errstr_size, "producing to %s: %s", ef->topic,
                        rd_kafka_err2str(rd_kafka_last_error()));
                return SG_ERR_KAFKA;
        }
        /* exactly_once: the transaction's first record on a changelog
         * partition names its writer (kafka_changelog.h "The writer of a
         * transaction") */
        bool writer = loop->eos && loop->txn_open &&
                      ef->kind == SG_EFFECT_CHANGELOG &&
                      sg_loop_txn_tag_first(loop, ef->topic, ef->partition);
        /* A record without headers (most exactly_once changelog records)
         * gets no header list: librdkafka allocates one (and its array)
         * per list and frees it on delivery. */
        rd_kafka_headers_t *h = NULL;
        if (frame || writer || ef->header_cnt + ef->extra_cnt > 0)
                h = rd_kafka_headers_new(ef->header_cnt + ef->extra_cnt + 3);
        if (frame)
                rd_kafka_header_add(h, SG_CHANGELOG_HEADER, -1, frame,
                                    SG_CHANGELOG_FRAME_LEN);
        if (writer)
                sg_loop_writer_headers_add(loop, h);
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
                        loop->producer, RD_KAFKA_V_RKT(rkt),
                        RD_KAFKA_V_PARTITION(ef->partition >= 0
                                                     ? ef->partition
                                                     : RD_KAFKA_PARTITION_UA),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(ef->key, ef->key_len),
                        RD_KAFKA_V_VALUE((void *)ef->value, ef->value_len),
                        RD_KAFKA_V_TIMESTAMP(
                                ef->timestamp_ms > 0 ? ef->timestamp_ms : 0),
                        RD_KAFKA_V_HEADERS(h),
                        RD_KAFKA_V_OPAQUE((void *)(loop->dr_base + 1 + index)),
                        RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
                        if (ef->kind == SG_EFFECT_DLQ)
                                loop_log_dlq(loop, ef);
                        return SG_OK; /* h (if any) owned by the message */
                }
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(loop->producer, 100);
                        continue;
                }
                if (h)
                        rd_kafka_headers_destroy(h);
                sg_errf(errstr, errstr_size,
                        "producing to %s [%" PRId32 "]: %s", ef->topic,
                        ef->partition, rd_kafka_err2str(e));
                if (err_refused(e))
                        loop_refused(loop, ef, index, e);
                return SG_ERR_KAFKA;
        }
}

/**
 * Isolation (after a refusal that hit several records of one produce
 * request, so that the refused one is not known): waits for the delivery
 * of the effect just produced before the next is produced, so that each
 * record is a request of its own and a refusal names its record.
 */
sg_err_t sg_loop_deliver_one(sg_loop_t *loop, const sg_effect_t *ef,
                             size_t index, char *errstr, size_t errstr_size) {
        rd_kafka_resp_err_t e = loop_flush(loop, 1);
        if (e) {
                sg_errf(errstr, errstr_size, "waiting for a delivery: %s",
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        rd_kafka_resp_err_t de = loop->dr_errs[index];
        if (!de)
                return SG_OK;
        loop->stats.delivery_failures_total++;
        sg_errf(errstr, errstr_size, "delivery to %s [%" PRId32 "] failed: %s",
                ef->topic, ef->partition, rd_kafka_err2str(de));
        if (err_refused(de))
                loop_refused(loop, ef, index, de);
        return SG_ERR_KAFKA;
}

/* After failed deliveries: refused records (semantics §3 "A record the
 * output topic cannot take"). One is the processor's to route; several
 * shared a produce request (the broker refuses a record batch as a whole),
 * so which one is not known: the re-run produces them one at a time. */
void sg_loop_note_refusals(sg_loop_t *loop, const sg_effect_t *efs,
                           size_t cnt) {
        size_t refused = 0, which = 0;
        for (size_t i = 0; i < cnt; i++)
                if (efs[i].kind != SG_EFFECT_HTTP_GET &&
                    err_refused(loop->dr_errs[i])) {
                        refused++;
                        which = i;
                }
        if (refused == 1) {
                loop_refused(loop, &efs[which], which, loop->dr_errs[which]);
        } else if (refused > 1 && !loop->isolate) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddNumberToObject(f, "refused", (double)refused);
                cJSON_AddStringToObject(
                        f, "error", rd_kafka_err2name(loop->dr_errs[which]));
                sg_loop_log(loop, SG_LOG_NOTICE, "output_refused_isolating", f);
                loop->isolate = true;
                loop->rerun = true;
        }
}

/** Waits for the attempt's deliveries: every one of the @p n records
 *  produced so far must be acknowledged. */
sg_err_t sg_loop_await(sg_loop_t *loop, size_t n, char *errstr,
                       size_t errstr_size) {
        rd_kafka_resp_err_t e = loop_flush(loop, n);
        if (e) {
                sg_errf(errstr, errstr_size, "waiting for %zu deliveries: %s",
                        n, rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        return loop_delivered(loop, n, RD_KAFKA_RESP_ERR_NO_ERROR, "deliveries",
                              errstr, errstr_size);
}
