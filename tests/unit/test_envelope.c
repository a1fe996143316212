/*
 * test_envelope.c — unit tests of lib/envelope.c (semantics §2): CloudEvents
 * binary and structured content modes, plain JSON mappings, every malformed
 * shape the decision table's row 1 must catch, the length-prefixed
 * idempotency key, payload digests, RFC 6901 JSON Pointers, canonical JSON,
 * version text and RFC 3629 UTF-8 validation.
 *
 * Expected hashes are computed here from the rule in envelope.h (SHA-256 of
 * the encoding, of the value, or of the canonical subtree), never pasted.
 */
#include "envelope.h"

#include <check.h>
#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Fixtures                                                             */
/* ------------------------------------------------------------------ */

typedef struct tcfg {
        sg_topic_config_t tc;
        sg_field_src_t scope[4];
} tcfg_t;

static sg_field_src_t src(sg_src_kind_t kind, const char *name)
{
        sg_field_src_t s = {kind, (char *)name};
        return s;
}

/* CloudEvents defaults: id=ce:id, scope=[ce:source], aggregate=key,
 * version=ce:sequence, type=ce:type, max_field_bytes=1024. */
static void cfg_ce(tcfg_t *t)
{
        memset(t, 0, sizeof(*t));
        t->tc.name = "orders";
        t->tc.format = SG_FORMAT_CLOUDEVENTS;
        t->tc.id = src(SG_SRC_CE, "id");
        t->scope[0] = src(SG_SRC_CE, "source");
        t->tc.scope = t->scope;
        t->tc.scope_cnt = 1;
        t->tc.aggregate = src(SG_SRC_KEY, NULL);
        t->tc.version = src(SG_SRC_CE, "sequence");
        t->tc.type = src(SG_SRC_CE, "type");
        t->tc.max_field_bytes = 1024;
}

/* Plain JSON: id=/id, scope=[header:tenant], aggregate=key,
 * version=/meta/version, type=/type. */
static void cfg_json(tcfg_t *t)
{
        cfg_ce(t);
        t->tc.format = SG_FORMAT_JSON;
        t->tc.id = src(SG_SRC_POINTER, "/id");
        t->scope[0] = src(SG_SRC_HEADER, "tenant");
        t->tc.version = src(SG_SRC_POINTER, "/meta/version");
        t->tc.type = src(SG_SRC_POINTER, "/type");
}

typedef struct trec {
        sg_record_t rec;
        sg_header_t hdrs[16];
} trec_t;

static void rec_init(trec_t *r, const char *key, const char *value)
{
        memset(r, 0, sizeof(*r));
        r->rec.topic = "orders";
        r->rec.partition = 3;
        r->rec.offset = 42;
        r->rec.timestamp_ms = -1;
        r->rec.key = key;
        r->rec.key_len = key ? strlen(key) : 0;
        r->rec.value = value;
        r->rec.value_len = value ? strlen(value) : 0;
        r->rec.headers = r->hdrs;
}

static void rec_hdr_n(trec_t *r, const char *name, const void *value, size_t len)
{
        ck_assert_uint_lt(r->rec.header_cnt, 16);
        r->hdrs[r->rec.header_cnt].name = name;
        r->hdrs[r->rec.header_cnt].value = value;
        r->hdrs[r->rec.header_cnt].value_len = len;
        r->rec.header_cnt++;
}

/* Adds header @p name = @p value (NULL: a header with a null value). */
static void rec_hdr(trec_t *r, const char *name, const char *value)
{
        rec_hdr_n(r, name, value, value ? strlen(value) : 0);
}

/* A binary-mode CloudEvent; NULL attributes are left out. */
static void rec_binary(trec_t *r, const char *key, const char *id,
                       const char *source, const char *type, const char *seq)
{
        rec_init(r, key, "{\"amount\":10}");
        rec_hdr(r, "ce_specversion", "1.0");
        if (id)
                rec_hdr(r, "ce_id", id);
        if (source)
                rec_hdr(r, "ce_source", source);
        if (type)
                rec_hdr(r, "ce_type", type);
        if (seq)
                rec_hdr(r, "ce_sequence", seq);
}

static char errbuf[512];

static sg_err_t run(const tcfg_t *t, const trec_t *r, sg_envelope_t *env)
{
        memset(errbuf, 'X', sizeof(errbuf)); /* prove it is NUL-terminated */
        return sg_envelope_parse(&t->tc, &r->rec, env, errbuf, sizeof(errbuf));
}

/* Details are short, printable ASCII. */
static void check_detail(const char *d)
{
        size_t n = strlen(d);
        ck_assert_uint_gt(n, 0);
        ck_assert_msg(n < 200, "detail too long (%zu): %s", n, d);
        for (size_t i = 0; i < n; i++)
                ck_assert_msg((unsigned char)d[i] >= 0x20 && (unsigned char)d[i] < 0x7f,
                              "non-printable byte 0x%02x in detail", (unsigned char)d[i]);
}

/* Parses and expects SG_ERR_INVALID with a detail containing @p a and @p b. */
static void expect_invalid(const tcfg_t *t, const trec_t *r, const char *a,
                           const char *b)
{
        sg_envelope_t env;
        sg_err_t err;

        sg_envelope_init(&env);
        err = run(t, r, &env);
        ck_assert_msg(err == SG_ERR_INVALID, "expected SG_ERR_INVALID, got %d", err);
        check_detail(errbuf);
        ck_assert_msg(strstr(errbuf, a), "detail \"%s\" lacks \"%s\"", errbuf, a);
        if (b)
                ck_assert_msg(strstr(errbuf, b), "detail \"%s\" lacks \"%s\"", errbuf, b);
        /* A failed parse leaves nothing behind. */
        ck_assert_ptr_null(env.id);
        ck_assert_ptr_null(env.aggregate);
        ck_assert_ptr_null(env.type);
        ck_assert(!env.has_version);
        sg_envelope_clear(&env);
}

