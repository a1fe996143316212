/*
 * kafka_commit.c — the Kafka loop's input offsets (kafka.h): the offsets a
 * batch moves its partitions to, the consumer group commits (sent without
 * waiting and served each turn of the loop; at_least_once with a
 * changelog, the group commit of durable offsets every commit_interval_ms,
 * semantics §6), and the offsets kept for after a restore when a batch's
 * LMDB commit failed. Nothing here decides when a batch commits: the batch
 * protocol (kafka_batch.c) calls sg_loop_commit_offsets once LMDB
 * committed.
 */
#include "kafka_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** The offset a batch moves partition @p p to: the paused record, or the
 *  one after the last processed. */
static int64_t part_next_offset(const sg_part_t *p) {
        return p->pause_offset >= 0 ? p->pause_offset : p->next_offset;
}

/** The batch's next input offsets that move a partition forward (the
 *  paused record, or the one after the last processed). Caller destroys. */
rd_kafka_topic_partition_list_t *sg_loop_batch_offsets(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->batch_part_cnt ? loop->batch_part_cnt : 1));
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                int64_t off = part_next_offset(p);
                if (off <= p->committed)
                        continue;
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition)
                        ->offset = off;
        }
        return l;
}

/** Marks @p l's offsets as committed by us. */
void sg_loop_offsets_committed(sg_loop_t *loop,
                               const rd_kafka_topic_partition_list_t *l) {
        for (int i = 0; i < l->cnt; i++) {
                size_t pi = sg_loop_part(loop, l->elems[i].topic,
                                         l->elems[i].partition);
                if (pi != SG_NO_PART &&
                    l->elems[i].offset > loop->parts[pi].committed)
                        loop->parts[pi].committed = l->elems[i].offset;
        }
}

/* A group commit that failed (@p e, sent at @p t0): logged only, the store's
 * offset wins at the next assignment and re-read records are duplicates
 * (semantics §3); the durable offsets are sent again commit_interval_ms
 * later. */
static void loop_commit_failed(sg_loop_t *loop,
                               const rd_kafka_topic_partition_list_t *l,
                               rd_kafka_resp_err_t e, int64_t t0) {
        cJSON *f = sg_kafka_parts_json(l);
        cJSON_AddStringToObject(f, "error", rd_kafka_err2str(e));
        sg_loop_log(loop, SG_LOG_WARNING, "offset_commit_failed", f);
        sg_loop_impaired(loop, rd_kafka_err2name(e), t0);
        if (loop->alos_cl)
                loop->commit_due_ms =
                        sg_clock_mono_ms() + loop->conf->commit_interval_ms;
}

/* The first error of @p l's partitions, or @p e. */
static rd_kafka_resp_err_t
commit_err(rd_kafka_resp_err_t e, const rd_kafka_topic_partition_list_t *l) {
        for (int i = 0; !e && l && i < l->cnt; i++)
                e = l->elems[i].err;
        return e;
}

/**
 * Commits the input offsets @p l (after LMDB). @p wait: waits for the
 * answer (a revoke, a stop: before the partitions go); else sends it and
 * returns, its answer served by a later turn (sg_loop_commits_serve), so
 * that a coordinator that answers late (a broker restarting) stops neither
 * the batches nor the stats lines nor the outage's own log lines. Only a
 * confirmed commit moves part.committed. @returns false if it failed (or,
 * not waiting, could not be sent).
 */
static bool loop_commit_list(sg_loop_t *loop,
                             const rd_kafka_topic_partition_list_t *l,
                             bool wait) {
        if (l->cnt == 0)
                return true;
        int64_t t0 = sg_clock_mono_ms();
        rd_kafka_resp_err_t e;
        if (!wait && loop->commit_q) {
                e = rd_kafka_commit_queue(loop->consumer, l, loop->commit_q,
                                          NULL, (void *)(intptr_t)t0);
                if (!e) {
                        loop->commits_inflight++;
                        return true;
                }
        } else {
                e = commit_err(rd_kafka_commit(loop->consumer, l, 0), l);
        }
        if (e) {
                loop_commit_failed(loop, l, e, t0);
                return false;
        }
        sg_loop_offsets_committed(loop, l);
        return true;
}

void sg_loop_commits_serve(sg_loop_t *loop, int timeout_ms) {
        rd_kafka_event_t *ev;
        int64_t end = sg_clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
        while (loop->commit_q && loop->commits_inflight > 0) {
                int64_t left = end - sg_clock_mono_ms();
                ev = rd_kafka_queue_poll(loop->commit_q,
                                         left > 0 ? (int)left : 0);
                if (!ev)
                        break;
                if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_OFFSET_COMMIT) {
                        loop->commits_inflight--;
                        const rd_kafka_topic_partition_list_t *l =
                                rd_kafka_event_topic_partition_list(ev);
                        rd_kafka_resp_err_t e =
                                commit_err(rd_kafka_event_error(ev), l);
                        if (e && l)
                                loop_commit_failed(
                                        loop, l, e,
                                        (int64_t)(intptr_t)
                                                rd_kafka_event_opaque(ev));
                        else if (l)
                                sg_loop_offsets_committed(loop, l);
                }
                rd_kafka_event_destroy(ev);
        }
}

