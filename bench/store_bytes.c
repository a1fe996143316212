/*
 * store_bytes.c — the store's bytes per key, engine only (no Kafka): feeds
 * N CloudEvents (binary mode) through the processor interface in batches,
 * as the Kafka loop does, each with its own idempotency key, spread over K
 * aggregates (event n is version n / K + 1 of aggregate n % K) and P
 * partitions (aggregate % P), and prints what the data_dir holds:
 *   used     the pages LMDB uses (its last page number × page size)
 *   blocks   the data_dir's allocated blocks (st_blocks × 512 of every
 *            file in it: what the disk goals count, headroom included)
 *   per database: entries and pages (sg_store_db_stats)
 * and from them bytes per dedup key (the dedup databases' pages over the
 * keys), per aggregate (the aggregate databases' pages over the
 * aggregates) and per event (blocks over events). Usage:
 *   store_bytes [events] [aggregates] [partitions] [batch]
 * Every figure is of the store after the last batch committed, while it is
 * open (the headroom of the write-through map still allocated).
 */
#include "benchutil.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Allocated bytes of every regular file under @p dir (one level). */
static uint64_t dir_blocks(const char *dir) {
        DIR *d = opendir(dir);
        uint64_t total = 0;
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char p[4200];
                struct stat sb;
                snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
                        total += (uint64_t)sb.st_blocks * 512;
        }
        if (d)
                closedir(d);
        return total;
}

int main(int argc, char **argv) {
        uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
        uint64_t aggs = argc > 2 ? strtoull(argv[2], NULL, 10) : events;
        int32_t parts = argc > 3 ? (int32_t)strtol(argv[3], NULL, 10) : 1;
        size_t batch = argc > 4 ? strtoull(argv[4], NULL, 10) : 1000;
        if (!aggs || parts < 1 || !batch)
                return 2;
        char dir[] = "/tmp/sg_store_bytes_XXXXXX", err[512];
        if (!mkdtemp(dir))
                return 1;
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        if (bench_engine_open("store_bytes", dir, "exactly_once", "", &conf,
                              &store, &eng, &p))
                return 1;
        int64_t off;
        for (int32_t i = 0; i < parts; i++)
                if (p.assign(p.opaque, "orders", i, "bench", &off, err,
                             sizeof(err))) {
                        fprintf(stderr, "store_bytes: %s\n", err);
                        return 1;
                }
        bench_ev_t *evs = calloc(batch, sizeof(*evs));
        if (!evs) {
                fprintf(stderr, "store_bytes: out of memory\n");
                return 1;
        }
        double t0 = bench_now_s();
        for (uint64_t n = 0; n < events;) {
                size_t c = 0;
                for (; c < batch && n < events; c++, n++) {
                        uint64_t a = n % aggs;
                        bench_ev_make(&evs[c], a, n / aggs + 1, n,
                                      (int32_t)(a % (uint64_t)parts), false);
                }
                if (bench_run_batch("store_bytes", &p, evs, c, NULL)) {
                        free(evs);
                        return 1;
                }
        }
        double t = bench_now_s() - t0;
        free(evs); /* the events are written; the rest reads the store */
        uint64_t size, used;
        sg_store_usage(store, &size, &used);
        uint64_t blocks = dir_blocks(dir);
        printf("store_bytes: %" PRIu64 " events, %" PRIu64
               " aggregates, %d partition(s), batch %zu: %.0f ev/s\n",
               events, aggs, (int)parts, batch, (double)events / t);
        printf("  used %.1f MiB, data_dir blocks %.1f MiB: %.1f B per "
               "event (blocks), %.1f B per event (used)\n",
               (double)used / 1048576.0, (double)blocks / 1048576.0,
               (double)blocks / (double)events, (double)used / (double)events);
        sg_txn_t *txn;
        sg_db_stat_t st[SG_STORE_DB_CNT];
        if (sg_txn_begin(store, false, &txn, err, sizeof(err)) ||
            sg_store_db_stats(txn, st, err, sizeof(err))) {
                fprintf(stderr, "store_bytes: %s\n", err);
                return 1;
        }
        sg_txn_abort(txn);
        uint64_t dedup_pages = 0, agg_pages = 0;
        for (int i = 0; i < SG_STORE_DB_CNT; i++) {
                printf("  %-8s %10" PRIu64 " entries %9" PRIu64
                       " pages %7.1f B/entry\n",
                       st[i].name, st[i].entries, st[i].pages,
                       st[i].entries ? (double)(st[i].pages * st[i].page_size) /
                                               (double)st[i].entries
                                     : 0.0);
                if (!strcmp(st[i].name, "dedup") ||
                    !strcmp(st[i].name, "expiry") ||
                    !strcmp(st[i].name, "filter"))
                        dedup_pages += st[i].pages;
                if (!strcmp(st[i].name, "agg") || !strcmp(st[i].name, "since"))
                        agg_pages += st[i].pages;
        }
        printf("  dedup %.1f B per key, aggregates %.1f B per aggregate "
               "(pages of their databases, indexes included)\n",
               (double)(dedup_pages * st[0].page_size) / (double)events,
               (double)(agg_pages * st[0].page_size) / (double)aggs);
        sg_engine_destroy(eng);
        sg_store_close(store);
        sg_config_destroy(conf);
        return bench_rmdir(dir) == 0 ? 0 : 1;
}
