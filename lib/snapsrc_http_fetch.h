/*
 * snapsrc_http_fetch.h — the HTTP snapshot source's transfers (snapsrc_http.c
 * builds the requests): non-blocking HTTP GETs for snapshot refetch
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
#ifndef SEQGATE_SNAPSRC_HTTP_FETCH_H
#define SEQGATE_SNAPSRC_HTTP_FETCH_H

#include "processor.h"
#include "seqgate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_fetcher sg_fetcher_t;

/** A completed transfer. All pointers are valid during the callback only. */
typedef struct sg_fetch_result {
        const char *request_id;
        long status;       /**< HTTP status, 0 when no response came */
        const char *error; /**< curl's error text when status == 0, else NULL */
        const void
                *body; /**< response body (may be empty), NULL if status == 0 */
        size_t body_len;
} sg_fetch_result_t;

typedef void(sg_fetch_cb)(void *opaque, const sg_fetch_result_t *res);

/**
 * Creates a fetcher. @p max_body_bytes bounds a response body (a larger one
 * is a failed transfer, status 0, error "response body over N bytes").
 * @returns SG_OK, SG_ERR_NOMEM, SG_ERR_FATAL (curl could not be initialised).
 */
sg_err_t sg_fetcher_new(size_t max_body_bytes, sg_fetcher_t **fp, char *errstr,
                        size_t errstr_size);

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

/* ------------------------------------------------------------------ */
/* The Kafka loop's transfers (snapshot refetch, semantics §4; kafka.h
 * "Snapshots"): the bookkeeping between the loop's batches and the fetcher.
 * SG_EFFECT_HTTP_GET effects are copied out of the processor before
 * batch_commit (sg_snapshot_http_submit) and started on the fetcher only
 * after the batch committed (sg_snapshot_http_commit), so that the request
 * is durable in the store before it is sent. Completed transfers are kept
 * (sg_snapshot_http_poll, which the loop calls only between batches, never
 * while a batch points into them); the next batch takes them as
 * SG_SNAPSHOT_HTTP_TOPIC records after its Kafka records
 * (sg_snapshot_http_drain) and they are freed only once it committed. An
 * aborted batch keeps them for the next one and forgets its requests (the
 * re-run issues them again). One thread (the loop's). */

struct cJSON;

/** Receives the transfers' log events ("snapshot_http_submit_failed",
 *  "snapshot_http_result_dropped"; sg_log_cb's events); @p fields (cJSON,
 *  consumed by the callee). */
typedef void(sg_snapshot_http_log_cb)(void *opaque, sg_log_level_t level,
                                      const char *event, struct cJSON *fields);

typedef struct sg_snapshot_http sg_snapshot_http_t;

/**
 * Creates the bookkeeping (no fetcher yet: sg_snapshot_http_open(), or the
 * first commit with a request, creates it). @p max_body_bytes bounds a
 * response (sg_fetcher_new). @p log (not NULL) with @p log_opaque receives
 * the log events. @returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_snapshot_http_new(size_t max_body_bytes,
                              sg_snapshot_http_log_cb *log, void *log_opaque,
                              sg_snapshot_http_t **hp);

/** Creates the fetcher now (a configured "http" snapshot source).
 *  @returns what sg_fetcher_new() returns. */
sg_err_t sg_snapshot_http_open(sg_snapshot_http_t *h, char *errstr,
                               size_t errstr_size);

/** Copies SG_EFFECT_HTTP_GET effect @p ef of the batch being run (before
 *  its batch_commit). @returns SG_OK, SG_ERR_INVALID (no url or
 *  request_id), SG_ERR_NOMEM. */
sg_err_t sg_snapshot_http_submit(sg_snapshot_http_t *h, const sg_effect_t *ef,
                                 char *errstr, size_t errstr_size);

/** Forgets the requests submitted since the last commit (an attempt of the
 *  batch starts again). */
void sg_snapshot_http_discard(sg_snapshot_http_t *h);

/** Drives the transfers, waiting at most @p wait_ms; completed ones are
 *  kept for the next batch. A no-op with nothing in flight. Never while a
 *  batch holds drained records. */
void sg_snapshot_http_poll(sg_snapshot_http_t *h, int wait_ms);

/** Transfers started and not yet completed (0 without a fetcher). */
size_t sg_snapshot_http_in_flight(const sg_snapshot_http_t *h);

/** Completed transfers not yet consumed by a committed batch. */
size_t sg_snapshot_http_pending(const sg_snapshot_http_t *h);

/**
 * Hands every completed transfer to the batch as a record of
 * SG_SNAPSHOT_HTTP_TOPIC (partition -1, offset -1; processor.h: key the
 * request id, value the body, headers SG_H_HTTP_STATUS [,
 * SG_H_HTTP_ERROR]). *recsp (owned by @p h) and *cntp stay valid until the
 * next commit, abort or drain. @returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_snapshot_http_drain(sg_snapshot_http_t *h,
                                const sg_record_t **recsp, size_t *cntp);

/** The batch committed: frees the transfers it drained and starts its
 *  submitted requests (a request that cannot start is logged; the
 *  processor's request timeout issues it again). */
void sg_snapshot_http_commit(sg_snapshot_http_t *h);

/** The batch was aborted: its drained transfers stay for the next batch,
 *  its submitted requests are forgotten. */
void sg_snapshot_http_abort(sg_snapshot_http_t *h);

/** Aborts every transfer and frees everything. NULL is a no-op. */
void sg_snapshot_http_destroy(sg_snapshot_http_t *h);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_SNAPSRC_HTTP_FETCH_H */
