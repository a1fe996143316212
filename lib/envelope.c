/*
 * envelope.c — reads the idempotency key, aggregate, version, type and
 * digest out of one Kafka record (semantics §2; contract in envelope.h).
 *
 * This runs once per consumed record, so it is written for the hot path:
 *  - the record value is parsed as JSON at most once, and only when
 *    something needs it (structured CloudEvents, a JSON Pointer source, a
 *    digest_pointer, or the lenient structured-mode probe when a record has
 *    neither a content-type nor a ce_specversion header);
 *  - field values are borrowed from the record or the parsed tree until they
 *    pass validation; only the id, aggregate and type are copied out;
 *  - the idempotency key encoding is built in a stack buffer unless it is
 *    unusually long.
 *
 * Every rejection is SG_ERR_INVALID with a short detail that names the field
 * (id, scope[N], aggregate id, version, type, digest) and where it was read
 * from (ce_id header, record key, JSON Pointer /a/b, ...). Input bytes are
 * quoted in at most SNIP_MAX characters and non-printable bytes are escaped
 * as \xNN, so a 1 MB field or binary garbage never ends up in a log line or
 * a DLQ header.
 *
 * Rules come from: CloudEvents core spec v1.0 §3.1 (required attributes),
 * CloudEvents Kafka protocol binding v1.0 §3 (content modes, partitionkey),
 * RFC 6901 (JSON Pointer), RFC 3629 (UTF-8), semantics §2 (version text,
 * length-prefixed key, digest).
 */
#include "envelope.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SNIP_MAX 40          /* most characters of input quoted in a detail */
#define NAME_MAX_QUOTE 32    /* most characters of a configured name quoted */
#define DEFAULT_MAX_FIELD 1024
#define JSON_MAX_SAFE_INT 9007199254740992.0 /* 2^53 */

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static sg_err_t fail(char *errstr, size_t errstr_size, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;

static sg_err_t fail(char *errstr, size_t errstr_size, const char *fmt, ...)
{
        if (errstr && errstr_size > 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(errstr, errstr_size, fmt, ap);
                va_end(ap);
        }
        return SG_ERR_INVALID;
}

/*
 * Quotes @p s[0..len) into @p out as printable ASCII, escaping every other
 * byte (and '"', '\\') as \xNN, in at most @p max output characters, and
 * appends "..." when the input was cut. @p out must hold max + 4 bytes.
 */
static const char *snip(char *out, const void *s, size_t len, size_t max)
{
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

#define SNIP_BUF (SNIP_MAX + 4)

/* ------------------------------------------------------------------ */
/* SHA-256, UTF-8, version text                                          */
/* ------------------------------------------------------------------ */

/*
 * SHA-256 through OpenSSL EVP. The algorithm is fetched once per process
 * (an implicit fetch on every call takes a lock and a lookup: measurable on
 * the per-record path); pthread_once makes that thread-safe.
 */
static EVP_MD *sha256_fetched;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
        sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
#endif
}

static const EVP_MD *md_sha256(void)
{
        pthread_once(&sha256_once, sha256_fetch);
        return sha256_fetched ? sha256_fetched : EVP_sha256();
}

/* SHA-256 into @p out, reusing @p ctx when given (NULL: one-shot). False
 * only if libcrypto failed (allocation). */
static bool sha256_checked(EVP_MD_CTX *ctx, const void *data, size_t len,
                           unsigned char *out)
{
        static const unsigned char empty = 0;
        unsigned int olen = 0;

        if (!data)
                data = &empty; /* EVP wants a pointer even for 0 bytes */
        if (!ctx)
                return EVP_Digest(data, len, out, &olen, md_sha256(), NULL) == 1 &&
                       olen == SG_HASH_LEN;
        return EVP_DigestInit_ex(ctx, md_sha256(), NULL) == 1 &&
               EVP_DigestUpdate(ctx, data, len) == 1 &&
               EVP_DigestFinal_ex(ctx, out, &olen) == 1 && olen == SG_HASH_LEN;
}

void sg_sha256(const void *data, size_t len, unsigned char *out)
{
        if (!sha256_checked(NULL, data, len, out))
                memset(out, 0, SG_HASH_LEN);
}

bool sg_utf8_valid(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        if (!s)
                return len == 0;
        /* RFC 3629 §4 (UTF8-octets ABNF). */
        while (i < len) {
                unsigned char c = p[i];
                unsigned char lo = 0x80, hi = 0xbf;
                size_t n;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xc2 && c <= 0xdf) {
                        n = 1;
                } else if (c >= 0xe0 && c <= 0xef) {
                        n = 2;
                        if (c == 0xe0)
                                lo = 0xa0; /* overlong */
                        else if (c == 0xed)
                                hi = 0x9f; /* surrogates U+D800..U+DFFF */
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3;
                        if (c == 0xf0)
                                lo = 0x90; /* overlong */
                        else if (c == 0xf4)
                                hi = 0x8f; /* above U+10FFFF */
                } else {
                        return false; /* C0, C1 (overlong), F5..FF, stray continuation */
                }
                if (len - i - 1 < n)
                        return false; /* truncated */
                if (p[i + 1] < lo || p[i + 1] > hi)
                        return false;
                for (size_t k = 2; k <= n; k++)
                        if (p[i + k] < 0x80 || p[i + k] > 0xbf)
                                return false;
                i += n + 1;
        }
        return true;
}