static void expect_ok(const tcfg_t *t, const trec_t *r, sg_envelope_t *env)
{
        sg_err_t err = run(t, r, env);
        ck_assert_msg(err == SG_OK, "expected SG_OK, got %d: %s", err, errbuf);
}

/* SHA-256 of the idempotency key encoding, built independently here. */
static void key_hash_of(const char *const *parts, size_t n, unsigned char *out)
{
        unsigned char buf[4096];
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(parts[i]);
                buf[o++] = (unsigned char)(len >> 24);
                buf[o++] = (unsigned char)(len >> 16);
                buf[o++] = (unsigned char)(len >> 8);
                buf[o++] = (unsigned char)len;
                memcpy(buf + o, parts[i], len);
                o += len;
        }
        sg_sha256(buf, o, out);
}

/* ------------------------------------------------------------------ */
/* CloudEvents binary mode                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_binary_ok)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];
        const char *parts[] = {"orders", "/shop/eu", "evt-1"};

        cfg_ce(&t);
        rec_binary(&r, "order-7", "evt-1", "/shop/eu", "order.paid", "42");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "evt-1");
        ck_assert_str_eq(env.aggregate, "order-7");
        ck_assert_uint_eq(env.aggregate_len, 7);
        ck_assert(env.has_version);
        ck_assert_uint_eq(env.version, 42);
        ck_assert_str_eq(env.type, "order.paid");
        key_hash_of(parts, 3, want);
        ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);
        sg_sha256(r.rec.value, r.rec.value_len, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        sg_envelope_clear(&env);
        ck_assert_ptr_null(env.id);
}
END_TEST

START_TEST(test_binary_last_header_wins)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        rec_binary(&r, "k", "evt-1", "src", "t1", "1");
        rec_hdr(&r, "ce_sequence", "2");
        rec_hdr(&r, "ce_type", "t2");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(env.version, 2);
        ck_assert_str_eq(env.type, "t2");
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_binary_value_not_json_is_fine)
{
        /* Binary mode with no pointer sources never reads the value as JSON. */
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        static const char garbage[] = "\xff\xfe{{not json";
        unsigned char want[SG_HASH_LEN];

        cfg_ce(&t);
        rec_binary(&r, "k", "evt-1", "src", "t", "1");
        r.rec.value = garbage;
        r.rec.value_len = sizeof(garbage) - 1;
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        sg_sha256(garbage, sizeof(garbage) - 1, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);

        /* Null value: digest of empty input. */
        r.rec.value = NULL;
        r.rec.value_len = 0;
        expect_ok(&t, &r, &env);
        sg_sha256("", 0, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_binary_missing_attributes)
{
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        rec_binary(&r, "k", NULL, "src", "t", "1");
        expect_invalid(&t, &r, "id", "ce_id header");
        rec_binary(&r, "k", "e", NULL, "t", "1");
        expect_invalid(&t, &r, "source", "ce_source header");
        rec_binary(&r, "k", "e", "src", NULL, "1");
        expect_invalid(&t, &r, "type", "ce_type header");
        rec_binary(&r, "k", "e", "src", "t", NULL);
        expect_invalid(&t, &r, "version", "ce_sequence header");

        /* No ce_specversion and a value that is not a CloudEvent. */
        rec_init(&r, "k", "{\"amount\":1}");
        rec_hdr(&r, "ce_id", "e");
        rec_hdr(&r, "ce_source", "s");
        rec_hdr(&r, "ce_type", "t");
        rec_hdr(&r, "ce_sequence", "1");
        expect_invalid(&t, &r, "specversion", "ce_specversion header");

        /* Empty and null-valued attributes. */
        rec_binary(&r, "k", "", "src", "t", "1");
        expect_invalid(&t, &r, "id", "empty");
        rec_binary(&r, "k", "e", "", "t", "1");
        expect_invalid(&t, &r, "source", "empty");
        rec_binary(&r, "k", "e", "src", "t", "1");
        rec_hdr(&r, "ce_id", NULL); /* last one wins, and it is null */
        expect_invalid(&t, &r, "id", "null");
}
END_TEST

START_TEST(test_binary_specversion)
{
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.hdrs[0].value = "0.3";
        r.hdrs[0].value_len = 3;
        expect_invalid(&t, &r, "specversion", "\"0.3\"");
        r.hdrs[0].value = "";
        r.hdrs[0].value_len = 0;
        expect_invalid(&t, &r, "specversion", "empty");
        r.hdrs[0].value = "1.0.1";
        r.hdrs[0].value_len = 5;
        expect_invalid(&t, &r, "specversion", "1.0");
}
END_TEST

/* ------------------------------------------------------------------ */
/* CloudEvents structured mode                                          */
/* ------------------------------------------------------------------ */

static const char ce_event[] =
        "{\"specversion\":\"1.0\",\"id\":\"evt-9\",\"source\":\"/shop/us\","
        "\"type\":\"order.created\",\"sequence\":\"9\","
        "\"time\":\"2024-01-01T00:00:00Z\",\"data\":{\"a\":1}}";

