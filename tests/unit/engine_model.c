/*
 * engine_model.c — the engine property-test harness (see engine_model.h).
 *
 * Layout: configuration variants and the source of choices; the model
 * (logs, changelog, accounting state); the store views the checks read;
 * the five invariants; the operations (records, releases, replies,
 * batches, clock, rebalances, restarts, restores); generation from a
 * source; replay, settling, shrinking and the trace.
 *
 * Self-contained for the fuzz build (tests/fuzz/fuzz_engine.c includes
 * this file and is compiled with the library's sources): library headers
 * are included by their path from here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, strdup: also when built without meson */
#endif
#include "engine_model.h"

#include "../../lib/config.h"
#include "../../lib/engine.h"
#include "../../lib/envelope.h"
#include "../../lib/metrics.h"
#include "../../lib/store.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define T0 1700000000000LL              /* a multiple of MODEL_QUANTUM_MS */
#define CLOCK_MAX (T0 + 3LL * 86400000) /* well inside the 7-day dedup TTL */
#define NSRC (MODEL_PARTS + 1)          /* input partitions, reply topic */
#define REPLY_SRC MODEL_PARTS
#define TOPIC "orders"
#define REPLY_TOPIC "snap.rep"
#define REQUEST_TOPIC "snap.req"
#define NTYPES 7 /* the state machine's six event types and one unknown */
#define META_CHECKPOINT_AT 264 /* meta value: changelog_offset, 8 bytes */
/* The databases as sg_store_foreach() numbers them: the state ones SG_DB_*,
 * and the derived indexes (store.h). Keys name a hash by its first
 * SG_KEY_HASH_LEN bytes (HL). */
enum { DB_SINCE = 4, DB_SNAPDUE = 7, NDB = 8 };
#define HL SG_KEY_HASH_LEN

/* ---- configuration variants ------------------------------------------- */

#define SM_JSON                                                                \
        "\"state_machine\":{\"initial\":\"NEW\",\"states\":[\"NEW\","          \
        "\"CREATED\",\"PAID\",\"SHIPPED\",\"COMPLETED\",\"CANCELLED\","        \
        "\"RETURNING\"],\"transitions\":["                                     \
        "{\"type\":\"order.created\",\"from\":[\"NEW\"],\"to\":\"CREATED\"},"  \
        "{\"type\":\"order.paid\",\"from\":[\"CREATED\"],\"to\":\"PAID\"},"    \
        "{\"type\":\"order.shipped\",\"from\":[\"PAID\"],\"to\":\"SHIPPED\"}," \
        "{\"type\":\"order.completed\",\"from\":[\"SHIPPED\"],"                \
        "\"to\":\"COMPLETED\"},"                                               \
        "{\"type\":\"order.cancelled\",\"from\":[\"CREATED\",\"RETURNING\"],"  \
        "\"to\":\"CANCELLED\"},"                                               \
        "{\"type\":\"order.returning\",\"from\":[\"SHIPPED\"],"                \
        "\"to\":\"RETURNING\"}]}"

/* max_attempts 2, retries after 100 ms ± 50 %: see MODEL_QUANTUM_MS */
#define SNAP_JSON                                                              \
        "\"snapshot\":{\"source\":\"kafka\",\"request_topic\":\"snap.req\","   \
        "\"reply_topic\":\"snap.rep\",\"timeout_ms\":2000,"                    \
        "\"max_attempts\":2,\"backoff_ms\":100,\"backoff_max_ms\":100,"        \
        "\"max_in_flight\":2}"

#define GAP(policy) "\"gap_timeout_ms\":1000,\"gap_policy\":\"" policy "\""

typedef struct variant {
        const char *name;
        bool eos;
        const char *topic_json; /* members of topics.orders */
        /* store.checkpoint_interval_ms (semantics §6 checkpoints): -1 the
         * default (1000 ms of processing time, which MOP_CLOCK moves), 0
         * every batch, 600000 mostly at the other checkpoints (MOP_CHECKPOINT,
         * revoke, assign, restore, a clean restart) */
        int checkpoint_ms;
} variant_t;

static const variant_t variants[] = {
        {"strict_dlq", true, "\"ordering\":{" GAP("dlq") "}", -1},
        {"strict_skip_sm", true, "\"ordering\":{" GAP("skip") "}," SM_JSON,
         600000},
        {"strict_hold_alo", false, "\"ordering\":{" GAP("hold") "}", 600000},
        {"latest_wins_sm", true,
         "\"ordering\":{\"mode\":\"latest_wins\",\"first_version\":0}"
         "," SM_JSON,
         0},
        {"none", true, "\"ordering\":{\"mode\":\"none\"}", -1},
        {"snapshot_dlq_sm", true,
         "\"ordering\":{" GAP("dlq") "}," SNAP_JSON "," SM_JSON, 600000},
        {"snapshot_hold_alo", false,
         "\"ordering\":{" GAP("hold") "}," SNAP_JSON, -1},
        {"trust_first_seen", true,
         "\"ordering\":{" GAP(
                 "skip") ",\"new_aggregate\":\"trust_first_seen\"}",
         0},
        {"caps_dlq", true,
         "\"ordering\":{" GAP("dlq") ",\"max_parked_per_aggregate\":2,"
                                     "\"on_park_overflow\":\"dlq\"}",
         -1},
        {"caps_pause_alo", false,
         "\"ordering\":{" GAP("dlq") ",\"max_parked_per_aggregate\":2,"
                                     "\"max_parked_total\":3}",
         600000},
        {"epoch_continue", true,
         "\"ordering\":{" GAP("dlq") ",\"epoch\":\"ce:epoch\"}", 600000},
        {"epoch_restart_alo", false,
         "\"ordering\":{" GAP("dlq") ",\"epoch\":\"ce:epoch\","
                                     "\"epoch_versions\":\"restart\"}",
         -1},
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

size_t model_variant_count(void) {
        return NVARIANTS;
}

const char *model_variant_name(size_t v) {
        return v < NVARIANTS ? variants[v].name : "?";
}

static const char *const type_names[NTYPES] = {
        "order.created",    "order.paid",      "order.shipped",
        "order.completed",  "order.cancelled", "order.returning",
        "order.teleported", /* not in the state machine */
};

/* ---- the source of choices -------------------------------------------- */

void model_src_seed(model_src_t *s, uint64_t seed) {
        memset(s, 0, sizeof(*s));
        s->rng = seed;
}

void model_src_bytes(model_src_t *s, const uint8_t *data, size_t size) {
        memset(s, 0, sizeof(*s));
        s->bytes = true;
        s->data = data;
        s->size = size;
}

static uint64_t splitmix(uint64_t *x) {
        uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
}

/* A choice in [0, bound). */
static uint32_t pick(model_src_t *s, uint32_t bound) {
        if (bound <= 1)
                return 0;
        uint64_t r = 0;
        if (!s->bytes) {
                r = splitmix(&s->rng);
        } else {
                int need = bound <= 256 ? 1 : bound <= 65536 ? 2 : 4;
                for (int i = 0; i < need; i++) {
                        if (s->pos >= s->size) {
                                s->done = true;
                                r <<= 8;
                        } else {
                                r = (r << 8) | s->data[s->pos++];
                        }
                }
        }
        return (uint32_t)(r % bound);
}

/* ---- the model ---------------------------------------------------------- */

enum { R_EVENT = 1, R_CONTROL, R_REPLY };

/* What became of an input record (by its x-tag). */
enum {
        T_FED = 0, /* in a log, not consumed by a committed batch yet */
        T_PARKED,  /* parked; must leave by output, DLQ or supersede */
        T_OUTPUT,
        T_DLQ,
        T_DUPLICATE,  /* dropped: the duplicate of an accounted record */
        T_SUPERSEDED, /* parked, then superseded by a snapshot/release */
        T_CONTROL,    /* a control record, consumed */
        T_REPLY,      /* a snapshot reply, consumed */
};
static const char *const status_names[] = {
        "unconsumed", "parked",     "output",         "DLQ",
        "duplicate",  "superseded", "control record", "snapshot reply"};

typedef struct mrec {
        uint8_t kind;
        uint8_t src; /* its log: partition, or REPLY_SRC */
        uint8_t agg; /* event, control: its aggregate; reply: target */
        uint8_t id, payload;
        bool malformed, replay;
        bool rejudged;    /* a replay judged again (its key's verdict DLQ) */
        bool has_version; /* control: a version was given */
        uint64_t version;
        uint64_t epoch; /* event: its epoch (variants with ordering.epoch) */
        uint8_t status;
        int64_t offset;
        int64_t ts;
        char *key, *value;
        size_t key_len, value_len;
        sg_header_t hdr[8];
        size_t hdr_cnt;
        char *hval[8]; /* owned header values */
} mrec_t;

/* A committed changelog record. */
typedef struct clrec {
        int64_t offset;
        unsigned char *key, *value; /* value NULL: tombstone */
        size_t key_len, value_len;
} clrec_t;

/* An effect, copied out of the engine's memory and parsed. */
typedef struct meff {
        sg_effect_kind_t kind;
        char topic[64];
        int32_t partition;
        unsigned char *key, *value; /* copies; value NULL: null/tombstone */
        size_t key_len, value_len;
        char *fp; /* fingerprint: every byte produced */
        size_t fp_len;
        long tag; /* x-tag, -1 none */
        int agg;  /* aggregate by key, -1 none */
        char ce_id[64];
        bool has_seq, has_actual, has_expected, has_snap;
        uint64_t seq, actual, expected, snap;
        int gap; /* 0 none, 1 gap.skipped, 2 gap.missing */
        uint64_t gap_a, gap_b;
        char reason[48];
        char rid[320]; /* request records: request_id */
        int req_agg;
} meff_t;

typedef struct mreq {
        char rid[320];
        int agg;
} mreq_t;

typedef struct agg_model {
        bool has;        /* a version was applied (inv 2) */
        uint64_t last;   /* ... the last one (L as outputs show it) */
        uint64_t rel[8]; /* releases with a version, not used yet */
        size_t rel_cnt;
        bool hint_set; /* generation: last in-order version made */
        uint64_t hint;
        uint8_t gen_epoch; /* generation: the current leader's epoch */
        bool e_has;        /* inv 2b: an effect showed E >= e_lb */
        uint64_t e_lb;
        uint64_t l_epoch; /* inv 2: the epoch of the last applied version */
        bool seen_has;    /* inv 2b: the highest epoch consumed in committed */
        uint64_t seen_hi; /* batches */
} agg_model_t;

typedef struct idinfo {
        bool used;
        uint8_t agg, payload, type;
        bool malformed;
        uint64_t version;
} idinfo_t;

typedef struct model {
        const variant_t *var;
        size_t vidx;
        sg_config_t *conf;
        const sg_topic_config_t *tc;
        model_result_t *res;
        size_t step;

        char base[256];
        char live_dir[320];
        int dir_gen;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t proc;
        sg_store_t *shadow; /* exactly_once: the changelog, replayed */
        sg_tp_t tp[MODEL_PARTS];
        unsigned char agg_hash[MODEL_AGGS][32];

        int64_t now;  /* processing time (the engine's clock) */
        int64_t wall; /* the wall clock */
        bool assigned[MODEL_PARTS];
        bool gauges_fresh;    /* a batch committed since the last change
                                    of engine or assignment */
        int64_t gauges_at;    /* the engine samples the age gauges at
                                    most once a second: when it last did */
        bool sampled;         /* ... in the last batch attempt */
        uint64_t applied_cnt; /* this engine's committed outputs */
        uint64_t dlq_cnt[SG_R__CNT + 8];

        mrec_t *recs;
        size_t rec_cnt, rec_size;
        uint32_t *log[NSRC];
        size_t log_cnt[NSRC], log_size[NSRC];
        int64_t committed[NSRC];
        int64_t topic_off[3]; /* out, dlq, request topic: next offsets */

        clrec_t *cl[MODEL_PARTS];
        size_t cl_cnt[MODEL_PARTS], cl_size[MODEL_PARTS];
        int64_t cl_next[MODEL_PARTS];

        int recorded[MODEL_PARTS][MODEL_IDS];       /* payload the key was
                                                 recorded with, -1 none */
        long recorder[MODEL_PARTS][MODEL_IDS];      /* the record whose verdict
                                                  the key holds */
        bool rec_malformed[MODEL_PARTS][MODEL_IDS]; /* recorded by a
                                                       malformed copy, which
                                                       claims no key
                                                       (semantics §3 row 1) */
        bool applied_id[MODEL_PARTS][MODEL_IDS];
        idinfo_t ids[MODEL_PARTS][MODEL_IDS];
        size_t id_used[MODEL_PARTS];
        agg_model_t agg[MODEL_AGGS];
        mreq_t *req;
        size_t req_cnt, req_size;

        struct pview *view;  /* the store after the last check_store */
        uint8_t *parked_now; /* by tag: in the store's parked set */
        size_t parked_now_size;
        char err[512];
} model_t;

static bool failed(const model_t *m) {
        return m->res->inv != MODEL_OK;
}

static void fail(model_t *m, int inv, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void fail(model_t *m, int inv, const char *fmt, ...) {
        if (failed(m))
                return; /* the first violation is the one reported */
        m->res->inv = inv;
        m->res->step = m->step;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->res->msg, sizeof(m->res->msg), fmt, ap);
        va_end(ap);
}

static void *grow(void *p, size_t *size, size_t cnt, size_t elem) {
        if (cnt < *size)
                return p;
        size_t n = *size ? *size * 2 : 64;
        void *q = realloc(p, n * elem);
        if (!q)
                abort(); /* a test harness out of memory has nothing to say */
        memset((char *)q + *size * elem, 0, (n - *size) * elem);
        *size = n;
        return q;
}

static char *xstrdup(const char *s) {
        char *d = strdup(s);
        if (!d)
                abort();
        return d;
}

static void agg_name(int agg, char *buf, size_t n) {
        snprintf(buf, n, "A%d", agg);
}

static int agg_of_key(const void *key, size_t len) {
        if (!key || len != 2 || ((const char *)key)[0] != 'A')
                return -1;
        int a = ((const char *)key)[1] - '0';
        return a >= 0 && a < MODEL_AGGS ? a : -1;
}

static int part_of_agg(int agg) {
        return agg % MODEL_PARTS;
}

static uint64_t first_version(const model_t *m) {
        return m->tc->first_version;
}

/* ---- directories -------------------------------------------------------- */

static void rm_store_dir(const char *dir) {
        static const char *const files[] = {"data.mdb", "lock.mdb",
                                            "seqgate.lock"};
        char p[400];
        for (size_t i = 0; i < 3; i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
                unlink(p);
        }
        rmdir(dir);
}

static bool make_base(model_t *m) {
        const char *roots[] = {getenv("SG_MODEL_TMP"), "/dev/shm",
                               getenv("TMPDIR"), "/tmp"};
        for (size_t i = 0; i < 4; i++) {
                if (!roots[i] || access(roots[i], W_OK) != 0)
                        continue;
                snprintf(m->base, sizeof(m->base), "%s/sg_model_XXXXXX",
                         roots[i]);
                if (mkdtemp(m->base))
                        return true;
        }
        return false;
}

/* ---- engine life ---------------------------------------------------------- */

/* The engine goes: @p clean, a clean stop (a checkpoint first), else a
 * kill (what no checkpoint committed is dropped from the store, semantics
 * §6: the next assignment restores it from the changelog). */
static void engine_close(model_t *m, bool clean) {
        if (clean && m->eng &&
            sg_engine_checkpoint(m->eng, m->err, sizeof(m->err)))
                fail(m, MODEL_ENGINE_ERROR, "checkpoint: %s", m->err);
        sg_engine_destroy(m->eng);
        sg_store_close(m->store);
        m->eng = NULL;
        m->store = NULL;
        m->gauges_fresh = false;
        m->gauges_at = 0;
        m->applied_cnt = 0;
        memset(m->dlq_cnt, 0, sizeof(m->dlq_cnt));
}

static bool restore_part(model_t *m, int p, bool compact, bool no_tombs);

/* The live store as the engine holds it between batches (sg_engine_view:
 * its open checkpoint transaction, or a read of the last checkpoint);
 * end it with live_end. */
static bool live_begin(model_t *m, sg_txn_t **t, bool *owned) {
        sg_err_t err = sg_engine_view(m->eng, t, owned, m->err, sizeof(m->err));
        if (err)
                fail(m, MODEL_HARNESS_ERROR, "the live store: %s", m->err);
        return !err;
}

static void live_end(sg_txn_t *t, bool owned) {
        if (owned)
                sg_txn_abort(t);
}

/* After a batch_abort (or a failed checkpoint): the partitions whose store
 * lost committed batches are restored from the changelog before anything
 * else, as the loop does (processor.h behind). */
static bool restore_behind(model_t *m) {
        for (int p = 0; p < MODEL_PARTS; p++) {
                if (!m->assigned[p] ||
                    !m->proc.behind(m->proc.opaque, TOPIC, p))
                        continue;
                m->res->stats.behind_restores++;
                if (!restore_part(m, p, false, false))
                        return false;
        }
        return true;
}

/* The engine's clock never runs below the clock persisted in an assigned
 * partition's store (engine.h "Processing time"; the test hook replaces
 * the engine's own floor, so the harness applies it). */
static void clock_floor(model_t *m, int p) {
        sg_txn_t *t;
        bool owned;
        sg_meta_rec_t meta;
        if (!live_begin(m, &t, &owned))
                return;
        if (sg_meta_get(t, &m->tp[p], &meta) == SG_OK && meta.clock_ms > m->now)
                m->now = meta.clock_ms;
        live_end(t, owned);
        sg_engine_set_clock(m->eng, m->now);
}

/* Assigns partition @p p to the engine, as the loop's rebalance callback
 * does, and (exactly_once) restores it from the changelog. */
static bool assign_part(model_t *m, int p, bool compact, bool no_tombs) {
        int64_t off = -2;
        sg_err_t err = m->proc.assign(m->proc.opaque, TOPIC, p, "g", &off,
                                      m->err, sizeof(m->err));
        if (err) {
                fail(m, MODEL_ENGINE_ERROR, "assign %s [%d]: %s: %s", TOPIC, p,
                     sg_err2str(err), m->err);
                return false;
        }
        m->assigned[p] = true;
        m->gauges_fresh = false;
        /* both guarantees restore what the store lacks (a kill drops what
         * no checkpoint committed, semantics §6) */
        if (!restore_part(m, p, compact, no_tombs))
                return false;
        clock_floor(m, p);
        if (m->var->eos)
                return true;
        /* at_least_once starts at the later of the committed offset and the
         * one the restored store reflects (asked again after the restore,
         * as the loop does): it must be the one the harness committed
         * (nothing skipped, nothing re-read) */
        off = -2;
        if ((err = m->proc.assign(m->proc.opaque, TOPIC, p, "g", &off, m->err,
                                  sizeof(m->err)))) {
                fail(m, MODEL_ENGINE_ERROR, "assign %s [%d]: %s: %s", TOPIC, p,
                     sg_err2str(err), m->err);
                return false;
        }
        int64_t want = m->committed[p] ? m->committed[p] : -1;
        if (off != want && !(off == -1 && m->committed[p] == 0))
                fail(m, MODEL_INV_ACCOUNTED,
                     "assign %s [%d]: the store reflects input offset %" PRId64
                     " but %" PRId64 " is committed",
                     TOPIC, p, off, m->committed[p]);
        return !failed(m);
}

/* Opens the engine on the live store (a new, empty one when @p fresh) and
 * assigns the partitions the model holds. */
static bool engine_open(model_t *m, bool fresh, bool compact, bool no_tombs) {
        if (fresh) {
                if (m->live_dir[0])
                        rm_store_dir(m->live_dir);
                snprintf(m->live_dir, sizeof(m->live_dir), "%s/live%d", m->base,
                         m->dir_gen++);
        }
        sg_err_t err = sg_store_open(m->live_dir, 1 << 24, 1 << 24, &m->store,
                                     m->err, sizeof(m->err));
        if (err) {
                fail(m, MODEL_HARNESS_ERROR, "store %s: %s", m->live_dir,
                     m->err);
                return false;
        }
        if (sg_engine_new(m->conf, m->store, &m->eng, m->err, sizeof(m->err)) !=
            SG_OK) {
                fail(m, MODEL_HARNESS_ERROR, "engine: %s", m->err);
                return false;
        }
        sg_engine_processor(m->eng, &m->proc);
        /* a new process: the wall clock, raised by the assignments */
        m->now = m->wall;
        sg_engine_set_clock(m->eng, m->now);
        for (int p = 0; p < MODEL_PARTS; p++)
                if (m->assigned[p] && !assign_part(m, p, compact, no_tombs))
                        return false;
        return true;
}

/* The variant's configuration: one input topic "orders" (output "out", DLQ
 * "dlq") in consumer group "g". */
static sg_err_t variant_parse(const variant_t *var, sg_config_t **confp,
                              char *errstr, size_t errstr_size) {
        char json[8192], store[96] = "";
        if (var->checkpoint_ms >= 0)
                snprintf(store, sizeof(store),
                         "\"store\":{\"checkpoint_interval_ms\":%d},",
                         var->checkpoint_ms);
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"/nonexistent\",\"guarantee\":\"%s\",%s"
                 "\"kafka\":{\"bootstrap.servers\":\"x:1\",\"group.id\":"
                 "\"g\"},\"topics\":{\"" TOPIC "\":{\"output_topic\":\"out\","
                 "\"dlq_topic\":\"dlq\",%s}}}",
                 var->eos ? "exactly_once" : "at_least_once", store,
                 var->topic_json);
        return sg_config_parse(json, confp, errstr, errstr_size);
}

