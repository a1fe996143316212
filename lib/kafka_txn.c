/*
 * kafka_txn.c — the Kafka loop (kafka.h): Kafka transactions (exactly_once).
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Kafka transactions (exactly_once, KIP-98 / KIP-447)                  */

bool sg_loop_err_is_fenced(rd_kafka_resp_err_t code) {
        return code == RD_KAFKA_RESP_ERR__FENCED ||
               code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
               code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/** The transactional producer hit a fatal error (typically: fenced by a
 *  newer instance with the same transactional.id). Logs one line, event
 *  "fenced" or "fatal_producer_error", and stops the loop (SG_ERR_FATAL:
 *  the daemon exits non-zero). */
void sg_loop_producer_fatal(sg_loop_t *loop, rd_kafka_resp_err_t code,
                            const char *during, const char *reason) {
        bool fenced = sg_loop_err_is_fenced(code);
        char what[1200], buf[512];
        const char *inst =
                loop->conf->instance_id ? loop->conf->instance_id : "";
        const char *txid =
                sg_loop_transactional_id(loop->conf, buf, sizeof(buf));
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "transactional_id", txid);
        cJSON_AddStringToObject(f, "during", during);
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(code));
        cJSON_AddStringToObject(f, "reason", reason);
        if (fenced) {
                /* A newer producer under this transactional.id (KIP-98
                 * zombie fencing): this instance's own replacement, a
                 * takeover of a writer that left the group (semantics §6),
                 * or a second process started with the same instance_id.
                 * Nothing at start can tell the last from the first
                 * without racing a restart, so the newest wins and the
                 * line says what to change (docs/troubleshooting.md). */
                cJSON_AddStringToObject(f, "instance_id", inst);
                cJSON_AddStringToObject(
                        f, "detail",
                        "a newer producer with the same transactional.id "
                        "took over (another process started with this "
                        "instance_id); this one stops");
                cJSON_AddStringToObject(
                        f, "action",
                        "if that process is not this instance's "
                        "replacement, give every instance its own "
                        "instance_id (--instance-id, e.g. the pod or host "
                        "name): two with one id fence each other at every "
                        "restart");
        }
        sg_loop_log(loop, SG_LOG_ERR,
                    fenced ? "fenced" : "fatal_producer_error", f);
        if (fenced)
                sg_errf(what, sizeof(what),
                        "producer fenced: another process started with "
                        "instance_id \"%s\" (transactional.id \"%s\") and "
                        "took over; unless it is this instance's "
                        "replacement, give every instance its own "
                        "instance_id (%s, during %s)",
                        inst, txid, reason, during);
        else
                sg_errf(what, sizeof(what), "fatal producer error: %s (%s)",
                        reason, during);
        sg_loop_set_fatal(loop, SG_ERR_FATAL, what);
}

/** Takes a transactional API error (freed here): a fatal one of a fenced
 *  producer stops the loop (SG_ERR_FATAL); another fatal one marks the
 *  producer for replacement (txn_renew) and, like any other error, returns
 *  SG_ERR_KAFKA (the caller aborts the transaction and the batch). */
sg_err_t sg_loop_txn_error(sg_loop_t *loop, rd_kafka_error_t *e,
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
                        sg_errf(fes, sizeof(fes), "%s",
                                rd_kafka_error_string(e));
                }
                if (sg_loop_err_is_fenced(code)) {
                        /* another producer took the transactional id: a
                         * zombie stops */
                        sg_loop_producer_fatal(loop, code, during, fes);
                        err = SG_ERR_FATAL;
                } else {
                        /* unusable, yet the id is still ours (e.g. the
                         * coordinator aborted the transaction itself
                         * while the broker was away longer than
                         * transaction.timeout.ms, and refused the abort
                         * after it: INVALID_TXN_STATE): the batch is
                         * read again with a new producer (semantics §6
                         * "Waiting for Kafka") */
                        loop->txn_renew = true;
                }
        }
        rd_kafka_error_destroy(e);
        return err;
}

void sg_loop_txn_began(sg_loop_t *loop) {
        loop->txn_open = true;
        loop->txn_tag_cnt = 0;
}

#define SG_TXN_RETRIES 10

/** Runs one transactional call, retrying it while librdkafka says the error
 *  is retriable (and neither fatal nor abortable). */
#define TXN_CALL(loop, call, during, errstr, errstr_size, errp)                \
        do {                                                                   \
                for (int tries_ = 0;; tries_++) {                              \
                        rd_kafka_error_t *e_ = (call);                         \
                        if (!e_) {                                             \
                                *(errp) = SG_OK;                               \
                                break;                                         \
                        }                                                      \
                        if (rd_kafka_error_is_retriable(e_) &&                 \
                            !rd_kafka_error_is_fatal(e_) &&                    \
                            !rd_kafka_error_txn_requires_abort(e_) &&          \
                            tries_ < SG_TXN_RETRIES && !(loop)->stop) {        \
                                cJSON *f_ = cJSON_CreateObject();              \
                                cJSON_AddStringToObject(f_, "during", during); \
                                cJSON_AddStringToObject(                       \
                                        f_, "error",                           \
                                        rd_kafka_error_string(e_));            \
                                sg_loop_log(loop, SG_LOG_WARNING,              \
                                            "transaction_retry", f_);          \
                                rd_kafka_error_destroy(e_);                    \
                                continue;                                      \
                        }                                                      \
                        *(errp) = sg_loop_txn_error(loop, e_, during, errstr,  \
                                                    errstr_size);              \
                        break;                                                 \
                }                                                              \
        } while (0)

/** exactly_once: registers the transactional.id with its coordinator,
 *  fencing any older producer with the same id (its open transaction is
 *  aborted by the coordinator). A retriable error (the coordinator loading,
 *  not available, a timeout) is retried with back-off (sg_retry_t); a fatal
 *  one stops the loop. */
