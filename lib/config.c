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
 * malformed value is reported by --check-config rather than at start-up.
 */
#include "config.h"

#include "envelope.h" /* sg_utf8_valid */

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

/** Largest integer a JSON number (IEEE double) holds exactly: 2^53. */
#define SG_JSON_INT_MAX INT64_C(9007199254740992)

/** Longest dotted key path we build; longer paths are truncated. */
#define SG_PATH_SIZE 1024

/** Largest configuration file sg_config_load() reads. */
#define SG_CONFIG_MAX_FILE (16 * 1024 * 1024)

/** Longest value quoted back in an error text. */
#define SG_QUOTE_MAX 80

/* Error reporting context. */
typedef struct cfg_ctx {
        char *errstr;
        size_t errstr_size;
        size_t err_len;   /* bytes of errstr used (without the NUL) */
        size_t err_cnt;   /* errors reported so far */
        bool eos; /* guarantee exactly_once (parsed before the kafka block) */
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
static sg_err_t errors_since(const cfg_ctx_t *c, size_t since) {
        return c->err_cnt > since ? SG_ERR_CONFIG : SG_OK;
}

static const char *const SRC_FORMS =
        "\"key\", \"header:NAME\", \"/json/pointer\" (RFC 6901), "
        "\"ce:ATTR\" (CloudEvents attribute)";

/* ------------------------------------------------------------------------ */
/* Errors and paths                                                         */
/* ------------------------------------------------------------------------ */

/*
 * Copies @p src into @p dst (@p dst_size bytes, truncated, NUL-terminated)
 * as one line of printable, valid UTF-8: control characters, DEL and bytes
 * that do not form UTF-8 (RFC 3629) become \xNN. Keys and values quoted in
 * an error come from the file unchecked (cJSON takes raw control
 * characters and any bytes inside strings), and an error is printed to a
 * terminal or written into a JSON log line.
 */
static void put_clean(char *dst, size_t dst_size, const char *src) {
        static const char hex[] = "0123456789abcdef";
        size_t o = 0, len = strlen(src), i = 0;

        while (i < len) {
                unsigned char c = (unsigned char)src[i];
                size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
                bool plain = c >= 0x20 && c != 0x7f &&
                             (c < 0x80 ? true
                                       : n <= len - i && sg_utf8_valid(src + i, n));

                if (!plain)
                        n = 1;
                if (o + (plain ? n : 4) >= dst_size)
                        break;
                if (plain) {
                        memcpy(dst + o, src + i, n);
                        o += n;
                } else {
                        dst[o++] = '\\';
                        dst[o++] = 'x';
                        dst[o++] = hex[c >> 4];
                        dst[o++] = hex[c & 0xf];
                }
                i += n;
        }
        dst[o] = '\0';
}

static void sg_cfg_set_errstr(char *errstr, size_t errstr_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void sg_cfg_set_errstr(char *errstr, size_t errstr_size, const char *fmt, ...) {
        char raw[2048];
        va_list ap;

        if (!errstr || errstr_size == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        put_clean(errstr, errstr_size, raw);
}

static sg_err_t sg_cfg_fail(cfg_ctx_t *c, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/** Appends the line "PATH: message" to the errors (a '\n' before it when
 *  it is not the first; cut at the end of errstr, always terminated) and
 *  returns SG_ERR_CONFIG. */
static sg_err_t sg_cfg_fail(cfg_ctx_t *c, const char *path, const char *fmt, ...) {
        char raw[2048];
        va_list ap;
        int n;

        c->err_cnt++;
        if (!c->errstr || c->errstr_size == 0 ||
            c->err_len + 1 >= c->errstr_size)
                return SG_ERR_CONFIG;
        /* each error one clean line (put_clean), joined by '\n' */
        n = snprintf(raw, sizeof(raw), "%s: ", path);
        if (n >= 0 && (size_t)n < sizeof(raw)) {
                va_start(ap, fmt);
                vsnprintf(raw + n, sizeof(raw) - (size_t)n, fmt, ap);
                va_end(ap);
        }
        char *start = c->errstr + c->err_len, *o = start;
        size_t left = c->errstr_size - c->err_len;
        if (c->err_len > 0) {
                *o++ = '\n';
                left--;
        }
        put_clean(o, left, raw);
        if (*o == '\0') {
                *start = '\0'; /* no room for this one: no separator */
                return SG_ERR_CONFIG;
        }
        c->err_len += (size_t)(o - start) + strlen(o);
        return SG_ERR_CONFIG;
}

static sg_err_t sg_cfg_nomem(cfg_ctx_t *c) {
        sg_cfg_set_errstr(c->errstr, c->errstr_size, "out of memory");
        return SG_ERR_NOMEM;
}

/** Appends @p s to the path in @p buf (SG_PATH_SIZE bytes), truncating. */
static void path_append(char *buf, size_t *off, const char *s) {
        size_t n = strlen(s);

        if (*off + n >= SG_PATH_SIZE)
                n = SG_PATH_SIZE - 1 - *off;
        memcpy(buf + *off, s, n);
        *off += n;
        buf[*off] = '\0';
}

/** buf = parent "." key (or key alone at the root). buf may not alias
 *  parent. */
static void sg_cfg_path_key(char *buf, const char *parent, const char *key) {
        size_t off = 0;

        buf[0] = '\0';
        if (parent && *parent) {
                path_append(buf, &off, parent);
                path_append(buf, &off, ".");
        }
        path_append(buf, &off, key);
}

/** buf = parent "[" idx "]". */
static void sg_cfg_path_idx(char *buf, const char *parent, size_t idx) {
        char num[32];
        size_t off = 0;

        buf[0] = '\0';
        snprintf(num, sizeof(num), "[%zu]", idx);
        path_append(buf, &off, parent);
        path_append(buf, &off, num);
}

/** Joins a NULL-terminated list as "a, b, c" into buf. */
static const char *sg_cfg_join(char *buf, size_t size, const char *const *list) {
        size_t off = 0;

        buf[0] = '\0';
        for (size_t i = 0; list[i]; i++) {
                int n = snprintf(buf + off, size - off, "%s%s",
                                 i ? ", " : "", list[i]);
                if (n < 0 || (size_t)n >= size - off)
                        break;
                off += (size_t)n;
        }
        return buf;
}

/** As sg_cfg_join() for a counted array of strings. */
static const char *sg_cfg_join_n(char *buf, size_t size, char *const *list,
                          size_t cnt) {
        size_t off = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < cnt; i++) {
                int n = snprintf(buf + off, size - off, "%s%s",
                                 i ? ", " : "", list[i] ? list[i] : "");
                if (n < 0 || (size_t)n >= size - off)
                        break;
                off += (size_t)n;
        }
        return buf;
}

static bool in_list(const char *s, const char *const *list) {
        for (size_t i = 0; list[i]; i++)
                if (!strcmp(s, list[i]))
                        return true;
        return false;
}

/* ------------------------------------------------------------------------ */
/* Typed getters                                                            */
/* ------------------------------------------------------------------------ */

static sg_err_t sg_cfg_expect_object(cfg_ctx_t *c, const cJSON *item,
                              const char *path) {
        if (!cJSON_IsObject(item))
                return sg_cfg_fail(c, path, "must be a JSON object");
        return SG_OK;
}

/**
 * Rejects unknown keys (listing @p allowed) and duplicate keys of @p obj.
 * cJSON keeps both members of a duplicate key; silently using one of them
 * would hide a mistake.
 */
static sg_err_t sg_cfg_check_keys(cfg_ctx_t *c, const cJSON *obj, const char *path,
                           const char *const *allowed) {
        char p[SG_PATH_SIZE];
        char list[1024];
        size_t since = c->err_cnt;

        for (const cJSON *it = obj->child; it; it = it->next) {
                sg_cfg_path_key(p, path, it->string);
                if (allowed && !in_list(it->string, allowed)) {
                        sg_cfg_fail(c, p, "unknown key; allowed: %s",
                             sg_cfg_join(list, sizeof(list), allowed));
                        continue;
                }
                for (const cJSON *prev = obj->child; prev != it;
                     prev = prev->next)
                        if (!strcmp(prev->string, it->string)) {
                                sg_cfg_fail(c, p, "duplicate key");
                                break;
                        }
        }
        return errors_since(c, since);
}

/**
 * Reads string member @p key of @p obj into *out (borrowed). Absent: *out is
 * left as is, or an error when @p required.
 */
static sg_err_t sg_cfg_get_str(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, bool required, const char **out) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it) {
                if (required)
                        return sg_cfg_fail(c, p, "required key is missing");
                return SG_OK;
        }
        if (!cJSON_IsString(it))
                return sg_cfg_fail(c, p, "must be a string");
        if (!*it->valuestring)
                return sg_cfg_fail(c, p, "must not be empty");
        *out = it->valuestring;
        return SG_OK;
}

/** As sg_cfg_get_str(), stores a copy in *dst (replacing any default). */
static sg_err_t sg_cfg_get_str_dup(cfg_ctx_t *c, const cJSON *obj, const char *path,
                            const char *key, bool required, char **dst) {
        const char *s = NULL;
        sg_err_t err = sg_cfg_get_str(c, obj, path, key, required, &s);

        if (err || !s)
                return err;
        char *d = strdup(s);
        if (!d)
                return sg_cfg_nomem(c);
        free(*dst);
        *dst = d;
        return SG_OK;
}

/** Error text for an integer out of [min, max]. */
static sg_err_t int_range_err(cfg_ctx_t *c, const char *path, int64_t min,
                              int64_t max, bool too_big) {
        if (max == SG_JSON_INT_MAX)
                return sg_cfg_fail(c, path, "must be an integer >= %" PRId64 "%s",
                            min,
                            too_big ? "; JSON numbers above 2^53 "
                                      "(9007199254740992) are not exact"
                                    : "");
        return sg_cfg_fail(c, path, "must be an integer from %" PRId64 " to %" PRId64,
                    min, max);
}

/**
 * Reads an integral JSON number in [min, max] (max <= 2^53: a double holds
 * every integer up to 2^53 exactly, RFC 8259 §6). Absent: *out unchanged.
 */
static sg_err_t sg_cfg_get_int(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, int64_t min, int64_t max,
                        int64_t *out) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
        double d;

        sg_cfg_path_key(p, path, key);
        if (!it)
                return SG_OK;
        if (!cJSON_IsNumber(it))
                return int_range_err(c, p, min, max, false);
        d = it->valuedouble;
        if (!isfinite(d))
                return int_range_err(c, p, min, max, false);
        if (d > (double)SG_JSON_INT_MAX)
                return int_range_err(c, p, min, max, true);
        if (d < -(double)SG_JSON_INT_MAX)
                return int_range_err(c, p, min, max, false);
        /* In range for int64_t now; a fraction does not survive the cast. */
        if ((double)(int64_t)d != d || (int64_t)d < min || (int64_t)d > max)
                return int_range_err(c, p, min, max, false);
        *out = (int64_t)d;
        return SG_OK;
}

