/*
 * kafka_changelog.h — the at_least_once changelog protocol (semantics §6): how
 * a batch's changelog records are framed, and which records of a changelog
 * partition a restore applies; and, in both guarantees, the changelog id
 * (below). Pure (no Kafka, no LMDB): the Kafka loop writes the records
 * (kafka_changelog.c's writer, kafka_claim.c's claims and repairs) and
 * reads them (kafka_restore.c), the engine applies them.
 *
 * Without Kafka transactions two things can leave records in a changelog
 * partition that no store may ever reflect:
 *   - a batch cut short: a crash, or a failed delivery, after some of the
 *     batch's changelog records were written;
 *   - a zombie: an old owner that lost the partition (its session expired
 *     while it was stalled) but still finishes the batch it had in flight.
 * So every changelog record an at_least_once writer produces carries the
 * header SG_CHANGELOG_HEADER = its writer's epoch and batch sequence, and
 * the loop writes records of its own (keys starting with the byte
 * SG_CHANGELOG_CONTROL, never a store key's first byte):
 *   claim    0xFF 'C'            an owner's first record on assignment; its
 *                                offset is the owner's EPOCH (so epochs grow
 *                                in the order owners claimed: a claim is
 *                                written before the owner checks, by an
 *                                offset commit, that its consumer group
 *                                generation is still current)
 *   confirm  0xFF 'K' epoch(8)   written once that check passed: from here
 *                                on, records of older epochs are void
 *   marker   0xFF 'M' epoch(8) sequence(8)
 *                                value = the sequence (8): written only
 *                                after every record of that batch was
 *                                acknowledged, and only if they landed
 *                                right after the owner's previous record
 *                                (nobody else wrote in between); the batch
 *                                is complete
 * Integers are 8 bytes big-endian. Confirms of older epochs are tombstoned
 * by the next owner once its repair (below) is written. An owner tombstones
 * its own marker of two batches back in a batch's records, so each epoch
 * keeps its last two markers: a zombie (whose in-flight batch follows the
 * owner's last complete one) can only delete a marker that has a
 * successor, and a marker is evidence for every batch before it.
 *
 * The reader's rule, record by record in offset order, with FLOOR = the
 * newest epoch confirmed so far:
 *   - a framed record of an epoch below FLOOR is void (a zombie's);
 *   - records of one batch (epoch, sequence) are held back until the batch
 *     is known to be complete — its marker or a later one of the epoch, or
 *     a record of a later batch of the epoch (an owner starts a batch only
 *     after the previous one's marker was acknowledged) — and then applied
 *     in order;
 *   - a newer epoch (its confirm, or failing that its first record) makes
 *     a batch still held back void (its writer stopped), and raises FLOOR;
 *   - an unframed record (written by exactly_once, in a transaction) is
 *     applied at once;
 *   - at the end of the log a batch still held back is void.
 * Void records are skipped. Their keys are reported, so that the owner can
 * write their current values again (the "repair"): compaction may remove
 * a key's valid record once a later (void) record of the key exists, and
 * the repair makes the last record of every key a valid one again. The
 * writer produces a batch's records before its output is acknowledged, so
 * the log may end in a batch of the owner's own whose output failed; the
 * owner repairs it under that batch's own sequence
 * (sg_changelog_reader_unfinished): its records and the repair's are one
 * batch, complete only with the repair's marker, which follows a rewrite
 * of every key it wrote. A new sequence would make the first repair record
 * prove the failed batch complete (a record of a later batch), and a crash
 * before the repair's marker would leave that batch applied.
 *
 * The changelog id (both guarantees; semantics §6 "The changelog's
 * identity"). A store is a cache of one changelog partition, but offsets
 * alone cannot tell that log from another: a topic deleted and created
 * again, or the same name on another cluster, has offsets too, and a
 * restore "from the checkpoint" of such a log silently parts the store from
 * its changelog. So the loop writes, into every changelog partition it
 * restores without finding one, an id record
 *   id       0xFF 'I' id(16)      value = its writer's wall time, ms (8)
 * with 16 random bytes, and the partition's meta keeps the id and the
 * record's offset (Kafka's topic ids, KIP-516, need librdkafka 2.3). The key
 * is never written again nor tombstoned, so compaction keeps the record at
 * its offset for good; a partition may hold several (each store checks its
 * own). A restore of a store that has one first reads the changelog at that
 * offset: the record there must be that id record (sg_changelog_id_check),
 * or the restore is refused (SG_ERR_FOREIGN); a restore of a store without
 * one (new, or written before the id existed) records the first id record
 * it reads, or has one written. Earlier versions skip the record (a control
 * record of a kind they lack).
 *
 * The writer of a transaction (exactly_once; semantics §6 "Taking over from
 * a dead owner"). The first record a Kafka transaction writes to each
 * changelog partition carries two headers: SG_CHANGELOG_WRITER_TXID_HEADER
 * = the writer's transactional id and SG_CHANGELOG_WRITER_MEMBER_HEADER =
 * its consumer group member id. A read_committed reader stops at the first
 * offset of a transaction still open (the last stable offset), and the
 * record at that offset is that transaction's first record on the
 * partition: the headers say whom a new owner would have to fence to end
 * it (takeover.h). Readers ignore both headers (so do earlier versions:
 * they read only SG_CHANGELOG_HEADER).
 *
 * Thread-safety: a reader belongs to one thread.
 */
