/*
 * json_canon.c — the canonical form of a parsed JSON value (json.h
 * "Canonical form", docs/configuration.md "Canonical JSON"), streamed for
 * digests, and sg_json_canonicalize, its text-to-text form. Rules: RFC 8785
 * §3.2.2.2 (string escapes), semantics §2 (numbers keep their text).
 */
#include "json_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Canonical writer                                                     */
/* ------------------------------------------------------------------ */

typedef struct writer {
        sg_json_write_fn fn;
        void *opaque;
        sg_err_t err;
        size_t n;
        unsigned char buf[1024];
} writer_t;

static void w_flush(writer_t *w) {
        if (w->n && !w->err)
                w->err = w->fn(w->opaque, w->buf, w->n);
        w->n = 0;
}

static void w_put(writer_t *w, const void *p, size_t len) {
        const unsigned char *s = p;

        while (len && !w->err) {
                size_t room = sizeof(w->buf) - w->n,
                       k = len < room ? len : room;
                memcpy(w->buf + w->n, s, k);
                w->n += k;
                s += k;
                len -= k;
                if (w->n == sizeof(w->buf))
                        w_flush(w);
        }
}

static void w_byte(writer_t *w, unsigned char c) {
        if (w->n == sizeof(w->buf))
                w_flush(w);
        w->buf[w->n++] = c;
}

/* A string as RFC 8785 §3.2.2.2 writes it. */
static void w_string(writer_t *w, const char *s, size_t len) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = (const unsigned char *)s;
        size_t run = 0;

        w_byte(w, '"');
        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];
                char esc[6];
                size_t elen = 2;

                if (c >= 0x20 && c != '"' && c != '\\')
                        continue;
                w_put(w, p + run, i - run);
                run = i + 1;
                esc[0] = '\\';
                switch (c) {
                case '"':
                        esc[1] = '"';
                        break;
                case '\\':
                        esc[1] = '\\';
                        break;
                case '\b':
                        esc[1] = 'b';
                        break;
                case '\f':
                        esc[1] = 'f';
                        break;
                case '\n':
                        esc[1] = 'n';
                        break;
                case '\r':
                        esc[1] = 'r';
                        break;
                case '\t':
                        esc[1] = 't';
                        break;
                default:
                        esc[1] = 'u';
                        esc[2] = '0';
                        esc[3] = '0';
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 0xf];
                        elen = 6;
                        break;
                }
                w_put(w, esc, elen);
        }
        w_put(w, p + run, len - run);
        w_byte(w, '"');
}

typedef struct wframe {
        uint32_t node; /* open container */
        uint32_t pos;  /* members written so far */
        uint32_t next; /* arrays: the next element */
} wframe_t;

sg_err_t sg_json_canonical_write(const sg_json_doc_t *d,
                                 const sg_json_node_t *node,
                                 sg_json_write_fn fn, void *opaque) {
        writer_t w;
        wframe_t stack[SG_JSON_MAX_DEPTH];
        size_t sp = 0;
        uint32_t cur;

        if (!d || !node || !fn)
                return SG_ERR_INVALID;
        w.fn = fn;
        w.opaque = opaque;
        w.err = SG_OK;
        w.n = 0;
        cur = (uint32_t)(node - d->nodes);

        for (;;) {
                const sg_json_node_t *n = &d->nodes[cur];

                /* the value */
                switch (n->type) {
                case SG_JSON_NULL:
                        w_put(&w, "null", 4);
                        break;
                case SG_JSON_FALSE:
                        w_put(&w, "false", 5);
                        break;
                case SG_JSON_TRUE:
                        w_put(&w, "true", 4);
                        break;
                case SG_JSON_NUMBER:
                        w_put(&w, n->text, n->len);
                        break;
                case SG_JSON_STRING:
                        w_string(&w, n->text, n->len);
                        break;
                case SG_JSON_ARRAY:
                case SG_JSON_OBJECT:
                        w_byte(&w, n->type == SG_JSON_ARRAY ? '[' : '{');
                        if (n->count == 0) {
                                w_byte(&w,
                                       n->type == SG_JSON_ARRAY ? ']' : '}');
                                break;
                        }
                        if (sp == SG_JSON_MAX_DEPTH)
                                return SG_ERR_INVALID; /* parse refuses deeper */
                        stack[sp].node = cur;
                        stack[sp].pos = 0;
                        stack[sp].next = n->_first;
                        sp++;
                        break;
                }

                /* the next value: a member or element of the innermost open
                 * container with any left, closing the finished ones */
                for (;;) {
                        wframe_t *f;
                        const sg_json_node_t *c;

                        if (sp == 0) {
                                w_flush(&w);
                                return w.err;
                        }
                        f = &stack[sp - 1];
                        c = &d->nodes[f->node];
                        if (f->pos == c->count) {
                                w_byte(&w,
                                       c->type == SG_JSON_ARRAY ? ']' : '}');
                                sp--;
                                continue;
                        }
                        if (f->pos)
                                w_byte(&w, ',');
                        if (c->type == SG_JSON_OBJECT) {
                                cur = d->order[c->_sorted + f->pos];
                                w_string(&w, d->nodes[cur].name,
                                         d->nodes[cur].name_len);
                                w_byte(&w, ':');
                        } else {
                                cur = f->next;
                                f->next = d->nodes[cur]._next;
                        }
                        f->pos++;
                        break;
                }
                if (w.err)
                        return w.err;
        }
}

/* ------------------------------------------------------------------ */
/* Text-only helpers                                                    */
/* ------------------------------------------------------------------ */

typedef struct growbuf {
        char *p;
        size_t len, cap;
} growbuf_t;

static sg_err_t grow_put(void *opaque, const void *bytes, size_t len) {
        growbuf_t *g = opaque;

        if (g->cap - g->len <= len) {
                size_t cap = g->cap ? g->cap : 256;
                char *np;
                while (cap - g->len <= len)
                        cap *= 2;
                if (!(np = realloc(g->p, cap)))
                        return SG_ERR_NOMEM;
                g->p = np;
                g->cap = cap;
        }
        memcpy(g->p + g->len, bytes, len);
        g->len += len;
        g->p[g->len] = '\0';
        return SG_OK;
}

sg_err_t sg_json_canonicalize(const char *text, size_t len, const char *pointer,
                              char **out, size_t *out_len, char *errstr,
                              size_t errstr_size) {
        sg_json_doc_t *d;
        const sg_json_node_t *node;
        growbuf_t g = {NULL, 0, 0};
        sg_err_t err;

        *out = NULL;
        if (out_len)
                *out_len = 0;
        if ((err = sg_json_doc_new(&d))) {
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        if ((err = sg_json_parse(d, text, len, errstr, errstr_size)))
                goto done;
        if (!(node = sg_json_pointer_get(d, sg_json_root(d),
                                         pointer ? pointer : ""))) {
                sg_errf(errstr, errstr_size,
                        "JSON Pointer %.64s: no such value",
                        pointer ? pointer : "");
                err = SG_ERR_INVALID;
                goto done;
        }
        err = grow_put(&g, "", 0);
        if (!err)
                err = sg_json_canonical_write(d, node, grow_put, &g);
        if (err) {
                free(g.p);
                sg_errf(errstr, errstr_size, "out of memory");
                goto done;
        }
        *out = g.p;
        if (out_len)
                *out_len = g.len;
done:
        sg_json_doc_destroy(d);
        return err;
}
