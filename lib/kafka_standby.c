/*
 * kafka_standby.c — the Kafka loop (kafka.h): standby replicas (semantics
 * §6 "Standby replicas"). Which input partitions this instance is standby
 * for (the consumer group described through the Admin API, placed by
 * standby.h), and their changelogs tailed into the store between batches
 * through the restore's own path (processor.h restore_begin … restore_end,
 * the changelog reader of kafka_changelog.h), so that the store's
 * checkpoint of a partition this instance does not own stays near its
 * changelog's end and a failover here restores only a short tail.
 *
 * Only the loop thread touches any of it (the store's only writer), but
 * for the group describer thread, which asks the group coordinator for the
 * group's members and assignments (DescribeGroups through librdkafka's
 * rd_kafka_list_groups(), a blocking call) and hands its newest answer to
 * the loop under sby_mu. Not the Admin API's DescribeConsumerGroups:
 * librdkafka 2.0.2 aborts the process when that request is retried
 * (rd_kafka_enq_once_del_source_return: eonce->refcnt > 0), as it is on a
 * broker restart — seen with standby_replicas 1 and `kafka.sh restart`:
 * both instances died of SIGABRT; rd_kafka_list_groups answers an error
 * instead and the describer asks again.
 */
#include "kafka_int.h"
#include "metrics_pub.h"
#include "standby.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the group described every (and after every rebalance) */
#define SG_STANDBY_DESCRIBE_MS 3000
/* the longest one description may wait for the coordinator (also the
 * longest a clean stop waits for the describer thread) */
#define SG_STANDBY_DESCRIBE_TIMEOUT_MS 2000

/** One answer of the group describer: the members of the group, when it
 *  is stable, with their assignments; or why there is none. */
typedef struct sg_sby_group {
        char *error;       /**< the description failed (NULL: it did not) */
        bool stable;       /**< the group's state is Stable */
        size_t member_cnt; /**< the arrays below have this many */
        char **member_ids;
        sg_standby_tp_t **parts; /**< sg_standby_assignment_parse()'s */
        size_t *part_cnts;
} sg_sby_group_t;

static void sby_group_free(sg_sby_group_t *g) {
        if (!g)
                return;
        for (size_t i = 0; i < g->member_cnt; i++) {
                free(g->member_ids ? g->member_ids[i] : NULL);
                if (g->parts)
                        sg_standby_tps_free(g->parts[i], g->part_cnts[i]);
        }
        free(g->member_ids);
        free(g->parts);
        free(g->part_cnts);
        free(g->error);
        free(g);
}

/* The describer thread's reading of the group: NULL only when out of
 * memory. */
static sg_sby_group_t *sby_group_read(sg_loop_t *loop) {
        sg_sby_group_t *g = calloc(1, sizeof(*g));
        if (!g)
                return NULL;
        const struct rd_kafka_group_list *gl = NULL;
        rd_kafka_resp_err_t e =
                rd_kafka_list_groups(loop->standby, loop->conf->group_id, &gl,
                                     SG_STANDBY_DESCRIBE_TIMEOUT_MS);
        const struct rd_kafka_group_info *gi =
                !e && gl && gl->group_cnt == 1 ? &gl->groups[0] : NULL;
        char es[300] = "";
        if (e)
                snprintf(es, sizeof(es), "%s", rd_kafka_err2str(e));
        else if (!gi)
                snprintf(es, sizeof(es), "no group in the answer");
        else if (gi->err)
                snprintf(es, sizeof(es), "%s", rd_kafka_err2str(gi->err));
        else if (gi->state && !strcmp(gi->state, "Stable")) {
                /* during a rebalance the assignments are the old ones or
                 * none: the set stays until the group is stable again */
                size_t mc = gi->member_cnt > 0 ? (size_t)gi->member_cnt : 0;
                g->stable = true;
                g->member_ids = calloc(mc ? mc : 1, sizeof(*g->member_ids));
                g->parts = calloc(mc ? mc : 1, sizeof(*g->parts));
                g->part_cnts = calloc(mc ? mc : 1, sizeof(*g->part_cnts));
                if (!g->member_ids || !g->parts || !g->part_cnts)
                        snprintf(es, sizeof(es), "out of memory");
                else
                        g->member_cnt = mc;
                for (size_t i = 0; !es[0] && i < g->member_cnt; i++) {
                        const struct rd_kafka_group_member_info *m =
                                &gi->members[i];
                        if (!(g->member_ids[i] =
                                      strdup(m->member_id ? m->member_id : "")))
                                snprintf(es, sizeof(es), "out of memory");
                        else
                                (void)sg_standby_assignment_parse(
                                        m->member_assignment,
                                        m->member_assignment_size > 0
                                                ? (size_t)m
                                                          ->member_assignment_size
                                                : 0,
                                        &g->parts[i], &g->part_cnts[i], es,
                                        sizeof(es));
                }
        }
        if (gl)
                rd_kafka_group_list_destroy(gl);
        if (es[0] && !(g->error = strdup(es))) {
                sby_group_free(g);
                return NULL;
        }
        return g;
}

