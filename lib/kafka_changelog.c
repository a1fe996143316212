/*
 * kafka_changelog.c — the at_least_once changelog protocol (kafka_changelog.h):
 * record framing and the restore reader's rule; the changelog id (pure: no
 * Kafka, no LMDB). Then the writer's half, the loop's: a batch's framed
 * records, the contiguity check and the markers (sg_loop_changelog_write,
 * kafka_int.h), which kafka_batch.c calls once the batch's output and DLQ
 * records were handed to the producer.
 */
#include "kafka_changelog.h"

#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void sg_changelog_u64_put(unsigned char out[8], int64_t v) {
        uint64_t u = (uint64_t)v;
        for (int i = 7; i >= 0; i--) {
                out[i] = (unsigned char)(u & 0xff);
                u >>= 8;
        }
}

int64_t sg_changelog_u64_get(const unsigned char in[8]) {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
                u = (u << 8) | in[i];
        return (int64_t)u;
}

void sg_changelog_frame_make(unsigned char out[SG_CHANGELOG_FRAME_LEN],
                             int64_t epoch, int64_t seq) {
        sg_changelog_u64_put(out, epoch);
        sg_changelog_u64_put(out + 8, seq);
}

void sg_changelog_key_make(unsigned char out[SG_CHANGELOG_KEY_LEN], char kind,
                           int64_t epoch) {
        out[0] = SG_CHANGELOG_CONTROL;
        out[1] = (unsigned char)kind;
        sg_changelog_u64_put(out + 2, epoch);
}

void sg_changelog_marker_key_make(unsigned char out[SG_CHANGELOG_MARKER_LEN],
                                  int64_t epoch, int64_t seq) {
        out[0] = SG_CHANGELOG_CONTROL;
        out[1] = SG_CHANGELOG_MARKER;
        sg_changelog_u64_put(out + 2, epoch);
        sg_changelog_u64_put(out + 10, seq);
}

/* ---- the changelog id ------------------------------------------------- */

sg_err_t sg_changelog_id_new(unsigned char id[SG_CHANGELOG_ID_LEN],
                             char *errstr, size_t errstr_size) {
        size_t got = 0;
        while (got < SG_CHANGELOG_ID_LEN) {
                ssize_t n = getrandom(id + got, SG_CHANGELOG_ID_LEN - got, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        sg_errf(errstr, errstr_size,
                                "getrandom for a changelog id: %s",
                                strerror(errno));
                        return SG_ERR_IO;
                }
                got += (size_t)n;
        }
        return SG_OK;
}

void sg_changelog_id_key_make(unsigned char out[SG_CHANGELOG_ID_KEY_LEN],
                              const unsigned char id[SG_CHANGELOG_ID_LEN]) {
        out[0] = SG_CHANGELOG_CONTROL;
        out[1] = SG_CHANGELOG_ID;
        memcpy(out + 2, id, SG_CHANGELOG_ID_LEN);
}

bool sg_changelog_id_key_parse(const void *key, size_t key_len,
                               unsigned char id[SG_CHANGELOG_ID_LEN]) {
        const unsigned char *k = key;
        if (!k || key_len != SG_CHANGELOG_ID_KEY_LEN ||
            k[0] != SG_CHANGELOG_CONTROL || k[1] != SG_CHANGELOG_ID)
                return false;
        if (id)
                memcpy(id, k + 2, SG_CHANGELOG_ID_LEN);
        return true;
}

const char *sg_changelog_id_hex(const unsigned char id[SG_CHANGELOG_ID_LEN],
                                char out[SG_CHANGELOG_ID_HEX]) {
        sg_hex_encode(id, SG_CHANGELOG_ID_LEN, out);
        return out;
}