/**
 * Reads a string member that must be one of @p names; *out = its index.
 * Absent: *out unchanged.
 */
static sg_err_t sg_cfg_get_enum(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         const char *key, const char *const *names,
                         const char *note, int *out) {
        char p[SG_PATH_SIZE];
        char list[256];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it)
                return SG_OK;
        if (!cJSON_IsString(it))
                return sg_cfg_fail(c, p, "must be a string; allowed: %s",
                            sg_cfg_join(list, sizeof(list), names));
        for (int i = 0; names[i]; i++) {
                if (!strcmp(it->valuestring, names[i])) {
                        *out = i;
                        return SG_OK;
                }
        }
        return sg_cfg_fail(c, p, "\"%.*s\" is not allowed; allowed: %s%s",
                    SG_QUOTE_MAX, it->valuestring,
                    sg_cfg_join(list, sizeof(list), names), note ? note : "");
}

/* ------------------------------------------------------------------------ */
/* Field sources, topic names, secrets                                      */
/* ------------------------------------------------------------------------ */

/** RFC 6901 §3: "/" then reference tokens where '~' is only "~0" or "~1". */
static bool sg_cfg_valid_pointer(const char *p) {
        if (p[0] != '/')
                return false;
        for (; *p; p++)
                if (*p == '~' && p[1] != '0' && p[1] != '1')
                        return false;
        return true;
}

/*
 * Parses a field source. On success out->name is a malloc'd string (NULL for
 * "key") that the caller frees with free(); on error *out is {NONE, NULL}
 * and errstr says what is wrong, without a key path (the caller adds it).
 *
 * Forms (semantics §2): "key" (record key), "header:NAME" (NAME non-empty),
 * "/json/pointer" (RFC 6901 §3 syntax), "ce:ATTR" (CloudEvents spec v1.0.2
 * §3.1.1: attribute names are lower-case letters a-z and digits 0-9).
 *
 * Returns SG_OK, SG_ERR_INVALID (bad text) or SG_ERR_NOMEM.
 * Thread-safety: reentrant.
 */
sg_err_t sg_field_src_parse(const char *text, sg_field_src_t *out,
                            char *errstr, size_t errstr_size) {
        sg_src_kind_t kind;
        const char *name;

        out->kind = SG_SRC_NONE;
        out->name = NULL;
        if (!text) {
                sg_cfg_set_errstr(errstr, errstr_size,
                           "a field source is required; allowed: %s",
                           SRC_FORMS);
                return SG_ERR_INVALID;
        }
        if (!strcmp(text, "key")) {
                out->kind = SG_SRC_KEY;
                return SG_OK;
        }
        if (!strncmp(text, "header:", 7)) {
                kind = SG_SRC_HEADER;
                name = text + 7;
                if (!*name) {
                        sg_cfg_set_errstr(errstr, errstr_size,
                                   "\"header:\" needs a header name "
                                   "(\"header:NAME\")");
                        return SG_ERR_INVALID;
                }
        } else if (text[0] == '/') {
                kind = SG_SRC_POINTER;
                name = text;
                if (!sg_cfg_valid_pointer(text)) {
                        sg_cfg_set_errstr(errstr, errstr_size,
                                   "\"%.*s\" is not a valid JSON Pointer: "
                                   "'~' must be followed by '0' or '1' "
                                   "(RFC 6901 §3)",
                                   SG_QUOTE_MAX, text);
                        return SG_ERR_INVALID;
                }
        } else if (!strncmp(text, "ce:", 3)) {
                kind = SG_SRC_CE;
                name = text + 3;
                bool ok = *name != '\0';
                for (const char *s = name; *s && ok; s++)
                        ok = (*s >= 'a' && *s <= 'z') ||
                             (*s >= '0' && *s <= '9');
                if (!ok) {
                        sg_cfg_set_errstr(errstr, errstr_size,
                                   "\"%.*s\" is not a CloudEvents attribute: "
                                   "names are lower-case letters a-z and "
                                   "digits 0-9 (CloudEvents spec §3.1.1)",
                                   SG_QUOTE_MAX, text);
                        return SG_ERR_INVALID;
                }
        } else {
                sg_cfg_set_errstr(errstr, errstr_size,
                           "\"%.*s\" is not a field source; allowed: %s",
                           SG_QUOTE_MAX, text, SRC_FORMS);
                return SG_ERR_INVALID;
        }
        out->name = strdup(name);
        if (!out->name) {
                sg_cfg_set_errstr(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        out->kind = kind;
        return SG_OK;
}

static void sg_cfg_src_clear(sg_field_src_t *src) {
        free(src->name);
        src->name = NULL;
        src->kind = SG_SRC_NONE;
}

/** Sets @p src to a built-in default ("key" or "ce:ATTR"). */
static sg_err_t sg_cfg_src_default(cfg_ctx_t *c, sg_field_src_t *src,
                            sg_src_kind_t kind, const char *name) {
        sg_cfg_src_clear(src);
        if (name && !(src->name = strdup(name)))
                return sg_cfg_nomem(c);
        src->kind = kind;
        return SG_OK;
}

/** Parses a field source string at @p path into *src (replacing it). */
static sg_err_t sg_cfg_src_from_json(cfg_ctx_t *c, const cJSON *it, const char *path,
                              sg_field_src_t *src) {
        char detail[512];
        sg_field_src_t tmp;
        sg_err_t err;

        if (!cJSON_IsString(it))
                return sg_cfg_fail(c, path, "must be a string; allowed: %s",
                            SRC_FORMS);
        err = sg_field_src_parse(it->valuestring, &tmp, detail,
                                 sizeof(detail));
        if (err == SG_ERR_NOMEM)
                return sg_cfg_nomem(c);
        if (err)
                return sg_cfg_fail(c, path, "%s", detail);
        sg_cfg_src_clear(src);
        *src = tmp;
        return SG_OK;
}

/** Kafka topic name rule (Kafka's Topic.validate): 1-249 chars of
 *  [a-zA-Z0-9._-], not "." or "..". */
static bool sg_cfg_valid_topic_name(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 249 || !strcmp(s, ".") || !strcmp(s, ".."))
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' &&
                    *s != '-')
                        return false;
        return true;
}

static sg_err_t sg_cfg_check_topic_name(cfg_ctx_t *c, const char *path,
                                 const char *name) {
        if (!sg_cfg_valid_topic_name(name))
                return sg_cfg_fail(c, path,
                            "\"%.*s\" is not a valid Kafka topic name; "
                            "allowed: 1 to 249 characters of a-z, A-Z, 0-9, "
                            "'.', '_', '-', other than \".\" and \"..\"",
                            SG_QUOTE_MAX, name);
        return SG_OK;
}

/** Case-insensitive strstr() (ASCII). */
static bool sg_cfg_contains_ci(const char *hay, const char *needle) {
        size_t n = strlen(needle);

        for (; *hay; hay++) {
                size_t i = 0;
                while (i < n && hay[i] &&
                       tolower((unsigned char)hay[i]) ==
                               tolower((unsigned char)needle[i]))
                        i++;
                if (i == n)
                        return true;
        }
        return false;
}

bool sg_config_is_secret(const char *name) {
        if (!name)
                return false;
        return sg_cfg_contains_ci(name, "password") || sg_cfg_contains_ci(name, "secret") ||
               sg_cfg_contains_ci(name, ".pem") ||
               sg_cfg_contains_ci(name, "sasl.oauthbearer.config");
}

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
                        sg_cfg_fail(c, path, "a property name must not be empty");
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
                (*cntp)++;
        }
        return errors_since(c, since);
}

static const char *kv_find(const sg_kv_t *kv, size_t cnt, const char *name) {
        const char *v = NULL;

        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(kv[i].name, name))
                        v = kv[i].value; /* last one wins, as in librdkafka */
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

                sg_cfg_path_key(p, section, n);
                if (consumer && (!strcmp(n, "enable.auto.commit") ||
                                 !strcmp(n, "auto.commit.enable")) &&
                    rk_true(v))
                        sg_cfg_fail(c, p,
                             "must not be true: seqgate commits input "
                             "offsets itself, only after the batch's "
                             "output is delivered and its state is "
                             "committed (semantics §6); allowed: "
                             "false or unset");
                if (producer && !strcmp(n, "enable.idempotence") &&
                    rk_false(v))
                        sg_cfg_fail(c, p,
                             "must not be false: output is produced by "
                             "an idempotent producer so that retries "
                             "do not duplicate or reorder records "
                             "(semantics §6); allowed: true or unset");
                if (producer && (!strcmp(n, "acks") ||
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
                rkerr[0] = '\0';
                if (rd_kafka_conf_set(rk, kv[i].name, kv[i].value, rkerr,
                                      sizeof(rkerr)) == RD_KAFKA_CONF_OK)
                        continue;
                sg_cfg_path_key(p, section, kv[i].name);
                if (sg_config_is_secret(kv[i].name))
                        sg_cfg_fail(c, p,
                             "rejected by librdkafka (detail withheld: the "
                             "value is a secret)");
                else
                        sg_cfg_fail(c, p, "rejected by librdkafka: %s", rkerr);
        }
        rd_kafka_conf_destroy(rk);
        return errors_since(c, since);
}

