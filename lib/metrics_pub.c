/*
 * metrics_pub.c — the publication of the loop's numbers to the HTTP
 * thread, and the /metrics, /healthz and /readyz handlers (metrics_pub.h).
 */
#include "metrics_pub.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sg_pub {
        pthread_mutex_t lock;
        sg_metrics_snap_t snap; /**< the last published; guarded by lock */
        int64_t stall_ms;
        const char *version;
};

sg_err_t sg_metrics_snap_reserve(sg_metrics_snap_t *snap, size_t n) {
        if (n <= snap->part_cap)
                return SG_OK;
        size_t cap = snap->part_cap ? snap->part_cap : 8;
        while (cap < n)
                cap *= 2;
        sg_part_stats_t *p = realloc(snap->parts, cap * sizeof(*p));
        if (!p)
                return SG_ERR_NOMEM;
        snap->parts = p;
        snap->part_cap = cap;
        return SG_OK;
}

/** Makes room for @p n topics in @p snap->topics (keeps what is there). */
static sg_err_t snap_topics_reserve(sg_metrics_snap_t *snap, size_t n) {
        if (n <= snap->topic_cap)
                return SG_OK;
        size_t cap = snap->topic_cap ? snap->topic_cap : 4;
        while (cap < n)
                cap *= 2;
        sg_topic_stats_t *t = realloc(snap->topics, cap * sizeof(*t));
        if (!t)
                return SG_ERR_NOMEM;
        snap->topics = t;
        snap->topic_cap = cap;
        return SG_OK;
}

sg_err_t sg_metrics_snap_topic_add(sg_metrics_snap_t *snap, const char *topic,
                                   const sg_metrics_t *m) {
        if (snap_topics_reserve(snap, snap->topic_cnt + 1))
                return SG_ERR_NOMEM;
        sg_topic_stats_t *t = &snap->topics[snap->topic_cnt++];
        snprintf(t->topic, sizeof(t->topic), "%s", topic);
        t->m = *m;
        return SG_OK;
}

void sg_metrics_snap_free(sg_metrics_snap_t *snap) {
        free(snap->parts);
        snap->parts = NULL;
        snap->part_cnt = snap->part_cap = 0;
        free(snap->topics);
        snap->topics = NULL;
        snap->topic_cnt = snap->topic_cap = 0;
}

sg_err_t sg_pub_new(int64_t stall_ms, sg_pub_t **pubp) {
        sg_pub_t *p = calloc(1, sizeof(*p));
        if (!p)
                return SG_ERR_NOMEM;
        if (pthread_mutex_init(&p->lock, NULL)) {
                free(p);
                return SG_ERR_NOMEM;
        }
        p->stall_ms = stall_ms;
        *pubp = p;
        return SG_OK;
}

void sg_pub_destroy(sg_pub_t *pub) {
        if (!pub)
                return;
        sg_metrics_snap_free(&pub->snap);
        pthread_mutex_destroy(&pub->lock);
        free(pub);
}

void sg_pub_publish(sg_pub_t *pub, const sg_metrics_snap_t *snap) {
        pthread_mutex_lock(&pub->lock);
        sg_part_stats_t *parts = pub->snap.parts;
        size_t cap = pub->snap.part_cap;
        sg_topic_stats_t *topics = pub->snap.topics;
        size_t tcap = pub->snap.topic_cap;
        pub->snap = *snap;
        pub->snap.parts = parts;
        pub->snap.part_cap = cap;
        pub->snap.topics = topics;
        pub->snap.topic_cap = tcap;
        if (sg_metrics_snap_reserve(&pub->snap, snap->part_cnt) == SG_OK) {
                if (snap->part_cnt)
                        memcpy(pub->snap.parts, snap->parts,
                               snap->part_cnt * sizeof(*snap->parts));
        } else {
                pub->snap.part_cnt = 0; /* out of memory: no partitions */
        }
        if (snap_topics_reserve(&pub->snap, snap->topic_cnt) == SG_OK) {
                if (snap->topic_cnt)
                        memcpy(pub->snap.topics, snap->topics,
                               snap->topic_cnt * sizeof(*snap->topics));
        } else {
                pub->snap.topic_cnt = 0; /* out of memory: no topics */
        }
        pub->snap.published_ms = sg_clock_mono_ms();
        pthread_mutex_unlock(&pub->lock);
}

