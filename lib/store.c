/*
 * store.c — seqgate's state in LMDB: dedup records with a TTL index,
 * aggregates, parked events with a gap-deadline index, and per-partition
 * meta. See store.h for the key layout.
 *
 * Values are encoded field by field in big-endian order (not raw structs) so
 * the on-disk format does not depend on the compiler's struct layout, and so
 * the same bytes can later travel in a changelog record.
 *
 * Invariant relied on by the engine: every write of a batch goes through the
 * one write transaction the engine holds; nothing here commits on its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid() */
#endif
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
        DB_DEDUP,
        DB_EXPIRY,
        DB_AGG,
        DB_PARKED,
        DB_SINCE,
        DB_META,
        DB_SNAPREQ,
        DB_SNAPDUE,
        DB__CNT
};
static const char *const db_names[DB__CNT] = {"dedup", "expiry", "agg",
                                              "parked", "since", "meta",
                                              "snapreq", "snapdue"};

struct sg_store {
        MDB_env *env;
        MDB_dbi dbi[DB__CNT];
        uint64_t growth;
        int lock_fd; /* data_dir/seqgate.lock, held while open (write mode) */
        atomic_uint txns_open;   /* begun, not yet committed or aborted */
        atomic_uint writes_open; /* of which write transactions */
        atomic_int writer_tid;   /* thread holding the write txn, 0 none */
        /* fault simulation (sg_store_fault_inject) */
        unsigned fault_ops;      /* SG_STORE_OP_* mask, 0: disarmed */
        uint64_t fault_n, fault_cnt;
        int fault_rc;
        bool fault_fired;
};

/* A captured change (changelog, semantics §6): full LMDB key, value or NULL. */
typedef struct change {
        uint8_t db;
        unsigned char *key; /* malloc'd: key, then value */
        size_t key_len;
        unsigned char *value;
        size_t value_len;
        size_t seq;
} change_t;

struct sg_txn {
        sg_store_t *store;
        MDB_txn *txn;
        bool write;
        int failed;   /* simulated LMDB error that broke the txn, 0 none */
        bool capture;
        change_t *changes;
        size_t change_cnt, change_size;
        sg_change_t *view; /* sg_txn_changes() result */
        size_t view_cnt;
};

/* The databases whose writes are state (the others are indexes derived from
 * them, rebuilt on restore). */
static bool db_logged(int db) {
        return db == DB_DEDUP || db == DB_AGG || db == DB_PARKED ||
               db == DB_SNAPREQ || db == DB_META;
}

static sg_err_t capture(sg_txn_t *t, int db, const void *k, size_t klen,
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
        unsigned char *buf = malloc(klen + (v ? vlen : 0) + 1);
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
        assert(atomic_load(&s->txns_open) > 0);
        atomic_fetch_sub(&s->txns_open, 1);
        if (t->write) {
                atomic_store(&s->writer_tid, 0);
                atomic_fetch_sub(&s->writes_open, 1);
        }
        for (size_t i = 0; i < t->change_cnt; i++)
                free(t->changes[i].key);
        free(t->changes);
        free(t->view);
        free(t);
}

/* ---- encoding helpers ------------------------------------------------- */

static void put_u64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--) {
                p[i] = (unsigned char)(v & 0xff);
                v >>= 8;
        }
}
static uint64_t get_u64(const unsigned char *p) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = (v << 8) | p[i];
        return v;
}
static void put_u32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
}
static uint32_t get_u32(const unsigned char *p) {
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
               ((uint32_t)p[2] << 8) | p[3];
}

/* Processing times are non-negative ms since the epoch, so a plain
 * big-endian u64 sorts them correctly. */
static uint64_t ts_key(int64_t ms) { return ms < 0 ? 0 : (uint64_t)ms; }

/* ---- decoding ----------------------------------------------------------
 *
 * Values come back from LMDB and, in a changelog record, from the network:
 * one decoder per value kind (sg_dedup_decode, ...) serves both the reads
 * (sg_*_get) and restore (sg_store_apply_change), so a changelog record is
 * decoded fully, and refused, before anything of it is written. A decoder
 * reads through a bounded reader: every field, length and count is checked
 * against the bytes the value really has before it is used, nothing is
 * allocated or copied from a decoded number, enumerated fields must hold
 * one of their values, and a value has no trailing bytes. */

typedef struct rd {
        const unsigned char *p;
        size_t left;
        bool truncated; /* a field ran past the end of the value */
} rd_t;

static const unsigned char *rd_take(rd_t *r, size_t n) {
        if (r->truncated || r->left < n) {
                r->truncated = true;
                return NULL;
        }
        const unsigned char *q = r->p;
        r->p += n;
        r->left -= n;
        return q;
}
static uint64_t rd_u64(rd_t *r) {
        const unsigned char *q = rd_take(r, 8);
        return q ? get_u64(q) : 0;
}
static int64_t rd_i64(rd_t *r) { return (int64_t)rd_u64(r); }
static uint32_t rd_u32(rd_t *r) {
        const unsigned char *q = rd_take(r, 4);
        return q ? get_u32(q) : 0;
}
static unsigned rd_u16(rd_t *r) {
        const unsigned char *q = rd_take(r, 2);
        return q ? ((unsigned)q[0] << 8) | q[1] : 0;
}
static unsigned rd_u8(rd_t *r) {
        const unsigned char *q = rd_take(r, 1);
        return q ? q[0] : 0;
}

static sg_err_t refuse(char *errstr, size_t errstr_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static sg_err_t refuse(char *errstr, size_t errstr_size, const char *fmt,
                       ...) {
        if (errstr && errstr_size) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(errstr, errstr_size, fmt, ap);
                va_end(ap);
        }
        return SG_ERR_INVALID;
}

/* The value was read whole: neither truncated nor followed by more bytes. */
static sg_err_t rd_end(const rd_t *r, const char *kind, size_t len,
                       char *errstr, size_t errstr_size) {
        if (r->truncated)
                return refuse(errstr, errstr_size,
                              "%s value of %zu bytes is truncated", kind, len);
        if (r->left)
                return refuse(errstr, errstr_size,
                              "%s value of %zu bytes has %zu trailing bytes",
                              kind, len, r->left);
        return SG_OK;
}

/* A processing time, and a deadline computed from one (semantics: times
 * are ms since the epoch, never negative). */
static bool is_time(int64_t ms) { return ms >= 0 && ms <= SG_TIME_MAX_MS; }
static bool is_deadline(int64_t ms) {
        return ms >= 0 && ms <= SG_DEADLINE_MAX_MS;
}

/* A local read found a value seqgate did not write. */
static sg_err_t corrupt(sg_err_t err) {
        return err == SG_ERR_INVALID ? SG_ERR_STORE : err;
}

static sg_err_t lmdb_err(int rc, const char *what, char *errstr,
                         size_t errstr_size) {
        if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) {
                if (errstr && errstr_size)
                        snprintf(errstr, errstr_size, "%s: %s", what,
                                 mdb_strerror(rc));
                return SG_ERR_MAP_FULL;
        }
        if (rc == MDB_NOTFOUND)
                return SG_ERR_NOT_FOUND;
        if (errstr && errstr_size)
                snprintf(errstr, errstr_size, "LMDB %s: %s", what,
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
        if (t->failed)
                return MDB_BAD_TXN;
        int rc = fault_at(t->store, op);
        if (rc)
                t->failed = rc;
        return rc;
}

static int lmdb_put(sg_txn_t *t, int db, MDB_val *key, MDB_val *val,
                    unsigned flags) {
        int rc = write_op(t, SG_STORE_OP_PUT);
        return rc ? rc : mdb_put(t->txn, t->store->dbi[db], key, val, flags);
}

static int lmdb_del(sg_txn_t *t, int db, MDB_val *key) {
        int rc = write_op(t, SG_STORE_OP_DEL);
        return rc ? rc : mdb_del(t->txn, t->store->dbi[db], key, NULL);
}

static int lmdb_cursor_del(sg_txn_t *t, MDB_cursor *cur) {
        int rc = write_op(t, SG_STORE_OP_DEL);
        return rc ? rc : mdb_cursor_del(cur, 0);
}

