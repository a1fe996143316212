/*
 * audit_drive.c — how seqgatectl audit drives the engine (engine.h), and
 * what it observes.
 *
 * Driving. The records come from audit.c in record timestamp order across
 * the topic's partitions (offset order within each). They are cut into
 * batches as the Kafka loop cuts them (kafka_batch.c): at most
 * batch.max_records records, and no record more than batch.max_ms after
 * the batch's first. Each batch runs through the offline driver (drive.h),
 * which runs the batch protocol of processor.h as the loop runs it: a
 * partition paused at a cap (SG_PAUSE) keeps that record and its later ones
 * and reads them again pause_retry_ms later; a full map is grown and the
 * batch run again for as long as the store grows; the temporary store is
 * sized by store.map_size_bytes and map_growth_bytes. Nothing is produced:
 * the effects are only looked at, each counts as delivered.
 *
 * The engine's clock is the records' own time: before each batch it is set
 * (sg_engine_set_clock) to the largest record timestamp of the batch (never
 * going back), so dedup TTLs and gap deadlines (semantics §4) pass as they
 * would have passed live. When the next record is more than batch.max_ms
 * after the clock, an empty batch first ticks at that record's timestamp
 * less 1 ms — the live loop ticks while the partition is silent, so a gap
 * deadline that passed in the silence fires before the record that would
 * have come too late. Every partition reports a lag of 0 (read as a live
 * consumer that keeps up reads), a paused one -1 (unknown), as the loop
 * does.
 *
 * Refetch is unavailable: the topic's snapshot source is turned off
 * (au_drive_open), so a gap deadline goes straight to the gap policy (dlq:
 * the aggregate is quarantined and later records of it are dead-lettered
 * aggregate_quarantined).
 *
 * Observation. The engine is not changed for the audit; what is measured
 * comes from (1) the engine's committed metrics after each batch (the
 * counters, and per hour the deltas of records, dedup hits and gaps),
 * (2) the effects of each process() and tick() call: an output or DLQ
 * record whose source (__seqgate.source, __seqgate.errors.partition and
 * .offset) is not the record just processed is a parked record released —
 * in process() by the record that filled its gap, in tick() by the gap
 * deadline (DLQ gap_timeout, or gap_policy skip) — and the time from the
 * oldest parked record's timestamp to the fill record's timestamp (or the
 * deadline's batch clock) is one gap's duration; every DLQ record counts a
 * refusal for its aggregate; and (3) our own bounded bookkeeping of the
 * input: per idempotency key its first record timestamp and payload
 * digest (a repeat with the same digest: one first-seen → repeat delay),
 * per aggregate the highest version that arrived and when (an event below
 * it: one reorder distance, in versions and milliseconds), and the
 * partitions its records came from (more than one: the co-partitioning
 * rule of semantics §2 broken, the report's first finding). The key and
 * aggregate tables are capped (--max-keys, --max-aggregates); past a cap a
 * new key or aggregate is not tracked and the report says so.
 */
#include "audit.h"

#include "cli.h"
#include "envelope.h"

#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AU_GROUP "seqgatectl-audit"

/* ------------------------------------------------------------------ */
/* samples                                                             */

static void au_sample(au_samples_t *s, int64_t v) {
        if (s->cnt == s->cap) {
                size_t nc = s->cap ? s->cap * 2 : 256;
                if (nc > AU_MAX_SAMPLES)
                        nc = AU_MAX_SAMPLES;
                int64_t *nv =
                        nc > s->cap ? realloc(s->v, nc * sizeof(*nv)) : NULL;
                if (!nv) {
                        s->cap_hit = true;
                        return;
                }
                s->v = nv;
                s->cap = nc;
        }
        s->v[s->cnt++] = v;
}

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

int64_t au_quantile(au_samples_t *s, double q) {
        if (!s->cnt)
                return 0;
        qsort(s->v, s->cnt, sizeof(*s->v), cmp_i64);
        /* nearest rank: the smallest value with at least q of the samples
         * at or below it */
        double r = q * (double)s->cnt;
        size_t k = (size_t)r;
        if ((double)k < r)
                k++;
        if (k == 0)
                k = 1;
        if (k > s->cnt)
                k = s->cnt;
        return s->v[k - 1];
}

