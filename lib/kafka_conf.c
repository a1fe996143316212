/*
 * kafka_conf.c — the Kafka loop (kafka.h): client configuration. One
 * sg_kafka_conf_new() builds every client's rd_kafka_conf_t from the
 * config — the properties (kafka.h "Properties"), the ones seqgate
 * controls, and the log and error callbacks that route librdkafka's lines
 * through the secret redaction (kafka_redact.c) — for the loop's three
 * clients and for seqgatectl's.
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/** Sets one property; a secret's value (@p hide) never reaches errstr. */
static sg_err_t conf_set_hidden(rd_kafka_conf_t *kc, const char *name,
                                const char *value, bool hide, char *errstr,
                                size_t errstr_size) {
        char es[512];
        if (rd_kafka_conf_set(kc, name, value, es, sizeof(es)) ==
            RD_KAFKA_CONF_OK)
                return SG_OK;
        if (hide)
                sg_errf(errstr, errstr_size,
                        "kafka property \"%s\": invalid value (not shown: "
                        "secret)",
                        name);
        else
                sg_errf(errstr, errstr_size, "kafka property \"%s\": %s", name,
                        es);
        return SG_ERR_CONFIG;
}

/** Sets one property seqgate chose or a property of the config. */
static sg_err_t conf_set(rd_kafka_conf_t *kc, const char *name,
                         const char *value, char *errstr, size_t errstr_size) {
        return conf_set_hidden(kc, name, value, sg_config_is_secret(name),
                               errstr, errstr_size);
}

/** Sets property @p kv of the config (sg_config_kv_secret()). */
static sg_err_t conf_set_kv(rd_kafka_conf_t *kc, const sg_kv_t *kv,
                            char *errstr, size_t errstr_size) {
        return conf_set_hidden(kc, kv->name, kv->value, sg_config_kv_secret(kv),
                               errstr, errstr_size);
}

static sg_err_t conf_set_list(rd_kafka_conf_t *kc, const sg_kv_t *kv,
                              size_t cnt, bool producer, char *errstr,
                              size_t errstr_size) {
        for (size_t i = 0; i < cnt; i++) {
                /* The required kafka.group.id only makes a producer warn. */
                if (producer && !strcmp(kv[i].name, "group.id"))
                        continue;
                sg_err_t err = conf_set_kv(kc, &kv[i], errstr, errstr_size);
                if (err)
                        return err;
        }
        return SG_OK;
}

/* The group consumer's or a producer's properties: defaults, then "kafka",
 * then "kafka_consumer" / "kafka_producer", then the controlled ones. */
