/*
 * engine_changelog.c — the engine's side of the changelog (semantics §6,
 * both guarantees): the store's change capture turned into changelog
 * effects at the end of a batch, the changelog key format, and restore
 * (a partition's store rebuilt from its changelog, with checkpoints).
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the changelog key -----------------------------------------------------
 *
 * A changelog record's key names one store key (processor.h
 * SG_EFFECT_CHANGELOG): the database byte (SG_DB_*; 0xFF, the loop's own
 * control records, never comes here), then the LMDB key without the
 * partition prefix. Built here for the changelog effects and parsed here
 * for restore and the at_least_once repair: the one place of the format.
 * (The store takes the two parts separately: sg_store_apply_change,
 * sg_store_get_change.) */

typedef struct cl_key {
        int db;                      /* the database byte */
        const unsigned char *suffix; /* the key without the partition */
        size_t suffix_len;
} cl_key_t;

/* The changelog key of store key @p suffix of database @p db, in @p a;
 * *lenp its length. NULL when out of memory. */
static unsigned char *cl_key_make(arena_t *a, int db, const void *suffix,
                                  size_t suffix_len, size_t *lenp) {
        unsigned char *k = sg_arena_alloc(a, 1 + suffix_len);
        if (!k)
                return NULL;
        k[0] = (unsigned char)db;
        memcpy(k + 1, suffix, suffix_len);
        *lenp = 1 + suffix_len;
        return k;
}

/* Splits changelog key @p key (input from the network) into *out, which
 * points into @p key. false when the key is empty. */
static bool cl_key_parse(const void *key, size_t key_len, cl_key_t *out) {
        if (key_len < 1)
                return false;
        const unsigned char *k = key;
        out->db = k[0];
        out->suffix = k + 1;
        out->suffix_len = key_len - 1;
        return true;
}

/* ---- change capture → changelog effects ----------------------------------- */

static part_t *part_of_key(sg_engine_t *e, const unsigned char *key,
                           size_t key_len) {
        for (size_t i = 0; i < e->part_cnt; i++) {
                const sg_tp_t *tp = &e->parts[i].tp;
                if (key_len >= tp->len && memcmp(key, tp->b, tp->len) == 0)
                        return &e->parts[i];
        }
        return NULL;
}

/* One changelog effect per store key the batch changed (its last value, or
 * a tombstone; semantics §6, both guarantees): exactly_once commits them
 * with the batch's output in one Kafka transaction, at_least_once produces
 * them right behind the output, marked complete once all is delivered. */
sg_err_t sg_eng_changelog_effects(sg_engine_t *e) {
        const sg_change_t *ch;
        size_t n = sg_txn_changes(e->txn, &ch);
        for (size_t i = 0; i < n; i++) {
                part_t *p = part_of_key(e, ch[i].key, ch[i].key_len);
                if (!p)
                        continue;
                size_t klen;
                unsigned char *k = cl_key_make(
                        &e->arena, ch[i].db,
                        (const unsigned char *)ch[i].key + p->tp.len,
                        ch[i].key_len - p->tp.len, &klen);
                sg_effect_t *ef = sg_eng_effect_new(e);
                if (!k || !ef)
                        return SG_ERR_NOMEM;
                ef->kind = SG_EFFECT_CHANGELOG;
                ef->topic = p->tc->changelog_topic;
                ef->partition = p->partition;
                ef->key = k;
                ef->key_len = klen;
                if (ch[i].value) {
                        ef->value = sg_arena_dup(&e->arena, ch[i].value,
                                                 ch[i].value_len);
                        ef->value_len = ch[i].value_len;
                        if (!ef->value)
                                return SG_ERR_NOMEM;
                }
                size_t idx = (size_t)(ef - e->effects);
                if (idx >= e->effect_part_size) {
                        size_t sz = e->effect_size;
                        part_t **np = realloc(e->effect_part, sz * sizeof(*np));
                        if (!np)
                                return SG_ERR_NOMEM;
                        e->effect_part = np;
                        e->effect_part_size = sz;
                }
                e->effect_part[idx] = p;
        }
        return SG_OK;
}