/* The group describer thread: describes the group every
 * SG_STANDBY_DESCRIBE_MS, at once when kicked (a rebalance), and leaves
 * its newest answer for the loop thread. */
static void *sby_describer(void *arg) {
        sg_loop_t *loop = arg;
        int64_t next = 0;
        while (!atomic_load(&loop->sby_quit)) {
                int64_t now = sg_clock_mono_ms();
                if (atomic_exchange(&loop->sby_kick, false) || now >= next) {
                        sg_sby_group_t *g = sby_group_read(loop);
                        next = sg_clock_mono_ms() + SG_STANDBY_DESCRIBE_MS;
                        if (g) {
                                pthread_mutex_lock(&loop->sby_mu);
                                sg_sby_group_t *old = loop->sby_latest;
                                loop->sby_latest = g;
                                pthread_mutex_unlock(&loop->sby_mu);
                                sby_group_free(old);
                        }
                }
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return NULL;
}
/* records a drain turn takes from the tail consumer's queue at a time,
 * over all standby partitions, each chunk applied through one restore per
 * partition */
#define SG_STANDBY_TURN_RECORDS 20000
/* a turn is time between two batches, so it is bounded: it takes chunks
 * while the queue gives full ones, for at most this long; what is left
 * stays in the queue for the next turn */
#define SG_STANDBY_TURN_MAX_MS 250
/* the shortest time between two drain turns: each turn commits a
 * checkpoint (the open batch transaction's, then each partition's) */
#define SG_STANDBY_DRAIN_MIN_MS 1000
/* ... unless the last turn left records in the queue (a standby behind,
 * or catching up from its start): the next turn comes this soon, at most
 * half of the loop thread's time going to the standbys */
#define SG_STANDBY_BEHIND_MS SG_STANDBY_TURN_MAX_MS
/* a standby partition that failed is tried again after */
#define SG_STANDBY_RETRY_MS 5000

sg_err_t sg_loop_standby_new(sg_loop_t *loop, char *errstr,
                             size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        if (loop->conf->standby_replicas <= 0 || !loop->changelog ||
            !pr->assign || !pr->revoke || !pr->restore_abort)
                return SG_OK;
        rd_kafka_conf_t *kc;
        sg_err_t err = sg_kafka_conf_new(loop->conf, SG_KAFKA_READER,
                                         loop->restore_group, &loop->klog, &kc,
                                         errstr, errstr_size);
        if (err)
                return err;
        char es[512];
        /* a tail at its end waits at the broker for records, not in the
         * restore consumer's 10 ms polls: the changelog read load of a
         * standby is one fetch per 500 ms per broker when idle */
        if (rd_kafka_conf_set(kc, "fetch.wait.max.ms", "500", es, sizeof(es)) !=
            RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "standby consumer: %s", es);
                return SG_ERR_CONFIG;
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size,
                        "creating the standby consumer: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_set_log_queue(rk, NULL); /* logs served by its polls */
        rd_kafka_poll_set_consumer(rk);
        loop->standby = rk;
        atomic_store(&loop->sby_quit, false);
        atomic_store(&loop->sby_kick, true); /* at once */
        if (pthread_mutex_init(&loop->sby_mu, NULL) != 0) {
                sg_errf(errstr, errstr_size, "standby: no mutex");
                return SG_ERR_NOMEM;
        }
        if (pthread_create(&loop->sby_th, NULL, sby_describer, loop) != 0) {
                pthread_mutex_destroy(&loop->sby_mu);
                sg_errf(errstr, errstr_size,
                        "standby: the group describer thread");
                return SG_ERR_NOMEM;
        }
        loop->sby_th_started = true;
        return SG_OK;
}

static void sby_free(sg_standby_part_t *sp) {
        sg_changelog_reader_destroy(sp->rd);
        free(sp->topic);
}

static sg_standby_part_t *sby_find(sg_loop_t *loop, const char *topic,
                                   int32_t partition) {
        for (size_t i = 0; i < loop->sby_cnt; i++)
                if (loop->sby[i].partition == partition &&
                    !strcmp(loop->sby[i].topic, topic))
                        return &loop->sby[i];
        return NULL;
}

static void sby_log(sg_loop_t *loop, sg_log_level_t level, const char *event,
                    const sg_standby_part_t *sp, const char *error) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", sp->topic);
        cJSON_AddNumberToObject(f, "partition", sp->partition);
        cJSON_AddStringToObject(f, "changelog", sp->tc->changelog_topic);
        if (sp->applied >= 0)
                cJSON_AddNumberToObject(f, "offset", (double)sp->applied);
        if (error)
                cJSON_AddStringToObject(f, "error", error);
        sg_loop_log(loop, level, event, f);
}

