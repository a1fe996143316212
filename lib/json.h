/*
 * json.h — JSON as the envelope reads it: parsed once by yajl into a
 * reusable tree that keeps every value exactly (semantics §2), addressed by
 * RFC 6901 JSON Pointers, and written back in seqgate's canonical form for
 * payload digests.
 *
 * Why not a double: a JSON number is kept as the text it was written as.
 * 9007199254740993 and 9007199254740992, 1.0 and 1.00, 1e400 and 1e401 are
 * different values here; a parser that goes through IEEE doubles (cJSON)
 * makes them equal and turns a different payload into a "duplicate".
 *
 * Accepted input (RFC 8259, strictly; yajl's lexer with comments, trailing
 * garbage, multiple and partial values all off):
 *  - one JSON value, whitespace around it allowed;
 *  - strings: valid UTF-8 (RFC 3629: no overlongs, no encoded surrogates),
 *    escapes decoded; a \u escape of a lone UTF-16 surrogate is refused
 *    (RFC 8785 §3.2.2.2 and I-JSON, RFC 7493 §2.1, refuse it too; yajl
 *    itself would turn it into '?', so "\ud800" and "?" would collide);
 *  - a member name at most once per object (RFC 7493 §2.3): with two, which
 *    one a consumer sees depends on its parser;
 *  - at most SG_JSON_MAX_DEPTH nested arrays/objects.
 * Anything else is SG_ERR_INVALID with "error at byte N of M: why".
 *
 * Canonical form (docs/configuration.md "Canonical JSON"): no whitespace;
 * object members sorted by name, comparing the names' UTF-8 bytes (= Unicode
 * code point order); arrays in order; strings and names as RFC 8785 §3.2.2.2
 * writes them (\" \\ \b \f \n \r \t, \u00xx in lower-case hex for the other
 * control characters, every other character as its UTF-8 bytes); numbers
 * as their text, unchanged (RFC 8785 would re-serialise them as doubles:
 * exactly the loss refused here); true, false, null.
 *
 * Thread-safety: a document is owned by one thread; the functions that take
 * only text (sg_json_canonicalize, sg_json_version_get,
 * sg_json_number_version) are reentrant.
 */
#ifndef SEQGATE_JSON_H
#define SEQGATE_JSON_H

#include "seqgate.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Deepest nesting of arrays and objects accepted (cJSON's limit, kept). */
#define SG_JSON_MAX_DEPTH 1000

typedef enum sg_json_type {
        SG_JSON_NULL = 0,
        SG_JSON_FALSE,
        SG_JSON_TRUE,
        SG_JSON_NUMBER,
        SG_JSON_STRING,
        SG_JSON_ARRAY,
        SG_JSON_OBJECT,
} sg_json_type_t;

/**
 * One value of a parsed document, borrowed from it (valid until the next
 * sg_json_parse() into the document, or its destruction).
 */
typedef struct sg_json_node {
        sg_json_type_t type;
        /** string: the decoded UTF-8 bytes (may hold NUL bytes, not
         *  NUL-terminated); number: the text as written; else NULL */
        const char *text;
        size_t len;
        /** the member name (decoded) when this is an object member, else NULL */
        const char *name;
        size_t name_len;
        uint32_t count; /**< array elements or object members */
        /* private: */
        uint32_t _first, _next; /* first child, next sibling; 0 = none */
        uint32_t _sorted; /* objects: members by name, in the order array */
} sg_json_node_t;

/** A reusable parser and tree: one per thread, reused for every record. */
typedef struct sg_json_doc sg_json_doc_t;

/**
 * Creates an empty document in *@p out. Returns SG_OK or SG_ERR_NOMEM.
 * Free it with sg_json_doc_destroy().
 */
sg_err_t sg_json_doc_new(sg_json_doc_t **out);

/** Frees @p doc and every tree it holds. NULL is a no-op. */
void sg_json_doc_destroy(sg_json_doc_t *doc);

