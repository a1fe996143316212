/*
 * store_open.c — opening a store (store.h sg_store_open,
 * sg_store_open_readonly): the directory and its lock, the LMDB
 * environment with its map and the shared databases, and the store's
 * format number (store.h "Format version": a store of an earlier format
 * is set aside and restored from its changelog, a later one refused;
 * operator tools are told which). What an open store does is store.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid() */
#endif
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The map lock prefers the writer (sg_store_grow): readers looping on
 * queries must not keep a grow, and so the Kafka loop, waiting. */
static int map_lock_init(sg_store_t *s) {
        pthread_rwlockattr_t a;
        int rc = pthread_rwlockattr_init(&a);
        if (rc)
                return rc;
        pthread_rwlockattr_setkind_np(
                &a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        rc = pthread_rwlock_init(&s->map_lock, &a);
        pthread_rwlockattr_destroy(&a);
        /* the partition table's lock (store_parts.c), and the store's
         * other defaults */
        if (!rc && !(rc = pthread_rwlock_init(&s->pdb_lock, NULL)))
                s->pdb_lock_ok = true;
        s->seg_keys = SG_SEG_KEYS_DEFAULT;
        s->cl_format = SG_STORE_FORMAT;
        return rc;
}

/* ---- environment ------------------------------------------------------ */

/* The shared databases (store.h); the partitions' are store_parts.c's. */
#define FORMAT_DB "format"
#define FORMAT_KEY "version"
/* Handles LMDB may keep: a partition's aggregates, aux and segment slots
 * (2 + SEG_SLOTS) for a few hundred partitions. LMDB's work per
 * transaction is over the handles opened, not this bound. */
#define STORE_MAXDBS 16384

/* Opens the shared databases (creating them when @p create) in one
 * transaction; committing it keeps the handles for later transactions.
 * *whatp (optional) names the database that failed. */
static int open_dbs(sg_store_t *s, bool create, const char **whatp) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(s->env, NULL, create ? 0 : MDB_RDONLY, &txn);
        if (rc)
                return rc;
        const char *names[] = {"meta", "filter"};
        MDB_dbi *dbis[] = {&s->meta_dbi, &s->filter_dbi};
        for (int i = 0; i < 2; i++) {
                if ((rc = mdb_dbi_open(txn, names[i], create ? MDB_CREATE : 0,
                                       dbis[i]))) {
                        if (whatp)
                                *whatp = names[i];
                        mdb_txn_abort(txn);
                        return rc;
                }
        }
        return mdb_txn_commit(txn);
}

/* ---- the store's format (store.h "Format version") -------------------- */

/* Reads the format number of the open environment into *fmtp: 0 when the
 * store has none (written before format numbers, or new). @p write: a new,
 * empty store gets SG_STORE_FORMAT recorded. Returns an LMDB code. */
static int format_read(sg_store_t *s, bool write, unsigned *fmtp) {
        MDB_txn *txn;
        MDB_dbi dbi;
        *fmtp = 0;
        int rc = mdb_txn_begin(s->env, NULL, write ? 0 : MDB_RDONLY, &txn);
        if (rc)
                return rc;
        rc = mdb_dbi_open(txn, FORMAT_DB, write ? MDB_CREATE : 0, &dbi);
        MDB_val k = {sizeof(FORMAT_KEY) - 1, FORMAT_KEY}, v;
        if (!rc && !(rc = mdb_get(txn, dbi, &k, &v))) {
                *fmtp = v.mv_size == 4 ? get_u32(v.mv_data) : UINT32_MAX;
                mdb_txn_abort(txn);
                return 0;
        }
        if (rc != MDB_NOTFOUND || !write) {
                mdb_txn_abort(txn);
                return rc == MDB_NOTFOUND ? 0 : rc;
        }
        /* no number: a new store gets one; a store with anything but the
         * databases just created (store format 1's dedup, agg, ...) has an
         * earlier format */
        MDB_cursor *cur;
        bool other = false;
        if (!(rc = mdb_cursor_open(txn, 1 /* the main database */, &cur))) {
                static const char *const ours[] = {"meta", "filter", FORMAT_DB};
                MDB_val key, val;
                for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
                     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                        bool mine = false;
                        for (int i = 0; i < 3; i++)
                                mine |= key.mv_size == strlen(ours[i]) &&
                                        !memcmp(key.mv_data, ours[i],
                                                key.mv_size);
                        other |= !mine;
                }
                mdb_cursor_close(cur);
        }
        if (rc && rc != MDB_NOTFOUND) {
                mdb_txn_abort(txn);
                return rc;
        }
        if (other) {
                mdb_txn_abort(txn);
                return 0;
        }
        unsigned char num[4];
        put_u32(num, SG_STORE_FORMAT);
        v = (MDB_val){sizeof(num), num};
        if ((rc = mdb_put(txn, dbi, &k, &v, 0))) {
                mdb_txn_abort(txn);
                return rc;
        }
        *fmtp = SG_STORE_FORMAT;
        return mdb_txn_commit(txn);
}

