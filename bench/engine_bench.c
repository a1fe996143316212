/*
 * engine_bench.c — the decision engine alone, without Kafka: feeds N
 * CloudEvents (binary mode) through the processor interface in batches, as
 * the Kafka loop does, against a fresh LMDB store, and prints events/s.
 *
 * It isolates the per-record cost of envelope + dedup + ordering + LMDB
 * commit from the broker, so a change to the engine or the store can be
 * judged on its own. Usage:
 *   engine_bench [events] [aggregates] [batch] [preload_keys] [guarantee]
 * preload_keys: dedup keys written before the timed run, to measure how the
 * store behaves when it is already large (e.g. 10000 vs 10000000).
 * guarantee: exactly_once (default: changelog records are built too) or
 * at_least_once.
 * checkpoint_ms: store.checkpoint_interval_ms (default: the configuration's
 * default); the timed run ends with a checkpoint (semantics §6).
 * Besides events/s the line says what the timed run cost: CPU-s per event
 * (the process's, user and sys), pages written per event (/proc/self/io
 * write_bytes / 4096: the pages it dirtied, counted when dirtied), and
 * the data_dir's data.mdb allocated (st_blocks) at its end, headroom
 * included.
 */
#include "config.h"
#include "engine.h"
#include "store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* write_bytes of /proc/self/io: bytes this process caused to be written
 * (counted when the page was dirtied); 0 when unknown. */
static uint64_t written_bytes(void) {
        FILE *f = fopen("/proc/self/io", "r");
        char line[128];
        uint64_t v = 0;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "write_bytes: %" SCNu64, &v) == 1)
                        break;
        if (f)
                fclose(f);
        return v;
}

typedef struct ev {
        char agg[32], id[32], seq[24], value[200];
        sg_header_t hd[5];
        sg_record_t rec;
} ev_t;

static void make_ev(ev_t *e, uint64_t agg, uint64_t version, uint64_t n) {
        snprintf(e->agg, sizeof(e->agg), "agg-%" PRIu64, agg);
        snprintf(e->id, sizeof(e->id), "ev-%" PRIu64, n);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, version);
        int len = snprintf(e->value, sizeof(e->value),
                           "{\"order\":\"%" PRIu64 "\",\"amount\":%" PRIu64
                           ",\"note\":\"benchmark payload padding padding "
                           "padding padding padding padding\"}",
                           agg, n % 1000);
        e->hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        e->hd[1] = (sg_header_t){"ce_id", e->id, strlen(e->id)};
        e->hd[2] = (sg_header_t){"ce_source", "/bench", 6};
        e->hd[3] = (sg_header_t){"ce_type", "order.updated", 13};
        e->hd[4] = (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
        e->rec = (sg_record_t){.topic = "orders",
                               .partition = 0,
                               .offset = (int64_t)n,
                               .timestamp_ms = 1,
                               .key = e->agg,
                               .key_len = strlen(e->agg),
                               .value = e->value,
                               .value_len = (size_t)len,
                               .headers = e->hd,
                               .header_cnt = 5};
}

static int run_batch(sg_processor_t *p, ev_t *evs, size_t cnt,
                     size_t *outputs) {
        char err[512];
        sg_process_result_t r;
        if (p->batch_begin(p->opaque, 0, err, sizeof(err)))
                goto fail;
        for (size_t i = 0; i < cnt; i++)
                if (p->process(p->opaque, &evs[i].rec, &r, err, sizeof(err)))
                        goto fail;
        if (p->tick(p->opaque, err, sizeof(err)))
                goto fail;
        const sg_effect_t *ef;
        size_t n = p->effects(p->opaque, &ef);
        for (size_t i = 0; i < n; i++) {
                if (ef[i].kind == SG_EFFECT_OUTPUT)
                        (*outputs)++;
                else if (p->delivered) /* as the loop does after delivery */
                        p->delivered(p->opaque, i, (int64_t)i);
        }
        if (p->batch_commit(p->opaque, err, sizeof(err)))
                goto fail;
        return 0;
fail:
        fprintf(stderr, "engine_bench: %s\n", err);
        return -1;
}

