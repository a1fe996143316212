/*
 * scale_prime.c — the --scale phase's priming fast path (bench/README.md
 * "A primed store"): instead of producing millions of input records and
 * letting the process under test read them, it writes the CHANGELOG of a
 * store that already holds them, before the process starts; the process
 * restores it at assignment, as after a move to another machine, and then
 * reads the measured stream (bench/gen.py) and nothing else. Subcommands:
 *
 *   scale_prime seqgate -b BOOTSTRAP -c CONFIG -t INPUT -k K [-d D]
 *                       [plan options] [-X k=v]...
 *     seqgate's changelog (CONFIG: the run's own configuration file; its
 *     group.id, the topic INPUT's settings and changelog topic): the
 *     priming events below are run through libseqgate's engine itself
 *     (sg_engine_t, the processor interface the Kafka loop drives) against
 *     a scratch store, and the SG_EFFECT_CHANGELOG records its batches
 *     make are produced to the changelog topic, partition for partition.
 *     The keys and values are the engine's own (its encoders, its
 *     changelog key builder): a change of the store's format changes what
 *     is written here without an edit. The scratch store is started afresh
 *     every -C events (a tmpfs directory, -s), so that priming does not
 *     meet the cost of a large store it is there to avoid; its keys never
 *     repeat across chunks, so the changelog is the one a single store
 *     would have written. Every priming record carries the input offset
 *     just below the stream's start (the topic's low watermark), so the
 *     partition meta the engine writes says "next: the stream's first
 *     record"; the consumer group's offsets are committed there too, so
 *     both guarantees start exactly at the stream. The records are
 *     produced without a transaction and without at_least_once framing:
 *     the changelog reader applies an unframed record at once
 *     (kafka_changelog.h: "an unframed record (written by exactly_once, in a
 *     transaction)"), and an at_least_once owner claims the partition (its
 *     claim and confirm follow these records) before it restores.
 *
 *   scale_prime peer -b BOOTSTRAP -a APPLICATION_ID -t INPUT -k K [-d D]
 *                    [-T TTL_MS] [plan options] [-X k=v]...
 *     The same store for the Kafka Streams peer (bench/streams-peer), in
 *     its changelog format (Codec.java; Kafka Streams' changelog topics
 *     <application.id>-dedup-changelog and -agg-changelog, one partition
 *     per input partition): dedup key SHA-256(len|topic, len|ce_source,
 *     len|ce_id) → digest 32 | first_seen 8 | verdict 1; agg key the
 *     aggregate id → flags 1 | L 8 | state 1 | parked 4. One record per
 *     key (what the peer's cached agg store writes for a key once per
 *     commit). The group's offsets are committed at the stream's start.
 *
 *   scale_prime probe -b BOOTSTRAP -t INPUT -n N [plan options]
 *     Appends 2N records to INPUT (after the stream) that only a primed
 *     store handles as the checks expect, so that every run proves its
 *     priming was restored and read: for primed aggregates 0..N-1, a
 *     redelivery of its version 1 (same ce_id, same value: a dedup hit)
 *     and a version 1 with a new ce_id (stale: version 1 <= L, DLQ
 *     stale_version). Without the primed state the first would be output
 *     (or parked) and the second applied.
 *
 *   scale_prime plan -k K [-d D] [-n N] [-t INPUT] [plan options]
 *     No broker: prints the plan's figures (per partition aggregates and
 *     events, events per aggregate, first-seen times, batches) on its last
 *     line, and before it the first N events (-n), each with the peer's
 *     dedup key for input topic INPUT (default "in"), for
 *     bench/test_bench.py.
 *
 * The plan (the same for seqgate and the peer, so both stores hold the
 * same keys): K aggregates, ids order-AAAAAA.BBBBB for aggregate i (AAAAAA
 * = i mod A, BBBBB = i div A, A = -A, the stream's aggregate count: the
 * stream's ids order-AAAAAA fall evenly among them in key order, as
 * bench/gen.py --prime has them), visited in a fixed pseudo-random order
 * (a golden-ratio stride; inserting in key order would pack pages as
 * live traffic does not); aggregate i gets D div K events (one more for
 * i < D mod K): versions 1.. of the gen.py shape (order.created, then
 * order.updated; ce_id evt-AAAAAA.BBBBB-VVVVV, ce_source /bench/orders,
 * a ~200-byte JSON value), all applied, so the store holds K idle
 * aggregates (L = its event count, state OPEN) and D live dedup keys. An
 * aggregate's partition is librdkafka's default partitioner's
 * (consistent_random: CRC-32 of the key mod partitions), as a producer of
 * its events would have chosen. Events go in batches of about -B (whole
 * aggregates); batch b of J is first seen at now - TTL + M + (b + 1) x
 * (TTL - M) / J, M = -m (default 1 h): the keys' first-seen times spread
 * evenly over the TTL window, as a steady state has them, the oldest M
 * from expiry, so that none expires during a run that starts within M.
 *
 * Options: -p P partitions (default: the input topic's; plan: 3),
 * -A A (100000), -B events per batch (10000), -C events per scratch
 * store (500000), -m M ms (3600000), -T TTL ms (peer, plan; seqgate: the
 * topic's dedup.ttl_ms), -N NOW ms since the epoch (default: the wall
 * clock), -s scratch directory (default /dev/shm, else /tmp), -X a
 * librdkafka producer property (repeatable, after the tool's own:
 * idempotent, acks=all, linger.ms 50, 1 MB batches).
 *
 * Prints one JSON line: what was written (records and key/value bytes by
 * kind, per partition), the plan's figures and how long it took.
 * Exit 0, 1 on a Kafka or engine error, 2 on bad usage.
 */
#include "benchutil.h"
#include "config.h"
#include "engine.h"
#include "envelope.h"
#include "store.h"

#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROPS 32
#define MAX_PARTS 256

