/*
 * http.c — the HTTP endpoint's server (http.h): address parsing, the route
 * table and the libmicrohttpd glue.
 */
#include "http.h"
#include "envelope.h"
#include "http_int.h"

#include <microhttpd.h>
#include <openssl/crypto.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SG_HTTP_ROUTES_MAX 32

typedef struct route {
        char *prefix;
        size_t len;
        sg_http_handler_fn *fn;
        void *opaque;
} route_t;

/* A connection the request deadline watches (see conn_notify()). */
typedef struct watch {
        struct watch *prev, *next;
        int fd;
        int64_t deadline_ms; /* monotonic */
        bool cut;            /* shut down by the watchdog */
} watch_t;

struct sg_http {
        sg_http_addr_t addr;
        bool read_api;
        route_t routes[SG_HTTP_ROUTES_MAX];
        size_t route_cnt;
        struct MHD_Daemon *mhd;
        uint16_t port;
        int64_t request_timeout_ms;

        /* HTTPS: the PEM texts libmicrohttpd reads (kept until stop) */
        char *tls_cert, *tls_key;
        /* credentials, and the paths served without them */
        sg_http_auth_t *auth;
        char **excluded;
        size_t excluded_cnt;
        bool excluded_set; /* sg_http_auth_exclude() replaced the default */

        /* the request deadline's watchdog: the connections (a list under
         * watch_mu) and the thread that cuts the late ones */
        pthread_mutex_t watch_mu;
        pthread_cond_t watch_cv;
        pthread_t watch_thread;
        bool watch_running, watch_stop;
        watch_t *watched;
};

/* Connection limits. One peer that opens connections and never finishes
 * a request must not lock the probes and the scrape out for the others
 * (the kubelet probes from the node's address, Prometheus from its own):
 * a per-peer limit well below the total, and idle connections closed
 * after a few seconds (a probe's or a scrape's request arrives at once). */
#define SG_HTTP_MAX_CONNECTIONS 512
#define SG_HTTP_MAX_PER_PEER 32
#define SG_HTTP_IDLE_TIMEOUT_S 10
/* A connection's memory: its request line and headers must fit (beyond:
 * 414 URI Too Long or 431 Request Header Fields Too Large, libmicrohttpd's
 * answers). libmicrohttpd's default, set here so that it is ours. */
#define SG_HTTP_CONN_MEMORY (32u * 1024u)

struct sg_http_request {
        struct MHD_Connection *conn;
        const char *path;
};

/* ---- address ----------------------------------------------------------- */

static bool port_parse(const char *s, uint16_t *out) {
        unsigned long v = 0;
        if (!*s)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return false;
                v = v * 10 + (unsigned long)(*s - '0');
                if (v > 65535)
                        return false;
        }
        *out = (uint16_t)v;
        return true;
}

sg_err_t sg_http_address_parse(const char *text, sg_http_addr_t *out,
                               char *errstr, size_t errstr_size) {
        char host[64];
        const char *port;
        uint16_t pn;

        memset(out, 0, sizeof(*out));
        if (!text || !text[0] || !strcmp(text, "off")) {
                out->off = true;
                return SG_OK;
        }
        bool v6 = text[0] == '[';
        if (v6) {
                const char *close = strchr(text, ']');
                if (!close || close[1] != ':' ||
                    (size_t)(close - text - 1) >= sizeof(host)) {
                        sg_errf(errstr, errstr_size,
                                "\"%s\": expected [IPv6 address]:port", text);
                        return SG_ERR_CONFIG;
                }
                memcpy(host, text + 1, (size_t)(close - text - 1));
                host[close - text - 1] = '\0';
                port = close + 2;
        } else {
                const char *colon = strrchr(text, ':');
                if (!colon || (size_t)(colon - text) >= sizeof(host) ||
                    memchr(text, ':', (size_t)(colon - text))) {
                        sg_errf(errstr, errstr_size,
                                "\"%s\": expected host:port, [v6]:port, "
                                "\"\" or off",
                                text);
                        return SG_ERR_CONFIG;
                }
                memcpy(host, text, (size_t)(colon - text));
                host[colon - text] = '\0';
                port = colon + 1;
        }
        if (!port_parse(port, &pn)) {
                sg_errf(errstr, errstr_size,
                        "\"%s\": the port must be a number 0..65535", text);
                return SG_ERR_CONFIG;
        }
        if (v6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->ss;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons(pn);
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
                        sg_errf(errstr, errstr_size,
                                "\"%s\": not an IPv6 address", host);
                        return SG_ERR_CONFIG;
                }
                out->ss_len = sizeof(*a);
                snprintf(out->text, sizeof(out->text), "[%s]:%u", host,
                         (unsigned)pn);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&out->ss;
                a->sin_family = AF_INET;
                a->sin_port = htons(pn);
                if (!strcmp(host, "localhost"))
                        snprintf(host, sizeof(host), "127.0.0.1");
                if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
                        sg_errf(errstr, errstr_size,
                                "\"%s\": not an IPv4 address (host names are "
                                "not resolved; use [v6]:port for IPv6)",
                                host);
                        return SG_ERR_CONFIG;
                }
                out->ss_len = sizeof(*a);
                snprintf(out->text, sizeof(out->text), "%s:%u", host,
                         (unsigned)pn);
        }
        return SG_OK;
}

