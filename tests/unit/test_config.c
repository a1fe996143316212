/*
 * test_config.c — unit tests of lib/config.c (configuration loading and
 * validation).
 *
 * Covers: defaults of a minimal config, every field of the example configs
 * (read from $SG_SOURCE_ROOT/examples, set by meson), one test per
 * validation rule (SG_ERR_CONFIG and an error text naming the exact dotted
 * key path), secrets never echoed in errors, sg_field_src_parse() and
 * sg_config_is_secret() tables, sg_config_topic() lookups and file errors,
 * and the per-topic "snapshot" block (snapshot refetch): defaults, both sources, the
 * example configs, every rule with its key path, no secret in an error.
 * Run under ASan, the invalid-config table also checks that every error path
 * frees the half-built config.
 *
 * JSON texts below use ' for " (converted by json()) to stay readable.
 */
#include "config.h"
#include "kafka.h"
#include "seqgate.h"
#include "testutil.h"

#include <check.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/** Returns a malloc'd copy of @p text with every ' replaced by ". */
static char *json(const char *text) {
        char *s = strdup(text);
        ck_assert_ptr_nonnull(s);
        for (char *p = s; *p; p++)
                if (*p == '\'')
                        *p = '"';
        return s;
}

/** Parses @p text (' quotes); returns the error code, fills err. */
static sg_err_t parse_q(const char *text, sg_config_t **confp, char *err,
                        size_t err_size) {
        char *s = json(text);
        sg_err_t e = sg_config_parse(s, confp, err, err_size);
        free(s);
        return e;
}

static char *source_path(const char *rel) {
        const char *root = getenv("SG_SOURCE_ROOT");
        char *p;

        ck_assert_msg(
                root != NULL,
                "SG_SOURCE_ROOT must name the repository (meson sets it)");
        p = malloc(strlen(root) + strlen(rel) + 2);
        ck_assert_ptr_nonnull(p);
        sprintf(p, "%s/%s", root, rel);
        return p;
}

static sg_config_t *load_example(const char *rel) {
        char err[1024] = "";
        sg_config_t *conf = NULL;
        char *path = source_path(rel);
        sg_err_t e = sg_config_load(path, &conf, err, sizeof(err));

        ck_assert_msg(e == SG_OK, "%s: %d %s", path, e, err);
        ck_assert_ptr_nonnull(conf);
        free(path);
        return conf;
}

static const char *kv_get(const sg_kv_t *kv, size_t cnt, const char *name) {
        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(kv[i].name, name))
                        return kv[i].value;
        return NULL;
}

static void assert_src(const sg_field_src_t *s, sg_src_kind_t kind,
                       const char *name) {
        ck_assert_int_eq(s->kind, kind);
        if (name)
                ck_assert_str_eq(s->name, name);
        else
                ck_assert_ptr_null(s->name);
}

/* Base config pieces: CFG(",top-level members", ",members of topic orders"). */
#define KAFKA_OK "'kafka':{'bootstrap.servers':'b:9092','group.id':'g'}"
#define CFG(top, topic)                                                        \
        "{'data_dir':'/d'," KAFKA_OK top ",'topics':{'orders':{"               \
        "'output_topic':'orders.clean','dlq_topic':'orders.dlq'" topic "}}}"
#define SM_OK                                                                  \
        ",'state_machine':{'initial':'NEW','states':['NEW','CREATED','PAID']," \
        "'transitions':[{'type':'order.created','from':['NEW'],'to':'CREATED'" \
        "},"                                                                   \
        "{'type':'order.paid','from':['CREATED'],'to':'PAID'}]}"
#define SM(body) ",'state_machine':{" body "}"
#define SNAP(body) ",'snapshot':{" body "}"
#define SNAP_K                                                                 \
        "'source':'kafka','request_topic':'orders.snap.req',"                  \
        "'reply_topic':'orders.snap.rep'"
#define SNAP_H                                                                 \
        "'source':'http','url':'http://authority:8080/orders/{aggregate}'"
/* Two input topics a and b, each with a kafka snapshot block. */
#define TWO(snap_a, snap_b)                                                    \
        "{'data_dir':'/d'," KAFKA_OK ",'topics':{"                             \
        "'a':{'output_topic':'a.out','dlq_topic':'a.dlq',"                     \
        "'snapshot':{'source':'kafka'," snap_a "}},"                           \
        "'b':{'output_topic':'b.out','dlq_topic':'b.dlq',"                     \
        "'snapshot':{'source':'kafka'," snap_b "}}}}"

/* ------------------------------------------------------------------------ */
/* Valid configs                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_minimal_defaults) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_topic_config_t *tc;

        ck_assert_int_eq(parse_q(CFG("", ""), &conf, err, sizeof(err)), SG_OK);
        ck_assert_str_eq(err, "");
        /* instance_id defaults to the host name: two hosts sharing one
         * configuration file must not fence each other */
        char host[256] = "", tx[300];
        ck_assert_int_eq(gethostname(host, sizeof(host) - 1), 0);
        ck_assert_str_eq(conf->instance_id, host[0] ? host : "seqgate");
        snprintf(tx, sizeof(tx), "g-%s", conf->instance_id);
        ck_assert_str_eq(conf->group_id, "g");
        ck_assert_str_eq(conf->data_dir, "/d");
        ck_assert_int_eq(conf->guarantee, SG_GUARANTEE_EXACTLY_ONCE);
        ck_assert_str_eq(conf->transactional_id, tx);
        ck_assert_uint_eq(conf->kafka_cnt, 2);
        ck_assert_str_eq(
                kv_get(conf->kafka, conf->kafka_cnt, "bootstrap.servers"),
                "b:9092");
        ck_assert_uint_eq(conf->kafka_consumer_cnt, 0);
        ck_assert_uint_eq(conf->kafka_producer_cnt, 0);
        ck_assert_uint_eq(conf->map_size_bytes, 1073741824u);
        ck_assert_uint_eq(conf->map_growth_bytes, 1073741824u);
        ck_assert_int_eq(conf->batch_max_records, 1000);
        ck_assert_int_eq(conf->batch_max_ms, 100);
        ck_assert_int_eq(conf->stats_interval_ms, 10000);
        ck_assert_int_eq(conf->commit_interval_ms, 1000);
        ck_assert_int_eq(conf->delivery_timeout_ms, 60000);
        ck_assert_int_eq(conf->sweep_max_per_batch, 1000);
        ck_assert_int_eq(conf->deadline_max_per_batch, 1000);
        ck_assert_int_eq(conf->pause_retry_ms, 1000);
        ck_assert_int_eq(conf->broker_retry_timeout_ms, 120000);

        ck_assert_uint_eq(conf->topic_cnt, 1);
        tc = &conf->topics[0];
        ck_assert_str_eq(tc->name, "orders");
        ck_assert_str_eq(tc->output_topic, "orders.clean");
        ck_assert_str_eq(tc->dlq_topic, "orders.dlq");
        ck_assert_int_eq(tc->output_partitioning, SG_PART_INPUT);
        ck_assert_int_eq(tc->format, SG_FORMAT_CLOUDEVENTS);
        assert_src(&tc->id, SG_SRC_CE, "id");
        ck_assert_uint_eq(tc->scope_cnt, 1);
        assert_src(&tc->scope[0], SG_SRC_CE, "source");
        assert_src(&tc->aggregate, SG_SRC_KEY, NULL);
        assert_src(&tc->version, SG_SRC_CE, "sequence");
        assert_src(&tc->type, SG_SRC_CE, "type");
        ck_assert_ptr_null(tc->digest_pointer);
        ck_assert_uint_eq(tc->max_field_bytes, 1024);
        ck_assert_int_eq(tc->dedup_ttl_ms, 604800000);
        ck_assert_int_eq(tc->order_mode, SG_ORDER_STRICT);
        ck_assert_uint_eq(tc->first_version, 1);
        ck_assert_uint_eq(tc->max_version_jump, 100000);
        ck_assert_int_eq(tc->new_aggregate, SG_NEWAGG_STRICT);
        ck_assert(!tc->stale_drop);
        ck_assert_int_eq(tc->gap_timeout_ms, 30000);
        ck_assert_int_eq(tc->gap_policy, SG_GAP_DLQ);
        ck_assert_uint_eq(tc->max_parked_per_aggregate, 1000);
        ck_assert_uint_eq(tc->max_parked_total, 100000);
        ck_assert_uint_eq(tc->max_parked_bytes, 268435456u);
        ck_assert_int_eq(tc->on_park_overflow, SG_OVERFLOW_PAUSE);
        ck_assert(!tc->sm.enabled);
        ck_assert_uint_eq(tc->sm.state_cnt, 0);
        ck_assert_uint_eq(tc->sm.transition_cnt, 0);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_minimal_example_file) {
        sg_config_t *conf = load_example("examples/minimal.json");
        const sg_topic_config_t *tc = sg_config_topic(conf, "orders");

        ck_assert_ptr_nonnull(tc);
        ck_assert_str_eq(conf->group_id, "seqgate");
        ck_assert_int_eq(tc->order_mode, SG_ORDER_STRICT);
        assert_src(&tc->version, SG_SRC_CE, "sequence");
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_orders_example_every_field) {
        sg_config_t *conf = load_example("examples/orders.json");
        const sg_topic_config_t *tc;
        const sg_state_machine_t *sm;

        ck_assert_str_eq(conf->instance_id, "seqgate-1");
        ck_assert_str_eq(conf->data_dir, "/var/lib/seqgate");
        ck_assert_str_eq(conf->group_id, "orders-seqgate");
        ck_assert_int_eq(conf->guarantee, SG_GUARANTEE_EXACTLY_ONCE);
        ck_assert_str_eq(
                kv_get(conf->kafka, conf->kafka_cnt, "bootstrap.servers"),
                "localhost:9092");
        ck_assert_str_eq(kv_get(conf->kafka, conf->kafka_cnt, "group.id"),
                         "orders-seqgate");
        ck_assert_uint_eq(conf->kafka_consumer_cnt, 2);
        ck_assert_str_eq(kv_get(conf->kafka_consumer, conf->kafka_consumer_cnt,
                                "session.timeout.ms"),
                         "10000");
        ck_assert_str_eq(kv_get(conf->kafka_consumer, conf->kafka_consumer_cnt,
                                "heartbeat.interval.ms"),
                         "3000");
        ck_assert_uint_eq(conf->kafka_producer_cnt, 1);
        /* written as the number 5 in the file */
        ck_assert_str_eq(conf->kafka_producer[0].name, "linger.ms");
        ck_assert_str_eq(conf->kafka_producer[0].value, "5");
        ck_assert_uint_eq(conf->map_size_bytes, 1073741824u);
        ck_assert_uint_eq(conf->map_growth_bytes, 1073741824u);
        ck_assert_int_eq(conf->batch_max_records, 1000);
        ck_assert_int_eq(conf->batch_max_ms, 100);
        ck_assert_int_eq(conf->stats_interval_ms, 10000);
        ck_assert_int_eq(conf->commit_interval_ms, 1000);
        ck_assert_int_eq(conf->delivery_timeout_ms, 60000);
        ck_assert_int_eq(conf->sweep_max_per_batch, 1000);
        ck_assert_int_eq(conf->deadline_max_per_batch, 1000);
        ck_assert_int_eq(conf->pause_retry_ms, 1000);

        ck_assert_uint_eq(conf->topic_cnt, 1);
        tc = sg_config_topic(conf, "orders");
        ck_assert_ptr_eq(tc, &conf->topics[0]);
        ck_assert_str_eq(tc->output_topic, "orders.clean");
        ck_assert_str_eq(tc->dlq_topic, "orders.dlq");
        ck_assert_int_eq(tc->output_partitioning, SG_PART_INPUT);
        ck_assert_int_eq(tc->format, SG_FORMAT_CLOUDEVENTS);
        assert_src(&tc->id, SG_SRC_CE, "id");
        ck_assert_uint_eq(tc->scope_cnt, 1);
        assert_src(&tc->scope[0], SG_SRC_CE, "source");
        assert_src(&tc->aggregate, SG_SRC_KEY, NULL);
        assert_src(&tc->version, SG_SRC_CE, "sequence");
        assert_src(&tc->type, SG_SRC_CE, "type");
        ck_assert_str_eq(tc->digest_pointer, "/data");
        ck_assert_uint_eq(tc->max_field_bytes, 1024);
        ck_assert_int_eq(tc->dedup_ttl_ms, 604800000);
        ck_assert_int_eq(tc->order_mode, SG_ORDER_STRICT);
        ck_assert_uint_eq(tc->first_version, 1);
        ck_assert_uint_eq(tc->max_version_jump, 100000);
        ck_assert_int_eq(tc->new_aggregate, SG_NEWAGG_STRICT);
        ck_assert(!tc->stale_drop);
        ck_assert_int_eq(tc->gap_timeout_ms, 30000);
        ck_assert_int_eq(tc->gap_policy, SG_GAP_DLQ);
        ck_assert_uint_eq(tc->max_parked_per_aggregate, 1000);
        ck_assert_uint_eq(tc->max_parked_total, 100000);
        ck_assert_uint_eq(tc->max_parked_bytes, 268435456u);
        ck_assert_int_eq(tc->on_park_overflow, SG_OVERFLOW_PAUSE);

        sm = &tc->sm;
        ck_assert(sm->enabled);
        ck_assert_str_eq(sm->initial, "NEW");
        ck_assert_uint_eq(sm->state_cnt, 7);
        ck_assert_str_eq(sm->states[0], "NEW");
        ck_assert_str_eq(sm->states[6], "RETURNING");
        ck_assert_uint_eq(sm->transition_cnt, 6);
        ck_assert_str_eq(sm->transitions[0].type, "order.created");
        ck_assert_uint_eq(sm->transitions[0].from_cnt, 1);
        ck_assert_str_eq(sm->transitions[0].from[0], "NEW");
        ck_assert_str_eq(sm->transitions[0].to, "CREATED");
        ck_assert_str_eq(sm->transitions[4].type, "order.cancelled");
        ck_assert_uint_eq(sm->transitions[4].from_cnt, 2);
        ck_assert_str_eq(sm->transitions[4].from[0], "CREATED");
        ck_assert_str_eq(sm->transitions[4].from[1], "RETURNING");
        ck_assert_str_eq(sm->transitions[4].to, "CANCELLED");
        ck_assert_str_eq(sm->transitions[5].type, "order.returning");
        ck_assert_str_eq(sm->transitions[5].to, "RETURNING");
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_plain_json_example) {
        sg_config_t *conf = load_example("examples/plain-json.json");
        const sg_topic_config_t *acc, *pay;

        ck_assert_uint_eq(conf->topic_cnt, 2);
        acc = sg_config_topic(conf, "accounts");
        pay = sg_config_topic(conf, "payments");
        ck_assert_ptr_nonnull(acc);
        ck_assert_ptr_nonnull(pay);
        ck_assert_ptr_ne(acc, pay);
        ck_assert_str_eq(kv_get(conf->kafka_producer, conf->kafka_producer_cnt,
                                "enable.idempotence"),
                         "true");

        ck_assert_int_eq(acc->format, SG_FORMAT_JSON);
        ck_assert_int_eq(acc->output_partitioning, SG_PART_MURMUR2);
        assert_src(&acc->id, SG_SRC_HEADER, "idempotency-key");
        ck_assert_uint_eq(acc->scope_cnt, 2);
        assert_src(&acc->scope[0], SG_SRC_HEADER, "tenant");
        assert_src(&acc->scope[1], SG_SRC_POINTER, "/operation");
        assert_src(&acc->aggregate, SG_SRC_POINTER, "/account_id");
        assert_src(&acc->version, SG_SRC_POINTER, "/version");
        assert_src(&acc->type, SG_SRC_POINTER, "/event_type");
        ck_assert_str_eq(acc->digest_pointer, "/payload");
        ck_assert_int_eq(acc->dedup_ttl_ms, 86400000);
        ck_assert_int_eq(acc->order_mode, SG_ORDER_LATEST_WINS);
        ck_assert(acc->stale_drop);
        ck_assert(acc->sm.enabled);
        ck_assert_str_eq(acc->sm.initial, "NONE");
        ck_assert_uint_eq(acc->sm.transition_cnt, 4);

        /* dedup-only: format json, no version, mode none */
        ck_assert_int_eq(pay->format, SG_FORMAT_JSON);
        assert_src(&pay->id, SG_SRC_POINTER, "/payment_id");
        ck_assert_uint_eq(pay->scope_cnt, 0);
        assert_src(&pay->aggregate, SG_SRC_KEY, NULL);
        assert_src(&pay->version, SG_SRC_NONE, NULL);
        assert_src(&pay->type, SG_SRC_NONE, NULL);
        ck_assert_ptr_null(pay->digest_pointer);
        ck_assert_int_eq(pay->order_mode, SG_ORDER_NONE);
        ck_assert(!pay->sm.enabled);
        sg_config_destroy(conf);
}
END_TEST

/* format cloudevents takes "/data" and pointers under it as the digest;
 * format json any pointer (semantics §2). */
START_TEST(test_digest_pointers_allowed) {
        static const char *const ok[] = {
                CFG("", ",'envelope':{'digest':'/data'}"),
                CFG("", ",'envelope':{'digest':'/data/'}"),
                CFG("", ",'envelope':{'digest':'/data/amount/0'}"),
                CFG("", ",'envelope':{'format':'cloudevents','digest':'/data/"
                        "a~1b'}"),
                CFG("",
                    ",'envelope':{'format':'json','id':'/id','version':'/v',"
                    "'digest':'/payload'}"),
        };
        static const char *const want[] = {"/data", "/data/", "/data/amount/0",
                                           "/data/a~1b", "/payload"};

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char err[512] = "";
                sg_config_t *conf = NULL;

                ck_assert_msg(parse_q(ok[i], &conf, err, sizeof(err)) == SG_OK,
                              "case %zu: %s", i, err);
                ck_assert_str_eq(conf->topics[0].digest_pointer, want[i]);
                sg_config_destroy(conf);
        }
}
END_TEST

