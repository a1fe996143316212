/*
 * store.h — seqgate's state in LMDB (semantics §1 table), store format 3.
 *
 * One LMDB environment under the data directory. Every partition has its
 * own databases, so that its keys carry no partition prefix and its state
 * is dropped or rebuilt as a unit (mdb_drop):
 *   p<tp>.a       agg hash                    → aggregate: last version,
 *                                                state, epoch, and only
 *                                                while needed flags, parked
 *                                                count/bytes/since, id
 *   p<tp>.x       'p' agg hash | version (BE) → parked event (the whole
 *                                                record + parked_at)
 *                 'r' agg hash                → snapshot request
 *                 's' since_ms (BE) | agg hash → (empty) gap deadline index
 *                 't' due_ms (BE) | agg hash   → (empty) request due index
 *                 'h', 'g' seg id             → the dedup segment table
 *   p<tp>.d<n>    key hash                    → dedup record (segment slot n)
 * and three shared databases:
 *   meta          tp                          → consumer group, input
 *                                                offset, counters, clock
 *   filter        tp | seg id (BE u32)        → a sealed segment's filter
 *   format        "version"                   → SG_STORE_FORMAT
 * where tp = the first 8 bytes of SHA-256(topic) | 4-byte BE partition
 * (12 bytes, SG_TP_LEN; <tp> its 24 hex digits), and a hash is the first
 * SG_KEY_HASH_LEN (16) bytes of the SHA-256 of the idempotency key or
 * aggregate id: for a billion keys in one partition two collide with a
 * chance of ~1.5e-21. The topic name itself is kept once, in the
 * partition's meta value, where sg_meta_get() checks it: two topics whose
 * 64-bit hashes collided (for 1,000 topics in one store a chance of
 * 1000^2 / 2^65, ~3e-14) are refused, never mixed.
 *
 * Dedup segments (semantics §3 "Expiry", store_seg.c; compaction and
 * expiry: store_seg_merge.c): a partition's dedup records live in time
 * segments, each holding keys whose expiry falls in one bucket of width
 * dedup TTL / SG_DEDUP_BUCKETS. New keys go to the bucket's one open
 * segment, small and hot; one that holds SG_SEG_KEYS_DEFAULT keys, or
 * whose bucket is past, is frozen (at a sweep; a restore's window whose
 * new keys cannot be appended to a full one freezes it at once and
 * appends them to a new one), and rewritten in key order into a
 * packed sealed segment with a blocked Bloom filter (2 bytes a key, kept
 * in the store) — up to four frozen segments of a bucket into one;
 * sealed segments of a bucket are merged four at a time, and those of a
 * bucket that takes no more new keys at the pace of the keys written.
 * A lookup goes through the segments newest first, a sealed one only when
 * its filter may hold the key; a key lives in one segment. Once a
 * bucket's end has passed, its segments are walked (the changelog gets a
 * tombstone for each key, a bounded number a batch; keys still PARKED move
 * to the current bucket) and then emptied as a whole: no expiry index, no
 * per-key delete.
 *
 * Change capture and sg_store_foreach() name a state key as the changelog
 * does: the kind (SG_DB_*), and the key tp | hash [| version], whatever
 * database holds it; a dedup value as the changelog carries it
 * (sg_dedup_encode).
 *
 * Format version: the store's format number (SG_STORE_FORMAT) is kept in
 * its own database "format". A store without it, or with an older one, is
 * never read: sg_store_open() sets it aside and every partition is restored
 * from its changelog (sg_store_rebuilt() says why), as after a machine stop;
 * the changelog's records of store format 2 (32-byte hashes in their keys)
 * convert as they are restored (sg_store_apply_change).
 *
 * Map size: when a write returns MDB_MAP_FULL the batch is aborted
 * (SG_ERR_MAP_FULL), sg_store_grow() adds map_growth_bytes, and the batch is
 * re-run; nothing is lost.
 *
 * Thread-safety: one write transaction at a time (LMDB rule); a transaction
 * belongs to the thread that began it. The store's own thread (the one that
 * opens, writes, grows and closes it) uses sg_txn_begin; any other thread
 * reads through sg_txn_begin_reader (e.g. the result query served beside
 * the Kafka loop), which takes the store's map lock shared for the
 * transaction's life, so sg_store_grow (exclusive) never remaps the file
 * under it, and touches no fault-simulation state. sg_store_close must come
 * after every such reader ended.
 */
#ifndef SEQGATE_STORE_H
#define SEQGATE_STORE_H

#include "kafka_changelog.h"
#include "seqgate.h"

#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_TP_LEN 12 /**< key prefix: 8 bytes of topic hash + partition */
#define SG_TP_MAX SG_TP_LEN /**< longest key prefix, bytes */
#define SG_STORE_FORMAT 3   /**< the store's key and value format (above) */
/** Bytes of a key or aggregate hash in store and changelog keys (the
 *  first of its SHA-256; functions take the whole 32-byte digest). Store
 *  format 2 kept all 32: SG_KEY_HASH_LEN_2. */
#define SG_KEY_HASH_LEN 16
#define SG_KEY_HASH_LEN_2 32
/** Keys an open dedup segment takes before it is frozen (above), unless
 *  sg_store_set_segment_keys() says otherwise. */
#define SG_SEG_KEYS_DEFAULT 262144
/** A partition's dedup bucket width is its dedup TTL / SG_DEDUP_BUCKETS
 *  (at least 1 s), set when its first key is written and kept for the
 *  partition's life in this store. A key leaves the store when its
 *  bucket ends, up to one width after it expired (semantics §3
 *  "Expiry"), so the store holds up to TTL × (1 + 1/SG_DEDUP_BUCKETS)
 *  of keys. Fewer, wider buckets would mean fewer sealed segments and
 *  filter probes a lookup, for more disk (half-TTL buckets, Kafka
 *  Streams' default segment, measured: docs/benchmarks.md). */
#define SG_DEDUP_BUCKETS 8
#define SG_STATE_MAX 64 /**< longest state name, bytes, NUL included */

typedef struct sg_store sg_store_t;
typedef struct sg_txn sg_txn_t;

/** A topic-partition key prefix, and the topic-partition it stands for. */
typedef struct sg_tp {
        unsigned char b[SG_TP_MAX];
        size_t len;
        char topic[250]; /**< NUL-terminated, at most 249 bytes */
        int32_t partition;
} sg_tp_t;

/** Builds the prefix for (@p topic, @p partition) (layout above). Topic is
 *  truncated to 249 bytes (Kafka's limit). Pure: thread-safe. */
void sg_tp_make(sg_tp_t *tp, const char *topic, int32_t partition);

/**
 * The latest processing time a store value may hold, in ms since the epoch:
 * 9999-12-31T23:59:59.999Z. A deadline (a dedup expiry, a snapshot request's
 * due time) may lie later by at most the longest configurable delay (2^53
 * ms). Values with later times do not decode: the engine's clock never goes
 * below a restored one, and arithmetic on such a time would overflow.
 */
#define SG_TIME_MAX_MS INT64_C(253402300799999)
#define SG_DEADLINE_MAX_MS (SG_TIME_MAX_MS + SG_JSON_INT_MAX)

/** Dedup verdicts (what the key was recorded with). */
typedef enum sg_dedup_verdict {
        SG_DV_APPLIED = 1, /**< emitted — never applied again */
        SG_DV_PARKED = 2,  /**< waiting in the parked database */
        SG_DV_DLQ = 3,     /**< dead-lettered — a replay may judge it again */
        SG_DV_DROPPED = 4, /**< stale and dropped by config */
        SG_DV_SUPERSEDED = 5, /**< parked, then dropped unemitted: a snapshot
                                   or a release moved L past it (semantics
                                   §4) — never applied, like APPLIED */
} sg_dedup_verdict_t;