/* Sets the LMDB files of @p dir aside (a store of an earlier format,
 * which is not read): data.mdb moves into a new directory
 * @p dir/store-format-<fmt>-<unix seconds> (its path into @p kept), and
 * the lock file is removed. Nothing is deleted: if the changelog the
 * partitions are now restored from turns out to be incomplete, the old
 * store is still there for the operator (docs/upgrade.md "Store format 3"). */
static sg_err_t files_set_aside(const char *dir, unsigned fmt, char *kept,
                                size_t kept_size, char *errstr,
                                size_t errstr_size) {
        char from[4200], to[4300];
        snprintf(kept, kept_size, "%s/store-format-%u-%lld", dir, fmt,
                 (long long)time(NULL));
        if (mkdir(kept, 0700) != 0) {
                sg_errf(errstr, errstr_size,
                        "setting the store of format %u aside: mkdir %s: %s",
                        fmt, kept, strerror(errno));
                return SG_ERR_IO;
        }
        snprintf(from, sizeof(from), "%s/data.mdb", dir);
        snprintf(to, sizeof(to), "%s/data.mdb", kept);
        if (rename(from, to) != 0 && errno != ENOENT) {
                sg_errf(errstr, errstr_size,
                        "setting the store of format %u aside: rename %s to "
                        "%s: %s",
                        fmt, from, to, strerror(errno));
                return SG_ERR_IO;
        }
        snprintf(from, sizeof(from), "%s/lock.mdb", dir);
        if (unlink(from) != 0 && errno != ENOENT) {
                sg_errf(errstr, errstr_size, "removing %s: %s", from,
                        strerror(errno));
                return SG_ERR_IO;
        }
        return SG_OK;
}

/* The reason a store of format @p fmt is not read, into @p out. */
static void format_why(unsigned fmt, char *out, size_t size) {
        if (fmt == 0)
                snprintf(out, size,
                         "it was written in an earlier store format (before "
                         "format numbers), which this seqgate (format %d) "
                         "does not read",
                         SG_STORE_FORMAT);
        else
                snprintf(out, size,
                         "it was written in store format %u, which this "
                         "seqgate (format %d) does not read",
                         fmt, SG_STORE_FORMAT);
}

/* The size of @p dir/data.mdb in bytes, 1 when there is none (LMDB
 * raises a map size below the used pages to them). */