START_TEST(test_structured_with_content_type)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];
        const char *parts[] = {"orders", "/shop/us", "evt-9"};

        cfg_ce(&t);
        rec_init(&r, "order-9", ce_event);
        rec_hdr(&r, "content-type", "application/cloudevents+json; charset=UTF-8");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "evt-9");
        ck_assert_str_eq(env.aggregate, "order-9");
        ck_assert_uint_eq(env.version, 9);
        ck_assert_str_eq(env.type, "order.created");
        key_hash_of(parts, 3, want);
        ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);
        sg_sha256(ce_event, strlen(ce_event), want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);

        /* Header name case and a ce_* header that must be ignored in
         * structured mode. */
        rec_init(&r, "order-9", ce_event);
        rec_hdr(&r, "ce_id", "from-header");
        rec_hdr(&r, "Content-Type", "application/cloudevents+json");
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "evt-9");
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_structured_without_content_type)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        rec_init(&r, "order-9", ce_event);
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "evt-9");
        ck_assert_uint_eq(env.version, 9);

        /* Numeric sequence member (an Integer-typed extension). */
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":9007199254740992}");
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(env.version, 9007199254740992ULL);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_structured_malformed)
{
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\"");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "not valid JSON", "byte");

        rec_init(&r, "k", "[1,2]");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "array", "not an object");

        rec_init(&r, "k", "null");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "null", "not an object");

        rec_init(&r, "k", NULL);
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "record value is null", NULL);

        rec_init(&r, "k", "{}");
        rec_hdr(&r, "content-type", "application/cloudevents-batch+json");
        expect_invalid(&t, &r, "batched CloudEvents", "Kafka binding");

        rec_init(&r, "k", ce_event);
        rec_hdr(&r, "content-type", "application/cloudevents+avro");
        expect_invalid(&t, &r, "JSON event format", NULL);

        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\"}");
        expect_invalid(&t, &r, "type", "member");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "source", "member");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "id", "member");
        rec_init(&r, "k", "{\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"}");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "specversion", "member");
        rec_init(&r, "k", "{\"specversion\":\"0.3\",\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "specversion", "\"0.3\"");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":7,\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "id", "JSON number, not a string");
        rec_init(&r, "k", "{\"specversion\":1.0,\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "specversion", "JSON number");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\",\"type\":\"\"}");
        expect_invalid(&t, &r, "type", "empty");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "version", "sequence member");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":true}");
        expect_invalid(&t, &r, "version", "JSON boolean");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":1.5}");
        expect_invalid(&t, &r, "version", "1.5");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":-1}");
        expect_invalid(&t, &r, "version", "-1");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":1e300}");
        expect_invalid(&t, &r, "version", "2^53");
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":\"1\"} trailing");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "not valid JSON", NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Plain JSON mappings                                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_json_mapping_ok)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];
        const char *parts[] = {"orders", "acme", "p-1"};

        cfg_json(&t);
        rec_init(&r, "acct-1",
                 "{\"id\":\"p-1\",\"type\":\"debit\",\"meta\":{\"version\":12}}");
        rec_hdr(&r, "tenant", "acme");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "p-1");
        ck_assert_str_eq(env.aggregate, "acct-1");
        ck_assert_uint_eq(env.version, 12);
        ck_assert_str_eq(env.type, "debit");
        key_hash_of(parts, 3, want);
        ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);

        /* Aggregate from a pointer to a number, version from a header,
         * version string from a pointer. */
        t.tc.aggregate = src(SG_SRC_POINTER, "/order_id");
        t.tc.version = src(SG_SRC_HEADER, "x-version");
        rec_init(&r, NULL, "{\"id\":\"p-2\",\"type\":\"t\",\"order_id\":4711}");
        rec_hdr(&r, "tenant", "acme");
        rec_hdr(&r, "x-version", "18446744073709551615");
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.aggregate, "4711");
        ck_assert_uint_eq(env.aggregate_len, 4);
        ck_assert_uint_eq(env.version, UINT64_MAX);

        t.tc.version = src(SG_SRC_POINTER, "/v");
        rec_init(&r, NULL, "{\"id\":\"p-2\",\"type\":\"t\",\"order_id\":\"o\",\"v\":\"77\"}");
        rec_hdr(&r, "tenant", "acme");
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(env.version, 77);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_json_unconfigured_fields)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        /* Key and header sources only: the value is never parsed. */
        cfg_json(&t);
        t.tc.id = src(SG_SRC_HEADER, "x-request-id");
        t.tc.scope_cnt = 0;
        t.tc.aggregate = src(SG_SRC_NONE, NULL);
        t.tc.version = src(SG_SRC_NONE, NULL);
        t.tc.type = src(SG_SRC_NONE, NULL);
        rec_init(&r, NULL, "not json at all");
        rec_hdr(&r, "x-request-id", "req-1");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "req-1");
        ck_assert_ptr_null(env.aggregate);
        ck_assert_uint_eq(env.aggregate_len, 0);
        ck_assert(!env.has_version);
        ck_assert_ptr_null(env.type);
        {
                const char *parts[] = {"orders", "req-1"};
                unsigned char want[SG_HASH_LEN];
                key_hash_of(parts, 2, want);
                ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);
        }
        sg_envelope_clear(&env);

        /* The id must be configured. */
        t.tc.id = src(SG_SRC_NONE, NULL);
        expect_invalid(&t, &r, "id", NULL);
}
END_TEST

