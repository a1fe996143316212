/*
 * snapsrc_http.c — the HTTP snapshot source (semantics §4 step 1,
 * snapshot.source "http"): an SG_EFFECT_HTTP_GET on the url template,
 * which the loop starts after the batch commits (snapsrc_http_fetch.h); the
 * completed transfer comes back as a record of SG_SNAPSHOT_HTTP_TOPIC
 * (processor.h): key the request id, value the body, the status in a
 * header.
 */
#include "snapsrc.h"

#include "snapsrc_http_fetch.h"

#include <stdlib.h>
#include <string.h>

static sg_err_t http_request(const sg_snapsrc_req_t *rq, arena_t *arena,
                             sg_effect_t *ef) {
        const sg_snapshot_config_t *sc = rq->sc;
        char *url =
                sg_url_expand(sc->url, rq->r->aggregate, rq->r->aggregate_len);
        if (!url)
                return SG_ERR_NOMEM;
        ef->kind = SG_EFFECT_HTTP_GET;
        ef->url = sg_arena_dup(arena, url, strlen(url) + 1);
        free(url);
        if (!ef->url)
                return SG_ERR_NOMEM;
        ef->partition = -1;
        ef->request_id = rq->request_id;
        ef->auth_env = sc->auth_header_env;
        ef->timeout_ms = sc->timeout_ms;
        return SG_OK;
}

/* The request id is the record's key; anything but status 200 is a failed
 * attempt, named by its status and curl's error. */
static void http_reply_read(const sg_record_t *rec, const cJSON *body,
                            arena_t *arena, sg_snapsrc_reply_t *out) {
        (void)body;
        memset(out, 0, sizeof(*out));
        out->request_id = rec->key;
        out->request_id_len = rec->key ? rec->key_len : 0;
        const sg_header_t *st = sg_eng_header_find(rec, SG_H_HTTP_STATUS);
        if (st && st->value_len == 3 && memcmp(st->value, "200", 3) == 0)
                return;
        const sg_header_t *he = sg_eng_header_find(rec, SG_H_HTTP_ERROR);
        out->failed = true;
        out->why = sg_arena_printf(
                arena, "HTTP %.*s%s%.*s",
                st ? (int)(st->value_len < 8 ? st->value_len : 8) : 1,
                st ? (const char *)st->value : "?", he ? ": " : "",
                he ? (int)(he->value_len < 200 ? he->value_len : 200) : 0,
                he ? (const char *)he->value : "");
}

/* The request id itself. */
static const char *http_provenance(const sg_record_t *rec,
                                   const sg_snapsrc_reply_t *rp, char *buf,
                                   size_t size) {
        (void)rec;
        (void)buf;
        (void)size;
        return rp->request_id;
}

const sg_snapsrc_t sg_snapsrc_http = {
        .name = "http",
        .request = http_request,
        .is_reply_topic = NULL,
        .pseudo_topic = SG_SNAPSHOT_HTTP_TOPIC,
        .reply_read = http_reply_read,
        .provenance = http_provenance,
};
