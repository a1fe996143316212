/*
 * kafka_batch.c — the Kafka loop (kafka.h): the batch protocol, poll →
 * process → produce → await deliveries → commit. State is committed only
 * after Kafka accepted the batch's output; on any failure the batch is
 * aborted and its records are read again (sg_loop_batch).
 *
 * Invariant (semantics §6, at_least_once), relied on by loop_attempt(),
 * sg_loop_changelog_write() (kafka_changelog.c) and sg_loop_batch():
 *     produce every output and DLQ effect [a stateful processor: and right
 *     behind them the changelog records (framed, kafka_changelog.h)] →
 *     every delivery succeeded [each changelog partition's right after
 *     this owner's previous record → one marker per changelog partition,
 *     delivered, placed likewise] → processor batch_commit (LMDB) → commit
 *     the input offsets.
 * No complete changelog batch (one with its marker) describes output Kafka
 * did not accept (a batch's records are void until its marker, and the
 * owner repairs its own unfinished batch under that batch's sequence:
 * kafka_changelog.h "repair"), LMDB is never
 * committed before Kafka accepted the batch's output and changelog, and an
 * input offset is never committed before LMDB. Any failure aborts the
 * processor's batch and seeks every partition of the batch back to its
 * first record in the batch, so the records are read again; nothing is
 * skipped to make progress. A failure once changelog records were produced
 * also restores those partitions first (sg_loop_restore: the unfinished
 * batch's records are void for every reader and their keys are rewritten).
 * Ownership of a changelog partition (its epoch) is claimed on assignment
 * (sg_loop_claim) and checked against the consumer group generation; kafka.h
 * "Changelog fencing" argues why a zombie owner can only duplicate.
 *
 * Invariant (semantics §6, exactly_once), relied on by
 * loop_attempt() and sg_loop_batch():
 *     begin_transaction → produce every effect (changelog included) → every
 *     delivery succeeded → send_offsets_to_transaction (KIP-447 group
 *     metadata) → commit_transaction → processor batch_commit (LMDB).
 * The transaction is the commit point: LMDB only follows it. A failure
 * before commit_transaction aborts the transaction and rewinds exactly as
 * above; a batch_commit failure after it is not a rewind (Kafka already
 * holds the batch's output and offsets) but a store behind its changelog,
 * repaired by restoring every assigned partition before the next batch.
 * Restores (sg_loop_restore) run inside the rebalance callback before the
 * input partitions are handed to the consumer, on a third, group-less
 * read_committed consumer (loop->restorer). A fatal producer error (fenced)
 * stops the loop; the producer is never re-created under the same
 * transactional.id.
 */
