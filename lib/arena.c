/*
 * arena.c — the bump allocator of arena.h.
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

/* A chunk of the spare list with room for @p n bytes, unlinked, or NULL. */
static arena_chunk_t *spare_take(arena_t *a, size_t n) {
        for (arena_chunk_t **pp = &a->spare; *pp; pp = &(*pp)->next)
                if ((*pp)->size >= n) {
                        arena_chunk_t *c = *pp;
                        *pp = c->next;
                        a->spare_bytes -= c->size;
                        return c;
                }
        return NULL;
}

void *sg_arena_alloc(arena_t *a, size_t n) {
        n = (n + 15) & ~(size_t)15;
        if (!a->head || a->head->size - a->head->used < n) {
                arena_chunk_t *c = spare_take(a, n);
                if (!c) {
                        size_t size = n > 65536 ? n : 65536;
                        if (!(c = malloc(sizeof(*c) + size)))
                                return NULL;
                        c->size = size;
                }
                c->used = 0;
                c->next = a->head;
                a->head = c;
        }
        void *p = (char *)a->head->data + a->head->used;
        a->head->used += n;
        return p;
}

void *sg_arena_dup(arena_t *a, const void *p, size_t n) {
        void *q = sg_arena_alloc(a, n ? n : 1);
        if (q && n)
                memcpy(q, p, n);
        return q;
}

void sg_arena_reset(arena_t *a) {
        /* Keep the chunks for the next round (up to SG_ARENA_KEEP bytes):
         * a batch's arena fills the same few chunks every batch, and
         * freeing them only to malloc them again costs the allocator's
         * consolidation of its free lists each time. */
        arena_chunk_t *c = a->head;
        a->head = NULL;
        while (c) {
                arena_chunk_t *next = c->next;
                if (a->spare_bytes + c->size <= SG_ARENA_KEEP) {
                        c->next = a->spare;
                        a->spare = c;
                        a->spare_bytes += c->size;
                } else {
                        free(c);
                }
                c = next;
        }
}

static void chain_free(arena_chunk_t *c) {
        while (c) {
                arena_chunk_t *n = c->next;
                free(c);
                c = n;
        }
}

void sg_arena_free(arena_t *a) {
        chain_free(a->head);
        chain_free(a->spare);
        memset(a, 0, sizeof(*a));
}
