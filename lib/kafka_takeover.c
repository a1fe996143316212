/*
 * kafka_takeover.c — the Kafka loop (kafka.h): taking over from a dead
 * owner (exactly_once; semantics §6 "Taking over from a dead owner").
 *
 * Write side: the first record a transaction writes to each changelog
 * partition names its writer (kafka_changelog.h "The writer of a
 * transaction"). Read side: a restore that stops at an open transaction,
 * or an assignment whose committed offsets that transaction still holds
 * (KIP-447; on_assign waits for them before the restore), reads that
 * record read_uncommitted, asks the group coordinator who is
 * still a member (rd_kafka_list_groups: DescribeGroups; the Admin API's
 * DescribeConsumerGroups aborts librdkafka 2.0.2 when a broker restarts,
 * kafka_standby.c), lets takeover.h judge, and ends a dead owner's
 * transaction by init_transactions under its transactional id — what the
 * dead owner's own restart would have done (KIP-98), without waiting for
 * transaction.timeout.ms and the coordinator's abort check.
 */
#include "kafka_int.h"
#include "takeover.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A changelog partition the open transaction named its writer in. */
struct sg_txn_tag {
        const char *topic; /* the effect's (the configuration's) string */
        int32_t partition;
};

/* The peek's and the description's bounds (round trips on a live
 * cluster: milliseconds) and the fence's (the coordinator aborts the
 * open transaction, writes its markers, then answers). */
#define SG_TAKEOVER_PEEK_MS 5000
#define SG_TAKEOVER_DESCRIBE_MS 5000
#define SG_TAKEOVER_FENCE_MAX_MS 30000

bool sg_loop_txn_tag_first(sg_loop_t *loop, const char *topic,
                           int32_t partition) {
        for (size_t i = 0; i < loop->txn_tag_cnt; i++) {
                const struct sg_txn_tag *t = &loop->txn_tags[i];
                if (t->partition == partition &&
                    (t->topic == topic || !strcmp(t->topic, topic)))
                        return false;
        }
        if (loop->txn_tag_cnt == loop->txn_tag_cap) {
                size_t cap = loop->txn_tag_cap ? 2 * loop->txn_tag_cap : 16;
                struct sg_txn_tag *n =
                        realloc(loop->txn_tags, cap * sizeof(*n));
                if (!n)
                        return false;
                loop->txn_tags = n;
                loop->txn_tag_cap = cap;
        }
        loop->txn_tags[loop->txn_tag_cnt++] =
                (struct sg_txn_tag){topic, partition};
        return true;
}

void sg_loop_writer_headers_add(sg_loop_t *loop, rd_kafka_headers_t *h) {
        if (!loop->member_id && loop->consumer)
                loop->member_id = rd_kafka_memberid(loop->consumer);
        rd_kafka_header_add(h, SG_CHANGELOG_WRITER_TXID_HEADER, -1, loop->txid,
                            -1);
        if (loop->member_id && loop->member_id[0])
                rd_kafka_header_add(h, SG_CHANGELOG_WRITER_MEMBER_HEADER, -1,
                                    loop->member_id, -1);
}

void sg_loop_takeover_destroy(sg_loop_t *loop) {
        free(loop->txn_tags);
        loop->txn_tags = NULL;
        loop->txn_tag_cnt = loop->txn_tag_cap = 0;
        if (loop->member_id)
                rd_kafka_mem_free(NULL, loop->member_id);
        loop->member_id = NULL;
}

/* What the record at the last stable offset says of its writer. */
typedef struct takeover_writer {
        char txid[512];
        size_t txid_len;
        char member[512];
        size_t member_len;
        int64_t offset; /* the record's, -1: none read */
} takeover_writer_t;

static void header_copy(rd_kafka_headers_t *h, const char *name, char *out,
                        size_t size, size_t *lenp) {
        const void *v = NULL;
        size_t n = 0;
        *lenp = 0;
        out[0] = '\0';
        if (h && !rd_kafka_header_get_last(h, name, &v, &n) && v && n < size) {
                memcpy(out, v, n);
                out[n] = '\0';
                *lenp = n;
        }
}

/** A client of the takeover's own, into *rkp: the loop's configuration
 *  for @p client with property @p name set to @p value. Its log lines are
 *  queued, never served (it lives for a few round trips; what fails is
 *  in errstr, and takeover_waiting says it). */
