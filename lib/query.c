/*
 * query.c — the result query (semantics §7, query.h): an event's fate and
 * an aggregate's state, read from the store through a reader transaction
 * that is safe beside the Kafka loop (sg_txn_begin_reader).
 */
#include "query.h"

#include "envelope.h"
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON helpers ------------------------------------------------------ */

void sg_json_add_i64(cJSON *o, const char *name, int64_t v) {
        char b[32];
        snprintf(b, sizeof(b), "%" PRId64, v);
        cJSON_AddRawToObject(o, name, b);
}

void sg_json_add_u64(cJSON *o, const char *name, uint64_t v) {
        char b[32];
        snprintf(b, sizeof(b), "%" PRIu64, v);
        cJSON_AddRawToObject(o, name, b);
}

void sg_json_add_time(cJSON *o, const char *name, int64_t ms, bool with_ms) {
        char b[48];
        if (ms <= 0)
                cJSON_AddNullToObject(o, name);
        else
                cJSON_AddStringToObject(o, name, sg_iso_time(ms, b, sizeof(b)));
        if (!with_ms)
                return;
        char n2[64];
        snprintf(n2, sizeof(n2), "%s_ms", name);
        if (ms <= 0)
                cJSON_AddNullToObject(o, n2);
        else
                sg_json_add_i64(o, n2, ms);
}

void sg_json_add_bytes(cJSON *o, const char *name, const void *p, size_t len) {
        if (!p || len == SIZE_MAX) {
                cJSON_AddNullToObject(o, name);
                return;
        }
        if (sg_utf8_valid(p, len) && !memchr(p, '\0', len)) {
                char *s = malloc(len + 1);
                if (!s)
                        return;
                memcpy(s, p, len);
                s[len] = '\0';
                cJSON_AddStringToObject(o, name, s);
                free(s);
                return;
        }
        char *h = malloc(2 * len + 1);
        if (!h)
                return;
        sg_hex_encode(p, len, h);
        char n2[64];
        snprintf(n2, sizeof(n2), "%s_hex", name);
        cJSON_AddStringToObject(o, n2, h);
        free(h);
}

/* ---- the partitions of a topic ------------------------------------------ */

#define MAX_PARTS 4096 /* partitions of one topic a query searches */

typedef struct parts {
        const char *topic;
        int32_t p[MAX_PARTS];
        size_t cnt;
} parts_t;

static int parts_visit(void *opaque, const char *topic, int32_t partition,
                       const sg_meta_rec_t *rec) {
        (void)rec;
        parts_t *ps = opaque;
        if (strcmp(topic, ps->topic) == 0 && ps->cnt < MAX_PARTS)
                ps->p[ps->cnt++] = partition;
        return 0;
}

/* Every partition of @p topic the store holds (a meta record each). */
static sg_err_t topic_parts(sg_txn_t *t, const char *topic, parts_t *ps,
                            char *errstr, size_t errstr_size) {
        ps->topic = topic;
        ps->cnt = 0;
        sg_err_t err = sg_meta_foreach(t, parts_visit, ps);
        if (err)
                sg_errf(errstr, errstr_size, "partitions of %s: %s", topic,
                        sg_txn_errdetail(t));
        return err;
}

static sg_err_t read_failed(sg_txn_t *t, sg_err_t err, const char *what,
                            char *errstr, size_t errstr_size) {
        sg_errf(errstr, errstr_size, "%s: %s", what, sg_txn_errdetail(t));
        return err;
}

/* ---- aggregates ---------------------------------------------------------- */

/* The version aggregate @p r waits for: L+1, or F for a new aggregate
 * (semantics §3); false when L = 2^64-1 has no successor. */
static bool awaited(const sg_agg_rec_t *r, const sg_topic_config_t *tc,
                    uint64_t *vp) {
        if (!r->has_last) {
                *vp = tc->first_version;
                return true;
        }
        if (r->last_version == UINT64_MAX)
                return false;
        *vp = r->last_version + 1;
        return true;
}