static _Noreturn void die(int code, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static _Noreturn void die(int code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("scale_prime: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(code);
}

static double cpu_s(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t num(const char *opt, const char *s) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-')
                die(2, "%s: not a number: %s", opt, s);
        return (uint64_t)v;
}

/* ---- the plan ------------------------------------------------------------ */

typedef struct plan {
        uint64_t k;        /* aggregates */
        uint64_t d;        /* dedup keys = events */
        uint64_t a;        /* the stream's aggregates (ids) */
        int32_t parts;     /* partitions */
        uint64_t batch;    /* events per batch, about */
        uint64_t chunk;    /* events per scratch store, about */
        int64_t ttl_ms;    /* dedup TTL */
        int64_t margin_ms; /* the oldest first-seen this far from expiry */
        int64_t now_ms;    /* the newest first-seen */
        uint64_t step;     /* the stride of the visiting order */
        uint64_t batches;  /* J */
} plan_t;

static uint64_t gcd(uint64_t a, uint64_t b) {
        while (b) {
                uint64_t t = a % b;
                a = b;
                b = t;
        }
        return a;
}

/* Aggregate visited j-th: (j x step) mod K, step coprime with K (gen.py's
 * prime_records). */
static uint64_t plan_agg(const plan_t *pl, uint64_t j) {
        return (uint64_t)(((unsigned __int128)j * pl->step) % pl->k);
}

/* Events of aggregate i: D div K, one more for i < D mod K. */
static uint64_t plan_events(const plan_t *pl, uint64_t i) {
        return pl->d / pl->k + (i < pl->d % pl->k ? 1 : 0);
}

/* First-seen time of batch @p b (0-based) of the plan's J. */
static int64_t plan_time(const plan_t *pl, uint64_t b) {
        int64_t span = pl->ttl_ms - pl->margin_ms;
        return pl->now_ms - span +
               (int64_t)(((unsigned __int128)(b + 1) * (uint64_t)span) /
                         pl->batches);
}

/* The batches: whole aggregates, in visiting order, a batch closed once it
 * holds -B events or at the end of a chunk (-C events). Calls @p fn with
 * the batch's first and end visiting index; returns the batch count. */
typedef int(batch_fn)(void *opaque, const plan_t *pl, uint64_t b, uint64_t j0,
                      uint64_t j1, int chunk_end);
static uint64_t plan_walk(const plan_t *pl, batch_fn *fn, void *opaque) {
        uint64_t b = 0, in_batch = 0, in_chunk = 0, j0 = 0;
        for (uint64_t j = 0; j < pl->k; j++) {
                uint64_t e = plan_events(pl, plan_agg(pl, j));
                in_batch += e;
                in_chunk += e;
                int chunk_end = in_chunk >= pl->chunk || j + 1 == pl->k;
                if (in_batch >= pl->batch || chunk_end) {
                        if (fn && fn(opaque, pl, b, j0, j + 1, chunk_end))
                                die(1, "batch %" PRIu64 " failed", b);
                        b++;
                        j0 = j + 1;
                        in_batch = 0;
                        if (chunk_end)
                                in_chunk = 0;
                }
        }
        return b;
}

static void plan_init(plan_t *pl) {
        if (pl->k == 0)
                die(2, "-k: at least one aggregate");
        if (pl->d == 0)
                pl->d = pl->k;
        if (pl->d < pl->k)
                die(2,
                    "-d %" PRIu64 " < -k %" PRIu64
                    ": every aggregate has an event",
                    pl->d, pl->k);
        if (pl->a == 0 || pl->batch == 0 || pl->chunk == 0 || pl->parts < 1)
                die(2, "-A, -B, -C and -p must be at least 1");
        if (pl->k / pl->a >= 100000)
                die(2,
                    "-k %" PRIu64 ": ids order-AAAAAA.BBBBB hold at most "
                    "A x 100000 aggregates (-A %" PRIu64 ")",
                    pl->k, pl->a);
        if (pl->margin_ms < 0 || pl->margin_ms >= pl->ttl_ms)
                die(2, "-m %" PRId64 " must be below the TTL %" PRId64,
                    pl->margin_ms, pl->ttl_ms);
        uint64_t step = (uint64_t)((double)pl->k * 0.6180339887);
        if (step < 1)
                step = 1;
        while (pl->k > 1 && gcd(step, pl->k) != 1)
                step++;
        pl->step = step;
        pl->batches = 1;
        pl->batches = plan_walk(pl, NULL, NULL);
}

/* One priming event, with the buffers its record points into. */
typedef struct ev {
        char agg[40], id[48], seq[24], value[320];
        size_t agg_len, id_len, value_len;
        int32_t partition;
        sg_header_t hd[6];
        sg_record_t rec;
} ev_t;

#define SOURCE "/bench/orders"
#define PAD "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

/* Aggregate i's id (its record key) into @p out. */
static size_t agg_id(const plan_t *pl, uint64_t i, char *out, size_t size) {
        return (size_t)snprintf(out, size, "order-%06" PRIu64 ".%05" PRIu64,
                                i % pl->a, i / pl->a);
}

/* librdkafka's default partitioner for a keyed record (consistent_random:
 * CRC-32 of the key mod partitions): the partition a producer of the
 * aggregate's events chose. */
static int32_t agg_partition(const plan_t *pl, const char *key, size_t len) {
        return rd_kafka_msg_partitioner_consistent(NULL, key, len, pl->parts,
                                                   NULL, NULL);
}

/* Version @p v of aggregate @p i: gen.py's record shape (record_of,
 * value_of). @p new_id: a ce_id no priming event has (the probe). */
static void ev_make(ev_t *e, const plan_t *pl, uint64_t i, uint64_t v,
                    const char *topic, int64_t offset, int64_t ts, int new_id) {
        e->agg_len = agg_id(pl, i, e->agg, sizeof(e->agg));
        if (new_id)
                e->id_len = (size_t)snprintf(e->id, sizeof(e->id),
                                             "probe-%06" PRIu64 ".%05" PRIu64,
                                             i % pl->a, i / pl->a);
        else
                e->id_len = (size_t)snprintf(e->id, sizeof(e->id),
                                             "evt-%06" PRIu64 ".%05" PRIu64
                                             "-%05" PRIu64,
                                             i % pl->a, i / pl->a, v);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, v);
        const char *type = v == 1 ? "order.created" : "order.updated";
        e->value_len = (size_t)snprintf(
                e->value, sizeof(e->value),
                "{\"orderId\":\"%s\",\"version\":%" PRIu64
                ",\"customerId\":\"cust-%05" PRIu64
                "\",\"amountCents\":%" PRIu64
                ",\"currency\":\"EUR\",\"status\":\"%s\",\"note\":\"%s%s\"}",
                e->agg, v, (i * 7919) % 100000, (i * 31 + v * 17) % 100000,
                v == 1 ? "created" : "updated", PAD, new_id ? "-probe" : "");
        e->partition = agg_partition(pl, e->agg, e->agg_len);
        e->hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        e->hd[1] = (sg_header_t){"ce_id", e->id, e->id_len};
        e->hd[2] = (sg_header_t){"ce_source", SOURCE, sizeof(SOURCE) - 1};
        e->hd[3] = (sg_header_t){"ce_type", type, strlen(type)};
        e->hd[4] = (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
        e->hd[5] = (sg_header_t){"content-type", "application/json", 16};
        e->rec = (sg_record_t){.topic = topic,
                               .partition = e->partition,
                               .offset = offset,
                               .timestamp_ms = ts,
                               .key = e->agg,
                               .key_len = e->agg_len,
                               .value = e->value,
                               .value_len = e->value_len,
                               .headers = e->hd,
                               .header_cnt = 6};
}

/* ---- Kafka ----------------------------------------------------------------- */

typedef struct out {
        rd_kafka_t *rk;
        uint64_t delivered, failed;
        char first_error[256];
        /* what was produced, by kind (0..255: a key's first byte for
         * seqgate; the peer: 0 dedup, 1 agg) and partition */
        uint64_t recs[256], kbytes[256], vbytes[256];
        uint64_t part_recs[MAX_PARTS];
} out_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
        (void)rk;
        out_t *o = opaque;
        if (m->err) {
                if (!o->failed++)
                        snprintf(o->first_error, sizeof(o->first_error), "%s",
                                 rd_kafka_err2str(m->err));
        } else {
                o->delivered++;
        }
}

static rd_kafka_conf_t *conf_new(const char *bootstrap, char **props,
                                 size_t nprops) {
        static const char *const defs[][2] = {
                {"enable.idempotence", "true"},
                {"acks", "all"},
                {"linger.ms", "50"},
                {"batch.size", "1000000"},
                {"batch.num.messages", "100000"},
                {"queue.buffering.max.messages", "1000000"},
                {"queue.buffering.max.kbytes", "1048576"},
                {"compression.type", "none"},
        };
        char err[512];
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err,
                              sizeof(err)) != RD_KAFKA_CONF_OK)
                die(2, "%s", err);
        for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
                if (rd_kafka_conf_set(c, defs[i][0], defs[i][1], err,
                                      sizeof(err)) != RD_KAFKA_CONF_OK)
                        die(2, "%s", err);
        for (size_t i = 0; i < nprops; i++) {
                char *eq = strchr(props[i], '=');
                if (!eq)
                        die(2, "-X %s is not name=value", props[i]);
                *eq = '\0';
                if (rd_kafka_conf_set(c, props[i], eq + 1, err, sizeof(err)) !=
                    RD_KAFKA_CONF_OK)
                        die(2, "%s", err);
                *eq = '=';
        }
        return c;
}

