/*
 * test_snapshot_http.c — the HTTP snapshot fetcher (snapsrc_http_fetch.h)
 * against a real HTTP server: libmicrohttpd on 127.0.0.1 on a kernel-chosen
 * port, one thread per connection (so a slow answer does not hold the others
 * up), started inside the test. Also the URL template expansion (RFC 3986
 * percent-encoding).
 *
 * Server routes (GET):
 *   /ok        200 {"version":4,"state":"SHIPPED"}
 *   /empty     200 with an empty body
 *   /err       500 "boom"
 *   /slow      200 after SLOW_MS
 *   /delay     200 after DELAY_MS (the concurrency test)
 *   /echo/...  200, body = the request's Authorization header value (or
 *              "<none>"), a newline, the Accept header, a newline, and the
 *              decoded URL path
 *   /big?n=N   200 with N bytes of 'x'
 *   /redirect  302 to /ok
 */
#include "snapsrc_http_fetch.h"
#include "testutil.h"

#include <check.h>
#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOW_MS 2000
#define DELAY_MS 200
#define N_CONCURRENT 50
#define AUTH_ENV "SG_TEST_SNAPSHOT_AUTH"

static struct MHD_Daemon *srv;
static uint16_t srv_port;

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code,
                             const char *body, size_t len) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
                len, (void *)body, MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(r, "Content-Type", "application/json");
        enum MHD_Result ret = MHD_queue_response(c, code, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c,
                               const char *url, const char *method,
                               const char *version, const char *upload,
                               size_t *upload_size, void **con_cls) {
        (void)cls, (void)version, (void)upload, (void)upload_size,
                (void)con_cls;
        if (strcmp(method, "GET"))
                return reply(c, 405, "", 0);
        if (!strcmp(url, "/ok")) {
                const char *b = "{\"version\":4,\"state\":\"SHIPPED\"}";
                return reply(c, 200, b, strlen(b));
        }
        if (!strcmp(url, "/empty"))
                return reply(c, 200, "", 0);
        if (!strcmp(url, "/err"))
                return reply(c, 500, "boom", 4);
        if (!strcmp(url, "/slow")) {
                tu_sleep_ms(SLOW_MS);
                return reply(c, 200, "{}", 2);
        }
        if (!strcmp(url, "/delay")) {
                tu_sleep_ms(DELAY_MS);
                return reply(c, 200, "{}", 2);
        }
        if (!strncmp(url, "/echo/", 6)) {
                const char *auth = MHD_lookup_connection_value(
                        c, MHD_HEADER_KIND, "Authorization");
                const char *acc = MHD_lookup_connection_value(
                        c, MHD_HEADER_KIND, "Accept");
                char b[2048];
                int n = snprintf(b, sizeof(b), "%s\n%s\n%s",
                                 auth ? auth : "<none>", acc ? acc : "<none>",
                                 url + 6);
                return reply(c, 200, b, (size_t)n);
        }
        if (!strcmp(url, "/big")) {
                const char *ns = MHD_lookup_connection_value(
                        c, MHD_GET_ARGUMENT_KIND, "n");
                size_t n = ns ? strtoul(ns, NULL, 10) : 0;
                char *b = malloc(n + 1);
                memset(b, 'x', n);
                enum MHD_Result ret = reply(c, 200, b, n);
                free(b);
                return ret;
        }
        if (!strcmp(url, "/redirect")) {
                struct MHD_Response *r = MHD_create_response_from_buffer(
                        0, (void *)"", MHD_RESPMEM_PERSISTENT);
                MHD_add_response_header(r, "Location", "/ok");
                enum MHD_Result ret = MHD_queue_response(c, 302, r);
                MHD_destroy_response(r);
                return ret;
        }
        return reply(c, 404, "", 0);
}

