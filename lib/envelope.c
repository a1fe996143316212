/*
 * envelope.c — reads the idempotency key, aggregate, version, type and
 * digest out of one Kafka record (semantics §2; contract in envelope.h).
 *
 * This runs once per consumed record, so it is written for the hot path:
 *  - the record value is parsed as JSON (json.h: yajl, number text kept)
 *    at most once, and only when something needs it (structured
 *    CloudEvents, a JSON Pointer source, a digest_pointer, or the lenient
 *    structured-mode probe when a record has neither a content-type nor a
 *    ce_specversion header), into a tree the envelope keeps for the next
 *    record;
 *  - the digest of a subtree streams its canonical form into SHA-256;
 *  - field values are borrowed from the record or the parsed tree until they
 *    pass validation; only the id, aggregate and type are copied out;
 *  - the idempotency key encoding (envelope_key.c) is built in a stack
 *    buffer unless it is unusually long.
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
 * JSON numbers judged by their text, pointers naming a place in the
 * CloudEvent in either content mode, length-prefixed key, digest).
 */
#include "envelope.h"

#include "envelope_int.h"
#include "json.h"

#include <openssl/evp.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SNIP_MAX 40       /* most characters of input quoted in a detail */
#define NAME_MAX_QUOTE 32 /* most characters of a configured name quoted */
#define DEFAULT_MAX_FIELD 1024
#define DETAIL_MAX 199 /* longest detail, in bytes */

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static sg_err_t fail(char *errstr, size_t errstr_size, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;

/* Writes a detail of at most DETAIL_MAX bytes (envelope.h): one whose
 * parts (field, source, JSON error) add up to more is cut, ending "...". */
static sg_err_t fail(char *errstr, size_t errstr_size, const char *fmt, ...) {
        if (errstr && errstr_size > 0) {
                char buf[512];
                va_list ap;

                va_start(ap, fmt);
                sg_verrf(buf, sizeof(buf), fmt, ap);
                va_end(ap);
                if (strlen(buf) > DETAIL_MAX)
                        memcpy(buf + DETAIL_MAX - 3, "...", 4);
                sg_errf(errstr, errstr_size, "%s", buf);
        }
        return SG_ERR_INVALID;
}

#define SNIP_BUF (SNIP_MAX + 4)

/* ------------------------------------------------------------------ */
/* Envelope lifecycle                                                   */
/* ------------------------------------------------------------------ */

/* The envelope's strings (sg_envelope_t id, aggregate, type). */
enum { STR_ID, STR_AGGREGATE, STR_TYPE, STR__CNT };

/* env->_priv: what a parse reuses, so the hot path does not allocate. */
typedef struct env_priv {
        EVP_MD_CTX *md;     /* SHA-256 context */
        sg_json_doc_t *doc; /* the value's JSON tree (json.h) */
        /* the strings' buffers, grown when a longer one comes, kept from
         * parse to parse (sg_envelope_t: valid until the next parse) */
        char *str[STR__CNT];
        size_t str_cap[STR__CNT];
} env_priv_t;

void sg_envelope_init(sg_envelope_t *env) {
        memset(env, 0, sizeof(*env));
}

/* Zeroes the fields, keeping _priv (and the strings' buffers) for reuse. */
static void envelope_reset(sg_envelope_t *env) {
        void *priv = env->_priv;

        memset(env, 0, sizeof(*env));
        env->_priv = priv;
}

void sg_envelope_clear(sg_envelope_t *env) {
        env_priv_t *pv;

        if (!env)
                return;
        envelope_reset(env);
        if ((pv = env->_priv)) {
                EVP_MD_CTX_free(pv->md);
                sg_json_doc_destroy(pv->doc);
                for (int i = 0; i < STR__CNT; i++)
                        free(pv->str[i]);
                free(pv);
        }
        env->_priv = NULL;
}

/* ------------------------------------------------------------------ */
/* Per-record parse context                                             */
/* ------------------------------------------------------------------ */

/* The CloudEvents attributes every event has (core v1.0 §3.1), in
 * ce_check's order. */
enum { CE_SPECVERSION, CE_ID, CE_SOURCE, CE_TYPE, CE__REQ };

/* The record's headers as the lookups of one parse read them (a binary-mode
 * CloudEvent makes about ten: content mode, the four required attributes,
 * then each configured field): read once, on the first lookup, each name's
 * length taken once; the last header of each required attribute and the
 * last content-type header are found in that pass, so that looking one of
 * them up again costs no scan, and any other lookup compares lengths
 * before bytes. A record with more headers than HDR_INDEX_MAX is looked up
 * by scanning them (hdr_scan). */
#define HDR_INDEX_MAX 16

typedef struct hdr_index {
        bool built;
        bool scan;             /* too many headers: not indexed */
        size_t cnt;            /* entries, in the record's header order */
        const sg_header_t *ct; /* the last content-type header, or NULL */
        const sg_header_t *req[CE__REQ]; /* the last ce_<attribute> */
        struct {
                const sg_header_t *h;
                size_t len; /* strlen(h->name) */
        } e[HDR_INDEX_MAX];
} hdr_index_t;

typedef struct pctx {
        const sg_topic_config_t *tc;
        const sg_record_t *rec;
        env_priv_t *pv;
        bool ce;                    /* format cloudevents */
        bool structured;            /* CE structured content mode */
        bool json_tried;            /* value parse attempted (at most once) */
        sg_err_t json_err;          /* its result */
        const sg_json_node_t *root; /* parsed value, NULL if not JSON */
        char json_detail[112];      /* why it is not JSON */
        size_t max_field;
        char *errstr;
        size_t errstr_size;
        char scratch[DETAIL_MAX + 1]; /* details after the first (parse) */
        hdr_index_t hx;               /* the record's headers, read once */
} pctx_t;

/* True in CloudEvents binary mode, where the value is the event's data. */
static bool binary_mode(const pctx_t *c) {
        return c->ce && !c->structured;
}

/* Parses the record value once; returns the tree or NULL (not JSON, or
 * out of memory: c->json_err says which). */
static const sg_json_node_t *ctx_json(pctx_t *c) {
        const char *v = c->rec->value;
        size_t len = c->rec->value_len;

        if (c->json_tried)
                return c->root;
        c->json_tried = true;
        c->json_err = SG_ERR_INVALID;
        if (!v || len == 0)
                return NULL;
        c->json_err = sg_json_parse(c->pv->doc, v, len, c->json_detail,
                                    sizeof(c->json_detail));
        if (c->json_err == SG_OK)
                c->root = sg_json_root(c->pv->doc);
        return c->root;
}

/* Explains why ctx_json() returned NULL, into @p buf. */
static const char *json_why(const pctx_t *c, char *buf, size_t size) {
        if (!c->rec->value)
                sg_errf(buf, size, "record value is null");
        else if (c->rec->value_len == 0)
                sg_errf(buf, size, "record value is empty");
        else
                sg_errf(buf, size, "record value is not valid JSON (%s)",
                        c->json_detail);
        return buf;
}

/* The value is not JSON: SG_ERR_INVALID with @p field's detail, or
 * SG_ERR_NOMEM when the parse ran out of memory. */
#define NOT_JSON(c, ...)                                                       \
        ((c)->json_err == SG_ERR_NOMEM                                         \
                 ? SG_ERR_NOMEM                                                \
                 : fail((c)->errstr, (c)->errstr_size, __VA_ARGS__))

/* Last header named @p name (Kafka Connect semantics), or NULL, by
 * scanning the record's headers. When @p ce_prefix, matches "ce_" + name
 * without allocating. */
static const sg_header_t *hdr_scan(const sg_record_t *rec, const char *name,
                                   bool ce_prefix) {
        for (size_t i = rec->header_cnt; i-- > 0;) {
                const char *h = rec->headers[i].name;
                if (!h)
                        continue;
                if (ce_prefix) {
                        if (strncmp(h, "ce_", 3) == 0 &&
                            strcmp(h + 3, name) == 0)
                                return &rec->headers[i];
                } else if (strcmp(h, name) == 0) {
                        return &rec->headers[i];
                }
        }
        return NULL;
}

/* Last `content-type` header, its name matched case-insensitively, by
 * scanning. */
static const sg_header_t *ct_scan(const sg_record_t *rec) {
        for (size_t i = rec->header_cnt; i-- > 0;)
                if (rec->headers[i].name &&
                    strcasecmp(rec->headers[i].name, "content-type") == 0)
                        return &rec->headers[i];
        return NULL;
}

/* CE_* of attribute @p attr (@p len bytes), or -1 when it is not one of
 * the required ones. */
static int ce_required(const char *attr, size_t len) {
        switch (len) {
        case 11:
                return memcmp(attr, "specversion", 11) == 0 ? CE_SPECVERSION
                                                            : -1;
        case 2:
                return memcmp(attr, "id", 2) == 0 ? CE_ID : -1;
        case 6:
                return memcmp(attr, "source", 6) == 0 ? CE_SOURCE : -1;
        case 4:
                return memcmp(attr, "type", 4) == 0 ? CE_TYPE : -1;
        default:
                return -1;
        }
}

static bool is_ce_name(const char *h, size_t len) {
        return len >= 3 && h[0] == 'c' && h[1] == 'e' && h[2] == '_';
}

/* Reads the record's headers into c->hx, once per parse. A header without
 * a name is never found (as by hdr_scan). */
static hdr_index_t *hdr_index(pctx_t *c) {
        hdr_index_t *x = &c->hx;
        const sg_record_t *rec = c->rec;

        if (x->built)
                return x;
        x->built = true;
        if (rec->header_cnt > HDR_INDEX_MAX) {
                x->scan = true;
                return x;
        }
        for (size_t i = 0; i < rec->header_cnt; i++) {
                const sg_header_t *hd = &rec->headers[i];
                if (!hd->name)
                        continue;
                size_t len = strlen(hd->name);
                int k;
                /* forward: the last one of a name wins */
                if (is_ce_name(hd->name, len)) {
                        if ((k = ce_required(hd->name + 3, len - 3)) >= 0)
                                x->req[k] = hd;
                } else if (len == 12 &&
                           strcasecmp(hd->name, "content-type") == 0) {
                        x->ct = hd;
                }
                x->e[x->cnt].h = hd;
                x->e[x->cnt].len = len;
                x->cnt++;
        }
        return x;
}

/* Last header named @p name (Kafka Connect semantics), or NULL. When
 * @p ce_prefix, matches "ce_" + name without allocating. */
static const sg_header_t *find_header(pctx_t *c, const char *name,
                                      bool ce_prefix) {
        const hdr_index_t *x = hdr_index(c);
        size_t n = strlen(name);
        int k;

        if (x->scan)
                return hdr_scan(c->rec, name, ce_prefix);
        if (ce_prefix && (k = ce_required(name, n)) >= 0)
                return x->req[k];
        size_t len = ce_prefix ? n + 3 : n;
        for (size_t i = x->cnt; i-- > 0;) {
                const char *h = x->e[i].h->name;
                if (x->e[i].len == len &&
                    (ce_prefix
                             ? is_ce_name(h, len) && memcmp(h + 3, name, n) == 0
                             : memcmp(h, name, n) == 0))
                        return x->e[i].h;
        }
        return NULL;
}

/* Last `content-type` header, its name matched case-insensitively. */
static const sg_header_t *content_type_header(pctx_t *c) {
        const hdr_index_t *x = hdr_index(c);

        return x->scan ? ct_scan(c->rec) : x->ct;
}

/* A field value before validation: borrowed bytes or a JSON node. */
typedef enum { RV_MISSING, RV_NULL_HEADER, RV_TEXT, RV_JSON } rv_kind_t;

typedef struct rawval {
        rv_kind_t kind;
        const char *p; /* RV_TEXT */
        size_t len;
        const sg_json_node_t *j; /* RV_JSON */
} rawval_t;

/*
 * A JSON Pointer in CloudEvents binary mode (semantics §2): "/data" is the
 * record value itself and "/data/..." points into it; "/ATTR" is the
 * attribute ATTR (header ce_ATTR), which has no members. Returns the rest
 * of the pointer after "/data" ("" or "/..."), or NULL for an attribute,
 * whose name goes to @p attr (at most @p attr_size - 1 bytes; "" when the
 * token cannot be an attribute name or the pointer goes deeper).
 */
static const char *binary_pointer(const char *ptr, char *attr,
                                  size_t attr_size) {
        const char *tok = ptr + 1, *end;
        size_t n;

        attr[0] = '\0';
        if (ptr[0] != '/')
                return NULL;
        end = strchr(tok, '/');
        n = end ? (size_t)(end - tok) : strlen(tok);
        if (n == 4 && memcmp(tok, "data", 4) == 0)
                return tok + 4;
        if (end || n == 0 || n >= attr_size)
                return NULL;
        /* CloudEvents attribute names: a-z, 0-9 (core spec §3.1.1) */
        for (size_t i = 0; i < n; i++)
                if (!((tok[i] >= 'a' && tok[i] <= 'z') ||
                      (tok[i] >= '0' && tok[i] <= '9')))
                        return NULL;
        memcpy(attr, tok, n);
        attr[n] = '\0';
        return NULL;
}

/* Describes where @p src is read from ("ce_id header", "JSON Pointer /a"). */
static const char *where(const pctx_t *c, const sg_field_src_t *src, char *buf,
                         size_t size) {
        char nm[NAME_MAX_QUOTE + 4], attr[NAME_MAX_QUOTE];
        const char *name = src->name ? src->name : "";

        sg_quote(nm, name, strlen(name), NAME_MAX_QUOTE);
        switch (src->kind) {
        case SG_SRC_KEY:
                sg_errf(buf, size, "record key");
                break;
        case SG_SRC_HEADER:
                sg_errf(buf, size, "%s header", nm);
                break;
        case SG_SRC_POINTER:
                if (binary_mode(c)) {
                        if (binary_pointer(name, attr, sizeof(attr)))
                                sg_errf(buf, size,
                                        "JSON Pointer %s in binary-mode data",
                                        nm);
                        else if (strcmp(attr, "datacontenttype") == 0)
                                sg_errf(buf, size,
                                        "JSON Pointer %s, content-type header",
                                        nm);
                        else if (attr[0])
                                sg_errf(buf, size,
                                        "JSON Pointer %s, ce_%s header", nm,
                                        attr);
                        else
                                sg_errf(buf, size, "JSON Pointer %s", nm);
                        break;
                }
                sg_errf(buf, size, "JSON Pointer %s%s", nm,
                        c->structured ? " in the event" : "");
                break;
        case SG_SRC_CE:
                if (c->structured)
                        sg_errf(buf, size, "%s member of the structured event",
                                nm);
                else
                        sg_errf(buf, size, "ce_%s header", nm);
                break;
        default:
                sg_errf(buf, size, "unconfigured source");
                break;
        }
        return buf;
}

/* The "where" text of `src`, formatted into the caller's `w` only when a
 * detail is written: the success path does no formatting at all. */
#define W where(c, src, w, sizeof(w))

/* A header's value as a raw value (absent, null or bytes). */
static void header_val(const sg_header_t *h, rawval_t *rv) {
        if (!h)
                return;
        if (!h->value) {
                rv->kind = RV_NULL_HEADER;
                return;
        }
        rv->kind = RV_TEXT;
        rv->p = h->value;
        rv->len = h->value_len;
}

/*
 * Fetches the raw value of @p src. Returns SG_ERR_INVALID only when the
 * value is needed as JSON and is not JSON (detail names @p field), or
 * SG_ERR_NOMEM.
 */
static sg_err_t fetch(pctx_t *c, const char *field, const sg_field_src_t *src,
                      rawval_t *rv) {
        const sg_record_t *rec = c->rec;
        const char *name = src->name ? src->name : "";
        char w[128], why[160], attr[NAME_MAX_QUOTE];
        const char *rest = name;

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
                                    field, name);
                if (src->kind == SG_SRC_CE && c->structured) {
                        /* root is a JSON object: checked by ce_check() */
                        rv->j = sg_json_member(c->pv->doc, c->root, name,
                                               strlen(name));
                        rv->kind = rv->j ? RV_JSON : RV_MISSING;
                        return SG_OK;
                }
                header_val(find_header(c, name, src->kind == SG_SRC_CE), rv);
                return SG_OK;

        case SG_SRC_POINTER:
                if (binary_mode(c) &&
                    !(rest = binary_pointer(name, attr, sizeof(attr)))) {
                        /* an attribute, or below one (never there) */
                        if (strcmp(attr, "datacontenttype") == 0)
                                header_val(content_type_header(c),
                                           rv); /* §3.2.1 */
                        else if (attr[0])
                                header_val(find_header(c, attr, true), rv);
                        return SG_OK;
                }
                if (!ctx_json(c))
                        return NOT_JSON(c, "%s (%s): %s", field,
                                        where(c, src, w, sizeof(w)),
                                        json_why(c, why, sizeof(why)));
                rv->j = sg_json_pointer_get(c->pv->doc, c->root, rest);
                rv->kind = rv->j ? RV_JSON : RV_MISSING;
                return SG_OK;

        default:
                return fail(c->errstr, c->errstr_size,
                            "%s has no source configured", field);
        }
}

