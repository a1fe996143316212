/*
 * dlqread.h — reading a DLQ topic as seqgatectl's DLQ tools do (replay,
 * dlq summary, dlq tail): an unjoined consumer (kafka_conf: read_committed,
 * no group, nothing committed), a plan of every partition (or one) with
 * the offsets [start, end) to read — end fixed when the plan is made, so
 * records dead-lettered while a tool runs are not read, unless it follows
 * — and a read loop that hands each planned record to a callback.
 *
 * Single-threaded (cli.h). Functions return 0 or an exit status
 * (EXIT_USAGE, EXIT_RUNTIME) after printing why.
 */
#ifndef SEQGATECTL_DLQREAD_H
#define SEQGATECTL_DLQREAD_H

#include "config.h"

#include <librdkafka/rdkafka.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to read of the DLQ topic. -1 in a field: not set. */
typedef struct dlq_range {
        int64_t partition;  /* only this partition */
        int64_t from;       /* first offset (else the log start) */
        int64_t until;      /* end offset, exclusive (else the end now) */
        int64_t from_ms;    /* first record at or after this timestamp */
        int64_t until_ms;   /* stop before the first record at or after */
        int64_t last_n;     /* start at most this many records before each
                              partition's end */
        bool follow;        /* after the end, keep reading new records */
        int64_t timeout_ms; /* bounds each broker request (metadata,
                               offsets); 0: 10000 */
} dlq_range_t;

#define DLQ_RANGE_ALL                                                          \
        ((dlq_range_t){.partition = -1,                                        \
                       .from = -1,                                             \
                       .until = -1,                                            \
                       .from_ms = -1,                                          \
                       .until_ms = -1,                                         \
                       .last_n = -1})

typedef struct dlq_part {
        int32_t partition;
        int64_t start, end; /* read [start, end); end INT64_MAX: follow */
        int64_t next;       /* the offset after the last record read */
        bool done;
} dlq_part_t;

typedef struct dlq_reader {
        const char *topic;
        rd_kafka_t *cons;
        rd_kafka_topic_t *rkt;
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_partition_list_t *assign;
        dlq_part_t *parts;
        size_t part_cnt;
        size_t open_cnt; /* planned partitions not yet read to their end */
        bool follow;
} dlq_reader_t;

/* Opens the consumer, makes the plan of @p rg for DLQ topic @p topic
 * (borrowed) and assigns what there is to read. *r must be zeroed; call
 * dlq_reader_close() whatever this returns. Returns 0, EXIT_USAGE (client
 * configuration, no such partition) or EXIT_RUNTIME (metadata, offsets). */
int dlq_reader_open(dlq_reader_t *r, const sg_config_t *conf, const char *topic,
                    const dlq_range_t *rg);

/* Called with each planned record, in offset order per partition (m
 * stays the reader's). Set *stop to end the read. Returns 0 or an exit
 * status, which ends the read with it. */
typedef int dlq_record_fn(void *opaque, const rd_kafka_message_t *m,
                          bool *stop);

/* Reads the planned partitions to their ends (following: until *@p stopp
 * is set, e.g. by a signal handler; may be NULL), calling @p between
 * (may be NULL) once per poll, e.g. to serve a producer's delivery
 * reports. Returns 0, the callback's status, or EXIT_RUNTIME after a read
 * error, @p timeout_ms without progress (not when following) or a fatal
 * librdkafka error. */
int dlq_reader_run(dlq_reader_t *r, int64_t timeout_ms,
                   void (*between)(void *opaque), dlq_record_fn *fn,
                   void *opaque, volatile sig_atomic_t *stopp);

/* After a dlq_reader_run() to the planned ends: follows every partition
 * of the plan from where it stopped (the next dlq_reader_run() reads new
 * records until stopped). Returns 0 or EXIT_RUNTIME (assign). */
int dlq_reader_follow(dlq_reader_t *r);

/* Frees the plan and closes the consumer. */
void dlq_reader_close(dlq_reader_t *r);

/* Header @p name of @p h (the last one) as a NUL-terminated string in
 * @p buf; false when absent, null or longer than size - 1. */
bool dlq_hdr_str(rd_kafka_headers_t *h, const char *name, char *buf,
                 size_t size);

#endif