/* ---- security ----------------------------------------------------------- */

/* Frees a private key's text, wiped first. */
static void key_free(char *key) {
        if (key) {
                OPENSSL_cleanse(key, strlen(key));
                free(key);
        }
}

/* The whole of file @p path, NUL-terminated, into *outp (malloc'd). */
static sg_err_t read_file(const char *path, char **outp, char *errstr,
                          size_t errstr_size) {
        FILE *fp = fopen(path, "rb");
        char *buf = NULL;
        size_t len = 0, cap = 0;
        if (!fp) {
                sg_errf(errstr, errstr_size, "cannot read %s: %s", path,
                        strerror(errno));
                return SG_ERR_IO;
        }
        for (;;) {
                if (len + 4096 + 1 > cap) {
                        char *nb = realloc(buf, cap = 2 * cap + 8192);
                        if (!nb) {
                                free(buf);
                                fclose(fp);
                                sg_errf(errstr, errstr_size, "out of memory");
                                return SG_ERR_NOMEM;
                        }
                        buf = nb;
                }
                size_t n = fread(buf + len, 1, 4096, fp);
                len += n;
                if (n < 4096)
                        break;
        }
        bool bad = ferror(fp) || len > (1u << 20);
        fclose(fp);
        if (bad) {
                free(buf);
                sg_errf(errstr, errstr_size,
                        "cannot read %s (an error, or larger than 1 MiB)",
                        path);
                return SG_ERR_IO;
        }
        buf[len] = '\0';
        *outp = buf;
        return SG_OK;
}

sg_err_t sg_http_tls_set(sg_http_t *srv, const char *cert_file,
                         const char *key_file, char *errstr,
                         size_t errstr_size) {
        if (!srv || srv->mhd || !cert_file || !key_file) {
                sg_errf(errstr, errstr_size, "sg_http_tls_set: invalid");
                return SG_ERR_INVALID;
        }
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
                sg_errf(errstr, errstr_size,
                        "libmicrohttpd was built without TLS (GnuTLS)");
                return SG_ERR_INVALID;
        }
        char *cert = NULL, *key = NULL;
        sg_err_t err = read_file(cert_file, &cert, errstr, errstr_size);
        if (!err)
                err = read_file(key_file, &key, errstr, errstr_size);
        if (err) {
                free(cert);
                free(key);
                return err;
        }
        free(srv->tls_cert);
        key_free(srv->tls_key);
        srv->tls_cert = cert;
        srv->tls_key = key;
        return SG_OK;
}

sg_err_t sg_http_user_add(sg_http_t *srv, const char *user, const char *hash,
                          char *errstr, size_t errstr_size) {
        if (!srv || srv->mhd) {
                sg_errf(errstr, errstr_size, "sg_http_user_add: invalid");
                return SG_ERR_INVALID;
        }
        return sg_http_auth_user_add(srv->auth, user, hash, errstr,
                                     errstr_size);
}

