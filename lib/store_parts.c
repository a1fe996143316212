/*
 * store_parts.c — a partition's LMDB databases (store.h layout, store
 * format 3): their names, and the table of their handles.
 *
 * LMDB's rules for handles (mdb_dbi_open): a handle opened in a
 * transaction is the transaction's own until it commits, and is closed
 * when it aborts; only one transaction at a time may open handles. So the
 * writer (the store's thread, in its write transactions) is the only one
 * that opens handles of the writer's store: it keeps them in the table,
 * marked pending until the transaction commits and forgotten if it
 * aborts (sg_pdb_txn_end). Any other transaction (a reader of another
 * thread, a read transaction of the store's thread) reads through a copy
 * of the partition's entry without the pending handles; a handle the
 * writer committed after the reader's snapshot began names a database the
 * snapshot does not have, which LMDB answers with EINVAL or MDB_NOTFOUND
 * (lmdb_no_db: nothing there). A read-only store (operator tools: no
 * writer in the process) opens the handles it needs in each read
 * transaction; LMDB closes them when it ends.
 *
 * Every handle of the writer's store stays open until the store closes:
 * segment slots are emptied (mdb_drop without delete) and reused, never
 * deleted, so that a reader's handle never changes meaning under it.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>

void sg_pdb_name(const unsigned char tp[SG_TP_LEN], char kind, int i, char *out,
                 size_t size) {
        static const char hx[] = "0123456789abcdef";
        char hex[2 * SG_TP_LEN + 1];
        for (int j = 0; j < SG_TP_LEN; j++) {
                hex[2 * j] = hx[tp[j] >> 4];
                hex[2 * j + 1] = hx[tp[j] & 15];
        }
        hex[2 * SG_TP_LEN] = '\0';
        if (kind == 'd')
                snprintf(out, size, "p%s.d%d", hex, i);
        else
                snprintf(out, size, "p%s.%c", hex, kind);
}

/* The table: open addressing over pointers to entries (an entry never
 * moves, so the writer may hold one across calls), keyed by the prefix. */
static size_t tp_slot(const unsigned char tp[SG_TP_LEN], size_t cap) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (int i = 0; i < SG_TP_LEN; i++)
                h = (h ^ tp[i]) * 0x100000001b3ull;
        return (size_t)(h ^ (h >> 31)) & (cap - 1);
}

static pdb_t *table_find(const sg_store_t *s, const unsigned char *tp) {
        if (!s->pdb_cap)
                return NULL;
        pdb_t **tab = s->pdbs;
        for (size_t i = tp_slot(tp, s->pdb_cap);;
             i = (i + 1) & (s->pdb_cap - 1)) {
                if (!tab[i])
                        return NULL;
                if (!memcmp(tab[i]->tp, tp, SG_TP_LEN))
                        return tab[i];
        }
}

/* Adds an entry for @p tp (the caller holds pdb_lock exclusive). */
static pdb_t *table_add(sg_store_t *s, const unsigned char *tp) {
        if (2 * (s->pdb_cnt + 1) > s->pdb_cap) {
                size_t cap = s->pdb_cap ? 2 * s->pdb_cap : 64;
                pdb_t **nt = calloc(cap, sizeof(*nt));
                if (!nt)
                        return NULL;
                pdb_t **old = s->pdbs;
                for (size_t i = 0; i < s->pdb_cap; i++) {
                        if (!old[i])
                                continue;
                        size_t j = tp_slot(old[i]->tp, cap);
                        while (nt[j])
                                j = (j + 1) & (cap - 1);
                        nt[j] = old[i];
                }
                free(old);
                s->pdbs = nt;
                s->pdb_cap = cap;
        }
        pdb_t *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        memcpy(p->tp, tp, SG_TP_LEN);
        p->used = true;
        pdb_t **tab = s->pdbs;
        size_t j = tp_slot(tp, s->pdb_cap);
        while (tab[j])
                j = (j + 1) & (s->pdb_cap - 1);
        tab[j] = p;
        s->pdb_cnt++;
        return p;
}

void sg_pdb_free(sg_store_t *s) {
        pdb_t **tab = s->pdbs;
        for (size_t i = 0; i < s->pdb_cap; i++)
                if (tab[i]) {
                        sg_segtab_free(tab[i]->segs);
                        free(tab[i]);
                }
        free(tab);
        s->pdbs = NULL;
        s->pdb_last = NULL;
        s->pdb_cap = s->pdb_cnt = 0;
        if (s->pdb_lock_ok)
                pthread_rwlock_destroy(&s->pdb_lock);
        s->pdb_lock_ok = false;
}

/* Opens database @p kind / @p i of @p tp in @p txn: 0 and *dbip, or an
 * LMDB code (MDB_NOTFOUND: none, and not @p create). */
