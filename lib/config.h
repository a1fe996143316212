/*
 * config.h — seqgate configuration: one JSON or YAML file, validated at
 * start-up (YAML: a file named .yaml or .yml, or one that does not start
 * with '{'; read into the same tree, so one validator and one schema
 * apply; config_yaml.c says how YAML 1.1's pitfalls are refused).
 *
 * The file (schema: schemas/config.schema.json, reference:
 * docs/configuration.md) holds librdkafka properties, passed through verbatim, and
 * per input topic: output topic, DLQ topic, envelope mapping, dedup scope and
 * TTL, ordering settings and gap policies, and an optional state machine.
 *
 * Validation errors name the offending key as a JSON path ("topics.orders.
 * ordering.gap_policy") and say what is allowed; every error of a file is
 * reported in one call, one line each (--check-config lists them all). Values of librdkafka
 * properties whose name looks secret (see sg_config_is_secret()) never
 * appear in an error or log text, nor do values that came from the
 * environment: every string value of the file takes ${VAR} references
 * (Docker Compose's rules, docs/configuration.md "Secrets and environment
 * variables"), substituted once at load.
 *
 * Rules come from ../shared/design/semantics.md (§2 envelope, §3 decision
 * table, §3b ordering modes, §4 gaps and caps, §5 output, §6 guarantees).
 *
 * Thread-safety: a loaded sg_config_t is immutable and may be read from any
 * thread.
 */
#ifndef SEQGATE_CONFIG_H
#define SEQGATE_CONFIG_H

#include "seqgate.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where an envelope field is read from (semantics §2). */
typedef enum sg_src_kind {
        SG_SRC_NONE = 0, /**< not configured */
        SG_SRC_KEY,      /**< "key": the Kafka record key */
        SG_SRC_HEADER,   /**< "header:NAME": a record header's value */
        SG_SRC_POINTER,  /**< "/a/b": RFC 6901 JSON Pointer into the value
                               (format cloudevents: a place in the event;
                               in binary mode "/data" is the value and
                               "/ATTR" the ce_ATTR header, semantics §2) */
        SG_SRC_CE,       /**< "ce:ATTR": a CloudEvents attribute (binary
                               mode: header ce_ATTR; structured: member ATTR) */
} sg_src_kind_t;

typedef struct sg_field_src {
        sg_src_kind_t kind;
        char *name; /**< header name, pointer text or CE attribute; NULL for KEY */
} sg_field_src_t;

typedef enum sg_format {
        SG_FORMAT_CLOUDEVENTS =
                0, /**< binary or structured, per record (CE Kafka binding §3) */
        SG_FORMAT_JSON, /**< plain JSON value, fields mapped explicitly */
} sg_format_t;

typedef enum sg_order_mode {
        SG_ORDER_STRICT = 0,
        SG_ORDER_LATEST_WINS,
        SG_ORDER_NONE,
} sg_order_mode_t;

typedef enum sg_gap_policy {
        SG_GAP_DLQ = 0,
        SG_GAP_SKIP,
        SG_GAP_HOLD,
} sg_gap_policy_t;

typedef enum sg_new_agg {
        SG_NEWAGG_STRICT = 0,
        SG_NEWAGG_TRUST_FIRST_SEEN,
} sg_new_agg_t;

typedef enum sg_overflow {
        SG_OVERFLOW_PAUSE = 0,
        SG_OVERFLOW_DLQ,
} sg_overflow_t;

/** ordering.epoch_versions (semantics §4b): whether a new epoch continues
 *  the version sequence (a Raft log index) or restarts it at
 *  first_version (a producer's per-epoch sequence). */
typedef enum sg_epoch_versions {
        SG_EPOCH_CONTINUE = 0,
        SG_EPOCH_RESTART,
} sg_epoch_versions_t;

typedef enum sg_partitioning {
        SG_PART_INPUT = 0, /**< output partition = input partition */
        SG_PART_MURMUR2,   /**< Java client's murmur2 on the key */
} sg_partitioning_t;

