/*
 * benchutil.c — what the engine-only benchmarks share (benchutil.h).
 */
#include "benchutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bench_cpu_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_ev_make(bench_ev_t *e, uint64_t agg, uint64_t version, uint64_t n,
                   int32_t partition, bool note) {
        snprintf(e->agg, sizeof(e->agg), "agg-%" PRIu64, agg);
        snprintf(e->id, sizeof(e->id), "ev-%" PRIu64, n);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, version);
        int len =
                snprintf(e->value, sizeof(e->value),
                         "{\"order\":\"%" PRIu64 "\",\"amount\":%" PRIu64 "%s}",
                         agg, n % 1000,
                         note ? ",\"note\":\"benchmark payload padding "
                                "padding padding padding padding padding\""
                              : "");
        e->hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        e->hd[1] = (sg_header_t){"ce_id", e->id, strlen(e->id)};
        e->hd[2] = (sg_header_t){"ce_source", "/bench", 6};
        e->hd[3] = (sg_header_t){"ce_type", "order.updated", 13};
        e->hd[4] = (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
        e->rec = (sg_record_t){.topic = "orders",
                               .partition = partition,
                               .offset = (int64_t)n,
                               .timestamp_ms = 1,
                               .key = e->agg,
                               .key_len = strlen(e->agg),
                               .value = e->value,
                               .value_len = (size_t)len,
                               .headers = e->hd,
                               .header_cnt = 5};
}

int bench_engine_open(const char *who, const char *dir, const char *guarantee,
                      const char *store_extra, sg_config_t **confp,
                      sg_store_t **storep, sg_engine_t **engp,
                      sg_processor_t *p) {
        char json[1024], err[512];
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"%s\",\"guarantee\":\"%s\","
                 "\"kafka\":{\"bootstrap.servers\":\"x:1\","
                 "\"group.id\":\"bench\"},\"store\":{\"map_size_bytes\":"
                 "68719476736%s},\"topics\":{\"orders\":{\"output_topic\":"
                 "\"out\",\"dlq_topic\":\"dlq\"}}}",
                 dir, guarantee, store_extra);
        if (sg_config_parse(json, confp, err, sizeof(err)) ||
            sg_store_open(dir, (*confp)->map_size_bytes,
                          (*confp)->map_growth_bytes, storep, err,
                          sizeof(err)) ||
            sg_engine_store_durability(*confp, *storep, err, sizeof(err)) ||
            sg_engine_new(*confp, *storep, engp, err, sizeof(err))) {
                fprintf(stderr, "%s: %s\n", who, err);
                return -1;
        }
        sg_engine_processor(*engp, p);
        return 0;
}

int bench_run_batch(const char *who, sg_processor_t *p, bench_ev_t *evs,
                    size_t cnt, size_t *outputs) {
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
                if (outputs && ef[i].kind == SG_EFFECT_OUTPUT)
                        (*outputs)++;
                else if (p->delivered) /* as the loop does after delivery */
                        p->delivered(p->opaque, i, (int64_t)i);
        }
        if (p->batch_commit(p->opaque, err, sizeof(err)))
                goto fail;
        return 0;
fail:
        fprintf(stderr, "%s: %s\n", who, err);
        return -1;
}

int bench_rmdir(const char *dir) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}
