/*
 * test_config_reload.c — what a reload may change (sg_config_reload(),
 * semantics "Reloading the configuration") and the effective configuration
 * (sg_config_print(), `seqgate --print-config`).
 *
 * The reload test walks the key table: for every row it loads a
 * configuration and one that differs in that key only, and checks that a
 * reload applies it exactly when the row is flagged SG_CONF_RELOAD, that
 * the change is reported under the key's path, and that a refused reload
 * leaves the running configuration as it was. A key added to the table is
 * covered without a line here.
 */
#include "config.h"
#include "testutil.h"

#include <check.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The base configuration: one topic "orders", no snapshot source, or one
 * of the two (@p snap NULL, "http", "kafka"). */
static cJSON *base_json(const char *snap) {
        cJSON *r = cJSON_Parse(
                "{\"data_dir\":\"/tmp/sg-reload\","
                "\"kafka\":{\"bootstrap.servers\":\"127.0.0.1:9092\","
                "\"group.id\":\"g\"},"
                "\"topics\":{\"orders\":{\"output_topic\":\"orders.out\","
                "\"dlq_topic\":\"orders.dlq\"}}}");
        ck_assert_ptr_nonnull(r);
        cJSON *t =
                cJSON_GetObjectItem(cJSON_GetObjectItem(r, "topics"), "orders");
        if (snap && !strcmp(snap, "http"))
                cJSON_AddItemToObject(
                        t, "snapshot",
                        cJSON_Parse("{\"source\":\"http\",\"url\":"
                                    "\"http://snap.example/{aggregate}\"}"));
        else if (snap)
                cJSON_AddItemToObject(
                        t, "snapshot",
                        cJSON_Parse("{\"source\":\"kafka\",\"request_topic\":"
                                    "\"snap.req\",\"reply_topic\":"
                                    "\"snap.rep\"}"));
        return r;
}

/** The object at table block @p block ("*" = "orders"), created. */
static cJSON *block_of(cJSON *root, const char *block) {
        char buf[256], *save = NULL;
        cJSON *n = root;
        snprintf(buf, sizeof(buf), "%s", block);
        for (char *p = strtok_r(buf, ".", &save); p;
             p = strtok_r(NULL, ".", &save)) {
                const char *name = strcmp(p, "*") ? p : "orders";
                cJSON *x = cJSON_GetObjectItem(n, name);
                n = x ? x : cJSON_AddObjectToObject(n, name);
        }
        return n;
}

/** A valid value of key @p k other than its default. */
static cJSON *other_value(const sg_config_key_t *k) {
        if (!strcmp(k->name, "upgrade_from"))
                return cJSON_CreateNumber(2); /* 0 or 2, nothing between */
        switch (k->type) {
        case SG_CONF_BOOL:
                return cJSON_CreateBool(!k->def);
        case SG_CONF_ENUM:
        case SG_CONF_ENUM_BOOL:
                return cJSON_CreateString(k->names[k->def == 0 ? 1 : 0]);
        case SG_CONF_INT:
        case SG_CONF_I64:
        case SG_CONF_U64:
        case SG_CONF_SIZE:
                return cJSON_CreateNumber((double)(k->def + 1 <= k->max
                                                           ? k->def + 1
                                                           : k->def - 1));
        case SG_CONF_SRC:
                return cJSON_CreateString("header:x-changed");
        case SG_CONF_STRING:
                break;
        }
        static const char *const texts[][2] = {
                {"instance_id", "other"},
                {"data_dir", "/tmp/sg-reload-other"},
                {"address", "127.0.0.1:9999"},
                {"url", "http://other.example/{aggregate}"},
                {"auth_header_env", "OTHER_AUTH"},
                {"cert_file", "/tmp/sg-reload-other.crt"},
                {"key_file", "/tmp/sg-reload-other.key"},
        };
        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
                if (!strcmp(k->name, texts[i][0]))
                        return cJSON_CreateString(texts[i][1]);
        ck_assert_msg(strstr(k->name, "_topic") != NULL,
                      "%s: no other value for this text key", k->name);
        char t[128];
        snprintf(t, sizeof(t), "changed.%s", k->name);
        return cJSON_CreateString(t);
}

static sg_config_t *parse(cJSON *j) {
        char *text = cJSON_PrintUnformatted(j);
        char es[2048] = "";
        sg_config_t *c = NULL;
        sg_err_t err = sg_config_parse(text, &c, es, sizeof(es));
        ck_assert_msg(err == SG_OK, "%s: %s", text, es);
        free(text);
        return c;
}

