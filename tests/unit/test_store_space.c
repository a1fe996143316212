/*
 * test_store_space.c — the store's write-through map (MDB_WRITEMAP) and its
 * disk-space guard (semantics §6, "Disk space"): a full file system is an
 * error the loop can answer, never a SIGBUS; every page LMDB may write is
 * allocated; a clean close gives the headroom back; a reader in another
 * process reads what the writer wrote.
 *
 * The full-disk test needs a small file system: it mounts a 4 MiB tmpfs in
 * a private mount namespace of a forked child (as root, or in a user
 * namespace), so the test's own process and the machine see nothing of it.
 * Where neither is allowed (a container without CAP_SYS_ADMIN and without
 * user namespaces) it falls back to a 4 MiB file-size limit of the child
 * (RLIMIT_FSIZE, SIGXFSZ ignored: every allocation past it fails with
 * EFBIG, one of the causes semantics §6 names), so it runs, and can fail,
 * anywhere; a second case runs the file-size limit always.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare */
#endif
#include "envelope.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char err[512];

static void setup(void) {
        tu_tmpdir(dir, sizeof(dir), "space");
}

static void teardown(void) {
        tu_rmrf(dir);
}

/* The dedup record of key number @p i. */
static void key_of(int i, unsigned char kh[32]) {
        char k[32];
        int n = snprintf(k, sizeof(k), "key-%d", i);
        sg_sha256(k, (size_t)n, kh);
}

static sg_err_t put_batch(sg_store_t *s, const sg_tp_t *tp, int from, int cnt,
                          char *es, size_t es_size) {
        sg_txn_t *t;
        sg_err_t e = sg_txn_begin(s, true, &t, es, es_size);
        if (e)
                return e;
        sg_dedup_rec_t r = {
                .verdict = SG_DV_APPLIED, .first_seen_ms = 5, .expiry_ms = 105};
        memset(r.digest, 0xab, sizeof(r.digest));
        for (int i = from; i < from + cnt; i++) {
                unsigned char kh[32];
                key_of(i, kh);
                if ((e = sg_dedup_put(t, tp, kh, &r, es, es_size))) {
                        sg_txn_abort(t);
                        return e;
                }
        }
        return sg_txn_commit(t, es, es_size);
}

/* Child exit codes of the full-disk run. */
enum {
        FD_OK = 0,        /* refused with an error, nothing committed lost */
        FD_OPEN = 11,     /* the store did not open on an empty tmpfs */
        FD_NO_WMAP = 12,  /* the store did not use the write-through map */
        FD_NEVER = 13,    /* 64 MiB of records fit in 4 MiB */
        FD_WORDING = 14,  /* the error does not say the disk is full */
        FD_LOST = 15,     /* a committed record is missing after the error */
        FD_SESSION = 16,  /* a clean close on the full disk left the session
                            "open" (the next start would rebuild) */
        FD_HOLE = 17,     /* the map reaches past the file's allocated blocks
                            (on a full disk: a SIGBUS at the first write) */
        FD_NO_LIMIT = 18, /* RLIMIT_FSIZE could not be set */
};

/* How the child makes its disk full. */
enum full_how {
        FULL_TMPFS = 0, /* a private 4 MiB tmpfs, else FULL_FSIZE */
        FULL_FSIZE = 1, /* a 4 MiB RLIMIT_FSIZE on the fixture's directory */
};

#define FULL_BYTES (4u << 20)

/* In a forked child: a private 4 MiB tmpfs at @p mnt. */
static bool mount_small_tmpfs(const char *mnt) {
        if (unshare(CLONE_NEWNS) != 0) {
                uid_t uid = getuid();
                gid_t gid = getgid();
                if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
                        return false;
                char m[64];
                int fd = open("/proc/self/setgroups", O_WRONLY);
                if (fd >= 0) {
                        (void)!write(fd, "deny", 4);
                        close(fd);
                }
                int n = snprintf(m, sizeof(m), "0 %d 1", (int)uid);
                fd = open("/proc/self/uid_map", O_WRONLY);
                if (fd < 0 || write(fd, m, (size_t)n) != n)
                        return false;
                close(fd);
                n = snprintf(m, sizeof(m), "0 %d 1", (int)gid);
                fd = open("/proc/self/gid_map", O_WRONLY);
                if (fd < 0 || write(fd, m, (size_t)n) != n)
                        return false;
                close(fd);
        }
        if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
                return false;
        return mount("tmpfs", mnt, "tmpfs", 0, "size=4m") == 0;
}

