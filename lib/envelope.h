/*
 * envelope.h — reading the idempotency key, aggregate, version, type and
 * digest out of a Kafka record (semantics §2).
 *
 * Formats:
 *  - CloudEvents over Kafka (CloudEvents Kafka protocol binding v1.0):
 *    *structured* mode when the `content-type` header starts with
 *    "application/cloudevents" (binding §3.1), or when there is no
 *    `ce_specversion` header and the value is a JSON object with a
 *    "specversion" member (lenient: producers that forget the header);
 *    otherwise *binary* mode (binding §3.2): attributes in `ce_<name>`
 *    headers. The record key is the `partitionkey` extension (binding §3.3).
 *    Required attributes per the CloudEvents core spec §3.1 (id, source,
 *    specversion, type) must be present and non-empty; specversion must be
 *    "1.0". The version comes from the `sequence` extension by default.
 *  - plain JSON: every field mapped to "key", "header:NAME" or a JSON Pointer
 *    (RFC 6901).
 *
 * Version text is a decimal unsigned 64-bit integer: ASCII digits only, no
 * sign, no spaces, no exponent, no overflow (semantics §2). A JSON number is
 * judged by its text, never through a double: a version only when that text
 * is a non-negative integer (no fraction, no exponent) not above 2^53, so
 * 9007199254740993, 2.0 and 3e0 are malformed; larger versions must be sent
 * as strings.
 *
 * Idempotency key = scope parts + id, each part length-prefixed (4-byte
 * big-endian length), so ("a:b","c") and ("a","b:c") never collide. The input
 * topic name is always the first scope part, so equal ids on two topics are
 * distinct keys. The store keys on SHA-256 of this encoding.
 *
 * Digest = SHA-256 (OpenSSL libcrypto) of the record value, or of the
 * canonical form (json.h, docs/configuration.md "Canonical JSON") of the
 * configured JSON Pointer subtree: every value kept exactly (number text as
 * written), whitespace dropped, object members sorted by name.
 *
 * JSON Pointers name a place in the CloudEvent, whichever content mode
 * carries it (semantics §2): in structured mode a place in the event; in
 * binary mode the record value is the event's data, so "/data" is the whole
 * value (a digest of a value that is not JSON is of its bytes) and
 * "/data/x" points into it, while "/ATTR" is the attribute ATTR (header
 * ce_ATTR; "/datacontenttype" the content-type header), which has no
 * members. For format json a pointer is into the value.
 *
 * Any invalid input yields SG_ERR_INVALID and a precise detail string; it
 * never crashes and never silently drops.
 *
 * Choices where the specs are silent (envelope.c follows them, its tests
 * pin them):
 *  - leading zeros are accepted ("007" is 7): the text is still unambiguous
 *    decimal;
 *  - a header named more than once: the last one wins (as in Kafka Connect);
 *    the `content-type` header name is matched case-insensitively, the
 *    `ce_*` names exactly; a null header value counts as malformed;
 *  - string fields (id, scope parts, aggregate, type) must be non-empty,
 *    valid UTF-8 without NUL bytes and at most max_field_bytes long (0 means
 *    the default 1024); a JSON Pointer may also select a JSON integer
 *    (text without fraction or exponent, |n| <= 2^53), taken as its text as
 *    written, "-0" as "0" (a numeric order_id is a fine aggregate id);
 *    CloudEvents attributes must be JSON strings;
 *  - a null or empty record key where the aggregate is the key is malformed;
 *  - the value is parsed as JSON only when something needs it (structured
 *    mode or its lenient probe, a JSON Pointer source, digest_pointer); in
 *    binary mode and for plain JSON topics mapped to key/header sources only
 *    a non-JSON value is accepted; a value parsed as JSON must be accepted
 *    by json.h (strict RFC 8259, UTF-8, no duplicate member names, no lone
 *    surrogate escapes, nesting <= 1000), else it is malformed;
 *  - a binary-mode event with a null value has no data: a digest_pointer
 *    "/data" makes it malformed;
 *  - detail strings are printable ASCII of at most 199 bytes (a longer one
 *    is cut and ends in "..."), quoting at most 40 characters of input, with
 *    bytes outside printable ASCII escaped as \xNN.
 *
 * Thread-safety: sg_envelope_parse() is reentrant; each sg_envelope_t is
 * owned by one thread.
 */
#ifndef SEQGATE_ENVELOPE_H
#define SEQGATE_ENVELOPE_H

#include "config.h"
#include "seqgate.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_HASH_LEN 32 /**< SHA-256 output bytes */

