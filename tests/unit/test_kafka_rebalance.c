/*
 * test_kafka_rebalance.c — at_least_once on librdkafka's mock cluster: a
 * partition moving between instances (a rebalance) with the engine over
 * its own store, its framed changelog and markers (a batch without its
 * marker, a zombie's records, a store behind its changelog), restores, the
 * group offset, and a stop during a restore (semantics §6). The harness:
 * kafka_harness.h.
 *
 * SG_TEST_ONLY=<test name> runs one test; SG_TEST_VERBOSE=1 prints the
 * loop's log events and each committed batch.
 */
#include "kafka_harness.h"

/* ------------------------------------------------------------------ */
/* (9) at_least_once: a partition moves between instances (the engine)  */
/*
 * Two instances of the real engine (each its own LMDB store, as two
 * seqgate processes with their own data_dir) in consumer group "g", one
 * after the other, as when a Deployment is scaled or a pod replaced: A
 * parks v3 and v4 of every aggregate behind a gap and leaves the group;
 * then the gap's fillers (v2) arrive, with redeliveries of A's events, and
 * B — with an EMPTY store — gets every partition. Every event must reach
 * the output in version order (duplicates are allowed in at_least_once):
 * B must know what A applied and parked (semantics §6: the store follows
 * the partition through the changelog).
 */

#define MV_AGGS 12 /* aggregate i lives in partition i % NPART */
#define MV_TOPICS                                                              \
        "\"in\":{\"output_topic\":\"out\",\"dlq_topic\":\"dlq\","              \
        "\"ordering\":{\"gap_timeout_ms\":600000}}"

static void mv_setup(void) {
        g_root_extra = ALOS;
        /* The mock's group coordinator keeps a member that left until its
         * session times out: a short session lets B join soon. */
        mock_start(MV_TOPICS, ",\"session.timeout.ms\":\"6000\","
                              "\"heartbeat.interval.ms\":\"500\"");
}

/** One engine over its own store: what one seqgate process holds. */
typedef struct inst {
        char dir[64];
        sg_store_t *store;
        sg_engine_t *eng;
        sg_processor_t proc;
} inst_t;

static void inst_open(inst_t *in) {
        char es[512] = "";
        tu_tmpdir(in->dir, sizeof(in->dir), "kafka");
        ck_assert_int_eq(sg_store_open(in->dir, 1 << 24, 1 << 24, &in->store,
                                       es, sizeof(es)),
                         SG_OK);
        ck_assert_msg(sg_engine_new(g_conf, in->store, &in->eng, es,
                                    sizeof(es)) == SG_OK,
                      "engine: %s", es);
        sg_engine_processor(in->eng, &in->proc);
}

static void inst_close(inst_t *in) {
        sg_engine_destroy(in->eng);
        sg_store_close(in->store);
        tu_rmrf(in->dir);
}

/** Produces CloudEvents (binary mode) v@p vs[0..n) of every aggregate,
 *  event id "<aggregate>-v<version><tag>", to its partition. */
