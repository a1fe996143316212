/*
 * engine_effects.c — the engine's effects (processor.h): the output and DLQ
 * records of a decision (semantics §5), and what happens to a record Kafka
 * cannot take (semantics §3 "A record the output topic cannot take").
 *
 * Effects are collected in order in e->effects; each output and DLQ effect
 * remembers the input record it is about (e->effect_src), so that a refusal
 * of the broker routes that record in the batch's re-run. Memory: see
 * engine.c (borrowed input records, or the batch arena).
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- effects ----------------------------------------------------------- */

sg_effect_t *sg_eng_effect_new(sg_engine_t *e) {
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

void sg_eng_size_limit(void *opaque, const char *topic, size_t max) {
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
bool sg_eng_refused(void *opaque, size_t index, bool too_large,
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
void sg_eng_refusals_settle(sg_engine_t *e, bool committed) {
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

void sg_eng_refusals_drop_partition(sg_engine_t *e, const char *topic,
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
                d.detail = sg_arena_printf(
                        &e->arena,
                        "the broker refused the output record for topic \"%s\" "
                        "(%zu bytes): %s",
                        tc->output_topic, size, rf->reason);
        } else {
                /* the value is the problem when the record fits without it */
                d.drop_value = size - value_len <= limit;
                d.detail = sg_arena_printf(
                        &e->arena,
                        "the output record is %zu bytes with seqgate's "
                        "headers, "
                        "more than the %zu topic \"%s\" takes (the producer's "
                        "message.max.bytes and the topic's max.message.bytes)",
                        size, limit, tc->output_topic);
        }
        if (!d.detail)
                return SG_ERR_NOMEM;
        sg_eng_log(e, SG_LOG_WARNING, "output_rejected", s->part, "offset",
                   LF_I64, s->offset, "output_topic", LF_STR, tc->output_topic,
                   "bytes", LF_U64, (uint64_t)size, "limit", LF_U64,
                   (uint64_t)limit, "refused", LF_STR_OR_NULL,
                   rf ? rf->reason : NULL, "value_dropped", LF_BOOL,
                   (int)d.drop_value, NULL);
        e->out_rejected = true;
        return sg_eng_emit_dlq(e, s, &d);
}

/* Writes @p v in decimal at @p buf (at least 20 bytes); returns its
 * length. No sign: the caller writes one. */
static size_t u64_digits(char *buf, uint64_t v) {
        char rev[20];
        size_t n = 0;
        do {
                rev[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        for (size_t i = 0; i < n; i++)
                buf[i] = rev[n - 1 - i];
        return n;
}

static size_t i64_digits(char *buf, int64_t v) {
        if (v >= 0)
                return u64_digits(buf, (uint64_t)v);
        buf[0] = '-';
        return 1 + u64_digits(buf + 1, 0 - (uint64_t)v);
}

/* The source header's value, "topic/partition/offset" (semantics §5), in
 * the batch arena; its length in *lenp. Without printf: every output
 * record has one. NULL when out of memory. */
static char *source_text(arena_t *a, const char *topic, int32_t partition,
                         int64_t offset, size_t *lenp) {
        size_t tl = strlen(topic);
        char *s = sg_arena_alloc(a, tl + 1 + 11 + 1 + 20 + 1);
        if (!s)
                return NULL;
        memcpy(s, topic, tl);
        size_t n = tl;
        s[n++] = '/';
        n += i64_digits(s + n, partition);
        s[n++] = '/';
        n += i64_digits(s + n, offset);
        s[n] = '\0';
        *lenp = n;
        return s;
}

/* The output record of @p s. When Kafka cannot take it (its size above the
 * topic's limit, or the broker refused it before) the DLQ record
 * output_rejected is emitted instead and e->out_rejected is set: the caller
 * records the key with a DLQ verdict. @p about (may be NULL) names the
 * aggregate and versions for that DLQ record. */
sg_err_t sg_eng_emit_output(sg_engine_t *e, const subject_t *s,
                            const char *gap_hdr, const char *gap_val,
                            const dlq_info_t *about) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = sg_eng_effect_new(e);
        sg_header_t *x = sg_arena_alloc(&e->arena, 2 * sizeof(*x));
        size_t src_len = 0;
        char *src = source_text(&e->arena, s->part->topic, s->part->partition,
                                s->offset, &src_len);
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
        x[0] = (sg_header_t){SG_H_SOURCE, src, src_len};
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
        pdelta(e, s->part)->applied_total++;
        return SG_OK;
}

sg_err_t sg_eng_emit_dlq(sg_engine_t *e, const subject_t *s,
                         const dlq_info_t *d) {
        const sg_topic_config_t *tc = s->part->tc;
        sg_effect_t *ef = sg_eng_effect_new(e);
        sg_header_t *x = sg_arena_alloc(&e->arena, 16 * sizeof(*x));
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
         * state) are copied into the batch arena: effects outlive sg_eng_judge(). */
#define COPY(str) ((char *)sg_arena_dup(&e->arena, (str), strlen(str) + 1))
        H(SG_DLQ_H_DETAIL, d->detail ? COPY(d->detail) : "");
        H(SG_DLQ_H_TOPIC, s->part->topic);
        H(SG_DLQ_H_PARTITION,
          sg_arena_printf(&e->arena, "%" PRId32, s->part->partition));
        H(SG_DLQ_H_OFFSET, sg_arena_printf(&e->arena, "%" PRId64, s->offset));
        H(SG_DLQ_H_TIMESTAMP,
          sg_arena_printf(&e->arena, "%" PRId64, s->timestamp_ms));
        H(SG_DLQ_H_GROUP, e->conf->group_id ? e->conf->group_id : "");
        if (d->aggregate)
                H(SG_DLQ_H_AGGREGATE, COPY(d->aggregate));
        if (d->has_versions)
                H(SG_DLQ_H_EXPECTED,
                  sg_arena_printf(&e->arena, "%" PRIu64, d->expected));
        if (d->has_versions || d->has_actual)
                H(SG_DLQ_H_ACTUAL,
                  sg_arena_printf(&e->arena, "%" PRIu64, d->actual));
        if (d->state && d->state[0])
                H(SG_DLQ_H_STATE, COPY(d->state));
        H(SG_DLQ_H_INSTANCE, e->conf->instance_id ? e->conf->instance_id : "");
        char at[40];
        H(SG_DLQ_H_DEAD_LETTERED_AT, COPY(sg_iso_time(e->now, at, sizeof(at))));
        if (d->gap_hdr && d->gap_val)
                H(d->gap_hdr, d->gap_val);
        ef->kind = SG_EFFECT_DLQ;
        ef->topic = tc->dlq_topic;
        ef->partition = -1;
        ef->key = s->key;
        ef->key_len = s->key_len;
        ef->value = s->value;
        ef->value_len = s->value_len;
        /* the Kafka timestamp is when it was dead-lettered, so that the
         * DLQ topic's retention.ms counts from then, not from the input's
         * time (a late or replayed record would expire at once); the
         * input's is in SG_DLQ_H_TIMESTAMP */
        ef->timestamp_ms = e->now > 0 ? e->now : 0;
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
        if (ef->value && (d->drop_value || level >= 1 ||
                          (limit && sg_effect_wire_size(ef) > limit))) {
                H(SG_DLQ_H_VALUE_DROPPED,
                  sg_arena_printf(&e->arena, "%zu", ef->value_len));
                ef->value = NULL;
                ef->value_len = 0;
                ef->extra_cnt = n;
        }
        if (ef->header_cnt &&
            (level >= 2 || (limit && sg_effect_wire_size(ef) > limit))) {
                H(SG_DLQ_H_HEADERS_DROPPED,
                  sg_arena_printf(&e->arena, "%zu", ef->header_cnt));
                ef->headers = NULL;
                ef->header_cnt = 0;
                ef->extra_cnt = n;
        }
#undef H
#undef COPY
        effect_src_set(e, ef, s);
        pdelta(e, s->part)->dlq_total[d->reason]++;
        e->dlq_reason = d->reason;
        return SG_OK;
}