/* ---- /healthz, /readyz --------------------------------------------------- */

static sg_err_t json_out(cJSON *o, char **bodyp) {
        char *t = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        if (!t)
                return SG_ERR_NOMEM;
        /* a newline for curl; cJSON's allocator is malloc */
        size_t n = strlen(t);
        char *b = realloc(t, n + 2);
        if (!b) {
                free(t);
                return SG_ERR_NOMEM;
        }
        b[n] = '\n';
        b[n + 1] = '\0';
        *bodyp = b;
        return SG_OK;
}

sg_err_t sg_pub_health(sg_pub_t *pub, int64_t now_ms, int *statusp,
                       char **bodyp) {
        cJSON *o = cJSON_CreateObject();
        char why[640] = "";
        pthread_mutex_lock(&pub->lock);
        const sg_metrics_snap_t *s = &pub->snap;
        if (!s->published_ms)
                snprintf(why, sizeof(why), "not started");
        else if (s->fatal)
                snprintf(why, sizeof(why), "fatal: %s", s->fatal_str);
        else if (s->stopped)
                snprintf(why, sizeof(why), "stopped");
        else if (now_ms - s->published_ms > pub->stall_ms)
                snprintf(why, sizeof(why),
                         "the loop made no progress for %lld s",
                         (long long)((now_ms - s->published_ms) / 1000));
        pthread_mutex_unlock(&pub->lock);
        *statusp = why[0] ? 503 : 200;
        cJSON_AddStringToObject(o, "status", why[0] ? "unhealthy" : "ok");
        if (why[0])
                cJSON_AddStringToObject(o, "reason", why);
        return json_out(o, bodyp);
}

void sg_assign_hint(char *buf, size_t size, const char *group,
                    int64_t session_ms, int64_t waited_ms) {
        char session[64] = "";
        if (session_ms >= 0)
                snprintf(session, sizeof(session),
                         " (session.timeout.ms %" PRId64 ")", session_ms);
        snprintf(buf, size,
                 "waited %" PRId64 " s for consumer group \"%s\" to assign "
                 "partitions: after a crash or kill -9 of the previous "
                 "instance the group waits for the previous member's session "
                 "to expire%s, or for a rebalance to finish; see the group's "
                 "members with: kafka-consumer-groups.sh --bootstrap-server "
                 "<bootstrap.servers> --describe --group %s --members",
                 waited_ms / 1000, group, session, group);
}

bool sg_metrics_snap_ready(const sg_metrics_snap_t *s) {
        if (!s->assigned_once || s->stopped ||
            s->loop.batches_aborted_in_a_row >= SG_READY_MAX_ABORTS ||
            s->restore_failing)
                return false;
        for (size_t i = 0; i < s->part_cnt; i++)
                if (!s->parts[i].standby && s->parts[i].restoring)
                        return false;
        return true;
}

