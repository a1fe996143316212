/*
 * fuzz_envelope.c — libFuzzer target: sg_envelope_parse() on any record,
 * under several topic configurations, and the JSON layer (json.h) on any
 * text. Built and run by tests/fuzz/run.sh (docs/testing.md "Fuzzing").
 *
 * Input (text-friendly, so seeds and crash files read as records):
 *   byte 0            selects the case: byte % 8
 *                       0  CloudEvents defaults (digest of the value)
 *                       1  CloudEvents, digest "/data" (examples/orders.json)
 *                       2  CloudEvents, JSON Pointer sources, digest
 *                          "/data/a", max_field_bytes 16
 *                       3  plain JSON, pointers and header scope, digest
 *                          "/payload" (examples/plain-json.json)
 *                       4  plain JSON, header id, key aggregate, no version
 *                       5  plain JSON, digest "/" (member "")
 *                       6  case 4 with digest "" (the whole value)
 *                       7  JSON only: the rest is JSON text (see below)
 *   then lines up to the first empty line: the record key (an empty line
 *   here: no headers, null key), then headers "name:value" ("name" alone:
 *   a header with a null value); the rest is the record value. No empty
 *   line: the whole rest is the value, no key, no headers.
 *
 * Checked beyond "no crash, no leak, no UB" (a violation aborts):
 *  - the result is SG_OK or SG_ERR_INVALID; a refusal's detail is
 *    non-empty, NUL-terminated printable ASCII of fewer than 200 bytes
 *    (envelope.h: a DLQ header and a log line can carry it);
 *  - on SG_OK the id (and aggregate, type) are non-empty valid UTF-8
 *    without NUL, within max_field_bytes; on SG_ERR_INVALID the fields
 *    that did parse are as valid, and not every field parsed;
 *  - parsing again into the same envelope, and into a fresh one, gives the
 *    same verdict, key hash and digest (the reused JSON tree and arena
 *    leave nothing behind);
 *  - case 7: sg_json_canonicalize() of its own output returns it unchanged
 *    (the canonical form is a fixed point), and the digest of a plain JSON
 *    topic with digest "" equals SHA-256 of that canonical text.
 */
#include "config.h"
#include "envelope.h"
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 32

static const char CONFIG[] =
        "{\"data_dir\":\"/tmp/x\",\"guarantee\":\"at_least_once\","
        "\"kafka\":{\"bootstrap.servers\":\"x:1\",\"group.id\":\"g\"},"
        "\"topics\":{"
        "\"t0\":{\"output_topic\":\"o0\",\"dlq_topic\":\"d0\"},"
        "\"t1\":{\"output_topic\":\"o1\",\"dlq_topic\":\"d1\","
        "\"envelope\":{\"digest\":\"/data\"}},"
        "\"t2\":{\"output_topic\":\"o2\",\"dlq_topic\":\"d2\","
        "\"envelope\":{\"id\":\"/id\",\"aggregate\":\"/data/order\","
        "\"version\":\"/sequence\",\"type\":\"/type\","
        "\"scope\":[\"/source\",\"ce:subject\"],\"digest\":\"/data/a\","
        "\"max_field_bytes\":16}},"
        "\"t3\":{\"output_topic\":\"o3\",\"dlq_topic\":\"d3\","
        "\"envelope\":{\"format\":\"json\",\"id\":\"/id\","
        "\"scope\":[\"header:tenant\",\"/operation\"],"
        "\"aggregate\":\"/account_id\",\"version\":\"/version\","
        "\"type\":\"/event_type\",\"digest\":\"/payload\"}},"
        "\"t4\":{\"output_topic\":\"o4\",\"dlq_topic\":\"d4\","
        "\"envelope\":{\"format\":\"json\",\"id\":\"header:idempotency-key\","
        "\"scope\":[],\"aggregate\":\"key\"},\"ordering\":{\"mode\":\"none\"}},"
        "\"t5\":{\"output_topic\":\"o5\",\"dlq_topic\":\"d5\","
        "\"envelope\":{\"format\":\"json\",\"id\":\"/id\",\"version\":\"/v\","
        "\"digest\":\"/\"}}}}";

static sg_config_t *conf;
static sg_topic_config_t cases[7];
static sg_envelope_t
        reused; /* one envelope for every input, as the engine does */