#include "kafka_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                        for (size_t k = 0;
                             !rd_kafka_header_get_all(h, k, &name, &val, &vs);
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
         * (processor.h). They stay with the transfers until a batch
         * commits. */
        return sg_snapshot_http_drain(loop->http, &loop->http_recs,
                                      &loop->http_batch_cnt);
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
                p->eof = -1; /* read again from the offset sought */
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition)
                        ->offset = to_pause ? p->pause_offset : p->first_offset;
        }
        if (l->cnt > 0) {
                if (to_pause) {
                        rd_kafka_pause_partitions(loop->consumer, l);
                        int64_t until =
                                sg_clock_mono_ms() + loop->conf->pause_retry_ms;
                        for (int i = 0; i < l->cnt; i++) {
                                size_t pi =
                                        sg_loop_part(loop, l->elems[i].topic,
                                                     l->elems[i].partition);
                                if (pi == SG_NO_PART)
                                        continue;
                                loop->parts[pi].paused_until =
                                        until > 0 ? until : 1;
                                loop->stats.pauses_total++;
                        }
                        sg_loop_log(loop, SG_LOG_INFO, "partitions_paused",
                                    sg_kafka_parts_json(l));
                }
                rd_kafka_error_t *e = rd_kafka_seek_partitions(
                        loop->consumer, l, SG_SEEK_TIMEOUT_MS);
                const char *bad = NULL;
                for (int i = 0; !e && i < l->cnt; i++)
                        if (l->elems[i].err)
                                bad = rd_kafka_err2str(l->elems[i].err);
                if (e || bad) {
                        cJSON *f = sg_kafka_parts_json(l);
                        cJSON_AddStringToObject(
                                f, "error", e ? rd_kafka_error_string(e) : bad);
                        sg_loop_log(loop, SG_LOG_ERR, "seek_failed", f);
                }
                if (e)
                        rd_kafka_error_destroy(e);
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/** Counts a committed attempt: latency since @p t0, output + DLQ records. */
static void loop_attempt_done(sg_loop_t *loop, const sg_effect_t *efs,
                              size_t cnt, int64_t t0) {
        /* An idle poll (no record, no snapshot result, no effect) commits
         * nothing: the latency histograms and figures leave it out, or
         * their quantiles would describe idle polls, not commits. */
        loop->batch_idle =
                loop->msg_cnt == 0 && loop->http_batch_cnt == 0 && cnt == 0;
        if (loop->batch_idle)
                return;
        int64_t lat = sg_clock_mono_ms() - t0;
        sg_hist_observe(&loop->stats.commit_latency_ms, lat);
        loop->stats.commit_latency_ms_last = lat;
        if (lat > loop->stats.commit_latency_ms_max)
                loop->stats.commit_latency_ms_max = lat;
        for (size_t i = 0; i < cnt; i++)
                if (efs[i].kind == SG_EFFECT_OUTPUT ||
                    efs[i].kind == SG_EFFECT_DLQ)
                        loop->stats.records_out_total++;
}

/** Tells the processor the offset every record effect of the batch's @p cnt
 *  landed at (the delivered() callback). */
void sg_loop_report_delivered(sg_loop_t *loop, const sg_effect_t *efs,
                              size_t cnt) {
        const sg_processor_t *pr = &loop->proc;
        if (pr->delivered)
                for (size_t i = 0; i < cnt; i++)
                        if (efs[i].kind != SG_EFFECT_HTTP_GET)
                                pr->delivered(pr->opaque, i, loop->dr_offs[i]);
}

/* Tells the processor how far behind the end of its log each assigned
 * partition is read once this batch's records are processed (the
 * position() callback; semantics §4 backlog-aware gap deadlines): the
 * consumer's position (after the last record polled; before any record
 * since the assignment, the offset committed or started at) against the
 * high watermark librdkafka cached from its last fetch. Paused partitions,
 * and those without a position or watermark yet, are reported unknown
 * (-1). */
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
                const sg_part_t *p = &loop->parts[sg_loop_part(loop, e->topic,
                                                               e->partition)];
                int64_t lo, hi, lag = -1;
                /* Nothing polled since the assignment: no position yet;
                 * the consumer reads from where it started, the later of
                 * the group's offset and the restored store's (an
                 * at_least_once group offset may trail the store), or
                 * from what it committed since. Semantics §4 "Which
                 * clock": counted from a trailing group offset, a
                 * partition with nothing more to read stayed "behind"
                 * and its gap deadlines never fired. */
                int64_t pos = e->offset;
                if (pos < 0)
                        pos = p->start > p->committed ? p->start : p->committed;
                if (!p->paused_until &&
                    !(p->in_batch && p->pause_offset >= 0) && pos >= 0 &&
                    rd_kafka_get_watermark_offsets(loop->consumer, e->topic,
                                                   e->partition, &lo,
                                                   &hi) == 0 &&
                    hi >= 0)
                        lag = hi > pos ? hi - pos : 0;
                pr->position(pr->opaque, e->topic, e->partition, lag);
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/* What an attempt handed to the producer so far (loop_attempt_emit). */
typedef struct attempt_out {
        size_t next; /**< effects [0, next) are seen: produced, or held back */
        size_t n;    /**< records produced */
        size_t ncl;  /**< changelog records held back (framed) */
} attempt_out_t;

/** exactly_once: begins the batch's transaction, once, before its first
 *  record is produced (or, with nothing to write, for the offsets alone:
 *  loop_attempt_emit_end). */
static sg_err_t loop_attempt_txn_begin(sg_loop_t *loop, char *errstr,
                                       size_t errstr_size) {
        if (loop->txn_open)
                return SG_OK;
        rd_kafka_error_t *e = rd_kafka_begin_transaction(loop->producer);
        if (e)
                return sg_loop_txn_error(loop, e, "begin_transaction", errstr,
                                         errstr_size);
        sg_loop_txn_began(loop);
        return SG_OK;
}

/** Effects loop_attempt_emit gathers before it hands them over: an
 *  eighth of batch.max_records (at least one). One record at a time cost
 *  more CPU than it saved (librdkafka woke its broker thread and sent a
 *  small produce request for nearly every record: 100 k events, at
 *  least_once 2.69 vs 1.75 CPU-s, exactly_once 2.72 vs 1.97); an eighth
 *  still overlaps seven eighths of a batch's output with deciding. */
static size_t loop_emit_chunk(const sg_loop_t *loop) {
        size_t c = (size_t)loop->conf->batch_max_records / 8;
        return c > 0 ? c : 1;
}

/**
 * Produce while deciding: hands the effects the processor emitted since the
 * last hand-over to the producer, so that librdkafka's threads send the
 * output of the records decided so far while the processor decides the
 * next ones (the machine's second core), and the attempt's end waits only
 * for the tail. Called after every
 * process() (it hands over once loop_emit_chunk effects gathered) and,
 * @p final, once after tick() (everything left).
 *
 * This is sound because the processor's effects are append-only within an
 * attempt: an effect, once process() or tick() returned, is never changed
 * or withdrawn by a later record of the same attempt (processor.h: "The
 * batch's effects so far"; engine_effects.c sg_eng_effect_new appends, and
 * the one effect it takes back — an output record replaced by its
 * output_rejected DLQ record — is taken back inside the same emit call;
 * the memory an effect points at lives until batch_commit/batch_abort, and
 * RD_KAFKA_MSG_F_COPY copies it anyway). The kinds that are not records
 * produced now are held back: an HTTP GET is only copied at the end
 * (loop_attempt_emit_end), and at_least_once changelog records are framed
 * and produced once the batch is decided, behind its output and DLQ
 * records (sg_loop_changelog_write).
 * The commit point does not move: nothing is committed before every
 * delivery of the attempt succeeded (loop_attempt).
 *
 * An isolating re-run (loop->isolate) waits for each record's delivery
 * before the next is produced, as before.
 */
static sg_err_t loop_attempt_emit(sg_loop_t *loop, attempt_out_t *out,
                                  bool final, char *errstr,
                                  size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        const sg_effect_t *efs = NULL;
        size_t cnt = pr->effects(pr->opaque, &efs);
        sg_err_t err = SG_OK;
        if (cnt <= out->next)
                return SG_OK;
        /* Both guarantees overlap. exactly_once: an aborted
         * transaction's records are never read. at_least_once: what it
         * produced is visible at once, so an attempt that fails while
         * deciding (a store error, the map full) leaves the records it
         * handed over so far in the output, delivered before the rewind
         * (loop_attempt_unwind): duplicates, as after any rewind. Output
         * order holds: a produce request failing for good stops the
         * producer before a later record of its partition lands
         * (enable.gapless.guarantee, semantics §6 "Output order"). Handed
         * over at the end, the whole batch's records were serialized,
         * sent and acknowledged while the loop waited: an at_least_once
         * batch waited about twice as long as an exactly_once one. */
        if (!final && cnt - out->next < loop_emit_chunk(loop))
                return SG_OK;
        if (!sg_loop_dr_grow(loop, cnt)) {
                sg_errf(errstr, errstr_size,
                        "out of memory for %zu delivery reports", cnt);
                return SG_ERR_NOMEM;
        }
        /* at_least_once with a changelog: the output and DLQ records
         * first; the changelog records right behind them once the batch
         * is decided (framed with the batch's sequence), then, once Kafka
         * accepted all of them, one marker per partition
         * (kafka_changelog.h, sg_loop_changelog_write). */
        bool framed = loop->alos_cl;
        for (size_t i = out->next; i < cnt && !err; i++) {
                out->next = i + 1;
                if (efs[i].kind == SG_EFFECT_HTTP_GET)
                        continue;
                if (framed && efs[i].kind == SG_EFFECT_CHANGELOG) {
                        out->ncl++;
                        continue;
                }
                if (loop->eos &&
                    (err = loop_attempt_txn_begin(loop, errstr, errstr_size)))
                        break;
                if ((err = sg_loop_produce(loop, &efs[i], i, NULL, errstr,
                                           errstr_size)))
                        break;
                out->n++;
                if (loop->isolate)
                        err = sg_loop_deliver_one(loop, &efs[i], i, errstr,
                                                  errstr_size);
        }
        return err;
}

/** loop_attempt, step 1: opens the processor's batch and gives it the
 *  batch's records (a partition the processor pauses is re-read from that
 *  record) and HTTP snapshot results, producing each record's effects as
 *  soon as it is decided (loop_attempt_emit), reports positions, then
 *  ticks. *consumedp: the records processed. */
static sg_err_t loop_attempt_process(sg_loop_t *loop, attempt_out_t *out,
                                     size_t *consumedp, char *errstr,
                                     size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err;
        size_t consumed = 0;

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
                if ((err = pr->process(pr->opaque, &loop->recs[i], &res, errstr,
                                       errstr_size)))
                        return err;
                if (res == SG_PAUSE) {
                        p->pause_offset = loop->recs[i].offset;
                } else {
                        p->next_offset = loop->recs[i].offset + 1;
                        consumed++;
                }
                if ((err = loop_attempt_emit(loop, out, false, errstr,
                                             errstr_size)))
                        return err;
        }
        /* HTTP snapshot results after the Kafka records; no offset, so
         * nothing to pause at: SG_PAUSE counts as processed. */
        for (size_t i = 0; i < loop->http_batch_cnt; i++) {
                sg_process_result_t res = SG_PROCESSED;
                if ((err = pr->process(pr->opaque, &loop->http_recs[i], &res,
                                       errstr, errstr_size)) ||
                    (err = loop_attempt_emit(loop, out, false, errstr,
                                             errstr_size)))
                        return err;
        }
        loop_report_positions(loop);
        *consumedp = consumed;
        return pr->tick(pr->opaque, errstr, errstr_size);
}