/**
 * A parsed envelope. The strings are owned by the envelope (NUL-terminated
 * copies), valid until sg_envelope_clear() or the next parse into it.
 * After SG_OK every configured field is set; after SG_ERR_INVALID (a
 * malformed record) the fields that did parse are set and the others are
 * empty (NULL, false), so that a malformed record can still be told by
 * its key and aggregate (semantics §3 row 1).
 */
typedef struct sg_envelope {
        bool has_key;    /**< id and key_hash parsed (the idempotency key:
                              every scope part and the id) */
        char *id;        /**< event id (CE `id`); NULL unless has_key */
        char *aggregate; /**< aggregate id; NULL when not configured */
        size_t aggregate_len;
        bool has_version;
        uint64_t version;
        bool has_epoch; /**< ordering.epoch configured (semantics §4b) */
        uint64_t epoch;
        char *type; /**< event type; NULL when not configured */
        unsigned char key_hash
                [SG_HASH_LEN]; /**< SHA-256 of the idempotency key encoding */
        bool has_digest; /**< digest parsed (a digest_pointer's subtree may
                              be missing) */
        unsigned char digest[SG_HASH_LEN]; /**< payload digest */
        /* private: */
        void *_priv;
} sg_envelope_t;

/** Initialises @p env to empty. */
void sg_envelope_init(sg_envelope_t *env);

/** Frees what @p env owns and resets it to empty. */
void sg_envelope_clear(sg_envelope_t *env);

/**
 * The idempotency key hash (sg_envelope_t.key_hash) of an event of input
 * topic @p topic whose scope parts are @p scope (@p scope_cnt strings, in
 * the topic's configured scope order; NULL when 0) and whose id is @p id:
 * what sg_envelope_parse() computes for a record carrying those fields
 * (semantics §2). For lookups by id (the result query, semantics §7).
 * Strings are borrowed, NUL-terminated. Thread-safe.
 * @returns SG_OK, SG_ERR_NOMEM.
 */
sg_err_t sg_envelope_key_hash(const char *topic, const char *const *scope,
                              size_t scope_cnt, const char *id,
                              unsigned char out[SG_HASH_LEN]);

/**
 * Parses @p rec according to @p tc into @p env (which must have been
 * initialised; previous contents are freed).
 *
 * @param tc      the input topic's configuration (borrowed).
 * @param rec     the record (borrowed).
 * @param env     output, caller-owned. On SG_ERR_INVALID it holds the
 *                fields that did parse (every field is read on its own:
 *                one invalid field does not hide the others), on any other
 *                error nothing.
 * @param errstr  on SG_ERR_INVALID receives the malformed detail of the
 *                first invalid field (in the order scope, id, aggregate,
 *                version, epoch, type, digest), e.g.
 *                "version \"1e3\" (ce_sequence header) is not a decimal
 *                unsigned 64-bit integer".
 * @returns SG_OK, SG_ERR_INVALID (malformed, verdict row 1), SG_ERR_NOMEM.
 */
sg_err_t sg_envelope_parse(const sg_topic_config_t *tc, const sg_record_t *rec,
                           sg_envelope_t *env, char *errstr,
                           size_t errstr_size);

/**
 * Parses a decimal unsigned 64-bit version from @p s of @p len bytes.
 * Returns SG_OK or SG_ERR_INVALID (empty, non-digit, sign, space, overflow).
 */
sg_err_t sg_version_parse(const char *s, size_t len, uint64_t *out);

/** True if @p s[0..len) is valid UTF-8 (RFC 3629: no overlongs, no surrogates). */
bool sg_utf8_valid(const char *s, size_t len);

/** SHA-256 of @p len bytes at @p data into @p out (SG_HASH_LEN bytes). */
void sg_sha256(const void *data, size_t len, unsigned char *out);

/**
 * SHA-256 of @p len bytes at @p data into @p out (SG_HASH_LEN bytes), as
 * sg_sha256(), through the digest context @p env keeps for its parses
 * (created on the first use): a hash per record without a context
 * allocated and freed for each (the engine's aggregate key, semantics §5).
 * The bytes may be the envelope's own fields; the fields stay as they are.
 * Not thread-safe on one @p env. Returns SG_OK, or SG_ERR_NOMEM with
 * @p out zeroed.
 */
sg_err_t sg_envelope_sha256(sg_envelope_t *env, const void *data, size_t len,
                            unsigned char *out);

#ifdef __cplusplus
}
#endif
#endif /* SEQGATE_ENVELOPE_H */
