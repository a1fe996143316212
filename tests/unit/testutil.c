/*
 * testutil.c — the unit suites' shared helpers (testutil.h).
 */
#define TU_ENGINE_HARNESS
#define TU_STORE_FIXTURE
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Fails the test at the caller's file:line unless cond holds. */
#define TU_CHECK_AT(file, line, cond, ...)                                     \
        ((cond) ? _mark_point(file, line)                                      \
                : _ck_assert_failed(file, line,                                \
                                    "Assertion '" #cond "' failed",            \
                                    __VA_ARGS__))

/* ck_assert_int_eq (as intmax_t) at the caller's file:line, with Check's
 * message. */
#define TU_INT_EQ_AT(file, line, X, Y)                                         \
        do {                                                                   \
                intmax_t tu_x_ = (X), tu_y_ = (Y);                             \
                TU_CHECK_AT(file, line, tu_x_ == tu_y_,                        \
                            "Assertion '%s' failed: %s == %jd, %s == %jd",     \
                            #X " == " #Y, #X, tu_x_, #Y, tu_y_);               \
        } while (0)

/* ck_assert_uint_le (as uintmax_t) at the caller's file:line, with Check's
 * message. */
#define TU_UINT_LE_AT(file, line, X, Y)                                        \
        do {                                                                   \
                uintmax_t tu_x_ = (X), tu_y_ = (Y);                            \
                TU_CHECK_AT(file, line, tu_x_ <= tu_y_,                        \
                            "Assertion '%s' failed: %s == %ju, %s == %ju",     \
                            #X " <= " #Y, #X, tu_x_, #Y, tu_y_);               \
        } while (0)

/* ck_assert_str_eq at the caller's file:line, with Check's message (NULL
 * equals nothing, as there). */
#define TU_STR_EQ_AT(file, line, X, Y)                                         \
        do {                                                                   \
                const char *tu_x_ = (X), *tu_y_ = (Y);                         \
                TU_CHECK_AT(file, line,                                        \
                            tu_x_ &&tu_y_ &&strcmp(tu_x_, tu_y_) == 0,         \
                            "Assertion '%s' failed: %s == %s%s%s, %s == "      \
                            "%s%s%s",                                          \
                            #X " == " #Y, #X, tu_x_ ? "\"" : "",               \
                            tu_x_ ? tu_x_ : "(null)", tu_x_ ? "\"" : "", #Y,   \
                            tu_y_ ? "\"" : "", tu_y_ ? tu_y_ : "(null)",       \
                            tu_y_ ? "\"" : "");                                \
        } while (0)

int tu_run_suite(Suite *s) {
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void tu_tmpdir_at(const char *file, int line, char *buf, size_t size,
                  const char *name) {
        int n = snprintf(buf, size, "/tmp/sg_test_%s_XXXXXX", name);
        TU_CHECK_AT(file, line, n > 0 && (size_t)n < size,
                    "temp dir name for '%s' does not fit %zu bytes", name,
                    size);
        TU_CHECK_AT(file, line, mkdtemp(buf) != NULL, "mkdtemp %s: %s", buf,
                    strerror(errno));
}

void tu_rmrf_at(const char *file, int line, const char *dir) {
        char cmd[512];
        int n = snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        TU_CHECK_AT(file, line, n > 0 && (size_t)n < sizeof(cmd),
                    "path too long: %s", dir);
        int rc = system(cmd);
        TU_CHECK_AT(file, line, rc == 0, "%s: exit %d", cmd, rc);
}

void tu_sleep_ms(long ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

void tu_clrec_set_at(const char *file, int line, tu_clrec_t *c,
                     const sg_effect_t *ef) {
        TU_CHECK_AT(file, line, ef->key_len <= sizeof(c->key),
                    "changelog key of %zu bytes (at most %zu)", ef->key_len,
                    sizeof(c->key));
        TU_CHECK_AT(file, line, ef->value_len <= sizeof(c->value),
                    "changelog value of %zu bytes (at most %zu)", ef->value_len,
                    sizeof(c->value));
        memcpy(c->key, ef->key, ef->key_len);
        c->key_len = ef->key_len;
        c->tombstone = ef->value == NULL;
        if (ef->value)
                memcpy(c->value, ef->value, ef->value_len);
        c->value_len = ef->value_len;
}

/* ---- the store fixture ------------------------------------------------ */

char tu_store_dir[64];
static const char *tu_store_name;

static void tu_store_setup(void) {
        tu_tmpdir(tu_store_dir, sizeof(tu_store_dir), tu_store_name);
}

static void tu_store_teardown(void) {
        tu_rmrf(tu_store_dir);
}

void tu_store_fixture(TCase *tc, const char *name) {
        tu_store_name = name;
        tcase_add_checked_fixture(tc, tu_store_setup, tu_store_teardown);
}

sg_store_t *tu_store_open_at(const char *file, int line, uint64_t map_size,
                             uint64_t map_growth) {
        char err[512] = "";
        sg_store_t *s = NULL;
        sg_err_t e = sg_store_open(tu_store_dir, map_size, map_growth, &s, err,
                                   sizeof(err));
        TU_CHECK_AT(file, line, e == SG_OK, "sg_store_open %s: %s: %s",
                    tu_store_dir, sg_err2str(e), err);
        return s;
}

sg_txn_t *tu_wtxn_at(const char *file, int line, sg_store_t *s) {
        char err[512] = "";
        sg_txn_t *t = NULL;
        sg_err_t e = sg_txn_begin(s, true, &t, err, sizeof(err));
        TU_CHECK_AT(file, line, e == SG_OK, "sg_txn_begin: %s: %s",
                    sg_err2str(e), err);
        return t;
}

/* ---- the engine harness ---------------------------------------------- */

const char *const sm_json =
        "\"state_machine\":{\"initial\":\"NEW\",\"states\":[\"NEW\","
        "\"CREATED\","
        "\"PAID\",\"SHIPPED\",\"COMPLETED\",\"CANCELLED\",\"RETURNING\"],"
        "\"transitions\":["
        "{\"type\":\"order.created\",\"from\":[\"NEW\"],\"to\":\"CREATED\"},"
        "{\"type\":\"order.paid\",\"from\":[\"CREATED\"],\"to\":\"PAID\"},"
        "{\"type\":\"order.shipped\",\"from\":[\"PAID\"],\"to\":\"SHIPPED\"},"
        "{\"type\":\"order.completed\",\"from\":[\"SHIPPED\"],\"to\":"
        "\"COMPLETED\"},"
        "{\"type\":\"order.cancelled\",\"from\":[\"CREATED\",\"RETURNING\"],"
        "\"to\":\"CANCELLED\"},"
        "{\"type\":\"order.returning\",\"from\":[\"SHIPPED\"],\"to\":"
        "\"RETURNING\"}]}";

void h_open_at(const char *file, int line, h_t *h, const char *topic_json) {
        char json[4096], err[512];
        snprintf(json, sizeof(json), BASE_CONF,
                 h->root ? h->root : "\"guarantee\":\"at_least_once\",",
                 topic_json);
        TU_CHECK_AT(file, line,
                    sg_config_parse(json, &h->conf, err, sizeof(err)) == SG_OK,
                    "config: %s", err);
        if (!h->dir[0]) {
                tu_tmpdir_at(file, line, h->dir, sizeof(h->dir), "engine");
        }
        TU_INT_EQ_AT(file, line,
                     sg_store_open(h->dir, 1 << 24, 1 << 24, &h->store, err,
                                   sizeof(err)),
                     SG_OK);
        TU_INT_EQ_AT(
                file, line,
                sg_engine_new(h->conf, h->store, &h->eng, err, sizeof(err)),
                SG_OK);
        sg_engine_processor(h->eng, &h->proc);
        if (!h->now)
                h->now = T0;
        sg_engine_set_clock(h->eng, h->now);
        int64_t off;
        TU_INT_EQ_AT(file, line,
                     h->proc.assign(h->proc.opaque, "orders", 0, "g", &off, err,
                                    sizeof(err)),
                     SG_OK);
}

void h_close_at(const char *file, int line, h_t *h) {
        /* a clean close (a kill is h_kill) */
        if (h->eng) {
                char err[256];
                TU_CHECK_AT(file, line,
                            sg_engine_checkpoint(h->eng, err, sizeof(err)) ==
                                    SG_OK,
                            "checkpoint: %s", err);
        }
        sg_engine_destroy(h->eng);
        sg_store_close(h->store);
        sg_config_destroy(h->conf);
        h->eng = NULL;
        h->store = NULL;
        h->conf = NULL;
}

void h_free_at(const char *file, int line, h_t *h) {
        h_close_at(file, line, h);
        tu_rmrf_at(file, line, h->dir);
}

void h_clock(h_t *h, int64_t now) {
        h->now = now;
        sg_engine_set_clock(h->eng, now);
}

static void copy_hdr(const sg_header_t *hd, char *dst, size_t n) {
        size_t l = hd->value_len < n - 1 ? hd->value_len : n - 1;
        memcpy(dst, hd->value, l);
        dst[l] = '\0';
}

void collect(h_t *h) {
        const sg_effect_t *ef;
        size_t n = h->proc.effects(h->proc.opaque, &ef);
        for (size_t i = 0; i < n; i++) {
                /* Changelog records (both guarantees) are the store's
                 * business, checked by the changelog cases below; the
                 * decision cases look at what reaches Kafka's topics. */
                if (ef[i].kind == SG_EFFECT_CHANGELOG)
                        continue;
                out_t *o = &h->out[h->out_cnt++];
                memset(o, 0, sizeof(*o));
                o->kind = ef[i].kind;
                if (ef[i].kind == SG_EFFECT_HTTP_GET) {
                        snprintf(o->request_id, sizeof(o->request_id), "%s",
                                 ef[i].request_id);
                        snprintf(o->url, sizeof(o->url), "%s", ef[i].url);
                        continue;
                }
                snprintf(o->topic, sizeof(o->topic), "%s", ef[i].topic);
                o->partition = ef[i].partition;
                o->timestamp_ms = ef[i].timestamp_ms;
                snprintf(o->key, sizeof(o->key), "%.*s", (int)ef[i].key_len,
                         (const char *)ef[i].key);
                snprintf(o->value, sizeof(o->value), "%.*s",
                         (int)ef[i].value_len, (const char *)ef[i].value);
                for (size_t j = 0; j < ef[i].header_cnt; j++)
                        if (!strcmp(ef[i].headers[j].name, "ce_sequence"))
                                copy_hdr(&ef[i].headers[j], o->version,
                                         sizeof(o->version));
                for (size_t j = 0; j < ef[i].extra_cnt; j++) {
                        const sg_header_t *x = &ef[i].extra[j];
                        if (!strcmp(x->name, SG_DLQ_H_REASON))
                                copy_hdr(x, o->reason, sizeof(o->reason));
                        else if (!strcmp(x->name, SG_DLQ_H_DETAIL))
                                copy_hdr(x, o->detail, sizeof(o->detail));
                        else if (!strcmp(x->name, SG_DLQ_H_DEAD_LETTERED_AT))
                                copy_hdr(x, o->dead_lettered_at,
                                         sizeof(o->dead_lettered_at));
                        else if (!strcmp(x->name, SG_DLQ_H_AGGREGATE))
                                copy_hdr(x, o->aggregate, sizeof(o->aggregate));
                        else if (!strcmp(x->name, SG_DLQ_H_ACTUAL))
                                copy_hdr(x, o->actual, sizeof(o->actual));
                        else if (!strcmp(x->name, SG_DLQ_H_EXPECTED))
                                copy_hdr(x, o->expected, sizeof(o->expected));
                        else if (ef[i].kind == SG_EFFECT_OUTPUT &&
                                 strcmp(x->name, SG_H_SOURCE) != 0) {
                                snprintf(o->extra_name, sizeof(o->extra_name),
                                         "%s", x->name);
                                copy_hdr(x, o->extra_val, sizeof(o->extra_val));
                        }
                }
        }
}

/* Runs one batch with @p evs; returns the number of effects it produced. */
size_t batch_at(const char *file, int line, h_t *h, const ev_t *evs,
                size_t cnt) {
        char err[512];
        size_t before = h->out_cnt;
        TU_INT_EQ_AT(file, line,
                     h->proc.batch_begin(h->proc.opaque, 0, err, sizeof(err)),
                     SG_OK);
        /* Input records (and their headers) stay alive for the whole batch,
         * as the Kafka loop keeps its messages: effects borrow them. */
        static sg_header_t hds[64][8];
        TU_UINT_LE_AT(file, line, cnt, 64);
        for (size_t i = 0; i < cnt; i++) {
                sg_header_t *hd = hds[i];
                size_t hc = 0;
                hd[hc++] = (sg_header_t){"ce_specversion", "1.0", 3};
                hd[hc++] = (sg_header_t){"ce_id", evs[i].id, strlen(evs[i].id)};
                hd[hc++] = (sg_header_t){"ce_source", "/shop", 5};
                hd[hc++] = (sg_header_t){"ce_type", evs[i].type,
                                         strlen(evs[i].type)};
                hd[hc++] = (sg_header_t){"ce_sequence", evs[i].seq,
                                         strlen(evs[i].seq)};
                if (evs[i].replay)
                        hd[hc++] = (sg_header_t){SG_H_REPLAY, "1", 1};
                if (evs[i].epoch)
                        hd[hc++] = (sg_header_t){"ce_epoch", evs[i].epoch,
                                                 strlen(evs[i].epoch)};
                const char *val = evs[i].value ? evs[i].value : evs[i].id;
                sg_record_t rec = {
                        .topic = "orders",
                        .partition = evs[i].partition,
                        .offset = h->offset++,
                        .timestamp_ms = evs[i].ts ? evs[i].ts : 1000,
                        .key = evs[i].agg,
                        .key_len = strlen(evs[i].agg),
                        .value = val,
                        .value_len = strlen(val),
                        .headers = hd,
                        .header_cnt = hc,
                };
                TU_INT_EQ_AT(file, line,
                             h->proc.process(h->proc.opaque, &rec,
                                             &h->last_result, err, sizeof(err)),
                             SG_OK);
        }
        if (h->lag_set) /* as the Kafka loop reports it: before tick */
                h->proc.position(h->proc.opaque, "orders", 0, h->lag);
        TU_INT_EQ_AT(file, line, h->proc.tick(h->proc.opaque, err, sizeof(err)),
                     SG_OK);
        collect(h);
        TU_CHECK_AT(file, line,
                    h->proc.batch_commit(h->proc.opaque, err, sizeof(err)) ==
                            SG_OK,
                    "commit: %s", err);
        h_checkpoint_at(file, line, h);
        return h->out_cnt - before;
}

const sg_metrics_t *M(h_t *h) {
        return sg_engine_metrics(h->eng);
}

void assert_out_at(const char *file, int line, const out_t *o,
                   sg_effect_kind_t kind, const char *key, const char *version,
                   const char *reason) {
        TU_INT_EQ_AT(file, line, o->kind, kind);
        TU_STR_EQ_AT(file, line, o->key, key);
        if (version)
                TU_STR_EQ_AT(file, line, o->version, version);
        if (reason)
                TU_STR_EQ_AT(file, line, o->reason, reason);
}

/* Feeds one record on a non-input topic (reply topic / HTTP pseudo topic). */
void feed_raw_at(const char *file, int line, h_t *h, const char *topic,
                 const char *key, const char *value, const sg_header_t *hd,
                 size_t hc) {
        char err[512];
        TU_INT_EQ_AT(file, line,
                     h->proc.batch_begin(h->proc.opaque, 0, err, sizeof(err)),
                     SG_OK);
        sg_record_t rec = {.topic = topic,
                           .partition = 0,
                           .offset = 7,
                           .key = key,
                           .key_len = key ? strlen(key) : 0,
                           .value = value,
                           .value_len = value ? strlen(value) : 0,
                           .headers = hd,
                           .header_cnt = hc};
        sg_process_result_t r;
        TU_INT_EQ_AT(
                file, line,
                h->proc.process(h->proc.opaque, &rec, &r, err, sizeof(err)),
                SG_OK);
        TU_INT_EQ_AT(file, line, r, SG_PROCESSED);
        TU_INT_EQ_AT(file, line, h->proc.tick(h->proc.opaque, err, sizeof(err)),
                     SG_OK);
        collect(h);
        TU_INT_EQ_AT(file, line,
                     h->proc.batch_commit(h->proc.opaque, err, sizeof(err)),
                     SG_OK);
        h_checkpoint_at(file, line, h);
}

void h_checkpoint_at(const char *file, int line, h_t *h) {
        char err[256];
        if (h->batch_held) /* the case holds its batches in one checkpoint */
                return;
        TU_CHECK_AT(file, line,
                    sg_engine_checkpoint(h->eng, err, sizeof(err)) == SG_OK,
                    "checkpoint: %s", err);
}
