/*
 * store_int.h — the internals the store's source files share (store.c,
 * store_open.c, store_codec.c, store_records.c, store_batch.c,
 * store_walk.c, store_parts.c, store_seg.c, store_seg_merge.c,
 * store_seg_restore.c); not part of the library's interface. See store.h
 * for the key layout and the contract.
 *
 * Values are encoded field by field in big-endian order (not raw structs) so
 * the on-disk format does not depend on the compiler's struct layout, and so
 * the same bytes can later travel in a changelog record.
 */
#ifndef SEQGATE_STORE_INT_H
#define SEQGATE_STORE_INT_H

#include "arena.h"
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

/* The store's kinds of state (store.h's table), numbered as the changelog
 * key's first byte and sg_store_foreach() number them (SG_DB_*). DB_EXPIRY
 * is store format 2's expiry index, which format 3 does not have (dedup
 * records expire with their segment, store_seg.c); its number stays
 * unused. */
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
/* The kinds' names, by DB_* number (store.c). */
extern const char *const sg_store_db_names[DB__CNT];

/* ---- a partition's databases (store_parts.c) --------------------------------
 *
 * Each partition has its own LMDB databases, named after its key prefix
 * (24 hex digits of sg_tp_t.b): "p<hex>.a" its aggregates, "p<hex>.x" the
 * rest of its state (parked events, snapshot requests, the since and
 * snapdue indexes, the dedup segment table), and "p<hex>.d<n>" the dedup
 * segment slots. Their handles are opened once and kept in the store's
 * partition table; a handle opened in a write transaction is PENDING until
 * that transaction commits (LMDB closes it when it aborts), and only the
 * writer uses a pending handle. */
#define SEG_SLOTS 40 /* dedup segment slots of a partition */
#define HL SG_KEY_HASH_LEN

typedef struct segtab segtab_t; /* store_seg.c */

typedef struct pdb {
        unsigned char tp[SG_TP_LEN];
        bool used;
        MDB_dbi agg, aux;        /* 0: not open (or no such database) */
        MDB_dbi slot[SEG_SLOTS]; /* 0: not open */
        /* handles opened in the open write transaction: bit 0 agg, bit 1
         * aux, bit 2 + i slot i */
        uint64_t pending;
        /* the writer's copy of the dedup segment table, NULL: not loaded
         * (store_seg.c); dropped when a write transaction aborts */
        segtab_t *segs;
} pdb_t;

#define PDB_AGG 0x1u
#define PDB_AUX 0x2u
#define PDB_SLOT(i) ((uint64_t)1 << (2 + (i)))

/* The partition's databases for @p t: NULL when the partition has none
 * (never written) and @p create is false, or on an error (*rcp the LMDB
 * code, else 0). With @p create (write transactions only) the agg and aux
 * databases are created. For a write transaction the table's entry; for
 * any other a copy in @p t without pending handles (a handle opened by a
 * later commit reads as not open: the snapshot has no such database). */
pdb_t *sg_pdb_get(sg_txn_t *t, const sg_tp_t *tp, bool create, int *rcp);
/* Segment slot @p i of @p p's partition: its handle, creating the database
 * when @p create (write transactions); 0 with *rcp = 0 when it does not
 * exist. */
MDB_dbi sg_pdb_slot(sg_txn_t *t, pdb_t *p, int i, bool create, int *rcp);
/* The end of a write transaction: pending handles kept (@p committed) or
 * forgotten, as LMDB does; an abort also drops every partition's segment
 * table copy. */
void sg_pdb_txn_end(sg_store_t *s, bool committed);
/* Opens the handles of every partition with databases (writer, at open,
 * in @p txn), so that readers of other threads find them. */
int sg_pdb_open_all(sg_store_t *s, MDB_txn *txn);
/* Frees the table (sg_store_close). */
void sg_pdb_free(sg_store_t *s);
/* Frees a transaction's copies (the end of a transaction). */
void sg_pdb_txn_free(sg_txn_t *t);
/* Frees a segment table copy (store_seg.c); NULL is a no-op. */
void sg_segtab_free(segtab_t *st);
/* store_seg_restore.c for the rest of the store: a restored dedup record of
 * key @p kh (@p rec NULL: a tombstone; @p v2key: the record's key was store
 * format 2's, rec->v2 and its tail set), not captured. */