/* ------------------------------------------------------------------ */
/* bounded hash tables                                                 */

static uint64_t hash8(const unsigned char *h) {
        uint64_t v;
        memcpy(&v, h, sizeof(v));
        return v ? v : 1; /* 0 marks a free slot */
}

/* Open addressing, linear probing, at most half full. *slotsp doubles
 * when needed; returns the slot index of @p h (free or found), or
 * SIZE_MAX when out of memory. */
#define AU_TABLE_FIND(name, type)                                              \
        static size_t name(type **tabp, size_t *slotsp, size_t cnt,            \
                           uint64_t h) {                                       \
                if ((cnt + 1) * 2 > *slotsp) {                                 \
                        size_t ns = *slotsp ? *slotsp * 2 : 1024;              \
                        type *nt = calloc(ns, sizeof(*nt));                    \
                        if (!nt)                                               \
                                return SIZE_MAX;                               \
                        for (size_t i = 0; i < *slotsp; i++) {                 \
                                if (!(*tabp)[i].hash)                          \
                                        continue;                              \
                                size_t j = (*tabp)[i].hash & (ns - 1);         \
                                while (nt[j].hash)                             \
                                        j = (j + 1) & (ns - 1);                \
                                nt[j] = (*tabp)[i];                            \
                        }                                                      \
                        free(*tabp);                                           \
                        *tabp = nt;                                            \
                        *slotsp = ns;                                          \
                }                                                              \
                size_t j = h & (*slotsp - 1);                                  \
                while ((*tabp)[j].hash && (*tabp)[j].hash != h)                \
                        j = (j + 1) & (*slotsp - 1);                           \
                return j;                                                      \
        }
AU_TABLE_FIND(agg_find, au_agg_t)
AU_TABLE_FIND(key_find, au_key_t)

/* The aggregate's entry, created when absent and under the cap; NULL
 * when not tracked. */
static au_agg_t *agg_get(au_drive_t *d, const char *name, size_t len) {
        unsigned char h[SG_HASH_LEN];
        sg_sha256(name, len, h);
        uint64_t k = hash8(h);
        size_t j = agg_find(&d->aggs, &d->agg_slots, d->agg_cnt, k);
        if (j == SIZE_MAX)
                return NULL;
        au_agg_t *a = &d->aggs[j];
        if (a->hash)
                return a;
        if (d->agg_cnt >= d->max_aggs) {
                d->aggs_cap_hit = true;
                return NULL;
        }
        size_t nl = len > 256 ? 256 : len;
        a->name = malloc(nl + 1);
        if (!a->name)
                return NULL;
        memcpy(a->name, name, nl);
        a->name[nl] = '\0';
        a->hash = k;
        d->agg_cnt++;
        return a;
}

/* ------------------------------------------------------------------ */
/* the input: our own bookkeeping (3)                                  */

static const sg_header_t *hdr(const sg_header_t *h, size_t n,
                              const char *name) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(h[i].name, name))
                        return &h[i];
        return NULL;
}

/* Copies a header value into @p buf as text; false when absent. */
static bool hdr_text(const sg_header_t *h, size_t n, const char *name,
                     char *buf, size_t size) {
        const sg_header_t *x = hdr(h, n, name);
        if (!x || !x->value)
                return false;
        size_t l = x->value_len < size - 1 ? x->value_len : size - 1;
        memcpy(buf, x->value, l);
        buf[l] = '\0';
        return true;
}

/* Semantics §2 co-partitioning: one more record of @p a from partition
 * @p p. */
static void agg_partition(au_drive_t *d, au_agg_t *a, int32_t p) {
        if (!a->part_cnt) {
                a->parts[a->part_cnt++] = p;
                return;
        }
        if (p != a->parts[0])
                a->elsewhere++;
        for (size_t i = 0; i < a->part_cnt; i++)
                if (a->parts[i] == p)
                        return;
        if (a->part_cnt == 1 && !a->parts_more)
                d->spanning++;
        if (a->part_cnt < AU_AGG_PARTS)
                a->parts[a->part_cnt++] = p;
        else
                a->parts_more = true;
}

