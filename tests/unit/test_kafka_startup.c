/*
 * test_kafka_startup.c — the Kafka loop's start-up on librdkafka's mock
 * cluster: the topic checks, retriable and non-retriable broker errors,
 * and secrets never in an errstr or a log line. The harness:
 * kafka_harness.h.
 *
 * SG_TEST_ONLY=<test name> runs one test; SG_TEST_VERBOSE=1 prints the
 * loop's log events.
 */
#include "kafka_harness.h"

/* ------------------------------------------------------------------ */
/* (6) start-up topic checks                                           */

static sg_err_t try_new(const char *topics, char *es, size_t es_size) {
        sg_config_t *conf = conf_parse(g_bs, topics, NULL);
        sg_passthrough_t *pt;
        sg_processor_t proc;
        sg_loop_t *loop = NULL;
        ck_assert_int_eq(sg_passthrough_new(conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &proc);
        es[0] = '\0';
        sg_err_t err = sg_loop_new(conf, &proc, log_cb, &g_logs, NULL, NULL,
                                   &loop, es, es_size);
        if (err == SG_OK)
                ck_assert_ptr_nonnull(loop);
        sg_loop_destroy(loop);
        sg_passthrough_destroy(pt);
        sg_config_destroy(conf);
        return err;
}

START_TEST(startup_topic_checks) {
        char es[512];
        /* "b" has 3 partitions; "b.out" 2, "b.out4" 4. */
        ck_assert_int_eq(rd_kafka_mock_topic_create(g_mc, "b", 3, 1), 0);
        ck_assert_int_eq(rd_kafka_mock_topic_create(g_mc, "b.out", 2, 1), 0);
        ck_assert_int_eq(rd_kafka_mock_topic_create(g_mc, "b.out4", 4, 1), 0);

        ck_assert_int_eq(try_new(TOPICS_IN, es, sizeof(es)), SG_OK);

        ck_assert_int_eq(try_new("\"in\":{\"output_topic\":\"out\","
                                 "\"dlq_topic\":\"no.such.dlq\"}",
                                 es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "\"no.such.dlq\"") && strstr(es, "\"in\"") &&
                              strstr(es, "DLQ"),
                      "errstr: %s", es);

        ck_assert_int_eq(try_new("\"in\":{\"output_topic\":\"no.such.out\","
                                 "\"dlq_topic\":\"dlq\"}",
                                 es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "\"no.such.out\"") && strstr(es, "\"in\""),
                      "errstr: %s", es);

        ck_assert_int_eq(try_new("\"b\":{\"output_topic\":\"b.out\","
                                 "\"dlq_topic\":\"dlq\"}",
                                 es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "\"b.out\"") && strstr(es, "\"b\"") &&
                              strstr(es, "2") && strstr(es, "3"),
                      "errstr: %s", es);

        /* Controls: murmur2 does not need as many partitions; more is fine. */
        ck_assert_int_eq(try_new("\"b\":{\"output_topic\":\"b.out\","
                                 "\"dlq_topic\":\"dlq\","
                                 "\"output_partitioning\":\"murmur2\"}",
                                 es, sizeof(es)),
                         SG_OK);
        ck_assert_int_eq(try_new("\"b\":{\"output_topic\":\"b.out4\","
                                 "\"dlq_topic\":\"dlq\"}",
                                 es, sizeof(es)),
                         SG_OK);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (7) secrets never in errstr                                         */

/** Appends a property after validation: sg_config_parse() already refuses
 *  anything librdkafka rejects, so the loop's own conf_set guard is reached
 *  only by configs built in code; this builds one. */
static void conf_add_kafka(sg_config_t *conf, const char *name,
                           const char *value) {
        sg_kv_t *kv = realloc(conf->kafka, (conf->kafka_cnt + 1) * sizeof(*kv));
        ck_assert_ptr_nonnull(kv);
        conf->kafka = kv;
        kv[conf->kafka_cnt].name = strdup(name);
        kv[conf->kafka_cnt].value = strdup(value);
        kv[conf->kafka_cnt].from_env = false;
        conf->kafka_cnt++;
}

static sg_err_t new_with(sg_config_t *conf, char *es, size_t es_size) {
        sg_passthrough_t *pt;
        sg_processor_t proc;
        sg_loop_t *loop = NULL;
        ck_assert_int_eq(sg_passthrough_new(conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &proc);
        es[0] = '\0';
        sg_err_t err = sg_loop_new(conf, &proc, log_cb, &g_logs, NULL, NULL,
                                   &loop, es, es_size);
        sg_loop_destroy(loop);
        sg_passthrough_destroy(pt);
        return err;
}

START_TEST(secret_value_never_in_errstr) {
        char es[512];
        sg_config_t *conf;

        /* librdkafka refuses the property ("ssl.truststore.password" is a
         * Java client property): SG_ERR_CONFIG naming it, value withheld. */
        conf = conf_parse(g_bs, TOPICS_IN, NULL);
        conf_add_kafka(conf, "ssl.truststore.password", SECRET);
        ck_assert(sg_config_is_secret("ssl.truststore.password"));
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "ssl.truststore.password") != NULL,
                      "errstr: %s", es);
        ck_assert_msg(strstr(es, SECRET) == NULL, "secret leaked: %s", es);
        sg_config_destroy(conf);

        /* Control: for a property that is not secret the same path does
         * show librdkafka's detail, value included. */
        conf = conf_parse(g_bs, TOPICS_IN, NULL);
        conf_add_kafka(conf, "compression.codec", "bogus-codec");
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "compression.codec") &&
                              strstr(es, "bogus-codec"),
                      "errstr: %s", es);
        sg_config_destroy(conf);

        /* A secret librdkafka accepts but cannot use: creating the client
         * fails — a configuration error (SG_ERR_CONFIG: exit 2, so that a
         * supervisor does not restart it in a loop) — and the PEM text is
         * not echoed. */
        conf = conf_parse(
                g_bs, TOPICS_IN,
                ",\"security.protocol\":\"ssl\","
                "\"ssl.key.pem\":\"-----BEGIN PRIVATE KEY-----\\n" SECRET
                "\\n-----END PRIVATE KEY-----\\n\"");
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "ssl.key.pem") != NULL, "errstr: %s", es);
        ck_assert_msg(strstr(es, SECRET) == NULL, "secret leaked: %s", es);
        sg_config_destroy(conf);

        /* A file that does not exist, found only when the client is
         * created: a configuration error too, naming the property. */
        conf = conf_parse(g_bs, TOPICS_IN,
                          ",\"security.protocol\":\"ssl\","
                          "\"ssl.key.location\":\"/nonexistent/seqgate.key\"");
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "ssl.key.location") != NULL, "errstr: %s", es);
        sg_config_destroy(conf);
        ck_assert_int_eq(g_logs.secret_leaks, 0);
}
END_TEST