sg_err_t sg_changelog_id_check(const sg_changelog_id_t *want, int64_t log_start,
                               int64_t offset, const void *key, size_t key_len,
                               const char *topic, const char *changelog,
                               int32_t partition, char *errstr,
                               size_t errstr_size) {
        unsigned char got[SG_CHANGELOG_ID_LEN];
        if (offset == want->offset &&
            sg_changelog_id_key_parse(key, key_len, got) &&
            memcmp(got, want->id, SG_CHANGELOG_ID_LEN) == 0)
                return SG_OK;
        if (want->offset < log_start)
                return SG_ERR_NOT_FOUND;
        char w[SG_CHANGELOG_ID_HEX], g[SG_CHANGELOG_ID_HEX + 40];
        if (offset != want->offset)
                snprintf(g, sizeof(g), "no record there");
        else if (sg_changelog_id_key_parse(key, key_len, got))
                sg_changelog_id_hex(got, g);
        else
                snprintf(g, sizeof(g), "a record that is no changelog id");
        sg_errf(errstr, errstr_size,
                "changelog %s [%" PRId32 "] is not the one the store of %s "
                "[%" PRId32 "] was restored from: the store expects "
                "changelog id %s at offset %" PRId64 ", the changelog has "
                "%s (deleted and created again, or another cluster): "
                "refusing to restore from it (to start over from the "
                "changelog as it is, drop the data_dir; what is not in it "
                "is forgotten)",
                changelog, partition, topic, partition,
                sg_changelog_id_hex(want->id, w), want->offset, g);
        return SG_ERR_FOREIGN;
}

/* A record held back until its batch is known to be complete. */
typedef struct held {
        int64_t offset;
        unsigned char *key; /* key, then value, in one allocation */
        size_t key_len;
        unsigned char *value; /* NULL: tombstone */
        size_t value_len;
} held_t;

struct sg_changelog_reader {
        int64_t floor;
        /* the batch being read, (held_epoch, held_seq) */
        held_t *held;
        size_t held_cnt, held_cap;
        int64_t held_epoch, held_seq;
        /* keys of void records */
        sg_changelog_key_t *voids;
        size_t void_cnt, void_cap;
        bool voids_sorted;
        int64_t *confirms;
        size_t confirm_cnt, confirm_cap;
        bool unfinished; /* the log ended in (held_epoch, held_seq) */
        bool has_id;     /* the first id record read */
        sg_changelog_id_t id;
        sg_changelog_counts_t counts;
        /* void records not yet known to be repaired (a standby's
         * checkpoint stops at the first: sg_changelog_reader_settled) */
        int64_t void_from;  /* the first one's offset, -1 none */
        int64_t void_last;  /* the last one's offset */
        int64_t void_epoch; /* the newest epoch among them */
};

sg_err_t sg_changelog_reader_new(int64_t floor, sg_changelog_reader_t **rp) {
        sg_changelog_reader_t *r = calloc(1, sizeof(*r));
        if (!r)
                return SG_ERR_NOMEM;
        r->floor = floor;
        r->voids_sorted = true;
        r->void_from = r->void_last = r->void_epoch = -1;
        *rp = r;
        return SG_OK;
}

static void held_clear(sg_changelog_reader_t *r) {
        for (size_t i = 0; i < r->held_cnt; i++)
                free(r->held[i].key);
        r->held_cnt = 0;
}

void sg_changelog_reader_destroy(sg_changelog_reader_t *r) {
        if (!r)
                return;
        held_clear(r);
        free(r->held);
        for (size_t i = 0; i < r->void_cnt; i++)
                free(r->voids[i].key);
        free(r->voids);
        free(r->confirms);
        free(r);
}

static sg_err_t void_add(sg_changelog_reader_t *r, int64_t offset,
                         int64_t epoch, const void *key, size_t len) {
        r->counts.void_cnt++;
        if (r->void_from < 0) {
                r->void_from = offset;
                r->void_epoch = epoch;
        }
        if (offset > r->void_last)
                r->void_last = offset;
        if (epoch > r->void_epoch)
                r->void_epoch = epoch;
        if (r->void_cnt == r->void_cap) {
                size_t cap = r->void_cap ? r->void_cap * 2 : 64;
                sg_changelog_key_t *v = realloc(r->voids, cap * sizeof(*v));
                if (!v)
                        return SG_ERR_NOMEM;
                r->voids = v;
                r->void_cap = cap;
        }
        unsigned char *k = malloc(len ? len : 1);
        if (!k)
                return SG_ERR_NOMEM;
        memcpy(k, key, len);
        r->voids[r->void_cnt++] = (sg_changelog_key_t){.key = k, .len = len};
        r->voids_sorted = false;
        return SG_OK;
}

