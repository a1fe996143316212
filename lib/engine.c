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
} part_t;

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

        /* the dedup record judge() read for the current record */
        bool dk_valid, dk_found;
        unsigned char dk_hash[32];
        sg_dedup_rec_t dk_rec;
};

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t engine_clock(sg_engine_t *e) {
        if (e->clock_fixed)
                return e->clock_fixed;
        return e->base_wall + (mono_ms() - e->base_mono) + e->clock_skew;
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
        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const sg_state_machine_t *sm = &conf->topics[i].sm;
                if (!sm->enabled)
                        continue;
                for (size_t j = 0; j < sm->state_cnt; j++) {
                        if (strlen(sm->states[j]) >= SG_STATE_MAX) {
                                snprintf(errstr, errstr_size,
                                         "topics.%s.state_machine.states: "
                                         "state \"%.32s...\" is longer than "
                                         "%d bytes",
                                         conf->topics[i].name, sm->states[j],
                                         SG_STATE_MAX - 1);
                                return SG_ERR_CONFIG;
                        }
                }
        }
        sg_engine_t *e = calloc(1, sizeof(*e));
        if (!e)
                return SG_ERR_NOMEM;
        e->conf = conf;
        e->store = store;
        e->base_wall = wall_ms();
        e->base_mono = mono_ms();
        sg_envelope_init(&e->env);
        *enginep = e;
        return SG_OK;
}

void sg_engine_destroy(sg_engine_t *e) {
        if (!e)
                return;
        sg_txn_abort(e->txn);
        arena_free(&e->arena);
        free(e->effects);
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
        p->work = p->meta;
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

static sg_err_t eng_assign(void *opaque, const char *topic, int32_t partition,
                           const char *group, int64_t *offsetp, char *errstr,
                           size_t errstr_size) {
        sg_engine_t *e = opaque;
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
                memset(&m, 0, sizeof(m));
                snprintf(m.group, sizeof(m.group), "%s", group ? group : "");
                m.input_offset = -1;
                m.changelog_offset = -1;
                m.clock_ms = engine_clock(e);
                if ((err = sg_meta_put(txn, &p->tp, &m, errstr, errstr_size)) ||
                    (err = sg_txn_commit(txn, errstr, errstr_size))) {
                        return err;
                }
                txn = NULL;
        } else if (err) {
                sg_txn_abort(txn);
                snprintf(errstr, errstr_size,
                         "store of %s [%d]: cannot read partition meta", topic,
                         partition);
                return err;
        } else {
                sg_txn_abort(txn);
                if (group && m.group[0] && strcmp(m.group, group) != 0) {
                        snprintf(errstr, errstr_size,
                                 "store of %s [%d] belongs to consumer group "
                                 "\"%s\", not \"%s\": refusing to process it "
                                 "(one instance per group until the changelog "
                                 "exists; drop the data_dir to rebuild)",
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

static void eng_revoke(void *opaque, const char *topic, int32_t partition) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, topic, partition);
        if (!p)
                return;
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
                e->effect_size = n;
        }
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

static sg_err_t emit_output(sg_engine_t *e, const subject_t *s,
                            const char *gap_hdr, const char *gap_val) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = effect_new(e);
        sg_header_t *x = arena_alloc(&e->arena, 2 * sizeof(*x));
        char *src = arena_printf(&e->arena, "%s/%" PRId32 "/%" PRId64,
                                 s->part->topic, s->part->partition, s->offset);
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
        e->delta.applied_total++;
        return SG_OK;
}

typedef struct dlq_info {
        sg_reason_t reason;
        const char *detail;
        const char *aggregate;    /* may be NULL */
        bool has_versions;
        uint64_t expected, actual;
        const char *state;        /* may be NULL */
} dlq_info_t;

static sg_err_t emit_dlq(sg_engine_t *e, const subject_t *s,
                         const dlq_info_t *d) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = effect_new(e);
        sg_header_t *x = arena_alloc(&e->arena, 12 * sizeof(*x));
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
#undef H
#undef COPY
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

typedef struct agg_ctx {
        unsigned char hash[32];
        sg_agg_rec_t rec;
        int64_t old_since;
        bool exists;
} agg_ctx_t;

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
                a->exists = false;
                err = SG_OK;
        } else {
                a->exists = true;
        }
        a->old_since = a->rec.parked_since_ms;
        return err;
}

