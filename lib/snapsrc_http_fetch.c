/*
 * snapsrc_http_fetch.c — the HTTP snapshot fetcher (snapsrc_http_fetch.h) on
 * libcurl's multi interface: one easy handle per GET, all driven from the
 * loop thread by sg_fetcher_poll(), so no transfer ever blocks the consumer
 * (snapshot refetch: "while one aggregate waits for its snapshot, every other
 * aggregate keeps flowing").
 *
 * Each transfer: GET only, http/https only, no redirects followed (a 3xx is
 * a non-200 answer, i.e. a failed attempt the engine retries), "Accept:
 * application/json", optional "Authorization" from the environment,
 * CURLOPT_TIMEOUT_MS bounding the whole transfer (connect included),
 * CURLOPT_NOSIGNAL (threads and signals stay the application's), and the
 * body bounded by max_body_bytes: the write callback refuses the byte that
 * would pass the bound, which aborts the transfer.
 *
 * Secrets: the Authorization value is read with getenv() at submit time,
 * copied into the transfer's header list only, and never placed in a log or
 * error text (curl's own error buffer does not carry request headers;
 * CURLOPT_VERBOSE stays off).
 */
#include "snapsrc_http_fetch.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** One GET in flight. */
typedef struct sg_xfer {
        struct sg_xfer *prev, *next; /**< fetcher's list of transfers */
        CURL *easy;
        struct curl_slist *hdrs;
        char *request_id;
        char *body; /**< received bytes, NUL-terminated */
        size_t len, cap;
        size_t max; /**< max_body_bytes */
        bool over;  /**< body passed max: aborted */
        char errbuf[CURL_ERROR_SIZE];
} sg_xfer_t;

struct sg_fetcher {
        CURLM *multi;
        size_t max_body_bytes;
        size_t in_flight;
        sg_xfer_t *xfers; /**< head of the list of transfers */
};

static pthread_once_t sg_curl_once = PTHREAD_ONCE_INIT;
static CURLcode sg_curl_init_rc = CURLE_FAILED_INIT;

static void sg_curl_init(void) {
        sg_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

sg_err_t sg_fetcher_new(size_t max_body_bytes, sg_fetcher_t **fp, char *errstr,
                        size_t errstr_size) {
        if (!fp || max_body_bytes == 0) {
                sg_errf(errstr, errstr_size,
                        "sg_fetcher_new: invalid argument");
                return SG_ERR_INVALID;
        }
        pthread_once(&sg_curl_once, sg_curl_init);
        if (sg_curl_init_rc != CURLE_OK) {
                sg_errf(errstr, errstr_size, "curl_global_init: %s",
                        curl_easy_strerror(sg_curl_init_rc));
                return SG_ERR_FATAL;
        }
        sg_fetcher_t *f = calloc(1, sizeof(*f));
        if (!f) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        f->multi = curl_multi_init();
        if (!f->multi) {
                free(f);
                sg_errf(errstr, errstr_size, "curl_multi_init failed");
                return SG_ERR_FATAL;
        }
        f->max_body_bytes = max_body_bytes;
        *fp = f;
        return SG_OK;
}

/** CURLOPT_WRITEFUNCTION: appends to the body; past the bound, aborts. */
static size_t xfer_write(char *ptr, size_t size, size_t nmemb, void *ud) {
        sg_xfer_t *x = ud;
        size_t n = size * nmemb;
        if (n > x->max - x->len) {
                x->over = true;
                return 0; /* != n: curl aborts with CURLE_WRITE_ERROR */
        }
        if (x->len + n + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 1024;
                while (cap < x->len + n + 1)
                        cap *= 2;
                char *b = realloc(x->body, cap);
                if (!b)
                        return 0;
                x->body = b;
                x->cap = cap;
        }
        memcpy(x->body + x->len, ptr, n);
        x->len += n;
        x->body[x->len] = '\0';
        return n;
}

static void xfer_free(sg_xfer_t *x) {
        if (!x)
                return;
        if (x->easy)
                curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->hdrs);
        free(x->request_id);
        free(x->body);
        free(x);
}