/* The batch held back is void: its writer stopped before it completed. */
static sg_err_t held_void(sg_changelog_reader_t *r) {
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < r->held_cnt; i++)
                err = void_add(r, r->held[i].offset, r->held_epoch,
                               r->held[i].key, r->held[i].key_len);
        held_clear(r);
        return err;
}

/* The batch held back is complete: applied in offset order. */
static sg_err_t held_apply(sg_changelog_reader_t *r, bool by_marker,
                           sg_changelog_apply_cb *apply, void *opaque,
                           char *errstr, size_t errstr_size) {
        sg_err_t err = SG_OK;
        /* A batch its marker proves complete, of a newer epoch than every
         * void record and wholly after them: a marker is written only for
         * records that landed right after their owner's previous record,
         * back to its repair, which landed right at the end of its
         * restore; so that restore read the void records and the repair
         * (kafka_claim.c) rewrote their keys: they need not be read
         * again. (A batch proved complete by a later batch's record is no
         * such proof: it may be the one whose landing elsewhere made its
         * owner restore and repair again.) */
        if (by_marker && r->void_from >= 0 && r->held_cnt &&
            r->held_epoch > r->void_epoch && r->held[0].offset > r->void_last)
                r->void_from = -1;
        for (size_t i = 0; !err && i < r->held_cnt; i++) {
                const held_t *h = &r->held[i];
                err = apply(opaque, h->offset, h->key, h->key_len, h->value,
                            h->value_len, errstr, errstr_size);
                if (!err)
                        r->counts.applied++;
        }
        held_clear(r);
        return err;
}

static sg_err_t held_add(sg_changelog_reader_t *r, int64_t offset,
                         const void *key, size_t key_len, const void *value,
                         size_t value_len) {
        if (r->held_cnt == r->held_cap) {
                size_t cap = r->held_cap ? r->held_cap * 2 : 64;
                held_t *h = realloc(r->held, cap * sizeof(*h));
                if (!h)
                        return SG_ERR_NOMEM;
                r->held = h;
                r->held_cap = cap;
        }
        unsigned char *buf = malloc(key_len + (value ? value_len : 0) + 1);
        if (!buf)
                return SG_ERR_NOMEM;
        memcpy(buf, key, key_len);
        if (value && value_len)
                memcpy(buf + key_len, value, value_len);
        r->held[r->held_cnt++] = (held_t){
                .offset = offset,
                .key = buf,
                .key_len = key_len,
                .value = value ? buf + key_len : NULL,
                .value_len = value ? value_len : 0,
        };
        return SG_OK;
}

/* A newer epoch begins: what is held back is void, FLOOR moves up. */
static sg_err_t floor_raise(sg_changelog_reader_t *r, int64_t epoch) {
        if (epoch <= r->floor)
                return SG_OK;
        r->floor = epoch;
        return held_void(r);
}

static sg_err_t feed_control(sg_changelog_reader_t *r, int64_t offset,
                             const unsigned char *k, size_t key_len,
                             const void *value, size_t value_len,
                             sg_changelog_apply_cb *apply, void *opaque,
                             char *errstr, size_t errstr_size) {
        r->counts.control++;
        if (value && !r->has_id &&
            sg_changelog_id_key_parse(k, key_len, r->id.id)) {
                r->has_id = true;
                r->id.offset = offset;
                return SG_OK;
        }
        if (k[1] == SG_CHANGELOG_MARKER && key_len == SG_CHANGELOG_MARKER_LEN) {
                if (!value)
                        return SG_OK; /* an owner dropping an old marker */
                int64_t epoch = sg_changelog_u64_get(k + 2);
                int64_t seq = sg_changelog_u64_get(k + 10);
                sg_err_t err = floor_raise(r, epoch);
                if (err || epoch < r->floor)
                        return err; /* a zombie's marker */
                if (r->held_cnt && r->held_epoch == epoch && r->held_seq <= seq)
                        return held_apply(r, true, apply, opaque, errstr,
                                          errstr_size);
                return SG_OK;
        }
        if (key_len != SG_CHANGELOG_KEY_LEN)
                return SG_OK; /* a claim (or a kind this version lacks) */
        int64_t epoch = sg_changelog_u64_get(k + 2);
        if (k[1] == SG_CHANGELOG_CONFIRM) {
                if (!value)
                        return SG_OK; /* a tombstone of an old confirm */
                if (r->confirm_cnt == r->confirm_cap) {
                        size_t cap = r->confirm_cap ? r->confirm_cap * 2 : 16;
                        int64_t *c = realloc(r->confirms, cap * sizeof(*c));
                        if (!c)
                                return SG_ERR_NOMEM;
                        r->confirms = c;
                        r->confirm_cap = cap;
                }
                r->confirms[r->confirm_cnt++] = epoch;
                return floor_raise(r, epoch);
        }
        (void)value_len;
        return SG_OK;
}