/* In a forked child: no file of this process grows past FULL_BYTES; a
 * write or fallocate past it fails with EFBIG instead of killing it. */
static bool limit_file_size(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
                return false;
        rl.rlim_cur = FULL_BYTES;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
                rl.rlim_cur = rl.rlim_max;
        return signal(SIGXFSZ, SIG_IGN) != SIG_ERR &&
               setrlimit(RLIMIT_FSIZE, &rl) == 0;
}

/* Whether every page of the store's map owns its blocks in data.mdb (the
 * guard's promise, semantics §6 "Disk space"): a store without the
 * write-through map has nothing to check. */
static bool map_allocated(sg_store_t *s, const char *d) {
        if (!sg_store_writemap(s))
                return true;
        uint64_t map, used;
        char p[512];
        struct stat sb;
        sg_store_usage(s, &map, &used);
        snprintf(p, sizeof(p), "%s/data.mdb", d);
        return stat(p, &sb) == 0 && (uint64_t)sb.st_blocks * 512 >= map;
}

/* Whether the session file in @p d says the store was closed cleanly
 * (store_durable.c: "... closed ..."). */
static bool session_closed(const char *d) {
        char p[512], line[512] = "";
        snprintf(p, sizeof(p), "%s/seqgate.session", d);
        FILE *f = fopen(p, "r");
        if (!f)
                return false;
        bool ok = fgets(line, sizeof(line), f) && strstr(line, " closed ");
        fclose(f);
        return ok;
}

/* The child's run: batches of 500 records (~40 KiB of pages each) into a
 * store whose map (1 GiB) is far beyond the file system (4 MiB), growing
 * the map on SG_ERR_MAP_FULL as the Kafka loop does, until the store
 * refuses. */
static int full_disk_child(const char *mnt, enum full_how how) {
        int cause = ENOSPC;
        if (how == FULL_TMPFS && !mount_small_tmpfs(mnt)) {
                fprintf(stderr, "full disk: no private tmpfs (needs root or "
                                "user namespaces): a file-size limit "
                                "instead\n");
                how = FULL_FSIZE;
        }
        if (how == FULL_FSIZE) {
                if (!limit_file_size())
                        return FD_NO_LIMIT;
                cause = EFBIG;
        }
        sg_store_t *s;
        char es[512] = "";
        if (sg_store_open(mnt, 1ull << 30, 1ull << 30, &s, es, sizeof(es)))
                return FD_OPEN;
        /* tmpfs always takes the write-through map; the fixture's
         * directory does where its file system is ext4 or tmpfs (else
         * LMDB's copying writes meet the limit at commit) */
        if (how == FULL_TMPFS && !sg_store_writemap(s))
                return FD_NO_WMAP;
        /* syncs deferred, as the daemon runs it: a clean close must mark
         * the session closed even on the full disk */
        if (sg_store_defer_sync(s, es, sizeof(es)))
                return FD_OPEN;
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        int committed = 0, grows = 0;
        sg_err_t e = SG_OK;
        while (committed < 1000000) {
                e = put_batch(s, &tp, committed, 500, es, sizeof(es));
                if (e == SG_OK) {
                        committed += 500;
                        continue;
                }
                if (e != SG_ERR_MAP_FULL || grows > 100)
                        break;
                grows++;
                if ((e = sg_store_grow(s, es, sizeof(es))))
                        break;
        }
        if (e == SG_OK)
                return FD_NEVER;
        fprintf(stderr,
                "full disk (%s, write-through map %d) after %d records, %d "
                "grows: %s: %s\n",
                how == FULL_TMPFS ? "4 MiB tmpfs" : "4 MiB RLIMIT_FSIZE",
                sg_store_writemap(s), committed, grows, sg_err2str(e), es);
        if (!strstr(es, strerror(cause)))
                return FD_WORDING;
        if (!map_allocated(s, mnt))
                return FD_HOLE;
        /* every committed record is there, in this store and after a
         * reopen */
        for (int pass = 0; pass < 2; pass++) {
                sg_txn_t *t;
                if (sg_txn_begin(s, false, &t, es, sizeof(es)))
                        return FD_LOST;
                for (int i = 0; i < committed; i++) {
                        unsigned char kh[32];
                        sg_dedup_rec_t g;
                        key_of(i, kh);
                        if (sg_dedup_get(t, &tp, kh, &g) != SG_OK)
                                return FD_LOST;
                }
                sg_txn_abort(t);
                sg_store_close(s);
                if (pass == 0 && !session_closed(mnt))
                        return FD_SESSION;
                if (pass == 0 && sg_store_open(mnt, 1ull << 30, 1ull << 30, &s,
                                               es, sizeof(es)))
                        return FD_OPEN;
        }
        return FD_OK;
}