/** One state-machine transition: event `type` moves any of `from` to `to`. */
typedef struct sg_transition {
        char *type;
        char **from; /**< state names */
        size_t from_cnt;
        char *to;
} sg_transition_t;

typedef struct sg_state_machine {
        bool enabled;
        char *initial; /**< state of a new aggregate */
        char **states;
        size_t state_cnt;
        sg_transition_t *transitions;
        size_t transition_cnt;
} sg_state_machine_t;

/** Where snapshots come from (semantics §4 step 1, snapshot refetch). */
typedef enum sg_snapshot_source {
        SG_SNAP_NONE = 0, /**< no snapshot source: gap policy at the deadline */
        SG_SNAP_KAFKA,    /**< request/reply over Kafka topics */
        SG_SNAP_HTTP,     /**< HTTP GET on a URL template (libcurl multi) */
} sg_snapshot_source_t;

/**
 * "snapshot" block of a topic. A snapshot is requested when an aggregate's
 * gap deadline passes, or at once when a new aggregate arrives above
 * first_version under new_aggregate "strict".
 */
typedef struct sg_snapshot_config {
        sg_snapshot_source_t source; /**< [none] "kafka" | "http" */
        char *request_topic;         /**< kafka: required */
        char *reply_topic;      /**< kafka: required; consumed by seqgate */
        char *url;              /**< http: required, contains "{aggregate}"
                                           (replaced by the percent-encoded id) */
        char *auth_header_env;  /**< http: name of an environment variable
                                           whose value is sent as the
                                           Authorization header [NULL] */
        int64_t timeout_ms;     /**< per request [5000] */
        int64_t max_in_flight;  /**< per input partition [64] */
        int64_t max_attempts;   /**< before the gap policy applies [4] */
        int64_t backoff_ms;     /**< first retry delay [500]; doubles,
                                           with ±50% jitter */
        int64_t backoff_max_ms; /**< [30000] */
        bool emit_record;       /**< snapshot record on the output
                                           topic [true] */
} sg_snapshot_config_t;

/** Per input topic settings. Defaults in brackets. */
typedef struct sg_topic_config {
        char *name;                            /**< input topic */
        char *output_topic;                    /**< required */
        char *dlq_topic;                       /**< required */
        sg_partitioning_t output_partitioning; /**< [input] */

        /* envelope (§2) */
        sg_format_t format; /**< [cloudevents] */
        sg_field_src_t id;  /**< [ce:id] */
        sg_field_src_t
                *scope; /**< [ce:source]; may be empty (scope = topic only) */
        size_t scope_cnt;
        sg_field_src_t aggregate; /**< [key] */
        sg_field_src_t version;   /**< [ce:sequence]; NONE = dedup-only topic */
        sg_field_src_t
                type; /**< [ce:type]; NONE allowed without state machine */
        char *digest_pointer;   /**< NULL = SHA-256 of the whole value [NULL];
                                          format cloudevents: "/data" or under it */
        size_t max_field_bytes; /**< [1024] longest id/scope/aggregate/type */

        /* dedup */
        int64_t dedup_ttl_ms; /**< [604800000] (7 days, seed §sizing) */

        /* ordering (§3, §3b, §4) */
        sg_order_mode_t order_mode; /**< [strict] */
        uint64_t first_version;     /**< F [1] */
        uint64_t max_version_jump;  /**< [100000] */
        sg_new_agg_t new_aggregate; /**< [strict] */
        bool stale_drop;        /**< stale: false = DLQ [false], true = drop */
        int64_t gap_timeout_ms; /**< [30000] */
        sg_gap_policy_t gap_policy;        /**< [dlq] */
        uint64_t max_parked_per_aggregate; /**< [1000] */
        uint64_t max_parked_total;         /**< per input partition [100000] */
        uint64_t max_parked_bytes;      /**< per input partition [268435456] */
        sg_overflow_t on_park_overflow; /**< [pause] */
        /** epoch field (semantics §4b): NONE = no epochs [null] */
        sg_field_src_t epoch;
        sg_epoch_versions_t epoch_versions; /**< [continue] */

        sg_state_machine_t sm;
        sg_snapshot_config_t snapshot;
        /** exactly_once: the compacted changelog topic of this input topic,
         *  one partition per input partition
         *  [<group.id>-<topic>-changelog, as Kafka Streams names them] */
        char *changelog_topic;
} sg_topic_config_t;