static int dbi_open(MDB_txn *txn, const unsigned char *tp, char kind, int i,
                    bool create, MDB_dbi *dbip) {
        char name[64];
        sg_pdb_name(tp, kind, i, name, sizeof(name));
        return mdb_dbi_open(txn, name, create ? MDB_CREATE : 0, dbip);
}

/* Opens the writer's handle @p bit of @p p into *dbip in @p t (pending
 * until the commit). */
static int writer_open(sg_txn_t *t, pdb_t *p, char kind, int i, uint64_t bit,
                       bool create, MDB_dbi *dbip) {
        MDB_dbi dbi;
        int rc = dbi_open(t->txn, p->tp, kind, i, create, &dbi);
        if (rc)
                return rc;
        sg_store_t *s = t->store;
        pthread_rwlock_wrlock(&s->pdb_lock);
        *dbip = dbi;
        p->pending |= bit;
        pthread_rwlock_unlock(&s->pdb_lock);
        return 0;
}

/* A read transaction's copy of @p tp's entry (see the top). */
static pdb_t *reader_view(sg_txn_t *t, const sg_tp_t *tp, int *rcp) {
        for (size_t i = 0; i < t->rpdb_cnt; i++)
                if (!memcmp(t->rpdbs[i]->tp, tp->b, SG_TP_LEN))
                        return t->rpdbs[i];
        sg_store_t *s = t->store;
        pdb_t v;
        memset(&v, 0, sizeof(v));
        memcpy(v.tp, tp->b, SG_TP_LEN);
        if (s->readonly) {
                int rc = dbi_open(t->txn, tp->b, 'a', 0, false, &v.agg);
                if (!rc)
                        rc = dbi_open(t->txn, tp->b, 'x', 0, false, &v.aux);
                if (rc == MDB_NOTFOUND)
                        return NULL;
                if (rc) {
                        *rcp = rc;
                        return NULL;
                }
                /* slots are opened when first read (sg_pdb_slot) */
        } else {
                pthread_rwlock_rdlock(&s->pdb_lock);
                const pdb_t *p = table_find(s, tp->b);
                if (p) {
                        v.agg = (p->pending & PDB_AGG) ? 0 : p->agg;
                        v.aux = (p->pending & PDB_AUX) ? 0 : p->aux;
                        for (int i = 0; i < SEG_SLOTS; i++)
                                v.slot[i] = (p->pending & PDB_SLOT(i))
                                                    ? 0
                                                    : p->slot[i];
                }
                pthread_rwlock_unlock(&s->pdb_lock);
                if (!p || (!v.agg && !v.aux))
                        return NULL;
        }
        pdb_t *c = malloc(sizeof(*c));
        if (c && t->rpdb_cnt == t->rpdb_size) {
                size_t n = t->rpdb_size ? 2 * t->rpdb_size : 4;
                pdb_t **np = realloc(t->rpdbs, n * sizeof(*np));
                if (np) {
                        t->rpdbs = np;
                        t->rpdb_size = n;
                }
        }
        if (!c || t->rpdb_cnt == t->rpdb_size) {
                free(c);
                *rcp = ENOMEM;
                return NULL;
        }
        v.used = true;
        *c = v;
        t->rpdbs[t->rpdb_cnt++] = c;
        return c;
}

void sg_pdb_txn_free(sg_txn_t *t) {
        for (size_t i = 0; i < t->rpdb_cnt; i++) {
                sg_segtab_free(t->rpdbs[i]->segs);
                free(t->rpdbs[i]);
        }
        free(t->rpdbs);
        t->rpdbs = NULL;
        t->rpdb_cnt = t->rpdb_size = 0;
}

pdb_t *sg_pdb_get(sg_txn_t *t, const sg_tp_t *tp, bool create, int *rcp) {
        *rcp = 0;
        if (!t->write)
                return reader_view(t, tp, rcp);
        sg_store_t *s = t->store;
        pdb_t *p = s->pdb_last && !memcmp(s->pdb_last->tp, tp->b, SG_TP_LEN)
                           ? s->pdb_last
                           : table_find(s, tp->b);
        if (!p) {
                /* a partition not opened yet: with create, or when its
                 * databases exist (written before, without a meta) */
                MDB_dbi probe;
                int rc =
                        create ? 0
                               : dbi_open(t->txn, tp->b, 'x', 0, false, &probe);
                if (rc) {
                        if (rc != MDB_NOTFOUND)
                                *rcp = rc;
                        return NULL;
                }
                pthread_rwlock_wrlock(&s->pdb_lock);
                p = table_add(s, tp->b);
                if (p && !create) {
                        p->aux = probe;
                        p->pending |= PDB_AUX;
                }
                pthread_rwlock_unlock(&s->pdb_lock);
                if (!p) {
                        *rcp = ENOMEM;
                        return NULL;
                }
        }
        int rc = 0;
        if (!p->aux)
                rc = writer_open(t, p, 'x', 0, PDB_AUX, create, &p->aux);
        if (!rc && !p->agg)
                rc = writer_open(t, p, 'a', 0, PDB_AGG, create, &p->agg);
        if (rc && rc != MDB_NOTFOUND) {
                *rcp = rc;
                return NULL;
        }
        if (!p->aux && !p->agg)
                return NULL;
        s->pdb_last = p;
        return p;
}

