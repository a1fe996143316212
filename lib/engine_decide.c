/*
 * engine_decide.c — the decision table (semantics §3, §3b): one input
 * record, in order, through
 *   envelope → row 1 (malformed) → rows 2–3 (dedup by idempotency key) →
 *   dedup-only topics apply → row 4 (quarantine) → row 4b (epoch,
 *   §4b) → row 5 (stale) →
 *   version_jump → rows 6–7 (in order: state machine, apply, drain) →
 *   row 8b (version held) → row 8 (park, with caps),
 * and an operator's control record (semantics §3 "Release").
 *
 * Everything here runs inside the batch's write transaction (e->txn) and
 * returns effects through engine_effects.c.
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called for every record (SG_H_CONTROL) and every duplicate
 * (SG_H_REPLAY), and seqgate's own header names all begin with a byte
 * that an input's headers (ce_*, content-type, ...) rarely share: the
 * first byte is compared inline before strcmp is called. */
const sg_header_t *sg_eng_header_find(const sg_record_t *rec,
                                      const char *name) {
        for (size_t i = rec->header_cnt; i > 0; i--) {
                const char *h = rec->headers[i - 1].name;
                if (h[0] == name[0] && strcmp(h, name) == 0)
                        return &rec->headers[i - 1];
        }
        return NULL;
}

/* ---- in-order apply (rows 6–7) -------------------------------------------- */

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
sg_err_t sg_eng_apply_in_order(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                               const subject_t *s, uint64_t v, const char *type,
                               const char *gap_hdr, const char *gap_val,
                               uint8_t *verdictp, char *errstr,
                               size_t errstr_size) {
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
                                known ? sg_arena_printf(
                                                &e->arena,
                                                "event type \"%s\" is not "
                                                "allowed from state %s",
                                                type, a->rec.state)
                                      : sg_arena_printf(
                                                &e->arena,
                                                "event type \"%s\" is not in "
                                                "the state machine",
                                                type ? type : "");
                        if ((err = sg_eng_emit_dlq(e, s, &d)))
                                return err;
                        pdelta(e, p)->illegal_transitions_total++;
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
        if ((err = sg_eng_emit_output(e, s, gap_hdr, gap_val, &about)))
                return err;
        /* applied, even when Kafka cannot take its copy (output_rejected):
         * the aggregate moves on */
        agg_set_last(a, v);
        *verdictp = e->out_rejected ? SG_DV_DLQ : SG_DV_APPLIED;
        return SG_OK;
}

/* ---- release, and the table ----------------------------------------------- */

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
            (jv && !sg_eng_reply_version(rec, jv, &S)) ||
            (js && !cJSON_IsString(js))) {
                why = "body is not {\"aggregate\": ID, \"version\": S, "
                      "\"state\": X} (version and state optional)";
                goto refused;
        }
        aggregate = ja->valuestring;
        if ((err = sg_eng_agg_load(e, p, ja->valuestring,
                                   strlen(ja->valuestring), &a)))
                goto done;
        bool quarantined = a.rec.flags & SG_AGG_QUARANTINED;
        why = sg_release_refusal(p->tc, a.exists ? &a.rec : NULL, jv != NULL, S,
                                 js ? js->valuestring : NULL, whybuf,
                                 sizeof(whybuf));
        if (why)
                goto refused;
        if (a.rec.flags & SG_AGG_REFETCHING &&
            (err = sg_eng_snap_cancel(e, p, &a, errstr, errstr_size)))
                goto done;
        if (quarantined && p->work.quarantined)
                p->work.quarantined--;
        a.rec.flags &= ~SG_AGG_QUARANTINED;
        if (js)
                snprintf(a.rec.state, sizeof(a.rec.state), "%s",
                         js->valuestring);
        if (jv && (err = sg_eng_agg_advance(e, p, &a, S, errstr, errstr_size)))
                goto done;
        pdelta(e, p)->releases_total++;
        p->touched = true;
        sg_eng_log(e, SG_LOG_NOTICE, "aggregate_released", p, "aggregate",
                   LF_STR, a.rec.aggregate, "last_version", LF_U64,
                   a.rec.last_version, "offset", LF_I64, rec->offset, NULL);
        err = sg_eng_agg_save(e, p, &a, errstr, errstr_size);
        goto done;
