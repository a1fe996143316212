/*
 * kafka_preflight.c — the Kafka loop (kafka.h): the cluster preflight.
 * Everything seqgate needs of the cluster and of the files its clients
 * read, checked in one pass and reported all at once, one line per
 * problem (sg_preflight_t): `seqgate --check-config FILE --cluster`, and
 * the daemon's own start-up (sg_loop_connect), so that three missing
 * topics and a partition-count mismatch are one start, not four.
 * The check of the files a client reads is kafka_preflight_files.c.
 *
 * Errors (seqgate cannot work so: exit 2):
 *  - a file a client reads (ssl.ca.location, ssl.key.location, ...) that
 *    is missing or unreadable, where the client uses it (SSL, GSSAPI);
 *  - an input, output, DLQ or snapshot topic that does not exist or that
 *    the principal may not describe; an existing changelog topic whose
 *    partition count is not its input topic's or whose cleanup.policy
 *    lacks compact (semantics §6); an output topic with fewer partitions
 *    than its input under output_partitioning "input" (semantics §5);
 *  - a topic seqgate writes whose min.insync.replicas exceeds its
 *    replication factor (every acks=all write is refused);
 *  - a consumer group the principal may not use (sg_preflight_group():
 *    a consumer's committed offsets, OffsetFetch, answer
 *    GROUP_AUTHORIZATION_FAILED: READ implies DESCRIBE; not
 *    DescribeConsumerGroups: librdkafka 2.0.2 aborts the process
 *    (rd_kafka_enq_once_del_source_return: eonce->refcnt > 0) when that
 *    coordinator request is retried, as on a broker restart);
 *  - where DescribeAcls lists ACLs and the principal is known
 *    (PLAINTEXT/SSL without a certificate: User:ANONYMOUS; SASL PLAIN or
 *    SCRAM: User:<sasl.username>): an ACL that denies it, or ACLs on a
 *    resource none of which allows it — READ on the group and the input
 *    and reply topics, WRITE on the output, DLQ and request topics, READ
 *    and WRITE on the changelogs, WRITE on the transactional id
 *    (exactly_once), CREATE on a changelog that is missing. librdkafka
 *    2.0.2 drops DescribeAcls' own error: no authorizer, no ACLs and no
 *    DESCRIBE on the cluster all come back as an empty list, which
 *    checks nothing (a note says so).
 * Warnings (seqgate works, but look):
 *  - dedup.ttl_ms shorter than the input topic's retention.ms (or the
 *    topic keeps records forever): a replay from the topic's start would
 *    apply events older than the TTL again (semantics §8: the TTL must
 *    cover the topic's retention);
 *  - on a cluster of 3 brokers or more, a changelog or output topic with
 *    fewer than 3 replicas or min.insync.replicas below 2;
 * Notes: what could not be checked, and why (no DescribeConfigs
 * permission, no ACL described, a principal that cannot be told, the
 * resources no ACL names: allowed only under
 * allow.everyone.if.no.acl.found or to a super user).
 * A missing changelog topic is no problem: seqgate creates it at start.
 *
 * librdkafka 2.0.2's admin API has no transactional-id resource type: a
 * TransactionalId ACL comes back as an unknown resource with its name, and
 * is matched by that name. librdkafka's mock cluster (--embedded-kafka)
 * answers metadata only: the admin checks are skipped there.
 *
 * A pass meets retriable errors (a leader being elected, a request that
 * timed out): it says so in sg_preflight_t.retry, and the caller runs the
 * pass again with back-off (the daemon: broker_retry_timeout_ms).
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PF_TIMEOUT_MS 15000

/* ------------------------------------------------------------------ */
/* the list                                                            */

sg_err_t sg_preflight_add(sg_preflight_t *pf, sg_preflight_sev_t sev,
                          const char *fmt, ...) {
        char text[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        if (pf->cnt == pf->cap) {
                size_t cap = pf->cap ? pf->cap * 2 : 16;
                sg_preflight_item_t *it = realloc(pf->items, cap * sizeof(*it));
                if (!it)
                        return SG_ERR_NOMEM;
                pf->items = it;
                pf->cap = cap;
        }
        char *t = strdup(text);
        if (!t)
                return SG_ERR_NOMEM;
        pf->items[pf->cnt++] = (sg_preflight_item_t){sev, t, false};
        pf->errors += sev == SG_PF_ERROR;
        pf->warnings += sev == SG_PF_WARNING;
        return SG_OK;
}

/** The value librdkafka takes for @p name in @p a then @p b (the last). */
const sg_kv_t *sg_preflight_kv2(const sg_kv_t *a, size_t an, const sg_kv_t *b,
                                size_t bn, const char *name) {
        const sg_kv_t *v = NULL;
        for (size_t i = 0; i < an; i++)
                if (!strcmp(a[i].name, name))
                        v = &a[i];
        for (size_t i = 0; i < bn; i++)
                if (!strcmp(b[i].name, name))
                        v = &b[i];
        return v;
}

void sg_preflight_clear(sg_preflight_t *pf) {
        if (!pf)
                return;
        for (size_t i = 0; i < pf->cnt; i++)
                free(pf->items[i].text);
        free(pf->items);
        memset(pf, 0, sizeof(*pf));
}

/* ------------------------------------------------------------------ */
/* topics                                                              */

/* One topic seqgate uses, what for, and what the cluster says of it. */
typedef enum role {
        R_INPUT,
        R_OUTPUT,
        R_DLQ,
        R_REQUEST,
        R_REPLY,
        R_CHANGELOG,
} role_t;

static const char *const ROLE_NAMES[] = {
        "input topic",
        "output topic",
        "DLQ topic",
        "snapshot request topic",
        "snapshot reply topic",
        "changelog topic",
};

typedef struct ptopic {
        const char *name;
        role_t role;
        const sg_topic_config_t *tc;         /* its input topic's settings */
        const rd_kafka_metadata_topic_t *md; /* NULL: not there */
        /* DescribeConfigs (-2: not described) */
        char policy[64];
        int64_t retention_ms;
        int64_t min_isr;
        bool described;
} ptopic_t;

typedef struct pf_ctx {
        const sg_config_t *conf;
        rd_kafka_t *rk;
        sg_preflight_t *pf;
        const rd_kafka_metadata_t *md;
        ptopic_t *t;
        size_t cnt;
        bool admin;      /* a real cluster (not librdkafka's mock) */
        bool changelogs; /* the processor keeps a changelog */
} pf_ctx_t;

static const rd_kafka_metadata_topic_t *md_find(const rd_kafka_metadata_t *md,
                                                const char *name,
                                                rd_kafka_resp_err_t *errp) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, name)) {
                        *errp = md->topics[i].err;
                        return md->topics[i].err ? NULL : &md->topics[i];
                }
        *errp = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        return NULL;
}

