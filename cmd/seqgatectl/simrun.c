/*
 * simrun.c — the engine run offline over a stream of records (simrun.h):
 * one batch per record, driven by the offline driver (drive.h), which runs
 * the batch protocol as kafka_batch.c runs it.
 */
#include "simrun.h"

#include "config.h"
#include "drive.h"
#include "engine.h"
#include "envelope.h"
#include "metrics.h"
#include "processor.h"
#include "seqgate.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A partition the runner was given records of. */
typedef struct sim_part {
        char *topic;
        int32_t partition;
        int64_t last_offset; /* -1: none yet */
} sim_part_t;

/* A snapshot request sent and not answered. */
typedef struct sim_get {
        char *request_id;
        char *url;               /* http */
        const char *reply_topic; /* kafka: where the reply goes (conf's);
                                    NULL: http */
} sim_get_t;

/* One verdict whose strings the runner owns (copied from effects, which
 * live only until batch_commit). */
typedef struct sim_v {
        sg_sim_verdict_t v;
        char *s[10]; /* owned strings, freed after the callback */
        size_t s_cnt;
        bool own;    /* about the batch's input record */
        bool is_get; /* a snapshot request, sent after batch_commit */
        const char *reply_topic; /* kafka request: its reply topic */
} sim_v_t;

struct sg_sim {
        const sg_config_t *conf;
        sg_drive_t *drive;
        sg_store_t *store; /* the driver's */
        sg_engine_t *eng;  /* the driver's */
        sg_sim_cb *cb;
        sg_sim_lag_cb *lag;
        void *opaque;
        int64_t now;
        sim_part_t *parts;
        size_t part_cnt;
        sg_metrics_t last; /* committed metrics after the previous batch */
        bool paused;       /* the last batch kept its record (SG_PAUSE) */
        sim_get_t *gets;
        size_t get_cnt;
        sim_v_t *vs;
        size_t v_cnt, v_cap;
        const char *reply_rid; /* the request a reply batch answers */
};

static sg_err_t on_effects(void *opaque, const sg_record_t *origin,
                           const sg_effect_t *efs, const int64_t *offsets,
                           size_t cnt, char *errstr, size_t errstr_size);
static void on_committed(void *opaque, const sg_drive_batch_t *b);

static int64_t on_lag(void *opaque, const char *topic, int32_t partition) {
        sg_sim_t *s = opaque;
        return s->lag(s->opaque, topic, partition);
}

sg_err_t sg_sim_new(const sg_config_t *conf, int64_t now_ms, sg_sim_cb *cb,
                    sg_sim_lag_cb *lag, void *opaque, sg_sim_t **simp,
                    char *errstr, size_t errstr_size) {
        sg_sim_t *s = calloc(1, sizeof(*s));
        if (!s)
                return SG_ERR_NOMEM;
        s->conf = conf;
        s->cb = cb;
        s->lag = lag;
        s->opaque = opaque;
        s->now = now_ms;
        const sg_drive_hooks_t hooks = {.opaque = s,
                                        .effects = on_effects,
                                        .committed = on_committed,
                                        .lag = lag ? on_lag : NULL};
        sg_err_t err = sg_drive_new(conf, NULL, "seqgate-simulate.",
                                    "seqgatectl-simulate", &hooks, &s->drive,
                                    errstr, errstr_size);
        if (err) {
                sg_sim_destroy(s);
                return err;
        }
        s->eng = sg_drive_engine(s->drive);
        s->store = sg_drive_store(s->drive);
        sg_engine_set_clock(s->eng, now_ms);
        s->last = *sg_engine_metrics(s->eng);
        *simp = s;
        return SG_OK;
}

void sg_sim_destroy(sg_sim_t *s) {
        if (!s)
                return;
        sg_drive_destroy(s->drive);
        for (size_t i = 0; i < s->part_cnt; i++)
                free(s->parts[i].topic);
        for (size_t i = 0; i < s->get_cnt; i++) {
                free(s->gets[i].request_id);
                free(s->gets[i].url);
        }
        free(s->parts);
        free(s->gets);
        free(s->vs);
        free(s);
}

int64_t sg_sim_clock(const sg_sim_t *s) {
        return s->now;
}

/* ---- verdict building ---------------------------------------------------- */