/** loop_attempt, step 2, once tick() ran: produces the effects tick()
 *  added (time-driven DLQ records, the changelog), begins the transaction
 *  of an exactly_once batch that writes nothing but moves an offset (one
 *  transaction per batch with anything to write or an offset to move,
 *  semantics §6), and copies the batch's HTTP GETs (started only after the
 *  batch committed, processor.h). */
static sg_err_t loop_attempt_emit_end(sg_loop_t *loop, attempt_out_t *out,
                                      char *errstr, size_t errstr_size) {
        const sg_effect_t *efs = NULL;
        sg_err_t err;
        if ((err = loop_attempt_emit(loop, out, true, errstr, errstr_size)))
                return err;
        size_t cnt = loop->proc.effects(loop->proc.opaque, &efs);
        if (loop->eos && !loop->txn_open) {
                rd_kafka_topic_partition_list_t *l =
                        sg_loop_batch_offsets(loop);
                bool moves = l->cnt > 0;
                rd_kafka_topic_partition_list_destroy(l);
                if (moves &&
                    (err = loop_attempt_txn_begin(loop, errstr, errstr_size)))
                        return err;
        }
        sg_snapshot_http_discard(loop->http);
        for (size_t i = 0; i < cnt; i++)
                if (efs[i].kind == SG_EFFECT_HTTP_GET &&
                    (err = sg_snapshot_http_submit(loop->http, &efs[i], errstr,
                                                   errstr_size)))
                        return err;
        return SG_OK;
}