static int lmdb_get(sg_txn_t *t, int db, MDB_val *key, MDB_val *val) {
        if (t->failed)
                return MDB_BAD_TXN;
        return mdb_get(t->txn, t->store->dbi[db], key, val);
}

static int lmdb_cursor_open(sg_txn_t *t, int db, MDB_cursor **curp) {
        if (t->failed)
                return MDB_BAD_TXN;
        return mdb_cursor_open(t->txn, t->store->dbi[db], curp);
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
                          : atomic_load(&s->txns_open);
}

void sg_tp_make(sg_tp_t *tp, const char *topic, int32_t partition) {
        size_t n = strlen(topic);
        if (n > 249)
                n = 249;
        tp->b[0] = (unsigned char)n;
        memcpy(tp->b + 1, topic, n);
        put_u32(tp->b + 1 + n, (uint32_t)partition);
        tp->len = 1 + n + 4;
}

/* key = tp | parts... ; returns length. buf must hold SG_TP_MAX + 64. */
static size_t key2(unsigned char *buf, const sg_tp_t *tp, const void *a,
                   size_t alen, const void *b, size_t blen) {
        memcpy(buf, tp->b, tp->len);
        memcpy(buf + tp->len, a, alen);
        if (blen)
                memcpy(buf + tp->len + alen, b, blen);
        return tp->len + alen + blen;
}

/* ---- environment ------------------------------------------------------ */

/* Opens every named database (creating them when @p create) in one
 * transaction; committing it keeps the handles for later transactions.
 * *whatp (optional) names the database that failed. */
static int open_dbs(sg_store_t *s, bool create, const char **whatp) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(s->env, NULL, create ? 0 : MDB_RDONLY, &txn);
        if (rc)
                return rc;
        for (int i = 0; i < DB__CNT; i++) {
                if ((rc = mdb_dbi_open(txn, db_names[i],
                                       create ? MDB_CREATE : 0, &s->dbi[i]))) {
                        if (whatp)
                                *whatp = db_names[i];
                        mdb_txn_abort(txn);
                        return rc;
                }
        }
        return mdb_txn_commit(txn);
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
                snprintf(errstr, errstr_size, "data_dir %s: %s", dir,
                         strerror(errno));
                return SG_ERR_IO;
        }
        /* One writer per data_dir: two seqgate processes on one store would
         * undo each other's decisions. The lock dies with the process. */
        char lp[4096];
        snprintf(lp, sizeof(lp), "%s/seqgate.lock", dir);
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0) {
                snprintf(errstr, errstr_size, "data_dir %s: %s", dir,
                         strerror(errno));
                return SG_ERR_IO;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                snprintf(errstr, errstr_size,
                         "data_dir %s is in use by another seqgate process "
                         "(%s is locked); give every instance its own "
                         "data_dir",
                         dir, lp);
                close(fd);
                return SG_ERR_IO;
        }
        sg_store_t *s = calloc(1, sizeof(*s));
        if (!s) {
                close(fd);
                return SG_ERR_NOMEM;
        }
        s->lock_fd = fd;
        s->growth = growth ? growth : (1u << 30);
        int rc = mdb_env_create(&s->env);
        if (rc)
                goto fail;
        mdb_env_set_maxdbs(s->env, DB__CNT + 2);
        if ((rc = mdb_env_set_mapsize(s->env, (size_t)map_size)))
                goto fail;
        /* MDB_NOTLS: transactions are tied to our objects, not to threads'
         * TLS slots. Durability: a committed LMDB transaction is synced
         * (no MDB_NOSYNC): the store must never claim more than Kafka has. */
        if ((rc = mdb_env_open(s->env, dir, MDB_NOTLS, 0640)))
                goto fail;
        /* A file larger than map_size (grown earlier) keeps its size. */
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        if ((rc = open_dbs(s, true, NULL)))
                goto fail;
        *storep = s;
        return SG_OK;
fail:
        snprintf(errstr, errstr_size, "LMDB open %s: %s", dir,
                 mdb_strerror(rc));
        if (s->env)
                mdb_env_close(s->env);
        close(s->lock_fd);
        free(s);
        return rc == MDB_MAP_FULL ? SG_ERR_MAP_FULL : SG_ERR_STORE;
}

void sg_store_close(sg_store_t *s) {
        if (!s)
                return;
        mdb_env_close(s->env);
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
                snprintf(errstr, errstr_size,
                         "grow map: %u transaction(s) still open", open);
                return SG_ERR_INVALID;
        }
        MDB_envinfo info;
        mdb_env_info(s->env, &info);
        size_t nsize = info.me_mapsize + (size_t)s->growth;
        int rc = mdb_env_set_mapsize(s->env, nsize);
        if (rc)
                return lmdb_err(rc, "grow map", errstr, errstr_size);
        return SG_OK;
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

sg_err_t sg_txn_begin(sg_store_t *s, bool write, sg_txn_t **txnp, char *errstr,
                      size_t errstr_size) {
        sg_txn_t *t = calloc(1, sizeof(*t));
        if (!t)
                return SG_ERR_NOMEM;
        t->store = s;
        t->write = write;
        /* one write transaction per process at a time: a thread beginning a
         * second one while it holds the first would wait for itself */
        assert(!write || atomic_load(&s->writer_tid) != (int)gettid());
        int rc = fault_at(s, SG_STORE_OP_BEGIN);
        if (!rc)
                rc = mdb_txn_begin(s->env, NULL, write ? 0 : MDB_RDONLY,
                                   &t->txn);
        if (rc) {
                free(t);
                return lmdb_err(rc, write ? "begin" : "begin read-only",
                                errstr, errstr_size);
        }
        atomic_fetch_add(&s->txns_open, 1);
        if (write) {
                atomic_fetch_add(&s->writes_open, 1);
                atomic_store(&s->writer_tid, (int)gettid());
        }
        *txnp = t;
        return SG_OK;
}

sg_err_t sg_txn_commit(sg_txn_t *t, char *errstr, size_t errstr_size) {
        int rc = t->failed ? MDB_BAD_TXN : fault_at(t->store,
                                                   SG_STORE_OP_COMMIT);
        if (rc)
                mdb_txn_abort(t->txn); /* as a failed mdb_txn_commit does */
        else
                rc = mdb_txn_commit(t->txn);
        txn_free(t);
        return rc ? lmdb_err(rc, "commit", errstr, errstr_size) : SG_OK;
}

void sg_txn_abort(sg_txn_t *t) {
        if (!t)
                return;
        mdb_txn_abort(t->txn);
        txn_free(t);
}

void sg_txn_capture(sg_txn_t *t, bool on) { t->capture = on; }