static sg_err_t conf_member(rd_kafka_conf_t *kc, const sg_config_t *conf,
                            bool consumer, bool txn, char *errstr,
                            size_t errstr_size) {
        bool eos = conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE;
        sg_err_t err = SG_OK;
        static const char *const cdefs[][2] = {
                {"enable.auto.commit", "false"},
                {"enable.auto.offset.store", "false"},
                {"auto.offset.reset", "earliest"},
                /* the end a read_committed consumer can read to (the
                 * consumer lag, kafka.c loop_gauges) */
                {"enable.partition.eof", "true"},
                /* a smaller prefetch queue (docs/operating.md "Memory") */
                {"queued.max.messages.kbytes", SG_KAFKA_QUEUED_MAX_KBYTES},
        };
        static const char *const pdefs[][2] = {
                {"enable.idempotence", "true"},
                {"acks", "all"},
                {"linger.ms", "5"},
                /* Java client's partitioner for records without a
                 * partition (output_partitioning murmur2, semantics §5). */
                {"partitioner", "murmur2_random"},
        };
        const char *const(*defs)[2] = consumer ? cdefs : pdefs;
        size_t ndefs = consumer ? sizeof(cdefs) / sizeof(cdefs[0])
                                : sizeof(pdefs) / sizeof(pdefs[0]);

        for (size_t i = 0; !err && i < ndefs; i++)
                err = conf_set(kc, defs[i][0], defs[i][1], errstr, errstr_size);
        /* exactly_once: a dead instance's open transaction holds back the
         * changelog's and the input's stable offsets until it times out;
         * 10 s (Kafka Streams' exactly-once default) rather than 60 s keeps
         * a partition's failover short. The transaction spans only the
         * produce → commit of one batch. */
        if (!err && txn)
                err = conf_set(kc, "transaction.timeout.ms", "10000", errstr,
                               errstr_size);
        if (!err)
                err = conf_set(kc, "log.queue", "true", errstr, errstr_size);
        if (!err && consumer && conf->group_id)
                err = conf_set(kc, "group.id", conf->group_id, errstr,
                               errstr_size);
        if (!err)
                err = conf_set_list(kc, conf->kafka, conf->kafka_cnt, !consumer,
                                    errstr, errstr_size);
        if (!err && consumer)
                err = conf_set_list(kc, conf->kafka_consumer,
                                    conf->kafka_consumer_cnt, false, errstr,
                                    errstr_size);
        if (!err && !consumer)
                err = conf_set_list(kc, conf->kafka_producer,
                                    conf->kafka_producer_cnt, true, errstr,
                                    errstr_size);
        if (!err && !consumer && !txn)
                /* semantics §6 "Output order": a produce request that
                 * fails for good must stop the producer, never let a later
                 * record of its partition land (librdkafka would bump the
                 * epoch and send the later records: a gap, and the re-read
                 * batch's records after them). A fatal error instead; the
                 * loop replaces the producer (config_kafka.c refuses
                 * false). A transactional producer aborts instead. */
                err = conf_set(kc, "enable.gapless.guarantee", "true", errstr,
                               errstr_size);
        if (!err && eos && consumer)
                /* exactly_once: aborted input is never judged (config.c
                 * refuses any other value). */
                err = conf_set(kc, "isolation.level", "read_committed", errstr,
                               errstr_size);
        if (!err && txn) {
                /* Stable per instance (<group.id>-<instance_id>): a
                 * restarted instance fences its zombie (KIP-98). */
                char id[512];
                err = conf_set(kc, "transactional.id",
                               sg_loop_transactional_id(conf, id, sizeof(id)),
                               errstr, errstr_size);
        }
        if (!err && !consumer) {
                /* semantics §6: idempotent producer, acks=all. */
                char v[32];
                size_t vs = sizeof(v);
                if (rd_kafka_conf_get(kc, "enable.idempotence", v, &vs) ==
                            RD_KAFKA_CONF_OK &&
                    strcmp(v, "true")) {
                        sg_errf(errstr, errstr_size,
                                "kafka property \"enable.idempotence\" must be "
                                "true (semantics §6)");
                        err = SG_ERR_CONFIG;
                }
                vs = sizeof(v);
                if (!err &&
                    rd_kafka_conf_get(kc, "acks", v, &vs) == RD_KAFKA_CONF_OK &&
                    strcmp(v, "all") && strcmp(v, "-1")) {
                        sg_errf(errstr, errstr_size,
                                "kafka property \"acks\" must be all "
                                "(semantics §6)");
                        err = SG_ERR_CONFIG;
                }
        }
        return err;
}

/**
 * Why rd_kafka_new() failed, as seqgate reports it: librdkafka refuses a
 * configuration it cannot use only when the client is created (a key or
 * certificate file that does not exist or does not parse, an SSL or SASL
 * setting that does not fit; RD_KAFKA_RESP_ERR__INVALID_ARG), which is a
 * configuration error (exit 2: restarting will not fix it), not a runtime
 * one. Its errstr names the property (test_kafka_startup.c checks that a
 * secret PEM is not quoted in it).
 */
static sg_err_t client_new_err(void) {
        return rd_kafka_last_error() == RD_KAFKA_RESP_ERR__INVALID_ARG
                       ? SG_ERR_CONFIG
                       : SG_ERR_KAFKA;
}

/** Properties of the group consumer that a group-less consumer must not
 *  take (the restore consumer), or that it sets itself. */
static bool restorer_skips(const char *name) {
        static const char *const skip[] = {
                "partition.assignment.strategy",
                "session.timeout.ms",
                "heartbeat.interval.ms",
                "max.poll.interval.ms",
                "enable.auto.commit",
                "auto.commit.interval.ms",
                "enable.auto.offset.store",
                "auto.offset.reset",
                "isolation.level",
                "enable.partition.eof",
        };
        if (!strncmp(name, "group.", 6))
                return true;
        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
                if (!strcmp(name, skip[i]))
                        return true;
        return false;
}