static sim_v_t *v_new(sg_sim_t *s, const char *kind, const char *verdict) {
        if (s->v_cnt == s->v_cap) {
                size_t cap = s->v_cap ? 2 * s->v_cap : 16;
                sim_v_t *n = realloc(s->vs, cap * sizeof(*n));
                if (!n)
                        return NULL;
                s->vs = n;
                s->v_cap = cap;
        }
        sim_v_t *v = &s->vs[s->v_cnt++];
        memset(v, 0, sizeof(*v));
        v->v.kind = kind;
        v->v.verdict = verdict;
        v->v.partition = -1;
        v->v.offset = -1;
        return v;
}

/* A copy of @p len bytes at @p p owned by @p v (NULL: out of memory or no
 * room; the field then stays unknown). */
static const char *v_str(sim_v_t *v, const void *p, size_t len) {
        if (!p || v->s_cnt == sizeof(v->s) / sizeof(v->s[0]))
                return NULL;
        char *c = strndup(p, len);
        if (c)
                v->s[v->s_cnt++] = c;
        return c;
}

static void v_free_all(sg_sim_t *s) {
        for (size_t i = 0; i < s->v_cnt; i++)
                for (size_t j = 0; j < s->vs[i].s_cnt; j++)
                        free(s->vs[i].s[j]);
        s->v_cnt = 0;
}

static const sg_header_t *hdr_find(const sg_header_t *h, size_t cnt,
                                   const char *name) {
        const sg_header_t *found = NULL;
        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(h[i].name, name))
                        found = &h[i]; /* the last one wins (envelope.h) */
        return found;
}

static bool hdr_i64(const sg_header_t *h, int64_t *out) {
        char buf[32];
        if (!h || !h->value || h->value_len == 0 || h->value_len >= sizeof(buf))
                return false;
        memcpy(buf, h->value, h->value_len);
        buf[h->value_len] = '\0';
        char *end;
        long long n = strtoll(buf, &end, 10);
        if (*end)
                return false;
        *out = n;
        return true;
}

/* Parses "topic/partition/offset" (SG_H_SOURCE). */
static bool source_parse(const sg_header_t *h, char *topic, size_t size,
                         int32_t *partition, int64_t *offset) {
        if (!h || !h->value)
                return false;
        const char *b = h->value, *e = b + h->value_len, *s2 = NULL, *s1 = NULL;
        for (const char *c = e; c > b; c--)
                if (c[-1] == '/') {
                        if (!s2)
                                s2 = c - 1;
                        else {
                                s1 = c - 1;
                                break;
                        }
                }
        if (!s1 || (size_t)(s1 - b) >= size)
                return false;
        char num[32];
        size_t n = (size_t)(s2 - s1 - 1);
        if (n == 0 || n >= sizeof(num))
                return false;
        memcpy(num, s1 + 1, n);
        num[n] = '\0';
        *partition = (int32_t)strtol(num, NULL, 10);
        n = (size_t)(e - s2 - 1);
        if (n == 0 || n >= sizeof(num))
                return false;
        memcpy(num, s2 + 1, n);
        num[n] = '\0';
        *offset = strtoll(num, NULL, 10);
        memcpy(topic, b, (size_t)(s1 - b));
        topic[s1 - b] = '\0';
        return true;
}

/* Aggregate, version and type of a record of input topic @p topic, read
 * as the engine reads them (sg_envelope_parse); nothing when it is not
 * readable. */
static void v_envelope(sg_sim_t *s, sim_v_t *v, const char *topic,
                       const sg_record_t *rec) {
        const sg_topic_config_t *tc =
                topic ? sg_config_topic(s->conf, topic) : NULL;
        if (!tc)
                return;
        sg_envelope_t env;
        char es[256];
        sg_envelope_init(&env);
        if (sg_envelope_parse(tc, rec, &env, es, sizeof(es)) == SG_OK) {
                if (env.aggregate && !v->v.aggregate)
                        v->v.aggregate =
                                v_str(v, env.aggregate, env.aggregate_len);
                if (env.has_version && !v->v.has_version) {
                        v->v.has_version = true;
                        v->v.version = env.version;
                }
                if (env.type && !v->v.type)
                        v->v.type = v_str(v, env.type, strlen(env.type));
        }
        sg_envelope_clear(&env);
}

/* The reply topic of the kafka snapshot source whose request topic is
 * @p topic, NULL if none. */
