/*
 * envelope_bench.c — sg_envelope_parse() alone: ns per record for the
 * envelope shapes seqgate reads (semantics §2), so a change to the JSON
 * reading can be judged on its own (engine_bench feeds binary-mode events
 * whose value is never parsed).
 *
 * Usage: envelope_bench [records] [case]
 *   records  parses per case (default 1000000)
 *   case     run only the case of that name (default: all)
 *
 * Cases (each record has a distinct id, aggregate and version, as a stream
 * does; the values are ~200-300 bytes of JSON, like bench/gen.py writes):
 *   binary              CloudEvents binary mode, digest of the value (the
 *                       value is not parsed)
 *   binary_data         binary mode, digest "/data" (the value is the data)
 *   structured          structured mode, digest of the value
 *   structured_data     structured mode, digest "/data"
 *   json_pointers       plain JSON: id, aggregate, version, type by JSON
 *                       Pointer, digest "/payload"
 *
 * Prints one line per case: "CASE: N records, X ns/record, Y records/s".
 * A case whose records are refused prints the first detail and exits 1.
 */
#include "benchutil.h"
#include "envelope.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING 1024 /* distinct records cycled through */

typedef struct rec {
        char key[24], id[32], seq[24], value[512];
        sg_header_t hd[6];
        sg_record_t r;
} rec_t;

typedef enum { K_BINARY, K_STRUCTURED, K_JSON } kind_t;

static void make(rec_t *e, kind_t kind, uint64_t n) {
        int len = 0;
        size_t hc = 0;

        snprintf(e->key, sizeof(e->key), "agg-%" PRIu64, n % 997);
        snprintf(e->id, sizeof(e->id), "ev-%" PRIu64, n);
        snprintf(e->seq, sizeof(e->seq), "%" PRIu64, n / 997 + 1);
        switch (kind) {
        case K_BINARY:
                len = snprintf(e->value, sizeof(e->value),
                               "{\"order\":\"%" PRIu64 "\",\"amount\":%" PRIu64
                               ",\"currency\":\"EUR\",\"price\":12.50,"
                               "\"note\":\"benchmark payload padding padding "
                               "padding padding padding padding\"}",
                               n % 997, n % 1000);
                e->hd[hc++] = (sg_header_t){"ce_specversion", "1.0", 3};
                e->hd[hc++] = (sg_header_t){"ce_id", e->id, strlen(e->id)};
                e->hd[hc++] = (sg_header_t){"ce_source", "/bench", 6};
                e->hd[hc++] = (sg_header_t){"ce_type", "order.updated", 13};
                e->hd[hc++] =
                        (sg_header_t){"ce_sequence", e->seq, strlen(e->seq)};
                break;
        case K_STRUCTURED:
                len = snprintf(
                        e->value, sizeof(e->value),
                        "{\"specversion\":\"1.0\",\"id\":\"%s\","
                        "\"source\":\"/bench\",\"type\":\"order.updated\","
                        "\"sequence\":\"%s\",\"time\":\"2024-01-01T00:00:00Z\","
                        "\"datacontenttype\":\"application/json\","
                        "\"data\":{\"order\":\"%" PRIu64
                        "\",\"amount\":%" PRIu64
                        ",\"currency\":\"EUR\",\"price\":12.50,"
                        "\"note\":\"benchmark payload padding padding "
                        "padding padding padding padding\"}}",
                        e->id, e->seq, n % 997, n % 1000);
                e->hd[hc++] = (sg_header_t){"content-type",
                                            "application/cloudevents+json", 28};
                break;
        case K_JSON:
                len = snprintf(
                        e->value, sizeof(e->value),
                        "{\"payment_id\":\"%s\",\"account_id\":\"%s\","
                        "\"version\":%s,\"event_type\":\"account.debited\","
                        "\"operation\":\"debit\",\"payload\":{\"amount\":"
                        "%" PRIu64 ",\"currency\":\"EUR\",\"price\":12.50,"
                        "\"note\":\"benchmark payload padding padding "
                        "padding padding padding padding\"}}",
                        e->id, e->key, e->seq, n % 1000);
                e->hd[hc++] = (sg_header_t){"tenant", "acme", 4};
                break;
        }
        e->r = (sg_record_t){.topic = "orders",
                             .partition = 0,
                             .offset = (int64_t)n,
                             .timestamp_ms = 1,
                             .key = e->key,
                             .key_len = strlen(e->key),
                             .value = e->value,
                             .value_len = (size_t)len,
                             .headers = e->hd,
                             .header_cnt = hc};
}

