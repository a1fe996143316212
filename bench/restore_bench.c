/*
 * restore_bench.c — a partition's restore from its changelog alone, without
 * Kafka: runs N CloudEvents (binary mode; duplicates and swapped versions as
 * in bench/gen.py) through the engine with exactly_once, keeps every
 * changelog effect it makes (the records a real changelog holds, in order),
 * then restores a fresh store from them through the processor's
 * restore_begin → restore_apply … → restore_end, each record passed through
 * a changelog reader as the Kafka loop does (lib/kafka_restore.c), and
 * prints records/s. Usage:
 *   restore_bench [-f FILE] [events] [aggregates] [batch] [rounds]
 * -f FILE: the changelog is read from FILE if it exists (then the other
 * operands but rounds are ignored), else built and written to FILE — so that
 * a whole-process timing of a second run is mostly the restore.
 * rounds: restores timed one after another (each into a fresh store); the
 * lines print each (wall and CPU time: the process's CPU-s, user and sys,
 * from restore_begin to restore_end) and the best.
 * -a (before -f): the records are fed as at_least_once's changelog holds
 * them (kafka_changelog.h): framed, in batches of 10,000 of one epoch, each
 * followed by its marker, so that the reader holds each batch back until
 * its marker comes (the markers count as records read, not applied).
 */
#include "benchutil.h"
#include "kafka_changelog.h"
#include "config.h"
#include "engine.h"
#include "store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

typedef struct ev {
        char agg[24], id[32], seq[24], type[16], value[200];
        sg_header_t hd[5];
        sg_record_t rec;
} ev_t;

static void make_ev(ev_t *e, uint64_t agg, uint64_t version, uint64_t off) {
        snprintf(e->agg, sizeof(e->agg), "agg-%" PRIu64, agg);
        snprintf(e->id, sizeof(e->id), "ev-%" PRIu64 "-%" PRIu64, agg, version);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, version);
        snprintf(e->type, sizeof(e->type), "%s",
                 version == 1   ? "order.created"
                 : version == 9 ? "order.closed"
                                : "order.updated");
        int len = snprintf(e->value, sizeof(e->value),
                           "{\"order\":\"%" PRIu64 "\",\"version\":%" PRIu64
                           ",\"note\":\"benchmark payload padding padding "
                           "padding padding padding padding\"}",
                           agg, version);
        e->hd[0] = (sg_header_t){"ce_specversion", "1.0", 3};
        e->hd[1] = (sg_header_t){"ce_id", e->id, strlen(e->id)};
        e->hd[2] = (sg_header_t){"ce_source", "/bench", 6};
        e->hd[3] = (sg_header_t){"ce_type", e->type, strlen(e->type)};
        e->hd[4] = (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
        e->rec = (sg_record_t){.topic = "orders",
                               .partition = 0,
                               .offset = (int64_t)off,
                               .timestamp_ms = 1,
                               .key = e->agg,
                               .key_len = strlen(e->agg),
                               .value = e->value,
                               .value_len = (size_t)len,
                               .headers = e->hd,
                               .header_cnt = 5};
}

/* The changelog: every record the engine's batches produced, in order. */
typedef struct clog {
        unsigned char *buf; /* keys and values back to back */
        size_t len, cap;
        struct clrec {
                size_t key_off, key_len, value_off, value_len;
                int tomb;
        } * recs;
        size_t cnt, rcap;
} clog_t;

static size_t clog_put(clog_t *c, const void *p, size_t n) {
        while (c->len + n > c->cap) {
                c->cap = c->cap ? c->cap * 2 : 1 << 20;
                c->buf = realloc(c->buf, c->cap);
                if (!c->buf)
                        exit(1);
        }
        size_t off = c->len;
        if (n)
                memcpy(c->buf + off, p, n);
        c->len += n;
        return off;
}

static void clog_add(clog_t *c, const sg_effect_t *ef) {
        if (c->cnt == c->rcap) {
                c->rcap = c->rcap ? c->rcap * 2 : 1 << 16;
                c->recs = realloc(c->recs, c->rcap * sizeof(*c->recs));
                if (!c->recs)
                        exit(1);
        }
        struct clrec *r = &c->recs[c->cnt++];
        r->key_off = clog_put(c, ef->key, ef->key_len);
        r->key_len = ef->key_len;
        r->tomb = ef->value == NULL;
        r->value_off = clog_put(c, ef->value, ef->value ? ef->value_len : 0);
        r->value_len = ef->value ? ef->value_len : 0;
}

