/*
 * engine_bench.c — the decision engine alone, without Kafka: feeds N
 * CloudEvents (binary mode) through the processor interface in batches, as
 * the Kafka loop does, against a fresh LMDB store, and prints events/s.
 *
 * It isolates the per-record cost of envelope + dedup + ordering + LMDB
 * commit from the broker, so a change to the engine or the store can be
 * judged on its own. Usage:
 *   engine_bench [events] [aggregates] [batch] [preload_keys] [guarantee]
 *                [checkpoint_ms] [active] [spread]
 * preload_keys: dedup keys written before the timed run, to measure how the
 * store behaves when it is already large (e.g. 10000 vs 10000000).
 * guarantee: exactly_once (default: changelog records are built too) or
 * at_least_once.
 * checkpoint_ms: store.checkpoint_interval_ms (default: the configuration's
 * default); the timed run ends with a checkpoint (semantics §6).
 * active: 0 (default) sends the events to the aggregates in turn (each
 * aggregate's next version every `aggregates` events); N > 0 keeps N
 * aggregates open at a time, as bench/gen.py's --active does: N
 * aggregates take their versions in turn until each has its share
 * (events / aggregates), then the next N open (an aggregate's versions
 * arrive within N x share events: the Kafka benchmark's shape).
 * spread: 0 (default) preloads at the current time, so every preloaded
 * key lands in one expiry bucket; 1 spreads the preload's first-seen
 * times over the dedup TTL window as bench/scale_prime does for the Kafka
 * benchmark (batch b of J at now - TTL + 1 h + (b + 1)(TTL - 1 h)/J), so
 * the store holds a sealed segment per past bucket, as a steady state and
 * a restored store do; the timed run is at the real clock.
 * Besides events/s the line says what the timed run cost: CPU-s per event
 * (the process's, user and sys), pages written per event (/proc/self/io
 * write_bytes / 4096: the pages it dirtied, counted when dirtied), and
 * the data_dir's data.mdb allocated (st_blocks) at its end, headroom
 * included.
 */
#include "benchutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The partition's dedup segments by state, on stderr: what a lookup
 * probes (open and frozen ones without a filter, sealed ones behind
 * theirs). */
