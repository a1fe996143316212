/*
 * engine.c — the decision engine (semantics §3, §3b, §4, §5).
 *
 * For each record, in the batch's one LMDB write transaction:
 *   envelope → row 1 (malformed) → rows 2–3 (dedup by idempotency key) →
 *   dedup-only topics apply → row 4 (quarantine) → row 5 (stale) →
 *   version_jump → rows 6–7 (in order: state machine, apply, drain) →
 *   row 8 (park, with caps).
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
#include "engine.h"

#include "envelope.h"
#include "json.h"
#include "snapshot_http.h"

#include <cjson/cJSON.h>

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- batch arena ------------------------------------------------------- */

typedef struct arena_chunk {
        struct arena_chunk *next;
        size_t used, size;
        max_align_t data[];
} arena_chunk_t;

typedef struct arena {
        arena_chunk_t *head;
} arena_t;

static void *arena_alloc(arena_t *a, size_t n) {
        n = (n + 15) & ~(size_t)15;
        if (!a->head || a->head->size - a->head->used < n) {
                size_t size = n > 65536 ? n : 65536;
                arena_chunk_t *c = malloc(sizeof(*c) + size);
                if (!c)
                        return NULL;
                c->size = size;
                c->used = 0;
                c->next = a->head;
                a->head = c;
        }
        void *p = (char *)a->head->data + a->head->used;
        a->head->used += n;
        return p;
}

static void *arena_dup(arena_t *a, const void *p, size_t n) {
        void *q = arena_alloc(a, n ? n : 1);
        if (q && n)
                memcpy(q, p, n);
        return q;
}

static char *arena_printf(arena_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *arena_printf(arena_t *a, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return NULL;
        char *s = arena_alloc(a, (size_t)n + 1);
        if (!s)
                return NULL;
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
        return s;
}

static void arena_reset(arena_t *a) {
        /* Keep one chunk for the next batch; free the rest. */
        arena_chunk_t *c = a->head;
        if (!c)
                return;
        arena_chunk_t *n = c->next;
        c->next = NULL;
        c->used = 0;
        while (n) {
                arena_chunk_t *next = n->next;
                free(n);
                n = next;
        }
}

static void arena_free(arena_t *a) {
        arena_chunk_t *c = a->head;
        while (c) {
                arena_chunk_t *n = c->next;
                free(c);
                c = n;
        }
        a->head = NULL;
}

/* ---- engine ------------------------------------------------------------ */

typedef struct part {
        char *topic;
        int32_t partition;
        sg_tp_t tp;
        const sg_topic_config_t *tc;
        sg_meta_rec_t meta;   /* committed */
        sg_meta_rec_t work;   /* this batch */
        bool touched;
        int64_t cl_last;      /* last changelog offset delivered this batch */
        /* how far the partition is read (semantics §4, backlog-aware gap
         * deadlines); not part of the store: a new owner starts "behind"
         * as soon as the loop reports a position */
        bool behind;          /* not read to the end of its log */
        int64_t read_ts;      /* highest record timestamp read (ms), 0 none */
        int64_t cl_epoch;     /* changelog epoch to keep with the restore's
                                 checkpoints (changelog_epoch_set) */
} part_t;

/* Size limits for one configured input topic's destinations, in
 * sg_record_wire_size() bytes; 0: none known. */
typedef struct topic_limits {
        size_t output, dlq, changelog;
} topic_limits_t;

/* The input record an effect is about (output and DLQ records), or none
 * (topic NULL: snapshot, request and changelog records). */
typedef struct effect_src {
        const char *topic;       /* the input topic's name, from the config */
        int32_t partition;
        int64_t offset;
} effect_src_t;

/* Kafka refused the effect of kind @p kind about this input record; the
 * re-run routes it differently (see emit_output(), emit_dlq()). */
typedef struct refusal {
        effect_src_t src;
        sg_effect_kind_t kind;   /* SG_EFFECT_OUTPUT or SG_EFFECT_DLQ */
        unsigned level;          /* times refused */
        bool too_large;          /* refused for its size */
        bool used;               /* consulted by the batch being run */
        char reason[128];
} refusal_t;

struct sg_engine {
        const sg_config_t *conf;
        sg_store_t *store;
        sg_metrics_t metrics;
        sg_metrics_t delta;

        int64_t clock_fixed;     /* test hook */
        int64_t clock_skew;      /* added so the clock never goes below a
                                    persisted one */
        int64_t base_wall, base_mono;
        int64_t now;             /* this batch */
        int64_t gauges_at;       /* last sampling of the since-index gauges */

        sg_txn_t *txn;
        arena_t arena;
        sg_effect_t *effects;
        size_t effect_cnt, effect_size;
        sg_envelope_t env;

        part_t *parts;
        size_t part_cnt;
        part_t *last_part;

        uint64_t rng;            /* jitter for snapshot retries */
        sg_log_cb *log_cb;       /* operator-facing events (may be NULL) */
        void *log_opaque;
        int log_budget;          /* lines left in this batch */
        part_t **effect_part;    /* changelog effect index → partition */
        size_t effect_part_size;
        sg_txn_t *rtxn;          /* restore transaction */
        size_t restore_cnt;      /* records applied since rtxn began */

        /* the dedup record judge() read for the current record */
        bool dk_valid, dk_found;
        unsigned char dk_hash[32];
        sg_dedup_rec_t dk_rec;

        /* records Kafka cannot take (semantics §3 "A record the output
         * topic cannot take"): the size limits the loop found, which input
         * record each effect is about, and the refusals of the broker */
        size_t limit_all;        /* producer's limit, 0: none known */
        topic_limits_t *limits;  /* per configured topic, conf order */
        effect_src_t *effect_src; /* per effect, effect_size of them */
        refusal_t *refusals;     /* survive an aborted batch */
        size_t refusal_cnt, refusal_cap;
        bool out_rejected;       /* the last emit_output() dead-lettered */
};

static int64_t engine_clock(sg_engine_t *e) {
        if (e->clock_fixed)
                return e->clock_fixed;
        return e->base_wall + (sg_clock_mono_ms() - e->base_mono) + e->clock_skew;
}


/* Logs one decision an operator must be able to find in the log (a gap
 * timeout, a quarantine, a failed snapshot attempt, a release, a refused
 * control record, an adopted key fingerprint). At most
 * SG_ENGINE_LOG_PER_BATCH lines a batch; the counters count them all. The fields never carry payloads or secrets.
 *
 * Fields are built with cJSON, so a line is one valid JSON object whatever
 * the sizes of its strings: after the partition (@p p, may be NULL) come
 * (name, kind, value) triples ended by a NULL name; LF_STR takes a
 * const char * (NULL: ""), LF_STR_OR_NULL one that may be NULL (null),
 * LF_BOOL an int, LF_I64 an int64_t, LF_U64 a uint64_t (written as an
 * exact decimal, never through a double). */
#define SG_ENGINE_LOG_PER_BATCH 50
enum { LF_STR = 1, LF_I64, LF_U64, LF_BOOL, LF_STR_OR_NULL };
static void elog(sg_engine_t *e, sg_log_level_t level, const char *event,
                 const part_t *p, ...) {
        /* the budget is per batch; outside one (assign, restore) every
         * line is written */
        if (!e->log_cb || (e->txn && e->log_budget <= 0))
                return;
        if (e->txn)
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
        char *txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!txt)
                return;
        /* members without the braces (sg_log_cb) */
        size_t n = strlen(txt);
        if (n >= 2) {
                txt[n - 1] = '\0';
                e->log_cb(e->log_opaque, level, event, txt + 1);
        }
        cJSON_free(txt);
}

void sg_engine_set_log(sg_engine_t *e, sg_log_cb *cb, void *opaque) {
        e->log_cb = cb;
        e->log_opaque = opaque;
}

void sg_engine_set_clock(sg_engine_t *e, int64_t now_ms) {
        e->clock_fixed = now_ms;
}

const sg_metrics_t *sg_engine_metrics(const sg_engine_t *e) {
        return &e->metrics;
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
        if (!e->limits) {
                free(e);
                return SG_ERR_NOMEM;
        }
        e->conf = conf;
        e->store = store;
        e->base_wall = sg_clock_wall_ms();
        e->base_mono = sg_clock_mono_ms();
        sg_envelope_init(&e->env);
        *enginep = e;
        return SG_OK;
}

void sg_engine_destroy(sg_engine_t *e) {
        if (!e)
                return;
        sg_txn_abort(e->txn);
        sg_txn_abort(e->rtxn);
        arena_free(&e->arena);
        free(e->effects);
        free(e->effect_src);
        free(e->limits);
        free(e->refusals);
        free(e->effect_part);
        sg_envelope_clear(&e->env);
        for (size_t i = 0; i < e->part_cnt; i++)
                free(e->parts[i].topic);
        free(e->parts);
        free(e);
}

/* ---- partitions -------------------------------------------------------- */