static void observe_input(au_drive_t *d, const sg_record_t *rec) {
        sg_envelope_t env;
        char es[256];
        sg_envelope_init(&env);
        if (sg_envelope_parse(d->tc, rec, &env, es, sizeof(es)) != SG_OK) {
                sg_envelope_clear(&env); /* malformed: the engine counts it */
                return;
        }
        int64_t ts = rec->timestamp_ms;
        uint64_t kh = hash8(env.key_hash), dg = hash8(env.digest);
        size_t j = key_find(&d->keys, &d->key_slots, d->key_cnt, kh);
        bool first = true;
        if (j != SIZE_MAX && d->keys[j].hash) {
                first = false;
                if (d->keys[j].digest == dg)
                        au_sample(&d->dup_delay_ms,
                                  ts > d->keys[j].first_ts
                                          ? ts - d->keys[j].first_ts
                                          : 0);
        } else if (j != SIZE_MAX && d->key_cnt < d->max_keys) {
                d->keys[j] = (au_key_t){kh, dg, ts};
                d->key_cnt++;
        } else if (j != SIZE_MAX) {
                d->keys_cap_hit = true;
        }
        /* every record of an aggregate, copies included: on which
         * partitions it is (semantics §2 co-partitioning) */
        au_agg_t *a = env.aggregate
                              ? agg_get(d, env.aggregate, env.aggregate_len)
                              : NULL;
        if (a)
                agg_partition(d, a, rec->partition);
        if (first && env.has_version && a) {
                if (a->max_version && env.version < a->max_version) {
                        au_sample(&d->reorder_versions,
                                  (int64_t)(a->max_version - env.version));
                        au_sample(&d->reorder_ms,
                                  ts > a->max_ts ? ts - a->max_ts : 0);
                } else if (env.version > a->max_version) {
                        a->max_version = env.version;
                        a->max_ts = ts;
                }
        }
        sg_envelope_clear(&env);
}

/* ------------------------------------------------------------------ */
/* the engine's effects (2), staged until the batch committed          */

typedef struct au_stage {
        char agg[257];
        bool refusal;   /* a DLQ record of agg */
        bool gap;       /* a gap of agg ended: */
        bool timeout;   /*   by its deadline (else filled) */
        int64_t oldest; /* the oldest released parked record's timestamp */
} au_stage_t;

static au_stage_t *g_stage;
static size_t g_stage_cnt, g_stage_cap;

static au_stage_t *stage_add(void) {
        if (g_stage_cnt == g_stage_cap) {
                size_t nc = g_stage_cap ? g_stage_cap * 2 : 64;
                au_stage_t *n = realloc(g_stage, nc * sizeof(*n));
                if (!n)
                        return NULL;
                g_stage = n;
                g_stage_cap = nc;
        }
        au_stage_t *s = &g_stage[g_stage_cnt++];
        memset(s, 0, sizeof(*s));
        return s;
}

/* The gap entry of @p agg among the call's stage entries from @p from. */
static au_stage_t *stage_gap(size_t from, const char *agg, bool timeout) {
        for (size_t i = from; i < g_stage_cnt; i++)
                if (g_stage[i].gap && !strcmp(g_stage[i].agg, agg))
                        return &g_stage[i];
        au_stage_t *s = stage_add();
        if (s) {
                snprintf(s->agg, sizeof(s->agg), "%s", agg);
                s->gap = true;
                s->timeout = timeout;
                s->oldest = INT64_MAX;
        }
        return s;
}

/* The aggregate of an output effect: its envelope read as the input
 * record it is (its own headers, then seqgate's). */
static bool effect_agg(au_drive_t *d, const sg_effect_t *ef, char *buf,
                       size_t size) {
        size_t n = ef->header_cnt + ef->extra_cnt;
        sg_header_t *h = malloc((n ? n : 1) * sizeof(*h));
        if (!h)
                return false;
        if (ef->header_cnt)
                memcpy(h, ef->headers, ef->header_cnt * sizeof(*h));
        if (ef->extra_cnt)
                memcpy(h + ef->header_cnt, ef->extra,
                       ef->extra_cnt * sizeof(*h));
        sg_record_t r = {.topic = d->tc->name,
                         .partition = ef->partition,
                         .timestamp_ms = ef->timestamp_ms,
                         .key = ef->key,
                         .key_len = ef->key_len,
                         .value = ef->value,
                         .value_len = ef->value_len,
                         .headers = h,
                         .header_cnt = n};
        sg_envelope_t env;
        char es[256];
        sg_envelope_init(&env);
        bool ok = sg_envelope_parse(d->tc, &r, &env, es, sizeof(es)) == SG_OK &&
                  env.aggregate;
        if (ok)
                snprintf(buf, size, "%.*s", (int)env.aggregate_len,
                         env.aggregate);
        sg_envelope_clear(&env);
        free(h);
        return ok;
}

