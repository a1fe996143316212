/*
 * engine_int.h — what the engine's rooms share (SQLite btreeInt.h style):
 * the engine's private structures and the functions one room calls in
 * another. Not a public interface: only lib/engine*.c and lib/snapsrc*.c
 * include it.
 *
 * The rooms:
 *   engine.c           lifecycle, partitions (assign, revoke, key
 *                      fingerprint), the processor wiring, batch begin /
 *                      commit / abort, tick and its gauges, the log, the
 *                      batch arena
 *   engine_effects.c   effects: output and DLQ records, and the records
 *                      Kafka cannot take (size limits, refusals)
 *   engine_park.c      dedup records, aggregates, park / unpark, drain,
 *                      advance, and the gap policies at a deadline
 *   engine_decide.c    the decision table (semantics §3), one function
 *                      per row, and the operator's release
 *   engine_refetch.c   snapshot requests and replies (semantics §4 step 1)
 *   engine_changelog.c change capture → changelog effects, the changelog
 *                      key format, restore (semantics §6)
 *   engine_copart.c    the co-partitioning watch (semantics §2): counts and
 *                      logs aggregates that are not their record key or
 *                      that show up on two partitions
 *
 * Thread-safety: as engine.h (one engine per processing thread).
 */
#ifndef SEQGATE_ENGINE_INT_H
#define SEQGATE_ENGINE_INT_H

#include "arena.h"
#include "engine.h"
#include "envelope.h"

#include <cjson/cJSON.h>

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- batch arena (engine.c) ------------------------------------------------
 * Memory of the batch's effects that is not borrowed from the input
 * records: freed all at once at batch end. */