/* A group-less reader's properties (the changelog restore consumer):
 * "kafka" and "kafka_consumer" minus the consumer group's own, then the
 * controlled ones, then group.id @p group. */
static sg_err_t conf_reader(rd_kafka_conf_t *kc, const sg_config_t *conf,
                            const char *group, char *errstr,
                            size_t errstr_size) {
        static const char *const rdefs[][2] = {
                {"enable.auto.commit", "false"},
                {"enable.auto.offset.store", "false"},
                {"isolation.level", "read_committed"},
                {"enable.partition.eof", "true"},
                /* a checkpoint the log no longer holds is restore_begin's
                 * business, never a silent jump */
                {"auto.offset.reset", "error"},
                /* the end of a partition is found by an empty fetch: do not
                 * let the broker hold it 500 ms */
                {"fetch.wait.max.ms", "10"},
                {"log.queue", "true"},
        };
        sg_err_t err = SG_OK;
        for (size_t i = 0; !err && i < conf->kafka_cnt; i++)
                if (!restorer_skips(conf->kafka[i].name))
                        err = conf_set_kv(kc, &conf->kafka[i], errstr,
                                          errstr_size);
        for (size_t i = 0; !err && i < conf->kafka_consumer_cnt; i++)
                if (!restorer_skips(conf->kafka_consumer[i].name))
                        err = conf_set_kv(kc, &conf->kafka_consumer[i], errstr,
                                          errstr_size);
        for (size_t i = 0; !err && i < sizeof(rdefs) / sizeof(rdefs[0]); i++)
                err = conf_set(kc, rdefs[i][0], rdefs[i][1], errstr,
                               errstr_size);
        /* librdkafka 2.0.2 refuses assign() without a group.id ("Unknown
         * group"); this one is never joined (no subscribe) and never
         * commits. */
        if (!err)
                err = conf_set(kc, "group.id", group, errstr, errstr_size);
        return err;
}

/* A librdkafka log line's text without its "[thrd:NAME]: " prefix. */
static const char *log_text(const char *buf) {
        if (strncmp(buf, "[thrd:", 6) != 0)
                return buf;
        const char *end = strstr(buf, "]: ");
        return end ? end + 3 : buf;
}

/* The configuration warnings seqgate's own settings make librdkafka write
 * each time a client is made (facility CONFWARN, "Configuration property
 * NAME is experimental: ..."): the property, and why seqgate sets it all
 * the same. Such a warning tells an operator nothing, so cb_log writes it
 * at debug; a warning about any other property keeps its level. */
static const struct intended_warning {
        const char *property; /* librdkafka's name */
        const char *why;      /* why seqgate sets it */
} intended_warnings[] = {
        {"enable.gapless.guarantee",
         "experimental in librdkafka; sg_kafka_conf_new sets it on every "
         "non-transactional producer so that a produce request failed for "
         "good stops the producer instead of sending the partition's later "
         "records (semantics §6 \"Output order\")"},
};

/* Whether CONFWARN line @p text (log_text: without its thread prefix) is
 * about a property of intended_warnings[]. */
static bool warning_intended(const char *text) {
        static const char pre[] = "Configuration property ";
        if (strncmp(text, pre, sizeof(pre) - 1) != 0)
                return false;
        const char *name = text + sizeof(pre) - 1;
        size_t len = strcspn(name, " :");
        for (size_t i = 0;
             i < sizeof(intended_warnings) / sizeof(intended_warnings[0]); i++)
                if (strlen(intended_warnings[i].property) == len &&
                    !strncmp(name, intended_warnings[i].property, len))
                        return true;
        return false;
}

/* rd_kafka_conf_set_log_cb: a librdkafka log line, as event "librdkafka"
 * (redacted, sg_kafka_log_emit). The client's opaque is its
 * sg_kafka_log_t. A broker failure ("FAIL") is not written: the client
 * error with its text follows, and writes the one line (sg_kafka_log_t). */
