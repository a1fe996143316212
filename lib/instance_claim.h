/* The per-host claim of a (group.id, instance_id) pair: an abstract Unix
 * socket name held for the life of the process. */
#ifndef SG_INSTANCE_CLAIM_H
#define SG_INSTANCE_CLAIM_H

#include <stddef.h>

#include "seqgate.h"

/**
 * Claims (group.id @p group_id, instance_id @p instance_id) on this host:
 * binds the abstract-namespace Unix socket "seqgate/<group.id>/<instance_id>"
 * (a SHA-256 of the pair when that name is longer than sun_path allows)
 * and gives its descriptor to *@p fdp, to be held until the process ends
 * (sg_instance_claim_release, or the process's death: the kernel releases
 * an abstract name with its last descriptor, kill -9 included, so a
 * restart never finds a stale claim). Two seqgate processes with one
 * instance_id in one consumer group share a transactional id
 * (<group.id>-<instance_id>, exactly_once) and the changelog partitions'
 * ownership (at_least_once) and fence each other in turn; on one host the
 * second is told at start (KIP-98 fencing avoided; docs/troubleshooting.md
 * "Two instances with one instance_id"). The name is per network
 * namespace: two containers each with its own never collide; two pods with
 * hostNetwork on one node do. Linux only.
 * @param holder_pidp  optional; on SG_ERR_CONFIG receives the holder's pid
 *          when /proc shows it (a process of this user: /proc/net/unix's
 *          inode found among /proc/PID/fd), else 0.
 * @returns SG_OK (*fdp >= 0), SG_ERR_CONFIG (another process of this
 *          network namespace holds the claim: errstr names the instance_id,
 *          the group.id, the transactional id, the holder's pid when known,
 *          and the fix), SG_ERR_IO (a socket that cannot be made; errno
 *          named). Thread-safe.
 * (SG_ERR_CONFIG, not SG_ERR_LOCKED: the fix is in the configuration, and
 * SG_ERR_LOCKED names the data_dir.)
 */
sg_err_t sg_instance_claim_take(const char *group_id, const char *instance_id,
                                int *fdp, long *holder_pidp, char *errstr,
                                size_t errstr_size);

/**
 * Probes the claim without keeping it (sg_instance_claim_take, then the
 * socket closed at once), for --check-config. A seqgate starting on this
 * pair in that instant may be refused; a restart succeeds. Same returns.
 */
sg_err_t sg_instance_claim_probe(const char *group_id, const char *instance_id,
                                 long *holder_pidp, char *errstr,
                                 size_t errstr_size);

/** Releases a claim taken by sg_instance_claim_take (@p fd < 0: nothing). */
void sg_instance_claim_release(int fd);

#endif
