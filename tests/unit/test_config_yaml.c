/*
 * test_config_yaml.c — a YAML configuration (config_yaml.c): the same
 * tree, rules and values as JSON; comments; the YAML 1.1 pitfalls refused
 * with the key, line and column (never the value); how a file's format is
 * told (name, then first character).
 */
#include "config.h"
#include "testutil.h"

#include <check.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE                                                                   \
        "# a comment\n"                                                        \
        "data_dir: /tmp/sg-yaml   # and another\n"                             \
        "kafka:\n"                                                             \
        "  bootstrap.servers: localhost:9092\n"                                \
        "  group.id: g\n"                                                      \
        "topics:\n"                                                            \
        "  orders:\n"                                                          \
        "    output_topic: orders.out\n"                                       \
        "    dlq_topic: orders.dlq\n"

/* examples/orders.yaml and examples/orders.json are the same
 * configuration. */
START_TEST(test_yaml_example_equals_json) {
        const char *root = getenv("SG_SOURCE_ROOT");
        char pj[4096], py[4096], es[2048] = "";
        ck_assert_ptr_nonnull(root);
        snprintf(pj, sizeof(pj), "%s/examples/orders.json", root);
        snprintf(py, sizeof(py), "%s/examples/orders.yaml", root);
        sg_config_t *j = NULL, *y = NULL;
        ASSERT_OK(sg_config_load(pj, &j, es, sizeof(es)), es);
        ASSERT_OK(sg_config_load(py, &y, es, sizeof(es)), es);
        char *tj = sg_config_print(j), *ty = sg_config_print(y);
        ck_assert_pstr_eq(ty, tj);
        free(tj);
        free(ty);
        sg_config_destroy(j);
        sg_config_destroy(y);
}
END_TEST

/* Values as JSON has them: numbers (exactly), booleans, null, strings,
 * quoted ones always strings. */
START_TEST(test_yaml_values) {
        char es[2048] = "";
        sg_config_t *c = NULL;
        ASSERT_OK(sg_config_parse_yaml(
                          BASE "    envelope: {aggregate: ~, version: null,"
                               " type: null}\n"
                               "    ordering: {mode: none, first_version: 0,"
                               " gap_timeout_ms: 1500}\n"
                               "instance_id: \"on\"\n"
                               "http: {address: 'off', read_api: false}\n",
                          &c, es, sizeof(es)),
                  es);
        ck_assert_pstr_eq(c->instance_id, "on");
        ck_assert_pstr_eq(c->http_address, "off");
        ck_assert(!c->http_read_api);
        ck_assert_int_eq(c->topics[0].aggregate.kind, SG_SRC_NONE);
        ck_assert_int_eq(c->topics[0].gap_timeout_ms, 1500);
        ck_assert_int_eq(c->topics[0].first_version, 0);
        sg_config_destroy(c);
        /* numbers are read from their text, as JSON's: above 2^53 is the
         * same error */
        ck_assert_int_eq(sg_config_parse_yaml(BASE "    ordering:\n"
                                                   "      max_version_jump: "
                                                   "9007199254740993\n",
                                              &c, es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "topics.orders.ordering.max_version_jump: "
                                 "must be an integer >= 1; JSON numbers "
                                 "above 2^53"),
                      "%s", es);
        /* the same rules: a wrong value names the key */
        ck_assert_int_eq(sg_config_parse_yaml(BASE "    ordering: {gap_policy: "
                                                   "wait}\n",
                                              &c, es, sizeof(es)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "topics.orders.ordering.gap_policy: \"wait\" "
                                 "is not allowed"),
                      "%s", es);
        /* a duplicate key, as in JSON */
        ck_assert_int_eq(
                sg_config_parse_yaml(BASE "data_dir: /x\n", &c, es, sizeof(es)),
                SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "data_dir: duplicate key"), "%s", es);
}
END_TEST

/* YAML 1.1's pitfalls: refused, naming key, line and column, never the
 * value; quoted, they are texts. */