static int change_cmp(const void *a, const void *b) {
        const change_t *x = a, *y = b;
        if (x->db != y->db)
                return x->db < y->db ? -1 : 1;
        size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
        int c = memcmp(x->key, y->key, n);
        if (c)
                return c;
        if (x->key_len != y->key_len)
                return x->key_len < y->key_len ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int seq_cmp(const void *a, const void *b) {
        const sg_change_t *x = a, *y = b;
        return x->_seq < y->_seq ? -1 : x->_seq > y->_seq;
}

size_t sg_txn_changes(sg_txn_t *t, const sg_change_t **changesp) {
        /* keep only the last change of each key, in write order */
        if (t->change_cnt > 1)
                qsort(t->changes, t->change_cnt, sizeof(*t->changes),
                      change_cmp);
        free(t->view);
        t->view = calloc(t->change_cnt ? t->change_cnt : 1, sizeof(*t->view));
        t->view_cnt = 0;
        if (!t->view) {
                *changesp = NULL;
                return 0;
        }
        for (size_t i = 0; i < t->change_cnt; i++) {
                const change_t *c = &t->changes[i];
                if (i + 1 < t->change_cnt && c->db == c[1].db &&
                    c->key_len == c[1].key_len &&
                    memcmp(c->key, c[1].key, c->key_len) == 0)
                        continue; /* overwritten later in this txn */
                sg_change_t *v = &t->view[t->view_cnt++];
                v->db = c->db;
                v->key = c->key;
                v->key_len = c->key_len;
                v->value = c->value;
                v->value_len = c->value_len;
                v->_seq = c->seq;
        }
        if (t->view_cnt > 1)
                qsort(t->view, t->view_cnt, sizeof(*t->view), seq_cmp);
        *changesp = t->view;
        return t->view_cnt;
}

static sg_err_t put(sg_txn_t *t, int db, const void *k, size_t klen,
                    const void *v, size_t vlen, char *errstr,
                    size_t errstr_size) {
        MDB_val key = {klen, (void *)k}, val = {vlen, (void *)v};
        int rc = lmdb_put(t, db, &key, &val, 0);
        if (rc)
                return lmdb_err(rc, db_names[db], errstr, errstr_size);
        return capture(t, db, k, klen, v ? v : "", vlen);
}

static sg_err_t get(sg_txn_t *t, int db, const void *k, size_t klen,
                    MDB_val *val) {
        MDB_val key = {klen, (void *)k};
        int rc = lmdb_get(t, db, &key, val);
        return rc ? lmdb_err(rc, db_names[db], NULL, 0) : SG_OK;
}

static sg_err_t del(sg_txn_t *t, int db, const void *k, size_t klen,
                    char *errstr, size_t errstr_size) {
        MDB_val key = {klen, (void *)k};
        int rc = lmdb_del(t, db, &key);
        if (rc == MDB_NOTFOUND)
                return SG_OK;
        if (rc)
                return lmdb_err(rc, db_names[db], errstr, errstr_size);
        return capture(t, db, k, klen, NULL, 0);
}

/* ---- dedup ------------------------------------------------------------ */

/* digest 32 | verdict u8 | first_seen i64 | expiry i64 */
#define DEDUP_VLEN (32 + 1 + 8 + 8)

sg_err_t sg_dedup_decode(const void *value, size_t len, sg_dedup_rec_t *out,
                         char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        const unsigned char *digest = rd_take(&r, 32);
        unsigned verdict = rd_u8(&r);
        int64_t first_seen = rd_i64(&r), expiry = rd_i64(&r);
        sg_err_t err = rd_end(&r, "dedup", len, errstr, errstr_size);
        if (err)
                return err;
        if (verdict < SG_DV_APPLIED || verdict > SG_DV_DROPPED)
                return refuse(errstr, errstr_size,
                              "dedup value: unknown verdict %u", verdict);
        if (!is_time(first_seen) || !is_deadline(expiry))
                return refuse(errstr, errstr_size,
                              "dedup value: time out of range (first seen "
                              "%" PRId64 ", expiry %" PRId64 ")",
                              first_seen, expiry);
        memcpy(out->digest, digest, 32);
        out->verdict = (uint8_t)verdict;
        out->first_seen_ms = first_seen;
        out->expiry_ms = expiry;
        return SG_OK;
}

sg_err_t sg_dedup_get(sg_txn_t *t, const sg_tp_t *tp,
                      const unsigned char kh[32], sg_dedup_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, kh, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = get(t, DB_DEDUP, k, klen, &v);
        if (err)
                return err;
        return corrupt(sg_dedup_decode(v.mv_data, v.mv_size, out, NULL, 0));
}

sg_err_t sg_dedup_put_known(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char kh[32],
                            const sg_dedup_rec_t *rec,
                            const sg_dedup_rec_t *old, char *errstr,
                            size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ek[SG_TP_MAX + 64], ts[8];
        sg_err_t err;
        if (!old || old->expiry_ms != rec->expiry_ms) {
                if (old) {
                        put_u64(ts, ts_key(old->expiry_ms));
                        size_t eklen = key2(ek, tp, ts, 8, kh, 32);
                        if ((err = del(t, DB_EXPIRY, ek, eklen, errstr,
                                       errstr_size)))
                                return err;
                }
                put_u64(ts, ts_key(rec->expiry_ms));
                size_t eklen = key2(ek, tp, ts, 8, kh, 32);
                if ((err = put(t, DB_EXPIRY, ek, eklen, "", 0, errstr,
                               errstr_size)))
                        return err;
        }
        size_t klen = key2(k, tp, kh, 32, NULL, 0);
        unsigned char v[DEDUP_VLEN];
        memcpy(v, rec->digest, 32);
        v[32] = rec->verdict;
        put_u64(v + 33, (uint64_t)rec->first_seen_ms);
        put_u64(v + 41, (uint64_t)rec->expiry_ms);
        return put(t, DB_DEDUP, k, klen, v, sizeof(v), errstr, errstr_size);
}

sg_err_t sg_dedup_put(sg_txn_t *t, const sg_tp_t *tp,
                      const unsigned char kh[32], const sg_dedup_rec_t *rec,
                      char *errstr, size_t errstr_size) {
        sg_dedup_rec_t old;
        sg_err_t err = sg_dedup_get(t, tp, kh, &old);
        if (err && err != SG_ERR_NOT_FOUND)
                return err;
        return sg_dedup_put_known(t, tp, kh, rec, err ? NULL : &old, errstr,
                                  errstr_size);
}

sg_err_t sg_dedup_sweep(sg_txn_t *t, const sg_tp_t *tp, int64_t now_ms,
                        int64_t ttl_ms, int max, int *removedp, char *errstr,
                        size_t errstr_size) {
        int removed = 0;
        *removedp = 0;
        for (int i = 0; i < max; i++) {
                MDB_cursor *cur;
                int rc = lmdb_cursor_open(t, DB_EXPIRY, &cur);
                if (rc)
                        return lmdb_err(rc, "expiry cursor", errstr,
                                        errstr_size);
                MDB_val key = {tp->len, (void *)tp->b}, val;
                rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
                if (rc == MDB_NOTFOUND || (rc == 0 && (key.mv_size != tp->len + 40 ||
                                         memcmp(key.mv_data, tp->b, tp->len)))) {
                        mdb_cursor_close(cur);
                        break;
                }
                if (rc) {
                        mdb_cursor_close(cur);
                        return lmdb_err(rc, "expiry cursor", errstr,
                                        errstr_size);
                }
                unsigned char ek[SG_TP_MAX + 64];
                memcpy(ek, key.mv_data, key.mv_size);
                size_t eklen = key.mv_size;
                mdb_cursor_close(cur);
                int64_t exp = (int64_t)get_u64(ek + tp->len);
                if (exp > now_ms)
                        break;
                const unsigned char *kh = ek + tp->len + 8;
                sg_err_t err = del(t, DB_EXPIRY, ek, eklen, errstr, errstr_size);
                if (err)
                        return err;
                sg_dedup_rec_t rec;
                err = sg_dedup_get(t, tp, kh, &rec);
                if (err == SG_ERR_NOT_FOUND)
                        continue;
                if (err)
                        return err;
                if (rec.expiry_ms != exp)
                        continue; /* stale index entry */
                if (rec.verdict == SG_DV_PARKED) {
                        /* still parked: re-arm (the old index entry is
                         * already gone, so index as new) */
                        rec.expiry_ms = now_ms + ttl_ms;
                        if ((err = sg_dedup_put_known(t, tp, kh, &rec, NULL,
                                                      errstr, errstr_size)))
                                return err;
                        continue;
                }
                unsigned char k[SG_TP_MAX + 64];
                size_t klen = key2(k, tp, kh, 32, NULL, 0);
                if ((err = del(t, DB_DEDUP, k, klen, errstr, errstr_size)))
                        return err;
                removed++;
        }
        *removedp = removed;
        return SG_OK;
}

/* ---- aggregates ------------------------------------------------------- */

/* has_last u8 | last u64 | flags u32 | parked_cnt u32 | parked_bytes u64 |
 * since i64 | gap_reported i64 | skip_from u64 | skip_to u64 |
 * state_len u8 | state | agg_len u16 | agg */
#define AGG_FIXED (1 + 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8)

sg_err_t sg_agg_decode(const void *value, size_t len, sg_agg_rec_t *out,
                       char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        unsigned has_last = rd_u8(&r);
        uint64_t last = rd_u64(&r);
        uint32_t flags = rd_u32(&r), parked_cnt = rd_u32(&r);
        uint64_t parked_bytes = rd_u64(&r);
        int64_t since = rd_i64(&r), reported = rd_i64(&r);
        uint64_t skip_from = rd_u64(&r), skip_to = rd_u64(&r);
        unsigned sl = rd_u8(&r);
        const unsigned char *state = rd_take(&r, sl);
        unsigned al = rd_u16(&r);
        const unsigned char *agg = rd_take(&r, al);
        sg_err_t err = rd_end(&r, "aggregate", len, errstr, errstr_size);
        if (err)
                return err;
        if (has_last > 1)
                return refuse(errstr, errstr_size,
                              "aggregate value: has_last %u", has_last);
        if (flags & ~(uint32_t)(SG_AGG_QUARANTINED | SG_AGG_REFETCHING))
                return refuse(errstr, errstr_size,
                              "aggregate value: unknown flags 0x%" PRIx32,
                              flags);
        if (!is_time(since) || !is_time(reported))
                return refuse(errstr, errstr_size,
                              "aggregate value: time out of range (parked "
                              "since %" PRId64 ", gap reported %" PRId64 ")",
                              since, reported);
        if (skip_from ? skip_from > skip_to : skip_to != 0)
                return refuse(errstr, errstr_size,
                              "aggregate value: skipped versions %" PRIu64
                              "-%" PRIu64,
                              skip_from, skip_to);
        if (sl >= SG_STATE_MAX || memchr(state, '\0', sl))
                return refuse(errstr, errstr_size,
                              "aggregate value: state of %u bytes is not a "
                              "state name (at most %d bytes, no NUL)",
                              sl, SG_STATE_MAX - 1);
        if (al >= sizeof(out->aggregate))
                return refuse(errstr, errstr_size,
                              "aggregate value: aggregate id of %u bytes "
                              "(at most %zu)",
                              al, sizeof(out->aggregate) - 1);
        memset(out, 0, sizeof(*out));
        out->has_last = has_last;
        out->last_version = last;
        out->flags = flags;
        out->parked_cnt = parked_cnt;
        out->parked_bytes = parked_bytes;
        out->parked_since_ms = since;
        out->gap_reported_ms = reported;
        out->skip_from = skip_from;
        out->skip_to = skip_to;
        memcpy(out->state, state, sl);
        memcpy(out->aggregate, agg, al);
        out->aggregate_len = al;
        return SG_OK;
}

sg_err_t sg_agg_get(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    sg_agg_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = get(t, DB_AGG, k, klen, &v);
        if (err)
                return err;
        return corrupt(sg_agg_decode(v.mv_data, v.mv_size, out, NULL, 0));
}

static sg_err_t since_key_op(sg_txn_t *t, const sg_tp_t *tp, int64_t since,
                             const unsigned char ah[32], bool add,
                             char *errstr, size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ts[8];
        put_u64(ts, ts_key(since));
        size_t klen = key2(k, tp, ts, 8, ah, 32);
        return add ? put(t, DB_SINCE, k, klen, "", 0, errstr, errstr_size)
                   : del(t, DB_SINCE, k, klen, errstr, errstr_size);
}

sg_err_t sg_agg_put(sg_txn_t *t, const sg_tp_t *tp, const unsigned char ah[32],
                    const sg_agg_rec_t *r, int64_t old_since, char *errstr,
                    size_t errstr_size) {
        sg_err_t err;
        int64_t new_since = sg_agg_indexed_since(r);
        if (old_since != new_since) {
                if (old_since &&
                    (err = since_key_op(t, tp, old_since, ah, false, errstr,
                                        errstr_size)))
                        return err;
                if (new_since &&
                    (err = since_key_op(t, tp, new_since, ah, true, errstr,
                                        errstr_size)))
                        return err;
        }
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        unsigned char v[AGG_FIXED + 3 + SG_STATE_MAX + sizeof(r->aggregate)];
        v[0] = r->has_last ? 1 : 0;
        put_u64(v + 1, r->last_version);
        put_u32(v + 9, r->flags);
        put_u32(v + 13, r->parked_cnt);
        put_u64(v + 17, r->parked_bytes);
        put_u64(v + 25, (uint64_t)r->parked_since_ms);
        put_u64(v + 33, (uint64_t)r->gap_reported_ms);
        put_u64(v + 41, r->skip_from);
        put_u64(v + 49, r->skip_to);
        size_t off = AGG_FIXED;
        size_t sl = strnlen(r->state, SG_STATE_MAX - 1);
        v[off++] = (unsigned char)sl;
        memcpy(v + off, r->state, sl);
        off += sl;
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                        ? r->aggregate_len
                        : sizeof(r->aggregate) - 1;
        v[off++] = (unsigned char)(al >> 8);
        v[off++] = (unsigned char)al;
        memcpy(v + off, r->aggregate, al);
        off += al;
        return put(t, DB_AGG, k, klen, v, off, errstr, errstr_size);
}

/* ---- parked events ---------------------------------------------------- */

/* parked_at u64 | offset u64 | timestamp u64 | key_hash 32 |
 * type_len u32 | type | key_len u32 | key | value_len u32 | value |
 * headers_len u32 | headers     (len UINT32_MAX = null: pointer NULL and
 * length SIZE_MAX when read back) */

sg_err_t sg_parked_put(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       const sg_parked_rec_t *r, char *errstr,
                       size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        const void *ptrs[4] = {r->type, r->key, r->value, r->headers};
        size_t lens[4] = {r->type_len, r->key_len, r->value_len,
                          r->headers_len};
        size_t total = 24 + 32 + 16;
        for (int i = 0; i < 4; i++) {
                if (!ptrs[i] || lens[i] == SIZE_MAX)
                        lens[i] = SIZE_MAX; /* null */
                else
                        total += lens[i];
        }
        MDB_val key = {klen, k}, val = {total, NULL};
        int rc = lmdb_put(t, DB_PARKED, &key, &val, MDB_RESERVE);
        if (rc)
                return lmdb_err(rc, "parked", errstr, errstr_size);
        unsigned char *p = val.mv_data;
        put_u64(p, (uint64_t)r->parked_at_ms);
        put_u64(p + 8, (uint64_t)r->offset);
        put_u64(p + 16, (uint64_t)r->timestamp_ms);
        memcpy(p + 24, r->key_hash, 32);
        size_t off = 56;
        for (int i = 0; i < 4; i++) {
                put_u32(p + off, lens[i] == SIZE_MAX ? UINT32_MAX
                                                     : (uint32_t)lens[i]);
                off += 4;
                if (lens[i] != SIZE_MAX && lens[i]) {
                        memcpy(p + off, ptrs[i], lens[i]);
                        off += lens[i];
                }
        }
        if (t->capture)
                return capture(t, DB_PARKED, k, klen, p, total);
        return SG_OK;
}

/* A serialized header block (sg_headers_serialize): u32 count, then per
 * header u32 name length, the name and a NUL byte, u32 value length
 * (UINT32_MAX: null), the value. *cntp receives the count. */
static sg_err_t headers_check(const unsigned char *p, size_t len,
                              size_t *cntp, char *errstr,
                              size_t errstr_size) {
        rd_t r = {p, len, false};
        uint32_t cnt = rd_u32(&r);
        /* each header takes at least 9 bytes: checked before the walk */
        if (!r.truncated && cnt > r.left / 9)
                return refuse(errstr, errstr_size,
                              "parked value: header block of %zu bytes "
                              "claims %" PRIu32 " headers",
                              len, cnt);
        for (uint32_t i = 0; i < cnt && !r.truncated; i++) {
                uint32_t nl = rd_u32(&r);
                const unsigned char *name =
                    nl == UINT32_MAX ? NULL : rd_take(&r, (size_t)nl + 1);
                if (!name)
                        break;
                if (name[nl] != '\0' || memchr(name, '\0', nl))
                        return refuse(errstr, errstr_size,
                                      "parked value: header %" PRIu32
                                      "'s name is not a NUL-terminated "
                                      "string of %" PRIu32 " bytes",
                                      i, nl);
                uint32_t vl = rd_u32(&r);
                if (vl != UINT32_MAX)
                        rd_take(&r, vl);
        }
        sg_err_t err = rd_end(&r, "parked value: header block", len, errstr,
                              errstr_size);
        if (!err)
                *cntp = cnt;
        return err;
}

sg_err_t sg_parked_decode(const void *value, size_t len, sg_parked_rec_t *out,
                          char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        int64_t parked_at = rd_i64(&r), offset = rd_i64(&r),
                timestamp = rd_i64(&r);
        const unsigned char *kh = rd_take(&r, 32);
        const void *ptrs[4] = {NULL, NULL, NULL, NULL};
        size_t lens[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
        for (int i = 0; i < 4 && !r.truncated; i++) {
                uint32_t l = rd_u32(&r);
                if (l != UINT32_MAX && !r.truncated) {
                        ptrs[i] = rd_take(&r, l);
                        lens[i] = l;
                }
        }
        sg_err_t err = rd_end(&r, "parked", len, errstr, errstr_size);
        if (err)
                return err;
        /* a Kafka record's timestamp is -1 when it has none */
        if (!is_time(parked_at) || offset < 0 || timestamp < -1)
                return refuse(errstr, errstr_size,
                              "parked value: parked_at %" PRId64
                              ", offset %" PRId64 ", timestamp %" PRId64
                              " out of range",
                              parked_at, offset, timestamp);
        size_t header_cnt = 0;
        if (ptrs[3] && (err = headers_check(ptrs[3], lens[3], &header_cnt,
                                            errstr, errstr_size)))
                return err;
        out->parked_at_ms = parked_at;
        out->offset = offset;
        out->timestamp_ms = timestamp;
        memcpy(out->key_hash, kh, 32);
        out->type = ptrs[0];
        out->type_len = lens[0];
        out->key = ptrs[1];
        out->key_len = lens[1];
        out->value = ptrs[2];
        out->value_len = lens[2];
        out->headers = ptrs[3];
        out->headers_len = lens[3];
        out->header_cnt = header_cnt;
        return SG_OK;
}

static sg_err_t parked_decode(const MDB_val *v, sg_parked_rec_t *out) {
        return corrupt(sg_parked_decode(v->mv_data, v->mv_size, out, NULL, 0));
}

sg_err_t sg_parked_get(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       sg_parked_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        MDB_val v;
        sg_err_t err = get(t, DB_PARKED, k, klen, &v);
        return err ? err : parked_decode(&v, out);
}

sg_err_t sg_parked_first(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char ah[32], uint64_t *versionp,
                         sg_parked_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t plen = key2(k, tp, ah, 32, NULL, 0);
        MDB_cursor *cur;
        int rc = lmdb_cursor_open(t, DB_PARKED, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key = {plen, k}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        sg_err_t err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == plen + 8 &&
            memcmp(key.mv_data, k, plen) == 0) {
                *versionp = get_u64((const unsigned char *)key.mv_data + plen);
                err = out ? parked_decode(&val, out) : SG_OK;
        } else if (rc && rc != MDB_NOTFOUND) {
                err = SG_ERR_STORE;
        }
        mdb_cursor_close(cur);
        return err;
}

sg_err_t sg_parked_del(sg_txn_t *t, const sg_tp_t *tp,
                       const unsigned char ah[32], uint64_t version,
                       char *errstr, size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], vb[8];
        put_u64(vb, version);
        size_t klen = key2(k, tp, ah, 32, vb, 8);
        return del(t, DB_PARKED, k, klen, errstr, errstr_size);
}

/* ---- gap deadline index ----------------------------------------------- */

/* The first entry of a time index (tp | ms (BE) | agg hash) due at or before
 * @p upto_ms: the gap deadline index and the snapshot due index. */
static sg_err_t time_index_first(sg_txn_t *t, int db, const sg_tp_t *tp,
                                 int64_t upto_ms, unsigned char ah_out[32],
                                 int64_t *msp) {
        MDB_cursor *cur;
        int rc = lmdb_cursor_open(t, db, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key = {tp->len, (void *)tp->b}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        sg_err_t err = SG_ERR_NOT_FOUND;
        if (rc == 0 && key.mv_size == tp->len + 40 &&
            memcmp(key.mv_data, tp->b, tp->len) == 0) {
                const unsigned char *p = key.mv_data;
                int64_t ms = (int64_t)get_u64(p + tp->len);
                if (ms <= upto_ms) {
                        memcpy(ah_out, p + tp->len + 8, 32);
                        *msp = ms;
                        err = SG_OK;
                }
        } else if (rc && rc != MDB_NOTFOUND) {
                err = SG_ERR_STORE;
        }
        mdb_cursor_close(cur);
        return err;
}

sg_err_t sg_since_first(sg_txn_t *t, const sg_tp_t *tp, int64_t upto_ms,
                        unsigned char ah_out[32], int64_t *sincep) {
        return time_index_first(t, DB_SINCE, tp, upto_ms, ah_out, sincep);
}

sg_err_t sg_since_count(sg_txn_t *t, const sg_tp_t *tp, int64_t before_ms,
                        uint64_t max, uint64_t *countp) {
        MDB_cursor *cur;
        *countp = 0;
        int rc = lmdb_cursor_open(t, DB_SINCE, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key = {tp->len, (void *)tp->b}, val;
        rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
        while (rc == 0 && *countp < max && key.mv_size == tp->len + 40 &&
               memcmp(key.mv_data, tp->b, tp->len) == 0) {
                int64_t since = (int64_t)get_u64(
                    (const unsigned char *)key.mv_data + tp->len);
                if (since >= before_ms)
                        break;
                (*countp)++;
                rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
        }
        mdb_cursor_close(cur);
        return rc && rc != MDB_NOTFOUND ? SG_ERR_STORE : SG_OK;
}

/* ---- meta --------------------------------------------------------------- */

/* group_len u8 | group (255 bytes, zero-padded) | input_offset i64 |
 * changelog_offset i64 | clock i64 | parked_cnt u64 | parked_bytes u64 |
 * quarantined u64 | snap_in_flight u64 | snap_seq u64 (META_VLEN_8), then
 * changelog_epoch i64, then the key fingerprint: a flag byte and its parts.
 * Stores and changelogs written before either field existed lack it: a
 * missing epoch reads as -1, a missing fingerprint as none. */
#define META_VLEN_8 (1 + 255 + 8 * 8)
#define META_FP_LEN (1 + SG_META_FP_PARTS * 8)
#define META_VLEN (META_VLEN_8 + 8 + META_FP_LEN)

sg_err_t sg_meta_decode(const void *value, size_t len, sg_meta_rec_t *out,
                        char *errstr, size_t errstr_size) {
        rd_t r = {value, len, false};
        unsigned gl = rd_u8(&r);
        const unsigned char *group = rd_take(&r, 255);
        int64_t input = rd_i64(&r), changelog = rd_i64(&r),
                clock = rd_i64(&r);
        uint64_t c[5];
        for (int i = 0; i < 5; i++)
                c[i] = rd_u64(&r);
        int64_t epoch = -1;
        if (r.left == 8 || r.left == 8 + META_FP_LEN)
                epoch = rd_i64(&r);
        unsigned fp_flag = 0;
        const unsigned char *fp = NULL;
        if (r.left == META_FP_LEN) {
                fp_flag = rd_u8(&r);
                fp = rd_take(&r, SG_META_FP_PARTS * 8);
        }
        sg_err_t err = rd_end(&r, "meta", len, errstr, errstr_size);
        if (err)
                return err;
        if (memchr(group, '\0', gl))
                return refuse(errstr, errstr_size,
                              "meta value: consumer group of %u bytes with a "
                              "NUL byte",
                              gl);
        if (fp_flag > 1)
                return refuse(errstr, errstr_size,
                              "meta value: key fingerprint flag %u", fp_flag);
        if (input < -1 || changelog < -1 || epoch < -1 || !is_time(clock))
                return refuse(errstr, errstr_size,
                              "meta value: input offset %" PRId64
                              ", changelog offset %" PRId64
                              ", changelog epoch %" PRId64 ", clock %" PRId64,
                              input, changelog, epoch, clock);
        memset(out, 0, sizeof(*out));
        memcpy(out->group, group, gl);
        out->input_offset = input;
        out->changelog_offset = changelog;
        out->clock_ms = clock;
        out->parked_cnt = c[0];
        out->parked_bytes = c[1];
        out->quarantined = c[2];
        out->snap_in_flight = c[3];
        out->snap_seq = c[4];
        out->changelog_epoch = epoch;
        if (fp_flag == 1) {
                out->has_key_fp = true;
                memcpy(out->key_fp, fp, sizeof(out->key_fp));
        }
        return SG_OK;
}

sg_err_t sg_meta_get(sg_txn_t *t, const sg_tp_t *tp, sg_meta_rec_t *out) {
        MDB_val v;
        sg_err_t err = get(t, DB_META, tp->b, tp->len, &v);
        if (err)
                return err;
        return corrupt(sg_meta_decode(v.mv_data, v.mv_size, out, NULL, 0));
}

sg_err_t sg_meta_put(sg_txn_t *t, const sg_tp_t *tp, const sg_meta_rec_t *r,
                     char *errstr, size_t errstr_size) {
        unsigned char v[META_VLEN];
        memset(v, 0, sizeof(v));
        size_t gl = strnlen(r->group, 255);
        v[0] = (unsigned char)gl;
        memcpy(v + 1, r->group, gl);
        unsigned char *q = v + 256;
        put_u64(q, (uint64_t)r->input_offset);
        put_u64(q + 8, (uint64_t)r->changelog_offset);
        put_u64(q + 16, (uint64_t)r->clock_ms);
        put_u64(q + 24, r->parked_cnt);
        put_u64(q + 32, r->parked_bytes);
        put_u64(q + 40, r->quarantined);
        put_u64(q + 48, r->snap_in_flight);
        put_u64(q + 56, r->snap_seq);
        put_u64(q + 64, (uint64_t)r->changelog_epoch);
        if (r->has_key_fp) {
                q[72] = 1;
                memcpy(q + 73, r->key_fp, sizeof(r->key_fp));
        }
        return put(t, DB_META, tp->b, tp->len, v, sizeof(v), errstr,
                   errstr_size);
}

sg_err_t sg_store_partition_drop(sg_txn_t *t, const sg_tp_t *tp, char *errstr,
                                 size_t errstr_size) {
        for (int db = 0; db < DB__CNT; db++) {
                MDB_cursor *cur;
                int rc = lmdb_cursor_open(t, db, &cur);
                if (rc)
                        return lmdb_err(rc, "drop", errstr, errstr_size);
                MDB_val key = {tp->len, (void *)tp->b}, val;
                rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
                while (rc == 0 && key.mv_size >= tp->len &&
                       memcmp(key.mv_data, tp->b, tp->len) == 0) {
                        if ((rc = lmdb_cursor_del(t, cur)))
                                break;
                        rc = mdb_cursor_get(cur, &key, &val, MDB_GET_CURRENT);
                        if (rc == MDB_NOTFOUND || rc == EINVAL)
                                rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
                }
                mdb_cursor_close(cur);
                if (rc && rc != MDB_NOTFOUND)
                        return lmdb_err(rc, "drop", errstr, errstr_size);
        }
        return SG_OK;
}

/* ---- snapshot requests ------------------------------------------------ */

/* seq u64 | attempt u32 | state u8 | has_have u8 | have u64 | want u64 |
 * issued_at u64 | sent_at u64 | due u64 | agg_len u32 | agg */
#define SNAPREQ_FIXED (8 + 4 + 1 + 1 + 8 + 8 + 8 + 8 + 8 + 4)

sg_err_t sg_snapreq_decode(const void *value, size_t len,
                           sg_snapreq_rec_t *out, char *errstr,
                           size_t errstr_size) {
        rd_t r = {value, len, false};
        uint64_t seq = rd_u64(&r);
        uint32_t attempt = rd_u32(&r);
        unsigned state = rd_u8(&r), has_have = rd_u8(&r);
        uint64_t have = rd_u64(&r), want = rd_u64(&r);
        int64_t issued = rd_i64(&r), sent = rd_i64(&r), due = rd_i64(&r);
        uint32_t al = rd_u32(&r);
        const unsigned char *agg = rd_take(&r, al);
        sg_err_t err = rd_end(&r, "snapshot request", len, errstr,
                              errstr_size);
        if (err)
                return err;
        if (attempt == 0 ||
            (state != SG_SNAP_INFLIGHT && state != SG_SNAP_WAITING) ||
            has_have > 1)
                return refuse(errstr, errstr_size,
                              "snapshot request value: attempt %" PRIu32
                              ", state %u, has_have %u",
                              attempt, state, has_have);
        if (!is_time(issued) || !is_time(sent) || due <= 0 ||
            !is_deadline(due))
                return refuse(errstr, errstr_size,
                              "snapshot request value: times issued %" PRId64
                              ", sent %" PRId64 ", due %" PRId64,
                              issued, sent, due);
        if (al >= sizeof(out->aggregate))
                return refuse(errstr, errstr_size,
                              "snapshot request value: aggregate id of "
                              "%" PRIu32 " bytes (at most %zu)",
                              al, sizeof(out->aggregate) - 1);
        memset(out, 0, sizeof(*out));
        out->seq = seq;
        out->attempt = attempt;
        out->state = (uint8_t)state;
        out->has_have = has_have;
        out->have_version = have;
        out->want_version = want;
        out->issued_at_ms = issued;
        out->sent_at_ms = sent;
        out->due_ms = due;
        memcpy(out->aggregate, agg, al);
        out->aggregate_len = al;
        return SG_OK;
}

static sg_err_t snapdue_op(sg_txn_t *t, const sg_tp_t *tp, int64_t due,
                           const unsigned char ah[32], bool add, char *errstr,
                           size_t errstr_size) {
        unsigned char k[SG_TP_MAX + 64], ts[8];
        put_u64(ts, ts_key(due));
        size_t klen = key2(k, tp, ts, 8, ah, 32);
        return add ? put(t, DB_SNAPDUE, k, klen, "", 0, errstr, errstr_size)
                   : del(t, DB_SNAPDUE, k, klen, errstr, errstr_size);
}

sg_err_t sg_snapreq_get(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], sg_snapreq_rec_t *out) {
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        MDB_val v;
        sg_err_t err = get(t, DB_SNAPREQ, k, klen, &v);
        if (err)
                return err;
        return corrupt(sg_snapreq_decode(v.mv_data, v.mv_size, out, NULL, 0));
}

sg_err_t sg_snapreq_put(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], const sg_snapreq_rec_t *r,
                        int64_t old_due, char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (old_due != r->due_ms) {
                if (old_due && (err = snapdue_op(t, tp, old_due, ah, false,
                                                 errstr, errstr_size)))
                        return err;
                if ((err = snapdue_op(t, tp, r->due_ms, ah, true, errstr,
                                      errstr_size)))
                        return err;
        }
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        size_t al = r->aggregate_len < sizeof(r->aggregate)
                        ? r->aggregate_len
                        : sizeof(r->aggregate) - 1;
        unsigned char v[SNAPREQ_FIXED + sizeof(r->aggregate)];
        put_u64(v, r->seq);
        put_u32(v + 8, r->attempt);
        v[12] = r->state;
        v[13] = r->has_have ? 1 : 0;
        put_u64(v + 14, r->have_version);
        put_u64(v + 22, r->want_version);
        put_u64(v + 30, (uint64_t)r->issued_at_ms);
        put_u64(v + 38, (uint64_t)r->sent_at_ms);
        put_u64(v + 46, (uint64_t)r->due_ms);
        put_u32(v + 54, (uint32_t)al);
        memcpy(v + SNAPREQ_FIXED, r->aggregate, al);
        return put(t, DB_SNAPREQ, k, klen, v, SNAPREQ_FIXED + al, errstr,
                   errstr_size);
}

sg_err_t sg_snapreq_del(sg_txn_t *t, const sg_tp_t *tp,
                        const unsigned char ah[32], int64_t due,
                        char *errstr, size_t errstr_size) {
        sg_err_t err;
        if (due && (err = snapdue_op(t, tp, due, ah, false, errstr,
                                     errstr_size)))
                return err;
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, ah, 32, NULL, 0);
        return del(t, DB_SNAPREQ, k, klen, errstr, errstr_size);
}

