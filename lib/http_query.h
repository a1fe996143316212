/*
 * http_query.h — the result query over HTTP (semantics §7;
 * docs/troubleshooting.md "What happened to event X?"): the read API's /v1/
 * routes on the HTTP endpoint (http.h), answered by sg_query_event() and
 * sg_query_aggregate() (query.h) from LMDB read transactions.
 *
 *   GET /v1/events?topic=T&source=S&id=I
 *       The event's answer (query.h), status 200 whatever the answer,
 *       "unknown" included. `source` is repeated once per scope part for a
 *       topic whose envelope scope has several; `topic` may be left out
 *       when one input topic is configured.
 *   GET /v1/aggregates/ID[?topic=T]
 *       Where aggregate ID is and what it waits for; 404 when no partition
 *       of the store holds it. ID is the rest of the path, URL-decoded
 *       (it may contain "/").
 *
 * Errors: 400 (a missing or repeated argument, an argument the route does
 * not know, a topic that is not an input topic, a scope of the wrong
 * number of parts), 503 before the store
 * is open or after it closed, 500 for a store error; each with a JSON body
 * {"error": "..."}.
 *
 * Threads: the handlers run on the HTTP server's thread. The store is
 * attached with sg_query_api_set_store() by its owner once it is open and
 * detached (NULL) before it is closed; a mutex makes the detach wait for a
 * query in progress; sg_query_api_lock() holds them off while a reload
 * changes the configuration they read. The queries read through
 * sg_txn_begin_reader (store.h), safe beside the loop thread's writes.
 */
#ifndef SEQGATE_HTTP_QUERY_H
#define SEQGATE_HTTP_QUERY_H

#include "config.h"
#include "http.h"
#include "seqgate.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_query_api sg_query_api_t;

/**
 * Creates the read API over configuration @p cfg (only read; must outlive
 * the API), with no store attached yet.
 * @returns SG_OK, SG_ERR_NOMEM.
 */
sg_err_t sg_query_api_new(const sg_config_t *cfg, sg_query_api_t **apip,
                          char *errstr, size_t errstr_size);

/** Adds /v1/events and /v1/aggregates to @p srv (before sg_http_start()).
 *  @returns as sg_http_route_add(). */
sg_err_t sg_query_api_routes_add(sg_query_api_t *api, sg_http_t *srv,
                                 char *errstr, size_t errstr_size);

/** Attaches @p store (NULL: detaches; waits for a query in progress).
 *  Thread-safety: any thread. */
void sg_query_api_set_store(sg_query_api_t *api, sg_store_t *store);

/**
 * Holds off the queries (waits for one in progress) until
 * sg_query_api_unlock(): a reload changes keys of the configuration the
 * queries read (a topic's gap_timeout_ms and dedup TTL), in place
 * (sg_config_reload()). NULL is a no-op. Thread-safety: any thread; not
 * recursive.
 */
void sg_query_api_lock(sg_query_api_t *api);
void sg_query_api_unlock(sg_query_api_t *api);

/** Frees the API (after the server that calls it was destroyed). NULL is a
 *  no-op. */
void sg_query_api_destroy(sg_query_api_t *api);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_HTTP_QUERY_H */