static void out_open(out_t *o, const char *bootstrap, char **props,
                     size_t nprops) {
        char err[512];
        memset(o, 0, sizeof(*o));
        rd_kafka_conf_t *c = conf_new(bootstrap, props, nprops);
        rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
        rd_kafka_conf_set_opaque(c, o);
        if (!(o->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err))))
                die(1, "producer: %s", err);
}

/* Produces one record (a copy); waits while the queue is full. */
static void out_put(out_t *o, const char *topic, int32_t partition, int kind,
                    const void *key, size_t klen, const void *value,
                    size_t vlen) {
        for (;;) {
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        o->rk, RD_KAFKA_V_TOPIC(topic),
                        RD_KAFKA_V_PARTITION(partition),
                        RD_KAFKA_V_KEY((void *)key, klen),
                        RD_KAFKA_V_VALUE((void *)value, vlen),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                        break;
                if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                        die(1, "produce to %s: %s", topic, rd_kafka_err2str(e));
                rd_kafka_poll(o->rk, 10);
        }
        rd_kafka_poll(o->rk, 0);
        if (o->failed)
                die(1, "delivery failed: %s", o->first_error);
        kind &= 0xff;
        o->recs[kind]++;
        o->kbytes[kind] += klen;
        o->vbytes[kind] += value ? vlen : 0;
        if (partition >= 0 && partition < MAX_PARTS)
                o->part_recs[partition]++;
}

static void out_close(out_t *o) {
        while (rd_kafka_outq_len(o->rk) > 0 && !o->failed)
                rd_kafka_poll(o->rk, 100);
        rd_kafka_flush(o->rk, 60000);
        if (o->failed)
                die(1, "delivery failed: %s", o->first_error);
        rd_kafka_destroy(o->rk);
        o->rk = NULL;
}

