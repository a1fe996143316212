/*
 * fuzz_changelog.c — libFuzzer target for the changelog restore path and
 * the store's value decoders: a changelog topic is input from the network.
 *
 * Input: a sequence of changelog records (framing in changelog_input.h;
 * seeds in tests/fuzz/corpus/changelog, written by gen_changelog_corpus.c).
 * Per input:
 *   1. every record's value goes to every store value decoder
 *      (sg_dedup/agg/parked/meta/snapreq_decode) and to sg_headers_parse;
 *   2. a new engine (with the real clock, so a restored meta record's
 *      clock moves it as in production) is assigned the partition, and the
 *      records are restored as the exactly_once Kafka loop restores it
 *      (restore_begin → restore_apply … → restore_end), into a store on a
 *      temporary directory: a full restore of an empty partition;
 *   3. what was restored must be usable: every stored value decodes, and
 *      batches (records of the aggregates the seeds use, then a tick far
 *      enough ahead to fire every gap deadline, snapshot timeout and TTL)
 *      commit;
 *   4. the partition is dropped, so every input starts from nothing.
 * Invariants checked (a violation aborts, so libFuzzer reports it): a
 * refused record gives a non-empty reason naming the changelog offset and
 * leaves no transaction open; a restored store never fails a batch. The
 * sanitizers check the rest (no crash, leak, overflow; an allocation from a
 * decoded count would exceed -rss_limit_mb / -malloc_limit_mb).
 *
 * Build (as tests/fuzz/run.sh does; $LIB = every .c file of lib/):
 *   clang -g -fsanitize=fuzzer,address,undefined -Ilib $LIB \
 *     tests/fuzz/fuzz_changelog.c $(pkg-config --cflags --libs rdkafka \
 *     lmdb libcjson libcrypto libcurl) -lpthread -o fuzz_changelog
 *   ./fuzz_changelog -rss_limit_mb=512 tests/fuzz/corpus/changelog
 * The store lives under $TMPDIR (default /dev/shm when writable, else
 * /tmp), its files unlinked once open.
 */
#include "config.h"
#include "engine.h"
#include "store.h"

#include "changelog_input.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T0 1700000000000LL

static const char *conf_json =
        "{\"data_dir\":\"/tmp/x\",\"guarantee\":\"exactly_once\","
        "\"kafka\":{\"bootstrap.servers\":\"x:1\",\"group.id\":\"g\"},"
        "\"topics\":{\"orders\":{\"output_topic\":\"out\",\"dlq_topic\":"
        "\"dlq\","
        "\"dedup\":{\"ttl_ms\":10000},"
        "\"ordering\":{\"gap_timeout_ms\":1000},"
        "\"snapshot\":{\"source\":\"kafka\",\"request_topic\":\"snap.req\","
        "\"reply_topic\":\"snap.rep\",\"timeout_ms\":2000,\"max_attempts\":2,"
        "\"backoff_ms\":100,\"backoff_max_ms\":100}}}}";

static struct {
        char dir[256];
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng; /* one per input */
        sg_processor_t proc;
        int64_t input; /* next input offset */
} F;

#define CHECK(cond, ...)                                                       \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "fuzz_changelog: " __VA_ARGS__);       \
                        fputc('\n', stderr);                                   \
                        abort();                                               \
                }                                                              \
        } while (0)

/* The store's files are unlinked as soon as it is open (LMDB keeps using
 * them through its descriptors and map), so nothing is left behind however
 * the process ends: exit, crash or a libFuzzer timeout. */
static void unlink_store(void) {
        char p[300];
        const char *files[] = {"data.mdb", "lock.mdb", "seqgate.lock"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", F.dir, files[i]);
                unlink(p);
        }
        rmdir(F.dir);
}

static void init(void) {
        char err[512];
        const char *tmp = getenv("TMPDIR");
        struct stat st;
        if (!tmp)
                tmp = stat("/dev/shm", &st) == 0 &&
                                      access("/dev/shm", W_OK) == 0
                              ? "/dev/shm"
                              : "/tmp";
        snprintf(F.dir, sizeof(F.dir), "%s/sg_fuzz_changelog_XXXXXX", tmp);
        CHECK(mkdtemp(F.dir), "mkdtemp %s", F.dir);
        CHECK(sg_config_parse(conf_json, &F.conf, err, sizeof(err)) == SG_OK,
              "config: %s", err);
        CHECK(sg_store_open(F.dir, 1 << 24, 1 << 24, &F.store, err,
                            sizeof(err)) == SG_OK,
              "store: %s", err);
        unlink_store();
}

/* 2a. a new engine, the partition assigned (its meta created) */
static void engine_up(void) {
        char err[512] = "";
        CHECK(sg_engine_new(F.conf, F.store, &F.eng, err, sizeof(err)) == SG_OK,
              "engine: %s", err);
        sg_engine_processor(F.eng, &F.proc);
        int64_t off;
        CHECK(F.proc.assign(F.proc.opaque, "orders", 0, "g", &off, err,
                            sizeof(err)) == SG_OK,
              "assign: %s", err);
}