static size_t file_size(const char *dir) {
        char p[4200];
        struct stat sb;
        snprintf(p, sizeof(p), "%s/data.mdb", dir);
        return stat(p, &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size : 1;
}

/* The errno values that say the data_dir itself is wrong (a path through
 * a file, no permission, a read-only file system, a name too long): an
 * operator's error, not a passing one (docs/operating.md "Exit
 * statuses"). */
static bool dir_errno_config(int e) {
        return e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS ||
               e == ENAMETOOLONG || e == ELOOP || e == EEXIST;
}

/* "path: why (ENAME)" for errno @p e into @p buf. */
static const char *dir_why(char *buf, size_t size, const char *path, int e,
                           const char *what) {
        const char *name = strerrorname_np(e);
        snprintf(buf, size, "%s%s%s (%s)", path, what ? what : ": ",
                 what ? "" : strerror(e), name ? name : "errno");
        return buf;
}

sg_err_t sg_store_dir_check(const char *dir, int *errnop, char *errstr,
                            size_t errstr_size) {
        int dummy;
        if (!errnop)
                errnop = &dummy;
        *errnop = 0;
        char p[4096], why[4200];
        size_t n = strlen(dir);
        if (n == 0 || n >= sizeof(p)) {
                *errnop = ENAMETOOLONG;
                sg_errf(errstr, errstr_size, "data_dir %s: %s", dir,
                        dir_why(why, sizeof(why), "the path", ENAMETOOLONG,
                                NULL));
                return SG_ERR_CONFIG;
        }
        memcpy(p, dir, n + 1);
        /* the nearest existing path: dir, or its parents up to "/" or "." */
        struct stat st;
        for (;;) {
                if (stat(p, &st) == 0)
                        break;
                /* ENOTDIR: a parent is a file, found further up */
                if (errno != ENOENT && errno != ENOTDIR) {
                        *errnop = errno;
                        sg_errf(errstr, errstr_size,
                                "data_dir %s cannot be used: %s", dir,
                                dir_why(why, sizeof(why), p, errno, NULL));
                        return SG_ERR_CONFIG;
                }
                size_t len = strlen(p);
                if (len > 1 && p[len - 1] == '/') {
                        p[len - 1] = '\0'; /* a trailing slash: stat again */
                        continue;
                }
                char *slash = strrchr(p, '/');
                if (!slash)
                        snprintf(p, sizeof(p), ".");
                else if (slash == p)
                        p[1] = '\0'; /* "/" */
                else
                        *slash = '\0';
        }
        /* the data_dir itself (but for trailing slashes), or a parent */
        size_t pl = strlen(p);
        bool self = !strncmp(p, dir, pl) &&
                    strspn(dir + pl, "/") == strlen(dir + pl);
        if (!S_ISDIR(st.st_mode)) {
                *errnop = ENOTDIR;
                sg_errf(errstr, errstr_size, "data_dir %s cannot be %s: %s",
                        dir, self ? "used" : "created",
                        dir_why(why, sizeof(why), p, ENOTDIR,
                                " is not a directory"));
                return SG_ERR_CONFIG;
        }
        if (faccessat(AT_FDCWD, p, W_OK | X_OK, AT_EACCESS) != 0) {
                *errnop = errno;
                sg_errf(errstr, errstr_size, "data_dir %s cannot be %s: %s",
                        dir, self ? "written" : "created",
                        dir_why(why, sizeof(why), p, errno, NULL));
                return SG_ERR_CONFIG;
        }
        return SG_OK;
}

/* mkdir -p: @p dir and every missing parent (0750). 0 or -1 with errno. */
static int mkdir_parents(const char *dir) {
        char p[4096];
        size_t n = strlen(dir);
        if (n == 0 || n >= sizeof(p)) {
                errno = ENAMETOOLONG;
                return -1;
        }
        memcpy(p, dir, n + 1);
        for (size_t i = 1; i <= n; i++) {
                if (p[i] != '/' && p[i] != '\0')
                        continue;
                char c = p[i];
                p[i] = '\0';
                if (mkdir(p, 0750) != 0 && errno != EEXIST)
                        return -1;
                p[i] = c;
        }
        return 0;
}

/* What a data_dir another process holds says (sg_store_open and
 * sg_store_lock_probe alike); @p pid: the holder's, 0 when not known. */
static void lock_held(char *errstr, size_t errstr_size, const char *dir,
                      const char *lp, long pid) {
        char by[48] = "";
        if (pid > 0)
                snprintf(by, sizeof(by), ", by pid %ld", pid);
        sg_errf(errstr, errstr_size,
                "data_dir %s is in use by another seqgate process (%s is "
                "locked%s); give every instance its own data_dir",
                dir, lp, by);
}

sg_err_t sg_store_lock_probe(const char *dir, char *errstr,
                             size_t errstr_size) {
        char lp[4096];
        long pid = 0;
        snprintf(lp, sizeof(lp), "%s/seqgate.lock", dir);
        switch (sg_store_writer(dir, &pid)) {
        case SG_STORE_WRITER_RUNNING:
                lock_held(errstr, errstr_size, dir, lp, pid);
                return SG_ERR_LOCKED;
        case SG_STORE_WRITER_NONE:
                return SG_OK;
        case SG_STORE_WRITER_UNKNOWN:
                break;
        }
        /* /proc/locks unread: the lock itself, tried and let go at once,
         * on a read-only descriptor (flock(2) takes one), never created */
        int fd = open(lp, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return SG_OK; /* sg_store_open says why at start */
        sg_err_t err = SG_OK;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                if (errno == EWOULDBLOCK) {
                        lock_held(errstr, errstr_size, dir, lp, 0);
                        err = SG_ERR_LOCKED;
                }
        } else {
                flock(fd, LOCK_UN);
        }
        close(fd);
        return err;
}

sg_err_t sg_store_open(const char *dir, uint64_t map_size, uint64_t growth,
                       sg_store_t **storep, char *errstr, size_t errstr_size) {
        /* the path's own faults first, the same words as --check-config */
        sg_err_t err = sg_store_dir_check(dir, NULL, errstr, errstr_size);
        if (err)
                return err;
        if (mkdir_parents(dir) != 0) {
                int e = errno;
                char why[4200];
                sg_errf(errstr, errstr_size,
                        "data_dir %s cannot be created: %s", dir,
                        dir_why(why, sizeof(why), "mkdir", e, NULL));
                return dir_errno_config(e) ? SG_ERR_CONFIG : SG_ERR_IO;
        }
        /* One writer per data_dir: two seqgate processes on one store would
         * undo each other's decisions. The lock dies with the process. */
        char lp[4096];
        snprintf(lp, sizeof(lp), "%s/seqgate.lock", dir);
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0) {
                int e = errno;
                char why[4200];
                sg_errf(errstr, errstr_size,
                        "data_dir %s cannot be written: %s", dir,
                        dir_why(why, sizeof(why), lp, e, NULL));
                return dir_errno_config(e) ? SG_ERR_CONFIG : SG_ERR_IO;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                lock_held(errstr, errstr_size, dir, lp, 0);
                close(fd);
                return SG_ERR_LOCKED;
        }
        sg_store_t *s = calloc(1, sizeof(*s));
        if (!s) {
                close(fd);
                return SG_ERR_NOMEM;
        }
        s->lock_fd = fd;
        s->growth = growth ? growth : (1u << 30);
        s->aggc_max = SG_AGG_CACHE_DEFAULT;
        s->data_fd = -1;
        s->map_cap = map_size;
        /* the write-through map where its disk-space guard is sound
         * (store_space.c) */
        s->writemap = sg_store_space_fs_ok(dir);
        if (map_lock_init(s)) {
                close(fd);
                free(s);
                return SG_ERR_NOMEM;
        }
        if (!(s->dir = strdup(dir))) {
                pthread_rwlock_destroy(&s->map_lock);
                close(fd);
                free(s);
                return SG_ERR_NOMEM;
        }
        sg_err_t serr = sg_store_session_open(s, errstr, errstr_size);
        if (serr) {
                pthread_rwlock_destroy(&s->map_lock);
                close(fd);
                free(s->dir);
                free(s);
                return serr;
        }
        int rc;
        unsigned fmt;
reopen:
        if ((rc = mdb_env_create(&s->env)))
                goto fail;
        mdb_env_set_maxdbs(s->env, STORE_MAXDBS);
        /* the write-through map opens at the file's size (LMDB raises it
         * to the used pages; nothing is written before
         * sg_store_space_open allocates the map it then sets) */
        if ((rc = mdb_env_set_mapsize(s->env, s->writemap ? file_size(dir)
                                                          : (size_t)map_size)))
                goto fail;
        /* MDB_NOTLS: transactions are tied to our objects, not to threads'
         * TLS slots. Durability: a committed LMDB transaction is synced
         * unless sg_store_defer_sync() says Kafka holds the durable copy
         * (store_durable.c). MDB_WRITEMAP: store_space.c.
         * MDB_NORDAHEAD: LMDB advises the map MADV_RANDOM, so a fault
         * brings one 4 KiB page into the page cache, not a readahead
         * window; with readahead the kernel (Linux 6.x, ext4 and others)
         * builds large folios (up to 2 MiB) of the file, and a folio is
         * dirtied and written back whole: one 4 KiB page a transaction
         * copies would cost up to 2 MiB of writeback. */
        if ((rc = mdb_env_open(s->env, dir,
                               MDB_NOTLS | MDB_NORDAHEAD |
                                       (s->writemap ? MDB_WRITEMAP : 0),
                               0640)))
                goto fail;
        if (s->writemap &&
            (serr = sg_store_space_open(s, errstr, errstr_size))) {
                mdb_env_close(s->env);
                s->env = NULL;
                if (serr != SG_ERR_INVALID)
                        goto out;
                s->writemap = false; /* no fallocate: LMDB's copying path */
                goto reopen;
        }
        /* A file larger than map_size (grown earlier) keeps its size. */
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        if (!s->psize) { /* the write-through map's open set it */
                MDB_stat est;
                if ((rc = mdb_env_stat(s->env, &est)))
                        goto fail;
                s->psize = est.ms_psize;
        }
        if ((rc = open_dbs(s, true, NULL)))
                goto fail;
        if ((rc = format_read(s, true, &fmt)))
                goto fail;
        if (fmt > SG_STORE_FORMAT && fmt != UINT32_MAX) {
                /* a later seqgate's store: left as it is for it */
                sg_errf(errstr, errstr_size,
                        "data_dir %s holds a store of format %u, newer than "
                        "this seqgate's (%d); run a seqgate that reads it",
                        dir, fmt, SG_STORE_FORMAT);
                serr = SG_ERR_STORE;
                goto out;
        }
        if (fmt != SG_STORE_FORMAT) {
                /* an earlier format is never read: set aside, and every
                 * partition restored from its changelog (as after a
                 * machine stop, store_durable.c) */
                unsigned old_fmt = fmt == UINT32_MAX ? 1 : fmt;
                char kept[4200], why[256];
                format_why(old_fmt, why, sizeof(why));
                mdb_env_close(s->env);
                s->env = NULL;
                /* a store before format numbers is format 1 */
                if ((serr = files_set_aside(dir, old_fmt ? old_fmt : 1, kept,
                                            sizeof(kept), errstr, errstr_size)))
                        goto out;
                snprintf(s->rebuilt_why, sizeof(s->rebuilt_why),
                         "%s; it is kept in %s (remove it once every "
                         "partition is restored)",
                         why, kept);
                s->rebuilt = true;
                goto reopen;
        }
        if ((serr = sg_store_session_settle(s, errstr, errstr_size))) {
                sg_store_close(s);
                return serr;
        }
        /* every partition's handles, for the readers of other threads
         * (store_parts.c) */
        MDB_txn *ot;
        if ((rc = mdb_txn_begin(s->env, NULL, 0, &ot)) == 0 &&
            (rc = sg_pdb_open_all(s, ot)) == 0)
                rc = mdb_txn_commit(ot);
        else if (rc == 0)
                mdb_txn_abort(ot);
        if (rc) {
                sg_errf(errstr, errstr_size, "LMDB open %s: partitions: %s",
                        dir, mdb_strerror(rc));
                sg_store_close(s);
                return SG_ERR_STORE;
        }
        *storep = s;
        return SG_OK;
fail:
        sg_errf(errstr, errstr_size, "LMDB open %s: %s", dir, mdb_strerror(rc));
        serr = rc == MDB_MAP_FULL ? SG_ERR_MAP_FULL : SG_ERR_STORE;
out:
        if (s->env)
                mdb_env_close(s->env);
        sg_pdb_free(s);
        pthread_rwlock_destroy(&s->map_lock);
        close(s->lock_fd);
        free(s->dir);
        free(s);
        return serr;
}