static int open_engine(const char *dir, sg_config_t **confp,
                       sg_store_t **storep, sg_engine_t **engp,
                       sg_processor_t *p) {
        char json[1024], err[512];
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"%s\",\"guarantee\":\"exactly_once\","
                 "\"kafka\":{\"bootstrap.servers\":\"x:1\","
                 "\"group.id\":\"bench\"},\"store\":{\"map_size_bytes\":"
                 "68719476736},\"topics\":{\"orders\":{\"output_topic\":"
                 "\"out\",\"dlq_topic\":\"dlq\"}}}",
                 dir);
        if (sg_config_parse(json, confp, err, sizeof(err)) ||
            sg_store_open(dir, (*confp)->map_size_bytes,
                          (*confp)->map_growth_bytes, storep, err,
                          sizeof(err)) ||
            sg_engine_store_durability(*confp, *storep, err, sizeof(err)) ||
            sg_engine_new(*confp, *storep, engp, err, sizeof(err))) {
                fprintf(stderr, "restore_bench: %s\n", err);
                return -1;
        }
        sg_engine_processor(*engp, p);
        int64_t off;
        if (p->assign(p->opaque, "orders", 0, "bench", &off, err,
                      sizeof(err))) {
                fprintf(stderr, "restore_bench: assign: %s\n", err);
                return -1;
        }
        return 0;
}

static void close_engine(const char *dir, sg_config_t *conf, sg_store_t *store,
                         sg_engine_t *eng) {
        char cmd[128];
        sg_engine_destroy(eng);
        sg_store_close(store);
        sg_config_destroy(conf);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "restore_bench: could not remove %s\n", dir);
}

static int run_batch(sg_processor_t *p, ev_t *evs, size_t cnt, clog_t *cl) {
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
                if (ef[i].kind != SG_EFFECT_CHANGELOG)
                        continue;
                p->delivered(p->opaque, i, (int64_t)cl->cnt);
                clog_add(cl, &ef[i]);
        }
        if (p->batch_commit(p->opaque, err, sizeof(err)))
                goto fail;
        return 0;
fail:
        fprintf(stderr, "restore_bench: %s\n", err);
        return -1;
}

/* Builds the changelog of @p events input records over @p aggs aggregates
 * (1000 open at a time, 9 versions each; 10 % redeliveries of a record
 * 1..2000 back, 5 % of the versions swapped with their successor). */
static int build(uint64_t events, uint64_t aggs, size_t batch, clog_t *cl) {
        char dir[] = "/tmp/sg_restore_bench_XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        if (open_engine(dir, &conf, &store, &eng, &p))
                return -1;
        enum { OPEN = 1000, HIST = 2048 };
        uint64_t open_agg[OPEN], open_ver[OPEN], next_agg = 0;
        uint64_t hist_agg[HIST], hist_ver[HIST], hist_n = 0;
        size_t nopen = 0;
        ev_t *evs = calloc(batch, sizeof(*evs));
        uint64_t off = 0, pending_agg = 0, pending_ver = 0;
        int pending = 0, rc = 0;
        if (!evs) {
                fprintf(stderr, "restore_bench: out of memory\n");
                rc = -1;
        }
        while (!rc && off < events) {
                size_t c = 0;
                for (; c < batch && off < events; c++, off++) {
                        uint64_t a, v;
                        if (pending) {
                                a = pending_agg, v = pending_ver, pending = 0;
                        } else if (hist_n > 2 && rnd() % 10 == 0) {
                                uint64_t back =
                                        1 +
                                        rnd() % (hist_n < HIST ? hist_n : HIST);
                                size_t h = (size_t)((hist_n - back) % HIST);
                                a = hist_agg[h], v = hist_ver[h];
                        } else {
                                while (nopen < OPEN && next_agg < aggs) {
                                        open_agg[nopen] = next_agg++;
                                        open_ver[nopen++] = 0;
                                }
                                if (nopen == 0) { /* all closed: reopen */
                                        next_agg = 0;
                                        continue;
                                }
                                size_t i = (size_t)(rnd() % nopen);
                                a = open_agg[i];
                                v = ++open_ver[i];
                                if (v < 9 && rnd() % 20 == 0) {
                                        /* v+1 first, then v */
                                        pending = 1, pending_agg = a,
                                        pending_ver = v;
                                        v = ++open_ver[i];
                                }
                                if (open_ver[i] >= 9)
                                        open_agg[i] = open_agg[--nopen],
                                        open_ver[i] = open_ver[nopen];
                                hist_agg[hist_n % HIST] = a;
                                hist_ver[hist_n % HIST] = v;
                                hist_n++;
                        }
                        make_ev(&evs[c], a, v, off);
                }
                if (run_batch(&p, evs, c, cl))
                        rc = -1;
        }
        free(evs);
        close_engine(dir, conf, store, eng);
        return rc;
}

