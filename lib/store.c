/*
 * store.c — seqgate's state in LMDB: the open environment (close, map
 * growth), transactions and change capture, fault simulation, and the LMDB
 * calls every other store file goes through (store_int.h). Opening a store
 * and its format number are store_open.c, the values' codec store_codec.c,
 * the records store_records.c, the walks store_walk.c. See store.h for the
 * key layout.
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

int sg_txn_write_op(sg_txn_t *t, unsigned op) {
        return write_op(t, op);
}

int sg_lmdb_put_wb(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val) {
        int rc = fault_at(t->store, SG_STORE_OP_AGG_WRITEBACK);
        if (rc)
                return rc;
        MDB_cursor *c = txn_cursor(t, dbi);
        return c ? mdb_cursor_put(c, key, val, 0)
                 : mdb_put(t->txn, dbi, key, val, 0);
}

int sg_lmdb_del_wb(sg_txn_t *t, MDB_dbi dbi, MDB_val *key) {
        int rc = fault_at(t->store, SG_STORE_OP_AGG_WRITEBACK);
        return rc ? rc : mdb_del(t->txn, dbi, key, NULL);
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
        sg_aggc_free(s);
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

void sg_store_set_agg_cache(sg_store_t *s, size_t entries) {
        assert(atomic_load(&s->writes_open) == 0);
        sg_aggc_free(s);
        s->aggc_max = entries > UINT32_MAX / 2 ? UINT32_MAX / 2 : entries;
}

sg_err_t sg_txn_commit(sg_txn_t *t, char *errstr, size_t errstr_size) {
        int rc = t->failed ? MDB_BAD_TXN : 0;
        /* the aggregate cache's writes not flushed yet first (a
         * restore's; the engine's batches flushed theirs, store_aggc.c) */
        if (!rc && t->write)
                rc = sg_aggc_writeback(t);
        if (!rc && !t->reader)
                rc = fault_at(t->store, SG_STORE_OP_COMMIT);
        if (rc)
                mdb_txn_abort(t->txn); /* as a failed mdb_txn_commit does */
        else
                rc = mdb_txn_commit(t->txn);
        if (rc && t->write) /* nothing LMDB did not keep stays cached */
                sg_aggc_clear(t->store);
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
        if (t->write) {
                /* an aborted transaction's writes vanish from the
                 * aggregate cache too (store_aggc.c); one that wrote
                 * nothing (an idle checkpoint's) read only committed
                 * values, which stay */
                if (t->writes || t->failed)
                        sg_aggc_clear(t->store);
                sg_pdb_txn_end(t->store, false);
        }
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
