/*
 * config_kafka.c — the "kafka", "kafka_consumer" and "kafka_producer"
 * blocks: librdkafka properties, passed through verbatim, checked against
 * the guarantees of semantics §6 and tried on a scratch rd_kafka_conf_t.
 */
#include "config_int.h"

#include <librdkafka/rdkafka.h>

#include <assert.h>
#include <math.h> /* isfinite(): a macro, no libm needed */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------ */
/* librdkafka properties                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Reads an object of librdkafka properties. Values are strings; numbers and
 * booleans are converted to their JSON text ("linger.ms": 5 -> "5"). Secret
 * properties must be strings and their values are never echoed.
 */
static sg_err_t parse_kv(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         sg_kv_t **arrp, size_t *cntp) {
        char p[SG_PATH_SIZE];
        size_t n = 0, since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, NULL));
        for (const cJSON *it = obj->child; it; it = it->next)
                n++;
        if (n == 0)
                return errors_since(c, since);
        if (!(*arrp = calloc(n, sizeof(**arrp))))
                return sg_cfg_nomem(c);
        /* *cntp counts the complete entries only: a wrong one is reported
         * and left out, so that every entry has a name and a value. */
        for (const cJSON *it = obj->child; it; it = it->next) {
                sg_kv_t *kv = &(*arrp)[*cntp];
                bool secret = sg_config_is_secret(it->string);
                char *value = NULL;

                sg_cfg_path_key(p, path, it->string);
                if (!*it->string) {
                        sg_cfg_fail(c, path,
                                    "a property name must not be empty");
                        continue;
                }
                if (cJSON_IsString(it)) {
                        value = strdup(it->valuestring);
                } else if (secret) {
                        sg_cfg_fail(c, p, "must be a string");
                        continue;
                } else if (cJSON_IsBool(it)) {
                        value = strdup(cJSON_IsTrue(it) ? "true" : "false");
                } else if (cJSON_IsNumber(it)) {
                        if (!isfinite(it->valuedouble)) {
                                sg_cfg_fail(c, p, "must be a finite number");
                                continue;
                        }
                        /* cJSON prints the shortest text that reads back
                         * as the same double: 5 -> "5", 0.5 -> "0.5". */
                        value = cJSON_PrintUnformatted(it);
                } else {
                        sg_cfg_fail(c, p,
                                    "must be a string, number or boolean "
                                    "(librdkafka property value)");
                        continue;
                }
                if (!value || !(kv->name = strdup(it->string))) {
                        free(value);
                        return sg_cfg_nomem(c);
                }
                kv->value = value;
                kv->from_env = sg_cfg_from_env(c, it);
                (*cntp)++;
        }
        return errors_since(c, since);
}

static const char *kv_find(const sg_kv_t *kv, size_t cnt, const char *name) {
        const char *v = NULL;

        for (size_t i = 0; i < cnt; i++) {
                /* parse_kv keeps whole entries only (scan-build: it cannot
                 * see sg_cfg_nomem, in config_get.c, end a failed parse) */
                assert(kv[i].name && kv[i].value);
                if (!strcmp(kv[i].name, name))
                        v = kv[i].value; /* last one wins, as in librdkafka */
        }
        return v;
}

/** librdkafka's boolean syntax (rdkafka_conf.c): true/t/1, false/f/0. */
static bool rk_true(const char *v) {
        return !strcasecmp(v, "true") || !strcasecmp(v, "t") || !strcmp(v, "1");
}

static bool rk_false(const char *v) {
        return !strcasecmp(v, "false") || !strcasecmp(v, "f") ||
               !strcmp(v, "0");
}

/**
 * Rejects properties that would break the guarantees of semantics §6: the
 * loop commits input offsets itself (after output delivery and the LMDB
 * commit) and produces with an idempotent producer and acks=all.
 */