/*
 * The text of a JSON number read as a string field, or NULL: an integer
 * (optional '-', digits; no fraction, no exponent) of magnitude at most
 * 2^53, as written, "-0" as "0". Judged by the text, never through a
 * double (semantics §2): 9007199254740993 must not become ...992.
 */
static const char *json_int_text(const sg_json_node_t *j, size_t *len) {
        const char *t = j->text;
        size_t n = j->len, neg = n > 0 && t[0] == '-';

        if (sg_json_number_version(t + neg, n - neg, NULL) != SG_OK)
                return NULL;
        if (neg && n == 2 && t[1] == '0') {
                *len = 1;
                return "0";
        }
        *len = n;
        return t;
}

/*
 * Turns @p src's value into validated text for a string field:
 * non-empty, no NUL, valid UTF-8, at most max_field bytes. JSON strings are
 * taken as is; JSON integers (|n| <= 2^53) read through a JSON Pointer are
 * taken as their decimal text (a numeric order_id is a fine aggregate id).
 * *out and *outlen point into the record or the JSON tree.
 */
static sg_err_t get_text(pctx_t *c, const char *field,
                         const sg_field_src_t *src, const char **out,
                         size_t *outlen) {
        rawval_t rv;
        sg_err_t err;
        char w[128], s[SNIP_BUF];
        const char *p = NULL;
        size_t len = 0;

        /* set on every path (scan-build does not follow the variadic
         * fail() to see that every error return is non-zero) */
        *out = "";
        *outlen = 0;
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
                if (rv.j->type == SG_JSON_STRING) {
                        p = rv.j->text;
                        len = rv.j->len;
                } else if (rv.j->type == SG_JSON_NUMBER &&
                           src->kind == SG_SRC_POINTER) {
                        if (!(p = json_int_text(rv.j, &len)))
                                return fail(c->errstr, c->errstr_size,
                                            "%s %s (%s) is a JSON number, not "
                                            "an integer in [-2^53, 2^53]",
                                            field,
                                            sg_quote(s, rv.j->text, rv.j->len,
                                                     SNIP_MAX),
                                            W);
                } else {
                        return fail(c->errstr, c->errstr_size,
                                    "%s (%s) is a JSON %s, not a string", field,
                                    W, sg_json_type_name(rv.j->type));
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
                            sg_quote(s, p, len, SNIP_MAX), W);
        if (!sg_utf8_valid(p, len))
                return fail(c->errstr, c->errstr_size,
                            "%s \"%s\" (%s) is not valid UTF-8", field,
                            sg_quote(s, p, len, SNIP_MAX), W);
        *out = p;
        *outlen = len;
        return SG_OK;
}

