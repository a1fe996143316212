/*
 * latency_tool.c — the --latency phase's paced producer and measuring
 * consumer (bench/run.sh, bench/README.md "End-to-end latency"), in C on
 * librdkafka, so that neither takes the cores the process under test
 * needs. Subcommands:
 *
 *   latency_tool produce -b BOOTSTRAP -t TOPIC -f FILE -r RATE [-q TICK_MS]
 *                        [-X k=v]...
 *     Produces the records of FILE (written by `bench/gen.py --write`: one
 *     record a line, key TAB value (TAB name=value)* LF) to TOPIC at RATE
 *     records/s: record i is due at start + i / RATE (CLOCK_MONOTONIC); the
 *     producer sleeps (absolute) until the next due record, at least
 *     TICK_MS (default 10) after its previous wake-up, and then produces
 *     every record due. The input topic has message.timestamp.type=
 *     LogAppendTime, so the broker stamps each record's append time and
 *     the producer's own delay does not count. gen.py's producer settings
 *     (idempotent, acks=all, no compression) with linger.ms 10 (= the
 *     tick: a produce request costs librdkafka's threads far more CPU
 *     than a record; 1 ms wake-ups with linger.ms 1 took 3x the CPU-s at
 *     7,000 and 23,000 records/s), and librdkafka's default partitioner
 *     (gen.py's too). The input thus arrives in bursts of TICK_MS.
 *     Prints one JSON line: records, rate wanted/achieved, how far it fell
 *     behind its schedule at worst, its CPU-seconds.
 *
 *   latency_tool consume -b BOOTSTRAP -o OUTPUT -i INPUT -n EXPECT
 *                        [-s SKIP_FRAC] [-w IDLE_S] [-W FIRST_S] [-d DUMP]
 *                        [-r] [-X k=v]...
 *     Reads every partition of OUTPUT and partition 0 of INPUT from the
 *     start, isolation.level=read_committed, fetch.wait.max.ms 10, with one
 *     consumer; prints {"event":"ready"} once assigned and fetching. Per
 *     output record: latency = the wall clock (CLOCK_REALTIME) when the
 *     poll returned it - its Kafka timestamp, which is its input record's
 *     broker append time (seqgate and the Kafka Streams peer copy the
 *     input record's timestamp to the output record). Checked on
 *     partition 0 (output partition = input partition): each output
 *     record's timestamp must be an append time of an input record with
 *     its ce_id. The input records' own append -> seen delay is the floor.
 *     Records appended in the first SKIP_FRAC (default 0.1) of the span of
 *     the output's timestamps are warm-up and not counted. Stops after
 *     EXPECT output records, or IDLE_S (default 30) s without a record
 *     (before the first output record: FIRST_S, default 300).
 *     Prints one JSON line: counts, p50/p90/p99/p99.9/max/mean ms, the
 *     floor's, the check, its CPU-seconds. -d DUMP: every output record's
 *     "append_time_ms latency_ms" line, in the order read, to DUMP. -r
 *     (an output in aggregate order: record key = aggregate, ce_sequence
 *     = version): also the latency from each record's ready time, the
 *     earliest it could be output in order, max(its append time, its
 *     predecessor's ready time) — without the wait of an event that
 *     arrived before its predecessor (gen.py's swaps) — and how many
 *     records waited. Exit 1 if incomplete or a timestamp is not its
 *     input's append time.
 *
 *   latency_tool analyze -n EXPECT [-s SKIP_FRAC] [-d DUMP]
 *     consume's arithmetic (warm-up cut, check, percentiles, floor) on
 *     records read from stdin instead of Kafka (see cmd_analyze), for
 *     bench/test_bench.py.
 *
 *   latency_tool pcts
 *     The consumer's percentile arithmetic alone: reads milliseconds, one
 *     a line, on stdin and prints their percentiles (for
 *     bench/test_bench.py).
 *
 * Percentiles are nearest rank (bench/measure.py's _pcts): the k-th
 * smallest of n with k = round(f * n), at least 1.
 */
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROPS 32

/* "latency_tool: WHAT[: ARG]" on stderr, exit 2. */
static _Noreturn void die(const char *what, const char *arg) {
        fprintf(stderr, "latency_tool: %s%s%s\n", what, arg ? ": " : "",
                arg ? arg : "");
        exit(2);
}

static double mono_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void cpu_s(double *user, double *sys) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
        *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
        char err[256];
        if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK)
                die(err, NULL);
}