/* Removes standby partition @p i (logs "standby_stopped" with @p why). */
static void sby_remove(sg_loop_t *loop, size_t i, const char *why) {
        sg_standby_part_t *sp = &loop->sby[i];
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", sp->topic);
        cJSON_AddNumberToObject(f, "partition", sp->partition);
        if (sp->applied >= 0)
                cJSON_AddNumberToObject(f, "offset", (double)sp->applied);
        cJSON_AddStringToObject(f, "reason", why);
        sg_loop_log(loop, SG_LOG_INFO, "standby_stopped", f);
        sby_free(sp);
        memmove(sp, sp + 1, (loop->sby_cnt - i - 1) * sizeof(*sp));
        loop->sby_cnt--;
        loop->sby_reassign = true;
}

/* The tail consumer's assignment: every standby partition caught up, at
 * the offset after the last record fed (rd_kafka_assign replaces the
 * whole assignment; a record fetched before and still queued is below
 * that offset and skipped). */
static void sby_consumer_assign(sg_loop_t *loop) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(
                (int)(loop->sby_cnt ? loop->sby_cnt : 1));
        for (size_t i = 0; i < loop->sby_cnt; i++) {
                const sg_standby_part_t *sp = &loop->sby[i];
                if (sp->ready && !sp->refused)
                        rd_kafka_topic_partition_list_add(
                                l, sp->tc->changelog_topic, sp->partition)
                                ->offset = sp->next;
        }
        rd_kafka_resp_err_t e = rd_kafka_assign(loop->standby, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", rd_kafka_err2str(e));
                sg_loop_log(loop, SG_LOG_WARNING, "standby_assign_failed", f);
                return; /* tried again at the next turn */
        }
        loop->sby_reassign = false;
}

/* Whether input partition @p topic [@p partition] is assigned here. */
static bool active_here(sg_loop_t *loop, const char *topic, int32_t partition) {
        size_t pi = sg_loop_part(loop, topic, partition);
        return pi != SG_NO_PART && loop->parts[pi].assigned;
}

/* The placement's answer: the standby set becomes @p tps (@p n). */
static void sby_set(sg_loop_t *loop, const sg_standby_tp_t *tps, size_t n) {
        for (size_t i = 0; i < loop->sby_cnt; i++)
                loop->sby[i].keep = false;
        for (size_t j = 0; j < n; j++) {
                if (active_here(loop, tps[j].topic, tps[j].partition))
                        continue; /* the description is older than that */
                sg_standby_part_t *sp =
                        sby_find(loop, tps[j].topic, tps[j].partition);
                if (sp) {
                        sp->keep = true;
                        continue;
                }
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, tps[j].topic);
                if (!tc || !tc->changelog_topic)
                        continue;
                sg_standby_part_t *ns =
                        realloc(loop->sby, (loop->sby_cnt + 1) * sizeof(*ns));
                if (!ns)
                        break;
                loop->sby = ns;
                sp = &loop->sby[loop->sby_cnt];
                memset(sp, 0, sizeof(*sp));
                if (!(sp->topic = strdup(tps[j].topic)))
                        break;
                sp->partition = tps[j].partition;
                sp->tc = tc;
                sp->lo = sp->next = sp->applied = sp->floor = -1;
                sp->keep = true;
                loop->sby_cnt++;
                sby_log(loop, SG_LOG_INFO, "standby_started", sp, NULL);
        }
        for (size_t i = loop->sby_cnt; i-- > 0;)
                if (!loop->sby[i].keep)
                        sby_remove(loop, i, "placed elsewhere");
}