/* ---- read-only access for operator tools ------------------------------ */

/* What a store of format @p fmt in @p dir is and what to do, for the
 * operator tools, into @p errstr: the copy open() set aside
 * (files_set_aside's store-format-<fmt>-<seconds> name), an earlier store
 * not converted yet, or a later one. */
static void readonly_format_why(const char *dir, unsigned fmt, char *errstr,
                                size_t errstr_size) {
        char path[4096];
        snprintf(path, sizeof(path), "%s", dir);
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') /* a trailing '/' */
                path[--n] = '\0';
        const char *slash = strrchr(path, '/');
        const char *leaf = slash ? slash + 1 : path;
        unsigned kf;
        long long secs;
        char tail;
        if (sscanf(leaf, "store-format-%u-%lld%c", &kf, &secs, &tail) == 2) {
                sg_errf(errstr, errstr_size,
                        "%s is a store of format %u that seqgate set aside "
                        "when it rebuilt its data_dir in format %d "
                        "(docs/upgrade.md \"Store format 3\"): a copy kept "
                        "for the operator, "
                        "read by no command; point --data-dir (or data_dir) "
                        "at the data_dir seqgate runs on, and remove this "
                        "directory once every partition is restored",
                        dir, kf, SG_STORE_FORMAT);
                return;
        }
        char why[200];
        format_why(fmt, why, sizeof(why));
        if (fmt > SG_STORE_FORMAT)
                sg_errf(errstr, errstr_size,
                        "the store in %s is not read: %s; use the seqgatectl "
                        "of the seqgate version that wrote it",
                        dir, why);
        else
                sg_errf(errstr, errstr_size,
                        "the store in %s is not read: %s, and not converted "
                        "yet: start seqgate on this data_dir once (it sets "
                        "this store aside in %s/store-format-%u-<seconds> "
                        "and restores every partition from its changelog, "
                        "docs/upgrade.md \"Store format 3\"), then run this "
                        "command again",
                        dir, why, dir, fmt ? fmt : 1);
}

