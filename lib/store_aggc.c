/*
 * store_aggc.c — the writer's aggregate cache (store.h "Aggregate cache",
 * semantics §8 "The aggregate cache"): copies of aggregate records in
 * memory, so that a hot aggregate's read is a hash-table hit instead of a
 * walk down the aggregate database's B-tree, and the writes of a
 * checkpoint's batches are written back once, in key order, through one
 * cursor, at the commit — or at the end of a batch's processing when the
 * map's room might not take them at the commit (sg_txn_settle, called by
 * the engine before the batch's changelog records are produced and Kafka
 * holds the batch: a full map then fails the batch, which the loop can
 * abort and run again, rather than the checkpoint's commit after Kafka
 * took the batch, which would cost a restore of the changelog's tail).
 *
 * Bounded: at most s->aggc_max entries (fixed-size slots: a value longer
 * than AGGC_VMAX bytes is not kept, its key reads through to LMDB), in one
 * allocation made at the first write transaction: anonymous memory
 * independent of the number of keys in the store.
 *
 * What it may hold, and why that is safe:
 *   - Only the writer's transactions use it (t->write): readers of other
 *     threads and read-only transactions read LMDB's committed state, never
 *     the cache (it has no lock).
 *   - Outside a write transaction every entry equals the committed value
 *     of its key (or its absence): a commit writes back whatever is still
 *     dirty first (sg_txn_settle may have done it at a batch's end), a
 *     failed commit or an abort —
 *     which takes every batch since the last checkpoint — drops the whole
 *     cache (sg_aggc_clear): nothing survives an abort that LMDB did not
 *     keep, clean entries of batches written back but never committed
 *     included.
 *   - Across transactions this relies on the writer being the only one:
 *     the data directory's flock (sg_store_open) keeps every other writing
 *     process out while the store is open, and operator tools open it
 *     read-only (sg_store_open_readonly, which never uses the cache).
 *   - Within a transaction, every access to the aggregate database goes
 *     through this cache (sg_agg_get, agg_write, agg_restore, the
 *     changelog value lookup), or flushes it first (walks, statistics),
 *     or flushes and clears it (a restore window's cursor writes, a
 *     partition's drop).
 *   - The fault simulation and sg_txn_writes() count a cached put or
 *     delete where it is made (sg_txn_write_op), as an LMDB write; the
 *     write-back is not counted again.
 *
 * The table: open addressing over 32-bit entry indices (0 free), linear
 * probing, keyed by the partition's handle entry (which never moves,
 * store_parts.c) and the aggregate hash (SHA-256: its first 8 bytes are
 * the hash). No deletes: a deleted aggregate is an entry saying "absent".
 * When full, a read is not kept; a write flushes and empties the table (a
 * read never writes LMDB: callers may hold pointers into LMDB's pages
 * across it).
 */
#include "store_int.h"

#include <assert.h>
#include <stdlib.h>

#define AGGC_VMAX 45 /* longest value kept, bytes */

enum { E_CLEAN = 1, E_DIRTY = 2 };

typedef struct aggc_ent {
        pdb_t *p;
        unsigned char ah[SG_KEY_HASH_LEN];
        uint8_t state;   /* E_CLEAN or E_DIRTY */
        uint8_t present; /* 0: the aggregate is absent (deleted, none) */
        uint8_t big;     /* its value is too long: read LMDB */
        uint8_t listed;  /* in the dirty list */
        uint8_t vlen;
        unsigned char v[AGGC_VMAX];
} aggc_ent_t;

/* A dirty entry, with its sort key beside it, so that the sort reads no
 * entry: the hash's first 8 bytes, big-endian, which order as the bytes
 * do. Each partition's aggregate database has its own cursor, so one
 * order over all partitions is key order within each. */
typedef struct dirty {
        uint64_t k;
        uint32_t i;
} dirty_t;

/* 80 bytes an entry, + 16 of the dirty list and 8 of slots: store.h's
 * 104 */
_Static_assert(sizeof(aggc_ent_t) == 80, "aggregate cache entry");

struct aggc {
        uint32_t *slot; /* entry index + 1, 0 free */
        size_t cap;     /* slots, a power of two >= 2 * max */
        aggc_ent_t *ent;
        size_t n, max;
        dirty_t *dirty; /* entries made dirty since the last flush */
        size_t dirty_n;
        uint64_t hits, misses;
};

size_t sg_aggc_bytes(size_t entries) {
        size_t cap = 64;
        while (cap < 2 * entries)
                cap *= 2;
        return cap * sizeof(uint32_t) +
               entries * (sizeof(aggc_ent_t) + sizeof(dirty_t));
}