static part_t *part_find(sg_engine_t *e, const char *topic, int32_t partition) {
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
static void clock_floor(sg_engine_t *e, int64_t persisted) {
        int64_t now = engine_clock(e);
        if (!e->clock_fixed && persisted > now)
                e->clock_skew += persisted - now;
}

/* ---- key fingerprint ------------------------------------------------------
 *
 * A store's dedup records are keyed by the idempotency key and hold the
 * payload digest; its aggregate records are keyed by the aggregate id. The
 * settings that define them (envelope format, id, scope, digest pointer,
 * aggregate) are fingerprinted per partition in its meta record, and so in
 * the changelog. A configuration that changes any of them would silently
 * turn every benign retry into an idempotency_conflict (or a duplicate into
 * a new event): such a store is refused at assignment and after a restore
 * (SG_ERR_CONFIG, naming the settings) unless the operator started seqgate
 * with --accept-key-change, which adopts the new fingerprint. */

static const char *const fp_names[SG_META_FP_PARTS] = {
    "envelope.format", "envelope.id", "envelope.scope", "envelope.digest",
    "envelope.aggregate",
};

static void fp_part(unsigned char out[8], const char *text, size_t len) {
        unsigned char h[32];
        sg_sha256(text, len, h);
        memcpy(out, h, 8);
}

/* "kind:name" of a field source, in @p buf. */
static size_t fp_field(char *buf, size_t n, const sg_field_src_t *f) {
        int l = snprintf(buf, n, "%d:%s", (int)f->kind, f->name ? f->name : "");
        return l < 0 ? 0 : (size_t)l < n ? (size_t)l : n - 1;
}

static void fp_compute(const sg_topic_config_t *tc,
                       unsigned char out[SG_META_FP_PARTS][8]) {
        char buf[4096];
        size_t l = (size_t)snprintf(buf, sizeof(buf), "%d", (int)tc->format);
        fp_part(out[0], buf, l);
        l = fp_field(buf, sizeof(buf), &tc->id);
        fp_part(out[1], buf, l);
        l = 0;
        for (size_t i = 0; i < tc->scope_cnt && l < sizeof(buf) - 1; i++) {
                /* length-prefixed, as the key itself is */
                char one[1024];
                size_t ol = fp_field(one, sizeof(one), &tc->scope[i]);
                int w = snprintf(buf + l, sizeof(buf) - l, "%zu:%s;", ol, one);
                if (w < 0)
                        break;
                l += (size_t)w < sizeof(buf) - l ? (size_t)w : sizeof(buf) - l - 1;
        }
        fp_part(out[2], buf, l);
        /* a digest pointer digests the canonical form: its version counts */
        l = (size_t)snprintf(buf, sizeof(buf), "%s|%d",
                             tc->digest_pointer ? tc->digest_pointer : "",
                             tc->digest_pointer ? SG_JSON_CANONICAL_FORM : 0);
        fp_part(out[3], buf, l < sizeof(buf) ? l : sizeof(buf) - 1);
        l = fp_field(buf, sizeof(buf), &tc->aggregate);
        fp_part(out[4], buf, l);
}

/* Checks @p m's key fingerprint against the configuration. Fills it in
 * when the store has none (written before it existed) or when the operator
 * accepted a change; *changedp tells the caller to write @p m back.
 * SG_ERR_CONFIG when the settings differ and no change was accepted. */
static sg_err_t fp_check(sg_engine_t *e, const part_t *p, sg_meta_rec_t *m,
                         bool *changedp, char *errstr, size_t errstr_size) {
        unsigned char cur[SG_META_FP_PARTS][8];
        fp_compute(p->tc, cur);
        *changedp = false;
        if (!m->has_key_fp) {
                memcpy(m->key_fp, cur, sizeof(cur));
                m->has_key_fp = true;
                *changedp = true;
                return SG_OK;
        }
        char names[256] = "";
        size_t nl = 0;
        for (size_t i = 0; i < SG_META_FP_PARTS; i++) {
                if (memcmp(m->key_fp[i], cur[i], 8) == 0)
                        continue;
                int w = snprintf(names + nl, sizeof(names) - nl, "%s%s.%s",
                                 nl ? ", " : "", p->tc->name, fp_names[i]);
                if (w > 0 && (size_t)w < sizeof(names) - nl)
                        nl += (size_t)w;
        }
        if (!nl)
                return SG_OK;
        if (!e->conf->accept_key_change) {
                snprintf(errstr, errstr_size,
                         "store of %s [%" PRId32 "] was written with other "
                         "settings for topics.%s: its idempotency keys, "
                         "digests or aggregate keys would no longer match "
                         "(every retry an idempotency_conflict). Restore the "
                         "old settings, or start once with "
                         "--accept-key-change to adopt the new ones",
                         p->topic, p->partition, names);
                return SG_ERR_CONFIG;
        }
        elog(e, SG_LOG_WARNING, "key_fingerprint_adopted", p, "settings",
             LF_STR, names, NULL);
        memcpy(m->key_fp, cur, sizeof(cur));
        *changedp = true;
        return SG_OK;
}

static const sg_topic_config_t *reply_topic_of(const sg_engine_t *e,
                                               const char *topic);

static sg_err_t eng_assign(void *opaque, const char *topic, int32_t partition,
                           const char *group, int64_t *offsetp, char *errstr,
                           size_t errstr_size) {
        sg_engine_t *e = opaque;
        if (reply_topic_of(e, topic)) {
                /* a snapshot reply topic: no store of its own; its offsets
                 * are the group's */
                *offsetp = -1;
                return SG_OK;
        }
        const sg_topic_config_t *tc = sg_config_topic(e->conf, topic);
        if (!tc) {
                snprintf(errstr, errstr_size,
                         "partition %s [%d] assigned but topic not configured",
                         topic, partition);
                return SG_ERR_CONFIG;
        }
        part_t *p = part_find(e, topic, partition);
        if (!p && !(p = part_add(e, topic, partition, tc)))
                return SG_ERR_NOMEM;
        sg_txn_t *txn;
        sg_err_t err = sg_txn_begin(e->store, true, &txn, errstr, errstr_size);
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
                m.clock_ms = engine_clock(e);
                bool changed;
                (void)fp_check(e, p, &m, &changed, errstr, errstr_size);
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
                snprintf(errstr, errstr_size,
                         "store of %s [%d]: cannot read partition meta", topic,
                         partition);
                return err;
        } else {
                bool changed = false;
                err = fp_check(e, p, &m, &changed, errstr, errstr_size);
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
                        snprintf(errstr, errstr_size,
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
        clock_floor(e, m.clock_ms);
        *offsetp = m.input_offset;
        return SG_OK;
}

static void refusals_drop_partition(sg_engine_t *e, const char *topic,
                                    int32_t partition);

static void eng_revoke(void *opaque, const char *topic, int32_t partition) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (!p)
                return;
        refusals_drop_partition(e, p->tc->name, partition);
        free(p->topic);
        size_t i = (size_t)(p - e->parts);
        memmove(&e->parts[i], &e->parts[i + 1],
                (e->part_cnt - i - 1) * sizeof(*p));
        e->part_cnt--;
        e->last_part = NULL;
}

/* ---- effects ----------------------------------------------------------- */

static sg_effect_t *effect_new(sg_engine_t *e) {
        if (e->effect_cnt == e->effect_size) {
                size_t n = e->effect_size ? e->effect_size * 2 : 256;
                sg_effect_t *ne = realloc(e->effects, n * sizeof(*ne));
                if (!ne)
                        return NULL;
                e->effects = ne;
                effect_src_t *ns = realloc(e->effect_src, n * sizeof(*ns));
                if (!ns)
                        return NULL;
                e->effect_src = ns;
                e->effect_size = n;
        }
        memset(&e->effect_src[e->effect_cnt], 0, sizeof(*e->effect_src));
        sg_effect_t *ef = &e->effects[e->effect_cnt++];
        memset(ef, 0, sizeof(*ef));
        return ef;
}

/* The record an effect is about: an input record, or a drained parked one. */
typedef struct subject {
        const part_t *part;
        int64_t offset;
        int64_t timestamp_ms;
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        const sg_header_t *headers;
        size_t header_cnt;
} subject_t;

typedef struct dlq_info {
        sg_reason_t reason;
        const char *detail;
        const char *aggregate;    /* may be NULL */
        bool has_versions;
        uint64_t expected, actual;
        const char *state;        /* may be NULL */
        bool drop_value;          /* output_rejected: the value is what Kafka
                                     cannot take */
        const char *gap_hdr;      /* a gap header the record carries as an
                                     output record would (skip range), or
                                     NULL; value gap_val */
        const char *gap_val;
} dlq_info_t;

static sg_err_t emit_dlq(sg_engine_t *e, const subject_t *s,
                         const dlq_info_t *d);

/* ---- records Kafka cannot take ------------------------------------------
 *
 * Semantics §3: a record the output topic cannot take is not a transient
 * error. The decision is made here, from what the loop reports:
 *   - the size limits it found at start-up (size_limit()): an output
 *     record larger than its topic takes is not produced; the input record
 *     goes to the DLQ as output_rejected, without its value when the value
 *     is what made it too large;
 *   - a refusal of the broker at delivery (refused()): the loop aborts the
 *     batch and runs it again, and the re-run routes exactly that record
 *     the same way (with its value when it was refused as invalid);
 *   - a DLQ record the DLQ topic cannot take goes without its value (and,
 *     refused again, without the input's headers), with the source
 *     topic/partition/offset so that it can be fetched.
 * The aggregate moves on as if the record had been applied (it was legal
 * and in order; only its copy cannot be written), so the partition and the
 * aggregate are never stopped by one record; the key is recorded with a
 * DLQ verdict. Refusals live in memory only: after a restart the broker
 * refuses again and the same re-run follows. */

/* The limit for a topic whose own limit is @p topic_limit: the smaller
 * known of the producer's and the topic's, 0 when neither is known. */
static size_t limit_of(const sg_engine_t *e, size_t topic_limit) {
        if (!topic_limit)
                return e->limit_all;
        if (!e->limit_all)
                return topic_limit;
        return topic_limit < e->limit_all ? topic_limit : e->limit_all;
}

static const topic_limits_t *limits_of(const sg_engine_t *e,
                                       const sg_topic_config_t *tc) {
        return &e->limits[tc - e->conf->topics];
}

static void eng_size_limit(void *opaque, const char *topic, size_t max) {
        sg_engine_t *e = opaque;
        if (!topic) {
                e->limit_all = max;
                return;
        }
        for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &e->conf->topics[i];
                if (!strcmp(tc->output_topic, topic))
                        e->limits[i].output = max;
                if (!strcmp(tc->dlq_topic, topic))
                        e->limits[i].dlq = max;
                if (tc->changelog_topic && !strcmp(tc->changelog_topic, topic))
                        e->limits[i].changelog = max;
        }
}

static refusal_t *refusal_find(sg_engine_t *e, const subject_t *s,
                               sg_effect_kind_t kind) {
        for (size_t i = 0; i < e->refusal_cnt; i++) {
                refusal_t *r = &e->refusals[i];
                if (r->kind == kind && r->src.offset == s->offset &&
                    r->src.partition == s->part->partition &&
                    !strcmp(r->src.topic, s->part->tc->name)) {
                        r->used = true;
                        return r;
                }
        }
        return NULL;
}

static void effect_src_set(sg_engine_t *e, const sg_effect_t *ef,
                           const subject_t *s) {
        effect_src_t *src = &e->effect_src[ef - e->effects];
        src->topic = s->part->tc->name;
        src->partition = s->part->partition;
        src->offset = s->offset;
}

/* Kafka refused effect @p index (processor.h refused()): remember the
 * input record it is about, so that the re-run routes it. */
static bool eng_refused(void *opaque, size_t index, bool too_large,
                        const char *reason) {
        sg_engine_t *e = opaque;
        if (index >= e->effect_cnt)
                return false;
        const sg_effect_t *ef = &e->effects[index];
        const effect_src_t *src = &e->effect_src[index];
        if ((ef->kind != SG_EFFECT_OUTPUT && ef->kind != SG_EFFECT_DLQ) ||
            !src->topic)
                return false; /* a snapshot or request record: no route */
        refusal_t *r = NULL;
        for (size_t i = 0; !r && i < e->refusal_cnt; i++)
                if (e->refusals[i].kind == ef->kind &&
                    e->refusals[i].src.offset == src->offset &&
                    e->refusals[i].src.partition == src->partition &&
                    !strcmp(e->refusals[i].src.topic, src->topic))
                        r = &e->refusals[i];
        if (!r) {
                if (e->refusal_cnt == e->refusal_cap) {
                        size_t n = e->refusal_cap ? e->refusal_cap * 2 : 8;
                        refusal_t *nr = realloc(e->refusals, n * sizeof(*nr));
                        if (!nr)
                                return false;
                        e->refusals = nr;
                        e->refusal_cap = n;
                }
                r = &e->refusals[e->refusal_cnt++];
                memset(r, 0, sizeof(*r));
                r->src = *src;
                r->kind = ef->kind;
        }
        r->level++;
        r->too_large |= too_large;
        snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
        /* a DLQ record goes without its value, then without the input's
         * headers; after that nothing is left to drop */
        return ef->kind == SG_EFFECT_OUTPUT || r->level <= 2;
}

/* A committed batch consumed the refusals it used; an aborted one did
 * not. */
static void refusals_settle(sg_engine_t *e, bool committed) {
        size_t n = 0;
        for (size_t i = 0; i < e->refusal_cnt; i++) {
                refusal_t *r = &e->refusals[i];
                if (committed && r->used)
                        continue;
                r->used = false;
                e->refusals[n++] = *r;
        }
        e->refusal_cnt = n;
}

static void refusals_drop_partition(sg_engine_t *e, const char *topic,
                                    int32_t partition) {
        size_t n = 0;
        for (size_t i = 0; i < e->refusal_cnt; i++) {
                const refusal_t *r = &e->refusals[i];
                if (r->src.partition == partition &&
                    !strcmp(r->src.topic, topic))
                        continue;
                e->refusals[n++] = *r;
        }
        e->refusal_cnt = n;
}

/* The output record of @p s (size @p size) cannot be written: the DLQ
 * record output_rejected instead. @p about: aggregate, versions and state,
 * when known. */
static sg_err_t emit_rejected(sg_engine_t *e, const subject_t *s,
                              const dlq_info_t *about, size_t size,
                              size_t limit, const refusal_t *rf) {
        const sg_topic_config_t *tc = s->part->tc;
        dlq_info_t d = about ? *about : (dlq_info_t){0};
        d.reason = SG_R_OUTPUT_REJECTED;
        size_t value_len = s->value ? s->value_len : 0;
        if (rf) {
                d.drop_value = rf->too_large;
                d.detail = arena_printf(
                    &e->arena,
                    "the broker refused the output record for topic \"%s\" "
                    "(%zu bytes): %s",
                    tc->output_topic, size, rf->reason);
        } else {
                /* the value is the problem when the record fits without it */
                d.drop_value = size - value_len <= limit;
                d.detail = arena_printf(
                    &e->arena,
                    "the output record is %zu bytes with seqgate's headers, "
                    "more than the %zu topic \"%s\" takes (the producer's "
                    "message.max.bytes and the topic's max.message.bytes)",
                    size, limit, tc->output_topic);
        }
        if (!d.detail)
                return SG_ERR_NOMEM;
        elog(e, SG_LOG_WARNING, "output_rejected", s->part, "offset", LF_I64,
             s->offset, "output_topic", LF_STR, tc->output_topic, "bytes",
             LF_U64, (uint64_t)size, "limit", LF_U64, (uint64_t)limit,
             "refused", LF_STR_OR_NULL, rf ? rf->reason : NULL,
             "value_dropped", LF_BOOL, (int)d.drop_value, NULL);
        e->out_rejected = true;
        return emit_dlq(e, s, &d);
}

/* The output record of @p s. When Kafka cannot take it (its size above the
 * topic's limit, or the broker refused it before) the DLQ record
 * output_rejected is emitted instead and e->out_rejected is set: the caller
 * records the key with a DLQ verdict. @p about (may be NULL) names the
 * aggregate and versions for that DLQ record. */
static sg_err_t emit_output(sg_engine_t *e, const subject_t *s,
                            const char *gap_hdr, const char *gap_val,
                            const dlq_info_t *about) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = effect_new(e);
        sg_header_t *x = arena_alloc(&e->arena, 2 * sizeof(*x));
        char *src = arena_printf(&e->arena, "%s/%" PRId32 "/%" PRId64,
                                 s->part->topic, s->part->partition, s->offset);
        e->out_rejected = false;
        if (!ef || !x || !src)
                return SG_ERR_NOMEM;
        ef->kind = SG_EFFECT_OUTPUT;
        ef->topic = tc->output_topic;
        ef->partition = tc->output_partitioning == SG_PART_INPUT
                            ? s->part->partition
                            : -1;
        ef->key = s->key;
        ef->key_len = s->key_len;
        ef->value = s->value;
        ef->value_len = s->value_len;
        ef->timestamp_ms = s->timestamp_ms > 0 ? s->timestamp_ms : 0;
        ef->headers = s->headers;
        ef->header_cnt = s->header_cnt;
        x[0] = (sg_header_t){SG_H_SOURCE, src, strlen(src)};
        ef->extra = x;
        ef->extra_cnt = 1;
        if (gap_hdr) {
                x[1] = (sg_header_t){gap_hdr, gap_val, strlen(gap_val)};
                ef->extra_cnt = 2;
        }
        size_t size = sg_effect_wire_size(ef);
        size_t limit = limit_of(e, limits_of(e, tc)->output);
        const refusal_t *rf = refusal_find(e, s, SG_EFFECT_OUTPUT);
        if ((limit && size > limit) || rf) {
                e->effect_cnt--; /* not this record: the DLQ one */
                return emit_rejected(e, s, about, size, limit, rf);
        }
        effect_src_set(e, ef, s);
        e->delta.applied_total++;
        return SG_OK;
}

static sg_err_t emit_dlq(sg_engine_t *e, const subject_t *s,
                         const dlq_info_t *d) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = effect_new(e);
        sg_header_t *x = arena_alloc(&e->arena, 15 * sizeof(*x));
        if (!ef || !x)
                return SG_ERR_NOMEM;
        size_t n = 0;
#define H(name, str)                                                           \
        do {                                                                   \
                const char *v_ = (str);                                        \
                if (!v_)                                                       \
                        return SG_ERR_NOMEM;                                   \
                x[n++] = (sg_header_t){(name), v_, strlen(v_)};                \
        } while (0)
        H(SG_DLQ_H_REASON, sg_reason_name(d->reason));
        /* Values that may live on the caller's stack (aggregate record,
         * state) are copied into the batch arena: effects outlive judge(). */
