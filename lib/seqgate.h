/*
 * seqgate.h — common types of libseqgate.
 *
 * libseqgate is the library behind the seqgate sidecar: it parses event
 * envelopes (envelope.h), decides what to do with each record (engine.h),
 * keeps per-partition state in LMDB (store.h), validates the configuration
 * (config.h) and drives a Kafka consumer group (kafka.h).
 *
 * Conventions, taken from librdkafka and libuv:
 *  - functions are named sg_<noun>_<verb>;
 *  - functions that can fail return an sg_err_t (SG_OK == 0) and, where a
 *    human explanation helps, fill a caller-owned `errstr` buffer of
 *    `errstr_size` bytes (always NUL-terminated when errstr_size > 0);
 *  - the library never exits, never prints, never reads the environment
 *    except where a function's docstring says so; logging goes through the
 *    callback the caller installs (sg_log_cb).
 *
 * Thread-safety: unless a function says otherwise, an object may be used by
 * one thread at a time. Distinct objects may be used from distinct threads.
 */
#ifndef SEQGATE_H
#define SEQGATE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** seqgate's version: meson's project version, passed by meson.build as a
 *  define; "unknown" in a build that does not (tests/fuzz/run.sh). */
#ifndef SG_VERSION_STR
#define SG_VERSION_STR "unknown"
#endif

/**
 * Writes the version text that both binaries print for -V/--version:
 * "seqgate <SG_VERSION_STR>\n", then one "<library> <version>\n" line per
 * library seqgate links (librdkafka, LMDB, cJSON, yajl, OpenSSL, libcurl,
 * libmicrohttpd), each the version of the library loaded at run time where
 * the library reports one, else the one compiled against.
 * @p buf of @p size bytes; always NUL-terminated when size > 0 (cut at
 * size). Returns the length the whole text needs, as snprintf does.
 * Thread-safe.
 */
size_t sg_version_text(char *buf, size_t size);

/** 2^53, the largest integer up to which an IEEE double (a JSON number as
 *  most parsers read it, RFC 8259 §6) holds every integer exactly: the
 *  largest version a JSON number may carry (semantics §2), the largest
 *  integer setting, the longest configurable delay in ms. */
#define SG_JSON_INT_MAX INT64_C(9007199254740992)

/** Error codes. Negative values are errors; SG_OK is success. */
typedef enum sg_err {
        SG_OK = 0,
        SG_ERR_INVALID = -1,  /**< invalid argument or input */
        SG_ERR_NOMEM = -2,    /**< allocation failed */
        SG_ERR_STORE = -3,    /**< LMDB error (detail in errstr) */
        SG_ERR_MAP_FULL = -4, /**< LMDB map full: grow and retry the batch */
        SG_ERR_CONFIG = -5, /**< configuration invalid (detail names the key) */
        SG_ERR_KAFKA = -6,  /**< Kafka client error (detail in errstr) */
        SG_ERR_NOT_FOUND = -7, /**< key absent */
        SG_ERR_FOREIGN = -8,   /**< state that is not this deployment's: a
                                  partition store of another consumer group,
                                  a store ahead of its changelog, a
                                  changelog whose id is not the store's
                                  (semantics §6) */
        SG_ERR_IO = -9,        /**< file system error */
        SG_ERR_FATAL = -10,    /**< unrecoverable; the caller should stop */
        SG_ERR_LOCKED = -11,   /**< the data_dir is in use by another process */
        SG_ERR_CORRUPT = -12,  /**< a changelog record seqgate did not write:
                                  it does not decode (docs/guarantees.md
                                  "Corrupt changelog records") */
} sg_err_t;

/** Returns a static, human-readable name for @p err ("SG_ERR_STORE"...). */
const char *sg_err2str(sg_err_t err);

#define SG_EXIT_ERRS 5 /**< error codes a row of sg_exit_status lists */

/** One exit status of the seqgate daemon (cmd/seqgate). */
typedef struct sg_exit_status {
        int status;       /**< the process's exit status */
        const char *name; /**< a few words (the exiting line's exit_class) */
        const char *doc;  /**< what it means and what to do */
        /** The error codes that end in it, SG_OK-terminated; status 1 (row
         *  1) takes every error no row lists, status 0 (row 0) SG_OK. */
        sg_err_t errs[SG_EXIT_ERRS];
} sg_exit_status_t;

/**
 * The daemon's exit statuses, the one table they are defined in (the
 * daemon exits by it, --help prints it, docs/operating.md is generated from
 * it): row @p i, in status order; NULL past the last. Static; thread-safe.
 */
const sg_exit_status_t *sg_exit_status(size_t i);

/** The row of sg_exit_status an error @p err ends the daemon in: SG_OK a
 *  clean stop; an error no row lists, status 1. Static; thread-safe. */