/** A formatted, NUL-terminated string in the arena, or NULL. */
char *sg_arena_printf(arena_t *a, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* ---- the engine ----------------------------------------------------------- */

typedef struct part {
        char *topic;
        int32_t partition;
        sg_tp_t tp;
        const sg_topic_config_t *tc;
        sg_meta_rec_t meta; /* committed */
        sg_meta_rec_t work; /* this batch */
        bool touched;
        int64_t cl_last; /* last changelog offset delivered this batch */
        /* how far the partition is read (semantics §4, backlog-aware gap
         * deadlines); not part of the store: a new owner starts "behind"
         * as soon as the loop reports a position */
        bool behind;     /* not read to the end of its log */
        int64_t read_ts; /* highest record timestamp read (ms), 0 none */
        /* blocked by its own back-pressure (semantics §4 "Which clock"):
         * processing time at which a record of the partition was first
         * paused (SG_PAUSE) since the last one it consumed, 0 not blocked,
         * and the deadline horizon it had then */
        int64_t blocked_at;
        int64_t blocked_horizon;
        int64_t cl_epoch;        /* changelog epoch to keep with the restore's
                                 checkpoints (changelog_epoch_set) */
        bool has_cl_id;          /* the changelog id record to keep with them */
        sg_changelog_id_t cl_id; /* (changelog_id_set) */
        int64_t oldest_since;    /* oldest parked event or snapshot wait seen
                                 by the last gauge walk, ms; 0 none */
        /* checkpoints (semantics §6): the partition has state in the open
         * checkpoint transaction (a batch of it committed since the last
         * checkpoint); its store lost such state (the transaction was
         * aborted, or its checkpoint failed) and stays behind its
         * changelog until restored (processor.h behind) */
        bool cp_dirty;
        bool cl_behind;
} part_t;

/* Size limits for one configured input topic's destinations, in
 * sg_record_wire_size() bytes; 0: none known. */
typedef struct topic_limits {
        size_t output, dlq, changelog;
} topic_limits_t;

/* The input record an effect is about (output and DLQ records), or none
 * (topic NULL: snapshot, request and changelog records). */
typedef struct effect_src {
        const char *topic; /* the input topic's name, from the config */
        int32_t partition;
        int64_t offset;
        bool delivered; /* delivered() told its offset (once a
                                    batch, processor.h) */
} effect_src_t;

/* Kafka refused the effect of kind @p kind about this input record; the
 * re-run routes it differently (see sg_eng_emit_output(), sg_eng_emit_dlq()). */
typedef struct refusal {
        effect_src_t src;
        sg_effect_kind_t kind; /* SG_EFFECT_OUTPUT or SG_EFFECT_DLQ */
        unsigned level;        /* times refused */
        bool too_large;        /* refused for its size */
        bool used;             /* consulted by the batch being run */
        char reason[128];
} refusal_t;

/* One configured input topic's metrics (semantics §7; metrics_list.h:
 * every engine row is kept per input topic). */
typedef struct topic_metrics {
        sg_metrics_t metrics; /* committed */
        sg_metrics_t delta;   /* this batch's, added at batch_commit */
        /* the last "dlq_summary" line (engine.c): DLQ records by reason
         * it counted to, and when (processing time, ms; 0 never) */
        uint64_t dlq_logged[SG_R__CNT];
        int64_t dlq_logged_at;
} topic_metrics_t;

struct sg_engine {
        const sg_config_t *conf;
        sg_store_t *store;
        sg_metrics_t metrics;     /* committed, the sum of the topics' */
        topic_metrics_t *topic_m; /* per configured topic, conf order */
        /* the store's checkpoints (semantics §6): the engine's, not a
         * topic's; copied into metrics after each sum of the topics' */
        uint64_t cp_total;
        sg_hist_t cp_hist;

        int64_t clock_fixed; /* test hook */
        int64_t clock_skew;  /* added so the clock never goes below a
                                    persisted one */
        int64_t base_wall, base_mono;
        int64_t now;       /* this batch */
        int64_t gauges_at; /* last sampling of the since-index gauges */

        /* The checkpoint's write transaction (semantics §6): open from the
         * first batch after a checkpoint, across batches, until the next
         * checkpoint commits it (eng_cp_commit); NULL none. in_batch: a
         * batch is open in it (batch_begin to batch_commit/abort). */
        sg_txn_t *txn;
        bool in_batch;
        int64_t cp_began;    /* processing time the transaction began */
        uint64_t cp_batches; /* batches committed into it */
        arena_t arena;
        sg_effect_t *effects;
        size_t effect_cnt, effect_size;
        sg_envelope_t env;

        part_t *parts;
        size_t part_cnt;
        part_t *last_part;

        uint64_t rng;      /* jitter for snapshot retries */
        sg_log_cb *log_cb; /* operator-facing events (may be NULL) */
        void *log_opaque;
        int log_budget;       /* lines left in this batch */
        int log_level;        /* most detailed level built; 0: every one */
        part_t **effect_part; /* changelog effect index → partition */
        size_t effect_part_size;
        sg_txn_t *rtxn;           /* restore transaction */
        size_t restore_cnt;       /* records since the last checkpoint */
        int64_t restore_to;       /* the restore's end offset (log_end) */
        sg_store_batch_t *rbatch; /* restore's window, flushed into rtxn */

        /* the dedup record sg_eng_judge() read for the current record */
        bool dk_valid, dk_found;
        unsigned char dk_hash[32];
        sg_dedup_rec_t dk_rec;

        /* records Kafka cannot take (semantics §3 "A record the output
         * topic cannot take"): the size limits the loop found, which input
         * record each effect is about, and the refusals of the broker */
        size_t limit_all;         /* producer's limit, 0: none known */
        topic_limits_t *limits;   /* per configured topic, conf order */
        effect_src_t *effect_src; /* per effect, effect_size of them */
        refusal_t *refusals;      /* survive an aborted batch */
        size_t refusal_cnt, refusal_cap;
        bool out_rejected; /* the last sg_eng_emit_output() dead-lettered */
        /* the reason of the DLQ record emitted last, for the key recorded
         * next with a DLQ verdict (sg_eng_record_key, the result query of
         * semantics §7); SG_R_NONE once that key took it */
        sg_reason_t dlq_reason;

        /* the co-partitioning watch (engine_copart.c): recent aggregates,
         * SG_COPART_SLOTS of them once a record needed it, and its log
         * lines' minute */
        struct copart_slot *copart;
        int64_t copart_minute;      /* processing time the minute began */
        int copart_lines;           /* lines written in it */
        uint64_t copart_suppressed; /* lines left out since the last one */
};

/* The record an effect is about (engine_effects.c). */
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
        const char *aggregate; /* may be NULL */
        bool has_versions;     /* expected and actual */
        bool has_actual;       /* actual alone: a malformed record's version
                              (semantics §3 row 1), nothing expected */
        uint64_t expected, actual;
        const char *state;   /* may be NULL */
        bool drop_value;     /* output_rejected: the value is what Kafka
                                     cannot take */
        const char *gap_hdr; /* a gap header the record carries as an
                                     output record would (skip range), or
                                     NULL; value gap_val */
        const char *gap_val;
} dlq_info_t;