sg_err_t sg_http_token_add(sg_http_t *srv, const char *name, const char *digest,
                           char *errstr, size_t errstr_size) {
        if (!srv || srv->mhd) {
                sg_errf(errstr, errstr_size, "sg_http_token_add: invalid");
                return SG_ERR_INVALID;
        }
        return sg_http_auth_token_add(srv->auth, name, digest, errstr,
                                      errstr_size);
}

sg_err_t sg_http_auth_exclude(sg_http_t *srv, const char *path, char *errstr,
                              size_t errstr_size) {
        if (!srv || srv->mhd || (path && path[0] != '/')) {
                sg_errf(errstr, errstr_size, "sg_http_auth_exclude: invalid");
                return SG_ERR_INVALID;
        }
        if (!srv->excluded_set) { /* the first one replaces the default */
                for (size_t i = 0; i < srv->excluded_cnt; i++)
                        free(srv->excluded[i]);
                srv->excluded_cnt = 0;
                srv->excluded_set = true;
        }
        if (!path)
                return SG_OK; /* none excluded */
        char **e = realloc(srv->excluded, (srv->excluded_cnt + 1) * sizeof(*e));
        if (!e || !(e[srv->excluded_cnt] = strdup(path))) {
                if (e)
                        srv->excluded = e;
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        srv->excluded = e;
        srv->excluded_cnt++;
        return SG_OK;
}

/* ---- routes ------------------------------------------------------------- */

sg_err_t sg_http_new(const sg_http_addr_t *addr, bool read_api,
                     sg_http_t **srvp, char *errstr, size_t errstr_size) {
        if (!addr || addr->off || !srvp) {
                sg_errf(errstr, errstr_size, "sg_http_new: no address");
                return SG_ERR_INVALID;
        }
        sg_http_t *s = calloc(1, sizeof(*s));
        if (!s) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        s->addr = *addr;
        s->read_api = read_api;
        s->request_timeout_ms = SG_HTTP_REQUEST_TIMEOUT_MS;
        pthread_mutex_init(&s->watch_mu, NULL);
        pthread_cond_init(&s->watch_cv, NULL);
        if (!(s->auth = sg_http_auth_new())) {
                pthread_cond_destroy(&s->watch_cv);
                pthread_mutex_destroy(&s->watch_mu);
                free(s);
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        static const char *const def[] = SG_HTTP_AUTH_EXCLUDED;
        for (size_t i = 0; def[i]; i++)
                if (sg_http_auth_exclude(s, def[i], errstr, errstr_size)) {
                        sg_http_destroy(s);
                        return SG_ERR_NOMEM;
                }
        s->excluded_set = false;
        *srvp = s;
        return SG_OK;
}

sg_err_t sg_http_set_request_timeout(sg_http_t *srv, int64_t ms, char *errstr,
                                     size_t errstr_size) {
        if (!srv || srv->mhd || ms < 1) {
                sg_errf(errstr, errstr_size,
                        "sg_http_set_request_timeout: invalid (a started "
                        "server, or not positive)");
                return SG_ERR_INVALID;
        }
        srv->request_timeout_ms = ms;
        return SG_OK;
}

sg_err_t sg_http_route_add(sg_http_t *srv, const char *prefix,
                           sg_http_handler_fn *handler, void *opaque,
                           char *errstr, size_t errstr_size) {
        if (!srv || srv->mhd || !prefix || prefix[0] != '/' || !handler) {
                sg_errf(errstr, errstr_size,
                        "sg_http_route_add: invalid (a started server, or a "
                        "prefix not starting with /)");
                return SG_ERR_INVALID;
        }
        for (size_t i = 0; i < srv->route_cnt; i++)
                if (!strcmp(srv->routes[i].prefix, prefix)) {
                        sg_errf(errstr, errstr_size, "route %s: already added",
                                prefix);
                        return SG_ERR_INVALID;
                }
        if (srv->route_cnt == SG_HTTP_ROUTES_MAX) {
                sg_errf(errstr, errstr_size, "more than %d routes",
                        SG_HTTP_ROUTES_MAX);
                return SG_ERR_INVALID;
        }
        route_t *r = &srv->routes[srv->route_cnt];
        if (!(r->prefix = strdup(prefix))) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        r->len = strlen(prefix);
        r->fn = handler;
        r->opaque = opaque;
        srv->route_cnt++;
        return SG_OK;
}

/** The route answering @p path (the longest matching prefix), or NULL. */
static const route_t *route_find(const sg_http_t *srv, const char *path) {
        const route_t *best = NULL;
        if (!srv->read_api && !strncmp(path, "/v1/", 4))
                return NULL;
        for (size_t i = 0; i < srv->route_cnt; i++) {
                const route_t *r = &srv->routes[i];
                if (strncmp(path, r->prefix, r->len))
                        continue;
                char next = path[r->len];
                if (next && next != '/' && r->prefix[r->len - 1] != '/')
                        continue;
                if (!best || r->len > best->len)
                        best = r;
        }
        return best;
}

const char *sg_http_request_path(const sg_http_request_t *req) {
        return req->path;
}

const char *sg_http_request_arg(const sg_http_request_t *req,
                                const char *name) {
        return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND,
                                           name);
}

typedef struct args_iter {
        const char *name;
        const char **out;
        size_t max, cnt;
} args_iter_t;

static enum MHD_Result args_visit(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value) {
        args_iter_t *it = cls;
        (void)kind;
        if (key && !strcmp(key, it->name)) {
                if (it->cnt < it->max)
                        it->out[it->cnt] = value ? value : "";
                it->cnt++;
        }
        return MHD_YES;
}

size_t sg_http_request_args(const sg_http_request_t *req, const char *name,
                            const char **out, size_t max) {
        args_iter_t it = {.name = name, .out = out, .max = max};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, args_visit,
                                  &it);
        return it.cnt;
}