static sg_err_t sg_cfg_parse_kafka(cfg_ctx_t *c, const cJSON *root, sg_config_t *conf) {
        const cJSON *it;
        const char *v;
        size_t since = c->err_cnt;

        it = cJSON_GetObjectItemCaseSensitive(root, "kafka");
        if (!it)
                sg_cfg_fail(c, "kafka", "required key is missing (librdkafka "
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
        bool kafka_ok = cJSON_IsObject(
                cJSON_GetObjectItemCaseSensitive(root, "kafka"));
        v = kv_find(conf->kafka, conf->kafka_cnt, "bootstrap.servers");
        if (kafka_ok && (!v || !*v))
                sg_cfg_fail(c, "kafka.bootstrap.servers",
                     "required (a non-empty host:port list)");
        v = kv_find(conf->kafka, conf->kafka_cnt, "group.id");
        if (kafka_ok && (!v || !*v))
                sg_cfg_fail(c, "kafka.group.id",
                     "required (the consumer group seqgate joins and whose "
                     "state it keeps)");
        else if (v && *v && !(conf->group_id = strdup(v)))
                return sg_cfg_nomem(c);

        KEEP(check_controlled(c, conf->kafka, conf->kafka_cnt, "kafka", true,
                              true));
        KEEP(check_controlled(c, conf->kafka_consumer,
                              conf->kafka_consumer_cnt, "kafka_consumer",
                              true, false));
        KEEP(check_controlled(c, conf->kafka_producer,
                              conf->kafka_producer_cnt, "kafka_producer",
                              false, true));
        KEEP(check_rdkafka(c, conf->kafka, conf->kafka_cnt, "kafka"));
        KEEP(check_rdkafka(c, conf->kafka_consumer, conf->kafka_consumer_cnt,
                           "kafka_consumer"));
        KEEP(check_rdkafka(c, conf->kafka_producer, conf->kafka_producer_cnt,
                           "kafka_producer"));
        return errors_since(c, since);
}

/* ------------------------------------------------------------------------ */
/* Topics                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const TOPIC_KEYS[] = {
        "output_topic", "dlq_topic", "output_partitioning", "envelope",
        "dedup", "ordering", "state_machine", "snapshot", "changelog_topic",
        NULL};
static const char *const ENVELOPE_KEYS[] = {
        "format", "id", "scope", "aggregate", "version", "type", "digest",
        "max_field_bytes", NULL};
static const char *const DEDUP_KEYS[] = {"ttl_ms", NULL};
static const char *const ORDERING_KEYS[] = {
        "mode", "first_version", "max_version_jump", "new_aggregate", "stale",
        "gap_timeout_ms", "gap_policy", "max_parked_per_aggregate",
        "max_parked_total", "max_parked_bytes", "on_park_overflow", NULL};
static const char *const SM_KEYS[] = {"initial", "states", "transitions", NULL};
static const char *const TRANSITION_KEYS[] = {"type", "from", "to", NULL};
static const char *const SNAPSHOT_KEYS[] = {
        "source", "request_topic", "reply_topic", "url", "auth_header_env",
        "timeout_ms", "max_in_flight", "max_attempts", "backoff_ms",
        "backoff_max_ms", "emit_record", NULL};

/* Enum spellings, in sg_*_t order. */
static const char *const PARTITIONING_NAMES[] = {"input", "murmur2", NULL};
static const char *const FORMAT_NAMES[] = {"cloudevents", "json", NULL};
static const char *const sg_cfg_mode_names[] = {"strict", "latest_wins", "none", NULL};
static const char *const GAP_NAMES[] = {"dlq", "skip", "hold", NULL};
static const char *const NEWAGG_NAMES[] = {"strict", "trust_first_seen", NULL};
static const char *const OVERFLOW_NAMES[] = {"pause", "dlq", NULL};
static const char *const STALE_NAMES[] = {"dlq", "drop", NULL};
/* SG_SNAP_NONE has no spelling (no "snapshot" block): source = index + 1. */
static const char *const SNAPSHOT_NAMES[] = {"kafka", "http", NULL};

/**
 * Reads a field source member that may be JSON null (= not configured) when
 * @p nullable. Absent: *src keeps its default.
 */
static sg_err_t sg_cfg_get_src(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, bool nullable, sg_field_src_t *src) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it)
                return SG_OK;
        if (cJSON_IsNull(it)) {
                if (!nullable)
                        return sg_cfg_fail(c, p, "must not be null; allowed: %s",
                                    SRC_FORMS);
                sg_cfg_src_clear(src);
                return SG_OK;
        }
        return sg_cfg_src_from_json(c, it, p, src);
}

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

/** A run of rows read at one point of a block (rows in table order). */
typedef enum cfg_sect {
        SECT_ROOT,         /* root keys read before the kafka blocks */
        SECT_STORE,        /* "store" */
        SECT_BATCH,        /* "batch" */
        SECT_ROOT_LIMITS,  /* root keys read after store and batch */
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
typedef sg_err_t cfg_check_fn(cfg_ctx_t *c, const cJSON *obj,
                              const char *path, const char *key_path,
                              void *base);

typedef struct cfg_row {
        sg_config_key_t key;
        cfg_sect_t sect;
        size_t off;          /* of the field in sg_config_t (root, store,
                                batch) or sg_topic_config_t (topics.*) */
        cfg_check_fn *check; /* NULL: none */
} cfg_row_t;

static cfg_check_fn sg_cfg_check_output_topic, sg_cfg_check_dlq_topic,
        sg_cfg_check_changelog_topic, sg_cfg_check_format, sg_cfg_check_request_topic,
        sg_cfg_check_reply_topic, sg_cfg_check_url, sg_cfg_check_auth_header_env;

#define ROW(S, T, F, B, N, TY, FL, D, TX, MIN, MAX, NM, CK, DOC)               \
        {{.block = (B), .name = (N), .type = (TY), .flags = (FL),              \
          .def = (D), .def_text = (TX), .min = (MIN), .max = (MAX),            \
          .names = (NM), .doc = (DOC)},                                        \
         (S), offsetof(T, F), (CK)}
/* root, store and batch keys: fields of sg_config_t */
#define R_INT(S, F, B, N, D, MIN, MAX, DOC)                                   \
        ROW(S, sg_config_t, F, B, N, SG_CONF_INT, 0, D, NULL, MIN, MAX, NULL, \
            NULL, DOC)
#define R_I64(S, F, B, N, D, MIN, DOC)                                        \
        ROW(S, sg_config_t, F, B, N, SG_CONF_I64, 0, D, NULL, MIN,            \
            SG_JSON_INT_MAX, NULL, NULL, DOC)
#define R_U64(S, F, B, N, D, MIN, DOC)                                        \
        ROW(S, sg_config_t, F, B, N, SG_CONF_U64, 0, D, NULL, MIN,            \
            SG_JSON_INT_MAX, NULL, NULL, DOC)
/* topics.* keys: fields of sg_topic_config_t */
#define T_STR(S, F, B, N, FL, CK, DOC)                                        \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_STRING, FL, 0, NULL, 0, 0, \
            NULL, CK, DOC)
#define T_ENUM(S, F, B, N, D, NM, DOC)                                        \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_ENUM, 0, D, NULL, 0, 0,    \
            NM, NULL, DOC)
#define T_SRC(F, N, FL, TX, DOC)                                              \
        ROW(SECT_ENVELOPE, sg_topic_config_t, F, "topics.*.envelope", N,      \
            SG_CONF_SRC, FL, 0, TX, 0, 0, NULL, NULL, DOC)
#define T_I64(S, F, B, N, D, MIN, MAX, DOC)                                   \
        ROW(S, sg_topic_config_t, F, B, N, SG_CONF_I64, 0, D, NULL, MIN, MAX, \
            NULL, NULL, DOC)
#define T_U64(F, N, D, MIN, DOC)                                              \
        ROW(SECT_ORDERING, sg_topic_config_t, F, "topics.*.ordering", N,      \
            SG_CONF_U64, 0, D, NULL, MIN, SG_JSON_INT_MAX, NULL, NULL, DOC)

#define ORD "topics.*.ordering"
#define SNAP "topics.*.snapshot"