void sg_eng_delivered(void *opaque, size_t index, int64_t offset) {
        sg_engine_t *e = opaque;
        if (index >= e->effect_cnt)
                return;
        /* processor.h: delivered() comes once for each delivered effect */
        assert(!e->effect_src[index].delivered && "effect delivered twice");
        e->effect_src[index].delivered = true;
        if (e->effects[index].kind != SG_EFFECT_CHANGELOG ||
            index >= e->effect_part_size)
                return;
        part_t *p = e->effect_part[index];
        if (offset > p->cl_last)
                p->cl_last = offset;
}

/* ---- restore from the changelog (both guarantees, semantics §6) ---------
 *
 * On every assignment, before the partition's input is processed, the loop
 * reads the partition's changelog from the store's checkpoint (or from the
 * start, when the checkpoint is missing or older than the log) to its
 * read_committed end, and the engine applies each record to LMDB. The
 * restore commits every SG_RESTORE_COMMIT_EVERY records with the checkpoint
 * of what it has applied, so a crash mid-restore resumes where it stopped.
 * Between two commits the records are gathered in a store batch
 * (sg_store_batch_add: decoded, and refused, as they arrive) and written
 * together just before the commit (sg_store_batch_flush: in key order, the
 * last record of each key): the commit holds the same state, and nothing
 * of a window is trusted before its commit anyway. */

/* The window between two commits: records, and bytes the batch holds.
 * A larger window writes each LMDB page the window's random keys land on
 * fewer times (copy-on-write: a commit rewrites every page it touched);
 * restore_bench on a 1 M-event changelog: 100,000 -> 300,000 records cost
 * 10 % fewer CPU-s and a smaller file (peak RSS 679 -> 573 MiB), 600,000 no
 * fewer CPU-s than 300,000. The byte bound keeps large values (aggregates
 * with long ids) from growing the batch past a few tens of MiB. */
#define SG_RESTORE_COMMIT_EVERY 500000
#define SG_RESTORE_COMMIT_BYTES ((size_t)64 << 20)

static sg_err_t restore_checkpoint(sg_engine_t *e, part_t *p, int64_t next,
                                   char *errstr, size_t errstr_size) {
        sg_meta_rec_t m;
        char why[400] = "";
        sg_err_t err = sg_store_batch_flush(e->rbatch, e->rtxn, &p->tp, why,
                                            sizeof(why));
        if (err) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%d] before offset %" PRId64 ": %s",
                        p->tc->changelog_topic, p->partition, next,
                        why[0] ? why : sg_err2str(err));
                return err;
        }
        err = sg_meta_get(e->rtxn, &p->tp, &m);
        if (err == SG_ERR_NOT_FOUND) {
                memset(&m, 0, sizeof(m));
                snprintf(m.group, sizeof(m.group), "%s",
                         e->conf->group_id ? e->conf->group_id : "");
                m.input_offset = -1;
                m.clock_ms = sg_eng_clock(e);
        } else if (err) {
                return err;
        }
        /* the restored meta carries the writer's key fingerprint */
        bool changed;
        if ((err = sg_eng_fp_check(e, p, &m, &changed, errstr, errstr_size)))
                return err;
        m.changelog_offset = next;
        m.changelog_epoch = p->cl_epoch;
        /* the id this restore checked or recorded, never one a restored
         * meta record carries (kafka_changelog.h "The changelog id") */
        m.has_changelog_id = p->has_cl_id;
        if (p->has_cl_id)
                m.changelog_id = p->cl_id;
        if ((err = sg_meta_put(e->rtxn, &p->tp, &m, errstr, errstr_size)))
                return err;
        err = sg_txn_commit(e->rtxn, errstr, errstr_size);
        e->rtxn = NULL;
        if (err)
                return err;
        p->meta = m;
        p->work = m;
        sg_eng_clock_floor(e, m.clock_ms);
        sg_store_writeback(e->store); /* a window's pages (store.h) */
        return SG_OK;
}