/* The running gap deadline (semantics §4): oldest parked_at + gap_timeout,
 * while the aggregate waits (not refetching, not quarantined, policy not
 * hold); 0 none. */
static int64_t gap_deadline(const sg_agg_rec_t *r,
                            const sg_topic_config_t *tc) {
        if (r->parked_since_ms <= 0 || tc->gap_policy == SG_GAP_HOLD ||
            (r->flags & (SG_AGG_REFETCHING | SG_AGG_QUARANTINED)))
                return 0;
        return r->parked_since_ms + tc->gap_timeout_ms;
}

static cJSON *flags_json(uint32_t flags) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddBoolToObject(f, "quarantined", flags & SG_AGG_QUARANTINED);
        cJSON_AddBoolToObject(f, "refetching", flags & SG_AGG_REFETCHING);
        return f;
}

/* The parked part of an aggregate's answer: awaited version, deadline. */
static void waiting_json(cJSON *o, const sg_agg_rec_t *r,
                         const sg_topic_config_t *tc) {
        uint64_t v;
        if (awaited(r, tc, &v))
                sg_json_add_u64(o, "awaiting_version", v);
        else
                cJSON_AddNullToObject(o, "awaiting_version");
        sg_json_add_time(o, "gap_deadline", gap_deadline(r, tc), true);
}

static int parked_visit(void *opaque, uint64_t version,
                        const sg_parked_rec_t *p) {
        cJSON *arr = opaque;
        cJSON *o = cJSON_CreateObject();
        sg_json_add_u64(o, "version", version);
        if (p->has_epoch) /* the epoch it was parked under (§4b) */
                sg_json_add_u64(o, "epoch", p->epoch);
        sg_json_add_time(o, "parked_at", p->parked_at_ms, true);
        sg_json_add_i64(o, "offset", p->offset);
        if (p->timestamp_ms >= 0)
                sg_json_add_time(o, "timestamp", p->timestamp_ms, true);
        sg_json_add_bytes(o, "type", p->type, p->type ? p->type_len : SIZE_MAX);
        sg_json_add_bytes(o, "key", p->key, p->key_len);
        if (p->value && p->value_len != SIZE_MAX)
                sg_json_add_u64(o, "value_bytes", p->value_len);
        else
                cJSON_AddNullToObject(o, "value_bytes");
        cJSON_AddItemToArray(arr, o);
        return 0;
}

static cJSON *snapreq_json(const sg_snapreq_rec_t *q) {
        cJSON *o = cJSON_CreateObject();
        sg_json_add_u64(o, "attempt", q->attempt);
        cJSON_AddStringToObject(o, "state",
                                q->state == SG_SNAP_INFLIGHT  ? "in_flight"
                                : q->state == SG_SNAP_WAITING ? "waiting"
                                                              : "unknown");
        sg_json_add_time(o, "due", q->due_ms, true);
        sg_json_add_u64(o, "seq", q->seq);
        if (q->has_have)
                sg_json_add_u64(o, "have_version", q->have_version);
        else
                cJSON_AddNullToObject(o, "have_version");
        sg_json_add_u64(o, "want_version", q->want_version);
        sg_json_add_time(o, "issued_at", q->issued_at_ms, true);
        sg_json_add_time(o, "sent_at", q->sent_at_ms, true);
        return o;
}