/** Bytes of the payload digest a dedup record keeps (semantics §3: same
 *  key, same payload is a redelivery, another payload a conflict): the
 *  first 16 of SHA-256. Only the stored and the new payload of one key are
 *  compared, so a conflict passes for a redelivery with a chance of 2^-128
 *  per conflict (no birthday bound applies); finding such a payload on
 *  purpose takes ~2^128 SHA-256 evaluations. */
#define SG_DEDUP_DIGEST_LEN 16

typedef struct sg_dedup_rec {
        /** the payload digest; only the first SG_DEDUP_DIGEST_LEN bytes
         *  are stored (compare with sg_dedup_digest_eq), the rest read 0 */
        unsigned char digest[32];
        uint8_t verdict; /**< sg_dedup_verdict_t */
        /** Why a DLQ verdict was dead-lettered (sg_reason_t, metrics.h), for
         *  the result query (semantics §7); 0 (SG_R_NONE) with every other
         *  verdict and in records written before the field existed (reason
         *  unknown). Stored in the verdict byte: no extra bytes. */
        uint8_t reason;
        int64_t first_seen_ms;
        int64_t expiry_ms;
        /** The changelog may hold this key's records under its store
         *  format 2 key (the 32-byte hash, whose last 16 bytes v2_tail
         *  are): a record restored from such a key. Its tombstone goes to
         *  both keys. Set by the store; a new record has none. */
        bool v2;
        unsigned char v2_tail[16];
        /** Where sg_dedup_get found the record (its segment), for
         *  sg_dedup_put_known; 0: unknown. Private. */
        uint32_t _seg;
} sg_dedup_rec_t;

/** Whether the payload digest @p digest (32 bytes of SHA-256) is the one
 *  @p rec was recorded with (SG_DEDUP_DIGEST_LEN bytes compared). */
static inline bool sg_dedup_digest_eq(const sg_dedup_rec_t *rec,
                                      const unsigned char digest[32]) {
        return memcmp(rec->digest, digest, SG_DEDUP_DIGEST_LEN) == 0;
}

/** Aggregate flags. */
#define SG_AGG_QUARANTINED 0x1u
#define SG_AGG_REFETCHING 0x2u

typedef struct sg_agg_rec {
        bool has_last;         /**< false: no version applied yet */
        uint64_t last_version; /**< L */
        uint32_t flags;
        char state
                [SG_STATE_MAX]; /**< current state ("" when no state machine) */
        uint32_t parked_cnt;
        uint64_t parked_bytes;
        int64_t parked_since_ms; /**< parked_at of the oldest parked event, 0 if none */
        int64_t gap_reported_ms; /**< parked_since_ms the current gap was counted for */
        uint64_t
                skip_from; /**< gap_policy skip: first skipped version, 0 none */
        uint64_t skip_to;
        /** The aggregate id (truncated past 1024 bytes) for DLQ headers,
         *  snapshot requests and tools. The store keeps it only while
         *  something needs it without the event (parked events, flags, a
         *  skip): read back otherwise it is "" (aggregate_len 0), and a
         *  caller that looked the aggregate up by its id fills it in. */
        char aggregate[1025];
        size_t aggregate_len;
        bool has_epoch; /**< false: no epoch seen (semantics §4b), also
                                      for values written before epochs */
        uint64_t epoch; /**< E, the aggregate's current epoch */
        /** As sg_dedup_rec_t.v2, for the aggregate's records (aggregate,
         *  parked events, snapshot request): the last 16 bytes of its
         *  32-byte hash, kept while a record under it may remain. */
        bool v2;
        unsigned char v2_tail[16];
} sg_agg_rec_t;

/** A parked event. Pointers refer to LMDB memory (get) or caller memory (put). */
typedef struct sg_parked_rec {
        int64_t parked_at_ms;
        int64_t offset; /**< origin offset */
        int64_t timestamp_ms;
        /** the idempotency key's hash: SG_KEY_HASH_LEN bytes, or all 32 in a
         *  value of store format 2 (the rest 0 otherwise) */
        unsigned char key_hash[32];
        const char *type; /**< may be NULL */
        size_t type_len;
        const void *key;
        size_t key_len; /**< key_len == SIZE_MAX: null key */
        const void *value;
        size_t value_len;    /**< SIZE_MAX: null value */
        const void *headers; /**< serialized headers (sg_headers_serialize) */
        size_t headers_len;
        size_t header_cnt; /**< headers in the block (set when read:
                                      the block was checked whole) */
        bool has_epoch;    /**< parked under an epoch (semantics §4b) */
        uint64_t epoch;    /**< the epoch it was parked under */
} sg_parked_rec_t;

/** Settings in a partition's key fingerprint (sg_meta_rec_t.key_fp). */
#define SG_META_FP_PARTS 5

typedef struct sg_meta_rec {
        char group[256]; /**< consumer group that owns the store */
        /** The topic of the partition (its key prefix is a hash of it):
         *  written by sg_meta_put() from its tp, "" when decoded from a
         *  changelog value of an earlier format, which lacks it. */
        char topic[250];
        int64_t input_offset;     /**< next input offset to read, -1 none */
        int64_t changelog_offset; /**< reserved for the changelog, -1 none */
        int64_t clock_ms;         /**< last processing time */
        uint64_t parked_cnt;      /**< parked events in the partition */
        uint64_t parked_bytes;
        uint64_t quarantined;    /**< quarantined aggregates in the partition */
        uint64_t snap_in_flight; /**< snapshot requests sent and unanswered */
        uint64_t snap_seq;       /**< last snapshot request sequence number */
        int64_t changelog_epoch; /**< at_least_once: the changelog epoch in
                                       force at changelog_offset (semantics
                                       §6, kafka.h "Changelog fencing"), -1
                                       none; read as -1 from stores written
                                       before the field existed */
        /** Fingerprint of the settings that define the partition's
         *  idempotency keys, digests and aggregate keys (one 8-byte hash per
         *  setting, engine_keyfp.c); has_key_fp false in a store
         *  written before it existed. */
        bool has_key_fp;
        unsigned char key_fp[SG_META_FP_PARTS][8];
        /** The id record of the changelog partition the store reflects
         *  (kafka_changelog.h "The changelog id", semantics §6 "The changelog's
         *  identity"): a restore refuses a changelog that does not hold it
         *  at its offset. has_changelog_id false: none recorded yet (a new
         *  partition, or a store written before the field existed). */
        bool has_changelog_id;
        sg_changelog_id_t changelog_id;
} sg_meta_rec_t;

/** Snapshot request states. */
#define SG_SNAP_INFLIGHT 1 /**< sent; due = its timeout */
#define SG_SNAP_WAITING                                                        \
        2 /**< not sent yet (queued behind max_in_flight, or
                                backing off before a retry); due = send time */

/** A snapshot request of one aggregate (snapshot refetch; semantics §4 step 1).
 *  Part of the store, so requests in flight survive a restart. */
typedef struct sg_snapreq_rec {
        uint64_t seq;     /**< sequence number of the latest attempt */
        uint32_t attempt; /**< 1-based */
        uint8_t state;    /**< SG_SNAP_INFLIGHT / SG_SNAP_WAITING */
        bool has_have;
        uint64_t have_version; /**< L when the request was made */
        uint64_t want_version; /**< the version the aggregate waits for */
        int64_t issued_at_ms;  /**< first attempt (time to resolve) */
        int64_t sent_at_ms;    /**< latest send */
        int64_t due_ms;        /**< timeout or next send time (snapdue index) */
        char aggregate[1025];  /**< the aggregate id (max_field_bytes <= 1024
                                      for snapshot topics) */
        size_t aggregate_len;
} sg_snapreq_rec_t;