#define COPY(str) ((char *)arena_dup(&e->arena, (str), strlen(str) + 1))
        H(SG_DLQ_H_DETAIL, d->detail ? COPY(d->detail) : "");
        H(SG_DLQ_H_TOPIC, s->part->topic);
        H(SG_DLQ_H_PARTITION,
          arena_printf(&e->arena, "%" PRId32, s->part->partition));
        H(SG_DLQ_H_OFFSET, arena_printf(&e->arena, "%" PRId64, s->offset));
        H(SG_DLQ_H_TIMESTAMP,
          arena_printf(&e->arena, "%" PRId64, s->timestamp_ms));
        H(SG_DLQ_H_GROUP, e->conf->group_id ? e->conf->group_id : "");
        if (d->aggregate)
                H(SG_DLQ_H_AGGREGATE, COPY(d->aggregate));
        if (d->has_versions) {
                H(SG_DLQ_H_EXPECTED,
                  arena_printf(&e->arena, "%" PRIu64, d->expected));
                H(SG_DLQ_H_ACTUAL,
                  arena_printf(&e->arena, "%" PRIu64, d->actual));
        }
        if (d->state && d->state[0])
                H(SG_DLQ_H_STATE, COPY(d->state));
        H(SG_DLQ_H_INSTANCE, e->conf->instance_id ? e->conf->instance_id : "");
        if (d->gap_hdr && d->gap_val)
                H(d->gap_hdr, d->gap_val);
        ef->kind = SG_EFFECT_DLQ;
        ef->topic = tc->dlq_topic;
        ef->partition = -1;
        ef->key = s->key;
        ef->key_len = s->key_len;
        ef->value = s->value;
        ef->value_len = s->value_len;
        ef->timestamp_ms = s->timestamp_ms > 0 ? s->timestamp_ms : 0;
        ef->headers = s->headers;
        ef->header_cnt = s->header_cnt;
        ef->extra = x;
        ef->extra_cnt = n;
        /* What the DLQ topic cannot take goes without the value, then
         * without the input's headers (semantics §3); the source
         * coordinates above say where to fetch the record. */
        size_t limit = limit_of(e, limits_of(e, tc)->dlq);
        const refusal_t *rf = refusal_find(e, s, SG_EFFECT_DLQ);
        unsigned level = rf ? rf->level : 0;
        if (ef->value &&
            (d->drop_value || level >= 1 ||
             (limit && sg_effect_wire_size(ef) > limit))) {
                H(SG_DLQ_H_VALUE_DROPPED,
                  arena_printf(&e->arena, "%zu", ef->value_len));
                ef->value = NULL;
                ef->value_len = 0;
                ef->extra_cnt = n;
        }
        if (ef->header_cnt &&
            (level >= 2 || (limit && sg_effect_wire_size(ef) > limit))) {
                H(SG_DLQ_H_HEADERS_DROPPED,
                  arena_printf(&e->arena, "%zu", ef->header_cnt));
                ef->headers = NULL;
                ef->header_cnt = 0;
                ef->extra_cnt = n;
        }
#undef H
#undef COPY
        effect_src_set(e, ef, s);
        e->delta.dlq_total[d->reason]++;
        return SG_OK;
}

/* ---- dedup records ------------------------------------------------------ */

/* Records the idempotency key with @p verdict. @p digest NULL: the key is
 * already recorded (a parked event leaving the park): only its verdict
 * changes, first-seen time and expiry stay. */
static sg_err_t record_key(sg_engine_t *e, part_t *p, const unsigned char *kh,
                           const unsigned char *digest, uint8_t verdict,
                           char *errstr, size_t errstr_size) {
        sg_dedup_rec_t r;
        sg_err_t err;
        bool found;
        if (e->dk_valid && memcmp(e->dk_hash, kh, 32) == 0) {
                /* judge() just read this key: no second lookup */
                found = e->dk_found;
                r = e->dk_rec;
        } else {
                err = sg_dedup_get(e->txn, &p->tp, kh, &r);
                if (err && err != SG_ERR_NOT_FOUND) {
                        snprintf(errstr, errstr_size, "dedup read failed");
                        return err;
                }
                found = err == SG_OK;
        }
        e->dk_valid = false;
        sg_dedup_rec_t old = r;
        if (!digest) {
                if (!found)
                        return SG_OK;
                r.verdict = verdict;
        } else if (found && r.expiry_ms > e->now) {
                r.verdict = verdict; /* a replay judged again */
        } else {
                memcpy(r.digest, digest, 32);
                r.verdict = verdict;
                r.first_seen_ms = e->now;
                r.expiry_ms = e->now + p->tc->dedup_ttl_ms;
        }
        return sg_dedup_put_known(e->txn, &p->tp, kh, &r, found ? &old : NULL,
                                  errstr, errstr_size);
}

/* ---- aggregates --------------------------------------------------------- */

struct agg_ctx {
        unsigned char hash[32];
        sg_agg_rec_t rec;
        int64_t old_since;
        bool exists;
};
typedef struct agg_ctx agg_ctx_t;

static sg_err_t agg_load(sg_engine_t *e, part_t *p, const char *id,
                         size_t id_len, agg_ctx_t *a) {
        sg_sha256(id, id_len, a->hash);
        sg_err_t err = sg_agg_get(e->txn, &p->tp, a->hash, &a->rec);
        if (err == SG_ERR_NOT_FOUND) {
                memset(&a->rec, 0, sizeof(a->rec));
                if (p->tc->sm.enabled)
                        snprintf(a->rec.state, sizeof(a->rec.state), "%s",
                                 p->tc->sm.initial);
                size_t n = id_len < sizeof(a->rec.aggregate) - 1
                               ? id_len
                               : sizeof(a->rec.aggregate) - 1;
                memcpy(a->rec.aggregate, id, n);
                a->rec.aggregate[n] = '\0';
                a->rec.aggregate_len = n;
                a->exists = false;
                err = SG_OK;
        } else {
                a->exists = true;
        }
        a->old_since = sg_agg_indexed_since(&a->rec);
        return err;
}

static sg_err_t agg_save(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                         char *errstr, size_t errstr_size) {
        sg_err_t err = sg_agg_put(e->txn, &p->tp, a->hash, &a->rec,
                                  a->old_since, errstr, errstr_size);
        if (!err) {
                a->old_since = sg_agg_indexed_since(&a->rec);
                a->exists = true;
        }
        return err;
}

/* Whether the aggregate can still take a version: L = 2^64-1 has no
 * successor (semantics §2), so nothing is applied or drained after it. */
static bool agg_open(const agg_ctx_t *a) {
        return !a->rec.has_last || a->rec.last_version < UINT64_MAX;
}

/* The next version the aggregate expects: L+1, or first_version for a new
 * aggregate. Saturates at 2^64-1 (only for messages: agg_open() says
 * whether there is a next version at all). */
static uint64_t agg_next(const part_t *p, const agg_ctx_t *a) {
        if (!a->rec.has_last)
                return p->tc->first_version;
        return agg_open(a) ? a->rec.last_version + 1 : UINT64_MAX;
}

/* Moves L to @p v. L never decreases, on any path (semantics §3): apply,
 * drain, snapshot, release, skip; a caller that would lower it is a bug. */
static void agg_set_last(agg_ctx_t *a, uint64_t v) {
        assert(!a->rec.has_last || v >= a->rec.last_version);
        if (a->rec.has_last && v < a->rec.last_version)
                return;
        a->rec.last_version = v;
        a->rec.has_last = true;
}

/* ---- in-order apply (rows 6–7) and drain --------------------------------- */

/* Looks the event type up in the topic's state machine. Returns the
 * transition or NULL; *known tells whether the type exists at all. */
static const sg_transition_t *sm_find(const sg_state_machine_t *sm,
                                      const char *type, const char *state,
                                      bool *known) {
        *known = false;
        if (!type)
                return NULL;
        for (size_t i = 0; i < sm->transition_cnt; i++) {
                const sg_transition_t *t = &sm->transitions[i];
                if (strcmp(t->type, type) != 0)
                        continue;
                *known = true;
                for (size_t j = 0; j < t->from_cnt; j++)
                        if (strcmp(t->from[j], state) == 0)
                                return t;
        }
        return NULL;
}

/* Rows 6/7 for a record at version v == next (or latest_wins v > next).
 * Returns the dedup verdict to record. */
static sg_err_t apply_in_order(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                               const subject_t *s, uint64_t v,
                               const char *type, const char *gap_hdr,
                               const char *gap_val, uint8_t *verdictp,
                               char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        uint64_t expected = agg_next(p, a);
        sg_err_t err;
        if (tc->sm.enabled && tc->order_mode != SG_ORDER_NONE) {
                bool known;
                const sg_transition_t *t =
                    sm_find(&tc->sm, type, a->rec.state, &known);
                if (!t) {
                        dlq_info_t d = {
                            .reason = known ? SG_R_ILLEGAL_TRANSITION
                                            : SG_R_UNKNOWN_EVENT_TYPE,
                            .aggregate = a->rec.aggregate,
                            .has_versions = true,
                            .expected = expected,
                            .actual = v,
                            .state = a->rec.state,
                            /* the skip range travels with the first
                             * record released after it, whatever its
                             * verdict (semantics §4 skip) */
                            .gap_hdr = gap_hdr,
                            .gap_val = gap_val,
                        };
                        d.detail =
                            known ? arena_printf(&e->arena,
                                                 "event type \"%s\" is not "
                                                 "allowed from state %s",
                                                 type, a->rec.state)
                                  : arena_printf(&e->arena,
                                                 "event type \"%s\" is not in "
                                                 "the state machine",
                                                 type ? type : "");
                        if ((err = emit_dlq(e, s, &d)))
                                return err;
                        e->delta.illegal_transitions_total++;
                        agg_set_last(a, v);
                        *verdictp = SG_DV_DLQ;
                        (void)errstr;
                        (void)errstr_size;
                        return SG_OK;
                }
                snprintf(a->rec.state, sizeof(a->rec.state), "%s", t->to);
        }
        dlq_info_t about = {.aggregate = a->rec.aggregate,
                            .has_versions = true,
                            .expected = expected,
                            .actual = v,
                            .state = a->rec.state};
        if ((err = emit_output(e, s, gap_hdr, gap_val, &about)))
                return err;
        /* applied, even when Kafka cannot take its copy (output_rejected):
         * the aggregate moves on */
        agg_set_last(a, v);
        *verdictp = e->out_rejected ? SG_DV_DLQ : SG_DV_APPLIED;
        return SG_OK;
}

/* Builds a subject from a parked record, copying it out of LMDB memory. */
static sg_err_t subject_from_parked(sg_engine_t *e, const part_t *p,
                                    const sg_parked_rec_t *r, subject_t *s,
                                    char **typep) {
        memset(s, 0, sizeof(*s));
        s->part = p;
        s->offset = r->offset;
        s->timestamp_ms = r->timestamp_ms;
        if (r->key) {
                s->key = arena_dup(&e->arena, r->key, r->key_len);
                s->key_len = r->key_len;
        }
        if (r->value) {
                s->value = arena_dup(&e->arena, r->value, r->value_len);
                s->value_len = r->value_len;
        }
        *typep = NULL;
        if (r->type) {
                *typep = arena_alloc(&e->arena, r->type_len + 1);
                if (!*typep)
                        return SG_ERR_NOMEM;
                memcpy(*typep, r->type, r->type_len);
                (*typep)[r->type_len] = '\0';
        }
        if (r->headers && r->headers_len >= 4) {
                void *blob = arena_dup(&e->arena, r->headers, r->headers_len);
                size_t cnt = r->header_cnt; /* the decoder checked the block */
                sg_header_t *h = arena_alloc(&e->arena,
                                             (cnt ? cnt : 1) * sizeof(*h));
                if (!blob || !h)
                        return SG_ERR_NOMEM;
                ssize_t n = sg_headers_parse(blob, r->headers_len, h, cnt);
                if (n < 0)
                        return SG_ERR_STORE;
                s->headers = h;
                s->header_cnt = (size_t)n;
        }
        if ((r->key && !s->key) || (r->value && !s->value))
                return SG_ERR_NOMEM;
        return SG_OK;
}

/* Takes a parked event of aggregate @p a out of the store into subject @p s
 * (copied out of LMDB memory): version @p v exactly or, when @p lowest, the
 * lowest parked version if it is <= @p v. *vp receives its version.
 * SG_ERR_NOT_FOUND when there is none. */
static sg_err_t unpark(sg_engine_t *e, part_t *p, agg_ctx_t *a, bool lowest,
                       uint64_t v, uint64_t *vp, subject_t *s, char **typep,
                       unsigned char kh[32], char *errstr,
                       size_t errstr_size) {
        sg_parked_rec_t pr, *r = &pr;
        uint64_t got = v;
        if (a->rec.parked_cnt == 0)
                return SG_ERR_NOT_FOUND;
        sg_err_t err = lowest ? sg_parked_first(e->txn, &p->tp, a->hash, &got, r)
                              : sg_parked_get(e->txn, &p->tp, a->hash, v, r);
        if (err)
                return err;
        if (got > v)
                return SG_ERR_NOT_FOUND;
        *vp = got;
        size_t bytes = (r->key ? r->key_len : 0) +
                       (r->value ? r->value_len : 0) +
                       (r->headers ? r->headers_len : 0);
        memcpy(kh, r->key_hash, 32);
        if ((err = subject_from_parked(e, p, r, s, typep)))
                return err;
        if ((err = sg_parked_del(e->txn, &p->tp, a->hash, got, errstr,
                                 errstr_size)))
                return err;
        a->rec.parked_cnt--;
        a->rec.parked_bytes -= bytes < a->rec.parked_bytes ? bytes
                                                           : a->rec.parked_bytes;
        p->work.parked_cnt--;
        p->work.parked_bytes -= bytes < p->work.parked_bytes
                                    ? bytes
                                    : p->work.parked_bytes;
        return SG_OK;
}

