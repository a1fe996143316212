/*
 * store.c — seqgate's state in LMDB: the environment (open, map growth,
 * the read-only open of operator tools), transactions and change capture,
 * fault simulation, and the LMDB calls every other store file goes through
 * (store_int.h). The values' codec is store_codec.c, the records
 * store_records.c, the walks store_walk.c. See store.h for the key layout.
 *
 * Invariant relied on by the engine: every write of a batch goes through the
 * one write transaction the engine holds; nothing here commits on its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid() */
#endif
#include "store_int.h"

#include "envelope.h" /* sg_sha256 */

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
#include <time.h>
#include <unistd.h>

const char *const sg_store_db_names[DB__CNT] = {"dedup",   "expiry", "agg",
                                                "parked",  "since",  "meta",
                                                "snapreq", "snapdue"};

sg_err_t sg_change_capture(sg_txn_t *t, int db, const void *k, size_t klen,
                           const void *v, size_t vlen) {
        if (!t->capture || !db_logged(db))
                return SG_OK;
        if (t->change_cnt == t->change_size) {
                size_t n = t->change_size ? t->change_size * 2 : 64;
                change_t *nc = realloc(t->changes, n * sizeof(*nc));
                if (!nc)
                        return SG_ERR_NOMEM;
                t->changes = nc;
                t->change_size = n;
        }
        unsigned char *buf = sg_arena_alloc(&t->cap, klen + (v ? vlen : 0) + 1);
        if (!buf)
                return SG_ERR_NOMEM;
        memcpy(buf, k, klen);
        if (v && vlen)
                memcpy(buf + klen, v, vlen);
        change_t *c = &t->changes[t->change_cnt];
        c->db = (uint8_t)db;
        c->key = buf;
        c->key_len = klen;
        c->value = v ? buf + klen : NULL;
        c->value_len = v ? vlen : 0;
        c->seq = t->change_cnt++;
        return SG_OK;
}

static void txn_free(sg_txn_t *t) {
        sg_store_t *s = t->store;
        if (t->reader) {
                assert(atomic_load(&s->readers_open) > 0);
                atomic_fetch_sub(&s->readers_open, 1);
                pthread_rwlock_unlock(&s->map_lock);
                sg_pdb_txn_free(t);
                free(t);
                return;
        }
        assert(atomic_load(&s->txns_open) > 0);
        atomic_fetch_sub(&s->txns_open, 1);
        if (t->write) {
                atomic_store(&s->writer_tid, 0);
                atomic_fetch_sub(&s->writes_open, 1);
        }
        if (t->write) { /* its chunks kept for the next */
                sg_arena_reset(&t->cap);
                sg_arena_free(&s->cap_spare);
                s->cap_spare = t->cap;
        } else {
                sg_arena_free(&t->cap);
        }
        sg_pdb_txn_free(t);
        free(t->curs); /* the cursors: freed by LMDB with the transaction */
        free(t->changes);
        free(t->view);
        free(t);
}

sg_err_t sg_lmdb_err(int rc, const char *what, char *errstr,
                     size_t errstr_size) {
        if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) {
                if (errstr && errstr_size)
                        sg_errf(errstr, errstr_size, "%s: %s", what,
                                mdb_strerror(rc));
                return SG_ERR_MAP_FULL;
        }
        if (rc == MDB_NOTFOUND)
                return SG_ERR_NOT_FOUND;
        if (errstr && errstr_size)
                sg_errf(errstr, errstr_size, "LMDB %s: %s", what,
                        mdb_strerror(rc));
        return SG_ERR_STORE;
}

/* ---- LMDB calls, with fault simulation ---------------------------------
 *
 * Every mdb_txn_begin / mdb_put / mdb_del / mdb_cursor_del / mdb_txn_commit
 * of a transaction goes through these. When sg_store_fault_inject() armed a
 * fault, the n-th matching operation is not run and fails with the chosen
 * error; as LMDB does after a failed write, the transaction is then broken:
 * every later operation on it fails with MDB_BAD_TXN and a commit aborts it.
 * Disarmed, the cost is one branch per operation. */

