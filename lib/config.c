/*
 * config.c — load and validate seqgate's JSON configuration file.
 *
 * The whole file is checked at start-up, before any Kafka client or LMDB
 * environment exists, so that a typo never surfaces hours later as a silent
 * misbehaviour. The rules (and their defaults) are listed in config.h and in
 * schemas/config.schema.json, which expresses the same rules as far as JSON
 * Schema can; tests/schema/check_examples.py keeps the two in step.
 *
 * How it works: cJSON parses the text; each JSON object is first checked
 * for unknown and duplicate keys (document order), then each known key is
 * read with a typed getter that fills the sg_config_t field or reports an
 * error naming the key as a dotted JSON path ("topics.orders.ordering.
 * gap_policy") and what is allowed. Cross-field rules (a state machine needs
 * an event type, ordering needs a version, ...) run after their section is
 * read.
 *
 * Every error is reported, so that one --check-config run lists them all:
 * sg_cfg_fail() appends one line per error to errstr (in the order they are found,
 * which is document order within each section), and a parser goes on past
 * a wrong key to the next one (KEEP()), section by section, topic by topic;
 * it stops early only where what follows cannot be read (a section that is
 * not an object, a snapshot block without a source) and on out of memory.
 * The first line is the error the file would report if it held only that
 * one. A value that failed keeps its default, so later rules see a
 * consistent config; a config with errors is never returned.
 *
 * Memory: the config is built in place; every array is allocated zeroed with
 * its count set at once, so sg_config_destroy() can free a half-built config
 * on any error path.
 *
 * Secrets: values of librdkafka properties that sg_config_is_secret() flags
 * are never copied into an error text (nor are JSON syntax errors quoted, as
 * the text near the error might be a password). A topic's "snapshot" block
 * (snapshot refetch, semantics §4) may not hold the HTTP Authorization value at all: it names the
 * environment variable that does (auth_header_env), keys such as
 * "auth_header" are rejected, and neither the URL (its query may carry a
 * key) nor a malformed variable name is quoted in an error.
 *
 * librdkafka properties are passed through verbatim, but each one is also
 * tried on a scratch rd_kafka_conf_t so that a misspelt property name or a
 * malformed value is reported by --check-config rather than at start-up. *
 * Environment: before any value is read, every string value's ${VAR}
 * references are substituted (config_env.c, docs/configuration.md "Secrets and
 * environment variables"); what came from the environment is scrubbed from
 * every error (sg_cfg_fail) and kept in sg_config_t.redact for the log
 * lines. Reference errors therefore come before the file's other errors.
 *
 * Files: this one holds the root, loading and freeing; config_get.c the
 * error reporting, paths, typed getters, field sources, topic names and
 * secret names; config_env.c the interpolation; config_keys.c the table of scalar keys (defaults,
 * bounds, docs) and its reader; config_kafka.c the librdkafka blocks;
 * config_topic.c the topics; config_snapshot.c the snapshot blocks. They
 * share config_int.h.
 */
#include "config_int.h"

#include "http.h" /* sg_http_address_parse */

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h> /* isfinite(): a macro, no libm needed */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/** Largest configuration file sg_config_load() reads. */
#define SG_CONFIG_MAX_FILE (16 * 1024 * 1024)

/* ------------------------------------------------------------------------ */
/* Root                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const ROOT_KEYS[] = {"$schema",
                                        "instance_id",
                                        "data_dir",
                                        "guarantee",
                                        "log_level",
                                        "kafka",
                                        "kafka_consumer",
                                        "kafka_producer",
                                        "store",
                                        "batch",
                                        "http",
                                        "metrics",
                                        "stats_interval_ms",
                                        "commit_interval_ms",
                                        "delivery_timeout_ms",
                                        "sweep_max_per_batch",
                                        "standby_replicas",
                                        "deadline_max_per_batch",
                                        "pause_retry_ms",
                                        "broker_retry_timeout_ms",
                                        "topics",
                                        NULL};
static const char *const STORE_KEYS[] = {"map_size_bytes", "map_growth_bytes",
                                         "upgrade_from",
                                         "checkpoint_interval_ms", NULL};
static const char *const BATCH_KEYS[] = {"max_records", "max_ms", NULL};
static const char *const HTTP_KEYS[] = {"address",
                                        "read_api",
                                        "tls_server_config",
                                        "basic_auth_users",
                                        "bearer_tokens",
                                        "auth_excluded_paths",
                                        NULL};
static const char *const HTTP_TLS_KEYS[] = {"cert_file", "key_file", NULL};
static const char *const METRICS_KEYS[] = {"stuck_threshold_ms", NULL};
/* The root's blocks, for a key meant inside one (sg_cfg_check_keys_in). */
static const cfg_block_t ROOT_BLOCKS[] = {{"store", STORE_KEYS},
                                          {"batch", BATCH_KEYS},
                                          {"http", HTTP_KEYS},
                                          {"metrics", METRICS_KEYS},
                                          {NULL, NULL}};