sg_err_t sg_snapdue_first(sg_txn_t *t, const sg_tp_t *tp, int64_t upto_ms,
                          unsigned char ah_out[32], int64_t *duep) {
        return time_index_first(t, DB_SNAPDUE, tp, upto_ms, ah_out, duep);
}

/* ---- restore from the changelog --------------------------------------- */

_Static_assert(SG_DB_DEDUP == DB_DEDUP && SG_DB_AGG == DB_AGG &&
                   SG_DB_PARKED == DB_PARKED && SG_DB_META == DB_META &&
                   SG_DB_SNAPREQ == DB_SNAPREQ,
               "public database numbers");

/* The key suffix (after tp) of each logged database's records. */
static size_t suffix_size(int db) {
        switch (db) {
        case DB_DEDUP:
        case DB_AGG:
        case DB_SNAPREQ:
                return 32;                     /* key or aggregate hash */
        case DB_PARKED:
                return 40;                     /* aggregate hash | version */
        case DB_META:
                return 0;
        default:
                return SIZE_MAX;
        }
}

/* A stored record the change replaces could not be read. */
static sg_err_t stored_err(sg_err_t err, const char *kind, char *errstr,
                           size_t errstr_size) {
        if (err == SG_ERR_STORE)
                snprintf(errstr, errstr_size,
                         "the stored %s record the changelog record replaces "
                         "is corrupt or unreadable",
                         kind);
        return err;
}

