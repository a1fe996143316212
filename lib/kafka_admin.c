/*
 * kafka_admin.c — the Kafka loop (kafka.h): topic administration.
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rd_kafka_metadata_topic_t *md_topic(const rd_kafka_metadata_t *md,
                                                 const char *name) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, name))
                        return md->topics[i].err ? NULL : &md->topics[i];
        return NULL;
}

/** The metadata error of topic @p name: its own error, or
 *  UNKNOWN_TOPIC_OR_PART when the cluster does not list it. */
static rd_kafka_resp_err_t md_topic_err(const rd_kafka_metadata_t *md,
                                        const char *name) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, name))
                        return md->topics[i].err;
        return RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
}

/**
 * Reads the cluster's metadata (all topics) into *mdp, retrying retriable
 * errors (sg_retry_t). @returns SG_OK or SG_ERR_KAFKA (errstr says why).
 */
static sg_err_t loop_metadata(sg_loop_t *loop, rd_kafka_t *rk,
                              const rd_kafka_metadata_t **mdp, char *errstr,
                              size_t errstr_size) {
        sg_retry_t r;
        sg_retry_init(&r, "metadata");
        for (;;) {
                rd_kafka_resp_err_t e = rd_kafka_metadata(
                        rk, 1, NULL, mdp, SG_METADATA_TIMEOUT_MS);
                if (!e)
                        return SG_OK;
                bool gave_up = false;
                if (sg_retry_again(loop, &r, e, false,
                                   "reading cluster metadata", &gave_up))
                        continue;
                sg_errf(errstr, errstr_size, "reading cluster metadata: %s%s",
                        rd_kafka_err2str(e),
                        gave_up ? " (retriable; retried for "
                                  "broker_retry_timeout_ms)"
                                : "");
                return SG_ERR_KAFKA;
        }
}

/**
 * The metadata error of topic @p name asked for alone. A listing of all
 * topics leaves out those the principal may not describe, so a topic it
 * lacks an ACL for looks absent there; asked for by name, the broker says
 * TOPIC_AUTHORIZATION_FAILED (whether the topic exists or not). Asked
 * through the consumer, which never creates topics
 * (allow.auto.create.topics false).
 */
static rd_kafka_resp_err_t topic_probe(sg_loop_t *loop, const char *name) {
        rd_kafka_t *rk = loop->consumer ? loop->consumer : loop->producer;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, name, NULL);
        const rd_kafka_metadata_t *md = NULL;
        if (!rkt)
                return RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        rd_kafka_resp_err_t e =
                rd_kafka_metadata(rk, 0, rkt, &md, SG_METADATA_TIMEOUT_MS);
        if (!e)
                e = md_topic_err(md, name);
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        return e;
}

/**
 * One pass of the start-up topic checks (semantics §5): every topic seqgate
 * reads or writes exists; partition counts fit. A topic whose metadata
 * carries a retriable error (a leader being elected) sets *retryp to that
 * error and returns SG_ERR_KAFKA; a missing topic or another topic error is
 * SG_ERR_CONFIG (exit 2).
 */