static sg_err_t takeover_client(sg_loop_t *loop, sg_kafka_client_t client,
                                const char *name, const char *value,
                                rd_kafka_t **rkp, char *errstr,
                                size_t errstr_size) {
        rd_kafka_conf_t *kc;
        sg_err_t err =
                sg_kafka_conf_new(loop->conf, client, loop->restore_group,
                                  &loop->klog, &kc, errstr, errstr_size);
        char es[512];
        if (!err && rd_kafka_conf_set(kc, name, value, es, sizeof(es)) !=
                            RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "%s", es);
                err = SG_ERR_CONFIG;
        }
        if (err)
                return err;
        bool reader = client == SG_KAFKA_READER;
        rd_kafka_t *rk =
                rd_kafka_new(reader ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, kc,
                             es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "creating a %s: %s",
                        reader ? "reader" : "producer", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_set_log_queue(rk, NULL);
        if (reader)
                rd_kafka_poll_set_consumer(rk);
        *rkp = rk;
        return SG_OK;
}

/** A read_uncommitted reader of the takeover's own, into *rkp (the
 *  caller's to close and destroy: takeover_reader_destroy). */
static sg_err_t takeover_reader(sg_loop_t *loop, rd_kafka_t **rkp, char *errstr,
                                size_t errstr_size) {
        return takeover_client(loop, SG_KAFKA_READER, "isolation.level",
                               "read_uncommitted", rkp, errstr, errstr_size);
}

static void takeover_reader_destroy(rd_kafka_t *rk) {
        if (rk) {
                rd_kafka_consumer_close(rk);
                rd_kafka_destroy(rk);
        }
}

/** Step 1: the first record at or after @p lso of @p changelog
 *  [@p partition], read_uncommitted by @p rk (takeover_reader), into *w. */