static void mv_produce_tag(const int *vs, size_t n, const char *tag) {
        rd_kafka_t *p = client_new(RD_KAFKA_PRODUCER, NULL, true);
        for (size_t j = 0; j < n; j++)
                for (int a = 0; a < MV_AGGS; a++) {
                        char k[16], id[32], seq[16];
                        snprintf(k, sizeof(k), "agg-%d", a);
                        snprintf(id, sizeof(id), "agg-%d-v%d%s", a, vs[j], tag);
                        snprintf(seq, sizeof(seq), "%d", vs[j]);
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                                p, RD_KAFKA_V_TOPIC("in"),
                                RD_KAFKA_V_PARTITION(a % NPART),
                                RD_KAFKA_V_KEY(k, strlen(k)),
                                RD_KAFKA_V_VALUE(id, strlen(id)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_HEADER("ce_specversion", "1.0", 3),
                                RD_KAFKA_V_HEADER("ce_id", id,
                                                  (ssize_t)strlen(id)),
                                RD_KAFKA_V_HEADER("ce_source", "/test", 5),
                                RD_KAFKA_V_HEADER("ce_type", "t", 1),
                                RD_KAFKA_V_HEADER("ce_sequence", seq,
                                                  (ssize_t)strlen(seq)),
                                RD_KAFKA_V_END);
                        ck_assert_int_eq(e, RD_KAFKA_RESP_ERR_NO_ERROR);
                }
        ck_assert_int_eq(rd_kafka_flush(p, 15000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
}

/** mv_produce_tag() without a tag: event id "<aggregate>-v<version>". */
static void mv_produce(const int *vs, size_t n) {
        mv_produce_tag(vs, n, "");
}

/** Runs @p in until the group committed the current end of "in". */
static void inst_run_to_end(inst_t *in, run_t *r) {
        sg_loop_t *loop = NULL;
        stopper_t st = {.loopp = &loop};
        end_offsets("in", st.want);
        run_loop(&in->proc, &loop, stop_at, &st, r);
        ck_assert_msg(atomic_load(&st.reached),
                      "the group did not commit the end of \"in\"");
}

/** Versions per aggregate in the output (first copies, in offset order),
 *  and the number of copies. */
typedef struct mvout {
        int vers[MV_AGGS][16];
        int nvers[MV_AGGS];
        int total, dups, bad;
} mvout_t;

/** mv_read's tally while it reads. */
typedef struct mvread {
        mvout_t *o;
        unsigned char seen[MV_AGGS][16];
} mvread_t;

static void mv_record(void *opaque, const rd_kafka_message_t *m) {
        mvread_t *x = opaque;
        mvout_t *o = x->o;
        o->total++;
        int a = -1, v = -1;
        char buf[64];
        snprintf(buf, sizeof(buf), "%.*s", (int)m->len,
                 (const char *)m->payload);
        if (sscanf(buf, "agg-%d-v%d", &a, &v) != 2 || a < 0 || a >= MV_AGGS ||
            v < 0 || v >= 16) {
                o->bad++;
        } else if (x->seen[a][v]++) {
                o->dups++;
        } else {
                o->vers[a][o->nvers[a]++] = v;
        }
}

static void mv_read(const char *topic, mvout_t *o) {
        mvread_t x = {.o = o};
        memset(o, 0, sizeof(*o));
        read_topic(topic, mv_record, &x);
}

START_TEST(alo_partition_moves_with_parked_events) {
        inst_t a, b;
        run_t r;
        mvout_t o;

        /* Phase 1, instance A: v1 applied, v3 and v4 parked (gap at v2). */
        static const int ph1[] = {1, 3, 4};
        mv_produce(ph1, 3);
        inst_open(&a);
        inst_run_to_end(&a, &r);
        inst_close(&a);
        mv_read("out", &o);
        ck_assert_int_eq(o.total, MV_AGGS); /* only the v1s */

        /* Phase 2, instance B with an empty store: redeliveries of v1 and
         * v3, then the fillers v2. */
        static const int ph2[] = {1, 3, 2};
        mv_produce(ph2, 3);
        inst_open(&b);
        inst_run_to_end(&b, &r);
        inst_close(&b);

        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        for (int i = 0; i < MV_AGGS; i++) {
                ck_assert_msg(o.nvers[i] == 4 && o.vers[i][0] == 1 &&
                                      o.vers[i][1] == 2 && o.vers[i][2] == 3 &&
                                      o.vers[i][3] == 4,
                              "agg-%d: output versions %d %d %d %d (%d "
                              "distinct), want 1 2 3 4: events lost when the "
                              "partition moved",
                              i, o.vers[i][0], o.vers[i][1], o.vers[i][2],
                              o.vers[i][3], o.nvers[i]);
        }
        mvout_t d;
        mv_read("dlq", &d);
        ck_assert_msg(d.total == 0, "%d DLQ records", d.total);
}
END_TEST

/* A batch whose changelog records all landed but whose markers did not
 * (the mock cluster fails them; the loop stops right after, as a crash
 * would, without repairing): the changelog then holds a batch whose input
 * offsets were never committed. The next owner (B, empty store) must take
 * it as void (kafka_changelog.h: a batch without its marker never completed —
 * the same rule that keeps a batch cut half way out of every store), judge
 * v2 again (its output appears twice, at_least_once) and rewrite the
 * batch's keys. */

typedef struct cutproc {
        sg_processor_t eng; /**< the engine's interface */
        sg_loop_t **loopp;
        bool armed, fired;
        bool fail_commit; /**< fail the first batch_commit of a batch
                                   with changelog records, instead */
        int commit_fails;
        bool fail_output;     /**< fail the first Produce request of the
                                   first batch with changelog records,
                                   instead (fired says it did) */
        bool stop_in_restore; /**< sg_loop_stop at the first record
                                   restored, instead (fired says it did) */
        int apply_sleep_us;   /**< a slow restore: sleep per record */
} cutproc_t;

static sg_err_t cut_begin(void *o, int64_t now, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.batch_begin(c->eng.opaque, now, es, n);
}
static sg_err_t cut_process(void *o, const sg_record_t *r,
                            sg_process_result_t *res, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.process(c->eng.opaque, r, res, es, n);
}
static sg_err_t cut_tick(void *o, char *es, size_t n) {
        cutproc_t *c = o;
        sg_err_t err = c->eng.tick(c->eng.opaque, es, n);
        if (!err && c->fail_output && !c->fired) {
                /* at_least_once produces nothing of a batch before its
                 * tick: the next Produce request is this batch's first.
                 * Its answer (an error) comes a second late: a producer
                 * that sends more of the batch meanwhile has sent it
                 * before the failure stops it (the fatal error purges
                 * what is still queued). A batch with changelog records for two partitions or
                 * more: whichever request fails, another changelog
                 * partition's request is sent. */
                const sg_effect_t *e;
                size_t k = c->eng.effects(c->eng.opaque, &e);
                bool parts[NPART] = {false};
                int np = 0;
                for (size_t i = 0; i < k; i++)
                        if (e[i].kind == SG_EFFECT_CHANGELOG &&
                            e[i].partition >= 0 && e[i].partition < NPART &&
                            !parts[e[i].partition]) {
                                parts[e[i].partition] = true;
                                np++;
                        }
                if (np >= 2) {
                        rd_kafka_mock_broker_push_request_error_rtts(
                                g_mc, 1, 0 /* Produce */, 1,
                                RD_KAFKA_RESP_ERR_UNKNOWN, 1000);
                        c->fired = true;
                }
        }
        return err;
}
static size_t cut_effects(void *o, const sg_effect_t **ep) {
        cutproc_t *c = o;
        return c->eng.effects(c->eng.opaque, ep);
}
static sg_err_t cut_commit(void *o, char *es, size_t n) {
        cutproc_t *c = o;
        if (c->fail_commit && c->commit_fails == 0) {
                const sg_effect_t *e;
                size_t k = c->eng.effects(c->eng.opaque, &e);
                for (size_t i = 0; i < k; i++)
                        if (e[i].kind == SG_EFFECT_CHANGELOG) {
                                c->commit_fails++;
                                snprintf(es, n, "injected LMDB failure");
                                c->eng.batch_abort(c->eng.opaque);
                                return SG_ERR_STORE;
                        }
        }
        return c->eng.batch_commit(c->eng.opaque, es, n);
}
static void cut_abort(void *o) {
        cutproc_t *c = o;
        c->eng.batch_abort(c->eng.opaque);
}
/* delivered() comes once the batch's changelog records are in, right
 * before the markers go out: one Produce request per changelog partition
 * (librdkafka sends one per partition), each failed here. */
static void cut_delivered(void *o, size_t index, int64_t offset) {
        cutproc_t *c = o;
        if (c->armed && !c->fired && !c->fail_commit) {
                const sg_effect_t *e;
                size_t n = c->eng.effects(c->eng.opaque, &e);
                bool parts[NPART] = {false};
                size_t np = 0;
                for (size_t i = 0; i < n; i++)
                        if (e[i].kind == SG_EFFECT_CHANGELOG &&
                            e[i].partition >= 0 && e[i].partition < NPART &&
                            !parts[e[i].partition]) {
                                parts[e[i].partition] = true;
                                np++;
                        }
                for (size_t i = 0; i < np; i++)
                        rd_kafka_mock_push_request_errors(
                                g_mc, 0 /* Produce */, 1,
                                RD_KAFKA_RESP_ERR_UNKNOWN);
                c->fired = true;
                sg_loop_stop(*c->loopp); /* "crash": no repair */
        }
        c->eng.delivered(c->eng.opaque, index, offset);
}

static void cut_position(void *o, const char *t, int32_t p, int64_t lag) {
        cutproc_t *c = o;
        c->eng.position(c->eng.opaque, t, p, lag);
}
static void cut_size_limit(void *o, const char *t, size_t max_bytes) {
        cutproc_t *c = o;
        c->eng.size_limit(c->eng.opaque, t, max_bytes);
}
static bool cut_refused(void *o, size_t index, bool too_large,
                        const char *reason) {
        cutproc_t *c = o;
        return c->eng.refused(c->eng.opaque, index, too_large, reason);
}

static void cut_interface(cutproc_t *c, sg_processor_t *p) {
        *p = c->eng; /* restore, assign, revoke, grow... straight through */
        p->opaque = c;
        p->position = c->eng.position ? cut_position : NULL;
        p->size_limit = c->eng.size_limit ? cut_size_limit : NULL;
        p->refused = c->eng.refused ? cut_refused : NULL;
        p->batch_begin = cut_begin;
        p->process = cut_process;
        p->tick = cut_tick;
        p->effects = cut_effects;
        p->batch_commit = cut_commit;
        p->batch_abort = cut_abort;
        p->delivered = cut_delivered;
        /* these take the engine's opaque: wrap what the loop calls with
         * ours */
        p->grow = NULL;
        p->checkpoint = NULL;
        p->behind = NULL;
}

/* Forwarders for the calls that keep the engine's signature. */
static sg_err_t cut_assign(void *o, const char *t, int32_t p, const char *g,
                           int64_t *off, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.assign(c->eng.opaque, t, p, g, off, es, n);
}
static void cut_revoke(void *o, const char *t, int32_t p) {
        cutproc_t *c = o;
        c->eng.revoke(c->eng.opaque, t, p);
}
static sg_err_t cut_rbegin(void *o, const char *t, int32_t p, int64_t lo,
                           int64_t hi, int64_t *from, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.restore_begin(c->eng.opaque, t, p, lo, hi, from, es, n);
}
static sg_err_t cut_rapply(void *o, const char *t, int32_t p, int64_t off,
                           const void *k, size_t kl, const void *v, size_t vl,
                           char *es, size_t n) {
        cutproc_t *c = o;
        if (c->stop_in_restore && !c->fired) {
                c->fired = true;
                sg_loop_stop(*c->loopp);
        }
        if (c->apply_sleep_us)
                usleep((useconds_t)c->apply_sleep_us);
        return c->eng.restore_apply(c->eng.opaque, t, p, off, k, kl, v, vl, es,
                                    n);
}
static sg_err_t cut_rend(void *o, const char *t, int32_t p, int64_t end,
                         char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.restore_end(c->eng.opaque, t, p, end, es, n);
}
static int64_t cut_eget(void *o, const char *t, int32_t p) {
        cutproc_t *c = o;
        return c->eng.changelog_epoch_get(c->eng.opaque, t, p);
}
static void cut_eset(void *o, const char *t, int32_t p, int64_t e) {
        cutproc_t *c = o;
        c->eng.changelog_epoch_set(c->eng.opaque, t, p, e);
}
static bool cut_iget(void *o, const char *t, int32_t p, sg_changelog_id_t *id) {
        cutproc_t *c = o;
        return c->eng.changelog_id_get(c->eng.opaque, t, p, id);
}
static sg_err_t cut_iset(void *o, const char *t, int32_t p,
                         const sg_changelog_id_t *id, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.changelog_id_set(c->eng.opaque, t, p, id, es, n);
}
static sg_err_t cut_checkpoint(void *o, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.checkpoint(c->eng.opaque, es, n);
}
static bool cut_behind(void *o, const char *t, int32_t p) {
        cutproc_t *c = o;
        return c->eng.behind(c->eng.opaque, t, p);
}
static sg_err_t cut_value(void *o, const char *t, int32_t p, const void *k,
                          size_t kl, void **v, size_t *vl, char *es, size_t n) {
        cutproc_t *c = o;
        return c->eng.changelog_value(c->eng.opaque, t, p, k, kl, v, vl, es, n);
}

static void cut_full_interface(cutproc_t *c, sg_processor_t *p) {
        cut_interface(c, p);
        p->assign = cut_assign;
        p->revoke = cut_revoke;
        p->restore_begin = cut_rbegin;
        p->restore_apply = cut_rapply;
        p->restore_end = cut_rend;
        p->changelog_epoch_get = cut_eget;
        p->changelog_epoch_set = cut_eset;
        p->changelog_id_get = cut_iget;
        p->changelog_id_set = cut_iset;
        p->changelog_value = cut_value;
        p->checkpoint = c->eng.checkpoint ? cut_checkpoint : NULL;
        p->behind = c->eng.behind ? cut_behind : NULL;
}

/** Log events of the changelog, counted for the cases below. */
static int g_void_restored, g_repaired_keys;
static void mv_log_cb(void *opaque, sg_log_level_t level, const char *event,
                      const char *fields) {
        log_cb(opaque, level, event, fields);
        const char *v;
        if (!strcmp(event, "restore_done") && fields &&
            (v = strstr(fields, "\"void_records\":")))
                g_void_restored += atoi(v + 15);
        if (!strcmp(event, "changelog_repaired") && fields &&
            (v = strstr(fields, "\"keys_rewritten\":")))
                g_repaired_keys += atoi(v + 17);
}

START_TEST(alo_changelog_batch_without_marker_is_void) {
        inst_t a, b;
        run_t r;
        mvout_t o;
        static const int ph1[] = {1, 3, 4}, ph2[] = {2};

        mv_produce(ph1, 3);
        inst_open(&a);
        inst_run_to_end(&a, &r);

        /* A again, same store: the markers of its first batch with
         * changelog records fail; A "crashes" */
        mv_produce(ph2, 1);
        cutproc_t c = {.eng = a.proc, .armed = true};
        sg_processor_t cp;
        cut_full_interface(&c, &cp);
        sg_loop_t *loop = NULL;
        c.loopp = &loop;
        run_loop(&cp, &loop, NULL, NULL, &r);
        ck_assert(c.fired);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        ck_assert_uint_ge(r.stats.delivery_failures_total, 1);
        inst_close(&a);
        /* librdkafka may have put several markers in one request: the
         * errors it did not use must not hit B */
        rd_kafka_mock_clear_request_errors(g_mc, 0 /* Produce */);

        /* B, empty store, reads the changelog */
        g_void_restored = g_repaired_keys = 0;
        inst_open(&b);
        sg_loop_t *bl = NULL;
        stopper_t st = {.loopp = &bl};
        end_offsets("in", st.want);
        sg_err_t err;
        char es[512] = "";
        err = sg_loop_new(g_conf, &b.proc, mv_log_cb, &g_logs, NULL, NULL, &bl,
                          es, sizeof(es));
        ck_assert_msg(err == SG_OK, "%s", es);
        pthread_t th;
        pthread_create(&th, NULL, stop_at, &st);
        ck_assert_int_eq(sg_loop_run(bl, es, sizeof(es)), SG_OK);
        pthread_join(th, NULL);
        sg_loop_destroy(bl);
        inst_close(&b);
        ck_assert(atomic_load(&st.reached));

        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        for (int i = 0; i < MV_AGGS; i++)
                ck_assert_msg(o.nvers[i] == 4 && o.vers[i][0] == 1 &&
                                      o.vers[i][1] == 2 && o.vers[i][2] == 3 &&
                                      o.vers[i][3] == 4,
                              "agg-%d: output versions %d %d %d %d (%d "
                              "distinct), want 1 2 3 4",
                              i, o.vers[i][0], o.vers[i][1], o.vers[i][2],
                              o.vers[i][3], o.nvers[i]);
        /* A's attempt reached the output (v2, v3, v4 of every aggregate its
         * cut batch held: all of them unless the fetch split phase 2 over
         * two batches, as on a loaded machine), B judged them again */
        ck_assert_msg(o.dups > 0 && o.dups % 3 == 0 && o.dups <= 3 * MV_AGGS,
                      "%d duplicates, want 3 per aggregate of A's batch",
                      o.dups);
        mvout_t d;
        mv_read("dlq", &d);
        ck_assert_msg(d.total == 0, "%d DLQ records", d.total);
        ck_assert_int_gt(g_void_restored, 0);
        ck_assert_int_gt(g_repaired_keys, 0);
}
END_TEST

/** Changelog records of one partition as the mock holds them: every
 *  (epoch, sequence) of a framed record, and every marker key's. */
typedef struct clscan {
        int64_t framed[256][2], marked[256][2];
        int nframed, nmarked;
} clscan_t;

static bool clscan_has(int64_t (*v)[2], int n, int64_t e, int64_t s) {
        for (int i = 0; i < n; i++)
                if (v[i][0] == e && v[i][1] == s)
                        return true;
        return false;
}

static void clscan_record(void *opaque, const rd_kafka_message_t *m) {
        clscan_t *c = (clscan_t *)opaque + m->partition;
        const unsigned char *k = m->key;
        rd_kafka_headers_t *h = NULL;
        const void *fv = NULL;
        size_t fl = 0;
        if (m->key_len == SG_CHANGELOG_MARKER_LEN &&
            k[0] == SG_CHANGELOG_CONTROL && k[1] == SG_CHANGELOG_MARKER) {
                int64_t e = sg_changelog_u64_get(k + 2),
                        s = sg_changelog_u64_get(k + 10);
                if (!clscan_has(c->marked, c->nmarked, e, s) &&
                    c->nmarked < 256) {
                        c->marked[c->nmarked][0] = e;
                        c->marked[c->nmarked++][1] = s;
                }
                return;
        }
        if (rd_kafka_message_headers(m, &h) ||
            rd_kafka_header_get_last(h, SG_CHANGELOG_HEADER, &fv, &fl) ||
            fl != SG_CHANGELOG_FRAME_LEN)
                return;
        int64_t e = sg_changelog_u64_get(fv),
                s = sg_changelog_u64_get((const unsigned char *)fv + 8);
        if (!clscan_has(c->framed, c->nframed, e, s) && c->nframed < 256) {
                c->framed[c->nframed][0] = e;
                c->framed[c->nframed++][1] = s;
        }
}

/* at_least_once hands a batch's changelog records to the producer right
 * behind its output, before the output is acknowledged: one wait for both
 * (semantics §6). When the output then fails, the changelog holds records
 * of a batch that never completed; the same owner restores before the
 * batch is judged again, and repairs that batch under its own sequence,
 * so that its records and the repair's are one batch, complete only with
 * the repair's marker (under a new sequence, a repair cut short would
 * prove the failed batch complete to any later reader: its dedup records
 * without its output). Every event reaches the output in order, every
 * framed batch in the changelog has its marker, and B, with an empty
 * store, restores A's changelog and drops a redelivery of the batch. */
START_TEST(alo_output_failure_after_changelog_sent_repairs_its_batch) {
        inst_t a, b;
        run_t r;
        mvout_t o;
        static const int ph1[] = {1, 3, 4}, ph2[] = {2};

        mv_produce(ph1, 3);
        inst_open(&a);
        inst_run_to_end(&a, &r); /* v3, v4 park behind the gap */

        /* v2 releases them; the batch's first Produce request fails */
        mv_produce(ph2, 1);
        cutproc_t c = {.eng = a.proc, .fail_output = true};
        sg_processor_t cp;
        cut_full_interface(&c, &cp);
        sg_loop_t *loop = NULL;
        c.loopp = &loop;
        stopper_t st = {.loopp = &loop};
        end_offsets("in", st.want);
        g_void_restored = g_repaired_keys = 0;
        char es[512] = "";
        ck_assert_int_eq(sg_loop_new(g_conf, &cp, mv_log_cb, &g_logs, NULL,
                                     NULL, &loop, es, sizeof(es)),
                         SG_OK);
        pthread_t th;
        pthread_create(&th, NULL, stop_at, &st);
        ck_assert_msg(sg_loop_run(loop, es, sizeof(es)) == SG_OK, "%s", es);
        pthread_join(th, NULL);
        r.stats = *sg_loop_stats(loop);
        sg_loop_destroy(loop);
        ck_assert(atomic_load(&st.reached));
        ck_assert(c.fired);
        ck_assert_uint_ge(r.stats.batches_aborted_total, 1);
        /* the failed batch's changelog records were out: restored as
         * void, rewritten by the repair */
        ck_assert_int_gt(g_void_restored, 0);
        ck_assert_int_gt(g_repaired_keys, 0);
        inst_close(&a);

        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        for (int i = 0; i < MV_AGGS; i++)
                ck_assert_msg(o.nvers[i] == 4 && o.vers[i][0] == 1 &&
                                      o.vers[i][1] == 2 && o.vers[i][2] == 3 &&
                                      o.vers[i][3] == 4,
                              "agg-%d: output versions %d %d %d %d (%d "
                              "distinct), want 1 2 3 4",
                              i, o.vers[i][0], o.vers[i][1], o.vers[i][2],
                              o.vers[i][3], o.nvers[i]);
        int dups_a = o.dups;

        static clscan_t css[NPART];
        memset(css, 0, sizeof(css));
        read_topic("g-in-changelog", clscan_record, css);
        for (int p = 0; p < NPART; p++) {
                const clscan_t cs = css[p];
                ck_assert_int_gt(cs.nmarked, 0);
                for (int i = 0; i < cs.nframed; i++)
                        ck_assert_msg(clscan_has((int64_t(*)[2])cs.marked,
                                                 cs.nmarked, cs.framed[i][0],
                                                 cs.framed[i][1]),
                                      "changelog [%d]: batch (%" PRId64
                                      ", %" PRId64 ") has records and no "
                                      "marker",
                                      p, cs.framed[i][0], cs.framed[i][1]);
        }

        /* B, empty store, restores; v2 delivered again is a duplicate */
        mv_produce(ph2, 1);
        inst_open(&b);
        inst_run_to_end(&b, &r);
        inst_close(&b);
        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        ck_assert_msg(o.dups == dups_a,
                      "%d duplicates after B, %d before: B judged the "
                      "redelivered batch as new",
                      o.dups, dups_a);
        mvout_t d;
        mv_read("dlq", &d);
        ck_assert_msg(d.total == 0, "%d DLQ records", d.total);
}
END_TEST

/* A stop (SIGTERM, sg_loop_stop) while a newly assigned partition is
 * being restored is a clean stop, as a stop between batches is: nothing
 * of that partition was read or committed, the store keeps what the
 * restore checkpointed, and the next owner (or this one's next start)
 * goes on from there. It is not a fatal error: a rolling restart that
 * happens to meet a restore must not exit 1. A later instance restores
 * the partitions and the output holds every version once. */
START_TEST(stop_during_restore_is_a_clean_stop) {
        inst_t a, b, c2;
        run_t r;
        mvout_t o;
        static const int ph1[] = {1, 2, 3};

        mv_produce(ph1, 3);
        inst_open(&a);
        inst_run_to_end(&a, &r);
        inst_close(&a);

        /* B, empty store: stopped at the first changelog record it
         * restores; run_loop asserts sg_loop_run's SG_OK */
        inst_open(&b);
        cutproc_t c = {.eng = b.proc, .stop_in_restore = true};
        sg_processor_t cp;
        cut_full_interface(&c, &cp);
        sg_loop_t *loop = NULL;
        c.loopp = &loop;
        int fatal0 = g_logs.fatal;
        run_loop(&cp, &loop, NULL, NULL, &r);
        ck_assert(c.fired);
        ck_assert_int_eq(g_logs.fatal, fatal0);
        ck_assert_uint_eq(r.stats.records_in_total, 0);
        inst_close(&b);

        /* the next one restores and finds nothing left to do */
        inst_open(&c2);
        inst_run_to_end(&c2, &r);
        inst_close(&c2);
        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        for (int i = 0; i < MV_AGGS; i++)
                ck_assert_msg(o.nvers[i] == 3, "agg-%d: %d versions, want 3", i,
                              o.nvers[i]);
}
END_TEST

/** restore_progress lines, as the log callback got them (parsed). */
#define PROG_MAX 256
static cJSON *g_prog[PROG_MAX];
static int g_prog_n;
static void prog_log_cb(void *opaque, sg_log_level_t level, const char *event,
                        const char *fields) {
        log_cb(opaque, level, event, fields);
        if (!strcmp(event, "restore_progress") && g_prog_n < PROG_MAX)
                g_prog[g_prog_n++] = cJSON_Parse(fields ? fields : "");
}

static double prog_num(const cJSON *o, const char *k) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
        ck_assert_msg(cJSON_IsNumber(v), "restore_progress without %s", k);
        return v->valuedouble;
}

/* A restore that takes longer than stats_interval_ms says how far it is:
 * restore_progress lines (info) with the changelog partition, where the
 * read began and is, the high watermark, the offsets to read in all
 * (total), the records read, their rate and the seconds left (eta). B
 * restores A's changelog with an empty store, slowed to ~2 ms a record,
 * fetching a few records at a time (max.partition.fetch.bytes), with
 * stats_interval_ms 20: every partition's restore outlasts the interval,
 * so each logs at least one line, and every line's numbers agree with
 * each other and with the restore's pace. */
START_TEST(restore_progress_lines_say_how_far) {
        inst_t a, b;
        run_t r;
        static const int ph1[] = {1, 2, 3, 4, 5, 6, 7, 8}, ph2[] = {9};

        /* stats_interval_ms 20 for both; small fetches for B's reads */
        sg_config_destroy(g_conf);
        g_root_extra = ALOS "\"stats_interval_ms\":20,";
        g_conf = conf_parse(g_bs, MV_TOPICS,
                            ",\"session.timeout.ms\":\"6000\","
                            "\"heartbeat.interval.ms\":\"500\","
                            "\"max.partition.fetch.bytes\":\"256\"");
        g_root_extra = ALOS;
        mv_produce(ph1, 8);
        inst_open(&a);
        inst_run_to_end(&a, &r);
        inst_close(&a);

        int64_t hi[NPART];
        end_offsets("g-in-changelog", hi);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_gt(hi[p], 20);

        mv_produce(ph2, 1); /* B has input to read after the restore */
        inst_open(&b);
        cutproc_t c = {.eng = b.proc, .apply_sleep_us = 2000};
        sg_processor_t cp;
        cut_full_interface(&c, &cp);
        sg_loop_t *bl = NULL;
        c.loopp = &bl;
        stopper_t st = {.loopp = &bl};
        end_offsets("in", st.want);
        char es[512] = "";
        g_prog_n = 0;
        ck_assert_int_eq(sg_loop_new(g_conf, &cp, prog_log_cb, &g_logs, NULL,
                                     NULL, &bl, es, sizeof(es)),
                         SG_OK);
        pthread_t th;
        pthread_create(&th, NULL, stop_at, &st);
        ck_assert_msg(sg_loop_run(bl, es, sizeof(es)) == SG_OK, "%s", es);
        pthread_join(th, NULL);
        sg_loop_destroy(bl);
        inst_close(&b);
        ck_assert(atomic_load(&st.reached));

        int lines[NPART] = {0};
        double last_records[NPART] = {0};
        for (int i = 0; i < g_prog_n; i++) {
                const cJSON *o = g_prog[i];
                ck_assert_ptr_nonnull(o);
                const cJSON *cl =
                        cJSON_GetObjectItemCaseSensitive(o, "changelog");
                ck_assert(cJSON_IsString(cl) &&
                          !strcmp(cl->valuestring, "g-in-changelog"));
                int p = (int)prog_num(o, "partition");
                ck_assert(p >= 0 && p < NPART);
                double from = prog_num(o, "from"), off = prog_num(o, "offset");
                double hw = prog_num(o, "high_watermark");
                double total = prog_num(o, "total");
                double recs = prog_num(o, "records");
                double rate = prog_num(o, "records_per_second");
                double eta = prog_num(o, "eta_seconds");
                double pct = prog_num(o, "percent");
                /* B's store is empty: each restore reads its whole log
                 * (and B's own claim, written before it) */
                ck_assert_msg(from == 0 && hw >= (double)hi[p] &&
                                      hw <= (double)hi[p] + 4 &&
                                      total == hw - from,
                              "partition %d: from %.0f, high watermark %.0f "
                              "(want %" PRId64 "), total %.0f",
                              p, from, hw, hi[p], total);
                ck_assert_msg(off > from && off <= hw, "offset %.0f", off);
                ck_assert_msg(recs > 0 && recs <= off - from &&
                                      recs > last_records[p],
                              "records %.0f at offset %.0f (last line %.0f)",
                              recs, off, last_records[p]);
                ck_assert(pct > 0 && pct <= 100);
                /* the pace: one record per 2 ms applied (most records
                 * are; a few are claims and markers) */
                ck_assert_msg(rate > 0 && rate <= 1000, "%.0f records/s", rate);
                /* the offsets left at the pace so far: none left, none */
                ck_assert_msg(eta >= 0 && (off < hw || eta == 0) &&
                                      eta <= (hw - off) / (rate / 2) + 1,
                              "eta %.0f s for %.0f offsets at %.0f records/s",
                              eta, hw - off, rate);
                last_records[p] = recs;
                lines[p]++;
        }
        for (int p = 0; p < NPART; p++)
                ck_assert_msg(lines[p] >= 1,
                              "partition %d: no restore_progress line (%d "
                              "lines in all)",
                              p, g_prog_n);
        for (int i = 0; i < g_prog_n; i++)
                cJSON_Delete(g_prog[i]);
        g_prog_n = 0;
}
END_TEST

/* LMDB fails after a batch's changelog is complete in Kafka (markers
 * acknowledged): the store is behind its changelog. The loop restores the
 * partitions instead of re-reading the batch as new — the changelog holds
 * the batch — so nothing is judged twice into the output, and the store
 * that B rebuilds from the changelog is A's. */
START_TEST(alo_store_behind_changelog_restores) {
        inst_t a, b;
        run_t r;
        mvout_t o;
        static const int ph1[] = {1, 3, 4}, ph2[] = {2};

        mv_produce(ph1, 3);
        inst_open(&a);
        cutproc_t c = {.eng = a.proc, .fail_commit = true};
        sg_processor_t cp;
        cut_full_interface(&c, &cp);
        sg_loop_t *loop = NULL;
        c.loopp = &loop;
        stopper_t st = {.loopp = &loop};
        end_offsets("in", st.want);
        run_loop(&cp, &loop, stop_at, &st, &r);
        ck_assert(atomic_load(&st.reached));
        ck_assert_int_eq(c.commit_fails, 1);
        ck_assert_int_eq(g_logs.store_behind, 1);
        ck_assert_int_eq(g_logs.aborted, 0);
        inst_close(&a);
        mv_read("out", &o);
        ck_assert_int_eq(o.total, MV_AGGS); /* every v1 once */
        ck_assert_int_eq(o.dups, 0);

        mv_produce(ph2, 1);
        inst_open(&b);
        inst_run_to_end(&b, &r);
        inst_close(&b);
        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        ck_assert_int_eq(o.dups, 0);
        for (int i = 0; i < MV_AGGS; i++)
                ck_assert_msg(o.nvers[i] == 4 && o.vers[i][3] == 4,
                              "agg-%d: %d distinct versions", i, o.nvers[i]);
}
END_TEST

/** Stops the loop once "dlq" holds @p want records (or the watchdog). */
typedef struct dlqstop {
        sg_loop_t **loopp;
        int64_t want;
        atomic_bool reached;
} dlqstop_t;

static void *dlq_stop_at(void *a) {
        dlqstop_t *s = a;
        int64_t end = mono_ms() + 35000;
        while (mono_ms() < end) {
                int64_t hi[NPART], n = 0;
                end_offsets("dlq", hi);
                for (int p = 0; p < NPART; p++)
                        n += hi[p];
                if (n >= s->want) {
                        atomic_store(&s->reached, true);
                        break;
                }
                tu_sleep_ms(100);
        }
        sg_loop_stop(*s->loopp);
        return NULL;
}

/** Stops the loop once engine @p eng has @p want events parked. */
typedef struct parkstop {
        sg_loop_t **loopp;
        sg_engine_t *eng;
        int64_t want;
        atomic_bool reached;
} parkstop_t;

static void *park_stop_at(void *a) {
        parkstop_t *s = a;
        int64_t end = mono_ms() + 30000;
        while (mono_ms() < end) {
                if (sg_engine_metrics(s->eng)->parked_events >= s->want) {
                        atomic_store(&s->reached, true);
                        /* the stop's group commit is refused */
                        static rd_kafka_resp_err_t refused[100];
                        for (size_t i = 0; i < 100; i++)
                                refused[i] =
                                        RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE;
                        rd_kafka_mock_push_request_errors_array(
                                g_mc, 8 /* OffsetCommit */, 100, refused);
                        break;
                }
                tu_sleep_ms(100);
        }
        sg_loop_stop(*s->loopp);
        return NULL;
}

/* Semantics §4 "Which clock": a partition whose group offset trails the
 * offset its restored store starts it at (at_least_once: a kill before the
 * group commit) and with nothing after it to read has no consumer
 * position until a record arrives; its place in the log is where reading
 * started, the later of the two. Counting it from the group's offset made
 * it "behind" forever, and its gap deadlines never fired (seen in the
 * at_least_once chaos run: a partition stuck at its committed offset). */
START_TEST(alo_gap_fires_when_group_offset_trails_the_store) {
        inst_t a, b;
        run_t r;
        static const int ph1[] = {1}, ph2[] = {3};
        mv_produce(ph1, 1);
        inst_open(&a);
        inst_run_to_end(&a, &r); /* the group commits v1's offsets */
        int64_t v1_off[NPART], off[NPART];
        committed_offsets(v1_off);
        /* v3 parks; the group commit fails (as if killed before it), the
         * changelog holds the batch */
        mv_produce(ph2, 1);
        int64_t interval = g_conf->commit_interval_ms;
        g_conf->commit_interval_ms = 600000; /* the stop's commit only */
        sg_loop_t *loop = NULL;
        parkstop_t ps = {.loopp = &loop, .eng = a.eng, .want = MV_AGGS};
        run_loop(&a.proc, &loop, park_stop_at, &ps, &r);
        rd_kafka_mock_clear_request_errors(g_mc, 8);
        g_conf->commit_interval_ms = interval;
        ck_assert(atomic_load(&ps.reached));
        inst_close(&a);
        committed_offsets(off);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_eq(off[p], v1_off[p]);

        for (size_t i = 0; i < g_conf->topic_cnt; i++)
                g_conf->topics[i].gap_timeout_ms = 1000;
        inst_open(&b);
        dlqstop_t st = {.loopp = &loop, .want = MV_AGGS};
        run_loop(&b.proc, &loop, dlq_stop_at, &st, &r);
        inst_close(&b);
        ck_assert_msg(atomic_load(&st.reached),
                      "no gap_timeout in 35 s: the partitions counted as "
                      "behind their log");
}
END_TEST

/** Records in "dlq" (all partitions; at_least_once: no markers). */
static int64_t dlq_records(void) {
        int64_t hi[NPART], n = 0;
        end_offsets("dlq", hi);
        for (int p = 0; p < NPART; p++)
                n += hi[p];
        return n;
}

/* kafka.h sg_loop_set_log_level(): a DLQ record's "dlq" line is at debug;
 * with the loop's level at info it is not built (one line per refused
 * record was most of the loop thread's CPU in a stream of refusals), with
 * no level set every line goes to the callback as before. */
START_TEST(dlq_line_only_when_debug_is_kept) {
        inst_t a;
        run_t r;
        static const int v1[] = {1}, stale[] = {0};
        mv_produce(v1, 1);
        mv_produce(stale, 1); /* below the first version: DLQ */
        inst_open(&a);
        g_log_level = SG_LOG_INFO;
        inst_run_to_end(&a, &r);
        g_log_level = 0;
        ck_assert_int_eq(dlq_records(), MV_AGGS);
        ck_assert_int_eq(g_logs.dlq_lines, 0);

        /* other stale events (new ids), no level set */
        mv_produce_tag(stale, 1, "b");
        inst_run_to_end(&a, &r);
        inst_close(&a);
        ck_assert_int_eq(dlq_records(), 2 * MV_AGGS);
        ck_assert_int_eq(g_logs.dlq_lines, MV_AGGS);
}
END_TEST

/* The claim's generation check re-commits the group's committed offsets:
 * when they could not be read, it must not commit anything else in their
 * place (the log start would move the group back to the beginning). Here
 * the offset fetch fails (the mock refuses it once): the assignment fails
 * and the group's offsets stay where they were. */
START_TEST(alo_claim_never_moves_unknown_offsets) {
        inst_t a;
        run_t r;
        static const int ph1[] = {1, 2};
        mv_produce(ph1, 2);
        inst_open(&a);
        inst_run_to_end(&a, &r);
        int64_t before[NPART], after[NPART];
        committed_offsets(before);
        for (int p = 0; p < NPART; p++)
                ck_assert_int_gt(before[p], 0);

        rd_kafka_mock_push_request_errors(
                g_mc, 9 /* OffsetFetch */, 1,
                RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED);
        char es[512] = "";
        sg_loop_t *loop = NULL;
        ck_assert_int_eq(sg_loop_new(g_conf, &a.proc, log_cb, &g_logs, NULL,
                                     NULL, &loop, es, sizeof(es)),
                         SG_OK);
        watchdog_t w = {.loop = loop};
        pthread_create(&w.th, NULL, watchdog_main, &w);
        sg_err_t rc = sg_loop_run(loop, es, sizeof(es));
        atomic_store(&w.done, true);
        pthread_join(w.th, NULL);
        sg_loop_destroy(loop);
        inst_close(&a);
        rd_kafka_mock_clear_request_errors(g_mc, 9);
        committed_offsets(after);
        for (int p = 0; p < NPART; p++)
                ck_assert_msg(after[p] == before[p],
                              "partition %d: committed %" PRId64
                              " before, %" PRId64
                              " after the failed offset fetch",
                              p, before[p], after[p]);
        ck_assert_msg(rc == SG_ERR_FATAL && !atomic_load(&w.fired),
                      "rc %s (%s)", sg_err2str(rc), es);
}
END_TEST

/* A zombie: after B took the partitions over from A (a newer epoch
 * confirmed on each changelog partition), copies of A's changelog records
 * are appended — what A, stalled past its session and then resumed, could
 * still write. They carry A's epoch: C (empty store) must skip them (its
 * restore counts them void) and rewrite their keys; A's aggregates must
 * not fall back to v1 with v3, v4 parked (v5 would park behind them). */
START_TEST(alo_zombie_changelog_records_are_void) {
        inst_t a, b, cc;
        run_t r;
        mvout_t o;
        static const int ph1[] = {1, 3, 4}, ph2[] = {2}, ph3[] = {5};

        mv_produce(ph1, 3);
        inst_open(&a);
        inst_run_to_end(&a, &r);
        inst_close(&a);
        mv_produce(ph2, 1);
        inst_open(&b);
        inst_run_to_end(&b, &r);
        inst_close(&b);

        /* the zombie's writes: A's records again, A's epoch (the first one
         * framed in each changelog partition) */
        rd_kafka_t *rc = client_new(RD_KAFKA_CONSUMER, "verify", false);
        rd_kafka_t *pr = client_new(RD_KAFKA_PRODUCER, NULL, true);
        int64_t hi[NPART], pos[NPART] = {0}, first_epoch[NPART];
        int copies = 0;
        end_offsets("g-in-changelog", hi);
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(NPART);
        for (int p = 0; p < NPART; p++) {
                rd_kafka_topic_partition_list_add(l, "g-in-changelog", p)
                        ->offset = RD_KAFKA_OFFSET_BEGINNING;
                first_epoch[p] = -1;
        }
        ck_assert_int_eq(rd_kafka_assign(rc, l), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_topic_partition_list_destroy(l);
        int64_t deadline = mono_ms() + 20000;
        for (;;) {
                bool done = true;
                for (int p = 0; p < NPART; p++)
                        done = done && pos[p] >= hi[p];
                if (done || mono_ms() > deadline)
                        break;
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rc, 500);
                if (!m)
                        continue;
                if (m->err || m->partition < 0 || m->partition >= NPART ||
                    m->offset >= hi[m->partition]) {
                        rd_kafka_message_destroy(m);
                        continue;
                }
                pos[m->partition] = m->offset + 1;
                rd_kafka_headers_t *h = NULL;
                const void *fv;
                size_t fl;
                if (!rd_kafka_message_headers(m, &h) &&
                    !rd_kafka_header_get_last(h, SG_CHANGELOG_HEADER, &fv,
                                              &fl) &&
                    fl == SG_CHANGELOG_FRAME_LEN) {
                        int64_t ep = sg_changelog_u64_get(fv);
                        if (first_epoch[m->partition] < 0)
                                first_epoch[m->partition] = ep;
                        if (ep == first_epoch[m->partition]) {
                                ck_assert_int_eq(
                                        rd_kafka_producev(
                                                pr,
                                                RD_KAFKA_V_TOPIC(
                                                        "g-in-changelog"),
                                                RD_KAFKA_V_PARTITION(
                                                        m->partition),
                                                RD_KAFKA_V_KEY(m->key,
                                                               m->key_len),
                                                RD_KAFKA_V_VALUE(m->payload,
                                                                 m->len),
                                                RD_KAFKA_V_MSGFLAGS(
                                                        RD_KAFKA_MSG_F_COPY),
                                                RD_KAFKA_V_HEADER(
                                                        SG_CHANGELOG_HEADER, fv,
                                                        (ssize_t)fl),
                                                RD_KAFKA_V_END),
                                        RD_KAFKA_RESP_ERR_NO_ERROR);
                                copies++;
                        }
                }
                rd_kafka_message_destroy(m);
        }
        ck_assert_int_eq(rd_kafka_flush(pr, 15000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(pr);
        rd_kafka_destroy(rc);
        ck_assert_int_gt(copies, MV_AGGS); /* dedup, agg, parked records */

        /* C, empty store */
        g_void_restored = g_repaired_keys = 0;
        mv_produce(ph3, 1);
        inst_open(&cc);
        sg_loop_t *cl = NULL;
        stopper_t st = {.loopp = &cl};
        end_offsets("in", st.want);
        char es[512] = "";
        ck_assert_int_eq(sg_loop_new(g_conf, &cc.proc, mv_log_cb, &g_logs, NULL,
                                     NULL, &cl, es, sizeof(es)),
                         SG_OK);
        pthread_t th;
        pthread_create(&th, NULL, stop_at, &st);
        ck_assert_int_eq(sg_loop_run(cl, es, sizeof(es)), SG_OK);
        pthread_join(th, NULL);
        sg_loop_destroy(cl);
        inst_close(&cc);
        ck_assert(atomic_load(&st.reached));

        mv_read("out", &o);
        ck_assert_int_eq(o.bad, 0);
        for (int i = 0; i < MV_AGGS; i++)
                ck_assert_msg(o.nvers[i] == 5 && o.vers[i][3] == 4 &&
                                      o.vers[i][4] == 5,
                              "agg-%d: %d distinct versions (last %d), want "
                              "1..5",
                              i, o.nvers[i], o.vers[i][o.nvers[i] - 1]);
        mvout_t d;
        mv_read("dlq", &d);
        ck_assert_msg(d.total == 0, "%d DLQ records", d.total);
        /* C skipped every copy and rewrote their keys */
        ck_assert_int_eq(g_void_restored, copies);
        ck_assert_int_gt(g_repaired_keys, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("kafka_rebalance");

        TCase *tm = tcase_create("at_least_once_move");
        tcase_add_checked_fixture(tm, mv_setup, mock_teardown);
        tcase_set_timeout(tm, 120);
        add(tm, alo_partition_moves_with_parked_events);
        add(tm, alo_changelog_batch_without_marker_is_void);
        add(tm, alo_output_failure_after_changelog_sent_repairs_its_batch);
        add(tm, alo_zombie_changelog_records_are_void);
        add(tm, alo_store_behind_changelog_restores);
        suite_add_tcase(s, tm);

        /* a second case set, so that meson can run the two halves side by
         * side (tests/unit/meson.build, CK_RUN_CASE) */
        tm = tcase_create("restart_and_restore");
        tcase_add_checked_fixture(tm, mv_setup, mock_teardown);
        tcase_set_timeout(tm, 120);
        add(tm, alo_gap_fires_when_group_offset_trails_the_store);
        add(tm, dlq_line_only_when_debug_is_kept);
        add(tm, alo_claim_never_moves_unknown_offsets);
        add(tm, stop_during_restore_is_a_clean_stop);
        add(tm, restore_progress_lines_say_how_far);
        suite_add_tcase(s, tm);

        return tu_run_suite(s);
}
