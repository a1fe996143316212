/*
 * http.h — seqgate's HTTP endpoint (docs/operating.md "HTTP endpoint"): a
 * small server on libmicrohttpd with a route table. The daemon registers
 * /metrics, /healthz and /readyz (metrics_pub.h, sg_pub_routes_add()); the
 * read API adds /v1/ routes with sg_http_route_add().
 *
 * Threads: libmicrohttpd runs the server in its own internal thread
 * (MHD_USE_INTERNAL_POLLING_THREAD); every handler is called on it, one
 * request at a time. A second thread, the request deadline's watchdog,
 * closes connections that take too long (sg_http_set_request_timeout()). A handler must therefore never touch the Kafka loop,
 * the engine or the store directly: it reads what the loop thread published
 * (metrics_pub.h), or takes a lock of its own. The route table is fixed
 * once sg_http_start() ran (sg_http_route_add() afterwards: SG_ERR_INVALID),
 * so the server thread reads it without a lock.
 *
 * Methods: GET and HEAD (HEAD: the GET response without its body); any
 * other method is 405 with "Allow: GET, HEAD". A path no route holds is
 * 404. With http.read_api false, every path under /v1/ is 404.
 *
 * Security (Prometheus' exporter-toolkit web config): HTTPS only once
 * sg_http_tls_set() ran (TLS 1.2 and 1.3, libmicrohttpd's GnuTLS); once a
 * user (HTTP Basic, bcrypt) or a bearer token (SHA-256 digest) is added,
 * every path but the excluded ones (by default SG_HTTP_AUTH_EXCLUDED: the
 * probes and the scrape) answers 401 without valid credentials, before
 * any route runs (http_auth.c).
 */
#ifndef SEQGATE_HTTP_H
#define SEQGATE_HTTP_H

#include "seqgate.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A parsed http.address. */
typedef struct sg_http_addr {
        bool off;                   /**< "" or "off": no endpoint */
        struct sockaddr_storage ss; /**< where to listen */
        socklen_t ss_len;
        char text[80]; /**< normalised "host:port" / "[v6]:port" */
} sg_http_addr_t;

/**
 * Parses http.address @p text into @p out: "host:port" with host an IPv4
 * address (0.0.0.0: every interface) or "localhost" (127.0.0.1),
 * "[v6]:port" with an IPv6 address ([::]: every interface), port 0..65535
 * (0: the kernel picks a free port; sg_http_port() says which). Host names
 * are not resolved: a listening address is an address. NULL, "" and "off"
 * set out->off.
 * @returns SG_OK, SG_ERR_CONFIG (errstr says what is wrong).
 * Thread-safety: reentrant.
 */
sg_err_t sg_http_address_parse(const char *text, sg_http_addr_t *out,
                               char *errstr, size_t errstr_size);

/**
 * Tells whether sg_http_start could listen on @p a, taking nothing: binds
 * a socket as libmicrohttpd does (SO_REUSEADDR; IPv6 only for [v6]) and
 * closes it; "off" and port 0 always can. For --check-config: a port
 * another process listens on stops the start (exit 2).
 * @returns SG_OK, or SG_ERR_IO with errstr naming the address,
 * http.address and why, and errno the bind's (EADDRINUSE, EACCES,
 * EADDRNOTAVAIL, ...). Thread-safety: reentrant.
 */
sg_err_t sg_http_address_probe(const sg_http_addr_t *a, char *errstr,
                               size_t errstr_size);

typedef struct sg_http sg_http_t;
typedef struct sg_http_request sg_http_request_t;

/** What a handler answers. The server sets status 500 and no body before
 *  the call; a handler sets all three. */
typedef struct sg_http_response {
        int status;               /**< HTTP status code */
        const char *content_type; /**< a constant, e.g. "application/json" */
        char *body;               /**< malloc'd; the server frees it */
        size_t body_len;          /**< bytes of body */
} sg_http_response_t;

/**
 * A route's handler, called on the server thread with the request (valid
 * during the call only) and @p opaque as given to sg_http_route_add().
 * Out of memory: leave resp->body NULL (the server answers 500).
 */
typedef void(sg_http_handler_fn)(void *opaque, const sg_http_request_t *req,
                                 sg_http_response_t *resp);

/** The request path, e.g. "/v1/aggregates/order-1" (no query string). */
const char *sg_http_request_path(const sg_http_request_t *req);

/** The query argument @p name, URL-decoded; NULL when absent. */
const char *sg_http_request_arg(const sg_http_request_t *req, const char *name);

/** Every value of the repeated query argument @p name, URL-decoded, in
 *  request order: up to @p max of them into @p out (valid during the
 *  handler's call). Returns how many the request holds (may exceed
 *  @p max). */
size_t sg_http_request_args(const sg_http_request_t *req, const char *name,
                            const char **out, size_t max);

/** The name of the first query argument of @p req that is not in
 *  @p known (a NULL-terminated list), in request order; NULL when every
 *  one is known. Valid during the handler's call. A route answers such a
 *  request 400: an argument it would ignore ("ids=e2" beside "id=e1") is
 *  a caller's mistake that must not look answered. */
const char *sg_http_request_unknown_arg(const sg_http_request_t *req,
                                        const char *const *known);

