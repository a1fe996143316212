/*
 * kafka_restore.c — the Kafka loop (kafka.h): changelog restore (both
 * guarantees), what to restore after a lost checkpoint. The at_least_once
 * claim, fence and repair it relies on are kafka_claim.c.
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* ------------------------------------------------------------------ */
/* the changelog: restore (both guarantees)                            */

/** What one changelog restore read, handed to the reader's callback. */
typedef struct sg_restore_ctx {
        sg_loop_t *loop;
        const char *topic; /**< the input topic */
        int32_t partition;
        bool has_id; /**< the processor keeps a changelog id (checked, or
                          the first one read) */
} sg_restore_ctx_t;

static sg_err_t restore_apply_cb(void *opaque, int64_t offset, const void *key,
                                 size_t key_len, const void *value,
                                 size_t value_len, char *errstr,
                                 size_t errstr_size) {
        sg_restore_ctx_t *c = opaque;
        const sg_processor_t *pr = &c->loop->proc;
        return pr->restore_apply(pr->opaque, c->topic, c->partition, offset,
                                 key, key_len, value, value_len, errstr,
                                 errstr_size);
}

/** loop_restore_read, step 1: assigns the restore consumer changelog
 *  partition @p changelog [@p partition] from offset @p from. */
static sg_err_t loop_restore_assign(sg_loop_t *loop, const char *changelog,
                                    int32_t partition, int64_t from,
                                    char *errstr, size_t errstr_size) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, changelog, partition)->offset =
                from;
        rd_kafka_resp_err_t e = rd_kafka_assign(loop->restorer, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "]: assign: %s", changelog,
                        partition, rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

/** loop_restore_read, step 2: feeds changelog record @p m to the reader
 *  @p rd and, when the reader's FLOOR moved from *floorp, tells the
 *  processor (changelog_epoch_set) and updates *floorp. */
static sg_err_t loop_restore_feed(sg_restore_ctx_t *ctx,
                                  sg_changelog_reader_t *rd,
                                  const rd_kafka_message_t *m, int64_t *floorp,
                                  char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &ctx->loop->proc;
        rd_kafka_headers_t *h = NULL;
        const void *frame = NULL;
        size_t frame_len = 0;
        if (!rd_kafka_message_headers(m, &h) &&
            rd_kafka_header_get_last(h, SG_CHANGELOG_HEADER, &frame,
                                     &frame_len))
                frame = NULL;
        sg_err_t err = sg_changelog_reader_feed(
                rd, m->offset, m->key, m->key_len, m->payload,
                m->payload ? m->len : 0, frame, frame_len, restore_apply_cb,
                ctx, errstr, errstr_size);
        if (!err && sg_changelog_reader_floor(rd) != *floorp) {
                *floorp = sg_changelog_reader_floor(rd);
                if (pr->changelog_epoch_set)
                        pr->changelog_epoch_set(pr->opaque, ctx->topic,
                                                ctx->partition, *floorp);
        }
        sg_changelog_id_t id;
        if (!err && !ctx->has_id && pr->changelog_id_set &&
            sg_changelog_reader_id(rd, &id)) {
                /* a store without one records the first id read, before
                 * any checkpoint past it (kafka_changelog.h "The changelog
                 * id") */
                err = pr->changelog_id_set(pr->opaque, ctx->topic,
                                           ctx->partition, &id, errstr,
                                           errstr_size);
                ctx->has_id = true;
        }
        return err;
}

sg_err_t sg_loop_restore_feed(sg_loop_t *loop, const char *topic,
                              int32_t partition, bool *has_idp,
                              sg_changelog_reader_t *rd,
                              const rd_kafka_message_t *m, int64_t *floorp,
                              char *errstr, size_t errstr_size) {
        sg_restore_ctx_t ctx = {loop, topic, partition, *has_idp};
        sg_err_t err =
                loop_restore_feed(&ctx, rd, m, floorp, errstr, errstr_size);
        *has_idp = ctx.has_id;
        return err;
}

/** loop_restore_read, step 3: logs the restore consumer's error @p m
 *  ("restore_consume_error"); an offset out of range, an offset reset or a
 *  fatal error fails the restore at offset @p end. */
static sg_err_t loop_restore_consume_error(sg_loop_t *loop,
                                           const char *changelog,
                                           int32_t partition, int64_t end,
                                           const rd_kafka_message_t *m,
                                           char *errstr, size_t errstr_size) {
        char fes[512];
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "changelog", changelog);
        cJSON_AddNumberToObject(f, "partition", partition);
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(m->err));
        cJSON_AddStringToObject(f, "message", rd_kafka_message_errstr(m));
        sg_loop_log(loop, SG_LOG_WARNING, "restore_consume_error", f);
        char res[300];
        snprintf(res, sizeof(res), "topic \"%s\"", changelog);
        /* The restore consumer's group (librdkafka 2.0.2 wants one for
         * assign()) is never joined: its FindCoordinator failing for want
         * of an ACL on it costs nothing. The changelog unreadable does. */
        if (m->err != RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED &&
            sg_kafka_acl_note(&loop->klog, loop->restorer, m->err, "Read",
                              res)) {
                sg_kafka_acl_denied(&loop->klog, errstr, errstr_size);
                return SG_ERR_CONFIG;
        }
        if (m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE ||
            m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
            rd_kafka_fatal_error(loop->restorer, fes, sizeof(fes))) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "] at offset "
                        "%" PRId64 ": %s",
                        changelog, partition, end, rd_kafka_message_errstr(m));
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

