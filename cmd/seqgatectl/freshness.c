/*
 * freshness.c — how current a store's answer is (docs/troubleshooting.md
 * "Is the answer current?"): whether a seqgate process writes the store
 * (sg_store_writer: the holder of the data_dir's lock) and, per partition,
 * when its state was last written (the meta's clock: the processing time
 * of the last batch that changed it, or of its assignment or restore).
 *
 * The store keeps no mark of which partitions its instance owns now: a
 * partition revoked in a rebalance keeps its last state, written no more,
 * like an idle one. So the store cannot tell a moved partition from an
 * idle one; it says when it last wrote each, and an answer that rests on
 * a partition not written for longer than --max-age, or on a store that
 * no process writes, is not current: "unknown" then means "not in this
 * store", never "never seen".
 */
#include "cli.h"

#include "query.h"
#include "seqgate.h"
#include "store.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct fresh_walk {
        const char *topic;
        int64_t partition; /* -1: every partition of the topic */
        int64_t now_ms, max_age_ms;
        cJSON *parts;
        size_t cnt, old_cnt;
        int64_t oldest_ms; /* the least recent last write, 0 none */
        char old[256];     /* the partitions not written within max_age */
        char group[256];
} fresh_walk_t;

static int fresh_visit(void *opaque, const char *topic, int32_t partition,
                       const sg_meta_rec_t *m) {
        fresh_walk_t *w = opaque;
        if (strcmp(topic, w->topic) != 0 ||
            (w->partition >= 0 && partition != w->partition))
                return 0;
        int64_t age = m->clock_ms > 0 && w->now_ms > m->clock_ms
                              ? w->now_ms - m->clock_ms
                              : 0;
        bool old = m->clock_ms <= 0 || age > w->max_age_ms;
        cJSON *p = cJSON_CreateObject();
        j_i64(p, "partition", partition);
        sg_json_add_time(p, "last_write", m->clock_ms, true);
        j_i64(p, "last_write_age_ms", age);
        if (m->input_offset < 0)
                cJSON_AddNullToObject(p, "input_offset");
        else
                j_i64(p, "input_offset", m->input_offset);
        cJSON_AddBoolToObject(p, "current", !old);
        cJSON_AddItemToArray(w->parts, p);
        w->cnt++;
        if (!w->group[0])
                snprintf(w->group, sizeof(w->group), "%s", m->group);
        if (!w->oldest_ms || m->clock_ms < w->oldest_ms)
                w->oldest_ms = m->clock_ms;
        if (old) {
                size_t l = strlen(w->old);
                if (w->old_cnt < 8)
                        snprintf(w->old + l, sizeof(w->old) - l, "%s%" PRId32,
                                 l ? ", " : "", partition);
                else if (w->old_cnt == 8)
                        snprintf(w->old + l, sizeof(w->old) - l, ", ...");
                w->old_cnt++;
        }
        return 0;
}

/* An age as "3 h 12 min", "4 min 5 s" or "1.5 s". */
static const char *age_text(int64_t ms, char *b, size_t size) {
        if (ms < 60000)
                snprintf(b, size, "%.1f s", (double)ms / 1000.0);
        else if (ms < 3600000)
                snprintf(b, size, "%" PRId64 " min %" PRId64 " s", ms / 60000,
                         ms / 1000 % 60);
        else if (ms < 86400000LL * 2)
                snprintf(b, size, "%" PRId64 " h %" PRId64 " min", ms / 3600000,
                         ms / 60000 % 60);
        else
                snprintf(b, size, "%" PRId64 " days %" PRId64 " h",
                         ms / 86400000, ms / 3600000 % 24);
        return b;
}

