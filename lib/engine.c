/*
 * engine.c — the decision engine (semantics §3, §3b, §4, §5): its
 * lifecycle, partitions, the processor wiring, the batch, tick and the
 * log. The other rooms are listed in engine_int.h.
 *
 * For each record, in the batch's one LMDB write transaction, the decision
 * table (engine_decide.c) runs its rows in order.
 * tick() fires gap deadlines (gap policies dlq / skip / hold) and sweeps
 * expired dedup records, both bounded per batch.
 *
 * Effects (output and DLQ records) are collected in order and handed to the
 * Kafka loop; the transaction is committed only in batch_commit(), which the
 * loop calls after Kafka has accepted every effect (§6). Counters are kept
 * in a batch-local delta until then, so an aborted batch counts nothing.
 *
 * Memory: effects point either into the input records (borrowed; the loop
 * keeps them alive for the batch) or into the batch arena (drained parked
 * events, generated headers), freed at batch end. Nothing grows with the
 * number of aggregates: all per-aggregate state lives in LMDB.
 */
#include "engine_int.h"

#include "envelope.h"
#include "json.h"

#include <cjson/cJSON.h>

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- batch arena ------------------------------------------------------- */

char *sg_arena_printf(arena_t *a, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return NULL;
        char *s = sg_arena_alloc(a, (size_t)n + 1);
        if (!s)
                return NULL;
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
        return s;
}

/* ---- engine ------------------------------------------------------------ */

int64_t sg_eng_clock(sg_engine_t *e) {
        if (e->clock_fixed)
                return e->clock_fixed;
        return e->base_wall + (sg_clock_mono_ms() - e->base_mono) +
               e->clock_skew;
}

/* Whether a line at @p level reaches the log callback: lines it would
 * drop are not built (sg_engine_set_log_level). */
static bool eng_log_enabled(const sg_engine_t *e, sg_log_level_t level) {
        return e->log_cb && (e->log_level == 0 || (int)level <= e->log_level);
}

void sg_eng_log(sg_engine_t *e, sg_log_level_t level, const char *event,
                const part_t *p, ...) {
        /* the budget is per batch; outside one (assign, restore) every
         * line is written */
        if (!eng_log_enabled(e, level) || (e->in_batch && e->log_budget <= 0))
                return;
        if (e->in_batch)
                e->log_budget--;
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return;
        if (p) {
                cJSON_AddStringToObject(o, "topic", p->topic);
                cJSON_AddNumberToObject(o, "partition", p->partition);
        }
        va_list ap;
        va_start(ap, p);
        const char *name;
        while ((name = va_arg(ap, const char *)) != NULL) {
                char num[24];
                switch (va_arg(ap, int)) {
                case LF_STR: {
                        const char *v = va_arg(ap, const char *);
                        cJSON_AddStringToObject(o, name, v ? v : "");
                        break;
                }
                case LF_STR_OR_NULL: {
                        const char *v = va_arg(ap, const char *);
                        if (v)
                                cJSON_AddStringToObject(o, name, v);
                        else
                                cJSON_AddNullToObject(o, name);
                        break;
                }
                case LF_BOOL:
                        cJSON_AddBoolToObject(o, name, va_arg(ap, int));
                        break;
                case LF_I64:
                        snprintf(num, sizeof(num), "%" PRId64,
                                 va_arg(ap, int64_t));
                        cJSON_AddRawToObject(o, name, num);
                        break;
                default:
                        snprintf(num, sizeof(num), "%" PRIu64,
                                 va_arg(ap, uint64_t));
                        cJSON_AddRawToObject(o, name, num);
                        break;
                }
        }
        va_end(ap);
        char *txt = cJSON_PrintUnformatted(o); /* one object (sg_log_cb) */
        cJSON_Delete(o);
        if (!txt)
                return;
        e->log_cb(e->log_opaque, level, event, txt);
        cJSON_free(txt);
}

void sg_engine_set_log(sg_engine_t *e, sg_log_cb *cb, void *opaque) {
        e->log_cb = cb;
        e->log_opaque = opaque;
}

void sg_engine_set_log_level(sg_engine_t *e, sg_log_level_t level) {
        e->log_level = (int)level;
}

void sg_engine_set_clock(sg_engine_t *e, int64_t now_ms) {
        e->clock_fixed = now_ms;
}

const sg_metrics_t *sg_engine_metrics(const sg_engine_t *e) {
        return &e->metrics;
}

const sg_metrics_t *sg_engine_topic_metrics(const sg_engine_t *e, size_t i,
                                            const char **topicp) {
        if (i >= e->conf->topic_cnt)
                return NULL;
        if (topicp)
                *topicp = e->conf->topics[i].name;
        return &e->topic_m[i].metrics;
}