/** loop_restore_read, step 4, at the partition's EOF @p end: sets *donep
 *  when nothing undecided lies beyond (the high watermark); else logs
 *  "restore_waiting_for_transaction" once (*waitingp) and fails once the
 *  first EOF is SG_RESTORE_PENDING_MAX_MS old (@p since_ms). */
static sg_err_t loop_restore_at_eof(sg_loop_t *loop, const char *changelog,
                                    int32_t partition, int64_t end,
                                    int64_t since_ms, bool *waitingp,
                                    int64_t *takeover_atp, bool *donep,
                                    char *errstr, size_t errstr_size) {
        int64_t wlo = -1, whi = -1;
        rd_kafka_get_watermark_offsets(loop->restorer, changelog, partition,
                                       &wlo, &whi);
        if (whi <= end) {
                *donep = true; /* nothing undecided beyond */
                return SG_OK;
        }
        if (!*waitingp) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "changelog", changelog);
                cJSON_AddNumberToObject(f, "partition", partition);
                cJSON_AddNumberToObject(f, "stable_offset", (double)end);
                cJSON_AddNumberToObject(f, "high_watermark", (double)whi);
                sg_loop_log(loop, SG_LOG_NOTICE,
                            "restore_waiting_for_transaction", f);
                *waitingp = true;
        }
        /* exactly_once: a dead owner's transaction is ended at once
         * (semantics §6 "Taking over from a dead owner") */
        if (loop->eos && since_ms >= *takeover_atp) {
                *takeover_atp = since_ms + SG_TAKEOVER_RETRY_MS;
                if (sg_loop_takeover(loop, changelog, partition, end, since_ms))
                        return SG_OK; /* read on: the abort's marker */
        }
        if (since_ms > SG_RESTORE_PENDING_MAX_MS) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "]: a "
                        "transaction stayed undecided for "
                        "%d s (stable offset %" PRId64
                        ", high watermark %" PRId64 ")",
                        changelog, partition, SG_RESTORE_PENDING_MAX_MS / 1000,
                        end, whi);
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

/* A restore's progress, for its "restore_progress" lines. */
typedef struct restore_progress {
        int64_t start_ms; /* the read began (monotonic) */
        int64_t next_ms;  /* the next line is due */
        uint64_t records; /* changelog records read so far */
} restore_progress_t;

/** loop_restore_read, every stats_interval_ms while records arrive: logs
 *  "restore_progress" — how far the changelog partition is read (offset,
 *  high watermark as last fetched, total offsets to read and percent when
 *  known), the records read, their rate and the seconds left at that pace
 *  (eta_seconds) — so that a long restore is seen to move. */
static void loop_restore_progress(sg_loop_t *loop, const char *topic,
                                  int32_t partition, const char *changelog,
                                  int64_t from, int64_t next, int64_t now,
                                  restore_progress_t *rp) {
        int64_t lo = -1, hi = -1;
        rd_kafka_get_watermark_offsets(loop->restorer, changelog, partition,
                                       &lo, &hi);
        double secs = (double)(now - rp->start_ms) / 1000.0;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", topic);
        cJSON_AddNumberToObject(f, "partition", partition);
        cJSON_AddStringToObject(f, "changelog", changelog);
        cJSON_AddNumberToObject(f, "from", (double)from);
        cJSON_AddNumberToObject(f, "offset", (double)next);
        if (hi >= 0) {
                cJSON_AddNumberToObject(f, "high_watermark", (double)hi);
                /* what the restore reads in all: up to the end offset */
                cJSON_AddNumberToObject(f, "total",
                                        (double)(hi > from ? hi - from : 0));
                if (hi > from)
                        cJSON_AddNumberToObject(
                                f, "percent",
                                (double)(int)(1000.0 * (double)(next - from) /
                                              (double)(hi - from)) /
                                        10.0);
        }
        cJSON_AddNumberToObject(f, "records", (double)rp->records);
        cJSON_AddNumberToObject(
                f, "records_per_second",
                secs > 0 ? (double)(int64_t)((double)rp->records / secs) : 0);
        /* the offsets left at the pace so far (offsets, not records:
         * transaction markers and skipped records take offsets too) */
        double pace = secs > 0 ? (double)(next - from) / secs : 0;
        if (hi >= 0 && pace > 0)
                cJSON_AddNumberToObject(
                        f, "eta_seconds",
                        (double)(int64_t)((double)(hi > next ? hi - next : 0) /
                                                  pace +
                                          0.5));
        sg_loop_log(loop, SG_LOG_INFO, "restore_progress", f);
        rp->next_ms = now + loop->conf->stats_interval_ms;
}