START_TEST(test_json_malformed)
{
        tcfg_t t;
        trec_t r;

        cfg_json(&t);
        rec_init(&r, "k", "not json");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "not valid JSON");

        rec_init(&r, "k", "{\"id\":\"p-1\",\"type\":\"t\",\"meta\":{\"version\":1}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "not valid JSON", "byte");

        rec_init(&r, "k", "");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "empty");

        rec_init(&r, "k", "null");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON Pointer /id");

        rec_init(&r, "k", "{\"id\":true,\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON boolean");
        rec_init(&r, "k", "{\"id\":{},\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON object");
        rec_init(&r, "k", "{\"id\":[\"a\"],\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON array");
        rec_init(&r, "k", "{\"id\":1.5,\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON number");
        rec_init(&r, "k", "{\"id\":\"p\",\"type\":null,\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "type", "JSON null");

        static const char *const bad_versions[][2] = {
                {"true", "JSON boolean"}, {"false", "JSON boolean"},
                {"null", "JSON null"},    {"{}", "JSON object"},
                {"[1]", "JSON array"},    {"1.5", "1.5"},
                {"-1", "-1"},             {"9007199254740994", "2^53"},
                {"\"1e3\"", "\"1e3\""},   {"\"\"", "\"\""},
        };
        for (size_t i = 0; i < sizeof(bad_versions) / sizeof(bad_versions[0]); i++) {
                char v[128];
                snprintf(v, sizeof(v),
                         "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":%s}}",
                         bad_versions[i][0]);
                rec_init(&r, "k", v);
                rec_hdr(&r, "tenant", "acme");
                expect_invalid(&t, &r, "version", bad_versions[i][1]);
        }

        /* Missing header scope part. */
        rec_init(&r, "k", "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1}}");
        expect_invalid(&t, &r, "scope[0]", "tenant header");

        /* ce: sources need the CloudEvents format. */
        t.tc.id = src(SG_SRC_CE, "id");
        rec_init(&r, "k", "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "cloudevents");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Versions                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_version_header_table)
{
        static const char *const bad[] = {
                "abc", "-1", "+1", "1e3", " 7", "7 ", "", "18446744073709551616",
                "99999999999999999999999", "0x10", "1.0", "\xd9\xa1", "1\x00",
        };
        static const struct {
                const char *text;
                uint64_t v;
        } good[] = {
                {"18446744073709551615", UINT64_MAX}, {"0", 0}, {"1", 1}, {"007", 7},
        };
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                rec_binary(&r, "k", "e", "src", "t", NULL);
                /* "1\0" is two bytes with an embedded NUL */
                rec_hdr_n(&r, "ce_sequence", bad[i],
                          i == sizeof(bad) / sizeof(bad[0]) - 1 ? 2 : strlen(bad[i]));
                expect_invalid(&t, &r, "version", "ce_sequence header");
        }
        /* The detail quotes the text. */
        rec_binary(&r, "k", "e", "src", "t", "1e3");
        expect_invalid(&t, &r, "version \"1e3\" (ce_sequence header) is not a "
                               "decimal unsigned 64-bit integer", NULL);

        sg_envelope_init(&env);
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                rec_binary(&r, "k", "e", "src", "t", good[i].text);
                expect_ok(&t, &r, &env);
                ck_assert(env.has_version);
                ck_assert_uint_eq(env.version, good[i].v);
        }
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_version_parse_table)
{
        static const struct {
                const char *s;
                sg_err_t err;
                uint64_t v;
        } cases[] = {
                {"0", SG_OK, 0},
                {"1", SG_OK, 1},
                {"42", SG_OK, 42},
                {"007", SG_OK, 7},
                {"9007199254740993", SG_OK, 9007199254740993ULL},
                {"18446744073709551615", SG_OK, UINT64_MAX},
                {"18446744073709551616", SG_ERR_INVALID, 0},
                {"18446744073709551620", SG_ERR_INVALID, 0},
                {"100000000000000000000", SG_ERR_INVALID, 0},
                {"", SG_ERR_INVALID, 0},
                {"+1", SG_ERR_INVALID, 0},
                {"-0", SG_ERR_INVALID, 0},
                {" 1", SG_ERR_INVALID, 0},
                {"1 ", SG_ERR_INVALID, 0},
                {"1e3", SG_ERR_INVALID, 0},
                {"1.0", SG_ERR_INVALID, 0},
                {"a", SG_ERR_INVALID, 0},
                {"12a", SG_ERR_INVALID, 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t v = 12345;
                sg_err_t err = sg_version_parse(cases[i].s, strlen(cases[i].s), &v);
                ck_assert_msg(err == cases[i].err, "\"%s\": got %d", cases[i].s, err);
                if (err == SG_OK)
                        ck_assert_uint_eq(v, cases[i].v);
                else
                        ck_assert_uint_eq(v, 12345); /* untouched on error */
        }
        /* Length, not NUL, ends the text. */
        {
                uint64_t v = 0;
                ck_assert_int_eq(sg_version_parse("123", 2, &v), SG_OK);
                ck_assert_uint_eq(v, 12);
                ck_assert_int_eq(sg_version_parse("1\0002", 3, &v), SG_ERR_INVALID);
                ck_assert_int_eq(sg_version_parse(NULL, 0, &v), SG_ERR_INVALID);
        }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Field contents: size, UTF-8, key                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_field_sizes)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        size_t big = 1048576;
        char *id = malloc(big + 1);

        ck_assert_ptr_nonnull(id);
        memset(id, 'a', big);
        id[big] = '\0';
        cfg_ce(&t);

        rec_binary(&r, "k", id, "src", "t", "1");
        expect_invalid(&t, &r, "id is 1048576 bytes, over max_field_bytes 1024", NULL);
        ck_assert_ptr_null(strstr(errbuf, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));

        id[1025] = '\0';
        rec_binary(&r, "k", id, "src", "t", "1");
        expect_invalid(&t, &r, "id is 1025 bytes", NULL);

        id[1024] = '\0';
        rec_binary(&r, "k", id, "src", "t", "1");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(strlen(env.id), 1024);

        /* Long aggregate (key), type and source are bounded too. */
        memset(id, 'a', big);
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.key = id;
        r.rec.key_len = 1025;
        expect_invalid(&t, &r, "aggregate id is 1025 bytes", "record key");
        id[2000] = '\0';
        rec_binary(&r, "k", "e", "src", id, "1");
        expect_invalid(&t, &r, "type is 2000 bytes", "ce_type header");
        rec_binary(&r, "k", "e", id, "t", "1");
        expect_invalid(&t, &r, "scope[0] is 2000 bytes", "ce_source header");

        /* A huge version text is quoted, not copied. */
        rec_binary(&r, "k", "e", "src", "t", id);
        expect_invalid(&t, &r, "version \"aaaa", "...");

        /* A long id and source spill the key buffer to the heap. */
        t.tc.max_field_bytes = 4096;
        id[2000] = 'a';
        id[3000] = '\0';
        rec_binary(&r, "k", id, id, "t", "1");
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(strlen(env.id), 3000);
        {
                const char *parts[] = {"orders", id, id};
                unsigned char *buf = malloc(3 * 3100), *o = buf;
                unsigned char want[SG_HASH_LEN];
                for (int i = 0; i < 3; i++) {
                        size_t len = strlen(parts[i]);
                        *o++ = (unsigned char)(len >> 24);
                        *o++ = (unsigned char)(len >> 16);
                        *o++ = (unsigned char)(len >> 8);
                        *o++ = (unsigned char)len;
                        memcpy(o, parts[i], len);
                        o += len;
                }
                sg_sha256(buf, (size_t)(o - buf), want);
                ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);
                free(buf);
        }
        sg_envelope_clear(&env);
        free(id);
}
END_TEST

