/*
 * test_changelog.c — the at_least_once changelog protocol (kafka_changelog.h):
 * the reader's rule case by case, then a seeded simulation of owners,
 * crashes, zombies, repairs and log compaction that checks what a restore
 * reads is always what the last legitimate owner committed — from the
 * whole log, from a checkpoint, and from a compacted log.
 */
#include "kafka_changelog.h"
#include "testutil.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* a toy log and a toy store                                           */

#define NK 8 /* store keys "\x00" 'a'+k */
#define LOG_MAX 40000

typedef struct rec {
        int64_t off;
        unsigned char key[SG_CHANGELOG_MARKER_LEN];
        size_t klen;
        bool tomb;
        char val[24];
        size_t vlen;
        bool framed;
        unsigned char frame[SG_CHANGELOG_FRAME_LEN];
        bool removed; /* compacted away */
} rec_t;

static rec_t LOG[LOG_MAX];
static int64_t NLOG;

typedef struct store {
        bool has[NK];
        char val[NK][24];
} store_t;

static bool store_eq(const store_t *a, const store_t *b) {
        for (int k = 0; k < NK; k++) {
                if (a->has[k] != b->has[k])
                        return false;
                if (a->has[k] && strcmp(a->val[k], b->val[k]))
                        return false;
        }
        return true;
}

static int64_t append(const unsigned char *key, size_t klen, const char *val,
                      size_t vlen, bool framed, int64_t epoch, int64_t seq) {
        ck_assert_int_lt(NLOG, LOG_MAX);
        rec_t *r = &LOG[NLOG];
        memset(r, 0, sizeof(*r));
        r->off = NLOG;
        memcpy(r->key, key, klen);
        r->klen = klen;
        r->tomb = val == NULL;
        if (val) {
                memcpy(r->val, val, vlen);
                r->vlen = vlen;
        }
        r->framed = framed;
        if (framed)
                sg_changelog_frame_make(r->frame, epoch, seq);
        return NLOG++;
}

static int64_t append_data(int k, const char *val, int64_t epoch, int64_t seq) {
        unsigned char key[2] = {0, (unsigned char)('a' + k)};
        return append(key, 2, val, val ? strlen(val) : 0, true, epoch, seq);
}

static int64_t append_ctl(char kind, int64_t epoch, bool tomb) {
        unsigned char key[SG_CHANGELOG_KEY_LEN];
        sg_changelog_key_make(key, kind, epoch);
        if (kind == SG_CHANGELOG_CLAIM)
                return append(key, 2, "inst", 4, false, 0, 0);
        return append(key, SG_CHANGELOG_KEY_LEN, tomb ? NULL : "inst",
                      tomb ? 0 : 4, false, 0, 0);
}

static int64_t append_marker_tomb(int64_t epoch, int64_t seq, bool tomb) {
        unsigned char key[SG_CHANGELOG_MARKER_LEN], v[8];
        sg_changelog_marker_key_make(key, epoch, seq);
        sg_changelog_u64_put(v, seq);
        return append(key, SG_CHANGELOG_MARKER_LEN,
                      tomb ? NULL : (const char *)v, tomb ? 0 : 8, false, 0, 0);
}

static int64_t append_marker(int64_t epoch, int64_t seq) {
        return append_marker_tomb(epoch, seq, false);
}

static sg_err_t apply_to_store(void *opaque, int64_t offset, const void *key,
                               size_t key_len, const void *value,
                               size_t value_len, char *es, size_t n) {
        store_t *s = opaque;
        const unsigned char *k = key;
        (void)offset, (void)es, (void)n;
        ck_assert_uint_eq(key_len, 2);
        ck_assert_int_eq(k[0], 0);
        int i = k[1] - 'a';
        ck_assert(i >= 0 && i < NK);
        s->has[i] = value != NULL;
        if (value) {
                ck_assert_uint_lt(value_len, sizeof(s->val[i]));
                memcpy(s->val[i], value, value_len);
                s->val[i][value_len] = '\0';
        }
        return SG_OK;
}

/** Reads LOG[from..) (records not compacted away) into @p s with a reader
 *  starting at @p floor; returns the reader (caller destroys). */
