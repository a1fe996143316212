/*
 * arena.h — a bump allocator in 64 KiB chunks: many small allocations that
 * all live until one reset or free (the engine's batch, the store's
 * captured changes of a transaction). Not thread-safe; the owner of the
 * arena_t serialises its use. The library never exits: a failed
 * allocation is NULL.
 */
#ifndef SEQGATE_ARENA_H
#define SEQGATE_ARENA_H

#include <stddef.h>

typedef struct arena_chunk {
        struct arena_chunk *next;
        size_t used, size;
        max_align_t data[];
} arena_chunk_t;

/** Bytes of chunks a reset keeps for reuse (the rest are freed). */
#define SG_ARENA_KEEP ((size_t)8 << 20)

/** An arena; zero-initialised it is empty. */
typedef struct arena {
        arena_chunk_t *head;  /* in use, newest first */
        arena_chunk_t *spare; /* kept by a reset for reuse */
        size_t spare_bytes;   /* their sizes' sum, at most SG_ARENA_KEEP */
} arena_t;

/** @p n bytes (16-aligned) from the arena, or NULL (out of memory). */
void *sg_arena_alloc(arena_t *a, size_t n);
/** A copy of @p n bytes of @p p in the arena (n may be 0), or NULL. */
void *sg_arena_dup(arena_t *a, const void *p, size_t n);
/** Forgets every allocation, keeping its chunks (up to SG_ARENA_KEEP
 *  bytes) for the allocations that follow. */
void sg_arena_reset(arena_t *a);
/** Frees every chunk; the arena is empty again. */
void sg_arena_free(arena_t *a);

#endif /* SEQGATE_ARENA_H */