typedef enum sg_guarantee {
        SG_GUARANTEE_AT_LEAST_ONCE = 0,
        SG_GUARANTEE_EXACTLY_ONCE = 1, /**< Kafka transactions + changelog
                                            (semantics §6) */
} sg_guarantee_t;

/** A librdkafka property, name and value verbatim. */
typedef struct sg_kv {
        char *name;
        char *value;
        bool from_env; /**< the value holds an environment variable's
                            (docs/configuration.md "Secrets and environment
                            variables"): a secret, whatever its name */
} sg_kv_t;

typedef struct sg_config {
        char *instance_id;        /**< [hostname-less default "seqgate"];
                                       unique per instance in a group */
        char *transactional_id;   /**< exactly_once: <group.id>-<instance_id>,
                                       stable so a restarted instance fences
                                       its zombie (KIP-98, KIP-447) */
        char *group_id;           /**< = kafka "group.id" (required) */
        char *data_dir;           /**< required */
        sg_guarantee_t guarantee; /**< [exactly_once] */
        int log_level; /**< log_level: index into error, warning, notice,
                            info, debug [3: info]; sg_config_log_level()
                            gives the sg_log_level_t */

        sg_kv_t *kafka; /**< "kafka": both clients */
        size_t kafka_cnt;
        sg_kv_t *kafka_consumer; /**< "kafka_consumer": consumer only */
        size_t kafka_consumer_cnt;
        sg_kv_t *kafka_producer; /**< "kafka_producer": producer only */
        size_t kafka_producer_cnt;

        uint64_t map_size_bytes;   /**< store.map_size_bytes [1 GiB] */
        uint64_t map_growth_bytes; /**< store.map_growth_bytes [1 GiB] */
        /** store.upgrade_from [0]: 2 during the first step of a rolling
         *  upgrade from store format 2 (the changelog records this
         *  instance writes are format 2's where it can: docs/upgrade.md),
         *  0 otherwise */
        int store_upgrade_from;
        int64_t checkpoint_interval_ms; /**< store.checkpoint_interval_ms:
                                             longest time the store's write
                                             transaction spans batches
                                             [1000]; 0: every batch
                                             (semantics §6 checkpoints) */

        int batch_max_records;       /**< batch.max_records [1000] */
        int batch_max_ms;            /**< batch.max_ms [100] */
        int64_t stats_interval_ms;   /**< [10000]; 0 disables */
        int64_t commit_interval_ms;  /**< longest time between commits
                                          [1000], at most 600000: of
                                          at_least_once's input offsets; in
                                          exactly_once a batch closes by
                                          then; 0: every batch (semantics
                                          §6) */
        int64_t delivery_timeout_ms; /**< wait for output deliveries [60000] */
        int sweep_max_per_batch;     /**< TTL sweep bound [1000] */
        int standby_replicas;        /**< standbys per input partition
                                          (semantics §6 "Standby
                                          replicas") [0] */
        int deadline_max_per_batch; /**< gap deadlines fired per batch [1000] */
        int64_t pause_retry_ms;     /**< re-check a paused partition [1000] */
        int64_t broker_retry_timeout_ms; /**< longest retry of a retriable
                                              broker error at start-up, in
                                              restores, metadata and admin
                                              calls [120000] */

        char *http_address; /**< http.address ["127.0.0.1:9464"]; NULL or
                                    "" or "off": no HTTP endpoint
                                    (docs/operating.md "HTTP endpoint") */
        bool http_read_api; /**< http.read_api: serve /v1/ [true] */
        /** http.tls_server_config.cert_file and key_file: PEM files; both
         *  set, HTTPS only; both NULL, plain HTTP [NULL] */
        char *http_tls_cert_file;
        char *http_tls_key_file;
        /** http.basic_auth_users: name = user, value = its password's
         *  bcrypt hash (Prometheus' exporter-toolkit web config) */
        sg_kv_t *http_basic_auth_users;
        size_t http_basic_auth_user_cnt;
        /** http.bearer_tokens: name = the token's name (for the operator),
         *  value = "sha256:" and the SHA-256 of the token, 64 hex digits */
        sg_kv_t *http_bearer_tokens;
        size_t http_bearer_token_cnt;
        /** http.auth_excluded_paths: paths served without credentials when
         *  users or tokens are set; NULL: the default, SG_HTTP_AUTH_EXCLUDED
         *  (http.h) */
        char **http_auth_excluded_paths;
        size_t http_auth_excluded_path_cnt;
        int64_t metrics_stuck_threshold_ms; /**< metrics.stuck_threshold_ms:
                                    parked or refetching longer than this
                                    counts as stuck [300000] */

        sg_topic_config_t *topics;
        size_t topic_cnt;

        /** Not a configuration key: set by `seqgate --accept-key-change`.
         *  A store whose key fingerprint (the settings that define
         *  idempotency keys, digests and aggregate keys) differs from this
         *  configuration's is refused unless this is true; then the new
         *  fingerprint is adopted. [false] */
        bool accept_key_change;

        /** Texts that came from the environment through ${VAR} references
         *  (each variable's value and each value built from one), owned:
         *  redacted like secrets wherever seqgate prints (docs/configuration.md
         *  "Secrets and environment variables"), longest first. */
        char **redact;
        size_t redact_cnt;
} sg_config_t;