/* After a committed batch: one "dlq_summary" line per input topic whose
 * DLQ records grew since its last one, at most once per stats_interval_ms
 * (docs/operating.md "Logs"; the per-record "dlq" line is at debug): the
 * records by reason since that line. */
static void dlq_summary(sg_engine_t *e) {
        int64_t every = e->conf->stats_interval_ms;
        if (!eng_log_enabled(e, SG_LOG_INFO) || every <= 0)
                return;
        for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                topic_metrics_t *t = &e->topic_m[i];
                if (t->dlq_logged_at && e->now - t->dlq_logged_at < every)
                        continue;
                uint64_t total = 0;
                for (int r = 1; r < SG_R__CNT; r++)
                        total += t->metrics.dlq_total[r] - t->dlq_logged[r];
                if (!total)
                        continue;
                cJSON *o = cJSON_CreateObject();
                cJSON *by = cJSON_CreateObject();
                char num[24];
                for (int r = 1; o && by && r < SG_R__CNT; r++) {
                        uint64_t n = t->metrics.dlq_total[r] - t->dlq_logged[r];
                        if (!n)
                                continue;
                        snprintf(num, sizeof(num), "%" PRIu64, n);
                        cJSON_AddRawToObject(by, sg_reason_name((sg_reason_t)r),
                                             num);
                }
                cJSON_AddStringToObject(o, "topic", e->conf->topics[i].name);
                cJSON_AddStringToObject(o, "dlq_topic",
                                        e->conf->topics[i].dlq_topic);
                snprintf(num, sizeof(num), "%" PRIu64, total);
                cJSON_AddRawToObject(o, "records", num);
                cJSON_AddItemToObject(o, "reasons", by);
                snprintf(num, sizeof(num), "%" PRId64,
                         t->dlq_logged_at ? e->now - t->dlq_logged_at : 0);
                cJSON_AddRawToObject(o, "since_ms", num);
                char *txt = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                if (txt)
                        e->log_cb(e->log_opaque, SG_LOG_INFO, "dlq_summary",
                                  txt);
                cJSON_free(txt);
                memcpy(t->dlq_logged, t->metrics.dlq_total,
                       sizeof(t->dlq_logged));
                t->dlq_logged_at = e->now;
        }
}

bool sg_engine_part_gauges(const sg_engine_t *e, const char *topic,
                           int32_t partition, sg_part_stats_t *out) {
        part_t *p = sg_eng_part_find((sg_engine_t *)e, topic, partition);
        if (!p)
                return false;
        out->parked_events = (int64_t)p->meta.parked_cnt;
        out->parked_bytes = (int64_t)p->meta.parked_bytes;
        out->quarantined_aggregates = (int64_t)p->meta.quarantined;
        out->oldest_parked_age_ms =
                p->oldest_since && e->gauges_at > p->oldest_since
                        ? e->gauges_at - p->oldest_since
                        : 0;
        return true;
}

sg_err_t sg_engine_store_durability(const sg_config_t *conf, sg_store_t *store,
                                    char *errstr, size_t errstr_size) {
        /* Both guarantees write every state change to the changelog before
         * LMDB commits (exactly_once: in the transaction; at_least_once: its
         * markers acknowledged first), and the input offsets follow LMDB:
         * the changelog is the durable copy (semantics §6). */
        (void)conf;
        return sg_store_defer_sync(store, errstr, errstr_size);
}

sg_err_t sg_engine_new(const sg_config_t *conf, sg_store_t *store,
                       sg_engine_t **enginep, char *errstr,
                       size_t errstr_size) {
        (void)errstr; /* the config's limits are checked when it is parsed */
        (void)errstr_size;
        sg_engine_t *e = calloc(1, sizeof(*e));
        if (!e)
                return SG_ERR_NOMEM;
        e->limits = calloc(conf->topic_cnt ? conf->topic_cnt : 1,
                           sizeof(*e->limits));
        e->topic_m = calloc(conf->topic_cnt ? conf->topic_cnt : 1,
                            sizeof(*e->topic_m));
        if (!e->limits || !e->topic_m) {
                free(e->limits);
                free(e->topic_m);
                free(e);
                return SG_ERR_NOMEM;
        }
        e->conf = conf;
        e->store = store;
        /* a rolling upgrade's first step writes format 2's changelog
         * (store.h sg_store_set_changelog_format) */
        sg_store_set_changelog_format(
                store, conf->store_upgrade_from == 2 ? 2 : SG_STORE_FORMAT);
        e->base_wall = sg_clock_wall_ms();
        e->base_mono = sg_clock_mono_ms();
        sg_envelope_init(&e->env);
        *enginep = e;
        return SG_OK;
}