/* The describer's answer @p g: placement (standby.h) of this member. */
static void sby_answer(sg_loop_t *loop, const sg_sby_group_t *g) {
        if (g->error) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", g->error);
                sg_loop_log(loop, SG_LOG_WARNING, "standby_describe_failed", f);
                return;
        }
        if (!g->stable)
                return; /* the set stays until the group is stable again */
        size_t mc = g->member_cnt, tpc = 0;
        for (size_t i = 0; i < mc; i++)
                tpc += g->part_cnts[i];
        sg_standby_member_t *ms = calloc(mc ? mc : 1, sizeof(*ms));
        sg_standby_tp_t *tps = calloc(tpc ? tpc : 1, sizeof(*tps));
        char *me = rd_kafka_memberid(loop->consumer);
        sg_standby_tp_t *out = NULL;
        size_t on = 0;
        char es[256] = "";
        if (ms && tps && me) {
                size_t k = 0;
                for (size_t i = 0; i < mc; i++) {
                        ms[i].member_id = g->member_ids[i];
                        ms[i].parts = &tps[k];
                        for (size_t j = 0; j < g->part_cnts[i]; j++) {
                                /* input partitions with a changelog only
                                 * (snapshot reply topics have none) */
                                const sg_standby_tp_t *tp = &g->parts[i][j];
                                const sg_topic_config_t *tc =
                                        sg_config_topic(loop->conf, tp->topic);
                                if (!tc || !tc->changelog_topic)
                                        continue;
                                tps[k++] = *tp;
                                ms[i].part_cnt++;
                        }
                }
                if (sg_standby_place(ms, mc, loop->conf->standby_replicas, me,
                                     &out, &on, es, sizeof(es)) == SG_OK)
                        sby_set(loop, out, on);
        }
        free(out);
        free(ms);
        free(tps);
        if (me)
                rd_kafka_mem_free(loop->consumer, me);
}

/* Asks the processor to follow @p sp's partition for one read: its part
 * in the engine (assign: the store's group and key fingerprint checked),
 * the store grown once when its map is full. */
static sg_err_t sby_assign(sg_loop_t *loop, sg_standby_part_t *sp, char *errstr,
                           size_t errstr_size) {
        const sg_processor_t *pr = &loop->proc;
        int64_t off = -1;
        sg_err_t err =
                pr->assign(pr->opaque, sp->topic, sp->partition,
                           loop->conf->group_id, &off, errstr, errstr_size);
        if (err == SG_ERR_MAP_FULL && pr->grow &&
            pr->grow(pr->opaque, errstr, errstr_size) == SG_OK)
                err = pr->assign(pr->opaque, sp->topic, sp->partition,
                                 loop->conf->group_id, &off, errstr,
                                 errstr_size);
        return err;
}

/* A failed read of @p sp: the open restore forgotten, the partition
 * caught up again from its checkpoint after SG_STANDBY_RETRY_MS, or, for
 * an error only an operator can answer (another group's store, another
 * changelog), no longer tailed (its owner's restore decides: semantics §6). */
static void sby_failed(sg_loop_t *loop, sg_standby_part_t *sp, sg_err_t err,
                       const char *es, bool open) {
        const sg_processor_t *pr = &loop->proc;
        if (open)
                pr->restore_abort(pr->opaque, sp->topic, sp->partition);
        pr->revoke(pr->opaque, sp->topic, sp->partition);
        sp->ready = false;
        sp->retry_ms = sg_clock_mono_ms() + SG_STANDBY_RETRY_MS;
        sg_changelog_reader_destroy(sp->rd);
        sp->rd = NULL;
        loop->sby_reassign = true;
        if (sg_err_needs_operator(err)) {
                sp->refused = true;
                sby_log(loop, SG_LOG_WARNING, "standby_refused", sp, es);
        } else {
                sby_log(loop, SG_LOG_WARNING, "standby_failed", sp, es);
        }
}

/* The first catch-up of @p sp (a restore like any other: the store's
 * checkpoint, the changelog id checked, a full restore when the log no
 * longer holds the checkpoint): where the tail starts. */