/* One aggregate's record, loaded for a decision (engine_park.c). */
struct agg_ctx {
        unsigned char hash[32];
        sg_agg_rec_t rec;
        int64_t old_since;
        bool exists;
};
typedef struct agg_ctx agg_ctx_t;

/* ---- engine.c ------------------------------------------------------------- */

/** The engine's processing clock (ms; see engine.h "Processing time"). */
int64_t sg_eng_clock(sg_engine_t *e);
/** Keeps the engine clock at or above a clock persisted in a store. */
void sg_eng_clock_floor(sg_engine_t *e, int64_t persisted);
/** The assigned partition, or NULL. */
part_t *sg_eng_part_find(sg_engine_t *e, const char *topic, int32_t partition);
/** Commits the open checkpoint transaction, if any (no batch may be open:
 *  SG_ERR_INVALID); on failure the partitions with state in it are behind
 *  their changelog (part_t.cl_behind). A transaction without writes is
 *  aborted. Every engine call that needs a write transaction of its own
 *  (assign, revoke, restore_begin, grow) calls it first. */
sg_err_t sg_eng_checkpoint(sg_engine_t *e, char *errstr, size_t errstr_size);
/** Checks (and fills in, or adopts) @p m's key fingerprint (semantics §3
 *  "Key fingerprint"); SG_ERR_CONFIG when the settings differ. */
sg_err_t sg_eng_fp_check(sg_engine_t *e, const part_t *p, sg_meta_rec_t *m,
                         bool *changedp, char *errstr, size_t errstr_size);

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
void sg_eng_log(sg_engine_t *e, sg_log_level_t level, const char *event,
                const part_t *p, ...);

/* ---- engine_effects.c ------------------------------------------------------ */

/* The limit for a topic whose own limit is @p topic_limit: the smaller
 * known of the producer's and the topic's, 0 when neither is known. */
static inline size_t limit_of(const sg_engine_t *e, size_t topic_limit) {
        if (!topic_limit)
                return e->limit_all;
        if (!e->limit_all)
                return topic_limit;
        return topic_limit < e->limit_all ? topic_limit : e->limit_all;
}

static inline const topic_limits_t *limits_of(const sg_engine_t *e,
                                              const sg_topic_config_t *tc) {
        return &e->limits[tc - e->conf->topics];
}

/* The batch's metrics delta of configured input topic @p tc: what a
 * decision about one of its records counts in (metrics.h: counted at
 * batch_commit, so an aborted batch counts nothing). */
static inline sg_metrics_t *delta_of(sg_engine_t *e,
                                     const sg_topic_config_t *tc) {
        return &e->topic_m[tc - e->conf->topics].delta;
}

/* The same for the topic of partition @p p. */
static inline sg_metrics_t *pdelta(sg_engine_t *e, const part_t *p) {
        return delta_of(e, p->tc);
}

/** A new, zeroed effect at the end of the batch's list, or NULL. */
sg_effect_t *sg_eng_effect_new(sg_engine_t *e);
/** The output record of @p s, or output_rejected instead (sets
 *  e->out_rejected). */
sg_err_t sg_eng_emit_output(sg_engine_t *e, const subject_t *s,
                            const char *gap_hdr, const char *gap_val,
                            const dlq_info_t *about);
/** The DLQ record of @p s (semantics §5). */
sg_err_t sg_eng_emit_dlq(sg_engine_t *e, const subject_t *s,
                         const dlq_info_t *d);
/* processor.h size_limit() and refused() */
void sg_eng_size_limit(void *opaque, const char *topic, size_t max);
bool sg_eng_refused(void *opaque, size_t index, bool too_large,
                    const char *reason);
/** At batch end: a committed batch consumed the refusals it used. */
void sg_eng_refusals_settle(sg_engine_t *e, bool committed);
/** A revoked partition's refusals are forgotten. */
void sg_eng_refusals_drop_partition(sg_engine_t *e, const char *topic,
                                    int32_t partition);

/* ---- engine_park.c ---------------------------------------------------------- */