static sg_err_t check_topics_once(sg_loop_t *loop, rd_kafka_resp_err_t *retryp,
                                  char *errstr, size_t errstr_size) {
        const rd_kafka_metadata_t *md;
        sg_err_t err =
                loop_metadata(loop, loop->producer, &md, errstr, errstr_size);
        if (err)
                return err;
        *retryp = RD_KAFKA_RESP_ERR_NO_ERROR;
        for (size_t i = 0; !err && i < loop->conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &loop->conf->topics[i];
                const char *names[5] = {tc->name, tc->output_topic,
                                        tc->dlq_topic, NULL, NULL};
                const char *roles[5] = {"input", "output", "DLQ",
                                        "snapshot request", "snapshot reply"};
                /* what seqgate does with each (an ACL must allow it) */
                static const char *const ops[5] = {"Read", "Write", "Write",
                                                   "Write", "Read"};
                if (tc->snapshot.source == SG_SNAP_KAFKA) {
                        names[3] = tc->snapshot.request_topic
                                           ? tc->snapshot.request_topic
                                           : "(none)";
                        names[4] = tc->snapshot.reply_topic
                                           ? tc->snapshot.reply_topic
                                           : "(none)";
                }
                const rd_kafka_metadata_topic_t *mt[5] = {NULL};
                for (int k = 0; !err && k < 5; k++) {
                        if (!names[k] || (mt[k] = md_topic(md, names[k])))
                                continue;
                        rd_kafka_resp_err_t te = md_topic_err(md, names[k]);
                        char what[320], acl[640];
                        if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                                te = topic_probe(loop, names[k]);
                        snprintf(what, sizeof(what), "topic \"%s\"", names[k]);
                        if (sg_kafka_unauthorized(loop->consumer, te, ops[k],
                                                  what, acl, sizeof(acl))) {
                                if (k == 0)
                                        sg_errf(errstr, errstr_size,
                                                "input topic \"%s\": %s",
                                                names[k], acl);
                                else
                                        sg_errf(errstr, errstr_size,
                                                "topic \"%s\" (%s topic of "
                                                "input topic \"%s\"): %s",
                                                names[k], roles[k], tc->name,
                                                acl);
                                err = SG_ERR_CONFIG;
                        } else if (sg_kafka_err_retriable(te, false)) {
                                *retryp = te;
                                sg_errf(errstr, errstr_size,
                                        "topic \"%s\" (%s topic of input "
                                        "topic \"%s\"): %s",
                                        names[k], roles[k], tc->name,
                                        rd_kafka_err2str(te));
                                err = SG_ERR_KAFKA;
                        } else if (te ==
                                   RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                                sg_errf(errstr, errstr_size,
                                        k < 3 ? "topic \"%s\" (%s of input "
                                                "topic \"%s\") does not exist"
                                              : "topic \"%s\" (%s topic of "
                                                "input topic \"%s\") does not "
                                                "exist",
                                        names[k], roles[k], tc->name);
                                err = SG_ERR_CONFIG;
                        } else {
                                sg_errf(errstr, errstr_size,
                                        "topic \"%s\" (%s topic of input "
                                        "topic \"%s\"): %s",
                                        names[k], roles[k], tc->name,
                                        rd_kafka_err2str(te));
                                err = SG_ERR_CONFIG;
                        }
                }
                if (!err && tc->output_partitioning == SG_PART_INPUT &&
                    mt[1]->partition_cnt < mt[0]->partition_cnt) {
                        sg_errf(errstr, errstr_size,
                                "output topic \"%s\" has %d partition(s), "
                                "fewer than input topic \"%s\" (%d); "
                                "output_partitioning \"input\" needs at "
                                "least as many (semantics §5)",
                                tc->output_topic, mt[1]->partition_cnt,
                                tc->name, mt[0]->partition_cnt);
                        err = SG_ERR_CONFIG;
                }
        }
        rd_kafka_metadata_destroy(md);
        return err;
}

/* One pass of a start-up step: sets *retryp to a retriable error it met
 * (SG_ERR_KAFKA then), or NO_ERROR. */
typedef sg_err_t(admin_pass_fn)(sg_loop_t *loop, rd_kafka_resp_err_t *retryp,
                                char *errstr, size_t errstr_size);

/* Runs @p pass again while it fails with a retriable error (sg_retry_t,
 * @p during names it; @p topic_exists: sg_retry_again's). */
static sg_err_t admin_retry(sg_loop_t *loop, admin_pass_fn *pass,
                            const char *during, bool topic_exists, char *errstr,
                            size_t errstr_size) {
        sg_retry_t r;
        sg_retry_init(&r, during);
        for (;;) {
                rd_kafka_resp_err_t code;
                char es[512] = "";
                sg_err_t err = pass(loop, &code, es, sizeof(es));
                bool gave_up = false;
                if (err == SG_ERR_KAFKA && code &&
                    sg_retry_again(loop, &r, code, topic_exists, es, &gave_up))
                        continue;
                sg_errf(errstr, errstr_size, "%s%s", es,
                        gave_up ? " (retriable; retried for "
                                  "broker_retry_timeout_ms)"
                                : "");
                return err;
        }
}

/** Start-up checks: topics exist; partition counts fit (semantics §5).
 *  A retriable topic error is retried (sg_retry_t). */
sg_err_t sg_loop_check_topics(sg_loop_t *loop, char *errstr,
                              size_t errstr_size) {
        return admin_retry(loop, check_topics_once, "topic check", false,
                           errstr, errstr_size);
}