typedef struct unknown_iter {
        const char *const *known;
        const char *first;
} unknown_iter_t;

static enum MHD_Result unknown_visit(void *cls, enum MHD_ValueKind kind,
                                     const char *key, const char *value) {
        unknown_iter_t *it = cls;
        (void)kind;
        (void)value;
        if (!key)
                return MHD_YES;
        for (const char *const *k = it->known; *k; k++)
                if (!strcmp(*k, key))
                        return MHD_YES;
        it->first = key;
        return MHD_NO;
}

const char *sg_http_request_unknown_arg(const sg_http_request_t *req,
                                        const char *const *known) {
        unknown_iter_t it = {.known = known};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND,
                                  unknown_visit, &it);
        return it.first;
}

/* ---- libmicrohttpd ------------------------------------------------------ */

/* Queues @p status with @p body (taken) and @p hdrs: name, value, ...,
 * NULL (NULL: none). */
static enum MHD_Result answer(struct MHD_Connection *conn, int status,
                              const char *ctype, char *body, size_t len,
                              const char *const *hdrs) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
                len, body ? body : (void *)"",
                body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        for (size_t i = 0; hdrs && hdrs[i]; i += 2)
                MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
        enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, int status,
                                   const char *json, const char *const *hdrs) {
        char *b = strdup(json);
        return answer(conn, b ? status : 500, "application/json", b,
                      b ? strlen(b) : 0, hdrs);
}

static bool hex_digit(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
               (c >= 'A' && c <= 'F');
}

