/*
 * test_query.c — the result query (semantics §7): every answer of
 * sg_query_event (applied, parked, dead_lettered with its reason, dropped,
 * unknown never seen / expired, a dedup record written before reasons were
 * stored) and sg_query_aggregate, on stores built by driving the engine.
 */
#define TU_ENGINE_HARNESS
#include "envelope.h"
#include "query.h"
#include "http_query.h"
#include "store.h"
#include "testutil.h"

#include <check.h>
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const shop[] = {"/shop"};
static char qerr[512];

/* The answer for event @p id of "orders" (scope "/shop") at @p now. */
static cJSON *ask(h_t *h, const char *id, const unsigned char *digest,
                  int64_t now) {
        cJSON *o = NULL;
        ASSERT_OK(sg_query_event(h->store, h->conf, "orders", shop, 1, id,
                                 digest, now, &o, qerr, sizeof(qerr)),
                  qerr);
        ck_assert_ptr_nonnull(o);
        return o;
}

/* Member @p name of @p o as text: a string's value or a number's raw
 * text; "(missing)" / "null". */
static const char *js(const cJSON *o, const char *name) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
        if (!it)
                return "(missing)";
        if (cJSON_IsNull(it))
                return "null";
        if (cJSON_IsString(it) || cJSON_IsRaw(it))
                return it->valuestring;
        return cJSON_IsTrue(it) ? "true" : "false";
}

static const char *ms_text(int64_t ms) {
        static char b[4][32];
        static int n;
        char *s = b[n++ % 4];
        snprintf(s, 32, "%" PRId64, ms);
        return s;
}