sg_err_t sg_pub_ready(sg_pub_t *pub, int *statusp, char **bodyp) {
        cJSON *o = cJSON_CreateObject();
        cJSON *arr = cJSON_CreateArray();
        size_t assigned;
        bool once;
        uint64_t aborts;
        char why[640] = "";
        pthread_mutex_lock(&pub->lock);
        const sg_metrics_snap_t *s = &pub->snap;
        once = s->assigned_once && !s->stopped;
        assigned = 0;
        /* the standby partitions and their lag (semantics §6 "Standby
         * replicas"): shown, never a reason to be not ready */
        cJSON *sby = NULL;
        for (size_t i = 0; i < s->part_cnt; i++) {
                const sg_part_stats_t *p = &s->parts[i];
                if (!p->standby) {
                        assigned++;
                        continue;
                }
                if (!sby)
                        sby = cJSON_CreateArray();
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "topic", p->topic);
                cJSON_AddNumberToObject(e, "partition", p->partition);
                if (p->standby_lag >= 0)
                        cJSON_AddNumberToObject(e, "standby_lag",
                                                (double)p->standby_lag);
                cJSON_AddItemToArray(sby, e);
        }
        aborts = once ? s->loop.batches_aborted_in_a_row : 0;
        if (aborts >= SG_READY_MAX_ABORTS)
                snprintf(why, sizeof(why),
                         "batches aborted: %" PRIu64 " in a row, the last: %s",
                         aborts, s->abort_str);
        else if (once && s->restore_failing)
                snprintf(why, sizeof(why), "restore failing: %s",
                         s->restore_str);
        for (size_t i = 0; once && i < s->part_cnt; i++) {
                const sg_part_stats_t *p = &s->parts[i];
                if (p->standby || !p->restoring)
                        continue;
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "topic", p->topic);
                cJSON_AddNumberToObject(e, "partition", p->partition);
                cJSON_AddStringToObject(e, "state", "restoring");
                cJSON_AddNumberToObject(e, "restore_records_read",
                                        (double)p->restore_records);
                cJSON_AddNumberToObject(e, "restore_records_target",
                                        (double)p->restore_target);
                cJSON_AddItemToArray(arr, e);
        }
        bool ready = sg_metrics_snap_ready(s);
        int64_t wait_since = s->stopped ? 0 : s->assign_wait_ms;
        int64_t session_ms = s->session_timeout_ms;
        char group[sizeof(s->group_id)];
        snprintf(group, sizeof(group), "%s", s->group_id);
        pthread_mutex_unlock(&pub->lock);
        *statusp = ready ? 200 : 503;
        cJSON_AddStringToObject(o, "status", ready ? "ready" : "not_ready");
        if (ready) {
                cJSON_AddNumberToObject(o, "partitions", (double)assigned);
                cJSON_Delete(arr);
        } else if (!once) {
                cJSON_AddStringToObject(o, "reason", "no partitions assigned");
                if (wait_since > 0) {
                        int64_t waited = sg_clock_mono_ms() - wait_since;
                        char hint[768];
                        sg_assign_hint(hint, sizeof(hint), group, session_ms,
                                       waited);
                        cJSON_AddNumberToObject(o, "waiting_ms",
                                                (double)waited);
                        cJSON_AddStringToObject(o, "group_id", group);
                        if (session_ms >= 0)
                                cJSON_AddNumberToObject(o, "session_timeout_ms",
                                                        (double)session_ms);
                        cJSON_AddStringToObject(o, "hint", hint);
                }
                cJSON_Delete(arr);
        } else {
                if (why[0])
                        cJSON_AddStringToObject(o, "reason", why);
                if (aborts >= SG_READY_MAX_ABORTS)
                        cJSON_AddNumberToObject(o, "batches_aborted_in_a_row",
                                                (double)aborts);
                if (cJSON_GetArraySize(arr) > 0)
                        cJSON_AddItemToObject(o, "partitions", arr);
                else
                        cJSON_Delete(arr);
        }
        if (sby)
                cJSON_AddItemToObject(o, "standbys", sby);
        return json_out(o, bodyp);
}

/* ---- the routes ---------------------------------------------------------- */

static void on_metrics(void *opaque, const sg_http_request_t *req,
                       sg_http_response_t *resp) {
        sg_pub_t *pub = opaque;
        (void)req;
        pthread_mutex_lock(&pub->lock);
        sg_err_t err = sg_metrics_prom(&pub->snap, pub->version, &resp->body,
                                       &resp->body_len);
        pthread_mutex_unlock(&pub->lock);
        if (err)
                resp->body = NULL;
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

static void on_health(void *opaque, const sg_http_request_t *req,
                      sg_http_response_t *resp) {
        (void)req;
        if (sg_pub_health(opaque, sg_clock_mono_ms(), &resp->status,
                          &resp->body) == SG_OK)
                resp->body_len = strlen(resp->body);
        resp->content_type = "application/json";
}

static void on_ready(void *opaque, const sg_http_request_t *req,
                     sg_http_response_t *resp) {
        (void)req;
        if (sg_pub_ready(opaque, &resp->status, &resp->body) == SG_OK)
                resp->body_len = strlen(resp->body);
        resp->content_type = "application/json";
}

sg_err_t sg_pub_routes_add(sg_pub_t *pub, sg_http_t *srv, const char *version,
                           char *errstr, size_t errstr_size) {
        sg_err_t err;
        pub->version = version;
        if ((err = sg_http_route_add(srv, "/metrics", on_metrics, pub, errstr,
                                     errstr_size)) ||
            (err = sg_http_route_add(srv, "/healthz", on_health, pub, errstr,
                                     errstr_size)))
                return err;
        return sg_http_route_add(srv, "/readyz", on_ready, pub, errstr,
                                 errstr_size);
}