static void retry_on(sg_preflight_t *pf, rd_kafka_resp_err_t e,
                     bool topic_exists) {
        if (!pf->retry && sg_kafka_err_retriable(e, topic_exists))
                pf->retry = e;
}

/** The topics of every input topic, each with its role and metadata. */
static sg_err_t topics_collect(pf_ctx_t *x) {
        const sg_config_t *c = x->conf;
        x->t = calloc(6 * c->topic_cnt, sizeof(*x->t));
        if (!x->t)
                return SG_ERR_NOMEM;
        for (size_t i = 0; i < c->topic_cnt; i++) {
                const sg_topic_config_t *tc = &c->topics[i];
                const char *names[6] = {
                        tc->name,
                        tc->output_topic,
                        tc->dlq_topic,
                        NULL,
                        NULL,
                        x->changelogs ? tc->changelog_topic : NULL};
                if (tc->snapshot.source == SG_SNAP_KAFKA) {
                        names[R_REQUEST] = tc->snapshot.request_topic;
                        names[R_REPLY] = tc->snapshot.reply_topic;
                }
                for (int r = 0; r < 6; r++) {
                        if (!names[r])
                                continue;
                        ptopic_t *p = &x->t[x->cnt++];
                        p->name = names[r];
                        p->role = (role_t)r;
                        p->tc = tc;
                        p->retention_ms = p->min_isr = -2;
                }
        }
        return SG_OK;
}

/** Existence, authorization and partition counts, from the metadata. */
static sg_err_t topics_check(pf_ctx_t *x) {
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < x->cnt; i++) {
                ptopic_t *p = &x->t[i];
                rd_kafka_resp_err_t te;
                bool own = p->role != R_INPUT; /* "X of input topic T" */
                p->md = md_find(x->md, p->name, &te);
                if (p->md)
                        continue;
                if (p->role == R_CHANGELOG &&
                    te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                        if (!x->admin)
                                err = sg_preflight_add(
                                        x->pf, SG_PF_ERROR,
                                        "changelog topic \"%s\" does not "
                                        "exist, and librdkafka's mock "
                                        "cluster cannot create it",
                                        p->name);
                        continue; /* created at start */
                }
                if (sg_kafka_err_retriable(te, false)) {
                        retry_on(x->pf, te, false);
                        err = sg_preflight_add(x->pf, SG_PF_ERROR,
                                               "%s \"%s\": %s",
                                               ROLE_NAMES[p->role], p->name,
                                               rd_kafka_err2str(te));
                        if (!err)
                                x->pf->items[x->pf->cnt - 1].retriable = true;
                } else if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                        /* Kafka lists no topic the principal may not
                         * describe */
                        err = own ? sg_preflight_add(
                                            x->pf, SG_PF_ERROR,
                                            "%s \"%s\" (of input topic "
                                            "\"%s\") does not exist (or the "
                                            "principal may not DESCRIBE it)",
                                            ROLE_NAMES[p->role], p->name,
                                            p->tc->name)
                                  : sg_preflight_add(
                                            x->pf, SG_PF_ERROR,
                                            "input topic \"%s\" does not "
                                            "exist (or the principal may not "
                                            "DESCRIBE it)",
                                            p->name);
                } else if (te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
                        err = sg_preflight_add(
                                x->pf, SG_PF_ERROR,
                                "%s \"%s\": %s (seqgate needs DESCRIBE, "
                                "and %s)",
                                ROLE_NAMES[p->role], p->name,
                                rd_kafka_err2str(te),
                                p->role == R_INPUT || p->role == R_REPLY
                                        ? "READ"
                                : p->role == R_CHANGELOG ? "READ and WRITE"
                                                         : "WRITE");
                } else {
                        err = sg_preflight_add(x->pf, SG_PF_ERROR,
                                               "%s \"%s\": %s",
                                               ROLE_NAMES[p->role], p->name,
                                               rd_kafka_err2str(te));
                }
        }
        /* partition counts against the input topic's (semantics §5, §6) */
        for (size_t i = 0; !err && i < x->cnt; i++) {
                const ptopic_t *p = &x->t[i], *in = NULL;
                for (size_t j = 0; j < x->cnt; j++)
                        if (x->t[j].role == R_INPUT && x->t[j].tc == p->tc)
                                in = &x->t[j];
                if (!p->md || !in || !in->md)
                        continue;
                int pc = p->md->partition_cnt, ic = in->md->partition_cnt;
                if (p->role == R_OUTPUT &&
                    p->tc->output_partitioning == SG_PART_INPUT && pc < ic)
                        err = sg_preflight_add(
                                x->pf, SG_PF_ERROR,
                                "output topic \"%s\" has %d "
                                "partition(s), fewer than input topic "
                                "\"%s\" (%d); output_partitioning "
                                "\"input\" needs at least as many "
                                "(semantics §5)",
                                p->name, pc, in->name, ic);
                else if (p->role == R_CHANGELOG && pc != ic)
                        err = sg_preflight_add(
                                x->pf, SG_PF_ERROR,
                                "changelog topic \"%s\" has %d "
                                "partition(s), input topic \"%s\" has "
                                "%d: a changelog needs exactly one "
                                "partition per input partition "
                                "(semantics §6)",
                                p->name, pc, in->name, ic);
        }
        return err;
}