cJSON *sg_query_agg_json(const sg_agg_rec_t *r, const sg_topic_config_t *tc) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        sg_json_add_bytes(o, "id", r->aggregate, r->aggregate_len);
        if (r->has_last)
                sg_json_add_u64(o, "last_version", r->last_version);
        else
                cJSON_AddNullToObject(o, "last_version");
        if (r->state[0])
                cJSON_AddStringToObject(o, "state", r->state);
        else
                cJSON_AddNullToObject(o, "state");
        /* semantics §4b: the aggregate's current epoch E, null: none */
        if (r->has_epoch)
                sg_json_add_u64(o, "epoch", r->epoch);
        else
                cJSON_AddNullToObject(o, "epoch");
        cJSON_AddItemToObject(o, "flags", flags_json(r->flags));
        sg_json_add_u64(o, "parked_count", r->parked_cnt);
        sg_json_add_u64(o, "parked_bytes", r->parked_bytes);
        sg_json_add_time(o, "oldest_parked_at", r->parked_since_ms, true);
        if (r->parked_cnt && tc)
                waiting_json(o, r, tc);
        if (r->skip_from) {
                char b[64];
                snprintf(b, sizeof(b), "%" PRIu64 "-%" PRIu64, r->skip_from,
                         r->skip_to);
                cJSON_AddStringToObject(o, "skipped_versions", b);
        }
        return o;
}

/* Aggregate @p ah of @p tp, whole (record, parked events, snapshot
 * request), as a new object in *outp. */
static sg_err_t agg_answer(sg_txn_t *t, const sg_tp_t *tp, const char *topic,
                           int32_t partition, const sg_topic_config_t *tc,
                           const unsigned char ah[32], const sg_agg_rec_t *r,
                           cJSON **outp, char *errstr, size_t errstr_size) {
        cJSON *o = sg_query_agg_json(r, tc);
        if (!o)
                return SG_ERR_NOMEM;
        char ahex[65];
        sg_hex_encode(ah, 32, ahex);
        cJSON_AddStringToObject(o, "topic", topic);
        sg_json_add_i64(o, "partition", partition);
        cJSON_AddStringToObject(o, "hash", ahex);
        cJSON *parked = cJSON_AddArrayToObject(o, "parked");
        sg_err_t err = sg_parked_foreach(t, tp, ah, parked_visit, parked);
        if (err) {
                cJSON_Delete(o);
                return read_failed(t, err, "parked events", errstr,
                                   errstr_size);
        }
        sg_snapreq_rec_t q;
        err = sg_snapreq_get(t, tp, ah, &q);
        if (err == SG_OK) {
                cJSON_AddItemToObject(o, "snapshot_request", snapreq_json(&q));
        } else if (err == SG_ERR_NOT_FOUND) {
                cJSON_AddNullToObject(o, "snapshot_request");
        } else {
                cJSON_Delete(o);
                return read_failed(t, err, "snapshot request", errstr,
                                   errstr_size);
        }
        *outp = o;
        return SG_OK;
}

/* Searches aggregate @p ah in every stored partition of topic @p tc,
 * adding each find to @p found. */
static sg_err_t agg_search(sg_txn_t *t, const sg_topic_config_t *tc,
                           const char *id, const unsigned char ah[32],
                           cJSON *found, char *errstr, size_t errstr_size) {
        parts_t *ps = malloc(sizeof(*ps));
        if (!ps)
                return SG_ERR_NOMEM;
        sg_err_t err = topic_parts(t, tc->name, ps, errstr, errstr_size);
        for (size_t i = 0; !err && i < ps->cnt; i++) {
                sg_tp_t tp;
                sg_tp_make(&tp, tc->name, ps->p[i]);
                sg_agg_rec_t r;
                err = sg_agg_get(t, &tp, ah, &r);
                if (err == SG_ERR_NOT_FOUND) {
                        err = SG_OK;
                        continue;
                }
                if (err) {
                        err = read_failed(t, err, "aggregate", errstr,
                                          errstr_size);
                        break;
                }
                /* the id asked about: the store keeps it only while it
                 * needs it (store.h) */
                snprintf(r.aggregate, sizeof(r.aggregate), "%s", id);
                r.aggregate_len = strlen(r.aggregate);
                cJSON *a;
                if (!(err = agg_answer(t, &tp, tc->name, ps->p[i], tc, ah, &r,
                                       &a, errstr, errstr_size)))
                        cJSON_AddItemToArray(found, a);
        }
        free(ps);
        return err;
}