/* MHD_OPTION_UNESCAPE_CALLBACK: libmicrohttpd's own decoding of %XX in
 * the path and the arguments, except that what must not reach a handler
 * becomes 0xFF, a byte that is never UTF-8, so text_ok() refuses it:
 *  - a decoded NUL: values reach the handlers as C strings, and a NUL
 *    would silently cut "e-1%00x" to "e-1";
 *  - a '%' not followed by two hex digits (RFC 3986 §2.1), which
 *    libmicrohttpd keeps as it is: "e-1%zz" is no id anybody meant. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s) {
        (void)cls;
        (void)conn;
        for (char *p = strchr(s, '%'); p; p = strchr(p + 1, '%'))
                if (!hex_digit(p[1]) || !hex_digit(p[2]))
                        *p = (char)0xFF;
        size_t n = MHD_http_unescape(s);
        for (char *p = memchr(s, 0, n); p;
             p = memchr(p, 0, n - (size_t)(p - s)))
                *p = (char)0xFF;
        return n;
}

static enum MHD_Result text_visit(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value) {
        bool *ok = cls;
        (void)kind;
        if ((key && !sg_utf8_valid(key, strlen(key))) ||
            (value && !sg_utf8_valid(value, strlen(value))))
                *ok = false;
        return *ok ? MHD_YES : MHD_NO;
}

/* The path and every argument name and value are UTF-8 text (RFC 3629)
 * without NUL and without a malformed %-escape (unescape()): the handlers
 * put them into JSON answers and store lookups. */
static bool text_ok(struct MHD_Connection *conn, const char *url) {
        bool ok = sg_utf8_valid(url, strlen(url));
        if (ok)
                MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND,
                                          text_visit, &ok);
        return ok;
}

/* ---- the request deadline ----------------------------------------------
 *
 * libmicrohttpd closes a connection idle for SG_HTTP_IDLE_TIMEOUT_S, but a
 * client that sends its request a byte every few seconds is never idle
 * that long and holds the connection as long as it likes. So each
 * exchange has a deadline: a connection must deliver its request (line and
 * headers) within request_timeout_ms of its start or of its previous
 * answer's end, and take its answer within request_timeout_ms of the
 * request. A watchdog thread shuts down (shutdown(2)) the socket of a
 * connection past its deadline; libmicrohttpd sees the end of the stream
 * and closes it. The socket is closed only after the CLOSED notification
 * (libmicrohttpd's cleanup order), which takes watch_mu, so the watchdog
 * never shuts down a descriptor that was closed and reused. */

static void watch_arm(sg_http_t *srv, watch_t *w) {
        pthread_mutex_lock(&srv->watch_mu);
        w->deadline_ms = sg_clock_mono_ms() + srv->request_timeout_ms;
        pthread_mutex_unlock(&srv->watch_mu);
}

static watch_t *watch_of(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: a connection starts (watched from now) or
 * closes (forgotten before libmicrohttpd closes its socket). */
static void conn_notify(void *cls, struct MHD_Connection *conn,
                        void **socket_context,
                        enum MHD_ConnectionNotificationCode toe) {
        sg_http_t *srv = cls;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                        conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                watch_t *w = ci ? calloc(1, sizeof(*w)) : NULL;
                *socket_context = w;
                if (!w)
                        return; /* not watched: the idle timeout still is */
                w->fd = ci->connect_fd;
                pthread_mutex_lock(&srv->watch_mu);
                w->deadline_ms = sg_clock_mono_ms() + srv->request_timeout_ms;
                w->next = srv->watched;
                if (w->next)
                        w->next->prev = w;
                srv->watched = w;
                pthread_mutex_unlock(&srv->watch_mu);
                return;
        }
        watch_t *w = *socket_context;
        if (!w)
                return;
        pthread_mutex_lock(&srv->watch_mu);
        if (w->prev)
                w->prev->next = w->next;
        else
                srv->watched = w->next;
        if (w->next)
                w->next->prev = w->prev;
        pthread_mutex_unlock(&srv->watch_mu);
        free(w);
        *socket_context = NULL;
}

/* MHD_OPTION_NOTIFY_COMPLETED: an answer was sent (or the request ended);
 * the next request on the connection has its own deadline. */
static void request_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        (void)con_cls;
        (void)toe;
        watch_t *w = watch_of(conn);
        if (w)
                watch_arm(cls, w);
}

static void *watchdog(void *arg) {
        sg_http_t *srv = arg;
        pthread_mutex_lock(&srv->watch_mu);
        while (!srv->watch_stop) {
                int64_t now = sg_clock_mono_ms();
                for (watch_t *w = srv->watched; w; w = w->next)
                        if (!w->cut && w->deadline_ms <= now) {
                                w->cut = true;
                                shutdown(w->fd, SHUT_RDWR);
                        }
                /* a quarter of a second late at most */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 250 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&srv->watch_cv, &srv->watch_mu, &ts);
        }
        pthread_mutex_unlock(&srv->watch_mu);
        return NULL;
}