static bool model_init(model_t *m, size_t v, model_result_t *res) {
        memset(m, 0, sizeof(*m));
        memset(res, 0, sizeof(*res));
        m->res = res;
        m->vidx = v;
        m->var = &variants[v];
        m->now = m->wall = T0;
        for (int p = 0; p < MODEL_PARTS; p++) {
                m->assigned[p] = true;
                sg_tp_make(&m->tp[p], TOPIC, p);
                for (int i = 0; i < MODEL_IDS; i++) {
                        m->recorded[p][i] = -1;
                        m->recorder[p][i] = -1;
                }
        }
        for (int a = 0; a < MODEL_AGGS; a++) {
                char n[8];
                agg_name(a, n, sizeof(n));
                sg_sha256(n, strlen(n), m->agg_hash[a]);
        }
        if (variant_parse(m->var, &m->conf, m->err, sizeof(m->err))) {
                fail(m, MODEL_HARNESS_ERROR, "config %s: %s", m->var->name,
                     m->err);
                return false;
        }
        m->tc = sg_config_topic(m->conf, TOPIC);
        if (!make_base(m)) {
                fail(m, MODEL_HARNESS_ERROR, "no writable temporary directory");
                return false;
        }
        if (m->var->eos) {
                char d[320];
                snprintf(d, sizeof(d), "%s/shadow", m->base);
                if (sg_store_open(d, 1 << 24, 1 << 24, &m->shadow, m->err,
                                  sizeof(m->err))) {
                        fail(m, MODEL_HARNESS_ERROR, "shadow store: %s",
                             m->err);
                        return false;
                }
        }
        return engine_open(m, true, false, false);
}

static void model_free(model_t *m) {
        engine_close(m, false);
        sg_store_close(m->shadow);
        m->shadow = NULL;
        if (m->base[0]) {
                if (m->live_dir[0])
                        rm_store_dir(m->live_dir);
                char d[320];
                snprintf(d, sizeof(d), "%s/shadow", m->base);
                rm_store_dir(d);
                snprintf(d, sizeof(d), "%s/replay", m->base);
                rm_store_dir(d);
                rmdir(m->base);
        }
        for (size_t i = 0; i < m->rec_cnt; i++) {
                free(m->recs[i].key);
                free(m->recs[i].value);
                for (size_t j = 0; j < m->recs[i].hdr_cnt; j++)
                        free(m->recs[i].hval[j]);
        }
        free(m->recs);
        for (int s = 0; s < NSRC; s++)
                free(m->log[s]);
        for (int p = 0; p < MODEL_PARTS; p++) {
                for (size_t i = 0; i < m->cl_cnt[p]; i++) {
                        free(m->cl[p][i].key);
                        free(m->cl[p][i].value);
                }
                free(m->cl[p]);
        }
        free(m->req);
        free(m->parked_now);
        free(m->view);
        sg_config_destroy(m->conf);
}

/* ---- input records ---------------------------------------------------------- */

static mrec_t *rec_add(model_t *m, int kind, int src) {
        m->recs = grow(m->recs, &m->rec_size, m->rec_cnt, sizeof(*m->recs));
        uint32_t tag = (uint32_t)m->rec_cnt++;
        mrec_t *r = &m->recs[tag];
        memset(r, 0, sizeof(*r));
        r->kind = (uint8_t)kind;
        r->src = (uint8_t)src;
        m->log[src] = grow(m->log[src], &m->log_size[src], m->log_cnt[src],
                           sizeof(uint32_t));
        r->offset = (int64_t)m->log_cnt[src];
        m->log[src][m->log_cnt[src]++] = tag;
        r->ts = m->now;
        return r;
}

static void rec_header(mrec_t *r, const char *name, const char *value) {
        r->hval[r->hdr_cnt] = xstrdup(value);
        r->hdr[r->hdr_cnt] =
                (sg_header_t){name, r->hval[r->hdr_cnt], strlen(value)};
        r->hdr_cnt++;
}

static void rec_tag(model_t *m, mrec_t *r) {
        char t[24];
        snprintf(t, sizeof(t), "%u", (unsigned)(r - m->recs));
        rec_header(r, "x-tag", t);
}

static const char *malformed_text(uint64_t v) {
        static const char *const bad[] = {"18446744073709551616", "1x", "-1",
                                          "+1"};
        return bad[v % 4];
}

static const char *state_name(const model_t *m, uint8_t s) {
        const sg_state_machine_t *sm = &m->tc->sm;
        if (s == MODEL_STATE_BAD || !sm->enabled || !sm->state_cnt)
                return "LOST";
        return sm->states[s % sm->state_cnt];
}

static void exec_record(model_t *m, const model_op_t *op) {
        int a = op->agg % MODEL_AGGS, p = part_of_agg(a);
        mrec_t *r = rec_add(m, R_EVENT, p);
        r->agg = (uint8_t)a;
        r->id = op->id % MODEL_IDS;
        r->payload = op->payload;
        r->malformed = op->flags & MOPF_MALFORMED;
        r->replay = op->flags & MOPF_REPLAY;
        r->version = op->version;
        char b[128], n[8];
        agg_name(a, n, sizeof(n));
        r->key = xstrdup(n);
        r->key_len = strlen(n);
        snprintf(b, sizeof(b), "{\"id\":\"p%d-e%d\",\"pay\":%d}", p, r->id,
                 r->payload);
        r->value = xstrdup(b);
        r->value_len = strlen(b);
        rec_header(r, "ce_specversion", "1.0");
        snprintf(b, sizeof(b), "p%d-e%d", p, r->id);
        rec_header(r, "ce_id", b);
        rec_header(r, "ce_source", "/shop");
        rec_header(r, "ce_type",
                   m->tc->sm.enabled ? type_names[op->type % NTYPES] : "t");
        if (r->malformed)
                snprintf(b, sizeof(b), "%s", malformed_text(op->version));
        else
                snprintf(b, sizeof(b), "%" PRIu64, op->version);
        rec_header(r, "ce_sequence", b);
        r->epoch = op->epoch;
        if (m->tc->epoch.kind != SG_SRC_NONE) { /* semantics §4b */
                snprintf(b, sizeof(b), "%u", (unsigned)op->epoch);
                rec_header(r, "ce_epoch", b);
        }
        if (r->replay)
                rec_header(r, SG_H_REPLAY, "dlq/0/0");
        rec_tag(m, r);
}

/* A version as JSON: a string, or a number when asked and exact. */
static void json_version(char *b, size_t n, uint64_t v, bool number) {
        if (number && v <= (uint64_t)SG_JSON_INT_MAX)
                snprintf(b, n, "%" PRIu64, v);
        else
                snprintf(b, n, "\"%" PRIu64 "\"", v);
}

static void exec_release(model_t *m, const model_op_t *op) {
        int a = op->agg % MODEL_AGGS;
        mrec_t *r = rec_add(m, R_CONTROL, part_of_agg(a));
        r->agg = (uint8_t)a;
        r->has_version = op->flags & MOPF_VERSION;
        r->version = op->version;
        char n[8], v[40], b[256];
        agg_name(a, n, sizeof(n));
        r->key = xstrdup(n);
        r->key_len = strlen(n);
        json_version(v, sizeof(v), op->version, op->flags & MOPF_NUMBER);
        snprintf(b, sizeof(b), "{\"aggregate\":\"%s\"%s%s%s%s%s}", n,
                 r->has_version ? ",\"version\":" : "", r->has_version ? v : "",
                 (op->flags & MOPF_STATE) ? ",\"state\":\"" : "",
                 (op->flags & MOPF_STATE) ? state_name(m, op->state) : "",
                 (op->flags & MOPF_STATE) ? "\"" : "");
        r->value = xstrdup(b);
        r->value_len = strlen(b);
        rec_header(r, SG_H_CONTROL, "release");
        rec_tag(m, r);
}

static void exec_reply(model_t *m, const model_op_t *op) {
        if (op->n >= m->req_cnt)
                return; /* the request is not there (a shrunk list) */
        const mreq_t *q = &m->req[m->req_cnt - 1 - op->n];
        mrec_t *r = rec_add(m, R_REPLY, REPLY_SRC);
        r->agg = (uint8_t)q->agg;
        char n[8], other[8], v[40], b[768];
        agg_name(q->agg, n, sizeof(n));
        agg_name((q->agg + 2) % MODEL_AGGS, other, sizeof(other));
        r->key = xstrdup(n);
        r->key_len = strlen(n);
        json_version(v, sizeof(v), op->version, op->flags & MOPF_NUMBER);
        bool st = op->flags & MOPF_STATE;
        if (op->flags & MOPF_BAD_BODY)
                snprintf(b, sizeof(b), "not json");
        else
                snprintf(b, sizeof(b),
                         "{\"request_id\":\"%s\"%s%s%s,\"version\":%s%s%s%s,"
                         "\"data\":{\"tag\":%zu}}",
                         q->rid,
                         (op->flags & MOPF_NO_AGG) ? "" : ",\"aggregate\":\"",
                         (op->flags & MOPF_NO_AGG)      ? ""
                         : (op->flags & MOPF_OTHER_AGG) ? other
                                                        : n,
                         (op->flags & MOPF_NO_AGG) ? "" : "\"", v,
                         st ? ",\"state\":\"" : "",
                         st ? state_name(m, op->state) : "", st ? "\"" : "",
                         (size_t)(r - m->recs));
        r->value = xstrdup(b);
        r->value_len = strlen(b);
        rec_tag(m, r);
}

static sg_record_t rec_view(const mrec_t *r) {
        return (sg_record_t){
                .topic = r->src == REPLY_SRC ? REPLY_TOPIC : TOPIC,
                .partition = r->src == REPLY_SRC ? 0 : r->src,
                .offset = r->offset,
                .timestamp_ms = r->ts,
                .key = r->key,
                .key_len = r->key_len,
                .value = r->value,
                .value_len = r->value_len,
                .headers = r->hdr,
                .header_cnt = r->hdr_cnt,
        };
}

/* ---- effects ------------------------------------------------------------------ */

static void fp_add(meff_t *e, const void *p, size_t n) {
        char *q = realloc(e->fp, e->fp_len + n + 9);
        if (!q)
                abort();
        e->fp = q;
        /* length-prefixed, so that fields never run into each other (a
         * field is far below 4 GiB: eight hex digits hold its length, and
         * -O3's format-truncation check sees that they always fit) */
        snprintf(q + e->fp_len, 9, "%08x", (unsigned)(n & 0xffffffffu));
        e->fp_len += 8;
        if (n)
                memcpy(q + e->fp_len, p, n);
        e->fp_len += n;
}

static bool hval_u64(const sg_header_t *h, uint64_t *out) {
        if (!h->value || h->value_len == 0 || h->value_len > 20)
                return false;
        return sg_version_parse(h->value, h->value_len, out) == SG_OK;
}