/* Recomputes the aggregate's gap deadline base after parked events left. */
static sg_err_t refresh_since(sg_engine_t *e, part_t *p, agg_ctx_t *a) {
        if (a->rec.parked_cnt == 0) {
                a->rec.parked_since_ms = 0;
                a->rec.parked_bytes = 0;
                return SG_OK;
        }
        return sg_parked_oldest(e->txn, &p->tp, a->hash,
                                &a->rec.parked_since_ms);
}

/* Decides every parked event the aggregate's L now allows (semantics §3
 * drain): first the ones at or below L — a snapshot, a release or a
 * latest_wins apply moved L past them, so they are superseded (dropped,
 * counted, their keys kept as seen) — then L+1, L+2, ... through rows
 * 6–7. Afterwards every parked event is above L+1: the invariant that
 * keeps a parked version from ever being applied below L. */
static sg_err_t drain(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                      size_t errstr_size) {
        sg_err_t err = SG_ERR_NOT_FOUND;
        bool changed = false;
        uint64_t v;
        subject_t s;
        char *type;
        unsigned char kh[32];
        while (a->rec.has_last &&
               (err = unpark(e, p, a, true, a->rec.last_version, &v, &s, &type,
                             kh, errstr, errstr_size)) == SG_OK) {
                changed = true;
                if ((err = record_key(e, p, kh, NULL, SG_DV_APPLIED, errstr,
                                      errstr_size)))
                        return err;
                e->delta.snapshot_superseded_total++;
        }
        if (a->rec.has_last && err != SG_ERR_NOT_FOUND)
                return err;
        while (agg_open(a) &&
               (err = unpark(e, p, a, false, agg_next(p, a), &v, &s, &type,
                             kh, errstr, errstr_size)) == SG_OK) {
                changed = true;
                const char *gh = NULL, *gv = NULL;
                if (a->rec.skip_from) {
                        gh = SG_H_GAP_SKIPPED;
                        gv = arena_printf(&e->arena, "%" PRIu64 "-%" PRIu64,
                                          a->rec.skip_from, a->rec.skip_to);
                        a->rec.skip_from = a->rec.skip_to = 0;
                }
                uint8_t verdict;
                if ((err = apply_in_order(e, p, a, &s, v, type, gh, gv,
                                          &verdict, errstr, errstr_size)))
                        return err;
                if ((err = record_key(e, p, kh, NULL, verdict, errstr,
                                      errstr_size)))
                        return err;
        }
        if (agg_open(a) && err != SG_ERR_NOT_FOUND)
                return err;
        return changed ? refresh_since(e, p, a) : SG_OK;
}

/* Moves the aggregate to version @p S that its authority (a snapshot) or an
 * operator (a release) vouches for: L = S unless L is already higher (L
 * never decreases), parked events <= S are superseded, S+1, ... drain, and
 * what is still parked waits above a new gap with a fresh deadline. */
static sg_err_t agg_advance(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            uint64_t S, char *errstr, size_t errstr_size) {
        if (!a->rec.has_last || S > a->rec.last_version)
                agg_set_last(a, S);
        sg_err_t err = drain(e, p, a, errstr, errstr_size);
        if (err)
                return err;
        if (a->rec.parked_cnt > 0) {
                a->rec.parked_since_ms = e->now;
                e->delta.event_sequence_gaps_total++;
        } else {
                a->rec.parked_since_ms = 0;
        }
        return SG_OK;
}

/* ---- process ------------------------------------------------------------ */

static bool snap_enabled(const part_t *p);
static sg_err_t snap_start(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                           char *errstr, size_t errstr_size);
static sg_err_t snap_cancel(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            char *errstr, size_t errstr_size);
static bool is_snapshot_reply(const sg_engine_t *e, const char *topic);
static bool reply_version(const sg_record_t *rec, const cJSON *v,
                          uint64_t *out);
static const sg_header_t *header_find(const sg_record_t *rec,
                                      const char *name);
static sg_err_t snap_reply(sg_engine_t *e, const sg_record_t *rec,
                           char *errstr, size_t errstr_size);


/* Whether @p state is a state of the topic's state machine. */
static bool sm_has_state(const sg_state_machine_t *sm, const char *state) {
        for (size_t i = 0; i < sm->state_cnt; i++)
                if (strcmp(sm->states[i], state) == 0)
                        return true;
        return false;
}

const char *sg_release_refusal(const sg_topic_config_t *tc,
                               const sg_agg_rec_t *r, bool has_version,
                               uint64_t S, const char *state, char *buf,
                               size_t size) {
        if (state && !tc->sm.enabled)
                return "a state is given but the topic has no state machine";
        if (state && !sm_has_state(&tc->sm, state)) {
                snprintf(buf, size,
                         "state \"%.64s\" is not a state of the topic's "
                         "state machine",
                         state);
                return buf;
        }
        if (!r)
                return "unknown aggregate";
        bool quarantined = r->flags & SG_AGG_QUARANTINED;
        bool waiting = r->parked_cnt > 0 || (r->flags & SG_AGG_REFETCHING);
        if (!quarantined && !(has_version && waiting))
                return has_version ? "aggregate is neither quarantined nor "
                                     "waiting on a gap"
                                   : "aggregate is not quarantined (a "
                                     "release without a version only lifts "
                                     "a quarantine)";
        if (has_version && r->has_last && S < r->last_version) {
                snprintf(buf, size,
                         "version %" PRIu64 " is below the last applied "
                         "version %" PRIu64 " (it never decreases)",
                         S, r->last_version);
                return buf;
        }
        return NULL;
}

/* An operator's control record (SG_H_CONTROL): release an aggregate
 * (semantics §4 "until a snapshot or an operator resolves it").
 *
 * Accepted: a quarantined aggregate (with or without a version), or one
 * waiting on a gap (parked events or a snapshot request) when a version S
 * is given; S >= L (L never decreases, §3), and the state, if given, must
 * be a state of the topic's state machine. With S the aggregate moves to S
 * as a snapshot would move it (agg_advance: parked events <= S
 * superseded, S+1 ... drain). Anything else is refused: nothing changes,
 * control_ignored_total counts it and a "control_refused" log line says
 * why. A control record is not an event: never deduplicated nor output. */
static sg_err_t control(sg_engine_t *e, part_t *p, const sg_record_t *rec,
                        const sg_header_t *h, char *errstr,
                        size_t errstr_size) {
        sg_err_t err = SG_OK;
        cJSON *body = NULL;
        const char *why = NULL, *aggregate = NULL;
        char whybuf[160];
        agg_ctx_t a;
        uint64_t S = 0;
        if (h->value_len != 7 || memcmp(h->value, "release", 7) != 0) {
                why = "unknown control command (expected \"release\")";
                goto refused;
        }
        if (rec->value && rec->value_len)
                body = cJSON_ParseWithLength(rec->value, rec->value_len);
        const cJSON *ja = cJSON_GetObjectItemCaseSensitive(body, "aggregate");
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(body, "version");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(body, "state");
        if (!cJSON_IsString(ja) || !ja->valuestring[0] ||
            (jv && !reply_version(rec, jv, &S)) ||
            (js && !cJSON_IsString(js))) {
                why = "body is not {\"aggregate\": ID, \"version\": S, "
                      "\"state\": X} (version and state optional)";
                goto refused;
        }
        aggregate = ja->valuestring;
        if ((err = agg_load(e, p, ja->valuestring, strlen(ja->valuestring),
                            &a)))
                goto done;
        bool quarantined = a.rec.flags & SG_AGG_QUARANTINED;
        why = sg_release_refusal(p->tc, a.exists ? &a.rec : NULL, jv != NULL,
                                 S, js ? js->valuestring : NULL, whybuf,
                                 sizeof(whybuf));
        if (why)
                goto refused;
        if (a.rec.flags & SG_AGG_REFETCHING &&
            (err = snap_cancel(e, p, &a, errstr, errstr_size)))
                goto done;
        if (quarantined && p->work.quarantined)
                p->work.quarantined--;
        a.rec.flags &= ~SG_AGG_QUARANTINED;
        if (js)
                snprintf(a.rec.state, sizeof(a.rec.state), "%s",
                         js->valuestring);
        if (jv && (err = agg_advance(e, p, &a, S, errstr, errstr_size)))
                goto done;
        e->delta.releases_total++;
        p->touched = true;
        elog(e, SG_LOG_NOTICE, "aggregate_released", p, "aggregate", LF_STR,
             a.rec.aggregate, "last_version", LF_U64, a.rec.last_version,
             "offset", LF_I64, rec->offset, NULL);
        err = agg_save(e, p, &a, errstr, errstr_size);
        goto done;
refused:
        e->delta.control_ignored_total++;
        elog(e, SG_LOG_WARNING, "control_refused", p, "aggregate", LF_STR,
             aggregate, "reason", LF_STR, why, "offset", LF_I64, rec->offset,
             NULL);
done:
        cJSON_Delete(body);
        return err;
}