/* A property whose value came from the environment (${VAR},
 * docs/configuration.md "Secrets and environment variables") is a secret
 * whatever its name: librdkafka's refusal is withheld, and log lines are
 * scrubbed of it and of every other value the environment gave. */
START_TEST(env_value_never_in_errstr_or_logs) {
        char es[512];
        sg_config_t *conf;

        setenv("SGT_KAFKA_CID", "cid-from-env-" SECRET, 1);
        setenv("SGT_KAFKA_DIR", "/tmp/dir-" SECRET, 1);
        conf = conf_parse(g_bs, TOPICS_IN,
                          ",\"client.id\":\"${SGT_KAFKA_CID}\"");
        /* a value librdkafka refuses when the client is configured */
        conf_add_kafka(conf, "compression.codec", "bogus-" SECRET);
        conf->kafka[conf->kafka_cnt - 1].from_env = true;
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "compression.codec") != NULL, "errstr: %s",
                      es);
        ck_assert_msg(strstr(es, SECRET) == NULL, "env value leaked: %s", es);
        sg_config_destroy(conf);

        /* a log line quoting values from the environment */
        char json[1024], *txt;
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"${SGT_KAFKA_DIR}\",\"kafka\":{"
                 "\"bootstrap.servers\":\"%s\",\"group.id\":\"g\","
                 "\"client.id\":\"${SGT_KAFKA_CID}\"},\"topics\":{%s}}",
                 g_bs, TOPICS_IN);
        ck_assert_int_eq(sg_config_parse(json, &conf, es, sizeof(es)), SG_OK);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "client", "cid-from-env-" SECRET "#p-1");
        cJSON *nested = cJSON_AddObjectToObject(f, "store");
        cJSON_AddStringToObject(nested, "path", "/tmp/dir-" SECRET "/data.mdb");
        sg_kafka_log_redact(conf, f);
        txt = cJSON_PrintUnformatted(f);
        ck_assert_msg(strstr(txt, SECRET) == NULL, "env value leaked: %s", txt);
        ck_assert_msg(strstr(txt, "***#p-1") && strstr(txt, "***/data.mdb"),
                      "%s", txt);
        cJSON_free(txt);
        cJSON_Delete(f);

        /* the loop's own log lines: librdkafka names its clients after
         * client.id; nothing of it reaches the log callback */
        memset(&g_logs, 0, sizeof(g_logs));
        ck_assert_int_eq(new_with(conf, es, sizeof(es)), SG_OK);
        ck_assert_int_eq(g_logs.secret_leaks, 0);
        sg_config_destroy(conf);
        unsetenv("SGT_KAFKA_CID");
        unsetenv("SGT_KAFKA_DIR");
}
END_TEST

