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
#include "json.h"
#include "testutil.h"

#include <check.h>

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

static sg_field_src_t src(sg_src_kind_t kind, const char *name) {
        sg_field_src_t s = {kind, (char *)name};
        return s;
}

/* CloudEvents defaults: id=ce:id, scope=[ce:source], aggregate=key,
 * version=ce:sequence, type=ce:type, max_field_bytes=1024. */
static void cfg_ce(tcfg_t *t) {
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
static void cfg_json(tcfg_t *t) {
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

static void rec_init(trec_t *r, const char *key, const char *value) {
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

static void rec_hdr_n(trec_t *r, const char *name, const void *value,
                      size_t len) {
        ck_assert_uint_lt(r->rec.header_cnt, 16);
        r->hdrs[r->rec.header_cnt].name = name;
        r->hdrs[r->rec.header_cnt].value = value;
        r->hdrs[r->rec.header_cnt].value_len = len;
        r->rec.header_cnt++;
}

/* Adds header @p name = @p value (NULL: a header with a null value). */
static void rec_hdr(trec_t *r, const char *name, const char *value) {
        rec_hdr_n(r, name, value, value ? strlen(value) : 0);
}

/* A binary-mode CloudEvent; NULL attributes are left out. */
static void rec_binary(trec_t *r, const char *key, const char *id,
                       const char *source, const char *type, const char *seq) {
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

static sg_err_t run(const tcfg_t *t, const trec_t *r, sg_envelope_t *env) {
        memset(errbuf, 'X', sizeof(errbuf)); /* prove it is NUL-terminated */
        return sg_envelope_parse(&t->tc, &r->rec, env, errbuf, sizeof(errbuf));
}

/* Details are short, printable ASCII. */
static void check_detail(const char *d) {
        size_t n = strlen(d);
        ck_assert_uint_gt(n, 0);
        ck_assert_msg(n < 200, "detail too long (%zu): %s", n, d);
        for (size_t i = 0; i < n; i++)
                ck_assert_msg((unsigned char)d[i] >= 0x20 &&
                                      (unsigned char)d[i] < 0x7f,
                              "non-printable byte 0x%02x in detail",
                              (unsigned char)d[i]);
}

/* Parses and expects SG_ERR_INVALID with a detail containing @p a and @p b. */
static void expect_invalid(const tcfg_t *t, const trec_t *r, const char *a,
                           const char *b) {
        sg_envelope_t env;
        sg_err_t err;

        sg_envelope_init(&env);
        err = run(t, r, &env);
        ck_assert_msg(err == SG_ERR_INVALID, "expected SG_ERR_INVALID, got %d",
                      err);
        check_detail(errbuf);
        ck_assert_msg(strstr(errbuf, a), "detail \"%s\" lacks \"%s\"", errbuf,
                      a);
        if (b)
                ck_assert_msg(strstr(errbuf, b), "detail \"%s\" lacks \"%s\"",
                              errbuf, b);
        /* A failed parse keeps only what did parse (semantics §3 row 1),
         * each field whole: the key's id with its hash, non-empty text. */
        ck_assert(env.has_key == (env.id != NULL));
        if (env.id)
                ck_assert(env.id[0] && sg_utf8_valid(env.id, strlen(env.id)));
        if (env.aggregate)
                ck_assert(env.aggregate_len &&
                          env.aggregate_len == strlen(env.aggregate) &&
                          sg_utf8_valid(env.aggregate, env.aggregate_len));
        if (env.type)
                ck_assert(env.type[0]);
        sg_envelope_clear(&env);
}

static void expect_ok(const tcfg_t *t, const trec_t *r, sg_envelope_t *env) {
        sg_err_t err = run(t, r, env);
        ck_assert_msg(err == SG_OK, "expected SG_OK, got %d: %s", err, errbuf);
}

/* SHA-256 of the idempotency key encoding, built independently here. */
static void key_hash_of(const char *const *parts, size_t n,
                        unsigned char *out) {
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

START_TEST(test_binary_ok) {
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

/* The lookup's key (result query, semantics §7) is the parse's key. */
START_TEST(test_key_hash_matches_parse) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN], got[SG_HASH_LEN];
        const char *parts[] = {"orders", "/shop/eu", "evt-1"};

        cfg_ce(&t);
        rec_binary(&r, "order-7", "evt-1", "/shop/eu", "order.paid", "42");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_int_eq(
                sg_envelope_key_hash("orders", parts + 1, 1, "evt-1", got),
                SG_OK);
        ck_assert_mem_eq(got, env.key_hash, SG_HASH_LEN);
        key_hash_of(parts, 3, want);
        ck_assert_mem_eq(got, want, SG_HASH_LEN);
        /* no scope: topic and id only; parts never run together */
        ck_assert_int_eq(sg_envelope_key_hash("orders", NULL, 0, "evt-1", got),
                         SG_OK);
        const char *two[] = {"orders", "evt-1"};
        key_hash_of(two, 2, want);
        ck_assert_mem_eq(got, want, SG_HASH_LEN);
        const char *ab[] = {"a:b"}, *a[] = {"a"};
        unsigned char h1[SG_HASH_LEN], h2[SG_HASH_LEN];
        ck_assert_int_eq(sg_envelope_key_hash("t", ab, 1, "c", h1), SG_OK);
        ck_assert_int_eq(sg_envelope_key_hash("t", a, 1, "b:c", h2), SG_OK);
        ck_assert(memcmp(h1, h2, SG_HASH_LEN) != 0);
        sg_envelope_clear(&env);
}
END_TEST

/* The envelope's hash (the engine's aggregate key) is sg_sha256() of the
 * bytes, before any parse, after one, of the envelope's own field, and
 * leaves the parsed fields as they are. */
START_TEST(test_envelope_sha256_is_sha256) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN], got[SG_HASH_LEN];

        sg_envelope_init(&env);
        ck_assert_int_eq(sg_envelope_sha256(&env, "", 0, got), SG_OK);
        sg_sha256("", 0, want);
        ck_assert_mem_eq(got, want, SG_HASH_LEN);
        cfg_ce(&t);
        rec_binary(&r, "order-7", "evt-1", "/shop/eu", "order.paid", "42");
        expect_ok(&t, &r, &env);
        unsigned char digest[SG_HASH_LEN];
        memcpy(digest, env.digest, SG_HASH_LEN);
        ck_assert_int_eq(
                sg_envelope_sha256(&env, env.aggregate, env.aggregate_len, got),
                SG_OK);
        sg_sha256("order-7", 7, want);
        ck_assert_mem_eq(got, want, SG_HASH_LEN);
        ck_assert_str_eq(env.aggregate, "order-7");
        ck_assert_mem_eq(env.digest, digest, SG_HASH_LEN);
        char big[300];
        memset(big, 'x', sizeof(big)); /* more than one SHA-256 block */
        ck_assert_int_eq(sg_envelope_sha256(&env, big, sizeof(big), got),
                         SG_OK);
        sg_sha256(big, sizeof(big), want);
        ck_assert_mem_eq(got, want, SG_HASH_LEN);
        /* and sg_sha256() is SHA-256: FIPS 180-2's examples ("abc", and
         * the two-block 56-byte message), whichever OpenSSL API computes
         * it */
        static const struct {
                const char *msg, *hex;
        } fips[] = {
                {"abc", "ba7816bf8f01cfea414140de5dae2223"
                        "b00361a396177a9cb410ff61f20015ad"},
                {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                 "248d6a61d20638b8e5c026930c3e6039"
                 "a33ce45964ff2167f6ecedd419db06c1"},
                {"", "e3b0c44298fc1c149afbf4c8996fb924"
                     "27ae41e4649b934ca495991b7852b855"},
        };
        for (size_t i = 0; i < sizeof(fips) / sizeof(fips[0]); i++) {
                char hex[2 * SG_HASH_LEN + 1];
                sg_sha256(fips[i].msg, strlen(fips[i].msg), want);
                for (size_t k = 0; k < SG_HASH_LEN; k++)
                        snprintf(hex + 2 * k, 3, "%02x", want[k]);
                ck_assert_str_eq(hex, fips[i].hex);
                ck_assert_int_eq(sg_envelope_sha256(&env, fips[i].msg,
                                                    strlen(fips[i].msg), got),
                                 SG_OK);
                ck_assert_mem_eq(got, want, SG_HASH_LEN);
        }
        sg_envelope_clear(&env);
}
END_TEST

/* One envelope parsed again and again (as the engine does): each parse's
 * strings are that record's, whether longer or shorter than the last; a
 * failed parse leaves none. */
START_TEST(test_reparse_strings_are_each_records) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        char longid[300], longagg[200];

        memset(longid, 'i', sizeof(longid) - 1);
        longid[sizeof(longid) - 1] = '\0';
        memset(longagg, 'a', sizeof(longagg) - 1);
        longagg[sizeof(longagg) - 1] = '\0';
        cfg_ce(&t);
        sg_envelope_init(&env);
        rec_binary(&r, "A", "e1", "/s", "t1", "1");
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "e1");
        ck_assert_str_eq(env.aggregate, "A");
        ck_assert_str_eq(env.type, "t1");
        rec_binary(&r, longagg, longid, "/s", "order.a-much-longer-type", "2");
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, longid);
        ck_assert_str_eq(env.aggregate, longagg);
        ck_assert_uint_eq(env.aggregate_len, strlen(longagg));
        ck_assert_str_eq(env.type, "order.a-much-longer-type");
        rec_binary(&r, "B", "e3", "/s", "t", "x"); /* malformed version */
        ck_assert_int_eq(run(&t, &r, &env), SG_ERR_INVALID);
        /* what parsed is this record's (semantics §3 row 1) */
        ck_assert_str_eq(env.id, "e3");
        ck_assert(env.has_key && env.has_digest && !env.has_version);
        ck_assert_str_eq(env.aggregate, "B");
        ck_assert_str_eq(env.type, "t");
        rec_binary(&r, "B", "e3", "/s", "t", "3");
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "e3");
        ck_assert_str_eq(env.aggregate, "B");
        ck_assert_uint_eq(env.aggregate_len, 1);
        ck_assert_str_eq(env.type, "t");
        sg_envelope_clear(&env);
        ck_assert_ptr_null(env.id);
}
END_TEST