/* A full file system under a write-through map: the store answers with an
 * error that names the cause, loses nothing committed, and the process
 * lives (without the guard LMDB's writes into unallocated pages of the
 * sparse file are a SIGBUS); when it gave up, every page of its map still
 * owns its blocks. _i: FULL_TMPFS (a real full tmpfs where the machine
 * lets the child mount one, else the file-size limit), FULL_FSIZE (the
 * file-size limit: allocations fail with EFBIG, not ENOSPC, and no page
 * fault meets a full disk, so the map's blocks are checked instead). */
START_TEST(full_disk_is_an_error_not_a_sigbus) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(full_disk_child(dir, (enum full_how)_i));
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(!WIFSIGNALED(st), "the store's process died of %s",
                      WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
        ck_assert_msg(WIFEXITED(st), "child status %d", st);
        switch (WEXITSTATUS(st)) {
        case FD_OK:
                break;
        case FD_SESSION:
                ck_abort_msg("a clean close on the full disk left the "
                             "session open");
                break;
        case FD_HOLE:
                ck_abort_msg("the store's map reaches past the blocks "
                             "allocated to data.mdb");
                break;
        case FD_NO_LIMIT:
                ck_abort_msg("the child could not set RLIMIT_FSIZE");
                break;
        default:
                ck_abort_msg("full-disk child failed with code %d (see "
                             "test_store_space.c)",
                             WEXITSTATUS(st));
        }
}
END_TEST

/* Whether @p dir's file system is one the write-through map is used on
 * (ext4, tmpfs: semantics §6 "Disk space"). */
static bool fs_writemap(const char *d) {
        struct statfs sf;
        ck_assert_int_eq(statfs(d, &sf), 0);
        return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC;
}

/* Allocated bytes of @p path (st_blocks), its size into *sizep. */
static uint64_t allocated(const char *path, uint64_t *sizep) {
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        if (sizep)
                *sizep = (uint64_t)sb.st_size;
        return (uint64_t)sb.st_blocks * 512;
}

/* Every byte of the map LMDB may write is allocated while the store is
 * open, through growth; at a clean close the file shrinks back to the
 * pages in use, so the headroom costs no disk at rest. */
START_TEST(map_is_allocated_and_trimmed_at_close) {
        sg_store_t *s;
        ck_assert_int_eq(sg_store_open(dir, 1ull << 32, 1ull << 30, &s, err,
                                       sizeof(err)),
                         SG_OK);
        /* the write-through map exactly on ext4 and tmpfs: /tmp is one of
         * them on the machines this suite runs on (on another, the rest of
         * this test checks the copying path's file, which is never
         * larger than its map either) */
        ck_assert_msg(sg_store_writemap(s) == fs_writemap(dir),
                      "the store on %s: write-through map %d, file system "
                      "says %d",
                      dir, sg_store_writemap(s), fs_writemap(dir));
        char path[128];
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        uint64_t map, used, size;
        for (int b = 0; b < 40; b++) {
                ASSERT_OK(put_batch(s, &tp, b * 2000, 2000, err, sizeof(err)),
                          err);
                sg_store_usage(s, &map, &used);
                uint64_t a = allocated(path, &size);
                ck_assert_uint_le(size, map);
                if (!sg_store_writemap(s))
                        continue;
                ck_assert_uint_ge(a, map);
                ck_assert_uint_lt(map, 1ull << 32); /* not the whole map */
        }
        bool wmap = sg_store_writemap(s);
        sg_store_close(s);
        uint64_t a = allocated(path, &size);
        if (wmap) {
                ck_assert_uint_eq(size, used);
                ck_assert_uint_le(a, used + 65536);
        }
        /* reopened: everything there, the map allocated again */
        ck_assert_int_eq(sg_store_open(dir, 1ull << 32, 1ull << 30, &s, err,
                                       sizeof(err)),
                         SG_OK);
        sg_store_usage(s, &map, &used);
        if (wmap)
                ck_assert_uint_ge(allocated(path, NULL), map);
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, false, &t, err, sizeof(err)), SG_OK);
        for (int i = 0; i < 80000; i += 997) {
                unsigned char kh[32];
                sg_dedup_rec_t g;
                key_of(i, kh);
                ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &g), SG_OK);
        }
        sg_txn_abort(t);
        sg_store_close(s);
}
END_TEST