sg_err_t sg_changelog_reader_feed(sg_changelog_reader_t *r, int64_t offset,
                                  const void *key, size_t key_len,
                                  const void *value, size_t value_len,
                                  const void *frame, size_t frame_len,
                                  sg_changelog_apply_cb *apply, void *opaque,
                                  char *errstr, size_t errstr_size) {
        const unsigned char *k = key;
        sg_err_t err;
        if (key_len >= 2 && k[0] == SG_CHANGELOG_CONTROL)
                return feed_control(r, offset, k, key_len, value, value_len,
                                    apply, opaque, errstr, errstr_size);
        if (!frame || frame_len != SG_CHANGELOG_FRAME_LEN) {
                /* exactly_once: committed in a transaction, so whole; a
                 * batch held back before it was never completed */
                if ((err = held_void(r)))
                        return err;
                err = apply(opaque, offset, key, key_len, value,
                            value ? value_len : 0, errstr, errstr_size);
                if (!err)
                        r->counts.applied++;
                return err;
        }
        int64_t epoch = sg_changelog_u64_get(frame);
        int64_t seq = sg_changelog_u64_get((const unsigned char *)frame + 8);
        if (epoch < r->floor)
                return void_add(r, offset, epoch, key,
                                key_len); /* a zombie's */
        if ((err = floor_raise(r, epoch)))
                return err;
        if (r->held_cnt && r->held_seq < seq) {
                /* a later batch of the same writer: the one held back is
                 * complete */
                if ((err = held_apply(r, false, apply, opaque, errstr,
                                      errstr_size)))
                        return err;
        } else if (r->held_cnt && r->held_seq > seq) {
                /* an earlier batch after a later one: never written so by
                 * one owner; not trusted */
                return void_add(r, offset, epoch, key, key_len);
        }
        r->held_epoch = epoch;
        r->held_seq = seq;
        return held_add(r, offset, key, key_len, value, value_len);
}

sg_err_t sg_changelog_reader_finish(sg_changelog_reader_t *r) {
        r->unfinished = r->held_cnt > 0;
        return held_void(r);
}

bool sg_changelog_reader_unfinished(const sg_changelog_reader_t *r,
                                    int64_t *epochp, int64_t *seqp) {
        if (r->unfinished && epochp)
                *epochp = r->held_epoch;
        if (r->unfinished && seqp)
                *seqp = r->held_seq;
        return r->unfinished;
}

int64_t sg_changelog_reader_floor(const sg_changelog_reader_t *r) {
        return r->floor;
}

int64_t sg_changelog_reader_settled(const sg_changelog_reader_t *r,
                                    int64_t next) {
        int64_t s = next;
        if (r->held_cnt && r->held[0].offset < s)
                s = r->held[0].offset;
        if (r->void_from >= 0 && r->void_from < s)
                s = r->void_from;
        return s;
}

static int key_cmp(const void *a, const void *b) {
        const sg_changelog_key_t *x = a, *y = b;
        size_t n = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->key, y->key, n);
        if (c)
                return c;
        return x->len < y->len ? -1 : x->len > y->len;
}

size_t sg_changelog_reader_void_keys(sg_changelog_reader_t *r,
                                     const sg_changelog_key_t **keysp) {
        if (!r->voids_sorted && r->void_cnt > 1) {
                qsort(r->voids, r->void_cnt, sizeof(*r->voids), key_cmp);
                size_t n = 1;
                for (size_t i = 1; i < r->void_cnt; i++) {
                        if (!key_cmp(&r->voids[i], &r->voids[n - 1]))
                                free(r->voids[i].key);
                        else
                                r->voids[n++] = r->voids[i];
                }
                r->void_cnt = n;
        }
        r->voids_sorted = true;
        *keysp = r->voids;
        return r->void_cnt;
}

