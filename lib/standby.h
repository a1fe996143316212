/*
 * standby.h — where the standby replicas of a consumer group's input
 * partitions are placed (semantics §6 "Standby replicas"): a pure function
 * of the group's current assignment, so that every member computes the
 * same placement from the same group description without a protocol of
 * its own (librdkafka 2.0.2 has no custom assignor API).
 *
 * The rule: sort the group's members by member id (bytewise); for every
 * partition a member owns, the next @p replicas members in that order,
 * wrapping around and never the owner itself, are its standbys (at most
 * members - 1 of them). A member is standby for the partitions where it is
 * so named. The same idea as Kafka Streams' default standby placement
 * (standbys on other instances than the active task), without its
 * rack awareness.
 *
 * Pure (no Kafka, no LMDB, no clock). Thread-safety: none needed (no state).
 */
#ifndef SEQGATE_STANDBY_H
#define SEQGATE_STANDBY_H

#include "seqgate.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One topic partition (strings borrowed). */
typedef struct sg_standby_tp {
        const char *topic;
        int32_t partition;
} sg_standby_tp_t;

/** One member of the group as DescribeGroups reports it: its
 *  member id and the partitions assigned to it (borrowed). */
typedef struct sg_standby_member {
        const char *member_id;
        const sg_standby_tp_t *parts;
        size_t part_cnt;
} sg_standby_member_t;

/**
 * The partitions member @p me is standby for, given the group's @p members
 * (@p member_cnt of them, in any order) and @p replicas standbys per
 * partition (0: none).
 *
 * @p outp receives a malloc'd array (the caller frees it; NULL when
 * *cntp is 0) of topic partitions sorted by topic then partition, without
 * duplicates, whose topic strings point into @p members (valid as long as
 * they are). A partition @p me owns itself is never in it, even when the
 * description names it under two members (a rebalance in progress).
 * @p me not among the members: none.
 * @returns SG_OK, or SG_ERR_NOMEM (errstr says so).
 */
sg_err_t sg_standby_place(const sg_standby_member_t *members, size_t member_cnt,
                          int replicas, const char *me, sg_standby_tp_t **outp,
                          size_t *cntp, char *errstr, size_t errstr_size);

/**
 * Appends the topic partitions of one member's assignment, as a consumer
 * group's DescribeGroups answer carries it (Kafka's ConsumerProtocol
 * Assignment, KIP-429's versions included: int16 version, an int32 count
 * of [int16-length topic name, int32 count of int32 partitions], then user
 * data, not read), to the @p *cntp entries of *@p tpsp (realloc'd).
 *
 * Each entry's topic string is malloc'd and owned by the array: free the
 * whole with sg_standby_tps_free(). An empty @p buf (@p len 0: a member
 * with no assignment yet) appends nothing.
 * @returns SG_OK; SG_ERR_INVALID when @p buf is cut short or a count is
 * negative (errstr says where; *tpsp keeps what was appended before);
 * SG_ERR_NOMEM. Thread-safe (no shared state).
 */
sg_err_t sg_standby_assignment_parse(const void *buf, size_t len,
                                     sg_standby_tp_t **tpsp, size_t *cntp,
                                     char *errstr, size_t errstr_size);

/** Frees @p cnt entries of @p tps made by sg_standby_assignment_parse()
 *  (their topic strings and the array). NULL is a no-op. */
void sg_standby_tps_free(sg_standby_tp_t *tps, size_t cnt);

#ifdef __cplusplus
}
#endif

#endif