static void sby_catch_up(sg_loop_t *loop, sg_standby_part_t *sp) {
        const sg_processor_t *pr = &loop->proc;
        char es[512] = "";
        int64_t lo = -1, hi = -1, from = -1;
        sg_err_t err = sby_assign(loop, sp, es, sizeof(es));
        if (err) {
                sby_failed(loop, sp, err, es, false);
                return;
        }
        err = sg_loop_restore_offsets(loop, sp->tc, sp->partition, &lo, &hi, es,
                                      sizeof(es));
        bool open = false;
        if (!err) {
                err = pr->restore_begin(pr->opaque, sp->topic, sp->partition,
                                        lo, hi, &from, es, sizeof(es));
                open = !err;
        }
        int64_t floor0 = -1;
        if (!err && pr->changelog_epoch_get)
                floor0 = pr->changelog_epoch_get(pr->opaque, sp->topic,
                                                 sp->partition);
        if (!err && pr->changelog_epoch_set)
                pr->changelog_epoch_set(pr->opaque, sp->topic, sp->partition,
                                        floor0);
        sg_changelog_id_t want;
        bool has_id = !err && pr->changelog_id_get && pr->changelog_id_set &&
                      pr->changelog_id_get(pr->opaque, sp->topic, sp->partition,
                                           &want);
        if (has_id)
                err = sg_loop_restore_id_check(loop, sp->topic, sp->partition,
                                               sp->tc, lo, &want, &has_id, es,
                                               sizeof(es));
        sg_changelog_reader_destroy(sp->rd);
        sp->rd = NULL;
        if (!err && sg_changelog_reader_new(floor0, &sp->rd)) {
                snprintf(es, sizeof(es), "out of memory");
                err = SG_ERR_NOMEM;
        }
        /* nothing applied yet: the checkpoint says where the tail starts
         * (a full restore's drop is committed with it) */
        if (!err)
                err = pr->restore_end(pr->opaque, sp->topic, sp->partition,
                                      from, es, sizeof(es));
        if (err) {
                sby_failed(loop, sp, err, es, open);
                return;
        }
        pr->revoke(pr->opaque, sp->topic, sp->partition);
        sp->lo = lo;
        sp->next = sp->applied = from;
        sp->floor = floor0;
        sp->has_id = has_id;
        sp->ready = true;
        loop->sby_reassign = true;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "topic", sp->topic);
        cJSON_AddNumberToObject(f, "partition", sp->partition);
        cJSON_AddStringToObject(f, "changelog", sp->tc->changelog_topic);
        cJSON_AddNumberToObject(f, "log_start", (double)lo);
        cJSON_AddNumberToObject(f, "from", (double)from);
        cJSON_AddNumberToObject(f, "high_watermark", (double)hi);
        sg_loop_log(loop, SG_LOG_INFO, "standby_tailing", f);
}

/* One drain turn of @p sp: its @p n fetched messages @p ms (records,
 * EOFs, errors, in offset order) applied through one restore
 * (restore_begin at its checkpoint … restore_end at the offset the
 * reader settled, sg_changelog_reader_settled). */