static sg_changelog_reader_t *read_log(int64_t from, int64_t floor,
                                       store_t *s) {
        sg_changelog_reader_t *r;
        char es[128];
        ck_assert_int_eq(sg_changelog_reader_new(floor, &r), SG_OK);
        for (int64_t o = from; o < NLOG; o++) {
                const rec_t *x = &LOG[o];
                if (x->removed)
                        continue;
                ck_assert_int_eq(sg_changelog_reader_feed(
                                         r, x->off, x->key, x->klen,
                                         x->tomb ? NULL : x->val, x->vlen,
                                         x->framed ? x->frame : NULL,
                                         x->framed ? SG_CHANGELOG_FRAME_LEN : 0,
                                         apply_to_store, s, es, sizeof(es)),
                                 SG_OK);
        }
        ck_assert_int_eq(sg_changelog_reader_finish(r), SG_OK);
        return r;
}

static bool void_has(sg_changelog_reader_t *r, int k) {
        const sg_changelog_key_t *keys;
        size_t n = sg_changelog_reader_void_keys(r, &keys);
        for (size_t i = 0; i < n; i++)
                if (keys[i].len == 2 && keys[i].key[1] == 'a' + k)
                        return true;
        return false;
}

static void reset_log(void) {
        NLOG = 0;
}

/* ------------------------------------------------------------------ */
/* the rule, case by case                                              */

START_TEST(complete_batches_apply_in_order) {
        reset_log();
        append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false);
        append_data(0, "a1", 0, 1);
        append_data(1, "b1", 0, 1);
        append_marker(0, 1);
        append_data(0, "a2", 0, 2);
        append_marker(0, 2);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(s.has[0] && !strcmp(s.val[0], "a2"));
        ck_assert(s.has[1] && !strcmp(s.val[1], "b1"));
        sg_changelog_counts_t c = sg_changelog_reader_counts(r);
        ck_assert_uint_eq(c.applied, 3);
        ck_assert_uint_eq(c.void_cnt, 0);
        ck_assert_uint_eq(c.control, 4);
        ck_assert_int_eq(sg_changelog_reader_floor(r), 0);
        const int64_t *ep;
        ck_assert_uint_eq(sg_changelog_reader_confirms(r, &ep), 1);
        ck_assert_int_eq(ep[0], 0);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* A batch cut short (no marker, nothing later from its writer) is void —
 * also when the next owner's claim and confirm follow it. */
START_TEST(batch_without_marker_is_void) {
        reset_log();
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false);
        append_data(0, "a1", 0, 1);
        append_marker(0, 1);
        append_data(0, "a2", 0, 2); /* crash here */
        append_data(1, "b2", 0, 2);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a1"));
        ck_assert(!s.has[1]);
        ck_assert(void_has(r, 0) && void_has(r, 1));
        sg_changelog_reader_destroy(r);

        int64_t e = append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, e, false);
        append_data(2, "c1", e, 1);
        append_marker(e, 1);
        memset(&s, 0, sizeof(s));
        r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a1") && !s.has[1] && s.has[2]);
        ck_assert_int_eq(sg_changelog_reader_floor(r), e);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* Feeds LOG[from..to) to @p r without finishing (a tail: the log goes
 * on). */
static void feed_range(sg_changelog_reader_t *r, int64_t from, int64_t to,
                       store_t *s) {
        char es[128];
        for (int64_t o = from; o < to; o++) {
                const rec_t *x = &LOG[o];
                ck_assert_int_eq(sg_changelog_reader_feed(
                                         r, x->off, x->key, x->klen,
                                         x->tomb ? NULL : x->val, x->vlen,
                                         x->framed ? x->frame : NULL,
                                         x->framed ? SG_CHANGELOG_FRAME_LEN : 0,
                                         apply_to_store, s, es, sizeof(es)),
                                 SG_OK);
        }
}

/* A standby's checkpoint on a log that goes on (semantics §6 "Standby
 * replicas"): never past a batch still held back (it may complete: read
 * again from there) nor past a void record (the next owner's restore must
 * see it to repair its keys) until a newer owner's batch, proved complete
 * by its marker, shows that owner's repair covered it. */