/* A secret librdkafka quotes in its own error text (a malformed
 * sasl.oauthbearer.config is echoed by 2.0.2) never reaches a log line. */
#define OAUTH_SECRET "S3cr3t-oauth-value"
static atomic_int oauth_leaks, oauth_errors;
static void oauth_log(void *o, sg_log_level_t l, const char *ev,
                      const char *f) {
        (void)o, (void)l, (void)ev;
        if (f && strstr(f, OAUTH_SECRET))
                atomic_fetch_add(&oauth_leaks, 1);
        if (f && strstr(f, "sasl.oauthbearer.config"))
                atomic_fetch_add(&oauth_errors, 1);
}
static void *oauth_stopper(void *a) {
        tu_sleep_ms(3000);
        sg_loop_stop(a);
        return NULL;
}
START_TEST(secret_value_never_in_log_lines) {
        char es[512], json[2048];
        sg_config_t *c0, *conf;
        void *mock;
        char *bs;
        const char *topics = "\"in\":{\"output_topic\":\"out\",\"dlq_topic\":"
                             "\"dlq\",\"ordering\":{\"mode\":\"none\"}}";
        snprintf(json, sizeof json,
                 "{" ALOS
                 "\"data_dir\":\"/tmp/x\",\"kafka\":{\"bootstrap.servers\":"
                 "\"127.0.0.1:9\",\"group.id\":\"g\"},\"topics\":{%s}}",
                 topics);
        ck_assert_int_eq(sg_config_parse(json, &c0, es, sizeof es), SG_OK);
        ck_assert_int_eq(sg_mock_start(c0, 1, 1, &mock, &bs, es, sizeof es),
                         SG_OK);
        snprintf(json, sizeof json,
                 "{" ALOS
                 "\"data_dir\":\"/tmp/x\",\"kafka\":{\"bootstrap.servers\":"
                 "\"%s\",\"group.id\":\"g\"},\"kafka_consumer\":{"
                 "\"security.protocol\":\"sasl_plaintext\",\"sasl.mechanisms\":"
                 "\"OAUTHBEARER\",\"enable.sasl.oauthbearer.unsecure.jwt\":"
                 "\"true\",\"sasl.oauthbearer.config\":\"principal="
                 "me " OAUTH_SECRET "\"},\"topics\":{%s}}",
                 bs, topics);
        ck_assert_int_eq(sg_config_parse(json, &conf, es, sizeof es), SG_OK);
        sg_passthrough_t *pt;
        sg_processor_t p;
        sg_loop_t *loop;
        ck_assert_int_eq(sg_passthrough_new(conf, &pt), SG_OK);
        sg_passthrough_processor(pt, &p);
        atomic_store(&oauth_leaks, 0);
        atomic_store(&oauth_errors, 0);
        ck_assert_int_eq(sg_loop_new(conf, &p, oauth_log, NULL, NULL, NULL,
                                     &loop, es, sizeof es),
                         SG_OK);
        pthread_t th;
        pthread_create(&th, NULL, oauth_stopper, loop);
        sg_loop_run(loop, es, sizeof es);
        pthread_join(th, NULL);
        sg_loop_destroy(loop);
        sg_passthrough_destroy(pt);
        sg_config_destroy(conf);
        sg_config_destroy(c0);
        sg_mock_destroy(mock);
        free(bs);
        /* the error was logged (so the test can fail), the value was not */
        ck_assert_int_gt(atomic_load(&oauth_errors), 0);
        ck_assert_int_eq(atomic_load(&oauth_leaks), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* (9) retriable broker errors at start-up and in restores              */
/*
 * A broker that is electing a leader, moving a partition or loading a
 * coordinator answers with a retriable error (LEADER_NOT_AVAILABLE,
 * NOT_LEADER_FOR_PARTITION, COORDINATOR_LOAD_IN_PROGRESS, ...). seqgate
 * retries those with back-off, logged as "kafka_retry", for at most
 * broker_retry_timeout_ms; anything else stops it at once.
 */

typedef struct clear_later {
        const char *topic;
        int after_ms;
} clear_later_t;

static void *clear_topic_error(void *a) {
        clear_later_t *c = a;
        tu_sleep_ms(c->after_ms);
        rd_kafka_mock_topic_set_error(g_mc, c->topic,
                                      RD_KAFKA_RESP_ERR_NO_ERROR);
        return NULL;
}

/* The output topic's leader is being elected while seqgate starts: the
 * start-up check waits for it instead of calling it missing (exit 2). */
START_TEST(startup_retries_leader_not_available) {
        char es[512];
        pthread_t th;
        clear_later_t cl = {.topic = "out", .after_ms = 1500};
        rd_kafka_mock_topic_set_error(g_mc, "out",
                                      RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE);
        ck_assert_int_eq(pthread_create(&th, NULL, clear_topic_error, &cl), 0);
        int64_t t0 = mono_ms();
        sg_err_t err = try_new(TOPICS_IN, es, sizeof(es));
        int64_t took = mono_ms() - t0;
        pthread_join(th, NULL);
        ck_assert_msg(err == SG_OK, "sg_loop_new: %s: %s", sg_err2str(err), es);
        ck_assert_int_ge(took, 1000);
        ck_assert_int_ge(g_logs.retries, 1);
}
END_TEST

/* A retriable error that does not go away: retried for
 * broker_retry_timeout_ms, then SG_ERR_KAFKA (exit 1, restartable) naming
 * the error. */
START_TEST(startup_retry_gives_up_after_timeout) {
        char es[512];
        g_root_extra = ALOS "\"broker_retry_timeout_ms\":1500,";
        rd_kafka_mock_topic_set_error(g_mc, "out",
                                      RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE);
        int64_t t0 = mono_ms();
        sg_err_t err = try_new(TOPICS_IN, es, sizeof(es));
        int64_t took = mono_ms() - t0;
        g_root_extra = ALOS;
        ck_assert_msg(err == SG_ERR_KAFKA, "got %s: %s", sg_err2str(err), es);
        ck_assert_msg(strstr(es, "\"out\"") &&
                              strstr(es, "eader not available"),
                      "errstr: %s", es);
        ck_assert_int_ge(took, 1500);
        ck_assert_int_lt(took, 15000);
        ck_assert_int_ge(g_logs.retries, 1);
}
END_TEST

/* A non-retriable topic error stops the start at once, and says what it
 * is (not "does not exist"). */
START_TEST(startup_non_retriable_stops_at_once) {
        char es[512];
        rd_kafka_mock_topic_set_error(
                g_mc, "dlq", RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
        int64_t t0 = mono_ms();
        sg_err_t err = try_new(TOPICS_IN, es, sizeof(es));
        int64_t took = mono_ms() - t0;
        ck_assert_msg(err == SG_ERR_CONFIG, "got %s: %s", sg_err2str(err), es);
        ck_assert_msg(strstr(es, "\"dlq\"") && strstr(es, "uthorization"),
                      "errstr: %s", es);
        ck_assert_int_lt(took, 5000);
        ck_assert_int_eq(g_logs.retries, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("kafka_startup");

        TCase *ts = tcase_create("startup");
        tcase_add_checked_fixture(ts, mock_setup, mock_teardown);
        tcase_set_timeout(ts, 60);
        add(ts, startup_topic_checks);
        add(ts, secret_value_never_in_errstr);
        add(ts, secret_value_never_in_log_lines);
        add(ts, env_value_never_in_errstr_or_logs);
        add(ts, startup_retries_leader_not_available);
        add(ts, startup_retry_gives_up_after_timeout);
        add(ts, startup_non_retriable_stops_at_once);
        suite_add_tcase(s, ts);

        return tu_run_suite(s);
}