static void cb_log(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
        sg_kafka_log_t *lg = rd_kafka_opaque(rk);
        if (!lg)
                return;
        /* A transaction that could not take a partition because an ACL is
         * missing: librdkafka 2.0.2 says so only here (facility ADDPARTS,
         * "Failed to add partition \"T\" [p] to transaction: Broker:
         * Topic authorization failed"); the transaction's own error, and
         * the abort's after it, do not name the topic. */
        const char *q1;
        if (!strcmp(fac, "ADDPARTS") && strstr(buf, "authorization failed") &&
            (q1 = strchr(buf, '"')) && strchr(q1 + 1, '"')) {
                char res[300];
                snprintf(res, sizeof(res), "topic %.*s",
                         (int)(strchr(q1 + 1, '"') - q1 + 1), q1);
                sg_kafka_acl_note(lg, (rd_kafka_t *)rk,
                                  RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                                  "Write", res);
        }
        if (!lg->log_cb)
                return;
        if (!strcmp(fac, "FAIL") && level < SG_LOG_DEBUG) {
                /* (a debug FAIL line, debug=broker, has no error after it) */
                unsigned i = lg->fail_next++ % SG_KAFKA_FAIL_PENDING;
                snprintf(lg->fail[i].client, sizeof(lg->fail[i].client), "%s",
                         rd_kafka_name(rk));
                snprintf(lg->fail[i].text, sizeof(lg->fail[i].text), "%s",
                         log_text(buf));
                lg->fail[i].level = level;
                return;
        }
        /* a warning about a property seqgate sets on purpose: debug */
        if (!strcmp(fac, "CONFWARN") && level < SG_LOG_DEBUG &&
            warning_intended(log_text(buf)))
                level = SG_LOG_DEBUG;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "client", rd_kafka_name(rk));
        cJSON_AddStringToObject(f, "fac", fac);
        cJSON_AddStringToObject(f, "message", buf);
        if (level < SG_LOG_ERR)
                level = SG_LOG_ERR;
        if (level > SG_LOG_DEBUG)
                level = SG_LOG_DEBUG;
        sg_kafka_log_emit(lg, (sg_log_level_t)level, "librdkafka", f);
}

/* The level of client error @p err of @p client with text @p reason: the
 * level of the FAIL line it pairs with (taken out of fail[]), else
 * warning (error when fatal); never worse than warning when it passes by
 * itself. */
static sg_log_level_t error_level(sg_kafka_log_t *lg, const char *client,
                                  rd_kafka_resp_err_t err, const char *reason) {
        int level =
                err == RD_KAFKA_RESP_ERR__FATAL ? SG_LOG_ERR : SG_LOG_WARNING;
        for (unsigned i = 0; i < SG_KAFKA_FAIL_PENDING; i++) {
                if (!lg->fail[i].client[0] ||
                    strcmp(lg->fail[i].client, client) != 0 ||
                    strcmp(lg->fail[i].text, reason) != 0)
                        continue;
                level = lg->fail[i].level;
                lg->fail[i].client[0] = '\0';
                break;
        }
        if (level < SG_LOG_ERR)
                level = SG_LOG_ERR;
        if (level > SG_LOG_DEBUG)
                level = SG_LOG_DEBUG;
        if (level < SG_LOG_WARNING &&
            (sg_kafka_err_retriable(err, true) ||
             err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN))
                level = SG_LOG_WARNING;
        return (sg_log_level_t)level;
}

/* rd_kafka_conf_set_error_cb: a client error, as event "kafka_error" (the
 * one line of a broker event: sg_kafka_log_t); a refused login is kept for
 * sg_kafka_auth_failed(). */
static void cb_error(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque) {
        sg_kafka_log_t *lg = opaque;
        int none = 0;
        if (!reason) /* NULL was allowed below only: now everywhere */
                reason = "";
        if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION &&
            atomic_compare_exchange_strong(&lg->auth_state, &none, 1)) {
                snprintf(lg->auth_reason, sizeof(lg->auth_reason), "%s",
                         reason);
                atomic_store(&lg->auth_state, 2);
        }
        sg_log_level_t level = error_level(lg, rd_kafka_name(rk),
                                           (rd_kafka_resp_err_t)err, reason);
        if (level <= SG_LOG_WARNING) {
                lg->errors++;
                if (!lg->errors_since_ms)
                        lg->errors_since_ms = sg_clock_mono_ms();
                snprintf(lg->last_error, sizeof(lg->last_error), "%s",
                         rd_kafka_err2name(err));
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "client", rd_kafka_name(rk));
        cJSON_AddStringToObject(f, "error", rd_kafka_err2name(err));
        cJSON_AddStringToObject(f, "reason", reason);
        sg_kafka_log_emit(lg, level, "kafka_error", f);
}