sg_err_t sg_store_apply_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                               const void *suffix, size_t suffix_len,
                               const void *value, size_t value_len,
                               char *errstr, size_t errstr_size) {
        assert(!t->capture && "restore with change capture on");
        size_t want = suffix_size(db);
        if (want == SIZE_MAX)
                return refuse(errstr, errstr_size,
                              "changelog record for database %d: not a "
                              "database seqgate logs",
                              db);
        if (suffix_len != want)
                return refuse(errstr, errstr_size,
                              "changelog record for the %s database: key of "
                              "%zu bytes after the partition (want %zu)",
                              db_names[db], suffix_len, want);
        unsigned char k[SG_TP_MAX + 64];
        size_t klen = key2(k, tp, suffix, suffix_len, NULL, 0);
        sg_err_t err;
        /* every value is decoded in full before anything is written */
        switch (db) {
        case DB_DEDUP: {
                sg_dedup_rec_t old, nr;
                if (value && (err = sg_dedup_decode(value, value_len, &nr,
                                                    errstr, errstr_size)))
                        return err;
                err = sg_dedup_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "dedup", errstr, errstr_size);
                bool had = err == SG_OK;
                if (value)
                        return sg_dedup_put_known(t, tp, suffix, &nr,
                                                  had ? &old : NULL, errstr,
                                                  errstr_size);
                if (had) {
                        unsigned char ts[8], ek[SG_TP_MAX + 64];
                        put_u64(ts, ts_key(old.expiry_ms));
                        size_t eklen = key2(ek, tp, ts, 8, suffix, 32);
                        if ((err = del(t, DB_EXPIRY, ek, eklen, errstr,
                                       errstr_size)))
                                return err;
                }
                return del(t, DB_DEDUP, k, klen, errstr, errstr_size);
        }
        case DB_AGG: {
                sg_agg_rec_t old, nr;
                if (value && (err = sg_agg_decode(value, value_len, &nr,
                                                  errstr, errstr_size)))
                        return err;
                err = sg_agg_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "aggregate", errstr,
                                          errstr_size);
                int64_t old_since = err == SG_OK ? sg_agg_indexed_since(&old)
                                                 : 0;
                if (value)
                        return sg_agg_put(t, tp, suffix, &nr, old_since, errstr,
                                          errstr_size);
                if (old_since &&
                    (err = since_key_op(t, tp, old_since, suffix, false,
                                        errstr, errstr_size)))
                        return err;
                return del(t, DB_AGG, k, klen, errstr, errstr_size);
        }
        case DB_PARKED: {
                sg_parked_rec_t nr;
                if (!value)
                        return del(t, DB_PARKED, k, klen, errstr, errstr_size);
                if ((err = sg_parked_decode(value, value_len, &nr, errstr,
                                            errstr_size)))
                        return err;
                return put(t, DB_PARKED, k, klen, value, value_len, errstr,
                           errstr_size);
        }
        case DB_SNAPREQ: {
                sg_snapreq_rec_t old, nr;
                if (value && (err = sg_snapreq_decode(value, value_len, &nr,
                                                      errstr, errstr_size)))
                        return err;
                err = sg_snapreq_get(t, tp, suffix, &old);
                if (err && err != SG_ERR_NOT_FOUND)
                        return stored_err(err, "snapshot request", errstr,
                                          errstr_size);
                int64_t old_due = err == SG_OK ? old.due_ms : 0;
                if (value)
                        return sg_snapreq_put(t, tp, suffix, &nr, old_due,
                                              errstr, errstr_size);
                return err == SG_OK ? sg_snapreq_del(t, tp, suffix, old_due,
                                                     errstr, errstr_size)
                                    : SG_OK;
        }
        default: { /* DB_META */
                sg_meta_rec_t nr;
                if (!value)
                        return del(t, DB_META, k, klen, errstr, errstr_size);
                if ((err = sg_meta_decode(value, value_len, &nr, errstr,
                                          errstr_size)))
                        return err;
                return put(t, DB_META, k, klen, value, value_len, errstr,
                           errstr_size);
        }
        }
}

