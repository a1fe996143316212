/*
 * config_reload.c — what a reload may change (semantics "Reloading the
 * configuration"): the keys two loaded configurations disagree on, and the
 * live configuration brought up to a new one where every such key may
 * change while seqgate runs.
 *
 * Which keys may change is one flag per row of the key table
 * (SG_CONF_RELOAD, config_keys.c), so the rule cannot drift from the keys;
 * everything the table does not hold (the librdkafka blocks, the topic set,
 * the envelope's scope and digest, the state machine, the snapshot source,
 * the HTTP endpoint's users, tokens and excluded paths) takes a restart. A reload is all or nothing: one key that cannot change
 * refuses the whole file and the running configuration stays as it was.
 *
 * The live configuration is changed in place, field by field, so every
 * pointer into it (the engine's and the loop's, a partition's topic
 * config) stays valid; the caller does it between two batches (no effect
 * of a batch points into it then) and holds off other readers (the read
 * API) meanwhile.
 */
#include "config_int.h"
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Adds a change of @p key (copied) to @p d; @p old_v and @p new_v (taken,
 *  may be NULL) are printed into its texts. */
static sg_err_t add_change(sg_config_diff_t *d, const char *key, bool live,
                           cJSON *old_v, cJSON *new_v) {
        sg_config_change_t *c =
                realloc(d->changes, (d->cnt + 1) * sizeof(*d->changes));
        sg_err_t err = SG_ERR_NOMEM;

        if (c) {
                d->changes = c;
                c = &d->changes[d->cnt];
                memset(c, 0, sizeof(*c));
                c->live = live;
                c->key = strdup(key);
                if (old_v)
                        c->old_json = cJSON_PrintUnformatted(old_v);
                if (new_v)
                        c->new_json = cJSON_PrintUnformatted(new_v);
                if (c->key && (!old_v || c->old_json) &&
                    (!new_v || c->new_json)) {
                        d->cnt++;
                        d->refused += !live;
                        err = SG_OK;
                } else {
                        free(c->key);
                        cJSON_free(c->old_json);
                        cJSON_free(c->new_json);
                }
        }
        cJSON_Delete(old_v);
        cJSON_Delete(new_v);
        return err;
}

void sg_config_diff_clear(sg_config_diff_t *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->cnt; i++) {
                free(d->changes[i].key);
                cJSON_free(d->changes[i].old_json);
                cJSON_free(d->changes[i].new_json);
        }
        free(d->changes);
        memset(d, 0, sizeof(*d));
}

/** The key path of row @p i for topic @p topic (NULL: a root row). */
static void row_path(char *buf, size_t i, const char *topic) {
        const sg_config_key_t *k = sg_config_key(i);
        char blk[SG_PATH_SIZE];

        if (topic && !strncmp(k->block, "topics.*", 8)) {
                char tp[SG_PATH_SIZE];
                sg_cfg_path_topic(tp, topic);
                snprintf(blk, sizeof(blk), "%s%s", tp, k->block + 8);
                sg_cfg_path_key(buf, blk, k->name);
        } else {
                sg_cfg_path_key(buf, k->block, k->name);
        }
}

/** The snapshot rows that apply to source @p s. */
static bool snap_sect_applies(cfg_sect_t sect, sg_snapshot_source_t s) {
        switch (sect) {
        case SECT_SNAP_KAFKA:
                return s == SG_SNAP_KAFKA;
        case SECT_SNAP_HTTP:
                return s == SG_SNAP_HTTP;
        case SECT_SNAP_RETRY:
        case SECT_SNAP_OUTPUT:
                return s != SG_SNAP_NONE;
        default:
                return true;
        }
}