static void hval_str(const sg_header_t *h, char *buf, size_t n) {
        size_t l = h->value ? h->value_len : 0;
        if (l > n - 1)
                l = n - 1;
        if (l)
                memcpy(buf, h->value, l);
        buf[l] = '\0';
}

static void parse_header(meff_t *e, const sg_header_t *h) {
        char b[64];
        if (!strcmp(h->name, "x-tag")) {
                hval_str(h, b, sizeof(b));
                e->tag = strtol(b, NULL, 10);
        } else if (!strcmp(h->name, "ce_id")) {
                hval_str(h, e->ce_id, sizeof(e->ce_id));
        } else if (!strcmp(h->name, "ce_sequence")) {
                e->has_seq = hval_u64(h, &e->seq);
        } else if (!strcmp(h->name, SG_DLQ_H_REASON)) {
                hval_str(h, e->reason, sizeof(e->reason));
        } else if (!strcmp(h->name, SG_DLQ_H_ACTUAL)) {
                e->has_actual = hval_u64(h, &e->actual);
        } else if (!strcmp(h->name, SG_DLQ_H_EXPECTED)) {
                e->has_expected = hval_u64(h, &e->expected);
        } else if (!strcmp(h->name, SG_H_SNAPSHOT)) {
                e->has_snap = hval_u64(h, &e->snap);
        } else if (!strcmp(h->name, SG_H_GAP_SKIPPED) ||
                   !strcmp(h->name, SG_H_GAP_MISSING)) {
                unsigned long long a = 0, z = 0;
                hval_str(h, b, sizeof(b));
                e->gap = !strcmp(h->name, SG_H_GAP_SKIPPED) ? 1 : 2;
                if (sscanf(b, "%llu-%llu", &a, &z) != 2)
                        e->gap = 3; /* unreadable: matches no range */
                e->gap_a = a;
                e->gap_b = z;
        }
}

static void eff_copy(meff_t *e, const sg_effect_t *ef) {
        memset(e, 0, sizeof(*e));
        e->tag = -1;
        e->agg = -1;
        e->req_agg = -1;
        e->kind = ef->kind;
        e->partition = ef->partition;
        snprintf(e->topic, sizeof(e->topic), "%s", ef->topic ? ef->topic : "");
        fp_add(e, &e->kind, sizeof(e->kind));
        fp_add(e, e->topic, strlen(e->topic));
        fp_add(e, &e->partition, sizeof(e->partition));
        if (ef->key) {
                e->key = malloc(ef->key_len + 1);
                if (!e->key)
                        abort();
                memcpy(e->key, ef->key, ef->key_len);
                e->key_len = ef->key_len;
                fp_add(e, ef->key, ef->key_len);
        }
        if (ef->value) {
                e->value = malloc(ef->value_len + 1);
                if (!e->value)
                        abort();
                memcpy(e->value, ef->value, ef->value_len);
                e->value[ef->value_len] = '\0';
                e->value_len = ef->value_len;
                fp_add(e, ef->value, ef->value_len);
        }
        e->agg = agg_of_key(ef->key, ef->key_len);
        for (size_t i = 0; i < ef->header_cnt + ef->extra_cnt; i++) {
                const sg_header_t *h = i < ef->header_cnt
                                               ? &ef->headers[i]
                                               : &ef->extra[i - ef->header_cnt];
                fp_add(e, h->name, strlen(h->name));
                fp_add(e, h->value, h->value ? h->value_len : 0);
                parse_header(e, h);
        }
        if (ef->url)
                fp_add(e, ef->url, strlen(ef->url));
        if (e->kind == SG_EFFECT_OUTPUT && !strcmp(e->topic, REQUEST_TOPIC) &&
            e->value) {
                cJSON *j = cJSON_Parse((const char *)e->value);
                const cJSON *rid =
                        cJSON_GetObjectItemCaseSensitive(j, "request_id");
                const cJSON *ag =
                        cJSON_GetObjectItemCaseSensitive(j, "aggregate");
                if (cJSON_IsString(rid))
                        snprintf(e->rid, sizeof(e->rid), "%s",
                                 rid->valuestring);
                if (cJSON_IsString(ag))
                        e->req_agg = agg_of_key(ag->valuestring,
                                                strlen(ag->valuestring));
                cJSON_Delete(j);
        }
}

static void effs_free(meff_t *e, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(e[i].key);
                free(e[i].value);
                free(e[i].fp);
        }
        free(e);
}

/* ---- store views -------------------------------------------------------- */

typedef struct kv {
        unsigned char *key, *value;
        size_t key_len, value_len;
} kv_t;

typedef struct kvlist {
        kv_t *v;
        size_t cnt, size;
} kvlist_t;

static int kv_collect(void *opaque, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        kvlist_t *l = opaque;
        l->v = grow(l->v, &l->size, l->cnt, sizeof(*l->v));
        kv_t *kv = &l->v[l->cnt++];
        kv->key = malloc(key_len + value_len + 1);
        if (!kv->key)
                abort();
        memcpy(kv->key, key, key_len);
        if (value_len)
                memcpy(kv->key + key_len, value, value_len);
        kv->value = kv->key + key_len;
        kv->key_len = key_len;
        kv->value_len = value_len;
        return 0;
}

static void kv_free(kvlist_t *l) {
        for (size_t i = 0; i < l->cnt; i++)
                free(l->v[i].key);
        free(l->v);
        memset(l, 0, sizeof(*l));
}

/* A store's entries of the model's partitions, by partition and database,
 * read in one walk (sg_store_foreach walks the whole store). */
typedef struct sdump {
        kvlist_t l[MODEL_PARTS][NDB];
        const sg_tp_t *tp;
} sdump_t;

static int dump_visit(void *opaque, int db, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
        sdump_t *d = opaque;
        if (db < 0 || db >= NDB)
                return 0;
        for (int p = 0; p < MODEL_PARTS; p++)
                if (key_len >= d->tp[p].len &&
                    !memcmp(key, d->tp[p].b, d->tp[p].len))
                        return kv_collect(&d->l[p][db], key, key_len, value,
                                          value_len);
        return 0;
}

static void dump_free(sdump_t *d) {
        for (int p = 0; p < MODEL_PARTS; p++)
                for (int db = 0; db < NDB; db++)
                        kv_free(&d->l[p][db]);
}

static sg_err_t store_dump(model_t *m, sg_txn_t *t, sdump_t *d) {
        memset(d, 0, sizeof(*d));
        d->tp = m->tp;
        sg_err_t err =
                sg_store_foreach(t, dump_visit, d, m->err, sizeof(m->err));
        if (err) {
                fail(m, MODEL_HARNESS_ERROR, "reading the store: %s", m->err);
                dump_free(d);
        }
        return err;
}

static uint64_t be64(const unsigned char *p) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = (v << 8) | p[i];
        return v;
}

static void put_be64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--) {
                p[i] = (unsigned char)v;
                v >>= 8;
        }
}

static int agg_of_hash(const model_t *m, const unsigned char *h) {
        for (int a = 0; a < MODEL_AGGS; a++)
                if (!memcmp(m->agg_hash[a], h, HL))
                        return a;
        return -1;
}

static const char *db_name(int db) {
        static const char *const n[] = {"dedup",   "expiry", "agg",
                                        "parked",  "since",  "meta",
                                        "snapreq", "snapdue"};
        return db >= 0 && db < NDB ? n[db] : "?";
}

static void hex_prefix(const unsigned char *p, size_t n, char *out,
                       size_t size) {
        size_t o = 0;
        for (size_t i = 0; i < n && o + 3 < size; i++)
                o += (size_t)snprintf(out + o, size - o, "%02x", p[i]);
        out[o] = '\0';
}

/* The x-tag of a parked record's serialized headers, -1 if none. */
static long parked_tag(const sg_parked_rec_t *pr) {
        if (!pr->headers || pr->headers_len == SIZE_MAX)
                return -1;
        sg_header_t h[16];
        ssize_t n = sg_headers_parse(pr->headers, pr->headers_len, h, 16);
        for (ssize_t i = 0; i < n; i++) {
                if (strcmp(h[i].name, "x-tag"))
                        continue;
                char b[24];
                hval_str(&h[i], b, sizeof(b));
                return strtol(b, NULL, 10);
        }
        return -1;
}

/* What one partition of the store holds, counted. */
struct pview {
        bool has_meta;
        sg_meta_rec_t meta;
        bool agg_present[MODEL_AGGS];
        sg_agg_rec_t agg[MODEL_AGGS];
        uint64_t agg_parked[MODEL_AGGS], agg_bytes[MODEL_AGGS];
        int64_t agg_oldest[MODEL_AGGS]; /* oldest parked_at, 0 none */
        bool has_req[MODEL_AGGS];
        sg_snapreq_rec_t req[MODEL_AGGS];
        uint64_t parked, bytes, quarantined, inflight;
};
typedef struct pview pview_t;

static int cmp_kv(const void *a, const void *b) {
        const kv_t *x = a, *y = b;
        size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
        int c = memcmp(x->key, y->key, n);
        return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Compares an index database with the entries @p want (tp | ms | hash). */
static void check_index(model_t *m, const sdump_t *d, int p, int db,
                        kvlist_t *want, const char *what) {
        kvlist_t have = d->l[p][db];
        if (want->cnt > 1)
                qsort(want->v, want->cnt, sizeof(*want->v), cmp_kv);
        size_t i = 0;
        for (; i < have.cnt && i < want->cnt; i++)
                if (cmp_kv(&have.v[i], &want->v[i]) || have.v[i].value_len)
                        break;
        if (i < have.cnt || i < want->cnt) {
                const kv_t *k = i < have.cnt ? &have.v[i] : &want->v[i];
                size_t tl = m->tp[p].len;
                char h[40] = "?";
                uint64_t ms = 0;
                if (k->key_len == tl + 8 + HL) {
                        ms = be64(k->key + tl);
                        hex_prefix(k->key + tl + 8, 8, h, sizeof(h));
                }
                fail(m, MODEL_INV_GAUGES,
                     "partition %d: the %s index (%zu entries) is out of step "
                     "with %s (%zu expected); first difference at entry %zu: "
                     "(%" PRIu64 ", %s...) %s",
                     p, db_name(db), have.cnt, what, want->cnt, i, ms, h,
                     i < have.cnt ? (i < want->cnt ? "differs from the "
                                                     "expected entry"
                                                   : "is extra")
                                  : "is missing");
        }
}

static void want_add(kvlist_t *w, const sg_tp_t *tp, int64_t ms,
                     const unsigned char *hash) {
        unsigned char k[SG_TP_MAX + 8 + HL];
        memcpy(k, tp->b, tp->len);
        put_be64(k + tp->len, ms < 0 ? 0 : (uint64_t)ms);
        memcpy(k + tp->len + 8, hash, HL);
        kv_collect(w, k, tp->len + 8 + HL, NULL, 0);
}

/*
 * Reads partition @p p of @p t into @p v, checking that the store agrees
 * with itself (invariant 4): per-aggregate parked counts and bytes, the
 * meta counters, the dedup verdicts of parked records, the flags against
 * the snapshot requests, and the three derived indexes. Marks the parked
 * records' tags in m->parked_now (completely, whatever else fails, so that
 * the accounting can still run).
 */
static void store_view(model_t *m, sg_txn_t *t, const sdump_t *d, int p,
                       pview_t *v) {
        memset(v, 0, sizeof(*v));
        const sg_tp_t *tp = &m->tp[p];
        v->has_meta = sg_meta_get(t, tp, &v->meta) == SG_OK;
        kvlist_t l, dd, due = {0}, since = {0};
        /* parked records first: the accounting needs all of them */
        l = d->l[p][SG_DB_PARKED];
        for (size_t i = 0; i < l.cnt; i++) {
                const unsigned char *k = l.v[i].key + tp->len;
                int a = l.v[i].key_len == tp->len + HL + 8 ? agg_of_hash(m, k)
                                                           : -1;
                uint64_t ver = a >= 0 ? be64(k + HL) : 0;
                sg_parked_rec_t pr;
                if (a < 0 || part_of_agg(a) != p ||
                    sg_parked_get(t, tp, m->agg_hash[a], ver, &pr)) {
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: a parked record of an unknown "
                             "aggregate, or one that does not decode",
                             p);
                        continue;
                }
                long tag = parked_tag(&pr);
                if (tag < 0 || (size_t)tag >= m->rec_cnt ||
                    m->recs[tag].kind != R_EVENT || m->recs[tag].agg != a ||
                    m->recs[tag].version != ver) {
                        fail(m, MODEL_INV_ACCOUNTED,
                             "partition %d: parked A%d v%" PRIu64 " is not "
                             "the record it claims to be (x-tag %ld)",
                             p, a, ver, tag);
                        continue;
                }
                m->parked_now[tag] = 1;
                uint64_t bytes = (pr.key ? pr.key_len : 0) +
                                 (pr.value ? pr.value_len : 0) +
                                 (pr.headers ? pr.headers_len : 0);
                v->agg_parked[a]++;
                v->agg_bytes[a] += bytes;
                if (!v->agg_oldest[a] || pr.parked_at_ms < v->agg_oldest[a])
                        v->agg_oldest[a] = pr.parked_at_ms;
                v->parked++;
                v->bytes += bytes;
                sg_dedup_rec_t r;
                sg_err_t err = sg_dedup_get(t, tp, pr.key_hash, &r);
                if (err || r.verdict != SG_DV_PARKED)
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: parked A%d v%" PRIu64 " (x-tag "
                             "%ld): its idempotency key is %s",
                             p, a, ver, tag,
                             err ? "not recorded" : "not recorded as parked");
        }
        /* aggregates */
        l = d->l[p][SG_DB_AGG];
        for (size_t i = 0; i < l.cnt; i++) {
                int a = l.v[i].key_len == tp->len + HL
                                ? agg_of_hash(m, l.v[i].key + tp->len)
                                : -1;
                if (a < 0 || part_of_agg(a) != p ||
                    sg_agg_get(t, tp, m->agg_hash[a], &v->agg[a])) {
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d holds an aggregate record of an "
                             "aggregate never sent to it, or one that does "
                             "not decode",
                             p);
                        continue;
                }
                v->agg_present[a] = true;
                if (v->agg[a].flags & SG_AGG_QUARANTINED)
                        v->quarantined++;
        }
        /* snapshot requests and their due index */
        l = d->l[p][SG_DB_SNAPREQ];
        for (size_t i = 0; i < l.cnt; i++) {
                int a = l.v[i].key_len == tp->len + HL
                                ? agg_of_hash(m, l.v[i].key + tp->len)
                                : -1;
                if (a < 0 ||
                    sg_snapreq_get(t, tp, m->agg_hash[a], &v->req[a])) {
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: a snapshot request of an unknown "
                             "aggregate, or one that does not decode",
                             p);
                        continue;
                }
                v->has_req[a] = true;
                if (v->req[a].state == SG_SNAP_INFLIGHT)
                        v->inflight++;
                want_add(&due, tp, v->req[a].due_ms, m->agg_hash[a]);
        }
        check_index(m, d, p, DB_SNAPDUE, &due,
                    "the snapshot requests' due times");
        kv_free(&due);
        /* dedup records: their verdicts (no index: they expire with their
         * segment, store.h) */
        dd = d->l[p][SG_DB_DEDUP];
        uint64_t dedup_parked = 0;
        for (size_t i = 0; i < dd.cnt; i++) {
                sg_dedup_rec_t r;
                const unsigned char *kh = dd.v[i].key + tp->len;
                if (dd.v[i].key_len != tp->len + HL ||
                    sg_dedup_get(t, tp, kh, &r)) {
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: a dedup record does not decode", p);
                        continue;
                }
                dedup_parked += r.verdict == SG_DV_PARKED;
        }
        if (dedup_parked != v->parked)
                fail(m, MODEL_INV_GAUGES,
                     "partition %d: %" PRIu64 " idempotency keys are recorded "
                     "as parked but %" PRIu64 " records are parked",
                     p, dedup_parked, v->parked);
        /* per aggregate, and the gap deadline index */
        for (int a = 0; a < MODEL_AGGS; a++) {
                const sg_agg_rec_t *r = &v->agg[a];
                if (!v->agg_present[a]) {
                        if (v->agg_parked[a] || v->has_req[a])
                                fail(m, MODEL_INV_GAUGES,
                                     "partition %d: A%d has %" PRIu64
                                     " parked records%s but no aggregate "
                                     "record",
                                     p, a, v->agg_parked[a],
                                     v->has_req[a] ? " and a snapshot request"
                                                   : "");
                        continue;
                }
                if (r->parked_cnt != v->agg_parked[a] ||
                    r->parked_bytes != v->agg_bytes[a])
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: A%d says %" PRIu32
                             " parked (%" PRIu64 " bytes), the store holds "
                             "%" PRIu64 " (%" PRIu64 " bytes)",
                             p, a, r->parked_cnt, r->parked_bytes,
                             v->agg_parked[a], v->agg_bytes[a]);
                if ((r->parked_cnt > 0) != (r->parked_since_ms > 0))
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: A%d has %" PRIu32 " parked but "
                             "parked_since_ms %" PRId64,
                             p, a, r->parked_cnt, r->parked_since_ms);
                if (((r->flags & SG_AGG_REFETCHING) != 0) != v->has_req[a])
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: A%d is %s but %s a snapshot "
                             "request",
                             p, a,
                             (r->flags & SG_AGG_REFETCHING) ? "refetching"
                                                            : "not refetching",
                             v->has_req[a] ? "has" : "has no");
                if (sg_agg_indexed_since(r))
                        want_add(&since, tp, sg_agg_indexed_since(r),
                                 m->agg_hash[a]);
        }
        check_index(m, d, p, DB_SINCE, &since,
                    "the aggregates' parked_since_ms");
        kv_free(&since);
        /* the caps (semantics §4) and the quarantine (dlq: nothing parked) */
        const sg_topic_config_t *tc = m->tc;
        for (int a = 0; a < MODEL_AGGS; a++) {
                if (v->agg_parked[a] > tc->max_parked_per_aggregate)
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: A%d has %" PRIu64 " parked, over "
                             "max_parked_per_aggregate %" PRIu64,
                             p, a, v->agg_parked[a],
                             tc->max_parked_per_aggregate);
                if (v->agg_present[a] &&
                    (v->agg[a].flags & SG_AGG_QUARANTINED) && v->agg_parked[a])
                        fail(m, MODEL_INV_GAUGES,
                             "partition %d: A%d is quarantined with %" PRIu64
                             " events still parked",
                             p, a, v->agg_parked[a]);
        }
        if (v->parked > tc->max_parked_total || v->bytes > tc->max_parked_bytes)
                fail(m, MODEL_INV_GAUGES,
                     "partition %d: %" PRIu64 " parked (%" PRIu64 " bytes), "
                     "over max_parked_total %" PRIu64 " / max_parked_bytes "
                     "%" PRIu64,
                     p, v->parked, v->bytes, tc->max_parked_total,
                     tc->max_parked_bytes);
        if (tc->snapshot.source != SG_SNAP_NONE &&
            v->inflight > (uint64_t)tc->snapshot.max_in_flight)
                fail(m, MODEL_INV_GAUGES,
                     "partition %d: %" PRIu64 " snapshot requests in flight, "
                     "over max_in_flight %" PRId64,
                     p, v->inflight, tc->snapshot.max_in_flight);
        if (!v->has_meta)
                return fail(m, MODEL_INV_GAUGES,
                            "partition %d is assigned but has no meta record",
                            p);
        const sg_meta_rec_t *mt = &v->meta;
        if (mt->parked_cnt != v->parked || mt->parked_bytes != v->bytes ||
            mt->quarantined != v->quarantined ||
            mt->snap_in_flight != v->inflight)
                fail(m, MODEL_INV_GAUGES,
                     "partition %d meta: parked %" PRIu64 " (%" PRIu64
                     " bytes), quarantined %" PRIu64 ", in flight %" PRIu64
                     "; the store holds %" PRIu64 " parked (%" PRIu64
                     " bytes), %" PRIu64 " quarantined, %" PRIu64
                     " requests in flight",
                     p, mt->parked_cnt, mt->parked_bytes, mt->quarantined,
                     mt->snap_in_flight, v->parked, v->bytes, v->quarantined,
                     v->inflight);
}