static sg_err_t judge(sg_engine_t *e, part_t *p, const sg_record_t *rec,
                      sg_process_result_t *result, char *errstr,
                      size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_envelope_t *env = &e->env;
        subject_t s = {
            .part = p,
            .offset = rec->offset,
            .timestamp_ms = rec->timestamp_ms,
            .key = rec->key,
            .key_len = rec->key_len,
            .value = rec->value,
            .value_len = rec->value_len,
            .headers = rec->headers,
            .header_cnt = rec->header_cnt,
        };
        sg_err_t err;
        char detail[512], ts[40];

        *result = SG_PROCESSED;
        const sg_header_t *ctl = header_find(rec, SG_H_CONTROL);
        if (ctl)
                return control(e, p, rec, ctl, errstr, errstr_size);
        e->delta.records_total++;

        /* Row 1: malformed. */
        err = sg_envelope_parse(tc, rec, env, detail, sizeof(detail));
        if (err == SG_ERR_INVALID) {
                dlq_info_t d = {.reason = SG_R_MALFORMED, .detail = detail};
                e->delta.malformed_total++;
                return emit_dlq(e, &s, &d);
        }
        if (err)
                return err;

        /* Rows 2–3: the idempotency key. */
        sg_dedup_rec_t dr;
        err = sg_dedup_get(e->txn, &p->tp, env->key_hash, &dr);
        if (err && err != SG_ERR_NOT_FOUND)
                return err;
        e->dk_valid = true;
        e->dk_found = err == SG_OK;
        memcpy(e->dk_hash, env->key_hash, 32);
        e->dk_rec = dr;
        if (err == SG_OK && dr.expiry_ms > e->now) {
                if (memcmp(dr.digest, env->digest, 32) != 0) {
                        dlq_info_t d = {
                            .reason = SG_R_IDEMPOTENCY_CONFLICT,
                            .aggregate = env->aggregate,
                            .detail = arena_printf(
                                &e->arena,
                                "event id \"%.64s\" was first seen at %s "
                                "with a different payload digest",
                                env->id, sg_iso_time(dr.first_seen_ms, ts, sizeof(ts))),
                        };
                        e->delta.idempotency_parameter_conflicts_total++;
                        return emit_dlq(e, &s, &d);
                }
                bool replay = dr.verdict == SG_DV_DLQ &&
                              header_find(rec, SG_H_REPLAY) != NULL;
                if (!replay) {
                        e->delta.dedup_hits_total++;
                        return SG_OK;
                }
        }

        /* Dedup-only topics, ordering mode none: apply. */
        if (tc->order_mode == SG_ORDER_NONE || !env->has_version ||
            !env->aggregate) {
                dlq_info_t about = {.aggregate = env->aggregate};
                if ((err = emit_output(e, &s, NULL, NULL, &about)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest,
                                  e->out_rejected ? SG_DV_DLQ
                                                  : SG_DV_APPLIED,
                                  errstr, errstr_size);
        }

        agg_ctx_t a;
        if ((err = agg_load(e, p, env->aggregate, env->aggregate_len, &a)))
                return err;
        uint64_t v = env->version;
        uint64_t next = agg_next(p, &a);
        /* v <= L (or v < F for a new aggregate). Judged on L itself, never
         * on L+1, which does not exist for L = 2^64-1. */
        bool stale = a.rec.has_last ? v <= a.rec.last_version : v < next;
        dlq_info_t d = {.aggregate = a.rec.aggregate,
                        .has_versions = true,
                        .expected = next,
                        .actual = v,
                        .state = a.rec.state};

        /* Row 4: quarantined. */
        if (a.rec.flags & SG_AGG_QUARANTINED) {
                d.reason = SG_R_AGGREGATE_QUARANTINED;
                d.detail = snap_enabled(p)
                               ? "aggregate is quarantined after a gap "
                                 "timeout; a snapshot of it is requested and "
                                 "releases it"
                               : "aggregate is quarantined after a gap "
                                 "timeout; its events wait in the DLQ for an "
                                 "operator (seqgatectl release)";
                if ((err = emit_dlq(e, &s, &d)) ||
                    (err = record_key(e, p, env->key_hash, env->digest,
                                      SG_DV_DLQ, errstr, errstr_size)))
                        return err;
                /* with a snapshot source, every event of a quarantined
                 * aggregate asks its authority again (one request at a
                 * time), so a refetch that gave up is not final */
                if (snap_enabled(p) && !(a.rec.flags & SG_AGG_REFETCHING)) {
                        if ((err = snap_start(e, p, &a, errstr, errstr_size)))
                                return err;
                        return agg_save(e, p, &a, errstr, errstr_size);
                }
                return SG_OK;
        }

        /* New aggregate above F under trust_first_seen: adopt it. */
        if (!a.rec.has_last && v > next &&
            tc->new_aggregate == SG_NEWAGG_TRUST_FIRST_SEEN &&
            a.rec.parked_cnt == 0)
                next = v;

        /* Row 5: stale. */
        if (stale) {
                e->delta.stale_version_rejections_total++;
                if (tc->stale_drop)
                        return record_key(e, p, env->key_hash, env->digest,
                                          SG_DV_DROPPED, errstr, errstr_size);
                d.reason = SG_R_STALE_VERSION;
                d.detail = a.rec.has_last
                               ? arena_printf(&e->arena,
                                              "version %" PRIu64
                                              " <= last applied version %" PRIu64,
                                              v, a.rec.last_version)
                               : arena_printf(&e->arena,
                                              "version %" PRIu64
                                              " is below first_version %" PRIu64,
                                              v, tc->first_version);
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }

        /* One bogus version must not hold or quarantine an aggregate. */
        if (v - next >= tc->max_version_jump) {
                d.reason = SG_R_VERSION_JUMP;
                d.detail = arena_printf(&e->arena,
                                        "version %" PRIu64
                                        " is %" PRIu64 " above the expected "
                                        "version %" PRIu64
                                        " (max_version_jump %" PRIu64 ")",
                                        v, v - next, next,
                                        tc->max_version_jump);
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }

        uint8_t verdict;
        if (v == next || tc->order_mode == SG_ORDER_LATEST_WINS) {
                const char *gh = NULL, *gv = NULL;
                if (v > next) { /* latest_wins: apply at once, count the gap */
                        e->delta.event_sequence_gaps_total++;
                        gh = SG_H_GAP_MISSING;
                        gv = arena_printf(&e->arena, "%" PRIu64 "-%" PRIu64,
                                          next, v - 1);
                }
                if ((err = apply_in_order(e, p, &a, &s, v, env->type, gh, gv,
                                          &verdict, errstr, errstr_size)))
                        return err;
                if ((err = record_key(e, p, env->key_hash, env->digest,
                                      verdict, errstr, errstr_size)))
                        return err;
                if ((err = drain(e, p, &a, errstr, errstr_size)))
                        return err;
                if (a.rec.parked_cnt == 0 && (a.rec.flags & SG_AGG_REFETCHING) &&
                    (err = snap_cancel(e, p, &a, errstr, errstr_size)))
                        return err; /* the gap closed by itself */
                return agg_save(e, p, &a, errstr, errstr_size);
        }

        /* Row 8b: another event already holds version v. The parked one
         * keeps it; this one is judged, never written over it. */
        if (a.rec.parked_cnt > 0) {
                sg_parked_rec_t held;
                err = sg_parked_get(e->txn, &p->tp, a.hash, v, &held);
                if (err == SG_OK) {
                        if (memcmp(held.key_hash, env->key_hash, 32) == 0) {
                                /* the same event, parked already (its dedup
                                 * record expired meanwhile) */
                                e->delta.dedup_hits_total++;
                                return SG_OK;
                        }
                        d.reason = SG_R_VERSION_CONFLICT;
                        d.detail = arena_printf(
                            &e->arena,
                            "version %" PRIu64 " is already held by another "
                            "event, parked from %s/%" PRId32 " offset %" PRId64
                            " at %s (waiting for %" PRIu64 ")",
                            v, p->topic, p->partition, held.offset,
                            sg_iso_time(held.parked_at_ms, ts, sizeof(ts)),
                            next);
                        if ((err = emit_dlq(e, &s, &d)))
                                return err;
                        return record_key(e, p, env->key_hash, env->digest,
                                          SG_DV_DLQ, errstr, errstr_size);
                }
                if (err != SG_ERR_NOT_FOUND)
                        return err;
        }

        /* Row 8: park (v > next), within the caps. */
        size_t hdr_len = 0;
        void *hdr_blob = NULL;
        if (rec->header_cnt) {
                if ((err = sg_headers_serialize(rec->headers, rec->header_cnt,
                                                &hdr_blob, &hdr_len)))
                        return err;
        }
        uint64_t bytes = (rec->key ? rec->key_len : 0) +
                         (rec->value ? rec->value_len : 0) + hdr_len;
        const char *cap = NULL;
        uint64_t cap_val = 0;
        if (a.rec.parked_cnt >= tc->max_parked_per_aggregate)
                cap = "max_parked_per_aggregate",
                cap_val = tc->max_parked_per_aggregate;
        else if (p->work.parked_cnt >= tc->max_parked_total)
                cap = "max_parked_total", cap_val = tc->max_parked_total;
        else if (p->work.parked_bytes + bytes > tc->max_parked_bytes)
                cap = "max_parked_bytes", cap_val = tc->max_parked_bytes;
        if (cap) {
                free(hdr_blob);
                e->delta.park_overflow_total++;
                if (tc->on_park_overflow == SG_OVERFLOW_PAUSE) {
                        /* Nothing was written for this record. */
                        e->delta.records_total--;
                        *result = SG_PAUSE;
                        return SG_OK;
                }
                d.reason = SG_R_PARK_OVERFLOW;
                d.detail = arena_printf(&e->arena,
                                        "version %" PRIu64 " cannot be parked "
                                        "(waiting for %" PRIu64 "): %s %" PRIu64
                                        " reached",
                                        v, next, cap, cap_val);
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }
        /* A parked event is also a changelog record (both guarantees: the
         * whole record and its metadata); one the changelog topic cannot
         * take would stop the partition (semantics §3). It is not parked:
         * the DLQ, output_rejected, and the aggregate keeps waiting for
         * the versions before it, as for any event it never got. */
        size_t cl_limit = limit_of(e, limits_of(e, tc)->changelog);
        size_t value_len = rec->value ? rec->value_len : 0;
        size_t cl_size = sg_record_wire_size(
            1 + 64,
            72 + (env->type ? strlen(env->type) : 0) +
                (rec->key ? rec->key_len : 0) + value_len + hdr_len,
            NULL, 0, NULL, 0);
        if (cl_limit && cl_size > cl_limit) {
                free(hdr_blob);
                d.reason = SG_R_OUTPUT_REJECTED;
                d.drop_value = cl_size - value_len <= cl_limit;
                d.detail = arena_printf(
                    &e->arena,
                    "version %" PRIu64 " cannot be parked (waiting for "
                    "%" PRIu64 "): its changelog record would be %zu bytes, "
                    "more than the %zu topic \"%s\" takes",
                    v, next, cl_size, cl_limit, tc->changelog_topic);
                elog(e, SG_LOG_WARNING, "output_rejected", p, "offset", LF_I64,
                     rec->offset, "changelog_topic", LF_STR,
                     tc->changelog_topic, "bytes", LF_U64, (uint64_t)cl_size,
                     "limit", LF_U64, (uint64_t)cl_limit, NULL);
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }
        sg_parked_rec_t pr = {
            .parked_at_ms = e->now,
            .offset = rec->offset,
            .timestamp_ms = rec->timestamp_ms,
            .type = env->type,
            .type_len = env->type ? strlen(env->type) : 0,
            .key = rec->key,
            .key_len = rec->key ? rec->key_len : SIZE_MAX,
            .value = rec->value,
            .value_len = rec->value ? rec->value_len : SIZE_MAX,
            .headers = hdr_blob,
            .headers_len = hdr_blob ? hdr_len : SIZE_MAX,
        };
        memcpy(pr.key_hash, env->key_hash, 32);
        err = sg_parked_put(e->txn, &p->tp, a.hash, v, &pr, errstr,
                            errstr_size);
        free(hdr_blob);
        if (err)
                return err;
        if (a.rec.parked_cnt == 0) {
                e->delta.event_sequence_gaps_total++;
                a.rec.parked_since_ms = e->now;
        }
        a.rec.parked_cnt++;
        a.rec.parked_bytes += bytes;
        p->work.parked_cnt++;
        p->work.parked_bytes += bytes;
        e->delta.parked_total++;
        if ((err = record_key(e, p, env->key_hash, env->digest, SG_DV_PARKED,
                              errstr, errstr_size)))
                return err;
        /* A new aggregate above first_version under "strict": ask its
         * authority at once instead of waiting for the deadline (§4). */
        if (!a.rec.has_last && snap_enabled(p) &&
            tc->new_aggregate == SG_NEWAGG_STRICT &&
            (err = snap_start(e, p, &a, errstr, errstr_size)))
                return err;
        return agg_save(e, p, &a, errstr, errstr_size);
}

static sg_err_t eng_process(void *opaque, const sg_record_t *rec,
                            sg_process_result_t *result, char *errstr,
                            size_t errstr_size) {
        sg_engine_t *e = opaque;
        *result = SG_PROCESSED;
        part_t *p = part_find(e, rec->topic, rec->partition);
        if (!p && is_snapshot_reply(e, rec->topic)) {
                /* reply topics (and the HTTP pseudo topic) have no store
                 * partition of their own: only checked off the hot path */
                sg_err_t err = snap_reply(e, rec, errstr, errstr_size);
                e->dk_valid = false;
                return err;
        }
        if (!p) {
                /* the loop assigns (and, exactly_once, restores) a partition
                 * before giving its records; assigning here would begin a
                 * second write transaction inside the batch's */
                snprintf(errstr, errstr_size,
                         "record of %s [%d], a partition not assigned",
                         rec->topic, rec->partition);
                return SG_ERR_INVALID;
        }
        sg_err_t err = judge(e, p, rec, result, errstr, errstr_size);
        e->dk_valid = false; /* the cache is only for this record */
        if (err)
                return err;
        p->touched = true;
        if (*result == SG_PROCESSED)
                p->work.input_offset = rec->offset + 1;
        if (rec->timestamp_ms > p->read_ts)
                p->read_ts = rec->timestamp_ms;
        return SG_OK;
}

static void eng_position(void *opaque, const char *topic, int32_t partition,
                         int64_t lag) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (p)
                p->behind = lag != 0;
}

/* ---- gap deadlines ------------------------------------------------------- */

static sg_err_t gap_fire(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                         char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        uint64_t next = agg_next(p, a);
        e->delta.gap_timeouts_total++;
        p->touched = true;
        elog(e, SG_LOG_NOTICE, "gap_timeout", p, "aggregate", LF_STR,
             a->rec.aggregate, "waiting_for", LF_U64, next, "parked", LF_U64,
             (uint64_t)a->rec.parked_cnt, "waited_ms", LF_I64,
             e->now - a->rec.parked_since_ms, "gap_policy", LF_STR,
             tc->gap_policy == SG_GAP_SKIP ? "skip" : "dlq", NULL);
        if (tc->gap_policy == SG_GAP_SKIP) {
                uint64_t low;
                if ((err = sg_parked_first(e->txn, &p->tp, a->hash, &low,
                                           NULL)))
                        return err == SG_ERR_NOT_FOUND ? SG_OK : err;
                /* every parked version is above L+1 (drain's invariant),
                 * so low - 1 > L: L moves up, never down */
                if (low > next) {
                        a->rec.skip_from = next;
                        a->rec.skip_to = low - 1;
                        e->delta.skipped_versions_total += low - next;
                }
                if (!a->rec.has_last || low - 1 > a->rec.last_version)
                        agg_set_last(a, low - 1);
                if ((err = drain(e, p, a, errstr, errstr_size)))
                        return err;
                return agg_save(e, p, a, errstr, errstr_size);
        }
        /* gap_policy dlq: everything parked goes to the DLQ, in version
         * order, and the aggregate is quarantined (row 4). */
        int64_t waited = e->now - a->rec.parked_since_ms;
        uint64_t v;
        subject_t s;
        char *type;
        unsigned char kh[32];
        while ((err = unpark(e, p, a, true, UINT64_MAX, &v, &s, &type, kh,
                             errstr, errstr_size)) == SG_OK) {
                dlq_info_t d = {
                    .reason = SG_R_GAP_TIMEOUT,
                    .aggregate = a->rec.aggregate,
                    .has_versions = true,
                    .expected = next,
                    .actual = v,
                    .state = a->rec.state,
                    .detail = arena_printf(
                        &e->arena,
                        "version %" PRIu64 " waited %" PRId64
                        " ms for version %" PRIu64 " (gap_timeout_ms %" PRId64
                        "); aggregate quarantined",
                        v, waited, next, tc->gap_timeout_ms),
                };
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                if ((err = record_key(e, p, kh, NULL, SG_DV_DLQ, errstr,
                                      errstr_size)))
                        return err;
        }
        if (err != SG_ERR_NOT_FOUND)
                return err;
        a->rec.parked_cnt = 0;
        a->rec.parked_bytes = 0;
        a->rec.parked_since_ms = 0;
        if (!(a->rec.flags & SG_AGG_QUARANTINED)) {
                a->rec.flags |= SG_AGG_QUARANTINED;
                p->work.quarantined++;
                elog(e, SG_LOG_WARNING, "aggregate_quarantined", p,
                     "aggregate", LF_STR, a->rec.aggregate, "waiting_for",
                     LF_U64, next, NULL);
        }
        return agg_save(e, p, a, errstr, errstr_size);
}

/* ---- snapshot refetch (semantics §4 step 1) ------------------------------
 *
 * A refetch starts when an aggregate's gap deadline passes, or at once when a
 * new aggregate parks above first_version under new_aggregate "strict". The
 * aggregate is flagged REFETCHING (which takes it out of the gap deadline
 * index) and a request record is stored (snapreq, with a due-time index):
 * requests are part of the store, so they survive a restart; a request whose
 * reply never comes times out and is sent again (new sequence number) with
 * exponential backoff and jitter, at most max_attempts times, after which the
 * topic's gap policy applies. Replies come back as records (the reply topic,
 * or the HTTP pseudo topic) and are judged by version: a timeout is
 * *unknown*, not *failed*, so a late reply to an earlier attempt — even one
 * sent by a previous incarnation — is still applied if S >= L. */