START_TEST(event_applied) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"));
        cJSON *o = ask(&h, "e1", NULL, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        ck_assert_pstr_eq(js(o, "partition"), "0");
        ck_assert_pstr_eq(js(o, "first_seen_ms"), ms_text(T0));
        ck_assert_pstr_eq(js(o, "first_seen"), "2023-11-14T22:13:20.000Z");
        const cJSON *out = cJSON_GetObjectItem(o, "output");
        ck_assert_pstr_eq(js(out, "topic"), "out");
        ck_assert_pstr_eq(js(out, "partition"), "0");
        /* not known: never part of the answer */
        ck_assert_ptr_null(cJSON_GetObjectItem(out, "offset"));
        cJSON_Delete(o);
        /* the same payload is the same event; another payload is the
         * conflict row 3 dead-lettered */
        unsigned char d[32];
        sg_sha256("e1", 2, d);
        o = ask(&h, "e1", d, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        sg_sha256("other", 5, d);
        o = ask(&h, "e1", d, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "idempotency_conflict");
        ck_assert_pstr_eq(
                js(cJSON_GetObjectItem(o, "conflicts_with"), "status"),
                "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

/* The query reads the store's last checkpoint (semantics §7): a batch the
 * engine holds in its open transaction (semantics §6 checkpoints) is not
 * seen until the checkpoint commits it; the engine's own view
 * (sg_engine_view, between batches) holds it. */
START_TEST(event_seen_once_checkpointed) {
        h_t h = {.batch_held = true};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"));
        cJSON *o = ask(&h, "e1", NULL, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "unknown");
        cJSON_Delete(o);
        sg_txn_t *t;
        bool owned;
        sg_dedup_rec_t r;
        unsigned char kh[SG_HASH_LEN];
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        ASSERT_OK(sg_engine_view(h.eng, &t, &owned, qerr, sizeof(qerr)), qerr);
        ck_assert(!owned); /* the open transaction, not a copy */
        const char *parts[] = {"/shop"};
        ASSERT_OK(sg_envelope_key_hash("orders", parts, 1, "e1", kh), "key");
        ck_assert_int_eq(sg_dedup_get(t, &tp, kh, &r), SG_OK);
        ASSERT_OK(sg_engine_checkpoint(h.eng, qerr, sizeof(qerr)), qerr);
        o = ask(&h, "e1", NULL, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

START_TEST(event_parked_waits_for_next_version) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":30000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        h_clock(&h, T0 + 500);
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_int_eq(h.out_cnt, 1); /* e3 is parked */
        cJSON *o = ask(&h, "e3", NULL, T0 + 600);
        ck_assert_pstr_eq(js(o, "status"), "parked");
        ck_assert_pstr_eq(js(o, "aggregate_id"), "A");
        ck_assert_pstr_eq(js(o, "version"), "3");
        ck_assert_pstr_eq(js(o, "last_version"), "1");
        ck_assert_pstr_eq(js(o, "awaiting_version"), "2");
        ck_assert_pstr_eq(js(o, "parked_at_ms"), ms_text(T0 + 500));
        ck_assert_pstr_eq(js(o, "gap_deadline_ms"), ms_text(T0 + 500 + 30000));
        ck_assert_pstr_eq(js(o, "offset"), "1");
        cJSON_Delete(o);

        /* the aggregate, searched in every partition without naming one */
        ASSERT_OK(sg_query_aggregate(h.store, h.conf, NULL, "A", T0, &o, qerr,
                                     sizeof(qerr)),
                  qerr);
        const cJSON *found = cJSON_GetObjectItem(o, "found");
        ck_assert_int_eq(cJSON_GetArraySize(found), 1);
        const cJSON *a = cJSON_GetArrayItem(found, 0);
        ck_assert_pstr_eq(js(a, "topic"), "orders");
        ck_assert_pstr_eq(js(a, "id"), "A");
        ck_assert_pstr_eq(js(a, "partition"), "0");
        ck_assert_pstr_eq(js(a, "last_version"), "1");
        ck_assert_pstr_eq(js(a, "awaiting_version"), "2");
        ck_assert_pstr_eq(js(a, "gap_deadline_ms"), ms_text(T0 + 500 + 30000));
        ck_assert_pstr_eq(js(cJSON_GetObjectItem(a, "flags"), "quarantined"),
                          "false");
        const cJSON *parked = cJSON_GetObjectItem(a, "parked");
        ck_assert_int_eq(cJSON_GetArraySize(parked), 1);
        ck_assert_pstr_eq(js(cJSON_GetArrayItem(parked, 0), "version"), "3");
        ck_assert_pstr_eq(js(a, "snapshot_request"), "null");
        cJSON_Delete(o);
        o = NULL;
        ck_assert_int_eq(sg_query_aggregate(h.store, h.conf, "orders", "B", T0,
                                            &o, qerr, sizeof(qerr)),
                         SG_ERR_NOT_FOUND);
        ck_assert_ptr_null(o);
        ck_assert_int_eq(sg_query_aggregate(h.store, h.conf, "nope", "A", T0,
                                            &o, qerr, sizeof(qerr)),
                         SG_ERR_INVALID);

        /* the fill arrives: both applied */
        ONE(&h, EV("A", "e2", "t", "2"));
        o = ask(&h, "e3", NULL, T0 + 600);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

START_TEST(event_dead_lettered_with_reason) {
        h_t h = {0};
        h_open(&h, sm_json);
        ONE(&h, EV("A", "e1", "order.created", "1"));
        ONE(&h, EV("A", "e1b", "order.created", "1")); /* stale */
        ONE(&h, EV("B", "e2", "order.shipped", "1"));  /* NEW -> SHIPPED */
        ck_assert_int_eq(h.out_cnt, 3);
        assert_out(&h.out[1], SG_EFFECT_DLQ, "A", "1", "stale_version");
        assert_out(&h.out[2], SG_EFFECT_DLQ, "B", "1", "illegal_transition");
        cJSON *o = ask(&h, "e1b", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "stale_version");
        ck_assert_pstr_eq(js(o, "dlq_topic"), "dlq");
        ck_assert_ptr_null(cJSON_GetObjectItem(o, "dlq_offset"));
        cJSON_Delete(o);
        o = ask(&h, "e2", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "illegal_transition");
        cJSON_Delete(o);
        /* the original of e1 stays applied */
        o = ask(&h, "e1", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

/* Semantics §3 row 1, §7: a malformed record whose key parses is
 * answered dead_lettered (malformed), not unknown — the trial's plain
 * JSON event with "version": "one", id and source parsed. A corrected copy
 * then takes its place in the answer. */
START_TEST(event_malformed_with_key) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{\"format\":\"json\",\"id\":\"/event_id\","
                   "\"scope\":[\"/source\"],\"aggregate\":\"/orderId\","
                   "\"version\":\"/version\"}");
        ONE(&h, EV("c-1", "x", "t", "1",
                   .value = "{\"event_id\":\"e-9\",\"source\":\"/shop\","
                            "\"orderId\":\"o-50\",\"version\":\"one\"}"));
        ck_assert_int_eq(h.out_cnt, 1);
        assert_out(&h.out[0], SG_EFFECT_DLQ, "c-1", NULL, "malformed");
        cJSON *o = ask(&h, "e-9", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "malformed");
        ck_assert_pstr_eq(js(o, "dlq_topic"), "dlq");
        cJSON_Delete(o);
        /* the DLQ record names the aggregate that parsed */
        ck_assert_pstr_eq(h.out[0].aggregate, "o-50");
        /* asked with another payload's digest: not a conflict (the
         * malformed copy claims no key); the record as it is */
        unsigned char d[32];
        sg_sha256("other", 5, d);
        o = ask(&h, "e-9", d, T0);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "malformed");
        cJSON_Delete(o);
        /* corrected: applied, and answered so */
        ONE(&h, EV("c-1", "x", "t", "1",
                   .value = "{\"event_id\":\"e-9\",\"source\":\"/shop\","
                            "\"orderId\":\"o-50\",\"version\":1}"));
        ck_assert_int_eq(h.out_cnt, 2);
        assert_out(&h.out[1], SG_EFFECT_OUTPUT, "c-1", NULL, NULL);
        o = ask(&h, "e-9", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

/* A gap that times out dead-letters parked events: the reason is kept on
 * the drain/timeout path too, not only in the rows. */
START_TEST(event_gap_timeout_reason) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        ONE(&h, EV("A", "e3", "t", "3"));
        h_clock(&h, T0 + 5000);
        batch(&h, NULL, 0);
        cJSON *o = ask(&h, "e3", NULL, T0 + 5000);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "gap_timeout");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

START_TEST(event_dropped) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"stale\":\"drop\"}");
        ONE(&h, EV("A", "e1", "t", "1"));
        ONE(&h, EV("A", "e1b", "t", "1"));
        ck_assert_int_eq(h.out_cnt, 1);
        cJSON *o = ask(&h, "e1b", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "dropped");
        ck_assert_pstr_eq(js(o, "reason"), "stale_version");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

START_TEST(event_unknown_never_seen_and_expired) {
        h_t h = {0};
        h_open(&h, "\"dedup\":{\"ttl_ms\":10000}");
        ONE(&h, EV("A", "e1", "t", "1"));
        cJSON *o = ask(&h, "nope", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "unknown");
        ck_assert_pstr_eq(js(o, "why"), "not_found");
        ck_assert_pstr_eq(js(o, "dedup_ttl_ms"), "10000");
        ck_assert_pstr_eq(js(o, "partitions_searched"), "1");
        cJSON_Delete(o);
        /* past the TTL, before the sweep: the record says it expired */
        o = ask(&h, "e1", NULL, T0 + 10000);
        ck_assert_pstr_eq(js(o, "status"), "unknown");
        ck_assert_pstr_eq(js(o, "why"), "expired");
        ck_assert_pstr_eq(js(o, "expired_at_ms"), ms_text(T0 + 10000));
        cJSON_Delete(o);
        /* swept (its bucket, a width of TTL / SG_DEDUP_BUCKETS, has
         * ended): gone */
        int64_t end = T0 + 10000 + 10000 / SG_DEDUP_BUCKETS;
        h_clock(&h, end);
        batch(&h, NULL, 0);
        ck_assert_uint_eq(M(&h)->dedup_expired_total, 1);
        o = ask(&h, "e1", NULL, end);
        ck_assert_pstr_eq(js(o, "status"), "unknown");
        ck_assert_pstr_eq(js(o, "why"), "not_found");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

/* A dedup record from a store written before reasons were stored: its bare
 * verdict byte reads as a DLQ of reason unknown. */
START_TEST(event_old_format_record) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        ONE(&h, EV("A", "e1", "t", "1"));
        unsigned char kh[32];
        ASSERT_OK(sg_envelope_key_hash("orders", shop, 1, "old", kh), "");
        unsigned char v[49] = {0};
        v[32] = SG_DV_DLQ;
        v[40] = 1;    /* first seen 1 ms */
        v[42] = 0x10; /* expiry 2^52 + 2^44 ms: far past T0 */
        v[43] = 0x10;
        sg_tp_t tp;
        sg_tp_make(&tp, "orders", 0);
        sg_txn_t *t;
        ASSERT_OK(sg_txn_begin(h.store, true, &t, qerr, sizeof(qerr)), qerr);
        ASSERT_OK(sg_store_apply_change(t, &tp, SG_DB_DEDUP, kh, 32, v,
                                        sizeof(v), qerr, sizeof(qerr)),
                  qerr);
        ASSERT_OK(sg_txn_commit(t, qerr, sizeof(qerr)), qerr);
        cJSON *o = ask(&h, "old", NULL, T0);
        ck_assert_pstr_eq(js(o, "status"), "dead_lettered");
        ck_assert_pstr_eq(js(o, "reason"), "unknown");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

/* A parked event a release (or a snapshot) moved L past was never emitted:
 * it is answered "superseded", not "applied" (semantics §7: applied means
 * emitted to the output topic). */
START_TEST(event_superseded_is_not_applied) {
        h_t h = {0};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":1000,\"gap_policy\":"
                   "\"skip\"}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));
        sg_header_t rel[] = {{SG_H_CONTROL, "release", 7}};
        feed_raw(&h, "orders", "A", "{\"aggregate\":\"A\",\"version\":\"4\"}",
                 rel, 1);
        ck_assert_uint_eq(M(&h)->snapshot_superseded_total, 1);
        cJSON *o = ask(&h, "e3", NULL, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "superseded");
        ck_assert_ptr_null(cJSON_GetObjectItem(o, "output"));
        cJSON_Delete(o);
        /* a redelivery of it is still a duplicate, never applied later */
        ONE(&h, EV("A", "e3", "t", "3"));
        ck_assert_uint_eq(M(&h)->dedup_hits_total, 1);
        o = ask(&h, "e1", NULL, T0 + 1);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        h_free(&h);
}
END_TEST

START_TEST(event_query_refuses_bad_input) {
        h_t h = {0};
        h_open(&h, "\"envelope\":{}");
        cJSON *o = NULL;
        ck_assert_int_eq(sg_query_event(h.store, h.conf, "other", shop, 1, "e",
                                        NULL, T0, &o, qerr, sizeof(qerr)),
                         SG_ERR_INVALID);
        ck_assert_int_eq(sg_query_event(h.store, h.conf, "orders", NULL, 0, "e",
                                        NULL, T0, &o, qerr, sizeof(qerr)),
                         SG_ERR_INVALID);
        ck_assert_msg(strstr(qerr, "1 part"), "%s", qerr);
        /* an empty id or scope part: no event has one (the envelope
         * refuses empty fields), so the question is malformed, not
         * "unknown" */
        ck_assert_int_eq(sg_query_event(h.store, h.conf, "orders", shop, 1, "",
                                        NULL, T0, &o, qerr, sizeof(qerr)),
                         SG_ERR_INVALID);
        ck_assert_msg(strstr(qerr, "id is empty"), "%s", qerr);
        const char *empty[] = {""};
        ck_assert_int_eq(sg_query_event(h.store, h.conf, "orders", empty, 1,
                                        "e", NULL, T0, &o, qerr, sizeof(qerr)),
                         SG_ERR_INVALID);
        ck_assert_msg(strstr(qerr, "is empty"), "%s", qerr);
        ck_assert_int_eq(sg_query_aggregate(h.store, h.conf, NULL, "", T0, &o,
                                            qerr, sizeof(qerr)),
                         SG_ERR_INVALID);
        ck_assert_msg(strstr(qerr, "aggregate id is empty"), "%s", qerr);
        ck_assert_ptr_null(o);
        h_free(&h);
}
END_TEST

/* ---- the read API over HTTP (http_query.h) ---------------------------- */

typedef struct got {
        long status;
        char body[4096];
        size_t len;
} got_t;

static size_t on_body(char *p, size_t sz, size_t n, void *opaque) {
        got_t *g = opaque;
        size_t len = sz * n;
        size_t room = sizeof(g->body) - 1 - g->len;
        memcpy(g->body + g->len, p, len < room ? len : room);
        g->len += len < room ? len : room;
        g->body[g->len] = '\0';
        return len;
}

/* GET @p path; the status and the body parsed as JSON. */
static cJSON *get(uint16_t port, const char *path, long *statusp) {
        char url[512];
        got_t g = {0};
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port,
                 path);
        CURL *c = curl_easy_init();
        ck_assert_ptr_nonnull(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g.status);
        curl_easy_cleanup(c);
        *statusp = g.status;
        cJSON *o = cJSON_Parse(g.body);
        ck_assert_msg(o != NULL, "not JSON: %s", g.body);
        return o;
}

START_TEST(http_read_api_answers) {
        /* the read API asks at the wall clock's time: so does the engine */
        h_t h = {.now = sg_clock_wall_ms()};
        h_open(&h, "\"ordering\":{\"gap_timeout_ms\":30000}");
        ONE(&h, EV("A", "e1", "t", "1"), EV("A", "e3", "t", "3"));

        sg_http_addr_t addr;
        sg_http_t *srv = NULL;
        sg_query_api_t *api = NULL;
        char es[256];
        ASSERT_OK(sg_http_address_parse("127.0.0.1:0", &addr, es, sizeof(es)),
                  es);
        ASSERT_OK(sg_http_new(&addr, true, &srv, es, sizeof(es)), es);
        ASSERT_OK(sg_query_api_new(h.conf, &api, es, sizeof(es)), es);
        ASSERT_OK(sg_query_api_routes_add(api, srv, es, sizeof(es)), es);
        ASSERT_OK(sg_http_start(srv, es, sizeof(es)), es);
        uint16_t port = sg_http_port(srv);
        long st;

        /* before the store is attached */
        cJSON *o = get(port, "/v1/events?source=%2Fshop&id=e1", &st);
        ck_assert_int_eq(st, 503);
        cJSON_Delete(o);
        sg_query_api_set_store(api, h.store);

        /* topic left out: one input topic is configured */
        o = get(port, "/v1/events?source=%2Fshop&id=e1", &st);
        ck_assert_int_eq(st, 200);
        ck_assert_pstr_eq(js(o, "status"), "applied");
        cJSON_Delete(o);
        o = get(port, "/v1/events?topic=orders&source=%2Fshop&id=e3", &st);
        ck_assert_int_eq(st, 200);
        ck_assert_pstr_eq(js(o, "status"), "parked");
        ck_assert_double_eq(cJSON_GetNumberValue(
                                    cJSON_GetObjectItem(o, "awaiting_version")),
                            2);
        cJSON_Delete(o);
        o = get(port, "/v1/events?source=%2Fshop&id=never", &st);
        ck_assert_int_eq(st, 200);
        ck_assert_pstr_eq(js(o, "status"), "unknown");
        cJSON_Delete(o);

        /* errors: 400 with a reason */
        o = get(port, "/v1/events?source=%2Fshop", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "id"), "%s", js(o, "error"));
        cJSON_Delete(o);
        o = get(port, "/v1/events?topic=nope&source=%2Fshop&id=e1", &st);
        ck_assert_int_eq(st, 400);
        cJSON_Delete(o);
        o = get(port, "/v1/events?id=e1&id=e2&source=%2Fshop", &st);
        ck_assert_int_eq(st, 400);
        cJSON_Delete(o);
        o = get(port, "/v1/events?source=%2Fshop&id=", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "id is empty"), "%s",
                      js(o, "error"));
        cJSON_Delete(o);
        o = get(port, "/v1/events?source=&id=e1", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "is empty"), "%s", js(o, "error"));
        cJSON_Delete(o);
        /* an argument the route does not know is a mistake, not noise:
         * "ids=e2" must not answer for e1 */
        o = get(port, "/v1/events?source=%2Fshop&id=e1&ids=e2", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "unknown argument ids"), "%s",
                      js(o, "error"));
        cJSON_Delete(o);
        o = get(port,
                "/v1/events?source=%2Fshop&id=e1&topic=orders&topic=orders",
                &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "topic given 2 times"), "%s",
                      js(o, "error"));
        cJSON_Delete(o);

        /* the aggregate */
        o = get(port, "/v1/aggregates/A", &st);
        ck_assert_int_eq(st, 200);
        const cJSON *found = cJSON_GetObjectItem(o, "found");
        ck_assert_int_eq(cJSON_GetArraySize(found), 1);
        ck_assert_double_eq(
                cJSON_GetNumberValue(cJSON_GetObjectItem(
                        cJSON_GetArrayItem(found, 0), "last_version")),
                1);
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/B", &st);
        ck_assert_int_eq(st, 404);
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/A?topc=orders", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_msg(strstr(js(o, "error"), "unknown argument topc"), "%s",
                      js(o, "error"));
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/A?topic=orders&topic=x", &st);
        ck_assert_int_eq(st, 400);
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/A?topic=orders", &st);
        ck_assert_int_eq(st, 200);
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_ptr_nonnull(js(o, "error"));
        cJSON_Delete(o);
        o = get(port, "/v1/aggregates/?topic=orders", &st);
        ck_assert_int_eq(st, 400);
        ck_assert_ptr_nonnull(js(o, "error"));
        cJSON_Delete(o);

        /* detached again: 503 */
        sg_query_api_set_store(api, NULL);
        o = get(port, "/v1/aggregates/A", &st);
        ck_assert_int_eq(st, 503);
        cJSON_Delete(o);

        sg_http_destroy(srv);
        sg_query_api_destroy(api);
        h_free(&h);
}
END_TEST

int main(void) {
        Suite *s = suite_create("query");
        TCase *tc = tcase_create("query");
        tcase_add_test(tc, event_applied);
        tcase_add_test(tc, event_seen_once_checkpointed);
        tcase_add_test(tc, event_parked_waits_for_next_version);
        tcase_add_test(tc, event_dead_lettered_with_reason);
        tcase_add_test(tc, event_gap_timeout_reason);
        tcase_add_test(tc, event_malformed_with_key);
        tcase_add_test(tc, event_dropped);
        tcase_add_test(tc, event_unknown_never_seen_and_expired);
        tcase_add_test(tc, event_old_format_record);
        tcase_add_test(tc, event_superseded_is_not_applied);
        tcase_add_test(tc, event_query_refuses_bad_input);
        tcase_add_test(tc, http_read_api_answers);
        suite_add_tcase(s, tc);
        return tu_run_suite(s);
}
