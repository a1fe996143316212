/*
 * config_keys.c — the key table: one row per scalar configuration key, and
 * the reader that sets defaults, reads keys and reports their errors from it
 * (see config.c for how the parser reports errors).
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Enum spellings, in sg_*_t order. */
static const char *const PARTITIONING_NAMES[] = {"input", "murmur2", NULL};
static const char *const FORMAT_NAMES[] = {"cloudevents", "json", NULL};
const char *const sg_cfg_mode_names[] = {"strict", "latest_wins", "none", NULL};
static const char *const GAP_NAMES[] = {"dlq", "skip", "hold", NULL};
static const char *const NEWAGG_NAMES[] = {"strict", "trust_first_seen", NULL};
static const char *const OVERFLOW_NAMES[] = {"pause", "dlq", NULL};
static const char *const STALE_NAMES[] = {"dlq", "drop", NULL};
static const char *const EPOCH_VERSIONS_NAMES[] = {"continue", "restart", NULL};

/* sg_log_level_t from SG_LOG_ERR on (sg_config_log_level()) */
static const char *const LOG_LEVEL_NAMES[] = {"error", "warning", "notice",
                                              "info",  "debug",   NULL};
static const char *const GUARANTEE_NAMES[] = {"at_least_once", "exactly_once",
                                              NULL};

/* ------------------------------------------------------------------------ */
/* The key table                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Every scalar key is one row of cfg_rows[] (the Redis static_configs[]
 * idea): its place, type, field, default, bounds and doc. The row drives
 * the default (sg_cfg_defaults()), the reading and its error messages
 * (row_read()) and the one-key check that follows a successful read (the
 * row's check function). Nested blocks, arrays and the rules between keys
 * stay hand code, which calls sg_cfg_read() for a section at the point of
 * the block where its keys were always read, so errors keep their order.
 */

typedef struct cfg_row {
        sg_config_key_t key;
        cfg_sect_t sect;
        size_t off;          /* of the field in sg_config_t (root, store,
                                batch) or sg_topic_config_t (topics.*) */
        cfg_check_fn *check; /* NULL: none */
} cfg_row_t;

/* one initializer, laid out as the struct reads */
/* clang-format off */
#define ROW(S, T, F, B, N, TY, FL, D, TX, MIN, MAX, NM, CK, DOC)               \
        {{.block = (B), .name = (N), .type = (TY), .flags = (FL),              \
          .def = (D), .def_text = (TX), .min = (MIN), .max = (MAX),            \
          .names = (NM), .doc = (DOC)},                                        \
         (S), offsetof(T, F), (CK)}
/* clang-format on */
/* root, store and batch keys: fields of sg_config_t */
#define R_INT(S, F, B, N, FL, D, MIN, MAX, DOC)                                \
        ROW(S, sg_config_t, F, B, N, SG_CONF_INT, FL, D, NULL, MIN, MAX, NULL, \
            NULL, DOC)
#define R_I64(S, F, B, N, FL, D, MIN, DOC)                                     \
        ROW(S, sg_config_t, F, B, N, SG_CONF_I64, FL, D, NULL, MIN,            \
            SG_JSON_INT_MAX, NULL, NULL, DOC)
#define R_U64(S, F, B, N, FL, D, MIN, DOC)                                     \
        ROW(S, sg_config_t, F, B, N, SG_CONF_U64, FL, D, NULL, MIN,            \
            SG_JSON_INT_MAX, NULL, NULL, DOC)
/* topics.* keys: fields of sg_topic_config_t */
#define T_STR(S, F, B, N, FL, CK, DOC)                                         \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_STRING, FL, 0, NULL, 0, 0,  \
            NULL, CK, DOC)
#define T_ENUM(S, F, B, N, FL, D, NM, DOC)                                     \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_ENUM, FL, D, NULL, 0, 0,    \
            NM, NULL, DOC)
#define T_SRC(F, N, FL, TX, DOC)                                               \
        ROW(SECT_ENVELOPE, sg_topic_config_t, F, "topics.*.envelope", N,       \
            SG_CONF_SRC, FL, 0, TX, 0, 0, NULL, NULL, DOC)