START_TEST(settled_for_a_tail) {
        reset_log();
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false); /* 0 */
        append_data(0, "a1", 0, 1);                 /* 1 */
        append_marker(0, 1);                        /* 2 */
        int64_t held = append_data(0, "a2", 0, 2);  /* 3: no marker yet */
        store_t s = {0};
        sg_changelog_reader_t *r;
        ck_assert_int_eq(sg_changelog_reader_new(-1, &r), SG_OK);
        feed_range(r, 0, NLOG, &s);
        ck_assert(!strcmp(s.val[0], "a1"));
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), held);
        append_marker(0, 2); /* 4: the batch completes */
        feed_range(r, held + 1, NLOG, &s);
        ck_assert(!strcmp(s.val[0], "a2"));
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), NLOG);
        int64_t cut = append_data(1, "b3", 0, 3); /* 5: its writer dies */
        int64_t e = append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, e, false); /* b3 void */
        append_data(2, "c1", e, 1); /* the new owner's repair batch */
        feed_range(r, cut, NLOG, &s);
        ck_assert(!s.has[1]);
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), cut);
        /* its batch 2 proves batch 1 complete, but only a marker proves
         * that the batch landed right after its owner's restore */
        append_data(3, "d2", e, 2);
        feed_range(r, NLOG - 1, NLOG, &s);
        ck_assert(!strcmp(s.val[2], "c1"));
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), cut);
        /* its marker: the repair covered b3, which need not be read
         * again */
        append_marker(e, 2);
        feed_range(r, NLOG - 1, NLOG, &s);
        ck_assert(!strcmp(s.val[3], "d2"));
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), NLOG);
        /* a zombie of the old epoch writes after it: void again, until
         * the owner's next batch is proved by its marker */
        int64_t z = append_data(0, "Z", 0, 4);
        append_data(1, "b5", e, 3);
        feed_range(r, z, NLOG, &s);
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), z);
        append_marker(e, 3);
        feed_range(r, NLOG - 1, NLOG, &s);
        ck_assert(!strcmp(s.val[0], "a2") && !strcmp(s.val[1], "b5"));
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), NLOG);
        sg_changelog_reader_destroy(r);
        /* unframed (exactly_once) records settle at once */
        ck_assert_int_eq(sg_changelog_reader_new(-1, &r), SG_OK);
        reset_log();
        unsigned char key[2] = {0, 'a'};
        append(key, 2, "x", 1, false, 0, 0);
        feed_range(r, 0, NLOG, &s);
        ck_assert_int_eq(sg_changelog_reader_settled(r, NLOG), NLOG);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* Compaction removed a batch's marker (a later marker of the epoch has the
 * same key): a record of a later batch of the same writer proves the
 * earlier one complete. */
START_TEST(later_batch_proves_earlier_complete) {
        reset_log();
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false);
        append_data(0, "a1", 0, 1);
        append_data(1, "b1", 0, 1);
        append_data(1, "b3", 0, 3); /* batches 2, and the markers, gone */
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a1"));
        ck_assert(!strcmp(s.val[1], "b1")); /* batch 3 has no marker yet */
        ck_assert(void_has(r, 1));
        sg_changelog_reader_destroy(r);
        append_marker(0, 3);
        memset(&s, 0, sizeof(s));
        r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[1], "b3"));
        ck_assert_uint_eq(sg_changelog_reader_counts(r).void_cnt, 0);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* A zombie: epoch 0's owner writes on after epoch 5 confirmed — its batch
 * held back at the confirm and everything after it (its marker included)
 * is void. */
START_TEST(zombie_records_and_markers_are_void) {
        reset_log();
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false);
        append_data(0, "a1", 0, 1);
        append_marker(0, 1);
        append_data(1, "b2", 0, 2); /* in flight when the group moved on */
        append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, 5, false);
        append_data(0, "Z", 0, 2); /* the zombie finishes its batch */
        append_marker(0, 2);
        append_data(2, "c1", 5, 1);
        append_marker(5, 1);
        append_data(3, "Z", 0, 3); /* and starts another */
        append_marker(0, 3);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a1"));
        ck_assert(!s.has[1] && !s.has[3]);
        ck_assert(!strcmp(s.val[2], "c1"));
        ck_assert(void_has(r, 0) && void_has(r, 1) && void_has(r, 3));
        ck_assert(!void_has(r, 2));
        ck_assert_int_eq(sg_changelog_reader_floor(r), 5);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* A confirm tombstoned (and compacted away): the newer epoch's first record
 * raises FLOOR itself; a late confirm of an older epoch lowers nothing;
 * claims and tombstones are control records only. */