void sg_engine_destroy(sg_engine_t *e) {
        if (!e)
                return;
        /* what no checkpoint committed is dropped, as a kill drops it */
        sg_txn_abort(e->txn);
        sg_txn_abort(e->rtxn);
        sg_store_batch_destroy(e->rbatch);
        sg_arena_free(&e->arena);
        free(e->effects);
        free(e->effect_src);
        free(e->limits);
        free(e->topic_m);
        free(e->refusals);
        free(e->effect_part);
        sg_envelope_clear(&e->env);
        sg_eng_copart_free(e);
        for (size_t i = 0; i < e->part_cnt; i++)
                free(e->parts[i].topic);
        free(e->parts);
        free(e);
}

/* ---- partitions -------------------------------------------------------- */

part_t *sg_eng_part_find(sg_engine_t *e, const char *topic, int32_t partition) {
        if (e->last_part && e->last_part->partition == partition &&
            strcmp(e->last_part->topic, topic) == 0)
                return e->last_part;
        for (size_t i = 0; i < e->part_cnt; i++) {
                if (e->parts[i].partition == partition &&
                    strcmp(e->parts[i].topic, topic) == 0)
                        return e->last_part = &e->parts[i];
        }
        return NULL;
}

static part_t *part_add(sg_engine_t *e, const char *topic, int32_t partition,
                        const sg_topic_config_t *tc) {
        part_t *np = realloc(e->parts, (e->part_cnt + 1) * sizeof(*np));
        if (!np)
                return NULL;
        e->parts = np;
        part_t *p = &e->parts[e->part_cnt];
        memset(p, 0, sizeof(*p));
        p->topic = strdup(topic);
        if (!p->topic)
                return NULL;
        p->partition = partition;
        p->tc = tc;
        sg_tp_make(&p->tp, topic, partition);
        p->meta.input_offset = -1;
        p->meta.changelog_offset = -1;
        p->meta.changelog_epoch = -1;
        p->work = p->meta;
        p->cl_last = -1;
        p->cl_epoch = -1;
        e->part_cnt++;
        e->last_part = NULL;
        return p;
}

/* Keeps the engine clock at or above a clock persisted in a store. */
void sg_eng_clock_floor(sg_engine_t *e, int64_t persisted) {
        int64_t now = sg_eng_clock(e);
        if (!e->clock_fixed && persisted > now)
                e->clock_skew += persisted - now;
}

static sg_err_t eng_assign(void *opaque, const char *topic, int32_t partition,
                           const char *group, int64_t *offsetp, char *errstr,
                           size_t errstr_size) {
        sg_engine_t *e = opaque;
        if (sg_eng_reply_topic_of(e, topic)) {
                /* a snapshot reply topic: no store of its own; its offsets
                 * are the group's */
                *offsetp = -1;
                return SG_OK;
        }
        const sg_topic_config_t *tc = sg_config_topic(e->conf, topic);
        if (!tc) {
                sg_errf(errstr, errstr_size,
                        "partition %s [%d] assigned but topic not configured",
                        topic, partition);
                return SG_ERR_CONFIG;
        }
        /* assign's own write transaction: the checkpoint's first */
        sg_err_t err = sg_eng_checkpoint(e, errstr, errstr_size);
        if (err)
                return err;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p && !(p = part_add(e, topic, partition, tc)))
                return SG_ERR_NOMEM;
        sg_txn_t *txn;
        err = sg_txn_begin(e->store, true, &txn, errstr, errstr_size);
        if (err)
                return err;
        sg_meta_rec_t m;
        err = sg_meta_get(txn, &p->tp, &m);
        if (err == SG_ERR_NOT_FOUND) {
                /* new to this store: the partition's meta is created */
                memset(&m, 0, sizeof(m));
                snprintf(m.group, sizeof(m.group), "%s", group ? group : "");
                m.input_offset = -1;
                m.changelog_offset = -1;
                m.changelog_epoch = -1;
                m.clock_ms = sg_eng_clock(e);
                bool changed;
                (void)sg_eng_fp_check(e, p, &m, &changed, errstr, errstr_size);
                err = sg_meta_put(txn, &p->tp, &m, errstr, errstr_size);
                if (err) {
                        sg_txn_abort(txn);
                        return err;
                }
                /* commit ends the transaction, also when it fails */
                if ((err = sg_txn_commit(txn, errstr, errstr_size)))
                        return err;
        } else if (err) {
                sg_txn_abort(txn);
                sg_errf(errstr, errstr_size,
                        "store of %s [%d]: cannot read partition meta", topic,
                        partition);
                return err;
        } else {
                bool changed = false;
                err = sg_eng_fp_check(e, p, &m, &changed, errstr, errstr_size);
                if (!err && changed) {
                        err = sg_meta_put(txn, &p->tp, &m, errstr, errstr_size);
                        if (!err) {
                                err = sg_txn_commit(txn, errstr, errstr_size);
                                txn = NULL;
                        }
                }
                sg_txn_abort(txn);
                if (err)
                        return err;
                if (group && m.group[0] && strcmp(m.group, group) != 0) {
                        sg_errf(errstr, errstr_size,
                                "store of %s [%d] belongs to consumer group "
                                "\"%s\", not \"%s\": refusing to process it "
                                "(drop the data_dir to rebuild it from this "
                                "group's changelog)",
                                topic, partition, m.group, group);
                        return SG_ERR_FOREIGN;
                }
        }
        p->meta = m;
        p->work = m;
        sg_eng_clock_floor(e, m.clock_ms);
        *offsetp = m.input_offset;
        return SG_OK;
}