/**
 * Parses @p len bytes at @p text into @p doc, replacing its previous tree.
 * The tree borrows from @p text (strings without escapes, numbers): keep
 * the text alive and unchanged while the tree is used. In steady state this
 * allocates nothing (yajl allocates from the document's arena; the tree,
 * member order and decoded strings reuse the document's buffers).
 *
 * @returns SG_OK; SG_ERR_INVALID (not accepted JSON, see the file comment;
 *          @p errstr gets "error at byte N of M: why"); SG_ERR_NOMEM.
 */
sg_err_t sg_json_parse(sg_json_doc_t *doc, const char *text, size_t len,
                       char *errstr, size_t errstr_size);

/** The root value of the last successful parse, or NULL. */
const sg_json_node_t *sg_json_root(const sg_json_doc_t *doc);

/** Member @p name (@p name_len bytes) of object @p obj, or NULL (absent, or
 *  @p obj is not an object). */
const sg_json_node_t *sg_json_member(const sg_json_doc_t *doc,
                                     const sg_json_node_t *obj,
                                     const char *name, size_t name_len);

/**
 * Resolves RFC 6901 JSON Pointer @p pointer (NUL-terminated) from @p from
 * ("" is @p from itself). Returns the node, or NULL when absent or when the
 * pointer is invalid (no leading '/', '~' not followed by '0' or '1', an
 * array index with a leading zero, "-").
 */
const sg_json_node_t *sg_json_pointer_get(const sg_json_doc_t *doc,
                                          const sg_json_node_t *from,
                                          const char *pointer);

/** "null", "boolean", "number", "string", "array" or "object". */
const char *sg_json_type_name(sg_json_type_t type);

/**
 * Receives canonical text in pieces, in order. Returns SG_OK to go on, or
 * an error that stops the writer and is returned by it.
 */
typedef sg_err_t (*sg_json_write_fn)(void *opaque, const void *bytes,
                                     size_t len);

/**
 * The version of the canonical form below. Bumped whenever the form changes
 * (a store's digests then no longer match new ones): it is part of each
 * partition's key fingerprint (engine_keyfp.c), so such a change is
 * refused like a changed digest setting. 1: cJSON doubles (before yajl);
 * 2: number text kept, members sorted by UTF-8 bytes, RFC 8785 string
 * escapes.
 */
#define SG_JSON_CANONICAL_FORM 2

/**
 * Writes the canonical form of @p node (see the file comment) to @p fn,
 * without allocating (pieces of up to 1 KB from a stack buffer). Returns
 * SG_OK or the first error @p fn returned.
 */
sg_err_t sg_json_canonical_write(const sg_json_doc_t *doc,
                                 const sg_json_node_t *node,
                                 sg_json_write_fn fn, void *opaque);

/**
 * Parses @p len bytes of JSON at @p text and returns, in *@p out (malloc'd,
 * NUL-terminated; caller frees) and *@p out_len, the canonical form of the
 * value at JSON Pointer @p pointer ("" = the whole text). For tests,
 * fuzzers and tools; the envelope streams sg_json_canonical_write() into
 * its digest instead.
 *
 * @returns SG_OK; SG_ERR_INVALID (not accepted JSON, or nothing at the
 *          pointer; @p errstr says which); SG_ERR_NOMEM.
 */
sg_err_t sg_json_canonicalize(const char *text, size_t len, const char *pointer,
                              char **out, size_t *out_len, char *errstr,
                              size_t errstr_size);

/**
 * Judges the text of a JSON number as a version (semantics §2): a
 * non-negative integer that a double holds exactly — digits only (no sign,
 * fraction or exponent), at most 2^53. Larger versions are sent as strings.
 * Returns SG_OK (*@p out set) or SG_ERR_INVALID (*@p out untouched).
 */
sg_err_t sg_json_number_version(const char *text, size_t len, uint64_t *out);

/**
 * Reads the version at JSON Pointer @p pointer of @p len bytes of JSON at
 * @p json: a JSON number by sg_json_number_version(), a JSON string by
 * sg_version_parse() (decimal, up to 2^64 - 1). For JSON read elsewhere
 * with a parser that does not keep number text (snapshot replies).
 * Returns SG_OK, SG_ERR_INVALID (not JSON, absent, another type, or not a
 * version), SG_ERR_NOMEM.
 */
sg_err_t sg_json_version_get(const char *json, size_t len, const char *pointer,
                             uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_JSON_H */