/** Compares the rows of @p topic (NULL: the root rows) of @p a and @p b. */
static sg_err_t diff_rows(const void *a, const void *b, const char *topic,
                          sg_snapshot_source_t snap, sg_config_diff_t *d) {
        char p[SG_PATH_SIZE];

        for (size_t i = 0; i < sg_cfg_row_cnt(); i++) {
                const sg_config_key_t *k = sg_config_key(i);
                bool topic_row = !strncmp(k->block, "topics.*", 8);

                if (topic_row != (topic != NULL) ||
                    (topic && !snap_sect_applies(sg_cfg_row_sect(i), snap)) ||
                    sg_cfg_row_equal(i, a, b))
                        continue;
                row_path(p, i, topic);
                /* texts are not shown: a URL may carry a key, a value may
                 * come from the environment */
                bool show = k->type != SG_CONF_STRING && k->type != SG_CONF_SRC;
                sg_err_t err =
                        add_change(d, p, (k->flags & SG_CONF_RELOAD) != 0,
                                   show ? sg_cfg_row_json(i, a) : NULL,
                                   show ? sg_cfg_row_json(i, b) : NULL);
                if (err)
                        return err;
        }
        return SG_OK;
}

/** The value librdkafka uses for @p name in @p kv (the last one). */
static const char *kv_last(const sg_kv_t *kv, size_t cnt, const char *name) {
        const char *v = NULL;

        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(kv[i].name, name))
                        v = kv[i].value;
        return v;
}

/** Every property of one librdkafka block whose value differs (names
 *  only: a value may be a secret). */
static sg_err_t diff_kv(const char *block, const sg_kv_t *a, size_t an,
                        const sg_kv_t *b, size_t bn, sg_config_diff_t *d) {
        char p[SG_PATH_SIZE];

        for (int pass = 0; pass < 2; pass++) {
                const sg_kv_t *x = pass ? b : a, *y = pass ? a : b;
                size_t xn = pass ? bn : an, yn = pass ? an : bn;
                for (size_t i = 0; i < xn; i++) {
                        const char *vx = kv_last(x, xn, x[i].name);
                        const char *vy = kv_last(y, yn, x[i].name);
                        bool first = true;
                        for (size_t j = 0; first && j < i; j++)
                                first = strcmp(x[j].name, x[i].name) != 0;
                        /* each name once; one present on both sides is
                         * judged in the first pass */
                        if (!first || (pass && vy) || (vy && !strcmp(vx, vy)))
                                continue;
                        sg_cfg_path_key(p, block, x[i].name);
                        sg_err_t err = add_change(d, p, false, NULL, NULL);
                        if (err)
                                return err;
                }
        }
        return SG_OK;
}

static bool str_eq(const char *a, const char *b) {
        return a == b || (a && b && !strcmp(a, b));
}

/** Whether @p a and @p b serve the same paths without credentials
 *  (http.auth_excluded_paths; NULL: the default list). */
static bool excluded_eq(const sg_config_t *a, const sg_config_t *b) {
        static const char *const def[] = SG_HTTP_AUTH_EXCLUDED;
        const size_t def_cnt = sizeof(def) / sizeof(def[0]) - 1;
        const char *const *pa =
                a->http_auth_excluded_paths
                        ? (const char *const *)a->http_auth_excluded_paths
                        : def;
        const char *const *pb =
                b->http_auth_excluded_paths
                        ? (const char *const *)b->http_auth_excluded_paths
                        : def;
        size_t na = a->http_auth_excluded_paths ? a->http_auth_excluded_path_cnt
                                                : def_cnt;
        size_t nb = b->http_auth_excluded_paths ? b->http_auth_excluded_path_cnt
                                                : def_cnt;
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (strcmp(pa[i], pb[i]))
                        return false;
        return true;
}

static bool src_eq(const sg_field_src_t *a, const sg_field_src_t *b) {
        return a->kind == b->kind && str_eq(a->name, b->name);
}

static bool sm_eq(const sg_state_machine_t *a, const sg_state_machine_t *b) {
        if (a->enabled != b->enabled || !str_eq(a->initial, b->initial) ||
            a->state_cnt != b->state_cnt ||
            a->transition_cnt != b->transition_cnt)
                return false;
        for (size_t i = 0; i < a->state_cnt; i++)
                if (!str_eq(a->states[i], b->states[i]))
                        return false;
        for (size_t i = 0; i < a->transition_cnt; i++) {
                const sg_transition_t *x = &a->transitions[i],
                                      *y = &b->transitions[i];
                if (!str_eq(x->type, y->type) || !str_eq(x->to, y->to) ||
                    x->from_cnt != y->from_cnt)
                        return false;
                for (size_t j = 0; j < x->from_cnt; j++)
                        if (!str_eq(x->from[j], y->from[j]))
                                return false;
        }
        return true;
}