sg_err_t sg_store_get_change(sg_txn_t *t, const sg_tp_t *tp, int db,
                             const void *suffix, size_t suffix_len,
                             const void **valuep, size_t *value_lenp) {
        unsigned char k[SG_TP_MAX + 64];
        if (!db_logged(db) || suffix_len > 48)
                return SG_ERR_INVALID;
        size_t klen = key2(k, tp, suffix, suffix_len, NULL, 0);
        MDB_val v;
        sg_err_t err = get(t, db, k, klen, &v);
        if (err)
                return err;
        *valuep = v.mv_data;
        *value_lenp = v.mv_size;
        return SG_OK;
}

/* ---- read-only access for operator tools ------------------------------ */

sg_err_t sg_store_open_readonly(const char *dir, sg_store_t **storep,
                                char *errstr, size_t errstr_size) {
        sg_store_t *s = calloc(1, sizeof(*s));
        if (!s)
                return SG_ERR_NOMEM;
        const char *what = "open";
        int rc = mdb_env_create(&s->env);
        if (rc)
                goto fail;
        mdb_env_set_maxdbs(s->env, DB__CNT + 2);
        /* No map size set: LMDB takes the one recorded in the file. */
        if ((rc = mdb_env_open(s->env, dir, MDB_RDONLY | MDB_NOTLS, 0640)))
                goto fail;
        what = "open databases";
        if ((rc = open_dbs(s, false, &what)))
                goto fail;
        *storep = s;
        return SG_OK;
fail:
        if (rc == ENOENT || rc == MDB_NOTFOUND)
                snprintf(errstr, errstr_size,
                         "no seqgate store in %s (%s: %s)", dir, what,
                         rc == ENOENT ? "no data.mdb" : "database missing");
        else
                snprintf(errstr, errstr_size, "LMDB %s %s: %s", what, dir,
                         mdb_strerror(rc));
        if (s->env)
                mdb_env_close(s->env);
        free(s);
        return rc == ENOENT || rc == MDB_NOTFOUND ? SG_ERR_NOT_FOUND
                                                  : SG_ERR_STORE;
}