/* The partition count of @p topic. */
static int32_t topic_partitions(rd_kafka_t *rk, const char *topic) {
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t, &md, 30000);
        rd_kafka_topic_destroy(t);
        if (e)
                die(1, "metadata of %s: %s", topic, rd_kafka_err2str(e));
        int32_t n = md->topic_cnt == 1 && !md->topics[0].err
                            ? md->topics[0].partition_cnt
                            : -1;
        rd_kafka_metadata_destroy(md);
        if (n < 1 || n > MAX_PARTS)
                die(1, "topic %s: no partitions (does it exist?)", topic);
        return n;
}

/* Creates compacted topic @p name with @p parts partitions unless it
 * exists with that many (a changelog: seqgate and Kafka Streams create
 * theirs the same way when missing). */
static void topic_create(rd_kafka_t *rk, const char *name, int32_t parts) {
        char err[512];
        rd_kafka_NewTopic_t *nt =
                rd_kafka_NewTopic_new(name, parts, -1, err, sizeof(err));
        if (!nt ||
            rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact"))
                die(1, "topic %s: %s", name, err);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
        const rd_kafka_CreateTopics_result_t *res =
                ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
                res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t e = !ev ? RD_KAFKA_RESP_ERR__TIMED_OUT
                                : n ? rd_kafka_topic_result_error(tr[0])
                                    : rd_kafka_event_error(ev);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                die(1, "creating %s: %s", name, rd_kafka_err2str(e));
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
        /* until its metadata has every partition */
        for (int i = 0; i < 300; i++) {
                rd_kafka_topic_t *t = rd_kafka_topic_new(rk, name, NULL);
                const struct rd_kafka_metadata *md;
                int32_t got = -1;
                if (!rd_kafka_metadata(rk, 0, t, &md, 10000)) {
                        if (md->topic_cnt == 1 && !md->topics[0].err)
                                got = md->topics[0].partition_cnt;
                        rd_kafka_metadata_destroy(md);
                }
                rd_kafka_topic_destroy(t);
                if (got == parts)
                        return;
                if (got > 0)
                        die(1, "topic %s has %d partitions, not %d", name, got,
                            parts);
                usleep(100000);
        }
        die(1, "topic %s did not appear", name);
}

/* The low watermarks of @p topic's partitions: where the stream starts. */
static void stream_starts(rd_kafka_t *rk, const char *topic, int32_t parts,
                          int64_t *lo) {
        for (int32_t p = 0; p < parts; p++) {
                int64_t l, h;
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
                        rk, topic, p, &l, &h, 30000);
                if (e)
                        die(1, "watermarks of %s [%d]: %s", topic, p,
                            rd_kafka_err2str(e));
                lo[p] = l;
        }
}

/* Commits consumer group @p group's offsets of @p topic at @p lo (nobody
 * is a member yet: a commit outside any generation, which the group
 * coordinator takes for an empty group). */