/* 4. the engine goes, the partition's state with it */
static void engine_down(void) {
        char err[512] = "";
        sg_engine_destroy(F.eng);
        F.eng = NULL;
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t;
        CHECK(sg_txn_begin(F.store, true, &t, err, sizeof(err)) == SG_OK,
              "begin: %s", err);
        CHECK(sg_store_partition_drop(t, &tp, err, sizeof(err)) == SG_OK,
              "drop: %s", err);
        CHECK(sg_txn_commit(t, err, sizeof(err)) == SG_OK, "commit: %s", err);
}

/* 1. every decoder on the bytes */
static void decode_all(const cl_in_t *r) {
        char why[256];
        sg_dedup_rec_t d;
        sg_agg_rec_t a;
        sg_parked_rec_t p;
        sg_meta_rec_t m;
        sg_snapreq_rec_t s;
        const void *v = r->value;
        size_t n = r->value_len;
        why[0] = '\0';
        CHECK(sg_dedup_decode(v, n, &d, why, sizeof(why)) == SG_OK || why[0],
              "dedup decoder refused without a reason");
        why[0] = '\0';
        CHECK(sg_agg_decode(v, n, &a, why, sizeof(why)) == SG_OK || why[0],
              "aggregate decoder refused without a reason");
        why[0] = '\0';
        CHECK(sg_meta_decode(v, n, &m, why, sizeof(why)) == SG_OK || why[0],
              "meta decoder refused without a reason");
        why[0] = '\0';
        CHECK(sg_snapreq_decode(v, n, &s, why, sizeof(why)) == SG_OK || why[0],
              "snapshot request decoder refused without a reason");
        why[0] = '\0';
        if (sg_parked_decode(v, n, &p, why, sizeof(why)) == SG_OK) {
                /* a decoded parked event's fields lie inside the value, and
                 * its header count is what the block really holds */
                const uint8_t *lo = r->value, *hi = lo + n;
                const void *ptrs[4] = {p.type, p.key, p.value, p.headers};
                size_t lens[4] = {p.type_len, p.key_len, p.value_len,
                                  p.headers_len};
                for (int i = 0; i < 4; i++)
                        CHECK(!ptrs[i] ||
                                      ((const uint8_t *)ptrs[i] >= lo &&
                                       lens[i] <=
                                               (size_t)(hi - (const uint8_t *)
                                                                     ptrs[i])),
                              "parked field %d outside the value", i);
                if (p.headers) {
                        CHECK(p.header_cnt <= p.headers_len / 9 + 1,
                              "header count %zu for %zu bytes", p.header_cnt,
                              p.headers_len);
                        sg_header_t *h = malloc(
                                (p.header_cnt ? p.header_cnt : 1) * sizeof(*h));
                        CHECK(h, "out of memory");
                        ssize_t got = sg_headers_parse(p.headers, p.headers_len,
                                                       h, p.header_cnt);
                        CHECK(got == (ssize_t)p.header_cnt,
                              "decoded %zu headers, parsed %zd", p.header_cnt,
                              got);
                        free(h);
                }
        } else {
                CHECK(why[0], "parked decoder refused without a reason");
        }
        sg_header_t h[16];
        (void)sg_headers_parse(v, n, h, 16);
}

/* 3a. every value restored decodes */
static int stored_visit(void *opaque, int db, const void *key, size_t key_len,
                        const void *value, size_t value_len) {
        (void)opaque;
        (void)key;
        (void)key_len;
        char why[256] = "";
        sg_err_t e = SG_OK;
        union {
                sg_dedup_rec_t d;
                sg_agg_rec_t a;
                sg_parked_rec_t p;
                sg_meta_rec_t m;
                sg_snapreq_rec_t s;
        } u;
        switch (db) {
        case SG_DB_DEDUP:
                e = sg_dedup_decode(value, value_len, &u.d, why, sizeof(why));
                break;
        case SG_DB_AGG:
                e = sg_agg_decode(value, value_len, &u.a, why, sizeof(why));
                break;
        case SG_DB_PARKED:
                e = sg_parked_decode(value, value_len, &u.p, why, sizeof(why));
                break;
        case SG_DB_META:
                e = sg_meta_decode(value, value_len, &u.m, why, sizeof(why));
                break;
        case SG_DB_SNAPREQ:
                e = sg_snapreq_decode(value, value_len, &u.s, why, sizeof(why));
                break;
        default:
                break; /* indexes: empty values */
        }
        CHECK(e == SG_OK,
              "restored a value of database %d that does not "
              "decode: %s",
              db, why);
        return 0;
}