/* -X name=value: a librdkafka property, after the defaults. */
static void conf_props(rd_kafka_conf_t *conf, char **props, int n) {
        for (int i = 0; i < n; i++) {
                char *eq = strchr(props[i], '=');
                if (!eq || eq == props[i])
                        die("-X is not name=value", props[i]);
                *eq = '\0';
                conf_set(conf, props[i], eq + 1);
                *eq = '=';
        }
}

/* Keeps -X @kv for conf_props(). */
static void add_prop(char **props, int *n, char *kv) {
        if (*n == MAX_PROPS)
                die("too many -X", NULL);
        props[(*n)++] = kv;
}

/* Makes room for one more element of @size bytes in *@v (*@cap of them,
 * @n used). */
static void grow(void **v, size_t *cap, size_t n, size_t size) {
        if (n < *cap && *v)
                return;
        *cap = *cap ? *cap * 2 : 4096;
        *v = realloc(*v, *cap * size);
        if (!*v)
                die("out of memory", NULL);
}

/* ---- percentiles ------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Nearest rank: the k-th smallest of @n sorted values, k = round(f n),
 * clamped to 1..n. */
static double rank(const double *xs, size_t n, double f) {
        long k = (long)(f * (double)n + 0.5) - 1;
        if (k < 0)
                k = 0;
        if ((size_t)k > n - 1)
                k = (long)n - 1;
        return xs[k];
}

/* Prints "p50_ms":..,"p90_ms":..,"p99_ms":..,"p999_ms":..,"max_ms":..,
 * "mean_ms":.. of @xs (sorted in place); nothing when @n is 0. */
static void print_pcts(FILE *f, double *xs, size_t n) {
        if (n == 0)
                return;
        qsort(xs, n, sizeof(*xs), cmp_double);
        double sum = 0;
        for (size_t i = 0; i < n; i++)
                sum += xs[i];
        fprintf(f,
                "\"p50_ms\":%.1f,\"p90_ms\":%.1f,\"p99_ms\":%.1f,"
                "\"p999_ms\":%.1f,\"max_ms\":%.1f,\"mean_ms\":%.1f",
                rank(xs, n, 0.50), rank(xs, n, 0.90), rank(xs, n, 0.99),
                rank(xs, n, 0.999), xs[n - 1], sum / (double)n);
}

typedef struct {
        double *v;
        size_t n, cap;
} dvec_t;

static void dvec_push(dvec_t *d, double x) {
        void *v = d->v;
        grow(&v, &d->cap, d->n, sizeof(*d->v));
        d->v = v;
        d->v[d->n++] = x;
}

static int cmd_pcts(void) {
        dvec_t d = {0};
        char line[128];
        while (fgets(line, sizeof(line), stdin)) {
                char *end;
                double x = strtod(line, &end);
                if (end == line)
                        continue;
                dvec_push(&d, x);
        }
        printf("{");
        print_pcts(stdout, d.v, d.n);
        printf("}\n");
        free(d.v);
        return 0;
}

/* ---- produce ---------------------------------------------------------- */

static long delivery_failed;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
        (void)rk;
        (void)opaque;
        if (m->err && delivery_failed++ == 0)
                fprintf(stderr, "latency_tool: delivery failed: %s\n",
                        rd_kafka_err2str(m->err));
}

/* Splits @line (its LF removed) into key, value and headers. */
static int parse_record(char *line, char **key, char **value,
                        rd_kafka_headers_t **hdrs) {
        char *save = NULL, *tok;
        *key = strtok_r(line, "\t", &save);
        *value = strtok_r(NULL, "\t", &save);
        if (!*key || !*value)
                return -1;
        *hdrs = rd_kafka_headers_new(8);
        while ((tok = strtok_r(NULL, "\t", &save))) {
                char *eq = strchr(tok, '=');
                if (!eq || eq == tok) {
                        rd_kafka_headers_destroy(*hdrs);
                        return -1;
                }
                rd_kafka_header_add(*hdrs, tok, eq - tok, eq + 1, -1);
        }
        return 0;
}