START_TEST(test_field_utf8)
{
        static const char *const bad[] = {
                "\xc0\xaf",         /* overlong '/' */
                "\xe0\x80\xaf",     /* overlong, 3 bytes */
                "\xed\xa0\x80",     /* surrogate U+D800 */
                "ab\xe2\x82",       /* truncated */
                "\xf4\x90\x80\x80", /* above U+10FFFF */
                "\xff",
        };
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                rec_binary(&r, "k", bad[i], "src", "t", "1");
                expect_invalid(&t, &r, "id", "not valid UTF-8");
                ck_assert_ptr_nonnull(strstr(errbuf, "ce_id header"));
                ck_assert_ptr_nonnull(strstr(errbuf, "\\x")); /* escaped */
                rec_binary(&r, "k", "e", bad[i], "t", "1");
                expect_invalid(&t, &r, "scope[0]", "ce_source header");
                ck_assert_ptr_nonnull(strstr(errbuf, "UTF-8"));
                rec_binary(&r, bad[i], "e", "src", "t", "1");
                expect_invalid(&t, &r, "aggregate id", "not valid UTF-8");
                rec_binary(&r, "k", "e", "src", bad[i], "1");
                expect_invalid(&t, &r, "type", "not valid UTF-8");
        }
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.hdrs[1].value = "a\0b";
        r.hdrs[1].value_len = 3;
        expect_invalid(&t, &r, "id", "NUL");

        /* Valid multi-byte UTF-8 passes. */
        rec_binary(&r, "Bestellung-\xc3\xa4", "\xe2\x82\xac-1", "/s\xf0\x9f\x98\x80",
                   "t", "1");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "\xe2\x82\xac-1");
        ck_assert_str_eq(env.aggregate, "Bestellung-\xc3\xa4");
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_aggregate_key_missing)
{
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        rec_binary(&r, NULL, "e", "src", "t", "1");
        expect_invalid(&t, &r, "record key (aggregate id) is missing", NULL);
        rec_binary(&r, "", "e", "src", "t", "1");
        expect_invalid(&t, &r, "record key (aggregate id) is missing", NULL);
}
END_TEST

