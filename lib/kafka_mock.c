/*
 * kafka_mock.c — the Kafka loop (kafka.h): librdkafka's mock cluster.
 */
#include "kafka_int.h"

#include <librdkafka/rdkafka_mock.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* librdkafka's mock cluster                                            */

static void mock_log(const rd_kafka_t *rk, int level, const char *fac,
                     const char *buf) {
        (void)rk, (void)level, (void)fac, (void)buf;
}

static sg_err_t mock_topic(rd_kafka_mock_cluster_t *mc, const char *name,
                           int partition_cnt, char *errstr,
                           size_t errstr_size) {
        rd_kafka_resp_err_t e =
                rd_kafka_mock_topic_create(mc, name, partition_cnt, 1);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                sg_errf(errstr, errstr_size, "mock topic \"%s\": %s", name,
                        rd_kafka_err2str(e));
                return SG_ERR_KAFKA;
        }
        return SG_OK;
}

sg_err_t sg_mock_start(const sg_config_t *conf, int broker_cnt,
                       int partition_cnt, void **handlep, char **bootstrapsp,
                       char *errstr, size_t errstr_size) {
        char es[512], num[16];
        if (!conf || broker_cnt < 1 || partition_cnt < 1 || !handlep ||
            !bootstrapsp) {
                sg_errf(errstr, errstr_size, "sg_mock_start: invalid argument");
                return SG_ERR_INVALID;
        }
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        snprintf(num, sizeof(num), "%d", broker_cnt);
        if (rd_kafka_conf_set(kc, "test.mock.num.brokers", num, es,
                              sizeof(es)) != RD_KAFKA_CONF_OK) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "mock cluster: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_conf_set_log_cb(kc, mock_log);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, es, sizeof(es));
        if (!rk) {
                rd_kafka_conf_destroy(kc);
                sg_errf(errstr, errstr_size, "mock cluster: %s", es);
                return SG_ERR_KAFKA;
        }
        rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(rk);
        sg_err_t err = mc ? SG_OK : SG_ERR_KAFKA;
        if (!mc)
                sg_errf(errstr, errstr_size, "mock cluster not available");
        for (size_t i = 0; !err && i < conf->topic_cnt; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                err = mock_topic(mc, tc->name, partition_cnt, errstr,
                                 errstr_size);
                if (!err)
                        err = mock_topic(mc, tc->output_topic, partition_cnt,
                                         errstr, errstr_size);
                if (!err)
                        err = mock_topic(mc, tc->dlq_topic, partition_cnt,
                                         errstr, errstr_size);
                if (!err && tc->snapshot.source == SG_SNAP_KAFKA &&
                    tc->snapshot.request_topic)
                        err = mock_topic(mc, tc->snapshot.request_topic,
                                         partition_cnt, errstr, errstr_size);
                if (!err && tc->snapshot.source == SG_SNAP_KAFKA &&
                    tc->snapshot.reply_topic)
                        err = mock_topic(mc, tc->snapshot.reply_topic,
                                         partition_cnt, errstr, errstr_size);
                /* The changelog (both guarantees), one partition per
                 * input partition. The mock has no topic configs, so it is
                 * not compacted (nothing is ever cleaned in a mock) and the
                 * loop's cleanup.policy check is skipped there. */
                if (!err && tc->changelog_topic)
                        err = mock_topic(mc, tc->changelog_topic, partition_cnt,
                                         errstr, errstr_size);
        }
        char *bs = err ? NULL : strdup(rd_kafka_mock_cluster_bootstraps(mc));
        if (!err && !bs)
                err = SG_ERR_NOMEM;
        if (err) {
                rd_kafka_destroy(rk);
                return err;
        }
        *handlep = rk;
        *bootstrapsp = bs;
        return SG_OK;
}

void sg_mock_destroy(void *handle) {
        if (handle)
                rd_kafka_destroy(handle);
}