static const char *reply_topic_of(const sg_sim_t *s, const char *topic) {
        for (size_t i = 0; i < s->conf->topic_cnt; i++) {
                const sg_snapshot_config_t *sc = &s->conf->topics[i].snapshot;
                if (sc->source == SG_SNAP_KAFKA && sc->request_topic &&
                    !strcmp(sc->request_topic, topic))
                        return sc->reply_topic;
        }
        return NULL;
}

/* The verdict an effect stands for (whether it is about the batch's
 * record, v_own, is told once the batch committed). */
static sg_err_t v_effect(sg_sim_t *s, const sg_effect_t *ef) {
        sim_v_t *v = v_new(s, "effect", "output");
        if (!v)
                return SG_ERR_NOMEM;
        const sg_record_t as_rec = {
                .topic = ef->topic,
                .partition = ef->partition,
                .offset = -1,
                .timestamp_ms = ef->timestamp_ms,
                .key = ef->key,
                .key_len = ef->key_len,
                .value = ef->value,
                .value_len = ef->value_len,
                .headers = ef->headers,
                .header_cnt = ef->header_cnt,
        };
        char topic[256];
        int32_t part = -1;
        int64_t off = -1;
        if (ef->kind == SG_EFFECT_HTTP_GET) {
                v->v.verdict = "snapshot_request";
                v->v.request_id =
                        v_str(v, ef->request_id, strlen(ef->request_id));
                v->v.url = v_str(v, ef->url, strlen(ef->url));
                v->is_get = true;
                return SG_OK;
        }
        if (ef->kind == SG_EFFECT_DLQ) {
                v->v.verdict = "dlq";
                const sg_header_t *x = ef->extra;
                size_t n = ef->extra_cnt;
                const sg_header_t *h;
                if ((h = hdr_find(x, n, SG_DLQ_H_REASON)))
                        v->v.reason = v_str(v, h->value, h->value_len);
                if ((h = hdr_find(x, n, SG_DLQ_H_DETAIL)))
                        v->v.detail = v_str(v, h->value, h->value_len);
                if ((h = hdr_find(x, n, SG_DLQ_H_AGGREGATE)))
                        v->v.aggregate = v_str(v, h->value, h->value_len);
                int64_t ver;
                if ((h = hdr_find(x, n, SG_DLQ_H_ACTUAL)) && hdr_i64(h, &ver) &&
                    ver >= 0) {
                        v->v.has_version = true;
                        v->v.version = (uint64_t)ver;
                }
                int64_t p64 = -1;
                const sg_header_t *ht = hdr_find(x, n, SG_DLQ_H_TOPIC);
                if (ht && ht->value_len < sizeof(topic) &&
                    hdr_i64(hdr_find(x, n, SG_DLQ_H_PARTITION), &p64) &&
                    hdr_i64(hdr_find(x, n, SG_DLQ_H_OFFSET), &off)) {
                        memcpy(topic, ht->value, ht->value_len);
                        topic[ht->value_len] = '\0';
                        part = (int32_t)p64;
                        v->v.topic = v_str(v, topic, strlen(topic));
                        v->v.partition = part;
                        v->v.offset = off;
                        v_envelope(s, v, topic, &as_rec);
                }
        } else if ((v->reply_topic = reply_topic_of(s, ef->topic))) {
                /* a request record (snapsrc_kafka.c): its request_id */
                v->v.verdict = "snapshot_request";
                v->v.aggregate = v_str(v, ef->key, ef->key_len);
                cJSON *j = cJSON_ParseWithLength(ef->value, ef->value_len);
                const cJSON *r =
                        cJSON_GetObjectItemCaseSensitive(j, "request_id");
                if (cJSON_IsString(r))
                        v->v.request_id = v_str(v, r->valuestring,
                                                strlen(r->valuestring));
                cJSON_Delete(j);
                v->is_get = true;
                return SG_OK;
        } else {
                const sg_header_t *x = ef->extra;
                size_t n = ef->extra_cnt;
                const sg_header_t *h = hdr_find(x, n, SG_H_SNAPSHOT);
                int64_t S;
                if (h && hdr_i64(h, &S)) {
                        v->v.verdict = "snapshot";
                        v->v.aggregate = v_str(v, ef->key, ef->key_len);
                        v->v.has_version = true;
                        v->v.version = (uint64_t)S;
                        if ((h = hdr_find(x, n, SG_H_SNAPSHOT_STATE)))
                                v->v.state = v_str(v, h->value, h->value_len);
                        return SG_OK;
                }
                if ((h = hdr_find(x, n, SG_H_GAP_SKIPPED)) ||
                    (h = hdr_find(x, n, SG_H_GAP_MISSING)))
                        v->v.detail = v_str(v, h->value, h->value_len);
                if (source_parse(hdr_find(x, n, SG_H_SOURCE), topic,
                                 sizeof(topic), &part, &off)) {
                        v->v.verdict = "released";
                        v->v.topic = v_str(v, topic, strlen(topic));
                        v->v.partition = part;
                        v->v.offset = off;
                        v_envelope(s, v, topic, &as_rec);
                }
        }
        return SG_OK;
}