bool store_freshness(const char *dir, sg_txn_t *txn, const char *topic,
                     int64_t partition, int64_t now_ms, int64_t max_age_ms,
                     cJSON *o) {
        cJSON *s = cJSON_AddObjectToObject(o, "store");
        cJSON_AddStringToObject(s, "data_dir", dir);
        long pid = 0;
        sg_store_writer_t wr = sg_store_writer(dir, &pid);
        cJSON_AddStringToObject(s, "writer",
                                wr == SG_STORE_WRITER_RUNNING ? "running"
                                : wr == SG_STORE_WRITER_NONE  ? "not_running"
                                                              : "unknown");
        if (wr == SG_STORE_WRITER_RUNNING && pid > 0)
                j_i64(s, "writer_pid", pid);
        else
                cJSON_AddNullToObject(s, "writer_pid");
        j_i64(s, "max_age_ms", max_age_ms);
        fresh_walk_t w = {.topic = topic,
                          .partition = partition,
                          .now_ms = now_ms,
                          .max_age_ms = max_age_ms,
                          .parts = cJSON_AddArrayToObject(s, "partitions")};
        if (sg_meta_foreach(txn, fresh_visit, &w) != SG_OK) {
                /* the answer's own read reports a store that fails */
                cJSON_AddBoolToObject(s, "current", false);
                cJSON_AddStringToObject(s, "warning",
                                        "the partitions' meta records could "
                                        "not be read: how current the "
                                        "answer is is not known");
                warnf("the partitions' meta records of %s could not be read: "
                      "how current the answer is is not known",
                      dir);
                return false;
        }
        char warn[1024] = "", a[48], a2[48], t[48], where[300];
        if (partition >= 0)
                snprintf(where, sizeof(where), "%s [%" PRId64 "]", topic,
                         partition);
        else
                snprintf(where, sizeof(where), "topic %s", topic);
        char ask[400];
        snprintf(ask, sizeof(ask),
                 "ask the instance that owns the partition now "
                 "(kafka-consumer-groups.sh --describe --group %s shows "
                 "which)",
                 w.group[0] ? w.group : "GROUP");
        if (w.cnt == 0) {
                snprintf(warn, sizeof(warn),
                         "the store in %s holds no partition of %s: it "
                         "answers nothing about its events; %s",
                         dir, where, ask);
        } else if (wr == SG_STORE_WRITER_NONE || w.old_cnt) {
                /* the oldest last write, as a time and an age */
                const char *when =
                        w.oldest_ms > 0 ? sg_iso_time(w.oldest_ms, t, sizeof(t))
                                        : "never";
                age_text(now_ms > w.oldest_ms ? now_ms - w.oldest_ms : 0, a2,
                         sizeof(a2));
                if (wr == SG_STORE_WRITER_NONE)
                        snprintf(warn, sizeof(warn),
                                 "the store in %s is not being written: no "
                                 "process holds %s/seqgate.lock (seqgate is "
                                 "not running on this data_dir); the answer "
                                 "is as of the last write of %s, %s (%s "
                                 "ago): an event that arrived since is not "
                                 "in it; %s, or start seqgate here",
                                 dir, dir, where, when, a2, ask);
                else
                        snprintf(warn, sizeof(warn),
                                 "partition%s %s of %s not written for "
                                 "longer than --max-age %s (the oldest last "
                                 "write %s, %s ago): if it moved to another "
                                 "instance in a rebalance, events since are "
                                 "not in this store, and the store cannot "
                                 "tell a moved partition from an idle one; "
                                 "%s",
                                 w.old_cnt > 1 ? "s" : "", w.old, topic,
                                 age_text(max_age_ms, a, sizeof(a)), when, a2,
                                 ask);
        }
        bool current = !warn[0];
        cJSON_AddBoolToObject(s, "current", current);
        if (current)
                cJSON_AddNullToObject(s, "warning");
        else
                cJSON_AddStringToObject(s, "warning", warn);
        /* once per command: inspect shows many partitions of one store */
        static char said[sizeof(warn)];
        if (!current && strcmp(said, warn) != 0) {
                warnf("%s", warn);
                snprintf(said, sizeof(said), "%s", warn);
        }
        return current;
}

int max_age_arg(const char *arg, int64_t *max_age_ms) {
        if (!parse_i64(arg, 0, INT64_MAX, max_age_ms))
                return usage_error("--max-age-ms: '%s' is not a number of ms",
                                   arg);
        return 0;
}