static int fault_at(sg_store_t *s, unsigned op) {
        if (!(s->fault_ops & op) || s->fault_fired)
                return 0;
        if (++s->fault_cnt != s->fault_n)
                return 0;
        s->fault_fired = true;
        return s->fault_rc;
}

/* Runs a write operation @p op of @p t: 0 to go on, else the error. */
static int write_op(sg_txn_t *t, unsigned op) {
        assert(t->write && "a write on a read-only transaction");
        if (t->failed)
                return MDB_BAD_TXN;
        int rc = fault_at(t->store, op);
        if (rc)
                t->failed = rc;
        else
                t->writes++;
        return rc;
}

sg_err_t sg_txn_fail(sg_txn_t *t, sg_err_t err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        sg_verrf(t->errdetail, sizeof(t->errdetail), fmt, ap);
        va_end(ap);
        return err;
}

/* (the name in parentheses: scan-build's sg_txn_lmdb_err macro, store_int.h) */
sg_err_t(sg_txn_lmdb_err)(sg_txn_t *t, int rc, const char *what, char *errstr,
                          size_t errstr_size) {
        sg_err_t err =
                sg_lmdb_err(rc, what, t->errdetail, sizeof(t->errdetail));
        if (err != SG_ERR_NOT_FOUND)
                sg_errf(errstr, errstr_size, "%s", t->errdetail);
        return err;
}

/* The write transaction's cursor on @p dbi, or NULL (none could be
 * opened: the caller goes without).
 *
 * A get through it leaves it on the key's leaf page (on a miss, on the
 * leaf where the key would go), and mdb_cursor_set looks at the cursor's
 * page before it searches from the root: so the put of the key just read
 * (the engine reads a dedup record and an aggregate, decides, then writes
 * them) finds its place without a second descent of the B-tree. At 10 M
 * keys each descent is a dozen cache and TLB misses on cold pages. LMDB
 * keeps a write transaction's open cursors right through every change
 * made by other cursors and by mdb_put/mdb_del/mdb_drop on the same
 * database (it tracks them), and frees them when the transaction ends. */
static MDB_cursor *txn_cursor(sg_txn_t *t, MDB_dbi dbi) {
        if (dbi >= t->curs_cnt) {
                size_t n = t->curs_cnt ? t->curs_cnt : 16;
                while (n <= dbi)
                        n *= 2;
                MDB_cursor **nc = realloc(t->curs, n * sizeof(*nc));
                if (!nc)
                        return NULL;
                memset(nc + t->curs_cnt, 0, (n - t->curs_cnt) * sizeof(*nc));
                t->curs = nc;
                t->curs_cnt = n;
        }
        if (!t->curs[dbi] && mdb_cursor_open(t->txn, dbi, &t->curs[dbi]))
                t->curs[dbi] = NULL;
        return t->curs[dbi];
}

int sg_lmdb_put(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val,
                unsigned flags) {
        int rc = write_op(t, SG_STORE_OP_PUT);
        if (rc)
                return rc;
        MDB_cursor *c = txn_cursor(t, dbi);
        return c ? mdb_cursor_put(c, key, val, flags)
                 : mdb_put(t->txn, dbi, key, val, flags);
}

int sg_lmdb_del(sg_txn_t *t, MDB_dbi dbi, MDB_val *key) {
        int rc = write_op(t, SG_STORE_OP_DEL);
        return rc ? rc : mdb_del(t->txn, dbi, key, NULL);
}

int sg_lmdb_drop(sg_txn_t *t, MDB_dbi dbi) {
        int rc = write_op(t, SG_STORE_OP_DEL);
        return rc ? rc : mdb_drop(t->txn, dbi, 0);
}