/* Whether effect verdict @p v is about @p rec, the batch's input record
 * (NULL: a tick-only batch): then it is the record's own verdict. */
static void v_own(sim_v_t *v, const sg_record_t *rec) {
        if (v->is_get || !rec || !v->v.topic ||
            strcmp(rec->topic, v->v.topic) ||
            v->v.partition != rec->partition || v->v.offset != rec->offset)
                return;
        v->own = true;
        if (!strcmp(v->v.verdict, "released"))
                v->v.verdict = "applied";
}

/* Version the aggregate of @p v waits for (L + 1), read from the committed
 * store. */
static void v_waiting_for(sg_sim_t *s, sim_v_t *v) {
        if (!v->v.aggregate || !v->v.topic)
                return;
        sg_txn_t *txn;
        char es[256];
        if (sg_txn_begin(s->store, false, &txn, es, sizeof(es)))
                return;
        sg_tp_t tp;
        sg_tp_make(&tp, v->v.topic, v->v.partition);
        unsigned char ah[SG_HASH_LEN];
        sg_sha256(v->v.aggregate, strlen(v->v.aggregate), ah);
        sg_agg_rec_t r;
        const sg_topic_config_t *tc = sg_config_topic(s->conf, v->v.topic);
        if (sg_agg_get(txn, &tp, ah, &r) == SG_OK && (r.has_last || tc)) {
                /* a new aggregate waits for its first version (F) */
                v->v.has_waiting_for = true;
                v->v.waiting_for =
                        r.has_last ? r.last_version + 1 : tc->first_version;
        }
        sg_txn_abort(txn);
}

/* The aggregate a request id ("topic/partition/<agg hash>/seq", engine
 * refetch) is for, from the committed store. */
static void v_request_aggregate(sg_sim_t *s, sim_v_t *v) {
        const char *rid = v->v.request_id;
        if (!rid)
                return;
        const char *sl[3] = {NULL, NULL, NULL}; /* last three slashes */
        for (const char *c = rid + strlen(rid); c > rid; c--)
                if (c[-1] == '/') {
                        if (!sl[2])
                                sl[2] = c - 1;
                        else if (!sl[1])
                                sl[1] = c - 1;
                        else {
                                sl[0] = c - 1;
                                break;
                        }
                }
        if (!sl[0] || sl[2] - sl[1] - 1 != 2 * SG_HASH_LEN)
                return;
        char topic[256];
        if ((size_t)(sl[0] - rid) >= sizeof(topic))
                return;
        memcpy(topic, rid, (size_t)(sl[0] - rid));
        topic[sl[0] - rid] = '\0';
        int32_t part = (int32_t)strtol(sl[0] + 1, NULL, 10);
        unsigned char ah[SG_HASH_LEN];
        for (size_t i = 0; i < SG_HASH_LEN; i++) {
                unsigned int b;
                if (sscanf(sl[1] + 1 + 2 * i, "%2x", &b) != 1)
                        return;
                ah[i] = (unsigned char)b;
        }
        sg_txn_t *txn;
        char es[256];
        if (sg_txn_begin(s->store, false, &txn, es, sizeof(es)))
                return;
        sg_tp_t tp;
        sg_tp_make(&tp, topic, part);
        sg_agg_rec_t r;
        if (sg_agg_get(txn, &tp, ah, &r) == SG_OK) {
                v->v.aggregate = v_str(v, r.aggregate, r.aggregate_len);
                v->v.topic = v_str(v, topic, strlen(topic));
                v->v.partition = part;
        }
        sg_txn_abort(txn);
}

/* The record's own verdict when no effect is its own: what the committed
 * counters say the engine did (metrics.h). */