static void die(const char *what, const char *detail) {
        fprintf(stderr, "fuzz_envelope: %s%s%s\n", what, detail ? ": " : "",
                detail ? detail : "");
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char err[512];
        static const char *const names[] = {"t0", "t1", "t2", "t3", "t4", "t5"};

        (void)argc;
        (void)argv;
        if (sg_config_parse(CONFIG, &conf, err, sizeof(err)) != SG_OK)
                die("built-in configuration refused", err);
        for (size_t i = 0; i < 6; i++) {
                const sg_topic_config_t *tc = sg_config_topic(conf, names[i]);
                if (!tc)
                        die("topic missing", names[i]);
                cases[i] = *tc; /* shares the strings of conf */
        }
        cases[6] = cases[4];
        cases[6].digest_pointer =
                ""; /* not allowed by the config; allowed here */
        sg_envelope_init(&reused);
        return 0;
}

static void check_detail(const char *d, size_t size) {
        size_t n;

        if (!memchr(d, '\0', size))
                die("detail not NUL-terminated", NULL);
        n = strlen(d);
        if (n == 0)
                die("empty detail", NULL);
        if (n >= 200)
                die("detail of 200 bytes or more", d);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)d[i] < 0x20 || (unsigned char)d[i] >= 0x7f)
                        die("non-printable byte in detail", NULL);
}

static void check_field(const char *what, const char *s, size_t max) {
        size_t n;

        if (!s)
                die("field missing on SG_OK", what);
        n = strlen(s);
        if (n == 0 || n > max || !sg_utf8_valid(s, n))
                die("field invalid", what);
}

/* One parse, checked; returns the verdict. */
static sg_err_t parse_checked(const sg_topic_config_t *tc,
                              const sg_record_t *rec, sg_envelope_t *env) {
        char err[512];
        sg_err_t e;

        memset(err, 'X', sizeof(err));
        e = sg_envelope_parse(tc, rec, env, err, sizeof(err));
        if (e == SG_ERR_INVALID) {
                size_t max = tc->max_field_bytes ? tc->max_field_bytes : 1024;
                check_detail(err, sizeof(err));
                /* a malformed record keeps what did parse, each field
                 * whole (semantics §3 row 1) */
                if (env->has_key != (env->id != NULL))
                        die("has_key without its id, or the reverse", err);
                if (env->id)
                        check_field("id", env->id, max);
                if (env->aggregate)
                        check_field("aggregate", env->aggregate, max);
                if (env->type)
                        check_field("type", env->type, max);
                /* plain JSON has no envelope check of its own: a refusal
                 * names a field */
                if (tc->format == SG_FORMAT_JSON && env->has_key &&
                    env->has_digest &&
                    (tc->aggregate.kind == SG_SRC_NONE || env->aggregate) &&
                    (tc->type.kind == SG_SRC_NONE || env->type) &&
                    (tc->epoch.kind == SG_SRC_NONE || env->has_epoch) &&
                    (tc->version.kind == SG_SRC_NONE || env->has_version))
                        die("refused, yet every field parsed", err);
        } else if (e == SG_OK) {
                size_t max = tc->max_field_bytes ? tc->max_field_bytes : 1024;
                check_field("id", env->id, max);
                if (tc->aggregate.kind != SG_SRC_NONE)
                        check_field("aggregate", env->aggregate, max);
                if (tc->type.kind != SG_SRC_NONE)
                        check_field("type", env->type, max);
                if (tc->version.kind != SG_SRC_NONE && !env->has_version)
                        die("no version on SG_OK", NULL);
        } else {
                die("unexpected error code", sg_err2str(e));
        }
        return e;
}

/* Splits the input into a record; headers and key point into @p buf. */
static void make_record(char *buf, size_t len, const char *topic,
                        sg_record_t *rec, sg_header_t *hdrs) {
        char *p = buf, *end = buf + len, *blank = NULL;

        memset(rec, 0, sizeof(*rec));
        rec->topic = topic;
        rec->partition = 0;
        rec->offset = 1;
        rec->timestamp_ms = -1;
        rec->headers = hdrs;
        for (char *q = buf; q + 1 < end; q++)
                if (q[0] == '\n' && q[1] == '\n') {
                        blank = q;
                        break;
                }
        if (!blank) {
                rec->value = buf;
                rec->value_len = len;
                return;
        }
        /* key line */
        {
                char *nl = memchr(p, '\n', (size_t)(blank + 1 - p));
                if (nl && nl > p) {
                        rec->key = p;
                        rec->key_len = (size_t)(nl - p);
                }
                p = nl ? nl + 1 : blank + 1;
        }
        /* header lines */
        while (p < blank + 1 && rec->header_cnt < MAX_HEADERS) {
                char *nl = memchr(p, '\n', (size_t)(blank + 1 - p));
                char *colon;
                if (!nl)
                        break;
                *nl = '\0'; /* header names are C strings */
                colon = memchr(p, ':', (size_t)(nl - p));
                sg_header_t *h = &hdrs[rec->header_cnt++];
                h->name = p;
                if (colon) {
                        *colon = '\0';
                        h->value = colon + 1;
                        h->value_len = (size_t)(nl - colon - 1);
                } else {
                        h->value = NULL;
                        h->value_len = 0;
                }
                p = nl + 1;
        }
        rec->value = blank + 2;
        rec->value_len = (size_t)(end - (blank + 2));
}