/* Invariant 4 over the assigned partitions, and the engine's gauges when
 * they are sampled (after a commit of this engine with this assignment);
 * fills m->parked_now. */
static void check_store(model_t *m) {
        if (!m->parked_now || m->parked_now_size < m->rec_cnt) {
                free(m->parked_now);
                m->parked_now_size = m->rec_cnt + 256;
                m->parked_now = calloc(m->parked_now_size, 1);
                if (!m->parked_now)
                        abort();
        }
        memset(m->parked_now, 0, m->parked_now_size);
        sg_txn_t *t;
        bool owned;
        if (!live_begin(m, &t, &owned))
                return;
        if (!m->view && !(m->view = calloc(MODEL_PARTS, sizeof(pview_t))))
                abort();
        pview_t *v = m->view;
        sdump_t d;
        if (store_dump(m, t, &d)) {
                live_end(t, owned);
                return;
        }
        uint64_t parked = 0, bytes = 0, quarantined = 0, inflight = 0;
        /* the age gauges as of their last sampling (the committed batch's
         * processing time, when it sampled them) */
        int64_t oldest = 0, stuck = 0, stale = m->gauges_at - 300000;
        int64_t ix_oldest = 0, ix_stuck = 0;
        for (int p = 0; p < MODEL_PARTS; p++) {
                if (!m->assigned[p])
                        continue;
                store_view(m, t, &d, p, &v[p]);
                for (int a = 0; a < MODEL_AGGS; a++) {
                        /* §7 as written: the oldest parked event, and the
                         * aggregates parked or refetching for 5 minutes */
                        int64_t o = v[p].agg_oldest[a];
                        if (o && (!oldest || o < oldest))
                                oldest = o;
                        stuck += (o && o < stale) ||
                                 (v[p].has_req[a] &&
                                  v[p].req[a].issued_at_ms < stale);
                        /* as the engine measures it: the current gap's
                         * start — the gap deadline index, and for the
                         * aggregates waiting for a snapshot (out of that
                         * index) their parked_since, or their request */
                        const sg_agg_rec_t *ar = &v[p].agg[a];
                        int64_t x = 0;
                        if (v[p].agg_present[a])
                                x = (ar->flags & SG_AGG_REFETCHING) &&
                                                    ar->parked_cnt > 0
                                            ? ar->parked_since_ms
                                            : sg_agg_indexed_since(ar);
                        if (x && (!ix_oldest || x < ix_oldest))
                                ix_oldest = x;
                        ix_stuck += (x && x < stale) ||
                                    (v[p].has_req[a] &&
                                     v[p].req[a].issued_at_ms < stale);
                }
                parked += v[p].parked;
                bytes += v[p].bytes;
                quarantined += v[p].quarantined;
                inflight += v[p].inflight;
        }
        live_end(t, owned);
        dump_free(&d);
        if (!m->gauges_fresh)
                return;
        const sg_metrics_t *mt = sg_engine_metrics(m->eng);
        if (mt->parked_events != (int64_t)parked ||
            mt->parked_bytes != (int64_t)bytes ||
            mt->quarantined_aggregates != (int64_t)quarantined ||
            mt->snapshot_in_flight != (int64_t)inflight)
                fail(m, MODEL_INV_GAUGES,
                     "gauges: parked_events %" PRId64 " parked_bytes %" PRId64
                     " quarantined_aggregates %" PRId64
                     " snapshot_in_flight %" PRId64 "; the store holds %" PRIu64
                     " parked (%" PRIu64 " bytes), %" PRIu64
                     " quarantined, %" PRIu64 " in flight",
                     mt->parked_events, mt->parked_bytes,
                     mt->quarantined_aggregates, mt->snapshot_in_flight, parked,
                     bytes, quarantined, inflight);
        if (!m->sampled)
                return;
        int64_t age = oldest ? m->gauges_at - oldest : 0;
        int64_t ix_age = ix_oldest ? m->gauges_at - ix_oldest : 0;
        if (mt->oldest_parked_age_ms != ix_age || mt->stuck_parked != ix_stuck)
                return fail(m, MODEL_INV_GAUGES,
                            "gauges: oldest_parked_age_ms %" PRId64
                            " stuck_parked %" PRId64 "; the store's "
                            "gap deadline index says %" PRId64 " and %" PRId64,
                            mt->oldest_parked_age_ms, mt->stuck_parked, ix_age,
                            ix_stuck);
        if (!m->res->age_note[0] &&
            (mt->oldest_parked_age_ms != age || mt->stuck_parked != stuck))
                snprintf(m->res->age_note, sizeof(m->res->age_note),
                         "after operation %zu: oldest_parked_age_ms %" PRId64
                         " stuck_parked %" PRId64 ", but the store's "
                         "oldest parked event is %" PRId64
                         " ms old and %" PRId64
                         " aggregates have been parked or refetching for more "
                         "than 5 minutes",
                         m->step, mt->oldest_parked_age_ms, mt->stuck_parked,
                         age, stuck);
}

/* The applied and DLQ counters against this engine's committed records. */
static void check_counters(model_t *m) {
        const sg_metrics_t *mt = sg_engine_metrics(m->eng);
        if (mt->applied_total != m->applied_cnt)
                return fail(m, MODEL_INV_GAUGES,
                            "applied_total %" PRIu64 " but %" PRIu64
                            " outputs were committed",
                            mt->applied_total, m->applied_cnt);
        for (int r = 1; r < SG_R__CNT; r++)
                if (mt->dlq_total[r] != m->dlq_cnt[r])
                        return fail(m, MODEL_INV_GAUGES,
                                    "dlq_total{%s} %" PRIu64 " but %" PRIu64
                                    " such DLQ records were committed",
                                    sg_reason_name((sg_reason_t)r),
                                    mt->dlq_total[r], m->dlq_cnt[r]);
}

/* ---- invariant 5: the changelog replayed ------------------------------- */

static bool meta_fresh(const unsigned char *v, size_t len) {
        /* meta value: group (1 + 255) | input_offset | changelog_offset |
         * clock | parked_cnt | parked_bytes | quarantined | in flight | seq
         * [| key fingerprint] */
        if (len < 256 + 64)
                return false;
        const unsigned char *q = v + 256;
        if (be64(q) != UINT64_MAX) /* input_offset -1 */
                return false;
        for (int i = 3; i < 8; i++)
                if (be64(q + 8 * i))
                        return false;
        return true;
}

/* Compares partition @p p of the live store with @p other (a store the
 * changelog was replayed into), database by database (invariant 5). */
static void compare_stores(model_t *m, sg_store_t *other, int p,
                           const char *what) {
        sg_txn_t *a, *b;
        bool owned;
        if (!live_begin(m, &a, &owned))
                return;
        if (sg_txn_begin(other, false, &b, m->err, sizeof(m->err))) {
                live_end(a, owned);
                return fail(m, MODEL_HARNESS_ERROR, "read txn: %s", m->err);
        }
        const sg_tp_t *tp = &m->tp[p];
        sdump_t da, db_;
        if (store_dump(m, a, &da)) {
                live_end(a, owned);
                sg_txn_abort(b);
                return;
        }
        if (store_dump(m, b, &db_)) {
                dump_free(&da);
                live_end(a, owned);
                sg_txn_abort(b);
                return;
        }
        for (int db = 0; db < NDB && !failed(m); db++) {
                kvlist_t x = da.l[p][db], y = db_.l[p][db];
                if (db == SG_DB_META) {
                        /* the checkpoint is instance-local */
                        kvlist_t *ls[2] = {&x, &y};
                        for (int s = 0; s < 2; s++)
                                for (size_t i = 0; i < ls[s]->cnt; i++)
                                        if (ls[s]->v[i].value_len >=
                                            META_CHECKPOINT_AT + 8)
                                                memset(ls[s]->v[i].value +
                                                               META_CHECKPOINT_AT,
                                                       0, 8);
                        if (x.cnt == 1 && y.cnt == 0 &&
                            meta_fresh(x.v[0].value, x.v[0].value_len))
                                x.cnt = 0; /* assign's own, not logged */
                }
                size_t i = 0;
                for (; i < x.cnt && i < y.cnt; i++)
                        if (cmp_kv(&x.v[i], &y.v[i]) ||
                            x.v[i].value_len != y.v[i].value_len ||
                            memcmp(x.v[i].value, y.v[i].value,
                                   x.v[i].value_len))
                                break;
                if (i < x.cnt || i < y.cnt) {
                        const kv_t *k = i < x.cnt ? &x.v[i] : &y.v[i];
                        char hx[100];
                        hex_prefix(k->key + tp->len,
                                   k->key_len - tp->len < 24
                                           ? k->key_len - tp->len
                                           : 24,
                                   hx, sizeof(hx));
                        size_t diff = 0;
                        if (i < x.cnt && i < y.cnt)
                                while (diff < x.v[i].value_len &&
                                       diff < y.v[i].value_len &&
                                       x.v[i].value[diff] == y.v[i].value[diff])
                                        diff++;
                        fail(m, MODEL_INV_REPLAY,
                             "partition %d, %s: the live store (%zu keys) and "
                             "%s (%zu keys) differ at key %zu (%s...): %s",
                             p, db_name(db), x.cnt, what, y.cnt, i, hx,
                             i >= x.cnt   ? "only the replay has it"
                             : i >= y.cnt ? "only the live store has it"
                             : cmp_kv(&x.v[i], &y.v[i]) ? "different keys"
                                                        : "different values");
                        if (i < x.cnt && i < y.cnt && !cmp_kv(&x.v[i], &y.v[i]))
                                snprintf(m->res->msg + strlen(m->res->msg),
                                         sizeof(m->res->msg) -
                                                 strlen(m->res->msg),
                                         " (%zu and %zu bytes, first "
                                         "difference at byte %zu)",
                                         x.v[i].value_len, y.v[i].value_len,
                                         diff);
                }
        }
        dump_free(&da);
        dump_free(&db_);
        live_end(a, owned);
        sg_txn_abort(b);
}

/* The changelog as Kafka hands it over: every committed record at or after
 * @p from, or, compacted, only the last record of each key (and, with
 * @p no_tombs, no tombstones: the cleaner removed them). Returns indexes
 * into m->cl[p] in offset order (malloc'd). */
static const clrec_t *cmp_ctx;
static int cmp_cl(const void *a, const void *b) {
        const clrec_t *x = &cmp_ctx[*(const size_t *)a],
                      *y = &cmp_ctx[*(const size_t *)b];
        size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
        int c = memcmp(x->key, y->key, n);
        if (c)
                return c;
        if (x->key_len != y->key_len)
                return x->key_len < y->key_len ? -1 : 1;
        return (x->offset > y->offset) - (x->offset < y->offset);
}
static int cmp_idx(const void *a, const void *b) {
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return (x > y) - (x < y);
}

static size_t *cl_view(model_t *m, int p, int64_t from, bool compact,
                       bool no_tombs, size_t *cntp) {
        size_t n = m->cl_cnt[p], k = 0;
        size_t *idx = malloc((n ? n : 1) * sizeof(*idx));
        if (!idx)
                abort();
        for (size_t i = 0; i < n; i++)
                idx[i] = i;
        if (compact && n > 1) {
                cmp_ctx = m->cl[p];
                qsort(idx, n, sizeof(*idx), cmp_cl);
                for (size_t i = 0; i < n; i++) {
                        const clrec_t *c = &m->cl[p][idx[i]];
                        bool last =
                                i + 1 == n ||
                                c->key_len != m->cl[p][idx[i + 1]].key_len ||
                                memcmp(c->key, m->cl[p][idx[i + 1]].key,
                                       c->key_len);
                        if (last && !(no_tombs && !c->value))
                                idx[k++] = idx[i];
                }
                qsort(idx, k, sizeof(*idx), cmp_idx);
                n = k;
        }
        k = 0;
        for (size_t i = 0; i < n; i++)
                if (m->cl[p][idx[i]].offset >= from)
                        idx[k++] = idx[i];
        *cntp = k;
        return idx;
}