START_TEST(test_utf8_table)
{
        static const struct {
                const char *s;
                size_t len;
                bool ok;
        } cases[] = {
                {"", 0, true},
                {"abc", 3, true},
                {"\x00", 1, true},
                {"\x7f", 1, true},
                {"\xc2\x80", 2, true},          /* U+0080 */
                {"\xc3\xa9", 2, true},          /* é */
                {"\xdf\xbf", 2, true},          /* U+07FF */
                {"\xe0\xa0\x80", 3, true},      /* U+0800 */
                {"\xe2\x82\xac", 3, true},      /* € */
                {"\xed\x9f\xbf", 3, true},      /* U+D7FF */
                {"\xee\x80\x80", 3, true},      /* U+E000 */
                {"\xef\xbf\xbf", 3, true},      /* U+FFFF */
                {"\xf0\x90\x80\x80", 4, true},  /* U+10000 */
                {"\xf0\x9f\x98\x80", 4, true},  /* emoji */
                {"\xf4\x8f\xbf\xbf", 4, true},  /* U+10FFFF */
                {"\x80", 1, false},             /* stray continuation */
                {"\xbf", 1, false},
                {"\xc0\x80", 2, false},         /* overlong NUL */
                {"\xc0\xaf", 2, false},         /* overlong '/' */
                {"\xc1\xbf", 2, false},
                {"\xe0\x80\xaf", 3, false},     /* overlong */
                {"\xe0\x9f\xbf", 3, false},     /* overlong U+07FF */
                {"\xf0\x80\x80\xaf", 4, false}, /* overlong */
                {"\xf0\x8f\xbf\xbf", 4, false}, /* overlong U+FFFF */
                {"\xed\xa0\x80", 3, false},     /* U+D800 */
                {"\xed\xbf\xbf", 3, false},     /* U+DFFF */
                {"\xf4\x90\x80\x80", 4, false}, /* U+110000 */
                {"\xf5\x80\x80\x80", 4, false},
                {"\xf8\x88\x80\x80\x80", 5, false},
                {"\xfe", 1, false},
                {"\xff", 1, false},
                {"\xc3", 1, false},             /* truncated */
                {"\xe2\x82", 2, false},
                {"\xf0\x9f\x98", 3, false},
                {"\xc3\x28", 2, false},         /* bad continuation */
                {"\xe2\x28\xa1", 3, false},
                {"\xe2\x82\x28", 3, false},
                {"\xf0\x9f\x98\x28", 4, false},
                {"a\xc3\xa9z\xe2\x82", 6, false},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(sg_utf8_valid(cases[i].s, cases[i].len) == cases[i].ok,
                              "case %zu: expected %s", i,
                              cases[i].ok ? "valid" : "invalid");
        /* The length bounds the scan: a valid prefix of an invalid buffer. */
        ck_assert(sg_utf8_valid("ab\xff", 2));
        ck_assert(!sg_utf8_valid("ab\xff", 3));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Idempotency key                                                      */
/* ------------------------------------------------------------------ */

static void key_hash_for(const char *topic, const char *s0, const char *s1,
                         const char *id, unsigned char *out)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        t.scope[0] = src(SG_SRC_HEADER, "tenant");
        t.scope[1] = src(SG_SRC_HEADER, "operation");
        t.tc.scope_cnt = 2;
        rec_binary(&r, "k", id, "src", "t", "1");
        r.rec.topic = topic;
        rec_hdr(&r, "tenant", s0);
        rec_hdr(&r, "operation", s1);
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        memcpy(out, env.key_hash, SG_HASH_LEN);
        sg_envelope_clear(&env);
}

START_TEST(test_key_length_prefixed)
{
        unsigned char h1[SG_HASH_LEN], h2[SG_HASH_LEN], h3[SG_HASH_LEN],
                h4[SG_HASH_LEN], h5[SG_HASH_LEN], want[SG_HASH_LEN];
        const char *parts[] = {"orders", "a:b", "c", "id-1"};

        key_hash_for("orders", "a:b", "c", "id-1", h1);
        key_hash_for("orders", "a", "b:c", "id-1", h2);
        key_hash_for("orders", "a:b", "c", "id-1", h3);
        key_hash_for("payments", "a:b", "c", "id-1", h4);
        key_hash_for("orders", "a:b", "c", "id-2", h5);
        ck_assert_mem_ne(h1, h2, SG_HASH_LEN);
        ck_assert_mem_eq(h1, h3, SG_HASH_LEN);
        ck_assert_mem_ne(h1, h4, SG_HASH_LEN);
        ck_assert_mem_ne(h1, h5, SG_HASH_LEN);
        key_hash_of(parts, 4, want);
        ck_assert_mem_eq(h1, want, SG_HASH_LEN);
}
END_TEST

START_TEST(test_key_missing_scope)
{
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        t.scope[1] = src(SG_SRC_HEADER, "tenant");
        t.tc.scope_cnt = 2;
        rec_binary(&r, "k", "e", "src", "t", "1");
        expect_invalid(&t, &r, "scope[1]", "tenant header");
        rec_hdr(&r, "tenant", "");
        expect_invalid(&t, &r, "scope[1]", "empty");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Digest                                                               */
/* ------------------------------------------------------------------ */

static void digest_of(const tcfg_t *t, const char *value, bool ce_header,
                      unsigned char *out)
{
        trec_t r;
        sg_envelope_t env;

        rec_init(&r, "k", value);
        if (ce_header)
                rec_hdr(&r, "content-type", "application/cloudevents+json");
        sg_envelope_init(&env);
        expect_ok(t, &r, &env);
        memcpy(out, env.digest, SG_HASH_LEN);
        sg_envelope_clear(&env);
}

#define EV(time, data)                                                      \
        "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"," \
        "\"sequence\":\"1\",\"time\":\"" time "\",\"data\":" data "}"

START_TEST(test_digest_whole_value)
{
        tcfg_t t;
        unsigned char d1[SG_HASH_LEN], d2[SG_HASH_LEN], d3[SG_HASH_LEN],
                want[SG_HASH_LEN];
        const char *v1 = EV("2024-01-01T00:00:00Z", "{\"a\":1}");
        const char *v2 = EV("2024-01-01T00:00:05Z", "{\"a\":1}");

        cfg_ce(&t);
        digest_of(&t, v1, true, d1);
        digest_of(&t, v1, true, d2);
        digest_of(&t, v2, true, d3);
        ck_assert_mem_eq(d1, d2, SG_HASH_LEN);
        ck_assert_mem_ne(d1, d3, SG_HASH_LEN);
        sg_sha256(v1, strlen(v1), want);
        ck_assert_mem_eq(d1, want, SG_HASH_LEN);
}
END_TEST

START_TEST(test_digest_pointer)
{
        tcfg_t t;
        unsigned char d1[SG_HASH_LEN], d2[SG_HASH_LEN], d3[SG_HASH_LEN],
                d4[SG_HASH_LEN], want[SG_HASH_LEN];
        const char *canon = "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}";

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        digest_of(&t, EV("2024-01-01T00:00:00Z", "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}"),
                  true, d1);
        digest_of(&t, EV("2024-01-01T00:00:05Z", "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}"),
                  true, d2);
        digest_of(&t, EV("2024-01-01T00:00:00Z",
                         "{ \"b\" : [1, {\"d\":3, \"c\":2}], \"a\" : 1 }"),
                  false, d3);
        digest_of(&t, EV("2024-01-01T00:00:00Z", "{\"a\":2,\"b\":[1,{\"c\":2,\"d\":3}]}"),
                  true, d4);
        ck_assert_mem_eq(d1, d2, SG_HASH_LEN); /* time differs only */
        ck_assert_mem_eq(d1, d3, SG_HASH_LEN); /* member order, spaces */
        ck_assert_mem_ne(d1, d4, SG_HASH_LEN); /* data differs */
        sg_sha256(canon, strlen(canon), want);
        ck_assert_mem_eq(d1, want, SG_HASH_LEN);

        /* Array order is significant. */
        digest_of(&t, EV("x", "[1,2]"), true, d1);
        digest_of(&t, EV("x", "[2,1]"), true, d2);
        ck_assert_mem_ne(d1, d2, SG_HASH_LEN);
}
END_TEST

START_TEST(test_digest_pointer_errors)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        rec_init(&r, "k", "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                          "\"type\":\"t\",\"sequence\":\"1\"}");
        expect_invalid(&t, &r, "digest", "/data");

        /* Binary mode: the pointer is into the value, which must be JSON. */
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = "garbage";
        r.rec.value_len = 7;
        expect_invalid(&t, &r, "digest", "not valid JSON");

        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = "{\"data\":{\"y\":1,\"x\":2},\"noise\":3}";
        r.rec.value_len = strlen(r.rec.value);
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        sg_sha256("{\"x\":2,\"y\":1}", 13, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        sg_envelope_clear(&env);
}
END_TEST

/* ------------------------------------------------------------------ */
/* JSON Pointer and canonical JSON                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_json_pointer)
{
        cJSON *doc = cJSON_Parse(
                "{\"a/b\":1,\"m~n\":2,\"arr\":[10,20,30],\"\":5,\" \":7,"
                "\"~1\":9,\"01\":8,\"nested\":{\"x\":{\"y\":\"z\"}},\"dup\":1,"
                "\"dup\":2}");
        cJSON *n;

        ck_assert_ptr_nonnull(doc);
        ck_assert_ptr_eq(sg_json_pointer_get(doc, ""), doc);

#define NUM_AT(ptr, want)                                               \
        do {                                                            \
                n = sg_json_pointer_get(doc, ptr);                      \
                ck_assert_msg(n && cJSON_IsNumber(n) && n->valuedouble == (want), \
                              "pointer %s", ptr);                       \
        } while (0)
#define ABSENT(ptr) ck_assert_msg(!sg_json_pointer_get(doc, ptr), "pointer %s resolved", ptr)

        NUM_AT("/a~1b", 1);
        NUM_AT("/m~0n", 2);
        NUM_AT("/~01", 9); /* ~01 is "~1", not "/" (RFC 6901 §4) */
        NUM_AT("/arr/0", 10);
        NUM_AT("/arr/2", 30);
        NUM_AT("/", 5);
        NUM_AT("/ ", 7);
        NUM_AT("/01", 8); /* object members may look like indices */
        NUM_AT("/dup", 1);
        n = sg_json_pointer_get(doc, "/nested/x/y");
        ck_assert(n && cJSON_IsString(n));
        ck_assert_str_eq(n->valuestring, "z");
        ck_assert_ptr_eq(sg_json_pointer_get(doc, "/nested/x"),
                         cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "nested"), "x"));

        ABSENT("/arr/3");
        ABSENT("/arr/-");
        ABSENT("/arr/01");
        ABSENT("/arr/00");
        ABSENT("/arr/ 1");
        ABSENT("/arr/1a");
        ABSENT("/arr/");
        ABSENT("/arr/-1");
        ABSENT("/arr/18446744073709551616");
        ABSENT("/arr/99999999999999999999999999");
        ABSENT("/a/b");
        ABSENT("/m~2n");
        ABSENT("/m~");
        ABSENT("/~");
        ABSENT("/nested/x/y/z");
        ABSENT("/nested/x/q");
        ABSENT("/missing");
        ABSENT("arr");
        ABSENT("#/arr");
        ck_assert_ptr_null(sg_json_pointer_get(NULL, ""));
        ck_assert_ptr_null(sg_json_pointer_get(doc, NULL));
