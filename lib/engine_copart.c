/*
 * engine_copart.c — the co-partitioning watch (semantics §2
 * "Co-partitioning"): seqgate orders an aggregate's events within one
 * partition, so an aggregate whose events land on two partitions is
 * ordered twice, each partition on its own (the second one parks what it
 * never saw the start of, then quarantines it). The engine cannot see the
 * producers' partitioner; it looks, for every record that reaches rows
 * 4–8 of the decision table, at two signs of it and counts them:
 *
 *   aggregate_not_record_key_total     the aggregate is read from the value
 *                                      or a header and differs from the
 *                                      record key: the producers key by
 *                                      something else (harmless when that
 *                                      key is coarser, a customer for its
 *                                      orders; fatal to ordering when not)
 *   aggregate_on_two_partitions_total  the aggregate was seen on another
 *                                      partition of the same input topic
 *
 * Each is logged at warning at most once per aggregate while it is
 * remembered, and all lines together at most SG_COPART_LOG_PER_MIN a
 * minute of processing time (the lines left out are counted in the next
 * one's "suppressed").
 *
 * Limits (bounded memory, no store access): a direct-mapped table of
 * SG_COPART_SLOTS recent aggregates (8-byte hash → topic, first partition
 * seen, lines written), allocated at the first record and kept for the
 * engine's life; an aggregate whose slot another one took since is
 * forgotten (its next record is "first seen" again). Only the partitions
 * this engine processes are seen: an aggregate split across partitions
 * that two instances own is not (seqgatectl audit reads every partition
 * and reports it as its first finding). Observation only: nothing here
 * decides a record or writes the store.
 */
#include "engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One remembered aggregate. */
typedef struct copart_slot {
        uint64_t hash; /* first 8 bytes of SHA-256(aggregate id); 0: free */
        const sg_topic_config_t *tc; /* its input topic */
        int32_t partition;           /* the partition it was first seen on */
        uint8_t logged;              /* COPART_LOGGED_* lines written */
} copart_slot_t;

#define COPART_LOGGED_KEY 1u
#define COPART_LOGGED_PARTITION 2u
#define COPART_MINUTE_MS 60000

void sg_eng_copart_free(sg_engine_t *e) {
        free(e->copart);
        e->copart = NULL;
}

/* Whether one more line fits this minute of processing time; counts the
 * ones that do not. *suppressedp: how many were left out before this one
 * (the line says so), reset once it is written. */
static bool copart_line_ok(sg_engine_t *e, uint64_t *suppressedp) {
        if (e->now >= e->copart_minute + COPART_MINUTE_MS ||
            e->now < e->copart_minute) {
                e->copart_minute = e->now;
                e->copart_lines = 0;
        }
        if (e->copart_lines >= SG_COPART_LOG_PER_MIN) {
                e->copart_suppressed++;
                return false;
        }
        e->copart_lines++;
        *suppressedp = e->copart_suppressed;
        e->copart_suppressed = 0;
        return true;
}

/* The record key as log text: itself when it is UTF-8 text without NUL
 * (at most 128 bytes kept), else NULL. */
static const char *key_text(const sg_record_t *rec, char *buf, size_t size) {
        if (!rec->key)
                return NULL;
        size_t n = rec->key_len < size - 1 ? rec->key_len : size - 1;
        if (memchr(rec->key, '\0', n) || !sg_utf8_valid(rec->key, n))
                return NULL;
        memcpy(buf, rec->key, n);
        buf[n] = '\0';
        return buf;
}

/* Logs one of the two lines for @p slot, once, within the minute's
 * budget. */
static void copart_log(sg_engine_t *e, const part_t *p, copart_slot_t *slot,
                       unsigned what, const sg_record_t *rec,
                       const sg_envelope_t *env) {
        uint64_t suppressed;
        if ((slot->logged & what) || !copart_line_ok(e, &suppressed))
                return;
        slot->logged |= (uint8_t)what;
        char kb[129];
        const char *key = key_text(rec, kb, sizeof(kb));
        const char *hint =
                "every event of an aggregate must be in one partition "
                "(semantics §2 \"Co-partitioning\"): key the records by the "
                "aggregate id, or by something every event of it shares";
        if (what == COPART_LOGGED_KEY) {
                sg_eng_log(e, SG_LOG_WARNING, "aggregate_not_record_key", p,
                           "aggregate", LF_STR, env->aggregate, "key",
                           LF_STR_OR_NULL, key, "key_bytes", LF_U64,
                           (uint64_t)(rec->key ? rec->key_len : 0), "offset",
                           LF_I64, rec->offset, "suppressed", LF_U64,
                           suppressed, "hint", LF_STR, hint, NULL);
                return;
        }
        sg_eng_log(e, SG_LOG_WARNING, "aggregate_on_two_partitions", p,
                   "aggregate", LF_STR, env->aggregate, "first_partition",
                   LF_I64, (int64_t)slot->partition, "key", LF_STR_OR_NULL, key,
                   "offset", LF_I64, rec->offset, "suppressed", LF_U64,
                   suppressed, "hint", LF_STR, hint, NULL);
}

void sg_eng_copart_watch(sg_engine_t *e, const part_t *p,
                         const sg_record_t *rec, const sg_envelope_t *env,
                         const unsigned char agg_hash[32]) {
        if (!env->aggregate)
                return;
        if (!e->copart &&
            !(e->copart = calloc(SG_COPART_SLOTS, sizeof(*e->copart))))
                return; /* no memory: the watch is an observation only */
        uint64_t h;
        memcpy(&h, agg_hash, sizeof(h));
        if (!h)
                h = 1; /* 0 marks a free slot */
        copart_slot_t *slot = &e->copart[h % SG_COPART_SLOTS];
        if (slot->hash != h || slot->tc != p->tc)
                *slot = (copart_slot_t){
                        .hash = h, .tc = p->tc, .partition = p->partition};
        bool not_key = p->tc->aggregate.kind != SG_SRC_KEY &&
                       (!rec->key || rec->key_len != env->aggregate_len ||
                        memcmp(rec->key, env->aggregate, rec->key_len) != 0);
        if (not_key) {
                pdelta(e, p)->aggregate_not_record_key_total++;
                copart_log(e, p, slot, COPART_LOGGED_KEY, rec, env);
        }
        if (slot->partition != p->partition) {
                pdelta(e, p)->aggregate_on_two_partitions_total++;
                copart_log(e, p, slot, COPART_LOGGED_PARTITION, rec, env);
        }
}