/* Looks at effects [from, to) of one process() call (@p rec, its
 * aggregate @p rec_agg) or of tick() (@p rec NULL). */
static void observe_effects(au_drive_t *d, const sg_effect_t *efs, size_t from,
                            size_t to, const sg_record_t *rec,
                            const char *rec_agg) {
        size_t stage0 = g_stage_cnt;
        for (size_t i = from; i < to; i++) {
                const sg_effect_t *ef = &efs[i];
                if (ef->kind != SG_EFFECT_OUTPUT && ef->kind != SG_EFFECT_DLQ)
                        continue;
                char part[32] = "", off[32] = "", agg[257] = "",
                     reason[64] = "", tsbuf[32] = "";
                int64_t sp = -1, so = -1;
                /* the input record's timestamp: an output record carries
                 * it; a DLQ record's own is when it was dead-lettered, the
                 * input's is its __seqgate.errors.timestamp header */
                int64_t in_ts = ef->timestamp_ms;
                if (ef->kind == SG_EFFECT_DLQ) {
                        in_ts = -1;
                        if (hdr_text(ef->extra, ef->extra_cnt,
                                     SG_DLQ_H_TIMESTAMP, tsbuf, sizeof(tsbuf)))
                                parse_i64(tsbuf, -1, INT64_MAX, &in_ts);
                        if (!hdr_text(ef->extra, ef->extra_cnt, SG_DLQ_H_REASON,
                                      reason, sizeof(reason)))
                                continue;
                        hdr_text(ef->extra, ef->extra_cnt, SG_DLQ_H_PARTITION,
                                 part, sizeof(part));
                        hdr_text(ef->extra, ef->extra_cnt, SG_DLQ_H_OFFSET, off,
                                 sizeof(off));
                        hdr_text(ef->extra, ef->extra_cnt, SG_DLQ_H_AGGREGATE,
                                 agg, sizeof(agg));
                        parse_i64(part, -1, INT32_MAX, &sp);
                        parse_i64(off, -1, INT64_MAX, &so);
                        if (agg[0]) {
                                au_stage_t *s = stage_add();
                                if (s) {
                                        snprintf(s->agg, sizeof(s->agg), "%s",
                                                 agg);
                                        s->refusal = true;
                                }
                        }
                } else {
                        char src[600];
                        if (!hdr_text(ef->extra, ef->extra_cnt, SG_H_SOURCE,
                                      src, sizeof(src)))
                                continue; /* a snapshot record, not an event */
                        char *o = strrchr(src, '/');
                        if (!o)
                                continue;
                        *o = '\0';
                        char *p = strrchr(src, '/');
                        if (!p)
                                continue;
                        parse_i64(o + 1, -1, INT64_MAX, &so);
                        parse_i64(p + 1, -1, INT32_MAX, &sp);
                }
                if (rec && sp == rec->partition && so == rec->offset)
                        continue; /* the record itself */
                /* a parked record released */
                bool timeout = !rec;
                if (ef->kind == SG_EFFECT_DLQ && strcmp(reason, "gap_timeout"))
                        continue; /* not a release (a refusal of its own) */
                if (rec && rec_agg)
                        snprintf(agg, sizeof(agg), "%s", rec_agg);
                else if (!agg[0] && !effect_agg(d, ef, agg, sizeof(agg)))
                        continue;
                au_stage_t *g = stage_gap(stage0, agg, timeout);
                if (g && in_ts > 0 && in_ts < g->oldest)
                        g->oldest = in_ts;
        }
        int64_t now = rec ? rec->timestamp_ms : d->clock;
        for (size_t i = stage0; i < g_stage_cnt; i++)
                if (g_stage[i].gap)
                        g_stage[i].oldest =
                                g_stage[i].oldest == INT64_MAX ||
                                                now < g_stage[i].oldest
                                        ? 0
                                        : now - g_stage[i].oldest;
}