static sg_err_t agg_save(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                         char *errstr, size_t errstr_size) {
        sg_err_t err = sg_agg_put(e->txn, &p->tp, a->hash, &a->rec,
                                  a->old_since, errstr, errstr_size);
        if (!err) {
                a->old_since = a->rec.parked_since_ms;
                a->exists = true;
        }
        return err;
}

/* The next version the aggregate expects. */
static uint64_t agg_next(const part_t *p, const agg_ctx_t *a) {
        return a->rec.has_last ? a->rec.last_version + 1
                               : p->tc->first_version;
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
                        a->rec.last_version = v;
                        a->rec.has_last = true;
                        *verdictp = SG_DV_DLQ;
                        (void)errstr;
                        (void)errstr_size;
                        return SG_OK;
                }
                snprintf(a->rec.state, sizeof(a->rec.state), "%s", t->to);
        }
        if ((err = emit_output(e, s, gap_hdr, gap_val)))
                return err;
        a->rec.last_version = v;
        a->rec.has_last = true;
        *verdictp = SG_DV_APPLIED;
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
                const unsigned char *b = blob;
                size_t cnt = ((size_t)b[0] << 24) | ((size_t)b[1] << 16) |
                             ((size_t)b[2] << 8) | b[3];
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

/* Removes parked (agg, v) after reading it into a subject. */
static sg_err_t unpark(sg_engine_t *e, part_t *p, agg_ctx_t *a, uint64_t v,
                       const sg_parked_rec_t *r, subject_t *s, char **typep,
                       unsigned char kh[32], char *errstr,
                       size_t errstr_size) {
        size_t bytes = (r->key ? r->key_len : 0) +
                       (r->value ? r->value_len : 0) +
                       (r->headers ? r->headers_len : 0);
        memcpy(kh, r->key_hash, 32);
        sg_err_t err = subject_from_parked(e, p, r, s, typep);
        if (err)
                return err;
        if ((err = sg_parked_del(e->txn, &p->tp, a->hash, v, errstr,
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

/* Releases parked L+1, L+2, ... through rows 6–7 (semantics §3 drain). */
static sg_err_t drain(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                      size_t errstr_size) {
        sg_err_t err;
        bool changed = false;
        while (a->rec.parked_cnt > 0) {
                uint64_t v = agg_next(p, a);
                sg_parked_rec_t r;
                err = sg_parked_get(e->txn, &p->tp, a->hash, v, &r);
                if (err == SG_ERR_NOT_FOUND)
                        break;
                if (err)
                        return err;
                subject_t s;
                char *type;
                unsigned char kh[32];
                if ((err = unpark(e, p, a, v, &r, &s, &type, kh, errstr,
                                  errstr_size)))
                        return err;
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
        if (changed)
                return refresh_since(e, p, a);
        return SG_OK;
}

/* ---- process ------------------------------------------------------------ */

/* Formats ms since the epoch as ISO 8601 UTC into @p buf (40 bytes). */
static const char *iso_time(int64_t ms, char *buf) {
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&sec, &tm);
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%03dZ", (int)(ms % 1000));
        return buf;
}

static bool header_has(const sg_record_t *rec, const char *name) {
        for (size_t i = 0; i < rec->header_cnt; i++)
                if (strcmp(rec->headers[i].name, name) == 0)
                        return true;
        return false;
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
                                env->id, iso_time(dr.first_seen_ms, ts)),
                        };
                        e->delta.idempotency_parameter_conflicts_total++;
                        return emit_dlq(e, &s, &d);
                }
                bool replay = dr.verdict == SG_DV_DLQ &&
                              header_has(rec, SG_H_REPLAY);
                if (!replay) {
                        e->delta.dedup_hits_total++;
                        return SG_OK;
                }
        }

        /* Dedup-only topics, ordering mode none: apply. */
        if (tc->order_mode == SG_ORDER_NONE || !env->has_version ||
            !env->aggregate) {
                if ((err = emit_output(e, &s, NULL, NULL)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest,
                                  SG_DV_APPLIED, errstr, errstr_size);
        }

        agg_ctx_t a;
        if ((err = agg_load(e, p, env->aggregate, env->aggregate_len, &a)))
                return err;
        uint64_t v = env->version;
        uint64_t next = agg_next(p, &a);
        dlq_info_t d = {.aggregate = a.rec.aggregate,
                        .has_versions = true,
                        .expected = next,
                        .actual = v,
                        .state = a.rec.state};

        /* Row 4: quarantined. */
        if (a.rec.flags & SG_AGG_QUARANTINED) {
                d.reason = SG_R_AGGREGATE_QUARANTINED;
                d.detail = "aggregate is quarantined after a gap timeout; "
                           "its events wait in the DLQ for an operator";
                if ((err = emit_dlq(e, &s, &d)))
                        return err;
                return record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }

        /* New aggregate above F under trust_first_seen: adopt it. */
        if (!a.rec.has_last && v > next &&
            tc->new_aggregate == SG_NEWAGG_TRUST_FIRST_SEEN &&
            a.rec.parked_cnt == 0)
                next = v;

        /* Row 5: stale. */
        if (v < next) {
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
                return agg_save(e, p, &a, errstr, errstr_size);
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
        return agg_save(e, p, &a, errstr, errstr_size);
}

static sg_err_t eng_process(void *opaque, const sg_record_t *rec,
                            sg_process_result_t *result, char *errstr,
                            size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = part_find(e, rec->topic, rec->partition);
        if (!p) {
                int64_t off;
                sg_err_t err = eng_assign(e, rec->topic, rec->partition,
                                          e->conf->group_id, &off, errstr,
                                          errstr_size);
                if (err)
                        return err;
                p = part_find(e, rec->topic, rec->partition);
        }
        sg_err_t err = judge(e, p, rec, result, errstr, errstr_size);
        e->dk_valid = false; /* the cache is only for this record */
        if (err)
                return err;
        p->touched = true;
        if (*result == SG_PROCESSED)
                p->work.input_offset = rec->offset + 1;
        return SG_OK;
}

/* ---- gap deadlines ------------------------------------------------------- */

static sg_err_t gap_fire(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                         char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        uint64_t next = agg_next(p, a);
        e->delta.gap_timeouts_total++;
        p->touched = true;
        if (tc->gap_policy == SG_GAP_SKIP) {
                uint64_t low;
                if ((err = sg_parked_first(e->txn, &p->tp, a->hash, &low,
                                           NULL)))
                        return err == SG_ERR_NOT_FOUND ? SG_OK : err;
                if (low > next) {
                        a->rec.skip_from = next;
                        a->rec.skip_to = low - 1;
                        e->delta.skipped_versions_total += low - next;
                }
                a->rec.last_version = low - 1;
                a->rec.has_last = true;
                if ((err = drain(e, p, a, errstr, errstr_size)))
                        return err;
                return agg_save(e, p, a, errstr, errstr_size);
        }
        /* gap_policy dlq: everything parked goes to the DLQ, in version
         * order, and the aggregate is quarantined (row 4). */
        int64_t waited = e->now - a->rec.parked_since_ms;
        while (a->rec.parked_cnt > 0) {
                uint64_t v;
                sg_parked_rec_t r;
                err = sg_parked_first(e->txn, &p->tp, a->hash, &v, &r);
                if (err == SG_ERR_NOT_FOUND)
                        break;
                if (err)
                        return err;
                subject_t s;
                char *type;
                unsigned char kh[32];
                if ((err = unpark(e, p, a, v, &r, &s, &type, kh, errstr,
                                  errstr_size)))
                        return err;
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
        a->rec.parked_cnt = 0;
        a->rec.parked_bytes = 0;
        a->rec.parked_since_ms = 0;
        if (!(a->rec.flags & SG_AGG_QUARANTINED)) {
                a->rec.flags |= SG_AGG_QUARANTINED;
                p->work.quarantined++;
        }
        return agg_save(e, p, a, errstr, errstr_size);
}

static sg_err_t tick_part(sg_engine_t *e, part_t *p, int *budget,
                          char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        if (tc->order_mode == SG_ORDER_STRICT && tc->gap_policy != SG_GAP_HOLD) {
                while (*budget > 0) {
                        agg_ctx_t a;
                        int64_t since;
                        err = sg_since_first(e->txn, &p->tp,
                                             e->now - tc->gap_timeout_ms,
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
                        if (a.rec.parked_since_ms != since ||
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
                        if ((err = gap_fire(e, p, &a, errstr, errstr_size)))
                                return err;
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

static sg_err_t eng_tick(void *opaque, char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        int budget = e->conf->deadline_max_per_batch;
        for (size_t i = 0; i < e->part_cnt; i++) {
                sg_err_t err =
                    tick_part(e, &e->parts[i], &budget, errstr, errstr_size);
                if (err)
                        return err;
        }
        /* Sampled gauges from the deadline index, at most once a second. */
        if (e->now - e->gauges_at >= 1000) {
                int64_t oldest = 0;
                uint64_t stuck = 0;
                for (size_t i = 0; i < e->part_cnt; i++) {
                        unsigned char h[32];
                        int64_t since;
                        uint64_t n;
                        if (sg_since_first(e->txn, &e->parts[i].tp, INT64_MAX,
                                           h, &since) == SG_OK &&
                            (!oldest || since < oldest))
                                oldest = since;
                        if (sg_since_count(e->txn, &e->parts[i].tp,
                                           e->now - 300000, 100000,
                                           &n) == SG_OK)
                                stuck += n;
                }
                e->delta.oldest_parked_age_ms = oldest ? e->now - oldest : 0;
                e->delta.stuck_parked_over_5m = (int64_t)stuck;
                e->gauges_at = e->now;
        } else {
                e->delta.oldest_parked_age_ms = e->metrics.oldest_parked_age_ms;
                e->delta.stuck_parked_over_5m = e->metrics.stuck_parked_over_5m;
        }
        return SG_OK;
}

/* ---- batch --------------------------------------------------------------- */

static void batch_reset(sg_engine_t *e) {
        e->dk_valid = false;
        arena_reset(&e->arena);
        e->effect_cnt = 0;
        memset(&e->delta, 0, sizeof(e->delta));
        for (size_t i = 0; i < e->part_cnt; i++) {
                e->parts[i].work = e->parts[i].meta;
                e->parts[i].touched = false;
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
        return sg_txn_begin(e->store, true, &e->txn, errstr, errstr_size);
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
        for (size_t i = 0; i < e->part_cnt; i++) {
                part_t *p = &e->parts[i];
                if (!p->touched)
                        continue;
                p->work.clock_ms = e->now;
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
        int64_t parked = 0, bytes = 0, quarantined = 0;
        for (size_t i = 0; i < e->part_cnt; i++) {
                e->parts[i].meta = e->parts[i].work;
                parked += (int64_t)e->parts[i].meta.parked_cnt;
                bytes += (int64_t)e->parts[i].meta.parked_bytes;
                quarantined += (int64_t)e->parts[i].meta.quarantined;
        }
        e->delta.parked_events = parked;
        e->delta.parked_bytes = bytes;
        e->delta.quarantined_aggregates = quarantined;
        sg_metrics_add(&e->metrics, &e->delta);
        batch_reset(e);
        return SG_OK;
}

static void eng_batch_abort(void *opaque) {
        sg_engine_t *e = opaque;
        sg_txn_abort(e->txn);
        e->txn = NULL;
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
}