/** Detaches @p x from the fetcher (multi and list) and frees it. */
static void xfer_finish(sg_fetcher_t *f, sg_xfer_t *x) {
        curl_multi_remove_handle(f->multi, x->easy);
        if (x->prev)
                x->prev->next = x->next;
        else
                f->xfers = x->next;
        if (x->next)
                x->next->prev = x->prev;
        f->in_flight--;
        xfer_free(x);
}

/** True if @p url parses as an absolute http or https URL. */
static bool url_ok(const char *url, char *errstr, size_t errstr_size) {
        CURLU *u = curl_url();
        char *scheme = NULL;
        bool ok = false;
        if (!u) {
                sg_errf(errstr, errstr_size, "out of memory");
                return false;
        }
        CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
        if (uc != CURLUE_OK)
                sg_errf(errstr, errstr_size, "invalid URL \"%s\": %s", url,
                        curl_url_strerror(uc));
        else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
                 (strcmp(scheme, "http") && strcmp(scheme, "https")))
                sg_errf(errstr, errstr_size,
                        "invalid URL \"%s\": only http and https are allowed",
                        url);
        else
                ok = true;
        curl_free(scheme);
        curl_url_cleanup(u);
        return ok;
}

sg_err_t sg_fetcher_submit(sg_fetcher_t *f, const char *request_id,
                           const char *url, const char *auth_env,
                           int64_t timeout_ms, char *errstr,
                           size_t errstr_size) {
        if (!f || !request_id || !url || timeout_ms <= 0) {
                sg_errf(errstr, errstr_size,
                        "sg_fetcher_submit: invalid argument");
                return SG_ERR_INVALID;
        }
        if (!url_ok(url, errstr, errstr_size))
                return SG_ERR_INVALID;

        sg_xfer_t *x = calloc(1, sizeof(*x));
        if (!x || !(x->request_id = strdup(request_id)) ||
            !(x->easy = curl_easy_init())) {
                xfer_free(x);
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        x->max = f->max_body_bytes;

        struct curl_slist *h =
                curl_slist_append(NULL, "Accept: application/json");
        if (!h)
                goto nomem;
        x->hdrs = h;
        const char *auth = auth_env ? getenv(auth_env) : NULL;
        if (auth && *auth) {
                /* A CR or LF would smuggle a header or a request: refuse the
                 * value without showing it (it is a secret). */
                if (strpbrk(auth, "\r\n")) {
                        xfer_free(x);
                        sg_errf(errstr, errstr_size,
                                "environment variable %s holds a line break; "
                                "not usable as an Authorization header (value "
                                "not shown: secret)",
                                auth_env);
                        return SG_ERR_INVALID;
                }
                size_t n = strlen("Authorization: ") + strlen(auth) + 1;
                char *line = malloc(n);
                if (!line)
                        goto nomem;
                snprintf(line, n, "Authorization: %s", auth);
                h = curl_slist_append(x->hdrs, line);
                /* Wipe our copy; curl's copy lives until the transfer ends. */
                memset(line, 0, n);
                free(line);
                if (!h)
                        goto nomem;
                x->hdrs = h;
        }

        CURL *e = x->easy;
        CURLcode rc = CURLE_OK;
#define SETOPT(opt, val)                                                       \
        do {                                                                   \
                if (rc == CURLE_OK)                                            \
                        rc = curl_easy_setopt(e, opt, val);                    \
        } while (0)
        SETOPT(CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
        SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
#else
        SETOPT(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
        SETOPT(CURLOPT_HTTPGET, 1L);
        SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
        SETOPT(CURLOPT_NOSIGNAL, 1L);
        SETOPT(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        SETOPT(CURLOPT_HTTPHEADER, x->hdrs);
        SETOPT(CURLOPT_USERAGENT, "seqgate/" SG_VERSION_STR);
        SETOPT(CURLOPT_WRITEFUNCTION, xfer_write);
        SETOPT(CURLOPT_WRITEDATA, x);
        SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
        SETOPT(CURLOPT_PRIVATE, x);
        /* A Content-Length over the bound fails before any body byte. */
        SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->max_body_bytes);
#undef SETOPT
        if (rc != CURLE_OK) {
                xfer_free(x);
                sg_errf(errstr, errstr_size, "configuring the transfer: %s",
                        curl_easy_strerror(rc));
                return rc == CURLE_OUT_OF_MEMORY ? SG_ERR_NOMEM
                                                 : SG_ERR_INVALID;
        }
        CURLMcode mc = curl_multi_add_handle(f->multi, e);
        if (mc != CURLM_OK) {
                xfer_free(x);
                sg_errf(errstr, errstr_size, "starting the transfer: %s",
                        curl_multi_strerror(mc));
                return mc == CURLM_OUT_OF_MEMORY ? SG_ERR_NOMEM : SG_ERR_FATAL;
        }
        x->next = f->xfers;
        if (f->xfers)
                f->xfers->prev = x;
        f->xfers = x;
        f->in_flight++;
        return SG_OK;

nomem:
        xfer_free(x);
        sg_errf(errstr, errstr_size, "out of memory");
        return SG_ERR_NOMEM;
}

/** Hands every completed transfer to @p cb; returns how many. */
static int fetcher_reap(sg_fetcher_t *f, sg_fetch_cb *cb, void *opaque) {
        int done = 0, left;
        CURLMsg *m;
        while ((m = curl_multi_info_read(f->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                sg_xfer_t *x = NULL;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
                                  (char **)&x);
                if (!x)
                        continue;
                CURLcode rc = m->data.result;
                char err[CURL_ERROR_SIZE + 64];
                sg_fetch_result_t res = {.request_id = x->request_id};
                if (rc == CURLE_OK) {
                        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE,
                                          &res.status);
                }
                if (rc == CURLE_OK && res.status > 0) {
                        res.body = x->body ? x->body : "";
                        res.body_len = x->len;
                } else {
                        res.status = 0;
                        if (x->over || rc == CURLE_FILESIZE_EXCEEDED)
                                snprintf(err, sizeof(err),
                                         "response body over %zu bytes",
                                         x->max);
                        else if (rc == CURLE_OK)
                                snprintf(err, sizeof(err),
                                         "no HTTP status received");
                        else
                                snprintf(err, sizeof(err), "%s",
                                         x->errbuf[0] ? x->errbuf
                                                      : curl_easy_strerror(rc));
                        res.error = err;
                }
                if (cb)
                        cb(opaque, &res);
                xfer_finish(f, x);
                done++;
        }
        return done;
}

int sg_fetcher_poll(sg_fetcher_t *f, int wait_ms, sg_fetch_cb *cb,
                    void *opaque) {
        int running = 0, done;
        if (!f || f->in_flight == 0)
                return 0;
        curl_multi_perform(f->multi, &running);
        done = fetcher_reap(f, cb, opaque);
        if (done == 0 && wait_ms > 0 && f->in_flight > 0) {
                curl_multi_poll(f->multi, NULL, 0, wait_ms, NULL);
                curl_multi_perform(f->multi, &running);
                done = fetcher_reap(f, cb, opaque);
        }
        return done;
}

size_t sg_fetcher_in_flight(const sg_fetcher_t *f) {
        return f ? f->in_flight : 0;
}

void sg_fetcher_destroy(sg_fetcher_t *f) {
        if (!f)
                return;
        while (f->xfers) {
                /* the head has no prev (sg_fetcher_submit links it so);
                 * scan-build would free it and read it again */
                assert(!f->xfers->prev);
                xfer_finish(f, f->xfers);
        }
        curl_multi_cleanup(f->multi);
        free(f);
}

/** RFC 3986 §2.3 unreserved characters. */
static bool url_unreserved(unsigned char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
               c == '~';
}

char *sg_url_expand(const char *tmpl, const char *aggregate,
                    size_t aggregate_len) {
        static const char placeholder[] = "{aggregate}";
        static const char hex[] = "0123456789ABCDEF";
        const size_t plen = sizeof(placeholder) - 1;
        if (!tmpl || (!aggregate && aggregate_len > 0))
                return NULL;

        /* RFC 3986 §2.1: percent-encode every byte but the unreserved ones,
         * with uppercase hex digits. */
        size_t enc_len = 0;
        for (size_t i = 0; i < aggregate_len; i++)
                enc_len += url_unreserved((unsigned char)aggregate[i]) ? 1 : 3;
        size_t n = 0;
        for (const char *p = tmpl; (p = strstr(p, placeholder)); p += plen)
                n++;
        size_t tlen = strlen(tmpl);
        size_t out_len = tlen - n * plen + n * enc_len;
        char *out = malloc(out_len + 1), *o = out;
        if (!out)
                return NULL;
        const char *p = tmpl, *hit;
        while ((hit = strstr(p, placeholder))) {
                memcpy(o, p, (size_t)(hit - p));
                o += hit - p;
                for (size_t i = 0; i < aggregate_len; i++) {
                        unsigned char c = (unsigned char)aggregate[i];
                        if (url_unreserved(c)) {
                                *o++ = (char)c;
                        } else {
                                *o++ = '%';
                                *o++ = hex[c >> 4];
                                *o++ = hex[c & 15];
                        }
                }
                p = hit + plen;
        }
        size_t rest = strlen(p);
        memcpy(o, p, rest + 1);
        return out;
}

/* ------------------------------------------------------------------ */
/* The Kafka loop's transfers (snapsrc_http_fetch.h)                   */

/** A completed transfer waiting for (or in) a batch. */
typedef struct sg_http_done {
        char *request_id; /**< owned; the record's key */
        char *body;       /**< owned; NULL when no response came */
        size_t body_len;
        char *error;         /**< owned; curl's message, or NULL */
        char status[24];     /**< decimal HTTP status, "0": no response */
        sg_header_t hdrs[2]; /**< SG_H_HTTP_STATUS [, SG_H_HTTP_ERROR] */
} sg_http_done_t;

/** An SG_EFFECT_HTTP_GET copied out of the processor (its memory ends with
 *  batch_commit; the GET starts after it). */
typedef struct sg_http_req {
        char *request_id, *url, *auth_env; /**< owned; auth_env may be NULL */
        int64_t timeout_ms;
} sg_http_req_t;

struct sg_snapshot_http {
        size_t max_body;
        sg_snapshot_http_log_cb *log;
        void *log_opaque;
        sg_fetcher_t *fetcher; /**< NULL until an "http" source needs it */
        sg_http_done_t *done;  /**< completed, not yet committed */
        size_t done_cnt, done_cap;
        size_t batch_cnt;  /**< done[0..n) are in the batch */
        sg_record_t *recs; /**< their records, built per batch */
        size_t recs_cap;
        sg_http_req_t *reqs; /**< GETs of the batch, started on commit */
        size_t req_cnt, req_cap;
};

sg_err_t sg_snapshot_http_new(size_t max_body_bytes,
                              sg_snapshot_http_log_cb *log, void *log_opaque,
                              sg_snapshot_http_t **hp) {
        sg_snapshot_http_t *h = calloc(1, sizeof(*h));
        if (!h)
                return SG_ERR_NOMEM;
        h->max_body = max_body_bytes;
        h->log = log;
        h->log_opaque = log_opaque;
        *hp = h;
        return SG_OK;
}

sg_err_t sg_snapshot_http_open(sg_snapshot_http_t *h, char *errstr,
                               size_t errstr_size) {
        if (h->fetcher)
                return SG_OK;
        return sg_fetcher_new(h->max_body, &h->fetcher, errstr, errstr_size);
}

static void http_done_free(sg_http_done_t *d) {
        free(d->request_id);
        free(d->body);
        free(d->error);
}

/** sg_fetch_cb: keeps a completed transfer for the next batch. Runs only
 *  between batches (see snapsrc_http_fetch.h). */
static void http_on_done(void *opaque, const sg_fetch_result_t *res) {
        sg_snapshot_http_t *h = opaque;
        if (h->done_cnt == h->done_cap) {
                size_t cap = h->done_cap ? h->done_cap * 2 : 16;
                sg_http_done_t *d = realloc(h->done, cap * sizeof(*d));
                if (!d)
                        goto nomem;
                h->done = d;
                h->done_cap = cap;
        }
        sg_http_done_t *d = &h->done[h->done_cnt];
        memset(d, 0, sizeof(*d));
        d->request_id = strdup(res->request_id);
        if (res->body) {
                d->body = malloc(res->body_len ? res->body_len : 1);
                if (d->body && res->body_len)
                        memcpy(d->body, res->body, res->body_len);
                d->body_len = res->body_len;
        }
        if (res->error)
                d->error = strdup(res->error);
        if (!d->request_id || (res->body && !d->body) ||
            (res->error && !d->error)) {
                http_done_free(d);
                goto nomem;
        }
        snprintf(d->status, sizeof(d->status), "%ld", res->status);
        h->done_cnt++;
        return;
nomem:;
        /* The processor's own request timeout re-issues the request. */
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "request_id", res->request_id);
        cJSON_AddStringToObject(f, "error", "out of memory");
        h->log(h->log_opaque, SG_LOG_WARNING, "snapshot_http_result_dropped",
               f);
}

void sg_snapshot_http_poll(sg_snapshot_http_t *h, int wait_ms) {
        if (!h->fetcher || sg_fetcher_in_flight(h->fetcher) == 0)
                return;
        sg_fetcher_poll(h->fetcher, wait_ms, http_on_done, h);
}

size_t sg_snapshot_http_in_flight(const sg_snapshot_http_t *h) {
        return h->fetcher ? sg_fetcher_in_flight(h->fetcher) : 0;
}

size_t sg_snapshot_http_pending(const sg_snapshot_http_t *h) {
        return h->done_cnt;
}

void sg_snapshot_http_discard(sg_snapshot_http_t *h) {
        for (size_t i = 0; i < h->req_cnt; i++) {
                free(h->reqs[i].request_id);
                free(h->reqs[i].url);
                free(h->reqs[i].auth_env);
        }
        h->req_cnt = 0;
}

sg_err_t sg_snapshot_http_submit(sg_snapshot_http_t *h, const sg_effect_t *ef,
                                 char *errstr, size_t errstr_size) {
        if (!ef->url || !ef->request_id) {
                sg_errf(errstr, errstr_size,
                        "HTTP_GET effect without url or request_id");
                return SG_ERR_INVALID;
        }
        if (h->req_cnt == h->req_cap) {
                size_t cap = h->req_cap ? h->req_cap * 2 : 16;
                sg_http_req_t *r = realloc(h->reqs, cap * sizeof(*r));
                if (!r)
                        goto nomem;
                h->reqs = r;
                h->req_cap = cap;
        }
        sg_http_req_t *r = &h->reqs[h->req_cnt];
        r->request_id = strdup(ef->request_id);
        r->url = strdup(ef->url);
        r->auth_env = ef->auth_env ? strdup(ef->auth_env) : NULL;
        r->timeout_ms = ef->timeout_ms;
        if (!r->request_id || !r->url || (ef->auth_env && !r->auth_env)) {
                free(r->request_id);
                free(r->url);
                free(r->auth_env);
                goto nomem;
        }
        h->req_cnt++;
        return SG_OK;
nomem:
        sg_errf(errstr, errstr_size, "out of memory copying HTTP requests");
        return SG_ERR_NOMEM;
}

/** Starts the committed batch's GETs. A GET that cannot start is logged:
 *  the processor's request timeout re-issues it. */
static void http_reqs_start(sg_snapshot_http_t *h) {
        char es[512];
        if (h->req_cnt > 0 && !h->fetcher &&
            sg_fetcher_new(h->max_body, &h->fetcher, es, sizeof(es)) != SG_OK) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "error", es);
                cJSON_AddNumberToObject(f, "requests", (double)h->req_cnt);
                h->log(h->log_opaque, SG_LOG_ERR, "snapshot_http_submit_failed",
                       f);
        }
        for (size_t i = 0; h->fetcher && i < h->req_cnt; i++) {
                const sg_http_req_t *r = &h->reqs[i];
                es[0] = '\0';
                sg_err_t err = sg_fetcher_submit(h->fetcher, r->request_id,
                                                 r->url, r->auth_env,
                                                 r->timeout_ms, es, sizeof(es));
                if (err) {
                        cJSON *f = cJSON_CreateObject();
                        cJSON_AddStringToObject(f, "request_id", r->request_id);
                        cJSON_AddStringToObject(f, "error", sg_err2str(err));
                        cJSON_AddStringToObject(f, "reason", es);
                        h->log(h->log_opaque, SG_LOG_WARNING,
                               "snapshot_http_submit_failed", f);
                }
        }
        sg_snapshot_http_discard(h);
}