/* restore_begin → restore_apply … → restore_end, as the loop runs it. */
static bool restore_part(model_t *m, int p, bool compact, bool no_tombs) {
        int64_t from = -1, end = m->cl_next[p];
        sg_err_t err = m->proc.restore_begin(m->proc.opaque, TOPIC, p, 0, end,
                                             &from, m->err, sizeof(m->err));
        if (err) {
                fail(m, MODEL_ENGINE_ERROR, "restore_begin [%d]: %s: %s", p,
                     sg_err2str(err), m->err);
                return false;
        }
        /* tombstones may only be gone when the whole log is read into an
         * empty partition (a delta restore needs them) */
        size_t cnt;
        size_t *idx = cl_view(m, p, from, compact, no_tombs && from == 0, &cnt);
        m->res->stats.restored_records += cnt;
        for (size_t i = 0; i < cnt && !err; i++) {
                const clrec_t *c = &m->cl[p][idx[i]];
                err = m->proc.restore_apply(m->proc.opaque, TOPIC, p, c->offset,
                                            c->key, c->key_len, c->value,
                                            c->value ? c->value_len : 0, m->err,
                                            sizeof(m->err));
        }
        free(idx);
        if (!err)
                err = m->proc.restore_end(m->proc.opaque, TOPIC, p, end, m->err,
                                          sizeof(m->err));
        if (err) {
                fail(m, MODEL_ENGINE_ERROR,
                     "restore [%d] from %" PRId64 ": %s: %s", p, from,
                     sg_err2str(err), m->err);
                return false;
        }
        return true;
}

/* Invariant 5: the incrementally replayed shadow equals the live store. */
static void check_replay(model_t *m) {
        if (!m->var->eos || failed(m))
                return;
        for (int p = 0; p < MODEL_PARTS && !failed(m); p++)
                if (m->assigned[p])
                        compare_stores(m, m->shadow, p,
                                       "the changelog replayed record by "
                                       "record");
}

/* Invariant 5 from scratch: the compacted changelog, without tombstones,
 * into a new empty store. */
static void check_full_replay(model_t *m) {
        if (!m->var->eos || failed(m))
                return;
        char d[320];
        snprintf(d, sizeof(d), "%s/replay", m->base);
        rm_store_dir(d);
        sg_store_t *s;
        if (sg_store_open(d, 1 << 24, 1 << 24, &s, m->err, sizeof(m->err)))
                return fail(m, MODEL_HARNESS_ERROR, "replay store: %s", m->err);
        sg_txn_t *t;
        if (sg_txn_begin(s, true, &t, m->err, sizeof(m->err))) {
                sg_store_close(s);
                return fail(m, MODEL_HARNESS_ERROR, "replay txn: %s", m->err);
        }
        for (int p = 0; p < MODEL_PARTS && !failed(m); p++) {
                size_t cnt;
                size_t *idx = cl_view(m, p, 0, true, true, &cnt);
                for (size_t i = 0; i < cnt; i++) {
                        const clrec_t *c = &m->cl[p][idx[i]];
                        sg_err_t err = sg_store_apply_change(
                                t, &m->tp[p], c->key[0], c->key + 1,
                                c->key_len - 1, c->value, c->value_len, m->err,
                                sizeof(m->err));
                        if (err) {
                                fail(m, MODEL_INV_REPLAY,
                                     "changelog [%d] offset %" PRId64
                                     " does not apply to an empty store: %s",
                                     p, c->offset, m->err);
                                break;
                        }
                }
                free(idx);
        }
        if (!failed(m) && sg_txn_commit(t, m->err, sizeof(m->err)))
                fail(m, MODEL_HARNESS_ERROR, "replay commit: %s", m->err);
        else if (failed(m))
                sg_txn_abort(t);
        for (int p = 0; p < MODEL_PARTS && !failed(m); p++)
                if (m->assigned[p])
                        compare_stores(m, s, p,
                                       "the compacted changelog replayed into "
                                       "an empty store");
        sg_store_close(s);
        rm_store_dir(d);
}

/* ---- invariants 1–3 on a committed batch ------------------------------- */

static const char *eff_what(const meff_t *e, char *buf, size_t n) {
        if (e->kind == SG_EFFECT_DLQ)
                snprintf(buf, n, "DLQ %s", e->reason);
        else if (e->has_snap)
                snprintf(buf, n, "snapshot record S=%" PRIu64, e->snap);
        else
                snprintf(buf, n, "output v%" PRIu64, e->seq);
        return buf;
}

static void rec_what(const model_t *m, uint32_t tag, char *buf, size_t n) {
        const mrec_t *r = &m->recs[tag];
        if (r->kind == R_EVENT)
                snprintf(buf, n,
                         "record x-tag %u (A%d, p%d-e%d payload %d, v%s%" PRIu64
                         ")",
                         tag, r->agg, r->src, r->id, r->payload,
                         r->malformed ? "malformed " : "", r->version);
        else
                snprintf(buf, n, "%s x-tag %u",
                         r->kind == R_CONTROL ? "release" : "reply", tag);
}

static bool is_record_effect(const meff_t *e) {
        return (e->kind == SG_EFFECT_OUTPUT && !strcmp(e->topic, "out")) ||
               e->kind == SG_EFFECT_DLQ;
}

/* Row 7's verdicts apply the version as L without an output. */
static bool moves_l(const meff_t *e) {
        return e->kind == SG_EFFECT_DLQ && e->has_actual &&
               (!strcmp(e->reason, "illegal_transition") ||
                !strcmp(e->reason, "unknown_event_type"));
}

/* Remembers a release to @p v; when the list is full, the lowest goes (a
 * higher release may pass it without applying it). */
static void rel_add(agg_model_t *g, uint64_t v) {
        size_t low = 0;
        for (size_t i = 0; i < g->rel_cnt; i++) {
                if (g->rel[i] == v)
                        return;
                if (g->rel[i] < g->rel[low])
                        low = i;
        }
        if (g->rel_cnt < sizeof(g->rel) / sizeof(g->rel[0]))
                g->rel[g->rel_cnt++] = v;
        else if (g->rel[low] < v)
                g->rel[low] = v;
}

/* Forgets the releases that no longer explain a jump above @p v. */
static void rel_drop(agg_model_t *g, uint64_t v) {
        size_t k = 0;
        for (size_t i = 0; i < g->rel_cnt; i++)
                if (g->rel[i] >= v)
                        g->rel[k++] = g->rel[i];
        g->rel_cnt = k;
}

/* Whether a new epoch restarts the versions (semantics §4b). */
static bool epoch_restarts(const model_t *m) {
        return m->tc->epoch.kind != SG_SRC_NONE &&
               m->tc->epoch_versions == SG_EPOCH_RESTART;
}

/* Invariant 2 for one version @p v applied to aggregate @p a. The next
 * version is L+1 (first_version for a new aggregate) or, after an operator
 * release to S that no version has passed yet, S+1: the harness cannot
 * tell whether the engine honoured a release (an unknown aggregate, an
 * invalid body), so either is accepted. */
static void order_apply(model_t *m, int a, const meff_t *e, uint64_t v) {
        agg_model_t *g = &m->agg[a];
        bool latest = m->tc->order_mode == SG_ORDER_LATEST_WINS;
        /* epoch_versions restart (semantics §4b): a record is applied in
         * the aggregate's epoch E (a lower one is fenced), so a version of
         * a higher epoch than the last applied one starts a new sequence */
        uint64_t ep = e->tag >= 0 ? m->recs[e->tag].epoch : 0;
        bool new_seq = epoch_restarts(m) && g->has && ep > g->l_epoch;
        if (new_seq)
                g->has = false;
        uint64_t nexts[9];
        size_t nn = 0;
        char w[64], ns[200];
        eff_what(e, w, sizeof(w));
        if (g->has && g->last == UINT64_MAX)
                return fail(m, MODEL_INV_ORDER,
                            "A%d: %s (x-tag %ld) after L = 2^64-1, which has "
                            "no successor",
                            a, w, e->tag);
        if (g->has && v <= g->last)
                return fail(m, MODEL_INV_ORDER,
                            "A%d: %s (x-tag %ld) after version %" PRIu64
                            " was applied: versions must strictly increase",
                            a, w, e->tag, g->last);
        nexts[nn++] = g->has ? g->last + 1 : first_version(m);
        int len = snprintf(ns, sizeof(ns), "%" PRIu64, nexts[0]);
        for (size_t i = 0; i < g->rel_cnt; i++) {
                if (g->has && g->rel[i] < g->last)
                        continue;
                if (g->rel[i] == UINT64_MAX) {
                        if (len > 0 && (size_t)len < sizeof(ns))
                                len += snprintf(ns + len,
                                                sizeof(ns) - (size_t)len,
                                                ", or none after the release "
                                                "to 2^64-1 (no successor)");
                        continue;
                }
                nexts[nn++] = g->rel[i] + 1;
                if (len > 0 && (size_t)len < sizeof(ns))
                        len += snprintf(ns + len, sizeof(ns) - (size_t)len,
                                        ", or %" PRIu64 " after the release "
                                        "to %" PRIu64,
                                        g->rel[i] + 1, g->rel[i]);
        }
        bool ok = false;
        if (e->gap) {
                for (size_t i = 0; i < nn && !ok; i++)
                        ok = e->gap_a == nexts[i] && e->gap_b >= e->gap_a &&
                             e->gap_b + 1 == v;
                if (!ok)
                        return fail(m, MODEL_INV_ORDER,
                                    "A%d: %s (x-tag %ld) names the gap "
                                    "%" PRIu64 "-%" PRIu64 " but the next "
                                    "version is %s",
                                    a, w, e->tag, e->gap_a, e->gap_b, ns);
        }
        for (size_t i = 0; i < nn && !ok; i++) {
                if (v == nexts[i])
                        ok = true;
                else if (moves_l(e) && latest && e->has_expected &&
                         e->expected == nexts[i] && v > nexts[i])
                        ok = true; /* latest_wins: the DLQ record names it */
        }
        if (!ok && !g->has && v > nexts[0] &&
            m->tc->new_aggregate == SG_NEWAGG_TRUST_FIRST_SEEN)
                ok = true; /* adopted as the starting point (§4) */
        for (size_t i = 0; i < g->rel_cnt && !ok; i++)
                if (g->rel[i] >= v && (!g->has || g->rel[i] >= g->last) &&
                    !new_seq)
                        return fail(m, MODEL_INV_ORDER,
                                    "A%d: %s (x-tag %ld) at or below version "
                                    "%" PRIu64 ", which an operator release "
                                    "set as L (L never decreases; the next "
                                    "version is %s)",
                                    a, w, e->tag, g->rel[i], ns);
        if (!ok)
                return fail(m, MODEL_INV_ORDER,
                            "A%d: %s (x-tag %ld) but the next version is %s, "
                            "and no header names the gap",
                            a, w, e->tag, ns);
        g->has = true;
        g->last = v;
        g->l_epoch = ep;
        rel_drop(g, v);
}

/* Invariant 2b (semantics §4b) for effect @p e of event record @p r: an
 * output's epoch is not below the epoch E is known to have reached; a
 * fenced_epoch record's epoch is below one consumed for its aggregate so
 * far (@p seen_hi, up to this batch's end); a record judged past row 4b
 * (every verdict but malformed, rows 2–3 and row 4) shows E >= its epoch. */
static void epoch_check(model_t *m, const mrec_t *r, const meff_t *e,
                        const bool *seen_has, const uint64_t *seen_hi) {
        agg_model_t *g = &m->agg[r->agg];
        char w[64];
        if (m->tc->epoch.kind == SG_SRC_NONE || r->malformed)
                return;
        eff_what(e, w, sizeof(w));
        bool dlq = e->kind == SG_EFFECT_DLQ;
        if (dlq && !strcmp(e->reason, "fenced_epoch")) {
                m->res->stats.fenced++;
                if (!seen_has[r->agg] || r->epoch >= seen_hi[r->agg])
                        return fail(m, MODEL_INV_ORDER,
                                    "A%d: %s (x-tag %ld) of epoch %" PRIu64
                                    " but no record of a higher epoch was "
                                    "consumed for it",
                                    r->agg, w, e->tag, r->epoch);
        }
        if (!dlq && g->e_has && r->epoch < g->e_lb)
                return fail(m, MODEL_INV_ORDER,
                            "A%d: %s (x-tag %ld) of epoch %" PRIu64
                            " after its epoch reached %" PRIu64
                            " (lower epochs are fenced)",
                            r->agg, w, e->tag, r->epoch, g->e_lb);
        if (dlq && (!strcmp(e->reason, "malformed") ||
                    !strcmp(e->reason, "idempotency_conflict") ||
                    !strcmp(e->reason, "aggregate_quarantined")))
                return;
        if (!g->e_has || r->epoch > g->e_lb) {
                g->e_has = true;
                g->e_lb = r->epoch;
        }
}

/* Whether the key recorded by record @p rec held a DLQ verdict when the
 * batch had produced @p at effects (semantics §3 Replay). */
static bool verdict_dlq(const model_t *m, long rec, const long *eff_of,
                        const meff_t *E, size_t at) {
        if (rec < 0)
                return false;
        if (eff_of[rec] >= 0)
                return (size_t)eff_of[rec] < at &&
                       E[eff_of[rec]].kind == SG_EFFECT_DLQ;
        return m->recs[rec].status == T_DLQ;
}