static aggc_t *cache_of(sg_txn_t *t) {
        sg_store_t *s = t->store;
        if (!t->write || !s->aggc_max)
                return NULL;
        if (s->aggc)
                return s->aggc;
        aggc_t *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->max = s->aggc_max;
        c->cap = 64;
        while (c->cap < 2 * c->max)
                c->cap *= 2;
        c->slot = calloc(c->cap, sizeof(*c->slot));
        /* zeroed: never read before add() fills it, but the analyzer
         * cannot see that a slot names only filled entries (and a
         * large calloc is mmap's zero pages, no cost) */
        c->ent = calloc(c->max, sizeof(*c->ent));
        c->dirty = malloc(c->max * sizeof(*c->dirty));
        if (!c->slot || !c->ent || !c->dirty) {
                free(c->slot);
                free(c->ent);
                free(c->dirty);
                free(c);
                return NULL; /* no cache: every access reads through */
        }
        s->aggc = c;
        return c;
}

void sg_aggc_free(sg_store_t *s) {
        aggc_t *c = s->aggc;
        if (!c)
                return;
        free(c->slot);
        free(c->ent);
        free(c->dirty);
        free(c);
        s->aggc = NULL;
}

void sg_aggc_clear(sg_store_t *s) {
        aggc_t *c = s->aggc;
        if (!c || (!c->n && !c->dirty_n))
                return;
        memset(c->slot, 0, c->cap * sizeof(*c->slot));
        c->n = c->dirty_n = 0;
}