/**
 * An attempt failed (@p err) while @p out's records may still be on their
 * way. at_least_once: waits for them (delivery_timeout_ms) before the
 * caller rewinds — they may be duplicates downstream, as after any
 * rewind, but none is purged from the middle of an idempotent producer's
 * sequence and none is sent after the re-read batch's own output; then,
 * after a Kafka error, their refused records are looked for as after a
 * failed await. exactly_once: abort_transaction purges them and serves
 * their reports; the refused records are looked for after it
 * (sg_loop_batch).
 */
static void loop_attempt_unwind(sg_loop_t *loop, const attempt_out_t *out,
                                sg_err_t err) {
        if (out->n == 0 || loop->rerun)
                return;
        if (loop->eos) {
                loop->dr_note_after_abort = err == SG_ERR_KAFKA;
                return;
        }
        rd_kafka_flush(loop->producer, (int)loop->conf->delivery_timeout_ms);
        if (err == SG_ERR_KAFKA) {
                const sg_effect_t *efs = NULL;
                size_t cnt = loop->proc.effects(loop->proc.opaque, &efs);
                sg_loop_note_refusals(loop, efs,
                                      cnt < out->next ? cnt : out->next);
        }
}

/** loop_attempt, step 4, past the commit point: commits the transaction
 *  (exactly_once), the processor's batch (LMDB) and the input offsets, in
 *  each guarantee's order (semantics §6); counts the attempt and sets
 *  *consumedp to @p consumed once Kafka has the batch. */