static void eng_revoke(void *opaque, const char *topic, int32_t partition) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p)
                return;
        /* the partition's batches since the last checkpoint are made
         * durable before it goes (the loop checkpoints first and answers a
         * failure: the partitions left behind are restored) */
        (void)sg_eng_checkpoint(e, NULL, 0);
        sg_eng_refusals_drop_partition(e, p->tc->name, partition);
        free(p->topic);
        size_t i = (size_t)(p - e->parts);
        memmove(&e->parts[i], &e->parts[i + 1],
                (e->part_cnt - i - 1) * sizeof(*p));
        e->part_cnt--;
        e->last_part = NULL;
}

/* The time a partition's gap deadlines are measured against (semantics §4
 * "Which clock"). A gap never times out while its fill may be waiting
 * unread in the partition: read to the end of its log, processing time;
 * behind it (a backlog, or a lag not known), the newest record timestamp
 * read, so that neither seqgate's downtime nor its backlog is charged to
 * the producers. A partition blocked by its own back-pressure (a record
 * paused at a park cap) reads nothing more until one of its gaps resolves,
 * so nothing it waits for can arrive meanwhile: from where its horizon
 * stood when it blocked, the horizon runs on with processing time (never
 * past it). Without that, a gap that fills the cap would hold the
 * partition for good: its newest record read never moves. */
static int64_t part_horizon(const sg_engine_t *e, const part_t *p) {
        int64_t horizon = e->now;
        if (p->behind && p->read_ts < horizon)
                horizon = p->read_ts;
        if (p->blocked_at && e->now > p->blocked_at) {
                int64_t ran = p->blocked_horizon + (e->now - p->blocked_at);
                if (ran > horizon)
                        horizon = ran < e->now ? ran : e->now;
        }
        return horizon;
}

static sg_err_t process_record(void *opaque, const sg_record_t *rec,
                               sg_process_result_t *result, char *errstr,
                               size_t errstr_size) {
        sg_engine_t *e = opaque;
        /* processor.h: records are processed inside a batch */
        assert(e->in_batch && "process outside a batch");
        *result = SG_PROCESSED;
        part_t *p = sg_eng_part_find(e, rec->topic, rec->partition);
        if (!p && sg_eng_is_snapshot_reply(e, rec->topic)) {
                /* reply topics (and the HTTP pseudo topic) have no store
                 * partition of their own: only checked off the hot path */
                sg_err_t err = sg_eng_snap_reply(e, rec, errstr, errstr_size);
                e->dk_valid = false;
                return err;
        }
        if (!p) {
                /* the loop assigns (and, exactly_once, restores) a partition
                 * before giving its records; assigning here would begin a
                 * second write transaction inside the batch's */
                sg_errf(errstr, errstr_size,
                        "record of %s [%d], a partition not assigned",
                        rec->topic, rec->partition);
                return SG_ERR_INVALID;
        }
        if (p->cl_behind) {
                /* processor.h behind: restored before its records */
                sg_errf(errstr, errstr_size,
                        "store of %s [%d] is behind its changelog (a "
                        "checkpoint interval was lost): restore it before "
                        "its records",
                        rec->topic, rec->partition);
                return SG_ERR_INVALID;
        }
        sg_err_t err = sg_eng_judge(e, p, rec, result, errstr, errstr_size);
        e->dk_valid = false; /* the cache is only for this record */
        if (err)
                return err;
        p->touched = true;
        if (rec->timestamp_ms > p->read_ts)
                p->read_ts = rec->timestamp_ms;
        if (*result == SG_PROCESSED) {
                p->work.input_offset = rec->offset + 1;
                p->blocked_at = 0;
        } else if (!p->blocked_at) {
                /* paused at a cap: it reads nothing past this record until
                 * a gap resolves (semantics §4 "Which clock") */
                p->blocked_horizon = part_horizon(e, p);
                p->blocked_at = e->now;
        }
        return SG_OK;
}

static void eng_position(void *opaque, const char *topic, int32_t partition,
                         int64_t lag) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (p)
                p->behind = lag != 0;
}