#define T_I64(S, F, B, N, FL, D, MIN, MAX, DOC)                                \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_I64, FL, D, NULL, MIN, MAX, \
            NULL, NULL, DOC)
#define T_U64(F, N, FL, D, MIN, DOC)                                           \
        ROW(SECT_ORDERING, sg_topic_config_t, F, "topics.*.ordering", N,       \
            SG_CONF_U64, FL, D, NULL, MIN, SG_JSON_INT_MAX, NULL, NULL, DOC)

#define ORD "topics.*.ordering"
/* a key that a reload may change (semantics "Reloading the configuration") */
#define LIVE SG_CONF_RELOAD
#define SNAP "topics.*.snapshot"

static const cfg_row_t cfg_rows[] = {
        ROW(SECT_ROOT, sg_config_t, instance_id, "", "instance_id",
            SG_CONF_STRING, 0, 0, NULL, 0, 0, NULL, NULL,
            "name of this instance: the DLQ header `instance`, and the "
            "transactional id `<group.id>-<instance_id>`; unique per instance "
            "in a consumer group. Default: the host name (`seqgate` if it "
            "has none), so that instances on different hosts sharing one "
            "configuration file never fence each other. Two instances on "
            "one host (one network namespace) need their own: a second "
            "start with a (group.id, instance_id) that a running seqgate "
            "on the host holds exits 2, and `--check-config` says so"),
        ROW(SECT_ROOT, sg_config_t, data_dir, "", "data_dir", SG_CONF_STRING,
            SG_CONF_REQUIRED, 0, NULL, 0, 0, NULL, NULL,
            "directory of the LMDB state store (created if missing)"),
        ROW(SECT_ROOT, sg_config_t, guarantee, "", "guarantee", SG_CONF_ENUM, 0,
            SG_GUARANTEE_EXACTLY_ONCE, NULL, 0, 0, GUARANTEE_NAMES, NULL,
            "`exactly_once`: Kafka transactions and a changelog; "
            "`at_least_once`: no transactions, a changelog with epochs and "
            "markers, duplicates possible (semantics §6)"),
        ROW(SECT_ROOT, sg_config_t, log_level, "", "log_level", SG_CONF_ENUM,
            LIVE, 3, NULL, 0, 0, LOG_LEVEL_NAMES, NULL,
            "the least severe log line written: `error`, `warning`, "
            "`notice`, `info` or `debug`; `--log-level` wins over it"),
        R_U64(SECT_STORE, map_size_bytes, "store", "map_size_bytes", 0,
              INT64_C(1073741824), 1048576,
              "initial LMDB map size, bytes: the size at which the map grows, "
              "not allocated up front (the write-through map)"),
        R_U64(SECT_STORE, map_growth_bytes, "store", "map_growth_bytes", 0,
              INT64_C(1073741824), 1048576,
              "growth step of the LMDB map when it is full, bytes"),
        ROW(SECT_STORE, sg_config_t, store_upgrade_from, "store",
            "upgrade_from", SG_CONF_INT, 0, 0, NULL, 0, 2, NULL,
            sg_cfg_check_upgrade_from,
            "`2` during the first step of a rolling upgrade from a version "
            "with store format 2: the changelog records this instance "
            "writes stay readable by that version (docs/upgrade.md); `0` "
            "(or absent) once every instance runs this version"),
        ROW(SECT_STORE, sg_config_t, checkpoint_interval_ms, "store",
            "checkpoint_interval_ms", SG_CONF_I64, 0, 1000, NULL, 0, 600000,
            NULL, NULL,
            "longest time, milliseconds, the store keeps one LMDB write "
            "transaction open across batches before it commits it (a "
            "checkpoint: semantics §6); 0: after every batch"),
        R_INT(SECT_BATCH, batch_max_records, "batch", "max_records", 0, 1000, 1,
              100000, "most input records per batch"),
        R_INT(SECT_BATCH, batch_max_ms, "batch", "max_ms", LIVE, 100, 1, 60000,
              "longest time a batch collects, milliseconds, from when its "
              "oldest record may have arrived (semantics §6 \"Batches and "
              "latency\")"),
        R_I64(SECT_ROOT_LIMITS, stats_interval_ms, "", "stats_interval_ms",
              LIVE, 10000, 0,
              "period of the stats log line, of the restore_progress lines "
              "during a restore, and the shortest between two dlq_summary "
              "lines of an input topic, milliseconds; 0: off"),
        ROW(SECT_ROOT_LIMITS, sg_config_t, commit_interval_ms, "",
            "commit_interval_ms", SG_CONF_I64, LIVE, 1000, NULL, 0, 600000,
            NULL, NULL,
            "longest time between commits, milliseconds (Kafka Streams' "
            "`commit.interval.ms`). `at_least_once`: of the input offsets, "
            "which are also committed when partitions are revoked and at a "
            "clean stop; `exactly_once`: a batch (one Kafka transaction) "
            "closes at `batch.max_ms` or at this, whichever comes first; 0: "
            "after every batch"),
        R_I64(SECT_ROOT_LIMITS, delivery_timeout_ms, "", "delivery_timeout_ms",
              0, 60000, 1,
              "longest wait for a batch's deliveries before the batch is "
              "aborted, milliseconds"),
        R_INT(SECT_ROOT_LIMITS, sweep_max_per_batch, "", "sweep_max_per_batch",
              LIVE, 1000, 1, 1000000,
              "expired dedup records given their changelog tombstone per "
              "partition per batch (their time segment is emptied once "
              "every one has, semantics 3 Expiry)"),
        R_INT(SECT_ROOT_LIMITS, standby_replicas, "", "standby_replicas", 0, 0,
              0, 16,
              "standby replicas per input partition (Kafka Streams' "
              "`num.standby.replicas`): other instances of the group keep "
              "the partition's store current by tailing its changelog, so "
              "that a failover restores only a short tail; placed by member "
              "id (docs/operating.md \"Standby replicas\"); 0: none"),
        R_INT(SECT_ROOT_LIMITS, deadline_max_per_batch, "",
              "deadline_max_per_batch", LIVE, 1000, 1, 1000000,
              "gap deadlines fired per batch"),
        R_I64(SECT_ROOT_LIMITS, pause_retry_ms, "", "pause_retry_ms", LIVE,
              1000, 1,
              "how long a back-pressured partition stays paused before its "
              "record is read again, milliseconds"),
        R_I64(SECT_ROOT_LIMITS, broker_retry_timeout_ms, "",
              "broker_retry_timeout_ms", 0, 120000, 1,
              "how long a retriable broker error (leader not available, not "
              "leader, coordinator loading, request timed out, ...) at "
              "start-up, in a restore, a metadata or an admin call is retried, "
              "with back-off, before seqgate stops, milliseconds"),
        ROW(SECT_HTTP, sg_config_t, http_address, "http", "address",
            SG_CONF_STRING, 0, 0, "127.0.0.1:9464", 0, 0, NULL,
            sg_cfg_check_http_address,
            "the HTTP endpoint's listening address: `host:port` with a numeric "
            "IPv4 address (`0.0.0.0`: every interface) or `localhost`, "
            "`[v6]:port` (`[::]`: every interface); port 0: the kernel picks "
            "one (the http_listening line says which); `\"\"` or `\"off\"`: no "
            "endpoint"),
        ROW(SECT_HTTP, sg_config_t, http_read_api, "http", "read_api",
            SG_CONF_BOOL, 0, 1, NULL, 0, 0, NULL, NULL,
            "serve the `/v1/` read endpoints (false: every `/v1/` path is "
            "404)"),
        ROW(SECT_HTTP_TLS, sg_config_t, http_tls_cert_file,
            "http.tls_server_config", "cert_file", SG_CONF_STRING, 0, 0, NULL,
            0, 0, NULL, NULL,
            "HTTPS only, TLS 1.2 and 1.3: the server's certificate chain, PEM "
            "(with `key_file`; read at start, a renewed certificate needs a "
            "restart)"),
        ROW(SECT_HTTP_TLS, sg_config_t, http_tls_key_file,
            "http.tls_server_config", "key_file", SG_CONF_STRING, 0, 0, NULL, 0,
            0, NULL, NULL, "HTTPS: the server's private key, PEM"),
        R_I64(SECT_METRICS, metrics_stuck_threshold_ms, "metrics",
              "stuck_threshold_ms", LIVE, 300000, 1,
              "an aggregate parked or refetching for longer than this counts "
              "in `stuck_parked` and `seqgate_stuck_processing` (and the "
              "seed's `seqgate_stuck_processing_over_5m`, whatever this is), "
              "milliseconds"),

        T_STR(SECT_TOPIC, output_topic, "topics.*", "output_topic",
              SG_CONF_REQUIRED, sg_cfg_check_output_topic,
              "where applied records go"),
        T_STR(SECT_TOPIC, dlq_topic, "topics.*", "dlq_topic", SG_CONF_REQUIRED,
              sg_cfg_check_dlq_topic,
              "where refused records go, with headers that say why"),
        T_STR(SECT_TOPIC, changelog_topic, "topics.*", "changelog_topic", 0,
              sg_cfg_check_changelog_topic,
              "the compacted changelog topic of this input topic (one "
              "partition per input partition, both guarantees), created if "
              "missing with the broker's `default.replication.factor` and "
              "`min.insync.replicas` (as Kafka Streams' `replication.factor` "
              "-1; create it beforehand for others: `--check-config "
              "--cluster` warns below 3 replicas on 3+ brokers); unset: "
              "`<group.id>-<topic>-changelog`"),
        T_ENUM(SECT_TOPIC, output_partitioning, "topics.*",
               "output_partitioning", 0, SG_PART_INPUT, PARTITIONING_NAMES,
               "`input`: the input record's partition; `murmur2`: the Java "
               "client's partitioner on the key"),

        ROW(SECT_ENVELOPE, sg_topic_config_t, format, "topics.*.envelope",
            "format", SG_CONF_ENUM, 0, SG_FORMAT_CLOUDEVENTS, NULL, 0, 0,
            FORMAT_NAMES, sg_cfg_check_format,
            "`cloudevents` (binary or structured mode, per record) or `json` "
            "(plain JSON, each field mapped explicitly; semantics §2)"),
        T_SRC(id, "id", 0, "ce:id",
              "the event id, with the scope the idempotency key; required with "
              "format `json`"),
        T_SRC(aggregate, "aggregate", SG_CONF_NULLABLE, "key",
              "the aggregate id"),
        T_SRC(version, "version", SG_CONF_NULLABLE, "ce:sequence",
              "the version (decimal unsigned 64-bit); `null`: dedup only "
              "(format `json`: unset unless mapped)"),
        T_SRC(type, "type", SG_CONF_NULLABLE, "ce:type",
              "the event type, for the state machine (format `json`: unset "
              "unless mapped)"),
        ROW(SECT_ENVELOPE_MAX, sg_topic_config_t, max_field_bytes,
            "topics.*.envelope", "max_field_bytes", SG_CONF_SIZE, 0, 1024, NULL,
            1, 1048576, NULL, NULL,
            "longest id, scope part, aggregate or type, bytes"),

        T_I64(SECT_DEDUP, dedup_ttl_ms, "topics.*.dedup", "ttl_ms", LIVE,
              INT64_C(604800000), 1000, SG_JSON_INT_MAX,
              "how long an idempotency key is remembered, milliseconds; must "
              "cover the longest client retry window, the topic's retention "
              "and any replay period"),

        T_ENUM(SECT_ORDERING, order_mode, ORD, "mode", 0, SG_ORDER_STRICT,
               sg_cfg_mode_names, "ordering mode (semantics §3b)"),
        T_U64(first_version, "first_version", 0, 1, 0,
              "`F`, the version of a new aggregate's first event"),
        T_U64(max_version_jump, "max_version_jump", LIVE, 100000, 1,
              "a larger step above the last applied version is DLQ "
              "`version_jump`, not parked"),
        T_ENUM(SECT_ORDERING, new_aggregate, ORD, "new_aggregate", LIVE,
               SG_NEWAGG_STRICT, NEWAGG_NAMES,
               "a new aggregate above `first_version`: `strict` parks it (a "
               "gap from `first_version`), `trust_first_seen` adopts the first "
               "version seen"),
        ROW(SECT_ORDERING, sg_topic_config_t, stale_drop, ORD, "stale",
            SG_CONF_ENUM_BOOL, LIVE, 0, NULL, 0, 0, STALE_NAMES, NULL,
            "a stale version is dead-lettered (`dlq`) or dropped (`drop`)"),
        T_I64(SECT_ORDERING, gap_timeout_ms, ORD, "gap_timeout_ms", LIVE, 30000,
              1, SG_JSON_INT_MAX,
              "how long a gap may stay open, milliseconds (semantics §4)"),
        T_ENUM(SECT_ORDERING, gap_policy, ORD, "gap_policy", LIVE, SG_GAP_DLQ,
               GAP_NAMES,
               "what a gap deadline does: `dlq` (and quarantine), `skip` or "
               "`hold` (semantics §4)"),
        T_U64(max_parked_per_aggregate, "max_parked_per_aggregate", LIVE, 1000,
              1, "cap: parked events per aggregate"),
        T_U64(max_parked_total, "max_parked_total", LIVE, 100000, 1,
              "cap: parked events per input partition"),
        T_U64(max_parked_bytes, "max_parked_bytes", LIVE, INT64_C(268435456), 1,
              "cap: parked bytes per input partition"),
        T_ENUM(SECT_ORDERING, on_park_overflow, ORD, "on_park_overflow", LIVE,
               SG_OVERFLOW_PAUSE, OVERFLOW_NAMES,
               "a cap reached: `pause` the partition (back-pressure) or `dlq` "
               "(`park_overflow`); under `gap_policy` `hold` the default is "
               "`dlq` and `pause` is refused"),
        ROW(SECT_ORDERING, sg_topic_config_t, epoch, ORD, "epoch", SG_CONF_SRC,
            SG_CONF_NULLABLE, 0, NULL, 0, 0, NULL, NULL,
            "the epoch field (a field source, read as strictly as the "
            "version); `null`: no epochs (semantics §4b)"),
        T_ENUM(SECT_ORDERING, epoch_versions, ORD, "epoch_versions", 0,
               SG_EPOCH_CONTINUE, EPOCH_VERSIONS_NAMES,
               "`continue`: versions continue across epochs; `restart`: each "
               "epoch restarts at `first_version`"),

        T_STR(SECT_SNAP_KAFKA, snapshot.request_topic, SNAP, "request_topic",
              SG_CONF_REQUIRED, sg_cfg_check_request_topic,
              "source `kafka`: where requests go (the topic must exist)"),
        T_STR(SECT_SNAP_KAFKA, snapshot.reply_topic, SNAP, "reply_topic",
              SG_CONF_REQUIRED, sg_cfg_check_reply_topic,
              "source `kafka`: where answers come from, read in the consumer "
              "group (the topic must exist)"),
        T_STR(SECT_SNAP_HTTP, snapshot.url, SNAP, "url",
              SG_CONF_REQUIRED | LIVE, sg_cfg_check_url,
              "source `http`: URL template containing `{aggregate}`"),
        T_STR(SECT_SNAP_HTTP, snapshot.auth_header_env, SNAP, "auth_header_env",
              LIVE, sg_cfg_check_auth_header_env,
              "source `http`: environment variable holding the `Authorization` "
              "header value"),
        T_I64(SECT_SNAP_RETRY, snapshot.timeout_ms, SNAP, "timeout_ms", LIVE,
              5000, 1, 600000, "per attempt, milliseconds"),
        T_I64(SECT_SNAP_RETRY, snapshot.max_in_flight, SNAP, "max_in_flight",
              LIVE, 64, 1, 100000, "outstanding requests per input partition"),
        T_I64(SECT_SNAP_RETRY, snapshot.max_attempts, SNAP, "max_attempts",
              LIVE, 4, 1, 1000, "attempts before the gap policy applies"),
        T_I64(SECT_SNAP_RETRY, snapshot.backoff_ms, SNAP, "backoff_ms", LIVE,
              500, 1, 3600000,
              "first retry delay, milliseconds; doubles per attempt up to "
              "`backoff_max_ms`, with ±50 % jitter"),
        T_I64(SECT_SNAP_RETRY, snapshot.backoff_max_ms, SNAP, "backoff_max_ms",
              LIVE, 30000, 1, 3600000, "longest retry delay, milliseconds"),
        ROW(SECT_SNAP_OUTPUT, sg_topic_config_t, snapshot.emit_record, SNAP,
            "emit_record", SG_CONF_BOOL, LIVE, 1, NULL, 0, 0, NULL, NULL,
            "write a snapshot record to the output topic when a snapshot is "
            "applied"),
};