static void seg_report(sg_store_t *store, const char *when) {
        sg_txn_t *t;
        char err[256];
        sg_tp_t tp;
        sg_seg_stat_t st;
        sg_tp_make(&tp, "orders", 0);
        if (sg_txn_begin(store, false, &t, err, sizeof(err)))
                return;
        if (!sg_dedup_seg_stat(t, &tp, &st))
                fprintf(stderr,
                        "engine_bench: dedup segments %s: %d open, %d "
                        "frozen, %d sealed, %d merging, %" PRIu64 " keys\n",
                        when, st.open, st.frozen, st.sealed, st.merging,
                        st.keys);
        sg_txn_abort(t);
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

int main(int argc, char **argv) {
        uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
        uint64_t aggs = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
        size_t batch = argc > 3 ? strtoull(argv[3], NULL, 10) : 10000;
        uint64_t preload = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
        const char *guarantee = argc > 5 ? argv[5] : "exactly_once";
        long cp_ms = argc > 6 ? strtol(argv[6], NULL, 10) : -1;
        uint64_t active = argc > 7 ? strtoull(argv[7], NULL, 10) : 0;
        int spread = argc > 8 ? atoi(argv[8]) : 0;
        char dir[] = "/tmp/sg_engine_bench_XXXXXX", err[512];
        if (!mkdtemp(dir))
                return 1;
        char cp[64] = "";
        if (cp_ms >= 0)
                snprintf(cp, sizeof(cp), ",\"checkpoint_interval_ms\":%ld",
                         cp_ms);
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        if (bench_engine_open("engine_bench", dir, guarantee, cp, &conf, &store,
                              &eng, &p))
                return 1;
        int64_t off;
        p.assign(p.opaque, "orders", 0, "bench", &off, err, sizeof(err));
        bench_ev_t *evs = calloc(batch, sizeof(*evs));
        uint64_t *ver = calloc(aggs + 1, sizeof(*ver));
        size_t outputs = 0;
        int rc = 1;
        if (!evs || !ver) {
                fprintf(stderr, "engine_bench: out of memory\n");
                goto done;
        }
        /* preload: distinct dedup keys on other aggregates (mode strict,
         * each its own aggregate at version 1) */
        double t0 = bench_now_s();
        int64_t ttl = conf->topics[0].dedup_ttl_ms, hour = 3600000;
        int64_t now_ms = sg_clock_wall_ms();
        uint64_t jobs = (preload + batch - 1) / batch;
        for (uint64_t n = 0, b = 0; n < preload; b++) {
                if (spread && ttl > hour)
                        sg_engine_set_clock(
                                eng, now_ms - ttl + hour +
                                             (int64_t)((b + 1) *
                                                       (uint64_t)(ttl - hour) /
                                                       jobs));
                size_t c = 0;
                for (; c < batch && n < preload; c++, n++) {
                        bench_ev_make(&evs[c], 1000000000ull + n, 1,
                                      1000000000ull + n, 0, true);
                }
                if (bench_run_batch("engine_bench", &p, evs, c, &outputs))
                        goto done;
        }
        if (sg_engine_checkpoint(eng, err, sizeof(err))) {
                fprintf(stderr, "engine_bench: %s\n", err);
                goto done;
        }
        sg_engine_set_clock(eng, 0); /* the timed run: the real clock */
        seg_report(store, "after the preload");
        double tp = bench_now_s() - t0;
        outputs = 0;
        uint64_t w0 = written_bytes();
        double c0 = bench_cpu_s();
        t0 = bench_now_s();
        uint64_t n = 0;
        while (n < events) {
                size_t c = 0;
                for (; c < batch && n < events; c++, n++) {
                        uint64_t a = n % aggs;
                        if (active) {
                                uint64_t share =
                                        events / aggs ? events / aggs : 1;
                                uint64_t w = active * share; /* a window */
                                a = (n / w * active + n % w % active) % aggs;
                        }
                        bench_ev_make(&evs[c], a, ++ver[a], n, 0, true);
                }
                if (bench_run_batch("engine_bench", &p, evs, c, &outputs))
                        goto done;
        }
        if (sg_engine_checkpoint(eng, err, sizeof(err))) {
                fprintf(stderr, "engine_bench: %s\n", err);
                goto done;
        }
        double t = bench_now_s() - t0, c = bench_cpu_s() - c0;
        seg_report(store, "after the timed run");
        uint64_t w = written_bytes() - w0;
        uint64_t size, used;
        sg_store_usage(store, &size, &used);
        char path[64];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        uint64_t alloc =
                stat(path, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : 0;
        printf("engine (%s, checkpoint %ld ms): %" PRIu64 " events, %" PRIu64
               " aggregates (%" PRIu64 " active), batch %zu, "
               "preload %" PRIu64 " keys%s (%.1f s): %.0f ev/s, %zu outputs, "
               "store %.1f MiB; %.2f us CPU/event, %.3f pages written/event, "
               "data.mdb %.1f MiB allocated\n",
               guarantee,
               cp_ms < 0 ? (long)conf->checkpoint_interval_ms : cp_ms, events,
               aggs, active ? active : aggs, batch, preload,
               spread ? " spread over the TTL" : "", tp, (double)events / t,
               outputs, (double)used / 1048576.0, c * 1e6 / (double)events,
               (double)w / 4096.0 / (double)events, (double)alloc / 1048576.0);
        uint64_t hits, misses;
        size_t cached;
        sg_aggc_stats(store, &hits, &misses, &cached);
        fprintf(stderr,
                "engine_bench: aggregate cache (whole run, preload included): "
                "%" PRIu64 " hits, %" PRIu64 " misses, %zu entries at the "
                "end\n",
                hits, misses, cached);
        rc = outputs == events ? 0 : 1;
done:
        sg_engine_destroy(eng);
        sg_store_close(store);
        sg_config_destroy(conf);
        free(evs);
        free(ver);
        return bench_rmdir(dir) == 0 ? rc : 1;
}