static bool diff_has(const sg_config_diff_t *d, const char *key, bool live) {
        for (size_t i = 0; i < d->cnt; i++)
                if (!strcmp(d->changes[i].key, key) &&
                    d->changes[i].live == live)
                        return true;
        return false;
}

/* Every row: a reload applies a change of it exactly when the row says so;
 * a refused one changes nothing. */
START_TEST(test_reload_follows_the_table) {
        size_t live_cnt = 0, refused_cnt = 0;
        for (size_t i = 0; sg_config_key(i); i++) {
                const sg_config_key_t *k = sg_config_key(i);
                const char *snap = NULL;
                if (!strcmp(k->block, "topics.*.snapshot"))
                        snap = strstr(k->name, "_topic") ? "kafka" : "http";
                cJSON *a = base_json(snap), *b = base_json(snap);
                if (!strcmp(k->block, "http.tls_server_config"))
                        /* cert_file and key_file go together: both set,
                         * the one of this row differs */
                        for (int s = 0; s < 2; s++) {
                                cJSON *t = block_of(s ? b : a, k->block);
                                cJSON_AddStringToObject(t, "cert_file",
                                                        "/tmp/sg-reload.crt");
                                cJSON_AddStringToObject(t, "key_file",
                                                        "/tmp/sg-reload.key");
                        }
                cJSON *blk = block_of(b, k->block);
                cJSON_DeleteItemFromObject(blk, k->name);
                cJSON_AddItemToObject(blk, k->name, other_value(k));
                if (!strcmp(k->name, "format")) {
                        /* format json reads no CloudEvents attributes */
                        cJSON_AddStringToObject(blk, "id", "/id");
                        cJSON_AddStringToObject(blk, "version", "/v");
                }
                sg_config_t *live = parse(a), *next = parse(b);
                char *before = sg_config_print(live);
                char *want = sg_config_print(next);
                char path[512], es[2048] = "";
                snprintf(path, sizeof(path), "%s%s%s", k->block,
                         *k->block ? "." : "", k->name);
                if (!strncmp(path, "topics.*", 8))
                        snprintf(path, sizeof(path), "topics.orders%s%s%s",
                                 k->block + 8, ".", k->name);
                sg_config_diff_t d = {0};
                sg_err_t err = sg_config_reload(live, next, &d, es, sizeof(es));
                char *after = sg_config_print(live);
                if (k->flags & SG_CONF_RELOAD) {
                        live_cnt++;
                        ck_assert_msg(err == SG_OK, "%s: %s", path, es);
                        ck_assert_msg(d.cnt == 1 && diff_has(&d, path, true),
                                      "%s: %zu changes, first %s", path, d.cnt,
                                      d.cnt ? d.changes[0].key : "-");
                        ck_assert_pstr_eq(after, want);
                } else {
                        refused_cnt++;
                        ck_assert_msg(err == SG_ERR_CONFIG,
                                      "%s: reload %s, not refused", path,
                                      sg_err2str(err));
                        ck_assert_msg(diff_has(&d, path, false),
                                      "%s: not named as refused (%s)", path,
                                      es);
                        ck_assert_msg(strstr(es, path) != NULL, "%s: %s", path,
                                      es);
                        ck_assert_pstr_eq(after, before);
                }
                sg_config_diff_clear(&d);
                free(before);
                free(want);
                free(after);
                sg_config_destroy(live);
                sg_config_destroy(next);
                cJSON_Delete(a);
                cJSON_Delete(b);
        }
        ck_assert_uint_gt(live_cnt, 10);
        ck_assert_uint_gt(refused_cnt, 10);
}
END_TEST

/** Merges @p patch into @p dst (RFC 7386 without deletions). */
static void merge(cJSON *dst, const cJSON *patch) {
        for (const cJSON *m = patch->child; m; m = m->next) {
                cJSON *d = cJSON_GetObjectItem(dst, m->string);
                if (d && cJSON_IsObject(d) && cJSON_IsObject(m))
                        merge(d, m);
                else if (d)
                        cJSON_ReplaceItemInObject(dst, m->string,
                                                  cJSON_Duplicate(m, 1));
                else
                        cJSON_AddItemToObject(dst, m->string,
                                              cJSON_Duplicate(m, 1));
        }
}

/* What is not in the table takes a restart: a librdkafka property, the
 * topic set, the scope, the digest, the state machine, the snapshot
 * source. Each named; nothing applied, also the one live key beside them. */
