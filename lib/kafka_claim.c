/*
 * kafka_claim.c — the Kafka loop's ownership of its changelog partitions
 * (at_least_once; kafka.h "Changelog fencing", kafka_changelog.h): the
 * claim on assignment (a claim record, the consumer group generation
 * check, the confirm), the fence once a newer owner confirmed its epoch,
 * and the repair a restore writes for the keys whose records it found
 * void. The restore itself, which calls the fence and the repair, is
 * kafka_restore.c.
 */
#include "kafka_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Tells the consumer to stop fetching partition @p pi and the processor to
 *  forget it: a newer owner confirmed its epoch on the partition's
 *  changelog (at_least_once), so this instance must never write for it
 *  again; the group revokes it soon (this instance fell out of the
 *  consumer group's generation). */
void sg_loop_fence(sg_loop_t *loop, size_t pi) {
        sg_part_t *p = &loop->parts[pi];
        if (p->cl_fenced)
                return;
        p->cl_fenced = true;
        p->restore = false;
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
        rd_kafka_pause_partitions(loop->consumer, l);
        p->paused_until = INT64_MAX;
        if (loop->proc.revoke)
                loop->proc.revoke(loop->proc.opaque, p->topic, p->partition);
        cJSON *f = sg_kafka_parts_json(l);
        cJSON_AddNumberToObject(f, "epoch", (double)p->cl_epoch);
        cJSON_AddStringToObject(
                f, "detail",
                "a newer owner confirmed its epoch on the changelog: this "
                "instance writes nothing more for the partition");
        sg_loop_log(loop, SG_LOG_WARNING, "changelog_fenced", f);
        rd_kafka_topic_partition_list_destroy(l);
}

/**
 * at_least_once, after a restore of partition @p pi read its changelog to
 * @p end (the store's checkpoint now): writes, as this owner's next batch,
 * the current value (or a tombstone) of every key whose changelog records
 * the reader found void, and tombstones of the older owners' confirms,
 * then the batch's marker (kafka_changelog.h "repair"). Every record must land
 * right at @p end onwards (nobody else wrote meanwhile); if not, *againp is
 * set: the caller reads the changelog again from the checkpoint.
 */
sg_err_t sg_loop_repair(sg_loop_t *loop, size_t pi, const sg_topic_config_t *tc,
                        sg_changelog_reader_t *rd, int64_t end, bool *againp,
                        char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_part_t *p = &loop->parts[pi];
        const sg_changelog_key_t *keys;
        const int64_t *confirms;
        size_t nk = sg_changelog_reader_void_keys(rd, &keys);
        size_t nc = sg_changelog_reader_confirms(rd, &confirms);
        size_t nold = 0;
        for (size_t i = 0; i < nc; i++)
                nold += confirms[i] < p->cl_epoch;
        *againp = false;
        if (nk == 0 && nold == 0) {
                p->cl_next = end;
                return SG_OK;
        }
        if (nk > 0 && !pr->changelog_value) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "]: %zu void records and "
                        "no way to rewrite their keys",
                        tc->changelog_topic, p->partition, nk);
                return SG_ERR_INVALID;
        }
        size_t n = nk + nold + (p->cl_m2 > 0);
        sg_send_t *recs = calloc(n + 1, sizeof(*recs));
        unsigned char *ckeys = calloc(nold + 1, SG_CHANGELOG_KEY_LEN);
        unsigned char m2key[SG_CHANGELOG_MARKER_LEN];
        sg_err_t err = recs && ckeys ? SG_OK : SG_ERR_NOMEM;
        /* A batch of this owner's that the log ends in unfinished (its
         * changelog records went out, its marker did not: the batch
         * failed, its output perhaps with it) is repaired under its own
         * sequence: its records and the repair form one batch, complete
         * only with the repair's marker, which rewrites every key it
         * wrote. A new sequence would prove the unfinished batch complete
         * to a reader (kafka_changelog.h: a record of a later batch) if
         * the repair were cut short before its marker. */
        int64_t ue = -1, useq = -1;
        int64_t seq = sg_changelog_reader_unfinished(rd, &ue, &useq) &&
                                      ue == p->cl_epoch && useq == p->cl_seq
                              ? useq
                              : ++p->cl_seq;
        if (!err && p->cl_m2 > 0) {
                /* this owner's marker of two batches back
                 * (kafka_changelog.h) */
                sg_changelog_marker_key_make(m2key, p->cl_epoch, p->cl_m2);
                recs[n - 1].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = p->partition,
                        .key = m2key,
                        .key_len = sizeof(m2key),
                };
        }
        for (size_t i = 0; !err && i < nk; i++) {
                void *v = NULL;
                size_t vl = 0;
                err = pr->changelog_value(pr->opaque, tc->name, p->partition,
                                          keys[i].key, keys[i].len, &v, &vl,
                                          errstr, errstr_size);
                recs[i].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = p->partition,
                        .key = keys[i].key,
                        .key_len = keys[i].len,
                        .value = v,
                        .value_len = vl,
                };
                recs[i].framed = true;
                sg_changelog_frame_make(recs[i].frame, p->cl_epoch, seq);
        }
        for (size_t i = 0, j = 0; !err && i < nc; i++) {
                if (confirms[i] >= p->cl_epoch)
                        continue;
                unsigned char *k = ckeys + j * SG_CHANGELOG_KEY_LEN;
                sg_changelog_key_make(k, SG_CHANGELOG_CONFIRM, confirms[i]);
                recs[nk + j].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = p->partition,
                        .key = k,
                        .key_len = SG_CHANGELOG_KEY_LEN,
                };
                j++;
        }
        if (!err)
                err = sg_loop_send(loop, recs, n, errstr, errstr_size);
        for (size_t i = 0; !err && i < n; i++)
                if (recs[i].offset != end + (int64_t)i)
                        *againp = true;
        unsigned char mkey[SG_CHANGELOG_MARKER_LEN], mval[8];
        if (!err && !*againp) {
                sg_changelog_marker_key_make(mkey, p->cl_epoch, seq);
                sg_changelog_u64_put(mval, seq);
                recs[n] = (sg_send_t){
                        .ef = {.kind = SG_EFFECT_CHANGELOG,
                               .topic = tc->changelog_topic,
                               .partition = p->partition,
                               .key = mkey,
                               .key_len = sizeof(mkey),
                               .value = mval,
                               .value_len = sizeof(mval)},
                };
                err = sg_loop_send(loop, &recs[n], 1, errstr, errstr_size);
                if (!err && recs[n].offset != end + (int64_t)n)
                        *againp = true;
                if (!err && !*againp) {
                        p->cl_next = recs[n].offset + 1;
                        p->cl_m2 = p->cl_m1;
                        p->cl_m1 = seq;
                }
        }
        if (!err) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "topic", tc->name);
                cJSON_AddNumberToObject(f, "partition", p->partition);
                cJSON_AddStringToObject(f, "changelog", tc->changelog_topic);
                cJSON_AddNumberToObject(f, "epoch", (double)p->cl_epoch);
                cJSON_AddNumberToObject(f, "keys_rewritten", (double)nk);
                cJSON_AddNumberToObject(f, "confirms_tombstoned", (double)nold);
                cJSON_AddBoolToObject(f, "interleaved", *againp);
                sg_loop_log(loop, SG_LOG_NOTICE, "changelog_repaired", f);
        }
        for (size_t i = 0; recs && i < nk; i++)
                free((void *)recs[i].ef.value);
        free(recs);
        free(ckeys);
        return err;
}