sg_err_t sg_dedup_restore(sg_txn_t *t, const sg_tp_t *tp,
                          const unsigned char *kh, const sg_dedup_rec_t *rec,
                          bool v2key, char *errstr, size_t errstr_size);
/* A restore's filter of the dedup keys it wrote (a Bloom filter in
 * memory): a key it does not hold needs no search of the segments the
 * restore made. */
typedef struct rfilter {
        unsigned char *bits;
        uint64_t nblocks;
        bool first_set;
        uint32_t first_id; /* segments from this id on are the restore's */
} rfilter_t;
void sg_rfilter_init(rfilter_t *rf, uint64_t keys);
void sg_rfilter_free(rfilter_t *rf);
void sg_rfilter_add(rfilter_t *rf, const unsigned char *kh);
/* A restore window's dedup records (the last of each key, in key order):
 * written where they belong (store_seg_restore.c). */
typedef struct dedup_item {
        unsigned char kh[HL];
        bool tomb, v2key;
        sg_dedup_rec_t rec; /* decoded; v2 and its tail set for a format 2
                               key */
        int64_t bucket;     /* (store_seg_restore.c) */
} dedup_item_t;
sg_err_t sg_dedup_restore_many(sg_txn_t *t, const sg_tp_t *tp,
                               dedup_item_t *items, size_t n, rfilter_t *rf,
                               char *errstr, size_t errstr_size);
/* Empties every segment of @p p and its filters (the segment table is in
 * the aux database, which the caller empties). */
sg_err_t sg_seg_drop_all(sg_txn_t *t, pdb_t *p);
/* Calls @p cb for each dedup record of @p p in key order, as the changelog
 * carries it (*stoppedp: @p cb stopped the walk). */
sg_err_t sg_seg_foreach(sg_txn_t *t, pdb_t *p, sg_store_visit_cb *cb,
                        void *opaque, bool *stoppedp);
/* Tests: whether a sealed segment's filter of @p tp may hold @p kh (the
 * writer's copy; *sealedp the sealed segments with a filter). */
bool sg_seg_filter_maybe(sg_txn_t *t, const sg_tp_t *tp,
                         const unsigned char kh[32], int *sealedp);
/* Adds @p p's dedup keys and its segments' pages to *entries, *pages
 * (*psize: the page size). */
sg_err_t sg_seg_stats(sg_txn_t *t, pdb_t *p, uint64_t *entries, uint64_t *pages,
                      uint64_t *psize);
/* store_records.c for restore in windows (store_batch.c): */
/* An aux database key: kind | a [| b], into @p k; returns its length. */
size_t sg_rec_akey(unsigned char *k, int kind, const void *a, size_t alen,
                   const void *b, size_t blen);
/* Partition @p tp's databases (@p create: made when missing); NULL with
 * *errp SG_ERR_NOT_FOUND or the LMDB error. */
pdb_t *sg_rec_pdb_for(sg_txn_t *t, const sg_tp_t *tp, bool create,
                      sg_err_t *errp);
/* A stored record the change replaces could not be read: @p err, with
 * errstr saying so for SG_ERR_STORE. */
sg_err_t sg_rec_stored_err(sg_err_t err, const char *kind, char *errstr,
                           size_t errstr_size);
/* Checks a changelog record's key (@p db, @p suffix_len): *hlp the width
 * of its key's hash (store format 2's or the current one). */
sg_err_t sg_rec_key_check(int db, size_t suffix_len, int *hlp, char *errstr,
                          size_t errstr_size);
/* Whether @p name (of @p len bytes, a key of LMDB's main database) is a
 * partition's aux database, "p<24 hex>.x": then @p tp its prefix. */
bool sg_pdb_name_parse(const void *name, size_t len,
                       unsigned char tp[SG_TP_LEN]);
/* The LMDB name of database @p kind ('a', 'x', or 'd' with slot @p i) of
 * the partition with prefix @p tp, into @p out (at least 40 bytes). */
void sg_pdb_name(const unsigned char tp[SG_TP_LEN], char kind, int i, char *out,
                 size_t size);

/* Keys of the aux database ("p<hex>.x"): a kind byte, then */
#define AUX_PARKED 'p'  /* agg hash | version (BE)    → parked event */
#define AUX_SNAPREQ 'r' /* agg hash                   → snapshot request */
#define AUX_SINCE 's'   /* ms (BE) | agg hash         → (empty) */
#define AUX_SNAPDUE 't' /* ms (BE) | agg hash         → (empty) */
#define AUX_SEGHDR 'h' /*                            → segment table header */
#define AUX_SEG 'g'    /* segment id (BE u32)        → segment record */