/**
 * Reads changelog partition @p changelog [@p partition] from @p from (high
 * watermark @p hi_w, as read before the restore began) to its
 * read_committed end, giving every record to the reader @p rd, which hands
 * the ones to apply to restore_apply (kafka_changelog.h: at_least_once batches
 * that never completed, and zombies' records, are skipped). The end is where
 * the restore consumer reports the partition's EOF; if the high watermark
 * is beyond it a transaction on the changelog is still undecided (a dead
 * owner's, until the coordinator aborts it; or one committed whose marker
 * is not written yet), and the read goes on until the end reaches the high
 * watermark: the state must include every transaction whose input offsets
 * are committed. Whenever the reader's FLOOR moves, the processor is told
 * (changelog_epoch_set), so that every checkpoint keeps the epoch in force;
 * and, unless @p has_id (the processor keeps a changelog id), the first
 * changelog id record read (changelog_id_set).
 */
static sg_err_t loop_restore_read(sg_loop_t *loop, const char *topic,
                                  int32_t partition, const char *changelog,
                                  int64_t from, int64_t hi_w, bool has_id,
                                  sg_changelog_reader_t *rd, int64_t *endp,
                                  char *errstr, size_t errstr_size) {
        sg_restore_ctx_t ctx = {loop, topic, partition, has_id};
        int64_t floor = sg_changelog_reader_floor(rd);
        sg_err_t err = loop_restore_assign(loop, changelog, partition, from,
                                           errstr, errstr_size);
        if (err)
                return err;
        int64_t end = from, first_eof = 0, progress = sg_clock_mono_ms();
        /* the HTTP endpoint's restore progress (sg_loop_publish) */
        size_t pi = sg_loop_part(loop, topic, partition);
        if (pi != SG_NO_PART) {
                /* @p hi_w: the high watermark loop_restore_offsets read
                 * just before, not a second round trip */
                loop->parts[pi].restoring = true;
                loop->parts[pi].restore_records = 0;
                loop->parts[pi].restore_target =
                        hi_w >= from ? hi_w - from : -1;
                sg_loop_publish(loop, true);
        }
        restore_progress_t rp = {.start_ms = progress,
                                 .next_ms = progress +
                                            loop->conf->stats_interval_ms};
        bool eof = false, waiting = false, done = false;
        int64_t takeover_at = SG_TAKEOVER_AFTER_MS; /* ms after first EOF */
        /* the consumer queue, read a batch at a time: one clock read, one
         * publish and one progress check per batch, not per record */
        rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(loop->restorer);
        rd_kafka_message_t *ms[SG_RESTORE_BATCH];
        if (!q) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "]: the restore consumer "
                        "has no queue",
                        changelog, partition);
                err = SG_ERR_KAFKA;
        }
        while (!err) {
                ssize_t n = rd_kafka_consume_batch_queue(q, SG_RESTORE_POLL_MS,
                                                         ms, SG_RESTORE_BATCH);
                int64_t now = sg_clock_mono_ms();
                uint64_t records0 = rp.records;
                for (ssize_t i = 0; i < n; i++) {
                        rd_kafka_message_t *m = ms[i];
                        if (err) {
                                /* stopped at an earlier one: dropped */
                        } else if (!m->err) {
                                err = loop_restore_feed(&ctx, rd, m, &floor,
                                                        errstr, errstr_size);
                                end = m->offset + 1;
                                eof = false;
                                rp.records++;
                        } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                end = m->offset;
                                eof = true;
                                if (!first_eof)
                                        first_eof = now;
                        } else {
                                err = loop_restore_consume_error(
                                        loop, changelog, partition, end, m,
                                        errstr, errstr_size);
                        }
                        rd_kafka_message_destroy(m);
                }
                if (err)
                        break;
                /* after the batch was applied (a window's flush may have
                 * taken long): what the progress line and the stall
                 * check measure from */
                if (n > 0)
                        now = sg_clock_mono_ms();
                if (rp.records != records0 || eof)
                        progress = now;
                if (rp.records != records0) {
                        if (pi != SG_NO_PART) {
                                loop->parts[pi].restore_records =
                                        (int64_t)rp.records;
                                sg_loop_publish(loop, false);
                        }
                        if (loop->conf->stats_interval_ms > 0 &&
                            now >= rp.next_ms)
                                loop_restore_progress(loop, topic, partition,
                                                      changelog, from, end, now,
                                                      &rp);
                }
                if (eof) {
                        err = loop_restore_at_eof(loop, changelog, partition,
                                                  end, now - first_eof,
                                                  &waiting, &takeover_at, &done,
                                                  errstr, errstr_size);
                        if (done)
                                break;
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
                                "]",
                                changelog, partition);
                        err = SG_ERR_KAFKA;
                }
        }
        if (q)
                rd_kafka_queue_destroy(q);
        rd_kafka_assign(loop->restorer, NULL);
        if (pi != SG_NO_PART) {
                loop->parts[pi].restoring = false;
                sg_loop_publish(loop, false);
        }
        *endp = end;
        return err;
}