/* A version, or an epoch (semantics §4b: parsed as strictly as a
 * version), named @p field in messages. */
static sg_err_t get_version(pctx_t *c, const char *field,
                            const sg_field_src_t *src, uint64_t *out) {
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
                if (rv.j->type == SG_JSON_NUMBER) {
                        /* judged by its text (semantics §2) */
                        if (sg_json_number_version(rv.j->text, rv.j->len,
                                                   out) != SG_OK)
                                return fail(
                                        c->errstr, c->errstr_size,
                                        "%s %s (%s) is not a JSON integer "
                                        "in [0, 2^53]; send larger versions "
                                        "as strings",
                                        field,
                                        sg_quote(s, rv.j->text, rv.j->len,
                                                 SNIP_MAX),
                                        W);
                        return SG_OK;
                }
                if (rv.j->type != SG_JSON_STRING)
                        return fail(
                                c->errstr, c->errstr_size,
                                "%s (%s) is a JSON %s, not a number or string",
                                field, W, sg_json_type_name(rv.j->type));
                p = rv.j->text;
                len = rv.j->len;
                break;
        }
        if (sg_version_parse(p, len, out) != SG_OK)
                return fail(c->errstr, c->errstr_size, "%s \"%s\" (%s) %s",
                            field, sg_quote(s, p, len, SNIP_MAX), W, bad);
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* CloudEvents content mode and required attributes                     */
/* ------------------------------------------------------------------ */