static sg_err_t check_controlled(cfg_ctx_t *c, const sg_kv_t *kv, size_t cnt,
                                 const char *section, bool consumer,
                                 bool producer) {
        char p[SG_PATH_SIZE];
        size_t since = c->err_cnt;

        for (size_t i = 0; i < cnt; i++) {
                const char *n = kv[i].name, *v = kv[i].value;

                assert(n && v); /* whole entries, as in kv_find */
                sg_cfg_path_key(p, section, n);
                if (consumer &&
                    (!strcmp(n, "enable.auto.commit") ||
                     !strcmp(n, "auto.commit.enable")) &&
                    rk_true(v))
                        sg_cfg_fail(c, p,
                                    "must not be true: seqgate commits input "
                                    "offsets itself, only after the batch's "
                                    "output is delivered and its state is "
                                    "committed (semantics §6); allowed: "
                                    "false or unset");
                if (producer && !strcmp(n, "enable.idempotence") && rk_false(v))
                        sg_cfg_fail(c, p,
                                    "must not be false: output is produced by "
                                    "an idempotent producer so that retries "
                                    "do not duplicate or reorder records "
                                    "(semantics §6); allowed: true or unset");
                if (producer && !strcmp(n, "enable.gapless.guarantee") &&
                    rk_false(v))
                        sg_cfg_fail(c, p,
                                    "must not be false: a produce request that "
                                    "failed for good must stop the producer, "
                                    "not let a later record of its partition "
                                    "land before the failed ones are written "
                                    "again (semantics §6 \"Output order\"); "
                                    "allowed: true or unset");
                if (producer &&
                    (!strcmp(n, "acks") ||
                     !strcmp(n, "request.required.acks")) &&
                    strcasecmp(v, "all") && strcmp(v, "-1"))
                        sg_cfg_fail(c, p,
                                    "\"%.*s\" is not allowed: a batch's state "
                                    "is committed only once every in-sync "
                                    "replica has its output (semantics §6); "
                                    "allowed: all, -1 or unset",
                                    SG_QUOTE_MAX, v);
                if (producer && !strcmp(n, "transactional.id"))
                        sg_cfg_fail(c, p,
                                    c->eos ? "set by seqgate: with guarantee "
                                             "exactly_once the transactional "
                                             "id is <group.id>-<instance_id>, "
                                             "stable so that a restarted "
                                             "instance fences its zombie "
                                             "(KIP-98, KIP-447); set "
                                             "instance_id instead"
                                           : "not allowed with guarantee "
                                             "at_least_once: the loop does not "
                                             "use Kafka transactions "
                                             "(semantics §6)");
                if (consumer && c->eos && !strcmp(n, "isolation.level") &&
                    strcmp(v, "read_committed") != 0)
                        sg_cfg_fail(c, p,
                                    "must be read_committed with guarantee "
                                    "exactly_once: aborted input must not be "
                                    "judged (semantics §6); allowed: "
                                    "read_committed or unset");
                if (strcmp(section, "kafka") != 0 && !strcmp(n, "group.id"))
                        sg_cfg_fail(c, p,
                                    "set the consumer group in kafka.group.id "
                                    "only: the state store belongs to that "
                                    "group");
        }
        return errors_since(c, since);
}

/* Whether @p v is an integer as librdkafka's int properties take it: an
 * optional minus sign and digits. */
static bool int_text(const char *v) {
        if (*v == '-')
                v++;
        if (!*v)
                return false;
        for (; *v; v++)
                if (*v < '0' || *v > '9')
                        return false;
        return true;
}

/**
 * An integer property that librdkafka accepted by reading only its leading
 * digits ("session.timeout.ms": "6s" is 6 ms, "batch.size": "1MB" one
 * byte): its value read back is another integer. librdkafka says nothing,
 * and the broker then refuses, or the client runs with a tiny value; so is
 * seqgate's own "*_ms" keys' rule (no unit in the value) kept for the
 * librdkafka properties. Secrets are not read back.
 */