static sg_err_t loop_attempt_commit(sg_loop_t *loop, const sg_effect_t *efs,
                                    size_t cnt, int64_t t0, size_t consumed,
                                    size_t *consumedp, char *errstr,
                                    size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err;
        if (loop->txn_open) {
                /* exactly_once: output, DLQ, changelog and input offsets
                 * commit atomically; LMDB after (semantics §6). No
                 * rd_kafka_commit of offsets in this mode. */
                if ((err = sg_loop_txn_commit(loop, errstr, errstr_size)))
                        return err;
                /* done as far as Kafka is concerned, even if LMDB fails */
                loop_attempt_done(loop, efs, cnt, t0);
                *consumedp = consumed;
                return pr->batch_commit(pr->opaque, errstr, errstr_size);
        }
        if (loop->kafka_committed) {
                /* at_least_once: the batch's changelog is complete in Kafka
                 * (markers acknowledged): a failing LMDB commit leaves the
                 * store behind its changelog, repaired by a restore, not
                 * by re-reading (sg_loop_batch). */
                loop_attempt_done(loop, efs, cnt, t0);
                *consumedp = consumed;
                if ((err = pr->batch_commit(pr->opaque, errstr, errstr_size)))
                        return err;
                sg_loop_commit_offsets(loop);
                return SG_OK;
        }
        /* Output durable → LMDB → input offsets (semantics §6). */
        if ((err = pr->batch_commit(pr->opaque, errstr, errstr_size)))
                return err;
        if (!loop->eos)
                sg_loop_commit_offsets(loop);
        loop_attempt_done(loop, efs, cnt, t0);
        *consumedp = consumed;
        return SG_OK;
}

/**
 * One attempt at the batch: processor (each record's effects produced as
 * soon as it is decided), the rest of the effects, deliveries, LMDB
 * commit, offsets. On error the processor batch is still open (caller
 * aborts it), except when the error came from batch_commit.
 */
static sg_err_t loop_attempt(sg_loop_t *loop, size_t *consumedp, char *errstr,
                             size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err;
        size_t consumed = 0;
        attempt_out_t out = {0};

        loop->kafka_committed = false;
        loop->dr_note_after_abort = false;
        if (!sg_loop_dr_begin(loop, 0)) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        const sg_effect_t *efs = NULL;
        size_t cnt = 0;
        int64_t t0 = 0;
        if ((err = loop_attempt_process(loop, &out, &consumed, errstr,
                                        errstr_size)))
                goto failed;
        t0 = sg_clock_mono_ms();
        if ((err = loop_attempt_emit_end(loop, &out, errstr, errstr_size)))
                goto failed;
        cnt = pr->effects(pr->opaque, &efs);
        if (out.ncl > 0) {
                /* at_least_once with a changelog: the changelog records go
                 * out right behind the output and DLQ records, and one
                 * wait covers them all; only the markers wait for every
                 * acknowledgement (sg_loop_changelog_write). */
                if ((err = sg_loop_changelog_write(loop, efs, cnt, out.ncl,
                                                   out.n, errstr,
                                                   errstr_size))) {
                        if (loop->dr_fail > 0)
                                sg_loop_note_refusals(loop, efs, cnt);
                        return err;
                }
        } else {
                if ((err = sg_loop_await(loop, out.n, errstr, errstr_size))) {
                        sg_loop_note_refusals(loop, efs, cnt);
                        return err;
                }
                sg_loop_report_delivered(loop, efs, cnt);
        }

        /* The commit point (semantics §6): nothing below may run unless
         * Kafka accepted every record of the attempt — the n output and DLQ
         * records, or (an at_least_once changelog) the markers, whose
         * deliveries came last and only after every output, DLQ and
         * changelog record's. */
        assert(loop->dr_fail == 0 &&
               loop->dr_ok == (out.ncl > 0 ? loop->dr_cnt : out.n));
        return loop_attempt_commit(loop, efs, cnt, t0, consumed, consumedp,
                                   errstr, errstr_size);
failed:
        loop_attempt_unwind(loop, &out, err);
        return err;
}

void sg_loop_release(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->batch_part_cnt; i++)
                loop->parts[loop->batch_parts[i]].in_batch = false;
        loop->batch_part_cnt = 0;
        for (size_t i = 0; i < loop->msg_cnt; i++)
                rd_kafka_message_destroy(loop->msgs[i]);
        loop->msg_cnt = 0;
}