#define SG_RESTORE_ATTEMPTS 16

/** loop_restore_part, step 1: reads changelog @p tc [@p partition]'s low
 *  and high watermarks into *lop, *hip. A leader moving, a changelog just
 *  created: retried (librdkafka does not retry NOT_LEADER_FOR_PARTITION
 *  for ListOffsets itself). */
sg_err_t sg_loop_restore_offsets(sg_loop_t *loop, const sg_topic_config_t *tc,
                                 int32_t partition, int64_t *lop, int64_t *hip,
                                 char *errstr, size_t errstr_size) {
        rd_kafka_resp_err_t e;
        sg_retry_t rt;
        sg_retry_init(&rt, "restore");
        char what[400];
        sg_errf(what, sizeof(what),
                "changelog %s [%" PRId32 "]: reading its offsets",
                tc->changelog_topic, partition);
        bool gave_up = false;
        while ((e = rd_kafka_query_watermark_offsets(
                        loop->restorer, tc->changelog_topic, partition, lop,
                        hip, SG_METADATA_TIMEOUT_MS)) &&
               sg_retry_again(loop, &rt, e, true, what, &gave_up))
                ;
        if (e) {
                sg_errf(errstr, errstr_size, "%s: %s%s", what,
                        rd_kafka_err2str(e),
                        gave_up ? " (retriable; retried for "
                                  "broker_retry_timeout_ms)"
                                : "");
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

/** loop_restore_id_check, the read: the first record of changelog
 *  @p changelog [@p partition] at or after offset @p at (read_committed),
 *  into *mp (NULL: none — the log ends before it, or only records a
 *  read_committed reader never gets lie from @p at to its end). Waits for a
 *  transaction still undecided there, as loop_restore_read does. */
static sg_err_t loop_restore_read_one(sg_loop_t *loop, const char *changelog,
                                      int32_t partition, int64_t at,
                                      rd_kafka_message_t **mp, char *errstr,
                                      size_t errstr_size) {
        *mp = NULL;
        sg_err_t err = loop_restore_assign(loop, changelog, partition, at,
                                           errstr, errstr_size);
        rd_kafka_queue_t *q =
                err ? NULL : rd_kafka_queue_get_consumer(loop->restorer);
        if (!err && !q) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%" PRId32 "]: the restore consumer "
                        "has no queue",
                        changelog, partition);
                err = SG_ERR_KAFKA;
        }
        int64_t t0 = sg_clock_mono_ms(), first_eof = 0,
                takeover_at = SG_TAKEOVER_AFTER_MS;
        bool waiting = false, done = false;
        while (!err && !*mp && !done) {
                rd_kafka_message_t *m =
                        rd_kafka_consume_queue(q, SG_RESTORE_POLL_MS);
                int64_t now = sg_clock_mono_ms();
                if (!m) {
                } else if (!m->err) {
                        *mp = m;
                        m = NULL;
                } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (m->offset > at) {
                                done = true; /* nothing readable at @p at */
                        } else {
                                if (!first_eof)
                                        first_eof = now;
                                err = loop_restore_at_eof(
                                        loop, changelog, partition, m->offset,
                                        now - first_eof, &waiting, &takeover_at,
                                        &done, errstr, errstr_size);
                        }
                } else if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                           m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
                        done = true; /* the log ends before @p at */
                } else {
                        err = loop_restore_consume_error(loop, changelog,
                                                         partition, at, m,
                                                         errstr, errstr_size);
                }
                if (m)
                        rd_kafka_message_destroy(m);
                if (!err && !*mp && !done && !first_eof &&
                    now - t0 > SG_RESTORE_STALL_MS) {
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%" PRId32 "]: no answer for "
                                "%d s reading offset %" PRId64,
                                changelog, partition,
                                SG_RESTORE_STALL_MS / 1000, at);
                        err = SG_ERR_KAFKA;
                }
                if (!err && !*mp && !done && loop->stop) {
                        sg_errf(errstr, errstr_size,
                                "stopped during the restore of %s [%" PRId32
                                "]",
                                changelog, partition);
                        err = SG_ERR_KAFKA;
                }
        }
        if (q)
                rd_kafka_queue_destroy(q);
        rd_kafka_assign(loop->restorer, NULL);
        if (err && *mp) {
                rd_kafka_message_destroy(*mp);
                *mp = NULL;
        }
        return err;
}