static void group_commit(const char *bootstrap, const char *group,
                         const char *topic, int32_t parts, const int64_t *lo) {
        char err[512];
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err,
                              sizeof(err)) ||
            rd_kafka_conf_set(c, "group.id", group, err, sizeof(err)) ||
            rd_kafka_conf_set(c, "enable.auto.commit", "false", err,
                              sizeof(err)))
                die(2, "%s", err);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
        if (!rk)
                die(1, "consumer: %s", err);
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(parts);
        for (int32_t p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(l, topic, p)->offset = lo[p];
        rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
        for (int i = 0; !e && i < l->cnt; i++)
                e = l->elems[i].err;
        if (e)
                die(1, "committing group %s's offsets: %s", group,
                    rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
}

/* ---- seqgate: the engine's own changelog --------------------------------- */

typedef struct sg_run {
        const plan_t *pl;
        const char *conf_text; /* the run's configuration */
        const char *topic;     /* the input topic */
        const char *scratch;   /* parent of the scratch stores */
        const int64_t *lo;     /* the stream's start per partition */
        out_t *out;
        /* the open chunk: a scratch store and an engine over it */
        char dir[512];
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        ev_t *evs;
        size_t evs_size;
        uint64_t events, outputs, dlq, other, stores;
        double t0;
} sg_run_t;

static void chunk_open(sg_run_t *r) {
        char err[512] = "";
        snprintf(r->dir, sizeof(r->dir), "%s/sg-prime-XXXXXX", r->scratch);
        if (!mkdtemp(r->dir))
                die(1, "mkdtemp %s: %s", r->dir, strerror(errno));
        /* a 1 GiB map: a chunk's store holds -C events' keys */
        if (sg_config_parse(r->conf_text, &r->conf, err, sizeof(err)) ||
            sg_store_open(r->dir, (uint64_t)1 << 30, (uint64_t)1 << 30,
                          &r->store, err, sizeof(err)) ||
            sg_engine_new(r->conf, r->store, &r->eng, err, sizeof(err)))
                die(1, "scratch engine: %s", err);
        sg_engine_processor(r->eng, &r->p);
        for (int32_t part = 0; part < r->pl->parts; part++) {
                int64_t off;
                if (r->p.assign(r->p.opaque, r->topic, part, r->conf->group_id,
                                &off, err, sizeof(err)))
                        die(1, "scratch engine: assign: %s", err);
        }
        r->stores++;
}

static void chunk_close(sg_run_t *r) {
        sg_engine_destroy(r->eng);
        sg_store_close(r->store);
        sg_config_destroy(r->conf);
        r->eng = NULL;
        r->store = NULL;
        r->conf = NULL;
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
        if (system(cmd) != 0)
                die(1, "cannot remove %s", r->dir);
}

/* One batch through the engine, as the Kafka loop runs it (processor.h):
 * its changelog effects are produced, its outputs counted (every event
 * must be applied: one output each, no DLQ record). */
static int sg_batch(void *opaque, const plan_t *pl, uint64_t b, uint64_t j0,
                    uint64_t j1, int chunk_end) {
        sg_run_t *r = opaque;
        char err[512] = "";
        if (!r->eng)
                chunk_open(r);
        int64_t t = plan_time(pl, b);
        size_t n = 0;
        for (uint64_t j = j0; j < j1; j++)
                n += plan_events(pl, plan_agg(pl, j));
        if (n > r->evs_size) {
                free(r->evs);
                if (!(r->evs = calloc(n, sizeof(*r->evs))))
                        die(1, "out of memory");
                r->evs_size = n;
        }
        size_t c = 0;
        for (uint64_t j = j0; j < j1; j++) {
                uint64_t i = plan_agg(pl, j), e = plan_events(pl, i);
                for (uint64_t v = 1; v <= e; v++, c++) {
                        ev_t *ev = &r->evs[c];
                        ev_make(ev, pl, i, v, r->topic, 0, t, 0);
                        /* the input offset just below the stream's start:
                         * the meta says the stream's first record is next */
                        ev->rec.offset = r->lo[ev->partition] - 1;
                }
        }
        sg_engine_set_clock(r->eng, t);
        if (r->p.batch_begin(r->p.opaque, t, err, sizeof(err)))
                goto fail;
        for (size_t k = 0; k < c; k++) {
                sg_process_result_t res;
                if (r->p.process(r->p.opaque, &r->evs[k].rec, &res, err,
                                 sizeof(err)))
                        goto fail;
                if (res != SG_PROCESSED)
                        die(1, "batch %" PRIu64 ": a priming event paused", b);
        }
        if (r->p.tick(r->p.opaque, err, sizeof(err)))
                goto fail;
        const sg_effect_t *ef;
        size_t ne = r->p.effects(r->p.opaque, &ef);
        for (size_t k = 0; k < ne; k++) {
                switch (ef[k].kind) {
                case SG_EFFECT_OUTPUT:
                        r->outputs++;
                        break;
                case SG_EFFECT_DLQ:
                        r->dlq++;
                        break;
                case SG_EFFECT_CHANGELOG:
                        out_put(r->out, ef[k].topic, ef[k].partition,
                                ef[k].key_len
                                        ? ((const unsigned char *)ef[k].key)[0]
                                        : 0,
                                ef[k].key, ef[k].key_len, ef[k].value,
                                ef[k].value_len);
                        break;
                default:
                        r->other++;
                }
        }
        if (r->p.batch_commit(r->p.opaque, err, sizeof(err)))
                goto fail;
        r->events += c;
        if (r->dlq || r->other)
                die(1,
                    "batch %" PRIu64 ": %" PRIu64 " DLQ records, %" PRIu64
                    " other effects: priming events must all apply",
                    b, r->dlq, r->other);
        if (chunk_end) {
                chunk_close(r);
                /* progress, for the long runs (100 M keys: 200 chunks) */
                if (r->stores % 20 == 0)
                        fprintf(stderr,
                                "scale_prime: %" PRIu64 " of %" PRIu64
                                " events, %.0f s\n",
                                r->events, pl->d, bench_now_s() - r->t0);
        }
        return 0;
fail:
        fprintf(stderr, "scale_prime: batch %" PRIu64 ": %s\n", b, err);
        return -1;
}

/* ---- the Kafka Streams peer: its changelog format ------------------------- */

typedef struct peer_run {
        const char *topic; /* the input topic */
        char dedup_cl[512], agg_cl[512];
        out_t *out;
        uint64_t events;
} peer_run_t;

static void be32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
}

static void be64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (unsigned char)v;
}

/* Codec.idempotencyKey: SHA-256(len|topic, len|ce_source, len|ce_id),
 * lengths 4 bytes big-endian. */
static void peer_dedup_key(const char *topic, const ev_t *e,
                           unsigned char out[32]) {
        unsigned char buf[1024];
        size_t tl = strlen(topic), sl = sizeof(SOURCE) - 1, n = 0;
        if (tl + sl + e->id_len + 12 > sizeof(buf))
                die(2, "topic name too long");
        be32(buf + n, (uint32_t)tl);
        memcpy(buf + n + 4, topic, tl);
        n += 4 + tl;
        be32(buf + n, (uint32_t)sl);
        memcpy(buf + n + 4, SOURCE, sl);
        n += 4 + sl;
        be32(buf + n, (uint32_t)e->id_len);
        memcpy(buf + n + 4, e->id, e->id_len);
        n += 4 + e->id_len;
        sg_sha256(buf, n, out);
}

static int peer_batch(void *opaque, const plan_t *pl, uint64_t b, uint64_t j0,
                      uint64_t j1, int chunk_end) {
        (void)chunk_end;
        peer_run_t *r = opaque;
        int64_t t = plan_time(pl, b);
        ev_t ev;
        for (uint64_t j = j0; j < j1; j++) {
                uint64_t i = plan_agg(pl, j), e = plan_events(pl, i);
                for (uint64_t v = 1; v <= e; v++) {
                        ev_make(&ev, pl, i, v, r->topic, 0, t, 0);
                        /* dedup: digest 32 | first_seen 8 | verdict 1 */
                        unsigned char k[32], val[41];
                        peer_dedup_key(r->topic, &ev, k);
                        sg_sha256(ev.value, ev.value_len, val);
                        be64(val + 32, (uint64_t)t);
                        val[40] = 1; /* VERDICT_APPLIED */
                        out_put(r->out, r->dedup_cl, ev.partition, 0, k,
                                sizeof(k), val, sizeof(val));
                        r->events++;
                }
                /* agg: flags 1 (a version applied) | L 8 | state 1 (OPEN) |
                 * parked 4 */
                char id[40];
                size_t idl = agg_id(pl, i, id, sizeof(id));
                unsigned char val[14];
                val[0] = 1;
                be64(val + 1, e);
                val[9] = 1;
                be32(val + 10, 0);
                out_put(r->out, r->agg_cl, agg_partition(pl, id, idl), 1, id,
                        idl, val, sizeof(val));
        }
        return 0;
}