/* ------------------------------------------------------------------ */
/* admin calls                                                         */

/** Waits for the admin result of type @p type on @p q (NULL: none came). */
static rd_kafka_event_t *pf_wait(rd_kafka_queue_t *q,
                                 rd_kafka_event_type_t type) {
        int64_t deadline = sg_clock_mono_ms() + PF_TIMEOUT_MS + 5000;
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

static rd_kafka_AdminOptions_t *pf_options(rd_kafka_t *rk,
                                           rd_kafka_admin_op_t op) {
        rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, op);
        if (ao)
                rd_kafka_AdminOptions_set_request_timeout(ao, PF_TIMEOUT_MS,
                                                          NULL, 0);
        return ao;
}

static int64_t num_or(const char *v, int64_t dflt) {
        char *end;
        if (!v)
                return dflt;
        long long n = strtoll(v, &end, 10);
        return end != v && !*end ? (int64_t)n : dflt;
}

/** DescribeConfigs of every topic that exists: cleanup.policy,
 *  retention.ms, min.insync.replicas. */
static sg_err_t configs_describe(pf_ctx_t *x, rd_kafka_queue_t *q) {
        rd_kafka_ConfigResource_t **cr = calloc(x->cnt, sizeof(*cr));
        size_t n = 0;
        sg_err_t err = SG_OK;
        if (!cr)
                return SG_ERR_NOMEM;
        for (size_t i = 0; i < x->cnt; i++) {
                bool dup = false;
                for (size_t j = 0; j < i; j++)
                        dup |= !strcmp(x->t[j].name, x->t[i].name);
                if (x->t[i].md && !dup)
                        cr[n++] = rd_kafka_ConfigResource_new(
                                RD_KAFKA_RESOURCE_TOPIC, x->t[i].name);
        }
        rd_kafka_AdminOptions_t *ao =
                pf_options(x->rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_event_t *ev = NULL;
        if (n > 0) {
                rd_kafka_DescribeConfigs(x->rk, cr, n, ao, q);
                ev = pf_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
        }
        rd_kafka_resp_err_t ee = !n   ? RD_KAFKA_RESP_ERR_NO_ERROR
                                 : ev ? rd_kafka_event_error(ev)
                                      : RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (ee) {
                retry_on(x->pf, ee, true);
                err = sg_preflight_add(
                        x->pf, SG_PF_NOTE,
                        "topic configs not checked (cleanup.policy, "
                        "retention.ms, min.insync.replicas): "
                        "DescribeConfigs: %s",
                        ev ? rd_kafka_event_error_string(ev)
                           : rd_kafka_err2str(ee));
        } else if (ev) {
                size_t rc;
                const rd_kafka_ConfigResource_t **res =
                        rd_kafka_DescribeConfigs_result_resources(
                                rd_kafka_event_DescribeConfigs_result(ev), &rc);
                for (size_t r = 0; !err && r < rc; r++) {
                        const char *tn = rd_kafka_ConfigResource_name(res[r]);
                        rd_kafka_resp_err_t re =
                                rd_kafka_ConfigResource_error(res[r]);
                        if (re) {
                                retry_on(x->pf, re, true);
                                err = sg_preflight_add(
                                        x->pf, SG_PF_NOTE,
                                        "topic \"%s\": configs not "
                                        "checked: %s",
                                        tn, rd_kafka_err2str(re));
                                continue;
                        }
                        size_t ec;
                        const rd_kafka_ConfigEntry_t **ce =
                                rd_kafka_ConfigResource_configs(res[r], &ec);
                        const char *pol = NULL, *ret = NULL, *isr = NULL;
                        for (size_t k = 0; k < ec; k++) {
                                const char *nm =
                                        rd_kafka_ConfigEntry_name(ce[k]);
                                const char *v =
                                        rd_kafka_ConfigEntry_value(ce[k]);
                                if (!strcmp(nm, "cleanup.policy"))
                                        pol = v;
                                else if (!strcmp(nm, "retention.ms"))
                                        ret = v;
                                else if (!strcmp(nm, "min.insync.replicas"))
                                        isr = v;
                        }
                        for (size_t i = 0; i < x->cnt; i++) {
                                ptopic_t *p = &x->t[i];
                                if (strcmp(p->name, tn))
                                        continue;
                                p->described = true;
                                snprintf(p->policy, sizeof(p->policy), "%s",
                                         pol ? pol : "");
                                p->retention_ms = num_or(ret, -2);
                                p->min_isr = num_or(isr, -2);
                        }
                }
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(ao);
        for (size_t i = 0; i < n; i++)
                rd_kafka_ConfigResource_destroy(cr[i]);
        free(cr);
        return err;
}

/** "7 d", "36 h", "90 min", "45 s", "500 ms" */
static const char *human_ms(int64_t ms, char *buf, size_t size) {
        if (ms % 86400000 == 0)
                snprintf(buf, size, "%" PRId64 " d", ms / 86400000);
        else if (ms % 3600000 == 0)
                snprintf(buf, size, "%" PRId64 " h", ms / 3600000);
        else if (ms % 60000 == 0)
                snprintf(buf, size, "%" PRId64 " min", ms / 60000);
        else if (ms % 1000 == 0)
                snprintf(buf, size, "%" PRId64 " s", ms / 1000);
        else
                snprintf(buf, size, "%" PRId64 " ms", ms);
        return buf;
}

sg_err_t sg_preflight_replication(sg_preflight_t *pf, const char *role,
                                  const char *topic, int replicas,
                                  int64_t min_isr, int brokers) {
        if (min_isr > replicas)
                return sg_preflight_add(
                        pf, SG_PF_ERROR,
                        "%s \"%s\": min.insync.replicas %" PRId64
                        " is above its replication factor %d: every "
                        "acks=all write is refused "
                        "(NOT_ENOUGH_REPLICAS)",
                        role, topic, min_isr, replicas);
        if (brokers >= 3 && replicas < 3)
                return sg_preflight_add(
                        pf, SG_PF_WARNING,
                        "%s \"%s\": replication factor %d on a cluster "
                        "of %d brokers: one broker lost can lose "
                        "records seqgate committed (3 replicas, "
                        "min.insync.replicas 2 keep them)",
                        role, topic, replicas, brokers);
        if (brokers >= 3 && min_isr >= 0 && min_isr < 2)
                return sg_preflight_add(
                        pf, SG_PF_WARNING,
                        "%s \"%s\": min.insync.replicas %" PRId64
                        ": acks=all is answered by one replica, and "
                        "losing it can lose records seqgate committed "
                        "(min.insync.replicas 2 keeps them)",
                        role, topic, min_isr);
        return SG_OK;
}

sg_err_t sg_preflight_retention(sg_preflight_t *pf, const char *topic,
                                int64_t ttl_ms, const char *policy,
                                int64_t retention_ms) {
        char a[32], b[32];
        bool deletes = !policy || !*policy || strstr(policy, "delete");
        if (!deletes)
                return sg_preflight_add(
                        pf, SG_PF_WARNING,
                        "input topic \"%s\" is compacted "
                        "(cleanup.policy %s) and keeps records "
                        "longer than topics.%s.dedup.ttl_ms (%s): a "
                        "replay from the topic's start would apply "
                        "events older than the TTL again (semantics "
                        "§8: the TTL covers the topic's retention)",
                        topic, policy, topic, human_ms(ttl_ms, a, 32));
        if (retention_ms == -1)
                return sg_preflight_add(
                        pf, SG_PF_WARNING,
                        "input topic \"%s\" keeps records forever "
                        "(retention.ms -1), longer than "
                        "topics.%s.dedup.ttl_ms (%s): a replay from "
                        "the topic's start would apply events older "
                        "than the TTL again (semantics §8: the TTL "
                        "covers the topic's retention)",
                        topic, topic, human_ms(ttl_ms, a, 32));
        if (retention_ms > ttl_ms)
                return sg_preflight_add(
                        pf, SG_PF_WARNING,
                        "topics.%s.dedup.ttl_ms (%s) is shorter than "
                        "input topic \"%s\"'s retention.ms (%s): a "
                        "replay from the topic's start would apply "
                        "events older than the TTL again (semantics "
                        "§8: the TTL covers the topic's retention)",
                        topic, human_ms(ttl_ms, a, 32), topic,
                        human_ms(retention_ms, b, 32));
        return SG_OK;
}

/** What the topic configs say: changelog compaction, writes refused for
 *  replicas, TTL against retention. */
static sg_err_t configs_check(pf_ctx_t *x) {
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < x->cnt; i++) {
                const ptopic_t *p = &x->t[i];
                if (!p->md || !p->described)
                        continue;
                if (p->role == R_CHANGELOG && !strstr(p->policy, "compact"))
                        err = sg_preflight_add(
                                x->pf, SG_PF_ERROR,
                                "changelog topic \"%s\" has "
                                "cleanup.policy=%s; it must contain "
                                "compact (a changelog keeps each store "
                                "key's last value, semantics §6)",
                                p->name, p->policy[0] ? p->policy : "(unset)");
                if (!err && p->role != R_INPUT && p->role != R_REPLY &&
                    p->md->partition_cnt > 0) {
                        int rf = p->md->partitions[0].replica_cnt;
                        bool kept =
                                p->role == R_CHANGELOG || p->role == R_OUTPUT;
                        if (p->min_isr > rf || kept)
                                err = sg_preflight_replication(
                                        x->pf, ROLE_NAMES[p->role], p->name, rf,
                                        p->min_isr, x->md->broker_cnt);
                }
                if (!err && p->role == R_INPUT)
                        err = sg_preflight_retention(
                                x->pf, p->name, p->tc->dedup_ttl_ms, p->policy,
                                p->retention_ms);
        }
        return err;
}

/* ------------------------------------------------------------------ */
/* ACLs                                                                */

/** The principal the brokers see, where it can be told; NULL where not
 *  (a client certificate, OAUTHBEARER, GSSAPI). */
static const char *principal_of(const sg_config_t *c, char *buf, size_t size) {
        const sg_kv_t *p =
                sg_preflight_kv2(c->kafka, c->kafka_cnt, c->kafka_producer,
                                 c->kafka_producer_cnt, "security.protocol");
        const sg_kv_t *m =
                sg_preflight_kv2(c->kafka, c->kafka_cnt, c->kafka_producer,
                                 c->kafka_producer_cnt, "sasl.mechanisms");
        const sg_kv_t *u =
                sg_preflight_kv2(c->kafka, c->kafka_cnt, c->kafka_producer,
                                 c->kafka_producer_cnt, "sasl.username");
        const sg_kv_t *cert = sg_preflight_kv2(
                c->kafka, c->kafka_cnt, c->kafka_producer,
                c->kafka_producer_cnt, "ssl.certificate.location");
        if (!m)
                m = sg_preflight_kv2(c->kafka, c->kafka_cnt, c->kafka_producer,
                                     c->kafka_producer_cnt, "sasl.mechanism");
        const char *proto = p ? p->value : "plaintext";
        if (!strcasecmp(proto, "plaintext") ||
            (!strcasecmp(proto, "ssl") && !cert))
                return "User:ANONYMOUS";
        if (!strncasecmp(proto, "sasl_", 5) && m && u &&
            !sg_config_kv_secret(u) &&
            (!strcasecmp(m->value, "PLAIN") ||
             !strncasecmp(m->value, "SCRAM-", 6))) {
                snprintf(buf, size, "User:%s", u->value);
                return buf;
        }
        return NULL;
}

/* One permission seqgate needs. */
typedef struct need {
        rd_kafka_ResourceType_t type; /* UNKNOWN: a transactional id */
        const char *name;
        rd_kafka_AclOperation_t op;
        const char *what; /* "consumer group", "topic", ... */
} need_t;

/** True if ACL @p a's resource pattern covers resource @p n. */
static bool acl_covers(const rd_kafka_AclBinding_t *a, const need_t *n) {
        if (rd_kafka_AclBinding_restype(a) != n->type)
                return false;
        const char *an = rd_kafka_AclBinding_name(a);
        switch (rd_kafka_AclBinding_resource_pattern_type(a)) {
        case RD_KAFKA_RESOURCE_PATTERN_LITERAL:
                return !strcmp(an, "*") || !strcmp(an, n->name);
        case RD_KAFKA_RESOURCE_PATTERN_PREFIXED:
                return !strncmp(an, n->name, strlen(an));
        default:
                return false;
        }
}

/** True if ACL operation @p acl grants or denies @p want (ALL covers all;
 *  an allowed READ or WRITE implies DESCRIBE, as Kafka's authorizer has
 *  it). */
static bool op_covers(rd_kafka_AclOperation_t acl, rd_kafka_AclOperation_t want,
                      bool allow) {
        if (acl == want || acl == RD_KAFKA_ACL_OPERATION_ALL)
                return true;
        return allow && want == RD_KAFKA_ACL_OPERATION_DESCRIBE &&
               (acl == RD_KAFKA_ACL_OPERATION_READ ||
                acl == RD_KAFKA_ACL_OPERATION_WRITE);
}

/* What the ACLs say of one need (need_scan). */
typedef struct need_verdict {
        bool any;     /* some ACL names the resource */
        bool allowed; /* one allows the principal the operation */
        const rd_kafka_AclBinding_t *deny; /* one denies it (NULL: none) */
} need_verdict_t;

/** Reads need @p n for principal @p who out of @p acls. */
static need_verdict_t need_scan(const need_t *n, const char *who,
                                const rd_kafka_AclBinding_t **acls,
                                size_t cnt) {
        need_verdict_t v = {false, false, NULL};
        for (size_t i = 0; i < cnt; i++) {
                const rd_kafka_AclBinding_t *a = acls[i];
                if (!acl_covers(a, n))
                        continue;
                v.any = true;
                const char *ap = rd_kafka_AclBinding_principal(a);
                if (strcmp(ap, who) && strcmp(ap, "User:*"))
                        continue;
                bool allow = rd_kafka_AclBinding_permission_type(a) ==
                             RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW;
                if (!op_covers(rd_kafka_AclBinding_operation(a), n->op, allow))
                        continue;
                if (!allow) {
                        v.deny = a;
                        return v;
                }
                v.allowed = true;
        }
        return v;
}

/** Judges need @p n for principal @p who against @p acls: a denying ACL
 *  or ACLs none of which allows it is an error; a resource no ACL names
 *  is appended to @p unnamed (one note for them all, by the caller). */
static sg_err_t need_check(pf_ctx_t *x, const need_t *n, const char *who,
                           const rd_kafka_AclBinding_t **acls, size_t cnt,
                           char *unnamed, size_t unnamed_size) {
        const char *opn = rd_kafka_AclOperation_name(n->op);
        need_verdict_t v = need_scan(n, who, acls, cnt);
        if (v.deny)
                return sg_preflight_add(
                        x->pf, SG_PF_ERROR,
                        "%s \"%s\": an ACL denies %s %s (%s %s, "
                        "host %s): seqgate needs it",
                        n->what, n->name, who, opn,
                        rd_kafka_ResourcePatternType_name(
                                rd_kafka_AclBinding_resource_pattern_type(
                                        v.deny)),
                        rd_kafka_AclBinding_name(v.deny),
                        rd_kafka_AclBinding_host(v.deny));
        if (v.allowed)
                return SG_OK;
        if (v.any)
                return sg_preflight_add(
                        x->pf, SG_PF_ERROR,
                        "%s \"%s\": no ACL allows %s %s (ACLs name "
                        "the resource, none allows this principal)",
                        n->what, n->name, who, opn);
        size_t l = strlen(unnamed);
        if (!strstr(unnamed, n->name))
                snprintf(unnamed + l, unnamed_size - l, "%s%s \"%s\"",
                         l ? ", " : "", n->what, n->name);
        return SG_OK;
}

/** exactly_once: a failover ends a dead instance's open transaction by
 *  init_transactions under its transactional id, <group.id>-<instance_id>
 *  (semantics §6 "Taking over from a dead owner"). Notes (never an error:
 *  without it a failover waits for the coordinator, as it used to) when
 *  the ACLs let this instance write its own transactional id but not the
 *  group's others: a literal ACL on its own, a denial, or none naming
 *  them while its own is named. */
static sg_err_t takeover_acl_check(pf_ctx_t *x, const char *who,
                                   const rd_kafka_AclBinding_t **acls,
                                   size_t cnt) {
        char other[600];
        /* a name no real instance has: only an ACL that covers every
         * <group.id>- id (prefixed, or "*") covers it */
        snprintf(other, sizeof(other), "%s-\x01", x->conf->group_id);
        need_t own = {RD_KAFKA_RESOURCE_UNKNOWN, x->conf->transactional_id,
                      RD_KAFKA_ACL_OPERATION_WRITE, "transactional id"};
        need_t sib = {RD_KAFKA_RESOURCE_UNKNOWN, other,
                      RD_KAFKA_ACL_OPERATION_WRITE, "transactional id"};
        need_verdict_t vo = need_scan(&own, who, acls, cnt);
        need_verdict_t vs = need_scan(&sib, who, acls, cnt);
        if (vo.deny || vs.allowed || (!vo.any && !vs.any))
                return SG_OK; /* an error already, fine, or one unnamed note */
        const char *why = vs.deny  ? "an ACL denies it"
                          : vs.any ? "no ACL allows it"
                                   : "no ACL names them, only this instance's "
                                     "own id";
        return sg_preflight_add(
                x->pf, SG_PF_NOTE,
                "transactional ids \"%s-*\" of the group's other instances: "
                "%s may not WRITE them (%s), so a failover cannot end a dead "
                "instance's open transaction at once and waits for the "
                "coordinator to abort it (transaction.timeout.ms plus the "
                "broker's abort check); grant WRITE on the prefix \"%s-\" "
                "(semantics §6 \"Taking over from a dead owner\")",
                x->conf->group_id, who, why, x->conf->group_id);
}

/** Every permission seqgate needs, against the ACLs (DescribeAcls).
 *  librdkafka 2.0.2 drops DescribeAcls' own error (no authorizer, or no
 *  DESCRIBE on the cluster): both come back as an empty list, like a
 *  cluster without ACLs, so an empty list checks nothing. */
static sg_err_t acls_check(pf_ctx_t *x, rd_kafka_queue_t *q) {
        char pbuf[512], es[256], unnamed[1024] = "";
        sg_err_t err = SG_OK;
        rd_kafka_AclBindingFilter_t *f = rd_kafka_AclBindingFilter_new(
                RD_KAFKA_RESOURCE_ANY, NULL, RD_KAFKA_RESOURCE_PATTERN_ANY,
                NULL, NULL, RD_KAFKA_ACL_OPERATION_ANY,
                RD_KAFKA_ACL_PERMISSION_TYPE_ANY, es, sizeof(es));
        if (!f)
                return SG_ERR_NOMEM;
        rd_kafka_AdminOptions_t *ao =
                pf_options(x->rk, RD_KAFKA_ADMIN_OP_DESCRIBEACLS);
        rd_kafka_DescribeAcls(x->rk, f, ao, q);
        rd_kafka_event_t *ev = pf_wait(q, RD_KAFKA_EVENT_DESCRIBEACLS_RESULT);
        rd_kafka_resp_err_t ee =
                ev ? rd_kafka_event_error(ev) : RD_KAFKA_RESP_ERR__TIMED_OUT;
        const char *who = principal_of(x->conf, pbuf, sizeof(pbuf));
        size_t cnt = 0;
        const rd_kafka_AclBinding_t **acls =
                ee ? NULL
                   : rd_kafka_DescribeAcls_result_acls(
                             rd_kafka_event_DescribeAcls_result(ev), &cnt);
        static const char *const needs =
                "seqgate needs READ on its consumer group, input and reply "
                "topics, WRITE on its output, DLQ and request topics, READ "
                "and WRITE on its changelog topics (CREATE for one that is "
                "missing), WRITE on its transactional id (exactly_once)";
        if (ee) {
                retry_on(x->pf, ee, false);
                err = sg_preflight_add(
                        x->pf, SG_PF_NOTE,
                        "permissions not checked: DescribeAcls: %s (%s)",
                        ev ? rd_kafka_event_error_string(ev)
                           : rd_kafka_err2str(ee),
                        needs);
        } else if (cnt == 0) {
                err = sg_preflight_add(
                        x->pf, SG_PF_NOTE,
                        "permissions not checked: no ACL described "
                        "(no authorizer, no ACLs, or no DESCRIBE on "
                        "the cluster: librdkafka 2.0.2 does not tell "
                        "them apart); %s",
                        needs);
        } else if (!who) {
                err = sg_preflight_add(
                        x->pf, SG_PF_NOTE,
                        "permissions not checked: the principal the "
                        "brokers see cannot be told from the "
                        "configuration (a client certificate, "
                        "OAUTHBEARER or GSSAPI); %s",
                        needs);
        } else {
                need_t n[2];
                size_t nn = 0;
                if (x->conf->group_id)
                        n[nn++] = (need_t){
                                RD_KAFKA_RESOURCE_GROUP, x->conf->group_id,
                                RD_KAFKA_ACL_OPERATION_READ, "consumer group"};
                if (x->conf->transactional_id)
                        n[nn++] = (need_t){RD_KAFKA_RESOURCE_UNKNOWN,
                                           x->conf->transactional_id,
                                           RD_KAFKA_ACL_OPERATION_WRITE,
                                           "transactional id"};
                for (size_t i = 0; !err && i < nn; i++)
                        err = need_check(x, &n[i], who, acls, cnt, unnamed,
                                         sizeof(unnamed));
                if (!err && x->conf->transactional_id && x->conf->group_id)
                        err = takeover_acl_check(x, who, acls, cnt);
                for (size_t i = 0; !err && i < x->cnt; i++) {
                        const ptopic_t *p = &x->t[i];
                        bool dup = false;
                        for (size_t j = 0; j < i; j++)
                                dup |= !strcmp(x->t[j].name, p->name);
                        if (dup)
                                continue;
                        need_t t = {RD_KAFKA_RESOURCE_TOPIC, p->name,
                                    RD_KAFKA_ACL_OPERATION_READ,
                                    ROLE_NAMES[p->role]};
                        if (p->role == R_INPUT || p->role == R_REPLY ||
                            p->role == R_CHANGELOG)
                                err = need_check(x, &t, who, acls, cnt, unnamed,
                                                 sizeof(unnamed));
                        t.op = RD_KAFKA_ACL_OPERATION_WRITE;
                        if (!err && p->role != R_INPUT && p->role != R_REPLY)
                                err = need_check(x, &t, who, acls, cnt, unnamed,
                                                 sizeof(unnamed));
                        t.op = RD_KAFKA_ACL_OPERATION_CREATE;
                        if (!err && p->role == R_CHANGELOG && !p->md)
                                err = need_check(x, &t, who, acls, cnt, unnamed,
                                                 sizeof(unnamed));
                }
                if (!err && unnamed[0])
                        err = sg_preflight_add(
                                x->pf, SG_PF_NOTE,
                                "no ACL names %s: %s may use them only "
                                "if the brokers set "
                                "allow.everyone.if.no.acl.found=true or "
                                "it is a super user",
                                unnamed, who);
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(ao);
        rd_kafka_AclBinding_destroy(f);
        return err;
}

/* ------------------------------------------------------------------ */
/* the consumer group                                                   */

sg_err_t sg_preflight_group(const sg_config_t *conf, sg_preflight_t *pf) {
        char es[512] = "";
        sg_kafka_log_t klog = {.conf = conf};
        rd_kafka_conf_t *kc = NULL;
        rd_kafka_t *rk = NULL;
        if (!conf->group_id || conf->topic_cnt == 0)
                return SG_OK;
        if (sg_kafka_conf_new(conf, SG_KAFKA_GROUP_CONSUMER, NULL, &klog, &kc,
                              es, sizeof(es)) ||
            !(rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, es, sizeof(es)))) {
                if (kc && !rk)
                        rd_kafka_conf_destroy(kc);
                return sg_preflight_add(pf, SG_PF_NOTE,
                                        "consumer group \"%s\" not checked: %s",
                                        conf->group_id, es);
        }
        /* OffsetFetch needs DESCRIBE on the group, which READ implies; it
         * reads, joins nothing and changes nothing */
        rd_kafka_topic_partition_list_t *l =
                rd_kafka_topic_partition_list_new((int)conf->topic_cnt);
        for (size_t i = 0; i < conf->topic_cnt; i++)
                rd_kafka_topic_partition_list_add(l, conf->topics[i].name, 0);
        rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, PF_TIMEOUT_MS);
        sg_err_t err = SG_OK;
        if (e == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
                err = sg_preflight_add(
                        pf, SG_PF_ERROR,
                        "consumer group \"%s\": not authorized to "
                        "fetch its offsets (GROUP_AUTHORIZATION_FAILED): "
                        "seqgate needs READ on it",
                        conf->group_id);
        else if (e)
                err = sg_preflight_add(
                        pf, SG_PF_NOTE,
                        "consumer group \"%s\" not checked: fetching "
                        "its offsets: %s",
                        conf->group_id, rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(rk);
        return err;
}

/* ------------------------------------------------------------------ */
/* the pass                                                            */

sg_err_t sg_preflight_cluster(const sg_config_t *conf, rd_kafka_t *rk,
                              bool changelogs, sg_preflight_t *pf) {
        pf_ctx_t x = {
                .conf = conf, .rk = rk, .pf = pf, .changelogs = changelogs};
        pf->retry = RD_KAFKA_RESP_ERR_NO_ERROR;
        rd_kafka_resp_err_t e =
                rd_kafka_metadata(rk, 1, NULL, &x.md, SG_METADATA_TIMEOUT_MS);
        if (e) {
                /* named, so that a wrong host or port is seen in the log
                 * alone (a value from the environment is not shown) */
                const char *bs = "(none)";
                for (size_t i = 0; i < conf->kafka_cnt; i++)
                        if (!strcmp(conf->kafka[i].name, "bootstrap.servers"))
                                bs = sg_config_kv_secret(&conf->kafka[i])
                                             ? "*** (from the environment)"
                                             : conf->kafka[i].value;
                retry_on(pf, e, false);
                sg_err_t err = sg_preflight_add(
                        pf, SG_PF_ERROR,
                        "reading cluster metadata from bootstrap.servers "
                        "%s: %s",
                        bs, rd_kafka_err2str(e));
                if (!err)
                        pf->items[pf->cnt - 1].retriable =
                                sg_kafka_err_retriable(e, false);
                return err;
        }
        /* librdkafka's mock cluster answers no admin request (2.0.2: they
         * time out); it is told by its cluster id */
        char *cid = rd_kafka_clusterid(rk, SG_METADATA_TIMEOUT_MS);
        x.admin = !(cid && !strncmp(cid, "mockCluster", 11));
        if (cid)
                rd_kafka_mem_free(rk, cid);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        sg_err_t err = topics_collect(&x);
        if (!err)
                err = topics_check(&x);
        if (!err && x.admin)
                err = configs_describe(&x, q);
        if (!err && x.admin)
                err = configs_check(&x);
        if (!err && x.admin)
                err = acls_check(&x, q);
        rd_kafka_queue_destroy(q);
        free(x.t);
        rd_kafka_metadata_destroy(x.md);
        return err;
}

/* ------------------------------------------------------------------ */
/* the daemon's start-up                                               */

/** Logs every finding: an error as "<what>_problem", a warning as
 *  "<what>_warning", a note as "<what>_note" (info). */
static void log_findings(sg_loop_t *loop, const sg_preflight_t *pf,
                         const char *what) {
        static const struct {
                sg_log_level_t level;
                const char *kind;
        } how[] = {[SG_PF_ERROR] = {SG_LOG_ERR, "problem"},
                   [SG_PF_WARNING] = {SG_LOG_WARNING, "warning"},
                   [SG_PF_NOTE] = {SG_LOG_INFO, "note"}};
        char event[64];
        for (size_t i = 0; i < pf->cnt; i++) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "problem", pf->items[i].text);
                snprintf(event, sizeof(event), "%s_%s", what,
                         how[pf->items[i].sev].kind);
                sg_loop_log(loop, how[pf->items[i].sev].level, event, f);
        }
}