/**
 * loop_restore_part, before the read: the store of @p topic [@p partition]
 * expects the changelog id record @p want; checks that changelog
 * @p tc [@p partition] (log start @p lo) holds it there (kafka_changelog.h "The
 * changelog id"): SG_ERR_FOREIGN if not. When that cannot be known (the
 * log starts past it: its retention removed it), logs
 * "changelog_id_unverifiable", tells the processor to forget it and sets
 * *keptp false: the restore then records an id anew.
 */
sg_err_t sg_loop_restore_id_check(sg_loop_t *loop, const char *topic,
                                  int32_t partition,
                                  const sg_topic_config_t *tc, int64_t lo,
                                  const sg_changelog_id_t *want, bool *keptp,
                                  char *errstr, size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        rd_kafka_message_t *m = NULL;
        *keptp = true;
        sg_err_t err = SG_OK;
        if (want->offset >= lo)
                err = loop_restore_read_one(loop, tc->changelog_topic,
                                            partition, want->offset, &m, errstr,
                                            errstr_size);
        if (err)
                return err;
        err = sg_changelog_id_check(want, lo, m ? m->offset : -1,
                                    m ? m->key : NULL, m ? m->key_len : 0,
                                    topic, tc->changelog_topic, partition,
                                    errstr, errstr_size);
        if (m)
                rd_kafka_message_destroy(m);
        if (err == SG_ERR_NOT_FOUND) {
                char hex[SG_CHANGELOG_ID_HEX];
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "topic", topic);
                cJSON_AddNumberToObject(f, "partition", partition);
                cJSON_AddStringToObject(f, "changelog", tc->changelog_topic);
                cJSON_AddStringToObject(f, "changelog_id",
                                        sg_changelog_id_hex(want->id, hex));
                cJSON_AddNumberToObject(f, "offset", (double)want->offset);
                cJSON_AddNumberToObject(f, "log_start", (double)lo);
                cJSON_AddStringToObject(
                        f, "detail",
                        "the changelog starts past its id record (removed "
                        "by its retention): not checked; a new one is "
                        "recorded");
                sg_loop_log(loop, SG_LOG_WARNING, "changelog_id_unverifiable",
                            f);
                *keptp = false;
                err = pr->changelog_id_set(pr->opaque, topic, partition, NULL,
                                           errstr, errstr_size);
        }
        return err;
}

/** loop_restore_part, step 2: one pass of the processor's restore
 *  (restore_begin, the read from *fromp to *endp through a new changelog
 *  reader *rdp — the caller's to destroy, also on error — restore_end). */
static sg_err_t loop_restore_pass(sg_loop_t *loop, const char *topic,
                                  int32_t partition,
                                  const sg_topic_config_t *tc, int64_t lo,
                                  int64_t hi, int64_t *fromp, int64_t *endp,
                                  sg_changelog_reader_t **rdp, char *errstr,
                                  size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        sg_err_t err = pr->restore_begin(pr->opaque, topic, partition, lo, hi,
                                         fromp, errstr, errstr_size);
        int64_t floor0 = -1;
        if (!err && pr->changelog_epoch_get)
                floor0 = pr->changelog_epoch_get(pr->opaque, topic, partition);
        if (!err && pr->changelog_epoch_set)
                pr->changelog_epoch_set(pr->opaque, topic, partition, floor0);
        /* the changelog's identity first: nothing is applied from a log
         * that is not the store's */
        sg_changelog_id_t want;
        bool has_id = !err && pr->changelog_id_get && pr->changelog_id_set &&
                      pr->changelog_id_get(pr->opaque, topic, partition, &want);
        if (has_id)
                err = sg_loop_restore_id_check(loop, topic, partition, tc, lo,
                                               &want, &has_id, errstr,
                                               errstr_size);
        if (!err && sg_changelog_reader_new(floor0, rdp)) {
                sg_errf(errstr, errstr_size, "out of memory");
                err = SG_ERR_NOMEM;
        }
        if (!err)
                err = loop_restore_read(loop, topic, partition,
                                        tc->changelog_topic, *fromp, hi, has_id,
                                        *rdp, endp, errstr, errstr_size);
        if (!err && (err = sg_changelog_reader_finish(*rdp)))
                sg_errf(errstr, errstr_size, "out of memory");
        size_t pi = sg_loop_part(loop, topic, partition);
        if (!err && pi != SG_NO_PART)
                /* none kept and none read: one is written once the
                 * restores are done (sg_loop_restore) */
                loop->parts[pi].cl_id_write =
                        pr->changelog_id_set && !has_id &&
                        !sg_changelog_reader_id(*rdp, NULL);
        if (!err)
                err = pr->restore_end(pr->opaque, topic, partition, *endp,
                                      errstr, errstr_size);
        return err;
}