/* A transaction that spans many batches (the engine's checkpoint,
 * semantics §6) learns when to end: sg_txn_room_low once its writes, at
 * the file's growth per write in the commits so far, would use half the
 * room its map had, before the map's end (MDB_MAP_FULL) would cost it
 * whole; sg_txn_copied_much once it may have copied an eighth of the
 * store's pages; sg_txn_capture_reset captures each batch on its own. */
START_TEST(long_transaction_knows_when_to_end) {
        sg_store_t *s;
        ck_assert_int_eq(
                sg_store_open(dir, 1 << 24, 1 << 24, &s, err, sizeof(err)),
                SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        /* a first commit: the growth per write is learned */
        ASSERT_OK(put_batch(s, &tp, 0, 20000, err, sizeof(err)), err);
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        ck_assert_uint_eq(sg_txn_writes(t), 0);
        ck_assert(!sg_txn_room_low(t, 0));
        ck_assert(!sg_txn_copied_much(t));
        sg_dedup_rec_t r = {
                .verdict = SG_DV_APPLIED, .first_seen_ms = 5, .expiry_ms = 105};
        uint64_t map, used;
        sg_store_usage(s, &map, &used);
        bool low = false;
        int i = 100000;
        sg_err_t e = SG_OK;
        /* room low comes before the map's end: with half the room
         * estimated used, the writes that remain fit (new keys: the file's
         * growth per write of the first commit holds) */
        for (; !e && !(low = sg_txn_room_low(t, 0)); i++) {
                unsigned char kh[32];
                key_of(i, kh);
                sg_txn_capture(t, true);
                e = sg_dedup_put(t, &tp, kh, &r, err, sizeof(err));
        }
        ASSERT_OK(e, err);
        ck_assert(low);
        ck_assert_uint_gt(sg_txn_writes(t), 1000);
        ck_assert(sg_txn_room_low(t, 0));
        /* pending writes count: a transaction with none yet is low when a
         * batch of many more is announced */
        const sg_change_t *ch;
        ck_assert_uint_gt(sg_txn_changes(t, &ch), 1000);
        sg_txn_capture_reset(t);
        ck_assert_uint_eq(sg_txn_changes(t, &ch), 0);
        unsigned char kh[32];
        key_of(i, kh);
        ASSERT_OK(sg_dedup_put(t, &tp, kh, &r, err, sizeof(err)), err);
        ck_assert_uint_ge(sg_txn_changes(t, &ch), 1);
        ASSERT_OK(sg_txn_commit(t, err, sizeof(err)), err);
        /* a page per write (a dedup put is one) would use half the room:
         * the copies fit, and it commits */
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        ck_assert(!sg_txn_room_low(t, 0));
        ck_assert(sg_txn_room_low(t, 100000000));
        sg_store_usage(s, &map, &used);
        int puts = 0;
        for (; !e && !sg_txn_copied_much(t); puts++) {
                key_of(puts, kh);
                e = sg_dedup_put(t, &tp, kh, &r, err, sizeof(err));
        }
        ASSERT_OK(e, err);
        int pages = (int)((map - used) / 2 / 4096);
        ck_assert_int_ge(puts, pages / 3);
        ck_assert_int_le(puts, pages + 1);
        ASSERT_OK(sg_txn_commit(t, err, sizeof(err)), err);
        ck_assert_uint_eq(sg_txn_writes(NULL), 0);
        ck_assert(!sg_txn_room_low(NULL, 0) && !sg_txn_copied_much(NULL));
        sg_store_close(s);
}
END_TEST

/* A restore's window asks for its room (sg_store_room_want): the next
 * write transaction begins with the map grown so that the window's writes
 * do not make it room_low (at a batch-sized headroom they do), the room
 * allocated like any growth; cleared, the room stays only until the
 * close gives it back. */
START_TEST(restore_window_gets_its_room) {
        sg_store_t *s;
        ck_assert_int_eq(sg_store_open(dir, 1ull << 32, 1ull << 30, &s, err,
                                       sizeof(err)),
                         SG_OK);
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ASSERT_OK(put_batch(s, &tp, 0, 20000, err, sizeof(err)), err);
        const uint64_t window = 400000; /* writes: 200,000 records */
        sg_txn_t *t;
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        ck_assert_msg(sg_txn_room_low(t, window),
                      "a batch-sized headroom holds a restore's window");
        sg_txn_abort(t);
        uint64_t map0, used0, map, used;
        sg_store_usage(s, &map0, &used0);
        sg_store_room_want(s, window);
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        ck_assert(!sg_txn_room_low(t, window));
        ck_assert(sg_txn_room_low(t, 100 * window));
        sg_txn_abort(t);
        sg_store_usage(s, &map, &used);
        ck_assert_uint_gt(map, map0);
        /* within the bound: SG_STORE_ROOM_MAX and half again */
        ck_assert_uint_le(map - used,
                          SG_STORE_ROOM_MAX + SG_STORE_ROOM_MAX / 2);
        char path[128];
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        bool wmap = sg_store_writemap(s);
        if (wmap)
                ck_assert_uint_ge(allocated(path, NULL), map);
        /* no second remap for the next window of the same size */
        ck_assert_int_eq(sg_txn_begin(s, true, &t, err, sizeof(err)), SG_OK);
        sg_txn_abort(t);
        uint64_t map2;
        sg_store_usage(s, &map2, NULL);
        ck_assert_uint_eq(map2, map);
        sg_store_room_want(s, 0);
        ASSERT_OK(put_batch(s, &tp, 20000, 100, err, sizeof(err)), err);
        sg_store_usage(s, NULL, &used);
        sg_store_close(s);
        uint64_t size;
        uint64_t a = allocated(path, &size);
        if (wmap) {
                ck_assert_uint_eq(size, used);
                ck_assert_uint_le(a, used + 65536);
        }
}
END_TEST

/* seqgatectl's read-only open in another process reads what a writer
 * with the write-through map committed, while the writer is open. */
START_TEST(reader_process_reads_a_writemap_store) {
        sg_store_t *s;
        ck_assert_int_eq(sg_store_open(dir, 1ull << 32, 1ull << 30, &s, err,
                                       sizeof(err)),
                         SG_OK);
        ck_assert(sg_store_writemap(s) == fs_writemap(dir));
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ASSERT_OK(put_batch(s, &tp, 0, 3000, err, sizeof(err)), err);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sg_store_t *r;
                char es[512];
                if (sg_store_open_readonly(dir, &r, es, sizeof(es)))
                        _exit(2);
                sg_txn_t *t;
                if (sg_txn_begin(r, false, &t, es, sizeof(es)))
                        _exit(3);
                for (int i = 0; i < 3000; i++) {
                        unsigned char kh[32];
                        sg_dedup_rec_t g;
                        key_of(i, kh);
                        if (sg_dedup_get(t, &tp, kh, &g) != SG_OK ||
                            g.expiry_ms != 105)
                                _exit(4);
                }
                sg_txn_abort(t);
                sg_store_close(r);
                _exit(0);
        }
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "reader process status %d", st);
        sg_store_close(s);
}
END_TEST

int main(void) {
        Suite *su = suite_create("store_space");
        TCase *tc = tcase_create("space");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_loop_test(tc, full_disk_is_an_error_not_a_sigbus, FULL_TMPFS,
                            FULL_FSIZE + 1);
        tcase_add_test(tc, map_is_allocated_and_trimmed_at_close);
        tcase_add_test(tc, reader_process_reads_a_writemap_store);
        tcase_add_test(tc, long_transaction_knows_when_to_end);
        tcase_add_test(tc, restore_window_gets_its_room);
        suite_add_tcase(su, tc);
        return tu_run_suite(su);
}