static void sby_apply(sg_loop_t *loop, sg_standby_part_t *sp,
                      rd_kafka_message_t **ms, size_t n) {
        const sg_processor_t *pr = &loop->proc;
        char es[512] = "";
        int64_t next = sp->next;
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                const rd_kafka_message_t *m = ms[i];
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        /* past the transaction markers read_committed
                         * skips: every record below was given */
                        if (m->offset > next)
                                next = m->offset;
                } else if (m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE ||
                           m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
                        /* the log no longer holds the checkpoint (its
                         * retention): caught up again, a full restore */
                        sby_failed(loop, sp, SG_ERR_KAFKA,
                                   rd_kafka_message_errstr(m), false);
                        return;
                } else if (!m->err && m->offset >= sp->next) {
                        any = true;
                }
        }
        int64_t settled0 = sg_changelog_reader_settled(sp->rd, next);
        if (!any && settled0 <= sp->applied) {
                sp->next = next;
                return; /* nothing to apply nor to checkpoint */
        }
        sg_err_t err = sby_assign(loop, sp, es, sizeof(es));
        if (err) {
                sby_failed(loop, sp, err, es, false);
                return;
        }
        int64_t from = -1, hi = next;
        int64_t wlo = -1, whi = -1;
        rd_kafka_get_watermark_offsets(loop->standby, sp->tc->changelog_topic,
                                       sp->partition, &wlo, &whi);
        if (whi > hi)
                hi = whi;
        err = pr->restore_begin(pr->opaque, sp->topic, sp->partition, sp->lo,
                                hi, &from, es, sizeof(es));
        bool open = !err;
        if (!err && from != sp->applied) {
                snprintf(es, sizeof(es),
                         "the store's checkpoint is at %" PRId64
                         ", the standby's at %" PRId64,
                         from, sp->applied);
                err = SG_ERR_INVALID;
        }
        if (!err && pr->changelog_epoch_set)
                pr->changelog_epoch_set(pr->opaque, sp->topic, sp->partition,
                                        sp->floor);
        uint64_t fed = 0;
        for (size_t i = 0; !err && i < n; i++) {
                const rd_kafka_message_t *m = ms[i];
                if (m->err || m->offset < sp->next)
                        continue; /* fed before a reassignment */
                err = sg_loop_restore_feed(loop, sp->topic, sp->partition,
                                           &sp->has_id, sp->rd, m, &sp->floor,
                                           es, sizeof(es));
                sp->next = m->offset + 1;
                fed++;
        }
        if (err) {
                sby_failed(loop, sp, err, es, open);
                return;
        }
        if (next > sp->next)
                sp->next = next;
        int64_t settled = sg_changelog_reader_settled(sp->rd, sp->next);
        err = pr->restore_end(pr->opaque, sp->topic, sp->partition, settled, es,
                              sizeof(es));
        if (err) {
                sby_failed(loop, sp, err, es, true);
                return;
        }
        pr->revoke(pr->opaque, sp->topic, sp->partition);
        sp->applied = settled;
        loop->stats.restored_records_total += fed;
}

/* One chunk of a drain turn: the @p n messages @p ms taken from the tail
 * consumer's queue, applied partition by partition (@p mine: room for
 * @p n), then destroyed. */
static void sby_drain_chunk(sg_loop_t *loop, rd_kafka_message_t **ms, ssize_t n,
                            rd_kafka_message_t **mine) {
        for (size_t i = 0; i < loop->sby_cnt; i++) {
                sg_standby_part_t *sp = &loop->sby[i];
                if (!sp->ready || sp->refused)
                        continue;
                size_t k = 0;
                for (ssize_t j = 0; j < n; j++) {
                        rd_kafka_message_t *m = ms[j];
                        if (m->rkt && m->partition == sp->partition &&
                            !strcmp(rd_kafka_topic_name(m->rkt),
                                    sp->tc->changelog_topic))
                                mine[k++] = m;
                }
                sby_apply(loop, sp, mine, k);
        }
        for (ssize_t j = 0; j < n; j++) {
                rd_kafka_message_t *m = ms[j];
                if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                    m->err != RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE &&
                    m->err != RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
                        cJSON *f = cJSON_CreateObject();
                        if (m->rkt)
                                cJSON_AddStringToObject(
                                        f, "changelog",
                                        rd_kafka_topic_name(m->rkt));
                        cJSON_AddNumberToObject(f, "partition", m->partition);
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2name(m->err));
                        cJSON_AddStringToObject(f, "message",
                                                rd_kafka_message_errstr(m));
                        sg_loop_log(loop, SG_LOG_WARNING,
                                    "standby_consume_error", f);
                }
                rd_kafka_message_destroy(m);
        }
}

/* Applies what the tail consumer fetched, SG_STANDBY_TURN_RECORDS messages
 * at a time, while the queue gives full chunks and for at most
 * SG_STANDBY_TURN_MAX_MS. @returns true if it stopped with records left
 * (a full last chunk): the standby is behind. */
static bool sby_drain(sg_loop_t *loop) {
        rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(loop->standby);
        if (!q)
                return false;
        rd_kafka_message_t **ms = malloc(SG_STANDBY_TURN_RECORDS * sizeof(*ms));
        rd_kafka_message_t **mine =
                malloc(SG_STANDBY_TURN_RECORDS * sizeof(*mine));
        int64_t t0 = sg_clock_mono_ms();
        bool full = false;
        while (ms && mine && !loop->stop) {
                ssize_t n = rd_kafka_consume_batch_queue(
                        q, 0, ms, SG_STANDBY_TURN_RECORDS);
                if (n <= 0) {
                        full = false;
                        break;
                }
                sby_drain_chunk(loop, ms, n, mine);
                full = n == SG_STANDBY_TURN_RECORDS;
                if (!full || sg_clock_mono_ms() - t0 >= SG_STANDBY_TURN_MAX_MS)
                        break;
        }
        rd_kafka_queue_destroy(q);
        free(ms);
        free(mine);
        return full;
}