/* ---- plan: the figures without a broker ---------------------------------- */

typedef struct plan_stats {
        const char *topic; /* for the peer's dedup keys */
        uint64_t dump;     /* events still to print (-v) */
        uint64_t aggs[MAX_PARTS], events[MAX_PARTS];
        uint64_t emin, emax, batches, chunk_ends;
        int64_t tmin, tmax;
        uint64_t prev_j1;
        int ordered; /* batches cover the visiting order exactly */
} plan_stats_t;

static int plan_batch(void *opaque, const plan_t *pl, uint64_t b, uint64_t j0,
                      uint64_t j1, int chunk_end) {
        plan_stats_t *s = opaque;
        int64_t t = plan_time(pl, b);
        if (s->batches == 0) {
                s->tmin = s->tmax = t;
                s->emin = UINT64_MAX;
        }
        if (t < s->tmin)
                s->tmin = t;
        if (t > s->tmax)
                s->tmax = t;
        if (j0 != s->prev_j1 || j1 <= j0)
                s->ordered = 0;
        s->prev_j1 = j1;
        for (uint64_t j = j0; j < j1; j++) {
                uint64_t i = plan_agg(pl, j), e = plan_events(pl, i);
                char id[40];
                size_t l = agg_id(pl, i, id, sizeof(id));
                int32_t p = agg_partition(pl, id, l);
                s->aggs[p]++;
                s->events[p] += e;
                for (uint64_t v = 1; v <= e && s->dump; v++, s->dump--) {
                        ev_t ev;
                        unsigned char k[32];
                        char hex[65];
                        ev_make(&ev, pl, i, v, s->topic, 0, t, 0);
                        peer_dedup_key(s->topic, &ev, k);
                        sg_hex_encode(k, sizeof(k), hex);
                        printf("{\"aggregate\":\"%s\",\"partition\":%d,"
                               "\"version\":%" PRIu64 ",\"ce_id\":\"%s\","
                               "\"ce_type\":\"%s\",\"first_seen_ms\":%" PRId64
                               ",\"batch\":%" PRIu64 ",\"peer_dedup_key\":"
                               "\"%s\",\"value\":%s}\n",
                               ev.agg, ev.partition, v, ev.id,
                               (const char *)ev.hd[3].value, t, b, hex,
                               ev.value);
                }
                if (e < s->emin)
                        s->emin = e;
                if (e > s->emax)
                        s->emax = e;
        }
        s->batches++;
        s->chunk_ends += chunk_end != 0;
        return 0;
}

static void print_parts(const char *name, const uint64_t *v, int32_t parts) {
        printf(",\"%s\":[", name);
        for (int32_t p = 0; p < parts; p++)
                printf("%s%" PRIu64, p ? "," : "", v[p]);
        printf("]");
}

/* ---- main ------------------------------------------------------------------ */

typedef struct opts {
        const char *bootstrap, *config, *topic, *app, *scratch;
        plan_t pl;
        uint64_t probes;
        int64_t ttl_ms;
        char *props[MAX_PROPS];
        size_t nprops;
} opts_t;

static void usage(void) {
        fputs("usage: scale_prime seqgate -b BOOTSTRAP -c CONFIG -t INPUT -k K "
              "[-d D] [options]\n"
              "       scale_prime peer -b BOOTSTRAP -a APPLICATION_ID -t INPUT "
              "-k K [-d D] [-T TTL_MS] [options]\n"
              "       scale_prime probe -b BOOTSTRAP -t INPUT -n N [options]\n"
              "       scale_prime plan -k K [-d D] [-n N] [-t INPUT] "
              "[options]\n"
              "options: -p PARTITIONS -A STREAM_AGGREGATES -B BATCH -C CHUNK "
              "-m MARGIN_MS -N NOW_MS -s SCRATCH_DIR -X k=v\n"
              "(see the comment at the top of bench/scale_prime.c)\n",
              stderr);
        exit(2);
}

static void parse(int argc, char **argv, opts_t *o) {
        int c;
        memset(o, 0, sizeof(*o));
        o->pl.a = 100000;
        o->pl.batch = 10000;
        o->pl.chunk = 500000;
        o->pl.margin_ms = 3600000;
        o->ttl_ms = 604800000;
        o->scratch = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        optind = 2;
        while ((c = getopt(argc, argv, "b:c:t:a:k:d:p:A:B:C:m:N:T:s:n:X:")) !=
               -1) {
                switch (c) {
                case 'b':
                        o->bootstrap = optarg;
                        break;
                case 'c':
                        o->config = optarg;
                        break;
                case 't':
                        o->topic = optarg;
                        break;
                case 'a':
                        o->app = optarg;
                        break;
                case 'k':
                        o->pl.k = num("-k", optarg);
                        break;
                case 'd':
                        o->pl.d = num("-d", optarg);
                        break;
                case 'p':
                        o->pl.parts = (int32_t)num("-p", optarg);
                        break;
                case 'A':
                        o->pl.a = num("-A", optarg);
                        break;
                case 'B':
                        o->pl.batch = num("-B", optarg);
                        break;
                case 'C':
                        o->pl.chunk = num("-C", optarg);
                        break;
                case 'm':
                        o->pl.margin_ms = (int64_t)num("-m", optarg);
                        break;
                case 'N':
                        o->pl.now_ms = (int64_t)num("-N", optarg);
                        break;
                case 'T':
                        o->ttl_ms = (int64_t)num("-T", optarg);
                        break;
                case 's':
                        o->scratch = optarg;
                        break;
                case 'n':
                        o->probes = num("-n", optarg);
                        break;
                case 'X':
                        if (o->nprops == MAX_PROPS)
                                die(2, "too many -X");
                        o->props[o->nprops++] = optarg;
                        break;
                default:
                        usage();
                }
        }
        if (optind != argc)
                usage();
        if (o->pl.parts > MAX_PARTS)
                die(2, "-p: at most %d partitions", MAX_PARTS);
        if (!o->pl.now_ms) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                o->pl.now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        }
}

