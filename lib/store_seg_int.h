/*
 * store_seg_int.h — what store_seg.c (segments, their table and filters,
 * one key's reads and writes), store_seg_merge.c (compaction jobs and
 * expiry) and store_seg_restore.c (restore into segments) share; private
 * to the three. See store_seg.c for the segments'
 * states and invariants.
 */
#ifndef SEQGATE_STORE_SEG_INT_H
#define SEQGATE_STORE_SEG_INT_H

#include "store_int.h"

enum { SEG_OPEN = 1, SEG_FROZEN, SEG_SEALED, SEG_TARGET };

#define JOB_SRC_MAX 4        /* segments a merge takes */
#define SEAL_STEP_MAX 262144 /* keys a sweep copies for a backlog */
#define FILTER_BITS_PER_KEY 16
#define FILTER_BLOCK 64 /* bytes: one cache line */
#define FILTER_K 7      /* bits set per key, 9 bits of hash each */

typedef struct seg {
        uint32_t id; /* grows: a larger id is a newer segment */
        uint8_t slot, state, level;
        int64_t bucket;          /* expiry bucket index */
        int64_t base_ms, ttl_ms; /* the records' time base (store_int.h) */
        uint64_t fblocks;        /* sealed: filter blocks */
        unsigned char *filter;   /* sealed, writer's copy: its filter */
} seg_t;

struct segtab {
        int64_t width_ms; /* bucket width, 0: not set */
        uint32_t next_id;
        int cnt;
        seg_t seg[SEG_SLOTS]; /* newest (largest id) first */
        /* the compaction job: 0 none */
        uint32_t job_dst;
        uint32_t job_src[JOB_SRC_MAX];
        int job_nsrc;
        bool job_pos_set; /* keys up to job_pos copied */
        unsigned char job_pos[HL];
        uint64_t job_fblocks;
        unsigned char *job_filter; /* built as keys are copied (memory) */
        /* the expiry walk: 0 none */
        uint32_t walk_seg;
        bool walk_pos_set;
        unsigned char walk_pos[HL];
        /* keys written since the last sweep (its work budget; memory) */
        uint64_t written;
        /* the partition's dedup TTL as the last sweep had it (memory; 0
         * none yet): a new segment's time base */
        int64_t ttl_ms;
        bool filters; /* the writer's copy: filters loaded */
};

/* A k-way walk over segments in key order (keys are distinct across them:
 * a key lives in one segment), from after @p from (NULL: the first). */
typedef struct kwalk {
        int n;
        MDB_cursor *cur[SEG_SLOTS];
        uint32_t id[SEG_SLOTS];
        bool live[SEG_SLOTS];
        MDB_val k[SEG_SLOTS], v[SEG_SLOTS];
} kwalk_t;

int64_t sg_seg_bucket_of(const segtab_t *st, int64_t expiry_ms);

sg_err_t sg_seg_corrupt_table(sg_txn_t *t, const char *what);

/* The changelog's records of key @p kh: its value (@p rec) or a tombstone
 * (NULL), under its key; and when @p v2_tail, a tombstone under the store
 * format 2 key (the 32-byte hash) a record may still hold. */
sg_err_t sg_seg_dedup_capture(sg_txn_t *t, const pdb_t *p,
                              const unsigned char *kh,
                              const sg_dedup_rec_t *rec,
                              const unsigned char *v2_tail);

/* The write of a dedup record (store.h sg_dedup_put_known): @p old is the
 * stored record (its _seg where it was found) or NULL for none. The
 * engine's writes (@p engine) are captured for the changelog, and a record
 * the engine writes has no store format 2 key: the one a restored record
 * had gets its tombstone now. A restore's (!@p engine) keeps the record's
 * format 2 key, and the stored one's. */
sg_err_t sg_seg_dedup_write_p(sg_txn_t *t, pdb_t *p, segtab_t *st,
                              const unsigned char *kh, const sg_dedup_rec_t *in,
                              const sg_dedup_rec_t *old, bool engine,
                              char *errstr, size_t errstr_size);

void sg_seg_filter_add(unsigned char *f, uint64_t nblocks,
                       const unsigned char *kh);

uint64_t sg_seg_filter_blocks(uint64_t keys);

void sg_seg_filter_key(const pdb_t *p, uint32_t id, unsigned char *k);

