/*
 * config_int.h — what the files of the configuration parser share
 * (config.c: the root, loading, freeing; config_get.c: errors, paths,
 * typed getters, field sources; config_keys.c: the key table; config_kafka.c: librdkafka properties;
 * config_topic.c: topics; config_snapshot.c: snapshot sources;
 * config_env.c: ${VAR} interpolation). Not a
 * public header: nothing outside lib/config*.c includes it.
 *
 * Every function that takes a cfg_ctx_t reports a configuration error by
 * sg_cfg_fail() (one line appended to the context's errstr) and returns
 * SG_ERR_CONFIG, or returns SG_ERR_NOMEM after sg_cfg_nomem(). Threads:
 * a context belongs to one sg_config_parse() call.
 */
#ifndef SEQGATE_CONFIG_INT_H
#define SEQGATE_CONFIG_INT_H

#include "config.h"

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Longest dotted key path we build; longer paths are truncated. */
#define SG_PATH_SIZE 1024

/** Longest value quoted back in an error text. */
#define SG_QUOTE_MAX 80

/* A string value that held a reference or "$$" (config_env.c). */
typedef struct cfg_env_node {
        const cJSON *node; /* its node, value now substituted */
        char *raw;         /* the value as written in the file */
        bool from_env;     /* a variable's value is (part of) it */
} cfg_env_node_t;

/* What interpolation learnt (config_env.c). */
typedef struct cfg_env {
        cfg_env_node_t *nodes;
        size_t node_cnt, node_cap;
        char **redact; /* substituted values and values built from them */
        size_t redact_cnt, redact_cap;
        char **bad; /* key paths whose interpolation failed */
        size_t bad_cnt, bad_cap;
} cfg_env_t;

/* Error reporting context. */
typedef struct cfg_ctx {
        char *errstr;
        size_t errstr_size;
        size_t err_len; /* bytes of errstr used (without the NUL) */
        size_t err_cnt; /* errors reported so far */
        bool eos; /* guarantee exactly_once (parsed before the kafka block) */
        sg_config_errors_t *list; /* NULL, or also every error here */
        cfg_env_t env;
} cfg_ctx_t;

/** Evaluates @p expr (an sg_err_t): a configuration error is reported
 *  (sg_cfg_fail() recorded it) and parsing goes on; any other error returns. */
#define KEEP(expr)                                                             \
        do {                                                                   \
                sg_err_t keep_ = (expr);                                       \
                if (keep_ && keep_ != SG_ERR_CONFIG)                           \
                        return keep_;                                          \
        } while (0)

/** SG_ERR_CONFIG if errors were reported since @p since (an err_cnt). */
static inline sg_err_t errors_since(const cfg_ctx_t *c, size_t since) {
        return c->err_cnt > since ? SG_ERR_CONFIG : SG_OK;
}

/** A run of rows read at one point of a block (rows in table order). */
typedef enum cfg_sect {
        SECT_ROOT,         /* root keys read before the kafka blocks */
        SECT_STORE,        /* "store" */
        SECT_BATCH,        /* "batch" */
        SECT_ROOT_LIMITS,  /* root keys read after store and batch */
        SECT_HTTP,         /* "http" */
        SECT_HTTP_TLS,     /* "http.tls_server_config" */
        SECT_METRICS,      /* "metrics" */
        SECT_TOPIC,        /* a topic's own keys */
        SECT_ENVELOPE,     /* envelope keys before "scope" */
        SECT_ENVELOPE_MAX, /* envelope keys after "digest" */
        SECT_DEDUP,        /* "dedup" */
        SECT_ORDERING,     /* "ordering" */
        SECT_SNAP_KAFKA,   /* "snapshot" with source kafka */
        SECT_SNAP_HTTP,    /* "snapshot" with source http */
        SECT_SNAP_RETRY,   /* "snapshot" timeouts and retries */
        SECT_SNAP_OUTPUT,  /* "snapshot" keys after the retry rule */
} cfg_sect_t;

/**
 * A one-key rule run after the key at @p key_path (in object @p obj at
 * @p path) was read without error; @p base is the struct the row's field
 * is in. Reports with sg_cfg_fail(); returns SG_OK or a non-configuration error.
 */
typedef sg_err_t cfg_check_fn(cfg_ctx_t *c, const cJSON *obj, const char *path,
                              const char *key_path, void *base);

/* config_get.c: errors and paths */
/** Copies @p src into @p dst (@p dst_size bytes, truncated, NUL-terminated)
 *  as one line of printable UTF-8, anything else as \xNN: a value quoted
 *  in an error. */