/** Value type of a scalar configuration key (sg_config_key()). */
typedef enum sg_config_type {
        SG_CONF_BOOL = 0,  /**< true or false (bool) */
        SG_CONF_INT,       /**< integer (int) */
        SG_CONF_I64,       /**< integer (int64_t); keys ending "_ms" are
                                milliseconds */
        SG_CONF_U64,       /**< non-negative integer (uint64_t) */
        SG_CONF_SIZE,      /**< integer (size_t), bytes */
        SG_CONF_ENUM,      /**< one of names[] (stored as its index) */
        SG_CONF_ENUM_BOOL, /**< one of two names[] (stored as a bool: true
                                is names[1]) */
        SG_CONF_STRING,    /**< non-empty string (char *, owned) */
        SG_CONF_SRC,       /**< field source text (sg_field_src_t) */
} sg_config_type_t;

/** sg_config_key_t.flags: the key must be given. */
#define SG_CONF_REQUIRED 1u
/** sg_config_key_t.flags: JSON null is allowed (a field source "not
 *  configured"). */
#define SG_CONF_NULLABLE 2u
/** sg_config_key_t.flags: a reload (SIGHUP, sg_config_reload()) may change
 *  the key while seqgate runs; any other key takes a restart (semantics
 *  "Reloading the configuration"). */
#define SG_CONF_RELOAD 4u

/**
 * One scalar configuration key, as the table that parses, defaults and
 * checks it describes it (nested blocks, arrays and cross-field rules are
 * hand code and not listed). schemas/config.schema.json states the same
 * keys, defaults and bounds (tests/unit/test_config_keys.c compares them).
 */