/** errstr: the count and every error, "; "-separated (cut at its size). */
static void findings_errstr(const sg_preflight_t *pf, const char *what,
                            const char *event, char *errstr,
                            size_t errstr_size) {
        size_t off = 0;
        int w = snprintf(errstr, errstr_size,
                         "%zu problem%s %s (each in a %s line): ", pf->errors,
                         pf->errors == 1 ? "" : "s", what, event);
        off = w > 0 && (size_t)w < errstr_size ? (size_t)w : 0;
        for (size_t i = 0, n = 0; i < pf->cnt && off < errstr_size; i++) {
                if (pf->items[i].sev != SG_PF_ERROR)
                        continue;
                w = snprintf(errstr + off, errstr_size - off, "%s%s",
                             n++ ? "; " : "", pf->items[i].text);
                if (w < 0)
                        break;
                off += (size_t)w;
        }
}

sg_err_t sg_loop_preflight_files(sg_loop_t *loop, char *errstr,
                                 size_t errstr_size) {
        sg_preflight_t pf = {0};
        sg_err_t err = sg_preflight_files(loop->conf, &pf);
        if (!err) {
                log_findings(loop, &pf, "kafka_file");
                if (pf.errors) {
                        findings_errstr(
                                &pf, "with files the Kafka clients read",
                                "kafka_file_problem", errstr, errstr_size);
                        err = SG_ERR_CONFIG;
                }
        } else {
                sg_errf(errstr, errstr_size, "out of memory");
        }
        sg_preflight_clear(&pf);
        return err;
}