refused:
        pdelta(e, p)->control_ignored_total++;
        sg_eng_log(e, SG_LOG_WARNING, "control_refused", p, "aggregate", LF_STR,
                   aggregate, "reason", LF_STR, why, "offset", LF_I64,
                   rec->offset, NULL);
done:
        cJSON_Delete(body);
        return err;
}

/* ---- the table -----------------------------------------------------------
 *
 * sg_eng_judge() runs one input record down the rows of semantics §3 in
 * their order; each row is one function below, named after its row. A row
 * either decides the record (returns true; j->err is SG_OK or the error
 * that stops the batch) or passes it to the next row (returns false). Two
 * steps are not rows of the table but details it implies: loading the
 * aggregate rows 4–8 judge by, and trust_first_seen's adoption of a new
 * aggregate's first version (§4 "New aggregates"). */

/* One input record on its way down the table. */
typedef struct judged {
        sg_engine_t *e;
        part_t *p;
        const sg_topic_config_t *tc;
        const sg_record_t *rec;
        sg_envelope_t *env; /* the record's envelope (row 1 parses it) */
        subject_t s;        /* the record, as its effects name it */
        sg_process_result_t *result;
        char *errstr;
        size_t errstr_size;
        sg_err_t err; /* set by the row that decides */
        /* rows 4–8 (aggregate_load) */
        agg_ctx_t a;
        uint64_t v;    /* the record's version */
        uint64_t next; /* the version the aggregate expects */
        bool stale;
        dlq_info_t d; /* aggregate, versions, state of a DLQ record */
} judged_t;

/* The record's idempotency key recorded with @p verdict: every terminal
 * verdict records it (semantics §3). */
static sg_err_t key_record(judged_t *j, uint8_t verdict) {
        return sg_eng_record_key(j->e, j->p, j->env->key_hash, j->env->digest,
                                 verdict, j->errstr, j->errstr_size);
}

/* The DLQ record j->d, and the key recorded with a DLQ verdict. */
static sg_err_t dlq_and_key(judged_t *j) {
        sg_err_t err = sg_eng_emit_dlq(j->e, &j->s, &j->d);
        if (err)
                return err;
        return key_record(j, SG_DV_DLQ);
}

/* Whether dedup record @p dr, live, records a malformed copy: it answers
 * the result query but does not claim the key (semantics §3 row 1). */
static bool dedup_malformed(const sg_dedup_rec_t *dr) {
        return dr->verdict == SG_DV_DLQ && dr->reason == SG_R_MALFORMED;
}

/* Reads the dedup record of the record's key into e->dk_* (the record
 * sg_eng_record_key() then writes without a second lookup). Returns
 * SG_OK with *livep (found and not past its TTL) and *drp, or the store's
 * error. */
static sg_err_t dedup_read(judged_t *j, sg_dedup_rec_t *drp, bool *livep) {
        sg_engine_t *e = j->e;
        sg_err_t err = sg_dedup_get(e->txn, &j->p->tp, j->env->key_hash, drp);
        if (err && err != SG_ERR_NOT_FOUND)
                return err;
        e->dk_valid = true;
        e->dk_found = err == SG_OK;
        memcpy(e->dk_hash, j->env->key_hash, 32);
        e->dk_rec = *drp;
        *livep = err == SG_OK && drp->expiry_ms > e->now;
        return SG_OK;
}

/* Row 1 (semantics §3): the envelope cannot be parsed → DLQ malformed,
 * with the fields that did parse (aggregate, version) in its headers.
 * When the idempotency key and the digest parse, the key is recorded
 * dead_lettered (malformed) for the result query, unless a live record
 * holds it: then a copy with its digest is a duplicate (row 2: a
 * redelivery is never a second DLQ record; a replayed one is dead-lettered
 * again, the replay tool expects its verdict), any other copy is
 * dead-lettered and the record stays untouched. */