size_t sg_changelog_reader_confirms(const sg_changelog_reader_t *r,
                                    const int64_t **epochsp) {
        *epochsp = r->confirms;
        return r->confirm_cnt;
}

bool sg_changelog_reader_id(const sg_changelog_reader_t *r,
                            sg_changelog_id_t *out) {
        if (r->has_id && out)
                *out = r->id;
        return r->has_id;
}

sg_changelog_counts_t
sg_changelog_reader_counts(const sg_changelog_reader_t *r) {
        return r->counts;
}

/* ------------------------------------------------------------------ */
/* the writer: a batch's changelog records and markers (the loop)     */

/** The input partition (index into loop->parts) changelog effect @p ef is
 *  for, or SIZE_MAX. */
static size_t loop_changelog_part(sg_loop_t *loop, const sg_effect_t *ef) {
        const sg_topic_config_t *tc =
                sg_loop_topic_of_changelog(loop, ef->topic);
        if (!tc || ef->partition < 0)
                return SIZE_MAX;
        return sg_loop_part(loop, tc->name, ef->partition);
}

/** sg_loop_changelog_write, step 1: counts each partition's changelog
 *  records of the batch (part.cl_cnt), refusing a partition this instance
 *  does not own, and opens the partition's next batch sequence. */
static sg_err_t loop_cl_count(sg_loop_t *loop, const sg_effect_t *efs,
                              size_t cnt, char *errstr, size_t errstr_size) {
        for (size_t i = 0; i < loop->part_cnt; i++)
                loop->parts[i].cl_cnt = 0;
        for (size_t i = 0; i < cnt; i++) {
                if (efs[i].kind != SG_EFFECT_CHANGELOG)
                        continue;
                size_t pi = loop_changelog_part(loop, &efs[i]);
                if (pi == SIZE_MAX || !loop->parts[pi].assigned ||
                    loop->parts[pi].cl_epoch < 0 || loop->parts[pi].cl_fenced ||
                    loop->parts[pi].cl_next < 0) {
                        sg_errf(errstr, errstr_size,
                                "changelog record for %s [%" PRId32 "], a "
                                "partition this instance does not own",
                                efs[i].topic, efs[i].partition);
                        return SG_ERR_INVALID;
                }
                if (loop->parts[pi].cl_cnt++ == 0)
                        loop->parts[pi].cl_seq++; /* never used again */
        }
        return SG_OK;
}

/** sg_loop_changelog_write, step 2: reserves the delivery reports of the
 *  batch's @p cnt effects and of the *nxp markers of two batches back the
 *  batch drops. */
static sg_err_t loop_cl_reserve(sg_loop_t *loop, size_t cnt, size_t *nxp,
                                char *errstr, size_t errstr_size) {
        /* Each partition's batch also drops this owner's marker of two
         * batches back (kafka_changelog.h); those records are reported after
         * the effects' (opaque index cnt + k). */
        size_t nx = 0;
        for (size_t i = 0; i < loop->part_cnt; i++)
                nx += loop->parts[i].cl_cnt > 0 && loop->parts[i].cl_m2 > 0;
        if (!sg_loop_dr_reserve(loop, cnt + nx)) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        for (size_t k = 0; k < nx; k++) {
                loop->dr_offs[cnt + k] = -1;
                loop->dr_errs[cnt + k] = RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        loop->dr_cnt = cnt + nx;
        *nxp = nx;
        return SG_OK;
}

/** sg_loop_changelog_write, step 3: produces the tombstones of the markers
 *  of two batches back, then the batch's changelog records, each framed
 *  with its partition's epoch and the batch's sequence. */
static sg_err_t loop_cl_produce(sg_loop_t *loop, const sg_effect_t *efs,
                                size_t cnt, char *errstr, size_t errstr_size) {
        sg_err_t err = SG_OK;
        for (size_t i = 0, k = 0; i < loop->part_cnt && !err; i++) {
                sg_part_t *p = &loop->parts[i];
                if (p->cl_cnt == 0 || p->cl_m2 == 0)
                        continue;
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, p->topic);
                unsigned char key[SG_CHANGELOG_MARKER_LEN];
                sg_changelog_marker_key_make(key, p->cl_epoch, p->cl_m2);
                sg_effect_t tomb = {.kind = SG_EFFECT_CHANGELOG,
                                    .topic = tc->changelog_topic,
                                    .partition = p->partition,
                                    .key = key,
                                    .key_len = sizeof(key)};
                err = sg_loop_produce(loop, &tomb, cnt + k++, NULL, errstr,
                                      errstr_size);
                p->cl_cnt++;
        }
        for (size_t i = 0; i < cnt && !err; i++) {
                if (efs[i].kind != SG_EFFECT_CHANGELOG)
                        continue;
                sg_part_t *p = &loop->parts[loop_changelog_part(loop, &efs[i])];
                unsigned char frame[SG_CHANGELOG_FRAME_LEN];
                sg_changelog_frame_make(frame, p->cl_epoch, p->cl_seq);
                err = sg_loop_produce(loop, &efs[i], i, frame, errstr,
                                      errstr_size);
        }
        return err;
}

