/*
 * json.c — the envelope's JSON (contract in json.h): yajl's callback parser
 * builds a flat tree that keeps number text and decoded strings, RFC 6901
 * pointers walk it (the canonical writer that streams it for digests is
 * json_canon.c; the document's layout is json_int.h).
 *
 * Hot path: this runs once per record that needs its value as JSON. A
 * document is reused, so in steady state a parse allocates nothing:
 *  - yajl's handle, lexer, state stack and decode buffer come from the
 *    document's arena (yajl_alloc_funcs), released at once by the next
 *    parse;
 *  - nodes, member order and decoded strings live in arrays kept from
 *    record to record (trimmed back after an unusually large record);
 *  - strings without escapes and numbers point into the input itself.
 *
 * Strings with escapes: yajl hands over its decoding, which maps a lone
 * UTF-16 surrogate to '?' (and pairs a high surrogate with any following
 * \u escape). Those strings are decoded again here from their raw text,
 * strictly; the raw text is found from yajl_get_bytes_consumed(), which in
 * a callback is the offset just past the token (the whole value is one
 * chunk, so that offset is into the input).
 *
 * Rules: RFC 8259 (JSON), RFC 6901 (pointers), RFC 3629 (UTF-8), RFC 7493
 * §2.1 and §2.3 (no lone surrogates, unique names), RFC 8785 §3.2.2.2
 * (string escapes), semantics §2 (numbers keep their text; versions).
 */
#include "json_int.h"

#include "envelope.h" /* sg_utf8_valid, sg_version_parse */

#include <yajl/yajl_parse.h>

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buffers kept between parses up to these sizes; larger ones are freed
 * when the next parse starts, so one huge record does not pin memory. */
#define KEEP_NODES 16384
#define KEEP_ORDER 16384
#define KEEP_SCRATCH (1u << 20)
#define KEEP_ARENA (1u << 20)
#define ARENA_FIRST 8192
#define NAME_QUOTE 32 /* most bytes of a member name quoted in an error */

/* ------------------------------------------------------------------ */
/* Arena for yajl's allocations                                          */
/* ------------------------------------------------------------------ */

typedef struct blk {
        struct blk *next;
        size_t cap, used;
        _Alignas(16) unsigned char data[];
} blk_t;

/* Each allocation is preceded by its size, in a 16-byte header. */
#define HDR 16

static size_t round16(size_t n) {
        return (n + 15) & ~(size_t)15;
}

static void *ar_malloc(void *ctx, size_t sz) {
        arena_t *a = ctx;
        blk_t *b = a->head;
        size_t need;
        unsigned char *p;

        if (sz > SIZE_MAX / 2)
                return NULL;
        need = HDR + round16(sz);
        if (!b || b->cap - b->used < need) {
                size_t cap = b ? b->cap * 2 : ARENA_FIRST;
                if (cap < need)
                        cap = need;
                if (!(b = malloc(sizeof(*b) + cap)))
                        return NULL;
                b->cap = cap;
                b->used = 0;
                b->next = a->head;
                a->head = b;
                a->total += cap;
        }
        p = b->data + b->used;
        memcpy(p, &sz, sizeof(sz));
        b->used += need;
        return p + HDR;
}

static void *ar_realloc(void *ctx, void *ptr, size_t sz) {
        arena_t *a = ctx;
        blk_t *b = a->head;
        unsigned char *p = ptr, *q;
        size_t old;

        if (!ptr)
                return ar_malloc(ctx, sz);
        memcpy(&old, p - HDR, sizeof(old));
        if (sz <= old)
                return ptr;
        /* The block's last allocation grows in place when it fits. */
        if (b && p > b->data && p < b->data + b->used &&
            p + round16(old) == b->data + b->used && sz <= SIZE_MAX / 2 &&
            round16(sz) - round16(old) <= b->cap - b->used) {
                b->used += round16(sz) - round16(old);
                memcpy(p - HDR, &sz, sizeof(sz));
                return ptr;
        }
        if (!(q = ar_malloc(ctx, sz)))
                return NULL;
        memcpy(q, p, old);
        return q;
}

static void ar_free(void *ctx, void *ptr) {
        (void)ctx;
        (void)ptr; /* released all at once by ar_reset() */
}

