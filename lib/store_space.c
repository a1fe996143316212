/*
 * store_space.c — the store's write-through map (MDB_WRITEMAP) and the
 * disk-space guard that makes a full file system an error the loop can
 * answer, never a SIGBUS (semantics §6, "Disk space").
 *
 * With MDB_WRITEMAP, LMDB writes its pages into the shared map of data.mdb
 * instead of copying every page it changes into memory and pwritev()ing
 * them at commit (those copies and random writes were ~30 % of the
 * engine's CPU). It also ftruncate()s the file to the map size, sparse: a
 * page of the map without a block in the file gets one in the page fault
 * of its first write, and a full file system (or quota) makes that fault a
 * SIGBUS, which nothing can answer.
 *
 * The guard: the map LMDB sees is never larger than the part of the file
 * that is allocated. LMDB writes no page outside its map (one beyond it is
 * MDB_MAP_FULL, which the loop answers by aborting the batch, growing the
 * map and re-running the batch), so every page it may dirty owns its
 * blocks, however many pages a transaction dirties:
 *  - at open, the whole file up to the map is fallocate()d. The pages in
 *    use own their blocks already (they were written; neither seqgate nor
 *    LMDB punches holes); the call also covers a file copied sparse;
 *  - the map is not store.map_size_bytes but the used pages plus a
 *    headroom (HEADROOM_MIN, at least a quarter of the used size, twice
 *    the most one committed transaction grew the file, twice what a
 *    transaction that outgrew it had), within the configured map
 *    (s->map_cap: map_size_bytes, grown by map_growth_bytes when a write
 *    meets it, as without this file). Before a write transaction the map
 *    is grown ahead of use once half its headroom is used
 *    (sg_store_space_ahead), so a batch seldom meets its end; a
 *    restore asks for room for its next window (sg_store_room_want);
 *  - every growth fallocate()s first and only then widens the map: a
 *    failure (ENOSPC, EDQUOT, EFBIG) is SG_ERR_STORE with the cause in
 *    errstr, and LMDB wrote nothing beyond the allocated part;
 *  - a clean close cuts the file back to its used pages: at rest the
 *    headroom costs no disk.
 * Sound only where writing over an allocated block needs no new one, and
 * fallocate exists: ext4 (ext2/3 files without extents refuse fallocate:
 * EOPNOTSUPP, and the store reopens without the write-through map) and
 * tmpfs. Copy-on-write file systems (btrfs, ZFS, bcachefs; XFS with
 * reflinked extents) allocate at every overwrite; overlayfs and network
 * file systems make no such promise: those keep LMDB's copying write path.
 * Durability is LMDB's: a synced commit msync()s the map before it writes
 * its meta page (MDB_MAPASYNC is not used, so a commit said to be synced
 * is); a deferred store (MDB_NOSYNC, store_durable.c) syncs as before.
 * A value read from the store points into a writable map now: the store's
 * decoders only read it (a write through it would change the store).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The headroom (semantics §6 "Disk space"): a quarter of the used size,
 * at least HEADROOM_MIN, and twice the most one transaction grew the file
 * (a transaction that met the map's end raises it: sg_store_space_grow).
 * What bounds a transaction's growth now is the transaction itself: the
 * engine's checkpoints commit once a page per write would use half the
 * room (sg_txn_copied_much), a restore's windows once their estimated
 * growth would (sg_txn_room_low), so the headroom needs no room for a
 * 500,000-record window up front (it was 256 MiB for that, 284 bytes per
 * event of a 1 M-event store). engine_bench, 300,000 events over 100,000
 * aggregates into a new store: 256 MiB allocated before, 101.7 MiB now
 * (88.9 MiB of pages either way). The price: a growing store's map is
 * widened more often, and each widening remaps the file (its pages
 * fault in again); the same run measured 6.4 us of CPU per event before
 * and 7.2 now, against 6.2 with a 256 MiB floor and these checkpoints
 * (on a machine at load 20-40: differences of 10 % are near its
 * noise). */
#define HEADROOM_MIN (16ull << 20)
#define HEADROOM_PART 4 /* of the used size */

bool sg_store_space_fs_ok(const char *dir) {
        struct statfs sf;
        if (statfs(dir, &sf) != 0)
                return false;
        return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC;
}

uint64_t sg_store_space_used(sg_store_t *s) {
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        return (uint64_t)(info.me_last_pgno + 1) * s->psize;
}

/* The headroom wanted beyond @p used bytes in use. */
static uint64_t headroom(const sg_store_t *s, uint64_t used) {
        uint64_t q = used / HEADROOM_PART;
        return q > s->headroom ? q : s->headroom;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
        return a < b ? a : b;
}

/* Allocates data.mdb up to @p want bytes or, the file system short of
 * space, as far beyond @p min_end as it can (halving the step): 0, or the
 * errno of the last fallocate. s->alloc_end is the allocated end. */
static int reserve(sg_store_t *s, uint64_t want, uint64_t min_end) {
        uint64_t end = want;
        for (;;) {
                if (end <= s->alloc_end)
                        return 0;
                if (fallocate(s->data_fd, 0, (off_t)s->alloc_end,
                              (off_t)(end - s->alloc_end)) == 0) {
                        s->alloc_end = end;
                        return 0;
                }
                int e = errno;
                if (e == EINTR)
                        continue;
                if ((e != ENOSPC && e != EDQUOT && e != EFBIG) ||
                    end <= min_end)
                        return e;
                uint64_t next = min_end + (end - min_end) / 2;
                next -= next % s->psize;
                end = next > min_end ? next : min_end;
        }
}

