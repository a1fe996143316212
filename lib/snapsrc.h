/*
 * snapsrc.h — snapshot sources (semantics §4 step 1): how a snapshot
 * request travels to an aggregate's authority and how its reply is read.
 * The refetch (engine_refetch.c) keeps the requests, their attempts,
 * backoff and timeouts, and judges replies by version; everything that
 * differs between one source and another is behind sg_snapsrc_t, as the
 * Kafka loop is behind sg_processor_t.
 *
 * Implementations: snapsrc_kafka.c (request and reply topics) and
 * snapsrc_http.c (HTTP GET, replies on SG_SNAPSHOT_HTTP_TOPIC), whose
 * transfers the Kafka loop runs (snapsrc_http_fetch.h: libcurl, the one
 * part of the family that does I/O).
 * Adding a source: one file with its sg_snapsrc_t, its line in
 * sg_snapsrc_for() (snapsrc.c) and meson.build, and its value of
 * sg_snapshot_source_t with the parse branch in config.c.
 *
 * Memory: what a source builds for an effect is allocated in the batch
 * arena passed to it (engine_int.h), freed at batch end.
 * Thread-safety: the tables are constant; functions are pure apart from
 * the arena they are given.
 */
#ifndef SEQGATE_SNAPSRC_H
#define SEQGATE_SNAPSRC_H

#include "config.h"
#include "engine_int.h"
#include "processor.h"
#include "store.h"

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** One attempt of a snapshot request, as the refetch sends it. */
typedef struct sg_snapsrc_req {
        const sg_snapshot_config_t *sc;
        const char *request_id;    /**< in the batch arena */
        const sg_snapreq_rec_t *r; /**< aggregate, versions, attempt */
        const char *topic;         /**< the input partition it is for */
        int32_t partition;
        const char *instance; /**< instance_id, "" when none */
} sg_snapsrc_req_t;

/** What a source reads from a reply record before the refetch judges it. */
typedef struct sg_snapsrc_reply {
        const char *request_id; /**< NULL when the reply names none */
        size_t request_id_len;
        bool failed;     /**< the transport says the attempt
                                          failed (e.g. an HTTP status) */
        const char *why; /**< why it failed (for the log; may be
                                          NULL), when failed */
} sg_snapsrc_reply_t;

/** A snapshot source. */
typedef struct sg_snapsrc {
        const char *name; /**< its config value ("kafka") */
        /**
         * Fills @p ef (zeroed, already in the batch's list) with the
         * effect that sends request @p rq: kind, topic, partition, key,
         * value, headers or HTTP fields. Allocates in @p arena.
         * @returns SG_OK or SG_ERR_NOMEM.
         */
        sg_err_t (*request)(const sg_snapsrc_req_t *rq, arena_t *arena,
                            sg_effect_t *ef);
        /**
         * Whether records of @p topic are replies to the requests of a
         * topic configured with @p sc, on a Kafka topic of their own that
         * seqgate consumes (its partitions get no store). NULL: none.
         */
        bool (*is_reply_topic)(const sg_snapshot_config_t *sc,
                               const char *topic);
        /**
         * The pseudo topic the loop feeds this source's replies on
         * (processor.h), whichever topics use the source; NULL: none.
         */
        const char *pseudo_topic;
        /**
         * Reads reply record @p rec (@p body: its value parsed as JSON, or
         * NULL) into @p out. Allocates @p out->why in @p arena.
         */
        void (*reply_read)(const sg_record_t *rec, const cJSON *body,
                           arena_t *arena, sg_snapsrc_reply_t *out);
        /**
         * The __seqgate.source of the snapshot record made from reply
         * @p rec (read into @p rp): a NUL-terminated string, in @p buf
         * (@p size bytes) or borrowed from @p rp.
         */
        const char *(*provenance)(const sg_record_t *rec,
                                  const sg_snapsrc_reply_t *rp, char *buf,
                                  size_t size);
} sg_snapsrc_t;

extern const sg_snapsrc_t sg_snapsrc_kafka;
extern const sg_snapsrc_t sg_snapsrc_http;

/** The implementation of @p source; NULL for SG_SNAP_NONE (or unknown). */
const sg_snapsrc_t *sg_snapsrc_for(sg_snapshot_source_t source);

/** The source whose replies come on pseudo topic @p topic, or NULL. */
const sg_snapsrc_t *sg_snapsrc_of_pseudo_topic(const char *topic);

#endif /* SEQGATE_SNAPSRC_H */