static void check_batch(model_t *m, const meff_t *E, size_t ecnt,
                        const uint32_t *consumed, const size_t *eff_at,
                        size_t ccnt) {
        /* releases with a version may set L (invariant 2) */
        for (size_t i = 0; i < ccnt; i++) {
                const mrec_t *r = &m->recs[consumed[i]];
                if (r->kind == R_CONTROL && r->has_version)
                        rel_add(&m->agg[r->agg], r->version);
        }
        /* invariant 2b: the highest epoch consumed per aggregate */
        bool seen_has[MODEL_AGGS] = {false};
        uint64_t seen_hi[MODEL_AGGS] = {0};
        for (size_t i = 0; i < ccnt; i++) {
                const mrec_t *r = &m->recs[consumed[i]];
                if (r->kind == R_EVENT && !r->malformed &&
                    (!seen_has[r->agg] || r->epoch > seen_hi[r->agg])) {
                        seen_has[r->agg] = true;
                        seen_hi[r->agg] = r->epoch;
                }
        }
        for (int a = 0; a < MODEL_AGGS; a++) {
                agg_model_t *g = &m->agg[a];
                if (g->seen_has && (!seen_has[a] || g->seen_hi > seen_hi[a])) {
                        seen_has[a] = true;
                        seen_hi[a] = g->seen_hi;
                }
        }
        /* the effects in order: invariants 3 and 2, and the requests */
        long *eff_of = malloc((m->rec_cnt + 1) * sizeof(long));
        if (!eff_of)
                abort();
        for (size_t i = 0; i < m->rec_cnt; i++)
                eff_of[i] = -1;
        for (size_t i = 0; i < ecnt && !failed(m); i++) {
                const meff_t *e = &E[i];
                char w[64];
                if (e->kind == SG_EFFECT_OUTPUT &&
                    !strcmp(e->topic, REQUEST_TOPIC)) {
                        if (e->rid[0] && e->req_agg >= 0) {
                                m->req = grow(m->req, &m->req_size, m->req_cnt,
                                              sizeof(*m->req));
                                snprintf(m->req[m->req_cnt].rid,
                                         sizeof(m->req[0].rid), "%s", e->rid);
                                m->res->stats.requests++;
                                m->req[m->req_cnt++].agg = e->req_agg;
                        }
                        continue;
                }
                if (!is_record_effect(e))
                        continue;
                if (e->has_snap) {
                        if (e->kind != SG_EFFECT_OUTPUT || e->agg < 0) {
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "a snapshot record without its "
                                     "aggregate");
                                break;
                        }
                        agg_model_t *g = &m->agg[e->agg];
                        if (m->tc->order_mode != SG_ORDER_NONE && g->has &&
                            e->snap < g->last) {
                                fail(m, MODEL_INV_ORDER,
                                     "A%d: snapshot record S=%" PRIu64
                                     " applied after version %" PRIu64
                                     " (a reply with S < L is late and "
                                     "ignored)",
                                     e->agg, e->snap, g->last);
                                break;
                        }
                        m->res->stats.snapshots++;
                        g->has = true;
                        g->last = e->snap;
                        rel_drop(g, e->snap);
                        continue;
                }
                if (e->tag < 0 || (size_t)e->tag >= m->rec_cnt) {
                        fail(m, MODEL_INV_ACCOUNTED,
                             "%s on %s without the x-tag of an input record",
                             eff_what(e, w, sizeof(w)), e->topic);
                        break;
                }
                const mrec_t *r = &m->recs[e->tag];
                if (eff_of[e->tag] >= 0) {
                        fail(m, MODEL_INV_ACCOUNTED,
                             "x-tag %ld emitted twice in one batch", e->tag);
                        break;
                }
                eff_of[e->tag] = (long)i;
                if (r->kind != R_EVENT) {
                        fail(m, MODEL_INV_ACCOUNTED,
                             "a %s (x-tag %ld) was forwarded as %s: it is not "
                             "an event",
                             r->kind == R_CONTROL ? "control record"
                                                  : "snapshot reply",
                             e->tag, eff_what(e, w, sizeof(w)));
                        break;
                }
                if (e->kind == SG_EFFECT_OUTPUT) {
                        if (e->partition != r->src) {
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "x-tag %ld from partition %d was output "
                                     "to partition %d",
                                     e->tag, r->src, e->partition);
                                break;
                        }
                        if (m->applied_id[r->src][r->id]) {
                                fail(m, MODEL_INV_ONCE,
                                     "event id p%d-e%d applied a second time "
                                     "(x-tag %ld, v%" PRIu64 ")",
                                     r->src, r->id, e->tag, r->version);
                                break;
                        }
                        m->applied_id[r->src][r->id] = true;
                        m->applied_cnt++;
                        m->res->stats.outputs++;
                        m->res->stats.gap_headers += e->gap != 0;
                }
                epoch_check(m, r, e, seen_has, seen_hi);
                if (failed(m))
                        break;
                if (e->kind == SG_EFFECT_DLQ) {
                        m->res->stats.dlq++;
                        for (int k = 1; k < SG_R__CNT; k++)
                                if (!strcmp(e->reason,
                                            sg_reason_name((sg_reason_t)k)))
                                        m->dlq_cnt[k]++;
                }
                if (m->tc->order_mode == SG_ORDER_NONE)
                        continue;
                if (e->kind == SG_EFFECT_OUTPUT)
                        order_apply(m, r->agg, e, r->version);
                else if (moves_l(e))
                        order_apply(m, r->agg, e, e->actual);
        }
        /* invariant 2: L as the store has it is L as the output shows it
         * (no version given up silently), unless a release may have set it */
        for (int a = 0;
             a < MODEL_AGGS && !failed(m) && m->tc->order_mode != SG_ORDER_NONE;
             a++) {
                const pview_t *pv = &m->view[part_of_agg(a)];
                const agg_model_t *g = &m->agg[a];
                if (!m->assigned[part_of_agg(a)] || g->rel_cnt)
                        continue;
                bool has = pv->agg_present[a] && pv->agg[a].has_last;
                /* restart: an epoch entered without a version applied in
                 * it yet has no L (semantics §4b) */
                bool want =
                        g->has && !(epoch_restarts(m) && pv->agg_present[a] &&
                                    pv->agg[a].has_epoch &&
                                    pv->agg[a].epoch > g->l_epoch);
                if (has != want || (has && pv->agg[a].last_version != g->last))
                        fail(m, MODEL_INV_ORDER,
                             "A%d: the store has L = %s%" PRIu64 " but the "
                             "output and DLQ records say %s%" PRIu64,
                             a, has ? "" : "none ",
                             has ? pv->agg[a].last_version : 0,
                             want ? "" : "none ", want ? g->last : 0);
        }
        /* invariant 2b: the store's E is at least what the effects show */
        for (int a = 0;
             a < MODEL_AGGS && !failed(m) && m->tc->epoch.kind != SG_SRC_NONE;
             a++) {
                const pview_t *pv = &m->view[part_of_agg(a)];
                agg_model_t *g = &m->agg[a];
                g->seen_has = seen_has[a];
                g->seen_hi = seen_hi[a];
                if (!m->assigned[part_of_agg(a)] || !g->e_has)
                        continue;
                if (!pv->agg_present[a] || !pv->agg[a].has_epoch ||
                    pv->agg[a].epoch < g->e_lb)
                        fail(m, MODEL_INV_ORDER,
                             "A%d: the store has epoch %s%" PRIu64
                             " but its records show epoch %" PRIu64,
                             a,
                             pv->agg_present[a] && pv->agg[a].has_epoch
                                     ? ""
                                     : "none ",
                             pv->agg_present[a] ? pv->agg[a].epoch : 0,
                             g->e_lb);
        }
        /* invariant 1: the records consumed, in order */
        for (size_t i = 0; i < ccnt && !failed(m); i++) {
                uint32_t t = consumed[i];
                mrec_t *r = &m->recs[t];
                long ei = eff_of[t];
                const meff_t *e = ei >= 0 ? &E[ei] : NULL;
                char rw[160], w[64] = "";
                rec_what(m, t, rw, sizeof(rw));
                if (e)
                        eff_what(e, w, sizeof(w));
                if (r->status != T_FED) {
                        fail(m, MODEL_HARNESS_ERROR,
                             "%s consumed again by a committed batch", rw);
                        break;
                }
                if (r->kind != R_EVENT) {
                        r->status = r->kind == R_CONTROL ? T_CONTROL : T_REPLY;
                        if (r->kind == R_CONTROL)
                                m->res->stats.releases++;
                        else
                                m->res->stats.replies++;
                        continue;
                }
                int *rec_pay = &m->recorded[r->src][r->id];
                long *recorder = &m->recorder[r->src][r->id];
                bool dlq = e && e->kind == SG_EFFECT_DLQ;
                bool *rec_bad = &m->rec_malformed[r->src][r->id];
                bool again = r->replay && *rec_pay == r->payload &&
                             verdict_dlq(m, *recorder, eff_of, E, eff_at[i]);
                if (r->malformed && *rec_pay == r->payload && !r->replay) {
                        /* semantics §3 row 1: a malformed copy of a live
                         * key with its payload is a duplicate */
                        if (e || m->parked_now[t])
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "%s: a malformed duplicate (same id, "
                                     "same payload), got %s",
                                     rw, e ? w : "parked");
                        r->status = T_DUPLICATE;
                        m->res->stats.duplicates++;
                } else if (r->malformed) {
                        if (!dlq || strcmp(e->reason, "malformed"))
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "%s: expected DLQ malformed, got %s", rw,
                                     e ? w : "nothing");
                        r->status = T_DLQ;
                        if (*rec_pay < 0) { /* recorded, claiming nothing */
                                *rec_pay = r->payload;
                                *recorder = (long)t;
                                *rec_bad = true;
                        }
                } else if (*rec_pay < 0 || again || *rec_bad) {
                        *rec_bad = false;
                        if (dlq &&
                            (!strcmp(e->reason, "malformed") ||
                             !strcmp(e->reason, "idempotency_conflict"))) {
                                fail(m, MODEL_INV_ACCOUNTED, "%s: %s, got %s",
                                     rw,
                                     again ? "a replay of a key recorded "
                                             "with a DLQ verdict, judged "
                                             "again"
                                           : "a new idempotency key",
                                     w);
                        } else if (e) {
                                r->status = dlq ? T_DLQ : T_OUTPUT;
                        } else if (m->parked_now[t]) {
                                r->status = T_PARKED;
                                m->res->stats.parked++;
                        } else {
                                r->status = T_PARKED; /* judged below */
                        }
                        *rec_pay = r->payload;
                        *recorder = (long)t;
                        r->rejudged = again;
                        m->res->stats.replays += again;
                } else if (*rec_pay == r->payload) {
                        if (e || m->parked_now[t])
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "%s: a duplicate of an accounted record "
                                     "(same id, same payload%s), got %s",
                                     rw,
                                     r->replay ? ", its key not recorded with "
                                                 "a DLQ verdict"
                                               : "",
                                     e ? w : "parked");
                        r->status = T_DUPLICATE;
                        m->res->stats.duplicates++;
                } else {
                        if (!dlq || strcmp(e->reason, "idempotency_conflict"))
                                fail(m, MODEL_INV_ACCOUNTED,
                                     "%s: the id was recorded with payload %d; "
                                     "expected DLQ idempotency_conflict, got "
                                     "%s",
                                     rw, *rec_pay, e ? w : "nothing");
                        r->status = T_DLQ;
                        m->res->stats.conflicts++;
                }
        }
        /* effects of records parked by earlier batches */
        for (size_t i = 0; i < ecnt && !failed(m); i++) {
                const meff_t *e = &E[i];
                if (!is_record_effect(e) || e->has_snap || e->tag < 0)
                        continue;
                mrec_t *r = &m->recs[e->tag];
                bool now = false;
                for (size_t j = 0; j < ccnt && !now; j++)
                        now = consumed[j] == (uint32_t)e->tag;
                if (now)
                        continue;
                if (r->status != T_PARKED) {
                        char rw[160], w[64];
                        rec_what(m, (uint32_t)e->tag, rw, sizeof(rw));
                        fail(m, MODEL_INV_ACCOUNTED,
                             "%s emitted as %s but it was already accounted "
                             "as %s",
                             rw, eff_what(e, w, sizeof(w)),
                             status_names[r->status]);
                        break;
                }
                r->status = e->kind == SG_EFFECT_DLQ ? T_DLQ : T_OUTPUT;
        }
        /* parked records still parked, or superseded; nothing vanished */
        for (size_t t = 0; t < m->rec_cnt && !failed(m); t++) {
                mrec_t *r = &m->recs[t];
                if (r->kind != R_EVENT || !m->assigned[r->src])
                        continue;
                if (m->parked_now[t] && r->status != T_PARKED) {
                        char rw[160];
                        rec_what(m, (uint32_t)t, rw, sizeof(rw));
                        fail(m, MODEL_INV_ACCOUNTED,
                             "the store holds %s as parked but it was "
                             "accounted as %s",
                             rw, status_names[r->status]);
                        break;
                }
                if (r->status != T_PARKED || m->parked_now[t] || eff_of[t] >= 0)
                        continue;
                /* it left the park without a record: only a snapshot or a
                 * release to S >= its version may supersede it (§3, §4) */
                bool ok = false;
                for (size_t i = 0; i < ecnt && !ok; i++)
                        ok = E[i].has_snap && E[i].agg == r->agg &&
                             E[i].snap >= r->version;
                for (size_t i = 0; i < ccnt && !ok; i++) {
                        const mrec_t *c = &m->recs[consumed[i]];
                        ok = c->kind == R_CONTROL && c->agg == r->agg &&
                             c->has_version && c->version >= r->version;
                }
                if (ok) {
                        r->status = T_SUPERSEDED;
                        m->res->stats.superseded++;
                        continue;
                }
                char rw[160];
                rec_what(m, (uint32_t)t, rw, sizeof(rw));
                bool fresh = false;
                for (size_t i = 0; i < ccnt && !fresh; i++)
                        fresh = consumed[i] == t;
                fail(m, MODEL_INV_ACCOUNTED,
                     "%s vanished: %s, and no output, DLQ record, snapshot or "
                     "release accounts for it",
                     rw,
                     !fresh ? "it was parked and is no longer"
                     : r->rejudged
                             ? "a replay whose key was recorded with a DLQ "
                               "verdict, so judged again, but not parked"
                             : "not a duplicate, not parked");
        }
        free(eff_of);
}

/* ---- operations ------------------------------------------------------------ */

static void shadow_apply(model_t *m, const meff_t *E, size_t ecnt) {
        if (!m->shadow || failed(m))
                return;
        sg_txn_t *t;
        if (sg_txn_begin(m->shadow, true, &t, m->err, sizeof(m->err)))
                return fail(m, MODEL_HARNESS_ERROR, "shadow txn: %s", m->err);
        for (size_t i = 0; i < ecnt; i++) {
                const meff_t *e = &E[i];
                if (e->kind != SG_EFFECT_CHANGELOG)
                        continue;
                if (!e->key || e->key_len < 1 || e->partition < 0 ||
                    e->partition >= MODEL_PARTS) {
                        fail(m, MODEL_INV_REPLAY,
                             "a changelog effect without a key or partition");
                        break;
                }
                sg_err_t err = sg_store_apply_change(
                        t, &m->tp[e->partition], e->key[0], e->key + 1,
                        e->key_len - 1, e->value, e->value_len, m->err,
                        sizeof(m->err));
                if (err) {
                        fail(m, MODEL_INV_REPLAY,
                             "changelog record (%s) does not apply: %s",
                             db_name(e->key[0]), m->err);
                        break;
                }
        }
        if (failed(m))
                sg_txn_abort(t);
        else if (sg_txn_commit(t, m->err, sizeof(m->err)))
                fail(m, MODEL_HARNESS_ERROR, "shadow commit: %s", m->err);
}

/* Copies the effects of the open batch. */
static meff_t *effects_copy(model_t *m, size_t *cntp) {
        const sg_effect_t *ef;
        size_t n = m->proc.effects(m->proc.opaque, &ef);
        meff_t *E = calloc(n ? n : 1, sizeof(*E));
        if (!E)
                abort();
        for (size_t i = 0; i < n; i++)
                eff_copy(&E[i], &ef[i]);
        *cntp = n;
        return E;
}

/* One attempt at a batch: begin, process, tick. Returns the effects
 * (or NULL on an engine error, the batch aborted). */
static meff_t *batch_run(model_t *m, const model_op_t *op, int64_t *pos,
                         uint32_t *consumed, size_t *eff_at, size_t *ccntp,
                         size_t *ecntp) {
        sg_err_t err;
        sg_engine_set_clock(m->eng, m->now);
        if ((err = m->proc.batch_begin(m->proc.opaque, m->now, m->err,
                                       sizeof(m->err)))) {
                fail(m, MODEL_ENGINE_ERROR, "batch_begin: %s: %s",
                     sg_err2str(err), m->err);
                return NULL;
        }
        bool paused[NSRC] = {0};
        uint64_t mix = op->mix;
        size_t ccnt = 0;
        for (int s = 0; s < NSRC; s++)
                pos[s] = m->committed[s];
        for (unsigned k = 0; k < op->n; k++) {
                int cand[NSRC], cc = 0;
                for (int s = 0; s < NSRC; s++) {
                        if (s < MODEL_PARTS && !m->assigned[s])
                                continue;
                        if (!paused[s] && pos[s] < (int64_t)m->log_cnt[s])
                                cand[cc++] = s;
                }
                if (!cc)
                        break;
                int s = cand[splitmix(&mix) % (uint64_t)cc];
                uint32_t tag = m->log[s][pos[s]];
                sg_record_t rec = rec_view(&m->recs[tag]);
                sg_process_result_t res = SG_PROCESSED;
                const sg_effect_t *ef;
                eff_at[ccnt] = m->proc.effects(m->proc.opaque, &ef);
                if ((err = m->proc.process(m->proc.opaque, &rec, &res, m->err,
                                           sizeof(m->err)))) {
                        char rw[160];
                        rec_what(m, tag, rw, sizeof(rw));
                        fail(m, MODEL_ENGINE_ERROR, "process %s: %s: %s", rw,
                             sg_err2str(err), m->err);
                        m->proc.batch_abort(m->proc.opaque);
                        return NULL;
                }
                if (res == SG_PAUSE && s < MODEL_PARTS) {
                        paused[s] = true; /* seek back, pause the partition */
                        m->res->stats.pauses++;
                        continue;
                }
                pos[s]++;
                consumed[ccnt++] = tag;
        }
        /* how far each partition is read: gap deadlines wait for the
         * backlog (processor.h position) */
        for (int s = 0; s < MODEL_PARTS && m->proc.position; s++)
                if (m->assigned[s])
                        m->proc.position(m->proc.opaque, TOPIC, s,
                                         paused[s] ? -1
                                                   : (int64_t)m->log_cnt[s] -
                                                             pos[s]);
        m->sampled = m->now - m->gauges_at >= 1000;
        if (m->sampled)
                m->gauges_at = m->now;
        if ((err = m->proc.tick(m->proc.opaque, m->err, sizeof(m->err)))) {
                fail(m, MODEL_ENGINE_ERROR, "tick: %s: %s", sg_err2str(err),
                     m->err);
                m->proc.batch_abort(m->proc.opaque);
                return NULL;
        }
        *ccntp = ccnt;
        return effects_copy(m, ecntp);
}

/* Every effect delivered at the next offset of its topic (changelog
 * records at the partition's changelog offsets). */