START_TEST(test_binary_last_header_wins) {
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

START_TEST(test_binary_value_not_json_is_fine) {
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

START_TEST(test_binary_missing_attributes) {
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

START_TEST(test_binary_specversion) {
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

START_TEST(test_structured_with_content_type) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];
        const char *parts[] = {"orders", "/shop/us", "evt-9"};

        cfg_ce(&t);
        rec_init(&r, "order-9", ce_event);
        rec_hdr(&r, "content-type",
                "application/cloudevents+json; charset=UTF-8");
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

/* The same lookups whether a record's headers fit the parse's index of
 * them or are scanned (more than it holds): the last header of a name
 * wins, a header without a name is never matched, the content-type name
 * is matched case-insensitively. */
START_TEST(test_headers_indexed_or_scanned) {
        tcfg_t t;
        sg_envelope_t env;
        static const char *const pad[] = {"x-a", "x-b", "x-c", "x-d", "x-e",
                                          "x-f", "x-g", "x-h", "x-i", "x-j",
                                          "x-k", "x-l", "x-m", "x-n", "x-o"};

        cfg_ce(&t);
        sg_envelope_init(&env);
        for (size_t npad = 0; npad <= 15; npad += 15) {
                sg_header_t h[32];
                sg_record_t rec = {.topic = "orders",
                                   .partition = 3,
                                   .offset = 42,
                                   .timestamp_ms = -1,
                                   .key = "k",
                                   .key_len = 1,
                                   .value = "{\"amount\":10}",
                                   .value_len = 13,
                                   .headers = h};
                size_t n = 0;
                for (size_t i = 0; i < npad; i++)
                        h[n++] = (sg_header_t){pad[i], "v", 1};
                h[n++] = (sg_header_t){"ce_specversion", "1.0", 3};
                h[n++] = (sg_header_t){"ce_id", "evt-1", 5};
                h[n++] = (sg_header_t){"ce_source", "src", 3};
                h[n++] = (sg_header_t){"ce_type", "t1", 2};
                h[n++] = (sg_header_t){"ce_sequence", "1", 1};
                h[n++] = (sg_header_t){NULL, "9", 1};
                h[n++] = (sg_header_t){"ce_sequenc", "8", 1};
                h[n++] = (sg_header_t){"ce_sequence", "2", 1};
                h[n++] = (sg_header_t){"ce_type", "t2", 2};
                rec.header_cnt = n;
                memset(errbuf, 'X', sizeof(errbuf));
                ck_assert_int_eq(sg_envelope_parse(&t.tc, &rec, &env, errbuf,
                                                   sizeof(errbuf)),
                                 SG_OK);
                ck_assert_uint_eq(env.version, 2);
                ck_assert_str_eq(env.type, "t2");
                ck_assert_str_eq(env.id, "evt-1");

                /* structured by its Content-Type header, ce_id ignored */
                n = 0;
                for (size_t i = 0; i < npad; i++)
                        h[n++] = (sg_header_t){pad[i], "v", 1};
                h[n++] = (sg_header_t){"ce_id", "from-header", 11};
                h[n++] = (sg_header_t){"Content-Type",
                                       "application/cloudevents+json", 28};
                rec.header_cnt = n;
                rec.key = "order-9";
                rec.key_len = 7;
                rec.value = ce_event;
                rec.value_len = strlen(ce_event);
                ck_assert_int_eq(sg_envelope_parse(&t.tc, &rec, &env, errbuf,
                                                   sizeof(errbuf)),
                                 SG_OK);
                ck_assert_str_eq(env.id, "evt-9");
        }
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_structured_without_content_type) {
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

START_TEST(test_structured_malformed) {
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

        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\"}");
        expect_invalid(&t, &r, "type", "member");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "source", "member");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"source\":\"s\",\"type\":\"t\"}");
        expect_invalid(&t, &r, "id", "member");
        rec_init(&r, "k", "{\"id\":\"e\",\"source\":\"s\",\"type\":\"t\"}");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "specversion", "member");
        rec_init(&r, "k",
                 "{\"specversion\":\"0.3\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\"}");
        expect_invalid(&t, &r, "specversion", "\"0.3\"");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":7,\"source\":\"s\",\"type\":"
                 "\"t\"}");
        expect_invalid(&t, &r, "id", "JSON number, not a string");
        rec_init(&r, "k",
                 "{\"specversion\":1.0,\"id\":\"e\",\"source\":\"s\",\"type\":"
                 "\"t\"}");
        expect_invalid(&t, &r, "specversion", "JSON number");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"\"}");
        expect_invalid(&t, &r, "type", "empty");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\"}");
        expect_invalid(&t, &r, "version", "sequence member");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":true}");
        expect_invalid(&t, &r, "version", "JSON boolean");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":1.5}");
        expect_invalid(&t, &r, "version", "1.5");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":-1}");
        expect_invalid(&t, &r, "version", "-1");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":1e300}");
        expect_invalid(&t, &r, "version", "2^53");
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":\"1\"} trailing");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "not valid JSON", NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Plain JSON mappings                                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_json_mapping_ok) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];
        const char *parts[] = {"orders", "acme", "p-1"};

        cfg_json(&t);
        rec_init(&r, "acct-1",
                 "{\"id\":\"p-1\",\"type\":\"debit\",\"meta\":{\"version\":12}"
                 "}");
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
        rec_init(&r, NULL,
                 "{\"id\":\"p-2\",\"type\":\"t\",\"order_id\":\"o\",\"v\":"
                 "\"77\"}");
        rec_hdr(&r, "tenant", "acme");
        expect_ok(&t, &r, &env);
        ck_assert_uint_eq(env.version, 77);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_json_unconfigured_fields) {
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

START_TEST(test_json_malformed) {
        tcfg_t t;
        trec_t r;

        cfg_json(&t);
        rec_init(&r, "k", "not json");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "not valid JSON");

        rec_init(&r, "k",
                 "{\"id\":\"p-1\",\"type\":\"t\",\"meta\":{\"version\":1}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "not valid JSON", "byte");

        rec_init(&r, "k", "");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "empty");

        rec_init(&r, "k", "null");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON Pointer /id");

        rec_init(&r, "k",
                 "{\"id\":true,\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON boolean");
        rec_init(&r, "k",
                 "{\"id\":{},\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON object");
        rec_init(&r, "k",
                 "{\"id\":[\"a\"],\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON array");
        rec_init(&r, "k",
                 "{\"id\":1.5,\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "JSON number");
        rec_init(&r, "k",
                 "{\"id\":\"p\",\"type\":null,\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "type", "JSON null");

        static const char *const bad_versions[][2] = {
                {"true", "JSON boolean"},
                {"false", "JSON boolean"},
                {"null", "JSON null"},
                {"{}", "JSON object"},
                {"[1]", "JSON array"},
                {"1.5", "1.5"},
                {"-1", "-1"},
                {"9007199254740994", "2^53"},
                {"\"1e3\"", "\"1e3\""},
                {"\"\"", "\"\""},
        };
        for (size_t i = 0; i < sizeof(bad_versions) / sizeof(bad_versions[0]);
             i++) {
                char v[128];
                snprintf(v, sizeof(v),
                         "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":%"
                         "s}}",
                         bad_versions[i][0]);
                rec_init(&r, "k", v);
                rec_hdr(&r, "tenant", "acme");
                expect_invalid(&t, &r, "version", bad_versions[i][1]);
        }

        /* Missing header scope part. */
        rec_init(&r, "k",
                 "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1}}");
        expect_invalid(&t, &r, "scope[0]", "tenant header");

        /* ce: sources need the CloudEvents format. */
        t.tc.id = src(SG_SRC_CE, "id");
        rec_init(&r, "k",
                 "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1}}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "cloudevents");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Versions                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_version_header_table) {
        static const char *const bad[] = {
                "abc",
                "-1",
                "+1",
                "1e3",
                " 7",
                "7 ",
                "",
                "18446744073709551616",
                "99999999999999999999999",
                "0x10",
                "1.0",
                "\xd9\xa1",
                "1\x00",
        };
        static const struct {
                const char *text;
                uint64_t v;
        } good[] = {
                {"18446744073709551615", UINT64_MAX},
                {"0", 0},
                {"1", 1},
                {"007", 7},
        };
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;

        cfg_ce(&t);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                rec_binary(&r, "k", "e", "src", "t", NULL);
                /* "1\0" is two bytes with an embedded NUL */
                rec_hdr_n(&r, "ce_sequence", bad[i],
                          i == sizeof(bad) / sizeof(bad[0]) - 1
                                  ? 2
                                  : strlen(bad[i]));
                expect_invalid(&t, &r, "version", "ce_sequence header");
        }
        /* The detail quotes the text. */
        rec_binary(&r, "k", "e", "src", "t", "1e3");
        expect_invalid(&t, &r,
                       "version \"1e3\" (ce_sequence header) is not a "
                       "decimal unsigned 64-bit integer",
                       NULL);

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

START_TEST(test_version_parse_table) {
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
                sg_err_t err =
                        sg_version_parse(cases[i].s, strlen(cases[i].s), &v);
                ck_assert_msg(err == cases[i].err, "\"%s\": got %d", cases[i].s,
                              err);
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
                ck_assert_int_eq(sg_version_parse("1\0002", 3, &v),
                                 SG_ERR_INVALID);
                ck_assert_int_eq(sg_version_parse(NULL, 0, &v), SG_ERR_INVALID);
        }
}
END_TEST

/*
 * A JSON number is a version only when its text is a non-negative integer
 * that a double holds exactly: no fraction, no exponent, at most 2^53
 * (semantics §2). Before, the number went through a double, so
 * 9007199254740993 was read as 9007199254740992 and 2.0 or 3e0 passed as
 * integers. Strings keep the strict decimal rule, up to 2^64 - 1.
 */
START_TEST(test_version_json_number_text) {
        static const char *const bad[] = {
                "9007199254740993",
                "9007199254740994",
                "18446744073709551615",
                "18446744073709551616",
                "99999999999999999999",
                "2.0",
                "3e0",
                "1E1",
                "1e+1",
                "0.0",
                "0e0",
                "-0",
                "-1",
                "1.5",
                "10.00",
        };
        static const struct {
                const char *text;
                uint64_t v;
        } good[] = {
                {"0", 0},
                {"1", 1},
                {"42", 42},
                {"9007199254740991", 9007199254740991ULL},
                {"9007199254740992", 9007199254740992ULL},
                {"\"9007199254740993\"", 9007199254740993ULL},
                {"\"18446744073709551615\"", UINT64_MAX},
        };
        tcfg_t t, tj;
        trec_t r;
        sg_envelope_t env;
        char v[256];

        cfg_ce(&t);
        cfg_json(&tj);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                /* a structured CloudEvent's sequence member */
                snprintf(v, sizeof(v),
                         "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":"
                         "\"s\","
                         "\"type\":\"t\",\"sequence\":%s}",
                         bad[i]);
                rec_init(&r, "k", v);
                rec_hdr(&r, "content-type", "application/cloudevents+json");
                expect_invalid(&t, &r, "version", bad[i]);
                ck_assert_msg(strstr(errbuf, "2^53"), "detail \"%s\"", errbuf);
                /* plain JSON by JSON Pointer */
                snprintf(v, sizeof(v),
                         "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":%"
                         "s}}",
                         bad[i]);
                rec_init(&r, "k", v);
                rec_hdr(&r, "tenant", "acme");
                expect_invalid(&tj, &r, "version", bad[i]);
        }
        sg_envelope_init(&env);
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                snprintf(v, sizeof(v),
                         "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":"
                         "\"s\","
                         "\"type\":\"t\",\"sequence\":%s}",
                         good[i].text);
                rec_init(&r, "k", v);
                rec_hdr(&r, "content-type", "application/cloudevents+json");
                expect_ok(&t, &r, &env);
                ck_assert_uint_eq(env.version, good[i].v);
                snprintf(v, sizeof(v),
                         "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":%"
                         "s}}",
                         good[i].text);
                rec_init(&r, "k", v);
                rec_hdr(&r, "tenant", "acme");
                expect_ok(&tj, &r, &env);
                ck_assert_uint_eq(env.version, good[i].v);
        }
        sg_envelope_clear(&env);
}
END_TEST

