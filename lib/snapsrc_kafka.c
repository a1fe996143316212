/*
 * snapsrc_kafka.c — the Kafka snapshot source (semantics §4 step 1,
 * snapshot.source "kafka"): a JSON request record on request_topic, keyed
 * by the aggregate; the authority answers on reply_topic, which seqgate
 * consumes, with a JSON object that names the request_id.
 */
#include "snapsrc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sg_err_t kafka_request(const sg_snapsrc_req_t *rq, arena_t *arena,
                              sg_effect_t *ef) {
        const sg_snapshot_config_t *sc = rq->sc;
        const sg_snapreq_rec_t *r = rq->r;
        cJSON *j = cJSON_CreateObject();
        if (!j)
                return SG_ERR_NOMEM;
        cJSON_AddStringToObject(j, "request_id", rq->request_id);
        cJSON_AddStringToObject(j, "aggregate", r->aggregate);
        if (r->has_have)
                cJSON_AddNumberToObject(j, "have_version",
                                        (double)r->have_version);
        else
                cJSON_AddNullToObject(j, "have_version");
        cJSON_AddNumberToObject(j, "want_version", (double)r->want_version);
        cJSON_AddStringToObject(j, "reply_to", sc->reply_topic);
        cJSON_AddStringToObject(j, "topic", rq->topic);
        cJSON_AddNumberToObject(j, "partition", rq->partition);
        cJSON_AddStringToObject(j, "instance", rq->instance);
        cJSON_AddNumberToObject(j, "attempt", r->attempt);
        char *txt = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!txt)
                return SG_ERR_NOMEM;
        size_t n = strlen(txt);
        ef->value = sg_arena_dup(arena, txt, n);
        ef->value_len = n;
        free(txt);
        sg_header_t *x = sg_arena_alloc(arena, sizeof(*x));
        if (!ef->value || !x)
                return SG_ERR_NOMEM;
        x[0] = (sg_header_t){"content-type", "application/json", 16};
        ef->kind = SG_EFFECT_OUTPUT;
        ef->topic = sc->request_topic;
        ef->partition = -1;
        ef->key = sg_arena_dup(arena, r->aggregate, r->aggregate_len);
        ef->key_len = r->aggregate_len;
        ef->extra = x;
        ef->extra_cnt = 1;
        return SG_OK;
}

static bool kafka_is_reply_topic(const sg_snapshot_config_t *sc,
                                 const char *topic) {
        return sc->reply_topic && strcmp(sc->reply_topic, topic) == 0;
}

/* The request id is the reply's member "request_id"; a reply record says
 * nothing of its transport. */
static void kafka_reply_read(const sg_record_t *rec, const cJSON *body,
                             arena_t *arena, sg_snapsrc_reply_t *out) {
        (void)rec;
        (void)arena;
        memset(out, 0, sizeof(*out));
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(body, "request_id");
        if (cJSON_IsString(r)) {
                out->request_id = r->valuestring;
                out->request_id_len = strlen(r->valuestring);
        }
}

/* The reply record's coordinates, "topic/partition/offset". */
static const char *kafka_provenance(const sg_record_t *rec,
                                    const sg_snapsrc_reply_t *rp, char *buf,
                                    size_t size) {
        (void)rp;
        snprintf(buf, size, "%s/%" PRId32 "/%" PRId64, rec->topic,
                 rec->partition, rec->offset);
        return buf;
}

const sg_snapsrc_t sg_snapsrc_kafka = {
        .name = "kafka",
        .request = kafka_request,
        .is_reply_topic = kafka_is_reply_topic,
        .pseudo_topic = NULL,
        .reply_read = kafka_reply_read,
        .provenance = kafka_provenance,
};