/* Case 7: the canonical form is a fixed point, and it is what a digest ""
 * hashes. */
static void json_case(const char *text, size_t len) {
        char *c1 = NULL, *c2 = NULL, err[256];
        size_t l1 = 0, l2 = 0;
        sg_err_t e;

        memset(err, 'X', sizeof(err));
        e = sg_json_canonicalize(text, len, "", &c1, &l1, err, sizeof(err));
        if (e == SG_ERR_INVALID) {
                check_detail(err, sizeof(err));
                return;
        }
        if (e != SG_OK)
                die("sg_json_canonicalize failed", sg_err2str(e));
        e = sg_json_canonicalize(c1, l1, "", &c2, &l2, err, sizeof(err));
        if (e != SG_OK)
                die("canonical form refused when parsed again", err);
        if (l1 != l2 || memcmp(c1, c2, l1) != 0)
                die("canonical form is not a fixed point", NULL);

        /* A dedup-only plain JSON topic digesting the whole value. */
        {
                sg_record_t rec;
                sg_header_t h = {"idempotency-key", "k", 1};
                unsigned char want[SG_HASH_LEN];

                memset(&rec, 0, sizeof(rec));
                rec.topic = "t4";
                rec.key = "a";
                rec.key_len = 1;
                rec.value = text;
                rec.value_len = len;
                rec.headers = &h;
                rec.header_cnt = 1;
                if (parse_checked(&cases[6], &rec, &reused) != SG_OK)
                        die("canonical JSON value refused by the envelope",
                            NULL);
                sg_sha256(c1, l1, want);
                if (memcmp(want, reused.digest, SG_HASH_LEN) != 0)
                        die("digest is not SHA-256 of the canonical form",
                            NULL);
        }
        free(c1);
        free(c2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const topics[] = {"t0", "t1", "t2", "t3",
                                             "t4", "t5", "t4"};
        sg_header_t hdrs[MAX_HEADERS];
        sg_record_t rec;
        sg_envelope_t fresh;
        unsigned char key1[SG_HASH_LEN], dig1[SG_HASH_LEN];
        char *buf;
        unsigned sel;
        sg_err_t e1, e2, e3;

        if (size < 1)
                return 0;
        sel = data[0] % 8;
        /* exact-size copy: ASan sees any read past the record */
        buf = malloc(size - 1 ? size - 1 : 1);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        if (sel == 7) {
                json_case(buf, size - 1);
                free(buf);
                return 0;
        }
        make_record(buf, size - 1, topics[sel], &rec, hdrs);

        e1 = parse_checked(&cases[sel], &rec, &reused);
        memcpy(key1, reused.key_hash, SG_HASH_LEN);
        memcpy(dig1, reused.digest, SG_HASH_LEN);
        e2 = parse_checked(&cases[sel], &rec, &reused);
        if (e1 != e2 ||
            (e1 == SG_OK && (memcmp(key1, reused.key_hash, SG_HASH_LEN) ||
                             memcmp(dig1, reused.digest, SG_HASH_LEN))))
                die("second parse into the same envelope differs", NULL);
        sg_envelope_init(&fresh);
        e3 = parse_checked(&cases[sel], &rec, &fresh);
        if (e1 != e3 ||
            (e1 == SG_OK && (memcmp(key1, fresh.key_hash, SG_HASH_LEN) ||
                             memcmp(dig1, fresh.digest, SG_HASH_LEN))))
                die("parse into a fresh envelope differs", NULL);
        sg_envelope_clear(&fresh);
        free(buf);
        return 0;
}