typedef struct bcase {
        const char *name;
        kind_t kind;
        sg_topic_config_t tc;
        sg_field_src_t scope[2];
} bcase_t;

static sg_field_src_t src(sg_src_kind_t kind, const char *name) {
        sg_field_src_t s = {kind, (char *)name};
        return s;
}

static void ce_defaults(bcase_t *b) {
        b->tc.name = "orders";
        b->tc.format = SG_FORMAT_CLOUDEVENTS;
        b->tc.id = src(SG_SRC_CE, "id");
        b->scope[0] = src(SG_SRC_CE, "source");
        b->tc.scope = b->scope;
        b->tc.scope_cnt = 1;
        b->tc.aggregate = src(SG_SRC_KEY, NULL);
        b->tc.version = src(SG_SRC_CE, "sequence");
        b->tc.type = src(SG_SRC_CE, "type");
        b->tc.max_field_bytes = 1024;
}

static int run(bcase_t *b, uint64_t records) {
        static rec_t ring[RING];
        sg_envelope_t env;
        char err[256];
        double t0, t1;

        for (uint64_t i = 0; i < RING; i++)
                make(&ring[i], b->kind, i);
        b->tc.scope = b->scope;
        sg_envelope_init(&env);
        t0 = bench_now_s();
        for (uint64_t i = 0; i < records; i++) {
                if (sg_envelope_parse(&b->tc, &ring[i % RING].r, &env, err,
                                      sizeof(err)) != SG_OK) {
                        fprintf(stderr, "%s: record %" PRIu64 " refused: %s\n",
                                b->name, i, err);
                        sg_envelope_clear(&env);
                        return 1;
                }
        }
        t1 = bench_now_s();
        sg_envelope_clear(&env);
        printf("%s: %" PRIu64 " records, %.0f ns/record, %.0f records/s\n",
               b->name, records, (t1 - t0) * 1e9 / (double)records,
               (double)records / (t1 - t0));
        return 0;
}

int main(int argc, char **argv) {
        uint64_t records = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
        const char *only = argc > 2 ? argv[2] : NULL;
        bcase_t cases[5];
        int rc = 0;

        memset(cases, 0, sizeof(cases));
        cases[0].name = "binary";
        cases[0].kind = K_BINARY;
        ce_defaults(&cases[0]);
        cases[1].name = "binary_data";
        cases[1].kind = K_BINARY;
        ce_defaults(&cases[1]);
        cases[1].tc.digest_pointer = "/data";
        cases[2].name = "structured";
        cases[2].kind = K_STRUCTURED;
        ce_defaults(&cases[2]);
        cases[3].name = "structured_data";
        cases[3].kind = K_STRUCTURED;
        ce_defaults(&cases[3]);
        cases[3].tc.digest_pointer = "/data";
        cases[4].name = "json_pointers";
        cases[4].kind = K_JSON;
        cases[4].tc.name = "accounts";
        cases[4].tc.format = SG_FORMAT_JSON;
        cases[4].tc.id = src(SG_SRC_POINTER, "/payment_id");
        cases[4].scope[0] = src(SG_SRC_HEADER, "tenant");
        cases[4].scope[1] = src(SG_SRC_POINTER, "/operation");
        cases[4].tc.scope_cnt = 2;
        cases[4].tc.aggregate = src(SG_SRC_POINTER, "/account_id");
        cases[4].tc.version = src(SG_SRC_POINTER, "/version");
        cases[4].tc.type = src(SG_SRC_POINTER, "/event_type");
        cases[4].tc.digest_pointer = "/payload";
        cases[4].tc.max_field_bytes = 1024;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (only && strcmp(only, cases[i].name) != 0)
                        continue;
                rc |= run(&cases[i], records);
        }
        return rc;
}