#undef ORD
#undef SNAP
#undef LIVE

#define CFG_ROW_CNT (sizeof(cfg_rows) / sizeof(cfg_rows[0]))

/* Enum fields are read and written as int. */
_Static_assert(sizeof(sg_format_t) == sizeof(int) &&
                       sizeof(sg_guarantee_t) == sizeof(int) &&
                       sizeof(sg_partitioning_t) == sizeof(int) &&
                       sizeof(sg_order_mode_t) == sizeof(int) &&
                       sizeof(sg_new_agg_t) == sizeof(int) &&
                       sizeof(sg_gap_policy_t) == sizeof(int) &&
                       sizeof(sg_overflow_t) == sizeof(int) &&
                       sizeof(sg_epoch_versions_t) == sizeof(int),
               "enum fields are stored as int");

const sg_config_key_t *sg_config_key(size_t i) {
        return i < CFG_ROW_CNT ? &cfg_rows[i].key : NULL;
}

const char *sg_config_topic_key(size_t field, char *buf, size_t size) {
        static const char topic[] = "topics.*";
        for (size_t i = 0; i < CFG_ROW_CNT; i++) {
                const sg_config_key_t *k = &cfg_rows[i].key;
                if (cfg_rows[i].off != field ||
                    strncmp(k->block, topic, sizeof(topic) - 1) ||
                    (k->block[sizeof(topic) - 1] != '\0' &&
                     k->block[sizeof(topic) - 1] != '.'))
                        continue;
                const char *blk = k->block + sizeof(topic) - 1;
                snprintf(buf, size, "%s%s%s", *blk ? blk + 1 : "",
                         *blk ? "." : "", k->name);
                return buf;
        }
        return NULL;
}

