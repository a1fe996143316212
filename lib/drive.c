/*
 * drive.c — the engine driven offline (drive.h): the batch protocol of
 * processor.h run as the Kafka loop runs it (kafka_batch.c), without
 * Kafka.
 */
#include "drive.h"

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A partition assigned. */
typedef struct drv_part {
        char *topic;
        int32_t partition;
        int64_t paused_until; /* 0: not paused; else when kept records are
                                 offered again */
        bool paused_now;      /* paused in the attempt that runs */
} drv_part_t;

/* The next offset of a destination topic partition (delivered()). */
typedef struct drv_out {
        char *topic;
        int32_t partition;
        int64_t next;
} drv_out_t;

/* A record kept for a paused partition: a copy the driver owns. */
typedef struct drv_kept {
        sg_record_t rec;
        size_t part; /* index into parts */
} drv_kept_t;

/* A changelog record of the batch being committed: a copy, to restore
 * the batch from should its commit fail (what the loop reads back from
 * the changelog topic). */
typedef struct drv_cl {
        size_t part; /* index into parts */
        int64_t offset;
        void *key, *value; /* value NULL: a tombstone */
        size_t key_len, value_len;
} drv_cl_t;

/* The effects one step of an attempt added: [from, to). */
typedef struct drv_step {
        size_t origin; /* index into the offer, or SIZE_MAX: tick */
        size_t from, to;
} drv_step_t;

struct sg_drive {
        const sg_config_t *conf;
        sg_drive_hooks_t hooks;
        const char *group_id;
        char dir[256]; /* the temporary store's, or "" */
        sg_store_t *store;
        bool own_store;
        sg_engine_t *eng;
        sg_processor_t proc;
        bool failed;           /* a batch failed past its commit point */
        unsigned commit_grows; /* growths restoring the batch (restore_after) */
        drv_part_t *parts;
        size_t part_cnt;
        drv_out_t *outs;
        size_t out_cnt;
        drv_kept_t *kept;
        size_t kept_cnt;
        /* one batch's scratch */
        const sg_record_t **offer; /* the records offered, in order */
        size_t *offer_part;        /* their partition (SIZE_MAX: HTTP) */
        int *offer_kept;           /* index into kept, or -1: caller's */
        sg_process_result_t *results;
        size_t offer_cap;
        drv_step_t *steps;
        size_t step_cnt, step_cap;
        int64_t *offs;
        size_t offs_cap;
        drv_cl_t *cls; /* the batch's changelog records */
        size_t cl_cnt, cl_cap;
};

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(path);
}

sg_err_t sg_drive_new(const sg_config_t *conf, sg_store_t *store,
                      const char *tmp_prefix, const char *group_id,
                      const sg_drive_hooks_t *hooks, sg_drive_t **drivep,
                      char *errstr, size_t errstr_size) {
        sg_drive_t *d = calloc(1, sizeof(*d));
        if (!d)
                return SG_ERR_NOMEM;
        d->conf = conf;
        d->group_id = group_id ? group_id : "seqgate-drive";
        if (hooks)
                d->hooks = *hooks;
        sg_err_t err = SG_OK;
        if (!store) {
                const char *tmp = getenv("TMPDIR");
                snprintf(d->dir, sizeof(d->dir), "%s/%sXXXXXX",
                         tmp && *tmp ? tmp : "/tmp",
                         tmp_prefix ? tmp_prefix : "seqgate-drive.");
                if (!mkdtemp(d->dir)) {
                        sg_errf(errstr, errstr_size,
                                "temporary directory %s: %m", d->dir);
                        d->dir[0] = '\0';
                        sg_drive_destroy(d);
                        return SG_ERR_IO;
                }
                err = sg_store_open(d->dir, conf->map_size_bytes,
                                    conf->map_growth_bytes, &store, errstr,
                                    errstr_size);
                if (!err) {
                        d->own_store = true;
                        /* as the daemon does (cmd/seqgate run_store_
                         * durability); a system without a boot id keeps
                         * its syncs, which changes nothing decided */
                        char es[256];
                        (void)sg_engine_store_durability(conf, store, es,
                                                         sizeof(es));
                }
        }
        d->store = store;
        if (!err)
                err = sg_engine_new(conf, store, &d->eng, errstr, errstr_size);
        if (err) {
                sg_drive_destroy(d);
                return err;
        }
        sg_engine_processor(d->eng, &d->proc);
        *drivep = d;
        return SG_OK;
}