struct sg_store {
        MDB_env *env;
        MDB_dbi meta_dbi;   /* "meta": tp → partition meta */
        MDB_dbi filter_dbi; /* "filter": tp | segment id → its filter */
        bool readonly;      /* sg_store_open_readonly */
        /* the partition table (store_parts.c): open addressing on the
         * key prefix, pdb_cap a power of two; the writer changes it under
         * pdb_lock (exclusive), other threads read it under it (shared) */
        pdb_t **pdbs;
        size_t pdb_cnt, pdb_cap;
        pdb_t *pdb_last; /* the writer's last lookup (entries never move) */
        pthread_rwlock_t pdb_lock;
        bool pdb_lock_ok;
        /* dedup segments (store_seg.c): keys an open segment takes before
         * it is sealed */
        uint64_t seg_keys;
        /* the format of the changelog records the writer's captures make
         * (sg_store_set_changelog_format): 3, or 2 for a rolling upgrade's
         * first step */
        int cl_format;
        uint64_t growth;
        int lock_fd; /* data_dir/seqgate.lock, held while open (write mode) */
        atomic_uint txns_open;   /* begun, not yet committed or aborted */
        atomic_uint writes_open; /* of which write transactions */
        atomic_int writer_tid;   /* thread holding the write txn, 0 none */
        /* readers of other threads (sg_txn_begin_reader) hold it shared
         * for their transaction's life, sg_store_grow exclusive: LMDB
         * remaps the file under every reader when the map size changes */
        pthread_rwlock_t map_lock;
        atomic_uint readers_open; /* sg_txn_begin_reader transactions */
        /* fault simulation (sg_store_fault_inject) */
        unsigned fault_ops; /* SG_STORE_OP_* mask, 0: disarmed */
        uint64_t fault_n, fault_cnt;
        int fault_rc;
        bool fault_fired;
        /* durability (store_durable.c) */
        char *dir;     /* data_dir, for the session file */
        bool deferred; /* MDB_NOSYNC: Kafka holds the durable copy */
        bool rebuilt;  /* open found an untrusted store, removed it */
        bool settle;   /* open found a deferred session of this boot:
                                 sync it once the environment is open */
        char rebuilt_why[4608];
        char boot_id[64]; /* this boot's id, "" unknown */
        /* the write-through map and its disk-space guard (store_space.c) */
        bool writemap;      /* MDB_WRITEMAP: the map is the file */
        int data_fd;        /* data.mdb (LMDB's descriptor), -1 none */
        uint64_t psize;     /* LMDB page size, bytes */
        uint64_t map_cap;   /* the configured map: map_size_bytes, grown */
        uint64_t headroom;  /* bytes kept allocated beyond the used pages */
        uint64_t alloc_end; /* data.mdb's bytes [0, alloc_end) allocated */
        /* long write transactions (sg_txn_room_low): bytes the file grew
         * per write in the commits so far, a decaying maximum; 0 none yet */
        uint64_t grow_per_write;
        /* a restore's next window (sg_store_room_want): writes to make
         * room for, 0 none */
        uint64_t room_writes;
        /* paced writeback (sg_store_writeback): the process's dirtied
         * bytes when the last write-out was started, and how many may be
         * dirtied before the next (0: not known yet) */
        uint64_t wb_at, wb_budget;
        /* the write transactions' capture arena between them: its chunks
         * kept for the next (sg_txn_begin takes it, txn_free gives it
         * back reset) */
        arena_t cap_spare;
        /* the writer's aggregate cache (store_aggc.c): at most aggc_max
         * entries (0: off), allocated at its first use */
        size_t aggc_max;
        struct aggc *aggc;
};

/* store_durable.c: the session file. Before mdb_env_open: removes a store
 * a crash of its machine may have left without its last writes (sets
 * s->rebuilt); SG_ERR_IO on a file error. */
sg_err_t sg_store_session_open(sg_store_t *s, char *errstr, size_t errstr_size);
/* After mdb_env_open: syncs what a stopped process of this boot left in
 * the page cache, then marks the session closed. */
sg_err_t sg_store_session_settle(sg_store_t *s, char *errstr,
                                 size_t errstr_size);
/* At close, before mdb_env_close: syncs a deferred store; returns whether
 * the session may be marked closed (everything reached the disk). */