/** Sets the default of every row of section @p s in @p base. */
sg_err_t sg_cfg_defaults(cfg_ctx_t *c, cfg_sect_t s, void *base) {
        char detail[256];

        for (size_t i = 0; i < CFG_ROW_CNT; i++) {
                const cfg_row_t *r = &cfg_rows[i];
                void *f = (char *)base + r->off;

                if (r->sect != s)
                        continue;
                switch (r->key.type) {
                case SG_CONF_BOOL:
                case SG_CONF_ENUM_BOOL:
                        *(bool *)f = r->key.def != 0;
                        break;
                case SG_CONF_INT:
                case SG_CONF_ENUM:
                        *(int *)f = (int)r->key.def;
                        break;
                case SG_CONF_I64:
                        *(int64_t *)f = r->key.def;
                        break;
                case SG_CONF_U64:
                        *(uint64_t *)f = (uint64_t)r->key.def;
                        break;
                case SG_CONF_SIZE:
                        *(size_t *)f = (size_t)r->key.def;
                        break;
                case SG_CONF_STRING:
                        free(*(char **)f);
                        *(char **)f = NULL;
                        if (r->key.def_text &&
                            !(*(char **)f = strdup(r->key.def_text)))
                                return sg_cfg_nomem(c);
                        break;
                case SG_CONF_SRC:
                        sg_cfg_src_clear(f);
                        if (r->key.def_text &&
                            sg_field_src_parse(r->key.def_text, f, detail,
                                               sizeof(detail)))
                                return sg_cfg_nomem(
                                        c); /* the texts are valid */
                        break;
                }
        }
        return SG_OK;
}