static void deliver(model_t *m, const meff_t *E, size_t ecnt,
                    int64_t *cl_first) {
        for (int p = 0; p < MODEL_PARTS; p++)
                cl_first[p] = m->cl_next[p];
        for (size_t i = 0; i < ecnt; i++) {
                int64_t off;
                if (E[i].kind == SG_EFFECT_CHANGELOG) {
                        int p = E[i].partition;
                        if (p < 0 || p >= MODEL_PARTS)
                                continue;
                        off = m->cl_next[p]++;
                } else if (E[i].kind == SG_EFFECT_HTTP_GET) {
                        continue;
                } else {
                        int t = E[i].kind == SG_EFFECT_DLQ           ? 1
                                : !strcmp(E[i].topic, REQUEST_TOPIC) ? 2
                                                                     : 0;
                        off = m->topic_off[t]++;
                }
                if (m->proc.delivered)
                        m->proc.delivered(m->proc.opaque, i, off);
        }
}

static bool same_effects(const meff_t *a, size_t an, const meff_t *b, size_t bn,
                         size_t *at) {
        size_t i = 0, j = 0;
        for (;;) {
                while (i < an && a[i].kind == SG_EFFECT_CHANGELOG)
                        i++;
                while (j < bn && b[j].kind == SG_EFFECT_CHANGELOG)
                        j++;
                if (i == an || j == bn)
                        break;
                if (a[i].fp_len != b[j].fp_len ||
                    memcmp(a[i].fp, b[j].fp, a[i].fp_len)) {
                        *at = i;
                        return false;
                }
                i++;
                j++;
        }
        *at = i;
        return i == an && j == bn;
}

static void exec_batch(model_t *m, const model_op_t *op) {
        int mode = op->mode % MODEL_BATCH_MODES;
        uint32_t *consumed = malloc((op->n + 1) * sizeof(*consumed));
        size_t *eff_at = malloc((op->n + 1) * sizeof(*eff_at));
        if (!consumed || !eff_at)
                abort();
        int64_t pos[NSRC], cl_first[MODEL_PARTS];
        size_t ccnt = 0, ecnt = 0;
        sg_metrics_t before = *sg_engine_metrics(m->eng);
        meff_t *E = batch_run(m, op, pos, consumed, eff_at, &ccnt, &ecnt);
        if (!E)
                goto out;
        if (mode == MODEL_ABORT_RETRY || mode == MODEL_ABORT_DELIVERED ||
            mode == MODEL_ABORT) {
                if (mode == MODEL_ABORT_DELIVERED) {
                        deliver(m, E, ecnt, cl_first);
                        /* an aborted transaction's records keep their
                         * offsets (read_committed skips them) and its
                         * abort marker takes one more */
                        for (int p = 0; p < MODEL_PARTS; p++)
                                if (m->cl_next[p] != cl_first[p])
                                        m->cl_next[p]++;
                }
                m->proc.batch_abort(m->proc.opaque);
                m->res->stats.aborts++;
                /* its sampling of the age gauges is gone with it (but the
                 * engine remembers when it sampled) */
                m->sampled = false;
                if (memcmp(&before, sg_engine_metrics(m->eng),
                           sizeof(before))) {
                        fail(m, MODEL_INV_GAUGES,
                             "batch_abort changed the engine's metrics");
                        goto out;
                }
                /* the abort took the batches since the last checkpoint
                 * with it (semantics §6): restored before the re-read */
                if (!restore_behind(m))
                        goto out;
                if (mode == MODEL_ABORT)
                        goto out;
                /* the loop re-reads the same records at once: the same
                 * decisions, as if the aborted attempt never happened */
                size_t ecnt2 = 0, ccnt2 = 0, at = 0;
                meff_t *E2 =
                        batch_run(m, op, pos, consumed, eff_at, &ccnt2, &ecnt2);
                if (!E2)
                        goto out;
                if (!same_effects(E, ecnt, E2, ecnt2, &at)) {
                        char w[64] = "";
                        if (at < ecnt)
                                eff_what(&E[at], w, sizeof(w));
                        fail(m, MODEL_INV_ACCOUNTED,
                             "the batch re-read after an abort decided "
                             "differently (%zu and %zu effects; first "
                             "difference at effect %zu, %s)",
                             ecnt, ecnt2, at, w);
                        m->proc.batch_abort(m->proc.opaque);
                        effs_free(E2, ecnt2);
                        goto out;
                }
                effs_free(E, ecnt);
                E = E2;
                ecnt = ecnt2;
                ccnt = ccnt2;
        }
        deliver(m, E, ecnt, cl_first);
        /* the Kafka transaction commits: output, DLQ, changelog, offsets */
        bool appended[MODEL_PARTS] = {0};
        for (size_t i = 0; i < ecnt; i++) {
                const meff_t *e = &E[i];
                if (e->kind != SG_EFFECT_CHANGELOG || e->partition < 0 ||
                    e->partition >= MODEL_PARTS)
                        continue;
                int p = e->partition;
                appended[p] = true;
                m->cl[p] = grow(m->cl[p], &m->cl_size[p], m->cl_cnt[p],
                                sizeof(clrec_t));
                clrec_t *c = &m->cl[p][m->cl_cnt[p]++];
                c->offset = cl_first[p]++;
                c->key = malloc(e->key_len ? e->key_len : 1);
                if (!c->key)
                        abort();
                memcpy(c->key, e->key, e->key_len);
                c->key_len = e->key_len;
                if (e->value) {
                        c->value = malloc(e->value_len ? e->value_len : 1);
                        if (!c->value)
                                abort();
                        memcpy(c->value, e->value, e->value_len);
                        c->value_len = e->value_len;
                }
        }
        for (int p = 0; p < MODEL_PARTS; p++)
                if (appended[p])
                        m->cl_next[p]++; /* the commit marker */
        for (int s = 0; s < NSRC; s++)
                m->committed[s] = pos[s];
        m->res->stats.batches++;
        if (mode == MODEL_CRASH) {
                m->res->stats.crashes++;
                /* killed between the Kafka commit (at_least_once: the
                 * markers acknowledged) and batch_commit: the store is
                 * behind its changelog until the restart's restore, by
                 * every batch since the last checkpoint */
                engine_close(m, false);
                if (!engine_open(m, false, false, false))
                        goto out;
        } else {
                sg_err_t err = m->proc.batch_commit(m->proc.opaque, m->err,
                                                    sizeof(m->err));
                if (err) {
                        fail(m, MODEL_ENGINE_ERROR, "batch_commit: %s: %s",
                             sg_err2str(err), m->err);
                        goto out;
                }
                m->gauges_fresh = true;
        }
        shadow_apply(m, E, ecnt);
        /* the accounting is reported before the store's own consistency:
         * it says which record a broken count is about */
        model_result_t *real = m->res, store_res = {0};
        m->res = &store_res;
        check_store(m);
        m->res = real;
        if (!real->age_note[0])
                memcpy(real->age_note, store_res.age_note,
                       sizeof(real->age_note));
        check_batch(m, E, ecnt, consumed, eff_at, ccnt);
        if (!failed(m) && store_res.inv)
                *m->res = store_res;
        if (mode == MODEL_CRASH) /* the new engine did not count it */
                m->applied_cnt = 0, memset(m->dlq_cnt, 0, sizeof(m->dlq_cnt));
        else if (!failed(m))
                check_counters(m);
        check_replay(m);
out:
        if (E)
                effs_free(E, ecnt);
        free(consumed);
        free(eff_at);
}

static int64_t clamp_clock(int64_t t) {
        return t < T0 ? T0 : t > CLOCK_MAX ? CLOCK_MAX : t;
}

static void exec_clock(model_t *m, const model_op_t *op) {
        int64_t d = op->delta_ms / MODEL_QUANTUM_MS * MODEL_QUANTUM_MS;
        m->wall = clamp_clock(m->wall + d);
        if (!(op->flags & MOPF_WALL) && d > 0)
                m->now = clamp_clock(m->now + d); /* time passes */
}

static void exec_op(model_t *m, const model_op_t *op) {
        switch (op->kind) {
        case MOP_RECORD:
                exec_record(m, op);
                break;
        case MOP_RELEASE:
                exec_release(m, op);
                break;
        case MOP_REPLY:
                exec_reply(m, op);
                break;
        case MOP_BATCH:
                exec_batch(m, op);
                break;
        case MOP_CLOCK:
                exec_clock(m, op);
                break;
        case MOP_REVOKE:
                for (int p = 0; p < MODEL_PARTS; p++) {
                        if (!(op->n & (1u << p)) || !m->assigned[p])
                                continue;
                        /* the loop checkpoints before the revoke */
                        if (m->proc.checkpoint(m->proc.opaque, m->err,
                                               sizeof(m->err))) {
                                fail(m, MODEL_ENGINE_ERROR, "checkpoint: %s",
                                     m->err);
                                break;
                        }
                        if (m->proc.revoke)
                                m->proc.revoke(m->proc.opaque, TOPIC, p);
                        m->assigned[p] = false;
                        m->gauges_fresh = false;
                        m->res->stats.revokes++;
                }
                break;
        case MOP_ASSIGN:
                for (int p = 0; p < MODEL_PARTS && !failed(m); p++)
                        if (!m->assigned[p])
                                assign_part(m, p, false, false);
                check_store(m);
                check_replay(m);
                break;
        case MOP_CHECKPOINT:
                /* as the loop asks for one (a revoke, a clean stop) */
                if (m->proc.checkpoint(m->proc.opaque, m->err,
                                       sizeof(m->err))) {
                        fail(m, MODEL_ENGINE_ERROR, "checkpoint: %s", m->err);
                        break;
                }
                m->res->stats.checkpoints++;
                check_store(m);
                check_replay(m);
                break;
        case MOP_KILL:
                /* kill -9 between batches: the store keeps its last
                 * checkpoint; the new process restores the changelog tail
                 * at its assignment (semantics §6) */
                m->res->stats.kills++;
                engine_close(m, false);
                if (!engine_open(m, false, false, false))
                        break;
                check_store(m);
                check_replay(m);
                break;
        case MOP_RESTART:
        case MOP_RESTORE: {
                bool fresh = op->kind == MOP_RESTORE;
                if (fresh)
                        m->res->stats.restores++;
                else
                        m->res->stats.restarts++;
                engine_close(m, true);
                if (!engine_open(m, fresh, op->flags & MOPF_COMPACT,
                                 op->flags & MOPF_NO_TOMBS))
                        break;
                check_store(m);
                check_replay(m);
                break;
        }
        default:
                break;
        }
}

/* ---- generation ---------------------------------------------------------- */

/* The live store's view of aggregate @p a (false: no record). */
static bool store_agg(model_t *m, int a, sg_agg_rec_t *out) {
        sg_txn_t *t;
        bool owned;
        if (!m->eng || !live_begin(m, &t, &owned))
                return false;
        bool found = sg_agg_get(t, &m->tp[part_of_agg(a)], m->agg_hash[a],
                                out) == SG_OK;
        live_end(t, owned);
        return found;
}

/* A version "around L": L+1 most often, gaps of 2..5, L, L-1, first_version,
 * and values near 2^64-1. */
static uint64_t gen_version(model_t *m, model_src_t *s, int a) {
        sg_agg_rec_t r;
        agg_model_t *g = &m->agg[a];
        bool has = store_agg(m, a, &r) && r.has_last;
        uint64_t base = has ? r.last_version : 0;
        if (g->hint_set && (!has || (g->hint > base && g->hint - base <= 6))) {
                base = g->hint;
                has = true;
        }
        uint64_t F = first_version(m);
        uint32_t c = pick(s, 100);
        uint64_t v;
        if (!has) {
                v = c < 55   ? F
                    : c < 75 ? F + 1 + pick(s, 3)
                    : c < 82 ? F + 2 + pick(s, 4)
                    : c < 87 ? (F ? F - 1 : F)
                    : c < 94 ? UINT64_MAX - pick(s, 2)
                             : pick(s, 10);
        } else {
                v = c < 50   ? base + 1
                    : c < 70 ? base + 2 + pick(s, 4)
                    : c < 77 ? base
                    : c < 83 ? base - 1
                    : c < 87 ? F
                    : c < 91 ? UINT64_MAX - pick(s, 2)
                             : base + pick(s, 8);
        }
        if ((has && c < 50) || (!has && c < 55)) {
                g->hint_set = true;
                g->hint = v;
        }
        return v;
}

/* An event type: mostly one the state machine allows from the current
 * state, sometimes any, sometimes unknown. */
static uint8_t gen_type(model_t *m, model_src_t *s, int a) {
        const sg_state_machine_t *sm = &m->tc->sm;
        if (!sm->enabled)
                return 0;
        uint32_t c = pick(s, 100);
        if (c < 5)
                return NTYPES - 1;
        if (c < 35)
                return (uint8_t)pick(s, NTYPES - 1);
        sg_agg_rec_t r;
        const char *state = store_agg(m, a, &r) ? r.state : sm->initial;
        uint8_t legal[NTYPES];
        int n = 0;
        for (size_t i = 0; i < sm->transition_cnt; i++)
                for (size_t j = 0; j < sm->transitions[i].from_cnt; j++)
                        if (!strcmp(sm->transitions[i].from[j], state))
                                for (int k = 0; k < NTYPES - 1; k++)
                                        if (!strcmp(type_names[k],
                                                    sm->transitions[i].type))
                                                legal[n++] = (uint8_t)k;
        return n ? legal[pick(s, (uint32_t)n)] : (uint8_t)pick(s, NTYPES - 1);
}

/* A version for a release or a snapshot reply for aggregate @p a: around
 * L, or one of its parked versions. */
static uint64_t gen_target(model_t *m, model_src_t *s, int a) {
        sg_agg_rec_t r;
        bool has = store_agg(m, a, &r) && r.has_last;
        uint64_t L = has ? r.last_version : first_version(m);
        uint32_t c = pick(s, 100);
        if (c < 25) {
                uint64_t pv[16];
                int n = 0;
                for (size_t t = 0; t < m->rec_cnt && n < 16; t++)
                        if (m->recs[t].status == T_PARKED &&
                            m->recs[t].agg == a)
                                pv[n++] = m->recs[t].version;
                if (n)
                        return pv[pick(s, (uint32_t)n)] + pick(s, 2);
        }
        return c < 45   ? L + 1
               : c < 62 ? L
               : c < 78 ? L - 1
               : c < 90 ? L + 2 + pick(s, 3)
                        : L + 5;
}

static uint8_t gen_state(model_t *m, model_src_t *s) {
        const sg_state_machine_t *sm = &m->tc->sm;
        if (!sm->enabled || pick(s, 100) < 6)
                return MODEL_STATE_BAD;
        return (uint8_t)pick(s, (uint32_t)sm->state_cnt);
}

/* An epoch for a record of aggregate @p a (semantics §4b): mostly the
 * current leader's, sometimes a new leader's (the epoch moves on), or a
 * deposed leader's that keeps writing. */
static uint8_t gen_epoch(model_t *m, model_src_t *s, int a) {
        agg_model_t *g = &m->agg[a];
        if (m->tc->epoch.kind == SG_SRC_NONE)
                return 0;
        if (!g->gen_epoch)
                g->gen_epoch = 1;
        uint32_t c = pick(s, 100);
        if (c < 8 && g->gen_epoch < UINT8_MAX)
                return ++g->gen_epoch;
        if (c < 22)
                return (uint8_t)(g->gen_epoch - 1 - pick(s, 2) % g->gen_epoch);
        return g->gen_epoch;
}