typedef struct sg_config_key {
        const char *block; /**< JSON path of the object holding the key,
                                 "*" standing for any input topic: "" (the
                                 root), "store", "topics.*.ordering", ... */
        const char *name;  /**< member name in that object */
        sg_config_type_t type;
        unsigned flags;           /**< SG_CONF_REQUIRED, SG_CONF_NULLABLE,
                                       SG_CONF_RELOAD */
        int64_t def;              /**< default of a number, bool (0/1) or enum
                                 (index into names) key */
        const char *def_text;     /**< default of a STRING or SRC key; NULL:
                                   none (required, or unset) */
        int64_t min, max;         /**< integer keys: allowed range, inclusive */
        const char *const *names; /**< ENUM, ENUM_BOOL: the spellings,
                                       NULL-terminated */
        const char *doc;          /**< what the key sets: the meaning column of
                              docs/configuration.md (docs/gen) */
} sg_config_key_t;

/**
 * Returns the @p i th scalar configuration key (0, 1, ...), or NULL past
 * the last one. The table is static: never freed, safe from any thread.
 */
const sg_config_key_t *sg_config_key(size_t i);

/**
 * The name of an input topic's key, as its topic block spells it, from the
 * key table: "dedup.ttl_ms" for @p field offsetof(sg_topic_config_t,
 * dedup_ttl_ms). For a tool that names the key a value came from (seqgatectl
 * sizing, audit): it prints what the file says. Written into @p buf
 * (@p size bytes, cut short to fit). @returns @p buf, or NULL when no key
 * of a topic is read into that field. Thread-safe (static table).
 */
const char *sg_config_topic_key(size_t field, char *buf, size_t size);

/**
 * Loads and validates the configuration file at @p path: JSON, or YAML
 * when named .yaml or .yml or when its text does not start with '{'.
 *
 * @param path         file path, NUL-terminated.
 * @param confp        on success, *confp owns a new config; free it with
 *                     sg_config_destroy().
 * @param errstr       receives every error of the file, one line
 *                     "KEY.PATH: what is wrong; allowed: ..." each,
 *                     separated by '\n', in the order found (the first one
 *                     is what a file with only that mistake reports); cut
 *                     at errstr_size, always NUL-terminated. A JSON syntax
 *                     error or an unreadable file is one line.
 * @returns SG_OK, SG_ERR_IO (unreadable file), SG_ERR_CONFIG (invalid),
 *          SG_ERR_NOMEM.
 */
sg_err_t sg_config_load(const char *path, sg_config_t **confp, char *errstr,
                        size_t errstr_size);

/**
 * As sg_config_load(), with @p data_dir (NULL: the file's) in place of the
 * file's `data_dir` key, which may then be absent: seqgatectl's --data-dir.
 * The value is checked as the file's would be. Same returns and ownership.
 */
sg_err_t sg_config_load_data_dir(const char *path, const char *data_dir,
                                 sg_config_t **confp, char *errstr,
                                 size_t errstr_size);

/** As sg_config_load(), from a NUL-terminated JSON text. */
sg_err_t sg_config_parse(const char *json, sg_config_t **confp, char *errstr,
                         size_t errstr_size);

/** As sg_config_parse(), from a NUL-terminated YAML text (config_yaml.c:
 *  the same tree and rules; plain scalars YAML 1.1 and 1.2 read
 *  differently, such as yes/no/on/off and 0755, are refused, naming the
 *  key, line and column: quote them). */
sg_err_t sg_config_parse_yaml(const char *yaml, sg_config_t **confp,
                              char *errstr, size_t errstr_size);

/** Most errors sg_config_errors_t keeps; the rest are counted only. */
#define SG_CONFIG_ERRORS_MAX 100

/**
 * Every error of one configuration file, as a list (--check-config and the
 * daemon's start print each line, then "and N more" and a count line).
 * Zero it before use; free it with sg_config_errors_clear().
 */
typedef struct sg_config_errors {
        char *lines[SG_CONFIG_ERRORS_MAX]; /**< "KEY.PATH: what is wrong",
                                                owned, in the order found */
        size_t cnt;   /**< lines held (<= SG_CONFIG_ERRORS_MAX) */
        size_t total; /**< errors found; total - cnt were left out */
} sg_config_errors_t;