static void kept_free(drv_kept_t *k) {
        sg_record_t *r = &k->rec;
        for (size_t i = 0; i < r->header_cnt; i++) {
                free((void *)r->headers[i].name);
                free((void *)r->headers[i].value);
        }
        free((void *)r->headers);
        free((void *)r->key);
        free((void *)r->value);
}

void sg_drive_destroy(sg_drive_t *d) {
        if (!d)
                return;
        sg_engine_destroy(d->eng);
        if (d->own_store)
                sg_store_close(d->store);
        if (d->dir[0])
                (void)nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        for (size_t i = 0; i < d->part_cnt; i++)
                free(d->parts[i].topic);
        for (size_t i = 0; i < d->out_cnt; i++)
                free(d->outs[i].topic);
        for (size_t i = 0; i < d->kept_cnt; i++)
                kept_free(&d->kept[i]);
        free(d->parts);
        free(d->outs);
        free(d->kept);
        free(d->offer);
        free(d->offer_part);
        free(d->offer_kept);
        free(d->results);
        free(d->steps);
        free(d->offs);
        for (size_t i = 0; i < d->cl_cnt; i++) {
                free(d->cls[i].key);
                free(d->cls[i].value);
        }
        free(d->cls);
        free(d);
}

sg_engine_t *sg_drive_engine(sg_drive_t *d) {
        return d->eng;
}

sg_store_t *sg_drive_store(sg_drive_t *d) {
        return d->store;
}

size_t sg_drive_kept(const sg_drive_t *d) {
        return d->kept_cnt;
}

int64_t sg_drive_resume_ms(const sg_drive_t *d) {
        int64_t t = -1;
        for (size_t i = 0; i < d->kept_cnt; i++) {
                int64_t u = d->parts[d->kept[i].part].paused_until;
                if (t < 0 || u < t)
                        t = u;
        }
        return t;
}

static size_t part_find(const sg_drive_t *d, const char *topic,
                        int32_t partition) {
        for (size_t i = 0; i < d->part_cnt; i++)
                if (d->parts[i].partition == partition &&
                    !strcmp(d->parts[i].topic, topic))
                        return i;
        return SIZE_MAX;
}

/* The partition's index, assigned first when new; SIZE_MAX with *errp
 * set on an error. */
static size_t part_get(sg_drive_t *d, const char *topic, int32_t partition,
                       sg_err_t *errp, char *errstr, size_t errstr_size) {
        *errp = SG_OK;
        size_t i = part_find(d, topic, partition);
        if (i != SIZE_MAX)
                return i;
        int64_t off;
        sg_err_t err = d->proc.assign(d->proc.opaque, topic, partition,
                                      d->group_id, &off, errstr, errstr_size);
        if (err) {
                *errp = err;
                return SIZE_MAX;
        }
        drv_part_t *n = realloc(d->parts, (d->part_cnt + 1) * sizeof(*n));
        char *t = strdup(topic);
        if (n)
                d->parts = n;
        if (!n || !t) {
                free(t);
                sg_errf(errstr, errstr_size, "out of memory");
                *errp = SG_ERR_NOMEM;
                return SIZE_MAX;
        }
        d->parts[d->part_cnt] =
                (drv_part_t){.topic = t, .partition = partition};
        return d->part_cnt++;
}

sg_err_t sg_drive_assign(sg_drive_t *d, const char *topic, int32_t partition,
                         char *errstr, size_t errstr_size) {
        sg_err_t err;
        (void)part_get(d, topic, partition, &err, errstr, errstr_size);
        return err;
}

/* The offset the next record of @p topic [@p partition] lands at (a
 * producer's partitioner, -1, counts as partition 0). */