bool sg_store_session_sync(sg_store_t *s);
/* At close, after mdb_env_close and the write-through map's trim (which
 * gives back the headroom's blocks, so that the marker fits on a full
 * disk): marks the session closed. */
void sg_store_session_mark_closed(sg_store_t *s);

/* store_space.c: the write-through map (semantics §6, "Disk space").
 * Whether the file system under @p dir takes MDB_WRITEMAP with the guard
 * (its overwrites need no new blocks and it has fallocate). */
bool sg_store_space_fs_ok(const char *dir);
/* After mdb_env_open with MDB_WRITEMAP, before any write: allocates the
 * whole file up to the map it sets (the used pages plus headroom, within
 * s->map_cap). SG_ERR_INVALID: the file system has no fallocate (reopen
 * without the write-through map); SG_ERR_STORE/SG_ERR_IO on an error. */
sg_err_t sg_store_space_open(sg_store_t *s, char *errstr, size_t errstr_size);
/* Before a write transaction, none open: grows the map ahead of use when
 * its headroom ran low (a failed allocation only skips the grow; an LMDB
 * error remapping is SG_ERR_STORE). Takes the map lock exclusive. */
sg_err_t sg_store_space_ahead(sg_store_t *s, char *errstr, size_t errstr_size);
/* sg_store_grow with the write-through map (map lock held exclusive). */
sg_err_t sg_store_space_grow(sg_store_t *s, char *errstr, size_t errstr_size);
/* After a write transaction committed that began with @p used_before
 * bytes in use: the headroom kept at least twice its growth. */
void sg_store_space_committed(sg_store_t *s, uint64_t used_before);
/* Bytes a write is estimated to grow the file by (sg_txn_room_low):
 * the store's learned growth per write, or a page per 8 writes before
 * anything is learned. */
uint64_t sg_store_grow_per_write(const sg_store_t *s);
/* Bytes of data.mdb in use (pages up to LMDB's last page). */
uint64_t sg_store_space_used(sg_store_t *s);
/* After mdb_env_close: data.mdb shortened to @p used bytes (the headroom
 * given back). */
void sg_store_space_trim(const sg_store_t *s, uint64_t used);

/* A captured change (changelog, semantics §6): full LMDB key, value or NULL. */
typedef struct change {
        uint8_t db;
        unsigned char *key; /* in the txn's capture chunks: key, then value */
        size_t key_len;
        unsigned char *value;
        size_t value_len;
        size_t seq;
} change_t;

struct sg_txn {
        sg_store_t *store;
        MDB_txn *txn;
        bool write;
        bool reader;          /* sg_txn_begin_reader: holds map_lock shared */
        uint64_t used_before; /* write transactions: bytes in use at begin */
        uint64_t map_before;  /* write transactions: the map size at begin */
        uint64_t writes;      /* puts and deletes made (sg_txn_writes) */
        int failed; /* simulated LMDB error that broke the txn, 0 none */
        bool capture;
        change_t *changes;
        size_t change_cnt, change_size;
        arena_t cap; /* the changes' bytes, until the transaction ends */
        /* a transaction other than the writer's: copies of the
         * partitions' handles it reads through (sg_pdb_get) */
        pdb_t **rpdbs;
        size_t rpdb_cnt, rpdb_size;
        sg_change_t *view; /* sg_txn_changes() result */
        size_t view_cnt;
        /* write transactions: a cursor per database handle (index: the
         * handle), opened at its first get or put and kept until the
         * transaction ends, when LMDB frees it (sg_lmdb_get) */
        MDB_cursor **curs;
        size_t curs_cnt;
        char errdetail[SG_TXN_ERRDETAIL_MAX]; /* sg_txn_errdetail() */
};

/* The databases whose writes are state (the others are indexes derived from
 * them, rebuilt on restore). */
static inline bool db_logged(int db) {
        return db == DB_DEDUP || db == DB_AGG || db == DB_PARKED ||
               db == DB_SNAPREQ || db == DB_META;
}

/* ---- encoding helpers ------------------------------------------------- */

static inline void put_u64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--) {
                p[i] = (unsigned char)(v & 0xff);
                v >>= 8;
        }
}
static inline uint64_t get_u64(const unsigned char *p) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = (v << 8) | p[i];
        return v;
}
static inline void put_u32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
}
static inline uint32_t get_u32(const unsigned char *p) {
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
               ((uint32_t)p[2] << 8) | p[3];
}