/**
 * Checks, changing nothing, that the data_dir @p dir is a directory
 * seqgate may write, or can be made one: its nearest existing path is a
 * directory that this process may write into and search. For
 * --check-config, and the rule sg_store_open applies first. @returns
 * SG_OK, or SG_ERR_CONFIG with errstr naming the path that stops it and
 * the errno ("data_dir /a/b/c cannot be created: /a/b is not a directory
 * (ENOTDIR)") and *@p errnop (NULL: not wanted) that errno: EACCES or
 * EPERM depend on the user the process runs as, the others (ENOTDIR,
 * EROFS, ELOOP, ENAMETOOLONG) not. Thread-safe.
 */
sg_err_t sg_store_dir_check(const char *dir, int *errnop, char *errstr,
                            size_t errstr_size);

/**
 * Tells whether another process holds the data_dir @p dir, creating and
 * taking nothing: sg_store_writer (Linux's /proc/locks), or, when that
 * cannot tell, sg_store_open's non-blocking flock of dir/seqgate.lock,
 * let go at once (a seqgate starting on @p dir in that instant would be
 * refused as a second instance; a restart succeeds). For --check-config.
 * Like sg_store_writer, a holder in another PID namespace (another
 * container on the same volume) is not seen.
 * @returns SG_OK (free, or no lock file yet: nothing ran there),
 *          SG_ERR_LOCKED (errstr in sg_store_open's words, the holder's pid
 *          named). Thread-safe.
 */
sg_err_t sg_store_lock_probe(const char *dir, char *errstr, size_t errstr_size);

/**
 * Opens (creating if needed) the LMDB environment in directory @p dir.
 * @param map_size_bytes   initial map size (grown to the file's size if larger).
 * @param growth_bytes     step for sg_store_grow().
 * One process per directory: it holds a lock on dir/seqgate.lock (flock)
 * until sg_store_close.
 * @returns SG_OK, SG_ERR_CONFIG (a directory that cannot be made or
 *          written: sg_store_dir_check's errors, the path and errno named),
 *          SG_ERR_IO (directory, another file system error), SG_ERR_LOCKED
 *          (another process holds the directory), SG_ERR_STORE.
 */
sg_err_t sg_store_open(const char *dir, uint64_t map_size_bytes,
                       uint64_t growth_bytes, sg_store_t **storep, char *errstr,
                       size_t errstr_size);
void sg_store_close(sg_store_t *store);

/*
 * Durability of the store (semantics §6; the argument in store_durable.c).
 * By default every committed transaction is synced (fdatasync). The
 * changelog topic holds the durable copy of every committed batch before
 * LMDB does (exactly_once: in the Kafka transaction; at_least_once: its
 * markers acknowledged first), so the store may defer its syncs:
 * sg_store_defer_sync() turns per-commit syncs off (MDB_NOSYNC) after
 * recording, durably, that a session without syncs is open
 * (data_dir/seqgate.session with this boot's id). sg_store_close() syncs and
 * records the clean close. A later sg_store_open() that finds the session
 * still open under another boot id (the machine stopped, so the last
 * writes may be missing or torn) removes the LMDB files instead of using
 * them — sg_store_rebuilt() then says so and why — and the engine restores
 * every partition from its changelog. A session left open by a process of
 * the same boot is whole (the page cache holds every commit) and is synced.
 */
/** Defers syncs (see above). @returns SG_OK, SG_ERR_INVALID (no boot id
 *  on this system: syncs stay on, errstr says why), SG_ERR_IO (session
 *  file), SG_ERR_STORE. Call with no transaction open. */
sg_err_t sg_store_defer_sync(sg_store_t *store, char *errstr,
                             size_t errstr_size);
/** Whether sg_store_defer_sync() took effect. */
bool sg_store_deferred(const sg_store_t *store);
/** Syncs everything committed so far to the disk (a checkpoint of a
 *  deferred store). @returns SG_OK or SG_ERR_STORE. */
sg_err_t sg_store_sync(sg_store_t *store, char *errstr, size_t errstr_size);
/**
 * Paced writeback, after a commit (the engine's checkpoint, a restore's
 * window): once the process dirtied half the kernel's background dirty
 * threshold (at least 256 MiB) since the last time, starts the write-out
 * of every page of the store's file that is dirty now (sync_file_range
 * SYNC_FILE_RANGE_WRITE: queued to the disk, not waited for). A deferred
 * store's commits leave their pages to the kernel, which lets them pile up
 * to its dirty limit and then makes the writing process wait for the disk
 * (a 10 M-key run: 3.4 GiB dirty, 78 % I/O pressure); started here, they
 * never reach the threshold from this store alone, while below it the
 * kernel still coalesces pages dirtied again. Not a sync: nothing about
 * durability changes (semantics §6). A hint: errors are ignored; without
 * /proc/self/io it does nothing. Call from the store's thread with no
 * write transaction open.
 */
void sg_store_writeback(sg_store_t *store);
/** True if sg_store_open() started the store new and empty: it removed
 *  an untrusted one (see above) or set aside one of an earlier format
 *  ("Format version"); *whyp (optional) the reason, naming where a
 *  set-aside copy is kept, valid while the store is open. */
bool sg_store_rebuilt(const sg_store_t *store, const char **whyp);

/** Grows the map by the growth step. No transaction of sg_txn_begin may be
 *  open (LMDB rule; asserted): SG_ERR_INVALID if one is. Waits until the
 *  readers of other threads (sg_txn_begin_reader) have ended theirs; new
 *  ones wait for the grow. The calling thread must hold no reader
 *  transaction itself (it would wait for itself). */
sg_err_t sg_store_grow(sg_store_t *store, char *errstr, size_t errstr_size);

/** Whether the store writes through its map (MDB_WRITEMAP with the
 *  disk-space guard, semantics §6 "Disk space"): chosen at open by the
 *  data_dir's file system (ext4, tmpfs). A full file system is then an
 *  SG_ERR_STORE from sg_store_grow (the map grows only over allocated
 *  blocks), as it is without it (ENOSPC at commit). */
bool sg_store_writemap(const sg_store_t *store);

/** Current map size and bytes in use (pages × page size). */
void sg_store_usage(sg_store_t *store, uint64_t *map_size, uint64_t *used);

/** Entries in every database of the store (all partitions), from LMDB's
 *  own counts (mdb_stat: no walk) in a short read transaction; 0 if that
 *  cannot begin. Thread-safety: the store's thread. */
uint64_t sg_store_entries(sg_store_t *store);

/**
 * Transactions of @p store open now (begun by sg_txn_begin, not yet
 * committed or aborted): write transactions only when @p write_only, else
 * all (sg_txn_begin_reader's included). For assertions and tests: after an error every caller must have
 * ended its transaction (a write transaction left open makes the next
 * mdb_txn_begin of the process block forever, and sg_store_grow refuse).
 * Thread-safe.
 */
unsigned sg_store_txns_open(const sg_store_t *store, bool write_only);

