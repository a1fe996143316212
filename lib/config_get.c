/*
 * config_get.c — what every configuration parser reads with (config_int.h):
 * errors that name their key's dotted JSON path (sg_cfg_fail, one line per
 * error, values quoted printable and secrets never), the paths themselves,
 * the typed getters (strings, exact integers from the number's text, enums,
 * checked keys), field sources ("key", "header:NAME", a JSON pointer,
 * "ce:ATTR"), topic names and the secret property names. The parsers of
 * each block (config.c's root, config_topic.c, config_kafka.c, ...) call
 * these; config.c's header says how a configuration is read.
 */
#include "config_int.h"

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
void sg_cfg_put_clean(char *dst, size_t dst_size, const char *src) {
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
        sg_cfg_put_clean(errstr, errstr_size, raw);
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
        /* each error one clean line (sg_cfg_put_clean), joined by '\n' */
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
                sg_cfg_put_clean(line, sizeof(line), raw);
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
        sg_cfg_put_clean(o, left, raw);
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

/** The allowed key that @p key names without its unit suffix ("ttl" for
 *  "ttl_ms"), else the closest one (closest_key), else NULL. */
static const char *near_key(const char *key, const char *const *allowed) {
        static const char *const units[] = {"_ms", "_bytes", NULL};
        size_t n = strlen(key);
        for (const char *const *a = allowed; *a; a++)
                for (size_t u = 0; units[u]; u++)
                        if (!strncmp(*a, key, n) && !strcmp(*a + n, units[u]))
                                return *a;
        return closest_key(key, allowed);
}

/** The key of block @p b that @p key names (itself; @p near: or a near
 *  one, near_key), NULL when none or @p b is the block @p here. */
static const char *key_in(const char *key, const cfg_block_t *b,
                          const char *const *here, bool near) {
        if (b->keys == here)
                return NULL;
        if (!near)
                return in_list(key, b->keys) ? key : NULL;
        return near_key(key, b->keys);
}

/** The path of the input topic that block @p here (its keys) at @p path
 *  is in ("topics.orders" for "topics.orders.dedup"), into @p topic;
 *  left as it is outside any topic. */
static void topic_of(const char *const *here, const char *path, char *topic,
                     size_t size) {
        static const char pat[] = "topics.*";
        const size_t pl = sizeof(pat) - 1, n = strlen(path);

        for (const cfg_block_t *b = sg_cfg_topic_places; here && b->name; b++) {
                const char *tail = b->name + pl; /* ".dedup" or "" */
                size_t tl = strlen(tail);
                if (b->keys == here && n > tl && !strcmp(path + n - tl, tail))
                        snprintf(topic, size, "%.*s", (int)(n - tl), path);
        }
}

bool sg_cfg_key_home(const char *key, const char *const *here, const char *path,
                     bool near, char *buf, size_t size, bool *root) {
        static const cfg_block_t *const trees[] = {sg_cfg_root_places,
                                                   sg_cfg_topic_places};
        char topic[SG_PATH_SIZE] = "topics.<topic>";
        size_t found = 0, off;

        buf[0] = '\0';
        if (root)
                *root = false;
        topic_of(here, path, topic, sizeof(topic));
        /* exact first; a near one only when no block has the key itself */
        for (int pass = 0; pass < 1 + near && !found; pass++)
                for (size_t t = 0; t < 2; t++)
                        for (const cfg_block_t *b = trees[t]; b->name; b++) {
                                const char *k = key_in(key, b, here, pass);
                                if (!k || found == 2)
                                        continue;
                                off = strlen(buf);
                                if (found++ && off < size)
                                        off += (size_t)snprintf(
                                                buf + off, size - off, " or ");
                                if (off >= size)
                                        continue;
                                if (!*b->name) {
                                        if (found == 1 && root)
                                                *root = true;
                                        snprintf(buf + off, size - off,
                                                 "the root key \"%s\" (the "
                                                 "top level of the file)",
                                                 k);
                                } else if (!strncmp(b->name, "topics.*", 8)) {
                                        snprintf(buf + off, size - off,
                                                 "%s%s.%s", topic, b->name + 8,
                                                 k);
                                } else {
                                        snprintf(buf + off, size - off, "%s.%s",
                                                 b->name, k);
                                }
                        }
        return found > 0;
}

/** A librdkafka property's place, "kafka.NAME (a librdkafka property)",
 *  when @p key is one (a scratch configuration knows the name; nothing is
 *  connected), for a key written outside the librdkafka blocks. */
static bool rdkafka_home(const char *key, char *buf, size_t size) {
        char rkerr[256];
        rd_kafka_conf_t *rk;
        /* librdkafka's names are dotted: one without a dot is seqgate's
         * or a typo (and a value is not tried for it) */
        if (!strchr(key, '.') || !(rk = rd_kafka_conf_new()))
                return false;
        /* plugin.library.paths would load libraries: never set here */
        bool known = strcmp(key, "plugin.library.paths") &&
                     rd_kafka_conf_set(rk, key, "", rkerr, sizeof(rkerr)) !=
                             RD_KAFKA_CONF_UNKNOWN;
        rd_kafka_conf_destroy(rk);
        if (known)
                snprintf(buf, size, "kafka.%s (a librdkafka property)", key);
        return known;
}

/**
 * A block of @p nested whose key @p key names, when it was meant inside
 * it: written beside the block ("gap_timeout_ms" for ordering's), its
 * path flattened ("dedup_ttl_ms") or dotted as one key ("dedup.ttl_ms"),
 * or a likely misspelling of one of those (closest_key's rule). Sets
 * *@p inner to the key as the block spells it; NULL: none.
 */
static const cfg_block_t *nested_key(const char *key, const cfg_block_t *nested,
                                     const char **inner) {
        for (; nested && nested->name; nested++) {
                size_t n = strlen(nested->name);
                const char *rest = key;
                if (!strncmp(key, nested->name, n) &&
                    (key[n] == '_' || key[n] == '.'))
                        rest = key + n + 1;
                /* an exact key is its own closest (0 edits) */
                if ((*inner = near_key(rest, nested->keys)))
                        return nested;
        }
        *inner = NULL;
        return NULL;
}

/**
 * Rejects unknown keys (listing @p allowed) and duplicate keys of @p obj.
 * cJSON keeps both members of a duplicate key; silently using one of them
 * would hide a mistake. An unknown key close to an allowed one (a likely
 * misspelling) is named with it ("did you mean"); one meant inside a block
 * of @p nested (NULL-terminated; NULL: none), such as "dedup_ttl_ms"
 * beside "dedup", is named with the key in that block.
 */
sg_err_t sg_cfg_check_keys_in(cfg_ctx_t *c, const cJSON *obj, const char *path,
                              const char *const *allowed,
                              const cfg_block_t *nested) {
        char p[SG_PATH_SIZE];
        char list[1024];
        size_t since = c->err_cnt;

        for (const cJSON *it = obj->child; it; it = it->next) {
                sg_cfg_path_key(p, path, it->string);
                if (allowed && !in_list(it->string, allowed)) {
                        const char *near = near_key(it->string, allowed);
                        const char *inner = NULL;
                        const cfg_block_t *b =
                                near ? NULL
                                     : nested_key(it->string, nested, &inner);
                        char home[2 * SG_PATH_SIZE];
                        if (near)
                                sg_cfg_fail(c, p,
                                            "unknown key; did you mean "
                                            "\"%s\"? allowed: %s",
                                            near,
                                            sg_cfg_join(list, sizeof(list),
                                                        allowed));
                        else if (b)
                                sg_cfg_fail(c, p,
                                            "unknown key; did you mean "
                                            "\"%s\" inside \"%s\" "
                                            "(%s.%s)? allowed: %s",
                                            inner, b->name, b->name, inner,
                                            sg_cfg_join(list, sizeof(list),
                                                        allowed));
                        else if (sg_cfg_key_home(it->string, allowed, path,
                                                 true, home, sizeof(home),
                                                 NULL) ||
                                 rdkafka_home(it->string, home, sizeof(home)))
                                sg_cfg_fail(c, p,
                                            "unknown key; did you mean %s? "
                                            "allowed: %s",
                                            home,
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

sg_err_t sg_cfg_check_keys(cfg_ctx_t *c, const cJSON *obj, const char *path,
                           const char *const *allowed) {
        return sg_cfg_check_keys_in(c, obj, path, allowed, NULL);
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