static void srv_start(void) {
        srv = MHD_start_daemon(
                MHD_USE_INTERNAL_POLLING_THREAD |
                        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL,
                0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR,
                &(struct sockaddr_in){.sin_family = AF_INET,
                                      .sin_addr.s_addr =
                                              htonl(INADDR_LOOPBACK)},
                MHD_OPTION_CONNECTION_LIMIT, 200u, MHD_OPTION_END);
        ck_assert_ptr_nonnull(srv);
        const union MHD_DaemonInfo *di =
                MHD_get_daemon_info(srv, MHD_DAEMON_INFO_BIND_PORT);
        ck_assert_ptr_nonnull(di);
        srv_port = di->port;
        ck_assert_uint_gt(srv_port, 0);
}

static void srv_stop(void) {
        MHD_stop_daemon(srv);
        srv = NULL;
}

/** Completed transfers, copied out of the callback. */
typedef struct got {
        int n;
        char id[N_CONCURRENT + 8][64];
        long status[N_CONCURRENT + 8];
        char error[N_CONCURRENT + 8][512];
        bool has_body[N_CONCURRENT + 8];
        char body[N_CONCURRENT + 8][4096];
        size_t body_len[N_CONCURRENT + 8];
} got_t;

static void on_done(void *opaque, const sg_fetch_result_t *r) {
        got_t *g = opaque;
        ck_assert_int_lt(g->n, N_CONCURRENT + 8);
        int i = g->n++;
        snprintf(g->id[i], sizeof(g->id[i]), "%s", r->request_id);
        g->status[i] = r->status;
        snprintf(g->error[i], sizeof(g->error[i]), "%s",
                 r->error ? r->error : "");
        g->has_body[i] = r->body != NULL;
        g->body_len[i] = r->body_len;
        if (r->body) {
                size_t n = r->body_len < sizeof(g->body[i]) - 1
                                   ? r->body_len
                                   : sizeof(g->body[i]) - 1;
                memcpy(g->body[i], r->body, n);
                g->body[i][n] = '\0';
        }
}

/** Polls until @p want transfers completed or @p limit_ms passed. */
static void drain(sg_fetcher_t *f, got_t *g, int want, int64_t limit_ms) {
        int64_t end = mono_ms() + limit_ms;
        while (g->n < want && mono_ms() < end)
                sg_fetcher_poll(f, 50, on_done, g);
}

static sg_fetcher_t *fetcher(size_t max_body) {
        sg_fetcher_t *f = NULL;
        char es[256] = "";
        ck_assert_int_eq(sg_fetcher_new(max_body, &f, es, sizeof(es)), SG_OK);
        ck_assert_ptr_nonnull(f);
        return f;
}

static void submit(sg_fetcher_t *f, const char *id, const char *path,
                   int64_t timeout_ms) {
        char url[512], es[256] = "";
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", srv_port, path);
        ck_assert_msg(sg_fetcher_submit(f, id, url, AUTH_ENV, timeout_ms, es,
                                        sizeof(es)) == SG_OK,
                      "submit %s: %s", url, es);
}

static got_t *got_new(void) {
        got_t *g = calloc(1, sizeof(*g));
        ck_assert_ptr_nonnull(g);
        return g;
}

/* ------------------------------------------------------------------ */