/* Every block of the root and its keys, by path (sg_cfg_key_home). */
const cfg_block_t sg_cfg_root_places[] = {
        {"", ROOT_KEYS},
        {"store", STORE_KEYS},
        {"batch", BATCH_KEYS},
        {"http", HTTP_KEYS},
        {"http.tls_server_config", HTTP_TLS_KEYS},
        {"metrics", METRICS_KEYS},
        {NULL, NULL}};

/** Check of http.address: sg_http_address_parse() (http.h) must accept
 *  it. */
sg_err_t sg_cfg_check_http_address(cfg_ctx_t *c, const cJSON *obj,
                                   const char *path, const char *key_path,
                                   void *base) {
        (void)obj;
        (void)path;
        const sg_config_t *conf = base;
        sg_http_addr_t a;
        char es[256] = "";
        if (sg_http_address_parse(conf->http_address, &a, es, sizeof(es)))
                return sg_cfg_fail(c, key_path, "%s", es);
        return SG_OK;
}

/* An object of string values (http.basic_auth_users, http.bearer_tokens)
 * into *arrp / *cntp, each value checked by @p ok (@p what says what it
 * must be). */
static sg_err_t http_map(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         bool (*ok)(const char *), const char *what,
                         sg_kv_t **arrp, size_t *cntp) {
        char p[SG_PATH_SIZE];
        size_t n = 0;
        if (sg_cfg_expect_object(c, obj, path))
                return SG_ERR_CONFIG;
        for (const cJSON *it = obj->child; it; it = it->next)
                n++;
        if (!n)
                return SG_OK;
        if (!(*arrp = calloc(n, sizeof(**arrp))))
                return sg_cfg_nomem(c);
        for (const cJSON *it = obj->child; it; it = it->next) {
                sg_cfg_path_key(p, path, it->string);
                if (!*it->string || strchr(it->string, ':')) {
                        sg_cfg_fail(c, path,
                                    "a name must be non-empty, without ':'");
                        continue;
                }
                if (!cJSON_IsString(it) || !ok(it->valuestring)) {
                        sg_cfg_fail(c, p, "must be %s", what);
                        continue;
                }
                sg_kv_t *kv = &(*arrp)[*cntp];
                if (!(kv->name = strdup(it->string)) ||
                    !(kv->value = strdup(it->valuestring))) {
                        free(kv->name);
                        return sg_cfg_nomem(c);
                }
                (*cntp)++;
        }
        return SG_OK;
}

/* The "http" block's security: TLS (tls_server_config), credentials
 * (basic_auth_users, bearer_tokens) and the paths served without them
 * (auth_excluded_paths), after Prometheus' exporter-toolkit web config
 * (docs/operating.md "HTTP endpoint"). */