/** Reads the key of row @p r from @p obj (at @p path) into @p base, then
 *  runs the row's check when the key was there and read. Absent: the
 *  field keeps its value (its default), or an error when required. */
static sg_err_t row_read(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         const cfg_row_t *r, void *base) {
        const sg_config_key_t *k = &r->key;
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, k->name);
        void *f = (char *)base + r->off;
        char p[SG_PATH_SIZE];
        int64_t v = 0;
        int ival;
        sg_err_t err = SG_OK;

        sg_cfg_path_key(p, path, k->name);
        switch (k->type) {
        case SG_CONF_BOOL:
                if (it && !cJSON_IsBool(it))
                        return sg_cfg_fail(c, p, "must be true or false");
                if (it)
                        *(bool *)f = cJSON_IsTrue(it);
                break;
        case SG_CONF_INT:
        case SG_CONF_I64:
        case SG_CONF_U64:
        case SG_CONF_SIZE:
                if ((err = sg_cfg_get_int(c, obj, path, k->name, k->min, k->max,
                                          &v)) ||
                    !it)
                        return err;
                if (k->type == SG_CONF_INT)
                        *(int *)f = (int)v;
                else if (k->type == SG_CONF_I64)
                        *(int64_t *)f = v;
                else if (k->type == SG_CONF_U64)
                        *(uint64_t *)f = (uint64_t)v;
                else
                        *(size_t *)f = (size_t)v;
                break;
        case SG_CONF_ENUM:
        case SG_CONF_ENUM_BOOL:
                ival = k->type == SG_CONF_ENUM ? *(int *)f : *(bool *)f;
                if ((err = sg_cfg_get_enum(c, obj, path, k->name, k->names,
                                           NULL, &ival)))
                        return err;
                if (k->type == SG_CONF_ENUM)
                        *(int *)f = ival;
                else
                        *(bool *)f = ival == 1;
                break;
        case SG_CONF_STRING:
                err = sg_cfg_get_str_dup(c, obj, path, k->name,
                                         (k->flags & SG_CONF_REQUIRED) != 0, f);
                break;
        case SG_CONF_SRC:
                err = sg_cfg_get_src(c, obj, path, k->name,
                                     (k->flags & SG_CONF_NULLABLE) != 0, f);
                break;
        }
        if (err || !it || !r->check)
                return err;
        return r->check(c, obj, path, p, base);
}