START_TEST(test_reload_refuses_the_rest) {
        static const char *const cases[][2] = {
                {"{\"kafka\":{\"linger.ms\":5}}", "kafka.linger.ms"},
                {"{\"kafka_consumer\":{\"fetch.wait.max.ms\":50}}",
                 "kafka_consumer.fetch.wait.max.ms"},
                {"{\"topics\":{\"payments\":{\"output_topic\":\"p.out\","
                 "\"dlq_topic\":\"p.dlq\"}}}",
                 "topics.payments"},
                {"{\"topics\":{\"orders\":{\"envelope\":{\"scope\":[]}}}}",
                 "topics.orders.envelope.scope"},
                {"{\"topics\":{\"orders\":{\"envelope\":{\"digest\":"
                 "\"/data\"}}}}",
                 "topics.orders.envelope.digest"},
                {"{\"topics\":{\"orders\":{\"state_machine\":{\"initial\":"
                 "\"A\",\"states\":[\"A\",\"B\"],\"transitions\":[{\"type\":"
                 "\"t\",\"from\":[\"A\"],\"to\":\"B\"}]}}}}",
                 "topics.orders.state_machine"},
                {"{\"topics\":{\"orders\":{\"snapshot\":{\"source\":\"http\","
                 "\"url\":\"http://s/{aggregate}\"}}}}",
                 "topics.orders.snapshot.source"},
                /* the endpoint's credentials: read at start, like its
                 * certificate (docs/operating.md "HTTP endpoint") */
                {"{\"http\":{\"basic_auth_users\":{\"alice\":\"$2y$10$"
                 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"}}}",
                 "http.basic_auth_users.alice"},
                {"{\"http\":{\"bearer_tokens\":{\"ci\":\"sha256:"
                 "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f0"
                 "0a08\"}}}",
                 "http.bearer_tokens.ci"},
                {"{\"http\":{\"auth_excluded_paths\":[\"/healthz\"]}}",
                 "http.auth_excluded_paths"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                cJSON *a = base_json(NULL), *b = base_json(NULL);
                cJSON *patch = cJSON_Parse(cases[i][0]);
                ck_assert_ptr_nonnull(patch);
                /* and one key a reload may change */
                cJSON_AddNumberToObject(block_of(b, "topics.*.ordering"),
                                        "gap_timeout_ms", 12345);
                merge(b, patch);
                sg_config_t *live = parse(a), *next = parse(b);
                char *before = sg_config_print(live), es[2048] = "";
                sg_config_diff_t d = {0};
                sg_err_t err = sg_config_reload(live, next, &d, es, sizeof(es));
                ck_assert_msg(err == SG_ERR_CONFIG, "%s: %s", cases[i][1],
                              sg_err2str(err));
                ck_assert_msg(diff_has(&d, cases[i][1], false), "%s: %s",
                              cases[i][1], es);
                ck_assert_msg(diff_has(&d,
                                       "topics.orders.ordering.gap_timeout_ms",
                                       true),
                              "%s: the live key not listed", cases[i][1]);
                ck_assert_msg(strstr(es, cases[i][1]) != NULL, "%s", es);
                char *after = sg_config_print(live);
                ck_assert_pstr_eq(after, before);
                free(before);
                free(after);
                sg_config_diff_clear(&d);
                sg_config_destroy(live);
                sg_config_destroy(next);
                cJSON_Delete(a);
                cJSON_Delete(b);
                cJSON_Delete(patch);
        }
}
END_TEST

/* A reload without a change reports none; one that writes a default out
 * (a key left out against one written with its default) is no change
 * either; the values of a live change are shown. */
START_TEST(test_reload_values) {
        cJSON *a = base_json(NULL), *b = base_json(NULL);
        cJSON_AddNumberToObject(block_of(b, "topics.*.ordering"),
                                "gap_timeout_ms", 30000); /* the default */
        sg_config_t *live = parse(a), *next = parse(b);
        sg_config_diff_t d = {0};
        char es[512];
        ASSERT_OK(sg_config_reload(live, next, &d, es, sizeof(es)), es);
        ck_assert_int_eq(d.cnt, 0);
        sg_config_destroy(next);
        cJSON_ReplaceItemInObject(block_of(b, "topics.*.ordering"),
                                  "gap_timeout_ms", cJSON_CreateNumber(60000));
        cJSON_AddStringToObject(block_of(b, "topics.*.ordering"), "gap_policy",
                                "skip");
        next = parse(b);
        ASSERT_OK(sg_config_reload(live, next, &d, es, sizeof(es)), es);
        ck_assert_int_eq(d.cnt, 2);
        ck_assert_pstr_eq(d.changes[0].key,
                          "topics.orders.ordering.gap_timeout_ms");
        ck_assert_pstr_eq(d.changes[0].old_json, "30000");
        ck_assert_pstr_eq(d.changes[0].new_json, "60000");
        ck_assert_pstr_eq(d.changes[1].old_json, "\"dlq\"");
        ck_assert_pstr_eq(d.changes[1].new_json, "\"skip\"");
        ck_assert_int_eq(sg_config_topic(live, "orders")->gap_timeout_ms,
                         60000);
        ck_assert_int_eq(sg_config_topic(live, "orders")->gap_policy,
                         SG_GAP_SKIP);
        sg_config_diff_clear(&d);
        sg_config_destroy(live);
        sg_config_destroy(next);
        cJSON_Delete(a);
        cJSON_Delete(b);
}
END_TEST

/* A topic name may hold dots (orders.v1): a key of it is named so that
 * the name cannot be read as a path, topics["orders.v1"].ordering.x, in
 * the reload's changes and in the configuration's errors alike. */
START_TEST(test_reload_dotted_topic_name) {
        cJSON *a = base_json(NULL), *b = base_json(NULL);
        cJSON *ta = cJSON_GetObjectItem(a, "topics"),
              *tb = cJSON_GetObjectItem(b, "topics");
        cJSON_AddItemToObject(
                ta, "orders.v1",
                cJSON_Duplicate(cJSON_GetObjectItem(ta, "orders"), true));
        cJSON *o = cJSON_Duplicate(cJSON_GetObjectItem(tb, "orders"), true);
        cJSON_AddItemToObject(o, "ordering",
                              cJSON_Parse("{\"gap_timeout_ms\":60000}"));
        cJSON_AddItemToObject(tb, "orders.v1", o);
        sg_config_t *live = parse(a), *next = parse(b);
        sg_config_diff_t d = {0};
        char es[512];
        ASSERT_OK(sg_config_reload(live, next, &d, es, sizeof(es)), es);
        ck_assert_int_eq(d.cnt, 1);
        ck_assert_pstr_eq(d.changes[0].key,
                          "topics[\"orders.v1\"].ordering.gap_timeout_ms");
        sg_config_diff_clear(&d);
        sg_config_destroy(live);
        sg_config_destroy(next);
        /* an error names it the same way */
        cJSON_AddItemToObject(o, "no_such_key", cJSON_CreateTrue());
        char *text = cJSON_PrintUnformatted(b);
        sg_config_t *c = NULL;
        ck_assert_int_eq(sg_config_parse(text, &c, es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "topics[\"orders.v1\"]") != NULL, "%s", es);
        free(text);
        cJSON_Delete(a);
        cJSON_Delete(b);
}
END_TEST

static char *read_example(const char *rel) {
        const char *root = getenv("SG_SOURCE_ROOT");
        char path[4096];
        ck_assert_ptr_nonnull(root);
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "%s", path);
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return strdup(buf);
}

