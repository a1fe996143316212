/*
 * engine_park.c — one aggregate's records in the store: its idempotency
 * keys (dedup records), its aggregate record, and its parked events
 * (semantics §3 row 8): park / unpark, the drain that decides what L now
 * allows, the advance to a version a snapshot or release vouches for, and
 * the gap policies when a gap deadline passes (semantics §4 step 2).
 *
 * Everything here runs inside the batch's write transaction (e->txn).
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- dedup records ------------------------------------------------------ */

/* Records the idempotency key with @p verdict. @p digest NULL: the key is
 * already recorded (a parked event leaving the park): only its verdict
 * changes, first-seen time and expiry stay. A live record of a malformed
 * copy is replaced whole by the copy judged now (semantics §3 row 1). */
sg_err_t sg_eng_record_key(sg_engine_t *e, part_t *p, const unsigned char *kh,
                           const unsigned char *digest, uint8_t verdict,
                           char *errstr, size_t errstr_size) {
        sg_dedup_rec_t r;
        sg_err_t err;
        bool found;
        if (e->dk_valid && memcmp(e->dk_hash, kh, 32) == 0) {
                /* sg_eng_judge() just read this key: no second lookup */
                found = e->dk_found;
                r = e->dk_rec;
        } else {
                err = sg_dedup_get(e->txn, &p->tp, kh, &r);
                if (err && err != SG_ERR_NOT_FOUND) {
                        sg_errf(errstr, errstr_size, "dedup read failed");
                        return err;
                }
                found = err == SG_OK;
        }
        e->dk_valid = false;
        if (!found) /* a new record: no field of another key's */
                memset(&r, 0, sizeof(r));
        /* a DLQ verdict follows its DLQ record: keep that record's reason */
        uint8_t reason = verdict == SG_DV_DLQ ? (uint8_t)e->dlq_reason : 0;
        e->dlq_reason = SG_R_NONE;
        sg_dedup_rec_t old = r;
        if (!digest) {
                if (!found)
                        return SG_OK;
        } else if (found && r.expiry_ms > e->now &&
                   !(r.verdict == SG_DV_DLQ && r.reason == SG_R_MALFORMED)) {
                /* a replay judged again: only the verdict changes */
        } else {
                /* a new key, one past its TTL, or one a malformed copy
                 * recorded, which never claimed it (semantics §3 row 1):
                 * this copy's digest and time */
                memcpy(r.digest, digest, 32);
                r.first_seen_ms = e->now;
                r.expiry_ms = e->now + p->tc->dedup_ttl_ms;
        }
        r.verdict = verdict;
        r.reason = reason;
        return sg_dedup_put_known(e->txn, &p->tp, kh, &r, found ? &old : NULL,
                                  errstr, errstr_size);
}

/* ---- aggregates --------------------------------------------------------- */

sg_err_t sg_eng_agg_load(sg_engine_t *e, part_t *p, const char *id,
                         size_t id_len, agg_ctx_t *a) {
        /* the engine's envelope keeps a digest context: no allocation */
        (void)sg_envelope_sha256(&e->env, id, id_len, a->hash);
        sg_err_t err = sg_agg_get(e->txn, &p->tp, a->hash, &a->rec);
        if (err == SG_ERR_NOT_FOUND) {
                memset(&a->rec, 0, sizeof(a->rec));
                if (p->tc->sm.enabled)
                        snprintf(a->rec.state, sizeof(a->rec.state), "%s",
                                 p->tc->sm.initial);
                a->exists = false;
                err = SG_OK;
        } else {
                a->exists = true;
        }
        /* the id, which the store keeps only while it needs it (store.h) */
        size_t n = id_len < sizeof(a->rec.aggregate) - 1
                           ? id_len
                           : sizeof(a->rec.aggregate) - 1;
        memcpy(a->rec.aggregate, id, n);
        a->rec.aggregate[n] = '\0';
        a->rec.aggregate_len = n;
        a->old_since = sg_agg_indexed_since(&a->rec);
        return err;
}