/* 3b. a batch over the restored state */
static void batch_over(int64_t now) {
        char err[512] = "";
        sg_engine_set_clock(F.eng, now); /* 0: the real clock */
        CHECK(F.proc.batch_begin(F.proc.opaque, now, err, sizeof(err)) == SG_OK,
              "batch_begin: %s", err);
        static const char *const aggs[] = {"A", "B", "C"};
        static const char *const seqs[] = {"2", "1", "5"};
        sg_err_t e = SG_OK;
        for (size_t i = 0; i < 3 && !e; i++) {
                char id[32];
                snprintf(id, sizeof(id), "fz%" PRId64, F.input);
                sg_header_t hd[] = {{"ce_specversion", "1.0", 3},
                                    {"ce_id", id, strlen(id)},
                                    {"ce_source", "/shop", 5},
                                    {"ce_type", "t", 1},
                                    {"ce_sequence", seqs[i], 1}};
                sg_record_t rec = {.topic = "orders",
                                   .partition = 0,
                                   .offset = F.input++,
                                   .timestamp_ms = 1,
                                   .key = aggs[i],
                                   .key_len = 1,
                                   .value = id,
                                   .value_len = strlen(id),
                                   .headers = hd,
                                   .header_cnt = 5};
                sg_process_result_t res;
                err[0] = '\0';
                e = F.proc.process(F.proc.opaque, &rec, &res, err, sizeof(err));
        }
        if (!e) {
                err[0] = '\0';
                e = F.proc.tick(F.proc.opaque, err, sizeof(err));
        }
        if (!e) {
                err[0] = '\0';
                e = F.proc.batch_commit(F.proc.opaque, err, sizeof(err));
        }
        if (!e) { /* committed in the store, as the next pass reads it */
                err[0] = '\0';
                e = sg_engine_checkpoint(F.eng, err, sizeof(err));
        } else {
                F.proc.batch_abort(F.proc.opaque);
        }
        CHECK(e == SG_OK, "a batch over a restored store failed: %s (%s)",
              sg_err2str(e), err);
        CHECK(sg_store_txns_open(F.store, false) == 0, "batch left a txn open");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!F.store)
                init();
        cl_in_t r;
        const uint8_t *d = data;
        size_t left = size, cnt = 0;
        while (cl_in_next(&d, &left, &r)) {
                decode_all(&r);
                cnt++;
        }

        /* 2. a full restore into an empty partition */
        engine_up();
        char err[512] = "";
        int64_t start = 0, end = (int64_t)cnt, from = -1;
        CHECK(F.proc.restore_begin(F.proc.opaque, "orders", 0, start, end,
                                   &from, err, sizeof(err)) == SG_OK,
              "restore_begin: %s", err);
        CHECK(from == start, "restore from %" PRId64 ", not %" PRId64, from,
              start);
        sg_err_t e = SG_OK;
        int64_t o = start;
        d = data;
        left = size;
        while (!e && cl_in_next(&d, &left, &r)) {
                err[0] = '\0';
                e = F.proc.restore_apply(
                        F.proc.opaque, "orders", 0, o, r.key, r.key_len,
                        r.tombstone ? NULL : r.value,
                        r.tombstone ? 0 : r.value_len, err, sizeof(err));
                o++;
        }
        if (e) {
                char want[96];
                snprintf(want, sizeof(want),
                         "g-orders-changelog [0] offset %" PRId64, o - 1);
                CHECK(e != SG_ERR_MAP_FULL, "map full: %s", err);
                CHECK(strstr(err, want), "refused without naming %s: %s", want,
                      err);
                CHECK(sg_store_txns_open(F.store, false) == 0,
                      "a refused record left a transaction open");
                engine_down();
                return 0;
        }
        e = F.proc.restore_end(F.proc.opaque, "orders", 0, end, err,
                               sizeof(err));
        if (e == SG_ERR_CONFIG) {
                /* a meta record carrying another writer's key fingerprint:
                 * the store was written with other envelope settings, and
                 * restore_end refuses it (semantics §3, "Key fingerprint") — the
                 * one refusal a changelog whose records all applied may
                 * still meet; it must say so and leave nothing open */
                CHECK(strstr(err, "other settings"),
                      "restore_end refused for another reason: %s", err);
                CHECK(sg_store_txns_open(F.store, false) == 0,
                      "a refused restore left a transaction open");
                engine_down();
                return 0;
        }
        CHECK(e == SG_OK, "restore_end: %s", err);
        CHECK(sg_store_txns_open(F.store, false) == 0,
              "restore left a transaction open");

        /* 3. the restored state is usable */
        sg_txn_t *t;
        CHECK(sg_txn_begin(F.store, false, &t, err, sizeof(err)) == SG_OK,
              "begin: %s", err);
        CHECK(sg_store_foreach(t, stored_visit, NULL, err, sizeof(err)) ==
                      SG_OK,
              "foreach: %s", err);
        sg_txn_abort(t);
        batch_over(0);
        batch_over(T0 + 10LL * 365 * 24 * 3600 * 1000);
        engine_down();
        return 0;
}