/* sg_loop_batch, after the batch failed for good (@p err, @p es; @p why:
 * what ran it, or NULL): seeks its partitions back so that its records
 * are read again, logs "batch_aborted", and deals with a fatal producer
 * error (exactly_once: stop; at_least_once: a new producer). */
static void loop_batch_aborted(sg_loop_t *loop, sg_err_t err, const char *es,
                               const char *why) {
        /* HTTP results stay for the next attempt; the requests are
         * forgotten with the batch (the re-run issues them again). */
        sg_snapshot_http_abort(loop->http);
        loop->http_batch_cnt = 0;
        loop->stats.batches_aborted_total++;
        /* /readyz says not ready while batches keep failing (a full disk:
         * every batch is aborted until space is freed) */
        loop->stats.batches_aborted_in_a_row++;
        snprintf(loop->abort_str, sizeof(loop->abort_str), "%s: %s",
                 sg_err2str(err), es);
        loop_seek(loop, false);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "error", sg_err2str(err));
        cJSON_AddStringToObject(f, "reason", es);
        cJSON_AddNumberToObject(f, "records", (double)loop->msg_cnt);
        if (why)
                cJSON_AddStringToObject(f, "during", why);
        sg_loop_log(loop, SG_LOG_ERR, "batch_aborted", f);
        if (err == SG_ERR_FATAL && loop->fatal == SG_OK)
                sg_loop_set_fatal(loop, SG_ERR_FATAL, es);
        char fes[512];
        rd_kafka_resp_err_t fe =
                loop->producer
                        ? rd_kafka_fatal_error(loop->producer, fes, sizeof(fes))
                        : RD_KAFKA_RESP_ERR_NO_ERROR;
        if (fe && loop->eos &&
            (!loop->txn_renew || sg_loop_err_is_fenced(fe))) {
                /* A transactional producer fenced by another one: never
                 * start over under the same transactional.id with stale
                 * state; stop. */
                if (loop->fatal == SG_OK)
                        sg_loop_producer_fatal(loop, fe, "batch", fes);
        } else if (fe || loop->txn_renew) {
                sg_loop_producer_renew(loop);
        }
}

