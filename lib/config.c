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
 * Files: this one holds the error reporting, paths, typed getters, field
 * sources and the root; config_env.c the interpolation; config_keys.c the table of scalar keys (defaults,
 * bounds, docs) and its reader; config_kafka.c the librdkafka blocks;
 * config_topic.c the topics; config_snapshot.c the snapshot blocks. They
 * share config_int.h.
 */
#include "config_int.h"

#include "envelope.h" /* sg_utf8_valid */
#include "http.h"     /* sg_http_address_parse */

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

/** Largest configuration file sg_config_load() reads. */
#define SG_CONFIG_MAX_FILE (16 * 1024 * 1024)

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
                bool plain =
                        c >= 0x20 && c != 0x7f &&
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

void sg_cfg_set_errstr(char *errstr, size_t errstr_size, const char *fmt, ...) {
        char raw[2048];
        va_list ap;

        if (!errstr || errstr_size == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        put_clean(errstr, errstr_size, raw);
}

/** Appends the line "PATH: message" to the errors (a '\n' before it when
 *  it is not the first; cut at the end of errstr, always terminated) and
 *  returns SG_ERR_CONFIG. */
sg_err_t sg_cfg_fail(cfg_ctx_t *c, const char *path, const char *fmt, ...) {
        char raw[2048], line[2048];
        va_list ap;
        int n;

        c->err_cnt++;
        /* a value whose ${VAR} failed: that error was said, not its
         * consequences */
        if (sg_cfg_env_failed(c, path))
                return SG_ERR_CONFIG;
        /* each error one clean line (put_clean), joined by '\n' */
        n = snprintf(raw, sizeof(raw), "%s: ", path);
        if (n >= 0 && (size_t)n < sizeof(raw)) {
                va_start(ap, fmt);
                vsnprintf(raw + n, sizeof(raw) - (size_t)n, fmt, ap);
                va_end(ap);
        }
        /* what came from the environment is redacted like a secret */
        for (size_t i = 0; i < c->env.redact_cnt; i++) {
                char *r = sg_config_redact_text(raw, c->env.redact[i]);
                if (r) {
                        snprintf(raw, sizeof(raw), "%s", r);
                        free(r);
                }
        }
        if (c->list) {
                put_clean(line, sizeof(line), raw);
                if (c->list->cnt < SG_CONFIG_ERRORS_MAX &&
                    (c->list->lines[c->list->cnt] = strdup(line)))
                        c->list->cnt++;
                c->list->total++;
        }
        if (!c->errstr || c->errstr_size == 0 ||
            c->err_len + 1 >= c->errstr_size)
                return SG_ERR_CONFIG;
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

sg_err_t sg_cfg_nomem(cfg_ctx_t *c) {
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
void sg_cfg_path_key(char *buf, const char *parent, const char *key) {
        size_t off = 0;

        buf[0] = '\0';
        if (parent && *parent) {
                path_append(buf, &off, parent);
                path_append(buf, &off, ".");
        }
        path_append(buf, &off, key);
}

void sg_cfg_path_topic(char *buf, const char *name) {
        size_t off = 0;

        buf[0] = '\0';
        if (!strpbrk(name, ".[]\"")) {
                sg_cfg_path_key(buf, "topics", name);
                return;
        }
        path_append(buf, &off, "topics[\"");
        path_append(buf, &off, name);
        path_append(buf, &off, "\"]");
}

/** buf = parent "[" idx "]". */
void sg_cfg_path_idx(char *buf, const char *parent, size_t idx) {
        char num[32];
        size_t off = 0;

        buf[0] = '\0';
        snprintf(num, sizeof(num), "[%zu]", idx);
        path_append(buf, &off, parent);
        path_append(buf, &off, num);
}

/** Joins a NULL-terminated list as "a, b, c" into buf. */
const char *sg_cfg_join(char *buf, size_t size, const char *const *list) {
        size_t off = 0;

        buf[0] = '\0';
        for (size_t i = 0; list[i]; i++) {
                int n = snprintf(buf + off, size - off, "%s%s", i ? ", " : "",
                                 list[i]);
                if (n < 0 || (size_t)n >= size - off)
                        break;
                off += (size_t)n;
        }
        return buf;
}

/** As sg_cfg_join() for a counted array of strings. */
const char *sg_cfg_join_n(char *buf, size_t size, char *const *list,
                          size_t cnt) {
        size_t off = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < cnt; i++) {
                int n = snprintf(buf + off, size - off, "%s%s", i ? ", " : "",
                                 list[i] ? list[i] : "");
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

sg_err_t sg_cfg_expect_object(cfg_ctx_t *c, const cJSON *item,
                              const char *path) {
        if (!cJSON_IsObject(item))
                return sg_cfg_fail(c, path, "must be a JSON object");
        return SG_OK;
}

/** Levenshtein distance of @p a and @p b, up to 64 bytes each (longer:
 *  SIZE_MAX, never "close"). */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), row[65];
        if (la > 64 || lb > 64)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best = diag + (a[i - 1] != b[j - 1]);
                        if (up + 1 < best)
                                best = up + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

/** The allowed key closest to @p key when it is a likely misspelling (at
 *  most 2 edits, and fewer than a third of its length), else NULL. */
static const char *closest_key(const char *key, const char *const *allowed) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX;
        for (; *allowed; allowed++) {
                size_t d = edit_distance(key, *allowed);
                if (d < best_d) {
                        best_d = d;
                        best = *allowed;
                }
        }
        return best_d <= 2 && best_d * 3 < strlen(key) ? best : NULL;
}

/**
 * Rejects unknown keys (listing @p allowed) and duplicate keys of @p obj.
 * cJSON keeps both members of a duplicate key; silently using one of them
 * would hide a mistake.
 */
sg_err_t sg_cfg_check_keys(cfg_ctx_t *c, const cJSON *obj, const char *path,
                           const char *const *allowed) {
        char p[SG_PATH_SIZE];
        char list[1024];
        size_t since = c->err_cnt;

        for (const cJSON *it = obj->child; it; it = it->next) {
                sg_cfg_path_key(p, path, it->string);
                if (allowed && !in_list(it->string, allowed)) {
                        const char *near = closest_key(it->string, allowed);
                        if (near)
                                sg_cfg_fail(c, p,
                                            "unknown key; did you mean "
                                            "\"%s\"? allowed: %s",
                                            near,
                                            sg_cfg_join(list, sizeof(list),
                                                        allowed));
                        else
                                sg_cfg_fail(c, p, "unknown key; allowed: %s",
                                            sg_cfg_join(list, sizeof(list),
                                                        allowed));
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
sg_err_t sg_cfg_get_str(cfg_ctx_t *c, const cJSON *obj, const char *path,
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
sg_err_t sg_cfg_get_str_dup(cfg_ctx_t *c, const cJSON *obj, const char *path,
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

/** Error text for an integer out of [min, max]; @p why is appended
 *  ("" none). */
static sg_err_t int_range_err(cfg_ctx_t *c, const char *path, int64_t min,
                              int64_t max, const char *why) {
        if (max == SG_JSON_INT_MAX)
                return sg_cfg_fail(c, path,
                                   "must be an integer >= %" PRId64 "%s", min,
                                   why);
        return sg_cfg_fail(
                c, path, "must be an integer from %" PRId64 " to %" PRId64 "%s",
                min, max, why);
}

/** The hint for a non-number @p it at key @p key: a duration key ("_ms")
 *  given a string ("5s") is told its unit. */
static const char *not_number_why(const char *key, const cJSON *it) {
        size_t n = strlen(key);
        if (cJSON_IsString(it) && n > 3 && !strcmp(key + n - 3, "_ms"))
                return ": a number of milliseconds, not a string with a "
                       "unit (\"5s\" is 5000)";
        return "";
}

/** What number_text_int() found. */
typedef enum num_kind {
        NUM_INT,      /* an integer in [-2^53, 2^53]: *out holds it */
        NUM_FRACTION, /* not an integer */
        NUM_TOO_BIG,  /* above 2^53 */
        NUM_TOO_SMALL /* below -2^53 */
} num_kind_t;

/**
 * Judges JSON number text @p t (as written: sign, digits, fraction,
 * exponent) exactly, without going through a double, which would make
 * 9007199254740993 equal to 9007199254740992. The magnitude is judged
 * before the fraction, as the double it replaces did ("1.5e300" is too
 * big, not a fraction).
 */
static num_kind_t number_text_int(const char *t, int64_t *out) {
        char digits[64];
        size_t nd = 0, lost = 0; /* digits kept; nonzero digits dropped */
        long point = 0, exp = 0; /* digits before the decimal point */
        bool neg = *t == '-', frac = false, exp_neg = false;

        t += neg;
        for (; (*t >= '0' && *t <= '9') || *t == '.'; t++) {
                if (*t == '.') {
                        frac = true;
                        continue;
                }
                if (nd == 0 && *t == '0') { /* leading zeros */
                        point -= frac;
                        continue;
                }
                if (nd < sizeof(digits))
                        digits[nd++] = *t;
                else
                        lost += *t != '0';
                point += !frac;
        }
        if (*t == 'e' || *t == 'E') {
                t++;
                exp_neg = *t == '-';
                t += *t == '-' || *t == '+';
                for (; *t >= '0' && *t <= '9'; t++)
                        if (exp < 100000)
                                exp = exp * 10 + (*t - '0');
        }
        point += exp_neg ? -exp : exp;
        while (nd > 0 && digits[nd - 1] == '0' && lost == 0)
                nd--; /* trailing zeros say nothing */
        if (nd == 0) {
                *out = 0;
                return NUM_INT;
        }
        if (point > 16) /* >= 10^16 > 2^53 */
                return neg ? NUM_TOO_SMALL : NUM_TOO_BIG;
        uint64_t v = 0;
        for (long i = 0; i < point; i++)
                v = v * 10 + (uint64_t)(i < (long)nd ? digits[i] - '0' : 0);
        if (v > (uint64_t)SG_JSON_INT_MAX)
                return neg ? NUM_TOO_SMALL : NUM_TOO_BIG;
        if (point < (long)nd || lost)
                return NUM_FRACTION;
        *out = neg ? -(int64_t)v : (int64_t)v;
        return NUM_INT;
}

/**
 * Reads an integral JSON number in [min, max] (max <= 2^53: the most a
 * double holds exactly, RFC 8259 §6, so that every JSON reader of the file
 * sees the same value). The number's text (sg_cfg_number_texts()) is read
 * exactly; a number without one is judged by its double. Absent: *out
 * unchanged.
 */
sg_err_t sg_cfg_get_int(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, int64_t min, int64_t max,
                        int64_t *out) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
        num_kind_t kind;
        int64_t v = 0;
        double d;

        sg_cfg_path_key(p, path, key);
        if (!it)
                return SG_OK;
        if (!cJSON_IsNumber(it))
                return int_range_err(c, p, min, max, not_number_why(key, it));
        d = it->valuedouble;
        if (!isfinite(d))
                return int_range_err(c, p, min, max, "");
        if (it->valuestring) {
                kind = number_text_int(it->valuestring, &v);
        } else if (d > (double)SG_JSON_INT_MAX) {
                kind = NUM_TOO_BIG;
        } else if (d < -(double)SG_JSON_INT_MAX) {
                kind = NUM_TOO_SMALL;
        } else {
                /* In range for int64_t now; a fraction does not survive
                 * the cast. */
                v = (int64_t)d;
                kind = (double)v == d ? NUM_INT : NUM_FRACTION;
        }
        if (kind == NUM_TOO_BIG)
                return int_range_err(c, p, min, max,
                                     "; JSON numbers above 2^53 "
                                     "(9007199254740992) are not exact");
        if (kind != NUM_INT || v < min || v > max)
                return int_range_err(c, p, min, max, "");
        *out = v;
        return SG_OK;
}

/** The next number token of JSON text at *@p pos, its length in *@p len;
 *  NULL at the end. Strings (keys and values) are skipped. */
static const char *next_number(const char **pos, size_t *len) {
        const char *s = *pos;

        while (*s) {
                if (*s == '"') {
                        for (s++; *s && *s != '"'; s++)
                                if (*s == '\\' && s[1])
                                        s++;
                        s += *s == '"';
                } else if (*s == '-' || (*s >= '0' && *s <= '9')) {
                        const char *b = s;
                        /* the characters cJSON's parse_number() takes */
                        while (*s && strchr("0123456789+-eE.", *s))
                                s++;
                        *len = (size_t)(s - b);
                        *pos = s;
                        return b;
                } else {
                        s++;
                }
        }
        *pos = s;
        return NULL;
}

/* Gives each number node of @p node and its siblings, in document order,
 * the next number text at *@p pos. */
static sg_err_t number_texts(cJSON *node, const char **pos) {
        for (; node; node = node->next) {
                if (cJSON_IsNumber(node)) {
                        size_t len = 0;
                        const char *b = next_number(pos, &len);
                        if (b && !(node->valuestring = strndup(b, len)))
                                return SG_ERR_NOMEM;
                } else if (node->child) {
                        sg_err_t err = number_texts(node->child, pos);
                        if (err)
                                return err;
                }
        }
        return SG_OK;
}

sg_err_t sg_cfg_number_texts(cJSON *root, const char *json) {
        return number_texts(root, &json);
}

/**
 * Reads a string member that must be one of @p names; *out = its index.
 * Absent: *out unchanged.
 */
sg_err_t sg_cfg_get_enum(cfg_ctx_t *c, const cJSON *obj, const char *path,
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
                           sg_cfg_join(list, sizeof(list), names),
                           note ? note : "");
}

/* ------------------------------------------------------------------------ */
/* Field sources, topic names, secrets                                      */
/* ------------------------------------------------------------------------ */

/** RFC 6901 §3: "/" then reference tokens where '~' is only "~0" or "~1". */
bool sg_cfg_valid_pointer(const char *p) {
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
sg_err_t sg_field_src_parse(const char *text, sg_field_src_t *out, char *errstr,
                            size_t errstr_size) {
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
                        sg_cfg_set_errstr(
                                errstr, errstr_size,
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
                        sg_cfg_set_errstr(
                                errstr, errstr_size,
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

void sg_cfg_src_clear(sg_field_src_t *src) {
        free(src->name);
        src->name = NULL;
        src->kind = SG_SRC_NONE;
}

/** Sets @p src to a built-in default ("key" or "ce:ATTR"). */
sg_err_t sg_cfg_src_default(cfg_ctx_t *c, sg_field_src_t *src,
                            sg_src_kind_t kind, const char *name) {
        sg_cfg_src_clear(src);
        if (name && !(src->name = strdup(name)))
                return sg_cfg_nomem(c);
        src->kind = kind;
        return SG_OK;
}

/** Parses a field source string at @p path into *src (replacing it). */
sg_err_t sg_cfg_src_from_json(cfg_ctx_t *c, const cJSON *it, const char *path,
                              sg_field_src_t *src) {
        char detail[512];
        sg_field_src_t tmp;
        sg_err_t err;

        if (!cJSON_IsString(it))
                return sg_cfg_fail(c, path, "must be a string; allowed: %s",
                                   SRC_FORMS);
        err = sg_field_src_parse(it->valuestring, &tmp, detail, sizeof(detail));
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
bool sg_cfg_valid_topic_name(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 249 || !strcmp(s, ".") || !strcmp(s, ".."))
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' &&
                    *s != '-')
                        return false;
        return true;
}

sg_err_t sg_cfg_check_topic_name(cfg_ctx_t *c, const char *path,
                                 const char *name) {
        if (!sg_cfg_valid_topic_name(name))
                return sg_cfg_fail(
                        c, path,
                        "\"%.*s\" is not a valid Kafka topic name; "
                        "allowed: 1 to 249 characters of a-z, A-Z, 0-9, "
                        "'.', '_', '-', other than \".\" and \"..\"",
                        SG_QUOTE_MAX, name);
        return SG_OK;
}

/** Case-insensitive strstr() (ASCII). */
bool sg_cfg_contains_ci(const char *hay, const char *needle) {
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

int64_t sg_config_batch_ms(const sg_config_t *conf) {
        int64_t ms = conf->batch_max_ms > 0 ? conf->batch_max_ms : 0;
        int64_t ci = conf->commit_interval_ms;
        if (conf->guarantee == SG_GUARANTEE_EXACTLY_ONCE && ci > 0 && ci < ms)
                ms = ci;
        return ms;
}

bool sg_config_is_secret(const char *name) {
        if (!name)
                return false;
        return sg_cfg_contains_ci(name, "password") ||
               sg_cfg_contains_ci(name, "secret") ||
               sg_cfg_contains_ci(name, ".pem") ||
               sg_cfg_contains_ci(name, "sasl.oauthbearer.config");
}

/**
 * Reads a field source member that may be JSON null (= not configured) when
 * @p nullable. Absent: *src keeps its default.
 */
sg_err_t sg_cfg_get_src(cfg_ctx_t *c, const cJSON *obj, const char *path,
                        const char *key, bool nullable, sg_field_src_t *src) {
        char p[SG_PATH_SIZE];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        sg_cfg_path_key(p, path, key);
        if (!it)
                return SG_OK;
        if (cJSON_IsNull(it)) {
                if (!nullable)
                        return sg_cfg_fail(c, p,
                                           "must not be null; allowed: %s",
                                           SRC_FORMS);
                sg_cfg_src_clear(src);
                return SG_OK;
        }
        return sg_cfg_src_from_json(c, it, p, src);
}

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
        put_clean(line, sizeof(line), raw);
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