static int cmd_produce(int argc, char **argv) {
        const char *bs = NULL, *topic = NULL, *file = NULL;
        double rate = 0, tick = 0.010;
        char *props[MAX_PROPS];
        int nprops = 0, opt;
        while ((opt = getopt(argc, argv, "b:t:f:r:q:X:")) != -1) {
                switch (opt) {
                case 'q':
                        tick = strtod(optarg, NULL) / 1e3;
                        break;
                case 'b':
                        bs = optarg;
                        break;
                case 't':
                        topic = optarg;
                        break;
                case 'f':
                        file = optarg;
                        break;
                case 'r':
                        rate = strtod(optarg, NULL);
                        break;
                case 'X':
                        add_prop(props, &nprops, optarg);
                        break;
                default:
                        die("produce: bad option", NULL);
                }
        }
        if (!bs || !topic || !file || !(rate > 0))
                die("produce needs -b BOOTSTRAP -t TOPIC -f FILE -r "
                    "RATE (> 0)",
                    NULL);
        FILE *in = fopen(file, "r");
        if (!in)
                die("cannot open", file);

        char err[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        conf_set(conf, "bootstrap.servers", bs);
        conf_set(conf, "enable.idempotence", "true");
        conf_set(conf, "acks", "all");
        conf_set(conf, "linger.ms", "10");
        conf_set(conf, "batch.num.messages", "10000");
        conf_set(conf, "batch.size", "1048576");
        conf_set(conf, "queue.buffering.max.messages", "1000000");
        conf_set(conf, "queue.buffering.max.kbytes", "1048576");
        conf_set(conf, "compression.type", "none");
        conf_props(conf, props, nprops);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_t *rk =
                rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk)
                die(err, NULL);

        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        long n = 0, sleeps = 0;
        double behind_max = 0;
        double t0 = mono_s(), t_last = t0, last_wake = t0;
        while ((len = getline(&line, &cap, in)) > 0) {
                if (line[len - 1] == '\n')
                        line[--len] = '\0';
                char *key, *value;
                rd_kafka_headers_t *hdrs;
                if (parse_record(line, &key, &value, &hdrs))
                        die("bad record line in", file);
                /* record n is due at t0 + n / rate; a wake-up produces
                 * every record due, and comes at least @tick after the
                 * previous one */
                double due = t0 + (double)n / rate, now = mono_s();
                if (due > now) {
                        rd_kafka_poll(rk, 0);
                        double wake =
                                due > last_wake + tick ? due : last_wake + tick;
                        last_wake = wake;
                        struct timespec ts = {
                                .tv_sec = (time_t)wake,
                                .tv_nsec =
                                        (long)((wake - (double)(time_t)wake) *
                                               1e9)};
                        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
                                               &ts, NULL) == EINTR)
                                ;
                        sleeps++;
                } else if (now - due > behind_max) {
                        behind_max = now - due;
                }
                for (;;) {
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                                rk, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_KEY(key, strlen(key)),
                                RD_KAFKA_V_VALUE(value, strlen(value)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
                        if (!e)
                                break;
                        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                die("produce", rd_kafka_err2str(e));
                        rd_kafka_poll(rk, 10);
                }
                if (++n % 1000 == 0)
                        rd_kafka_poll(rk, 0);
                t_last = mono_s();
        }
        free(line);
        fclose(in);
        double t_sent = t_last - t0;
        int left = rd_kafka_flush(rk, 120000) ? rd_kafka_outq_len(rk) : 0;
        double produce_s = mono_s() - t0;
        rd_kafka_destroy(rk);
        double us, ss;
        cpu_s(&us, &ss);
        printf("{\"records\":%ld,\"rate_wanted\":%.0f,\"rate_achieved\":%.0f,"
               "\"behind_max_ms\":%.1f,\"sleeps\":%ld,\"produce_s\":%.2f,"
               "\"undelivered\":%d,\"failed\":%ld,\"user_s\":%.2f,"
               "\"sys_s\":%.2f}\n",
               n, rate, t_sent > 0 ? (double)n / t_sent : 0.0, behind_max * 1e3,
               sleeps, produce_s, left, delivery_failed, us, ss);
        return left || delivery_failed ? 1 : 0;
}

/* ---- consume ---------------------------------------------------------- */

typedef struct {
        char id[40];
        int64_t ts;
} idts_t;

typedef struct {
        idts_t *v;
        size_t n, cap;
} ivec_t;

static void ivec_push(ivec_t *d, const void *id, size_t idlen, int64_t ts) {
        void *v = d->v;
        grow(&v, &d->cap, d->n, sizeof(*d->v));
        d->v = v;
        idts_t *e = &d->v[d->n++];
        if (idlen >= sizeof(e->id))
                idlen = sizeof(e->id) - 1;
        memcpy(e->id, id, idlen);
        e->id[idlen] = '\0';
        e->ts = ts;
}