#define SG_ADMIN_TIMEOUT_MS 30000

/** Waits for the admin result of type @p type on @p q. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q,
                                    rd_kafka_event_type_t type) {
        int64_t deadline = sg_clock_mono_ms() + SG_ADMIN_TIMEOUT_MS + 5000;
        while (sg_clock_mono_ms() < deadline) {
                rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 1000);
                if (!ev)
                        continue;
                if (rd_kafka_event_type(ev) == type)
                        return ev;
                rd_kafka_event_destroy(ev);
        }
        return NULL;
}

/* Ensure pass, step 1 (plan): checks every input topic's changelog
 * against the input topic's partition count in @p md and collects a
 * NewTopic for each missing one into @p nt (*cntp of them; the caller
 * destroys them). A missing changelog on the mock cluster (@p admin
 * false) cannot be created: SG_ERR_CONFIG. */
static sg_err_t changelogs_plan(const sg_loop_t *loop,
                                const rd_kafka_metadata_t *md, bool admin,
                                rd_kafka_NewTopic_t **nt, size_t *cntp,
                                rd_kafka_resp_err_t *retryp, char *errstr,
                                size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        sg_err_t err = SG_OK;
        size_t nt_cnt = 0;
        char es[512];
        for (size_t i = 0; !err && i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                const rd_kafka_metadata_topic_t *in = md_topic(md, tc->name);
                const rd_kafka_metadata_topic_t *cl =
                        md_topic(md, tc->changelog_topic);
                rd_kafka_resp_err_t cle =
                        cl ? RD_KAFKA_RESP_ERR_NO_ERROR
                           : md_topic_err(md, tc->changelog_topic);
                if (!in) { /* checked before; be safe */
                        sg_errf(errstr, errstr_size,
                                "input topic \"%s\" does not exist", tc->name);
                        err = SG_ERR_CONFIG;
                } else if (cl && cl->partition_cnt != in->partition_cnt) {
                        sg_errf(errstr, errstr_size,
                                "changelog topic \"%s\" has %d partition(s), "
                                "input topic \"%s\" has %d: a changelog needs "
                                "exactly one partition per input partition "
                                "(semantics §6)",
                                tc->changelog_topic, cl->partition_cnt,
                                tc->name, in->partition_cnt);
                        err = SG_ERR_CONFIG;
                } else if (!cl && sg_kafka_err_retriable(cle, false)) {
                        /* it exists, its leader is being elected */
                        *retryp = cle;
                        sg_errf(errstr, errstr_size,
                                "changelog topic \"%s\": %s",
                                tc->changelog_topic, rd_kafka_err2str(cle));
                        err = SG_ERR_KAFKA;
                } else if (!cl && !admin) {
                        sg_errf(errstr, errstr_size,
                                "changelog topic \"%s\" does not exist and "
                                "librdkafka's mock cluster cannot create it",
                                tc->changelog_topic);
                        err = SG_ERR_CONFIG;
                } else if (!cl) {
                        nt[nt_cnt] = rd_kafka_NewTopic_new(tc->changelog_topic,
                                                           in->partition_cnt,
                                                           -1, es, sizeof(es));
                        if (!nt[nt_cnt] ||
                            rd_kafka_NewTopic_set_config(
                                    nt[nt_cnt], "cleanup.policy", "compact")) {
                                sg_errf(errstr, errstr_size,
                                        "changelog topic \"%s\": %s",
                                        tc->changelog_topic, es);
                                err = SG_ERR_CONFIG;
                        }
                        if (nt[nt_cnt])
                                nt_cnt++;
                }
        }
        *cntp = nt_cnt;
        return err;
}

/* The most changelog_await waits for a created topic's metadata. */
#define SG_CREATED_TOPIC_WAIT_MS 10000

/* Ensure pass, step 2 (create), for each topic @p name it created: waits
 * (at most SG_CREATED_TOPIC_WAIT_MS) until the cluster's metadata knows it
 * (topic_probe). CreateTopics is answered once the controller has the
 * topic; a broker serves it only after it applied the metadata, and until
 * then the verify step's DescribeConfigs says UNKNOWN_TOPIC_OR_PART — a
 * retry, and a warning, at every first start. Past the wait the retry of
 * the pass still applies. */