/* Whether the request may go on: no credentials are configured, its path
 * is excluded, or its Authorization header holds valid ones; else the 401
 * (with the schemes to use, RFC 9110 §11.6.1) or the 429 (password checks
 * throttled, http_auth.c) is queued into *answeredp. */
static bool authorized(sg_http_t *srv, struct MHD_Connection *conn,
                       const char *url, enum MHD_Result *answeredp) {
        if (!sg_http_auth_on(srv->auth))
                return true;
        for (size_t i = 0; i < srv->excluded_cnt; i++)
                if (!strcmp(srv->excluded[i], url))
                        return true;
        const char *h = MHD_lookup_connection_value(
                conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        switch (sg_http_auth_check(srv->auth, h)) {
        case SG_HTTP_AUTH_OK:
                return true;
        case SG_HTTP_AUTH_THROTTLED: {
                static const char *const retry[] = {MHD_HTTP_HEADER_RETRY_AFTER,
                                                    "1", NULL};
                *answeredp = answer_text(
                        conn, MHD_HTTP_TOO_MANY_REQUESTS,
                        "{\"error\":\"too many password checks; try again "
                        "in a second\"}\n",
                        retry);
                return false;
        }
        default: {
                static const char *const challenge[] = {
                        MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                        "Basic realm=\"seqgate\", charset=\"UTF-8\"",
                        MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                        "Bearer realm=\"seqgate\"", NULL};
                *answeredp =
                        answer_text(conn, MHD_HTTP_UNAUTHORIZED,
                                    "{\"error\":\"unauthorized: credentials "
                                    "required\"}\n",
                                    challenge);
                return false;
        }
        }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
        sg_http_t *srv = cls;
        (void)version;
        (void)upload;
        watch_t *w = watch_of(conn);
        if (w) /* the request arrived: now its answer has a deadline */
                watch_arm(srv, w);
        static const char *const allow[] = {MHD_HTTP_HEADER_ALLOW, "GET, HEAD",
                                            NULL};
        if (strcmp(method, MHD_HTTP_METHOD_GET) &&
            strcmp(method, MHD_HTTP_METHOD_HEAD)) {
                /* answer at once; a request body is not read */
                *upload_size = 0;
                return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                                   "{\"error\":\"method not allowed\"}\n",
                                   allow);
        }
        (void)con_cls;
        enum MHD_Result denied;
        if (!authorized(srv, conn, url, &denied))
                return denied;
        if (!text_ok(conn, url))
                return answer_text(conn, MHD_HTTP_BAD_REQUEST,
                                   "{\"error\":\"the path or an argument is "
                                   "not UTF-8 text, or holds a NUL (%00) or "
                                   "a malformed %-escape\"}\n",
                                   NULL);
        const route_t *r = route_find(srv, url);
        if (!r)
                return answer_text(conn, MHD_HTTP_NOT_FOUND,
                                   "{\"error\":\"not found\"}\n", NULL);
        sg_http_request_t req = {.conn = conn, .path = url};
        sg_http_response_t resp = {.status = 500, .content_type = "text/plain"};
        r->fn(r->opaque, &req, &resp);
        if (!resp.body)
                return answer_text(conn, 500, "{\"error\":\"out of memory\"}\n",
                                   NULL);
        return answer(conn, resp.status, resp.content_type, resp.body,
                      resp.body_len, NULL);
}

sg_err_t sg_http_address_probe(const sg_http_addr_t *a, char *errstr,
                               size_t errstr_size) {
        if (a->off)
                return SG_OK;
        int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                sg_errf(errstr, errstr_size,
                        "cannot listen on %s (http.address): %s", a->text,
                        strerror(errno));
                return SG_ERR_IO;
        }
        /* as libmicrohttpd sets its listening socket: SO_REUSEADDR (a port
         * in TIME_WAIT is free), an IPv6 socket IPv6 only */
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (a->ss.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        int rc = bind(fd, (const struct sockaddr *)&a->ss, a->ss_len),
            e = errno;
        close(fd);
        if (rc == 0)
                return SG_OK;
        sg_errf(errstr, errstr_size, "cannot listen on %s (http.address): %s%s",
                a->text, strerror(e),
                e == EADDRINUSE ? " (another process listens there; stop it "
                                  "or choose another port)"
                                : "");
        errno = e;
        return SG_ERR_IO;
}

