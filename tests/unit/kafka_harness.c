/*
 * kafka_harness.c — what the Kafka loop's suites share (kafka_harness.h).
 */
#include "kafka_harness.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

logs_t g_logs;

/** The loop's stats callback (every stats_interval_ms): the pace of it. */
static void stats_cb(void *opaque, const sg_loop_stats_t *st) {
        logs_t *l = opaque;
        int64_t now = mono_ms();
        (void)st;
        if (l->stats_lines < (int)(sizeof(l->stats_ms) / sizeof(int64_t)))
                l->stats_ms[l->stats_lines] = now;
        l->stats_lines++;
}

void log_cb(void *opaque, sg_log_level_t level, const char *event,
            const char *fields) {
        logs_t *l = opaque;
        if (!strcmp(event, "batch_aborted"))
                l->aborted++;
        else if (!strcmp(event, "partitions_paused"))
                l->paused++;
        else if (!strcmp(event, "partitions_resumed"))
                l->resumed++;
        else if (!strcmp(event, "store_grown"))
                l->grown++;
        else if (!strcmp(event, "fatal"))
                l->fatal++;
        else if (!strcmp(event, "producer_recreated"))
                l->recreated++;
        else if (!strcmp(event, "store_behind_changelog"))
                l->store_behind++;
        else if (!strcmp(event, "restore_done"))
                l->restore_done++;
        else if (!strcmp(event, "kafka_retry"))
                l->retries++;
        else if (!strcmp(event, "batch_rerun"))
                l->reruns++;
        else if (!strcmp(event, "dlq"))
                l->dlq_lines++;
        if (strstr(event, SECRET) || (fields && strstr(fields, SECRET)))
                l->secret_leaks++;
        if (getenv("SG_TEST_VERBOSE") &&
            (strcmp(event, "librdkafka") || level <= SG_LOG_WARNING))
                fprintf(stderr, "  [loop] %s %s\n", event,
                        fields ? fields : "");
}

/* ------------------------------------------------------------------ */
/* fixture: a mock cluster with "in", "out", "dlq" and a config for it  */

static void *g_mock;
char *g_bs;
rd_kafka_mock_cluster_t *g_mc;
sg_config_t *g_conf;
const char *g_root_extra = ALOS;

sg_config_t *conf_parse(const char *bs, const char *topics,
                        const char *kafka_extra) {
        char json[4096], es[512] = "";
        sg_config_t *conf = NULL;
        snprintf(json, sizeof(json),
                 "{%s\"data_dir\":\"/tmp/sg-test-kafka-unused\","
                 "\"kafka\":{\"bootstrap.servers\":\"%s\","
                 "\"group.id\":\"g\"%s},"
                 "\"batch\":{\"max_records\":%d,\"max_ms\":20},"
                 "\"pause_retry_ms\":%d,\"delivery_timeout_ms\":10000,"
                 "\"topics\":{%s}}",
                 g_root_extra, bs, kafka_extra ? kafka_extra : "", BATCH_MAX,
                 PAUSE_RETRY_MS, topics);
        sg_err_t err = sg_config_parse(json, &conf, es, sizeof(es));
        ck_assert_msg(err == SG_OK, "config: %s", es);
        return conf;
}

/** Starts the mock cluster (one broker) with the topics of @p topics,
 *  NPART partitions each, forgets the logs, and parses g_conf for it
 *  (@p kafka_extra: as conf_parse's). */
void mock_start(const char *topics, const char *kafka_extra) {
        char es[512] = "";
        memset(&g_logs, 0, sizeof(g_logs));
        /* The mock's port is only known once it runs: a first config with
         * a placeholder names the topics to create. */
        sg_config_t *c0 = conf_parse("127.0.0.1:9", topics, NULL);
        sg_err_t err =
                sg_mock_start(c0, 1, NPART, &g_mock, &g_bs, es, sizeof(es));
        sg_config_destroy(c0);
        ck_assert_msg(err == SG_OK, "mock: %s", es);
        g_mc = rd_kafka_handle_mock_cluster(g_mock);
        ck_assert_ptr_nonnull(g_mc);
        g_conf = conf_parse(g_bs, topics, kafka_extra);
}