static sg_err_t tick_part(sg_engine_t *e, part_t *p, int *budget, char *errstr,
                          size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        if (p->cl_behind) /* nothing is decided on a store behind */
                return SG_OK;
        if (snap_enabled(p) &&
            (err = sg_eng_snap_tick(e, p, budget, errstr, errstr_size)))
                return err;
        int64_t horizon = part_horizon(e, p);
        if (tc->order_mode == SG_ORDER_STRICT &&
            (tc->gap_policy != SG_GAP_HOLD || snap_enabled(p))) {
                while (*budget > 0) {
                        agg_ctx_t a;
                        int64_t since;
                        err = sg_since_first(e->txn, &p->tp,
                                             horizon - tc->gap_timeout_ms,
                                             a.hash, &since);
                        if (err == SG_ERR_NOT_FOUND)
                                break;
                        if (err)
                                return err;
                        err = sg_agg_get(e->txn, &p->tp, a.hash, &a.rec);
                        if (err == SG_ERR_NOT_FOUND)
                                memset(&a.rec, 0, sizeof(a.rec));
                        else if (err)
                                return err;
                        a.exists = true;
                        if (sg_agg_indexed_since(&a.rec) != since ||
                            a.rec.parked_cnt == 0) {
                                /* index entry out of step with the aggregate:
                                 * repair it (agg_save moves the entry) */
                                a.old_since = since;
                                if (a.rec.parked_cnt == 0)
                                        a.rec.parked_since_ms = 0;
                                if ((err = sg_eng_agg_save(e, p, &a, errstr,
                                                           errstr_size)))
                                        return err;
                                (*budget)--;
                                continue;
                        }
                        a.old_since = since;
                        if (snap_enabled(p)) {
                                /* refetch first; the policy applies when
                                 * refetch gives up (§4) */
                                if ((err = sg_eng_snap_start(e, p, &a, errstr,
                                                             errstr_size)))
                                        return err;
                                if ((err = sg_eng_agg_save(e, p, &a, errstr,
                                                           errstr_size)))
                                        return err;
                        } else if ((err = sg_eng_gap_fire(e, p, &a, errstr,
                                                          errstr_size))) {
                                return err;
                        }
                        (*budget)--;
                }
        }
        int removed = 0;
        if ((err = sg_dedup_sweep(e->txn, &p->tp, e->now, tc->dedup_ttl_ms,
                                  e->conf->sweep_max_per_batch, &removed,
                                  errstr, errstr_size)))
                return err;
        if (removed) {
                pdelta(e, p)->dedup_expired_total += (uint64_t)removed;
                p->touched = true;
        }
        return SG_OK;
}

/* The last step of a batch's decisions (end of tick): each touched
 * partition's meta, then the changelog effects of every store key the
 * batch changed (sg_eng_changelog_effects). */
static sg_err_t batch_finish(sg_engine_t *e, char *errstr, size_t errstr_size) {
        sg_err_t err;
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                if (!p->touched)
                        continue;
                p->work.clock_ms = e->now;
                if ((err = sg_meta_put(e->txn, &p->tp, &p->work, errstr,
                                       errstr_size)))
                        return err;
        }
        /* the batch's aggregates reach LMDB now if the map's room might
         * not take them at the checkpoint's commit, while the batch can
         * be aborted: a full map fails it here (the loop aborts it, grows
         * the map, runs it again), not the commit after Kafka took its
         * output; otherwise at the commit, once per checkpoint (semantics
         * §8 "The aggregate cache") */
        if ((err = sg_txn_settle(e->txn, errstr, errstr_size)))
                return err;
        return sg_eng_changelog_effects(e);
}

/* The age gauges' walk over the aggregates waiting for a snapshot. */
typedef struct age_walk {
        sg_engine_t *e;
        const sg_tp_t *tp;
        int64_t stale; /* older than this: stuck (metrics.stuck_threshold_ms) */
        int64_t oldest; /* oldest parked_at seen, 0 none */
        uint64_t stuck;
} age_walk_t;

static int age_visit(void *opaque, const unsigned char agg_hash[32],
                     const sg_snapreq_rec_t *r) {
        age_walk_t *w = opaque;
        sg_agg_rec_t a;
        int64_t since = 0;
        if (sg_agg_get(w->e->txn, w->tp, agg_hash, &a) == SG_OK &&
            a.parked_cnt > 0)
                since = a.parked_since_ms;
        if (since && (!w->oldest || since < w->oldest))
                w->oldest = since;
        w->stuck += (since && since < w->stale) || r->issued_at_ms < w->stale;
        return w->stuck >= 100000; /* the same cap as the index count */
}