static void changelog_await(sg_loop_t *loop, const char *name) {
        int64_t deadline = sg_clock_mono_ms() + SG_CREATED_TOPIC_WAIT_MS;
        while (!loop->stop && topic_probe(loop, name) &&
               sg_clock_mono_ms() < deadline)
                sg_sleep_ms(50);
}

/* Ensure pass, step 2 (create): CreateTopics of the @p nt_cnt missing
 * changelogs @p nt (an existing one, another instance's, is fine). */
static sg_err_t changelogs_create(sg_loop_t *loop, rd_kafka_queue_t *q,
                                  rd_kafka_NewTopic_t **nt, size_t nt_cnt,
                                  rd_kafka_resp_err_t *retryp, char *errstr,
                                  size_t errstr_size) {
        rd_kafka_t *rk = loop->producer;
        sg_err_t err = SG_OK;
        if (!err && nt_cnt > 0) {
                rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(
                        rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
                rd_kafka_AdminOptions_set_operation_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_AdminOptions_set_request_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_CreateTopics(rk, nt, nt_cnt, ao, q);
                rd_kafka_AdminOptions_destroy(ao);
                rd_kafka_event_t *ev =
                        admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT);
                rd_kafka_resp_err_t ee = ev ? rd_kafka_event_error(ev)
                                            : RD_KAFKA_RESP_ERR__TIMED_OUT;
                if (ee) {
                        sg_errf(errstr, errstr_size,
                                "creating changelog topics: %s",
                                ev ? rd_kafka_event_error_string(ev)
                                   : "no answer");
                        *retryp = ee;
                        err = SG_ERR_KAFKA;
                } else {
                        size_t rc;
                        const rd_kafka_topic_result_t **tr =
                                rd_kafka_CreateTopics_result_topics(
                                        rd_kafka_event_CreateTopics_result(ev),
                                        &rc);
                        for (size_t i = 0; !err && i < rc; i++) {
                                rd_kafka_resp_err_t te =
                                        rd_kafka_topic_result_error(tr[i]);
                                const char *tn =
                                        rd_kafka_topic_result_name(tr[i]);
                                if (te ==
                                    RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                                        continue; /* another instance won */
                                char what[300], acl[640];
                                snprintf(what, sizeof(what), "topic \"%s\"",
                                         tn);
                                if (sg_kafka_unauthorized(rk, te, "Create",
                                                          what, acl,
                                                          sizeof(acl))) {
                                        sg_errf(errstr, errstr_size,
                                                "creating changelog topic "
                                                "\"%s\": %s (or create it, "
                                                "compacted, as an admin)",
                                                tn, acl);
                                        err = SG_ERR_CONFIG;
                                        continue;
                                }
                                if (te) {
                                        const char *tes =
                                                rd_kafka_topic_result_error_string(
                                                        tr[i]);
                                        sg_errf(errstr, errstr_size,
                                                "creating changelog topic "
                                                "\"%s\": %s",
                                                tn,
                                                tes ? tes
                                                    : rd_kafka_err2str(te));
                                        *retryp = te;
                                        err = sg_kafka_err_retriable(te, false)
                                                      ? SG_ERR_KAFKA
                                              : te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                                                              te == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED ||
                                                              te == RD_KAFKA_RESP_ERR_INVALID_CONFIG ||
                                                              te == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR
                                                      ? SG_ERR_CONFIG
                                                      : SG_ERR_KAFKA;
                                        continue;
                                }
                                cJSON *f = cJSON_CreateObject();
                                cJSON_AddStringToObject(f, "topic", tn);
                                cJSON_AddStringToObject(f, "cleanup.policy",
                                                        "compact");
                                sg_loop_log(loop, SG_LOG_NOTICE,
                                            "changelog_topic_created", f);
                                changelog_await(loop, tn);
                        }
                }
                if (ev)
                        rd_kafka_event_destroy(ev);
        }
        return err;
}

/* Ensure pass, step 3 (verify): DescribeConfigs of every changelog (the
 * ones just created too: the broker may have refused or altered nothing,
 * but check); cleanup.policy must contain compact. A broker without
 * DescribeConfigs is logged, not an error. */
static sg_err_t changelogs_verify(sg_loop_t *loop, rd_kafka_queue_t *q,
                                  rd_kafka_resp_err_t *retryp, char *errstr,
                                  size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        rd_kafka_t *rk = loop->producer;
        sg_err_t err = SG_OK;
        rd_kafka_ConfigResource_t **cr =
                err ? NULL : calloc(conf->topic_cnt, sizeof(*cr));
        if (!err && !cr)
                err = SG_ERR_NOMEM;
        for (size_t i = 0; !err && i < conf->topic_cnt; i++)
                cr[i] = rd_kafka_ConfigResource_new(
                        RD_KAFKA_RESOURCE_TOPIC,
                        conf->topics[i].changelog_topic);
        if (!err) {
                rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(
                        rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
                rd_kafka_AdminOptions_set_request_timeout(
                        ao, SG_ADMIN_TIMEOUT_MS, NULL, 0);
                rd_kafka_DescribeConfigs(rk, cr, conf->topic_cnt, ao, q);
                rd_kafka_AdminOptions_destroy(ao);
                rd_kafka_event_t *ev =
                        admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
                rd_kafka_resp_err_t ee = ev ? rd_kafka_event_error(ev)
                                            : RD_KAFKA_RESP_ERR__TIMED_OUT;
                if (ee == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
                    ee == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "error",
                                                rd_kafka_err2name(ee));
                        cJSON_AddStringToObject(
                                f, "detail",
                                "the broker does not support DescribeConfigs "
                                "(older than Kafka 0.11): cleanup.policy of "
                                "the changelog topics not checked");
                        sg_loop_log(loop, SG_LOG_WARNING,
                                    "changelog_config_unchecked", f);
                } else if (ee) {
                        sg_errf(errstr, errstr_size,
                                "describing changelog topics: %s",
                                ev ? rd_kafka_event_error_string(ev)
                                   : "no answer");
                        *retryp = ee;
                        err = SG_ERR_KAFKA;
                } else {
                        size_t rc;
                        const rd_kafka_ConfigResource_t **res =
                                rd_kafka_DescribeConfigs_result_resources(
                                        rd_kafka_event_DescribeConfigs_result(
                                                ev),
                                        &rc);
                        for (size_t i = 0; !err && i < rc; i++) {
                                const char *tn =
                                        rd_kafka_ConfigResource_name(res[i]);
                                rd_kafka_resp_err_t re =
                                        rd_kafka_ConfigResource_error(res[i]);
                                char what[300], acl[640];
                                snprintf(what, sizeof(what), "topic \"%s\"",
                                         tn);
                                if (sg_kafka_unauthorized(
                                            rk, re, "DescribeConfigs", what,
                                            acl, sizeof(acl))) {
                                        sg_errf(errstr, errstr_size,
                                                "describing changelog topic "
                                                "\"%s\": %s",
                                                tn, acl);
                                        err = SG_ERR_CONFIG;
                                        break;
                                }
                                if (re) {
                                        sg_errf(errstr, errstr_size,
                                                "describing changelog topic "
                                                "\"%s\": %s",
                                                tn,
                                                rd_kafka_ConfigResource_error_string(
                                                        res[i]));
                                        /* retriable, UNKNOWN_TOPIC_OR_PART
                                         * too: a topic just created may not
                                         * be known to every broker yet */
                                        *retryp = re;
                                        err = SG_ERR_KAFKA;
                                        break;
                                }
                                size_t ec;
                                const rd_kafka_ConfigEntry_t **ce =
                                        rd_kafka_ConfigResource_configs(res[i],
                                                                        &ec);
                                const char *policy = NULL;
                                for (size_t k = 0; k < ec; k++)
                                        if (!strcmp(rd_kafka_ConfigEntry_name(
                                                            ce[k]),
                                                    "cleanup.policy"))
                                                policy =
                                                        rd_kafka_ConfigEntry_value(
                                                                ce[k]);
                                if (!policy || !strstr(policy, "compact")) {
                                        sg_errf(errstr, errstr_size,
                                                "changelog topic \"%s\" has "
                                                "cleanup.policy=%s; it must "
                                                "contain compact (a changelog "
                                                "keeps each store key's last "
                                                "value, semantics §6)",
                                                tn,
                                                policy ? policy : "(unset)");
                                        err = SG_ERR_CONFIG;
                                }
                        }
                }
                if (ev)
                        rd_kafka_event_destroy(ev);
        }
        for (size_t i = 0; cr && i < conf->topic_cnt; i++)
                if (cr[i])
                        rd_kafka_ConfigResource_destroy(cr[i]);
        free(cr);
        return err;
}

/**
 * At start (both guarantees, a stateful processor): every input topic's
 * changelog topic exists, with as many partitions as the input topic and
 * cleanup.policy=compact (one
 * changelog partition per input partition; a compacted log keeps each store
 * key's last value). A missing changelog is created (replication factor -1:
 * the broker's default.replication.factor, KIP-464); an existing one is
 * checked. A mismatch is SG_ERR_CONFIG naming the topic. On librdkafka's mock
 * cluster (--embedded-kafka; its cluster id starts with "mockCluster"),
 * which has no admin API and no topic configs, the changelogs must exist
 * (sg_mock_start creates them) and cleanup.policy is not checked, logged as
 * "changelog_config_unchecked".
 *
 * One pass: a retriable error (a request timed out, no controller yet, a
 * topic just created that a broker does not know yet) sets *retryp and
 * returns SG_ERR_KAFKA; sg_loop_ensure_changelogs() runs the pass again.
 */
static sg_err_t ensure_changelogs_once(sg_loop_t *loop,
                                       rd_kafka_resp_err_t *retryp,
                                       char *errstr, size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        const rd_kafka_metadata_t *md;
        rd_kafka_t *rk = loop->producer;
        *retryp = RD_KAFKA_RESP_ERR_NO_ERROR;
        sg_err_t err = loop_metadata(loop, rk, &md, errstr, errstr_size);
        if (err)
                return err;
        /* librdkafka's mock cluster (--embedded-kafka, sg_mock_start) has
         * neither CreateTopics nor DescribeConfigs (2.0.2: the requests
         * time out): it is told by the cluster id it reports. */
        char *cid = rd_kafka_clusterid(rk, SG_METADATA_TIMEOUT_MS);
        bool admin = !(cid && !strncmp(cid, "mockCluster", 11));
        if (cid)
                rd_kafka_mem_free(rk, cid);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_NewTopic_t **nt = calloc(conf->topic_cnt, sizeof(*nt));
        size_t nt_cnt = 0;
        if (!nt)
                err = SG_ERR_NOMEM;
        if (!err)
                err = changelogs_plan(loop, md, admin, nt, &nt_cnt, retryp,
                                      errstr, errstr_size);
        rd_kafka_metadata_destroy(md);
        if (!err && nt_cnt > 0)
                err = changelogs_create(loop, q, nt, nt_cnt, retryp, errstr,
                                        errstr_size);
        for (size_t i = 0; i < nt_cnt; i++)
                rd_kafka_NewTopic_destroy(nt[i]);
        free(nt);
        /* the mock cluster has no topic configs to verify */
        if (!err && !admin) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(
                        f, "detail",
                        "librdkafka's mock cluster (--embedded-kafka) has no "
                        "topic configs: cleanup.policy of the changelog "
                        "topics not checked");
                sg_loop_log(loop, SG_LOG_WARNING, "changelog_config_unchecked",
                            f);
                rd_kafka_queue_destroy(q);
                return SG_OK;
        }
        if (!err)
                err = changelogs_verify(loop, q, retryp, errstr, errstr_size);
        rd_kafka_queue_destroy(q);
        return err;
}