/** Records the idempotency key with @p verdict (@p digest NULL: a parked
 *  event's key, only its verdict changes). A DLQ verdict records the
 *  reason of the DLQ record emitted just before it (e->dlq_reason). */
sg_err_t sg_eng_record_key(sg_engine_t *e, part_t *p, const unsigned char *kh,
                           const unsigned char *digest, uint8_t verdict,
                           char *errstr, size_t errstr_size);
/** Loads aggregate @p id (a new one when the store has none). */
sg_err_t sg_eng_agg_load(sg_engine_t *e, part_t *p, const char *id,
                         size_t id_len, agg_ctx_t *a);
/** Writes @p a back (and its gap deadline index entry). */
sg_err_t sg_eng_agg_save(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                         size_t errstr_size);
/* Whether the aggregate can still take a version: L = 2^64-1 has no
 * successor (semantics §2), so nothing is applied or drained after it. */
static inline bool agg_open(const agg_ctx_t *a) {
        return !a->rec.has_last || a->rec.last_version < UINT64_MAX;
}

/* The next version the aggregate expects: L+1, or first_version for a new
 * aggregate. Saturates at 2^64-1 (only for messages: agg_open() says
 * whether there is a next version at all). */
static inline uint64_t agg_next(const part_t *p, const agg_ctx_t *a) {
        if (!a->rec.has_last)
                return p->tc->first_version;
        return agg_open(a) ? a->rec.last_version + 1 : UINT64_MAX;
}

/* Moves L to @p v. L never decreases within an epoch, on any path
 * (semantics §3, §4b): apply, drain, snapshot, release, skip; a caller that
 * would lower it is a bug. The one place L goes down is agg_enter_epoch()
 * under epoch_versions "restart". */
static inline void agg_set_last(agg_ctx_t *a, uint64_t v) {
        assert(!a->rec.has_last || v >= a->rec.last_version);
        if (a->rec.has_last && v < a->rec.last_version)
                return;
        a->rec.last_version = v;
        a->rec.has_last = true;
}

/* Moves the aggregate to the higher epoch @p epoch (semantics §4b). Under
 * epoch_versions "continue" L stays (the version sequence continues);
 * under "restart" the new epoch has no L yet, so first_version is expected
 * next: the one way L goes down, and only across epochs. */
static inline void agg_enter_epoch(const part_t *p, agg_ctx_t *a,
                                   uint64_t epoch) {
        assert(!a->rec.has_epoch || epoch > a->rec.epoch);
        if (a->rec.has_epoch && epoch <= a->rec.epoch)
                return;
        if (a->rec.has_epoch && p->tc->epoch_versions == SG_EPOCH_RESTART) {
                a->rec.has_last = false;
                a->rec.last_version = 0;
                a->rec.skip_from = a->rec.skip_to = 0;
        }
        a->rec.has_epoch = true;
        a->rec.epoch = epoch;
}
/** Drains what the aggregate's L now allows (semantics §3 drain). */
sg_err_t sg_eng_drain(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                      size_t errstr_size);
/** Moves the aggregate to a version a snapshot or a release vouches for. */
sg_err_t sg_eng_agg_advance(sg_engine_t *e, part_t *p, agg_ctx_t *a, uint64_t S,
                            char *errstr, size_t errstr_size);
/** Moves aggregate @p a to epoch @p epoch, above its epoch E or its first
 *  (semantics §4b): events parked under E are dead-lettered fenced_epoch
 *  (counted in fenced_epoch_total), then agg_enter_epoch(). The caller
 *  saves @p a. */
sg_err_t sg_eng_epoch_enter(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            uint64_t epoch, char *errstr, size_t errstr_size);
/** The gap policy at a passed deadline (semantics §4 step 2). */
sg_err_t sg_eng_gap_fire(sg_engine_t *e, part_t *p, agg_ctx_t *a, char *errstr,
                         size_t errstr_size);

/* ---- engine_decide.c -------------------------------------------------------- */

/** The last header named @p name of @p rec, or NULL. */
const sg_header_t *sg_eng_header_find(const sg_record_t *rec, const char *name);
/** Rows 6/7 for a record at the version the aggregate expects. */
sg_err_t sg_eng_apply_in_order(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                               const subject_t *s, uint64_t v, const char *type,
                               const char *gap_hdr, const char *gap_val,
                               uint8_t *verdictp, char *errstr,
                               size_t errstr_size);