/** The hand-parsed parts of topic @p a against @p b: each one takes a
 *  restart. */
static sg_err_t diff_topic(const sg_topic_config_t *a,
                           const sg_topic_config_t *b, sg_config_diff_t *d) {
        char tp[SG_PATH_SIZE], p[SG_PATH_SIZE];
        bool scope = a->scope_cnt == b->scope_cnt;
        sg_err_t err = SG_OK;

        for (size_t i = 0; scope && i < a->scope_cnt; i++)
                scope = src_eq(&a->scope[i], &b->scope[i]);
        sg_cfg_path_topic(tp, a->name);
        if (!scope) {
                sg_cfg_path_key(p, tp, "envelope.scope");
                err = add_change(d, p, false, NULL, NULL);
        }
        if (!err && !str_eq(a->digest_pointer, b->digest_pointer)) {
                sg_cfg_path_key(p, tp, "envelope.digest");
                err = add_change(d, p, false, NULL, NULL);
        }
        if (!err && !sm_eq(&a->sm, &b->sm)) {
                sg_cfg_path_key(p, tp, "state_machine");
                err = add_change(d, p, false, NULL, NULL);
        }
        if (!err && a->snapshot.source != b->snapshot.source) {
                static const char *const names[] = {"none", "kafka", "http"};
                sg_cfg_path_key(p, tp, "snapshot.source");
                err = add_change(d, p, false,
                                 cJSON_CreateString(names[a->snapshot.source]),
                                 cJSON_CreateString(names[b->snapshot.source]));
        }
        if (!err)
                err = diff_rows(a, b, a->name,
                                a->snapshot.source == b->snapshot.source
                                        ? a->snapshot.source
                                        : SG_SNAP_NONE,
                                d);
        return err;
}

sg_err_t sg_config_diff(const sg_config_t *a, const sg_config_t *b,
                        sg_config_diff_t *d) {
        char p[SG_PATH_SIZE];
        sg_err_t err;

        memset(d, 0, sizeof(*d));
        if ((err = diff_rows(a, b, NULL, SG_SNAP_NONE, d)) ||
            (err = diff_kv("kafka", a->kafka, a->kafka_cnt, b->kafka,
                           b->kafka_cnt, d)) ||
            (err = diff_kv("kafka_consumer", a->kafka_consumer,
                           a->kafka_consumer_cnt, b->kafka_consumer,
                           b->kafka_consumer_cnt, d)) ||
            (err = diff_kv("kafka_producer", a->kafka_producer,
                           a->kafka_producer_cnt, b->kafka_producer,
                           b->kafka_producer_cnt, d)) ||
            /* the HTTP endpoint's credentials, read when it starts (like
             * its certificate): names only, a value is a hash */
            (err = diff_kv("http.basic_auth_users", a->http_basic_auth_users,
                           a->http_basic_auth_user_cnt,
                           b->http_basic_auth_users,
                           b->http_basic_auth_user_cnt, d)) ||
            (err = diff_kv("http.bearer_tokens", a->http_bearer_tokens,
                           a->http_bearer_token_cnt, b->http_bearer_tokens,
                           b->http_bearer_token_cnt, d)) ||
            (!excluded_eq(a, b) &&
             (err = add_change(d, "http.auth_excluded_paths", false, NULL,
                               NULL))))
                goto fail;
        /* the topic set: a topic added or removed takes a restart */
        for (size_t i = 0; i < a->topic_cnt; i++) {
                const sg_topic_config_t *tb =
                        sg_config_topic(b, a->topics[i].name);
                if (tb)
                        err = diff_topic(&a->topics[i], tb, d);
                else {
                        sg_cfg_path_topic(p, a->topics[i].name);
                        err = add_change(d, p, false, NULL, NULL);
                }
                if (err)
                        goto fail;
        }
        for (size_t i = 0; i < b->topic_cnt; i++) {
                if (sg_config_topic(a, b->topics[i].name))
                        continue;
                sg_cfg_path_topic(p, b->topics[i].name);
                if ((err = add_change(d, p, false, NULL, NULL)))
                        goto fail;
        }
        return SG_OK;
fail:
        sg_config_diff_clear(d);
        return err;
}

