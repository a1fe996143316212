/*
 * snapsrc.c — the snapshot sources by their config value (snapsrc.h).
 */
#include "snapsrc.h"

#include <string.h>

/* One line per source: its sg_snapshot_source_t value and its table. */
static const sg_snapsrc_t *const by_source[] = {
        [SG_SNAP_KAFKA] = &sg_snapsrc_kafka,
        [SG_SNAP_HTTP] = &sg_snapsrc_http,
};

#define SOURCE_CNT (sizeof(by_source) / sizeof(by_source[0]))

const sg_snapsrc_t *sg_snapsrc_for(sg_snapshot_source_t source) {
        if ((size_t)source >= SOURCE_CNT)
                return NULL;
        return by_source[source]; /* SG_SNAP_NONE: NULL */
}

const sg_snapsrc_t *sg_snapsrc_of_pseudo_topic(const char *topic) {
        for (size_t i = 0; i < SOURCE_CNT; i++) {
                const sg_snapsrc_t *src = by_source[i];
                if (src && src->pseudo_topic &&
                    strcmp(src->pseudo_topic, topic) == 0)
                        return src;
        }
        return NULL;
}