static sg_err_t tick_all(void *opaque, char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        int budget = e->conf->deadline_max_per_batch;
        for (size_t i = 0; i < e->part_cnt; i++) {
                sg_err_t err = tick_part(e, &e->parts[i], &budget, errstr,
                                         errstr_size);
                if (err)
                        return err;
        }
        /* Sampled gauges, at most once a second (semantics §7: parked or
         * refetching), per input topic: the gap deadline index, plus the
         * aggregates waiting for a snapshot, which are out of that index. */
        if (e->now - e->gauges_at >= 1000) {
                int64_t stale = e->now - e->conf->metrics_stuck_threshold_ms;
                for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                        e->topic_m[i].delta.oldest_parked_age_ms = 0;
                        e->topic_m[i].delta.stuck_parked = 0;
                }
                for (size_t i = 0; i < e->part_cnt; i++) {
                        part_t *p = &e->parts[i];
                        age_walk_t w = {.e = e, .stale = stale};
                        unsigned char h[32];
                        int64_t since;
                        uint64_t n;
                        if (sg_since_first(e->txn, &p->tp, INT64_MAX, h,
                                           &since) == SG_OK)
                                w.oldest = since;
                        if (sg_since_count(e->txn, &p->tp, w.stale, 100000,
                                           &n) == SG_OK)
                                w.stuck += n;
                        if (snap_enabled(p)) {
                                w.tp = &p->tp;
                                (void)sg_snapreq_foreach(e->txn, w.tp,
                                                         age_visit, &w);
                        }
                        p->oldest_since = w.oldest; /* for /metrics */
                        sg_metrics_t *d = pdelta(e, p);
                        int64_t age = w.oldest ? e->now - w.oldest : 0;
                        if (age > d->oldest_parked_age_ms)
                                d->oldest_parked_age_ms = age;
                        d->stuck_parked += (int64_t)w.stuck;
                }
                e->gauges_at = e->now;
        } else {
                for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                        topic_metrics_t *t = &e->topic_m[i];
                        t->delta.oldest_parked_age_ms =
                                t->metrics.oldest_parked_age_ms;
                        t->delta.stuck_parked = t->metrics.stuck_parked;
                }
        }
        return batch_finish(e, errstr, errstr_size);
}

/* The store's reads report their cause through the transaction
 * (sg_txn_errdetail), not an errstr: a store error that reaches the loop
 * carries that cause, so the fatal line says why. */
static sg_err_t with_store_detail(const sg_engine_t *e, sg_err_t err,
                                  char *errstr, size_t errstr_size) {
        if ((err == SG_ERR_STORE || err == SG_ERR_MAP_FULL) && errstr &&
            errstr_size && !errstr[0] && e->txn) {
                const char *d = sg_txn_errdetail(e->txn);
                if (d[0])
                        sg_errf(errstr, errstr_size, "%s", d);
        }
        return err;
}

static sg_err_t eng_process(void *opaque, const sg_record_t *rec,
                            sg_process_result_t *result, char *errstr,
                            size_t errstr_size) {
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return with_store_detail(
                opaque,
                process_record(opaque, rec, result, errstr, errstr_size),
                errstr, errstr_size);
}

static sg_err_t eng_tick(void *opaque, char *errstr, size_t errstr_size) {
        if (errstr && errstr_size)
                errstr[0] = '\0';
        return with_store_detail(opaque, tick_all(opaque, errstr, errstr_size),
                                 errstr, errstr_size);
}

/* ---- batch and checkpoint ------------------------------------------------
 *
 * Checkpoints (semantics §6): a batch's decisions are in Kafka (the
 * changelog) before the store holds them, so the store need not commit
 * each batch. One LMDB write transaction stays open across batches and is
 * committed at a checkpoint: store.checkpoint_interval_ms of processing
 * time after it began (0: every batch), CHECKPOINT_WRITES writes, low map
 * room (sg_txn_room_low), page copies that would use half the map's room
 * (sg_txn_copied_much: the file's growth stays within the headroom), a
 * batch that changed nothing (the loop caught up: another process reading
 * the store sees what Kafka holds), and whenever the engine needs a
 * transaction of its own (assign, revoke, restore) or is told (processor.h
 * checkpoint: a revoke, a clean stop). Within one transaction LMDB copies a page once and
 * then updates it in place, so a page many batches touch is written once
 * per checkpoint instead of once per batch.
 * The partition meta committed at the checkpoint holds the changelog offset
 * up to which its last batch wrote (batch_commit), so what an uncommitted
 * transaction held is found again by a delta restore from there: after a
 * kill, at the next assignment; after a batch whose Kafka side failed (its
 * abort takes the whole transaction: LMDB has no nested transactions with
 * the write-through map) or a failed checkpoint, before the next batch —
 * the engine marks those partitions behind (processor.h behind) and
 * refuses their records until a restore brought them back. Change capture
 * is per batch (sg_txn_capture_reset at each batch_begin). */

/* The writes (puts and deletes, indexes included) after which a
 * checkpoint is due whatever the time: bounds the changelog tail a lost
 * transaction costs to restore, and the transaction's dirty pages. */
#define CHECKPOINT_WRITES 1000000