#undef NUM_AT
#undef ABSENT
        cJSON_Delete(doc);
}
END_TEST

START_TEST(test_json_canonical)
{
        const char *in = "{ \"b\": 1, \"a\": {\"d\": [ {\"z\": 1, \"y\": \"s\"}, 3 ],"
                         " \"c\": null}, \"B\": true, \"\": [] }";
        cJSON *doc = cJSON_Parse(in), *again;
        char *c1, *c2, *orig_before, *orig_after;

        ck_assert_ptr_nonnull(doc);
        orig_before = cJSON_PrintUnformatted(doc);
        c1 = sg_json_canonical(doc);
        ck_assert_ptr_nonnull(c1);
        /* Keys in byte order ("" < "B" < "a" < "b"), arrays untouched. */
        ck_assert_str_eq(c1, "{\"\":[],\"B\":true,\"a\":{\"c\":null,\"d\":"
                             "[{\"y\":\"s\",\"z\":1},3]},\"b\":1}");
        /* Idempotent, and the input is not modified. */
        again = cJSON_Parse(c1);
        c2 = sg_json_canonical(again);
        ck_assert_str_eq(c1, c2);
        orig_after = cJSON_PrintUnformatted(doc);
        ck_assert_str_eq(orig_before, orig_after);
        /* A subtree prints without its member name. */
        free(c2);
        c2 = sg_json_canonical(cJSON_GetObjectItem(doc, "a"));
        ck_assert_str_eq(c2, "{\"c\":null,\"d\":[{\"y\":\"s\",\"z\":1},3]}");
        free(c2);
        c2 = sg_json_canonical(cJSON_GetObjectItem(doc, "b"));
        ck_assert_str_eq(c2, "1");
        ck_assert_ptr_null(sg_json_canonical(NULL));

        free(c1);
        free(c2);
        free(orig_before);
        free(orig_after);
        cJSON_Delete(again);
        cJSON_Delete(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Robustness                                                           */
/* ------------------------------------------------------------------ */

START_TEST(test_deep_nesting)
{
        size_t depth = 200000, n = 0;
        char *v = malloc(2 * depth + 64);
        tcfg_t t;
        trec_t r;

        ck_assert_ptr_nonnull(v);
        for (size_t i = 0; i < depth; i++)
                v[n++] = '[';
        for (size_t i = 0; i < depth; i++)
                v[n++] = ']';
        v[n] = '\0';
        cfg_ce(&t);
        rec_init(&r, "k", v);
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "not valid JSON", NULL);
        rec_init(&r, "k", v); /* lenient probe */
        expect_invalid(&t, &r, "specversion", NULL);
        cfg_json(&t);
        rec_init(&r, "k", v);
        rec_hdr(&r, "tenant", "x");
        expect_invalid(&t, &r, "id", NULL);
        free(v);
}
END_TEST

START_TEST(test_reuse_envelope)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        sg_envelope_init(&env);
        rec_binary(&r, "k1", "e1", "src", "t1", "1");
        expect_ok(&t, &r, &env);
        rec_binary(&r, "k2", "e2", "src", "t2", "2");
        expect_ok(&t, &r, &env); /* previous strings freed (ASan checks) */
        ck_assert_str_eq(env.id, "e2");
        ck_assert_str_eq(env.aggregate, "k2");
        rec_binary(&r, "k3", "e3", "src", "t3", "x");
        ck_assert_int_eq(run(&t, &r, &env), SG_ERR_INVALID);
        ck_assert_ptr_null(env.id);
        ck_assert_ptr_null(env.aggregate);
        sg_envelope_clear(&env);
        sg_envelope_clear(&env); /* twice is harmless */
}
END_TEST

static uint32_t rng_state = 12345;
static uint32_t rng(void)
{
        rng_state = rng_state * 1103515245u + 12345u;
        return rng_state >> 8;
}