/*
 * Aggregate cache (semantics §8 "The aggregate cache", store_aggc.c): the
 * writer keeps copies of up to SG_AGG_CACHE_DEFAULT aggregate records in
 * memory, so that a hot aggregate's read is a hash-table hit instead of a
 * walk of the aggregate database's B-tree (at 10 M aggregates, cold pages
 * on every event). Writes stay in the cache until the commit writes them
 * back, in key order (or sg_txn_flush, or sg_txn_settle when the map's
 * room might not take them at the commit: the engine asks at the end of
 * each batch's processing, before its output is produced); a walk of an
 * aggregate database (foreach, the dump, statistics) and a restore window
 * write them back before they read. An abort, or a failed commit, forgets
 * the whole cache: nothing of an aborted transaction survives in it. Only
 * the writer's transactions
 * use it; readers (sg_txn_begin_reader, read-only transactions, other
 * processes) see what LMDB committed, which then holds every cached write.
 * Memory: one allocation at the first write transaction, 104 bytes an
 * entry (sg_aggc_bytes; 26 MiB at the default), independent of how many
 * keys the store holds. A record longer than 45 bytes encoded (one that
 * keeps its aggregate id: parked events, flags, a skip) is not cached.
 */
#define SG_AGG_CACHE_DEFAULT 262144 /**< entries */
/** Sets the aggregate cache's bound to @p entries (0: no cache), dropping
 *  what it holds. Call from the store's thread with no write transaction
 *  open. */
void sg_store_set_agg_cache(sg_store_t *store, size_t entries);
/**
 * Writes the aggregate cache's writes made in @p t to LMDB now, in key
 * order through the transaction's cursors (store_aggc.c), so that an LMDB
 * error of theirs (a full map: MDB_MAP_FULL) comes while the caller can
 * still abort what they belong to (sg_txn_settle calls it when the map's
 * room might not take them at the commit; semantics §8 "The aggregate
 * cache"). The cache keeps its
 * entries (clean). A read-only transaction, or none dirty: SG_OK.
 * Returns SG_OK; SG_ERR_MAP_FULL or SG_ERR_STORE (@p errstr says why; the
 * transaction is broken and can only be aborted). The store's thread.
 */
sg_err_t sg_txn_flush(sg_txn_t *t, char *errstr, size_t errstr_size);
/**
 * The end of a batch's processing in a transaction that spans batches
 * (the engine's checkpoint, semantics §8 "The aggregate cache"): writes
 * the aggregate cache's dirty entries back now (sg_txn_flush) only when
 * writing them back at the commit might not fit the map's room — the
 * transaction's writes at the learned growth per write
 * (sg_txn_room_low's estimate) plus four pages for each dirty entry (its
 * leaf's copy and its share of branch copies and splits) past half the
 * room the map had when the transaction began. Otherwise they stay dirty
 * in the cache until the commit, so that an aggregate a checkpoint's
 * batches update many times is written to LMDB once, and a cold leaf of
 * a large store is searched once per checkpoint instead of once per
 * batch. Returns as sg_txn_flush; SG_OK when nothing was due. The
 * store's thread.
 */
sg_err_t sg_txn_settle(sg_txn_t *t, char *errstr, size_t errstr_size);
/** The aggregate cache's lookups that hit and missed since the store
 *  opened, and its entries now. The store's thread. */
void sg_aggc_stats(const sg_store_t *store, uint64_t *hitsp, uint64_t *missesp,
                   size_t *entriesp);
/** The aggregate cache's memory for @p entries, bytes. Pure. */
size_t sg_aggc_bytes(size_t entries);

/* ---- fault simulation (tests) --------------------------------------------
 *
 * In the spirit of SQLite's fault simulation: a test makes the n-th LMDB
 * operation fail with a chosen error, for every n, and checks that nothing
 * is left open, nothing is lost and nothing is half-written. Compiled in
 * always and inert until armed (one branch per operation); only tests arm
 * it. Not thread-safe: arm and read it from the thread using the store.
 */

/** The LMDB operations a fault can be injected into (a bit mask). */
#define SG_STORE_OP_BEGIN 0x1u  /**< mdb_txn_begin (sg_txn_begin) */
#define SG_STORE_OP_PUT 0x2u    /**< mdb_put */
#define SG_STORE_OP_DEL 0x4u    /**< mdb_del, mdb_cursor_del */
#define SG_STORE_OP_COMMIT 0x8u /**< mdb_txn_commit (sg_txn_commit) */
/** The aggregate cache's write-back of one dirty aggregate (mdb_put or
 *  mdb_del; sg_txn_flush, store_aggc.c). Not in SG_STORE_OP_ALL: the put
 *  or delete it writes back was counted as SG_STORE_OP_PUT or _DEL when it
 *  was made, so the counts of SG_STORE_OP_ALL do not depend on the cache. */
#define SG_STORE_OP_AGG_WRITEBACK 0x10u
#define SG_STORE_OP_ALL 0xfu

/**
 * Arms the fault: from now on operations of the kinds in @p ops are
 * counted, and the @p n-th (1-based) is not run but fails with LMDB error
 * @p rc (MDB_MAP_FULL → SG_ERR_MAP_FULL; anything else, e.g. EIO →
 * SG_ERR_STORE), once. As after a real failed write, that transaction is
 * broken: every later operation on it fails with MDB_BAD_TXN and a commit
 * aborts it. A failed commit aborts the transaction (as LMDB does).
 * n == 0 or rc == 0 disarms (and resets the count).
 */
void sg_store_fault_inject(sg_store_t *store, unsigned ops, uint64_t n, int rc);
/** Operations counted since sg_store_fault_inject() (up to the faulted
 *  one); *firedp (optional) tells whether the fault was injected. */
uint64_t sg_store_fault_count(const sg_store_t *store, bool *firedp);

/** Begins a transaction (read-only if !write): *txnp on SG_OK, NULL on
 *  an error (SG_ERR_NOMEM, SG_ERR_STORE, SG_ERR_MAP_FULL, or the space
 *  check's error before a write transaction). */
sg_err_t sg_txn_begin(sg_store_t *store, bool write, sg_txn_t **txnp,
                      char *errstr, size_t errstr_size);
/**
 * Begins a read-only transaction that may be used from a thread other than
 * the store's own (see "Thread-safety" above): it holds the store's map
 * lock shared until sg_txn_abort (or sg_txn_commit), so sg_store_grow
 * waits for it, it counts in sg_store_txns_open(store, false) but not
 * against sg_store_grow's check, and it is never faulted by
 * sg_store_fault_inject. Every read function below may be called on it, in
 * the thread that began it. Keep it short: a grow, and so the Kafka loop,
 * waits for it. Thread-safe.
 * @returns SG_OK, SG_ERR_STORE (LMDB error, detail in errstr).
 */
sg_err_t sg_txn_begin_reader(sg_store_t *store, sg_txn_t **txnp, char *errstr,
                             size_t errstr_size);
/** Commits (SG_ERR_MAP_FULL possible) and frees the transaction. */
sg_err_t sg_txn_commit(sg_txn_t *txn, char *errstr, size_t errstr_size);
/** Puts and deletes made through @p txn so far (0 for NULL or a read
 *  transaction). */
uint64_t sg_txn_writes(const sg_txn_t *txn);
/**
 * Whether write transaction @p txn is estimated to have used half the
 * room its map had when it began: its writes so far, and @p pending more
 * the caller is about to make (a gathered sg_store_batch), times the bytes the
 * file grew per write in the store's commits so far (a decaying maximum;
 * before the first commit of 64 writes or more, 512 bytes). A transaction
 * that spans many batches (the engine's checkpoint, semantics §6) commits
 * then, so that the next one begins with the map grown ahead of use
 * (semantics §6 "Disk space") rather than meeting its end: MDB_MAP_FULL
 * costs the whole transaction. An estimate, not a promise: the map's end
 * stays the backstop. false for NULL or a read transaction.
 */