/** loop_restore_part, step 3, on SG_ERR_MAP_FULL: grows the store
 *  (processor.h grow) and logs "store_grown". */
static sg_err_t loop_restore_grow(sg_loop_t *loop, const char *topic,
                                  int32_t partition, char *errstr,
                                  size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
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
        sg_loop_log(loop, SG_LOG_NOTICE, "store_grown", f);
        return SG_OK;
}

/** loop_restore_part, step 4: logs "restore_done" for a pass that read
 *  changelog @p tc from @p from (log start @p lo) to @p end in @p ms. */
static void loop_restore_log_done(sg_loop_t *loop, const char *topic,
                                  int32_t partition,
                                  const sg_topic_config_t *tc, int64_t lo,
                                  int64_t from, int64_t end,
                                  const sg_changelog_counts_t *cnt,
                                  int64_t floor, int64_t ms) {
        const sg_processor_t *pr = &loop->proc;
        sg_changelog_id_t id;
        char hex[SG_CHANGELOG_ID_HEX];
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", topic);
        cJSON_AddNumberToObject(f, "partition", partition);
        cJSON_AddStringToObject(f, "changelog", tc->changelog_topic);
        cJSON_AddNumberToObject(f, "log_start", (double)lo);
        cJSON_AddNumberToObject(f, "from", (double)from);
        cJSON_AddNumberToObject(f, "end", (double)end);
        cJSON_AddNumberToObject(f, "records", (double)cnt->applied);
        cJSON_AddNumberToObject(f, "void_records", (double)cnt->void_cnt);
        cJSON_AddNumberToObject(f, "epoch", (double)floor);
        /* the changelog id checked or read (none yet: one is written) */
        if (pr->changelog_id_get &&
            pr->changelog_id_get(pr->opaque, topic, partition, &id))
                cJSON_AddStringToObject(f, "changelog_id",
                                        sg_changelog_id_hex(id.id, hex));
        cJSON_AddNumberToObject(f, "ms", (double)ms);
        sg_loop_log(loop, SG_LOG_INFO, "restore_done", f);
}

/**
 * Restores input partition @p topic [@p partition] from its changelog
 * (processor.h restore_begin → restore_apply … → restore_end), reading
 * through a changelog reader (kafka_changelog.h). On SG_ERR_MAP_FULL the store
 * is grown and the partition's restore starts again from restore_begin. Adds
 * the time taken to *msp. at_least_once: then checks the partition was not
 * claimed by a newer owner (*fencedp) and repairs (sg_loop_repair); when other
 * records interleaved with the repair, reads again.
 */
static sg_err_t loop_restore_part(sg_loop_t *loop, const char *topic,
                                  int32_t partition, int64_t *msp,
                                  bool *fencedp, char *errstr,
                                  size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        const sg_topic_config_t *tc = sg_config_topic(loop->conf, topic);
        size_t pi = sg_loop_part(loop, topic, partition);
        sg_part_t *p = &loop->parts[pi];
        *fencedp = false;
        if (!tc || !tc->changelog_topic || !pr->restore_begin ||
            !pr->restore_apply || !pr->restore_end || !loop->restorer)
                return SG_OK; /* a reply topic, or nothing to restore */
        for (int attempt = 0;; attempt++) {
                int64_t t0 = sg_clock_mono_ms(), lo = -1, hi = -1, from = -1,
                        end = -1;
                sg_changelog_reader_t *rd = NULL;
                if (sg_loop_restore_offsets(loop, tc, partition, &lo, &hi,
                                            errstr, errstr_size))
                        return SG_ERR_KAFKA;
                sg_err_t err = loop_restore_pass(loop, topic, partition, tc, lo,
                                                 hi, &from, &end, &rd, errstr,
                                                 errstr_size);
                int64_t ms = sg_clock_mono_ms() - t0;
                *msp += ms;
                if (err == SG_ERR_MAP_FULL && pr->grow &&
                    attempt < SG_RESTORE_ATTEMPTS) {
                        sg_changelog_reader_destroy(rd);
                        if (loop_restore_grow(loop, topic, partition, errstr,
                                              errstr_size))
                                return SG_ERR_MAP_FULL;
                        continue;
                }
                if (err) {
                        sg_changelog_reader_destroy(rd);
                        return err;
                }
                sg_changelog_counts_t cnt = sg_changelog_reader_counts(rd);
                int64_t floor = sg_changelog_reader_floor(rd);
                const sg_changelog_key_t *vk;
                size_t nvoid = sg_changelog_reader_void_keys(rd, &vk);
                loop->stats.restored_records_total += cnt.applied;
                loop_restore_log_done(loop, topic, partition, tc, lo, from, end,
                                      &cnt, floor, ms);
                if (!loop->alos_cl) {
                        if (nvoid > 0) {
                                /* exactly_once reading records an
                                 * at_least_once owner left void: skipped
                                 * like there; not rewritten (that would
                                 * need a transaction of its own) */
                                cJSON *g = cJSON_CreateObject();
                                cJSON_AddStringToObject(g, "topic", topic);
                                cJSON_AddNumberToObject(g, "partition",
                                                        partition);
                                cJSON_AddNumberToObject(g, "void_keys",
                                                        (double)nvoid);
                                sg_loop_log(loop, SG_LOG_WARNING,
                                            "changelog_void_records", g);
                        }
                        sg_changelog_reader_destroy(rd);
                        return SG_OK;
                }
                if (p->cl_epoch < 0 || floor > p->cl_epoch) {
                        /* unclaimed (never: a claim precedes every restore
                         * in at_least_once), or a newer owner confirmed */
                        sg_changelog_reader_destroy(rd);
                        *fencedp = true;
                        return SG_OK;
                }
                bool again = false;
                err = sg_loop_repair(loop, pi, tc, rd, end, &again, errstr,
                                     errstr_size);
                sg_changelog_reader_destroy(rd);
                if (err)
                        return err;
                if (!again)
                        return SG_OK;
                if (attempt >= SG_RESTORE_ATTEMPTS) {
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%" PRId32 "]: other writers "
                                "kept interleaving with the repair",
                                tc->changelog_topic, partition);
                        return SG_ERR_KAFKA;
                }
        }
}