sg_err_t sg_eng_agg_save(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                         size_t errstr_size) {
        sg_err_t err = sg_agg_put(e->txn, &p->tp, a->hash, &a->rec,
                                  a->old_since, errstr, errstr_size);
        if (!err) {
                a->old_since = sg_agg_indexed_since(&a->rec);
                a->exists = true;
        }
        return err;
}

/* ---- parked events: unpark, drain, advance -------------------------------- */

/* Builds a subject from a parked record, copying it out of LMDB memory. */
static sg_err_t subject_from_parked(sg_engine_t *e, const part_t *p,
                                    const sg_parked_rec_t *r, subject_t *s,
                                    char **typep) {
        memset(s, 0, sizeof(*s));
        s->part = p;
        s->offset = r->offset;
        s->timestamp_ms = r->timestamp_ms;
        if (r->key) {
                s->key = sg_arena_dup(&e->arena, r->key, r->key_len);
                s->key_len = r->key_len;
        }
        if (r->value) {
                s->value = sg_arena_dup(&e->arena, r->value, r->value_len);
                s->value_len = r->value_len;
        }
        *typep = NULL;
        if (r->type) {
                *typep = sg_arena_alloc(&e->arena, r->type_len + 1);
                if (!*typep)
                        return SG_ERR_NOMEM;
                memcpy(*typep, r->type, r->type_len);
                (*typep)[r->type_len] = '\0';
        }
        if (r->headers && r->headers_len >= 4) {
                void *blob =
                        sg_arena_dup(&e->arena, r->headers, r->headers_len);
                size_t cnt = r->header_cnt; /* the decoder checked the block */
                sg_header_t *h =
                        sg_arena_alloc(&e->arena, (cnt ? cnt : 1) * sizeof(*h));
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
 * lowest parked version if it is <= @p v. *vp receives its version, and
 * *epochp (may be NULL) the epoch it was parked under, or UINT64_MAX when
 * it has none. SG_ERR_NOT_FOUND when there is none. */
static sg_err_t unpark(sg_engine_t *e, part_t *p, agg_ctx_t *a, bool lowest,
                       uint64_t v, uint64_t *vp, uint64_t *epochp, subject_t *s,
                       char **typep, unsigned char kh[32], char *errstr,
                       size_t errstr_size) {
        sg_parked_rec_t pr, *r = &pr;
        uint64_t got = v;
        if (a->rec.parked_cnt == 0)
                return SG_ERR_NOT_FOUND;
        sg_err_t err =
                lowest ? sg_parked_first(e->txn, &p->tp, a->hash, &got, r)
                       : sg_parked_get(e->txn, &p->tp, a->hash, v, r);
        if (err)
                return err;
        if (got > v)
                return SG_ERR_NOT_FOUND;
        *vp = got;
        if (epochp)
                *epochp = r->has_epoch ? r->epoch : UINT64_MAX;
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
        a->rec.parked_bytes -=
                bytes < a->rec.parked_bytes ? bytes : a->rec.parked_bytes;
        p->work.parked_cnt--;
        p->work.parked_bytes -=
                bytes < p->work.parked_bytes ? bytes : p->work.parked_bytes;
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

/* A parked event @p s (version @p v, key hash @p kh) of epoch @p epoch below
 * the aggregate's: DLQ fenced_epoch, its key keeps a DLQ verdict
 * (semantics §4b). */
static sg_err_t fence_parked(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                             const subject_t *s, uint64_t v, uint64_t epoch,
                             const unsigned char kh[32], char *errstr,
                             size_t errstr_size) {
        dlq_info_t d = {
                .reason = SG_R_FENCED_EPOCH,
                .aggregate = a->rec.aggregate,
                .has_versions = true,
                .expected = agg_next(p, a),
                .actual = v,
                .state = a->rec.state,
                .detail = sg_arena_printf(&e->arena,
                                          "version %" PRIu64 " of epoch "
                                          "%" PRIu64 " is fenced: the "
                                          "aggregate is at epoch %" PRIu64,
                                          v, epoch, a->rec.epoch),
        };
        sg_err_t err = sg_eng_emit_dlq(e, s, &d);
        if (err)
                return err;
        pdelta(e, p)->fenced_epoch_total++;
        return sg_eng_record_key(e, p, kh, NULL, SG_DV_DLQ, errstr,
                                 errstr_size);
}

/* Decides every parked event the aggregate's L now allows (semantics §3
 * drain): first the ones at or below L — a snapshot, a release or a
 * latest_wins apply moved L past them, so they are superseded (dropped,
 * counted, their keys kept as seen) — then L+1, L+2, ... through rows
 * 6–7. Afterwards every parked event is above L+1: the invariant that
 * keeps a parked version from ever being applied below L. */
sg_err_t sg_eng_drain(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                      size_t errstr_size) {
        sg_err_t err = SG_ERR_NOT_FOUND;
        bool changed = false;
        uint64_t v;
        subject_t s;
        char *type;
        unsigned char kh[32];
        while (a->rec.has_last &&
               (err = unpark(e, p, a, true, a->rec.last_version, &v, NULL, &s,
                             &type, kh, errstr, errstr_size)) == SG_OK) {
                changed = true;
                /* never emitted: the result query must not say applied */
                if ((err = sg_eng_record_key(e, p, kh, NULL, SG_DV_SUPERSEDED,
                                             errstr, errstr_size)))
                        return err;
                pdelta(e, p)->snapshot_superseded_total++;
        }
        if (a->rec.has_last && err != SG_ERR_NOT_FOUND)
                return err;
        uint64_t ep;
        while (agg_open(a) &&
               (err = unpark(e, p, a, false, agg_next(p, a), &v, &ep, &s, &type,
                             kh, errstr, errstr_size)) == SG_OK) {
                changed = true;
                /* never released under an epoch above its own (§4b) */
                if (a->rec.has_epoch && ep < a->rec.epoch) {
                        if ((err = fence_parked(e, p, a, &s, v, ep, kh, errstr,
                                                errstr_size)))
                                return err;
                        continue;
                }
                const char *gh = NULL, *gv = NULL;
                if (a->rec.skip_from) {
                        gh = SG_H_GAP_SKIPPED;
                        gv = sg_arena_printf(&e->arena, "%" PRIu64 "-%" PRIu64,
                                             a->rec.skip_from, a->rec.skip_to);
                        a->rec.skip_from = a->rec.skip_to = 0;
                }
                uint8_t verdict;
                if ((err = sg_eng_apply_in_order(e, p, a, &s, v, type, gh, gv,
                                                 &verdict, errstr,
                                                 errstr_size)))
                        return err;
                if ((err = sg_eng_record_key(e, p, kh, NULL, verdict, errstr,
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
sg_err_t sg_eng_agg_advance(sg_engine_t *e, part_t *p, agg_ctx_t *a, uint64_t S,
                            char *errstr, size_t errstr_size) {
        if (!a->rec.has_last || S > a->rec.last_version)
                agg_set_last(a, S);
        sg_err_t err = sg_eng_drain(e, p, a, errstr, errstr_size);
        if (err)
                return err;
        if (a->rec.parked_cnt > 0) {
                a->rec.parked_since_ms = e->now;
                pdelta(e, p)->event_sequence_gaps_total++;
        } else {
                a->rec.parked_since_ms = 0;
        }
        return SG_OK;
}

/* Dead-letters every event parked for aggregate @p a, in version order,
 * with @p reason and the detail "version V " + @p why; their keys keep a
 * DLQ verdict and the aggregate has nothing parked afterwards (the caller
 * saves it). Used by gap_policy dlq (semantics §4) and by an epoch change
 * (semantics §4b). */
static sg_err_t parked_to_dlq(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                              sg_reason_t reason, const char *why, char *errstr,
                              size_t errstr_size) {
        uint64_t next = agg_next(p, a);
        sg_err_t err;
        uint64_t v;
        subject_t s;
        char *type;
        unsigned char kh[32];
        while ((err = unpark(e, p, a, true, UINT64_MAX, &v, NULL, &s, &type, kh,
                             errstr, errstr_size)) == SG_OK) {
                dlq_info_t d = {
                        .reason = reason,
                        .aggregate = a->rec.aggregate,
                        .has_versions = true,
                        .expected = next,
                        .actual = v,
                        .state = a->rec.state,
                        .detail = sg_arena_printf(
                                &e->arena, "version %" PRIu64 " %s", v, why),
                };
                if ((err = sg_eng_emit_dlq(e, &s, &d)))
                        return err;
                if ((err = sg_eng_record_key(e, p, kh, NULL, SG_DV_DLQ, errstr,
                                             errstr_size)))
                        return err;
        }
        if (err != SG_ERR_NOT_FOUND)
                return err;
        a->rec.parked_cnt = 0;
        a->rec.parked_bytes = 0;
        a->rec.parked_since_ms = 0;
        return SG_OK;
}

/* ---- epochs (semantics §4b) ---------------------------------------------- */

sg_err_t sg_eng_epoch_enter(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            uint64_t epoch, char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (!a->rec.has_epoch) { /* the first epoch seen sets E */
                agg_enter_epoch(p, a, epoch);
                return SG_OK;
        }
        assert(epoch > a->rec.epoch);
        uint64_t from = a->rec.epoch, fenced = a->rec.parked_cnt;
        const char *why = sg_arena_printf(&e->arena,
                                          "of epoch %" PRIu64
                                          " is fenced: the aggregate moved to "
                                          "epoch %" PRIu64,
                                          from, epoch);
        if (!why)
                return SG_ERR_NOMEM;
        /* every parked event is of epoch E or lower: the park is empty
         * before E moves (a restarted epoch reuses the versions) */
        if ((err = parked_to_dlq(e, p, a, SG_R_FENCED_EPOCH, why, errstr,
                                 errstr_size)))
                return err;
        pdelta(e, p)->fenced_epoch_total += fenced;
        agg_enter_epoch(p, a, epoch);
        p->touched = true;
        sg_eng_log(e, SG_LOG_NOTICE, "aggregate_epoch", p, "aggregate", LF_STR,
                   a->rec.aggregate, "from_epoch", LF_U64, from, "epoch",
                   LF_U64, epoch, "fenced", LF_U64, fenced, NULL);
        return SG_OK;
}

/* ---- gap deadlines ------------------------------------------------------- */

sg_err_t sg_eng_gap_fire(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                         size_t errstr_size) {
        const sg_topic_config_t *tc = p->tc;
        sg_err_t err;
        uint64_t next = agg_next(p, a);
        pdelta(e, p)->gap_timeouts_total++;
        p->touched = true;
        sg_eng_log(e, SG_LOG_NOTICE, "gap_timeout", p, "aggregate", LF_STR,
                   a->rec.aggregate, "waiting_for", LF_U64, next, "parked",
                   LF_U64, (uint64_t)a->rec.parked_cnt, "waited_ms", LF_I64,
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
                        pdelta(e, p)->skipped_versions_total += low - next;
                }
                if (!a->rec.has_last || low - 1 > a->rec.last_version)
                        agg_set_last(a, low - 1);
                if ((err = sg_eng_drain(e, p, a, errstr, errstr_size)))
                        return err;
                return sg_eng_agg_save(e, p, a, errstr, errstr_size);
        }
        /* gap_policy dlq: everything parked goes to the DLQ, in version
         * order, and the aggregate is quarantined (row 4). */
        int64_t waited = e->now - a->rec.parked_since_ms;
        const char *why = sg_arena_printf(
                &e->arena,
                "waited %" PRId64 " ms for version %" PRIu64
                " (gap_timeout_ms %" PRId64 "); aggregate quarantined",
                waited, next, tc->gap_timeout_ms);
        if (!why)
                return SG_ERR_NOMEM;
        if ((err = parked_to_dlq(e, p, a, SG_R_GAP_TIMEOUT, why, errstr,
                                 errstr_size)))
                return err;
        if (!(a->rec.flags & SG_AGG_QUARANTINED)) {
                a->rec.flags |= SG_AGG_QUARANTINED;
                p->work.quarantined++;
                sg_eng_log(e, SG_LOG_WARNING, "aggregate_quarantined", p,
                           "aggregate", LF_STR, a->rec.aggregate, "waiting_for",
                           LF_U64, next, NULL);
        }
        return sg_eng_agg_save(e, p, a, errstr, errstr_size);
}