static int64_t out_next(sg_drive_t *d, const char *topic, int32_t partition) {
        if (partition < 0)
                partition = 0;
        for (size_t i = 0; i < d->out_cnt; i++)
                if (d->outs[i].partition == partition &&
                    !strcmp(d->outs[i].topic, topic))
                        return d->outs[i].next++;
        drv_out_t *n = realloc(d->outs, (d->out_cnt + 1) * sizeof(*n));
        char *t = strdup(topic ? topic : "");
        if (n)
                d->outs = n;
        if (!n || !t) {
                free(t);
                return 0;
        }
        d->outs[d->out_cnt++] = (drv_out_t){t, partition, 1};
        return 0;
}

/* The offset the next record of @p topic [@p partition] would land at. */
static int64_t out_peek(const sg_drive_t *d, const char *topic,
                        int32_t partition) {
        for (size_t i = 0; i < d->out_cnt; i++)
                if (d->outs[i].partition == partition &&
                    !strcmp(d->outs[i].topic, topic))
                        return d->outs[i].next;
        return 0;
}

static void *dup_bytes(const void *p, size_t n, bool *ok) {
        if (!p)
                return NULL;
        char *c = malloc(n + 1);
        if (!c) {
                *ok = false;
                return NULL;
        }
        memcpy(c, p, n);
        c[n] = '\0';
        return c;
}

/* A copy of @p rec (of partition @p part) into *@p k. */
static sg_err_t kept_copy(sg_drive_t *d, const sg_record_t *rec, size_t part,
                          drv_kept_t *k) {
        *k = (drv_kept_t){.rec = *rec, .part = part};
        bool ok = true;
        /* the topic stays the partition's (its name lives as long) */
        k->rec.topic = d->parts[part].topic;
        k->rec.key = dup_bytes(rec->key, rec->key_len, &ok);
        k->rec.value = dup_bytes(rec->value, rec->value_len, &ok);
        sg_header_t *h =
                rec->header_cnt ? calloc(rec->header_cnt, sizeof(*h)) : NULL;
        if (rec->header_cnt && !h)
                ok = false;
        for (size_t i = 0; h && i < rec->header_cnt; i++) {
                const sg_header_t *s = &rec->headers[i];
                h[i].name = dup_bytes(s->name, strlen(s->name), &ok);
                h[i].value = dup_bytes(s->value, s->value_len, &ok);
                h[i].value_len = s->value_len;
        }
        k->rec.headers = h;
        k->rec.header_cnt = h ? rec->header_cnt : 0;
        if (!ok) {
                kept_free(k);
                return SG_ERR_NOMEM;
        }
        return SG_OK;
}

/* Appends a copy of @p rec (of partition @p part) to the kept records. */
static sg_err_t kept_add(sg_drive_t *d, const sg_record_t *rec, size_t part) {
        drv_kept_t *n = realloc(d->kept, (d->kept_cnt + 1) * sizeof(*n));
        if (!n)
                return SG_ERR_NOMEM;
        d->kept = n;
        sg_err_t err = kept_copy(d, rec, part, &d->kept[d->kept_cnt]);
        if (!err)
                d->kept_cnt++;
        return err;
}

static void cl_clear(sg_drive_t *d) {
        for (size_t i = 0; i < d->cl_cnt; i++) {
                free(d->cls[i].key);
                free(d->cls[i].value);
        }
        d->cl_cnt = 0;
}

/* Copies the batch's changelog effects (@p efs [0, @p cnt), delivered at
 * d->offs) for a restore (restore_after). */
