/*
 * kafka_rebalance.c — the Kafka loop (kafka.h): rebalance callbacks.
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Gives up an assignment on_assign could not take: the processor forgets
 *  the partitions, the consumer reads none of them (eager: an empty
 *  assignment; cooperative: they are not added). */
static void on_assign_drop(sg_loop_t *loop, rd_kafka_t *rk,
                           rd_kafka_topic_partition_list_t *parts, int upto,
                           bool cooperative) {
        for (int j = 0; j < upto; j++) {
                size_t pi = sg_loop_part(loop, parts->elems[j].topic,
                                         parts->elems[j].partition);
                loop->parts[pi].assigned = false;
                loop->parts[pi].cl_epoch = -1;
                if (loop->proc.revoke)
                        loop->proc.revoke(loop->proc.opaque,
                                          parts->elems[j].topic,
                                          parts->elems[j].partition);
        }
        if (!cooperative)
                rd_kafka_assign(rk, NULL);
}

/* on_assign: the group's committed offset of each partition of @p parts
 * into @p committed (-1: none committed; -2: not known, the fetch
 * failed), and the partition table's entries reset for the assignment. */
static void assign_committed(sg_loop_t *loop, rd_kafka_t *rk,
                             rd_kafka_topic_partition_list_t *parts,
                             int64_t *committed) {
        int i;
        /* The group's committed offsets.
         * exactly_once: committed offsets a transaction still holds are
         * unstable (KIP-447); wait until they are decided. A dead owner's
         * transaction is ended at once (semantics §6 "Taking over from a
         * dead owner"): librdkafka 2.0.2 retries UNSTABLE_OFFSET_COMMIT
         * within a call until its timeout (then says "timed out"), so the
         * first call is SG_TAKEOVER_AFTER_MS short, and offsets still
         * pending then go to the takeover; the later calls are
         * SG_TAKEOVER_RETRY_MS, long enough for a slow coordinator's
         * answer, with the takeover asked again after each. */
        rd_kafka_topic_partition_list_t *c =
                rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_resp_err_t cerr;
        int64_t t0 = sg_clock_mono_ms();
        int64_t cdeadline = t0 + SG_STABLE_OFFSETS_MAX_MS;
        int64_t takeover_at = SG_TAKEOVER_AFTER_MS; /* ms after t0 */
        int call_ms =
                loop->eos ? SG_TAKEOVER_AFTER_MS : SG_COMMITTED_TIMEOUT_MS;
        for (bool logged = false;; logged = true) {
                cerr = rd_kafka_committed(rk, c, call_ms);
                for (i = 0; loop->eos && !cerr && i < c->cnt; i++)
                        if (c->elems[i].err)
                                cerr = c->elems[i].err;
                int64_t now = sg_clock_mono_ms();
                if (!cerr || !loop->eos || loop->stop || now >= cdeadline)
                        break;
                if (!logged) {
                        cJSON *f = sg_kafka_parts_json(parts);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(cerr));
                        sg_loop_log(loop, SG_LOG_NOTICE,
                                    "committed_offsets_pending", f);
                }
                if (now - t0 >= takeover_at) {
                        takeover_at = now - t0 + SG_TAKEOVER_RETRY_MS;
                        call_ms = SG_TAKEOVER_RETRY_MS;
                        if (sg_loop_takeover_pending(loop, parts, now - t0))
                                continue; /* aborted: decided now */
                }
                sg_sleep_ms(200);
        }
        if (cerr) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(cerr));
                sg_loop_log(loop, SG_LOG_WARNING, "committed_offsets_unknown",
                            f);
        }
        for (i = 0; i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];
                /* -1: none committed; -2: not known (the fetch failed) */
                committed[i] = cerr || c->elems[i].err ? -2 : -1;
                if (!cerr && !c->elems[i].err && c->elems[i].offset >= 0)
                        committed[i] = c->elems[i].offset;
                size_t pi = sg_loop_part(loop, tp->topic, tp->partition);
                loop->parts[pi].assigned = true;
                loop->parts[pi].paused_until = 0;
                loop->parts[pi].committed =
                        committed[i] >= 0 ? committed[i] : -1;
                loop->parts[pi].durable = -1;
                loop->parts[pi].restore = false;
                loop->parts[pi].cl_fenced = false;
        }
        rd_kafka_topic_partition_list_destroy(c);
}

/* on_assign: the offset each partition of @p parts starts at (into its
 * offset and the table), from @p committed and the store's @p stored. */