sg_err_t sg_meta_foreach(sg_txn_t *t, sg_meta_visit_cb *cb, void *opaque) {
        MDB_cursor *cur;
        int rc = lmdb_cursor_open(t, DB_META, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                const unsigned char *k = key.mv_data;
                /* key = tp = topic length | topic | partition (BE) */
                if (key.mv_size < 5 || key.mv_size != (size_t)k[0] + 5 ||
                    key.mv_size > SG_TP_MAX) {
                        err = SG_ERR_STORE;
                        break;
                }
                char topic[256];
                memcpy(topic, k + 1, k[0]);
                topic[k[0]] = '\0';
                int32_t partition = (int32_t)get_u32(k + 1 + k[0]);
                sg_tp_t tp;
                memcpy(tp.b, k, key.mv_size);
                tp.len = key.mv_size;
                sg_meta_rec_t rec;
                if ((err = sg_meta_get(t, &tp, &rec)))
                        break;
                if (cb(opaque, topic, partition, &rec))
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? SG_ERR_STORE : SG_OK;
}

/* Walks the keys tp | aggregate hash of database @p db (agg, snapreq) in
 * hash order, calling @p visit with each hash and value until it returns
 * non-zero (1: stop, SG_ERR_*: < 0, the walk's result). */
typedef int(agg_key_visit_fn)(void *ctx, const unsigned char ah[32],
                              const MDB_val *val);
static sg_err_t agg_keys_walk(sg_txn_t *t, int db, const sg_tp_t *tp,
                              agg_key_visit_fn *visit, void *ctx) {
        MDB_cursor *cur;
        int rc = lmdb_cursor_open(t, db, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key = {tp->len, (void *)tp->b}, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
             rc == 0 && key.mv_size >= tp->len &&
             memcmp(key.mv_data, tp->b, tp->len) == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                if (key.mv_size != tp->len + 32) {
                        err = SG_ERR_STORE;
                        break;
                }
                unsigned char ah[32];
                memcpy(ah, (const unsigned char *)key.mv_data + tp->len, 32);
                int r = visit(ctx, ah, &val);
                if (r < 0)
                        err = (sg_err_t)r;
                if (r)
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? SG_ERR_STORE : SG_OK;
}

typedef struct agg_walk {
        sg_txn_t *t;
        const sg_tp_t *tp;
        sg_agg_visit_cb *agg_cb;
        sg_snapreq_visit_cb *req_cb;
        void *opaque;
} agg_walk_t;

static int agg_visit(void *ctx, const unsigned char ah[32],
                     const MDB_val *val) {
        agg_walk_t *w = ctx;
        sg_agg_rec_t rec;
        (void)val;
        sg_err_t err = sg_agg_get(w->t, w->tp, ah, &rec);
        if (err)
                return err;
        return w->agg_cb(w->opaque, ah, &rec) ? 1 : 0;
}

static int snapreq_visit(void *ctx, const unsigned char ah[32],
                         const MDB_val *val) {
        agg_walk_t *w = ctx;
        sg_snapreq_rec_t rec;
        sg_err_t err = corrupt(
                sg_snapreq_decode(val->mv_data, val->mv_size, &rec, NULL, 0));
        if (err)
                return err;
        return w->req_cb(w->opaque, ah, &rec) ? 1 : 0;
}

sg_err_t sg_agg_foreach(sg_txn_t *t, const sg_tp_t *tp, sg_agg_visit_cb *cb,
                        void *opaque) {
        agg_walk_t w = {.t = t, .tp = tp, .agg_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_AGG, tp, agg_visit, &w);
}

sg_err_t sg_snapreq_foreach(sg_txn_t *t, const sg_tp_t *tp,
                            sg_snapreq_visit_cb *cb, void *opaque) {
        agg_walk_t w = {.t = t, .tp = tp, .req_cb = cb, .opaque = opaque};
        return agg_keys_walk(t, DB_SNAPREQ, tp, snapreq_visit, &w);
}

static int oldest_visit(void *opaque, uint64_t version,
                        const sg_parked_rec_t *rec) {
        int64_t *oldest = opaque;
        (void)version;
        if (*oldest == 0 || rec->parked_at_ms < *oldest)
                *oldest = rec->parked_at_ms;
        return 0;
}

sg_err_t sg_parked_oldest(sg_txn_t *t, const sg_tp_t *tp,
                          const unsigned char ah[32], int64_t *oldestp) {
        *oldestp = 0;
        return sg_parked_foreach(t, tp, ah, oldest_visit, oldestp);
}

sg_err_t sg_parked_foreach(sg_txn_t *t, const sg_tp_t *tp,
                           const unsigned char ah[32], sg_parked_visit_cb *cb,
                           void *opaque) {
        unsigned char k[SG_TP_MAX + 64];
        size_t plen = key2(k, tp, ah, 32, NULL, 0);
        MDB_cursor *cur;
        int rc = lmdb_cursor_open(t, DB_PARKED, &cur);
        if (rc)
                return SG_ERR_STORE;
        MDB_val key = {plen, k}, val;
        sg_err_t err = SG_OK;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
             rc == 0 && key.mv_size == plen + 8 &&
             memcmp(key.mv_data, k, plen) == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                sg_parked_rec_t rec;
                if ((err = parked_decode(&val, &rec)))
                        break;
                uint64_t version =
                    get_u64((const unsigned char *)key.mv_data + plen);
                if (cb(opaque, version, &rec))
                        break;
        }
        mdb_cursor_close(cur);
        if (err)
                return err;
        return rc && rc != MDB_NOTFOUND ? SG_ERR_STORE : SG_OK;
}

sg_err_t sg_store_foreach(sg_txn_t *t, sg_store_visit_cb *cb, void *opaque,
                          char *errstr, size_t errstr_size) {
        for (int db = 0; db < DB__CNT; db++) {
                MDB_cursor *cur;
                int rc = lmdb_cursor_open(t, db, &cur);
                if (rc)
                        return lmdb_err(rc, db_names[db], errstr, errstr_size);
                MDB_val key, val;
                bool stopped = false;
                for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
                     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                        if (cb(opaque, db, key.mv_data, key.mv_size,
                               val.mv_data, val.mv_size)) {
                                stopped = true;
                                break;
                        }
                }
                mdb_cursor_close(cur);
                if (stopped)
                        return SG_OK;
                if (rc != MDB_NOTFOUND)
                        return lmdb_err(rc, db_names[db], errstr, errstr_size);
        }
        return SG_OK;
}