bool sg_txn_room_low(const sg_txn_t *txn, uint64_t pending);
/**
 * Asks that the next write transactions begin with room in the map for
 * @p writes more writes at the growth per write sg_txn_room_low estimates
 * (semantics §6 "Disk space"): when less than that room is left,
 * sg_txn_begin grows the map ahead to the used pages plus the room and
 * half again, for the next window (allocated first, as any growth; the
 * room at most SG_STORE_ROOM_MAX or a quarter of the used size, whichever
 * is more). A restore asks for its next
 * window's writes, so that a window is not cut short by a headroom sized
 * for batches (each cut costs a commit that rewrites the pages the
 * window's keys land on, and each growth remaps the file). 0 clears it;
 * a clean close still gives the room back. A failed allocation only
 * leaves less room (the window then ends early, as without this).
 * Thread-safety: the store's writer thread, no write transaction open.
 */
void sg_store_room_want(sg_store_t *store, uint64_t writes);
/** The most sg_store_room_want asks beyond a small store's used pages. */
#define SG_STORE_ROOM_MAX ((uint64_t)512 << 20)
/**
 * Whether write transaction @p txn may have used half the room its map had
 * when it began, were every write it made a new page: LMDB copies each
 * page a transaction changes the first time, and reuses the old copies
 * only two transactions later, so a long transaction grows the file by up
 * to a page per write. The engine's checkpoint (semantics §6) ends once
 * this is true: its growth then fits the map's room (the headroom, a
 * quarter of the store), so it never meets MDB_MAP_FULL by copying, and
 * the file holds at most about a headroom of pages freed by the last two
 * checkpoints. false for NULL or a read transaction.
 */
bool sg_txn_copied_much(const sg_txn_t *txn);
/** Aborts and frees the transaction. NULL is a no-op. */
void sg_txn_abort(sg_txn_t *txn);

#define SG_TXN_ERRDETAIL_MAX 256 /**< longest detail, NUL included */

/**
 * Why the latest failing store call on @p txn failed (SQLite's
 * sqlite3_errmsg idea), for the calls that take no errstr (the gets, the
 * index lookups, the foreach walks): LMDB's mdb_strerror and the database
 * or operation ("LMDB dedup get: MDB_BAD_TXN: ..."), or the decoder's
 * reason for a stored value seqgate did not write ("corrupt stored value:
 * dedup value of 5 bytes is truncated"). Every call on @p txn that returns
 * SG_ERR_STORE or SG_ERR_MAP_FULL sets it (those with an errstr put the
 * same text there); SG_OK and SG_ERR_NOT_FOUND leave it as it was, so read
 * it right after the failing call. "" when nothing has failed yet; never
 * NULL. Owned by @p txn, valid until it ends; at most
 * SG_TXN_ERRDETAIL_MAX - 1 bytes (longer details are cut).
 */
const char *sg_txn_errdetail(const sg_txn_t *txn);

/**
 * Change capture (changelog, semantics §6). With capture on, every write of the
 * transaction to a state database (dedup, agg, parked, snapreq, meta) is
 * recorded; the index databases are derived and not recorded.
 */
typedef struct sg_change {
        uint8_t db;      /**< SG_DB_* */
        const void *key; /**< full LMDB key (tp prefix included) */
        size_t key_len;
        const void *value; /**< NULL: deleted (a changelog tombstone) */
        size_t value_len;
        size_t _seq; /* private */
} sg_change_t;

#define SG_DB_DEDUP 0
#define SG_DB_AGG 2
#define SG_DB_PARKED 3
#define SG_DB_META 5
#define SG_DB_SNAPREQ 6

/** Turns change capture on or off for the rest of the transaction. */
void sg_txn_capture(sg_txn_t *txn, bool on);
/** Forgets the changes captured so far: sg_txn_changes() then returns only
 *  what is written after this call. A transaction that spans several
 *  batches (the engine's checkpoint, semantics §6) captures each batch's
 *  changes on their own. */
void sg_txn_capture_reset(sg_txn_t *txn);
/**
 * The transaction's captured changes: the last change of each key, in the
 * order they were written. Valid until the next call or the end of the
 * transaction.
 */
size_t sg_txn_changes(sg_txn_t *txn, const sg_change_t **changesp);

/**
 * Applies one changelog record to the store (restore, semantics §6): @p db and the
 * key @p suffix (the LMDB key without the tp prefix) come from the record's
 * key, @p value is its value or NULL for a tombstone. Keeps the derived
 * indexes in step. Capture must be off (asserted).
 * The record is input from the network: its key must name a database
 * seqgate logs with a key of that database's size, and its value must
 * decode in full (sg_*_decode) before anything of it is written.
 * Returns SG_OK, SG_ERR_INVALID (a record seqgate did not write; the reason
 * in errstr), or a store error (errstr filled).
 */
sg_err_t sg_store_apply_change(sg_txn_t *txn, const sg_tp_t *tp, int db,
                               const void *suffix, size_t suffix_len,
                               const void *value, size_t value_len,
                               char *errstr, size_t errstr_size);

/**
 * A restore's window of changelog records (semantics §6 restore), applied
 * together: sg_store_batch_add() takes one record as sg_store_apply_change()
 * would and decodes its value at once (a record that does not decode is
 * refused there, before anything is written); dedup and aggregate records
 * — nearly all of a changelog — are copied into the batch, every other
 * kind is applied to @p txn right away. sg_store_batch_flush() then writes
 * the batch's records into @p txn: only the last record of each key (the
 * earlier ones are overwritten within the window anyway), in key order
 * through one cursor per database, and then the derived index entries
 * (expiry, since) in their key order — the B-tree is walked leaf by leaf
 * instead of descended from the root for every random 32-byte hash. The
 * state after a flush is the state sg_store_apply_change() of every record
 * in order would leave. Records of different keys commute, so applying the
 * other kinds at once is the same state too. A batch serves one partition
 * @p tp at a time and is reused after a flush (or sg_store_batch_clear).
 * Not thread-safe; the caller owns the batch (sg_store_batch_destroy).
 * Returns SG_OK, SG_ERR_NOMEM, SG_ERR_INVALID (a record seqgate did not
 * write; errstr says why), or a store error (errstr filled).
 */
typedef struct sg_store_batch sg_store_batch_t;
sg_err_t sg_store_batch_new(sg_store_batch_t **batchp);
/** The records the restore will add at most (its changelog's length), to
 *  size the batch's filter of the dedup keys it wrote (a byte a record,
 *  1 to 256 MiB; without it 1 MiB). */
void sg_store_batch_expect(sg_store_batch_t *batch, uint64_t records);
void sg_store_batch_destroy(sg_store_batch_t *batch);
/** Drops what the batch holds (the restore's transaction was aborted). */
void sg_store_batch_clear(sg_store_batch_t *batch);
/** The records the batch holds. */
size_t sg_store_batch_count(const sg_store_batch_t *batch);
/** The bytes the batch holds for them (values and their entries). */
size_t sg_store_batch_bytes(const sg_store_batch_t *batch);
sg_err_t sg_store_batch_add(sg_store_batch_t *batch, sg_txn_t *txn,
                            const sg_tp_t *tp, int db, const void *suffix,
                            size_t suffix_len, const void *value,
                            size_t value_len, char *errstr, size_t errstr_size);
sg_err_t sg_store_batch_flush(sg_store_batch_t *batch, sg_txn_t *txn,
                              const sg_tp_t *tp, char *errstr,
                              size_t errstr_size);

