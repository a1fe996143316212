/*
 * engine_model.h — a property-test harness for the decision engine
 * (engine.h), shared by the Check suite tests/unit/test_engine_prop.c and
 * the libFuzzer target tests/fuzz/fuzz_engine.c.
 *
 * The harness plays Kafka and the Kafka loop around one engine: two input
 * partitions of topic "orders" and a snapshot reply topic as append-only
 * logs with committed consumer offsets; batches driven through the batch
 * protocol of processor.h as the loop drives them (a failed batch aborted
 * and re-read from the committed offsets; SG_PAUSE stops a partition's
 * batch at the record); rebalances (revoke, assign); restarts, clean
 * (a checkpoint first) or kills (the store keeps its last checkpoint,
 * semantics §6 "Checkpoints"); and every committed changelog effect kept
 * in an in-memory changelog from which every assignment restores the
 * store's tail (both guarantees), an abort's lost batches are restored
 * (processor.h behind), and a new, empty store is restored (compacted, as
 * Kafka would hand it over).
 *
 * Operations are generated from a source of choices — a seeded PRNG or the
 * fuzzer's bytes — one at a time, from the state reached so far (versions
 * around the aggregate's last applied version L, requests the engine
 * actually sent, ...). Every generated operation is concrete (absolute
 * versions, indexes), so a recorded list replays identically and can be
 * shrunk. All clock values are multiples of MODEL_QUANTUM_MS, which makes
 * the engine's jittered snapshot retry times (±50 % of 100 ms) irrelevant:
 * the same list always takes the same decisions.
 *
 * Time follows the engine's own clock rule (engine.h "Processing time"):
 * the harness keeps a wall clock, which operations may step back or
 * forward, and hands the engine (sg_engine_set_clock) the processing time
 * it would compute — the wall clock when a process starts, never earlier
 * than the clock persisted in an assigned partition's store, then advanced
 * only by time passing. Processing time never goes back, so the harness
 * never feeds the engine a history its clock cannot produce.
 *
 * After every step the harness checks (MODEL_INV_*):
 *  1 every input record is accounted for exactly once — output, DLQ,
 *    dropped as the duplicate of an accounted record, or parked; parked
 *    ones later leave only by output, DLQ, or a snapshot/release that
 *    supersedes them (semantics §3, §4); nothing disappears. Records carry
 *    a unique header x-tag that the engine copies to what it emits. Rows
 *    1-3 are modelled exactly: a malformed record is DLQ malformed, a
 *    repeated id with the recorded payload is a duplicate (nothing
 *    emitted), with another payload DLQ idempotency_conflict, and a
 *    replayed one (header __seqgate.replay) is judged again exactly when
 *    its key's verdict was DLQ at that point of the batch. A batch
 *    re-read after an abort takes the same decisions (the same records,
 *    byte for byte, changelog aside);
 *  2 per aggregate, the versions applied (outputs, and row 7's DLQ records
 *    that move L) strictly increase and are consecutive unless a
 *    __seqgate.gap.skipped / __seqgate.gap.missing header names exactly
 *    the skipped range, a snapshot record moved L (S >= L), or an operator
 *    release set L; L = 2^64-1 has no successor; and the store's L is the
 *    one those records show — no version is given up silently (semantics
 *    §2, §3, §3b, §4). A release's version is accepted as the new L only
 *    until a version passes it: the harness cannot tell a release the
 *    engine refused from one it honoured;
 *  3 an event id is applied (output) at most once, ever, across aborts,
 *    restarts and restores (the dedup TTL never elapses in a run);
 *  4 every gauge (parked events and bytes, quarantined aggregates,
 *    snapshot requests in flight) and the partition meta's counters equal
 *    what the store holds, counted with sg_store_foreach; so do the
 *    per-aggregate parked counts, the idempotency keys recorded as parked,
 *    the refetching flags and the three derived indexes; the caps
 *    (max_parked_*, max_in_flight) hold and a quarantined aggregate parks
 *    nothing; the applied and DLQ counters equal the committed outputs and
 *    DLQ records, and an aborted batch changes no metric (semantics §4, §7).
 *    Gauges are compared after each batch_commit (they are sampled there:
 *    after a rebalance or a restart they lag until the next commit); the
 *    age gauges, sampled at most once a second, against the gap deadline
 *    index (model_result.age_note records where that differs from §7);
 *  2b (variants with ordering.epoch, semantics §4b) per aggregate, once
 *    an effect shows that its epoch E reached e (an output or a DLQ record
 *    judged past row 4b, of a record of epoch e), no record of a lower
 *    epoch is output afterwards (neither at once nor drained from the
 *    park); a record dead-lettered fenced_epoch has an epoch below one
 *    consumed before for its aggregate; and the store's E is at least
 *    the highest epoch so shown. Versions increase across epochs
 *    (epoch_versions continue) by invariant 2; under "restart" invariant
 *    2 holds within an epoch, a version of a higher epoch than the last
 *    applied one starting again at first_version, and the store has no L
 *    in an epoch it entered without applying a version yet;
 *  5 (exactly_once) the changelog replayed into an empty store gives the
 *    live store, key for key in all eight databases of the partition, with
 *    one instance-local exception, the meta record: its changelog_offset
 *    (the local checkpoint, written at batch commit and restore with
 *    capture off, never logged) is masked, and a meta record that only the
 *    live store has is accepted while it is the fresh one assign/restore
 *    writes locally (input offset -1, all counters 0) — a partition no
 *    batch has touched yet.
 *
 * Nothing here prints or exits (an allocation failure aborts: a harness out
 * of memory has nothing left to check); a violation is returned in a
 * model_result.
 * Thread-safety: none (one run at a time per process).
 */