static int cmp_idts(const void *a, const void *b) {
        const idts_t *x = a, *y = b;
        int c = strcmp(x->id, y->id);
        return c ? c : (x->ts > y->ts) - (x->ts < y->ts);
}

static void ce_id_of(const rd_kafka_message_t *m, const void **id,
                     size_t *len) {
        rd_kafka_headers_t *h = NULL;
        *id = "";
        *len = 0;
        if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR)
                if (rd_kafka_header_get_last(h, "ce_id", id, len))
                        *id = "", *len = 0;
}

/* The record's version: its ce_sequence header (decimal), -1 without. */
static int64_t version_of(const rd_kafka_message_t *m) {
        rd_kafka_headers_t *h = NULL;
        const void *v;
        size_t len;
        char buf[24];
        if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
            rd_kafka_header_get_last(h, "ce_sequence", &v, &len) || len == 0 ||
            len >= sizeof(buf))
                return -1;
        memcpy(buf, v, len);
        buf[len] = '\0';
        return strtoll(buf, NULL, 10);
}

static int partitions_of(rd_kafka_t *rk, const char *topic, int *cnt) {
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        rd_kafka_topic_destroy(rkt);
        if (e)
                return -1;
        *cnt = md->topic_cnt == 1 && !md->topics[0].err
                       ? md->topics[0].partition_cnt
                       : 0;
        rd_kafka_metadata_destroy(md);
        return *cnt > 0 ? 0 : -1;
}

/* The options of the report, which consume and analyze share. */
typedef struct {
        long expect;      /* -n: output records expected */
        double skip;      /* -s: warm-up share of the timestamp span */
        const char *dump; /* -d: every output record's latency, here */
        int ordered;      /* -r: the latency from ready too */
} rep_opts_t;

/* Takes report option @opt (with @arg); returns 0 when it is none. */
static int rep_opt(rep_opts_t *o, int opt, const char *arg) {
        switch (opt) {
        case 'n':
                o->expect = strtol(arg, NULL, 10);
                return 1;
        case 's':
                o->skip = strtod(arg, NULL);
                return 1;
        case 'd':
                o->dump = arg;
                return 1;
        case 'r':
                o->ordered = 1;
                return 1;
        default:
                return 0;
        }
}

/* An output record of an aggregate (its key) at a version. */
typedef struct {
        char key[32];
        int64_t ver, ts;
        double seen;
} okv_t;

typedef struct {
        okv_t *v;
        size_t n, cap;
} okvec_t;

static int cmp_okv(const void *a, const void *b) {
        const okv_t *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        return c ? c : (x->ver > y->ver) - (x->ver < y->ver);
}

/* What the consumer saw. */
typedef struct {
        dvec_t out_seen; /* output: seen wall ms - timestamp */
        ivec_t out_ts;   /* output: timestamps (id unused) */
        ivec_t out_p0;   /* output partition 0: (ce_id, ts) */
        ivec_t in_p0;    /* input partition 0: (ce_id, ts) */
        dvec_t floor_d;  /* input partition 0: seen - append time */
        dvec_t floor_ts; /* ... and that append time */
        unsigned in_types, out_types; /* timestamp types seen, bits */
        int ordered;                  /* -r: okv is kept */
        okvec_t okv;                  /* output: (key, version, ts, seen) */
} seen_t;

/* An output record with timestamp @ts (ms), seen at wall clock @now (ms);
 * @p0: of partition 0, whose ce_id @id the check looks up; @key, @ver:
 * its aggregate and version (kept when sn->ordered). */
static void seen_out(seen_t *sn, int p0, int64_t ts,
                     rd_kafka_timestamp_type_t tst, double now, const void *id,
                     size_t idlen, const void *key, size_t keylen,
                     int64_t ver) {
        if (sn->ordered) {
                void *v = sn->okv.v;
                grow(&v, &sn->okv.cap, sn->okv.n, sizeof(*sn->okv.v));
                sn->okv.v = v;
                okv_t *o = &sn->okv.v[sn->okv.n++];
                if (keylen >= sizeof(o->key))
                        keylen = sizeof(o->key) - 1;
                if (keylen)
                        memcpy(o->key, key, keylen);
                o->key[keylen] = '\0';
                o->ver = ver;
                o->ts = ts;
                o->seen = now;
        }
        sn->out_types |= 1u << tst;
        dvec_push(&sn->out_seen, now - (double)ts);
        ivec_push(&sn->out_ts, "", 0, ts);
        if (p0)
                ivec_push(&sn->out_p0, id, idlen, ts);
}