/** exactly_once, at start: ensure_changelogs_once(), run again while it
 *  fails with a retriable error (sg_retry_t). A missing changelog is
 *  created in the pass, so an unknown topic reported there is one that
 *  exists (just created): retriable. */
sg_err_t sg_loop_ensure_changelogs(sg_loop_t *loop, char *errstr,
                                   size_t errstr_size) {
        return admin_retry(loop, ensure_changelogs_once, "changelog topics",
                           true, errstr, errstr_size);
}

/* RecordBatch v2 framing the broker counts against max.message.bytes, and a
 * margin for compression framing: a record within limit - both fits. */
#define SG_BATCH_FRAMING 61
#define SG_BATCH_MARGIN 256

/** A property of @p rk's configuration as a number, or -1. */
static int64_t conf_num(rd_kafka_t *rk, const char *name) {
        char v[64];
        size_t vs = sizeof(v);
        if (rd_kafka_conf_get(rd_kafka_conf(rk), name, v, &vs) !=
            RD_KAFKA_CONF_OK)
                return -1;
        char *end;
        long long n = strtoll(v, &end, 10);
        return end != v && !*end && n > 0 ? (int64_t)n : -1;
}

/**
 * One DescribeConfigs of the @p n topics @p names: their max.message.bytes
 * into @p maxb (-1: not described; @p why says why). A retriable error sets
 * *retryp.
 */