/**
 * Creates a server for @p addr (copied; must not be off) that serves /v1/
 * paths only when @p read_api. Nothing listens before sg_http_start().
 * @returns SG_OK, SG_ERR_INVALID, SG_ERR_NOMEM.
 */
sg_err_t sg_http_new(const sg_http_addr_t *addr, bool read_api,
                     sg_http_t **srvp, char *errstr, size_t errstr_size);

/** The paths served without credentials unless sg_http_auth_exclude()
 *  names others: the kubelet's probes and Prometheus' scrape carry none by
 *  default; /v1/ (event and aggregate ids) does. NULL-terminated. */
#define SG_HTTP_AUTH_EXCLUDED                                                  \
        { "/metrics", "/healthz", "/readyz", NULL }

/** Whether @p hash is a bcrypt hash ($2y$, $2b$ or $2a$, cost 04..31,
 *  60 characters: what htpasswd -nBC 10 USER writes). Reentrant. */
bool sg_http_bcrypt_hash_ok(const char *hash);

/** Whether @p digest is "sha256:" and 64 hex digits (a bearer token's
 *  SHA-256). Reentrant. */
bool sg_http_token_hash_ok(const char *digest);

/**
 * Serves HTTPS only: reads the PEM certificate chain @p cert_file and the
 * PEM private key @p key_file now (a renewed certificate needs a
 * restart). TLS 1.2 and 1.3 (exporter-toolkit's default minimum).
 * @returns SG_OK, SG_ERR_IO (a file cannot be read: errstr names it),
 *          SG_ERR_INVALID (after sg_http_start(); libmicrohttpd built
 *          without TLS), SG_ERR_NOMEM.
 * Thread-safety: before sg_http_start() only.
 */
sg_err_t sg_http_tls_set(sg_http_t *srv, const char *cert_file,
                         const char *key_file, char *errstr,
                         size_t errstr_size);

/**
 * Requires credentials: adds HTTP Basic user @p user, whose password's
 * bcrypt hash is @p hash (checking it costs a bcrypt the first time; the
 * result is cached). @returns SG_OK, SG_ERR_INVALID (not a bcrypt hash, a
 * user name with ':', after sg_http_start()), SG_ERR_NOMEM.
 * Thread-safety: before sg_http_start() only.
 */
sg_err_t sg_http_user_add(sg_http_t *srv, const char *user, const char *hash,
                          char *errstr, size_t errstr_size);

/**
 * Requires credentials: adds a bearer token ("Authorization: Bearer T"),
 * given by its digest "sha256:<hex of SHA-256(T)>"; @p name is the
 * operator's name for it. @returns as sg_http_user_add().
 */
sg_err_t sg_http_token_add(sg_http_t *srv, const char *name, const char *digest,
                           char *errstr, size_t errstr_size);

/**
 * Serves path @p path (exactly; no query string) without credentials;
 * the first call replaces SG_HTTP_AUTH_EXCLUDED. @returns SG_OK,
 * SG_ERR_INVALID (not starting with "/", after sg_http_start()),
 * SG_ERR_NOMEM.
 */
sg_err_t sg_http_auth_exclude(sg_http_t *srv, const char *path, char *errstr,
                              size_t errstr_size);

/** The request deadline by default, milliseconds (see
 *  sg_http_set_request_timeout()). */
#define SG_HTTP_REQUEST_TIMEOUT_MS 10000

/**
 * Sets the request deadline of @p srv to @p ms (default
 * SG_HTTP_REQUEST_TIMEOUT_MS): a connection must deliver each request
 * (request line and headers) within @p ms of its start or of its previous
 * answer, and take each answer within @p ms of its request; a connection
 * past its deadline is closed (checked every 250 ms), however steadily it
 * trickles bytes. The idle timeout (10 s without a byte) applies besides.
 * @returns SG_OK, SG_ERR_INVALID (@p ms < 1, or after sg_http_start()).
 * Thread-safety: before sg_http_start() only.
 */
sg_err_t sg_http_set_request_timeout(sg_http_t *srv, int64_t ms, char *errstr,
                                     size_t errstr_size);

/**
 * Adds a route: @p handler answers @p prefix itself and every path below
 * it ("/v1/aggregates" answers "/v1/aggregates" and "/v1/aggregates/ID";
 * a prefix ending in "/" answers everything that starts with it). The
 * longest matching prefix wins. @p prefix is copied; @p opaque must
 * outlive the server.
 * @returns SG_OK, SG_ERR_INVALID (after sg_http_start(); a prefix not
 *          starting with "/"; one already added), SG_ERR_NOMEM.
 * Thread-safety: before sg_http_start() only.
 */
sg_err_t sg_http_route_add(sg_http_t *srv, const char *prefix,
                           sg_http_handler_fn *handler, void *opaque,
                           char *errstr, size_t errstr_size);

/**
 * Binds the address and starts the server thread.
 * @returns SG_OK, SG_ERR_IO (the address cannot be bound, e.g. in use:
 *          errstr names it and the reason).
 */
sg_err_t sg_http_start(sg_http_t *srv, char *errstr, size_t errstr_size);

/** The port listened on (the kernel's pick for port 0); 0 before start. */
uint16_t sg_http_port(const sg_http_t *srv);

/** Stops the server thread (waits for a request in progress) and frees
 *  the server. NULL is a no-op. */
void sg_http_destroy(sg_http_t *srv);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_HTTP_H */