static bool err_is_generation(rd_kafka_resp_err_t e) {
        return e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
               e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
               e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
               e == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID ||
               e == RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST;
}

/** sg_loop_claim, step 1, for input partition @p tc [@p partition]: the
 *  offset *offp the generation check commits — @p committed, or the
 *  partition's log start where none is committed (-1), or -2 (unknown:
 *  left out of the check). */
static sg_err_t claim_check_offset(sg_loop_t *loop, const sg_topic_config_t *tc,
                                   int32_t partition, int64_t committed,
                                   int64_t *offp, char *errstr,
                                   size_t errstr_size) {
        int64_t off = committed;
        if (off == -2) {
                /* not known: left out of the check (committing
                 * anything else would move it) */
        } else if (off < 0) {
                int64_t lo = -1, hi = -1;
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
                        loop->consumer, tc->name, partition, &lo, &hi,
                        SG_METADATA_TIMEOUT_MS);
                if (e) {
                        sg_errf(errstr, errstr_size,
                                "%s [%" PRId32 "]: reading its "
                                "offsets: %s",
                                tc->name, partition, rd_kafka_err2str(e));
                        return SG_ERR_KAFKA;
                }
                off = lo;
        }
        *offp = off;
        return SG_OK;
}

/** sg_loop_claim, step 2: fills one claim record per input partition of
 *  @p parts with a changelog (*np of them; keys in @p keys, the partitions'
 *  indexes in loop->parts in @p pis) and the generation check's offsets
 *  @p chk. */