/* Forgets every allocation. Several blocks become one of their total size
 * (up to KEEP_ARENA), so the next parse of that size needs no malloc. */
static void ar_reset(arena_t *a) {
        blk_t *b = a->head;

        if (b && !b->next) {
                b->used = 0;
                return;
        }
        size_t total = a->total;
        while (b) {
                blk_t *n = b->next;
                free(b);
                b = n;
        }
        a->head = NULL;
        a->total = 0;
        if (total > KEEP_ARENA)
                total = KEEP_ARENA;
        if (total && (b = malloc(sizeof(*b) + total))) {
                b->cap = total;
                b->used = 0;
                b->next = NULL;
                a->head = b;
                a->total = total;
        }
}

static void ar_destroy(arena_t *a) {
        blk_t *b = a->head;
        while (b) {
                blk_t *n = b->next;
                free(b);
                b = n;
        }
        a->head = NULL;
        a->total = 0;
}

/* ------------------------------------------------------------------ */
/* Document                                                             */
/* ------------------------------------------------------------------ */

sg_err_t sg_json_doc_new(sg_json_doc_t **out) {
        sg_json_doc_t *d = calloc(1, sizeof(*d));

        *out = d;
        if (!d)
                return SG_ERR_NOMEM;
        d->afuncs.malloc = ar_malloc;
        d->afuncs.realloc = ar_realloc;
        d->afuncs.free = ar_free;
        d->afuncs.ctx = &d->arena;
        return SG_OK;
}

void sg_json_doc_destroy(sg_json_doc_t *d) {
        if (!d)
                return;
        free(d->nodes);
        free(d->order);
        free(d->scratch);
        ar_destroy(&d->arena);
        free(d);
}

const sg_json_node_t *sg_json_root(const sg_json_doc_t *d) {
        return d && d->ok && d->node_cnt ? &d->nodes[0] : NULL;
}

const char *sg_json_type_name(sg_json_type_t type) {
        switch (type) {
        case SG_JSON_NULL:
                return "null";
        case SG_JSON_FALSE:
        case SG_JSON_TRUE:
                return "boolean";
        case SG_JSON_NUMBER:
                return "number";
        case SG_JSON_STRING:
                return "string";
        case SG_JSON_ARRAY:
                return "array";
        case SG_JSON_OBJECT:
                return "object";
        }
        return "invalid value";
}

/* Where in the input the parse is: just past the last token. */
static size_t here(const sg_json_doc_t *d) {
        return d->finishing ? d->len : yajl_get_bytes_consumed(d->hand);
}

/* Records why the parse stops (the first reason wins); returns 0, which
 * makes yajl cancel the parse. */