sg_err_t sg_loop_init_transactions(sg_loop_t *loop, char *errstr,
                                   size_t errstr_size) {
        sg_retry_t r;
        sg_retry_init(&r, "init_transactions");
        for (;;) {
                rd_kafka_error_t *e = rd_kafka_init_transactions(
                        loop->producer, (int)loop->conf->delivery_timeout_ms);
                if (!e) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "transactional_id",
                                                loop->conf->transactional_id);
                        sg_loop_log(loop, SG_LOG_INFO,
                                    "transactions_initialised", f);
                        return SG_OK;
                }
                /* librdkafka marks what may be retried; its error codes
                 * decide the rest like every other start-up call */
                rd_kafka_resp_err_t code = rd_kafka_error_code(e);
                bool retriable = !rd_kafka_error_is_fatal(e) &&
                                 !rd_kafka_error_txn_requires_abort(e) &&
                                 (rd_kafka_error_is_retriable(e) ||
                                  sg_kafka_err_retriable(code, false));
                bool gave_up = false;
                if (retriable &&
                    sg_retry_again(loop, &r,
                                   sg_kafka_err_retriable(code, false)
                                           ? code
                                           : RD_KAFKA_RESP_ERR__RETRY,
                                   false, rd_kafka_error_string(e), &gave_up)) {
                        rd_kafka_error_destroy(e);
                        continue;
                }
                char es[512], res[300];
                rd_kafka_resp_err_t fe =
                        rd_kafka_fatal_error(loop->producer, es, sizeof(es));
                snprintf(res, sizeof(res), "transactional id \"%s\"",
                         loop->conf->transactional_id);
                if (sg_kafka_acl_note(&loop->klog, loop->producer,
                                      fe ? fe : code, "Write", res)) {
                        sg_kafka_acl_denied(&loop->klog, errstr, errstr_size);
                        rd_kafka_error_destroy(e);
                        return SG_ERR_CONFIG;
                }
                sg_err_t err = sg_loop_txn_error(loop, e, "init_transactions",
                                                 es, sizeof(es));
                sg_errf(errstr, errstr_size, "%s%s", es,
                        gave_up ? " (retriable; retried for "
                                  "broker_retry_timeout_ms)"
                                : "");
                return err;
        }
}

/** Aborts the open transaction (if any): its records are never seen by a
 *  read_committed reader and its offsets are not committed. A failure to
 *  abort leaves the producer unusable: it is replaced before the next
 *  attempt (txn_renew; the new one's init_transactions aborts the
 *  transaction at the coordinator), unless it was fenced (the loop
 *  stops). */
void sg_loop_txn_abort(sg_loop_t *loop) {
        char es[512];
        sg_err_t err;
        char acl[512];
        if (!loop->txn_open)
                return;
        loop->txn_open = false;
        loop->stats.transactions_aborted_total++;
        /* a transaction refused for a missing ACL: that is the error to
         * stop with (the abort after it may fail too, saying less) */
        rd_kafka_poll(loop->producer, 0); /* its log: sg_kafka_acl_note */
        if (sg_kafka_acl_denied(&loop->klog, acl, sizeof(acl)))
                sg_loop_set_fatal(loop, SG_ERR_CONFIG, acl);
        TXN_CALL(loop,
                 rd_kafka_abort_transaction(
                         loop->producer, (int)loop->conf->delivery_timeout_ms),
                 "abort_transaction", es, sizeof(es), &err);
        if (err == SG_ERR_KAFKA)
                loop->txn_renew = true;
        else if (err == SG_OK)
                sg_loop_log(loop, SG_LOG_NOTICE, "transaction_aborted", NULL);
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
sg_err_t sg_loop_txn_commit(sg_loop_t *loop, char *errstr, size_t errstr_size) {
        sg_err_t err;
        rd_kafka_topic_partition_list_t *l = sg_loop_batch_offsets(loop);
        if (l->cnt == 0)
                for (size_t i = 0; i < loop->part_cnt; i++) {
                        sg_part_t *p = &loop->parts[i];
                        if (p->assigned && p->committed >= 0)
                                rd_kafka_topic_partition_list_add(l, p->topic,
                                                                  p->partition)
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
                sg_loop_offsets_committed(loop, l);
        }
        rd_kafka_topic_partition_list_destroy(l);
        return err;
}

/**
 * exactly_once, with no batch open: @p n records of the loop's own in a
 * transaction of their own — begun, produced with every delivery awaited
 * (sg_loop_send fills their offsets), committed; aborted on a failure. No
 * input offset joins it: for records no input offset depends on (the
 * changelog id, kafka_changelog.h), which a zombie may write too.
 */
sg_err_t sg_loop_txn_send(sg_loop_t *loop, sg_send_t *recs, size_t n,
                          char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (loop->txn_open) {
                sg_errf(errstr, errstr_size, "a transaction is open");
                return SG_ERR_INVALID;
        }
        rd_kafka_error_t *e = rd_kafka_begin_transaction(loop->producer);
        if (e)
                return sg_loop_txn_error(loop, e, "begin_transaction", errstr,
                                         errstr_size);
        sg_loop_txn_began(loop);
        err = sg_loop_send(loop, recs, n, errstr, errstr_size);
        if (!err)
                TXN_CALL(loop,
                         rd_kafka_commit_transaction(
                                 loop->producer,
                                 (int)loop->conf->delivery_timeout_ms),
                         "commit_transaction", errstr, errstr_size, &err);
        if (!err) {
                loop->txn_open = false;
                loop->stats.transactions_total++;
        } else if (err != SG_ERR_FATAL) {
                sg_loop_txn_abort(loop);
        }
        return err;
}