START_TEST(test_ok_body) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        submit(f, "orders/0/abc/1", "/ok", 5000);
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 1);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_str_eq(g->id[0], "orders/0/abc/1");
        ck_assert_int_eq(g->status[0], 200);
        ck_assert_str_eq(g->error[0], "");
        ck_assert(g->has_body[0]);
        ck_assert_str_eq(g->body[0], "{\"version\":4,\"state\":\"SHIPPED\"}");
        ck_assert_uint_eq(g->body_len[0], strlen(g->body[0]));
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 0);
        /* Nothing left: a poll reports nothing and does not wait. */
        int64_t t0 = mono_ms();
        ck_assert_int_eq(sg_fetcher_poll(f, 1000, on_done, g), 0);
        ck_assert_int_lt(mono_ms() - t0, 500);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_empty_body) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        submit(f, "e", "/empty", 5000);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_int_eq(g->status[0], 200);
        ck_assert(g->has_body[0]); /* empty, not NULL: a response came */
        ck_assert_uint_eq(g->body_len[0], 0);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_status_500) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        submit(f, "r500", "/err", 5000);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_str_eq(g->id[0], "r500");
        ck_assert_int_eq(g->status[0], 500);
        ck_assert_str_eq(g->error[0], "");
        ck_assert(g->has_body[0]);
        ck_assert_str_eq(g->body[0], "boom");
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_redirect_not_followed) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        submit(f, "r302", "/redirect", 5000);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_int_eq(g->status[0], 302);
        ck_assert_uint_eq(g->body_len[0], 0);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_timeout) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        int64_t t0 = mono_ms();
        submit(f, "slow", "/slow", 300);
        drain(f, g, 1, 10000);
        int64_t took = mono_ms() - t0;
        ck_assert_int_eq(g->n, 1);
        ck_assert_int_eq(g->status[0], 0);
        ck_assert(!g->has_body[0]);
        ck_assert_msg(strstr(g->error[0], "imeout") ||
                              strstr(g->error[0], "timed out"),
                      "error: %s", g->error[0]);
        /* Ended by the 300 ms timeout, not by the 2 s answer. */
        ck_assert_int_ge(took, 250);
        ck_assert_int_lt(took, SLOW_MS - 200);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_connection_refused) {
        /* A bound but never listening socket: connect() is refused. */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(s, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        socklen_t al = sizeof(a);
        ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &al), 0);

        setenv(AUTH_ENV, "Bearer s3cr3t-token", 1);
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        char url[128], es[256] = "";
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/orders/x",
                 ntohs(a.sin_port));
        ck_assert_int_eq(sg_fetcher_submit(f, "refused", url, AUTH_ENV, 5000,
                                           es, sizeof(es)),
                         SG_OK);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_str_eq(g->id[0], "refused");
        ck_assert_int_eq(g->status[0], 0);
        ck_assert(!g->has_body[0]);
        ck_assert_str_ne(g->error[0], "");
        /* The secret never shows in an error. */
        ck_assert_ptr_null(strstr(g->error[0], "s3cr3t"));
        unsetenv(AUTH_ENV);
        close(s);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_auth_header) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();

        setenv(AUTH_ENV, "Bearer abc.def-123", 1);
        submit(f, "with", "/echo/a", 5000);
        /* Read at submit time: a later change does not alter it. */
        unsetenv(AUTH_ENV);
        submit(f, "without", "/echo/b", 5000);
        drain(f, g, 2, 10000);
        ck_assert_int_eq(g->n, 2);
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(g->status[i], 200);
                if (!strcmp(g->id[i], "with"))
                        ck_assert_str_eq(g->body[i], "Bearer abc.def-123\n"
                                                     "application/json\na");
                else
                        ck_assert_str_eq(g->body[i],
                                         "<none>\napplication/json\nb");
        }
        ck_assert_str_ne(g->id[0], g->id[1]);

        /* An empty variable sends no header either; so does no variable. */
        setenv(AUTH_ENV, "", 1);
        submit(f, "empty", "/echo/c", 5000);
        char url[128], es[256] = "";
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/echo/d", srv_port);
        ck_assert_int_eq(
                sg_fetcher_submit(f, "noenv", url, NULL, 5000, es, sizeof(es)),
                SG_OK);
        drain(f, g, 4, 10000);
        ck_assert_int_eq(g->n, 4);
        for (int i = 2; i < 4; i++)
                ck_assert_msg(!strncmp(g->body[i], "<none>\n", 7), "%s: %s",
                              g->id[i], g->body[i]);
        unsetenv(AUTH_ENV);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_auth_line_break_refused) {
        sg_fetcher_t *f = fetcher(1 << 20);
        char url[128], es[256] = "";
        setenv(AUTH_ENV, "Bearer x\r\nX-Evil: s3cr3t", 1);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/ok", srv_port);
        ck_assert_int_eq(sg_fetcher_submit(f, "bad", url, AUTH_ENV, 5000, es,
                                           sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(es, AUTH_ENV));
        ck_assert_ptr_null(strstr(es, "s3cr3t"));
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 0);
        unsetenv(AUTH_ENV);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_body_limit) {
        sg_fetcher_t *f = fetcher(1000);
        got_t *g = got_new();
        submit(f, "fits", "/big?n=1000", 5000);
        submit(f, "over", "/big?n=1001", 5000);
        submit(f, "far-over", "/big?n=200000", 5000);
        drain(f, g, 3, 10000);
        ck_assert_int_eq(g->n, 3);
        int seen = 0;
        for (int i = 0; i < 3; i++) {
                if (!strcmp(g->id[i], "fits")) {
                        ck_assert_int_eq(g->status[i], 200);
                        ck_assert_uint_eq(g->body_len[i], 1000);
                        seen |= 1;
                } else {
                        ck_assert_int_eq(g->status[i], 0);
                        ck_assert(!g->has_body[i]);
                        ck_assert_str_eq(g->error[i],
                                         "response body over 1000 bytes");
                        seen |= !strcmp(g->id[i], "over") ? 2 : 4;
                }
        }
        ck_assert_int_eq(seen, 7);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_concurrent) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        char id[32];
        int64_t t0 = mono_ms();
        for (int i = 0; i < N_CONCURRENT; i++) {
                snprintf(id, sizeof(id), "c%d", i);
                submit(f, id, "/delay", 10000);
        }
        ck_assert_uint_eq(sg_fetcher_in_flight(f), N_CONCURRENT);
        drain(f, g, N_CONCURRENT, 20000);
        int64_t took = mono_ms() - t0;
        ck_assert_int_eq(g->n, N_CONCURRENT);
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 0);
        /* Each id exactly once, all 200. */
        for (int i = 0; i < N_CONCURRENT; i++) {
                snprintf(id, sizeof(id), "c%d", i);
                int hits = 0;
                for (int k = 0; k < g->n; k++)
                        if (!strcmp(g->id[k], id)) {
                                hits++;
                                ck_assert_int_eq(g->status[k], 200);
                        }
                ck_assert_int_eq(hits, 1);
        }
        /* Sequential would take N × 200 ms = 10 s; concurrent ~200 ms. */
        ck_assert_msg(took < N_CONCURRENT * DELAY_MS / 2,
                      "%d transfers took %lld ms", N_CONCURRENT,
                      (long long)took);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_poll_does_not_block) {
        /* With a slow transfer in flight, poll(0) returns at once. */
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        submit(f, "slow", "/slow", 10000);
        int64_t t0 = mono_ms();
        for (int i = 0; i < 20; i++)
                ck_assert_int_eq(sg_fetcher_poll(f, 0, on_done, g), 0);
        ck_assert_int_lt(mono_ms() - t0, SLOW_MS / 2);
        ck_assert_int_eq(g->n, 0);
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 1);
        /* Destroying aborts it; nothing is reported. */
        sg_fetcher_destroy(f);
        ck_assert_int_eq(g->n, 0);
        free(g);
}
END_TEST

