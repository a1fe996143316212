/*
 * config_print.c — the effective configuration as a JSON text
 * (`seqgate --print-config`, sg_config_print()): every key with the value
 * seqgate runs with, defaults filled in, in the shape of the file
 * (schemas/config.schema.json), so that it is itself a configuration that
 * loads to the same values. The scalar keys come from the key table
 * (config_keys.c); the librdkafka blocks, the scope, the digest, the state
 * machine, the snapshot source and the HTTP endpoint's users, tokens and
 * excluded paths are written by hand, as they are parsed.
 *
 * Secrets never appear: a librdkafka property that sg_config_kv_secret()
 * flags (a secret's name, or a value from the environment) is written
 * "***", and so is every text that came from the environment wherever it
 * stands (docs/configuration.md "Secrets and environment variables").
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDACTED "***"

/** The object at key-table block path @p block ("" the root, "store",
 *  "topics.*.ordering") under @p root, created where missing; "*" is
 *  @p topic. NULL out of memory. */
static cJSON *block_obj(cJSON *root, const char *block, const char *topic) {
        cJSON *node = root;
        char buf[256];
        char *save = NULL;

        snprintf(buf, sizeof(buf), "%s", block);
        for (char *part = strtok_r(buf, ".", &save); node && part;
             part = strtok_r(NULL, ".", &save)) {
                const char *name = !strcmp(part, "*") ? topic : part;
                cJSON *next = cJSON_GetObjectItemCaseSensitive(node, name);
                node = next ? next : cJSON_AddObjectToObject(node, name);
        }
        return node;
}

/** Adds the rows of section @p s of @p base under @p root. */
static bool add_rows(cJSON *root, cfg_sect_t s, const void *base,
                     const char *topic) {
        for (size_t i = 0; i < sg_cfg_row_cnt(); i++) {
                if (sg_cfg_row_sect(i) != s)
                        continue;
                const sg_config_key_t *k = sg_config_key(i);
                cJSON *obj = block_obj(root, k->block, topic);
                cJSON *v = sg_cfg_row_json(i, base);
                if (!obj)
                        return false;
                if (!v) {
                        /* an unset text is left out; out of memory fails */
                        if (k->type == SG_CONF_STRING)
                                continue;
                        return false;
                }
                cJSON_AddItemToObject(obj, k->name, v);
        }
        return true;
}

static bool add_kv(cJSON *root, const char *name, const sg_kv_t *kv, size_t cnt,
                   bool always) {
        if (cnt == 0 && !always)
                return true;
        cJSON *o = cJSON_AddObjectToObject(root, name);
        if (!o)
                return false;
        for (size_t i = 0; i < cnt; i++) {
                /* a name given twice: librdkafka takes the last one */
                cJSON_DeleteItemFromObjectCaseSensitive(o, kv[i].name);
                if (!cJSON_AddStringToObject(o, kv[i].name,
                                             sg_config_kv_secret(&kv[i])
                                                     ? REDACTED
                                                     : kv[i].value))
                        return false;
        }
        return true;
}

/* The text of a field source, as the file writes it. */
static cJSON *src_json(const sg_field_src_t *s) {
        char buf[1100];
        switch (s->kind) {
        case SG_SRC_KEY:
                return cJSON_CreateString("key");
        case SG_SRC_HEADER:
                snprintf(buf, sizeof(buf), "header:%s", s->name);
                return cJSON_CreateString(buf);
        case SG_SRC_POINTER:
                return cJSON_CreateString(s->name);
        case SG_SRC_CE:
                snprintf(buf, sizeof(buf), "ce:%s", s->name);
                return cJSON_CreateString(buf);
        case SG_SRC_NONE:
                break;
        }
        return cJSON_CreateNull();
}

static cJSON *str_array(char *const *list, size_t cnt) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; a && i < cnt; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(list[i]));
        return a;
}

static bool add_state_machine(cJSON *topic, const sg_state_machine_t *sm) {
        if (!sm->enabled)
                return true;
        cJSON *o = cJSON_AddObjectToObject(topic, "state_machine");
        cJSON *tr;
        if (!o || !cJSON_AddStringToObject(o, "initial", sm->initial))
                return false;
        cJSON_AddItemToObject(o, "states",
                              str_array(sm->states, sm->state_cnt));
        if (!(tr = cJSON_AddArrayToObject(o, "transitions")))
                return false;
        for (size_t i = 0; i < sm->transition_cnt; i++) {
                const sg_transition_t *t = &sm->transitions[i];
                cJSON *x = cJSON_CreateObject();
                if (!x)
                        return false;
                cJSON_AddItemToArray(tr, x);
                cJSON_AddStringToObject(x, "type", t->type);
                cJSON_AddItemToObject(x, "from",
                                      str_array(t->from, t->from_cnt));
                cJSON_AddStringToObject(x, "to", t->to);
        }
        return true;
}