static char *slurp(const char *path) {
        FILE *f = fopen(path, "rb");
        if (!f)
                die(2, "%s: %s", path, strerror(errno));
        size_t cap = 1 << 16, len = 0;
        char *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
                len += got;
                if (len + 1 == cap && !(buf = realloc(buf, cap *= 2)))
                        break;
        }
        fclose(f);
        if (!buf)
                die(1, "out of memory");
        buf[len] = '\0';
        return buf;
}

static void print_out(const out_t *o, const char *const names[256]) {
        uint64_t recs = 0, kb = 0, vb = 0;
        printf(",\"by_kind\":{");
        int first = 1;
        for (int k = 0; k < 256; k++) {
                if (!o->recs[k])
                        continue;
                char dflt[16];
                snprintf(dflt, sizeof(dflt), "db%d", k);
                printf("%s\"%s\":{\"records\":%" PRIu64
                       ",\"key_bytes\":%" PRIu64 ",\"value_bytes\":%" PRIu64
                       "}",
                       first ? "" : ",", names[k] ? names[k] : dflt, o->recs[k],
                       o->kbytes[k], o->vbytes[k]);
                first = 0;
                recs += o->recs[k];
                kb += o->kbytes[k];
                vb += o->vbytes[k];
        }
        printf("},\"records\":%" PRIu64 ",\"key_bytes\":%" PRIu64
               ",\"value_bytes\":%" PRIu64 ",\"delivered\":%" PRIu64,
               recs, kb, vb, o->delivered);
}

static void print_plan(const plan_t *pl) {
        printf(",\"aggregates\":%" PRIu64 ",\"dedup_keys\":%" PRIu64
               ",\"partitions\":%d,\"batches\":%" PRIu64
               ",\"first_seen_min_ms\":%" PRId64
               ",\"first_seen_max_ms\":%" PRId64 ",\"ttl_ms\":%" PRId64
               ",\"margin_ms\":%" PRId64,
               pl->k, pl->d, pl->parts, pl->batches, plan_time(pl, 0),
               plan_time(pl, pl->batches - 1), pl->ttl_ms, pl->margin_ms);
}

static int cmd_plan(opts_t *o) {
        if (!o->pl.parts)
                o->pl.parts = 3;
        o->pl.ttl_ms = o->ttl_ms;
        plan_init(&o->pl);
        plan_stats_t s = {.ordered = 1,
                          .topic = o->topic ? o->topic : "in",
                          .dump = o->probes};
        plan_walk(&o->pl, plan_batch, &s);
        printf("{\"kind\":\"plan\"");
        print_plan(&o->pl);
        printf(",\"walked_batches\":%" PRIu64 ",\"chunks\":%" PRIu64
               ",\"step\":%" PRIu64 ",\"events_per_aggregate\":[%" PRIu64
               ",%" PRIu64 "],\"ordered\":%s",
               s.batches, s.chunk_ends, o->pl.step, s.emin, s.emax,
               s.ordered && s.prev_j1 == o->pl.k ? "true" : "false");
        print_parts("part_aggregates", s.aggs, o->pl.parts);
        print_parts("part_events", s.events, o->pl.parts);
        printf(",\"walked_first_seen\":[%" PRId64 ",%" PRId64 "]}\n", s.tmin,
               s.tmax);
        return 0;
}

static void need(const char *what, const char *v) {
        if (!v)
                die(2, "%s missing (see usage)", what);
}

static int cmd_seqgate(opts_t *o) {
        need("-b BOOTSTRAP", o->bootstrap);
        need("-c CONFIG", o->config);
        need("-t INPUT", o->topic);
        double t0 = bench_now_s(), c0 = cpu_s();
        char err[512] = "";
        char *text = slurp(o->config);
        sg_config_t *conf;
        if (sg_config_parse(text, &conf, err, sizeof(err)))
                die(2, "%s: %s", o->config, err);
        const sg_topic_config_t *tc = sg_config_topic(conf, o->topic);
        if (!tc || !tc->changelog_topic)
                die(2, "%s: topic %s is not configured (with a changelog)",
                    o->config, o->topic);
        if (!conf->group_id)
                die(2, "%s: no kafka.group.id", o->config);
        out_t out;
        out_open(&out, o->bootstrap, o->props, o->nprops);
        int32_t parts = topic_partitions(out.rk, o->topic);
        if (o->pl.parts && o->pl.parts != parts)
                die(2, "-p %d: topic %s has %d partitions", o->pl.parts,
                    o->topic, parts);
        o->pl.parts = parts;
        o->pl.ttl_ms = tc->dedup_ttl_ms;
        plan_init(&o->pl);
        int64_t lo[MAX_PARTS];
        stream_starts(out.rk, o->topic, parts, lo);
        topic_create(out.rk, tc->changelog_topic, parts);

        sg_run_t r = {.pl = &o->pl,
                      .conf_text = text,
                      .topic = o->topic,
                      .scratch = o->scratch,
                      .lo = lo,
                      .out = &out,
                      .t0 = t0};
        plan_walk(&o->pl, sg_batch, &r);
        if (r.eng)
                chunk_close(&r);
        double gen_s = bench_now_s() - t0;
        out_close(&out);
        group_commit(o->bootstrap, conf->group_id, o->topic, parts, lo);
        if (r.outputs != r.events || r.events != o->pl.d)
                die(1,
                    "%" PRIu64 " outputs for %" PRIu64 " events (%" PRIu64
                    " planned)",
                    r.outputs, r.events, o->pl.d);
        static const char *names[256] = {[SG_DB_DEDUP] = "dedup",
                                         [SG_DB_AGG] = "agg",
                                         [SG_DB_PARKED] = "parked",
                                         [SG_DB_META] = "meta",
                                         [SG_DB_SNAPREQ] = "snapreq"};
        printf("{\"kind\":\"seqgate\",\"changelog\":\"%s\",\"group\":\"%s\"",
               tc->changelog_topic, conf->group_id);
        print_plan(&o->pl);
        print_out(&out, names);
        print_parts("part_records", out.part_recs, parts);
        printf(",\"stream_start\":[");
        for (int32_t p = 0; p < parts; p++)
                printf("%s%" PRId64, p ? "," : "", lo[p]);
        printf("],\"events\":%" PRIu64 ",\"scratch_stores\":%" PRIu64
               ",\"engine_and_produce_s\":%.2f,\"wall_s\":%.2f,\"cpu_s\":%.2f}"
               "\n",
               r.events, r.stores, gen_s, bench_now_s() - t0, cpu_s() - c0);
        free(r.evs);
        sg_config_destroy(conf);
        free(text);
        return 0;
}

