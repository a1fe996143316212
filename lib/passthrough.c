/*
 * passthrough.c — the benchmark baseline processor (passthrough.h): one
 * output effect per input record, nothing remembered, nothing decided.
 */
#include "passthrough.h"

#include <stdlib.h>

struct sg_passthrough {
        const sg_config_t *conf;
        sg_effect_t *effects; /**< this batch's effects */
        size_t cnt, cap;
};

static sg_err_t pt_batch_begin(void *opaque, int64_t now_ms, char *errstr,
                               size_t errstr_size) {
        sg_passthrough_t *pt = opaque;
        (void)now_ms, (void)errstr, (void)errstr_size;
        pt->cnt = 0;
        return SG_OK;
}

static sg_err_t pt_process(void *opaque, const sg_record_t *rec,
                           sg_process_result_t *result, char *errstr,
                           size_t errstr_size) {
        sg_passthrough_t *pt = opaque;
        const sg_topic_config_t *tc = sg_config_topic(pt->conf, rec->topic);
        (void)errstr, (void)errstr_size;
        *result = SG_PROCESSED;
        if (!tc)
                return SG_OK; /* not a configured topic: nothing to copy */
        if (pt->cnt == pt->cap) {
                size_t cap = pt->cap ? pt->cap * 2 : 256;
                sg_effect_t *e = realloc(pt->effects, cap * sizeof(*e));
                if (!e)
                        return SG_ERR_NOMEM;
                pt->effects = e;
                pt->cap = cap;
        }
        pt->effects[pt->cnt++] = (sg_effect_t){
                .kind = SG_EFFECT_OUTPUT,
                .topic = tc->output_topic,
                .partition = tc->output_partitioning == SG_PART_INPUT
                                     ? rec->partition
                                     : -1,
                .key = rec->key,
                .key_len = rec->key_len,
                .value = rec->value,
                .value_len = rec->value_len,
                .timestamp_ms = rec->timestamp_ms > 0 ? rec->timestamp_ms : 0,
                .headers = rec->headers,
                .header_cnt = rec->header_cnt,
        };
        return SG_OK;
}

static sg_err_t pt_tick(void *opaque, char *errstr, size_t errstr_size) {
        (void)opaque, (void)errstr, (void)errstr_size;
        return SG_OK;
}

static size_t pt_effects(void *opaque, const sg_effect_t **effectsp) {
        sg_passthrough_t *pt = opaque;
        *effectsp = pt->effects;
        return pt->cnt;
}

static sg_err_t pt_batch_commit(void *opaque, char *errstr,
                                size_t errstr_size) {
        sg_passthrough_t *pt = opaque;
        (void)errstr, (void)errstr_size;
        pt->cnt = 0;
        return SG_OK;
}

static void pt_batch_abort(void *opaque) {
        sg_passthrough_t *pt = opaque;
        pt->cnt = 0;
}

static sg_err_t pt_assign(void *opaque, const char *topic, int32_t partition,
                          const char *group_id, int64_t *offsetp, char *errstr,
                          size_t errstr_size) {
        (void)opaque, (void)topic, (void)partition, (void)group_id;
        (void)errstr, (void)errstr_size;
        *offsetp = -1; /* no state: the group's committed offset decides */
        return SG_OK;
}

sg_err_t sg_passthrough_new(const sg_config_t *conf, sg_passthrough_t **ptp) {
        if (!conf || !ptp)
                return SG_ERR_INVALID;
        sg_passthrough_t *pt = calloc(1, sizeof(*pt));
        if (!pt)
                return SG_ERR_NOMEM;
        pt->conf = conf;
        *ptp = pt;
        return SG_OK;
}

void sg_passthrough_processor(sg_passthrough_t *pt, sg_processor_t *proc) {
        *proc = (sg_processor_t){
                .opaque = pt,
                .batch_begin = pt_batch_begin,
                .process = pt_process,
                .tick = pt_tick,
                .effects = pt_effects,
                .batch_commit = pt_batch_commit,
                .batch_abort = pt_batch_abort,
                .grow = NULL,
                .assign = pt_assign,
                .revoke = NULL,
        };
}

void sg_passthrough_destroy(sg_passthrough_t *pt) {
        if (!pt)
                return;
        free(pt->effects);
        free(pt);
}