sg_err_t sg_seg_hdr_put(sg_txn_t *t, pdb_t *p, const segtab_t *st);

void sg_seg_kwalk_close(kwalk_t *w);

/* The walk's next key: its cursor's index, -1 at the end. */
int sg_seg_kwalk_min(const kwalk_t *w);

int sg_seg_kwalk_next(kwalk_t *w, int i);

sg_err_t sg_seg_kwalk_open(sg_txn_t *t, pdb_t *p, segtab_t *st,
                           const uint32_t *ids, int n,
                           const unsigned char *from, kwalk_t *w);

seg_t *sg_seg_by_id(segtab_t *st, uint32_t id);

/* A segment's handle for reading: 0 (rc 0) when its database is not in
 * this transaction's view (a reader's snapshot before it existed). */
MDB_dbi sg_seg_dbi(sg_txn_t *t, pdb_t *p, const seg_t *g, bool create,
                   int *rcp);

sg_err_t sg_seg_decode(sg_txn_t *t, const seg_t *g, const MDB_val *v,
                       sg_dedup_rec_t *out);

/* The keys a segment's database holds (mdb_stat: no walk). */
uint64_t sg_seg_entries(sg_txn_t *t, pdb_t *p, const seg_t *g);

/* A new segment of @p bucket in state @p state in a free slot, its
 * database created (empty: a slot is emptied when its segment goes). */
sg_err_t sg_seg_new(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t bucket,
                    int state, int64_t base_ms, int64_t ttl_ms, seg_t **gp);

void sg_seg_remove(segtab_t *st, seg_t *g);

sg_err_t sg_seg_rec_del(sg_txn_t *t, pdb_t *p, uint32_t id);

sg_err_t sg_seg_rec_put(sg_txn_t *t, pdb_t *p, const seg_t *g);

/* The segment table of @p p as @p t sees it: the writer's copy, or the
 * reader's, read once per transaction. */
sg_err_t sg_segtab_get(sg_txn_t *t, pdb_t *p, segtab_t **stp);

sg_err_t sg_seg_width_set(sg_txn_t *t, pdb_t *p, segtab_t *st, int64_t ttl);

/* @p err with its reason in errstr: the transaction's detail when the
 * failing call below had no errstr of its own. */
sg_err_t sg_seg_with_detail(sg_txn_t *t, sg_err_t err, char *errstr,
                            size_t errstr_size);

sg_err_t sg_seg_dedup_write(sg_txn_t *t, const sg_tp_t *tp,
                            const unsigned char *kh, const sg_dedup_rec_t *in,
                            const sg_dedup_rec_t *old, bool engine,
                            char *errstr, size_t errstr_size);

unsigned char *sg_seg_filter_block(unsigned char *f, uint64_t nblocks,
                                   const unsigned char *kh);

bool sg_seg_filter_block_maybe(const unsigned char *b, const unsigned char *kh);

/* Deletes @p kh from segment @p g (and its job's target). */
sg_err_t sg_seg_del(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g,
                    const unsigned char *kh, char *errstr, size_t errstr_size);

/* Finds key @p kh in the visible segments (with ids below @p below, 0:
 * all), newest first: *gp and its value in *val, or SG_ERR_NOT_FOUND.
 * Sealed segments are probed only when their filter may hold the key
 * (their blocks prefetched together first). */
sg_err_t sg_seg_find_below(sg_txn_t *t, pdb_t *p, segtab_t *st,
                           const unsigned char *kh, uint32_t below, seg_t **gp,
                           MDB_val *val);

/* The segment a new key of expiry @p expiry_ms goes to: its bucket's open
 * one, made when there is none; when no slot is free, the open segment of
 * the latest later bucket (a key there outlives its expiry, never the
 * other way round). */
sg_err_t sg_seg_open_for(sg_txn_t *t, pdb_t *p, segtab_t *st,
                         const sg_dedup_rec_t *rec, seg_t **gp);

/* Writes @p rec under @p kh into segment @p g (and its job's target). */
sg_err_t sg_seg_put(sg_txn_t *t, pdb_t *p, segtab_t *st, seg_t *g,
                    const unsigned char *kh, const sg_dedup_rec_t *rec,
                    char *errstr, size_t errstr_size);

#endif