static void batch_reset(sg_engine_t *e) {
        e->dk_valid = false;
        e->log_budget = SG_ENGINE_LOG_PER_BATCH;
        sg_arena_reset(&e->arena);
        e->effect_cnt = 0;
        for (size_t i = 0; i < e->conf->topic_cnt; i++)
                memset(&e->topic_m[i].delta, 0, sizeof(e->topic_m[i].delta));
        for (size_t i = 0; i < e->part_cnt; i++) {
                e->parts[i].work = e->parts[i].meta;
                e->parts[i].touched = false;
                e->parts[i].cl_last = -1;
        }
}

/* The checkpoint's transaction ended without its commit (an abort, a
 * failed commit): the partitions that had state in it are behind their
 * changelog until restored. */
static void cp_lost(sg_engine_t *e) {
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                if (p->cp_dirty)
                        p->cl_behind = true;
                p->cp_dirty = false;
        }
        e->cp_batches = 0;
}

/* Drops the open transaction (and the batch in it): cp_lost. */
static void txn_drop(sg_engine_t *e) {
        sg_txn_abort(e->txn);
        e->txn = NULL;
        e->in_batch = false;
        cp_lost(e);
}

sg_err_t sg_eng_checkpoint(sg_engine_t *e, char *errstr, size_t errstr_size) {
        if (!e->txn)
                return SG_OK;
        if (e->in_batch) {
                sg_errf(errstr, errstr_size, "checkpoint with a batch open");
                return SG_ERR_INVALID;
        }
        if (!sg_txn_writes(e->txn)) { /* idle batches: nothing to keep */
                sg_txn_abort(e->txn);
                e->txn = NULL;
                e->cp_batches = 0;
                return SG_OK;
        }
        int64_t t0 = sg_clock_mono_ms();
        sg_err_t err = sg_txn_commit(e->txn, errstr, errstr_size);
        e->txn = NULL;
        if (err) {
                cp_lost(e);
                return err;
        }
        for (size_t i = 0; i < e->part_cnt; i++)
                e->parts[i].cp_dirty = false;
        e->cp_batches = 0;
        sg_store_writeback(e->store);
        e->cp_total++;
        sg_hist_observe(&e->cp_hist, sg_clock_mono_ms() - t0);
        e->metrics.checkpoints_total = e->cp_total;
        e->metrics.checkpoint_ms = e->cp_hist;
        return SG_OK;
}

/* Whether the open transaction's checkpoint is due after a batch; @p idle:
 * the batch changed nothing (no record, no deadline, nothing to produce):
 * the loop has caught up, and a checkpoint now lets another process
 * (seqgatectl) see what Kafka holds without waiting for the interval. */
static bool cp_due(const sg_engine_t *e, bool idle) {
        int64_t every = e->conf->checkpoint_interval_ms;
        return every <= 0 || idle || e->now - e->cp_began >= every ||
               sg_txn_writes(e->txn) >= CHECKPOINT_WRITES ||
               sg_txn_room_low(e->txn, 0) || sg_txn_copied_much(e->txn);
}

static sg_err_t eng_batch_begin(void *opaque, int64_t now_ms, char *errstr,
                                size_t errstr_size) {
        sg_engine_t *e = opaque;
        (void)now_ms;    /* the engine keeps its own processing clock */
        if (e->in_batch) /* processor.h: never two batches at once */
                txn_drop(e);
        batch_reset(e);
        e->now = sg_eng_clock(e);
        if (!e->txn) {
                sg_err_t err = sg_txn_begin(e->store, true, &e->txn, errstr,
                                            errstr_size);
                if (err)
                        return err;
                e->cp_began = e->now;
                e->cp_batches = 0;
        } else {
                sg_txn_capture_reset(e->txn);
        }
        sg_txn_capture(e->txn, true);
        e->in_batch = true;
        return SG_OK;
}

static size_t eng_effects(void *opaque, const sg_effect_t **effectsp) {
        sg_engine_t *e = opaque;
        *effectsp = e->effects;
        return e->effect_cnt;
}