sg_err_t sg_query_aggregate(sg_store_t *store, const sg_config_t *cfg,
                            const char *topic, const char *aggregate_id,
                            int64_t now_ms, cJSON **outp, char *errstr,
                            size_t errstr_size) {
        (void)now_ms;
        if (!aggregate_id || !*aggregate_id) {
                sg_errf(errstr, errstr_size,
                        "the aggregate id is empty: no event has one (the "
                        "envelope refuses it)");
                return SG_ERR_INVALID;
        }
        if (topic && !sg_config_topic(cfg, topic)) {
                sg_errf(errstr, errstr_size, "%s is not an input topic", topic);
                return SG_ERR_INVALID;
        }
        unsigned char ah[32];
        sg_sha256(aggregate_id, strlen(aggregate_id), ah);
        cJSON *o = cJSON_CreateObject();
        cJSON *found = cJSON_CreateArray();
        if (!o || !found) {
                cJSON_Delete(o);
                cJSON_Delete(found);
                return SG_ERR_NOMEM;
        }
        cJSON_AddStringToObject(o, "aggregate_id", aggregate_id);
        cJSON_AddItemToObject(o, "found", found);
        sg_txn_t *t;
        sg_err_t err = sg_txn_begin_reader(store, &t, errstr, errstr_size);
        if (err) {
                cJSON_Delete(o);
                return err;
        }
        for (size_t i = 0; !err && i < cfg->topic_cnt; i++) {
                const sg_topic_config_t *tc = &cfg->topics[i];
                if (!topic || strcmp(topic, tc->name) == 0)
                        err = agg_search(t, tc, aggregate_id, ah, found, errstr,
                                         errstr_size);
        }
        sg_txn_abort(t);
        if (!err && cJSON_GetArraySize(found) == 0) {
                sg_errf(errstr, errstr_size,
                        "aggregate %s not found (never seen, or not in this "
                        "store)",
                        aggregate_id);
                err = SG_ERR_NOT_FOUND;
        }
        if (err) {
                cJSON_Delete(o);
                return err;
        }
        *outp = o;
        return SG_OK;
}

/* ---- events -------------------------------------------------------------- */

/* The name of a stored DLQ reason; "unknown" for a record written before
 * reasons were stored. */
static const char *reason_name(uint8_t reason) {
        return reason > SG_R_NONE && reason < SG_R__CNT
                       ? sg_reason_name((sg_reason_t)reason)
                       : "unknown";
}

/* The answer of "unknown": never seen (or swept), or seen but expired. */
static void unknown_json(cJSON *o, const sg_topic_config_t *tc,
                         const sg_dedup_rec_t *expired) {
        cJSON_AddStringToObject(o, "status", "unknown");
        cJSON_AddStringToObject(o, "why", expired ? "expired" : "not_found");
        sg_json_add_i64(o, "dedup_ttl_ms", tc->dedup_ttl_ms);
        if (expired) {
                sg_json_add_time(o, "first_seen", expired->first_seen_ms, true);
                sg_json_add_time(o, "expired_at", expired->expiry_ms, true);
        }
        cJSON_AddStringToObject(
                o, "detail",
                expired ? "the event's idempotency key is past its dedup TTL: "
                          "a new copy would be judged as a new event"
                        : "never seen, or seen longer ago than the dedup TTL "
                          "(dedup_ttl_ms): a record older than it cannot be "
                          "answered");
}