static void restore_window_room(sg_engine_t *e, int64_t next);

sg_err_t sg_eng_restore_begin(void *opaque, const char *topic,
                              int32_t partition, int64_t log_start,
                              int64_t log_end, int64_t *offsetp, char *errstr,
                              size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p) {
                sg_errf(errstr, errstr_size,
                        "restore of %s [%d] before its assignment", topic,
                        partition);
                return SG_ERR_INVALID;
        }
        sg_txn_abort(e->rtxn);
        e->rtxn = NULL;
        e->restore_cnt = 0;
        e->restore_to = log_end;
        /* the restore's write transaction: the checkpoint's first */
        sg_err_t err = sg_eng_checkpoint(e, errstr, errstr_size);
        if (err)
                return err;
        /* room for the first window, from where it will start (read
         * below again, in the write transaction, which decides) */
        sg_store_room_want(e->store, 0);
        sg_txn_t *rt;
        if ((err = sg_txn_begin(e->store, false, &rt, errstr, errstr_size)))
                return err;
        sg_meta_rec_t m0;
        int64_t from = log_start;
        if (!sg_meta_get(rt, &p->tp, &m0) && m0.changelog_offset >= log_start &&
            m0.changelog_offset <= log_end)
                from = m0.changelog_offset;
        sg_txn_abort(rt);
        restore_window_room(e, from);
        if (!e->rbatch && sg_store_batch_new(&e->rbatch)) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        sg_store_batch_clear(e->rbatch);
        err = sg_txn_begin(e->store, true, &e->rtxn, errstr, errstr_size);
        if (err)
                return err;
        sg_meta_rec_t m;
        err = sg_meta_get(e->rtxn, &p->tp, &m);
        int64_t cp = err == SG_OK ? m.changelog_offset : -1;
        if (err && err != SG_ERR_NOT_FOUND) {
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                return err;
        }
        /* the id record the store expects, delta or full restore alike: a
         * full restore's drop does not make another log acceptable */
        p->has_cl_id = err == SG_OK && m.has_changelog_id;
        if (p->has_cl_id)
                p->cl_id = m.changelog_id;
        if (cp >= log_start && cp <= log_end) {
                *offsetp = cp; /* the delta only */
                p->cl_epoch = m.changelog_epoch;
                sg_store_batch_expect(e->rbatch, (uint64_t)(log_end - cp));
                return SG_OK;
        }
        if (cp > log_end) {
                /* The store holds state the changelog no longer has (the
                 * topic was deleted and created again, or lost records):
                 * rebuilding from it would drop every dedup record and
                 * aggregate beyond its end, silently. Refuse; the operator
                 * chooses (semantics §6). */
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                sg_errf(errstr, errstr_size,
                        "store of %s [%d] is ahead of its changelog %s: the "
                        "store has applied it up to offset %" PRId64
                        ", the changelog ends at offset %" PRId64
                        " (deleted and created again, or it lost records): "
                        "refusing to drop the store's state (to start over "
                        "from the changelog as it is, drop the data_dir; "
                        "what is not in it is forgotten)",
                        topic, partition, p->tc->changelog_topic, cp, log_end);
                return SG_ERR_FOREIGN;
        }
        p->cl_epoch = -1;
        /* no usable checkpoint (new here, or the log moved on): rebuild the
         * partition's state from the whole changelog */
        if ((err = sg_store_partition_drop(e->rtxn, &p->tp, errstr,
                                           errstr_size))) {
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                return err;
        }
        *offsetp = log_start;
        sg_store_batch_expect(e->rbatch, (uint64_t)(log_end - log_start));
        return SG_OK;
}

/* Whether the restore window's records, written, would use half the
 * map's room: estimated as LMDB writes (one per record, and its index) on
 * top of the transaction's own (sg_txn_room_low). */
static bool restore_room_low(const sg_engine_t *e) {
        return sg_txn_room_low(e->rtxn, 2 * e->restore_cnt);
}