/** Adds the texts of @p next's redaction list that @p live lacks (a new
 *  value from the environment in a key that changed). */
static sg_err_t merge_redact(sg_config_t *live, const sg_config_t *next) {
        for (size_t i = 0; i < next->redact_cnt; i++) {
                bool have = false;
                for (size_t j = 0; !have && j < live->redact_cnt; j++)
                        have = !strcmp(live->redact[j], next->redact[i]);
                if (have)
                        continue;
                char *s = strdup(next->redact[i]);
                char **r = s ? realloc(live->redact,
                                       (live->redact_cnt + 1) * sizeof(*r))
                             : NULL;
                if (!r) {
                        free(s);
                        return SG_ERR_NOMEM;
                }
                live->redact = r;
                live->redact[live->redact_cnt++] = s;
        }
        return SG_OK;
}

/* One field to set: row, where, from where, and its new text. */
typedef struct reload_set {
        size_t row;
        void *dst;
        const void *src;
        char *dup;
} reload_set_t;

sg_err_t sg_config_reload(sg_config_t *live, const sg_config_t *next,
                          sg_config_diff_t *diff, char *errstr,
                          size_t errstr_size) {
        sg_err_t err;
        reload_set_t *sets = NULL;
        size_t n = 0;

        if (errstr && errstr_size)
                errstr[0] = '\0';
        if ((err = sg_config_diff(live, next, diff))) {
                sg_errf(errstr, errstr_size, "out of memory");
                return err;
        }
        if (diff->refused > 0) {
                char list[1024] = "";
                size_t off = 0;
                for (size_t i = 0; i < diff->cnt; i++) {
                        if (diff->changes[i].live)
                                continue;
                        int w = snprintf(list + off, sizeof(list) - off, "%s%s",
                                         off ? ", " : "", diff->changes[i].key);
                        if (w < 0 || (size_t)w >= sizeof(list) - off)
                                break;
                        off += (size_t)w;
                }
                sg_errf(errstr, errstr_size,
                        "%zu key%s cannot change while seqgate runs (a "
                        "restart applies %s): %s",
                        diff->refused, diff->refused == 1 ? "" : "s",
                        diff->refused == 1 ? "it" : "them", list);
                return SG_ERR_CONFIG;
        }
        /* all or nothing: every text is copied before anything is set */
        if (diff->cnt &&
            !(sets = calloc(sg_cfg_row_cnt() * (1 + live->topic_cnt),
                            sizeof(*sets))))
                goto nomem;
        for (size_t i = 0; diff->cnt && i < sg_cfg_row_cnt(); i++) {
                const sg_config_key_t *k = sg_config_key(i);
                if (!(k->flags & SG_CONF_RELOAD))
                        continue;
                bool topic_row = !strncmp(k->block, "topics.*", 8);
                for (size_t t = 0; t < (topic_row ? live->topic_cnt : 1); t++) {
                        void *dst = live;
                        const void *src = next;
                        if (topic_row) {
                                dst = &live->topics[t];
                                src = sg_config_topic(next,
                                                      live->topics[t].name);
                                if (!snap_sect_applies(
                                            sg_cfg_row_sect(i),
                                            live->topics[t].snapshot.source))
                                        continue;
                        }
                        if (sg_cfg_row_equal(i, dst, src))
                                continue;
                        sets[n] = (reload_set_t){i, dst, src, NULL};
                        if (sg_cfg_row_dup(i, src, &sets[n++].dup))
                                goto nomem;
                }
        }
        if (merge_redact(live, next))
                goto nomem;
        for (size_t i = 0; i < n; i++)
                sg_cfg_row_set(sets[i].row, sets[i].dst, sets[i].src,
                               sets[i].dup);
        free(sets);
        return SG_OK;
nomem:
        for (size_t i = 0; i < n; i++)
                free(sets[i].dup);
        free(sets);
        sg_errf(errstr, errstr_size, "out of memory");
        return SG_ERR_NOMEM;
}

sg_log_level_t sg_config_log_level(const sg_config_t *conf) {
        int l = conf->log_level;
        return (sg_log_level_t)(SG_LOG_ERR + (l < 0 ? 0 : l > 4 ? 4 : l));
}