static const cfg_row_t cfg_rows[] = {
        ROW(SECT_ROOT, sg_config_t, instance_id, "", "instance_id",
            SG_CONF_STRING, 0, 0, "seqgate", 0, 0, NULL, NULL,
            "unique per instance in a consumer group"),
        ROW(SECT_ROOT, sg_config_t, data_dir, "", "data_dir", SG_CONF_STRING,
            SG_CONF_REQUIRED, 0, NULL, 0, 0, NULL, NULL,
            "directory of the LMDB state store"),
        ROW(SECT_ROOT, sg_config_t, guarantee, "", "guarantee", SG_CONF_ENUM,
            0, SG_GUARANTEE_EXACTLY_ONCE, NULL, 0, 0, GUARANTEE_NAMES, NULL,
            "delivery guarantee (semantics §6)"),
        R_U64(SECT_STORE, map_size_bytes, "store", "map_size_bytes",
              INT64_C(1073741824), 1048576, "initial LMDB map size, bytes"),
        R_U64(SECT_STORE, map_growth_bytes, "store", "map_growth_bytes",
              INT64_C(1073741824), 1048576,
              "LMDB map growth when full, bytes"),
        R_INT(SECT_BATCH, batch_max_records, "batch", "max_records", 1000, 1,
              100000, "most input records per batch"),
        R_INT(SECT_BATCH, batch_max_ms, "batch", "max_ms", 100, 1, 60000,
              "longest wait to fill a batch, milliseconds"),
        R_I64(SECT_ROOT_LIMITS, stats_interval_ms, "", "stats_interval_ms",
              10000, 0, "stats log line period, milliseconds; 0 disables"),
        R_I64(SECT_ROOT_LIMITS, delivery_timeout_ms, "",
              "delivery_timeout_ms", 60000, 1,
              "wait for output deliveries, milliseconds"),
        R_INT(SECT_ROOT_LIMITS, sweep_max_per_batch, "",
              "sweep_max_per_batch", 1000, 1, 1000000,
              "dedup records the TTL sweep removes per batch"),
        R_INT(SECT_ROOT_LIMITS, deadline_max_per_batch, "",
              "deadline_max_per_batch", 1000, 1, 1000000,
              "gap deadlines fired per batch"),
        R_I64(SECT_ROOT_LIMITS, pause_retry_ms, "", "pause_retry_ms", 1000, 1,
              "re-check of a paused partition, milliseconds"),
        R_I64(SECT_ROOT_LIMITS, broker_retry_timeout_ms, "",
              "broker_retry_timeout_ms", 120000, 1,
              "longest retry of a retriable broker error at start-up, "
              "milliseconds"),

        T_STR(SECT_TOPIC, output_topic, "topics.*", "output_topic",
              SG_CONF_REQUIRED, sg_cfg_check_output_topic,
              "topic applied records are produced to"),
        T_STR(SECT_TOPIC, dlq_topic, "topics.*", "dlq_topic",
              SG_CONF_REQUIRED, sg_cfg_check_dlq_topic,
              "topic refused records are dead-lettered to"),
        T_STR(SECT_TOPIC, changelog_topic, "topics.*", "changelog_topic", 0,
              sg_cfg_check_changelog_topic,
              "compacted changelog of the state "
              "[<group.id>-<topic>-changelog]"),
        T_ENUM(SECT_TOPIC, output_partitioning, "topics.*",
               "output_partitioning", SG_PART_INPUT, PARTITIONING_NAMES,
               "output partition: the input's, or murmur2 of the key"),

        ROW(SECT_ENVELOPE, sg_topic_config_t, format, "topics.*.envelope",
            "format", SG_CONF_ENUM, 0, SG_FORMAT_CLOUDEVENTS, NULL, 0, 0,
            FORMAT_NAMES, sg_cfg_check_format, "record format (semantics §2)"),
        T_SRC(id, "id", 0, "ce:id", "idempotency key field"),
        T_SRC(aggregate, "aggregate", SG_CONF_NULLABLE, "key",
              "aggregate id field"),
        T_SRC(version, "version", SG_CONF_NULLABLE, "ce:sequence",
              "aggregate version field; null: dedup only"),
        T_SRC(type, "type", SG_CONF_NULLABLE, "ce:type", "event type field"),
        ROW(SECT_ENVELOPE_MAX, sg_topic_config_t, max_field_bytes,
            "topics.*.envelope", "max_field_bytes", SG_CONF_SIZE, 0, 1024,
            NULL, 1, 1048576, NULL, NULL,
            "longest id, scope, aggregate or type, bytes"),

        T_I64(SECT_DEDUP, dedup_ttl_ms, "topics.*.dedup", "ttl_ms",
              INT64_C(604800000), 1000, SG_JSON_INT_MAX,
              "how long an idempotency key is remembered, milliseconds"),

        T_ENUM(SECT_ORDERING, order_mode, ORD, "mode", SG_ORDER_STRICT,
               sg_cfg_mode_names, "ordering mode (semantics §3b)"),
        T_U64(first_version, "first_version", 1, 0,
              "version of an aggregate's first event"),
        T_U64(max_version_jump, "max_version_jump", 100000, 1,
              "largest version step parked rather than dead-lettered"),
        T_ENUM(SECT_ORDERING, new_aggregate, ORD, "new_aggregate",
               SG_NEWAGG_STRICT, NEWAGG_NAMES,
               "a new aggregate above first_version: wait, or trust it"),
        ROW(SECT_ORDERING, sg_topic_config_t, stale_drop, ORD, "stale",
            SG_CONF_ENUM_BOOL, 0, 0, NULL, 0, 0, STALE_NAMES, NULL,
            "a stale version is dead-lettered or dropped"),
        T_I64(SECT_ORDERING, gap_timeout_ms, ORD, "gap_timeout_ms", 30000, 1,
              SG_JSON_INT_MAX, "wait for a missing version, milliseconds"),
        T_ENUM(SECT_ORDERING, gap_policy, ORD, "gap_policy", SG_GAP_DLQ,
               GAP_NAMES, "what a gap deadline does (semantics §4)"),
        T_U64(max_parked_per_aggregate, "max_parked_per_aggregate", 1000, 1,
              "parked events per aggregate"),
        T_U64(max_parked_total, "max_parked_total", 100000, 1,
              "parked events per input partition"),
        T_U64(max_parked_bytes, "max_parked_bytes", INT64_C(268435456), 1,
              "parked bytes per input partition"),
        T_ENUM(SECT_ORDERING, on_park_overflow, ORD, "on_park_overflow",
               SG_OVERFLOW_PAUSE, OVERFLOW_NAMES,
               "a parking cap reached: pause the partition, or DLQ"),

        T_STR(SECT_SNAP_KAFKA, snapshot.request_topic, SNAP, "request_topic",
              SG_CONF_REQUIRED, sg_cfg_check_request_topic,
              "source kafka: topic snapshot requests are produced to"),
        T_STR(SECT_SNAP_KAFKA, snapshot.reply_topic, SNAP, "reply_topic",
              SG_CONF_REQUIRED, sg_cfg_check_reply_topic,
              "source kafka: topic seqgate reads snapshot replies from"),
        T_STR(SECT_SNAP_HTTP, snapshot.url, SNAP, "url", SG_CONF_REQUIRED,
              sg_cfg_check_url, "source http: URL template with {aggregate}"),
        T_STR(SECT_SNAP_HTTP, snapshot.auth_header_env, SNAP,
              "auth_header_env", 0, sg_cfg_check_auth_header_env,
              "source http: environment variable holding the "
              "Authorization header"),
        T_I64(SECT_SNAP_RETRY, snapshot.timeout_ms, SNAP, "timeout_ms", 5000,
              1, 600000, "per request, milliseconds"),
        T_I64(SECT_SNAP_RETRY, snapshot.max_in_flight, SNAP, "max_in_flight",
              64, 1, 100000, "requests in flight per input partition"),
        T_I64(SECT_SNAP_RETRY, snapshot.max_attempts, SNAP, "max_attempts",
              4, 1, 1000, "attempts before the gap policy applies"),
        T_I64(SECT_SNAP_RETRY, snapshot.backoff_ms, SNAP, "backoff_ms", 500,
              1, 3600000, "first retry delay, milliseconds (doubles)"),
        T_I64(SECT_SNAP_RETRY, snapshot.backoff_max_ms, SNAP,
              "backoff_max_ms", 30000, 1, 3600000,
              "longest retry delay, milliseconds"),
        ROW(SECT_SNAP_OUTPUT, sg_topic_config_t, snapshot.emit_record, SNAP,
            "emit_record", SG_CONF_BOOL, 0, 1, NULL, 0, 0, NULL, NULL,
            "an applied snapshot is also a record on the output topic"),
};

#undef ORD
#undef SNAP

#define CFG_ROW_CNT (sizeof(cfg_rows) / sizeof(cfg_rows[0]))

/* Enum fields are read and written as int. */
_Static_assert(sizeof(sg_format_t) == sizeof(int) &&
                       sizeof(sg_guarantee_t) == sizeof(int) &&
                       sizeof(sg_partitioning_t) == sizeof(int) &&
                       sizeof(sg_order_mode_t) == sizeof(int) &&
                       sizeof(sg_new_agg_t) == sizeof(int) &&
                       sizeof(sg_gap_policy_t) == sizeof(int) &&
                       sizeof(sg_overflow_t) == sizeof(int),
               "enum fields are stored as int");

const sg_config_key_t *sg_config_key(size_t i) {
        return i < CFG_ROW_CNT ? &cfg_rows[i].key : NULL;
}