sg_err_t sg_store_open_readonly(const char *dir, sg_store_t **storep,
                                char *errstr, size_t errstr_size) {
        sg_store_t *s = calloc(1, sizeof(*s));
        if (!s)
                return SG_ERR_NOMEM;
        if (map_lock_init(s)) {
                free(s);
                return SG_ERR_NOMEM;
        }
        const char *what = "open";
        int rc = mdb_env_create(&s->env);
        if (rc)
                goto fail;
        mdb_env_set_maxdbs(s->env, STORE_MAXDBS);
        s->readonly = true;
        /* No map size set: LMDB takes the one recorded in the file. */
        if ((rc = mdb_env_open(s->env, dir, MDB_RDONLY | MDB_NOTLS, 0640)))
                goto fail;
        /* the format first: an earlier store lacks this one's databases */
        unsigned fmt;
        what = "format";
        if ((rc = format_read(s, false, &fmt)))
                goto fail;
        if (fmt != SG_STORE_FORMAT) {
                readonly_format_why(dir, fmt, errstr, errstr_size);
                mdb_env_close(s->env);
                sg_pdb_free(s);
                pthread_rwlock_destroy(&s->map_lock);
                free(s);
                return SG_ERR_STORE;
        }
        what = "open databases";
        if ((rc = open_dbs(s, false, &what)))
                goto fail;
        *storep = s;
        return SG_OK;
fail:
        if (rc == ENOENT || rc == MDB_NOTFOUND)
                sg_errf(errstr, errstr_size, "no seqgate store in %s (%s: %s)",
                        dir, what,
                        rc == ENOENT ? "no data.mdb" : "database missing");
        else
                sg_errf(errstr, errstr_size, "LMDB %s %s: %s", what, dir,
                        mdb_strerror(rc));
        if (s->env)
                mdb_env_close(s->env);
        sg_pdb_free(s);
        pthread_rwlock_destroy(&s->map_lock);
        free(s);
        return rc == ENOENT || rc == MDB_NOTFOUND ? SG_ERR_NOT_FOUND
                                                  : SG_ERR_STORE;
}