static sg_err_t eng_batch_commit(void *opaque, char *errstr,
                                 size_t errstr_size) {
        sg_engine_t *e = opaque;
        sg_err_t err;
        /* processor.h: batch_commit only after a batch_begin that succeeded
         * (and no batch_abort since) */
        assert(e->in_batch && "batch_commit without an open batch");
        if (!e->in_batch) {
                sg_errf(errstr, errstr_size, "no batch open");
                return SG_ERR_INVALID;
        }
        /* Kafka holds the batch now: the partitions it wrote have state in
         * the transaction (lost with it, restored from their changelog) */
        for (size_t i = 0; i < e->part_cnt; i++)
                if (e->parts[i].touched || e->parts[i].cl_last >= 0)
                        e->parts[i].cp_dirty = true;
        for (size_t i = 0; i < e->effect_cnt && i < e->effect_part_size; i++)
                if (e->effects[i].kind == SG_EFFECT_CHANGELOG)
                        e->effect_part[i]->cp_dirty = true;
        /* the store now reflects the changelog up to the batch's last
         * record (the partition meta the checkpoint commits, not itself
         * logged) */
        sg_txn_capture(e->txn, false);
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                if (p->cl_last < 0)
                        continue;
                p->work.changelog_offset = p->cl_last + 1;
                if ((err = sg_meta_put(e->txn, &p->tp, &p->work, errstr,
                                       errstr_size))) {
                        txn_drop(e);
                        batch_reset(e);
                        return err;
                }
        }
        e->in_batch = false;
        e->cp_batches++;
        bool idle = e->effect_cnt == 0;
        for (size_t i = 0; i < e->part_cnt && idle; i++)
                idle = !e->parts[i].touched;
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                sg_metrics_t *d = pdelta(e, p);
                p->meta = p->work;
                d->parked_events += (int64_t)p->meta.parked_cnt;
                d->parked_bytes += (int64_t)p->meta.parked_bytes;
                d->quarantined_aggregates += (int64_t)p->meta.quarantined;
                d->snapshot_in_flight += (int64_t)p->meta.snap_in_flight;
        }
        memset(&e->metrics, 0, sizeof(e->metrics));
        for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                topic_metrics_t *t = &e->topic_m[i];
                t->delta.stuck_threshold_ms =
                        e->conf->metrics_stuck_threshold_ms;
                sg_metrics_add(&t->metrics, &t->delta);
                sg_metrics_sum(&e->metrics, &t->metrics);
        }
        e->metrics.checkpoints_total = e->cp_total;
        e->metrics.checkpoint_ms = e->cp_hist;
        dlq_summary(e);
        sg_eng_refusals_settle(e, true);
        batch_reset(e);
        return cp_due(e, idle) ? sg_eng_checkpoint(e, errstr, errstr_size)
                               : SG_OK;
}

static void eng_batch_abort(void *opaque) {
        sg_engine_t *e = opaque;
        if (e->txn)
                txn_drop(e);
        sg_eng_refusals_settle(e, false);
        batch_reset(e);
}

static sg_err_t eng_checkpoint(void *opaque, char *errstr, size_t errstr_size) {
        return sg_eng_checkpoint(opaque, errstr, errstr_size);
}

static bool eng_behind(void *opaque, const char *topic, int32_t partition) {
        part_t *p = sg_eng_part_find(opaque, topic, partition);
        return p && p->cl_behind;
}

sg_err_t sg_engine_checkpoint(sg_engine_t *e, char *errstr,
                              size_t errstr_size) {
        return sg_eng_checkpoint(e, errstr, errstr_size);
}

sg_err_t sg_engine_view(sg_engine_t *e, sg_txn_t **txnp, bool *ownedp,
                        char *errstr, size_t errstr_size) {
        if (e->in_batch) {
                sg_errf(errstr, errstr_size, "a batch is open");
                return SG_ERR_INVALID;
        }
        *ownedp = !e->txn;
        if (e->txn) {
                *txnp = e->txn;
                return SG_OK;
        }
        return sg_txn_begin(e->store, false, txnp, errstr, errstr_size);
}

static sg_err_t eng_grow(void *opaque, char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        sg_err_t err = sg_eng_checkpoint(e, errstr, errstr_size);
        return err ? err : sg_store_grow(e->store, errstr, errstr_size);
}

void sg_engine_processor(sg_engine_t *e, sg_processor_t *proc) {
        memset(proc, 0, sizeof(*proc));
        proc->opaque = e;
        proc->batch_begin = eng_batch_begin;
        proc->process = eng_process;
        proc->tick = eng_tick;
        proc->effects = eng_effects;
        proc->batch_commit = eng_batch_commit;
        proc->batch_abort = eng_batch_abort;
        proc->grow = eng_grow;
        proc->checkpoint = eng_checkpoint;
        proc->behind = eng_behind;
        proc->assign = eng_assign;
        proc->revoke = eng_revoke;
        proc->position = eng_position;
        proc->delivered = sg_eng_delivered;
        proc->size_limit = sg_eng_size_limit;
        proc->refused = sg_eng_refused;
        proc->restore_begin = sg_eng_restore_begin;
        proc->restore_apply = sg_eng_restore_apply;
        proc->restore_end = sg_eng_restore_end;
        proc->restore_abort = sg_eng_restore_abort;
        proc->changelog_epoch_get = sg_eng_changelog_epoch_get;
        proc->changelog_epoch_set = sg_eng_changelog_epoch_set;
        proc->changelog_id_get = sg_eng_changelog_id_get;
        proc->changelog_id_set = sg_eng_changelog_id_set;
        proc->changelog_value = sg_eng_changelog_value;
}