static sg_err_t check_int_read(cfg_ctx_t *c, rd_kafka_conf_t *rk,
                               const sg_kv_t *kv, const char *section) {
        char back[64], p[SG_PATH_SIZE];
        size_t n = sizeof(back);
        const char *v = kv->value + (kv->value[0] == '-');
        /* (a word librdkafka maps to a number, as acks "all" to -1, is
         * fine: only leading digits with something after them) */
        if (sg_config_kv_secret(kv) || int_text(kv->value) || *v < '0' ||
            *v > '9' ||
            rd_kafka_conf_get(rk, kv->name, back, &n) != RD_KAFKA_CONF_OK ||
            !int_text(back) || !strcmp(back, kv->value))
                return SG_OK;
        size_t len = strlen(kv->name);
        const char *unit = len > 3 && !strcmp(kv->name + len - 3, ".ms")
                                   ? ", in milliseconds"
                           : len > 7 && !strcmp(kv->name + len - 7, ".kbytes")
                                   ? ", in kilobytes"
                           : len > 6 && !strcmp(kv->name + len - 6, ".bytes")
                                   ? ", in bytes"
                                   : "";
        sg_cfg_path_key(p, section, kv->name);
        return sg_cfg_fail(c, p,
                           "librdkafka reads \"%s\" as %s: write the number "
                           "alone%s",
                           kv->value, back, unit);
}

/**
 * Tries each property on a scratch rd_kafka_conf_t so that unknown names and
 * malformed values are found at --check-config time. No client is created.
 * plugin.library.paths is skipped: setting it loads shared libraries.
 */
static sg_err_t check_rdkafka(cfg_ctx_t *c, const sg_kv_t *kv, size_t cnt,
                              const char *section) {
        char p[SG_PATH_SIZE];
        char rkerr[512];
        size_t since = c->err_cnt;

        rd_kafka_conf_t *rk = rd_kafka_conf_new();

        if (!rk)
                return sg_cfg_nomem(c);
        for (size_t i = 0; i < cnt; i++) {
                if (!strcmp(kv[i].name, "plugin.library.paths"))
                        continue;
                char home[2 * SG_PATH_SIZE];
                bool root = false;
                rd_kafka_conf_res_t res;

                rkerr[0] = '\0';
                res = rd_kafka_conf_set(rk, kv[i].name, kv[i].value, rkerr,
                                        sizeof(rkerr));
                if (res == RD_KAFKA_CONF_OK) {
                        (void)check_int_read(c, rk, &kv[i], section);
                        continue;
                }
                sg_cfg_path_key(p, section, kv[i].name);
                /* a seqgate key put among the librdkafka properties */
                if (res == RD_KAFKA_CONF_UNKNOWN &&
                    sg_cfg_key_home(kv[i].name, NULL, section, false, home,
                                    sizeof(home), &root)) {
                        if (root)
                                sg_cfg_fail(c, p,
                                            "\"%s\" is a root key (the top "
                                            "level of the file), not a "
                                            "librdkafka property",
                                            kv[i].name);
                        else
                                sg_cfg_fail(c, p,
                                            "\"%s\" is a seqgate key (%s), "
                                            "not a librdkafka property",
                                            kv[i].name, home);
                        continue;
                }
                if (sg_config_kv_secret(&kv[i]))
                        sg_cfg_fail(c, p,
                                    "rejected by librdkafka (detail withheld: "
                                    "the value is a secret or comes from the "
                                    "environment)");
                else
                        sg_cfg_fail(c, p, "rejected by librdkafka: %s", rkerr);
        }
        rd_kafka_conf_destroy(rk);
        return errors_since(c, since);
}

