/*
 * common.c — small things every module of libseqgate (and its commands)
 * uses: error names and messages, clocks, hex and ISO time formatting, the
 * wire size of a record.
 */
#include "processor.h"
#include "seqgate.h"

#include <string.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void sg_verrf(char *errstr, size_t errstr_size, const char *fmt, va_list ap) {
        if (!errstr || errstr_size == 0)
                return;
        vsnprintf(errstr, errstr_size, fmt, ap);
}

void sg_errf(char *errstr, size_t errstr_size, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        sg_verrf(errstr, errstr_size, fmt, ap);
        va_end(ap);
}

static int64_t clock_ms(clockid_t id) {
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sg_clock_mono_ms(void) {
        return clock_ms(CLOCK_MONOTONIC);
}
int64_t sg_clock_wall_ms(void) {
        return clock_ms(CLOCK_REALTIME);
}

void sg_hex_encode(const unsigned char *b, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[b[i] >> 4];
                out[2 * i + 1] = digits[b[i] & 15];
        }
        out[2 * n] = '\0';
}

const char *sg_iso_time(int64_t ms, char *buf, size_t size) {
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        if (ms < 0 || !gmtime_r(&sec, &tm)) {
                snprintf(buf, size, "%" PRId64, ms);
                return buf;
        }
        size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, size - n, ".%03dZ", (int)(ms % 1000));
        return buf;
}

/* Every error code: its name and what it means, in words. */
static const struct err_row {
        sg_err_t err;
        const char *name, *text;
} err_rows[] = {
        {SG_OK, "SG_OK", "no error"},
        {SG_ERR_INVALID, "SG_ERR_INVALID", "invalid argument or input"},
        {SG_ERR_NOMEM, "SG_ERR_NOMEM", "out of memory"},
        {SG_ERR_STORE, "SG_ERR_STORE", "the store (LMDB) failed"},
        {SG_ERR_MAP_FULL, "SG_ERR_MAP_FULL", "the store's map is full"},
        {SG_ERR_CONFIG, "SG_ERR_CONFIG",
         "the configuration is invalid or refused"},
        {SG_ERR_KAFKA, "SG_ERR_KAFKA", "a Kafka client or broker error"},
        {SG_ERR_NOT_FOUND, "SG_ERR_NOT_FOUND", "not found"},
        {SG_ERR_FOREIGN, "SG_ERR_FOREIGN",
         "the store and the changelog or consumer group do not belong "
         "together: the state is refused"},
        {SG_ERR_IO, "SG_ERR_IO", "a file system error"},
        {SG_ERR_FATAL, "SG_ERR_FATAL", "an unrecoverable error"},
        {SG_ERR_LOCKED, "SG_ERR_LOCKED",
         "the data_dir is in use by another seqgate process"},
        {SG_ERR_CORRUPT, "SG_ERR_CORRUPT",
         "a changelog record seqgate did not write: it does not decode"},
};

const char *sg_err2str(sg_err_t err) {
        for (size_t i = 0; i < sizeof(err_rows) / sizeof(err_rows[0]); i++)
                if (err_rows[i].err == err)
                        return err_rows[i].name;
        return "SG_ERR_UNKNOWN";
}

const char *sg_err_text(sg_err_t err) {
        for (size_t i = 0; i < sizeof(err_rows) / sizeof(err_rows[0]); i++)
                if (err_rows[i].err == err)
                        return err_rows[i].text;
        return "an unknown error";
}

/* The daemon's exit statuses (seqgate.h sg_exit_status): the one table
 * they are defined in. Status 2 is everything a restart cannot fix, so that
 * a supervisor stops trying (systemd: RestartPreventExitStatus=2,
 * deploy/systemd/seqgate.service). */
static const sg_exit_status_t exit_rows[] = {
        {0,
         "clean stop",
         "SIGTERM or SIGINT finished the batch in flight, committed "
         "it and left the consumer group (or came during the start-up's "
         "retries)",
         {SG_OK}},
        {1,
         "runtime error",
         "logged with the event exiting; also retriable broker errors that "
         "outlasted broker_retry_timeout_ms and, with "
         "exactly_once, fenced by a newer instance with the same "
         "instance_id. A restart may succeed: a supervisor should restart "
         "it",
         {SG_OK}},
        {2,
         "operator action needed",
         "refused until the operator acts; a restart does not help. A usage "
         "or configuration error (SG_ERR_CONFIG), also one the Kafka clients "
         "or the cluster refuse at start-up (a property, a key or "
         "certificate file, a login or an ACL the broker refuses, a missing "
         "topic, too few output partitions) and changed key settings "
         "without --accept-key-change, a data_dir that cannot be created "
         "or written (a path through a file, a read-only file system, no "
         "permission: the path and errno named), a consumer fenced by "
         "another that joined with its group.instance.id (static "
         "membership), a session.timeout.ms the group coordinator refuses "
         "(outside the broker's group.min/max.session.timeout.ms), a "
         "second seqgate on one host (network namespace) "
         "with the group.id and instance_id of a running one; a data_dir "
         "another seqgate process holds (SG_ERR_LOCKED); state that is not "
         "this deployment's (SG_ERR_FOREIGN): a store of another consumer "
         "group, a store ahead of its changelog, a changelog whose id is "
         "not the store's; a changelog record that does not decode "
         "(SG_ERR_CORRUPT: it stays in the changelog, so every restore "
         "would stop at it)",
         {SG_ERR_CONFIG, SG_ERR_LOCKED, SG_ERR_FOREIGN, SG_ERR_CORRUPT, SG_OK}},
};