void sg_cfg_put_clean(char *dst, size_t dst_size, const char *src);
sg_err_t sg_cfg_fail(cfg_ctx_t *c, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void sg_cfg_set_errstr(char *errstr, size_t errstr_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
sg_err_t sg_cfg_nomem(cfg_ctx_t *c);
void sg_cfg_path_key(char *buf, const char *parent, const char *key);
/** buf (SG_PATH_SIZE bytes) = the path of input topic @p name:
 *  topics.NAME, or topics["NAME"] when the name holds a dot (Kafka allows
 *  orders.v1), a bracket or a quote, so that the name is never read as a
 *  path (JSONPath's bracket notation). */
void sg_cfg_path_topic(char *buf, const char *name);
void sg_cfg_path_idx(char *buf, const char *parent, size_t idx);
const char *sg_cfg_join(char *buf, size_t size, const char *const *list);
const char *sg_cfg_join_n(char *buf, size_t size, char *const *list,
                          size_t cnt);

/* config_get.c: typed getters */
sg_err_t sg_cfg_expect_object(cfg_ctx_t *c, const cJSON *item,
                              const char *path);
sg_err_t sg_cfg_check_keys(cfg_ctx_t *c, const cJSON *obj, const char *path,
                           const char *const *allowed);
/** A block of an object and its keys (sg_cfg_check_keys_in's @p nested). */
typedef struct cfg_block {
        const char *name;        /**< the block's key: "dedup" */
        const char *const *keys; /**< its keys, NULL-terminated */
} cfg_block_t;
sg_err_t sg_cfg_check_keys_in(cfg_ctx_t *c, const cJSON *obj, const char *path,
                              const char *const *allowed,
                              const cfg_block_t *nested);
extern const char *const sg_cfg_snapshot_keys[];
/** Every block of the file and its keys, by the block's path ("" the
 *  root, "topics.*.ordering"): config.c's and config_topic.c's. */
extern const cfg_block_t sg_cfg_root_places[];
extern const cfg_block_t sg_cfg_topic_places[];
/**
 * Where @p key belongs when it is not a key of the block at @p path (whose
 * keys are @p here; NULL: a block of librdkafka properties): the block of
 * the file that has it (@p near: or that has a likely misspelling of it or
 * it with its unit suffix, "_ms" or "_bytes"), at most two. Writes "the
 * root key \"K\" (the top level of the file)" or a dotted path,
 * "topics.orders.ordering.K" (an input topic's key named outside any topic:
 * "topics.<topic>.ordering.K"), into @p buf (@p size bytes), two joined by
 * " or "; *@p root (may be NULL): the first is a root key. Returns false
 * (buf empty): none.
 */
bool sg_cfg_key_home(const char *key, const char *const *here, const char *path,
                     bool near, char *buf, size_t size, bool *root);
sg_err_t sg_cfg_get_str(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, bool required, const char **out);
sg_err_t sg_cfg_get_str_dup(cfg_ctx_t *c, const cJSON *obj, const char *path,
                            const char *key, bool required, char **dst);
sg_err_t sg_cfg_get_int(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, int64_t min, int64_t max,
                        int64_t *out);
sg_err_t sg_cfg_get_enum(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         const char *key, const char *const *names,
                         const char *note, int *out);
sg_err_t sg_cfg_get_src(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, bool nullable, sg_field_src_t *src);

/**
 * cJSON keeps a number as a double only, which rounds integers above
 * 2^53. This gives each number node of @p root (parsed from @p json) its
 * text as written, in valuestring (which cJSON leaves NULL for numbers and
 * cJSON_Delete() frees), found by a scan of the text in document order;
 * sg_cfg_get_int() reads that text exactly. Returns SG_OK or SG_ERR_NOMEM.
 */
sg_err_t sg_cfg_number_texts(cJSON *root, const char *json);

/* config_yaml.c: a YAML text as the tree a JSON text gives (numbers with
 * their text, as sg_cfg_number_texts() leaves them). *rootp owned by the
 * caller on SG_OK; SG_ERR_CONFIG with one "PATH: YAML line L, column C:
 * why" line in @p errstr (never a value), or SG_ERR_NOMEM. */
sg_err_t sg_cfg_yaml_parse(const char *text, size_t len, cJSON **rootp,
                           char *errstr, size_t errstr_size);

/* config_get.c: field sources, topic names */
bool sg_cfg_valid_pointer(const char *p);
void sg_cfg_src_clear(sg_field_src_t *src);
sg_err_t sg_cfg_src_default(cfg_ctx_t *c, sg_field_src_t *src,
                            sg_src_kind_t kind, const char *name);
sg_err_t sg_cfg_src_from_json(cfg_ctx_t *c, const cJSON *it, const char *path,
                              sg_field_src_t *src);
bool sg_cfg_valid_topic_name(const char *s);
sg_err_t sg_cfg_check_topic_name(cfg_ctx_t *c, const char *path,
                                 const char *name);
bool sg_cfg_contains_ci(const char *hay, const char *needle);

/* config_env.c: ${VAR} interpolation (docs/configuration.md "Secrets and
 * environment variables") */
/** Substitutes the references of every string value of @p root (member
 *  names, numbers and booleans are not touched), reporting each malformed
 *  reference and unset variable with the value's key path. */
sg_err_t sg_cfg_interpolate(cfg_ctx_t *c, cJSON *root);
/** The text @p node had in the file before interpolation; NULL if it held
 *  no reference. */
const char *sg_cfg_env_raw(const cfg_ctx_t *c, const cJSON *node);
/** True if (part of) @p node's value is an environment variable's. */
bool sg_cfg_from_env(const cfg_ctx_t *c, const cJSON *node);
/** True if interpolation failed at key path @p path (further errors about
 *  that value are not said: they would follow from that one). */
bool sg_cfg_env_failed(const cfg_ctx_t *c, const char *path);
void sg_cfg_env_free(cfg_env_t *e);

/* config_keys.c: the key table */
extern const char *const sg_cfg_mode_names[];
sg_err_t sg_cfg_defaults(cfg_ctx_t *c, cfg_sect_t s, void *base);
sg_err_t sg_cfg_read(cfg_ctx_t *c, const cJSON *obj, const char *path,
                     cfg_sect_t s, void *base);
/* the rows one by one (i < sg_cfg_row_cnt(); sg_config_key(i) is the
 * row's key), for the reload (config_reload.c) and the printer
 * (config_print.c); @p base is the sg_config_t or sg_topic_config_t the
 * row's block says */
size_t sg_cfg_row_cnt(void);
cfg_sect_t sg_cfg_row_sect(size_t i);
/** True if row @p i's field holds the same value in @p a and @p b. */
bool sg_cfg_row_equal(size_t i, const void *a, const void *b);
/** Row @p i's value in @p base as JSON, as the file writes it (a field
 *  source "not configured" is null); NULL for an unset string (and out of
 *  memory). */
cJSON *sg_cfg_row_json(size_t i, const void *base);
/** A copy of the text row @p i's field in @p src owns (string, field source
 *  name) into *dupp (NULL: none). SG_OK or SG_ERR_NOMEM. */
sg_err_t sg_cfg_row_dup(size_t i, const void *src, char **dupp);
/** Sets row @p i's field in @p dst to its value in @p src; a text is
 *  @p dup (sg_cfg_row_dup(), taken), the old one freed. Cannot fail. */
void sg_cfg_row_set(size_t i, void *dst, const void *src, char *dup);

/* config_kafka.c */
sg_err_t sg_cfg_parse_kafka(cfg_ctx_t *c, const cJSON *root, sg_config_t *conf);

/* config_topic.c: the one-key checks of the table, the topics */
cfg_check_fn sg_cfg_check_http_address;
cfg_check_fn sg_cfg_check_upgrade_from;
cfg_check_fn sg_cfg_check_output_topic, sg_cfg_check_dlq_topic,
        sg_cfg_check_changelog_topic, sg_cfg_check_format;
bool sg_cfg_topic_named(const sg_topic_config_t *tc);
sg_err_t sg_cfg_parse_topics(cfg_ctx_t *c, const cJSON *root,
                             sg_config_t *conf);

/* config_snapshot.c: the one-key checks of the table, the block, the
 * rules between topics */
cfg_check_fn sg_cfg_check_request_topic, sg_cfg_check_reply_topic,
        sg_cfg_check_url, sg_cfg_check_auth_header_env;
sg_err_t sg_cfg_parse_snapshot(cfg_ctx_t *c, const cJSON *obj, const char *path,
                               sg_topic_config_t *tc);
sg_err_t sg_cfg_check_snapshot_topics(cfg_ctx_t *c, const sg_config_t *conf);

#endif /* SEQGATE_CONFIG_INT_H */