START_TEST(test_explicit_values) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_topic_config_t *tc;

        ck_assert_msg(
                parse_q(CFG(",'instance_id':'i-7','guarantee':'at_least_once',"
                            "'store':{'map_size_bytes':1048576,"
                            "'map_growth_bytes':2097152},"
                            "'batch':{'max_records':100000,'max_ms':1},"
                            "'stats_interval_ms':0,'delivery_timeout_ms':5,"
                            "'commit_interval_ms':0,"
                            "'sweep_max_per_batch':7,'deadline_max_per_batch':"
                            "8,"
                            "'pause_retry_ms':9",
                            ",'output_partitioning':'murmur2',"
                            "'envelope':{'version':null,'scope':[],"
                            "'aggregate':'ce:subject','type':null,"
                            "'digest':'value','max_field_bytes':1},"
                            "'dedup':{'ttl_ms':1000},"
                            "'ordering':{'mode':'none','first_version':0,"
                            "'max_version_jump':1,"
                            "'new_aggregate':'trust_first_seen',"
                            "'stale':'drop','gap_timeout_ms':1,"
                            "'gap_policy':'hold','max_parked_per_aggregate':1,"
                            "'max_parked_total':9007199254740992,"
                            "'max_parked_bytes':1,'on_park_overflow':'dlq'}"),
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        ck_assert_str_eq(conf->instance_id, "i-7");
        ck_assert_uint_eq(conf->map_size_bytes, 1048576);
        ck_assert_uint_eq(conf->map_growth_bytes, 2097152);
        ck_assert_int_eq(conf->batch_max_records, 100000);
        ck_assert_int_eq(conf->batch_max_ms, 1);
        ck_assert_int_eq(conf->stats_interval_ms, 0);
        ck_assert_int_eq(conf->commit_interval_ms, 0);
        ck_assert_int_eq(conf->delivery_timeout_ms, 5);
        ck_assert_int_eq(conf->sweep_max_per_batch, 7);
        ck_assert_int_eq(conf->deadline_max_per_batch, 8);
        ck_assert_int_eq(conf->pause_retry_ms, 9);
        tc = &conf->topics[0];
        ck_assert_int_eq(tc->output_partitioning, SG_PART_MURMUR2);
        assert_src(&tc->version, SG_SRC_NONE, NULL);
        assert_src(&tc->type, SG_SRC_NONE, NULL);
        assert_src(&tc->aggregate, SG_SRC_CE, "subject");
        assert_src(&tc->id, SG_SRC_CE, "id");
        ck_assert_uint_eq(tc->scope_cnt, 0);
        ck_assert_ptr_null(tc->digest_pointer);
        ck_assert_uint_eq(tc->max_field_bytes, 1);
        ck_assert_int_eq(tc->dedup_ttl_ms, 1000);
        ck_assert_int_eq(tc->order_mode, SG_ORDER_NONE);
        ck_assert_uint_eq(tc->first_version, 0);
        ck_assert_uint_eq(tc->max_version_jump, 1);
        ck_assert_int_eq(tc->new_aggregate, SG_NEWAGG_TRUST_FIRST_SEEN);
        ck_assert(tc->stale_drop);
        ck_assert_int_eq(tc->gap_timeout_ms, 1);
        ck_assert_int_eq(tc->gap_policy, SG_GAP_HOLD);
        ck_assert_uint_eq(tc->max_parked_per_aggregate, 1);
        ck_assert_uint_eq(tc->max_parked_total, UINT64_C(9007199254740992));
        ck_assert_uint_eq(tc->max_parked_bytes, 1);
        ck_assert_int_eq(tc->on_park_overflow, SG_OVERFLOW_DLQ);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_kafka_values_converted) {
        char err[512] = "";
        sg_config_t *conf = NULL;

        ck_assert_msg(
                parse_q("{'data_dir':'/d','kafka':{'bootstrap.servers':'b:1',"
                        "'group.id':'g','linger.ms':5,'socket.keepalive.enable'"
                        ":"
                        "true,'enable.auto.commit':false,'acks':-1},"
                        "'kafka_consumer':{'fetch.wait.max.ms':0.5e3,"
                        "'sasl.password':'p'},"
                        "'kafka_producer':{'acks':'all','batch.num.messages':"
                        "10000,'enable.idempotence':'true'},"
                        "'topics':{'t':{'output_topic':'o','dlq_topic':'d'}}}",
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        ck_assert_str_eq(kv_get(conf->kafka, conf->kafka_cnt, "linger.ms"),
                         "5");
        ck_assert_str_eq(
                kv_get(conf->kafka, conf->kafka_cnt, "socket.keepalive.enable"),
                "true");
        ck_assert_str_eq(
                kv_get(conf->kafka, conf->kafka_cnt, "enable.auto.commit"),
                "false");
        ck_assert_str_eq(kv_get(conf->kafka, conf->kafka_cnt, "acks"), "-1");
        ck_assert_str_eq(kv_get(conf->kafka_consumer, conf->kafka_consumer_cnt,
                                "fetch.wait.max.ms"),
                         "500");
        /* a secret is passed through verbatim */
        ck_assert_str_eq(kv_get(conf->kafka_consumer, conf->kafka_consumer_cnt,
                                "sasl.password"),
                         "p");
        ck_assert_str_eq(kv_get(conf->kafka_producer, conf->kafka_producer_cnt,
                                "batch.num.messages"),
                         "10000");
        sg_config_destroy(conf);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Invalid configs: each names its key                                      */
/* ------------------------------------------------------------------------ */

typedef struct bad_case {
        const char *json;    /* ' for " */
        const char *expect;  /* must appear in errstr (key path first) */
        const char *expect2; /* NULL or a second required substring */
} bad_case_t;

static const bad_case_t bad_cases[] = {
        /* syntax and shape */
        {"{'data_dir':'/d',\n  'kafka': ,\n}", "(root): ", "line 2, column 12"},
        {"{'data_dir':'/d'} trailing", "(root): ", "line 1, column 19"},
        {"", "(root): ", "line 1"},
        {"[1,2]", "(root): must be a JSON object", NULL},
        /* required keys */
        {"{" KAFKA_OK ",'topics':{'o':{'output_topic':'x','dlq_topic':'y'}}}",
         "data_dir: required", NULL},
        {"{'data_dir':'','kafka':{},'topics':{}}",
         "data_dir: must not be empty", NULL},
        {"{'data_dir':'/"
         "d','topics':{'o':{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka: required", NULL},
        {"{'data_dir':'/d','kafka':'b:9092','topics':{}}",
         "kafka: must be a JSON object", NULL},
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b'},'topics':{'o':"
         "{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka.group.id: required", NULL},
        {"{'data_dir':'/d','kafka':{'group.id':'g'},'topics':{'o':"
         "{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka.bootstrap.servers: required", NULL},
        {"{'data_dir':'/d','kafka':{'group.id':'','bootstrap.servers':'b'},"
         "'topics':{'o':{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka.group.id: required", NULL},
        {"{'data_dir':'/d'," KAFKA_OK "}", "topics: required", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{}}",
         "topics: must name at least one input topic", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':['orders']}",
         "topics: must be a JSON object", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'dlq_topic':'d'}}}",
         "topics.orders.output_topic: required", NULL},
        {"{'data_dir':'/d'," KAFKA_OK
         ",'topics':{'orders':{'output_topic':'o'}}}",
         "topics.orders.dlq_topic: required", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':'o'}}",
         "topics.orders: must be a JSON object", NULL},
        {CFG(",'instance_id':''", ""), "instance_id: must not be empty", NULL},
        {CFG(",'instance_id':7", ""), "instance_id: must be a string", NULL},
        /* topic names */
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'bad topic':{'output_topic':"
         "'o','dlq_topic':'d'}}}",
         "topics.bad topic: \"bad topic\" is not a valid Kafka topic name",
         NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'..':{'output_topic':"
         "'o','dlq_topic':'d'}}}",
         "topics[\"..\"]: \"..\" is not a valid Kafka topic name", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'a/b','dlq_topic':'d'}}}",
         "topics.orders.output_topic: \"a/b\" is not a valid Kafka topic name",
         NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'.','dlq_topic':'d'}}}",
         "topics.orders.output_topic: ", "valid Kafka topic name"},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'o','dlq_topic':'..'}}}",
         "topics.orders.dlq_topic: ", "valid Kafka topic name"},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'o','dlq_topic':'d\u00e9'}}}",
         "topics.orders.dlq_topic: ", "valid Kafka topic name"},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'orders','dlq_topic':'d'}}}",
         "topics.orders.output_topic: must differ from the input topic", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'o','dlq_topic':'orders'}}}",
         "topics.orders.dlq_topic: must differ from the input topic", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'o','dlq_topic':'o'}}}",
         "topics.orders.dlq_topic: must differ from output_topic", NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'orders.clean','dlq_topic':'d'},'orders.clean':{'output_topic':"
         "'x','dlq_topic':'d'}}}",
         "topics.orders.output_topic: \"orders.clean\" is also an input topic",
         NULL},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'a':{'output_topic':"
         "'o','dlq_topic':'b'},'b':{'output_topic':'x','dlq_topic':'d'}}}",
         "topics.a.dlq_topic: \"b\" is also an input topic", NULL},
        /* unknown and duplicate keys */
        {CFG(",'foo':1", ""), "foo: unknown key; allowed: $schema, instance_id",
         NULL},
        {CFG("", ",'outputs':'x'"),
         "topics.orders.outputs: unknown key; allowed: output_topic", NULL},
        {CFG("", ",'ordering':{'gap_polcy':'dlq'}"),
         "topics.orders.ordering.gap_polcy: unknown key; did you mean "
         "\"gap_policy\"? allowed: mode, "
         "first_version, max_version_jump, new_aggregate, stale, "
         "gap_timeout_ms, gap_policy, max_parked_per_aggregate, "
         "max_parked_total, max_parked_bytes, on_park_overflow",
         NULL},
        {CFG("", ",'envelope':{'ids':'key'}"),
         "topics.orders.envelope.ids: unknown key; allowed: format, id", NULL},
        {CFG("", ",'dedup':{'ttl':1000}"),
         "topics.orders.dedup.ttl: unknown key; did you mean \"ttl_ms\"? "
         "allowed: ttl_ms",
         NULL},
        {CFG("", SM("'initial':'A','states':['A'],'transitions':[{'type':'t',"
                    "'from':['A'],'to':'A'}],'final':'A'")),
         "topics.orders.state_machine.final: unknown key", NULL},
        {CFG("", SM("'initial':'A','states':['A'],'transitions':[{'type':'t',"
                    "'from':['A'],'to':'A','guard':1}]")),
         "topics.orders.state_machine.transitions[0].guard: unknown key; "
         "allowed: type, from, to",
         NULL},
        {CFG(",'store':{'map_size':1048576}", ""),
         "store.map_size: unknown key; did you mean \"map_size_bytes\"? "
         "allowed: map_size_bytes, map_growth_bytes",
         NULL},
        {CFG(",'batch':{'max_records':1,'max_bytes':1}", ""),
         "batch.max_bytes: unknown key; allowed: max_records, max_ms", NULL},
        {CFG(",'data_dir':'/e'", ""), "data_dir: duplicate key", NULL},
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b','group.id':'g',"
         "'group.id':'h'},'topics':{'o':{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka.group.id: duplicate key", NULL},
        {CFG("", ",'ordering':{'mode':'strict','mode':'none'}"),
         "topics.orders.ordering.mode: duplicate key", NULL},
        /* enums */
        {CFG("", ",'ordering':{'gap_policy':'wait'}"),
         "topics.orders.ordering.gap_policy: \"wait\" is not allowed; allowed: "
         "dlq, skip, hold",
         NULL},
        {CFG("", ",'ordering':{'gap_policy':1}"),
         "topics.orders.ordering.gap_policy: must be a string; allowed: dlq, "
         "skip, hold",
         NULL},
        {CFG("", ",'ordering':{'mode':'loose'}"),
         "topics.orders.ordering.mode: \"loose\" is not allowed; allowed: "
         "strict, latest_wins, none",
         NULL},
        {CFG("", ",'ordering':{'new_aggregate':'trust'}"),
         "topics.orders.ordering.new_aggregate: \"trust\" is not allowed; "
         "allowed: strict, trust_first_seen",
         NULL},
        {CFG("", ",'ordering':{'stale':'ignore'}"),
         "topics.orders.ordering.stale: \"ignore\" is not allowed; allowed: "
         "dlq, drop",
         NULL},
        {CFG("", ",'ordering':{'on_park_overflow':'block'}"),
         "topics.orders.ordering.on_park_overflow: \"block\" is not allowed; "
         "allowed: pause, dlq",
         NULL},
        {CFG("", ",'output_partitioning':'random'"),
         "topics.orders.output_partitioning: \"random\" is not allowed; "
         "allowed: input, murmur2",
         NULL},
        {CFG("", ",'envelope':{'format':'avro'}"),
         "topics.orders.envelope.format: \"avro\" is not allowed; allowed: "
         "cloudevents, json",
         NULL},
        {CFG(",'guarantee':'at_most_once'", ""),
         "guarantee: \"at_most_once\" is not allowed; allowed: "
         "at_least_once, exactly_once",
         NULL},
        {CFG(",'guarantee':'exactly_once','kafka_consumer':{'isolation.level':"
             "'read_uncommitted'}",
             ""),
         "kafka_consumer.isolation.level: must be read_committed", NULL},
        {CFG(",'guarantee':'exactly_once','kafka_producer':{'transactional.id':"
             "'x'}",
             ""),
         "kafka_producer.transactional.id: set by seqgate", NULL},
        {CFG("", ",'changelog_topic':'orders'"),
         "topics.orders.changelog_topic: must differ from the input", NULL},
        {CFG("", ",'changelog_topic':'bad name'"),
         "topics.orders.changelog_topic:", NULL},
        /* integers */
        {CFG(",'store':{'map_size_bytes':1000}", ""),
         "store.map_size_bytes: must be an integer >= 1048576", NULL},
        {CFG(",'store':{'map_size_bytes':1048576.5}", ""),
         "store.map_size_bytes: must be an integer >= 1048576", NULL},
        {CFG(",'store':{'map_size_bytes':'1073741824'}", ""),
         "store.map_size_bytes: must be an integer >= 1048576", NULL},
        {CFG(",'store':{'map_size_bytes':1e300}", ""),
         "store.map_size_bytes: must be an integer >= 1048576", "2^53"},
        {CFG(",'store':{'map_growth_bytes':1048575}", ""),
         "store.map_growth_bytes: must be an integer >= 1048576", NULL},
        {CFG(",'store':1", ""), "store: must be a JSON object", NULL},
        {CFG(",'batch':{'max_records':0}", ""),
         "batch.max_records: must be an integer from 1 to 100000", NULL},
        {CFG(",'batch':{'max_records':100001}", ""),
         "batch.max_records: must be an integer from 1 to 100000", NULL},
        {CFG(",'batch':{'max_records':1.5}", ""),
         "batch.max_records: must be an integer from 1 to 100000", NULL},
        {CFG(",'batch':{'max_records':true}", ""),
         "batch.max_records: must be an integer", NULL},
        {CFG(",'batch':{'max_ms':0}", ""),
         "batch.max_ms: must be an integer from 1 to 60000", NULL},
        {CFG(",'batch':{'max_ms':60001}", ""),
         "batch.max_ms: must be an integer from 1 to 60000", NULL},
        {CFG(",'stats_interval_ms':-1", ""),
         "stats_interval_ms: must be an integer >= 0", NULL},
        {CFG(",'commit_interval_ms':-1", ""),
         "commit_interval_ms: must be an integer from 0 to 600000", NULL},
        {CFG(",'commit_interval_ms':600001", ""),
         "commit_interval_ms: must be an integer from 0 to 600000", NULL},
        {CFG(",'delivery_timeout_ms':0", ""),
         "delivery_timeout_ms: must be an integer >= 1", NULL},
        {CFG(",'sweep_max_per_batch':0", ""),
         "sweep_max_per_batch: must be an integer from 1", NULL},
        {CFG(",'deadline_max_per_batch':-5", ""),
         "deadline_max_per_batch: must be an integer from 1", NULL},
        {CFG(",'pause_retry_ms':0.25", ""),
         "pause_retry_ms: must be an integer >= 1", NULL},
        {CFG(",'broker_retry_timeout_ms':0", ""),
         "broker_retry_timeout_ms: must be an integer >= 1", NULL},
        {CFG("", ",'ordering':{'gap_timeout_ms':0}"),
         "topics.orders.ordering.gap_timeout_ms: must be an integer >= 1",
         NULL},
        {CFG("", ",'dedup':{'ttl_ms':999}"),
         "topics.orders.dedup.ttl_ms: must be an integer >= 1000", NULL},
        {CFG("", ",'ordering':{'first_version':-1}"),
         "topics.orders.ordering.first_version: must be an integer >= 0", NULL},
        {CFG("", ",'ordering':{'first_version':9007199254740994}"),
         "topics.orders.ordering.first_version: must be an integer >= 0",
         "2^53"},
        /* integers are read exactly, not through a double: 2^53 + 1 is
         * not 2^53 */
        {CFG("", ",'ordering':{'first_version':9007199254740993}"),
         "topics.orders.ordering.first_version: must be an integer >= 0",
         "2^53"},
        {CFG("", ",'ordering':{'max_parked_bytes':9007199254740993}"),
         "topics.orders.ordering.max_parked_bytes: must be an integer >= 1",
         "2^53"},
        {CFG(",'store':{'map_size_bytes':9007199254740992.5}", ""),
         "store.map_size_bytes: must be an integer >= 1048576", NULL},
        {CFG("", ",'ordering':{'max_version_jump':0}"),
         "topics.orders.ordering.max_version_jump: must be an integer >= 1",
         NULL},
        {CFG("", ",'ordering':{'max_parked_per_aggregate':0}"),
         "topics.orders.ordering.max_parked_per_aggregate: must be an integer "
         ">= 1",
         NULL},
        {CFG("", ",'ordering':{'max_parked_total':0}"),
         "topics.orders.ordering.max_parked_total: must be an integer >= 1",
         NULL},
        {CFG("", ",'ordering':{'max_parked_bytes':0}"),
         "topics.orders.ordering.max_parked_bytes: must be an integer >= 1",
         NULL},
        {CFG("", ",'ordering':{'max_parked_per_aggregate':11,"
                 "'max_parked_total':10}"),
         "topics.orders.ordering.max_parked_per_aggregate: must be <= "
         "max_parked_total (10)",
         NULL},
        /* semantics §4 "Which clock": nothing would end the wait */
        {CFG("", ",'ordering':{'gap_policy':'hold',"
                 "'on_park_overflow':'pause'}"),
         "topics.orders.ordering.on_park_overflow: \"pause\" is not "
         "allowed with gap_policy \"hold\"",
         "stop the partition for good"},
        {CFG("", ",'envelope':{'max_field_bytes':0}"),
         "topics.orders.envelope.max_field_bytes: must be an integer from 1",
         NULL},
        /* field sources and envelope */
        {CFG("", ",'envelope':{'id':'foo'}"),
         "topics.orders.envelope.id: \"foo\" is not a field source; allowed: "
         "\"key\", \"header:NAME\", \"/json/pointer\"",
         NULL},
        {CFG("", ",'envelope':{'id':null}"),
         "topics.orders.envelope.id: must not be null", NULL},
        {CFG("", ",'envelope':{'id':5}"),
         "topics.orders.envelope.id: must be a string; allowed: ", NULL},
        {CFG("", ",'envelope':{'aggregate':'header:'}"),
         "topics.orders.envelope.aggregate: ", "header name"},
        {CFG("", ",'envelope':{'version':'ce:'}"),
         "topics.orders.envelope.version: ", "CloudEvents spec"},
        {CFG("", ",'envelope':{'type':'ce:Type'}"),
         "topics.orders.envelope.type: \"ce:Type\" is not a CloudEvents "
         "attribute",
         NULL},
        {CFG("", ",'envelope':{'scope':'ce:source'}"),
         "topics.orders.envelope.scope: must be an array", NULL},
        {CFG("", ",'envelope':{'scope':['ce:source','/a~2']}"),
         "topics.orders.envelope.scope[1]: \"/a~2\" is not a valid JSON "
         "Pointer",
         NULL},
        {CFG("", ",'envelope':{'digest':'data'}"),
         "topics.orders.envelope.digest: \"data\" is not allowed; allowed: "
         "\"value\" or a JSON Pointer",
         NULL},
        {CFG("", ",'envelope':{'digest':'/a~'}"),
         "topics.orders.envelope.digest: \"/a~\" is not allowed", NULL},
        {CFG("", ",'envelope':{'digest':null}"),
         "topics.orders.envelope.digest: must be a string", NULL},
        /* format cloudevents: the digest is of the event's data (semantics
         * §2); a pointer elsewhere would ignore the payload */
        {CFG("", ",'envelope':{'digest':'/payload'}"),
         "topics.orders.envelope.digest: \"/payload\" is not allowed with "
         "format \"cloudevents\"",
         "\"/data\""},
        {CFG("", ",'envelope':{'digest':'/id'}"),
         "topics.orders.envelope.digest: \"/id\" is not allowed", NULL},
        {CFG("", ",'envelope':{'digest':'/database'}"),
         "topics.orders.envelope.digest: \"/database\" is not allowed", NULL},
        {CFG("", ",'envelope':{'digest':'/data~1x'}"),
         "topics.orders.envelope.digest: \"/data~1x\" is not allowed", NULL},
        {CFG("", ",'envelope':{'format':'json','version':'/v'}"),
         "topics.orders.envelope.id: required with format \"json\"", NULL},
        {CFG("", ",'envelope':{'format':'json','id':'ce:id'}"),
         "topics.orders.envelope.id: \"ce:id\" needs format \"cloudevents\"",
         NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id','version':'/v',"
                 "'scope':['key','ce:source']}"),
         "topics.orders.envelope.scope[1]: \"ce:source\" needs format "
         "\"cloudevents\"",
         NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id','version':'/v',"
                 "'aggregate':'ce:subject'}"),
         "topics.orders.envelope.aggregate: \"ce:subject\" needs format", NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id','version':'/v',"
                 "'type':'ce:type'}"),
         "topics.orders.envelope.type: \"ce:type\" needs format", NULL},
        {CFG("", ",'envelope':{'version':null}"),
         "topics.orders.ordering.mode: \"strict\" (the default) needs "
         "envelope.version",
         NULL},
        {CFG("",
             ",'envelope':{'version':null},'ordering':{'mode':'latest_wins'}"),
         "topics.orders.ordering.mode: \"latest_wins\" needs envelope.version",
         NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id'}"),
         "topics.orders.ordering.mode: \"strict\" (the default) needs "
         "envelope.version",
         NULL},
        {CFG("", ",'envelope':{'aggregate':null}"),
         "topics.orders.ordering.mode: \"strict\" (the default) needs "
         "envelope.aggregate",
         NULL},
        /* epochs (semantics §4b) */
        {CFG("", ",'envelope':{'version':null},'ordering':{'mode':'none',"
                 "'epoch':'ce:epoch'}"),
         "topics.orders.ordering.epoch: needs ordering.mode \"strict\" or "
         "\"latest_wins\"",
         NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id','version':'/v'},"
                 "'ordering':{'epoch':'ce:epoch'}"),
         "topics.orders.ordering.epoch: \"ce:epoch\" needs format", NULL},
        {CFG("", ",'ordering':{'epoch':'nowhere'}"),
         "topics.orders.ordering.epoch: ", NULL},
        {CFG("", ",'ordering':{'epoch':'/epoch','epoch_versions':'reset'}"),
         "topics.orders.ordering.epoch_versions: \"reset\" is not allowed; "
         "allowed: continue, restart",
         NULL},
        {CFG("", ",'envelope':[]"),
         "topics.orders.envelope: must be a JSON "
         "object",
         NULL},
        /* state machine */
        {CFG("", SM("'initial':'X','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A'],'to':'B'}]")),
         "topics.orders.state_machine.initial: \"X\" is not a declared state; "
         "allowed: A, B",
         NULL},
        {CFG("", SM("'states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A'],'to':'B'}]")),
         "topics.orders.state_machine.initial: required", NULL},
        {CFG("", SM("'initial':'A','states':['A','B','A'],'transitions':[{"
                    "'type':'t','from':['A'],'to':'B'}]")),
         "topics.orders.state_machine.states[2]: duplicate state \"A\"", NULL},
        {CFG("", SM("'initial':'A','states':[],'transitions':[]")),
         "topics.orders.state_machine.states: must be a non-empty array", NULL},
        {CFG("", SM("'initial':'A','states':['A',''],'transitions':[]")),
         "topics.orders.state_machine.states[1]: must be a non-empty string",
         NULL},
        {CFG("", SM("'initial':'A','states':['A']")),
         "topics.orders.state_machine.transitions: required", NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'','from':['A'],'to':'B'}]")),
         "topics.orders.state_machine.transitions[0].type: must not be empty",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A'],'to':'B'},{'type':'t','from':['B'],"
                    "'to':'A'}]")),
         "topics.orders.state_machine.transitions[1].type: \"t\" already has "
         "a transition",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A','C'],'to':'B'}]")),
         "topics.orders.state_machine.transitions[0].from[1]: \"C\" is not a "
         "declared state; allowed: A, B",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':[],'to':'B'}]")),
         "topics.orders.state_machine.transitions[0].from: must be a non-empty "
         "array",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A','A'],'to':'B'}]")),
         "topics.orders.state_machine.transitions[0].from[1]: duplicate state",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A'],'to':'Z'}]")),
         "topics.orders.state_machine.transitions[0].to: \"Z\" is not a "
         "declared state",
         NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':[{'type':"
                    "'t','from':['A']}]")),
         "topics.orders.state_machine.transitions[0].to: required", NULL},
        {CFG("", SM("'initial':'A','states':['A','B'],'transitions':['t']")),
         "topics.orders.state_machine.transitions[0]: must be a JSON object",
         NULL},
        {CFG("", ",'envelope':{'type':null}" SM_OK),
         "topics.orders.state_machine: needs envelope.type", NULL},
        {CFG("",
             ",'envelope':{'format':'json','id':'/id','version':'/v'}" SM_OK),
         "topics.orders.state_machine: needs envelope.type", NULL},
        {CFG("", ",'ordering':{'mode':'none'}" SM_OK),
         "topics.orders.state_machine: needs ordering.mode \"strict\" or "
         "\"latest_wins\"",
         NULL},
        /* librdkafka properties seqgate controls (semantics §6) */
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b','group.id':'g',"
         "'enable.auto.commit':'true'},'topics':{'o':{'output_topic':'x',"
         "'dlq_topic':'y'}}}",
         "kafka.enable.auto.commit: must not be true", "semantics §6"},
        {CFG(",'kafka_consumer':{'enable.auto.commit':true}", ""),
         "kafka_consumer.enable.auto.commit: must not be true", NULL},
        {CFG(",'kafka_consumer':{'enable.auto.commit':'1'}", ""),
         "kafka_consumer.enable.auto.commit: must not be true", NULL},
        {CFG(",'kafka_producer':{'enable.idempotence':false}", ""),
         "kafka_producer.enable.idempotence: must not be false", "idempotent"},
        {CFG(",'kafka_producer':{'enable.gapless.guarantee':false}", ""),
         "kafka_producer.enable.gapless.guarantee: must not be false",
         "Output order"},
        {CFG(",'kafka_producer':{'acks':'1'}", ""),
         "kafka_producer.acks: \"1\" is not allowed", "allowed: all, -1"},
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b','group.id':'g',"
         "'acks':0},'topics':{'o':{'output_topic':'x','dlq_topic':'y'}}}",
         "kafka.acks: \"0\" is not allowed", NULL},
        {CFG(",'kafka_producer':{'request.required.acks':'leader'}", ""),
         "kafka_producer.request.required.acks: \"leader\" is not allowed",
         NULL},
        {CFG(",'guarantee':'at_least_once','kafka_producer':{"
             "'transactional.id':'tx'}",
             ""),
         "kafka_producer.transactional.id: not allowed", NULL},
        {CFG(",'kafka_producer':{'transactional.id':'tx'}", ""),
         "kafka_producer.transactional.id: set by seqgate", NULL},
        {CFG(",'kafka_consumer':{'group.id':'other'}", ""),
         "kafka_consumer.group.id: set the consumer group in kafka.group.id",
         NULL},
        {CFG(",'kafka_consumer':{'fetch.min.bytes':null}", ""),
         "kafka_consumer.fetch.min.bytes: must be a string, number or boolean",
         NULL},
        {CFG(",'kafka_producer':{'linger.ms':[5]}", ""),
         "kafka_producer.linger.ms: must be a string, number or boolean", NULL},
        {CFG(",'kafka_producer':[]", ""),
         "kafka_producer: must be a JSON object", NULL},
        {CFG(",'kafka_consumer':{'':'x'}", ""),
         "kafka_consumer: a property name must not be empty", NULL},
        {CFG(",'kafka_producer':{'lingr.ms':'5'}", ""),
         "kafka_producer.lingr.ms: rejected by librdkafka", "lingr.ms"},
        {CFG(",'kafka_producer':{'linger.ms':'soon'}", ""),
         "kafka_producer.linger.ms: rejected by librdkafka", NULL},
        /* snapshot block (snapshot refetch): shape and source */
        {CFG("", ",'snapshot':'kafka'"),
         "topics.orders.snapshot: must be a JSON object", NULL},
        {CFG("", SNAP("")),
         "topics.orders.snapshot.source: required key is "
         "missing",
         "kafka"},
        {CFG("", SNAP("'url':'http://h/{aggregate}'")),
         "topics.orders.snapshot.source: required key is missing", NULL},
        {CFG("", SNAP("'source':'grpc'")),
         "topics.orders.snapshot.source: \"grpc\" is not allowed",
         "allowed: kafka, http"},
        {CFG("", SNAP("'source':null")),
         "topics.orders.snapshot.source: must be a string", NULL},
        {CFG("", SNAP(SNAP_K ",'sorce':'kafka'")),
         "topics.orders.snapshot.sorce: unknown key", "request_topic"},
        {CFG("", SNAP(SNAP_K ",'source':'http'")),
         "topics.orders.snapshot.source: duplicate key", NULL},
        /* kafka source */
        {CFG("", SNAP("'source':'kafka','reply_topic':'s.rep'")),
         "topics.orders.snapshot.request_topic: required key is missing", NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.req'")),
         "topics.orders.snapshot.reply_topic: required key is missing", NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'',"
                      "'reply_topic':'s.rep'")),
         "topics.orders.snapshot.request_topic: must not be empty", NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s req',"
                      "'reply_topic':'s.rep'")),
         "topics.orders.snapshot.request_topic: \"s req\" is not a valid "
         "Kafka topic name",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.req',"
                      "'reply_topic':'..'")),
         "topics.orders.snapshot.reply_topic: \"..\" is not a valid Kafka "
         "topic name",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.req',"
                      "'reply_topic':7")),
         "topics.orders.snapshot.reply_topic: must be a string", NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.x',"
                      "'reply_topic':'s.x'")),
         "topics.orders.snapshot.reply_topic: must differ from request_topic",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'orders',"
                      "'reply_topic':'s.rep'")),
         "topics.orders.snapshot.request_topic: \"orders\" is also an input "
         "topic (topics.orders)",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'orders.dlq',"
                      "'reply_topic':'s.rep'")),
         "topics.orders.snapshot.request_topic: \"orders.dlq\" is also "
         "topics.orders.dlq_topic",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.req',"
                      "'reply_topic':'orders.clean'")),
         "topics.orders.snapshot.reply_topic: \"orders.clean\" is also "
         "topics.orders.output_topic",
         NULL},
        {CFG("", SNAP("'source':'kafka','request_topic':'s.req',"
                      "'reply_topic':'orders'")),
         "topics.orders.snapshot.reply_topic: \"orders\" is also an input "
         "topic (topics.orders)",
         NULL},
        /* ... of any topic of the file */
        {TWO("'request_topic':'s.req','reply_topic':'b'",
             "'request_topic':'s.req2','reply_topic':'s.rep2'"),
         "topics.a.snapshot.reply_topic: \"b\" is also an input topic "
         "(topics.b)",
         NULL},
        {TWO("'request_topic':'s.req','reply_topic':'s.rep'",
             "'request_topic':'a.dlq','reply_topic':'s.rep2'"),
         "topics.b.snapshot.request_topic: \"a.dlq\" is also "
         "topics.a.dlq_topic",
         NULL},
        {TWO("'request_topic':'s.req','reply_topic':'s.rep'",
             "'request_topic':'s.req2','reply_topic':'s.rep'"),
         "topics.a.snapshot.reply_topic: \"s.rep\" is also "
         "topics.b.snapshot.reply_topic",
         NULL},
        {TWO("'request_topic':'s.req','reply_topic':'s.req2'",
             "'request_topic':'s.req2','reply_topic':'s.rep2'"),
         "topics.a.snapshot.reply_topic: \"s.req2\" is also "
         "topics.b.snapshot.request_topic",
         NULL},
        {TWO("'request_topic':'s.rep2','reply_topic':'s.rep'",
             "'request_topic':'s.req2','reply_topic':'s.rep2'"),
         "topics.a.snapshot.request_topic: \"s.rep2\" is also "
         "topics.b.snapshot.reply_topic",
         NULL},
        {CFG("", SNAP(SNAP_K ",'url':'http://h/{aggregate}'")),
         "topics.orders.snapshot.url: not allowed with source \"kafka\"", NULL},
        {CFG("", SNAP(SNAP_K ",'auth_header_env':'X'")),
         "topics.orders.snapshot.auth_header_env: not allowed with source "
         "\"kafka\"",
         NULL},
        /* limits of the state store's records (store.h), checked with the
         * rest of the file rather than when the engine starts */
        {CFG("", SNAP(SNAP_K) ",'envelope':{'max_field_bytes':1025}"),
         "topics.orders.envelope.max_field_bytes: at most 1024 with a "
         "snapshot source (the aggregate id is kept in the snapshot request)",
         NULL},
        {CFG("", SM("'initial':'NEW','states':['NEW',"
                    "'S12345678901234567890123456789012345678901234567890123456"
                    "7890ABC'],"
                    "'transitions':[{'type':'t','from':['NEW'],'to':'NEW'}]")),
         "topics.orders.state_machine.states: state \"S1234567890123456789012"
         "345678901...\" is longer than 63 bytes",
         NULL},
        /* http source */
        {CFG("", SNAP("'source':'http'")),
         "topics.orders.snapshot.url: required key is missing", NULL},
        {CFG("", SNAP(SNAP_H ",'request_topic':'s.req'")),
         "topics.orders.snapshot.request_topic: not allowed with source "
         "\"http\"",
         NULL},
        {CFG("", SNAP(SNAP_H ",'reply_topic':'s.rep'")),
         "topics.orders.snapshot.reply_topic: not allowed with source "
         "\"http\"",
         NULL},
        {CFG("", SNAP("'source':'http','url':''")),
         "topics.orders.snapshot.url: must not be empty", NULL},
        {CFG("", SNAP("'source':'http','url':['http://h/{aggregate}']")),
         "topics.orders.snapshot.url: must be a string", NULL},
        {CFG("", SNAP("'source':'http','url':'ftp://h/{aggregate}'")),
         "topics.orders.snapshot.url: must start with \"http://\" or "
         "\"https://\"",
         NULL},
        {CFG("", SNAP("'source':'http','url':'h:8080/{aggregate}'")),
         "topics.orders.snapshot.url: must start with", NULL},
        {CFG("", SNAP("'source':'http','url':'http://h/orders/{id}'")),
         "topics.orders.snapshot.url: must contain \"{aggregate}\"", NULL},
        {CFG("", SNAP("'source':'http','url':'http:///{aggregate}'")),
         "topics.orders.snapshot.url: needs a host", NULL},
        {CFG("", SNAP("'source':'http','url':'https://?q={aggregate}'")),
         "topics.orders.snapshot.url: needs a host", NULL},
        {CFG("", SNAP("'source':'http',"
                      "'url':'http://u:pw@h/{aggregate}'")),
         "topics.orders.snapshot.url: must not hold credentials",
         "auth_header_env"},
        {CFG("", SNAP("'source':'http','url':'http://h/a b/{aggregate}'")),
         "topics.orders.snapshot.url: must not contain spaces", NULL},
        {CFG("", SNAP("'source':'http','url':'http://h/\\t/{aggregate}'")),
         "topics.orders.snapshot.url: must not contain spaces", NULL},
        {CFG("", SNAP("'source':'http','url':'http://h/\xc3\xa9/{aggregate}'")),
         "topics.orders.snapshot.url: must not contain spaces", "non-ASCII"},
        {CFG("", SNAP(SNAP_H ",'auth_header_env':'1TOKEN'")),
         "topics.orders.snapshot.auth_header_env: must be the NAME of an "
         "environment variable",
         NULL},
        {CFG("", SNAP(SNAP_H ",'auth_header_env':'SNAP-AUTH'")),
         "topics.orders.snapshot.auth_header_env: must be the NAME", NULL},
        {CFG("", SNAP(SNAP_H ",'auth_header_env':''")),
         "topics.orders.snapshot.auth_header_env: must not be empty", NULL},
        {CFG("", SNAP(SNAP_H ",'auth_header_env':true")),
         "topics.orders.snapshot.auth_header_env: must be a string", NULL},
        /* the secret itself never goes in the file */
        {CFG("", SNAP(SNAP_H ",'auth_header':'Bearer x'")),
         "topics.orders.snapshot.auth_header: not allowed: the config file "
         "must never hold the Authorization header value",
         "auth_header_env"},
        {CFG("", SNAP(SNAP_H ",'authorization':'Bearer x'")),
         "topics.orders.snapshot.authorization: not allowed",
         "auth_header_env"},
        {CFG("", SNAP(SNAP_H ",'Authorization':'Bearer x'")),
         "topics.orders.snapshot.Authorization: not allowed",
         "auth_header_env"},
        {CFG("", SNAP(SNAP_H ",'api_token':'x'")),
         "topics.orders.snapshot.api_token: not allowed", "auth_header_env"},
        {CFG("", SNAP(SNAP_H ",'client_secret':'x'")),
         "topics.orders.snapshot.client_secret: not allowed", NULL},
        /* even before the source is known, and with source kafka */
        {CFG("", SNAP("'auth_header':'x'")),
         "topics.orders.snapshot.auth_header: not allowed", NULL},
        {CFG("", SNAP(SNAP_K ",'auth_header':'x'")),
         "topics.orders.snapshot.auth_header: not allowed", NULL},
        /* numbers */
        {CFG("", SNAP(SNAP_K ",'timeout_ms':0")),
         "topics.orders.snapshot.timeout_ms: must be an integer from 1 to "
         "600000",
         NULL},
        {CFG("", SNAP(SNAP_K ",'timeout_ms':600001")),
         "topics.orders.snapshot.timeout_ms: must be an integer from 1 to "
         "600000",
         NULL},
        {CFG("", SNAP(SNAP_K ",'timeout_ms':2.5")),
         "topics.orders.snapshot.timeout_ms: must be an integer", NULL},
        {CFG("", SNAP(SNAP_K ",'timeout_ms':'5000'")),
         "topics.orders.snapshot.timeout_ms: must be an integer", NULL},
        {CFG("", SNAP(SNAP_K ",'max_in_flight':0")),
         "topics.orders.snapshot.max_in_flight: must be an integer from 1 to "
         "100000",
         NULL},
        {CFG("", SNAP(SNAP_K ",'max_in_flight':100001")),
         "topics.orders.snapshot.max_in_flight: must be an integer from 1 to "
         "100000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'max_attempts':0")),
         "topics.orders.snapshot.max_attempts: must be an integer from 1 to "
         "1000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'max_attempts':1001")),
         "topics.orders.snapshot.max_attempts: must be an integer from 1 to "
         "1000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'backoff_ms':0")),
         "topics.orders.snapshot.backoff_ms: must be an integer from 1 to "
         "3600000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'backoff_ms':3600001")),
         "topics.orders.snapshot.backoff_ms: must be an integer from 1 to "
         "3600000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'backoff_max_ms':0")),
         "topics.orders.snapshot.backoff_max_ms: must be an integer from 1 "
         "to 3600000",
         NULL},
        {CFG("", SNAP(SNAP_H ",'backoff_ms':1000,'backoff_max_ms':999")),
         "topics.orders.snapshot.backoff_max_ms: must be >= backoff_ms (1000)",
         NULL},
        /* against the default backoff_ms (500) */
        {CFG("", SNAP(SNAP_H ",'backoff_max_ms':499")),
         "topics.orders.snapshot.backoff_max_ms: must be >= backoff_ms (500)",
         NULL},
        {CFG("", SNAP(SNAP_H ",'emit_record':'yes'")),
         "topics.orders.snapshot.emit_record: must be true or false", NULL},
        {CFG("", SNAP(SNAP_H ",'emit_record':1")),
         "topics.orders.snapshot.emit_record: must be true or false", NULL},
        /* cross-field rules (semantics §3b, §4) */
        {CFG("", ",'ordering':{'mode':'latest_wins'}" SNAP(SNAP_K)),
         "topics.orders.snapshot: needs ordering.mode \"strict\"",
         "\"latest_wins\""},
        {CFG("", ",'envelope':{'version':null},'ordering':{'mode':'none'}" SNAP(
                         SNAP_H)),
         "topics.orders.snapshot: needs ordering.mode \"strict\"", "\"none\""},
        {CFG("", ",'envelope':{'version':null}" SNAP(SNAP_H)),
         "topics.orders.snapshot: needs envelope.version", NULL},
        {CFG("", ",'envelope':{'aggregate':null}" SNAP(SNAP_K)),
         "topics.orders.snapshot: needs envelope.aggregate", NULL},
        {CFG("", ",'envelope':{'format':'json','id':'/id'}" SNAP(SNAP_H)),
         "topics.orders.snapshot: needs envelope.version", NULL},
};