int sg_lmdb_cursor_put(sg_txn_t *t, MDB_cursor *cur, MDB_val *key, MDB_val *val,
                       unsigned flags) {
        int rc = write_op(t, SG_STORE_OP_PUT);
        return rc ? rc : mdb_cursor_put(cur, key, val, flags);
}

int sg_lmdb_cursor_del(sg_txn_t *t, MDB_cursor *cur) {
        int rc = write_op(t, SG_STORE_OP_DEL);
        return rc ? rc : mdb_cursor_del(cur, 0);
}

int sg_lmdb_get(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val) {
        if (t->failed)
                return MDB_BAD_TXN;
        MDB_cursor *c = t->write ? txn_cursor(t, dbi) : NULL;
        return c ? mdb_cursor_get(c, key, val, MDB_SET)
                 : mdb_get(t->txn, dbi, key, val);
}

int sg_lmdb_cursor_open(sg_txn_t *t, MDB_dbi dbi, MDB_cursor **curp) {
        if (t->failed)
                return MDB_BAD_TXN;
        return mdb_cursor_open(t->txn, dbi, curp);
}

void sg_store_fault_inject(sg_store_t *s, unsigned ops, uint64_t n, int rc) {
        s->fault_ops = n && rc ? ops : 0;
        s->fault_n = n;
        s->fault_rc = rc;
        s->fault_cnt = 0;
        s->fault_fired = false;
}

uint64_t sg_store_fault_count(const sg_store_t *s, bool *firedp) {
        if (firedp)
                *firedp = s->fault_fired;
        return s->fault_cnt;
}

unsigned sg_store_txns_open(const sg_store_t *s, bool write_only) {
        return write_only ? atomic_load(&s->writes_open)
                          : atomic_load(&s->txns_open) +
                                    atomic_load(&s->readers_open);
}

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