START_TEST(floor_from_records_and_late_confirms) {
        reset_log();
        append_data(0, "a1", 3, 1);
        append_marker(3, 1);
        append_data(1, "b1", 3, 2); /* never completed */
        append_data(2, "c1", 9, 1); /* epoch 9: its confirm is gone */
        append_ctl(SG_CHANGELOG_CONFIRM, 3, true);  /* tombstone */
        append_ctl(SG_CHANGELOG_CONFIRM, 7, false); /* late, older */
        append_marker(9, 1);
        append_data(3, "d1", 7, 1); /* epoch 7 < FLOOR 9 */
        append_marker(7, 1);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a1") && !s.has[1]);
        ck_assert(!strcmp(s.val[2], "c1") && !s.has[3]);
        ck_assert_int_eq(sg_changelog_reader_floor(r), 9);
        const int64_t *ep;
        ck_assert_uint_eq(sg_changelog_reader_confirms(r, &ep), 1);
        ck_assert_int_eq(ep[0], 7);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* The FLOOR a checkpoint kept: a zombie's records after it are void. */
START_TEST(floor_from_checkpoint) {
        reset_log();
        append_data(0, "Z", 2, 4);
        append_marker(2, 4);
        append_data(1, "b", 8, 3);
        append_marker(8, 3);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, 8, &s);
        ck_assert(!s.has[0] && !strcmp(s.val[1], "b"));
        sg_changelog_reader_destroy(r);
}
END_TEST

/* exactly_once records (no frame) apply at once; an unfinished
 * at_least_once batch before them is void. Tombstones apply. */
START_TEST(unframed_records_apply_at_once) {
        reset_log();
        append_data(0, "a1", 0, 1);
        unsigned char k1[2] = {0, 'b'}, k0[2] = {0, 'a'};
        append(k1, 2, "b-eos", 5, false, 0, 0);
        append(k0, 2, NULL, 0, false, 0, 0);
        store_t s = {0};
        strcpy(s.val[0], "old");
        s.has[0] = true;
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!s.has[0]); /* the tombstone */
        ck_assert(!strcmp(s.val[1], "b-eos"));
        ck_assert(void_has(r, 0));
        sg_changelog_reader_destroy(r);
}
END_TEST

/* One owner never writes an earlier batch after a later one: such a
 * record is not trusted. Void keys are reported once each. */