/* The HTTP endpoint's users, tokens and excluded paths are printed (their
 * hashes, as the file holds them) and load back to the same; a reload
 * that changes them is refused like any key read at start. */
START_TEST(test_print_http_security) {
        cJSON *j = base_json(NULL);
        cJSON *patch = cJSON_Parse(
                "{\"http\":{\"basic_auth_users\":{\"alice\":\"$2y$10$"
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"},"
                "\"bearer_tokens\":{\"ci\":\"sha256:"
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a"
                "08\"},\"auth_excluded_paths\":[]}}");
        ck_assert_ptr_nonnull(patch);
        merge(j, patch);
        sg_config_t *a = parse(j), *b = NULL;
        char *printed = sg_config_print(a), es[2048] = "";
        ck_assert_ptr_nonnull(printed);
        ck_assert_msg(strstr(printed, "\"alice\"") &&
                              strstr(printed, "\"ci\"") &&
                              strstr(printed, "\"auth_excluded_paths\": []"),
                      "%s", printed);
        ck_assert_msg(sg_config_parse(printed, &b, es, sizeof(es)) == SG_OK,
                      "%s\n%s", es, printed);
        sg_config_diff_t d = {0};
        ASSERT_OK(sg_config_diff(a, b, &d), "diff");
        ck_assert_msg(d.cnt == 0, "%s differs", d.changes[0].key);
        /* the default list written out is no change */
        cJSON *y = base_json(NULL), *x = base_json(NULL);
        sg_config_t *c = parse(y), *e = NULL;
        cJSON_AddItemToObject(
                block_of(x, "http"), "auth_excluded_paths",
                cJSON_Parse("[\"/metrics\",\"/healthz\",\"/readyz\"]"));
        e = parse(x);
        ASSERT_OK(sg_config_diff(c, e, &d), "diff");
        ck_assert_msg(d.cnt == 0, "%s differs", d.changes[0].key);
        ASSERT_OK(sg_config_diff(a, c, &d), "diff");
        ck_assert_msg(diff_has(&d, "http.basic_auth_users.alice", false) &&
                              diff_has(&d, "http.bearer_tokens.ci", false) &&
                              diff_has(&d, "http.auth_excluded_paths", false),
                      "%zu changes", d.cnt);
        sg_config_diff_clear(&d);
        free(printed);
        sg_config_destroy(a);
        sg_config_destroy(b);
        sg_config_destroy(c);
        sg_config_destroy(e);
        cJSON_Delete(j);
        cJSON_Delete(patch);
        cJSON_Delete(x);
        cJSON_Delete(y);
}
END_TEST