/* An input record of partition 0 (append time @ts), seen at @now. */
static void seen_in(seen_t *sn, int64_t ts, rd_kafka_timestamp_type_t tst,
                    double now, const void *id, size_t idlen) {
        sn->in_types |= 1u << tst;
        ivec_push(&sn->in_p0, id, idlen, ts);
        dvec_push(&sn->floor_d, now - (double)ts);
        dvec_push(&sn->floor_ts, (double)ts);
}

/* Prints the result line of @sn (frees it) under the options @ro (-d:
 * every output record's "ts latency" to that file). Returns 0 when
 * complete and every checked output timestamp is an append time of its
 * ce_id, else 1. */
static int seen_report(seen_t *sn, const rep_opts_t *ro, double us, double ss) {
        long expect = ro->expect;
        double skip = ro->skip;
        const char *dump = ro->dump;
        /* Is each output record's timestamp its input's append time? */
        if (sn->in_p0.n)
                qsort(sn->in_p0.v, sn->in_p0.n, sizeof(idts_t), cmp_idts);
        size_t copied = 0;
        for (size_t i = 0; i < sn->out_p0.n; i++)
                if (sn->in_p0.n &&
                    bsearch(&sn->out_p0.v[i], sn->in_p0.v, sn->in_p0.n,
                            sizeof(idts_t), cmp_idts))
                        copied++;
        if (dump) { /* every output record, in the order read */
                FILE *f = fopen(dump, "w");
                if (!f)
                        die("cannot write", dump);
                for (size_t i = 0; i < sn->out_ts.n; i++)
                        fprintf(f, "%" PRId64 " %.3f\n", sn->out_ts.v[i].ts,
                                sn->out_seen.v[i]);
                fclose(f);
        }
        /* warm-up: the first SKIP_FRAC of the output's timestamp span */
        int64_t first = INT64_MAX, last = INT64_MIN;
        for (size_t i = 0; i < sn->out_ts.n; i++) {
                if (sn->out_ts.v[i].ts < first)
                        first = sn->out_ts.v[i].ts;
                if (sn->out_ts.v[i].ts > last)
                        last = sn->out_ts.v[i].ts;
        }
        double cut = sn->out_ts.n
                             ? (double)first + skip * (double)(last - first)
                             : 0;
        size_t nl = 0, nf = 0;
        for (size_t i = 0; i < sn->out_ts.n; i++)
                if ((double)sn->out_ts.v[i].ts >= cut)
                        sn->out_seen.v[nl++] = sn->out_seen.v[i];
        for (size_t i = 0; i < sn->floor_d.n; i++)
                if (sn->floor_ts.v[i] >= cut)
                        sn->floor_d.v[nf++] = sn->floor_d.v[i];
        /* -r: the time an output record could be output in order at the
         * earliest, ready(v) = max(ts(v), ready(v - 1)) per aggregate; the
         * latency from it leaves out the wait for a predecessor that was
         * appended later (a parked event) */
        dvec_t ready = {0};
        size_t waited = 0;
        if (sn->ordered && sn->okv.n) {
                qsort(sn->okv.v, sn->okv.n, sizeof(okv_t), cmp_okv);
                double r = 0;
                for (size_t i = 0; i < sn->okv.n; i++) {
                        const okv_t *o = &sn->okv.v[i];
                        int chain = i > 0 &&
                                    strcmp(o->key, sn->okv.v[i - 1].key) == 0 &&
                                    o->ver == sn->okv.v[i - 1].ver + 1;
                        r = chain && r > (double)o->ts ? r : (double)o->ts;
                        if (r > (double)o->ts)
                                waited++;
                        if ((double)o->ts >= cut)
                                dvec_push(&ready, o->seen - r);
                }
        }
        int complete = (long)sn->out_ts.n >= expect;
        printf("{\"output_records\":%zu,\"expected_output\":%ld,"
               "\"complete\":%s,\"measured\":%zu,\"warmup_skipped\":%zu,"
               "\"skip_frac\":%g,\"checked_p0\":%zu,"
               "\"out_ts_is_append_time_p0\":%zu,",
               sn->out_ts.n, expect, complete ? "true" : "false", nl,
               sn->out_ts.n - nl, skip, sn->out_p0.n, copied);
        printf("\"input_timestamp_types\":[");
        for (unsigned t = 0, k = 0; t < 8; t++)
                if (sn->in_types & (1u << t))
                        printf("%s%u", k++ ? "," : "", t);
        printf("],\"output_timestamp_types\":[");
        for (unsigned t = 0, k = 0; t < 8; t++)
                if (sn->out_types & (1u << t))
                        printf("%s%u", k++ ? "," : "", t);
        printf("],");
        print_pcts(stdout, sn->out_seen.v, nl);
        printf("%s\"floor\":{", nl ? "," : "");
        print_pcts(stdout, sn->floor_d.v, nf);
        printf("}");
        if (sn->ordered) {
                printf(",\"waited_for_predecessor\":%zu,\"from_ready\":{",
                       waited);
                print_pcts(stdout, ready.v, ready.n);
                printf("}");
        }
        printf(",\"consumer_user_s\":%.2f,\"consumer_sys_s\":%.2f}\n", us, ss);
        free(ready.v);
        free(sn->okv.v);
        free(sn->out_seen.v);
        free(sn->out_ts.v);
        free(sn->out_p0.v);
        free(sn->in_p0.v);
        free(sn->floor_d.v);
        free(sn->floor_ts.v);
        return complete && copied == sn->out_p0.n ? 0 : 1;
}