static sg_err_t claim_records(sg_loop_t *loop,
                              const rd_kafka_topic_partition_list_t *parts,
                              const int64_t *committed, sg_send_t *recs,
                              size_t *pis,
                              unsigned char (*keys)[SG_CHANGELOG_KEY_LEN],
                              rd_kafka_topic_partition_list_t *chk, size_t *np,
                              char *errstr, size_t errstr_size) {
        const char *inst =
                loop->conf->instance_id ? loop->conf->instance_id : "";
        size_t n = 0;
        for (int i = 0; i < parts->cnt; i++) {
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, parts->elems[i].topic);
                if (!tc || !tc->changelog_topic)
                        continue; /* a snapshot reply topic */
                int64_t off;
                if (claim_check_offset(loop, tc, parts->elems[i].partition,
                                       committed[i], &off, errstr,
                                       errstr_size)) {
                        *np = n;
                        return SG_ERR_KAFKA;
                }
                if (off >= 0)
                        rd_kafka_topic_partition_list_add(
                                chk, tc->name, parts->elems[i].partition)
                                ->offset = off;
                keys[n][0] = SG_CHANGELOG_CONTROL;
                keys[n][1] = SG_CHANGELOG_CLAIM;
                recs[n].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = parts->elems[i].partition,
                        .key = keys[n],
                        .key_len = 2,
                        .value = inst,
                        .value_len = strlen(inst),
                };
                pis[n++] =
                        sg_loop_part(loop, tc->name, parts->elems[i].partition);
        }
        *np = n;
        return SG_OK;
}

/** sg_loop_claim, step 3: the check, a commit of @p chk only a current
 *  member of the consumer group generation can make (it changes no
 *  offset); retried up to 4 times; *lostp: the generation moved on. */
static sg_err_t claim_check_generation(sg_loop_t *loop,
                                       rd_kafka_topic_partition_list_t *chk,
                                       bool *lostp, char *errstr,
                                       size_t errstr_size) {
        for (int tries = 0;; tries++) {
                rd_kafka_resp_err_t e = rd_kafka_commit(loop->consumer, chk, 0);
                for (int i = 0; !e && i < chk->cnt; i++)
                        if (chk->elems[i].err)
                                e = chk->elems[i].err;
                if (!e)
                        return SG_OK;
                if (err_is_generation(e)) {
                        cJSON *f = sg_kafka_parts_json(chk);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2str(e));
                        sg_loop_log(loop, SG_LOG_WARNING,
                                    "changelog_claim_lost", f);
                        *lostp = true;
                        return SG_OK;
                }
                if (tries >= 4 || loop->stop) {
                        sg_errf(errstr, errstr_size,
                                "checking the consumer group generation "
                                "(offset commit): %s",
                                rd_kafka_err2str(e));
                        return SG_ERR_KAFKA;
                }
                sg_sleep_ms(200);
        }
}