static sg_err_t cl_keep(sg_drive_t *d, const sg_effect_t *efs, size_t cnt) {
        cl_clear(d);
        for (size_t i = 0; i < cnt; i++) {
                const sg_effect_t *ef = &efs[i];
                if (ef->kind != SG_EFFECT_CHANGELOG)
                        continue;
                size_t pi = SIZE_MAX;
                for (size_t t = 0; t < d->conf->topic_cnt && pi == SIZE_MAX;
                     t++) {
                        const sg_topic_config_t *tc = &d->conf->topics[t];
                        if (tc->changelog_topic &&
                            !strcmp(tc->changelog_topic, ef->topic))
                                pi = part_find(d, tc->name, ef->partition);
                }
                if (pi == SIZE_MAX)
                        continue; /* not a partition of ours: never read */
                if (d->cl_cnt == d->cl_cap) {
                        size_t cap = d->cl_cap ? 2 * d->cl_cap : 64;
                        drv_cl_t *n = realloc(d->cls, cap * sizeof(*n));
                        if (!n)
                                return SG_ERR_NOMEM;
                        d->cls = n;
                        d->cl_cap = cap;
                }
                bool ok = true;
                drv_cl_t c = {.part = pi,
                              .offset = d->offs[i],
                              .key = dup_bytes(ef->key, ef->key_len, &ok),
                              .key_len = ef->key_len,
                              .value = dup_bytes(ef->value, ef->value_len, &ok),
                              .value_len = ef->value_len};
                if (!ok) {
                        free(c.key);
                        free(c.value);
                        return SG_ERR_NOMEM;
                }
                d->cls[d->cl_cnt++] = c;
        }
        return SG_OK;
}

/* Restores every partition behind() (its store lost the batch whose
 * commit failed) from the batch's changelog records, as the loop restores
 * it from the changelog topic (kafka_batch.c sg_loop_batch, "store behind
 * changelog"): delta from the store's checkpoint. */
static sg_err_t restore_behind(sg_drive_t *d, char *errstr,
                               size_t errstr_size) {
        const sg_processor_t *pr = &d->proc;
        sg_err_t err;
        for (size_t i = 0; pr->behind && i < d->part_cnt; i++) {
                const drv_part_t *p = &d->parts[i];
                if (!pr->behind(pr->opaque, p->topic, p->partition))
                        continue;
                const sg_topic_config_t *tc =
                        sg_config_topic(d->conf, p->topic);
                if (!tc || !tc->changelog_topic || !pr->restore_begin) {
                        sg_errf(errstr, errstr_size,
                                "store of %s [%" PRId32 "] lost a batch and "
                                "has no changelog to restore it from",
                                p->topic, p->partition);
                        return SG_ERR_INVALID;
                }
                int64_t end = out_peek(d, tc->changelog_topic, p->partition);
                int64_t from;
                if ((err = pr->restore_begin(pr->opaque, p->topic, p->partition,
                                             0, end, &from, errstr,
                                             errstr_size)))
                        return err;
                for (size_t k = 0; k < d->cl_cnt; k++) {
                        const drv_cl_t *c = &d->cls[k];
                        if (c->part != i || c->offset < from)
                                continue;
                        if ((err = pr->restore_apply(
                                     pr->opaque, p->topic, p->partition,
                                     c->offset, c->key, c->key_len, c->value,
                                     c->value_len, errstr, errstr_size)))
                                return err;
                }
                if ((err = pr->restore_end(pr->opaque, p->topic, p->partition,
                                           end, errstr, errstr_size)))
                        return err;
        }
        return SG_OK;
}

/* The batch's commit (or checkpoint) failed (@p err) once its effects
 * were reported: as the loop, abort, grow the store if it was full, and
 * restore what the store lost — the batch counts as committed.
 * @returns SG_OK, or the error that stopped the restore. */
static sg_err_t restore_after(sg_drive_t *d, sg_err_t err, char *errstr,
                              size_t errstr_size) {
        const sg_processor_t *pr = &d->proc;
        pr->batch_abort(pr->opaque);
        for (;;) {
                if (err == SG_ERR_MAP_FULL && pr->grow) {
                        char ges[400] = "";
                        if (pr->grow(pr->opaque, ges, sizeof(ges))) {
                                sg_errf(errstr, errstr_size,
                                        "growing the store: %s", ges);
                                return err;
                        }
                        d->commit_grows++;
                }
                err = restore_behind(d, errstr, errstr_size);
                if (err != SG_ERR_MAP_FULL)
                        return err;
        }
}