START_TEST(test_encoded_aggregate_reaches_server) {
        sg_fetcher_t *f = fetcher(1 << 20);
        got_t *g = got_new();
        char tmpl[128], es[256] = "";
        snprintf(tmpl, sizeof(tmpl), "http://127.0.0.1:%u/echo/{aggregate}",
                 srv_port);
        const char agg[] = "a b/c?d#e&f=\xc3\xa9";
        char *url = sg_url_expand(tmpl, agg, strlen(agg));
        ck_assert_ptr_nonnull(url);
        ck_assert_int_eq(
                sg_fetcher_submit(f, "enc", url, NULL, 5000, es, sizeof(es)),
                SG_OK);
        drain(f, g, 1, 10000);
        ck_assert_int_eq(g->n, 1);
        ck_assert_int_eq(g->status[0], 200);
        /* The server decodes the path back to the exact id. */
        char want[256];
        snprintf(want, sizeof(want), "<none>\napplication/json\n%s", agg);
        ck_assert_str_eq(g->body[0], want);
        free(url);
        free(g);
        sg_fetcher_destroy(f);
}
END_TEST

START_TEST(test_bad_url) {
        sg_fetcher_t *f = fetcher(1 << 20);
        char es[256] = "";
        ck_assert_int_eq(sg_fetcher_submit(f, "x", "not a url", NULL, 5000, es,
                                           sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_str_ne(es, "");
        es[0] = '\0';
        ck_assert_int_eq(sg_fetcher_submit(f, "x", "file:///etc/passwd", NULL,
                                           5000, es, sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(es, "http"));
        ck_assert_int_eq(sg_fetcher_submit(f, "x", "http://127.0.0.1/", NULL, 0,
                                           es, sizeof(es)),
                         SG_ERR_INVALID);
        ck_assert_uint_eq(sg_fetcher_in_flight(f), 0);
        sg_fetcher_destroy(f);
        sg_fetcher_destroy(NULL);
        ck_assert_int_eq(sg_fetcher_new(0, &f, es, sizeof(es)), SG_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sg_url_expand                                                       */

START_TEST(test_url_expand_table) {
        static const struct {
                const char *tmpl, *agg, *want;
        } cases[] = {
                {"http://h/o/{aggregate}", "a b/c?d",
                 "http://h/o/a%20b%2Fc%3Fd"},
                {"http://h/{aggregate}", "order-1005", "http://h/order-1005"},
                /* unreserved kept: ALPHA DIGIT - . _ ~ */
                {"{aggregate}", "AZaz09-._~", "AZaz09-._~"},
                /* everything else escaped, uppercase hex */
                {"{aggregate}", "%+:@!$&'()*,;=#[]",
                 "%25%2B%3A%40%21%24%26%27%28%29%2A%2C%3B%3D%23%5B%5D"},
                /* UTF-8 bytes one by one: é = C3 A9, 💡 = F0 9F 92 A1 */
                {"http://h/{aggregate}", "caf\xc3\xa9-\xf0\x9f\x92\xa1",
                 "http://h/caf%C3%A9-%F0%9F%92%A1"},
                /* every occurrence */
                {"http://h/{aggregate}/x?id={aggregate}&k={aggregate}", "a/b",
                 "http://h/a%2Fb/x?id=a%2Fb&k=a%2Fb"},
                /* no placeholder: unchanged */
                {"http://h/static", "a", "http://h/static"},
                /* empty id */
                {"http://h/{aggregate}/", "", "http://h//"},
                /* near-misses stay as they are */
                {"{aggregat}{{aggregate}}", "q", "{aggregat}{q}"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *got = sg_url_expand(cases[i].tmpl, cases[i].agg,
                                          strlen(cases[i].agg));
                ck_assert_ptr_nonnull(got);
                ck_assert_msg(!strcmp(got, cases[i].want),
                              "case %zu: got \"%s\", want \"%s\"", i, got,
                              cases[i].want);
                free(got);
        }
}
END_TEST

START_TEST(test_url_expand_binary) {
        /* The id's length is explicit: NUL and control bytes are escaped. */
        const char agg[] = {'a', '\0', 'b', '\n', (char)0xff};
        char *got = sg_url_expand("x/{aggregate}", agg, sizeof(agg));
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, "x/a%00b%0A%FF");
        free(got);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("snapshot_http");
        TCase *tc = tcase_create("fetcher");
        tcase_add_checked_fixture(tc, srv_start, srv_stop);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_ok_body);
        tcase_add_test(tc, test_empty_body);
        tcase_add_test(tc, test_status_500);
        tcase_add_test(tc, test_redirect_not_followed);
        tcase_add_test(tc, test_timeout);
        tcase_add_test(tc, test_connection_refused);
        tcase_add_test(tc, test_auth_header);
        tcase_add_test(tc, test_auth_line_break_refused);
        tcase_add_test(tc, test_body_limit);
        tcase_add_test(tc, test_concurrent);
        tcase_add_test(tc, test_poll_does_not_block);
        tcase_add_test(tc, test_encoded_aggregate_reaches_server);
        tcase_add_test(tc, test_bad_url);
        suite_add_tcase(s, tc);
        TCase *tu = tcase_create("url_expand");
        tcase_add_test(tu, test_url_expand_table);
        tcase_add_test(tu, test_url_expand_binary);
        suite_add_tcase(s, tu);
        return s;
}

int main(void) {
        return tu_run_suite(suite());
}
