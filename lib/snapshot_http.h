/*
 * snapshot_http.h — non-blocking HTTP GETs for snapshot refetch
 * (semantics §4 step 1), on libcurl's multi interface.
 *
 * The Kafka loop owns one fetcher. After a batch commits it submits the
 * batch's SG_EFFECT_HTTP_GET effects; on every poll it drives the transfers
 * without blocking the consumer and hands each completed transfer back, which
 * the loop turns into a record of SG_SNAPSHOT_HTTP_TOPIC for the processor.
 * While one aggregate waits for its snapshot, every other aggregate keeps
 * flowing: nothing here waits for a response.
 *
 * Secrets: the Authorization header value is read from the environment
 * variable the config names (never from the config file) at submit time, is
 * never logged, and never appears in an error string.
 *
 * Thread-safety: one thread per fetcher. curl_global_init() is called once
 * (pthread_once) by sg_fetcher_new().
 */
#ifndef SEQGATE_SNAPSHOT_HTTP_H
#define SEQGATE_SNAPSHOT_HTTP_H

#include "seqgate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_fetcher sg_fetcher_t;

/** A completed transfer. All pointers are valid during the callback only. */
typedef struct sg_fetch_result {
        const char *request_id;
        long status;            /**< HTTP status, 0 when no response came */
        const char *error;      /**< curl's error text when status == 0, else NULL */
        const void *body;       /**< response body (may be empty), NULL if status == 0 */
        size_t body_len;
} sg_fetch_result_t;

typedef void(sg_fetch_cb)(void *opaque, const sg_fetch_result_t *res);

/**
 * Creates a fetcher. @p max_body_bytes bounds a response body (a larger one
 * is a failed transfer, status 0, error "response body over N bytes").
 * @returns SG_OK, SG_ERR_NOMEM, SG_ERR_FATAL (curl could not be initialised).
 */
sg_err_t sg_fetcher_new(size_t max_body_bytes, sg_fetcher_t **fp,
                        char *errstr, size_t errstr_size);

/**
 * Starts GET @p url (copied). @p auth_env: name of an environment variable
 * whose value becomes the "Authorization" header, or NULL; an unset variable
 * sends no header. @p timeout_ms bounds the whole transfer (connect included).
 * Returns SG_OK or SG_ERR_NOMEM / SG_ERR_INVALID (bad URL).
 */
sg_err_t sg_fetcher_submit(sg_fetcher_t *f, const char *request_id,
                           const char *url, const char *auth_env,
                           int64_t timeout_ms, char *errstr,
                           size_t errstr_size);

/**
 * Drives the transfers, waiting at most @p wait_ms for activity (0: do not
 * wait), and calls @p cb for each completed transfer. Returns the number of
 * completed transfers.
 */
int sg_fetcher_poll(sg_fetcher_t *f, int wait_ms, sg_fetch_cb *cb,
                    void *opaque);

/** Transfers started and not yet completed. */
size_t sg_fetcher_in_flight(const sg_fetcher_t *f);

/** Aborts every transfer and frees the fetcher. NULL is a no-op. */
void sg_fetcher_destroy(sg_fetcher_t *f);

/**
 * Builds the URL for @p aggregate from template @p tmpl by replacing every
 * "{aggregate}" with the RFC 3986 percent-encoded id (unreserved characters
 * kept). Returns a malloc'd string or NULL on allocation failure.
 */
char *sg_url_expand(const char *tmpl, const char *aggregate,
                    size_t aggregate_len);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_SNAPSHOT_HTTP_H */