static bool scratch_reserve(sg_drive_t *d, size_t n) {
        if (n <= d->offer_cap)
                return true;
        size_t cap = d->offer_cap ? d->offer_cap : 16;
        while (cap < n)
                cap *= 2;
        const sg_record_t **o = realloc(d->offer, cap * sizeof(*o));
        if (o)
                d->offer = o;
        size_t *op = realloc(d->offer_part, cap * sizeof(*op));
        if (op)
                d->offer_part = op;
        int *ok = realloc(d->offer_kept, cap * sizeof(*ok));
        if (ok)
                d->offer_kept = ok;
        sg_process_result_t *r = realloc(d->results, cap * sizeof(*r));
        if (r)
                d->results = r;
        if (!o || !op || !ok || !r)
                return false;
        d->offer_cap = cap;
        return true;
}

static bool step_add(sg_drive_t *d, size_t origin, size_t from, size_t to) {
        if (to <= from)
                return true;
        if (d->step_cnt == d->step_cap) {
                size_t cap = d->step_cap ? 2 * d->step_cap : 16;
                drv_step_t *n = realloc(d->steps, cap * sizeof(*n));
                if (!n)
                        return false;
                d->steps = n;
                d->step_cap = cap;
        }
        d->steps[d->step_cnt++] = (drv_step_t){origin, from, to};
        return true;
}

/* One attempt, up to the commit point: batch_begin, process() of the
 * offered records [0, n) (Kafka records first, then HTTP results),
 * position(), tick(). The batch stays open on error. */
static sg_err_t attempt(sg_drive_t *d, size_t n, int64_t now, char *errstr,
                        size_t errstr_size) {
        const sg_processor_t *pr = &d->proc;
        const sg_effect_t *efs;
        sg_err_t err;
        d->step_cnt = 0;
        for (size_t i = 0; i < d->part_cnt; i++)
                d->parts[i].paused_now = false;
        sg_engine_set_clock(d->eng, now > 0 ? now : 1);
        if ((err = pr->batch_begin(pr->opaque, now, errstr, errstr_size)))
                return err;
        for (int http = 0; http < 2; http++) {
                for (size_t i = 0; i < n; i++) {
                        size_t pi = d->offer_part[i];
                        if ((pi == SIZE_MAX) != (http == 1))
                                continue;
                        d->results[i] = SG_PROCESSED;
                        if (pi != SIZE_MAX && d->parts[pi].paused_now) {
                                /* re-read after the pause */
                                d->results[i] = SG_PAUSE;
                                continue;
                        }
                        size_t before = pr->effects(pr->opaque, &efs);
                        sg_process_result_t res = SG_PROCESSED;
                        if ((err = pr->process(pr->opaque, d->offer[i], &res,
                                               errstr, errstr_size)))
                                return err;
                        /* HTTP results: no offset to pause at (kafka_batch.c
                         * loop_attempt_process) */
                        if (res == SG_PAUSE && pi != SIZE_MAX) {
                                d->parts[pi].paused_now = true;
                                d->results[i] = SG_PAUSE;
                        }
                        if (!step_add(d, i, before,
                                      pr->effects(pr->opaque, &efs)))
                                return SG_ERR_NOMEM;
                }
        }
        for (size_t i = 0; pr->position && i < d->part_cnt; i++) {
                drv_part_t *p = &d->parts[i];
                int64_t lag = 0;
                if (p->paused_now || p->paused_until > now)
                        lag = -1; /* paused: unknown, as the loop says */
                else if (d->hooks.lag)
                        lag = d->hooks.lag(d->hooks.opaque, p->topic,
                                           p->partition);
                pr->position(pr->opaque, p->topic, p->partition, lag);
        }
        size_t before = pr->effects(pr->opaque, &efs);
        if ((err = pr->tick(pr->opaque, errstr, errstr_size)))
                return err;
        if (!step_add(d, SIZE_MAX, before, pr->effects(pr->opaque, &efs)))
                return SG_ERR_NOMEM;
        return SG_OK;
}

/* Past the commit point: the effects to the caller, delivered(),
 * batch_commit and a checkpoint. */