static void assign_start_offsets(sg_loop_t *loop,
                                 rd_kafka_topic_partition_list_t *parts,
                                 const int64_t *stored,
                                 const int64_t *committed) {
        char es[512];
        int i;
        /* The start offset of each partition (semantics §6: never past a
         * record whose decision is not in Kafka):
         *   exactly_once: the transactional committed offset only — the
         *   store is rebuilt from the changelog to match it;
         *   at_least_once with a changelog: the later of the committed
         *   offset and the input offset the RESTORED store reflects (the
         *   changelog holds a batch only once its output was delivered;
         *   an offset is committed only after its changelog);
         *   without a changelog (a stateless processor): the later of the
         *   committed offset and the local store's. */
        for (i = 0; i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];
                int64_t start = committed[i] >= 0 ? committed[i] : -1;
                int64_t from_store = loop->eos ? -1 : stored[i];
                if (loop->alos_cl && sg_config_topic(loop->conf, tp->topic)) {
                        from_store = -1;
                        es[0] = '\0';
                        if (loop->proc.assign(loop->proc.opaque, tp->topic,
                                              tp->partition,
                                              loop->conf->group_id, &from_store,
                                              es, sizeof(es)))
                                from_store = -1;
                }
                if (from_store > start)
                        start = from_store;
                tp->offset = start >= 0 ? start : RD_KAFKA_OFFSET_INVALID;
                sg_part_t *p = &loop->parts[sg_loop_part(loop, tp->topic,
                                                         tp->partition)];
                p->start = start >= 0 ? start : -1;
                p->seen = -1;
                p->eof = -1;
                /* at_least_once: a start the restored store put ahead of
                 * the group's offset is durable already (every batch below
                 * it is complete in the changelog, semantics §6): the next
                 * group commit commits it, so that the group's offset (and
                 * the consumer lag) does not wait for a record that may
                 * never come */
                if (loop->alos_cl && from_store >= 0 &&
                    from_store > committed[i]) {
                        p->durable = from_store;
                        if (!loop->commit_due_ms)
                                loop->commit_due_ms =
                                        sg_clock_mono_ms() +
                                        loop->conf->commit_interval_ms;
                }
        }
}

/* on_assign: hands @p parts to the consumer and logs
 * "partitions_assigned". */
static void assign_hand_over(sg_loop_t *loop, rd_kafka_t *rk,
                             rd_kafka_topic_partition_list_t *parts,
                             bool cooperative) {
        int i;
        if (cooperative) {
                rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
                if (e) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_error_string(e));
                        sg_loop_log(loop, SG_LOG_ERR, "assign_failed", f);
                        rd_kafka_error_destroy(e);
                }
        } else {
                rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
                if (e) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(e));
                        sg_loop_log(loop, SG_LOG_ERR, "assign_failed", f);
                }
        }
        /* A partition we paused before losing it must not stay paused. */
        rd_kafka_resume_partitions(rk, parts);

        /* an offset seqgate does not set (the group's committed one, or
         * auto.offset.reset without one) is null, not librdkafka's
         * sentinel (kafka.h "Logs") */
        cJSON *f = sg_kafka_parts_json(parts);
        cJSON *offs = cJSON_AddArrayToObject(f, "start_offsets");
        for (i = 0; i < parts->cnt; i++)
                cJSON_AddItemToArray(
                        offs, parts->elems[i].offset >= 0
                                      ? cJSON_CreateNumber(
                                                (double)parts->elems[i].offset)
                                      : cJSON_CreateNull());
        loop->assign_progress = true;
        loop->lost = false;
        cJSON_AddStringToObject(f, "protocol",
                                cooperative ? "COOPERATIVE" : "EAGER");
        sg_loop_log(loop, SG_LOG_INFO, "partitions_assigned", f);
}

/* on_assign, step 1: records @p parts in the loop's partition table (the
 * table entries first: nothing is told to the processor for a partition the
 * loop could not record); false: the loop is fatal and nothing assigned. */
static bool assign_parts_add(sg_loop_t *loop, rd_kafka_t *rk,
                             rd_kafka_topic_partition_list_t *parts,
                             bool cooperative) {
        for (int i = 0; i < parts->cnt; i++) {
                if (sg_loop_part_add(loop, parts->elems[i].topic,
                                     parts->elems[i].partition) != SG_NO_PART)
                        continue;
                char what[400];
                sg_errf(what, sizeof(what),
                        "assign %s/%" PRId32 ": out of memory for the "
                        "partition table",
                        parts->elems[i].topic, parts->elems[i].partition);
                sg_loop_set_fatal(loop, SG_ERR_NOMEM, what);
                if (!cooperative)
                        rd_kafka_assign(rk, NULL);
                return false;
        }
        return true;
}

/* on_assign, step 2: tells the processor of @p parts (processor.h assign;
 * the store grown once on SG_ERR_MAP_FULL), their store's offsets in
 * @p stored; false: the loop is fatal and the partitions dropped. */