static bool row1_malformed(judged_t *j) {
        char detail[512];
        sg_envelope_t *env = j->env;
        sg_err_t err =
                sg_envelope_parse(j->tc, j->rec, env, detail, sizeof(detail));
        if (err != SG_ERR_INVALID) {
                j->err = err;
                return err != SG_OK;
        }
        sg_engine_t *e = j->e;
        bool record = env->has_key && env->has_digest;
        if (record) {
                sg_dedup_rec_t dr;
                bool live;
                if ((j->err = dedup_read(j, &dr, &live)))
                        return true;
                if (live && sg_dedup_digest_eq(&dr, env->digest) &&
                    !sg_eng_header_find(j->rec, SG_H_REPLAY)) {
                        pdelta(e, j->p)->dedup_hits_total++;
                        return true;
                }
                record = !live;
        }
        dlq_info_t d = {.reason = SG_R_MALFORMED,
                        .detail = detail,
                        .aggregate = env->aggregate,
                        .has_actual = env->has_version,
                        .actual = env->version};
        pdelta(e, j->p)->malformed_total++;
        if ((j->err = sg_eng_emit_dlq(e, &j->s, &d)) || !record)
                return true;
        j->err = key_record(j, SG_DV_DLQ);
        return true;
}

/* Rows 2–3 (semantics §3, and "Replay"): a key seen before is a duplicate
 * (same digest, dropped) or DLQ idempotency_conflict (another digest); a
 * replayed record whose key has a DLQ verdict goes on to row 4. */
static bool rows2_3_key_seen(judged_t *j) {
        sg_engine_t *e = j->e;
        sg_envelope_t *env = j->env;
        char ts[40];
        sg_dedup_rec_t dr;
        bool live;
        if ((j->err = dedup_read(j, &dr, &live)))
                return true;
        /* a malformed copy never took effect: it does not claim the key
         * (row 1), this copy is judged as new */
        if (!live || dedup_malformed(&dr))
                return false;
        if (!sg_dedup_digest_eq(&dr, env->digest)) {
                dlq_info_t d = {
                        .reason = SG_R_IDEMPOTENCY_CONFLICT,
                        .aggregate = env->aggregate,
                        .detail = sg_arena_printf(
                                &e->arena,
                                "event id \"%.64s\" was first seen at %s "
                                "with a different payload digest",
                                env->id,
                                sg_iso_time(dr.first_seen_ms, ts, sizeof(ts))),
                };
                pdelta(e, j->p)->idempotency_parameter_conflicts_total++;
                j->err = sg_eng_emit_dlq(e, &j->s, &d);
                return true;
        }
        bool replay = dr.verdict == SG_DV_DLQ &&
                      sg_eng_header_find(j->rec, SG_H_REPLAY) != NULL;
        if (replay)
                return false;
        pdelta(e, j->p)->dedup_hits_total++;
        return true;
}

/* Semantics §3 "dedup-only topics skip rows 4–8 and apply", and §3b
 * ordering mode none: apply. */
static bool dedup_only_apply(judged_t *j) {
        const sg_envelope_t *env = j->env;
        if (j->tc->order_mode != SG_ORDER_NONE && env->has_version &&
            env->aggregate)
                return false;
        dlq_info_t about = {.aggregate = env->aggregate};
        if ((j->err = sg_eng_emit_output(j->e, &j->s, NULL, NULL, &about)))
                return true;
        j->err = key_record(j, j->e->out_rejected ? SG_DV_DLQ : SG_DV_APPLIED);
        return true;
}

/* What rows 5–8 judge the record's version by: the version the aggregate
 * expects, whether it is stale, and what a DLQ record about it names. */
static void versions_judge(judged_t *j) {
        const agg_ctx_t *a = &j->a;
        j->next = agg_next(j->p, a);
        /* v <= L (or v < F for a new aggregate). Judged on L itself, never
         * on L+1, which does not exist for L = 2^64-1. */
        j->stale =
                a->rec.has_last ? j->v <= a->rec.last_version : j->v < j->next;
        j->d = (dlq_info_t){.aggregate = a->rec.aggregate,
                            .has_versions = true,
                            .expected = j->next,
                            .actual = j->v,
                            .state = a->rec.state};
}

/* Not a row: the aggregate rows 4–8 judge by, the version it expects, and
 * what a DLQ record about it names; and the co-partitioning watch of
 * semantics §2 (engine_copart.c). Decides only on a store error. */