int main(int argc, char **argv) {
        uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
        uint64_t aggs = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
        size_t batch = argc > 3 ? strtoull(argv[3], NULL, 10) : 10000;
        uint64_t preload = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
        const char *guarantee = argc > 5 ? argv[5] : "exactly_once";
        long cp_ms = argc > 6 ? strtol(argv[6], NULL, 10) : -1;
        char dir[] = "/tmp/sg_engine_bench_XXXXXX", err[512], cmd[128];
        if (!mkdtemp(dir))
                return 1;
        char json[1024], cp[64] = "";
        if (cp_ms >= 0)
                snprintf(cp, sizeof(cp), ",\"checkpoint_interval_ms\":%ld",
                         cp_ms);
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"%s\",\"guarantee\":\"%s\","
                 "\"kafka\":{\"bootstrap.servers\":\"x:1\","
                 "\"group.id\":\"bench\"},\"store\":{\"map_size_bytes\":"
                 "68719476736%s},\"topics\":{\"orders\":{\"output_topic\":"
                 "\"out\",\"dlq_topic\":\"dlq\"}}}",
                 dir, guarantee, cp);
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        if (sg_config_parse(json, &conf, err, sizeof(err)) ||
            sg_store_open(dir, conf->map_size_bytes, conf->map_growth_bytes,
                          &store, err, sizeof(err)) ||
            sg_engine_store_durability(conf, store, err, sizeof(err)) ||
            sg_engine_new(conf, store, &eng, err, sizeof(err))) {
                fprintf(stderr, "engine_bench: %s\n", err);
                return 1;
        }
        sg_engine_processor(eng, &p);
        int64_t off;
        p.assign(p.opaque, "orders", 0, "bench", &off, err, sizeof(err));
        ev_t *evs = calloc(batch, sizeof(*evs));
        uint64_t *ver = calloc(aggs + 1, sizeof(*ver));
        size_t outputs = 0;
        int rc = 1;
        if (!evs || !ver) {
                fprintf(stderr, "engine_bench: out of memory\n");
                goto done;
        }
        /* preload: distinct dedup keys on other aggregates (mode strict,
         * each its own aggregate at version 1) */
        double t0 = now_s();
        for (uint64_t n = 0; n < preload;) {
                size_t c = 0;
                for (; c < batch && n < preload; c++, n++) {
                        make_ev(&evs[c], 1000000000ull + n, 1,
                                1000000000ull + n);
                }
                if (run_batch(&p, evs, c, &outputs))
                        goto done;
        }
        if (sg_engine_checkpoint(eng, err, sizeof(err))) {
                fprintf(stderr, "engine_bench: %s\n", err);
                goto done;
        }
        double tp = now_s() - t0;
        outputs = 0;
        uint64_t w0 = written_bytes();
        double c0 = cpu_s();
        t0 = now_s();
        uint64_t n = 0;
        while (n < events) {
                size_t c = 0;
                for (; c < batch && n < events; c++, n++) {
                        uint64_t a = n % aggs;
                        make_ev(&evs[c], a, ++ver[a], n);
                }
                if (run_batch(&p, evs, c, &outputs))
                        goto done;
        }
        if (sg_engine_checkpoint(eng, err, sizeof(err))) {
                fprintf(stderr, "engine_bench: %s\n", err);
                goto done;
        }
        double t = now_s() - t0, c = cpu_s() - c0;
        uint64_t w = written_bytes() - w0;
        uint64_t size, used;
        sg_store_usage(store, &size, &used);
        char path[64];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        uint64_t alloc =
                stat(path, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : 0;
        printf("engine (%s, checkpoint %ld ms): %" PRIu64 " events, %" PRIu64
               " aggregates, batch %zu, "
               "preload %" PRIu64 " keys (%.1f s): %.0f ev/s, %zu outputs, "
               "store %.1f MiB; %.2f us CPU/event, %.3f pages written/event, "
               "data.mdb %.1f MiB allocated\n",
               guarantee,
               cp_ms < 0 ? (long)conf->checkpoint_interval_ms : cp_ms, events,
               aggs, batch, preload, tp, (double)events / t, outputs,
               (double)used / 1048576.0, c * 1e6 / (double)events,
               (double)w / 4096.0 / (double)events, (double)alloc / 1048576.0);
        rc = outputs == events ? 0 : 1;
done:
        sg_engine_destroy(eng);
        sg_store_close(store);
        sg_config_destroy(conf);
        free(evs);
        free(ver);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? rc : 1;
}