sg_err_t sg_loop_preflight(sg_loop_t *loop, char *errstr, size_t errstr_size) {
        sg_retry_t r;
        sg_retry_init(&r, "cluster preflight");
        for (;;) {
                sg_preflight_t pf = {0};
                bool gave_up = false;
                sg_err_t err = sg_preflight_cluster(loop->conf, loop->producer,
                                                    loop->changelog, &pf);
                if (err) {
                        sg_preflight_clear(&pf);
                        sg_errf(errstr, errstr_size, "out of memory");
                        return err;
                }
                /* every error a passing state of the cluster (a leader
                 * being elected): all again, later; one that is not is
                 * reported at once, with the others */
                size_t lasting = 0;
                const char *first = NULL;
                for (size_t i = 0; i < pf.cnt; i++) {
                        if (pf.items[i].sev != SG_PF_ERROR)
                                continue;
                        lasting += !pf.items[i].retriable;
                        if (!first)
                                first = pf.items[i].text;
                }
                if (pf.errors && !lasting && pf.retry &&
                    sg_retry_again(loop, &r, pf.retry, false, first,
                                   &gave_up)) {
                        sg_preflight_clear(&pf);
                        continue;
                }
                log_findings(loop, &pf, "cluster");
                if (pf.errors) {
                        findings_errstr(&pf, "with the cluster",
                                        "cluster_problem", errstr, errstr_size);
                        /* only retriable ones, out of time: exit 1, so a
                         * supervisor starts it again */
                        err = lasting ? SG_ERR_CONFIG : SG_ERR_KAFKA;
                        if (!lasting && gave_up)
                                sg_errf(errstr + strlen(errstr),
                                        errstr_size - strlen(errstr),
                                        " (retriable; retried for "
                                        "broker_retry_timeout_ms)");
                }
                sg_preflight_clear(&pf);
                return err;
        }
}