void sg_tp_make(sg_tp_t *tp, const char *topic, int32_t partition) {
        size_t n = strnlen(topic, sizeof(tp->topic) - 1);
        unsigned char h[32];
        sg_sha256(topic, n, h);
        memcpy(tp->b, h, 8);
        put_u32(tp->b + 8, (uint32_t)partition);
        tp->len = SG_TP_LEN;
        memcpy(tp->topic, topic, n);
        tp->topic[n] = '\0';
        tp->partition = partition;
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

sg_err_t sg_store_open(const char *dir, uint64_t map_size, uint64_t growth,
                       sg_store_t **storep, char *errstr, size_t errstr_size) {
        if (mkdir_parents(dir) != 0) {
                sg_errf(errstr, errstr_size, "data_dir %s: %s", dir,
                        strerror(errno));
                return SG_ERR_IO;
        }
        /* One writer per data_dir: two seqgate processes on one store would
         * undo each other's decisions. The lock dies with the process. */
        char lp[4096];
        snprintf(lp, sizeof(lp), "%s/seqgate.lock", dir);
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0) {
                sg_errf(errstr, errstr_size, "data_dir %s: %s", dir,
                        strerror(errno));
                return SG_ERR_IO;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                sg_errf(errstr, errstr_size,
                        "data_dir %s is in use by another seqgate process "
                        "(%s is locked); give every instance its own "
                        "data_dir",
                        dir, lp);
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
         * (store_durable.c). MDB_WRITEMAP: store_space.c. */
        if ((rc = mdb_env_open(s->env, dir,
                               MDB_NOTLS | (s->writemap ? MDB_WRITEMAP : 0),
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

void sg_store_close(sg_store_t *s) {
        if (!s)
                return;
        /* a writer's store: sync, then (after the trim, which frees the
         * headroom's blocks on a full disk) mark the close */
        bool synced = s->lock_fd > 0 && sg_store_session_sync(s);
        uint64_t used = s->writemap ? sg_store_space_used(s) : 0;
        mdb_env_close(s->env);
        if (s->writemap)
                sg_store_space_trim(s, used);
        if (synced)
                sg_store_session_mark_closed(s);
        sg_pdb_free(s);
        sg_arena_free(&s->cap_spare);
        pthread_rwlock_destroy(&s->map_lock);
        free(s->dir);
        if (s->lock_fd > 0)
                close(s->lock_fd); /* releases the flock */
        free(s);
}

sg_err_t sg_store_grow(sg_store_t *s, char *errstr, size_t errstr_size) {
        /* LMDB: the map size may only change with no transaction active in
         * this process; a caller that left one open has lost track of it */
        unsigned open = atomic_load(&s->txns_open);
        assert(open == 0 && "sg_store_grow with a transaction open");
        if (open) {
                sg_errf(errstr, errstr_size,
                        "grow map: %u transaction(s) still open", open);
                return SG_ERR_INVALID;
        }
        /* LMDB remaps the file: no reader of another thread may be in it */
        pthread_rwlock_wrlock(&s->map_lock);
        if (s->writemap) {
                sg_err_t err = sg_store_space_grow(s, errstr, errstr_size);
                pthread_rwlock_unlock(&s->map_lock);
                return err;
        }
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        size_t nsize = info.me_mapsize + (size_t)s->growth;
        int rc = mdb_env_set_mapsize(s->env, nsize);
        pthread_rwlock_unlock(&s->map_lock);
        if (rc)
                return sg_lmdb_err(rc, "grow map", errstr, errstr_size);
        return SG_OK;
}

bool sg_store_writemap(const sg_store_t *s) {
        return s->writemap;
}

void sg_store_usage(sg_store_t *s, uint64_t *map_size, uint64_t *used) {
        MDB_envinfo info;
        MDB_stat st;
        mdb_env_info(s->env, &info);
        mdb_env_stat(s->env, &st);
        if (map_size)
                *map_size = info.me_mapsize;
        if (used)
                *used = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
}

uint64_t sg_store_entries(sg_store_t *s) {
        sg_txn_t *t = NULL;
        sg_db_stat_t st[SG_STORE_DB_CNT];
        uint64_t n = 0;
        if (sg_txn_begin(s, false, &t, NULL, 0))
                return 0;
        if (!sg_store_db_stats(t, st, NULL, 0))
                for (int i = 0; i < SG_STORE_DB_CNT; i++)
                        n += st[i].entries;
        sg_txn_abort(t);
        return n;
}

sg_err_t sg_txn_begin(sg_store_t *s, bool write, sg_txn_t **txnp, char *errstr,
                      size_t errstr_size) {
        *txnp = NULL; /* set on SG_OK only */
        sg_txn_t *t = calloc(1, sizeof(*t));
        if (!t)
                return SG_ERR_NOMEM;
        t->store = s;
        t->write = write;
        /* one write transaction per process at a time: a thread beginning a
         * second one while it holds the first would wait for itself */
        assert(!write || atomic_load(&s->writer_tid) != (int)gettid());
        if (write && s->writemap && atomic_load(&s->txns_open) == 0) {
                sg_err_t err = sg_store_space_ahead(s, errstr, errstr_size);
                if (err) {
                        free(t);
                        return err;
                }
        }
        int rc = fault_at(s, SG_STORE_OP_BEGIN);
        if (!rc)
                rc = mdb_txn_begin(s->env, NULL, write ? 0 : MDB_RDONLY,
                                   &t->txn);
        if (rc) {
                free(t);
                return sg_lmdb_err(rc, write ? "begin" : "begin read-only",
                                   errstr, errstr_size);
        }
        atomic_fetch_add(&s->txns_open, 1);
        if (write) {
                MDB_envinfo info;
                mdb_env_info(s->env, &info);
                t->map_before = info.me_mapsize;
                t->used_before = sg_store_space_used(s);
                t->cap = s->cap_spare;
                memset(&s->cap_spare, 0, sizeof(s->cap_spare));
                atomic_fetch_add(&s->writes_open, 1);
                atomic_store(&s->writer_tid, (int)gettid());
        }
        *txnp = t;
        return SG_OK;
}

sg_err_t sg_txn_begin_reader(sg_store_t *s, sg_txn_t **txnp, char *errstr,
                             size_t errstr_size) {
        sg_txn_t *t = calloc(1, sizeof(*t));
        if (!t)
                return SG_ERR_NOMEM;
        t->store = s;
        t->reader = true;
        pthread_rwlock_rdlock(&s->map_lock);
        int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &t->txn);
        if (rc) {
                pthread_rwlock_unlock(&s->map_lock);
                free(t);
                return sg_lmdb_err(rc, "begin read-only", errstr, errstr_size);
        }
        atomic_fetch_add(&s->readers_open, 1);
        *txnp = t;
        return SG_OK;
}

/* After write transaction @p t committed: how much the file grew per write
 * (sg_txn_room_low's estimate), kept as a maximum that decays by an eighth
 * at each commit, so that one commit of mostly new pages (an empty store,
 * a restore) does not hold it high forever, nor a commit of few writes
 * (one that met its pages already copied) pull it low at once. */
static void growth_learn(sg_txn_t *t) {
        sg_store_t *s = t->store;
        if (t->writes < 64) /* too few to say anything */
                return;
        uint64_t used = sg_store_space_used(s);
        uint64_t per =
                used > t->used_before ? (used - t->used_before) / t->writes : 0;
        uint64_t kept = s->grow_per_write - s->grow_per_write / 8;
        s->grow_per_write = per > kept ? per : kept;
}

/* Before anything is learned: a page per 8 writes. */
#define GROW_PER_WRITE_DEFAULT 512

uint64_t sg_store_grow_per_write(const sg_store_t *s) {
        return s->grow_per_write ? s->grow_per_write : GROW_PER_WRITE_DEFAULT;
}

void sg_store_room_want(sg_store_t *s, uint64_t writes) {
        s->room_writes = writes;
}

bool sg_txn_room_low(const sg_txn_t *t, uint64_t pending) {
        if (!t || !t->write || t->map_before <= t->used_before)
                return false;
        uint64_t per = sg_store_grow_per_write(t->store);
        uint64_t room = t->map_before - t->used_before;
        return t->writes + pending > room / 2 / per;
}

bool sg_txn_copied_much(const sg_txn_t *t) {
        if (!t || !t->write || t->map_before <= t->used_before ||
            !t->store->psize)
                return false;
        uint64_t room = t->map_before - t->used_before;
        return t->writes * t->store->psize > room / 2;
}

uint64_t sg_txn_writes(const sg_txn_t *t) {
        return t ? t->writes : 0;
}

sg_err_t sg_txn_commit(sg_txn_t *t, char *errstr, size_t errstr_size) {
        int rc = t->failed ? MDB_BAD_TXN : 0;
        if (!rc && !t->reader)
                rc = fault_at(t->store, SG_STORE_OP_COMMIT);
        if (rc)
                mdb_txn_abort(t->txn); /* as a failed mdb_txn_commit does */
        else
                rc = mdb_txn_commit(t->txn);
        if (!rc && t->write)
                growth_learn(t);
        if (!rc && t->write && t->store->writemap)
                sg_store_space_committed(t->store, t->used_before);
        if (t->write) /* the handles it opened: kept, or closed by LMDB */
                sg_pdb_txn_end(t->store, rc == 0);
        txn_free(t);
        return rc ? sg_lmdb_err(rc, "commit", errstr, errstr_size) : SG_OK;
}

void sg_txn_abort(sg_txn_t *t) {
        if (!t)
                return;
        mdb_txn_abort(t->txn);
        if (t->write)
                sg_pdb_txn_end(t->store, false);
        txn_free(t);
}

void sg_txn_capture(sg_txn_t *t, bool on) {
        t->capture = on;
}

void sg_txn_capture_reset(sg_txn_t *t) {
        t->change_cnt = 0;
        sg_arena_reset(&t->cap);
        free(t->view);
        t->view = NULL;
        t->view_cnt = 0;
}

const char *sg_txn_errdetail(const sg_txn_t *t) {
        return t->errdetail;
}

/* A captured change's database and key, hashed for sg_txn_changes(). */
static uint64_t change_hash(const change_t *c) {
        uint64_t h =
                0x9e3779b97f4a7c15ull ^ c->db ^ ((uint64_t)c->key_len << 8);
        size_t i = 0;
        uint64_t w;
        for (; i + 8 <= c->key_len; i += 8) {
                memcpy(&w, c->key + i, 8);
                h = (h ^ w) * 0xff51afd7ed558ccdull;
                h ^= h >> 32;
        }
        w = 0;
        memcpy(&w, c->key + i, c->key_len - i);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        return h ^ (h >> 29);
}

static bool change_same_key(const change_t *x, const change_t *y) {
        return x->db == y->db && x->key_len == y->key_len &&
               memcmp(x->key, y->key, x->key_len) == 0;
}

size_t sg_txn_changes(sg_txn_t *t, const sg_change_t **changesp) {
        /* keep only the last change of each key, in write order: one pass
         * over a hash table of the keys (slot: index + 1 of the key's last
         * change so far) marks each change a later one of its key
         * overwrote; a second emits the others in order */
        size_t n = t->change_cnt, size = 16;
        while (size < 2 * n)
                size *= 2;
        size_t *slot = calloc(size, sizeof(*slot));
        bool *over = calloc(n ? n : 1, sizeof(*over));
        free(t->view);
        t->view = calloc(n ? n : 1, sizeof(*t->view));
        t->view_cnt = 0;
        if (!slot || !over || !t->view) {
                free(slot);
                free(over);
                free(t->view);
                t->view = NULL;
                *changesp = NULL;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                const change_t *c = &t->changes[i];
                size_t s = (size_t)change_hash(c) & (size - 1);
                while (slot[s] && !change_same_key(&t->changes[slot[s] - 1], c))
                        s = (s + 1) & (size - 1);
                if (slot[s])
                        over[slot[s] - 1] = true; /* overwritten later */
                slot[s] = i + 1;
        }
        for (size_t i = 0; i < n; i++) {
                const change_t *c = &t->changes[i];
                if (over[i])
                        continue;
                sg_change_t *v = &t->view[t->view_cnt++];
                v->db = c->db;
                v->key = c->key;
                v->key_len = c->key_len;
                v->value = c->value;
                v->value_len = c->value_len;
                v->_seq = c->seq;
        }
        free(slot);
        free(over);
        *changesp = t->view;
        return t->view_cnt;
}

sg_err_t sg_db_put(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   const void *v, size_t vlen, char *errstr,
                   size_t errstr_size) {
        MDB_val key = {klen, (void *)k}, val = {vlen, (void *)(v ? v : "")};
        int rc = sg_lmdb_put(t, dbi, &key, &val, 0);
        return rc ? sg_txn_lmdb_err(t, rc, db_name(db), errstr, errstr_size)
                  : SG_OK;
}

sg_err_t sg_db_get(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   MDB_val *val) {
        MDB_val key = {klen, (void *)k};
        int rc = sg_lmdb_get(t, dbi, &key, val);
        if (!rc)
                return SG_OK;
        if (rc == MDB_NOTFOUND) /* a miss is no error: nothing to word */
                return SG_ERR_NOT_FOUND;
        char what[32];
        sg_errf(what, sizeof(what), "%s get", db_name(db));
        return sg_txn_lmdb_err(t, rc, what, NULL, 0);
}

sg_err_t sg_db_del(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   char *errstr, size_t errstr_size) {
        MDB_val key = {klen, (void *)k};
        int rc = sg_lmdb_del(t, dbi, &key);
        if (rc == MDB_NOTFOUND)
                return SG_OK;
        return rc ? sg_txn_lmdb_err(t, rc, db_name(db), errstr, errstr_size)
                  : SG_OK;
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