static const char *delta_verdict(const sg_metrics_t *a, const sg_metrics_t *b,
                                 bool reply) {
        if (reply)
                return "snapshot_reply";
        if (b->dedup_hits_total > a->dedup_hits_total)
                return "duplicate";
        if (b->parked_total > a->parked_total)
                return "parked";
        if (b->stale_version_rejections_total >
            a->stale_version_rejections_total)
                return "stale_dropped";
        if (b->snapshot_superseded_total > a->snapshot_superseded_total)
                return "superseded";
        if (b->releases_total > a->releases_total)
                return "release";
        if (b->control_ignored_total > a->control_ignored_total)
                return "control_refused";
        return "none";
}

/* What a snapshot reply did, from the counters. */
static const char *reply_detail(const sg_metrics_t *a, const sg_metrics_t *b) {
        if (b->snapshot_applied_total > a->snapshot_applied_total)
                return "applied";
        if (b->snapshot_failures_total > a->snapshot_failures_total)
                return "failed";
        if (b->snapshot_late_total > a->snapshot_late_total)
                return "late (S < L)";
        return "ignored";
}

/* ---- one batch -------------------------------------------------------- */

/* The driver's effects hook: each effect's verdict, its strings copied
 * (effects live only until batch_commit). */
static sg_err_t on_effects(void *opaque, const sg_record_t *origin,
                           const sg_effect_t *efs, const int64_t *offsets,
                           size_t cnt, char *errstr, size_t errstr_size) {
        sg_sim_t *s = opaque;
        (void)origin;
        (void)offsets;
        for (size_t i = 0; i < cnt; i++)
                if (efs[i].kind != SG_EFFECT_CHANGELOG &&
                    v_effect(s, &efs[i]) != SG_OK) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        return SG_ERR_NOMEM;
                }
        return SG_OK;
}

/* The record's own verdict, then the effects', once a batch committed
 * (the driver's committed hook): the record's from its own effect, or
 * from what the committed counters say the engine did. */
static void on_committed(void *opaque, const sg_drive_batch_t *b) {
        sg_sim_t *s = opaque;
        const sg_record_t *rec = b->cnt ? &b->recs[0] : NULL;
        sg_process_result_t res = b->cnt ? b->results[0] : SG_PROCESSED;
        const sg_metrics_t *after = sg_engine_metrics(s->eng);
        for (size_t i = 0; i < s->v_cnt; i++)
                v_own(&s->vs[i], rec);
        if (rec)
                for (size_t i = 0; i < s->part_cnt; i++)
                        if (res == SG_PROCESSED &&
                            s->parts[i].partition == rec->partition &&
                            !strcmp(s->parts[i].topic, rec->topic))
                                s->parts[i].last_offset = rec->offset;
        s->paused = res == SG_PAUSE;
        /* the record's own verdict first, then the effects in order */
        if (rec) {
                sim_v_t *own = NULL;
                for (size_t i = 0; i < s->v_cnt && !own; i++)
                        if (s->vs[i].own)
                                own = &s->vs[i];
                sim_v_t mine;
                memset(&mine, 0, sizeof(mine));
                if (!own) {
                        bool reply =
                                !strcmp(rec->topic, SG_SNAPSHOT_HTTP_TOPIC) ||
                                !sg_config_topic(s->conf, rec->topic);
                        own = &mine;
                        own->v.kind = "record";
                        own->v.verdict =
                                res == SG_PAUSE
                                        ? "paused"
                                        : delta_verdict(&s->last, after, reply);
                        if (reply) {
                                own->v.detail = reply_detail(&s->last, after);
                                if (s->reply_rid) {
                                        own->v.request_id =
                                                v_str(own, s->reply_rid,
                                                      strlen(s->reply_rid));
                                        v_request_aggregate(s, own);
                                }
                        }
                }
                own->v.kind = "record";
                own->v.topic = rec->topic;
                own->v.partition = rec->partition;
                own->v.offset = rec->offset;
                v_envelope(s, own, rec->topic, rec);
                if (!strcmp(own->v.verdict, "parked"))
                        v_waiting_for(s, own);
                s->cb(s->opaque, &own->v);
                for (size_t j = 0; j < mine.s_cnt; j++)
                        free(mine.s[j]);
        }
        s->last = *after;
        for (size_t i = 0; i < s->v_cnt; i++) {
                sim_v_t *v = &s->vs[i];
                if (v->own)
                        continue;
                if (v->is_get) {
                        v_request_aggregate(s, v);
                        /* started now, after batch_commit (processor.h) */
                        sim_get_t *n =
                                realloc(s->gets, (s->get_cnt + 1) * sizeof(*n));
                        if (n) {
                                s->gets = n;
                                n[s->get_cnt].request_id = strdup(
                                        v->v.request_id ? v->v.request_id : "");
                                n[s->get_cnt].url =
                                        strdup(v->v.url ? v->v.url : "");
                                n[s->get_cnt].reply_topic = v->reply_topic;
                                s->get_cnt++;
                        }
                }
                s->cb(s->opaque, &v->v);
        }
        v_free_all(s);
}