/* Applies the staged observations of a committed batch. */
static void stage_apply(au_drive_t *d) {
        for (size_t i = 0; i < g_stage_cnt; i++) {
                au_stage_t *s = &g_stage[i];
                au_agg_t *a = agg_get(d, s->agg, strlen(s->agg));
                if (s->refusal && a)
                        a->refusals++;
                if (s->gap) {
                        if (a)
                                a->gaps++;
                        au_sample(s->timeout ? &d->gap_timeout_ms : &d->gap_ms,
                                  s->oldest);
                }
        }
        g_stage_cnt = 0;
}

/* ------------------------------------------------------------------ */
/* batches                                                             */

/* The driver's hooks: the effects of one step (observed, staged), and
 * a committed batch (the staged observations applied, the hour counted). */
static void rec_agg(au_drive_t *d, const sg_record_t *rec, char *buf,
                    size_t size);
static void hour_count(au_drive_t *d, int64_t now);

static sg_err_t on_effects(void *opaque, const sg_record_t *origin,
                           const sg_effect_t *efs, const int64_t *offsets,
                           size_t cnt, char *errstr, size_t errstr_size) {
        au_drive_t *d = opaque;
        (void)offsets;
        (void)errstr;
        (void)errstr_size;
        char agg[257] = "";
        if (origin)
                rec_agg(d, origin, agg, sizeof(agg));
        observe_effects(d, efs, 0, cnt, origin, agg[0] ? agg : NULL);
        return SG_OK;
}

static void on_committed(void *opaque, const sg_drive_batch_t *b) {
        au_drive_t *d = opaque;
        stage_apply(d);
        hour_count(d, b->now_ms);
        for (size_t i = 0; i < b->cnt; i++)
                d->pauses += b->results[i] == SG_PAUSE;
}

int au_drive_open(au_drive_t *d, sg_config_t *conf, sg_topic_config_t *tc,
                  const au_part_t *parts, size_t part_cnt, size_t max_aggs,
                  size_t max_keys) {
        char es[512];
        d->conf = conf;
        d->tc = tc;
        d->max_aggs = max_aggs;
        d->max_keys = max_keys;
        d->first_ts = INT64_MAX;
        d->last_ts = INT64_MIN;
        d->batch_first_ts = -1;
        tc->snapshot.source = SG_SNAP_NONE; /* refetch unavailable */
        const sg_drive_hooks_t hooks = {
                .opaque = d, .effects = on_effects, .committed = on_committed};
        if (sg_drive_new(conf, NULL, "seqgatectl-audit-", AU_GROUP, &hooks,
                         &d->drv, es, sizeof(es))) {
                errf("temporary store: %s", es);
                return EXIT_RUNTIME;
        }
        d->eng = sg_drive_engine(d->drv);
        d->store = sg_drive_store(d->drv);
        for (size_t i = 0; i < part_cnt; i++) {
                if (sg_drive_assign(d->drv, tc->name, parts[i].partition, es,
                                    sizeof(es))) {
                        errf("engine: assign %s [%" PRId32 "]: %s", tc->name,
                             parts[i].partition, es);
                        return EXIT_RUNTIME;
                }
        }
        return 0;
}

/* The record of message @p m, its headers appended to @p hdrs from
 * *nhp (the caller made room: rd_kafka_header_cnt of them). */
static void msg_record(rd_kafka_message_t *m, sg_record_t *r, sg_header_t *hdrs,
                       size_t *nhp) {
        rd_kafka_headers_t *h = NULL;
        *r = (sg_record_t){.topic = rd_kafka_topic_name(m->rkt),
                           .partition = m->partition,
                           .offset = m->offset,
                           .timestamp_ms = rd_kafka_message_timestamp(m, NULL),
                           .key = m->key,
                           .key_len = m->key_len,
                           .value = m->payload,
                           .value_len = m->len,
                           .headers = hdrs + *nhp};
        if (!rd_kafka_message_headers(m, &h)) {
                const char *name;
                const void *val;
                size_t vs;
                for (size_t k = 0;
                     !rd_kafka_header_get_all(h, k, &name, &val, &vs); k++) {
                        hdrs[(*nhp)++] = (sg_header_t){name, val, val ? vs : 0};
                        r->header_cnt++;
                }
        }
}