#ifndef SEQGATE_ENGINE_MODEL_H
#define SEQGATE_ENGINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MODEL_PARTS 2 /**< input partitions of topic "orders" */
#define MODEL_AGGS 6  /**< aggregates "A0".."A5"; Ai on partition i % 2 */
#define MODEL_IDS 64  /**< event ids per partition ("p0-e0"...) */
#define MODEL_QUANTUM_MS 200 /**< every clock value is a multiple of it */

/** What an operation does. */
typedef enum model_op_kind {
        MOP_RECORD = 1, /**< produce an event to its aggregate's partition */
        MOP_RELEASE,    /**< produce an operator release (control record) */
        MOP_REPLY,      /**< the authority answers a snapshot request */
        MOP_BATCH,      /**< one batch of the Kafka loop */
        MOP_CLOCK,      /**< time passes, or the wall clock is stepped */
        MOP_REVOKE,     /**< a rebalance takes partitions away */
        MOP_ASSIGN,     /**< ... and gives every revoked one back */
        MOP_RESTART,    /**< the process restarts on the same store */
        MOP_RESTORE,    /**< a new, empty store, restored from the
                             changelog (the partition moved here) */
        MOP_KILL,       /**< kill -9 between batches: the store keeps its
                             last checkpoint (semantics §6), the restart
                             restores the changelog's tail */
        MOP_CHECKPOINT, /**< the loop asks for a checkpoint */
} model_op_kind_t;

/* MOP_RECORD flags */
#define MOPF_MALFORMED 0x01 /**< version text that is not a u64 */
#define MOPF_REPLAY 0x02    /**< the DLQ replay header (semantics §3 Replay) */
/* MOP_RELEASE flags */
#define MOPF_VERSION 0x01 /**< "version": version */
#define MOPF_STATE                                                             \
        0x02 /**< "state": state index (MODEL_STATE_BAD: undeclared) */
#define MOPF_NUMBER 0x04 /**< version as a JSON number, not a string */
/* MOP_REPLY flags (and MOPF_STATE, MOPF_NUMBER) */
#define MOPF_BAD_BODY 0x08  /**< not JSON */
#define MOPF_OTHER_AGG 0x10 /**< "aggregate" names another aggregate */
#define MOPF_NO_AGG 0x20    /**< no "aggregate" member */
/* MOP_CLOCK flags */
#define MOPF_WALL                                                              \
        0x01 /**< the wall clock is stepped by delta_ms (either
                                 way); no time passes */
/* MOP_RESTORE flags */
#define MOPF_COMPACT 0x01  /**< the changelog is handed over compacted */
#define MOPF_NO_TOMBS 0x02 /**< ... with its tombstones already removed */

/** MOP_BATCH modes. */
enum {
        MODEL_COMMIT = 0,      /**< deliveries, Kafka commit, batch_commit */
        MODEL_ABORT_RETRY,     /**< a delivery fails: abort, re-run at once */
        MODEL_ABORT_DELIVERED, /**< abort after the deliveries, re-run at once */
        MODEL_ABORT,           /**< abort; the records are re-read later */
        MODEL_CRASH,           /**< killed after the Kafka commit
                                    (at_least_once: the markers acknowledged),
                                    before batch_commit */
        MODEL_BATCH_MODES
};

#define MODEL_STATE_BAD 0xff /**< a state the machine does not declare */

/** One concrete operation (fields unused by a kind are 0). */
typedef struct model_op {
        uint8_t kind;    /**< model_op_kind_t */
        uint8_t agg;     /**< RECORD, RELEASE: aggregate index */
        uint8_t id;      /**< RECORD: event id index in the partition's pool */
        uint8_t payload; /**< RECORD: payload variant (same id, other payload) */
        uint8_t type;    /**< RECORD: event type index (state machine) */
        uint8_t flags;   /**< MOPF_* */
        uint8_t state;   /**< RELEASE, REPLY: state index */
        uint8_t mode;    /**< BATCH: MODEL_COMMIT ... */
        uint8_t epoch;   /**< RECORD: its epoch (variants with ordering.epoch,
                               semantics §4b) */
        uint16_t n;      /**< BATCH: most records; REVOKE: partition mask;
                               REPLY: request, counted from the newest */
        uint32_t mix;    /**< BATCH: how partitions interleave */
        uint64_t version; /**< RECORD, RELEASE, REPLY */
        int64_t delta_ms; /**< CLOCK */
} model_op_t;