static sg_err_t parse_http_security(cfg_ctx_t *c, const cJSON *http,
                                    sg_config_t *conf) {
        const cJSON *it;
        if ((it = cJSON_GetObjectItemCaseSensitive(http,
                                                   "tls_server_config")) &&
            !sg_cfg_expect_object(c, it, "http.tls_server_config")) {
                KEEP(sg_cfg_check_keys(c, it, "http.tls_server_config",
                                       HTTP_TLS_KEYS));
                KEEP(sg_cfg_read(c, it, "http.tls_server_config", SECT_HTTP_TLS,
                                 conf));
                if (!conf->http_tls_cert_file != !conf->http_tls_key_file)
                        sg_cfg_fail(c, "http.tls_server_config",
                                    "cert_file and key_file go together");
        }
        if ((it = cJSON_GetObjectItemCaseSensitive(http, "basic_auth_users")))
                KEEP(http_map(c, it, "http.basic_auth_users",
                              sg_http_bcrypt_hash_ok,
                              "a bcrypt hash of the password ($2y$, $2b$ or "
                              "$2a$, cost 04..31: htpasswd -nBC 10 USER)",
                              &conf->http_basic_auth_users,
                              &conf->http_basic_auth_user_cnt));
        if ((it = cJSON_GetObjectItemCaseSensitive(http, "bearer_tokens")))
                KEEP(http_map(c, it, "http.bearer_tokens",
                              sg_http_token_hash_ok,
                              "\"sha256:\" and the SHA-256 of the token in "
                              "64 hex digits (sha256sum)",
                              &conf->http_bearer_tokens,
                              &conf->http_bearer_token_cnt));
        if ((it = cJSON_GetObjectItemCaseSensitive(http,
                                                   "auth_excluded_paths"))) {
                size_t n = 0;
                if (!cJSON_IsArray(it))
                        return sg_cfg_fail(c, "http.auth_excluded_paths",
                                           "must be an array of paths");
                n = (size_t)cJSON_GetArraySize(it);
                /* one entry at least: an empty list is an explicit "none" */
                conf->http_auth_excluded_paths =
                        calloc(n ? n : 1, sizeof(char *));
                if (!conf->http_auth_excluded_paths)
                        return sg_cfg_nomem(c);
                size_t i = 0;
                for (const cJSON *e = it->child; e; e = e->next, i++) {
                        char p[SG_PATH_SIZE];
                        sg_cfg_path_idx(p, "http.auth_excluded_paths", i);
                        if (!cJSON_IsString(e) || e->valuestring[0] != '/') {
                                sg_cfg_fail(c, p,
                                            "must be a path starting with /");
                                continue;
                        }
                        char *d = strdup(e->valuestring);
                        if (!d)
                                return sg_cfg_nomem(c);
                        conf->http_auth_excluded_paths
                                [conf->http_auth_excluded_path_cnt++] = d;
                }
        }
        return SG_OK;
}

/* store.upgrade_from: a store format this seqgate can write the changelog
 * of (docs/upgrade.md "Rolling upgrade"). */
sg_err_t sg_cfg_check_upgrade_from(cfg_ctx_t *c, const cJSON *obj,
                                   const char *path, const char *key_path,
                                   void *base) {
        (void)obj;
        (void)path;
        const sg_config_t *conf = base;
        if (conf->store_upgrade_from != 0 && conf->store_upgrade_from != 2)
                return sg_cfg_fail(c, key_path,
                                   "must be 2 (the first step of a rolling "
                                   "upgrade from store format 2) or 0, not "
                                   "%d",
                                   conf->store_upgrade_from);
        return SG_OK;
}

/* exactly_once's transactional id, <group.id>-<instance_id> (semantics
 * §6): malloc'ed, NULL when out of memory. */
static char *transactional_id_of(const sg_config_t *conf,
                                 const char *instance_id) {
        size_t len = strlen(conf->group_id) + strlen(instance_id) + 2;
        char *id = malloc(len);
        if (id)
                snprintf(id, len, "%s-%s", conf->group_id, instance_id);
        return id;
}

/* instance_id's default: the host name (gethostname(2); "seqgate" when it
 * has none), so that instances on several hosts started from one
 * configuration file (a Deployment's replicas) get distinct transactional
 * ids and never fence each other (semantics §6), while a restart on the
 * same host keeps its id and fences its zombie (KIP-98). malloc'ed, NULL
 * when out of memory. */
static char *default_instance_id(void) {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
                snprintf(host, sizeof(host), "seqgate");
        return strdup(host);
}