/* Room for @p n headers in d->hdrs. */
static bool hdr_reserve(au_drive_t *d, size_t n) {
        if (n <= d->hdr_cap)
                return true;
        sg_header_t *hs = realloc(d->hdrs, n * sizeof(*hs));
        if (!hs)
                return false;
        d->hdrs = hs;
        d->hdr_cap = n;
        return true;
}

static size_t msg_hdr_cnt(rd_kafka_message_t *m) {
        rd_kafka_headers_t *h = NULL;
        return rd_kafka_message_headers(m, &h) ? 0 : rd_kafka_header_cnt(h);
}

/* Builds the batch's records (header arrays included) from its messages. */
static int batch_prepare(au_drive_t *d) {
        size_t nh = 0;
        for (size_t i = 0; i < d->msg_cnt; i++)
                nh += msg_hdr_cnt(d->msgs[i]);
        if (!hdr_reserve(d, nh))
                return EXIT_RUNTIME;
        nh = 0;
        for (size_t i = 0; i < d->msg_cnt; i++)
                msg_record(d->msgs[i], &d->recs[i], d->hdrs, &nh);
        return 0;
}

/* The aggregate of @p rec as the engine reads it, into @p buf ("" none). */
static void rec_agg(au_drive_t *d, const sg_record_t *rec, char *buf,
                    size_t size) {
        sg_envelope_t env;
        char es[256];
        buf[0] = '\0';
        sg_envelope_init(&env);
        if (sg_envelope_parse(d->tc, rec, &env, es, sizeof(es)) == SG_OK &&
            env.aggregate)
                snprintf(buf, size, "%.*s", (int)env.aggregate_len,
                         env.aggregate);
        sg_envelope_clear(&env);
}

/* Counts the committed batch's metric deltas in the hour of its clock
 * @p now. */
static void hour_count(au_drive_t *d, int64_t now) {
        const sg_metrics_t *m = sg_engine_metrics(d->eng);
        uint64_t recs = m->records_total - d->last.records_total;
        uint64_t dups = m->dedup_hits_total - d->last.dedup_hits_total;
        uint64_t gaps = m->event_sequence_gaps_total -
                        d->last.event_sequence_gaps_total;
        d->last = *m;
        if (!recs && !dups && !gaps)
                return;
        if (d->hour_cnt == 0)
                d->hour0 = d->first_ts / 3600000;
        int64_t hi = now / 3600000 - d->hour0;
        if (hi < 0)
                hi = 0;
        if ((size_t)hi >= AU_MAX_HOURS) {
                d->hours_dropped += recs;
                return;
        }
        if ((size_t)hi >= d->hour_cnt) {
                au_hour_t *n = realloc(d->hours, ((size_t)hi + 1) * sizeof(*n));
                if (!n)
                        return;
                memset(n + d->hour_cnt, 0,
                       ((size_t)hi + 1 - d->hour_cnt) * sizeof(*n));
                d->hours = n;
                d->hour_cnt = (size_t)hi + 1;
        }
        d->hours[hi].records += recs;
        d->hours[hi].duplicates += dups;
        d->hours[hi].gaps += gaps;
}

/* Runs the batch (possibly empty: a tick) at the clock; the driver keeps
 * the records of a paused partition. */
static int batch_run(au_drive_t *d) {
        char es[512] = "";
        if (batch_prepare(d)) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        sg_err_t err = sg_drive_batch(d->drv, d->recs, d->msg_cnt, d->clock, es,
                                      sizeof(es));
        for (size_t i = 0; i < d->msg_cnt; i++)
                rd_kafka_message_destroy(d->msgs[i]);
        d->msg_cnt = 0;
        d->batch_first_ts = -1;
        if (err) {
                errf("engine: %s: %s", sg_err2str(err), es);
                return EXIT_RUNTIME;
        }
        return 0;
}

