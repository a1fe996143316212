/*
 * testutil.h — what the unit suites share: assertions that report the
 * caller's file:line and both values (libuv's test/task.h idea, on top of
 * Check), and the helpers the suites used to copy: running a suite,
 * temporary directories, sleeping, keeping a changelog effect, a store in
 * a fresh directory per test, and the engine harness.
 *
 * A helper that asserts is a macro over a *_at(file, line, ...) function,
 * so a failure inside it names the test's line, not the helper's. All of
 * it runs in the test's own process (Check forks one per test) and is not
 * thread-safe unless said.
 */
#ifndef SG_TESTUTIL_H
#define SG_TESTUTIL_H

#include "processor.h"
#include "seqgate.h"

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Check's own ck_assert_* macros are the suites' assertions
 * (CONTRIBUTING.md "Style"). ASSERT_OK prints what Check cannot: the
 * errstr of an sg_err_t call. */

/* Fails unless the sg_err_t expression err is SG_OK, printing its name and
 * the errstr buffer the call filled. */
#define ASSERT_OK(err, errstr)                                                 \
        do {                                                                   \
                sg_err_t tu_e_ = (err);                                        \
                ck_assert_msg(tu_e_ == SG_OK, "%s: %s: %s", #err,              \
                              sg_err2str(tu_e_), (errstr));                    \
        } while (0)

/* Runs the suite (CK_NORMAL output) and frees it. Returns the process exit
 * status: EXIT_SUCCESS when every test passed, else EXIT_FAILURE. */
int tu_run_suite(Suite *s);

/* Creates a fresh directory /tmp/sg_test_<name>_XXXXXX (mkdtemp) and
 * writes its path into buf (size bytes); fails the test if it cannot. */
#define tu_tmpdir(buf, size, name)                                             \
        tu_tmpdir_at(__FILE__, __LINE__, buf, size, name)
void tu_tmpdir_at(const char *file, int line, char *buf, size_t size,
                  const char *name);

/* Removes the directory dir and everything below it (rm -rf); fails the
 * test if it cannot. */
#define tu_rmrf(dir) tu_rmrf_at(__FILE__, __LINE__, dir)
void tu_rmrf_at(const char *file, int line, const char *dir);

/* Sleeps ms milliseconds (again after a signal). */
void tu_sleep_ms(long ms);

/* A changelog record as the exactly_once loop would produce it (the value
 * NULL: a tombstone). */
typedef struct tu_clrec {
        unsigned char key[64];
        size_t key_len;
        unsigned char value[2048];
        size_t value_len;
        bool tombstone;
        int32_t partition;
} tu_clrec_t;

/* Copies the changelog effect ef's key and value into c (the partition is
 * left to the caller); fails the test if either does not fit. */
#define tu_clrec_set(c, ef) tu_clrec_set_at(__FILE__, __LINE__, c, ef)
void tu_clrec_set_at(const char *file, int line, tu_clrec_t *c,
                     const sg_effect_t *ef);

/* ---- the store fixture (test_store_seg.c, test_store_format.c) ---------
 *
 * Each test of a TCase gets a fresh temporary directory, tu_store_dir,
 * made before the test and removed after it (a Check checked fixture: both
 * run in the test's own process), and opens its stores there. A suite opts
 * in: #define TU_STORE_FIXTURE before it includes testutil.h.
 */
#ifdef TU_STORE_FIXTURE
#include "store.h"

/* The running test's directory, /tmp/sg_test_<name>_XXXXXX. */
extern char tu_store_dir[64];

/* Adds the fixture to @p tc: before each test a new tu_store_dir (tu_tmpdir
 * with @p name, a string kept, not copied), after it the directory removed
 * (tu_rmrf). The process has one name: the last call's. */
void tu_store_fixture(TCase *tc, const char *name);

/* Opens the store in tu_store_dir (sg_store_open with @p map_size and
 * @p map_growth bytes); fails the test unless SG_OK. */
#define tu_store_open(map_size, map_growth)                                    \
        tu_store_open_at(__FILE__, __LINE__, map_size, map_growth)
sg_store_t *tu_store_open_at(const char *file, int line, uint64_t map_size,
                             uint64_t map_growth);

/* Begins a write transaction on @p s; fails the test unless SG_OK. */
#define tu_wtxn(s) tu_wtxn_at(__FILE__, __LINE__, s)
sg_txn_t *tu_wtxn_at(const char *file, int line, sg_store_t *s);
#endif /* TU_STORE_FIXTURE */

/* ---- the engine harness (test_engine.c and the suites that build a store
 * by driving the engine, e.g. test_query.c) ------------------------------
 *
 * One engine on a fresh store of topic "orders" (output "out", DLQ "dlq"),
 * driven through the processor interface exactly as the Kafka loop drives
 * it, with no broker; the effects each batch produced are kept in h->out.
 * Short names, so a suite opts in: #define TU_ENGINE_HARNESS before it
 * includes testutil.h.
 */
#ifdef TU_ENGINE_HARNESS
#include "config.h"
#include "engine.h"
#include "store.h"

#define T0 1700000000000LL /* engine clock at the start of every test */