static sg_err_t parse_root(cfg_ctx_t *c, const cJSON *root, sg_config_t *conf) {
        const cJSON *it;

        if (!cJSON_IsObject(root))
                return sg_cfg_fail(c, "(root)", "must be a JSON object");
        KEEP(sg_cfg_check_keys_in(c, root, "", ROOT_KEYS, ROOT_BLOCKS));

        if ((it = cJSON_GetObjectItemCaseSensitive(root, "$schema")) &&
            !cJSON_IsString(it))
                sg_cfg_fail(c, "$schema", "must be a string");
        KEEP(sg_cfg_read(c, root, "", SECT_ROOT, conf));
        if (!conf->instance_id && !(conf->instance_id = default_instance_id()))
                return sg_cfg_nomem(c);
        c->eos = conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE;

        KEEP(sg_cfg_parse_kafka(c, root, conf));

        if ((it = cJSON_GetObjectItemCaseSensitive(root, "store")) &&
            !sg_cfg_expect_object(c, it, "store")) {
                KEEP(sg_cfg_check_keys(c, it, "store", STORE_KEYS));
                KEEP(sg_cfg_read(c, it, "store", SECT_STORE, conf));
        }
        if ((it = cJSON_GetObjectItemCaseSensitive(root, "batch")) &&
            !sg_cfg_expect_object(c, it, "batch")) {
                KEEP(sg_cfg_check_keys(c, it, "batch", BATCH_KEYS));
                KEEP(sg_cfg_read(c, it, "batch", SECT_BATCH, conf));
        }
        KEEP(sg_cfg_read(c, root, "", SECT_ROOT_LIMITS, conf));
        if ((it = cJSON_GetObjectItemCaseSensitive(root, "http")) &&
            !sg_cfg_expect_object(c, it, "http")) {
                KEEP(sg_cfg_check_keys(c, it, "http", HTTP_KEYS));
                KEEP(sg_cfg_read(c, it, "http", SECT_HTTP, conf));
                KEEP(parse_http_security(c, it, conf));
        }
        if ((it = cJSON_GetObjectItemCaseSensitive(root, "metrics")) &&
            !sg_cfg_expect_object(c, it, "metrics")) {
                KEEP(sg_cfg_check_keys(c, it, "metrics", METRICS_KEYS));
                KEEP(sg_cfg_read(c, it, "metrics", SECT_METRICS, conf));
        }

        KEEP(sg_cfg_parse_topics(c, root, conf));
        if (c->err_cnt > 0)
                return SG_ERR_CONFIG;
        if (c->eos && !(conf->transactional_id =
                                transactional_id_of(conf, conf->instance_id)))
                return sg_cfg_nomem(c);
        return SG_OK;
}

sg_err_t sg_config_set_instance_id(sg_config_t *conf, const char *instance_id,
                                   char *errstr, size_t errstr_size) {
        if (!instance_id[0]) {
                sg_errf(errstr, errstr_size, "must be a non-empty string");
                return SG_ERR_CONFIG;
        }
        char *id = strdup(instance_id), *tx = NULL;
        if (!id || (conf->transactional_id &&
                    !(tx = transactional_id_of(conf, instance_id)))) {
                free(id);
                return SG_ERR_NOMEM;
        }
        free(conf->instance_id);
        conf->instance_id = id;
        if (tx) {
                free(conf->transactional_id);
                conf->transactional_id = tx;
        }
        return SG_OK;
}

/** Converts the byte offset of a syntax error into "line L, column C". */
static void offset_to_linecol(const char *text, size_t off, size_t len,
                              size_t *line, size_t *col) {
        *line = 1;
        *col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
                if (text[i] == '\n') {
                        (*line)++;
                        *col = 1;
                } else {
                        (*col)++;
                }
        }
}

/** The one error of a file that cannot be parsed (unreadable, not JSON),
 *  into errstr and the list. */