/* Before the next window's transaction, whose first record is at
 * @p next: room in the map for its writes as restore_room_low counts
 * them (a window cut short by a headroom sized for batches commits more
 * often, rewriting the pages its random keys land on each time, and
 * every growth of the map remaps the file: restore_bench on a 1 M-event
 * changelog, 57 windows of ~20,000 records and 15 remaps at a 16 MiB
 * headroom against 3 windows, 2.0 -> 0.9 CPU-s). */
static void restore_window_room(sg_engine_t *e, int64_t next) {
        int64_t left = e->restore_to - next;
        uint64_t recs = left < 0 ? 0
                        : left > SG_RESTORE_COMMIT_EVERY
                                ? SG_RESTORE_COMMIT_EVERY
                                : (uint64_t)left;
        sg_store_room_want(e->store, 2 * recs);
}

sg_err_t sg_eng_restore_apply(void *opaque, const char *topic,
                              int32_t partition, int64_t offset,
                              const void *key, size_t key_len,
                              const void *value, size_t value_len, char *errstr,
                              size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        sg_err_t err = SG_OK;
        cl_key_t ck;
        if (!p || !e->rtxn) {
                sg_errf(errstr, errstr_size, "no restore open for %s [%d]",
                        topic, partition);
                err = SG_ERR_INVALID;
        } else if (!cl_key_parse(key, key_len, &ck)) {
                sg_errf(errstr, errstr_size,
                        "changelog %s [%d] offset %" PRId64 ": empty key",
                        p->tc->changelog_topic, partition, offset);
                err = SG_ERR_CORRUPT;
        } else {
                /* a record that does not decode (or cannot be written)
                 * stops the restore, named by changelog, partition, offset;
                 * the store's "invalid input" is, for a changelog record, a
                 * record seqgate did not write (SG_ERR_CORRUPT, exit status 2:
                 * docs/guarantees.md "Corrupt changelog records") */
                char why[400] = "";
                err = sg_store_batch_add(e->rbatch, e->rtxn, &p->tp, ck.db,
                                         ck.suffix, ck.suffix_len, value,
                                         value_len, why, sizeof(why));
                if (err == SG_ERR_INVALID)
                        err = SG_ERR_CORRUPT;
                if (err)
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%d] offset %" PRId64 ": %s",
                                p->tc->changelog_topic, partition, offset,
                                why[0] ? why : sg_err2str(err));
        }
        /* the window also ends before it could outgrow the map's room:
         * MDB_MAP_FULL would cost it whole (sg_txn_room_low, counting what
         * the flush will write) */
        if (!err &&
            (++e->restore_cnt >= SG_RESTORE_COMMIT_EVERY ||
             sg_store_batch_bytes(e->rbatch) >= SG_RESTORE_COMMIT_BYTES ||
             (e->restore_cnt % 1024 == 0 && restore_room_low(e)))) {
                e->restore_cnt = 0;
                err = restore_checkpoint(e, p, offset + 1, errstr, errstr_size);
                if (!err) {
                        restore_window_room(e, offset + 1);
                        err = sg_txn_begin(e->store, true, &e->rtxn, errstr,
                                           errstr_size);
                }
        }
        if (err) {
                /* every error ends here: no write transaction may stay open
                 * (the loop grows the map on SG_ERR_MAP_FULL and restarts
                 * from restore_begin; anything else stops the restore) */
                sg_txn_abort(e->rtxn);
                e->rtxn = NULL;
                sg_store_batch_clear(e->rbatch);
                sg_store_room_want(e->store, 0);
        }
        return err;
}

/* The end of a restore, whatever its outcome: a write transaction still
 * open is dropped (the meta keeps the offset of what the last checkpoint
 * holds), and the window's memory and room are not kept between restores. */
static void restore_release(sg_engine_t *e) {
        sg_txn_abort(e->rtxn);
        e->rtxn = NULL;
        sg_store_room_want(e->store, 0);
        sg_store_batch_destroy(e->rbatch);
        e->rbatch = NULL;
}

void sg_eng_restore_abort(void *opaque, const char *topic, int32_t partition) {
        (void)topic;
        (void)partition;
        restore_release(opaque);
}