static bool snap_enabled(const part_t *p) {
        return p->tc->snapshot.source != SG_SNAP_NONE;
}

static bool hex_decode(const char *s, size_t len, unsigned char *out) {
        if (len != 64)
                return false;
        for (size_t i = 0; i < 32; i++) {
                int v = 0;
                for (int j = 0; j < 2; j++) {
                        char c = s[2 * i + j];
                        int d = c >= '0' && c <= '9'   ? c - '0'
                                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                       : -1;
                        if (d < 0)
                                return false;
                        v = v * 16 + d;
                }
                out[i] = (unsigned char)v;
        }
        return true;
}

/* xorshift64*: jitter only, not security. */
static uint64_t rng_next(sg_engine_t *e) {
        if (!e->rng)
                e->rng = (uint64_t)sg_clock_mono_ms() * 0x9E3779B97F4A7C15ull | 1;
        e->rng ^= e->rng >> 12;
        e->rng ^= e->rng << 25;
        e->rng ^= e->rng >> 27;
        return e->rng * 0x2545F4914F6CDD1Dull;
}

/* Delay before attempt @p failed + 1: backoff_ms × 2^(failed-1), capped at
 * backoff_max_ms, ±50% jitter. */
static int64_t snap_backoff(sg_engine_t *e, const sg_snapshot_config_t *sc,
                            uint32_t failed) {
        int64_t d = sc->backoff_ms > 0 ? sc->backoff_ms : 1;
        for (uint32_t i = 1; i < failed && d < sc->backoff_max_ms; i++)
                d *= 2;
        if (sc->backoff_max_ms > 0 && d > sc->backoff_max_ms)
                d = sc->backoff_max_ms;
        int64_t half = d / 2;
        if (half > 0)
                d += (int64_t)(rng_next(e) % (uint64_t)(2 * half)) - half;
        return d > 0 ? d : 1;
}

/* Sends attempt r->attempt of the request: a request record (Kafka) or an
 * HTTP GET effect, and marks it in flight until its timeout. */
static sg_err_t snap_send(sg_engine_t *e, part_t *p, const unsigned char ah[32],
                          sg_snapreq_rec_t *r) {
        const sg_snapshot_config_t *sc = &p->tc->snapshot;
        char hex[65];
        sg_hex_encode(ah, 32, hex);
        r->seq = ++p->work.snap_seq;
        char *rid = arena_printf(&e->arena, "%s/%" PRId32 "/%s/%" PRIu64,
                                 p->topic, p->partition, hex, r->seq);
        sg_effect_t *ef = effect_new(e);
        if (!rid || !ef)
                return SG_ERR_NOMEM;
        if (sc->source == SG_SNAP_KAFKA) {
                cJSON *j = cJSON_CreateObject();
                if (!j)
                        return SG_ERR_NOMEM;
                cJSON_AddStringToObject(j, "request_id", rid);
                cJSON_AddStringToObject(j, "aggregate", r->aggregate);
                if (r->has_have)
                        cJSON_AddNumberToObject(j, "have_version",
                                                (double)r->have_version);
                else
                        cJSON_AddNullToObject(j, "have_version");
                cJSON_AddNumberToObject(j, "want_version",
                                        (double)r->want_version);
                cJSON_AddStringToObject(j, "reply_to", sc->reply_topic);
                cJSON_AddStringToObject(j, "topic", p->topic);
                cJSON_AddNumberToObject(j, "partition", p->partition);
                cJSON_AddStringToObject(j, "instance",
                                        e->conf->instance_id
                                            ? e->conf->instance_id
                                            : "");
                cJSON_AddNumberToObject(j, "attempt", r->attempt);
                char *txt = cJSON_PrintUnformatted(j);
                cJSON_Delete(j);
                if (!txt)
                        return SG_ERR_NOMEM;
                size_t n = strlen(txt);
                ef->value = arena_dup(&e->arena, txt, n);
                ef->value_len = n;
                free(txt);
                sg_header_t *x = arena_alloc(&e->arena, sizeof(*x));
                if (!ef->value || !x)
                        return SG_ERR_NOMEM;
                x[0] = (sg_header_t){"content-type", "application/json", 16};
                ef->kind = SG_EFFECT_OUTPUT;
                ef->topic = sc->request_topic;
                ef->partition = -1;
                ef->key = arena_dup(&e->arena, r->aggregate, r->aggregate_len);
                ef->key_len = r->aggregate_len;
                ef->extra = x;
                ef->extra_cnt = 1;
        } else {
                char *url = sg_url_expand(sc->url, r->aggregate,
                                          r->aggregate_len);
                if (!url)
                        return SG_ERR_NOMEM;
                ef->kind = SG_EFFECT_HTTP_GET;
                ef->url = arena_dup(&e->arena, url, strlen(url) + 1);
                free(url);
                if (!ef->url)
                        return SG_ERR_NOMEM;
                ef->partition = -1;
                ef->request_id = rid;
                ef->auth_env = sc->auth_header_env;
                ef->timeout_ms = sc->timeout_ms;
        }
        r->state = SG_SNAP_INFLIGHT;
        r->sent_at_ms = e->now;
        r->due_ms = e->now + sc->timeout_ms;
        p->work.snap_in_flight++;
        p->touched = true;
        e->delta.snapshot_requests_total++;
        return SG_OK;
}

/* Starts a refetch for aggregate @p a (the caller saves @p a). */
static sg_err_t snap_start(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                           char *errstr, size_t errstr_size) {
        if (a->rec.flags & SG_AGG_REFETCHING)
                return SG_OK;
        sg_snapreq_rec_t r;
        sg_err_t err = sg_snapreq_get(e->txn, &p->tp, a->hash, &r);
        int64_t old_due = 0;
        if (err == SG_OK) {
                /* a request survived (e.g. the flag was cleared by a
                 * give-up): start over with a fresh attempt count */
                old_due = r.due_ms;
                if (r.state == SG_SNAP_INFLIGHT && p->work.snap_in_flight)
                        p->work.snap_in_flight--;
        } else if (err != SG_ERR_NOT_FOUND) {
                return err;
        }
        memset(&r, 0, sizeof(r));
        r.attempt = 1;
        r.has_have = a->rec.has_last;
        r.have_version = a->rec.last_version;
        r.want_version = agg_next(p, a);
        r.issued_at_ms = e->now;
        r.aggregate_len = a->rec.aggregate_len;
        memcpy(r.aggregate, a->rec.aggregate, a->rec.aggregate_len);
        if (p->work.snap_in_flight < (uint64_t)p->tc->snapshot.max_in_flight) {
                if ((err = snap_send(e, p, a->hash, &r)))
                        return err;
        } else {
                r.state = SG_SNAP_WAITING; /* queued behind max_in_flight */
                r.due_ms = e->now;
        }
        a->rec.flags |= SG_AGG_REFETCHING;
        p->touched = true;
        return sg_snapreq_put(e->txn, &p->tp, a->hash, &r, old_due, errstr,
                              errstr_size);
}

/* Ends a refetch that is no longer needed (the gap closed by itself). */
static sg_err_t snap_cancel(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            char *errstr, size_t errstr_size) {
        sg_snapreq_rec_t r;
        sg_err_t err = sg_snapreq_get(e->txn, &p->tp, a->hash, &r);
        a->rec.flags &= ~SG_AGG_REFETCHING;
        if (err == SG_ERR_NOT_FOUND)
                return SG_OK;
        if (err)
                return err;
        if (r.state == SG_SNAP_INFLIGHT && p->work.snap_in_flight)
                p->work.snap_in_flight--;
        return sg_snapreq_del(e->txn, &p->tp, a->hash, r.due_ms, errstr,
                              errstr_size);
}

/* An attempt failed or timed out (its in-flight count already released):
 * back off and retry, or give up and apply the gap policy. */
static sg_err_t snap_attempt_failed(sg_engine_t *e, part_t *p,
                                    const unsigned char ah[32],
                                    sg_snapreq_rec_t *r, const char *why,
                                    char *errstr, size_t errstr_size) {
        const sg_snapshot_config_t *sc = &p->tc->snapshot;
        sg_err_t err;
        p->touched = true;
        bool last = (int64_t)r->attempt >= sc->max_attempts;
        elog(e, SG_LOG_WARNING, "snapshot_attempt_failed", p, "aggregate",
             LF_STR, r->aggregate, "attempt", LF_U64, (uint64_t)r->attempt,
             "max_attempts", LF_I64, (int64_t)sc->max_attempts, "reason",
             LF_STR, why, "next", LF_STR, last ? "gap_policy" : "retry", NULL);
        if ((int64_t)r->attempt < sc->max_attempts) {
                int64_t old_due = r->due_ms;
                r->state = SG_SNAP_WAITING;
                r->due_ms = e->now + snap_backoff(e, sc, r->attempt);
                r->attempt++;
                return sg_snapreq_put(e->txn, &p->tp, ah, r, old_due, errstr,
                                      errstr_size);
        }
        e->delta.snapshot_gave_up_total++;
        if ((err = sg_snapreq_del(e->txn, &p->tp, ah, r->due_ms, errstr,
                                  errstr_size)))
                return err;
        agg_ctx_t a;
        memcpy(a.hash, ah, 32);
        if ((err = sg_agg_get(e->txn, &p->tp, ah, &a.rec)))
                return err == SG_ERR_NOT_FOUND ? SG_OK : err;
        a.old_since = sg_agg_indexed_since(&a.rec);
        a.exists = true;
        a.rec.flags &= ~SG_AGG_REFETCHING;
        if (a.rec.parked_cnt == 0)
                return agg_save(e, p, &a, errstr, errstr_size);
        if (p->tc->gap_policy == SG_GAP_HOLD) {
                /* hold: keep waiting; ask again after another gap_timeout */
                a.rec.parked_since_ms = e->now;
                return agg_save(e, p, &a, errstr, errstr_size);
        }
        return gap_fire(e, p, &a, errstr, errstr_size);
}

/* Sends queued requests and times out unanswered ones (bounded). */
static sg_err_t snap_tick(sg_engine_t *e, part_t *p, int *budget,
                          char *errstr, size_t errstr_size) {
        const sg_snapshot_config_t *sc = &p->tc->snapshot;
        sg_err_t err;
        while (*budget > 0) {
                unsigned char ah[32];
                int64_t due;
                err = sg_snapdue_first(e->txn, &p->tp, e->now, ah, &due);
                if (err == SG_ERR_NOT_FOUND)
                        break;
                if (err)
                        return err;
                (*budget)--;
                sg_snapreq_rec_t r;
                err = sg_snapreq_get(e->txn, &p->tp, ah, &r);
                if (err == SG_ERR_NOT_FOUND) {
                        /* dangling index entry */
                        if ((err = sg_snapreq_del(e->txn, &p->tp, ah, due,
                                                  errstr, errstr_size)))
                                return err;
                        continue;
                }
                if (err)
                        return err;
                if (r.due_ms != due) { /* index out of step: move it */
                        if ((err = sg_snapreq_put(e->txn, &p->tp, ah, &r, due,
                                                  errstr, errstr_size)))
                                return err;
                        continue;
                }
                if (r.state == SG_SNAP_INFLIGHT) {
                        /* unknown, not failed: a late reply is still judged */
                        e->delta.snapshot_timeouts_total++;
                        if (p->work.snap_in_flight)
                                p->work.snap_in_flight--;
                        if ((err = snap_attempt_failed(e, p, ah, &r,
                                                       "no reply within "
                                                       "timeout_ms", errstr,
                                                       errstr_size)))
                                return err;
                        continue;
                }
                int64_t old_due = r.due_ms;
                if (p->work.snap_in_flight >= (uint64_t)sc->max_in_flight) {
                        /* no capacity: look again a little later, and let
                         * the in-flight timeouts behind it be seen */
                        int64_t wait = sc->backoff_ms < sc->timeout_ms
                                           ? sc->backoff_ms
                                           : sc->timeout_ms;
                        r.due_ms = e->now + (wait > 0 ? wait : 1);
                } else if ((err = snap_send(e, p, ah, &r))) {
                        return err;
                }
                if ((err = sg_snapreq_put(e->txn, &p->tp, ah, &r, old_due,
                                          errstr, errstr_size)))
                        return err;
        }
        return SG_OK;
}