START_TEST(earlier_sequence_is_void_and_keys_unique) {
        reset_log();
        append_data(0, "a3", 4, 3);
        append_data(0, "a2", 4, 2);
        append_data(0, "a2", 4, 2);
        append_marker(4, 3);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        ck_assert(!strcmp(s.val[0], "a3"));
        const sg_changelog_key_t *keys;
        ck_assert_uint_eq(sg_changelog_reader_void_keys(r, &keys), 1);
        ck_assert_uint_eq(sg_changelog_reader_counts(r).void_cnt, 2);
        sg_changelog_reader_destroy(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* simulation: owners, crashes, zombies, repairs, compaction           */

typedef struct owner {
        int64_t epoch; /* -1: never owned */
        int64_t seq;
        store_t store;      /* what its LMDB committed */
        int64_t checkpoint; /* changelog offset its store reflects */
        int64_t cp_floor;   /* FLOOR kept with the checkpoint */
        int64_t m1, m2;     /* its last two markers' sequences, 0 none */
} owner_t;

#define NOWN 4

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(rng_state >> 33) % n;
}

/** Kafka's cleaner over the records before @p upto: a record goes if a
 *  later one of the same key is in that range; with @p drop_tombstones,
 *  tombstones before @p tomb_upto go too (delete.retention.ms: a store
 *  whose checkpoint is older than a removed tombstone misses the delete —
 *  in either guarantee — so the simulation keeps tombstones every
 *  owner's checkpoint has passed only). */
static void compact(int64_t upto, bool drop_tombstones, int64_t tomb_upto) {
        for (int64_t i = 0; i < upto; i++) {
                rec_t *x = &LOG[i];
                if (x->removed)
                        continue;
                for (int64_t j = i + 1; j < upto; j++)
                        if (!LOG[j].removed && LOG[j].klen == x->klen &&
                            !memcmp(LOG[j].key, x->key, x->klen)) {
                                x->removed = true;
                                break;
                        }
                if (!x->removed && drop_tombstones && x->tomb && i < tomb_upto)
                        x->removed = true;
        }
}

static void dump_store(const char *what, const store_t *s) {
        fprintf(stderr, "%s:", what);
        for (int k = 0; k < NK; k++)
                fprintf(stderr, " %c=%s", 'a' + k, s->has[k] ? s->val[k] : "-");
        fprintf(stderr, "\n");
}

static void dump_log(const store_t *got, const store_t *want,
                     const owner_t *o) {
        dump_store("got ", got);
        dump_store("want", want);
        fprintf(stderr,
                "owner epoch %" PRId64 " checkpoint %" PRId64 " floor %" PRId64
                "\n",
                o->epoch, o->checkpoint, o->cp_floor);
        for (int64_t i = 0; i < NLOG; i++) {
                const rec_t *x = &LOG[i];
                fprintf(stderr, "%4" PRId64 "%s ", i, x->removed ? "x" : " ");
                if (x->key[0] == SG_CHANGELOG_CONTROL)
                        fprintf(stderr, "%c %" PRId64 " %s", x->key[1],
                                x->klen >= 10 ? sg_changelog_u64_get(x->key + 2)
                                              : -1,
                                x->tomb ? "tomb " : "");
                else
                        fprintf(stderr, "%c=%s", x->key[1],
                                x->tomb ? "-" : x->val);
                if (x->key[0] == SG_CHANGELOG_CONTROL && x->key[1] == 'M')
                        fprintf(stderr, "seq %" PRId64,
                                sg_changelog_u64_get(x->key + 10));
                if (x->framed)
                        fprintf(stderr, " [%" PRId64 ",%" PRId64 "]",
                                sg_changelog_u64_get(x->frame),
                                sg_changelog_u64_get(x->frame + 8));
                fprintf(stderr, "\n");
        }
}

/** Owner @p o reads the log — from its checkpoint with the FLOOR kept
 *  there, or (@p full) the whole of it — checks that gives @p legit, and
 *  repairs: the void keys' values, tombstones of older confirms, in a batch
 *  of its own. Returns the offset up to which every void record is
 *  repaired. */
static int64_t restore_repair_cut(owner_t *o, const store_t *legit, bool full,
                                  int cut) {
        store_t s = full ? (store_t){0} : o->store;
        sg_changelog_reader_t *r =
                read_log(full ? 0 : o->checkpoint, full ? -1 : o->cp_floor, &s);
        if (!store_eq(&s, legit) && getenv("SG_TEST_VERBOSE"))
                dump_log(&s, legit, o);
        ck_assert_msg(store_eq(&s, legit),
                      "restore (%s) differs from the "
                      "last owner's store",
                      full ? "full" : "delta");
        ck_assert_int_eq(sg_changelog_reader_floor(r), o->epoch);
        o->store = s;
        const sg_changelog_key_t *keys;
        size_t nk = sg_changelog_reader_void_keys(r, &keys);
        const int64_t *ep;
        size_t nc = sg_changelog_reader_confirms(r, &ep), nold = 0;
        for (size_t i = 0; i < nc; i++)
                nold += ep[i] < o->epoch;
        if (nk || nold) {
                /* the owner's own batch the log ends in unfinished is
                 * repaired under its sequence (sg_loop_repair) */
                int64_t ue, useq;
                if (!sg_changelog_reader_unfinished(r, &ue, &useq) ||
                    ue != o->epoch || useq != o->seq)
                        o->seq++;
                if (o->m2)
                        append_marker_tomb(o->epoch, o->m2, true);
                for (size_t i = 0; i < nk; i++) {
                        int k = keys[i].key[1] - 'a';
                        if ((int)i == cut) {
                                /* a crash before the repair's marker */
                                sg_changelog_reader_destroy(r);
                                return NLOG;
                        }
                        append_data(k, s.has[k] ? s.val[k] : NULL, o->epoch,
                                    o->seq);
                }
                for (size_t i = 0; i < nc; i++)
                        if (ep[i] < o->epoch)
                                append_ctl(SG_CHANGELOG_CONFIRM, ep[i], true);
                append_marker(o->epoch, o->seq);
                o->m2 = o->m1;
                o->m1 = o->seq;
        }
        sg_changelog_reader_destroy(r);
        o->checkpoint = NLOG;
        o->cp_floor = o->epoch;
        return NLOG;
}

static int64_t restore_repair(owner_t *o, const store_t *legit, bool full) {
        return restore_repair_cut(o, legit, full, -1);
}

/** Owner @p o takes the partition: claim, confirm, restore (from its
 *  checkpoint when it has one, at random), repair. */
static int64_t take_over(owner_t *o, const store_t *legit) {
        o->epoch = append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, o->epoch, false);
        o->seq = 0;
        o->m1 = o->m2 = 0;
        return restore_repair(o, legit, o->checkpoint < 0 || rnd(2));
}