/** The @p k-th partition (from 0) whose batch dropped a marker of two
 *  batches back: the one delivery report cnt + k is for. */
static sg_part_t *loop_cl_tomb_part(sg_loop_t *loop, size_t k) {
        for (size_t j = 0; j < loop->part_cnt; j++)
                if (loop->parts[j].cl_cnt > 0 && loop->parts[j].cl_m2 > 0 &&
                    k-- == 0)
                        return &loop->parts[j];
        return NULL;
}

/** sg_loop_changelog_write, step 4: checks every partition's changelog
 *  records of the batch (the @p cnt effects' and the @p nx tombstones')
 *  landed contiguously from where this owner's previous record ended
 *  (part.cl_next); part.cl_first and cl_last must be reset to -1. */
static sg_err_t loop_cl_check_landed(sg_loop_t *loop, const sg_effect_t *efs,
                                     size_t cnt, size_t nx, char *errstr,
                                     size_t errstr_size) {
        for (size_t i = 0; i < cnt + nx; i++) {
                if (i < cnt && efs[i].kind != SG_EFFECT_CHANGELOG)
                        continue;
                sg_part_t *p = i < cnt ? &loop->parts[loop_changelog_part(
                                                 loop, &efs[i])]
                                       : loop_cl_tomb_part(loop, i - cnt);
                int64_t o = loop->dr_offs[i];
                if (p->cl_first < 0 || o < p->cl_first)
                        p->cl_first = o;
                if (o > p->cl_last)
                        p->cl_last = o;
        }
        for (size_t i = 0; i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (p->cl_cnt == 0)
                        continue;
                if (p->cl_first != p->cl_next ||
                    p->cl_last != p->cl_next + (int64_t)p->cl_cnt - 1) {
                        sg_errf(errstr, errstr_size,
                                "changelog of %s [%" PRId32 "]: this batch's "
                                "records landed at %" PRId64 "..%" PRId64
                                ", expected from %" PRId64 ": another "
                                "writer (a zombie, or a newer owner) wrote "
                                "in between",
                                p->topic, p->partition, p->cl_first, p->cl_last,
                                p->cl_next);
                        return SG_ERR_KAFKA;
                }
        }
        return SG_OK;
}

/** sg_loop_changelog_write, step 5: writes one marker per partition with
 *  changelog records in the batch, checks each landed right after the
 *  batch's records, then moves the partition's cl_next, cl_m2, cl_m1 on. */