/**
 * As sg_config_load(), and every error also into @p errs (cleared first;
 * the unreadable-file and syntax errors as its one line). The errstr API
 * keeps what sg_config_load() fills (its first line is the first error).
 * @returns as sg_config_load(); errs->total > 0 exactly when it is
 *          SG_ERR_CONFIG or SG_ERR_IO. Thread-safety: as sg_config_load().
 */
sg_err_t sg_config_errors(const char *path, sg_config_t **confp,
                          sg_config_errors_t *errs, char *errstr,
                          size_t errstr_size);

/** Frees the lines of @p errs and zeroes it. NULL is a no-op. */
void sg_config_errors_clear(sg_config_errors_t *errs);

/** Frees @p conf and everything it owns. NULL is a no-op. */
void sg_config_destroy(sg_config_t *conf);

/**
 * Sets the instance id (the --instance-id flag overrides the file's
 * "instance_id") and, in exactly_once, the transactional id that follows
 * from it, <group.id>-<instance_id> (semantics §6, the one place it is
 * built). @p instance_id is copied.
 * @returns SG_OK, SG_ERR_CONFIG (empty id, errstr filled), SG_ERR_NOMEM.
 */
sg_err_t sg_config_set_instance_id(sg_config_t *conf, const char *instance_id,
                                   char *errstr, size_t errstr_size);

/**
 * Adds the librdkafka property @p name = @p value on top of the config's
 * "kafka" block (seqgatectl's -X, kcat's convention: every Kafka client
 * built from @p conf takes it; a name given again later wins, as in
 * librdkafka). It must pass the checks a "kafka" entry passes at load time
 * (semantics §6: no auto commit, idempotence and acks=all, no
 * transactional.id; librdkafka's own name and value check), else nothing
 * is added. @p name and @p value are copied.
 * @returns SG_OK, SG_ERR_CONFIG (errstr: "kafka.NAME: why", a secret's value
 *          never shown), SG_ERR_INVALID (empty name), SG_ERR_NOMEM.
 * Thread-safety: none (modifies @p conf).
 */
sg_err_t sg_config_kafka_set(sg_config_t *conf, const char *name,
                             const char *value, char *errstr,
                             size_t errstr_size);

/**
 * How long one batch collects records at most, milliseconds: batch.max_ms;
 * in exactly_once, where a batch is one Kafka transaction, also at most
 * commit_interval_ms when that is > 0 (the smaller wins), as Kafka Streams'
 * commit.interval.ms bounds a transaction under exactly_once_v2
 * (docs/configuration.md, commit_interval_ms). Pure; thread-safe on a config nobody changes.
 */
int64_t sg_config_batch_ms(const sg_config_t *conf);

/** The sg_log_level_t of @p conf's log_level key. Pure. */
sg_log_level_t sg_config_log_level(const sg_config_t *conf);

/** One key two configurations disagree on (sg_config_diff()). */
typedef struct sg_config_change {
        char *key; /**< its path as the errors name keys:
                        "topics.orders.ordering.gap_timeout_ms",
                        "kafka.bootstrap.servers", "topics.payments" (an
                        input topic added or removed) */
        bool live; /**< a reload may change it (SG_CONF_RELOAD) */
        char *old_json, *new_json; /**< the two values as JSON texts
                                        (numbers, booleans, enum names);
                                        NULL where not shown: texts (a URL
                                        may carry a key, a value may come
                                        from the environment), librdkafka
                                        properties, whole blocks */
} sg_config_change_t;

/** Every key two configurations disagree on; zero it before use, free it
 *  with sg_config_diff_clear(). */
typedef struct sg_config_diff {
        sg_config_change_t *changes; /**< root keys in key table order, the
                                          librdkafka blocks, then topic by
                                          topic */
        size_t cnt;
        size_t refused; /**< changes whose live is false */
} sg_config_diff_t;