/** Invariants (see the file comment) and other failures. */
enum {
        MODEL_OK = 0,
        MODEL_INV_ACCOUNTED = 1,
        MODEL_INV_ORDER = 2,
        MODEL_INV_ONCE = 3,
        MODEL_INV_GAUGES = 4,
        MODEL_INV_REPLAY = 5,
        MODEL_ENGINE_ERROR = 6, /**< an engine call returned an error */
        MODEL_HARNESS_ERROR = 7 /**< the harness could not set up (disk) */
};

/** What a run exercised (committed batches only), so that a test can
 *  tell a harness that checks something from one that checks nothing. */
typedef struct model_stats {
        size_t ops, batches, aborts, crashes, pauses;
        size_t outputs, dlq, parked, duplicates, superseded, conflicts;
        size_t replays; /* replayed records judged again */
        size_t snapshots, requests, gap_headers, releases, replies;
        size_t revokes, restarts, restores, restored_records;
        size_t kills, checkpoints; /* MOP_KILL, MOP_CHECKPOINT */
        size_t behind_restores;    /* restores after an abort took committed
                                   batches from the store */
        size_t fenced; /* DLQ fenced_epoch records (semantics §4b) */
} model_stats_t;

/** Adds @p b to @p a. */
void model_stats_add(model_stats_t *a, const model_stats_t *b);

/**
 * Whether runs of variant @p v that together exercised @p s reached every
 * path the variant exists for (outputs, DLQ records, duplicates, conflicts,
 * replays judged again, aborts, releases, rebalances, restarts; parks in
 * strict ordering; gap
 * headers with latest_wins or skip; requests, replies and snapshot records
 * with a snapshot source; pauses with the pause overflow; crashes and
 * restores with exactly_once). On false, @p missing names what was not.
 */
bool model_coverage(size_t v, const model_stats_t *s, char *missing,
                    size_t size);

/** A run's verdict. */
typedef struct model_result {
        int inv;        /**< MODEL_OK or what failed */
        size_t step;    /**< index of the operation after which it was
                              found; the operation count: in the final
                              settling (all partitions back, logs read) */
        char msg[2048]; /**< what was expected and what happened */
        /** Not a violation: the first time the age gauges
         *  (oldest_parked_age_ms, stuck_parked) disagreed with
         *  semantics §7 as written — the oldest parked event, aggregates
         *  parked or refetching for 5 minutes — while they agreed with the
         *  gap deadline index the engine measures them by; "" never. */
        char age_note[512];
        model_stats_t stats;
} model_result_t;

/** A source of choices: a seeded PRNG, or bytes (then exhausted = done). */
typedef struct model_src {
        uint64_t rng;
        const uint8_t *data;
        size_t size, pos;
        bool bytes, done;
} model_src_t;

void model_src_seed(model_src_t *src, uint64_t seed);
void model_src_bytes(model_src_t *src, const uint8_t *data, size_t size);

/** The configuration variants (gap policies, ordering modes, state machine,
 *  snapshot source, new_aggregate, caps, guarantee). */
size_t model_variant_count(void);
/** Name of variant @p v ("strict_dlq", ...). */
const char *model_variant_name(size_t v);

/**
 * Runs variant @p v with up to @p max_ops operations generated from @p src
 * (fewer when a byte source runs out), checking after each, then settles.
 * The operations run are returned in *@p opsp (malloc'd; the caller frees
 * it; up to and including the failing one), their count in *@p cntp.
 * @returns res->inv (MODEL_OK when every invariant held).
 */
int model_generate(size_t v, model_src_t *src, size_t max_ops,
                   model_op_t **opsp, size_t *cntp, model_result_t *res);

/** Runs the concrete list @p ops on variant @p v. @returns res->inv. */
int model_replay(size_t v, const model_op_t *ops, size_t cnt,
                 model_result_t *res);

/**
 * Shrinks the failing list @p ops (in place) to a shorter one that still
 * fails with invariant @p inv, removing chunks and single operations while
 * that holds, for at most @p budget_ms. @returns the new count.
 */
size_t model_shrink(size_t v, model_op_t *ops, size_t cnt, int inv,
                    int64_t budget_ms);

/** Writes @p ops one per line ("  #3 record A1 p1-e0/0 v=3 ...") to @p out. */
void model_trace(FILE *out, size_t v, const model_op_t *ops, size_t cnt);

#endif /* SEQGATE_ENGINE_MODEL_H */