static sg_err_t deliver_commit(sg_drive_t *d, char *errstr,
                               size_t errstr_size) {
        const sg_processor_t *pr = &d->proc;
        const sg_effect_t *efs;
        size_t cnt = pr->effects(pr->opaque, &efs);
        if (cnt > d->offs_cap) {
                int64_t *o = realloc(d->offs, cnt * sizeof(*o));
                if (!o)
                        return SG_ERR_NOMEM;
                d->offs = o;
                d->offs_cap = cnt;
        }
        for (size_t i = 0; i < cnt; i++)
                d->offs[i] =
                        efs[i].kind == SG_EFFECT_HTTP_GET
                                ? -1
                                : out_next(d, efs[i].topic, efs[i].partition);
        sg_err_t err;
        for (size_t s = 0; d->hooks.effects && s < d->step_cnt; s++) {
                const drv_step_t *st = &d->steps[s];
                if ((err = d->hooks.effects(
                             d->hooks.opaque,
                             st->origin == SIZE_MAX ? NULL
                                                    : d->offer[st->origin],
                             efs + st->from, d->offs + st->from,
                             st->to - st->from, errstr, errstr_size)))
                        return err;
        }
        if (pr->delivered)
                for (size_t i = 0; i < cnt; i++)
                        if (efs[i].kind != SG_EFFECT_HTTP_GET)
                                pr->delivered(pr->opaque, i, d->offs[i]);
        if ((err = cl_keep(d, efs, cnt))) {
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        /* every batch a checkpoint: nothing but the copies above holds
         * it (semantics §6 "Checkpoints") */
        err = pr->batch_commit(pr->opaque, errstr, errstr_size);
        if (!err && pr->checkpoint)
                err = pr->checkpoint(pr->opaque, errstr, errstr_size);
        if (err && (err = restore_after(d, err, errstr, errstr_size)))
                d->failed = true; /* the store lost a reported batch */
        cl_clear(d);
        return err;
}

/* Moves the batch's paused records [0, n) to the kept ones (kept records
 * offered and processed are freed), pauses their partitions. */
static sg_err_t keep_paused(sg_drive_t *d, size_t n, int64_t now) {
        int64_t retry =
                d->conf->pause_retry_ms > 0 ? d->conf->pause_retry_ms : 1;
        size_t w = 0, old_cnt = d->kept_cnt;
        drv_kept_t *old = d->kept;
        bool *offered = calloc(old_cnt + 1, sizeof(*offered));
        drv_kept_t *nk = calloc(old_cnt + n + 1, sizeof(*nk));
        if (!offered || !nk) {
                free(offered);
                free(nk);
                return SG_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (d->offer_kept[i] >= 0)
                        offered[d->offer_kept[i]] = true;
        /* the kept records not offered stay first, in order */
        for (size_t i = 0; i < old_cnt; i++)
                if (!offered[i])
                        nk[w++] = old[i];
        sg_err_t err = SG_OK;
        for (size_t i = 0; i < n; i++) {
                int k = d->offer_kept[i];
                if (d->results[i] != SG_PAUSE) {
                        if (k >= 0) /* processed at last */
                                kept_free(&old[k]);
                        continue;
                }
                if (k >= 0)
                        nk[w++] = old[k]; /* kept again */
                else if (!err && !(err = kept_copy(d, d->offer[i],
                                                   d->offer_part[i], &nk[w])))
                        w++;
        }
        free(old);
        free(offered);
        d->kept = nk;
        d->kept_cnt = w;
        for (size_t i = 0; i < d->part_cnt; i++) {
                drv_part_t *p = &d->parts[i];
                if (p->paused_now)
                        p->paused_until = now + retry;
                bool any = false; /* nothing kept: it reads on */
                for (size_t k = 0; k < d->kept_cnt && !any; k++)
                        any = d->kept[k].part == i;
                if (!any)
                        p->paused_until = 0;
        }
        return err;
}

/* One batch of the offered records [0, n) (set up by sg_drive_batch). */
static sg_err_t run(sg_drive_t *d, size_t n, int64_t now, char *errstr,
                    size_t errstr_size) {
        const sg_processor_t *pr = &d->proc;
        unsigned grows = 0;
        sg_err_t err;
        d->commit_grows = 0;
        for (;;) {
                err = attempt(d, n, now, errstr, errstr_size);
                if (err == SG_OK)
                        break;
                pr->batch_abort(pr->opaque);
                if (err != SG_ERR_MAP_FULL || !pr->grow)
                        return err;
                /* kafka_batch.c sg_loop_batch: grow, the same records
                 * again, as long as the store grows */
                char ges[400] = "";
                if (pr->grow(pr->opaque, ges, sizeof(ges))) {
                        sg_errf(errstr, errstr_size, "growing the store: %s",
                                ges);
                        return err;
                }
                grows++;
        }
        if ((err = deliver_commit(d, errstr, errstr_size))) {
                if (!d->failed)
                        pr->batch_abort(pr->opaque);
                return err;
        }
        if (d->hooks.committed) {
                sg_drive_batch_t b = {.now_ms = now,
                                      .recs = NULL,
                                      .results = d->results,
                                      .cnt = n,
                                      .grows = grows + d->commit_grows};
                /* the records as offered (kept copies are freed or
                 * moved after this call) */
                sg_record_t *rs = n ? malloc(n * sizeof(*rs)) : NULL;
                if (n && !rs) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        return SG_ERR_NOMEM;
                }
                for (size_t i = 0; i < n; i++)
                        rs[i] = *d->offer[i];
                b.recs = rs;
                d->hooks.committed(d->hooks.opaque, &b);
                free(rs);
        }
        if ((err = keep_paused(d, n, now))) {
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        return SG_OK;
}

sg_err_t sg_drive_batch(sg_drive_t *d, const sg_record_t *recs, size_t cnt,
                        int64_t now, char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (d->failed) {
                sg_errf(errstr, errstr_size,
                        "an earlier batch failed after its effects were "
                        "reported: the store lost it (no changelog offline)");
                return SG_ERR_INVALID;
        }
        /* kept records due: the loop ticked while their partition was
         * paused, then reads them again */
        bool due = false;
        for (size_t i = 0; i < d->kept_cnt && !due; i++)
                due = d->parts[d->kept[i].part].paused_until <= now;
        if (due) {
                if (!scratch_reserve(d, 1))
                        return SG_ERR_NOMEM;
                if ((err = run(d, 0, now, errstr, errstr_size)))
                        return err;
        }
        if (!scratch_reserve(d, d->kept_cnt + cnt + 1))
                return SG_ERR_NOMEM;
        size_t n = 0;
        for (size_t i = 0; i < d->kept_cnt; i++) {
                if (d->parts[d->kept[i].part].paused_until > now)
                        continue;
                d->offer[n] = &d->kept[i].rec;
                d->offer_part[n] = d->kept[i].part;
                d->offer_kept[n++] = (int)i;
        }
        size_t waiting = 0; /* the caller's records of a paused partition */
        for (size_t i = 0; i < cnt; i++) {
                size_t pi = SIZE_MAX;
                if (strcmp(recs[i].topic, SG_SNAPSHOT_HTTP_TOPIC)) {
                        pi = part_get(d, recs[i].topic, recs[i].partition, &err,
                                      errstr, errstr_size);
                        if (err)
                                return err;
                        if (d->parts[pi].paused_until > now) {
                                /* not fetched while paused: waits behind
                                 * the kept ones (copied after the batch) */
                                waiting++;
                                continue;
                        }
                }
                d->offer[n] = &recs[i];
                d->offer_part[n] = pi;
                d->offer_kept[n++] = -1;
        }
        if ((err = run(d, n, now, errstr, errstr_size)))
                return err;
        for (size_t i = 0; waiting && i < cnt; i++) {
                if (!strcmp(recs[i].topic, SG_SNAPSHOT_HTTP_TOPIC))
                        continue;
                size_t pi = part_find(d, recs[i].topic, recs[i].partition);
                bool offered = false;
                for (size_t k = 0; k < n && !offered; k++)
                        offered = d->offer[k] == &recs[i];
                if (offered)
                        continue;
                waiting--;
                if ((err = kept_add(d, &recs[i], pi))) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        return err;
                }
        }
        return SG_OK;
}