static int cmd_peer(opts_t *o) {
        need("-b BOOTSTRAP", o->bootstrap);
        need("-a APPLICATION_ID", o->app);
        need("-t INPUT", o->topic);
        double t0 = bench_now_s(), c0 = cpu_s();
        out_t out;
        out_open(&out, o->bootstrap, o->props, o->nprops);
        int32_t parts = topic_partitions(out.rk, o->topic);
        if (o->pl.parts && o->pl.parts != parts)
                die(2, "-p %d: topic %s has %d partitions", o->pl.parts,
                    o->topic, parts);
        o->pl.parts = parts;
        o->pl.ttl_ms = o->ttl_ms;
        plan_init(&o->pl);
        int64_t lo[MAX_PARTS];
        stream_starts(out.rk, o->topic, parts, lo);
        peer_run_t r = {.topic = o->topic, .out = &out};
        snprintf(r.dedup_cl, sizeof(r.dedup_cl), "%s-dedup-changelog", o->app);
        snprintf(r.agg_cl, sizeof(r.agg_cl), "%s-agg-changelog", o->app);
        char parked_cl[512];
        snprintf(parked_cl, sizeof(parked_cl), "%s-parked-changelog", o->app);
        topic_create(out.rk, r.dedup_cl, parts);
        topic_create(out.rk, r.agg_cl, parts);
        topic_create(out.rk, parked_cl, parts);
        plan_walk(&o->pl, peer_batch, &r);
        double gen_s = bench_now_s() - t0;
        out_close(&out);
        group_commit(o->bootstrap, o->app, o->topic, parts, lo);
        static const char *names[256] = {[0] = "dedup", [1] = "agg"};
        printf("{\"kind\":\"peer\",\"application_id\":\"%s\"", o->app);
        print_plan(&o->pl);
        print_out(&out, names);
        print_parts("part_records", out.part_recs, parts);
        printf(",\"events\":%" PRIu64 ",\"produce_s\":%.2f,\"wall_s\":%.2f,"
               "\"cpu_s\":%.2f}\n",
               r.events, gen_s, bench_now_s() - t0, cpu_s() - c0);
        return 0;
}

static int cmd_probe(opts_t *o) {
        need("-b BOOTSTRAP", o->bootstrap);
        need("-t INPUT", o->topic);
        if (!o->probes)
                die(2, "-n: at least one probe");
        out_t out;
        out_open(&out, o->bootstrap, o->props, o->nprops);
        o->pl.parts = topic_partitions(out.rk, o->topic);
        ev_t ev;
        for (uint64_t i = 0; i < o->probes; i++) {
                for (int new_id = 0; new_id < 2; new_id++) {
                        ev_make(&ev, &o->pl, i, 1, o->topic, 0, 0, new_id);
                        rd_kafka_headers_t *h = rd_kafka_headers_new(6);
                        for (size_t k = 0; k < 6; k++)
                                rd_kafka_header_add(
                                        h, ev.hd[k].name, -1, ev.hd[k].value,
                                        (ssize_t)ev.hd[k].value_len);
                        /* the default partitioner, as gen.py's producer */
                        rd_kafka_resp_err_t e;
                        while ((e = rd_kafka_producev(
                                        out.rk, RD_KAFKA_V_TOPIC(o->topic),
                                        RD_KAFKA_V_KEY(ev.agg, ev.agg_len),
                                        RD_KAFKA_V_VALUE(ev.value,
                                                         ev.value_len),
                                        RD_KAFKA_V_HEADERS(h),
                                        RD_KAFKA_V_MSGFLAGS(
                                                RD_KAFKA_MSG_F_COPY),
                                        RD_KAFKA_V_END)) ==
                               RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                rd_kafka_poll(out.rk, 10);
                        if (e)
                                die(1, "produce: %s", rd_kafka_err2str(e));
                        out.recs[new_id]++;
                }
        }
        out_close(&out);
        printf("{\"kind\":\"probe\",\"probes\":%" PRIu64 ",\"records\":%" PRIu64
               ",\"duplicates\":%" PRIu64 ",\"dlq\":%" PRIu64
               ",\"dlq_reason\":\"stale_version\"}\n",
               o->probes, 2 * o->probes, o->probes, o->probes);
        return 0;
}

int main(int argc, char **argv) {
        if (argc < 2)
                usage();
        opts_t o;
        parse(argc, argv, &o);
        if (!strcmp(argv[1], "seqgate"))
                return cmd_seqgate(&o);
        if (!strcmp(argv[1], "peer"))
                return cmd_peer(&o);
        if (!strcmp(argv[1], "probe"))
                return cmd_probe(&o);
        if (!strcmp(argv[1], "plan"))
                return cmd_plan(&o);
        usage();
}