typedef struct out {
        sg_effect_kind_t kind;
        char topic[64];
        int32_t partition;
        char key[64];
        char value[1024];
        char request_id[256]; /* HTTP_GET effects */
        char url[512];
        char reason[64];
        char detail[256];
        char extra_name[64]; /* first non-provenance extra header (output) */
        char extra_val[64];
        char version[32];   /* ce_sequence of the record */
        char aggregate[64]; /* DLQ: __seqgate.errors.aggregate, "" none */
        char actual[32];    /* DLQ: __seqgate.errors.actual_version */
        char expected[32];  /* DLQ: __seqgate.errors.expected_version */
        char dead_lettered_at[40];
        int64_t timestamp_ms;
} out_t;

typedef struct h {
        char dir[64];
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t proc;
        out_t out[256];
        size_t out_cnt;
        int64_t offset;
        int64_t now;
        sg_process_result_t last_result;
        const char *root; /* extra root keys, e.g. the guarantee */
        bool lag_set;     /* report h->lag for partition 0 in every batch */
        int64_t lag;
        bool batch_held; /* batch() leaves its batches in the engine's open
                             checkpoint (else it checkpoints after each, so
                             that the cases read the store as committed) */
} h_t;

/* A macro, not a variable: a printf format the compiler can check. */
#define BASE_CONF                                                              \
        "{\"data_dir\":\"/tmp/x\",%s\"kafka\":{\"bootstrap.servers\":"         \
        "\"x:1\",\"group.id\":\"g\"},\"topics\":{\"orders\":{"                 \
        "\"output_topic\":\"out\",\"dlq_topic\":\"dlq\",%s}}}"

/* The order state machine of the seed (semantics summary). */
extern const char *const sm_json;

/* Opens config, store and engine (h->dir: a new temporary directory unless
 * set; h->root: extra root keys; h->now: the clock, T0 unless set) with
 * @p topic_json as the keys of topic "orders", and assigns partition 0. */
#define h_open(h, topic_json) h_open_at(__FILE__, __LINE__, h, topic_json)
void h_open_at(const char *file, int line, h_t *h, const char *topic_json);
/* Closes engine, store and config (the directory stays), checkpointing
 * first (a clean close). */
#define h_close(h) h_close_at(__FILE__, __LINE__, h)
void h_close_at(const char *file, int line, h_t *h);
/* A checkpoint (sg_engine_checkpoint), unless h->batch_held. */
#define h_checkpoint(h) h_checkpoint_at(__FILE__, __LINE__, h)
void h_checkpoint_at(const char *file, int line, h_t *h);
/* h_close, then removes the directory. */
#define h_free(h) h_free_at(__FILE__, __LINE__, h)
void h_free_at(const char *file, int line, h_t *h);
/* Sets the engine's clock to @p now. */
void h_clock(h_t *h, int64_t now);

/* A CloudEvents binary-mode record. */
typedef struct ev {
        const char *agg;
        const char *id;
        const char *type;
        const char *seq;
        const char *value;
        bool replay;
        int64_t ts;        /* record timestamp; 0: 1000 */
        const char *epoch; /* ce_epoch header (semantics §4b), or none */
        int32_t partition; /* of "orders"; assigned by the caller unless 0 */
} ev_t;

/* Appends the effects of the batch in progress to h->out (changelog
 * records left out). */
void collect(h_t *h);
/* Runs one batch with @p evs (on their partitions: 0 unless set) (begin,
 * process each, tick, effects, commit); returns the number of effects it
 * produced. */
#define batch(h, evs, cnt) batch_at(__FILE__, __LINE__, h, evs, cnt)
size_t batch_at(const char *file, int line, h_t *h, const ev_t *evs,
                size_t cnt);

#define EV(a, i, t, q, ...)                                                    \
        ((ev_t){.agg = (a), .id = (i), .type = (t), .seq = (q), __VA_ARGS__})
#define ONE(h, ...)                                                            \
        do {                                                                   \
                ev_t e_[] = {__VA_ARGS__};                                     \
                batch((h), e_, sizeof(e_) / sizeof(e_[0]));                    \
        } while (0)

/* Runs one batch with one record on @p topic, partition 0 — a non-input
 * topic (reply topic, HTTP pseudo topic) or a control record on the input
 * topic (@p hd: its headers). */
#define feed_raw(h, topic, key, value, hd, hc)                                 \
        feed_raw_at(__FILE__, __LINE__, h, topic, key, value, hd, hc)
void feed_raw_at(const char *file, int line, h_t *h, const char *topic,
                 const char *key, const char *value, const sg_header_t *hd,
                 size_t hc);
/* The engine's metrics. */
const sg_metrics_t *M(h_t *h);
/* Fails unless @p o is of @p kind with record key @p key, and (when not
 * NULL) ce_sequence @p version and DLQ reason @p reason. */
#define assert_out(o, kind, key, version, reason)                              \
        assert_out_at(__FILE__, __LINE__, o, kind, key, version, reason)
void assert_out_at(const char *file, int line, const out_t *o,
                   sg_effect_kind_t kind, const char *key, const char *version,
                   const char *reason);
#endif /* TU_ENGINE_HARNESS */

#endif