/* The reader's callback: restore_apply, as lib/kafka_restore.c calls it. */
static sg_err_t apply_cb(void *opaque, int64_t offset, const void *key,
                         size_t key_len, const void *value, size_t value_len,
                         char *errstr, size_t errstr_size) {
        const sg_processor_t *p = opaque;
        return p->restore_apply(p->opaque, "orders", 0, offset, key, key_len,
                                value, value_len, errstr, errstr_size);
}

/* -a: at_least_once framing, a batch of ALO_BATCH records per marker. */
#define ALO_BATCH 10000
static int alo;

/* One restore of @p cl into a fresh store; *secsp the time of restore_begin
 * → restore_end. */
static int restore(const clog_t *cl, double *secsp, double *cpup,
                   uint64_t *appliedp, uint64_t *usedp) {
        char dir[] = "/tmp/sg_restore_bench_XXXXXX", err[512] = "";
        if (!mkdtemp(dir))
                return -1;
        sg_config_t *conf;
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t p;
        if (open_engine(dir, &conf, &store, &eng, &p))
                return -1;
        sg_changelog_reader_t *rd = NULL;
        int64_t from = -1;
        double t0 = bench_now_s(), c0 = bench_cpu_s();
        int64_t end =
                (int64_t)cl->cnt +
                (alo ? (int64_t)((cl->cnt + ALO_BATCH - 1) / ALO_BATCH) : 0);
        sg_err_t e = p.restore_begin(p.opaque, "orders", 0, 0, end, &from, err,
                                     sizeof(err));
        if (!e && sg_changelog_reader_new(-1, &rd))
                e = SG_ERR_NOMEM;
        unsigned char frame[SG_CHANGELOG_FRAME_LEN];
        unsigned char mkey[SG_CHANGELOG_MARKER_LEN], mval[8];
        int64_t off = 0; /* with -a, markers take offsets too */
        for (size_t i = (size_t)(from > 0 ? from : 0); !e && i < cl->cnt; i++) {
                const struct clrec *r = &cl->recs[i];
                int64_t seq = (int64_t)(i / ALO_BATCH) + 1;
                if (alo)
                        sg_changelog_frame_make(frame, 1, seq);
                /* what the loop hands over: librdkafka's message buffers */
                e = sg_changelog_reader_feed(
                        rd, off++, cl->buf + r->key_off, r->key_len,
                        r->tomb ? NULL : cl->buf + r->value_off, r->value_len,
                        alo ? frame : NULL, alo ? sizeof(frame) : 0, apply_cb,
                        &p, err, sizeof(err));
                if (!e && alo &&
                    ((i + 1) % ALO_BATCH == 0 || i + 1 == cl->cnt)) {
                        sg_changelog_marker_key_make(mkey, 1, seq);
                        sg_changelog_u64_put(mval, seq);
                        e = sg_changelog_reader_feed(
                                rd, off++, mkey, sizeof(mkey), mval,
                                sizeof(mval), NULL, 0, apply_cb, &p, err,
                                sizeof(err));
                }
        }
        if (!e)
                e = sg_changelog_reader_finish(rd);
        if (!e)
                e = p.restore_end(p.opaque, "orders", 0, end, err, sizeof(err));
        *secsp = bench_now_s() - t0;
        *cpup = bench_cpu_s() - c0;
        if (rd)
                *appliedp = sg_changelog_reader_counts(rd).applied;
        sg_store_usage(store, NULL, usedp);
        sg_changelog_reader_destroy(rd);
        close_engine(dir, conf, store, eng);
        if (e) {
                fprintf(stderr, "restore_bench: restore: %s\n", err);
                return -1;
        }
        return 0;
}