const sg_exit_status_t *sg_exit_status_of(sg_err_t err);

/** True when @p err is a refusal the operator must act on (its
 *  sg_exit_status_of row is status 2: a restart cannot help), so that the
 *  Kafka loop stops with @p err's own code rather than retrying or folding
 *  it into SG_ERR_FATAL. Static; thread-safe. */
bool sg_err_needs_operator(sg_err_t err);

/** Returns a static one-line description of @p err in words ("the store
 *  holds state that is not this deployment's"...), for log lines that give
 *  the code too. */
const char *sg_err_text(sg_err_t err);

/**
 * The one formatter of error details: formats @p fmt (printf rules) into
 * the caller's @p errstr buffer of @p errstr_size bytes (the librdkafka
 * errstr idiom). @p errstr may be NULL, and then (or with a zero size) the
 * call does nothing. Otherwise the result is always NUL-terminated; a
 * detail longer than errstr_size - 1 bytes is cut there (possibly inside a
 * UTF-8 sequence), never overflowing. Thread-safe (touches only errstr).
 * Every errstr the library fills is written with it.
 */
void sg_errf(char *errstr, size_t errstr_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/** sg_errf with a va_list (for the library's own variadic helpers);
 *  @p ap is consumed as vsnprintf consumes it. */
void sg_verrf(char *errstr, size_t errstr_size, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

/**
 * Quotes the bytes @p s[0..len) for an error detail or a log field:
 * printable ASCII as is, every other byte (and '"', '\\') as \xNN, in at
 * most @p max output characters, then "..." when the input was cut — so a
 * 1 MB field or binary garbage never lands whole in a log line or a DLQ
 * header. @p out must hold max + 4 bytes. Returns @p out. Thread-safe.
 */
const char *sg_quote(char *out, const void *s, size_t len, size_t max);

/** CLOCK_MONOTONIC in milliseconds (durations, deadlines). */
int64_t sg_clock_mono_ms(void);
/** CLOCK_REALTIME in milliseconds since the epoch. */
int64_t sg_clock_wall_ms(void);

/** Lowercase hex of @p n bytes into @p out (2n + 1 bytes, NUL-terminated). */
void sg_hex_encode(const unsigned char *bytes, size_t n, char *out);

/** ISO 8601 UTC with milliseconds ("2026-11-30T08:00:00.123Z") of @p ms
 *  since the epoch into @p buf (at least 32 bytes); a negative or
 *  unrepresentable time is printed as the plain number. Returns @p buf. */
const char *sg_iso_time(int64_t ms, char *buf, size_t size);

/** One Kafka record header. Name is NUL-terminated; value may be NULL. */
typedef struct sg_header {
        const char *name;
        const void *value;
        size_t value_len;
} sg_header_t;

/**
 * A Kafka record as seqgate sees it. All pointers are borrowed from the
 * caller (usually an rd_kafka_message_t) and must stay valid for the duration
 * of the call they are passed to. key/value may be NULL (null key/value).
 */
typedef struct sg_record {
        const char *topic;    /**< input topic name, NUL-terminated */
        int32_t partition;    /**< input partition */
        int64_t offset;       /**< input offset */
        int64_t timestamp_ms; /**< record timestamp (ms since epoch), -1 if none */
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        const sg_header_t *headers;
        size_t header_cnt;
} sg_record_t;

/**
 * Log levels, numbered as syslog (and librdkafka's log_level) numbers them.
 */
typedef enum sg_log_level {
        SG_LOG_ERR = 3,
        SG_LOG_WARNING = 4,
        SG_LOG_NOTICE = 5,
        SG_LOG_INFO = 6,
        SG_LOG_DEBUG = 7,
} sg_log_level_t;

/** The name of @p level as log lines and --log-level spell it: "error",
 *  "warning", "notice", "info", "debug" (anything above info: "debug").
 *  A static string. Thread-safe. */
const char *sg_log_level_name(sg_log_level_t level);

/** Parses a --log-level value: error (err), warning (warn), notice, info,
 *  debug. Returns false, *out unchanged, on anything else. Thread-safe. */
bool sg_log_level_parse(const char *s, sg_log_level_t *out);

/**
 * Logging callback installed by the application. @p event is a short,
 * stable event name ("batch_aborted"); @p fields_json is the event's fields
 * as one JSON object text, braces included ("{\"topic\":\"orders\",...}";
 * members in no guaranteed order), or NULL when it has none. The engine
 * and the Kafka loop both call it so. Never carries secrets. Called from
 * the thread that called the library function.
 */
typedef void(sg_log_cb)(void *opaque, sg_log_level_t level, const char *event,
                        const char *fields_json);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_H */
