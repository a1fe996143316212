/*
 * arena.c — the bump allocator of arena.h.
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

void *sg_arena_alloc(arena_t *a, size_t n) {
        n = (n + 15) & ~(size_t)15;
        if (!a->head || a->head->size - a->head->used < n) {
                size_t size = n > 65536 ? n : 65536;
                arena_chunk_t *c = malloc(sizeof(*c) + size);
                if (!c)
                        return NULL;
                c->size = size;
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
        /* Keep one chunk for the next batch; free the rest. */
        arena_chunk_t *c = a->head;
        if (!c)
                return;
        arena_chunk_t *n = c->next;
        c->next = NULL;
        c->used = 0;
        while (n) {
                arena_chunk_t *next = n->next;
                free(n);
                n = next;
        }
}

void sg_arena_free(arena_t *a) {
        arena_chunk_t *c = a->head;
        while (c) {
                arena_chunk_t *n = c->next;
                free(c);
                c = n;
        }
        a->head = NULL;
}