sg_err_t sg_version_parse(const char *s, size_t len, uint64_t *out)
{
        uint64_t v = 0;

        if (!s || len == 0)
                return SG_ERR_INVALID;
        for (size_t i = 0; i < len; i++) {
                unsigned d;
                if (s[i] < '0' || s[i] > '9')
                        return SG_ERR_INVALID;
                d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return SG_ERR_INVALID; /* overflow */
                v = v * 10 + d;
        }
        if (out)
                *out = v;
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* JSON Pointer (RFC 6901) and canonical JSON                           */
/* ------------------------------------------------------------------ */

/*
 * True if object member name @p key equals the reference token
 * tok[0..toklen) after unescaping ~0 and ~1 (RFC 6901 §4). Compares without
 * allocating. A '~' not followed by '0' or '1' never matches (the caller has
 * already rejected such tokens).
 */
static bool token_equals(const char *key, const char *tok, size_t toklen)
{
        size_t i = 0;

        while (i < toklen) {
                char c = tok[i];
                if (c == '~') {
                        c = tok[i + 1] == '0' ? '~' : '/';
                        i += 2;
                } else {
                        i++;
                }
                if (*key != c)
                        return false;
                key++;
        }
        return *key == '\0';
}

void *sg_json_pointer_get(void *root, const char *pointer)
{
        cJSON *node = root;
        const char *p = pointer;

        if (!node || !pointer)
                return NULL;
        if (*p == '\0')
                return node; /* "" is the whole document (RFC 6901 §5) */
        if (*p != '/')
                return NULL;

        while (*p == '/') {
                const char *tok = ++p;
                size_t toklen;

                while (*p && *p != '/')
                        p++;
                toklen = (size_t)(p - tok);
                for (size_t i = 0; i < toklen; i++) {
                        if (tok[i] == '~' &&
                            (i + 1 >= toklen ||
                             (tok[i + 1] != '0' && tok[i + 1] != '1')))
                                return NULL; /* invalid escape (RFC 6901 §3) */
                }

                if (cJSON_IsObject(node)) {
                        cJSON *child, *found = NULL;
                        for (child = node->child; child; child = child->next) {
                                if (child->string &&
                                    token_equals(child->string, tok, toklen)) {
                                        found = child; /* first of duplicates, as cJSON does */
                                        break;
                                }
                        }
                        node = found;
                } else if (cJSON_IsArray(node)) {
                        /* array-index = %x30 / ( %x31-39 *(%x30-39) ); "-" never
                         * names an existing element (RFC 6901 §4). */
                        size_t idx = 0;
                        cJSON *child;
                        if (toklen == 0 || (toklen > 1 && tok[0] == '0'))
                                return NULL;
                        for (size_t i = 0; i < toklen; i++) {
                                if (tok[i] < '0' || tok[i] > '9')
                                        return NULL;
                                if (idx > (SIZE_MAX - 9) / 10)
                                        return NULL;
                                idx = idx * 10 + (size_t)(tok[i] - '0');
                        }
                        for (child = node->child; child && idx > 0; idx--)
                                child = child->next;
                        node = child;
                } else {
                        return NULL;
                }
                if (!node)
                        return NULL;
        }
        return node;
}

struct member_ref {
        cJSON *item;
        size_t pos; /* original position: keeps duplicate keys stable */
};

static int member_cmp(const void *a, const void *b)
{
        const struct member_ref *x = a, *y = b;
        int c = strcmp(x->item->string ? x->item->string : "",
                       y->item->string ? y->item->string : "");
        if (c)
                return c;
        return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Sorts every object's members by key bytes, recursively. False on ENOMEM. */
static bool canonical_sort(cJSON *node)
{
        cJSON *c;
        size_t n = 0, i;
        struct member_ref *refs;

        for (c = node->child; c; c = c->next) {
                if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && !canonical_sort(c))
                        return false;
                n++;
        }
        if (!cJSON_IsObject(node) || n < 2)
                return true;

        refs = malloc(n * sizeof(*refs));
        if (!refs)
                return false;
        for (c = node->child, i = 0; c; c = c->next, i++) {
                refs[i].item = c;
                refs[i].pos = i;
        }
        qsort(refs, n, sizeof(*refs), member_cmp);
        /* Relink: cJSON keeps head->prev pointing at the tail. */
        for (i = 0; i < n; i++) {
                refs[i].item->prev = i ? refs[i - 1].item : refs[n - 1].item;
                refs[i].item->next = i + 1 < n ? refs[i + 1].item : NULL;
        }
        node->child = refs[0].item;
        free(refs);
        return true;
}

char *sg_json_canonical(const void *node)
{
        cJSON *copy;
        char *out = NULL;

        if (!node)
                return NULL;
        copy = cJSON_Duplicate((const cJSON *)node, 1);
        if (!copy)
                return NULL;
        if (canonical_sort(copy))
                out = cJSON_PrintUnformatted(copy);
        cJSON_Delete(copy);
        return out;
}

/* ------------------------------------------------------------------ */
/* Envelope lifecycle                                                   */
/* ------------------------------------------------------------------ */

/* env->_priv: a reusable EVP_MD_CTX (saves an allocation per hash). */

void sg_envelope_init(sg_envelope_t *env)
{
        memset(env, 0, sizeof(*env));
}

/* Frees the strings and zeroes the fields, keeping _priv for reuse. */
static void envelope_reset(sg_envelope_t *env)
{
        void *priv = env->_priv;

        free(env->id);
        free(env->aggregate);
        free(env->type);
        memset(env, 0, sizeof(*env));
        env->_priv = priv;
}

void sg_envelope_clear(sg_envelope_t *env)
{
        if (!env)
                return;
        envelope_reset(env);
        EVP_MD_CTX_free(env->_priv);
        env->_priv = NULL;
}

/* ------------------------------------------------------------------ */
/* Per-record parse context                                             */
/* ------------------------------------------------------------------ */

typedef struct pctx {
        const sg_topic_config_t *tc;
        const sg_record_t *rec;
        bool ce;          /* format cloudevents */
        bool structured;  /* CE structured content mode */
        bool json_tried;  /* value parse attempted (at most once) */
        cJSON *root;      /* parsed value, NULL if not JSON / not parsed */
        size_t json_err_at; /* byte offset of the syntax error */
        size_t max_field;
        char *errstr;
        size_t errstr_size;
} pctx_t;

/* Parses the record value once; returns the tree or NULL (not JSON). */
static cJSON *ctx_json(pctx_t *c)
{
        const char *v = c->rec->value, *end = NULL;
        size_t len = c->rec->value_len;

        if (c->json_tried)
                return c->root;
        c->json_tried = true;
        if (!v || len == 0)
                return NULL;
        c->root = cJSON_ParseWithLengthOpts(v, len, &end, 0);
        if (!c->root) {
                c->json_err_at = end && end >= v && end <= v + len ?
                                         (size_t)(end - v) : 0;
                return NULL;
        }
        /* cJSON stops after the first value: anything but whitespace after
         * it makes the value invalid JSON (RFC 8259 §2). */
        for (size_t i = (size_t)(end - v); i < len; i++) {
                if (v[i] != ' ' && v[i] != '\t' && v[i] != '\n' && v[i] != '\r') {
                        cJSON_Delete(c->root);
                        c->root = NULL;
                        c->json_err_at = i;
                        return NULL;
                }
        }
        return c->root;
}

/* Explains why ctx_json() returned NULL, into @p buf. */
static const char *json_why(const pctx_t *c, char *buf, size_t size)
{
        if (!c->rec->value)
                snprintf(buf, size, "record value is null");
        else if (c->rec->value_len == 0)
                snprintf(buf, size, "record value is empty");
        else
                snprintf(buf, size,
                         "record value is not valid JSON (error at byte %zu of %zu)",
                         c->json_err_at, c->rec->value_len);
        return buf;
}

static const char *json_type_name(const cJSON *j)
{
        if (cJSON_IsString(j))
                return "string";
        if (cJSON_IsNumber(j))
                return "number";
        if (cJSON_IsBool(j))
                return "boolean";
        if (cJSON_IsNull(j))
                return "null";
        if (cJSON_IsObject(j))
                return "object";
        if (cJSON_IsArray(j))
                return "array";
        return "invalid value";
}

/* Last header named @p name (Kafka Connect semantics), or NULL. When
 * @p ce_prefix, matches "ce_" + name without allocating. */
static const sg_header_t *find_header(const sg_record_t *rec, const char *name,
                                      bool ce_prefix)
{
        for (size_t i = rec->header_cnt; i-- > 0;) {
                const char *h = rec->headers[i].name;
                if (!h)
                        continue;
                if (ce_prefix) {
                        if (strncmp(h, "ce_", 3) == 0 && strcmp(h + 3, name) == 0)
                                return &rec->headers[i];
                } else if (strcmp(h, name) == 0) {
                        return &rec->headers[i];
                }
        }
        return NULL;
}

/* A field value before validation: borrowed bytes or a JSON node. */
typedef enum { RV_MISSING, RV_NULL_HEADER, RV_TEXT, RV_JSON } rv_kind_t;

typedef struct rawval {
        rv_kind_t kind;
        const char *p;  /* RV_TEXT */
        size_t len;
        const cJSON *j; /* RV_JSON */
} rawval_t;

/* Describes where @p src is read from ("ce_id header", "JSON Pointer /a"). */
static const char *where(const pctx_t *c, const sg_field_src_t *src, char *buf,
                         size_t size)
{
        char nm[NAME_MAX_QUOTE + 4];
        const char *name = src->name ? src->name : "";

        snip(nm, name, strlen(name), NAME_MAX_QUOTE);
        switch (src->kind) {
        case SG_SRC_KEY:
                snprintf(buf, size, "record key");
                break;
        case SG_SRC_HEADER:
                snprintf(buf, size, "%s header", nm);
                break;
        case SG_SRC_POINTER:
                snprintf(buf, size, "JSON Pointer %s%s", nm,
                         c->structured ? " in the event" : "");
                break;
        case SG_SRC_CE:
                if (c->structured)
                        snprintf(buf, size, "%s member of the structured event", nm);
                else
                        snprintf(buf, size, "ce_%s header", nm);
                break;
        default:
                snprintf(buf, size, "unconfigured source");
                break;
        }
        return buf;
}

/* The "where" text of `src`, formatted into the caller's `w` only when a
 * detail is written: the success path does no formatting at all. */
#define W where(c, src, w, sizeof(w))

/*
 * Fetches the raw value of @p src. Returns SG_ERR_INVALID only when the
 * value is needed as JSON and is not JSON (detail names @p field).
 */
static sg_err_t fetch(pctx_t *c, const char *field, const sg_field_src_t *src,
                      rawval_t *rv)
{
        const sg_record_t *rec = c->rec;
        const sg_header_t *h;
        char w[128], why[128];

        memset(rv, 0, sizeof(*rv));
        switch (src->kind) {
        case SG_SRC_KEY:
                if (rec->key) {
                        rv->kind = RV_TEXT;
                        rv->p = rec->key;
                        rv->len = rec->key_len;
                }
                return SG_OK;

        case SG_SRC_HEADER:
        case SG_SRC_CE:
                if (src->kind == SG_SRC_CE && !c->ce)
                        return fail(c->errstr, c->errstr_size,
                                    "%s source ce:%s needs format cloudevents",
                                    field, src->name ? src->name : "");
                if (src->kind == SG_SRC_CE && c->structured) {
                        /* root is a JSON object: checked by ce_check() */
                        rv->j = cJSON_GetObjectItemCaseSensitive(
                                c->root, src->name ? src->name : "");
                        rv->kind = rv->j ? RV_JSON : RV_MISSING;
                        return SG_OK;
                }
                h = find_header(rec, src->name ? src->name : "",
                                src->kind == SG_SRC_CE);
                if (!h)
                        return SG_OK;
                if (!h->value) {
                        rv->kind = RV_NULL_HEADER;
                        return SG_OK;
                }
                rv->kind = RV_TEXT;
                rv->p = h->value;
                rv->len = h->value_len;
                return SG_OK;

        case SG_SRC_POINTER:
                if (!ctx_json(c))
                        return fail(c->errstr, c->errstr_size, "%s (%s): %s",
                                    field, where(c, src, w, sizeof(w)),
                                    json_why(c, why, sizeof(why)));
                rv->j = sg_json_pointer_get(c->root, src->name ? src->name : "");
                rv->kind = rv->j ? RV_JSON : RV_MISSING;
                return SG_OK;

        default:
                return fail(c->errstr, c->errstr_size, "%s has no source configured",
                            field);
        }
}

/* True if @p d is an integer in [-2^53, 2^53] (exactly representable).
 * Written without libm so the library needs no -lm. */
static bool is_safe_int(double d)
{
        if (!(d >= -JSON_MAX_SAFE_INT && d <= JSON_MAX_SAFE_INT))
                return false; /* also NaN */
        return (double)(int64_t)d == d;
}

/* Text form of a JSON integer in [-2^53, 2^53], or false. */
static bool json_int_text(const cJSON *j, char *buf, size_t size)
{
        double d = j->valuedouble;

        if (!is_safe_int(d))
                return false;
        snprintf(buf, size, "%.0f", d == 0 ? 0.0 : d); /* no "-0" */
        return true;
}

/*
 * Turns @p src's value into validated text for a string field:
 * non-empty, no NUL, valid UTF-8, at most max_field bytes. JSON strings are
 * taken as is; JSON integers (|n| <= 2^53) read through a JSON Pointer are
 * taken as their decimal text (a numeric order_id is a fine aggregate id).
 * @p numbuf (>= 32 bytes) holds such a text; *out and *outlen point into the
 * record, the JSON tree or @p numbuf.
 */
static sg_err_t get_text(pctx_t *c, const char *field, const sg_field_src_t *src,
                         char *numbuf, size_t numbuf_size, const char **out,
                         size_t *outlen)
{
        rawval_t rv;
        sg_err_t err;
        char w[128], s[SNIP_BUF];
        const char *p = NULL;
        size_t len = 0;

        if ((err = fetch(c, field, src, &rv)))
                return err;

        switch (rv.kind) {
        case RV_MISSING:
                if (src->kind == SG_SRC_KEY)
                        return fail(c->errstr, c->errstr_size,
                                    "record key (%s) is missing", field);
                return fail(c->errstr, c->errstr_size, "%s (%s) is missing",
                            field, W);
        case RV_NULL_HEADER:
                return fail(c->errstr, c->errstr_size,
                            "%s (%s) has a null value", field, W);
        case RV_TEXT:
                p = rv.p;
                len = rv.len;
                break;
        case RV_JSON:
                if (cJSON_IsString(rv.j) && rv.j->valuestring) {
                        p = rv.j->valuestring;
                        len = strlen(p);
                } else if (cJSON_IsNumber(rv.j) && src->kind == SG_SRC_POINTER &&
                           json_int_text(rv.j, numbuf, numbuf_size)) {
                        p = numbuf;
                        len = strlen(p);
                } else {
                        return fail(c->errstr, c->errstr_size,
                                    "%s (%s) is a JSON %s, not a string", field,
                                    W, json_type_name(rv.j));
                }
                break;
        }

        if (len == 0) {
                if (src->kind == SG_SRC_KEY)
                        return fail(c->errstr, c->errstr_size,
                                    "record key (%s) is missing", field);
                return fail(c->errstr, c->errstr_size, "%s (%s) is empty",
                            field, W);
        }
        if (len > c->max_field || len > UINT32_MAX)
                return fail(c->errstr, c->errstr_size,
                            "%s is %zu bytes, over max_field_bytes %zu (%s)",
                            field, len, c->max_field, W);
        if (memchr(p, '\0', len))
                return fail(c->errstr, c->errstr_size,
                            "%s \"%s\" (%s) contains a NUL byte", field,
                            snip(s, p, len, SNIP_MAX), W);
        if (!sg_utf8_valid(p, len))
                return fail(c->errstr, c->errstr_size,
                            "%s \"%s\" (%s) is not valid UTF-8", field,
                            snip(s, p, len, SNIP_MAX), W);
        *out = p;
        *outlen = len;
        return SG_OK;
}

static sg_err_t get_version(pctx_t *c, const sg_field_src_t *src, uint64_t *out)
{
        static const char field[] = "version";
        static const char bad[] = "is not a decimal unsigned 64-bit integer";
        rawval_t rv;
        sg_err_t err;
        char w[128], s[SNIP_BUF];
        const char *p;
        size_t len;

        if ((err = fetch(c, field, src, &rv)))
                return err;

        switch (rv.kind) {
        case RV_MISSING:
                return fail(c->errstr, c->errstr_size, "%s (%s) is missing",
                            field, W);
        case RV_NULL_HEADER:
                return fail(c->errstr, c->errstr_size,
                            "%s (%s) has a null value", field, W);
        case RV_TEXT:
                p = rv.p;
                len = rv.len;
                break;
        case RV_JSON:
        default:
                if (cJSON_IsNumber(rv.j)) {
                        double d = rv.j->valuedouble;
                        if (!is_safe_int(d) || d < 0)
                                return fail(c->errstr, c->errstr_size,
                                            "%s %.17g (%s) is not a JSON integer "
                                            "in [0, 2^53]; send larger versions "
                                            "as strings",
                                            field, d, W);
                        *out = (uint64_t)d;
                        return SG_OK;
                }
                if (!cJSON_IsString(rv.j) || !rv.j->valuestring)
                        return fail(c->errstr, c->errstr_size,
                                    "%s (%s) is a JSON %s, not a number or string",
                                    field, W, json_type_name(rv.j));
                p = rv.j->valuestring;
                len = strlen(p);
                break;
        }
        if (sg_version_parse(p, len, out) != SG_OK)
                return fail(c->errstr, c->errstr_size, "%s \"%s\" (%s) %s", field,
                            snip(s, p, len, SNIP_MAX), W, bad);
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* CloudEvents content mode and required attributes                     */
/* ------------------------------------------------------------------ */

/* Case-insensitive prefix test on a byte range. */
static bool has_prefix_ci(const char *p, size_t len, const char *prefix)
{
        size_t n = strlen(prefix);
        return len >= n && strncasecmp(p, prefix, n) == 0;
}

/*
 * Chooses the content mode (Kafka binding §3): structured when the
 * content-type header names application/cloudevents (header name matched
 * case-insensitively, last one wins), or — lenient — when there is no
 * ce_specversion header and the value is a JSON object with a specversion
 * member; binary otherwise.
 */
static sg_err_t ce_detect(pctx_t *c)
{
        const sg_record_t *rec = c->rec;
        const sg_header_t *ct = NULL;
        char s[SNIP_BUF];

        for (size_t i = rec->header_cnt; i-- > 0;) {
                if (rec->headers[i].name &&
                    strcasecmp(rec->headers[i].name, "content-type") == 0) {
                        ct = &rec->headers[i];
                        break;
                }
        }

        if (ct && ct->value &&
            has_prefix_ci(ct->value, ct->value_len, "application/cloudevents")) {
                const char *p = (const char *)ct->value + 23;
                size_t len = ct->value_len - 23;

                if (has_prefix_ci(p, len, "-batch"))
                        return fail(c->errstr, c->errstr_size,
                                    "content-type \"%s\": batched CloudEvents are "
                                    "not defined by the Kafka binding",
                                    snip(s, ct->value, ct->value_len, SNIP_MAX));
                if (len > 0 && p[0] == '+') {
                        size_t n = 1;
                        while (n < len && p[n] != ';' && p[n] != ' ' && p[n] != '\t')
                                n++;
                        if (n != 5 || strncasecmp(p + 1, "json", 4) != 0)
                                return fail(c->errstr, c->errstr_size,
                                            "content-type \"%s\": only the JSON "
                                            "event format is supported",
                                            snip(s, ct->value, ct->value_len,
                                                 SNIP_MAX));
                } else if (len > 0 && p[0] != ';' && p[0] != ' ' && p[0] != '\t') {
                        return fail(c->errstr, c->errstr_size,
                                    "content-type \"%s\" is not a CloudEvents "
                                    "media type",
                                    snip(s, ct->value, ct->value_len, SNIP_MAX));
                }
                c->structured = true;
                return SG_OK;
        }

        if (!find_header(rec, "specversion", true)) {
                cJSON *root = ctx_json(c);
                if (cJSON_IsObject(root) &&
                    cJSON_GetObjectItemCaseSensitive(root, "specversion"))
                        c->structured = true;
        }
        return SG_OK;
}

/* Required attributes (CloudEvents core v1.0 §3.1): present, non-empty
 * strings; specversion "1.0". */
static sg_err_t ce_check(pctx_t *c)
{
        static const char *const req[] = {"specversion", "id", "source", "type"};
        char why[128], s[SNIP_BUF], w[128];

        if (c->structured) {
                cJSON *root = ctx_json(c);
                if (!root)
                        return fail(c->errstr, c->errstr_size,
                                    "structured CloudEvent: %s",
                                    json_why(c, why, sizeof(why)));
                if (!cJSON_IsObject(root))
                        return fail(c->errstr, c->errstr_size,
                                    "structured CloudEvent: record value is a "
                                    "JSON %s, not an object",
                                    json_type_name(root));
        }

        for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
                sg_field_src_t src_v = {SG_SRC_CE, (char *)req[i]};
                const sg_field_src_t *src = &src_v;
                rawval_t rv;
                const char *p = NULL;
                size_t len = 0;
                sg_err_t err;

                if ((err = fetch(c, req[i], src, &rv)))
                        return err;
                switch (rv.kind) {
                case RV_MISSING:
                        return fail(c->errstr, c->errstr_size,
                                    "CloudEvents attribute %s (%s) is missing",
                                    req[i], W);
                case RV_NULL_HEADER:
                        return fail(c->errstr, c->errstr_size,
                                    "CloudEvents attribute %s (%s) has a null value",
                                    req[i], W);
                case RV_TEXT:
                        p = rv.p;
                        len = rv.len;
                        break;
                case RV_JSON:
                        if (!cJSON_IsString(rv.j) || !rv.j->valuestring)
                                return fail(c->errstr, c->errstr_size,
                                            "CloudEvents attribute %s (%s) is a "
                                            "JSON %s, not a string",
                                            req[i], W, json_type_name(rv.j));
                        p = rv.j->valuestring;
                        len = strlen(p);
                        break;
                }
                if (len == 0)
                        return fail(c->errstr, c->errstr_size,
                                    "CloudEvents attribute %s (%s) is empty",
                                    req[i], W);
                if (i == 0 && (len != 3 || memcmp(p, "1.0", 3) != 0))
                        return fail(c->errstr, c->errstr_size,
                                    "CloudEvents specversion \"%s\" (%s) is not "
                                    "supported; expected \"1.0\"",
                                    snip(s, p, len, SNIP_MAX), W);
        }
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* Idempotency key encoding                                             */
/* ------------------------------------------------------------------ */

typedef struct keybuf {
        unsigned char *p;
        size_t len, cap;
        unsigned char stack[512];
} keybuf_t;

static bool keybuf_add(keybuf_t *kb, const void *data, size_t len)
{
        if (kb->cap - kb->len < 4 + len) {
                size_t ncap = kb->cap * 2;
                unsigned char *np;
                while (ncap - kb->len < 4 + len)
                        ncap *= 2;
                np = malloc(ncap);
                if (!np)
                        return false;
                memcpy(np, kb->p, kb->len);
                if (kb->p != kb->stack)
                        free(kb->p);
                kb->p = np;
                kb->cap = ncap;
        }
        /* 4-byte big-endian length prefix (semantics §2). */
        kb->p[kb->len++] = (unsigned char)(len >> 24);
        kb->p[kb->len++] = (unsigned char)(len >> 16);
        kb->p[kb->len++] = (unsigned char)(len >> 8);
        kb->p[kb->len++] = (unsigned char)len;
        if (len)
                memcpy(kb->p + kb->len, data, len);
        kb->len += len;
        return true;
}

/* ------------------------------------------------------------------ */
/* sg_envelope_parse                                                    */
/* ------------------------------------------------------------------ */

static char *dup_bytes(const char *p, size_t len)
{
        char *s = malloc(len + 1);
        if (s) {
                memcpy(s, p, len);
                s[len] = '\0';
        }
        return s;
}

/* "scope[N]" without printf: this runs for every scope part of every
 * record, while the label is only read when a detail is written. */
static const char *scope_label(char *buf, size_t i)
{
        char digits[24];
        size_t n = 0, o = 0;

        do {
                digits[n++] = (char)('0' + i % 10);
                i /= 10;
        } while (i);
        memcpy(buf, "scope[", 6);
        o = 6;
        while (n)
                buf[o++] = digits[--n];
        buf[o++] = ']';
        buf[o] = '\0';
        return buf;
}

static sg_err_t parse(pctx_t *c, sg_envelope_t *env, keybuf_t *kb)
{
        const sg_topic_config_t *tc = c->tc;
        const char *topic = c->rec->topic ? c->rec->topic : "";
        const char *p;
        size_t len;
        char numbuf[32];
        sg_err_t err;

        if (tc->id.kind == SG_SRC_NONE)
                return fail(c->errstr, c->errstr_size,
                            "topic configuration has no id source");

        if (c->ce) {
                if ((err = ce_detect(c)) || (err = ce_check(c)))
                        return err;
        }

        /* Idempotency key: topic, scope parts..., id. */
        if (!keybuf_add(kb, topic, strlen(topic)))
                return SG_ERR_NOMEM;
        for (size_t i = 0; i < tc->scope_cnt; i++) {
                char field[32];
                if ((err = get_text(c, scope_label(field, i), &tc->scope[i], numbuf,
                                    sizeof(numbuf), &p, &len)))
                        return err;
                if (!keybuf_add(kb, p, len))
                        return SG_ERR_NOMEM;
        }
        if ((err = get_text(c, "id", &tc->id, numbuf, sizeof(numbuf), &p, &len)))
                return err;
        if (!keybuf_add(kb, p, len))
                return SG_ERR_NOMEM;
        if (!(env->id = dup_bytes(p, len)))
                return SG_ERR_NOMEM;
        if (!sha256_checked(env->_priv, kb->p, kb->len, env->key_hash))
                return SG_ERR_NOMEM;

        if (tc->aggregate.kind != SG_SRC_NONE) {
                if ((err = get_text(c, "aggregate id", &tc->aggregate, numbuf,
                                    sizeof(numbuf), &p, &len)))
                        return err;
                if (!(env->aggregate = dup_bytes(p, len)))
                        return SG_ERR_NOMEM;
                env->aggregate_len = len;
        }

        if (tc->version.kind != SG_SRC_NONE) {
                if ((err = get_version(c, &tc->version, &env->version)))
                        return err;
                env->has_version = true;
        }

        if (tc->type.kind != SG_SRC_NONE) {
                if ((err = get_text(c, "type", &tc->type, numbuf, sizeof(numbuf),
                                    &p, &len)))
                        return err;
                if (!(env->type = dup_bytes(p, len)))
                        return SG_ERR_NOMEM;
        }

        /* Digest: whole value, or canonical subtree at digest_pointer. */
        if (!tc->digest_pointer) {
                if (!sha256_checked(env->_priv, c->rec->value, c->rec->value_len,
                                    env->digest))
                        return SG_ERR_NOMEM;
        } else {
                sg_field_src_t src = {SG_SRC_POINTER, tc->digest_pointer};
                char w[128], why[128];
                const cJSON *node;
                char *canon;
                bool ok;

                where(c, &src, w, sizeof(w));
                if (!ctx_json(c))
                        return fail(c->errstr, c->errstr_size,
                                    "digest (digest_pointer, %s): %s", w,
                                    json_why(c, why, sizeof(why)));
                node = sg_json_pointer_get(c->root, tc->digest_pointer);
                if (!node)
                        return fail(c->errstr, c->errstr_size,
                                    "digest subtree (digest_pointer, %s) is missing",
                                    w);
                if (!(canon = sg_json_canonical(node)))
                        return SG_ERR_NOMEM;
                ok = sha256_checked(env->_priv, canon, strlen(canon), env->digest);
                cJSON_free(canon);
                if (!ok)
                        return SG_ERR_NOMEM;
        }
        return SG_OK;
}

sg_err_t sg_envelope_parse(const sg_topic_config_t *tc, const sg_record_t *rec,
                           sg_envelope_t *env, char *errstr,
                           size_t errstr_size)
{
        pctx_t c;
        keybuf_t kb;
        sg_err_t err;

        if (errstr && errstr_size > 0)
                errstr[0] = '\0';
        if (!env)
                return fail(errstr, errstr_size, "no envelope to parse into");
        envelope_reset(env);
        if (!tc || !rec)
                return fail(errstr, errstr_size, "no topic configuration or record");

        memset(&c, 0, sizeof(c));
        c.tc = tc;
        c.rec = rec;
        c.ce = tc->format == SG_FORMAT_CLOUDEVENTS;
        c.max_field = tc->max_field_bytes ? tc->max_field_bytes : DEFAULT_MAX_FIELD;
        c.errstr = errstr;
        c.errstr_size = errstr_size;

        if (!env->_priv && !(env->_priv = EVP_MD_CTX_new())) {
                fail(errstr, errstr_size, "out of memory parsing the envelope");
                return SG_ERR_NOMEM;
        }

        kb.p = kb.stack;
        kb.len = 0;
        kb.cap = sizeof(kb.stack);

        err = parse(&c, env, &kb);

        if (kb.p != kb.stack)
                free(kb.p);
        cJSON_Delete(c.root);
        if (err) {
                if (err == SG_ERR_NOMEM)
                        fail(errstr, errstr_size, "out of memory parsing the envelope");
                envelope_reset(env);
        }
        return err;
}