/*
 * A JSON number read as a string field (a numeric order_id as the aggregate
 * id) is judged by its text too: an integer (no fraction, no exponent) of at
 * most 2^53 in magnitude, taken as written. Before, 9007199254740993 became
 * "9007199254740992" (two orders, one aggregate) and 4711.0 became "4711".
 */
START_TEST(test_text_field_json_number_text) {
        static const char *const bad[] = {
                "9007199254740993",
                "-9007199254740993",
                "4711.0",
                "4.711e3",
                "1e2",
                "0.5",
                "123456789012345678901234567890",
        };
        static const struct {
                const char *text, *want;
        } good[] = {
                {"4711", "4711"},
                {"-12", "-12"},
                {"0", "0"},
                {"-0", "0"},
                {"9007199254740992", "9007199254740992"},
                {"-9007199254740992", "-9007199254740992"},
        };
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        char v[256];

        cfg_json(&t);
        t.tc.aggregate = src(SG_SRC_POINTER, "/order_id");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(
                        v, sizeof(v),
                        "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1},"
                        "\"order_id\":%s}",
                        bad[i]);
                rec_init(&r, NULL, v);
                rec_hdr(&r, "tenant", "acme");
                expect_invalid(&t, &r, "aggregate id",
                               "JSON Pointer /order_id");
        }
        sg_envelope_init(&env);
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                snprintf(
                        v, sizeof(v),
                        "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":1},"
                        "\"order_id\":%s}",
                        good[i].text);
                rec_init(&r, NULL, v);
                rec_hdr(&r, "tenant", "acme");
                expect_ok(&t, &r, &env);
                ck_assert_str_eq(env.aggregate, good[i].want);
        }
        sg_envelope_clear(&env);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Field contents: size, UTF-8, key                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_field_sizes) {
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
        expect_invalid(&t, &r, "id is 1048576 bytes, over max_field_bytes 1024",
                       NULL);
        ck_assert_ptr_null(strstr(errbuf, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"));

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

START_TEST(test_field_utf8) {
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
        rec_binary(&r, "Bestellung-\xc3\xa4", "\xe2\x82\xac-1",
                   "/s\xf0\x9f\x98\x80", "t", "1");
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.id, "\xe2\x82\xac-1");
        ck_assert_str_eq(env.aggregate, "Bestellung-\xc3\xa4");
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_aggregate_key_missing) {
        tcfg_t t;
        trec_t r;

        cfg_ce(&t);
        rec_binary(&r, NULL, "e", "src", "t", "1");
        expect_invalid(&t, &r, "record key (aggregate id) is missing", NULL);
        rec_binary(&r, "", "e", "src", "t", "1");
        expect_invalid(&t, &r, "record key (aggregate id) is missing", NULL);
}
END_TEST

START_TEST(test_utf8_table) {
        static const struct {
                const char *s;
                size_t len;
                bool ok;
        } cases[] = {
                {"", 0, true},
                {"abc", 3, true},
                {"\x00", 1, true},
                {"\x7f", 1, true},
                {"\xc2\x80", 2, true},         /* U+0080 */
                {"\xc3\xa9", 2, true},         /* é */
                {"\xdf\xbf", 2, true},         /* U+07FF */
                {"\xe0\xa0\x80", 3, true},     /* U+0800 */
                {"\xe2\x82\xac", 3, true},     /* € */
                {"\xed\x9f\xbf", 3, true},     /* U+D7FF */
                {"\xee\x80\x80", 3, true},     /* U+E000 */
                {"\xef\xbf\xbf", 3, true},     /* U+FFFF */
                {"\xf0\x90\x80\x80", 4, true}, /* U+10000 */
                {"\xf0\x9f\x98\x80", 4, true}, /* emoji */
                {"\xf4\x8f\xbf\xbf", 4, true}, /* U+10FFFF */
                {"\x80", 1, false},            /* stray continuation */
                {"\xbf", 1, false},
                {"\xc0\x80", 2, false}, /* overlong NUL */
                {"\xc0\xaf", 2, false}, /* overlong '/' */
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
                {"\xc3", 1, false}, /* truncated */
                {"\xe2\x82", 2, false},
                {"\xf0\x9f\x98", 3, false},
                {"\xc3\x28", 2, false}, /* bad continuation */
                {"\xe2\x28\xa1", 3, false},
                {"\xe2\x82\x28", 3, false},
                {"\xf0\x9f\x98\x28", 4, false},
                {"a\xc3\xa9z\xe2\x82", 6, false},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(sg_utf8_valid(cases[i].s, cases[i].len) ==
                                      cases[i].ok,
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
                         const char *id, unsigned char *out) {
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

START_TEST(test_key_length_prefixed) {
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

START_TEST(test_key_missing_scope) {
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
                      unsigned char *out) {
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

#define EV(time, data)                                                         \
        "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\",\"type\":"     \
        "\"t\","                                                               \
        "\"sequence\":\"1\",\"time\":\"" time "\",\"data\":" data "}"

START_TEST(test_digest_whole_value) {
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

START_TEST(test_digest_pointer) {
        tcfg_t t;
        unsigned char d1[SG_HASH_LEN], d2[SG_HASH_LEN], d3[SG_HASH_LEN],
                d4[SG_HASH_LEN], want[SG_HASH_LEN];
        const char *canon = "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}";

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        digest_of(&t,
                  EV("2024-01-01T00:00:00Z",
                     "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}"),
                  true, d1);
        digest_of(&t,
                  EV("2024-01-01T00:00:05Z",
                     "{\"a\":1,\"b\":[1,{\"c\":2,\"d\":3}]}"),
                  true, d2);
        digest_of(&t,
                  EV("2024-01-01T00:00:00Z",
                     "{ \"b\" : [1, {\"d\":3, \"c\":2}], \"a\" : 1 }"),
                  false, d3);
        digest_of(&t,
                  EV("2024-01-01T00:00:00Z",
                     "{\"a\":2,\"b\":[1,{\"c\":2,\"d\":3}]}"),
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

START_TEST(test_digest_pointer_errors) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":\"1\"}");
        expect_invalid(&t, &r, "digest", "/data");
        /* the reason names the configuration key, envelope.digest */
        expect_invalid(&t, &r, "digest", "envelope.digest");

        /* Binary mode: the value is the data, so a pointer into it needs
         * JSON (test_binary_data_pointer has the rest). */
        t.tc.digest_pointer = "/data/a";
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = "garbage";
        r.rec.value_len = 7;
        expect_invalid(&t, &r, "digest", "not valid JSON");

        /* ... and names the data, not a member called "data" in it. */
        t.tc.digest_pointer = "/data";
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = "{\"data\":{\"y\":1,\"x\":2},\"noise\":3}";
        r.rec.value_len = strlen(r.rec.value);
        sg_envelope_init(&env);
        expect_ok(&t, &r, &env);
        {
                static const char c[] =
                        "{\"data\":{\"x\":2,\"y\":1},\"noise\":3}";
                sg_sha256(c, strlen(c), want);
        }
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        sg_envelope_clear(&env);

        /* Binary mode has no "whole event" JSON: only /data names data. */
        t.tc.digest_pointer = "/id";
        expect_invalid(&t, &r, "digest", "only /data");
}
END_TEST

/*
 * A JSON Pointer names a place in the CloudEvent, whichever content mode
 * carries it (semantics §2): in binary mode the record value IS the event's
 * data, so "/data" is the whole value and "/data/x" points into it, and
 * "/ATTR" is the attribute (the ce_ATTR header). Before, "/data" was looked
 * up inside the value, so examples/orders.json (digest "/data")
 * dead-lettered every binary-mode event as malformed.
 */
START_TEST(test_binary_data_pointer) {
        static const char data[] = "{ \"b\": [1, 2.50], \"a\": {\"y\": 1, "
                                   "\"x\": 9007199254740993} }";
        static const char canon[] =
                "{\"a\":{\"x\":9007199254740993,\"y\":1},\"b\":[1,2.50]}";
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN], bin[SG_HASH_LEN];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        sg_envelope_init(&env);
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = data;
        r.rec.value_len = strlen(data);
        expect_ok(&t, &r, &env);
        sg_sha256(canon, strlen(canon), want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        memcpy(bin, env.digest, SG_HASH_LEN);

        /* The same event in structured mode has the same digest. */
        {
                char v[512];
                snprintf(v, sizeof(v),
                         "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":"
                         "\"src\","
                         "\"type\":\"t\",\"sequence\":\"1\",\"time\":\"now\","
                         "\"data\":%s}",
                         data);
                rec_init(&r, "k", v);
                rec_hdr(&r, "content-type", "application/cloudevents+json");
                expect_ok(&t, &r, &env);
                ck_assert_mem_eq(env.digest, bin, SG_HASH_LEN);
        }

        /* "/data/x" points into the value. */
        t.tc.digest_pointer = "/data/a";
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = data;
        r.rec.value_len = strlen(data);
        expect_ok(&t, &r, &env);
        sg_sha256("{\"x\":9007199254740993,\"y\":1}", 28, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        t.tc.digest_pointer = "/data/b/1";
        expect_ok(&t, &r, &env);
        sg_sha256("2.50", 4, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        t.tc.digest_pointer = "/data/missing";
        expect_invalid(&t, &r, "digest", "/data/missing");

        /* Data that is not JSON (Avro, protobuf, text): "/data" is the value's
         * bytes. A canonical form is always JSON, so no such value can share
         * a digest with a JSON one. "/data/x" needs JSON. */
        t.tc.digest_pointer = "/data";
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = "\x00\x01not json";
        r.rec.value_len = 10;
        expect_ok(&t, &r, &env);
        sg_sha256("\x00\x01not json", 10, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        t.tc.digest_pointer = "/data/a";
        expect_invalid(&t, &r, "digest", "not valid JSON");

        /* A null value is an event without data: nothing to digest. */
        t.tc.digest_pointer = "/data";
        rec_binary(&r, "k", "e", "src", "t", "1");
        r.rec.value = NULL;
        r.rec.value_len = 0;
        expect_invalid(&t, &r, "digest", "no data");

        /* Field sources: "/data/..." in the value, "/ATTR" is ce_ATTR. */
        cfg_ce(&t);
        t.tc.aggregate = src(SG_SRC_POINTER, "/data/order");
        t.tc.id = src(SG_SRC_POINTER, "/id");
        t.tc.version = src(SG_SRC_POINTER, "/sequence");
        t.tc.type = src(SG_SRC_POINTER, "/type");
        t.scope[0] = src(SG_SRC_POINTER, "/subject");
        rec_binary(&r, NULL, "evt-1", "src", "order.paid", "7");
        rec_hdr(&r, "ce_subject", "orders/o-1");
        r.rec.value = "{\"order\":\"o-1\",\"amount\":5}";
        r.rec.value_len = strlen(r.rec.value);
        expect_ok(&t, &r, &env);
        ck_assert_str_eq(env.aggregate, "o-1");
        ck_assert_str_eq(env.id, "evt-1");
        ck_assert_uint_eq(env.version, 7);
        ck_assert_str_eq(env.type, "order.paid");
        {
                const char *parts[] = {"orders", "orders/o-1", "evt-1"};
                key_hash_of(parts, 3, want);
                ck_assert_mem_eq(env.key_hash, want, SG_HASH_LEN);
        }
        /* An attribute has no members; a missing attribute is missing. */
        t.tc.type = src(SG_SRC_POINTER, "/type/x");
        expect_invalid(&t, &r, "type", "missing");
        t.tc.type = src(SG_SRC_POINTER, "/nosuchattr");
        expect_invalid(&t, &r, "type", "ce_nosuchattr header");
        sg_envelope_clear(&env);
}
END_TEST

/*
 * examples/orders.json (digest "/data") reads a binary-mode CloudEvent: the
 * example a user copies must not dead-letter every event.
 */
START_TEST(test_example_orders_binary) {
        const char *root = getenv("SG_SOURCE_ROOT");
        char path[4096], err[512];
        sg_config_t *conf = NULL;
        const sg_topic_config_t *tc;
        trec_t r;
        sg_envelope_t env;
        unsigned char want[SG_HASH_LEN];

        ck_assert_msg(root != NULL, "SG_SOURCE_ROOT must name the repository");
        snprintf(path, sizeof(path), "%s/examples/orders.json", root);
        ck_assert_msg(sg_config_load(path, &conf, err, sizeof(err)) == SG_OK,
                      "%s: %s", path, err);
        tc = sg_config_topic(conf, "orders");
        ck_assert_ptr_nonnull(tc);
        ck_assert_str_eq(tc->digest_pointer, "/data");
        rec_binary(&r, "order-1", "evt-1", "/shop", "order.created", "1");
        sg_envelope_init(&env);
        ck_assert_msg(sg_envelope_parse(tc, &r.rec, &env, errbuf,
                                        sizeof(errbuf)) == SG_OK,
                      "binary event refused: %s", errbuf);
        sg_sha256("{\"amount\":10}", 13, want);
        ck_assert_mem_eq(env.digest, want, SG_HASH_LEN);
        sg_envelope_clear(&env);
        sg_config_destroy(conf);
}
END_TEST

/*
 * The canonical form keeps every value exactly (semantics §2): payloads
 * whose numbers differ in any digit, in their fraction or exponent text, or
 * only beyond what a double holds get different digests; whitespace and
 * member order do not count. Before numbers kept their text, 2^53 + 1 was
 * read as 2^53 and a different payload was dropped as a duplicate.
 */
START_TEST(test_digest_keeps_number_text) {
        static const char *const differ[][2] = {
                {"9007199254740993", "9007199254740992"}, /* beyond 2^53 */
                {"18446744073709551617", "18446744073709551616"},
                {"0.10000000000000000001", "0.1"}, /* beyond 17 digits */
                {"3.14159265358979323846", "3.14159265358979323847"},
                {"1.0", "1.00"},
                {"1.0", "1"},
                {"1e2", "100"},
                {"1E2", "1e2"},
                {"1e+2", "1e2"},
                {"-0", "0"},
                {"1e400", "1e401"}, /* both overflow a double */
                {"-1e400", "1e400"},
        };
        tcfg_t t;
        unsigned char d1[SG_HASH_LEN], d2[SG_HASH_LEN], want[SG_HASH_LEN];
        char v[256], c[128];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
                for (int k = 0; k < 2; k++) {
                        snprintf(v, sizeof(v),
                                 "{\"specversion\":\"1.0\",\"id\":\"e\","
                                 "\"source\":\"s\",\"type\":\"t\",\"sequence\":"
                                 "\"1\","
                                 "\"data\":{\"amount\":%s}}",
                                 differ[i][k]);
                        digest_of(&t, v, true, k ? d2 : d1);
                        /* the digest is of the number text as written */
                        snprintf(c, sizeof(c), "{\"amount\":%s}", differ[i][k]);
                        sg_sha256(c, strlen(c), want);
                        ck_assert_msg(memcmp(k ? d2 : d1, want, SG_HASH_LEN) ==
                                              0,
                                      "%s: digest is not that of %s",
                                      differ[i][k], c);
                }
                ck_assert_msg(memcmp(d1, d2, SG_HASH_LEN) != 0,
                              "%s and %s got the same digest", differ[i][0],
                              differ[i][1]);
        }

        /* Whitespace and member order only: the same digest, numbers kept. */
        digest_of(
                &t,
                EV("x",
                   "{ \"b\" : [ 1.50 , 2e-3 ] ,\n\t\"a\" : 9007199254740993 }"),
                true, d1);
        digest_of(&t, EV("y", "{\"a\":9007199254740993,\"b\":[1.50,2e-3]}"),
                  true, d2);
        ck_assert_mem_eq(d1, d2, SG_HASH_LEN);
        {
                static const char c2[] =
                        "{\"a\":9007199254740993,\"b\":[1.50,2e-3]}";
                sg_sha256(c2, strlen(c2), want);
        }
        ck_assert_mem_eq(d1, want, SG_HASH_LEN);

        /* A scalar subtree is its own text. */
        t.tc.digest_pointer = "/data/n";
        digest_of(&t, EV("x", "{\"n\":123456789012345678901234567890}"), true,
                  d1);
        sg_sha256("123456789012345678901234567890", 30, want);
        ck_assert_mem_eq(d1, want, SG_HASH_LEN);
}
END_TEST

/*
 * Equal strings get one escape form (semantics §2, docs/configuration.md
 * "Canonical JSON"): escapes are decoded, and written back the way RFC 8785
 * §3.2.2.2 writes them: \" \\ \b \f \n \r \t, \u00xx for the other control
 * characters, every other character as its UTF-8 bytes.
 */
START_TEST(test_digest_string_forms) {
        static const struct {
                const char *a, *b, *canon;
        } same[] = {
                {"\"\\u0041\"", "\"A\"", "\"A\""},
                {"\"\\/\"", "\"/\"", "\"/\""},
                {"\"\\u00e9\"", "\"\xc3\xa9\"", "\"\xc3\xa9\""},
                {"\"\\u00E9\"", "\"\\u00e9\"", "\"\xc3\xa9\""},
                {"\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"",
                 "\"\xf0\x9f\x98\x80\""},
                {"\"\\u000a\"", "\"\\n\"", "\"\\n\""},
                {"\"\\u0008\\u0009\\u000c\\u000d\"", "\"\\b\\t\\f\\r\"",
                 "\"\\b\\t\\f\\r\""},
                {"\"\\u001f\"", "\"\\u001F\"", "\"\\u001f\""},
                {"\"\\u0022\\u005c\"", "\"\\\"\\\\\"", "\"\\\"\\\\\""},
                {"\"\\u007f\"", "\"\x7f\"", "\"\x7f\""},
                {"\"\\u2028\"", "\"\xe2\x80\xa8\"", "\"\xe2\x80\xa8\""},
                {"{\"\\u0061\":1}", "{\"a\":1}", "{\"a\":1}"},
        };
        tcfg_t t;
        unsigned char d1[SG_HASH_LEN], d2[SG_HASH_LEN], want[SG_HASH_LEN];
        char v[256];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
                snprintf(v, sizeof(v), EV("x", "%s"), same[i].a);
                digest_of(&t, v, true, d1);
                snprintf(v, sizeof(v), EV("x", "%s"), same[i].b);
                digest_of(&t, v, true, d2);
                sg_sha256(same[i].canon, strlen(same[i].canon), want);
                ck_assert_msg(memcmp(d1, want, SG_HASH_LEN) == 0,
                              "case %zu: %s is not digested as %s", i,
                              same[i].a, same[i].canon);
                ck_assert_msg(memcmp(d2, want, SG_HASH_LEN) == 0,
                              "case %zu: %s is not digested as %s", i,
                              same[i].b, same[i].canon);
        }
}
END_TEST

/*
 * JSON that has no single reading is malformed wherever seqgate parses it:
 * a member name twice in one object (which one does a consumer see?), a
 * lone UTF-16 surrogate escape, bytes that are not UTF-8 (RFC 8259 §8.1).
 * Before, duplicates were kept in both orders (two digests for one value,
 * and the first "sequence" read while a consumer may read the last).
 */
START_TEST(test_json_ambiguous_refused) {
        static const struct {
                const char *data, *why;
        } bad[] = {
                {"{\"a\":1,\"a\":2}", "duplicate member name \"a\""},
                {"{\"x\":{\"a\":1,\"b\":2,\"a\":1}}",
                 "duplicate member name \"a\""},
                {"[{\"a\\u0062\":1,\"ab\":2}]", "duplicate member name \"ab\""},
                {"\"\\ud800\"", "surrogate"},
                {"\"\\udc00\"", "surrogate"},
                {"\"\\ud800\\u0041\"", "surrogate"},
                {"\"\\ud800x\"", "surrogate"},
                {"\"\\ude00\\ud83d\"", "surrogate"},
                {"\"\xc0\xaf\"", "UTF"},
                {"\"\xed\xa0\x80\"", "UTF"},
                {"\"\xff\"", "UTF"},
        };
        tcfg_t t;
        trec_t r;
        char v[256];

        cfg_ce(&t);
        t.tc.digest_pointer = "/data";
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(v, sizeof(v), EV("x", "%s"), bad[i].data);
                rec_init(&r, "k", v);
                rec_hdr(&r, "content-type", "application/cloudevents+json");
                expect_invalid(&t, &r, "not valid JSON", bad[i].why);
        }
        /* A duplicate envelope member: seqgate must not read one sequence
         * while a consumer reads the other. */
        cfg_ce(&t);
        rec_init(&r, "k",
                 "{\"specversion\":\"1.0\",\"id\":\"e\",\"source\":\"s\","
                 "\"type\":\"t\",\"sequence\":\"1\",\"sequence\":\"2\"}");
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "duplicate member name \"sequence\"", NULL);
}
END_TEST

/*
 * A JSON string is taken with its length: "a\u0000b" is three bytes with a
 * NUL, refused for an id like a NUL in a header. Before, the id was cut at
 * the NUL ("a"), so "a\u0000b" and "a\u0000c" were one idempotency key.
 */
START_TEST(test_json_string_with_nul) {
        tcfg_t t;
        trec_t r;

        cfg_json(&t);
        rec_init(&r, "k",
                 "{\"id\":\"a\\u0000b\",\"type\":\"t\",\"meta\":{\"version\":1}"
                 "}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "id", "NUL");
        rec_init(&r, "k",
                 "{\"id\":\"p\",\"type\":\"t\\u0000\",\"meta\":{\"version\":1}"
                 "}");
        rec_hdr(&r, "tenant", "acme");
        expect_invalid(&t, &r, "type", "NUL");
}
END_TEST

/* ------------------------------------------------------------------ */
/* JSON Pointer and canonical JSON                                      */
/* ------------------------------------------------------------------ */

/* Canonical text of @p pointer in @p json, or NULL when refused. */
static char *canon_at(const char *json, const char *pointer) {
        char *out = NULL, err[256];
        size_t len = 0;
        sg_err_t e = sg_json_canonicalize(json, strlen(json), pointer, &out,
                                          &len, err, sizeof(err));

        if (e != SG_OK) {
                ck_assert_int_eq(e, SG_ERR_INVALID);
                ck_assert_ptr_null(out);
                check_detail(err);
                return NULL;
        }
        ck_assert_uint_eq(strlen(out), len);
        return out;
}

START_TEST(test_json_pointer) {
        static const char doc[] =
                "{\"a/b\":1,\"m~n\":2,\"arr\":[10,20,30],\"\":5,\" \":7,"
                "\"~1\":9,\"01\":8,\"nested\":{\"x\":{\"y\":\"z\"}},"
                "\"n\\u0000ul\":6}";
        static const struct {
                const char *ptr, *want;
        } at[] = {
                {"/a~1b", "1"},
                {"/m~0n", "2"},
                {"/~01", "9"}, /* ~01 is "~1", not "/" (RFC 6901 §4) */
                {"/arr/0", "10"},
                {"/arr/2", "30"},
                {"/", "5"},
                {"/ ", "7"},
                {"/01", "8"}, /* object members may look like indices */
                {"/nested/x/y", "\"z\""},
                {"/nested/x", "{\"y\":\"z\"}"},
                {"/arr", "[10,20,30]"},
        };
        static const char *const absent[] = {
                "/arr/3",
                "/arr/-",
                "/arr/01",
                "/arr/00",
                "/arr/ 1",
                "/arr/1a",
                "/arr/",
                "/arr/-1",
                "/arr/18446744073709551616",
                "/arr/99999999999999999999999999",
                "/a/b",
                "/m~2n",
                "/m~",
                "/~",
                "/nested/x/y/z",
                "/nested/x/q",
                "/missing",
                "arr",
                "#/arr",
                "/nul", /* "n\u0000ul" is 4 bytes; no C pointer names it */
        };
        char *c;

        for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
                c = canon_at(doc, at[i].ptr);
                ck_assert_msg(c && strcmp(c, at[i].want) == 0, "pointer %s: %s",
                              at[i].ptr, c ? c : "(refused)");
                free(c);
        }
        for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
                c = canon_at(doc, absent[i]);
                ck_assert_msg(!c, "pointer %s resolved to %s", absent[i], c);
        }
        c = canon_at(doc, "");
        ck_assert_ptr_nonnull(c);
        ck_assert_str_eq(
                c,
                "{\"\":5,\" \":7,\"01\":8,\"a/b\":1,\"arr\":[10,20,30],"
                "\"m~n\":2,\"n\\u0000ul\":6,\"nested\":{\"x\":{\"y\":\"z\"}},"
                "\"~1\":9}");
        free(c);
}
END_TEST

START_TEST(test_json_canonical) {
        static const char in[] =
                " { \"b\": 1, \"a\": {\"d\": [ {\"z\": 1, \"y\": \"s\"}, 3 ],"
                " \"c\": null}, \"B\": true, \"\": [], \"e\": {}, \"f\": false "
                "} ";
        static const char want[] = "{\"\":[],\"B\":true,\"a\":{\"c\":null,"
                                   "\"d\":[{\"y\":\"s\",\"z\":1},3]},"
                                   "\"b\":1,\"e\":{},\"f\":false}";
        char *c1, *c2;

        /* Keys in byte order ("" < "B" < "a" < "b"), arrays untouched. */
        c1 = canon_at(in, "");
        ck_assert_ptr_nonnull(c1);
        ck_assert_str_eq(c1, want);
        /* Idempotent. */
        c2 = canon_at(c1, "");
        ck_assert_str_eq(c1, c2);
        free(c2);
        /* A subtree prints without its member name. */
        c2 = canon_at(in, "/a");
        ck_assert_str_eq(c2, "{\"c\":null,\"d\":[{\"y\":\"s\",\"z\":1},3]}");
        free(c2);
        c2 = canon_at(in, "/b");
        ck_assert_str_eq(c2, "1");
        free(c2);
        free(c1);

        /* Names sort by UTF-8 bytes: U+00E9 (c3 a9) < U+FF21 (ef bc a1) <
         * U+1F600 (f0 9f 98 80), also when escaped; RFC 8785's UTF-16
         * order would put U+1F600 (d83d de00) before U+FF21. */
        c1 = canon_at(
                "{\"\\ud83d\\ude00\":3,\"\\uff21\":2,\"\xc3\xa9\":1,\"z\":0}",
                "");
        ck_assert_str_eq(c1, "{\"z\":0,\"\xc3\xa9\":1,\"\xef\xbc\xa1\":2,"
                             "\"\xf0\x9f\x98\x80\":3}");
        free(c1);
        /* Shorter names first when one is a prefix of the other. */
        c1 = canon_at("{\"ab\":1,\"a\":2,\"a\\u0000\":3}", "");
        ck_assert_str_eq(c1, "{\"a\":2,\"a\\u0000\":3,\"ab\":1}");
        free(c1);
        /* Scalars at the top, numbers as written. */
        c1 = canon_at(" -0.0e-0 ", "");
        ck_assert_str_eq(c1, "-0.0e-0");
        free(c1);
        c1 = canon_at("\"\\u0000\\u001f\\u0020\"", "");
        ck_assert_str_eq(c1, "\"\\u0000\\u001f \"");
        free(c1);
        /* Large input: many members (the sort is not the insertion sort). */
        {
                char big[4096];
                size_t o = 0;
                big[o++] = '{';
                for (int i = 99; i >= 0; i--)
                        o += (size_t)snprintf(big + o, sizeof(big) - o,
                                              "%s\"k%02d\":%d",
                                              i == 99 ? "" : ",", i, i);
                big[o++] = '}';
                big[o] = '\0';
                c1 = canon_at(big, "");
                ck_assert_ptr_nonnull(c1);
                ck_assert(strncmp(c1, "{\"k00\":0,\"k01\":1,", 17) == 0);
                ck_assert(strstr(c1, "\"k98\":98,\"k99\":99}"));
                free(c1);
                /* and a duplicate among them */
                memcpy(big + 2, "k50", 3); /* "k99" becomes "k50" */
                ck_assert_ptr_null(canon_at(big, ""));
        }
}
END_TEST

/* Empty containers, first in a fresh document (fuzz_envelope found
 * cb_end_map offsetting a NULL member-order array by zero: UB). */
START_TEST(test_json_empty_containers) {
        static const char *const same[] = {"{}", "[]", "[{}]", "{\"a\":{}}",
                                           "[[],{},[{}]]"};

        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
                char *c = canon_at(same[i], "");
                ck_assert_msg(c && strcmp(c, same[i]) == 0, "%s: %s", same[i],
                              c ? c : "(refused)");
                free(c);
        }
}
END_TEST

/* What sg_json_parse refuses: not RFC 8259, and the ambiguous forms. */
START_TEST(test_json_strict) {
        static const char *const bad[] = {
                "",
                " ",
                "{",
                "[1,]",
                "{\"a\":1,}",
                "01",
                "1.",
                ".5",
                "-",
                "1e",
                "+1",
                "NaN",
                "Infinity",
                "'a'",
                "{a:1}",
                "[1] [2]",
                "1 2",
                "{\"a\":1} x",
                "/* c */ 1",
                "1 // c",
                "\"\t\"",
                "\"\\x41\"",
                "\"\\u12\"",
                "tru",
                "nul",
                "[\"a\" \"b\"]",
                "{\"a\" 1}",
                "{\"a\":1,\"a\":1}",
                "\"\\ud800\"",
                "\"\xff\"",
                "\"\xc3\"",
                "\"\xe0\x80\xaf\"",
        };
        char *c;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                c = canon_at(bad[i], "");
                ck_assert_msg(!c, "case %zu accepted as %s", i, c);
        }
        /* The error names the byte. */
        {
                char *out, err[256];
                ck_assert_int_eq(sg_json_canonicalize("[1, 2] x", 8, "", &out,
                                                      NULL, err, sizeof(err)),
                                 SG_ERR_INVALID);
                ck_assert_msg(strstr(err, "error at byte") &&
                                      strstr(err, "of 8"),
                              "%s", err);
                ck_assert_int_eq(
                        sg_json_canonicalize("{\"k\":{\"a\":1,\"a\":2}}", 19,
                                             "", &out, NULL, err, sizeof(err)),
                        SG_ERR_INVALID);
                ck_assert_msg(strstr(err, "duplicate member name \"a\""), "%s",
                              err);
        }
        /* Nesting: SG_JSON_MAX_DEPTH levels are fine, one more is not. */
        {
                size_t n = SG_JSON_MAX_DEPTH;
                char *v = malloc(2 * n + 3);
                ck_assert_ptr_nonnull(v);
                memset(v, '[', n);
                memset(v + n, ']', n);
                v[2 * n] = '\0';
                c = canon_at(v, "");
                ck_assert_ptr_nonnull(c);
                ck_assert_str_eq(c, v);
                free(c);
                memset(v, '[', n + 1);
                memset(v + n + 1, ']', n + 1);
                v[2 * n + 2] = '\0';
                ck_assert_ptr_null(canon_at(v, ""));
                free(v);
        }
}
END_TEST

START_TEST(test_json_number_version) {
        static const struct {
                const char *s;
                bool ok;
                uint64_t v;
        } cases[] = {
                {"0", true, 0},
                {"7", true, 7},
                {"9007199254740992", true, 9007199254740992ULL},
                {"9007199254740993", false, 0},
                {"9999999999999999", false, 0},
                {"10000000000000000", false, 0},
                {"-1", false, 0},
                {"-0", false, 0},
                {"1.0", false, 0},
                {"1e0", false, 0},
                {"01", false, 0},
                {"", false, 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t v = 4242;
                sg_err_t e = sg_json_number_version(cases[i].s,
                                                    strlen(cases[i].s), &v);
                ck_assert_msg((e == SG_OK) == cases[i].ok, "\"%s\": %d",
                              cases[i].s, e);
                ck_assert_uint_eq(v, cases[i].ok ? cases[i].v : 4242);
        }
        /* sg_json_version_get: numbers by their text, strings by
         * sg_version_parse. */
        {
                uint64_t v = 0;
                const char *j =
                        "{\"a\":9007199254740993,\"b\":\"9007199254740993\","
                        "\"c\":2.0,\"d\":12,\"e\":true}";
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/a", &v),
                                 SG_ERR_INVALID);
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/b", &v),
                                 SG_OK);
                ck_assert_uint_eq(v, 9007199254740993ULL);
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/c", &v),
                                 SG_ERR_INVALID);
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/d", &v),
                                 SG_OK);
                ck_assert_uint_eq(v, 12);
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/e", &v),
                                 SG_ERR_INVALID);
                ck_assert_int_eq(sg_json_version_get(j, strlen(j), "/f", &v),
                                 SG_ERR_INVALID);
                ck_assert_int_eq(sg_json_version_get("x", 1, "", &v),
                                 SG_ERR_INVALID);
        }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Robustness                                                           */
/* ------------------------------------------------------------------ */

START_TEST(test_deep_nesting) {
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

/*
 * A detail stays under 200 bytes whatever it combines: a long field
 * source, yajl's longest message, large byte offsets, a long quoted member
 * name. fuzz_envelope found 201 bytes ("aggregate id (JSON Pointer
 * /data/order, binary-mode data (the record value)): record value is not
 * valid JSON (error at byte 179 of 271: inside a string, '\\' occurs
 * before a character which it may not)").
 */
START_TEST(test_detail_bounded) {
        static const char long_ptr[] =
                "/data/a_rather_long_member_name_for_an_order_identifier/"
                "and_more";
        size_t big = 1000000;
        char *v = malloc(big + 64), name[128];
        tcfg_t t;
        trec_t r;

        ck_assert_ptr_nonnull(v);
        /* the fuzz finding, reduced */
        cfg_ce(&t);
        t.tc.aggregate = src(SG_SRC_POINTER, "/data/order");
        rec_binary(&r, NULL, "evt-1", "/shop/eu", "order.paid", "42");
        r.rec.value = "{\"order\":7\"?\\u061f\\b\\q\"}";
        r.rec.value_len = strlen(r.rec.value);
        expect_invalid(&t, &r, "aggregate id", "not valid JSON");

        /* long pointer names, offsets in the millions, yajl's longest text */
        memset(v, ' ', big);
        memcpy(v + big, "{\"order\":\"\\q\"}", 15);
        v[big + 15] = '\0';
        t.tc.aggregate = src(SG_SRC_POINTER, long_ptr);
        rec_binary(&r, NULL, "evt-1", "/shop/eu", "order.paid", "42");
        r.rec.value = v;
        r.rec.value_len = strlen(v);
        expect_invalid(&t, &r, "aggregate id", NULL);
        t.tc.aggregate = src(SG_SRC_KEY, NULL);
        t.tc.digest_pointer = (char *)long_ptr;
        rec_binary(&r, "k", "evt-1", "/shop/eu", "order.paid", "42");
        r.rec.value = v;
        r.rec.value_len = strlen(v);
        expect_invalid(&t, &r, "digest", NULL);

        /* a long duplicate member name, quoted */
        memset(name, 'n', 100);
        name[100] = '\0';
        snprintf(v, big,
                 "{\"data\":{\"%s\":1,\"%s\":2},\"specversion\":\"1.0\"}", name,
                 name);
        t.tc.digest_pointer = (char *)long_ptr;
        rec_init(&r, "k", v);
        rec_hdr(&r, "content-type", "application/cloudevents+json");
        expect_invalid(&t, &r, "duplicate member name", NULL);
        free(v);
}
END_TEST

START_TEST(test_reuse_envelope) {
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
        /* malformed (the version): the other fields of this record, none
         * of the previous one's */
        ck_assert_str_eq(env.id, "e3");
        ck_assert_str_eq(env.aggregate, "k3");
        ck_assert(!env.has_version);
        rec_binary(&r, "k4", "", "src", "t4", "4"); /* empty id */
        ck_assert_int_eq(run(&t, &r, &env), SG_ERR_INVALID);
        ck_assert(!env.has_key);
        ck_assert_ptr_null(env.id);
        ck_assert_str_eq(env.aggregate, "k4");
        ck_assert(env.has_version && env.version == 4);
        sg_envelope_clear(&env);
        sg_envelope_clear(&env); /* twice is harmless */
}
END_TEST

static uint32_t rng_state = 12345;
static uint32_t rng(void) {
        rng_state = rng_state * 1103515245u + 12345u;
        return rng_state >> 8;
}

START_TEST(test_fuzz_no_crash) {
        /* Mutations of valid events: every outcome is SG_OK or SG_ERR_INVALID
         * with a short printable detail. ASan/UBSan builds catch the rest. */
        static const char *const seeds[] = {
                EV("t", "{\"a\":[1,2,{\"b\":\"c\"}]}"),
                "{\"id\":\"p\",\"type\":\"t\",\"meta\":{\"version\":3}}",
                "null",
                "",
                "[]",
                "\"\\ud800\"",
                "{\"id\":\"\\u0000\"}",
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
                const char *seed =
                        seeds[rng() % (sizeof(seeds) / sizeof(seeds[0]))];
                size_t len = strlen(seed), muts = rng() % 4;
                trec_t r;
                sg_envelope_t env;
                sg_err_t err;

                memcpy(buf, seed, len);
                for (size_t m = 0; m < muts && len > 0; m++) {
                        size_t pos = rng() % len;
                        switch (rng() % 3) {
                        case 0:
                                buf[pos] = (char)rng();
                                break;
                        case 1:
                                len = pos;
                                break; /* truncate */
                        default:
                                buf[pos] = "{}[]\":,\\0~"[rng() % 11];
                                break;
                        }
                }
                rec_init(&r, (rng() & 1) ? "k" : NULL, NULL);
                r.rec.value = len || (rng() & 1) ? buf : NULL;
                r.rec.value_len = len;
                if (rng() & 1)
                        rec_hdr(&r, "content-type",
                                "application/cloudevents+json");
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
                ck_assert_msg(err == SG_OK || err == SG_ERR_INVALID, "err %d",
                              err);
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

START_TEST(test_tiny_errstr) {
        tcfg_t t;
        trec_t r;
        sg_envelope_t env;
        char small[8];

        cfg_ce(&t);
        rec_binary(&r, "k", "e", "src", "t", "bad");
        sg_envelope_init(&env);
        memset(small, 'X', sizeof(small));
        ck_assert_int_eq(
                sg_envelope_parse(&t.tc, &r.rec, &env, small, sizeof(small)),
                SG_ERR_INVALID);
        ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
        ck_assert_int_eq(sg_envelope_parse(&t.tc, &r.rec, &env, NULL, 0),
                         SG_ERR_INVALID);
        sg_envelope_clear(&env);
}
END_TEST

START_TEST(test_sha256_known_answers) {
        /* FIPS 180-2 appendix B.1 and the empty-input digest: the other tests
         * compare against sg_sha256(), so it is pinned to the standard here. */
        static const unsigned char abc[SG_HASH_LEN] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
                0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
                0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
        static const unsigned char empty[SG_HASH_LEN] = {
                0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14,
                0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
                0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c,
                0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};
        unsigned char out[SG_HASH_LEN];

        sg_sha256("abc", 3, out);
        ck_assert_mem_eq(out, abc, SG_HASH_LEN);
        sg_sha256(NULL, 0, out);
        ck_assert_mem_eq(out, empty, SG_HASH_LEN);
}
END_TEST

static Suite *envelope_suite(void) {
        Suite *s = suite_create("envelope");
        TCase *tc;

        tc = tcase_create("binary");
        tcase_add_test(tc, test_binary_ok);
        tcase_add_test(tc, test_key_hash_matches_parse);
        tcase_add_test(tc, test_binary_last_header_wins);
        tcase_add_test(tc, test_headers_indexed_or_scanned);
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
        tcase_add_test(tc, test_version_json_number_text);
        tcase_add_test(tc, test_text_field_json_number_text);
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
        tcase_add_test(tc, test_binary_data_pointer);
        tcase_add_test(tc, test_example_orders_binary);
        tcase_add_test(tc, test_digest_keeps_number_text);
        tcase_add_test(tc, test_digest_string_forms);
        tcase_add_test(tc, test_json_ambiguous_refused);
        tcase_add_test(tc, test_json_string_with_nul);
        suite_add_tcase(s, tc);

        tc = tcase_create("json_pointer");
        tcase_add_test(tc, test_json_pointer);
        tcase_add_test(tc, test_json_canonical);
        tcase_add_test(tc, test_json_strict);
        tcase_add_test(tc, test_json_empty_containers);
        tcase_add_test(tc, test_json_number_version);
        suite_add_tcase(s, tc);

        tc = tcase_create("robustness");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_deep_nesting);
        tcase_add_test(tc, test_reuse_envelope);
        tcase_add_test(tc, test_detail_bounded);
        tcase_add_test(tc, test_fuzz_no_crash);
        tcase_add_test(tc, test_tiny_errstr);
        tcase_add_test(tc, test_envelope_sha256_is_sha256);
        tcase_add_test(tc, test_reparse_strings_are_each_records);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return tu_run_suite(envelope_suite());
}