static bool aggregate_load(judged_t *j) {
        const sg_envelope_t *env = j->env;
        agg_ctx_t *a = &j->a;
        if ((j->err = sg_eng_agg_load(j->e, j->p, env->aggregate,
                                      env->aggregate_len, a)))
                return true;
        sg_eng_copart_watch(j->e, j->p, j->rec, env, a->hash);
        j->v = env->version;
        versions_judge(j);
        return false;
}

/* Row 4 (semantics §3): aggregate quarantined → DLQ
 * aggregate_quarantined, key recorded. */
static bool row4_quarantined(judged_t *j) {
        part_t *p = j->p;
        agg_ctx_t *a = &j->a;
        if (!(a->rec.flags & SG_AGG_QUARANTINED))
                return false;
        j->d.reason = SG_R_AGGREGATE_QUARANTINED;
        j->d.detail = snap_enabled(p)
                              ? "aggregate is quarantined after a gap "
                                "timeout; each of its events asks the "
                                "authority for a snapshot again, and an "
                                "answer with one releases it (seqgatectl "
                                "release otherwise)"
                              : "aggregate is quarantined after a gap "
                                "timeout; its events wait in the DLQ for an "
                                "operator (seqgatectl release)";
        if ((j->err = dlq_and_key(j)))
                return true;
        /* with a snapshot source, every event of a quarantined
         * aggregate asks its authority again (one request at a
         * time), so a refetch that gave up is not final */
        if (snap_enabled(p) && !(a->rec.flags & SG_AGG_REFETCHING)) {
                if ((j->err = sg_eng_snap_start(j->e, p, a, j->errstr,
                                                j->errstr_size)))
                        return true;
                j->err = sg_eng_agg_save(j->e, p, a, j->errstr, j->errstr_size);
        }
        return true;
}

/* Row 4b (semantics §4b): the record's epoch e against the aggregate's
 * epoch E. e < E → DLQ fenced_epoch whatever the version, key recorded;
 * e == E → the version rows as always; e > E (or the aggregate's first
 * epoch) → the aggregate enters epoch e (events parked under E are
 * dead-lettered fenced_epoch; epoch_versions restart: L starts again) and
 * the version rows judge the record in it. */
static bool row4b_epoch(judged_t *j) {
        sg_engine_t *e = j->e;
        const sg_envelope_t *env = j->env;
        agg_ctx_t *a = &j->a;
        if (!env->has_epoch || (a->rec.has_epoch && env->epoch == a->rec.epoch))
                return false;
        if (a->rec.has_epoch && env->epoch < a->rec.epoch) {
                pdelta(e, j->p)->fenced_epoch_total++;
                j->d.reason = SG_R_FENCED_EPOCH;
                j->d.detail = sg_arena_printf(
                        &e->arena,
                        "epoch %" PRIu64 " is below the aggregate's epoch "
                        "%" PRIu64 " (fenced; version %" PRIu64 ")",
                        env->epoch, a->rec.epoch, j->v);
                j->err = dlq_and_key(j);
                return true;
        }
        bool moved = a->rec.has_epoch; /* else its first epoch */
        if ((j->err = sg_eng_epoch_enter(e, j->p, a, env->epoch, j->errstr,
                                         j->errstr_size)))
                return true;
        if (moved && a->rec.parked_cnt == 0 &&
            (a->rec.flags & SG_AGG_REFETCHING) &&
            (j->err =
                     sg_eng_snap_cancel(e, j->p, a, j->errstr, j->errstr_size)))
                return true; /* the gap it asked about was fenced */
        /* saved now: a row below may decide without saving (stale, pause) */
        if ((j->err = sg_eng_agg_save(e, j->p, a, j->errstr, j->errstr_size)))
                return true;
        versions_judge(j);
        return false;
}

/* Semantics §4 "New aggregates": under trust_first_seen a new aggregate
 * above F adopts its first version as the starting point. Never decides. */
static bool new_aggregate_adopt(judged_t *j) {
        const agg_ctx_t *a = &j->a;
        if (!a->rec.has_last && j->v > j->next &&
            j->tc->new_aggregate == SG_NEWAGG_TRUST_FIRST_SEEN &&
            a->rec.parked_cnt == 0)
                j->next = j->v;
        return false;
}