/**
 * Lists the keys whose effective values differ between @p a and @p b
 * (defaults filled in: a key left out and one written with its default
 * are the same), each marked live when a reload may change it.
 * @returns SG_OK or SG_ERR_NOMEM (@p diff then empty).
 * Thread-safety: reads both; reentrant.
 */
sg_err_t sg_config_diff(const sg_config_t *a, const sg_config_t *b,
                        sg_config_diff_t *diff);

/** Frees the changes of @p diff and zeroes it. NULL is a no-op. */
void sg_config_diff_clear(sg_config_diff_t *diff);

/**
 * Reload (semantics "Reloading the configuration"): brings @p live up to
 * @p next, a configuration loaded and validated in full from the new file
 * (with the command line's overrides applied again). Every key that
 * differs must be one a reload may change (SG_CONF_RELOAD: ordering
 * tuning, TTLs, gap deadlines, caps, log level, metrics settings, a
 * snapshot source's URL and retries); if one is not (the librdkafka
 * blocks, the topic set, the envelope — the idempotency key's settings —,
 * data_dir, the guarantee, ...), nothing changes and SG_ERR_CONFIG names
 * them all in @p errstr. Changes in place: every pointer into @p live
 * stays valid. Texts from the environment in @p next join @p live's
 * redaction list. @p diff receives every change (the caller's to clear,
 * also on error).
 * @returns SG_OK (live now has next's values), SG_ERR_CONFIG (refused),
 *          SG_ERR_NOMEM (nothing changed).
 * Thread-safety: none on @p live: call it where no batch runs and no other
 * thread reads @p live (the loop's reload point, kafka.h).
 */
sg_err_t sg_config_reload(sg_config_t *live, const sg_config_t *next,
                          sg_config_diff_t *diff, char *errstr,
                          size_t errstr_size);

/**
 * The effective configuration of @p conf as an indented JSON text (a
 * configuration file of its own: every default filled in, the changelog
 * topics named), for `seqgate --print-config`. Secrets are redacted: the
 * value of every librdkafka property sg_config_kv_secret() flags is "***",
 * and every text that came from the environment is replaced by "***"
 * wherever it appears.
 * @returns a malloc'd NUL-terminated text (free()), or NULL out of memory.
 * Thread-safety: reentrant.
 */
char *sg_config_print(const sg_config_t *conf);

/** Returns the topic config for input topic @p topic, or NULL. */
const sg_topic_config_t *sg_config_topic(const sg_config_t *conf,
                                         const char *topic);

/**
 * True if a librdkafka property named @p name holds a secret (sasl.password,
 * ssl.key.password, ssl.keystore.password, sasl.oauthbearer.client.secret,
 * ssl.key.pem, sasl.oauthbearer.config, ... : any name containing "password",
 * "secret", ".pem" or "sasl.oauthbearer.config"). Its value must never be
 * logged or echoed in an error.
 */
bool sg_config_is_secret(const char *name);

/**
 * True if property @p kv's value must never be printed: its name is a
 * secret's (sg_config_is_secret()) or its value came from the environment
 * (docs/configuration.md "Secrets and environment variables").
 */
bool sg_config_kv_secret(const sg_kv_t *kv);

/**
 * Returns a malloc'd copy of @p s with every occurrence of @p secret
 * replaced by "***", or NULL when there is none (or out of memory). A
 * secret shorter than 4 bytes is replaced only where it stands between
 * double quotes: replacing a bare "1" would erase every digit of a line.
 * Thread-safety: reentrant.
 */
char *sg_config_redact_text(const char *s, const char *secret);

/** Parses a field source text ("key", "header:X", "/ptr", "ce:attr"). */
sg_err_t sg_field_src_parse(const char *text, sg_field_src_t *out, char *errstr,
                            size_t errstr_size);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_CONFIG_H */