/** Reads every key of section @p s from @p obj (at @p path) into @p base,
 *  in table order; a wrong one is reported and the next one read. */
sg_err_t sg_cfg_read(cfg_ctx_t *c, const cJSON *obj, const char *path,
                     cfg_sect_t s, void *base) {
        size_t since = c->err_cnt;

        for (size_t i = 0; i < CFG_ROW_CNT; i++)
                if (cfg_rows[i].sect == s)
                        KEEP(row_read(c, obj, path, &cfg_rows[i], base));
        return errors_since(c, since);
}

/* ------------------------------------------------------------------------ */
/* Rows as the reload and the printer see them                              */
/* ------------------------------------------------------------------------ */

size_t sg_cfg_row_cnt(void) {
        return CFG_ROW_CNT;
}

cfg_sect_t sg_cfg_row_sect(size_t i) {
        return cfg_rows[i].sect;
}

/** The row's field in @p base (an sg_config_t or an sg_topic_config_t, as
 *  the row's block says). */
static const void *row_field(size_t i, const void *base) {
        return (const char *)base + cfg_rows[i].off;
}

bool sg_cfg_row_equal(size_t i, const void *a, const void *b) {
        const void *fa = row_field(i, a), *fb = row_field(i, b);

        switch (cfg_rows[i].key.type) {
        case SG_CONF_BOOL:
        case SG_CONF_ENUM_BOOL:
                return *(const bool *)fa == *(const bool *)fb;
        case SG_CONF_INT:
        case SG_CONF_ENUM:
                return *(const int *)fa == *(const int *)fb;
        case SG_CONF_I64:
                return *(const int64_t *)fa == *(const int64_t *)fb;
        case SG_CONF_U64:
                return *(const uint64_t *)fa == *(const uint64_t *)fb;
        case SG_CONF_SIZE:
                return *(const size_t *)fa == *(const size_t *)fb;
        case SG_CONF_STRING: {
                const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
                return sa == sb || (sa && sb && !strcmp(sa, sb));
        }
        case SG_CONF_SRC: {
                const sg_field_src_t *sa = fa, *sb = fb;
                return sa->kind == sb->kind &&
                       (sa->name == sb->name ||
                        (sa->name && sb->name && !strcmp(sa->name, sb->name)));
        }
        }
        return false;
}