/* Runs one batch over @p rec (NULL: tick only) through the driver, which
 * reports its verdicts (on_committed); *pausedp: the record was kept. */
static sg_err_t run_batch(sg_sim_t *s, const sg_record_t *rec, bool *pausedp,
                          char *errstr, size_t errstr_size) {
        v_free_all(s);
        s->paused = false;
        sg_err_t err = sg_drive_batch(s->drive, rec, rec ? 1 : 0, s->now,
                                      errstr, errstr_size);
        v_free_all(s);
        if (!err && pausedp)
                *pausedp = s->paused;
        return err;
}

/* The partition of @p rec, added when new; NULL: the pseudo topic, or out
 * of memory (*errp). */
static sim_part_t *part_get(sg_sim_t *s, const sg_record_t *rec,
                            sg_err_t *errp) {
        *errp = SG_OK;
        for (size_t i = 0; i < s->part_cnt; i++)
                if (s->parts[i].partition == rec->partition &&
                    !strcmp(s->parts[i].topic, rec->topic))
                        return &s->parts[i];
        if (!strcmp(rec->topic, SG_SNAPSHOT_HTTP_TOPIC))
                return NULL; /* the pseudo topic is never assigned */
        sim_part_t *n = realloc(s->parts, (s->part_cnt + 1) * sizeof(*n));
        char *t = strdup(rec->topic);
        if (n)
                s->parts = n;
        if (!n || !t) {
                free(t);
                *errp = SG_ERR_NOMEM;
                return NULL;
        }
        s->parts[s->part_cnt] = (sim_part_t){t, rec->partition, -1};
        return &s->parts[s->part_cnt++];
}