/**
 * Decoders of the store's values, the bytes that also travel as changelog
 * record values (input from the network): every field is checked against
 * the value's own length before it is used (no count or length read from
 * the value is allocated for or trusted), every enumerated field against
 * its values (verdict, flags, snapshot request state), times against
 * [0, SG_TIME_MAX_MS] (deadlines SG_DEADLINE_MAX_MS), strings against their
 * limits; a value has no trailing bytes.
 * The reads below (sg_*_get) decode with these, and so does restore
 * (sg_store_apply_change) before it writes anything.
 * Parked: pointers in *out point into @p value; the header block is
 * checked whole and out->header_cnt set.
 * @returns SG_OK, or SG_ERR_INVALID with the reason in errstr (may be
 *          NULL). Pure functions: thread-safe.
 */
sg_err_t sg_dedup_decode(const void *value, size_t len, sg_dedup_rec_t *out,
                         char *errstr, size_t errstr_size);
sg_err_t sg_agg_decode(const void *value, size_t len, sg_agg_rec_t *out,
                       char *errstr, size_t errstr_size);
sg_err_t sg_parked_decode(const void *value, size_t len, sg_parked_rec_t *out,
                          char *errstr, size_t errstr_size);
sg_err_t sg_meta_decode(const void *value, size_t len, sg_meta_rec_t *out,
                        char *errstr, size_t errstr_size);
sg_err_t sg_snapreq_decode(const void *value, size_t len, sg_snapreq_rec_t *out,
                           char *errstr, size_t errstr_size);

/**
 * Encoders of the values a changelog record carries in store format 3 (the
 * decoders above read them back; store_int.h has the layouts), for the
 * store itself and for tools that write a changelog (bench's priming
 * generator). Out of range times are clamped into the decoders' range.
 * Each returns the value's length. Pure functions: thread-safe.
 */
#define SG_DEDUP_VALUE_LEN 30 /**< sg_dedup_encode's value */
size_t sg_dedup_encode(const sg_dedup_rec_t *rec,
                       unsigned char out[SG_DEDUP_VALUE_LEN]);
#define SG_AGG_VALUE_MAX 1280 /**< the longest sg_agg_encode value */
size_t sg_agg_encode(const sg_agg_rec_t *rec,
                     unsigned char out[SG_AGG_VALUE_MAX]);
#define SG_META_VALUE_MAX 640 /**< the longest sg_meta_encode value */
/** @p topic the partition's topic, kept in the value (store.h top). */
size_t sg_meta_encode(const sg_meta_rec_t *rec, const char *topic,
                      unsigned char out[SG_META_VALUE_MAX]);

/**
 * The stored value of one state key as a changelog record carries it (the
 * inverse of sg_store_apply_change: @p db and @p suffix as there). Used to
 * rewrite a key whose last changelog record is void (at_least_once repair,
 * kafka.h). *valuep points into LMDB memory, valid until the transaction
 * writes or ends.
 * @returns SG_OK, SG_ERR_NOT_FOUND (no such key: the changelog gets a
 *          tombstone), SG_ERR_INVALID (not a state database, key too long),
 *          SG_ERR_STORE (the reason in sg_txn_errdetail).
 */
sg_err_t sg_store_get_change(sg_txn_t *txn, const sg_tp_t *tp, int db,
                             const void *suffix, size_t suffix_len,
                             const void **valuep, size_t *value_lenp);

/* All functions below return SG_OK, SG_ERR_NOT_FOUND (gets), SG_ERR_MAP_FULL
 * or SG_ERR_STORE. On SG_ERR_STORE and SG_ERR_MAP_FULL the reason is the
 * transaction's last-error detail (sg_txn_errdetail), and also in errstr
 * where the function takes one; the gets (sg_dedup_get, sg_agg_get,
 * sg_parked_get, sg_meta_get, sg_snapreq_get, ...) take none: read
 * sg_txn_errdetail(txn) right after the failing call. A stored value that
 * does not decode (sg_*_decode) is SG_ERR_STORE with the decoder's reason. */

/** The key's record, wherever its segment (above); a record past its
 *  expiry is returned as it is (the caller judges it absent: semantics
 *  §3), so that a new record of the key replaces it. */
sg_err_t sg_dedup_get(sg_txn_t *txn, const sg_tp_t *tp,
                      const unsigned char key_hash[32], sg_dedup_rec_t *out);
/** Writes the record into the segment of its expiry's bucket (moving it
 *  there from another), capturing it for the changelog. */
sg_err_t sg_dedup_put(sg_txn_t *txn, const sg_tp_t *tp,
                      const unsigned char key_hash[32],
                      const sg_dedup_rec_t *rec, char *errstr,
                      size_t errstr_size);
/** As sg_dedup_put() when the caller has just read the stored record
 *  (sg_dedup_get, in this transaction): @p old is it, or NULL when there
 *  was none (saves a lookup on the per-record path). */
sg_err_t sg_dedup_put_known(sg_txn_t *txn, const sg_tp_t *tp,
                            const unsigned char key_hash[32],
                            const sg_dedup_rec_t *rec,
                            const sg_dedup_rec_t *old, char *errstr,
                            size_t errstr_size);
/**
 * The partition's dedup upkeep, once a batch (semantics §3 "Expiry"): the
 * open segments that are full or whose bucket is past are frozen; a
 * bounded amount of sealing and merging is done (about four times the keys
 * written since the last call, at least 4 × @p max); and the segments of
 * the oldest bucket whose end is at or before @p now_ms are walked: each
 * key gets a changelog tombstone (at most @p max this call; *removedp
 * receives their count), a key still PARKED moves to the current bucket
 * with expiry @p now_ms + @p ttl_ms, and once walked the segments are
 * emptied. @p ttl_ms is the partition's dedup TTL (the bucket width is
 * the first one seen / SG_DEDUP_BUCKETS).
 */
sg_err_t sg_dedup_sweep(sg_txn_t *txn, const sg_tp_t *tp, int64_t now_ms,
                        int64_t ttl_ms, int max, int *removedp, char *errstr,
                        size_t errstr_size);
/**
 * Seals the partition's dedup backlog (store.h "Dedup segments"): the open
 * segments that are full or whose bucket is past are frozen, as
 * sg_dedup_sweep does, then the compaction job in progress is carried on
 * and every frozen segment is sealed (its keys copied in key order with
 * their filter), up to @p max_keys keys copied this call; *donep receives
 * whether none is left (nothing frozen, no job in progress). No merges, no
 * expiry walk, no changelog records: the state every lookup sees is the
 * same before and after. For the end of a restore (engine_changelog.c),
 * whose keys would otherwise be sealed by the batches' sweeps a sixteenth
 * at a time, each lookup probing the unsealed segments' B-trees until
 * then. @p now_ms and @p ttl_ms as for sg_dedup_sweep. Thread-safety: the
 * store's writer.
 */
sg_err_t sg_dedup_seal(sg_txn_t *txn, const sg_tp_t *tp, int64_t now_ms,
                       int64_t ttl_ms, uint64_t max_keys, bool *donep,
                       char *errstr, size_t errstr_size);
/**
 * The format of the changelog records this store's writes capture
 * (docs/upgrade.md "Rolling upgrade"): SG_STORE_FORMAT (the default), or
 * 2 for the first step of a rolling upgrade from store format 2
 * (store.upgrade_from): a record whose 32-byte hash is known (an event's
 * key and aggregate hashes, and the rest of the hash kept in the record,
 * sg_dedup_rec_t.v2) is written under its format 2 key with a value format
 * 2 reads (the aggregate's long form, a parked event's 32-byte key hash),
 * so that an instance of the earlier version restores it; one restored
 * from a format 3 key (whose hash's rest is unknown: then every instance
 * reads format 3) under its format 3 key. The store itself is format 3
 * either way. Thread-safety: the store's thread.
 */