/* The text of a field source, as the file writes it. */
static const char *src_text(const sg_field_src_t *s, char *buf, size_t size) {
        switch (s->kind) {
        case SG_SRC_KEY:
                return "key";
        case SG_SRC_HEADER:
                snprintf(buf, size, "header:%s", s->name ? s->name : "");
                return buf;
        case SG_SRC_POINTER:
                return s->name ? s->name : "";
        case SG_SRC_CE:
                snprintf(buf, size, "ce:%s", s->name ? s->name : "");
                return buf;
        case SG_SRC_NONE:
                break;
        }
        return NULL;
}

cJSON *sg_cfg_row_json(size_t i, const void *base) {
        const sg_config_key_t *k = &cfg_rows[i].key;
        const void *f = row_field(i, base);
        char buf[1100];
        int ix;

        switch (k->type) {
        case SG_CONF_BOOL:
                return cJSON_CreateBool(*(const bool *)f);
        case SG_CONF_ENUM_BOOL:
                return cJSON_CreateString(k->names[*(const bool *)f ? 1 : 0]);
        case SG_CONF_ENUM:
                ix = *(const int *)f;
                for (int n = 0; n <= ix; n++)
                        if (!k->names[n])
                                return cJSON_CreateNull(); /* not a value */
                return cJSON_CreateString(k->names[ix]);
        case SG_CONF_INT:
                return cJSON_CreateNumber((double)*(const int *)f);
        case SG_CONF_I64:
                return cJSON_CreateNumber((double)*(const int64_t *)f);
        case SG_CONF_U64:
                return cJSON_CreateNumber((double)*(const uint64_t *)f);
        case SG_CONF_SIZE:
                return cJSON_CreateNumber((double)*(const size_t *)f);
        case SG_CONF_STRING:
                return *(char *const *)f ? cJSON_CreateString(*(char *const *)f)
                                         : NULL;
        case SG_CONF_SRC: {
                const char *t = src_text(f, buf, sizeof(buf));
                return t ? cJSON_CreateString(t) : cJSON_CreateNull();
        }
        }
        return NULL;
}