/** Commits the batch's input offsets (after LMDB). at_least_once with a
 *  changelog, group commit (semantics §6): they become their partitions'
 *  durable offsets, committed together once commit_interval_ms passed since
 *  the first of them waited (0: at once). A late commit loses nothing: the
 *  start offset of a partition is the later of the group's and the
 *  restored store's, and the store knows every batch below a durable
 *  offset; what a group offset behind reads again are duplicates. */
void sg_loop_commit_offsets(sg_loop_t *loop) {
        int64_t interval = loop->conf->commit_interval_ms;
        if (!loop->alos_cl || interval <= 0) {
                rd_kafka_topic_partition_list_t *l =
                        sg_loop_batch_offsets(loop);
                (void)loop_commit_list(loop, l, false);
                rd_kafka_topic_partition_list_destroy(l);
                /* a store's offset ahead of the group's, from the
                 * assignment (assign_start_offsets) */
                if (loop->commit_due_ms)
                        sg_loop_commit_durable(loop, false);
                return;
        }
        bool moved = false;
        for (size_t i = 0; i < loop->batch_part_cnt; i++) {
                sg_part_t *p = &loop->parts[loop->batch_parts[i]];
                int64_t off = part_next_offset(p);
                if (off > p->committed && off > p->durable) {
                        p->durable = off;
                        moved = true;
                }
        }
        int64_t now = sg_clock_mono_ms();
        if (moved && loop->commit_due_ms == 0)
                loop->commit_due_ms = now + interval;
        if (loop->commit_due_ms != 0 && now >= loop->commit_due_ms)
                sg_loop_commit_durable(loop, false);
}

/** Commits the durable offsets (group commit) of the partitions still
 *  assigned and not fenced that are ahead of the group's (@p wait: and
 *  waits for the answer; else, while one is unanswered, waits for it to
 *  come first); a failure is retried commit_interval_ms later. */
void sg_loop_commit_durable(sg_loop_t *loop, bool wait) {
        if (wait)
                sg_loop_commits_serve(loop, SG_COMMIT_WAIT_MS);
        else if (loop->commits_inflight > 0)
                return; /* commit_due_ms stays: sent once it is answered */
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->part_cnt ? loop->part_cnt : 1));
        for (size_t i = 0; i < loop->part_cnt; i++) {
                const sg_part_t *p = &loop->parts[i];
                if (p->assigned && !p->cl_fenced && p->durable > p->committed)
                        rd_kafka_topic_partition_list_add(l, p->topic,
                                                          p->partition)
                                ->offset = p->durable;
        }
        if (loop_commit_list(loop, l, wait))
                loop->commit_due_ms = 0; /* a failure set the next one */
        rd_kafka_topic_partition_list_destroy(l);
}

/** at_least_once: keeps the batch's input offsets for after the restore
 *  (its LMDB commit failed, its changelog is complete: the restore brings
 *  LMDB up to the batch, then the offsets may follow). */
void sg_loop_offsets_pending(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l = sg_loop_batch_offsets(loop);
        if (!loop->pending_offsets) {
                loop->pending_offsets = l;
                return;
        }
        for (int i = 0; i < l->cnt; i++) {
                rd_kafka_topic_partition_t *t =
                        rd_kafka_topic_partition_list_find(
                                loop->pending_offsets, l->elems[i].topic,
                                l->elems[i].partition);
                if (!t)
                        rd_kafka_topic_partition_list_add(loop->pending_offsets,
                                                          l->elems[i].topic,
                                                          l->elems[i].partition)
                                ->offset = l->elems[i].offset;
                else if (l->elems[i].offset > t->offset)
                        t->offset = l->elems[i].offset;
        }
        rd_kafka_topic_partition_list_destroy(l);
}

/** Commits the pending offsets of the partitions still assigned (after the
 *  restore); failure is logged only (they are read again: duplicates). */
void sg_loop_commit_pending(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *p = loop->pending_offsets;
        if (!p)
                return;
        loop->pending_offsets = NULL;
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(p->cnt);
        for (int i = 0; i < p->cnt; i++) {
                size_t pi = sg_loop_part(loop, p->elems[i].topic,
                                         p->elems[i].partition);
                if (loop->parts[pi].assigned && !loop->parts[pi].cl_fenced &&
                    p->elems[i].offset > loop->parts[pi].committed)
                        rd_kafka_topic_partition_list_add(l, p->elems[i].topic,
                                                          p->elems[i].partition)
                                ->offset = p->elems[i].offset;
        }
        rd_kafka_topic_partition_list_destroy(p);
        (void)loop_commit_list(loop, l, false);
        rd_kafka_topic_partition_list_destroy(l);
}