/* The parked event's aggregate and what it waits for. */
static sg_err_t parked_json(sg_txn_t *t, const sg_tp_t *tp,
                            const sg_topic_config_t *tc, cJSON *o,
                            const unsigned char kh[32], char *errstr,
                            size_t errstr_size) {
        unsigned char ah[32];
        uint64_t version;
        sg_parked_rec_t p;
        sg_err_t err = sg_parked_find_key(t, tp, kh, ah, &version, &p);
        if (err == SG_ERR_NOT_FOUND)
                return SG_OK; /* between park and drain: nothing to add */
        if (err)
                return read_failed(t, err, "parked events", errstr,
                                   errstr_size);
        sg_json_add_u64(o, "version", version);
        if (p.has_epoch) /* the epoch it was parked under (§4b) */
                sg_json_add_u64(o, "epoch", p.epoch);
        sg_json_add_time(o, "parked_at", p.parked_at_ms, true);
        sg_json_add_i64(o, "offset", p.offset);
        sg_agg_rec_t r;
        if ((err = sg_agg_get(t, tp, ah, &r)) == SG_ERR_NOT_FOUND)
                return SG_OK;
        if (err)
                return read_failed(t, err, "aggregate", errstr, errstr_size);
        sg_json_add_bytes(o, "aggregate_id", r.aggregate, r.aggregate_len);
        if (r.has_last)
                sg_json_add_u64(o, "last_version", r.last_version);
        else
                cJSON_AddNullToObject(o, "last_version");
        waiting_json(o, &r, tc);
        cJSON_AddItemToObject(o, "flags", flags_json(r.flags));
        return SG_OK;
}

/* The answer of a found, live dedup record @p d of partition @p tp. */
static sg_err_t verdict_json(sg_txn_t *t, const sg_tp_t *tp, int32_t partition,
                             const sg_topic_config_t *tc,
                             const unsigned char kh[32],
                             const sg_dedup_rec_t *d, cJSON *o, char *errstr,
                             size_t errstr_size) {
        static const char *const names[] = {
                [SG_DV_APPLIED] = "applied",       [SG_DV_PARKED] = "parked",
                [SG_DV_DLQ] = "dead_lettered",     [SG_DV_DROPPED] = "dropped",
                [SG_DV_SUPERSEDED] = "superseded",
        };
        cJSON_AddStringToObject(o, "status", names[d->verdict]);
        sg_json_add_i64(o, "partition", partition);
        sg_json_add_time(o, "first_seen", d->first_seen_ms, true);
        sg_json_add_time(o, "expires", d->expiry_ms, true);
        switch (d->verdict) {
        case SG_DV_APPLIED: {
                cJSON *out = cJSON_AddObjectToObject(o, "output");
                cJSON_AddStringToObject(out, "topic", tc->output_topic);
                if (tc->output_partitioning == SG_PART_INPUT)
                        sg_json_add_i64(out, "partition", partition);
                return SG_OK;
        }
        case SG_DV_PARKED:
                return parked_json(t, tp, tc, o, kh, errstr, errstr_size);
        case SG_DV_DLQ:
                cJSON_AddStringToObject(o, "reason", reason_name(d->reason));
                cJSON_AddStringToObject(o, "dlq_topic", tc->dlq_topic);
                return SG_OK;
        case SG_DV_SUPERSEDED: /* never emitted: L moved past it */
                return SG_OK;
        default: /* SG_DV_DROPPED */
                cJSON_AddStringToObject(o, "reason",
                                        sg_reason_name(SG_R_STALE_VERSION));
                return SG_OK;
        }
}

/* The scope parts' count the topic needs; errstr names them. */
static bool scope_ok(const sg_topic_config_t *tc, const char *const *scope,
                     size_t scope_cnt, char *errstr, size_t errstr_size) {
        if (scope_cnt != tc->scope_cnt) {
                sg_errf(errstr, errstr_size,
                        "topic %s's idempotency scope has %zu part(s), the "
                        "query gave %zu",
                        tc->name, tc->scope_cnt, scope_cnt);
                return false;
        }
        for (size_t i = 0; i < scope_cnt; i++)
                if (!scope[i] || !*scope[i]) {
                        sg_errf(errstr, errstr_size,
                                "idempotency scope part %zu is empty: no "
                                "event has one (the envelope refuses it)",
                                i + 1);
                        return false;
                }
        return true;
}

