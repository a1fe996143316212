/*
 * kafka_redact.c — the Kafka loop (kafka.h): log redaction of secrets. No
 * log line may carry a secret (sg_log_cb, config.h sg_config_is_secret):
 * every string of a log event is scrubbed of the configured secret values
 * and of the values that came from the environment (${VAR}) before the
 * event reaches the log callback.
 */
#include "kafka_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void redact_str(cJSON *node, const char *secret) {
        char *r = sg_config_redact_text(node->valuestring, secret);
        if (r) {
                cJSON_SetValuestring(node, r);
                free(r);
        }
}

/* A secret value and, since librdkafka may quote only a part of one (e.g.
 * "... beginning at: <rest of sasl.oauthbearer.config>"), each of its
 * space/comma/equals separated parts of 4 bytes or more. */
static void redact_kv(cJSON *node, const sg_kv_t *kv, size_t cnt) {
        for (size_t i = 0; i < cnt; i++) {
                if (!sg_config_kv_secret(&kv[i]) || !kv[i].value)
                        continue;
                redact_str(node, kv[i].value);
                char part[512];
                const char *v = kv[i].value;
                while (*v) {
                        size_t n = strcspn(v, " \t,=");
                        if (n >= 4 && n < sizeof(part)) {
                                memcpy(part, v, n);
                                part[n] = '\0';
                                redact_str(node, part);
                        }
                        v += n;
                        v += strspn(v, " \t,=");
                }
        }
}

/* No log line may carry a secret (sg_log_cb): librdkafka quotes a bad value
 * in some error texts (e.g. sasl.oauthbearer.config), so every string of a
 * log event is scrubbed of the configured secret values. */
static void redact_json(const sg_config_t *conf, cJSON *node) {
        for (; node; node = node->next) {
                if (cJSON_IsString(node) && node->valuestring) {
                        redact_kv(node, conf->kafka, conf->kafka_cnt);
                        redact_kv(node, conf->kafka_consumer,
                                  conf->kafka_consumer_cnt);
                        redact_kv(node, conf->kafka_producer,
                                  conf->kafka_producer_cnt);
                        /* and what came from the environment
                         * (docs/configuration.md "Secrets and environment
                         * variables") */
                        for (size_t i = 0; i < conf->redact_cnt; i++)
                                redact_str(node, conf->redact[i]);
                }
                redact_json(conf, node->child);
        }
}

void sg_kafka_log_redact(const sg_config_t *conf, cJSON *fields) {
        if (conf && fields)
                redact_json(conf, fields->child);
}

bool sg_kafka_log_enabled(const sg_kafka_log_t *log, sg_log_level_t level) {
        int max = atomic_load_explicit(&log->level, memory_order_relaxed);
        return log->log_cb && (max == 0 || (int)level <= max);
}

void sg_kafka_log_emit(const sg_kafka_log_t *log, sg_log_level_t level,
                       const char *event, cJSON *fields) {
        /* a line the callback would drop is neither redacted nor printed */
        if (sg_kafka_log_enabled(log, level)) {
                sg_kafka_log_redact(log->conf, fields);
                char *txt = fields ? cJSON_PrintUnformatted(fields) : NULL;
                log->log_cb(log->log_opaque, level, event, txt);
                cJSON_free(txt);
        }
        cJSON_Delete(fields);
}

/** Emits @p event with @p fields (consumed, may be NULL) to the log
 *  callback, every string of it scrubbed of the configured secrets. */
void sg_loop_log(sg_loop_t *loop, sg_log_level_t level, const char *event,
                 cJSON *fields) {
        sg_kafka_log_emit(&loop->klog, level, event, fields);
}

void sg_loop_set_log_level(sg_loop_t *loop, sg_log_level_t level) {
        if (loop)
                atomic_store_explicit(&loop->klog.level, (int)level,
                                      memory_order_relaxed);
}