/** After the restores: the heap they freed handed back to the kernel.
 *  The restore consumer's fetched records are allocated by librdkafka's
 *  broker threads, each in a glibc arena of its own, and freed by this
 *  thread; glibc keeps a freed arena's memory for that arena's next
 *  allocations and returns only a free top of it, so after a long restore
 *  the restore consumer's arenas stayed resident, unused until the next
 *  restore: ~250 MiB of anonymous memory after a restore of 10 M keys,
 *  none after one of 10 k (docs/benchmarks.md). malloc_trim(0) releases
 *  the free pages of every arena (glibc 2.8 and later; elsewhere nothing
 *  to do). */
static void loop_restore_trim(void) {
#ifdef __GLIBC__
        malloc_trim(0);
#endif
}

/**
 * After the restores: writes a changelog id record (kafka_changelog.h "The
 * changelog id") into the changelog partition of every input partition
 * whose restore found none and kept none (part.cl_id_write; not a fenced
 * one) — exactly_once in a transaction of its own, at_least_once as this
 * owner's records — and tells the processor the id and the offset it got
 * (changelog_id_set). at_least_once: a record that landed where this
 * owner's next one was due moves that on (part.cl_next); one that landed
 * elsewhere had another writer before it, which the next batch finds (its
 * records do not land where due) and answers with a restore. Logs
 * "changelog_id_written" per record.
 */
static sg_err_t loop_ids_write(sg_loop_t *loop, char *errstr,
                               size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        size_t n = 0;
        for (size_t i = 0; i < loop->part_cnt; i++)
                n += loop->parts[i].cl_id_write && !loop->parts[i].cl_fenced;
        if (n == 0)
                return SG_OK;
        sg_send_t *recs = calloc(n, sizeof(*recs));
        size_t *pis = calloc(n, sizeof(*pis));
        unsigned char(*keys)[SG_CHANGELOG_ID_KEY_LEN] =
                calloc(n, SG_CHANGELOG_ID_KEY_LEN);
        unsigned char(*vals)[8] = calloc(n, 8);
        sg_err_t err = recs && pis && keys && vals ? SG_OK : SG_ERR_NOMEM;
        if (err)
                sg_errf(errstr, errstr_size, "out of memory");
        int64_t now = sg_clock_wall_ms();
        for (size_t i = 0, k = 0; !err && i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (!p->cl_id_write || p->cl_fenced)
                        continue;
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, p->topic);
                unsigned char id[SG_CHANGELOG_ID_LEN];
                if ((err = sg_changelog_id_new(id, errstr, errstr_size)))
                        break;
                sg_changelog_id_key_make(keys[k], id);
                sg_changelog_u64_put(vals[k], now);
                recs[k].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = p->partition,
                        .key = keys[k],
                        .key_len = SG_CHANGELOG_ID_KEY_LEN,
                        .value = vals[k],
                        .value_len = 8,
                };
                pis[k++] = i;
        }
        if (!err)
                err = loop->eos ? sg_loop_txn_send(loop, recs, n, errstr,
                                                   errstr_size)
                                : sg_loop_send(loop, recs, n, errstr,
                                               errstr_size);
        for (size_t k = 0; !err && k < n; k++) {
                sg_part_t *p = &loop->parts[pis[k]];
                sg_changelog_id_t id = {.offset = recs[k].offset};
                sg_changelog_id_key_parse(keys[k], SG_CHANGELOG_ID_KEY_LEN,
                                          id.id);
                p->cl_id_write = false;
                if (!loop->eos && p->cl_next == id.offset)
                        p->cl_next = id.offset + 1;
                char hex[SG_CHANGELOG_ID_HEX];
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "topic", p->topic);
                cJSON_AddNumberToObject(f, "partition", p->partition);
                cJSON_AddStringToObject(f, "changelog", recs[k].ef.topic);
                cJSON_AddStringToObject(f, "changelog_id",
                                        sg_changelog_id_hex(id.id, hex));
                cJSON_AddNumberToObject(f, "offset", (double)id.offset);
                sg_loop_log(loop, SG_LOG_NOTICE, "changelog_id_written", f);
                err = pr->changelog_id_set(pr->opaque, p->topic, p->partition,
                                           &id, errstr, errstr_size);
        }
        free(recs);
        free(pis);
        free(keys);
        free(vals);
        return err;
}