static int cmd_consume(int argc, char **argv) {
        const char *bs = NULL, *out = NULL, *inp = NULL;
        rep_opts_t ro = {.expect = -1, .skip = 0.1};
        double idle_s = 30, first_s = 300;
        char *props[MAX_PROPS];
        int nprops = 0, opt;
        while ((opt = getopt(argc, argv, "b:o:i:n:s:w:W:d:rX:")) != -1) {
                switch (opt) {
                case 'b':
                        bs = optarg;
                        break;
                case 'o':
                        out = optarg;
                        break;
                case 'i':
                        inp = optarg;
                        break;
                case 'W':
                        first_s = strtod(optarg, NULL);
                        break;
                case 'w':
                        idle_s = strtod(optarg, NULL);
                        break;
                case 'X':
                        add_prop(props, &nprops, optarg);
                        break;
                default:
                        if (!rep_opt(&ro, opt, optarg))
                                die("consume: bad option", NULL);
                }
        }
        if (!bs || !out || !inp || ro.expect < 0)
                die("consume needs -b BOOTSTRAP -o OUTPUT -i INPUT -n "
                    "EXPECT",
                    NULL);
        char err[256], group[96];
        snprintf(group, sizeof(group), "seqgate-bench-latency-%ld-%.0f",
                 (long)getpid(), wall_ms());
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        conf_set(conf, "bootstrap.servers", bs);
        conf_set(conf, "group.id", group);
        conf_set(conf, "enable.auto.commit", "false");
        conf_set(conf, "auto.offset.reset", "earliest");
        conf_set(conf, "isolation.level", "read_committed");
        /* the broker answers a fetch as soon as a record is there; an
         * empty fetch comes back after 10 ms (default 500) */
        conf_set(conf, "fetch.wait.max.ms", "10");
        conf_props(conf, props, nprops);
        rd_kafka_t *rk =
                rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        if (!rk)
                die(err, NULL);
        rd_kafka_poll_set_consumer(rk);
        int nout, nin;
        if (partitions_of(rk, out, &nout) || partitions_of(rk, inp, &nin))
                die("no metadata for the output or input topic", NULL);
        const int p0 = 0;
        rd_kafka_topic_partition_list_t *tl =
                rd_kafka_topic_partition_list_new(nout + 1);
        for (int p = 0; p < nout; p++)
                rd_kafka_topic_partition_list_add(tl, out, p)->offset =
                        RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_topic_partition_list_add(tl, inp, p0)->offset =
                RD_KAFKA_OFFSET_BEGINNING;
        if (rd_kafka_assign(rk, tl))
                die("assign failed", NULL);
        rd_kafka_topic_partition_list_destroy(tl);

        /* fetch sessions up before the input starts */
        double t_ready = mono_s();
        while (mono_s() - t_ready < 1.0) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (m)
                        rd_kafka_message_destroy(m);
        }
        printf("{\"event\":\"ready\"}\n");
        fflush(stdout);

        seen_t sn = {.ordered = ro.ordered};
        double last_new = mono_s();
        while ((long)sn.out_ts.n < ro.expect) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                double now = wall_ms();
                if (!m) {
                        /* before the first output record the process under
                         * test may still be starting (a JVM: many s) */
                        if (mono_s() - last_new >
                            (sn.out_ts.n ? idle_s : first_s))
                                break;
                        continue;
                }
                if (m->err) {
                        rd_kafka_message_destroy(m);
                        continue;
                }
                last_new = mono_s();
                rd_kafka_timestamp_type_t tst;
                int64_t ts = rd_kafka_message_timestamp(m, &tst);
                const void *id;
                size_t idlen;
                ce_id_of(m, &id, &idlen);
                if (strcmp(rd_kafka_topic_name(m->rkt), out) == 0)
                        seen_out(&sn, m->partition == p0, ts, tst, now, id,
                                 idlen, m->key, m->key_len, version_of(m));
                else
                        seen_in(&sn, ts, tst, now, id, idlen);
                rd_kafka_message_destroy(m);
        }
        /* input partition p0 to its end (the output can be complete
         * first), for the timestamp check */
        int64_t lo = 0, hi = 0;
        rd_kafka_query_watermark_offsets(rk, inp, p0, &lo, &hi, 10000);
        double deadline = mono_s() + 30;
        while ((int64_t)sn.in_p0.n < hi - lo && mono_s() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
                if (!m)
                        continue;
                if (!m->err && strcmp(rd_kafka_topic_name(m->rkt), inp) == 0) {
                        const void *id;
                        size_t idlen;
                        ce_id_of(m, &id, &idlen);
                        ivec_push(&sn.in_p0, id, idlen,
                                  rd_kafka_message_timestamp(m, NULL));
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        double us, ss;
        cpu_s(&us, &ss);
        return seen_report(&sn, &ro, us, ss);
}

/* latency_tool analyze -n EXPECT [-s SKIP_FRAC] [-d DUMP] [-r]: the
 * consumer's arithmetic on records from stdin instead of Kafka, one a
 * line: "out PARTITION TS SEEN_MS CE_ID [KEY VERSION]" (an output record,
 * timestamp TS ms, seen at wall clock SEEN_MS) or "in TS SEEN_MS CE_ID"
 * (input partition 0, LogAppendTime). Prints what consume prints. For
 * bench/test_bench.py. */
static int cmd_analyze(int argc, char **argv) {
        rep_opts_t ro = {.expect = -1, .skip = 0.1};
        int opt;
        while ((opt = getopt(argc, argv, "n:s:d:r")) != -1)
                if (!rep_opt(&ro, opt, optarg))
                        die("analyze: bad option", NULL);
        if (ro.expect < 0)
                die("analyze needs -n EXPECT", NULL);
        seen_t sn = {.ordered = ro.ordered};
        char line[256], id[64], key[64];
        int part, n;
        int64_t ts, ver;
        double now;
        while (fgets(line, sizeof(line), stdin)) {
                if ((n = sscanf(line,
                                "out %d %" SCNd64 " %lf %63s %63s %" SCNd64,
                                &part, &ts, &now, id, key, &ver)) >= 4)
                        seen_out(&sn, part == 0, ts,
                                 RD_KAFKA_TIMESTAMP_CREATE_TIME, now, id,
                                 strlen(id), n == 6 ? key : "",
                                 n == 6 ? strlen(key) : 0, n == 6 ? ver : -1);
                else if (sscanf(line, "in %" SCNd64 " %lf %63s", &ts, &now,
                                id) == 3)
                        seen_in(&sn, ts, RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME,
                                now, id, strlen(id));
                else
                        die("analyze: bad line", line);
        }
        return seen_report(&sn, &ro, 0, 0);
}

int main(int argc, char **argv) {
        if (argc < 2)
                die("usage: latency_tool produce|consume|analyze|pcts ...",
                    NULL);
        const char *cmd = argv[1];
        argc--;
        argv++;
        if (strcmp(cmd, "produce") == 0)
                return cmd_produce(argc, argv);
        if (strcmp(cmd, "consume") == 0)
                return cmd_consume(argc, argv);
        if (strcmp(cmd, "analyze") == 0)
                return cmd_analyze(argc, argv);
        if (strcmp(cmd, "pcts") == 0)
                return cmd_pcts();
        die("unknown subcommand (produce, consume, analyze, pcts)", cmd);
        return 2;
}
