/*
 * engine_refetch.c — snapshot refetch (semantics §4 step 1): the request
 * records the engine keeps in the store, the request effects it emits, the
 * request id that ties a reply to its request, and the judging of replies.
 * How a request travels and how a reply is read belong to the aggregate's
 * snapshot source (snapsrc.h).
 */
#include "engine_int.h"

#include "json.h"
#include "snapsrc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the request id --------------------------------------------------------
 *
 * "topic/partition/<aggregate hash, 64 hex>/seq": which input partition
 * and aggregate a reply is for (the SHA-256 of its id, whose first
 * SG_KEY_HASH_LEN bytes key the aggregate in the store), and which attempt
 * (the partition's request sequence number), parsed from its end. Built
 * and parsed only here; schemas/snapshot-request.schema.json publishes it.
 */

/* The request id of attempt @p seq for the aggregate of request @p r of
 * partition @p p, in @p arena; NULL when out of memory. */
static char *request_id_make(arena_t *arena, const part_t *p,
                             const sg_snapreq_rec_t *r, uint64_t seq) {
        unsigned char ah[32];
        char hex[65];
        /* the whole hash, from the id the request keeps (the store's keys
         * have its first 16 bytes only) */
        sg_sha256(r->aggregate, r->aggregate_len, ah);
        sg_hex_encode(ah, 32, hex);
        return sg_arena_printf(arena, "%s/%" PRId32 "/%s/%" PRIu64, p->topic,
                               p->partition, hex, seq);
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

/* xorshift64*: jitter only, not security. */
static uint64_t rng_next(sg_engine_t *e) {
        if (!e->rng)
                e->rng = (uint64_t)sg_clock_mono_ms() * 0x9E3779B97F4A7C15ull |
                         1;
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

/* Sends attempt r->attempt of the request (the effect its snapshot source
 * builds: a request record, an HTTP GET), and marks it in flight until its
 * timeout. */
static sg_err_t snap_send(sg_engine_t *e, part_t *p, sg_snapreq_rec_t *r) {
        const sg_snapshot_config_t *sc = &p->tc->snapshot;
        r->seq = ++p->work.snap_seq;
        char *rid = request_id_make(&e->arena, p, r, r->seq);
        sg_effect_t *ef = sg_eng_effect_new(e);
        if (!rid || !ef)
                return SG_ERR_NOMEM;
        const sg_snapsrc_req_t rq = {
                .sc = sc,
                .request_id = rid,
                .r = r,
                .topic = p->topic,
                .partition = p->partition,
                .instance = e->conf->instance_id ? e->conf->instance_id : "",
        };
        sg_err_t err = sg_snapsrc_for(sc->source)->request(&rq, &e->arena, ef);
        if (err)
                return err;
        r->state = SG_SNAP_INFLIGHT;
        r->sent_at_ms = e->now;
        r->due_ms = e->now + sc->timeout_ms;
        p->work.snap_in_flight++;
        p->touched = true;
        pdelta(e, p)->snapshot_requests_total++;
        return SG_OK;
}

/* Starts a refetch for aggregate @p a (the caller saves @p a). */
sg_err_t sg_eng_snap_start(sg_engine_t *e, part_t *p, agg_ctx_t *a,
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
                if ((err = snap_send(e, p, &r)))
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
sg_err_t sg_eng_snap_cancel(sg_engine_t *e, part_t *p, agg_ctx_t *a,
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
        sg_eng_log(e, SG_LOG_WARNING, "snapshot_attempt_failed", p, "aggregate",
                   LF_STR, r->aggregate, "attempt", LF_U64,
                   (uint64_t)r->attempt, "max_attempts", LF_I64,
                   (int64_t)sc->max_attempts, "reason", LF_STR, why, "next",
                   LF_STR, last ? "gap_policy" : "retry", NULL);
        if ((int64_t)r->attempt < sc->max_attempts) {
                int64_t old_due = r->due_ms;
                r->state = SG_SNAP_WAITING;
                r->due_ms = e->now + snap_backoff(e, sc, r->attempt);
                r->attempt++;
                return sg_snapreq_put(e->txn, &p->tp, ah, r, old_due, errstr,
                                      errstr_size);
        }
        pdelta(e, p)->snapshot_gave_up_total++;
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
                return sg_eng_agg_save(e, p, &a, errstr, errstr_size);
        if (p->tc->gap_policy == SG_GAP_HOLD) {
                /* hold: keep waiting; ask again after another gap_timeout */
                a.rec.parked_since_ms = e->now;
                return sg_eng_agg_save(e, p, &a, errstr, errstr_size);
        }
        return sg_eng_gap_fire(e, p, &a, errstr, errstr_size);
}

/* Sends queued requests and times out unanswered ones (bounded). */
sg_err_t sg_eng_snap_tick(sg_engine_t *e, part_t *p, int *budget, char *errstr,
                          size_t errstr_size) {
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
                        pdelta(e, p)->snapshot_timeouts_total++;
                        if (p->work.snap_in_flight)
                                p->work.snap_in_flight--;
                        if ((err = snap_attempt_failed(e, p, ah, &r,
                                                       "no reply within "
                                                       "timeout_ms",
                                                       errstr, errstr_size)))
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
                } else if ((err = snap_send(e, p, &r))) {
                        return err;
                }
                if ((err = sg_snapreq_put(e->txn, &p->tp, ah, &r, old_due,
                                          errstr, errstr_size)))
                        return err;
        }
        return SG_OK;
}

/* Applies snapshot (S, state, data) to a waiting aggregate. */
static sg_err_t snap_apply(sg_engine_t *e, part_t *p, agg_ctx_t *a, uint64_t S,
                           const char *state, const cJSON *data,
                           const char *provenance, char *errstr,
                           size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        if (tc->snapshot.emit_record) {
                sg_effect_t *ef = sg_eng_effect_new(e);
                sg_header_t *x = sg_arena_alloc(&e->arena, 3 * sizeof(*x));
                char *vs = sg_arena_printf(&e->arena, "%" PRIu64, S);
                char *prov = sg_arena_printf(&e->arena, "%s", provenance);
                if (!ef || !x || !vs || !prov)
                        return SG_ERR_NOMEM;
                size_t n = 0;
                x[n++] = (sg_header_t){SG_H_SNAPSHOT, vs, strlen(vs)};
                if (state) {
                        char *st = sg_arena_printf(&e->arena, "%s", state);
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
                ef->key = sg_arena_dup(&e->arena, a->rec.aggregate,
                                       a->rec.aggregate_len);
                ef->key_len = a->rec.aggregate_len;
                if (data) {
                        char *txt = cJSON_PrintUnformatted(data);
                        if (!txt)
                                return SG_ERR_NOMEM;
                        ef->value_len = strlen(txt);
                        ef->value = sg_arena_dup(&e->arena, txt, ef->value_len);
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
                sg_metrics_t *d = pdelta(e, p);
                d->snapshot_resolve_ms_last = took > 0 ? took : 1;
                sg_hist_observe(&d->snapshot_resolve_ms,
                                d->snapshot_resolve_ms_last);
                if (d->snapshot_resolve_ms_last > d->snapshot_resolve_ms_max)
                        d->snapshot_resolve_ms_max =
                                d->snapshot_resolve_ms_last;
                if ((err = sg_snapreq_del(e->txn, &p->tp, a->hash, r.due_ms,
                                          errstr, errstr_size)))
                        return err;
        } else if (err != SG_ERR_NOT_FOUND) {
                return err;
        }
        /* L = S (the caller checked S >= L), parked events <= S
         * superseded, S+1 ... drain, a new deadline for what is left */
        if ((err = sg_eng_agg_advance(e, p, a, S, errstr, errstr_size)))
                return err;
        pdelta(e, p)->snapshot_applied_total++;
        p->touched = true;
        return sg_eng_agg_save(e, p, a, errstr, errstr_size);
}

const sg_topic_config_t *sg_eng_reply_topic_of(const sg_engine_t *e,
                                               const char *topic) {
        for (size_t i = 0; i < e->conf->topic_cnt; i++) {
                const sg_snapshot_config_t *sc = &e->conf->topics[i].snapshot;
                const sg_snapsrc_t *src = sg_snapsrc_for(sc->source);
                if (src && src->is_reply_topic &&
                    src->is_reply_topic(sc, topic))
                        return &e->conf->topics[i];
        }
        return NULL;
}

bool sg_eng_is_snapshot_reply(const sg_engine_t *e, const char *topic) {
        return sg_snapsrc_of_pseudo_topic(topic) != NULL ||
               sg_eng_reply_topic_of(e, topic) != NULL;
}

/* The snapshot source whose reply record @p rec is (a pseudo topic's, or
 * a reply topic's). NULL when none. */
static const sg_snapsrc_t *reply_source(const sg_engine_t *e,
                                        const sg_record_t *rec) {
        const sg_snapsrc_t *src = sg_snapsrc_of_pseudo_topic(rec->topic);
        if (src)
                return src;
        const sg_topic_config_t *tc = sg_eng_reply_topic_of(e, rec->topic);
        return tc ? sg_snapsrc_for(tc->snapshot.source) : NULL;
}

/* The configured topic a reply @p rec of source @p src that names no
 * partition of ours is counted for (metrics per input topic): the one
 * whose replies come on its topic, else the first of that source. */
static const sg_topic_config_t *reply_owner(const sg_engine_t *e,
                                            const sg_record_t *rec,
                                            const sg_snapsrc_t *src) {
        const sg_topic_config_t *tc = sg_eng_reply_topic_of(e, rec->topic);
        for (size_t i = 0; !tc && i < e->conf->topic_cnt; i++)
                if (sg_snapsrc_for(e->conf->topics[i].snapshot.source) == src)
                        tc = &e->conf->topics[i];
        return tc ? tc : &e->conf->topics[0];
}

/* Reads member @p v (at JSON Pointer @p pointer of @p rec's value) as a
 * version is read (semantics §2): an integer JSON number (<= 2^53), judged
 * by its text, or a decimal string. */
static bool reply_u64(const sg_record_t *rec, const cJSON *v,
                      const char *pointer, uint64_t *out) {
        if (cJSON_IsString(v))
                return sg_version_parse(v->valuestring, strlen(v->valuestring),
                                        out) == SG_OK;
        return cJSON_IsNumber(v) &&
               sg_json_version_get(rec->value, rec->value_len, pointer, out) ==
                       SG_OK;
}

/* Reads the version of a reply (member "version" of @p rec's value): an
 * integer JSON number (<= 2^53) or a decimal string. A number is judged by
 * its text (semantics §2), which cJSON does not keep: json.h reads it. */
bool sg_eng_reply_version(const sg_record_t *rec, const cJSON *v,
                          uint64_t *out) {
        return reply_u64(rec, v, "/version", out);
}

/* A failed reply to request @p seq of aggregate @p ah: the attempt fails
 * when it is the one in flight (@p why is logged). */
static sg_err_t reply_failed(sg_engine_t *e, part_t *p,
                             const unsigned char ah[32], uint64_t seq,
                             const char *why, char *errstr,
                             size_t errstr_size) {
        sg_snapreq_rec_t r;
        sg_err_t err = sg_snapreq_get(e->txn, &p->tp, ah, &r);
        if (err == SG_ERR_NOT_FOUND)
                return SG_OK;
        if (err == SG_OK && r.seq == seq && r.state == SG_SNAP_INFLIGHT) {
                if (p->work.snap_in_flight)
                        p->work.snap_in_flight--;
                err = snap_attempt_failed(e, p, ah, &r, why, errstr,
                                          errstr_size);
        }
        return err;
}

/* Judges one snapshot reply record (reply topic or HTTP pseudo topic). */
sg_err_t sg_eng_snap_reply(sg_engine_t *e, const sg_record_t *rec, char *errstr,
                           size_t errstr_size) {
        const sg_snapsrc_t *src = reply_source(e, rec);
        cJSON *body = NULL;
        sg_err_t err = SG_OK;
        sg_snapsrc_reply_t rp;

        assert(src && "sg_eng_snap_reply() on a topic of no snapshot source");
        if (rec->value && rec->value_len)
                body = cJSON_ParseWithLength(rec->value, rec->value_len);
        src->reply_read(rec, body, &e->arena, &rp);
        const char *rid = rp.request_id;
        size_t rid_len = rp.request_id_len;
        bool failed = rp.failed;
        const char *why = rp.why; /* why the attempt failed, for the log */
        char topic[256];
        int32_t partition;
        unsigned char ah[32];
        uint64_t seq;
        part_t *p = NULL;
        if (!rid ||
            !parse_request_id(rid, rid_len, topic, sizeof(topic), &partition,
                              ah, &seq) ||
            !(p = sg_eng_part_find(e, topic, partition)) || !snap_enabled(p)) {
                /* unknown request id */
                delta_of(e, reply_owner(e, rec, src))->snapshot_ignored_total++;
                goto done;
        }
        if (p->cl_behind) {
                /* processor.h behind: judged once the store is restored */
                sg_errf(errstr, errstr_size,
                        "store of %s [%d] is behind its changelog: restore "
                        "it before its snapshot replies",
                        p->topic, p->partition);
                err = SG_ERR_INVALID;
                goto done;
        }
        agg_ctx_t a;
        memcpy(a.hash, ah, 32);
        err = sg_agg_get(e->txn, &p->tp, ah, &a.rec);
        if (err == SG_ERR_NOT_FOUND) {
                err = SG_OK;
                pdelta(e, p)->snapshot_ignored_total++;
                goto done;
        }
        if (err)
                goto done;
        a.old_since = sg_agg_indexed_since(&a.rec);
        a.exists = true;
        if (!(a.rec.flags & (SG_AGG_REFETCHING | SG_AGG_QUARANTINED))) {
                pdelta(e, p)->snapshot_ignored_total++; /* no longer waits */
                goto done;
        }
        uint64_t S = 0;
        const cJSON *jv = cJSON_GetObjectItemCaseSensitive(body, "version");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(body, "state");
        const cJSON *ja = cJSON_GetObjectItemCaseSensitive(body, "aggregate");
        if (!cJSON_IsObject(body) || !sg_eng_reply_version(rec, jv, &S) ||
            (js && !cJSON_IsString(js)) ||
            (p->tc->sm.enabled && !cJSON_IsString(js)) ||
            (ja && (!cJSON_IsString(ja) ||
                    strcmp(ja->valuestring, a.rec.aggregate) != 0))) {
                if (!failed)
                        why = !cJSON_IsObject(body)
                                      ? "reply is not a JSON object"
                              : !sg_eng_reply_version(rec, jv, &S)
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
                /* cJSON_IsString(js) held above; scan-build does not know
                 * it is false for NULL */
                assert(js);
                for (size_t i = 0; i < p->tc->sm.state_cnt && !known; i++)
                        known = strcmp(p->tc->sm.states[i], js->valuestring) ==
                                0;
                failed = !known;
                if (failed)
                        why = "reply state is not declared by the state "
                              "machine";
        }
        if (failed) {
                pdelta(e, p)->snapshot_failures_total++;
                err = reply_failed(e, p, ah, seq, why, errstr, errstr_size);
                goto done;
        }
        /* semantics §4b: a reply of a lower epoch is late; one of a higher
         * epoch moves the aggregate to it (under "restart" with no L yet),
         * and a reply without an epoch speaks for the aggregate's */
        uint64_t ep = 0;
        bool has_ep = false;
        const cJSON *je = cJSON_GetObjectItemCaseSensitive(body, "epoch");
        if (p->tc->epoch.kind != SG_SRC_NONE && je) {
                if (!reply_u64(rec, je, "/epoch", &ep)) {
                        pdelta(e, p)->snapshot_failures_total++;
                        err = reply_failed(e, p, ah, seq,
                                           "reply has no valid epoch", errstr,
                                           errstr_size);
                        goto done;
                }
                has_ep = true;
        }
        bool lower_epoch = has_ep && a.rec.has_epoch && ep < a.rec.epoch;
        bool new_epoch = has_ep && (!a.rec.has_epoch || ep > a.rec.epoch);
        bool restarts = new_epoch && a.rec.has_epoch &&
                        p->tc->epoch_versions == SG_EPOCH_RESTART;
        if (lower_epoch ||
            (!restarts && a.rec.has_last && S < a.rec.last_version)) {
                pdelta(e, p)
                        ->snapshot_late_total++; /* judged by epoch, version */
                goto done;
        }
        if (new_epoch &&
            (err = sg_eng_epoch_enter(e, p, &a, ep, errstr, errstr_size)))
                goto done;
        char provbuf[300];
        const char *prov = src->provenance(rec, &rp, provbuf, sizeof(provbuf));
        err = snap_apply(e, p, &a, S, js ? js->valuestring : NULL,
                         cJSON_GetObjectItemCaseSensitive(body, "data"), prov,
                         errstr, errstr_size);
done:
        cJSON_Delete(body);
        return err;
}