/** Sets the default of every row of section @p s in @p base. */
static sg_err_t sg_cfg_defaults(cfg_ctx_t *c, cfg_sect_t s, void *base) {
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
                                return sg_cfg_nomem(c); /* the texts are valid */
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
                if ((err = sg_cfg_get_int(c, obj, path, k->name, k->min, k->max, &v)) ||
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
                if ((err = sg_cfg_get_enum(c, obj, path, k->name, k->names, NULL,
                                    &ival)))
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
static sg_err_t sg_cfg_read(cfg_ctx_t *c, const cJSON *obj, const char *path,
                         cfg_sect_t s, void *base) {
        size_t since = c->err_cnt;

        for (size_t i = 0; i < CFG_ROW_CNT; i++)
                if (cfg_rows[i].sect == s)
                        KEEP(row_read(c, obj, path, &cfg_rows[i], base));
        return errors_since(c, since);
}

/** Sets the defaults listed in config.h. */
static sg_err_t topic_defaults(cfg_ctx_t *c, sg_topic_config_t *tc) {
        static const cfg_sect_t sects[] = {
                SECT_TOPIC,    SECT_ENVELOPE,   SECT_ENVELOPE_MAX,
                SECT_DEDUP,    SECT_ORDERING,   SECT_SNAP_KAFKA,
                SECT_SNAP_HTTP, SECT_SNAP_RETRY, SECT_SNAP_OUTPUT};
        sg_err_t err;

        for (size_t i = 0; i < sizeof(sects) / sizeof(sects[0]); i++)
                if ((err = sg_cfg_defaults(c, sects[i], tc)))
                        return err;
        tc->snapshot.source = SG_SNAP_NONE;
        if (!(tc->scope = calloc(1, sizeof(*tc->scope))))
                return sg_cfg_nomem(c);
        tc->scope_cnt = 1;
        return sg_cfg_src_default(c, &tc->scope[0], SG_SRC_CE, "source");
}

/** Format "json" has no CloudEvents attributes to read (semantics §2). */
static sg_err_t no_ce(cfg_ctx_t *c, const char *path, const sg_field_src_t *s) {
        if (s->kind == SG_SRC_CE)
                return sg_cfg_fail(c, path,
                            "\"ce:%s\" needs format \"cloudevents\"; format "
                            "\"json\" allows \"key\", \"header:NAME\", "
                            "\"/json/pointer\"",
                            s->name);
        return SG_OK;
}

/** envelope.format "json": no CloudEvents defaults; id must be mapped, and
 *  version and type are unset unless mapped (dedup-only topic). */
static sg_err_t sg_cfg_check_format(cfg_ctx_t *c, const cJSON *env, const char *path,
                             const char *key_path, void *base) {
        sg_topic_config_t *tc = base;
        char p[SG_PATH_SIZE];

        (void)key_path;
        if (tc->format != SG_FORMAT_JSON)
                return SG_OK;
        sg_cfg_src_clear(&tc->version);
        sg_cfg_src_clear(&tc->type);
        for (size_t i = 0; i < tc->scope_cnt; i++)
                sg_cfg_src_clear(&tc->scope[i]);
        tc->scope_cnt = 0;
        if (!cJSON_GetObjectItemCaseSensitive(env, "id")) {
                sg_cfg_path_key(p, path, "id");
                sg_cfg_fail(c, p,
                     "required with format \"json\"; allowed: "
                     "\"key\", \"header:NAME\", \"/json/pointer\"");
        }
        return SG_OK;
}

static sg_err_t parse_envelope(cfg_ctx_t *c, const cJSON *env,
                               const char *path, sg_topic_config_t *tc) {
        char p[SG_PATH_SIZE];
        const cJSON *it;
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, env, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, env, path, ENVELOPE_KEYS));

        KEEP(sg_cfg_read(c, env, path, SECT_ENVELOPE, tc));

        sg_cfg_path_key(p, path, "scope");
        if ((it = cJSON_GetObjectItemCaseSensitive(env, "scope")) &&
            !cJSON_IsArray(it)) {
                sg_cfg_fail(c, p,
                     "must be an array of field sources (may be empty: scope "
                     "= topic only)");
        } else if (it) {
                size_t n = (size_t)cJSON_GetArraySize(it), i = 0;
                char ip[SG_PATH_SIZE];
                const cJSON *el;

                for (i = 0; i < tc->scope_cnt; i++)
                        sg_cfg_src_clear(&tc->scope[i]);
                free(tc->scope);
                tc->scope = NULL;
                tc->scope_cnt = 0;
                if (n > 0) {
                        if (!(tc->scope = calloc(n, sizeof(*tc->scope))))
                                return sg_cfg_nomem(c);
                        tc->scope_cnt = n;
                }
                i = 0;
                cJSON_ArrayForEach(el, it) {
                        sg_cfg_path_idx(ip, p, i);
                        err = sg_cfg_src_from_json(c, el, ip, &tc->scope[i]);
                        if (!err && tc->format == SG_FORMAT_JSON)
                                err = no_ce(c, ip, &tc->scope[i]);
                        KEEP(err);
                        i++;
                }
        }

        if (tc->format == SG_FORMAT_JSON) {
                static const char *const keys[] = {"id", "aggregate",
                                                   "version", "type"};
                const sg_field_src_t *srcs[] = {&tc->id, &tc->aggregate,
                                                &tc->version, &tc->type};
                for (size_t i = 0; i < 4; i++) {
                        sg_cfg_path_key(p, path, keys[i]);
                        KEEP(no_ce(c, p, srcs[i]));
                }
        }

        sg_cfg_path_key(p, path, "digest");
        if ((it = cJSON_GetObjectItemCaseSensitive(env, "digest"))) {
                if (!cJSON_IsString(it))
                        sg_cfg_fail(c, p,
                             "must be a string; allowed: \"value\" (SHA-256 "
                             "of the record value) or a JSON Pointer such as "
                             "\"/data\"");
                else if (strcmp(it->valuestring, "value") &&
                         !sg_cfg_valid_pointer(it->valuestring))
                        sg_cfg_fail(c, p,
                             "\"%.*s\" is not allowed; allowed: \"value\" or "
                             "a JSON Pointer (RFC 6901) such as \"/data\"",
                             SG_QUOTE_MAX, it->valuestring);
                /* A CloudEvent's payload is its data (semantics §2; in
                 * binary mode the record value): a pointer elsewhere would
                 * digest attributes only and judge different payloads
                 * duplicates. */
                else if (strcmp(it->valuestring, "value") &&
                         tc->format == SG_FORMAT_CLOUDEVENTS &&
                         strcmp(it->valuestring, "/data") != 0 &&
                         strncmp(it->valuestring, "/data/", 6) != 0)
                        sg_cfg_fail(c, p,
                             "\"%.*s\" is not allowed with format "
                             "\"cloudevents\"; allowed: \"value\", \"/data\" "
                             "or a JSON Pointer into it (\"/data/...\")",
                             SG_QUOTE_MAX, it->valuestring);
                else if (strcmp(it->valuestring, "value") &&
                         !(tc->digest_pointer = strdup(it->valuestring)))
                        return sg_cfg_nomem(c);
        }

        KEEP(sg_cfg_read(c, env, path, SECT_ENVELOPE_MAX, tc));
        return errors_since(c, since);
}

static sg_err_t parse_ordering(cfg_ctx_t *c, const cJSON *ord,
                               const char *path, sg_topic_config_t *tc) {
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, ord, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, ord, path, ORDERING_KEYS));

        KEEP(sg_cfg_read(c, ord, path, SECT_ORDERING, tc));

        if (tc->max_parked_per_aggregate > tc->max_parked_total) {
                char p[SG_PATH_SIZE];
                sg_cfg_path_key(p, path, "max_parked_per_aggregate");
                sg_cfg_fail(c, p,
                     "must be <= max_parked_total (%" PRIu64 "): the "
                     "per-aggregate cap is part of the per-partition total",
                     tc->max_parked_total);
        }
        return errors_since(c, since);
}

static bool sm_has_state(const sg_state_machine_t *sm, const char *s) {
        for (size_t i = 0; i < sm->state_cnt; i++)
                if (sm->states[i] && !strcmp(sm->states[i], s))
                        return true;
        return false;
}

/** Fails unless @p it is a state of @p sm. */
static sg_err_t sm_state_ref(cfg_ctx_t *c, const sg_state_machine_t *sm,
                             const cJSON *it, const char *path) {
        char list[1024];

        if (!cJSON_IsString(it) || !*it->valuestring)
                return sg_cfg_fail(c, path, "must be a state name; allowed: %s",
                            sg_cfg_join_n(list, sizeof(list), sm->states,
                                   sm->state_cnt));
        if (!sm_has_state(sm, it->valuestring))
                return sg_cfg_fail(c, path,
                            "\"%.*s\" is not a declared state; allowed: %s",
                            SG_QUOTE_MAX, it->valuestring,
                            sg_cfg_join_n(list, sizeof(list), sm->states,
                                   sm->state_cnt));
        return SG_OK;
}

/** Reads a non-empty JSON array member @p key (required). */
static sg_err_t get_array(cfg_ctx_t *c, const cJSON *obj, const char *path,
                          const char *key, const char *what,
                          const cJSON **out) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it)
                return sg_cfg_fail(c, p, "required key is missing (%s)", what);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) < 1)
                return sg_cfg_fail(c, p, "must be a non-empty array (%s)", what);
        *out = it;
        return SG_OK;
}

static sg_err_t parse_transition(cfg_ctx_t *c, const cJSON *obj,
                                 const char *path, sg_state_machine_t *sm,
                                 size_t idx) {
        sg_transition_t *t = &sm->transitions[idx];
        char p[SG_PATH_SIZE], ip[SG_PATH_SIZE];
        const cJSON *from = NULL, *el;
        const char *type = NULL;
        size_t i = 0, since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, TRANSITION_KEYS));
        KEEP(sg_cfg_get_str(c, obj, path, "type", true, &type));
        for (size_t j = 0; type && j < idx; j++) {
                if (sm->transitions[j].type &&
                    !strcmp(sm->transitions[j].type, type)) {
                        sg_cfg_path_key(p, path, "type");
                        sg_cfg_fail(c, p,
                             "\"%.*s\" already has a transition; an event "
                             "type moves to one state (list every source "
                             "state in \"from\")",
                             SG_QUOTE_MAX, type);
                        type = NULL;
                        break;
                }
        }
        if (type && !(t->type = strdup(type)))
                return sg_cfg_nomem(c);

        KEEP(get_array(c, obj, path, "from", "states the event may leave",
                       &from));
        sg_cfg_path_key(p, path, "from");
        if (from) {
                if (!(t->from = calloc((size_t)cJSON_GetArraySize(from),
                                       sizeof(*t->from))))
                        return sg_cfg_nomem(c);
                t->from_cnt = (size_t)cJSON_GetArraySize(from);
        }
        for (el = from ? from->child : NULL; el; el = el->next, i++) {
                sg_cfg_path_idx(ip, p, i);
                if (sm_state_ref(c, sm, el, ip))
                        continue;
                bool dup = false;
                for (size_t j = 0; !dup && j < i; j++)
                        dup = t->from[j] &&
                              !strcmp(t->from[j], el->valuestring);
                if (dup)
                        sg_cfg_fail(c, ip, "duplicate state \"%s\"",
                             el->valuestring);
                else if (!(t->from[i] = strdup(el->valuestring)))
                        return sg_cfg_nomem(c);
        }

        sg_cfg_path_key(p, path, "to");
        el = cJSON_GetObjectItemCaseSensitive(obj, "to");
        if (!el)
                sg_cfg_fail(c, p, "required key is missing");
        else if (!sm_state_ref(c, sm, el, p) &&
                 !(t->to = strdup(el->valuestring)))
                return sg_cfg_nomem(c);
        return errors_since(c, since);
}