static bool add_topic(cJSON *root, const sg_topic_config_t *tc) {
        static const char *const sources[] = {"none", "kafka", "http"};
        const char *n = tc->name;
        cJSON *t = block_obj(root, "topics.*", n);
        cJSON *env = block_obj(root, "topics.*.envelope", n);
        cJSON *scope;

        if (!t || !env || !add_rows(root, SECT_TOPIC, tc, n) ||
            !add_rows(root, SECT_ENVELOPE, tc, n) ||
            !(scope = cJSON_AddArrayToObject(env, "scope")))
                return false;
        for (size_t i = 0; i < tc->scope_cnt; i++)
                cJSON_AddItemToArray(scope, src_json(&tc->scope[i]));
        if (!cJSON_AddStringToObject(env, "digest",
                                     tc->digest_pointer ? tc->digest_pointer
                                                        : "value") ||
            !add_rows(root, SECT_ENVELOPE_MAX, tc, n) ||
            !add_rows(root, SECT_DEDUP, tc, n) ||
            !add_rows(root, SECT_ORDERING, tc, n) ||
            !add_state_machine(t, &tc->sm))
                return false;
        if (tc->snapshot.source == SG_SNAP_NONE)
                return true;
        cJSON *snap = block_obj(root, "topics.*.snapshot", n);
        return snap &&
               cJSON_AddStringToObject(snap, "source",
                                       sources[tc->snapshot.source]) &&
               add_rows(root,
                        tc->snapshot.source == SG_SNAP_KAFKA ? SECT_SNAP_KAFKA
                                                             : SECT_SNAP_HTTP,
                        tc, n) &&
               add_rows(root, SECT_SNAP_RETRY, tc, n) &&
               add_rows(root, SECT_SNAP_OUTPUT, tc, n);
}

/** Every text of @p node and below that holds a text from the environment
 *  gets it replaced by "***" (all of a value that is one). */
static void redact_env(const sg_config_t *conf, cJSON *node) {
        for (; node; node = node->next) {
                if (cJSON_IsString(node)) {
                        for (size_t i = 0; i < conf->redact_cnt; i++) {
                                const char *r = conf->redact[i];
                                if (!strcmp(node->valuestring, r)) {
                                        cJSON_SetValuestring(node, REDACTED);
                                        continue;
                                }
                                char *x = sg_config_redact_text(
                                        node->valuestring, r);
                                if (x) {
                                        cJSON_SetValuestring(node, x);
                                        free(x);
                                }
                        }
                }
                redact_env(conf, node->child);
        }
}

/** The HTTP endpoint's users and tokens (their hashes: a bcrypt hash or a
 *  SHA-256 digest is what the file holds, never the password or token)
 *  and its explicit excluded paths (left out: the default). */
static bool add_http_security(cJSON *root, const sg_config_t *conf) {
        cJSON *http = block_obj(root, "http", NULL);
        if (!http)
                return false;
        if (conf->http_basic_auth_user_cnt &&
            !add_kv(http, "basic_auth_users", conf->http_basic_auth_users,
                    conf->http_basic_auth_user_cnt, false))
                return false;
        if (conf->http_bearer_token_cnt &&
            !add_kv(http, "bearer_tokens", conf->http_bearer_tokens,
                    conf->http_bearer_token_cnt, false))
                return false;
        if (conf->http_auth_excluded_paths) {
                cJSON *a = str_array(conf->http_auth_excluded_paths,
                                     conf->http_auth_excluded_path_cnt);
                if (!a)
                        return false;
                cJSON_AddItemToObject(http, "auth_excluded_paths", a);
        }
        return true;
}

char *sg_config_print(const sg_config_t *conf) {
        cJSON *root = cJSON_CreateObject();
        bool ok = root && add_rows(root, SECT_ROOT, conf, NULL) &&
                  add_kv(root, "kafka", conf->kafka, conf->kafka_cnt, true) &&
                  add_kv(root, "kafka_consumer", conf->kafka_consumer,
                         conf->kafka_consumer_cnt, false) &&
                  add_kv(root, "kafka_producer", conf->kafka_producer,
                         conf->kafka_producer_cnt, false) &&
                  add_rows(root, SECT_STORE, conf, NULL) &&
                  add_rows(root, SECT_BATCH, conf, NULL) &&
                  add_rows(root, SECT_ROOT_LIMITS, conf, NULL) &&
                  add_rows(root, SECT_HTTP, conf, NULL) &&
                  add_http_security(root, conf) &&
                  add_rows(root, SECT_METRICS, conf, NULL) &&
                  cJSON_AddObjectToObject(root, "topics");
        for (size_t i = 0; ok && i < conf->topic_cnt; i++)
                ok = add_topic(root, &conf->topics[i]);
        char *text = NULL;
        if (ok) {
                redact_env(conf, root->child);
                char *t = cJSON_Print(root);
                /* two spaces a level, as the examples are written, and
                 * one after a colon (cJSON writes tabs; a tab inside a
                 * text is escaped) */
                size_t tabs = 0;
                for (const char *c = t; c && *c; c++)
                        tabs += *c == '\t';
                if (t && (text = malloc(strlen(t) + tabs + 2))) {
                        char *o = text;
                        bool lead = true;
                        for (const char *c = t; *c; c++) {
                                if (*c == '\t') {
                                        *o++ = ' ';
                                        if (lead)
                                                *o++ = ' ';
                                } else {
                                        *o++ = *c;
                                        lead = *c == '\n';
                                }
                        }
                        *o++ = '\n';
                        *o = '\0';
                }
                cJSON_free(t);
        }
        cJSON_Delete(root);
        return text;
}
