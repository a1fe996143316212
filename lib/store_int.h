/*
 * store_int.h — the internals the store's source files share (store.c,
 * store_codec.c, store_records.c, store_walk.c); not part of the library's
 * interface. See store.h for the key layout and the contract.
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
#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

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
/* The databases' LMDB names, by DB_* number (store.c). */
extern const char *const sg_store_db_names[DB__CNT];

struct sg_store {
        MDB_env *env;
        MDB_dbi dbi[DB__CNT];
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
        uint64_t used_before; /* write-through map: bytes in use at begin */
        int failed; /* simulated LMDB error that broke the txn, 0 none */
        bool capture;
        change_t *changes;
        size_t change_cnt, change_size;
        arena_t cap; /* the changes' bytes, until the transaction ends */
        /* time index puts not yet made (sg_db_put_index): slots of
         * IDX_SLOT bytes, db | key length | key */
        unsigned char *ipend;
        size_t ipend_cnt, ipend_size;
        sg_change_t *view; /* sg_txn_changes() result */
        size_t view_cnt;
        char errdetail[SG_TXN_ERRDETAIL_MAX]; /* sg_txn_errdetail() */
};

/* The time indexes (tp | ms (BE) | hash → empty), whose puts a write
 * transaction gathers and makes in key order (sg_db_put_index). */
static inline bool db_time_index(int db) {
        return db == DB_EXPIRY || db == DB_SINCE || db == DB_SNAPDUE;
}
#define IDX_SLOT 64 /* db u8 | key length u8 | key (<= SG_TP_MAX + 40) */
_Static_assert(SG_TP_MAX + 40 <= IDX_SLOT - 2,
               "time index key outgrows its slot");

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
/* A stored value's decoding (@p err, the decoder's reason @p why): a value
 * seqgate did not write is SG_ERR_STORE, with the reason as @p t's detail. */
static inline sg_err_t stored(sg_txn_t *t, sg_err_t err, const char *why) {
        return err ? sg_txn_fail(t, corrupt(err), "corrupt stored value: %s",
                                 why)
                   : SG_OK;
}

/* ---- value formats ------------------------------------------------------ */

/* digest 16 (SG_DEDUP_DIGEST_LEN) | verdict u8 | first_seen u48 |
 * expiry u56 (30 bytes; big-endian: SG_TIME_MAX_MS < 2^48,
 * SG_DEADLINE_MAX_MS < 2^56), where the verdict byte is verdict (low 3
 * bits) | DLQ reason << 3 (sg_reason_t; 0 unknown: records written before
 * the reason was stored hold only the verdict, so they read back as reason
 * unknown). Changelog values of store format 1 are 49 bytes (DEDUP_VLEN_1:
 * digest 32 | verdict u8 | first_seen i64 | expiry i64) and still decode. */
#define DEDUP_VLEN (SG_DEDUP_DIGEST_LEN + 1 + 6 + 7)
#define DEDUP_VLEN_1 (32 + 1 + 8 + 8)
#define DEDUP_VERDICT_BITS 3
#define DEDUP_VERDICT_MASK 0x7u

/* has_last u8 | last u64 | flags u32 | parked_cnt u32 | parked_bytes u64 |
 * since i64 | gap_reported i64 | skip_from u64 | skip_to u64 |
 * state_len u8 | state | agg_len u16 | agg [| epoch u64: only when the
 * aggregate has one, semantics §4b; older values end before it] */
#define AGG_FIXED (1 + 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8)

/* parked_at u64 | offset u64 | timestamp u64 | key_hash 32 |
 * type_len u32 | type | key_len u32 | key | value_len u32 | value |
 * headers_len u32 | headers     (len UINT32_MAX = null: pointer NULL and
 * length SIZE_MAX when read back) [| epoch u64: parked under an epoch,
 * semantics §4b; older values end before it] */

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

/* An LMDB error @p rc of operation @p what as an sg_err_t (MDB_MAP_FULL →
 * SG_ERR_MAP_FULL, MDB_NOTFOUND → SG_ERR_NOT_FOUND, else SG_ERR_STORE),
 * the detail in errstr (may be NULL). store.c. */
sg_err_t sg_lmdb_err(int rc, const char *what, char *errstr,
                     size_t errstr_size);
/* The LMDB calls of a transaction, with fault simulation (store.c). */
int sg_lmdb_put(sg_txn_t *t, int db, MDB_val *key, MDB_val *val,
                unsigned flags);
int sg_lmdb_cursor_put(sg_txn_t *t, MDB_cursor *cur, MDB_val *key, MDB_val *val,
                       unsigned flags);
int sg_lmdb_cursor_del(sg_txn_t *t, MDB_cursor *cur);
int sg_lmdb_cursor_open(sg_txn_t *t, int db, MDB_cursor **curp);
/* Records a write for the changelog when capture is on (store.c). */
sg_err_t sg_change_capture(sg_txn_t *t, int db, const void *k, size_t klen,
                           const void *v, size_t vlen);
/* Writes, reads and deletes one key of database @p db, capturing writes
 * (store.c). sg_db_del of an absent key is SG_OK. */
sg_err_t sg_db_put(sg_txn_t *t, int db, const void *k, size_t klen,
                   const void *v, size_t vlen, char *errstr,
                   size_t errstr_size);
sg_err_t sg_db_get(sg_txn_t *t, int db, const void *k, size_t klen,
                   MDB_val *val);
/* Puts key @p k (empty value) into time index @p db (db_time_index). The
 * put is gathered and made, with the transaction's other gathered index
 * puts sorted by key, before anything reads or deletes in that index and
 * at commit (sg_index_flush): a batch's entries share their time, so in
 * put order their hashes would land at random in the index's last pages
 * and split them half-full; in key order they are appended (MDB_APPEND
 * when the key sorts after the database's last, else LMDB packs
 * sequential inserts itself), and pages stay full. Each put counts as one
 * write operation of the fault simulation when it is made. */
sg_err_t sg_db_put_index(sg_txn_t *t, int db, const void *k, size_t klen,
                         char *errstr, size_t errstr_size);
/* Makes the gathered index puts (see above): 0 or an LMDB code. */
int sg_index_flush(sg_txn_t *t);
sg_err_t sg_db_del(sg_txn_t *t, int db, const void *k, size_t klen,
                   char *errstr, size_t errstr_size);
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
