/*
 * test_preflight.c — the preflight's rules that need no cluster
 * (kafka_preflight.c): the files the Kafka clients read, the replica rules
 * and the dedup TTL against retention. The cluster checks themselves run
 * against the real broker (tests/integration/test_preflight.py) and the
 * mock (test_kafka_startup.c).
 */
#include "config.h"
#include "kafka.h"
#include "testutil.h"

#include <check.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static sg_config_t *conf_with(const char *kafka, const char *consumer) {
        char json[4096], es[1024] = "";
        snprintf(json, sizeof(json),
                 "{\"data_dir\":\"/tmp/x\",\"kafka\":{\"bootstrap.servers\":"
                 "\"b:1\",\"group.id\":\"g\"%s},\"kafka_consumer\":{%s},"
                 "\"topics\":{\"t\":{\"output_topic\":\"o\",\"dlq_topic\":"
                 "\"d\"}}}",
                 kafka, consumer);
        sg_config_t *c = NULL;
        ck_assert_msg(sg_config_parse(json, &c, es, sizeof(es)) == SG_OK,
                      "%s: %s", json, es);
        return c;
}

static bool has(const sg_preflight_t *pf, const char *text) {
        for (size_t i = 0; i < pf->cnt; i++)
                if (strstr(pf->items[i].text, text))
                        return true;
        return false;
}

/* Every file a client reads under TLS: missing ones named, each; a CA may
 * be a directory, a key may not; "probe" and plaintext check nothing. */
START_TEST(test_files) {
        char dir[] = "/tmp/sg-pf-XXXXXX", kafka[2048], cert[512];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(cert, sizeof(cert), "%s/client.pem", dir);
        FILE *f = fopen(cert, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        snprintf(kafka, sizeof(kafka),
                 ",\"security.protocol\":\"SASL_SSL\",\"sasl.mechanisms\":"
                 "\"PLAIN\",\"ssl.ca.location\":\"%s\","
                 "\"ssl.certificate.location\":\"%s\","
                 "\"ssl.key.location\":\"%s\","
                 "\"ssl.crl.location\":\"%s/gone.crl\"",
                 dir, cert, dir, dir);
        sg_config_t *c = conf_with(kafka, "\"ssl.keystore.location\":"
                                          "\"/nonexistent/ks.p12\"");
        sg_preflight_t pf = {0};
        ASSERT_OK(sg_preflight_files(c, &pf), "files");
        ck_assert_int_eq(pf.errors, 3);
        ck_assert(has(&pf, "kafka.ssl.key.location: \""));
        ck_assert(has(&pf, "a directory, not a file"));
        ck_assert(has(&pf, "kafka.ssl.crl.location: \""));
        ck_assert(has(&pf, "kafka_consumer.ssl.keystore.location: "
                           "\"/nonexistent/ks.p12\": No such file or "
                           "directory"));
        sg_preflight_clear(&pf);
        sg_config_destroy(c);

        /* not read: plaintext, "probe" */
        c = conf_with(",\"ssl.ca.location\":\"/nonexistent/ca\"", "");
        ASSERT_OK(sg_preflight_files(c, &pf), "files");
        ck_assert_int_eq(pf.cnt, 0);
        sg_config_destroy(c);
        c = conf_with(",\"security.protocol\":\"ssl\",\"ssl.ca.location\":"
                      "\"probe\"",
                      "");
        ASSERT_OK(sg_preflight_files(c, &pf), "files");
        ck_assert_int_eq(pf.cnt, 0);
        sg_config_destroy(c);

        /* a path from the environment is not shown */
        setenv("SGT_PF_KEY", "/nonexistent/secret-path-Zq9.key", 1);
        c = conf_with(",\"security.protocol\":\"ssl\",\"ssl.key.location\":"
                      "\"${SGT_PF_KEY}\"",
                      "");
        ASSERT_OK(sg_preflight_files(c, &pf), "files");
        ck_assert_int_eq(pf.errors, 1);
        ck_assert(!has(&pf, "Zq9"));
        ck_assert(has(&pf, "not shown"));
        sg_preflight_clear(&pf);
        sg_config_destroy(c);
        unlink(cert);
        rmdir(dir);
}
END_TEST

START_TEST(test_replication) {
        sg_preflight_t pf = {0};
        /* min.insync.replicas above the replication factor: refused */
        ASSERT_OK(sg_preflight_replication(&pf, "DLQ topic", "d", 1, 2, 1), "");
        ck_assert_int_eq(pf.errors, 1);
        ck_assert(has(&pf, "NOT_ENOUGH_REPLICAS"));
        /* one broker: nothing more to ask */
        ASSERT_OK(sg_preflight_replication(&pf, "output topic", "o", 1, 1, 1),
                  "");
        ck_assert_int_eq(pf.cnt, 1);
        /* three brokers: 3 replicas and min.insync.replicas 2 */
        ASSERT_OK(sg_preflight_replication(&pf, "output topic", "o", 2, 1, 3),
                  "");
        ASSERT_OK(
                sg_preflight_replication(&pf, "changelog topic", "c", 3, 1, 5),
                "");
        ASSERT_OK(
                sg_preflight_replication(&pf, "changelog topic", "c", 3, 2, 5),
                "");
        ck_assert_int_eq(pf.warnings, 2);
        ck_assert(has(&pf, "replication factor 2 on a cluster of 3 brokers"));
        ck_assert(has(&pf, "min.insync.replicas 1: acks=all"));
        sg_preflight_clear(&pf);
}
END_TEST

START_TEST(test_retention) {
        sg_preflight_t pf = {0};
        int64_t day = 86400000;
        ASSERT_OK(sg_preflight_retention(&pf, "t", 7 * day, "delete", 7 * day),
                  "");
        ASSERT_OK(sg_preflight_retention(&pf, "t", 7 * day, "delete", -2), "");
        ck_assert_int_eq(pf.cnt, 0); /* covered, or not known */
        ASSERT_OK(sg_preflight_retention(&pf, "t", 7 * day, "delete", 30 * day),
                  "");
        ck_assert(has(&pf, "topics.t.dedup.ttl_ms (7 d) is shorter than "
                           "input topic \"t\"'s retention.ms (30 d)"));
        ASSERT_OK(sg_preflight_retention(&pf, "t", 7 * day, "delete", -1), "");
        ck_assert(has(&pf, "keeps records forever"));
        ASSERT_OK(sg_preflight_retention(&pf, "t", 7 * day, "compact", -1), "");
        ck_assert(has(&pf, "is compacted"));
        ck_assert_int_eq(pf.warnings, 3);
        ck_assert_int_eq(pf.errors, 0);
        sg_preflight_clear(&pf);
}
END_TEST

int main(void) {
        Suite *s = suite_create("preflight");
        TCase *tc = tcase_create("rules");
        tcase_add_test(tc, test_files);
        tcase_add_test(tc, test_replication);
        tcase_add_test(tc, test_retention);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