/* ---- headers ---------------------------------------------------------- */

sg_err_t sg_headers_serialize(const sg_header_t *h, size_t cnt, void **bufp,
                              size_t *lenp) {
        size_t total = 4;
        for (size_t i = 0; i < cnt; i++)
                total += 4 + strlen(h[i].name) + 1 + 4 +
                         (h[i].value ? h[i].value_len : 0);
        unsigned char *p = malloc(total), *q;
        if (!p)
                return SG_ERR_NOMEM;
        q = p;
        put_u32(q, (uint32_t)cnt);
        q += 4;
        for (size_t i = 0; i < cnt; i++) {
                size_t nl = strlen(h[i].name);
                put_u32(q, (uint32_t)nl);
                q += 4;
                memcpy(q, h[i].name, nl + 1);
                q += nl + 1;
                if (!h[i].value) {
                        put_u32(q, UINT32_MAX);
                        q += 4;
                } else {
                        put_u32(q, (uint32_t)h[i].value_len);
                        q += 4;
                        memcpy(q, h[i].value, h[i].value_len);
                        q += h[i].value_len;
                }
        }
        *bufp = p;
        *lenp = total;
        return SG_OK;
}

ssize_t sg_headers_parse(const void *buf, size_t len, sg_header_t *out,
                         size_t max) {
        const unsigned char *p = buf, *end = p + len;
        if (len < 4)
                return len == 0 ? 0 : -1;
        uint32_t cnt = get_u32(p);
        p += 4;
        if (cnt > max)
                return -1;
        for (uint32_t i = 0; i < cnt; i++) {
                if (end - p < 4)
                        return -1;
                uint32_t nl = get_u32(p);
                p += 4;
                if ((size_t)(end - p) < (size_t)nl + 1 + 4 || p[nl] != '\0')
                        return -1;
                out[i].name = (const char *)p;
                p += nl + 1;
                uint32_t vl = get_u32(p);
                p += 4;
                if (vl == UINT32_MAX) {
                        out[i].value = NULL;
                        out[i].value_len = 0;
                        continue;
                }
                if ((size_t)(end - p) < vl)
                        return -1;
                out[i].value = p;
                out[i].value_len = vl;
                p += vl;
        }
        return (ssize_t)cnt;
}