void sg_loop_standby_turn(sg_loop_t *loop) {
        if (!loop->standby)
                return;
        pthread_mutex_lock(&loop->sby_mu);
        sg_sby_group_t *g = loop->sby_latest;
        loop->sby_latest = NULL;
        pthread_mutex_unlock(&loop->sby_mu);
        if (g) {
                sby_answer(loop, g);
                sby_group_free(g);
        }
        int64_t now = sg_clock_mono_ms();
        bool caught = false;
        for (size_t i = 0; i < loop->sby_cnt && !loop->stop; i++) {
                sg_standby_part_t *sp = &loop->sby[i];
                if (!sp->ready && !sp->refused && now >= sp->retry_ms) {
                        if (!caught)
                                sg_loop_checkpoint(loop, "standby");
                        caught = true;
                        sby_catch_up(loop, sp);
                }
        }
        if (loop->sby_reassign)
                sby_consumer_assign(loop);
        if (now < loop->sby_drain_ms || loop->stop)
                return;
        /* the batches since the last checkpoint are committed first: the
         * standby's restores are store transactions of their own */
        sg_loop_checkpoint(loop, "standby");
        bool behind = sby_drain(loop);
        int64_t every = loop->conf->checkpoint_interval_ms;
        if (every < SG_STANDBY_DRAIN_MIN_MS)
                every = SG_STANDBY_DRAIN_MIN_MS;
        if (behind)
                every = SG_STANDBY_BEHIND_MS;
        loop->sby_drain_ms = sg_clock_mono_ms() + every;
}

void sg_loop_standby_drop(sg_loop_t *loop,
                          const rd_kafka_topic_partition_list_t *parts) {
        if (!loop->standby)
                return;
        bool any = false;
        for (int i = 0; i < parts->cnt; i++) {
                for (size_t j = 0; j < loop->sby_cnt; j++) {
                        const sg_standby_part_t *sp = &loop->sby[j];
                        if (sp->partition == parts->elems[i].partition &&
                            !strcmp(sp->topic, parts->elems[i].topic)) {
                                sby_remove(loop, j, "assigned here");
                                any = true;
                                break;
                        }
                }
        }
        if (any)
                sby_consumer_assign(loop);
}

void sg_loop_standby_kick(sg_loop_t *loop) {
        atomic_store(&loop->sby_kick, true);
}

void sg_loop_standby_publish(sg_loop_t *loop, struct sg_metrics_snap *snap) {
        for (size_t i = 0; i < loop->sby_cnt; i++) {
                const sg_standby_part_t *sp = &loop->sby[i];
                if (sg_metrics_snap_reserve(snap, snap->part_cnt + 1))
                        return;
                sg_part_stats_t *o = &snap->parts[snap->part_cnt++];
                memset(o, 0, sizeof(*o));
                snprintf(o->topic, sizeof(o->topic), "%s", sp->topic);
                o->partition = sp->partition;
                o->standby = true;
#define SG_SBY_UNKNOWN(n, kind, prom, help) o->n = -1;
                SG_PART_METRICS(SG_SBY_UNKNOWN)
#undef SG_SBY_UNKNOWN
                o->restoring = 0;
                int64_t lo = -1, hi = -1;
                if (loop->standby && sp->ready)
                        rd_kafka_get_watermark_offsets(loop->standby,
                                                       sp->tc->changelog_topic,
                                                       sp->partition, &lo, &hi);
                if (sp->ready && hi >= 0)
                        o->standby_lag =
                                hi > sp->applied ? hi - sp->applied : 0;
        }
}

void sg_loop_standby_destroy(sg_loop_t *loop) {
        for (size_t i = 0; i < loop->sby_cnt; i++)
                sby_free(&loop->sby[i]);
        free(loop->sby);
        loop->sby = NULL;
        loop->sby_cnt = 0;
        if (loop->sby_th_started) {
                atomic_store(&loop->sby_quit, true);
                pthread_join(loop->sby_th, NULL);
                loop->sby_th_started = false;
                sby_group_free(loop->sby_latest);
                loop->sby_latest = NULL;
                pthread_mutex_destroy(&loop->sby_mu);
        }
        if (loop->standby) {
                rd_kafka_consumer_close(loop->standby);
                rd_kafka_destroy(loop->standby);
        }
        loop->standby = NULL;
}