sg_err_t sg_sim_record(sg_sim_t *s, const sg_record_t *rec, bool *pausedp,
                       char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (strcmp(rec->topic, SG_SNAPSHOT_HTTP_TOPIC) &&
            (err = sg_drive_assign(s->drive, rec->topic, rec->partition, errstr,
                                   errstr_size)))
                return err;
        sim_part_t *p = part_get(s, rec, &err);
        if (err) {
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        if (p && rec->offset <= p->last_offset) {
                sg_errf(errstr, errstr_size,
                        "offset %" PRId64 " of %s [%" PRId32
                        "] is not above the previous record's (%" PRId64 ")",
                        rec->offset, rec->topic, rec->partition,
                        p->last_offset);
                return SG_ERR_INVALID;
        }
        return run_batch(s, rec, pausedp, errstr, errstr_size);
}

size_t sg_sim_pending(const sg_sim_t *s) {
        return sg_drive_kept(s->drive);
}

sg_err_t sg_sim_clock_set(sg_sim_t *s, int64_t now_ms, char *errstr,
                          size_t errstr_size) {
        if (now_ms < s->now) {
                sg_errf(errstr, errstr_size,
                        "the clock cannot go back (from %" PRId64 " to %" PRId64
                        " ms)",
                        s->now, now_ms);
                return SG_ERR_INVALID;
        }
        s->now = now_ms;
        return run_batch(s, NULL, NULL, errstr, errstr_size);
}

/* Whether request id @p rid is for aggregate @p agg (its hash part). */
static bool rid_is_for(const char *rid, const char *agg) {
        unsigned char ah[SG_HASH_LEN];
        char hex[2 * SG_HASH_LEN + 1];
        sg_sha256(agg, strlen(agg), ah);
        sg_hex_encode(ah, SG_HASH_LEN, hex);
        const char *h = strstr(rid, hex);
        return h && h > rid && h[-1] == '/' && h[2 * SG_HASH_LEN] == '/';
}

/* The kafka reply record's value: @p body (a JSON object's text) with
 * the member "request_id" first. NULL: not an object, or out of memory. */
static char *kafka_reply_value(const char *rid, const char *body,
                               size_t body_len, size_t *lenp) {
        size_t i = 0;
        while (body && i < body_len &&
               (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' ||
                body[i] == '\r'))
                i++;
        if (!body || i == body_len || body[i] != '{')
                return NULL;
        cJSON *id = cJSON_CreateString(rid);
        char *idj = id ? cJSON_PrintUnformatted(id) : NULL;
        cJSON_Delete(id);
        if (!idj)
                return NULL;
        const char *rest = body + i + 1;
        size_t rest_len = body_len - i - 1;
        bool empty = true; /* "{}": no comma */
        for (size_t k = 0; k < rest_len && empty; k++)
                empty = rest[k] == ' ' || rest[k] == '}' || rest[k] == '\n';
        size_t n = strlen("{\"request_id\":") + strlen(idj) + 1 + rest_len;
        char *out = malloc(n + 1);
        if (out)
                *lenp = (size_t)snprintf(out, n + 1, "{\"request_id\":%s%s%.*s",
                                         idj, empty ? "" : ",", (int)rest_len,
                                         rest);
        free(idj);
        return out;
}

sg_err_t sg_sim_snapshot_reply(sg_sim_t *s, const char *aggregate,
                               const char *request_id, int status,
                               const void *body, size_t body_len, char *errstr,
                               size_t errstr_size) {
        size_t i;
        for (i = 0; i < s->get_cnt; i++)
                if (request_id ? !strcmp(s->gets[i].request_id, request_id)
                               : rid_is_for(s->gets[i].request_id, aggregate))
                        break;
        if (i == s->get_cnt) {
                sg_errf(errstr, errstr_size,
                        "no snapshot request for %s %s is waiting for a reply",
                        request_id ? "request id" : "aggregate",
                        request_id ? request_id : aggregate);
                return SG_ERR_NOT_FOUND;
        }
        char st[16];
        snprintf(st, sizeof(st), "%d", status);
        sg_header_t h[2] = {{SG_H_HTTP_STATUS, st, strlen(st)},
                            {SG_H_HTTP_ERROR, "no response (simulated)", 23}};
        char *rid = s->gets[i].request_id;
        const char *reply_topic = s->gets[i].reply_topic;
        char *kv = NULL;
        size_t kv_len = 0;
        if (reply_topic &&
            !(kv = kafka_reply_value(rid, body, body ? body_len : 0,
                                     &kv_len))) {
                sg_errf(errstr, errstr_size,
                        "a reply on %s needs a JSON object as its body",
                        reply_topic);
                return SG_ERR_INVALID;
        }
        free(s->gets[i].url);
        memmove(&s->gets[i], &s->gets[i + 1],
                (s->get_cnt - i - 1) * sizeof(*s->gets));
        s->get_cnt--;
        s->reply_rid = rid;
        sg_err_t err;
        if (reply_topic) {
                /* a record of the reply topic, as the authority writes it */
                sg_record_t rec = {
                        .topic = reply_topic,
                        .partition = 0,
                        .timestamp_ms = s->now,
                        .value = kv,
                        .value_len = kv_len,
                };
                const sim_part_t *p = NULL;
                for (size_t k = 0; k < s->part_cnt && !p; k++)
                        if (s->parts[k].partition == 0 &&
                            !strcmp(s->parts[k].topic, reply_topic))
                                p = &s->parts[k];
                rec.offset = p ? p->last_offset + 1 : 0;
                err = sg_sim_record(s, &rec, NULL, errstr, errstr_size);
                s->reply_rid = NULL;
                free(kv);
                free(rid);
                return err;
        }
        const sg_record_t rec = {
                .topic = SG_SNAPSHOT_HTTP_TOPIC,
                .partition = -1,
                .offset = -1,
                .timestamp_ms = s->now,
                .key = rid,
                .key_len = strlen(rid),
                .value = body,
                .value_len = body ? body_len : 0,
                .headers = h,
                .header_cnt = status == 0 ? 2 : 1,
        };
        err = run_batch(s, &rec, NULL, errstr, errstr_size);
        s->reply_rid = NULL;
        free(rid);
        return err;
}