static void describe_max_bytes(sg_loop_t *loop, const char **names, size_t n,
                               int64_t *maxb, rd_kafka_resp_err_t *retryp,
                               char *why, size_t why_size) {
        rd_kafka_t *rk = loop->producer;
        rd_kafka_ConfigResource_t **cr = calloc(n ? n : 1, sizeof(*cr));
        *retryp = RD_KAFKA_RESP_ERR_NO_ERROR;
        for (size_t i = 0; i < n; i++)
                maxb[i] = -1;
        if (!cr) {
                sg_errf(why, why_size, "out of memory");
                return;
        }
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        for (size_t i = 0; i < n; i++)
                cr[i] = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC,
                                                    names[i]);
        rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(
                rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_AdminOptions_set_request_timeout(ao, SG_ADMIN_TIMEOUT_MS, NULL,
                                                  0);
        rd_kafka_DescribeConfigs(rk, cr, n, ao, q);
        rd_kafka_AdminOptions_destroy(ao);
        rd_kafka_event_t *ev =
                admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
        rd_kafka_resp_err_t ee =
                ev ? rd_kafka_event_error(ev) : RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (ee) {
                sg_errf(why, why_size, "DescribeConfigs: %s",
                        ev ? rd_kafka_event_error_string(ev) : "no answer");
                *retryp = ee;
        } else {
                size_t rc;
                const rd_kafka_ConfigResource_t **res =
                        rd_kafka_DescribeConfigs_result_resources(
                                rd_kafka_event_DescribeConfigs_result(ev), &rc);
                for (size_t r = 0; r < rc; r++) {
                        const char *tn = rd_kafka_ConfigResource_name(res[r]);
                        rd_kafka_resp_err_t re =
                                rd_kafka_ConfigResource_error(res[r]);
                        if (re) {
                                sg_errf(why, why_size, "topic \"%s\": %s", tn,
                                        rd_kafka_err2str(re));
                                /* a changelog just created may not be known
                                 * to every broker yet */
                                if (sg_kafka_err_retriable(re, true))
                                        *retryp = re;
                                continue;
                        }
                        size_t ec;
                        const rd_kafka_ConfigEntry_t **ce =
                                rd_kafka_ConfigResource_configs(res[r], &ec);
                        for (size_t k = 0; k < ec; k++) {
                                const char *v;
                                if (strcmp(rd_kafka_ConfigEntry_name(ce[k]),
                                           "max.message.bytes") ||
                                    !(v = rd_kafka_ConfigEntry_value(ce[k])))
                                        continue;
                                for (size_t i = 0; i < n; i++)
                                        if (!strcmp(names[i], tn))
                                                maxb[i] = strtoll(v, NULL, 10);
                        }
                }
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        for (size_t i = 0; i < n; i++)
                rd_kafka_ConfigResource_destroy(cr[i]);
        free(cr);
        rd_kafka_queue_destroy(q);
}

/**
 * At start, semantics §3 ("A record the output topic cannot take"): the
 * largest record seqgate can write to each topic it writes to — the
 * producer's message.max.bytes (librdkafka refuses a larger record before
 * sending it) and each output, DLQ, snapshot request and changelog topic's
 * max.message.bytes (the broker refuses a larger record batch;
 * DescribeConfigs) — is told to the processor (size_limit()), which routes
 * a record above it; the loop only reports. Logged as "size_limits", with a
 * "size_limit_mismatch" warning where the producer's limit is above a
 * topic's (the broker would refuse what the producer lets through) and a
 * "batch_size_above_topic_limit" warning where a batch of small records may
 * exceed a topic's. A cluster that cannot describe its topics (librdkafka's
 * mock, a principal without DescribeConfigs) leaves the producer's limit
 * alone: logged, not an error.
 */
sg_err_t sg_loop_size_limits(sg_loop_t *loop, char *errstr,
                             size_t errstr_size) {
        const sg_config_t *conf = loop->conf;
        const sg_processor_t *pr = &loop->proc;
        int64_t mmb = conf_num(loop->producer, "message.max.bytes");
        int64_t bsz = conf_num(loop->producer, "batch.size");
        const char **names = calloc(4 * conf->topic_cnt, sizeof(*names));
        int64_t *maxb = calloc(4 * conf->topic_cnt, sizeof(*maxb));
        size_t n = 0;
        if (!names || !maxb) {
                free(names);
                free(maxb);
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                const char *t[4] = {tc->output_topic, tc->dlq_topic,
                                    tc->snapshot.source == SG_SNAP_KAFKA
                                            ? tc->snapshot.request_topic
                                            : NULL,
                                    loop->eos ? tc->changelog_topic : NULL};
                for (int k = 0; k < 4; k++) {
                        bool seen = !t[k];
                        for (size_t j = 0; !seen && j < n; j++)
                                seen = !strcmp(names[j], t[k]);
                        if (!seen)
                                names[n++] = t[k];
                }
        }
        char why[512] = "";
        char *cid = rd_kafka_clusterid(loop->producer, SG_METADATA_TIMEOUT_MS);
        bool mock = cid && !strncmp(cid, "mockCluster", 11);
        if (cid)
                rd_kafka_mem_free(loop->producer, cid);
        if (mock) {
                sg_errf(why, sizeof(why),
                        "librdkafka's mock cluster has no topic configs");
                for (size_t i = 0; i < n; i++)
                        maxb[i] = -1;
        } else {
                sg_retry_t r;
                rd_kafka_resp_err_t code;
                sg_retry_init(&r, "topic size limits");
                do
                        describe_max_bytes(loop, names, n, maxb, &code, why,
                                           sizeof(why));
                while (code && sg_retry_again(loop, &r, code, true, why, NULL));
        }

        if (pr->size_limit && mmb > 0)
                pr->size_limit(pr->opaque, NULL, (size_t)mmb);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "message.max.bytes", (double)mmb);
        cJSON_AddNumberToObject(f, "batch.size", (double)bsz);
        cJSON *tf = cJSON_AddObjectToObject(f, "max.message.bytes");
        bool unknown = false;
        for (size_t i = 0; i < n; i++) {
                if (maxb[i] <= 0) {
                        cJSON_AddNullToObject(tf, names[i]);
                        unknown = true;
                        continue;
                }
                cJSON_AddNumberToObject(tf, names[i], (double)maxb[i]);
                int64_t lim = maxb[i] - SG_BATCH_FRAMING - SG_BATCH_MARGIN;
                if (pr->size_limit)
                        pr->size_limit(pr->opaque, names[i],
                                       lim > 0 ? (size_t)lim : 1);
                if (mmb > lim) {
                        cJSON *w = cJSON_CreateObject();
                        cJSON_AddStringToObject(w, "topic", names[i]);
                        cJSON_AddNumberToObject(w, "max.message.bytes",
                                                (double)maxb[i]);
                        cJSON_AddNumberToObject(w, "message.max.bytes",
                                                (double)mmb);
                        cJSON_AddStringToObject(
                                w, "detail",
                                "the producer lets records through that the "
                                "broker refuses for this topic; seqgate "
                                "dead-letters an output record above the "
                                "topic's limit as output_rejected");
                        sg_loop_log(loop, SG_LOG_WARNING, "size_limit_mismatch",
                                    w);
                }
                if (bsz > lim) {
                        cJSON *w = cJSON_CreateObject();
                        cJSON_AddStringToObject(w, "topic", names[i]);
                        cJSON_AddNumberToObject(w, "max.message.bytes",
                                                (double)maxb[i]);
                        cJSON_AddNumberToObject(w, "batch.size", (double)bsz);
                        cJSON_AddStringToObject(
                                w, "detail",
                                "a batch of small records can be larger than "
                                "the topic takes; set kafka_producer "
                                "batch.size below its max.message.bytes");
                        sg_loop_log(loop, SG_LOG_WARNING,
                                    "batch_size_above_topic_limit", w);
                }
        }
        if (unknown)
                cJSON_AddStringToObject(f, "unknown_because", why);
        sg_loop_log(loop, SG_LOG_INFO, "size_limits", f);
        free(names);
        free(maxb);
        return SG_OK;
}