static sg_err_t loop_cl_markers(sg_loop_t *loop, char *errstr,
                                size_t errstr_size) {
        sg_err_t err = SG_OK;
        size_t nm = 0;
        for (size_t i = 0; i < loop->part_cnt; i++)
                nm += loop->parts[i].cl_cnt > 0;
        sg_send_t *m = calloc(nm, sizeof(*m));
        unsigned char(*mk)[SG_CHANGELOG_MARKER_LEN + 8] =
                calloc(nm, SG_CHANGELOG_MARKER_LEN + 8);
        if (!m || !mk) {
                sg_errf(errstr, errstr_size, "out of memory");
                err = SG_ERR_NOMEM;
        }
        for (size_t i = 0, k = 0; !err && i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (p->cl_cnt == 0)
                        continue;
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, p->topic);
                sg_changelog_marker_key_make(mk[k], p->cl_epoch, p->cl_seq);
                sg_changelog_u64_put(mk[k] + SG_CHANGELOG_MARKER_LEN,
                                     p->cl_seq);
                m[k].ef = (sg_effect_t){
                        .kind = SG_EFFECT_CHANGELOG,
                        .topic = tc->changelog_topic,
                        .partition = p->partition,
                        .key = mk[k],
                        .key_len = SG_CHANGELOG_MARKER_LEN,
                        .value = mk[k] + SG_CHANGELOG_MARKER_LEN,
                        .value_len = 8,
                };
                k++;
        }
        if (!err)
                err = sg_loop_send(loop, m, nm, errstr, errstr_size);
        for (size_t i = 0, k = 0; !err && i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (p->cl_cnt == 0)
                        continue;
                if (m[k].offset != p->cl_last + 1) {
                        sg_errf(errstr, errstr_size,
                                "changelog of %s [%" PRId32 "]: the batch's "
                                "marker landed at %" PRId64
                                ", expected %" PRId64
                                ": another writer wrote in between",
                                p->topic, p->partition, m[k].offset,
                                p->cl_last + 1);
                        err = SG_ERR_KAFKA;
                }
                k++;
        }
        for (size_t i = 0, k = 0; !err && i < loop->part_cnt; i++) {
                sg_part_t *p = &loop->parts[i];
                if (p->cl_cnt == 0)
                        continue;
                p->cl_next = m[k++].offset + 1;
                p->cl_m2 = p->cl_m1;
                p->cl_m1 = p->cl_seq;
        }
        free(m);
        free(mk);
        return err;
}

/**
 * at_least_once, once the batch's @p nout output and DLQ records were
 * handed to the producer (their deliveries outstanding): its @p ncl
 * changelog records, each framed with its partition's epoch and this
 * batch's sequence (kafka_changelog.h); then every one of the nout + ncl
 * records delivered, each
 * partition's right where this owner's previous record ended (nobody else
 * wrote since: no newer owner's claim between, no zombie's record) — then
 * one marker per partition, delivered and contiguous too. The processor is
 * told every effect's offset before the markers go out. Any failure from
 * the first changelog record on marks the partitions for a restore
 * (sg_loop_restore: the records of an unfinished batch are void, their keys
 * rewritten) before they are judged again.
 */
sg_err_t sg_loop_changelog_write(sg_loop_t *loop, const sg_effect_t *efs,
                                 size_t cnt, size_t ncl, size_t nout,
                                 char *errstr, size_t errstr_size) {
        sg_err_t err;
        size_t nx = 0;
        if ((err = loop_cl_count(loop, efs, cnt, errstr, errstr_size)) ||
            (err = loop_cl_reserve(loop, cnt, &nx, errstr, errstr_size))) {
                /* the output in flight lands (or fails) before the batch
                 * is read again, as after any failed attempt */
                rd_kafka_flush(loop->producer,
                               (int)loop->conf->delivery_timeout_ms);
                return err;
        }
        /* From the first changelog record on, a failure leaves the
         * partition's changelog with an unfinished batch. The records go
         * out while the output's deliveries are still outstanding (one
         * wait for both, not two): until its marker a batch's records are
         * void to every reader, and the marker waits for every
         * acknowledgement. */
        err = loop_cl_produce(loop, efs, cnt, errstr, errstr_size);
        if (err)
                rd_kafka_flush(loop->producer,
                               (int)loop->conf->delivery_timeout_ms);
        else
                err = sg_loop_await(loop, nout + ncl + nx, errstr, errstr_size);
        /* contiguity, per partition */
        for (size_t i = 0; i < loop->part_cnt; i++)
                loop->parts[i].cl_first = loop->parts[i].cl_last = -1;
        if (!err)
                err = loop_cl_check_landed(loop, efs, cnt, nx, errstr,
                                           errstr_size);
        if (!err)
                sg_loop_report_delivered(loop, efs, cnt);
        /* the markers */
        if (!err)
                err = loop_cl_markers(loop, errstr, errstr_size);
        if (err) {
                for (size_t i = 0; i < loop->part_cnt; i++)
                        if (loop->parts[i].cl_cnt > 0) {
                                loop->parts[i].restore = true;
                                loop->restore_needed = true;
                        }
                return err;
        }
        loop->kafka_committed = true;
        return SG_OK;
}