START_TEST(test_fuzz_no_crash)
{
        /* Mutations of valid events: every outcome is SG_OK or SG_ERR_INVALID
         * with a short printable detail. ASan/UBSan builds catch the rest. */
        static const char *const seeds[] = {
                EV("t", "{\"a\":[1,2,{\"b\":\"c\"}]}"),
                "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":3}}",
                "null", "", "[]", "\"\\ud800\"", "{\"id\":\"\\u0000\"}",
        };
        tcfg_t cfgs[3];
        char buf[256];
        int ok = 0, invalid = 0;

        cfg_ce(&cfgs[0]);
        cfg_ce(&cfgs[1]);
        cfgs[1].tc.digest_pointer = "/data/a/2";
        cfg_json(&cfgs[2]);
        cfgs[2].tc.digest_pointer = "";

        for (int iter = 0; iter < 20000; iter++) {
                const char *seed = seeds[rng() % (sizeof(seeds) / sizeof(seeds[0]))];
                size_t len = strlen(seed), muts = rng() % 4;
                trec_t r;
                sg_envelope_t env;
                sg_err_t err;

                memcpy(buf, seed, len);
                for (size_t m = 0; m < muts && len > 0; m++) {
                        size_t pos = rng() % len;
                        switch (rng() % 3) {
                        case 0: buf[pos] = (char)rng(); break;
                        case 1: len = pos; break; /* truncate */
                        default: buf[pos] = "{}[]\":,\\0~"[rng() % 11]; break;
                        }
                }
                rec_init(&r, (rng() & 1) ? "k" : NULL, NULL);
                r.rec.value = len || (rng() & 1) ? buf : NULL;
                r.rec.value_len = len;
                if (rng() & 1)
                        rec_hdr(&r, "content-type", "application/cloudevents+json");
                if (rng() % 4 == 0) {
                        rec_hdr(&r, "ce_specversion", "1.0");
                        rec_hdr_n(&r, "ce_id", buf, len < 8 ? len : 8);
                        rec_hdr(&r, "ce_source", "s");
                        rec_hdr(&r, "ce_type", "t");
                        rec_hdr_n(&r, "ce_sequence", buf, len < 3 ? len : 3);
                }
                rec_hdr(&r, "tenant", "x");
                sg_envelope_init(&env);
                err = run(&cfgs[rng() % 3], &r, &env);
                ck_assert_msg(err == SG_OK || err == SG_ERR_INVALID, "err %d", err);
                if (err == SG_OK) {
                        ck_assert_ptr_nonnull(env.id);
                        ok++;
                } else {
                        check_detail(errbuf);
                        invalid++;
                }
                sg_envelope_clear(&env);
        }
        /* The corpus exercises both outcomes. */
        ck_assert_int_gt(ok, 0);
        ck_assert_int_gt(invalid, 0);
}
END_TEST

START_TEST(test_tiny_errstr)
{
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        char small[8];

        cfg_ce(&t);
        rec_binary(&r, "k", "e", "src", "t", "bad");
        sg_envelope_init(&env);
        memset(small, 'X', sizeof(small));
        ck_assert_int_eq(sg_envelope_parse(&t.tc, &r.rec, &env, small, sizeof(small)),
                         SG_ERR_INVALID);
        ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
        ck_assert_int_eq(sg_envelope_parse(&t.tc, &r.rec, &env, NULL, 0),
                         SG_ERR_INVALID);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_sha256_known_answers)
{
        /* FIPS 180-2 appendix B.1 and the empty-input digest: the other tests
         * compare against sg_sha256(), so it is pinned to the standard here. */
        static const unsigned char abc[SG_HASH_LEN] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
        static const unsigned char empty[SG_HASH_LEN] = {
                0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4,
                0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b,
                0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};
        unsigned char out[SG_HASH_LEN];

        sg_sha256("abc", 3, out);
        ck_assert_mem_eq(out, abc, SG_HASH_LEN);
        sg_sha256(NULL, 0, out);
        ck_assert_mem_eq(out, empty, SG_HASH_LEN);
}
END_TEST

static Suite *envelope_suite(void)
{
        Suite *s = suite_create("envelope");
        TCase *tc;

        tc = tcase_create("binary");
        tcase_add_test(tc, test_binary_ok);
        tcase_add_test(tc, test_binary_last_header_wins);
        tcase_add_test(tc, test_binary_value_not_json_is_fine);
        tcase_add_test(tc, test_binary_missing_attributes);
        tcase_add_test(tc, test_binary_specversion);
        suite_add_tcase(s, tc);

        tc = tcase_create("structured");
        tcase_add_test(tc, test_structured_with_content_type);
        tcase_add_test(tc, test_structured_without_content_type);
        tcase_add_test(tc, test_structured_malformed);
        suite_add_tcase(s, tc);

        tc = tcase_create("json");
        tcase_add_test(tc, test_json_mapping_ok);
        tcase_add_test(tc, test_json_unconfigured_fields);
        tcase_add_test(tc, test_json_malformed);
        suite_add_tcase(s, tc);

        tc = tcase_create("version");
        tcase_add_test(tc, test_version_header_table);
        tcase_add_test(tc, test_version_parse_table);
        suite_add_tcase(s, tc);

        tc = tcase_create("fields");
        tcase_add_test(tc, test_field_sizes);
        tcase_add_test(tc, test_field_utf8);
        tcase_add_test(tc, test_aggregate_key_missing);
        tcase_add_test(tc, test_utf8_table);
        suite_add_tcase(s, tc);

        tc = tcase_create("idempotency_key");
        tcase_add_test(tc, test_key_length_prefixed);
        tcase_add_test(tc, test_key_missing_scope);
        suite_add_tcase(s, tc);

        tc = tcase_create("digest");
        tcase_add_test(tc, test_sha256_known_answers);
        tcase_add_test(tc, test_digest_whole_value);
        tcase_add_test(tc, test_digest_pointer);
        tcase_add_test(tc, test_digest_pointer_errors);
        suite_add_tcase(s, tc);

        tc = tcase_create("json_pointer");
        tcase_add_test(tc, test_json_pointer);
        tcase_add_test(tc, test_json_canonical);
        suite_add_tcase(s, tc);

        tc = tcase_create("robustness");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_deep_nesting);
        tcase_add_test(tc, test_reuse_envelope);
        tcase_add_test(tc, test_fuzz_no_crash);
        tcase_add_test(tc, test_tiny_errstr);
        suite_add_tcase(s, tc);

        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(envelope_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
