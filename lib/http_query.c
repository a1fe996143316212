/*
 * http_query.c — the result query's /v1/ routes (http_query.h).
 */
#include "http_query.h"

#include "query.h"

#include <cjson/cJSON.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCOPE 16 /* scope parts of one query */

struct sg_query_api {
        const sg_config_t *cfg;
        pthread_mutex_t mu; /* guards store, and cfg's keys a reload
                               changes; held for a query's duration */
        sg_store_t *store;
};

sg_err_t sg_query_api_new(const sg_config_t *cfg, sg_query_api_t **apip,
                          char *errstr, size_t errstr_size) {
        sg_query_api_t *api = calloc(1, sizeof(*api));
        if (!api) {
                sg_errf(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        api->cfg = cfg;
        pthread_mutex_init(&api->mu, NULL);
        *apip = api;
        return SG_OK;
}

void sg_query_api_set_store(sg_query_api_t *api, sg_store_t *store) {
        pthread_mutex_lock(&api->mu);
        api->store = store;
        pthread_mutex_unlock(&api->mu);
}

void sg_query_api_lock(sg_query_api_t *api) {
        if (api)
                pthread_mutex_lock(&api->mu);
}

void sg_query_api_unlock(sg_query_api_t *api) {
        if (api)
                pthread_mutex_unlock(&api->mu);
}

void sg_query_api_destroy(sg_query_api_t *api) {
        if (!api)
                return;
        pthread_mutex_destroy(&api->mu);
        free(api);
}

/** Answers @p status with @p body (taken: printed, then deleted). */
static void respond_json(sg_http_response_t *resp, int status, cJSON *body) {
        char *text = body ? cJSON_PrintUnformatted(body) : NULL;
        cJSON_Delete(body);
        if (!text)
                return; /* the server answers 500 */
        size_t len = strlen(text);
        char *nl = realloc(text, len + 2);
        if (!nl) {
                free(text);
                return;
        }
        nl[len] = '\n';
        nl[len + 1] = '\0';
        resp->status = status;
        resp->content_type = "application/json";
        resp->body = nl;
        resp->body_len = len + 1;
}

static void respond_error(sg_http_response_t *resp, int status,
                          const char *msg) {
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddStringToObject(o, "error", msg)) {
                cJSON_Delete(o);
                o = NULL;
        }
        respond_json(resp, status, o);
}

/** The status of an error the query functions return. */
static int error_status(sg_err_t err) {
        switch (err) {
        case SG_ERR_INVALID:
                return 400;
        case SG_ERR_NOT_FOUND:
                return 404;
        default:
                return 500;
        }
}

/** The one value of argument @p name into *valp (NULL when absent);
 *  false (answered 400) when it is repeated. */
static bool arg_once(const sg_http_request_t *req, sg_http_response_t *resp,
                     const char *name, const char **valp) {
        const char *v[1] = {NULL};
        size_t n = sg_http_request_args(req, name, v, 1);
        if (n > 1) {
                char msg[96];
                snprintf(msg, sizeof(msg), "argument %s given %zu times", name,
                         n);
                respond_error(resp, 400, msg);
                return false;
        }
        *valp = v[0];
        return true;
}

/** False (answered 400) when the request holds an argument not in
 *  @p known (NULL-terminated). */
static bool args_known(const sg_http_request_t *req, sg_http_response_t *resp,
                       const char *const *known) {
        const char *bad = sg_http_request_unknown_arg(req, known);
        if (!bad)
                return true;
        char msg[160], list[64] = "";
        for (const char *const *k = known; *k; k++)
                snprintf(list + strlen(list), sizeof(list) - strlen(list),
                         "%s%s", k == known ? "" : ", ", *k);
        snprintf(msg, sizeof(msg), "unknown argument %.64s (known: %s)", bad,
                 list);
        respond_error(resp, 400, msg);
        return false;
}

/** Locks the API and returns its store; NULL (answered 503, unlocked)
 *  while no store is attached. */
static sg_store_t *store_lock(sg_query_api_t *api, sg_http_response_t *resp) {
        pthread_mutex_lock(&api->mu);
        if (api->store)
                return api->store;
        pthread_mutex_unlock(&api->mu);
        respond_error(resp, 503, "the store is not open");
        return NULL;
}

/* GET /v1/events?topic=T&source=S[&source=S2...]&id=I */
static void on_events(void *opaque, const sg_http_request_t *req,
                      sg_http_response_t *resp) {
        sg_query_api_t *api = opaque;
        const char *topic, *id;
        const char *scope[MAX_SCOPE];
        static const char *const known[] = {"topic", "source", "id", NULL};
        if (!args_known(req, resp, known) ||
            !arg_once(req, resp, "topic", &topic) ||
            !arg_once(req, resp, "id", &id))
                return;
        if (!id) {
                respond_error(resp, 400, "argument id is required");
                return;
        }
        if (!topic && api->cfg->topic_cnt == 1)
                topic = api->cfg->topics[0].name;
        if (!topic) {
                respond_error(resp, 400,
                              "argument topic is required (several input "
                              "topics are configured)");
                return;
        }
        size_t scope_cnt =
                sg_http_request_args(req, "source", scope, MAX_SCOPE);
        if (scope_cnt > MAX_SCOPE) {
                respond_error(resp, 400, "too many source arguments");
                return;
        }
        sg_store_t *store = store_lock(api, resp);
        if (!store)
                return;
        char es[512] = "";
        cJSON *out = NULL;
        sg_err_t err =
                sg_query_event(store, api->cfg, topic, scope, scope_cnt, id,
                               NULL, sg_clock_wall_ms(), &out, es, sizeof(es));
        pthread_mutex_unlock(&api->mu);
        if (err)
                respond_error(resp, error_status(err),
                              *es ? es : sg_err2str(err));
        else
                respond_json(resp, 200, out);
}

#define AGG_PREFIX "/v1/aggregates/"

/* GET /v1/aggregates/ID[?topic=T] */
static void on_aggregates(void *opaque, const sg_http_request_t *req,
                          sg_http_response_t *resp) {
        sg_query_api_t *api = opaque;
        const char *path = sg_http_request_path(req);
        const char *topic;
        if (strncmp(path, AGG_PREFIX, strlen(AGG_PREFIX)) ||
            !path[strlen(AGG_PREFIX)]) {
                respond_error(resp, 400,
                              "the aggregate id is missing: "
                              "/v1/aggregates/ID");
                return;
        }
        static const char *const known[] = {"topic", NULL};
        if (!args_known(req, resp, known) ||
            !arg_once(req, resp, "topic", &topic))
                return;
        sg_store_t *store = store_lock(api, resp);
        if (!store)
                return;
        char es[512] = "";
        cJSON *out = NULL;
        sg_err_t err = sg_query_aggregate(
                store, api->cfg, topic, path + strlen(AGG_PREFIX),
                sg_clock_wall_ms(), &out, es, sizeof(es));
        pthread_mutex_unlock(&api->mu);
        if (err == SG_ERR_NOT_FOUND && !*es)
                snprintf(es, sizeof(es), "no partition holds aggregate %s",
                         path + strlen(AGG_PREFIX));
        if (err)
                respond_error(resp, error_status(err),
                              *es ? es : sg_err2str(err));
        else
                respond_json(resp, 200, out);
}

sg_err_t sg_query_api_routes_add(sg_query_api_t *api, sg_http_t *srv,
                                 char *errstr, size_t errstr_size) {
        sg_err_t err;
        if ((err = sg_http_route_add(srv, "/v1/events", on_events, api, errstr,
                                     errstr_size)))
                return err;
        return sg_http_route_add(srv, "/v1/aggregates", on_aggregates, api,
                                 errstr, errstr_size);
}
