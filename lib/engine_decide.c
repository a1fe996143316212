/*
 * engine_decide.c — the decision table (semantics §3, §3b): one input
 * record, in order, through
 *   envelope → row 1 (malformed) → rows 2–3 (dedup by idempotency key) →
 *   dedup-only topics apply → row 4 (quarantine) → row 5 (stale) →
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

const sg_header_t *sg_eng_header_find(const sg_record_t *rec,
                                      const char *name) {
        for (size_t i = rec->header_cnt; i > 0; i--)
                if (strcmp(rec->headers[i - 1].name, name) == 0)
                        return &rec->headers[i - 1];
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
                            known ? sg_arena_printf(&e->arena,
                                                 "event type \"%s\" is not "
                                                 "allowed from state %s",
                                                 type, a->rec.state)
                                  : sg_arena_printf(&e->arena,
                                                 "event type \"%s\" is not in "
                                                 "the state machine",
                                                 type ? type : "");
                        if ((err = sg_eng_emit_dlq(e, s, &d)))
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
        if ((err = sg_eng_agg_load(e, p, ja->valuestring, strlen(ja->valuestring),
                            &a)))
                goto done;
        bool quarantined = a.rec.flags & SG_AGG_QUARANTINED;
        why = sg_release_refusal(p->tc, a.exists ? &a.rec : NULL, jv != NULL,
                                 S, js ? js->valuestring : NULL, whybuf,
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
        e->delta.releases_total++;
        p->touched = true;
        sg_eng_log(e, SG_LOG_NOTICE, "aggregate_released", p, "aggregate", LF_STR,
             a.rec.aggregate, "last_version", LF_U64, a.rec.last_version,
             "offset", LF_I64, rec->offset, NULL);
        err = sg_eng_agg_save(e, p, &a, errstr, errstr_size);
        goto done;
refused:
        e->delta.control_ignored_total++;
        sg_eng_log(e, SG_LOG_WARNING, "control_refused", p, "aggregate", LF_STR,
             aggregate, "reason", LF_STR, why, "offset", LF_I64, rec->offset,
             NULL);
done:
        cJSON_Delete(body);
        return err;
}

sg_err_t sg_eng_judge(sg_engine_t *e, part_t *p, const sg_record_t *rec,
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
        const sg_header_t *ctl = sg_eng_header_find(rec, SG_H_CONTROL);
        if (ctl)
                return control(e, p, rec, ctl, errstr, errstr_size);
        e->delta.records_total++;

        /* Row 1: malformed. */
        err = sg_envelope_parse(tc, rec, env, detail, sizeof(detail));
        if (err == SG_ERR_INVALID) {
                dlq_info_t d = {.reason = SG_R_MALFORMED, .detail = detail};
                e->delta.malformed_total++;
                return sg_eng_emit_dlq(e, &s, &d);
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
                            .detail = sg_arena_printf(
                                &e->arena,
                                "event id \"%.64s\" was first seen at %s "
                                "with a different payload digest",
                                env->id, sg_iso_time(dr.first_seen_ms, ts, sizeof(ts))),
                        };
                        e->delta.idempotency_parameter_conflicts_total++;
                        return sg_eng_emit_dlq(e, &s, &d);
                }
                bool replay = dr.verdict == SG_DV_DLQ &&
                              sg_eng_header_find(rec, SG_H_REPLAY) != NULL;
                if (!replay) {
                        e->delta.dedup_hits_total++;
                        return SG_OK;
                }
        }

        /* Dedup-only topics, ordering mode none: apply. */
        if (tc->order_mode == SG_ORDER_NONE || !env->has_version ||
            !env->aggregate) {
                dlq_info_t about = {.aggregate = env->aggregate};
                if ((err = sg_eng_emit_output(e, &s, NULL, NULL, &about)))
                        return err;
                return sg_eng_record_key(e, p, env->key_hash, env->digest,
                                  e->out_rejected ? SG_DV_DLQ
                                                  : SG_DV_APPLIED,
                                  errstr, errstr_size);
        }

        agg_ctx_t a;
        if ((err = sg_eng_agg_load(e, p, env->aggregate, env->aggregate_len, &a)))
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
                if ((err = sg_eng_emit_dlq(e, &s, &d)) ||
                    (err = sg_eng_record_key(e, p, env->key_hash, env->digest,
                                      SG_DV_DLQ, errstr, errstr_size)))
                        return err;
                /* with a snapshot source, every event of a quarantined
                 * aggregate asks its authority again (one request at a
                 * time), so a refetch that gave up is not final */
                if (snap_enabled(p) && !(a.rec.flags & SG_AGG_REFETCHING)) {
                        if ((err = sg_eng_snap_start(e, p, &a, errstr, errstr_size)))
                                return err;
                        return sg_eng_agg_save(e, p, &a, errstr, errstr_size);
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
                        return sg_eng_record_key(e, p, env->key_hash, env->digest,
                                          SG_DV_DROPPED, errstr, errstr_size);
                d.reason = SG_R_STALE_VERSION;
                d.detail = a.rec.has_last
                               ? sg_arena_printf(&e->arena,
                                              "version %" PRIu64
                                              " <= last applied version %" PRIu64,
                                              v, a.rec.last_version)
                               : sg_arena_printf(&e->arena,
                                              "version %" PRIu64
                                              " is below first_version %" PRIu64,
                                              v, tc->first_version);
                if ((err = sg_eng_emit_dlq(e, &s, &d)))
                        return err;
                return sg_eng_record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }

        /* One bogus version must not hold or quarantine an aggregate. */
        if (v - next >= tc->max_version_jump) {
                d.reason = SG_R_VERSION_JUMP;
                d.detail = sg_arena_printf(&e->arena,
                                        "version %" PRIu64
                                        " is %" PRIu64 " above the expected "
                                        "version %" PRIu64
                                        " (max_version_jump %" PRIu64 ")",
                                        v, v - next, next,
                                        tc->max_version_jump);
                if ((err = sg_eng_emit_dlq(e, &s, &d)))
                        return err;
                return sg_eng_record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
                                  errstr, errstr_size);
        }

        uint8_t verdict;
        if (v == next || tc->order_mode == SG_ORDER_LATEST_WINS) {
                const char *gh = NULL, *gv = NULL;
                if (v > next) { /* latest_wins: apply at once, count the gap */
                        e->delta.event_sequence_gaps_total++;
                        gh = SG_H_GAP_MISSING;
                        gv = sg_arena_printf(&e->arena, "%" PRIu64 "-%" PRIu64,
                                          next, v - 1);
                }
                if ((err = sg_eng_apply_in_order(e, p, &a, &s, v, env->type, gh, gv,
                                          &verdict, errstr, errstr_size)))
                        return err;
                if ((err = sg_eng_record_key(e, p, env->key_hash, env->digest,
                                      verdict, errstr, errstr_size)))
                        return err;
                if ((err = sg_eng_drain(e, p, &a, errstr, errstr_size)))
                        return err;
                if (a.rec.parked_cnt == 0 && (a.rec.flags & SG_AGG_REFETCHING) &&
                    (err = sg_eng_snap_cancel(e, p, &a, errstr, errstr_size)))
                        return err; /* the gap closed by itself */
                return sg_eng_agg_save(e, p, &a, errstr, errstr_size);
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
                        d.detail = sg_arena_printf(
                            &e->arena,
                            "version %" PRIu64 " is already held by another "
                            "event, parked from %s/%" PRId32 " offset %" PRId64
                            " at %s (waiting for %" PRIu64 ")",
                            v, p->topic, p->partition, held.offset,
                            sg_iso_time(held.parked_at_ms, ts, sizeof(ts)),
                            next);
                        if ((err = sg_eng_emit_dlq(e, &s, &d)))
                                return err;
                        return sg_eng_record_key(e, p, env->key_hash, env->digest,
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
                d.detail = sg_arena_printf(&e->arena,
                                        "version %" PRIu64 " cannot be parked "
                                        "(waiting for %" PRIu64 "): %s %" PRIu64
                                        " reached",
                                        v, next, cap, cap_val);
                if ((err = sg_eng_emit_dlq(e, &s, &d)))
                        return err;
                return sg_eng_record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
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
                d.detail = sg_arena_printf(
                    &e->arena,
                    "version %" PRIu64 " cannot be parked (waiting for "
                    "%" PRIu64 "): its changelog record would be %zu bytes, "
                    "more than the %zu topic \"%s\" takes",
                    v, next, cl_size, cl_limit, tc->changelog_topic);
                sg_eng_log(e, SG_LOG_WARNING, "output_rejected", p, "offset", LF_I64,
                     rec->offset, "changelog_topic", LF_STR,
                     tc->changelog_topic, "bytes", LF_U64, (uint64_t)cl_size,
                     "limit", LF_U64, (uint64_t)cl_limit, NULL);
                if ((err = sg_eng_emit_dlq(e, &s, &d)))
                        return err;
                return sg_eng_record_key(e, p, env->key_hash, env->digest, SG_DV_DLQ,
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
        if ((err = sg_eng_record_key(e, p, env->key_hash, env->digest, SG_DV_PARKED,
                              errstr, errstr_size)))
                return err;
        /* A new aggregate above first_version under "strict": ask its
         * authority at once instead of waiting for the deadline (§4). */
        if (!a.rec.has_last && snap_enabled(p) &&
            tc->new_aggregate == SG_NEWAGG_STRICT &&
            (err = sg_eng_snap_start(e, p, &a, errstr, errstr_size)))
                return err;
        return sg_eng_agg_save(e, p, &a, errstr, errstr_size);
}
