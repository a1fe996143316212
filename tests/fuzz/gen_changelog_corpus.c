/*
 * gen_changelog_corpus.c — writes the seed corpus of fuzz_changelog: the
 * changelog records of a short exactly_once engine run (records that apply,
 * park, drain, a duplicate, a DLQ, a snapshot request), framed as
 * changelog_input.h describes, into DIR:
 *   dedup, aggregate, parked, meta, snapreq   the first record of each kind
 *   tombstone                                 the first tombstone
 *   run                                       the whole changelog, in order
 * in the store's current format (store.h SG_STORE_FORMAT). The seeds named
 * format2-* are this generator's output before store format 3 (32-byte
 * key hashes, format 2's aggregate and parked values), kept so that the
 * fuzzer starts from the records a restore converts too. The engine runs
 * on the offline driver (drive.h), as seqgatectl simulate runs it.
 * Not a fuzz target (run.sh builds fuzz_*.c only). Build and run:
 *   cc -D_GNU_SOURCE -Ilib $LIB tests/fuzz/gen_changelog_corpus.c \
 *     $(pkg-config --cflags --libs rdkafka lmdb libcjson libcrypto libcurl) \
 *     -lpthread -o gen && ./gen tests/fuzz/corpus/changelog
 * ($LIB = every .c file of lib/). The output is deterministic.
 */
#include "config.h"
#include "drive.h"
#include "engine.h"
#include "store.h"

#include "changelog_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static sg_drive_t *drive;
static int64_t offset;
static uint8_t run[1 << 20];
static size_t run_len;
static bool written[256], tomb_written;
static const char *outdir;

static void die(const char *what, const char *err) {
        fprintf(stderr, "gen_changelog_corpus: %s: %s\n", what, err);
        exit(1);
}

static void write_seed(const char *name, const uint8_t *p, size_t n) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", outdir, name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
                die(path, "cannot write");
}

/* The driver's effects hook: each changelog record framed into the run,
 * the first of each kind (and the first tombstone) a seed of its own. */
static sg_err_t on_effects(void *opaque, const sg_record_t *origin,
                           const sg_effect_t *ef, const int64_t *offsets,
                           size_t n, char *errstr, size_t errstr_size) {
        (void)opaque;
        (void)origin;
        (void)offsets;
        (void)errstr;
        (void)errstr_size;
        for (size_t i = 0; i < n; i++) {
                if (ef[i].kind != SG_EFFECT_CHANGELOG)
                        continue;
                static uint8_t one[CL_IN_HEADER + 255 + 65535];
                bool tomb = ef[i].value == NULL;
                size_t l = cl_in_frame(one, tomb, ef[i].key, ef[i].key_len,
                                       ef[i].value, ef[i].value_len);
                if (!l || run_len + l > sizeof(run))
                        die("changelog record", "too long to frame");
                memcpy(run + run_len, one, l);
                run_len += l;
                const uint8_t db = ((const uint8_t *)ef[i].key)[0];
                static const char *const names[] = {[SG_DB_DEDUP] = "dedup",
                                                    [SG_DB_AGG] = "aggregate",
                                                    [SG_DB_PARKED] = "parked",
                                                    [SG_DB_META] = "meta",
                                                    [SG_DB_SNAPREQ] =
                                                            "snapreq"};
                if (tomb && !tomb_written) {
                        write_seed("tombstone", one, l);
                        tomb_written = true;
                } else if (!tomb && !written[db] &&
                           db < sizeof(names) / sizeof(names[0]) && names[db]) {
                        write_seed(names[db], one, l);
                        written[db] = true;
                }
        }
        return SG_OK;
}

/* One record's buffers. */
typedef struct gen_ev {
        char agg[8], id[16], seq[8], val[32];
        sg_header_t hd[5];
} gen_ev_t;

static void batch(int64_t now, const char *const *ev, size_t cnt) {
        char err[512];
        gen_ev_t e[8];
        sg_record_t recs[8];
        if (cnt > 8)
                die("batch", "more than 8 events");
        for (size_t i = 0; i < cnt; i++) {
                /* "aggregate id version [payload]" */
                gen_ev_t *g = &e[i];
                g->val[0] = '\0';
                if (sscanf(ev[i], "%7s %15s %7s %31s", g->agg, g->id, g->seq,
                           g->val) < 3)
                        die("event", ev[i]);
                g->hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
                g->hd[1] = (sg_header_t){"ce_id", g->id, strlen(g->id)};
                g->hd[2] = (sg_header_t){"ce_source", "/shop", 5};
                g->hd[3] = (sg_header_t){"ce_type", "t", 1};
                g->hd[4] = (sg_header_t){"ce_sequence", g->seq, strlen(g->seq)};
                const char *v = g->val[0] ? g->val : g->id;
                recs[i] = (sg_record_t){.topic = "orders",
                                        .partition = 0,
                                        .offset = offset++,
                                        .timestamp_ms = 1000,
                                        .key = g->agg,
                                        .key_len = strlen(g->agg),
                                        .value = v,
                                        .value_len = strlen(v),
                                        .headers = g->hd,
                                        .header_cnt = 5};
        }
        if (sg_drive_batch(drive, recs, cnt, now, err, sizeof(err)))
                die("batch", err);
}

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
                return 2;
        }
        outdir = argv[1];
        char err[512];
        sg_config_t *conf;
        if (sg_config_parse(conf_json, &conf, err, sizeof(err)))
                die("config", err);
        const sg_drive_hooks_t hooks = {.effects = on_effects};
        if (sg_drive_new(conf, NULL, "sg_gen_corpus_", "g", &hooks, &drive, err,
                         sizeof(err)))
                die("driver", err);
        sg_engine_set_clock(sg_drive_engine(drive), T0);
        if (sg_drive_assign(drive, "orders", 0, err, sizeof(err)))
                die("assign", err);
        const char *b1[] = {"A a1 1", "A a3 3",       "B b1 1",
                            "A a1 1", "A a1 1 other", "B b1x 1"};
        batch(T0, b1, 6);
        const char *b2[] = {"A a2 2", "C c1 1", "C c3 3"};
        batch(T0 + 10, b2, 3);
        batch(T0 + 1100, NULL, 0); /* C: snapshot request */
        write_seed("run", run, run_len);
        sg_drive_destroy(drive);
        sg_config_destroy(conf);
        const int kinds[] = {SG_DB_DEDUP, SG_DB_AGG, SG_DB_PARKED, SG_DB_META,
                             SG_DB_SNAPREQ};
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                if (!written[kinds[i]]) {
                        fprintf(stderr,
                                "gen_changelog_corpus: no record of "
                                "database %d in the run\n",
                                kinds[i]);
                        return 1;
                }
        if (!tomb_written)
                die("run", "no tombstone in the run");
        return 0;
}