void sg_store_set_changelog_format(sg_store_t *store, int format);
/** Keys an open dedup segment takes before it is frozen (default
 *  SG_SEG_KEYS_DEFAULT; at least 1). Thread-safety: the store's thread. */
void sg_store_set_segment_keys(sg_store_t *store, uint64_t keys);

/** Statistics of a partition's dedup segments (tests, tools). */
typedef struct sg_seg_stat {
        int open, frozen, sealed;     /**< segments by state */
        int merging;                  /**< segments being written by a merge */
        uint64_t keys;                /**< keys in visible segments */
        uint64_t filter_bytes;        /**< the sealed segments' filters */
        int64_t oldest_bucket_end_ms; /**< 0: no segment */
} sg_seg_stat_t;
/** Fills @p out for @p tp. @returns SG_OK or SG_ERR_STORE. */
sg_err_t sg_dedup_seg_stat(sg_txn_t *txn, const sg_tp_t *tp,
                           sg_seg_stat_t *out);

sg_err_t sg_agg_get(sg_txn_t *txn, const sg_tp_t *tp,
                    const unsigned char agg_hash[32], sg_agg_rec_t *out);
/** The `since` (gap deadline) index entry of an aggregate: parked_since_ms,
 *  or 0 (no entry) when nothing is parked or a snapshot is being fetched. */
static inline int64_t sg_agg_indexed_since(const sg_agg_rec_t *r) {
        return (r->flags & SG_AGG_REFETCHING) ? 0 : r->parked_since_ms;
}

/** Writes the aggregate and keeps the `since` index in step with
 *  sg_agg_indexed_since(@p rec) (@p old_since: the indexed value stored
 *  before, 0 none). */
sg_err_t sg_agg_put(sg_txn_t *txn, const sg_tp_t *tp,
                    const unsigned char agg_hash[32], const sg_agg_rec_t *rec,
                    int64_t old_since, char *errstr, size_t errstr_size);

sg_err_t sg_parked_put(sg_txn_t *txn, const sg_tp_t *tp,
                       const unsigned char agg_hash[32], uint64_t version,
                       const sg_parked_rec_t *rec, char *errstr,
                       size_t errstr_size);
/** Reads parked (agg, version). Pointers valid until the next write. */
sg_err_t sg_parked_get(sg_txn_t *txn, const sg_tp_t *tp,
                       const unsigned char agg_hash[32], uint64_t version,
                       sg_parked_rec_t *out);
/** Lowest parked version of the aggregate (SG_ERR_NOT_FOUND if none). */
sg_err_t sg_parked_first(sg_txn_t *txn, const sg_tp_t *tp,
                         const unsigned char agg_hash[32], uint64_t *versionp,
                         sg_parked_rec_t *out);
/** Smallest parked_at_ms among the aggregate's parked events (0 if none);
 *  walks the aggregate's parked range, bounded by the per-aggregate cap. */
sg_err_t sg_parked_oldest(sg_txn_t *txn, const sg_tp_t *tp,
                          const unsigned char agg_hash[32], int64_t *oldestp);
sg_err_t sg_parked_del(sg_txn_t *txn, const sg_tp_t *tp,
                       const unsigned char agg_hash[32], uint64_t version,
                       char *errstr, size_t errstr_size);

/**
 * Finds the aggregate of @p tp with the oldest parked event whose parked_at
 * is <= @p upto_ms (the `since` index). SG_ERR_NOT_FOUND if none.
 */
sg_err_t sg_since_first(sg_txn_t *txn, const sg_tp_t *tp, int64_t upto_ms,
                        unsigned char agg_hash_out[32], int64_t *sincep);
/** Counts aggregates of @p tp whose oldest parked event is older than
 *  @p before_ms, stopping at @p max. */
sg_err_t sg_since_count(sg_txn_t *txn, const sg_tp_t *tp, int64_t before_ms,
                        uint64_t max, uint64_t *countp);

sg_err_t sg_snapreq_get(sg_txn_t *txn, const sg_tp_t *tp,
                        const unsigned char agg_hash[32],
                        sg_snapreq_rec_t *out);
/** Writes the request and keeps the `snapdue` index in step with due_ms
 *  (@p old_due: the due stored before, 0 none). */
sg_err_t sg_snapreq_put(sg_txn_t *txn, const sg_tp_t *tp,
                        const unsigned char agg_hash[32],
                        const sg_snapreq_rec_t *rec, int64_t old_due,
                        char *errstr, size_t errstr_size);
/** Deletes the request and its index entry (@p due: its due_ms). */
sg_err_t sg_snapreq_del(sg_txn_t *txn, const sg_tp_t *tp,
                        const unsigned char agg_hash[32], int64_t due,
                        char *errstr, size_t errstr_size);
/** The request of @p tp due first, if due at or before @p upto_ms. */
sg_err_t sg_snapdue_first(sg_txn_t *txn, const sg_tp_t *tp, int64_t upto_ms,
                          unsigned char agg_hash_out[32], int64_t *duep);

sg_err_t sg_meta_get(sg_txn_t *txn, const sg_tp_t *tp, sg_meta_rec_t *out);
sg_err_t sg_meta_put(sg_txn_t *txn, const sg_tp_t *tp, const sg_meta_rec_t *rec,
                     char *errstr, size_t errstr_size);

/**
 * Deletes the parked events of @p tp at or below their aggregate's L (a
 * restore's guard, semantics §6: an event the writer resolved whose
 * record outlived it, e.g. under a key of store format 2, is never
 * parked again); nothing is captured. *voidedp receives their count. A
 * walk of the partition's parked events (bounded by max_parked_total).
 */
sg_err_t sg_parked_void(sg_txn_t *txn, const sg_tp_t *tp, uint64_t *voidedp,
                        char *errstr, size_t errstr_size);

/** Deletes every key of @p tp in every database (its meta too). */
sg_err_t sg_store_partition_drop(sg_txn_t *txn, const sg_tp_t *tp, char *errstr,
                                 size_t errstr_size);

/* ---- read-only access for operator tools (seqgatectl) ---------------- */

/** Whether a seqgate process writes the store in a data_dir now. */
typedef enum sg_store_writer {
        SG_STORE_WRITER_UNKNOWN = 0, /**< cannot tell (/proc/locks unread) */
        SG_STORE_WRITER_NONE,        /**< no process holds the data_dir's
                                          lock: nothing writes the store */
        SG_STORE_WRITER_RUNNING,     /**< a process holds the lock */
} sg_store_writer_t;

/**
 * Whether a seqgate process holds data_dir @p dir's lock (the flock on
 * DIR/seqgate.lock that sg_store_open takes and holds until the store
 * closes: one writer per data_dir), read from Linux's /proc/locks without
 * taking the lock, so a seqgate starting meanwhile is never refused. A
 * missing lock file is SG_STORE_WRITER_NONE (no seqgate ever wrote here: a
 * copy). /proc/locks lists only the locks of processes in the reader's PID
 * namespace: a seqgate in another container on the same volume reads as
 * NONE. @p pidp (optional) receives the holder's pid, as /proc/locks gives
 * it, or 0. Reads the file system only; thread-safe.
 */
sg_store_writer_t sg_store_writer(const char *dir, long *pidp);

/**
 * Opens the existing LMDB environment in directory @p dir read-only
 * (MDB_RDONLY): nothing is created or written, so an operator tool can read
 * the store while the daemon runs (LMDB readers in other processes never
 * block the writer and always see the last committed transaction). The map
 * size is taken from the environment's file. Only read-only transactions
 * (sg_txn_begin with write = false) may be begun on the result; close it
 * with sg_store_close().
 * @returns SG_OK, SG_ERR_NOT_FOUND (no store in @p dir, or one without
 *          seqgate's databases), SG_ERR_STORE (LMDB error, detail in errstr).
 */