#ifndef SEQGATE_KAFKA_CHANGELOG_H
#define SEQGATE_KAFKA_CHANGELOG_H

#include "seqgate.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_CHANGELOG_HEADER "__seqgate.changelog" /**< epoch | sequence */
/** exactly_once: the writer of a transaction ("The writer of a
 *  transaction" above): its transactional id, its group member id */
#define SG_CHANGELOG_WRITER_TXID_HEADER "__seqgate.writer.transactional_id"
#define SG_CHANGELOG_WRITER_MEMBER_HEADER "__seqgate.writer.member_id"
#define SG_CHANGELOG_CONTROL 0xFF /**< first key byte of the loop's records */
#define SG_CHANGELOG_CLAIM 'C'
#define SG_CHANGELOG_CONFIRM 'K'
#define SG_CHANGELOG_MARKER 'M'
#define SG_CHANGELOG_ID 'I'
#define SG_CHANGELOG_FRAME_LEN 16  /**< header value: epoch, sequence */
#define SG_CHANGELOG_KEY_LEN 10    /**< confirm keys */
#define SG_CHANGELOG_MARKER_LEN 18 /**< marker keys */
#define SG_CHANGELOG_ID_LEN 16     /**< the random id */
#define SG_CHANGELOG_ID_KEY_LEN 18 /**< id record keys */
#define SG_CHANGELOG_ID_HEX 33     /**< sg_changelog_id_hex's buffer */

/** A changelog id record: its id, and the offset it was written at. */
typedef struct sg_changelog_id {
        unsigned char id[SG_CHANGELOG_ID_LEN];
        int64_t offset;
} sg_changelog_id_t;

/** Writes the big-endian 8-byte form of @p v to @p out. */
void sg_changelog_u64_put(unsigned char out[8], int64_t v);
/** Reads a big-endian 8-byte integer. */
int64_t sg_changelog_u64_get(const unsigned char in[8]);

/** The header value of a record of batch @p seq of epoch @p epoch. */
void sg_changelog_frame_make(unsigned char out[SG_CHANGELOG_FRAME_LEN],
                             int64_t epoch, int64_t seq);
/** Key of a confirm (@p kind SG_CHANGELOG_CONFIRM) of @p epoch; the claim
 *  key is the first 2 bytes of it with kind SG_CHANGELOG_CLAIM. */
void sg_changelog_key_make(unsigned char out[SG_CHANGELOG_KEY_LEN], char kind,
                           int64_t epoch);
/** Key of the marker of batch @p seq of @p epoch. */
void sg_changelog_marker_key_make(unsigned char out[SG_CHANGELOG_MARKER_LEN],
                                  int64_t epoch, int64_t seq);

/** Fills @p id with random bytes (getrandom(2)).
 *  @returns SG_OK, or SG_ERR_IO (errstr says why). */
sg_err_t sg_changelog_id_new(unsigned char id[SG_CHANGELOG_ID_LEN],
                             char *errstr, size_t errstr_size);
/** Key of the id record of @p id. */
void sg_changelog_id_key_make(unsigned char out[SG_CHANGELOG_ID_KEY_LEN],
                              const unsigned char id[SG_CHANGELOG_ID_LEN]);
/** True if @p key is an id record's key; then its id is copied to @p id
 *  (may be NULL). */
bool sg_changelog_id_key_parse(const void *key, size_t key_len,
                               unsigned char id[SG_CHANGELOG_ID_LEN]);
/** @p id in lowercase hex (32 characters and a NUL), for log lines;
 *  returns @p out. */
const char *sg_changelog_id_hex(const unsigned char id[SG_CHANGELOG_ID_LEN],
                                char out[SG_CHANGELOG_ID_HEX]);

/**
 * Whether changelog partition @p changelog [@p partition], whose log starts
 * at @p log_start, still holds the id record @p want the store expects: the
 * first record read from want->offset on is at @p offset with key @p key
 * (@p offset -1: none, the log ends before want->offset).
 * @returns SG_OK: it does; SG_ERR_NOT_FOUND: it cannot be known, the log
 *          starts past want->offset (its retention removed the record; not
 *          a refusal: the store records an id anew); SG_ERR_FOREIGN: it
 *          does not (another log: deleted and created again, another
 *          cluster), errstr says what was expected and found for the store
 *          of input partition @p topic [@p partition].
 */