/** A batch of 1..3 changes by @p o (after a tombstone of its marker of
 *  two batches back); @p cut: stop after that many records (-1: none);
 *  @p marker: write the marker (an owner does when its records landed
 *  right after its previous ones; a zombie's never do: a newer owner's
 *  claim and confirm are in between). Returns whether it completed (its
 *  store committed). */
static bool batch_m(owner_t *o, int cut, int tag, bool marker) {
        store_t next = o->store;
        int n = 1 + (int)rnd(3);
        o->seq++;
        if (o->m2)
                append_marker_tomb(o->epoch, o->m2, true);
        for (int i = 0; i < n; i++) {
                if (i == cut)
                        return false;
                int k = (int)rnd(NK);
                char v[24];
                snprintf(v, sizeof(v), "v%d.%d", tag, i);
                bool tomb = rnd(6) == 0;
                append_data(k, tomb ? NULL : v, o->epoch, o->seq);
                next.has[k] = !tomb;
                if (!tomb)
                        strcpy(next.val[k], v);
        }
        if (cut == n || !marker)
                return false; /* records all in, marker not */
        append_marker(o->epoch, o->seq);
        o->m2 = o->m1;
        o->m1 = o->seq;
        o->store = next;
        o->checkpoint = NLOG;
        return true;
}

static bool batch(owner_t *o, int cut, int tag) {
        return batch_m(o, cut, tag, true);
}

START_TEST(simulation_owners_crashes_zombies_compaction) {
        for (uint64_t seed = 1; seed <= 150; seed++) {
                rng_state = seed;
                reset_log();
                owner_t own[NOWN];
                for (int i = 0; i < NOWN; i++)
                        own[i] = (owner_t){
                                .epoch = -1, .checkpoint = -1, .cp_floor = -1};
                int cur = 0;
                store_t legit = {0};
                int64_t repaired = take_over(&own[cur], &legit);
                bool dirty = false; /* void records after `repaired` */
                for (int step = 0; step < 80; step++) {
                        uint32_t what = rnd(20);
                        if (what < 12) {
                                if (dirty) {
                                        /* the owner finds another writer's
                                         * records between its own: reads
                                         * again from its checkpoint and
                                         * repairs before going on */
                                        /* every branch below sets
                                         * `repaired` again */
                                        (void)restore_repair(&own[cur], &legit,
                                                             false);
                                        dirty = false;
                                }
                                /* 1 in 8 batches stops half way */
                                int cut = rnd(8) == 0 ? (int)rnd(4) : -1;
                                if (batch(&own[cur], cut, step)) {
                                        legit = own[cur].store;
                                        repaired = NLOG;
                                } else if (rnd(2)) {
                                        /* a failed delivery (its output's
                                         * or its changelog's): the same
                                         * owner restores and repairs */
                                        repaired = restore_repair(
                                                &own[cur], &legit, false);
                                } else if (rnd(2)) {
                                        /* the same, and a crash cuts the
                                         * repair short: someone takes
                                         * over */
                                        (void)restore_repair_cut(&own[cur],
                                                                 &legit, false,
                                                                 (int)rnd(3));
                                        cur = (int)rnd(NOWN);
                                        repaired = take_over(&own[cur], &legit);
                                } else {
                                        /* a crash: someone takes over */
                                        cur = (int)rnd(NOWN);
                                        repaired = take_over(&own[cur], &legit);
                                }
                        } else if (what < 15) {
                                /* the partition moves (or comes back) */
                                cur = (int)rnd(NOWN);
                                repaired = take_over(&own[cur], &legit);
                                dirty = false;
                        } else if (what < 16) {
                                /* it moves while the owner's batch is in
                                 * flight: the records land before the new
                                 * owner's claim, the marker after its
                                 * confirm (the old owner's check fails:
                                 * its store does not commit) */
                                int n = (int)rnd(NOWN);
                                if (n == cur)
                                        continue;
                                owner_t old = own[cur];
                                ck_assert(!batch_m(&old, -1, step, false));
                                repaired = take_over(&own[n], &legit);
                                append_marker(old.epoch, old.seq);
                                own[cur].seq = old.seq;
                                cur = n;
                                dirty = true;
                        } else if (what < 19) {
                                /* a zombie: an older owner finishes a batch
                                 * with its old epoch and stale store; its
                                 * records do not follow its own, so it
                                 * writes no marker */
                                int z = (int)rnd(NOWN);
                                if (z == cur || own[z].epoch < 0)
                                        continue;
                                owner_t zc = own[z]; /* commits nothing */
                                batch_m(&zc, rnd(3) == 0 ? (int)rnd(4) : -1,
                                        1000 + step, false);
                                own[z].seq = zc.seq;
                                dirty = true;
                        } else {
                                /* the cleaner, over what is repaired */
                                int64_t low = repaired;
                                for (int i = 0; i < NOWN; i++)
                                        if (own[i].checkpoint >= 0 &&
                                            own[i].checkpoint < low)
                                                low = own[i].checkpoint;
                                compact(repaired, rnd(2), low);
                        }
                        /* every read of the log gives the last legitimate
                         * owner's store */
                        store_t s = {0};
                        sg_changelog_reader_t *r = read_log(0, -1, &s);
                        if (!store_eq(&s, &legit) && getenv("SG_TEST_VERBOSE"))
                                dump_log(&s, &legit, &own[cur]);
                        ck_assert_msg(store_eq(&s, &legit),
                                      "seed %" PRIu64 " step %d: a full "
                                      "read differs from the owner's store",
                                      seed, step);
                        sg_changelog_reader_destroy(r);
                }
        }
}
END_TEST