/* LEB128 varints (store_int.h "value formats"): writes @p v at @p p,
 * returns its length (1..10). */
static inline size_t put_varint(unsigned char *p, uint64_t v) {
        size_t n = 0;
        while (v >= 0x80) {
                p[n++] = (unsigned char)(v | 0x80);
                v >>= 7;
        }
        p[n++] = (unsigned char)v;
        return n;
}
static inline uint64_t zz_enc(int64_t v) {
        return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t zz_dec(uint64_t v) {
        return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Processing times are non-negative ms since the epoch, so a plain
 * big-endian u64 sorts them correctly. */
static inline uint64_t ts_key(int64_t ms) {
        return ms < 0 ? 0 : (uint64_t)ms;
}

/* key = tp | parts... ; returns length. buf must hold SG_TP_MAX + 64. */
static inline size_t key2(unsigned char *buf, const sg_tp_t *tp, const void *a,
                          size_t alen, const void *b, size_t blen) {
        assert(tp->len + alen + blen <= SG_TP_MAX + 64);
        memcpy(buf, tp->b, tp->len);
        if (alen) /* a may be NULL then: memcpy's arguments must not be */
                memcpy(buf + tp->len, a, alen);
        if (blen)
                memcpy(buf + tp->len + alen, b, blen);
        return tp->len + alen + blen;
}

/* A local read found a value seqgate did not write. */
static inline sg_err_t corrupt(sg_err_t err) {
        return err == SG_ERR_INVALID ? SG_ERR_STORE : err;
}

/* Sets @p t's last-error detail (sg_txn_errdetail) and returns @p err
 * (store.c). */
sg_err_t sg_txn_fail(sg_txn_t *t, sg_err_t err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* sg_lmdb_err that also sets @p t's detail (unless SG_ERR_NOT_FOUND), the
 * same text as errstr's (store.c). */
sg_err_t sg_txn_lmdb_err(sg_txn_t *t, int rc, const char *what, char *errstr,
                         size_t errstr_size);
#ifdef __clang_analyzer__
/* scan-build only: sg_txn_lmdb_err never returns SG_OK (sg_lmdb_err), which
 * the analyzer, one file at a time, does not see from its callers */
#define sg_txn_lmdb_err(...)                                                   \
        __extension__({                                                        \
                sg_err_t lmdb_err_ = (sg_txn_lmdb_err)(__VA_ARGS__);           \
                assert(lmdb_err_ != SG_OK);                                    \
                lmdb_err_;                                                     \
        })
#endif
/* A stored value's decoding (@p err, the decoder's reason @p why): a value
 * seqgate did not write is SG_ERR_STORE, with the reason as @p t's detail. */
static inline sg_err_t stored(sg_txn_t *t, sg_err_t err, const char *why) {
        return err ? sg_txn_fail(t, corrupt(err), "corrupt stored value: %s",
                                 why)
                   : SG_OK;
}

/* ---- value formats ------------------------------------------------------
 *
 * Integers are big-endian, varints LEB128 (7 bits a byte, low group first,
 * at most 10 bytes, no redundant trailing zero group), zigzag for signed
 * ones (zz). */

/* A dedup record in the changelog (sg_dedup_encode, sg_dedup_decode):
 * digest 16 (SG_DEDUP_DIGEST_LEN) | verdict u8 | first_seen u48 |
 * expiry u56 (30 bytes; SG_TIME_MAX_MS < 2^48, SG_DEADLINE_MAX_MS < 2^56),
 * where the verdict byte is verdict (low 3 bits) | DLQ reason << 3
 * (sg_reason_t; 0 unknown: records written before the reason was stored
 * hold only the verdict). Changelog values of store format 1 are 49 bytes
 * (DEDUP_VLEN_1: digest 32 | verdict u8 | first_seen i64 | expiry i64)
 * and still decode. */
#define DEDUP_VLEN (SG_DEDUP_DIGEST_LEN + 1 + 6 + 7)
#define DEDUP_VLEN_1 (32 + 1 + 8 + 8)
#define DEDUP_VERDICT_BITS 3
#define DEDUP_VERDICT_MASK 0x7u

/* A dedup record in its segment (store_seg.c), relative to the segment's
 * base time and TTL:
 *   flags u8: verdict (low 3 bits) | DS_REASON | DS_EXPIRY | DS_V2
 *   [reason u8]                       DS_REASON: the DLQ reason
 *   digest 16
 *   varint zz(first_seen - base)
 *   [varint zz(expiry - first_seen - ttl)]   DS_EXPIRY, else the expiry
 *                                            is first_seen + ttl
 *   [tail 16]                         DS_V2: the changelog may hold the key
 *                                     under its 32-byte hash (store format
 *                                     2), whose last 16 bytes these are
 * 20 bytes for a record recorded with the segment's TTL. */
#define DS_REASON 0x08u
#define DS_EXPIRY 0x10u
#define DS_V2 0x20u
#define DEDUP_SVLEN_MAX (2 + SG_DEDUP_DIGEST_LEN + 10 + 10 + 16)

/* An aggregate (the same bytes in the store and, in store format 3, the
 * changelog), every field but the first optional:
 *   a u8: 0x80 | AG_LAST | AG_STATE | AG_EPOCH | AG_MORE
 *   [b u8]                            AG_MORE: AB_* bits
 *   [varint last]                     AG_LAST (has_last)
 *   [state_len u8 | state]            AG_STATE (a state other than "")
 *   [varint epoch]                    AG_EPOCH (has_epoch)
 *   [varint flags]                    AB_FLAGS (flags other than 0)
 *   [varint parked_cnt | varint parked_bytes | varint parked_since]
 *                                     AB_PARKED (parked_cnt other than 0)
 *   [varint gap_reported]             AB_GAPREP
 *   [varint skip_from | varint skip_to - skip_from]   AB_SKIP
 *   [varint agg_len | agg]            AB_ID: the aggregate id, kept while
 *                                     something needs it without the
 *                                     event (parked events, a quarantine,
 *                                     a snapshot request): agg_id_kept()
 *   [tail 16]                         AB_V2 (as DS_V2)
 * 2 to 4 bytes for an idle aggregate without a state machine. A first
 * byte of 0 or 1 is store format 2's value (AGG_FIXED below), which
 * still decodes. */
#define AG_TAG 0x80u
#define AG_LAST 0x01u
#define AG_STATE 0x02u
#define AG_EPOCH 0x04u
#define AG_MORE 0x08u
#define AB_FLAGS 0x01u
#define AB_PARKED 0x02u
#define AB_GAPREP 0x04u
#define AB_SKIP 0x08u
#define AB_ID 0x10u
#define AB_V2 0x20u
#define AGG_VMAX                                                               \
        (2 + 10 + 1 + SG_STATE_MAX + 10 + 10 + 30 + 10 + 20 + 10 + 1025 + 16)

/* Store format 2's aggregate value: has_last u8 | last u64 | flags u32 |
 * parked_cnt u32 | parked_bytes u64 | since i64 | gap_reported i64 |
 * skip_from u64 | skip_to u64 | state_len u8 | state | agg_len u16 | agg
 * [| epoch u64: only when the aggregate has one, semantics §4b; older
 * values end before it] */
#define AGG_FIXED (1 + 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8)

/* Whether an aggregate's value keeps its id (AB_ID). */
static inline bool agg_id_kept(const sg_agg_rec_t *r) {
        return r->parked_cnt || r->flags || r->skip_from;
}

/* A parked event: [0x03 |] parked_at u64 | offset u64 | timestamp u64 |
 * key_hash | type_len u32 | type | key_len u32 | key | value_len u32 |
 * value | headers_len u32 | headers     (len UINT32_MAX = null: pointer
 * NULL and length SIZE_MAX when read back) [| epoch u64: parked under an
 * epoch, semantics §4b; older values end before it]. The key hash is 16
 * bytes after the tag byte 0x03 (store format 3), 32 without it (store
 * format 2, whose first byte, parked_at's highest, is 0). */
#define PARKED_TAG 0x03u

/* group_len u8 | group (255 bytes, zero-padded) | input_offset i64 |
 * changelog_offset i64 | clock i64 | parked_cnt u64 | parked_bytes u64 |
 * quarantined u64 | snap_in_flight u64 | snap_seq u64 (META_VLEN_8), then
 * changelog_epoch i64, then the key fingerprint: a flag byte and its parts.
 * Stores and changelogs written before either field existed lack it: a
 * missing epoch reads as -1, a missing fingerprint as none. Store format 2
 * appends topic_len u8 | topic (the name the key prefix hashes; absent in
 * earlier changelog values, which restore re-encodes with it), then the
 * changelog id: a flag byte (1) | id (16) | its offset i64 (META_ID_LEN;
 * left out when there is none, in values written before it existed, and
 * always in the changelog's copy: sg_meta_put). */
#define META_VLEN_8 (1 + 255 + 8 * 8)
#define META_FP_LEN (1 + SG_META_FP_PARTS * 8)
#define META_VLEN (META_VLEN_8 + 8 + META_FP_LEN)
#define META_ID_LEN (1 + SG_CHANGELOG_ID_LEN + 8)

/* seq u64 | attempt u32 | state u8 | has_have u8 | have u64 | want u64 |
 * issued_at u64 | sent_at u64 | due u64 | agg_len u32 | agg */
#define SNAPREQ_FIXED (8 + 4 + 1 + 1 + 8 + 8 + 8 + 8 + 8 + 4)

/* ---- shared by the store's files ---------------------------------------- */

/* A dedup record in a segment of base @p base_ms and TTL @p ttl_ms
 * (DS_* layout above, store_codec.c): encoded into @p out (at least
 * DEDUP_SVLEN_MAX bytes), its length returned; decoded, checked as the
 * changelog's decoders check (SG_ERR_INVALID with the reason). */
size_t sg_dedup_seg_encode(const sg_dedup_rec_t *rec, int64_t base_ms,
                           int64_t ttl_ms, unsigned char *out);
sg_err_t sg_dedup_seg_decode(const void *value, size_t len, int64_t base_ms,
                             int64_t ttl_ms, sg_dedup_rec_t *out, char *errstr,
                             size_t errstr_size);
/* Store format 2's aggregate value (AGG_FIXED layout), for a changelog of
 * format 2 (the rolling upgrade's first step); the length returned. */
size_t sg_agg_encode_v2(const sg_agg_rec_t *rec,
                        unsigned char out[SG_AGG_VALUE_MAX]);
/* The value of a parked event (PARKED_TAG layout): its length for @p r
 * with a key hash of @p hl bytes (SG_KEY_HASH_LEN: format 3, SG_KEY_HASH_LEN_2:
 * format 2), and the encoding into @p out of that length. */
size_t sg_parked_len(const sg_parked_rec_t *r, size_t hl);
void sg_parked_encode(const sg_parked_rec_t *r, size_t hl, unsigned char *out);
/* A snapshot request's value (SNAPREQ_FIXED layout). */
size_t sg_snapreq_encode(const sg_snapreq_rec_t *r,
                         unsigned char out[SNAPREQ_FIXED + 1025]);

/* An LMDB error @p rc of operation @p what as an sg_err_t (MDB_MAP_FULL →
 * SG_ERR_MAP_FULL, MDB_NOTFOUND → SG_ERR_NOT_FOUND, else SG_ERR_STORE),
 * the detail in errstr (may be NULL). store.c. */
sg_err_t sg_lmdb_err(int rc, const char *what, char *errstr,
                     size_t errstr_size);
/* The LMDB calls of a transaction, with fault simulation (store.c); @p dbi
 * a handle of sg_pdb_get / sg_pdb_slot or the store's shared ones. */
int sg_lmdb_put(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val,
                unsigned flags);
int sg_lmdb_del(sg_txn_t *t, MDB_dbi dbi, MDB_val *key);
int sg_lmdb_get(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val);
int sg_lmdb_cursor_put(sg_txn_t *t, MDB_cursor *cur, MDB_val *key, MDB_val *val,
                       unsigned flags);
int sg_lmdb_cursor_del(sg_txn_t *t, MDB_cursor *cur);
int sg_lmdb_cursor_open(sg_txn_t *t, MDB_dbi dbi, MDB_cursor **curp);
/* Empties database @p dbi (mdb_drop without deleting it: its handle stays
 * valid); a write operation of the fault simulation. */
int sg_lmdb_drop(sg_txn_t *t, MDB_dbi dbi);
/* Records a change of kind @p db (DB_*) of the store key @p k (the
 * partition's prefix, then the changelog key's suffix) for the changelog
 * when capture is on (store.c); @p v NULL: a tombstone. */
sg_err_t sg_change_capture(sg_txn_t *t, int db, const void *k, size_t klen,
                           const void *v, size_t vlen);
/* ---- the writer's aggregate cache (store_aggc.c) ----------------------
 *
 * Used by write transactions only (a reader's calls: a miss, no-ops). */
typedef struct aggc aggc_t;
/* Aggregate @p ah of partition @p p from the cache: SG_OK (*v points into
 * the cache until its next change), SG_ERR_NOT_FOUND (known absent), or 1:
 * not cached, read LMDB (then sg_aggc_fill). */
int sg_aggc_get(sg_txn_t *t, pdb_t *p, const unsigned char *ah, MDB_val *v);
/* Keeps what LMDB holds for @p ah after a miss (@p v NULL: absent), if
 * there is room. Never writes LMDB. */
void sg_aggc_fill(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                  const MDB_val *v);
/* Writes @p ah's value @p v (@p n bytes; NULL: a delete) into the cache,
 * counted as an LMDB write (fault simulation, sg_txn_writes): *keptp true.
 * *keptp false: not kept (no cache, or the value is too long): the caller
 * writes LMDB itself. May flush (a full cache). */
sg_err_t sg_aggc_put(sg_txn_t *t, pdb_t *p, const unsigned char *ah,
                     const void *v, size_t n, bool *keptp);
/* Writes every dirty entry back to LMDB in key order (before a commit, a
 * walk of an aggregate database, a write that bypasses the cache). An
 * error breaks the transaction (it can only abort). */
sg_err_t sg_aggc_flush(sg_txn_t *t);
/* sg_aggc_flush's work: 0 or the LMDB error (t->failed set). */
int sg_aggc_writeback(sg_txn_t *t);
/* Forgets every entry, dirty ones included (an abort; after a flush, a
 * write that bypasses the cache). */
void sg_aggc_clear(sg_store_t *s);
void sg_aggc_free(sg_store_t *s);
/* Counts an LMDB write op of @p t for the fault simulation (SG_STORE_OP_*):
 * 0, or the simulated LMDB error (the transaction is then broken). */
int sg_txn_write_op(sg_txn_t *t, unsigned op);
/* A put and a delete of a write counted already (sg_txn_write_op): the
 * cache's write-back, through the transaction's cursor of @p dbi. */
int sg_lmdb_put_wb(sg_txn_t *t, MDB_dbi dbi, MDB_val *key, MDB_val *val);
int sg_lmdb_del_wb(sg_txn_t *t, MDB_dbi dbi, MDB_val *key);

/* Writes, reads and deletes one key of database @p dbi (store.c), with
 * errors worded for kind @p db. Nothing is captured. sg_db_del of an absent
 * key is SG_OK; sg_db_get of one SG_ERR_NOT_FOUND. */
sg_err_t sg_db_put(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   const void *v, size_t vlen, char *errstr,
                   size_t errstr_size);
sg_err_t sg_db_get(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   MDB_val *val);
sg_err_t sg_db_del(sg_txn_t *t, int db, MDB_dbi dbi, const void *k, size_t klen,
                   char *errstr, size_t errstr_size);
/* The last 16 bytes of a 32-byte hash @p h when it has them (not all 0:
 * the callers pass 0 where they only know the key's 16), else NULL. */
static inline const unsigned char *hash_tail(const unsigned char *h) {
        static const unsigned char zero[16];
        return memcmp(h + SG_KEY_HASH_LEN, zero, 16) ? h + SG_KEY_HASH_LEN
                                                     : NULL;
}

/* An absent database of a transaction other than the writer's (created
 * after its snapshot): LMDB's answers for it, read as "nothing there". */
static inline bool lmdb_no_db(int rc) {
        return rc == EINVAL || rc == MDB_BAD_DBI || rc == MDB_NOTFOUND;
}
/* The LMDB name of database @p db (DB_*). */
static inline const char *db_name(int db) {
        return sg_store_db_names[db];
}
/* Formats why a value or changelog record is refused into errstr (may be
 * NULL); returns SG_ERR_INVALID. */
static inline sg_err_t refuse(char *errstr, size_t errstr_size, const char *fmt,
                              ...) __attribute__((format(printf, 3, 4)));
static inline sg_err_t refuse(char *errstr, size_t errstr_size, const char *fmt,
                              ...) {
        va_list ap;
        va_start(ap, fmt);
        sg_verrf(errstr, errstr_size, fmt, ap);
        va_end(ap);
        return SG_ERR_INVALID;
}

/* The value was read whole: neither truncated nor followed by more bytes. */

static inline sg_err_t parked_decode(sg_txn_t *t, const MDB_val *v,
                                     sg_parked_rec_t *out) {
        char why[160];
        return stored(
                t,
                sg_parked_decode(v->mv_data, v->mv_size, out, why, sizeof(why)),
                why);
}

#endif /* SEQGATE_STORE_INT_H */