int au_drive_add(au_drive_t *d, void *msg) {
        rd_kafka_message_t *m = msg;
        int64_t ts = rd_kafka_message_timestamp(m, NULL);
        if (ts < 0)
                ts = d->clock; /* no timestamp: the clock as it is */
        size_t max = d->conf->batch_max_records > 0
                             ? (size_t)d->conf->batch_max_records
                             : 1000;
        int rc;
        if (d->msg_cnt >= max ||
            (d->batch_first_ts >= 0 &&
             ts > d->batch_first_ts + sg_config_batch_ms(d->conf))) {
                if ((rc = batch_run(d)))
                        return rc;
        }
        if (d->batch_first_ts < 0 && d->clock > 0 &&
            ts - 1 > d->clock + sg_config_batch_ms(d->conf)) {
                /* the silence before this record: the live loop ticks */
                d->clock = ts - 1;
                if ((rc = batch_run(d)))
                        return rc;
        }
        if (d->msg_cnt == d->msg_cap) {
                size_t nc = d->msg_cap ? d->msg_cap * 2 : 256;
                void **nm = realloc(d->msgs, nc * sizeof(*nm));
                sg_record_t *nr =
                        nm ? realloc(d->recs, nc * sizeof(*nr)) : NULL;
                if (nm)
                        d->msgs = nm;
                if (!nr) {
                        rd_kafka_message_destroy(m);
                        errf("out of memory");
                        return EXIT_RUNTIME;
                }
                d->recs = nr;
                d->msg_cap = nc;
        }
        if (d->batch_first_ts < 0)
                d->batch_first_ts = ts;
        if (ts > d->clock)
                d->clock = ts;
        if (ts < d->first_ts)
                d->first_ts = ts;
        if (ts > d->last_ts)
                d->last_ts = ts;
        d->records++;
        d->msgs[d->msg_cnt++] = m;
        /* our own view of the input (3), once per record; the batch's
         * records are built again when it runs */
        size_t nh = msg_hdr_cnt(m);
        if (!hdr_reserve(d, nh)) {
                errf("out of memory");
                return EXIT_RUNTIME;
        }
        sg_record_t r;
        nh = 0;
        msg_record(m, &r, d->hdrs, &nh);
        observe_input(d, &r);
        return 0;
}

int au_drive_finish(au_drive_t *d) {
        int rc = 0;
        if (d->msg_cnt)
                rc = batch_run(d);
        /* records a cap paused: the loop reads them again pause_retry_ms
         * after each pause */
        for (int i = 0; !rc && sg_drive_kept(d->drv) && i < 1000; i++) {
                int64_t r = sg_drive_resume_ms(d->drv);
                d->clock = r > d->clock ? r : d->clock + 1;
                rc = batch_run(d);
        }
        d->left_paused = sg_drive_kept(d->drv);
        if (!rc && d->left_paused) {
                errf("%zu records stay paused by the parking caps; the report "
                     "leaves them out",
                     d->left_paused);
        }
        d->final = *sg_engine_metrics(d->eng);
        sg_store_usage(d->store, &d->store_map, &d->store_used);
        sg_txn_t *txn;
        sg_db_stat_t st[SG_STORE_DB_CNT];
        if (!sg_txn_begin(d->store, false, &txn, NULL, 0)) {
                if (!sg_store_db_stats(txn, st, NULL, 0)) {
                        d->dedup_keys = st[SG_STAT_DEDUP].entries;
                        d->dedup_bytes = (st[SG_STAT_DEDUP].pages +
                                          st[SG_STAT_FILTER].pages) *
                                         st[SG_STAT_DEDUP].page_size;
                }
                sg_txn_abort(txn);
        }
        return rc;
}

void au_drive_close(au_drive_t *d) {
        for (size_t i = 0; i < d->msg_cnt; i++)
                rd_kafka_message_destroy(d->msgs[i]);
        free(d->msgs);
        free(d->recs);
        free(d->hdrs);
        sg_drive_destroy(d->drv);
        for (size_t i = 0; i < d->agg_slots; i++)
                free(d->aggs[i].name);
        free(d->aggs);
        free(d->keys);
        free(d->reorder_versions.v);
        free(d->reorder_ms.v);
        free(d->gap_ms.v);
        free(d->gap_timeout_ms.v);
        free(d->dup_delay_ms.v);
        free(d->hours);
        free(g_stage);
        g_stage = NULL;
        g_stage_cnt = g_stage_cap = 0;
}