/* ------------------------------------------------------------------ */
/* the changelog id (kafka_changelog.h "The changelog id")                   */

static int64_t append_id(unsigned char fill) {
        unsigned char id[SG_CHANGELOG_ID_LEN], key[SG_CHANGELOG_ID_KEY_LEN],
                v[8];
        memset(id, fill, sizeof(id));
        sg_changelog_id_key_make(key, id);
        sg_changelog_u64_put(v, 1700000000000);
        return append(key, sizeof(key), (const char *)v, 8, false, 0, 0);
}

/* The reader keeps the first id record, never applies one (apply_to_store
 * asserts every key it gets is a store key), and FLOOR and the batches
 * around it go on as without it. */
START_TEST(id_records_read_not_applied) {
        reset_log();
        append_ctl(SG_CHANGELOG_CLAIM, 0, false);
        append_ctl(SG_CHANGELOG_CONFIRM, 0, false);
        int64_t at = append_id(0xab);
        append_data(0, "a1", 0, 1);
        append_id(0xcd); /* a second one (a zombie's, an upgrade's) */
        append_marker(0, 1);
        store_t s = {0};
        sg_changelog_reader_t *r = read_log(0, -1, &s);
        sg_changelog_id_t id;
        ck_assert(sg_changelog_reader_id(r, &id));
        ck_assert_int_eq(id.offset, at);
        for (int i = 0; i < SG_CHANGELOG_ID_LEN; i++)
                ck_assert_uint_eq(id.id[i], 0xab);
        ck_assert(s.has[0] && !strcmp(s.val[0], "a1"));
        ck_assert_uint_eq(sg_changelog_reader_counts(r).applied, 1);
        sg_changelog_reader_destroy(r);
        /* a read from past it (a delta) has none */
        memset(&s, 0, sizeof(s));
        r = read_log(at + 1, 0, &s);
        ck_assert(sg_changelog_reader_id(r, &id));
        ck_assert_uint_eq(id.id[0], 0xcd);
        sg_changelog_reader_destroy(r);
        r = read_log(at + 3, 0, &s);
        ck_assert(!sg_changelog_reader_id(r, NULL));
        sg_changelog_reader_destroy(r);
}
END_TEST