void sg_loop_producer_renew(sg_loop_t *loop) {
        char fes[512] = "";
        if (!loop->producer || loop->fatal != SG_OK)
                return;
        rd_kafka_resp_err_t fe =
                rd_kafka_fatal_error(loop->producer, fes, sizeof(fes));
        if (loop->eos ? !loop->txn_renew || sg_loop_err_is_fenced(fe) : !fe)
                return;
        if (!fe)
                snprintf(fes, sizeof(fes), "%s",
                         "the transaction could not be aborted");
        rd_kafka_t *np = NULL;
        char nes[512];
        cJSON *pf = cJSON_CreateObject();
        cJSON_AddStringToObject(pf, "error", fes);
        if (loop->eos)
                cJSON_AddStringToObject(pf, "transactional_id", loop->txid);
        sg_loop_log(loop, SG_LOG_ERR, "producer_recreated", pf);
        rd_kafka_purge(loop->producer,
                       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        sg_loop_topics_destroy(loop);
        rd_kafka_destroy(loop->producer);
        loop->producer = NULL;
        loop->txn_open = false;
        loop->txn_renew = false;
        sg_err_t err = sg_loop_client_new(loop, false, &np, nes, sizeof(nes));
        if (!err) {
                loop->producer = np;
                /* exactly_once: the same transactional id, registered
                 * anew; the coordinator aborts what the old producer left
                 * open */
                if (loop->eos)
                        err = sg_loop_init_transactions(loop, nes, sizeof(nes));
        }
        if (err && loop->fatal == SG_OK)
                sg_loop_set_fatal(loop, SG_ERR_FATAL, nes);
}

/** Restores the partitions marked for it (sg_loop_restore) before a batch
 *  attempt: their store is behind what Kafka holds. @returns SG_OK or the
 *  restore's error (in @p es; the partitions stay marked). */
static sg_err_t loop_restore_behind(sg_loop_t *loop, char *es, size_t n) {
        if (!loop->restore_needed)
                return SG_OK;
        sg_loop_log(loop, SG_LOG_NOTICE, "restore_rerun", NULL);
        sg_err_t err = sg_loop_restore(loop, NULL, NULL, es, n);
        sg_loop_restore_outcome(loop, err, es);
        if (err)
                return err;
        loop->restore_needed = false;
        sg_loop_commit_pending(loop);
        return SG_OK;
}

/* sg_loop_batch, step 1: the batch's state for its first attempt and its
 * records out of the collected messages. */
static sg_err_t loop_batch_start(sg_loop_t *loop, char *es, size_t n) {
        loop->batch_running = true;
        loop->batch_idle = false; /* set by the attempt that commits */
        loop->reruns = 0;
        loop->rerun_follow = 0;
        sg_err_t err = loop_prepare(loop);
        if (err)
                sg_errf(es, n, "out of memory preparing records");
        return err;
}

/* sg_loop_batch, after an attempt failed (@p err, @p es) once Kafka holds
 * the batch: the store is behind its changelog. */
static void loop_batch_store_behind(sg_loop_t *loop, sg_err_t err, char *es,
                                    size_t n) {
        /* The batch is in Kafka (exactly_once: the
         * transaction committed output, changelog and
         * offsets; at_least_once: output, changelog and
         * markers delivered) but LMDB did not commit: the
         * store is behind its changelog. The designed
         * recovery is a restore of every assigned partition
         * before the next batch (sg_loop_run); at_least_once
         * re-reads nothing either: the restored store knows
         * the batch, and its uncommitted input offsets are
         * duplicates when read again. */
        loop->proc.batch_abort(loop->proc.opaque);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "error", sg_err2str(err));
        cJSON_AddStringToObject(f, "reason", es);
        cJSON_AddStringToObject(f, "recovery",
                                "restore every assigned partition from its "
                                "changelog before the next batch");
        sg_loop_log(loop, SG_LOG_ERR, "store_behind_changelog", f);
        if (err == SG_ERR_MAP_FULL && loop->proc.grow &&
            loop->proc.grow(loop->proc.opaque, es, n) == SG_OK)
                loop->stats.map_grows_total++;
        /* every one: those the processor says it lost
         * (with checkpoints, those of every batch since
         * the last one; logged) and this batch's */
        sg_loop_mark_behind(loop);
        sg_loop_restore_all(loop);
        if (!loop->eos)
                sg_loop_offsets_pending(loop);
}

/* sg_loop_batch, after an attempt failed before Kafka held the batch:
 * aborts the transaction and the processor's batch, and empties the
 * producer of the attempt's messages. */
static void loop_batch_unwind(sg_loop_t *loop) {
        /* An open transaction is aborted first: its records are
         * never read (read_committed), its offsets never count. */
        sg_loop_txn_abort(loop);
        if (loop->dr_note_after_abort) {
                /* producing failed with reports outstanding (the
                 * transaction's abortable error): the abort served
                 * them; a refused record is routed as after a
                 * failed await (loop_attempt_unwind) */
                const sg_effect_t *efs = NULL;
                size_t cnt = loop->proc.effects(loop->proc.opaque, &efs);
                loop->dr_note_after_abort = false;
                rd_kafka_poll(loop->producer, 0);
                sg_loop_note_refusals(loop, efs,
                                      cnt < loop->dr_cnt ? cnt : loop->dr_cnt);
        }
        loop->proc.batch_abort(loop->proc.opaque);
        /* the abort may have taken committed batches with it */
        sg_loop_mark_behind(loop);
        /* Messages of the attempt must not be sent after the
         * re-read batch's own output (a transactional producer's
         * queue was purged by abort_transaction). */
        if (!loop->eos) {
                rd_kafka_purge(loop->producer, RD_KAFKA_PURGE_F_QUEUE);
                /* a produce request that failed for good stopped
                 * the producer (enable.gapless.guarantee): a new
                 * one before anything is produced again, the
                 * re-run's too */
                sg_loop_producer_renew(loop);
        }
}

/* sg_loop_batch, after an unwound attempt (@p es: why it failed): whether
 * the same records run again at once, for a refused record the processor
 * routes now (logged "batch_rerun"). */