static sg_err_t parse_state_machine(cfg_ctx_t *c, const cJSON *obj,
                                    const char *path, sg_state_machine_t *sm) {
        char p[SG_PATH_SIZE], ip[SG_PATH_SIZE];
        const cJSON *states = NULL, *trans = NULL, *el;
        size_t i = 0, since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, SM_KEYS));
        sm->enabled = true;

        /* without its states nothing else can be checked */
        if ((err = get_array(c, obj, path, "states", "the state names",
                             &states)))
                return err;
        sg_cfg_path_key(p, path, "states");
        if (!(sm->states = calloc((size_t)cJSON_GetArraySize(states),
                                  sizeof(*sm->states))))
                return sg_cfg_nomem(c);
        sm->state_cnt = (size_t)cJSON_GetArraySize(states);
        cJSON_ArrayForEach(el, states) {
                sg_cfg_path_idx(ip, p, i);
                if (!cJSON_IsString(el) || !*el->valuestring)
                        sg_cfg_fail(c, ip, "must be a non-empty string");
                else if (sm_has_state(sm, el->valuestring))
                        sg_cfg_fail(c, ip, "duplicate state \"%.*s\"", SG_QUOTE_MAX,
                             el->valuestring);
                else if (!(sm->states[i] = strdup(el->valuestring)))
                        return sg_cfg_nomem(c);
                i++;
        }

        sg_cfg_path_key(p, path, "initial");
        el = cJSON_GetObjectItemCaseSensitive(obj, "initial");
        if (!el)
                sg_cfg_fail(c, p, "required key is missing (the state of a new "
                           "aggregate)");
        else if (!sm_state_ref(c, sm, el, p) &&
                 !(sm->initial = strdup(el->valuestring)))
                return sg_cfg_nomem(c);

        KEEP(get_array(c, obj, path, "transitions", "objects {type, from, to}",
                       &trans));
        if (!trans)
                return errors_since(c, since);
        sg_cfg_path_key(p, path, "transitions");
        if (!(sm->transitions = calloc((size_t)cJSON_GetArraySize(trans),
                                       sizeof(*sm->transitions))))
                return sg_cfg_nomem(c);
        i = 0;
        cJSON_ArrayForEach(el, trans) {
                sg_cfg_path_idx(ip, p, i);
                /* Count only built entries, so that the duplicate-type scan
                 * in parse_transition sees initialised types. */
                sm->transition_cnt = i + 1;
                KEEP(parse_transition(c, el, ip, sm, i));
                i++;
        }
        return errors_since(c, since);
}

/* ------------------------------------------------------------------------ */
/* Snapshot source (snapshot refetch, semantics §4 step 1)                 */
/* ------------------------------------------------------------------------ */

/**
 * Key names that would put the Authorization value itself into the config
 * file. The value is taken from the environment variable named by
 * auth_header_env only, so that the file can be shared and versioned.
 */
static bool snapshot_secret_key(const char *k) {
        return !strcasecmp(k, "auth_header") ||
               !strcasecmp(k, "authorization") || sg_cfg_contains_ci(k, "token") ||
               sg_config_is_secret(k);
}

/** POSIX-style environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
static bool valid_env_name(const char *s) {
        for (size_t i = 0; s[i]; i++) {
                char ch = s[i];
                bool alpha = (ch >= 'A' && ch <= 'Z') ||
                             (ch >= 'a' && ch <= 'z') || ch == '_';
                if (!alpha && (i == 0 || ch < '0' || ch > '9'))
                        return false;
        }
        return *s != '\0';
}

/**
 * Checks the HTTP URL template. The URL is never quoted back: a query string
 * may hold an API key. Rules: an absolute http or https URL (RFC 3986 §3;
 * schemes are case-insensitive, §3.1) with a host, printable ASCII only
 * (anything else must be percent-encoded, §2.1), no user:password@ (the
 * config file must hold no secret), and the "{aggregate}" placeholder.
 */
static sg_err_t check_snapshot_url(cfg_ctx_t *c, const char *path,
                                   const char *url) {
        size_t scheme;
        const char *host, *end;

        if (!strncasecmp(url, "http://", 7))
                scheme = 7;
        else if (!strncasecmp(url, "https://", 8))
                scheme = 8;
        else
                return sg_cfg_fail(c, path,
                            "must start with \"http://\" or \"https://\"");
        for (const char *s = url; *s; s++)
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        return sg_cfg_fail(c, path,
                                    "must not contain spaces, control or "
                                    "non-ASCII characters (percent-encode "
                                    "them, RFC 3986 §2.1)");
        host = url + scheme;
        end = host + strcspn(host, "/?#");
        if (end == host)
                return sg_cfg_fail(c, path, "needs a host after \"%.*s\"",
                            (int)scheme, url);
        if (memchr(host, '@', (size_t)(end - host)))
                return sg_cfg_fail(c, path,
                            "must not hold credentials (user:password@host): "
                            "the config file must contain no secret; put the "
                            "Authorization header value in an environment "
                            "variable and name it in auth_header_env");
        if (!strstr(url, "{aggregate}"))
                return sg_cfg_fail(c, path,
                            "must contain \"{aggregate}\" (replaced by the "
                            "percent-encoded aggregate id)");
        return SG_OK;
}

/* snapshot.request_topic (source kafka) */
static sg_err_t sg_cfg_check_request_topic(cfg_ctx_t *c, const cJSON *obj,
                                    const char *path, const char *key_path,
                                    void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->snapshot.request_topic));
        return SG_OK;
}

/* snapshot.reply_topic (source kafka): a topic of its own */
static sg_err_t sg_cfg_check_reply_topic(cfg_ctx_t *c, const cJSON *obj,
                                  const char *path, const char *key_path,
                                  void *base) {
        sg_snapshot_config_t *sn = &((sg_topic_config_t *)base)->snapshot;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, sn->reply_topic));
        if (sn->request_topic && !strcmp(sn->request_topic, sn->reply_topic))
                sg_cfg_fail(c, key_path,
                     "must differ from request_topic \"%s\": "
                     "seqgate consumes the reply topic and would "
                     "read its own requests",
                     sn->request_topic);
        return SG_OK;
}

/* snapshot.url (source http) */
static sg_err_t sg_cfg_check_url(cfg_ctx_t *c, const cJSON *obj, const char *path,
                          const char *key_path, void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(check_snapshot_url(c, key_path, tc->snapshot.url));
        return SG_OK;
}

/* snapshot.auth_header_env (source http). Not quoted: a mistaken value may
 * be the secret itself. */
static sg_err_t sg_cfg_check_auth_header_env(cfg_ctx_t *c, const cJSON *obj,
                                      const char *path, const char *key_path,
                                      void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        if (!valid_env_name(tc->snapshot.auth_header_env))
                sg_cfg_fail(c, key_path,
                     "must be the NAME of an environment variable "
                     "([A-Za-z_][A-Za-z0-9_]*, e.g. "
                     "\"SEQGATE_SNAPSHOT_AUTH\") whose value is the "
                     "Authorization header; never the header value "
                     "itself");
        return SG_OK;
}

/**
 * Reads a topic's "snapshot" block into tc->snapshot. Topic names are
 * checked here for syntax and request != reply; that they differ from every
 * input, output and DLQ topic is checked by sg_cfg_parse_topics() once all topics
 * are read.
 */
static sg_err_t sg_cfg_parse_snapshot(cfg_ctx_t *c, const cJSON *obj,
                               const char *path, sg_topic_config_t *tc) {
        static const char *const kafka_only[] = {"request_topic",
                                                 "reply_topic", NULL};
        static const char *const http_only[] = {"url", "auth_header_env",
                                                NULL};
        sg_snapshot_config_t *sn = &tc->snapshot;
        char p[SG_PATH_SIZE];
        const char *const *forbidden;
        const cJSON *it;
        int ival = -1;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        size_t since = c->err_cnt;
        /* Before the unknown-key check, so that the error says why. */
        bool secret_key = false;
        for (it = obj->child; it; it = it->next) {
                if (!snapshot_secret_key(it->string))
                        continue;
                sg_cfg_path_key(p, path, it->string);
                sg_cfg_fail(c, p,
                     "not allowed: the config file must never hold the "
                     "Authorization header value; put it in an environment "
                     "variable and set auth_header_env to that variable's "
                     "name (e.g. \"SEQGATE_SNAPSHOT_AUTH\")");
                secret_key = true;
        }
        /* a secret-looking key is said once, by the rule above */
        if (!secret_key)
                KEEP(sg_cfg_check_keys(c, obj, path, SNAPSHOT_KEYS));

        /* without a source nothing else can be checked */
        if (!cJSON_GetObjectItemCaseSensitive(obj, "source")) {
                sg_cfg_path_key(p, path, "source");
                return sg_cfg_fail(c, p, "required key is missing; allowed: kafka "
                                  "(request/reply topics), http (GET on a "
                                  "URL template)");
        }
        if ((err = sg_cfg_get_enum(c, obj, path, "source", SNAPSHOT_NAMES, NULL,
                            &ival)))
                return err;
        sn->source = (sg_snapshot_source_t)(ival + 1);

        forbidden = sn->source == SG_SNAP_KAFKA ? http_only : kafka_only;
        for (size_t i = 0; forbidden[i]; i++) {
                if (!cJSON_GetObjectItemCaseSensitive(obj, forbidden[i]))
                        continue;
                sg_cfg_path_key(p, path, forbidden[i]);
                sg_cfg_fail(c, p, "not allowed with source \"%s\" (%s)",
                     SNAPSHOT_NAMES[ival],
                     sn->source == SG_SNAP_KAFKA
                             ? "source kafka uses request_topic and "
                               "reply_topic"
                             : "source http uses url and auth_header_env");
        }

        KEEP(sg_cfg_read(c, obj, path,
                      sn->source == SG_SNAP_KAFKA ? SECT_SNAP_KAFKA
                                                  : SECT_SNAP_HTTP,
                      tc));

        KEEP(sg_cfg_read(c, obj, path, SECT_SNAP_RETRY, tc));
        if (sn->backoff_max_ms < sn->backoff_ms) {
                sg_cfg_path_key(p, path, "backoff_max_ms");
                sg_cfg_fail(c, p,
                     "must be >= backoff_ms (%" PRId64 "): it caps the "
                     "doubling retry delay",
                     sn->backoff_ms);
        }

        KEEP(sg_cfg_read(c, obj, path, SECT_SNAP_OUTPUT, tc));
        return errors_since(c, since);
}