sg_err_t sg_snapshot_http_drain(sg_snapshot_http_t *h,
                                const sg_record_t **recsp, size_t *cntp) {
        if (h->done_cnt > h->recs_cap) {
                sg_record_t *hr = realloc(h->recs, h->done_cnt * sizeof(*hr));
                if (!hr)
                        return SG_ERR_NOMEM;
                h->recs = hr;
                h->recs_cap = h->done_cnt;
        }
        h->batch_cnt = h->done_cnt;
        for (size_t i = 0; i < h->batch_cnt; i++) {
                sg_http_done_t *d = &h->done[i];
                d->hdrs[0] = (sg_header_t){.name = SG_H_HTTP_STATUS,
                                           .value = d->status,
                                           .value_len = strlen(d->status)};
                d->hdrs[1] = (sg_header_t){
                        .name = SG_H_HTTP_ERROR,
                        .value = d->error,
                        .value_len = d->error ? strlen(d->error) : 0};
                h->recs[i] = (sg_record_t){
                        .topic = SG_SNAPSHOT_HTTP_TOPIC,
                        .partition = -1,
                        .offset = -1,
                        .timestamp_ms = -1,
                        .key = d->request_id,
                        .key_len = strlen(d->request_id),
                        .value = d->body,
                        .value_len = d->body ? d->body_len : 0,
                        .headers = d->hdrs,
                        .header_cnt = d->error ? 2 : 1,
                };
        }
        *recsp = h->recs;
        *cntp = h->batch_cnt;
        return SG_OK;
}

void sg_snapshot_http_commit(sg_snapshot_http_t *h) {
        size_t n = h->batch_cnt;
        for (size_t i = 0; i < n; i++)
                http_done_free(&h->done[i]);
        if (n > 0)
                memmove(h->done, h->done + n,
                        (h->done_cnt - n) * sizeof(*h->done));
        h->done_cnt -= n;
        h->batch_cnt = 0;
        http_reqs_start(h);
}

void sg_snapshot_http_abort(sg_snapshot_http_t *h) {
        h->batch_cnt = 0;
        sg_snapshot_http_discard(h);
}

void sg_snapshot_http_destroy(sg_snapshot_http_t *h) {
        if (!h)
                return;
        sg_fetcher_destroy(h->fetcher);
        for (size_t i = 0; i < h->done_cnt; i++)
                http_done_free(&h->done[i]);
        free(h->done);
        free(h->recs);
        sg_snapshot_http_discard(h);
        free(h->reqs);
        free(h);
}