START_TEST(id_key_and_random_ids) {
        unsigned char a[SG_CHANGELOG_ID_LEN], b[SG_CHANGELOG_ID_LEN],
                key[SG_CHANGELOG_ID_KEY_LEN], got[SG_CHANGELOG_ID_LEN];
        char es[128], hex[SG_CHANGELOG_ID_HEX];
        ck_assert_int_eq(sg_changelog_id_new(a, es, sizeof(es)), SG_OK);
        ck_assert_int_eq(sg_changelog_id_new(b, es, sizeof(es)), SG_OK);
        ck_assert(memcmp(a, b, sizeof(a)) != 0);
        sg_changelog_id_key_make(key, a);
        ck_assert_uint_eq(key[0], SG_CHANGELOG_CONTROL);
        ck_assert_uint_eq(key[1], SG_CHANGELOG_ID);
        ck_assert(sg_changelog_id_key_parse(key, sizeof(key), got));
        ck_assert(memcmp(got, a, sizeof(a)) == 0);
        ck_assert(!sg_changelog_id_key_parse(key, sizeof(key) - 1, got));
        key[1] = SG_CHANGELOG_MARKER;
        ck_assert(!sg_changelog_id_key_parse(key, sizeof(key), got));
        ck_assert(!sg_changelog_id_key_parse(NULL, 0, got));
        memset(a, 0x0f, sizeof(a));
        ck_assert_str_eq(sg_changelog_id_hex(a, hex),
                         "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f");
}
END_TEST

/* sg_changelog_id_check: the record at the offset the store keeps is its
 * id record, or the changelog is refused; a record past the log start
 * cannot be checked. */
START_TEST(id_check_outcomes) {
        sg_changelog_id_t want = {.offset = 7};
        memset(want.id, 0x11, sizeof(want.id));
        unsigned char key[SG_CHANGELOG_ID_KEY_LEN], other[SG_CHANGELOG_ID_LEN];
        char es[512];
        sg_changelog_id_key_make(key, want.id);
        ck_assert_int_eq(sg_changelog_id_check(&want, 0, 7, key, sizeof(key),
                                               "in", "cl", 3, es, sizeof(es)),
                         SG_OK);
        /* another id there: another log */
        memset(other, 0x22, sizeof(other));
        sg_changelog_id_key_make(key, other);
        es[0] = '\0';
        ck_assert_int_eq(sg_changelog_id_check(&want, 0, 7, key, sizeof(key),
                                               "in", "cl", 3, es, sizeof(es)),
                         SG_ERR_FOREIGN);
        ck_assert_ptr_nonnull(strstr(es, "changelog cl [3]"));
        ck_assert_ptr_nonnull(strstr(es, "store of in [3]"));
        ck_assert_ptr_nonnull(
                strstr(es, "11111111111111111111111111111111 at offset 7"));
        ck_assert_ptr_nonnull(strstr(es, "22222222222222222222222222222222"));
        /* the right id at another offset, a record that is no id, none */
        sg_changelog_id_key_make(key, want.id);
        ck_assert_int_eq(sg_changelog_id_check(&want, 0, 8, key, sizeof(key),
                                               "in", "cl", 3, es, sizeof(es)),
                         SG_ERR_FOREIGN);
        ck_assert_ptr_nonnull(strstr(es, "no record there"));
        ck_assert_int_eq(sg_changelog_id_check(&want, 0, 7, "\x01k", 2, "in",
                                               "cl", 3, es, sizeof(es)),
                         SG_ERR_FOREIGN);
        ck_assert_ptr_nonnull(strstr(es, "no changelog id"));
        ck_assert_int_eq(sg_changelog_id_check(&want, 0, -1, NULL, 0, "in",
                                               "cl", 3, es, sizeof(es)),
                         SG_ERR_FOREIGN);
        /* the log starts past it: not known */
        ck_assert_int_eq(sg_changelog_id_check(&want, 8, 9, "\x01k", 2, "in",
                                               "cl", 3, es, sizeof(es)),
                         SG_ERR_NOT_FOUND);
}
END_TEST

int main(void) {
        Suite *s = suite_create("changelog");
        TCase *tc = tcase_create("reader");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, complete_batches_apply_in_order);
        tcase_add_test(tc, batch_without_marker_is_void);
        tcase_add_test(tc, later_batch_proves_earlier_complete);
        tcase_add_test(tc, settled_for_a_tail);
        tcase_add_test(tc, zombie_records_and_markers_are_void);
        tcase_add_test(tc, floor_from_records_and_late_confirms);
        tcase_add_test(tc, floor_from_checkpoint);
        tcase_add_test(tc, unframed_records_apply_at_once);
        tcase_add_test(tc, earlier_sequence_is_void_and_keys_unique);
        tcase_add_test(tc, simulation_owners_crashes_zombies_compaction);
        tcase_add_test(tc, id_records_read_not_applied);
        tcase_add_test(tc, id_key_and_random_ids);
        tcase_add_test(tc, id_check_outcomes);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