static bool assign_processor(sg_loop_t *loop, rd_kafka_t *rk,
                             rd_kafka_topic_partition_list_t *parts,
                             int64_t *stored, bool cooperative) {
        char es[512];
        int i;
        sg_err_t err = SG_OK;
        for (i = 0; i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];
                stored[i] = -1;
                es[0] = '\0';
                err = loop->proc.assign(loop->proc.opaque, tp->topic,
                                        tp->partition, loop->conf->group_id,
                                        &stored[i], es, sizeof(es));
                if (err == SG_ERR_MAP_FULL && loop->proc.grow &&
                    loop->proc.grow(loop->proc.opaque, es, sizeof(es)) ==
                            SG_OK) {
                        loop->stats.map_grows_total++;
                        err = loop->proc.assign(loop->proc.opaque, tp->topic,
                                                tp->partition,
                                                loop->conf->group_id,
                                                &stored[i], es, sizeof(es));
                }
                if (err != SG_OK)
                        break;
        }
        if (err == SG_OK)
                return true;
        char what[800];
        sg_errf(what, sizeof(what), "assign %s/%" PRId32 ": %s",
                parts->elems[i].topic, parts->elems[i].partition, es);
        on_assign_drop(loop, rk, parts, i, true);
        /* a foreign store, or one whose key fingerprint the
         * configuration does not match (exit 2), keep their code */
        sg_loop_set_fatal(loop, sg_err_needs_operator(err) ? err : SG_ERR_FATAL,
                          what);
        if (!cooperative)
                rd_kafka_assign(rk, NULL);
        return false;
}

/* on_assign, step 3: claims (at_least_once) and restores the changelogs of
 * @p parts; false: the group moved on or the restore failed (fatal), the
 * partitions are dropped. */
static bool assign_claim_restore(sg_loop_t *loop, rd_kafka_t *rk,
                                 rd_kafka_topic_partition_list_t *parts,
                                 const int64_t *committed, bool cooperative) {
        char es[512];
        sg_err_t err = SG_OK;
        /* at_least_once with a changelog: claim the partitions' changelogs
         * (kafka.h "Changelog fencing") before restoring them. */
        bool lost = false;
        es[0] = '\0';
        if (loop->alos_cl)
                err = sg_loop_claim(loop, parts, committed, &lost, es,
                                    sizeof(es));
        /* Each partition's store is brought up to its changelog's end
         * before any of its records is read (the input partitions are
         * assigned to the consumer only after this). */
        if (!err && !lost)
                err = sg_loop_restore(loop, parts, &lost, es, sizeof(es));
        if (!err && lost) {
                /* This member fell out of the generation (or a newer owner
                 * confirmed meanwhile): the group rebalances again; take
                 * nothing now. */
                cJSON *f = sg_kafka_parts_json(parts);
                cJSON_AddStringToObject(
                        f, "detail",
                        "the consumer group moved on during the assignment; "
                        "waiting for the next rebalance");
                sg_loop_log(loop, SG_LOG_WARNING, "assignment_abandoned", f);
                on_assign_drop(loop, rk, parts, parts->cnt, cooperative);
                return false;
        }
        if (err && loop->stop) {
                /* Stopped (sg_loop_stop: SIGTERM) during the restore: a
                 * clean stop like one between batches. Nothing of these
                 * partitions was read; the store keeps what the restore
                 * checkpointed and the next owner restores from there. */
                cJSON *f = sg_kafka_parts_json(parts);
                cJSON_AddStringToObject(f, "detail", es);
                sg_loop_log(loop, SG_LOG_NOTICE, "restore_stopped", f);
                on_assign_drop(loop, rk, parts, parts->cnt, cooperative);
                return false;
        }
        if (err) {
                char what[800];
                sg_errf(what, sizeof(what), "restore: %s", es);
                on_assign_drop(loop, rk, parts, parts->cnt, cooperative);
                sg_loop_set_fatal(
                        loop, sg_err_needs_operator(err) ? err : SG_ERR_FATAL,
                        what);
                return false;
        }
        return true;
}

static void on_assign(sg_loop_t *loop, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts,
                      bool cooperative) {
        int64_t *stored = calloc((size_t)parts->cnt + 1, sizeof(*stored));
        int64_t *committed = calloc((size_t)parts->cnt + 1, sizeof(*committed));
        if (!stored || !committed) {
                free(stored);
                free(committed);
                sg_loop_set_fatal(loop, SG_ERR_NOMEM, "assign: out of memory");
                if (!cooperative)
                        rd_kafka_assign(rk, NULL);
                return;
        }

        loop->stats.rebalances_total++;
        /* the batches so far made durable before the assignment's own
         * store transactions (processor.h checkpoint) */
        sg_loop_checkpoint(loop, "assign");
        /* no longer tailed as a standby: the restore below reads the
         * rest from the standby's checkpoint (semantics §6 "Standby
         * replicas") */
        sg_loop_standby_drop(loop, parts);
        bool ok = assign_parts_add(loop, rk, parts, cooperative) &&
                  assign_processor(loop, rk, parts, stored, cooperative);
        if (ok) {
                assign_committed(loop, rk, parts, committed);
                ok = assign_claim_restore(loop, rk, parts, committed,
                                          cooperative);
        }
        if (ok)
                assign_start_offsets(loop, parts, stored, committed);
        free(stored);
        free(committed);
        if (ok)
                assign_hand_over(loop, rk, parts, cooperative);
}