/* Keys a transaction of restore_seal copies at most. */
#define SG_RESTORE_SEAL_KEYS ((uint64_t)1 << 20)

/* The restored partition's dedup segments sealed before its first batch
 * (store.h sg_dedup_seal), a transaction per SG_RESTORE_SEAL_KEYS keys
 * copied. A restore leaves its keys in open and frozen segments, which
 * every lookup probes without a filter until sealed; left to the
 * batches' sweeps (a sixteenth of the backlog each), a restore of 10 M
 * keys made the first ~500,000 events after it cost 1.7x the CPU of a
 * small store's (docs/benchmarks.md). Sealing changes no record: the
 * restore's checkpoint (committed before) stays what it was. */
static sg_err_t restore_seal(sg_engine_t *e, part_t *p, char *errstr,
                             size_t errstr_size) {
        for (bool done = false; !done;) {
                sg_txn_t *t;
                char why[400] = "";
                sg_err_t err =
                        sg_txn_begin(e->store, true, &t, errstr, errstr_size);
                if (err)
                        return err;
                err = sg_dedup_seal(t, &p->tp, sg_eng_clock(e),
                                    p->tc->dedup_ttl_ms, SG_RESTORE_SEAL_KEYS,
                                    &done, why, sizeof(why));
                if (err) {
                        sg_txn_abort(t);
                        sg_errf(errstr, errstr_size,
                                "changelog %s [%d]: sealing the restored "
                                "dedup keys: %s",
                                p->tc->changelog_topic, p->partition,
                                why[0] ? why : sg_err2str(err));
                        return err;
                }
                if ((err = sg_txn_commit(t, errstr, errstr_size)))
                        return err;
                sg_store_writeback(e->store);
        }
        return SG_OK;
}

sg_err_t sg_eng_restore_end(void *opaque, const char *topic, int32_t partition,
                            int64_t end_offset, char *errstr,
                            size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p || !e->rtxn) {
                sg_errf(errstr, errstr_size, "no restore open for %s [%d]",
                        topic, partition);
                return SG_ERR_INVALID;
        }
        /* a parked event at or below its aggregate's L is void: its
         * writer resolved it, and its record outlived it (semantics §6) */
        uint64_t voided = 0;
        char why[400] = "";
        sg_err_t err = sg_store_batch_flush(e->rbatch, e->rtxn, &p->tp, why,
                                            sizeof(why));
        if (!err)
                err = sg_parked_void(e->rtxn, &p->tp, &voided, why,
                                     sizeof(why));
        if (err)
                sg_errf(errstr, errstr_size, "changelog %s [%d]: %s",
                        p->tc->changelog_topic, p->partition,
                        why[0] ? why : sg_err2str(err));
        else if (voided)
                sg_eng_log(e, SG_LOG_NOTICE, "restore_parked_void", p, "parked",
                           LF_U64, voided, NULL);
        if (!err)
                err = restore_checkpoint(e, p, end_offset, errstr, errstr_size);
        if (!err)
                err = restore_seal(e, p, errstr, errstr_size);
        if (!err) {
                /* the store holds what its changelog does (processor.h
                 * behind) */
                p->cl_behind = false;
                p->cp_dirty = false;
        }
        restore_release(e);
        return err;
}

/* at_least_once changelog fencing (kafka.h): the epoch kept with the
 * checkpoint restore_begin returned (restore_begin reads it; -1 after a full
 * restore's drop, or none), and the one to keep with the checkpoints from
 * now on. */
int64_t sg_eng_changelog_epoch_get(void *opaque, const char *topic,
                                   int32_t partition) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        return p ? p->cl_epoch : -1;
}

void sg_eng_changelog_epoch_set(void *opaque, const char *topic,
                                int32_t partition, int64_t epoch) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (p)
                p->cl_epoch = epoch;
}

/* The changelog id (kafka_changelog.h "The changelog id"): the id record the
 * store expects, as restore_begin read it from the meta, and the one to
 * keep from now on — during a restore with its checkpoints
 * (restore_checkpoint); after one (no batch or restore open) written into
 * the meta at once, so that nothing that reads the meta again (the loop's
 * second assign, at_least_once) finds it without. */