static void whole_file_error(char *errstr, size_t errstr_size,
                             sg_config_errors_t *list, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void whole_file_error(char *errstr, size_t errstr_size,
                             sg_config_errors_t *list, const char *fmt, ...) {
        char raw[2048], line[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        sg_cfg_put_clean(line, sizeof(line), raw);
        sg_cfg_set_errstr(errstr, errstr_size, "%s", line);
        if (list && list->cnt < SG_CONFIG_ERRORS_MAX &&
            (list->lines[list->cnt] = strdup(line)))
                list->cnt++;
        if (list)
                list->total++;
}

/* Validates the parsed file @p root (taken) into *@p confp, every error
 * also into @p list (may be NULL); @p data_dir (NULL: none) in place of
 * the file's data_dir. Whatever the file's format (JSON, YAML), the same
 * tree and the same rules. */
static sg_err_t config_build(cJSON *root, const char *data_dir,
                             sg_config_t **confp, char *errstr,
                             size_t errstr_size, sg_config_errors_t *list) {
        cfg_ctx_t c = {
                .errstr = errstr, .errstr_size = errstr_size, .list = list};
        sg_config_t *conf;
        sg_err_t err;

        if (!(conf = calloc(1, sizeof(*conf)))) {
                cJSON_Delete(root);
                return sg_cfg_nomem(&c);
        }
        /* ${VAR} references, once, before any value is read */
        err = sg_cfg_interpolate(&c, root);
        /* the caller's data_dir replaces the file's before it is read, so
         * it is checked as the file's would be and the key may be absent */
        if (data_dir && err != SG_ERR_NOMEM && cJSON_IsObject(root)) {
                cJSON_DeleteItemFromObjectCaseSensitive(root, "data_dir");
                if (!cJSON_AddStringToObject(root, "data_dir", data_dir))
                        err = sg_cfg_nomem(&c);
        }
        /* the defaults of config.h, from the key table; exactly_once is
         * the default (semantics §6): the production guarantee */
        static const cfg_sect_t sects[] = {
                SECT_ROOT, SECT_STORE,    SECT_BATCH,  SECT_ROOT_LIMITS,
                SECT_HTTP, SECT_HTTP_TLS, SECT_METRICS};
        if (err == SG_ERR_CONFIG)
                err = SG_OK; /* said; the rest of the file is read on */
        for (size_t i = 0; !err && i < sizeof(sects) / sizeof(sects[0]); i++)
                err = sg_cfg_defaults(&c, sects[i], conf);
        if (!err)
                err = parse_root(&c, root, conf);
        if (!err && c.err_cnt > 0)
                err = SG_ERR_CONFIG;
        cJSON_Delete(root);
        if (err) {
                sg_cfg_env_free(&c.env);
                sg_config_destroy(conf);
                return err;
        }
        conf->redact = c.env.redact;
        conf->redact_cnt = c.env.redact_cnt;
        c.env.redact = NULL;
        c.env.redact_cnt = 0;
        sg_cfg_env_free(&c.env);
        *confp = conf;
        return SG_OK;
}

/* sg_config_parse(), every error also into @p list (may be NULL);
 * @p data_dir (NULL: none) in place of the text's data_dir. */
static sg_err_t config_parse(const char *json, const char *data_dir,
                             sg_config_t **confp, char *errstr,
                             size_t errstr_size, sg_config_errors_t *list) {
        cfg_ctx_t c = {
                .errstr = errstr, .errstr_size = errstr_size, .list = list};
        const char *end = NULL;
        cJSON *root;

        if (errstr && errstr_size)
                errstr[0] = '\0';
        if (!json || !confp) {
                sg_cfg_set_errstr(errstr, errstr_size, "invalid argument");
                return SG_ERR_INVALID;
        }
        *confp = NULL;

        root = cJSON_ParseWithOpts(json, &end, 1);
        if (!root) {
                size_t len = strlen(json), line, col;
                size_t off = end && end >= json ? (size_t)(end - json) : 0;
                /* The text near the error is not quoted: it might be a
                 * secret. */
                offset_to_linecol(json, off, len, &line, &col);
                whole_file_error(errstr, errstr_size, list,
                                 "(root): not valid JSON: syntax error at "
                                 "line %zu, column %zu",
                                 line, col);
                return SG_ERR_CONFIG;
        }
        if (sg_cfg_number_texts(root, json)) {
                cJSON_Delete(root);
                return sg_cfg_nomem(&c);
        }
        return config_build(root, data_dir, confp, errstr, errstr_size, list);
}

/* As config_parse() for a YAML text (config_yaml.c). */
static sg_err_t config_parse_yaml(const char *text, const char *data_dir,
                                  sg_config_t **confp, char *errstr,
                                  size_t errstr_size,
                                  sg_config_errors_t *list) {
        char yes[1024] = "";
        cJSON *root = NULL;

        if (errstr && errstr_size)
                errstr[0] = '\0';
        if (!text || !confp) {
                sg_cfg_set_errstr(errstr, errstr_size, "invalid argument");
                return SG_ERR_INVALID;
        }
        *confp = NULL;
        sg_err_t err =
                sg_cfg_yaml_parse(text, strlen(text), &root, yes, sizeof(yes));
        if (err == SG_ERR_NOMEM) {
                sg_cfg_set_errstr(errstr, errstr_size, "out of memory");
                return err;
        }
        if (err) {
                whole_file_error(errstr, errstr_size, list, "%s", yes);
                return err;
        }
        return config_build(root, data_dir, confp, errstr, errstr_size, list);
}

sg_err_t sg_config_parse_yaml(const char *yaml, sg_config_t **confp,
                              char *errstr, size_t errstr_size) {
        return config_parse_yaml(yaml, NULL, confp, errstr, errstr_size, NULL);
}

/** A YAML file: named .yaml or .yml, or (not named .json) one whose text
 *  does not start with '{' (a JSON configuration is an object). */
static bool is_yaml(const char *path, const char *text) {
        const char *dot = strrchr(path, '.');
        const char *slash = strrchr(path, '/');
        if (dot && (!slash || dot > slash)) {
                if (!strcasecmp(dot, ".yaml") || !strcasecmp(dot, ".yml"))
                        return true;
                if (!strcasecmp(dot, ".json"))
                        return false;
        }
        text += strspn(text, " \t\r\n");
        return *text != '{';
}

sg_err_t sg_config_parse(const char *json, sg_config_t **confp, char *errstr,
                         size_t errstr_size) {
        return config_parse(json, NULL, confp, errstr, errstr_size, NULL);
}

/* sg_config_load(), every error also into @p list (may be NULL); @p
 * data_dir as config_parse()'s. */
static sg_err_t config_load(const char *path, const char *data_dir,
                            sg_config_t **confp, char *errstr,
                            size_t errstr_size, sg_config_errors_t *list) {
        FILE *fp;
        char *buf;
        size_t len = 0;
        sg_err_t err;

        if (errstr && errstr_size)
                errstr[0] = '\0';
        if (!path || !confp) {
                sg_cfg_set_errstr(errstr, errstr_size, "invalid argument");
                return SG_ERR_INVALID;
        }
        *confp = NULL;
        if (!(fp = fopen(path, "rb"))) {
                whole_file_error(errstr, errstr_size, list,
                                 "%s: cannot open: %s", path, strerror(errno));
                return SG_ERR_IO;
        }
        if (!(buf = malloc(SG_CONFIG_MAX_FILE + 1))) {
                fclose(fp);
                sg_cfg_set_errstr(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        len = fread(buf, 1, SG_CONFIG_MAX_FILE + 1, fp);
        if (ferror(fp)) {
                whole_file_error(errstr, errstr_size, list,
                                 "%s: cannot read: %s", path, strerror(errno));
                fclose(fp);
                free(buf);
                return SG_ERR_IO;
        }
        fclose(fp);
        if (len > SG_CONFIG_MAX_FILE) {
                free(buf);
                whole_file_error(errstr, errstr_size, list,
                                 "%s: larger than %d bytes; not a "
                                 "configuration file?",
                                 path, SG_CONFIG_MAX_FILE);
                return SG_ERR_CONFIG;
        }
        buf[len] = '\0';
        if (strlen(buf) != len) {
                free(buf);
                whole_file_error(errstr, errstr_size, list,
                                 "%s: contains a NUL byte; not a JSON or "
                                 "YAML text",
                                 path);
                return SG_ERR_CONFIG;
        }
        err = is_yaml(path, buf) ? config_parse_yaml(buf, data_dir, confp,
                                                     errstr, errstr_size, list)
                                 : config_parse(buf, data_dir, confp, errstr,
                                                errstr_size, list);
        free(buf);
        return err;
}

sg_err_t sg_config_load(const char *path, sg_config_t **confp, char *errstr,
                        size_t errstr_size) {
        return config_load(path, NULL, confp, errstr, errstr_size, NULL);
}

sg_err_t sg_config_load_data_dir(const char *path, const char *data_dir,
                                 sg_config_t **confp, char *errstr,
                                 size_t errstr_size) {
        return config_load(path, data_dir, confp, errstr, errstr_size, NULL);
}

sg_err_t sg_config_errors(const char *path, sg_config_t **confp,
                          sg_config_errors_t *errs, char *errstr,
                          size_t errstr_size) {
        sg_config_errors_clear(errs);
        return config_load(path, NULL, confp, errstr, errstr_size, errs);
}

void sg_config_errors_clear(sg_config_errors_t *errs) {
        if (!errs)
                return;
        for (size_t i = 0; i < errs->cnt; i++)
                free(errs->lines[i]);
        memset(errs, 0, sizeof(*errs));
}

static void kv_free(sg_kv_t *kv, size_t cnt) {
        for (size_t i = 0; kv && i < cnt; i++) {
                free(kv[i].name);
                free(kv[i].value);
        }
        free(kv);
}

static void topic_free(sg_topic_config_t *tc) {
        sg_state_machine_t *sm = &tc->sm;

        free(tc->name);
        free(tc->output_topic);
        free(tc->dlq_topic);
        free(tc->changelog_topic);
        sg_cfg_src_clear(&tc->id);
        for (size_t i = 0; tc->scope && i < tc->scope_cnt; i++)
                sg_cfg_src_clear(&tc->scope[i]);
        free(tc->scope);
        sg_cfg_src_clear(&tc->aggregate);
        sg_cfg_src_clear(&tc->version);
        sg_cfg_src_clear(&tc->epoch);
        sg_cfg_src_clear(&tc->type);
        free(tc->digest_pointer);

        free(sm->initial);
        for (size_t i = 0; sm->states && i < sm->state_cnt; i++)
                free(sm->states[i]);
        free(sm->states);
        for (size_t i = 0; sm->transitions && i < sm->transition_cnt; i++) {
                sg_transition_t *t = &sm->transitions[i];
                free(t->type);
                for (size_t j = 0; t->from && j < t->from_cnt; j++)
                        free(t->from[j]);
                free(t->from);
                free(t->to);
        }
        free(sm->transitions);

        free(tc->snapshot.request_topic);
        free(tc->snapshot.reply_topic);
        free(tc->snapshot.url);
        free(tc->snapshot.auth_header_env);
}

void sg_config_destroy(sg_config_t *conf) {
        if (!conf)
                return;
        free(conf->instance_id);
        free(conf->transactional_id);
        free(conf->group_id);
        free(conf->http_address);
        free(conf->http_tls_cert_file);
        free(conf->http_tls_key_file);
        kv_free(conf->http_basic_auth_users, conf->http_basic_auth_user_cnt);
        kv_free(conf->http_bearer_tokens, conf->http_bearer_token_cnt);
        for (size_t i = 0; i < conf->http_auth_excluded_path_cnt; i++)
                free(conf->http_auth_excluded_paths[i]);
        free(conf->http_auth_excluded_paths);
        free(conf->data_dir);
        kv_free(conf->kafka, conf->kafka_cnt);
        kv_free(conf->kafka_consumer, conf->kafka_consumer_cnt);
        kv_free(conf->kafka_producer, conf->kafka_producer_cnt);
        for (size_t i = 0; conf->topics && i < conf->topic_cnt; i++)
                topic_free(&conf->topics[i]);
        free(conf->topics);
        for (size_t i = 0; conf->redact && i < conf->redact_cnt; i++)
                free(conf->redact[i]);
        free(conf->redact);
        free(conf);
}

int64_t sg_config_batch_ms(const sg_config_t *conf) {
        int64_t ms = conf->batch_max_ms > 0 ? conf->batch_max_ms : 0;
        int64_t ci = conf->commit_interval_ms;
        if (conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE && ci > 0 && ci < ms)
                ms = ci;
        return ms;
}

const sg_topic_config_t *sg_config_topic(const sg_config_t *conf,
                                         const char *topic) {
        if (!conf || !topic)
                return NULL;
        for (size_t i = 0; i < conf->topic_cnt; i++)
                if (conf->topics[i].name &&
                    !strcmp(conf->topics[i].name, topic))
                        return &conf->topics[i];
        return NULL;
}
