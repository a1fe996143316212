/*
 * takeover.h — taking over from a dead owner (semantics §6 "Taking over
 * from a dead owner"): whether a new owner that finds an open transaction
 * on a changelog partition it was just assigned may end it by fencing the
 * transactional id that wrote it (KIP-98: an InitProducerId under a
 * transactional id aborts that id's open transaction and bumps its epoch,
 * so its old producer can write nothing more).
 *
 * The writer of an exactly_once transaction names itself in the first
 * changelog record the transaction writes to each changelog partition
 * (kafka_changelog.h "The writer of a transaction"): its transactional id
 * and its consumer group member id. A partition's revoke callback ends its
 * owner's transaction before the partition can be assigned elsewhere, so a
 * transaction still open when the new owner's restore reaches it was left
 * by an owner that lost the partition without one: a member that died, or
 * a zombie (stalled past its session timeout). Neither is a member of the
 * group any more; a member still in the group is never fenced (its
 * transaction may be committing: its markers are on their way).
 *
 * Pure: no Kafka, no I/O. Thread-safety: none needed (no state).
 */
#ifndef SEQGATE_TAKEOVER_H
#define SEQGATE_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a new owner does with an open transaction it found. */
typedef enum sg_takeover_verdict {
        SG_TAKEOVER_FENCE = 0,      /**< fence the writer's transactional id */
        SG_TAKEOVER_UNKNOWN_WRITER, /**< the record names no writer (an
                                           older version wrote it): wait */
        SG_TAKEOVER_OWN,            /**< our own transactional id: wait */
        SG_TAKEOVER_LIVE_MEMBER,    /**< its writer is still a member of
                                           the group: wait */
        SG_TAKEOVER_MEMBERS_UNKNOWN /**< the group's members could not be
                                           read: wait */
} sg_takeover_verdict_t;

/**
 * Judges the open transaction whose first record on the changelog
 * partition named @p writer_txid (@p txid_len bytes, not NUL-terminated;
 * NULL or empty: none) and @p writer_member (@p member_len bytes; NULL or
 * empty: none). @p own_txid is this instance's transactional id (a C
 * string); @p members the member ids of the group as its coordinator
 * describes it now (@p member_cnt of them; NULL with @p members_known
 * false: the description failed).
 * @returns the verdict: SG_TAKEOVER_FENCE only when the record names a
 *          transactional id other than @p own_txid and a member id, and
 *          the group was described and that member is not in it.
 */
sg_takeover_verdict_t sg_takeover_judge(const char *writer_txid,
                                        size_t txid_len,
                                        const char *writer_member,
                                        size_t member_len, const char *own_txid,
                                        const char *const *members,
                                        size_t member_cnt, bool members_known);

/** The verdict's name for logs ("fence", "unknown_writer", "own",
 *  "live_member", "members_unknown"); a static string. */
const char *sg_takeover_verdict_name(sg_takeover_verdict_t v);

#ifdef __cplusplus
}
#endif

#endif