bool sg_eng_changelog_id_get(void *opaque, const char *topic, int32_t partition,
                             sg_changelog_id_t *out) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p || !p->has_cl_id)
                return false;
        *out = p->cl_id;
        return true;
}

sg_err_t sg_eng_changelog_id_set(void *opaque, const char *topic,
                                 int32_t partition, const sg_changelog_id_t *id,
                                 char *errstr, size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        if (!p || e->txn) {
                sg_errf(errstr, errstr_size, "changelog id of %s [%d]: %s",
                        topic, partition,
                        !p ? "partition not assigned" : "a batch is open");
                return SG_ERR_INVALID;
        }
        p->has_cl_id = id != NULL;
        if (id)
                p->cl_id = *id;
        if (e->rtxn)
                return SG_OK; /* with the restore's checkpoints */
        sg_txn_t *txn;
        sg_meta_rec_t m;
        sg_err_t err = sg_txn_begin(e->store, true, &txn, errstr, errstr_size);
        if (err)
                return err;
        if ((err = sg_meta_get(txn, &p->tp, &m))) {
                sg_txn_abort(txn);
                sg_errf(errstr, errstr_size,
                        "store of %s [%d]: cannot read partition meta (%s)",
                        topic, partition, sg_err2str(err));
                return err;
        }
        m.has_changelog_id = id != NULL;
        if (id)
                m.changelog_id = *id;
        err = sg_meta_put(txn, &p->tp, &m, errstr, errstr_size);
        if (err) {
                sg_txn_abort(txn);
                return err;
        }
        /* commit ends the transaction, also when it fails */
        if ((err = sg_txn_commit(txn, errstr, errstr_size)))
                return err;
        p->meta.has_changelog_id = p->work.has_changelog_id = id != NULL;
        if (id)
                p->meta.changelog_id = p->work.changelog_id = *id;
        return SG_OK;
}

/* The committed value of the store key a changelog record names (its key:
 * the database byte, then the LMDB key without the partition prefix), for
 * the at_least_once repair (kafka.h). *valuep: malloc'd copy, or NULL when
 * the key is absent (a tombstone). No batch or restore may be open. */
sg_err_t sg_eng_changelog_value(void *opaque, const char *topic,
                                int32_t partition, const void *key,
                                size_t key_len, void **valuep,
                                size_t *value_lenp, char *errstr,
                                size_t errstr_size) {
        sg_engine_t *e = opaque;
        part_t *p = sg_eng_part_find(e, topic, partition);
        *valuep = NULL;
        *value_lenp = 0;
        cl_key_t ck;
        bool parsed = cl_key_parse(key, key_len, &ck);
        if (!p || !parsed || e->in_batch || e->rtxn) {
                sg_errf(errstr, errstr_size, "changelog value of %s [%d]: %s",
                        topic, partition,
                        !p        ? "partition not assigned"
                        : !parsed ? "empty key"
                                  : "a batch or restore is open");
                return SG_ERR_INVALID;
        }
        /* the live state: the checkpoint's transaction when one is open */
        sg_txn_t *txn;
        bool owned;
        sg_err_t err = sg_engine_view(e, &txn, &owned, errstr, errstr_size);
        if (err)
                return err;
        const void *v;
        size_t vl;
        err = sg_store_get_change(txn, &p->tp, ck.db, ck.suffix, ck.suffix_len,
                                  &v, &vl);
        if (err == SG_OK) {
                if (!(*valuep = malloc(vl ? vl : 1)))
                        err = SG_ERR_NOMEM;
                else {
                        memcpy(*valuep, v, vl);
                        *value_lenp = vl;
                }
        } else if (err == SG_ERR_NOT_FOUND) {
                err = SG_OK;
        } else {
                sg_errf(errstr, errstr_size, "changelog value of %s [%d]: %s",
                        topic, partition, sg_err2str(err));
        }
        if (owned)
                sg_txn_abort(txn);
        return err;
}