sg_err_t sg_kafka_conf_new(const sg_config_t *conf, sg_kafka_client_t client,
                           const char *reader_group, sg_kafka_log_t *log,
                           rd_kafka_conf_t **kcp, char *errstr,
                           size_t errstr_size) {
        if (!conf || !log || !kcp ||
            (client == SG_KAFKA_READER && !reader_group) ||
            (client == SG_KAFKA_TXN_PRODUCER && !conf->transactional_id &&
             !conf->group_id)) {
                sg_errf(errstr, errstr_size,
                        "sg_kafka_conf_new: invalid argument");
                return SG_ERR_INVALID;
        }
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        sg_err_t err = client == SG_KAFKA_READER
                               ? conf_reader(kc, conf, reader_group, errstr,
                                             errstr_size)
                               : conf_member(kc, conf,
                                             client == SG_KAFKA_GROUP_CONSUMER,
                                             client == SG_KAFKA_TXN_PRODUCER,
                                             errstr, errstr_size);
        if (err) {
                rd_kafka_conf_destroy(kc);
                return err;
        }
        rd_kafka_conf_set_opaque(kc, log);
        rd_kafka_conf_set_log_cb(kc, cb_log);
        rd_kafka_conf_set_error_cb(kc, cb_error);
        *kcp = kc;
        return SG_OK;
}

/* The value of client property @p name of @p rk into @p buf; "" when
 * unset or unknown. */
static const char *client_prop(rd_kafka_t *rk, const char *name, char *buf,
                               size_t size) {
        size_t n = size;
        buf[0] = '\0';
        if (!rk || rd_kafka_conf_get(rd_kafka_conf(rk), name, buf, &n) !=
                           RD_KAFKA_CONF_OK)
                buf[0] = '\0';
        return buf;
}

/* Whether @p rk logs in with SASL PLAIN or SCRAM (its principal is then
 * User:<sasl.username>). */
static bool sasl_user(rd_kafka_t *rk) {
        char proto[32], mech[64];
        client_prop(rk, "security.protocol", proto, sizeof(proto));
        client_prop(rk, "sasl.mechanisms", mech, sizeof(mech));
        return !strncasecmp(proto, "sasl_", 5) &&
               (!strcasecmp(mech, "PLAIN") || !strncasecmp(mech, "SCRAM", 5));
}

bool sg_kafka_auth_failed(sg_kafka_log_t *log, rd_kafka_t *rk, char *buf,
                          size_t size) {
        if (atomic_load(&log->auth_state) != 2)
                return false;
        char proto[32], mech[64], user[256] = "";
        client_prop(rk, "security.protocol", proto, sizeof(proto));
        client_prop(rk, "sasl.mechanisms", mech, sizeof(mech));
        if (sasl_user(rk))
                client_prop(rk, "sasl.username", user, sizeof(user));
        /* librdkafka before 2.6.1 sends the client nonce twice in its SCRAM
         * final message; Kafka 4 checks the nonce as RFC 5802 says and
         * refuses the login even with the right password (librdkafka pull
         * request 4895) */
        bool old_scram = !strncasecmp(mech, "SCRAM", 5) &&
                         rd_kafka_version() < 0x020601ff;
        char who[320] = "", over[48] = "";
        if (*user)
                snprintf(who, sizeof(who), "sasl.username \"%s\", ", user);
        if (*proto)
                snprintf(over, sizeof(over), " over %s", proto);
        snprintf(buf, size,
                 "a Kafka broker refused seqgate's login (%s%s%s): %s; "
                 "check sasl.username and sasl.password%s%s",
                 who, *mech ? mech : "no SASL mechanism", over,
                 log->auth_reason, old_scram ? "; note: librdkafka " : "",
                 old_scram ? "before 2.6.1 (this is "
                             "older) cannot log in with SCRAM to Kafka 4.0 "
                             "or later even with the right password; use "
                             "sasl.mechanisms PLAIN over SASL_SSL there"
                           : "");
        return true;
}