/* Looks the key up in every stored partition of the topic and fills @p o. */
static sg_err_t event_search(sg_txn_t *t, const sg_topic_config_t *tc,
                             const unsigned char kh[32],
                             const unsigned char *digest, int64_t now_ms,
                             cJSON *o, char *errstr, size_t errstr_size) {
        parts_t *ps = malloc(sizeof(*ps));
        if (!ps)
                return SG_ERR_NOMEM;
        sg_err_t err = topic_parts(t, tc->name, ps, errstr, errstr_size);
        sg_dedup_rec_t d;
        size_t i = 0;
        for (; !err && i < ps->cnt; i++) {
                sg_tp_t tp;
                sg_tp_make(&tp, tc->name, ps->p[i]);
                err = sg_dedup_get(t, &tp, kh, &d);
                if (err == SG_ERR_NOT_FOUND) {
                        err = SG_OK;
                        continue;
                }
                if (err) {
                        err = read_failed(t, err, "dedup record", errstr,
                                          errstr_size);
                        break;
                }
                if (d.expiry_ms <= now_ms) { /* as the engine judges it */
                        unknown_json(o, tc, &d);
                } else if (digest && !sg_dedup_digest_eq(&d, digest) &&
                           !(d.verdict == SG_DV_DLQ &&
                             d.reason == SG_R_MALFORMED)) {
                        /* semantics §3 row 3: this copy was dead-lettered,
                         * the recorded event keeps its own fate (a
                         * malformed copy claims no key, row 1: a copy with
                         * another digest is judged as new, and replaces
                         * the record once it is) */
                        cJSON_AddStringToObject(o, "status", "dead_lettered");
                        cJSON_AddStringToObject(
                                o, "reason",
                                sg_reason_name(SG_R_IDEMPOTENCY_CONFLICT));
                        cJSON_AddStringToObject(o, "dlq_topic", tc->dlq_topic);
                        cJSON *c = cJSON_AddObjectToObject(o, "conflicts_with");
                        err = verdict_json(t, &tp, ps->p[i], tc, kh, &d, c,
                                           errstr, errstr_size);
                } else {
                        err = verdict_json(t, &tp, ps->p[i], tc, kh, &d, o,
                                           errstr, errstr_size);
                }
                break;
        }
        if (!err && i == ps->cnt)
                unknown_json(o, tc, NULL);
        sg_json_add_u64(o, "partitions_searched", ps->cnt);
        free(ps);
        return err;
}

sg_err_t sg_query_event(sg_store_t *store, const sg_config_t *cfg,
                        const char *topic, const char *const *scope,
                        size_t scope_cnt, const char *id,
                        const unsigned char *digest, int64_t now_ms,
                        cJSON **outp, char *errstr, size_t errstr_size) {
        const sg_topic_config_t *tc =
                topic ? sg_config_topic(cfg, topic) : NULL;
        if (!tc) {
                sg_errf(errstr, errstr_size, "%s is not an input topic",
                        topic ? topic : "(none)");
                return SG_ERR_INVALID;
        }
        if (!scope_ok(tc, scope, scope_cnt, errstr, errstr_size))
                return SG_ERR_INVALID;
        if (!id || !*id) {
                sg_errf(errstr, errstr_size,
                        "the event id is empty: no event has one (the "
                        "envelope refuses it)");
                return SG_ERR_INVALID;
        }
        unsigned char kh[32];
        sg_err_t err = sg_envelope_key_hash(topic, scope, scope_cnt, id, kh);
        if (err)
                return err;
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return SG_ERR_NOMEM;
        cJSON_AddStringToObject(o, "topic", topic);
        cJSON *sc = cJSON_AddArrayToObject(o, "scope");
        for (size_t i = 0; i < scope_cnt; i++)
                cJSON_AddItemToArray(sc, cJSON_CreateString(scope[i]));
        cJSON_AddStringToObject(o, "id", id);
        sg_txn_t *t;
        if ((err = sg_txn_begin_reader(store, &t, errstr, errstr_size))) {
                cJSON_Delete(o);
                return err;
        }
        err = event_search(t, tc, kh, digest, now_ms, o, errstr, errstr_size);
        sg_txn_abort(t);
        if (err) {
                cJSON_Delete(o);
                return err;
        }
        *outp = o;
        return SG_OK;
}