/** One input record through the decision table (semantics §3). */
sg_err_t sg_eng_judge(sg_engine_t *e, part_t *p, const sg_record_t *rec,
                      sg_process_result_t *result, char *errstr,
                      size_t errstr_size);

/* ---- engine_refetch.c ------------------------------------------------------- */

static inline bool snap_enabled(const part_t *p) {
        return p->tc->snapshot.source != SG_SNAP_NONE;
}
/** Starts a refetch for @p a (the caller saves @p a). */
sg_err_t sg_eng_snap_start(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                           char *errstr, size_t errstr_size);
/** Ends a refetch that is no longer needed. */
sg_err_t sg_eng_snap_cancel(sg_engine_t *e, part_t *p, agg_ctx_t *a,
                            char *errstr, size_t errstr_size);
/** Sends queued requests, times out unanswered ones (bounded by @p budget). */
sg_err_t sg_eng_snap_tick(sg_engine_t *e, part_t *p, int *budget, char *errstr,
                          size_t errstr_size);
/** The topic whose snapshot replies come on @p topic, or NULL. */
const sg_topic_config_t *sg_eng_reply_topic_of(const sg_engine_t *e,
                                               const char *topic);
/** Whether records of @p topic are snapshot replies. */
bool sg_eng_is_snapshot_reply(const sg_engine_t *e, const char *topic);
/** A reply's or release's version (semantics §2: judged by its text). */
bool sg_eng_reply_version(const sg_record_t *rec, const cJSON *v,
                          uint64_t *out);
/** Judges one snapshot reply record. */
sg_err_t sg_eng_snap_reply(sg_engine_t *e, const sg_record_t *rec, char *errstr,
                           size_t errstr_size);

/* ---- engine_copart.c -------------------------------------------------------- */

/** Semantics §2 "Co-partitioning": counts (and logs, bounded) a record whose
 *  aggregate (hash @p agg_hash, from sg_eng_agg_load) is read from its value
 *  or a header and is not its record key, and one whose aggregate this
 *  engine saw on another partition of the topic. Never decides. */
void sg_eng_copart_watch(sg_engine_t *e, const part_t *p,
                         const sg_record_t *rec, const sg_envelope_t *env,
                         const unsigned char agg_hash[32]);
/** Frees the watch's table. */
void sg_eng_copart_free(sg_engine_t *e);

/* ---- engine_changelog.c ----------------------------------------------------- */

/** The batch's changelog effects, from the store's change capture (end of
 *  tick). SG_OK or SG_ERR_NOMEM. */
sg_err_t sg_eng_changelog_effects(sg_engine_t *e);
/* processor.h delivered(), restore_*(), changelog_*() */
void sg_eng_delivered(void *opaque, size_t index, int64_t offset);
sg_err_t sg_eng_restore_begin(void *opaque, const char *topic,
                              int32_t partition, int64_t log_start,
                              int64_t log_end, int64_t *offsetp, char *errstr,
                              size_t errstr_size);
sg_err_t sg_eng_restore_apply(void *opaque, const char *topic,
                              int32_t partition, int64_t offset,
                              const void *key, size_t key_len,
                              const void *value, size_t value_len, char *errstr,
                              size_t errstr_size);
void sg_eng_restore_abort(void *opaque, const char *topic, int32_t partition);
sg_err_t sg_eng_restore_end(void *opaque, const char *topic, int32_t partition,
                            int64_t end_offset, char *errstr,
                            size_t errstr_size);
int64_t sg_eng_changelog_epoch_get(void *opaque, const char *topic,
                                   int32_t partition);
void sg_eng_changelog_epoch_set(void *opaque, const char *topic,
                                int32_t partition, int64_t epoch);
bool sg_eng_changelog_id_get(void *opaque, const char *topic, int32_t partition,
                             sg_changelog_id_t *out);
sg_err_t sg_eng_changelog_id_set(void *opaque, const char *topic,
                                 int32_t partition, const sg_changelog_id_t *id,
                                 char *errstr, size_t errstr_size);
sg_err_t sg_eng_changelog_value(void *opaque, const char *topic,
                                int32_t partition, const void *key,
                                size_t key_len, void **valuep,
                                size_t *value_lenp, char *errstr,
                                size_t errstr_size);

#endif /* SEQGATE_ENGINE_INT_H */