/* output_topic: a topic name, not the input topic */
static sg_err_t sg_cfg_check_output_topic(cfg_ctx_t *c, const cJSON *obj,
                                   const char *path, const char *key_path,
                                   void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->output_topic));
        if (!strcmp(tc->output_topic, tc->name))
                sg_cfg_fail(c, key_path, "must differ from the input topic \"%s\"",
                     tc->name);
        return SG_OK;
}

/* dlq_topic: a topic name, neither the input nor the output topic */
static sg_err_t sg_cfg_check_dlq_topic(cfg_ctx_t *c, const cJSON *obj,
                                const char *path, const char *key_path,
                                void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->dlq_topic));
        if (!strcmp(tc->dlq_topic, tc->name))
                sg_cfg_fail(c, key_path, "must differ from the input topic \"%s\"",
                     tc->name);
        else if (tc->output_topic && !strcmp(tc->dlq_topic, tc->output_topic))
                sg_cfg_fail(c, key_path,
                     "must differ from output_topic \"%s\": refused "
                     "records must not reach the output's consumers",
                     tc->output_topic);
        return SG_OK;
}

/* changelog_topic: a topic of its own */
static sg_err_t sg_cfg_check_changelog_topic(cfg_ctx_t *c, const cJSON *obj,
                                      const char *path, const char *key_path,
                                      void *base) {
        sg_topic_config_t *tc = base;

        (void)obj;
        (void)path;
        KEEP(sg_cfg_check_topic_name(c, key_path, tc->changelog_topic));
        if (!strcmp(tc->changelog_topic, tc->name) ||
            (tc->output_topic &&
             !strcmp(tc->changelog_topic, tc->output_topic)) ||
            (tc->dlq_topic && !strcmp(tc->changelog_topic, tc->dlq_topic)))
                sg_cfg_fail(c, key_path,
                     "must differ from the input, output and DLQ "
                     "topics: it holds seqgate's state");
        return SG_OK;
}

static sg_err_t parse_topic(cfg_ctx_t *c, const cJSON *obj, const char *path,
                            sg_topic_config_t *tc) {
        char p[SG_PATH_SIZE];
        const cJSON *it;
        size_t since = c->err_cnt;
        sg_err_t err;

        if ((err = sg_cfg_expect_object(c, obj, path)))
                return err;
        KEEP(sg_cfg_check_keys(c, obj, path, TOPIC_KEYS));
        if ((err = topic_defaults(c, tc)))
                return err;
        if (!(tc->name = strdup(obj->string)))
                return sg_cfg_nomem(c);

        KEEP(sg_cfg_read(c, obj, path, SECT_TOPIC, tc));

        sg_cfg_path_key(p, path, "envelope");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "envelope")))
                KEEP(parse_envelope(c, it, p, tc));

        sg_cfg_path_key(p, path, "dedup");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "dedup")) &&
            !sg_cfg_expect_object(c, it, p)) {
                KEEP(sg_cfg_check_keys(c, it, p, DEDUP_KEYS));
                KEEP(sg_cfg_read(c, it, p, SECT_DEDUP, tc));
        }

        sg_cfg_path_key(p, path, "ordering");
        const cJSON *ord = cJSON_GetObjectItemCaseSensitive(obj, "ordering");
        if (ord)
                KEEP(parse_ordering(c, ord, p, tc));

        sg_cfg_path_key(p, path, "state_machine");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "state_machine")))
                KEEP(parse_state_machine(c, it, p, &tc->sm));

        sg_cfg_path_key(p, path, "snapshot");
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "snapshot")))
                KEEP(sg_cfg_parse_snapshot(c, it, p, tc));

        /* Cross-field rules (semantics §2, §3b, §4), on the values read (a
         * wrong one kept its default); the first one that fails is said,
         * the others would mostly repeat its cause. The snapshot rules come
         * first: their message names the snapshot, which is why the user
         * asked for strict ordering. */
        if (tc->snapshot.source != SG_SNAP_NONE) {
                sg_cfg_path_key(p, path, "snapshot");
                if (tc->order_mode != SG_ORDER_STRICT)
                        return sg_cfg_fail(c, p,
                                    "needs ordering.mode \"strict\" (now "
                                    "\"%s\"): only strict ordering waits for "
                                    "a missing version; latest_wins and none "
                                    "never park, so no gap is left to resolve "
                                    "(semantics §3b, §4)",
                                    sg_cfg_mode_names[tc->order_mode]);
                if (tc->version.kind == SG_SRC_NONE ||
                    tc->aggregate.kind == SG_SRC_NONE)
                        return sg_cfg_fail(c, p,
                                    "needs envelope.%s: a snapshot is fetched "
                                    "per aggregate and judged by its version "
                                    "(semantics §4)",
                                    tc->version.kind == SG_SRC_NONE
                                            ? "version"
                                            : "aggregate");
        }
        if (tc->order_mode != SG_ORDER_NONE) {
                bool explicit_mode =
                        ord && cJSON_GetObjectItemCaseSensitive(ord, "mode");
                const char *need = tc->version.kind == SG_SRC_NONE ? "version"
                                   : tc->aggregate.kind == SG_SRC_NONE
                                           ? "aggregate"
                                           : NULL;
                if (need) {
                        sg_cfg_path_key(p, path, "ordering.mode");
                        return sg_cfg_fail(c, p,
                                    "\"%s\"%s needs envelope.%s; a dedup-only "
                                    "topic sets ordering.mode \"none\"",
                                    sg_cfg_mode_names[tc->order_mode],
                                    explicit_mode ? "" : " (the default)",
                                    need);
                }
        }
        if (tc->sm.enabled) {
                sg_cfg_path_key(p, path, "state_machine");
                if (tc->type.kind == SG_SRC_NONE)
                        return sg_cfg_fail(c, p,
                                    "needs envelope.type (the event type "
                                    "selects the transition)");
                if (tc->order_mode == SG_ORDER_NONE)
                        return sg_cfg_fail(c, p,
                                    "needs ordering.mode \"strict\" or "
                                    "\"latest_wins\" (mode \"none\" applies "
                                    "every record; semantics §3b)");
        }
        return errors_since(c, since);
}

/** A topic whose required names were read (the cross-topic rules skip the
 *  others: their errors were reported). */
static bool sg_cfg_topic_named(const sg_topic_config_t *tc) {
        return tc->name && tc->output_topic && tc->dlq_topic;
}

/**
 * Names what @p name already is among the topics of @p conf ("an input
 * topic (topics.X)", "topics.X.output_topic", ...), written into @p buf;
 * NULL when nothing. @p self is the index of the topic whose snapshot topic
 * @p name is. A request topic may be shared by input topics (seqgate only
 * produces to it); a reply topic is consumed by seqgate and routes a reply
 * to its input topic, so it must not be another topic's request or reply
 * topic.
 */
static const char *snapshot_topic_clash(const sg_config_t *conf, size_t self,
                                        bool is_reply, const char *name,
                                        char *buf, size_t size) {
        for (size_t j = 0; j < conf->topic_cnt; j++) {
                const sg_topic_config_t *o = &conf->topics[j];
                bool kafka = o->snapshot.source == SG_SNAP_KAFKA && j != self;
                const char *what = NULL;

                /* a topic whose names were not read had its errors said */
                if (!sg_cfg_topic_named(o))
                        continue;
                if (!strcmp(name, o->name)) {
                        snprintf(buf, size, "an input topic (topics.%s)",
                                 o->name);
                        return buf;
                }
                if (!strcmp(name, o->output_topic))
                        what = "output_topic";
                else if (!strcmp(name, o->dlq_topic))
                        what = "dlq_topic";
                else if (kafka && o->snapshot.reply_topic &&
                         !strcmp(name, o->snapshot.reply_topic))
                        what = "snapshot.reply_topic";
                else if (kafka && is_reply && o->snapshot.request_topic &&
                         !strcmp(name, o->snapshot.request_topic))
                        what = "snapshot.request_topic";
                if (what) {
                        snprintf(buf, size, "topics.%s.%s", o->name, what);
                        return buf;
                }
        }
        return NULL;
}

/**
 * Snapshot request and reply topics are topics of their own (snapshot refetch, semantics §4): a
 * reply topic that is also an input, output or DLQ topic would mix replies
 * with events, and a request topic that is one would hand requests to the
 * consumers of events.
 */