/* Case-insensitive prefix test on a byte range. */
static bool has_prefix_ci(const char *p, size_t len, const char *prefix) {
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
static sg_err_t ce_detect(pctx_t *c) {
        const sg_header_t *ct = content_type_header(c);
        char s[SNIP_BUF];

        if (ct && ct->value &&
            has_prefix_ci(ct->value, ct->value_len,
                          "application/cloudevents")) {
                const char *p = (const char *)ct->value + 23;
                size_t len = ct->value_len - 23;

                if (has_prefix_ci(p, len, "-batch"))
                        return fail(
                                c->errstr, c->errstr_size,
                                "content-type \"%s\": batched CloudEvents are "
                                "not defined by the Kafka binding",
                                sg_quote(s, ct->value, ct->value_len,
                                         SNIP_MAX));
                if (len > 0 && p[0] == '+') {
                        size_t n = 1;
                        while (n < len && p[n] != ';' && p[n] != ' ' &&
                               p[n] != '\t')
                                n++;
                        if (n != 5 || strncasecmp(p + 1, "json", 4) != 0)
                                return fail(
                                        c->errstr, c->errstr_size,
                                        "content-type \"%s\": only the JSON "
                                        "event format is supported",
                                        sg_quote(s, ct->value, ct->value_len,
                                                 SNIP_MAX));
                } else if (len > 0 && p[0] != ';' && p[0] != ' ' &&
                           p[0] != '\t') {
                        return fail(c->errstr, c->errstr_size,
                                    "content-type \"%s\" is not a CloudEvents "
                                    "media type",
                                    sg_quote(s, ct->value, ct->value_len,
                                             SNIP_MAX));
                }
                c->structured = true;
                return SG_OK;
        }

        if (!find_header(c, "specversion", true)) {
                const sg_json_node_t *root = ctx_json(c);
                if (!root && c->json_err == SG_ERR_NOMEM)
                        return SG_ERR_NOMEM;
                if (sg_json_member(c->pv->doc, root, "specversion", 11))
                        c->structured = true;
        }
        return SG_OK;
}

/* Required attributes (CloudEvents core v1.0 §3.1): present, non-empty
 * strings; specversion "1.0". */
static sg_err_t ce_check(pctx_t *c) {
        static const char *const req[] = {"specversion", "id", "source",
                                          "type"};
        char why[160], s[SNIP_BUF], w[128];

        if (c->structured) {
                const sg_json_node_t *root = ctx_json(c);
                if (!root)
                        return NOT_JSON(c, "structured CloudEvent: %s",
                                        json_why(c, why, sizeof(why)));
                if (root->type != SG_JSON_OBJECT)
                        return fail(c->errstr, c->errstr_size,
                                    "structured CloudEvent: record value is a "
                                    "JSON %s, not an object",
                                    sg_json_type_name(root->type));
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
                                    "CloudEvents attribute %s (%s) has a null "
                                    "value",
                                    req[i], W);
                case RV_TEXT:
                        p = rv.p;
                        len = rv.len;
                        break;
                case RV_JSON:
                        if (rv.j->type != SG_JSON_STRING)
                                return fail(
                                        c->errstr, c->errstr_size,
                                        "CloudEvents attribute %s (%s) is a "
                                        "JSON %s, not a string",
                                        req[i], W,
                                        sg_json_type_name(rv.j->type));
                        p = rv.j->text;
                        len = rv.j->len;
                        break;
                }
                if (len == 0)
                        return fail(c->errstr, c->errstr_size,
                                    "CloudEvents attribute %s (%s) is empty",
                                    req[i], W);
                if (i == 0 && (len != 3 || memcmp(p, "1.0", 3) != 0))
                        return fail(
                                c->errstr, c->errstr_size,
                                "CloudEvents specversion \"%s\" (%s) is not "
                                "supported; expected \"1.0\"",
                                sg_quote(s, p, len, SNIP_MAX), W);
        }
        return SG_OK;
}