sg_err_t sg_http_start(sg_http_t *srv, char *errstr, size_t errstr_size) {
        if (!srv || srv->mhd) {
                sg_errf(errstr, errstr_size, "sg_http_start: invalid");
                return SG_ERR_INVALID;
        }
        /* MHD_USE_AUTO: poll or epoll, so that descriptors above
         * FD_SETSIZE are served too */
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
        if (srv->addr.ss.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        /* HTTPS: TLS 1.2 and 1.3 only (GnuTLS priority string) */
        struct MHD_OptionItem tls[] = {
                {MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert},
                {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key},
                {MHD_OPTION_HTTPS_PRIORITIES, 0,
                 (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
                {MHD_OPTION_END, 0, NULL},
        };
        if (srv->tls_cert)
                flags |= MHD_USE_TLS;
        errno = 0;
        /* no MHD_USE_ERROR_LOG: the library never prints */
        srv->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
                (struct sockaddr *)&srv->addr.ss, MHD_OPTION_CONNECTION_LIMIT,
                (unsigned)SG_HTTP_MAX_CONNECTIONS,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                (unsigned)SG_HTTP_MAX_PER_PEER, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned)SG_HTTP_IDLE_TIMEOUT_S,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SG_HTTP_CONN_MEMORY,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                MHD_OPTION_NOTIFY_CONNECTION, conn_notify, srv,
                MHD_OPTION_NOTIFY_COMPLETED, request_done, srv,
                MHD_OPTION_ARRAY, srv->tls_cert ? tls : tls + 3,
                MHD_OPTION_END);
        if (!srv->mhd) {
                int e = errno;
                sg_errf(errstr, errstr_size,
                        "cannot listen on %s (http.address): %s",
                        srv->addr.text,
                        e ? strerror(e)
                        : srv->tls_cert
                                ? "libmicrohttpd refused to start (is the "
                                  "TLS key the certificate's, both PEM?)"
                                : "libmicrohttpd refused to start");
                return SG_ERR_IO;
        }
        const union MHD_DaemonInfo *di =
                MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
        srv->port = di ? di->port : 0;
        int rc = pthread_create(&srv->watch_thread, NULL, watchdog, srv);
        if (rc) {
                MHD_stop_daemon(srv->mhd);
                srv->mhd = NULL;
                sg_errf(errstr, errstr_size,
                        "starting the HTTP request watchdog: %s", strerror(rc));
                return SG_ERR_IO;
        }
        srv->watch_running = true;
        return SG_OK;
}

uint16_t sg_http_port(const sg_http_t *srv) {
        return srv ? srv->port : 0;
}

void sg_http_destroy(sg_http_t *srv) {
        if (!srv)
                return;
        if (srv->watch_running) {
                pthread_mutex_lock(&srv->watch_mu);
                srv->watch_stop = true;
                pthread_cond_signal(&srv->watch_cv);
                pthread_mutex_unlock(&srv->watch_mu);
                pthread_join(srv->watch_thread, NULL);
        }
        if (srv->mhd) /* closes every connection: conn_notify frees */
                MHD_stop_daemon(srv->mhd);
        for (size_t i = 0; i < srv->route_cnt; i++)
                free(srv->routes[i].prefix);
        for (size_t i = 0; i < srv->excluded_cnt; i++)
                free(srv->excluded[i]);
        free(srv->excluded);
        sg_http_auth_free(srv->auth);
        free(srv->tls_cert);
        key_free(srv->tls_key);
        pthread_cond_destroy(&srv->watch_cv);
        pthread_mutex_destroy(&srv->watch_mu);
        free(srv);
}