const sg_exit_status_t *sg_exit_status(size_t i) {
        return i < sizeof(exit_rows) / sizeof(exit_rows[0]) ? &exit_rows[i]
                                                            : NULL;
}

const sg_exit_status_t *sg_exit_status_of(sg_err_t err) {
        if (err == SG_OK)
                return &exit_rows[0];
        for (size_t i = 2; i < sizeof(exit_rows) / sizeof(exit_rows[0]); i++)
                for (size_t k = 0; k < SG_EXIT_ERRS && exit_rows[i].errs[k];
                     k++)
                        if (exit_rows[i].errs[k] == err)
                                return &exit_rows[i];
        return &exit_rows[1];
}

bool sg_err_needs_operator(sg_err_t err) {
        return sg_exit_status_of(err)->status == 2;
}

/* librdkafka's zigzag varint of a length (rd_uvarint_enc_i64). */
static size_t varint_size(size_t n) {
        uint64_t v = (uint64_t)n << 1;
        size_t b = 1;
        while (v >= 0x80) {
                v >>= 7;
                b++;
        }
        return b;
}

static size_t headers_size(const sg_header_t *h, size_t n) {
        size_t sz = 0;
        for (size_t i = 0; i < n; i++) {
                size_t nl = strlen(h[i].name);
                size_t vl = h[i].value ? h[i].value_len : 0;
                sz += nl + vl + varint_size(nl) + varint_size(vl);
        }
        return sz;
}

/* RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD (rdkafka_proto.h): length, attributes,
 * timestamp delta, offset delta, key length, value length and header
 * count, each at its largest. */
#define SG_RECORD_V2_MAX_OVERHEAD (5 + 1 + 10 + 5 + 5 + 5 + 5)

size_t sg_record_wire_size(size_t key_len, size_t value_len,
                           const sg_header_t *headers, size_t header_cnt,
                           const sg_header_t *extra, size_t extra_cnt) {
        return SG_RECORD_V2_MAX_OVERHEAD + key_len + value_len +
               headers_size(headers, header_cnt) +
               headers_size(extra, extra_cnt);
}

size_t sg_effect_wire_size(const sg_effect_t *ef) {
        return sg_record_wire_size(ef->key ? ef->key_len : 0,
                                   ef->value ? ef->value_len : 0, ef->headers,
                                   ef->header_cnt, ef->extra, ef->extra_cnt);
}

const char *sg_quote(char *out, const void *s, size_t len, size_t max) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = s;
        size_t o = 0, i;

        for (i = 0; i < len; i++) {
                unsigned char c = p[i];
                bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
                if (o + (plain ? 1 : 4) > max)
                        break;
                if (plain) {
                        out[o++] = (char)c;
                } else {
                        out[o++] = '\\';
                        out[o++] = 'x';
                        out[o++] = hex[c >> 4];
                        out[o++] = hex[c & 0xf];
                }
        }
        if (i < len) {
                memcpy(out + o, "...", 3);
                o += 3;
        }
        out[o] = '\0';
        return out;
}

/* ------------------------------------------------------------------ */
/* log levels                                                          */

const char *sg_log_level_name(sg_log_level_t l) {
        switch (l) {
        case SG_LOG_ERR:
                return "error";
        case SG_LOG_WARNING:
                return "warning";
        case SG_LOG_NOTICE:
                return "notice";
        case SG_LOG_INFO:
                return "info";
        default:
                return "debug";
        }
}

bool sg_log_level_parse(const char *s, sg_log_level_t *out) {
        static const struct {
                const char *name;
                sg_log_level_t level;
        } names[] = {{"error", SG_LOG_ERR},       {"err", SG_LOG_ERR},
                     {"warning", SG_LOG_WARNING}, {"warn", SG_LOG_WARNING},
                     {"notice", SG_LOG_NOTICE},   {"info", SG_LOG_INFO},
                     {"debug", SG_LOG_DEBUG}};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(s, names[i].name)) {
                        *out = names[i].level;
                        return true;
                }
        return false;
}