static void on_revoke(sg_loop_t *loop, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts, bool cooperative,
                      bool lost) {
        loop->stats.rebalances_total++;
        /* Finish what was polled before giving the partitions away — unless
         * they are lost: then they already belong to another member, and
         * judging their records here would only be a zombie's work (its
         * output duplicates, its changelog void); they are read again by
         * the new owner. */
        if (loop->msg_cnt > 0 && !loop->batch_running) {
                if (lost) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddNumberToObject(f, "records",
                                                (double)loop->msg_cnt);
                        sg_loop_log(loop, SG_LOG_NOTICE, "batch_dropped_lost",
                                    f);
                        sg_loop_release(loop);
                } else {
                        sg_loop_batch(loop, "partitions revoked");
                }
        }
        /* The input offsets waiting for their group commit go out before
         * the partitions do, and the answers of those sent go in (a lost
         * assignment's would be refused: its new owner's restored store
         * knows them anyway). */
        if (!lost && loop->alos_cl)
                sg_loop_commit_durable(loop, true);
        else if (!lost)
                sg_loop_commits_serve(loop, SG_COMMIT_WAIT_MS);
        /* The store keeps what it holds of them: the next owner restores
         * from its own, and this one, assigned them again, from the
         * checkpoint (processor.h checkpoint). */
        sg_loop_checkpoint(loop, "revoke");

        for (int i = 0; i < parts->cnt; i++) {
                size_t pi = sg_loop_part(loop, parts->elems[i].topic,
                                         parts->elems[i].partition);
                if (pi == SG_NO_PART)
                        continue;
                sg_part_t *p = &loop->parts[pi];
                if (!p->assigned)
                        continue;
                if (loop->proc.revoke)
                        loop->proc.revoke(loop->proc.opaque,
                                          parts->elems[i].topic,
                                          parts->elems[i].partition);
                p->assigned = false;
                p->paused_until = 0;
                p->committed = -1;
                p->durable = -1;
                p->start = -1;
                p->restore = false;
                p->cl_epoch = -1;
                p->cl_fenced = false;
        }
        if (cooperative) {
                rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);
                if (e)
                        rd_kafka_error_destroy(e);
        } else {
                rd_kafka_assign(rk, NULL);
        }
        cJSON *f = sg_kafka_parts_json(parts);
        cJSON_AddBoolToObject(f, "lost", lost);
        sg_loop_log(loop, SG_LOG_INFO, "partitions_revoked", f);
        if (lost) /* the group's next assignment shows the recovery */
                loop->lost = true;
}

void sg_loop_cb_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t *parts,
                          void *opaque) {
        sg_loop_t *loop = SG_LOOP_OF(opaque);
        bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
        /* a rebalance may give the member a new member id: the writer
         * headers read it again (kafka_changelog.h "The writer of a
         * transaction") */
        if (loop->member_id) {
                rd_kafka_mem_free(NULL, loop->member_id);
                loop->member_id = NULL;
        }

        /* the aborted batches were of the assignment that ends here: a
         * member left with nothing to do is not failing (/readyz) */
        loop->stats.batches_aborted_in_a_row = 0;
        switch (err) {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                if (loop->fatal != SG_OK) {
                        /* Stopping: take nothing on. */
                        if (!coop)
                                rd_kafka_assign(rk, NULL);
                        return;
                }
                /* awaited no more: restoring now, not waiting */
                loop->assign_wait_ms = 0;
                on_assign(loop, rk, parts, coop);
                /* restored (or failed): /readyz may say ready now */
                loop->assigned_once = true;
                sg_loop_publish(loop, true);
                break;
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
                on_revoke(loop, rk, parts, coop,
                          rd_kafka_assignment_lost(rk) != 0);
                sg_loop_publish(loop, true);
                break;
        default: {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(err));
                sg_loop_log(loop, SG_LOG_ERR, "rebalance_failed", f);
                rd_kafka_assign(rk, NULL);
                break;
        }
        }
        /* the placement of standbys follows the assignment */
        sg_loop_standby_kick(loop);
}