START_TEST(test_yaml_pitfalls_refused) {
        static const struct {
                const char *line; /* appended to BASE, line 10 */
                const char *want;
        } cases[] = {
                {"instance_id: on\n", "instance_id: YAML line 10, column 14: "
                                      "an unquoted yes, no, on, off"},
                {"instance_id: NO\n", "instance_id: YAML line 10, column 14: "
                                      "an unquoted yes"},
                /* a key that takes a text: the advice is not "write true
                 * or false" alone */
                {"guarantee: y\n", "quote it (\"...\") for a text, or write "
                                   "true or false for a boolean"},
                {"batch: {max_ms: 0100}\n",
                 "batch.max_ms: YAML line 10, column 17: an unquoted value "
                 "that YAML 1.1, YAML 1.2 and JSON read as different"},
                {"batch: {max_ms: 1_000}\n", "batch.max_ms: YAML line 10"},
                {"batch: {max_ms: 1e3}\n", "batch.max_ms: YAML line 10"},
                {"batch: {max_ms: 0x64}\n", "batch.max_ms: YAML line 10"},
                {"batch: {max_ms: +100}\n", "batch.max_ms: YAML line 10"},
                {"batch: {max_ms: 1:40}\n", "batch.max_ms: YAML line 10"},
                {"batch: {max_ms: .inf}\n", "batch.max_ms: YAML line 10"},
                {"kafka_producer: {sasl.password: 0377}\n",
                 "kafka_producer.sasl.password: YAML line 10"},
                {"instance_id: &a x\nhttp: {address: *a}\n",
                 "http.address: YAML line 11, column 17: aliases"},
                {"instance_id: !!int 5\n", "instance_id: YAML line 10, "
                                           "column 14: tags are not supported"},
                {"---\ninstance_id: x\n", "(root): YAML line 10, column 1: a "
                                          "second YAML document"},
                /* a construct left open is found at the end of the file,
                 * past its last newline: it is placed on a line the file
                 * has (an editor's, 1-based), where the construct starts */
                {"instance_id: [a\n", "(root): YAML line 10, column 14: not "
                                      "valid YAML: did not find expected ','"
                                      " or ']' at the end of the file, in a "
                                      "flow sequence that starts here"},
                {"instance_id: \"a\nlog_level: info\n",
                 "(root): YAML line 10, column 14: not valid YAML: found "
                 "unexpected end of stream at the end of the file, in a "
                 "quoted scalar that starts here"},
                /* elsewhere the problem's own line, and the construct's */
                {"batch:\n  max_ms: 5\n - x\n",
                 "(root): YAML line 12, column 2: not valid YAML: did not "
                 "find expected key (while parsing a block mapping at line "
                 "2, column 1)"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char text[2048], es[2048] = "";
                sg_config_t *c = NULL;
                snprintf(text, sizeof(text), "%s%s", BASE, cases[i].line);
                sg_err_t err = sg_config_parse_yaml(text, &c, es, sizeof(es));
                ck_assert_msg(err == SG_ERR_CONFIG, "%s: %s", cases[i].line,
                              sg_err2str(err));
                ck_assert_msg(strstr(es, cases[i].want) != NULL,
                              "%s: got \"%s\", want \"%s\"", cases[i].line, es,
                              cases[i].want);
                ck_assert_msg(!strstr(es, "0377"), "a value quoted: %s", es);
        }
        /* quoted, the same values are texts */
        char es[2048] = "";
        sg_config_t *c = NULL;
        ASSERT_OK(sg_config_parse_yaml(BASE "instance_id: 'NO'\n"
                                            "kafka_producer: {linger.ms: "
                                            "\"0100\"}\n",
                                       &c, es, sizeof(es)),
                  es);
        ck_assert_pstr_eq(c->instance_id, "NO");
        ck_assert_pstr_eq(c->kafka_producer[0].value, "0100");
        sg_config_destroy(c);
        /* nothing at all */
        ck_assert_int_eq(
                sg_config_parse_yaml("# only a comment\n", &c, es, sizeof(es)),
                SG_ERR_CONFIG);
        ck_assert_msg(strstr(es, "empty"), "%s", es);
}
END_TEST

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

/* The format: .yaml and .yml are YAML, .json JSON; any other name by its
 * first character ('{': JSON). */
START_TEST(test_format_by_name_or_text) {
        char dir[] = "/tmp/sg-yaml-XXXXXX", p[256], es[2048] = "";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        const char *json = "{\"data_dir\":\"/tmp/x\",\"kafka\":{"
                           "\"bootstrap.servers\":\"b:1\",\"group.id\":\"g\"},"
                           "\"topics\":{\"t\":{\"output_topic\":\"o\","
                           "\"dlq_topic\":\"d\"}}}";
        static const struct {
                const char *name;
                bool yaml_text, ok;
        } cases[] = {
                {"a.yaml", true, true},  {"b.YML", true, true},
                {"c.conf", true, true},  {"d.conf", false, true},
                {"e", false, true},      {"f.json", true, false},
                {"g.yaml", false, true}, /* JSON is YAML too */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, cases[i].name);
                write_file(p, cases[i].yaml_text ? BASE : json);
                sg_config_t *c = NULL;
                sg_err_t err = sg_config_load(p, &c, es, sizeof(es));
                ck_assert_msg((err == SG_OK) == cases[i].ok, "%s: %s: %s",
                              cases[i].name, sg_err2str(err), es);
                if (!cases[i].ok)
                        ck_assert_msg(strstr(es, "not valid JSON"), "%s", es);
                sg_config_destroy(c);
                unlink(p);
        }
        rmdir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("config_yaml");
        TCase *tc = tcase_create("yaml");
        tcase_add_test(tc, test_yaml_example_equals_json);
        tcase_add_test(tc, test_yaml_values);
        tcase_add_test(tc, test_yaml_pitfalls_refused);
        tcase_add_test(tc, test_format_by_name_or_text);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