static void gen_record(model_t *m, model_src_t *s, model_op_t *op) {
        int a = pick(s, 100) < 70 ? (int)pick(s, 3) : (int)pick(s, MODEL_AGGS);
        int p = part_of_agg(a);
        op->kind = MOP_RECORD;
        if (m->id_used[p] &&
            (pick(s, 100) < 40 || m->id_used[p] >= MODEL_IDS)) {
                int id = (int)pick(s, (uint32_t)m->id_used[p]);
                const idinfo_t *in = &m->ids[p][id];
                op->id = (uint8_t)id;
                op->agg = in->agg;
                if (pick(s, 100) < 70) { /* a retry: the same record */
                        op->payload = in->payload;
                        op->type = in->type;
                        op->version = in->version;
                        op->flags = in->malformed ? MOPF_MALFORMED : 0;
                        if (pick(s, 100) < 30) /* replayed from the DLQ */
                                op->flags |= MOPF_REPLAY;
                        op->epoch = gen_epoch(m, s, in->agg);
                        return;
                }
                a = in->agg;
                op->payload = (uint8_t)(pick(s, 100) < 50 ? in->payload
                                                          : 1 - in->payload);
        } else {
                int id = (int)m->id_used[p]++;
                op->id = (uint8_t)id;
                op->agg = (uint8_t)a;
                op->payload = 0;
        }
        op->version = gen_version(m, s, a);
        op->type = gen_type(m, s, a);
        op->epoch = gen_epoch(m, s, a);
        if (pick(s, 100) < 3) {
                op->flags |= MOPF_MALFORMED;
                op->version = pick(s, 4);
        }
        idinfo_t *in = &m->ids[p][op->id];
        if (!in->used) {
                *in = (idinfo_t){.used = true,
                                 .agg = op->agg,
                                 .payload = op->payload,
                                 .type = op->type,
                                 .malformed = op->flags & MOPF_MALFORMED,
                                 .version = op->version};
        }
}

static void gen_release(model_t *m, model_src_t *s, model_op_t *op) {
        int a = (int)pick(s, MODEL_AGGS);
        /* a quarantined aggregate most of the time, when there is one */
        if (pick(s, 100) < 70) {
                for (int k = 0; k < MODEL_AGGS; k++) {
                        sg_agg_rec_t r;
                        int b = (a + k) % MODEL_AGGS;
                        if (store_agg(m, b, &r) &&
                            (r.flags & SG_AGG_QUARANTINED)) {
                                a = b;
                                break;
                        }
                }
        }
        op->kind = MOP_RELEASE;
        op->agg = (uint8_t)a;
        if (pick(s, 100) < 65) {
                op->flags |= MOPF_VERSION;
                op->version = gen_target(m, s, a);
        }
        if (pick(s, 100) < 50)
                op->flags |= MOPF_NUMBER;
        if (m->tc->sm.enabled && pick(s, 100) < 50) {
                op->flags |= MOPF_STATE;
                op->state = gen_state(m, s);
        }
}

static void gen_reply(model_t *m, model_src_t *s, model_op_t *op) {
        op->kind = MOP_REPLY;
        size_t back = m->req_cnt < 8 ? m->req_cnt : 8;
        op->n = (uint16_t)(pick(s, 100) < 70 ? 0 : pick(s, (uint32_t)back));
        int a = m->req[m->req_cnt - 1 - op->n].agg;
        op->version = gen_target(m, s, a);
        uint32_t c = pick(s, 100);
        if (m->tc->sm.enabled ? c < 92 : c < 8) {
                op->flags |= MOPF_STATE;
                op->state = gen_state(m, s);
        }
        c = pick(s, 100);
        if (c < 3)
                op->flags |= MOPF_BAD_BODY;
        else if (c < 6)
                op->flags |= MOPF_OTHER_AGG;
        else if (c < 11)
                op->flags |= MOPF_NO_AGG;
        if (pick(s, 100) < 50)
                op->flags |= MOPF_NUMBER;
}

static void gen_op(model_t *m, model_src_t *s, model_op_t *op) {
        memset(op, 0, sizeof(*op));
        bool snap = m->tc->snapshot.source != SG_SNAP_NONE && m->req_cnt;
        bool any_revoked = false, any_assigned = false;
        for (int p = 0; p < MODEL_PARTS; p++) {
                any_revoked |= !m->assigned[p];
                any_assigned |= m->assigned[p];
        }
        uint32_t c = pick(s, 1000);
        if (c < 420) {
                gen_record(m, s, op);
        } else if (c < 680) {
                op->kind = MOP_BATCH;
                op->n = (uint16_t)(1 + pick(s, 10));
                op->mix = (uint32_t)pick(s, 1u << 16);
                uint32_t d = pick(s, 100);
                op->mode = d < 6    ? MODEL_ABORT_RETRY
                           : d < 11 ? MODEL_ABORT_DELIVERED
                           : d < 15 ? MODEL_ABORT
                           : d < 20 ? MODEL_CRASH
                                    : MODEL_COMMIT;
        } else if (c < 790) {
                op->kind = MOP_CLOCK;
                uint32_t d = pick(s, 100);
                int64_t q = MODEL_QUANTUM_MS;
                int64_t gap = m->tc->gap_timeout_ms / q + 1;
                op->delta_ms = d < 28   ? q * (1 + pick(s, 3))
                               : d < 58 ? q * gap
                               : d < 66 ? q * (2000 / q + 1)
                               : d < 70 ? 300000 + q * (1 + pick(s, 5))
                               : d < 74 ? 3600000
                               : d < 82 ? -q * (1 + pick(s, 10))
                               : d < 88 ? -3600000
                               : d < 94 ? q * (1 + pick(s, 10))
                                        : 3600000;
                if (d >= 74)
                        op->flags = MOPF_WALL; /* stepped, no time passes */
        } else if (c < 855) {
                gen_release(m, s, op);
        } else if (c < 915 && snap) {
                gen_reply(m, s, op);
        } else if (c < 915) {
                gen_record(m, s, op);
        } else if (c < 938 && any_assigned) {
                op->kind = MOP_REVOKE;
                op->n = (uint16_t)(1 + pick(s, (1u << MODEL_PARTS) - 1));
        } else if (c < 962 && any_revoked) {
                op->kind = MOP_ASSIGN;
        } else if (c < 970) {
                op->kind = MOP_RESTART;
        } else if (c < 982) {
                op->kind = MOP_KILL;
        } else if (c < 988) {
                op->kind = MOP_CHECKPOINT;
        } else {
                op->kind = MOP_RESTORE;
                op->flags = (uint8_t)pick(s, 4);
        }
}

/* ---- runs ------------------------------------------------------------------ */

/* Brings every partition back, reads every log to its end (bounded: a
 * paused partition may stay behind) with time passing so that deadlines
 * fire, then compares the compacted changelog replayed into an empty
 * store with the live one. */
static void settle(model_t *m, size_t step) {
        m->step = step;
        model_op_t op = {.kind = MOP_ASSIGN};
        exec_op(m, &op);
        for (int i = 0; i < 12 && !failed(m); i++) {
                bool left = false;
                for (int s = 0; s < NSRC; s++)
                        left |= m->committed[s] < (int64_t)m->log_cnt[s];
                if (!left && i >= 4)
                        break;
                op = (model_op_t){.kind = MOP_BATCH,
                                  .n = 16,
                                  .mix = (uint32_t)i,
                                  .mode = MODEL_COMMIT};
                exec_op(m, &op);
                if (i % 2 == 1) { /* past deadlines and request timeouts */
                        op = (model_op_t){.kind = MOP_CLOCK,
                                          .delta_ms =
                                                  m->tc->gap_timeout_ms + 2200};
                        exec_op(m, &op);
                }
        }
        check_full_replay(m);
}

static void push_op(model_op_t **ops, size_t *cnt, size_t *size,
                    const model_op_t *op) {
        *ops = grow(*ops, size, *cnt, sizeof(**ops));
        (*ops)[(*cnt)++] = *op;
}

int model_generate(size_t v, model_src_t *src, size_t max_ops,
                   model_op_t **opsp, size_t *cntp, model_result_t *res) {
        model_t m;
        model_op_t *ops = NULL;
        size_t cnt = 0, size = 0;
        if (v >= NVARIANTS)
                v %= NVARIANTS;
        if (model_init(&m, v, res)) {
                for (size_t i = 0; i < max_ops && !failed(&m); i++) {
                        model_op_t op;
                        gen_op(&m, src, &op);
                        if (src->done)
                                break;
                        push_op(&ops, &cnt, &size, &op);
                        res->stats.ops++;
                        m.step = i;
                        exec_op(&m, &op);
                }
                if (!failed(&m))
                        settle(&m, cnt);
        }
        model_free(&m);
        *opsp = ops;
        *cntp = cnt;
        return res->inv;
}

int model_replay(size_t v, const model_op_t *ops, size_t cnt,
                 model_result_t *res) {
        model_t m;
        if (v >= NVARIANTS)
                v %= NVARIANTS;
        if (model_init(&m, v, res)) {
                for (size_t i = 0; i < cnt && !failed(&m); i++) {
                        m.step = i;
                        res->stats.ops++;
                        exec_op(&m, &ops[i]);
                }
                if (!failed(&m))
                        settle(&m, cnt);
        }
        model_free(&m);
        return res->inv;
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

size_t model_shrink(size_t v, model_op_t *ops, size_t cnt, int inv,
                    int64_t budget_ms) {
        int64_t deadline = mono_ms() + budget_ms;
        model_op_t *try = malloc((cnt ? cnt : 1) * sizeof(*try));
        model_result_t r;
        if (!try)
                abort();
        for (size_t chunk = cnt / 2 ? cnt / 2 : 1; chunk >= 1;) {
                bool progress = false;
                for (size_t i = 0; i < cnt && mono_ms() < deadline;) {
                        size_t k = i + chunk <= cnt ? chunk : cnt - i;
                        memcpy(try, ops, i * sizeof(*ops));
                        memcpy(try + i, ops + i + k,
                               (cnt - i - k) * sizeof(*ops));
                        if (model_replay(v, try, cnt - k, &r) == inv) {
                                /* keep the shorter list, up to where it
                                 * fails */
                                size_t n =
                                        r.step < cnt - k ? r.step + 1 : cnt - k;
                                memcpy(ops, try, n * sizeof(*ops));
                                cnt = n;
                                progress = true;
                        } else {
                                i += k;
                        }
                }
                if (mono_ms() >= deadline || (chunk == 1 && !progress))
                        break;
                if (!progress)
                        chunk /= 2;
                else if (chunk > cnt / 2 && cnt / 2)
                        chunk = cnt / 2;
        }
        free(try);
        return cnt;
}

/* ---- coverage ------------------------------------------------------------------ */

void model_stats_add(model_stats_t *a, const model_stats_t *b) {
        size_t *x = (size_t *)a;
        const size_t *y = (const size_t *)b;
        for (size_t i = 0; i < sizeof(*a) / sizeof(size_t); i++)
                x[i] += y[i];
}

bool model_coverage(size_t v, const model_stats_t *s, char *missing,
                    size_t size) {
        const variant_t *var = &variants[v % NVARIANTS];
        sg_config_t *conf;
        char err[512];
        missing[0] = '\0';
        if (variant_parse(var, &conf, err, sizeof(err))) {
                snprintf(missing, size, "a configuration: %s", err);
                return false;
        }
        const sg_topic_config_t *tc = sg_config_topic(conf, TOPIC);
        bool strict = tc->order_mode == SG_ORDER_STRICT;
        bool snap = tc->snapshot.source != SG_SNAP_NONE;
        struct {
                bool needed;
                size_t have;
                const char *what;
        } want[] = {
                {true, s->batches, "committed batches"},
                {true, s->outputs, "outputs"},
                {true, s->dlq, "DLQ records"},
                {true, s->duplicates, "duplicates"},
                {true, s->conflicts, "idempotency conflicts"},
                {tc->order_mode != SG_ORDER_NONE, s->replays,
                 "replays judged again"},
                {true, s->aborts, "aborted batches"},
                {true, s->releases, "releases"},
                {true, s->revokes, "revoked partitions"},
                {true, s->restarts, "restarts"},
                {strict, s->parked, "parked records"},
                {tc->order_mode == SG_ORDER_LATEST_WINS ||
                         (strict && tc->gap_policy == SG_GAP_SKIP),
                 s->gap_headers, "gap headers"},
                {snap, s->requests, "snapshot requests"},
                {snap, s->replies, "snapshot replies"},
                {snap, s->snapshots, "snapshot records"},
                {snap, s->superseded, "superseded parked records"},
                {strict && tc->on_park_overflow == SG_OVERFLOW_PAUSE &&
                         tc->max_parked_per_aggregate < 10,
                 s->pauses, "paused partitions"},
                {true, s->crashes, "crashes after the Kafka commit"},
                {true, s->kills, "kills between batches"},
                {true, s->checkpoints, "checkpoints asked for"},
                {var->checkpoint_ms != 0, s->behind_restores,
                 "restores of a store an abort put behind"},
                {true, s->restores, "restores into an empty store"},
                {true, s->restored_records, "restored changelog records"},
                {tc->epoch.kind != SG_SRC_NONE, s->fenced,
                 "fenced_epoch records"},
        };
        size_t len = 0;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                if (want[i].needed && !want[i].have && len < size)
                        len += (size_t)snprintf(missing + len, size - len,
                                                "%s%s", len ? ", " : "no ",
                                                want[i].what);
        sg_config_destroy(conf);
        return len == 0;
}

/* ---- the trace ------------------------------------------------------------------ */

static const char *const mode_names[] = {"commit", "abort+retry",
                                         "abort-after-delivery+retry", "abort",
                                         "crash-after-kafka-commit"};

void model_trace(FILE *out, size_t v, const model_op_t *ops, size_t cnt) {
        const variant_t *var = &variants[v % NVARIANTS];
        fprintf(out, "  variant %s (%s)\n", var->name,
                var->eos ? "exactly_once" : "at_least_once");
        for (size_t i = 0; i < cnt; i++) {
                const model_op_t *o = &ops[i];
                fprintf(out, "  #%-3zu ", i);
                switch (o->kind) {
                case MOP_RECORD:
                        fprintf(out,
                                "record A%d p%d-e%d/%d v=", o->agg % MODEL_AGGS,
                                part_of_agg(o->agg % MODEL_AGGS), o->id,
                                o->payload);
                        if (o->flags & MOPF_MALFORMED)
                                fprintf(out, "\"%s\"",
                                        malformed_text(o->version));
                        else
                                fprintf(out, "%" PRIu64, o->version);
                        fprintf(out, " type=%s epoch=%u%s\n",
                                type_names[o->type % NTYPES], o->epoch,
                                (o->flags & MOPF_REPLAY) ? " replayed" : "");
                        break;
                case MOP_RELEASE:
                        fprintf(out, "release A%d", o->agg % MODEL_AGGS);
                        if (o->flags & MOPF_VERSION)
                                fprintf(out, " version=%" PRIu64, o->version);
                        if (o->flags & MOPF_STATE)
                                fprintf(out, " state#%d", o->state);
                        fprintf(out, "\n");
                        break;
                case MOP_REPLY:
                        fprintf(out,
                                "reply to request #%u from the newest "
                                "S=%" PRIu64 "%s%s%s%s\n",
                                o->n, o->version,
                                (o->flags & MOPF_STATE) ? " with state" : "",
                                (o->flags & MOPF_BAD_BODY) ? " (not JSON)" : "",
                                (o->flags & MOPF_OTHER_AGG)
                                        ? " (other aggregate)"
                                        : "",
                                (o->flags & MOPF_NO_AGG) ? " (no aggregate)"
                                                         : "");
                        break;
                case MOP_BATCH:
                        fprintf(out, "batch n=%u mix=%u %s\n", o->n, o->mix,
                                mode_names[o->mode % MODEL_BATCH_MODES]);
                        break;
                case MOP_CLOCK:
                        fprintf(out, "%s %+" PRId64 " ms\n",
                                (o->flags & MOPF_WALL) ? "wall clock stepped"
                                                       : "time passes",
                                o->delta_ms);
                        break;
                case MOP_REVOKE:
                        fprintf(out, "revoke mask=%u\n", o->n);
                        break;
                case MOP_ASSIGN:
                        fprintf(out, "assign\n");
                        break;
                case MOP_RESTART:
                        fprintf(out, "restart\n");
                        break;
                case MOP_KILL:
                        fprintf(out, "kill -9 (no checkpoint)\n");
                        break;
                case MOP_CHECKPOINT:
                        fprintf(out, "checkpoint\n");
                        break;
                case MOP_RESTORE:
                        fprintf(out, "restore into an empty store%s%s\n",
                                (o->flags & MOPF_COMPACT) ? " (compacted" : "",
                                (o->flags & MOPF_COMPACT)
                                        ? ((o->flags & MOPF_NO_TOMBS)
                                                   ? ", no tombstones)"
                                                   : ")")
                                        : "");
                        break;
                default:
                        fprintf(out, "?\n");
                }
        }
}