sg_err_t sg_store_open_readonly(const char *dir, sg_store_t **storep,
                                char *errstr, size_t errstr_size);

/** Visitor of sg_meta_foreach(): @p topic is NUL-terminated (valid for the
 *  call only). Return 0 to go on, anything else to stop the walk. */
typedef int(sg_meta_visit_cb)(void *opaque, const char *topic,
                              int32_t partition, const sg_meta_rec_t *rec);
/**
 * Calls @p cb for every partition that has a meta record, in key order
 * (the topic's hash, then partition: a topic's partitions in ascending
 * order; topics in no particular order). A full scan of the meta database:
 * one entry per partition the store has ever held.
 * @returns SG_OK (also when @p cb stopped the walk), SG_ERR_STORE (a key or
 *          record seqgate did not write, or an LMDB error; the reason in
 *          sg_txn_errdetail).
 */
sg_err_t sg_meta_foreach(sg_txn_t *txn, sg_meta_visit_cb *cb, void *opaque);

/** Visitor of sg_agg_foreach(); @p rec is valid for the call only.
 *  Return 0 to go on, anything else to stop the walk. */
typedef int(sg_agg_visit_cb)(void *opaque, const unsigned char agg_hash[32],
                             const sg_agg_rec_t *rec);
/**
 * Calls @p cb for every aggregate of @p tp, in hash order. A full scan of the
 * partition's aggregates (for operator tools, e.g. listing the quarantined
 * ones; never on the processing path).
 * @returns SG_OK (also when @p cb stopped the walk), SG_ERR_STORE (the
 *          reason in sg_txn_errdetail).
 */
sg_err_t sg_agg_foreach(sg_txn_t *txn, const sg_tp_t *tp, sg_agg_visit_cb *cb,
                        void *opaque);

/** Visitor of sg_snapreq_foreach(); @p rec is valid for the call only.
 *  Return 0 to go on, anything else to stop the walk. */
typedef int(sg_snapreq_visit_cb)(void *opaque, const unsigned char agg_hash[32],
                                 const sg_snapreq_rec_t *rec);
/**
 * Calls @p cb for every snapshot request of @p tp (one per aggregate that
 * waits for a snapshot), in aggregate-hash order: a walk bounded by the
 * aggregates being refetched, for the age gauges (semantics §7 "parked or
 * refetching").
 * @returns SG_OK (also when @p cb stopped the walk), SG_ERR_STORE (the
 *          reason in sg_txn_errdetail).
 */
sg_err_t sg_snapreq_foreach(sg_txn_t *txn, const sg_tp_t *tp,
                            sg_snapreq_visit_cb *cb, void *opaque);

/** Visitor of sg_parked_foreach(); pointers in @p rec refer to LMDB memory,
 *  valid for the call only. Return 0 to go on, anything else to stop. */
typedef int(sg_parked_visit_cb)(void *opaque, uint64_t version,
                                const sg_parked_rec_t *rec);
/**
 * Calls @p cb for every parked event of aggregate @p agg_hash of @p tp, in
 * ascending version order (bounded by the per-aggregate parking cap).
 * @returns SG_OK (also when @p cb stopped the walk), SG_ERR_STORE (corrupt
 *          record or LMDB error; the reason in sg_txn_errdetail).
 */
sg_err_t sg_parked_foreach(sg_txn_t *txn, const sg_tp_t *tp,
                           const unsigned char agg_hash[32],
                           sg_parked_visit_cb *cb, void *opaque);

/**
 * Finds the parked event of @p tp whose idempotency key hash is
 * @p key_hash: its aggregate's hash, version and record (pointers into LMDB
 * memory, valid until the transaction writes or ends). A walk of the
 * partition's parked events, bounded by its parking cap (max_parked_total);
 * for the result query (semantics §7), never on the processing path.
 * @returns SG_OK, SG_ERR_NOT_FOUND, SG_ERR_STORE (the reason in
 *          sg_txn_errdetail).
 */
sg_err_t sg_parked_find_key(sg_txn_t *txn, const sg_tp_t *tp,
                            const unsigned char key_hash[32],
                            unsigned char agg_hash_out[32], uint64_t *versionp,
                            sg_parked_rec_t *out);

/** Visitor of sg_store_foreach(): one entry of kind @p db (SG_DB_*
 *  numbers; the derived indexes are 4 since, 7 snapdue), its key as the
 *  top of this file says (tp | ...), memory valid for the call only.
 *  Return 0 to go on, else to stop. */
typedef int(sg_store_visit_cb)(void *opaque, int db, const void *key,
                               size_t key_len, const void *value,
                               size_t value_len);
/**
 * Calls @p cb for every state entry of the store (indexes included), kind
 * by kind, in key order within each kind: the store's whole contents as
 * the changelog would carry them (the segment table, the filters and how
 * the keys are spread over segments are not part of it), for tests that
 * compare two stores and for dumps. A full scan; never on the processing
 * path.
 * @returns SG_OK (also when @p cb stopped the walk), SG_ERR_STORE (the
 *          reason in sg_txn_errdetail).
 */
sg_err_t sg_store_foreach(sg_txn_t *txn, sg_store_visit_cb *cb, void *opaque,
                          char *errstr, size_t errstr_size);

/** The kinds of databases sg_store_db_stats() reports (the table at the
 *  top): every partition's segment slots ("dedup"), the filters
 *  ("filter"), every partition's aggregates ("agg"), the rest of their
 *  state ("state"), and "meta". */
#define SG_STORE_DB_CNT 5
#define SG_STAT_DEDUP 0
#define SG_STAT_FILTER 1
#define SG_STAT_AGG 2
#define SG_STAT_STATE 3
#define SG_STAT_META 4

/** One kind's page usage (LMDB's mdb_stat), for sizing estimates. */
typedef struct sg_db_stat {
        const char *name;   /**< "dedup", "filter", "agg", ... (static) */
        uint64_t entries;   /**< key/value pairs */
        uint64_t pages;     /**< branch + leaf + overflow pages */
        uint64_t page_size; /**< bytes per page */
} sg_db_stat_t;

/**
 * Fills @p out[0 .. SG_STORE_DB_CNT) with the statistics of each kind
 * (SG_STAT_*), summed over the partitions, as @p txn (read or write) sees
 * them; "dedup" entries are the keys of the visible segments (a merge's
 * half-written copy is in the pages, not the entries). Reads the
 * databases' headers and the segment tables: cheap at any size
 * (seqgatectl sizing).
 * @returns SG_OK or SG_ERR_STORE (errstr says which database).
 */
sg_err_t sg_store_db_stats(sg_txn_t *txn, sg_db_stat_t *out, char *errstr,
                           size_t errstr_size);

/**
 * Serializes @p cnt headers into a new malloc'd buffer (*bufp, *lenp):
 * u32 count, then per header u32 name length, the name and a NUL byte,
 * u32 value length (UINT32_MAX for a NULL value), the value. Caller frees.
 * Returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_headers_serialize(const sg_header_t *hdrs, size_t cnt, void **bufp,
                              size_t *lenp);
/**
 * Parses a serialized header block into @p out (at most @p max entries);
 * names and values point into @p buf. Returns the count, or -1 if the block
 * is corrupt or has more than @p max headers.
 */
ssize_t sg_headers_parse(const void *buf, size_t len, sg_header_t *out,
                         size_t max);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_STORE_H */