sg_err_t sg_cfg_row_dup(size_t i, const void *src, char **dupp) {
        const void *f = row_field(i, src);
        const char *s = NULL;

        *dupp = NULL;
        if (cfg_rows[i].key.type == SG_CONF_STRING)
                s = *(char *const *)f;
        else if (cfg_rows[i].key.type == SG_CONF_SRC)
                s = ((const sg_field_src_t *)f)->name;
        if (s && !(*dupp = strdup(s)))
                return SG_ERR_NOMEM;
        return SG_OK;
}

void sg_cfg_row_set(size_t i, void *dst, const void *src, char *dup) {
        void *fd = (char *)dst + cfg_rows[i].off;
        const void *fs = row_field(i, src);

        switch (cfg_rows[i].key.type) {
        case SG_CONF_BOOL:
        case SG_CONF_ENUM_BOOL:
                *(bool *)fd = *(const bool *)fs;
                break;
        case SG_CONF_INT:
        case SG_CONF_ENUM:
                *(int *)fd = *(const int *)fs;
                break;
        case SG_CONF_I64:
                *(int64_t *)fd = *(const int64_t *)fs;
                break;
        case SG_CONF_U64:
                *(uint64_t *)fd = *(const uint64_t *)fs;
                break;
        case SG_CONF_SIZE:
                *(size_t *)fd = *(const size_t *)fs;
                break;
        case SG_CONF_STRING:
                free(*(char **)fd);
                *(char **)fd = dup;
                break;
        case SG_CONF_SRC:
                free(((sg_field_src_t *)fd)->name);
                ((sg_field_src_t *)fd)->name = dup;
                ((sg_field_src_t *)fd)->kind =
                        ((const sg_field_src_t *)fs)->kind;
                break;
        }
}