/* Row 5 (semantics §3): v <= L (or v < F) → DLQ stale_version, or drop
 * (stale_drop); key recorded. */
static bool row5_stale(judged_t *j) {
        sg_engine_t *e = j->e;
        const agg_ctx_t *a = &j->a;
        if (!j->stale)
                return false;
        pdelta(e, j->p)->stale_version_rejections_total++;
        if (j->tc->stale_drop) {
                j->err = key_record(j, SG_DV_DROPPED);
                return true;
        }
        j->d.reason = SG_R_STALE_VERSION;
        j->d.detail =
                a->rec.has_last
                        ? sg_arena_printf(&e->arena,
                                          "version %" PRIu64
                                          " <= last applied version %" PRIu64,
                                          j->v, a->rec.last_version)
                        : sg_arena_printf(&e->arena,
                                          "version %" PRIu64
                                          " is below first_version %" PRIu64,
                                          j->v, j->tc->first_version);
        j->err = dlq_and_key(j);
        return true;
}

/* Semantics §3 "v > L + max_version_jump is DLQ version_jump at once":
 * one bogus version must not hold or quarantine an aggregate. */
static bool version_jump(judged_t *j) {
        const sg_topic_config_t *tc = j->tc;
        uint64_t v = j->v, next = j->next;
        if (v - next < tc->max_version_jump)
                return false;
        j->d.reason = SG_R_VERSION_JUMP;
        j->d.detail = sg_arena_printf(
                &j->e->arena,
                "version %" PRIu64 " is %" PRIu64 " above the expected "
                "version %" PRIu64 " (max_version_jump %" PRIu64 ")",
                v, v - next, next, tc->max_version_jump);
        j->err = dlq_and_key(j);
        return true;
}

/* Rows 6–7 (semantics §3; §3b latest_wins): v == L+1 (under latest_wins
 * any v > L) → the state machine decides apply or DLQ, L = v, key
 * recorded; then the drain of what is parked. */
static bool rows6_7_in_order(judged_t *j) {
        sg_engine_t *e = j->e;
        part_t *p = j->p;
        agg_ctx_t *a = &j->a;
        uint64_t v = j->v, next = j->next;
        if (v != next && j->tc->order_mode != SG_ORDER_LATEST_WINS)
                return false;
        const char *gh = NULL, *gv = NULL;
        if (v > next) { /* latest_wins: apply at once, count the gap */
                pdelta(e, p)->event_sequence_gaps_total++;
                gh = SG_H_GAP_MISSING;
                gv = sg_arena_printf(&e->arena, "%" PRIu64 "-%" PRIu64, next,
                                     v - 1);
        }
        uint8_t verdict;
        if ((j->err = sg_eng_apply_in_order(e, p, a, &j->s, v, j->env->type, gh,
                                            gv, &verdict, j->errstr,
                                            j->errstr_size)))
                return true;
        if ((j->err = key_record(j, verdict)))
                return true;
        if ((j->err = sg_eng_drain(e, p, a, j->errstr, j->errstr_size)))
                return true;
        if (a->rec.parked_cnt == 0 && (a->rec.flags & SG_AGG_REFETCHING)) {
                /* the gap closed by itself */
                if ((j->err = sg_eng_snap_cancel(e, p, a, j->errstr,
                                                 j->errstr_size)))
                        return true;
        }
        j->err = sg_eng_agg_save(e, p, a, j->errstr, j->errstr_size);
        return true;
}

/* Row 8b (semantics §3): another event (other key) already parked at v →
 * DLQ version_conflict; the parked one keeps the version. The same event
 * parked already (its dedup record expired meanwhile) is row 2. */