/* Applies snapshot (S, state, data) to a waiting aggregate. */
static sg_err_t snap_apply(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                           uint64_t S, const char *state, const cJSON *data,
                           const char *provenance, char *errstr,
                           size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        if (tc->snapshot.emit_record) {
                sg_effect_t *ef = effect_new(e);
                sg_header_t *x = arena_alloc(&e->arena, 3 * sizeof(*x));
                char *vs = arena_printf(&e->arena, "%" PRIu64, S);
                char *prov = arena_printf(&e->arena, "%s", provenance);
                if (!ef || !x || !vs || !prov)
                        return SG_ERR_NOMEM;
                size_t n = 0;
                x[n++] = (sg_header_t){SG_H_SNAPSHOT, vs, strlen(vs)};
                if (state) {
                        char *st = arena_printf(&e->arena, "%s", state);
                        if (!st)
                                return SG_ERR_NOMEM;
                        x[n++] = (sg_header_t){SG_H_SNAPSHOT_STATE, st,
                                               strlen(st)};
                }
                x[n++] = (sg_header_t){SG_H_SOURCE, prov, strlen(prov)};
                ef->kind = SG_EFFECT_OUTPUT;
                ef->topic = tc->output_topic;
                ef->partition = tc->output_partitioning == SG_PART_INPUT
                                    ? p->partition
                                    : -1;
                ef->key = arena_dup(&e->arena, a->rec.aggregate,
                                    a->rec.aggregate_len);
                ef->key_len = a->rec.aggregate_len;
                if (data) {
                        char *txt = cJSON_PrintUnformatted(data);
                        if (!txt)
                                return SG_ERR_NOMEM;
                        ef->value_len = strlen(txt);
                        ef->value = arena_dup(&e->arena, txt, ef->value_len);
                        free(txt);
                        if (!ef->value)
                                return SG_ERR_NOMEM;
                }
                ef->extra = x;
                ef->extra_cnt = n;
        }
        if (a->rec.flags & SG_AGG_QUARANTINED) {
                if (p->work.quarantined)
                        p->work.quarantined--;
        }
        a->rec.flags &= ~(SG_AGG_QUARANTINED | SG_AGG_REFETCHING);
        if (state)
                snprintf(a->rec.state, sizeof(a->rec.state), "%s", state);
        sg_snapreq_rec_t r;
        err = sg_snapreq_get(e->txn, &p->tp, a->hash, &r);
        if (err == SG_OK) {
                if (r.state == SG_SNAP_INFLIGHT && p->work.snap_in_flight)
                        p->work.snap_in_flight--;
                int64_t took = e->now - r.issued_at_ms;
                e->delta.snapshot_resolve_ms_last = took > 0 ? took : 1;
                if (e->delta.snapshot_resolve_ms_last >
                    e->delta.snapshot_resolve_ms_max)
                        e->delta.snapshot_resolve_ms_max =
                            e->delta.snapshot_resolve_ms_last;
                if ((err = sg_snapreq_del(e->txn, &p->tp, a->hash, r.due_ms,
                                          errstr, errstr_size)))
                        return err;
        } else if (err != SG_ERR_NOT_FOUND) {
                return err;
        }
        /* L = S (the caller checked S >= L), parked events <= S
         * superseded, S+1 ... drain, a new deadline for what is left */
        if ((err = agg_advance(e, p, a, S, errstr, errstr_size)))
                return err;
        e->delta.snapshot_applied_total++;
        p->touched = true;
        return agg_save(e, p, a, errstr, errstr_size);
}

static const sg_topic_config_t *reply_topic_of(const sg_engine_t *e,
                                               const char *topic) {
        for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                const sg_snapshot_config_t *sc = &e->conf->topics[i].snapshot;
                if (sc->source == SG_SNAP_KAFKA && sc->reply_topic &&
                    strcmp(sc->reply_topic, topic) == 0)
                        return &e->conf->topics[i];
        }
        return NULL;
}

static bool is_snapshot_reply(const sg_engine_t *e, const char *topic) {
        return strcmp(topic, SG_SNAPSHOT_HTTP_TOPIC) == 0 ||
               reply_topic_of(e, topic) != NULL;
}

static const sg_header_t *header_find(const sg_record_t *rec,
                                      const char *name) {
        for (size_t i = rec->header_cnt; i > 0; i--)
                if (strcmp(rec->headers[i - 1].name, name) == 0)
                        return &rec->headers[i - 1];
        return NULL;
}

/* Parses "topic/partition/<64 hex>/seq". */
static bool parse_request_id(const char *rid, size_t len, char *topic,
                             size_t topic_size, int32_t *partition,
                             unsigned char hash[32], uint64_t *seq) {
        const char *end = rid + len, *s3 = NULL, *s2 = NULL, *s1 = NULL;
        for (const char *c = end; c > rid; c--) {
                if (c[-1] != '/')
                        continue;
                if (!s3)
                        s3 = c - 1;
                else if (!s2)
                        s2 = c - 1;
                else {
                        s1 = c - 1;
                        break;
                }
        }
        if (!s1 || (size_t)(s1 - rid) >= topic_size || s1 == rid)
                return false;
        if (sg_version_parse(s3 + 1, (size_t)(end - s3 - 1), seq) != SG_OK)
                return false;
        uint64_t part;
        if (sg_version_parse(s1 + 1, (size_t)(s2 - s1 - 1), &part) != SG_OK ||
            part > INT32_MAX)
                return false;
        if (!hex_decode(s2 + 1, (size_t)(s3 - s2 - 1), hash))
                return false;
        memcpy(topic, rid, (size_t)(s1 - rid));
        topic[s1 - rid] = '\0';
        *partition = (int32_t)part;
        return true;
}

/* Reads the version of a reply (member "version" of @p rec's value): an
 * integer JSON number (<= 2^53) or a decimal string. A number is judged by
 * its text (semantics §2), which cJSON does not keep: json.h reads it. */
static bool reply_version(const sg_record_t *rec, const cJSON *v,
                          uint64_t *out) {
        if (cJSON_IsString(v))
                return sg_version_parse(v->valuestring,
                                        strlen(v->valuestring),
                                        out) == SG_OK;
        return cJSON_IsNumber(v) &&
               sg_json_version_get(rec->value, rec->value_len, "/version",
                                   out) == SG_OK;
}

/* Judges one snapshot reply record (reply topic or HTTP pseudo topic). */
static sg_err_t snap_reply(sg_engine_t *e, const sg_record_t *rec,
                           char *errstr, size_t errstr_size) {
        bool http = strcmp(rec->topic, SG_SNAPSHOT_HTTP_TOPIC) == 0;
        cJSON *body = NULL;
        const char *rid = NULL;
        size_t rid_len = 0;
        sg_err_t err = SG_OK;
        bool failed = false;
        const char *why = NULL; /* why the attempt failed, for the log */

        if (rec->value && rec->value_len)
                body = cJSON_ParseWithLength(rec->value, rec->value_len);
        if (http) {
                rid = rec->key;
                rid_len = rec->key ? rec->key_len : 0;
                const sg_header_t *st = header_find(rec, SG_H_HTTP_STATUS);
                if (!st || st->value_len != 3 ||
                    memcmp(st->value, "200", 3) != 0) {
                        const sg_header_t *he = header_find(rec, SG_H_HTTP_ERROR);
                        failed = true;
                        why = arena_printf(
                            &e->arena, "HTTP %.*s%s%.*s",
                            st ? (int)(st->value_len < 8 ? st->value_len : 8)
                               : 1,
                            st ? (const char *)st->value : "?",
                            he ? ": " : "",
                            he ? (int)(he->value_len < 200 ? he->value_len
                                                           : 200)
                               : 0,
                            he ? (const char *)he->value : "");
                }
        } else {
                const cJSON *r = cJSON_GetObjectItemCaseSensitive(body,
                                                                  "request_id");
                if (cJSON_IsString(r)) {
                        rid = r->valuestring;
                        rid_len = strlen(rid);
                }
        }
        char topic[256];
        int32_t partition;
        unsigned char ah[32];
        uint64_t seq;
        part_t *p = NULL;
        if (!rid || !parse_request_id(rid, rid_len, topic, sizeof(topic),
                                      &partition, ah, &seq) ||
            !(p = part_find(e, topic, partition)) || !snap_enabled(p)) {
                e->delta.snapshot_ignored_total++; /* unknown request id */
                goto done;
        }
        agg_ctx_t a;
        memcpy(a.hash, ah, 32);
        err = sg_agg_get(e->txn, &p->tp, ah, &a.rec);
        if (err == SG_ERR_NOT_FOUND) {
                err = SG_OK;
                e->delta.snapshot_ignored_total++;
                goto done;
        }
        if (err)
                goto done;
        a.old_since = sg_agg_indexed_since(&a.rec);
        a.exists = true;
        if (!(a.rec.flags & (SG_AGG_REFETCHING | SG_AGG_QUARANTINED))) {
                e->delta.snapshot_ignored_total++; /* no longer waits */
                goto done;
        }
        uint64_t S = 0;
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(body, "version");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(body, "state");
        const cJSON *ja = cJSON_GetObjectItemCaseSensitive(body, "aggregate");
        if (!cJSON_IsObject(body) || !reply_version(rec, jv, &S) ||
            (js && !cJSON_IsString(js)) ||
            (p->tc->sm.enabled && !cJSON_IsString(js)) ||
            (ja && (!cJSON_IsString(ja) ||
                    strcmp(ja->valuestring, a.rec.aggregate) != 0))) {
                if (!failed)
                        why = !cJSON_IsObject(body)
                                  ? "reply is not a JSON object"
                              : !reply_version(rec, jv, &S)
                                  ? "reply has no valid version"
                              : ja && (!cJSON_IsString(ja) ||
                                       strcmp(ja->valuestring,
                                              a.rec.aggregate) != 0)
                                  ? "reply is for another aggregate"
                                  : "reply has no valid state";
                failed = true;
        }
        if (!failed && p->tc->sm.enabled) {
                /* the state must be one the machine declares */
                bool known = false;
                for (size_t i = 0; i < p->tc->sm.state_cnt && !known; i++)
                        known = strcmp(p->tc->sm.states[i], js->valuestring) == 0;
                failed = !known;
                if (failed)
                        why = "reply state is not declared by the state "
                              "machine";
        }
        if (failed) {
                e->delta.snapshot_failures_total++;
                sg_snapreq_rec_t r;
                err = sg_snapreq_get(e->txn, &p->tp, ah, &r);
                if (err == SG_ERR_NOT_FOUND) {
                        err = SG_OK;
                } else if (err == SG_OK && r.seq == seq &&
                           r.state == SG_SNAP_INFLIGHT) {
                        if (p->work.snap_in_flight)
                                p->work.snap_in_flight--;
                        err = snap_attempt_failed(e, p, ah, &r, why, errstr,
                                                  errstr_size);
                }
                goto done;
        }
        if (a.rec.has_last && S < a.rec.last_version) {
                e->delta.snapshot_late_total++; /* judged by version */
                goto done;
        }
        const char *prov = http ? rid : NULL;
        char provbuf[300];
        if (!http) {
                snprintf(provbuf, sizeof(provbuf), "%s/%" PRId32 "/%" PRId64,
                         rec->topic, rec->partition, rec->offset);
                prov = provbuf;
        }
        err = snap_apply(e, p, &a, S, js ? js->valuestring : NULL,
                         cJSON_GetObjectItemCaseSensitive(body, "data"), prov,
                         errstr, errstr_size);
done:
        cJSON_Delete(body);
        return err;
}