/* ---- who writes the store ---------------------------------------------- */

sg_store_writer_t sg_store_writer(const char *dir, long *pidp) {
        if (pidp)
                *pidp = 0;
        char lp[4096];
        snprintf(lp, sizeof(lp), "%s/seqgate.lock", dir);
        struct stat st;
        if (stat(lp, &st) != 0)
                return errno == ENOENT ? SG_STORE_WRITER_NONE
                                       : SG_STORE_WRITER_UNKNOWN;
        /* Reading /proc/locks takes no lock: a probe with flock() would,
         * for an instant, refuse a seqgate starting on this data_dir. */
        FILE *f = fopen("/proc/locks", "re");
        if (!f)
                return SG_STORE_WRITER_UNKNOWN;
        sg_store_writer_t w = SG_STORE_WRITER_NONE;
        char line[256];
        while (w != SG_STORE_WRITER_RUNNING && fgets(line, sizeof(line), f)) {
                /* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9986082 0 EOF";
                 * a waiter's line has "->" before FLOCK */
                char kind[16], mode[16], access[16];
                long pid;
                unsigned maj, min;
                unsigned long long ino;
                if (sscanf(line, "%*[^:]: %15s %15s %15s %ld %x:%x:%llu", kind,
                           mode, access, &pid, &maj, &min, &ino) != 7 ||
                    strcmp(kind, "FLOCK") != 0 || strcmp(access, "WRITE") != 0)
                        continue;
                /* the inode, and the device where it names one: a file
                 * system on an anonymous device (overlayfs, btrfs) may
                 * name another device in stat() than in /proc/locks */
                if (ino != (unsigned long long)st.st_ino ||
                    (major(st.st_dev) != 0 &&
                     (maj != major(st.st_dev) || min != minor(st.st_dev))))
                        continue;
                w = SG_STORE_WRITER_RUNNING;
                if (pidp)
                        *pidp = pid;
        }
        fclose(f);
        return w;
}