void mock_setup(void) {
        mock_start(TOPICS_IN, NULL);
}

void mock_teardown(void) {
        sg_config_destroy(g_conf);
        g_conf = NULL;
        sg_mock_destroy(g_mock);
        g_mock = NULL;
        free(g_bs);
        g_bs = NULL;
}

rd_kafka_t *client_new(rd_kafka_type_t type, const char *group,
                       bool idempotent) {
        char es[512];
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        ck_assert_int_eq(rd_kafka_conf_set(kc, "bootstrap.servers", g_bs, es,
                                           sizeof(es)),
                         RD_KAFKA_CONF_OK);
        if (group)
                ck_assert_int_eq(rd_kafka_conf_set(kc, "group.id", group, es,
                                                   sizeof(es)),
                                 RD_KAFKA_CONF_OK);
        if (idempotent)
                ck_assert_int_eq(rd_kafka_conf_set(kc, "enable.idempotence",
                                                   "true", es, sizeof(es)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(type, kc, es, sizeof(es));
        ck_assert_msg(rk != NULL, "rd_kafka_new: %s", es);
        return rk;
}

/** Record i: key k = i % NKEYS, seq = i / NKEYS, partition i % NPART, offset
 *  i / NPART (one ordered idempotent producer, nothing else writes "in"). */
static void produce_input(void) {
        rd_kafka_t *p = client_new(RD_KAFKA_PRODUCER, NULL, true);
        for (int i = 0; i < NREC; i++) {
                char k[16], v[32], s[16];
                int kk = i % NKEYS, seq = i / NKEYS;
                snprintf(k, sizeof(k), "k%d", kk);
                snprintf(v, sizeof(v), "k%d:%d", kk, seq);
                snprintf(s, sizeof(s), "%d", seq);
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        p, RD_KAFKA_V_TOPIC("in"),
                        RD_KAFKA_V_PARTITION(kk % NPART),
                        RD_KAFKA_V_KEY(k, strlen(k)),
                        RD_KAFKA_V_VALUE(v, strlen(v)),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_TIMESTAMP(TS0 + i),
                        RD_KAFKA_V_HEADER("h-seq", s, (ssize_t)strlen(s)),
                        RD_KAFKA_V_HEADER("h-null", NULL, 0), RD_KAFKA_V_END);
                ck_assert_int_eq(e, RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        ck_assert_int_eq(rd_kafka_flush(p, 15000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
}

void loop_setup(void) {
        g_root_extra = ALOS;
        mock_setup();
        produce_input();
}

/** exactly_once: sg_mock_start also creates changelog "g-in-changelog". */
void eos_setup(void) {
        g_root_extra = "\"guarantee\":\"exactly_once\",";
        mock_setup();
        produce_input();
}

void eos_teardown(void) {
        mock_teardown();
        g_root_extra = ALOS;
}

/** High watermarks of @p topic. */
void end_offsets(const char *topic, int64_t hi[NPART]) {
        rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER, "verify", false);
        for (int p = 0; p < NPART; p++) {
                int64_t lo;
                ck_assert_int_eq(rd_kafka_query_watermark_offsets(
                                         c, topic, p, &lo, &hi[p], 10000),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        rd_kafka_destroy(c);
}

/** Offsets consumer group "g" committed for "in" (-1001 if none). */
static void group_committed(rd_kafka_t *c, int64_t off[NPART]) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(NPART);
        for (int p = 0; p < NPART; p++)
                rd_kafka_topic_partition_list_add(l, "in", p);
        rd_kafka_resp_err_t e = rd_kafka_committed(c, l, 10000);
        for (int p = 0; p < NPART; p++)
                off[p] = e ? -2 : l->elems[p].err ? -3 : l->elems[p].offset;
        rd_kafka_topic_partition_list_destroy(l);
}

void committed_offsets(int64_t off[NPART]) {
        rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER, "g", false);
        group_committed(c, off);
        rd_kafka_destroy(c);
}

static bool header_is(rd_kafka_headers_t *h, const char *name,
                      const char *want) {
        const void *v;
        size_t n;
        if (rd_kafka_header_get_last(h, name, &v, &n))
                return false;
        if (!want)
                return v == NULL;
        return v && n == strlen(want) && !memcmp(v, want, n);
}

/** Reads @p topic from the start of each partition to its end as it is
 *  now (end_offsets), with a "verify" consumer, for 20 s at most, and hands
 *  each record (error events left out) to @p on. */
void read_topic(const char *topic,
                void (*on)(void *opaque, const rd_kafka_message_t *m),
                void *opaque) {
        int64_t hi[NPART], pos[NPART] = {0};
        end_offsets(topic, hi);
        rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER, "verify", false);
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(NPART);
        for (int p = 0; p < NPART; p++)
                rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                        RD_KAFKA_OFFSET_BEGINNING;
        ck_assert_int_eq(rd_kafka_assign(c, l), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_topic_partition_list_destroy(l);
        int64_t deadline = mono_ms() + 20000;
        for (;;) {
                bool done = true;
                for (int p = 0; p < NPART; p++)
                        done = done && pos[p] >= hi[p];
                if (done || mono_ms() > deadline)
                        break;
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 500);
                if (!m)
                        continue;
                if (!m->err) {
                        pos[m->partition] = m->offset + 1;
                        on(opaque, m);
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_destroy(c);
}

/** read_output's tally while it reads. */
typedef struct outread {
        outres_t *r;
        int next_seq[NKEYS];
} outread_t;

static void output_record(void *opaque, const rd_kafka_message_t *m) {
        outread_t *x = opaque;
        outres_t *r = x->r;
        r->total++;

        char v[64];
        int kk = -1, seq = -1, n = 0;
        snprintf(v, sizeof(v), "%.*s", (int)m->len, (const char *)m->payload);
        if (sscanf(v, "k%d:%d%n", &kk, &seq, &n) != 2 || n != (int)strlen(v) ||
            kk < 0 || kk >= NKEYS || seq < 0 || seq >= PER_KEY) {
                r->bad++;
                return;
        }
        int i = seq * NKEYS + kk;
        char k[16], s[16];
        snprintf(k, sizeof(k), "k%d", kk);
        snprintf(s, sizeof(s), "%d", seq);
        rd_kafka_headers_t *h = NULL;
        rd_kafka_timestamp_type_t tst;
        if (!m->key || m->key_len != strlen(k) ||
            memcmp(m->key, k, m->key_len) || rd_kafka_message_headers(m, &h) ||
            rd_kafka_header_cnt(h) != 2 || !header_is(h, "h-seq", s) ||
            !header_is(h, "h-null", NULL) ||
            rd_kafka_message_timestamp(m, &tst) != TS0 + i ||
            m->partition != kk % NPART)
                r->bad++;
        if (r->count[kk][seq]++ > 0) {
                r->dups++;
        } else {
                if (seq != x->next_seq[kk])
                        r->disorder++;
                x->next_seq[kk] = seq + 1;
        }
}

void read_output(outres_t *r) {
        outread_t x = {.r = r};
        memset(r, 0, sizeof(*r));
        read_topic("out", output_record, &x);
        for (int kk = 0; kk < NKEYS; kk++)
                for (int s = 0; s < PER_KEY; s++)
                        r->missing += r->count[kk][s] == 0;
}

/** Nothing missing, first occurrences in per-key order, records intact. */
void assert_superset_in_order(const outres_t *r) {
        ck_assert_int_eq(r->missing, 0);
        ck_assert_int_eq(r->disorder, 0);
        ck_assert_int_eq(r->bad, 0);
        ck_assert_int_eq(r->total, NREC + r->dups);
}

void assert_committed_at_end(void) {
        int64_t hi[NPART], off[NPART];
        end_offsets("in", hi);
        committed_offsets(off);
        for (int p = 0; p < NPART; p++) {
                ck_assert_int_eq(hi[p], PER_PART);
                ck_assert_msg(off[p] == hi[p],
                              "partition %d: committed %" PRId64
                              ", end offset %" PRId64,
                              p, off[p], hi[p]);
        }
}

/* ------------------------------------------------------------------ */
/* a fault-injecting processor around the pass-through                  */

#define OVERLAP_AT 10
#define OVERLAP_WAIT_MS 2000

/** Sum of the end offsets of "out" (the probe's view). */
static int64_t out_end_sum(rd_kafka_t *rk) {
        int64_t sum = 0;
        for (int p = 0; p < NPART; p++) {
                int64_t lo, hi;
                ck_assert_int_eq(rd_kafka_query_watermark_offsets(
                                         rk, "out", p, &lo, &hi, 5000),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
                sum += hi;
        }
        return sum;
}

/** The overlap probe, at the OVERLAP_AT-th record of an attempt. */
static void tp_overlap_probe(tproc_t *t) {
        if (t->overlap_probes <= 0 || t->att_n != OVERLAP_AT ||
            t->overlap_base < 0)
                return;
        t->overlap_probes--;
        int64_t deadline = mono_ms() + OVERLAP_WAIT_MS;
        while (out_end_sum(t->overlap_rk) <= t->overlap_base &&
               mono_ms() < deadline)
                tu_sleep_ms(10);
        if (out_end_sum(t->overlap_rk) > t->overlap_base)
                t->overlap_seen++;
        else
                t->overlap_missed++;
}

static sg_err_t tp_begin(void *o, int64_t now, char *es, size_t n) {
        tproc_t *t = o;
        if (t->rr_pending && t->rr_pos > 0)
                t->rerun_bad++; /* a re-run that stopped half way */
        t->rr_pos = 0;
        t->att_n = 0;
        memcpy(t->att_next, t->next_off, sizeof(t->att_next));
        t->overlap_base =
                t->overlap_probes > 0 ? out_end_sum(t->overlap_rk) : -1;
        if (t->begin_sleep_ms)
                tu_sleep_ms(t->begin_sleep_ms);

        return t->in.batch_begin(t->in.opaque, now, es, n);
}

/** A process() failure aborts the attempt after the records decided
 *  before it were produced (the loop produces while deciding, in chunks
 *  of an eighth of batch.max_records effects): at_least_once waits for
 *  their delivery before it rewinds, so each is exactly one duplicate
 *  downstream (never lost, never purged from the middle of the producer's
 *  sequence, never after the re-read batch's own output); the effects of
 *  an unfinished chunk were never produced. */
static int tp_produced_so_far(tproc_t *t) {
        const sg_effect_t *e;
        int n = (int)t->in.effects(t->in.opaque, &e);
        int chunk = BATCH_MAX / 8 > 0 ? BATCH_MAX / 8 : 1;
        return n / chunk * chunk;
}

sg_err_t tp_process(void *o, const sg_record_t *r, sg_process_result_t *res,
                    char *es, size_t n) {
        tproc_t *t = o;
        int32_t p = r->partition;
        int64_t off = r->offset;
        ck_assert(strcmp(r->topic, "in") == 0);
        ck_assert(p >= 0 && p < NPART && off >= 0 && off < PER_PART);
        ck_assert_uint_lt(t->att_n, BATCH_MAX);

        if (off != t->att_next[p])
                t->gaps++;
        if (t->pause_off >= 0 && t->pause_part < 0)
                t->pause_part = p;
        if (t->rr_pending) {
                if (t->rr_pos < t->rr_n &&
                    (t->rr_p[t->rr_pos] != p || t->rr_o[t->rr_pos] != off))
                        t->rerun_bad++;
                if (++t->rr_pos == t->rr_n) {
                        t->rerun_ok++;
                        t->rr_pending = false;
                }
        }
        if (t->pause_done && !t->resume_ms) {
                if (p != t->pause_part)
                        t->other_during_pause++;
                else if (off == t->pause_off)
                        t->resume_ms = mono_ms();
                else
                        t->paused_part_wrong++;
        }
        if (p == t->pause_part && off == t->pause_off)
                t->pause_calls++;

        if (t->produce_err_at_first_record) {
                rd_kafka_mock_push_request_errors(
                        g_mc, 0 /* Produce */, 1,
                        t->produce_err_at_first_record);
                t->produce_err_at_first_record = RD_KAFKA_RESP_ERR_NO_ERROR;
        }
        tp_overlap_probe(t);
        t->att_p[t->att_n] = p;
        t->att_o[t->att_n] = off;
        t->att_n++;

        if (t->proc_fail_mod && off % t->proc_fail_mod == t->proc_fail_rem &&
            !(t->injected[p][off] & 1)) {
                t->injected[p][off] |= 1;
                t->proc_fails++;
                t->dup_expected += tp_produced_so_far(t);
                snprintf(es, n, "injected process failure at %d/%" PRId64, p,
                         off);
                return SG_ERR_STORE;
        }
        if (t->disk_full && t->att_n == 1) {
                snprintf(es, n, "injected map full (the disk is full)");
                return SG_ERR_MAP_FULL;
        }
        if (t->mapfull_mod && off % t->mapfull_mod == t->mapfull_rem &&
            !(t->injected[p][off] & 2)) {
                t->injected[p][off] |= 2;
                t->mapfulls++;
                t->dup_expected += tp_produced_so_far(t);
                /* The loop must re-run exactly these records. */
                memcpy(t->rr_p, t->att_p, t->att_n * sizeof(t->att_p[0]));
                memcpy(t->rr_o, t->att_o, t->att_n * sizeof(t->att_o[0]));
                t->rr_n = t->att_n;
                t->rr_pending = true;
                snprintf(es, n, "injected map full");
                return SG_ERR_MAP_FULL;
        }
        if (p == t->pause_part && off == t->pause_off && !t->pause_done) {
                t->pause_done = true;
                t->pause_ms = mono_ms();
                for (int q = 0; q < NPART; q++)
                        if (q != p)
                                t->other_left_at_pause +=
                                        (int)(PER_PART - t->att_next[q]);
                if (getenv("SG_TEST_VERBOSE"))
                        fprintf(stderr,
                                "  [tp] %" PRId64 " pause %d/%" PRId64 "\n",
                                t->pause_ms, p, off);
                t->pauses++;
                t->att_n--; /* not consumed */
                *res = SG_PAUSE;
                return SG_OK;
        }
        t->att_next[p] = off + 1;
        return t->in.process(t->in.opaque, r, res, es, n);
}

static sg_err_t tp_tick(void *o, char *es, size_t n) {
        tproc_t *t = o;
        return t->in.tick(t->in.opaque, es, n);
}

static size_t tp_effects(void *o, const sg_effect_t **e) {
        tproc_t *t = o;
        return t->in.effects(t->in.opaque, e);
}

static sg_err_t tp_commit(void *o, char *es, size_t n) {
        tproc_t *t = o;
        const sg_effect_t *e;
        t->commit_calls++;
        if (t->att_n > 0)
                t->commit_calls_nonempty++;
        /* Only batches with records: the loop also runs empty ones (tick). */
        if (t->commit_fail_period && t->att_n > 0 &&
            t->commit_calls_nonempty % t->commit_fail_period == 0 &&
            t->commit_fails < t->commit_fail_max) {
                t->commit_fails++;
                /* Kafka already has this attempt's output: re-read records
                 * are produced again. */
                t->dup_expected += (int)t->in.effects(t->in.opaque, &e);
                snprintf(es, n, "injected batch_commit failure");
                if (t->kafka_commits) {
                        for (size_t i = 0; i < t->att_n; i++)
                                if (t->att_o[i] + 1 > t->next_off[t->att_p[i]])
                                        t->next_off[t->att_p[i]] =
                                                t->att_o[i] + 1;
                        int c = atomic_fetch_add(&t->committed_cnt,
                                                 (int)t->att_n) +
                                (int)t->att_n;
                        if (t->stop_when_done && c >= NREC)
                                sg_loop_stop(t->loop);
                }
                return SG_ERR_STORE;
        }
        sg_err_t err = t->in.batch_commit(t->in.opaque, es, n);
        if (err)
                return err;
        t->commits_ok++;
        if (getenv("SG_TEST_VERBOSE") && t->att_n > 0)
                fprintf(stderr,
                        "  [tp] %" PRId64
                        " commit %zu records, first %d/%" PRId64
                        " last %d/%" PRId64 "\n",
                        mono_ms(), t->att_n, t->att_p[0], t->att_o[0],
                        t->att_p[t->att_n - 1], t->att_o[t->att_n - 1]);
        for (size_t i = 0; i < t->att_n; i++) {
                int32_t p = t->att_p[i];
                int64_t off = t->att_o[i];
                if (t->committed[p][off])
                        t->recommitted++;
                t->committed[p][off] = 1;
                if (off + 1 > t->next_off[p])
                        t->next_off[p] = off + 1;
        }
        int c = atomic_fetch_add(&t->committed_cnt, (int)t->att_n) +
                (int)t->att_n;
        if (t->stop_when_done && c >= NREC)
                sg_loop_stop(t->loop);
        return SG_OK;
}

static void tp_abort(void *o) {
        tproc_t *t = o;
        t->aborts++;
        t->in.batch_abort(t->in.opaque);
}

static sg_err_t tp_grow(void *o, char *es, size_t n) {
        tproc_t *t = o;
        if (t->disk_full && t->grow_fails < t->grow_fail_max) {
                t->grow_fails++;
                snprintf(es, n,
                         "growing the store's map to 2097152 bytes: "
                         "allocating /data/data.mdb: No space left on device");
                return SG_ERR_STORE;
        }
        t->disk_full = false;
        t->grows++;
        return SG_OK;
}

static sg_err_t tp_assign(void *o, const char *topic, int32_t partition,
                          const char *group, int64_t *offp, char *es,
                          size_t n) {
        tproc_t *t = o;
        t->assigns++;
        return t->in.assign(t->in.opaque, topic, partition, group, offp, es, n);
}

static void tp_revoke(void *o, const char *topic, int32_t partition) {
        tproc_t *t = o;
        (void)topic, (void)partition;
        t->revokes++;
}

void tp_delivered(void *o, size_t index, int64_t offset) {
        tproc_t *t = o;
        const sg_effect_t *e;
        size_t n = t->in.effects(t->in.opaque, &e);
        t->delivered++;
        if (index >= n || offset < 0 || e[index].partition < 0 ||
            e[index].partition >= NPART) {
                t->delivered_bad++;
                return;
        }
        if (offset <= t->out_last[e[index].partition] &&
            t->out_last[e[index].partition] >= 0)
                t->out_disorder++;
        t->out_last[e[index].partition] = offset;
}

sg_err_t tp_restore_begin(void *o, const char *topic, int32_t p, int64_t lo,
                          int64_t hi, int64_t *from, char *es, size_t n) {
        tproc_t *t = o;
        if (strcmp(topic, "in") || p < 0 || p >= NPART || lo < 0 || hi < lo ||
            t->restore_open)
                t->restore_bad++;
        if (t->restore_begins >= NPART &&
            t->restore_fails < t->restore_fail_max) {
                t->restore_fails++;
                snprintf(es, n, "test: restore_begin fails");
                return SG_ERR_STORE;
        }
        t->restore_begins++;
        t->restore_open = true;
        *from = hi; /* the pass-through keeps no state: nothing to read */
        return SG_OK;
}

sg_err_t tp_restore_apply(void *o, const char *topic, int32_t p, int64_t off,
                          const void *k, size_t kl, const void *v, size_t vl,
                          char *es, size_t n) {
        tproc_t *t = o;
        (void)topic, (void)p, (void)off, (void)k, (void)kl, (void)v, (void)vl;
        (void)es, (void)n;
        t->restore_bad++; /* from == end: never called */
        return SG_OK;
}

sg_err_t tp_restore_end(void *o, const char *topic, int32_t p, int64_t end,
                        char *es, size_t n) {
        tproc_t *t = o;
        (void)topic, (void)p, (void)es, (void)n;
        if (!t->restore_open || end < 0)
                t->restore_bad++;
        t->restore_open = false;
        t->restore_ends++;
        return SG_OK;
}

bool tp_refused(void *o, size_t index, bool too_large, const char *reason) {
        tproc_t *t = o;
        (void)too_large;
        t->refused_calls++;
        t->refused_index = index;
        snprintf(t->refused_reason, sizeof(t->refused_reason), "%s",
                 reason ? reason : "");
        return true; /* the pass-through writes it as it is again */
}

tproc_t *tp_new(void) {
        tproc_t *t = calloc(1, sizeof(*t));
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(sg_passthrough_new(g_conf, &t->pt), SG_OK);
        sg_passthrough_processor(t->pt, &t->in);
        t->pause_off = -1;
        t->stop_when_done = true;
        for (int p = 0; p < NPART; p++)
                t->out_last[p] = -1;
        return t;
}

void tp_interface(tproc_t *t, sg_processor_t *p) {
        *p = (sg_processor_t){
                .opaque = t,
                .batch_begin = tp_begin,
                .process = tp_process,
                .tick = tp_tick,
                .effects = tp_effects,
                .batch_commit = tp_commit,
                .batch_abort = tp_abort,
                .grow = tp_grow,
                .assign = tp_assign,
                .revoke = tp_revoke,
        };
}

void tp_destroy(tproc_t *t) {
        if (t->overlap_rk)
                rd_kafka_destroy(t->overlap_rk);
        sg_passthrough_destroy(t->pt);
        free(t);
}

/** Processor-side invariants every fault case must keep. */
void assert_tp_consistent(const tproc_t *t) {
        ck_assert_int_eq(atomic_load(&t->committed_cnt), NREC);
        ck_assert_int_eq(t->recommitted, 0);
        ck_assert_int_eq(t->gaps, 0);
        ck_assert_int_eq(t->assigns, NPART);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_eq(t->next_off[p], PER_PART);
}

/* ------------------------------------------------------------------ */
/* running the loop                                                    */

void *watchdog_main(void *a) {
        watchdog_t *w = a;
        int64_t end = mono_ms() + WATCHDOG_MS;
        while (!atomic_load(&w->done) && mono_ms() < end)
                tu_sleep_ms(20);
        if (!atomic_load(&w->done)) {
                atomic_store(&w->fired, true);
                sg_loop_stop(w->loop);
        }
        return NULL;
}

/* When set (not 0), run_loop() sets the loop's log level to it. */
sg_log_level_t g_log_level;

/* When set, run_loop() installs it as the loop's publish callback. */
sg_loop_publish_cb *g_publish_cb;
void *g_publish_opaque;

/** Creates a loop for @p proc, runs it until stopped, destroys it. */
void run_loop(const sg_processor_t *proc, sg_loop_t **loopp,
              void *(*other)(void *), void *other_arg, run_t *r) {
        char es[512] = "";
        sg_loop_t *loop = NULL;
        watchdog_t w = {0};
        pthread_t oth;
        sg_err_t err = sg_loop_new(g_conf, proc, log_cb, &g_logs, stats_cb,
                                   &g_logs, &loop, es, sizeof(es));
        ck_assert_msg(err == SG_OK, "sg_loop_new: %s: %s", sg_err2str(err), es);
        if (loopp)
                *loopp = loop;
        if (g_publish_cb)
                sg_loop_set_publish(loop, g_publish_cb, g_publish_opaque);
        if (g_log_level)
                sg_loop_set_log_level(loop, g_log_level);
        w.loop = loop;
        ck_assert_int_eq(pthread_create(&w.th, NULL, watchdog_main, &w), 0);
        if (other)
                ck_assert_int_eq(pthread_create(&oth, NULL, other, other_arg),
                                 0);
        r->errstr[0] = '\0';
        r->rc = sg_loop_run(loop, r->errstr, sizeof(r->errstr));
        atomic_store(&w.done, true);
        pthread_join(w.th, NULL);
        if (other)
                pthread_join(oth, NULL);
        r->stats = *sg_loop_stats(loop);
        r->watchdog_fired = atomic_load(&w.fired);
        sg_loop_destroy(loop);
        if (loopp)
                *loopp = NULL;
        if (getenv("SG_TEST_VERBOSE"))
                fprintf(stderr,
                        "  rc=%s batches=%" PRIu64 " aborted=%" PRIu64
                        " in=%" PRIu64 " out=%" PRIu64 " dr_fail=%" PRIu64
                        " grows=%" PRIu64 " pauses=%" PRIu64
                        " rebalances=%" PRIu64 "\n",
                        sg_err2str(r->rc), r->stats.batches_total,
                        r->stats.batches_aborted_total,
                        r->stats.records_in_total, r->stats.records_out_total,
                        r->stats.delivery_failures_total,
                        r->stats.map_grows_total, r->stats.pauses_total,
                        r->stats.rebalances_total);
        ck_assert_msg(r->rc == SG_OK, "sg_loop_run: %s: %s", sg_err2str(r->rc),
                      r->errstr);
        ck_assert_msg(!r->watchdog_fired,
                      "the loop did not finish within %d ms", WATCHDOG_MS);
        ck_assert_int_eq(g_logs.fatal, 0);
        ck_assert_int_eq(g_logs.secret_leaks, 0);
}

/* ------------------------------------------------------------------ */
/* stopping the loop once the group committed                          */

/** Polls group "g"'s committed offsets for "in" from its own client, for
 *  WATCHDOG_MS at most; stops the loop once they equal stopper_t.want, not
 *  before not_before_ms. */
void *stop_at(void *a) {
        stopper_t *s = a;
        rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER, "g", false);
        int64_t end = mono_ms() + WATCHDOG_MS;
        while (mono_ms() < end) {
                int64_t off[NPART];
                bool all = true;
                group_committed(c, off);
                for (int p = 0; p < NPART; p++)
                        all = all && off[p] == s->want[p];
                if (all) {
                        atomic_store(&s->reached, true);
                        if (mono_ms() >= s->not_before_ms)
                                break;
                }
                tu_sleep_ms(100);
        }
        s->stop_ms = mono_ms();
        sg_loop_stop(*s->loopp);
        rd_kafka_destroy(c);
        return NULL;
}

/** stop_at() at the end of "in" as produce_input() wrote it. */
void *stop_at_end(void *a) {
        stopper_t *s = a;
        for (int p = 0; p < NPART; p++)
                s->want[p] = PER_PART;
        return stop_at(a);
}

/** SG_TEST_ONLY=<test name> runs one test (for debugging). */
void add(TCase *tc, const TTest *t) {
        const char *only = getenv("SG_TEST_ONLY");
        if (!only || !strcmp(only, t->name))
                tcase_add_test(tc, t);
}