static sg_err_t takeover_peek(sg_loop_t *loop, rd_kafka_t *rk,
                              const char *changelog, int32_t partition,
                              int64_t lso, takeover_writer_t *w, char *errstr,
                              size_t errstr_size) {
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, changelog, partition)->offset =
                lso;
        rd_kafka_resp_err_t e = rd_kafka_assign(rk, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                sg_errf(errstr, errstr_size, "assign: %s", rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        int64_t deadline = sg_clock_mono_ms() + SG_TAKEOVER_PEEK_MS;
        while (w->offset < 0 && sg_clock_mono_ms() < deadline && !loop->stop) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                /* the reader may have read another partition before */
                if (m->partition != partition || !m->rkt ||
                    strcmp(rd_kafka_topic_name(m->rkt), changelog)) {
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (!m->err && m->offset >= lso) {
                        rd_kafka_headers_t *h = NULL;
                        if (rd_kafka_message_headers(m, &h))
                                h = NULL;
                        header_copy(h, SG_CHANGELOG_WRITER_TXID_HEADER, w->txid,
                                    sizeof(w->txid), &w->txid_len);
                        header_copy(h, SG_CHANGELOG_WRITER_MEMBER_HEADER,
                                    w->member, sizeof(w->member),
                                    &w->member_len);
                        w->offset = m->offset;
                } else if (m->err &&
                           m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        sg_errf(errstr, errstr_size,
                                "reading offset %" PRId64 ": %s", lso,
                                rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        return SG_ERR_KAFKA;
                }
                rd_kafka_message_destroy(m);
        }
        if (w->offset < 0) {
                sg_errf(errstr, errstr_size,
                        "no record at offset %" PRId64 " within %d ms", lso,
                        SG_TAKEOVER_PEEK_MS);
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

/** Step 2: the member ids of the group as its coordinator describes it
 *  now, through @p rk; *membersp (the caller frees each and the array). */
static sg_err_t takeover_members(sg_loop_t *loop, rd_kafka_t *rk,
                                 char ***membersp, size_t *cntp, char *errstr,
                                 size_t errstr_size) {
        const struct rd_kafka_group_list *gl = NULL;
        *membersp = NULL;
        *cntp = 0;
        rd_kafka_resp_err_t e = rd_kafka_list_groups(
                rk, loop->conf->group_id, &gl, SG_TAKEOVER_DESCRIBE_MS);
        if (e || !gl) {
                sg_errf(errstr, errstr_size, "describing group %s: %s",
                        loop->conf->group_id, rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        sg_err_t err = SG_OK;
        bool found = false;
        for (int g = 0; g < gl->group_cnt && !found; g++) {
                const struct rd_kafka_group_info *gi = &gl->groups[g];
                if (strcmp(gi->group, loop->conf->group_id))
                        continue;
                found = true;
                if (gi->err) {
                        sg_errf(errstr, errstr_size, "describing group %s: %s",
                                loop->conf->group_id,
                                rd_kafka_err2str(gi->err));
                        err = SG_ERR_KAFKA;
                        break;
                }
                char **m = calloc((size_t)gi->member_cnt + 1, sizeof(*m));
                if (!m) {
                        sg_errf(errstr, errstr_size, "out of memory");
                        err = SG_ERR_NOMEM;
                        break;
                }
                for (int i = 0; i < gi->member_cnt; i++)
                        if (!(m[i] = strdup(gi->members[i].member_id)))
                                err = SG_ERR_NOMEM;
                *membersp = m;
                *cntp = (size_t)gi->member_cnt;
        }
        rd_kafka_group_list_destroy(gl);
        if (!found && !err) {
                /* never "no members": that would fence a live writer */
                sg_errf(errstr, errstr_size,
                        "describing group %s: not in the answer",
                        loop->conf->group_id);
                return SG_ERR_KAFKA;
        }
        if (err == SG_ERR_NOMEM)
                sg_errf(errstr, errstr_size, "out of memory");
        return err;
}

/** Step 3: init_transactions under transactional id @p txid: the
 *  coordinator aborts its open transaction and bumps its epoch. */
static sg_err_t takeover_fence(sg_loop_t *loop, const char *txid, char *errstr,
                               size_t errstr_size) {
        rd_kafka_t *rk = NULL;
        sg_err_t err =
                takeover_client(loop, SG_KAFKA_TXN_PRODUCER, "transactional.id",
                                txid, &rk, errstr, errstr_size);
        if (err)
                return err;
        rd_kafka_error_t *e =
                rd_kafka_init_transactions(rk, SG_TAKEOVER_FENCE_MAX_MS);
        if (e) {
                sg_errf(errstr, errstr_size, "init_transactions: %s",
                        rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                err = SG_ERR_KAFKA;
        }
        rd_kafka_destroy(rk);
        return err;
}

/** sg_loop_takeover through the reader @p rk (takeover_reader; NULL:
 *  creating it failed with @p rk_err, @p rk_es); @p trigger: what waited
 *  at the transaction, for the log ("restore", "committed_offsets"). */
static bool takeover_run(sg_loop_t *loop, rd_kafka_t *rk, sg_err_t rk_err,
                         const char *rk_es, const char *changelog,
                         int32_t partition, int64_t lso, int64_t waited_ms,
                         const char *trigger) {
        int64_t t0 = sg_clock_mono_ms();
        char es[512] = "";
        takeover_writer_t w = {.offset = -1};
        char **members = NULL;
        size_t member_cnt = 0;
        sg_takeover_verdict_t v = SG_TAKEOVER_MEMBERS_UNKNOWN;
        sg_err_t err = rk_err;
        if (err)
                sg_errf(es, sizeof(es), "%s", rk_es);
        else
                err = takeover_peek(loop, rk, changelog, partition, lso, &w, es,
                                    sizeof(es));
        const char *step = "reading the transaction's first record";
        if (!err) {
                v = sg_takeover_judge(w.txid, w.txid_len, w.member,
                                      w.member_len, loop->txid, NULL, 0, false);
                if (v == SG_TAKEOVER_MEMBERS_UNKNOWN) {
                        step = "describing the group";
                        bool known =
                                !takeover_members(loop, rk, &members,
                                                  &member_cnt, es, sizeof(es));
                        v = sg_takeover_judge(w.txid, w.txid_len, w.member,
                                              w.member_len, loop->txid,
                                              (const char *const *)members,
                                              member_cnt, known);
                }
        }
        for (size_t i = 0; i < member_cnt; i++)
                free(members[i]);
        free(members);
        if (!err && v == SG_TAKEOVER_FENCE) {
                step = "fencing";
                err = takeover_fence(loop, w.txid, es, sizeof(es));
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "trigger", trigger);
        cJSON_AddStringToObject(f, "changelog", changelog);
        cJSON_AddNumberToObject(f, "partition", partition);
        cJSON_AddNumberToObject(f, "stable_offset", (double)lso);
        if (w.txid_len)
                cJSON_AddStringToObject(f, "transactional_id", w.txid);
        if (w.member_len)
                cJSON_AddStringToObject(f, "member_id", w.member);
        cJSON_AddNumberToObject(f, "waited_ms", (double)waited_ms);
        cJSON_AddNumberToObject(f, "ms", (double)(sg_clock_mono_ms() - t0));
        if (!err && v == SG_TAKEOVER_FENCE) {
                loop->stats.takeover_fences_total++;
                sg_loop_log(loop, SG_LOG_NOTICE, "takeover_fenced", f);
                return true;
        }
        if (err) {
                cJSON_AddStringToObject(f, "during", step);
                cJSON_AddStringToObject(f, "error", es);
        } else {
                cJSON_AddStringToObject(f, "verdict",
                                        sg_takeover_verdict_name(v));
        }
        cJSON_AddStringToObject(f, "detail",
                                "waiting for the transaction coordinator to "
                                "end the transaction (transaction.timeout.ms)");
        sg_loop_log(loop, err ? SG_LOG_WARNING : SG_LOG_NOTICE,
                    "takeover_waiting", f);
        return false;
}

bool sg_loop_takeover(sg_loop_t *loop, const char *changelog, int32_t partition,
                      int64_t lso, int64_t waited_ms) {
        char es[512] = "";
        rd_kafka_t *rk = NULL;
        sg_err_t err = takeover_reader(loop, &rk, es, sizeof(es));
        bool fenced = takeover_run(loop, rk, err, es, changelog, partition, lso,
                                   waited_ms, "restore");
        takeover_reader_destroy(rk);
        return fenced;
}

bool sg_loop_takeover_pending(sg_loop_t *loop,
                              const rd_kafka_topic_partition_list_t *parts,
                              int64_t waited_ms) {
        char es[512] = "";
        rd_kafka_t *rk = NULL;
        bool fenced = false;
        int open = 0;
        const char *step = "creating a reader";
        sg_err_t err = loop->restorer
                               ? takeover_reader(loop, &rk, es, sizeof(es))
                               : SG_OK;
        for (int i = 0; rk && i < parts->cnt && !loop->stop; i++) {
                const sg_topic_config_t *tc =
                        sg_config_topic(loop->conf, parts->elems[i].topic);
                int32_t p = parts->elems[i].partition;
                if (!tc || !tc->changelog_topic)
                        continue;
                /* the last stable offset (the restore consumer reads
                 * read_committed: ListOffsets answers it) and the high
                 * watermark (read_uncommitted) */
                int64_t lo = -1, lso = -1, hw = -1;
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
                        loop->restorer, tc->changelog_topic, p, &lo, &lso,
                        SG_TAKEOVER_PEEK_MS);
                if (!e)
                        e = rd_kafka_query_watermark_offsets(
                                rk, tc->changelog_topic, p, &lo, &hw,
                                SG_TAKEOVER_PEEK_MS);
                if (e) {
                        /* the others may still name the writer */
                        step = "reading the changelog's offsets";
                        sg_errf(es, sizeof(es),
                                "changelog %s [%" PRId32 "]: %s",
                                tc->changelog_topic, p, rd_kafka_err2str(e));
                        err = SG_ERR_KAFKA;
                        continue;
                }
                if (lso < 0 || lso >= hw)
                        continue; /* no open transaction there */
                open++;
                if (takeover_run(loop, rk, SG_OK, NULL, tc->changelog_topic, p,
                                 lso, waited_ms, "committed_offsets"))
                        fenced = true;
        }
        takeover_reader_destroy(rk);
        if (open)
                return fenced; /* each partition logged its outcome */
        cJSON *f = sg_kafka_parts_json(parts);
        cJSON_AddStringToObject(f, "trigger", "committed_offsets");
        cJSON_AddNumberToObject(f, "waited_ms", (double)waited_ms);
        if (err) {
                cJSON_AddStringToObject(f, "during", step);
                cJSON_AddStringToObject(f, "error", es);
        }
        cJSON_AddStringToObject(
                f, "detail",
                err ? "waiting for the transaction coordinator to end the "
                      "transaction (transaction.timeout.ms)"
                    : "no changelog partition of these partitions holds an "
                      "open transaction to name its writer (it wrote to "
                      "partitions another member was assigned, or to no "
                      "changelog); waiting for that member's takeover or "
                      "the transaction coordinator (transaction.timeout.ms)");
        sg_loop_log(loop, err ? SG_LOG_WARNING : SG_LOG_NOTICE,
                    "takeover_waiting", f);
        return false;
}