START_TEST(test_exactly_once_defaults) {
        char err[512];
        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(CFG(",'instance_id':'i-7','guarantee':"
                                     "'exactly_once'",
                                     ""),
                                 &conf, err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(conf->guarantee, SG_GUARANTEE_EXACTLY_ONCE);
        ck_assert_ptr_nonnull(conf->transactional_id);
        char want[256];
        snprintf(want, sizeof(want), "%s-i-7", conf->group_id);
        ck_assert_str_eq(conf->transactional_id, want);
        snprintf(want, sizeof(want), "%s-orders-changelog", conf->group_id);
        ck_assert_str_eq(conf->topics[0].changelog_topic, want);
        /* --instance-id: the transactional id follows it */
        ck_assert_int_eq(
                sg_config_set_instance_id(conf, "b-2", err, sizeof(err)),
                SG_OK);
        ck_assert_str_eq(conf->instance_id, "b-2");
        snprintf(want, sizeof(want), "%s-b-2", conf->group_id);
        ck_assert_str_eq(conf->transactional_id, want);
        ck_assert_int_eq(sg_config_set_instance_id(conf, "", err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_str_eq(err, "must be a non-empty string");
        ck_assert_str_eq(conf->instance_id, "b-2");
        sg_config_destroy(conf);
        ck_assert_int_eq(parse_q(CFG(",'guarantee':'at_least_once'",
                                     ",'changelog_topic':'my.changelog'"),
                                 &conf, err, sizeof(err)),
                         SG_OK);
        ck_assert_str_eq(conf->topics[0].changelog_topic, "my.changelog");
        ck_assert_ptr_null(conf->transactional_id); /* at_least_once */
        ck_assert_int_eq(sg_config_set_instance_id(conf, "c", err, sizeof(err)),
                         SG_OK);
        ck_assert_ptr_null(conf->transactional_id);
        sg_config_destroy(conf);
}
END_TEST

/* Semantics §4 "Which clock": under gap_policy hold the caps dead-letter
 * (park_overflow) unless said otherwise; other policies pause. */
START_TEST(test_hold_overflows_to_dlq) {
        char err[1024];
        sg_config_t *conf = NULL;
        ck_assert_msg(parse_q(CFG("", ",'ordering':{'gap_policy':'hold'}"),
                              &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        ck_assert_int_eq(conf->topics[0].on_park_overflow, SG_OVERFLOW_DLQ);
        sg_config_destroy(conf);
        conf = NULL;
        ck_assert_msg(parse_q(CFG("", ",'ordering':{'gap_policy':'skip'}"),
                              &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        ck_assert_int_eq(conf->topics[0].on_park_overflow, SG_OVERFLOW_PAUSE);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_invalid_config) {
        const bad_case_t *bc = &bad_cases[_i];
        char err[1024];
        sg_config_t *conf = (sg_config_t *)0x1; /* must be reset to NULL */
        sg_err_t e;

        memset(err, 'x', sizeof(err));
        e = parse_q(bc->json, &conf, err, sizeof(err));
        ck_assert_msg(e == SG_ERR_CONFIG, "case %d: got %d, errstr %.200s", _i,
                      e, e == SG_OK ? "" : err);
        ck_assert_ptr_null(conf);
        ck_assert_msg(memchr(err, '\0', sizeof(err)) != NULL,
                      "case %d: errstr not terminated", _i);
        ck_assert_msg(strstr(err, bc->expect) != NULL,
                      "case %d: errstr \"%s\" lacks \"%s\"", _i, err,
                      bc->expect);
        /* the key path comes first */
        ck_assert_msg(strncmp(err, bc->expect, strcspn(bc->expect, ":")) == 0,
                      "case %d: errstr \"%s\" does not start with the key path",
                      _i, err);
        if (bc->expect2)
                ck_assert_msg(strstr(err, bc->expect2) != NULL,
                              "case %d: errstr \"%s\" lacks \"%s\"", _i, err,
                              bc->expect2);
}
END_TEST

START_TEST(test_topic_name_length) {
        char name[251], text[1024], err[1024];
        sg_config_t *conf = NULL;

        /* 249 characters: the longest valid Kafka topic name */
        memset(name, 'a', 249);
        name[249] = '\0';
        snprintf(text, sizeof(text),
                 "{'data_dir':'/d'," KAFKA_OK ",'topics':{'in':{"
                 "'output_topic':'%s','dlq_topic':'d'}}}",
                 name);
        ck_assert_msg(parse_q(text, &conf, err, sizeof(err)) == SG_OK, "%s",
                      err);
        ck_assert_uint_eq(strlen(conf->topics[0].output_topic), 249);
        sg_config_destroy(conf);

        memset(name, 'a', 250);
        name[250] = '\0';
        snprintf(text, sizeof(text),
                 "{'data_dir':'/d'," KAFKA_OK ",'topics':{'in':{"
                 "'output_topic':'%s','dlq_topic':'d'}}}",
                 name);
        ck_assert_int_eq(parse_q(text, &conf, err, sizeof(err)), SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(strstr(err, "topics.in.output_topic: "));
}
END_TEST

START_TEST(test_small_errstr_buffers) {
        char err[8];
        sg_config_t *conf = NULL;

        memset(err, 'x', sizeof(err));
        ck_assert_int_eq(parse_q(CFG(",'foo':1", ""), &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_str_eq(err, "foo: un");
        ck_assert_int_eq(parse_q(CFG(",'foo':1", ""), &conf, NULL, 0),
                         SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_int_eq(sg_config_parse(NULL, &conf, err, sizeof(err)),
                         SG_ERR_INVALID);
}
END_TEST

/* Every error of a file is reported in one run (--check-config), one line
 * each, in document order; the first line is the error a one-error file
 * would report; nothing else is said twice. */
static size_t count_lines(const char *s) {
        size_t n = *s ? 1 : 0;
        for (; *s; s++)
                n += *s == '\n' && s[1];
        return n;
}

START_TEST(test_every_error_reported) {
        char err[4096];
        sg_config_t *conf = (sg_config_t *)0x1;
        static const char *const want[] = {
                "foo: unknown key; allowed: $schema",
                "bar: unknown key; allowed: $schema",
                "kafka_producer.linger.ms: rejected by librdkafka",
                "stats_interval_ms: must be an integer >= 0",
                "topics.a.dlq_topic: required key is missing",
                "topics.a.ordering.gap_policy: \"wait\" is not allowed; "
                "allowed: dlq, skip, hold",
                "topics.a.ordering.max_parked_total: must be an integer >= 1",
                "topics.b.envelope.id: \"nope\" is not a field source",
                "topics.b.state_machine.initial: \"X\" is not a declared "
                "state",
                "topics.b.state_machine.transitions[0].to: \"Y\" is not a "
                "declared state",
                "topics.b.snapshot.timeout_ms: must be an integer from 1 to "
                "600000",
        };
        sg_err_t e = parse_q(
                "{'data_dir':'/d','foo':1," KAFKA_OK ","
                "'kafka_producer':{'linger.ms':'soon'},"
                "'stats_interval_ms':'often','bar':2,'topics':{"
                "'a':{'output_topic':'a.out','ordering':{'gap_policy':'wait',"
                "'max_parked_total':0}},"
                "'b':{'output_topic':'b.out','dlq_topic':'b.dlq',"
                "'envelope':{'id':'nope'},"
                "'state_machine':{'initial':'X','states':['A'],"
                "'transitions':[{'type':'t','from':['A'],'to':'Y'}]},"
                "'snapshot':{'source':'http','timeout_ms':0,"
                "'url':'http://h/{aggregate}'}}}}",
                &conf, err, sizeof(err));
        ck_assert_int_eq(e, SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                ck_assert_msg(strstr(err, want[i]) != NULL,
                              "errstr lacks \"%s\":\n%s", want[i], err);
        /* one line per error, the first one first */
        ck_assert_msg(count_lines(err) == sizeof(want) / sizeof(want[0]),
                      "%zu lines:\n%s", count_lines(err), err);
        ck_assert_msg(strncmp(err, want[0], strlen(want[0])) == 0, "%s", err);
        for (const char *l = err; l; l = strchr(l, '\n'))
                ck_assert_msg(*(l += *l == '\n') != '\n', "empty line: %s",
                              err);
}
END_TEST

/* One mistake, one error line, and the line says how to mend it: the
 * input topic as output_topic or dlq_topic (was reported twice, by the
 * key's check and by the cross-topic check), a duration with a unit
 * where milliseconds are wanted, a misspelt key (the closest allowed key
 * is named first; its "required" line is a second, true error). */
static const struct one_mistake {
        const char *json, *line, *hint;
        size_t lines;
} one_mistakes[] = {
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'orders','dlq_topic':'d'}}}",
         "topics.orders.output_topic: must differ from the input topic",
         "\"orders\"", 1},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'output_topic':"
         "'o','dlq_topic':'orders'}}}",
         "topics.orders.dlq_topic: must differ from the input topic",
         "\"orders\"", 1},
        {CFG("", ",'ordering':{'gap_timeout_ms':'5s'}"),
         "topics.orders.ordering.gap_timeout_ms: must be an integer",
         "milliseconds", 1},
        {CFG(",'stats_interval_ms':'10s'", ""),
         "stats_interval_ms: must be an integer", "milliseconds", 1},
        {"{'data_dir':'/d'," KAFKA_OK ",'topics':{'orders':{'ouput_topic':"
         "'o','dlq_topic':'d'}}}",
         "topics.orders.ouput_topic: unknown key; did you mean "
         "\"output_topic\"?",
         "allowed: output_topic", 2},
        {CFG("", ",'envelope':{'format':'json','id':'event_id',"
                 "'version':'/seq'}"),
         "topics.orders.envelope.id: \"event_id\" is not a field source", NULL,
         1},
        {CFG("", ",'ordering':{'gap_timout_ms':5}"),
         "topics.orders.ordering.gap_timout_ms: unknown key; did you mean "
         "\"gap_timeout_ms\"?",
         NULL, 1},
        /* a key meant inside a block: beside it, flattened (as seqgatectl
         * once printed it) or dotted as one key */
        {CFG("", ",'dedup_ttl_ms':5"),
         "topics.orders.dedup_ttl_ms: unknown key; did you mean \"ttl_ms\" "
         "inside \"dedup\" (dedup.ttl_ms)?",
         "allowed: output_topic", 1},
        {CFG("", ",'gap_timeout_ms':5"),
         "topics.orders.gap_timeout_ms: unknown key; did you mean "
         "\"gap_timeout_ms\" inside \"ordering\" (ordering.gap_timeout_ms)?",
         NULL, 1},
        {CFG("", ",'ordering.gap_timout_ms':5"),
         "topics.orders.ordering.gap_timout_ms: unknown key; did you mean "
         "\"gap_timeout_ms\" inside \"ordering\" (ordering.gap_timeout_ms)?",
         NULL, 1},
        {CFG(",'map_size_bytes':1048576", ""),
         "map_size_bytes: unknown key; did you mean \"map_size_bytes\" inside "
         "\"store\" (store.map_size_bytes)?",
         "allowed: $schema", 1},
        /* a key of another block, written where it does not belong: the
         * hint names the block it belongs in, wherever that is */
        {CFG(",'gap_timeout_ms':5", ""),
         "gap_timeout_ms: unknown key; did you mean "
         "topics.<topic>.ordering.gap_timeout_ms?",
         "allowed: $schema", 1},
        {CFG(",'output_topic':'o'", ""),
         "output_topic: unknown key; did you mean "
         "topics.<topic>.output_topic?",
         NULL, 1},
        {CFG("", ",'guarantee':'at_least_once'"),
         "topics.orders.guarantee: unknown key; did you mean the root key "
         "\"guarantee\" (the top level of the file)?",
         NULL, 1},
        {CFG("", ",'data_dir':'/x'"),
         "topics.orders.data_dir: unknown key; did you mean the root key "
         "\"data_dir\" (the top level of the file)?",
         NULL, 1},
        {CFG("", ",'dedup':{'gap_timeout_ms':5}"),
         "topics.orders.dedup.gap_timeout_ms: unknown key; did you mean "
         "topics.orders.ordering.gap_timeout_ms?",
         NULL, 1},
        /* a unit suffix left out, here or in another block */
        {CFG("", ",'dedup':{'ttl':5000}"),
         "topics.orders.dedup.ttl: unknown key; did you mean \"ttl_ms\"?", NULL,
         1},
        {CFG(",'gap_timeout':5", ""),
         "gap_timeout: unknown key; did you mean "
         "topics.<topic>.ordering.gap_timeout_ms?",
         NULL, 1},
        /* a librdkafka property outside the librdkafka blocks */
        {CFG(",'bootstrap.servers':'b:9092'", ""),
         "bootstrap.servers: unknown key; did you mean "
         "kafka.bootstrap.servers (a librdkafka property)?",
         NULL, 1},
        {CFG("", ",'linger.ms':5"),
         "topics.orders.linger.ms: unknown key; did you mean "
         "kafka.linger.ms (a librdkafka property)?",
         NULL, 1},
        /* a seqgate key among the librdkafka properties */
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b:9092',"
         "'group.id':'g','data_dir':'/d'},'topics':{'orders':{"
         "'output_topic':'o','dlq_topic':'d'}}}",
         "kafka.data_dir: \"data_dir\" is a root key (the top level of the "
         "file), not a librdkafka property",
         NULL, 1},
        /* a librdkafka duration with a unit: librdkafka reads the leading
         * digits ("6s" as 6 ms), the broker then refuses the session */
        {"{'data_dir':'/d','kafka':{'bootstrap.servers':'b:9092',"
         "'group.id':'g','session.timeout.ms':'6s'},'topics':{'orders':{"
         "'output_topic':'o','dlq_topic':'d'}}}",
         "kafka.session.timeout.ms: librdkafka reads \"6s\" as 6: write the "
         "number alone, in milliseconds",
         NULL, 1},
        {"{'data_dir':'/d'," KAFKA_OK ",'kafka_producer':{"
         "'batch.size':'1MB'},'topics':{'orders':{"
         "'output_topic':'o','dlq_topic':'d'}}}",
         "kafka_producer.batch.size: librdkafka reads \"1MB\" as 1: write "
         "the number alone",
         NULL, 1},
};

START_TEST(test_one_mistake_one_error) {
        const struct one_mistake *m = &one_mistakes[_i];
        char err[4096];
        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(m->json, &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_msg(strncmp(err, m->line, strlen(m->line)) == 0,
                      "case %d: first line is not \"%s\":\n%s", _i, m->line,
                      err);
        ck_assert_msg(!m->hint || strstr(err, m->hint),
                      "case %d: no \"%s\":\n%s", _i, m->hint, err);
        ck_assert_msg(count_lines(err) == m->lines,
                      "case %d: %zu lines, want %zu:\n%s", _i, count_lines(err),
                      m->lines, err);
}
END_TEST

/* A buffer too small for every line keeps the first ones, cut at its end,
 * always terminated. */
START_TEST(test_every_error_small_buffer) {
        char err[40];
        sg_config_t *conf = NULL;
        memset(err, 'x', sizeof(err));
        ck_assert_int_eq(parse_q(CFG(",'foo':1,'bar':2,'baz':3", ""), &conf,
                                 err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(memchr(err, '\0', sizeof(err)));
        ck_assert_int_eq(strlen(err), sizeof(err) - 1);
        ck_assert_int_eq(strncmp(err, "foo: unknown key", 16), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Secrets                                                                  */
/* ------------------------------------------------------------------------ */

#define SECRET "Tr0ub4dor-XYZZY-hunter2"

/*
 * An error text is one line of printable, valid UTF-8, whatever the file
 * holds: cJSON takes raw control characters and any bytes inside strings,
 * and keys and values are quoted in errors (fuzz_config found a key with a
 * newline printed as is). Such bytes appear as \xNN.
 */
START_TEST(test_error_text_escaped) {
        static const struct {
                const char *json, *want;
        } cases[] = {
                /* raw newline inside a key (cJSON accepts it) */
                {CFG("", ",'out\nput':1"),
                 "topics.orders.out\\x0aput: unknown key"},
                /* an escaped one, decoded by cJSON */
                {CFG("", ",'out\\u0009put':1"),
                 "topics.orders.out\\x09put: unknown key"},
                /* a value */
                {CFG("", ",'ordering':{'gap_policy':'wa\\u001bit'}"),
                 "\"wa\\x1bit\" is not allowed"},
                /* bytes that are not UTF-8, and DEL */
                {CFG("", ",'ordering':{'gap_policy':'w\xff\x7f'}"),
                 "\"w\\xff\\x7f\" is not allowed"},
                /* valid UTF-8 is kept */
                {CFG("", ",'ordering':{'gap_policy':'w\xc3\xa4it'}"),
                 "\"w\xc3\xa4it\" is not allowed"},
                /* field sources go through sg_field_src_parse's own errors */
                {CFG("", ",'envelope':{'id':'ce:\\u000a'}"), "\"ce:\\x0a\""},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char err[1024];
                sg_config_t *conf = NULL;

                ck_assert_int_eq(
                        parse_q(cases[i].json, &conf, err, sizeof(err)),
                        SG_ERR_CONFIG);
                for (const char *p = err; *p; p++)
                        ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f,
                                      "case %zu: byte 0x%02x in \"%s\"", i,
                                      (unsigned char)*p, err);
                ck_assert_msg(strstr(err, cases[i].want),
                              "case %zu: \"%s\" lacks \"%s\"", i, err,
                              cases[i].want);
        }
}
END_TEST

START_TEST(test_secret_not_in_errors) {
        static const char *const texts[] = {
                /* a number in a secret property */
                "{'data_dir':'/d','kafka':{'bootstrap.servers':'b',"
                "'group.id':'g','sasl.password':98765432123}}",
                /* a boolean in a secret property */
                "{'data_dir':'/d','kafka':{'bootstrap.servers':'b',"
                "'group.id':'g'},'kafka_producer':{'ssl.key.password':true}}",
                /* a syntax error right after the secret */
                "{'data_dir':'/d','kafka':{'sasl.password':'" SECRET "' 'x'}}",
                "{'data_dir':'/d','kafka':{'sasl.password':'" SECRET "",
                /* librdkafka rejects a secret-looking unknown property */
                CFG(",'kafka_consumer':{'my.client.secret':'" SECRET "'}", ""),
                CFG(",'kafka_producer':{'ssl.key.pem':'" SECRET "',"
                    "'sasl.oauthbearer.config':'" SECRET
                    "','bogus.pem.x':'" SECRET "'}",
                    ""),
                /* a valid secret, then another error */
                "{'data_dir':'/d','kafka':{'bootstrap.servers':'b',"
                "'group.id':'g','sasl.password':'" SECRET "'},'topics':{}}",
        };
        static const char *const keys[] = {
                "kafka.sasl.password: must be a string",
                "kafka_producer.ssl.key.password: must be a string",
                "(root): not valid JSON",
                "(root): not valid JSON",
                "kafka_consumer.my.client.secret: rejected by librdkafka",
                "kafka_producer.bogus.pem.x: rejected by librdkafka",
                "topics: must name",
        };
        char err[1024];
        sg_config_t *conf = NULL;

        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                ck_assert_int_eq(parse_q(texts[i], &conf, err, sizeof(err)),
                                 SG_ERR_CONFIG);
                ck_assert_msg(strstr(err, keys[i]) != NULL,
                              "text %zu: \"%s\" lacks \"%s\"", i, err, keys[i]);
                ck_assert_msg(strstr(err, SECRET) == NULL,
                              "text %zu leaks the secret: %s", i, err);
                ck_assert_msg(strstr(err, "98765432123") == NULL,
                              "text %zu leaks the secret: %s", i, err);
                ck_assert_msg(strstr(err, "Tr0ub4dor") == NULL,
                              "text %zu leaks part of the secret: %s", i, err);
                ck_assert_msg(strstr(err, "true") == NULL,
                              "text %zu leaks the value: %s", i, err);
        }
}
END_TEST

START_TEST(test_is_secret) {
        static const struct {
                const char *name;
                bool secret;
        } t[] = {
                {"sasl.password", true},
                {"ssl.key.password", true},
                {"ssl.keystore.password", true},
                {"ssl.truststore.password", true},
                {"sasl.oauthbearer.client.secret", true},
                {"ssl.key.pem", true},
                {"ssl.certificate.pem", true},
                {"sasl.oauthbearer.config", true},
                {"SASL.PASSWORD", true},
                {"bootstrap.servers", false},
                {"sasl.username", false},
                {"sasl.mechanisms", false},
                {"ssl.key.location", false},
                {"group.id", false},
                {"", false},
        };

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                ck_assert_msg(sg_config_is_secret(t[i].name) == t[i].secret,
                              "%s: expected %d", t[i].name, t[i].secret);
        ck_assert(!sg_config_is_secret(NULL));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* sg_field_src_parse                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_field_src_parse) {
        static const struct {
                const char *text;
                sg_err_t err;
                sg_src_kind_t kind;
                const char *name; /* expected name, or an errstr fragment */
        } t[] = {
                {"key", SG_OK, SG_SRC_KEY, NULL},
                {"header:x", SG_OK, SG_SRC_HEADER, "x"},
                {"header:ce_id", SG_OK, SG_SRC_HEADER, "ce_id"},
                {"header:a:b c", SG_OK, SG_SRC_HEADER, "a:b c"},
                {"/", SG_OK, SG_SRC_POINTER, "/"},
                {"/a/b", SG_OK, SG_SRC_POINTER, "/a/b"},
                {"/a~0b~1c/0", SG_OK, SG_SRC_POINTER, "/a~0b~1c/0"},
                {"ce:id", SG_OK, SG_SRC_CE, "id"},
                {"ce:partitionkey", SG_OK, SG_SRC_CE, "partitionkey"},
                {"ce:x1", SG_OK, SG_SRC_CE, "x1"},
                {"", SG_ERR_INVALID, SG_SRC_NONE, "allowed: \"key\""},
                {"KEY", SG_ERR_INVALID, SG_SRC_NONE, "\"KEY\" is not a field"},
                {"keys", SG_ERR_INVALID, SG_SRC_NONE, "is not a field source"},
                {"subject", SG_ERR_INVALID, SG_SRC_NONE, "\"ce:ATTR\""},
                {"a/b", SG_ERR_INVALID, SG_SRC_NONE, "\"/json/pointer\""},
                {"header:", SG_ERR_INVALID, SG_SRC_NONE, "header name"},
                {"Header:x", SG_ERR_INVALID, SG_SRC_NONE, "is not a field"},
                {"ce:", SG_ERR_INVALID, SG_SRC_NONE, "§3.1.1"},
                {"ce:Id", SG_ERR_INVALID, SG_SRC_NONE, "§3.1.1"},
                {"ce:a-b", SG_ERR_INVALID, SG_SRC_NONE, "§3.1.1"},
                {"ce:a_b", SG_ERR_INVALID, SG_SRC_NONE, "§3.1.1"},
                {"/a~", SG_ERR_INVALID, SG_SRC_NONE, "RFC 6901"},
                {"/a~2", SG_ERR_INVALID, SG_SRC_NONE, "RFC 6901"},
                {"/~~0", SG_ERR_INVALID, SG_SRC_NONE, "RFC 6901"},
        };
        char err[512];

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                sg_field_src_t src = {SG_SRC_KEY, (char *)"junk"};
                sg_err_t e;

                err[0] = '\0';
                e = sg_field_src_parse(t[i].text, &src, err, sizeof(err));
                ck_assert_msg(e == t[i].err, "\"%s\": got %d (%s)", t[i].text,
                              e, err);
                ck_assert_msg(src.kind == t[i].kind, "\"%s\": kind %d",
                              t[i].text, src.kind);
                if (e == SG_OK) {
                        if (t[i].name)
                                ck_assert_str_eq(src.name, t[i].name);
                        else
                                ck_assert_ptr_null(src.name);
                        free(src.name);
                } else {
                        ck_assert_ptr_null(src.name);
                        ck_assert_msg(strstr(err, t[i].name) != NULL,
                                      "\"%s\": errstr \"%s\" lacks \"%s\"",
                                      t[i].text, err, t[i].name);
                }
        }
        {
                sg_field_src_t src;
                ck_assert_int_eq(
                        sg_field_src_parse(NULL, &src, err, sizeof(err)),
                        SG_ERR_INVALID);
                ck_assert_int_eq(src.kind, SG_SRC_NONE);
        }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Lookup, destroy, files                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_config_topic_lookup) {
        char err[512];
        sg_config_t *conf = NULL;
        const sg_topic_config_t *a, *b;

        ck_assert_msg(parse_q("{'data_dir':'/d'," KAFKA_OK ",'topics':{"
                              "'a':{'output_topic':'a.out','dlq_topic':'dlq'},"
                              "'b':{'output_topic':'b.out','dlq_topic':'dlq',"
                              "'ordering':{'mode':'latest_wins'}}}}",
                              &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        a = sg_config_topic(conf, "a");
        b = sg_config_topic(conf, "b");
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_str_eq(a->output_topic, "a.out");
        ck_assert_str_eq(b->output_topic, "b.out");
        ck_assert_int_eq(a->order_mode, SG_ORDER_STRICT);
        ck_assert_int_eq(b->order_mode, SG_ORDER_LATEST_WINS);
        ck_assert_ptr_null(sg_config_topic(conf, "c"));
        ck_assert_ptr_null(sg_config_topic(conf, "a.out"));
        ck_assert_ptr_null(sg_config_topic(conf, ""));
        ck_assert_ptr_null(sg_config_topic(conf, NULL));
        ck_assert_ptr_null(sg_config_topic(NULL, "a"));
        sg_config_destroy(conf);
        sg_config_destroy(NULL);
}
END_TEST

/* Errors late in the file, after many allocations, must free everything
 * (ASan's leak check fails the run otherwise). */
START_TEST(test_partial_config_freed) {
        char err[512];
        sg_config_t *conf = NULL;

        /* second topic fails after the first was fully built, inside a
         * state machine whose transitions are half built */
        ck_assert_int_eq(parse_q("{'data_dir':'/d','instance_id':'i'," KAFKA_OK
                                 ",'kafka_consumer':{'a.b':'1'},'topics':{"
                                 "'a':{'output_topic':'a.out','dlq_topic':'dlq'"
                                 ","
                                 "'envelope':{'scope':['ce:source','header:t']"
                                 "}" SM_OK
                                 "},'b':{'output_topic':'b.out','dlq_topic':'"
                                 "dlq'" SM("'initial':'A','states':['A','B'],'"
                                           "transitions':["
                                           "{'type':'t','from':['A'],'to':'B'},"
                                           "{'type':'u','from':['A','B','Q'],'"
                                           "to':'B'}]") "}}}",
                                 &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        /* the first error wins: kafka_consumer's a.b is unknown */
        ck_assert_ptr_nonnull(strstr(err, "kafka_consumer.a.b: "));

        ck_assert_int_eq(parse_q("{'data_dir':'/d','instance_id':'i'," KAFKA_OK
                                 ",'topics':{"
                                 "'a':{'output_topic':'a.out','dlq_topic':'dlq'"
                                 ","
                                 "'envelope':{'scope':['ce:source','header:t'],"
                                 "'digest':'/data'}" SM_OK
                                 "},'b':{'output_topic':'b.out','dlq_topic':'"
                                 "dlq'" SM("'initial':'A','states':['A','B'],'"
                                           "transitions':["
                                           "{'type':'t','from':['A'],'to':'B'},"
                                           "{'type':'u','from':['A','B','Q'],'"
                                           "to':'B'}]") "}}}",
                                 &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(strstr(
                err, "topics.b.state_machine.transitions[1].from[2]: \"Q\""));
}
END_TEST

/* Every value of every example config replaced by each JSON type in turn:
 * the parser reports what it can and goes on past each error, so this walks
 * every error path with the rest of the config still to read. It must never
 * crash or leak (ASan), and a refused config always says why. */
static int g_mistyped_runs;

static void try_mistyped(cJSON *root) {
        char *txt = cJSON_PrintUnformatted(root);
        char err[2048];
        sg_config_t *conf = NULL;
        ck_assert_ptr_nonnull(txt);
        err[0] = 'x';
        sg_err_t e = sg_config_parse(txt, &conf, err, sizeof(err));
        ck_assert_msg(e == SG_OK || e == SG_ERR_CONFIG, "%d for %s", e, txt);
        if (e == SG_OK)
                sg_config_destroy(conf);
        else
                ck_assert_msg(err[0] && err[0] != 'x', "no error text: %s",
                              txt);
        g_mistyped_runs++;
        cJSON_free(txt);
}

/** The node at @p path (child indexes from @p root, @p depth of them). */
static cJSON *node_at(cJSON *root, const int *path, int depth) {
        cJSON *n = root;
        for (int d = 0; d < depth; d++)
                n = cJSON_GetArrayItem(n, path[d]);
        return n;
}

static void mistype_all(cJSON *root, int *path, int depth) {
        static const char *const repl[] = {"7",    "-1", "\"x\"", "\"\"",
                                           "null", "[]", "{}",    "true"};
        cJSON *node = node_at(root, path, depth);
        int n = cJSON_GetArraySize(node);
        ck_assert_int_lt(depth, 31);
        for (int i = 0; i < n; i++) {
                path[depth] = i;
                for (size_t k = 0; k < sizeof(repl) / sizeof(repl[0]); k++) {
                        cJSON *copy = cJSON_Duplicate(root, 1);
                        cJSON *r = cJSON_Parse(repl[k]);
                        ck_assert_ptr_nonnull(copy);
                        ck_assert_ptr_nonnull(r);
                        cJSON *parent = node_at(copy, path, depth);
                        ck_assert(cJSON_ReplaceItemViaPointer(
                                parent, cJSON_GetArrayItem(parent, i), r));
                        try_mistyped(copy);
                        cJSON_Delete(copy);
                }
                if (cJSON_GetArrayItem(node, i)->child)
                        mistype_all(root, path, depth + 1);
        }
}

START_TEST(test_every_value_mistyped) {
        static const char *const files[] = {
                "examples/orders.json", "examples/plain-json.json",
                "examples/orders-snapshot-kafka.json",
                "examples/orders-snapshot-http.json"};
        for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
                char *path = source_path(files[f]);
                FILE *fp = fopen(path, "rb");
                ck_assert_ptr_nonnull(fp);
                static char buf[1 << 16];
                size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
                fclose(fp);
                buf[n] = '\0';
                cJSON *root = cJSON_Parse(buf);
                int at[32];
                ck_assert_ptr_nonnull(root);
                mistype_all(root, at, 0);
                cJSON_Delete(root);
                free(path);
        }
        /* two input topics, whose cross-topic rules see each other */
        char *two = json("{'data_dir':'/d','guarantee':'exactly_once'," KAFKA_OK
                         ",'topics':{"
                         "'a':{'output_topic':'a.out','dlq_topic':'a.dlq',"
                         "'changelog_topic':'a.cl','snapshot':{"
                         "'source':'kafka','request_topic':'a.req',"
                         "'reply_topic':'a.rep'}},"
                         "'b':{'output_topic':'b.out','dlq_topic':'b.dlq',"
                         "'snapshot':{'source':'kafka','request_topic':'a.req',"
                         "'reply_topic':'b.rep'}" SM_OK "}}}");
        cJSON *root = cJSON_Parse(two);
        int at[32];
        ck_assert_ptr_nonnull(root);
        mistype_all(root, at, 0);
        cJSON_Delete(root);
        free(two);
        ck_assert_int_gt(g_mistyped_runs, 500);
}
END_TEST

static char *write_temp(const void *data, size_t len) {
        char *path = strdup("/tmp/sg_test_config_XXXXXX");
        int fd;

        ck_assert_ptr_nonnull(path);
        fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
        close(fd);
        return path;
}

START_TEST(test_load_errors) {
        char err[1024];
        sg_config_t *conf = NULL;
        char *path, *text;

        ck_assert_int_eq(sg_config_load("/nonexistent/seqgate.json", &conf, err,
                                        sizeof(err)),
                         SG_ERR_IO);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(strstr(err, "/nonexistent/seqgate.json"));

        ck_assert_int_eq(sg_config_load("/tmp", &conf, err, sizeof(err)),
                         SG_ERR_IO);
        ck_assert_ptr_null(conf);

        path = write_temp("{\"data_dir\":\"/d\"\0}", 18);
        ck_assert_int_eq(sg_config_load(path, &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(strstr(err, "NUL"));
        unlink(path);
        free(path);

        text = json(CFG("", ",'dedup':{'ttl_ms':5}"));
        path = write_temp(text, strlen(text));
        ck_assert_int_eq(sg_config_load(path, &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(strstr(err, "topics.orders.dedup.ttl_ms: "));
        unlink(path);
        free(path);
        free(text);

        text = json(CFG("", ""));
        path = write_temp(text, strlen(text));
        ck_assert_int_eq(sg_config_load(path, &conf, err, sizeof(err)), SG_OK);
        ck_assert_str_eq(conf->topics[0].name, "orders");
        sg_config_destroy(conf);
        unlink(path);
        free(path);
        free(text);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Snapshot source (refetch)                                                */
/* ------------------------------------------------------------------------ */

static void assert_snapshot_defaults(const sg_snapshot_config_t *sn) {
        ck_assert_int_eq(sn->timeout_ms, 5000);
        ck_assert_int_eq(sn->max_in_flight, 64);
        ck_assert_int_eq(sn->max_attempts, 4);
        ck_assert_int_eq(sn->backoff_ms, 500);
        ck_assert_int_eq(sn->backoff_max_ms, 30000);
        ck_assert(sn->emit_record);
}

START_TEST(test_snapshot_absent) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_snapshot_config_t *sn;

        ck_assert_msg(parse_q(CFG("", ""), &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        sn = &conf->topics[0].snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_NONE);
        ck_assert_ptr_null(sn->request_topic);
        ck_assert_ptr_null(sn->reply_topic);
        ck_assert_ptr_null(sn->url);
        ck_assert_ptr_null(sn->auth_header_env);
        assert_snapshot_defaults(sn);
        sg_config_destroy(conf);

        /* a dedup-only topic has no snapshot and needs none */
        ck_assert_msg(parse_q(CFG("", ",'envelope':{'version':null},"
                                      "'ordering':{'mode':'none'}"),
                              &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        ck_assert_int_eq(conf->topics[0].snapshot.source, SG_SNAP_NONE);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_snapshot_kafka_defaults) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_snapshot_config_t *sn;

        ck_assert_msg(parse_q(CFG("", SNAP(SNAP_K)), &conf, err, sizeof(err)) ==
                              SG_OK,
                      "%s", err);
        sn = &conf->topics[0].snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_KAFKA);
        ck_assert_str_eq(sn->request_topic, "orders.snap.req");
        ck_assert_str_eq(sn->reply_topic, "orders.snap.rep");
        ck_assert_ptr_null(sn->url);
        ck_assert_ptr_null(sn->auth_header_env);
        assert_snapshot_defaults(sn);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_snapshot_http_defaults) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_snapshot_config_t *sn;

        ck_assert_msg(parse_q(CFG("", SNAP(SNAP_H)), &conf, err, sizeof(err)) ==
                              SG_OK,
                      "%s", err);
        sn = &conf->topics[0].snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_HTTP);
        ck_assert_str_eq(sn->url, "http://authority:8080/orders/{aggregate}");
        ck_assert_ptr_null(sn->auth_header_env);
        ck_assert_ptr_null(sn->request_topic);
        ck_assert_ptr_null(sn->reply_topic);
        assert_snapshot_defaults(sn);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_snapshot_kafka_example) {
        sg_config_t *conf = load_example("examples/orders-snapshot-kafka.json");
        const sg_topic_config_t *tc = sg_config_topic(conf, "orders");
        const sg_snapshot_config_t *sn;

        ck_assert_ptr_nonnull(tc);
        ck_assert_int_eq(tc->order_mode, SG_ORDER_STRICT);
        ck_assert_int_eq(tc->new_aggregate, SG_NEWAGG_STRICT);
        ck_assert(tc->sm.enabled);
        sn = &tc->snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_KAFKA);
        ck_assert_str_eq(sn->request_topic, "orders.snapshot.requests");
        ck_assert_str_eq(sn->reply_topic, "orders.snapshot.replies");
        ck_assert_ptr_null(sn->url);
        ck_assert_ptr_null(sn->auth_header_env);
        assert_snapshot_defaults(sn); /* the example spells out the defaults */
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_snapshot_http_example) {
        sg_config_t *conf = load_example("examples/orders-snapshot-http.json");
        const sg_topic_config_t *tc = sg_config_topic(conf, "orders");
        const sg_snapshot_config_t *sn;

        ck_assert_ptr_nonnull(tc);
        ck_assert_int_eq(tc->order_mode, SG_ORDER_STRICT);
        sn = &tc->snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_HTTP);
        ck_assert_str_eq(sn->url, "http://127.0.0.1:8080/orders/{aggregate}");
        ck_assert_str_eq(sn->auth_header_env, "SEQGATE_SNAPSHOT_AUTH");
        ck_assert_ptr_null(sn->request_topic);
        ck_assert_ptr_null(sn->reply_topic);
        assert_snapshot_defaults(sn);
        sg_config_destroy(conf);
}
END_TEST

START_TEST(test_snapshot_explicit_values) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_snapshot_config_t *sn;

        /* upper bounds, an upper-case scheme (RFC 3986 §3.1), '@' after the
         * host, two placeholders, backoff_max_ms == backoff_ms */
        ck_assert_msg(
                parse_q(CFG("", ",'ordering':{'mode':'strict'}" SNAP(
                                        "'source':'http','url':'HTTPS://a.b:"
                                        "8443/v1/{aggregate}?x=@&y={aggregate}"
                                        "#f','auth_header_env':'_a1',"
                                        "'timeout_ms':600000,"
                                        "'max_in_flight':100000,"
                                        "'max_attempts':1000,"
                                        "'backoff_ms':3600000,"
                                        "'backoff_max_ms':3600000,"
                                        "'emit_record':false")),
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        sn = &conf->topics[0].snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_HTTP);
        ck_assert_str_eq(sn->url, "HTTPS://a.b:8443/v1/{aggregate}?x=@&y="
                                  "{aggregate}#f");
        ck_assert_str_eq(sn->auth_header_env, "_a1");
        ck_assert_int_eq(sn->timeout_ms, 600000);
        ck_assert_int_eq(sn->max_in_flight, 100000);
        ck_assert_int_eq(sn->max_attempts, 1000);
        ck_assert_int_eq(sn->backoff_ms, 3600000);
        ck_assert_int_eq(sn->backoff_max_ms, 3600000);
        ck_assert(!sn->emit_record);
        sg_config_destroy(conf);

        /* lower bounds, format json with an explicit version */
        ck_assert_msg(
                parse_q(CFG("",
                            ",'envelope':{'format':'json','id':'/id',"
                            "'version':'/v'}" SNAP(
                                    SNAP_K ",'timeout_ms':1,"
                                           "'max_in_flight':1,'max_attempts':1,"
                                           "'backoff_ms':1,'backoff_max_ms':1,"
                                           "'emit_record':true")),
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        sn = &conf->topics[0].snapshot;
        ck_assert_int_eq(sn->source, SG_SNAP_KAFKA);
        ck_assert_int_eq(sn->timeout_ms, 1);
        ck_assert_int_eq(sn->max_in_flight, 1);
        ck_assert_int_eq(sn->max_attempts, 1);
        ck_assert_int_eq(sn->backoff_ms, 1);
        ck_assert_int_eq(sn->backoff_max_ms, 1);
        ck_assert(sn->emit_record);
        sg_config_destroy(conf);
}
END_TEST

/* Two input topics may share a request topic (seqgate only produces to it;
 * the request carries the input topic); each has its own reply topic. A
 * topic without a snapshot block sits beside them. */
START_TEST(test_snapshot_two_topics) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        const sg_topic_config_t *a, *b;

        ck_assert_msg(parse_q(TWO("'request_topic':'s.req','reply_topic':"
                                  "'s.rep.a','max_attempts':2",
                                  "'request_topic':'s.req','reply_topic':"
                                  "'s.rep.b'"),
                              &conf, err, sizeof(err)) == SG_OK,
                      "%s", err);
        a = sg_config_topic(conf, "a");
        b = sg_config_topic(conf, "b");
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_str_eq(a->snapshot.request_topic, "s.req");
        ck_assert_str_eq(b->snapshot.request_topic, "s.req");
        ck_assert_str_eq(a->snapshot.reply_topic, "s.rep.a");
        ck_assert_str_eq(b->snapshot.reply_topic, "s.rep.b");
        ck_assert_int_eq(a->snapshot.max_attempts, 2);
        ck_assert_int_eq(b->snapshot.max_attempts, 4);
        sg_config_destroy(conf);

        ck_assert_msg(
                parse_q("{'data_dir':'/d'," KAFKA_OK ",'topics':{"
                        "'a':{'output_topic':'a.out','dlq_topic':'a.dlq'" SNAP(
                                SNAP_H) "},"
                                        "'b':{'output_topic':'b.out','dlq_"
                                        "topic':'b.dlq'}}}",
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        ck_assert_int_eq(sg_config_topic(conf, "a")->snapshot.source,
                         SG_SNAP_HTTP);
        ck_assert_int_eq(sg_config_topic(conf, "b")->snapshot.source,
                         SG_SNAP_NONE);
        sg_config_destroy(conf);
}
END_TEST

#define SNAP_SECRET "Bearer-Zq9-hunter2-XYZZY"

/* Nothing that may be the Authorization value, or a credential in a URL,
 * is echoed in an error. */
START_TEST(test_snapshot_secret_not_in_errors) {
        static const char *const texts[] = {
                CFG("", SNAP(SNAP_H ",'auth_header':'" SNAP_SECRET "'")),
                CFG("", SNAP(SNAP_H ",'Authorization':'" SNAP_SECRET "'")),
                /* the value put where the variable's name belongs */
                CFG("", SNAP(SNAP_H ",'auth_header_env':'" SNAP_SECRET "'")),
                CFG("", SNAP("'source':'http','url':'http://u:" SNAP_SECRET
                             "@h/{aggregate}'")),
                /* a URL that may hold a key in its query is not quoted */
                CFG("",
                    SNAP("'source':'http','url':'http://h/x?key=" SNAP_SECRET
                         "'")),
                CFG("", SNAP("'source':'http','url':'ftp://h/?key=" SNAP_SECRET
                             "{aggregate}'")),
        };
        static const char *const keys[] = {
                "topics.orders.snapshot.auth_header: not allowed",
                "topics.orders.snapshot.Authorization: not allowed",
                "topics.orders.snapshot.auth_header_env: must be the NAME",
                "topics.orders.snapshot.url: must not hold credentials",
                "topics.orders.snapshot.url: must contain \"{aggregate}\"",
                "topics.orders.snapshot.url: must start with",
        };
        char err[1024];
        sg_config_t *conf = NULL;

        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                ck_assert_int_eq(parse_q(texts[i], &conf, err, sizeof(err)),
                                 SG_ERR_CONFIG);
                ck_assert_ptr_null(conf);
                ck_assert_msg(strstr(err, keys[i]) != NULL,
                              "text %zu: \"%s\" lacks \"%s\"", i, err, keys[i]);
                ck_assert_msg(strstr(err, "hunter2") == NULL,
                              "text %zu leaks the secret: %s", i, err);
        }
}
END_TEST

/* Errors after snapshot blocks were built free them (ASan leak check). */
START_TEST(test_snapshot_partial_freed) {
        char err[512];
        sg_config_t *conf = NULL;

        /* a's kafka and b's http block are complete; the clash is found
         * after every topic was read */
        ck_assert_int_eq(
                parse_q("{'data_dir':'/d'," KAFKA_OK ",'topics':{"
                        "'a':{'output_topic':'a.out','dlq_topic':'a.dlq'" SNAP(
                                "'source':'kafka','request_topic':'s.req',"
                                "'reply_topic':'b.out'") "},"
                                                         "'b':{'output_topic':'"
                                                         "b.out','dlq_topic':'"
                                                         "b.dlq'" SNAP(
                                                                 SNAP_H
                                                                 ",'auth_"
                                                                 "header_env':'"
                                                                 "E'") "}}}",
                        &conf, err, sizeof(err)),
                SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(
                strstr(err, "topics.a.snapshot.reply_topic: \"b.out\" is also "
                            "topics.b.output_topic"));

        /* url and auth_header_env copied, then a range error */
        ck_assert_int_eq(parse_q(CFG("", SNAP(SNAP_H ",'auth_header_env':'E',"
                                                     "'max_attempts':0")),
                                 &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(
                strstr(err, "topics.orders.snapshot.max_attempts: "));

        /* both topics copied, then the strict-ordering rule */
        ck_assert_int_eq(
                parse_q(CFG("",
                            ",'ordering':{'mode':'latest_wins'}" SNAP(SNAP_K)),
                        &conf, err, sizeof(err)),
                SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_ptr_nonnull(strstr(err, "topics.orders.snapshot: needs"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Environment variables (docs/configuration.md "Secrets and environment    */
/* variables")                                                              */
/* ------------------------------------------------------------------------ */

/* The variables the cases below read; each case sets them itself. */
static void env_reset(void) {
        unsetenv("SGT_A");
        unsetenv("SGT_B");
        unsetenv("SGT_EMPTY");
        unsetenv("SGT_UNSET");
        setenv("SGT_A", "alpha", 1);
        setenv("SGT_B", "beta", 1);
        setenv("SGT_EMPTY", "", 1);
}

typedef struct env_case {
        const char *value;  /* kafka.client.id as written (' for ") */
        const char *expect; /* what it becomes */
} env_case_t;

static const env_case_t env_cases[] = {
        {"${SGT_A}", "alpha"},
        {"x-${SGT_A}-${SGT_B}-y", "x-alpha-beta-y"},
        {"${SGT_A:-d}", "alpha"},
        {"${SGT_UNSET:-d}", "d"},
        {"${SGT_EMPTY:-d}", "d"},
        {"${SGT_A-d}", "alpha"},
        {"${SGT_UNSET-d}", "d"},
        {"x${SGT_EMPTY-d}y", "xy"},
        {"${SGT_UNSET:-}z", "z"},
        {"${SGT_UNSET:-${SGT_B}}", "beta"},
        {"${SGT_UNSET:-a${SGT_UNSET:-b}c}", "abc"},
        {"${SGT_A:?needed}", "alpha"},
        {"${SGT_EMPTY?needed}x", "x"},
        {"${SGT_A:+on}", "on"},
        {"x${SGT_EMPTY:+on}", "x"},
        {"${SGT_EMPTY+on}", "on"},
        {"x${SGT_UNSET+on}", "x"},
        {"$$", "$"},
        {"a$${SGT_A}", "a${SGT_A}"},
        {"$$$$x", "$$x"},
        {"$SGT_A", "$SGT_A"}, /* no braces: not a reference */
        {"a$", "a$"},
        {"a$b", "a$b"},
        {"${SGT_UNSET:-{x}", "{x"},
};

/* ${VAR}, its defaults and alternates and $$ (Docker Compose's rules) in a
 * librdkafka property value. */
START_TEST(test_env_interpolation) {
        const env_case_t *ec = &env_cases[_i];
        char text[512], err[1024];
        sg_config_t *conf = NULL;

        env_reset();
        snprintf(text, sizeof(text),
                 "{'data_dir':'/d','kafka':{'bootstrap.servers':'b:9092',"
                 "'group.id':'g','client.id':'%s'},'topics':{'o':{"
                 "'output_topic':'x','dlq_topic':'y'}}}",
                 ec->value);
        ck_assert_msg(parse_q(text, &conf, err, sizeof(err)) == SG_OK,
                      "case %d (%s): %s", _i, ec->value, err);
        const char *v = kv_get(conf->kafka, conf->kafka_cnt, "client.id");
        ck_assert_msg(v && !strcmp(v, ec->expect), "case %d (%s): \"%s\"", _i,
                      ec->value, v ? v : "(none)");
        sg_config_destroy(conf);
}
END_TEST

/* Every string value is interpolated: seqgate's own keys, topic keys,
 * the librdkafka blocks, field sources, state machines; member names and
 * numbers are not. */
START_TEST(test_env_every_string) {
        char err[1024];
        sg_config_t *conf = NULL;

        env_reset();
        setenv("SGT_DIR", "/var/lib/sg", 1);
        setenv("SGT_BS", "kafka-0:9092", 1);
        setenv("SGT_OUT", "orders.clean", 1);
        setenv("SGT_POLICY", "hold", 1);
        setenv("SGT_PW", "pa$$word-from-env", 1);
        ck_assert_msg(
                parse_q("{'data_dir':'${SGT_DIR}','guarantee':"
                        "'${SGT_UNSET:-at_least_once}','kafka':{"
                        "'bootstrap.servers':'${SGT_BS}','group.id':'g',"
                        "'sasl.password':'${SGT_PW}'},"
                        "'kafka_producer':{'linger.ms':'${SGT_UNSET:-7}'},"
                        "'topics':{'orders':{'output_topic':'${SGT_OUT}',"
                        "'dlq_topic':'${SGT_OUT}.dlq','envelope':{"
                        "'id':'header:${SGT_A}'},'ordering':{'gap_policy':"
                        "'${SGT_POLICY}'},'snapshot':{'source':'http',"
                        "'url':'https://h/${SGT_A}/{aggregate}',"
                        "'auth_header_env':'${SGT_UNSET:-SNAP_AUTH}'}}}}",
                        &conf, err, sizeof(err)) == SG_OK,
                "%s", err);
        ck_assert_str_eq(conf->data_dir, "/var/lib/sg");
        ck_assert_int_eq(conf->guarantee, SG_GUARANTEE_AT_LEAST_ONCE);
        ck_assert_str_eq(
                kv_get(conf->kafka, conf->kafka_cnt, "bootstrap.servers"),
                "kafka-0:9092");
        /* a variable's value is not interpolated again */
        ck_assert_str_eq(kv_get(conf->kafka, conf->kafka_cnt, "sasl.password"),
                         "pa$$word-from-env");
        ck_assert_str_eq(kv_get(conf->kafka_producer, conf->kafka_producer_cnt,
                                "linger.ms"),
                         "7");
        const sg_topic_config_t *tc = &conf->topics[0];
        ck_assert_str_eq(tc->output_topic, "orders.clean");
        ck_assert_str_eq(tc->dlq_topic, "orders.clean.dlq");
        assert_src(&tc->id, SG_SRC_HEADER, "alpha");
        ck_assert_int_eq(tc->gap_policy, SG_GAP_HOLD);
        ck_assert_str_eq(tc->snapshot.url, "https://h/alpha/{aggregate}");
        ck_assert_str_eq(tc->snapshot.auth_header_env, "SNAP_AUTH");

        /* what came from the environment is marked and listed */
        for (size_t i = 0; i < conf->kafka_cnt; i++)
                ck_assert_msg(
                        conf->kafka[i].from_env ==
                                (strcmp(conf->kafka[i].name, "group.id") != 0),
                        "%s", conf->kafka[i].name);
        ck_assert(!conf->kafka_producer[0].from_env); /* a default only */
        static const char *const listed[] = {"/var/lib/sg",
                                             "kafka-0:9092",
                                             "pa$$word-from-env",
                                             "orders.clean",
                                             "orders.clean.dlq",
                                             "header:alpha",
                                             "alpha",
                                             "hold",
                                             "https://h/alpha/{aggregate}"};
        for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
                bool found = false;
                for (size_t j = 0; j < conf->redact_cnt; j++)
                        found = found || !strcmp(conf->redact[j], listed[i]);
                ck_assert_msg(found, "\"%s\" not listed for redaction",
                              listed[i]);
        }
        /* longest first, so that a value holding another goes whole */
        for (size_t j = 1; j < conf->redact_cnt; j++)
                ck_assert_uint_ge(strlen(conf->redact[j - 1]),
                                  strlen(conf->redact[j]));
        for (size_t j = 0; j < conf->redact_cnt; j++)
                ck_assert_msg(strcmp(conf->redact[j], "7") &&
                                      strcmp(conf->redact[j], "SNAP_AUTH") &&
                                      strcmp(conf->redact[j], "g"),
                              "\"%s\" is from the file", conf->redact[j]);
        sg_config_destroy(conf);

        /* numbers, booleans and member names are not interpolated */
        setenv("SGT_N", "5", 1);
        ck_assert_int_eq(parse_q(CFG(",'stats_interval_ms':'${SGT_N}'", ""),
                                 &conf, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(
                strstr(err, "stats_interval_ms: must be an integer >= 0"));
        ck_assert_int_eq(
                parse_q(CFG(",'${SGT_A}':1", ""), &conf, err, sizeof(err)),
                SG_ERR_CONFIG);
        ck_assert_ptr_nonnull(strstr(err, "${SGT_A}: unknown key"));
}
END_TEST

typedef struct env_bad_case {
        const char *value;  /* data_dir as written */
        const char *expect; /* the error, after "data_dir: " */
} env_bad_case_t;

static const env_bad_case_t env_bad_cases[] = {
        {"${SGT_UNSET}", "environment variable SGT_UNSET is not set"},
        {"/d/${SGT_A}/${SGT_UNSET}",
         "environment variable SGT_UNSET is not set"},
        {"${SGT_UNSET:-${SGT_UNSET}}", "environment variable SGT_UNSET is not "
                                       "set"},
        {"${SGT_UNSET:?say why}", "environment variable SGT_UNSET is not set "
                                  "or empty: say why"},
        {"${SGT_EMPTY:?}", "environment variable SGT_EMPTY is not set or "
                           "empty"},
        {"${SGT_UNSET?}", "environment variable SGT_UNSET is not set"},
        {"/d${", "unterminated reference \"${\" at character 3"},
        {"${SGT_A", "unterminated reference"},
        {"${SGT_A:-x", "unterminated reference"},
        {"${1X}", "malformed reference at character 1: a variable name is "
                  "[A-Za-z_][A-Za-z0-9_]*"},
        {"${}", "malformed reference"},
        {"${-x}", "malformed reference"},
        {"${A B}", "malformed reference"},
        {"${SGT_A:x}", "malformed reference at character 1: after the "
                       "variable name SGT_A comes '}'"},
        {"${SGT_A:}", "malformed reference"},
        {"${SGT_A/x}", "malformed reference"},
        {"${SGT_EMPTY}", "must not be empty"}, /* set, empty: the key's rule */
};

/* A malformed reference or an unset variable is an error naming the key
 * path (and the variable); the reference text is not quoted; nothing
 * else is said about that value. */
START_TEST(test_env_errors) {
        const env_bad_case_t *ec = &env_bad_cases[_i];
        char text[512], err[1024], want[256];
        sg_config_t *conf = (sg_config_t *)0x1;

        env_reset();
        snprintf(text, sizeof(text),
                 "{'data_dir':'%s'," KAFKA_OK ",'topics':{'o':{"
                 "'output_topic':'x','dlq_topic':'y'}}}",
                 ec->value);
        ck_assert_int_eq(parse_q(text, &conf, err, sizeof(err)), SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        snprintf(want, sizeof(want), "data_dir: %s", ec->expect);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
                      "case %d (%s): \"%s\" does not start with \"%s\"", _i,
                      ec->value, err, want);
        ck_assert_msg(count_lines(err) == 1, "case %d: %s", _i, err);
        if (strstr(ec->value, "${") && strcmp(ec->value, "${SGT_EMPTY}"))
                ck_assert_msg(strstr(err, ec->value) == NULL,
                              "case %d quotes the value: %s", _i, err);
}
END_TEST

/* An unset variable in a librdkafka property and a snapshot URL: each
 * named with its key path, one line each, nothing else said about them;
 * the file's other errors still reported. */
START_TEST(test_env_unset_named) {
        char err[2048];
        sg_config_t *conf = NULL;

        env_reset();
        ck_assert_int_eq(
                parse_q("{'data_dir':'/d','kafka':{'bootstrap.servers':'b',"
                        "'group.id':'g','sasl.password':'${SNAP_TOKEN_X}'},"
                        "'topics':{'orders':{'output_topic':'o',"
                        "'dlq_topic':'d','ordering':{'gap_policy':'wait'},"
                        "'snapshot':{'source':'http','url':"
                        "'${SGT_UNSET}'}}}}",
                        &conf, err, sizeof(err)),
                SG_ERR_CONFIG);
        static const char *const want[] = {
                "kafka.sasl.password: environment variable SNAP_TOKEN_X is "
                "not set",
                "topics.orders.snapshot.url: environment variable SGT_UNSET "
                "is not set",
                "topics.orders.ordering.gap_policy: \"wait\" is not allowed",
        };
        for (size_t i = 0; i < 3; i++)
                ck_assert_msg(strstr(err, want[i]) != NULL, "lacks %s:\n%s",
                              want[i], err);
        ck_assert_msg(count_lines(err) == 3, "%s", err);
}
END_TEST

/* A value from the environment is redacted like a secret in every error
 * that would quote it, short ones where they stand quoted; a librdkafka
 * refusal of one withholds librdkafka's detail. */
START_TEST(test_env_redacted_in_errors) {
        char err[2048];
        sg_config_t *conf = NULL;

        env_reset();
        setenv("SGT_POLICY", "waitabit", 1);
        setenv("SGT_ACKS", "1", 1);
        setenv("SGT_CODEC", "bogus-codec-xyz", 1);
        setenv("SGT_DLQ", "bad topic name!", 1);
        ck_assert_int_eq(
                parse_q("{'data_dir':'/d','guarantee':'at_least_once',"
                        "'kafka':{'bootstrap.servers':'b','group.id':'g',"
                        "'compression.codec':'${SGT_CODEC}'},"
                        "'kafka_producer':{'acks':'${SGT_ACKS}'},"
                        "'topics':{'orders':{'output_topic':'o',"
                        "'dlq_topic':'${SGT_DLQ}',"
                        "'ordering':{'gap_policy':'${SGT_POLICY}'}}}}",
                        &conf, err, sizeof(err)),
                SG_ERR_CONFIG);
        static const char *const want[] = {
                /* one string: parentheses keep clang's
                 * -Wstring-concatenation from suspecting a missing comma */
                ("kafka.compression.codec: rejected by librdkafka (detail "
                 "withheld"),
                "kafka_producer.acks: \"***\" is not allowed",
                "topics.orders.dlq_topic: \"***\" is not a valid Kafka topic",
                "topics.orders.ordering.gap_policy: \"***\" is not allowed",
        };
        for (size_t i = 0; i < 4; i++)
                ck_assert_msg(strstr(err, want[i]) != NULL, "lacks %s:\n%s",
                              want[i], err);
        ck_assert_msg(!strstr(err, "waitabit") && !strstr(err, "bogus") &&
                              !strstr(err, "\"1\"") && !strstr(err, "bad top"),
                      "a value from the environment is quoted:\n%s", err);
}
END_TEST

/* The snapshot URL may not hold credentials written in the file, but may
 * take them from the environment (the config file holds no secret). */
START_TEST(test_env_url_credentials) {
        char err[1024];
        sg_config_t *conf = NULL;

        env_reset();
        setenv("SGT_CRED", "user:s3cr3t-pw", 1);
        setenv("SGT_URL", "https://user:s3cr3t-pw@h/o/{aggregate}", 1);
        static const char *const ok[] = {
                "https://${SGT_CRED}@h/o/{aggregate}",
                "https://user:${SGT_A}@h/o/{aggregate}",
                "${SGT_URL}",
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char text[512];
                snprintf(text, sizeof(text),
                         CFG("", SNAP("'source':'http','url':'%s'")), ok[i]);
                ck_assert_msg(parse_q(text, &conf, err, sizeof(err)) == SG_OK,
                              "%s: %s", ok[i], err);
                ck_assert_ptr_nonnull(
                        strstr(conf->topics[0].snapshot.url, "@h/o/"));
                ck_assert_ptr_null(strstr(conf->topics[0].snapshot.url, "${"));
                sg_config_destroy(conf);
        }
        static const char *const bad[] = {
                "https://user:pw@h/o/{aggregate}",
                "https://user:pw@${SGT_A}/{aggregate}",
                "https://user:pw@h/${SGT_A}/{aggregate}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[512];
                snprintf(text, sizeof(text),
                         CFG("", SNAP("'source':'http','url':'%s'")), bad[i]);
                ck_assert_int_eq(parse_q(text, &conf, err, sizeof(err)),
                                 SG_ERR_CONFIG);
                ck_assert_msg(strstr(err, "topics.orders.snapshot.url: must "
                                          "not hold credentials") &&
                                      strstr(err, "${SNAP_PASSWORD}"),
                              "%s: %s", bad[i], err);
                ck_assert_msg(!strstr(err, "user:pw"), "%s", err);
        }
}
END_TEST

/* sg_config_errors(): every error as a list, in the order found, bounded
 * at SG_CONFIG_ERRORS_MAX lines with the rest counted; the errstr API
 * unchanged; a file that cannot be read is the one line. */
START_TEST(test_config_errors_list) {
        sg_config_errors_t errs = {0};
        char err[4096], *text, *path;
        sg_config_t *conf = (sg_config_t *)0x1;

        env_reset();
        text = json("{'data_dir':'${SGT_UNSET}','foo':1," KAFKA_OK ","
                    "'topics':{'a':{'output_topic':'a.out','dlq_topic':'x',"
                    "'ordering':{'gap_policy':'wait'}}}}");
        path = write_temp(text, strlen(text));
        ck_assert_int_eq(sg_config_errors(path, &conf, &errs, err, sizeof(err)),
                         SG_ERR_CONFIG);
        ck_assert_ptr_null(conf);
        ck_assert_uint_eq(errs.total, 3);
        ck_assert_uint_eq(errs.cnt, 3);
        ck_assert_str_eq(errs.lines[0],
                         "data_dir: environment variable SGT_UNSET is not set "
                         "(write ${SGT_UNSET:-default} for a default)");
        /* the allowed list is the root's keys (test_config_keys checks the
         * table); here: the error names the key and says why */
        ck_assert_msg(!strncmp(errs.lines[1],
                               "foo: unknown key; allowed: $schema, ", 36),
                      "%s", errs.lines[1]);
        ck_assert_ptr_nonnull(
                strstr(errs.lines[2], "topics.a.ordering.gap_policy: "));
        /* errstr: the same lines */
        ck_assert_uint_eq(count_lines(err), 3);
        ck_assert(!strncmp(err, errs.lines[0], strlen(errs.lines[0])));
        unlink(path);
        free(path);
        free(text);

        /* 150 errors: 100 lines kept, 150 counted; reused: cleared first */
        char big[8192];
        size_t o = snprintf(big, sizeof(big), "{'data_dir':'/d'," KAFKA_OK);
        for (int i = 0; i < 150; i++)
                o += snprintf(big + o, sizeof(big) - o, ",'k%d':1", i);
        snprintf(big + o, sizeof(big) - o,
                 ",'topics':{'a':{'output_topic':'o','dlq_topic':'d'}}}");
        text = json(big);
        path = write_temp(text, strlen(text));
        ck_assert_int_eq(sg_config_errors(path, &conf, &errs, NULL, 0),
                         SG_ERR_CONFIG);
        ck_assert_uint_eq(errs.total, 150);
        ck_assert_uint_eq(errs.cnt, SG_CONFIG_ERRORS_MAX);
        ck_assert(!strncmp(errs.lines[0], "k0: unknown key", 15));
        ck_assert(!strncmp(errs.lines[99], "k99: unknown key", 16));
        unlink(path);
        free(path);
        free(text);

        ck_assert_int_eq(sg_config_errors("/nonexistent/sg.json", &conf, &errs,
                                          err, sizeof(err)),
                         SG_ERR_IO);
        ck_assert_uint_eq(errs.total, 1);
        ck_assert_uint_eq(errs.cnt, 1);
        ck_assert_ptr_nonnull(strstr(errs.lines[0], "/nonexistent/sg.json: "
                                                    "cannot open"));
        ck_assert_str_eq(err, errs.lines[0]);
        sg_config_errors_clear(&errs);
        ck_assert_uint_eq(errs.total, 0);
        ck_assert_uint_eq(errs.cnt, 0);

        /* a valid file: nothing */
        text = json(CFG("", ""));
        path = write_temp(text, strlen(text));
        ck_assert_int_eq(sg_config_errors(path, &conf, &errs, err, sizeof(err)),
                         SG_OK);
        ck_assert_uint_eq(errs.total, 0);
        sg_config_destroy(conf);
        unlink(path);
        free(path);
        free(text);
}
END_TEST

/* sg_config_redact_text(): every occurrence; short texts only quoted. */
START_TEST(test_redact_text) {
        char *r = sg_config_redact_text("a hunter2x b hunter2x", "hunter2x");
        ck_assert_str_eq(r, "a *** b ***");
        free(r);
        ck_assert_ptr_null(sg_config_redact_text("nothing here", "hunter2x"));
        ck_assert_ptr_null(sg_config_redact_text("x", ""));
        r = sg_config_redact_text("acks 1, \"1\" is 10", "1");
        ck_assert_str_eq(r, "acks 1, \"***\" is 10");
        free(r);
        sg_kv_t kv = {.name = "client.id", .value = "v", .from_env = true};
        ck_assert(sg_config_kv_secret(&kv));
        kv.from_env = false;
        ck_assert(!sg_config_kv_secret(&kv));
        kv.name = "sasl.password";
        ck_assert(sg_config_kv_secret(&kv));
}
END_TEST

/* seqgatectl's -X (sg_config_kafka_set): a property on top of the "kafka"
 * block, for every client sg_kafka_conf_new builds; a later one wins; the
 * properties a "kafka" entry may not have are refused, as at load time
 * (semantics §6), and so is what librdkafka refuses. */
START_TEST(test_kafka_set_on_top) {
        char err[512] = "", v[64];
        size_t vs;
        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(CFG(",'guarantee':'at_least_once'", ""), &conf,
                                 err, sizeof(err)),
                         SG_OK);
        size_t before = conf->kafka_cnt;
        ck_assert_int_eq(sg_config_kafka_set(conf, "bootstrap.servers", "x:1",
                                             err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_config_kafka_set(conf, "bootstrap.servers", "y:2",
                                             err, sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(
                sg_config_kafka_set(conf, "linger.ms", "7", err, sizeof(err)),
                SG_OK);
        ck_assert_uint_eq(conf->kafka_cnt, before + 3);
        static const sg_kafka_client_t clients[] = {
                SG_KAFKA_GROUP_CONSUMER, SG_KAFKA_PRODUCER, SG_KAFKA_READER};
        for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
                rd_kafka_conf_t *kc = NULL;
                sg_kafka_log_t lg = {.conf = conf};
                ck_assert_msg(sg_kafka_conf_new(conf, clients[i], "r", &lg, &kc,
                                                err, sizeof(err)) == SG_OK,
                              "%s", err);
                vs = sizeof(v);
                ck_assert_int_eq(
                        rd_kafka_conf_get(kc, "bootstrap.servers", v, &vs),
                        RD_KAFKA_CONF_OK);
                ck_assert_str_eq(v, "y:2");
                rd_kafka_conf_destroy(kc);
        }
        /* refused as in the file, nothing added */
        static const char *const bad[][3] = {
                {"enable.idempotence", "false", "semantics §6"},
                {"enable.gapless.guarantee", "false", "semantics §6"},
                {"acks", "1", "semantics §6"},
                {"enable.auto.commit", "true", "semantics §6"},
                {"transactional.id", "t", "transactional"},
                {"no.such.property", "1", "librdkafka"},
                {"linger.ms", "soon", "librdkafka"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err[0] = '\0';
                ck_assert_int_eq(sg_config_kafka_set(conf, bad[i][0], bad[i][1],
                                                     err, sizeof(err)),
                                 SG_ERR_CONFIG);
                ck_assert_msg(strstr(err, bad[i][0]) && strstr(err, bad[i][2]),
                              "%s=%s: %s", bad[i][0], bad[i][1], err);
        }
        /* a secret's value is never echoed */
        ck_assert_int_eq(sg_config_kafka_set(conf, "ssl.key.password", "", err,
                                             sizeof(err)),
                         SG_OK);
        ck_assert_int_eq(sg_config_kafka_set(conf, "", "x", err, sizeof(err)),
                         SG_ERR_INVALID);
        ck_assert_uint_eq(conf->kafka_cnt, before + 4);
        sg_config_destroy(conf);
}
END_TEST

/* The group consumer's prefetch default (docs/operating.md "Memory"):
 * applied when no block names queued.max.messages.kbytes, and then not
 * librdkafka's own default; a value in "kafka", in "kafka_consumer" or from -X
 * (sg_config_kafka_set) wins over it. The restore reader keeps
 * librdkafka's default. */
static void prefetch_kbytes(const sg_config_t *conf, sg_kafka_client_t client,
                            char *v, size_t size) {
        char err[512] = "";
        rd_kafka_conf_t *kc = NULL;
        sg_kafka_log_t lg = {.conf = conf};
        ck_assert_msg(sg_kafka_conf_new(conf, client, "r", &lg, &kc, err,
                                        sizeof(err)) == SG_OK,
                      "%s", err);
        size_t vs = size;
        ck_assert_int_eq(
                rd_kafka_conf_get(kc, "queued.max.messages.kbytes", v, &vs),
                RD_KAFKA_CONF_OK);
        rd_kafka_conf_destroy(kc);
}

START_TEST(test_kafka_prefetch_default) {
        char err[512] = "", v[64], lib[64];
        size_t vs = sizeof(lib);
        rd_kafka_conf_t *plain = rd_kafka_conf_new();
        ck_assert_int_eq(rd_kafka_conf_get(plain, "queued.max.messages.kbytes",
                                           lib, &vs),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_destroy(plain);
        ck_assert_str_ne(lib, SG_KAFKA_QUEUED_MAX_KBYTES);

        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(CFG("", ""), &conf, err, sizeof(err)), SG_OK);
        prefetch_kbytes(conf, SG_KAFKA_GROUP_CONSUMER, v, sizeof(v));
        ck_assert_str_eq(v, SG_KAFKA_QUEUED_MAX_KBYTES);
        prefetch_kbytes(conf, SG_KAFKA_READER, v, sizeof(v));
        ck_assert_str_eq(v, lib);
        /* -X on top */
        ck_assert_int_eq(sg_config_kafka_set(conf, "queued.max.messages.kbytes",
                                             "131072", err, sizeof(err)),
                         SG_OK);
        prefetch_kbytes(conf, SG_KAFKA_GROUP_CONSUMER, v, sizeof(v));
        ck_assert_str_eq(v, "131072");
        sg_config_destroy(conf);

        static const char *const given[] = {
                "{'data_dir':'/d','kafka':{'bootstrap.servers':'b:9092',"
                "'group.id':'g','queued.max.messages.kbytes':65536},"
                "'topics':{'orders':{'output_topic':'o','dlq_topic':'d'}}}",
                CFG(",'kafka_consumer':{'queued.max.messages.kbytes':65536}",
                    ""),
        };
        for (size_t i = 0; i < sizeof(given) / sizeof(given[0]); i++) {
                conf = NULL;
                ck_assert_msg(parse_q(given[i], &conf, err, sizeof(err)) ==
                                      SG_OK,
                              "%s", err);
                prefetch_kbytes(conf, SG_KAFKA_GROUP_CONSUMER, v, sizeof(v));
                ck_assert_str_eq(v, "65536");
                sg_config_destroy(conf);
        }
}
END_TEST

/* semantics §6 "Output order": the non-transactional producer (at_least_once,
 * seqgatectl) stops at a produce request that failed for good instead of
 * sending the later records of its partition: enable.gapless.guarantee,
 * also where a block says nothing; the transactional producer aborts
 * instead and is left as librdkafka makes it. */
static void conf_value(const sg_config_t *conf, sg_kafka_client_t client,
                       const char *name, char *v, size_t size) {
        char err[512] = "";
        rd_kafka_conf_t *kc = NULL;
        sg_kafka_log_t lg = {.conf = conf};
        ck_assert_msg(sg_kafka_conf_new(conf, client, "r", &lg, &kc, err,
                                        sizeof(err)) == SG_OK,
                      "%s", err);
        size_t vs = size;
        ck_assert_int_eq(rd_kafka_conf_get(kc, name, v, &vs), RD_KAFKA_CONF_OK);
        rd_kafka_conf_destroy(kc);
}

START_TEST(test_kafka_producer_gapless) {
        char err[512] = "", v[64];
        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(CFG("", ""), &conf, err, sizeof(err)), SG_OK);
        conf_value(conf, SG_KAFKA_PRODUCER, "enable.gapless.guarantee", v,
                   sizeof(v));
        ck_assert_str_eq(v, "true");
        conf_value(conf, SG_KAFKA_TXN_PRODUCER, "enable.gapless.guarantee", v,
                   sizeof(v));
        ck_assert_str_eq(v, "false");
        sg_config_destroy(conf);
}
END_TEST

/* A warning librdkafka writes about a property seqgate sets on purpose
 * (kafka_conf.c, intended_warnings[]) tells an operator nothing: every
 * non-transactional producer has enable.gapless.guarantee (semantics §6
 * "Output order"), which librdkafka calls experimental in a CONFWARN line
 * each time such a client is made. That line reaches the log callback at
 * debug, never as a warning. */
typedef struct confwarn {
        int lines;       /* CONFWARN lines naming enable.gapless.guarantee */
        int above_debug; /* of them, at a level above debug */
        char fields[512];
} confwarn_t;

static void confwarn_cb(void *opaque, sg_log_level_t level, const char *event,
                        const char *fields) {
        confwarn_t *c = opaque;
        if (strcmp(event, "librdkafka") != 0 || !fields ||
            !strstr(fields, "\"fac\":\"CONFWARN\"") ||
            !strstr(fields, "enable.gapless.guarantee"))
                return;
        c->lines++;
        if (level < SG_LOG_DEBUG) {
                c->above_debug++;
                snprintf(c->fields, sizeof(c->fields), "%d %s", (int)level,
                         fields);
        }
}

START_TEST(test_kafka_intended_warning_at_debug) {
        char err[512] = "";
        sg_config_t *conf = NULL;
        ck_assert_int_eq(parse_q(CFG("", ""), &conf, err, sizeof(err)), SG_OK);
        confwarn_t c = {0};
        sg_kafka_log_t lg = {
                .conf = conf, .log_cb = confwarn_cb, .log_opaque = &c};
        rd_kafka_conf_t *kc = NULL;
        ck_assert_msg(sg_kafka_conf_new(conf, SG_KAFKA_PRODUCER, "r", &lg, &kc,
                                        err, sizeof(err)) == SG_OK,
                      "%s", err);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
        ck_assert_msg(rk != NULL, "%s", err);
        /* log.queue: the lines come with the polls, as the loop's do */
        rd_kafka_set_log_queue(rk, NULL);
        for (int i = 0; i < 50 && !c.lines; i++)
                rd_kafka_poll(rk, 20);
        rd_kafka_destroy(rk);
        ck_assert_int_ge(c.lines, 1); /* librdkafka did warn */
        ck_assert_msg(c.above_debug == 0, "written above debug: %s", c.fields);
        sg_config_destroy(conf);
}
END_TEST

/* The version text of -V: seqgate's version first, then the libraries. */
START_TEST(test_version_text) {
        char v[1024];
        size_t n = sg_version_text(v, sizeof(v));
        ck_assert_uint_eq(n, strlen(v));
        ck_assert_str_eq(SG_VERSION_STR, "" SG_VERSION_STR);
        ck_assert_msg(!strncmp(v, "seqgate " SG_VERSION_STR "\n",
                               strlen("seqgate " SG_VERSION_STR "\n")),
                      "%s", v);
        ck_assert_str_ne(SG_VERSION_STR, "unknown"); /* meson's define */
        static const char *const libs[] = {"\nlibrdkafka ", "\nLMDB ",
                                           "\ncJSON ", "\nOpenSSL ",
                                           "\nlibmicrohttpd "};
        for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
                ck_assert_msg(strstr(v, libs[i]), "%s missing: %s", libs[i], v);
        char small[8];
        ck_assert_uint_eq(sg_version_text(small, sizeof(small)), n);
        ck_assert_str_eq(small, "seqgate");
}
END_TEST

/* --log-level names, shared by both binaries. */
START_TEST(test_log_level_names) {
        sg_log_level_t l = SG_LOG_INFO;
        ck_assert(sg_log_level_parse("debug", &l) && l == SG_LOG_DEBUG);
        ck_assert(sg_log_level_parse("warn", &l) && l == SG_LOG_WARNING);
        ck_assert(sg_log_level_parse("error", &l) && l == SG_LOG_ERR);
        ck_assert(!sg_log_level_parse("verbose", &l) && l == SG_LOG_ERR);
        ck_assert_str_eq(sg_log_level_name(SG_LOG_NOTICE), "notice");
        ck_assert_str_eq(sg_log_level_name(SG_LOG_WARNING), "warning");
}
END_TEST

static Suite *config_suite(void) {
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("valid");

        tcase_add_test(tc, test_minimal_defaults);
        tcase_add_test(tc, test_minimal_example_file);
        tcase_add_test(tc, test_orders_example_every_field);
        tcase_add_test(tc, test_plain_json_example);
        tcase_add_test(tc, test_hold_overflows_to_dlq);
        tcase_add_test(tc, test_explicit_values);
        tcase_add_test(tc, test_digest_pointers_allowed);
        tcase_add_test(tc, test_error_text_escaped);
        tcase_add_test(tc, test_kafka_values_converted);
        tcase_add_test(tc, test_kafka_set_on_top);
        tcase_add_test(tc, test_kafka_prefetch_default);
        tcase_add_test(tc, test_kafka_producer_gapless);
        tcase_add_test(tc, test_kafka_intended_warning_at_debug);
        tcase_add_test(tc, test_version_text);
        tcase_add_test(tc, test_log_level_names);
        suite_add_tcase(s, tc);

        tc = tcase_create("invalid");
        tcase_add_test(tc, test_exactly_once_defaults);
        tcase_add_loop_test(tc, test_invalid_config, 0,
                            (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
        tcase_add_test(tc, test_topic_name_length);
        tcase_add_test(tc, test_small_errstr_buffers);
        tcase_add_test(tc, test_every_error_reported);
        tcase_add_loop_test(
                tc, test_one_mistake_one_error, 0,
                (int)(sizeof(one_mistakes) / sizeof(one_mistakes[0])));
        tcase_add_test(tc, test_every_error_small_buffer);
        tcase_add_test(tc, test_partial_config_freed);
        tcase_add_test(tc, test_every_value_mistyped);
        tcase_add_test(tc, test_load_errors);
        suite_add_tcase(s, tc);

        tc = tcase_create("secrets");
        tcase_add_test(tc, test_secret_not_in_errors);
        tcase_add_test(tc, test_is_secret);
        suite_add_tcase(s, tc);

        tc = tcase_create("snapshot");
        tcase_add_test(tc, test_snapshot_absent);
        tcase_add_test(tc, test_snapshot_kafka_defaults);
        tcase_add_test(tc, test_snapshot_http_defaults);
        tcase_add_test(tc, test_snapshot_kafka_example);
        tcase_add_test(tc, test_snapshot_http_example);
        tcase_add_test(tc, test_snapshot_explicit_values);
        tcase_add_test(tc, test_snapshot_two_topics);
        tcase_add_test(tc, test_snapshot_secret_not_in_errors);
        tcase_add_test(tc, test_snapshot_partial_freed);
        suite_add_tcase(s, tc);

        tc = tcase_create("environment");
        tcase_add_loop_test(tc, test_env_interpolation, 0,
                            (int)(sizeof(env_cases) / sizeof(env_cases[0])));
        tcase_add_test(tc, test_env_every_string);
        tcase_add_loop_test(
                tc, test_env_errors, 0,
                (int)(sizeof(env_bad_cases) / sizeof(env_bad_cases[0])));
        tcase_add_test(tc, test_env_unset_named);
        tcase_add_test(tc, test_env_redacted_in_errors);
        tcase_add_test(tc, test_env_url_credentials);
        tcase_add_test(tc, test_config_errors_list);
        tcase_add_test(tc, test_redact_text);
        suite_add_tcase(s, tc);

        tc = tcase_create("api");
        tcase_add_test(tc, test_field_src_parse);
        tcase_add_test(tc, test_config_topic_lookup);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return tu_run_suite(config_suite());
}