static sg_err_t tick_part(sg_engine_t *e, part_t *p, int *budget,
                          char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        if (snap_enabled(p) &&
            (err = snap_tick(e, p, budget, errstr, errstr_size)))
                return err;
        /* A gap never times out while its fill may be waiting unread in
         * the partition (semantics §4): the deadline is measured against
         * processing time only once the partition is read to the end of
         * its log; before that, against the newest record timestamp read,
         * so neither seqgate's downtime nor its backlog is charged to the
         * producers. */
        int64_t horizon = e->now;
        if (p->behind && p->read_ts < horizon)
                horizon = p->read_ts;
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
                                if ((err = agg_save(e, p, &a, errstr,
                                                    errstr_size)))
                                        return err;
                                (*budget)--;
                                continue;
                        }
                        a.old_since = since;
                        if (snap_enabled(p)) {
                                /* refetch first; the policy applies when
                                 * refetch gives up (§4) */
                                if ((err = snap_start(e, p, &a, errstr,
                                                      errstr_size)) ||
                                    (err = agg_save(e, p, &a, errstr,
                                                    errstr_size)))
                                        return err;
                        } else if ((err = gap_fire(e, p, &a, errstr,
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
                e->delta.dedup_expired_total += (uint64_t)removed;
                p->touched = true;
        }
        return SG_OK;
}

static part_t *part_of_key(sg_engine_t *e, const unsigned char *key,
                           size_t key_len) {
        for (size_t i = 0; i < e->part_cnt; i++) {
                const sg_tp_t *tp = &e->parts[i].tp;
                if (key_len >= tp->len && memcmp(key, tp->b, tp->len) == 0)
                        return &e->parts[i];
        }
        return NULL;
}

/* The last step of a batch's decisions (end of tick): each touched
 * partition's meta, and one changelog effect per store key the batch
 * changed (its last value, or a tombstone; semantics §6, both guarantees):
 * exactly_once commits them with the batch's output in one Kafka
 * transaction, at_least_once produces them once the output is delivered. */
static sg_err_t batch_finish(sg_engine_t *e, char *errstr,
                             size_t errstr_size) {
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
        const sg_change_t *ch;
        size_t n = sg_txn_changes(e->txn, &ch);
        for (size_t i = 0; i < n; i++) {
                part_t *p = part_of_key(e, ch[i].key, ch[i].key_len);
                if (!p)
                        continue;
                size_t slen = ch[i].key_len - p->tp.len;
                unsigned char *k = arena_alloc(&e->arena, 1 + slen);
                sg_effect_t *ef = effect_new(e);
                if (!k || !ef)
                        return SG_ERR_NOMEM;
                k[0] = ch[i].db;
                memcpy(k + 1, (const unsigned char *)ch[i].key + p->tp.len,
                       slen);
                ef->kind = SG_EFFECT_CHANGELOG;
                ef->topic = p->tc->changelog_topic;
                ef->partition = p->partition;
                ef->key = k;
                ef->key_len = 1 + slen;
                if (ch[i].value) {
                        ef->value = arena_dup(&e->arena, ch[i].value,
                                              ch[i].value_len);
                        ef->value_len = ch[i].value_len;
                        if (!ef->value)
                                return SG_ERR_NOMEM;
                }
                size_t idx = (size_t)(ef - e->effects);
                if (idx >= e->effect_part_size) {
                        size_t sz = e->effect_size;
                        part_t **np = realloc(e->effect_part, sz * sizeof(*np));
                        if (!np)
                                return SG_ERR_NOMEM;
                        e->effect_part = np;
                        e->effect_part_size = sz;
                }
                e->effect_part[idx] = p;
        }
        return SG_OK;
}

static void eng_delivered(void *opaque, size_t index, int64_t offset) {
        sg_engine_t *e = opaque;
        if (index >= e->effect_cnt ||
            e->effects[index].kind != SG_EFFECT_CHANGELOG ||
            index >= e->effect_part_size)
                return;
        part_t *p = e->effect_part[index];
        if (offset > p->cl_last)
                p->cl_last = offset;
}

/* The age gauges' walk over the aggregates waiting for a snapshot. */
typedef struct age_walk {
        sg_engine_t *e;
        const sg_tp_t *tp;
        int64_t stale;   /* older than this: stuck (5 minutes) */
        int64_t oldest;  /* oldest parked_at seen, 0 none */
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

static sg_err_t eng_tick(void *opaque, char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        int budget = e->conf->deadline_max_per_batch;
        for (size_t i = 0; i < e->part_cnt; i++) {
                sg_err_t err =
                    tick_part(e, &e->parts[i], &budget, errstr, errstr_size);
                if (err)
                        return err;
        }
        /* Sampled gauges, at most once a second (semantics §7: parked or
         * refetching): the gap deadline index, plus the aggregates waiting
         * for a snapshot, which are out of that index. */
        if (e->now - e->gauges_at >= 1000) {
                age_walk_t w = {.e = e, .stale = e->now - 300000};
                for (size_t i = 0; i < e->part_cnt; i++) {
                        unsigned char h[32];
                        int64_t since;
                        uint64_t n;
                        if (sg_since_first(e->txn, &e->parts[i].tp, INT64_MAX,
                                           h, &since) == SG_OK &&
                            (!w.oldest || since < w.oldest))
                                w.oldest = since;
                        if (sg_since_count(e->txn, &e->parts[i].tp, w.stale,
                                           100000, &n) == SG_OK)
                                w.stuck += n;
                        if (snap_enabled(&e->parts[i])) {
                                w.tp = &e->parts[i].tp;
                                (void)sg_snapreq_foreach(e->txn, w.tp,
                                                         age_visit, &w);
                        }
                }
                int64_t oldest = w.oldest;
                uint64_t stuck = w.stuck;
                e->delta.oldest_parked_age_ms = oldest ? e->now - oldest : 0;
                e->delta.stuck_parked_over_5m = (int64_t)stuck;
                e->gauges_at = e->now;
        } else {
                e->delta.oldest_parked_age_ms = e->metrics.oldest_parked_age_ms;
                e->delta.stuck_parked_over_5m = e->metrics.stuck_parked_over_5m;
        }
        return batch_finish(e, errstr, errstr_size);
}


/* ---- restore from the changelog (both guarantees, semantics §6) ---------
 *
 * On every assignment, before the partition's input is processed, the loop
 * reads the partition's changelog from the store's checkpoint (or from the
 * start, when the checkpoint is missing or older than the log) to its
 * read_committed end, and the engine applies each record to LMDB. The
 * restore commits every SG_RESTORE_COMMIT_EVERY records with the checkpoint
 * of what it has applied, so a crash mid-restore resumes where it stopped. */

#define SG_RESTORE_COMMIT_EVERY 100000

static sg_err_t restore_checkpoint(sg_engine_t *e, part_t *p, int64_t next,
                                   char *errstr, size_t errstr_size) {
        sg_meta_rec_t m;
        sg_err_t err = sg_meta_get(e->rtxn, &p->tp, &m);
        if (err == SG_ERR_NOT_FOUND) {
                memset(&m, 0, sizeof(m));
                snprintf(m.group, sizeof(m.group), "%s",
                         e->conf->group_id ? e->conf->group_id : "");
                m.input_offset = -1;
                m.clock_ms = engine_clock(e);
        } else if (err) {
                return err;
        }
        /* the restored meta carries the writer's key fingerprint */
        bool changed;
        if ((err = fp_check(e, p, &m, &changed, errstr, errstr_size)))
                return err;
        m.changelog_offset = next;
        m.changelog_epoch = p->cl_epoch;
        if ((err = sg_meta_put(e->rtxn, &p->tp, &m, errstr, errstr_size)))
                return err;
        err = sg_txn_commit(e->rtxn, errstr, errstr_size);
        e->rtxn = NULL;
        if (err)
                return err;
        p->meta = m;
        p->work = m;
        clock_floor(e, m.clock_ms);
        return SG_OK;
}

static sg_err_t eng_restore_begin(void *opaque, const char *topic,
                                  int32_t partition, int64_t log_start,
                                  int64_t log_end, int64_t *offsetp,
                                  char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (!p) {
                snprintf(errstr, errstr_size,
                         "restore of %s [%d] before its assignment", topic,
                         partition);
                return SG_ERR_INVALID;
        }
        sg_txn_abort(e->rtxn);
        e->rtxn = NULL;
        e->restore_cnt = 0;
        sg_err_t err = sg_txn_begin(e->store, true, &e->rtxn, errstr,
                                    errstr_size);
        if (err)
                return err;
        sg_meta_rec_t m;
        err = sg_meta_get(e->rtxn, &p->tp, &m);
        int64_t cp = err == SG_OK ? m.changelog_offset : -1;
        if (err && err != SG_ERR_NOT_FOUND) {
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                return err;
        }
        if (cp >= log_start && cp <= log_end) {
                *offsetp = cp; /* the delta only */
                p->cl_epoch = m.changelog_epoch;
                return SG_OK;
        }
        p->cl_epoch = -1;
        /* no usable checkpoint (new here, or the log moved on): rebuild the
         * partition's state from the whole changelog */
        if ((err = sg_store_partition_drop(e->rtxn, &p->tp, errstr,
                                           errstr_size))) {
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                return err;
        }
        *offsetp = log_start;
        return SG_OK;
}

static sg_err_t eng_restore_apply(void *opaque, const char *topic,
                                  int32_t partition, int64_t offset,
                                  const void *key, size_t key_len,
                                  const void *value, size_t value_len,
                                  char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        sg_err_t err = SG_OK;
        if (!p || !e->rtxn) {
                snprintf(errstr, errstr_size, "no restore open for %s [%d]",
                         topic, partition);
                err = SG_ERR_INVALID;
        } else if (key_len < 1) {
                snprintf(errstr, errstr_size,
                         "changelog %s [%d] offset %" PRId64
                         ": empty key",
                         p->tc->changelog_topic, partition, offset);
                err = SG_ERR_INVALID;
        } else {
                /* a record that does not decode (or cannot be written)
                 * stops the restore, named by changelog, partition, offset */
                const unsigned char *k = key;
                char why[400] = "";
                err = sg_store_apply_change(e->rtxn, &p->tp, k[0], k + 1,
                                            key_len - 1, value, value_len,
                                            why, sizeof(why));
                if (err)
                        snprintf(errstr, errstr_size,
                                 "changelog %s [%d] offset %" PRId64 ": %s",
                                 p->tc->changelog_topic, partition, offset,
                                 why[0] ? why : sg_err2str(err));
        }
        if (!err && ++e->restore_cnt % SG_RESTORE_COMMIT_EVERY == 0) {
                err = restore_checkpoint(e, p, offset + 1, errstr,
                                         errstr_size);
                if (!err)
                        err = sg_txn_begin(e->store, true, &e->rtxn, errstr,
                                           errstr_size);
        }
        if (err) {
                /* every error ends here: no write transaction may stay open
                 * (the loop grows the map on SG_ERR_MAP_FULL and restarts
                 * from restore_begin; anything else stops the restore) */
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
        }
        return err;
}

static sg_err_t eng_restore_end(void *opaque, const char *topic,
                                int32_t partition, int64_t end_offset,
                                char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (!p || !e->rtxn) {
                snprintf(errstr, errstr_size, "no restore open for %s [%d]",
                         topic, partition);
                return SG_ERR_INVALID;
        }
        sg_err_t err = restore_checkpoint(e, p, end_offset, errstr,
                                          errstr_size);
        if (err) {
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
        }
        return err;
}

/* at_least_once changelog fencing (kafka.h): the epoch kept with the
 * checkpoint restore_begin returned (restore_begin reads it; -1 after a full
 * restore's drop, or none), and the one to keep with the checkpoints from
 * now on. */
static int64_t eng_changelog_epoch_get(void *opaque, const char *topic,
                                       int32_t partition) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        return p ? p->cl_epoch : -1;
}

static void eng_changelog_epoch_set(void *opaque, const char *topic,
                                    int32_t partition, int64_t epoch) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (p)
                p->cl_epoch = epoch;
}

/* The committed value of the store key a changelog record names (its key:
 * the database byte, then the LMDB key without the partition prefix), for
 * the at_least_once repair (kafka.h). *valuep: malloc'd copy, or NULL when
 * the key is absent (a tombstone). No batch or restore may be open. */
static sg_err_t eng_changelog_value(void *opaque, const char *topic,
                                    int32_t partition, const void *key,
                                    size_t key_len, void **valuep,
                                    size_t *value_lenp, char *errstr,
                                    size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        *valuep = NULL;
        *value_lenp = 0;
        if (!p || key_len < 1 || e->txn || e->rtxn) {
                snprintf(errstr, errstr_size,
                         "changelog value of %s [%d]: %s", topic, partition,
                         !p ? "partition not assigned"
                         : key_len < 1 ? "empty key"
                                       : "a batch or restore is open");
                return SG_ERR_INVALID;
        }
        sg_txn_t *txn;
        sg_err_t err = sg_txn_begin(e->store, false, &txn, errstr, errstr_size);
        if (err)
                return err;
        const unsigned char *k = key;
        const void *v;
        size_t vl;
        err = sg_store_get_change(txn, &p->tp, k[0], k + 1, key_len - 1, &v,
                                  &vl);
        if (err == SG_OK) {
                if (!(*valuep = malloc(vl ? vl : 1)))
                        err = SG_ERR_NOMEM;
                else {
                        memcpy(*valuep, v, vl);
                        *value_lenp = vl;
                }
        } else if (err == SG_ERR_NOT_FOUND) {
                err = SG_OK;
        } else {
                snprintf(errstr, errstr_size,
                         "changelog value of %s [%d]: %s", topic, partition,
                         sg_err2str(err));
        }
        sg_txn_abort(txn);
        return err;
}

/* ---- batch --------------------------------------------------------------- */

static void batch_reset(sg_engine_t *e) {
        e->dk_valid = false;
        e->log_budget = SG_ENGINE_LOG_PER_BATCH;
        arena_reset(&e->arena);
        e->effect_cnt = 0;
        memset(&e->delta, 0, sizeof(e->delta));
        for (size_t i = 0; i < e->part_cnt; i++) {
                e->parts[i].work = e->parts[i].meta;
                e->parts[i].touched = false;
                e->parts[i].cl_last = -1;
        }
}

static sg_err_t eng_batch_begin(void *opaque, int64_t now_ms, char *errstr,
                                size_t errstr_size) {
        sg_engine_t *e = opaque;
        (void)now_ms; /* the engine keeps its own processing clock */
        if (e->txn) {
                sg_txn_abort(e->txn);
                e->txn = NULL;
        }
        batch_reset(e);
        e->now = engine_clock(e);
        sg_err_t err = sg_txn_begin(e->store, true, &e->txn, errstr,
                                    errstr_size);
        if (!err)
                sg_txn_capture(e->txn, true);
        return err;
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
        if (!e->txn) {
                snprintf(errstr, errstr_size, "no batch open");
                return SG_ERR_INVALID;
        }
        /* exactly_once: the store now reflects the changelog up to the
         * batch's last record (a local checkpoint, not itself logged) */
        sg_txn_capture(e->txn, false);
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                if (p->cl_last < 0)
                        continue;
                p->work.changelog_offset = p->cl_last + 1;
                if ((err = sg_meta_put(e->txn, &p->tp, &p->work, errstr,
                                       errstr_size))) {
                        sg_txn_abort(e->txn);
                        e->txn = NULL;
                        batch_reset(e);
                        return err;
                }
        }
        err = sg_txn_commit(e->txn, errstr, errstr_size);
        e->txn = NULL;
        if (err) {
                batch_reset(e);
                return err;
        }
        int64_t parked = 0, bytes = 0, quarantined = 0, snap = 0;
        for (size_t i = 0; i < e->part_cnt; i++) {
                e->parts[i].meta = e->parts[i].work;
                parked += (int64_t)e->parts[i].meta.parked_cnt;
                bytes += (int64_t)e->parts[i].meta.parked_bytes;
                quarantined += (int64_t)e->parts[i].meta.quarantined;
                snap += (int64_t)e->parts[i].meta.snap_in_flight;
        }
        e->delta.snapshot_in_flight = snap;
        e->delta.parked_events = parked;
        e->delta.parked_bytes = bytes;
        e->delta.quarantined_aggregates = quarantined;
        sg_metrics_add(&e->metrics, &e->delta);
        refusals_settle(e, true);
        batch_reset(e);
        return SG_OK;
}

static void eng_batch_abort(void *opaque) {
        sg_engine_t *e = opaque;
        sg_txn_abort(e->txn);
        e->txn = NULL;
        refusals_settle(e, false);
        batch_reset(e);
}

static sg_err_t eng_grow(void *opaque, char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        return sg_store_grow(e->store, errstr, errstr_size);
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
        proc->assign = eng_assign;
        proc->revoke = eng_revoke;
        proc->position = eng_position;
        proc->delivered = eng_delivered;
        proc->size_limit = eng_size_limit;
        proc->refused = eng_refused;
        proc->restore_begin = eng_restore_begin;
        proc->restore_apply = eng_restore_apply;
        proc->restore_end = eng_restore_end;
        proc->changelog_epoch_get = eng_changelog_epoch_get;
        proc->changelog_epoch_set = eng_changelog_epoch_set;
        proc->changelog_value = eng_changelog_value;
}