static bool loop_batch_rerun(sg_loop_t *loop, const char *es) {
        /* exactly_once: after a transaction aborted for a refused
         * record, librdkafka bumps the producer epoch only once the
         * next transaction failed too (its sequence numbers skip
         * the refused records: OUT_OF_ORDER_SEQUENCE_NUMBER); that
         * failure is part of the refusal, not a new one: re-run. */
        bool follow = !loop->rerun && loop->reruns > 0 && loop->eos &&
                      loop->rerun_follow < 2;
        if ((loop->rerun || follow) &&
            loop->reruns < 3 * (loop->msg_cnt + loop->http_batch_cnt) + 8) {
                /* a refused record the processor routes now: the
                 * same records again, at once (not transient) */
                loop->rerun_follow = follow ? loop->rerun_follow + 1 : 0;
                loop->rerun = false;
                loop->reruns++;
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "reason", es);
                cJSON_AddNumberToObject(f, "rerun", (double)loop->reruns);
                cJSON_AddBoolToObject(f, "one_record_at_a_time", loop->isolate);
                sg_loop_log(loop, SG_LOG_NOTICE, "batch_rerun", f);
                return true;
        }
        loop->rerun = false;
        return false;
}

/* sg_loop_batch, after an unwound attempt that failed with @p err: whether
 * the store grew (a full map), so the same records run again; else (or
 * the growth failed, @p es says why) the batch fails. */
static bool loop_batch_grow(sg_loop_t *loop, sg_err_t err, char *es, size_t n) {
        if (err != SG_ERR_MAP_FULL || !loop->proc.grow)
                return false;
        char ges[400] = "";
        if (loop->proc.grow(loop->proc.opaque, ges, sizeof(ges))) {
                sg_errf(es, n, "growing the store: %s", ges);
                return false;
        }
        loop->stats.map_grows_total++;
        sg_loop_log(loop, SG_LOG_NOTICE, "store_grown", NULL);
        return true;
}

/* sg_loop_batch, once the batch committed (@p consumed records, started
 * at @p t0): counts it, moves paused partitions to their paused record
 * and starts the batch's HTTP snapshot requests. */
static void loop_batch_committed(sg_loop_t *loop, size_t consumed, int64_t t0) {
        loop->stats.batches_total++;
        loop->stats.records_in_total += consumed;
        if (!loop->batch_idle) {
                sg_hist_observe(&loop->stats.batch_duration_ms,
                                sg_clock_mono_ms() - t0);
                /* a batch with work committed: the loop works
                 * again (an idle poll proves nothing: it writes
                 * nothing, a full disk lets it commit) */
                loop->stats.batches_aborted_in_a_row = 0;
        }
        loop->backoff_ms = 0;
        /* a batch of records committed: the refused ones were
         * found (an idle batch says nothing about them) */
        if (loop->msg_cnt > 0)
                loop->isolate = false;
        loop_seek(loop, true);
        /* Committed: the HTTP results are judged and durable, the
         * batch's requests durable; now start those. */
        sg_snapshot_http_commit(loop->http);
        loop->http_batch_cnt = 0;
        loop->stats.snapshot_http_in_flight =
                (int64_t)sg_snapshot_http_in_flight(loop->http);
}

/**
 * Runs the collected messages as one batch (re-running it after a store
 * growth), then releases them. @returns SG_OK if committed.
 */
sg_err_t sg_loop_batch(sg_loop_t *loop, const char *why) {
        char es[512] = "";
        size_t consumed = 0;
        int64_t t0 = sg_clock_mono_ms();
        sg_err_t err = loop_batch_start(loop, es, sizeof(es));
        while (!err) {
                /* a store behind its changelog (an earlier attempt's abort
                 * took committed batches with it, processor.h
                 * "Checkpoints") is restored before anything is judged */
                if ((err = loop_restore_behind(loop, es, sizeof(es))))
                        break;
                err = loop_attempt(loop, &consumed, es, sizeof(es));
                if (err == SG_OK)
                        break;
                if (loop->kafka_committed) {
                        loop_batch_store_behind(loop, err, es, sizeof(es));
                        err = SG_OK;
                        break;
                }
                loop_batch_unwind(loop);
                if (loop->fatal != SG_OK)
                        break;
                if (loop_batch_rerun(loop, es)) {
                        err = SG_OK;
                        continue;
                }
                if (!loop_batch_grow(loop, err, es, sizeof(es)))
                        break;
                err = SG_OK; /* re-run the same records */
        }
        if (err == SG_OK)
                loop_batch_committed(loop, consumed, t0);
        else
                loop_batch_aborted(loop, err, es, why);
        sg_loop_release(loop);
        loop->batch_running = false;
        return err;
}