static bool row8b_version_held(judged_t *j) {
        sg_engine_t *e = j->e;
        part_t *p = j->p;
        char ts[40];
        if (j->a.rec.parked_cnt == 0)
                return false;
        sg_parked_rec_t held;
        sg_err_t err = sg_parked_get(e->txn, &p->tp, j->a.hash, j->v, &held);
        if (err == SG_ERR_NOT_FOUND)
                return false;
        if (err) {
                j->err = err;
                return true;
        }
        if (memcmp(held.key_hash, j->env->key_hash, 32) == 0) {
                pdelta(e, p)->dedup_hits_total++;
                return true;
        }
        j->d.reason = SG_R_VERSION_CONFLICT;
        j->d.detail = sg_arena_printf(
                &e->arena,
                "version %" PRIu64 " is already held by another "
                "event, parked from %s/%" PRId32 " offset %" PRId64
                " at %s (waiting for %" PRIu64 ")",
                j->v, p->topic, p->partition, held.offset,
                sg_iso_time(held.parked_at_ms, ts, sizeof(ts)), j->next);
        j->err = dlq_and_key(j);
        return true;
}

/* Row 8's caps (semantics §4 "Caps"): whether parking @p bytes more would
 * pass one; then pause (back-pressure) or DLQ park_overflow. */
static bool park_overflow(judged_t *j, uint64_t bytes) {
        sg_engine_t *e = j->e;
        const sg_topic_config_t *tc = j->tc;
        const part_t *p = j->p;
        const char *cap = NULL;
        uint64_t cap_val = 0;
        if (j->a.rec.parked_cnt >= tc->max_parked_per_aggregate) {
                cap = "max_parked_per_aggregate";
                cap_val = tc->max_parked_per_aggregate;
        } else if (p->work.parked_cnt >= tc->max_parked_total) {
                cap = "max_parked_total";
                cap_val = tc->max_parked_total;
        } else if (p->work.parked_bytes + bytes > tc->max_parked_bytes) {
                cap = "max_parked_bytes";
                cap_val = tc->max_parked_bytes;
        }
        if (!cap)
                return false;
        pdelta(e, p)->park_overflow_total++;
        if (tc->on_park_overflow == SG_OVERFLOW_PAUSE) {
                /* Nothing was written for this record. */
                pdelta(e, p)->records_total--;
                *j->result = SG_PAUSE;
                j->err = SG_OK;
                return true;
        }
        j->d.reason = SG_R_PARK_OVERFLOW;
        j->d.detail = sg_arena_printf(&e->arena,
                                      "version %" PRIu64 " cannot be parked "
                                      "(waiting for %" PRIu64 "): %s %" PRIu64
                                      " reached",
                                      j->v, j->next, cap, cap_val);
        j->err = dlq_and_key(j);
        return true;
}

/* A parked event is also a changelog record (both guarantees: the whole
 * record and its metadata); one the changelog topic cannot take would stop
 * the partition (semantics §3 "A record the output topic cannot take"). It
 * is not parked: the DLQ, output_rejected, and the aggregate keeps waiting
 * for the versions before it, as for any event it never got. */
static bool park_changelog_rejected(judged_t *j, size_t hdr_len) {
        sg_engine_t *e = j->e;
        const sg_topic_config_t *tc = j->tc;
        const sg_record_t *rec = j->rec;
        const sg_envelope_t *env = j->env;
        size_t cl_limit = limit_of(e, limits_of(e, tc)->changelog);
        size_t value_len = rec->value ? rec->value_len : 0;
        size_t cl_size = sg_record_wire_size(
                1 + 64,
                72 + (env->type ? strlen(env->type) : 0) +
                        (rec->key ? rec->key_len : 0) + value_len + hdr_len,
                NULL, 0, NULL, 0);
        if (!cl_limit || cl_size <= cl_limit)
                return false;
        j->d.reason = SG_R_OUTPUT_REJECTED;
        j->d.drop_value = cl_size - value_len <= cl_limit;
        j->d.detail = sg_arena_printf(
                &e->arena,
                "version %" PRIu64 " cannot be parked (waiting for "
                "%" PRIu64 "): its changelog record would be %zu bytes, "
                "more than the %zu topic \"%s\" takes",
                j->v, j->next, cl_size, cl_limit, tc->changelog_topic);
        sg_eng_log(e, SG_LOG_WARNING, "output_rejected", j->p, "offset", LF_I64,
                   rec->offset, "changelog_topic", LF_STR, tc->changelog_topic,
                   "bytes", LF_U64, (uint64_t)cl_size, "limit", LF_U64,
                   (uint64_t)cl_limit, NULL);
        j->err = dlq_and_key(j);
        return true;
}

