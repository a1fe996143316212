/*
 * kafka_preflight_files.c — the cluster preflight's file check
 * (kafka_preflight.c has the pass and its rules): every file a Kafka
 * client reads at start (ssl.ca.location, ssl.key.location,
 * sasl.kerberos.keytab, ...) that its effective properties make it read
 * (TLS, SASL GSSAPI) must exist and be readable. Checked before any client
 * exists (sg_loop_preflight_files) and by --check-config; a value from the
 * environment is never quoted.
 */
#include "kafka_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A client's use of TLS and of Kerberos, by its effective properties. */
typedef struct client_sec {
        bool ssl, gssapi;
} client_sec_t;

static client_sec_t client_sec(const sg_config_t *c, bool consumer) {
        const sg_kv_t *b = consumer ? c->kafka_consumer : c->kafka_producer;
        size_t bn = consumer ? c->kafka_consumer_cnt : c->kafka_producer_cnt;
        const sg_kv_t *p = sg_preflight_kv2(c->kafka, c->kafka_cnt, b, bn,
                                            "security.protocol");
        const sg_kv_t *m = sg_preflight_kv2(c->kafka, c->kafka_cnt, b, bn,
                                            "sasl.mechanisms");
        if (!m)
                m = sg_preflight_kv2(c->kafka, c->kafka_cnt, b, bn,
                                     "sasl.mechanism");
        client_sec_t s = {0};
        s.ssl = p && (!strcasecmp(p->value, "ssl") ||
                      !strcasecmp(p->value, "sasl_ssl"));
        s.gssapi = p && !strncasecmp(p->value, "sasl_", 5) &&
                   (!m || !strcasecmp(m->value, "GSSAPI"));
        return s;
}

/* The properties that name a file a client reads, and whether TLS (or
 * Kerberos) makes it read one. */
static const struct {
        const char *name;
        bool gssapi; /* read under SASL GSSAPI, else under TLS */
        bool dir;    /* may be a directory (a CA path) */
} FILE_PROPS[] = {
        {"ssl.ca.location", false, true},
        {"ssl.certificate.location", false, false},
        {"ssl.key.location", false, false},
        {"ssl.keystore.location", false, false},
        {"ssl.crl.location", false, false},
        {"ssl.engine.location", false, false},
        {"sasl.kerberos.keytab", true, false},
};

/** Why @p path cannot be read (a static text), or NULL when it can. */
static const char *unreadable(const char *path, bool dir_ok) {
        struct stat st;
        if (stat(path, &st) != 0)
                return strerror(errno);
        if (S_ISDIR(st.st_mode)) {
                if (!dir_ok)
                        return "a directory, not a file";
                return access(path, R_OK | X_OK) ? strerror(errno) : NULL;
        }
        FILE *f = fopen(path, "r");
        if (!f)
                return strerror(errno);
        fclose(f);
        return NULL;
}

static sg_err_t files_of(const sg_config_t *conf, const char *block,
                         const sg_kv_t *kv, size_t cnt, client_sec_t sec,
                         sg_preflight_t *pf) {
        for (size_t i = 0; i < cnt; i++) {
                for (size_t k = 0; k < sizeof(FILE_PROPS) / sizeof(*FILE_PROPS);
                     k++) {
                        if (strcmp(kv[i].name, FILE_PROPS[k].name) ||
                            !(FILE_PROPS[k].gssapi ? sec.gssapi : sec.ssl) ||
                            !kv[i].value[0] ||
                            /* librdkafka looks in the system's places */
                            !strcmp(kv[i].value, "probe"))
                                continue;
                        const char *why =
                                unreadable(kv[i].value, FILE_PROPS[k].dir);
                        if (!why)
                                continue;
                        sg_err_t err =
                                sg_config_kv_secret(&kv[i])
                                        ? sg_preflight_add(
                                                  pf, SG_PF_ERROR,
                                                  "%s.%s: the file it names "
                                                  "(not shown: from the "
                                                  "environment): %s",
                                                  block, kv[i].name, why)
                                        : sg_preflight_add(
                                                  pf, SG_PF_ERROR,
                                                  "%s.%s: \"%s\": %s (the "
                                                  "Kafka client reads it at "
                                                  "start)",
                                                  block, kv[i].name,
                                                  kv[i].value, why);
                        if (err)
                                return err;
                }
        }
        (void)conf;
        return SG_OK;
}

sg_err_t sg_preflight_files(const sg_config_t *conf, sg_preflight_t *pf) {
        client_sec_t c = client_sec(conf, true), p = client_sec(conf, false);
        client_sec_t both = {c.ssl || p.ssl, c.gssapi || p.gssapi};
        sg_err_t err;
        if ((err = files_of(conf, "kafka", conf->kafka, conf->kafka_cnt, both,
                            pf)) ||
            (err = files_of(conf, "kafka_consumer", conf->kafka_consumer,
                            conf->kafka_consumer_cnt, c, pf)))
                return err;
        return files_of(conf, "kafka_producer", conf->kafka_producer,
                        conf->kafka_producer_cnt, p, pf);
}