sg_err_t sg_changelog_id_check(const sg_changelog_id_t *want, int64_t log_start,
                               int64_t offset, const void *key, size_t key_len,
                               const char *topic, const char *changelog,
                               int32_t partition, char *errstr,
                               size_t errstr_size);

/** One changelog key (a store key as SG_EFFECT_CHANGELOG names it). */
typedef struct sg_changelog_key {
        unsigned char *key; /**< owned by the reader */
        size_t len;
} sg_changelog_key_t;

/** Applies one record a restore must apply (value NULL: a tombstone). */
typedef sg_err_t(sg_changelog_apply_cb)(void *opaque, int64_t offset,
                                        const void *key, size_t key_len,
                                        const void *value, size_t value_len,
                                        char *errstr, size_t errstr_size);

typedef struct sg_changelog_reader sg_changelog_reader_t;

/** Counts of a reader, for the loop's log lines. */
typedef struct sg_changelog_counts {
        uint64_t applied;  /**< records given to the apply callback */
        uint64_t void_cnt; /**< records skipped as void */
        uint64_t control;  /**< claims, confirms, markers, ids */
} sg_changelog_counts_t;

/**
 * A reader of one changelog partition from an offset whose FLOOR is
 * @p floor (the epoch kept with the store's checkpoint; -1 none).
 * @returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_changelog_reader_new(int64_t floor, sg_changelog_reader_t **rp);
void sg_changelog_reader_destroy(sg_changelog_reader_t *r);

/**
 * Feeds the record at @p offset (offsets increasing): @p frame is the
 * value of its SG_CHANGELOG_HEADER header (NULL if it has none), @p value
 * NULL a tombstone. Records the rule applies are given to @p apply now or
 * later (always in offset order); held-back ones are copied.
 * @returns SG_OK, SG_ERR_NOMEM, or @p apply's error (the reader is then
 *          unusable: destroy it and read again).
 */
sg_err_t sg_changelog_reader_feed(sg_changelog_reader_t *r, int64_t offset,
                                  const void *key, size_t key_len,
                                  const void *value, size_t value_len,
                                  const void *frame, size_t frame_len,
                                  sg_changelog_apply_cb *apply, void *opaque,
                                  char *errstr, size_t errstr_size);

/** The end of the log: a batch still held back is void. */
sg_err_t sg_changelog_reader_finish(sg_changelog_reader_t *r);

/** After sg_changelog_reader_finish: whether the log ended in a batch
 *  still held back (its writer stopped before its marker), and that
 *  batch's epoch and sequence (*epochp, *seqp; either may be NULL). The
 *  owner whose batch it is repairs it under the same sequence ("repair"
 *  above). */
bool sg_changelog_reader_unfinished(const sg_changelog_reader_t *r,
                                    int64_t *epochp, int64_t *seqp);

/** The current FLOOR (newest epoch confirmed or seen). */
int64_t sg_changelog_reader_floor(const sg_changelog_reader_t *r);

/**
 * Where a store that applied what this reader gave it, up to @p next (the
 * offset after the last record fed), may put its checkpoint while the log
 * goes on (a standby, semantics §6 "Standby replicas"): @p next, or the
 * first record still held back (its batch may yet complete: read again
 * from there, it is applied then), or the first record found void (read
 * again from there, the next owner's restore sees the void batch and
 * repairs its keys) until a complete batch of a newer epoch than every
 * void record, written wholly after them, shows that their owner's
 * repair covered them, whichever is lowest.
 */
int64_t sg_changelog_reader_settled(const sg_changelog_reader_t *r,
                                    int64_t next);

/** The distinct keys of the void records read so far (after finish: all of
 *  them), in no particular order. Valid until the next feed or destroy. */
size_t sg_changelog_reader_void_keys(sg_changelog_reader_t *r,
                                     const sg_changelog_key_t **keysp);

/** Epochs of the confirms read (not tombstones), in log order. */
size_t sg_changelog_reader_confirms(const sg_changelog_reader_t *r,
                                    const int64_t **epochsp);

/** The first changelog id record read (not a tombstone: none is ever
 *  written), with its offset. @returns false if none was read. */
bool sg_changelog_reader_id(const sg_changelog_reader_t *r,
                            sg_changelog_id_t *out);

/** The reader's counts. */
sg_changelog_counts_t
sg_changelog_reader_counts(const sg_changelog_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_KAFKA_CHANGELOG_H */