/* Row 8 (semantics §3): v > L+1 → park, within the caps; a new gap counts
 * once; key recorded. A new aggregate above F under new_aggregate "strict"
 * asks its snapshot source at once (§4). Decides every record that gets
 * here. */
static bool row8_park(judged_t *j) {
        sg_engine_t *e = j->e;
        part_t *p = j->p;
        agg_ctx_t *a = &j->a;
        const sg_record_t *rec = j->rec;
        const sg_envelope_t *env = j->env;
        size_t hdr_len = 0;
        void *hdr_blob = NULL;
        if (rec->header_cnt &&
            (j->err = sg_headers_serialize(rec->headers, rec->header_cnt,
                                           &hdr_blob, &hdr_len)))
                return true;
        uint64_t bytes = (rec->key ? rec->key_len : 0) +
                         (rec->value ? rec->value_len : 0) + hdr_len;
        if (park_overflow(j, bytes) || park_changelog_rejected(j, hdr_len)) {
                free(hdr_blob);
                return true;
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
                .has_epoch = env->has_epoch, /* semantics §4b */
                .epoch = env->epoch,
        };
        memcpy(pr.key_hash, env->key_hash, 32);
        j->err = sg_parked_put(e->txn, &p->tp, a->hash, j->v, &pr, j->errstr,
                               j->errstr_size);
        free(hdr_blob);
        if (j->err)
                return true;
        if (a->rec.parked_cnt == 0) {
                pdelta(e, p)->event_sequence_gaps_total++;
                a->rec.parked_since_ms = e->now;
        }
        a->rec.parked_cnt++;
        a->rec.parked_bytes += bytes;
        p->work.parked_cnt++;
        p->work.parked_bytes += bytes;
        pdelta(e, p)->parked_total++;
        if ((j->err = key_record(j, SG_DV_PARKED)))
                return true;
        if (!a->rec.has_last && snap_enabled(p) &&
            j->tc->new_aggregate == SG_NEWAGG_STRICT) {
                if ((j->err = sg_eng_snap_start(e, p, a, j->errstr,
                                                j->errstr_size)))
                        return true;
        }
        j->err = sg_eng_agg_save(e, p, a, j->errstr, j->errstr_size);
        return true;
}

/* One step of the table: true when it decided the record. */
typedef bool row_fn(judged_t *j);

/* Semantics §3, in the table's order. */
static row_fn *const table[] = {
        row1_malformed,      /* 1 */
        rows2_3_key_seen,    /* 2, 3 */
        dedup_only_apply,    /* dedup-only topics skip 4–8 */
        aggregate_load,      /* (the aggregate 4–8 judge by) */
        row4_quarantined,    /* 4 */
        row4b_epoch,         /* 4b (§4b epochs) */
        new_aggregate_adopt, /* (§4 trust_first_seen) */
        row5_stale,          /* 5 */
        version_jump,        /* max_version_jump */
        rows6_7_in_order,    /* 6, 7 */
        row8b_version_held,  /* 8b */
        row8_park,           /* 8 */
};

sg_err_t sg_eng_judge(sg_engine_t *e, part_t *p, const sg_record_t *rec,
                      sg_process_result_t *result, char *errstr,
                      size_t errstr_size) {
        *result = SG_PROCESSED;
        const sg_header_t *ctl = sg_eng_header_find(rec, SG_H_CONTROL);
        if (ctl)
                return control(e, p, rec, ctl, errstr, errstr_size);
        pdelta(e, p)->records_total++;
        judged_t j = {
                .e = e,
                .p = p,
                .tc = p->tc,
                .rec = rec,
                .env = &e->env,
                .s =
                        {
                                .part = p,
                                .offset = rec->offset,
                                .timestamp_ms = rec->timestamp_ms,
                                .key = rec->key,
                                .key_len = rec->key_len,
                                .value = rec->value,
                                .value_len = rec->value_len,
                                .headers = rec->headers,
                                .header_cnt = rec->header_cnt,
                        },
                .result = result,
                .errstr = errstr,
                .errstr_size = errstr_size,
        };
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (table[i](&j))
                        return j.err;
        assert(!"row 8 decides every record the rows before it pass");
        return SG_ERR_FATAL;
}