/* The printed configuration is a configuration: loading it gives the same
 * values (printed again: the same text; no change between the two). */
START_TEST(test_print_round_trip) {
        static const char *const files[] = {
                "examples/minimal.json", "examples/orders.json",
                "examples/plain-json.json",
                "examples/orders-snapshot-kafka.json",
                "examples/orders-snapshot-http.json"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char *text = read_example(files[i]), es[2048] = "";
                sg_config_t *a = NULL, *b = NULL;
                ck_assert_msg(sg_config_parse(text, &a, es, sizeof(es)) ==
                                      SG_OK,
                              "%s: %s", files[i], es);
                char *printed = sg_config_print(a);
                ck_assert_ptr_nonnull(printed);
                ck_assert_msg(sg_config_parse(printed, &b, es, sizeof(es)) ==
                                      SG_OK,
                              "%s printed: %s\n%s", files[i], es, printed);
                char *again = sg_config_print(b);
                ck_assert_pstr_eq(again, printed);
                sg_config_diff_t d = {0};
                ASSERT_OK(sg_config_diff(a, b, &d), "diff");
                ck_assert_msg(d.cnt == 0, "%s: %s differs", files[i],
                              d.changes[0].key);
                /* the defaults are filled in */
                ck_assert_msg(strstr(printed, "\"max_parked_bytes\"") &&
                                      strstr(printed, "\"changelog_topic\""),
                              "%s", printed);
                free(text);
                free(printed);
                free(again);
                sg_config_destroy(a);
                sg_config_destroy(b);
        }
}
END_TEST

/* Secrets and values from the environment never appear. */
START_TEST(test_print_redacts) {
        setenv("SGT_PRINT_BOOT", "broker-from-env:9092", 1);
        setenv("SGT_PRINT_DIR", "/var/lib/env-dir-value", 1);
        const char *text =
                "{\"data_dir\":\"${SGT_PRINT_DIR}\","
                "\"kafka\":{\"bootstrap.servers\":\"${SGT_PRINT_BOOT}\","
                "\"group.id\":\"g\",\"security.protocol\":\"sasl_ssl\","
                "\"sasl.mechanisms\":\"PLAIN\",\"sasl.username\":\"u\","
                "\"sasl.password\":\"pw-in-the-file-Zq9\"},"
                "\"topics\":{\"orders\":{\"output_topic\":\"o\","
                "\"dlq_topic\":\"d\"}}}";
        sg_config_t *c = NULL;
        char es[1024];
        ASSERT_OK(sg_config_parse(text, &c, es, sizeof(es)), es);
        char *out = sg_config_print(c);
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(!strstr(out, "pw-in-the-file-Zq9") &&
                              !strstr(out, "broker-from-env") &&
                              !strstr(out, "env-dir-value"),
                      "%s", out);
        ck_assert_msg(strstr(out, "\"sasl.password\": \"***\"") &&
                              strstr(out, "\"bootstrap.servers\": \"***\"") &&
                              strstr(out, "\"data_dir\": \"***\"") &&
                              strstr(out, "\"sasl.username\": \"u\""),
                      "%s", out);
        free(out);
        sg_config_destroy(c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("config_reload");
        TCase *tc = tcase_create("reload");
        tcase_add_test(tc, test_reload_follows_the_table);
        tcase_add_test(tc, test_reload_refuses_the_rest);
        tcase_add_test(tc, test_reload_values);
        tcase_add_test(tc, test_reload_dotted_topic_name);
        tcase_add_test(tc, test_print_round_trip);
        tcase_add_test(tc, test_print_redacts);
        tcase_add_test(tc, test_print_http_security);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