static size_t ent_slot(const aggc_t *c, const pdb_t *p,
                       const unsigned char *ah) {
        uint64_t h;
        memcpy(&h, ah, 8);
        h ^= (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
        return (size_t)(h ^ (h >> 29)) & (c->cap - 1);
}

/* The entry of (@p p, @p ah), or NULL; *slotp the slot it is or would be
 * in. */
static aggc_ent_t *find(aggc_t *c, const pdb_t *p, const unsigned char *ah,
                        size_t *slotp) {
        size_t i = ent_slot(c, p, ah);
        for (;; i = (i + 1) & (c->cap - 1)) {
                uint32_t x = c->slot[i];
                if (!x) {
                        *slotp = i;
                        return NULL;
                }
                aggc_ent_t *e = &c->ent[x - 1];
                if (e->p == p && !memcmp(e->ah, ah, SG_KEY_HASH_LEN)) {
                        *slotp = i;
                        return e;
                }
        }
}

static aggc_ent_t *add(aggc_t *c, size_t slot, pdb_t *p,
                       const unsigned char *ah) {
        assert(c->n < c->max);
        aggc_ent_t *e = &c->ent[c->n++];
        c->slot[slot] = (uint32_t)c->n;
        e->p = p;
        memcpy(e->ah, ah, SG_KEY_HASH_LEN);
        e->state = E_CLEAN;
        e->present = e->big = e->listed = 0;
        e->vlen = 0;
        return e;
}

int sg_aggc_get(sg_txn_t *t, pdb_t *p, const unsigned char *ah, MDB_val *v) {
        aggc_t *c = cache_of(t);
        size_t slot;
        aggc_ent_t *e = c ? find(c, p, ah, &slot) : NULL;
        if (!e || e->big) {
                if (c)
                        c->misses++;
                return 1;
        }
        c->hits++;
        if (!e->present)
                return SG_ERR_NOT_FOUND;
        *v = (MDB_val){e->vlen, e->v};
        return SG_OK;
}

void sg_aggc_fill(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                  const MDB_val *v) {
        aggc_t *c = cache_of(t);
        size_t slot;
        if (!c)
                return;
        aggc_ent_t *e = find(c, p, ah, &slot);
        if (!e) {
                if (c->n == c->max) /* full: a read never writes back */
                        return;
                e = add(c, slot, p, ah);
        } else if (e->state == E_DIRTY) {
                return; /* (a big entry's read: it stays big) */
        }
        e->present = v != NULL;
        e->big = v && v->mv_size > AGGC_VMAX;
        e->vlen = v && !e->big ? (uint8_t)v->mv_size : 0;
        if (e->vlen)
                memcpy(e->v, v->mv_data, e->vlen);
}

static int dirty_cmp(const void *a, const void *b, void *ctx) {
        const dirty_t *x = a, *y = b;
        if (x->k != y->k)
                return x->k < y->k ? -1 : 1;
        const aggc_ent_t *ent = ctx, *ex = &ent[x->i], *ey = &ent[y->i];
        int c = memcmp(ex->ah, ey->ah, SG_KEY_HASH_LEN);
        if (c || ex->p == ey->p)
                return c;
        return (uintptr_t)ex->p < (uintptr_t)ey->p ? -1 : 1;
}

int sg_aggc_writeback(sg_txn_t *t) {
        aggc_t *c = t->write ? t->store->aggc : NULL;
        if (!c || !c->dirty_n)
                return 0;
        if (t->failed) /* the transaction is broken: it can only abort */
                return MDB_BAD_TXN;
        qsort_r(c->dirty, c->dirty_n, sizeof(*c->dirty), dirty_cmp, c->ent);
        for (size_t i = 0; i < c->dirty_n; i++) {
                aggc_ent_t *e = &c->ent[c->dirty[i].i];
                e->listed = 0;
                if (e->state != E_DIRTY)
                        continue; /* overwritten in LMDB since (big) */
                assert(e->p->agg);
                MDB_val key = {SG_KEY_HASH_LEN, e->ah};
                MDB_val val = {e->vlen, e->v};
                int rc = e->present ? sg_lmdb_put_wb(t, e->p->agg, &key, &val)
                                    : sg_lmdb_del_wb(t, e->p->agg, &key);
                if (rc && rc != MDB_NOTFOUND) {
                        t->failed = rc; /* LMDB's transaction is broken */
                        return rc;
                }
                e->state = E_CLEAN;
        }
        c->dirty_n = 0;
        return 0;
}

sg_err_t sg_aggc_flush(sg_txn_t *t) {
        int rc = sg_aggc_writeback(t);
        return rc ? sg_txn_lmdb_err(t, rc, "agg write-back", NULL, 0) : SG_OK;
}

sg_err_t sg_txn_flush(sg_txn_t *t, char *errstr, size_t errstr_size) {
        sg_err_t err = t ? sg_aggc_flush(t) : SG_OK;
        if (err)
                sg_errf(errstr, errstr_size, "%s", sg_txn_errdetail(t));
        return err;
}

/* Pages one write-back may take at worst, for sg_txn_settle: its leaf's
 * copy, and its share of the branch copies and page splits above it
 * (a 10 M-entry aggregate tree is 4 levels deep; a transaction copies
 * each branch page once, and a leaf splits once per tens of inserts). */
#define SETTLE_PAGES_PER_WRITE 4

/* Whether writing the cache's dirty entries back at the commit might not
 * fit the map's room. */
static bool settle_due(const sg_txn_t *t) {
        const aggc_t *c = t && t->write ? t->store->aggc : NULL;
        if (!c || !c->dirty_n)
                return false;
        const sg_store_t *s = t->store;
        if (t->map_before <= t->used_before || !s->psize)
                return true; /* no room known: as before, now */
        /* the deferred write-backs' worst case, in writes at the learned
         * growth per write, on top of the transaction's own (the dirty
         * entries among them): sg_txn_room_low's half of the room */
        uint64_t per = sg_store_grow_per_write(s);
        uint64_t need =
                (uint64_t)c->dirty_n * SETTLE_PAGES_PER_WRITE * s->psize;
        return sg_txn_room_low(t, (need + per - 1) / per);
}

sg_err_t sg_txn_settle(sg_txn_t *t, char *errstr, size_t errstr_size) {
        if (!t || !settle_due(t))
                return SG_OK;
        return sg_txn_flush(t, errstr, errstr_size);
}

sg_err_t sg_aggc_put(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                     const void *v, size_t n, bool *keptp) {
        *keptp = false;
        aggc_t *c = cache_of(t);
        if (!c)
                return SG_OK;
        size_t slot;
        aggc_ent_t *e = find(c, p, ah, &slot);
        if (n > AGGC_VMAX) {
                /* not kept: the caller writes LMDB, which is then the
                 * value (a dirty one of this entry is superseded) */
                if (e) {
                        e->state = E_CLEAN;
                        e->present = e->big = 1;
                        e->vlen = 0;
                }
                return SG_OK;
        }
        int rc = sg_txn_write_op(t, v ? SG_STORE_OP_PUT : SG_STORE_OP_DEL);
        if (rc)
                return sg_txn_lmdb_err(t, rc, "agg", NULL, 0);
        if (!e) {
                if (c->n == c->max) {
                        sg_err_t err = sg_aggc_flush(t);
                        if (err)
                                return err;
                        sg_aggc_clear(t->store);
                        find(c, p, ah, &slot);
                }
                e = add(c, slot, p, ah);
        }
        e->state = E_DIRTY;
        if (!e->listed) {
                e->listed = 1;
                dirty_t *d = &c->dirty[c->dirty_n++];
                d->k = 0;
                for (int b = 0; b < 8; b++)
                        d->k = (d->k << 8) | ah[b];
                d->i = (uint32_t)(e - c->ent);
        }
        e->present = v != NULL;
        e->big = 0;
        e->vlen = (uint8_t)(v ? n : 0);
        if (e->vlen)
                memcpy(e->v, v, n);
        *keptp = true;
        return SG_OK;
}

void sg_aggc_stats(const sg_store_t *s, uint64_t *hitsp, uint64_t *missesp,
                   size_t *entriesp) {
        const aggc_t *c = s->aggc;
        *hitsp = c ? c->hits : 0;
        *missesp = c ? c->misses : 0;
        *entriesp = c ? c->n : 0;
}