static int stop(sg_json_doc_t *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int stop(sg_json_doc_t *d, const char *fmt, ...) {
        if (!d->failed && !d->nomem) {
                va_list ap;
                va_start(ap, fmt);
                sg_verrf(d->why, sizeof(d->why), fmt, ap);
                va_end(ap);
                d->failed = true;
                d->fail_at = here(d);
        }
        return 0;
}

static int nomem(sg_json_doc_t *d) {
        d->nomem = true;
        return 0;
}

static bool in_input(const sg_json_doc_t *d, const void *p) {
        const char *c = p;
        return d->text && c >= d->text && c <= d->text + d->len;
}

/*
 * Room for @p n more bytes of scratch. The first use in a parse reserves
 * the input's length (decoded strings are never longer than their raw
 * text, and a buffered number is part of the input), so pointers handed out
 * stay valid for the whole parse.
 */
static char *scratch_take(sg_json_doc_t *d, size_t n) {
        char *p;

        if (!d->scratch_ready) {
                size_t want = d->len + 16;
                if (d->scratch_cap < want) {
                        char *np = realloc(d->scratch, want);
                        if (!np)
                                return NULL;
                        d->scratch = np;
                        d->scratch_cap = want;
                }
                d->scratch_ready = true;
        }
        assert(d->scratch_cap - d->scratch_len >= n &&
               "scratch is reserved for the whole input");
        if (d->scratch_cap - d->scratch_len < n)
                return NULL; /* cannot happen: see above */
        p = d->scratch + d->scratch_len;
        d->scratch_len += n;
        return p;
}

/* ------------------------------------------------------------------ */
/* Strings                                                              */
/* ------------------------------------------------------------------ */

static int hexval(unsigned char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* The 4 hex digits at @p s as a code unit, or -1. */
static long hex4(const unsigned char *s) {
        long v = 0;
        for (int i = 0; i < 4; i++) {
                int h = hexval(s[i]);
                if (h < 0)
                        return -1;
                v = v << 4 | h;
        }
        return v;
}

static size_t utf8_put(unsigned char *o, unsigned long cp) {
        if (cp < 0x80) {
                o[0] = (unsigned char)cp;
                return 1;
        }
        if (cp < 0x800) {
                o[0] = (unsigned char)(0xc0 | cp >> 6);
                o[1] = (unsigned char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                o[0] = (unsigned char)(0xe0 | cp >> 12);
                o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
                o[2] = (unsigned char)(0x80 | (cp & 0x3f));
                return 3;
        }
        o[0] = (unsigned char)(0xf0 | cp >> 18);
        o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[3] = (unsigned char)(0x80 | (cp & 0x3f));
        return 4;
}

/*
 * Decodes the raw string body raw[0..n) (between the quotes, escapes
 * validated by yajl's lexer) into @p out (at least n bytes). A \u escape
 * of a high surrogate must be followed by one of a low surrogate (RFC 8259
 * §7); any other surrogate escape stops the parse.
 */
static int decode(sg_json_doc_t *d, const unsigned char *raw, size_t n,
                  unsigned char *out, size_t *out_len) {
        size_t i = 0, o = 0;

        while (i < n) {
                unsigned char c = raw[i];
                long cp, lo;

                if (c != '\\') {
                        out[o++] = c;
                        i++;
                        continue;
                }
                if (i + 1 >= n)
                        return stop(d, "string ends in an escape");
                switch (raw[i + 1]) {
                case '"':
                        out[o++] = '"';
                        break;
                case '\\':
                        out[o++] = '\\';
                        break;
                case '/':
                        out[o++] = '/';
                        break;
                case 'b':
                        out[o++] = '\b';
                        break;
                case 'f':
                        out[o++] = '\f';
                        break;
                case 'n':
                        out[o++] = '\n';
                        break;
                case 'r':
                        out[o++] = '\r';
                        break;
                case 't':
                        out[o++] = '\t';
                        break;
                case 'u':
                        if (i + 6 > n || (cp = hex4(raw + i + 2)) < 0)
                                return stop(d, "invalid \\u escape");
                        if (cp >= 0xdc00 && cp <= 0xdfff)
                                return stop(d, "lone UTF-16 surrogate \\u%04lx",
                                            cp);
                        if (cp >= 0xd800 && cp <= 0xdbff) {
                                if (i + 12 > n || raw[i + 6] != '\\' ||
                                    raw[i + 7] != 'u' ||
                                    (lo = hex4(raw + i + 8)) < 0xdc00 ||
                                    lo > 0xdfff)
                                        return stop(d,
                                                    "lone UTF-16 surrogate "
                                                    "\\u%04lx",
                                                    cp);
                                cp = 0x10000 + ((cp - 0xd800) << 10) +
                                     (lo - 0xdc00);
                                i += 6;
                        }
                        o += utf8_put(out + o, (unsigned long)cp);
                        i += 6;
                        continue;
                default:
                        return stop(d, "invalid escape");
                }
                i += 2;
        }
        *out_len = o;
        return 1;
}

/*
 * The string yajl passed to a callback, as this document keeps it: the
 * input bytes when it had no escape, else decoded again from its raw text
 * (see the file comment). UTF-8 checked strictly (RFC 3629).
 */
static int take_string(sg_json_doc_t *d, const unsigned char *s, size_t len,
                       const char **out, size_t *out_len) {
        if (in_input(d, s) && in_input(d, s + len)) {
                *out = (const char *)s;
                *out_len = len;
        } else {
                const unsigned char *t = (const unsigned char *)d->text, *end,
                                    *q;
                unsigned char *buf;
                size_t n;

                if (d->finishing)
                        return stop(d, "string at the end of the input");
                end = t + yajl_get_bytes_consumed(d->hand); /* past '"' */
                if (end <= t || end > t + d->len || end[-1] != '"')
                        return stop(d, "string not found in the input");
                /* The opening quote: the first '"' before the closing one
                 * that follows an even run of backslashes (a '"' inside the
                 * string is always escaped). */
                for (q = end - 2;; q--) {
                        size_t k = 0;
                        if (q < t)
                                return stop(d, "string not found in the input");
                        if (*q != '"')
                                continue;
                        while (q - k > t && q[-1 - (ptrdiff_t)k] == '\\')
                                k++;
                        if (k % 2 == 0)
                                break;
                }
                n = (size_t)(end - 1 - (q + 1));
                if (!(buf = (unsigned char *)scratch_take(d, n)))
                        return nomem(d);
                if (!decode(d, q + 1, n, buf, out_len))
                        return 0;
                /* give back what decoding saved */
                d->scratch_len -= n - *out_len;
                *out = (const char *)buf;
        }
        if (!sg_utf8_valid(*out, *out_len))
                return stop(d, "string is not valid UTF-8");
        return 1;
}

/* ------------------------------------------------------------------ */
/* Tree building (yajl callbacks)                                       */
/* ------------------------------------------------------------------ */

/* Appends a node as the next value (root, array element or the pending
 * member); returns its index, or 0 after stop()/nomem() (the root is
 * index 0 but is never added twice). */
static uint32_t add(sg_json_doc_t *d, sg_json_type_t type, const char *text,
                    size_t len) {
        uint32_t idx;
        sg_json_node_t *n;

        if (d->node_cnt == d->node_cap) {
                size_t cap = d->node_cap ? d->node_cap * 2 : 64;
                sg_json_node_t *nn;
                if (cap > UINT32_MAX) {
                        stop(d, "more than 2^32 values");
                        return 0;
                }
                if (!(nn = realloc(d->nodes, cap * sizeof(*nn)))) {
                        nomem(d);
                        return 0;
                }
                d->nodes = nn;
                d->node_cap = cap;
        }
        idx = (uint32_t)d->node_cnt++;
        n = &d->nodes[idx];
        memset(n, 0, sizeof(*n));
        n->type = type;
        n->text = text;
        n->len = len;
        if (d->depth > 0) {
                frame_t *f = &d->stack[d->depth - 1];
                sg_json_node_t *p = &d->nodes[f->node];
                if (p->type == SG_JSON_OBJECT) {
                        n->name = d->name;
                        n->name_len = d->name_len;
                }
                if (f->last)
                        d->nodes[f->last]._next = idx;
                else
                        p->_first = idx;
                f->last = idx;
                if (p->count == UINT32_MAX) {
                        stop(d, "more than 2^32 members");
                        return 0;
                }
                p->count++;
        }
        return idx;
}

static int added(sg_json_doc_t *d, uint32_t idx) {
        return idx || (!d->failed && !d->nomem);
}

static int cb_null(void *ctx) {
        sg_json_doc_t *d = ctx;
        return added(d, add(d, SG_JSON_NULL, NULL, 0));
}

static int cb_boolean(void *ctx, int b) {
        sg_json_doc_t *d = ctx;
        return added(d, add(d, b ? SG_JSON_TRUE : SG_JSON_FALSE, NULL, 0));
}

static int cb_number(void *ctx, const char *s, size_t len) {
        sg_json_doc_t *d = ctx;

        if (!(in_input(d, s) && in_input(d, s + len))) {
                /* yajl buffered it (a number at the very end) */
                char *p = scratch_take(d, len);
                if (!p)
                        return nomem(d);
                memcpy(p, s, len);
                s = p;
        }
        return added(d, add(d, SG_JSON_NUMBER, s, len));
}

static int cb_string(void *ctx, const unsigned char *s, size_t len) {
        sg_json_doc_t *d = ctx;
        const char *p;
        size_t n;

        if (!take_string(d, s, len, &p, &n))
                return 0;
        return added(d, add(d, SG_JSON_STRING, p, n));
}

static int open_container(sg_json_doc_t *d, sg_json_type_t type) {
        uint32_t idx;

        if (d->depth == SG_JSON_MAX_DEPTH)
                return stop(d, "nesting deeper than %d", SG_JSON_MAX_DEPTH);
        idx = add(d, type, NULL, 0);
        if (!added(d, idx))
                return 0;
        d->stack[d->depth].node = idx;
        d->stack[d->depth].last = 0;
        d->depth++;
        return 1;
}

static int cb_start_map(void *ctx) {
        return open_container(ctx, SG_JSON_OBJECT);
}
static int cb_start_array(void *ctx) {
        return open_container(ctx, SG_JSON_ARRAY);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t len) {
        sg_json_doc_t *d = ctx;
        return take_string(d, s, len, &d->name, &d->name_len);
}

static int cb_end_array(void *ctx) {
        sg_json_doc_t *d = ctx;
        d->depth--;
        return 1;
}

static int name_cmp(const sg_json_node_t *a, const sg_json_node_t *b) {
        size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
        int c = n ? memcmp(a->name, b->name, n) : 0;
        if (c)
                return c;
        return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

static int order_cmp(const void *x, const void *y, void *ctx) {
        const sg_json_doc_t *d = ctx;
        return name_cmp(&d->nodes[*(const uint32_t *)x],
                        &d->nodes[*(const uint32_t *)y]);
}

/* Closes an object: its members sorted by name into the order array (the
 * canonical writer's order), and a name found twice stops the parse. */
static int cb_end_map(void *ctx) {
        sg_json_doc_t *d = ctx;
        uint32_t idx = d->stack[--d->depth].node, c, *o;
        sg_json_node_t *obj = &d->nodes[idx];
        size_t n = obj->count, i;

        obj->_sorted = (uint32_t)d->order_cnt;
        if (n == 0)
                return 1; /* nothing to order (and the array may not exist) */
        if (n > d->order_cap - d->order_cnt) {
                size_t cap = d->order_cap ? d->order_cap : 256;
                uint32_t *no;
                while (cap - d->order_cnt < n)
                        cap *= 2;
                if (!(no = realloc(d->order, cap * sizeof(*no))))
                        return nomem(d);
                d->order = no;
                d->order_cap = cap;
        }
        o = d->order + d->order_cnt;
        for (c = obj->_first, i = 0; i < n; c = d->nodes[c]._next, i++)
                o[i] = c;
        d->order_cnt += n;
        if (n < 2)
                return 1;
        if (n <= 8) {
                /* insertion sort: most objects are small */
                for (i = 1; i < n; i++) {
                        uint32_t v = o[i];
                        size_t j = i;
                        while (j > 0 && name_cmp(&d->nodes[o[j - 1]],
                                                 &d->nodes[v]) > 0) {
                                o[j] = o[j - 1];
                                j--;
                        }
                        o[j] = v;
                }
        } else {
                qsort_r(o, n, sizeof(*o), order_cmp, d);
        }
        for (i = 1; i < n; i++) {
                const sg_json_node_t *a = &d->nodes[o[i - 1]];
                if (name_cmp(a, &d->nodes[o[i]]) == 0) {
                        char q[NAME_QUOTE + 4];
                        return stop(
                                d, "duplicate member name \"%s\"",
                                sg_quote(q, a->name, a->name_len, NAME_QUOTE));
                }
        }
        return 1;
}

static const yajl_callbacks callbacks = {
        .yajl_null = cb_null,
        .yajl_boolean = cb_boolean,
        .yajl_number = cb_number, /* the text: integer/double unused */
        .yajl_string = cb_string,
        .yajl_start_map = cb_start_map,
        .yajl_map_key = cb_map_key,
        .yajl_end_map = cb_end_map,
        .yajl_start_array = cb_start_array,
        .yajl_end_array = cb_end_array,
};

/* Drops buffers a huge record grew, before the next parse. */
static void trim(sg_json_doc_t *d) {
        if (d->node_cap > KEEP_NODES) {
                free(d->nodes);
                d->nodes = NULL;
                d->node_cap = 0;
        }
        if (d->order_cap > KEEP_ORDER) {
                free(d->order);
                d->order = NULL;
                d->order_cap = 0;
        }
        if (d->scratch_cap > KEEP_SCRATCH) {
                free(d->scratch);
                d->scratch = NULL;
                d->scratch_cap = 0;
        }
}

/* yajl's message without its "parse error: " prefix and final newline. */
static void yajl_why(sg_json_doc_t *d, char *buf, size_t size) {
        unsigned char *e = yajl_get_error(d->hand, 0, NULL, 0);
        const char *m = e ? (const char *)e : "invalid JSON", *colon;
        size_t n;

        if ((colon = strstr(m, "error: ")))
                m = colon + 7;
        n = strcspn(m, "\n");
        while (n > 0 && m[n - 1] == '.')
                n--;
        sg_errf(buf, size, "%.*s", (int)n, m);
        if (e)
                yajl_free_error(d->hand, e);
}

sg_err_t sg_json_parse(sg_json_doc_t *d, const char *text, size_t len,
                       char *errstr, size_t errstr_size) {
        yajl_status st;
        size_t at;
        char why[96];

        if (errstr && errstr_size)
                errstr[0] = '\0';
        trim(d);
        ar_reset(&d->arena);
        d->node_cnt = d->order_cnt = d->scratch_len = 0;
        d->scratch_ready = d->ok = d->finishing = d->nomem = d->failed = false;
        d->depth = 0;
        d->name = NULL;
        d->name_len = 0;
        d->text = text;
        d->len = len;

        if (!(d->hand = yajl_alloc(&callbacks, &d->afuncs, d)))
                return SG_ERR_NOMEM;
        /* Strict RFC 8259 (yajl_tree_parse would allow comments). */
        yajl_config(d->hand, yajl_allow_comments, 0);
        yajl_config(d->hand, yajl_dont_validate_strings, 0);
        yajl_config(d->hand, yajl_allow_trailing_garbage, 0);
        yajl_config(d->hand, yajl_allow_multiple_values, 0);
        yajl_config(d->hand, yajl_allow_partial_values, 0);

        st = yajl_parse(d->hand, (const unsigned char *)(text ? text : ""),
                        len);
        at = yajl_get_bytes_consumed(d->hand);
        if (st == yajl_status_ok) {
                d->finishing = true;
                st = yajl_complete_parse(d->hand);
                at = len;
        }
        if (st == yajl_status_ok && !d->failed && !d->nomem) {
                d->ok = d->node_cnt > 0;
                yajl_free(d->hand);
                d->hand = NULL;
                if (d->ok)
                        return SG_OK;
                sg_errf(why, sizeof(why), "no value");
        } else if (d->nomem) {
                yajl_free(d->hand);
                d->hand = NULL;
                return SG_ERR_NOMEM;
        } else if (d->failed) {
                at = d->fail_at;
                sg_errf(why, sizeof(why), "%s", d->why);
        } else {
                yajl_why(d, why, sizeof(why));
        }
        if (d->hand) {
                yajl_free(d->hand);
                d->hand = NULL;
        }
        if (at > len)
                at = len;
        sg_errf(errstr, errstr_size, "error at byte %zu of %zu: %s", at, len,
                why);
        return SG_ERR_INVALID;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                              */
/* ------------------------------------------------------------------ */

const sg_json_node_t *sg_json_member(const sg_json_doc_t *d,
                                     const sg_json_node_t *obj,
                                     const char *name, size_t name_len) {
        if (!obj || obj->type != SG_JSON_OBJECT)
                return NULL;
        for (uint32_t c = obj->_first; c; c = d->nodes[c]._next) {
                const sg_json_node_t *m = &d->nodes[c];
                if (m->name_len == name_len &&
                    (name_len == 0 || memcmp(m->name, name, name_len) == 0))
                        return m;
        }
        return NULL;
}

/* True if member name @p key equals reference token tok[0..toklen) after
 * unescaping ~0 and ~1 (RFC 6901 §4), without allocating. */
static bool token_equals(const char *key, size_t key_len, const char *tok,
                         size_t toklen) {
        size_t i = 0, k = 0;

        while (i < toklen) {
                char c = tok[i];
                if (c == '~') {
                        c = tok[i + 1] == '0' ? '~' : '/';
                        i += 2;
                } else {
                        i++;
                }
                if (k == key_len || key[k] != c)
                        return false;
                k++;
        }
        return k == key_len;
}

const sg_json_node_t *sg_json_pointer_get(const sg_json_doc_t *d,
                                          const sg_json_node_t *from,
                                          const char *pointer) {
        const sg_json_node_t *node = from;
        const char *p = pointer;

        if (!d || !node || !pointer)
                return NULL;
        if (*p == '\0')
                return node; /* "" is the whole document (RFC 6901 §5) */
        if (*p != '/')
                return NULL;

        while (*p == '/') {
                const char *tok = ++p;
                size_t toklen;
                uint32_t c;

                while (*p && *p != '/')
                        p++;
                toklen = (size_t)(p - tok);
                for (size_t i = 0; i < toklen; i++)
                        if (tok[i] == '~' &&
                            (i + 1 >= toklen ||
                             (tok[i + 1] != '0' && tok[i + 1] != '1')))
                                return NULL; /* invalid escape (RFC 6901 §3) */

                if (node->type == SG_JSON_OBJECT) {
                        for (c = node->_first; c; c = d->nodes[c]._next)
                                if (token_equals(d->nodes[c].name,
                                                 d->nodes[c].name_len, tok,
                                                 toklen))
                                        break;
                } else if (node->type == SG_JSON_ARRAY) {
                        /* array-index = %x30 / ( %x31-39 *(%x30-39) ); "-"
                         * never names an existing element (RFC 6901 §4). */
                        size_t idx = 0;
                        if (toklen == 0 || (toklen > 1 && tok[0] == '0'))
                                return NULL;
                        for (size_t i = 0; i < toklen; i++) {
                                if (tok[i] < '0' || tok[i] > '9')
                                        return NULL;
                                if (idx > (SIZE_MAX - 9) / 10)
                                        return NULL;
                                idx = idx * 10 + (size_t)(tok[i] - '0');
                        }
                        if (idx >= node->count)
                                return NULL;
                        for (c = node->_first; idx > 0; idx--)
                                c = d->nodes[c]._next;
                } else {
                        return NULL;
                }
                if (!c)
                        return NULL;
                node = &d->nodes[c];
        }
        return node;
}

/* ------------------------------------------------------------------ */
/* Versions                                                             */
/* ------------------------------------------------------------------ */

/* Digits of SG_JSON_INT_MAX (2^53): longer number text is larger (no
 * leading zeros), and 16 digits never overflow a uint64_t. */
#define INT_MAX_DIGITS 16
_Static_assert(SG_JSON_INT_MAX >= INT64_C(1000000000000000) &&
                       SG_JSON_INT_MAX < INT64_C(10000000000000000),
               "SG_JSON_INT_MAX has INT_MAX_DIGITS digits");

sg_err_t sg_json_number_version(const char *text, size_t len, uint64_t *out) {
        uint64_t v = 0;

        if (!text || len == 0 || len > INT_MAX_DIGITS)
                return SG_ERR_INVALID;
        for (size_t i = 0; i < len; i++)
                if (text[i] < '0' || text[i] > '9')
                        return SG_ERR_INVALID; /* sign, fraction, exponent */
        if (len > 1 && text[0] == '0')
                return SG_ERR_INVALID; /* not JSON number text */
        for (size_t i = 0; i < len; i++)
                v = v * 10 + (uint64_t)(text[i] - '0');
        if (v > (uint64_t)SG_JSON_INT_MAX)
                return SG_ERR_INVALID;
        if (out)
                *out = v;
        return SG_OK;
}

sg_err_t sg_json_version_get(const char *json, size_t len, const char *pointer,
                             uint64_t *out) {
        sg_json_doc_t *d;
        const sg_json_node_t *n;
        sg_err_t err;

        if ((err = sg_json_doc_new(&d)))
                return err;
        if (!(err = sg_json_parse(d, json, len, NULL, 0))) {
                n = sg_json_pointer_get(d, sg_json_root(d),
                                        pointer ? pointer : "");
                if (n && n->type == SG_JSON_NUMBER)
                        err = sg_json_number_version(n->text, n->len, out);
                else if (n && n->type == SG_JSON_STRING)
                        err = sg_version_parse(n->text, n->len, out);
                else
                        err = SG_ERR_INVALID;
        }
        sg_json_doc_destroy(d);
        return err;
}