/* -f FILE: the changelog as written by clog_save. */
static int clog_save(const clog_t *c, const char *path) {
        FILE *f = fopen(path, "wb");
        if (!f)
                return -1;
        int ok = fwrite(&c->cnt, sizeof(c->cnt), 1, f) == 1 &&
                 fwrite(&c->len, sizeof(c->len), 1, f) == 1 &&
                 fwrite(c->recs, sizeof(*c->recs), c->cnt, f) == c->cnt &&
                 fwrite(c->buf, 1, c->len, f) == c->len;
        return fclose(f) == 0 && ok ? 0 : -1;
}

static int clog_load(clog_t *c, FILE *f) {
        if (fread(&c->cnt, sizeof(c->cnt), 1, f) != 1 ||
            fread(&c->len, sizeof(c->len), 1, f) != 1)
                return -1;
        c->rcap = c->cnt;
        c->cap = c->len;
        c->recs = malloc(c->cnt * sizeof(*c->recs) + 1);
        c->buf = malloc(c->len + 1);
        if (!c->recs || !c->buf ||
            fread(c->recs, sizeof(*c->recs), c->cnt, f) != c->cnt ||
            fread(c->buf, 1, c->len, f) != c->len)
                return -1;
        return 0;
}

int main(int argc, char **argv) {
        const char *file = NULL;
        if (argc > 1 && strcmp(argv[1], "-a") == 0) {
                alo = 1;
                argv++;
                argc--;
        }
        if (argc > 2 && strcmp(argv[1], "-f") == 0) {
                file = argv[2];
                argv += 2;
                argc -= 2;
        }
        uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
        uint64_t aggs = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
        size_t batch = argc > 3 ? strtoull(argv[3], NULL, 10) : 10000;
        int rounds = argc > 4 ? atoi(argv[4]) : 1;
        clog_t cl = {0};
        double t0 = bench_now_s();
        FILE *in = file ? fopen(file, "rb") : NULL;
        if (in) {
                int bad = clog_load(&cl, in);
                fclose(in);
                if (bad) {
                        fprintf(stderr, "restore_bench: %s: unreadable\n",
                                file);
                        goto fail;
                }
                printf("restore_bench: %s: %zu changelog records, %.1f MiB\n",
                       file, cl.cnt, (double)cl.len / 1048576.0);
        } else if (build(events, aggs, batch, &cl) ||
                   (file && clog_save(&cl, file))) {
                goto fail;
        } else
                printf("restore_bench: %" PRIu64 " events, %" PRIu64
                       " aggregates, batch %zu: %zu changelog records, %.1f "
                       "MiB "
                       "(built in %.1f s)\n",
                       events, aggs, batch, cl.cnt, (double)cl.len / 1048576.0,
                       bench_now_s() - t0);
        double best = 0;
        for (int r = 0; r < rounds; r++) {
                double s, cpu;
                uint64_t applied = 0, used = 0;
                if (restore(&cl, &s, &cpu, &applied, &used))
                        goto fail;
                if (applied != cl.cnt) {
                        fprintf(stderr,
                                "restore_bench: applied %" PRIu64
                                " of %zu records\n",
                                applied, cl.cnt);
                        goto fail;
                }
                double rate = (double)cl.cnt / s;
                if (rate > best)
                        best = rate;
                printf("restore %d: %zu records in %.3f s (%.3f CPU-s): "
                       "%.0f records/s, %.0f records per CPU-s; store %.1f "
                       "MiB used\n",
                       r + 1, cl.cnt, s, cpu, rate, (double)cl.cnt / cpu,
                       (double)used / 1048576.0);
        }
        printf("restore best: %.0f records/s\n", best);
        free(cl.buf);
        free(cl.recs);
        return 0;
fail:
        free(cl.buf);
        free(cl.recs);
        return 1;
}