MDB_dbi sg_pdb_slot(sg_txn_t *t, pdb_t *p, int i, bool create, int *rcp) {
        *rcp = 0;
        assert(i >= 0 && i < SEG_SLOTS);
        if (p->slot[i])
                return p->slot[i];
        int rc;
        if (t->write) {
                rc = writer_open(t, p, 'd', i, PDB_SLOT(i), create,
                                 &p->slot[i]);
        } else if (t->store->readonly) {
                rc = dbi_open(t->txn, p->tp, 'd', i, false, &p->slot[i]);
        } else {
                return 0; /* not in the reader's copy: none it can read */
        }
        if (rc && rc != MDB_NOTFOUND)
                *rcp = rc;
        return rc ? 0 : p->slot[i];
}

void sg_pdb_txn_end(sg_store_t *s, bool committed) {
        pdb_t **tab = s->pdbs;
        bool locked = false;
        for (size_t i = 0; i < s->pdb_cap; i++) {
                pdb_t *p = tab[i];
                if (!p)
                        continue;
                if (!committed) {
                        sg_segtab_free(p->segs);
                        p->segs = NULL;
                }
                if (!p->pending)
                        continue;
                if (!locked) {
                        pthread_rwlock_wrlock(&s->pdb_lock);
                        locked = true;
                }
                if (!committed) { /* LMDB closed them */
                        if (p->pending & PDB_AGG)
                                p->agg = 0;
                        if (p->pending & PDB_AUX)
                                p->aux = 0;
                        for (int j = 0; j < SEG_SLOTS; j++)
                                if (p->pending & PDB_SLOT(j))
                                        p->slot[j] = 0;
                }
                p->pending = 0;
        }
        if (locked)
                pthread_rwlock_unlock(&s->pdb_lock);
}

static int unhex(int c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
}

bool sg_pdb_name_parse(const void *name, size_t len,
                       unsigned char tp[SG_TP_LEN]) {
        const char *n = name;
        if (len != 1 + 2 * SG_TP_LEN + 2 || n[0] != 'p' ||
            memcmp(n + 1 + 2 * SG_TP_LEN, ".x", 2) != 0)
                return false;
        for (int i = 0; i < SG_TP_LEN; i++) {
                int h = unhex(n[1 + 2 * i]), l = unhex(n[2 + 2 * i]);
                if (h < 0 || l < 0)
                        return false;
                tp[i] = (unsigned char)(h * 16 + l);
        }
        return true;
}

int sg_pdb_open_all(sg_store_t *s, MDB_txn *txn) {
        MDB_cursor *cur;
        int rc = mdb_cursor_open(txn, 1 /* the main database */, &cur);
        if (rc)
                return rc;
        MDB_val key = {1, (void *)"p"}, val;
        for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE); rc == 0;
             rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
                unsigned char tp[SG_TP_LEN];
                if (!key.mv_size || ((const char *)key.mv_data)[0] != 'p')
                        break;
                if (!sg_pdb_name_parse(key.mv_data, key.mv_size, tp) ||
                    table_find(s, tp))
                        continue;
                pthread_rwlock_wrlock(&s->pdb_lock);
                pdb_t *p = table_add(s, tp);
                pthread_rwlock_unlock(&s->pdb_lock);
                if (!p) {
                        rc = ENOMEM;
                        break;
                }
                /* committed with @p txn: not pending */
                int r2 = dbi_open(txn, p->tp, 'a', 0, false, &p->agg);
                if (!r2 || r2 == MDB_NOTFOUND)
                        r2 = dbi_open(txn, p->tp, 'x', 0, false, &p->aux);
                for (int i = 0; (!r2 || r2 == MDB_NOTFOUND) && i < SEG_SLOTS;
                     i++)
                        r2 = dbi_open(txn, p->tp, 'd', i, false, &p->slot[i]);
                if (r2 && r2 != MDB_NOTFOUND) {
                        rc = r2;
                        break;
                }
        }
        mdb_cursor_close(cur);
        return rc == MDB_NOTFOUND ? 0 : rc;
}
