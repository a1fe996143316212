/*
 * json_int.h — the document's layout, shared by the parser (json.c) and the
 * canonical writer (json_canon.c); not part of the library's interface
 * (json.h is).
 */
#ifndef SEQGATE_JSON_INT_H
#define SEQGATE_JSON_INT_H

#include "json.h"

#include <yajl/yajl_parse.h>

#include <stdbool.h>

struct blk;

typedef struct arena {
        struct blk *head; /* current block first */
        size_t total;     /* capacity of all blocks */
} arena_t;

typedef struct frame {
        uint32_t node, last; /* open container, its last child so far */
} frame_t;

struct sg_json_doc {
        sg_json_node_t *nodes;
        size_t node_cnt, node_cap;
        uint32_t *order; /* object members sorted by name, per object */
        size_t order_cnt, order_cap;
        char *scratch; /* decoded strings, numbers yajl buffered */
        size_t scratch_len, scratch_cap;
        bool scratch_ready; /* reserved for this parse: never moves now */
        bool ok;            /* the tree is the last parse's, complete */

        /* parse state */
        const char *text;
        size_t len;
        yajl_handle hand;
        bool finishing; /* inside yajl_complete_parse() */
        frame_t stack[SG_JSON_MAX_DEPTH];
        size_t depth;
        const char *name; /* pending member name */
        size_t name_len;
        bool nomem;
        bool failed; /* why[] holds the reason */
        size_t fail_at;
        char why[96];

        arena_t arena;
        yajl_alloc_funcs afuncs;
};

#endif /* SEQGATE_JSON_INT_H */
