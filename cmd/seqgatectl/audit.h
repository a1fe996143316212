/*
 * audit.h — seqgatectl audit: what a topic's records would have met in
 * seqgate (duplicates, idempotency conflicts, stale versions, gaps and
 * disorder), measured by running them through the daemon's engine
 * (engine.h) over a temporary store.
 *
 *   audit.c         the subcommand: options, the group-less reader that
 *                   reads every partition of the topic between --from and
 *                   --to, in record timestamp order across partitions.
 *   audit_drive.c   drives the engine with those records as the Kafka loop
 *                   does, and observes its effects (see its header).
 *   audit_report.c  the report: terminal text, --json, --html.
 *
 * Single-threaded, as all of seqgatectl.
 */
#ifndef SEQGATECTL_AUDIT_H
#define SEQGATECTL_AUDIT_H

#include "config.h"
#include "drive.h"
#include "engine.h"
#include "metrics.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing array of samples (milliseconds or versions), capped. */
typedef struct au_samples {
        int64_t *v;
        size_t cnt, cap;
        bool cap_hit; /* a sample was not kept: the array reached AU_MAX_SAMPLES */
} au_samples_t;

#define AU_MAX_SAMPLES ((size_t)10 * 1000 * 1000)

/* One hour of the audited span (bucketed by the engine's clock, which is
 * the batch's record timestamps). */
typedef struct au_hour {
        uint64_t records, duplicates, gaps;
} au_hour_t;

/* Partitions listed per aggregate (au_agg_t.parts). */
#define AU_AGG_PARTS 4

/* Per aggregate bookkeeping (bounded: au_drive_t.max_aggs). */
typedef struct au_agg {
        uint64_t hash;        /* first 8 bytes of SHA-256(aggregate); 0: free */
        uint64_t max_version; /* highest version that arrived */
        int64_t max_ts;       /* record timestamp of that arrival */
        uint64_t refusals;    /* DLQ records of this aggregate */
        uint64_t gaps;        /* gaps resolved (filled or timed out) */
        char *name;           /* aggregate id, at most 256 bytes kept */
        /* co-partitioning (semantics §2): the partitions its records came
         * from, in the order seen (parts[0] the first), at most
         * AU_AGG_PARTS listed (parts_more: others too), and its records
         * read from a partition other than parts[0] */
        int32_t parts[AU_AGG_PARTS];
        uint8_t part_cnt;
        bool parts_more;
        uint64_t elsewhere;
} au_agg_t;

/* Per idempotency key bookkeeping (bounded: au_drive_t.max_keys). */
typedef struct au_key {
        uint64_t hash;   /* first 8 bytes of the key's SHA-256; 0: free */
        uint64_t digest; /* first 8 bytes of the payload digest */
        int64_t first_ts;
} au_key_t;

/* A partition of the audited topic, with the offsets read. */
typedef struct au_part {
        int32_t partition;
        int64_t from, to; /* [from, to): the offsets audited */
        uint64_t records; /* records read */
        /* reader state (audit.c) */
        bool done;
        void *head;   /* rd_kafka_message_t *, the next record, or NULL */
        bool started; /* rd_kafka_consume_start() called */
} au_part_t;

typedef struct au_drive {
        /* set up by au_drive_open */
        sg_config_t *conf; /* borrowed; the topic's snapshot source is
                              turned off (refetch unavailable) */
        sg_topic_config_t *tc;
        sg_drive_t *drv;   /* the offline driver (drive.h): its temporary
                               store is removed by au_drive_close */
        sg_store_t *store; /* the driver's */
        sg_engine_t *eng;  /* the driver's */

        /* the open batch: messages kept alive until the batch ran (the
         * driver copies the records a paused partition keeps) */
        void **msgs; /* rd_kafka_message_t * */
        sg_record_t *recs;
        sg_header_t *hdrs;
        size_t msg_cnt, msg_cap, hdr_cnt, hdr_cap;
        int64_t batch_first_ts;
        int64_t clock;      /* the engine's clock: never decreases */
        sg_metrics_t last;  /* committed metrics after the previous batch */
        uint64_t pauses;    /* SG_PAUSE results (records offered again) */
        size_t left_paused; /* records still paused at the end */

        /* bookkeeping */
        au_agg_t *aggs;
        size_t agg_cnt, agg_slots, max_aggs;
        bool aggs_cap_hit;
        au_key_t *keys;
        size_t key_cnt, key_slots, max_keys;
        bool keys_cap_hit;
        uint64_t spanning; /* aggregates seen on more than one partition */

        au_samples_t reorder_versions, reorder_ms; /* late arrivals */
        au_samples_t gap_ms;                       /* filled gaps */
        au_samples_t gap_timeout_ms; /* gaps the deadline ended: lower bounds */
        au_samples_t dup_delay_ms;   /* first seen → repeat, same payload */

        int64_t first_ts, last_ts; /* record timestamps, min and max */
        uint64_t records;
        au_hour_t *hours;
        size_t hour_cnt;        /* hours[0] is the hour of first_ts */
        int64_t hour0;          /* first_ts / 3600000 */
        uint64_t hours_dropped; /* counts past AU_MAX_HOURS */

        /* at the end (au_drive_finish) */
        sg_metrics_t final;
        uint64_t store_used, store_map;
        /* the dedup records' bytes in the store: keys, and pages × page
         * size of their segments and filters (sg_store_db_stats) */
        uint64_t dedup_keys, dedup_bytes;
} au_drive_t;

#define AU_MAX_HOURS ((size_t)24 * 400)
/* Dedup records the sample's store must hold for their bytes to be
 * measured (audit_report.c sizing). */
#define AU_SIZING_MIN_KEYS 10000

/* Opens a fresh temporary store (mkdtemp under $TMPDIR or /tmp, never the
 * config's data_dir) and an engine on it for topic @p tc, with refetch
 * unavailable (tc->snapshot.source := none), and assigns @p part_cnt
 * partitions. 0 or EXIT_RUNTIME after printing why. */
int au_drive_open(au_drive_t *d, sg_config_t *conf, sg_topic_config_t *tc,
                  const au_part_t *parts, size_t part_cnt, size_t max_aggs,
                  size_t max_keys);
/* Adds one consumed message (rd_kafka_message_t *, ownership passes) to
 * the batch, running the batch first when the message does not belong in
 * it (batch.max_records reached, or its timestamp past the batch's first
 * by batch.max_ms). 0 or EXIT_RUNTIME after printing why. */
int au_drive_add(au_drive_t *d, void *msg);
/* Runs what is left, then reads the final metrics and store usage. */
int au_drive_finish(au_drive_t *d);
/* Destroys the engine and store and removes the temporary directory. */
void au_drive_close(au_drive_t *d);

/* Sorts @p s and returns the value at quantile @p q (0..1; nearest rank),
 * 0 when empty. */
int64_t au_quantile(au_samples_t *s, double q);

/* The report (audit_report.c). @p fmt: 0 text, 1 JSON; @p html_path, when
 * not NULL, also writes the HTML page there. 0 or EXIT_RUNTIME. */
int au_report(au_drive_t *d, const au_part_t *parts, size_t part_cnt, bool json,
              const char *html_path);

#endif