/** Restores every input partition of @p l, or (NULL) every assigned one
 *  whose part.restore is set (clearing it). Sets restore_ms_last.
 *  at_least_once: a partition a newer owner confirmed is fenced
 *  (sg_loop_fence); *fencedp (may be NULL) says whether any was.
 *  @returns the first error (errstr names the partition). */
sg_err_t sg_loop_restore(sg_loop_t *loop,
                         const rd_kafka_topic_partition_list_t *l,
                         bool *fencedp, char *errstr, size_t errstr_size) {
        int64_t ms = 0;
        sg_err_t err = SG_OK;
        bool fenced = false, any = false;
        if (fencedp)
                *fencedp = false;
        if (!loop->changelog || !loop->restorer)
                return SG_OK;
        /* the restore's store transactions come after the checkpoint's */
        sg_loop_checkpoint(loop, "restore");
        if (l) {
                for (int i = 0; !err && i < l->cnt; i++) {
                        err = loop_restore_part(loop, l->elems[i].topic,
                                                l->elems[i].partition, &ms,
                                                &fenced, errstr, errstr_size);
                        any |= fenced;
                }
        } else {
                if (loop->alos_cl)
                        /* let deliveries of an aborted attempt settle, so
                         * that the read sees where they landed */
                        rd_kafka_flush(loop->producer,
                                       (int)loop->conf->delivery_timeout_ms);
                for (size_t i = 0; !err && i < loop->part_cnt; i++) {
                        sg_part_t *p = &loop->parts[i];
                        if (!p->assigned || !p->restore || p->cl_fenced)
                                continue;
                        err = loop_restore_part(loop, p->topic, p->partition,
                                                &ms, &fenced, errstr,
                                                errstr_size);
                        if (err)
                                break;
                        loop->parts[i].restore = false;
                        if (fenced)
                                sg_loop_fence(loop, i);
                        any |= fenced;
                }
        }
        /* a changelog found without an id gets one (none when the
         * assignment is abandoned: its next restore decides again) */
        if (!err && !(l && any))
                err = loop_ids_write(loop, errstr, errstr_size);
        for (size_t i = 0; i < loop->part_cnt; i++)
                loop->parts[i].cl_id_write = false;
        loop_restore_trim();
        loop->stats.restore_ms_last = ms;
        if (fencedp)
                *fencedp = any;
        return err;
}

bool sg_loop_mark_behind(sg_loop_t *loop) {
        const sg_processor_t *pr = &loop->proc;
        if (!pr->behind)
                return false;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->part_cnt ? loop->part_cnt : 1));
        for (size_t i = 0; i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (!p->assigned || p->cl_fenced ||
                    !pr->behind(pr->opaque, p->topic, p->partition))
                        continue;
                p->restore = true;
                rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
        }
        bool any = l->cnt > 0;
        if (any) {
                loop->restore_needed = true;
                loop->stats.checkpoints_lost_total++;
                cJSON *f = sg_kafka_parts_json(l);
                cJSON_AddStringToObject(
                        f, "recovery",
                        "restore these partitions from their changelog "
                        "before the next batch");
                sg_loop_log(loop, SG_LOG_NOTICE, "checkpoint_lost", f);
        }
        rd_kafka_topic_partition_list_destroy(l);
        return any;
}

void sg_loop_checkpoint(sg_loop_t *loop, const char *why) {
        const sg_processor_t *pr = &loop->proc;
        char es[512] = "";
        if (!pr->checkpoint ||
            pr->checkpoint(pr->opaque, es, sizeof(es)) == SG_OK)
                return;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "error", es);
        cJSON_AddStringToObject(f, "during", why);
        sg_loop_log(loop, SG_LOG_ERR, "checkpoint_failed", f);
        sg_loop_mark_behind(loop);
}

/** Marks every assigned partition for a restore before the next batch. */
void sg_loop_restore_all(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->part_cnt; i++)
                if (loop->parts[i].assigned)
                        loop->parts[i].restore = true;
        loop->restore_needed = true;
}