/* ------------------------------------------------------------------ */
/* sg_envelope_parse                                                    */
/* ------------------------------------------------------------------ */

/* A NUL-terminated copy of @p len bytes at @p p in the envelope's string
 * buffer @p which, or NULL when out of memory. */
static char *keep_str(env_priv_t *pv, int which, const char *p, size_t len) {
        if (pv->str_cap[which] < len + 1) {
                size_t cap = len + 1 > 64 ? len + 1 : 64;
                char *n = realloc(pv->str[which], cap);
                if (!n)
                        return NULL;
                pv->str[which] = n;
                pv->str_cap[which] = cap;
        }
        memcpy(pv->str[which], p, len);
        pv->str[which][len] = '\0';
        return pv->str[which];
}

/* "scope[N]" without printf: this runs for every scope part of every
 * record, while the label is only read when a detail is written. */
static const char *scope_label(char *buf, size_t i) {
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

static sg_err_t digest_update(void *opaque, const void *bytes, size_t len) {
        return EVP_DigestUpdate(opaque, bytes, len) == 1 ? SG_OK : SG_ERR_NOMEM;
}

/*
 * The payload digest with a digest_pointer: SHA-256 of the canonical form
 * (json.h) of the subtree it names in the CloudEvent (semantics §2). In
 * binary mode the record value is the event's data: "/data" is the whole
 * value — its canonical form when it is JSON, else its bytes (a canonical
 * form is always JSON, so the two never meet) — and "/data/..." points into
 * it.
 */
static sg_err_t digest_subtree(pctx_t *c, unsigned char *out) {
        const char *ptr = c->tc->digest_pointer;
        sg_field_src_t src_v = {SG_SRC_POINTER, (char *)ptr};
        const sg_field_src_t *src = &src_v;
        const sg_json_node_t *node;
        EVP_MD_CTX *md = c->pv->md;
        unsigned int olen = 0;
        char w[128], why[160], attr[NAME_MAX_QUOTE];
        sg_err_t err;

        if (binary_mode(c)) {
                if (!(ptr = binary_pointer(ptr, attr, sizeof(attr))))
                        return fail(
                                c->errstr, c->errstr_size,
                                "digest (envelope.digest, %s): in binary mode "
                                "only /data and pointers into it name the "
                                "event's data",
                                W);
                if (!c->rec->value)
                        return fail(
                                c->errstr, c->errstr_size,
                                "digest (envelope.digest, %s): the event has "
                                "no data (null record value)",
                                W);
        }
        if (!ctx_json(c)) {
                if (binary_mode(c) && *ptr == '\0' &&
                    c->json_err != SG_ERR_NOMEM)
                        return sg_sha256_ctx(md, c->rec->value,
                                             c->rec->value_len, out)
                                       ? SG_OK
                                       : SG_ERR_NOMEM;
                return NOT_JSON(c, "digest (envelope.digest, %s): %s", W,
                                json_why(c, why, sizeof(why)));
        }
        if (!(node = sg_json_pointer_get(c->pv->doc, c->root, ptr)))
                return fail(c->errstr, c->errstr_size,
                            "digest subtree (envelope.digest, %s) is missing",
                            W);
        if (EVP_DigestInit_ex(md, sg_sha256_md(), NULL) != 1)
                return SG_ERR_NOMEM;
        if ((err = sg_json_canonical_write(c->pv->doc, node, digest_update,
                                           md)))
                return err;
        if (EVP_DigestFinal_ex(md, out, &olen) != 1 || olen != SG_HASH_LEN)
                return SG_ERR_NOMEM;
        return SG_OK;
}

/* One field of the parse (semantics §3 row 1: a malformed record keeps
 * the fields that did parse). @p err is the field's result: SG_ERR_INVALID
 * marks the parse malformed and, for the first field that fails, leaves its
 * detail in the caller's errstr; later details go to a scratch buffer, so
 * the detail names the first problem. Returns true when the parse goes on
 * (SG_OK or SG_ERR_INVALID), false on any other error (*errp set). */
static bool field_done(pctx_t *c, sg_err_t err, sg_err_t *errp) {
        if (err == SG_OK)
                return true;
        if (err != SG_ERR_INVALID) {
                *errp = err;
                return false;
        }
        if (*errp == SG_OK) {
                *errp = SG_ERR_INVALID;
                c->errstr = c->scratch;
                c->errstr_size = sizeof(c->scratch);
        }
        return true;
}

/* The idempotency key: topic, scope parts..., id (env->id, key_hash). */
static sg_err_t parse_key(pctx_t *c, sg_envelope_t *env,
                          sg_envelope_keybuf_t *kb) {
        const sg_topic_config_t *tc = c->tc;
        const char *topic = c->rec->topic ? c->rec->topic : "";
        const char *p;
        size_t len;
        sg_err_t err;

        if (!sg_envelope_keybuf_add(kb, topic, strlen(topic)))
                return SG_ERR_NOMEM;
        for (size_t i = 0; i < tc->scope_cnt; i++) {
                char field[32];
                if ((err = get_text(c, scope_label(field, i), &tc->scope[i], &p,
                                    &len)))
                        return err;
                if (!sg_envelope_keybuf_add(kb, p, len))
                        return SG_ERR_NOMEM;
        }
        if ((err = get_text(c, "id", &tc->id, &p, &len)))
                return err;
        if (!sg_envelope_keybuf_add(kb, p, len))
                return SG_ERR_NOMEM;
        if (!sg_sha256_ctx(c->pv->md, kb->p, kb->len, env->key_hash))
                return SG_ERR_NOMEM;
        if (!(env->id = keep_str(c->pv, STR_ID, p, len)))
                return SG_ERR_NOMEM;
        env->has_key = true;
        return SG_OK;
}

static sg_err_t parse_aggregate(pctx_t *c, sg_envelope_t *env) {
        const char *p;
        size_t len;
        sg_err_t err;

        if (c->tc->aggregate.kind == SG_SRC_NONE)
                return SG_OK;
        if ((err = get_text(c, "aggregate id", &c->tc->aggregate, &p, &len)))
                return err;
        if (!(env->aggregate = keep_str(c->pv, STR_AGGREGATE, p, len)))
                return SG_ERR_NOMEM;
        env->aggregate_len = len;
        return SG_OK;
}

static sg_err_t parse_version(pctx_t *c, sg_envelope_t *env) {
        sg_err_t err;

        if (c->tc->version.kind == SG_SRC_NONE)
                return SG_OK;
        if ((err = get_version(c, "version", &c->tc->version, &env->version)))
                return err;
        env->has_version = true;
        return SG_OK;
}

/* semantics §4b: a topic with an epoch field needs it on every event, as
 * it needs the version (row 1 when missing) */
static sg_err_t parse_epoch(pctx_t *c, sg_envelope_t *env) {
        sg_err_t err;

        if (c->tc->epoch.kind == SG_SRC_NONE)
                return SG_OK;
        if ((err = get_version(c, "epoch", &c->tc->epoch, &env->epoch)))
                return err;
        env->has_epoch = true;
        return SG_OK;
}

static sg_err_t parse_type(pctx_t *c, sg_envelope_t *env) {
        const char *p;
        size_t len;
        sg_err_t err;

        if (c->tc->type.kind == SG_SRC_NONE)
                return SG_OK;
        if ((err = get_text(c, "type", &c->tc->type, &p, &len)))
                return err;
        if (!(env->type = keep_str(c->pv, STR_TYPE, p, len)))
                return SG_ERR_NOMEM;
        return SG_OK;
}

/* Digest: whole value, or canonical subtree at digest_pointer. */
static sg_err_t parse_digest(pctx_t *c, sg_envelope_t *env) {
        sg_err_t err;

        if (!c->tc->digest_pointer)
                err = sg_sha256_ctx(c->pv->md, c->rec->value, c->rec->value_len,
                                    env->digest)
                              ? SG_OK
                              : SG_ERR_NOMEM;
        else
                err = digest_subtree(c, env->digest);
        env->has_digest = err == SG_OK;
        return err;
}

/* Every field, each on its own: a field that is invalid makes the record
 * malformed (SG_ERR_INVALID, the first one's detail in errstr) without
 * stopping the others, so that a malformed record still says what did
 * parse (semantics §3 row 1). Only a content mode that cannot be told
 * (ce_detect) leaves nothing to read. */
static sg_err_t parse(pctx_t *c, sg_envelope_t *env, sg_envelope_keybuf_t *kb) {
        sg_err_t err = SG_OK;

        if (c->tc->id.kind == SG_SRC_NONE)
                return fail(c->errstr, c->errstr_size,
                            "topic configuration has no id source");
        if (c->ce) {
                sg_err_t e = ce_detect(c);
                if (e)
                        return e;
                if (!field_done(c, ce_check(c), &err))
                        return err;
        }
        if (!field_done(c, parse_key(c, env, kb), &err) ||
            !field_done(c, parse_aggregate(c, env), &err) ||
            !field_done(c, parse_version(c, env), &err) ||
            !field_done(c, parse_epoch(c, env), &err) ||
            !field_done(c, parse_type(c, env), &err) ||
            !field_done(c, parse_digest(c, env), &err))
                return err;
        return err;
}

/* The reusable parts of @p env, created on its first parse. */
static env_priv_t *env_priv(sg_envelope_t *env) {
        env_priv_t *pv = env->_priv;

        if (pv)
                return pv;
        if (!(pv = calloc(1, sizeof(*pv))))
                return NULL;
        if (!(pv->md = EVP_MD_CTX_new()) ||
            sg_json_doc_new(&pv->doc) != SG_OK) {
                EVP_MD_CTX_free(pv->md);
                free(pv);
                return NULL;
        }
        env->_priv = pv;
        return pv;
}

sg_err_t sg_envelope_sha256(sg_envelope_t *env, const void *data, size_t len,
                            unsigned char *out) {
        env_priv_t *pv = env_priv(env);

        if (pv && sg_sha256_ctx(pv->md, data, len, out))
                return SG_OK;
        memset(out, 0, SG_HASH_LEN);
        return SG_ERR_NOMEM;
}

sg_err_t sg_envelope_parse(const sg_topic_config_t *tc, const sg_record_t *rec,
                           sg_envelope_t *env, char *errstr,
                           size_t errstr_size) {
        pctx_t c;
        sg_envelope_keybuf_t kb;
        sg_err_t err;

        if (errstr && errstr_size > 0)
                errstr[0] = '\0';
        if (!env)
                return fail(errstr, errstr_size, "no envelope to parse into");
        envelope_reset(env);
        if (!tc || !rec)
                return fail(errstr, errstr_size,
                            "no topic configuration or record");

        memset(&c, 0, sizeof(c));
        c.tc = tc;
        c.rec = rec;
        c.ce = tc->format == SG_FORMAT_CLOUDEVENTS;
        c.max_field =
                tc->max_field_bytes ? tc->max_field_bytes : DEFAULT_MAX_FIELD;
        c.errstr = errstr;
        c.errstr_size = errstr_size;

        if (!(c.pv = env_priv(env))) {
                fail(errstr, errstr_size, "out of memory parsing the envelope");
                return SG_ERR_NOMEM;
        }

        sg_envelope_keybuf_init(&kb);
        err = parse(&c, env, &kb);
        sg_envelope_keybuf_free(&kb);
        if (err == SG_ERR_NOMEM)
                fail(errstr, errstr_size, "out of memory parsing the envelope");
        if (err && err != SG_ERR_INVALID)
                envelope_reset(env); /* malformed keeps what parsed */
        return err;
}