bool sg_kafka_unauthorized(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                           const char *operation, const char *resource,
                           char *buf, size_t size) {
        switch (err) {
        case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                break;
        default:
                return false;
        }
        char user[256] = "";
        if (sasl_user(rk))
                client_prop(rk, "sasl.username", user, sizeof(user));
        snprintf(buf, size,
                 "not authorized (%s): %s%s needs an ACL allowing %s on %s",
                 rd_kafka_err2str(err), *user ? "User:" : "",
                 *user ? user : "this client's principal", operation, resource);
        return true;
}

bool sg_kafka_acl_note(sg_kafka_log_t *log, rd_kafka_t *rk,
                       rd_kafka_resp_err_t err, const char *operation,
                       const char *resource) {
        char msg[sizeof(log->acl_denied)];
        if (!sg_kafka_unauthorized(rk, err, operation, resource, msg,
                                   sizeof(msg)))
                return false;
        int none = 0;
        if (atomic_compare_exchange_strong(&log->acl_state, &none, 1)) {
                memcpy(log->acl_denied, msg, sizeof(msg));
                atomic_store(&log->acl_state, 2);
        }
        return true;
}

bool sg_kafka_acl_denied(sg_kafka_log_t *log, char *buf, size_t size) {
        if (atomic_load(&log->acl_state) != 2)
                return false;
        snprintf(buf, size, "%s", log->acl_denied);
        return true;
}

const char *sg_loop_transactional_id(const sg_config_t *conf, char *buf,
                                     size_t size) {
        if (conf->transactional_id)
                return conf->transactional_id;
        snprintf(buf, size, "%s-%s", conf->group_id ? conf->group_id : "",
                 conf->instance_id ? conf->instance_id : "seqgate");
        return buf;
}

/* Creates a client of the loop from @p kc (consumed: destroyed on failure)
 * with its logs served by the loop's polls; @p what names it in errstr. */
static sg_err_t loop_client(rd_kafka_type_t type, rd_kafka_conf_t *kc,
                            const char *what, rd_kafka_t **rkp, char *errstr,
                            size_t errstr_size) {
        char es[512];
        rd_kafka_t *rk = rd_kafka_new(type, kc, es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "creating the %s: %s", what, es);
                return client_new_err();
        }
        rd_kafka_set_log_queue(rk, NULL); /* logs served by poll */
        if (type == RD_KAFKA_CONSUMER)
                rd_kafka_poll_set_consumer(rk);
        *rkp = rk;
        return SG_OK;
}

/** The changelog restore consumer (both guarantees) — never joins a
 *  consumer group (only assign(), no offsets committed); read_committed;
 *  EOF reported at the stable end. */
sg_err_t sg_loop_restorer_new(sg_loop_t *loop, char *errstr,
                              size_t errstr_size) {
        rd_kafka_conf_t *kc;
        sg_err_t err = sg_kafka_conf_new(loop->conf, SG_KAFKA_READER,
                                         loop->restore_group, &loop->klog, &kc,
                                         errstr, errstr_size);
        if (!err)
                err = loop_client(RD_KAFKA_CONSUMER, kc,
                                  "changelog restore consumer", &loop->restorer,
                                  errstr, errstr_size);
        return err;
}

sg_err_t sg_loop_client_new(sg_loop_t *loop, bool consumer, rd_kafka_t **rkp,
                            char *errstr, size_t errstr_size) {
        rd_kafka_conf_t *kc;
        sg_kafka_client_t client = consumer    ? SG_KAFKA_GROUP_CONSUMER
                                   : loop->eos ? SG_KAFKA_TXN_PRODUCER
                                               : SG_KAFKA_PRODUCER;
        sg_err_t err = sg_kafka_conf_new(loop->conf, client, NULL, &loop->klog,
                                         &kc, errstr, errstr_size);
        if (err)
                return err;
        if (consumer)
                rd_kafka_conf_set_rebalance_cb(kc, sg_loop_cb_rebalance);
        else
                rd_kafka_conf_set_dr_msg_cb(kc, sg_loop_cb_dr);
        return loop_client(consumer ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, kc,
                           consumer ? "consumer" : "producer", rkp, errstr,
                           errstr_size);
}