sg_err_t sg_cfg_parse_kafka(cfg_ctx_t *c, const cJSON *root,
                            sg_config_t *conf) {
        const cJSON *it;
        const char *v;
        size_t since = c->err_cnt;

        it = cJSON_GetObjectItemCaseSensitive(root, "kafka");
        if (!it)
                sg_cfg_fail(c, "kafka",
                            "required key is missing (librdkafka "
                            "properties; needs bootstrap.servers and "
                            "group.id)");
        else
                KEEP(parse_kv(c, it, "kafka", &conf->kafka, &conf->kafka_cnt));
        if ((it = cJSON_GetObjectItemCaseSensitive(root, "kafka_consumer")))
                KEEP(parse_kv(c, it, "kafka_consumer", &conf->kafka_consumer,
                              &conf->kafka_consumer_cnt));
        if ((it = cJSON_GetObjectItemCaseSensitive(root, "kafka_producer")))
                KEEP(parse_kv(c, it, "kafka_producer", &conf->kafka_producer,
                              &conf->kafka_producer_cnt));

        /* an object that is not there or not an object was reported */
        bool kafka_ok =
                cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "kafka"));
        v = kv_find(conf->kafka, conf->kafka_cnt, "bootstrap.servers");
        if (kafka_ok && (!v || !*v))
                sg_cfg_fail(c, "kafka.bootstrap.servers",
                            "required (a non-empty host:port list)");
        v = kv_find(conf->kafka, conf->kafka_cnt, "group.id");
        if (kafka_ok && (!v || !*v))
                sg_cfg_fail(
                        c, "kafka.group.id",
                        "required (the consumer group seqgate joins and whose "
                        "state it keeps)");
        else if (v && *v && !(conf->group_id = strdup(v)))
                return sg_cfg_nomem(c);

        KEEP(check_controlled(c, conf->kafka, conf->kafka_cnt, "kafka", true,
                              true));
        KEEP(check_controlled(c, conf->kafka_consumer, conf->kafka_consumer_cnt,
                              "kafka_consumer", true, false));
        KEEP(check_controlled(c, conf->kafka_producer, conf->kafka_producer_cnt,
                              "kafka_producer", false, true));
        KEEP(check_rdkafka(c, conf->kafka, conf->kafka_cnt, "kafka"));
        KEEP(check_rdkafka(c, conf->kafka_consumer, conf->kafka_consumer_cnt,
                           "kafka_consumer"));
        KEEP(check_rdkafka(c, conf->kafka_producer, conf->kafka_producer_cnt,
                           "kafka_producer"));
        return errors_since(c, since);
}

sg_err_t sg_config_kafka_set(sg_config_t *conf, const char *name,
                             const char *value, char *errstr,
                             size_t errstr_size) {
        cfg_ctx_t c = {.errstr = errstr,
                       .errstr_size = errstr_size,
                       .eos = conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE};
        if (errstr && errstr_size)
                errstr[0] = '\0';
        if (!name || !*name || !value) {
                sg_cfg_set_errstr(errstr, errstr_size,
                                  "a property name must not be empty");
                return SG_ERR_INVALID;
        }
        sg_kv_t one = {.name = (char *)name, .value = (char *)value};
        /* the checks of a "kafka" entry, for both clients (parse_kafka) */
        KEEP(check_controlled(&c, &one, 1, "kafka", true, true));
        KEEP(check_rdkafka(&c, &one, 1, "kafka"));
        if (c.err_cnt)
                return SG_ERR_CONFIG;
        sg_kv_t *kv = realloc(conf->kafka, (conf->kafka_cnt + 1) * sizeof(*kv));
        if (!kv)
                return sg_cfg_nomem(&c);
        conf->kafka = kv;
        kv = &conf->kafka[conf->kafka_cnt];
        *kv = (sg_kv_t){0}; /* from_env false: given on the command line */
        if (!(kv->name = strdup(name)) || !(kv->value = strdup(value))) {
                free(kv->name);
                return sg_cfg_nomem(&c);
        }
        conf->kafka_cnt++;
        return SG_OK;
}