static sg_err_t sg_cfg_check_snapshot_topics(cfg_ctx_t *c, const sg_config_t *conf) {
        char p[SG_PATH_SIZE], tp[SG_PATH_SIZE], what[SG_PATH_SIZE + 32];
        size_t since = c->err_cnt;

        for (size_t i = 0; i < conf->topic_cnt; i++) {
                const sg_snapshot_config_t *sn = &conf->topics[i].snapshot;

                if (sn->source != SG_SNAP_KAFKA || !conf->topics[i].name)
                        continue;
                sg_cfg_path_key(tp, "topics", conf->topics[i].name);
                for (int r = 0; r < 2; r++) {
                        const char *name = r ? sn->reply_topic
                                             : sn->request_topic;
                        const char *clash =
                                name ? snapshot_topic_clash(conf, i, r == 1,
                                                            name, what,
                                                            sizeof(what))
                                     : NULL;
                        if (!clash)
                                continue;
                        sg_cfg_path_key(p, tp, r ? "snapshot.reply_topic"
                                          : "snapshot.request_topic");
                        sg_cfg_fail(c, p,
                             "\"%s\" is also %s; snapshot request and reply "
                             "topics must be topics of their own",
                             name, clash);
                }
        }
        return errors_since(c, since);
}

static sg_err_t sg_cfg_parse_topics(cfg_ctx_t *c, const cJSON *root,
                             sg_config_t *conf) {
        char p[SG_PATH_SIZE];
        const cJSON *topics = cJSON_GetObjectItemCaseSensitive(root, "topics");
        size_t n = 0, i = 0, since = c->err_cnt;
        sg_err_t err;

        if (!topics)
                return sg_cfg_fail(c, "topics", "required key is missing (an object "
                                         "of input topic name -> settings)");
        if ((err = sg_cfg_expect_object(c, topics, "topics")))
                return err;
        KEEP(sg_cfg_check_keys(c, topics, "topics", NULL));
        for (const cJSON *it = topics->child; it; it = it->next)
                n++;
        if (n == 0)
                return sg_cfg_fail(c, "topics", "must name at least one input topic");
        if (!(conf->topics = calloc(n, sizeof(*conf->topics))))
                return sg_cfg_nomem(c);
        conf->topic_cnt = n;
        for (const cJSON *it = topics->child; it; it = it->next, i++) {
                sg_cfg_path_key(p, "topics", it->string);
                KEEP(sg_cfg_check_topic_name(c, p, it->string));
                KEEP(parse_topic(c, it, p, &conf->topics[i]));
        }

        /* An output or DLQ topic that is also an input topic would feed
         * seqgate its own output. */
        for (i = 0; i < n; i++) {
                const sg_topic_config_t *tc = &conf->topics[i];
                if (!sg_cfg_topic_named(tc))
                        continue;
                for (size_t j = 0; j < n; j++) {
                        const char *in = conf->topics[j].name;
                        const char *which =
                                !in                           ? NULL
                                : !strcmp(tc->output_topic, in) ? "output_topic"
                                : !strcmp(tc->dlq_topic, in)  ? "dlq_topic"
                                                              : NULL;
                        if (!which)
                                continue;
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_key(tp, "topics", tc->name);
                        sg_cfg_path_key(p, tp, which);
                        sg_cfg_fail(c, p,
                             "\"%s\" is also an input topic; seqgate would "
                             "read its own output",
                             in);
                        break;
                }
        }
        /* Default changelog names, as Kafka Streams names its changelogs:
         * <application (group) id>-<store>-changelog. Without a group id
         * (reported) there is no default. */
        for (i = 0; conf->group_id && i < n; i++) {
                sg_topic_config_t *tc = &conf->topics[i];
                if (tc->changelog_topic || !tc->name)
                        continue;
                size_t len = strlen(conf->group_id) + strlen(tc->name) + 12;
                if (!(tc->changelog_topic = malloc(len)))
                        return sg_cfg_nomem(c);
                snprintf(tc->changelog_topic, len, "%s-%s-changelog",
                         conf->group_id, tc->name);
                /* both guarantees keep a changelog (semantics §6) */
                if (!sg_cfg_valid_topic_name(tc->changelog_topic)) {
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_key(tp, "topics", tc->name);
                        sg_cfg_path_key(p, tp, "changelog_topic");
                        sg_cfg_fail(c, p,
                             "the default name \"%.60s...\" is not a valid "
                             "topic name; set changelog_topic",
                             tc->changelog_topic);
                }
        }
        /* each pair once, at the first of the two */
        for (i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        if (!conf->topics[i].changelog_topic ||
                            !conf->topics[j].changelog_topic ||
                            strcmp(conf->topics[i].changelog_topic,
                                   conf->topics[j].changelog_topic))
                                continue;
                        char tp[SG_PATH_SIZE];
                        sg_cfg_path_key(tp, "topics", conf->topics[i].name);
                        sg_cfg_path_key(p, tp, "changelog_topic");
                        sg_cfg_fail(c, p,
                             "\"%s\" is also the changelog of topic \"%s\"; "
                             "each input topic needs its own",
                             conf->topics[i].changelog_topic,
                             conf->topics[j].name);
                }
        KEEP(sg_cfg_check_snapshot_topics(c, conf));
        return errors_since(c, since);
}

/* ------------------------------------------------------------------------ */
/* Root                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const ROOT_KEYS[] = {
        "$schema", "instance_id", "data_dir", "guarantee", "kafka",
        "kafka_consumer", "kafka_producer", "store", "batch",
        "stats_interval_ms", "delivery_timeout_ms", "sweep_max_per_batch",
        "deadline_max_per_batch", "pause_retry_ms", "broker_retry_timeout_ms",
        "topics", NULL};
static const char *const STORE_KEYS[] = {"map_size_bytes", "map_growth_bytes",
                                         NULL};
static const char *const BATCH_KEYS[] = {"max_records", "max_ms", NULL};
static sg_err_t parse_root(cfg_ctx_t *c, const cJSON *root, sg_config_t *conf) {
        const cJSON *it;

        if (!cJSON_IsObject(root))
                return sg_cfg_fail(c, "(root)", "must be a JSON object");
        KEEP(sg_cfg_check_keys(c, root, "", ROOT_KEYS));

        if ((it = cJSON_GetObjectItemCaseSensitive(root, "$schema")) &&
            !cJSON_IsString(it))
                sg_cfg_fail(c, "$schema", "must be a string");
        KEEP(sg_cfg_read(c, root, "", SECT_ROOT, conf));
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

        KEEP(sg_cfg_parse_topics(c, root, conf));
        if (c->err_cnt > 0)
                return SG_ERR_CONFIG;
        if (c->eos) {
                size_t len = strlen(conf->group_id) +
                             strlen(conf->instance_id) + 2;
                if (!(conf->transactional_id = malloc(len)))
                        return sg_cfg_nomem(c);
                snprintf(conf->transactional_id, len, "%s-%s", conf->group_id,
                         conf->instance_id);
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

sg_err_t sg_config_parse(const char *json, sg_config_t **confp, char *errstr,
                         size_t errstr_size) {
        cfg_ctx_t c = {.errstr = errstr, .errstr_size = errstr_size};
        const char *end = NULL;
        sg_config_t *conf;
        cJSON *root;
        sg_err_t err;

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
                sg_cfg_set_errstr(errstr, errstr_size,
                           "(root): not valid JSON: syntax error at line %zu, "
                           "column %zu",
                           line, col);
                return SG_ERR_CONFIG;
        }

        if (!(conf = calloc(1, sizeof(*conf)))) {
                cJSON_Delete(root);
                return sg_cfg_nomem(&c);
        }
        /* the defaults of config.h, from the key table; exactly_once is
         * the default (semantics §6): the production guarantee */
        static const cfg_sect_t sects[] = {SECT_ROOT, SECT_STORE, SECT_BATCH,
                                           SECT_ROOT_LIMITS};
        err = SG_OK;
        for (size_t i = 0; !err && i < sizeof(sects) / sizeof(sects[0]); i++)
                err = sg_cfg_defaults(&c, sects[i], conf);
        if (!err)
                err = parse_root(&c, root, conf);
        cJSON_Delete(root);
        if (err) {
                sg_config_destroy(conf);
                return err;
        }
        *confp = conf;
        return SG_OK;
}

sg_err_t sg_config_load(const char *path, sg_config_t **confp, char *errstr,
                        size_t errstr_size) {
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
                sg_cfg_set_errstr(errstr, errstr_size, "%s: cannot open: %s", path,
                           strerror(errno));
                return SG_ERR_IO;
        }
        if (!(buf = malloc(SG_CONFIG_MAX_FILE + 1))) {
                fclose(fp);
                sg_cfg_set_errstr(errstr, errstr_size, "out of memory");
                return SG_ERR_NOMEM;
        }
        len = fread(buf, 1, SG_CONFIG_MAX_FILE + 1, fp);
        if (ferror(fp)) {
                sg_cfg_set_errstr(errstr, errstr_size, "%s: cannot read: %s", path,
                           strerror(errno));
                fclose(fp);
                free(buf);
                return SG_ERR_IO;
        }
        fclose(fp);
        if (len > SG_CONFIG_MAX_FILE) {
                free(buf);
                sg_cfg_set_errstr(errstr, errstr_size,
                           "%s: larger than %d bytes; not a configuration "
                           "file?",
                           path, SG_CONFIG_MAX_FILE);
                return SG_ERR_CONFIG;
        }
        buf[len] = '\0';
        if (strlen(buf) != len) {
                free(buf);
                sg_cfg_set_errstr(errstr, errstr_size,
                           "%s: contains a NUL byte; not a JSON text", path);
                return SG_ERR_CONFIG;
        }
        err = sg_config_parse(buf, confp, errstr, errstr_size);
        free(buf);
        return err;
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
        free(conf->data_dir);
        kv_free(conf->kafka, conf->kafka_cnt);
        kv_free(conf->kafka_consumer, conf->kafka_consumer_cnt);
        kv_free(conf->kafka_producer, conf->kafka_producer_cnt);
        for (size_t i = 0; conf->topics && i < conf->topic_cnt; i++)
                topic_free(&conf->topics[i]);
        free(conf->topics);
        free(conf);
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