/** sg_loop_claim, step 4: logs "changelog_claimed" with the @p n
 *  partitions' epochs. */
static void claim_log(sg_loop_t *loop,
                      const rd_kafka_topic_partition_list_t *chk,
                      const size_t *pis, size_t n) {
        cJSON *f = sg_kafka_parts_json(chk);
        cJSON *ep = cJSON_AddArrayToObject(f, "epochs");
        for (size_t k = 0; k < n; k++)
                cJSON_AddItemToArray(
                        ep, cJSON_CreateNumber(
                                    (double)loop->parts[pis[k]].cl_epoch));
        sg_loop_log(loop, SG_LOG_INFO, "changelog_claimed", f);
}

/**
 * at_least_once, on assignment (kafka_changelog.h "claim"): for every input
 * partition of @p parts, a claim record on its changelog partition (its
 * offset becomes the partition's epoch); then a synchronous offset commit
 * of @p committed (the group's committed offsets, or the partition's log
 * start where none is committed) — it succeeds only while this member's
 * consumer group generation is current, so any newer owner's claim comes
 * later in the log; then a confirm record per partition. @p committed:
 * per partition of @p parts, the committed offset, -1 none, -2 unknown
 * (left out of the check). *lostp: the commit said the generation moved on
 * (a rebalance is coming): nothing was confirmed, the caller must not take
 * the partitions.
 */
sg_err_t sg_loop_claim(sg_loop_t *loop,
                       const rd_kafka_topic_partition_list_t *parts,
                       const int64_t *committed, bool *lostp, char *errstr,
                       size_t errstr_size) {
        *lostp = false;
        sg_send_t *recs = calloc((size_t)parts->cnt + 1, sizeof(*recs));
        size_t *pis = calloc((size_t)parts->cnt + 1, sizeof(*pis));
        unsigned char(*keys)[SG_CHANGELOG_KEY_LEN] =
                calloc((size_t)parts->cnt + 1, SG_CHANGELOG_KEY_LEN);
        rd_kafka_topic_partition_list_t *chk =
                rd_kafka_topic_partition_list_new(parts->cnt + 1);
        sg_err_t err = recs && pis && keys ? SG_OK : SG_ERR_NOMEM;
        size_t n = 0;
        if (!err)
                err = claim_records(loop, parts, committed, recs, pis, keys,
                                    chk, &n, errstr, errstr_size);
        if (!err && n > 0)
                err = sg_loop_send(loop, recs, n, errstr, errstr_size);
        for (size_t k = 0; !err && k < n; k++) {
                sg_part_t *p = &loop->parts[pis[k]];
                p->cl_epoch = recs[k].offset;
                p->cl_seq = 0;
                p->cl_m1 = p->cl_m2 = 0;
                p->cl_next = -1;
                p->cl_fenced = false;
        }
        if (!err && n > 0 && chk->cnt == 0) {
                sg_errf(errstr, errstr_size,
                        "the group's committed offsets could not be read: "
                        "the consumer group generation cannot be checked");
                err = SG_ERR_KAFKA;
        }
        if (!err && n > 0)
                err = claim_check_generation(loop, chk, lostp, errstr,
                                             errstr_size);
        if (!err && !*lostp && n > 0) {
                for (size_t k = 0; k < n; k++) {
                        sg_part_t *p = &loop->parts[pis[k]];
                        sg_changelog_key_make(keys[k], SG_CHANGELOG_CONFIRM,
                                              p->cl_epoch);
                        recs[k].ef.key_len = SG_CHANGELOG_KEY_LEN;
                }
                err = sg_loop_send(loop, recs, n, errstr, errstr_size);
        }
        if (!err && !*lostp && n > 0)
                claim_log(loop, chk, pis, n);
        if (err || *lostp)
                for (size_t k = 0; k < n; k++)
                        loop->parts[pis[k]].cl_epoch = -1;
        rd_kafka_topic_partition_list_destroy(chk);
        free(recs);
        free(pis);
        free(keys);
        return err;
}