/* The map widened to the allocated end. */
static sg_err_t map_to_alloc(sg_store_t *s, char *errstr, size_t errstr_size) {
        int rc = mdb_env_set_mapsize(s->env, (size_t)s->alloc_end);
        if (rc)
                return sg_lmdb_err(rc, "set map size", errstr, errstr_size);
        return SG_OK;
}

sg_err_t sg_store_space_open(sg_store_t *s, char *errstr, size_t errstr_size) {
        mdb_filehandle_t fd;
        MDB_stat st;
        int rc = mdb_env_get_fd(s->env, &fd);
        if (!rc)
                rc = mdb_env_stat(s->env, &st);
        if (rc)
                return sg_lmdb_err(rc, "open", errstr, errstr_size);
        s->data_fd = fd;
        s->psize = st.ms_psize;
        s->alloc_end = 0;
        if (!s->headroom)
                s->headroom = HEADROOM_MIN;
        uint64_t used = sg_store_space_used(s);
        if (s->map_cap < used)
                s->map_cap = used;
        uint64_t want = min_u64(s->map_cap, used + headroom(s, used));
        want -= want % s->psize;
        if (want < used)
                want = used;
        if ((rc = reserve(s, want, used))) {
                if (rc == EOPNOTSUPP || rc == ENOSYS)
                        return SG_ERR_INVALID;
                sg_errf(errstr, errstr_size,
                        "allocating the store's file %s/data.mdb (%" PRIu64
                        " bytes): %s",
                        s->dir, used, strerror(rc));
                return SG_ERR_STORE;
        }
        return map_to_alloc(s, errstr, errstr_size);
}

/* The room a restore's window asked for (sg_store_room_want): what
 * sg_txn_room_low needs to let its writes run, room / 2 / per >= writes,
 * at most SG_STORE_ROOM_MAX or a quarter of @p used. */
static uint64_t room_wanted(const sg_store_t *s, uint64_t used) {
        if (!s->room_writes)
                return 0;
        uint64_t per = sg_store_grow_per_write(s);
        uint64_t cap = used / HEADROOM_PART > SG_STORE_ROOM_MAX
                               ? used / HEADROOM_PART
                               : SG_STORE_ROOM_MAX;
        if (s->room_writes > cap / 2 / per)
                return cap;
        return 2 * per * s->room_writes + s->psize;
}

sg_err_t sg_store_space_ahead(sg_store_t *s, char *errstr, size_t errstr_size) {
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        uint64_t map = info.me_mapsize, used = sg_store_space_used(s);
        uint64_t want = headroom(s, used), room = room_wanted(s, used);
        if (map >= s->map_cap || (map - used >= want / 2 && map - used >= room))
                return SG_OK;
        /* a window's room whole, and half again, so that the next windows
         * find it too: one remap for several */
        if (room + room / 2 > want)
                want = room + room / 2;
        want = min_u64(s->map_cap, used + want);
        want -= want % s->psize;
        pthread_rwlock_wrlock(&s->map_lock);
        sg_err_t err = SG_OK;
        /* short of space: no grow now; a write that needs it meets the
         * map's end, and sg_store_grow says why it cannot grow */
        if (reserve(s, want, map + s->psize) == 0 && s->alloc_end > map)
                err = map_to_alloc(s, errstr, errstr_size);
        pthread_rwlock_unlock(&s->map_lock);
        return err;
}

sg_err_t sg_store_space_grow(sg_store_t *s, char *errstr, size_t errstr_size) {
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        uint64_t map = info.me_mapsize, used = sg_store_space_used(s);
        if (map >= s->map_cap) /* the configured map is full */
                s->map_cap = map + s->growth;
        /* the transaction that met the end needed more than map - used */
        if (2 * (map - used) > s->headroom)
                s->headroom = 2 * (map - used);
        uint64_t want = min_u64(s->map_cap, used + headroom(s, used));
        if (want <= map)
                want = min_u64(s->map_cap, map + headroom(s, used));
        want -= want % s->psize;
        uint64_t step = (want - map) / 16;
        uint64_t min_end =
                map + (step > s->psize ? step - step % s->psize : s->psize);
        int rc = reserve(s, want, min_end);
        if (rc) {
                sg_errf(errstr, errstr_size,
                        "growing the store's map to %" PRIu64
                        " bytes: allocating %s/data.mdb: %s",
                        min_end, s->dir, strerror(rc));
                return SG_ERR_STORE;
        }
        return map_to_alloc(s, errstr, errstr_size);
}

void sg_store_space_committed(sg_store_t *s, uint64_t used_before) {
        uint64_t used = sg_store_space_used(s);
        if (used > used_before && 2 * (used - used_before) > s->headroom)
                s->headroom = 2 * (used - used_before);
}

void sg_store_space_trim(const sg_store_t *s, uint64_t used) {
        char p[4200];
        snprintf(p, sizeof(p), "%s/data.mdb", s->dir);
        /* only the headroom: LMDB uses no byte at or beyond used */
        if (used)
                (void)truncate(p, (off_t)used);
}
